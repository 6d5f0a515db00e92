//! Bad input and misuse: every case asserts the precise `Error` variant, never a panic
//! (`devstream_core::traits`, "Errors").
//!
//! Cases are tables of named checks so that a failure names the case, and the count of distinct
//! cases is itself checked.

use crate::harness::{
    caps, for_each_place, other_backend_place, places_under_test, sync, Gate, Log,
};
use devstream::{
    compiled_backends, BackendKind, CaptureMode, CaptureSupport, Error, Event, EventFlags, Flag,
    Place, Priority, Result, Stream,
};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a case found.
enum Outcome {
    /// The error was asserted.
    Checked,
    /// The case needs something this place or build lacks.
    NotApplicable(String),
}
use Outcome::{Checked, NotApplicable};

fn na(why: impl Into<String>) -> Result<Outcome> {
    Ok(NotApplicable(why.into()))
}

type Check = fn(&Place) -> Result<Outcome>;

// ---------------------------------------------------------------------------------------------
// Place-independent cases.

fn invalid_place(text: &str) -> Result<Outcome> {
    match text.parse::<Place>() {
        Err(Error::InvalidPlace { text: t, reason }) => {
            assert_eq!(t, text, "InvalidPlace carries the text");
            assert!(!reason.is_empty(), "InvalidPlace carries a reason");
        }
        other => panic!("{text:?} should be InvalidPlace, got {other:?}"),
    }
    Ok(Checked)
}

/// A place of a backend kind, index 0.
fn place_of(kind: BackendKind) -> Place {
    match kind {
        BackendKind::Cpu => Place::Cpu,
        BackendKind::Cuda => Place::Cuda(0),
        BackendKind::Hip => Place::Hip(0),
        BackendKind::Wgpu => Place::Wgpu(0),
        BackendKind::Plugin => Place::custom("custom", 0).expect("a valid device type"),
    }
}

/// Runs `call` on a place of every backend kind that is not compiled in and asserts
/// `BackendNotCompiled` naming the feature and the place.
fn not_compiled<T: std::fmt::Debug>(
    what: &str,
    call: impl Fn(&Place) -> Result<T>,
) -> Result<Outcome> {
    let compiled = compiled_backends();
    let missing: Vec<BackendKind> = BackendKind::ALL
        .into_iter()
        .filter(|k| !compiled.contains(k))
        .collect();
    if missing.is_empty() {
        return na("every backend is compiled in");
    }
    for kind in missing {
        let place = place_of(kind);
        match call(&place) {
            Err(Error::BackendNotCompiled { feature, place: p }) => {
                assert_eq!(
                    feature,
                    kind.name(),
                    "{what}({place}): the feature to enable"
                );
                assert_eq!(p, place.to_string(), "{what}({place}): the place asked for");
            }
            other => panic!("{what}({place}): expected BackendNotCompiled, got {other:?}"),
        }
    }
    Ok(Checked)
}

/// For every compiled backend other than the CPU: a device index far out of range is `NoDevice`
/// where the runtime is there, `BackendUnavailable` where it is not (probed for real).
fn out_of_range<T: std::fmt::Debug>(
    what: &str,
    call: impl Fn(&Place) -> Result<T>,
) -> Result<Outcome> {
    let mut checked = false;
    for kind in compiled_backends() {
        if kind == BackendKind::Cpu {
            continue; // "cpu:1" does not parse: covered by an InvalidPlace case.
        }
        let listed = devstream::places()
            .into_iter()
            .find(|p| p.backend() == kind);
        let far = 1 << 20;
        let place = match listed.unwrap_or_else(|| place_of(kind)) {
            Place::Cuda(_) => Place::Cuda(far),
            Place::Hip(_) => Place::Hip(far),
            Place::Wgpu(_) => Place::Wgpu(far),
            Place::Custom { device_type, .. } => Place::Custom {
                device_type,
                id: far,
            },
            Place::Cpu => unreachable!("skipped above"),
        };
        let result = call(&place);
        match devstream::probe(kind) {
            Ok(()) => match result {
                Err(Error::NoDevice { place: p, .. }) => assert_eq!(p, place, "{what}"),
                other => panic!("{what}({place}): expected NoDevice, got {other:?}"),
            },
            Err(Error::BackendUnavailable { .. }) => match result {
                Err(Error::BackendUnavailable { backend, .. }) => {
                    assert_eq!(backend, kind.name(), "{what}({place})")
                }
                other => panic!(
                    "{what}({place}): the runtime is missing, expected BackendUnavailable, got {other:?}"
                ),
            },
            Err(other) => panic!("probe({kind}) must be Ok or BackendUnavailable, got {other:?}"),
        }
        checked = true;
    }
    if checked {
        Ok(Checked)
    } else {
        na("no compiled backend with device indices besides the CPU")
    }
}

