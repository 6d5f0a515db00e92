//! Wake latency of an awaited completion against a thread blocked in `synchronize`.
//!
//! Each sample gates a stream with a `Flag`, queues a host function that stamps the time it
//! runs (the last work of the stream: "the work completes"), lets a waiter thread block (the
//! baseline: in `stream.synchronize()`; async: a task awaiting `stream.completion()` or
//! `event.completion()` on a current-thread tokio runtime, or on a minimal `Wake` + park
//! executor; a second baseline blocks in `Event::synchronize` of a `blocking_sync` event, which
//! on CUDA sleeps where a stream synchronize may spin), waits 300 µs so that the waiter is parked, then opens the gate. The latency is from
//! the host function's stamp to the moment the waiter runs again (the blocked thread returns
//! from `synchronize`, the task is polled to completion). Prints p50 and p99 per waiter and the
//! ratio to the blocking figure (goal: ≤ 1.5), as rows for `DEVSTREAM_BENCH_JSON` too.
//!
//! ```text
//! cargo run --release -p devstream-bench --bin bench-wake [--features wgpu|cuda] -- \
//!     [--place cpu|wgpu:0|cuda:0] [--samples N]
//! ```

use devstream::{Completion, Event, EventFlags, Flag, Place, Result, Stream};
use devstream_bench::{report, Row};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// What a waiter thread is asked to wait for.
enum Job {
    Sync(Stream),
    SyncEvent(Event),
    Await(Completion),
}

#[derive(Clone, Copy, PartialEq)]
enum Waiter {
    Blocking,
    /// A thread blocked in `Event::synchronize` of a `blocking_sync` event (on CUDA, a
    /// `CU_EVENT_BLOCKING_SYNC` event: the thread sleeps instead of spinning).
    BlockingEvent,
    Tokio,
    Minimal,
}

/// The minimal executor: unpark the polling thread.
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

fn minimal_block_on(mut future: Completion) -> Result<()> {
    let unpark = Arc::new(Unpark {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(result) = Pin::new(&mut future).poll(&mut cx) {
            return result;
        }
        while !unpark.woken.swap(false, Ordering::SeqCst) {
            std::thread::park();
        }
    }
}

/// A waiter thread: runs each job and answers the nanoseconds (since `base`) at which it ran on.
fn spawn_waiter(kind: Waiter, base: Instant) -> (Sender<Job>, Receiver<Result<u64>>) {
    let (jobs, job_rx) = channel::<Job>();
    let (done_tx, done) = channel::<Result<u64>>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime");
        for job in job_rx {
            let result = match (job, kind) {
                (Job::Sync(stream), _) => stream.synchronize(),
                (Job::SyncEvent(event), _) => event.synchronize(),
                (Job::Await(completion), Waiter::Tokio) => runtime.block_on(completion),
                (Job::Await(completion), _) => minimal_block_on(completion),
            };
            let now = base.elapsed().as_nanos() as u64;
            if done_tx.send(result.map(|()| now)).is_err() {
                return;
            }
        }
    });
    (jobs, done)
}

struct Samples(Vec<f64>);

impl Samples {
    fn percentile(&mut self, p: f64) -> f64 {
        self.0.sort_by(|a, b| a.total_cmp(b));
        let index = ((self.0.len() as f64 - 1.0) * p).round() as usize;
        self.0[index]
    }
}

/// One waiter under measurement: its stream, gate, waiter thread and samples so far.
struct Probe {
    waiter: Waiter,
    event: bool,
    stream: Stream,
    flag: Flag,
    base: Instant,
    jobs: Sender<Job>,
    done: Receiver<Result<u64>>,
    stamp: Arc<AtomicU64>,
    value: u32,
    samples: Samples,
}

impl Probe {
    fn new(place: &Place, waiter: Waiter, event: bool) -> Result<Probe> {
        let base = Instant::now();
        let (jobs, done) = spawn_waiter(waiter, base);
        Ok(Probe {
            waiter,
            event,
            stream: Stream::new(place)?,
            flag: Flag::new(place)?,
            base,
            jobs,
            done,
            stamp: Arc::new(AtomicU64::new(0)),
            value: 0,
            samples: Samples(Vec::new()),
        })
    }

