//! What the CUDA integration tests share: the device to test on (or a skip), a plain stream, a
//! stream held at a flag, and a host function that counts its runs.

use devstream_core::{DeviceBackend, DeviceStream, Place, StreamOptions};
use devstream_cuda::{CudaBackend, CudaFlag, CudaStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Tests run one at a time: a capture in `Global` mode forbids "potentially unsafe" calls (such
/// as synchronous allocation) on every other thread while it lasts.
static SERIAL: Mutex<()> = Mutex::new(());

/// `cuda:0` and the lock that keeps tests serial, or `None` (with a printed skip) where no CUDA
/// device is usable; panics instead when `DEVSTREAM_REQUIRE` lists `cuda`, so a GPU run can never
/// pass by skipping.
pub fn gpu() -> Option<(Place, MutexGuard<'static, ()>)> {
    let serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let required = std::env::var("DEVSTREAM_REQUIRE")
        .map(|v| v.split(',').any(|b| b.trim() == "cuda"))
        .unwrap_or(false);
    match CudaBackend::probe() {
        Ok(()) if !CudaBackend::places().is_empty() => Some((Place::Cuda(0), serial)),
        other => {
            assert!(
                !required,
                "DEVSTREAM_REQUIRE lists cuda but no CUDA device is usable: {other:?}"
            );
            eprintln!("skipped: no CUDA device ({other:?})");
            None
        }
    }
}

/// Unwraps the answer of [`gpu`] (or of a wrapper of it), or returns from the calling test
/// where there is no device: `gpu` has printed the skip already, or failed the test where a GPU
/// run requires CUDA.
macro_rules! or_skip {
    ($found:expr) => {
        match $found {
            Some(found) => found,
            None => return,
        }
    };
}
pub(crate) use or_skip;

/// A new stream of `place` with default options.
pub fn stream(place: &Place) -> CudaStream {
    CudaBackend::new_stream(place, StreamOptions::default()).unwrap()
}

/// A new flag of `place`.
#[allow(dead_code)] // not every test binary that shares this module uses flags
pub fn flag(place: &Place) -> CudaFlag {
    CudaBackend::new_flag(place).unwrap()
}

/// Holds `s` at a new flag: work submitted to it from now on waits until `flag >= 1`.
#[allow(dead_code)] // not every test binary that shares this module holds streams
pub fn hold(s: &CudaStream) -> CudaFlag {
    let gate = flag(s.place());
    s.wait_flag(&gate, 1).unwrap();
    gate
}

/// A new stream held at a flag (see [`hold`]).
#[allow(dead_code)] // not every test binary that shares this module holds streams
pub fn gated(place: &Place) -> (CudaStream, CudaFlag) {
    let s = stream(place);
    let gate = hold(&s);
    (s, gate)
}

/// Launches on `stream` a host function that counts its runs; answers the count.
#[allow(dead_code)] // not every test binary that shares this module counts host functions
pub fn launch_counting(stream: &CudaStream) -> Arc<AtomicUsize> {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let count = move || {
        counter.fetch_add(1, Ordering::SeqCst);
    };
    stream.launch_host_func(Box::new(count)).unwrap();
    ran
}
