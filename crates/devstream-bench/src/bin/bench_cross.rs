//! Waits across backends against host fences: hand-off latency per ordered pair of places, and
//! the throughput of small-chunk pipelines.
//!
//! **Hand-off latency.** For each ordered pair (producer place, consumer place) of different
//! backends, each sample gates the producer's stream with a `Flag`, queues a host function that
//! stamps the time it runs (the producer's last work: "the awaited work completes") and records
//! an event. With a *wait*, the consumer's stream waits on that event and its next work is a host
//! function that stamps the time it starts; with a *host fence*, a fence thread blocks in the
//! event's `synchronize` and then submits that host function. The gate opens 200 µs after the
//! setup (the fence thread is parked by then), and the latency is the second stamp minus the
//! first. Both run in the same process, alternating in blocks of 50; p50 and p99 per pair.
//! A second round makes the consumer's next work a flag write instead, stamped by a host
//! thread spinning on the flag: on CUDA and HIP a host function queued behind a wait is
//! started by the device some tens of microseconds after the wait ends, which the first round
//! counts in the hand-off and the second does not.
//!
//! **Pipeline throughput.** `examples/common/hetero.rs`: a CPU stream produces chunks, the
//! device stages transform them, a CPU stream checks them, handed on by waits or by host fences,
//! alternating in blocks; the median chunks per second of each. One pipeline per place
//! (`cpu → P → cpu`) and one per ordered pair of places of different backends
//! (`cpu → cuda:0 → wgpu:0 → cpu`).
//!
//! ```text
//! cargo xtask bench --backend cross                # cpu, wgpu:0 and the test plug-in places
//! bench-cross [--samples N] [--chunks N] [--chunk-kib N] [--slots N] [--blocks N]
//!             [--pipelines-only | --handoffs-only] [--places cpu,cuda:0,wgpu:0]
//! ```
//!
//! Rows (`DEVSTREAM_BENCH_JSON`): the wait's figure beside the fence's, as ns (latency, or time
//! per chunk), with the targets of the cross-backend issue: a wait no slower than a fence at
//! p50, and a pipeline at 1.5× the fenced throughput (time per chunk ≤ 1/1.5 of the fence's).

// The pipeline of `examples/hetero.rs`; the example's own choice of pipelines is not used here.
#[allow(dead_code)]
#[path = "../../../../examples/common/hetero.rs"]
mod hetero;

use devstream::{Event, Flag, Place, Stream};
use devstream_bench::{arg, arg_or, percentile, report, Row};
use hetero::{backend_key, Failure, Handoff, Pipeline};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Samples per mode before switching to the other.
const BLOCK: usize = 50;
/// Chunks in flight in the pipelines, unless `--slots` says otherwise.
const SLOTS: usize = 4;

/// A clock shared by the stamping host functions: nanoseconds since `base`.
#[derive(Clone)]
struct Clock {
    base: Instant,
}

impl Clock {
    /// A host function that stores the time it runs into `into`.
    fn stamp(&self, into: &Arc<AtomicU64>) -> impl FnMut() + Send + 'static {
        let (base, into) = (self.base, Arc::clone(into));
        move || into.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst)
    }
}

/// How the consumer's next work shows that it started.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stamp {
    /// A host function that stamps the time it runs (for a CUDA/HIP consumer this includes
    /// the runtime's start of a host function, which the device triggers after a wait).
    HostFunction,
    /// A flag write (a stream memory op on CUDA/HIP, in stream order everywhere) that a host
    /// thread spinning on the flag stamps when it sees it.
    FlagWrite,
}

/// What the fence thread is asked to do: block in the event's `synchronize`, then submit the
/// consumer's stamped work and wait for it.
struct FenceJob {
    awaited: Event,
    consumer: Stream,
    next: NextWork,
}

/// The consumer's next work of one sample.
#[derive(Clone)]
struct NextWork {
    stamp: Stamp,
    started: Arc<AtomicU64>,
    signal: Flag,
    value: u32,
    clock: Clock,
}

impl NextWork {
    /// Submits it to `consumer`.
    fn submit(&self, consumer: &Stream) -> devstream::Result<()> {
        match self.stamp {
            Stamp::HostFunction => consumer.launch_host_func(self.clock.stamp(&self.started)),
            Stamp::FlagWrite => consumer.write_flag(&self.signal, self.value),
        }
    }
}

/// One ordered pair under measurement.
struct Pair {
    producer: Stream,
    consumer: Stream,
    gate: Flag,
    /// Written by the consumer's next work in [`Stamp::FlagWrite`] samples.
    signal: Flag,
    value: u32,
    clock: Clock,
    completed: Arc<AtomicU64>,
    started: Arc<AtomicU64>,
    fence_jobs: Sender<FenceJob>,
    fence_done: Receiver<devstream::Result<()>>,
}

