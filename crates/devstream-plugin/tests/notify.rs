//! The completion notifier of plug-in places is told of awaited completions by nudges (a
//! callback put before the awaited record), not left to find them by polling. Checked through
//! the count of nudges sent (`devstream_plugin::nudges_sent`); how fast a completion is seen is
//! measured by `bench-cross` and `bench-wake`, never asserted here.

mod common;

use common::*;
use devstream_core::{Completion, DeviceBackend, DeviceEvent, DeviceFlag, DeviceStream};
use devstream_plugin::{nudges_sent, PluginBackend};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// The count of nudges is process-wide: the tests of this file take turns.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `completion` on this thread, parking between polls.
fn block_on(mut completion: Completion) -> devstream_core::Result<()> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(result) = Pin::new(&mut completion).poll(&mut context) {
            return result;
        }
        std::thread::park();
    }
}

#[test]
fn an_event_completion_asked_while_its_record_is_held_is_announced_by_a_nudge() {
    let _turn = one_at_a_time();
    let place = cpu0();
    let s = stream(&place);
    let gate = PluginBackend::new_flag(&place).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    let ran = launch_counting(&s);
    let event = s.record_event().unwrap();
    let completion = event.completion();
    let before = nudges_sent();
    gate.set(1);
    block_on(completion).unwrap();
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(
        nudges_sent() > before,
        "the completion of an event recorded behind a gate was not announced by a nudge"
    );
}

#[test]
fn later_records_on_a_stream_whose_event_completion_was_awaited_are_nudged() {
    let _turn = one_at_a_time();
    let place = cpu0();
    let s = stream(&place);
    let first = s.record_event().unwrap();
    block_on(first.completion()).unwrap();
    s.synchronize().unwrap();
    let before = nudges_sent();
    let second = s.record_event().unwrap();
    s.synchronize().unwrap();
    assert!(second.query().unwrap());
    assert!(
        nudges_sent() > before,
        "a record on a stream whose event completions are awaited was not preceded by a nudge"
    );
}

#[test]
fn records_on_a_stream_whose_completions_nobody_awaits_put_no_nudge() {
    let _turn = one_at_a_time();
    let place = cpu0();
    // A notifier for the runtime exists (a nudge is only counted when it reaches one).
    let s = stream(&place);
    let watched = s.record_event().unwrap();
    block_on(watched.completion()).unwrap();
    let quiet = stream(&place);
    let before = nudges_sent();
    for _ in 0..4 {
        quiet.record_event().unwrap();
    }
    quiet.synchronize().unwrap();
    assert_eq!(nudges_sent(), before);
}

/// A stream completion whose stream begins a capture before the notifier asked about it: the
/// notifier may not ask while the capture lasts (the question could invalidate it), but the
/// nudge before the completion's record ran, so the work is done and the completion resolves.
/// Another stream waiting for it (`wait_completion`) synchronizes without waiting for the
/// capture's end, which here the same thread brings (found by `plugin_loader` with
/// `DEVSTREAM_FUZZ_EXTENDED=1`: before, that synchronize waited for good).
#[test]
fn a_completion_whose_stream_then_captures_resolves_from_its_nudge() {
    let _turn = one_at_a_time();
    let place = cpu0();
    let (capturing, waiting) = (stream(&place), stream(&place));
    // Work that is still running when the capture begins, so the notifier cannot have seen
    // the record complete before the capture made asking unsafe.
    capturing
        .launch_host_func(Box::new(|| {
            std::thread::sleep(std::time::Duration::from_millis(100))
        }))
        .unwrap();
    let completion = capturing.completion();
    capturing
        .begin_capture(devstream_core::CaptureMode::Relaxed)
        .unwrap();
    waiting.wait_completion(completion).unwrap();
    let (done, synchronized) = std::sync::mpsc::channel();
    let synchronizer = waiting.clone();
    std::thread::spawn(move || {
        let _ = done.send(synchronizer.synchronize());
    });
    let answer = synchronized.recv_timeout(std::time::Duration::from_secs(20));
    // The capture ends whatever happened, so that a failing check does not hang the binary.
    let graph = capturing.end_capture();
    assert!(
        matches!(answer, Ok(Ok(()))),
        "the waiting stream's synchronize waited for the capture's end: {answer:?}"
    );
    drop(graph.unwrap());
}
