//! Handles of one kind given to calls of another, forged or destroyed handles, and the slots
//! streams give back: the table's refusals, called as Paddle calls them on `devstream_cpu`
//! (device 0), through a table filled by `devstream_paddle::table::fill`.
#![allow(clippy::undocumented_unsafe_blocks)] // test calls through the C ABI; each is commented

#[macro_use]
mod support;

use devstream_paddle::sys::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use support::*;

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
    let calls = [
        named!(query_stream(&mut d, s)),
        named!(synchronize_stream(&mut d, s)),
        named!(stream_add_callback(&mut d, s, Some(do_nothing), null_mut())),
        named!(record_event(&mut d, s, event)),
        named!(stream_wait_event(&mut d, s, event)),
        named!(async_memory_copy_h2d(&mut d, s, ptr, byte_ptr.cast(), 1)),
        named!(async_memory_copy_d2h(&mut d, s, byte_ptr.cast(), ptr, 1)),
        named!(async_memory_copy_d2d(&mut d, s, other, ptr, 1)),
        named!(async_memory_copy_p2p(&mut d, &mut dev(), s, other, ptr, 1)),
        (
            "cuda_stream_capture_info",
            capture_status(s).err().unwrap_or(C_SUCCESS),
        ),
        named!(cuda_stream_end_captrue(&mut d, s, &mut graph)),
        named!(cuda_stream_begin_capture(
            &mut d,
            s,
            C_StreamCaptureModeRelaxed
        )),
        named!(destroy_stream(&mut d, s)),
    ];
    for (function, answer) in calls {
        assert_eq!(answer, C_ERROR, "{function} given {what} {handle:#x}");
    }
    assert!(graph.is_null(), "nothing written");
    ok!(destroy_event(&mut d, event));
    free(ptr, 16);
    free(other, 16);
}

/// Every call that takes an event, given `handle` (no live event), answers `C_ERROR`.
fn refused_as_event(handle: usize, what: &str) {
    let mut d = dev();
    let e = handle as C_Event;
    let s = stream();
    let calls = [
        named!(query_event(&mut d, e)),
        named!(synchronize_event(&mut d, e)),
        named!(record_event(&mut d, s, e)),
        named!(stream_wait_event(&mut d, s, e)),
        named!(destroy_event(&mut d, e)),
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
        named!(cuda_graph_launch(&mut d, handle as C_GraphExec, s)),
        named!(cuda_graph_instantiate(
            &mut exec,
            &mut graph,
            null_mut(),
            null_mut(),
            0
        )),
        named!(cuda_graph_get_nodes(graph, null_mut(), &mut nodes)),
        named!(get_parameter_setter_for_exec_graph(graph, &mut hooks)),
        named!(cuda_graph_exec_destroy(handle as C_GraphExec)),
        named!(cuda_graph_destroy(graph)),
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
        named!(device_memory_deallocate(&mut d, a, 1)),
        named!(host_memory_deallocate(&mut d, a, 1)),
        named!(device_memory_set(&mut d, a, 1, 1)),
        ("memory_copy_h2d", h2d(a, &byte)),
        named!(memory_copy_d2h(&mut d, byte.as_mut_ptr().cast(), a, 1)),
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
    ok!(cuda_stream_begin_capture(
        &mut d,
        capturing,
        C_StreamCaptureModeThreadLocal
    ));
    let graph = end_capture(capturing);
    let exec = instantiate(graph);
    let memory = alloc(64);
    let mut host = null_mut();
    ok!(host_memory_allocate(&mut d, &mut host, 64));
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
        ok!(record_event(&mut d, s, e), "{e:?}");
        ok!(synchronize_event(&mut d, e));
        ok!(query_event(&mut d, e));
        assert_eq!(sync(s), C_SUCCESS);
    }
    // SAFETY: every stream that wrote it is synchronised.
    assert_eq!(unsafe { flag_ptr.read() }, 42);
    ok!(cuda_graph_launch(&mut d, exec, streams[1]));
    assert_eq!(sync(streams[1]), C_SUCCESS);
    ok!(cuda_graph_exec_destroy(exec));
    ok!(cuda_graph_destroy(graph));
    ok!(host_memory_deallocate(&mut d, host, 64));
    free(memory, 64);
    for &e in &events {
        ok!(destroy_event(&mut d, e));
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
        ok!(stream_add_callback(&mut d, s, Some(fail_it), null_mut()));
    };
    let begin = |s: C_Stream, mode| {
        let mut d = dev();
        ok!(cuda_stream_begin_capture(&mut d, s, mode));
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
                ok!(record_event(&mut d, s, event));
                destroy(s);
                release.send(()).unwrap();
                ok!(synchronize_event(&mut d, event));
                ok!(destroy_event(&mut d, event));
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
                answers!(C_ERROR, query_stream(&mut d, s), "invalidates");
                destroy(s);
            }
            // Joined to another stream's capture (and joined back), which ends after the
            // destroy.
            4 => {
                let origin = stream();
                slots.insert(index(origin));
                begin(origin, C_StreamCaptureModeRelaxed);
                let (fork, join) = (new_event(), new_event());
                ok!(record_event(&mut d, origin, fork));
                ok!(stream_wait_event(&mut d, s, fork));
                fail_on(s);
                ok!(record_event(&mut d, s, join));
                ok!(stream_wait_event(&mut d, origin, join));
                destroy(s);
                let graph = end_capture(origin);
                ok!(cuda_graph_destroy(graph));
                ok!(destroy_event(&mut d, fork));
                ok!(destroy_event(&mut d, join));
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
/// is refused whatever the size (a 0-byte `async_memory_copy_d2d` on a forged stream must not
/// answer `C_SUCCESS`).
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
            named!(async_memory_copy_h2d(&mut d, s, ptr, host.cast(), 0)),
            named!(async_memory_copy_d2h(&mut d, s, host.cast(), ptr, 0)),
            named!(async_memory_copy_d2d(&mut d, s, other, ptr, 0)),
            named!(async_memory_copy_p2p(&mut d, &mut dev(), s, other, ptr, 0)),
        ];
        for (function, answer) in answers {
            assert_eq!(answer, want, "{function} of 0 bytes on {what}");
        }
    }
    ok!(destroy_event(&mut d, event));
    destroy(live);
    free(ptr, 16);
    free(other, 16);
}
