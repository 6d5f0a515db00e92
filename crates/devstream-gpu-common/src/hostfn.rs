//! Host functions on streams: the panic-safe `extern "C"` trampolines, where a panic is kept
//! until the stream's next `synchronize`, and the objects a capture owns until its graph does.

use crate::raw::{RawApi, RawStream};
use devstream_core::foreign::ForeignOutcome;
use devstream_core::panic::{drop_contained, drop_payload, take_message};
use devstream_core::sync::lock;
use devstream_core::{Error, HostFn, Result};
use std::any::Any;
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};

#[cfg(all(loom, test))]
mod loom_tests;
mod sync;

thread_local! {
    /// Set while a runtime callback thread runs one of our trampolines.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
    /// The stream whose host function or callback runs, as [`stream_token`] of its panic slot
    /// (for a graph's host function, that of the launch running it; 0: none or not known).
    static RUNNING_STREAM: Cell<usize> = const { Cell::new(0) };
}

/// The token that names a stream while one of its host functions runs: the address of its
/// panic slot, which lives as long as the stream.
pub(crate) fn stream_token(slot: &Arc<PanicSlot>) -> usize {
    Arc::as_ptr(slot) as usize
}

/// [`stream_token`] of the stream whose host function the calling thread runs now, if known.
pub(crate) fn running_stream() -> Option<usize> {
    RUNNING_STREAM
        .try_with(Cell::get)
        .ok()
        .filter(|token| *token != 0)
}

/// Marks the current thread as inside a runtime callback (of the stream `token`, 0 if not
/// known) until dropped.
struct CallbackScope;

impl CallbackScope {
    fn enter(token: usize) -> CallbackScope {
        let _ = IN_CALLBACK.try_with(|c| c.set(true));
        let _ = RUNNING_STREAM.try_with(|c| c.set(token));
        CallbackScope
    }
}

impl Drop for CallbackScope {
    fn drop(&mut self) {
        let _ = IN_CALLBACK.try_with(|c| c.set(false));
        let _ = RUNNING_STREAM.try_with(|c| c.set(0));
    }
}

/// Marks the current thread as inside a runtime callback of no known stream until dropped (for
/// devstream's internal callbacks).
pub(crate) fn callback_scope() -> impl Drop {
    CallbackScope::enter(0)
}

/// Whether the calling thread is running one of devstream's host functions or stream
/// callbacks right now. There, a call that would wait for the stream (or for work queued after
/// the host function) can never return: it answers a typed error instead.
#[inline]
pub(crate) fn in_host_function() -> bool {
    IN_CALLBACK.try_with(Cell::get).unwrap_or(false)
}

type ReleaseJob = Box<dyn FnOnce() + Send>;

pub(crate) fn release_thread() -> Option<&'static Mutex<Sender<ReleaseJob>>> {
    static SENDER: OnceLock<Option<Mutex<Sender<ReleaseJob>>>> = OnceLock::new();
    SENDER
        .get_or_init(|| job_thread("devstream-release"))
        .as_ref()
}

/// The thread that runs devstream's synchronous frees (`Device::outside_captures`), apart from
/// the release thread: a synchronous free can wait for a long time (for all of its device's
/// queued work), and nothing else must queue behind it.
fn free_thread() -> Option<&'static Mutex<Sender<ReleaseJob>>> {
    static SENDER: OnceLock<Option<Mutex<Sender<ReleaseJob>>>> = OnceLock::new();
    SENDER.get_or_init(|| job_thread("devstream-free")).as_ref()
}

/// Runs `free` on devstream's free thread (see [`free_thread`]); where that thread cannot be
/// had, never (a leak, not a deadlock).
pub(crate) fn on_free_thread(free: impl FnOnce() + Send + 'static) {
    match free_thread().and_then(|tx| tx.lock().ok()) {
        Some(tx) => {
            if let Err(job) = tx.send(Box::new(free)) {
                std::mem::forget(job);
            }
        }
        None => std::mem::forget(free),
    }
}

/// A detached thread named `name` that runs the jobs sent to it, in order, each with its
/// panic contained.
fn job_thread(name: &str) -> Option<Mutex<Sender<ReleaseJob>>> {
    let (tx, rx) = channel::<ReleaseJob>();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for job in rx {
                if let Err(payload) = catch_unwind(AssertUnwindSafe(job)) {
                    drop_payload(payload);
                }
            }
        })
        .ok()
        .map(|_| Mutex::new(tx))
}

