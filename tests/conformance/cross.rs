//! Waits across backends (`devstream_core::traits`, "Waits across backends";
//! docs/CROSS_BACKEND.md): a stream waits on an event or a stream of another backend with the
//! meaning of a wait within one backend, and no thread is created or blocked per wait.
//!
//! Every check runs on every ordered pair of places under test whose backends differ (a custom
//! device type is its own backend): the first place produces, the second waits. A consumer whose
//! `foreign_waits` capability is off must answer `Unsupported` (asserted, then the pair does not
//! apply); a check that needs a gate or host functions a place lacks does not apply to the pair.

use crate::harness::{
    assert_stays_false, caps, device_loser, driver_gpu_turn, for_each_place, for_each_place_alone,
    for_each_place_isolated, gates_stall_the_driver, not_applicable, other_backend,
    places_under_test, sync, wait_until, within, Gate, Log, PATIENCE,
};
use devstream::foreign::{pending_waits, registered_waits, BackendKey, PendingWaits};
use devstream::{
    live_counts, CaptureMode, CaptureSupport, Error, Event, EventFlags, LiveCounts, Place, Result,
    Stream,
};
use std::time::Duration;

/// The places under test of another backend than `producer`, whose streams can wait on other
/// backends' work. For the others, a foreign wait is asserted to answer `Unsupported`.
pub(crate) fn consumers_of(producer: &Place) -> Result<Vec<Place>> {
    let mut out = Vec::new();
    for consumer in places_under_test()
        .into_iter()
        .filter(|c| other_backend(producer, c))
    {
        if caps(&consumer).foreign_waits {
            out.push(consumer);
            continue;
        }
        let (p, c) = (Stream::new(producer)?, Stream::new(&consumer)?);
        assert_err!(
            c.wait_event(&p.record_event()?),
            Error::Unsupported { place, .. } if place == consumer
        );
        not_applicable(
            &consumer,
            &format!("foreign_waits off: waits on {producer} answer Unsupported"),
        );
    }
    Ok(out)
}

/// Runs `check(producer, consumer)` on every ordered pair of different backends whose consumer
/// has `foreign_waits`, naming the pair in a failure.
pub(crate) fn for_each_pair(check: impl Fn(&Place, &Place) -> Result<()>) {
    for_each_place(|producer| each_consumer(producer, &check));
}

/// [`for_each_pair`] with no other conformance test running in this process. Every wait
/// across backends that earlier tests made must have resolved first (see
/// [`assert_waits_drain`]): a leftover one would make this check see waits it did not make.
pub(crate) fn for_each_pair_alone(check: impl Fn(&Place, &Place) -> Result<()>) {
    for_each_place_alone(|producer| {
        assert_waits_drain("before the check", registered_waits());
        each_consumer(producer, &check)
    });
}

/// How long waits across backends may stay pending after the check that made them ended, before
/// the harness calls them leaked: a hang detector sized for a sanitizer on a busy host, where a
/// wait resolves as soon as its awaited work completes.
const DRAIN: Duration = Duration::from_secs(20);

/// Fails, naming each pair of backends left and its pending waits, unless every wait across
/// backends registered before `mark` (a `registered_waits()` reading) resolves within
/// [`DRAIN`]. Waits made after `mark` (by checks running alongside) are not counted, so the
/// check holds while other tests make waits of their own; a wait made before it by another
/// test that is still running must resolve within [`DRAIN`] too, as every check's waits do.
pub(crate) fn assert_waits_drain(when: &str, mark: u64) {
    let left = || {
        pending_waits()
            .into_iter()
            .filter(|pair| pair.oldest < mark)
            .collect::<Vec<PendingWaits>>()
    };
    if wait_until(DRAIN, || left().is_empty()) {
        return;
    }
    let backend = |key: BackendKey| {
        let names: Vec<String> = places_under_test()
            .iter()
            .filter(|place| BackendKey::of(place) == key)
            .map(Place::to_string)
            .collect();
        if names.is_empty() {
            format!("{key:?}")
        } else {
            names.join("/")
        }
    };
    let pairs: Vec<String> = left()
        .iter()
        .map(|pair| {
            format!(
                "{} waiting on {}: {} pending (oldest registration {}, mark {mark})",
                backend(pair.waiting),
                backend(pair.awaited),
                pair.count,
                pair.oldest
            )
        })
        .collect();
    panic!(
        "{when}: waits across backends made earlier are still pending {DRAIN:?} later (a leak): \
         {}",
        pairs.join("; ")
    );
}

