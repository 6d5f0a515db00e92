//! Hostile host functions: calls back into devstream from inside a host
//! function, host functions that block, closures and panic payloads whose `Drop` panics. Every
//! test runs its body under a watchdog, so a hang fails in seconds instead of stalling the run.

use crate::tests::stream;
use crate::*;
use devstream_core::{
    DeviceBackend, DeviceEvent, DeviceFlag, DeviceGraph, DeviceStream, Error, EventFlags,
    HostBuffer, Place,
};
use std::sync::{mpsc, Arc};
use std::time::Duration;

const PLACE: Place = Place::Wgpu(0);
const WATCHDOG: Duration = Duration::from_secs(20);

/// Runs `body` on its own thread and fails the test if it has not finished within the
/// watchdog's time (a hang), re-raising its panic if it panicked.
fn watchdog(what: &str, body: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(WATCHDOG) {
        Ok(()) => thread.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(payload) = thread.join() {
                std::panic::resume_unwind(payload);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("HANG: {what} did not finish within {WATCHDOG:?}")
        }
    }
}

/// Runs `body` with a new stream of `PLACE` under the [`watchdog`] (`what` names it); skips
/// where there is no wgpu device.
fn with_stream(what: &str, body: impl FnOnce(WgpuStream) + Send + 'static) {
    let Some(s) = stream() else { return };
    watchdog(what, move || body(s));
}

/// On `s`: an 8-byte device buffer filled with 1s, a [`gate`], and behind it a copy of the
/// buffer into a new host buffer (pending until the gate is set): `(device, host, gate)`.
fn gated_download_of_ones(s: &WgpuStream) -> (WgpuBuffer, Arc<WgpuHostBuffer>, WgpuFlag) {
    let device = s.alloc(8).unwrap();
    let host = Arc::new(s.alloc_host(8).unwrap());
    s.fill(&device, 0, 8, 1).unwrap();
    let flag = gate(s);
    s.copy_device_to_host(&host, 0, &device, 0, 8).unwrap();
    (device, host, flag)
}

/// Gates `s` behind a flag, so that what is enqueued next is all queued before any of it runs.
/// Launches on `s` a host function that sends what `body` answers; answers the receiving end.
fn launch_sending<T: Send + 'static>(
    s: &WgpuStream,
    body: impl FnOnce() -> T + Send + 'static,
) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel();
    let mut body = Some(body);
    s.launch_host_func(Box::new(move || {
        if let Some(body) = body.take() {
            let _ = tx.send(body());
        }
    }))
    .unwrap();
    rx
}

fn gate(s: &WgpuStream) -> WgpuFlag {
    let flag = WgpuFlag::new(PLACE);
    s.wait_flag(&flag, 1).unwrap();
    flag
}

fn is_refusal(result: &devstream_core::Result<()>) -> bool {
    matches!(result, Err(Error::WouldDeadlock { .. }))
}

/// A host function that reads a host buffer sees the copies queued before it and does
/// not wait for the copies queued after it on the same stream.
#[test]
fn host_buffer_read_in_a_host_function_sees_earlier_copies_only() {
    with_stream("reading a host buffer from a host function", |s| {
        let (device, host, flag) = gated_download_of_ones(&s);
        let h = Arc::clone(&host);
        let seen = launch_sending(&s, move || h.to_vec());
        s.fill(&device, 0, 8, 2).unwrap();
        s.copy_device_to_host(&host, 0, &device, 0, 8).unwrap();
        flag.set(1);
        s.synchronize().unwrap();
        assert_eq!(seen.recv().unwrap().unwrap(), vec![1; 8]);
        assert_eq!(host.to_vec().unwrap(), vec![2; 8]);
    });
}

/// A host function that writes a host buffer does not wait for a host→device copy
/// queued after it; that copy reads the buffer after the host function, as stream order says.
#[test]
fn host_buffer_write_in_a_host_function_precedes_later_uploads() {
    with_stream("writing a host buffer from a host function", |s| {
        let out = s.alloc(8).unwrap();
        // A device→host copy still pending makes the later host→device copy a deferred one.
        let (_device, host, flag) = gated_download_of_ones(&s);
        let h = Arc::clone(&host);
        let wrote = launch_sending(&s, move || h.write(0, &[7; 8]));
        s.copy_host_to_device(&out, 0, &host, 0, 8).unwrap();
        flag.set(1);
        s.synchronize().unwrap();
        wrote.recv().unwrap().unwrap();
        let check = s.alloc_host(8).unwrap();
        s.copy_device_to_host(&check, 0, &out, 0, 8).unwrap();
        s.synchronize().unwrap();
        assert_eq!(check.to_vec().unwrap(), vec![7; 8]);
    });
}

