//! Stream capture: captured work does not run; `Graph::launch` runs it on any stream of the
//! place, every time; ops that cannot be captured fail with `Error::Capture` and invalidate the
//! capture while the stream stays usable; the legacy default stream refuses capture; fork/join
//! across streams; the three capture modes (`devstream_core::traits`, "Captures").

use crate::harness::{
    caps, for_each_place, for_each_place_alone, not_applicable, sync, within, Log, PATIENCE,
};
use devstream::{CaptureMode, CaptureSupport, Error, Place, Result, Stream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const MODES: [CaptureMode; 3] = [
    CaptureMode::Global,
    CaptureMode::ThreadLocal,
    CaptureMode::Relaxed,
];

/// Whether the place captures with host functions to observe; prints why not otherwise.
fn capture_with_host_funcs(place: &Place) -> bool {
    let caps = caps(place);
    if caps.capture == CaptureSupport::None {
        not_applicable(place, "no capture (Unsupported asserted in capabilities)");
        return false;
    }
    if !caps.host_funcs {
        not_applicable(place, "no host functions to observe captured work");
        return false;
    }
    if !caps.capture_host_funcs {
        not_applicable(
            place,
            "host functions cannot be captured (capture_host_funcs off, asserted in capabilities)",
        );
        return false;
    }
    true
}

/// Ends a capture that broke a rule: `end_capture` reports `Error::Capture`, after which the
/// stream is no longer capturing.
fn end_invalidated(stream: &Stream) {
    assert_err!(stream.end_capture(), Error::Capture { .. });
    assert!(
        !stream.is_capturing().unwrap(),
        "still capturing after end_capture"
    );
}

/// Captured work does not run; the graph runs it on any stream of the place, once per launch,
/// in stream order with the work around the launch.
#[test]
fn captured_work_runs_only_when_launched_every_time() {
    for_each_place(|place| {
        if !capture_with_host_funcs(place) {
            return Ok(());
        }
        let stream = Stream::new(place)?;
        assert!(!stream.is_capturing()?, "a new stream is not capturing");
        let log = Log::new();
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        assert!(stream.is_capturing()?);
        for id in 1..=3 {
            stream.launch_host_func(log.task(id))?;
        }
        let graph = stream.end_capture()?;
        assert!(!stream.is_capturing()?);
        assert_eq!(graph.place(), place);
        sync(&stream)?;
        assert!(
            log.entries().is_empty(),
            "captured work ran: {:?}",
            log.entries()
        );

        let other = Stream::new(place)?;
        graph.launch(&stream)?;
        sync(&stream)?;
        graph.launch(&other)?;
        sync(&other)?;
        other.launch_host_func(log.task(10))?;
        graph.launch(&other)?;
        other.launch_host_func(log.task(20))?;
        sync(&other)?;
        assert_eq!(
            log.entries(),
            vec![1, 2, 3, 1, 2, 3, 10, 1, 2, 3, 20],
            "each launch runs the captured work once, in order with the launch stream's work"
        );
        // The graph outlives its stream.
        drop(stream);
        graph.launch(&other)?;
        sync(&other)?;
        assert_eq!(log.len(), 14);
        Ok(())
    });
}

/// Captured buffer work (fill, device→device, device→host) does not run until launched.
#[test]
fn captured_buffer_work_runs_only_when_launched() {
    for_each_place(|place| {
        if caps(place).capture == CaptureSupport::None {
            not_applicable(place, "no capture");
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let (a, b) = (stream.alloc(64)?, stream.alloc(64)?);
        let host = stream.alloc_host(64)?;
        stream.fill(&a, 0, 64, 0)?;
        stream.fill(&b, 0, 64, 0)?;
        sync(&stream)?;
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        stream.fill(&a, 8, 16, 7)?;
        stream.copy_device_to_device(&b, 0, &a, 0, 64)?;
        stream.copy_device_to_host(&host, 0, &b, 0, 64)?;
        let graph = stream.end_capture()?;
        sync(&stream)?;
        assert_eq!(host.to_vec()?, vec![0; 64], "captured copies ran");
        let other = Stream::new(place)?;
        graph.launch(&other)?;
        sync(&other)?;
        let mut expected = vec![0u8; 64];
        expected[8..24].fill(7);
        assert_eq!(host.to_vec()?, expected);
        Ok(())
    });
}

/// `synchronize` or `query` of a capturing stream fails with `Error::Capture` in every mode and
/// invalidates the capture; the captured work never runs; the stream stays usable.
#[test]
fn synchronize_or_query_during_capture_invalidates_it() {
    for_each_place(|place| {
        if !capture_with_host_funcs(place) {
            return Ok(());
        }
        let log = Log::new();
        for mode in [CaptureMode::ThreadLocal, CaptureMode::Relaxed] {
            for use_query in [false, true] {
                let stream = Stream::new(place)?;
                stream.begin_capture(mode)?;
                stream.launch_host_func(log.task("captured"))?;
                if use_query {
                    assert_err!(stream.query(), Error::Capture { .. });
                } else {
                    assert_err!(stream.synchronize(), Error::Capture { .. });
                }
                end_invalidated(&stream);
                stream.launch_host_func(log.task("after"))?;
                sync(&stream)?;
                assert!(stream.query()?);
            }
        }
        assert_eq!(
            log.entries(),
            vec!["after"; 4],
            "an invalidated capture's work ran"
        );
        Ok(())
    });
}

/// Beginning twice is `Error::Capture` and invalidates; ending without beginning is
/// `Error::Capture`; afterwards the stream works.
#[test]
fn begin_twice_and_end_without_begin_are_capture_errors() {
    for_each_place(|place| {
        if caps(place).capture == CaptureSupport::None {
            not_applicable(place, "no capture");
            return Ok(());
        }
        let stream = Stream::new(place)?;
        assert_err!(stream.end_capture(), Error::Capture { .. });
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        assert_err!(
            stream.begin_capture(CaptureMode::ThreadLocal),
            Error::Capture { .. }
        );
        end_invalidated(&stream);
        assert_err!(stream.end_capture(), Error::Capture { .. });
        // A fresh capture on the same stream works.
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let graph = stream.end_capture()?;
        graph.launch(&stream)?;
        sync(&stream)?;
        Ok(())
    });
}

/// The legacy default stream refuses capture (where the place has one) and stays usable.
#[test]
fn legacy_default_stream_refuses_capture() {
    for_each_place(|place| {
        let caps = caps(place);
        if caps.capture == CaptureSupport::None || !caps.legacy_default_stream {
            not_applicable(place, "no capture or no legacy default stream");
            return Ok(());
        }
        let legacy = Stream::default_stream(place)?;
        for mode in MODES {
            assert_err!(legacy.begin_capture(mode), Error::Capture { .. });
            assert!(!legacy.is_capturing()?);
        }
        let done = legacy.record_event()?;
        sync(&legacy)?;
        assert!(done.query()?);
        Ok(())
    });
}

/// Fork/join inside one capture: a stream that waits on an event of the capturing stream joins
/// the capture; its work is captured (not run); the graph replays the DAG with its edges.
#[test]
fn fork_join_capture_across_two_streams() {
    for_each_place(|place| {
        if !capture_with_host_funcs(place) {
            return Ok(());
        }
        let (origin, forked) = (Stream::new(place)?, Stream::new(place)?);
        let log = Log::new();
        origin.begin_capture(CaptureMode::ThreadLocal)?;
        origin.launch_host_func(log.task("a"))?;
        let fork = origin.record_event()?;
        forked.wait_event(&fork)?;
        assert!(
            forked.is_capturing()?,
            "waiting on a captured event joins the capture"
        );
        forked.launch_host_func(log.task("b"))?;
        origin.launch_host_func(log.task("c"))?;
        origin.wait_stream(&forked)?;
        origin.launch_host_func(log.task("d"))?;
        let graph = origin.end_capture()?;
        assert!(!origin.is_capturing()?);
        assert!(
            !forked.is_capturing()?,
            "the joined stream leaves the capture at its end"
        );
        sync(&origin)?;
        sync(&forked)?;
        assert!(log.entries().is_empty(), "captured fork/join work ran");

        let runner = Stream::new(place)?;
        for launch in 1..=3 {
            graph.launch(&runner)?;
            sync(&runner)?;
            let entries = log.entries();
            assert_eq!(entries.len(), 4 * launch, "{entries:?}");
            let run = &entries[4 * (launch - 1)..];
            let pos = |x| run.iter().position(|e| *e == x).expect("every node runs");
            assert!(pos("a") < pos("b") && pos("a") < pos("c"), "{run:?}");
            assert!(pos("b") < pos("d") && pos("c") < pos("d"), "{run:?}");
        }
        // Forked stream is usable outside the capture.
        forked.launch_host_func(log.task("after"))?;
        sync(&forked)?;
        assert!(log.contains(&"after"));
        Ok(())
    });
}

/// Ending a capture whose fork was never joined back is `Error::Capture`; the captured work
/// never runs; the origin stream stays usable.
#[test]
fn unjoined_fork_is_a_capture_error() {
    for_each_place(|place| {
        if !capture_with_host_funcs(place) {
            return Ok(());
        }
        let (origin, forked) = (Stream::new(place)?, Stream::new(place)?);
        let log = Log::new();
        origin.begin_capture(CaptureMode::ThreadLocal)?;
        origin.launch_host_func(log.task("a"))?;
        let fork = origin.record_event()?;
        forked.wait_event(&fork)?;
        forked.launch_host_func(log.task("b"))?;
        assert_err!(origin.end_capture(), Error::Capture { .. });
        assert!(!origin.is_capturing()?);
        // Leave the forked stream out of capture whatever state it was left in.
        let _ = forked.end_capture();
        origin.launch_host_func(log.task("after"))?;
        sync(&origin)?;
        assert_eq!(log.entries(), vec!["after"], "unjoined capture's work ran");
        Ok(())
    });
}

/// Which calls a capture forbids, per mode (CUDA's rules): `Global` forbids other threads'
/// (and the capturing thread's) synchronize of other streams; `ThreadLocal` only the capturing
/// thread's; `Relaxed` none. A forbidden call is refused and the capture goes on.
/// Synchronizing the capturing stream itself fails in every mode and invalidates the capture.
#[test]
fn capture_modes_forbid_unsafe_calls_as_cuda_does() {
    for_each_place_alone(|place| {
        if !capture_with_host_funcs(place) {
            return Ok(());
        }
        for mode in MODES {
            // The capturing thread synchronizes another, idle stream.
            check_mode(place, mode, false, mode != CaptureMode::Relaxed)?;
            // Another thread synchronizes its own idle stream.
            check_mode(place, mode, true, mode == CaptureMode::Global)?;
            // The capturing stream itself: always refused.
            let stream = Stream::new(place)?;
            stream.begin_capture(mode)?;
            assert_err!(stream.synchronize(), Error::Capture { .. });
            end_invalidated(&stream);
        }
        Ok(())
    });
}

fn check_mode(place: &Place, mode: CaptureMode, other_thread: bool, forbidden: bool) -> Result<()> {
    let log = Log::new();
    let capturing = Stream::new(place)?;
    let bystander = Stream::new(place)?;
    capturing.begin_capture(mode)?;
    capturing.launch_host_func(log.task("captured"))?;
    let outcome = if other_thread {
        let b = bystander.clone();
        within(
            PATIENCE,
            "synchronize on another thread",
            move || b.synchronize(),
            || {},
        )
    } else {
        bystander.synchronize()
    };
    let context = format!(
        "{mode:?} capture, synchronize of another stream on the {} thread",
        if other_thread { "other" } else { "capturing" }
    );
    answers_as_the_mode_says(&context, "synchronize", forbidden, outcome);
    // A forbidden call elsewhere is refused before it could harm the capture: it goes on.
    let graph = capturing.end_capture();
    assert!(graph.is_ok(), "{context}: end_capture: {graph:?}");
    graph?.launch(&bystander)?;
    assert!(!capturing.is_capturing()?);
    sync(&bystander)?;
    sync(&capturing)?;
    assert_eq!(log.entries(), vec!["captured"], "{context}: graph replay");
    Ok(())
}

/// `Global` captures begun and ended again and again while another thread keeps synchronizing
/// an idle stream of its own (a call the mode forbids): each synchronize is allowed (it came
/// before a begin or after an end) or refused with `Error::Capture`, and every capture ends
/// with a graph. A forbidden call that reached the runtime while a capture ran would
/// invalidate that capture (on CUDA and HIP the registration of what the mode forbids must
/// exist before the native begin, not after it).
#[test]
fn global_captures_begun_while_another_thread_synchronizes_are_never_invalidated() {
    const ROUNDS: usize = 2000;
    for_each_place_alone(|place| {
        if !capture_with_host_funcs(place) {
            return Ok(());
        }
        let capturing = Stream::new(place)?;
        let bystander = Stream::new(place)?;
        let stop = Arc::new(AtomicBool::new(false));
        let synchronizer = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || -> Result<(u64, u64)> {
                let (mut calls, mut refused) = (0, 0);
                while !stop.load(Ordering::Relaxed) {
                    match bystander.synchronize() {
                        Ok(()) => {}
                        Err(Error::Capture { .. }) => refused += 1,
                        Err(other) => return Err(other),
                    }
                    calls += 1;
                }
                Ok((calls, refused))
            })
        };
        let mut failure = None;
        for round in 0..ROUNDS {
            capturing.begin_capture(CaptureMode::Global)?;
            capturing.launch_host_func(|| {})?;
            if let Err(e) = capturing.end_capture() {
                failure = Some(format!("round {round}: end_capture: {e}"));
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let synchronized = synchronizer.join();
        assert!(
            failure.is_none(),
            "{place}: a Global capture was invalidated by another thread's synchronize: {}",
            failure.unwrap_or_default()
        );
        match synchronized {
            Ok(Ok((calls, refused))) => println!(
                "[conformance] {place}: {ROUNDS} Global captures beside {calls} synchronizes \
                 of another thread, {refused} refused"
            ),
            Ok(Err(e)) => panic!("{place}: the other thread's synchronize failed: {e}"),
            Err(_) => panic!("{place}: the synchronizing thread panicked"),
        }
        sync(&capturing)
    });
}

/// A wait that an eager wait made redundant is still a wait inside a capture: ordering
/// established before `begin_capture` does not exist when the graph replays, so redundant-wait
/// elision must not skip it: the wait is not elided, and it answers the same with elision on
/// and off (on CUDA, HIP and the CPU place the isolation error, which invalidates the capture).
#[test]
fn a_wait_implied_before_a_capture_is_not_elided_inside_it() {
    for_each_place(|place| {
        if !capture_with_host_funcs(place) {
            return Ok(());
        }
        let mut answers = Vec::new();
        for elide in [true, false] {
            let a = Stream::new(place)?;
            let b = Stream::builder(place).elide_waits(elide).build()?;
            // Hold `a` so that the event stays incomplete and the eager wait is a real one.
            let gate = if caps(place).flags {
                let gate = devstream::Flag::new(place)?;
                a.wait_flag(&gate, 1)?;
                Some(gate)
            } else {
                None
            };
            let log = Log::new();
            a.launch_host_func(log.task("a"))?;
            let e = a.record_event()?;
            b.wait_event(&e)?;
            b.wait_event(&e)?; // implied by the first: may be elided
            if let Some(gate) = &gate {
                gate.set(1);
            }
            sync(&b)?;
            b.begin_capture(CaptureMode::ThreadLocal)?;
            let before = devstream::elide::elided_on_this_thread();
            let waited = b.wait_event(&e);
            assert_eq!(
                devstream::elide::elided_on_this_thread(),
                before,
                "a wait inside a capture was elided (elide {elide})"
            );
            if matches!(place, Place::Cpu | Place::Cuda(_) | Place::Hip(_)) {
                assert!(
                    matches!(waited, Err(Error::Capture { .. })),
                    "waiting inside a capture on work recorded outside it: {waited:?}"
                );
            }
            let ended = b.end_capture();
            assert!(!b.is_capturing()?, "still capturing after end_capture");
            answers.push((waited.is_ok(), ended.is_ok()));
            b.launch_host_func(log.task("b"))?;
            sync(&b)?;
            assert_eq!(
                log.entries(),
                vec!["a", "b"],
                "b's work ran before a's (elide {elide})"
            );
        }
        assert_eq!(
            answers[0], answers[1],
            "elision changed what the capture answered"
        );
        Ok(())
    });
}

/// Dropping the stream that began a capture ends that capture, whether it is still valid or
/// was invalidated: no `end_capture` can come any more, so nothing of it may stay behind. A
/// `Global`-mode capture left behind would forbid every thread's synchronize for the rest of
/// the process; so would a `ThreadLocal` one on this thread. An event recorded inside the
/// capture and still alive does not keep the capture going.
#[test]
fn dropping_the_stream_that_began_a_capture_ends_it() {
    for_each_place_alone(|place| {
        if caps(place).capture == CaptureSupport::None {
            not_applicable(place, "no capture");
            return Ok(());
        }
        for mode in MODES {
            for invalidated in [false, true] {
                let context = format!(
                    "{mode:?} capture{}, its stream dropped",
                    if invalidated { " (invalidated)" } else { "" }
                );
                let bystander = Stream::new(place)?;
                let capturing = Stream::new(place)?;
                capturing.begin_capture(mode)?;
                let recorded_inside = capturing.record_event()?;
                if invalidated {
                    assert_err!(capturing.query(), Error::Capture { .. });
                }
                drop(capturing);
                let here = bystander.synchronize();
                assert!(
                    here.is_ok(),
                    "{context}: synchronize of another stream on this thread: {here:?}"
                );
                let b = bystander.clone();
                let there = within(
                    PATIENCE,
                    "synchronize on another thread",
                    move || b.synchronize(),
                    || {},
                );
                assert!(
                    there.is_ok(),
                    "{context}: synchronize of another stream on another thread: {there:?}"
                );
                drop(recorded_inside);
            }
        }
        Ok(())
    });
}

/// A stream that joined a capture (by waiting on an event recorded inside it) leaves it when
/// the stream that began the capture is dropped, valid or invalidated: it is no longer
/// capturing, and its later work runs.
#[test]
fn a_stream_that_joined_a_capture_leaves_it_when_the_origin_is_dropped() {
    for_each_place(|place| {
        let caps = caps(place);
        if caps.capture == CaptureSupport::None || !caps.host_funcs {
            not_applicable(place, "no capture or no host functions");
            return Ok(());
        }
        for invalidated in [false, true] {
            let context = if invalidated {
                "the origin's capture invalidated, then the origin dropped"
            } else {
                "the origin dropped"
            };
            let log = Log::new();
            let (origin, joined) = (Stream::new(place)?, Stream::new(place)?);
            origin.begin_capture(CaptureMode::Relaxed)?;
            let fork = origin.record_event()?;
            joined.wait_event(&fork)?;
            assert!(
                joined.is_capturing()?,
                "waiting on a captured event joins the capture"
            );
            if invalidated {
                assert_err!(origin.query(), Error::Capture { .. });
            }
            drop(origin);
            assert!(
                !joined.is_capturing()?,
                "{context}: the joined stream is still capturing"
            );
            joined.launch_host_func(log.task("after"))?;
            sync(&joined)?;
            assert_eq!(
                log.entries(),
                vec!["after"],
                "{context}: the joined stream's later work did not run"
            );
            drop(fork);
        }
        Ok(())
    });
}

/// Whether a capture in `mode` forbids potentially unsafe calls on the thread that began it
/// (`capturing_thread`) or on another thread: CUDA's rule, which every backend keeps.
fn forbids(mode: CaptureMode, capturing_thread: bool) -> bool {
    match mode {
        CaptureMode::Global => true,
        CaptureMode::ThreadLocal => capturing_thread,
        CaptureMode::Relaxed => false,
    }
}

/// The answer to a potentially unsafe call beside a capture: `Error::Capture` where the mode
/// forbids it on this thread, success otherwise.
fn answers_as_the_mode_says<T: std::fmt::Debug>(
    context: &str,
    call: &str,
    forbidden: bool,
    outcome: Result<T>,
) {
    if forbidden {
        assert!(
            matches!(outcome, Err(Error::Capture { .. })),
            "{context}: {call} should be refused with Err(Capture), got {outcome:?}"
        );
    } else {
        assert!(
            outcome.is_ok(),
            "{context}: {call} should be allowed, got {outcome:?}"
        );
    }
}

/// Work of its own beside a capture in progress on `place`: streams, events, buffers and flags
/// that are not part of the capture, made, used and dropped — allowed in every mode — and the
/// potentially unsafe calls (query, synchronize, `alloc_host`, `alloc` where allocation is not
/// stream-ordered), answered as the mode says for this thread (`forbidden`). The streams whose
/// work may still be queued come back, to be synchronized once the capture has ended.
fn work_beside_a_capture(
    place: &Place,
    context: &str,
    forbidden: bool,
    host: &devstream::HostBuffer,
) -> Result<Vec<Stream>> {
    let caps = caps(place);
    // Streams made and dropped, idle and with work (a dropped stream may be kept for reuse).
    for round in 0..4 {
        let stream = Stream::new(place)?;
        if round % 2 == 1 {
            stream.record_event()?;
        }
    }
    let stream = Stream::new(place)?;
    let event = devstream::Event::new(place, devstream::EventFlags::default())?;
    let allocated = stream.alloc(64);
    answers_as_the_mode_says(
        context,
        "alloc",
        forbidden && !caps.stream_ordered_alloc,
        allocated.as_ref().map(|_| ()).map_err(Clone::clone),
    );
    if let Ok(buffer) = &allocated {
        stream.fill(buffer, 0, 64, 9)?;
        stream.copy_from_host(buffer, 0, &[1, 2, 3, 4])?;
        stream.copy_device_to_host(host, 0, buffer, 0, 64)?;
    }
    event.record(&stream)?;
    let other = Stream::new(place)?;
    other.wait_event(&event)?;
    other.wait_stream(&stream)?;
    let later = other.record_event()?;
    if caps.host_funcs {
        stream.launch_host_func(|| {})?;
    }
    if caps.flags {
        let flag = devstream::Flag::new(place)?;
        stream.write_flag(&flag, 1)?;
        other.wait_flag(&flag, 1)?;
        flag.set(2);
        drop(flag);
    }
    answers_as_the_mode_says(context, "Stream::query", forbidden, stream.query());
    answers_as_the_mode_says(context, "Event::query", forbidden, event.query());
    answers_as_the_mode_says(
        context,
        "Stream::synchronize",
        forbidden,
        stream.synchronize(),
    );
    answers_as_the_mode_says(
        context,
        "Event::synchronize",
        forbidden,
        later.synchronize(),
    );
    answers_as_the_mode_says(
        context,
        "alloc_host",
        forbidden,
        stream.alloc_host(16).map(|_| ()),
    );
    // Dropped with work possibly queued: buffers, events, and one of the streams.
    drop(allocated);
    drop((event, later));
    let dropped = Stream::new(place)?;
    dropped.wait_stream(&other)?;
    drop(dropped);
    Ok(vec![stream, other])
}

/// While one thread captures, in every mode, work that is not part of the capture goes on, on
/// other threads and on the capturing thread itself: streams, events, buffers and flags are
/// made, used and dropped; a potentially unsafe call (query, synchronize, `alloc_host`) answers
/// `Error::Capture` where the capture's mode forbids it on that thread (`Global`: every thread;
/// `ThreadLocal`: the capturing thread; `Relaxed`: none) and succeeds elsewhere. Nothing of it
/// — the refused calls included — invalidates the capture: it ends, and its graph replays
/// correctly, every time.
#[test]
fn work_beside_a_capture_never_breaks_it() {
    for_each_place_alone(|place| {
        if caps(place).capture == CaptureSupport::None {
            not_applicable(place, "no capture");
            return Ok(());
        }
        for mode in MODES {
            let capturing = Stream::new(place)?;
            let captured = capturing.alloc(64)?;
            let result = capturing.alloc_host(64)?;
            let (mine, theirs) = (capturing.alloc_host(64)?, capturing.alloc_host(64)?);
            capturing.fill(&captured, 0, 64, 0)?;
            sync(&capturing)?;
            capturing.begin_capture(mode)?;
            capturing.fill(&captured, 0, 32, 5)?;

            let beside = {
                let place = place.clone();
                let context = format!("{mode:?} capture on another thread, work on this one");
                let forbidden = forbids(mode, false);
                within(
                    PATIENCE,
                    "work beside a capture, on another thread",
                    move || work_beside_a_capture(&place, &context, forbidden, &theirs),
                    || {},
                )
            };
            let beside = beside.map_err(|error| {
                devstream::Error::InvalidArgument(format!("{mode:?}: other thread: {error}"))
            })?;
            capturing.fill(&captured, 32, 32, 6)?;
            let here = work_beside_a_capture(
                place,
                &format!("{mode:?} capture on this thread, work on this thread"),
                forbids(mode, true),
                &mine,
            )?;
            capturing.copy_device_to_host(&result, 0, &captured, 0, 64)?;
            let graph = capturing.end_capture();
            assert!(
                graph.is_ok(),
                "{mode:?}: work beside the capture broke it: end_capture: {graph:?}"
            );
            let graph = graph?;
            for stream in here.iter().chain(&beside) {
                sync(stream)?;
            }
            let mut expected = vec![5u8; 32];
            expected.extend([6u8; 32]);
            for launch in 1..=2 {
                result.write(0, &[0; 64])?;
                let runner = Stream::new(place)?;
                graph.launch(&runner)?;
                sync(&runner)?;
                assert_eq!(
                    result.to_vec()?,
                    expected,
                    "{mode:?}: launch {launch} of the graph"
                );
            }
        }
        Ok(())
    });
}