const GLOBAL_CASES: &[(&str, Check)] = &[
    ("place text \"\"", |_| invalid_place("")),
    ("place text \"gpu:-1\"", |_| invalid_place("gpu:-1")),
    ("place text \"gpu:x\"", |_| invalid_place("gpu:x")),
    ("place text \"gpu:0:1\"", |_| invalid_place("gpu:0:1")),
    ("place text \":0\"", |_| invalid_place(":0")),
    ("place text \"gpu:\"", |_| invalid_place("gpu:")),
    ("place text \"gpu: 0\"", |_| invalid_place("gpu: 0")),
    ("place text \"gpu:+1\"", |_| invalid_place("gpu:+1")),
    ("place text \"gpu:1.5\"", |_| invalid_place("gpu:1.5")),
    ("place text \"cpu:1\"", |_| invalid_place("cpu:1")),
    ("place text \"CUDA:0\"", |_| invalid_place("CUDA:0")),
    ("place text \"1npu\"", |_| invalid_place("1npu")),
    ("place text \"n pu\"", |_| invalid_place("n pu")),
    ("place text \"npu:99999999999999999999999\"", |_| {
        invalid_place("npu:99999999999999999999999")
    }),
    ("place text \"::\"", |_| invalid_place("::")),
    ("Place::custom with a reserved name", |_| {
        assert_err!(Place::custom("cuda", 0), Error::InvalidPlace { .. });
        assert_err!(Place::custom("", 0), Error::InvalidPlace { .. });
        Ok(Checked)
    }),
    ("Priority::from_paddle(3)", |_| {
        assert_err!(Priority::from_paddle(3), Error::InvalidArgument(_));
        Ok(Checked)
    }),
    ("Priority::from_paddle(0) and negative", |_| {
        assert_err!(Priority::from_paddle(0), Error::InvalidArgument(_));
        assert_err!(Priority::from_paddle(-1), Error::InvalidArgument(_));
        Ok(Checked)
    }),
    ("EventFlags interprocess + timing", |_| {
        let flags = EventFlags {
            interprocess: true,
            timing: true,
            blocking_sync: false,
        };
        assert_err!(flags.validate(), Error::InvalidArgument(_));
        Ok(Checked)
    }),
    ("backend not compiled: Stream::new", |_| {
        not_compiled("Stream::new", Stream::new)
    }),
    ("backend not compiled: Stream::default_stream", |_| {
        not_compiled("Stream::default_stream", Stream::default_stream)
    }),
    ("backend not compiled: Stream::builder", |_| {
        not_compiled("Stream::builder", |p| {
            Stream::builder(p).priority(Priority::High).build()
        })
    }),
    ("backend not compiled: Event::new", |_| {
        not_compiled("Event::new", |p| Event::new(p, EventFlags::default()))
    }),
    ("backend not compiled: Flag::new", |_| {
        not_compiled("Flag::new", Flag::new)
    }),
    ("backend not compiled: capabilities", |_| {
        not_compiled("capabilities", devstream::capabilities)
    }),
    ("backend not compiled: priority_range", |_| {
        not_compiled("priority_range", devstream::priority_range)
    }),
    ("backend not compiled: current_stream", |_| {
        not_compiled("current_stream", devstream::current_stream)
    }),
    ("backend not compiled: Stream::from_pool", |_| {
        not_compiled("Stream::from_pool", |p| {
            Stream::from_pool(p, Priority::Normal)
        })
    }),
    ("backend not compiled: probe", |_| {
        not_compiled("probe", |p| devstream::probe(p.backend()))
    }),
    ("device index out of range: Stream::new", |_| {
        out_of_range("Stream::new", Stream::new)
    }),
    ("device index out of range: Event::new", |_| {
        out_of_range("Event::new", |p| Event::new(p, EventFlags::default()))
    }),
    ("device index out of range: capabilities", |_| {
        out_of_range("capabilities", devstream::capabilities)
    }),
    ("device index out of range: priority_range", |_| {
        out_of_range("priority_range", devstream::priority_range)
    }),
];

