//! What devstream keeps on the host for each plug-in stream.
//!
//! * **Submission order.** Every operation on a stream goes through [`StreamCore::submit`],
//!   under a per-stream re-entrant lock (re-entrant because a synchronous plug-in may run a host
//!   callback inside `stream_add_callback`, and that callback may submit to the same stream).
//! * **Host-side gating.** The ABI has no "wait for a value" primitive, and blocking a plug-in's
//!   stream inside a callback until a host flag is set could stall a plug-in that runs every
//!   callback on one worker thread. So `wait_flag` is done on the host: the stream's later
//!   operations are *deferred* (kept here, not submitted) until the flag's value is reached.
//!   A wait on an event whose record is itself still deferred is deferred the same way. The
//!   dispatcher thread submits deferred operations when flags change; the plug-in's worker is
//!   never blocked by devstream.
//! * **Events per record.** Each record creates a fresh plug-in event ([`RawEvent`]); a
//!   devstream event points at its latest one. A wait keeps the raw event it was given, so
//!   re-recording never changes what earlier waits wait for.
//! * **Deferred destruction.** Plug-in streams, events and memory are released by the reaper
//!   thread once the work that uses them is complete, so dropping a handle never blocks and
//!   devstream never calls the plug-in from inside one of its callbacks.

use crate::capture::Capturing;
use crate::runtime::{Handle, Runtime};
use crate::sys::{C_Device, C_Status, C_Stream, C_SUCCESS};
use devstream_core::elide::{Mark, WaitTracker};
use devstream_core::panic::{self, drop_contained, drop_payload};
use devstream_core::{Error, Place, Result};
use std::any::Any;
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::ThreadId;
use std::time::Duration;

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Live user-created streams and events of plug-ins (for `live_counts`).
pub(crate) static LIVE_STREAMS: AtomicUsize = AtomicUsize::new(0);
/// See [`LIVE_STREAMS`].
pub(crate) static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);

/// A lock the holding thread may take again.
struct ReentrantLock {
    owner: Mutex<(Option<ThreadId>, usize)>,
    released: Condvar,
}

struct ReentrantGuard<'a>(&'a ReentrantLock);

impl ReentrantLock {
    fn new() -> Self {
        ReentrantLock {
            owner: Mutex::new((None, 0)),
            released: Condvar::new(),
        }
    }

    fn lock(&self) -> ReentrantGuard<'_> {
        let me = std::thread::current().id();
        let mut owner = lock(&self.owner);
        loop {
            match owner.0 {
                None => {
                    *owner = (Some(me), 1);
                    break;
                }
                Some(holder) if holder == me => {
                    owner.1 += 1;
                    break;
                }
                Some(_) => owner = wait(&self.released, owner),
            }
        }
        ReentrantGuard(self)
    }
}

impl Drop for ReentrantGuard<'_> {
    fn drop(&mut self) {
        let mut owner = lock(&self.0.owner);
        owner.1 -= 1;
        if owner.1 == 0 {
            owner.0 = None;
            self.0.released.notify_one();
        }
    }
}

/// A host-visible 32-bit value (the plug-in place's `Flag`).
#[derive(Debug)]
pub(crate) struct HostFlag {
    pub(crate) id: u64,
    pub(crate) place: Place,
    value: AtomicU32,
    /// Wakes threads in [`HostFlag::wait_until`].
    waiters: Mutex<usize>,
    changed: Condvar,
}

impl HostFlag {
    pub(crate) fn new(place: Place) -> HostFlag {
        HostFlag {
            id: devstream_core::next_id(),
            place,
            value: AtomicU32::new(0),
            waiters: Mutex::new(0),
            changed: Condvar::new(),
        }
    }

    pub(crate) fn get(&self) -> u32 {
        self.value.load(Ordering::SeqCst)
    }

    /// Stores the value and lets deferred work that waits for it proceed.
    pub(crate) fn set(&self, value: u32) {
        self.value.store(value, Ordering::SeqCst);
        if BLOCKED_COUNT.load(Ordering::SeqCst) > 0 {
            wake_dispatcher();
        }
        let waiters = lock(&self.waiters);
        if *waiters > 0 {
            self.changed.notify_all();
        }
    }

    /// Blocks the calling thread until the value is at least `value` (inside a plug-in
    /// callback: see [`Callback::BlockUntil`]).
    pub(crate) fn wait_until(&self, value: u32) {
        let mut waiters = lock(&self.waiters);
        *waiters += 1;
        while self.get() < value {
            waiters = wait(&self.changed, waiters);
        }
        *waiters -= 1;
    }
}

/// Where a [`RawEvent`]'s record stands.
#[derive(Clone, Debug)]
enum RecordState {
    /// Not yet handed to the plug-in (held on the host behind a flag or an event).
    Pending,
    /// `record_event` succeeded as the stream's `seq`-th submission.
    Recorded { seq: u64 },
    /// `record_event` failed: what the event stood for cannot be known.
    Lost(Error),
}

/// A plug-in event recorded once, at one point of one stream.
pub(crate) struct RawEvent {
    runtime: Arc<Runtime>,
    slot: usize,
    handle: Handle,
    /// The devstream stream it is recorded on.
    stream: u64,
    /// The plug-in queue of that stream (see [`PluginQueue`]).
    pub(crate) queue: u64,
    /// That stream's host side (for a host function's check of what a wait would wait for).
    origin: Weak<StreamCore>,
    state: Mutex<RecordState>,
    state_changed: Condvar,
    /// Known complete (so that nobody asks the plug-in again).
    complete: AtomicBool,
    /// Its position in the recording stream's plug-in queue when the record can be trusted for
    /// redundant-wait elision (0: it cannot, or not recorded yet); set once, by `record_into`.
    pos: AtomicU64,
    /// The capture its record went into (its id; 0: none). Such an event stands for no work
    /// of its own: the plug-in answers any question about it with an error that may
    /// invalidate the capture (CUDA: `CUDA_ERROR_CAPTURED_EVENT` while it lasts, an invalid
    /// value after), so devstream's own bookkeeping never asks.
    captured: AtomicU64,
}

impl std::fmt::Debug for RawEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawEvent")
            .field("handle", &self.handle)
            .field("state", &*lock(&self.state))
            .finish()
    }
}

/// What the reaper may conclude about an event.
enum Settled {
    Complete,
    NotYet,
    /// Its record failed: nobody can tell when the work it stood for is done.
    Unknown,
}

impl RawEvent {
    /// Where this record sits for redundant-wait elision ([`Mark::NONE`] when it cannot be
    /// trusted or is not recorded yet).
    pub(crate) fn mark(&self) -> Mark {
        match self.pos.load(Ordering::Acquire) {
            0 => Mark::NONE,
            pos => Mark {
                stream: self.stream,
                pos,
            },
        }
    }

    /// The plug-in's handle (possibly null).
    pub(crate) fn handle(&self) -> Handle {
        self.handle
    }

    /// The index of the plug-in runtime it belongs to.
    pub(crate) fn runtime_index(&self) -> usize {
        self.runtime.index()
    }

