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

/// Writes no version: refuses every layout (the default).
pub const MODE_REFUSE: u32 = 0;
/// Reports runtime version 0.1.0 (older than 0.1.1).
pub const MODE_OLD_VERSION: u32 = 1;
/// Reports runtime version 1.0.0 (a major version devstream does not speak).
pub const MODE_NEWER_MAJOR: u32 = 2;
/// Leaves `device_type` null.
pub const MODE_NULL_DEVICE_TYPE: u32 = 3;
/// Reports the device type `"not a type"`.
pub const MODE_INVALID_DEVICE_TYPE: u32 = 4;
/// Fills a function pointer at byte 2000 of the table: built against a larger, unknown header.
pub const MODE_WRITES_BEYOND: u32 = 5;
/// Replaces `params->interface` with a table of its own.
pub const MODE_REPLACES_INTERFACE: u32 = 6;
/// A working plug-in built against the Paddle 2.x header: accepts only 88-byte params or a
/// 912-byte table, fills only the 2.x part; callbacks run inside `stream_add_callback`.
pub const MODE_PADDLE_2_LAYOUT: u32 = 7;
/// Behaves like Paddle's `custom_cpu`: never writes its stream and event out-parameters, has
/// no `query_stream`, `query_event`, `stream_add_callback` or `synchronize_stream`.
pub const MODE_PADDLE_CUSTOM_CPU: u32 = 8;
/// Loads, but `create_stream` fails with `C_ERROR`.
pub const MODE_FAILING_CREATE_STREAM: u32 = 9;
/// Loads and creates streams, but records, waits, callbacks, copies, queries and synchronize
/// fail with various statuses; allocations above 1 MiB fail with `C_FAILED`.
pub const MODE_FAILING_OPS: u32 = 10;
/// `device_memory_allocate` answers `C_SUCCESS` without writing the pointer.
pub const MODE_UNWRITTEN_ALLOCATION: u32 = 11;
/// `initialize` fails with `C_ERROR`.
pub const MODE_INITIALIZE_FAILS: u32 = 12;
/// `get_device_count` fails with `C_INTERNAL_ERROR`.
pub const MODE_DEVICE_COUNT_FAILS: u32 = 13;
/// `get_device_count` reports 2^40 devices.
pub const MODE_HUGE_DEVICE_COUNT: u32 = 14;
/// `get_device_list` lists device 0 twice.
pub const MODE_DUPLICATE_DEVICE_IDS: u32 = 15;
/// Loads without complaint (it checks no sizes) and registers `faulty_working`: the control
/// case of the synchronous runtime.
pub const MODE_WORKING: u32 = 16;
/// Works, but `stream_add_callback` runs the callback inside the call and answers `C_WARNING`
/// ("an asynchronous interface is actually synchronous").
pub const MODE_INLINE_WARNING: u32 = 17;
/// Works, but `stream_add_callback` queues the callback *and* answers `C_ERROR`; the queued
/// callbacks run when the test calls `devstream_test_plugin_faulty_run_queued()`.
pub const MODE_QUEUED_ERROR: u32 = 18;
/// Works, but `device_memory_allocate` writes a pointer and answers `C_WARNING`.
pub const MODE_ALLOC_WARNING: u32 = 19;
/// Works, but `device_memory_allocate` writes a pointer and answers `C_FAILED`.
pub const MODE_ALLOC_FAILED_WRITTEN: u32 = 20;
/// `initialize` succeeds, `init_device` fails with `C_ERROR`.
pub const MODE_INIT_DEVICE_FAILS: u32 = 21;
/// Works, but `initialize` waits (up to two seconds) for a second `InitPlugin` of the same
/// image to arrive: a host that loads one file twice at once runs `initialize` twice.
pub const MODE_SLOW_INITIALIZE: u32 = 22;
/// Works, but asynchronous copies are queued and run (with the queued callbacks) only when
/// the test calls `devstream_test_plugin_faulty_run_queued()`; `record_event`,
/// `stream_add_callback` and `synchronize_stream` fail. Device and host
/// memory come from `*_memory_allocate`; a queued copy that touches memory freed meanwhile is
/// counted ([`COUNT_STALE_COPIES`]) and skipped, and the first 16 bytes of the last queued
/// copy's source are kept for `devstream_test_plugin_faulty_last_copy`.
pub const MODE_QUEUED_COPIES: u32 = 23;
/// `InitPlugin` fills the table and the device type but never writes a version: a refusal
/// that is not free of effects (a host must not offer it the next layout).
pub const MODE_WRITES_THEN_REFUSES: u32 = 24;
/// A working plug-in built against a 1032-byte "develop" header (the Paddle 3.2 table with
/// `transform_unary` and `transform_binary` in words 122 and 123, where Paddle 3.3 has
/// `cuda_stream_begin_capture` and `cuda_stream_end_captrue`): Paddle's check with 96-byte
/// params and a 1032-byte table, so it also accepts Paddle 3.3's own pair (96, 1128). Its
/// transforms count their calls ([`COUNT_BEYOND_PREFIX_CALLS`]) and fail.
pub const MODE_DEVELOP_LAYOUT: u32 = 25;
/// A working plug-in that checks only `params->size == 96` and fills the Paddle 3.3 table
/// including the graph-capture functions (which count their calls and fail): which table it
/// filled cannot be told, so none of those may be used.
pub const MODE_PARAMS_ONLY_3_3: u32 = 26;
/// A working plug-in that accepts only when both sizes are Paddle 3.2's (96, 1032).
pub const MODE_STRICT_3_2: u32 = 27;
/// Works, but `stream_add_callback` runs the callback twice inside the call (answering
/// `C_SUCCESS`): a plug-in that calls a callback more than once.
pub const MODE_CALLBACK_TWICE_INLINE: u32 = 28;
/// Works, but `stream_add_callback` queues the callback (answering `C_SUCCESS`), and
/// `devstream_test_plugin_faulty_run_queued()` calls each queued callback twice.
pub const MODE_CALLBACK_TWICE_QUEUED: u32 = 29;
/// Works, but asynchronous copies are queued (run by
/// `devstream_test_plugin_faulty_run_queued()`, as in [`MODE_QUEUED_COPIES`]) while
/// `stream_add_callback` runs each callback at once, inside the call (answering `C_SUCCESS`):
/// callbacks come before the stream's earlier copies. Events answer `query_event` with
/// `C_FAILED` (and `synchronize_event` with `C_ERROR`) while copies are queued.
pub const MODE_INLINE_CALLBACKS_QUEUED_COPIES: u32 = 30;
/// A working plug-in that accepts only Paddle 3.3's table (so devstream uses its capture
/// functions), whose `cuda_stream_capture_info` reports the capture begun on a stream with its
/// id the first time and with another id afterwards.
pub const MODE_CAPTURE_ID_CHANGES: u32 = 31;
/// As [`MODE_CAPTURE_ID_CHANGES`], but `cuda_stream_capture_info` reports the same id every
/// time, and `stream_add_callback` queues callbacks (answering `C_SUCCESS`), captured or not:
/// `devstream_test_plugin_faulty_run_queued()` calls them, also after the graph is destroyed.
pub const MODE_CAPTURE_QUEUED_CALLBACKS: u32 = 32;
/// As [`MODE_CAPTURE_ID_CHANGES`], but `cuda_stream_capture_info` reports the capture only the
/// first time and no capture afterwards: a plug-in that loses track of a capture it began.
pub const MODE_CAPTURE_FORGOTTEN: u32 = 33;
/// As [`MODE_CAPTURE_QUEUED_CALLBACKS`] as to the capture id, but `cuda_stream_begin_capture`
/// begins the capture and answers `C_WARNING`, and `stream_add_callback` keeps a callback
/// submitted to a capturing stream in the capture (its graph calls it on every launch and drops
/// it when destroyed, never calling it otherwise) and runs any other one inside the call: a
/// plug-in that did what was asked and answered a failure all the same.
pub const MODE_CAPTURE_BEGUN_WITH_WARNING: u32 = 34;
/// As [`MODE_CAPTURE_BEGUN_WITH_WARNING`], but the first `cuda_stream_end_captrue` of each
/// capture fails with `C_ERROR` (and leaves the capture going); later ones end it.
pub const MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE: u32 = 35;
/// A working plug-in whose `record_event` and `stream_add_callback` first call the hook set with
/// `devstream_test_plugin_faulty_set_reentry_hook` (with [`REENTRY_RECORD_EVENT`] or
/// [`REENTRY_ADD_CALLBACK`]): a plug-in that calls back into its host from inside its functions,
/// as Paddle plug-ins do. Callbacks run inside `stream_add_callback`, after the hook.
pub const MODE_REENTRANT: u32 = 36;
/// A working plug-in without `query_stream` and `query_event` (so devstream answers a stream's
/// `query` by waiting for its work) whose streams have handles of their own,
/// `stream_add_callback` queues callbacks (run by `devstream_test_plugin_faulty_run_queued()`,
/// answering `C_SUCCESS`), and `synchronize_stream` calls the re-entry hook (with
/// [`REENTRY_SYNCHRONIZE_STREAM`]) and then waits until no callback queued on the stream is
/// left: work queued after a callback that runs cannot be done before it returns.
pub const MODE_QUEUED_CALLBACKS_NO_QUERIES: u32 = 37;
/// A working plug-in whose device memory is not host memory: `device_memory_allocate` of more
/// than 1 MiB answers an address of its own ([`ELSEWHERE`]) without allocating anything, as a
/// device with far more memory than the host would (nothing may be copied there).
pub const MODE_DEVICE_MEMORY_ELSEWHERE: u32 = 38;
/// The address [`MODE_DEVICE_MEMORY_ELSEWHERE`] answers for large allocations.
pub const ELSEWHERE: usize = 0x7e57_0000_0000;
/// `MODE_MISSING_REQUIRED + i` omits the `i`-th of [`REQUIRED_FUNCTIONS`].
pub const MODE_MISSING_REQUIRED: u32 = 100;

