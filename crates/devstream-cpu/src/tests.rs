//! Unit tests for what the facade-level conformance suite cannot see: scheduling order on a
//! one-worker pool, legacy default stream ordering, capture DAG structure, buffer lifetimes.
//! Ordering is always gated with flags or channels, never with sleeps.
//!
//! Tests that need process-wide state (live counts, `CaptureMode::Global`) live in `tests/`
//! so that they run in their own process.

use crate::*;
use devstream_core::{
    CaptureMode, DeviceBackend, DeviceBuffer, DeviceEvent, DeviceFlag, DeviceGraph, DeviceStream,
    Error, EventFlags, HostBuffer, Place, Priority, StreamOptions,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// Queues a host function that appends `name` to `log`.
fn note(stream: &CpuStream, log: &Log, name: &str) {
    let (log, name) = (log.clone(), name.to_string());
    stream
        .launch_host_func(Box::new(move || log.lock().unwrap().push(name.clone())))
        .unwrap();
}

/// `stream` runs a host function noting `name` in `log`, and `log` then holds that entry alone
/// (what was noted in it before never ran).
fn assert_log_after_work(stream: &CpuStream, log: &Log, name: &str) {
    note(stream, log, name);
    stream.synchronize().unwrap();
    assert_eq!(entries(log), [name]);
}

fn stream() -> CpuStream {
    CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap()
}

fn blocking_stream() -> CpuStream {
    CpuBackend::new_stream(&Place::Cpu, StreamOptions::default().blocking(true)).unwrap()
}

fn flag() -> CpuFlag {
    CpuBackend::new_flag(&Place::Cpu).unwrap()
}

/// Queues on `s` a wait for a new flag `gate` to reach `at`, then a write of `value` to a new
/// flag `done`: `(gate, done)`.
fn gated_write(s: &CpuStream, at: u32, value: u32) -> (CpuFlag, CpuFlag) {
    let (gate, done) = (flag(), flag());
    s.wait_flag(&gate, at).unwrap();
    s.write_flag(&done, value).unwrap();
    (gate, done)
}

/// A graph captured (in `mode`) on a new stream: one host function that appends `name` to `log`.
fn graph_noting(mode: CaptureMode, log: &Log, name: &str) -> CpuGraph {
    let capture = stream();
    capture.begin_capture(mode).unwrap();
    note(&capture, log, name);
    capture.end_capture().unwrap()
}

fn is_capture_error<T: std::fmt::Debug>(result: Result<T, Error>) -> bool {
    matches!(result, Err(Error::Capture { .. }))
}

/// Occupies the only worker of `pool`'s `stream` until the returned sender is used.
fn occupy(stream: &CpuStream) -> mpsc::Sender<()> {
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    stream
        .launch_host_func(Box::new(move || {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        }))
        .unwrap();
    started_rx.recv().unwrap();
    release_tx
}

#[test]
fn ready_streams_run_by_priority_on_one_worker() {
    let pool = CpuPool::new(1).unwrap();
    let blocker = pool.new_stream(StreamOptions::default());
    let release = occupy(&blocker);
    let log = log();
    let low = pool.new_stream(StreamOptions::default());
    let mid = pool.new_stream(StreamOptions::default().priority(Priority::Native(-1)));
    let high = pool.new_stream(StreamOptions::default().priority(Priority::High));
    for (stream, name) in [(&low, "low"), (&mid, "mid"), (&high, "high")] {
        for _ in 0..3 {
            note(stream, &log, name);
        }
    }
    release.send(()).unwrap();
    for s in [&low, &mid, &high, &blocker] {
        s.synchronize().unwrap();
    }
    let expected: Vec<String> = ["high", "mid", "low"]
        .iter()
        .flat_map(|name| std::iter::repeat_n(name.to_string(), 3))
        .collect();
    assert_eq!(entries(&log), expected);
}

#[test]
fn higher_priority_work_preempts_between_tasks() {
    let pool = CpuPool::new(1).unwrap();
    let low = pool.new_stream(StreamOptions::default());
    let high = pool.new_stream(StreamOptions::default().priority(Priority::High));
    let log = log();
    let release = occupy(&low); // low's first task is running
    note(&low, &log, "low");
    note(&high, &log, "high");
    release.send(()).unwrap();
    low.synchronize().unwrap();
    high.synchronize().unwrap();
    assert_eq!(entries(&log), ["high", "low"]);
}

#[test]
fn priorities_read_back_clamped() {
    let make = |p| CpuBackend::new_stream(&Place::Cpu, StreamOptions::default().priority(p));
    let high = make(Priority::High).unwrap();
    assert_eq!(
        (high.priority(), high.native_priority()),
        (Priority::High, -2)
    );
    let low = make(Priority::Native(7)).unwrap();
    assert_eq!(
        (low.priority(), low.native_priority()),
        (Priority::Normal, 0)
    );
    let over = make(Priority::Native(-9)).unwrap();
    assert_eq!(over.native_priority(), -2);
    let mid = make(Priority::Native(-1)).unwrap();
    assert_eq!(mid.priority(), Priority::Native(-1));
}

#[test]
fn legacy_default_stream_orders_with_blocking_streams_only() {
    let legacy = CpuBackend::default_stream(&Place::Cpu).unwrap();
    assert!(!legacy.is_non_blocking());
    let gate = flag();
    let log = log();
    let blocking = blocking_stream();
    blocking.wait_flag(&gate, 1).unwrap();
    note(&blocking, &log, "blocking");
    note(&legacy, &log, "legacy"); // waits for the blocking stream's earlier work
    let independent = stream();
    note(&independent, &log, "independent");
    independent.synchronize().unwrap(); // not held by the legacy stream
    assert!(!legacy.query().unwrap());
    let later = blocking_stream();
    note(&later, &log, "later"); // waits for the legacy stream's earlier work
    assert!(!later.query().unwrap());
    gate.set(1);
    later.synchronize().unwrap();
    legacy.synchronize().unwrap();
    assert_eq!(
        entries(&log),
        ["independent", "blocking", "legacy", "later"]
    );
}

#[test]
fn legacy_stream_cannot_be_captured() {
    let legacy = CpuBackend::default_stream(&Place::Cpu).unwrap();
    assert!(is_capture_error(legacy.begin_capture(CaptureMode::Relaxed)));
    assert!(!legacy.is_capturing().unwrap());
}

#[test]
fn per_thread_stream_is_one_per_thread() {
    let a = CpuBackend::per_thread_stream(&Place::Cpu).unwrap();
    let b = CpuBackend::per_thread_stream(&Place::Cpu).unwrap();
    assert_eq!(a.id(), b.id());
    assert!(!a.is_non_blocking());
    let other = std::thread::spawn(|| CpuBackend::per_thread_stream(&Place::Cpu).unwrap().id())
        .join()
        .unwrap();
    assert_ne!(other, a.id());
    note(&a, &log(), "x");
    a.synchronize().unwrap();
}

#[test]
fn wait_event_returns_at_once_and_orders_later_work() {
    let (a, b) = (stream(), stream());
    let gate = flag();
    a.wait_flag(&gate, 1).unwrap();
    let done = flag();
    a.write_flag(&done, 1).unwrap();
    let event = a.record_event().unwrap();
    assert!(!event.query().unwrap());
    b.wait_event(&event).unwrap(); // must not block: the gate is closed
    let seen = Arc::new(AtomicU32::new(u32::MAX));
    let (seen2, done2) = (seen.clone(), done.clone());
    b.launch_host_func(Box::new(move || seen2.store(done2.get(), Ordering::SeqCst)))
        .unwrap();
    assert!(!b.query().unwrap());
    gate.set(1);
    b.synchronize().unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1, "b ran after a's write");
    assert!(event.query().unwrap());
}

