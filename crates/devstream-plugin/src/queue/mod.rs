//! What devstream keeps on the host for each plug-in stream.
//!
//! * **Submission order.** Every operation on a stream goes through [`StreamCore::submit`],
//!   under a per-stream re-entrant lock (re-entrant because a synchronous plug-in may run a host
//!   callback inside `stream_add_callback`, and that callback may submit to the same stream).
//!   A thread inside a plug-in call made for one stream (holding its lock) never waits for
//!   another stream's lock: a plug-in that calls back into devstream on another stream, on two
//!   threads crosswise, would deadlock. Its submission to a stream another thread holds is kept
//!   on the host instead, in order, like work behind a flag ([`reentrant`]).
//! * **Host-side gating.** The ABI has no "wait for a value" primitive, and blocking a plug-in's
//!   stream inside a callback until a host flag is set could stall a plug-in that runs every
//!   callback on one worker thread. So `wait_flag` is done on the host: the stream's later
//!   operations are *deferred* (kept here, not submitted) until the flag's value is reached.
//!   A wait on an event whose record is itself still deferred is deferred the same way. The
//!   dispatcher thread submits deferred operations when flags change; the plug-in's worker is
//!   never blocked by devstream.
//! * **Events per record.** Each record creates a fresh plug-in event ([`EventRecord`]); a
//!   devstream event points at its latest one. A wait keeps the raw event it was given, so
//!   re-recording never changes what earlier waits wait for.
//! * **Deferred destruction.** Plug-in streams, events and memory are released by the reaper
//!   thread once the work that uses them is complete, so dropping a handle never blocks and
//!   devstream never calls the plug-in from inside one of its callbacks.
//!
//! This module holds the stream core ([`StreamCore`]: a stream's submission order, the work it
//! holds on the host, the waits it noted) and the types whose fields several rooms read
//! ([`EventRecord`]); the other rooms, one mechanism each:
//! * [`reentrant`]: the re-entrant submission lock;
//! * [`host_flag`]: [`HostFlag`], the value `wait_flag` and `write_flag` work on;
//! * [`record`]: [`EventRecord`], one record of a plug-in event and what is known of it;
//! * [`plugin_queue`]: the plug-in queues that several devstream streams may share;
//! * [`self_wait`]: what a host function may wait for without waiting for itself;
//! * [`callback`]: what devstream puts on a plug-in stream as a callback, and its trampoline;
//! * [`dispatcher`]: the thread that submits held work when flags change;
//! * [`reaper`]: the thread that releases plug-in objects once their work is complete.

mod callback;
mod dispatcher;
mod errors;
mod host_flag;
mod plugin_queue;
mod reaper;
mod record;
mod reentrant;
mod self_wait;

pub(crate) use errors::StreamErrors;

pub(crate) use callback::Callback;
pub(crate) use host_flag::HostFlag;
pub(crate) use reaper::{reap, Job};

/// The name the rest of the crate knows [`EventRecord`] by.
pub(crate) type RawEvent = EventRecord;
pub(crate) use self_wait::{
    host_fn_would_wait_for_itself, running_host_fn, runs_after_running_host_fn,
};

use self::callback::trampoline;
use self::dispatcher::{register_blocked, unregister_blocked, wake_dispatcher};
use self::plugin_queue::{queue_of, PluginQueue, QueueKey};
use self::record::RecordState;
use self::reentrant::{Entry, ReentrantLock};
use self::self_wait::waits_for_itself;
use crate::capture::Capturing;
use crate::runtime::{inside_plugin_call, Handle, LoadedPlugin};
use devstream_core::elide::WaitTracker;
use devstream_core::panic::drop_contained;
use devstream_core::{Error, Place, Result};
use std::any::Any;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};

/// Locks `mutex`, ignoring poisoning: a panic contained elsewhere leaves the state valid.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits on `condvar`, ignoring poisoning like [`lock`].
fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts the thread `devstream-plugin {what}`, which runs `run` over the receiving end of a
/// new channel; the sending end, or `None` when the thread cannot start (logged).
fn start_thread<T: Send + 'static>(what: &str, run: fn(Receiver<T>)) -> Mutex<Option<Sender<T>>> {
    let (sender, receiver) = channel::<T>();
    let spawned = std::thread::Builder::new()
        .name(format!("devstream-plugin {what}"))
        .spawn(move || run(receiver));
    if let Err(error) = &spawned {
        tracing::error!("devstream-plugin: cannot start the {what} thread: {error}");
    }
    Mutex::new(spawned.ok().map(|_| sender))
}

