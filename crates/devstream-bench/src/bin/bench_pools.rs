//! Memory pools: what a stream-ordered allocation costs for a size the pool has seen before, a
//! churn workload over four streams, and a captured step's replay, on every place compiled in
//! and present (cpu; wgpu:0 with `--features wgpu`; cuda:0 with `--features cuda`).
//!
//! ```text
//! cargo xtask bench --backend pools [--features wgpu,cuda] [--quick]
//! cargo run --release -p devstream-bench --features wgpu --bin bench-pools [-- --place wgpu:0]
//! bench-pools --plan 5         # the churn's first 5 steps (as peers_cuda.py's churn_plan(5))
//! ```
//!
//! * **alloc+free pairs** (rows, target ≤ 1.0×): `stream.alloc(len)` then drop (the place's
//!   default pool), and `stream.alloc_from(&pool, len)` then drop on a pool that keeps what is
//!   freed, for sizes allocated before, beside the place's own baseline of the same pair:
//!   CUDA: `cuMemAllocAsync` + `cuMemFreeAsync` on a raw stream (the device's default pool);
//!   wgpu: `Device::create_buffer` + drop (what a wgpu program without a pool does); CPU: a
//!   minimal caching allocator (a free list per size class under one lock, blocks zeroed up to
//!   the length as CPU buffers are).
//! * **churn** (lines): four streams, sizes from 256 B to 64 MiB (a fixed pseudo-random
//!   sequence, the same as `peers_cuda.py pools`), each buffer allocated on one stream, written
//!   there, handed to another stream that waits and writes it, and dropped once eight newer
//!   buffers are live; the time and the pool's peak reserved bytes. PyTorch's side, with
//!   `record_stream`, is in the peers script.
//! * **captured step** (lines): the replay time of a captured step whose temporaries were
//!   allocated before the capture. The variant that allocates its temporaries inside the
//!   capture waits for allocation inside captures (see `captured_step`).

use devstream::{MemoryPool, Place, PoolOptions, Stream};
use devstream_bench::{arg, interleaved, ns_per_op, report, Row};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

const TARGET: f64 = 1.0;
/// Sizes of the alloc+free rows.
const PAIR_SIZES: [usize; 3] = [256, 64 << 10, 4 << 20];
/// Streams and live buffers of the churn.
const CHURN_STREAMS: usize = 4;
const CHURN_WINDOW: usize = 8;
/// Bytes each stream writes of a churn buffer (at its start and its end).
const CHURN_TOUCH: usize = 4096;

/// The churn's pseudo-random sequence: xorshift64, the same in `peers_cuda.py`.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// One step of the churn: the producing and consuming streams and the size.
#[derive(Clone, Copy, Debug)]
struct ChurnStep {
    producer: usize,
    consumer: usize,
    len: usize,
}

/// The churn's steps: sizes `256 << k` plus up to as much again (k in 0..=17: 256 B .. 64 MiB).
fn churn_plan(steps: usize) -> Vec<ChurnStep> {
    let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15);
    (0..steps)
        .map(|_| {
            let r = rng.next();
            let base = 256usize << (r % 18);
            let len = base + ((r >> 8) as usize % base);
            let s = rng.next();
            ChurnStep {
                producer: (s % CHURN_STREAMS as u64) as usize,
                consumer: ((s >> 8) % CHURN_STREAMS as u64) as usize,
                len,
            }
        })
        .collect()
}

/// A pool that keeps everything freed (as PyTorch's caching allocator does).
fn keep_all(place: &Place) -> devstream::Result<MemoryPool> {
    MemoryPool::new(
        place,
        PoolOptions {
            release_threshold: u64::MAX,
            ..Default::default()
        },
    )
}

/// The CPU baseline: the most direct caching allocator, a free list per size class under one
/// lock; a block taken is zeroed up to the length (CPU buffers start zeroed).
#[derive(Default)]
struct FreeLists(Mutex<HashMap<usize, Vec<Box<[u8]>>>>);

