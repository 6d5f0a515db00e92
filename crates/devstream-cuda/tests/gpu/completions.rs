//! `Completion` futures: notifiers, captures beside them, re-recorded events.

use super::*;

/// Polls `future` on this thread until ready, parking between polls (a minimal executor).
fn block_on(mut future: devstream_core::Completion) -> devstream_core::Result<()> {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Poll::Ready(result) = std::pin::Pin::new(&mut future).poll(&mut cx) {
            return result;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a completion was not ready within 30 s"
        );
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// Completions resolve independently: one held behind a closed flag does not hold back another
/// stream's (stream or event completion); far more pending completions than the device has
/// doorbells (host functions) all resolve once the flag opens (the sweeper covers the rest);
/// during a Global-mode capture the capturing stream's completion
/// (and that of an event recorded in the capture) is `Error::Capture`, another stream's
/// completion can still be registered, and the capture stays valid and replays; a panicking
/// host function is the stream completion's error.
#[test]
fn completions_use_independent_notifiers_and_leave_captures_valid() {
    let (place, _serial) = or_skip!(gpu());
    let (held, flag) = gated(&place);
    let held_done = held.completion();
    let held_event = held.record_event().unwrap();
    let held_event_done = held_event.completion();
    let free = stream(&place);
    let ran = launch_counting(&free);
    block_on(free.completion()).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    // Not done yet when registered (a kernel-free stream may finish at once otherwise).
    let free_gate = gated(&place);
    let free_event = free_gate.0.record_event().unwrap();
    let free_event_done = free_event.completion();
    free_gate.1.set(1);
    block_on(free_event_done).unwrap();
    assert!(
        !held_done.is_ready() && !held_event_done.is_ready(),
        "the gated stream's completions are pending"
    );
    // Many more completions held by the flag than the device has doorbells (few enough
    // records that the held stream's queue has room: CUDA blocks the enqueuing thread when a
    // stream's queue is full, and only the flag would free it).
    let many_events: Vec<_> = (0..100).map(|_| held.record_event().unwrap()).collect();
    let many: Vec<_> = many_events
        .iter()
        .map(|e| e.completion())
        .chain((0..100).map(|_| held.completion()))
        .collect();
    assert!(many.iter().all(|f| !f.is_ready()));

    let capturing = stream(&place);
    let other = stream(&place);
    capturing.begin_capture(CaptureMode::Global).unwrap();
    let count = launch_counting(&capturing);
    let inside = capturing.record_event().unwrap();
    for future in [capturing.completion(), inside.completion()] {
        assert!(future.is_ready());
        match block_on(future) {
            Err(Error::Capture { .. }) => {}
            other => panic!("a completion during capture should be Err(Capture), got {other:?}"),
        }
    }
    let other_done = other.completion();
    assert!(
        capturing.is_capturing().unwrap(),
        "the capture is still valid"
    );
    let graph = capturing.end_capture().unwrap();
    graph.launch(&capturing).unwrap();
    block_on(capturing.completion()).unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "the graph ran its host function"
    );
    block_on(other_done).unwrap();

    flag.set(1);
    block_on(held_done).unwrap();
    block_on(held_event_done).unwrap();
    for future in many {
        block_on(future).unwrap();
    }

    let panics = stream(&place);
    panics
        .launch_host_func(Box::new(|| panic!("boom before a completion")))
        .unwrap();
    match block_on(panics.completion()) {
        Err(Error::HostFuncPanicked { stream, message }) => {
            assert_eq!(stream, panics.id());
            assert!(message.contains("boom"), "{message}");
        }
        other => panic!("expected HostFuncPanicked, got {other:?}"),
    }
    assert!(matches!(
        panics.synchronize(),
        Err(Error::HostFuncPanicked { .. })
    ));
}

/// An event completion describes the record it was made for: with every doorbell of the device
/// taken (so the event's completion is left to the sweeper), recording the event again on an
/// idle stream must not resolve the completion early; it resolves once the first record's work
/// (held by a flag) is done.
#[test]
fn event_completion_survives_a_re_record_of_its_event() {
    let (place, _serial) = or_skip!(gpu());
    let (held, flag) = gated(&place);
    // More pending completions than doorbells, all behind the flag.
    let fillers: Vec<_> = (0..40).map(|_| held.record_event().unwrap()).collect();
    let filler_done: Vec<_> = fillers.iter().map(|e| e.completion()).collect();
    let event = held.record_event().unwrap();
    let done = event.completion();
    assert!(!done.is_ready());
    let idle = stream(&place);
    idle.record(&event).unwrap();
    idle.synchronize().unwrap();
    assert!(event.query().unwrap(), "the event's new record is done");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !done.is_ready(),
        "the completion resolved on the event's later record, before the work it awaits"
    );
    flag.set(1);
    block_on(done).unwrap();
    for future in filler_done {
        block_on(future).unwrap();
    }
}

/// Global-mode captures begun while the completion hub asks pending events back to back (its
/// spin window, reopened by each registration) stay valid: the hub's questions may not count
/// as another thread's unsafe calls. Every round registers more completions behind a flag and
/// at once begins a capture, adds a host function and ends it; the flag opens at the end
/// whatever happened, so a failure leaves no stream held for the tests after it.
#[test]
fn global_captures_begun_while_the_completion_hub_sweeps_stay_valid() {
    let (place, _serial) = or_skip!(gpu());
    let (held, flag) = gated(&place);
    let mut pending: Vec<_> = (0..64).map(|_| held.completion()).collect();
    let capturing = stream(&place);
    let mut failures = Vec::new();
    for round in 0..50 {
        pending.extend((0..4).map(|_| held.completion()));
        if let Err(e) = capturing.begin_capture(CaptureMode::Global) {
            failures.push(format!("round {round}: begin_capture: {e}"));
            continue;
        }
        let launched = capturing.launch_host_func(Box::new(|| {}));
        let ended = capturing.end_capture();
        if let Err(e) = launched.and(ended.map(drop)) {
            failures.push(format!("round {round}: {e}"));
        }
    }
    flag.set(1);
    for future in pending {
        block_on(future).unwrap();
    }
    assert!(
        failures.is_empty(),
        "captures invalidated while the hub swept: {failures:?}"
    );
}