/// The functions Paddle (and devstream) require, in the order `MODE_MISSING_REQUIRED + i` uses.
pub const REQUIRED_FUNCTIONS: [&str; 10] = FunctionField::names(sys::REQUIRED_FUNCTIONS);

/// The device type a mode registers, where it registers one.
pub fn device_type(mode: u32) -> &'static str {
    device_type_c(mode).to_str().unwrap_or("faulty")
}

fn device_type_c(mode: u32) -> &'static CStr {
    match mode {
        MODE_PADDLE_2_LAYOUT => c"faulty_paddle2",
        MODE_PADDLE_CUSTOM_CPU => c"faulty_paddle_cpu",
        MODE_FAILING_CREATE_STREAM => c"faulty_create_stream",
        MODE_FAILING_OPS => c"faulty_ops",
        MODE_UNWRITTEN_ALLOCATION => c"faulty_unwritten",
        MODE_WRITES_BEYOND => c"faulty_beyond",
        MODE_WORKING => c"faulty_working",
        MODE_INLINE_WARNING => c"faulty_inline_warning",
        MODE_QUEUED_ERROR => c"faulty_queued_error",
        MODE_ALLOC_WARNING => c"faulty_alloc_warning",
        MODE_ALLOC_FAILED_WRITTEN => c"faulty_alloc_failed",
        MODE_INIT_DEVICE_FAILS => c"faulty_init_device",
        MODE_SLOW_INITIALIZE => c"faulty_slow_initialize",
        MODE_QUEUED_COPIES => c"faulty_queued_copies",
        MODE_DEVELOP_LAYOUT => c"faulty_develop",
        MODE_PARAMS_ONLY_3_3 => c"faulty_params_only",
        MODE_STRICT_3_2 => c"faulty_strict",
        MODE_CALLBACK_TWICE_INLINE => c"faulty_twice_inline",
        MODE_CALLBACK_TWICE_QUEUED => c"faulty_twice_queued",
        MODE_INLINE_CALLBACKS_QUEUED_COPIES => c"faulty_inline_early",
        MODE_CAPTURE_ID_CHANGES => c"faulty_capture_id",
        MODE_CAPTURE_QUEUED_CALLBACKS => c"faulty_capture_queued",
        MODE_CAPTURE_FORGOTTEN => c"faulty_capture_forgotten",
        MODE_CAPTURE_BEGUN_WITH_WARNING => c"faulty_capture_warning",
        MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE => c"faulty_capture_warning_end",
        MODE_REENTRANT => c"faulty_reentrant",
        MODE_QUEUED_CALLBACKS_NO_QUERIES => c"faulty_no_queries",
        MODE_DEVICE_MEMORY_ELSEWHERE => c"faulty_memory_elsewhere",
        _ => c"faulty",
    }
}