pub(crate) fn each_consumer(
    producer: &Place,
    check: &dyn Fn(&Place, &Place) -> Result<()>,
) -> Result<()> {
    for consumer in consumers_of(producer)? {
        // A consumer held at a word only the host writes stalls its driver like a gate: its
        // turn, unless the producer's place already holds it.
        let turn = if gates_stall_the_driver(producer) {
            None
        } else {
            driver_gpu_turn(&consumer)
        };
        check(producer, &consumer).map_err(|e| {
            Error::InvalidArgument(format!("{producer} → {consumer}: returned Err({e:?})"))
        })?;
        // Every stream of the check synchronized or was dropped: its waits must resolve.
        drop(turn);
        assert_waits_drain(
            &format!("after {producer} → {consumer}"),
            registered_waits(),
        );
        eprintln!("[conformance]   {producer} → {consumer}: ok");
    }
    Ok(())
}

/// Whether the consumer can show when its later work runs (a host function that logs).
pub(crate) fn observable(consumer: &Place) -> bool {
    caps(consumer).host_funcs
}

/// Whether losing `producer`'s GPU may fail `consumer`'s later work too. NVIDIA's driver makes a
/// sticky error (a trapped kernel) the error of every context of the process, not only the
/// context that ran the kernel: after `cuda:0` traps, every call on `cuda:1` fails with the same
/// code, with no devstream code involved (a raw-driver probe shows it). HIP on an NVIDIA GPU runs
/// on those contexts. So among CUDA and HIP places a loss reaches every GPU place, and the test
/// asks of those only that the error is reported, never hidden.
fn loss_reaches(producer: &Place, consumer: &Place) -> bool {
    let gpu = |place: &Place| matches!(place, Place::Cuda(_) | Place::Hip(_));
    gpu(producer) && gpu(consumer)
}

/// A stream of `producer` held at a gate, or `None` (the pair does not apply).
pub(crate) fn gated_stream(producer: &Place) -> Result<Option<(Stream, Gate)>> {
    let stream = Stream::new(producer)?;
    match Gate::close(&stream)? {
        Some(gate) => Ok(Some((stream, gate))),
        None => {
            not_applicable(producer, "no gate (neither flags nor host functions)");
            Ok(None)
        }
    }
}

/// The consumer's stream, the producer's stream, the gate holding the producer, and the log.
pub(crate) type ObservedPair = (Stream, Stream, Gate, Log<&'static str>);

/// The common start of an ordering test for `producer` → `consumer`: a consumer stream, a
/// producer stream held at a gate with a host function logging `first` behind it (where the
/// producer has host functions), and the log; `None` where the pair cannot show an order.
pub(crate) fn observed_pair(
    producer: &Place,
    consumer: &Place,
    first: &'static str,
) -> Result<Option<ObservedPair>> {
    if !observable(consumer) {
        not_applicable(consumer, "no host functions to observe the order");
        return Ok(None);
    }
    let consumer_stream = Stream::new(consumer)?;
    let Some((stream, gate)) = gated_stream(producer)? else {
        return Ok(None);
    };
    let log = Log::new();
    if caps(producer).host_funcs {
        stream.launch_host_func(log.task(first))?;
    }
    Ok(Some((consumer_stream, stream, gate, log)))
}

/// The number of threads of this process (`Threads:` of /proc/self/status).
fn thread_count() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line in /proc/self/status")
}

