//! The missing-driver path, for real: on machines without libcuda (CI) every entry point answers
//! `Error::BackendUnavailable` and nothing panics; with a driver, out-of-range ordinals answer
//! `Error::NoDevice`.

use devstream_core::{DeviceBackend, Error, EventFlags, Place, StreamOptions};
use devstream_cuda::{CudaBackend, CudaGraphDef, CudaManagedBuffer, CudaModule};

/// Whether `result` is the error of a backend that cannot be used.
fn unavailable<T>(result: devstream_core::Result<T>) -> bool {
    matches!(result, Err(Error::BackendUnavailable { .. }))
}

#[test]
fn without_libcuda_everything_is_backend_unavailable_and_nothing_panics() {
    let place = Place::Cuda(0);
    match CudaBackend::probe() {
        Err(Error::BackendUnavailable { backend, reason }) => {
            eprintln!("no CUDA driver here (as in CI): {reason}");
            assert_eq!(backend, "cuda");
            assert!(!reason.is_empty());
            assert!(CudaBackend::places().is_empty());
            assert!(unavailable(CudaBackend::capabilities(&place)));
            assert!(unavailable(CudaBackend::priority_range(&place)));
            assert!(unavailable(CudaBackend::new_stream(
                &place,
                StreamOptions::default()
            )));
            assert!(unavailable(CudaBackend::default_stream(&place)));
            assert!(unavailable(CudaBackend::per_thread_stream(&place)));
            assert!(unavailable(CudaBackend::new_event(
                &place,
                EventFlags::default()
            )));
            assert!(unavailable(CudaBackend::new_flag(&place)));
            assert!(unavailable(CudaModule::load(
                &place,
                devstream_cuda::ptx::KERNELS.as_bytes()
            )));
            assert!(unavailable(CudaGraphDef::new(&place)));
            assert!(unavailable(CudaManagedBuffer::new(&place, 16)));
            assert!(unavailable(devstream_cuda::driver_version()));
            assert_eq!(CudaBackend::live_counts(), Default::default());
            // Asking twice gives the same answer (the failed load is remembered, not retried
            // into a panic).
            assert!(unavailable(CudaBackend::probe()));
        }
        Ok(()) => {
            let count = CudaBackend::places().len();
            eprintln!("CUDA driver present, {count} device(s)");
            let beyond = Place::Cuda(count);
            let no_device = |e: Error| matches!(e, Error::NoDevice { .. });
            assert!(
                CudaBackend::new_stream(&beyond, StreamOptions::default()).is_err_and(no_device)
            );
            assert!(CudaBackend::capabilities(&beyond).is_err_and(no_device));
        }
        Err(other) => panic!("probe answered {other:?}"),
    }
}

#[test]
fn places_of_other_backends_are_refused() {
    for place in [Place::Cpu, Place::Hip(0), Place::Wgpu(0)] {
        let e = CudaBackend::new_stream(&place, StreamOptions::default()).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidArgument(_) | Error::BackendUnavailable { .. }
            ),
            "{place}: {e:?}"
        );
    }
}
