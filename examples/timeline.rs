//! A three-stream pipeline recorded with the timeline recorder, written as Chrome trace-event
//! JSON and as an SVG picture.
//!
//! The input is cut into chunks. Stream `H2D` copies chunk i to the device and records
//! `loaded[i]`; stream `compute` waits for it, then fills the chunk's output buffer, copies the
//! input into it on the device and runs a host function as the "kernel" (a 1 ms spin: host
//! functions run on every backend), and records `computed[i]`; stream `D2H` waits for that and
//! copies the result back. With several chunks in flight the copies of one chunk overlap the
//! compute of another, which the picture shows. The program checks its own output.
//!
//! ```text
//! cargo run --release --example timeline --features trace                 # cpu → docs/timeline-cpu.{svg,json}
//! cargo run --release --example timeline --features trace,cuda -- cuda:0 docs/timeline-cuda
//! ```
//!
//! Arguments: `[PLACE] [OUTPUT PREFIX]` (defaults `cpu` and `docs/timeline-<place>`).

use devstream::{trace, DeviceBuffer, Error, Place, Result, Stream};
use std::time::{Duration, Instant};

const CHUNKS: usize = 8;
const COMPUTE: Duration = Duration::from_millis(1);

fn spin(duration: Duration) {
    let start = Instant::now();
    while start.elapsed() < duration {
        std::hint::spin_loop();
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let place: Place = args.first().map_or("cpu", String::as_str).parse()?;
    let prefix = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| format!("docs/timeline-{}", place.to_string().replace(':', "")));

    // Chunks big enough that a copy shows beside the 1 ms kernel: a GPU copies ~50 GB/s.
    let chunk_bytes: usize = if place == Place::Cpu {
        4 << 20
    } else {
        32 << 20
    };
    let h2d = Stream::new(&place)?;
    let compute = Stream::new(&place)?;
    let d2h = Stream::new(&place)?;
    // The "kernel" is a host function: a place without them (a Paddle plug-in without
    // stream_add_callback) runs the pipeline's copies only.
    let host_funcs = devstream::capabilities(&place)?.host_funcs;
    if !host_funcs {
        println!("{place} has no host functions: the 1 ms kernels are skipped");
    }

    let input = h2d.alloc_host(CHUNKS * chunk_bytes)?;
    let pattern: Vec<u8> = (0..CHUNKS * chunk_bytes).map(|i| (i % 251) as u8).collect();
    input.write(0, &pattern)?;
    let output = d2h.alloc_host(CHUNKS * chunk_bytes)?;
    let device_in: Vec<DeviceBuffer> = (0..CHUNKS)
        .map(|_| h2d.alloc(chunk_bytes))
        .collect::<Result<_>>()?;
    let device_out: Vec<DeviceBuffer> = (0..CHUNKS)
        .map(|_| compute.alloc(chunk_bytes))
        .collect::<Result<_>>()?;
    for stream in [&h2d, &compute, &d2h] {
        stream.synchronize()?;
    }

    trace::start();
    trace::name_stream(&h2d, "H2D copies");
    trace::name_stream(&compute, "compute");
    trace::name_stream(&d2h, "D2H copies");
    for chunk in 0..CHUNKS {
        let offset = chunk * chunk_bytes;

        trace::label(format!("H2D {chunk}"));
        h2d.copy_host_to_device(&device_in[chunk], 0, &input, offset, chunk_bytes)?;
        let loaded = h2d.record_event()?;

        compute.wait_event(&loaded)?;
        trace::label(format!("fill {chunk}"));
        compute.fill(&device_out[chunk], 0, chunk_bytes, 0)?;
        trace::label(format!("D2D {chunk}"));
        compute.copy_device_to_device(&device_out[chunk], 0, &device_in[chunk], 0, chunk_bytes)?;
        if host_funcs {
            trace::label(format!("kernel {chunk}"));
            compute.launch_host_func(move || spin(COMPUTE))?;
        }
        let computed = compute.record_event()?;

        d2h.wait_event(&computed)?;
        trace::label(format!("D2H {chunk}"));
        d2h.copy_device_to_host(&output, offset, &device_out[chunk], 0, chunk_bytes)?;
    }
    for stream in [&h2d, &compute, &d2h] {
        stream.synchronize()?;
    }
    let timeline = trace::stop();

    let mut result = vec![0u8; CHUNKS * chunk_bytes];
    output.read(0, &mut result)?;
    if result != pattern {
        return Err(Error::InvalidArgument(
            "the pipeline's output differs from its input".into(),
        ));
    }

    if let Some(dir) = std::path::Path::new(&prefix).parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(io_error)?;
        }
    }
    let json_path = format!("{prefix}.json");
    let svg_path = format!("{prefix}.svg");
    timeline.write_chrome_json(&json_path).map_err(io_error)?;
    timeline.write_svg(&svg_path).map_err(io_error)?;

    println!(
        "{place}: {} streams, {} ops, {} flows over {:.3} ms; output checked",
        timeline.streams.len(),
        timeline.ops.len(),
        timeline.flows.len(),
        timeline.end().as_secs_f64() * 1e3
    );
    match overlap(&timeline) {
        Some((copy_during_compute, compute_total)) => println!(
            "device time with a copy running during compute: {:.3} ms of {:.3} ms compute",
            copy_during_compute.as_secs_f64() * 1e3,
            compute_total.as_secs_f64() * 1e3
        ),
        None => println!("{place} cannot time its streams: host submit spans only"),
    }
    println!("wrote {json_path} (open in https://ui.perfetto.dev) and {svg_path}");
    Ok(())
}

fn io_error(error: std::io::Error) -> Error {
    Error::InvalidArgument(format!("cannot write the timeline: {error}"))
}

/// How long some copy stream ran on the device while the compute stream did, and the compute
/// stream's total device time; `None` without device spans.
fn overlap(timeline: &trace::Trace) -> Option<(Duration, Duration)> {
    let spans_of = |name: &str, ops: &[&str]| -> Vec<trace::Span> {
        let lane = timeline.streams.iter().position(|s| s.name == name);
        timeline
            .ops
            .iter()
            .filter(|op| Some(op.stream) == lane && ops.contains(&op.op))
            .filter_map(|op| op.device)
            .collect()
    };
    let compute = spans_of(
        "compute",
        &["fill", "copy_device_to_device", "launch_host_func"],
    );
    if compute.is_empty() {
        return None;
    }
    let mut copies = spans_of("H2D copies", &["copy_host_to_device"]);
    copies.extend(spans_of("D2H copies", &["copy_device_to_host"]));
    // Merge the copy spans, then intersect them with each compute span.
    copies.sort_by_key(|s| s.start);
    let mut merged: Vec<trace::Span> = Vec::new();
    for span in copies {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    let mut during = Duration::ZERO;
    let mut total = Duration::ZERO;
    for span in &compute {
        total += span.duration();
        for copy in &merged {
            let start = span.start.max(copy.start);
            let end = span.end.min(copy.end);
            during += end.saturating_sub(start);
        }
    }
    Some((during, total))
}