/// Runs a host function of the stream whose panic slot is `slot` on the calling thread, as its
/// runtime trampoline would: inside a callback scope of that stream (so that the calls it makes
/// follow the rules of a host function's), its panic kept for the stream's `synchronize`, the
/// closure dropped in the scope (a last handle it holds is released off this thread).
pub(crate) fn run_as_host_function(f: HostFn, slot: Arc<PanicSlot>) {
    let mut call = HostCall {
        f,
        sink: PanicSink::Stream(slot),
        report: None,
    };
    let _scope = CallbackScope::enter(call.sink.stream_token());
    run(&mut call);
    drop_contained(call);
}

/// Runs `release` (which makes runtime calls: destroy, free, query) now, or, when called on a
/// runtime callback thread — where CUDA and HIP forbid runtime calls, and a blocking one can
/// deadlock the process' callbacks — on devstream's release thread. That happens when a host
/// function's closure holds the last handle to a stream, event, buffer, flag or graph.
pub(crate) fn release_off_callback(release: impl FnOnce() + Send + 'static) {
    if !in_host_function() {
        release();
        return;
    }
    match release_thread().and_then(|tx| tx.lock().ok()) {
        Some(tx) => {
            if let Err(job) = tx.send(Box::new(release)) {
                // The release thread is gone: never release (a leak, not a deadlock).
                std::mem::forget(job);
            }
        }
        None => std::mem::forget(release),
    }
}

/// Where a stream keeps the first panic of its host functions until `synchronize` reports it.
///
/// `raised` mirrors "a message is kept" and changes only under the message's lock, so a
/// `raise` racing a `take` is either taken with it or kept (with its message) for the next.
/// Its types come from [`sync`] (loom's under `--cfg loom`: `hostfn/loom_tests.rs`).
/// It also keeps a typed error of stream work that devstream watches from the host (a
/// collective that failed: [`PanicSlot::fail`]), reported the same way.
#[derive(Debug, Default)]
pub(crate) struct PanicSlot {
    raised: sync::AtomicBool,
    message: sync::Mutex<Option<String>>,
    error: std::sync::Mutex<Option<Error>>,
}

impl PanicSlot {
    pub(crate) fn raise(&self, message: String) {
        let mut slot = sync::lock(&self.message);
        if slot.is_none() {
            *slot = Some(message);
        }
        self.raised.store(true, Ordering::Release);
    }

    /// Keeps `error` (the first one) for the stream's next `synchronize` (a collective's
    /// failure, the error of another backend's work the stream waited for).
    pub(crate) fn fail(&self, error: Error) {
        // Under the message lock, like `raise`, so that `raised` mirrors what is kept.
        let _message = sync::lock(&self.message);
        let mut slot = lock(&self.error);
        if slot.is_none() {
            *slot = Some(error);
        }
        self.raised.store(true, Ordering::Release);
    }

