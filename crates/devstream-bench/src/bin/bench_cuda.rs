//! CUDA backend cost per operation: each op through the devstream facade (`Stream`, `Event`,
//! `Graph`: what users call) beside the same raw driver call through `cudarc::driver::sys` on
//! raw objects created the same way, in one process.
//!
//! ```text
//! cargo xtask bench --backend cuda     # or: cargo run --release -p devstream-bench --features cuda --bin bench-cuda [-- --quick]
//! ```
//!
//! Target: devstream ≤ 1.05× the raw driver call for every row.

use devstream::cuda::cudarc::driver::sys;
use devstream::cuda::{ptx, CudaStream, KernelArg, LaunchConfig};
use devstream::{CaptureMode, Event, EventFlags, Place, Stream};
use devstream_bench::{ns_per_op, report, Row};
use std::ffi::c_void;
use std::time::Instant;

const TARGET: f64 = 1.05;
const RAW: &str = "cudarc::driver::sys";

/// Panics with the call name on a failed raw call (a benchmark has nothing to recover).
fn raw(result: sys::CUresult, call: &str) {
    assert_eq!(result, sys::CUresult::CUDA_SUCCESS, "{call} failed");
}

unsafe extern "C" fn noop_host(_: *mut c_void) {}

/// A host function that, like any real one, reads what the launcher wrote and writes back.
///
/// # Safety
/// `data` points to a live `AtomicU64`.
unsafe extern "C" fn payload_host(data: *mut c_void) {
    // SAFETY: per this function's contract.
    let counter = unsafe { &*data.cast::<std::sync::atomic::AtomicU64>() };
    counter.fetch_add(1, std::sync::atomic::Ordering::Release);
}

/// The minimal hand-written Rust wrapper: a boxed closure, run and freed by the callback.
///
/// # Safety
/// `data` comes from `Box::into_raw(Box<Box<dyn FnMut() + Send>>)` and is used once.
unsafe extern "C" fn boxed_host(data: *mut c_void) {
    // SAFETY: per this function's contract.
    let mut f = unsafe { Box::from_raw(data.cast::<Box<dyn FnMut() + Send>>()) };
    f();
}

/// Raw driver objects made the same way devstream makes its own (non-blocking streams of
/// default priority, events without timing), alive until the value drops. Its methods are the
/// single raw calls the baseline rows time.
struct Raw {
    s1: sys::CUstream,
    s2: sys::CUstream,
    event: sys::CUevent,
    sync: sys::CUevent,
}

