//! Instructions devstream adds around CUDA driver calls: one operation, on
//! one side, `--n` times inside an `#[inline(never)]` function of its own (after `--warm` calls
//! outside it), for callgrind to count with
//! `--collect-atstart=no --toggle-collect=*cost_<side>_loop*`.
//!
//! Sides: `dev` (devstream's call) and `raw` (the driver calls bench-cuda's baseline makes).
//! Ops: `record`, `wait_event` (streams without elision, as bench-cuda's row), `record_wait`
//! (a record then a needed wait, streams with elision, the default), `record_wait_off` (the same
//! on streams without elision), `wait_stream`, `query`,
//! `stream_create` (create + destroy), `event_create` (create + destroy).
//!
//! Run against the null driver (`crates/devstream-bench/null-cuda`, linked as `libcuda.so` in a
//! folder on `LD_LIBRARY_PATH`): no GPU is needed, and what the driver itself does is the same
//! few instructions on both sides.
//!
//! ```text
//! cost-cuda-ops --op wait_event --side dev [--n 1000] [--warm 100]
//! ```

use devstream::cuda::cudarc::driver::sys;
use devstream::{Event, EventFlags, Place, Stream};

const NON_BLOCKING: u32 = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
const NO_TIMING: u32 = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;

fn ok(result: sys::CUresult, call: &str) {
    assert_eq!(result, sys::CUresult::CUDA_SUCCESS, "{call}");
}

/// The devstream and raw objects of one measurement.
struct Objects {
    place: Place,
    /// Streams without elision (bench-cuda's per-call rows).
    s1: Stream,
    s2: Stream,
    /// Streams with elision (the default).
    t1: Stream,
    t2: Stream,
    event: Event,
    raw_s1: sys::CUstream,
    raw_s2: sys::CUstream,
    raw_event: sys::CUevent,
}

impl Objects {
    fn new() -> devstream::Result<Objects> {
        let place: Place = "cuda:0".parse()?;
        let s1 = Stream::builder(&place).elide_waits(false).build()?;
        let s2 = Stream::builder(&place).elide_waits(false).build()?;
        let t1 = Stream::new(&place)?;
        let t2 = Stream::new(&place)?;
        let event = Event::new(&place, EventFlags::default())?;
        s1.record(&event)?;
        let (mut raw_s1, mut raw_s2, mut raw_event) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        // SAFETY: devstream made the device's primary context current on this thread; the
        // out-pointers are valid; the objects live as long as `Objects` (never destroyed: the
        // process ends after one measurement).
        unsafe {
            ok(
                sys::cuStreamCreateWithPriority(&mut raw_s1, NON_BLOCKING, 0),
                "cuStreamCreateWithPriority",
            );
            ok(
                sys::cuStreamCreateWithPriority(&mut raw_s2, NON_BLOCKING, 0),
                "cuStreamCreateWithPriority",
            );
            ok(
                sys::cuEventCreate(&mut raw_event, NO_TIMING),
                "cuEventCreate",
            );
        }
        Ok(Objects {
            place,
            s1,
            s2,
            t1,
            t2,
            event,
            raw_s1,
            raw_s2,
            raw_event,
        })
    }

    fn dev_once(&self, op: &str) {
        match op {
            "record" => self.s1.record(&self.event).expect("record"),
            "wait_event" => self.s2.wait_event(&self.event).expect("wait_event"),
            "record_wait" => {
                self.event.record(&self.t1).expect("record");
                self.t2.wait_event(&self.event).expect("wait_event");
            }
            "record_wait_off" => {
                self.event.record(&self.s1).expect("record");
                self.s2.wait_event(&self.event).expect("wait_event");
            }
            "wait_stream" => self.s2.wait_stream(&self.s1).expect("wait_stream"),
            "query" => {
                std::hint::black_box(self.s1.query().expect("query"));
            }
            "stream_create" => drop(Stream::new(&self.place).expect("Stream::new")),
            "event_create" => {
                drop(Event::new(&self.place, EventFlags::default()).expect("Event::new"));
            }
            other => panic!("unknown op {other}"),
        }
    }

    fn raw_once(&self, op: &str) {
        // SAFETY: live streams and events of the current context; objects made here are
        // destroyed at once.
        unsafe {
            match op {
                "record" => ok(sys::cuEventRecord(self.raw_event, self.raw_s1), "record"),
                "wait_event" => ok(
                    sys::cuStreamWaitEvent(self.raw_s2, self.raw_event, 0),
                    "wait",
                ),
                "record_wait" | "record_wait_off" | "wait_stream" => {
                    ok(sys::cuEventRecord(self.raw_event, self.raw_s1), "record");
                    ok(
                        sys::cuStreamWaitEvent(self.raw_s2, self.raw_event, 0),
                        "wait",
                    );
                }
                "query" => {
                    std::hint::black_box(sys::cuStreamQuery(self.raw_s1));
                }
                "stream_create" => {
                    let mut s = std::ptr::null_mut();
                    ok(
                        sys::cuStreamCreateWithPriority(&mut s, NON_BLOCKING, 0),
                        "create",
                    );
                    ok(sys::cuStreamDestroy_v2(s), "destroy");
                }
                "event_create" => {
                    let mut e = std::ptr::null_mut();
                    ok(sys::cuEventCreate(&mut e, NO_TIMING), "create");
                    ok(sys::cuEventDestroy_v2(e), "destroy");
                }
                other => panic!("unknown op {other}"),
            }
        }
    }
}

#[inline(never)]
fn cost_dev_loop(objects: &Objects, op: &str, n: usize) {
    for _ in 0..n {
        objects.dev_once(std::hint::black_box(op));
    }
}

#[inline(never)]
fn cost_raw_loop(objects: &Objects, op: &str, n: usize) {
    for _ in 0..n {
        objects.raw_once(std::hint::black_box(op));
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> devstream::Result<()> {
    let op = arg("--op").unwrap_or_else(|| "wait_event".into());
    let side = arg("--side").unwrap_or_else(|| "dev".into());
    let n: usize = arg("--n").and_then(|s| s.parse().ok()).unwrap_or(1000);
    let warm: usize = arg("--warm").and_then(|s| s.parse().ok()).unwrap_or(100);
    let objects = Objects::new()?;
    match side.as_str() {
        "dev" => {
            for _ in 0..warm {
                objects.dev_once(&op);
            }
            cost_dev_loop(&objects, &op, n);
        }
        "raw" => {
            for _ in 0..warm {
                objects.raw_once(&op);
            }
            cost_raw_loop(&objects, &op, n);
        }
        other => panic!("unknown side {other}"),
    }
    println!("{op} {side}: {n} calls");
    Ok(())
}