    /// The kept panic (or error), if any, as `take` would report it, leaving it kept.
    pub(crate) fn peek(&self, stream: u64) -> Result<()> {
        if !self.raised.load(Ordering::Acquire) {
            return Ok(());
        }
        let slot = sync::lock(&self.message);
        if let Some(error) = lock(&self.error).clone() {
            return Err(error);
        }
        match slot.as_ref() {
            Some(message) => Err(Error::HostFuncPanicked {
                stream,
                message: message.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Takes the kept panic, if any (one acquire load when there is none).
    #[inline]
    pub(crate) fn take(&self, stream: u64) -> Result<()> {
        if !self.raised.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut slot = sync::lock(&self.message);
        self.raised.store(false, Ordering::Release);
        if let Some(error) = lock(&self.error).take() {
            if slot.is_some() {
                // A panic kept too: report it next time.
                self.raised.store(true, Ordering::Release);
            }
            return Err(error);
        }
        match slot.take() {
            Some(message) => Err(Error::HostFuncPanicked { stream, message }),
            // A concurrent `take` reported it.
            None => Ok(()),
        }
    }
}

/// The panic targets of the host functions captured into one graph.
///
/// The runtime runs launches of one executable graph one after another, in launch order, and
/// each launch runs each host-function node once. So the launches not finished yet are a queue
/// (filled by `launch`, in order, under the graph's launch lock), and the front launch is done
/// with host functions after `per_launch` calls: a panic goes to the stream of the launch it
/// belongs to, whatever was launched after it.
#[derive(Debug)]
pub(crate) struct GraphHostState {
    /// The panic slot of each launch not finished yet, in launch order.
    launches: Mutex<VecDeque<Arc<PanicSlot>>>,
    /// Host-function nodes of the graph (set when it is instantiated).
    per_launch: AtomicUsize,
    /// Host-function calls of the front launch so far.
    calls: AtomicUsize,
    /// Where a panic goes when no launch is queued (never expected).
    fallback: Arc<PanicSlot>,
}

impl GraphHostState {
    fn new(fallback: Arc<PanicSlot>) -> Self {
        GraphHostState {
            launches: Mutex::new(VecDeque::new()),
            per_launch: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            fallback,
        }
    }

    /// The graph was instantiated with `count` host-function nodes.
    pub(crate) fn set_per_launch(&self, count: usize) {
        self.per_launch.store(count, Ordering::Release);
    }

    /// A launch on the stream owning `panic` is about to be submitted (under the graph's launch
    /// lock, so queue order is launch order).
    pub(crate) fn push_launch(&self, panic: Arc<PanicSlot>) {
        lock(&self.launches).push_back(panic);
    }

    /// The launch just pushed was refused by the runtime.
    pub(crate) fn cancel_launch(&self) {
        lock(&self.launches).pop_back();
    }

    /// The panic slot of the launch running now (the front one).
    fn front(&self) -> Arc<PanicSlot> {
        let target = lock(&self.launches).front().cloned();
        target.unwrap_or_else(|| self.fallback.clone())
    }

    fn raise(&self, message: String) {
        self.front().raise(message);
    }

    /// [`stream_token`] of the stream of the launch running now (the front one; 0 if none).
    fn front_token(&self) -> usize {
        lock(&self.launches).front().map_or(0, stream_token)
    }

    /// One host function of the front launch returned.
    fn call_done(&self) {
        let per_launch = self.per_launch.load(Ordering::Acquire);
        if per_launch == 0 {
            return;
        }
        if self.calls.fetch_add(1, Ordering::AcqRel) + 1 >= per_launch {
            self.calls.store(0, Ordering::Release);
            let done = lock(&self.launches).pop_front();
            // Dropped outside the lock.
            drop(done);
        }
    }
}

/// What a graph definition (`GpuGraphDef`) owns for the graphs instantiated from it: the
/// objects used by work captured into it (every later capture's graph contains that work too),
/// and whether it holds a host function (whose closure one graph alone may call).
#[derive(Default)]
pub(crate) struct DefShared {
    state: Mutex<DefState>,
}

#[derive(Default)]
struct DefState {
    /// Captures appending to the definition now.
    active: usize,
    host_functions: bool,
    keep: Vec<Box<dyn Any + Send + Sync>>,
}

impl Drop for DefState {
    fn drop(&mut self) {
        for item in self.keep.drain(..) {
            drop_contained(item);
        }
    }
}

impl DefShared {
    /// A capture into the definition begins: refused once it holds a host function (a second
    /// graph would call the first graph's closure, possibly at the same time). An executable
    /// graph is a snapshot: graphs made before a capture never contain its nodes.
    pub(crate) fn begin_capture(&self) -> Result<()> {
        let mut state = lock(&self.state);
        if state.host_functions {
            return Err(Error::capture(
                "begin_capture_to_graph",
                "the graph definition holds a host function captured earlier; a second graph \
                 from it would share that closure (capture into a new definition)",
            ));
        }
        state.active += 1;
        Ok(())
    }

    /// A capture that began with [`DefShared::begin_capture`] ended (or could not start).
    pub(crate) fn end_capture(&self) {
        let mut state = lock(&self.state);
        state.active = state.active.saturating_sub(1);
    }

    /// A host function is captured into the definition: allowed (`true`) only while no other
    /// capture appends to it (its closure then belongs to this capture's graph alone: no
    /// capture can begin after it, see [`DefShared::begin_capture`]).
    pub(crate) fn add_host_function(&self) -> bool {
        let mut state = lock(&self.state);
        if state.active > 1 {
            return false;
        }
        state.host_functions = true;
        true
    }

    /// Takes ownership of objects captured work uses.
    pub(crate) fn keep(&self, items: impl IntoIterator<Item = Box<dyn Any + Send + Sync>>) {
        lock(&self.state).keep.extend(items);
    }
}

pub(crate) enum PanicSink {
    Stream(Arc<PanicSlot>),
    Graph(Arc<GraphHostState>),
}

impl PanicSink {
    /// [`stream_token`] of the stream a host function of this sink runs on: for a graph's, the
    /// stream of the launch running now (launches of one graph run one after another).
    fn stream_token(&self) -> usize {
        match self {
            PanicSink::Stream(slot) => stream_token(slot),
            PanicSink::Graph(state) => state.front_token(),
        }
    }

    fn raise(&self, message: String) {
        match self {
            PanicSink::Stream(slot) => slot.raise(message),
            PanicSink::Graph(state) => state.raise(message),
        }
    }

    fn fail(&self, error: Error) {
        match self {
            PanicSink::Stream(slot) => slot.fail(error),
            PanicSink::Graph(state) => state.front().fail(error),
        }
    }
}

pub(crate) struct HostCall {
    pub(crate) f: HostFn,
    pub(crate) sink: PanicSink,
    /// The awaited work of a captured wait across backends: each run reports its error to the
    /// sink (the stream of the launch), after `f`.
    pub(crate) report: Option<Arc<ForeignOutcome>>,
}

fn run(call: &mut HostCall) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (call.f)())) {
        call.sink.raise(take_message(payload));
    }
    if let Some(Err(error)) = call.report.as_ref().map(|outcome| outcome.result()) {
        call.sink.fail(error);
    }
}

/// Trampoline of a host function submitted once: runs it and frees it.
///
/// # Safety
/// `data` is a pointer from `Box::into_raw(Box<HostCall>)`, passed to exactly one launch.
pub(crate) unsafe extern "C" fn host_once(data: *mut c_void) {
    // SAFETY: per this function's contract, `data` owns a HostCall and is used once.
    let mut call = unsafe { Box::from_raw(data.cast::<HostCall>()) };
    let _scope = CallbackScope::enter(call.sink.stream_token());
    run(&mut call);
    // A closure whose drop panics must not unwind into the runtime either.
    drop_contained(call);
}

/// Trampoline of a host function captured into a graph: runs it, leaves it owned by the graph.
///
/// # Safety
/// `data` points to a HostCall that outlives every launch of the graph, and launches of one
/// graph never run concurrently (the runtime orders them).
pub(crate) unsafe extern "C" fn host_in_graph(data: *mut c_void) {
    // SAFETY: per this function's contract the HostCall is alive and not aliased mutably.
    let call = unsafe { &mut *data.cast::<HostCall>() };
    // The stream of the launch that runs it now.
    let _scope = CallbackScope::enter(call.sink.stream_token());
    run(call);
    if let PanicSink::Graph(state) = &call.sink {
        state.call_done();
    }
}

/// Host-function slots per ring: how many host functions of one stream can be in flight before
/// a launch falls back to allocating. (Two under loom, so its models reach a full ring and
/// reuse every slot.)
pub(crate) const HOST_SLOTS: usize = if cfg!(loom) { 2 } else { 16 };

/// One reusable host-function slot, on its own cache line. The handshake's types come from
/// [`sync`] (loom's under `--cfg loom`: `hostfn/loom_tests.rs`).
#[repr(align(64))]
struct HostSlot {
    /// Set by the launcher that fills the slot, cleared by the trampoline once done with it.
    busy: sync::AtomicBool,
    f: sync::UnsafeCell<Option<HostFn>>,
    /// The ring this slot belongs to (for the panic sink).
    ring: *const HostRing,
}

/// Per-stream slots for host functions launched outside a capture, so that the common launch
/// allocates nothing and shares no reference count with the runtime's callback thread: the
/// launcher claims a free slot, the trampoline runs and drops the closure, then frees the slot.
/// The ring lives until the stream's queued host functions have run (see [`HostRing::retire`]).
pub(crate) struct HostRing {
    slots: [HostSlot; HOST_SLOTS],
    next: sync::AtomicUsize,
    panic: Arc<PanicSlot>,
}

/// Owning pointer to a [`HostRing`] (released with [`HostRing::retire`]).
pub(crate) struct HostRingPtr(*mut HostRing);

// SAFETY: the ring's slots are handed between threads through their `busy` flags (acquire /
// release); everything else in it is immutable or atomic.
unsafe impl Send for HostRingPtr {}
// SAFETY: as above.
unsafe impl Sync for HostRingPtr {}

/// A claimed slot: fill it with [`ClaimedSlot::launch_data`], or drop it to give it back.
pub(crate) struct ClaimedSlot<'a> {
    slot: &'a HostSlot,
    launched: bool,
}

