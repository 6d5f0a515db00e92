//! What the timeline recorder costs the op path when no recording runs: ns/op of
//! `stream.query()` and `stream.record(&event)` on an idle stream. Build it once without and
//! once with the cargo feature `trace` and compare (the recording stays off in both).
//!
//! ```text
//! cargo run --release --example trace_cost                     # feature absent
//! cargo run --release --example trace_cost --features trace    # feature present, recording off
//! cargo run --release --example trace_cost -- cuda:0           # any place (argv[1], default cpu)
//! ```

use devstream::{Event, EventFlags, Place, Result, Stream};
use std::time::Instant;

/// The median over `rounds` rounds of `iters` calls, in ns per call.
fn ns_per_op(rounds: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters / 10 {
        f();
    }
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() -> Result<()> {
    let place: Place = std::env::args()
        .nth(1)
        .as_deref()
        .unwrap_or("cpu")
        .parse()?;
    let stream = Stream::new(&place)?;
    let event = Event::new(&place, EventFlags::default())?;
    stream.synchronize()?;
    let feature = if cfg!(feature = "trace") {
        "present (recording off)"
    } else {
        "absent"
    };
    let query = ns_per_op(31, 100_000, || {
        let _ = std::hint::black_box(stream.query());
    });
    let record = ns_per_op(31, 100_000, || {
        let _ = std::hint::black_box(stream.record(&event));
    });
    stream.synchronize()?;
    println!("place {place}; trace feature {feature}");
    println!("stream.query()          {query:>9.2} ns/op");
    println!("stream.record(&event)   {record:>9.2} ns/op");
    Ok(())
}
