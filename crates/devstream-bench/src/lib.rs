//! Shared measuring helpers for devstream's benchmark binaries.
//!
//! Each binary prints one line per operation: the devstream cost, the raw/baseline cost and
//! their ratio, and writes the same rows as JSON lines when `DEVSTREAM_BENCH_JSON` names a file.

use std::time::Instant;

#[cfg(feature = "wgpu")]
pub mod wgpu_raw;

/// Nanoseconds per call of `f`, the median of `rounds` rounds of `iters` calls each
/// (after one warm-up round).
pub fn ns_per_op(rounds: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters.min(1000) {
        f();
    }
    let mut samples: Vec<f64> = (0..rounds.max(1))
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

/// devstream's and the baseline's cost of one operation, measured in `blocks` interleaved
/// blocks (devstream, baseline, baseline, devstream; the better of each side kept per block), and
/// the block with the median ratio reported: drift or bursts of load on the machine favour
/// neither side, and one disturbed block cannot decide the ratio.
///
/// ```
/// let (ours, theirs) = devstream_bench::interleaved(3, &mut || 10.0, &mut || 8.0);
/// assert_eq!((ours, theirs), (10.0, 8.0));
/// ```
pub fn interleaved(
    blocks: usize,
    ours: &mut dyn FnMut() -> f64,
    theirs: &mut dyn FnMut() -> f64,
) -> (f64, f64) {
    let mut pairs: Vec<(f64, f64)> = (0..blocks.max(1))
        .map(|_| {
            let (a1, b1) = (ours(), theirs());
            let (b2, a2) = (theirs(), ours());
            (a1.min(a2), b1.min(b2))
        })
        .collect();
    pairs.sort_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
    pairs[pairs.len() / 2]
}

/// One measured row.
#[derive(Clone, Debug)]
pub struct Row {
    /// Backend name.
    pub backend: &'static str,
    /// Operation name.
    pub op: String,
    /// devstream's cost, ns/op.
    pub devstream_ns: f64,
    /// The baseline's cost, ns/op.
    pub baseline_ns: f64,
    /// What the baseline is.
    pub baseline: &'static str,
    /// The target ratio (devstream / baseline) this row is held to.
    pub target: f64,
}

impl Row {
    /// devstream / baseline.
    pub fn ratio(&self) -> f64 {
        self.devstream_ns / self.baseline_ns
    }
}

/// Prints rows as a table and, if `DEVSTREAM_BENCH_JSON` is set, appends them as JSON lines to
/// that file.
pub fn report(rows: &[Row]) {
    println!(
        "{:<8} {:<40} {:>12} {:>12} {:>7} {:>7}  baseline",
        "backend", "op", "devstream ns", "baseline ns", "ratio", "target"
    );
    for r in rows {
        let mark = if r.ratio() <= r.target { "ok" } else { "MISS" };
        println!(
            "{:<8} {:<40} {:>12.1} {:>12.1} {:>7.3} {:>7.2}  {} {}",
            r.backend,
            r.op,
            r.devstream_ns,
            r.baseline_ns,
            r.ratio(),
            r.target,
            r.baseline,
            mark
        );
    }
    if let Ok(path) = std::env::var("DEVSTREAM_BENCH_JSON") {
        use std::io::Write;
        let mut out = String::new();
        for r in rows {
            out.push_str(&format!(
                "{{\"backend\":\"{}\",\"op\":\"{}\",\"devstream_ns\":{:.2},\"baseline_ns\":{:.2},\"ratio\":{:.4},\"target\":{},\"baseline\":\"{}\"}}\n",
                r.backend, r.op, r.devstream_ns, r.baseline_ns, r.ratio(), r.target, r.baseline
            ));
        }
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            let _ = f.write_all(out.as_bytes());
        }
    }
}

/// One operation of the `bench-step` DAG (see [`step_plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOp {
    /// A tiny kernel on stream `.0`.
    Kernel(usize),
    /// Records event slot `event` on `stream`.
    Record {
        /// Event slot.
        event: usize,
        /// Stream index.
        stream: usize,
    },
    /// `stream` waits for event slot `event`.
    Wait {
        /// Stream index.
        stream: usize,
        /// Event slot.
        event: usize,
    },
    /// Queries event slot `.0` from the host.
    Query(usize),
}

/// Streams of the step: compute, copy in, copy out, side.
pub const STEP_STREAMS: usize = 4;
/// Phases of the step (each: 5 kernels, 2 records, 1 wait).
pub const STEP_PHASES: usize = 40;
/// Event slots of the step: a copy-in and a compute event per phase.
pub const STEP_EVENTS: usize = 2 * STEP_PHASES;

