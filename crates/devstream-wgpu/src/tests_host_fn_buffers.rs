//! Crate tests of wgpu host buffers given to host functions (`HostBuffer::host_fn_access`, the
//! backend side of `launch_host_func_with`): the wgpu specifics the conformance suite does not
//! reach. Each host function is submitted as the facade submits it: its stream waits for the
//! snapshot's completions, then runs it with the bytes' view and ends the registered use.
//! Waits on channels are hang detectors only, sized for slow tools.

use crate::tests::stream;
use crate::*;
use devstream_core::foreign::BackendKey;
use devstream_core::host_fn_access::HostFnAccess;
use devstream_core::{
    CaptureMode, DeviceBackend, DeviceFlag, DeviceGraph, DeviceStream, Error, HostBuffer, Place,
    StreamOptions,
};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

const PLACE: Place = Place::Wgpu(0);
const LEN: usize = 64;
const PATIENCE: Duration = Duration::from_secs(120);

/// Submits `f` on `runner` given `buffer`, as `launch_host_func_with` does.
fn launch_with(
    runner: &WgpuStream,
    buffer: &WgpuHostBuffer,
    f: impl FnOnce(&mut [u8]) + Send + 'static,
) {
    let HostFnAccess {
        before,
        registered,
        mut bytes,
        before_queued,
    } = buffer.host_fn_access(BackendKey::of(&PLACE)).unwrap();
    // As the facade does: queued after what it waits for.
    registered.wait_earlier_queued();
    if let Some(copies_queued) = before_queued {
        copies_queued();
    }
    for (awaited, _) in before {
        runner.wait_completion(awaited).unwrap();
    }
    // Copies submitted from now on wait for the host function, once it is queued.
    let _submission = registered.submission();
    let mut once = Some((f, registered));
    runner
        .launch_host_func(Box::new(move || {
            if let Some((f, registered)) = once.take() {
                f(&mut bytes.view());
                drop(registered);
            }
        }))
        .unwrap();
}

/// A second handle to the same host buffer.
fn same(buffer: &WgpuHostBuffer) -> WgpuHostBuffer {
    WgpuHostBuffer {
        inner: Arc::clone(&buffer.inner),
    }
}

/// Inside the host function given a buffer, a read or write of that buffer is refused with
/// `Error::WouldDeadlock` (its bytes are held while it runs, and a pending host function given
/// it may be queued after the caller), and the would-wait answers say so; what the host
/// function wrote through its view lands.
#[test]
fn a_host_function_reading_the_buffer_it_was_given_is_refused_not_hung() {
    let Some(s) = stream() else {
        return;
    };
    let host = s.alloc_host(LEN).unwrap();
    let inside = same(&host);
    let (sender, answers) = mpsc::channel();
    launch_with(&s, &host, move |bytes| {
        bytes.fill(5);
        let mut out = [0; 4];
        let read = inside.read(0, &mut out);
        let write = inside.write(0, &[1]);
        let would_wait = (inside.read_would_wait(), inside.write_would_wait());
        let _ = sender.send((read, write, would_wait));
    });
    let (read, write, would_wait) = answers
        .recv_timeout(PATIENCE)
        .expect("the host function hung reading its own buffer");
    assert!(matches!(read, Err(Error::WouldDeadlock { .. })), "{read:?}");
    assert!(
        matches!(write, Err(Error::WouldDeadlock { .. })),
        "{write:?}"
    );
    assert_eq!(would_wait, (true, true));
    s.synchronize().unwrap();
    assert_eq!(host.to_vec().unwrap(), vec![5; LEN]);
    assert_eq!(
        (host.read_would_wait(), host.write_would_wait()),
        (false, false)
    );
}

/// Where the device→host copy into the buffer is when the host function is given it.
#[derive(Clone, Copy)]
enum CopyAt {
    /// Still in its stream's encoder.
    Encoder,
    /// Held behind a flag wait of its stream, submitted once the flag is set.
    Gated,
    /// Submitted (an event recorded after it flushed the stream).
    Submitted,
}

/// A device of its own with a device→host copy of `LEN` bytes of `value` into a host buffer
/// (placed as `at` says, behind `gate` when gated), and a host function given that buffer on
/// `runner`, submitted after the copy, that sends the bytes it sees to `seen`.
struct CopyThenHostFn {
    device: WgpuDevice,
    stream: WgpuStream,
    gate: WgpuFlag,
    seen: mpsc::Receiver<Vec<u8>>,
}