// ---------------------------------------------------------------------------------------------
// Per-place cases.

fn range_error<T: std::fmt::Debug>(what: &str, result: Result<T>) {
    match result {
        Err(Error::InvalidArgument(message)) => assert!(!message.is_empty(), "{what}"),
        other => panic!("{what}: out of range, expected InvalidArgument, got {other:?}"),
    }
}

fn mismatch<T: std::fmt::Debug>(what: &str, result: Result<T>, here: &Place, there: &Place) {
    match result {
        Err(Error::PlaceMismatch {
            op,
            expected,
            found,
        }) => {
            assert!(!op.is_empty(), "{what}: PlaceMismatch names no operation");
            assert!(
                (expected == *here && found == *there) || (expected == *there && found == *here),
                "{what}: PlaceMismatch names {expected} / {found}, not {here} / {there}"
            );
        }
        other => {
            panic!("{what}: mixing {here} with {there}, expected PlaceMismatch, got {other:?}")
        }
    }
}

/// A wait on another backend's work: `Ok` where the place's `foreign_waits` is on, else
/// `Unsupported` naming the place (never `PlaceMismatch`).
fn foreign_wait_agrees(place: &Place, what: &str, result: Result<()>) {
    if caps(place).foreign_waits {
        if let Err(e) = result {
            panic!(
                "{what} on {place} with another backend's handle: foreign_waits is on, got {e:?}"
            );
        }
    } else {
        assert_err!(result, Error::Unsupported { place: p, .. } if p == *place);
    }
}

fn with_other_backend(place: &Place, check: impl FnOnce(&Place) -> Result<()>) -> Result<Outcome> {
    match other_backend_place(place) {
        Some(other) => check(&other).map(|()| Checked),
        None => na("no place of another backend under test"),
    }
}

fn capturing(place: &Place) -> bool {
    caps(place).capture != CaptureSupport::None
}

