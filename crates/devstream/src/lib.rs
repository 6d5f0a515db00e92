//! One stream/event model over CUDA, HIP, wgpu, Paddle custom devices and the host CPU.
//!
//! ```
//! use devstream::{Place, Stream, Event, EventFlags, Priority};
//! # fn main() -> devstream::Result<()> {
//! let place: Place = "cpu".parse()?;
//! let s1 = Stream::builder(&place).priority(Priority::High).build()?;
//! let s2 = Stream::new(&place)?;
//! s1.launch_host_func(|| println!("runs on a worker, in s1's order"))?;
//! s2.wait_stream(&s1)?;            // s2's later work runs after s1's current work
//! let done = s2.record_event()?;
//! done.synchronize()?;
//! assert!(s1.query()? && s2.query()?);
//! {
//!     let _guard = s2.make_current(); // like `with s2:` in CuPy
//!     assert_eq!(devstream::current_stream(&place)?, s2);
//! }
//! # Ok(()) }
//! ```
//!
//! The facade's [`Stream`], [`Event`], [`Graph`], [`Flag`], [`DeviceBuffer`] and [`HostBuffer`]
//! dispatch at run time (through `enum_dispatch`) over the backends compiled in:
//!
//! | cargo feature | places | crate |
//! |---|---|---|
//! | `cpu` (default) | `cpu` | `devstream-cpu` |
//! | `cuda` | `cuda:N` (`gpu:N`) | `devstream-cuda` |
//! | `hip` | `hip:N` | `devstream-hip` |
//! | `wgpu` | `wgpu:N` | `devstream-wgpu` |
//! | `plugin` | `<device_type>:N` | `devstream-plugin` |
//! | `template` | `template:0` | `devstream-template` (registered as a custom device) |
//!
//! Stream work is also a [`Future`](std::future::Future): [`Stream::completion`] and
//! [`Event::completion`] return a [`Completion`] (and an [`Event`] can be `.await`ed directly),
//! runtime-agnostic and with no thread per pending future:
//!
//! ```
//! # async fn serve(place: devstream::Place) -> devstream::Result<()> {
//! use devstream::Stream;
//! let s = Stream::new(&place)?;
//! s.launch_host_func(|| { /* work */ })?;
//! s.completion().await?;            // like synchronize(), without blocking a thread
//! let e = s.record_event()?;
//! e.await                           // like e.synchronize()
//! # }
//! ```
//!
//! The cargo feature `comm` adds collectives (`Communicator`, `Stream::all_reduce`, ...;
//! see the `comm` module): the CPU reference engine runs ranks as threads or
//! processes on one host.
//!
//! The cargo feature `trace` adds `devstream::trace`: a stream timeline recorder with Chrome
//! trace-event JSON and SVG export.
//!
//! Code that knows its backend at compile time can use the backend crate's types through the
//! traits in [`backend`] and pay no dispatch.
#![warn(missing_docs)]

#[cfg(not(any(
    feature = "cpu",
    feature = "cuda",
    feature = "hip",
    feature = "wgpu",
    feature = "plugin"
)))]
compile_error!("devstream needs at least one backend feature (cpu, cuda, hip, wgpu or plugin)");

// First: its dispatch traits are declared by a macro, and `enum_dispatch` must meet each trait
// before the enum that names it (an enum met first gets its impl emitted inside the trait's
// macro expansion, where the macro's hygiene hides `self`).
mod dispatch;

mod backends;
mod buffer;
#[cfg(feature = "comm")]
pub mod comm;
mod cross;
mod event;
mod flag;
mod graph;
mod host_fn_buffers;
mod pool;
mod registry;
mod stream;
#[cfg(feature = "trace")]
pub mod trace;

pub use buffer::{DeviceBuffer, HostBuffer};
#[cfg(feature = "comm")]
pub use comm::{Communicator, UniqueId};
pub use devstream_core::{
    BackendKind, Capabilities, CaptureMode, CaptureSupport, Completion, Error, EventFlags,
    LiveCounts, Place, PoolOptions, PoolStats, Priority, PriorityRange, Result, StreamOptions,
};
#[cfg(feature = "comm")]
pub use devstream_core::{CommFailure, DataType, ReduceOp};
pub use dispatch::Member;
pub use event::Event;
pub use flag::Flag;
pub use graph::Graph;
pub use pool::MemoryPool;
pub use registry::{
    capabilities, compiled_backends, current_stream, live_counts, places, priority_range, probe,
    set_current_stream,
};
pub use stream::{Stream, StreamBuilder, StreamGuard};

/// Redundant-wait elision: [`StreamBuilder::elide_waits`] switches it per stream;
/// `elided_on_this_thread()` counts the waits the calling thread did not issue.
pub mod elide {
    pub use devstream_core::elide::{default_enabled, elided_on_this_thread};
}

/// Diagnostics of waits across backends: the waits still pending per pair of backends (a leak
/// check: a wait stays pending only until the awaited work is ready), and the key that tells
/// backends apart (`BackendKey::of(place)`).
pub mod foreign {
    pub use devstream_core::foreign::{pending_waits, registered_waits, BackendKey, PendingWaits};
}

/// The backend traits, for code that picks its backend at compile time.
pub mod backend {
    pub use devstream_core::traits::*;
    /// What a backend's `completion` hooks build futures from.
    pub use devstream_core::{Completer, Completion};
}

/// The CPU backend crate (cargo feature `cpu`).
#[cfg(feature = "cpu")]
pub use devstream_cpu as cpu;

/// The CUDA backend crate (cargo feature `cuda`).
#[cfg(feature = "cuda")]
pub use devstream_cuda as cuda;

/// The HIP backend crate (cargo feature `hip`).
#[cfg(feature = "hip")]
pub use devstream_hip as hip;

/// The wgpu backend crate (cargo feature `wgpu`).
#[cfg(feature = "wgpu")]
pub use devstream_wgpu as wgpu;

/// The custom-device (Paddle plug-in) backend crate (cargo feature `plugin`).
#[cfg(feature = "plugin")]
pub use devstream_plugin as plugin;

/// The Rust examples of the README and of the guides in `docs/`, compiled and run as doctests so
/// that what they show keeps working.
#[cfg(all(doctest, feature = "cpu"))]
mod guides {
    #[doc = include_str!("../../../README.md")]
    struct Readme;
    #[doc = include_str!("../../../docs/ASYNC.md")]
    struct Async;
    #[doc = include_str!("../../../docs/CAPTURE.md")]
    struct Capture;
    #[doc = include_str!("../../../docs/MEMORY.md")]
    struct Memory;
    #[cfg(feature = "comm")]
    #[doc = include_str!("../../../docs/COLLECTIVES.md")]
    struct Collectives;
}