/// A consumer's later work runs only after the producer's gated work, which the wait does not
/// block on: `wait_event` returns at once, the consumer's host function stays queued while the
/// producer is held, and runs after the producer's own work once the gate opens.
#[test]
fn later_work_waits_for_a_slow_producer_of_another_backend() {
    for_each_pair(|producer, consumer| {
        let Some((consumer_stream, stream, gate, log)) =
            observed_pair(producer, consumer, "produced")?
        else {
            return Ok(());
        };
        let event = stream.record_event()?;
        let (waiting, awaited) = (consumer_stream.clone(), event.clone());
        within(
            PATIENCE,
            "wait_event on another backend's gated event",
            move || waiting.wait_event(&awaited),
            gate.opener(),
        )?;
        consumer_stream.launch_host_func(log.task("consumed"))?;
        let done = consumer_stream.record_event()?;
        assert_stays_false(
            "the consumer's later work ran through the producer's gate",
            || log.contains(&"consumed"),
        );
        if caps(consumer).nonblocking_query {
            assert!(!done.query()?, "the consumer's event completed early");
        }
        gate.release();
        sync(&consumer_stream)?;
        assert!(log.contains(&"consumed"), "the consumer's work never ran");
        if caps(producer).host_funcs {
            assert!(
                log.position(&"produced") < log.position(&"consumed"),
                "the consumer ran before the producer's work: {:?}",
                log.entries()
            );
        }
        sync(&stream)
    });
}

/// `wait_stream` on another backend's stream waits for the work submitted there so far, and not
/// for work submitted there afterwards (held at a second gate that stays closed).
#[test]
fn wait_stream_of_another_backend_does_not_wait_for_later_work() {
    for_each_pair(|producer, consumer| {
        let Some((consumer_stream, stream, first, log)) =
            observed_pair(producer, consumer, "early")?
        else {
            return Ok(());
        };
        consumer_stream.wait_stream(&stream)?;
        let Some(later) = Gate::close(&stream)? else {
            return Ok(());
        };
        if caps(producer).host_funcs {
            stream.launch_host_func(log.task("late"))?;
        }
        consumer_stream.launch_host_func(log.task("consumed"))?;
        assert_stays_false("the consumer ran before the awaited work", || {
            log.contains(&"consumed")
        });
        first.release();
        let waiting = consumer_stream.clone();
        within(
            PATIENCE,
            "synchronize of a stream that waited on the other stream's earlier work only",
            move || waiting.synchronize(),
            later.opener(),
        )?;
        assert!(log.contains(&"consumed"));
        assert!(
            !log.contains(&"late"),
            "the producer's later work ran through its closed gate"
        );
        if caps(producer).host_funcs {
            assert!(log.position(&"early") < log.position(&"consumed"));
        }
        later.release();
        sync(&stream)
    });
}

/// A never-recorded event of another backend, and one whose work is complete, add nothing:
/// the consumer's work runs at once.
#[test]
fn never_recorded_and_complete_events_of_another_backend_are_no_ops() {
    for_each_pair(|producer, consumer| {
        let consumer_stream = Stream::new(consumer)?;
        let never = Event::new(producer, EventFlags::default())?;
        consumer_stream.wait_event(&never)?;
        let idle = Stream::new(producer)?;
        let complete = idle.record_event()?;
        sync(&idle)?;
        consumer_stream.wait_event(&complete)?;
        consumer_stream.wait_stream(&idle)?;
        let log = Log::new();
        if observable(consumer) {
            consumer_stream.launch_host_func(log.task("ran"))?;
        }
        sync(&consumer_stream)?;
        if observable(consumer) {
            assert!(log.contains(&"ran"));
        }
        Ok(())
    });
}