const PLACE_CASES: &[(&str, Check)] = &[
    ("Event::new with interprocess + timing", |place| {
        let flags = EventFlags {
            interprocess: true,
            timing: true,
            blocking_sync: false,
        };
        assert_err!(Event::new(place, flags), Error::InvalidArgument(_));
        Ok(Checked)
    }),
    ("copy_from_host past the end", |place| {
        let s = Stream::new(place)?;
        let dst = s.alloc(16)?;
        range_error("copy_from_host", s.copy_from_host(&dst, 8, &[0; 9]));
        range_error("copy_from_host", s.copy_from_host(&dst, 17, &[]));
        Ok(Checked)
    }),
    ("copy_host_to_device, destination past the end", |place| {
        let s = Stream::new(place)?;
        let (dst, src) = (s.alloc(16)?, s.alloc_host(64)?);
        range_error(
            "copy_host_to_device dst",
            s.copy_host_to_device(&dst, 1, &src, 0, 16),
        );
        Ok(Checked)
    }),
    ("copy_host_to_device, source past the end", |place| {
        let s = Stream::new(place)?;
        let (dst, src) = (s.alloc(64)?, s.alloc_host(16)?);
        range_error(
            "copy_host_to_device src",
            s.copy_host_to_device(&dst, 0, &src, 8, 9),
        );
        Ok(Checked)
    }),
    ("copy_device_to_host, destination past the end", |place| {
        let s = Stream::new(place)?;
        let (dst, src) = (s.alloc_host(16)?, s.alloc(64)?);
        range_error(
            "copy_device_to_host dst",
            s.copy_device_to_host(&dst, 0, &src, 0, 17),
        );
        Ok(Checked)
    }),
    ("copy_device_to_host, source past the end", |place| {
        let s = Stream::new(place)?;
        let (dst, src) = (s.alloc_host(64)?, s.alloc(16)?);
        range_error(
            "copy_device_to_host src",
            s.copy_device_to_host(&dst, 0, &src, 15, 2),
        );
        Ok(Checked)
    }),
    ("copy_device_to_device, destination past the end", |place| {
        let s = Stream::new(place)?;
        let (dst, src) = (s.alloc(16)?, s.alloc(64)?);
        range_error(
            "copy_device_to_device dst",
            s.copy_device_to_device(&dst, 16, &src, 0, 1),
        );
        Ok(Checked)
    }),
    ("copy_device_to_device, source past the end", |place| {
        let s = Stream::new(place)?;
        let (dst, src) = (s.alloc(64)?, s.alloc(16)?);
        range_error(
            "copy_device_to_device src",
            s.copy_device_to_device(&dst, 0, &src, 0, 17),
        );
        Ok(Checked)
    }),
    ("fill past the end", |place| {
        let s = Stream::new(place)?;
        let dst = s.alloc(16)?;
        range_error("fill", s.fill(&dst, 10, 7, 0));
        Ok(Checked)
    }),
    ("offset + length overflowing usize", |place| {
        let s = Stream::new(place)?;
        let (dev, host) = (s.alloc(16)?, s.alloc_host(16)?);
        range_error("fill overflow", s.fill(&dev, usize::MAX, 2, 0));
        range_error(
            "copy_from_host overflow",
            s.copy_from_host(&dev, usize::MAX, &[1]),
        );
        range_error(
            "d2h overflow",
            s.copy_device_to_host(&host, 1, &dev, 0, usize::MAX),
        );
        range_error(
            "d2d overflow",
            s.copy_device_to_device(&dev, 0, &dev, usize::MAX, 1),
        );
        sync(&s)?;
        Ok(Checked)
    }),
    ("host buffer read/write past the end", |place| {
        let s = Stream::new(place)?;
        let host = s.alloc_host(16)?;
        range_error("read", host.read(8, &mut [0; 9]));
        range_error("write", host.write(16, &[1]));
        range_error("read overflow", host.read(usize::MAX, &mut [0; 2]));
        Ok(Checked)
    }),
    ("alloc of an impossible size", |place| {
        let s = Stream::new(place)?;
        let bytes = 1usize << 60;
        match s.alloc(bytes) {
            Err(Error::OutOfMemory {
                place: p, bytes: b, ..
            }) => {
                assert_eq!(p, *place);
                assert_eq!(b, bytes);
            }
            Err(e @ Error::Unsupported { .. }) => return Err(e),
            other => panic!("alloc(1 EiB): expected OutOfMemory, got {other:?}"),
        }
        Ok(Checked)
    }),
    ("elapsed without timing", |place| {
        let s = Stream::new(place)?;
        let (a, b) = (s.record_event()?, s.record_event()?);
        sync(&s)?;
        assert_err!(a.elapsed(&b), Error::TimingDisabled);
        Ok(Checked)
    }),
    ("elapsed with a never-recorded event", |place| {
        if !caps(place).timing {
            return na("no timing");
        }
        let s = Stream::new(place)?;
        let (a, b) = (
            Event::new(place, EventFlags::timed())?,
            Event::new(place, EventFlags::timed())?,
        );
        a.record(&s)?;
        sync(&s)?;
        assert_err!(a.elapsed(&b), Error::NotRecorded);
        assert_err!(b.elapsed(&a), Error::NotRecorded);
        Ok(Checked)
    }),
    ("elapsed with an incomplete event", |place| {
        if !caps(place).timing {
            return na("no timing");
        }
        let s = Stream::new(place)?;
        let a = Event::new(place, EventFlags::timed())?;
        a.record(&s)?;
        let Some(gate) = Gate::close(&s)? else {
            return na("no gate");
        };
        let b = Event::new(place, EventFlags::timed())?;
        b.record(&s)?;
        assert_err!(a.elapsed(&b), Error::NotReady);
        drop(gate);
        sync(&s)?;
        a.elapsed(&b)?;
        Ok(Checked)
    }),
    ("end_capture without begin_capture", |place| {
        if !capturing(place) {
            return na("no capture");
        }
        assert_err!(Stream::new(place)?.end_capture(), Error::Capture { .. });
        Ok(Checked)
    }),
    ("begin_capture twice", |place| {
        if !capturing(place) {
            return na("no capture");
        }
        let s = Stream::new(place)?;
        s.begin_capture(CaptureMode::ThreadLocal)?;
        assert_err!(s.begin_capture(CaptureMode::Relaxed), Error::Capture { .. });
        let _ = s.end_capture();
        Ok(Checked)
    }),
    ("synchronize during capture", |place| {
        if !capturing(place) {
            return na("no capture");
        }
        let s = Stream::new(place)?;
        s.begin_capture(CaptureMode::ThreadLocal)?;
        assert_err!(s.synchronize(), Error::Capture { .. });
        assert_err!(s.end_capture(), Error::Capture { .. });
        Ok(Checked)
    }),
    ("query during capture", |place| {
        if !capturing(place) {
            return na("no capture");
        }
        let s = Stream::new(place)?;
        s.begin_capture(CaptureMode::Relaxed)?;
        assert_err!(s.query(), Error::Capture { .. });
        assert_err!(s.end_capture(), Error::Capture { .. });
        Ok(Checked)
    }),
    ("end_capture with an unjoined fork", |place| {
        if !capturing(place) {
            return na("no capture");
        }
        let (origin, forked) = (Stream::new(place)?, Stream::new(place)?);
        // Buffers are allocated before a capture, never during one.
        let scratch = forked.alloc(4)?;
        forked.synchronize()?;
        origin.begin_capture(CaptureMode::ThreadLocal)?;
        forked.wait_event(&origin.record_event()?)?;
        // Real work on the fork: CUDA only counts a forked stream as unjoined when it added
        // nodes to the capture (a fork that merely records an event ends cleanly there).
        if caps(place).capture_host_funcs {
            forked.launch_host_func(|| {})?;
        } else {
            forked.fill(&scratch, 0, 4, 1)?;
        }
        assert_err!(origin.end_capture(), Error::Capture { .. });
        let _ = forked.end_capture();
        Ok(Checked)
    }),
    ("capture on the legacy default stream", |place| {
        let caps = caps(place);
        if !capturing(place) || !caps.legacy_default_stream {
            return na("no capture or no legacy default stream");
        }
        assert_err!(
            Stream::default_stream(place)?.begin_capture(CaptureMode::ThreadLocal),
            Error::Capture { .. }
        );
        Ok(Checked)
    }),
    ("a panicking host function", |place| {
        if !caps(place).host_funcs {
            return na("no host functions");
        }
        let s = Stream::new(place)?;
        s.launch_host_func(|| panic!("conformance: deliberate panic"))?;
        let id = s.id();
        assert_err!(
            sync(&s),
            Error::HostFuncPanicked { stream, message } if stream == id && message.contains("deliberate")
        );
        Ok(Checked)
    }),
    (
        "a host function's panic is reported once and the stream goes on",
        |place| {
            if !caps(place).host_funcs {
                return na("no host functions");
            }
            let s = Stream::new(place)?;
            s.launch_host_func(|| panic!("conformance: deliberate panic"))?;
            let log = Log::new();
            s.launch_host_func(log.task(1))?;
            assert_err!(sync(&s), Error::HostFuncPanicked { .. });
            // The device still works (`devstream_core::traits`, "Errors"): the panic was reported,
            // and the stream's later work runs and synchronizes without it.
            assert_eq!(
                log.entries(),
                vec![1],
                "the host function after the panic ran"
            );
            s.launch_host_func(log.task(2))?;
            let reported_again = sync(&s);
            assert!(
                reported_again.is_ok(),
                "a panic already reported came back from the next synchronize: {reported_again:?}"
            );
            assert_eq!(log.entries(), vec![1, 2]);
            let event = s.record_event()?;
            event.synchronize()?;
            Ok(Checked)
        },
    ),
    (
        "a capability that is off: launch_host_func / Flag::new / per_thread / interprocess",
        |place| {
            let caps = caps(place);
            let mut checked = false;
            if !caps.host_funcs {
                assert_err!(
                    Stream::new(place)?.launch_host_func(|| {}),
                    Error::Unsupported { .. }
                );
                checked = true;
            }
            if !caps.flags {
                assert_err!(Flag::new(place), Error::Unsupported { .. });
                checked = true;
            }
            if !caps.per_thread_stream {
                assert_err!(Stream::per_thread(place), Error::Unsupported { .. });
                checked = true;
            }
            if !caps.external_handles {
                let flags = EventFlags {
                    interprocess: true,
                    ..EventFlags::default()
                };
                assert_err!(Event::new(place, flags), Error::Unsupported { .. });
                checked = true;
            }
            if caps.capture == CaptureSupport::None {
                assert_err!(
                    Stream::new(place)?.begin_capture(CaptureMode::Relaxed),
                    Error::Unsupported { .. }
                );
                checked = true;
            }
            if checked {
                Ok(Checked)
            } else {
                na("every optional capability is on")
            }
        },
    ),
    (
        "waits across backends: wait_event answers Unsupported where foreign_waits is off",
        |place| {
            with_other_backend(place, |other| {
                let (here, there) = (Stream::new(place)?, Stream::new(other)?);
                foreign_wait_agrees(place, "wait_event", here.wait_event(&there.record_event()?));
                sync(&here)
            })
        },
    ),
    (
        "waits across backends: wait_stream answers Unsupported where foreign_waits is off",
        |place| {
            with_other_backend(place, |other| {
                let (here, there) = (Stream::new(place)?, Stream::new(other)?);
                foreign_wait_agrees(place, "wait_stream", here.wait_stream(&there));
                sync(&here)
            })
        },
    ),
    ("mixing backends: record", |place| {
        with_other_backend(place, |other| {
            let here = Stream::new(place)?;
            let event = Event::new(other, EventFlags::default())?;
            mismatch("record", event.record(&here), place, other);
            Ok(())
        })
    }),
    ("mixing backends: elapsed", |place| {
        with_other_backend(place, |other| {
            let (a, b) = (
                Event::new(place, EventFlags::default())?,
                Event::new(other, EventFlags::default())?,
            );
            match a.elapsed(&b) {
                Err(Error::PlaceMismatch { .. }) => {}
                other_result => panic!("elapsed across backends: {other_result:?}"),
            }
            Ok(())
        })
    }),
    ("mixing backends: Graph::launch", |place| {
        if !capturing(place) {
            return na("no capture");
        }
        with_other_backend(place, |other| {
            let s = Stream::new(place)?;
            s.begin_capture(CaptureMode::ThreadLocal)?;
            let graph = s.end_capture()?;
            mismatch(
                "Graph::launch",
                graph.launch(&Stream::new(other)?),
                place,
                other,
            );
            Ok(())
        })
    }),
    ("mixing backends: buffers", |place| {
        with_other_backend(place, |other| {
            let (here, there) = (Stream::new(place)?, Stream::new(other)?);
            let foreign = there.alloc(16)?;
            let mine = here.alloc(16)?;
            mismatch(
                "copy_from_host",
                here.copy_from_host(&foreign, 0, &[1]),
                place,
                other,
            );
            mismatch("fill", here.fill(&foreign, 0, 1, 0), place, other);
            mismatch(
                "d2d",
                here.copy_device_to_device(&mine, 0, &foreign, 0, 1),
                place,
                other,
            );
            Ok(())
        })
    }),
    ("mixing backends: flags", |place| {
        with_other_backend(place, |other| {
            if !caps(place).flags || !caps(other).flags {
                return Ok(());
            }
            let here = Stream::new(place)?;
            let foreign = Flag::new(other)?;
            mismatch("wait_flag", here.wait_flag(&foreign, 1), place, other);
            mismatch("write_flag", here.write_flag(&foreign, 1), place, other);
            Ok(())
        })
    }),
    (
        "mixing places of one backend: buffers and graphs",
        |place| {
            let Some(other) = crate::harness::same_backend_other_place(place) else {
                return na("no second place of the same backend");
            };
            let (here, there) = (Stream::new(place)?, Stream::new(&other)?);
            let foreign = there.alloc(16)?;
            mismatch(
                "fill with another device's buffer",
                here.fill(&foreign, 0, 1, 0),
                place,
                &other,
            );
            if capturing(place) {
                here.begin_capture(CaptureMode::ThreadLocal)?;
                let graph = here.end_capture()?;
                mismatch(
                    "Graph::launch on another device",
                    graph.launch(&there),
                    place,
                    &other,
                );
            }
            Ok(Checked)
        },
    ),
];

