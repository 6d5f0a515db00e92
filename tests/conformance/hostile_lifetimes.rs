//! Hostile use, continued: panics whose payloads' `Drop` panics (in host functions and in the
//! destructors of host closures, run or dropped unrun), current-stream guards and handles
//! dropped in every order on other threads, graphs launched from several threads and dropped
//! while running, and buffers and flags dropped around a capture. The rules and the way each
//! check is isolated are those of `hostile.rs`.

use crate::harness::{
    caps, for_each_place, for_each_place_isolated, not_applicable, wait_until, within, Gate, Log,
    HANG,
};
use crate::hostile::{
    bounded, captures_host_funcs, host_funcs, pattern, place_still_works, sync_soon,
};
use devstream::{
    current_stream, set_current_stream, CaptureMode, CaptureSupport, DeviceBuffer, Error, Event,
    Flag, Graph, HostBuffer, Place, Result, Stream,
};
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A panic payload whose `Drop` panics with another `Bomb`, `0` levels deep at the end. (Never
/// panics while the thread is already unwinding: that would abort the process by Rust's rules,
/// whoever dropped it.)
struct Bomb(u32);

impl Bomb {
    /// Keeps the deliberate panics of bombs out of the output (installed once per process; the
    /// checks that use bombs run in child processes of their own).
    fn quiet() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if !info.payload().is::<Bomb>() {
                    previous(info);
                }
            }));
        });
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0 > 0 && !std::thread::panicking() {
            std::panic::panic_any(Bomb(self.0 - 1));
        }
    }
}

/// Drops a panic payload, and the payloads its `Drop` panics with, until one drops quietly.
fn swallow(mut payload: Box<dyn Any + Send>) {
    loop {
        match catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            Ok(()) => return,
            Err(next) => payload = next,
        }
    }
}

/// Runs `f`, allowing it to panic (the user's own destructor may panic through it); swallows
/// such a panic's payload and gives `None`.
#[track_caller]
fn tolerating_panics<T>(what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(payload) => {
            eprintln!(
                "[conformance] hostile: {}: {what}: a user destructor's panic came through \
                 (allowed)",
                Location::caller()
            );
            swallow(payload);
            None
        }
    }
}

/// A host closure that logs `entry` each time it runs and owns a [`Bomb`]: dropping the closure
/// panics (three levels deep).
fn closure_with_bomb(
    log: &Log<&'static str>,
    entry: &'static str,
) -> impl FnMut() + Send + 'static {
    Bomb::quiet();
    let log = log.clone();
    let bomb = Bomb(3);
    move || {
        let _owned = &bomb;
        log.push(entry);
    }
}

/// Ok, or the panic report of `stream` (a destructor's panic may be reported as the host
/// function's); anything else fails.
#[track_caller]
fn ok_or_panic_report(result: Result<()>, stream: u64, what: &str) {
    match result {
        Ok(()) => {}
        Err(Error::HostFuncPanicked { stream: s, .. }) if s == stream => {}
        other => {
            panic!("{what}: expected Ok or HostFuncPanicked on stream {stream}, got {other:?}")
        }
    }
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for at in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(at, n - 1);
            out.push(p);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Calls from inside host functions
// ---------------------------------------------------------------------------------------------

/// A host function panics with a payload whose `Drop` panics with another such payload, four
/// billion times over: the backend drops a bounded number of them (and leaks the rest) instead
/// of spending hours dropping them one by one on its worker; the panic is reported in time.
#[test]
fn host_fn_panics_with_an_endless_chain_of_panicking_payloads() {
    for_each_place_isolated(
        "hostile_lifetimes::host_fn_panics_with_an_endless_chain_of_panicking_payloads",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            Bomb::quiet();
            let stream = Stream::new(place)?;
            let log: Log<&'static str> = Log::new();
            stream.launch_host_func(|| std::panic::panic_any(Bomb(u32::MAX)))?;
            stream.launch_host_func(log.task("after"))?;
            let id = stream.id();
            assert_err!(
                sync_soon(&stream, "synchronize after the endless panic"),
                Error::HostFuncPanicked { stream, .. } if stream == id
            );
            assert!(log.contains(&"after"), "work after the panic did not run");
            place_still_works(place)
        },
    );
}

