//! One program across every backend found: a pipeline of small chunks that a CPU stream
//! produces, a device of another backend transforms and a second CPU stream checks, handed from
//! stage to stage by waits across backends — no host synchronize inside the loop — then the same
//! pipeline with host fences (`event.synchronize()`, then submit), with both throughputs.
//!
//! ```text
//! cargo run --example hetero                                   # cpu only: a second CPU stream
//! cargo run --example hetero --features wgpu,plugin            # cpu, wgpu:0, custom_cpu:0
//! cargo run --release --example hetero --features cuda,wgpu -- 2000 64   # CHUNKS CHUNK_KIB
//! ```
//!
//! Each place that has buffers and waits on other backends' work gets a pipeline of its own
//! (`cpu → P → cpu`); where two or more backends can, one more pipeline chains the first place of
//! each (`cpu → cuda:0 → wgpu:0 → cpu`). Every chunk is checked by the consumer, so a stage that
//! ran before its input was ready fails the run. The pipeline itself is
//! `examples/common/hetero.rs`, shared with the `bench-cross` benchmark.

#[path = "common/hetero.rs"]
mod hetero;

use hetero::{Failure, Handoff, Pipeline};

/// Chunks in flight at most.
const SLOTS: usize = 4;
/// Chunks run before measuring (first-touch costs, buffer caches).
const WARM_UP: u64 = 8;

fn main() -> Result<(), Failure> {
    let mut args = std::env::args().skip(1);
    let chunks: u64 = args.next().map_or(Ok(200), |a| a.parse())?;
    let chunk_kib: usize = args.next().map_or(Ok(64), |a| a.parse())?;
    let places = devstream::places();
    println!("places: {}", hetero::place_list(&places));
    println!("{chunks} chunks of {chunk_kib} KiB, at most {SLOTS} in flight\n");
    for devices in hetero::pipelines(&places) {
        let mut pipeline = Pipeline::new(&devices, chunk_kib * 1024, SLOTS)?;
        pipeline.run(WARM_UP, Handoff::Wait)?;
        pipeline.run(WARM_UP, Handoff::Fence)?;
        let mut rates = Vec::new();
        let (mut submitting, mut parts) = (std::time::Duration::ZERO, Default::default());
        for handoff in [Handoff::Wait, Handoff::Fence] {
            let elapsed = pipeline.run(chunks, handoff)?;
            rates.push(chunks as f64 / elapsed.as_secs_f64());
            if handoff == Handoff::Wait {
                submitting = pipeline.submit_time();
                parts = pipeline.submit_parts();
            }
        }
        let per_chunk = |d: std::time::Duration| d.as_secs_f64() * 1e6 / chunks as f64;
        println!(
            "{:<40} waits {:>9.0} chunks/s   host fences {:>9.0} chunks/s   ratio {:.2}   \
             ({chunks} chunks checked each; with waits the host submits {:.1} µs/chunk: \
             produce {:.1}, devices {:.1}, consume {:.1})",
            pipeline.describe(),
            rates[0],
            rates[1],
            rates[0] / rates[1],
            per_chunk(submitting),
            per_chunk(parts[0]),
            per_chunk(parts[1]),
            per_chunk(parts[2])
        );
    }
    Ok(())
}