    /// Known complete.
    pub(crate) fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// The capture the event was recorded into, if any (see the field).
    fn captured_in(&self) -> Option<u64> {
        match self.captured.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Whether asking the plug-in about this event now may break a capture (see
    /// [`question_breaks_a_capture`]).
    fn question_breaks_a_capture(&self) -> bool {
        question_breaks_a_capture(&self.runtime, &self.origin, self.captured_in())
    }

    /// Whether the record reached the plug-in (or failed): false while it is held on the host.
    pub(crate) fn is_submitted(&self) -> bool {
        !matches!(*lock(&self.state), RecordState::Pending)
    }

    fn set_state(&self, state: RecordState) {
        *lock(&self.state) = state;
        self.state_changed.notify_all();
    }

    fn wait_submitted(&self) -> RecordState {
        let mut state = lock(&self.state);
        while matches!(*state, RecordState::Pending) {
            state = wait(&self.state_changed, state);
        }
        state.clone()
    }

    /// Inside a host function of this event's plug-in queue: `Some(true)` when the event precedes
    /// that host function (so it is complete), `Some(false)` when it follows it (waiting for
    /// it would wait for the host function itself); `None` elsewhere.
    fn before_running_host_fn(&self) -> Option<bool> {
        let (queue, host_fn_seq) = running_host_fn()?;
        if queue != self.queue {
            return None;
        }
        Some(matches!(*lock(&self.state), RecordState::Recorded { seq } if seq < host_fn_seq))
    }

    /// Inside a host function of another stream: whether this event's work could wait for
    /// work queued after that host function.
    fn waits_for_running_host_fn(&self) -> bool {
        if running_host_fn().is_none() {
            return false;
        }
        let limit = match &*lock(&self.state) {
            RecordState::Pending => u64::MAX,
            RecordState::Recorded { seq } => *seq,
            RecordState::Lost(_) => return false,
        };
        self.origin
            .upgrade()
            .is_some_and(|origin| host_fn_would_wait_for_itself(&origin, limit))
    }

    /// `true` when the recorded work is complete.
    pub(crate) fn query(&self) -> Result<bool> {
        if self.complete.load(Ordering::Acquire) {
            return Ok(true);
        }
        if let Some(before) = self.before_running_host_fn() {
            return Ok(before);
        }
        if self.runtime.table().query_event.is_none() && self.waits_for_running_host_fn() {
            // Without query_event the answer would come from synchronize_event, waiting for
            // the calling host function: the event is not complete.
            return Ok(false);
        }
        match &*lock(&self.state) {
            RecordState::Pending => return Ok(false),
            RecordState::Lost(error) => return Err(error.clone()),
            RecordState::Recorded { .. } => {}
        }
        let done = self.runtime.query_event(self.slot, self.handle)?;
        if done {
            self.complete.store(true, Ordering::Release);
        }
        Ok(done)
    }

    /// Blocks until the recorded work is complete. Inside a host function of the same stream
    /// it never waits for work queued after that host function: that is a typed error.
    pub(crate) fn synchronize(&self) -> Result<()> {
        if self.complete.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.before_running_host_fn() {
            Some(true) => return Ok(()),
            Some(false) => return Err(waits_for_itself("Event::synchronize", self.stream)),
            None => {
                if self.waits_for_running_host_fn() {
                    return Err(waits_for_itself("Event::synchronize", self.stream));
                }
            }
        }
        match self.wait_submitted() {
            RecordState::Lost(error) => Err(error),
            _ => {
                self.runtime.synchronize_event(self.slot, self.handle)?;
                self.complete.store(true, Ordering::Release);
                Ok(())
            }
        }
    }

    /// For the completion notifier: `Some(result)` once the recorded work is complete (or its
    /// record failed), `None` while it is not (or cannot be asked now). Never blocks where the
    /// plug-in has `query_event`.
    pub(crate) fn settle(&self) -> Option<Result<()>> {
        if self.complete.load(Ordering::Acquire) {
            return Some(Ok(()));
        }
        match &*lock(&self.state) {
            RecordState::Pending => return None,
            RecordState::Lost(error) => return Some(Err(error.clone())),
            RecordState::Recorded { .. } => {}
        }
        // As the reaper: no capture begins between the check and the question (only where
        // the question cannot block: a capture must never wait for stream work).
        let _gate = self
            .runtime
            .table()
            .query_event
            .is_some()
            .then(crate::capture::reaping);
        if self.question_breaks_a_capture() {
            // A question now may invalidate a capture in progress: ask again after it.
            return None;
        }
        if self.captured_in().is_some() {
            // Recorded into a capture that has ended: it stands for no work of its own.
            return Some(Ok(()));
        }
        match self.runtime.query_event(self.slot, self.handle) {
            Ok(true) => {
                self.complete.store(true, Ordering::Release);
                Some(Ok(()))
            }
            Ok(false) => None,
            Err(error) => Some(Err(error)),
        }
    }

    /// Complete, without blocking where the plug-in can answer without blocking.
    fn settled_for_reaper(&self) -> Settled {
        if self.complete.load(Ordering::Acquire) {
            return Settled::Complete;
        }
        if self.question_breaks_a_capture() {
            return Settled::NotYet;
        }
        if self.captured_in().is_some() {
            // Recorded into a capture that has ended: it stands for no work of its own (what
            // the capture holds is kept by the graph); never asked about.
            return Settled::Complete;
        }
        match &*lock(&self.state) {
            RecordState::Pending => return Settled::NotYet,
            RecordState::Lost(_) => return Settled::Unknown,
            RecordState::Recorded { .. } => {}
        }
        let done = if self.runtime.table().query_event.is_some() {
            self.runtime.query_event(self.slot, self.handle)
        } else {
            self.runtime
                .synchronize_event(self.slot, self.handle)
                .map(|()| true)
        };
        match done {
            Ok(true) => {
                self.complete.store(true, Ordering::Release);
                Settled::Complete
            }
            Ok(false) => Settled::NotYet,
            Err(error) => {
                tracing::warn!("devstream-plugin: asking whether an event is complete: {error}");
                Settled::Unknown
            }
        }
    }
}

/// The typed error for a wait, from inside a host function, on its own stream's later work.
pub(crate) fn waits_for_itself(op: &'static str, stream: u64) -> Error {
    Error::WouldDeadlock {
        op,
        reason: format!(
            "plug-in stream {stream} would wait, directly or through other streams, for work \
             queued after that host function on its plug-in queue (which cannot run before it \
             returns)"
        ),
    }
}

/// Whether a question about an event (query, synchronize) from a thread that captures
/// nothing may break a capture in progress, by CUDA's rules, which a plug-in's runtime may
/// enforce by refusing the question and invalidating the capture:
/// * the event was recorded into a capture that is still in progress
///   (`CUDA_ERROR_CAPTURED_EVENT`);
/// * the stream it was recorded on is capturing now (also `CUDA_ERROR_CAPTURED_EVENT`: seen on
///   an H100 for the marker recorded just before a capture began);
/// * a `Global`-mode capture is in progress anywhere ([`crate::capture::forbids_other_threads`]).
///
/// Cheap while no capture is in progress.
fn question_breaks_a_capture(
    runtime: &Runtime,
    origin: &Weak<StreamCore>,
    captured: Option<u64>,
) -> bool {
    if !crate::capture::any_active(runtime.index()) {
        return crate::capture::forbids_other_threads();
    }
    if captured.is_some_and(|id| crate::capture::find(runtime.index(), id).is_some()) {
        return true;
    }
    if crate::capture::forbids_other_threads() {
        return true;
    }
    origin
        .upgrade()
        .is_some_and(|core| !matches!(crate::capture::capturing(&core), Ok(Capturing::No)))
}

impl Drop for RawEvent {
    fn drop(&mut self) {
        let recorded = matches!(*lock(&self.state), RecordState::Recorded { .. })
            && !self.complete.load(Ordering::Acquire);
        reap(Job::DestroyEvent {
            runtime: self.runtime.clone(),
            slot: self.slot,
            handle: self.handle,
            submitted: recorded,
            origin: self.origin.clone(),
            captured: self.captured_in(),
        });
    }
}

thread_local! {
    /// The host function running on this thread: (its plug-in queue, its position there, its
    /// devstream stream).
    static HOST_FN: Cell<Option<(u64, u64, u64)>> = const { Cell::new(None) };
}

/// One queue of the plug-in, as far as devstream can tell: a plug-in stream handle of one
/// device. Devstream streams over the same handle (adopted ones, or every stream of a plug-in
/// that never writes its stream handles) share it, and their work is numbered in one order, so
/// a host function can tell what was queued before and after it.
#[derive(Debug, Default)]
pub(crate) struct PluginQueue {
    seq: AtomicU64,
}

/// The live plug-in queues: (runtime, device slot, stream handle) and the queue.
type QueueKey = (usize, usize, usize);
static QUEUES: Mutex<Vec<(QueueKey, Weak<PluginQueue>)>> = Mutex::new(Vec::new());

/// The queue of a plug-in stream handle (shared with the other live streams over it).
fn queue_of(key: QueueKey) -> Arc<PluginQueue> {
    let mut queues = lock(&QUEUES);
    queues.retain(|(_, queue)| queue.strong_count() > 0);
    if let Some(queue) = queues
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, queue)| queue.upgrade())
    {
        return queue;
    }
    let queue = Arc::new(PluginQueue::default());
    queues.push((key, Arc::downgrade(&queue)));
    queue
}

