//! The table's functions called as Paddle calls them, on `devstream_cpu` (device 0), through a
//! table filled by `devstream_paddle::table::fill`.
#![allow(clippy::undocumented_unsafe_blocks)] // test calls through the C ABI; each is commented

#[macro_use]
mod support;

use devstream_paddle::sys::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::Mutex;
use std::time::Duration;
use support::*;

#[test]
fn device_management_answers_as_paddle_expects() {
    let _serial = serial();
    let mut count = 0usize;
    ok!(get_device_count(&mut count));
    assert_eq!(count, 1, "one cpu place");
    let mut list = [usize::MAX; 1];
    ok!(get_device_list(list.as_mut_ptr()));
    assert_eq!(list, [0]);
    answers!(C_ERROR, get_device_count(null_mut()));
    let mut d = dev();
    ok!(set_device(&mut d));
    let mut got = C_Device_st { id: -7 };
    ok!(get_device(&mut got));
    assert_eq!(got.id, 0);
    let mut bad = C_Device_st { id: 1 };
    answers!(C_ERROR, set_device(&mut bad));
    answers!(C_ERROR, init_device(&mut bad));
    answers!(C_ERROR, set_device(null_mut()));
    answers!(C_ERROR, get_device(null_mut()));
    ok!(init_device(&mut d));
    ok!(synchronize_device(&mut d));
    let (mut total, mut free) = (0, 0);
    ok!(device_memory_stats(&mut d, &mut total, &mut free));
    assert!(total > 0 && free <= total);
    answers!(C_ERROR, device_memory_stats(&mut d, null_mut(), &mut free));
    let mut chunk = 0;
    ok!(device_min_chunk_size(&mut d, &mut chunk));
    assert_eq!(chunk, 256);
    ok!(device_max_chunk_size(&mut d, &mut chunk));
    assert!(chunk >= 256);
    ok!(device_extra_padding_size(&mut d, &mut chunk));
    assert_eq!(chunk, 0);
    answers!(C_ERROR, device_realloc_size(&mut bad, &mut chunk));
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
    ok!(device_memory_set(&mut d, inner, 9, 3));
    assert_eq!(d2h(inner, 4).unwrap(), [9, 9, 9, 7]);
    // Device to device inside one allocation, and to another.
    let other = alloc(16);
    ok!(memory_copy_d2d(&mut d, other, inner, 4));
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
    answers!(C_ERROR, memory_copy_h2d(&mut d, ptr, null(), 4));
    answers!(C_ERROR, memory_copy_d2h(&mut d, null_mut(), ptr, 4));
    answers!(
        C_ERROR,
        device_memory_deallocate(&mut d, inner, 0),
        "not a start"
    );
    let mut out = null_mut();
    answers!(C_ERROR, device_memory_allocate(&mut d, null_mut(), 8));
    let mut bad = C_Device_st { id: 3 };
    answers!(C_ERROR, device_memory_allocate(&mut bad, &mut out, 8));
    assert!(out.is_null(), "out-parameters are written only on success");
    // Out of memory: C_SUCCESS with a null pointer, as Paddle's CustomAllocator reads it.
    out = std::ptr::dangling_mut::<c_void>();
    ok!(device_memory_allocate(&mut d, &mut out, 1 << 62));
    assert!(out.is_null(), "exhaustion writes a null pointer");
    free(other, 16);
    free(ptr, size);
    answers!(
        C_ERROR,
        device_memory_deallocate(&mut d, ptr, size),
        "twice"
    );
    assert_eq!(d2h(ptr, 4), Err(C_ERROR), "freed");
    // Host memory is plain, writable memory.
    let mut host = null_mut();
    ok!(host_memory_allocate(&mut d, &mut host, 64));
    // SAFETY: 64 writable bytes just allocated.
    unsafe { host.cast::<u8>().write_bytes(5, 64) };
    ok!(host_memory_deallocate(&mut d, host, 64));
    answers!(C_ERROR, host_memory_deallocate(&mut d, host, 64));
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
    ok!(async_memory_copy_h2d(&mut d, s, ptr, source_ptr.cast(), 1));
    let mut back = [0u8; 1];
    ok!(async_memory_copy_d2h(
        &mut d,
        s,
        back.as_mut_ptr().cast(),
        ptr,
        1
    ));
    answers!(C_FAILED, query_stream(&mut d, s), "held: not complete");
    release.send(()).unwrap();
    assert_eq!(sync(s), C_SUCCESS);
    ok!(query_stream(&mut d, s));
    assert_eq!(back, [42]);
    // Async device-to-device, and errors of async copies.
    let other = alloc(4);
    ok!(async_memory_copy_d2d(&mut d, s, other, ptr, 1));
    assert_eq!(sync(s), C_SUCCESS);
    assert_eq!(d2h(other, 1).unwrap(), [42]);
    answers!(
        C_ERROR,
        async_memory_copy_d2d(&mut d, s, other, ptr, 5),
        "past the end"
    );
    let bogus = 0xdead_0001_usize as C_Stream; // handles are multiples of 16
    answers!(C_ERROR, async_memory_copy_d2d(&mut d, bogus, other, ptr, 1));
    // The null stream is the device's default stream.
    ok!(async_memory_copy_d2d(&mut d, null_mut(), other, ptr, 1));
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
    ok!(query_event(&mut d, event), "never recorded");
    let release = hold(a);
    ok!(record_event(&mut d, a, event));
    answers!(C_FAILED, query_event(&mut d, event));
    ok!(stream_wait_event(&mut d, b, event));
    let mut flag = 0u8;
    let flag_ptr: *mut u8 = &mut flag;
    queue_write_42(b, flag_ptr);
    std::thread::sleep(Duration::from_millis(50));
    answers!(C_FAILED, query_stream(&mut d, b), "b waits for a");
    release.send(()).unwrap();
    ok!(synchronize_event(&mut d, event));
    assert_eq!(sync(b), C_SUCCESS);
    // SAFETY: the stream that wrote it is synchronised.
    assert_eq!(unsafe { flag_ptr.read() }, 42);
    ok!(destroy_event(&mut d, event));
    answers!(C_ERROR, destroy_event(&mut d, event), "twice");
    answers!(C_ERROR, query_event(&mut d, event), "destroyed");
    answers!(C_ERROR, record_event(&mut d, a, event));
    answers!(C_ERROR, create_event(&mut d, null_mut()));
    answers!(C_ERROR, stream_add_callback(&mut d, a, None, null_mut()));
    // A handle of another device type (another copy of the library, its own counters) with
    // the same number is unknown here.
    let wgpu_stream = devstream_paddle::handles::tag(devstream_paddle::handles::Kind::Stream, 1);
    let foreign = ((a as usize) & ((1 << 60) - 1)) | (wgpu_stream << 60);
    answers!(C_ERROR, query_stream(&mut d, foreign as C_Stream));
    destroy(a);
    destroy(b);
    answers!(C_ERROR, destroy_stream(&mut d, a), "twice");
    answers!(C_ERROR, query_stream(&mut d, a), "destroyed");
}

