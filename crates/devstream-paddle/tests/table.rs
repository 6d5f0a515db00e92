//! The table's functions called as Paddle calls them, on `devstream_cpu` (device 0), through a
//! table filled by `devstream_paddle::table::fill`.
#![allow(clippy::undocumented_unsafe_blocks)] // test calls through the C ABI; each is commented

use devstream_paddle::runtime::{places_of, Runtime};
use devstream_paddle::select::{Backend, Layout};
use devstream_paddle::sys::*;
use devstream_paddle::table::{fill, RUNTIMES};
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

const CPU: usize = 0;

/// The 3.3 table of `devstream_cpu`, with the capture functions (emulated capture switched on
/// for this test process).
fn table() -> &'static C_DeviceInterface {
    /// The filled table: function pointers and null reserved words, never written again.
    struct Table(Box<C_DeviceInterface>);
    // SAFETY: read-only after initialisation; its raw pointers are null reserved words.
    unsafe impl Sync for Table {}
    // SAFETY: as above.
    unsafe impl Send for Table {}
    static TABLE: OnceLock<Table> = OnceLock::new();
    &TABLE
        .get_or_init(|| {
            RUNTIMES[CPU].get_or_init(|| {
                Runtime::new(Backend::Cpu, places_of(Backend::Cpu)).expect("a cpu place")
            });
            std::env::set_var("DEVSTREAM_PADDLE_EMULATED_CAPTURE", "1");
            let mut table = Box::new(C_DeviceInterface::zeroed());
            table.size = std::mem::size_of::<C_DeviceInterface>();
            // SAFETY: a whole 1128-byte table.
            unsafe {
                fill::<CPU>(
                    &mut *table,
                    Layout::Paddle3 {
                        interface_size: table.size,
                    },
                )
            };
            Table(table)
        })
        .0
}

fn dev() -> C_Device_st {
    C_Device_st { id: 0 }
}

macro_rules! call {
    ($name:ident($($arg:expr),*)) => {{
        let f = table().$name.expect(stringify!($name));
        // SAFETY: the arguments follow the table's contract (or test its refusals).
        unsafe { f($($arg),*) }
    }};
}

fn alloc(size: usize) -> *mut c_void {
    let mut d = dev();
    let mut ptr = null_mut();
    assert_eq!(
        call!(device_memory_allocate(&mut d, &mut ptr, size)),
        C_SUCCESS
    );
    assert!(!ptr.is_null());
    ptr
}

fn free(ptr: *mut c_void, size: usize) {
    let mut d = dev();
    assert_eq!(
        call!(device_memory_deallocate(&mut d, ptr, size)),
        C_SUCCESS
    );
}

fn h2d(dst: *mut c_void, src: &[u8]) -> C_Status {
    let mut d = dev();
    call!(memory_copy_h2d(&mut d, dst, src.as_ptr().cast(), src.len()))
}

fn d2h(src: *const c_void, len: usize) -> Result<Vec<u8>, C_Status> {
    let mut d = dev();
    let mut out = vec![0u8; len];
    match call!(memory_copy_d2h(&mut d, out.as_mut_ptr().cast(), src, len)) {
        C_SUCCESS => Ok(out),
        status => Err(status),
    }
}

fn stream() -> C_Stream {
    let mut d = dev();
    let mut s = null_mut();
    assert_eq!(call!(create_stream(&mut d, &mut s)), C_SUCCESS);
    assert!(!s.is_null());
    s
}

fn sync(s: C_Stream) -> C_Status {
    let mut d = dev();
    call!(synchronize_stream(&mut d, s))
}

fn destroy(s: C_Stream) {
    let mut d = dev();
    assert_eq!(call!(destroy_stream(&mut d, s)), C_SUCCESS);
}

/// A new event on device 0.
fn new_event() -> C_Event {
    let mut d = dev();
    let mut event = null_mut();
    assert_eq!(call!(create_event(&mut d, &mut event)), C_SUCCESS);
    assert!(!event.is_null());
    event
}

/// A callback that blocks its stream until the test sends on the channel.
unsafe extern "C" fn gate(_: C_Device, _: C_Stream, data: *mut c_void, _: *mut C_Status) {
    // SAFETY: `data` is the boxed receiver `hold` leaked for exactly this call.
    let receiver = unsafe { Box::from_raw(data.cast::<Receiver<()>>()) };
    let _ = receiver.recv_timeout(Duration::from_secs(30));
}

/// Holds `s` until the returned sender sends (or is dropped).
fn hold(s: C_Stream) -> Sender<()> {
    let (sender, receiver) = channel::<()>();
    let data = Box::into_raw(Box::new(receiver)).cast::<c_void>();
    let mut d = dev();
    assert_eq!(
        call!(stream_add_callback(&mut d, s, Some(gate), data)),
        C_SUCCESS
    );
    sender
}

/// A callback that writes 42 into the `u8` it is given.
unsafe extern "C" fn write_42(_: C_Device, _: C_Stream, data: *mut c_void, _: *mut C_Status) {
    // SAFETY: `data` points to a live `u8` the test owns until the stream is synchronised.
    unsafe { data.cast::<u8>().write(42) };
}

/// Queues [`write_42`] on `s`, writing to `flag`.
fn queue_write_42(s: C_Stream, flag: *mut u8) {
    let mut d = dev();
    assert_eq!(
        call!(stream_add_callback(&mut d, s, Some(write_42), flag.cast())),
        C_SUCCESS
    );
}

fn live() -> [usize; 6] {
    let mut out = [0usize; 6];
    // SAFETY: room for six entries.
    assert!(unsafe { devstream_paddle::devstream_paddle_live(CPU, out.as_mut_ptr()) });
    out
}

