//! One registered device type: its devstream places, the streams, events and allocations
//! Paddle holds, and every operation of the table in safe Rust.
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

use crate::addr::AddressSpace;
use crate::handles::{graph_handle, tag, Kind, Stable};
use crate::select::Backend;
use crate::sys::{C_Device_st, C_Status, C_Stream, C_ERROR, C_FAILED, C_INTERNAL_ERROR};
use devstream::{CaptureMode, DeviceBuffer, Event, EventFlags, Graph, HostBuffer, Place, Stream};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// What an operation answers when it fails: the status for Paddle.
pub type Status<T = ()> = Result<T, C_Status>;

/// Locks, ignoring poisoning (a panic inside a critical section is already reported as
/// `C_INTERNAL_ERROR` by the entry point; the data stays consistent).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether failures are printed to stderr: `DEVSTREAM_PADDLE_LOG=1` (`=backtrace` adds the
/// caller's thread and backtrace), or
/// `DEVSTREAM_PADDLE_DEBUG` set (to anything). They are always reported through `tracing`
/// (`warn`), which reaches a subscriber only where this library shares the host's `tracing`
/// (a copy of the cdylib has its own: hence the stderr switch).
pub fn log_to_stderr() -> bool {
    static LOG: OnceLock<bool> = OnceLock::new();
    *LOG.get_or_init(|| {
        std::env::var("DEVSTREAM_PADDLE_LOG").is_ok_and(|v| v == "1" || v == "backtrace")
            || std::env::var_os("DEVSTREAM_PADDLE_DEBUG").is_some()
    })
}

thread_local! {
    /// Why the entry point running on this thread fails: the devstream error (with the
    /// operation that met it) or the refusal, for the entry point to report with its status.
    static FAILURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Notes why the current entry point fails (the first reason of a call stays).
///
/// Entry points take the note when they fail (and report it); they do not clear it when they
/// start (that would cost every call a thread-local access). So a call that notes a refusal
/// and then recovers from it (tries something else that works) takes the note itself: a call
/// that succeeds leaves nothing noted.
fn note_failure(reason: impl FnOnce() -> String) {
    let _ = FAILURE.try_with(|f| {
        let mut f = f.borrow_mut();
        if f.is_none() {
            *f = Some(reason());
        }
    });
}

/// Takes (and clears) the reason noted for the entry point running on this thread, if any.
/// The table's entry points take it when they fail, to report it.
pub fn take_failure() -> Option<String> {
    FAILURE.try_with(|f| f.borrow_mut().take()).ok().flatten()
}

/// `C_ERROR` for a refusal that is no devstream error (an unknown handle, a foreign device,
/// an address outside every allocation), noting `reason` for the entry point's report.
fn refuse(reason: impl FnOnce() -> String) -> C_Status {
    note_failure(reason);
    C_ERROR
}

/// Maps a devstream error to `C_ERROR` (`C_FAILED` for out of memory), noting it for the
/// entry point's report.
fn fail(what: &str, error: devstream::Error) -> C_Status {
    note_failure(|| format!("{what}: {error}"));
    match error {
        devstream::Error::OutOfMemory { .. } => C_FAILED,
        _ => C_ERROR,
    }
}

/// `Result<T, devstream::Error>` → [`Status`] naming the operation.
trait Check<T> {
    fn check(self, what: &str) -> Status<T>;
}

impl<T> Check<T> for devstream::Result<T> {
    fn check(self, what: &str) -> Status<T> {
        self.map_err(|e| fail(what, e))
    }
}

/// A destroyed event's slot (and the event it keeps), kept by the thread that destroyed it
/// for its next `create_event` on that device: no lock to take it back.
#[derive(Clone, Copy)]
pub(crate) struct Spare {
    backend: usize,
    device: usize,
    index: u32,
}

/// The most destroyed events a thread keeps for reuse.
const SPARES: usize = 32;

/// What a thread keeps between calls: the event slots it destroyed last, in place (no heap
/// block: the first entries share the cache line of the count, which is all Paddle's
/// create-record-destroy of one event at a time reads). Plain cells: nothing runs between
/// reading and writing them, so no borrow flag is needed.
pub(crate) struct ThreadState {
    len: Cell<usize>,
    spares: [Cell<Spare>; SPARES],
}

impl ThreadState {
    /// A kept event slot of `backend` and `device`, if any (the most recently kept first).
    #[inline(always)]
    fn take_spare(&self, backend: usize, device: usize) -> Option<u32> {
        let len = self.len.get().min(SPARES);
        let at = self.spares[..len].iter().rposition(|spare| {
            let spare = spare.get();
            spare.backend == backend && spare.device == device
        })?;
        let taken = self.spares[at].get();
        self.spares[at].set(self.spares[len - 1].get());
        self.len.set(len - 1);
        Some(taken.index)
    }

    /// Keeps `spare`, or answers it when the thread keeps [`SPARES`] already.
    #[inline(always)]
    fn keep_spare(&self, spare: Spare) -> Result<(), Spare> {
        let len = self.len.get();
        match self.spares.get(len) {
            Some(cell) => {
                cell.set(spare);
                self.len.set(len + 1);
                Ok(())
            }
            None => Err(spare),
        }
    }
}

impl ThreadState {
    /// Gives every kept slot back to its device's free list.
    fn give_back_all(&self) {
        let len = self.len.get().min(SPARES);
        for spare in self.spares[..len].iter().map(Cell::get) {
            if let Some(rt) = crate::table::RUNTIMES
                .get(spare.backend)
                .and_then(OnceLock::get)
            {
                rt.events.give_index(spare.device, spare.index);
            }
        }
        self.len.set(0);
    }
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        self.give_back_all();
    }
}

/// Gives the calling thread's kept event slots (see [`Runtime::create_event`]) back to their
/// devices' free lists now, as the thread's exit would. For tests that look at which slots
/// are handed out: a test thread's exit may run after the next test has begun.
#[doc(hidden)]
pub fn give_back_kept_events() {
    let _ = THREAD.try_with(ThreadState::give_back_all);
}

/// An unused entry of [`ThreadState::spares`].
const NO_SPARE: Spare = Spare {
    backend: usize::MAX,
    device: usize::MAX,
    index: 0,
};

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            len: Cell::new(0),
            spares: [const { Cell::new(NO_SPARE) }; SPARES],
        }
    };
}

