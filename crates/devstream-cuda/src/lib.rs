//! devstream's CUDA backend: the CUDA driver API through cudarc, loaded at run time.
//!
//! This crate is a loader, a raw-call table ([`CudaApi`]) and error mapping; the stream, event,
//! graph, flag and buffer logic is `devstream-gpu-common`'s, shared with the HIP backend. The
//! public names are aliases of the generic types over [`CudaApi`]:
//!
//! | name | what |
//! |---|---|
//! | [`CudaBackend`] | the `DeviceBackend`: places `cuda:0..N`, capabilities, constructors |
//! | [`CudaStream`] | a `CUstream` (owned, borrowed, legacy default or per-thread) |
//! | [`CudaEvent`], [`CudaGraph`], [`CudaFlag`] | events, captured graphs, wait/write-value flags |
//! | [`CudaBuffer`], [`CudaHostBuffer`] | stream-ordered device memory, pinned host memory |
//! | [`CudaModule`], [`CudaKernel`] | PTX modules and their kernels ([`ptx`] has a few) |
//!
//! Bindings: cudarc's `cuda-12080` driver bindings (see the README for why). A machine without
//! `libcuda` gets `Error::BackendUnavailable`, never a panic:
//!
//! ```
//! use devstream_core::{DeviceBackend, Error, Place};
//! use devstream_cuda::CudaBackend;
//! match CudaBackend::probe() {
//!     Ok(()) => println!("{} CUDA device(s)", CudaBackend::places().len()),
//!     Err(Error::BackendUnavailable { reason, .. }) => {
//!         assert!(CudaBackend::places().is_empty());
//!         println!("no CUDA here: {reason}");
//!     }
//!     Err(other) => panic!("unexpected {other}"),
//! }
//! ```
#![warn(missing_docs)]

mod api;
mod interop;
pub mod ptx;

pub use api::{CudaApi, MIN_DRIVER_VERSION};
pub use cudarc;
pub use interop::{CudaEventExt, CudaStreamExt};

/// Shared-layer types and raw handles, re-exported.
pub use devstream_gpu_common::{
    AccessPolicyWindow, AccessProperty, CaptureInfo, CaptureStatus, DevicePtr, KernelArg,
    LaunchConfig, MemAttach, Optional, RawGraphNode, StreamAttribute, StreamAttributeId,
    StreamKind, SyncPolicy,
};

/// The CUDA [`DeviceBackend`](devstream_core::DeviceBackend).
pub type CudaBackend = devstream_gpu_common::GpuBackend<CudaApi>;
/// A CUDA stream.
pub type CudaStream = devstream_gpu_common::GpuStream<CudaApi>;
/// A CUDA event.
pub type CudaEvent = devstream_gpu_common::GpuEvent<CudaApi>;
/// A CUDA graph captured from a stream, instantiated.
pub type CudaGraph = devstream_gpu_common::GpuGraph<CudaApi>;
/// An (initially empty) CUDA graph to capture into.
pub type CudaGraphDef = devstream_gpu_common::GpuGraphDef<CudaApi>;
/// A host-visible `u32` streams wait on and write.
pub type CudaFlag = devstream_gpu_common::GpuFlag<CudaApi>;
/// Device memory.
pub type CudaBuffer = devstream_gpu_common::GpuBuffer<CudaApi>;
/// Pinned host memory.
pub type CudaHostBuffer = devstream_gpu_common::GpuHostBuffer<CudaApi>;
/// Managed (unified) memory.
pub type CudaManagedBuffer = devstream_gpu_common::GpuManagedBuffer<CudaApi>;
/// A loaded PTX/cubin module.
pub type CudaModule = devstream_gpu_common::GpuModule<CudaApi>;
/// A kernel of a module.
pub type CudaKernel = devstream_gpu_common::GpuKernel<CudaApi>;
/// Scoped exchange of the thread's stream-capture mode.
pub type CudaCaptureModeGuard = devstream_gpu_common::CaptureModeGuard<CudaApi>;
/// A CUDA device (primary context, properties, capabilities).
pub type CudaDevice = devstream_gpu_common::Device<CudaApi>;
/// The loaded CUDA runtime state.
pub type CudaRuntime = devstream_gpu_common::Runtime<CudaApi>;

/// The driver version (`1000 * major + 10 * minor`), or why the driver cannot be used.
pub fn driver_version() -> devstream_core::Result<i32> {
    Ok(CudaRuntime::get()?.info().driver_version)
}

/// Environment variable naming the NCCL library file to load (cargo feature `comm`).
#[cfg(feature = "comm")]
pub use devstream_gpu_common::comm::NCCL_LIBRARY_ENV;

/// One rank of an NCCL communicator (cargo feature `comm`): collectives queued on
/// [`CudaStream`]s through `devstream_core::DeviceCommunicator`.
#[cfg(feature = "comm")]
pub type CudaComm = devstream_gpu_common::GpuComm<CudaApi>;

/// Whether NCCL loads, with its path and version (cargo feature `comm`), or
/// `Error::BackendUnavailable` naming what was tried.
#[cfg(feature = "comm")]
pub fn comm_library() -> devstream_core::Result<(String, String)> {
    devstream_gpu_common::comm::library_info::<CudaApi>()
}