/// A host→device copy queued after a host function that writes its source reads what
/// the host function wrote, also when no device→host copy into the source is pending.
#[test]
fn a_host_to_device_copy_queued_after_a_host_function_reads_its_write() {
    with_stream("a copy after a host function's write", |s| {
        let out = s.alloc(8).unwrap();
        let host = Arc::new(s.alloc_host(8).unwrap());
        let h = Arc::clone(&host);
        let flag = gate(&s);
        s.launch_host_func(Box::new(move || h.write(0, &[9; 8]).unwrap()))
            .unwrap();
        s.copy_host_to_device(&out, 0, &host, 0, 8).unwrap();
        let check = s.alloc_host(8).unwrap();
        s.copy_device_to_host(&check, 0, &out, 0, 8).unwrap();
        flag.set(1);
        s.synchronize().unwrap();
        assert_eq!(
            check.to_vec().unwrap(),
            vec![9; 8],
            "the copy did not see the host function's write"
        );
    });
}

/// Blocking calls from inside a host function either complete (what they wait for is
/// before the host function in stream order, or independent of it) or answer a typed error
/// (they would wait for work queued after the host function); none hangs.
#[test]
fn blocking_calls_inside_a_host_function_complete_or_refuse() {
    let Some(s) = stream() else { return };
    let Some(other) = stream() else { return };
    let Some(dependent) = stream() else { return };
    watchdog("blocking calls from a host function", move || {
        let before = s.record_event().unwrap();
        let after = WgpuBackend::new_event(&PLACE, EventFlags::default()).unwrap();
        let flag = gate(&s);
        let (results_tx, results) = mpsc::channel();
        let (me, o, d, b, a) = (
            s.clone(),
            other.clone(),
            dependent.clone(),
            before.clone(),
            after.clone(),
        );
        s.launch_host_func(Box::new(move || {
            let r = vec![
                ("own synchronize", me.synchronize()),
                ("event recorded before", b.synchronize()),
                ("event recorded after", a.synchronize()),
                ("independent stream", o.synchronize()),
                ("stream waiting on later work", d.synchronize()),
                ("query", me.query().map(|done| assert!(!done))),
                ("record on another stream", o.record_event().map(drop)),
                ("flag write", o.write_flag(&WgpuFlag::new(PLACE), 1)),
                (
                    "alloc and drop",
                    me.alloc(16).map(drop).and(me.alloc_host(16).map(drop)),
                ),
            ];
            let _ = results_tx.send(r);
        }))
        .unwrap();
        s.record(&after).unwrap();
        dependent.wait_event(&after).unwrap();
        dependent.launch_host_func(Box::new(|| {})).unwrap();
        flag.set(1);
        s.synchronize().unwrap();
        dependent.synchronize().unwrap();
        for (what, result) in results.recv().unwrap() {
            let refused = matches!(
                what,
                "own synchronize" | "event recorded after" | "stream waiting on later work"
            );
            if refused {
                assert!(
                    is_refusal(&result),
                    "{what}: expected a refusal, got {result:?}"
                );
            } else {
                assert!(result.is_ok(), "{what}: {result:?}");
            }
        }
    });
}

/// Handles dropped inside a host function (the last handle of its own stream, an event
/// recorded after it, a buffer a later copy uses) neither block nor break the work queued after
/// it, and `elapsed` of events recorded after it answers `NotReady`.
#[test]
fn handles_dropped_inside_a_host_function() {
    let Some(s) = stream() else { return };
    let timed = s.capabilities().timing;
    watchdog("drops inside a host function", move || {
        let buffer = Arc::new(s.alloc(8).unwrap());
        let host = s.alloc_host(8).unwrap();
        let flag = gate(&s);
        let flags = if timed {
            EventFlags::timed()
        } else {
            EventFlags::default()
        };
        let start = WgpuBackend::new_event(&PLACE, flags).unwrap();
        let end = WgpuBackend::new_event(&PLACE, flags).unwrap();
        let (answers_tx, answers) = mpsc::channel();
        let mut handles = Some((s.clone(), Arc::clone(&buffer), start.clone(), end.clone()));
        s.launch_host_func(Box::new(move || {
            if let Some((me, b, e0, e1)) = handles.take() {
                let elapsed = e0.elapsed(&e1);
                drop((b, e0, e1));
                drop(me);
                let _ = answers_tx.send(elapsed);
            }
        }))
        .unwrap();
        s.record(&start).unwrap();
        s.fill(&buffer, 0, 8, 3).unwrap();
        s.copy_device_to_host(&host, 0, &buffer, 0, 8).unwrap();
        s.record(&end).unwrap();
        // The host function holds the last handles of all of them.
        drop((start, end, buffer, s));
        flag.set(1);
        let elapsed = answers.recv().unwrap();
        if timed {
            assert_eq!(elapsed, Err(Error::NotReady));
        }
        // Reading waits for the copy queued after the host function.
        assert_eq!(host.to_vec().unwrap(), vec![3; 8]);
    });
}