/// The devstream host function running on this thread, if any: its plug-in queue and position.
pub(crate) fn running_host_fn() -> Option<(u64, u64)> {
    HOST_FN.with(Cell::get).map(|(queue, seq, _)| (queue, seq))
}

/// How many possibly incomplete waits a stream remembers (see [`StreamCore::note_wait`]).
const MAX_NOTED_WAITS: usize = 64;

/// Inside a host function (of queue `a` at position `n`): whether the work of `core` up to
/// position `limit` (`u64::MAX`: all of it, also what is held on the host) could wait,
/// directly or through other streams' waits, for work `a` queues after that host function,
/// which cannot run before the host function returns. Conservative: a wait of `core` before
/// `limit` counts even where the event it waits for is complete but not yet known to be.
fn waits_for_later_work(core: &StreamCore, limit: u64, (a, n): (u64, u64)) -> bool {
    // `a` is the host function's plug-in queue: every stream over it counts as its own.
    let mut visited: Vec<(u64, u64)> = Vec::new();
    let mut stack: Vec<(Arc<StreamCore>, u64)> = Vec::new();
    let mut visit = |core: &StreamCore, limit: u64, stack: &mut Vec<(Arc<StreamCore>, u64)>| {
        if core.queue_id() == a {
            return limit > n;
        }
        if visited.iter().any(|&(id, l)| id == core.id && l >= limit) {
            return false;
        }
        visited.push((core.id, limit));
        // The held waits first, then the noted ones, under the held waits' lock: a wait leaves
        // the held ones (in `pump`) only once it is noted, under that same lock, so it is seen
        // in one or the other, never in neither (issue 12 item 6: a wait the dispatcher was
        // handing to the plug-in was missed, and a host function hung on a copy behind it).
        let mut awaited: Vec<Arc<RawEvent>> = Vec::new();
        {
            let deferred = lock(&core.deferred);
            if limit == u64::MAX {
                awaited.extend(deferred.items.iter().filter_map(|item| match item {
                    Item::WaitEvent(raw) => Some(raw.clone()),
                    _ => None,
                }));
            }
            awaited.extend(
                lock(&core.waits)
                    .iter()
                    .filter(|w| w.seq < limit && !w.raw.complete.load(Ordering::Acquire))
                    .map(|w| w.raw.clone()),
            );
        }
        for raw in awaited {
            let limit = match &*lock(&raw.state) {
                RecordState::Pending => u64::MAX,
                RecordState::Recorded { seq } => *seq,
                RecordState::Lost(_) => continue,
            };
            // An event of the host function's own queue is decided here, from the queue the
            // event keeps: its stream's host side may be gone (the program dropped the handle)
            // while its record still waits behind the host function.
            if raw.queue == a {
                if limit > n {
                    return true;
                }
                continue;
            }
            if let Some(origin) = raw.origin.upgrade() {
                stack.push((origin, limit));
            }
        }
        false
    };
    if visit(core, limit, &mut stack) {
        return true;
    }
    while let Some((core, limit)) = stack.pop() {
        if visit(&core, limit, &mut stack) {
            return true;
        }
    }
    false
}

/// Inside a host function: whether waiting for `core`'s work up to `limit` could wait for
/// work queued after that host function (then the wait is refused, never a hang).
pub(crate) fn host_fn_would_wait_for_itself(core: &StreamCore, limit: u64) -> bool {
    running_host_fn().is_some_and(|running| waits_for_later_work(core, limit, running))
}

/// How many streams [`runs_after_running_host_fn`] follows before it gives up (answers no).
const MAX_ORDER_CHAIN: usize = 64;

/// Inside a host function: whether the work `raw` marks *certainly* cannot start before that
/// host function returns, because its stream waits (through waits the plug-in accepted, on any
/// number of streams) for an event recorded after the host function on the host function's own
/// stream. The opposite of [`host_fn_would_wait_for_itself`]'s caution: `false` whenever that is
/// not certain (a wait still held on the host or being handed to the plug-in, an event of
/// another stream over the same plug-in queue, a chain too long). A host-buffer access skips
/// such copies: they run after it in stream order, and cannot touch the memory meanwhile.
pub(crate) fn runs_after_running_host_fn(raw: &RawEvent) -> bool {
    let Some((queue, n, stream)) = HOST_FN.with(Cell::get) else {
        return false;
    };
    // Does the work of `core` from position `from` on certainly wait for that later work?
    // The handed waits are read *before* the position (see `settled` in buffer.rs): a wait seen
    // handed while a record is still pending was handed before that record.
    let after_waits = |core: &StreamCore, position: &dyn Fn() -> Option<u64>| {
        let handed: Vec<(u64, Arc<RawEvent>)> = lock(&core.waits)
            .iter()
            .filter(|w| w.handed)
            .map(|w| (w.seq, w.raw.clone()))
            .collect();
        position().map(|from| {
            handed
                .into_iter()
                .filter(|(seq, _)| *seq < from)
                .map(|(_, raw)| raw)
                .collect::<Vec<_>>()
        })
    };
    let position = |raw: &RawEvent| match &*lock(&raw.state) {
        RecordState::Pending => Some(u64::MAX),
        RecordState::Recorded { seq } => Some(*seq),
        RecordState::Lost(_) => None,
    };
    let Some(origin) = raw.origin.upgrade() else {
        return false;
    };
    let Some(mut awaited) = after_waits(&origin, &|| position(raw)) else {
        return false;
    };
    let mut followed = 0;
    while let Some(event) = awaited.pop() {
        if event.complete.load(Ordering::Acquire) {
            continue;
        }
        let RecordState::Recorded { seq } = *lock(&event.state) else {
            continue;
        };
        if event.queue == queue {
            if event.stream == stream && seq > n {
                return true;
            }
            continue;
        }
        followed += 1;
        if followed > MAX_ORDER_CHAIN {
            return false;
        }
        if let Some(origin) = event.origin.upgrade() {
            if let Some(more) = after_waits(&origin, &|| Some(seq)) {
                awaited.extend(more);
            }
        }
    }
    false
}