static MODE: AtomicU32 = AtomicU32::new(MODE_REFUSE);

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

/// What [`MODE_REENTRANT`]'s hook is told: `record_event` is calling it.
pub const REENTRY_RECORD_EVENT: u32 = 1;
/// What [`MODE_REENTRANT`]'s hook is told: `stream_add_callback` is calling it.
pub const REENTRY_ADD_CALLBACK: u32 = 2;
/// What [`MODE_QUEUED_CALLBACKS_NO_QUERIES`]'s hook is told: `synchronize_stream` is calling it.
pub const REENTRY_SYNCHRONIZE_STREAM: u32 = 3;

/// Signalled when `devstream_test_plugin_faulty_run_queued()` ran what was queued.
static QUEUED_RAN: std::sync::Condvar = std::sync::Condvar::new();

/// `synchronize_stream` of [`MODE_QUEUED_CALLBACKS_NO_QUERIES`].
unsafe extern "C" fn synchronize_until_callbacks_ran(
    _device: C_Device,
    stream: C_Stream,
) -> C_Status {
    reenter(REENTRY_SYNCHRONIZE_STREAM);
    let queued_here = |queued: &Vec<Queued>| {
        queued
            .iter()
            .any(|work| matches!(work, Queued::Callback { stream: s, .. } if *s == stream as usize))
    };
    let mut queued = lock(&QUEUED);
    while queued_here(&queued) {
        queued = QUEUED_RAN.wait(queued).unwrap_or_else(|e| e.into_inner());
    }
    C_SUCCESS
}