impl Raw {
    fn new() -> Raw {
        let mut r = Raw {
            s1: std::ptr::null_mut(),
            s2: std::ptr::null_mut(),
            event: std::ptr::null_mut(),
            sync: std::ptr::null_mut(),
        };
        // SAFETY: a context is current (devstream bound its primary context on this thread);
        // the out-pointers are valid.
        unsafe {
            raw(
                sys::cuStreamCreateWithPriority(&mut r.s1, NON_BLOCKING, 0),
                "cuStreamCreateWithPriority",
            );
            raw(
                sys::cuStreamCreateWithPriority(&mut r.s2, NON_BLOCKING, 0),
                "cuStreamCreateWithPriority",
            );
            raw(sys::cuEventCreate(&mut r.event, NO_TIMING), "cuEventCreate");
            raw(sys::cuEventCreate(&mut r.sync, NO_TIMING), "cuEventCreate");
        }
        r
    }
    fn record(&self) {
        // SAFETY: live event and stream of one context.
        raw(
            unsafe { sys::cuEventRecord(self.event, self.s1) },
            "cuEventRecord",
        );
    }
    fn wait_event(&self) {
        // SAFETY: live event and stream.
        raw(
            unsafe { sys::cuStreamWaitEvent(self.s2, self.event, 0) },
            "cuStreamWaitEvent",
        );
    }
    fn wait_stream(&self) {
        // SAFETY: live events and streams of one context.
        unsafe {
            raw(sys::cuEventRecord(self.sync, self.s1), "cuEventRecord");
            raw(
                sys::cuStreamWaitEvent(self.s2, self.sync, 0),
                "cuStreamWaitEvent",
            );
        }
    }
    fn query(&self) {
        // SAFETY: live stream.
        raw(unsafe { sys::cuStreamQuery(self.s1) }, "cuStreamQuery");
    }
    fn synchronize(&self) {
        // SAFETY: live streams.
        unsafe {
            raw(sys::cuStreamSynchronize(self.s1), "cuStreamSynchronize");
            raw(sys::cuStreamSynchronize(self.s2), "cuStreamSynchronize");
        }
    }
    fn synchronize_s1(&self) {
        // SAFETY: live stream.
        raw(
            unsafe { sys::cuStreamSynchronize(self.s1) },
            "cuStreamSynchronize",
        );
    }
    fn host_func_round_trip(&self) {
        // SAFETY: live stream; the host function ignores its (null) data.
        unsafe {
            raw(
                sys::cuLaunchHostFunc(self.s1, Some(noop_host), std::ptr::null_mut()),
                "cuLaunchHostFunc",
            );
            raw(sys::cuStreamSynchronize(self.s1), "cuStreamSynchronize");
        }
    }
    fn stream_create_destroy() {
        let mut s: sys::CUstream = std::ptr::null_mut();
        // SAFETY: a context is current; the stream is destroyed at once.
        unsafe {
            raw(
                sys::cuStreamCreateWithPriority(&mut s, NON_BLOCKING, 0),
                "cuStreamCreateWithPriority",
            );
            raw(sys::cuStreamDestroy_v2(s), "cuStreamDestroy");
        }
    }
    fn event_create_destroy() {
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: a context is current; the event is destroyed at once.
        unsafe {
            raw(sys::cuEventCreate(&mut e, NO_TIMING), "cuEventCreate");
            raw(sys::cuEventDestroy_v2(e), "cuEventDestroy");
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        self.synchronize();
        // SAFETY: our objects, no work pending.
        unsafe {
            raw(sys::cuEventDestroy_v2(self.event), "cuEventDestroy");
            raw(sys::cuEventDestroy_v2(self.sync), "cuEventDestroy");
            raw(sys::cuStreamDestroy_v2(self.s1), "cuStreamDestroy");
            raw(sys::cuStreamDestroy_v2(self.s2), "cuStreamDestroy");
        }
    }
}

/// A captured graph of 1000 noop kernels, made with raw calls.
struct RawGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl RawGraph {
    fn capture(stream: sys::CUstream, kernel: sys::CUfunction) -> RawGraph {
        let mut g = RawGraph {
            graph: std::ptr::null_mut(),
            exec: std::ptr::null_mut(),
        };
        // SAFETY: capture on a live stream of the current context; the kernel takes no
        // parameters; out-pointers are valid.
        unsafe {
            raw(
                sys::cuStreamBeginCapture_v2(
                    stream,
                    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                ),
                "cuStreamBeginCapture",
            );
            for _ in 0..1000 {
                raw(
                    sys::cuLaunchKernel(
                        kernel,
                        1,
                        1,
                        1,
                        1,
                        1,
                        1,
                        0,
                        stream,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    ),
                    "cuLaunchKernel",
                );
            }
            raw(
                sys::cuStreamEndCapture(stream, &mut g.graph),
                "cuStreamEndCapture",
            );
            raw(
                sys::cuGraphInstantiateWithFlags(&mut g.exec, g.graph, 0),
                "cuGraphInstantiate",
            );
        }
        g
    }
    fn launch(&self, stream: sys::CUstream) {
        // SAFETY: live executable graph and stream of one device.
        raw(
            unsafe { sys::cuGraphLaunch(self.exec, stream) },
            "cuGraphLaunch",
        );
    }
}

impl Drop for RawGraph {
    fn drop(&mut self) {
        // SAFETY: ours; launches were synchronized.
        unsafe {
            raw(sys::cuGraphExecDestroy(self.exec), "cuGraphExecDestroy");
            raw(sys::cuGraphDestroy(self.graph), "cuGraphDestroy");
        }
    }
}

const NON_BLOCKING: u32 = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
const NO_TIMING: u32 = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;

fn main() {
    devstream_bench::run_on_device("CUDA", run);
}

fn run() -> devstream::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = if quick { 10 } else { 1 };
    let rounds = if quick { 3 } else { 9 };
    let place: Place = "cuda:0".parse()?;
    let range = devstream::priority_range(&place)?;
    let version = devstream::cuda::driver_version()?;
    println!(
        "devstream bench-cuda on {place}: driver {}.{}, priority range least={} greatest={}",
        version / 1000,
        version % 1000 / 10,
        range.least,
        range.greatest
    );