impl Pair {
    fn new(producer: &Place, consumer: &Place, clock: &Clock) -> devstream::Result<Pair> {
        let (fence_jobs, jobs) = channel::<FenceJob>();
        let (done, fence_done) = channel();
        std::thread::spawn(move || {
            for job in jobs {
                let result = job.awaited.synchronize().and_then(|()| {
                    job.next.submit(&job.consumer)?;
                    job.consumer.synchronize()
                });
                if done.send(result).is_err() {
                    return;
                }
            }
        });
        Ok(Pair {
            producer: Stream::new(producer)?,
            consumer: Stream::new(consumer)?,
            gate: Flag::new(producer)?,
            signal: Flag::new(consumer)?,
            value: 0,
            clock: clock.clone(),
            completed: Arc::new(AtomicU64::new(0)),
            started: Arc::new(AtomicU64::new(0)),
            fence_jobs,
            fence_done,
        })
    }

    /// One hand-off; answers its latency in ns.
    fn sample(&mut self, handoff: Handoff, stamp: Stamp) -> devstream::Result<f64> {
        self.value += 1;
        self.producer.wait_flag(&self.gate, self.value)?;
        self.producer
            .launch_host_func(self.clock.stamp(&self.completed))?;
        let awaited = self.producer.record_event()?;
        let next = NextWork {
            stamp,
            started: Arc::clone(&self.started),
            signal: self.signal.clone(),
            value: self.value,
            clock: self.clock.clone(),
        };
        // The host thread that stamps a flag write: it spins on the flag from now on.
        let watcher = (stamp == Stamp::FlagWrite).then(|| {
            let (signal, value, clock, started) = (
                self.signal.clone(),
                self.value,
                self.clock.clone(),
                Arc::clone(&self.started),
            );
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                while signal.get() < value && Instant::now() < deadline {
                    std::hint::spin_loop();
                }
                started.store(clock.base.elapsed().as_nanos() as u64, Ordering::SeqCst);
            })
        });
        match handoff {
            Handoff::Wait => {
                self.consumer.wait_event(&awaited)?;
                next.submit(&self.consumer)?;
            }
            Handoff::Fence => {
                let job = FenceJob {
                    awaited,
                    consumer: self.consumer.clone(),
                    next,
                };
                if self.fence_jobs.send(job).is_err() {
                    return Err(devstream::Error::InvalidArgument(
                        "the fence thread is gone".into(),
                    ));
                }
            }
        }
        std::thread::sleep(Duration::from_micros(200));
        self.gate.set(self.value);
        match handoff {
            Handoff::Wait => self.consumer.synchronize()?,
            Handoff::Fence => self.fence_done.recv().map_err(|_| {
                devstream::Error::InvalidArgument("the fence thread is gone".into())
            })??,
        }
        if let Some(watcher) = watcher {
            watcher.join().map_err(|_| {
                devstream::Error::InvalidArgument("the flag watcher panicked".into())
            })?;
        }
        let (completed, started) = (
            self.completed.load(Ordering::SeqCst),
            self.started.load(Ordering::SeqCst),
        );
        Ok(started.saturating_sub(completed) as f64)
    }
}

/// Whether `place` can take part in the hand-off measurement (gate, stamps, foreign waits).
fn can_hand_off(place: &Place) -> bool {
    devstream::capabilities(place).is_ok_and(|c| c.flags && c.host_funcs && c.foreign_waits)
}

fn handoffs(places: &[Place], samples: usize, rows: &mut Vec<Row>) -> Result<(), Failure> {
    let clock = Clock {
        base: Instant::now(),
    };
    for (stamp, what) in [
        (
            Stamp::HostFunction,
            "next work: a host function that stamps the time",
        ),
        (
            Stamp::FlagWrite,
            "next work: a flag write, stamped by a host thread spinning on the flag",
        ),
    ] {
        println!(
            "hand-off latency ({what}), {samples} samples per mode, alternating in blocks of \
             {BLOCK} (µs):"
        );
        for producer in places.iter().filter(|p| can_hand_off(p)) {
            for consumer in places.iter().filter(|p| can_hand_off(p)) {
                if backend_key(producer) == backend_key(consumer) {
                    continue;
                }
                let mut pair = Pair::new(producer, consumer, &clock)?;
                for handoff in [Handoff::Wait, Handoff::Fence] {
                    for _ in 0..BLOCK {
                        pair.sample(handoff, stamp)?; // warm-up
                    }
                }
                let (mut waits, mut fences) = (Vec::new(), Vec::new());
                while waits.len() < samples {
                    for _ in 0..BLOCK {
                        waits.push(pair.sample(Handoff::Wait, stamp)?);
                    }
                    for _ in 0..BLOCK {
                        fences.push(pair.sample(Handoff::Fence, stamp)?);
                    }
                }
                waits.sort_by(f64::total_cmp);
                fences.sort_by(f64::total_cmp);
                let name = format!("{producer} → {consumer}");
                let (w50, w99, f50, f99) = (
                    percentile(&waits, 0.5),
                    percentile(&waits, 0.99),
                    percentile(&fences, 0.5),
                    percentile(&fences, 0.99),
                );
                println!(
                    "  {name:<34} wait p50 {:>8.1} p99 {:>8.1}   host fence p50 {:>8.1} p99 \
                     {:>8.1}   p50 ratio {:.2}",
                    w50 / 1e3,
                    w99 / 1e3,
                    f50 / 1e3,
                    f99 / 1e3,
                    w50 / f50
                );
                let kind = match stamp {
                    Stamp::HostFunction => "",
                    Stamp::FlagWrite => " (flag write)",
                };
                for (label, ours, theirs) in [("p50", w50, f50), ("p99", w99, f99)] {
                    rows.push(Row {
                        backend: "cross",
                        op: format!("hand-off {label}{kind}: {name}"),
                        devstream_ns: ours,
                        baseline_ns: theirs,
                        baseline: "host fence: Event::synchronize, then submit",
                        target: 1.0,
                    });
                }
            }
        }
        println!();
    }
    Ok(())
}