/// The hook [`MODE_REENTRANT`]'s functions call (told which function calls it).
type ReentryHook = unsafe extern "C" fn(c_uint);
static REENTRY_HOOK: Mutex<Option<ReentryHook>> = Mutex::new(None);

/// Sets (or, with null, clears) the hook [`MODE_REENTRANT`]'s `record_event` and
/// `stream_add_callback` call before they do their work.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_faulty_set_reentry_hook(hook: Option<ReentryHook>) {
    *lock(&REENTRY_HOOK) = hook;
}

/// Calls the re-entry hook, if set, with `call`.
fn reenter(call: u32) {
    let hook = *lock(&REENTRY_HOOK);
    if let Some(hook) = hook {
        // SAFETY: the host's hook, called with no lock of this plug-in held.
        unsafe { hook(call) };
    }
}

unsafe extern "C" fn reentrant_record_event(
    _device: C_Device,
    _stream: C_Stream,
    _event: C_Event,
) -> C_Status {
    guarded(|| {
        reenter(REENTRY_RECORD_EVENT);
        C_SUCCESS
    })
}

unsafe extern "C" fn reentrant_callback(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    guarded(|| {
        reenter(REENTRY_ADD_CALLBACK);
        // SAFETY: forwarded arguments.
        unsafe { inline_callback(device, stream, callback, user_data) }
    })
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
    let queued = std::mem::take(&mut *lock(&QUEUED));
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
                    continue;
                }
                // SAFETY: both ranges are live allocations (or host memory of the caller).
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
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

