use devstream_core::reduce::reduce_chunks;
use devstream_core::{DataType, ReduceOp};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

struct Raw(*mut u8);
unsafe impl Send for Raw {}
unsafe impl Sync for Raw {}

fn median(mut v: Vec<Duration>) -> Duration { v.sort(); v[v.len() / 2] }

fn main() {
    let mode = std::env::args().nth(1).unwrap_or("locked".into());
    let n: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(4);
    let iters = 15;
    let bytes = 64usize << 20;
    let chunk_bytes = 64usize << 10;
    let bufs: Arc<Vec<Mutex<Box<[u8]>>>> = Arc::new((0..n).map(|r| Mutex::new(vec![r as u8 + 1; bytes].into_boxed_slice())).collect());
    let raws: Arc<Vec<Raw>> = Arc::new(bufs.iter().map(|b| Raw(b.lock().unwrap().as_mut_ptr())).collect());
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let barrier = Arc::new(Barrier::new(n + 1));
    let threads: Vec<_> = (0..n).map(|me| {
        let (bufs, raws, barrier, mode) = (bufs.clone(), raws.clone(), barrier.clone(), mode.clone());
        std::thread::spawn(move || {
            let slice = bytes / n;
            let base = me * slice;
            let size = 4;
            let mut times = Vec::new();
            for _ in 0..iters {
                barrier.wait();
                let t = Instant::now();
                let locked = mode == "locked";
                reduce_chunks(DataType::F32, ReduceOp::Sum, n, slice / size, chunk_bytes / size,
                    |i, first, chunk| {
                        let at = base + first * size;
                        let j = (me + i) % n;
                        if locked {
                            chunk.copy_from_slice(&bufs[j].lock().unwrap()[at..at + chunk.len()]);
                        } else {
                            unsafe { std::ptr::copy_nonoverlapping(raws[j].0.add(at), chunk.as_mut_ptr(), chunk.len()) };
                        }
                        Ok(())
                    },
                    |first, chunk| {
                        let at = base + first * size;
                        for i in 0..n {
                            let j = (me + i) % n;
                            if locked {
                                bufs[j].lock().unwrap()[at..at + chunk.len()].copy_from_slice(chunk);
                            } else {
                                unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), raws[j].0.add(at), chunk.len()) };
                            }
                        }
                        Ok(())
                    }).unwrap();
                times.push(t.elapsed());
                barrier.wait();
            }
            median(times)
        })
    }).collect();
    let mut copies = Vec::new();
    for _ in 0..iters {
        barrier.wait();
        barrier.wait();
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        copies.push(t.elapsed());
    }
    let per_rank: Vec<Duration> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let slowest = *per_rank.iter().max().unwrap();
    let memcpy = median(copies);
    println!("{mode} {n} ranks: memcpy {:.2} ms, rank parts {:?} ms, memcpy/slowest {:.2}", memcpy.as_secs_f64()*1e3,
        per_rank.iter().map(|d| (d.as_secs_f64()*1e4).round()/10.0).collect::<Vec<_>>(), memcpy.as_secs_f64()/slowest.as_secs_f64());
}
