//! devstream's wgpu backend: logical streams over a device's one queue.
//!
//! wgpu gives a device exactly one queue, and the queue runs its submissions in order. A
//! [`WgpuStream`] is therefore a *logical* stream: it keeps its own pending
//! [`wgpu::CommandEncoder`] and flushes it at sync points (record, query, synchronize, host
//! functions, flags, waits that need a gate, dropping the stream). Ordering is kept exactly:
//!
//! * Work of one stream reaches the queue in the stream's order, so it runs in that order.
//! * `wait_event` on an event of the **same device** whose work is already on the queue costs
//!   nothing: every later submission is behind it in queue order. If the event's work is still
//!   held back (its stream waits for a flag, a host function or another device), the waiting
//!   stream holds its later submissions until that work has been submitted.
//! * `wait_event` on an event of **another wgpu device** holds the stream's later submissions
//!   until that event has completed; the host is never blocked in `wait_event`.
//! * Host functions and `write_flag` run once all earlier work of the stream is complete: a
//!   per-device background thread waits on exactly that submission
//!   (`Device::poll(PollType::Wait { submission_index })`), so nothing needs the user to poll,
//!   and the stream's later submissions wait for them (see [Host functions](#host-functions)).
//!   `wait_flag` holds later submissions until the host sets the flag (host-gated submissions).
//!
//! # Host functions
//!
//! A host function runs on one of its device's host-function threads, never on the thread
//! that schedules the device's work: a pool of one thread, which grows by one for each host
//! function that becomes ready while all of them are busy (extra threads end after a few idle
//! seconds). A host function that blocks therefore stalls only its own stream, whose later work
//! waits for it by definition; the device's other streams, and their host functions, go on.
//! Host functions of different streams may run at the same time, on different threads; those of
//! one stream run one at a time, in stream order.
//!
//! A host function may call any devstream API, on its own stream or others. What it sees is
//! stream order up to itself:
//!
//! * reading a host buffer applies the device→host copies queued before the host function and
//!   neither waits for nor applies those queued after it on its stream (or on streams that wait
//!   for that later work); writing one does not wait for the host→device copies queued after
//!   it, which then read what it wrote;
//! * a call that would wait for work queued after the host function (`synchronize` of its own
//!   stream or of a stream that waits on an event recorded after it, `Event::synchronize` of such
//!   an event) returns `Error::WouldDeadlock` instead of deadlocking; `query` answers at once;
//! * a wait on a [`WgpuFlag`] is a wait for the host and is not followed: a host function that
//!   waits (itself, or through another stream's `synchronize`) for a flag that only its own later
//!   work writes never returns.
//!
//! A panic in a host function, in its closure's `Drop`, or in the `Drop` of either panic's
//! payload is caught and reported by the stream's `synchronize` as `Error::HostFuncPanicked`
//! (payloads, nested ones too, are dropped by `devstream_core::panic`); the device's threads never die of it.
//!
//! # Device loss
//!
//! A device that is lost (or destroyed with `wgpu::Device::destroy`) is a fault of the whole
//! device, as a sticky context error is on CUDA: every `synchronize`, `query`,
//! `Event::synchronize`, `Event::query` and completion of the device reports it
//! (`Error::Driver` with the call `"device lost"`, also from [`WgpuDevice::fault`]), work held
//! back is dropped unrun (host functions and flag writes included), and reading a host buffer
//! that a lost copy was to fill is that error. wgpu refuses submissions to a lost device without
//! an error anyone can see and still reports them done, so devstream counts a submission
//! complete only after the wgpu call that reported it has returned with the device healthy
//! (`device::NoteTargets`). A stream of another device that waits on lost work gets the fault
//! as its error and skips its host functions and flag writes until `synchronize` reports it.
//!
//! Events are submission indices (a per-device ticket): `query` never blocks (it asks for that
//! submission with a zero timeout). Timing uses timestamp queries written inside the encoder where
//! the adapter has `TIMESTAMP_QUERY_INSIDE_ENCODERS`, else at the start of an empty compute pass;
//! `elapsed` converts ticks with the queue's timestamp period.
//!
//! # Places
//!
//! `Place::Wgpu(n)` is the n-th adapter of [`adapters`], a deterministic enumeration: adapters of
//! the enabled backends sorted by backend (Vulkan, Metal, DX12, GL), then device type (discrete,
//! integrated, virtual, CPU, other), then name, then vendor and device id. The backends are all
//! compiled-in ones unless `DEVSTREAM_WGPU_BACKENDS` (or wgpu's own `WGPU_BACKEND`) names a comma
//! list such as `vulkan` or `vulkan,gl`. An existing `wgpu::Device` + `wgpu::Queue` is adopted
//! with [`WgpuDevice::adopt`].
//!
//! # Capabilities
//!
//! | capability | wgpu |
//! |---|---|
//! | priorities | no (range `{0, 0}`) |
//! | concurrent_streams | no (one queue per device) |
//! | capture | emulated (commands recorded, re-encoded on each launch) |
//! | timing | where the adapter has `TIMESTAMP_QUERY` |
//! | host_funcs | yes (a per-device thread waits on the submission; a pool of host-function threads runs them) |
//! | flags | yes (host-gated submissions; `write_flag` is a stream-ordered host write) |
//! | cross_device_wait | yes (held submissions) |
//! | external_handles | no |
//! | stream_ordered_alloc | no (allocation is immediate) |
//! | nonblocking_query | yes |
//! | legacy / per-thread default stream | no |
//!
//! # Example
//! ```no_run
//! use devstream_core::{DeviceBackend, DeviceStream, HostBuffer, Place, StreamOptions};
//! use devstream_wgpu::{WgpuBackend, WgpuKernel};
//! # fn main() -> devstream_core::Result<()> {
//! let stream = WgpuBackend::new_stream(&Place::Wgpu(0), StreamOptions::default())?;
//! let kernel = WgpuKernel::new(&stream, r#"
//!     @group(0) @binding(0) var<storage, read_write> data: array<u32>;
//!     @compute @workgroup_size(64)
//!     fn main(@builtin(global_invocation_id) id: vec3<u32>) {
//!         if (id.x < arrayLength(&data)) { data[id.x] = data[id.x] * 2u; }
//!     }"#, "main")?;
//! let buffer = stream.alloc(256)?;
//! stream.fill(&buffer, 0, 256, 1)?;
//! stream.dispatch(&kernel, &[&buffer], [1, 1, 1])?;
//! let host = stream.alloc_host(256)?;
//! stream.copy_device_to_host(&host, 0, &buffer, 0, 256)?;
//! stream.synchronize()?;
//! assert_eq!(host.to_vec()?[0], 2);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod buffer;
mod completion;
mod device;
mod event;
mod flag;
mod graph;
mod graph_memory;
mod hostfn;
mod kernel;
mod landing;
mod mempool;
mod sched;
mod stream;
mod util;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_host_fn_buffers;
#[cfg(test)]
mod tests_hostile;
#[cfg(test)]
mod tests_pool;

pub use buffer::{WgpuBuffer, WgpuHostBuffer};
pub use device::{adapters, AdapterEntry, WgpuBackend, WgpuDevice, BACKENDS_ENV};
pub use event::WgpuEvent;
pub use flag::WgpuFlag;
pub use graph::WgpuGraph;
pub use kernel::WgpuKernel;
pub use mempool::{WgpuBlocks, WgpuMemoryPool};
pub use stream::WgpuStream;

/// The wgpu crate this backend is built on, so that users adopt and inspect native objects with
/// exactly the same version.
pub use wgpu;