impl FreeLists {
    fn alloc_free(&self, len: usize) {
        let class = len.next_power_of_two().max(512);
        let cached = self
            .0
            .lock()
            .unwrap()
            .get_mut(&class)
            .and_then(|list| list.pop());
        let mut block = cached.unwrap_or_else(|| vec![0u8; class].into_boxed_slice());
        block[..len].fill(0);
        std::hint::black_box(&block);
        self.0.lock().unwrap().entry(class).or_default().push(block);
    }
}

/// The place's own baseline of one alloc+free pair of `len` bytes, and what it is.
struct Baseline {
    name: &'static str,
    pair: Box<dyn FnMut(usize)>,
}

fn baseline(place: &Place, stream: &Stream) -> Option<Baseline> {
    match place {
        Place::Cpu => {
            let lists = FreeLists::default();
            Some(Baseline {
                name: "free list per size class, one lock",
                pair: Box::new(move |len| lists.alloc_free(len)),
            })
        }
        #[cfg(feature = "wgpu")]
        Place::Wgpu(_) => {
            let ws: &devstream::wgpu::WgpuStream = stream.backend()?;
            let device = ws.as_raw().0.clone();
            Some(Baseline {
                name: "wgpu Device::create_buffer + drop",
                pair: Box::new(move |len| {
                    let buffer = device.create_buffer(&devstream::wgpu::wgpu::BufferDescriptor {
                        label: None,
                        size: (len as u64).next_multiple_of(4),
                        usage: devstream::wgpu::wgpu::BufferUsages::STORAGE
                            | devstream::wgpu::wgpu::BufferUsages::UNIFORM
                            | devstream::wgpu::wgpu::BufferUsages::COPY_SRC
                            | devstream::wgpu::wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    });
                    drop(std::hint::black_box(buffer));
                }),
            })
        }
        #[cfg(feature = "cuda")]
        Place::Cuda(_) => {
            let _ = stream;
            cuda_raw::baseline()
        }
        _ => {
            let _ = stream;
            None
        }
    }
}

#[cfg(feature = "cuda")]
mod cuda_raw {
    use super::Baseline;
    use devstream::cuda::cudarc::driver::sys;

    fn ok(result: sys::CUresult, call: &str) {
        assert_eq!(result, sys::CUresult::CUDA_SUCCESS, "{call}");
    }

    /// `cuMemAllocAsync` + `cuMemFreeAsync` on a raw non-blocking stream (the device's
    /// default pool): what devstream's CUDA pool does underneath.
    pub(super) fn baseline() -> Option<Baseline> {
        let mut stream: sys::CUstream = std::ptr::null_mut();
        // SAFETY: devstream made the device's primary context current on this thread when the
        // bench's stream was made; the out-pointer is valid. The stream lives until the process
        // ends.
        unsafe {
            ok(
                sys::cuStreamCreateWithPriority(
                    &mut stream,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                    0,
                ),
                "cuStreamCreateWithPriority",
            );
        }
        let stream = stream as usize;
        Some(Baseline {
            name: "cuMemAllocAsync + cuMemFreeAsync",
            pair: Box::new(move |len| {
                let mut ptr: sys::CUdeviceptr = 0;
                // SAFETY: a live stream of the current context; the memory is freed at once, in
                // the same stream's order.
                unsafe {
                    ok(
                        sys::cuMemAllocAsync(&mut ptr, len, stream as sys::CUstream),
                        "cuMemAllocAsync",
                    );
                    ok(
                        sys::cuMemFreeAsync(ptr, stream as sys::CUstream),
                        "cuMemFreeAsync",
                    );
                }
            }),
        })
    }
}