/// The tests run one at a time (one counts live objects).
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds [`SERIAL`]; when dropped, first gives the test thread's kept event slots back, so the
/// next test sees the free lists as this one left them (a thread gives them back when it
/// exits, which for a test thread may be after the next test has begun).
struct Serial(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl Drop for Serial {
    fn drop(&mut self) {
        devstream_paddle::runtime::give_back_kept_events();
    }
}

fn serial() -> Serial {
    Serial(SERIAL.lock().unwrap_or_else(|p| p.into_inner()))
}

#[test]
fn device_management_answers_as_paddle_expects() {
    let _serial = serial();
    let mut count = 0usize;
    assert_eq!(call!(get_device_count(&mut count)), C_SUCCESS);
    assert_eq!(count, 1, "one cpu place");
    let mut list = [usize::MAX; 1];
    assert_eq!(call!(get_device_list(list.as_mut_ptr())), C_SUCCESS);
    assert_eq!(list, [0]);
    assert_eq!(call!(get_device_count(null_mut())), C_ERROR);
    let mut d = dev();
    assert_eq!(call!(set_device(&mut d)), C_SUCCESS);
    let mut got = C_Device_st { id: -7 };
    assert_eq!(call!(get_device(&mut got)), C_SUCCESS);
    assert_eq!(got.id, 0);
    let mut bad = C_Device_st { id: 1 };
    assert_eq!(call!(set_device(&mut bad)), C_ERROR);
    assert_eq!(call!(init_device(&mut bad)), C_ERROR);
    assert_eq!(call!(set_device(null_mut())), C_ERROR);
    assert_eq!(call!(get_device(null_mut())), C_ERROR);
    assert_eq!(call!(init_device(&mut d)), C_SUCCESS);
    assert_eq!(call!(synchronize_device(&mut d)), C_SUCCESS);
    let (mut total, mut free) = (0, 0);
    assert_eq!(
        call!(device_memory_stats(&mut d, &mut total, &mut free)),
        C_SUCCESS
    );
    assert!(total > 0 && free <= total);
    assert_eq!(
        call!(device_memory_stats(&mut d, null_mut(), &mut free)),
        C_ERROR
    );
    let mut chunk = 0;
    assert_eq!(call!(device_min_chunk_size(&mut d, &mut chunk)), C_SUCCESS);
    assert_eq!(chunk, 256);
    assert_eq!(call!(device_max_chunk_size(&mut d, &mut chunk)), C_SUCCESS);
    assert!(chunk >= 256);
    assert_eq!(
        call!(device_extra_padding_size(&mut d, &mut chunk)),
        C_SUCCESS
    );
    assert_eq!(chunk, 0);
    assert_eq!(call!(device_realloc_size(&mut bad, &mut chunk)), C_ERROR);
    assert!(
        table().unified_memory_allocate.is_none(),
        "not honoured: null"
    );
    assert!(table().cuda_graph_debug_dot_print.is_none());
}

#[test]
fn memory_round_trips_through_translated_addresses() {
    let _serial = serial();
    let size = 1000;
    let ptr = alloc(size);
    assert_eq!(ptr as usize % 256, 0);
    let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
    assert_eq!(h2d(ptr, &data), C_SUCCESS);
    assert_eq!(d2h(ptr, size).unwrap(), data);
    // Pointer arithmetic inside the allocation, as Paddle's allocator does.
    let inner = ptr.cast::<u8>().wrapping_add(100).cast::<c_void>();
    assert_eq!(h2d(inner, &[7; 10]), C_SUCCESS);
    assert_eq!(
        d2h(inner, 12).unwrap(),
        [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 110, 111]
    );
    let mut d = dev();
    assert_eq!(call!(device_memory_set(&mut d, inner, 9, 3)), C_SUCCESS);
    assert_eq!(d2h(inner, 4).unwrap(), [9, 9, 9, 7]);
    // Device to device inside one allocation, and to another.
    let other = alloc(16);
    assert_eq!(call!(memory_copy_d2d(&mut d, other, inner, 4)), C_SUCCESS);
    assert_eq!(d2h(other, 4).unwrap(), [9, 9, 9, 7]);
    // Addresses outside a live allocation are errors, never accesses.
    let end = ptr.cast::<u8>().wrapping_add(size).cast::<c_void>();
    assert_eq!(h2d(end, &[1]), C_ERROR, "one past the end");
    assert_eq!(d2h(ptr, size + 1), Err(C_ERROR), "runs past the end");
    assert_eq!(
        d2h(0x1000 as *const c_void, 4),
        Err(C_ERROR),
        "never allocated"
    );
    assert_eq!(h2d(null_mut(), &[1]), C_ERROR);
    assert_eq!(call!(memory_copy_h2d(&mut d, ptr, null(), 4)), C_ERROR);
    assert_eq!(call!(memory_copy_d2h(&mut d, null_mut(), ptr, 4)), C_ERROR);
    assert_eq!(
        call!(device_memory_deallocate(&mut d, inner, 0)),
        C_ERROR,
        "not a start"
    );
    let mut out = null_mut();
    assert_eq!(
        call!(device_memory_allocate(&mut d, null_mut(), 8)),
        C_ERROR
    );
    let mut bad = C_Device_st { id: 3 };
    assert_eq!(
        call!(device_memory_allocate(&mut bad, &mut out, 8)),
        C_ERROR
    );
    assert!(out.is_null(), "out-parameters are written only on success");
    // Out of memory: C_SUCCESS with a null pointer, as Paddle's CustomAllocator reads it.
    out = std::ptr::dangling_mut::<c_void>();
    assert_eq!(
        call!(device_memory_allocate(&mut d, &mut out, 1 << 62)),
        C_SUCCESS
    );
    assert!(out.is_null(), "exhaustion writes a null pointer");
    free(other, 16);
    free(ptr, size);
    assert_eq!(
        call!(device_memory_deallocate(&mut d, ptr, size)),
        C_ERROR,
        "twice"
    );
    assert_eq!(d2h(ptr, 4), Err(C_ERROR), "freed");
    // Host memory is plain, writable memory.
    let mut host = null_mut();
    assert_eq!(
        call!(host_memory_allocate(&mut d, &mut host, 64)),
        C_SUCCESS
    );
    // SAFETY: 64 writable bytes just allocated.
    unsafe { host.cast::<u8>().write_bytes(5, 64) };
    assert_eq!(call!(host_memory_deallocate(&mut d, host, 64)), C_SUCCESS);
    assert_eq!(call!(host_memory_deallocate(&mut d, host, 64)), C_ERROR);
}

#[test]
fn async_copies_keep_stream_order() {
    let _serial = serial();
    let s = stream();
    let ptr = alloc(4);
    let mut d = dev();
    // The source is written by a callback queued before the copy: the copy must see it.
    let release = hold(s);
    let mut source = 0u8;
    let source_ptr: *mut u8 = &mut source;
    queue_write_42(s, source_ptr);
    assert_eq!(
        call!(async_memory_copy_h2d(&mut d, s, ptr, source_ptr.cast(), 1)),
        C_SUCCESS
    );
    let mut back = [0u8; 1];
    assert_eq!(
        call!(async_memory_copy_d2h(
            &mut d,
            s,
            back.as_mut_ptr().cast(),
            ptr,
            1
        )),
        C_SUCCESS
    );
    assert_eq!(
        call!(query_stream(&mut d, s)),
        C_FAILED,
        "held: not complete"
    );
    release.send(()).unwrap();
    assert_eq!(sync(s), C_SUCCESS);
    assert_eq!(call!(query_stream(&mut d, s)), C_SUCCESS);
    assert_eq!(back, [42]);
    // Async device-to-device, and errors of async copies.
    let other = alloc(4);
    assert_eq!(
        call!(async_memory_copy_d2d(&mut d, s, other, ptr, 1)),
        C_SUCCESS
    );
    assert_eq!(sync(s), C_SUCCESS);
    assert_eq!(d2h(other, 1).unwrap(), [42]);
    assert_eq!(
        call!(async_memory_copy_d2d(&mut d, s, other, ptr, 5)),
        C_ERROR,
        "past the end"
    );
    let bogus = 0xdead_0001_usize as C_Stream; // handles are multiples of 16
    assert_eq!(
        call!(async_memory_copy_d2d(&mut d, bogus, other, ptr, 1)),
        C_ERROR
    );
    // The null stream is the device's default stream.
    assert_eq!(
        call!(async_memory_copy_d2d(&mut d, null_mut(), other, ptr, 1)),
        C_SUCCESS
    );
    assert_eq!(sync(null_mut()), C_SUCCESS);
    free(other, 4);
    free(ptr, 4);
    destroy(s);
}

#[test]
fn events_order_streams() {
    let _serial = serial();
    let a = stream();
    let b = stream();
    let mut d = dev();
    let event = new_event();
    assert_eq!(
        call!(query_event(&mut d, event)),
        C_SUCCESS,
        "never recorded"
    );
    let release = hold(a);
    assert_eq!(call!(record_event(&mut d, a, event)), C_SUCCESS);
    assert_eq!(call!(query_event(&mut d, event)), C_FAILED);
    assert_eq!(call!(stream_wait_event(&mut d, b, event)), C_SUCCESS);
    let mut flag = 0u8;
    let flag_ptr: *mut u8 = &mut flag;
    queue_write_42(b, flag_ptr);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(call!(query_stream(&mut d, b)), C_FAILED, "b waits for a");
    release.send(()).unwrap();
    assert_eq!(call!(synchronize_event(&mut d, event)), C_SUCCESS);
    assert_eq!(sync(b), C_SUCCESS);
    // SAFETY: the stream that wrote it is synchronised.
    assert_eq!(unsafe { flag_ptr.read() }, 42);
    assert_eq!(call!(destroy_event(&mut d, event)), C_SUCCESS);
    assert_eq!(call!(destroy_event(&mut d, event)), C_ERROR, "twice");
    assert_eq!(call!(query_event(&mut d, event)), C_ERROR, "destroyed");
    assert_eq!(call!(record_event(&mut d, a, event)), C_ERROR);
    assert_eq!(call!(create_event(&mut d, null_mut())), C_ERROR);
    assert_eq!(
        call!(stream_add_callback(&mut d, a, None, null_mut())),
        C_ERROR
    );
    // A handle of another device type (another copy of the library, its own counters) with
    // the same number is unknown here.
    let wgpu_stream = devstream_paddle::handles::tag(devstream_paddle::handles::Kind::Stream, 1);
    let foreign = ((a as usize) & ((1 << 60) - 1)) | (wgpu_stream << 60);
    assert_eq!(call!(query_stream(&mut d, foreign as C_Stream)), C_ERROR);
    destroy(a);
    destroy(b);
    assert_eq!(call!(destroy_stream(&mut d, a)), C_ERROR, "twice");
    assert_eq!(call!(query_stream(&mut d, a)), C_ERROR, "destroyed");
}

#[test]
fn captured_copies_run_at_every_launch() {
    let _serial = serial();
    let s = stream();
    let src = alloc(4);
    let dst = alloc(4);
    let mut d = dev();
    assert_eq!(
        call!(cuda_stream_begin_capture(
            &mut d,
            s,
            C_StreamCaptureModeThreadLocal
        )),
        C_SUCCESS
    );
    let mut status = -1;
    let mut id = 0;
    assert_eq!(
        call!(cuda_stream_capture_info(
            &mut d,
            s,
            &mut status,
            &mut id,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut()
        )),
        C_SUCCESS
    );
    assert_eq!(status, C_StreamCaptureStatusActive);
    assert!(id > 0);
    assert_eq!(
        call!(async_memory_copy_d2d(&mut d, s, dst, src, 4)),
        C_SUCCESS
    );
    let mut graph = null_mut();
    assert_eq!(
        call!(cuda_stream_end_captrue(&mut d, s, &mut graph)),
        C_SUCCESS
    );
    let mut nodes = 0;
    assert_eq!(
        call!(cuda_graph_get_nodes(graph, null_mut(), &mut nodes)),
        C_SUCCESS
    );
    assert_eq!(nodes, 1);
    let mut hooks = C_GraphHookManager {
        size: 9,
        hooks: null_mut(),
        user_data: null_mut(),
    };
    assert_eq!(
        call!(get_parameter_setter_for_exec_graph(graph, &mut hooks)),
        C_SUCCESS
    );
    assert_eq!(hooks.size, 0);
    let mut exec = null_mut();
    assert_eq!(
        call!(cuda_graph_instantiate(
            &mut exec,
            &mut graph,
            null_mut(),
            null_mut(),
            0
        )),
        C_SUCCESS
    );
    for round in [3u8, 4] {
        assert_eq!(h2d(src, &[round; 4]), C_SUCCESS);
        assert_eq!(call!(cuda_graph_launch(&mut d, exec, s)), C_SUCCESS);
        assert_eq!(sync(s), C_SUCCESS);
        assert_eq!(d2h(dst, 4).unwrap(), [round; 4], "launch {round}");
    }
    assert_eq!(call!(cuda_graph_exec_destroy(exec)), C_SUCCESS);
    assert_eq!(call!(cuda_graph_destroy(graph)), C_SUCCESS);
    assert_eq!(
        call!(cuda_graph_launch(&mut d, exec, s)),
        C_ERROR,
        "destroyed"
    );
    assert_eq!(call!(cuda_graph_destroy(graph)), C_ERROR, "twice");
    assert_eq!(
        call!(cuda_stream_begin_capture(&mut d, null_mut(), 0)),
        C_ERROR,
        "the null stream never captures"
    );
    assert_eq!(
        call!(cuda_stream_begin_capture(&mut d, s, 7)),
        C_ERROR,
        "unknown mode"
    );
    free(src, 4);
    free(dst, 4);
    destroy(s);
}

#[test]
fn a_destroyed_event_handed_out_again_answers_as_never_recorded() {
    let _serial = serial();
    let a = stream();
    let b = stream();
    let mut d = dev();
    let release = hold(a);
    let old = new_event();
    assert_eq!(call!(record_event(&mut d, a, old)), C_SUCCESS);
    assert_eq!(call!(query_event(&mut d, old)), C_FAILED, "a is held");
    assert_eq!(call!(destroy_event(&mut d, old)), C_SUCCESS);
    let event = new_event();
    // This thread gets the slot (and its devstream event, still recorded behind the held
    // work) back, under a new handle.
    let index = |h: C_Event| ((h as usize) >> 4) & ((1 << 20) - 1);
    assert_eq!(index(event), index(old));
    assert_ne!(event, old);
    assert_eq!(call!(query_event(&mut d, old)), C_ERROR, "the old handle");
    // Never recorded: complete, and waiting on it orders nothing.
    assert_eq!(call!(query_event(&mut d, event)), C_SUCCESS);
    assert_eq!(call!(synchronize_event(&mut d, event)), C_SUCCESS);
    assert_eq!(call!(stream_wait_event(&mut d, b, event)), C_SUCCESS);
    assert_eq!(
        call!(query_stream(&mut d, b)),
        C_SUCCESS,
        "b waits for nothing"
    );
    // Recorded again: the new record counts.
    assert_eq!(call!(record_event(&mut d, a, event)), C_SUCCESS);
    assert_eq!(call!(query_event(&mut d, event)), C_FAILED);
    assert_eq!(call!(stream_wait_event(&mut d, b, event)), C_SUCCESS);
    assert_eq!(call!(query_stream(&mut d, b)), C_FAILED, "b waits for a");
    release.send(()).unwrap();
    assert_eq!(call!(synchronize_event(&mut d, event)), C_SUCCESS);
    assert_eq!(sync(b), C_SUCCESS);
    assert_eq!(call!(destroy_event(&mut d, event)), C_SUCCESS);
    destroy(a);
    destroy(b);
}

/// A thread keeps the slots of the events it destroys (up to 32) for its next creates, gives
/// the rest back at once and the kept ones back when it exits: another thread then gets the
/// very same slots, and nothing is left live.
#[test]
fn a_thread_keeps_its_destroyed_events_and_gives_them_back_when_it_exits() {
    let _serial = serial();
    table();
    let before = live();
    let index = |h: usize| (h >> 4) & ((1 << 20) - 1);
    let destroy_all = |events: &[usize]| {
        let mut d = dev();
        for &e in events {
            assert_eq!(call!(destroy_event(&mut d, e as C_Event)), C_SUCCESS);
        }
    };
    let create = |n: usize| -> Vec<usize> { (0..n).map(|_| new_event() as usize).collect() };
    let slots = std::thread::spawn(move || {
        let first = create(40);
        destroy_all(&first);
        let again = create(40);
        let mut a: Vec<usize> = first.iter().map(|&h| index(h)).collect();
        let mut b: Vec<usize> = again.iter().map(|&h| index(h)).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "40 creates after 40 destroys reuse the same 40 slots");
        assert!(
            first.iter().all(|h| !again.contains(h)),
            "new generations, not the old handles"
        );
        destroy_all(&again);
        b
    })
    .join()
    .expect("the thread");
    assert_eq!(live()[..2], before[..2], "nothing live after the thread");
    // The exited thread's kept slots went back to the device's free list, last in first out.
    let mine = create(40);
    let mut got: Vec<usize> = mine.iter().map(|&h| index(h)).collect();
    got.sort_unstable();
    assert_eq!(got, slots, "the slots the thread kept, handed out again");
    destroy_all(&mine);
    assert_eq!(live()[..2], before[..2]);
}

