//! One registered device type ([`CustomRuntime`]): its devstream places, the streams, events and
//! allocations Paddle holds, and every operation of the table in safe Rust. The shared state
//! is here; the operations are split by the kind of object they work on:
//! * `stream`: streams (created, reused, destroyed, synchronized) and callbacks;
//! * `event`: events, with the fast paths of Paddle's create-record-wait-destroy cycle;
//! * `spares`: the destroyed event slots each thread keeps for its next `create_event`;
//! * `memory`: device and host allocations, and the translation of Paddle's addresses;
//! * `copy`: copies and memsets in stream order;
//! * `graph`: graph capture, instantiation and launch;
//! * `failure`: how a failure reaches Paddle (a status, and the reason noted for the report).
//!
//! Handles given to Paddle are integers, never dereferenced, so a stale or foreign handle is
//! `C_ERROR`: streams and events are slots of generation-checked tables whose objects are never
//! freed ([`crate::handles`]: a lookup is one load), graphs are keys of a map.
//!
//! **Device memory.** Every allocation is recorded in an ordered map ([`AddressSpace`]), and
//! every address Paddle passes back (`base + offset`, as its allocator carves chunks) must lie
//! inside a live allocation of that device, or the call is `C_ERROR`.
//! * CPU: host memory, handed out at its own address. Paddle's kernel fallback writes
//!   custom-device tensors through the pointer on the host (`full` through
//!   `set_constant_with_place<CustomPlace>`), so nothing else would run Paddle on this type.
//!   Copies and memsets are host memory operations done in stream order: at once when the
//!   stream is idle (not capturing), else as a host function queued on the devstream stream.
//!   (`DEVSTREAM_PADDLE_CPU_MEMORY=buffers` uses devstream buffers instead, as below.)
//! * wgpu, CUDA, HIP: devstream buffers behind addresses from a reserved, never-mapped range;
//!   a host dereference of such an address faults instead of touching other memory.
//!
//! Copies between a devstream buffer and Paddle's raw host memory keep stream order with host
//! functions:
//! * device→host: the device bytes are copied to a devstream host buffer on the stream, and a
//!   host function queued behind that copy moves them to Paddle's pointer;
//! * host→device: when the stream is idle the bytes are staged at once; otherwise a host
//!   function queued in stream order copies Paddle's bytes into a devstream host buffer, and a
//!   host→device copy queued behind it moves them to the device, so the copy reads what
//!   earlier work on the stream wrote there.
//!
//! A host function cannot return an error: one that fails (or a callback that writes a
//! failing status) unwinds, devstream reports that on the stream that ran it (for a graph,
//! the launching stream), and that stream's `synchronize_stream` answers `C_ERROR`.

mod copy;
mod event;
mod failure;
mod graph;
mod memory;
mod spares;
mod stream;

/// The name the table and the tests know [`CustomRuntime`] by.
pub type Runtime = CustomRuntime;

pub use event::EventObj;
pub use failure::{log_to_stderr, take_failure};
pub use graph::{GraphObj, LaunchOrder};
pub use spares::give_back_kept_events;
pub use stream::StreamObj;

use self::failure::refuse;
use self::memory::Allocation;
use crate::addr::AddressSpace;
use crate::handles::{graph_handle, tag, Kind, Stable};
use crate::select::Backend;
use crate::sys::{C_Device_st, C_Status, C_INTERNAL_ERROR};
use devstream::Place;
use devstream_core::sync::lock;
use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// What an operation answers when it fails: the status for Paddle.
pub type Status<T = ()> = Result<T, C_Status>;

/// A raw address crossing into a host function (Paddle keeps the memory valid until the
/// stream's work is complete: the async-copy contract of `device_ext.h`).
#[derive(Clone, Copy)]
struct Raw(usize);

/// One registered device type: what Paddle calls a custom runtime, the implementation behind
/// the `C_DeviceInterface` table it calls into (devstream-plugin's `LoadedPlugin` is the other
/// direction: a custom runtime devstream calls into).
///
/// The fields every stream and event call reads come first, in one cache line (`repr(C)`,
/// aligned): Paddle calls these between its own work, which evicts what they touch, so each
/// line they read costs a cache miss per call.
#[repr(C, align(64))]
pub struct CustomRuntime {
    /// Never freed: a destroyed stream's slot keeps its devstream stream, reused by the
    /// slot's next handle when it is idle and sound (see [`CustomRuntime::create_stream`]).
    streams: Stable<StreamObj>,
    /// Never freed: a destroyed event's slot keeps its devstream event for the slot's next
    /// handle (see [`Stable`]).
    events: Stable<EventObj>,
    /// `places.len()`.
    devices: usize,
    /// Device memory is host memory (the CPU backend); read by `record_event`, so it sits in
    /// the first line.
    host_backed: bool,
    /// The backend it serves.
    pub backend: Backend,
    /// Its places: Paddle's device id `n` is `places[n]`.
    pub places: Vec<Place>,
    null_streams: Vec<OnceLock<Arc<StreamObj>>>,
    next_handle: AtomicUsize,
    memory: Mutex<AddressSpace<Allocation>>,
    host: Mutex<HashMap<usize, Layout>>,
    total_memory: usize,
    graphs: Mutex<HashMap<usize, Arc<GraphObj>>>,
    execs: Mutex<HashMap<usize, Arc<GraphObj>>>,
    /// The launch order of each open capture's graph-to-be, by capture number.
    capture_orders: Mutex<HashMap<u64, Arc<LaunchOrder>>>,
    /// Captures begun through this table and not ended.
    open_captures: AtomicUsize,
    /// The next capture number (process-unique per device type, never 0).
    next_capture: AtomicU64,
}

