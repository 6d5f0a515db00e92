//! All-reduce bandwidth and compute/communication overlap through devstream's collectives,
//! on any place with `capabilities().collectives`: `cuda` (NCCL), `hip` (RCCL), `cpu`
//! (the reference engine).
//!
//! Ranks are threads of this process, rank `r` on place `<backend>:<r>` (`cpu` for every rank
//! on the CPU), each with its own stream and communicator; one id made by rank 0's thread.
//!
//! * `sweep` (default): in-place f32 sum all-reduce of 8 B … `--max-bytes` (×4 per step), as
//!   `torch.distributed.all_reduce` does it, `--iters` queued back to back per size after 5
//!   warm-up calls, timed on each rank from a barrier to its `synchronize` (rank 0's time is
//!   reported, as `peers/peers_comm.py` does for torch); reported per size:
//!   µs per call, algorithm bandwidth (bytes / time) and NCCL's bus bandwidth
//!   (× 2(n−1)/n). `peers/peers_comm.py` measures torch.distributed the same way.
//! * `overlap` (CUDA, needs `--features cuda,comm`): `--chunks` chunks per step; chunk i is
//!   computed (a `spin` kernel of `--spin-us`) on a compute stream, and all-reduced on a comm
//!   stream that waits for it, so chunk i's all-reduce runs beside chunk i+1's compute.
//!   Reported: compute alone, communication alone, the overlapped step, and
//!   max(compute, comm) / step (goal: ≥ 0.90). With `--features trace` and `--svg FILE`, rank 0
//!   writes the timeline of one overlapped step.
//!
//! ```text
//! bench-comm [sweep|overlap] --place cuda [--ranks 2] [--max-bytes 4294967296] [--iters 20]
//!            [--chunks 8] [--chunk-mib 64] [--spin-us 0 (calibrated to one chunk's all-reduce)]
//!            [--svg overlap.svg]
//! ```

use devstream::{Communicator, DataType, Place, ReduceOp, Stream, UniqueId};
use devstream_bench::{arg, arg_or};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// The place of rank `rank` of a backend named like `cuda`, `hip` or `cpu`.
fn place_of(backend: &str, rank: usize) -> devstream::Result<Place> {
    if backend == "cpu" {
        return "cpu".parse();
    }
    format!("{backend}:{rank}").parse()
}

/// Runs `body(rank, place, comm, barrier)` on `ranks` threads and returns rank 0's result.
fn on_ranks<T: Send + 'static>(
    backend: &str,
    ranks: usize,
    body: impl Fn(usize, &Place, &Communicator, &Barrier) -> devstream::Result<T>
        + Send
        + Sync
        + 'static,
) -> devstream::Result<T> {
    let id = UniqueId::new(&place_of(backend, 0)?)?;
    let barrier = Arc::new(Barrier::new(ranks));
    let body = Arc::new(body);
    let threads: Vec<_> = (0..ranks)
        .map(|rank| {
            let (backend, barrier, body) = (backend.to_string(), barrier.clone(), body.clone());
            std::thread::spawn(move || -> devstream::Result<T> {
                let place = place_of(&backend, rank)?;
                let comm = Communicator::init(&place, rank, ranks, &id)?;
                body(rank, &place, &comm, &barrier)
            })
        })
        .collect();
    let mut first = None;
    for (rank, thread) in threads.into_iter().enumerate() {
        let result = thread.join().expect("a rank thread panicked")?;
        if rank == 0 {
            first = Some(result);
        }
    }
    Ok(first.expect("rank 0 ran"))
}

fn bus_factor(ranks: usize) -> f64 {
    if ranks < 2 {
        1.0
    } else {
        2.0 * (ranks as f64 - 1.0) / ranks as f64
    }
}

/// One in-place f32 sum all-reduce of `count` elements of `buffer` on `stream`.
fn all_reduce_in_place(
    stream: &Stream,
    comm: &Communicator,
    buffer: &devstream::DeviceBuffer,
    count: usize,
) -> devstream::Result<()> {
    stream.all_reduce(comm, buffer, buffer, count, DataType::F32, ReduceOp::Sum)
}