    // devstream objects (this also makes the device's primary context current here). The
    // per-call rows compare the same driver calls: their streams do not elide waits (a repeated
    // wait on one event would be elided, see the elision rows below).
    let s1 = Stream::builder(&place).elide_waits(false).build()?;
    let s2 = Stream::builder(&place).elide_waits(false).build()?;
    let e = Event::new(&place, EventFlags::default())?;
    s1.record(&e)?;
    s1.synchronize()?;
    // raw objects made the same way
    let r = Raw::new();
    r.record();
    r.synchronize();

    let n = 20_000 / scale;
    let mut rows = Vec::new();
    let mut row = |op: &str, (ours, theirs): (f64, f64)| {
        rows.push(Row {
            backend: "cuda",
            op: op.to_string(),
            devstream_ns: ours,
            baseline_ns: theirs,
            baseline: RAW,
            target: TARGET,
        })
    };

    // devstream and raw are measured in interleaved blocks (ours, raw, raw, ours), and the block
    // with the median ratio is kept, so drift or bursts of load favour neither side.
    let blocks = if quick { 1 } else { 7 };
    let pair = |ours: &mut dyn FnMut() -> f64, theirs: &mut dyn FnMut() -> f64| {
        devstream_bench::interleaved(blocks, ours, theirs)
    };

    row(
        "record_event (cuEventRecord)",
        pair(
            &mut || ns_per_op(rounds, n, || s1.record(&e).expect("record")),
            &mut || ns_per_op(rounds, n, || r.record()),
        ),
    );
    s1.synchronize()?;
    r.synchronize();

    row(
        "wait_event (cuStreamWaitEvent)",
        pair(
            &mut || ns_per_op(rounds, n, || s2.wait_event(&e).expect("wait_event")),
            &mut || ns_per_op(rounds, n, || r.wait_event()),
        ),
    );

    row(
        "wait_stream (record + wait)",
        pair(
            &mut || ns_per_op(rounds, n, || s2.wait_stream(&s1).expect("wait_stream")),
            &mut || ns_per_op(rounds, n, || r.wait_stream()),
        ),
    );
    s1.synchronize()?;
    s2.synchronize()?;
    r.synchronize();

    // Redundant-wait elision (streams with the default, elision on): the tracking cost on a
    // record followed by a needed wait, and a repeated (implied) wait against the raw call it
    // saves.
    let t1 = Stream::new(&place)?;
    let t2 = Stream::new(&place)?;
    let te = Event::new(&place, EventFlags::default())?;
    row(
        "elision on: record + needed wait_event",
        pair(
            &mut || {
                ns_per_op(rounds, n, || {
                    te.record(&t1).expect("record");
                    t2.wait_event(&te).expect("wait_event");
                })
            },
            &mut || {
                ns_per_op(rounds, n, || {
                    r.record();
                    r.wait_event();
                })
            },
        ),
    );
    row(
        "elision on: implied wait_event (elided)",
        pair(
            &mut || ns_per_op(rounds, n, || t2.wait_event(&te).expect("wait_event")),
            &mut || ns_per_op(rounds, n, || r.wait_event()),
        ),
    );
    t1.synchronize()?;
    t2.synchronize()?;
    r.synchronize();

    row(
        "query idle (cuStreamQuery)",
        pair(
            &mut || ns_per_op(rounds, n, || assert!(s1.query().expect("query"))),
            &mut || ns_per_op(rounds, n, || r.query()),
        ),
    );

    row(
        "synchronize idle (cuStreamSynchronize)",
        pair(
            &mut || ns_per_op(rounds, n, || s1.synchronize().expect("synchronize")),
            &mut || ns_per_op(rounds, n, || r.synchronize_s1()),
        ),
    );

    let m = 5_000 / scale;
    row(
        "host func round trip (launch + sync)",
        pair(
            &mut || {
                ns_per_op(rounds, m, || {
                    s1.launch_host_func(|| {}).expect("launch_host_func");
                    s1.synchronize().expect("synchronize");
                })
            },
            &mut || ns_per_op(rounds, m, || r.host_func_round_trip()),
        ),
    );