/// A call into the plug-in (or several) at one point of a stream.
pub(crate) type Op = Box<dyn FnOnce(&StreamCore) -> Result<()> + Send>;

/// One thing a stream does, kept in order.
pub(crate) enum Item {
    /// A call into the plug-in at this point of the stream.
    Op(Op),
    /// Later items wait until the flag's value is at least this.
    WaitFlag(Arc<HostFlag>, u32),
    /// Later items wait for this event (once its record has reached the plug-in).
    WaitEvent(Arc<RawEvent>),
}

/// The host side of one plug-in stream.
pub(crate) struct StreamCore {
    pub(crate) id: u64,
    pub(crate) place: Place,
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) slot: usize,
    pub(crate) raw: Handle,
    pub(crate) non_blocking: bool,
    /// Destroy the plug-in stream when the core goes (false for default and adopted streams).
    owned: bool,
    /// Counted in `live_counts`.
    user_created: bool,
    /// User handles (`PluginStream`s) on this stream (see `crate::stream::UserHandle`).
    pub(crate) handles: AtomicUsize,
    submit_lock: ReentrantLock,
    deferred: Mutex<Deferred>,
    drained: Condvar,
    /// The first error of work that ran after its submission returned (sticky).
    pub(crate) errors: Arc<Mutex<Option<Error>>>,
    /// Numbers the records, waits and host functions handed to the plug-in, in the order of
    /// its plug-in queue (shared by the streams over one plug-in stream handle).
    queue: Arc<PluginQueue>,
    /// This core (its events point back to it).
    me: Weak<StreamCore>,
    /// The events this stream was made to wait for, with the wait's position, while they may
    /// be incomplete: what a host function checks before it blocks on this stream.
    waits: Mutex<Vec<NotedWait>>,
    /// Recorded just before the stream began (or joined) its latest capture: the end of its
    /// work before the capture, which a release must wait for while it is capturing.
    pub(crate) pre_capture: Mutex<Option<Arc<RawEvent>>>,
    /// What this stream already waited for (user-created streams with `elide_waits` only: the
    /// default and adopted streams are shared with code devstream does not see).
    pub(crate) tracker: WaitTracker,
}

/// A wait of a stream on another plug-in queue's event, while it may be incomplete.
struct NotedWait {
    /// Its position in the stream's plug-in queue.
    seq: u64,
    raw: Arc<RawEvent>,
    /// The plug-in accepted it (`stream_wait_event` succeeded): the stream's later work
    /// certainly waits for `raw`. False while it is being handed.
    handed: bool,
}

/// What `pump` takes from the held items: an item, or a wait already numbered and noted.
enum Next {
    Item(Item),
    Wait(Arc<RawEvent>, bool),
    /// A flag wait handed to the plug-in as a blocking callback ([`StreamCore::hand_over_held`]).
    Block(Arc<HostFlag>, u32),
}

#[derive(Default)]
struct Deferred {
    items: VecDeque<Item>,
    registered: bool,
    /// `pump` took an item from `items` and is handing it to the plug-in: the stream still
    /// holds that work on the host, though `items` may be empty. Set when the item is taken
    /// and cleared when `pump` next takes this lock, so it costs no lock of its own.
    handing: bool,
}

impl Deferred {
    /// Work is held on the host: waiting in `items`, or being handed to the plug-in.
    fn holds_work(&self) -> bool {
        self.handing || !self.items.is_empty()
    }
}

/// Clears [`Deferred::handing`] if handing an item to the plug-in unwinds, so that
/// `wait_drained` never waits for a hand-off that will not end.
struct Handing<'a>(&'a StreamCore);

impl Drop for Handing<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(&self.0.deferred).handing = false;
            self.0.drained.notify_all();
        }
    }
}

impl std::fmt::Debug for StreamCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamCore")
            .field("id", &self.id)
            .field("place", &self.place)
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

/// How a new core comes to be.
pub(crate) enum Origin {
    /// Created by `Stream::new`: destroyed and counted.
    User,
    /// The place's default stream: destroyed never, not counted.
    Default,
    /// A foreign plug-in stream wrapped by `from_raw`: not destroyed, not counted.
    Adopted,
}