impl HostRingPtr {
    /// A new ring whose host functions report panics to `panic`.
    pub(crate) fn new(panic: Arc<PanicSlot>) -> HostRingPtr {
        let ring = Box::into_raw(Box::new(HostRing {
            slots: std::array::from_fn(|_| HostSlot {
                busy: sync::AtomicBool::new(false),
                f: sync::UnsafeCell::new(None),
                ring: std::ptr::null(),
            }),
            next: sync::AtomicUsize::new(0),
            panic,
        }));
        // SAFETY: `ring` was just allocated and is not shared yet.
        unsafe {
            for slot in &mut (*ring).slots {
                slot.ring = ring;
            }
        }
        HostRingPtr(ring)
    }

    fn ring(&self) -> &HostRing {
        // SAFETY: the ring lives until `retire`, which consumes the pointer.
        unsafe { &*self.0 }
    }

    /// Claims a free slot (`None` when all are in flight).
    #[inline]
    pub(crate) fn claim(&self) -> Option<ClaimedSlot<'_>> {
        let ring = self.ring();
        let start = ring.next.fetch_add(1, Ordering::Relaxed);
        (0..HOST_SLOTS).find_map(|i| {
            let slot = &ring.slots[(start + i) % HOST_SLOTS];
            slot.busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
                // Lazily: a ClaimedSlot frees its slot on drop, so one must exist only for a
                // slot this call actually claimed.
                .then(|| ClaimedSlot {
                    slot,
                    launched: false,
                })
        })
    }

    /// Whether a launched host function still holds a slot.
    pub(crate) fn in_flight(&self) -> bool {
        self.ring()
            .slots
            .iter()
            .any(|slot| slot.busy.load(Ordering::Acquire))
    }

    /// Frees the ring. The caller has established that no slot is in flight (none was, or the
    /// stream's queued host functions have all returned).
    pub(crate) fn retire(self) {
        // SAFETY: allocated by `new`; no launch references it any more (caller's contract).
        drop(unsafe { Box::from_raw(self.0) });
    }
}