/// A record on a stream that has finished its work settles the event without a devstream
/// record (`Runtime::record_event`); what it must still mean: complete at once, waiting on it
/// orders nothing, and a later record of pending work (or a record behind pending work before
/// it) counts again, in either order.
#[test]
fn a_record_on_an_idle_stream_is_complete_and_a_later_busy_record_counts() {
    let _serial = serial();
    let a = stream();
    let b = stream();
    let mut d = dev();
    let event = new_event();
    // Work that ran to its end before the record: the event is complete.
    let mut flag = 0u8;
    let flag_ptr: *mut u8 = &mut flag;
    queue_write_42(a, flag_ptr);
    assert_eq!(sync(a), C_SUCCESS);
    assert_eq!(call!(record_event(&mut d, a, event)), C_SUCCESS);
    assert_eq!(call!(query_event(&mut d, event)), C_SUCCESS);
    assert_eq!(call!(synchronize_event(&mut d, event)), C_SUCCESS);
    // SAFETY: the stream that wrote it is synchronised.
    assert_eq!(unsafe { flag_ptr.read() }, 42);
    // Recorded again behind held work: pending, and b waits for it.
    let release = hold(a);
    assert_eq!(call!(record_event(&mut d, a, event)), C_SUCCESS);
    assert_eq!(call!(query_event(&mut d, event)), C_FAILED, "a is held");
    assert_eq!(call!(stream_wait_event(&mut d, b, event)), C_SUCCESS);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(call!(query_stream(&mut d, b)), C_FAILED, "b waits for a");
    // Recorded on an idle stream (b is busy, c is not) while its last record is pending:
    // the new record replaces it, complete.
    let c = stream();
    assert_eq!(call!(record_event(&mut d, c, event)), C_SUCCESS);
    assert_eq!(call!(query_event(&mut d, event)), C_SUCCESS, "c was idle");
    assert_eq!(call!(stream_wait_event(&mut d, c, event)), C_SUCCESS);
    assert_eq!(
        call!(query_stream(&mut d, c)),
        C_SUCCESS,
        "c waits for nothing"
    );
    // And behind b's pending wait: pending again until a is released.
    assert_eq!(call!(record_event(&mut d, b, event)), C_SUCCESS);
    assert_eq!(call!(query_event(&mut d, event)), C_FAILED, "b waits for a");
    release.send(()).unwrap();
    assert_eq!(call!(synchronize_event(&mut d, event)), C_SUCCESS);
    assert_eq!(call!(query_stream(&mut d, b)), C_SUCCESS);
    assert_eq!(call!(destroy_event(&mut d, event)), C_SUCCESS);
    destroy(a);
    destroy(b);
    destroy(c);
}