impl StreamCore {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        slot: usize,
        raw: Handle,
        non_blocking: bool,
        origin: Origin,
        elide_waits: bool,
    ) -> Arc<StreamCore> {
        let (owned, user_created) = match origin {
            Origin::User => (true, true),
            Origin::Default => (false, false),
            Origin::Adopted => (false, false),
        };
        if user_created {
            LIVE_STREAMS.fetch_add(1, Ordering::SeqCst);
        }
        let runtime_index = runtime.index();
        Arc::new_cyclic(|me| StreamCore {
            id: devstream_core::next_id(),
            place: runtime.place(slot),
            runtime,
            slot,
            raw,
            non_blocking,
            owned,
            user_created,
            handles: AtomicUsize::new(0),
            submit_lock: ReentrantLock::new(),
            deferred: Mutex::new(Deferred::default()),
            drained: Condvar::new(),
            errors: Arc::new(Mutex::new(None)),
            queue: queue_of((runtime_index, slot, raw.0)),
            me: me.clone(),
            waits: Mutex::new(Vec::new()),
            pre_capture: Mutex::new(None),
            tracker: WaitTracker::new(elide_waits && user_created),
        })
    }

    /// The user dropped the last handle of this stream: a capture it began ends now, as if the
    /// stream itself were dropped (its host side may live on, held by devstream's own
    /// references, among them the buffers its capture keeps). The plug-in's capture is ended
    /// (its graph destroyed) before devstream forgets it: until then, work on other streams over
    /// the same plug-in stream handle, or joined into the capture, is still known to go into it.
    /// Streams devstream keeps for the process (default streams) and adopted ones end their
    /// captures when ended or dropped.
    pub(crate) fn last_handle_dropped(&self) {
        if !self.user_created || !crate::capture::began_on(self.runtime.index(), self.id) {
            return;
        }
        let ended = self.runtime.end_capture(self.slot, self.raw);
        // Its work before the capture no longer needs tracking as "before the capture".
        *lock(&self.pre_capture) = None;
        match ended {
            Ok(graph) => {
                if let Err(error) = self.runtime.destroy_graph(self.slot, graph, Handle(0)) {
                    tracing::warn!(
                        "devstream-plugin: destroying the graph of a dropped stream's capture: \
                         {error}"
                    );
                }
            }
            Err(error) => {
                tracing::warn!("devstream-plugin: ending the capture of a dropped stream: {error}")
            }
        }
        crate::capture::forget_origin(
            self.runtime.index(),
            self.id,
            "its stream was dropped during the capture",
        );
    }

    /// Remembers that the stream waits for `raw` (at position `seq`), forgetting the waits
    /// known complete. Noted *before* the wait is handed to the plug-in (and forgotten again
    /// if that fails), so a host function's check never misses a wait in flight; cheap (no
    /// plug-in call), as `pump` notes under the held waits' lock.
    fn note_wait(&self, seq: u64, raw: Arc<RawEvent>) {
        let mut waits = lock(&self.waits);
        waits.retain(|w| !w.raw.complete.load(Ordering::Acquire));
        waits.push(NotedWait {
            seq,
            raw,
            handed: false,
        });
    }

    /// Marks a noted wait accepted by the plug-in (`handed`), or forgets one it refused.
    fn settle_wait(&self, raw: &Arc<RawEvent>, handed: bool) {
        let mut waits = lock(&self.waits);
        if handed {
            for wait in waits.iter_mut().filter(|w| Arc::ptr_eq(&w.raw, raw)) {
                wait.handed = true;
            }
        } else {
            waits.retain(|w| !Arc::ptr_eq(&w.raw, raw));
        }
    }

    /// Keeps the noted waits bounded, asking the plug-in which are complete first.
    fn prune_waits(&self) {
        let mut waits = lock(&self.waits);
        if waits.len() > MAX_NOTED_WAITS && self.runtime.table().query_event.is_some() {
            // Never a question that may break a capture, nor about a captured event.
            waits.retain(|w| {
                w.raw.captured_in().is_some()
                    || w.raw.question_breaks_a_capture()
                    || !matches!(w.raw.query(), Ok(true))
            });
        }
        while waits.len() > MAX_NOTED_WAITS {
            // Bounded memory; a host function's check may then miss an old dependency.
            waits.remove(0);
        }
    }

    /// The next position in this stream's plug-in queue (called under the submission lock).
    fn next_seq(&self) -> u64 {
        self.queue.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Identifies this stream's plug-in queue.
    pub(crate) fn queue_id(&self) -> u64 {
        Arc::as_ptr(&self.queue) as usize as u64
    }

    /// Submits `item` now, or defers it behind earlier deferred items. Errors of an immediate
    /// submission are returned; errors of a deferred one go to the stream's error slot.
    pub(crate) fn submit(self: &Arc<Self>, item: Item) -> Result<()> {
        let _order = self.submit_lock.lock();
        let item = {
            let mut deferred = lock(&self.deferred);
            let must_defer = !deferred.items.is_empty()
                || match &item {
                    Item::WaitFlag(flag, value) => flag.get() < *value,
                    Item::WaitEvent(raw) => !raw.is_submitted(),
                    Item::Op(_) => false,
                };
            if must_defer {
                deferred.items.push_back(item);
                if !deferred.registered {
                    deferred.registered = true;
                    register_blocked(self.clone());
                }
                drop(deferred);
                // The awaited condition may have changed between the check and now.
                wake_dispatcher();
                return Ok(());
            }
            item
        };
        self.execute(item)
    }

    fn execute(&self, item: Item) -> Result<()> {
        match item {
            Item::Op(op) => op(self),
            Item::WaitFlag(..) => Ok(()),
            Item::WaitEvent(raw) => {
                let seq = self.next_seq();
                let noted = self.note_foreign_wait(seq, &raw);
                self.hand_wait(raw, noted)
            }
        }
    }

    /// Notes a wait on another plug-in queue's event (see [`Self::note_wait`]); whether it did.
    fn note_foreign_wait(&self, seq: u64, raw: &Arc<RawEvent>) -> bool {
        let foreign = raw.queue != self.queue_id();
        if foreign {
            self.note_wait(seq, raw.clone());
        }
        foreign
    }

    /// Hands a wait (already numbered, and noted where `noted`) to the plug-in.
    fn hand_wait(&self, raw: Arc<RawEvent>, noted: bool) -> Result<()> {
        let lost = match &*lock(&raw.state) {
            RecordState::Lost(error) => Some(error.clone()),
            _ => None,
        };
        let handed = match lost {
            Some(error) => Err(error),
            None => self
                .runtime
                .stream_wait_event(self.slot, self.raw, raw.handle),
        };
        if noted {
            self.settle_wait(&raw, handed.is_ok());
            self.prune_waits();
        }
        handed
    }

    /// Submits the deferred items whose conditions hold. Returns whether any was submitted.
    fn pump(self: &Arc<Self>) -> bool {
        self.pump_with(false).unwrap_or(true)
    }

    /// Hands every held item to the plug-in now, before a capture begins behind them: a flag
    /// wait not yet reached becomes a callback that blocks the plug-in stream until the value
    /// is reached. `Error::Capture` when an item waits for an event whose record is itself
    /// still held on the host (nothing is handed past it), or when the plug-in refuses the
    /// blocking callback (the wait stays held).
    pub(crate) fn hand_over_held(self: &Arc<Self>) -> Result<()> {
        self.pump_with(true)?;
        if self.has_deferred() {
            return Err(Error::capture(
                "begin_capture",
                "the stream holds work behind a wait on an event whose record is itself held \
                 on the host",
            ));
        }
        Ok(())
    }

    /// [`Self::pump`]; with `hand_over`, flag waits not yet reached are handed to the plug-in
    /// as blocking callbacks instead of holding the items behind them.
    fn pump_with(self: &Arc<Self>, hand_over: bool) -> Result<bool> {
        let _order = self.submit_lock.lock();
        let mut progressed = false;
        loop {
            let item = {
                let mut deferred = lock(&self.deferred);
                // The item taken last time round (if any) is in the plug-in's hands now.
                deferred.handing = false;
                let ready = match deferred.items.front() {
                    None => {
                        if deferred.registered {
                            deferred.registered = false;
                            unregister_blocked(self.id);
                        }
                        self.drained.notify_all();
                        return Ok(progressed);
                    }
                    Some(Item::WaitFlag(flag, value)) => hand_over || flag.get() >= *value,
                    Some(Item::WaitEvent(raw)) => raw.is_submitted(),
                    Some(Item::Op(_)) => true,
                };
                if !ready {
                    return Ok(progressed);
                }
                // A wait is numbered and noted before it leaves the held items, under their
                // lock: a host function's check (`waits_for_later_work`) sees it in one or the
                // other while it is handed to the plug-in.
                // Until it is in the plug-in's hands, the item still counts as held
                // (`handing`): `synchronize` must not find neither held work nor plug-in work
                // while it is between the two (issue 12: a deferred host function's panic
                // missed `synchronize`).
                let next = match deferred.items.pop_front() {
                    Some(Item::WaitEvent(raw)) => {
                        let seq = self.next_seq();
                        let noted = self.note_foreign_wait(seq, &raw);
                        Next::Wait(raw, noted)
                    }
                    Some(Item::WaitFlag(flag, value)) if flag.get() < value => {
                        Next::Block(flag, value)
                    }
                    Some(item) => Next::Item(item),
                    None => continue,
                };
                deferred.handing = true;
                next
            };
            progressed = true;
            let handing = Handing(self);
            let executed = match item {
                Next::Item(item) => self.execute(item),
                Next::Wait(raw, noted) => self.hand_wait(raw, noted),
                Next::Block(flag, value) => {
                    let (result, taken_back) =
                        self.put_callback(Callback::BlockUntil(flag.clone(), value));
                    if let Err(error) = result {
                        if taken_back.is_some() {
                            // Not queued: the wait stays held, and so does what follows.
                            let mut deferred = lock(&self.deferred);
                            deferred.items.push_front(Item::WaitFlag(flag, value));
                            deferred.handing = false;
                            drop(deferred);
                            drop(handing);
                            return Err(error);
                        }
                        Err(error)
                    } else {
                        Ok(())
                    }
                }
            };
            drop(handing);
            if let Err(error) = executed {
                self.record_error(error);
            }
        }
    }

    /// Blocks until the work submitted to this stream so far is complete (for `synchronize`
    /// inside a host function): an event recorded at the end of that work now, in stream order
    /// (held on the host behind held work, like any record), is waited for; work submitted
    /// later, by other threads, is not. The check that the work does not wait for the calling
    /// host function's later work and the record are made under the submission lock, so nothing
    /// is submitted between them.
    pub(crate) fn synchronize_submitted(self: &Arc<Self>) -> Result<()> {
        let end = {
            let _order = self.submit_lock.lock();
            if host_fn_would_wait_for_itself(self, u64::MAX) {
                // The stream's work includes the calling host function itself, or waits for
                // work queued after it.
                return Err(waits_for_itself("Stream::synchronize", self.id));
            }
            self.record_raw()?
        };
        match end.wait_submitted() {
            RecordState::Lost(error) => Err(error),
            _ => {
                self.runtime.synchronize_event(self.slot, end.handle)?;
                end.complete.store(true, Ordering::Release);
                Ok(())
            }
        }
    }

    /// Whether work is held on the host (waiting, or being handed to the plug-in).
    pub(crate) fn has_deferred(&self) -> bool {
        lock(&self.deferred).holds_work()
    }

    /// Blocks until no work is held on the host: every deferred item is in the plug-in's
    /// hands, including the one `pump` may be handing over right now.
    pub(crate) fn wait_drained(&self) {
        let mut deferred = lock(&self.deferred);
        while deferred.holds_work() {
            deferred = wait(&self.drained, deferred);
        }
    }

    pub(crate) fn record_error(&self, error: Error) {
        let mut slot = lock(&self.errors);
        if slot.is_none() {
            *slot = Some(error);
        }
    }

    pub(crate) fn first_error(&self) -> Option<Error> {
        lock(&self.errors).clone()
    }

    /// A fresh plug-in event for this stream, not yet recorded.
    pub(crate) fn new_raw(&self) -> Result<Arc<RawEvent>> {
        let handle = self.runtime.create_event(self.slot)?;
        Ok(Arc::new(RawEvent {
            runtime: self.runtime.clone(),
            slot: self.slot,
            handle,
            stream: self.id,
            queue: self.queue_id(),
            origin: self.me.clone(),
            state: Mutex::new(RecordState::Pending),
            state_changed: Condvar::new(),
            complete: AtomicBool::new(false),
            pos: AtomicU64::new(0),
            captured: AtomicU64::new(0),
        }))
    }

    /// Records `raw` here and now (inside an operation, in stream order). A failed record
    /// leaves the event `Lost`, never pending, so nothing waits forever for it.
    pub(crate) fn record_into(&self, raw: &RawEvent) -> Result<()> {
        // A position for elision: only on a tracked stream, for its own event, with no capture
        // possibly active around the record (a captured record stands for graph nodes).
        let epoch = if self.tracker.enabled() && raw.stream == self.id {
            crate::capture::elision_epoch()
        } else {
            None
        };
        let seq = self.next_seq();
        // Asks the plug-in only while some capture of its runtime is in progress.
        if let Ok(Capturing::Yes(capture) | Capturing::Invalid(Some(capture), _)) =
            crate::capture::capturing(self)
        {
            raw.captured.store(capture.id(), Ordering::Release);
        }
        let result = self.runtime.record_event(self.slot, self.raw, raw.handle);
        if let Some(epoch) = epoch {
            if result.is_ok() && crate::capture::elision_still_valid(epoch) {
                // Records of one stream run in queue order under its submit lock: the queue
                // numbers of its records are monotone in what they capture.
                raw.pos.store(seq, Ordering::Release);
            }
        }
        raw.set_state(match &result {
            Ok(()) => RecordState::Recorded { seq },
            Err(error) => RecordState::Lost(error.clone()),
        });
        result
    }

    /// Records a fresh plug-in event at the current end of this stream's work.
    pub(crate) fn record_raw(self: &Arc<Self>) -> Result<Arc<RawEvent>> {
        let raw = self.new_raw()?;
        let recorded = raw.clone();
        self.submit(Item::Op(Box::new(move |core: &StreamCore| {
            core.record_into(&recorded)
        })))?;
        Ok(raw)
    }

    /// An event after the stream's work so far, for a release: recorded now, or, while the
    /// stream is capturing (a record would only become part of the capture), the one recorded
    /// before its capture began.
    pub(crate) fn release_marker(self: &Arc<Self>) -> Result<Arc<RawEvent>> {
        match crate::capture::capturing(self)? {
            crate::capture::Capturing::No => self.record_raw(),
            _ => lock(&self.pre_capture).clone().ok_or_else(|| {
                Error::capture(
                    "release",
                    "the stream is capturing and its work before the capture is unknown",
                )
            }),
        }
    }

    /// Puts `callback` on the plug-in stream (the caller checked that callbacks exist).
    ///
    /// Ownership of the callback is decided by who claims its token first (see
    /// [`crate::tokens`]), never from the status alone: a plug-in may run it inside the call
    /// and answer anything, answer an error and still run it later, or run it twice. When the
    /// plug-in answers an error and the callback has not run, it is taken back and handed to
    /// the caller (it will not run); so is a release the plug-in called inside
    /// `stream_add_callback` (before the stream's earlier work is known to be done). The
    /// answer is the plug-in's status and the callback taken back, if any.
    fn put_callback(&self, callback: Callback) -> (Result<()>, Option<Callback>) {
        let token = crate::tokens::register(callback);
        let result =
            self.runtime
                .add_callback(self.slot, self.raw, Some(trampoline), token as *mut c_void);
        let taken_back = crate::tokens::handed(token, result.is_ok());
        (result, taken_back)
    }

    /// Puts a host function or flag write on the stream; on failure the callback (not run)
    /// is dropped here, a panic of its destructor contained.
    pub(crate) fn add_callback(&self, callback: Callback) -> Result<()> {
        let (result, taken_back) = self.put_callback(callback);
        if taken_back.is_some() {
            drop_contained(taken_back);
        }
        result
    }

    /// Puts a callback on the plug-in stream (in stream order, called inside an operation) that
    /// wakes runtime `runtime`'s completion notifier once the work before it is done.
    pub(crate) fn add_nudge(&self, runtime: usize) -> Result<()> {
        self.put_callback(Callback::Nudge(runtime)).0
    }

    /// Puts a user host function on the stream, numbered in stream order.
    pub(crate) fn add_host_fn(&self, f: devstream_core::HostFn) -> Result<()> {
        let seq = self.next_seq();
        self.add_callback(Callback::HostFn {
            f,
            stream: self.id,
            queue: self.queue_id(),
            seq,
            errors: self.errors.clone(),
        })
    }

    /// Keeps `payload` alive until the work this stream has handed to the plug-in so far is
    /// complete. Called inside an operation (in stream order). Never frees early: where the
    /// plug-in can tell neither by callback nor by event when that is, `payload` is leaked.
    pub(crate) fn keep_until_done(&self, payload: Box<dyn Any + Send>) {
        let payload = if self.runtime.table().stream_add_callback.is_some() {
            match self.put_callback(Callback::Release(payload)) {
                (Err(error), Some(Callback::Release(payload))) => {
                    tracing::warn!("devstream-plugin: a release callback: {error}");
                    payload
                }
                // Called inside stream_add_callback: the plug-in may not have run the
                // stream's earlier work yet (its copies may still be queued).
                (Ok(()), Some(Callback::Release(payload))) => payload,
                // Queued, or the plug-in ran (or runs) the callback: it owns the payload.
                _ => return,
            }
        } else {
            payload
        };
        let recorded = self.new_raw().and_then(|raw| {
            self.record_into(&raw)?;
            Ok(raw)
        });
        match recorded {
            Ok(raw) => reap(Job::After {
                events: vec![raw],
                then: Box::new(move || drop(payload)),
            }),
            Err(error) => {
                tracing::warn!(
                    "devstream-plugin: cannot tell when a stream's work is done ({error}); \
                     leaking what it uses"
                );
                std::mem::forget(payload);
            }
        }
    }
}

