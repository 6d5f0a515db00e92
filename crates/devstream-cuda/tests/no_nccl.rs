//! Collectives without NCCL (cargo feature `comm`): with `DEVSTREAM_NCCL_LIBRARY` naming a file
//! that does not exist, every collectives entry point answers a typed error naming what was
//! tried, and nothing panics — with or without a CUDA driver and GPU. (Its own test binary:
//! the library's load result is process-wide.)
#![cfg(feature = "comm")]

use devstream_core::{CommBackend, DeviceBackend, Error, Place, UniqueId};
use devstream_cuda::{CudaBackend, CudaComm, NCCL_LIBRARY_ENV};

const MISSING: &str = "/nonexistent/devstream-test/libnccl.so.2";

#[test]
fn without_nccl_collectives_are_typed_errors_and_nothing_panics() {
    std::env::set_var(NCCL_LIBRARY_ENV, MISSING);
    let place = Place::Cuda(0);

    // The library itself: unavailable, and the reason names the file tried.
    match devstream_cuda::comm_library() {
        Err(Error::BackendUnavailable { backend, reason }) => {
            assert_eq!(backend, "cuda");
            assert!(
                reason.contains(MISSING),
                "the reason names the file: {reason}"
            );
            assert!(
                reason.contains(NCCL_LIBRARY_ENV),
                "and the variable: {reason}"
            );
        }
        other => panic!("NCCL at a missing path: {other:?}"),
    }

    let id = UniqueId::from_raw([0; 128]);
    let typed = |e: &Error| matches!(e, Error::BackendUnavailable { .. } | Error::NoDevice { .. });
    let made = CudaBackend::unique_id(&place);
    assert!(
        made.as_ref().is_err_and(typed),
        "unique_id without NCCL: {made:?}"
    );
    let joined = CudaBackend::init_comm(&place, 0, 1, &id);
    assert!(
        joined.as_ref().is_err_and(typed),
        "init without NCCL: {joined:?}"
    );
    assert!(CudaComm::init_all(std::slice::from_ref(&place)).is_err_and(|e| typed(&e)));
    // Bad arguments are refused first, whatever is installed.
    assert!(matches!(
        CudaBackend::init_comm(&place, 2, 2, &id),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        CudaBackend::init_comm(&place, 0, 0, &id),
        Err(Error::InvalidArgument(_))
    ));

    match CudaBackend::probe() {
        Ok(()) if !CudaBackend::places().is_empty() => {
            // A GPU but no NCCL: the place says it has no collectives, and the error is about
            // NCCL, not the driver.
            let caps = CudaBackend::capabilities(&place).expect("cuda:0 capabilities");
            assert!(!caps.collectives, "no NCCL, yet collectives: {caps:?}");
            match CudaBackend::unique_id(&place) {
                Err(Error::BackendUnavailable { reason, .. }) => {
                    assert!(reason.contains("NCCL"), "{reason}")
                }
                other => panic!("unique_id on a GPU without NCCL: {other:?}"),
            }
        }
        other => eprintln!("no CUDA device here ({other:?}): the driver's error came first"),
    }
}