fn run_cases(label: &str, cases: &[(&str, Check)], place: &Place) {
    let mut failures = Vec::new();
    let (mut checked, mut skipped) = (0, Vec::new());
    for (name, check) in cases {
        match catch_unwind(AssertUnwindSafe(|| check(place))) {
            Ok(Ok(Checked)) => checked += 1,
            Ok(Ok(NotApplicable(why))) => skipped.push(format!("{name} ({why})")),
            // A case that needs an operation the place lacks (capability off, `Unsupported`).
            Ok(Err(e)) => match crate::contract::lacked_capability(place, &e) {
                Some(capability) => skipped.push(format!("{name} ({capability} off)")),
                None => failures.push(format!("{name}: setup failed: {e:?}")),
            },
            Err(payload) => failures.push(format!(
                "{name}: {}",
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        }
    }
    eprintln!(
        "[conformance] {label} on {place}: {checked} error cases checked, {} n/a{}",
        skipped.len(),
        if skipped.is_empty() {
            String::new()
        } else {
            format!(": {}", skipped.join("; "))
        }
    );
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// At least 30 distinct bad-input and misuse cases exist.
#[test]
fn there_are_at_least_thirty_error_cases() {
    let total = GLOBAL_CASES.len() + PLACE_CASES.len();
    assert!(total >= 30, "only {total} error cases");
    let mut names: Vec<&str> = GLOBAL_CASES
        .iter()
        .chain(PLACE_CASES)
        .map(|(n, _)| *n)
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), total, "case names are distinct");
}

/// Cases that do not depend on a place: place text, priorities, flags, backends not compiled in,
/// device indices out of range.
#[test]
fn place_independent_error_paths() {
    // The place argument is unused by these cases.
    let anchor = places_under_test().into_iter().next().unwrap_or(Place::Cpu);
    run_cases("place-independent errors", GLOBAL_CASES, &anchor);
}

/// Cases run on every place: ranges, allocation, elapsed, capture misuse, panics, capabilities
/// that are off, mixing places.
#[test]
fn per_place_error_paths() {
    for_each_place(|place| {
        run_cases("per-place errors", PLACE_CASES, place);
        // The stream stays usable after all that misuse.
        if caps(place).host_funcs {
            let s = Stream::new(place)?;
            let log = Log::new();
            s.launch_host_func(log.task(1))?;
            sync(&s)?;
            assert_eq!(log.entries(), vec![1]);
        }
        Ok(())
    });
}
