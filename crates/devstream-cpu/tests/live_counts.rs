//! Live counts return to zero once every stream and event is dropped and their work has run.
//! In its own test binary (process) because the counts are process-wide.

use devstream_core::{
    DeviceBackend, DeviceFlag, DeviceStream, EventFlags, LiveCounts, Place, StreamOptions,
};
use devstream_cpu::{CpuBackend, CpuPool};
use std::time::{Duration, Instant};

/// Waits (bounded) for the counts to reach `expected`: the last handle of a stream whose work
/// just finished is released by the worker thread right after the task.
fn wait_for_counts(expected: LiveCounts) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while CpuBackend::live_counts() != expected {
        assert!(
            Instant::now() < deadline,
            "live counts stuck at {:?}, expected {:?}",
            CpuBackend::live_counts(),
            expected
        );
        std::thread::yield_now();
    }
}

#[test]
fn live_counts_return_to_zero() {
    let zero = LiveCounts::default();
    // Singletons are not counted.
    let legacy = CpuBackend::default_stream(&Place::Cpu).unwrap();
    let per_thread = CpuBackend::per_thread_stream(&Place::Cpu).unwrap();
    assert_eq!(CpuBackend::live_counts(), zero);

    let gate = CpuBackend::new_flag(&Place::Cpu).unwrap();
    let done = CpuBackend::new_flag(&Place::Cpu).unwrap();
    {
        let a = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
        let b =
            CpuBackend::new_stream(&Place::Cpu, StreamOptions::default().blocking(true)).unwrap();
        let pool = CpuPool::new(1).unwrap();
        let c = pool.new_stream(StreamOptions::default());
        let timed = CpuBackend::new_event(&Place::Cpu, EventFlags::timed()).unwrap();
        assert_eq!(
            CpuBackend::live_counts(),
            LiveCounts {
                streams: 3,
                events: 1
            }
        );
        a.wait_flag(&gate, 1).unwrap();
        a.record(&timed).unwrap();
        let e = a.record_event().unwrap();
        b.wait_event(&e).unwrap();
        b.wait_stream(&a).unwrap();
        c.wait_stream(&b).unwrap();
        c.write_flag(&done, 1).unwrap();
        legacy.wait_stream(&c).unwrap();
        per_thread.wait_stream(&legacy).unwrap();
        // Capture state must not keep streams alive either.
        let captured = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
        captured
            .begin_capture(devstream_core::CaptureMode::Relaxed)
            .unwrap();
        a.wait_stream(&captured).unwrap_or(());
    }
    // Everything dropped with work still queued (held by the gate): nothing blocked, and the
    // queued work keeps what it needs.
    assert!(CpuBackend::live_counts().streams > 0);
    gate.set(1);
    per_thread.synchronize().unwrap();
    assert_eq!(done.get(), 1);
    wait_for_counts(zero);

    // Many short-lived objects across threads.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..500 {
                    let s = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
                    let t = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
                    s.launch_host_func(Box::new(|| {})).unwrap();
                    let e = s.record_event().unwrap();
                    t.wait_event(&e).unwrap();
                    t.launch_host_func(Box::new(|| {})).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    wait_for_counts(zero);
}
