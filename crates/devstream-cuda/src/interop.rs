//! Interop with the CUDA ecosystem: native handles in and out, and cudarc's own stream objects.

use crate::{CudaEvent, CudaStream};
use cudarc::driver::sys;
use devstream_core::{Error, EventFlags, Place, Result};
use devstream_gpu_common::{RawEvent, RawStream};
use std::sync::Arc;

/// CUDA-specific constructors and accessors of [`CudaStream`].
///
/// ```no_run
/// use devstream_cuda::{CudaStream, CudaStreamExt};
/// # fn f(theirs: std::sync::Arc<cudarc::driver::CudaStream>) -> devstream_core::Result<()> {
/// let ours = CudaStream::from_cudarc(theirs.clone())?;   // keeps `theirs` alive
/// assert_eq!(ours.as_raw(), theirs.cu_stream());
/// # Ok(()) }
/// ```
pub trait CudaStreamExt: Sized {
    /// Adopts a cudarc stream (of a primary context): devstream uses the same `CUstream` and
    /// holds the `Arc` as long as any handle lives.
    fn from_cudarc(stream: Arc<cudarc::driver::CudaStream>) -> Result<Self>;

    /// Wraps a foreign `CUstream` of device `ordinal` without owning it.
    ///
    /// # Safety
    /// `stream` is a live stream of the device's primary context (or null / `CU_STREAM_LEGACY`
    /// / `CU_STREAM_PER_THREAD`) and outlives the returned handle and its clones.
    unsafe fn from_raw(stream: sys::CUstream, ordinal: usize) -> Result<Self>;

    /// The native `CUstream` (null for the legacy default stream).
    fn as_raw(&self) -> sys::CUstream;
}

impl CudaStreamExt for CudaStream {
    fn from_cudarc(stream: Arc<cudarc::driver::CudaStream>) -> Result<Self> {
        let context = stream.context();
        if !context.is_primary() {
            return Err(Error::InvalidArgument(
                "from_cudarc: the stream belongs to a non-primary context; devstream uses each \
                 device's primary context"
                    .into(),
            ));
        }
        let place = Place::Cuda(context.ordinal());
        let raw = RawStream(stream.cu_stream().cast());
        // SAFETY: the stream is alive while the Arc (kept by the handle) is.
        unsafe { CudaStream::from_raw_handle(raw, &place, Some(stream)) }
    }

    unsafe fn from_raw(stream: sys::CUstream, ordinal: usize) -> Result<Self> {
        // SAFETY: per this function's contract.
        unsafe {
            CudaStream::from_raw_handle(RawStream(stream.cast()), &Place::Cuda(ordinal), None)
        }
    }

    fn as_raw(&self) -> sys::CUstream {
        self.raw_handle().0.cast()
    }
}

/// CUDA-specific constructors and accessors of [`CudaEvent`].
pub trait CudaEventExt: Sized {
    /// Wraps a foreign `CUevent` of device `ordinal`, created with `flags`, without owning it.
    ///
    /// # Safety
    /// `event` is a live event of the device's primary context that outlives the handle.
    unsafe fn from_raw(event: sys::CUevent, ordinal: usize, flags: EventFlags) -> Result<Self>;

    /// The native `CUevent`.
    fn as_raw(&self) -> sys::CUevent;
}

impl CudaEventExt for CudaEvent {
    unsafe fn from_raw(event: sys::CUevent, ordinal: usize, flags: EventFlags) -> Result<Self> {
        // SAFETY: per this function's contract.
        unsafe { CudaEvent::from_raw_handle(RawEvent(event.cast()), &Place::Cuda(ordinal), flags) }
    }

    fn as_raw(&self) -> sys::CUevent {
        self.raw_handle().0.cast()
    }
}