#[test]
fn wait_on_a_completed_event_adds_nothing() {
    let (a, b) = (stream(), stream());
    let event = a.record_event().unwrap();
    assert!(event.query().unwrap());
    let before = b.submitted_tasks();
    b.wait_event(&event).unwrap();
    b.wait_stream(&a).unwrap();
    assert_eq!(b.submitted_tasks(), before);
    let never = CpuBackend::new_event(&Place::Cpu, EventFlags::default()).unwrap();
    assert!(never.query().unwrap());
    b.wait_event(&never).unwrap();
    assert_eq!(b.submitted_tasks(), before);
}

#[test]
fn wait_stream_orders_after_current_work() {
    let (a, b) = (stream(), stream());
    let gate = flag();
    let log = log();
    a.wait_flag(&gate, 1).unwrap();
    note(&a, &log, "a");
    b.wait_stream(&a).unwrap();
    note(&b, &log, "b");
    gate.set(1);
    b.synchronize().unwrap();
    assert_eq!(entries(&log), ["a", "b"]);
}

#[test]
fn rerecord_replaces_the_capture() {
    let s = stream();
    let gate = flag();
    let event = CpuBackend::new_event(&Place::Cpu, EventFlags::default()).unwrap();
    s.record(&event).unwrap();
    assert!(event.query().unwrap());
    s.wait_flag(&gate, 1).unwrap();
    s.record(&event).unwrap();
    assert!(!event.query().unwrap());
    gate.set(1);
    event.synchronize().unwrap();
    assert!(event.query().unwrap());
}