impl ClaimedSlot<'_> {
    /// Stores `f` and returns the `data` pointer for [`host_slot`]. After a successful launch
    /// call [`ClaimedSlot::launched`]; otherwise dropping the claim drops `f` and frees the slot.
    pub(crate) fn launch_data(&mut self, f: HostFn) -> *mut c_void {
        self.slot.f.with_mut(|slot_f| {
            // SAFETY: the slot is claimed (busy) by us; the trampoline has not been given it.
            unsafe { *slot_f = Some(f) }
        });
        std::ptr::from_ref(self.slot).cast_mut().cast()
    }

    /// The runtime accepted the launch: the trampoline now owns the slot.
    pub(crate) fn launched(mut self) {
        self.launched = true;
    }
}

impl Drop for ClaimedSlot<'_> {
    fn drop(&mut self) {
        if !self.launched {
            let f = self.slot.f.with_mut(|f| {
                // SAFETY: still claimed by us (the launch failed or never happened).
                unsafe { (*f).take() }
            });
            drop_contained(f);
            self.slot.busy.store(false, Ordering::Release);
        }
    }
}

/// Trampoline of a host function launched through a [`HostRing`] slot: runs it, drops it, and
/// frees the slot.
///
/// # Safety
/// `data` is a claimed slot filled by [`ClaimedSlot::launch_data`], passed to exactly one
/// launch, and its ring outlives the call.
pub(crate) unsafe extern "C" fn host_slot(data: *mut c_void) {
    // SAFETY: per this function's contract.
    let slot = unsafe { &*data.cast::<HostSlot>() };
    // SAFETY: the ring outlives the call (contract).
    let _scope = CallbackScope::enter(stream_token(&unsafe { &*slot.ring }.panic));
    let f = slot.f.with_mut(|f| {
        // SAFETY: the slot is busy and its launch is ours: no one else touches `f` now.
        unsafe { (*f).take() }
    });
    if let Some(mut f) = f {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(&mut f)) {
            // SAFETY: the ring outlives the call (contract).
            unsafe { &*slot.ring }.panic.raise(take_message(payload));
        }
        drop_contained(f);
    }
    // Last touch of the slot: after this the launcher may reuse it.
    slot.busy.store(false, Ordering::Release);
}

