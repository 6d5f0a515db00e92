//! `bench-priority`: does high-priority work jump the queue?
//!
//! Background streams (`Priority::Normal`, the least priority of the place) are kept full of
//! long work (busy host functions of `--long-us`, default 500 µs; `--depth` of them queued per
//! stream at all times); a probe stream submits a short host function every millisecond. The
//! probe's latency (submit → start) is reported at p50 and p99, with the probe stream at
//! `Priority::High` and at `Priority::Normal`, and their ratio.
//!
//! ```text
//! bench-priority [--place cpu] [--probes 1000] [--background 4] [--depth 8] [--long-us 500]
//! ```

use devstream::{Place, Priority, Stream};
use devstream_bench::{arg, arg_or, print_priority};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn busy(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

struct Config {
    probes: usize,
    background: usize,
    depth: u64,
    long: Duration,
}

/// Latencies (µs) of the probes, sorted.
fn run(place: &Place, probe_priority: Priority, c: &Config) -> devstream::Result<Vec<f64>> {
    let background: Vec<(Stream, Arc<AtomicU64>)> = (0..c.background)
        .map(|_| {
            Stream::builder(place)
                .priority(Priority::Normal)
                .build()
                .map(|s| (s, Arc::new(AtomicU64::new(0))))
        })
        .collect::<Result<_, _>>()?;
    let mut submitted = vec![0u64; c.background];
    let probe = Stream::builder(place).priority(probe_priority).build()?;
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(c.probes)));
    let top_up = |submitted: &mut [u64]| -> devstream::Result<()> {
        for (i, (s, done)) in background.iter().enumerate() {
            while submitted[i] - done.load(Ordering::Relaxed) < c.depth {
                let done = done.clone();
                let long = c.long;
                s.launch_host_func(move || {
                    busy(long);
                    done.fetch_add(1, Ordering::Relaxed);
                })?;
                submitted[i] += 1;
            }
        }
        Ok(())
    };
    top_up(&mut submitted)?;
    // Let the background fill the workers first.
    std::thread::sleep(c.long * 2);
    let start = Instant::now();
    for k in 0..c.probes {
        top_up(&mut submitted)?;
        let due = start + Duration::from_millis(k as u64);
        while Instant::now() < due {
            std::thread::sleep(Duration::from_micros(50));
        }
        let submit = Instant::now();
        let latencies = latencies.clone();
        probe.launch_host_func(move || {
            let us = submit.elapsed().as_secs_f64() * 1e6;
            if let Ok(mut l) = latencies.lock() {
                l.push(us);
            }
        })?;
    }
    probe.synchronize()?;
    for (s, _) in &background {
        s.synchronize()?;
    }
    let mut l = latencies.lock().map(|l| l.clone()).unwrap_or_default();
    l.sort_by(f64::total_cmp);
    Ok(l)
}

fn main() -> devstream::Result<()> {
    let place: Place = arg("--place").unwrap_or_else(|| "cpu".into()).parse()?;
    let c = Config {
        probes: arg_or("--probes", 1000),
        background: arg_or("--background", 4),
        depth: arg_or("--depth", 8),
        long: Duration::from_micros(arg_or("--long-us", 500)),
    };
    let caps = devstream::capabilities(&place)?;
    println!(
        "bench-priority on {place} (priorities: {}, range {:?}): {} background streams at Normal, \
         {} x {:?} queued each; a probe every 1 ms, {} probes",
        caps.priorities,
        devstream::priority_range(&place)?,
        c.background,
        c.depth,
        c.long,
        c.probes
    );
    let high = run(&place, Priority::High, &c)?;
    let normal = run(&place, Priority::Normal, &c)?;
    print_priority(&high, &normal);
    Ok(())
}
