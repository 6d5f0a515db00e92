//! Joining a capture in progress (a wait on an event recorded in it) from where devstream
//! cannot make the join in order. Its own test binary: the checks of `captured_events.rs` count
//! the plug-in's live objects, which this one's streams would change.

mod common;

use common::*;
use devstream_core::{CaptureMode, DeviceStream};
use std::sync::atomic::Ordering;

/// A wait on an event recorded in a capture in progress joins the waiting stream to the
/// capture; made from inside a host function, it answers `Error::Capture` and joins nothing:
/// there the wait may be held on the host while another thread submits, and handed over after
/// work submitted meanwhile as ordinary work, which the join would put into the plug-in's graph
/// outside devstream's keeping (found by `plugin_loader`: a host function's closure, and the
/// event it held, never released). The stream's later work runs as ordinary work.
#[test]
fn a_host_function_cannot_join_its_stream_to_a_capture_in_progress() {
    let place = cpu0();
    let (capturing, waiting) = (stream(&place), stream(&place));
    capturing.begin_capture(CaptureMode::Relaxed).unwrap();
    let captured = capturing.record_event().unwrap();
    let (answered, answer) = std::sync::mpsc::channel();
    let joiner = waiting.clone();
    waiting
        .launch_host_func(Box::new(move || {
            let _ = answered.send(joiner.wait_event(&captured));
        }))
        .unwrap();
    let answer = answer
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the host function ran");
    assert!(
        matches!(answer, Err(devstream_core::Error::Capture { .. })),
        "{answer:?}"
    );
    assert!(
        !waiting.is_capturing().unwrap(),
        "the stream joined the capture"
    );
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = ran.clone();
    waiting
        .launch_host_func(Box::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    waiting.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    drop(capturing.end_capture().unwrap());
}
