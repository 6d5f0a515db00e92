//! Benchmark (not a test; `#[ignore]`d): the CPU reference engine's all_reduce of 64 MiB of
//! f32 across 4 ranks as threads, beside a plain 64 MiB memcpy on the same machine.
//!
//! ```sh
//! cargo test -p devstream --release --features comm --test comm_bench -- --ignored --nocapture
//! ```
//!
//! `DEVSTREAM_COMM_BENCH_MIB` (default 64) and `DEVSTREAM_COMM_BENCH_RANKS` (default 4) change
//! the size and the number of ranks. Take numbers on an otherwise idle machine.

use devstream::{Communicator, DataType, Place, ReduceOp, Stream, UniqueId};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[test]
#[ignore = "a benchmark: run with --ignored --nocapture on an idle machine"]
fn all_reduce_64_mib_across_4_threads_vs_memcpy() {
    let mib = env("DEVSTREAM_COMM_BENCH_MIB", 64);
    let nranks = env("DEVSTREAM_COMM_BENCH_RANKS", 4);
    let bytes = mib << 20;
    let rounds = 7;

    // Baseline: a plain memcpy of the same size (pages touched beforehand).
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let mut copies = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        copies.push(start.elapsed());
        std::hint::black_box(&dst);
    }
    let memcpy = median(copies);

    let id = UniqueId::new(&Place::Cpu).unwrap();
    let barrier = Arc::new(Barrier::new(nranks));
    let threads: Vec<_> = (0..nranks)
        .map(|rank| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let place = Place::Cpu;
                let comm = Communicator::init(&place, rank, nranks, &id).unwrap();
                let s = Stream::new(&place).unwrap();
                let buf = s.alloc(bytes).unwrap();
                s.fill(&buf, 0, bytes, 0).unwrap();
                let count = bytes / 4;
                // Warm-up.
                s.all_reduce(&comm, &buf, &buf, count, DataType::F32, ReduceOp::Sum)
                    .unwrap();
                s.synchronize().unwrap();
                let mut times = Vec::new();
                for _ in 0..rounds {
                    barrier.wait();
                    let start = Instant::now();
                    s.all_reduce(&comm, &buf, &buf, count, DataType::F32, ReduceOp::Sum)
                        .unwrap();
                    s.synchronize().unwrap();
                    times.push(start.elapsed());
                }
                median(times)
            })
        })
        .collect();
    let per_rank: Vec<Duration> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let slowest = per_rank.iter().max().copied().unwrap();
    println!(
        "all_reduce f32 sum, {mib} MiB, {nranks} ranks as threads: {slowest:?} (median of \
         {rounds}, slowest rank); memcpy {mib} MiB: {memcpy:?}; ratio {:.1}",
        slowest.as_secs_f64() / memcpy.as_secs_f64()
    );
}
