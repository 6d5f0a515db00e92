//! A library that loads but lacks the HIP functions (here the C library, present on every Linux
//! machine) is `Error::BackendUnavailable` naming what is missing, never a panic.

use devstream_core::{DeviceBackend, Error};
use devstream_hip::{HipBackend, LIBRARY_ENV};

#[test]
fn library_without_hip_functions_is_backend_unavailable() {
    std::env::set_var(LIBRARY_ENV, "libc.so.6");
    match HipBackend::probe() {
        Err(Error::BackendUnavailable { backend, reason }) => {
            assert_eq!(backend, "hip");
            assert!(
                reason.contains("lacks required HIP functions") && reason.contains("hipInit"),
                "the reason lists the missing functions: {reason}"
            );
        }
        other => panic!("probe with a library lacking HIP: {other:?}"),
    }
    assert!(HipBackend::places().is_empty());
    let place = devstream_core::Place::Hip(0);
    assert!(matches!(
        HipBackend::new_stream(&place, Default::default()),
        Err(Error::BackendUnavailable { .. })
    ));
}
