//! `bench-scale`: many live streams and events.
//!
//! For each size N (1,000, 10,000, 100,000 by default; `--max` lowers the top), creates N
//! streams and 10·N events, then times record / wait_event / event query spread across all of
//! them (event i recorded on stream i mod N, waited for by stream i+1 mod N), reads the
//! resident memory (`/proc/self/statm`) per live stream and per live event, and times dropping
//! everything. The `hot r+w+q` column times record + wait + query confined to 1,000 streams
//! and 10,000 events while all N stay alive, 20 rounds at every N (`--hot-rounds`) (what a framework's active set sees; the spread
//! columns touch every object and so measure the memory hierarchy too). Streams are made with `Stream::new`: the pool (`Stream::from_pool`) hands out at
//! most 32 distinct streams per priority level, so it cannot hold N live streams; its cost per
//! call is reported separately.
//!
//! ```text
//! bench-scale [--place cpu] [--max 100000]
//! ```

use devstream::{Event, EventFlags, Place, Priority, Stream};
use devstream_bench::{arg, arg_or};
use std::hint::black_box;
use std::time::Instant;

/// Resident memory in bytes (Linux), or 0 where it cannot be read.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn ns_per(start: Instant, n: usize) -> f64 {
    start.elapsed().as_nanos() as f64 / n as f64
}

fn run(place: &Place, n: usize, hot_rounds: usize, print: bool) -> devstream::Result<()> {
    let events_n = n * 10;
    let rss0 = rss();
    let t = Instant::now();
    let streams: Vec<Stream> = (0..n)
        .map(|_| Stream::new(place))
        .collect::<Result<_, _>>()?;
    let create_stream_ns = ns_per(t, n);
    let rss1 = rss();
    let t = Instant::now();
    let events: Vec<Event> = (0..events_n)
        .map(|_| Event::new(place, EventFlags::default()))
        .collect::<Result<_, _>>()?;
    let create_event_ns = ns_per(t, events_n);
    let rss2 = rss();

    // Spread the accesses: a stride co-prime with the sizes walks every object.
    let stride = 7919;
    let t = Instant::now();
    for i in 0..events_n {
        let e = &events[(i * stride) % events_n];
        e.record(&streams[(i * stride) % n])?;
    }
    let record_ns = ns_per(t, events_n);
    let t = Instant::now();
    for i in 0..events_n {
        let e = &events[(i * stride) % events_n];
        streams[(i * stride + 1) % n].wait_event(e)?;
    }
    let wait_ns = ns_per(t, events_n);
    let t = Instant::now();
    for i in 0..events_n {
        black_box(events[(i * stride) % events_n].query()?);
    }
    let query_ns = ns_per(t, events_n);
    let t = Instant::now();
    for i in 0..n {
        black_box(streams[(i * stride) % n].query()?);
    }
    let stream_query_ns = ns_per(t, n);
    // The same ops confined to a hot set of 1,000 streams and 10,000 events while all N stay
    // alive: whether live objects alone slow the ones in use (no O(N) structure on the path).
    // The same number of rounds at every N, and never re-recording an event on the stream it
    // was last recorded on (a round offset from 1): at N = 1,000 the spread pass above recorded
    // event i on stream i·stride mod 1,000, and a repeat of that record is a fast path the
    // other sizes would not get.
    // One untimed round first: it replaces the spread pass's records, whose streams (spread
    // over all N) a re-record releases, so that the timed rounds see the active set alone.
    let (hot_s, hot_e) = (n.min(1_000), events_n.min(10_000));
    let hot_round = |round: usize| -> devstream::Result<()> {
        for i in 0..hot_e {
            let e = &events[(i * stride) % hot_e];
            e.record(&streams[(i * stride + round) % hot_s])?;
            streams[(i * stride + round + 1) % hot_s].wait_event(e)?;
            black_box(e.query()?);
        }
        Ok(())
    };
    hot_round(1)?;
    let t = Instant::now();
    for round in 2..=hot_rounds + 1 {
        hot_round(round)?;
    }
    let hot_ns = ns_per(t, hot_rounds * hot_e);
    for s in &streams {
        s.synchronize()?;
    }
    let rss3 = rss();
    let t = Instant::now();
    drop(events);
    drop(streams);
    let drop_ms = t.elapsed().as_secs_f64() * 1e3;
    let per_stream = (rss1.saturating_sub(rss0)) as f64 / n as f64;
    let per_event = (rss2.saturating_sub(rss1)) as f64 / events_n as f64;
    if !print {
        return Ok(());
    }
    println!(
        "{:>8} {:>9} {:>10.1} {:>10.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>11.1} {:>10.0} {:>10.0} {:>10.1} {:>9}",
        n,
        events_n,
        create_stream_ns,
        create_event_ns,
        record_ns,
        wait_ns,
        query_ns,
        stream_query_ns,
        hot_ns,
        per_stream,
        per_event,
        drop_ms,
        rss3 / (1 << 20)
    );
    Ok(())
}

fn main() -> devstream::Result<()> {
    let place: Place = arg("--place").unwrap_or_else(|| "cpu".into()).parse()?;
    let max: usize = arg_or("--max", 100_000);
    // `--only N` runs one size (e.g. to profile it); `--hot-rounds R` repeats the hot pass.
    let only: Option<usize> = arg("--only").and_then(|v| v.parse().ok());
    let hot_rounds: usize = arg_or("--hot-rounds", 20).max(1);
    println!("bench-scale on {place}: N streams, 10·N events; ns per op spread over all of them");
    // First use of a place opens its device (e.g. a wgpu device, tens of ms): not a pool cost.
    drop(Stream::new(&place)?);
    black_box(Stream::from_pool(&place, Priority::Normal)?);
    let t = Instant::now();
    for _ in 0..10_000 {
        black_box(Stream::from_pool(&place, Priority::Normal)?);
    }
    println!(
        "Stream::from_pool: {:.1} ns per call (round robin over 32 streams)",
        ns_per(t, 10_000)
    );
    println!(
        "{:>8} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>11} {:>10} {:>10} {:>10} {:>9}",
        "streams",
        "events",
        "new_s ns",
        "new_e ns",
        "rec ns",
        "wait ns",
        "e.q ns",
        "s.q ns",
        "hot r+w+q",
        "B/stream",
        "B/event",
        "drop ms",
        "rss MiB"
    );
    // Warm-up (first-touch costs of the allocator and the backend), not reported.
    run(&place, 1_000, 1, false)?;
    let sizes = match only {
        Some(n) => vec![n],
        None => [1_000, 10_000, 100_000]
            .into_iter()
            .filter(|&n| n <= max)
            .collect(),
    };
    for n in sizes {
        run(&place, n, hot_rounds, true)?;
    }
    Ok(())
}
