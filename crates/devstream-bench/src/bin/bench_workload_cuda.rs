//! CUDA halves of the workload benchmarks, for the GPU machine.
//!
//! * `step`: the fixed DAG of [`devstream_bench::step_plan`] (4 streams, 200 `noop` PTX
//!   kernels, 40 cross-stream waits of which 10 defensive, 8 event queries) run `--steps` times
//!   (default 1,000): devstream eager with redundant-wait elision on and off, devstream captured
//!   once and replayed, and the same DAG written by hand with raw `cudarc::driver::sys` calls
//!   (eager, and captured into a `CUgraphExec` replayed with `cuGraphLaunch`), in one process.
//!   Reported: µs per step (submission of `--steps` steps plus the final synchronize; the
//!   eager variants alternate over 7 rounds, median shown) and driver calls per step.
//! * `priority`: background streams at `Priority::Normal` kept full of `spin` kernels that
//!   cover the device (`--blocks` blocks of 128 threads, `--spin-us` each); a probe stream
//!   launches a `noop` kernel every millisecond and polls an event after it. The probe's
//!   latency (launch → event complete) at p50 / p99 with the probe at `Priority::High` and at
//!   `Priority::Normal`. The defaults (32,768 blocks of 50 µs: about 16 waves per kernel on an
//!   H100) model framework kernels, which are many short blocks: a GPU never preempts a running
//!   block, so a high-priority probe waits for blocks to finish, and with one wave of long blocks
//!   (`--blocks 2048 --spin-us 500`) High can only cut the wait to one block's length.
//!
//! ```text
//! bench-workload-cuda [step|priority|all] [--steps 1000] [--probes 1000] [--blocks 32768] [--spin-us 50]
//! ```

use devstream::cuda::cudarc::driver::sys;
use devstream::cuda::{ptx, CudaKernel, CudaStream, KernelArg, LaunchConfig};
use devstream::{Error, Event, EventFlags, Place, Priority, Stream};
use devstream_bench::{
    arg, arg_or, capture_step, print_priority, replay_us, run_on_device, step_plan, StepOp,
    STEP_EVENTS, STEP_STREAMS,
};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

const NON_BLOCKING: u32 = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
const NO_TIMING: u32 = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;

/// Panics with the call name on a failed raw call (a benchmark has nothing to recover).
fn raw(result: sys::CUresult, call: &str) {
    assert_eq!(result, sys::CUresult::CUDA_SUCCESS, "{call} failed");
}