    // Diagnostics for the round trip (printed, not targets): what a host function that
    // touches launcher-written data costs through the raw call, and what the minimal Rust
    // wrapper (a boxed closure per launch) costs, beside devstream and the null-data floor.
    if std::env::var_os("DEVSTREAM_BENCH_HOSTFN_DIAG").is_some() {
        let counter = std::sync::atomic::AtomicU64::new(0);
        let payload = || {
            ns_per_op(rounds, m, || {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // SAFETY: live stream; `counter` outlives the synchronize below.
                unsafe {
                    raw(
                        sys::cuLaunchHostFunc(
                            r.s1,
                            Some(payload_host),
                            std::ptr::from_ref(&counter).cast_mut().cast(),
                        ),
                        "cuLaunchHostFunc",
                    );
                    raw(sys::cuStreamSynchronize(r.s1), "cuStreamSynchronize");
                }
            })
        };
        let boxed = || {
            ns_per_op(rounds, m, || {
                let f: Box<dyn FnMut() + Send> = Box::new(|| {});
                let data = Box::into_raw(Box::new(f)).cast();
                // SAFETY: live stream; `boxed_host` takes ownership of `data` once.
                unsafe {
                    raw(
                        sys::cuLaunchHostFunc(r.s1, Some(boxed_host), data),
                        "cuLaunchHostFunc",
                    );
                    raw(sys::cuStreamSynchronize(r.s1), "cuStreamSynchronize");
                }
            })
        };
        let ours = || {
            ns_per_op(rounds, m, || {
                s1.launch_host_func(|| {}).expect("launch_host_func");
                s1.synchronize().expect("synchronize");
            })
        };
        let floor = || ns_per_op(rounds, m, || r.host_func_round_trip());
        for block in 0..blocks {
            println!(
                "hostfn diagnostic block {block}: null-data raw {:.0} ns, raw with payload {:.0} ns, \
                 raw with a boxed closure {:.0} ns, devstream {:.0} ns",
                floor(),
                payload(),
                boxed(),
                ours()
            );
        }
    }

    // A graph of 1000 noop kernels, launched 20 times per sample; per kernel.
    let module = ptx::load(&place)?;
    let noop = module.function("noop")?;
    let cuda_s1: &CudaStream = s1.backend().expect("a CUDA stream");
    s1.begin_capture(CaptureMode::ThreadLocal)?;
    for _ in 0..1000 {
        // SAFETY: `noop` takes no parameters.
        unsafe {
            cuda_s1.launch_kernel(
                &noop,
                LaunchConfig::for_elements(1, 1),
                &[] as &[KernelArg<'_, _>],
            )?
        };
    }
    let graph = s1.end_capture()?;
    let raw_graph = RawGraph::capture(r.s1, noop.raw_handle().0.cast());
    let launches = 20;
    let graph_rounds = if quick { 2 } else { 5 };
    row(
        "graph launch, per kernel of 1000 noops",
        pair(
            &mut || {
                ns_per_op(graph_rounds, 1, || {
                    for _ in 0..launches {
                        graph.launch(&s1).expect("graph launch");
                    }
                    s1.synchronize().expect("synchronize");
                }) / (launches as f64 * 1000.0)
            },
            &mut || {
                ns_per_op(graph_rounds, 1, || {
                    for _ in 0..launches {
                        raw_graph.launch(r.s1);
                    }
                    r.synchronize_s1();
                }) / (launches as f64 * 1000.0)
            },
        ),
    );

    let c = 2_000 / scale;
    row(
        "stream create + destroy",
        pair(
            &mut || ns_per_op(rounds, c, || drop(Stream::new(&place).expect("stream"))),
            &mut || ns_per_op(rounds, c, Raw::stream_create_destroy),
        ),
    );
    // What `torch.cuda.Stream()` does (a stream from a lazily created pool), for the peer
    // comparison; no raw call is the same, so it is printed, not a target row.
    let pooled = ns_per_op(rounds, n, || {
        drop(Stream::from_pool(&place, devstream::Priority::Normal).expect("pooled stream"))
    });
    println!(
        "(stream from the pool, Stream::from_pool, as torch.cuda.Stream() does: {pooled:.1} ns)"
    );
    row(
        "event create + destroy",
        pair(
            &mut || {
                ns_per_op(rounds, n, || {
                    drop(Event::new(&place, EventFlags::default()).expect("event"))
                })
            },
            &mut || ns_per_op(rounds, n, Raw::event_create_destroy),
        ),
    );

    // Beside the table: end-to-end kernel launch through devstream.
    let k = 20_000 / scale;
    let start = Instant::now();
    for _ in 0..k {
        // SAFETY: `noop` takes no parameters.
        unsafe {
            cuda_s1.launch_kernel(
                &noop,
                LaunchConfig::for_elements(1, 1),
                &[] as &[KernelArg<'_, _>],
            )?
        };
    }
    s1.synchronize()?;
    println!(
        "(kernel launch through devstream, end to end: {:.1} ns/kernel over {k})",
        start.elapsed().as_nanos() as f64 / k as f64
    );

    report(&rows);
    drop(raw_graph);
    drop(r);
    Ok(())
}
