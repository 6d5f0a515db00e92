//! An event recorded into a capture and dropped while the capture lasts is never asked about by
//! devstream's reaper: a plug-in over CUDA answers `CUDA_ERROR_CAPTURED_EVENT` and invalidates
//! the capture (the test plug-in does the same). Its own test binary: the plug-in's live
//! counters are process wide.

mod common;

use common::*;
use devstream_core::{CaptureMode, DeviceEvent, DeviceGraph, DeviceStream};
use std::sync::atomic::Ordering;

#[test]
fn an_event_recorded_in_a_capture_and_dropped_during_it_leaves_the_capture_valid() {
    let place = cpu0();
    let capturing = stream(&place);
    let other = stream(&place);
    capturing.synchronize().unwrap();
    other.synchronize().unwrap();
    let baseline = plugin_live();

    capturing.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let ran = launch_counting(&capturing);
    // Recorded into the capture, then dropped while the capture lasts: the reaper gets it.
    drop(capturing.record_event().unwrap());
    // A marker behind it: an event of an idle stream outside the capture, dropped after it.
    // The reaper advances its jobs in order, so once the marker is destroyed the captured
    // event's job has been looked at too.
    let marker = other.record_event().unwrap();
    // Waited for on another thread: a ThreadLocal capture forbids this thread's waits.
    let waited = marker.clone();
    std::thread::spawn(move || waited.synchronize())
        .join()
        .unwrap()
        .unwrap();
    let with_marker = plugin_live();
    drop(marker);
    assert!(
        wait_until(|| plugin_live()[1] < with_marker[1]),
        "the reaper destroyed the marker event: {:?} live, {with_marker:?} before",
        plugin_live()
    );

    let graph = capturing
        .end_capture()
        .expect("the capture was not invalidated by a question about its own event");
    graph.launch(&other).unwrap();
    other.synchronize().unwrap();
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the graph's host function ran once"
    );
    drop(graph);
    assert!(
        wait_until(|| plugin_live() == baseline),
        "the captured event is destroyed once its capture ended: {:?} live, {baseline:?} before",
        plugin_live()
    );
}
