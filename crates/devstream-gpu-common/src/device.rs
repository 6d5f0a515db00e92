//! The runtime (loaded once per process), its devices, and the generic [`DeviceBackend`]
//! implementation [`GpuBackend`].

use crate::error::check;
use crate::event::GpuEvent;
use crate::ext::CaptureModeGuard;
use crate::flag::GpuFlag;
use crate::hostfn::CaptureOwned;
use crate::raw::{
    DeviceProperties, DevicePtr, LoadInfo, Optional, RawApi, RawContext, RawEvent, RawGraph,
    RawResult, RawStream,
};
use crate::stream::{GpuStream, StreamInner, StreamKind};
use devstream_core::{
    Capabilities, CaptureSupport, DeviceBackend, DevicePool, Error, EventFlags, LiveCounts, Place,
    PoolOptions, PriorityRange, Result, StreamOptions,
};
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The process-wide state of one backend: what was loaded, its devices (initialised on first
/// use), live-object counts and the objects owned by captures in progress.
pub struct Runtime<A: RawApi> {
    info: LoadInfo,
    devices: Vec<OnceLock<Result<Device<A>>>>,
    pub(crate) captures: Mutex<HashMap<u64, CaptureOwned>>,
}

impl<A: RawApi> fmt::Debug for Runtime<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("backend", &A::BACKEND)
            .field("info", &self.info)
            .finish()
    }
}

impl<A: RawApi> Runtime<A> {
    /// Loads the runtime on first call (never panics) and returns it, or
    /// `Error::BackendUnavailable` saying why it cannot be used.
    pub fn get() -> Result<&'static Runtime<A>> {
        let cell = A::runtime_cell();
        match cell.get_or_init(Runtime::load) {
            Ok(runtime) => Ok(runtime),
            Err(e) => Err(e.clone()),
        }
    }

    /// The runtime if it was loaded successfully before; never loads.
    pub fn loaded() -> Option<&'static Runtime<A>> {
        A::runtime_cell().get().and_then(|r| r.as_ref().ok())
    }

    fn load() -> Result<Runtime<A>> {
        let info = A::load().map_err(|reason| Error::BackendUnavailable {
            backend: A::BACKEND,
            reason,
        })?;
        Ok(Runtime {
            devices: (0..info.device_count).map(|_| OnceLock::new()).collect(),
            info,
            captures: Mutex::new(HashMap::new()),
        })
    }

    /// Ends the native capture `id` of `raw` and takes what the capture owned, with the
    /// capture registry's lock held across the end. The runtime frees a capture's state when
    /// it ends: a call into the capture made meanwhile on another thread (an event recorded on
    /// one of its streams) can leave a handle into freed state, and destroying that event
    /// later crashed the process. devstream's own calls into a capture from threads that did
    /// not begin it go through [`Runtime::while_capturing`], which holds the same lock, so
    /// they run wholly before the end or not at all.
    pub(crate) fn end_capture_locked(
        &self,
        raw: RawStream,
        id: u64,
    ) -> (RawResult<RawGraph>, Option<CaptureOwned>) {
        let mut captures = devstream_core::sync::lock(&self.captures);
        // SAFETY: the caller's stream is alive; the graph (if any) is the caller's.
        let ended = unsafe { A::stream_end_capture(raw) };
        let owned = captures.remove(&id);
        drop(captures);
        (ended, owned)
    }

    /// Runs `f` while the capture `id` cannot end through devstream: with the registry's lock
    /// held, and only if the registry still holds the capture (see
    /// [`Runtime::end_capture_locked`]); `None` otherwise.
    pub(crate) fn while_capturing<R>(&self, id: u64, f: impl FnOnce() -> R) -> Option<R> {
        let captures = devstream_core::sync::lock(&self.captures);
        captures.contains_key(&id).then(f)
    }

    /// What the loader found: driver version, device count, library.
    pub fn info(&self) -> &LoadInfo {
        &self.info
    }

    /// Number of devices.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// Device `ordinal`, initialised on first use (primary context retained).
    pub fn device(&'static self, ordinal: usize) -> Result<&'static Device<A>> {
        let slot = self.devices.get(ordinal).ok_or_else(|| Error::NoDevice {
            place: A::place(ordinal),
            reason: format!(
                "{} device(s) present, ordinal {ordinal} is out of range",
                self.devices.len()
            ),
        })?;
        match slot.get_or_init(|| Device::init(ordinal)) {
            Ok(device) => Ok(device),
            Err(e) => Err(e.clone()),
        }
    }
}