/// A host function whose memory a graph owns (freed when the graph is released).
pub(crate) struct OwnedHostCall(pub(crate) *mut HostCall);

// SAFETY: the HostCall holds a `Send` closure and `Send + Sync` sinks; the raw pointer is only
// dereferenced by the runtime's host thread during launches and freed on drop.
unsafe impl Send for OwnedHostCall {}
// SAFETY: no `&self` method touches the pointee.
unsafe impl Sync for OwnedHostCall {}

impl Drop for OwnedHostCall {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::into_raw and no launch can run any more (the owner
        // releases it only after the graph's last launch completed, or when the capture failed).
        let call = unsafe { Box::from_raw(self.0) };
        drop_contained(call);
    }
}

/// What a capture sequence owns until `end_capture` gives it to the graph: host functions
/// captured into it and buffers its work uses.
pub(crate) struct CaptureOwned {
    pub(crate) host_state: Arc<GraphHostState>,
    pub(crate) keep: Vec<Box<dyn Any + Send + Sync>>,
    /// The definition the capture appends to (`begin_capture_to_graph`), if any.
    pub(crate) def: Option<Arc<DefShared>>,
    /// The capture's private memory pool (`crate::graph_memory`), made by its first allocation.
    pub(crate) memory: Option<Box<dyn Any + Send + Sync>>,
}

impl CaptureOwned {
    pub(crate) fn new(target: Arc<PanicSlot>) -> Self {
        CaptureOwned {
            host_state: Arc::new(GraphHostState::new(target)),
            keep: Vec::new(),
            def: None,
            memory: None,
        }
    }

    /// Splits what the capture owns between the graph made from it and its definition: the
    /// definition keeps the objects the captured work uses (every graph later made from it
    /// contains that work); host functions stay with this capture's graph.
    /// Called once the capture has ended (a second call does nothing).
    pub(crate) fn settle(mut self) -> Self {
        if let Some(def) = self.def.take() {
            let (host, other): (Vec<_>, Vec<_>) = std::mem::take(&mut self.keep)
                .into_iter()
                .partition(|k| k.is::<OwnedHostCall>());
            def.keep(other);
            def.end_capture();
            self.keep = host;
        }
        self
    }
}

/// The callback of `add_callback`: receives the stream's status.
pub(crate) struct StreamCallbackCall<A: RawApi> {
    pub(crate) f: Box<dyn FnOnce(Result<()>) + Send>,
    pub(crate) sink: Arc<PanicSlot>,
    pub(crate) _api: std::marker::PhantomData<A>,
}