unsafe extern "C" fn create_stream(device: C_Device, stream: *mut C_Stream) -> C_Status {
    match mode_of(device) {
        MODE_FAILING_CREATE_STREAM => C_ERROR,
        // Like Paddle's custom_cpu: success, nothing written.
        MODE_PADDLE_CUSTOM_CPU | MODE_UNWRITTEN_ALLOCATION => C_SUCCESS,
        _ => {
            if stream.is_null() {
                return C_ERROR;
            }
            // A dummy, non-null handle (one for all streams: this runtime is synchronous),
            // or, in the mode that queues callbacks per stream, one of its own.
            let handle = if mode_of(device) == MODE_QUEUED_CALLBACKS_NO_QUERIES {
                static NEXT_STREAM: AtomicUsize = AtomicUsize::new(0x1000);
                NEXT_STREAM.fetch_add(0x10, Ordering::SeqCst) as C_Stream
            } else {
                std::ptr::NonNull::<C_Stream_st>::dangling().as_ptr()
            };
            // SAFETY: a non-null out-parameter.
            unsafe { *stream = handle };
            C_SUCCESS
        }
    }
}

unsafe extern "C" fn inline_callback(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    guarded(|| {
        let Some(callback) = callback else {
            return C_ERROR;
        };
        let mut status = C_SUCCESS;
        // SAFETY: the host's callback with its user data, called once.
        unsafe { callback(device, stream, user_data, &mut status) };
        C_SUCCESS
    })
}

unsafe extern "C" fn inline_callback_warning(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    // SAFETY: forwarded arguments.
    match unsafe { inline_callback(device, stream, callback, user_data) } {
        C_SUCCESS => C_WARNING,
        other => other,
    }
}

unsafe extern "C" fn inline_callback_twice(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    // SAFETY: forwarded arguments; calling twice is this mode's fault.
    unsafe { inline_callback(device, stream, callback, user_data) };
    // SAFETY: as above.
    unsafe { inline_callback(device, stream, callback, user_data) }
}

unsafe extern "C" fn queued_callback_success(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    // SAFETY: forwarded arguments.
    match unsafe { queued_callback_error(device, stream, callback, user_data) } {
        C_ERROR => C_SUCCESS,
        other => other,
    }
}

unsafe extern "C" fn queued_callback_error(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    let Some(callback) = callback else {
        return C_ERROR;
    };
    let id = if device.is_null() {
        0
    } else {
        // SAFETY: a non-null `C_Device` from the host.
        unsafe { (*device).id }
    };
    lock(&QUEUED).push(Queued::Callback {
        callback,
        device: id,
        stream: stream as usize,
        user_data: user_data as usize,
    });
    C_ERROR
}

unsafe extern "C" fn create_event(device: C_Device, event: *mut C_Event) -> C_Status {
    let mode = mode_of(device);
    if mode == MODE_PADDLE_CUSTOM_CPU || mode == MODE_UNWRITTEN_ALLOCATION {
        return C_SUCCESS;
    }
    if event.is_null() {
        return C_ERROR;
    }
    // SAFETY: a non-null out-parameter.
    unsafe { *event = std::ptr::NonNull::<C_Event_st>::dangling().as_ptr() };
    C_SUCCESS
}

/// Whether copies are queued (not yet run by the test).
fn copies_queued() -> bool {
    lock(&QUEUED)
        .iter()
        .any(|work| matches!(work, Queued::Copy { .. }))
}

unsafe extern "C" fn query_event_after_queued(_device: C_Device, _event: C_Event) -> C_Status {
    if copies_queued() {
        C_FAILED
    } else {
        C_SUCCESS
    }
}

unsafe extern "C" fn synchronize_event_after_queued(
    _device: C_Device,
    _event: C_Event,
) -> C_Status {
    if copies_queued() {
        C_ERROR
    } else {
        C_SUCCESS
    }
}