/// The awaited work's device is lost while the consumer waits: the consumer is released, and
/// its `synchronize` reports what the awaited event reports (`Err(Driver)` where the producer's
/// backend reports the loss for that work, as a wait within one backend would); its own device
/// still works: later work runs. Each producer place in a child process of its own (its device
/// is lost for good).
#[test]
fn an_error_of_the_awaited_work_surfaces_on_the_waiting_stream() {
    for_each_place_isolated(
        "cross::an_error_of_the_awaited_work_surfaces_on_the_waiting_stream",
        |producer| {
            let consumers = consumers_of(producer)?;
            let streams: Vec<Stream> = consumers.iter().map(Stream::new).collect::<Result<_>>()?;
            // Everything that may call the driver is made before the gate closes: on CUDA and
            // HIP, stream creation and allocation can wait for a stream held at a flag.
            let stream = Stream::new(producer)?;
            let Some(lose) = device_loser(&stream) else {
                not_applicable(producer, "its device cannot be lost on demand");
                return Ok(());
            };
            let buffer = if caps(producer).buffers {
                Some(stream.alloc(256)?)
            } else {
                None
            };
            let Some(gate) = Gate::close(&stream)? else {
                not_applicable(producer, "no gate (neither flags nor host functions)");
                return Ok(());
            };
            // Device work behind the gate, which the loss keeps from ever running.
            if let Some(buffer) = &buffer {
                stream.fill(buffer, 0, 256, 7)?;
            }
            let event = stream.record_event()?;
            for waiting in &streams {
                waiting.wait_event(&event)?;
            }
            lose();
            gate.release();
            let awaited = event.synchronize();
            eprintln!("[conformance]   {producer}: the awaited event reports {awaited:?}");
            for (waiting, consumer) in streams.iter().zip(&consumers) {
                match (&awaited, sync(waiting)) {
                    (Ok(()), Ok(())) | (Err(Error::Driver { .. }), Err(Error::Driver { .. })) => {}
                    (awaited, other) => panic!(
                        "{producer} → {consumer}: the awaited event reports {awaited:?}, the \
                         consumer's synchronize {other:?}"
                    ),
                }
                if loss_reaches(producer, consumer) {
                    // The consumer's driver reports the loss too: its later work may fail, but
                    // only with a driver error, never as a success that did not run.
                    let log = Log::new();
                    match waiting
                        .launch_host_func(log.task("after"))
                        .and_then(|()| sync(waiting))
                    {
                        Ok(()) => assert!(
                            log.contains(&"after"),
                            "{consumer}: later work reported done but did not run"
                        ),
                        Err(Error::Driver { .. }) => eprintln!(
                            "[conformance]   {producer} → {consumer}: the driver's loss reaches \
                             the consumer's GPU too: later work fails with a driver error"
                        ),
                        Err(e) => return Err(e),
                    }
                } else if observable(consumer) {
                    let log = Log::new();
                    waiting.launch_host_func(log.task("after"))?;
                    // Reported once (cpu, wgpu) or kept (a plug-in's sticky error slot).
                    match sync(waiting) {
                        Ok(()) | Err(Error::Driver { .. }) => {}
                        Err(e) => return Err(e),
                    }
                    assert!(log.contains(&"after"), "{consumer}: later work did not run");
                }
                eprintln!("[conformance]   {producer} → {consumer}: ok");
            }
            drop(buffer);
            Ok(())
        },
    );
}

/// 64 pending waits on another backend's held work create no thread (the process's thread
/// count does not grow) and block none (each call returns at once); all resolve once the
/// producer's gate opens.
#[test]
fn sixty_four_pending_waits_across_backends_create_no_thread() {
    for_each_pair_alone(|producer, consumer| {
        let consumer_streams: Vec<Stream> = (0..4)
            .map(|_| Stream::new(consumer))
            .collect::<Result<_>>()?;
        // Warm up: one complete wait per consumer stream starts whatever each backend starts
        // once (pollers, notifiers, worker pools).
        let warm = Stream::new(producer)?;
        if caps(producer).host_funcs {
            warm.launch_host_func(|| {})?;
        }
        let warm_event = warm.record_event()?;
        for s in &consumer_streams {
            s.wait_event(&warm_event)?;
            if observable(consumer) {
                s.launch_host_func(|| {})?;
            }
            sync(s)?;
        }
        sync(&warm)?;
        let Some((stream, gate)) = gated_stream(producer)? else {
            return Ok(());
        };
        let before = thread_count();
        let mut events = Vec::new();
        for i in 0..64 {
            let event = stream.record_event()?;
            consumer_streams[i % consumer_streams.len()].wait_event(&event)?;
            events.push(event);
        }
        let after = thread_count();
        let held = consumer_streams
            .iter()
            .map(Stream::record_event)
            .collect::<Result<Vec<_>>>()?;
        if caps(consumer).nonblocking_query {
            for e in &held {
                assert!(!e.query()?, "a consumer ran through the producer's gate");
            }
        }
        assert!(
            after <= before,
            "64 pending waits of {consumer} on {producer} grew the thread count from {before} \
             to {after}"
        );
        gate.release();
        for s in &consumer_streams {
            sync(s)?;
        }
        sync(&stream)
    });
}

