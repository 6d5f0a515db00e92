//! A deliberately faulty Paddle custom-device plug-in for devstream's error tests.
//!
//! What `InitPlugin` does depends on a mode chosen beforehand with the exported
//! `devstream_test_plugin_faulty_select(unsigned mode)` (open the library, select, then let
//! devstream load the same path: `dlopen` returns the same image, so the mode carries over).
//! The default mode, [`MODE_REFUSE`], refuses every layout, so this library is harmless when it
//! lies in a directory that devstream scans.
//!
//! Modes that load successfully register the device type `faulty_<mode name>` (so that several
//! can be loaded in one process) with one device whose id is the mode number (so that the
//! functions, shared by every load of the image, know which mode a call is for), and run a
//! synchronous runtime over host memory, like Paddle's own `custom_cpu` plug-in: copies happen
//! inside the call, events and streams do nothing.

pub use devstream_paddle_sys as sys;

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::{c_uint, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use sys::*;

mod capture;
mod memory;
mod modes;
mod streams;

pub use capture::*;
use memory::*;
pub use modes::REQUIRED_FUNCTIONS;
pub use modes::*;
pub use streams::*;

/// Index into the counters `devstream_test_plugin_faulty_counters` writes: calls of
/// `InitPlugin` that accepted a layout.
pub const COUNT_INIT_PLUGIN_ACCEPTED: usize = 0;
/// Calls of `initialize`.
pub const COUNT_INITIALIZE: usize = 1;
/// Calls of `finalize`.
pub const COUNT_FINALIZE: usize = 2;
/// Live device allocations.
pub const COUNT_LIVE_ALLOCATIONS: usize = 3;
/// Calls of `InitPlugin` (accepting or not).
pub const COUNT_INIT_PLUGIN: usize = 4;
/// Queued copies that found their memory freed before they ran.
pub const COUNT_STALE_COPIES: usize = 5;
/// Calls of functions a mode filled beyond the stable prefix ([`MODE_DEVELOP_LAYOUT`]'s
/// transforms, [`MODE_PARAMS_ONLY_3_3`]'s capture functions).
pub const COUNT_BEYOND_PREFIX_CALLS: usize = 6;
/// How many counters there are.
pub const COUNTERS: usize = 7;

static COUNTS: [AtomicUsize; COUNTERS] = [const { AtomicUsize::new(0) }; COUNTERS];

fn count(index: usize) {
    COUNTS[index].fetch_add(1, Ordering::SeqCst);
}

/// Work queued by [`MODE_QUEUED_ERROR`] and [`MODE_QUEUED_COPIES`].
enum Queued {
    Callback {
        callback: unsafe extern "C" fn(C_Device, C_Stream, *mut c_void, *mut C_Status),
        device: std::ffi::c_int,
        stream: usize,
        user_data: usize,
    },
    Copy {
        dst: usize,
        src: usize,
        len: usize,
    },
}
static QUEUED: Mutex<Vec<Queued>> = Mutex::new(Vec::new());
/// Copies taken out of [`QUEUED`] by a run and not finished yet: events still answer "not
/// done" for them (`streams::copies_queued`), or the host could free a source the copy reads.
static COPIES_RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Live allocations of `*_memory_allocate`: (address, size).
static ALLOCATIONS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
/// The first bytes of the last queued copy's source.
static LAST_COPY: Mutex<[u8; 16]> = Mutex::new([0; 16]);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `[ptr, ptr + len)` lies in one live allocation of this plug-in.
fn allocated(ptr: usize, len: usize) -> bool {
    lock(&ALLOCATIONS)
        .iter()
        .any(|&(start, size)| ptr >= start && ptr + len <= start + size)
}

/// Writes the first bytes of the last queued copy's source to `out[0..16]`.
///
/// # Safety
/// `out` is null or points to 16 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn devstream_test_plugin_faulty_last_copy(out: *mut u8) {
    if out.is_null() {
        return;
    }
    let last = *lock(&LAST_COPY);
    // SAFETY: room for 16 bytes per the contract.
    unsafe { std::ptr::copy_nonoverlapping(last.as_ptr(), out, 16) };
}
const ALIGN: usize = 64;

fn mode() -> u32 {
    MODE.load(Ordering::SeqCst)
}