#[test]
fn streams_and_events_destroyed_while_other_threads_use_them() {
    let _serial = serial();
    table();
    let before = live();
    for _ in 0..20 {
        let s = stream();
        let mut d = dev();
        let event = new_event();
        let (s_bits, e_bits) = (s as usize, event as usize);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(move || {
                    let mut d = dev();
                    let (s, event) = (s_bits as C_Stream, e_bits as C_Event);
                    for _ in 0..200 {
                        // Each call works on a live object or answers C_ERROR.
                        let r = call!(record_event(&mut d, s, event));
                        assert!(r == C_SUCCESS || r == C_ERROR, "{r:?}");
                        let w = call!(stream_wait_event(&mut d, s, event));
                        assert!(w == C_SUCCESS || w == C_ERROR, "{w:?}");
                        let q = call!(query_stream(&mut d, s));
                        assert!(q == C_SUCCESS || q == C_FAILED || q == C_ERROR, "{q:?}");
                    }
                });
            }
            std::thread::sleep(Duration::from_micros(200));
            assert_eq!(call!(destroy_event(&mut d, event)), C_SUCCESS);
            destroy(s);
        });
    }
    assert_eq!(live()[..2], before[..2], "streams, events");
}

/// A callback that reports a failure.
unsafe extern "C" fn fail_it(_: C_Device, _: C_Stream, _: *mut c_void, status: *mut C_Status) {
    // SAFETY: the plug-in passes a writable status.
    unsafe { status.write(C_ERROR) };
}

