//! With the HIP runtime installed (Debian: `libamdhip64-5`) and no AMD GPU, the backend loads,
//! lists no place, and `hip:N` answers `Error::NoDevice`.
//!
//! Where the ROCm headers are installed (`cfg(hip_headers)`, set by `build.rs`; CI installs
//! `libamdhip64-dev`, which brings the runtime) the runtime must load, so this cannot pass by
//! skipping. Elsewhere the test reports that it had nothing to check. On a machine with an AMD
//! GPU it checks that a stream on `hip:0` works instead.

use devstream::{Error, Event, EventFlags, Place, Stream};
use devstream_core::DeviceBackend;
use devstream_hip::HipBackend;

#[test]
fn installed_runtime_without_a_device_is_no_device() {
    if let Err(error) = HipBackend::probe() {
        if cfg!(hip_headers) {
            panic!("the ROCm headers are installed, so the HIP runtime must load: {error}");
        }
        eprintln!("no HIP runtime here ({error}); nothing to check");
        return;
    }
    let library = devstream_hip::library().expect("loaded");
    let version = devstream_hip::driver_version().expect("loaded");
    eprintln!("HIP runtime {library}, driver version {version}");
    let place: Place = "hip:0".parse().expect("hip:0 parses");

    if !HipBackend::places().is_empty() {
        eprintln!("a HIP device is present: checking a stream instead of NoDevice");
        let stream = Stream::new(&place).expect("a stream on hip:0");
        stream.synchronize().expect("synchronize");
        return;
    }

    assert!(!devstream::places()
        .iter()
        .any(|p| matches!(p, Place::Hip(_))));
    assert!(devstream::probe(devstream::BackendKind::Hip).is_ok());
    let no_device = |result: devstream::Result<()>, what: &str| match result {
        Err(Error::NoDevice { place: p, .. }) => assert_eq!(p, place, "{what}"),
        other => panic!("{what}: expected NoDevice, got {other:?}"),
    };
    no_device(Stream::new(&place).map(drop), "Stream::new");
    no_device(
        Stream::default_stream(&place).map(drop),
        "Stream::default_stream",
    );
    no_device(Stream::per_thread(&place).map(drop), "Stream::per_thread");
    no_device(
        Event::new(&place, EventFlags::default()).map(drop),
        "Event::new",
    );
    no_device(devstream::capabilities(&place).map(drop), "capabilities");
    no_device(
        devstream::priority_range(&place).map(drop),
        "priority_range",
    );
    assert!(matches!(
        Stream::new(&Place::Hip(7)),
        Err(Error::NoDevice { .. })
    ));
}