/// A host function panics with a payload whose `Drop` panics (three levels): synchronize
/// reports `HostFuncPanicked` for that stream in time; later work still runs; another stream and
/// the place still work; the same from a graph.
#[test]
fn host_fn_panics_with_a_payload_whose_drop_panics() {
    for_each_place_isolated(
        "hostile_lifetimes::host_fn_panics_with_a_payload_whose_drop_panics",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            Bomb::quiet();
            let (stream, bystander) = (Stream::new(place)?, Stream::new(place)?);
            let log: Log<&'static str> = Log::new();
            bystander.launch_host_func(log.task("bystander"))?;
            stream.launch_host_func(log.task("before"))?;
            stream.launch_host_func(|| std::panic::panic_any(Bomb(3)))?;
            stream.launch_host_func(log.task("after"))?;
            let id = stream.id();
            assert_err!(
                sync_soon(&stream, "synchronize after the panic"),
                Error::HostFuncPanicked { stream, .. } if stream == id
            );
            sync_soon(&bystander, "synchronize a bystander")?;
            for entry in ["before", "after", "bystander"] {
                assert!(
                    log.contains(&entry),
                    "{entry} did not run: {:?}",
                    log.entries()
                );
            }
            stream.launch_host_func(log.task("later"))?;
            ok_or_panic_report(
                sync_soon(&stream, "synchronize after the reported panic"),
                id,
                "synchronize after the reported panic",
            );
            assert!(log.contains(&"later"), "work after the panic did not run");
            place_still_works(place)?;

            if captures_host_funcs(place) {
                let capturing = Stream::new(place)?;
                capturing.begin_capture(CaptureMode::ThreadLocal)?;
                capturing.launch_host_func(|| std::panic::panic_any(Bomb(2)))?;
                let graph = capturing.end_capture()?;
                let runner = Stream::new(place)?;
                graph.launch(&runner)?;
                let id = runner.id();
                assert_err!(
                    sync_soon(&runner, "synchronize after a graph's host function panicked"),
                    Error::HostFuncPanicked { stream, .. } if stream == id
                );
                place_still_works(place)?;
            }
            Ok(())
        },
    );
}

/// A host closure whose destructor panics (three levels), dropped after it ran: synchronize
/// returns (Ok, or the panic reported for that stream); the stream and the place still work;
/// the same for a captured closure, whose graph is then dropped here and on another thread.
#[test]
fn host_closure_destructor_panics_after_running() {
    for_each_place_isolated(
        "hostile_lifetimes::host_closure_destructor_panics_after_running",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            let stream = Stream::new(place)?;
            let log: Log<&'static str> = Log::new();
            stream.launch_host_func(closure_with_bomb(&log, "ran"))?;
            stream.launch_host_func(log.task("after"))?;
            let id = stream.id();
            ok_or_panic_report(
                sync_soon(
                    &stream,
                    "synchronize after a closure whose destructor panics",
                ),
                id,
                "synchronize after a closure whose destructor panics",
            );
            assert_eq!(log.entries(), vec!["ran", "after"]);
            stream.launch_host_func(log.task("later"))?;
            ok_or_panic_report(
                sync_soon(&stream, "synchronize later"),
                id,
                "synchronize later",
            );
            assert!(log.contains(&"later"), "work after the destructor's panic");
            place_still_works(place)?;

            if captures_host_funcs(place) {
                let capturing = Stream::new(place)?;
                capturing.begin_capture(CaptureMode::ThreadLocal)?;
                capturing.launch_host_func(closure_with_bomb(&log, "graph"))?;
                let graph = capturing.end_capture()?;
                let runner = Stream::new(place)?;
                graph.launch(&runner)?;
                graph.launch(&runner)?;
                let id = runner.id();
                ok_or_panic_report(
                    sync_soon(&runner, "synchronize two launches"),
                    id,
                    "synchronize two launches",
                );
                assert_eq!(
                    log.entries().iter().filter(|e| **e == "graph").count(),
                    2,
                    "two launches"
                );
                let elsewhere = graph.clone();
                tolerating_panics("dropping a graph clone", || drop(graph));
                bounded(
                    "dropping the last graph handle on another thread",
                    move || tolerating_panics("dropping the last graph handle", || drop(elsewhere)),
                );
                drop(capturing);
                place_still_works(place)?;
            }
            Ok(())
        },
    );
}