fn counts_are_zero() -> bool {
    live_counts() == LiveCounts::default()
}

/// Runs `body` and asserts that no stream or event is live before it and after it (`what`
/// names the case in the failure).
pub(crate) fn leaks_nothing(what: &str, body: impl FnOnce() -> Result<()>) -> Result<()> {
    assert!(
        wait_until(PATIENCE, counts_are_zero),
        "before: live counts are {:?}",
        live_counts()
    );
    body()?;
    assert!(
        wait_until(PATIENCE, counts_are_zero),
        "after {what}, live counts stay at {:?}",
        live_counts()
    );
    Ok(())
}

/// A wait across backends left pending: a consumer stream that waits on a held producer
/// stream (`wait_event` on an event recorded there, and `wait_stream`) and then logs
/// `"consumed"` where it can; the producer logs `"produced"` behind its gate where it can.
pub(crate) struct PendingWait {
    pub(crate) consumer_stream: Stream,
    pub(crate) stream: Stream,
    pub(crate) gate: Gate,
    pub(crate) event: Event,
    pub(crate) log: Log<&'static str>,
}

impl PendingWait {
    /// The pending wait of `consumer` on `producer`, or `None` where the producer has no gate.
    pub(crate) fn new(producer: &Place, consumer: &Place) -> Result<Option<PendingWait>> {
        let consumer_stream = Stream::new(consumer)?;
        let Some((stream, gate)) = gated_stream(producer)? else {
            return Ok(None);
        };
        let log = Log::new();
        if caps(producer).host_funcs {
            stream.launch_host_func(log.task("produced"))?;
        }
        let event = stream.record_event()?;
        consumer_stream.wait_event(&event)?;
        consumer_stream.wait_stream(&stream)?;
        if observable(consumer) {
            consumer_stream.launch_host_func(log.task("consumed"))?;
        }
        Ok(Some(PendingWait {
            consumer_stream,
            stream,
            gate,
            event,
            log,
        }))
    }
}

/// Waits dropped before they resolve (the consumer stream and the awaited event dropped while
/// the producer is held) leak nothing: once the producer's work completes, no stream or event
/// is live.
#[test]
fn waits_across_backends_dropped_before_they_resolve_leak_nothing() {
    for_each_pair_alone(|producer, consumer| {
        leaks_nothing("dropped waits across backends resolved", || {
            let Some(pending) = PendingWait::new(producer, consumer)? else {
                return Ok(());
            };
            drop(pending.event);
            drop(pending.consumer_stream);
            pending.gate.release();
            sync(&pending.stream)?;
            if observable(consumer) {
                assert!(
                    wait_until(PATIENCE, || pending.log.contains(&"consumed")),
                    "the dropped consumer's queued work never ran"
                );
            }
            Ok(())
        })
    });
}

/// `capture_foreign_waits` needs `foreign_waits` and a capture: a place that cannot capture,
/// or cannot wait on other backends at all, cannot capture such waits either.
#[test]
fn capture_foreign_waits_capability_is_consistent() {
    for_each_place(|place| {
        let caps = caps(place);
        if caps.capture_foreign_waits {
            assert!(
                caps.foreign_waits && caps.capture != CaptureSupport::None,
                "{place}: capture_foreign_waits without foreign_waits or capture: {caps:?}"
            );
        }
        Ok(())
    });
}