/// Launches the parameterless `noop` kernel on a devstream CUDA stream.
fn noop_on(stream: &Stream, noop: &CudaKernel) -> devstream::Result<()> {
    let cuda: &CudaStream = stream
        .backend()
        .ok_or(Error::InvalidArgument("not a CUDA stream".into()))?;
    // SAFETY: `noop` takes no parameters.
    unsafe {
        cuda.launch_kernel(
            noop,
            LaunchConfig::for_elements(1, 1),
            &[] as &[KernelArg<'_, _>],
        )
    }
}

/// One step through devstream; returns the calls it made (kernels, records, waits, queries).
fn devstream_step(
    streams: &[Stream],
    events: &[Event],
    plan: &[StepOp],
    noop: &CudaKernel,
    query: bool,
) -> devstream::Result<u64> {
    let mut calls = 0;
    for op in plan {
        match *op {
            StepOp::Kernel(s) => noop_on(&streams[s], noop)?,
            StepOp::Record { event, stream } => events[event].record(&streams[stream])?,
            StepOp::Wait { stream, event } => streams[stream].wait_event(&events[event])?,
            StepOp::Query(event) => {
                if !query {
                    continue;
                }
                std::hint::black_box(events[event].query()?);
            }
        }
        calls += 1;
    }
    Ok(calls)
}

/// The raw objects of the hand-written step.
struct RawStep {
    streams: [sys::CUstream; STEP_STREAMS],
    events: Vec<sys::CUevent>,
    noop: sys::CUfunction,
}

impl RawStep {
    fn new(noop: sys::CUfunction) -> RawStep {
        let mut streams = [std::ptr::null_mut(); STEP_STREAMS];
        let mut events = vec![std::ptr::null_mut(); STEP_EVENTS];
        // SAFETY: a context is current (devstream bound its primary context on this thread);
        // the out-pointers are valid.
        unsafe {
            for s in &mut streams {
                raw(
                    sys::cuStreamCreateWithPriority(s, NON_BLOCKING, 0),
                    "cuStreamCreateWithPriority",
                );
            }
            for e in &mut events {
                raw(sys::cuEventCreate(e, NO_TIMING), "cuEventCreate");
            }
        }
        RawStep {
            streams,
            events,
            noop,
        }
    }

    /// One step by hand: exactly the plan's calls, nothing else.
    fn step(&self, plan: &[StepOp], query: bool) {
        // SAFETY: live streams, events and kernel of the current context; `noop` takes no
        // parameters.
        unsafe {
            for op in plan {
                match *op {
                    StepOp::Kernel(s) => raw(
                        sys::cuLaunchKernel(
                            self.noop,
                            1,
                            1,
                            1,
                            1,
                            1,
                            1,
                            0,
                            self.streams[s],
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                        ),
                        "cuLaunchKernel",
                    ),
                    StepOp::Record { event, stream } => raw(
                        sys::cuEventRecord(self.events[event], self.streams[stream]),
                        "cuEventRecord",
                    ),
                    StepOp::Wait { stream, event } => raw(
                        sys::cuStreamWaitEvent(self.streams[stream], self.events[event], 0),
                        "cuStreamWaitEvent",
                    ),
                    StepOp::Query(event) => {
                        if query {
                            std::hint::black_box(sys::cuEventQuery(self.events[event]));
                        }
                    }
                }
            }
        }
    }

    fn synchronize(&self) {
        for s in self.streams {
            // SAFETY: live stream.
            raw(
                unsafe { sys::cuStreamSynchronize(s) },
                "cuStreamSynchronize",
            );
        }
    }

    /// The step captured by hand (fork from stream 0, join back) into an executable graph.
    fn capture(&self, plan: &[StepOp]) -> (sys::CUgraph, sys::CUgraphExec) {
        let mut graph = std::ptr::null_mut();
        let mut exec = std::ptr::null_mut();
        let mut fork = std::ptr::null_mut();
        let mut joins = [std::ptr::null_mut(); STEP_STREAMS];
        // SAFETY: live objects of the current context; out-pointers are valid.
        unsafe {
            raw(sys::cuEventCreate(&mut fork, NO_TIMING), "cuEventCreate");
            for j in &mut joins {
                raw(sys::cuEventCreate(j, NO_TIMING), "cuEventCreate");
            }
            let s0 = self.streams[0];
            raw(
                sys::cuStreamBeginCapture_v2(
                    s0,
                    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                ),
                "cuStreamBeginCapture",
            );
            raw(sys::cuEventRecord(fork, s0), "cuEventRecord");
            for &s in &self.streams[1..] {
                raw(sys::cuStreamWaitEvent(s, fork, 0), "cuStreamWaitEvent");
            }
            self.step(plan, false);
            for (i, &s) in self.streams.iter().enumerate().skip(1) {
                raw(sys::cuEventRecord(joins[i], s), "cuEventRecord");
                raw(sys::cuStreamWaitEvent(s0, joins[i], 0), "cuStreamWaitEvent");
            }
            raw(
                sys::cuStreamEndCapture(s0, &mut graph),
                "cuStreamEndCapture",
            );
            raw(
                sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0),
                "cuGraphInstantiate",
            );
            raw(sys::cuEventDestroy_v2(fork), "cuEventDestroy");
            for j in joins {
                raw(sys::cuEventDestroy_v2(j), "cuEventDestroy");
            }
        }
        (graph, exec)
    }
}

impl Drop for RawStep {
    fn drop(&mut self) {
        // SAFETY: ours; synchronized before the drop.
        unsafe {
            for &e in &self.events {
                raw(sys::cuEventDestroy_v2(e), "cuEventDestroy");
            }
            for &s in &self.streams {
                raw(sys::cuStreamDestroy_v2(s), "cuStreamDestroy");
            }
        }
    }
}

