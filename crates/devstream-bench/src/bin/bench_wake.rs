//! Wake latency of an awaited completion against a thread blocked in `synchronize`.
//!
//! Each sample gates a stream with a `Flag`, queues a host function that stamps the time it
//! runs (the last work of the stream: "the work completes"), lets a waiter thread block (the
//! baseline: in `stream.synchronize()`; async: a task awaiting `stream.completion()` or
//! `event.completion()` on a current-thread tokio runtime, or on a minimal `Wake` + park
//! executor), waits 300 µs so that the waiter is parked, then opens the gate. The latency is from
//! the host function's stamp to the moment the waiter runs again (the blocked thread returns
//! from `synchronize`, the task is polled to completion). Prints p50 and p99 per waiter and the
//! ratio to the blocking figure (goal: ≤ 1.5), as rows for `DEVSTREAM_BENCH_JSON` too.
//!
//! ```text
//! cargo run --release -p devstream-bench --bin bench-wake [--features wgpu|cuda] -- \
//!     [--place cpu|wgpu:0|cuda:0] [--samples N]
//! ```

use devstream::{Completion, Flag, Place, Result, Stream};
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
    Await(Completion),
}

#[derive(Clone, Copy, PartialEq)]
enum Waiter {
    Blocking,
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

/// `samples` wake latencies (ns) of `waiter` waiting for `what` (stream or event completion).
fn measure(place: &Place, waiter: Waiter, event: bool, samples: usize) -> Result<Samples> {
    let stream = Stream::new(place)?;
    let flag = Flag::new(place)?;
    let base = Instant::now();
    let (jobs, done) = spawn_waiter(waiter, base);
    let stamp = Arc::new(AtomicU64::new(0));
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + samples / 10 {
        let value = i as u32 + 1;
        stream.wait_flag(&flag, value)?;
        let s = stamp.clone();
        stream.launch_host_func(move || {
            s.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst)
        })?;
        let job = match waiter {
            Waiter::Blocking => Job::Sync(stream.clone()),
            _ if event => Job::Await(stream.record_event()?.completion()),
            _ => Job::Await(stream.completion()),
        };
        jobs.send(job).expect("the waiter thread");
        // Long enough for the waiter to be parked (a blocked `synchronize` spins a few µs first).
        std::thread::sleep(Duration::from_micros(300));
        flag.set(value);
        let ran = done.recv().expect("the waiter thread")?;
        let completed = stamp.load(Ordering::SeqCst);
        if i >= samples / 10 {
            // The first tenth warms up.
            out.push(ran.saturating_sub(completed) as f64);
        }
    }
    Ok(Samples(out))
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
    println!("wake latency on {place}, {samples} samples each (µs):");
    let mut blocking = measure(&place, Waiter::Blocking, false, samples)?;
    let (b50, b99) = (blocking.percentile(0.5), blocking.percentile(0.99));
    println!(
        "  {:<44} p50 {:>8.1}  p99 {:>8.1}",
        "thread blocked in Stream::synchronize",
        b50 / 1e3,
        b99 / 1e3
    );
    let mut rows = Vec::new();
    for (waiter, event, name) in [
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
    ] {
        let mut s = measure(&place, waiter, event, samples)?;
        let (p50, p99) = (s.percentile(0.5), s.percentile(0.99));
        println!(
            "  {name:<44} p50 {:>8.1}  p99 {:>8.1}   ratio to blocking: p50 {:.2}  p99 {:.2}",
            p50 / 1e3,
            p99 / 1e3,
            p50 / b50,
            p99 / b99
        );
        for (label, ours, theirs) in [("p50", p50, b50), ("p99", p99, b99)] {
            rows.push(Row {
                backend,
                op: format!("wake {label}: {name}"),
                devstream_ns: ours,
                baseline_ns: theirs,
                baseline: "thread blocked in synchronize",
                target: 1.5,
            });
        }
    }
    println!();
    report(&rows);
    Ok(())
}
