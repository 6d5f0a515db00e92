//! Instruction count of bench-wgpu's "record+query (after a 4-byte clear)" row. devstream's
//! path (`fill` 4 bytes, `record`, `Event::query`) and the raw-wgpu path (`clear_buffer`,
//! `submit`, `poll(Poll)`: [`Raw::record_query`]) each run `--n` times in a function of their
//! own, after `--warm` warm-up calls outside it, so that callgrind counts each side alone:
//!
//! ```text
//! cargo build --release -p devstream-bench --features wgpu --bin cost-wgpu-record-query
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*cost_dev_loop*' \
//!     target/release/cost-wgpu-record-query --side dev --n 1000 --warm 100
//! callgrind_annotate --inclusive=yes callgrind.out.<pid>
//! ```
//!
//! `--side` is `dev` (`cost_dev_loop`), `raw` (`cost_raw_loop`), `noted` (`cost_noted_loop`:
//! the raw path plus a per-submission `on_submitted_work_done` note, which is what answering
//! "is this submission complete", an event query, costs in raw wgpu:
//! [`Raw::record_query_noted`]) or `both` (dev and raw, the default). Without valgrind it
//! prints ns per call of each side, for a quick look.

use devstream::wgpu::WgpuStream;
use devstream::{DeviceBuffer, Event, EventFlags, Place, Stream};
use devstream_bench::arg_or;
use devstream_bench::wgpu_raw::Raw;
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

/// devstream's side once: the same calls as bench-wgpu's closure.
#[inline(always)]
fn dev_once(s: &Stream, scratch: &DeviceBuffer, event: &Event) -> bool {
    s.fill(scratch, 0, 4, 0).unwrap();
    s.record(event).unwrap();
    black_box(event.query().unwrap())
}

/// devstream's side, `n` times (the function callgrind's toggle names; warm-up calls
/// [`dev_once`] outside it).
#[inline(never)]
fn cost_dev_loop(n: usize, s: &Stream, scratch: &DeviceBuffer, event: &Event) -> usize {
    (0..n).filter(|_| dev_once(s, scratch, event)).count()
}

/// The raw side, `n` times.
#[inline(never)]
fn cost_raw_loop(n: usize, raw: &Raw) -> usize {
    (0..n).filter(|_| black_box(raw.record_query())).count()
}

/// The raw side answering per submission ([`Raw::record_query_noted`]), `n` times from `seq`.
#[inline(never)]
fn cost_noted_loop(n: usize, raw: &Raw, completed: &Arc<AtomicU64>, seq: &mut u64) -> usize {
    (0..n)
        .filter(|_| {
            *seq += 1;
            black_box(raw.record_query_noted(completed, *seq))
        })
        .count()
}

fn main() -> devstream::Result<()> {
    let n: usize = arg_or("--n", 200);
    let warm: usize = arg_or("--warm", 50);
    let side: String = arg_or("--side", "both".to_string());
    let place: Place = arg_or("--place", "wgpu:0".to_string()).parse()?;
    let s = Stream::new(&place)?;
    let ws: &WgpuStream = s.backend().expect("a wgpu stream");
    let raw = Raw::new(ws);
    let scratch = s.alloc(4)?;
    let event = Event::new(&place, EventFlags::default())?;
    let drain = || {
        s.synchronize().unwrap();
        raw.wait(raw.queue.submit([]));
    };
    if side == "both" || side == "dev" {
        for _ in 0..warm {
            dev_once(&s, &scratch, &event);
        }
        drain();
        let start = Instant::now();
        let done = cost_dev_loop(n, &s, &scratch, &event);
        let ns = start.elapsed().as_nanos() as f64 / n.max(1) as f64;
        drain();
        println!("devstream: {ns:.0} ns/call, {done}/{n} queries saw the work complete");
    }
    if side == "noted" {
        let completed = Arc::new(AtomicU64::new(0));
        let mut seq = 0;
        for _ in 0..warm {
            seq += 1;
            black_box(raw.record_query_noted(&completed, seq));
        }
        drain();
        let start = Instant::now();
        let done = cost_noted_loop(n, &raw, &completed, &mut seq);
        let ns = start.elapsed().as_nanos() as f64 / n.max(1) as f64;
        drain();
        println!("raw noted: {ns:.0} ns/call, {done}/{n} queries saw the submission complete");
    }
    if side == "both" || side == "raw" {
        for _ in 0..warm {
            black_box(raw.record_query());
        }
        drain();
        let start = Instant::now();
        let done = cost_raw_loop(n, &raw);
        let ns = start.elapsed().as_nanos() as f64 / n.max(1) as f64;
        drain();
        println!("raw wgpu:  {ns:.0} ns/call, {done}/{n} polls saw the queue empty");
    }
    Ok(())
}