/// The mode a device belongs to: every mode that loads lists one device whose id is the mode,
/// so plug-ins loaded in different modes keep their behaviour when the selection changes.
fn mode_of(device: C_Device) -> u32 {
    if device.is_null() {
        return mode();
    }
    // SAFETY: a non-null `C_Device` from the host.
    unsafe { (*device).id as u32 }
}

static UNIQUE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this image register `faulty_<mode name>_<address>` instead, a device type no other
/// image (copy of this file) registers, so one mode can be loaded from several copies.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_faulty_unique_name() {
    UNIQUE.store(true, Ordering::SeqCst);
}

/// The device type this image registers in `mode`.
fn registered_type(mode: u32) -> *mut std::ffi::c_char {
    if !UNIQUE.load(Ordering::SeqCst) {
        return device_type_c(mode).as_ptr().cast_mut();
    }
    static NAME: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let name = format!("{}_{:x}", device_type(mode), &MODE as *const _ as usize);
        std::ffi::CString::new(name).unwrap_or_default()
    })
    .as_ptr()
    .cast_mut()
}

/// Selects what the next `InitPlugin` does.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_faulty_select(mode: c_uint) {
    MODE.store(mode, Ordering::SeqCst);
}

/// Writes the counters (see [`COUNTERS`]) to `out[0..COUNTERS]`.
///
/// # Safety
/// `out` is null or points to `COUNTERS` writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn devstream_test_plugin_faulty_counters(out: *mut usize) {
    if out.is_null() {
        return;
    }
    for (i, counter) in COUNTS.iter().enumerate() {
        // SAFETY: room for `COUNTERS` entries per the contract.
        unsafe { *out.add(i) = counter.load(Ordering::SeqCst) };
    }
}

/// Runs the work [`MODE_QUEUED_ERROR`], [`MODE_QUEUED_COPIES`],
/// [`MODE_INLINE_CALLBACKS_QUEUED_COPIES`], [`MODE_CALLBACK_TWICE_QUEUED`] and
/// [`MODE_CAPTURE_QUEUED_CALLBACKS`] queued (in order; the last mode calls each callback twice)
/// and answers how many items ran.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_faulty_run_queued() -> usize {
    let ran = run_queued_once();
    QUEUED_RAN.notify_all();
    ran
}