/// The alloc+free rows of `place`.
fn pair_rows(place: &Place, quick: bool, rows: &mut Vec<Row>) -> devstream::Result<()> {
    let (rounds, iters, blocks) = if quick { (3, 500, 3) } else { (7, 5_000, 5) };
    let stream = Stream::new(place)?;
    let Some(mut base) = baseline(place, &stream) else {
        println!("{place}: no baseline for alloc+free pairs here");
        return Ok(());
    };
    let pool = keep_all(place)?;
    let backend: &'static str = match place {
        Place::Cpu => "cpu",
        Place::Wgpu(_) => "wgpu",
        Place::Cuda(_) => "cuda",
        _ => "other",
    };
    for len in PAIR_SIZES {
        // Seen before: one pair each outside the measurement.
        drop(stream.alloc(len)?);
        drop(stream.alloc_from(&pool, len)?);
        (base.pair)(len);
        let mut default_pair = || {
            ns_per_op(rounds, iters, || {
                drop(std::hint::black_box(stream.alloc(len).expect("alloc")));
            })
        };
        let mut raw_pair = || ns_per_op(rounds, iters, || (base.pair)(len));
        let (ours, theirs) = interleaved(blocks, &mut default_pair, &mut raw_pair);
        rows.push(Row {
            backend,
            op: format!("alloc+drop {len} B (default pool)"),
            devstream_ns: ours,
            baseline_ns: theirs,
            baseline: base.name,
            target: TARGET,
        });
        let mut pool_pair = || {
            ns_per_op(rounds, iters, || {
                drop(std::hint::black_box(
                    stream.alloc_from(&pool, len).expect("alloc_from"),
                ));
            })
        };
        let mut raw_pair = || ns_per_op(rounds, iters, || (base.pair)(len));
        let (ours, theirs) = interleaved(blocks, &mut pool_pair, &mut raw_pair);
        rows.push(Row {
            backend,
            op: format!("alloc_from+drop {len} B (caching pool)"),
            devstream_ns: ours,
            baseline_ns: theirs,
            baseline: base.name,
            target: TARGET,
        });
    }
    stream.synchronize()
}

