//! With the HIP runtime library absent, every entry point answers `Error::BackendUnavailable`
//! and no place is listed; nothing panics. (Its own test binary: the loader's result is
//! process-wide, and this test points the loader at a library that does not exist.)

use devstream::{BackendKind, Error, Event, EventFlags, Place, Stream};
use devstream_core::DeviceBackend;
use devstream_hip::{HipBackend, LIBRARY_ENV};

/// Whether `result` is the error of a backend that cannot be used.
fn unavailable<T>(result: devstream::Result<T>) -> bool {
    matches!(result, Err(Error::BackendUnavailable { .. }))
}

#[test]
fn absent_library_is_backend_unavailable() {
    std::env::set_var(LIBRARY_ENV, "/nonexistent/devstream-test/libamdhip64.so");
    let place: Place = "hip:0".parse().expect("hip:0 parses");

    match HipBackend::probe() {
        Err(Error::BackendUnavailable { backend, reason }) => {
            assert_eq!(backend, "hip");
            assert!(
                reason.contains("/nonexistent/devstream-test/libamdhip64.so"),
                "the reason names the library tried: {reason}"
            );
        }
        other => panic!("probe with the library absent: {other:?}"),
    }
    assert!(HipBackend::places().is_empty());
    assert_eq!(HipBackend::live_counts(), Default::default());
    assert!(devstream_hip::driver_version().is_err());
    assert!(devstream_hip::library().is_err());

    // The same through the facade.
    assert!(!devstream::places()
        .iter()
        .any(|p| matches!(p, Place::Hip(_))));
    assert!(devstream::places().contains(&Place::Cpu));
    assert!(unavailable(devstream::probe(BackendKind::Hip)));
    assert!(unavailable(Stream::new(&place)));
    assert!(unavailable(Stream::default_stream(&place)));
    assert!(unavailable(Event::new(&place, EventFlags::default())));
    assert!(unavailable(devstream::capabilities(&place)));
    assert!(unavailable(devstream::priority_range(&place)));
}
