//! Redundant-wait elision on a real GPU (the shared CUDA/HIP code of devstream-gpu-common).
//!
//! Its own test binary: once a raw handle is wrapped or handed out, elision stops on the device
//! for the rest of the process (by design), so the scenarios run in one test, in order, with the
//! export last. Skips without a CUDA device unless `DEVSTREAM_REQUIRE` lists `cuda`.

use devstream_core::elide::elided_on_this_thread;
use devstream_core::{CaptureMode, DeviceBackend, DeviceFlag, DeviceStream, StreamOptions};
use devstream_cuda::CudaBackend;
use std::sync::{Arc, Mutex};

mod common;
use common::{gpu, or_skip, stream};

type Log = Arc<Mutex<Vec<&'static str>>>;

fn push(log: &Log, what: &'static str) -> devstream_core::HostFn {
    let log = log.clone();
    Box::new(move || log.lock().unwrap().push(what))
}

/// Counts the waits `f` elided on this thread.
fn elided(f: impl FnOnce()) -> u64 {
    let before = elided_on_this_thread();
    f();
    elided_on_this_thread() - before
}

#[test]
fn implied_waits_are_elided_and_never_across_captures_or_foreign_handles() {
    let (place, _serial) = or_skip!(gpu());
    // Loaded before anything is held: stream creation can wait for streams held at a flag,
    // and module loading may do the same.
    let module = devstream_cuda::ptx::load(&place).unwrap();
    let noop = module.function("noop").unwrap();
    // Every stream is made before a is held: CUDA's stream creation can wait for held streams.
    let b = stream(&place);
    let plain =
        CudaBackend::new_stream(&place, StreamOptions::default().elide_waits(false)).unwrap();
    let c = stream(&place);
    // a is held at a flag, so everything recorded on it stays incomplete until the end.
    let a = stream(&place);
    let gate = CudaBackend::new_flag(&place).unwrap();
    a.wait_flag(&gate, 1).unwrap();
    let log: Log = Arc::default();
    a.launch_host_func(push(&log, "a1")).unwrap();
    let e1 = a.record_event().unwrap();
    a.launch_host_func(push(&log, "a2")).unwrap();
    let e2 = a.record_event().unwrap();

    // 1. Direct ordering: after waiting for e2, e1 and e2 again are implied; a wait on the
    //    stream's own event is implied.
    assert_eq!(
        elided(|| b.wait_event(&e2).unwrap()),
        0,
        "first wait is issued"
    );
    assert_eq!(
        elided(|| b.wait_event(&e1).unwrap()),
        1,
        "older record of a: implied"
    );
    assert_eq!(
        elided(|| b.wait_event(&e2).unwrap()),
        1,
        "same record again: implied"
    );
    let own = b.record_event().unwrap();
    assert_eq!(
        elided(|| b.wait_event(&own).unwrap()),
        1,
        "own record: implied"
    );
    // A kernel launched through devstream hands no handle out: elision stays on (it once used
    // the public `raw_handle`, which turned elision off on the device for good).
    // SAFETY: `noop` takes no parameters.
    unsafe {
        b.launch_kernel(
            &noop,
            devstream_cuda::LaunchConfig::for_elements(1, 1),
            &[] as &[devstream_cuda::KernelArg<'_, _>],
        )
    }
    .unwrap();
    assert_eq!(
        elided(|| b.wait_event(&e2).unwrap()),
        1,
        "same record after a devstream kernel launch: implied"
    );
    // A re-recorded event is judged by its record at the time of the wait.
    a.launch_host_func(push(&log, "a3")).unwrap();
    a.record(&e1).unwrap();
    assert_eq!(
        elided(|| b.wait_event(&e1).unwrap()),
        0,
        "re-recorded later: issued"
    );
    // An event recorded by a second stream is judged by nothing any more (its mark is
    // untrusted for good): every wait on it is issued.
    let shared = a.record_event().unwrap();
    assert_eq!(elided(|| b.wait_event(&shared).unwrap()), 0, "first wait");
    assert_eq!(elided(|| b.wait_event(&shared).unwrap()), 1, "implied");
    c.record(&shared).unwrap();
    assert_eq!(
        elided(|| b.wait_event(&shared).unwrap()),
        0,
        "recorded by a second stream: issued"
    );
    a.record(&shared).unwrap();
    assert_eq!(
        elided(|| b.wait_event(&shared).unwrap()),
        0,
        "back on its first stream: still issued"
    );
    b.launch_host_func(push(&log, "b")).unwrap();

    // elide_waits(false) issues everything.
    plain.wait_event(&e2).unwrap();
    assert_eq!(elided(|| plain.wait_event(&e2).unwrap()), 0, "elision off");

    // 2. While a capture is active on the device (here on another stream), nothing is elided,
    //    not even a wait made redundant before the capture began.
    c.begin_capture(CaptureMode::Relaxed).unwrap();
    c.launch_host_func(push(&log, "captured")).unwrap();
    assert_eq!(
        elided(|| b.wait_event(&e2).unwrap()),
        0,
        "a wait during a capture on the device is issued"
    );
    let graph = c.end_capture().unwrap();
    drop(graph);
    assert_eq!(
        elided(|| b.wait_event(&e2).unwrap()),
        1,
        "after the capture, eager ordering still implies it"
    );

    // Everything runs in the order the waits (issued or elided) promise.
    gate.set(1);
    b.synchronize().unwrap();
    a.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), ["a1", "a2", "a3", "b"]);

    // 3. Once a handle is handed out, someone else may capture or record: no elision on the
    //    device any more.
    let _raw = a.raw_handle();
    let e3 = a.record_event().unwrap();
    b.wait_event(&e3).unwrap();
    assert_eq!(
        elided(|| b.wait_event(&e3).unwrap()),
        0,
        "no elision after a raw handle was handed out"
    );
    b.synchronize().unwrap();
}