/// Whether `consumer` can take waits on other backends' work into its graphs; where it
/// captures but cannot, that is asserted elsewhere
/// (`a_capture_that_cannot_take_a_wait_across_backends_refuses_it_and_stays_valid`).
pub(crate) fn captures_foreign_waits(consumer: &Place) -> bool {
    let caps = caps(consumer);
    if caps.capture == CaptureSupport::None {
        not_applicable(consumer, "no capture");
        return false;
    }
    if !caps.capture_foreign_waits {
        not_applicable(
            consumer,
            "capture_foreign_waits off: the wait answers Error::Capture",
        );
        return false;
    }
    if !caps.capture_host_funcs {
        not_applicable(consumer, "no captured host functions to observe a replay");
        return false;
    }
    true
}

/// A wait on another backend's held work, captured: the graph does not run it at capture time,
/// and each replay waits for that work as it was when the wait was captured. The first replay
/// (launched on another stream while the producer is held) stays behind the producer's gate and
/// runs after the producer's work once it opens; a later replay runs at once, the awaited work
/// being done. `wait_event` and `wait_stream` both.
#[test]
fn a_captured_wait_across_backends_orders_replays_after_a_gated_producer() {
    for_each_pair(|producer, consumer| {
        if !captures_foreign_waits(consumer) {
            return Ok(());
        }
        let Some((launching, stream, gate, log)) = observed_pair(producer, consumer, "produced")?
        else {
            return Ok(());
        };
        let event = stream.record_event()?;
        let capturing = Stream::new(consumer)?;
        capturing.begin_capture(CaptureMode::ThreadLocal)?;
        capturing.wait_event(&event)?;
        capturing.wait_stream(&stream)?;
        capturing.launch_host_func(log.task("replayed"))?;
        let graph = capturing.end_capture()?;
        sync(&capturing)?;
        assert!(
            !log.contains(&"replayed"),
            "captured work ran at capture time"
        );
        graph.launch(&launching)?;
        assert_stays_false("a replay ran through the producer's gate", || {
            log.contains(&"replayed")
        });
        gate.release();
        sync(&launching)?;
        assert!(log.contains(&"replayed"), "the replay never ran");
        if caps(producer).host_funcs {
            assert!(
                log.position(&"produced") < log.position(&"replayed"),
                "the replay ran before the producer's work: {:?}",
                log.entries()
            );
        }
        // The awaited work is done: a later replay passes at once.
        graph.launch(&launching)?;
        sync(&launching)?;
        let replays = log.entries().iter().filter(|e| **e == "replayed").count();
        assert_eq!(
            replays,
            2,
            "two launches, {replays} replays: {:?}",
            log.entries()
        );
        sync(&stream)
    });
}

/// A captured wait on a never-recorded event, or on another backend's work that is already
/// complete, adds nothing to the graph: its replays run at once.
#[test]
fn a_captured_wait_on_complete_work_of_another_backend_replays_at_once() {
    for_each_pair(|producer, consumer| {
        if !captures_foreign_waits(consumer) {
            return Ok(());
        }
        let idle = Stream::new(producer)?;
        let complete = idle.record_event()?;
        sync(&idle)?;
        let never = Event::new(producer, EventFlags::default())?;
        let log = Log::new();
        let capturing = Stream::new(consumer)?;
        capturing.begin_capture(CaptureMode::ThreadLocal)?;
        capturing.wait_event(&never)?;
        capturing.wait_event(&complete)?;
        capturing.wait_stream(&idle)?;
        capturing.launch_host_func(log.task("replayed"))?;
        let graph = capturing.end_capture()?;
        graph.launch(&capturing)?;
        graph.launch(&capturing)?;
        sync(&capturing)?;
        assert_eq!(log.entries(), vec!["replayed", "replayed"]);
        Ok(())
    });
}

