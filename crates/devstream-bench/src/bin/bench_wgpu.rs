//! wgpu backend cost per operation through the devstream facade, beside the same work written
//! with raw wgpu on the same device and queue, in one process.
//!
//! ```text
//! cargo xtask bench --backend wgpu   # or: cargo run --release -p devstream-bench --bin bench-wgpu --features wgpu
//! ```
//!
//! Rows (target: devstream ≤ 1.05× raw):
//! * empty submit+wait: an empty command buffer submitted and waited for
//!   (`WgpuStream::flush` + `Stream::synchronize` vs `Queue::submit` + `Device::poll(Wait)`);
//! * record+query: a 4-byte clear, then an event recorded and queried
//!   (`fill` + `record` + `Event::query` vs `clear_buffer` + `submit` + `poll(Poll)`), and
//!   again against raw wgpu that answers per submission as an event query must (the same plus
//!   an `on_submitted_work_done` note per submission; `poll(Poll)` alone only says whether the
//!   whole queue is idle, which other submitters can keep false);
//! * small dispatch+readback: 256 bytes uploaded, a WGSL kernel dispatched, the result copied
//!   back and read on the host (staging upload, compute pass, `MAP_READ` readback, map, read).
//!
//! `DEVSTREAM_WGPU_BENCH_PLACE=wgpu:1` picks another adapter.

use devstream::wgpu::{WgpuBuffer, WgpuKernel, WgpuStream};
use devstream::{Event, EventFlags, Place, Stream};
use devstream_bench::wgpu_raw::{Raw, DOUBLE_WGSL, WORDS};
use devstream_bench::{ns_per_op, report, Row};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

const TARGET: f64 = 1.05;
/// The plain baseline: the same work through raw wgpu.
const RAW: &str = "raw wgpu, same device and queue";

fn main() -> devstream::Result<()> {
    let quick = std::env::var_os("DEVSTREAM_BENCH_QUICK").is_some();
    let (rounds, iters) = if quick { (3, 100) } else { (7, 300) };
    let place: Place = std::env::var("DEVSTREAM_WGPU_BENCH_PLACE")
        .unwrap_or_else(|_| "wgpu:0".into())
        .parse()?;
    let s = match Stream::new(&place) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bench-wgpu: no {place} here ({e})");
            std::process::exit(1);
        }
    };
    let ws: &WgpuStream = s.backend().expect("a wgpu stream");
    let info = ws.wgpu_device().adapter_info().clone();
    eprintln!(
        "bench-wgpu on {place}: {} ({:?}, {:?}, driver {} {})",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    );
    let raw = Raw::new(ws);
    let mut rows = Vec::new();
    let mut row = |op: &str, devstream_ns: f64, baseline_ns: f64, baseline: &'static str| {
        rows.push(Row {
            backend: "wgpu",
            op: op.to_string(),
            devstream_ns,
            baseline_ns,
            baseline,
            target: TARGET,
        })
    };

    // Drain the queue after each side so that neither inherits the other's backlog.
    let drain = || {
        s.synchronize().unwrap();
        raw.wait(raw.queue.submit([]));
    };
    // Each pair (devstream, raw) is measured back to back; the pair with the median ratio is
    // reported, so a change of machine load between pairs does not skew the ratio.
    let measure = |f_dev: &mut dyn FnMut(), f_raw: &mut dyn FnMut()| {
        let mut pairs = Vec::new();
        for _ in 0..5 {
            let dev = ns_per_op(rounds, iters, &mut *f_dev);
            drain();
            let base = ns_per_op(rounds, iters, &mut *f_raw);
            drain();
            pairs.push((dev, base));
        }
        pairs.sort_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
        pairs[pairs.len() / 2]
    };

    // Empty submit + wait.
    let (d, b) = measure(
        &mut || {
            ws.flush().unwrap();
            s.synchronize().unwrap();
        },
        &mut || raw.empty_submit_wait(),
    );
    row("empty submit+wait", d, b, RAW);

    // Record + query after a tiny clear.
    let scratch = s.alloc(4)?;
    let event = Event::new(&place, EventFlags::default())?;
    let mut record_query = || {
        s.fill(&scratch, 0, 4, 0).unwrap();
        s.record(&event).unwrap();
        black_box(event.query().unwrap());
    };
    let (d, b) = measure(&mut record_query, &mut || {
        black_box(raw.record_query());
    });
    row("record+query (after a 4-byte clear)", d, b, RAW);
    // The same against raw wgpu answering what an event query answers: whether *this*
    // submission is done (a per-submission `on_submitted_work_done` note, as devstream's
    // scheduler registers), not whether the whole queue is idle.
    let completed = Arc::new(AtomicU64::new(0));
    let seq = Cell::new(0u64);
    let (d, b) = measure(&mut record_query, &mut || {
        seq.set(seq.get() + 1);
        black_box(raw.record_query_noted(&completed, seq.get()));
    });
    row(
        "record+query (raw noted per submission)",
        d,
        b,
        "raw wgpu + on_submitted_work_done per submission",
    );

    // Small dispatch + readback.
    let kernel = WgpuKernel::new(ws, DOUBLE_WGSL, "double")?;
    let input = s.alloc(WORDS * 4)?;
    let output = s.alloc(WORDS * 4)?;
    let host = s.alloc_host(WORDS * 4)?;
    let data: Vec<u8> = (0..WORDS as u32).flat_map(|w| w.to_le_bytes()).collect();
    let mut out_dev = vec![0u8; WORDS * 4];
    let mut out_raw = vec![0u8; WORDS * 4];
    let input_w: &WgpuBuffer = input.backend().expect("a wgpu buffer");
    let output_w: &WgpuBuffer = output.backend().expect("a wgpu buffer");
    let (d, b) = measure(
        &mut || {
            s.copy_from_host(&input, 0, &data).unwrap();
            ws.dispatch(&kernel, &[input_w, output_w], [1, 1, 1])
                .unwrap();
            s.copy_device_to_host(&host, 0, &output, 0, WORDS * 4)
                .unwrap();
            s.synchronize().unwrap();
            host.read(0, &mut out_dev).unwrap();
        },
        &mut || raw.dispatch_readback(&data, &mut out_raw),
    );
    let expect: Vec<u8> = (0..WORDS as u32)
        .flat_map(|w| (w * 2).to_le_bytes())
        .collect();
    assert_eq!(out_dev, expect, "devstream result");
    assert_eq!(out_raw, expect, "raw result");
    row("small dispatch+readback (256 B)", d, b, RAW);

    report(&rows);
    Ok(())
}