/// Live user-created streams and events of plug-ins (for `live_counts`).
pub(crate) static LIVE_STREAMS: AtomicUsize = AtomicUsize::new(0);
/// See [`LIVE_STREAMS`].
pub(crate) static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);

/// One record of a plug-in event: a plug-in event recorded once, at one point of one stream
/// (each record of a devstream event makes a fresh one).
pub(crate) struct EventRecord {
    runtime: Arc<LoadedPlugin>,
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
    /// A completion is (or may be) awaited: if the record has not reached the plug-in yet, a
    /// nudge for the completion notifier goes on the stream just before it (see
    /// `crate::notify`).
    nudge_before: AtomicBool,
    /// Set by the nudge put before this record when it runs: the work before the record is
    /// done (made with the nudge; see `EventRecord::settle`).
    nudge_reached: OnceLock<Arc<AtomicBool>>,
}

/// How many possibly incomplete waits a stream remembers (see [`StreamCore::note_wait`]).
const MAX_NOTED_WAITS: usize = 64;

/// A call into the plug-in (or several) at one point of a stream.
pub(crate) type Op = Box<dyn FnOnce(&StreamCore) -> Result<()> + Send>;

/// One thing a stream does, kept in order.
pub(crate) enum Item {
    /// A call into the plug-in at this point of the stream.
    Op(Op),
    /// Later items wait until the flag's value is at least this.
    WaitFlag(Arc<HostFlag>, u32),
    /// Later items wait for this event (once its record has reached the plug-in).
    WaitEvent(Arc<EventRecord>),
}

/// The host side of one plug-in stream.
pub(crate) struct StreamCore {
    pub(crate) id: u64,
    pub(crate) place: Place,
    pub(crate) runtime: Arc<LoadedPlugin>,
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
    /// The errors of work that ran after its submission returned, as `synchronize` reports
    /// them.
    pub(crate) errors: StreamErrors,
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
    pub(crate) pre_capture: Mutex<Option<Arc<EventRecord>>>,
    /// What this stream already waited for (user-created streams with `elide_waits` only: the
    /// default and adopted streams are shared with code devstream does not see).
    pub(crate) tracker: WaitTracker,
    /// A completion was asked of an event recorded here: the stream's later records of
    /// devstream events are preceded by a nudge for the completion notifier (see
    /// `crate::notify`). Never cleared; a record reads it once.
    watched: AtomicBool,
}

/// A wait of a stream on another plug-in queue's event, while it may be incomplete.
struct NotedWait {
    /// Its position in the stream's plug-in queue.
    seq: u64,
    raw: Arc<EventRecord>,
    /// The plug-in accepted it (`stream_wait_event` succeeded): the stream's later work
    /// certainly waits for `raw`. False while it is being handed.
    handed: bool,
}

