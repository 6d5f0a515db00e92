//! A copy/compute pipeline on `cuda:0`: the input is cut into chunks; each chunk goes
//! host→device, through a kernel, and device→host on one of three streams, so that copies in
//! both directions and kernels of different chunks overlap. A launcher stream's event starts
//! all three; their end events join back. Prints the achieved GB/s against the one-direction
//! and duplex copy bandwidth measured on the same machine just before, and checks the result.
//!
//! ```text
//! cargo run --release --example pipeline --features cuda [-- TOTAL_MIB CHUNK_MIB]   # default 2048 16
//! ```

use devstream::cuda::{ptx, CudaBuffer, CudaKernel, CudaStream, KernelArg, LaunchConfig};
use devstream::{DeviceBuffer, Error, Event, EventFlags, Place, Result, Stream};
use std::time::Duration;

const STREAMS: usize = 3;
const MIB: usize = 1 << 20;

fn main() {
    match run() {
        Ok(()) => {}
        Err(e @ (Error::BackendUnavailable { .. } | Error::NoDevice { .. })) => {
            println!("no CUDA device here, nothing to run: {e}");
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

/// Times `work` on `streams` (which wait for a start event on `launcher`; the launcher then
/// waits for all of them), best of `repeats`.
fn timed(
    place: &Place,
    launcher: &Stream,
    streams: &[Stream],
    repeats: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..repeats {
        let start = Event::new(place, EventFlags::timed())?;
        let end = Event::new(place, EventFlags::timed())?;
        launcher.record(&start)?;
        for s in streams {
            s.wait_event(&start)?;
        }
        work()?;
        for s in streams {
            launcher.wait_stream(s)?;
        }
        launcher.record(&end)?;
        end.synchronize()?;
        best = best.min(start.elapsed(&end)?);
    }
    Ok(best)
}

fn run() -> Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    // 2 GiB: the first upload and the last download of a run cannot overlap anything, so a
    // shorter run loses more to that ramp (on an H200: 94.6% of duplex at 1 GiB, 95.5% at 2 GiB,
    // 95.8% at 4 GiB, all with 16 MiB chunks; docs/results/2026-11-22-h200-last/).
    let total = args.first().copied().unwrap_or(2048) * MIB;
    let chunk = args.get(1).copied().unwrap_or(16) * MIB;
    if chunk == 0 || !total.is_multiple_of(chunk) || !chunk.is_multiple_of(4) {
        return Err(Error::InvalidArgument(
            "TOTAL_MIB must be a multiple of CHUNK_MIB".into(),
        ));
    }
    let place: Place = "cuda:0".parse()?;
    let launcher = Stream::new(&place)?;
    let streams: Vec<Stream> = (0..STREAMS)
        .map(|_| Stream::new(&place))
        .collect::<Result<_>>()?;
    let kernels = ptx::load(&place)?;
    let affine = kernels.function("affine_u32")?;

    // Pinned host buffers and one device buffer per stream (reused chunk after chunk: the
    // stream's order makes that safe).
    let input = launcher.alloc_host(total)?;
    let output = launcher.alloc_host(total)?;
    let words: Vec<u8> = (0..total / 4)
        .flat_map(|i| (i as u32).to_le_bytes())
        .collect();
    input.write(0, &words)?;
    drop(words);
    let device: Vec<_> = streams
        .iter()
        .map(|s| s.alloc(chunk))
        .collect::<Result<_>>()?;
    let big = launcher.alloc(total)?;
    let big2 = launcher.alloc(total)?;
    launcher.synchronize()?;

    // Rooflines: one direction on one stream, then both directions at once on two streams.
    let h2d = timed(&place, &launcher, &streams[..1], 3, || {
        streams[0].copy_host_to_device(&big, 0, &input, 0, total)
    })?;
    let d2h = timed(&place, &launcher, &streams[..1], 3, || {
        streams[0].copy_device_to_host(&output, 0, &big, 0, total)
    })?;
    let duplex = timed(&place, &launcher, &streams[..2], 3, || {
        streams[0].copy_host_to_device(&big2, 0, &input, 0, total)?;
        streams[1].copy_device_to_host(&output, 0, &big, 0, total)
    })?;
    let h2d_gbps = gbps(total, h2d);
    let d2h_gbps = gbps(total, d2h);
    let duplex_gbps = gbps(2 * total, duplex);
    drop(big);
    drop(big2);

    // The pipeline: chunk i on stream i % 3: H2D, data = data * 3 + 1, D2H.
    let chunks = total / chunk;
    let pipeline = timed(&place, &launcher, &streams, 3, || {
        for i in 0..chunks {
            let s = &streams[i % STREAMS];
            let d = &device[i % STREAMS];
            s.copy_host_to_device(d, 0, &input, i * chunk, chunk)?;
            launch_affine(s, &affine, d, chunk / 4)?;
            s.copy_device_to_host(&output, i * chunk, d, 0, chunk)?;
        }
        Ok(())
    })?;
    let achieved = gbps(2 * total, pipeline);

    // Check: the output is input * 3 + 1 (wrapping), for every word.
    let mut out = vec![0u8; total];
    output.read(0, &mut out)?;
    let bad = out
        .chunks_exact(4)
        .enumerate()
        .filter(|(i, w)| {
            u32::from_le_bytes([w[0], w[1], w[2], w[3]])
                != (*i as u32).wrapping_mul(3).wrapping_add(1)
        })
        .count();
    if bad != 0 {
        return Err(Error::InvalidArgument(format!(
            "{bad} words of the pipeline's output are wrong"
        )));
    }

    println!(
        "pipeline on {place}: {} MiB in {} chunks of {} MiB over {STREAMS} streams",
        total / MIB,
        chunks,
        chunk / MIB
    );
    println!("  H2D one direction      {h2d_gbps:8.1} GB/s");
    println!("  D2H one direction      {d2h_gbps:8.1} GB/s");
    println!("  H2D || D2H (duplex)    {duplex_gbps:8.1} GB/s");
    println!(
        "  pipeline (in + out)    {achieved:8.1} GB/s = {:.1}% of duplex, {:.1}% of one-direction sum",
        100.0 * achieved / duplex_gbps,
        100.0 * achieved / (h2d_gbps + d2h_gbps)
    );
    println!("  result checked: {} words ok", total / 4);
    Ok(())
}

fn launch_affine(s: &Stream, kernel: &CudaKernel, data: &DeviceBuffer, words: usize) -> Result<()> {
    let stream: &CudaStream = s.backend().expect("a CUDA stream");
    let buffer: &CudaBuffer = data.backend().expect("a CUDA buffer");
    debug_assert_eq!(data.len(), words * 4);
    // SAFETY: affine_u32(data, n, mul, add) touches n u32 words of `data`.
    unsafe {
        stream.launch_kernel(
            kernel,
            LaunchConfig::for_elements(words as u32, 256),
            &[
                KernelArg::Buffer(buffer),
                KernelArg::U32(words as u32),
                KernelArg::U32(3),
                KernelArg::U32(1),
            ],
        )
    }
}