/// Runs what was queued (see [`devstream_test_plugin_faulty_run_queued`]).
fn run_queued_once() -> usize {
    let queued = {
        let mut guard = lock(&QUEUED);
        let copies = guard
            .iter()
            .filter(|work| matches!(work, Queued::Copy { .. }))
            .count();
        // Raised before the copies leave the queue, under its lock: no question about an event
        // sees them neither queued nor running.
        COPIES_RUNNING.fetch_add(copies, Ordering::SeqCst);
        std::mem::take(&mut *guard)
    };
    let ran = queued.len();
    let calls = if MODE.load(Ordering::SeqCst) == MODE_CALLBACK_TWICE_QUEUED {
        2
    } else {
        1
    };
    for work in queued {
        match work {
            Queued::Callback {
                callback,
                device,
                stream,
                user_data,
            } => {
                let mut device = C_Device_st { id: device };
                for _ in 0..calls {
                    let mut status = C_SUCCESS;
                    // SAFETY: the host's callback with its user data (called twice in
                    // MODE_CALLBACK_TWICE_QUEUED: that mode's fault).
                    unsafe {
                        callback(
                            &mut device,
                            stream as C_Stream,
                            user_data as *mut c_void,
                            &mut status,
                        )
                    };
                }
            }
            Queued::Copy { dst, src, len } => {
                let mut first = [0u8; 16];
                let shown = len.min(16);
                // SAFETY: the source range the host handed over (it must keep it alive
                // until the copy is done; that is what the tests check).
                unsafe {
                    std::ptr::copy_nonoverlapping(src as *const u8, first.as_mut_ptr(), shown)
                };
                *lock(&LAST_COPY) = first;
                let src_ok = allocated(src, len) || !allocated(src, 1);
                if !allocated(dst, len) || !src_ok {
                    count(COUNT_STALE_COPIES);
                } else {
                    // SAFETY: both ranges are live allocations (or host memory of the caller).
                    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
                }
                COPIES_RUNNING.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
    ran
}

fn guarded(body: impl FnOnce() -> C_Status) -> C_Status {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(C_INTERNAL_ERROR)
}

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.max(1), ALIGN).ok()
}

/// A call of a function beyond the stable prefix, counted ([`COUNT_BEYOND_PREFIX_CALLS`]) and
/// failed.
fn beyond_prefix() -> C_Status {
    count(COUNT_BEYOND_PREFIX_CALLS);
    C_ERROR
}

/// Declares table functions that ignore their arguments: each answers its expression (a
/// status, or a counted call and a status).
macro_rules! fixed_answers {
    ($($(#[$doc:meta])* $name:ident($($ty:ty),*) => $answer:expr;)*) => {$(
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name($(_: $ty),*) -> C_Status {
            $answer
        }
    )*};
}

fixed_answers! {
    ok_void() => C_SUCCESS;
    finalize() => { count(COUNT_FINALIZE); C_SUCCESS };
    failing_initialize() => { count(COUNT_INITIALIZE); C_ERROR };
    failing_init_device(C_Device) => C_ERROR;
    ok_device(C_Device) => C_SUCCESS;
    ok_stream(C_Device, C_Stream) => C_SUCCESS;
    failing_query_stream(C_Device, C_Stream) => C_INTERNAL_ERROR;
    failing_synchronize_stream(C_Device, C_Stream) => C_ERROR;
    failing_callback(C_Device, C_Stream, C_Callback, *mut c_void) => C_INTERNAL_ERROR;
    ok_stream_event(C_Device, C_Stream, C_Event) => C_SUCCESS;
    failing_stream_event(C_Device, C_Stream, C_Event) => C_ERROR;
    ok_event(C_Device, C_Event) => C_SUCCESS;
    warning_event(C_Device, C_Event) => C_WARNING;
    failing_async_copy(C_Device, C_Stream, *mut c_void, *const c_void, usize) => C_ERROR;
    /// `transform_unary` of the develop header.
    develop_transform_unary(
        C_Device, C_Stream, *const c_void, *mut c_void, usize, C_DataType, *mut c_void
    ) => beyond_prefix();
    /// `transform_binary` of the develop header.
    develop_transform_binary(
        C_Device, C_Stream, *const c_void, *const c_void, *mut c_void, usize, C_DataType,
        *mut c_void
    ) => beyond_prefix();
    ok_graph_launch(C_Device, C_GraphExec, C_Stream) => C_SUCCESS;
    ok_graph_destroy(C_CudaGraph) => C_SUCCESS;
    ok_graph_exec_destroy(C_GraphExec) => C_SUCCESS;
    counted_begin_capture(C_Device, C_Stream, C_StreamCaptureMode) => beyond_prefix();
    counted_end_capture(C_Device, C_Stream, *mut C_CudaGraph) => beyond_prefix();
    counted_graph_launch(C_Device, C_GraphExec, C_Stream) => beyond_prefix();
    counted_graph_destroy(C_CudaGraph) => beyond_prefix();
    counted_graph_exec_destroy(C_GraphExec) => beyond_prefix();
    counted_graph_instantiate(
        *mut C_GraphExec, *mut C_CudaGraph, *mut *mut c_void, *mut std::ffi::c_char, usize
    ) => beyond_prefix();
}

unsafe extern "C" fn initialize() -> C_Status {
    count(COUNT_INITIALIZE);
    if mode() == MODE_SLOW_INITIALIZE {
        // Gives a concurrent second load of this image the time to reach `InitPlugin`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while COUNTS[COUNT_INIT_PLUGIN].load(Ordering::SeqCst) < 2
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    C_SUCCESS
}

unsafe extern "C" fn get_device(device: C_Device) -> C_Status {
    if device.is_null() {
        return C_ERROR;
    }
    // SAFETY: a non-null, writable `C_Device_st` from the host.
    unsafe { (*device).id = mode() as std::ffi::c_int };
    C_SUCCESS
}

unsafe extern "C" fn get_device_count(count: *mut usize) -> C_Status {
    let value = match mode() {
        MODE_DEVICE_COUNT_FAILS => return C_INTERNAL_ERROR,
        MODE_HUGE_DEVICE_COUNT => 1usize << 40,
        MODE_DUPLICATE_DEVICE_IDS => 2,
        _ => 1,
    };
    if count.is_null() {
        return C_ERROR;
    }
    // SAFETY: a non-null out-parameter.
    unsafe { *count = value };
    C_SUCCESS
}

unsafe extern "C" fn get_device_list(devices: *mut usize) -> C_Status {
    if devices.is_null() {
        return C_ERROR;
    }
    match mode() {
        MODE_DUPLICATE_DEVICE_IDS => {
            // SAFETY: room for the two entries `get_device_count` reported.
            unsafe {
                *devices = 0;
                *devices.add(1) = 0;
            }
        }
        // SAFETY: room for the one entry `get_device_count` reported.
        mode => unsafe { *devices = mode as usize },
    }
    C_SUCCESS
}

/// Word index of `transform_unary` in the develop table (`transform_binary` follows).
const DEVELOP_TRANSFORM_UNARY_WORD: usize = 122;

/// A table of this plug-in's own, for [`MODE_REPLACES_INTERFACE`].
struct OwnTable(std::cell::UnsafeCell<C_DeviceInterface>);
// SAFETY: written once inside `InitPlugin` before it is handed out; never read here.
unsafe impl Sync for OwnTable {}
static OWN_TABLE: OwnTable = OwnTable(std::cell::UnsafeCell::new(C_DeviceInterface::zeroed()));

fn fill(table: &mut C_DeviceInterface, mode: u32) {
    table.initialize = Some(if mode == MODE_INITIALIZE_FAILS {
        failing_initialize
    } else {
        initialize
    });
    table.finalize = Some(finalize);
    if mode == MODE_INIT_DEVICE_FAILS {
        table.init_device = Some(failing_init_device);
    }
    table.set_device = Some(ok_device);
    table.get_device = Some(get_device);
    table.create_stream = Some(create_stream);
    table.destroy_stream = Some(ok_stream);
    table.create_event = Some(create_event);
    table.record_event = Some(ok_stream_event);
    table.destroy_event = Some(ok_event);
    table.synchronize_event = Some(ok_event);
    table.synchronize_device = Some(ok_device);
    table.device_memory_allocate = Some(allocate);
    table.device_memory_deallocate = Some(deallocate);
    table.device_memory_set = Some(memory_set);
    table.memory_copy_h2d = Some(memory_copy);
    table.memory_copy_d2h = Some(memory_copy);
    table.memory_copy_d2d = Some(memory_copy);
    table.async_memory_copy_h2d = Some(async_memory_copy);
    table.async_memory_copy_d2h = Some(async_memory_copy);
    table.async_memory_copy_d2d = Some(async_memory_copy);
    table.get_device_count = Some(get_device_count);
    table.get_device_list = Some(get_device_list);
    if mode != MODE_PADDLE_CUSTOM_CPU {
        table.synchronize_stream = Some(ok_stream);
        table.query_stream = Some(ok_stream);
        table.query_event = Some(ok_event);
        table.stream_wait_event = Some(ok_stream_event);
        table.stream_add_callback = Some(inline_callback);
    }
    match mode {
        MODE_INLINE_WARNING => table.stream_add_callback = Some(inline_callback_warning),
        MODE_QUEUED_ERROR => table.stream_add_callback = Some(queued_callback_error),
        MODE_CALLBACK_TWICE_INLINE => table.stream_add_callback = Some(inline_callback_twice),
        MODE_CALLBACK_TWICE_QUEUED | MODE_CAPTURE_QUEUED_CALLBACKS => {
            table.stream_add_callback = Some(queued_callback_success)
        }
        MODE_INLINE_CALLBACKS_QUEUED_COPIES => {
            table.async_memory_copy_h2d = Some(queued_async_copy);
            table.async_memory_copy_d2h = Some(queued_async_copy);
            table.async_memory_copy_d2d = Some(queued_async_copy);
            table.query_event = Some(query_event_after_queued);
            table.synchronize_event = Some(synchronize_event_after_queued);
            table.synchronize_stream = None;
            table.host_memory_allocate = Some(allocate);
            table.host_memory_deallocate = Some(deallocate);
        }
        MODE_QUEUED_COPIES => {
            table.async_memory_copy_h2d = Some(queued_async_copy);
            table.async_memory_copy_d2h = Some(queued_async_copy);
            table.async_memory_copy_d2d = Some(queued_async_copy);
            table.record_event = Some(failing_stream_event);
            table.stream_add_callback = Some(failing_callback);
            table.synchronize_stream = Some(failing_synchronize_stream);
            table.host_memory_allocate = Some(allocate);
            table.host_memory_deallocate = Some(deallocate);
        }
        _ => {}
    }
    if mode == MODE_QUEUED_CALLBACKS_NO_QUERIES || mode == MODE_QUEUED_CALLBACKS_SYNCHRONOUS_COPIES
    {
        table.query_stream = None;
        table.query_event = None;
        table.stream_add_callback = Some(queued_callback_success);
        table.synchronize_stream = Some(synchronize_until_callbacks_ran);
    }
    if mode == MODE_QUEUED_CALLBACKS_SYNCHRONOUS_COPIES {
        table.async_memory_copy_h2d = None;
        table.async_memory_copy_d2h = None;
        table.async_memory_copy_d2d = None;
    }
    if mode == MODE_REENTRANT {
        table.record_event = Some(reentrant_record_event);
        table.stream_add_callback = Some(reentrant_callback);
    }
    if mode == MODE_FAILING_OPS {
        table.record_event = Some(failing_stream_event);
        table.stream_wait_event = Some(failing_stream_event);
        table.query_stream = Some(failing_query_stream);
        table.query_event = Some(warning_event);
        table.synchronize_stream = Some(failing_synchronize_stream);
        table.stream_add_callback = Some(failing_callback);
        table.async_memory_copy_h2d = Some(failing_async_copy);
        table.async_memory_copy_d2h = Some(failing_async_copy);
        table.async_memory_copy_d2d = Some(failing_async_copy);
    }
    if mode >= MODE_MISSING_REQUIRED {
        if let Some(field) = sys::REQUIRED_FUNCTIONS.get((mode - MODE_MISSING_REQUIRED) as usize) {
            (field.clear)(table);
        }
    }
}

/// The sizes of a plug-in built against the Paddle 2.x header.
const PADDLE_2_PARAMS_SIZE: usize = 88;
const PADDLE_2_INTERFACE_SIZE: usize = 912;
/// The sizes of a plug-in built against the Paddle 3.2 (or the 1032-byte develop) header.
const PADDLE_3_PARAMS_SIZE: usize = 96;
const PADDLE_3_2_INTERFACE_SIZE: usize = 1032;
const PADDLE_3_3_INTERFACE_SIZE: usize = 1128;

/// The plug-in's entry point; what it does depends on the selected mode.
///
/// # Safety
/// `params` is null or points to writable `CustomRuntimeParams` (of at least 88 bytes) whose
/// `interface` is null or points to a writable table of at least 2008 bytes.
#[no_mangle]
pub unsafe extern "C" fn InitPlugin(params: *mut CustomRuntimeParams) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        count(COUNT_INIT_PLUGIN);
        let mode = mode();
        if params.is_null() || mode == MODE_REFUSE {
            return;
        }
        // SAFETY: non-null, writable params from the host.
        let params = unsafe { &mut *params };
        if params.interface.is_null() {
            return;
        }
        // SAFETY: the host's table; `size` is its first field in every layout.
        let interface_size = unsafe { (*params.interface).size };
        if mode == MODE_PADDLE_2_LAYOUT
            && params.size != PADDLE_2_PARAMS_SIZE
            && interface_size != PADDLE_2_INTERFACE_SIZE
        {
            return;
        }
        if mode == MODE_DEVELOP_LAYOUT
            && params.size != PADDLE_3_PARAMS_SIZE
            && interface_size != PADDLE_3_2_INTERFACE_SIZE
        {
            return;
        }
        if mode == MODE_PARAMS_ONLY_3_3 && params.size != PADDLE_3_PARAMS_SIZE {
            return;
        }
        if capture_mode(mode) && interface_size != PADDLE_3_3_INTERFACE_SIZE {
            return;
        }
        if mode == MODE_STRICT_3_2
            && (params.size != PADDLE_3_PARAMS_SIZE || interface_size != PADDLE_3_2_INTERFACE_SIZE)
        {
            return;
        }
        let (major, minor, patch) = match mode {
            MODE_OLD_VERSION => (0, 1, 0),
            MODE_NEWER_MAJOR => (1, 0, 0),
            _ => (
                RUNTIME_MAJOR_VERSION,
                RUNTIME_MINOR_VERSION,
                RUNTIME_PATCH_VERSION,
            ),
        };
        if mode == MODE_WRITES_THEN_REFUSES {
            params.device_type = registered_type(mode);
            // SAFETY: the host's table; only the shared prefix is written.
            fill(unsafe { &mut *params.interface }, mode);
            return;
        }
        count(COUNT_INIT_PLUGIN_ACCEPTED);
        params.version = CustomRuntimeVersion {
            major,
            minor,
            patch,
        };
        params.device_type = match mode {
            MODE_NULL_DEVICE_TYPE => std::ptr::null_mut(),
            MODE_INVALID_DEVICE_TYPE => c"not a type".as_ptr().cast_mut(),
            _ => registered_type(mode),
        };
        let table = if mode == MODE_REPLACES_INTERFACE {
            let own = OWN_TABLE.0.get();
            params.interface = own;
            own
        } else {
            params.interface
        };
        // SAFETY: the host's table (or ours); every mode writes only the shared prefix
        // through the typed fields, which lie within the smallest layout.
        let table = unsafe { &mut *table };
        fill(table, mode);
        if capture_mode(mode) {
            table.cuda_stream_begin_capture = Some(id_changing_begin_capture);
            table.cuda_stream_end_captrue = Some(id_changing_end_capture);
            table.cuda_stream_capture_info = Some(id_changing_capture_info);
            table.cuda_graph_launch = Some(ok_graph_launch);
            table.cuda_graph_destroy = Some(ok_graph_destroy);
            table.cuda_graph_exec_destroy = Some(ok_graph_exec_destroy);
            table.cuda_graph_instantiate = Some(ok_graph_instantiate);
        }
        if matches!(
            mode,
            MODE_CAPTURE_BEGUN_WITH_WARNING | MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE
        ) {
            table.cuda_stream_begin_capture = Some(begin_capture_with_warning);
            table.cuda_stream_end_captrue = Some(end_capture_into_graph);
            table.cuda_graph_instantiate = Some(instantiate_same_handle);
            table.cuda_graph_launch = Some(launch_graph_callbacks);
            table.cuda_graph_destroy = Some(destroy_graph_callbacks);
            table.stream_add_callback = Some(capturing_or_inline_callback);
        }
        if mode == MODE_PARAMS_ONLY_3_3 {
            table.cuda_stream_begin_capture = Some(counted_begin_capture);
            table.cuda_stream_end_captrue = Some(counted_end_capture);
            table.cuda_graph_launch = Some(counted_graph_launch);
            table.cuda_graph_destroy = Some(counted_graph_destroy);
            table.cuda_graph_exec_destroy = Some(counted_graph_exec_destroy);
            table.cuda_graph_instantiate = Some(counted_graph_instantiate);
        }
        if mode == MODE_DEVELOP_LAYOUT {
            let words = (table as *mut C_DeviceInterface).cast::<usize>();
            // SAFETY: the develop table is 1032 bytes (129 words) and the host's buffer is at
            // least that (the caller's contract); words 122 and 123 are its transforms.
            unsafe {
                words
                    .add(DEVELOP_TRANSFORM_UNARY_WORD)
                    .write(develop_transform_unary as *const () as usize);
                words
                    .add(DEVELOP_TRANSFORM_UNARY_WORD + 1)
                    .write(develop_transform_binary as *const () as usize);
            }
        }
        if mode == MODE_WRITES_BEYOND {
            // SAFETY: the caller guarantees 2008 writable bytes.
            unsafe {
                let beyond = (table as *mut C_DeviceInterface).cast::<u8>().add(2000);
                beyond
                    .cast::<usize>()
                    .write_unaligned(ok_void as unsafe extern "C" fn() -> C_Status as usize);
            }
        }
    }));
}