/// A graph launched from inside a host function of the stream it launches on runs
/// after the host function.
#[test]
fn graph_launch_from_a_host_function() {
    with_stream("graph launch from a host function", |s| {
        s.begin_capture(devstream_core::CaptureMode::Relaxed)
            .unwrap();
        let ran = launch_sending(&s, || ());
        let graph = s.end_capture().unwrap();
        let me = s.clone();
        let g = graph.clone();
        s.launch_host_func(Box::new(move || g.launch(&me).unwrap()))
            .unwrap();
        s.synchronize().unwrap();
        s.synchronize().unwrap();
        ran.recv_timeout(Duration::from_secs(10)).unwrap();
    });
}

/// One host function that blocks (until a host function of another stream runs) does
/// not stall the other streams of the device.
#[test]
fn a_blocking_host_function_does_not_stall_other_streams() {
    let Some(a) = stream() else { return };
    let Some(b) = stream() else { return };
    watchdog("a host function waiting for another stream's", move || {
        let (started_tx, started) = mpsc::channel();
        let (release_tx, release) = mpsc::channel::<()>();
        a.launch_host_func(Box::new(move || {
            let _ = started_tx.send(());
            let _ = release.recv();
        }))
        .unwrap();
        started.recv().unwrap();
        b.launch_host_func(Box::new(move || {
            let _ = release_tx.send(());
        }))
        .unwrap();
        b.synchronize().unwrap();
        a.synchronize().unwrap();
    });
}

/// Panics in its `Drop`.
struct PanicsOnDrop(&'static str);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            std::panic::panic_any(Nested(self.0));
        }
    }
}

/// A panic payload whose own `Drop` panics too (the second level is leaked, not dropped).
struct Nested(&'static str);

impl Drop for Nested {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("{}: the payload's drop panicked too", self.0);
        }
    }
}

/// `s` reports its host function's panic once, and `s` and `other` still run host functions.
fn reports_the_panic_and_keeps_working(s: &WgpuStream, other: &WgpuStream) {
    let result = s.synchronize();
    assert!(
        matches!(result, Err(Error::HostFuncPanicked { .. })),
        "{result:?}"
    );
    runs_a_host_function(other);
    runs_a_host_function(s);
}

fn runs_a_host_function(s: &WgpuStream) {
    let ran = launch_sending(s, || ());
    s.synchronize().unwrap();
    ran.recv().unwrap();
}

/// Queues the host function `f` (which panics, or whose drop does) on a new stream under the
/// [`watchdog`] (`what` names it): the panic is reported, and that stream and another one keep
/// running host functions.
fn contains_the_panic_of(what: &str, f: impl FnMut() + Send + 'static) {
    let Some(s) = stream() else { return };
    let Some(other) = stream() else { return };
    watchdog(what, move || {
        s.launch_host_func(Box::new(f)).unwrap();
        reports_the_panic_and_keeps_working(&s, &other);
        runs_a_host_function(&s);
    });
}

/// A host closure whose destructor panics does not kill the device's scheduling.
#[test]
fn a_host_closure_whose_drop_panics_leaves_the_device_working() {
    let bomb = PanicsOnDrop("closure drop");
    contains_the_panic_of("streams after a host closure's drop panicked", move || {
        let _keep = &bomb;
    });
}

/// A host function that panics with a payload whose `Drop` panics (and whose second
/// payload's `Drop` panics as well) is reported, and the device keeps working.
#[test]
fn a_panic_payload_whose_drop_panics_is_reported_and_the_device_keeps_working() {
    contains_the_panic_of("streams after a panic payload's drop panicked", || {
        std::panic::panic_any(PanicsOnDrop("payload"));
    });
}

/// Host functions, submissions and polls from several threads at once leave the device without
/// a fault. (A poller that waited with a timeout in `Device::poll` would trip wgpu's internal
/// assertion when another thread's poll or submission drains the queue meanwhile, and the device
/// would then report a `Device::poll` fault on every stream.)
#[test]
fn concurrent_host_functions_and_polls_leave_the_device_healthy() {
    let Some(first) = stream() else { return };
    let device = first.wgpu_device();
    watchdog("concurrent host functions and polls", move || {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = WgpuBackend::new_stream(&PLACE, Default::default()).unwrap();
                std::thread::spawn(move || {
                    // Big enough that a poll slice (1 ms) runs out while the fill runs.
                    const BYTES: usize = 4 << 20;
                    let buffer = s.alloc(BYTES).unwrap();
                    for i in 0..40u32 {
                        s.fill(&buffer, 0, BYTES, i as u8).unwrap();
                        s.launch_host_func(Box::new(|| {})).unwrap();
                        s.fill(&buffer, 0, 256, 1).unwrap();
                        let event = s.record_event().unwrap();
                        while !event.query().unwrap() {
                            std::thread::yield_now();
                        }
                    }
                    s.synchronize().unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(device.fault(), None);
        first.synchronize().unwrap();
    });
}