unsafe extern "C" fn allocate(device: C_Device, ptr: *mut *mut c_void, size: usize) -> C_Status {
    guarded(|| {
        if ptr.is_null() {
            return C_ERROR;
        }
        let mode = mode_of(device);
        if mode == MODE_UNWRITTEN_ALLOCATION {
            return C_SUCCESS;
        }
        if mode == MODE_FAILING_OPS && size > (1 << 20) {
            return C_FAILED;
        }
        if mode == MODE_DEVICE_MEMORY_ELSEWHERE && size > (1 << 20) {
            // SAFETY: a non-null out-parameter.
            unsafe { *ptr = ELSEWHERE as *mut c_void };
            return C_SUCCESS;
        }
        let Some(layout) = layout(size) else {
            return C_FAILED;
        };
        // SAFETY: a layout of non-zero size.
        let memory = unsafe { alloc_zeroed(layout) };
        if memory.is_null() {
            return C_FAILED;
        }
        COUNTS[COUNT_LIVE_ALLOCATIONS].fetch_add(1, Ordering::SeqCst);
        lock(&ALLOCATIONS).push((memory as usize, size.max(1)));
        // SAFETY: a non-null out-parameter.
        unsafe { *ptr = memory.cast() };
        match mode {
            MODE_ALLOC_WARNING => C_WARNING,
            MODE_ALLOC_FAILED_WRITTEN => C_FAILED,
            _ => C_SUCCESS,
        }
    })
}

unsafe extern "C" fn deallocate(_device: C_Device, ptr: *mut c_void, size: usize) -> C_Status {
    guarded(|| match (ptr.is_null(), layout(size)) {
        (false, _) if ptr as usize == ELSEWHERE => C_SUCCESS,
        (false, Some(layout)) => {
            // SAFETY: `ptr` came from `allocate` with this size.
            unsafe { dealloc(ptr.cast(), layout) };
            COUNTS[COUNT_LIVE_ALLOCATIONS].fetch_sub(1, Ordering::SeqCst);
            lock(&ALLOCATIONS).retain(|&(start, _)| start != ptr as usize);
            C_SUCCESS
        }
        _ => C_ERROR,
    })
}

unsafe extern "C" fn memory_set(
    _device: C_Device,
    ptr: *mut c_void,
    value: u8,
    size: usize,
) -> C_Status {
    if ptr.is_null() && size > 0 {
        return C_ERROR;
    }
    // SAFETY: a valid range of our memory.
    unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), value, size) };
    C_SUCCESS
}

unsafe extern "C" fn memory_copy(
    _device: C_Device,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
) -> C_Status {
    if (dst.is_null() || src.is_null()) && size > 0 {
        return C_ERROR;
    }
    // SAFETY: valid ranges of `size` bytes.
    unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), size) };
    C_SUCCESS
}

unsafe extern "C" fn async_memory_copy(
    device: C_Device,
    _stream: C_Stream,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
) -> C_Status {
    // Synchronous, as in Paddle's custom_cpu.
    // SAFETY: forwarded arguments.
    unsafe { memory_copy(device, dst, src, size) }
}

unsafe extern "C" fn queued_async_copy(
    _device: C_Device,
    _stream: C_Stream,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
) -> C_Status {
    if (dst.is_null() || src.is_null()) && size > 0 {
        return C_ERROR;
    }
    lock(&QUEUED).push(Queued::Copy {
        dst: dst as usize,
        src: src as usize,
        len: size,
    });
    C_SUCCESS
}

/// Word index of `transform_unary` in the develop table (`transform_binary` follows).
const DEVELOP_TRANSFORM_UNARY_WORD: usize = 122;

/// [`MODE_CAPTURE_ID_CHANGES`]: the stream capturing (its handle) and how many times
/// `cuda_stream_capture_info` reported its capture.
static ID_CHANGING_CAPTURE: Mutex<Option<(usize, u64)>> = Mutex::new(None);

unsafe extern "C" fn id_changing_begin_capture(
    _device: C_Device,
    stream: C_Stream,
    _mode: C_StreamCaptureMode,
) -> C_Status {
    let mut capture = lock(&ID_CHANGING_CAPTURE);
    if capture.is_some() {
        return C_ERROR;
    }
    *capture = Some((stream as usize, 0));
    C_SUCCESS
}