/// Where a place captures but cannot take a wait on another backend's work into its graph
/// (`capture_foreign_waits` off), the wait answers `Error::Capture` and the capture stays
/// valid: work captured before and after it replays. A wait on another backend's event recorded
/// inside a capture that is still active answers `Error::Capture` on every place.
#[test]
fn a_capture_that_cannot_take_a_wait_across_backends_refuses_it_and_stays_valid() {
    for_each_pair(|producer, consumer| {
        let producing = Stream::new(producer)?;
        let event = producing.record_event()?;
        let consumer_caps = caps(consumer);
        if consumer_caps.capture != CaptureSupport::None && !consumer_caps.capture_foreign_waits {
            // Captured work before and after the refused waits shows the capture stayed valid:
            // host functions where they can be captured, flag writes where flags exist.
            let log = Log::new();
            let written = if consumer_caps.flags {
                Some(devstream::Flag::new(consumer)?)
            } else {
                None
            };
            let capturing = Stream::new(consumer)?;
            capturing.begin_capture(CaptureMode::ThreadLocal)?;
            if consumer_caps.capture_host_funcs {
                capturing.launch_host_func(log.task("before"))?;
            }
            if let Some(flag) = &written {
                capturing.write_flag(flag, 1)?;
            }
            assert_err!(capturing.wait_event(&event), Error::Capture { .. });
            assert_err!(capturing.wait_stream(&producing), Error::Capture { .. });
            if consumer_caps.capture_host_funcs {
                capturing.launch_host_func(log.task("after"))?;
            }
            if let Some(flag) = &written {
                capturing.wait_flag(flag, 1)?;
                capturing.write_flag(flag, 2)?;
            }
            let graph = capturing.end_capture()?;
            graph.launch(&capturing)?;
            sync(&capturing)?;
            if consumer_caps.capture_host_funcs {
                assert_eq!(log.entries(), vec!["before", "after"]);
            }
            if let Some(flag) = &written {
                assert_eq!(flag.get(), 2, "the captured flag writes did not replay");
            }
        } else {
            not_applicable(consumer, "its captures take waits across backends");
        }
        if caps(producer).capture != CaptureSupport::None {
            let capturing = Stream::new(producer)?;
            capturing.begin_capture(CaptureMode::ThreadLocal)?;
            let inside = capturing.record_event()?;
            let waiting = Stream::new(consumer)?;
            assert_err!(waiting.wait_event(&inside), Error::Capture { .. });
            drop(capturing.end_capture()?);
            sync(&waiting)?;
        }
        sync(&producing)
    });
}

/// The awaited work of a captured wait ends with an error (its device is lost while the
/// producer is held): every replay reports what the awaited event reports on the stream that
/// launched it, as a wait outside a capture would (`Err(Driver)` where the producer's backend
/// reports the loss for that work), also a replay launched after the loss on a fresh stream.
/// Each producer place in a child process of its own (its device is lost for good).
#[test]
fn an_error_of_the_awaited_work_surfaces_on_each_replay() {
    for_each_place_isolated(
        "cross::an_error_of_the_awaited_work_surfaces_on_each_replay",
        |producer| {
            let consumers: Vec<Place> = consumers_of(producer)?
                .into_iter()
                .filter(|c| captures_foreign_waits(c) && !loss_reaches(producer, c))
                .collect();
            // Everything that may call the driver is made before the gate closes (see
            // `an_error_of_the_awaited_work_surfaces_on_the_waiting_stream`).
            let launching: Vec<(Stream, Stream)> = consumers
                .iter()
                .map(|c| Ok((Stream::new(c)?, Stream::new(c)?)))
                .collect::<Result<_>>()?;
            let capturing: Vec<Stream> =
                consumers.iter().map(Stream::new).collect::<Result<_>>()?;
            let stream = Stream::new(producer)?;
            let Some(lose) = device_loser(&stream) else {
                not_applicable(producer, "its device cannot be lost on demand");
                return Ok(());
            };
            let buffer = if caps(producer).buffers {
                Some(stream.alloc(256)?)
            } else {
                None
            };
            let Some(gate) = Gate::close(&stream)? else {
                not_applicable(producer, "no gate (neither flags nor host functions)");
                return Ok(());
            };
            if let Some(buffer) = &buffer {
                stream.fill(buffer, 0, 256, 7)?;
            }
            let event = stream.record_event()?;
            let log = Log::new();
            let mut graphs = Vec::new();
            for (s, consumer) in capturing.iter().zip(&consumers) {
                s.begin_capture(CaptureMode::ThreadLocal)?;
                s.wait_event(&event)?;
                s.launch_host_func(log.task(consumer.to_string()))?;
                graphs.push(s.end_capture()?);
            }
            for (graph, (first, _)) in graphs.iter().zip(&launching) {
                graph.launch(first)?;
            }
            lose();
            gate.release();
            let awaited = event.synchronize();
            eprintln!("[conformance]   {producer}: the awaited event reports {awaited:?}");
            for ((graph, (first, later)), consumer) in graphs.iter().zip(&launching).zip(&consumers)
            {
                graph.launch(later)?;
                for (which, launched) in [("first", first), ("later", later)] {
                    match (&awaited, sync(launched)) {
                        (Ok(()), Ok(()))
                        | (Err(Error::Driver { .. }), Err(Error::Driver { .. })) => {}
                        (awaited, other) => panic!(
                            "{producer} → {consumer}: the awaited event reports {awaited:?}, \
                             the {which} replay's synchronize {other:?}"
                        ),
                    }
                }
                let replays = log
                    .entries()
                    .iter()
                    .filter(|e| **e == consumer.to_string())
                    .count();
                assert_eq!(
                    replays, 2,
                    "{consumer}: the replays' later work did not run"
                );
                eprintln!("[conformance]   {producer} → {consumer}: ok");
            }
            drop(buffer);
            Ok(())
        },
    );
}

