//! Core contract of devstream.
//!
//! This crate holds everything a backend needs to implement and everything the facade needs to
//! dispatch, and nothing backend specific:
//!
//! * [`Place`]: where a stream lives (`"cpu"`, `"cuda:0"`, `"npu:1"`, ...);
//! * [`Priority`], [`PriorityRange`]: priorities and their one normalisation rule;
//! * [`StreamOptions`], [`EventFlags`], [`CaptureMode`]: what a stream, event or capture is asked to be;
//! * [`Capabilities`]: what a place can do, one flag per feature;
//! * [`Error`]/[`Result`]: the typed errors every backend returns;
//! * [`Completion`]: stream work as a runtime-agnostic `Future` (backends fill it through a
//!   [`Completer`]);
//! * the backend traits in [`traits`]: [`DeviceBackend`], [`DeviceStream`], [`DeviceEvent`],
//!   [`DeviceGraph`], [`DeviceFlag`], [`DeviceBuffer`], [`HostBuffer`] (the contract, with the
//!   rules every implementation keeps), and the placeholders a backend names for what it lacks;
//! * [`dynamic`]: the same traits type-erased, one layer for every backend the facade does not
//!   name at compile time;
//! * [`comm`]: collectives' element types, reductions, communicator ids and backend traits;
//! * [`memory`]: host memory of a size a user chose, allocated fallibly;
//! * [`mod@panic`]: containing panics of user code (host closures, destructors, payloads);
//! * [`current`]: per-thread, per-place current-stream slots with RAII guards;
//! * [`pool`]: a lazily created round-robin pool of streams per place and priority;
//! * [`elide`]: redundant-wait elision (what a stream already waited for), for every backend;
//! * [`capture`]: the capture-mode rule (which calls a capture forbids, where, and how a
//!   forbidden call fails), for every backend;
//! * [`host_fn_access`]: host functions given host buffers, ordered against the buffers'
//!   copies by waits.
//!
//! # Example
//! ```
//! use devstream_core::{Place, Priority, PriorityRange};
//! let place: Place = "gpu:1".parse().unwrap();
//! assert_eq!(place, Place::Cuda(1));
//! assert_eq!(place.to_string(), "cuda:1");
//! let range = PriorityRange { least: 0, greatest: -5 };
//! assert_eq!(range.normalize(Priority::High), -5);
//! assert_eq!(range.normalize(Priority::Native(-100)), -5);
//! ```
#![warn(missing_docs)]

pub mod build_tree;
mod capabilities;
pub mod capture;
pub mod comm;
mod completion;
pub mod current;
pub mod dynamic;
pub mod elide;
mod error;
pub mod foreign;
pub mod graph_memory;
pub mod host_fn_access;
pub mod host_fn_launch;
pub mod launch_calls;
pub mod memory;
pub mod mempool;
pub mod ops;
mod options;
pub mod panic;
mod place;
pub mod pool;
mod priority;
pub mod reduce;
pub mod selfwait;
pub mod sync;
pub mod traits;

pub use capabilities::{Capabilities, CaptureSupport};
pub use comm::{
    CommBackend, CommFailure, DataType, DeviceCommunicator, ReduceOp, UniqueId, UNIQUE_ID_BYTES,
};
pub use completion::{Completer, Completion};
pub use error::{Error, Result};
pub use mempool::{DevicePool, PoolOptions, PoolStats};
pub use options::{CaptureMode, EventFlags, StreamOptions};
pub use place::{BackendKind, Place};
pub use priority::{Priority, PriorityRange};
pub use traits::{
    DeviceBackend, DeviceBuffer, DeviceEvent, DeviceFlag, DeviceGraph, DeviceStream, HostBuffer,
    HostFn, LiveCounts, UnsupportedBuffer, UnsupportedFlag, UnsupportedGraph,
    UnsupportedHostBuffer,
};

/// Implements `Debug` for the type `$ty` as a struct of that name with the fields listed, each
/// the value of an expression over the handle (`$self`):
/// `debug_fields!(MyBuffer, |self| id: self.0.id, len: self.0.len);`.
#[macro_export]
macro_rules! debug_fields {
    ($ty:ident, |$self:ident| $($field:ident: $value:expr),+ $(,)?) => {
        impl ::std::fmt::Debug for $ty {
            fn fmt(&$self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &$value))+
                    .finish()
            }
        }
    };
}

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A process-wide unique, never-zero id for a stream, event, flag or graph.
///
/// Backends use it for `id()` so that ids are unique across backends and never reused,
/// which makes streams orderable and hashable without looking at native handles.
///
/// ```
/// let a = devstream_core::next_id();
/// let b = devstream_core::next_id();
/// assert!(b > a && a > 0);
/// ```
pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}