unsafe extern "C" fn id_changing_end_capture(
    _device: C_Device,
    stream: C_Stream,
    graph: *mut C_CudaGraph,
) -> C_Status {
    let mut capture = lock(&ID_CHANGING_CAPTURE);
    if graph.is_null() || !capture.is_some_and(|(s, _)| s == stream as usize) {
        return C_ERROR;
    }
    *capture = None;
    // SAFETY: a non-null out-parameter; a dummy graph (nothing is recorded).
    unsafe { *graph = std::ptr::NonNull::dangling().as_ptr() };
    C_SUCCESS
}

/// The modes whose capture functions are the id-changing ones (each varies them).
fn capture_mode(mode: u32) -> bool {
    matches!(
        mode,
        MODE_CAPTURE_ID_CHANGES
            | MODE_CAPTURE_QUEUED_CALLBACKS
            | MODE_CAPTURE_FORGOTTEN
            | MODE_CAPTURE_BEGUN_WITH_WARNING
            | MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE
    )
}

/// The modes whose capture id stays the same for the capture's life.
fn steady_capture_id(mode: u32) -> bool {
    matches!(
        mode,
        MODE_CAPTURE_QUEUED_CALLBACKS
            | MODE_CAPTURE_BEGUN_WITH_WARNING
            | MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE
    )
}

/// [`MODE_CAPTURE_BEGUN_WITH_WARNING`]: the callbacks the capture in progress holds, and the
/// graphs its ends made (by handle), each with the callbacks it calls on every launch.
static CAPTURED: Mutex<Vec<Queued>> = Mutex::new(Vec::new());
static GRAPHS: Mutex<Vec<(usize, Vec<Queued>)>> = Mutex::new(Vec::new());
/// [`MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE`]: the capture in progress refused its end.
static END_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Begins (`begin` true) or ends a capture on the plug-in stream `stream` as other code sharing
/// the stream would, behind the host's back (the capture modes' single capture); answers
/// whether it did.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_faulty_foreign_capture(stream: usize, begin: bool) -> bool {
    let mut capture = lock(&ID_CHANGING_CAPTURE);
    match (begin, *capture) {
        (true, None) => *capture = Some((stream, 0)),
        (false, Some((s, _))) if s == stream => *capture = None,
        _ => return false,
    }
    true
}

unsafe extern "C" fn begin_capture_with_warning(
    device: C_Device,
    stream: C_Stream,
    mode: C_StreamCaptureMode,
) -> C_Status {
    // SAFETY: forwarded arguments.
    match unsafe { id_changing_begin_capture(device, stream, mode) } {
        C_SUCCESS => {
            END_REFUSED.store(false, Ordering::SeqCst);
            C_WARNING
        }
        other => other,
    }
}

unsafe extern "C" fn end_capture_into_graph(
    device: C_Device,
    stream: C_Stream,
    graph: *mut C_CudaGraph,
) -> C_Status {
    if mode_of(device) == MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE
        && !END_REFUSED.swap(true, Ordering::SeqCst)
    {
        return C_ERROR;
    }
    // SAFETY: forwarded arguments.
    let status = unsafe { id_changing_end_capture(device, stream, graph) };
    if status == C_SUCCESS {
        static NEXT_GRAPH: AtomicUsize = AtomicUsize::new(0x1000);
        let handle = NEXT_GRAPH.fetch_add(0x10, Ordering::SeqCst);
        let nodes = std::mem::take(&mut *lock(&CAPTURED));
        lock(&GRAPHS).push((handle, nodes));
        // SAFETY: a non-null out-parameter (checked by the end above).
        unsafe { *graph = handle as C_CudaGraph };
    }
    status
}