fn us_per(start: Instant, n: usize) -> f64 {
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

fn step_bench(place: &Place, steps: usize) -> devstream::Result<()> {
    let module = ptx::load(place)?;
    let noop = module.function("noop")?;
    let plan = step_plan();
    let ops = plan.len();
    println!(
        "bench-step (CUDA) on {place}: {steps} steps of devstream_bench::step_plan ({ops} ops: \
         200 noop kernels, 80 records, 40 waits of which 10 defensive, 8 event queries)"
    );
    println!(
        "{:<40} {:>10} {:>12} {:>8}",
        "variant", "us/step", "calls/step", "ratio"
    );
    // Raw eager is the baseline every row is divided by. The three eager variants run in
    // rounds (median of ROUNDS) whose order rotates, so that clock and queue warm-up favour
    // none of them (one pass each in a fixed order put whichever ran first 3-8% behind).
    const ROUNDS: usize = 7;
    let raw_step = RawStep::new(noop.raw_handle().0.cast());
    let measure_raw = || {
        for _ in 0..10 {
            raw_step.step(&plan, true);
        }
        raw_step.synchronize();
        let t = Instant::now();
        for _ in 0..steps {
            raw_step.step(&plan, true);
        }
        raw_step.synchronize();
        us_per(t, steps)
    };
    let mut variants = Vec::new();
    for elide in [true, false] {
        let streams: Vec<Stream> = (0..STEP_STREAMS)
            .map(|_| Stream::builder(place).elide_waits(elide).build())
            .collect::<Result<_, _>>()?;
        let events: Vec<Event> = (0..STEP_EVENTS)
            .map(|_| Event::new(place, EventFlags::default()))
            .collect::<Result<_, _>>()?;
        variants.push((elide, streams, events));
    }
    let measure_devstream = |streams: &[Stream],
                             events: &[Event]|
     -> devstream::Result<(f64, f64)> {
        for _ in 0..10 {
            devstream_step(streams, events, &plan, &noop, true)?;
        }
        for s in streams {
            s.synchronize()?;
        }
        let elided0 = devstream::elide::elided_on_this_thread();
        let t = Instant::now();
        let mut calls = 0;
        for _ in 0..steps {
            calls = devstream_step(streams, events, &plan, &noop, true)?;
        }
        for s in streams {
            s.synchronize()?;
        }
        let us = us_per(t, steps);
        let elided = (devstream::elide::elided_on_this_thread() - elided0) as f64 / steps as f64;
        Ok((us, calls as f64 - elided))
    };
    let mut raw_rounds = Vec::new();
    let mut ds_rounds = vec![Vec::new(); variants.len()];
    let mut ds_calls = vec![0.0; variants.len()];
    // Each round starts at another variant (raw, on, off; then on, off, raw; ...), so that no
    // variant always follows the same one.
    let kinds = variants.len() + 1;
    for round in 0..ROUNDS {
        for k in 0..kinds {
            match (round + k) % kinds {
                0 => raw_rounds.push(measure_raw()),
                v => {
                    let (_, streams, events) = &variants[v - 1];
                    let (us, calls) = measure_devstream(streams, events)?;
                    ds_rounds[v - 1].push(us);
                    ds_calls[v - 1] = calls;
                }
            }
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let raw_us = median(raw_rounds);
    let mut rows: Vec<(String, f64, f64)> = vec![("raw driver, eager".into(), raw_us, ops as f64)];
    for (i, (elide, _, _)) in variants.iter().enumerate() {
        rows.push((
            format!(
                "devstream eager, elision {}",
                if *elide { "on" } else { "off" }
            ),
            median(ds_rounds[i].clone()),
            ds_calls[i],
        ));
    }
    // Raw graph replay.
    let (graph, exec) = raw_step.capture(&plan);
    let s0 = raw_step.streams[0];
    let launch = || {
        // SAFETY: live executable graph and stream.
        raw(unsafe { sys::cuGraphLaunch(exec, s0) }, "cuGraphLaunch");
    };
    for _ in 0..10 {
        launch();
    }
    raw_step.synchronize();
    let t = Instant::now();
    for _ in 0..steps {
        launch();
    }
    raw_step.synchronize();
    let raw_graph_us = us_per(t, steps);
    // devstream captured once, replayed.
    let streams: Vec<Stream> = (0..STEP_STREAMS)
        .map(|_| Stream::new(place))
        .collect::<Result<_, _>>()?;
    let events: Vec<Event> = (0..STEP_EVENTS)
        .map(|_| Event::new(place, EventFlags::default()))
        .collect::<Result<_, _>>()?;
    let ds_graph = capture_step(&streams, || {
        devstream_step(&streams, &events, &plan, &noop, false).map(drop)
    })?;
    let ds_graph_us = replay_us(&ds_graph, &streams[0], steps)?;
    for (name, us, calls) in &rows {
        println!(
            "{:<40} {:>10.1} {:>12.1} {:>8.3}",
            name,
            us,
            calls,
            us / raw_us
        );
    }
    println!(
        "{:<40} {:>10.1} {:>12} {:>8}",
        "raw cuGraphLaunch replay", raw_graph_us, 1, "-"
    );
    println!(
        "{:<40} {:>10.1} {:>12} {:>8.3}   (ratio to raw cuGraphLaunch)",
        "devstream captured once, replayed",
        ds_graph_us,
        1,
        ds_graph_us / raw_graph_us
    );
    // SAFETY: ours; the launches were synchronized.
    unsafe {
        raw(sys::cuGraphExecDestroy(exec), "cuGraphExecDestroy");
        raw(sys::cuGraphDestroy(graph), "cuGraphDestroy");
    }
    Ok(())
}

/// Probe latencies (µs, sorted) with the probe stream at `probe_priority`.
fn priority_run(
    place: &Place,
    probe_priority: Priority,
    probes: usize,
    blocks: u32,
    spin_cycles: u64,
    module: &devstream::cuda::CudaModule,
) -> devstream::Result<Vec<f64>> {
    let spin = module.function("spin")?;
    let noop = module.function("noop")?;
    let background: Vec<Stream> = (0..4)
        .map(|_| Stream::builder(place).priority(Priority::Normal).build())
        .collect::<Result<_, _>>()?;
    let probe = Stream::builder(place).priority(probe_priority).build()?;
    let mut inflight: Vec<VecDeque<Event>> = vec![VecDeque::new(); background.len()];
    let depth = 4;
    let top_up = |inflight: &mut Vec<VecDeque<Event>>| -> devstream::Result<()> {
        for (s, queue) in background.iter().zip(inflight.iter_mut()) {
            while queue.front().map(|e| e.query()).transpose()? == Some(true) {
                queue.pop_front();
            }
            while queue.len() < depth {
                let cuda: &CudaStream = s
                    .backend()
                    .ok_or(Error::InvalidArgument("not a CUDA stream".into()))?;
                // SAFETY: `spin` takes one u64 (cycles).
                unsafe {
                    cuda.launch_kernel(
                        &spin,
                        LaunchConfig {
                            grid: (blocks, 1, 1),
                            block: (128, 1, 1),
                            shared_mem_bytes: 0,
                        },
                        &[KernelArg::U64(spin_cycles)],
                    )?;
                }
                queue.push_back(s.record_event()?);
            }
        }
        Ok(())
    };
    top_up(&mut inflight)?;
    std::thread::sleep(Duration::from_millis(5));
    let done = Event::new(place, EventFlags::default())?;
    let mut latencies = Vec::with_capacity(probes);
    let start = Instant::now();
    for k in 0..probes {
        top_up(&mut inflight)?;
        let due = start + Duration::from_millis(k as u64);
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        noop_on(&probe, &noop)?;
        done.record(&probe)?;
        while !done.query()? {
            std::hint::spin_loop();
        }
        latencies.push(t.elapsed().as_secs_f64() * 1e6);
    }
    for s in &background {
        s.synchronize()?;
    }
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

fn priority_bench(
    place: &Place,
    probes: usize,
    blocks: u32,
    spin_us: u64,
) -> devstream::Result<()> {
    let module = ptx::load(place)?;
    // Calibrate: cycles per µs from one timed spin kernel.
    let s = Stream::new(place)?;
    let spin = module.function("spin")?;
    let cuda: &CudaStream = s
        .backend()
        .ok_or(Error::InvalidArgument("not CUDA".into()))?;
    let (a, b) = (
        Event::new(place, EventFlags::timed())?,
        Event::new(place, EventFlags::timed())?,
    );
    a.record(&s)?;
    let cycles = 100_000_000u64;
    // SAFETY: `spin` takes one u64.
    unsafe {
        cuda.launch_kernel(
            &spin,
            LaunchConfig::for_elements(1, 1),
            &[KernelArg::U64(cycles)],
        )?;
    }
    b.record(&s)?;
    s.synchronize()?;
    let per_us = cycles as f64 / (a.elapsed(&b)?.as_secs_f64() * 1e6);
    let spin_cycles = (per_us * spin_us as f64) as u64;
    let range = devstream::priority_range(place)?;
    println!(
        "bench-priority (CUDA) on {place}: range {range:?}; 4 background streams at Normal, 4 \
         spin kernels of {blocks} x 128 threads x {spin_us} us ({spin_cycles} cycles) queued \
         each; a noop probe every 1 ms, {probes} probes; latency = launch -> event complete"
    );
    let high = priority_run(place, Priority::High, probes, blocks, spin_cycles, &module)?;
    let normal = priority_run(
        place,
        Priority::Normal,
        probes,
        blocks,
        spin_cycles,
        &module,
    )?;
    print_priority(&high, &normal);
    Ok(())
}

fn run() -> devstream::Result<()> {
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let place: Place = arg("--place").unwrap_or_else(|| "cuda:0".into()).parse()?;
    if what == "step" || what == "all" {
        step_bench(&place, arg_or("--steps", 1000))?;
    }
    if what == "priority" || what == "all" {
        priority_bench(
            &place,
            arg_or("--probes", 1000),
            arg_or("--blocks", 32768),
            arg_or("--spin-us", 50),
        )?;
    }
    Ok(())
}

fn main() {
    run_on_device("CUDA", run);
}