#[test]
fn elapsed_follows_the_error_order() {
    let s = stream();
    let untimed = CpuBackend::new_event(&Place::Cpu, EventFlags::default()).unwrap();
    let start = CpuBackend::new_event(&Place::Cpu, EventFlags::timed()).unwrap();
    let end = CpuBackend::new_event(&Place::Cpu, EventFlags::timed()).unwrap();
    assert_eq!(untimed.elapsed(&end), Err(Error::TimingDisabled));
    assert_eq!(start.elapsed(&untimed), Err(Error::TimingDisabled));
    assert_eq!(start.elapsed(&end), Err(Error::NotRecorded));
    let gate = flag();
    s.record(&start).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.record(&end).unwrap();
    assert_eq!(start.elapsed(&end), Err(Error::NotReady));
    gate.set(1);
    end.synchronize().unwrap();
    start.elapsed(&end).unwrap();
    // Recording `start` again, strictly later, makes the end come before the start.
    s.launch_host_func(Box::new(|| {
        std::thread::sleep(std::time::Duration::from_millis(1))
    }))
    .unwrap();
    s.record(&start).unwrap();
    start.synchronize().unwrap();
    assert!(matches!(
        start.elapsed(&end),
        Err(Error::InvalidArgument(_))
    ));
    assert!(end.elapsed(&start).unwrap() >= std::time::Duration::from_millis(1));
}

#[test]
fn interprocess_events_are_unsupported() {
    let flags = EventFlags {
        interprocess: true,
        ..EventFlags::default()
    };
    assert!(matches!(
        CpuBackend::new_event(&Place::Cpu, flags),
        Err(Error::Unsupported { .. })
    ));
    let blocking = EventFlags {
        blocking_sync: true,
        ..EventFlags::default()
    };
    let event = CpuBackend::new_event(&Place::Cpu, blocking).unwrap();
    stream().record(&event).unwrap();
    event.synchronize().unwrap();
}