/// The device of a place: checks the backend and the ordinal, loads the runtime.
pub fn device_of<A: RawApi>(place: &Place) -> Result<&'static Device<A>> {
    let ordinal = A::ordinal(place)
        .ok_or_else(|| Error::InvalidArgument(format!("{place} is not a {} place", A::BACKEND)))?;
    Runtime::<A>::get()?.device(ordinal)
}

pub(crate) type DeferredAction = Box<dyn FnOnce() + Send>;

/// How many idle native streams a device keeps for reuse.
const STREAM_POOL_SIZE: usize = 32;

/// A cached pinned host block.
struct PinnedBlock(*mut u8);
// SAFETY: an address of pinned memory owned by the cache; no one dereferences it while cached.
unsafe impl Send for PinnedBlock {}

/// The size class of a pinned block of `len` bytes: the next power of two, at least 64; `None`
/// past the largest power of two a `usize` holds (no host has that much memory).
fn pinned_class(len: usize) -> Option<usize> {
    len.max(64).checked_next_power_of_two()
}

struct Deferred<A: RawApi> {
    events: Vec<RawEvent>,
    /// Users that were capturing when the release was asked for: the end of the work they
    /// queued before the capture cannot be recorded until the capture has ended.
    waiting: Vec<Arc<StreamInner<A>>>,
    action: Option<DeferredAction>,
}

/// The end of a stream's queued work, as [`Device::end_of_work`] found it.
enum EndOfWork {
    /// An event recorded after the work.
    Recorded(RawEvent),
    /// The stream is capturing (or its capture was invalidated and not ended yet).
    Capturing,
    /// No event could be made or recorded.
    Failed,
}

/// One device: its primary context, properties, capabilities, default stream, and the list of
/// releases waiting for queued work (buffers, host memory, graphs dropped while in use).
pub struct Device<A: RawApi> {
    pub(crate) ordinal: usize,
    pub(crate) place: Place,
    pub(crate) context: RawContext,
    pub(crate) properties: DeviceProperties,
    pub(crate) range: PriorityRange,
    pub(crate) caps: Capabilities,
    default_stream: OnceLock<Result<GpuStream<A>>>,
    /// The device's default memory pool, once asked for (`crate::mempool`).
    pub(crate) default_pool: OnceLock<Result<Arc<crate::mempool::GpuMemoryPool<A>>>>,
    /// The block caches of the device's pools (`crate::mempool::PoolShared`), for the streams
    /// whose last handle goes.
    pub(crate) pool_caches: Mutex<Vec<std::sync::Weak<crate::mempool::PoolShared<A>>>>,
    /// An internal non-blocking stream on which releases of memory used by several streams
    /// are ordered (made with the device).
    reclaim_stream: Result<RawStream>,
    /// The frees queued on `reclaim_stream` until a synchronisation point follows them
    /// (`crate::buffer::ReclaimFrees`).
    pub(crate) reclaim_frees: crate::buffer::ReclaimFrees,
    /// Pending completion futures, their notifier streams and sweeper (see
    /// `crate::completion`).
    pub(crate) completions: crate::completion::Hub<A>,
    deferred: Mutex<Vec<Deferred<A>>>,
    /// Entries in `deferred` (read without the lock).
    pending: AtomicUsize,
    /// Synchronous frees held while a capture begun through devstream may be active on the
    /// device (see [`Device::outside_captures`]), and how many.
    held_for_captures: Mutex<Vec<DeferredAction>>,
    held_count: AtomicUsize,
    /// Whether a job that runs `held_for_captures` is on its way to the free thread.
    held_posted: std::sync::atomic::AtomicBool,
    /// Captures begun through devstream on this device and not ended yet.
    pub(crate) active_captures: AtomicUsize,
    /// Set (for good) once a stream or event handle made elsewhere was wrapped on this device:
    /// someone else may then capture, and a devstream stream can join that capture by waiting
    /// on such an event, so "is this stream capturing?" must ask the driver.
    pub(crate) foreign_handles: std::sync::atomic::AtomicBool,
    /// Captures begun through devstream whose native capture may be active: raised before the
    /// native begin, lowered after the native end. While it is non-zero no wait is elided and
    /// no record gets a position on this device (see `devstream_core::elide`).
    pub(crate) capture_window: AtomicUsize,
    /// Raised by every begin (after `capture_window`): an operation that reads the same value
    /// before and after overlapped no begin.
    pub(crate) capture_epoch: std::sync::atomic::AtomicU64,
    /// Live user-created streams and events of this device.
    pub(crate) live_streams: AtomicUsize,
    pub(crate) live_events: AtomicUsize,
    /// Never-recorded events with default flags, kept for reuse (like PyTorch's event pool).
    pub(crate) event_pool: Mutex<Vec<RawEvent>>,
    /// Where capture pools take new blocks from (`crate::graph_memory::BlockSource`), made
    /// with the device (its stream too, like the other internal streams); `None` without
    /// memory pools.
    pub(crate) graph_blocks: Option<crate::graph_memory::BlockSource>,
    /// Native streams of dropped owned streams whose work was all done, with their flags
    /// (`non_blocking`, native priority), kept for the next stream of the same flags (see
    /// [`Device::keep_stream`]).
    stream_pool: Mutex<Vec<(bool, i32, RawStream)>>,
    /// Released pinned host blocks by size class, for reuse: `cuMemFreeHost` synchronizes the
    /// whole device (and so can wait for a stream the caller gates), so pinned memory is never
    /// handed back to the driver — PyTorch's caching host allocator does the same.
    pinned_cache: Mutex<HashMap<usize, Vec<PinnedBlock>>>,
    /// The words streams are held at while they wait on other backends' work.
    pub(crate) wait_words: crate::words::WaitWords,
    /// Runs the host functions queued right behind waits across backends (`crate::foreign`).
    pub(crate) host_thread: crate::foreign::HostThread<A>,
    _api: PhantomData<A>,
}

