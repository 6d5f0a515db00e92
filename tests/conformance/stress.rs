//! Stress: 8 threads × 10,000 iterations of create stream / record / wait / drop, in bounded
//! time, after which no stream or event is live (`live_counts()` returns to zero).
//!
//! Live counts are process wide and other tests (and the stream pool) keep streams alive, so
//! the check re-runs this test binary for this one test in a child process, where nothing else
//! runs.

use crate::harness::{caps, for_each_place_alone, wait_until, Gate};
use devstream::{live_counts, Event, EventFlags, LiveCounts, Stream};
use std::time::{Duration, Instant};

const CHILD: &str = "DEVSTREAM_CONFORMANCE_STRESS_CHILD";
const NAME: &str = "stress::create_record_wait_drop_under_load_leaves_nothing_live";
const THREADS: usize = 8;
const ITERATIONS: usize = 10_000;
/// The bound on one place's run (debug build, 2 cores), a hang detector: multiplied by
/// `DEVSTREAM_TEST_TIME_SCALE` (set by `cargo xtask sanitize`) for the slower tool builds.
fn bound() -> Duration {
    let scale = std::env::var("DEVSTREAM_TEST_TIME_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    Duration::from_secs(90) * scale
}

/// 8 threads × 10k create/record/wait/drop; bounded time; then nothing is live.
#[test]
fn create_record_wait_drop_under_load_leaves_nothing_live() {
    if std::env::var_os(CHILD).is_some() {
        for_each_place_alone(stress);
        return;
    }
    let places = crate::harness::places_under_test().len() as u32;
    let (status, stdout, stderr) = crate::harness::run_test_in_child(
        NAME,
        "devstream-stress",
        &[(CHILD, "1".to_string())],
        (bound() + Duration::from_secs(40)) * places,
    );
    eprintln!("--- stress child stdout ---\n{stdout}\n--- stress child stderr ---\n{stderr}");
    let status = status.expect("the stress child hung past its deadline and was killed");
    assert!(status.success(), "the stress child failed: {status}");
    assert!(
        stdout.contains("1 passed"),
        "the stress child did not run the stress test"
    );
}

fn counts_are(expected: LiveCounts) -> bool {
    live_counts() == expected
}

fn stress(place: &devstream::Place) -> devstream::Result<()> {
    let zero = LiveCounts::default();
    assert!(
        wait_until(Duration::from_secs(10), || counts_are(zero)),
        "before the stress, live counts are {:?}",
        live_counts()
    );
    // The counts see what is alive.
    {
        let streams = [
            Stream::new(place)?,
            Stream::new(place)?,
            Stream::new(place)?,
        ];
        let events = [
            streams[0].record_event()?,
            Event::new(place, EventFlags::default())?,
        ];
        assert_eq!(
            live_counts(),
            LiveCounts {
                streams: 3,
                events: 2
            },
            "live_counts with 3 streams and 2 events alive"
        );
        drop(events);
        for s in &streams {
            crate::harness::sync(s)?;
        }
    }
    assert!(
        wait_until(Duration::from_secs(10), || counts_are(zero)),
        "after dropping 3 idle streams and 2 events, live counts are {:?}",
        live_counts()
    );

    let caps = caps(place);
    let stalls_the_driver = crate::harness::gates_stall_the_driver(place);
    let started = Instant::now();
    let bound = bound();
    std::thread::scope(|scope| -> devstream::Result<()> {
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                scope.spawn(move || -> devstream::Result<()> {
                    let keeper = Stream::new(place)?;
                    let reused = Event::new(place, EventFlags::default())?;
                    for i in 0..ITERATIONS {
                        let stream = Stream::new(place)?;
                        // Every so often, drop a stream whose work is still held.
                        let gate = if i % 997 == thread {
                            Gate::close(&stream)?
                        } else {
                            None
                        };
                        // On CUDA and HIP a stream held at a flag can make another thread's
                        // stream creation wait inside the driver while it holds the driver's
                        // lock, so this thread's own driver calls below would wait behind it
                        // for a flag only it would set (the hazard documented on `Flag`). As
                        // that documentation says, the gate is opened by a thread that makes no
                        // driver call: once this thread has dropped the stream, or after a
                        // grace period if this thread is held up inside the driver.
                        let (dropped, opener) = match gate.as_ref() {
                            Some(gate) if stalls_the_driver => {
                                let (dropped, wait) = std::sync::mpsc::channel::<()>();
                                let open = gate.opener();
                                let opener = std::thread::spawn(move || {
                                    let _ = wait.recv_timeout(Duration::from_millis(50));
                                    open();
                                });
                                (Some(dropped), Some(opener))
                            }
                            _ => (None, None),
                        };
                        if caps.host_funcs && i % 61 == 0 {
                            stream.launch_host_func(|| {})?;
                        }
                        let event = stream.record_event()?;
                        keeper.wait_event(&event)?;
                        if i % 3 == 0 {
                            reused.record(&stream)?;
                            keeper.wait_event(&reused)?;
                        }
                        if i % 5 == 0 {
                            keeper.wait_stream(&stream)?;
                        }
                        drop(stream);
                        drop(event);
                        if let Some(dropped) = dropped {
                            let _ = dropped.send(());
                        }
                        if let Some(opener) = opener {
                            opener.join().expect("the gate's opener thread panicked");
                        }
                        drop(gate);
                        if i % 1000 == 999 {
                            crate::harness::sync(&keeper)?;
                        }
                        assert!(
                            started.elapsed() < bound,
                            "stress exceeded {bound:?} at thread {thread} iteration {i}"
                        );
                    }
                    crate::harness::sync(&keeper)
                })
            })
            .collect();
        for worker in workers {
            worker.join().expect("a stress thread panicked")?;
        }
        Ok(())
    })?;
    let elapsed = started.elapsed();
    eprintln!(
        "[conformance] stress on {place}: {} iterations in {elapsed:.2?} ({:.1} µs/iteration/thread)",
        THREADS * ITERATIONS,
        elapsed.as_secs_f64() * 1e6 / ITERATIONS as f64
    );
    assert!(elapsed < bound, "stress took {elapsed:?}, bound {bound:?}");
    assert!(
        wait_until(Duration::from_secs(10), || counts_are(zero)),
        "after the stress, live counts stay at {:?} (a leak)",
        live_counts()
    );
    Ok(())
}