    /// One sample: gate, stamp, let the waiter block, open the gate, note the latency.
    fn sample(&mut self, keep: bool) -> Result<()> {
        self.value += 1;
        let value = self.value;
        self.stream.wait_flag(&self.flag, value)?;
        let (stamp, base) = (self.stamp.clone(), self.base);
        self.stream.launch_host_func(move || {
            stamp.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst)
        })?;
        let job = match self.waiter {
            Waiter::Blocking => Job::Sync(self.stream.clone()),
            Waiter::BlockingEvent => {
                let flags = EventFlags {
                    blocking_sync: true,
                    ..EventFlags::default()
                };
                let event = Event::new(self.stream.place(), flags)?;
                event.record(&self.stream)?;
                Job::SyncEvent(event)
            }
            _ if self.event => Job::Await(self.stream.record_event()?.completion()),
            _ => Job::Await(self.stream.completion()),
        };
        self.jobs.send(job).expect("the waiter thread");
        // Long enough for the waiter to be parked (a blocked `synchronize` spins a few µs first).
        std::thread::sleep(Duration::from_micros(300));
        self.flag.set(value);
        let ran = self.done.recv().expect("the waiter thread")?;
        let completed = self.stamp.load(Ordering::SeqCst);
        if keep {
            self.samples.0.push(ran.saturating_sub(completed) as f64);
        }
        Ok(())
    }
}

/// Every waiter, measured in interleaved blocks (load drifting over the run favours none).
fn measure(place: &Place, samples: usize) -> Result<Vec<(&'static str, Samples)>> {
    const BLOCK: usize = 50;
    let kinds = [
        (
            Waiter::Blocking,
            false,
            "thread blocked in Stream::synchronize",
        ),
        (
            Waiter::BlockingEvent,
            false,
            "thread blocked in Event::synchronize (blocking_sync)",
        ),
        (
            Waiter::Tokio,
            false,
            "Stream::completion, tokio current-thread",
        ),
        (
            Waiter::Tokio,
            true,
            "Event::completion, tokio current-thread",
        ),
        (
            Waiter::Minimal,
            false,
            "Stream::completion, minimal executor",
        ),
    ];
    let mut probes = kinds
        .iter()
        .map(|&(waiter, event, _)| Probe::new(place, waiter, event))
        .collect::<Result<Vec<_>>>()?;
    for probe in &mut probes {
        for _ in 0..BLOCK {
            probe.sample(false)?; // warm-up
        }
    }
    for _ in 0..samples.div_ceil(BLOCK) {
        for probe in &mut probes {
            for _ in 0..BLOCK {
                probe.sample(true)?;
            }
        }
    }
    Ok(kinds
        .iter()
        .zip(probes)
        .map(|(&(_, _, name), probe)| (name, probe.samples))
        .collect())
}

fn main() -> Result<()> {
    let mut place = Place::Cpu;
    let mut samples = 2000;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--place" => place = args.next().unwrap_or_default().parse()?,
            "--samples" => {
                samples = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(samples)
                    .max(10)
            }
            other => {
                eprintln!(
                    "unknown argument {other:?}; usage: bench-wake [--place P] [--samples N]"
                );
                std::process::exit(2);
            }
        }
    }
    let caps = devstream::capabilities(&place)?;
    if !caps.flags || !caps.host_funcs {
        eprintln!("{place} has no flags or no host functions: nothing to gate deterministically");
        std::process::exit(2);
    }
    let backend = match place.backend().name() {
        "cpu" => "cpu",
        "cuda" => "cuda",
        "hip" => "hip",
        "wgpu" => "wgpu",
        _ => "plugin",
    };
    println!("wake latency on {place}, {samples} samples each, interleaved in blocks (µs):");
    let mut measured = measure(&place, samples)?.into_iter();
    // Prints a baseline waiter's row; answers its p50 and p99 (ns).
    let mut baseline = |what: &str| {
        let (name, mut s) = measured.next().expect(what);
        let (p50, p99) = (s.percentile(0.5), s.percentile(0.99));
        println!(
            "  {name:<52} p50 {:>8.1}  p99 {:>8.1}",
            p50 / 1e3,
            p99 / 1e3
        );
        (p50, p99)
    };
    let (b50, b99) = baseline("the blocking waiter");
    let (e50, e99) = baseline("the blocking_sync waiter");
    let mut rows = Vec::new();
    for (name, mut s) in measured {
        let (p50, p99) = (s.percentile(0.5), s.percentile(0.99));
        println!(
            "  {name:<52} p50 {:>8.1}  p99 {:>8.1}   ratio to Stream::synchronize: p50 {:.2}  \
             p99 {:.2}; to blocking_sync: p50 {:.2}  p99 {:.2}",
            p50 / 1e3,
            p99 / 1e3,
            p50 / b50,
            p99 / b99,
            p50 / e50,
            p99 / e99
        );
        for (label, ours, theirs, baseline) in [
            ("p50", p50, b50, "thread blocked in Stream::synchronize"),
            ("p99", p99, b99, "thread blocked in Stream::synchronize"),
            (
                "p50",
                p50,
                e50,
                "thread blocked in a blocking_sync Event::synchronize",
            ),
            (
                "p99",
                p99,
                e99,
                "thread blocked in a blocking_sync Event::synchronize",
            ),
        ] {
            rows.push(Row {
                backend,
                op: format!("wake {label}: {name}"),
                devstream_ns: ours,
                baseline_ns: theirs,
                baseline,
                target: 1.5,
            });
        }
    }
    println!();
    report(&rows);
    Ok(())
}