// What every stream and event call reads stays in the runtime's first cache line.
const _: () = assert!(std::mem::offset_of!(CustomRuntime, host_backed) < 64);

/// The host's physical memory in bytes (0 if unknown).
fn physical_memory() -> usize {
    // SAFETY: sysconf with valid names only reads system configuration.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page <= 0 {
        return 0;
    }
    (pages as usize).saturating_mul(page as usize)
}

/// The places of `backend` on this machine: none when the facade was built without it or its
/// runtime is missing; otherwise `cpu`, or `wgpu:0`, `wgpu:1`, ... as long as each answers
/// its capabilities.
///
/// This asks the facade at run time instead of naming backend crates, so the device types
/// follow the backends the facade was built with (cargo unifies its features with this
/// crate's), and never calls `devstream::places()`, which would also probe plug-ins (and could
/// load this very library again).
pub fn places_of(backend: Backend) -> Vec<Place> {
    let kind = backend.kind();
    if !devstream::compiled_backends().contains(&kind) || devstream::probe(kind).is_err() {
        return Vec::new();
    }
    let place = |n: usize| match backend {
        Backend::Cpu => Place::Cpu,
        Backend::Wgpu => Place::Wgpu(n),
        Backend::Cuda => Place::Cuda(n),
        Backend::Hip => Place::Hip(n),
    };
    let most = if backend == Backend::Cpu { 1 } else { 64 };
    (0..most)
        .map(place)
        .take_while(|p| devstream::capabilities(p).is_ok())
        .collect()
}

impl CustomRuntime {
    /// The runtime of `backend` over `places`; `None` without places or address space.
    pub fn new(backend: Backend, places: Vec<Place>) -> Option<CustomRuntime> {
        if places.is_empty() {
            return None;
        }
        let memory = AddressSpace::reserve()?;
        let total_memory = std::env::var("DEVSTREAM_PADDLE_MEMORY_BYTES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or_else(physical_memory)
            .min(memory.size());
        Some(CustomRuntime {
            devices: places.len(),
            backend,
            null_streams: places.iter().map(|_| OnceLock::new()).collect(),
            places,
            streams: Stable::new(tag(Kind::Stream, backend.index())),
            events: Stable::new(tag(Kind::Event, backend.index())),
            next_handle: AtomicUsize::new(1),
            memory: Mutex::new(memory),
            host: Mutex::new(HashMap::new()),
            total_memory,
            graphs: Mutex::new(HashMap::new()),
            execs: Mutex::new(HashMap::new()),
            capture_orders: Mutex::new(HashMap::new()),
            open_captures: AtomicUsize::new(0),
            next_capture: AtomicU64::new(1),
            host_backed: backend == Backend::Cpu
                && std::env::var("DEVSTREAM_PADDLE_CPU_MEMORY").as_deref() != Ok("buffers"),
        })
    }

    /// A fresh graph (`exec` false) or executable graph (`exec` true) handle: never 0, never
    /// reused, a multiple of 16, tagged with its kind and backend ([`graph_handle`]), so that
    /// a handle of another kind, or of one device type given to another type's table, is
    /// unknown there, never another object. (Streams and events have [`Stable`] tables.)
    fn handle(&self, exec: bool) -> usize {
        let n = self.next_handle.fetch_add(1, Ordering::Relaxed);
        graph_handle(self.backend.index(), n, exec)
    }

    /// The device index of a `C_Device` id.
    #[inline(always)]
    pub fn device(&self, id: c_int) -> Status<usize> {
        match usize::try_from(id) {
            Ok(d) if d < self.devices => Ok(d),
            _ => Err(self.no_device(id)),
        }
    }

    #[cold]
    #[inline(never)]
    fn no_device(&self, id: c_int) -> C_Status {
        refuse(|| format!("device {id} does not exist ({} devices)", self.places.len()))
    }

    /// The device index behind a `C_Device` pointer.
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`.
    #[inline(always)]
    pub unsafe fn device_ptr(&self, device: *const C_Device_st) -> Status<usize> {
        if device.is_null() {
            return Err(refuse(|| "a null C_Device".into()));
        }
        // SAFETY: non-null and readable per the caller's contract.
        let id = unsafe { (*device).id };
        self.device(id)
    }

    /// Number of devices.
    #[inline(always)]
    pub fn count(&self) -> usize {
        self.devices
    }

    /// Live streams, events, device allocations, host allocations, graphs and graph
    /// instantiations (for leak checks).
    pub fn live(&self) -> [usize; 6] {
        [
            self.streams.live(),
            self.events.live(),
            lock(&self.memory).live(),
            lock(&self.host).len(),
            lock(&self.graphs).len(),
            lock(&self.execs).len(),
        ]
    }
}

/// The status of an internal failure (a panic caught at the boundary).
pub const PANICKED: C_Status = C_INTERNAL_ERROR;
