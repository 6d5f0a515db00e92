//! Awaiting stream work from async Rust: one current-thread tokio runtime (one OS thread) keeps
//! 64 streams busy and awaits their completions concurrently — no thread blocked in
//! `synchronize` per stream, no polling loop. Each stream runs rounds of "fill a buffer, copy it
//! to a second one" and awaits `stream.completion()` after each round; the program prints the
//! rounds and bytes per second and checks every stream's final buffer.
//!
//! ```text
//! cargo run --release --example async [-- --place cpu|wgpu:0|cuda:0|... --rounds N --mib M]
//! ```
//!
//! (`--place` takes any place text; its backend's cargo feature must be on, e.g.
//! `--features wgpu`.)

use devstream::{DeviceBuffer, Error, Place, Result, Stream};
use std::time::Instant;

const STREAMS: usize = 64;

struct Args {
    place: Place,
    rounds: usize,
    bytes: usize,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        place: Place::Cpu,
        rounds: 200,
        bytes: 1 << 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| Error::InvalidArgument(format!("{flag} needs a value")))
        };
        let number = |text: String| {
            text.parse::<usize>()
                .map_err(|e| Error::InvalidArgument(format!("{text:?}: {e}")))
        };
        match flag.as_str() {
            "--place" => args.place = value()?.parse()?,
            "--rounds" => args.rounds = number(value()?)?.max(1),
            "--mib" => args.bytes = number(value()?)?.max(1) << 20,
            "--kib" => args.bytes = number(value()?)?.max(1) << 10,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "unknown argument {other:?} (expected --place, --rounds, --mib, --kib)"
                )))
            }
        }
    }
    Ok(args)
}

/// One stream's loop: a round of work, then await its completion (the task yields to the other
/// 63 while the device works).
async fn drive(
    stream: Stream,
    a: DeviceBuffer,
    b: DeviceBuffer,
    rounds: usize,
) -> Result<(Stream, DeviceBuffer)> {
    let len = a.len();
    for round in 0..rounds {
        stream.fill(&a, 0, len, round as u8)?;
        stream.copy_device_to_device(&b, 0, &a, 0, len)?;
        stream.completion().await?;
    }
    Ok((stream, b))
}

async fn run(args: Args) -> Result<()> {
    let mut streams = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        let stream = Stream::new(&args.place)?;
        let a = stream.alloc(args.bytes)?;
        let b = stream.alloc(args.bytes)?;
        streams.push((stream, a, b));
    }
    println!(
        "{STREAMS} streams on {}, {} rounds of fill + copy of {} KiB each, awaited on one \
         current-thread tokio runtime",
        args.place,
        args.rounds,
        args.bytes >> 10
    );
    let started = Instant::now();
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|(stream, a, b)| tokio::task::spawn_local(drive(stream, a, b, args.rounds)))
        .collect();
    let mut done = Vec::with_capacity(STREAMS);
    for task in tasks {
        done.push(task.await.expect("a stream task panicked")?);
    }
    let elapsed = started.elapsed();
    let rounds = (STREAMS * args.rounds) as f64;
    // Each round writes the buffer twice (fill, copy) and reads it once.
    let bytes = rounds * args.bytes as f64 * 3.0;
    println!(
        "{rounds} completions awaited in {elapsed:.2?}: {:.0} rounds/s, {:.2} GB/s of stream \
         work, {:.1} µs per awaited round",
        rounds / elapsed.as_secs_f64(),
        bytes / elapsed.as_secs_f64() / 1e9,
        elapsed.as_secs_f64() * 1e6 / rounds
    );
    // Check: every stream's copy holds its last round's value.
    let expected = (args.rounds - 1) as u8;
    for (stream, b) in &done {
        let host = stream.alloc_host(args.bytes)?;
        stream.copy_device_to_host(&host, 0, b, 0, args.bytes)?;
        stream.completion().await?;
        let data = host.to_vec()?;
        if let Some(i) = data.iter().position(|&x| x != expected) {
            return Err(Error::InvalidArgument(format!(
                "stream {}: byte {i} is {}, expected {expected}",
                stream.id(),
                data[i]
            )));
        }
    }
    println!("checked: every stream's buffer holds its last round");
    Ok(())
}

fn main() {
    let result = parse_args().and_then(|args| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread tokio runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, run(args))
    });
    match result {
        Ok(()) => {}
        Err(e @ (Error::BackendUnavailable { .. } | Error::NoDevice { .. })) => {
            println!("the place is not available here, nothing to run: {e}");
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
