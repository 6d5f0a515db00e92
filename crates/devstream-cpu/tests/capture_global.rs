//! `CaptureMode::Global` prohibits unsafe calls from every thread (refused, the capture goes
//! on). In its own test binary (process) so that it cannot disturb other tests' synchronize
//! calls.

use devstream_core::{
    CaptureMode, DeviceBackend, DeviceEvent, DeviceStream, Error, EventFlags, Place, StreamOptions,
};
use devstream_cpu::{CpuBackend, CpuStream};

fn stream() -> CpuStream {
    CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap()
}

fn is_capture_error<T>(result: Result<T, Error>) -> bool {
    matches!(result, Err(Error::Capture { .. }))
}

#[test]
fn global_capture_prohibits_unsafe_calls_everywhere() {
    let (s, other) = (stream(), stream());
    let event = CpuBackend::new_event(&Place::Cpu, EventFlags::default()).unwrap();
    other.record(&event).unwrap();

    // Global: another thread's potentially unsafe calls are refused; the capture goes on.
    s.begin_capture(CaptureMode::Global).unwrap();
    let (o, e) = (other.clone(), event.clone());
    let results = std::thread::spawn(move || {
        (
            is_capture_error(o.synchronize()),
            is_capture_error(o.alloc_host(4)),
            is_capture_error(e.synchronize()),
            is_capture_error(o.query()),
            is_capture_error(e.query()),
        )
    })
    .join()
    .unwrap();
    assert_eq!(results, (true, true, true, true, true));
    s.end_capture().unwrap();

    // Once it has ended, nothing is prohibited.
    other.synchronize().unwrap();
    event.synchronize().unwrap();
    other.alloc_host(4).unwrap();

    // A clean Global capture (no unsafe calls) succeeds; the capturing thread itself is
    // prohibited too.
    s.begin_capture(CaptureMode::Global).unwrap();
    s.launch_host_func(Box::new(|| {})).unwrap();
    s.end_capture().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(is_capture_error(other.synchronize()));
    s.end_capture().unwrap();
    // Synchronizing the capturing stream itself invalidates the capture.
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(is_capture_error(s.synchronize()));
    assert!(is_capture_error(s.end_capture()));

    // ThreadLocal and Relaxed captures on one thread do not prohibit another thread.
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let o = other.clone();
    std::thread::spawn(move || o.synchronize().unwrap())
        .join()
        .unwrap();
    s.end_capture().unwrap();

    // A stream dropped while capturing in Global mode stops prohibiting.
    let dropped = stream();
    dropped.begin_capture(CaptureMode::Global).unwrap();
    drop(dropped);
    other.synchronize().unwrap();
}
