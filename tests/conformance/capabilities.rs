//! Capabilities: one flag per feature and never a silent no-op. For each capability that is off
//! the operation answers `Error::Unsupported { op, place }` (asserted, not skipped); for each
//! that is on, the operation works (`devstream_core::traits`, "Required and optional
//! operations"; `contract.rs` checks every optional stream operation both ways).

use crate::harness::{caps, for_each_place, not_applicable, same_backend_other_place, sync, Log};
use devstream::{CaptureMode, CaptureSupport, Error, Event, EventFlags, Flag, Place, Stream};

fn is_unsupported_on<T: std::fmt::Debug>(result: devstream::Result<T>, place: &Place, what: &str) {
    match result {
        Err(Error::Unsupported { op, place: p }) => {
            assert_eq!(&p, place, "{what}: Unsupported names the wrong place");
            assert!(!op.is_empty(), "{what}: Unsupported names no operation");
        }
        other => panic!("{what}: capability off, expected Err(Unsupported), got {other:?}"),
    }
}

/// The capabilities of a place, of its streams, and the printable table agree.
#[test]
fn capabilities_are_consistent() {
    for_each_place(|place| {
        let caps = caps(place);
        assert_eq!(Stream::new(place)?.capabilities(), caps);
        assert_eq!(Stream::default_stream(place)?.capabilities(), caps);
        let rows = caps.rows();
        assert!(rows.iter().any(|(name, _)| *name == "capture"));
        eprintln!("[conformance] {place}: {rows:?}");
        Ok(())
    });
}

/// capture: off → `begin_capture` is Unsupported; on → a capture round trip works.
#[test]
fn capture_capability() {
    for_each_place(|place| {
        let stream = Stream::new(place)?;
        if caps(place).capture == CaptureSupport::None {
            for mode in [
                CaptureMode::Global,
                CaptureMode::ThreadLocal,
                CaptureMode::Relaxed,
            ] {
                is_unsupported_on(stream.begin_capture(mode), place, "begin_capture");
            }
            match stream.is_capturing() {
                Ok(false) | Err(Error::Unsupported { .. }) => {}
                other => panic!("is_capturing without capture: {other:?}"),
            }
            match stream.end_capture() {
                Err(Error::Unsupported { .. } | Error::Capture { .. }) => {}
                other => panic!("end_capture without capture support: {other:?}"),
            }
        } else {
            stream.begin_capture(CaptureMode::ThreadLocal)?;
            let graph = stream.end_capture()?;
            graph.launch(&stream)?;
            sync(&stream)?;
        }
        Ok(())
    });
}

/// host_funcs: off → `launch_host_func` is Unsupported (and the function never runs); on → it
/// runs.
#[test]
fn host_funcs_capability() {
    for_each_place(|place| {
        let stream = Stream::new(place)?;
        let log = Log::new();
        let result = stream.launch_host_func(log.task(1));
        if caps(place).host_funcs {
            result?;
            sync(&stream)?;
            assert_eq!(log.entries(), vec![1]);
        } else {
            is_unsupported_on(result, place, "launch_host_func");
            sync(&stream)?;
            assert!(log.entries().is_empty(), "an unsupported host function ran");
        }
        Ok(())
    });
}