/// Seconds per call of `iters` in-place all-reduces of `bytes` on every rank.
fn time_all_reduce(
    stream: &Stream,
    comm: &Communicator,
    barrier: &Barrier,
    bytes: usize,
    iters: usize,
) -> devstream::Result<f64> {
    let count = (bytes / 4).max(1);
    let buffer = stream.alloc(count * 4)?;
    stream.fill(&buffer, 0, count * 4, 0)?;
    for _ in 0..5 {
        all_reduce_in_place(stream, comm, &buffer, count)?;
    }
    stream.synchronize()?;
    barrier.wait();
    let start = Instant::now();
    for _ in 0..iters {
        all_reduce_in_place(stream, comm, &buffer, count)?;
    }
    stream.synchronize()?;
    let elapsed = start.elapsed().as_secs_f64();
    barrier.wait();
    Ok(elapsed / iters as f64)
}

fn sweep(backend: &str, ranks: usize) -> devstream::Result<()> {
    let max_bytes: usize = arg_or("--max-bytes", 4usize << 30);
    let iters: usize = arg_or("--iters", 20).max(1);
    println!(
        "bench-comm sweep on {backend} x {ranks} ranks (threads of one process): in-place f32 sum \
         all_reduce, {iters} calls per size after 5 warm-up calls"
    );
    println!(
        "{:>12} {:>12} {:>14} {:>14}",
        "bytes", "us/call", "algbw GB/s", "busbw GB/s"
    );
    let sizes: Vec<usize> = std::iter::successors(Some(8usize), |&b| b.checked_mul(4))
        .take_while(|&b| b <= max_bytes)
        .collect();
    let rows = on_ranks(backend, ranks, move |_, place, comm, barrier| {
        let stream = Stream::new(place)?;
        sizes
            .iter()
            .map(|&bytes| {
                // Small sizes are cheap: more calls keep the timer's resolution out of them.
                let n = if bytes < 1 << 20 { iters * 10 } else { iters };
                time_all_reduce(&stream, comm, barrier, bytes, n).map(|t| (bytes, t))
            })
            .collect::<devstream::Result<Vec<_>>>()
    })?;
    for (bytes, seconds) in rows {
        let algbw = bytes as f64 / seconds / 1e9;
        let busbw = algbw * bus_factor(ranks);
        println!(
            "{bytes:>12} {:>12.2} {algbw:>14.3} {busbw:>14.3}",
            seconds * 1e6
        );
    }
    Ok(())
}