/// Trampoline of `cuStreamAddCallback`.
///
/// # Safety
/// `data` comes from `Box::into_raw(Box<StreamCallbackCall<A>>)` and is used once.
pub(crate) unsafe extern "C" fn stream_callback<A: RawApi>(
    _stream: RawStream,
    status: i32,
    data: *mut c_void,
) {
    // SAFETY: per this function's contract.
    let call = unsafe { Box::from_raw(data.cast::<StreamCallbackCall<A>>()) };
    let _scope = CallbackScope::enter(stream_token(&call.sink));
    let StreamCallbackCall { f, sink, .. } = *call;
    let result = if status == 0 {
        Ok(())
    } else {
        Err(crate::error::map_error::<A>(crate::raw::RawError {
            code: status,
            call: "stream callback status",
        }))
    };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || f(result))) {
        sink.raise(take_message(payload));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32};

    /// Runs the trampoline as the runtime's callback thread would.
    fn run_on_callback_thread(data: *mut c_void) {
        let data = data as usize;
        std::thread::spawn(move || {
            // SAFETY: `data` is a filled, claimed slot of a live ring, used once.
            unsafe { host_slot(data as *mut c_void) }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_slot_runs_its_function_once_then_is_free_again() {
        let ring = HostRingPtr::new(Arc::new(PanicSlot::default()));
        let count = Arc::new(AtomicU32::new(0));
        for _ in 0..3 * HOST_SLOTS {
            let mut slot = ring.claim().expect("a free slot");
            let c = count.clone();
            let data = slot.launch_data(Box::new(move || {
                c.fetch_add(1, Ordering::Relaxed);
            }));
            slot.launched();
            run_on_callback_thread(data);
        }
        assert_eq!(count.load(Ordering::Relaxed), 3 * HOST_SLOTS as u32);
        assert!(!ring.in_flight());
        ring.retire();
    }

    #[test]
    fn claims_run_out_while_every_slot_is_in_flight() {
        let ring = HostRingPtr::new(Arc::new(PanicSlot::default()));
        let mut pending = Vec::new();
        for _ in 0..HOST_SLOTS {
            let mut slot = ring.claim().expect("a free slot");
            pending.push(slot.launch_data(Box::new(|| {})) as usize);
            slot.launched();
        }
        assert!(
            ring.claim().is_none(),
            "all {HOST_SLOTS} slots are in flight"
        );
        assert!(ring.in_flight());
        run_on_callback_thread(pending.pop().unwrap() as *mut c_void);
        let slot = ring.claim().expect("the slot just run is free again");
        drop(slot);
        for data in pending {
            run_on_callback_thread(data as *mut c_void);
        }
        assert!(!ring.in_flight());
        ring.retire();
    }

    #[test]
    fn a_failed_launch_drops_the_function_unrun_and_frees_the_slot() {
        let ring = HostRingPtr::new(Arc::new(PanicSlot::default()));
        let ran = Arc::new(AtomicBool::new(false));
        let token = Arc::new(());
        {
            let mut slot = ring.claim().unwrap();
            let (r, t) = (ran.clone(), token.clone());
            slot.launch_data(Box::new(move || {
                let _ = &t;
                r.store(true, Ordering::Relaxed);
            }));
            // No `launched()`: the launch "failed".
        }
        assert!(!ran.load(Ordering::Relaxed));
        assert_eq!(Arc::strong_count(&token), 1, "the closure was dropped");
        assert!(!ring.in_flight());
        ring.retire();
    }

    /// `raise` racing `take`: a panic is reported with its message or coalesced into the one
    /// being taken, never reported later without its message.
    #[test]
    fn a_panic_raised_while_the_slot_is_taken_keeps_its_message() {
        use std::sync::Barrier;
        // Under Miri (`cargo xtask miri gpu-common`) fewer rounds: each is a few thousand
        // interpreted steps, and Miri's scheduler varies the interleaving between them.
        const ROUNDS: usize = if cfg!(miri) { 200 } else { 200_000 };
        let slot = Arc::new(PanicSlot::default());
        let barrier = Arc::new(Barrier::new(2));
        let (s, b) = (slot.clone(), barrier.clone());
        let raiser = std::thread::spawn(move || {
            for _ in 0..ROUNDS {
                b.wait();
                s.raise("second".into());
                b.wait();
            }
        });
        for round in 0..ROUNDS {
            slot.raise("first".into());
            barrier.wait();
            let first = slot.take(1);
            barrier.wait();
            let later = slot.take(1);
            match first {
                Err(Error::HostFuncPanicked { message, .. }) => {
                    assert!(message == "first" || message == "second", "{message}")
                }
                other => panic!("round {round}: the first panic was lost: {other:?}"),
            }
            if let Err(Error::HostFuncPanicked { message, .. }) = &later {
                assert_eq!(
                    message, "second",
                    "round {round}: a panic was reported without its message"
                );
            }
        }
        raiser.join().unwrap();
    }

    #[test]
    fn a_panicking_function_is_reported_to_the_stream_and_frees_its_slot() {
        let panic = Arc::new(PanicSlot::default());
        let ring = HostRingPtr::new(panic.clone());
        let mut slot = ring.claim().unwrap();
        let data = slot.launch_data(Box::new(|| panic!("boom in a host function")));
        slot.launched();
        run_on_callback_thread(data);
        assert!(!ring.in_flight());
        match panic.take(7) {
            Err(Error::HostFuncPanicked { stream: 7, message }) => {
                assert!(message.contains("boom"), "{message}")
            }
            other => panic!("expected the kept panic, got {other:?}"),
        }
        assert!(panic.take(7).is_ok(), "reported once");
        ring.retire();
    }
}