/// The churn on `place`: its time and the pool's peak reserved bytes.
fn churn(place: &Place, steps: usize) -> devstream::Result<()> {
    let streams = (0..CHURN_STREAMS)
        .map(|_| Stream::new(place))
        .collect::<devstream::Result<Vec<_>>>()?;
    let pool = keep_all(place)?;
    let plan = churn_plan(steps);
    let run = |plan: &[ChurnStep]| -> devstream::Result<()> {
        let mut live = std::collections::VecDeque::new();
        for (i, step) in plan.iter().enumerate() {
            let (producer, consumer) = (&streams[step.producer], &streams[step.consumer]);
            let buffer = producer.alloc_from(&pool, step.len)?;
            let touch = step.len.min(CHURN_TOUCH);
            producer.fill(&buffer, 0, touch, i as u8)?;
            if step.consumer != step.producer {
                consumer.wait_stream(producer)?;
            }
            consumer.fill(&buffer, step.len - touch, touch, !(i as u8))?;
            live.push_back(buffer);
            if live.len() > CHURN_WINDOW {
                live.pop_front();
            }
        }
        drop(live);
        for stream in &streams {
            stream.synchronize()?;
        }
        Ok(())
    };
    // Warm: the pool has seen the sizes (PyTorch's side warms the same way).
    run(&plan)?;
    pool.reset_peak()?;
    let start = Instant::now();
    run(&plan)?;
    let elapsed = start.elapsed();
    let stats = pool.stats()?;
    println!(
        "{place}: churn of {steps} buffers over {CHURN_STREAMS} streams: {:.2} ms, peak reserved {:.1} MiB (peak used {:.1} MiB)",
        elapsed.as_secs_f64() * 1e3,
        stats.peak_reserved_bytes as f64 / (1 << 20) as f64,
        stats.peak_used_bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// Layers of the captured step and its temporaries.
const STEP_LAYERS: usize = 16;
const STEP_TEMPS: usize = 4;
const STEP_TEMP_BYTES: usize = 1 << 20;

/// The replay time of a step that writes and copies between temporaries, captured twice: with
/// the temporaries allocated before the capture, and with them allocated inside it (memory
/// private to the graph, the same on every replay) and dropped before the capture ends, as a
/// training step's temporaries are. The two graphs do the same work; the second is held to
/// ≤ 1.02× the first's replay time. Measured alternately, `blocks` times each.
fn captured_step(
    place: &Place,
    launches: usize,
    blocks: usize,
    rows: &mut Vec<Row>,
) -> devstream::Result<()> {
    let caps = devstream::capabilities(place)?;
    if caps.capture == devstream::CaptureSupport::None {
        println!("{place}: no capture here");
        return Ok(());
    }
    let stream = Stream::new(place)?;
    let layers = |temps: &[devstream::DeviceBuffer]| -> devstream::Result<()> {
        for layer in 0..STEP_LAYERS {
            let (a, b) = (&temps[layer % STEP_TEMPS], &temps[(layer + 1) % STEP_TEMPS]);
            stream.fill(a, 0, STEP_TEMP_BYTES, layer as u8)?;
            stream.copy_device_to_device(b, 0, a, 0, STEP_TEMP_BYTES)?;
        }
        Ok(())
    };
    let alloc_temps = || {
        (0..STEP_TEMPS)
            .map(|_| stream.alloc(STEP_TEMP_BYTES))
            .collect::<devstream::Result<Vec<_>>>()
    };
    let temps = alloc_temps()?;
    let before = devstream_bench::capture_step(std::slice::from_ref(&stream), || layers(&temps))?;
    let inside = if caps.capture_alloc {
        Some(devstream_bench::capture_step(
            std::slice::from_ref(&stream),
            || {
                let temps = alloc_temps()?;
                layers(&temps)
                // The temporaries are dropped here, inside the capture: their memory stays the
                // graph's.
            },
        )?)
    } else {
        None
    };
    let what = format!(
        "captured step ({STEP_LAYERS} fill+copy layers over {STEP_TEMPS} temporaries of {} KiB)",
        STEP_TEMP_BYTES >> 10
    );
    let Some(inside) = inside else {
        let us = devstream_bench::replay_us(&before, &stream, launches)?;
        println!(
            "{place}: {what}, temporaries allocated before the capture: {us:.1} us per replay"
        );
        println!(
            "{place}: {what}, temporaries allocated inside the capture: capture_alloc is off here"
        );
        return Ok(());
    };
    let (mut outside_us, mut inside_us) = (Vec::new(), Vec::new());
    for _ in 0..blocks {
        outside_us.push(devstream_bench::replay_us(&before, &stream, launches)?);
        inside_us.push(devstream_bench::replay_us(&inside, &stream, launches)?);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (outside, ours) = (median(&mut outside_us), median(&mut inside_us));
    println!(
        "{place}: {what}: temporaries allocated inside the capture {ours:.1} us per replay, \
         before the capture {outside:.1} us (medians of {blocks} alternating blocks of {launches} \
         launches): {:.3}x",
        ours / outside
    );
    rows.push(Row {
        backend: match place {
            Place::Cpu => "cpu",
            Place::Wgpu(_) => "wgpu",
            Place::Cuda(_) => "cuda",
            _ => "other",
        },
        op: "captured step replay, temporaries allocated inside the capture".into(),
        devstream_ns: ours * 1e3,
        baseline_ns: outside * 1e3,
        baseline: "the same step with temporaries allocated before the capture",
        target: 1.02,
    });
    Ok(())
}

/// The places to measure: `--place P`, else every place compiled in and present among cpu,
/// wgpu:0 and cuda:0.
fn places() -> Vec<Place> {
    if let Some(place) = arg("--place") {
        return place.parse().into_iter().collect();
    }
    let present = devstream::places();
    [Place::Cpu, Place::Wgpu(0), Place::Cuda(0)]
        .into_iter()
        .filter(|p| present.contains(p))
        .collect()
}

fn main() -> devstream::Result<()> {
    let quick = std::env::var_os("DEVSTREAM_BENCH_QUICK").is_some()
        || arg("--quick").is_some()
        || std::env::args().any(|a| a == "--quick");
    let (churn_steps, launches) = if quick { (200, 50) } else { (2_000, 500) };
    if let Some(n) = arg("--plan").and_then(|n| n.parse().ok()) {
        // The churn's first steps, to compare with `peers_cuda.py`'s `churn_plan`.
        for step in churn_plan(n) {
            println!("({}, {}, {})", step.producer, step.consumer, step.len);
        }
        return Ok(());
    }
    let mut rows = Vec::new();
    for place in places() {
        eprintln!("bench-pools on {place}");
        pair_rows(&place, quick, &mut rows)?;
        churn(&place, churn_steps)?;
        captured_step(&place, launches, if quick { 3 } else { 5 }, &mut rows)?;
    }
    report(&rows);
    Ok(())
}