impl Drop for StreamCore {
    fn drop(&mut self) {
        if self.user_created {
            LIVE_STREAMS.fetch_sub(1, Ordering::SeqCst);
        }
        crate::capture::forget_origin(
            self.runtime.index(),
            self.id,
            "its stream was dropped during the capture",
        );
        if self.owned {
            reap(Job::RetireStream {
                runtime: self.runtime.clone(),
                slot: self.slot,
                handle: self.raw,
                last: None,
            });
        }
    }
}

/// What a plug-in callback does.
pub(crate) enum Callback {
    /// A user host function; a panic is recorded as the stream's error.
    HostFn {
        f: devstream_core::HostFn,
        stream: u64,
        /// Its plug-in queue and position there.
        queue: u64,
        seq: u64,
        errors: Arc<Mutex<Option<Error>>>,
    },
    /// `write_flag`.
    SetFlag(Arc<HostFlag>, u32),
    /// Drops what the stream's earlier work used.
    Release(Box<dyn Any + Send>),
    /// Blocks the plug-in stream until the flag's value is at least this: a flag wait held
    /// on the host, handed to the plug-in when a capture begins behind it.
    BlockUntil(Arc<HostFlag>, u32),
    /// Wakes the plug-in runtime's completion notifier (`Stream::completion`: the event
    /// recorded right after this callback is about to complete).
    Nudge(usize),
}