impl<A: RawApi> fmt::Debug for Device<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("place", &self.place)
            .field("name", &self.properties.name)
            .field("range", &self.range)
            .finish()
    }
}

impl<A: RawApi> Device<A> {
    fn init(ordinal: usize) -> Result<Device<A>> {
        let place = A::place(ordinal);
        // SAFETY: the runtime is loaded (we are called through Runtime::device) and `ordinal`
        // is below the device count.
        let properties = check::<A, _>(unsafe { A::device_properties(ordinal) })?;
        // SAFETY: as above.
        let context = check::<A, _>(unsafe { A::primary_context(ordinal) })?;
        // SAFETY: `context` was just retained and stays retained for the process' lifetime.
        check::<A, _>(unsafe { A::context_set_current(context) })?;
        // SAFETY: a context is current.
        let (least, greatest) = check::<A, _>(unsafe { A::priority_range() })?;
        let range = PriorityRange { least, greatest };
        let mut caps = Capabilities::none();
        caps.priorities = properties.stream_priorities && range.has_priorities();
        caps.concurrent_streams = true;
        caps.capture = CaptureSupport::Native;
        caps.timing = true;
        caps.host_funcs =
            A::supports(Optional::LaunchHostFunc) || A::supports(Optional::StreamAddCallback);
        // Stream callbacks cannot be captured: only a host-function launch can.
        caps.capture_host_funcs = A::supports(Optional::LaunchHostFunc);
        caps.flags = A::supports(Optional::StreamMemOps)
            && properties.stream_mem_ops
            && properties.can_map_host_memory;
        // Waits on other backends' work hold the stream at a flag word.
        caps.foreign_waits = caps.flags;
        // Captured, such a wait is a memory-op node (the flag wait) and a host-function node
        // (the report of the awaited work's error).
        caps.capture_foreign_waits = caps.foreign_waits && caps.capture_host_funcs;
        // Host functions given host buffers wait on their copies as waits across backends do.
        caps.host_func_buffers = caps.foreign_waits;
        caps.buffers = true;
        caps.cross_device_wait = true;
        caps.external_handles = true;
        caps.stream_ordered_alloc =
            A::supports(Optional::StreamOrderedAlloc) && properties.memory_pools;
        caps.memory_pools = caps.stream_ordered_alloc && A::supports(Optional::MemoryPools);
        // Graph-private memory: blocks allocated with the thread in Relaxed capture mode
        // (`crate::graph_memory`).
        caps.capture_alloc = true;
        caps.nonblocking_query = true;
        caps.legacy_default_stream = true;
        caps.per_thread_stream = true;
        // Collectives where NCCL (CUDA) / RCCL (HIP) loads (cargo feature `comm`).
        #[cfg(feature = "comm")]
        {
            caps.collectives = crate::comm::available::<A>();
        }
        // devstream's internal streams are made now, while no stream of devstream's holds work
        // on the device: CUDA's stream creation can wait for work queued on other streams
        // (see `crate::completion`), and these are made on behalf of calls (a buffer's release,
        // a completion) that a caller may make while it holds streams.
        // SAFETY: the context is current; the stream lives for the process' lifetime.
        let reclaim_stream = check::<A, _>(unsafe { A::stream_create(true, range.clamp(0)) });
        let completions = crate::completion::Hub::new(range.clamp(0));
        let graph_blocks = if caps.memory_pools {
            crate::graph_memory::BlockSource::new::<A>(ordinal, range.clamp(0))
        } else {
            None
        };
        Ok(Device {
            ordinal,
            place,
            context,
            properties,
            range,
            caps,
            default_stream: OnceLock::new(),
            default_pool: OnceLock::new(),
            pool_caches: Mutex::new(Vec::new()),
            reclaim_stream,
            reclaim_frees: crate::buffer::ReclaimFrees::new(),
            completions,
            deferred: Mutex::new(Vec::new()),
            pending: AtomicUsize::new(0),
            held_for_captures: Mutex::new(Vec::new()),
            held_count: AtomicUsize::new(0),
            held_posted: std::sync::atomic::AtomicBool::new(false),
            active_captures: AtomicUsize::new(0),
            foreign_handles: std::sync::atomic::AtomicBool::new(false),
            capture_window: AtomicUsize::new(0),
            capture_epoch: std::sync::atomic::AtomicU64::new(0),
            live_streams: AtomicUsize::new(0),
            live_events: AtomicUsize::new(0),
            event_pool: Mutex::new(Vec::new()),
            graph_blocks,
            stream_pool: Mutex::new(Vec::new()),
            pinned_cache: Mutex::new(HashMap::new()),
            wait_words: crate::words::WaitWords::new(),
            host_thread: crate::foreign::HostThread::default(),
            _api: PhantomData,
        })
    }