/// `true` iff `stream` is a CPU stream that has finished all its work and is not capturing
/// ([`devstream::cpu::CpuStream::is_finished`]: three loads): an internal probe of
/// `record_event`, not a query of the host's, so it opens no `tracing` span.
#[inline(always)]
fn finished_host_stream(stream: &Stream) -> bool {
    match stream {
        #[cfg(feature = "cpu")]
        Stream::Cpu(cpu) => cpu.is_finished(),
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// Runs `f` with the calling thread's [`ThreadState`] (`None` while the thread's locals are
/// being destroyed: Paddle may destroy streams from its own thread-local destructors).
#[inline(always)]
fn with_thread<R>(f: impl FnOnce(Option<&ThreadState>) -> R) -> R {
    let mut f = Some(f);
    let result = THREAD.try_with(|t| f.take().map(|f| f(Some(t))));
    match (result, f) {
        (Ok(Some(r)), _) => r,
        (_, Some(f)) => f(None),
        // `try_with` answers `Ok` only after running its closure, which took `f`.
        (_, None) => unreachable!("with_thread: the closure ran without answering"),
    }
}

/// A raw address crossing into a host function (Paddle keeps the memory valid until the
/// stream's work is complete: the async-copy contract of `device_ext.h`).
#[derive(Clone, Copy)]
struct Raw(usize);

/// A stream Paddle holds (or a device's null stream).
pub struct StreamObj {
    /// Index of the device (place) it belongs to.
    pub device: usize,
    /// The devstream stream.
    pub stream: Stream,
    /// The handle Paddle knows it by (0 for a null stream); a slot's stream gets a new handle
    /// each time the slot is reused.
    pub handle: AtomicUsize,
    /// Whether a capture begun through the table on this stream is open.
    capturing: AtomicBool,
    /// The capture this stream is in, begun here or joined by waiting on an event recorded in
    /// it (0: none); `cuda_stream_capture_info`'s id, as CUDA reports the origin's id on every
    /// stream of a capture.
    capture_id: AtomicU64,
}

impl StreamObj {
    fn new(device: usize, stream: Stream, handle: usize) -> StreamObj {
        StreamObj {
            device,
            stream,
            handle: AtomicUsize::new(handle),
            capturing: AtomicBool::new(false),
            capture_id: AtomicU64::new(0),
        }
    }

    /// Whether the stream may be capturing (it is in a capture this table saw begin or be
    /// joined, and devstream still says so). Never calls `query`, which would invalidate.
    fn in_capture(&self) -> bool {
        self.capture_id.load(Ordering::SeqCst) != 0 && self.stream.is_capturing().unwrap_or(true)
    }

    /// Queues `body` as a host function. Inside a capture it runs again at every launch of
    /// the graph (as a memcpy node re-reads its source). An error it returns is raised as the
    /// host function's failure ([`fail_in_host_func`]): devstream reports it on the stream
    /// that ran the work (the launching stream, for a graph), whose `synchronize_stream`
    /// then answers `C_ERROR`.
    fn host_func(
        &self,
        what: &'static str,
        mut body: impl FnMut() -> devstream::Result<()> + Send + 'static,
    ) -> Status {
        self.stream
            .launch_host_func(move || {
                if let Err(error) = body() {
                    fail_in_host_func(format!("{what}: {error}"));
                }
            })
            .check(what)
    }
}

/// Whether a destroyed stream's devstream stream can serve a new handle.
enum Reuse {
    /// Idle, not capturing, no unreported failure: as good as a new stream.
    Yes,
    /// Work is still queued, it is still in a capture (one that another stream began), or
    /// it still fails after its failure was taken: maybe later.
    NotYet,
}

/// Asks a destroyed stream whether it can be reused (never `query` during a capture, which
/// would invalidate it). A failure its work raised that no one synchronised is taken and
/// reported here (the handle that could have reported it is gone); a stream that answers
/// cleanly after that is as good as a new one, so no slot is ever retired for a failure.
#[cold]
#[inline(never)]
fn reusable(obj: &StreamObj) -> Reuse {
    if obj.capturing.load(Ordering::SeqCst) || !matches!(obj.stream.is_capturing(), Ok(false)) {
        return Reuse::NotYet;
    }
    if !matches!(obj.stream.query(), Ok(true)) {
        return Reuse::NotYet;
    }
    // Idle: this returns at once, with the first failure its work raised, if any.
    let Err(error) = obj.stream.synchronize() else {
        return Reuse::Yes;
    };
    let message =
        format!("a destroyed stream's work failed (no synchronize_stream reported it): {error}");
    tracing::warn!("devstream-paddle: {message}");
    if log_to_stderr() {
        eprintln!("devstream-paddle: {message}");
    }
    // The failure is taken: a stream whose next synchronize is clean carries nothing of it
    // (a failure that stays, such as a lost device, is asked about again later).
    match obj.stream.synchronize() {
        Ok(()) => Reuse::Yes,
        Err(_) => Reuse::NotYet,
    }
}

/// Ends the running host function as failed, with `message`: devstream's only error channel
/// for host functions is an unwind, which it catches on its worker and reports as
/// `Error::HostFuncPanicked` on the stream that ran the function. `resume_unwind` does not
/// run the panic hook (nothing is printed).
fn fail_in_host_func(message: String) -> ! {
    tracing::warn!("devstream-paddle: stream work failed: {message}");
    if log_to_stderr() {
        eprintln!("devstream-paddle: stream work failed: {message}");
    }
    std::panic::resume_unwind(Box::new(message))
}

/// Reads `size` bytes at `offset` of `buffer` through `obj`'s stream, blocking until done.
fn read_device(
    obj: &StreamObj,
    buffer: &DeviceBuffer,
    offset: usize,
    size: usize,
) -> devstream::Result<Vec<u8>> {
    let staging = obj.stream.alloc_host(size)?;
    obj.stream
        .copy_device_to_host(&staging, 0, buffer, offset, size)?;
    obj.stream.synchronize()?;
    staging.to_vec()
}

/// An event Paddle holds.
pub struct EventObj {
    /// Index of the device it was created on.
    pub device: usize,
    /// The devstream event.
    pub event: Event,
    /// The capture it was last recorded in (0: none): a stream that waits on it joins it.
    capture: AtomicU64,
    /// Complete without a devstream record behind it: handed out again by `create_event` (a
    /// destroyed event kept for reuse) and not recorded since, or last recorded on a stream
    /// that had finished all its work (see [`Runtime::record_event`]). The table answers as
    /// for a never-recorded event (complete; waiting on it is a no-op) whatever the devstream
    /// event's last record was. The next record of work still to run replaces that record (as
    /// every re-record does) and clears this.
    settled: AtomicBool,
}

/// Zeroed, 256-byte aligned host memory, freed when the last holder (the allocation map or
/// work queued on it) lets go.
struct HostBlock {
    ptr: usize,
    layout: Layout,
}

impl HostBlock {
    fn new(size: usize) -> Status<HostBlock> {
        let layout = Layout::from_size_align(size.max(1), HOST_ALIGN).map_err(|_| C_FAILED)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(C_FAILED);
        }
        Ok(HostBlock {
            ptr: ptr as usize,
            layout,
        })
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `HostBlock::new` with this layout; dropped once.
        unsafe { dealloc(self.ptr as *mut u8, self.layout) };
    }
}

/// The memory behind one device allocation.
enum Memory {
    /// A devstream device buffer (wgpu, CUDA, HIP).
    Buffer(Arc<DeviceBuffer>),
    /// Host memory (CPU), handed to Paddle at its own address.
    Host(Arc<HostBlock>),
}

/// One device allocation.
struct Allocation {
    device: usize,
    memory: Memory,
}

/// Where a translated address points: a buffer and offset, or host memory and the address.
#[derive(Clone)]
enum Target {
    Buffer(Arc<DeviceBuffer>, usize),
    Host(Arc<HostBlock>, usize),
}

/// One registered device type.
///
/// The fields every stream and event call reads come first, in one cache line (`repr(C)`,
/// aligned): Paddle calls these between its own work, which evicts what they touch, so each
/// line they read costs a cache miss per call.
#[repr(C, align(64))]
pub struct Runtime {
    /// Never freed: a destroyed stream's slot keeps its devstream stream, reused by the
    /// slot's next handle when it is idle and sound (see [`Runtime::create_stream`]).
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
const _: () = assert!(std::mem::offset_of!(Runtime, host_backed) < 64);

/// A captured graph (`C_CudaGraph`) or its instantiation (`C_GraphExec`): devstream's graph is
/// launchable as captured, so both handles name the same object.
pub struct GraphObj {
    /// The device it was captured on.
    pub device: usize,
    /// The devstream graph.
    pub graph: Graph,
    /// Which launch the graph's callbacks belong to.
    order: Arc<LaunchOrder>,
    /// The end of the latest launch of a graph with callbacks (its stream's handle and an
    /// event recorded behind it); the lock serialises launches, so that [`LaunchOrder`]'s
    /// queue is in launch order.
    last_launch: Mutex<Option<(usize, Event)>>,
}

/// Tells the `stream_add_callback` callbacks captured into one graph the `C_Stream` of the
/// launch that runs them (their `stream` argument, where the host reports a failure).
///
/// A devstream graph, like a CUDA host node, does not tell a host function which launch runs
/// it. So the launches of a graph with callbacks run one after another, in launch order, each
/// after the previous one's end (CUDA orders launches of one executable graph that way; the
/// emulated captures of CPU and wgpu do not, so [`Runtime::launch`] makes the launch stream
/// wait for the previous launch): the launches not finished yet are a queue, and the front
/// launch is done with its callbacks after `per_launch` of them have returned.
#[derive(Default)]
pub struct LaunchOrder {
    /// The `C_Stream` handle of each launch not finished yet, in launch order.
    launches: Mutex<VecDeque<usize>>,
    /// The callbacks captured into the graph: each runs once per launch.
    per_launch: AtomicUsize,
    /// Callbacks of the front launch that have returned.
    calls: AtomicUsize,
}

impl LaunchOrder {
    /// The stream handle of the launch whose callbacks run now, if a launch is queued.
    fn current(&self) -> Option<usize> {
        lock(&self.launches).front().copied()
    }

    /// One callback of the front launch has returned (or unwound).
    fn call_done(&self) {
        let per_launch = self.per_launch.load(Ordering::Acquire);
        if per_launch == 0 {
            return;
        }
        if self.calls.fetch_add(1, Ordering::AcqRel) + 1 >= per_launch {
            self.calls.store(0, Ordering::Release);
            lock(&self.launches).pop_front();
        }
    }
}

/// Marks a callback of a graph done when dropped (also when the callback's failure unwinds).
struct CallbackTurn(Arc<LaunchOrder>);

impl Drop for CallbackTurn {
    fn drop(&mut self) {
        self.0.call_done();
    }
}

/// Alignment of host allocations.
const HOST_ALIGN: usize = 256;

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

impl Runtime {
    /// The runtime of `backend` over `places`; `None` without places or address space.
    pub fn new(backend: Backend, places: Vec<Place>) -> Option<Runtime> {
        if places.is_empty() {
            return None;
        }
        let memory = AddressSpace::reserve()?;
        let total_memory = std::env::var("DEVSTREAM_PADDLE_MEMORY_BYTES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or_else(physical_memory)
            .min(memory.size());
        Some(Runtime {
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

    /// The device's null stream (what Paddle's null `C_Stream` and the synchronous copies use).
    fn null_stream(&self, device: usize) -> Status<Arc<StreamObj>> {
        self.null_stream_ref(device).map(Arc::clone)
    }

    /// [`Runtime::null_stream`], borrowed.
    fn null_stream_ref(&self, device: usize) -> Status<&Arc<StreamObj>> {
        let slot = self
            .null_streams
            .get(device)
            .ok_or_else(|| refuse(|| format!("device {device} has no null stream")))?;
        if let Some(obj) = slot.get() {
            return Ok(obj);
        }
        let stream = Stream::new(&self.places[device]).check("creating a null stream")?;
        Ok(slot.get_or_init(|| Arc::new(StreamObj::new(device, stream, 0))))
    }

    /// The stream behind a handle on `device` (null: the device's null stream): one load and
    /// a compare (see [`Stable`]).
    #[inline(always)]
    pub fn stream(&self, device: usize, handle: C_Stream) -> Status<&StreamObj> {
        if handle.is_null() {
            return self.null_stream_ref(device).map(|obj| &**obj);
        }
        let obj = self
            .streams
            .get(handle as usize)
            .ok_or_else(|| refuse(|| format!("unknown stream handle {handle:?}")))?;
        if obj.device != device {
            return Err(refuse(|| {
                format!("stream {handle:?} belongs to device {}", obj.device)
            }));
        }
        Ok(obj)
    }

    /// `create_stream`: a new non-blocking stream of normal priority.
    ///
    /// Streams live in a [`Stable`] table: a destroyed stream's slot keeps its devstream stream
    /// (queued work still runs), and the slot's next handle on that device reuses it once it is
    /// idle and in no capture, its unreported failure taken and reported: then it behaves as
    /// a new stream (its earlier work is done, so nothing new waits for it). A slot whose
    /// stream is still busy, or joined to a capture still open, is skipped for now. While a
    /// capture begun through this table is open no slot is probed (a `query` or `synchronize`
    /// then is an unsafe call that would invalidate a capture in `Global` mode): new slots only.
    #[inline(never)]
    pub fn create_stream(&self, device: usize) -> Status<usize> {
        let probe = self.open_captures.load(Ordering::SeqCst) == 0;
        let mut busy = Vec::new();
        let result = loop {
            let Some(index) = self.streams.take_index(device) else {
                break Err(refuse(|| {
                    format!("more than {} live streams", crate::handles::CAPACITY)
                }));
            };
            if let Some(old) = self.streams.dead(index) {
                if !probe {
                    busy.push(index);
                    continue;
                }
                if let Reuse::NotYet = reusable(old) {
                    busy.push(index);
                    continue;
                }
            }
            let made = self.streams.insert_at(
                index,
                || Stream::new(&self.places[device]).map(|s| StreamObj::new(device, s, 0)),
                |obj| {
                    obj.capturing.store(false, Ordering::SeqCst);
                    obj.capture_id.store(0, Ordering::SeqCst);
                },
            );
            break match made {
                Ok(Some(handle)) => {
                    if let Some(obj) = self.streams.get(handle) {
                        obj.handle.store(handle, Ordering::Release);
                    }
                    Ok(handle)
                }
                Ok(None) => Err(refuse(|| "the stream table is full".into())),
                Err(error) => {
                    self.streams.give_index(device, index);
                    Err(fail("create_stream", error))
                }
            };
        };
        for index in busy {
            self.streams.give_index(device, index);
        }
        result
    }

    /// `destroy_stream`: forgets the handle; queued work still runs (devstream never blocks
    /// on drop, and the slot keeps the stream). A capture the stream began through this table
    /// ends with it, its graph discarded (a capture never outlives its stream).
    pub fn destroy_stream(&self, device: usize, handle: C_Stream) -> Status {
        let (index, obj) = self
            .streams
            .remove(handle as usize, |obj| obj.device == device)
            .ok_or_else(|| {
                refuse(|| format!("unknown stream handle {handle:?} on device {device}"))
            })?;
        if obj.capturing.load(Ordering::SeqCst) {
            self.abandon_capture(obj);
        }
        self.streams.give_index(device, index);
        Ok(())
    }

    /// Ends the capture a destroyed stream began through this table, discarding its graph
    /// (an invalidated capture ends with an error, ignored too). A capture must not outlive
    /// the stream that began it: while open it makes this thread's (`ThreadLocal`) or every
    /// thread's (`Global`) unsafe calls fail, keeps the streams that joined it capturing, and
    /// stops `create_stream` from probing destroyed streams for reuse.
    #[cold]
    fn abandon_capture(&self, obj: &StreamObj) {
        let id = obj.capture_id.load(Ordering::SeqCst);
        if let Err(error) = obj.stream.end_capture() {
            tracing::debug!("devstream-paddle: ending a destroyed stream's capture: {error}");
        }
        if !obj.stream.is_capturing().unwrap_or(false) {
            self.capture_ended(obj, id);
        }
    }

    /// The bookkeeping of a capture begun through this table (number `id`) that `obj` no
    /// longer runs: answers the order of its graph's callbacks.
    fn capture_ended(&self, obj: &StreamObj, id: u64) -> Option<Arc<LaunchOrder>> {
        if obj.capturing.swap(false, Ordering::SeqCst) {
            self.open_captures.fetch_sub(1, Ordering::SeqCst);
        }
        obj.capture_id.store(0, Ordering::SeqCst);
        lock(&self.capture_orders).remove(&id)
    }

    /// `query_stream`: `Ok(true)` when complete.
    #[inline]
    pub fn query_stream(&self, device: usize, handle: C_Stream) -> Status<bool> {
        let obj = self.stream(device, handle)?;
        obj.stream.query().check("query_stream")
    }

    /// `synchronize_stream`.
    #[inline]
    pub fn synchronize_stream(&self, device: usize, handle: C_Stream) -> Status {
        let obj = self.stream(device, handle)?;
        obj.stream.synchronize().check("synchronize_stream")
    }

    /// `synchronize_device`: every stream of the device, then its null stream.
    pub fn synchronize_device(&self, device: usize) -> Status {
        let streams: Vec<&StreamObj> = self
            .streams
            .live_values()
            .into_iter()
            .filter(|s| s.device == device)
            .collect();
        let mut result = Ok(());
        let null = self.null_streams[device].get().map(|obj| &**obj);
        for obj in streams.into_iter().chain(null) {
            let r = obj.stream.synchronize().check("synchronize_device");
            result = result.and(r);
        }
        result
    }

    /// `stream_add_callback`: `callback(device, stream, user_data, &status)` runs once, in
    /// stream order (inside a capture: at every launch of the graph, as a CUDA host node).
    /// Not queued (an error): never called, so the caller keeps `user_data`.
    pub fn add_callback(
        &self,
        device: usize,
        handle: C_Stream,
        callback: unsafe extern "C" fn(*mut C_Device_st, C_Stream, *mut c_void, *mut C_Status),
        user_data: *mut c_void,
    ) -> Status {
        let obj = self.stream(device, handle)?;
        let id = device as c_int;
        let stream = Raw(handle as usize);
        let data = Raw(user_data as usize);
        // Captured: the graph's launches tell the callback its launch stream.
        let order = if obj.in_capture() {
            lock(&self.capture_orders)
                .get(&obj.capture_id.load(Ordering::SeqCst))
                .cloned()
        } else {
            None
        };
        let counted = order.clone();
        obj.stream
            .launch_host_func(move || {
                let (stream, _turn) = match &order {
                    Some(order) => (
                        Raw(order.current().unwrap_or(stream.0)),
                        Some(CallbackTurn(order.clone())),
                    ),
                    None => (stream, None),
                };
                let mut device = C_Device_st { id };
                let mut status = crate::sys::C_SUCCESS;
                // SAFETY: the host gave this callback and its data for a call each time the
                // host function runs: once in stream order, or at every launch of a graph that
                // captured it (as CUDA runs a captured host node); `device` and `status` live
                // across the call.
                unsafe {
                    callback(
                        &mut device,
                        stream.0 as C_Stream,
                        data.0 as *mut c_void,
                        &mut status,
                    )
                };
                // A callback that reports a failure through `status` fails the work.
                if status != crate::sys::C_SUCCESS {
                    fail_in_host_func(format!(
                        "stream_add_callback: the callback reported {}",
                        status.name()
                    ));
                }
            })
            .check("stream_add_callback")?;
        if let Some(order) = counted {
            order.per_launch.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// `create_event`: an event without timing.
    ///
    /// Events live in a [`Stable`] table: a destroyed event's slot keeps its devstream event,
    /// and the slot's next handle (on the same device) reuses it, marked `settled`.
    /// The thread that destroyed it gets the slot back first, without a lock: Paddle's
    /// `wait_stream` creates, records, waits on and destroys an event per call.
    #[inline]
    pub fn create_event(&self, device: usize) -> Status<usize> {
        let backend = self.backend.index();
        let index = match with_thread(|t| t.and_then(|t| t.take_spare(backend, device))) {
            Some(index) => index,
            None => self.events.take_index(device).ok_or_else(|| {
                refuse(|| format!("more than {} live events", crate::handles::CAPACITY))
            })?,
        };
        let made = self.events.insert_at(
            index,
            || {
                Event::new(&self.places[device], EventFlags::default()).map(|event| EventObj {
                    device,
                    event,
                    capture: AtomicU64::new(0),
                    settled: AtomicBool::new(false),
                })
            },
            |obj| {
                obj.capture.store(0, Ordering::Relaxed);
                obj.settled.store(true, Ordering::Relaxed);
            },
        );
        match made {
            Ok(Some(handle)) => Ok(handle),
            Ok(None) => Err(refuse(|| "the event table is full".into())),
            Err(error) => {
                self.events.give_index(device, index);
                Err(fail("create_event", error))
            }
        }
    }

    /// The event behind a handle.
    #[inline(always)]
    fn event_in(&self, handle: usize) -> Status<&EventObj> {
        self.events
            .get(handle)
            .ok_or_else(|| refuse(|| format!("unknown event handle {handle:#x}")))
    }

    /// `destroy_event`: the slot (and its devstream event) is kept for the thread's next
    /// `create_event` on the device (see [`Runtime::create_event`]).
    #[inline]
    pub fn destroy_event(&self, handle: usize) -> Status {
        match self.destroy_event_fast(handle) {
            Some(Ok(())) => Ok(()),
            Some(Err(spare)) => {
                self.give_back(spare);
                Ok(())
            }
            None => Err(refuse(|| format!("unknown event handle {handle:#x}"))),
        }
    }

    /// The device index of a `C_Device`, if it names one of this runtime's devices (the fast
    /// paths' check; [`Runtime::device_ptr`] says why not).
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`.
    #[inline(always)]
    pub(crate) unsafe fn device_fast(&self, device: *const C_Device_st) -> Option<usize> {
        if device.is_null() {
            return None;
        }
        // SAFETY: non-null and readable per the caller's contract.
        let id = unsafe { (*device).id };
        usize::try_from(id).ok().filter(|&d| d < self.devices)
    }

    /// The stream behind a non-null handle of device `d` (the fast paths' check;
    /// [`Runtime::stream`] says why not, and serves the null stream).
    #[inline(always)]
    fn stream_fast(&self, d: usize, stream: C_Stream) -> Option<&StreamObj> {
        if stream.is_null() {
            return None;
        }
        self.streams
            .get(stream as usize)
            .filter(|obj| obj.device == d)
    }

    /// `create_event` from the calling thread's kept slots (see [`Runtime::create_event`]):
    /// the slot's event back under a new handle, written to `out`. `None`: anything else
    /// (nothing kept, bad arguments), for the full call. Never panics.
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`; `out` is null or writable.
    #[inline(always)]
    pub(crate) unsafe fn create_event_fast(
        &self,
        device: *const C_Device_st,
        out: *mut crate::sys::C_Event,
    ) -> Option<()> {
        // SAFETY: forwarded.
        let d = unsafe { self.device_fast(device) }?;
        if out.is_null() {
            return None;
        }
        let backend = self.backend.index();
        let index = with_thread(|t| t.and_then(|t| t.take_spare(backend, d)))?;
        let reset = |obj: &EventObj| {
            obj.capture.store(0, Ordering::Relaxed);
            obj.settled.store(true, Ordering::Relaxed);
        };
        match self.events.reuse_at(index, reset) {
            Some(handle) => {
                // SAFETY: non-null and writable per the caller's contract.
                unsafe { out.write(handle as crate::sys::C_Event) };
                Some(())
            }
            None => {
                // A kept slot always keeps its event; were it not so, keep the index again
                // (just taken: there is room) and let the full call make one.
                let spare = Spare {
                    backend,
                    device: d,
                    index,
                };
                let _ = with_thread(|t| t.map(|t| t.keep_spare(spare)));
                None
            }
        }
    }

    /// `destroy_event` of a live handle: the slot kept by the calling thread (see
    /// [`Runtime::destroy_event`]). `Some(Err(spare))`: destroyed, but the thread keeps
    /// [`SPARES`] already: give `spare` back with [`Runtime::give_back`]. `None`: not a live
    /// handle (nothing changed), for the full call. Never panics.
    #[inline(always)]
    pub(crate) fn destroy_event_fast(&self, handle: usize) -> Option<Result<(), Spare>> {
        let (index, obj) = self.events.remove(handle, |_| true)?;
        let spare = Spare {
            backend: self.backend.index(),
            device: obj.device,
            index,
        };
        Some(with_thread(|t| match t {
            Some(t) => t.keep_spare(spare),
            None => Err(spare),
        }))
    }

    /// Gives a destroyed event's slot back to its device's free list.
    pub(crate) fn give_back(&self, spare: Spare) {
        self.events.give_index(spare.device, spare.index);
    }

    /// The part of `record_event` Paddle's `Stream.wait_stream` runs on `devstream_cpu`: a
    /// valid record on a stream that has finished all its work settles the event (see
    /// [`Runtime::record_event`]). `None`: anything else, for the full call. Never panics (it
    /// runs outside the table's unwinding guard).
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`.
    #[inline(always)]
    pub(crate) unsafe fn record_event_fast(
        &self,
        device: *const C_Device_st,
        stream: C_Stream,
        event: usize,
    ) -> Option<()> {
        if !self.host_backed {
            return None;
        }
        // SAFETY: forwarded.
        let d = unsafe { self.device_fast(device) }?;
        let obj = self.stream_fast(d, stream)?;
        let event = self.events.get(event)?;
        if event.capture.load(Ordering::Relaxed) != 0 || !finished_host_stream(&obj.stream) {
            return None;
        }
        if !event.settled.load(Ordering::Relaxed) {
            event.settled.store(true, Ordering::Release);
        }
        Some(())
    }

    /// The part of `stream_wait_event` a settled event takes: nothing to wait for, once the
    /// stream is checked. `None`: anything else, for the full call. Never panics.
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`.
    #[inline(always)]
    pub(crate) unsafe fn stream_wait_event_fast(
        &self,
        device: *const C_Device_st,
        stream: C_Stream,
        event: usize,
    ) -> Option<()> {
        // SAFETY: forwarded.
        let d = unsafe { self.device_fast(device) }?;
        self.stream_fast(d, stream)?;
        let event = self.events.get(event)?;
        event.settled.load(Ordering::Acquire).then_some(())
    }

    /// `synchronize_event` and `query_event` of a settled event: complete. `None`: anything
    /// else, for the full call. Never panics.
    #[inline(always)]
    pub(crate) fn event_settled_fast(&self, event: usize) -> Option<()> {
        let event = self.events.get(event)?;
        event.settled.load(Ordering::Acquire).then_some(())
    }

    /// `record_event`: the event captures the stream's work submitted so far.
    ///
    /// On the CPU backend, a stream that has finished all its work (its `query` is cheap
    /// there: three loads; it refuses during a capture, which then records as usual) gives
    /// the event nothing to capture: the event is marked `settled` (complete) without a
    /// devstream record, so that waiting on it, synchronizing it and querying it touch only
    /// its slot. Paddle's `Stream.wait_stream` records a temporary event on the stream waited
    /// for, waits on it, synchronizes and destroys it: with idle streams, a record and nothing
    /// else. Work submitted to the stream by another thread at the same moment is ordered
    /// after this record, one of the orders racing calls allow.
    #[inline]
    pub fn record_event(&self, device: usize, stream: C_Stream, event: usize) -> Status {
        {
            let obj = self.stream(device, stream)?;
            let event = self.event_in(event)?;
            if self.host_backed && finished_host_stream(&obj.stream) {
                if event.capture.load(Ordering::Relaxed) != 0 {
                    event.capture.store(0, Ordering::SeqCst);
                }
                if !event.settled.load(Ordering::Relaxed) {
                    event.settled.store(true, Ordering::Release);
                }
                return Ok(());
            }
            event.event.record(&obj.stream).check("record_event")?;
            let capture = if obj.in_capture() {
                obj.capture_id.load(Ordering::SeqCst)
            } else {
                0
            };
            if event.capture.load(Ordering::SeqCst) != capture {
                event.capture.store(capture, Ordering::SeqCst);
            }
            if event.settled.load(Ordering::Relaxed) {
                event.settled.store(false, Ordering::Release);
            }
            Ok(())
        }
    }

    /// `query_event`: `Ok(true)` when complete (or never recorded).
    #[inline]
    pub fn query_event(&self, event: usize) -> Status<bool> {
        let event = self.event_in(event)?;
        if event.settled.load(Ordering::Acquire) {
            return Ok(true);
        }
        event.event.query().check("query_event")
    }

    /// `synchronize_event`.
    #[inline]
    pub fn synchronize_event(&self, event: usize) -> Status {
        let event = self.event_in(event)?;
        if event.settled.load(Ordering::Acquire) {
            return Ok(());
        }
        event.event.synchronize().check("synchronize_event")
    }

    /// `stream_wait_event`: the stream's later work waits for what the event captured.
    #[inline]
    pub fn stream_wait_event(&self, device: usize, stream: C_Stream, event: usize) -> Status {
        {
            let obj = self.stream(device, stream)?;
            let event = self.event_in(event)?;
            if event.settled.load(Ordering::Acquire) {
                // Never recorded since it was handed out: nothing to wait for.
                return Ok(());
            }
            obj.stream
                .wait_event(&event.event)
                .check("stream_wait_event")?;
            // Waiting on work recorded in a capture joins it (fork/join, as in CUDA).
            let capture = event.capture.load(Ordering::SeqCst);
            if capture != 0 && obj.stream.is_capturing().unwrap_or(false) {
                obj.capture_id.store(capture, Ordering::SeqCst);
            }
            Ok(())
        }
    }

    /// `device_memory_allocate`: `size` bytes and their address. On the CPU backend the memory
    /// is host memory handed out as is (Paddle's kernel fallback writes custom-device tensors
    /// through the pointer, e.g. `full` through `set_constant_with_place<CustomPlace>`); on
    /// the others a devstream buffer behind a reserved, never-mapped address.
    pub fn allocate(&self, device: usize, size: usize) -> Status<usize> {
        if size > self.max_alloc_size(device) {
            return Err(C_FAILED);
        }
        if self.host_backed {
            self.device(device as c_int)?;
            let block = HostBlock::new(size)?;
            let addr = block.ptr;
            let allocation = Allocation {
                device,
                memory: Memory::Host(Arc::new(block)),
            };
            return if lock(&self.memory).insert_at(addr, size, allocation) {
                Ok(addr)
            } else {
                Err(C_INTERNAL_ERROR)
            };
        }
        let null = self.null_stream(device)?;
        let buffer = null
            .stream
            .alloc(size.max(1))
            .check("device_memory_allocate")?;
        // Stream-ordered allocators (CUDA pools) hand out memory in the null stream's order:
        // wait, so that every other stream may use it at once.
        null.stream.synchronize().check("device_memory_allocate")?;
        let allocation = Allocation {
            device,
            memory: Memory::Buffer(Arc::new(buffer)),
        };
        lock(&self.memory).insert(size, allocation).ok_or(C_FAILED)
    }

    /// `device_memory_deallocate`: `ptr` must be the start of a live allocation of `device`.
    /// The memory is freed once the work queued on it is done.
    pub fn deallocate(&self, device: usize, ptr: usize) -> Status {
        let mut memory = lock(&self.memory);
        match memory.find(ptr, 0) {
            Some((start, entry, 0)) if start == ptr && entry.value.device == device => {
                let entry = memory.remove(ptr);
                drop(memory);
                drop(entry);
                Ok(())
            }
            _ => Err(refuse(|| {
                format!("{ptr:#x} is not the start of a live allocation of device {device}")
            })),
        }
    }

    /// The memory and offset of `[ptr, ptr + len)` on `device`.
    fn translate(&self, device: usize, ptr: usize, len: usize) -> Status<Target> {
        let memory = lock(&self.memory);
        match memory.find(ptr, len) {
            Some((_, entry, offset)) if entry.value.device == device => {
                Ok(match &entry.value.memory {
                    Memory::Buffer(buffer) => Target::Buffer(buffer.clone(), offset),
                    Memory::Host(block) => Target::Host(block.clone(), ptr),
                })
            }
            _ => Err(refuse(|| {
                format!("{ptr:#x}+{len} is not inside a live allocation of device {device}")
            })),
        }
    }

    /// Whether asking `obj` whether it is idle is harmless: no capture begun through this
    /// table is open anywhere (a query during a global-mode capture invalidates it, as in
    /// CUDA) and the stream is in none.
    fn may_query(&self, obj: &StreamObj) -> bool {
        self.open_captures.load(Ordering::SeqCst) == 0 && obj.capture_id.load(Ordering::SeqCst) == 0
    }

    /// A devstream host buffer of `size` bytes for staging on `obj`'s stream. While a capture
    /// may be open it is allocated on a helper thread: a host allocation is a potentially
    /// unsafe call that invalidates a thread-local-mode capture of the calling thread (as
    /// `cudaMallocHost` does in CUDA); in global mode it still does, and the copy fails.
    fn staging(&self, obj: &StreamObj, size: usize, what: &str) -> Status<HostBuffer> {
        if self.may_query(obj) {
            return obj.stream.alloc_host(size).check(what);
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| obj.stream.alloc_host(size))
                .join()
                .map_err(|_| C_INTERNAL_ERROR)?
                .check(what)
        })
    }

    /// Runs `op` (host memory work) in `obj`'s stream order: at once when the stream is idle
    /// and not capturing (so that host code reading the memory next sees it done, as with a
    /// synchronous copy), otherwise as a host function queued on the stream.
    fn host_op(
        &self,
        obj: &StreamObj,
        sync: bool,
        what: &'static str,
        mut op: impl FnMut() + Send + 'static,
    ) -> Status {
        if self.may_query(obj) && obj.stream.query().check(what)? {
            op();
        } else {
            obj.host_func(what, move || {
                op();
                Ok(())
            })?;
        }
        self.finish(obj, sync, what)
    }

    /// `device_memory_set` (synchronous).
    pub fn memset(&self, device: usize, ptr: usize, value: u8, size: usize) -> Status {
        if size == 0 {
            return Ok(());
        }
        let target = self.translate(device, ptr, size)?;
        let null = self.null_stream(device)?;
        match target {
            Target::Host(block, addr) => {
                self.host_op(&null, true, "device_memory_set", move || {
                    let _alive = &block;
                    // SAFETY: `[addr, addr + size)` lies inside `block`, kept alive here.
                    unsafe { std::ptr::write_bytes(addr as *mut u8, value, size) }
                })
            }
            Target::Buffer(buffer, offset) => {
                null.stream
                    .fill(&buffer, offset, size, value)
                    .check("device_memory_set")?;
                self.finish(&null, true, "device_memory_set")
            }
        }
    }

    /// Host→device: synchronous on the null stream when `stream` is `None`.
    pub fn copy_h2d(
        &self,
        device: usize,
        stream: Option<C_Stream>,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Status {
        if size == 0 {
            return self.empty_copy(device, stream);
        }
        if src == 0 {
            return Err(refuse(|| "a null source".into()));
        }
        let target = self.translate(device, dst, size)?;
        let (obj, sync) = self.copy_stream(device, stream)?;
        let (buffer, offset) = match target {
            Target::Host(block, addr) => {
                let src = Raw(src);
                return self.host_op(obj, sync, "memory_copy_h2d", move || {
                    let _alive = &block;
                    // SAFETY: Paddle keeps `size` readable bytes at `src` until the stream's
                    // work is complete; the destination lies inside `block`, kept alive here.
                    unsafe { std::ptr::copy(src.0 as *const u8, addr as *mut u8, size) }
                });
            }
            Target::Buffer(buffer, offset) => (buffer, offset),
        };
        // An idle stream has nothing queued that could still write the source.
        if sync || (self.may_query(obj) && obj.stream.query().check("async_memory_copy_h2d")?) {
            // SAFETY: Paddle passes `size` readable bytes at `src` (non-null, checked).
            let bytes = unsafe { std::slice::from_raw_parts(src as *const u8, size) };
            obj.stream
                .copy_from_host(&buffer, offset, bytes)
                .check("memory_copy_h2d")?;
        } else {
            let staging = Arc::new(self.staging(obj, size, "async_memory_copy_h2d")?);
            let target = staging.clone();
            let src = Raw(src);
            obj.host_func("async_memory_copy_h2d", move || {
                // SAFETY: Paddle keeps `size` readable bytes at `src` until the stream's work
                // is complete (the async-copy contract).
                let bytes = unsafe { std::slice::from_raw_parts(src.0 as *const u8, size) };
                target.write(0, bytes)
            })?;
            obj.stream
                .copy_host_to_device(&buffer, offset, &staging, 0, size)
                .check("async_memory_copy_h2d")?;
        }
        self.finish(obj, sync, "memory_copy_h2d")
    }

    /// Device→host: synchronous on the null stream when `stream` is `None`.
    pub fn copy_d2h(
        &self,
        device: usize,
        stream: Option<C_Stream>,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Status {
        if size == 0 {
            return self.empty_copy(device, stream);
        }
        if dst == 0 {
            return Err(refuse(|| "a null destination".into()));
        }
        let target = self.translate(device, src, size)?;
        let (obj, sync) = self.copy_stream(device, stream)?;
        let (buffer, offset) = match target {
            Target::Host(block, addr) => {
                let dst = Raw(dst);
                return self.host_op(obj, sync, "memory_copy_d2h", move || {
                    let _alive = &block;
                    // SAFETY: the source lies inside `block`, kept alive here; Paddle keeps
                    // `size` writable bytes at `dst` until the stream's work is complete.
                    unsafe { std::ptr::copy(addr as *const u8, dst.0 as *mut u8, size) }
                });
            }
            Target::Buffer(buffer, offset) => (buffer, offset),
        };
        let staging = self.staging(obj, size, "memory_copy_d2h")?;
        obj.stream
            .copy_device_to_host(&staging, 0, &buffer, offset, size)
            .check("memory_copy_d2h")?;
        if sync {
            obj.stream.synchronize().check("memory_copy_d2h")?;
            // SAFETY: Paddle passes `size` writable bytes at `dst` (non-null, checked).
            let out = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, size) };
            return staging.read(0, out).check("memory_copy_d2h");
        }
        let dst = Raw(dst);
        obj.host_func("async_memory_copy_d2h", move || {
            // SAFETY: Paddle keeps `size` writable bytes at `dst` until the stream's work is
            // complete, and nothing else writes them meanwhile (the async-copy contract).
            let out = unsafe { std::slice::from_raw_parts_mut(dst.0 as *mut u8, size) };
            staging.read(0, out)
        })
    }

    /// Device→device on one device: synchronous on the null stream when `stream` is `None`.
    pub fn copy_d2d(
        &self,
        device: usize,
        stream: Option<C_Stream>,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Status {
        if size == 0 {
            return self.empty_copy(device, stream);
        }
        let dst = self.translate(device, dst, size)?;
        let src = self.translate(device, src, size)?;
        let (obj, sync) = self.copy_stream(device, stream)?;
        self.copy_between(obj, sync, dst, src, size, "memory_copy_d2d")
    }

    /// Copies `size` bytes from `src` to `dst` (of one backend) on `obj`'s stream.
    fn copy_between(
        &self,
        obj: &StreamObj,
        sync: bool,
        dst: Target,
        src: Target,
        size: usize,
        what: &'static str,
    ) -> Status {
        match (dst, src) {
            (Target::Host(dst_block, dst), Target::Host(src_block, src)) => {
                self.host_op(obj, sync, what, move || {
                    let _alive = (&dst_block, &src_block);
                    // SAFETY: both ranges lie inside blocks kept alive here.
                    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, size) }
                })
            }
            (Target::Buffer(dst, dst_offset), Target::Buffer(src, src_offset)) => {
                obj.stream
                    .copy_device_to_device(&dst, dst_offset, &src, src_offset, size)
                    .check(what)?;
                self.finish(obj, sync, what)
            }
            _ => Err(refuse(|| {
                format!("{what}: host memory and a device buffer of one device type")
            })),
        }
    }

    /// Peer copy between two devices of this type (host memory: directly; devstream buffers:
    /// through host memory). Synchronous when `stream` is `None`; otherwise in the order of
    /// `stream`, which belongs to either device.
    pub fn copy_p2p(
        &self,
        dst_device: usize,
        src_device: usize,
        stream: Option<C_Stream>,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Status {
        if size == 0 {
            return match stream {
                Some(handle) => self
                    .stream_of_either(src_device, dst_device, handle)
                    .map(drop),
                None => Ok(()),
            };
        }
        if dst_device == src_device {
            return self.copy_d2d(dst_device, stream, dst, src, size);
        }
        let dst = self.translate(dst_device, dst, size)?;
        let src = self.translate(src_device, src, size)?;
        let (Target::Buffer(dst_buffer, dst_offset), Target::Buffer(src_buffer, src_offset)) =
            (dst.clone(), src.clone())
        else {
            let obj = match stream {
                Some(handle) => self.stream_of_either(src_device, dst_device, handle)?,
                None => &**self.null_stream_ref(src_device)?,
            };
            return self.copy_between(obj, stream.is_none(), dst, src, size, "memory_copy_p2p");
        };
        let src_null = self.null_stream(src_device)?;
        let dst_null = self.null_stream(dst_device)?;
        let Some(handle) = stream else {
            let bytes =
                read_device(&src_null, &src_buffer, src_offset, size).check("memory_copy_p2p")?;
            dst_null
                .stream
                .copy_from_host(&dst_buffer, dst_offset, &bytes)
                .check("memory_copy_p2p")?;
            dst_null.stream.synchronize().check("memory_copy_p2p")?;
            return Ok(());
        };
        // The stream may be either device's: find it on the source first.
        let on_source = self.stream(src_device, handle);
        if on_source.is_err() {
            // Not the source's: that refusal is no reason (see `note_failure`).
            let _ = take_failure();
        }
        if let Ok(obj) = on_source {
            let staging = self.staging(obj, size, "async_memory_copy_p2p")?;
            obj.stream
                .copy_device_to_host(&staging, 0, &src_buffer, src_offset, size)
                .check("async_memory_copy_p2p")?;
            return obj.host_func("async_memory_copy_p2p", move || {
                let bytes = staging.to_vec()?;
                dst_null
                    .stream
                    .copy_from_host(&dst_buffer, dst_offset, &bytes)?;
                dst_null.stream.synchronize()
            });
        }
        let obj = self.stream(dst_device, handle)?;
        let staging = Arc::new(self.staging(obj, size, "async_memory_copy_p2p")?);
        let target = staging.clone();
        obj.host_func("async_memory_copy_p2p", move || {
            let bytes = read_device(&src_null, &src_buffer, src_offset, size)?;
            target.write(0, &bytes)
        })?;
        obj.stream
            .copy_host_to_device(&dst_buffer, dst_offset, &staging, 0, size)
            .check("async_memory_copy_p2p")
    }

    /// The stream behind `handle` on `first` or else on `second` (a peer copy's stream belongs
    /// to either device).
    fn stream_of_either(
        &self,
        first: usize,
        second: usize,
        handle: C_Stream,
    ) -> Status<&StreamObj> {
        self.stream(first, handle).or_else(|_| {
            // Not the first device's: that refusal is no reason (see `note_failure`).
            let _ = take_failure();
            self.stream(second, handle)
        })
    }

    /// A copy of no bytes: nothing to do once its stream (if any) is checked, so that a stale
    /// or foreign handle is refused whatever the size.
    fn empty_copy(&self, device: usize, stream: Option<C_Stream>) -> Status {
        match stream {
            Some(handle) => self.stream(device, handle).map(drop),
            None => Ok(()),
        }
    }

    /// The stream a copy runs on, and whether it is synchronous (no stream given).
    fn copy_stream(&self, device: usize, stream: Option<C_Stream>) -> Status<(&StreamObj, bool)> {
        match stream {
            Some(handle) => Ok((self.stream(device, handle)?, false)),
            None => Ok((&**self.null_stream_ref(device)?, true)),
        }
    }

    /// Ends a copy: a synchronous one waits for its stream.
    fn finish(&self, obj: &StreamObj, sync: bool, what: &str) -> Status {
        if sync {
            obj.stream.synchronize().check(what)?;
        }
        Ok(())
    }

    /// `host_memory_allocate`: zeroed, 256-byte aligned host memory (pageable: devstream's
    /// copies stage through their own host buffers, so pinning it would buy nothing).
    pub fn host_allocate(&self, size: usize) -> Status<usize> {
        let layout = Layout::from_size_align(size.max(1), HOST_ALIGN).map_err(|_| C_FAILED)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(C_FAILED);
        }
        lock(&self.host).insert(ptr as usize, layout);
        Ok(ptr as usize)
    }

    /// `host_memory_deallocate`: `ptr` must come from [`Runtime::host_allocate`].
    pub fn host_deallocate(&self, ptr: usize) -> Status {
        let layout = lock(&self.host).remove(&ptr).ok_or_else(|| {
            refuse(|| format!("{ptr:#x} is no host allocation of this device type"))
        })?;
        // SAFETY: allocated by `host_allocate` with this layout, and removed from the map, so
        // freed once.
        unsafe { dealloc(ptr as *mut u8, layout) };
        Ok(())
    }

    /// `device_memory_stats`: (total, free). Total is the host's physical memory (or
    /// `DEVSTREAM_PADDLE_MEMORY_BYTES`): devstream has no device-memory query, so this is a
    /// budget, and free is that budget less the bytes allocated through this table.
    pub fn memory_stats(&self, _device: usize) -> (usize, usize) {
        let used = lock(&self.memory).bytes_live();
        (self.total_memory, self.total_memory.saturating_sub(used))
    }

    /// `device_max_alloc_size`: the largest single allocation (wgpu: the device's
    /// `max_buffer_size`; elsewhere the memory budget).
    pub fn max_alloc_size(&self, device: usize) -> usize {
        #[cfg(feature = "wgpu")]
        if let Some(place @ Place::Wgpu(_)) = self.places.get(device) {
            if let Ok(dev) = devstream::wgpu::WgpuDevice::for_place(place) {
                let limit = dev.wgpu_device().limits().max_buffer_size.saturating_sub(4);
                return usize::try_from(limit)
                    .unwrap_or(usize::MAX)
                    .min(self.total_memory);
            }
        }
        let _ = device;
        self.total_memory
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

    /// `cuda_stream_begin_capture`: `mode` is a `C_StreamCaptureMode`. The null stream cannot
    /// capture (as in Paddle and CUDA).
    pub fn begin_capture(&self, device: usize, stream: C_Stream, mode: c_int) -> Status {
        if stream.is_null() {
            return Err(refuse(|| "the null stream cannot capture".into()));
        }
        let mode = match mode {
            crate::sys::C_StreamCaptureModeGlobal => CaptureMode::Global,
            crate::sys::C_StreamCaptureModeThreadLocal => CaptureMode::ThreadLocal,
            crate::sys::C_StreamCaptureModeRelaxed => CaptureMode::Relaxed,
            _ => return Err(refuse(|| format!("unknown capture mode {mode}"))),
        };
        let obj = self.stream(device, stream)?;
        obj.stream.begin_capture(mode).check("begin_capture")?;
        let id = self.next_capture.fetch_add(1, Ordering::SeqCst);
        lock(&self.capture_orders).insert(id, Arc::default());
        obj.capture_id.store(id, Ordering::SeqCst);
        obj.capturing.store(true, Ordering::SeqCst);
        self.open_captures.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// `cuda_stream_end_captrue`: ends the capture and answers the graph's handle.
    pub fn end_capture(&self, device: usize, stream: C_Stream) -> Status<usize> {
        let obj = self.stream(device, stream)?;
        let id = obj.capture_id.load(Ordering::SeqCst);
        let graph = obj.stream.end_capture();
        let mut order = None;
        if graph.is_ok() || !obj.stream.is_capturing().unwrap_or(false) {
            order = self.capture_ended(obj, id);
        }
        let graph = graph.check("end_capture")?;
        let handle = self.handle(false);
        let graph = GraphObj {
            device,
            graph,
            order: order.unwrap_or_default(),
            last_launch: Mutex::new(None),
        };
        lock(&self.graphs).insert(handle, Arc::new(graph));
        Ok(handle)
    }

    /// `cuda_stream_capture_info`: the capture status (a `C_StreamCaptureStatus`) and the
    /// capture's number.
    pub fn capture_info(&self, device: usize, stream: C_Stream) -> Status<(c_int, u64)> {
        let obj = self.stream(device, stream)?;
        let status = match obj.stream.is_capturing() {
            Ok(true) => crate::sys::C_StreamCaptureStatusActive,
            Ok(false) if obj.capturing.load(Ordering::SeqCst) => {
                crate::sys::C_StreamCaptureStatusInvalidated
            }
            Ok(false) => {
                // A joined stream leaves the capture when its origin ends it.
                obj.capture_id.store(0, Ordering::SeqCst);
                crate::sys::C_StreamCaptureStatusNone
            }
            Err(devstream::Error::Capture { .. }) => crate::sys::C_StreamCaptureStatusInvalidated,
            Err(error) => return Err(fail("cuda_stream_capture_info", error)),
        };
        Ok((status, obj.capture_id.load(Ordering::SeqCst)))
    }

    /// A graph handle from `end_capture` that is still alive.
    pub fn graph(&self, handle: usize) -> Status<Arc<GraphObj>> {
        lock(&self.graphs)
            .get(&handle)
            .cloned()
            .ok_or_else(|| refuse(|| format!("unknown graph handle {handle:#x}")))
    }

    /// `cuda_graph_instantiate`: an executable handle for a captured graph.
    pub fn instantiate(&self, graph: usize) -> Status<usize> {
        let graph = self.graph(graph)?;
        let handle = self.handle(true);
        lock(&self.execs).insert(handle, graph);
        Ok(handle)
    }

    /// `cuda_graph_launch`: runs the graph on `stream` (any stream of its device).
    ///
    /// A graph with captured callbacks is launched behind the end of its previous launch and
    /// its launch stream queued in its [`LaunchOrder`], so that each callback is told the
    /// `C_Stream` of the launch that runs it. Launched into a capture (the graph's work becomes
    /// part of another graph), its callbacks are told the stream they were captured on.
    pub fn launch(&self, device: usize, exec: usize, stream: C_Stream) -> Status {
        let graph = lock(&self.execs)
            .get(&exec)
            .cloned()
            .ok_or_else(|| refuse(|| format!("unknown graph exec handle {exec:#x}")))?;
        if graph.device != device {
            return Err(refuse(|| {
                format!(
                    "graph exec {exec:#x} belongs to device {}, not {device}",
                    graph.device
                )
            }));
        }
        let obj = self.stream(device, stream)?;
        if graph.order.per_launch.load(Ordering::Acquire) == 0 || obj.in_capture() {
            return graph.graph.launch(&obj.stream).check("cuda_graph_launch");
        }
        let mut last = lock(&graph.last_launch);
        if let Some((previous, end)) = &*last {
            if *previous != obj.handle.load(Ordering::Acquire) {
                obj.stream
                    .wait_event(end)
                    .check("cuda_graph_launch (waiting for the previous launch)")?;
            }
        }
        lock(&graph.order.launches).push_back(obj.handle.load(Ordering::Acquire));
        if let Err(error) = graph.graph.launch(&obj.stream) {
            lock(&graph.order.launches).pop_back();
            return Err(fail("cuda_graph_launch", error));
        }
        match obj.stream.record_event() {
            Ok(end) => *last = Some((obj.handle.load(Ordering::Acquire), end)),
            Err(error) => {
                // The launch is queued: answer success. The next launch cannot be ordered
                // behind it, so a callback of either may be told the other's stream.
                *last = None;
                tracing::warn!(
                    "devstream-paddle: cuda_graph_launch: recording the launch's end: {error}"
                );
                if log_to_stderr() {
                    eprintln!(
                        "devstream-paddle: cuda_graph_launch: recording the launch's end: {error}"
                    );
                }
            }
        }
        Ok(())
    }

    /// `cuda_graph_destroy`.
    pub fn destroy_graph(&self, graph: usize) -> Status {
        lock(&self.graphs)
            .remove(&graph)
            .map(drop)
            .ok_or_else(|| refuse(|| format!("unknown graph handle {graph:#x}")))
    }

    /// `cuda_graph_exec_destroy`.
    pub fn destroy_exec(&self, exec: usize) -> Status {
        lock(&self.execs)
            .remove(&exec)
            .map(drop)
            .ok_or_else(|| refuse(|| format!("unknown graph exec handle {exec:#x}")))
    }
}

/// The status of an internal failure (a panic caught at the boundary).
pub const PANICKED: C_Status = C_INTERNAL_ERROR;