#[test]
fn flags_release_at_greater_or_equal() {
    let s = stream();
    let (gate, done) = gated_write(&s, 3, 9);
    gate.set(2);
    assert!(!s.query().unwrap());
    gate.set(4);
    s.synchronize().unwrap();
    assert_eq!(done.get(), 9);
    // Already satisfied waits pass straight through.
    s.wait_flag(&gate, 1).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn panic_surfaces_once_from_synchronize() {
    let s = stream();
    let log = log();
    s.launch_host_func(Box::new(|| panic!("boom"))).unwrap();
    note(&s, &log, "after");
    match s.synchronize() {
        Err(Error::HostFuncPanicked { stream, message }) => {
            assert_eq!(stream, s.id());
            assert!(message.contains("boom"));
        }
        other => panic!("expected HostFuncPanicked, got {other:?}"),
    }
    assert_eq!(entries(&log), ["after"], "later work still ran");
    s.synchronize().unwrap();
    note(&s, &log, "again");
    s.synchronize().unwrap();
    assert_eq!(entries(&log), ["after", "again"]);
}

#[test]
fn kernel_panic_surfaces_and_buffer_stays_usable() {
    let s = stream();
    let buffer = s.alloc(4).unwrap();
    s.launch_kernel(&[&buffer], |_| panic!("kernel boom"))
        .unwrap();
    assert!(matches!(
        s.synchronize(),
        Err(Error::HostFuncPanicked { ref message, .. }) if message.contains("kernel boom")
    ));
    s.fill(&buffer, 0, 4, 3).unwrap();
    let host = s.alloc_host(4).unwrap();
    s.copy_device_to_host(&host, 0, &buffer, 0, 4).unwrap();
    assert_eq!(host.to_vec().unwrap(), [3; 4]);
}

#[test]
fn synchronize_from_own_host_func_is_refused() {
    let s = stream();
    let inner = s.clone();
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let gate = flag();
    let gate2 = gate.clone();
    s.launch_host_func(Box::new(move || {
        // Keep later work queued so that the stream is not idle.
        *seen2.lock().unwrap() = Some(inner.synchronize());
        gate2.set(1);
    }))
    .unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.synchronize().unwrap();
    assert!(matches!(
        *seen.lock().unwrap(),
        Some(Err(Error::WouldDeadlock { .. }))
    ));
}

#[test]
fn buffers_copy_fill_and_kernel() {
    let s = stream();
    let a = s.alloc(8).unwrap();
    let b = s.alloc(8).unwrap();
    assert_eq!((a.len(), a.place()), (8, &Place::Cpu));
    let host = s.alloc_host(8).unwrap();
    host.write(0, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    s.copy_host_to_device(&a, 0, &host, 0, 8).unwrap();
    s.copy_device_to_device(&b, 0, &a, 2, 4).unwrap();
    s.fill(&b, 4, 4, 0xee).unwrap();
    s.copy_device_to_device(&b, 1, &b, 0, 3).unwrap(); // overlapping, same buffer
    s.launch_kernel(&[&b, &a], |views| {
        let (first, second) = views.split_at_mut(1);
        first[0][7] = second[0][7];
    })
    .unwrap();
    s.copy_device_to_host(&host, 0, &b, 0, 8).unwrap();
    assert_eq!(host.to_vec().unwrap(), [3, 3, 4, 5, 0xee, 0xee, 0xee, 8]);
    s.copy_from_host(&a, 6, &[42, 43]).unwrap();
    s.copy_device_to_host(&host, 0, &a, 6, 2).unwrap();
    let mut out = [0u8; 2];
    host.read(0, &mut out).unwrap();
    assert_eq!(out, [42, 43]);
}

#[test]
fn out_of_range_and_duplicate_buffers_are_refused() {
    let s = stream();
    let a = s.alloc(4).unwrap();
    let host = s.alloc_host(4).unwrap();
    let bad = |r: Result<(), Error>| assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    bad(s.fill(&a, 2, 3, 0));
    bad(s.fill(&a, usize::MAX, 2, 0));
    bad(s.copy_from_host(&a, 1, &[0; 4]));
    bad(s.copy_host_to_device(&a, 0, &host, 1, 4));
    bad(s.copy_device_to_host(&host, 3, &a, 0, 2));
    bad(s.copy_device_to_device(&a, 0, &a, 1, 4));
    bad(s.launch_kernel(&[&a, &a], |_| {}));
    bad(host.read(3, &mut [0; 2]));
    bad(host.write(5, &[]));
    s.synchronize().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Miri aborts on an allocation larger than the host can back instead of returning null"
)]
fn huge_allocations_are_out_of_memory() {
    let s = stream();
    for len in [usize::MAX, usize::MAX / 2, isize::MAX as usize] {
        assert!(matches!(s.alloc(len), Err(Error::OutOfMemory { .. })));
        assert!(matches!(s.alloc_host(len), Err(Error::OutOfMemory { .. })));
    }
    assert!(s.alloc(0).unwrap().is_empty());
}

#[test]
fn buffer_dropped_while_queued_is_freed_after_the_work() {
    let s = stream();
    let gate = flag();
    s.wait_flag(&gate, 1).unwrap();
    let buffer = s.alloc(16).unwrap();
    let host = s.alloc_host(16).unwrap();
    let weak = Arc::downgrade(&buffer.0);
    let weak_host = Arc::downgrade(&host.0);
    s.fill(&buffer, 0, 16, 9).unwrap();
    s.copy_device_to_host(&host, 0, &buffer, 0, 16).unwrap();
    drop(buffer);
    drop(host);
    assert!(weak.upgrade().is_some(), "queued work keeps the buffer");
    assert!(weak_host.upgrade().is_some());
    gate.set(1);
    s.synchronize().unwrap();
    assert!(weak.upgrade().is_none(), "freed once the work ran");
    assert!(weak_host.upgrade().is_none());
}

#[test]
fn stream_dropped_with_queued_work_still_runs_it() {
    let s = stream();
    let (gate, done) = gated_write(&s, 1, 1);
    let event = s.record_event().unwrap();
    let weak = Arc::downgrade(&s.0);
    drop(s); // never blocks
    assert!(weak.upgrade().is_some());
    gate.set(1);
    event.synchronize().unwrap();
    assert_eq!(done.get(), 1);
}

#[test]
fn host_buffer_access_waits_for_queued_copies() {
    let s = stream();
    let gate = flag();
    let device = s.alloc(32).unwrap();
    let host = s.alloc_host(32).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.fill(&device, 0, 32, 5).unwrap();
    s.copy_device_to_host(&host, 0, &device, 0, 32).unwrap();
    assert_eq!(host.0.pending_count(), 1);
    let opener = gate.clone();
    let thread = std::thread::spawn(move || opener.set(1));
    assert_eq!(host.to_vec().unwrap(), vec![5; 32]);
    thread.join().unwrap();
    assert_eq!(host.0.pending_count(), 0);
}

#[test]
fn capture_records_instead_of_running() {
    let s = stream();
    let log = log();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    assert!(s.is_capturing().unwrap());
    note(&s, &log, "captured");
    let graph = s.end_capture().unwrap();
    assert!(!s.is_capturing().unwrap());
    s.synchronize().unwrap();
    assert!(entries(&log).is_empty());
    let other = stream();
    graph.launch(&other).unwrap();
    graph.launch(&s).unwrap();
    other.synchronize().unwrap();
    s.synchronize().unwrap();
    assert_eq!(entries(&log), ["captured", "captured"]);
    assert!(is_capture_error(s.end_capture()), "end without begin");
}

#[test]
fn capture_fork_join_builds_a_dag() {
    let (origin, side) = (stream(), stream());
    let log = log();
    origin.begin_capture(CaptureMode::ThreadLocal).unwrap();
    note(&origin, &log, "a");
    let fork = origin.record_event().unwrap();
    side.wait_event(&fork).unwrap();
    assert!(
        side.is_capturing().unwrap(),
        "the side stream joined the capture"
    );
    note(&side, &log, "b");
    note(&origin, &log, "c");
    side.wait_stream(&side).unwrap();
    origin.wait_stream(&side).unwrap(); // join
    note(&origin, &log, "d");
    let graph = origin.end_capture().unwrap();
    assert!(!side.is_capturing().unwrap());
    assert_eq!(graph.node_count(), 4);
    assert_eq!(graph.branch_count(), 2);
    let mut edges = graph.edges();
    edges.sort();
    assert_eq!(edges, [(0, 1), (0, 2), (1, 3), (2, 3)]);
    assert!(entries(&log).is_empty());

    let target = stream();
    graph.launch(&target).unwrap();
    graph.launch(&target).unwrap();
    target.synchronize().unwrap();
    let got = entries(&log);
    assert_eq!(got.len(), 8);
    for run in got.chunks(4) {
        assert_eq!(run[0], "a");
        assert_eq!(run[3], "d");
        let mut middle = [run[1].clone(), run[2].clone()];
        middle.sort();
        assert_eq!(middle, ["b", "c"]);
    }
}

#[test]
fn graph_branches_run_concurrently() {
    // Branch `b` (captured first) waits for a flag that branch `c` writes: a serial replay in
    // capture order would never finish.
    let (origin, side) = (stream(), stream());
    let signal = flag();
    origin.begin_capture(CaptureMode::ThreadLocal).unwrap();
    origin.write_flag(&signal, 0).unwrap();
    side.wait_event(&origin.record_event().unwrap()).unwrap();
    side.wait_flag(&signal, 1).unwrap();
    origin.write_flag(&signal, 1).unwrap();
    origin.wait_stream(&side).unwrap();
    let graph = origin.end_capture().unwrap();
    let target = stream();
    for _ in 0..3 {
        graph.launch(&target).unwrap();
    }
    target.synchronize().unwrap();
    assert_eq!(signal.get(), 1);
}

#[test]
fn unjoined_fork_fails_end_capture() {
    let (origin, side) = (stream(), stream());
    origin.begin_capture(CaptureMode::Relaxed).unwrap();
    note(&origin, &log(), "a");
    side.wait_stream(&origin).unwrap();
    note(&side, &log(), "b");
    assert!(is_capture_error(side.end_capture()), "not the origin");
    assert!(is_capture_error(origin.end_capture()));
    assert!(!side.is_capturing().unwrap());
    assert!(!origin.is_capturing().unwrap());
    assert_log_after_work(&side, &log(), "side usable");
}

#[test]
fn forked_streams_must_be_joined_even_without_work() {
    let (origin, side) = (stream(), stream());
    origin.begin_capture(CaptureMode::Relaxed).unwrap();
    side.wait_stream(&origin).unwrap();
    side.record_event().unwrap(); // recorded, but the origin never waits on it
    note(&origin, &log(), "a");
    assert!(is_capture_error(origin.end_capture()));
    assert!(!side.is_capturing().unwrap());

    // Joined back without work: fine.
    origin.begin_capture(CaptureMode::Relaxed).unwrap();
    side.wait_stream(&origin).unwrap();
    origin.wait_stream(&side).unwrap();
    origin.end_capture().unwrap();

    // Joined back, then more work on the fork: must be joined again.
    origin.begin_capture(CaptureMode::Relaxed).unwrap();
    side.wait_stream(&origin).unwrap();
    origin.wait_stream(&side).unwrap();
    note(&side, &log(), "late");
    assert!(is_capture_error(origin.end_capture()));
}

#[test]
fn joins_are_transitive() {
    let (origin, first, second) = (stream(), stream(), stream());
    let log = log();
    origin.begin_capture(CaptureMode::Relaxed).unwrap();
    first.wait_stream(&origin).unwrap();
    note(&first, &log, "first");
    second.wait_stream(&first).unwrap();
    note(&second, &log, "second");
    origin.wait_stream(&second).unwrap(); // covers first through second
    note(&origin, &log, "end");
    let graph = origin.end_capture().unwrap();
    assert_eq!(graph.branch_count(), 3);
    graph.launch(&origin).unwrap();
    origin.synchronize().unwrap();
    assert_eq!(entries(&log), ["first", "second", "end"]);
}

#[test]
fn begin_capture_twice_invalidates() {
    let s = stream();
    assert!(is_capture_error(s.end_capture()), "end without begin");
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    assert!(is_capture_error(s.begin_capture(CaptureMode::ThreadLocal)));
    assert!(is_capture_error(s.end_capture()));
    assert!(!s.is_capturing().unwrap());
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    s.end_capture().unwrap();
}

#[test]
fn query_or_synchronize_during_capture_invalidates_it() {
    for use_query in [true, false] {
        let s = stream();
        let log = log();
        s.begin_capture(CaptureMode::Relaxed).unwrap();
        note(&s, &log, "captured");
        let result = if use_query {
            s.query().map(|_| ())
        } else {
            s.synchronize()
        };
        assert!(is_capture_error(result));
        assert!(s.is_capturing().unwrap());
        assert!(is_capture_error(s.launch_host_func(Box::new(|| {}))));
        assert!(is_capture_error(s.end_capture()));
        assert!(!s.is_capturing().unwrap());
        assert_log_after_work(&s, &log, "usable");
    }
}

#[test]
fn waiting_on_an_outside_event_breaks_isolation() {
    let (s, other) = (stream(), stream());
    let outside = other.record_event().unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(is_capture_error(s.wait_event(&outside)));
    assert!(is_capture_error(s.end_capture()));
    // A never-recorded event is fine.
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    let never = CpuBackend::new_event(&Place::Cpu, EventFlags::default()).unwrap();
    s.wait_event(&never).unwrap();
    s.end_capture().unwrap();
}

#[test]
fn two_captures_cannot_merge() {
    let (a, b) = (stream(), stream());
    a.begin_capture(CaptureMode::Relaxed).unwrap();
    b.begin_capture(CaptureMode::Relaxed).unwrap();
    let from_a = a.record_event().unwrap();
    assert!(is_capture_error(from_a.query()));
    assert!(is_capture_error(b.wait_event(&from_a)));
    assert!(is_capture_error(b.end_capture()));
    a.end_capture().unwrap();
    assert!(
        from_a.query().unwrap(),
        "after the capture, its events are inert"
    );
}

#[test]
fn thread_local_capture_prohibits_only_its_thread() {
    let (s, other) = (stream(), stream());
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let elsewhere = other.clone();
    std::thread::spawn(move || {
        elsewhere.synchronize().unwrap();
        elsewhere.alloc_host(4).unwrap();
    })
    .join()
    .unwrap();
    assert!(is_capture_error(other.synchronize()));
    assert!(is_capture_error(other.query()));
    s.end_capture()
        .expect("a refused call beside the capture leaves it valid");
    other.synchronize().unwrap();
}

#[test]
fn relaxed_capture_prohibits_nothing() {
    let (s, other) = (stream(), stream());
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    other.synchronize().unwrap();
    other.alloc_host(4).unwrap();
    s.end_capture().unwrap();
}

#[test]
fn captured_copies_kernels_and_flags_replay() {
    let s = stream();
    let buffer = s.alloc(4).unwrap();
    let host = s.alloc_host(4).unwrap();
    let counter = flag();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    s.copy_from_host(&buffer, 0, &[1, 1, 1, 1]).unwrap();
    s.launch_kernel(&[&buffer], |views| {
        for byte in views[0].iter_mut() {
            *byte += 1;
        }
    })
    .unwrap();
    s.copy_device_to_host(&host, 0, &buffer, 0, 4).unwrap();
    let c = counter.clone();
    s.launch_host_func(Box::new(move || c.set(c.get() + 1)))
        .unwrap();
    let graph = s.end_capture().unwrap();
    assert_eq!(graph.node_count(), 4);
    assert_eq!(graph.branch_count(), 1);
    assert_eq!(host.to_vec().unwrap(), [0; 4]);
    graph.launch(&s).unwrap();
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(host.to_vec().unwrap(), [2; 4]);
    assert_eq!(counter.get(), 2);
}

#[test]
fn graph_launch_is_ordered_within_the_stream() {
    let s = stream();
    let log = log();
    let graph = graph_noting(CaptureMode::ThreadLocal, &log, "graph");
    let gate = flag();
    note(&s, &log, "before");
    s.wait_flag(&gate, 1).unwrap();
    graph.launch(&s).unwrap();
    note(&s, &log, "after");
    assert!(!s.query().unwrap());
    gate.set(1);
    s.synchronize().unwrap();
    assert_eq!(entries(&log), ["before", "graph", "after"]);
}

#[test]
fn graph_launched_during_capture_is_captured() {
    let outer = stream();
    let log = log();
    let inner = graph_noting(CaptureMode::Relaxed, &log, "inner");
    outer.begin_capture(CaptureMode::Relaxed).unwrap();
    note(&outer, &log, "first");
    inner.launch(&outer).unwrap();
    note(&outer, &log, "last");
    let graph = outer.end_capture().unwrap();
    assert_eq!(graph.node_count(), 3);
    assert!(entries(&log).is_empty());
    graph.launch(&outer).unwrap();
    outer.synchronize().unwrap();
    assert_eq!(entries(&log), ["first", "inner", "last"]);
}

#[test]
fn capabilities_and_places() {
    assert_eq!(CpuBackend::places(), [Place::Cpu]);
    CpuBackend::probe().unwrap();
    let caps = CpuBackend::capabilities(&Place::Cpu).unwrap();
    assert!(caps.priorities && caps.flags && caps.timing && caps.host_funcs);
    assert!(caps.legacy_default_stream && caps.per_thread_stream && caps.concurrent_streams);
    assert!(!caps.external_handles && !caps.cross_device_wait);
    assert!(CpuBackend::capabilities(&Place::Cuda(0)).is_err());
    assert!(CpuBackend::new_stream(&Place::Cuda(0), StreamOptions::default()).is_err());
    assert!(CpuPool::new(0).is_err());
}

#[test]
fn many_threads_chain_streams_without_losing_work() {
    // Miri interprets every step: fewer links keep the run in seconds.
    const LINKS: u32 = if cfg!(miri) { 20 } else { 200 };
    let counter = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut previous: Option<CpuStream> = None;
                for _ in 0..LINKS {
                    let s = stream();
                    if let Some(p) = &previous {
                        s.wait_stream(p).unwrap();
                    }
                    let c = counter.clone();
                    s.launch_host_func(Box::new(move || {
                        c.fetch_add(1, Ordering::SeqCst);
                    }))
                    .unwrap();
                    let e = s.record_event().unwrap();
                    if let Some(p) = &previous {
                        p.wait_event(&e).unwrap();
                    }
                    previous = Some(s);
                }
                previous.unwrap().synchronize().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), 4 * LINKS);
}