    /// `Some(epoch)` when waits may be elided and records positioned on this device now: no
    /// capture begun through devstream may be active and no foreign handle was ever wrapped
    /// here (someone else's capture could reach devstream's streams through it). Pass the
    /// epoch to [`Device::elision_still_valid`] after the native call.
    #[inline]
    pub(crate) fn elision_epoch(&self) -> Option<u64> {
        let epoch = self.capture_epoch.load(Ordering::SeqCst);
        if self.capture_window.load(Ordering::SeqCst) != 0
            || self.foreign_handles.load(Ordering::Acquire)
        {
            return None;
        }
        Some(epoch)
    }

    /// Whether no capture began on this device since [`Device::elision_epoch`] gave `epoch`.
    #[inline]
    pub(crate) fn elision_still_valid(&self, epoch: u64) -> bool {
        self.capture_epoch.load(Ordering::SeqCst) == epoch
    }

    /// Opens a capture window (before a native begin).
    pub(crate) fn capture_window_open(&self) {
        self.capture_window.fetch_add(1, Ordering::SeqCst);
        self.capture_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Closes a capture window (after the native end, or a failed begin); the last one runs
    /// the frees held for captures.
    pub(crate) fn capture_window_close(&'static self) {
        self.capture_window.fetch_sub(1, Ordering::SeqCst);
        self.run_held_for_captures();
    }

    /// Runs `free` (a synchronous free, `cuMemFree` / `hipFree`) on devstream's free thread
    /// once no capture begun through devstream may be active on the device.
    ///
    /// Not while a capture may be active: a synchronous free synchronizes the device
    /// implicitly, which the runtime answers by invalidating every capture in progress on it,
    /// whatever the calling thread's capture mode (PyTorch's allocator holds its frees while
    /// captures are underway for the same reason). Not on the calling thread: that implicit
    /// synchronization waits for all of the device's queued work, which can include a stream
    /// held at a flag or at a wait across backends that only the calling thread would release
    /// later (dropping a graph buffer while a gate is closed would never return).
    pub(crate) fn outside_captures(&'static self, free: DeferredAction) {
        devstream_core::sync::lock(&self.held_for_captures).push(free);
        self.held_count.fetch_add(1, Ordering::SeqCst);
        self.run_held_for_captures();
    }

    /// Hands the frees held for captures to the free thread once no capture window is open.
    /// The free thread looks at the window again before it frees: a capture begun meanwhile
    /// keeps them held, and its window's close hands them over again.
    fn run_held_for_captures(&'static self) {
        if self.held_count.load(Ordering::SeqCst) == 0
            || self.capture_window.load(Ordering::SeqCst) != 0
            || self.held_posted.swap(true, Ordering::SeqCst)
        {
            return;
        }
        crate::hostfn::on_free_thread(move || {
            self.held_posted.store(false, Ordering::SeqCst);
            if self.capture_window.load(Ordering::SeqCst) != 0 {
                return;
            }
            // devstream's own calls: in Relaxed mode, so that no capture (of someone else's
            // stream) counts them as unsafe.
            let _relaxed = CaptureModeGuard::<A>::relaxed();
            let held = std::mem::take(&mut *devstream_core::sync::lock(&self.held_for_captures));
            self.held_count.fetch_sub(held.len(), Ordering::SeqCst);
            for free in held {
                free();
            }
        });
    }

    /// The device's place.
    pub fn place(&self) -> &Place {
        &self.place
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's properties.
    pub fn properties(&self) -> &DeviceProperties {
        &self.properties
    }

    /// The device's capabilities.
    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// The native priority range.
    pub fn priority_range(&self) -> PriorityRange {
        self.range
    }

    /// The retained primary context.
    pub fn context(&self) -> RawContext {
        self.context
    }

    /// Makes the device's primary context current on the calling thread if it is not already
    /// (one `cuCtxGetCurrent`, plus `cuCtxSetCurrent` when it differs).
    #[inline]
    pub fn bind(&self) -> Result<()> {
        // SAFETY: the runtime is loaded (a Device exists only then).
        let current = check::<A, _>(unsafe { A::context_current() })?;
        if current != self.context {
            // SAFETY: `self.context` is retained for the process' lifetime.
            check::<A, _>(unsafe { A::context_set_current(self.context) })?;
        }
        Ok(())
    }

    /// A kept native stream with these flags (`None`: make one), see [`Device::keep_stream`].
    pub(crate) fn take_stream(&self, non_blocking: bool, priority: i32) -> Option<RawStream> {
        let mut pool = self.stream_pool.lock().ok()?;
        let at = pool
            .iter()
            .rposition(|&(nb, p, _)| nb == non_blocking && p == priority)?;
        Some(pool.swap_remove(at).2)
    }

    /// Keeps the native stream of a dropped owned stream for [`Device::take_stream`] instead of
    /// destroying it, when that is indistinguishable from a new stream: the pool has room, this
    /// device's context is already current (nothing is made current behind the caller's back),
    /// the stream takes no part in a capture and the driver reports all its work done (no
    /// pending work a new user's work would be ordered after; an error answers otherwise).
    /// `false`: destroy it. A new stream then costs neither `cuStreamCreate` nor, at its drop,
    /// `cuStreamDestroy` (PyTorch reuses streams from a pool for the same reason).
    ///
    /// The query is a potentially unsafe call to the runtime: a capture in `Global` mode on any
    /// thread (or in `ThreadLocal` mode on this one) would be invalidated by it. The caller
    /// holds this thread in Relaxed mode (`CaptureModeGuard::relaxed`); where the runtime
    /// cannot switch modes and a capture begun through devstream forbids the call, the stream
    /// is not asked, and not kept.
    pub(crate) fn keep_stream(&self, raw: RawStream, non_blocking: bool, priority: i32) -> bool {
        let has_room = |pool: &Vec<_>| pool.len() < STREAM_POOL_SIZE;
        if !self.stream_pool.lock().is_ok_and(|pool| has_room(&pool)) {
            return false;
        }
        // SAFETY: the runtime is loaded (a Device exists only then).
        if !unsafe { A::context_current() }.is_ok_and(|current| current == self.context) {
            return false;
        }
        if !A::supports(Optional::ExchangeCaptureMode)
            && devstream_core::capture::forbids_unsafe_calls(&self.place)
        {
            return false;
        }
        // A stream that joined a capture (by waiting on an event recorded in it) is not idle,
        // and a query of it would invalidate that capture: asked first where a capture may be
        // in progress (one begun through devstream, or someone else's through a wrapped
        // handle), as `GpuStream::capture_sequence` does.
        let capture_may_be_active = self.active_captures.load(Ordering::Acquire) > 0
            || self.foreign_handles.load(Ordering::Acquire);
        if capture_may_be_active {
            // SAFETY: the stream is alive (its owner is being dropped); asking changes nothing.
            let status = unsafe { A::stream_is_capturing(raw) };
            if !matches!(status, Ok(crate::raw::CaptureStatus::None)) {
                return false;
            }
        }
        // SAFETY: the stream is alive (its owner is being dropped); a query changes nothing.
        if unsafe { A::stream_query(raw) }.is_err() {
            return false;
        }
        match self.stream_pool.lock() {
            Ok(mut pool) if has_room(&pool) => {
                pool.push((non_blocking, priority, raw));
                true
            }
            _ => false,
        }
    }

    /// Pinned, device-mapped host memory of at least `len` bytes (a power-of-two size class,
    /// at least 64 bytes), from the cache or the driver.
    pub(crate) fn alloc_pinned(&self, len: usize) -> Result<*mut u8> {
        let class = pinned_class(len).ok_or_else(|| Error::out_of_memory(&self.place, len))?;
        if let Some(block) = self
            .pinned_cache
            .lock()
            .ok()
            .and_then(|mut cache| cache.get_mut(&class).and_then(Vec::pop))
        {
            return Ok(block.0);
        }
        self.bind()?;
        // `cuMemHostAlloc` is a potentially unsafe call to the runtime; where the caller's
        // call is allowed beside a capture (a flag, a staging buffer), it must not invalidate
        // one: made in Relaxed mode (`alloc_host` refuses itself where a capture forbids it).
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        // SAFETY: the context is current.
        unsafe { A::host_alloc(class) }
            .map_err(|e| crate::error::map_alloc_error::<A>(e, &self.place, class))
    }

    /// Zeroed pinned host memory of at least `len` bytes, with its address in this device's
    /// context (`cuMemHostGetDevicePointer`), for words that streams wait on and write.
    pub(crate) fn alloc_mapped_zeroed(&self, len: usize) -> Result<(*mut u8, DevicePtr)> {
        self.bind()?;
        let host = self.alloc_pinned(len)?;
        // SAFETY: `host` points to at least `len` bytes that no one else uses.
        unsafe { std::ptr::write_bytes(host, 0, len) };
        // SAFETY: `host` is mapped pinned memory of this context (bound above).
        match unsafe { A::host_device_pointer(host) } {
            Ok(device_ptr) => Ok((host, device_ptr)),
            Err(e) => {
                self.release_pinned(host, len);
                Err(crate::error::map_error::<A>(e))
            }
        }
    }

    /// Returns a block from [`Device::alloc_pinned`] to the cache (no driver call).
    pub(crate) fn release_pinned(&self, ptr: *mut u8, len: usize) {
        // `len` was allocated, so its class exists.
        let (Some(class), Ok(mut cache)) = (pinned_class(len), self.pinned_cache.lock()) else {
            return;
        };
        cache.entry(class).or_default().push(PinnedBlock(ptr));
    }

    /// `Error::Unsupported` unless the runtime has `call`.
    pub(crate) fn require(&self, call: Optional, op: &'static str) -> Result<()> {
        if A::supports(call) {
            Ok(())
        } else {
            Err(Error::unsupported(op, &self.place))
        }
    }

    /// The device's default (legacy) stream.
    pub fn default_stream(&'static self) -> Result<GpuStream<A>> {
        self.default_stream
            .get_or_init(|| GpuStream::special(self, StreamKind::Legacy))
            .clone()
    }

    /// An internal non-blocking stream on which releases of memory used by several streams are
    /// ordered (it waits for every user, then frees), so no user stream gains a dependency.
    pub(crate) fn reclaim_stream(&self) -> Result<RawStream> {
        self.reclaim_stream.clone()
    }

    /// Runs `action` once every event in `events` has completed (checked now and whenever the
    /// device allocates or releases later), then destroys the events. Never blocks.
    pub(crate) fn defer(&'static self, events: Vec<RawEvent>, action: DeferredAction) {
        self.defer_entry(Deferred {
            events,
            waiting: Vec::new(),
            action: Some(action),
        });
    }

    fn defer_entry(&'static self, entry: Deferred<A>) {
        match self.deferred.lock() {
            Ok(mut list) => {
                list.push(entry);
                self.pending.store(list.len(), Ordering::Release);
            }
            // Never run: a leak, not a release under pending work.
            Err(_) => std::mem::forget(entry),
        }
        self.collect();
    }

    /// Runs the deferred releases whose events have completed (inline: with none pending, one
    /// load on every stream, buffer and flag creation).
    #[inline]
    pub(crate) fn collect(&'static self) {
        if self.pending.load(Ordering::Acquire) != 0 {
            self.collect_pending();
        }
        self.run_held_for_captures();
    }

    /// [`Device::collect`] with releases pending.
    ///
    /// Its queries, and the releases it runs (a `cuMemFree` synchronizes), are devstream's own
    /// work on behalf of whatever call came by: made with this thread in Relaxed mode, so that
    /// no capture in progress, on any thread, counts them as unsafe.
    #[inline(never)]
    fn collect_pending(&self) {
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        // Streams whose capture ended, dropped after the lock is released.
        let mut ended: Vec<Arc<StreamInner<A>>> = Vec::new();
        // The entries are taken out of the list and looked at without its lock: the driver
        // calls below can wait inside the driver (CUDA's stream creation on another thread
        // holds it while streams are held at a flag wait), and a thread waiting there must not
        // hold a lock that the thread which would release the flag needs (every stream, buffer
        // and flag creation and every deferred release takes this one). Entries deferred
        // meanwhile land in the emptied list; what is not ready goes back afterwards.
        let mut list = match self.deferred.lock() {
            Ok(mut list) => std::mem::take(&mut *list),
            Err(_) => return,
        };
        if list.is_empty() {
            return;
        }
        let ready: Vec<Deferred<A>> = {
            let mut ready = Vec::new();
            let mut index = 0;
            let mut bound = false;
            while index < list.len() {
                let entry = &mut list[index];
                let mut user = 0;
                while user < entry.waiting.len() {
                    if !bound {
                        bound = self.bind().is_ok();
                        if !bound {
                            break;
                        }
                    }
                    match self.end_of_work(entry.waiting[user].release_handle()) {
                        EndOfWork::Recorded(event) => {
                            entry.events.push(event);
                            ended.push(entry.waiting.swap_remove(user));
                        }
                        // Still capturing, or try again later.
                        EndOfWork::Capturing | EndOfWork::Failed => user += 1,
                    }
                }
                let done = entry.waiting.is_empty()
                    && entry.events.iter().all(|event| {
                    // SAFETY: the deferred entry owns its events until it runs.
                    let status = unsafe { A::event_query(*event) };
                    // Anything but "not ready" (done, or an error that will never clear)
                    // releases: waiting forever would leak.
                    !matches!(status, Err(e) if A::error_kind(e.code) == crate::raw::ErrorKind::NotReady)
                    });
                if done {
                    ready.push(list.swap_remove(index));
                } else {
                    index += 1;
                }
            }
            ready
        };
        match self.deferred.lock() {
            Ok(mut kept) => {
                kept.append(&mut list);
                self.pending.store(kept.len(), Ordering::Release);
            }
            // Never run: a leak, not a release under pending work.
            Err(_) => std::mem::forget(list),
        }
        drop(ended);
        for mut entry in ready {
            for event in entry.events.drain(..) {
                // SAFETY: the event is complete and no longer referenced.
                let _ = unsafe { A::event_destroy(event) };
            }
            if let Some(action) = entry.action.take() {
                let _ = self.bind();
                action();
            }
        }
    }

    /// Records an internal event marking the end of `stream`'s queued work. The context must be
    /// current.
    fn end_of_work(&self, stream: RawStream) -> EndOfWork {
        // SAFETY: the caller keeps `stream` alive during this call.
        match unsafe { A::stream_is_capturing(stream) } {
            Ok(crate::raw::CaptureStatus::None) => {}
            Ok(_) => return EndOfWork::Capturing,
            Err(_) => return EndOfWork::Failed,
        }
        // SAFETY: the context is current.
        let Ok(event) = (unsafe { A::event_create(EventFlags::default()) }) else {
            return EndOfWork::Failed;
        };
        // SAFETY: live event and stream of this context.
        if unsafe { A::event_record(event, stream) }.is_ok() {
            EndOfWork::Recorded(event)
        } else {
            // SAFETY: never recorded, destroy at once.
            let _ = unsafe { A::event_destroy(event) };
            EndOfWork::Failed
        }
    }

    /// Runs `action` once the work queued on `stream` so far has completed; if that cannot be
    /// tracked (the stream is capturing, or no event can be made), never runs it (a leak rather
    /// than a release under pending work).
    pub(crate) fn release_after_or_forget(
        &'static self,
        stream: RawStream,
        action: DeferredAction,
    ) {
        // devstream's own calls: in Relaxed mode (see `Device::collect_pending`).
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        if self.bind().is_err() {
            std::mem::forget(action);
            return;
        }
        match self.end_of_work(stream) {
            EndOfWork::Recorded(event) => self.defer(vec![event], action),
            EndOfWork::Capturing | EndOfWork::Failed => std::mem::forget(action),
        }
    }

    /// Runs `action` once the work every stream in `users` has queued so far has completed.
    /// Never blocks. A user that is capturing now is tracked once its capture has ended (the
    /// work it queued before the capture runs then, and its captured work belongs to the
    /// graph, which keeps its own objects); where completion cannot be tracked at all, `action`
    /// never runs (a leak rather than a release under pending work).
    pub(crate) fn release_after(
        &'static self,
        users: Vec<Arc<StreamInner<A>>>,
        action: DeferredAction,
    ) {
        // devstream's own calls: in Relaxed mode (see `Device::collect_pending`).
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        let mut events = Vec::with_capacity(users.len());
        let mut waiting = Vec::new();
        if self.bind().is_err() {
            std::mem::forget(action);
            return;
        }
        for user in users {
            match self.end_of_work(user.release_handle()) {
                EndOfWork::Recorded(event) => events.push(event),
                EndOfWork::Capturing => waiting.push(user),
                EndOfWork::Failed => {
                    for event in events {
                        // SAFETY: our event; destroying a recorded event is allowed.
                        let _ = unsafe { A::event_destroy(event) };
                    }
                    std::mem::forget(action);
                    return;
                }
            }
        }
        self.defer_entry(Deferred {
            events,
            waiting,
            action: Some(action),
        });
    }
}

/// The generic [`DeviceBackend`]: `CudaBackend = GpuBackend<CudaApi>`.
pub struct GpuBackend<A: RawApi>(PhantomData<A>);

impl<A: RawApi> fmt::Debug for GpuBackend<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GpuBackend<{}>", A::BACKEND)
    }
}