/// capture_host_funcs: on → a host function launched during a capture belongs to the graph
/// (it runs once per launch, not at capture time); off where capture and host functions are
/// both on → `launch_host_func` during a capture is Unsupported, runs nothing, and the capture
/// goes on to a graph that still works.
#[test]
fn capture_host_funcs_capability() {
    for_each_place(|place| {
        let caps = caps(place);
        if caps.capture_host_funcs {
            assert!(
                caps.host_funcs && caps.capture != CaptureSupport::None,
                "capture_host_funcs needs host_funcs and capture: {caps:?}"
            );
        }
        if caps.capture == CaptureSupport::None || !caps.host_funcs {
            not_applicable(place, "no capture or no host functions");
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let log = Log::new();
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let result = stream.launch_host_func(log.task("captured"));
        if caps.capture_host_funcs {
            result?;
        } else {
            is_unsupported_on(result, place, "launch_host_func during capture");
            assert!(
                stream.is_capturing()?,
                "a refused host function ended the capture"
            );
        }
        let graph = stream.end_capture()?;
        assert!(
            log.entries().is_empty(),
            "captured work ran at capture time"
        );
        graph.launch(&stream)?;
        graph.launch(&stream)?;
        sync(&stream)?;
        let expected: Vec<&str> = if caps.capture_host_funcs {
            vec!["captured", "captured"]
        } else {
            Vec::new()
        };
        assert_eq!(log.entries(), expected);
        stream.launch_host_func(log.task("after"))?;
        sync(&stream)?;
        assert_eq!(log.entries().last(), Some(&"after"));
        Ok(())
    });
}

/// flags: off → `Flag::new` is Unsupported; on → a write/wait round trip works.
#[test]
fn flags_capability() {
    for_each_place(|place| {
        if caps(place).flags {
            let stream = Stream::new(place)?;
            let flag = Flag::new(place)?;
            stream.write_flag(&flag, 3)?;
            stream.wait_flag(&flag, 3)?;
            sync(&stream)?;
            assert_eq!(flag.get(), 3);
        } else {
            is_unsupported_on(Flag::new(place), place, "Flag::new");
        }
        Ok(())
    });
}

/// timing: off → timed events are refused (`Event::new`) or `elapsed` is Unsupported; on →
/// timed events measure.
#[test]
fn timing_capability() {
    for_each_place(|place| {
        let stream = Stream::new(place)?;
        if caps(place).timing {
            let (a, b) = (
                Event::new(place, EventFlags::timed())?,
                Event::new(place, EventFlags::timed())?,
            );
            a.record(&stream)?;
            b.record(&stream)?;
            sync(&stream)?;
            a.elapsed(&b)?;
        } else {
            match Event::new(place, EventFlags::timed()) {
                Err(e) => is_unsupported_on::<()>(Err(e), place, "Event::new(timed)"),
                Ok(a) => {
                    let b = Event::new(place, EventFlags::timed())?;
                    a.record(&stream)?;
                    b.record(&stream)?;
                    sync(&stream)?;
                    is_unsupported_on(a.elapsed(&b), place, "elapsed without timing");
                }
            }
        }
        Ok(())
    });
}

/// per_thread_stream: off → `Stream::per_thread` is Unsupported; on → it works.
#[test]
fn per_thread_stream_capability() {
    for_each_place(|place| {
        let result = Stream::per_thread(place);
        if caps(place).per_thread_stream {
            sync(&result?)?;
        } else {
            is_unsupported_on(result, place, "Stream::per_thread");
        }
        Ok(())
    });
}

/// external_handles: off → interprocess events are Unsupported; on → they can be made.
#[test]
fn external_handles_capability() {
    for_each_place(|place| {
        let flags = EventFlags {
            interprocess: true,
            ..EventFlags::default()
        };
        let result = Event::new(place, flags);
        if caps(place).external_handles {
            let event = result?;
            assert!(event.flags().interprocess);
        } else {
            is_unsupported_on(result, place, "Event::new(interprocess)");
        }
        Ok(())
    });
}

/// priorities: off → the range is `{0, 0}` and every priority reads back as the one level.
/// (The on side is checked in `streams::priorities_normalise_onto_the_range`.)
#[test]
fn priorities_capability() {
    for_each_place(|place| {
        if caps(place).priorities {
            return Ok(());
        }
        assert_eq!(
            devstream::priority_range(place)?,
            devstream::PriorityRange {
                least: 0,
                greatest: 0
            }
        );
        for p in [devstream::Priority::High, devstream::Priority::Native(-3)] {
            let s = Stream::builder(place).priority(p).build()?;
            assert_eq!(s.native_priority(), 0);
            assert_eq!(s.priority(), devstream::Priority::Normal);
        }
        Ok(())
    });
}

/// cross_device_wait: with a second place of the same backend, off → waiting on its event is
/// Unsupported; on → the wait orders work across the devices.
#[test]
fn cross_device_wait_capability() {
    for_each_place(|place| {
        let Some(other) = same_backend_other_place(place) else {
            not_applicable(place, "no second place of the same backend");
            return Ok(());
        };
        let here = Stream::new(place)?;
        let there = Stream::new(&other)?;
        let event = there.record_event()?;
        if caps(place).cross_device_wait {
            here.wait_event(&event)?;
            here.wait_stream(&there)?;
            sync(&here)?;
        } else {
            is_unsupported_on(here.wait_event(&event), place, "cross-device wait_event");
            is_unsupported_on(here.wait_stream(&there), place, "cross-device wait_stream");
        }
        sync(&there)?;
        Ok(())
    });
}
