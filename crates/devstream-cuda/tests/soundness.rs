//! Regression tests for soundness defects on a real CUDA GPU (the shared
//! CUDA/HIP layer, so they cover the HIP backend's logic too).
//!
//! Each test skips (with a message) where no CUDA device is present, unless `DEVSTREAM_REQUIRE`
//! lists `cuda`: then a missing device fails it. Defects that abort or hang the process (a
//! panic escaping a runtime callback, a host function blocked on work queued after it) are run
//! in a child process of this binary (the `#[ignore]`d `child_*` tests), so that a defect fails
//! its test in seconds instead of killing or stalling the others. Gating is deterministic: a
//! stream waits on a [`CudaFlag`] the test opens, never on sleeps.

use devstream_core::{
    CaptureMode, DeviceBackend, DeviceFlag, DeviceGraph, DeviceStream, Error, EventFlags,
    HostBuffer, Place,
};
use devstream_cuda::{CudaBackend, CudaFlag, CudaGraph, CudaGraphDef, CudaStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

mod common;
use common::{flag, gated, gpu, hold, launch_counting, or_skip, stream};

/// Set in the environment of a child process that runs one `child_*` test.
const CHILD: &str = "DEVSTREAM_SOUNDNESS_CHILD";

/// Runs `f` on a thread and returns its result, or fails the test if it takes longer than
/// `secs` (a hang fails in seconds).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(value) => value,
        Err(_) => panic!("{what} hung (no answer within {secs} s)"),
    }
}

/// Launches on `s` a host function that runs `f`; its answer comes through the receiver.
fn answer_from_host_function<T: Send + 'static>(
    s: &CudaStream,
    mut f: impl FnMut() -> T + Send + 'static,
) -> Receiver<T> {
    let (tx, rx) = channel();
    s.launch_host_func(Box::new(move || {
        let _ = tx.send(f());
    }))
    .unwrap();
    rx
}

/// Synchronizes `s` on another thread (see [`within`]): fails the test if that takes longer
/// than `secs`.
fn synchronize_within(secs: u64, what: &str, s: &CudaStream) -> devstream_core::Result<()> {
    let s = s.clone();
    within(secs, what, move || s.synchronize())
}