/// The awaited side dropped while a wait across backends on it is pending (the producer's
/// stream and event handles gone, its work still held): the wait still resolves once that work
/// completes, and the consumer's later work runs after it.
#[test]
fn a_wait_across_backends_outlives_the_awaited_handles() {
    for_each_pair(|producer, consumer| {
        let Some((consumer_stream, stream, gate, log)) =
            observed_pair(producer, consumer, "produced")?
        else {
            return Ok(());
        };
        let event = stream.record_event()?;
        consumer_stream.wait_event(&event)?;
        consumer_stream.wait_stream(&stream)?;
        consumer_stream.launch_host_func(log.task("consumed"))?;
        drop(event);
        drop(stream);
        assert_stays_false(
            "the consumer ran before the dropped producer's work",
            || log.contains(&"consumed"),
        );
        gate.release();
        sync(&consumer_stream)?;
        if caps(producer).host_funcs {
            assert!(
                log.position(&"produced") < log.position(&"consumed"),
                "the consumer ran before the dropped producer's work: {:?}",
                log.entries()
            );
        }
        assert!(log.contains(&"consumed"));
        Ok(())
    });
}

/// Waits reuse what they were held at (on CUDA/HIP, a pool of device-mapped words): more pending
/// waits than one slab of words holds (600) on one gated producer all hold the consumer until the
/// gate opens, and a second round on the same consumer — whose waits now get words that earlier
/// waits were released at — holds it again until its own gate opens.
#[test]
fn reused_wait_words_hold_later_waits_until_their_own_release() {
    for_each_pair(|producer, consumer| {
        if !observable(consumer) {
            not_applicable(consumer, "no host functions to observe the order");
            return Ok(());
        }
        let consumer_stream = Stream::new(consumer)?;
        for (round, waits) in [(1, 600), (2, 600)] {
            let Some((stream, gate)) = gated_stream(producer)? else {
                return Ok(());
            };
            let log = Log::new();
            for _ in 0..waits {
                consumer_stream.wait_event(&stream.record_event()?)?;
            }
            consumer_stream.launch_host_func(log.task(round))?;
            assert_stays_false(
                &format!("round {round}: the consumer ran through the producer's gate"),
                || log.contains(&round),
            );
            gate.release();
            sync(&consumer_stream)?;
            assert!(
                log.contains(&round),
                "round {round}: the consumer never ran"
            );
            sync(&stream)?;
        }
        Ok(())
    });
}
