//! The contract's rule for optional operations (`crates/devstream-core/src/traits.rs`, "Required
//! and optional operations"): an operation left at its default answers `Error::Unsupported`
//! and has its capability off, and an operation whose capability is on never answers
//! `Unsupported`. Checked in both directions on every place, for every optional stream
//! operation.
//!
//! The table [`CAPABILITY_OF_OP`] is also how the harness tells a check that needs an operation
//! a place lacks (it returns that `Unsupported`, and the capability is off) from a failure.

use crate::harness::{caps, for_each_place, sync};
use devstream::{
    Capabilities, CaptureMode, CaptureSupport, Completion, Error, Flag, Place, Result, Stream,
};

/// Whether a place's capabilities have one capability on.
type IsOn = fn(&Capabilities) -> bool;

/// Which capability governs each optional operation, by the operation name its `Unsupported`
/// carries: (operation, capability, whether it is on).
pub const CAPABILITY_OF_OP: &[(&str, &str, IsOn)] = &[
    ("launch_host_func", "host_funcs", |c| c.host_funcs),
    ("begin_capture", "capture", |c| {
        c.capture != CaptureSupport::None
    }),
    ("end_capture", "capture", |c| {
        c.capture != CaptureSupport::None
    }),
    ("wait_flag", "flags", |c| c.flags),
    ("write_flag", "flags", |c| c.flags),
    ("Flag::new", "flags", |c| c.flags),
    ("wait_completion", "foreign_waits", |c| c.foreign_waits),
    ("alloc", "buffers", |c| c.buffers),
    ("alloc_host", "buffers", |c| c.buffers),
    ("copy_from_host", "buffers", |c| c.buffers),
    ("copy_host_to_device", "buffers", |c| c.buffers),
    ("copy_device_to_host", "buffers", |c| c.buffers),
    ("copy_device_to_device", "buffers", |c| c.buffers),
    ("fill", "buffers", |c| c.buffers),
    ("alloc_from", "memory_pools", |c| c.memory_pools),
    ("default_pool", "memory_pools", |c| c.memory_pools),
    ("new_pool", "memory_pools", |c| c.memory_pools),
    ("alloc during capture", "capture_alloc", |c| c.capture_alloc),
    ("capture_memory_pool", "capture_alloc", |c| c.capture_alloc),
    ("Graph::memory_pool", "capture_alloc", |c| c.capture_alloc),
];

/// The capability `error` shows `place` lacks: `Some` when it is `Unsupported` for `place`, for
/// an operation of [`CAPABILITY_OF_OP`] whose capability is off there.
pub fn lacked_capability(place: &Place, error: &Error) -> Option<&'static str> {
    let Error::Unsupported { op, place: p } = error else {
        return None;
    };
    if p != place {
        return None;
    }
    let caps = caps(place);
    CAPABILITY_OF_OP
        .iter()
        .find(|(name, _, _)| name == op)
        .filter(|(_, _, on)| !on(&caps))
        .map(|(_, capability, _)| *capability)
}

/// `result` agrees with the capability: off → `Unsupported` naming `op` (or another name of
/// the same operation) and the place; on → anything but `Unsupported`.
fn agrees<T: std::fmt::Debug>(place: &Place, op: &str, on: bool, result: &Result<T>) {
    match (on, result) {
        (
            false,
            Err(Error::Unsupported {
                op: named,
                place: p,
            }),
        ) => {
            assert_eq!(p, place, "{op}: Unsupported names the wrong place");
            assert!(!named.is_empty(), "{op}: Unsupported names no operation");
        }
        (false, other) => {
            panic!("{op} on {place}: capability off, expected Err(Unsupported), got {other:?}")
        }
        (true, Err(e @ Error::Unsupported { .. })) => {
            panic!("{op} on {place}: capability on, but it answered {e:?}")
        }
        (true, _) => {}
    }
}

/// For every optional stream operation: capability off ⇔ `Unsupported`.
#[test]
fn an_op_at_its_default_has_its_capability_off() {
    for_each_place(|place| {
        let caps = caps(place);
        let stream = Stream::new(place)?;

        let result = stream.launch_host_func(|| {});
        agrees(place, "launch_host_func", caps.host_funcs, &result);

        let capture = caps.capture != CaptureSupport::None;
        let result = stream.begin_capture(CaptureMode::ThreadLocal);
        agrees(place, "begin_capture", capture, &result);
        if result.is_ok() {
            let graph = stream.end_capture();
            agrees(place, "end_capture", capture, &graph);
            graph?.launch(&stream)?;
        } else {
            // Without capture nothing is captured: `end_capture` answers `Unsupported` (the
            // default) or `Capture` (a backend whose end_capture reports "not capturing").
            match stream.end_capture() {
                Err(Error::Unsupported { .. } | Error::Capture { .. }) => {}
                other => panic!("end_capture on {place} without capture: {other:?}"),
            }
        }
        assert!(
            !matches!(stream.is_capturing(), Err(Error::Unsupported { .. })),
            "is_capturing on {place} answers Unsupported: its default is Ok(false)"
        );

        let flag = Flag::new(place);
        agrees(place, "Flag::new", caps.flags, &flag);
        if let Ok(flag) = flag {
            let result = stream.write_flag(&flag, 1);
            agrees(place, "write_flag", caps.flags, &result);
            let result = stream.wait_flag(&flag, 1);
            agrees(place, "wait_flag", caps.flags, &result);
        }

        let result = stream.wait_completion(Completion::ready(Ok(())));
        agrees(place, "wait_completion", caps.foreign_waits, &result);

        let on = caps.buffers;
        let dev = stream.alloc(8);
        agrees(place, "alloc", on, &dev);
        let host = stream.alloc_host(8);
        agrees(place, "alloc_host", on, &host);
        if let (Ok(dev), Ok(host)) = (dev, host) {
            let other = stream.alloc(8)?;
            let results = [
                ("copy_from_host", stream.copy_from_host(&dev, 0, &[1; 8])),
                (
                    "copy_host_to_device",
                    stream.copy_host_to_device(&dev, 0, &host, 0, 8),
                ),
                (
                    "copy_device_to_host",
                    stream.copy_device_to_host(&host, 0, &dev, 0, 8),
                ),
                (
                    "copy_device_to_device",
                    stream.copy_device_to_device(&other, 0, &dev, 0, 8),
                ),
                ("fill", stream.fill(&dev, 0, 8, 7)),
            ];
            for (op, result) in &results {
                agrees(place, op, on, result);
            }
        }
        sync(&stream)
    });
}