#[cfg(feature = "cuda")]
fn overlap(backend: &str, ranks: usize) -> devstream::Result<()> {
    use devstream::cuda::{ptx, CudaStream, KernelArg, LaunchConfig};
    use devstream::{Error, Event, EventFlags};
    if backend != "cuda" {
        return Err(Error::InvalidArgument(
            "overlap: the compute kernel is PTX: --place cuda".into(),
        ));
    }
    let chunks: usize = arg_or("--chunks", 8).max(1);
    let chunk_bytes: usize = arg_or("--chunk-mib", 64usize) << 20;
    let spin_us: f64 = arg_or("--spin-us", 0.0);
    let svg = arg("--svg");
    let result = on_ranks(backend, ranks, move |rank, place, comm, barrier| {
        let module = ptx::load(place)?;
        let spin = module.function("spin")?;
        let compute = Stream::new(place)?;
        let comm_stream = Stream::new(place)?;
        let count = chunk_bytes / 4;
        let buffers = (0..chunks)
            .map(|_| {
                let b = comm_stream.alloc(count * 4)?;
                comm_stream.fill(&b, 0, count * 4, 0)?;
                Ok(b)
            })
            .collect::<devstream::Result<Vec<_>>>()?;
        comm_stream.synchronize()?;
        let cuda: &CudaStream = compute
            .backend()
            .ok_or(Error::InvalidArgument("not a CUDA stream".into()))?;
        let launch_spin = |cycles: u64| -> devstream::Result<()> {
            // SAFETY: `spin` takes one u64 (cycles); one block keeps most of the GPU free for
            // the collective's own kernels.
            unsafe {
                cuda.launch_kernel(
                    &spin,
                    LaunchConfig {
                        grid: (1, 1, 1),
                        block: (32, 1, 1),
                        shared_mem_bytes: 0,
                    },
                    &[KernelArg::U64(cycles)],
                )
            }
        };
        // Cycles per µs of `spin`, from one timed launch.
        let (a, b) = (
            Event::new(place, EventFlags::timed())?,
            Event::new(place, EventFlags::timed())?,
        );
        a.record(&compute)?;
        launch_spin(50_000_000)?;
        b.record(&compute)?;
        compute.synchronize()?;
        let per_us = 50_000_000.0 / (a.elapsed(&b)?.as_secs_f64() * 1e6);
        // Communication alone: the chunks' all-reduces back to back.
        let time = |f: &dyn Fn() -> devstream::Result<()>| -> devstream::Result<f64> {
            f()?;
            barrier.wait();
            let start = Instant::now();
            f()?;
            barrier.wait();
            Ok(start.elapsed().as_secs_f64())
        };
        let comm_alone = time(&|| {
            for buffer in &buffers {
                all_reduce_in_place(&comm_stream, comm, buffer, count)?;
            }
            comm_stream.synchronize()
        })?;
        // One chunk's compute as long as one chunk's all-reduce, unless --spin-us says.
        let spin_us = if spin_us > 0.0 {
            spin_us
        } else {
            comm_alone / chunks as f64 * 1e6
        };
        let cycles = (per_us * spin_us) as u64;
        let compute_alone = time(&|| {
            for _ in 0..chunks {
                launch_spin(cycles)?;
            }
            compute.synchronize()
        })?;
        let step = || -> devstream::Result<()> {
            for buffer in &buffers {
                launch_spin(cycles)?;
                let ready = compute.record_event()?;
                comm_stream.wait_event(&ready)?;
                all_reduce_in_place(&comm_stream, comm, buffer, count)?;
            }
            comm_stream.synchronize()?;
            compute.synchronize()
        };
        let overlapped = time(&step)?;
        #[cfg(feature = "trace")]
        if rank == 0 {
            if let Some(path) = &svg {
                barrier.wait();
                devstream::trace::start();
                step()?;
                let trace = devstream::trace::stop();
                barrier.wait();
                trace
                    .write_svg(path)
                    .map_err(|e| Error::InvalidArgument(format!("--svg {path}: {e}")))?;
                let json = format!("{path}.json");
                trace
                    .write_chrome_json(&json)
                    .map_err(|e| Error::InvalidArgument(format!("{json}: {e}")))?;
            }
        } else if svg.is_some() {
            barrier.wait();
            step()?;
            barrier.wait();
        }
        #[cfg(not(feature = "trace"))]
        let _ = (rank, &svg);
        Ok((compute_alone, comm_alone, overlapped, spin_us))
    })?;
    let (compute_alone, comm_alone, overlapped, spin_us) = result;
    let bound = compute_alone.max(comm_alone);
    println!(
        "bench-comm overlap on {backend} x {ranks} ranks: {chunks} chunks of {} MiB f32, spin \
         kernel {spin_us:.0} us per chunk",
        chunk_bytes >> 20
    );
    println!("compute alone       {:>10.3} ms", compute_alone * 1e3);
    println!("communication alone {:>10.3} ms", comm_alone * 1e3);
    println!("overlapped step     {:>10.3} ms", overlapped * 1e3);
    println!(
        "max(compute, comm) / step: {:.3} (goal >= 0.90; 1.0 = fully hidden)",
        bound / overlapped
    );
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn overlap(_backend: &str, _ranks: usize) -> devstream::Result<()> {
    Err(devstream::Error::InvalidArgument(
        "overlap needs a build with --features cuda,comm".into(),
    ))
}

fn main() -> devstream::Result<()> {
    let mode = std::env::args()
        .nth(1)
        .filter(|a| !a.starts_with("--"))
        .unwrap_or_else(|| "sweep".into());
    let backend = arg("--place").unwrap_or_else(|| "cpu".into());
    let backend = backend.split(':').next().unwrap_or("cpu").to_string();
    let ranks: usize = arg_or("--ranks", 2).max(1);
    match mode.as_str() {
        "sweep" => sweep(&backend, ranks),
        "overlap" => overlap(&backend, ranks),
        other => Err(devstream::Error::InvalidArgument(format!(
            "unknown mode {other:?}: sweep or overlap"
        ))),
    }
}
