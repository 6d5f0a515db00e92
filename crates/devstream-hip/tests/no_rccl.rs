//! Collectives without RCCL (cargo feature `comm`): with `DEVSTREAM_RCCL_LIBRARY` naming a file
//! that does not exist, every collectives entry point answers a typed error naming what was
//! tried, and nothing panics — with or without a HIP runtime and GPU. (Its own test binary:
//! the library's load result is process-wide.)
#![cfg(feature = "comm")]

use devstream_core::{CommBackend, DeviceBackend, Error, Place, UniqueId};
use devstream_hip::{HipBackend, RCCL_LIBRARY_ENV};

const MISSING: &str = "/nonexistent/devstream-test/librccl.so.1";

#[test]
fn without_rccl_collectives_are_typed_errors_and_nothing_panics() {
    std::env::set_var(RCCL_LIBRARY_ENV, MISSING);
    let place: Place = "hip:0".parse().expect("hip:0 parses");
    match devstream_hip::comm_library() {
        Err(Error::BackendUnavailable { backend, reason }) => {
            assert_eq!(backend, "hip");
            assert!(
                reason.contains(MISSING),
                "the reason names the file: {reason}"
            );
        }
        other => panic!("RCCL at a missing path: {other:?}"),
    }
    let typed = |e: &Error| matches!(e, Error::BackendUnavailable { .. } | Error::NoDevice { .. });
    let made = HipBackend::unique_id(&place);
    assert!(made.as_ref().is_err_and(typed), "{made:?}");
    let joined = HipBackend::init_comm(&place, 0, 1, &UniqueId::from_raw([0; 128]));
    assert!(joined.as_ref().is_err_and(typed), "{joined:?}");
    if HipBackend::probe().is_ok() && !HipBackend::places().is_empty() {
        let caps = HipBackend::capabilities(&place).expect("hip:0 capabilities");
        assert!(!caps.collectives, "no RCCL, yet collectives: {caps:?}");
    }
}
