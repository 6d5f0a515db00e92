//! Completion futures (`Stream::completion`, `Event::completion`, `event.await`), on every
//! place: pending while gated, woken (the latest waker) once the work is done, then ready with the
//! result `synchronize` gives; cancel-safe; no thread per future; `Error::Capture` during a
//! capture that stays valid. Run under a hand-written executor and under tokio (current-thread
//! and multi-thread). Every wait is bounded by `PATIENCE`; gates are `Flag`s or host functions,
//! never sleeps.

use crate::harness::{
    caps, for_each_place, for_each_place_alone, gates_stall_the_driver, not_applicable,
    run_test_in_child, wait_until, within, Gate, Log, PATIENCE,
};
use devstream::{
    live_counts, CaptureMode, CaptureSupport, Completion, Error, Event, EventFlags, LiveCounts,
    Place, Result, Stream,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// A waker that counts its wakes.
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Counter>, Waker) {
    let count = Arc::new(Counter(AtomicUsize::new(0)));
    (count.clone(), Waker::from(count))
}

fn poll_with(future: &mut Completion, waker: &Waker) -> Poll<Result<()>> {
    Pin::new(future).poll(&mut Context::from_waker(waker))
}

/// The minimal executor: a `Wake` that unparks the polling thread; `block_on` parks between
/// polls (bounded by `PATIENCE`).
struct Unpark {
    thread: std::thread::Thread,
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

pub(crate) fn block_on<F: std::future::IntoFuture>(future: F) -> F::Output {
    let future = future.into_future();
    let unpark = Arc::new(Unpark {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
        while !unpark.woken.swap(false, Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "block_on: not woken within {PATIENCE:?}");
            std::thread::park_timeout(left);
        }
    }
}

/// Many futures polled from one thread: each has a waker that marks it ready to poll again
/// and unparks the thread. Returns every output, in order.
fn join_all(futures: Vec<Completion>) -> Vec<Result<()>> {
    struct Mark {
        index: usize,
        ready: Arc<Mutex<Vec<usize>>>,
        thread: std::thread::Thread,
    }
    impl Wake for Mark {
        fn wake(self: Arc<Self>) {
            self.ready
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(self.index);
            self.thread.unpark();
        }
    }
    let ready = Arc::new(Mutex::new((0..futures.len()).collect::<Vec<_>>()));
    let wakers: Vec<Waker> = (0..futures.len())
        .map(|index| {
            Waker::from(Arc::new(Mark {
                index,
                ready: ready.clone(),
                thread: std::thread::current(),
            }))
        })
        .collect();
    let mut futures: Vec<Option<Completion>> = futures.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<Result<()>>> = vec![None; futures.len()];
    let mut left = futures.len();
    let deadline = Instant::now() + PATIENCE;
    while left > 0 {
        let batch = std::mem::take(&mut *ready.lock().unwrap_or_else(|e| e.into_inner()));
        if batch.is_empty() {
            let wait = deadline.saturating_duration_since(Instant::now());
            assert!(
                !wait.is_zero(),
                "join_all: {left} futures still pending after {PATIENCE:?}"
            );
            std::thread::park_timeout(wait);
            continue;
        }
        for index in batch {
            let Some(future) = futures[index].as_mut() else {
                continue;
            };
            if let Poll::Ready(output) = poll_with(future, &wakers[index]) {
                outputs[index] = Some(output);
                futures[index] = None;
                left -= 1;
            }
        }
    }
    outputs.into_iter().map(Option::unwrap).collect()
}

/// A stream held by a gate, or `None` (printed as n/a) where the place has no gate.
fn gated(place: &Place) -> Result<Option<(Stream, Gate)>> {
    let stream = Stream::new(place)?;
    match Gate::close(&stream)? {
        Some(gate) => Ok(Some((stream, gate))),
        None => {
            not_applicable(
                place,
                "no flags and no host functions: nothing gates a stream",
            );
            Ok(None)
        }
    }
}

/// Pending while the gate is closed, woken once it opens, then ready; ready again on re-poll.
#[test]
fn completion_is_pending_then_woken_then_ready() {
    for_each_place(|place| {
        let Some((stream, gate)) = gated(place)? else {
            return Ok(());
        };
        let event = stream.record_event()?;
        let mut of_stream = stream.completion();
        let mut of_event = event.completion();
        let (stream_wakes, stream_waker) = counter();
        let (event_wakes, event_waker) = counter();
        assert!(poll_with(&mut of_stream, &stream_waker).is_pending());
        assert!(poll_with(&mut of_event, &event_waker).is_pending());
        assert!(!of_stream.is_ready() && !of_event.is_ready());
        assert_eq!(stream_wakes.0.load(Ordering::SeqCst), 0);
        gate.release();
        assert!(
            wait_until(PATIENCE, || stream_wakes.0.load(Ordering::SeqCst) > 0
                && event_wakes.0.load(Ordering::SeqCst) > 0),
            "the completions were not woken after the gate opened"
        );
        for _ in 0..2 {
            assert_eq!(
                poll_with(&mut of_stream, &stream_waker),
                Poll::Ready(Ok(()))
            );
            assert_eq!(poll_with(&mut of_event, &event_waker), Poll::Ready(Ok(())));
        }
        assert!(
            stream.query()?,
            "the stream's work is done once its completion is"
        );
        assert!(event.query()?);
        Ok(())
    });
}

/// Once an event's completion resolves, the work it recorded is done; when the record is the
/// stream's latest work, the stream is idle too, whether the completion was asked while the
/// record was held behind a gate or after it reached the device, and on a stream whose event
/// completions were awaited before (where a backend may add work of its own around later
/// records to announce their completion, that work must be done by then too).
#[test]
fn an_event_completion_of_the_latest_record_leaves_the_stream_idle() {
    for_each_place(|place| {
        let Some((stream, gate)) = gated(place)? else {
            return Ok(());
        };
        let held = stream.record_event()?;
        let of_held = held.completion();
        gate.release();
        assert_eq!(block_on(of_held), Ok(()));
        assert!(held.query()?);
        assert!(
            stream.query()?,
            "the stream's latest record completed, yet the stream is busy"
        );
        for round in 0..50 {
            let event = stream.record_event()?;
            assert_eq!(block_on(event.completion()), Ok(()));
            assert!(
                stream.query()?,
                "round {round}: the stream's latest record completed, yet the stream is busy"
            );
        }
        Ok(())
    });
}

/// An event's completion is of the record the event had when it was made: re-recording the
/// event (here on an idle stream, whose record is complete at once) neither resolves the
/// earlier completion early nor changes what it reports; a completion made after the re-record
/// is of the new record. (A backend that reuses a record's memory for the next record must not
/// reuse one a completion still holds.)
#[test]
fn an_event_completion_keeps_its_record_across_a_re_record() {
    for_each_place(|place| {
        // Made before the gate closes: on CUDA a stream made while another is held at a flag
        // wait can stall in the driver (`completions_made_while_many_streams_are_held...`).
        let idle = Stream::new(place)?;
        let event = Event::new(place, EventFlags::default())?;
        let Some((stream, gate)) = gated(place)? else {
            return Ok(());
        };
        stream.record(&event)?;
        let mut first = event.completion();
        let (first_wakes, first_waker) = counter();
        assert!(poll_with(&mut first, &first_waker).is_pending());
        for _ in 0..3 {
            // Several re-records: a backend that recycles records gets the chance to recycle.
            idle.record(&event)?;
        }
        assert_eq!(
            block_on(event.completion()),
            Ok(()),
            "a completion of the record on the idle stream resolves"
        );
        assert!(
            poll_with(&mut first, &first_waker).is_pending(),
            "the first completion is still of the gated record"
        );
        assert_eq!(first_wakes.0.load(Ordering::SeqCst), 0);
        gate.release();
        assert!(
            wait_until(PATIENCE, || first_wakes.0.load(Ordering::SeqCst) > 0),
            "the first completion was not woken after the gate opened"
        );
        assert_eq!(poll_with(&mut first, &first_waker), Poll::Ready(Ok(())));
        assert!(stream.query()?);
        Ok(())
    });
}

/// A never-recorded event is ready at once; so is an event's completion after it has been
/// awaited once; an idle stream's completion resolves.
#[test]
fn never_recorded_event_is_ready_at_once() {
    for_each_place(|place| {
        let event = Event::new(place, EventFlags::default())?;
        let mut done = event.completion();
        assert!(
            done.is_ready(),
            "a never-recorded event's completion is ready at once"
        );
        let (_, waker) = counter();
        assert_eq!(poll_with(&mut done, &waker), Poll::Ready(Ok(())));
        block_on(&event)?;
        block_on(event)?;
        let stream = Stream::new(place)?;
        block_on(stream.completion())?;
        Ok(())
    });
}

/// 10,000 completions (of streams and of events) across 8 streams, polled from one thread,
/// all resolve. The streams are gated while the futures are made (so all are pending), except on
/// places where a closed gate can stall the driver's other calls (CUDA, HIP: see
/// `gates_stall_the_driver`; there, 10,000 records behind closed gates would fill the streams'
/// queues, about a thousand entries each, and the registering thread would wait inside the
/// driver for gates that only it opens), where the device's own pace keeps many of them
/// pending.
#[test]
fn ten_thousand_completions_across_eight_streams_from_one_thread() {
    const STREAMS: usize = 8;
    const FUTURES: usize = 10_000;
    for_each_place(|place| {
        let mut streams = Vec::new();
        let mut gates = Vec::new();
        for _ in 0..STREAMS {
            let stream = Stream::new(place)?;
            if !gates_stall_the_driver(place) {
                if let Some(gate) = Gate::close(&stream)? {
                    gates.push(gate);
                }
            }
            streams.push(stream);
        }
        let mut futures = Vec::with_capacity(FUTURES);
        let mut events = Vec::new();
        for i in 0..FUTURES {
            let stream = &streams[i % STREAMS];
            if i % 2 == 0 {
                futures.push(stream.completion());
            } else {
                let event = stream.record_event()?;
                futures.push(event.completion());
                events.push(event);
            }
        }
        if !gates.is_empty() {
            assert!(
                futures.iter().all(|f| !f.is_ready()),
                "a completion was ready while its stream was gated"
            );
        }
        let opener = std::thread::spawn(move || {
            for gate in &gates {
                gate.release();
            }
        });
        let outputs = join_all(futures);
        opener.join().expect("the opener thread");
        let failed: Vec<_> = outputs.iter().filter(|o| o.is_err()).collect();
        assert!(
            failed.is_empty(),
            "{} completions failed: {:?}",
            failed.len(),
            &failed[..failed.len().min(3)]
        );
        for stream in &streams {
            assert!(stream.query()?);
        }
        Ok(())
    });
}

/// A host function's panic is the completion's error (the same `synchronize` reports, which
/// still reports it afterwards: the completion looks, it does not take).
#[test]
fn host_function_panic_surfaces_from_the_completion() {
    for_each_place(|place| {
        if !caps(place).host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let stream = Stream::new(place)?;
        stream.launch_host_func(|| panic!("completion test: this host function panics"))?;
        match block_on(stream.completion()) {
            Err(Error::HostFuncPanicked { message, .. }) => {
                assert!(message.contains("this host function panics"), "{message}")
            }
            other => panic!("the completion should be Err(HostFuncPanicked), got {other:?}"),
        }
        assert_err!(
            crate::harness::sync(&stream),
            Error::HostFuncPanicked { .. }
        );
        Ok(())
    });
}

/// A waker replaced between polls is the one woken; the old one is not.
#[test]
fn a_waker_swapped_between_polls_is_the_one_woken() {
    for_each_place(|place| {
        let Some((stream, gate)) = gated(place)? else {
            return Ok(());
        };
        let event = stream.record_event()?;
        let mut futures = [stream.completion(), event.completion()];
        let (first, first_waker) = counter();
        let (second, second_waker) = counter();
        for future in &mut futures {
            assert!(poll_with(future, &first_waker).is_pending());
            assert!(poll_with(future, &second_waker).is_pending());
        }
        gate.release();
        assert!(
            wait_until(PATIENCE, || second.0.load(Ordering::SeqCst) >= 2),
            "the latest wakers were not woken (woken {} times)",
            second.0.load(Ordering::SeqCst)
        );
        assert_eq!(
            first.0.load(Ordering::SeqCst),
            0,
            "a replaced waker was woken"
        );
        for future in &mut futures {
            assert_eq!(poll_with(future, &second_waker), Poll::Ready(Ok(())));
        }
        Ok(())
    });
}

/// During a capture, `completion()` is a ready `Error::Capture`; the capture stays valid and
/// ends into a graph that launches.
#[test]
fn completion_during_capture_is_a_capture_error_and_the_capture_survives() {
    for_each_place(|place| {
        let caps = caps(place);
        if caps.capture == CaptureSupport::None {
            not_applicable(place, "no capture");
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let log = Log::new();
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        if caps.capture_host_funcs {
            stream.launch_host_func(log.task(1))?;
        }
        let mut during = stream.completion();
        assert!(
            during.is_ready(),
            "completion() during capture is ready at once"
        );
        let (_, waker) = counter();
        match poll_with(&mut during, &waker) {
            Poll::Ready(Err(Error::Capture { .. })) => {}
            other => panic!("completion() during capture: expected Err(Capture), got {other:?}"),
        }
        // An event recorded in the capture: its completion must not break the capture either.
        let inside = stream.record_event()?;
        let inside_done = inside.completion();
        assert!(stream.is_capturing()?, "the capture is still going on");
        let graph = stream.end_capture()?;
        drop(inside_done);
        assert_eq!(
            log.len(),
            0,
            "captured work ran before the graph was launched"
        );
        graph.launch(&stream)?;
        block_on(stream.completion())?;
        if caps.capture_host_funcs {
            assert_eq!(
                log.entries(),
                vec![1],
                "the graph ran the captured host function"
            );
        }
        Ok(())
    });
}

/// Under tokio: a current-thread and a multi-thread runtime await completions of gated streams
/// (as `Stream::completion().await`, `(&event).await` and `event.await`) while another task
/// opens the gates.
#[test]
fn completions_resolve_under_tokio() {
    for_each_place(|place| {
        for multi_thread in [false, true] {
            let runtime = if multi_thread {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .build()
            } else {
                tokio::runtime::Builder::new_current_thread().build()
            }
            .expect("a tokio runtime");
            let place = place.clone();
            runtime.block_on(async move {
                let mut gates = Vec::new();
                let mut tasks = Vec::new();
                for i in 0..16 {
                    let stream = Stream::new(&place)?;
                    if let Some(gate) = Gate::close(&stream)? {
                        gates.push(gate);
                    }
                    let event = stream.record_event()?;
                    let done = stream.completion();
                    tasks.push(tokio::spawn(async move {
                        match i % 3 {
                            0 => done.await,
                            1 => (&event).await,
                            _ => event.await,
                        }
                    }));
                }
                tokio::spawn(async move {
                    for gate in &gates {
                        gate.release();
                    }
                })
                .await
                .expect("the opener task");
                for task in tasks {
                    task.await.expect("a completion task panicked")?;
                }
                Ok::<(), Error>(())
            })?;
        }
        Ok(())
    });
}

const CHILD: &str = "DEVSTREAM_CONFORMANCE_COMPLETION_CHILD";

/// Runs `name` (a test of this module) in a child process where nothing else runs, so that
/// process-wide figures (live counts, thread count) are this test's own.
fn in_child(name: &str, body: impl Fn(&Place) -> Result<()>) {
    if std::env::var_os(CHILD).is_some() {
        for_each_place_alone(body);
        return;
    }
    let places = crate::harness::places_under_test().len() as u32;
    let (status, stdout, stderr) = run_test_in_child(
        name,
        // One file name per test: two of these children run at once in a parallel suite.
        &format!("devstream-completion-{}", name.replace("::", "-")),
        &[(CHILD, "1".to_string())],
        (PATIENCE + Duration::from_secs(30)) * places.max(1),
    );
    eprintln!("--- {name} child stdout ---\n{stdout}\n--- child stderr ---\n{stderr}");
    let status = status.expect("the child hung past its deadline and was killed");
    assert!(status.success(), "the child failed: {status}");
    assert!(stdout.contains("1 passed"), "the child did not run {name}");
}

fn counts_are_zero() -> bool {
    live_counts() == LiveCounts::default()
}

/// Dropping pending completions changes nothing on the stream (its work still runs, in order,
/// once the gate opens) and leaks nothing: live counts return to zero.
#[test]
fn dropped_completions_leave_nothing_live() {
    in_child(
        "completion::dropped_completions_leave_nothing_live",
        |place| {
            assert!(
                wait_until(PATIENCE, counts_are_zero),
                "before: live counts are {:?}",
                live_counts()
            );
            {
                // Made before the gate closes: CUDA's stream creation can wait for held streams
                // (see `gates_stall_the_driver`).
                let other = Stream::new(place)?;
                let Some((stream, gate)) = gated(place)? else {
                    return Ok(());
                };
                let log = Log::new();
                if caps(place).host_funcs {
                    stream.launch_host_func(log.task(1))?;
                }
                // Behind a held flag, CUDA and HIP block the enqueuing thread once the
                // stream's queue is full (about a thousand entries), and only the flag, opened
                // by this thread below, would free it: fewer records there.
                let rounds = if gates_stall_the_driver(place) {
                    150
                } else {
                    500
                };
                for i in 0..rounds {
                    let event = stream.record_event()?;
                    let mut futures = vec![stream.completion(), event.completion()];
                    if i % 2 == 0 {
                        // Polled once (a waker is registered) before the drop.
                        let (_, waker) = counter();
                        for future in &mut futures {
                            assert!(poll_with(future, &waker).is_pending());
                        }
                    }
                    drop(futures);
                    if i % 100 == 0 {
                        other.wait_event(&event)?;
                    }
                }
                if caps(place).host_funcs {
                    stream.launch_host_func(log.task(2))?;
                }
                gate.release();
                crate::harness::sync(&stream)?;
                crate::harness::sync(&other)?;
                if caps(place).host_funcs {
                    assert_eq!(
                        log.entries(),
                        vec![1, 2],
                        "the stream's own work ran in order"
                    );
                }
            }
            assert!(
                wait_until(PATIENCE, counts_are_zero),
                "after dropping pending completions, live counts stay at {:?}",
                live_counts()
            );
            Ok(())
        },
    );
}

/// Completions made while the caller holds many streams never wait for those streams. On an
/// H100, raw stream creation stalled while 16 to 64 streams were held at flag waits
/// (`docs/results/2026-11-24-gpu3/22-stream-create-stalls/`), and a completion that created a
/// notifier stream then never returned: the caller opens its gates only once it has its
/// futures. Here 64 streams (made first) are held, each gets a stream and an event completion
/// within [`PATIENCE`] (a stuck call is rescued by opening the gates, and fails the test), all
/// pending; once the gates open, all are ready.
#[test]
fn completions_made_while_many_streams_are_held_never_wait_for_them() {
    const HELD: usize = 64;
    for_each_place(|place| {
        let streams = (0..HELD)
            .map(|_| Stream::new(place))
            .collect::<Result<Vec<Stream>>>()?;
        let mut gates = Vec::new();
        for stream in &streams {
            match Gate::close(stream)? {
                Some(gate) => gates.push(gate),
                None => {
                    not_applicable(place, "no gate: neither flags nor host functions");
                    return Ok(());
                }
            }
        }
        let made = within(
            PATIENCE,
            &format!("completions of {HELD} held streams on {place}"),
            move || -> Result<Vec<Completion>> {
                let mut futures = Vec::new();
                for stream in &streams {
                    futures.push(stream.completion());
                    futures.push(stream.record_event()?.completion());
                }
                Ok(futures)
            },
            || gates.iter().for_each(Gate::release),
        );
        let futures = made?;
        assert!(
            futures.iter().all(|future| !future.is_ready()),
            "a completion was ready while its stream was held"
        );
        gates.iter().for_each(Gate::release);
        for result in join_all(futures) {
            result?;
        }
        Ok(())
    });
}

/// The process's thread count (Linux `/proc/self/status`) does not grow with the number of
/// pending completions: 4,000 more futures (pending behind gates, except where gates can stall
/// the driver, see the 10,000-futures test) add no thread.
#[test]
fn thread_count_does_not_grow_with_pending_completions() {
    fn threads() -> Option<usize> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
    }
    /// The names of the process's threads (`/proc/self/task/*/comm`), sorted.
    fn thread_names() -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
            .map(|name| name.trim().to_string())
            .collect();
        names.sort();
        names
    }
    if threads().is_none() {
        eprintln!("[conformance] no /proc/self/status: thread count not checked");
        return;
    }
    in_child(
        "completion::thread_count_does_not_grow_with_pending_completions",
        |place| {
            let stream = Stream::new(place)?;
            let other = Stream::new(place)?;
            let (gate, other_gate) = if gates_stall_the_driver(place) {
                (None, None)
            } else {
                (Gate::close(&stream)?, Gate::close(&other)?)
            };
            // Warm up: whatever a backend starts once per device or process (a notifier, a
            // sweeper, a release thread, the runtime's callback threads) runs now. Ungated, the
            // warm-up futures (more than a device's doorbells, their events dropped at once so
            // that the runtime's callbacks may hold the last handles) are awaited first, so that
            // threads started on a first callback exist before the count.
            let mut warm = vec![other.completion()];
            for _ in 0..32 {
                warm.push(stream.completion());
                warm.push(stream.record_event()?.completion());
            }
            if gate.is_none() {
                for result in join_all(std::mem::take(&mut warm)) {
                    result?;
                }
            }
            let mut futures = Vec::new();
            for _ in 0..8 {
                futures.push(stream.completion());
                futures.push(stream.record_event()?.completion());
            }
            let (before, names_before) = (threads().expect("thread count"), thread_names());
            for i in 0..2_000 {
                let s = if i % 2 == 0 { &stream } else { &other };
                futures.push(s.completion());
                futures.push(s.record_event()?.completion());
            }
            let (after, names_after) = (threads().expect("thread count"), thread_names());
            if gate.is_some() && other_gate.is_some() {
                assert!(
                    futures.iter().all(|f| !f.is_ready()),
                    "a completion was ready while its stream was gated"
                );
            }
            assert!(
                after <= before,
                "{after} threads with 4,016 pending completions, {before} with 16: the thread \
                 count grows with pending futures (threads before: {names_before:?}; after: \
                 {names_after:?})"
            );
            drop((gate, other_gate));
            futures.extend(warm);
            let outputs = join_all(futures);
            assert!(outputs.iter().all(Result::is_ok));
            Ok(())
        },
    );
}

/// `Completion` is a `Send + Unpin + 'static` future of `Result<()>` (compile-time check).
#[test]
fn completion_is_send_unpin_static() {
    fn check<T: Future<Output = Result<()>> + Send + Unpin + 'static>() {}
    check::<Completion>();
    fn into_future<T: std::future::IntoFuture<Output = Result<()>>>() {}
    into_future::<Event>();
    into_future::<&Event>();
}
