//! The CPU reference engine's all-reduce beside a plain copy (the target: an all_reduce of
//! 64 MiB across 4 threads runs at ≥ 50% of `memcpy` bandwidth on the machine it runs on).
//!
//! Ranks are threads of this process on the `cpu` place, each with its own stream and a
//! `--mib` MiB buffer of f32; each iteration is an in-place sum all-reduce and a synchronize on
//! every rank, timed from a barrier before to a barrier after. Reported, median of `--iters`:
//! the algorithm bandwidth (bytes of one rank's buffer / time) and NCCL's bus bandwidth
//! (× 2(n−1)/n), against `memcpy` of the same size on one thread (`copy_from_slice`, median of as
//! many runs), and the machine's cores. Each iteration times one memcpy (while the ranks wait)
//! and then one all-reduce, so that a machine whose memory speed drifts (a shared host) moves
//! both alike.
//!
//! ```text
//! bench-comm-cpu [--ranks 4] [--mib 64] [--iters 7]
//! ```

use devstream::{Communicator, DataType, Place, ReduceOp, Stream, UniqueId};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / 1e9
}

fn main() -> devstream::Result<()> {
    let ranks = arg("--ranks", 4);
    let bytes = arg("--mib", 64) << 20;
    let iters = arg("--iters", 7).max(1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "bench-comm-cpu: all_reduce (f32, sum, in place) of {} MiB on {ranks} ranks (threads, \
         cpu place), {iters} iterations, median; {cores} cores available",
        bytes >> 20
    );

    // memcpy of the same size, one thread (the main thread, between the all-reduces).
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.copy_from_slice(&src);

    let place: Place = "cpu".parse()?;
    let id = UniqueId::new(&place)?;
    // The ranks and the main thread: ready, then per iteration start and end.
    let barrier = Arc::new(Barrier::new(ranks + 1));
    let threads: Vec<_> = (0..ranks)
        .map(|rank| {
            let (place, id, barrier) = (place.clone(), id, barrier.clone());
            std::thread::spawn(move || -> devstream::Result<Vec<Duration>> {
                let comm = Communicator::init(&place, rank, ranks, &id)?;
                let stream = Stream::new(&place)?;
                let buffer = stream.alloc(bytes)?;
                let values: Vec<u8> = (0..bytes / 4)
                    .flat_map(|i| ((i % 7) as f32).to_le_bytes())
                    .collect();
                stream.copy_from_host(&buffer, 0, &values)?;
                let count = bytes / 4;
                // One untimed round (pages touched, segments mapped).
                stream.all_reduce(&comm, &buffer, &buffer, count, DataType::F32, ReduceOp::Sum)?;
                stream.synchronize()?;
                barrier.wait();
                let mut times = Vec::new();
                for _ in 0..iters {
                    barrier.wait();
                    let t = Instant::now();
                    stream.all_reduce(
                        &comm,
                        &buffer,
                        &buffer,
                        count,
                        DataType::F32,
                        ReduceOp::Sum,
                    )?;
                    stream.synchronize()?;
                    barrier.wait();
                    times.push(t.elapsed());
                }
                Ok(times)
            })
        })
        .collect();
    barrier.wait();
    let mut copies = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        copies.push(t.elapsed());
        barrier.wait();
        barrier.wait();
    }
    let copy = median(copies);
    drop((src, dst));
    let mut per_rank = Vec::new();
    for thread in threads {
        per_rank.push(thread.join().expect("a rank thread panicked")?);
    }
    let all_reduce = median(per_rank.swap_remove(0));
    let algbw = gbps(bytes, all_reduce);
    let busbw = algbw * 2.0 * (ranks as f64 - 1.0) / ranks as f64;
    let memcpy = gbps(bytes, copy);
    println!(
        "memcpy, one thread            {:>9.2} ms  {:>7.2} GB/s",
        copy.as_secs_f64() * 1e3,
        memcpy
    );
    println!(
        "all_reduce                    {:>9.2} ms  {:>7.2} GB/s algorithm, {:>7.2} GB/s bus",
        all_reduce.as_secs_f64() * 1e3,
        algbw,
        busbw
    );
    println!(
        "all_reduce / memcpy: {:.2} (algorithm bandwidth), {:.2} (bus bandwidth); goal ≥ 0.50",
        algbw / memcpy,
        busbw / memcpy
    );
    Ok(())
}
