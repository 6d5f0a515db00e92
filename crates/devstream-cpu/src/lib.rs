//! devstream's reference backend: real asynchronous streams on the host CPU (`Place::Cpu`).
//!
//! Every trait of [`devstream_core::traits`] is implemented natively here, nothing is a
//! synchronous stand-in:
//!
//! * a lazily started **worker pool** ([`CpuPool`]) runs the work of all CPU streams. Work on
//!   one stream runs in submission order, one task at a time; when several streams have ready
//!   work, the stream with the higher priority goes first (three levels, CUDA's sign
//!   convention: native `0` is the least, `-2` the greatest priority);
//! * [`CpuStream`] keeps monotonically increasing *submitted* / *completed* counters, so
//!   `query` and an idle `synchronize` are two atomic loads, and an event is just
//!   "(stream, submitted count at record time)";
//! * `wait_event` / `wait_stream` add a dependency and return at once; a stream blocked on an
//!   event or a [`CpuFlag`] registers itself with what it waits for and is woken when that
//!   happens. Nothing polls: an idle worker (one at a time) and a thread in `synchronize` go
//!   through a bounded backoff of a few microseconds (127 spin-loop hints, then four
//!   `yield_now`s, as `crossbeam`'s channels do) and then park; `DEVSTREAM_CPU_SPIN=0` turns the
//!   backoff off;
//! * submitting to a non-blocking stream takes no lock (a lock-free queue per stream);
//! * a panicking host function or kernel is caught and reported by that stream's
//!   `synchronize` (once: the error is cleared when reported, so the stream stays usable;
//!   later work still runs);
//! * [`CpuBuffer`] (host memory standing in for device memory), [`CpuHostBuffer`], copies,
//!   fill and a closure kernel path ([`CpuStream::launch_kernel`]);
//! * emulated stream capture with CUDA's rules (fork/join into a DAG, capture modes,
//!   invalidation) and [`CpuGraph`] replay on any CPU stream;
//! * with the cargo feature `comm`, collectives ([`CpuComm`]: all-reduce, broadcast, reduce,
//!   all-gather, reduce-scatter, all-to-all, send/recv, groups) between ranks that are threads
//!   of one process or processes on one host, as stream work that holds no worker while it
//!   waits for peers;
//! * a legacy default stream ([`CpuBackend`]'s `default_stream`) that synchronises with
//!   blocking streams, and per-thread default streams.
//!
//! # Example
//!
//! ```
//! use devstream_core::{DeviceBackend, DeviceFlag, DeviceStream, Place, StreamOptions, Priority};
//! use devstream_cpu::CpuBackend;
//! use std::sync::{Arc, Mutex};
//!
//! # fn main() -> devstream_core::Result<()> {
//! let high = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default().priority(Priority::High))?;
//! let normal = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default())?;
//! let gate = CpuBackend::new_flag(&Place::Cpu)?;
//! let log = Arc::new(Mutex::new(Vec::new()));
//!
//! normal.wait_flag(&gate, 1)?;            // normal holds here until the gate opens
//! let l = log.clone();
//! normal.launch_host_func(Box::new(move || l.lock().unwrap().push("normal")))?;
//! high.wait_stream(&normal)?;             // high's later work waits for normal's work so far
//! let l = log.clone();
//! high.launch_host_func(Box::new(move || l.lock().unwrap().push("high")))?;
//!
//! assert!(!high.query()?);                // nothing ran yet: the gate is closed
//! gate.set(1);
//! high.synchronize()?;
//! assert_eq!(*log.lock().unwrap(), ["normal", "high"]);
//! # Ok(()) }
//! ```
//!
//! # Ordering rules specific to this backend
//!
//! * Host functions and kernels run on pool worker threads, and a worker never blocks on other
//!   work (a pool has a fixed number of workers; as CUDA forbids runtime calls in host
//!   functions). Inside a host function or kernel every devstream call works without waiting
//!   (record, query, wait_event, submit, launch a graph, allocate, set a flag) and sees stream
//!   order up to the running task: everything ordered before it is complete. A *blocking*
//!   wait there — `synchronize` of any stream or `Event::synchronize` — returns at once when
//!   its work is complete and is refused with `Error::WouldDeadlock` otherwise (its work is
//!   then ordered after the task, a deadlock, or not ordered with it); host-buffer reads and
//!   writes never wait for queued copies there (see [`CpuHostBuffer`]).
//! * A host function or kernel that panics, whose closure's destructor panics, or whose panic
//!   payload's destructor panics is reported by `synchronize` as `Error::HostFuncPanicked`;
//!   the worker survives. A closure dropped elsewhere (with a graph, a discarded capture)
//!   never lets its destructor's panic escape.
//! * Work still queued when the process exits may not run, as on CUDA: the workers are
//!   detached threads, and `main` returning (or `std::process::exit`) ends the process without
//!   waiting for them. Synchronize the streams (or events) whose work must finish before
//!   exiting. The backend does not drain queues at exit on purpose: Rust runs no destructors
//!   of statics, so draining needs an `atexit` hook, which would run user closures while the
//!   process is being torn down and would turn exit into a hang whenever queued work waits
//!   for a flag nobody sets any more.
//! * `synchronize` returns the first error raised by work submitted before the call and
//!   clears it: the next `synchronize` returns `Ok` unless new work fails.
//! * Graph replay runs each forked branch of the captured DAG on an internal helper stream,
//!   so independent branches run concurrently; see [`CpuGraph`].
#![warn(missing_docs)]

mod buffer;
#[cfg(feature = "comm")]
mod comm;
#[cfg(feature = "comm")]
mod comm_engine;
#[cfg(feature = "comm")]
mod comm_shm;
#[cfg(feature = "comm")]
mod comm_step;
mod device;
mod event;
mod flag;
mod foreign;
mod graph;
mod graph_memory;
mod mempool;
mod scheduler;
mod stream;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_hostile;

pub use buffer::{CpuBuffer, CpuHostBuffer};
#[cfg(feature = "comm")]
pub use comm::{default_timeout, CpuComm};
pub use device::{CpuBackend, CpuPool, PRIORITY_RANGE};
pub use event::CpuEvent;
pub use flag::CpuFlag;
pub use graph::CpuGraph;
pub use mempool::{CpuMemoryPool, HostBlocks};
pub use stream::CpuStream;

/// Locks a mutex, ignoring poisoning: every critical section in this crate leaves its data
/// consistent even when user code (a kernel holding a buffer lock) panics inside it.
pub(crate) use devstream_core::sync::lock;

/// The one place this backend serves.
pub(crate) static CPU_PLACE: devstream_core::Place = devstream_core::Place::Cpu;
