//! The one shared CUDA/HIP layer of devstream.
//!
//! CUDA and HIP have the same stream/event/graph model. This crate writes that model once —
//! streams, events, graphs from stream capture, flags, stream-ordered buffers, pinned host
//! buffers, host functions, kernels and the rest of the stream-management API — generic over
//! [`RawApi`], a table of raw native calls. A backend crate only provides:
//!
//! * a loader ([`RawApi::load`]: find the library, check symbols, initialise; never panic),
//! * the raw-call table (one thin function per native call), and
//! * error mapping ([`RawApi::error_kind`], [`RawApi::error_message`]).
//!
//! `devstream-cuda` does that over cudarc's driver bindings; `devstream-hip` over a loaded
//! `libamdhip64`. So every CUDA run on real hardware also runs the HIP backend's logic.
//!
//! With the cargo feature `comm`, [`comm`] adds collectives ([`GpuComm`]): NCCL for CUDA and
//! RCCL for HIP, loaded at run time, written once like the rest.
//!
//! ```
//! use devstream_gpu_common::LaunchConfig;
//! // Everything else needs a runtime; the launch geometry helper does not.
//! assert_eq!(LaunchConfig::for_elements(10, 4).grid, (3, 1, 1));
//! ```
#![warn(missing_docs)]

/// Declares a cheap `Clone` handle `$name<A>` over its shared state (`inner: Arc<$inner<A>>`):
/// the struct, a `Clone` that clones the `Arc` (a derived one would ask for `A: Clone`), and a
/// `Debug` that shows the type's name and the listed fields, each read from the handle named
/// in `debug(…)`.
macro_rules! shared_handle {
    (
        $(#[$attr:meta])*
        pub struct $name:ident<A: RawApi> { $vis:vis inner: Arc<$inner:ident<A>>, }
        debug($handle:ident) { $($field:ident: $value:expr,)* }
    ) => {
        $(#[$attr])*
        pub struct $name<A: RawApi> {
            $vis inner: ::std::sync::Arc<$inner<A>>,
        }

        impl<A: RawApi> Clone for $name<A> {
            fn clone(&self) -> Self {
                $name {
                    inner: self.inner.clone(),
                }
            }
        }

        impl<A: RawApi> ::std::fmt::Debug for $name<A> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let $handle = self;
                f.debug_struct(stringify!($name))
                    $(.field(stringify!($field), &$value))*
                    .finish()
            }
        }
    };
}

mod buffer;
#[cfg(feature = "comm")]
pub mod comm;
#[cfg(feature = "comm")]
mod comm_lib;
mod completion;
mod device;
mod error;
mod event;
mod ext;
mod flag;
mod foreign;
mod graph;
mod graph_memory;
mod host_buffer;
mod hostfn;
mod kernel;
mod mempool;
pub mod ptx;
pub mod raw;
mod stream;
mod users;
mod words;

pub use buffer::{GpuBuffer, GpuHostBuffer};
#[cfg(feature = "comm")]
pub use comm::GpuComm;
pub use device::{device_of, Device, GpuBackend, Runtime};
pub use error::{check, check_ready, map_alloc_error, map_error};
pub use event::GpuEvent;
pub use ext::{CaptureModeGuard, GpuManagedBuffer};
pub use flag::GpuFlag;
pub use graph::{GpuGraph, GpuGraphDef};
pub use kernel::{GpuKernel, GpuModule, KernelArg, LaunchConfig};
pub use mempool::GpuMemoryPool;
pub use raw::{
    AccessPolicyWindow, AccessProperty, CaptureInfo, CaptureStatus, DeviceProperties, DevicePtr,
    ErrorKind, LoadInfo, MemAttach, MemPoolAttribute, Optional, RawApi, RawCapture, RawContext,
    RawDevices, RawError, RawEvent, RawEvents, RawFunction, RawGraph, RawGraphExec, RawGraphNode,
    RawGraphs, RawKernels, RawMemPool, RawMemory, RawModule, RawResult, RawStream, RawStreams,
    StreamAttribute, StreamAttributeId, SyncPolicy,
};
pub use stream::{GpuStream, StreamKind};