#[test]
fn captured_copies_run_at_every_launch() {
    let _serial = serial();
    let s = stream();
    let src = alloc(4);
    let dst = alloc(4);
    let mut d = dev();
    ok!(cuda_stream_begin_capture(
        &mut d,
        s,
        C_StreamCaptureModeThreadLocal
    ));
    let mut status = -1;
    let mut id = 0;
    ok!(cuda_stream_capture_info(
        &mut d,
        s,
        &mut status,
        &mut id,
        null_mut(),
        null_mut(),
        null_mut(),
        null_mut()
    ));
    assert_eq!(status, C_StreamCaptureStatusActive);
    assert!(id > 0);
    ok!(async_memory_copy_d2d(&mut d, s, dst, src, 4));
    let graph = end_capture(s);
    let mut nodes = 0;
    ok!(cuda_graph_get_nodes(graph, null_mut(), &mut nodes));
    assert_eq!(nodes, 1);
    let mut hooks = C_GraphHookManager {
        size: 9,
        hooks: null_mut(),
        user_data: null_mut(),
    };
    ok!(get_parameter_setter_for_exec_graph(graph, &mut hooks));
    assert_eq!(hooks.size, 0);
    let exec = instantiate(graph);
    for round in [3u8, 4] {
        assert_eq!(h2d(src, &[round; 4]), C_SUCCESS);
        ok!(cuda_graph_launch(&mut d, exec, s));
        assert_eq!(sync(s), C_SUCCESS);
        assert_eq!(d2h(dst, 4).unwrap(), [round; 4], "launch {round}");
    }
    ok!(cuda_graph_exec_destroy(exec));
    ok!(cuda_graph_destroy(graph));
    answers!(C_ERROR, cuda_graph_launch(&mut d, exec, s), "destroyed");
    answers!(C_ERROR, cuda_graph_destroy(graph), "twice");
    answers!(
        C_ERROR,
        cuda_stream_begin_capture(&mut d, null_mut(), 0),
        "the null stream never captures"
    );
    answers!(
        C_ERROR,
        cuda_stream_begin_capture(&mut d, s, 7),
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
    ok!(record_event(&mut d, a, old));
    answers!(C_FAILED, query_event(&mut d, old), "a is held");
    ok!(destroy_event(&mut d, old));
    let event = new_event();
    // This thread gets the slot (and its devstream event, still recorded behind the held
    // work) back, under a new handle.
    let index = |h: C_Event| ((h as usize) >> 4) & ((1 << 20) - 1);
    assert_eq!(index(event), index(old));
    assert_ne!(event, old);
    answers!(C_ERROR, query_event(&mut d, old), "the old handle");
    // Never recorded: complete, and waiting on it orders nothing.
    ok!(query_event(&mut d, event));
    ok!(synchronize_event(&mut d, event));
    ok!(stream_wait_event(&mut d, b, event));
    ok!(query_stream(&mut d, b), "b waits for nothing");
    // Recorded again: the new record counts.
    ok!(record_event(&mut d, a, event));
    answers!(C_FAILED, query_event(&mut d, event));
    ok!(stream_wait_event(&mut d, b, event));
    answers!(C_FAILED, query_stream(&mut d, b), "b waits for a");
    release.send(()).unwrap();
    ok!(synchronize_event(&mut d, event));
    assert_eq!(sync(b), C_SUCCESS);
    ok!(destroy_event(&mut d, event));
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
            ok!(destroy_event(&mut d, e as C_Event));
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
    ok!(record_event(&mut d, a, event));
    ok!(query_event(&mut d, event));
    ok!(synchronize_event(&mut d, event));
    // SAFETY: the stream that wrote it is synchronised.
    assert_eq!(unsafe { flag_ptr.read() }, 42);
    // Recorded again behind held work: pending, and b waits for it.
    let release = hold(a);
    ok!(record_event(&mut d, a, event));
    answers!(C_FAILED, query_event(&mut d, event), "a is held");
    ok!(stream_wait_event(&mut d, b, event));
    std::thread::sleep(Duration::from_millis(20));
    answers!(C_FAILED, query_stream(&mut d, b), "b waits for a");
    // Recorded on an idle stream (b is busy, c is not) while its last record is pending:
    // the new record replaces it, complete.
    let c = stream();
    ok!(record_event(&mut d, c, event));
    ok!(query_event(&mut d, event), "c was idle");
    ok!(stream_wait_event(&mut d, c, event));
    ok!(query_stream(&mut d, c), "c waits for nothing");
    // And behind b's pending wait: pending again until a is released.
    ok!(record_event(&mut d, b, event));
    answers!(C_FAILED, query_event(&mut d, event), "b waits for a");
    release.send(()).unwrap();
    ok!(synchronize_event(&mut d, event));
    ok!(query_stream(&mut d, b));
    ok!(destroy_event(&mut d, event));
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
            ok!(destroy_event(&mut d, event));
            destroy(s);
        });
    }
    assert_eq!(live()[..2], before[..2], "streams, events");
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
    answers!(C_ERROR, query_stream(&mut d, idle), "the old handle");
    ok!(query_stream(&mut d, again));
    destroy(again);
    // Busy when destroyed: its work runs on, and a new stream does not wait for it.
    let busy = stream();
    let release = hold(busy);
    destroy(busy);
    let fresh = stream();
    assert_ne!(index(fresh), index(busy));
    ok!(query_stream(&mut d, fresh));
    assert_eq!(sync(fresh), C_SUCCESS);
    release.send(()).unwrap();
    // Failed and destroyed before anyone synchronised it: the failure is taken (and
    // reported as a warning) when the slot is probed, and the slot's next stream inherits
    // nothing.
    let failed = stream();
    ok!(stream_add_callback(
        &mut d,
        failed,
        Some(fail_it),
        null_mut()
    ));
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
    ok!(query_stream(&mut d, reused));
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
    ok!(cuda_stream_begin_capture(
        &mut d,
        s,
        C_StreamCaptureModeGlobal
    ));
    // Probing a destroyed stream (query, synchronize) now would be an unsafe call.
    let other = stream();
    assert_eq!(
        capture_status(s),
        Ok(C_StreamCaptureStatusActive),
        "still capturing"
    );
    let graph = end_capture(s);
    ok!(cuda_graph_destroy(graph));
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
    ok!(record_event(&mut d, s, event));
    assert_eq!(live()[2], before[2] + 1);
    ok!(destroy_event(&mut d, event));
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
    ok!(cuda_stream_begin_capture(
        &mut d,
        capturing,
        C_StreamCaptureModeThreadLocal
    ));
    for data in [null_mut(), null_mut(), a.cast::<c_void>()] {
        ok!(stream_add_callback(
            &mut d,
            capturing,
            Some(note_stream),
            data
        ));
    }
    let graph = end_capture(capturing);
    let exec = instantiate(graph);
    assert!(
        NOTED.lock().unwrap_or_else(|p| p.into_inner()).is_empty(),
        "captured callbacks run only when launched"
    );
    let order = [a, b, b, a, b, a];
    for s in order {
        ok!(cuda_graph_launch(&mut d, exec, s));
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
    ok!(cuda_graph_exec_destroy(exec));
    ok!(cuda_graph_destroy(graph));
    for s in [capturing, a, b] {
        destroy(s);
    }
}