fn copy_then_host_fn(runner: &WgpuStream, at: CopyAt, value: u8) -> CopyThenHostFn {
    let device = crate::device::fresh_device(0).expect("a second device on wgpu:0's adapter");
    let stream = device.new_stream(StreamOptions::default()).unwrap();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    let on_device = stream.alloc(LEN).unwrap();
    let host = stream.alloc_host(LEN).unwrap();
    if let CopyAt::Gated = at {
        stream.wait_flag(&gate, 1).unwrap();
    }
    stream.fill(&on_device, 0, LEN, value).unwrap();
    stream
        .copy_device_to_host(&host, 0, &on_device, 0, LEN)
        .unwrap();
    if let CopyAt::Submitted = at {
        stream.record_event().unwrap();
    }
    let (sender, seen) = mpsc::channel();
    launch_with(runner, &host, move |bytes| {
        let _ = sender.send(bytes.to_vec());
    });
    CopyThenHostFn {
        device,
        stream,
        gate,
        seen,
    }
}

/// A host function given a buffer waits for the device→host copy into it submitted before,
/// on a device of its own that nobody else polls or synchronizes: the copy's mapping, which
/// ends its use of the buffer, is driven by that device's own threads, and the host function
/// sees the copied bytes.
fn a_host_function_sees_a_copy_on_a_device_nobody_polls(at: CopyAt) {
    let Some(runner) = stream() else {
        return;
    };
    let setup = copy_then_host_fn(&runner, at, 0x3c);
    setup.gate.set(1);
    let seen = setup
        .seen
        .recv_timeout(PATIENCE)
        .expect("the host function never ran: the copy before it never landed");
    assert_eq!(seen, vec![0x3c; LEN]);
    runner.synchronize().unwrap();
    setup.stream.synchronize().unwrap();
}

#[test]
fn a_host_function_sees_a_copy_left_in_its_streams_encoder() {
    a_host_function_sees_a_copy_on_a_device_nobody_polls(CopyAt::Encoder);
}

#[test]
fn a_host_function_sees_a_copy_held_behind_a_gate() {
    a_host_function_sees_a_copy_on_a_device_nobody_polls(CopyAt::Gated);
}

#[test]
fn a_host_function_sees_a_copy_already_submitted() {
    a_host_function_sees_a_copy_on_a_device_nobody_polls(CopyAt::Submitted);
}

/// A device→host copy held behind a gate on a device that is then destroyed never lands; a
/// host function given its host buffer (on another device's stream) still runs, and its
/// stream's `synchronize` returns: the copy's use of the buffer ends with it. With
/// `loss_seen_first`, a poll runs the device-lost callback before the gate opens, so the
/// poller drops the held copy unsubmitted; without, the gate may open first, and the copy is
/// submitted to the destroyed device (wgpu refuses it).
fn a_host_function_after_a_copy_lost_with_its_device_still_runs(loss_seen_first: bool) {
    let Some(runner) = stream() else {
        return;
    };
    let setup = copy_then_host_fn(&runner, CopyAt::Gated, 3);
    setup.device.wgpu_device().destroy();
    if loss_seen_first {
        // The queue is empty (the gated copy was never submitted): this poll runs the
        // device-lost callback.
        let _ = setup.device.wgpu_device().poll(wgpu::PollType::Poll);
        assert!(
            setup.device.fault().is_some(),
            "the poll did not see the loss"
        );
    }
    setup.gate.set(1);
    let seen = setup
        .seen
        .recv_timeout(PATIENCE)
        .expect("the host function after the lost copy never ran");
    assert_eq!(seen, vec![0; LEN], "the lost copy landed");
    runner.synchronize().unwrap();
    assert!(setup.stream.synchronize().is_err());
}

#[test]
fn a_host_function_after_a_copy_dropped_unsubmitted_by_a_device_loss_still_runs() {
    a_host_function_after_a_copy_lost_with_its_device_still_runs(true);
}

#[test]
fn a_host_function_after_a_copy_released_to_a_destroyed_device_still_runs() {
    a_host_function_after_a_copy_lost_with_its_device_still_runs(false);
}

/// A graph that copies a host buffer, launched after a host function given that buffer is
/// submitted on a held stream, replays its copies after the host function: a replay registers
/// its copies as a copy submitted then does.
#[test]
fn a_graph_replayed_after_a_host_function_given_its_buffer_copies_what_it_wrote() {
    let Some(runner) = stream() else {
        return;
    };
    let s = WgpuBackend::new_stream(&PLACE, StreamOptions::default()).unwrap();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    let staging = s.alloc_host(LEN).unwrap();
    let on_device = s.alloc(LEN).unwrap();
    let back = s.alloc_host(LEN).unwrap();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    s.copy_host_to_device(&on_device, 0, &staging, 0, LEN)
        .unwrap();
    s.copy_device_to_host(&back, 0, &on_device, 0, LEN).unwrap();
    let graph = s.end_capture().unwrap();
    runner.wait_flag(&gate, 1).unwrap();
    launch_with(&runner, &staging, |bytes| bytes.fill(0x4c));
    graph.launch(&s).unwrap();
    assert!(
        !s.query().unwrap(),
        "the replayed copies did not wait for the held host function"
    );
    gate.set(1);
    s.synchronize().unwrap();
    runner.synchronize().unwrap();
    assert_eq!(back.to_vec().unwrap(), vec![0x4c; LEN]);
}