thread_local! {
    static PER_THREAD: RefCell<HashMap<(TypeId, usize), Box<dyn Any>>> = RefCell::new(HashMap::new());
}

impl<A: RawApi> DeviceBackend for GpuBackend<A> {
    type Stream = GpuStream<A>;
    const KIND: devstream_core::BackendKind = A::KIND;

    fn places() -> Vec<Place> {
        match Runtime::<A>::get() {
            Ok(runtime) => (0..runtime.device_count()).map(A::place).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn probe() -> Result<()> {
        Runtime::<A>::get().map(|_| ())
    }

    fn capabilities(place: &Place) -> Result<Capabilities> {
        Ok(device_of::<A>(place)?.caps)
    }

    fn priority_range(place: &Place) -> Result<PriorityRange> {
        Ok(device_of::<A>(place)?.range)
    }

    fn new_stream(place: &Place, options: StreamOptions) -> Result<GpuStream<A>> {
        GpuStream::create(device_of::<A>(place)?, options)
    }

    fn default_stream(place: &Place) -> Result<GpuStream<A>> {
        device_of::<A>(place)?.default_stream()
    }

    fn per_thread_stream(place: &Place) -> Result<GpuStream<A>> {
        let device = device_of::<A>(place)?;
        let key = (TypeId::of::<A>(), device.ordinal);
        let cached = PER_THREAD.with(|map| {
            map.borrow()
                .get(&key)
                .and_then(|s| s.downcast_ref::<GpuStream<A>>())
                .cloned()
        });
        if let Some(stream) = cached {
            return Ok(stream);
        }
        let stream = GpuStream::special(device, StreamKind::PerThread)?;
        PER_THREAD.with(|map| {
            map.borrow_mut().insert(key, Box::new(stream.clone()));
        });
        Ok(stream)
    }

    fn default_pool(place: &Place) -> Result<Arc<dyn DevicePool>> {
        let pool = crate::mempool::GpuMemoryPool::default_of(device_of::<A>(place)?)?;
        Ok(pool)
    }

    fn new_pool(place: &Place, options: PoolOptions) -> Result<Arc<dyn DevicePool>> {
        crate::mempool::GpuMemoryPool::create(device_of::<A>(place)?, options)
    }

    fn new_event(place: &Place, flags: EventFlags) -> Result<GpuEvent<A>> {
        GpuEvent::create(device_of::<A>(place)?, flags)
    }

    fn new_flag(place: &Place) -> Result<GpuFlag<A>> {
        GpuFlag::create(device_of::<A>(place)?)
    }

    fn live_counts() -> LiveCounts {
        let mut counts = LiveCounts::default();
        if let Some(runtime) = Runtime::<A>::loaded() {
            for device in runtime
                .devices
                .iter()
                .filter_map(|d| d.get()?.as_ref().ok())
            {
                counts.streams += device.live_streams.load(Ordering::Relaxed);
                counts.events += device.live_events.load(Ordering::Relaxed);
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_classes_of_sizes_no_host_has_do_not_overflow() {
        assert_eq!(pinned_class(0), Some(64));
        assert_eq!(pinned_class(65), Some(128));
        assert_eq!(pinned_class(1 << 63), Some(1 << 63));
        for len in [(1usize << 63) + 1, usize::MAX] {
            assert_eq!(pinned_class(len), None, "pinned_class({len})");
        }
    }
}
