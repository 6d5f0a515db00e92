//! `bench-step`: a fixed DAG typical of a training step, run 1,000 times through devstream.
//!
//! Four streams (compute, two copy streams, a side stream), 200 tiny kernels, 40 cross-stream
//! event waits (10 of them defensive duplicates of an earlier wait, as frameworks issue them),
//! 8 host-visible event queries per step. The kernels are the place's cheapest unit of work
//! that runs through every backend: a tiny host function (on the CPU place that is its native
//! kernel path, a closure). Reported: µs per step eager with redundant-wait elision on and off
//! (streams built with `elide_waits(true/false)`, 7 interleaved rounds, median), captured once
//! and replayed, and the calls devstream issued per step (ops − elided waits).
//!
//! ```text
//! bench-step [--place cpu] [--steps 1000]
//! ```

use devstream::{Event, EventFlags, Place, Stream};
use devstream_bench::{
    arg, arg_or, capture_step, replay_us, step_plan, StepOp, STEP_EVENTS, STEP_STREAMS,
};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The four streams of a step (indexed as in [`step_plan`]).
struct Streams([Stream; STEP_STREAMS]);

impl Streams {
    fn new(place: &Place, elide: bool) -> devstream::Result<Streams> {
        let make = || Stream::builder(place).elide_waits(elide).build();
        Ok(Streams([make()?, make()?, make()?, make()?]))
    }

    fn all(&self) -> &[Stream] {
        &self.0
    }
}

/// Reusable events of a step (re-recorded every step, as frameworks reuse theirs).
struct Events(Vec<Event>);

impl Events {
    fn new(place: &Place) -> devstream::Result<Events> {
        (0..STEP_EVENTS)
            .map(|_| Event::new(place, EventFlags::default()))
            .collect::<Result<_, _>>()
            .map(Events)
    }
}

/// Per-step operation counts of [`step`].
#[derive(Default, Clone, Copy)]
struct Counts {
    kernels: u64,
    records: u64,
    waits: u64,
    queries: u64,
}

/// Submits one step. `query`: whether to query host-visible events (not during capture).
fn step(
    s: &Streams,
    e: &Events,
    plan: &[StepOp],
    counter: &Arc<AtomicU64>,
    query: bool,
) -> devstream::Result<Counts> {
    let mut n = Counts::default();
    for op in plan {
        match *op {
            StepOp::Kernel(stream) => {
                let c = counter.clone();
                s.0[stream].launch_host_func(move || {
                    c.fetch_add(1, Ordering::Relaxed);
                })?;
                n.kernels += 1;
            }
            StepOp::Record { event, stream } => {
                e.0[event].record(&s.0[stream])?;
                n.records += 1;
            }
            StepOp::Wait { stream, event } => {
                s.0[stream].wait_event(&e.0[event])?;
                n.waits += 1;
            }
            StepOp::Query(event) => {
                if query {
                    black_box(e.0[event].query()?);
                    n.queries += 1;
                }
            }
        }
    }
    Ok(n)
}

fn kernels_per_step(plan: &[StepOp]) -> u64 {
    plan.iter()
        .filter(|op| matches!(op, StepOp::Kernel(_)))
        .count() as u64
}