#[test]
fn a_destroyed_stream_is_reused_only_idle_and_sound() {
    let _serial = serial();
    let index = |h: C_Stream| ((h as usize) >> 4) & ((1 << 20) - 1);
    let mut d = dev();
    // Idle when destroyed: the next stream takes its slot and is as good as new.
    let idle = stream();
    assert_eq!(sync(idle), C_SUCCESS);
    destroy(idle);
    let again = stream();
    assert_eq!(index(again), index(idle));
    assert_ne!(again, idle);
    assert_eq!(call!(query_stream(&mut d, idle)), C_ERROR, "the old handle");
    assert_eq!(call!(query_stream(&mut d, again)), C_SUCCESS);
    destroy(again);
    // Busy when destroyed: its work runs on, and a new stream does not wait for it.
    let busy = stream();
    let release = hold(busy);
    destroy(busy);
    let fresh = stream();
    assert_ne!(index(fresh), index(busy));
    assert_eq!(call!(query_stream(&mut d, fresh)), C_SUCCESS);
    assert_eq!(sync(fresh), C_SUCCESS);
    release.send(()).unwrap();
    // Failed and destroyed before anyone synchronised it: the failure is taken (and
    // reported as a warning) when the slot is probed, and the slot's next stream inherits
    // nothing.
    let failed = stream();
    assert_eq!(
        call!(stream_add_callback(
            &mut d,
            failed,
            Some(fail_it),
            null_mut()
        )),
        C_SUCCESS
    );
    while call!(query_stream(&mut d, failed)) != C_SUCCESS {
        std::thread::yield_now();
    }
    destroy(failed);
    let reused = stream();
    assert_eq!(
        index(reused),
        index(failed),
        "a failed stream's slot is reused"
    );
    assert_eq!(call!(query_stream(&mut d, reused)), C_SUCCESS);
    assert_eq!(sync(reused), C_SUCCESS, "no failure inherited");
    destroy(reused);
    destroy(fresh);
}

#[test]
fn creating_a_stream_during_a_global_capture_leaves_the_capture_valid() {
    let _serial = serial();
    let mut d = dev();
    // Two idle destroyed streams: `s` reuses one slot, and the create_stream during the
    // capture would probe the other.
    let (idle, idle_too) = (stream(), stream());
    assert_eq!(sync(idle), C_SUCCESS);
    assert_eq!(sync(idle_too), C_SUCCESS);
    destroy(idle);
    destroy(idle_too);
    let s = stream();
    assert_eq!(
        call!(cuda_stream_begin_capture(
            &mut d,
            s,
            C_StreamCaptureModeGlobal
        )),
        C_SUCCESS
    );
    // Probing a destroyed stream (query, synchronize) now would be an unsafe call.
    let other = stream();
    let mut status = -1;
    assert_eq!(
        call!(cuda_stream_capture_info(
            &mut d,
            s,
            &mut status,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut()
        )),
        C_SUCCESS
    );
    assert_eq!(status, C_StreamCaptureStatusActive, "still capturing");
    let mut graph = null_mut();
    assert_eq!(
        call!(cuda_stream_end_captrue(&mut d, s, &mut graph)),
        C_SUCCESS
    );
    assert_eq!(call!(cuda_graph_destroy(graph)), C_SUCCESS);
    destroy(other);
    destroy(s);
}

#[test]
fn nothing_leaks() {
    let _serial = serial();
    table();
    let before = live();
    let s = stream();
    let ptr = alloc(64);
    let mut d = dev();
    let event = new_event();
    assert_eq!(call!(record_event(&mut d, s, event)), C_SUCCESS);
    assert_eq!(live()[2], before[2] + 1);
    assert_eq!(call!(destroy_event(&mut d, event)), C_SUCCESS);
    free(ptr, 64);
    destroy(s);
    let after = live();
    assert_eq!(after[2..], before[2..], "allocations, graphs");
    let (mut streams, mut events) = (u64::MAX, u64::MAX);
    // SAFETY: two writable counters.
    unsafe { devstream_paddle::devstream_paddle_live_counts(&mut streams, &mut events) };
    assert_eq!((streams as usize, events as usize), (after[0], after[1]));
}

#[test]
fn cpu_memory_is_the_host_memory_paddle_writes_through() {
    let _serial = serial();
    table();
    if std::env::var("DEVSTREAM_PADDLE_CPU_MEMORY").as_deref() == Ok("buffers") {
        return; // devstream buffers behind reserved addresses: never dereferenced
    }
    let ptr = alloc(8);
    // Paddle's kernel fallback writes the tensor on the host (`full`).
    // SAFETY: 8 bytes of host memory just allocated.
    unsafe { ptr.cast::<u8>().write_bytes(6, 8) };
    assert_eq!(d2h(ptr, 8).unwrap(), [6; 8]);
    assert_eq!(h2d(ptr, &[1, 2]), C_SUCCESS);
    // SAFETY: as above; the synchronous copy is complete.
    assert_eq!(unsafe { ptr.cast::<[u8; 3]>().read() }, [1, 2, 6]);
    free(ptr, 8);
}