/// Restores the previous running host function (host functions may nest on a plug-in that
/// runs callbacks inside `stream_add_callback`).
struct HostFnScope(Option<(u64, u64, u64)>);

impl Drop for HostFnScope {
    fn drop(&mut self) {
        HOST_FN.with(|current| current.set(self.0));
    }
}

/// The `C_Callback` devstream passes to `stream_add_callback`. Never unwinds into the plug-in.
unsafe extern "C" fn trampoline(
    _device: C_Device,
    _stream: C_Stream,
    user_data: *mut c_void,
    status: *mut C_Status,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if !status.is_null() {
            // SAFETY: the plug-in passes a writable status or null.
            unsafe { *status = C_SUCCESS };
        }
        // Nothing when the token was claimed already: the submitter took the callback back
        // after the plug-in answered an error, or the plug-in calls it a second time. A
        // release called inside `stream_add_callback` is left to the submitter (see
        // `put_callback`).
        let early = |callback: &Callback| matches!(callback, Callback::Release(_));
        let Some(callback) = crate::tokens::run(user_data as usize, early) else {
            return;
        };
        match callback {
            Callback::HostFn {
                mut f,
                stream,
                queue,
                seq,
                errors,
            } => {
                let scope = HostFnScope(
                    HOST_FN.with(|current| current.replace(Some((queue, seq, stream)))),
                );
                if let Err(payload) = catch_unwind(AssertUnwindSafe(&mut f)) {
                    let message = panic::message(payload.as_ref());
                    let mut first = lock(&errors);
                    if first.is_none() {
                        *first = Some(Error::HostFuncPanicked { stream, message });
                    }
                    drop(first);
                    // A payload whose drop panics (with payloads whose drops panic, ...) must
                    // not escape either.
                    drop_payload(payload);
                }
                drop(scope);
                drop_contained(f);
            }
            Callback::SetFlag(flag, value) => flag.set(value),
            Callback::Release(payload) => {
                drop_contained(payload);
            }
            Callback::BlockUntil(flag, value) => flag.wait_until(value),
            Callback::Nudge(runtime) => crate::notify::nudge(runtime),
        }
    }));
    if let Err(payload) = outcome {
        drop_payload(payload);
    }
}

// ---- the dispatcher: submits deferred work when flags change ----

static BLOCKED: Mutex<Vec<Arc<StreamCore>>> = Mutex::new(Vec::new());
static BLOCKED_COUNT: AtomicUsize = AtomicUsize::new(0);

fn register_blocked(core: Arc<StreamCore>) {
    let mut blocked = lock(&BLOCKED);
    blocked.push(core);
    BLOCKED_COUNT.store(blocked.len(), Ordering::SeqCst);
}

fn unregister_blocked(id: u64) {
    let mut blocked = lock(&BLOCKED);
    blocked.retain(|core| core.id != id);
    BLOCKED_COUNT.store(blocked.len(), Ordering::SeqCst);
}

fn dispatcher() -> &'static Mutex<Option<Sender<()>>> {
    static DISPATCHER: OnceLock<Mutex<Option<Sender<()>>>> = OnceLock::new();
    DISPATCHER.get_or_init(|| {
        let (sender, receiver) = channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("devstream-plugin dispatcher".into())
            .spawn(move || dispatch(receiver));
        if let Err(error) = &spawned {
            tracing::error!("devstream-plugin: cannot start the dispatcher thread: {error}");
        }
        Mutex::new(spawned.ok().map(|_| sender))
    })
}

fn wake_dispatcher() {
    if let Some(sender) = lock(dispatcher()).as_ref() {
        let _ = sender.send(());
    }
}

fn dispatch(wakes: Receiver<()>) {
    while wakes.recv().is_ok() {
        while wakes.try_recv().is_ok() {}
        loop {
            let blocked: Vec<Arc<StreamCore>> = lock(&BLOCKED).clone();
            let mut progressed = false;
            for core in blocked {
                progressed |= core.pump();
            }
            if !progressed {
                break;
            }
        }
    }
}

// ---- the reaper: releases plug-in objects once their work is complete ----

/// Something to release once the work it depends on is complete.
pub(crate) enum Job {
    /// Destroy a plug-in event once it is complete.
    DestroyEvent {
        runtime: Arc<Runtime>,
        slot: usize,
        handle: Handle,
        submitted: bool,
        /// The stream it was recorded on.
        origin: Weak<StreamCore>,
        /// The capture its last record went into: destroyed once that capture ended, without
        /// a question to the plug-in.
        captured: Option<u64>,
    },
    /// Record an event at the end of a dropped stream, then destroy the stream once that
    /// event is complete.
    RetireStream {
        runtime: Arc<Runtime>,
        slot: usize,
        handle: Handle,
        last: Option<Handle>,
    },
    /// Run `then` once every event is complete.
    After {
        events: Vec<Arc<RawEvent>>,
        then: Box<dyn FnOnce() + Send>,
    },
    /// Record an event on each stream, then run `then` once they are all complete.
    AfterStreams {
        streams: Vec<Arc<StreamCore>>,
        then: Box<dyn FnOnce() + Send>,
    },
}

fn warn(what: &str, result: Result<()>) {
    if let Err(error) = result {
        tracing::warn!("devstream-plugin: {what}: {error}");
    }
}