fn eager(place: &Place, elide: bool, steps: usize) -> devstream::Result<(f64, Counts, f64)> {
    let s = Streams::new(place, elide)?;
    let e = Events::new(place)?;
    let plan = step_plan();
    let counter = Arc::new(AtomicU64::new(0));
    // Warm-up.
    for _ in 0..10 {
        step(&s, &e, &plan, &counter, true)?;
    }
    for stream in s.all() {
        stream.synchronize()?;
    }
    let elided_before = devstream::elide::elided_on_this_thread();
    let start = Instant::now();
    let mut counts = Counts::default();
    for _ in 0..steps {
        counts = step(&s, &e, &plan, &counter, true)?;
    }
    for stream in s.all() {
        stream.synchronize()?;
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / steps as f64;
    let elided = (devstream::elide::elided_on_this_thread() - elided_before) as f64 / steps as f64;
    let expected = (steps as u64 + 10) * kernels_per_step(&plan);
    assert_eq!(
        counter.load(Ordering::Relaxed),
        expected,
        "every kernel ran"
    );
    Ok((us, counts, elided))
}

fn captured(place: &Place, steps: usize) -> devstream::Result<(f64, f64)> {
    let s = Streams::new(place, true)?;
    let e = Events::new(place)?;
    let plan = step_plan();
    let counter = Arc::new(AtomicU64::new(0));
    let start_capture = Instant::now();
    let compute = &s.0[0];
    let graph = capture_step(&s.0, || step(&s, &e, &plan, &counter, false).map(drop))?;
    let capture_us = start_capture.elapsed().as_secs_f64() * 1e6;
    let us = replay_us(&graph, compute, steps)?;
    let expected = (steps as u64 + 10) * kernels_per_step(&plan);
    assert_eq!(
        counter.load(Ordering::Relaxed),
        expected,
        "every kernel ran"
    );
    Ok((us, capture_us))
}

/// ns per `wait_event` on pending events: each a new record (the wait is needed: issued with
/// elision on and off, so the difference is the tracker's cost), and the same event again (with
/// elision on: implied, elided). `None` where the place has no flags to hold the work.
fn micro(place: &Place, elide: bool) -> devstream::Result<Option<(f64, f64, bool)>> {
    const N: usize = 20_000;
    if !devstream::capabilities(place)?.flags {
        return Ok(None);
    }
    let a = Stream::new(place)?;
    let b = Stream::builder(place).elide_waits(elide).build()?;
    let gate = devstream::Flag::new(place)?;
    a.wait_flag(&gate, 1)?;
    let mut events = Vec::with_capacity(N);
    for _ in 0..N {
        a.launch_host_func(|| {})?;
        events.push(a.record_event()?);
    }
    let t = Instant::now();
    for e in &events {
        b.wait_event(e)?;
    }
    let needed = t.elapsed().as_nanos() as f64 / N as f64;
    let last = &events[N - 1];
    let elided0 = devstream::elide::elided_on_this_thread();
    // The better of 5 rounds: the repeated wait is short enough for preemption to dominate one.
    let again = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..N {
                b.wait_event(last)?;
            }
            Ok(t.elapsed().as_nanos() as f64 / N as f64)
        })
        .collect::<devstream::Result<Vec<f64>>>()?
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    let elided = devstream::elide::elided_on_this_thread() > elided0;
    gate.set(1);
    b.synchronize()?;
    a.synchronize()?;
    Ok(Some((needed, again, elided)))
}

fn main() -> devstream::Result<()> {
    let place: Place = arg("--place").unwrap_or_else(|| "cpu".into()).parse()?;
    let steps: usize = arg_or("--steps", 1000);
    println!(
        "bench-step on {place}: {steps} steps of the fixed DAG (devstream_bench::step_plan: 4 \
         streams, 200 kernels as tiny host functions, 40 cross-stream waits of which 10 \
         defensive, 8 event queries)"
    );
    println!(
        "{:<34} {:>12} {:>10} {:>10} {:>12}",
        "variant", "us/step", "ops/step", "elided", "calls/step"
    );
    // Interleaved rounds (on, off, on, off, ...): load on a shared machine favours neither;
    // the median round of each is reported.
    let rounds = 7;
    let mut results: [Vec<(f64, Counts, f64)>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (slot, elide) in [true, false].into_iter().enumerate() {
            results[slot].push(eager(&place, elide, steps)?);
        }
    }
    for (slot, elide) in [true, false].into_iter().enumerate() {
        let runs = &mut results[slot];
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (us, n, elided) = runs[runs.len() / 2];
        let best = runs[0].0;
        let ops = (n.kernels + n.records + n.waits + n.queries) as f64;
        println!(
            "{:<34} {:>12.1} {:>10} {:>10.1} {:>12.1}   (best of {rounds}: {best:.1})",
            format!("eager, elision {}", if elide { "on" } else { "off" }),
            us,
            ops,
            elided,
            ops - elided
        );
    }
    // Interleaved rounds (on, off, on, off, ...), the best of each kept: the first use of a
    // path (e.g. lavapipe's first submissions) favours neither side.
    let mut best: [Option<(f64, f64, bool)>; 2] = [None, None];
    for _ in 0..3 {
        for (slot, elide) in [true, false].into_iter().enumerate() {
            if let Some((needed, again, elided)) = micro(&place, elide)? {
                let (n, a, _) = best[slot].unwrap_or((f64::INFINITY, f64::INFINITY, elided));
                best[slot] = Some((n.min(needed), a.min(again), elided));
            }
        }
    }
    for (slot, elide) in [true, false].into_iter().enumerate() {
        if let Some((needed, again, elided)) = best[slot] {
            println!(
                "wait_event on pending work, elision {:<3}: {needed:>7.1} ns (new record each) \
                 {again:>7.1} ns (same event again{})   (best of 3)",
                if elide { "on" } else { "off" },
                if elided { ": elided" } else { ": issued" }
            );
        }
    }
    match captured(&place, steps) {
        Ok((us, capture_us)) => println!(
            "{:<34} {:>12.1} {:>10} {:>10} {:>12}   (capture took {capture_us:.0} us once)",
            "captured once, replayed", us, 1, "-", 1
        ),
        Err(e) => println!("captured: {e}"),
    }
    Ok(())
}