/// Closures whose destructors panic, dropped unrun: with a graph never launched, with a capture
/// that an invalid call ended; and run by a stream whose last handle was dropped meanwhile. No
/// crash, no hang; the unrun closures never run; the stream and the place still work.
#[test]
fn closures_with_panicking_destructors_dropped_unrun() {
    for_each_place_isolated(
        "hostile_lifetimes::closures_with_panicking_destructors_dropped_unrun",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            let log: Log<&'static str> = Log::new();
            // A stream dropped with a held closure: it runs later, then its destructor panics.
            let stream = Stream::new(place)?;
            let gate = Gate::close(&stream)?;
            stream.launch_host_func(closure_with_bomb(&log, "dropped stream"))?;
            let done = stream.record_event()?;
            let id = stream.id();
            bounded("dropping a stream with a held closure", move || {
                drop(stream)
            });
            drop(gate);
            ok_or_panic_report(
                bounded("the dropped stream's event", move || done.synchronize()),
                id,
                "the dropped stream's event",
            );
            assert!(
                wait_until(*HANG, || log.contains(&"dropped stream")),
                "a dropped stream's held closure never ran"
            );

            if captures_host_funcs(place) {
                let capturing = Stream::new(place)?;
                // A graph never launched.
                capturing.begin_capture(CaptureMode::ThreadLocal)?;
                capturing.launch_host_func(closure_with_bomb(&log, "never"))?;
                let graph = capturing.end_capture()?;
                tolerating_panics("dropping a graph never launched", || drop(graph));
                // A capture invalidated by synchronize drops what it captured.
                capturing.begin_capture(CaptureMode::ThreadLocal)?;
                capturing.launch_host_func(closure_with_bomb(&log, "never"))?;
                if let Some(result) =
                    tolerating_panics("synchronize during capture", || capturing.synchronize())
                {
                    assert_err!(result, Error::Capture { .. });
                }
                if let Some(result) =
                    tolerating_panics("end of an invalidated capture", || capturing.end_capture())
                {
                    assert_err!(result, Error::Capture { .. });
                }
                // A graph and its stream dropped on another thread, the graph never launched.
                capturing.begin_capture(CaptureMode::ThreadLocal)?;
                capturing.launch_host_func(closure_with_bomb(&log, "never"))?;
                let graph = capturing.end_capture()?;
                let moved = capturing.clone();
                bounded(
                    "dropping a stream and an unlaunched graph on another thread",
                    move || {
                        tolerating_panics("dropping an unlaunched graph", || drop(graph));
                        drop(moved);
                    },
                );
                capturing.launch_host_func(log.task("capturing stream after"))?;
                sync_soon(&capturing, "the capturing stream afterwards")?;
                assert!(log.contains(&"capturing stream after"));
                assert!(
                    !log.contains(&"never"),
                    "a closure dropped unrun ran: {:?}",
                    log.entries()
                );
            }
            place_still_works(place)
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Guards and handles dropped in every order, on other threads
// ---------------------------------------------------------------------------------------------

/// Three guards dropped in each of the 6 orders, with and without a `set_current_stream` inside
/// them, the guarded streams' own handles dropped first, on 4 threads at once: while guards live
/// the newest living guard's stream (as `set_current_stream` replaced it) is current, after the
/// last one what was current before the first; no thread sees another's.
#[test]
fn guards_dropped_in_every_order_on_many_threads() {
    for_each_place(|place| {
        let workers: Vec<_> = (0..4)
            .map(|thread| {
                let place = place.clone();
                std::thread::spawn(move || -> Result<()> { guard_orders(&place, thread) })
            })
            .collect();
        for worker in workers {
            within(*HANG * 3, "a guard thread", move || worker.join(), || {})
                .unwrap_or_else(|payload| std::panic::resume_unwind(payload))?;
        }
        Ok(())
    });
}

fn guard_orders(place: &Place, thread: usize) -> Result<()> {
    for order in permutations(3) {
        for replace in [false, true] {
            let context = format!("thread {thread}, drop order {order:?}, set inside: {replace}");
            let base = Stream::new(place)?;
            let previous = set_current_stream(&base)?;
            let streams: Vec<Stream> = (0..3).map(|_| Stream::new(place)).collect::<Result<_>>()?;
            let mut guards: Vec<Option<_>> =
                streams.iter().map(|s| Some(s.make_current())).collect();
            let mut expected = streams.clone();
            if replace {
                let replacement = Stream::new(place)?;
                let was = set_current_stream(&replacement)?;
                assert_eq!(
                    was, streams[2],
                    "{context}: set_current_stream returns the newest guard's"
                );
                expected[2] = replacement;
            }
            drop(streams);
            assert_eq!(
                current_stream(place)?,
                expected[2],
                "{context}: with all guards"
            );
            let mut alive = [true; 3];
            for &i in &order {
                guards[i] = None;
                alive[i] = false;
                let want = (0..3)
                    .rev()
                    .find(|&j| alive[j])
                    .map_or_else(|| base.clone(), |j| expected[j].clone());
                assert_eq!(
                    current_stream(place)?,
                    want,
                    "{context}: after dropping guard {i}"
                );
            }
            set_current_stream(&previous)?;
        }
    }
    Ok(())
}

/// A handle dropped on another thread.
enum Handle {
    Stream(Stream),
    Event(Event),
    Graph(Graph),
    Buffer(DeviceBuffer),
    Flag(Flag),
}

/// Stream, event, graph, device buffer and flag handles, each the last one, dropped on another
/// thread in every order while the work using them is held: the drops return at once, and the
/// work runs correctly when released.
#[test]
fn handles_dropped_in_every_order_on_another_thread() {
    for_each_place_isolated(
        "hostile_lifetimes::handles_dropped_in_every_order_on_another_thread",
        |place| {
            let caps = caps(place);
            let capture = caps.capture != CaptureSupport::None && caps.capture_host_funcs;
            let kinds = 3 + usize::from(capture) + usize::from(caps.flags);
            const N: usize = 64;
            let data = pattern(N, 8);
            let kept_flag = if caps.flags {
                Some(Flag::new(place)?)
            } else {
                None
            };
            let log: Log<u32> = Log::new();
            let orders = permutations(kinds);
            let started = Instant::now();
            for (round, order) in orders.iter().enumerate() {
                // Progress, so that a run stopped by the whole-check watchdog shows how far it got
                // and whether rounds were slow or one round hung.
                if round % 20 == 0 || started.elapsed() > Duration::from_secs(30) {
                    eprintln!(
                        "[conformance] hostile: {place}: drop order {round}/{} after {:.1?}",
                        orders.len(),
                        started.elapsed()
                    );
                }
                let round = round as u32;
                let stream = Stream::new(place)?;
                let gate = Gate::close(&stream)?;
                // Everything queued while this thread's own gate holds the stream runs under a
                // watchdog whose rescue opens the gate: a call that waits (in devstream or in the
                // driver) for the held work fails naming itself instead of hanging the check.
                let opener = gate.as_ref().map(Gate::opener);
                let (p, d, l, k) = (place.clone(), data.clone(), log.clone(), kept_flag.clone());
                let held = move || -> Result<(Vec<Option<Handle>>, Event, HostBuffer)> {
                    let (place, data, log, kept_flag) = (p, d, l, k);
                    let dev = stream.alloc(N)?;
                    let out = stream.alloc_host(N)?;
                    stream.copy_from_host(&dev, 0, &data)?;
                    stream.copy_device_to_host(&out, 0, &dev, 0, N)?;
                    if caps.host_funcs {
                        stream.launch_host_func(log.task(2 * round))?;
                    }
                    let mut handles = vec![
                        Some(Handle::Stream(stream.clone())),
                        Some(Handle::Event(stream.record_event()?)),
                        Some(Handle::Buffer(dev)),
                    ];
                    if capture {
                        let capturing = Stream::new(&place)?;
                        capturing.begin_capture(CaptureMode::ThreadLocal)?;
                        capturing.launch_host_func(log.task(2 * round + 1))?;
                        let graph = capturing.end_capture()?;
                        graph.launch(&stream)?;
                        handles.push(Some(Handle::Graph(graph)));
                    }
                    if let Some(kept) = &kept_flag {
                        let dropped = Flag::new(&place)?;
                        stream.write_flag(&dropped, round + 1)?;
                        stream.wait_flag(&dropped, round + 1)?;
                        stream.write_flag(kept, round + 1)?;
                        handles.push(Some(Handle::Flag(dropped)));
                    }
                    let done = stream.record_event()?;
                    drop(stream);
                    Ok((handles, done, out))
                };
                let (handles, done, out) = within(
                    *HANG,
                    &format!(
                        "round {round}: work queued while this thread's gate holds the stream"
                    ),
                    held,
                    move || {
                        if let Some(open) = opener {
                            open();
                        }
                    },
                )?;
                let order = order.clone();
                bounded(
                    &format!("dropping handles in order {order:?} on another thread"),
                    move || {
                        let mut handles = handles;
                        for i in order {
                            match handles[i].take() {
                                Some(Handle::Stream(h)) => drop(h),
                                Some(Handle::Event(h)) => drop(h),
                                Some(Handle::Graph(h)) => drop(h),
                                Some(Handle::Buffer(h)) => drop(h),
                                Some(Handle::Flag(h)) => drop(h),
                                None => unreachable!("each handle once"),
                            }
                        }
                    },
                );
                drop(gate);
                bounded("the event after the dropped handles' work", move || {
                    done.synchronize()
                })?;
                assert!(
                    out.to_vec()? == data,
                    "round {round}: a copy from a dropped buffer"
                );
                if let Some(kept) = &kept_flag {
                    assert_eq!(
                        kept.get(),
                        round + 1,
                        "round {round}: flag write after a dropped flag"
                    );
                }
                if caps.host_funcs {
                    assert!(
                        log.contains(&(2 * round)),
                        "round {round}: the host function"
                    );
                }
                if capture {
                    assert!(
                        wait_until(*HANG, || log.contains(&(2 * round + 1))),
                        "round {round}: the dropped graph's launch"
                    );
                }
            }
            eprintln!(
                "[conformance] hostile: {place}: {} drop orders of {kinds} handles",
                orders.len()
            );
            place_still_works(place)
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Graphs and captures
// ---------------------------------------------------------------------------------------------

/// One graph launched from 4 threads on 4 streams (25 launches each), each thread dropping its
/// clone while its launches run, the original dropped meanwhile, one stream dropped with held
/// launches: every launch runs exactly once.
#[test]
fn graphs_launched_concurrently_and_dropped_while_running() {
    for_each_place_isolated(
        "hostile_lifetimes::graphs_launched_concurrently_and_dropped_while_running",
        |place| {
            if !captures_host_funcs(place) {
                return Ok(());
            }
            const THREADS: u32 = 4;
            const LAUNCHES: u32 = 25;
            let caps = caps(place);
            let runs = Arc::new(AtomicU32::new(0));
            let written = if caps.flags {
                Some(Flag::new(place)?)
            } else {
                None
            };
            let capturing = Stream::new(place)?;
            capturing.begin_capture(CaptureMode::ThreadLocal)?;
            let r = runs.clone();
            capturing.launch_host_func(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })?;
            if let Some(flag) = &written {
                capturing.write_flag(flag, 1)?;
            }
            let graph = capturing.end_capture()?;
            drop(capturing);

            let held = Stream::new(place)?;
            let gate = Gate::close(&held)?;
            for _ in 0..LAUNCHES {
                graph.launch(&held)?;
            }
            let held_done = held.record_event()?;
            drop(held);

            let workers: Vec<_> = (0..THREADS)
                .map(|_| {
                    let (graph, place) = (graph.clone(), place.clone());
                    std::thread::spawn(move || -> Result<()> {
                        let stream = Stream::new(&place)?;
                        for _ in 0..LAUNCHES {
                            graph.launch(&stream)?;
                        }
                        drop(graph);
                        stream.synchronize()
                    })
                })
                .collect();
            drop(graph);
            // Open the held stream before joining: where streams share one queue, it holds the
            // others too.
            drop(gate);
            for worker in workers {
                bounded("a launching thread", move || worker.join())
                    .unwrap_or_else(|payload| std::panic::resume_unwind(payload))?;
            }
            bounded("the held launches of a dropped stream", move || {
                held_done.synchronize()
            })?;
            let total = (THREADS + 1) * LAUNCHES;
            assert!(
                wait_until(*HANG, || runs.load(Ordering::SeqCst) == total),
                "{} of {total} launches ran",
                runs.load(Ordering::SeqCst)
            );
            if let Some(flag) = &written {
                assert_eq!(flag.get(), 1);
            }
            place_still_works(place)
        },
    );
}

/// Two launches of one graph in flight on two streams: a panic of a graph host function is
/// reported on the stream whose launch ran it, not the last launch's. The
/// first launch's run waits (bounded) until the second launch was submitted, then panics.
#[test]
fn graph_panic_is_reported_on_the_launching_stream() {
    for_each_place_isolated(
        "hostile_lifetimes::graph_panic_is_reported_on_the_launching_stream",
        |place| {
            if !captures_host_funcs(place) {
                return Ok(());
            }
            let log: Log<String> = Log::new();
            let counter = Arc::new(AtomicU32::new(0));
            let second_launched = Arc::new(AtomicU32::new(0));
            let capturing = Stream::new(place)?;
            capturing.begin_capture(CaptureMode::ThreadLocal)?;
            let (l, c, go) = (log.clone(), counter.clone(), second_launched.clone());
            capturing.launch_host_func(move || {
                let run = c.fetch_add(1, Ordering::SeqCst) + 1;
                l.push(format!("run {run}"));
                if run == 1 {
                    wait_until(*HANG, || go.load(Ordering::SeqCst) == 1);
                    panic!("graph run 1 panics");
                }
            })?;
            let graph = capturing.end_capture()?;
            let (first, second) = (Stream::new(place)?, Stream::new(place)?);
            graph.launch(&first)?;
            let l = log.clone();
            assert!(
                wait_until(*HANG, || l.contains(&"run 1".to_string())),
                "the first launch did not run"
            );
            let (g, s) = (graph.clone(), second.clone());
            bounded("launching while another launch runs", move || g.launch(&s))?;
            second_launched.store(1, Ordering::SeqCst);
            let first_id = first.id();
            let first_result = sync_soon(&first, "the first stream");
            let second_result = sync_soon(&second, "the second stream");
            assert!(
                matches!(&first_result, Err(Error::HostFuncPanicked { stream, .. }) if *stream == first_id),
                "the first launch's run panicked, but the first stream's synchronize gave \
                 {first_result:?} (the second's gave {second_result:?}; log {:?})",
                log.entries()
            );
            assert!(
                second_result.is_ok(),
                "the second launch did not panic but its stream reported {second_result:?}"
            );
            assert_eq!(counter.load(Ordering::SeqCst), 2, "two runs");
            place_still_works(place)
        },
    );
}

/// Buffers and flags dropped during a capture, after it, and while work queued before it is
/// held, then the graph replayed (twice): the replay is correct, writes no recycled flag, and
/// the earlier work sees its buffer.
#[test]
fn buffers_and_flags_dropped_around_a_capture_then_replayed() {
    for_each_place_isolated(
        "hostile_lifetimes::buffers_and_flags_dropped_around_a_capture_then_replayed",
        |place| {
            let caps = caps(place);
            if caps.capture == CaptureSupport::None {
                not_applicable(place, "no capture (Unsupported asserted in capabilities)");
                return Ok(());
            }
            const N: usize = 128;
            let stream = Stream::new(place)?;
            let kept = stream.alloc(N)?;
            let host = stream.alloc_host(N)?;

            // Dropped during the capture, and after it before any launch.
            for after in [false, true] {
                let what = if after { "after" } else { "during" };
                let temp = stream.alloc(N)?;
                stream.begin_capture(CaptureMode::ThreadLocal)?;
                stream.fill(&temp, 0, N, 0x7A)?;
                stream.copy_device_to_device(&kept, 0, &temp, 0, N)?;
                let temp = if after {
                    Some(temp)
                } else {
                    drop(temp);
                    None
                };
                stream.copy_device_to_host(&host, 0, &kept, 0, N)?;
                let graph = stream.end_capture()?;
                drop(temp);
                let runner = Stream::new(place)?;
                for launch in 0..2 {
                    host.write(0, &[0; N])?;
                    graph.launch(&runner)?;
                    sync_soon(&runner, "a replay")?;
                    assert!(
                        host.to_vec()? == vec![0x7A; N],
                        "launch {launch} of a graph whose buffer was dropped {what} the capture"
                    );
                }
            }

            // Dropped while the stream captures, with work queued before the capture held.
            let spare = stream.alloc(N)?;
            let gate = Gate::close(&stream)?;
            let temp = stream.alloc(N)?;
            stream.fill(&temp, 0, N, 0x3C)?;
            stream.copy_device_to_device(&kept, 0, &temp, 0, N)?;
            stream.copy_device_to_host(&host, 0, &kept, 0, N)?;
            stream.begin_capture(CaptureMode::ThreadLocal)?;
            drop(temp);
            stream.fill(&spare, 0, N, 1)?;
            let graph = stream.end_capture()?;
            drop(gate);
            sync_soon(&stream, "work queued before a capture")?;
            assert!(
                host.to_vec()? == vec![0x3C; N],
                "work queued before a capture lost the buffer dropped while capturing"
            );
            drop(spare);
            graph.launch(&stream)?;
            sync_soon(&stream, "a replay whose buffer was dropped")?;

            if caps.flags {
                let kept_flag = Flag::new(place)?;
                let temp = Flag::new(place)?;
                stream.begin_capture(CaptureMode::ThreadLocal)?;
                stream.write_flag(&temp, 5)?;
                stream.wait_flag(&temp, 5)?;
                drop(temp);
                stream.write_flag(&kept_flag, 6)?;
                let graph = stream.end_capture()?;
                // New flags may take the dropped one's memory: a replay must not write them.
                let fresh: Vec<Flag> = (0..16).map(|_| Flag::new(place)).collect::<Result<_>>()?;
                for _ in 0..2 {
                    graph.launch(&stream)?;
                    sync_soon(&stream, "a replay whose flag was dropped")?;
                }
                assert_eq!(kept_flag.get(), 6, "a replay's flag write");
                for flag in &fresh {
                    assert_eq!(
                        flag.get(),
                        0,
                        "a replay wrote a flag allocated after its capture"
                    );
                }
            }
            place_still_works(place)
        },
    );
}