/// A test whose body runs in a child process of this binary: `#[test] fn $name` runs the
/// `#[ignore]`d `fn $child` there through [`in_child`] (30 s), and `$child` runs the body with
/// the device bound to `$place` (skipping like every test here where there is none).
macro_rules! child_test {
    ($(#[$attr:meta])* $name:ident, fn $child:ident($place:ident) $body:block) => {
        $(#[$attr])*
        #[test]
        fn $name() {
            in_child(stringify!($child), 30);
        }

        #[test]
        #[ignore = "run in a child process by the test of the same name without `child_`"]
        fn $child() {
            let ($place, _serial) = or_skip!(child_gpu());
            $body
        }
    };
}

/// Runs the `#[ignore]`d test `name` of this binary in a child process and fails unless it
/// passes within `secs` (an abort or a hang fails this test, not the whole binary).
fn in_child(name: &str, secs: u64) {
    let (_place, _serial) = or_skip!(gpu());
    let exe = std::env::current_exe().expect("the test binary's path");
    let log = std::env::temp_dir().join(format!(
        "devstream-soundness-{name}-{}.log",
        std::process::id()
    ));
    let out = std::fs::File::create(&log).expect("a log file for the child");
    let err = out.try_clone().expect("a log file for the child");
    let mut child = Command::new(exe)
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn the child test");
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        match child.try_wait().expect("wait for the child test") {
            Some(status) => break Some(status),
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    eprintln!("---- child {name} ----\n{output}---- end of child {name} ----");
    match status {
        None => panic!("{name}: the child process hung for {secs} s and was killed"),
        Some(status) if !status.success() => {
            panic!("{name}: the child process failed ({status})")
        }
        Some(_) => assert!(
            output.contains("1 passed"),
            "{name}: the child ran no test (filter mismatch?)"
        ),
    }
}

/// Whether this process is a child started by [`in_child`] (the `child_*` tests run only
/// there; run directly with `--ignored` they behave the same).
fn child_gpu() -> Option<(Place, MutexGuard<'static, ()>)> {
    if std::env::var_os(CHILD).is_none() {
        eprintln!("note: running a child test directly");
    }
    gpu()
}

/// Counts its drops: shows when a host function's closure was freed.
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A panic payload whose own `Drop` panics.
struct PanickyPayload;

impl Drop for PanickyPayload {
    fn drop(&mut self) {
        panic!("the panic payload's drop panics too");
    }
}

/// Something whose `Drop` panics with a payload whose `Drop` panics.
struct PanickyDrop;

impl Drop for PanickyDrop {
    fn drop(&mut self) {
        std::panic::panic_any(PanickyPayload);
    }
}

// ---- host functions captured into a shared graph definition ------------------------

/// Two captures append to one graph definition; the second graph contains the first capture's
/// host-function node. Dropping the first graph must not free that closure while the second
/// graph can still call it (or the second capture must be refused).
#[test]
fn capture_to_graph_host_function_lives_while_any_graph_of_the_definition_can_call_it() {
    let (place, _serial) = or_skip!(gpu());
    let def = CudaGraphDef::new(&place).unwrap();
    let (a, b) = (stream(&place), stream(&place));
    match a.begin_capture_to_graph(&def, &[], CaptureMode::ThreadLocal) {
        Err(Error::Unsupported { .. }) => {
            eprintln!("skipped: capture-to-graph is not in this driver");
            return;
        }
        other => other.unwrap(),
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let (r, guard) = (runs.clone(), DropCounter(drops.clone()));
    a.launch_host_func(Box::new(move || {
        let _ = &guard;
        r.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    let first = a.end_capture().unwrap();
    if let Err(e) = b.begin_capture_to_graph(&def, &[], CaptureMode::ThreadLocal) {
        // Refusing to append to a definition that holds another capture's host function
        // is one sound answer; it must be typed and leave the stream usable.
        eprintln!("second capture into the definition refused: {e}");
        assert!(
            matches!(e, Error::Capture { .. } | Error::Unsupported { .. }),
            "{e:?}"
        );
        assert!(!b.is_capturing().unwrap());
        first.launch(&b).unwrap();
        within(10, "synchronize", move || b.synchronize()).unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        return;
    }
    let second = b.end_capture().unwrap();
    drop(first);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        0,
        "graph 1's host closure was freed while graph 2, built from the same definition, can \
         still call it (use after free)"
    );
    second.launch(&b).unwrap();
    synchronize_within(10, "synchronize", &b).unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    drop(second);
    drop(def);
}

// ---- objects dropped while their user stream is capturing --------------------------

/// A flag written by work queued before a capture, dropped during the capture: its pinned block
/// must not be recycled before that write ran.
#[test]
fn flag_dropped_during_a_capture_is_not_recycled_under_work_queued_before_it() {
    let (place, _serial) = or_skip!(gpu());
    let (s, gate) = gated(&place);
    let first = flag(&place);
    s.write_flag(&first, 7).unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    drop(first);
    let _ = s.end_capture();
    let second = flag(&place);
    gate.set(1);
    synchronize_within(10, "synchronize", &s).unwrap();
    assert_eq!(
        second.get(),
        0,
        "a write queued before the capture landed in a new flag: the dropped flag's pinned \
         block was recycled under pending work"
    );
}

/// A device buffer filled by work queued before a capture, dropped during the capture: it must
/// not be freed before that fill ran (compute-sanitizer memcheck shows the write otherwise;
/// where the pool hands the address out again, the new buffer's bytes show it too).
#[test]
fn buffer_dropped_during_a_capture_is_not_freed_under_work_queued_before_it() {
    let (place, _serial) = or_skip!(gpu());
    within(60, "the whole test", move || {
        buffer_dropped_during_a_capture(place)
    });
}

fn buffer_dropped_during_a_capture(place: Place) {
    const N: usize = 1 << 20;
    let (s, gate) = gated(&place);
    let first = s.alloc(N).unwrap();
    let address = first.device_ptr();
    s.fill(&first, 0, N, 0xAB).unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    drop(first);
    let _ = s.end_capture();
    let other = stream(&place);
    let second = other.alloc(N).unwrap();
    other.fill(&second, 0, N, 0x11).unwrap();
    // Let that fill run first (where streams run independently), then open the gate. Under
    // compute-sanitizer streams are serialized: nothing may wait for `other` while the gate is
    // closed (memcheck then sees the stale fill write freed memory itself).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !other.query().unwrap() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    gate.set(1);
    eprintln!(
        "the new buffer {} the dropped one's address",
        if second.device_ptr() == address {
            "reuses"
        } else {
            "does not reuse"
        }
    );
    synchronize_within(30, "synchronize", &s).unwrap();
    let host = other.alloc_host(N).unwrap();
    other.copy_device_to_host(&host, 0, &second, 0, N).unwrap();
    other.synchronize().unwrap();
    let mut bytes = vec![0u8; N];
    host.read(0, &mut bytes).unwrap();
    let bad = bytes.iter().filter(|&&b| b != 0x11).count();
    assert_eq!(
        bad, 0,
        "the fill queued before the capture wrote into memory freed under it (now another \
         buffer's): {bad} bytes changed"
    );
}

// ---- found on the GPU: a pageable copy onto a held stream ----------------------------------

/// `copy_from_host` (pageable memory) onto a stream held by a flag must return at once, not
/// wait for the stream (the conformance check `hostile::handles_dropped_in_every_order_on_another_thread`
/// hangs on cuda:0 and hip:0 at such a copy, it seems).
#[test]
fn copy_from_pageable_memory_onto_a_held_stream_does_not_wait_for_the_stream() {
    let (place, _serial) = or_skip!(gpu());
    let (s, gate) = gated(&place);
    let device = Arc::new(s.alloc(64).unwrap());
    let (tx, rx) = channel();
    let (s2, d2) = (s.clone(), device.clone());
    std::thread::spawn(move || {
        let _ = tx.send(s2.copy_from_host(&d2, 0, &[5u8; 64]));
    });
    let answer = rx.recv_timeout(Duration::from_secs(10));
    gate.set(1);
    let answer = answer.unwrap_or_else(|_| {
        panic!("copy_from_host from pageable memory waited for the held stream (10 s)")
    });
    answer.unwrap();
    s.synchronize().unwrap();
}

// ---- flags used by captured work ----------------------------------------------------

/// Captures `use_flag` of a new flag on a new stream (relaxed mode), drops the flag, makes a
/// second flag (which would get the first one's pinned block, were that recycled while the graph
/// holds it) and replays the graph: answers the stream, the graph and the second flag.
fn replay_after_dropping_a_captured_flag(
    place: &Place,
    use_flag: impl FnOnce(&CudaStream, &CudaFlag) -> devstream_core::Result<()>,
) -> (CudaStream, CudaGraph, CudaFlag) {
    let s = stream(place);
    let first = flag(place);
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    use_flag(&s, &first).unwrap();
    let graph = s.end_capture().unwrap();
    drop(first);
    let second = flag(place);
    graph.launch(&s).unwrap();
    (s, graph, second)
}

/// A flag written by a captured graph, dropped before the graph is replayed: the graph must keep
/// the flag's pinned block.
#[test]
fn flag_written_by_a_captured_graph_is_kept_alive_by_the_graph() {
    let (place, _serial) = or_skip!(gpu());
    let (s, _graph, second) =
        replay_after_dropping_a_captured_flag(&place, |s, first| s.write_flag(first, 5));
    synchronize_within(10, "synchronize", &s).unwrap();
    assert_eq!(
        second.get(),
        0,
        "the replayed graph wrote into a recycled pinned block (the dropped flag's memory, now \
         another flag's)"
    );
}

/// A flag waited on by a captured graph, dropped before the graph is replayed: the replay still
/// waits on the graph's own flag word (memcheck shows a read of freed memory otherwise).
#[test]
fn flag_waited_on_by_a_captured_graph_is_kept_alive_by_the_graph() {
    let (place, _serial) = or_skip!(gpu());
    // Recycled, the block would read 0 and the replay would wait forever.
    let (s, _graph, second) = replay_after_dropping_a_captured_flag(&place, |s, first| {
        first.set(1);
        s.wait_flag(first, 1)
    });
    let done = synchronize_within(10, "a replay waiting on the dropped flag", &s);
    second.set(1);
    done.unwrap();
}

// ---- blocking calls inside a host function -------------------------------------------

child_test! {
    host_buffer_read_inside_a_host_function_does_not_wait_for_later_copies,
    fn child_host_buffer_read_inside_a_host_function_does_not_wait_for_later_copies(place) {
        let s = stream(&place);
        let device = s.alloc(64).unwrap();
        let host = Arc::new(s.alloc_host(64).unwrap());
        s.fill(&device, 0, 64, 9).unwrap();
        s.copy_device_to_host(&host, 0, &device, 0, 64).unwrap();
        s.synchronize().unwrap();
        let gate = hold(&s);
        let h = host.clone();
        let rx = answer_from_host_function(&s, move || {
            let mut out = [0u8; 64];
            h.read(0, &mut out).map(|()| out[0])
        });
        // Queued after the host function: its read must not wait for these.
        s.fill(&device, 0, 64, 7).unwrap();
        s.copy_device_to_host(&host, 0, &device, 0, 64).unwrap();
        gate.set(1);
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(value)) => assert_eq!(value, 9, "the read saw a copy queued after it"),
            Ok(Err(e)) => eprintln!("the read answered a typed error: {e}"),
            Err(_) => panic!(
                "a host-buffer read inside a host function hung: it waits for a copy queued after \
                 the host function (deadlock)"
            ),
        }
        within(10, "synchronize after the host function", move || {
            s.synchronize()
        })
        .unwrap();
    }
}

child_test! {
    synchronize_inside_a_host_function_is_an_error_not_a_hang,
    fn child_synchronize_inside_a_host_function_is_an_error_not_a_hang(place) {
        let s = stream(&place);
        let own = s.clone();
        let rx = answer_from_host_function(&s, move || own.synchronize());
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => panic!("synchronize of its own stream inside a host function returned Ok"),
            Ok(Err(e)) => eprintln!("stream synchronize answered a typed error: {e}"),
            Err(_) => panic!(
                "stream.synchronize() inside a host function on the same stream hung (it waits for \
                 itself)"
            ),
        }
        // An event recorded after the host function on the same stream.
        let event = CudaBackend::new_event(&place, EventFlags::default()).unwrap();
        let gate = hold(&s);
        let e = event.clone();
        let rx = answer_from_host_function(&s, move || {
            use devstream_core::DeviceEvent;
            e.synchronize()
        });
        s.record(&event).unwrap();
        gate.set(1);
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => panic!("an event recorded after the host function was complete inside it"),
            Ok(Err(e)) => eprintln!("event synchronize answered a typed error: {e}"),
            Err(_) => panic!(
                "event.synchronize() inside a host function, on an event recorded after it, hung"
            ),
        }
        within(10, "synchronize after the host functions", move || {
            s.synchronize()
        })
        .unwrap();
    }
}

// ---- panics whose payload panics again on drop ---------------------------------------

/// Checks that `s.synchronize()` reports a host-function panic (within 10 s).
fn expect_panic_reported(s: &CudaStream) {
    match synchronize_within(10, "synchronize after the panic", s) {
        Err(Error::HostFuncPanicked { stream, .. }) => assert_eq!(stream, s.id()),
        other => panic!("expected HostFuncPanicked, got {other:?}"),
    }
    s.synchronize().unwrap();
}

child_test! {
    host_function_panic_payload_whose_drop_panics_is_reported,
    fn child_host_function_panic_payload_whose_drop_panics_is_reported(place) {
        // Through a reusable slot.
        let s = stream(&place);
        s.launch_host_func(Box::new(|| std::panic::panic_any(PanickyPayload)))
            .unwrap();
        expect_panic_reported(&s);
        // Through the allocating path (every slot in flight).
        let (s, gate) = gated(&place);
        for _ in 0..40 {
            s.launch_host_func(Box::new(|| {})).unwrap();
        }
        s.launch_host_func(Box::new(|| std::panic::panic_any(PanickyPayload)))
            .unwrap();
        gate.set(1);
        expect_panic_reported(&s);
        // Through add_callback.
        let s = stream(&place);
        s.add_callback(|_| std::panic::panic_any(PanickyPayload))
            .unwrap();
        expect_panic_reported(&s);
    }
}

child_test! {
    captured_host_function_panic_payload_whose_drop_panics_is_reported,
    fn child_captured_host_function_panic_payload_whose_drop_panics_is_reported(place) {
        let s = stream(&place);
        s.begin_capture(CaptureMode::ThreadLocal).unwrap();
        s.launch_host_func(Box::new(|| std::panic::panic_any(PanickyPayload)))
            .unwrap();
        let graph = s.end_capture().unwrap();
        graph.launch(&s).unwrap();
        expect_panic_reported(&s);
    }
}

child_test! {
    host_closure_whose_drop_panics_twice_is_dropped_quietly,
    fn child_host_closure_whose_drop_panics_twice_is_dropped_quietly(place) {
        // Dropped by the trampoline after it ran (a slot, then the allocating path).
        let (s, gate) = gated(&place);
        for _ in 0..40 {
            let bad = PanickyDrop;
            s.launch_host_func(Box::new(move || {
                let _ = &bad;
            }))
            .unwrap();
        }
        gate.set(1);
        synchronize_within(10, "synchronize", &s).unwrap();
        // Dropped by a graph's release.
        s.begin_capture(CaptureMode::ThreadLocal).unwrap();
        let bad = PanickyDrop;
        s.launch_host_func(Box::new(move || {
            let _ = &bad;
        }))
        .unwrap();
        let graph = s.end_capture().unwrap();
        graph.launch(&s).unwrap();
        synchronize_within(10, "synchronize", &s).unwrap();
        drop(graph);
        // The device still works (a new stream's host function runs).
        let t = stream(&place);
        let ran = launch_counting(&t);
        within(10, "synchronize", move || t.synchronize()).unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}

// ---- the per-thread default stream on another thread ---------------------------------

/// The per-thread stream's handle used on another thread must not answer for that thread's
/// stream (it compares equal to the original).
#[test]
fn per_thread_stream_used_from_another_thread_does_not_address_that_thread_s_stream() {
    let (place, _serial) = or_skip!(gpu());
    let s = CudaBackend::per_thread_stream(&place).unwrap();
    let gate = hold(&s);
    let s2 = s.clone();
    let answer = within(10, "query on another thread", move || s2.query());
    gate.set(1);
    s.synchronize().unwrap();
    match answer {
        Ok(true) => panic!(
            "the per-thread stream, queried on another thread, answered for that thread's (idle) \
             stream while its own is held by a flag"
        ),
        Ok(false) => {}
        Err(e) => eprintln!("refused on another thread: {e}"),
    }
}

/// A flag written on this thread's per-thread stream and dropped on another thread: its release
/// must wait for this thread's stream, not the dropping thread's.
#[test]
fn per_thread_stream_user_dropped_on_another_thread_is_released_after_its_work() {
    let (place, _serial) = or_skip!(gpu());
    let s = CudaBackend::per_thread_stream(&place).unwrap();
    let gate = hold(&s);
    let first = flag(&place);
    s.write_flag(&first, 7).unwrap();
    std::thread::spawn(move || drop(first)).join().unwrap();
    let second = flag(&place);
    gate.set(1);
    synchronize_within(10, "synchronize", &s).unwrap();
    assert_eq!(
        second.get(),
        0,
        "a flag used on this thread's per-thread stream, dropped on another thread, was \
         recycled before that stream's write to it ran"
    );
}

// ---- graph nodes from outside the graph --------------------------------------------

child_test! {
    capture_dependencies_from_another_or_a_dropped_graph_are_refused,
    fn child_capture_dependencies_from_another_or_a_dropped_graph_are_refused(place) {
        let s = stream(&place);
        let buffer = s.alloc(64).unwrap();
        let def_a = CudaGraphDef::new(&place).unwrap();
        match s.begin_capture_to_graph(&def_a, &[], CaptureMode::Relaxed) {
            Err(Error::Unsupported { .. }) => {
                eprintln!("skipped: capture-to-graph is not in this driver");
                return;
            }
            other => other.unwrap(),
        }
        s.fill(&buffer, 0, 64, 1).unwrap();
        // SAFETY: no other thread touches `s` or its capture.
        let foreign = unsafe { s.capture_info() }.unwrap().dependencies;
        assert_eq!(foreign.len(), 1);
        let graph_a = s.end_capture().unwrap();
        let def_b = CudaGraphDef::new(&place).unwrap();
        let refused = |what: &str, result: devstream_core::Result<()>, s: &CudaStream| match result {
            Err(Error::InvalidArgument(reason)) => eprintln!("{what}: refused ({reason})"),
            other => {
                if s.is_capturing().unwrap_or(false) {
                    let _ = s.end_capture();
                }
                panic!("{what}: a node of another graph reached the driver: {other:?}")
            }
        };
        refused(
            "begin_capture_to_graph with a live node of another graph",
            s.begin_capture_to_graph(&def_b, &foreign, CaptureMode::Relaxed),
            &s,
        );
        s.begin_capture(CaptureMode::Relaxed).unwrap();
        refused(
            "update_capture_dependencies with a node of another graph",
            // SAFETY: as above.
            unsafe { s.update_capture_dependencies(&foreign, false) },
            &s,
        );
        let _ = s.end_capture();
        drop(graph_a);
        drop(def_a);
        refused(
            "begin_capture_to_graph with a node of a dropped graph",
            s.begin_capture_to_graph(&def_b, &foreign, CaptureMode::Relaxed),
            &s,
        );
        s.synchronize().unwrap();
    }
}

// ---- the panic target of concurrent launches -----------------------------------------

/// Launches of one graph on two streams: a panic of the first launch's host function is the
/// first launching stream's, whatever was launched after it.
#[test]
fn concurrent_graph_launches_report_a_host_function_panic_on_the_launching_stream() {
    let (place, _serial) = or_skip!(gpu());
    let (a, gate) = gated(&place);
    let b = stream(&place);
    let capture = stream(&place);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    capture.begin_capture(CaptureMode::ThreadLocal).unwrap();
    capture
        .launch_host_func(Box::new(move || {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("the first launch's host function panics");
            }
        }))
        .unwrap();
    let graph = capture.end_capture().unwrap();
    graph.launch(&a).unwrap(); // held by the gate
    graph.launch(&b).unwrap(); // ordered after the first launch by the runtime
    gate.set(1);
    let on_b = synchronize_within(10, "synchronize of the second stream", &b);
    let on_a = synchronize_within(10, "synchronize of the first stream", &a);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(
        on_b.is_ok(),
        "the second launch's stream reported the first launch's panic: {on_b:?}"
    );
    match on_a {
        Err(Error::HostFuncPanicked { stream, message }) => {
            assert_eq!(stream, a.id());
            assert!(message.contains("first launch"), "{message}");
        }
        other => panic!("the first launch's stream did not report its panic: {other:?}"),
    }
}

/// A long-lived pinned host buffer (and device buffer) used by one short-lived stream after
/// another keeps alive only streams whose work may still be queued, not every stream that ever
/// used it (each of those a native stream and an event).
#[test]
fn long_lived_buffers_do_not_keep_every_finished_stream_that_used_them_alive() {
    let (place, _serial) = or_skip!(gpu());
    const LEN: usize = 4096;
    let first = stream(&place);
    let host = first.alloc_host(LEN).unwrap();
    let device = first.alloc(LEN).unwrap();
    first.fill(&device, 0, LEN, 7).unwrap();
    first.synchronize().unwrap();
    drop(first);
    let before = CudaBackend::live_counts().streams;
    for round in 0..100u8 {
        let s = stream(&place);
        s.fill(&device, 0, LEN, round).unwrap();
        s.copy_device_to_host(&host, 0, &device, 0, LEN).unwrap();
        s.synchronize().unwrap();
        assert_eq!(host.to_vec().unwrap(), vec![round; LEN], "round {round}");
    }
    let after = CudaBackend::live_counts().streams;
    assert!(
        after <= before + 2,
        "100 finished, dropped streams used the buffers: live streams went from {before} to {after}"
    );
}

/// A host function writes a pinned host buffer that a copy queued after it on the same stream
/// uploads (how a plug-in stages an asynchronous host→device copy): in stream order the write
/// comes first, so it neither waits for that copy nor fails, and the upload sees it.
#[test]
fn host_function_writes_a_host_buffer_that_a_later_copy_on_its_stream_uploads() {
    let (place, _serial) = or_skip!(gpu());
    const LEN: usize = 256;
    let (s, gate) = gated(&place);
    let staging = Arc::new(s.alloc_host(LEN).unwrap());
    let device = s.alloc(LEN).unwrap();
    let back = s.alloc_host(LEN).unwrap();
    let (target, wrote) = (staging.clone(), Arc::new(std::sync::Mutex::new(None)));
    let w = wrote.clone();
    s.launch_host_func(Box::new(move || {
        *w.lock().unwrap() = Some(target.write(0, &[9u8; LEN]));
    }))
    .unwrap();
    s.copy_host_to_device(&device, 0, &staging, 0, LEN).unwrap();
    s.copy_device_to_host(&back, 0, &device, 0, LEN).unwrap();
    // Everything is queued before the host function can run.
    gate.set(1);
    synchronize_within(20, "synchronize", &s).unwrap();
    let wrote = wrote.lock().unwrap().take();
    assert!(
        matches!(wrote, Some(Ok(()))),
        "the host function's write: {wrote:?}"
    );
    assert_eq!(
        back.to_vec().unwrap(),
        vec![9u8; LEN],
        "the upload saw the write"
    );
}

/// The same from a graph: a captured host function writes a pinned host buffer that a copy
/// queued on the launching stream after the launch uploads. The host function runs as part of
/// that launch, so in stream order the copy has not started: no wait, no error.
#[test]
fn captured_host_function_writes_a_host_buffer_that_a_later_copy_on_the_launching_stream_uploads() {
    let (place, _serial) = or_skip!(gpu());
    const LEN: usize = 256;
    let staging = Arc::new(stream(&place).alloc_host(LEN).unwrap());
    let wrote = Arc::new(std::sync::Mutex::new(Vec::new()));
    let capturing = stream(&place);
    capturing.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let (target, w) = (staging.clone(), wrote.clone());
    capturing
        .launch_host_func(Box::new(move || {
            w.lock().unwrap().push(target.write(0, &[7u8; LEN]));
        }))
        .unwrap();
    let graph = capturing.end_capture().unwrap();
    let (s, gate) = gated(&place);
    let device = s.alloc(LEN).unwrap();
    let back = s.alloc_host(LEN).unwrap();
    graph.launch(&s).unwrap();
    s.copy_host_to_device(&device, 0, &staging, 0, LEN).unwrap();
    s.copy_device_to_host(&back, 0, &device, 0, LEN).unwrap();
    // Everything is queued before the graph's host function can run.
    gate.set(1);
    synchronize_within(20, "synchronize", &s).unwrap();
    let wrote = std::mem::take(&mut *wrote.lock().unwrap());
    assert!(
        matches!(wrote.as_slice(), [Ok(())]),
        "the captured host function's write: {wrote:?}"
    );
    assert_eq!(
        back.to_vec().unwrap(),
        vec![7u8; LEN],
        "the upload saw the write"
    );
}