unsafe extern "C" fn instantiate_same_handle(
    exec: *mut C_GraphExec,
    graph: *mut C_CudaGraph,
    _error_node: *mut *mut c_void,
    _log: *mut std::ffi::c_char,
    _log_size: usize,
) -> C_Status {
    if exec.is_null() || graph.is_null() {
        return C_ERROR;
    }
    // SAFETY: non-null pointers from the host: the executable graph is named like its graph.
    unsafe { *exec = (*graph).cast() };
    C_SUCCESS
}

unsafe extern "C" fn launch_graph_callbacks(
    device: C_Device,
    exec: C_GraphExec,
    stream: C_Stream,
) -> C_Status {
    let calls: Vec<(C_Callback, usize)> = lock(&GRAPHS)
        .iter()
        .filter(|(handle, _)| *handle == exec as usize)
        .flat_map(|(_, nodes)| nodes.iter())
        .filter_map(|node| match node {
            Queued::Callback {
                callback,
                user_data,
                ..
            } => Some((Some(*callback), *user_data)),
            Queued::Copy { .. } => None,
        })
        .collect();
    for (callback, user_data) in calls {
        // SAFETY: the host's callback and data, kept by the graph.
        unsafe { inline_callback(device, stream, callback, user_data as *mut c_void) };
    }
    C_SUCCESS
}

unsafe extern "C" fn destroy_graph_callbacks(graph: C_CudaGraph) -> C_Status {
    lock(&GRAPHS).retain(|(handle, _)| *handle != graph as usize);
    C_SUCCESS
}

/// `stream_add_callback` of [`MODE_CAPTURE_BEGUN_WITH_WARNING`]: into the capture, or inline.
unsafe extern "C" fn capturing_or_inline_callback(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    let capturing = lock(&ID_CHANGING_CAPTURE).is_some_and(|(s, _)| s == stream as usize);
    if !capturing {
        // SAFETY: forwarded arguments.
        return unsafe { inline_callback(device, stream, callback, user_data) };
    }
    let Some(callback) = callback else {
        return C_ERROR;
    };
    lock(&CAPTURED).push(Queued::Callback {
        callback,
        device: mode_of(device) as std::ffi::c_int,
        stream: stream as usize,
        user_data: user_data as usize,
    });
    C_SUCCESS
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn id_changing_capture_info(
    device: C_Device,
    stream: C_Stream,
    status: *mut C_StreamCaptureStatus,
    id: *mut std::ffi::c_ulonglong,
    _graph: *mut C_CudaGraph,
    _dependencies: *mut C_CudaGraphNode,
    _edges: *mut *mut c_void,
    _count: *mut usize,
) -> C_Status {
    if status.is_null() || id.is_null() {
        return C_ERROR;
    }
    let mut capture = lock(&ID_CHANGING_CAPTURE);
    match capture.as_mut() {
        Some((s, reported))
            if *s == stream as usize
                && (*reported == 0 || mode_of(device) != MODE_CAPTURE_FORGOTTEN) =>
        {
            // SAFETY: non-null out-parameters.
            unsafe {
                *status = C_StreamCaptureStatusActive;
                *id = if *reported == 0 || steady_capture_id(mode_of(device)) {
                    7
                } else {
                    1007
                };
            }
            *reported += 1;
        }
        // SAFETY: a non-null out-parameter.
        _ => unsafe { *status = C_StreamCaptureStatusNone },
    }
    C_SUCCESS
}

unsafe extern "C" fn ok_graph_instantiate(
    exec: *mut C_GraphExec,
    _graph: *mut C_CudaGraph,
    _error_node: *mut *mut c_void,
    _log: *mut std::ffi::c_char,
    _log_size: usize,
) -> C_Status {
    if exec.is_null() {
        return C_ERROR;
    }
    // SAFETY: a non-null out-parameter; a dummy executable graph.
    unsafe { *exec = std::ptr::NonNull::dangling().as_ptr() };
    C_SUCCESS
}

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
    if mode == MODE_QUEUED_CALLBACKS_NO_QUERIES {
        table.query_stream = None;
        table.query_event = None;
        table.stream_add_callback = Some(queued_callback_success);
        table.synchronize_stream = Some(synchronize_until_callbacks_ran);
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
