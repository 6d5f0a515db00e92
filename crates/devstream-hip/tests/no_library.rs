//! With the HIP runtime library absent, every entry point answers `Error::BackendUnavailable`
//! and no place is listed; nothing panics. (Its own test binary: the loader's result is
//! process-wide, and this test points the loader at a library that does not exist.)

use devstream::{BackendKind, Error, Event, EventFlags, Place, Stream};
use devstream_core::DeviceBackend;
use devstream_hip::{HipBackend, LIBRARY_ENV};

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
    assert!(matches!(
        devstream::probe(BackendKind::Hip),
        Err(Error::BackendUnavailable { .. })
    ));
    assert!(matches!(
        Stream::new(&place),
        Err(Error::BackendUnavailable { .. })
    ));
    assert!(matches!(
        Stream::default_stream(&place),
        Err(Error::BackendUnavailable { .. })
    ));
    assert!(matches!(
        Event::new(&place, EventFlags::default()),
        Err(Error::BackendUnavailable { .. })
    ));
    assert!(matches!(
        devstream::capabilities(&place),
        Err(Error::BackendUnavailable { .. })
    ));
    assert!(matches!(
        devstream::priority_range(&place),
        Err(Error::BackendUnavailable { .. })
    ));
}