/// The pipelines: each place alone, and each ordered pair of places of different backends.
fn pipeline_stages(places: &[Place]) -> Vec<Vec<Place>> {
    let devices: Vec<&Place> = places
        .iter()
        .filter(|p| **p != Place::Cpu && hetero::can_transform(p))
        .collect();
    let mut out: Vec<Vec<Place>> = devices.iter().map(|p| vec![(*p).clone()]).collect();
    for first in &devices {
        for second in &devices {
            if backend_key(first) != backend_key(second) {
                out.push(vec![(*first).clone(), (*second).clone()]);
            }
        }
    }
    out
}

fn pipelines(
    places: &[Place],
    chunks: u64,
    chunk_kib: usize,
    slots: usize,
    blocks: usize,
    rows: &mut Vec<Row>,
) -> Result<(), Failure> {
    println!(
        "\npipelines: {chunks} chunks of {chunk_kib} KiB per run, at most {slots} in flight, \
         {blocks} runs per mode alternating (median chunks/s):"
    );
    for stages in pipeline_stages(places) {
        let mut pipeline = Pipeline::new(&stages, chunk_kib * 1024, slots)?;
        pipeline.run(slots as u64 * 2, Handoff::Wait)?;
        pipeline.run(slots as u64 * 2, Handoff::Fence)?;
        let (mut waits, mut fences, mut submits) = (Vec::new(), Vec::new(), Vec::new());
        let mut parts = [0.0f64; 3];
        for _ in 0..blocks {
            waits.push(pipeline.run(chunks, Handoff::Wait)?.as_nanos() as f64 / chunks as f64);
            submits.push(pipeline.submit_time().as_nanos() as f64 / chunks as f64);
            for (sum, part) in parts.iter_mut().zip(pipeline.submit_parts()) {
                *sum += part.as_nanos() as f64 / chunks as f64 / blocks as f64;
            }
            fences.push(pipeline.run(chunks, Handoff::Fence)?.as_nanos() as f64 / chunks as f64);
        }
        waits.sort_by(f64::total_cmp);
        fences.sort_by(f64::total_cmp);
        submits.sort_by(f64::total_cmp);
        let (wait_ns, fence_ns) = (percentile(&waits, 0.5), percentile(&fences, 0.5));
        let name = pipeline.describe();
        // With waits the host never blocks: its submission time per chunk is the floor of
        // the pipeline's time per chunk.
        println!(
            "  {name:<40} waits {:>9.0} chunks/s   host fences {:>9.0} chunks/s   ratio {:.2}   \
             (waits: host submits {:.1} µs/chunk: produce {:.1}, devices {:.1}, consume {:.1})",
            1e9 / wait_ns,
            1e9 / fence_ns,
            fence_ns / wait_ns,
            percentile(&submits, 0.5) / 1e3,
            parts[0] / 1e3,
            parts[1] / 1e3,
            parts[2] / 1e3
        );
        rows.push(Row {
            backend: "cross",
            op: format!("pipeline ns/chunk: {name}"),
            devstream_ns: wait_ns,
            baseline_ns: fence_ns,
            baseline: "the same pipeline with host fences",
            target: 1.0 / 1.5,
        });
    }
    Ok(())
}

fn main() -> Result<(), Failure> {
    let quick = std::env::var_os("DEVSTREAM_BENCH_QUICK").is_some();
    let samples = arg_or("--samples", if quick { 200 } else { 1000 }).max(BLOCK);
    let chunks = arg_or("--chunks", if quick { 50 } else { 200 }).max(1);
    let chunk_kib = arg_or("--chunk-kib", 64usize);
    let blocks = arg_or("--blocks", if quick { 3 } else { 5 }).max(1);
    let slots = arg_or("--slots", SLOTS).max(1);
    let pipelines_only = std::env::args().any(|a| a == "--pipelines-only");
    let handoffs_only = std::env::args().any(|a| a == "--handoffs-only");
    let places: Vec<Place> = match arg("--places") {
        Some(list) => list
            .split(',')
            .map(str::parse)
            .collect::<devstream::Result<_>>()?,
        None => devstream::places(),
    };
    println!("places: {}\n", hetero::place_list(&places));
    let mut rows = Vec::new();
    if !pipelines_only {
        handoffs(&places, samples, &mut rows)?;
    }
    if !handoffs_only {
        pipelines(&places, chunks, chunk_kib, slots, blocks, &mut rows)?;
    }
    println!();
    report(&rows);
    Ok(())
}
