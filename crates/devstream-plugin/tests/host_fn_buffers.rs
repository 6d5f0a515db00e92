//! A plug-in host buffer given to a host function (`HostBuffer::host_fn_access`, which the
//! facade's `Stream::launch_host_func_with` calls): what the conformance suite cannot see, as it
//! holds for plug-in places only. Graph launches that copy the buffer are ordered against such
//! host functions like copies (the plug-in's copies hold no lock of the buffer while they run,
//! so nothing else keeps a replay off the host function's bytes), and a buffer with a copy
//! whose end cannot be known is never handed over.

mod common;

use common::*;
use devstream_core::foreign::BackendKey;
use devstream_core::{
    CaptureMode, DeviceBackend, DeviceFlag, DeviceGraph, DeviceStream, Error, HostBuffer, Place,
};
use devstream_plugin::{PluginBackend, PluginHostBuffer, PluginStream};
use devstream_test_plugin_faulty as faulty;

const LEN: usize = 64;

/// Gives `host` to `f` in a host function on `stream`, as the facade's
/// `launch_host_func_with` does: the stream first waits for the buffer's uses registered
/// before, and the use ends once `f` has run.
fn launch_with(
    stream: &PluginStream,
    host: &PluginHostBuffer,
    f: impl FnOnce(&mut [u8]) + Send + 'static,
) {
    let mut access = host.host_fn_access(BackendKey::of(stream.place())).unwrap();
    // As the facade does: queued after what it waits for, and noted queued once it is.
    access.registered.wait_earlier_queued();
    if let Some(copies_queued) = access.before_queued.take() {
        copies_queued();
    }
    let _submission = access.registered.submission();
    for (before, _) in access.before {
        stream.wait_completion(before).unwrap();
    }
    let (mut bytes, mut registered, mut f) = (access.bytes, Some(access.registered), Some(f));
    stream
        .launch_host_func(Box::new(move || {
            if let Some(f) = f.take() {
                f(&mut bytes.view());
            }
            drop(registered.take());
        }))
        .unwrap();
}

/// A graph whose replay copies into a host buffer, launched after a host function given the
/// buffer was submitted on a held stream, copies after that host function has written: the
/// buffer ends with the graph's bytes, not the host function's.
#[test]
fn a_graph_launched_after_a_host_function_given_its_host_buffer_copies_after_it() {
    let place = cpu0();
    let caps = PluginBackend::capabilities(&place).unwrap();
    assert!(caps.host_func_buffers, "custom_cpu has host functions");
    let (capturing, runner, launcher) = (stream(&place), stream(&place), stream(&place));
    let device = capturing.alloc(LEN).unwrap();
    let host = capturing.alloc_host(LEN).unwrap();
    capturing.fill(&device, 0, LEN, 0x11).unwrap();
    capturing.synchronize().unwrap();
    capturing.begin_capture(CaptureMode::ThreadLocal).unwrap();
    capturing
        .copy_device_to_host(&host, 0, &device, 0, LEN)
        .unwrap();
    let graph = capturing.end_capture().unwrap();

    // The runner is held at a flag: its host function cannot run before the launch below.
    let flag = PluginBackend::new_flag(&place).unwrap();
    runner.wait_flag(&flag, 1).unwrap();
    launch_with(&runner, &host, |bytes| bytes.fill(0x5a));
    graph.launch(&launcher).unwrap();
    flag.set(1);
    runner.synchronize().unwrap();
    launcher.synchronize().unwrap();
    assert_eq!(
        host.to_vec().unwrap(),
        vec![0x11; LEN],
        "the replay's copy ran before the host function given the buffer"
    );
}

/// A copy whose end event could not be recorded (the plug-in queued the copy, then failed
/// `record_event`) leaves the buffer's bytes unknown for as long as it may run: the buffer is
/// refused to a host function with that error, as host reads answer it.
#[test]
fn a_host_buffer_with_a_copy_of_unknown_end_is_refused_to_a_host_function() {
    let copy = Faulty::unique(faulty::MODE_QUEUED_COPIES);
    let place = copy.load().unwrap().places[0].clone();
    let caps = PluginBackend::capabilities(&place).unwrap();
    assert!(
        caps.host_func_buffers,
        "the faulty plug-in has stream_add_callback"
    );
    let s = stream(&place);
    let device = s.alloc(LEN).unwrap();
    let host = s.alloc_host(LEN).unwrap();
    let copied = s.copy_device_to_host(&host, 0, &device, 0, LEN);
    assert!(
        matches!(
            copied,
            Err(Error::Driver {
                call: "record_event",
                ..
            })
        ),
        "{copied:?}"
    );
    let access = host.host_fn_access(BackendKey::of(&Place::Cpu));
    assert!(
        matches!(
            access,
            Err(Error::Driver {
                call: "record_event",
                ..
            })
        ),
        "{access:?}"
    );
    copy.run_queued();
}

/// A host function given a buffer that synchronizes a stream whose held work waits for that
/// same host function's use of the buffer (a later host function given the buffer, behind a
/// wait for a completion) answers `WouldDeadlock` instead of waiting for ever, whatever runs
/// first. The wait for the completion is held on the host as a gate devstream cannot follow to
/// its work, so the self-wait search counts it as waiting for the host function (found by the
/// `plugin_loader` fuzzer: the host function blocked for good, its stream never released).
#[test]
fn a_host_function_given_a_buffer_that_synchronizes_a_stream_waiting_for_it_is_refused() {
    use devstream_core::host_fn_launch::{launch_with as give, GivenBuffer};
    use std::sync::mpsc::channel;
    let place = cpu0();
    let (first, second) = (stream(&place), stream(&place));
    let host = first.alloc_host(LEN).unwrap();
    // The first host function runs only once the second is submitted behind it.
    let flag = PluginBackend::new_flag(&place).unwrap();
    first.wait_flag(&flag, 1).unwrap();
    let (answered, answer) = channel();
    let waited = second.clone();
    let given: [&dyn GivenBuffer; 1] = [&host];
    give(&first, &given, move |bytes| {
        bytes[0][0] = 1;
        answered.send(waited.synchronize()).unwrap();
    })
    .unwrap();
    give(&second, &given, |bytes| bytes[0][0] += 1).unwrap();
    flag.set(1);
    let answer = answer
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the host function's synchronize never returned");
    assert!(
        matches!(answer, Err(Error::WouldDeadlock { .. })),
        "{answer:?}"
    );
    first.synchronize().unwrap();
    second.synchronize().unwrap();
    assert_eq!(
        host.to_vec().unwrap()[0],
        2,
        "both ran, in submission order"
    );
}