impl Job {
    /// Whether a capture in progress holds the job back until it ends:
    /// * a `Global`-mode one anywhere: the job's queries, synchronizations, records and
    ///   destroys are "unsafe" calls to it from another thread (CUDA's rule, which a plug-in's
    ///   own runtime may enforce by invalidating the capture);
    /// * for an event to destroy or wait for: any capture that a question about it would break
    ///   ([`question_breaks_a_capture`]);
    /// * for retiring a dropped stream: any capture of its plug-in (the stream may have joined
    ///   it, and the event recorded at its end would then be a captured one).
    fn held_by_a_capture(&self) -> bool {
        match self {
            Job::DestroyEvent {
                runtime,
                origin,
                captured,
                ..
            } => question_breaks_a_capture(runtime, origin, *captured),
            Job::RetireStream { runtime, .. } => {
                crate::capture::forbids_other_threads()
                    || crate::capture::any_active(runtime.index())
            }
            Job::After { events, .. } => events.iter().any(|e| e.question_breaks_a_capture()),
            Job::AfterStreams { .. } => crate::capture::forbids_other_threads(),
        }
    }

    /// Whether advancing the job may block in the plug-in: it synchronizes where the plug-in
    /// has no `query_event`.
    fn may_block(&self) -> bool {
        let blocks = |runtime: &Runtime| runtime.table().query_event.is_none();
        match self {
            Job::DestroyEvent { runtime, .. } | Job::RetireStream { runtime, .. } => {
                blocks(runtime)
            }
            Job::After { events, .. } => events.iter().any(|e| blocks(&e.runtime)),
            Job::AfterStreams { streams, .. } => streams.iter().any(|c| blocks(&c.runtime)),
        }
    }

    /// Advances the job; `None` when it is done, `Some(self)` to try again later.
    fn advance(self) -> Option<Job> {
        if self.held_by_a_capture() {
            return Some(self);
        }
        match self {
            Job::DestroyEvent {
                runtime,
                slot,
                handle,
                submitted,
                origin,
                captured,
            } => {
                // A captured event stands for no work (its capture has ended: see
                // `held_by_a_capture`): destroyed without a question.
                let submitted = submitted && captured.is_none();
                if submitted && runtime.table().query_event.is_some() {
                    if let Ok(false) = runtime.query_event(slot, handle) {
                        return Some(Job::DestroyEvent {
                            runtime,
                            slot,
                            handle,
                            submitted,
                            origin,
                            captured,
                        });
                    }
                } else if submitted {
                    warn(
                        "synchronize_event before destroy",
                        runtime.synchronize_event(slot, handle),
                    );
                }
                warn("destroy_event", runtime.destroy_event(slot, handle));
                None
            }
            Job::RetireStream {
                runtime,
                slot,
                handle,
                last: None,
            } => {
                let recorded = runtime.create_event(slot).and_then(|event| {
                    match runtime.record_event(slot, handle, event) {
                        Ok(()) => Ok(event),
                        Err(error) => {
                            warn("destroy_event", runtime.destroy_event(slot, event));
                            Err(error)
                        }
                    }
                });
                match recorded {
                    Ok(event) => Job::RetireStream {
                        runtime,
                        slot,
                        handle,
                        last: Some(event),
                    }
                    .advance(),
                    Err(error) => {
                        tracing::warn!(
                            "devstream-plugin: recording the end of a dropped stream: {error}"
                        );
                        warn(
                            "synchronize_stream",
                            runtime.synchronize_stream(slot, handle),
                        );
                        warn("destroy_stream", runtime.destroy_stream(slot, handle));
                        None
                    }
                }
            }
            Job::RetireStream {
                runtime,
                slot,
                handle,
                last: Some(event),
            } => {
                if runtime.table().query_event.is_some() {
                    if let Ok(false) = runtime.query_event(slot, event) {
                        return Some(Job::RetireStream {
                            runtime,
                            slot,
                            handle,
                            last: Some(event),
                        });
                    }
                } else {
                    warn("synchronize_event", runtime.synchronize_event(slot, event));
                }
                warn("destroy_event", runtime.destroy_event(slot, event));
                warn("destroy_stream", runtime.destroy_stream(slot, handle));
                None
            }
            Job::After { events, then } => {
                let mut unknown = false;
                for event in &events {
                    match event.settled_for_reaper() {
                        Settled::Complete => {}
                        Settled::NotYet => return Some(Job::After { events, then }),
                        Settled::Unknown => unknown = true,
                    }
                }
                drop(events);
                if unknown {
                    tracing::warn!(
                        "devstream-plugin: an event's record failed, so when its work is done \
                         cannot be known: leaking what that work uses"
                    );
                    std::mem::forget(then);
                } else {
                    if let Err(payload) = catch_unwind(AssertUnwindSafe(then)) {
                        drop_payload(payload);
                    }
                }
                None
            }
            Job::AfterStreams { streams, then } => {
                let mut events = Vec::with_capacity(streams.len());
                let mut unknown = false;
                for core in &streams {
                    match core.release_marker() {
                        Ok(raw) => events.push(raw),
                        Err(error @ Error::Capture { .. }) => {
                            // Synchronizing a capturing stream would break its capture.
                            tracing::warn!("devstream-plugin: before a release: {error}");
                            unknown = true;
                        }
                        Err(error) => {
                            tracing::warn!("devstream-plugin: recording before a release: {error}");
                            if let Err(error) = core.runtime.synchronize_stream(core.slot, core.raw)
                            {
                                tracing::warn!("devstream-plugin: synchronize_stream: {error}");
                                unknown = true;
                            }
                        }
                    }
                }
                drop(streams);
                if unknown {
                    tracing::warn!(
                        "devstream-plugin: when a stream's work is done cannot be known: \
                         leaking what it uses"
                    );
                    std::mem::forget(then);
                    return None;
                }
                Job::After { events, then }.advance()
            }
        }
    }
}

fn reaper() -> &'static Mutex<Option<Sender<Job>>> {
    static REAPER: OnceLock<Mutex<Option<Sender<Job>>>> = OnceLock::new();
    REAPER.get_or_init(|| {
        let (sender, receiver) = channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("devstream-plugin reaper".into())
            .spawn(move || run_reaper(receiver));
        if let Err(error) = &spawned {
            tracing::error!("devstream-plugin: cannot start the reaper thread: {error}");
        }
        Mutex::new(spawned.ok().map(|_| sender))
    })
}

/// Hands `job` to the reaper thread (never blocks).
pub(crate) fn reap(job: Job) {
    let sender = lock(reaper()).clone();
    match sender {
        Some(sender) => {
            if let Err(returned) = sender.send(job) {
                // No reaper: leak rather than block or free what may be in use.
                std::mem::forget(returned.0);
            }
        }
        None => std::mem::forget(job),
    }
}

fn run_reaper(jobs: Receiver<Job>) {
    let mut pending: Vec<Job> = Vec::new();
    let mut pause = Duration::from_micros(200);
    loop {
        let next = if pending.is_empty() {
            jobs.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            jobs.recv_timeout(pause)
        };
        match next {
            Ok(job) => {
                pending.push(job);
                while let Ok(job) = jobs.try_recv() {
                    pending.push(job);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let before = pending.len();
        pending = pending
            .into_iter()
            .filter_map(|job| {
                // A job that may block (a plug-in without `query_event` is synchronized) runs
                // outside the gate: a capture must never wait for stream work.
                let _gate = (!job.may_block()).then(crate::capture::reaping);
                job.advance()
            })
            .collect();
        pause = if pending.len() < before {
            Duration::from_micros(200)
        } else {
            (pause * 2).min(Duration::from_millis(20))
        };
    }
}