#[test]
fn concurrent_submitters_keep_per_thread_order() {
    // Miri interprets every step: fewer submissions keep the run in seconds.
    const SUBMISSIONS: u32 = if cfg!(miri) { 200 } else { 2000 };
    let shared = stream();
    let observer = stream();
    let last_seen = Arc::new(Mutex::new([0u32; 4]));
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let (shared, observer, last_seen) =
                (shared.clone(), observer.clone(), last_seen.clone());
            std::thread::spawn(move || {
                for n in 1..=SUBMISSIONS {
                    let seen = last_seen.clone();
                    shared
                        .launch_host_func(Box::new(move || {
                            let mut seen = seen.lock().unwrap();
                            assert_eq!(seen[thread], n - 1, "per-thread order broken");
                            seen[thread] = n;
                        }))
                        .unwrap();
                    if n % 100 == 0 {
                        let event = shared.record_event().unwrap();
                        observer.wait_event(&event).unwrap();
                        assert!(shared.query().is_ok());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    observer.synchronize().unwrap();
    shared.synchronize().unwrap();
    assert_eq!(*last_seen.lock().unwrap(), [SUBMISSIONS; 4]);
    assert_eq!(shared.completed_tasks(), shared.submitted_tasks());
}

/// Dropped pending completions of a stream that stays gated do not pile up in its waiter list
/// (abandoned entries are pruned as the list grows), and the live ones still complete.
#[test]
fn dropped_completions_are_pruned_from_the_waiter_list() {
    let s = stream();
    let gate = flag();
    s.wait_flag(&gate, 1).unwrap();
    let kept = s.completion();
    for _ in 0..10_000 {
        drop(s.completion());
        drop(s.record_event().unwrap().completion());
    }
    let waiting = s.0.completion_waiters();
    assert!(
        waiting <= 2 * crate::stream::PRUNE_MIN + 1,
        "{waiting} completion waiters kept for 1 live future"
    );
    assert!(!kept.is_ready());
    gate.set(1);
    s.synchronize().unwrap();
    // The worker completes the future right after it publishes the count `synchronize` saw.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !kept.is_ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "the kept completion never completed"
        );
        std::thread::yield_now();
    }
    assert_eq!(s.0.completion_waiters(), 0);
}

/// Two threads submit to one non-blocking stream at once. An event one of them records covers
/// what was submitted before the record, so a host function that thread queues right after the
/// record finds the event complete when it runs: the queue's order must be the order the
/// submissions were counted in, whichever thread was preempted between counting and queueing.
#[test]
fn an_event_recorded_before_a_host_function_is_complete_inside_it_despite_concurrent_submitters() {
    let s = stream();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                s.launch_host_func(Box::new(|| {})).unwrap();
            }
        })
    };
    let incomplete = Arc::new(AtomicU32::new(0));
    let rounds = if cfg!(miri) { 20 } else { 20_000 };
    for _ in 0..rounds {
        let event = s.record_event().unwrap();
        let incomplete = incomplete.clone();
        s.launch_host_func(Box::new(move || {
            if !event.query().unwrap_or(false) {
                incomplete.fetch_add(1, Ordering::Relaxed);
            }
        }))
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    other.join().unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        incomplete.load(Ordering::Relaxed),
        0,
        "host functions that found the event recorded right before them incomplete"
    );
}

/// A kernel sees a graph buffer's own length, not its block's: the first buffer of a size
/// class and the one that reuses its block later in the capture (another length of the class)
/// each see their own, over one block.
#[test]
fn a_kernel_sees_a_graph_buffers_length_not_its_blocks() {
    let s = stream();
    let seen = Arc::new(Mutex::new(Vec::new()));
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let first = s.alloc(1000).unwrap();
    let log = seen.clone();
    s.launch_kernel(&[&first], move |views| {
        views[0].fill(1);
        log.lock().unwrap().push(views[0].len());
    })
    .unwrap();
    drop(first);
    let second = s.alloc(600).unwrap();
    let log = seen.clone();
    s.launch_kernel(&[&second], move |views| {
        log.lock().unwrap().push(views[0].len());
    })
    .unwrap();
    let graph = s.end_capture().unwrap();
    let stats = graph.memory_pool().unwrap().stats().unwrap();
    assert_eq!(stats.reserved_bytes, 1024, "one block for both: {stats:?}");
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![1000, 600]);
}