/// The `stream` argument of every run of [`note_stream`], in run order.
static NOTED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A callback that notes the stream it is told, sleeping a little first (so that concurrent
/// launches would interleave their callbacks if nothing ordered them), and reports `C_ERROR`
/// when told the stream `data` names.
unsafe extern "C" fn note_stream(
    _: C_Device,
    stream: C_Stream,
    data: *mut c_void,
    status: *mut C_Status,
) {
    std::thread::sleep(Duration::from_millis(2));
    NOTED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(stream as usize);
    if !data.is_null() && data == stream.cast::<c_void>() {
        // SAFETY: the plug-in passes a writable status.
        unsafe { status.write(C_ERROR) };
    }
}

/// Callbacks captured into a graph are told the stream of the launch that runs them, also when
/// launches on two streams are queued at once; a failure one reports goes to that stream.
#[test]
fn captured_callbacks_are_told_their_launch_stream() {
    let _serial = serial();
    NOTED.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let (capturing, a, b) = (stream(), stream(), stream());
    let mut d = dev();
    assert_eq!(
        call!(cuda_stream_begin_capture(
            &mut d,
            capturing,
            C_StreamCaptureModeThreadLocal
        )),
        C_SUCCESS
    );
    for data in [null_mut(), null_mut(), a.cast::<c_void>()] {
        assert_eq!(
            call!(stream_add_callback(
                &mut d,
                capturing,
                Some(note_stream),
                data
            )),
            C_SUCCESS
        );
    }
    let mut graph = null_mut();
    assert_eq!(
        call!(cuda_stream_end_captrue(&mut d, capturing, &mut graph)),
        C_SUCCESS
    );
    let mut exec = null_mut();
    assert_eq!(
        call!(cuda_graph_instantiate(
            &mut exec,
            &mut graph,
            null_mut(),
            null_mut(),
            0
        )),
        C_SUCCESS
    );
    assert!(
        NOTED.lock().unwrap_or_else(|p| p.into_inner()).is_empty(),
        "captured callbacks run only when launched"
    );
    let order = [a, b, b, a, b, a];
    for s in order {
        assert_eq!(call!(cuda_graph_launch(&mut d, exec, s)), C_SUCCESS);
    }
    assert_eq!(sync(a), C_ERROR, "a's launches reported a failure");
    assert_eq!(sync(b), C_SUCCESS, "b's launches reported none");
    let expected: Vec<usize> = order.iter().flat_map(|&s| [s as usize; 3]).collect();
    assert_eq!(
        *NOTED.lock().unwrap_or_else(|p| p.into_inner()),
        expected,
        "each launch's callbacks, in launch order, told their launch's stream"
    );
    assert_eq!(sync(a), C_SUCCESS, "reported once");
    assert_eq!(call!(cuda_graph_exec_destroy(exec)), C_SUCCESS);
    assert_eq!(call!(cuda_graph_destroy(graph)), C_SUCCESS);
    for s in [capturing, a, b] {
        destroy(s);
    }
}

/// A callback that does nothing.
unsafe extern "C" fn do_nothing(_: C_Device, _: C_Stream, _: *mut c_void, _: *mut C_Status) {}

/// Every call that takes a stream, given `handle` (no live stream), answers `C_ERROR`.
fn refused_as_stream(handle: usize, what: &str) {
    let mut d = dev();
    let s = handle as C_Stream;
    let (ptr, other) = (alloc(16), alloc(16));
    let event = new_event();
    let mut byte = 0u8;
    let byte_ptr: *mut u8 = &mut byte;
    let mut graph = null_mut();
    let mut status = -1;
    let calls = [
        ("query_stream", call!(query_stream(&mut d, s))),
        ("synchronize_stream", call!(synchronize_stream(&mut d, s))),
        (
            "stream_add_callback",
            call!(stream_add_callback(&mut d, s, Some(do_nothing), null_mut())),
        ),
        ("record_event", call!(record_event(&mut d, s, event))),
        (
            "stream_wait_event",
            call!(stream_wait_event(&mut d, s, event)),
        ),
        (
            "async_memory_copy_h2d",
            call!(async_memory_copy_h2d(&mut d, s, ptr, byte_ptr.cast(), 1)),
        ),
        (
            "async_memory_copy_d2h",
            call!(async_memory_copy_d2h(&mut d, s, byte_ptr.cast(), ptr, 1)),
        ),
        (
            "async_memory_copy_d2d",
            call!(async_memory_copy_d2d(&mut d, s, other, ptr, 1)),
        ),
        (
            "async_memory_copy_p2p",
            call!(async_memory_copy_p2p(&mut d, &mut dev(), s, other, ptr, 1)),
        ),
        (
            "cuda_stream_capture_info",
            call!(cuda_stream_capture_info(
                &mut d,
                s,
                &mut status,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut()
            )),
        ),
        (
            "cuda_stream_end_captrue",
            call!(cuda_stream_end_captrue(&mut d, s, &mut graph)),
        ),
        (
            "cuda_stream_begin_capture",
            call!(cuda_stream_begin_capture(
                &mut d,
                s,
                C_StreamCaptureModeRelaxed
            )),
        ),
        ("destroy_stream", call!(destroy_stream(&mut d, s))),
    ];
    for (function, answer) in calls {
        assert_eq!(answer, C_ERROR, "{function} given {what} {handle:#x}");
    }
    assert!(graph.is_null(), "nothing written");
    assert_eq!(call!(destroy_event(&mut d, event)), C_SUCCESS);
    free(ptr, 16);
    free(other, 16);
}

/// Every call that takes an event, given `handle` (no live event), answers `C_ERROR`.
fn refused_as_event(handle: usize, what: &str) {
    let mut d = dev();
    let e = handle as C_Event;
    let s = stream();
    let calls = [
        ("query_event", call!(query_event(&mut d, e))),
        ("synchronize_event", call!(synchronize_event(&mut d, e))),
        ("record_event", call!(record_event(&mut d, s, e))),
        ("stream_wait_event", call!(stream_wait_event(&mut d, s, e))),
        ("destroy_event", call!(destroy_event(&mut d, e))),
    ];
    for (function, answer) in calls {
        assert_eq!(answer, C_ERROR, "{function} given {what} {handle:#x}");
    }
    destroy(s);
}

/// Every call that takes a graph or an executable graph, given `handle` (neither), answers
/// `C_ERROR`.
fn refused_as_graph(handle: usize, what: &str) {
    let mut d = dev();
    let s = stream();
    let mut graph = handle as C_CudaGraph;
    let mut exec = null_mut();
    let mut nodes = 0;
    let mut hooks = C_GraphHookManager {
        size: 9,
        hooks: null_mut(),
        user_data: null_mut(),
    };
    let calls = [
        (
            "cuda_graph_launch",
            call!(cuda_graph_launch(&mut d, handle as C_GraphExec, s)),
        ),
        (
            "cuda_graph_instantiate",
            call!(cuda_graph_instantiate(
                &mut exec,
                &mut graph,
                null_mut(),
                null_mut(),
                0
            )),
        ),
        (
            "cuda_graph_get_nodes",
            call!(cuda_graph_get_nodes(graph, null_mut(), &mut nodes)),
        ),
        (
            "get_parameter_setter_for_exec_graph",
            call!(get_parameter_setter_for_exec_graph(graph, &mut hooks)),
        ),
        (
            "cuda_graph_exec_destroy",
            call!(cuda_graph_exec_destroy(handle as C_GraphExec)),
        ),
        ("cuda_graph_destroy", call!(cuda_graph_destroy(graph))),
    ];
    for (function, answer) in calls {
        assert_eq!(answer, C_ERROR, "{function} given {what} {handle:#x}");
    }
    assert!(
        exec.is_null() && nodes == 0 && hooks.size == 9,
        "nothing written"
    );
    destroy(s);
}

/// Every call that takes a device address, given `address` (inside no allocation), answers
/// `C_ERROR`.
fn refused_as_address(address: usize, what: &str) {
    let mut d = dev();
    let a = address as *mut c_void;
    let mut byte = [0u8; 1];
    let calls = [
        (
            "device_memory_deallocate",
            call!(device_memory_deallocate(&mut d, a, 1)),
        ),
        (
            "host_memory_deallocate",
            call!(host_memory_deallocate(&mut d, a, 1)),
        ),
        (
            "device_memory_set",
            call!(device_memory_set(&mut d, a, 1, 1)),
        ),
        ("memory_copy_h2d", h2d(a, &byte)),
        (
            "memory_copy_d2h",
            call!(memory_copy_d2h(&mut d, byte.as_mut_ptr().cast(), a, 1)),
        ),
    ];
    for (function, answer) in calls {
        assert_eq!(answer, C_ERROR, "{function} given {what} {address:#x}");
    }
}

/// Every handle names its kind: a stream handle is no event, graph, executable graph or
/// address (and so on for each kind), whatever the tables' states; destroyed and forged
/// handles name nothing; and the calls refused act on nothing: every real object still works
/// afterwards, and each is destroyed exactly once.
#[test]
fn a_handle_of_one_kind_is_refused_by_every_call_of_another_kind() {
    let _serial = serial();
    table();
    let before = live();
    let mut d = dev();
    // Enough of each that both tables hand out slots never used before, whose first handles
    // coincide unless the kinds are told apart.
    let streams: Vec<C_Stream> = (0..256).map(|_| stream()).collect();
    let events: Vec<C_Event> = (0..256).map(|_| new_event()).collect();
    let capturing = streams[0];
    assert_eq!(
        call!(cuda_stream_begin_capture(
            &mut d,
            capturing,
            C_StreamCaptureModeThreadLocal
        )),
        C_SUCCESS
    );
    let mut graph = null_mut();
    assert_eq!(
        call!(cuda_stream_end_captrue(&mut d, capturing, &mut graph)),
        C_SUCCESS
    );
    let mut exec = null_mut();
    assert_eq!(
        call!(cuda_graph_instantiate(
            &mut exec,
            &mut graph,
            null_mut(),
            null_mut(),
            0
        )),
        C_SUCCESS
    );
    let memory = alloc(64);
    let mut host = null_mut();
    assert_eq!(
        call!(host_memory_allocate(&mut d, &mut host, 64)),
        C_SUCCESS
    );
    for &s in &streams {
        refused_as_event(s as usize, "a stream");
        refused_as_graph(s as usize, "a stream");
        refused_as_address(s as usize, "a stream");
    }
    for &e in &events {
        refused_as_stream(e as usize, "an event");
        refused_as_graph(e as usize, "an event");
        refused_as_address(e as usize, "an event");
    }
    for (handle, what) in [(graph as usize, "a graph"), (exec as usize, "an exec")] {
        refused_as_stream(handle, what);
        refused_as_event(handle, what);
        refused_as_address(handle, what);
    }
    for (address, what) in [
        (memory as usize, "device memory"),
        (host as usize, "host memory"),
    ] {
        refused_as_stream(address, what);
        refused_as_event(address, what);
        refused_as_graph(address, what);
    }
    // Forged: another generation, another device type, not a multiple of 16, past the table.
    for (handle, what) in [
        (streams[1] as usize, "stream"),
        (events[1] as usize, "event"),
    ] {
        for (forged, how) in [
            (handle ^ (1 << 24), "another generation"),
            (handle ^ (1 << 59), "another generation"),
            ((handle & ((1 << 60) - 1)) | (0xf << 60), "another tag"),
            (handle | 8, "not a multiple of 16"),
            (handle | (((1 << 20) - 1) << 4), "the last index"),
            (usize::MAX & !15, "all ones"),
            (16, "index 1, generation 0"),
        ] {
            let what = format!("a forged {what} ({how})");
            refused_as_stream(forged, &what);
            refused_as_event(forged, &what);
            refused_as_graph(forged, &what);
        }
    }
    // The objects are intact: each event records and completes, each stream runs work.
    let mut flag = 0u8;
    let flag_ptr: *mut u8 = &mut flag;
    for (&s, &e) in streams.iter().zip(&events) {
        queue_write_42(s, flag_ptr);
        assert_eq!(call!(record_event(&mut d, s, e)), C_SUCCESS, "{e:?}");
        assert_eq!(call!(synchronize_event(&mut d, e)), C_SUCCESS);
        assert_eq!(call!(query_event(&mut d, e)), C_SUCCESS);
        assert_eq!(sync(s), C_SUCCESS);
    }
    // SAFETY: every stream that wrote it is synchronised.
    assert_eq!(unsafe { flag_ptr.read() }, 42);
    assert_eq!(
        call!(cuda_graph_launch(&mut d, exec, streams[1])),
        C_SUCCESS
    );
    assert_eq!(sync(streams[1]), C_SUCCESS);
    assert_eq!(call!(cuda_graph_exec_destroy(exec)), C_SUCCESS);
    assert_eq!(call!(cuda_graph_destroy(graph)), C_SUCCESS);
    assert_eq!(call!(host_memory_deallocate(&mut d, host, 64)), C_SUCCESS);
    free(memory, 64);
    for &e in &events {
        assert_eq!(call!(destroy_event(&mut d, e)), C_SUCCESS);
    }
    for &s in &streams {
        destroy(s);
    }
    // Destroyed handles name nothing of any kind.
    for &s in &streams[..4] {
        refused_as_stream(s as usize, "a destroyed stream");
        refused_as_event(s as usize, "a destroyed stream");
    }
    for &e in &events[..4] {
        refused_as_stream(e as usize, "a destroyed event");
        refused_as_event(e as usize, "a destroyed event");
    }
    let (graph, exec) = (graph as usize, exec as usize);
    refused_as_graph(graph, "a destroyed graph");
    refused_as_graph(exec, "a destroyed exec");
    assert_eq!(live(), before, "nothing left live");
}

/// A stream destroyed with a failure nobody synchronised (idle or still busy when
/// destroyed), while capturing (valid or invalidated), or while joined to another stream's
/// capture gives its slot back: 2000 such lives use a handful of slots, the failures are
/// not inherited, no capture is left open, and nothing stays live.
#[test]
fn streams_destroyed_failed_or_capturing_give_their_slots_back() {
    let _serial = serial();
    table();
    let before = live();
    let index = |h: C_Stream| ((h as usize) >> 4) & ((1 << 20) - 1);
    let mut d = dev();
    let mut slots = std::collections::HashSet::new();
    let fail_on = |s: C_Stream| {
        let mut d = dev();
        assert_eq!(
            call!(stream_add_callback(&mut d, s, Some(fail_it), null_mut())),
            C_SUCCESS
        );
    };
    let begin = |s: C_Stream, mode| {
        let mut d = dev();
        assert_eq!(call!(cuda_stream_begin_capture(&mut d, s, mode)), C_SUCCESS);
    };
    for cycle in 0..2000 {
        let s = stream();
        slots.insert(index(s));
        assert_eq!(sync(s), C_SUCCESS, "cycle {cycle}: no failure inherited");
        match cycle % 6 {
            // Failed and idle, never synchronised.
            0 => {
                fail_on(s);
                while call!(query_stream(&mut d, s)) != C_SUCCESS {
                    std::thread::yield_now();
                }
                destroy(s);
            }
            // Failing work still queued when destroyed; done before the next create.
            1 => {
                let release = hold(s);
                fail_on(s);
                let event = new_event();
                assert_eq!(call!(record_event(&mut d, s, event)), C_SUCCESS);
                destroy(s);
                release.send(()).unwrap();
                assert_eq!(call!(synchronize_event(&mut d, event)), C_SUCCESS);
                assert_eq!(call!(destroy_event(&mut d, event)), C_SUCCESS);
            }
            // Capturing.
            2 => {
                begin(s, C_StreamCaptureModeThreadLocal);
                fail_on(s);
                destroy(s);
            }
            // In a capture that a query invalidated.
            3 => {
                begin(s, C_StreamCaptureModeRelaxed);
                assert_eq!(call!(query_stream(&mut d, s)), C_ERROR, "invalidates");
                destroy(s);
            }
            // Joined to another stream's capture (and joined back), which ends after the
            // destroy.
            4 => {
                let origin = stream();
                slots.insert(index(origin));
                begin(origin, C_StreamCaptureModeRelaxed);
                let (fork, join) = (new_event(), new_event());
                assert_eq!(call!(record_event(&mut d, origin, fork)), C_SUCCESS);
                assert_eq!(call!(stream_wait_event(&mut d, s, fork)), C_SUCCESS);
                fail_on(s);
                assert_eq!(call!(record_event(&mut d, s, join)), C_SUCCESS);
                assert_eq!(call!(stream_wait_event(&mut d, origin, join)), C_SUCCESS);
                destroy(s);
                let mut graph = null_mut();
                assert_eq!(
                    call!(cuda_stream_end_captrue(&mut d, origin, &mut graph)),
                    C_SUCCESS
                );
                assert_eq!(call!(cuda_graph_destroy(graph)), C_SUCCESS);
                assert_eq!(call!(destroy_event(&mut d, fork)), C_SUCCESS);
                assert_eq!(call!(destroy_event(&mut d, join)), C_SUCCESS);
                destroy(origin);
            }
            // Capturing, destroyed by another thread than the one that began the capture.
            _ => {
                begin(s, C_StreamCaptureModeThreadLocal);
                let bits = s as usize;
                std::thread::spawn(move || destroy(bits as C_Stream))
                    .join()
                    .expect("the destroying thread");
            }
        }
    }
    assert!(
        slots.len() <= 4,
        "2000 streams destroyed failed or capturing used {} slots",
        slots.len()
    );
    assert_eq!(live(), before, "nothing left live");
    // No capture is left open: an idle destroyed stream's slot is reused at once.
    let idle = stream();
    assert_eq!(sync(idle), C_SUCCESS);
    destroy(idle);
    let again = stream();
    assert_eq!(index(again), index(idle), "probing destroyed streams again");
    destroy(again);
}

/// A copy of nothing still names its stream: a destroyed stream, or a handle of another kind,
/// is refused whatever the size (found by the `paddle_table` fuzzer: a 0-byte
/// `async_memory_copy_d2d` on a forged stream answered `C_SUCCESS`).
#[test]
fn a_copy_of_nothing_still_checks_its_stream() {
    let _serial = serial();
    let mut d = dev();
    let (ptr, other) = (alloc(16), alloc(16));
    let mut byte = 0u8;
    let host: *mut u8 = &mut byte;
    let live = stream();
    let destroyed = stream();
    destroy(destroyed);
    let event = new_event();
    for (s, valid, what) in [
        (live, true, "a live stream"),
        (null_mut(), true, "the null stream"),
        (destroyed, false, "a destroyed stream"),
        (event.cast(), false, "an event"),
        (0xdead_0000_usize as C_Stream, false, "a forged handle"),
    ] {
        let want = if valid { C_SUCCESS } else { C_ERROR };
        let answers = [
            (
                "async_memory_copy_h2d",
                call!(async_memory_copy_h2d(&mut d, s, ptr, host.cast(), 0)),
            ),
            (
                "async_memory_copy_d2h",
                call!(async_memory_copy_d2h(&mut d, s, host.cast(), ptr, 0)),
            ),
            (
                "async_memory_copy_d2d",
                call!(async_memory_copy_d2d(&mut d, s, other, ptr, 0)),
            ),
            (
                "async_memory_copy_p2p",
                call!(async_memory_copy_p2p(&mut d, &mut dev(), s, other, ptr, 0)),
            ),
        ];
        for (function, answer) in answers {
            assert_eq!(answer, want, "{function} of 0 bytes on {what}");
        }
    }
    assert_eq!(call!(destroy_event(&mut d, event)), C_SUCCESS);
    destroy(live);
    free(ptr, 16);
    free(other, 16);
}
