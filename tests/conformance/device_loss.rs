//! A device lost while a stream has work queued on it, on every place that can lose its device
//! on demand ([`device_loser`]).
//!
//! The rule, the same on every backend (CUDA's for a sticky context error): a lost or faulted
//! device is an error (`Error::Driver`, naming the native failure) from every `synchronize`,
//! `query`, `Event::synchronize`, `Event::query` and `Event::completion` that covers work on it,
//! from then on; work
//! that never ran is never reported done; a host function queued behind the lost work does not
//! run (CUDA documents for `cuLaunchHostFunc` that it is not called after a context error);
//! reading a host buffer that a lost copy was to fill is an error, never stale bytes.

use crate::harness::{
    assert_stays_false, device_loser, for_each_place_isolated, not_applicable, within, Gate, HANG,
};
use devstream::{Error, Result, Stream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const LEN: usize = 4096;

/// `result` is the device's loss: an `Error::Driver`.
fn assert_lost<T: std::fmt::Debug>(what: &str, result: Result<T>) {
    match result {
        Err(Error::Driver { .. }) => {}
        other => panic!("{what}: expected the device's loss (Error::Driver), got {other:?}"),
    }
}

/// Runs a call that may block with the [`HANG`] watchdog: a hang fails the test naming it.
fn bounded<T: Send + 'static>(what: &str, call: impl FnOnce() -> T + Send + 'static) -> T {
    within(*HANG, what, call, || {})
}

fn synchronize(stream: &Stream) -> Result<()> {
    let s = stream.clone();
    bounded("synchronize after the device was lost", move || {
        s.synchronize()
    })
}

/// Stream S waits behind a gate, then has a fill, a device→host copy, a host function and a
/// record queued; the device is lost, then the gate opens. Everything that covers the lost
/// work reports the loss, the host function never runs, the host buffer is not read as if the
/// copy had happened, and later synchronizes (of S and of a stream whose work finished before
/// the loss) report it too.
#[test]
fn a_lost_device_fails_every_stream_and_event_and_runs_no_host_function_behind_it() {
    for_each_place_isolated(
        "device_loss::a_lost_device_fails_every_stream_and_event_and_runs_no_host_function_behind_it",
        |place| {
            let stream = Stream::new(place)?;
            let Some(lose) = device_loser(&stream) else {
                not_applicable(place, "the place cannot lose its device on demand");
                return Ok(());
            };
            // A stream whose work completed before the loss.
            let finished = Stream::new(place)?;
            let scratch = finished.alloc(LEN)?;
            finished.fill(&scratch, 0, LEN, 1)?;
            finished.synchronize()?;

            let dev = stream.alloc(LEN)?;
            let host = Arc::new(stream.alloc_host(LEN)?);
            let Some(gate) = Gate::close(&stream)? else {
                not_applicable(place, "no gate (neither flags nor host functions)");
                return Ok(());
            };
            stream.fill(&dev, 0, LEN, 0xAB)?;
            stream.copy_device_to_host(&host, 0, &dev, 0, LEN)?;
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            stream.launch_host_func(move || r.store(true, Ordering::SeqCst))?;
            let event = stream.record_event()?;
            // Asked for before the loss: it resolves with it (what `Event::synchronize` says).
            let pending = event.completion();

            lose();
            gate.release();

            assert_lost("synchronize of the stream with the lost work", synchronize(&stream));
            assert_lost("query of the stream with the lost work", stream.query());
            let e = event.clone();
            assert_lost(
                "Event::synchronize of the lost work",
                bounded("Event::synchronize after the loss", move || e.synchronize()),
            );
            assert_lost("Event::query of the lost work", event.query());
            assert_lost(
                "Event::completion of the lost work",
                bounded("Event::completion after the loss", move || {
                    crate::completion::block_on(pending)
                }),
            );
            assert_stays_false("the host function behind the lost work ran", || {
                ran.load(Ordering::SeqCst)
            });
            let h = host.clone();
            match bounded("host buffer read after the loss", move || h.to_vec()) {
                Err(_) => {}
                Ok(bytes) => panic!(
                    "the host buffer the lost copy was to fill reads as if it had run (first \
                     bytes {:?})",
                    &bytes[..8]
                ),
            }
            // The loss stays reported: asked again, and for a stream whose work finished
            // before it.
            assert_lost("synchronize asked again", synchronize(&stream));
            assert_lost("Event::query asked again", event.query());
            assert_lost("synchronize of a stream of the lost device", synchronize(&finished));
            assert!(!ran.load(Ordering::SeqCst), "the host function ran late");
            Ok(())
        },
    );
}