/// The fixed DAG of one training-like step, the same for every backend and for the raw
/// baselines: 4 streams (0 compute, 1 copy in, 2 copy out, 3 side), 200 kernels, 80 records,
/// 40 cross-stream waits (10 of them defensive repeats of a wait the compute stream already
/// made), 8 host queries of events.
///
/// ```
/// use devstream_bench::{step_plan, StepOp};
/// let plan = step_plan();
/// let count = |f: fn(&StepOp) -> bool| plan.iter().filter(|op| f(op)).count();
/// assert_eq!(count(|op| matches!(op, StepOp::Kernel(_))), 200);
/// assert_eq!(count(|op| matches!(op, StepOp::Wait { .. })), 40);
/// assert_eq!(count(|op| matches!(op, StepOp::Query(_))), 8);
/// ```
pub fn step_plan() -> Vec<StepOp> {
    const COMPUTE: usize = 0;
    const COPY_IN: usize = 1;
    const COPY_OUT: usize = 2;
    const SIDE: usize = 3;
    let copy_in = |i: usize| i;
    let compute = |i: usize| STEP_PHASES + i;
    let mut plan = Vec::new();
    for i in 0..STEP_PHASES {
        plan.push(StepOp::Kernel(COPY_IN));
        plan.push(StepOp::Record {
            event: copy_in(i),
            stream: COPY_IN,
        });
        plan.push(match i % 4 {
            0 => StepOp::Wait {
                stream: COMPUTE,
                event: copy_in(i),
            },
            1 => StepOp::Wait {
                stream: COPY_OUT,
                event: compute(i - 1),
            },
            2 => StepOp::Wait {
                stream: SIDE,
                event: compute(i - 1),
            },
            // Defensive: the compute stream waits again for the copy it waited for 3 phases ago.
            _ => StepOp::Wait {
                stream: COMPUTE,
                event: copy_in(i - 3),
            },
        });
        for _ in 0..3 {
            plan.push(StepOp::Kernel(COMPUTE));
        }
        plan.push(StepOp::Record {
            event: compute(i),
            stream: COMPUTE,
        });
        plan.push(StepOp::Kernel(if i % 2 == 0 { COPY_OUT } else { SIDE }));
        if i % 5 == 0 {
            plan.push(StepOp::Query(compute(i)));
        }
    }
    plan
}

/// The value after `flag` on the command line (`--place cuda:0`).
pub fn arg(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The value after `flag` parsed, or `default` (also when it does not parse).
pub fn arg_or<T: std::str::FromStr>(flag: &str, default: T) -> T {
    arg(flag).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The `p` quantile (0..=1) of sorted samples (NaN when empty).
///
/// ```
/// assert_eq!(devstream_bench::percentile(&[1.0, 2.0, 3.0], 0.5), 2.0);
/// ```
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Prints the probe latencies (µs, sorted) of a priority experiment: p50, p99 and max with the
/// probe at High and at Normal, and the p99 ratio.
pub fn print_priority(high: &[f64], normal: &[f64]) {
    println!(
        "{:<22} {:>10} {:>10} {:>10}",
        "probe stream", "p50 us", "p99 us", "max us"
    );
    for (name, l) in [("Priority::High", high), ("Priority::Normal", normal)] {
        println!(
            "{:<22} {:>10.1} {:>10.1} {:>10.1}",
            name,
            percentile(l, 0.5),
            percentile(l, 0.99),
            percentile(l, 1.0)
        );
    }
    println!(
        "p99 Normal / High = {:.1}x   p50 Normal / High = {:.1}x",
        percentile(normal, 0.99) / percentile(high, 0.99),
        percentile(normal, 0.5) / percentile(high, 0.5)
    );
}

/// Captures one step on `streams[0]`: the other streams fork from it, `body` submits the
/// step, they join back; returns the graph.
pub fn capture_step(
    streams: &[devstream::Stream],
    body: impl FnOnce() -> devstream::Result<()>,
) -> devstream::Result<devstream::Graph> {
    let first = &streams[0];
    first.begin_capture(devstream::CaptureMode::ThreadLocal)?;
    let fork = first.record_event()?;
    for s in &streams[1..] {
        s.wait_event(&fork)?;
    }
    body()?;
    for s in &streams[1..] {
        first.wait_stream(s)?;
    }
    first.end_capture()
}

/// µs per launch of `graph` on `stream` over `launches` launches (after 10 warm-up launches),
/// the final synchronize included.
pub fn replay_us(
    graph: &devstream::Graph,
    stream: &devstream::Stream,
    launches: usize,
) -> devstream::Result<f64> {
    for _ in 0..10 {
        graph.launch(stream)?;
    }
    stream.synchronize()?;
    let start = Instant::now();
    for _ in 0..launches {
        graph.launch(stream)?;
    }
    stream.synchronize()?;
    Ok(start.elapsed().as_secs_f64() * 1e6 / launches as f64)
}

/// Runs a GPU benchmark: a missing runtime or device is a line on stdout (nothing to
/// measure here), any other error exits with status 1.
pub fn run_on_device(what: &str, run: impl FnOnce() -> devstream::Result<()>) {
    match run() {
        Ok(()) => {}
        Err(
            e @ (devstream::Error::BackendUnavailable { .. } | devstream::Error::NoDevice { .. }),
        ) => {
            println!("no {what} device here, nothing to measure: {e}");
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
