//! A stream dropped in the middle of its capture ends that capture: a `Global`-mode capture
//! left behind by a dropped stream would forbid synchronizing every other stream of the
//! plug-in for the rest of the process (its own test binary: a `Global` capture affects every
//! thread of the process while it lasts).

mod common;

use common::*;
use devstream_core::{CaptureMode, DeviceStream, Error};

#[test]
fn a_stream_dropped_while_capturing_leaves_no_capture_behind() {
    let place = cpu0();
    for mode in [CaptureMode::Global, CaptureMode::ThreadLocal] {
        let capturing = stream(&place);
        capturing.begin_capture(mode).unwrap();
        let other = stream(&place);
        assert!(
            matches!(other.synchronize(), Err(Error::Capture { .. })),
            "{mode:?}: a capture in progress forbids synchronizing another stream"
        );
        drop(capturing);
        other.synchronize().unwrap_or_else(|error| {
            panic!("{mode:?}: the dropped stream's capture still forbids synchronize: {error}")
        });
        stream(&place).synchronize().unwrap();
    }
}
