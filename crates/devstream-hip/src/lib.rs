//! devstream's HIP backend: the HIP runtime (`libamdhip64`), loaded at run time.
//!
//! This crate is a loader, a raw-call table ([`HipApi`]) and error mapping
//! (`hipGetErrorName`/`hipGetErrorString`); the stream, event, graph, flag and buffer logic is
//! `devstream-gpu-common`'s, the same code the CUDA backend runs. The public names are aliases
//! of the generic types over [`HipApi`]:
//!
//! | name | what |
//! |---|---|
//! | [`HipBackend`] | the `DeviceBackend`: places `hip:0..N`, capabilities, constructors |
//! | [`HipStream`] | a `hipStream_t` (owned, borrowed, null stream or `hipStreamPerThread`) |
//! | [`HipEvent`], [`HipGraph`], [`HipFlag`] | events, captured graphs, wait/write-value flags |
//! | [`HipBuffer`], [`HipHostBuffer`] | device memory, pinned host memory |
//! | [`HipModule`], [`HipKernel`] | code objects (`hipModuleLoadData`) and their kernels |
//!
//! Loading: [`LIBRARY_ENV`] (`DEVSTREAM_HIP_LIBRARY`) names the library to open; otherwise
//! `libamdhip64.so`, `.so.6`, `.so.5` are tried. A missing library or a missing required
//! function is `Error::BackendUnavailable`; a missing optional function (ROCm 5.2 has no
//! `hipLaunchHostFunc`) turns its capability off or selects the older equivalent
//! (`hipStreamAddCallback`). Nothing panics:
//!
//! ```
//! use devstream_core::{DeviceBackend, Error};
//! use devstream_hip::HipBackend;
//! match HipBackend::probe() {
//!     Ok(()) => println!("{} HIP device(s)", HipBackend::places().len()),
//!     Err(Error::BackendUnavailable { reason, .. }) => {
//!         assert!(HipBackend::places().is_empty());
//!         println!("no HIP here: {reason}");
//!     }
//!     Err(other) => panic!("unexpected {other}"),
//! }
//! ```
#![warn(missing_docs)]

mod api;
mod loader;
mod sys;

pub use api::HipApi;
pub use loader::{DEFAULT_NAMES, DISABLE_ENV, LIBRARY_ENV};

/// Shared-layer types and raw handles, re-exported.
pub use devstream_gpu_common::ptx;
pub use devstream_gpu_common::{
    CaptureInfo, CaptureStatus, DevicePtr, KernelArg, LaunchConfig, MemAttach, Optional,
    RawGraphNode, StreamKind,
};

/// The HIP [`DeviceBackend`](devstream_core::DeviceBackend).
pub type HipBackend = devstream_gpu_common::GpuBackend<HipApi>;
/// A HIP stream.
pub type HipStream = devstream_gpu_common::GpuStream<HipApi>;
/// A HIP event.
pub type HipEvent = devstream_gpu_common::GpuEvent<HipApi>;
/// A HIP graph captured from a stream, instantiated.
pub type HipGraph = devstream_gpu_common::GpuGraph<HipApi>;
/// A host-visible `u32` (in an 8-byte word) streams wait on (`hipStreamWaitValue64`) and write.
pub type HipFlag = devstream_gpu_common::GpuFlag<HipApi>;
/// Device memory.
pub type HipBuffer = devstream_gpu_common::GpuBuffer<HipApi>;
/// Pinned host memory (`hipHostMalloc`, mapped).
pub type HipHostBuffer = devstream_gpu_common::GpuHostBuffer<HipApi>;
/// Managed (unified) memory.
pub type HipManagedBuffer = devstream_gpu_common::GpuManagedBuffer<HipApi>;
/// A loaded code object (`hipModuleLoadData`).
pub type HipModule = devstream_gpu_common::GpuModule<HipApi>;
/// A kernel of a module, launched with `hipModuleLaunchKernel`.
pub type HipKernel = devstream_gpu_common::GpuKernel<HipApi>;
/// Scoped exchange of the thread's stream-capture mode.
pub type HipCaptureModeGuard = devstream_gpu_common::CaptureModeGuard<HipApi>;
/// A HIP device (properties, capabilities, default stream).
pub type HipDevice = devstream_gpu_common::Device<HipApi>;
/// The loaded HIP runtime state.
pub type HipRuntime = devstream_gpu_common::Runtime<HipApi>;

/// The HIP driver version (`hipDriverGetVersion`), or why the runtime cannot be used.
pub fn driver_version() -> devstream_core::Result<i32> {
    Ok(HipRuntime::get()?.info().driver_version)
}

/// The path or name the HIP runtime library was loaded from, or why it cannot be used.
pub fn library() -> devstream_core::Result<String> {
    HipRuntime::get()?;
    Ok(api::library_path().unwrap_or_default().to_string())
}

/// Environment variable naming the RCCL library file to load (cargo feature `comm`).
#[cfg(feature = "comm")]
pub use devstream_gpu_common::comm::RCCL_LIBRARY_ENV;

/// One rank of an RCCL communicator (cargo feature `comm`): collectives queued on
/// [`HipStream`]s through `devstream_core::DeviceCommunicator`.
#[cfg(feature = "comm")]
pub type HipComm = devstream_gpu_common::GpuComm<HipApi>;

/// Whether RCCL loads, with its path and version (cargo feature `comm`), or
/// `Error::BackendUnavailable` naming what was tried.
#[cfg(feature = "comm")]
pub fn comm_library() -> devstream_core::Result<(String, String)> {
    devstream_gpu_common::comm::library_info::<HipApi>()
}