/// What `pump` takes from the held items: an item, or a wait already numbered and noted.
enum Next {
    Item(Item),
    Wait(Arc<EventRecord>, bool),
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
        runtime: Arc<LoadedPlugin>,
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
            errors: StreamErrors::default(),
            queue: queue_of(QueueKey {
                runtime: runtime_index,
                slot,
                handle: raw.0,
            }),
            me: me.clone(),
            waits: Mutex::new(Vec::new()),
            pre_capture: Mutex::new(None),
            tracker: WaitTracker::new(elide_waits && user_created),
            watched: AtomicBool::new(false),
        })
    }

    /// Ends the plug-in's capture on this stream, whatever devstream knows of it, and destroys
    /// its graph (`what` names the capture in warnings). Where the plug-in cannot end it, the
    /// runtime's capture state is no longer known (`capture::mark_unsure`): its streams are
    /// asked from then on whether they capture.
    pub(crate) fn discard_native_capture(&self, what: &str) {
        match self.runtime.end_capture(self.slot, self.raw) {
            Ok(graph) => {
                if let Err(error) = self.runtime.destroy_graph(self.slot, graph, Handle(0)) {
                    tracing::warn!("devstream-plugin: destroying the graph of {what}: {error}");
                }
            }
            Err(error) => {
                crate::capture::mark_unsure(self.runtime.index());
                tracing::warn!("devstream-plugin: ending {what}: {error}");
            }
        }
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
        self.discard_native_capture("a dropped stream's capture");
        // Its work before the capture no longer needs tracking as "before the capture".
        *lock(&self.pre_capture) = None;
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
    fn note_wait(&self, seq: u64, raw: Arc<EventRecord>) {
        let mut waits = lock(&self.waits);
        waits.retain(|w| !w.raw.complete.load(Ordering::Acquire));
        waits.push(NotedWait {
            seq,
            raw,
            handed: false,
        });
    }

    /// Marks a noted wait accepted by the plug-in (`handed`), or forgets one it refused.
    fn settle_wait(&self, raw: &Arc<EventRecord>, handed: bool) {
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
    ///
    /// A thread inside a plug-in call for another stream (a plug-in calling back into devstream)
    /// holds that stream's lock: when another thread holds this one's, the item is held on the
    /// host, after what this stream already holds, and the dispatcher submits it once the lock
    /// is free (see [`reentrant`]). So is an item a host function submits while another thread
    /// holds the lock: that thread may be inside a plug-in call that waits for the stream's
    /// queued work, this host function included (a synchronous copy that synchronizes the
    /// stream), and would wait for it for ever. And so is an item submitted from inside any
    /// plug-in call (the plug-in called back into devstream): the thread that holds the lock
    /// may be waiting for that call to return, as a callback the plug-in runs inline inside
    /// `stream_add_callback` may wait for a flag that only the completion notifier, now
    /// inside the plug-in's `query_event`, will set.
    pub(crate) fn submit(self: &Arc<Self>, item: Item) -> Result<()> {
        let order = if running_host_fn().is_some() || inside_plugin_call() {
            self.submit_lock.try_enter()
        } else {
            self.submit_lock.enter()
        };
        let Some(_order) = order else {
            self.hold(item);
            return Ok(());
        };
        let item = {
            let deferred = lock(&self.deferred);
            let must_defer = !deferred.items.is_empty()
                || match &item {
                    Item::WaitFlag(flag, value) => flag.get() < *value,
                    Item::WaitEvent(raw) => !raw.is_submitted(),
                    Item::Op(_) => false,
                };
            if must_defer {
                drop(deferred);
                self.hold(item);
                return Ok(());
            }
            item
        };
        self.execute(item)
    }

    /// Holds `item` on the host behind the stream's held work, for the dispatcher.
    fn hold(self: &Arc<Self>, item: Item) {
        let mut deferred = lock(&self.deferred);
        deferred.items.push_back(item);
        if !deferred.registered {
            deferred.registered = true;
            register_blocked(self.clone());
        }
        drop(deferred);
        // The awaited condition may have changed between the check and now.
        wake_dispatcher();
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
    fn note_foreign_wait(&self, seq: u64, raw: &Arc<EventRecord>) -> bool {
        let foreign = raw.queue != self.queue_id();
        if foreign {
            self.note_wait(seq, raw.clone());
        }
        foreign
    }

    /// Hands a wait (already numbered, and noted where `noted`) to the plug-in.
    fn hand_wait(&self, raw: Arc<EventRecord>, noted: bool) -> Result<()> {
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

    /// Submits the deferred items whose conditions hold (the dispatcher's call). Returns
    /// whether any was submitted. Never waits for the submission lock: while another thread
    /// holds it, that thread may be blocked on what only another stream's held work will do
    /// (a callback run inline that waits for a flag a held `write_flag` sets), so the
    /// dispatcher goes on to the other streams and is woken when the lock is released.
    fn pump(self: &Arc<Self>) -> bool {
        let Some(order) = self.submit_lock.try_enter_or_wake_dispatcher() else {
            return false;
        };
        let pumped = self.pump_locked(false).unwrap_or(true);
        drop(order);
        pumped
    }

    /// Hands every held item to the plug-in now, before a capture begins behind them: a flag
    /// wait not yet reached becomes a callback that blocks the plug-in stream until the value
    /// is reached. `Error::Capture` when an item waits for an event whose record is itself
    /// still held on the host (nothing is handed past it), or when the plug-in refuses the
    /// blocking callback or runs it inline on this thread while the flag is not reached (the
    /// wait stays held: blocking here could wait for good, e.g. for this thread's own write),
    /// or when another thread holds the submissions while this one runs a host function or a
    /// plug-in call.
    pub(crate) fn hand_over_held(self: &Arc<Self>) -> Result<()> {
        // Never waits for another thread's submissions from inside a plug-in call for another
        // stream (that thread may be waiting for the lock held here), nor from inside a host
        // function (that thread may be inside a plug-in call that waits for the host function,
        // as a synchronous copy synchronizes the stream first): the work stays held, and the
        // capture is refused below.
        let order = if running_host_fn().is_some() {
            self.submit_lock.try_enter()
        } else {
            self.submit_lock.enter()
        };
        let taken = order.is_some();
        if let Some(_order) = order {
            self.pump_locked(true)?;
        }
        if self.has_deferred() {
            return Err(Error::capture(
                "begin_capture",
                if taken {
                    "the stream holds work behind a wait on an event whose record is itself held \
                     on the host"
                } else {
                    "the stream holds work on the host that must reach the plug-in before the \
                     capture begins, and another thread is submitting to it: from inside a host \
                     function or a plug-in call devstream does not wait for that thread"
                },
            ));
        }
        Ok(())
    }

    /// Hands held items to the plug-in (for [`Self::pump`] and [`Self::hand_over_held`]) under
    /// the submission lock, which the caller holds; with `hand_over`, flag waits not yet
    /// reached are handed to the plug-in as blocking callbacks instead of holding the items
    /// behind them.
    fn pump_locked(self: &Arc<Self>, hand_over: bool) -> Result<bool> {
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
                // while it is between the two (a deferred host function's panic would be
                // missed).
                let next = match deferred.items.pop_front() {
                    Some(Item::WaitEvent(raw)) => {
                        let seq = self.next_seq();
                        let noted = self.note_foreign_wait(seq, &raw);
                        Next::Wait(raw, noted)
                    }
                    Some(Item::WaitFlag(flag, value)) if flag.get() < value => {
                        if flag.completion_gate && self.runtime.event_handles.ambiguous() {
                            // The completion may be asked of a record that shares its handle
                            // with one queued behind the blocking callback (see
                            // `runtime::event_handles`): it stays held.
                            deferred.items.push_front(Item::WaitFlag(flag, value));
                            return Err(Error::capture(
                                "begin_capture",
                                "the stream holds work behind a wait for another stream's or \
                                 backend's work, and this plug-in answered create_event with a \
                                 handle another live event had, so that devstream cannot hand \
                                 the wait over without risking it waiting for work queued after \
                                 it: begin the capture once the wait is reached",
                            ));
                        }
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
                    if taken_back.is_some() {
                        // Not queued (refused, or declined where the plug-in ran it inline):
                        // the wait stays held, and so does what follows.
                        let mut deferred = lock(&self.deferred);
                        deferred.items.push_front(Item::WaitFlag(flag, value));
                        deferred.handing = false;
                        drop(deferred);
                        drop(handing);
                        return Err(result.err().unwrap_or_else(|| {
                            Error::capture(
                                "begin_capture",
                                "the stream holds work behind a wait not yet reached, and the \
                                 plug-in runs callbacks inside stream_add_callback: handing the \
                                 wait over would block this thread until it is reached",
                            )
                        }));
                    }
                    result
                }
            };
            drop(handing);
            if let Err(error) = executed {
                self.record_failure(error);
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
            // While another thread holds the submissions, it may be inside a plug-in call that
            // waits for this stream's work (a synchronous copy synchronizes the stream first),
            // and that work may include the calling host function: waiting for the lock would
            // then never end. So the check below is also made while waiting, and ends the wait.
            let would_wait_for_itself = || host_fn_would_wait_for_itself(self, u64::MAX);
            let _order = match self.submit_lock.enter_unless(would_wait_for_itself) {
                Entry::Taken(guard) => guard,
                Entry::Refused => return Err(waits_for_itself("Stream::synchronize", self.id)),
                Entry::HoldsAnother => {
                    // Inside a plug-in call for another stream, while another thread holds
                    // this stream's submissions: that thread may be waiting for the lock held
                    // here.
                    return Err(Error::WouldDeadlock {
                        op: "Stream::synchronize",
                        reason: format!(
                            "the host function runs inside a plug-in call for another stream, \
                             and another thread is submitting to plug-in stream {}",
                            self.id
                        ),
                    });
                }
            };
            if would_wait_for_itself() {
                // The stream's work includes the calling host function itself, or waits for
                // work queued after it.
                return Err(waits_for_itself("Stream::synchronize", self.id));
            }
            self.record_raw()?
        };
        end.wait_complete()
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

    /// Keeps a failure of the plug-in's own work: every later `synchronize` reports it.
    pub(crate) fn record_failure(&self, error: Error) {
        self.errors.fail(error);
    }

    /// Keeps a failure that leaves the device working (an error of awaited work of another
    /// backend) for the next `synchronize`.
    pub(crate) fn raise_error(&self, error: Error) {
        self.errors.raise(error);
    }

    /// What `synchronize` reports (see [`StreamErrors::report`]).
    pub(crate) fn take_error(&self) -> Option<Error> {
        self.errors.report()
    }

    /// A fresh plug-in event for this stream, not yet recorded.
    pub(crate) fn new_raw(&self) -> Result<Arc<EventRecord>> {
        let handle = self.runtime.create_event(self.slot)?;
        Ok(Arc::new(EventRecord {
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
            nudge_before: AtomicBool::new(false),
            nudge_reached: OnceLock::new(),
        }))
    }

    /// Records `raw` here and now (inside an operation, in stream order). A failed record
    /// leaves the event `Lost`, never pending, so nothing waits forever for it.
    pub(crate) fn record_into(&self, raw: &EventRecord) -> Result<()> {
        // A position for elision: only on a tracked stream, for its own event, with no capture
        // possibly active around the record (a captured record stands for graph nodes).
        let epoch = if self.tracker.enabled() && raw.stream == self.id {
            crate::capture::elision_epoch()
        } else {
            None
        };
        let seq = self.next_seq();
        // Asks the plug-in only while some capture of its runtime is in progress.
        let capturing = crate::capture::capturing(self);
        if let Ok(Capturing::Yes(capture) | Capturing::Invalid(Some(capture), _)) = &capturing {
            raw.captured.store(capture.id(), Ordering::Release);
        }
        if raw.nudge_before.load(Ordering::Acquire) && matches!(capturing, Ok(Capturing::No)) {
            self.put_nudge(Arc::clone(raw.nudge_reached.get_or_init(Arc::default)));
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
    pub(crate) fn record_raw(self: &Arc<Self>) -> Result<Arc<EventRecord>> {
        self.record_fresh(self.new_raw()?)
    }

    /// Records a fresh plug-in event for a devstream event (`record`, `record_event`): preceded
    /// by a nudge where completions of this stream's events are awaited.
    pub(crate) fn record_for_event(self: &Arc<Self>) -> Result<Arc<EventRecord>> {
        let raw = self.new_raw()?;
        if self.watched.load(Ordering::Relaxed) {
            raw.nudge_before.store(true, Ordering::Relaxed);
        }
        self.record_fresh(raw)
    }

    /// Records a fresh plug-in event preceded by a nudge (`Stream::completion`).
    pub(crate) fn record_nudged(self: &Arc<Self>) -> Result<Arc<EventRecord>> {
        let raw = self.new_raw()?;
        raw.nudge_before.store(true, Ordering::Relaxed);
        self.record_fresh(raw)
    }

    /// Submits the record of `raw` (fresh from [`StreamCore::new_raw`]) in stream order.
    fn record_fresh(self: &Arc<Self>, raw: Arc<EventRecord>) -> Result<Arc<EventRecord>> {
        let recorded = raw.clone();
        self.submit(Item::Op(Box::new(move |core: &StreamCore| {
            core.record_into(&recorded)
        })))?;
        Ok(raw)
    }

    /// An event after the stream's work so far, for a release: recorded now, or, while the
    /// stream is capturing (a record would only become part of the capture), the one recorded
    /// before its capture began.
    pub(crate) fn release_marker(self: &Arc<Self>) -> Result<Arc<EventRecord>> {
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
        let result = callback::adding(token, || {
            self.runtime
                .add_callback(self.slot, self.raw, Some(trampoline), token as *mut c_void)
        });
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
    /// wakes the runtime's completion notifier once the work before it is done. Without
    /// `stream_add_callback`, or when the plug-in refuses it, nothing: the notifier's polling
    /// still finds the completion, later.
    fn put_nudge(&self, reached: Arc<AtomicBool>) {
        if self.runtime.table().stream_add_callback.is_none() {
            return;
        }
        let nudge = Callback::Nudge(self.runtime.index(), Some(reached));
        if let (Err(error), _) = self.put_callback(nudge) {
            tracing::debug!("devstream-plugin: a completion nudge: {error}");
        }
    }

    /// Completions of events recorded here are awaited: later records of devstream events
    /// here are preceded by nudges.
    pub(crate) fn mark_watched(&self) {
        if !self.watched.load(Ordering::Relaxed) {
            self.watched.store(true, Ordering::Relaxed);
        }
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
