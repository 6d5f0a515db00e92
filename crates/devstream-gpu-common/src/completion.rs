//! [`Completion`] futures on CUDA and HIP (one implementation, generic over [`RawApi`]).
//!
//! A completion stands for an event: `Event::completion` for the user's event (asked first:
//! done, it is ready at once), `Stream::completion` for an internal event recorded on the stream
//! (like `wait_stream` does: nothing else is added to the stream's work). Pending completions
//! are kept in their device's [`Hub`] and resolved in two ways:
//!
//! - **Doorbells.** Up to [`DOORBELLS`] pending completions of a device at a time each get an
//!   internal notifier stream of their own (made with the device, see below) that waits on the
//!   event and then runs a host function
//!   (`cuLaunchHostFunc`; a stream callback where the runtime has no host functions) that fills
//!   the future on the runtime's callback thread (the waker runs
//!   there: executors' wakers only schedule the task). This is the fast path: a few futures
//!   awaited at a time are woken as soon as the runtime sees the work done.
//! - **The sweeper.** One thread per device (started with the device's first pending
//!   completion, parked whenever none is pending) asks the pending events (`cuEventQuery`)
//!   when a doorbell rings, every 100 ms while every pending completion has a doorbell (so a
//!   device fault, after which host functions never run, still resolves them with the fault,
//!   and a doorbell that cannot ring, queued behind one whose work never completes or behind a
//!   host function that blocks the runtime's callback thread, does not hold its completion
//!   while the event still holds the awaited record),
//!   and with back-off from 50 µs to 2 ms while some have none.
//! - **Stream order.** A completion of one of devstream's own records on a stream it made (a
//!   host buffer's use event) knows where that record stands in its stream ([`RecordOrder`]).
//!   The sweeper asks such a stream's pending records oldest first and stops at the first not
//!   done, since the stream runs in order and every later record waits for it: a program that
//!   submits far ahead (a pipeline's hundreds of chunks, each awaited by a host function)
//!   costs the sweeper one question per stream and round, not one per pending completion.
//!   While such completions are pending and resolving, the spin window stays open (below):
//!   they have no doorbell, and the sweeper is how they are seen.
//!
//! - **The spin window.** For [`SPIN_WINDOW`] after a completion is registered the sweeper
//!   asks the pending events back to back, yielding the processor between rounds, as the
//!   driver's own spin-then-yield synchronisation does: a doorbell's host function runs on the
//!   runtime's callback thread some ten microseconds after the work, which a thread asking the
//!   event sees within one round. A completion awaited soon after it is made (a wait across
//!   backends handing a pipeline's chunk on) resolves about as fast as a thread blocked in the
//!   event's synchronize would see it; one thread per device is busy for at most the window
//!   after each burst of registrations, and the doorbells cover everything that completes
//!   later.
//!
//! Why bounded: the runtime's queue of pending work is finite and shared. Each pending future
//! with a host function of its own (the first design: one notifier stream and one
//! `cuStreamAddCallback` per future) made thousands of streams and host callbacks; on an H100
//! the enqueuing thread then waited inside the driver for room that only those callbacks could
//! free, while `cuStreamAddCallback` callbacks need the driver's lock that thread held: a
//! deadlock. `cuLaunchHostFunc` does not take
//! that lock, and at most [`DOORBELLS`] host functions and notifier streams exist per device
//! however many futures are pending. No thread per future: one sweeper per device.
//!
//! Why the notifiers are made with the device, never when a completion is made: on CUDA, stream
//! creation can wait until work queued on other streams drains: `cuStreamCreateWithPriority`
//! can stall for as long as other streams are held at `cuStreamWaitValue32` waits. A completion
//! made while the caller holds streams (a flag it releases after awaiting) that created a
//! notifier would then spin in the driver for ever. So a
//! device's notifiers are made when devstream first opens the device (before any stream of
//! its own exists), and a completion never creates a stream.

mod order;

pub(crate) use order::RecordOrder;
use order::{sweep_round, Answer, InStreamOrder};

use crate::device::Device;
use crate::error::{check, check_ready};
use crate::event::GpuEvent;
use crate::hostfn::{in_host_function, PanicSlot};
use crate::raw::{Optional, RawApi, RawStream};
use devstream_core::{Completer, Completion, Error, Result};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Pending completions of a device that get a host function (and a notifier stream) each.
pub const DOORBELLS: usize = 16;

/// The sweeper's first wait while some pending completion has no doorbell.
const POLL_FIRST: Duration = Duration::from_micros(50);
/// The sweeper's longest wait while some pending completion has no doorbell.
const POLL_MAX: Duration = Duration::from_millis(2);
/// The sweeper's wait while every pending completion has a doorbell (device faults).
const DOORBELL_CHECK: Duration = Duration::from_millis(100);
/// How long after a completion is registered the sweeper asks the pending events back to back
/// (yielding between rounds) rather than waiting for the doorbells.
const SPIN_WINDOW: Duration = Duration::from_micros(500);

/// A device's pending completions: those the sweeper asks in their stream's order, and all
/// others.
struct PendingSet<A: RawApi> {
    unordered: Vec<Arc<Pending<A>>>,
    ordered: InStreamOrder<Arc<Pending<A>>>,
}

impl<A: RawApi> PendingSet<A> {
    fn is_empty(&self) -> bool {
        self.unordered.is_empty() && self.ordered.is_empty()
    }

    /// Whether every pending completion has a doorbell (those in stream order never do).
    fn all_armed(&self) -> bool {
        self.ordered.is_empty()
            && self
                .unordered
                .iter()
                .all(|p| p.armed.load(Ordering::Acquire))
    }

    fn push(&mut self, pending: Arc<Pending<A>>) {
        match pending.order {
            Some(order) => self.ordered.insert(order, pending),
            None => self.unordered.push(pending),
        }
    }
}

/// Whose event a completion waits on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Source {
    /// An internal event nobody else records (`Stream::completion`).
    Private,
    /// The user's event (`Event::completion`): it may be recorded again while the completion
    /// is pending.
    User,
}

/// One pending completion.
struct Pending<A: RawApi> {
    completer: Mutex<Option<Completer>>,
    /// For a stream completion: the stream's panic slot and id (its first host-function panic
    /// is the result, as `synchronize` reports it; looked at, not taken).
    panic: Option<(Arc<PanicSlot>, u64)>,
    /// The awaited event, kept alive while the completion is pending.
    event: GpuEvent<A>,
    /// A doorbell was launched for it: it fills the future when the awaited record is done;
    /// the sweeper resolves it with an error (a device fault, after which host functions never
    /// run), or as done only while the event still holds the awaited record (`record`), since
    /// asking the event may describe a later record.
    armed: AtomicBool,
    /// Counted in the event's `awaited` (a user event's completion without a doorbell).
    counted: AtomicBool,
    /// The event's `records` count when the completion was made: the record it awaits. `None`
    /// for a foreign handle, which may be recorded where devstream cannot count it.
    record: Option<u64>,
    /// What keeps the event itself alive while this entry exists, where `event` does not own
    /// it (a host buffer's use event, destroyed with the buffer).
    _keep: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// Where the awaited record stands in its stream, if known: asked in that order.
    order: Option<RecordOrder>,
}

use devstream_core::sync::lock;

impl<A: RawApi> Pending<A> {
    /// Fills the future (once; later calls do nothing). `status`: the event's own outcome.
    fn finish(&self, status: Result<()>) {
        self.uncount();
        let Some(completer) = lock(&self.completer).take() else {
            return;
        };
        let result = status.and_then(|()| match &self.panic {
            Some((slot, stream)) => slot.peek(*stream),
            None => Ok(()),
        });
        completer.complete(result);
    }

    /// Leaves the event's count of completions without a doorbell (once).
    fn uncount(&self) {
        if self.counted.swap(false, Ordering::AcqRel) {
            self.event.inner.awaited.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Whether nothing is left to do for it (filled, or the future was dropped).
    fn settled(&self) -> bool {
        lock(&self.completer)
            .as_ref()
            .is_none_or(Completer::is_abandoned)
    }
}

/// A notifier stream of the hub and how many doorbells are queued on it.
struct Notifier {
    raw: RawStream,
    /// Doorbells queued and not rung yet (0: free). Left raised for good when a doorbell's
    /// callback reports a failing context.
    queued: AtomicUsize,
}

/// A device's pending completions, notifier streams and sweeper.
pub(crate) struct Hub<A: RawApi> {
    pending: Mutex<PendingSet<A>>,
    /// The device's notifier streams (at most [`DOORBELLS`]), made with the device and kept
    /// for the process's life like it.
    notifiers: Vec<Notifier>,
    sweeper: OnceLock<std::result::Result<std::thread::Thread, String>>,
    /// How the sweeper waits now: [`SPINNING`], [`POLLING`], [`CHECKING`] or [`IDLE`].
    sweeper_wait: AtomicU8,
    /// Until when the sweeper spins ([`SPIN_WINDOW`] after the latest registration).
    spin_until: Mutex<Option<std::time::Instant>>,
}

/// The sweeper asks the pending events back to back (the spin window is open).
const SPINNING: u8 = 3;

/// The sweeper polls with back-off (a completion without a doorbell is pending).
const POLLING: u8 = 0;
/// The sweeper waits [`DOORBELL_CHECK`] (every pending completion has a doorbell).
const CHECKING: u8 = 1;
/// The sweeper is parked until woken (nothing is pending).
const IDLE: u8 = 2;

impl<A: RawApi> Hub<A> {
    /// Makes the device's notifier streams (as many of [`DOORBELLS`] as the runtime gives;
    /// with none, every completion is the sweeper's). The device's context must be current,
    /// and nothing of devstream's may hold a stream of it yet (see the module documentation).
    pub(crate) fn new(priority: i32) -> Hub<A> {
        let notifiers = (0..DOORBELLS)
            // SAFETY: the context is current; the stream belongs to the hub from now on and
            // is kept for the process's life, like the device.
            .map_while(|_| check::<A, _>(unsafe { A::stream_create(true, priority) }).ok())
            .map(|raw| Notifier {
                raw,
                queued: AtomicUsize::new(0),
            })
            .collect();
        Hub {
            pending: Mutex::new(PendingSet {
                unordered: Vec::new(),
                ordered: InStreamOrder::new(),
            }),
            notifiers,
            sweeper: OnceLock::new(),
            sweeper_wait: AtomicU8::new(IDLE),
            spin_until: Mutex::new(None),
        }
    }
}

/// What a doorbell's host function owns.
struct Doorbell<A: RawApi> {
    pending: Arc<Pending<A>>,
    /// Index of its notifier in the hub.
    notifier: usize,
    device: &'static Device<A>,
}

/// `cuLaunchHostFunc` trampoline of a doorbell: the event is done (host functions run only
/// when the work before them succeeded).
///
/// # Safety
/// `data` comes from `Box::into_raw(Box<Doorbell<A>>)` and is passed to exactly one call.
unsafe extern "C" fn ring<A: RawApi>(data: *mut c_void) {
    // SAFETY: per this function's contract.
    let doorbell = unsafe { Box::from_raw(data.cast::<Doorbell<A>>()) };
    let _scope = crate::hostfn::callback_scope();
    // Nothing here panics (no user code but the waker, whose panic must not unwind into the
    // runtime either). No runtime call: the event handle's release, should this be its last
    // owner, goes to devstream's release thread.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let Doorbell {
            pending,
            notifier,
            device,
        } = *doorbell;
        pending.finish(Ok(()));
        device.completions.notifiers[notifier]
            .queued
            .fetch_sub(1, Ordering::AcqRel);
        // The sweeper drops the settled entry (and its event) and looks at the others.
        if let Some(Ok(sweeper)) = device.completions.sweeper.get() {
            sweeper.unpark();
        }
    }));
}

/// Stream-callback trampoline of a doorbell (runtimes without host functions). A failed
/// status (a device fault) is left to the sweeper, which asks the event and gets the fault.
///
/// # Safety
/// As [`ring`].
unsafe extern "C" fn ring_callback<A: RawApi>(_stream: RawStream, status: i32, data: *mut c_void) {
    if status != 0 {
        // Declared first, so dropped last: the doorbell may hold the last reference to a pending
        // completion whose event's release makes runtime calls, which the scope hands to the
        // release thread (the runtime forbids its calls in its own callbacks).
        let _scope = crate::hostfn::callback_scope();
        // SAFETY: per this function's contract; the future stays pending for the sweeper.
        let doorbell = unsafe { Box::from_raw(data.cast::<Doorbell<A>>()) };
        doorbell.pending.armed.store(false, Ordering::Release);
        if let Some(Ok(sweeper)) = doorbell.device.completions.sweeper.get() {
            sweeper.unpark();
        }
        // The notifier stays busy for good (its count is not lowered): its context is failing.
        return;
    }
    // SAFETY: per this function's contract.
    unsafe { ring::<A>(data) }
}

/// Refuses a registration from inside a host function or stream callback.
pub(crate) fn refuse_in_host_function() -> Result<()> {
    if in_host_function() {
        // Stream callbacks may not call the runtime.
        return Err(Error::WouldDeadlock {
            op: "completion",
            reason: "a completion cannot be registered from inside a host function or stream \
                     callback (the runtime forbids its calls there); register it outside"
                .into(),
        });
    }
    Ok(())
}

/// A future for the work `event` captured (recorded, not inside a capture). `panic`: the
/// stream's slot for a stream completion. The device's context must be current.
pub(crate) fn notify_after<A: RawApi>(
    event: GpuEvent<A>,
    panic: Option<(Arc<PanicSlot>, u64)>,
    source: Source,
) -> Result<Completion> {
    notify_after_keeping(event, panic, source, None, true)
}

/// A completion of the current record of one of devstream's internal events (a host buffer's
/// use event), left to the sweeper: `keep` holds the event, which is not recorded again while
/// held (the next copy takes a fresh one), until the hub lets go of the entry. `order`: where
/// that record stands in its stream, if known (the sweeper then asks it in that order).
///
/// It gets no doorbell: a doorbell waits on a notifier stream behind the doorbells registered
/// before it, and records awaited out of their stream's order (a pipeline's next input buffer,
/// awaited after its previous output) would hold an earlier record's doorbell behind a later
/// one's, which may wait for work that waits for the first. The sweeper asks the event itself,
/// which keeps the awaited record.
pub(crate) fn notify_after_record_of_internal<A: RawApi>(
    event: GpuEvent<A>,
    keep: Box<dyn std::any::Any + Send + Sync>,
    order: Option<RecordOrder>,
) -> Result<Completion> {
    notify_after_keeping(event, None, Source::Private, Some((keep, order)), false)
}

/// What keeps an internal event alive where its `GpuEvent` does not own it, and where the
/// awaited record stands in its stream.
type Kept = (Box<dyn std::any::Any + Send + Sync>, Option<RecordOrder>);

/// [`notify_after`] with what keeps the event alive where `event` does not own it (and the
/// record's order), and whether a doorbell may be armed for it.
fn notify_after_keeping<A: RawApi>(
    event: GpuEvent<A>,
    panic: Option<(Arc<PanicSlot>, u64)>,
    source: Source,
    keep: Option<Kept>,
    doorbell: bool,
) -> Result<Completion> {
    refuse_in_host_function()?;
    let device = event.inner.device;
    let sweeper = device.sweeper()?;
    let foreign = source == Source::User && event.inner.mark.is_foreign();
    let record = (!foreign).then(|| event_records(&event));
    let (completion, completer) = Completion::pending();
    let (keep, order) = keep.map_or((None, None), |(keep, order)| (Some(keep), order));
    let pending = Arc::new(Pending {
        completer: Mutex::new(Some(completer)),
        panic,
        event,
        armed: AtomicBool::new(false),
        counted: AtomicBool::new(source == Source::User),
        record,
        _keep: keep,
        // Only a completion the sweeper alone resolves is kept in stream order.
        order: order.filter(|_| !doorbell),
    });
    if source == Source::User {
        // Counted before it is visible, so that a re-record from now on snapshots it.
        pending.event.inner.awaited.fetch_add(1, Ordering::AcqRel);
    }
    lock(&device.completions.pending).push(pending.clone());
    // A foreign handle may be recorded where devstream cannot see it: it always gets a
    // doorbell (a snapshot of the record awaited now).
    let armed = doorbell && device.arm_doorbell(&pending, foreign);
    if !armed && foreign {
        device.resolve_without_doorbell(&pending);
    }
    // The spin window opens (or stays open) from now; a sweeper that is not spinning already
    // is woken to spin.
    *lock(&device.completions.spin_until) = Some(Instant::now() + SPIN_WINDOW);
    if device.completions.sweeper_wait.load(Ordering::Acquire) != SPINNING {
        sweeper.unpark();
    }
    Ok(completion)
}

/// Gives every pending completion of `event` that has no doorbell one now, before `event` is
/// recorded again (called by the record path when the event's `awaited` count is not zero).
pub(crate) fn before_rerecord<A: RawApi>(event: &GpuEvent<A>) {
    let device = event.inner.device;
    // Completions of a user's event are never kept in stream order.
    let waiting: Vec<Arc<Pending<A>>> = lock(&device.completions.pending)
        .unordered
        .iter()
        .filter(|p| Arc::ptr_eq(&p.event.inner, &event.inner))
        .filter(|p| p.counted.load(Ordering::Acquire))
        .cloned()
        .collect();
    for pending in waiting {
        if !pending.settled() && !device.arm_doorbell(&pending, true) {
            device.resolve_without_doorbell(&pending);
        }
        pending.uncount();
    }
}

impl<A: RawApi> Device<A> {
    /// The device's sweeper thread (started on first use).
    fn sweeper(&'static self) -> Result<&'static std::thread::Thread> {
        let started = self.completions.sweeper.get_or_init(|| {
            // Doorbells may hold the last handle to an event or a notifier: the process's
            // release thread starts with the first sweeper, not at some later completion (the
            // thread count stays flat however many completions follow).
            let _ = crate::hostfn::release_thread();
            std::thread::Builder::new()
                .name("devstream-complete".into())
                .spawn(move || self.sweep_forever())
                .map(|handle| handle.thread().clone())
                .map_err(|e| e.to_string())
        });
        started.as_ref().map_err(|reason| Error::Abandoned {
            reason: format!("the device's completion thread could not be started: {reason}"),
        })
    }

    /// Gives `pending` a doorbell on a free notifier, or, when `force` and none is free,
    /// queued behind the doorbells of the least busy one (it then rings after those events
    /// too, never before its own). Answers whether it has one. The context must be current.
    /// Never creates a stream (see the module documentation).
    fn arm_doorbell(&'static self, pending: &Arc<Pending<A>>, force: bool) -> bool {
        let hub = &self.completions;
        let free = hub.notifiers.iter().position(|notifier| {
            notifier
                .queued
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        let index = match free {
            Some(index) => index,
            None if force => {
                let Some((index, notifier)) = hub
                    .notifiers
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, notifier)| notifier.queued.load(Ordering::Acquire))
                else {
                    return false;
                };
                notifier.queued.fetch_add(1, Ordering::AcqRel);
                index
            }
            None => return false,
        };
        let notifier = &hub.notifiers[index];
        // SAFETY: the notifier and the event are alive and of this device; context current.
        if unsafe { A::stream_wait_event(notifier.raw, pending.event.inner.raw) }.is_err() {
            notifier.queued.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        pending.armed.store(true, Ordering::Release);
        let data = Box::into_raw(Box::new(Doorbell {
            pending: pending.clone(),
            notifier: index,
            device: self,
        }));
        // SAFETY: the trampolines match the host-function and stream-callback signatures and
        // take ownership of `data` exactly once when the runtime calls them.
        let launched = unsafe {
            if A::supports(Optional::LaunchHostFunc) {
                A::launch_host_func(notifier.raw, ring::<A>, data.cast())
            } else {
                // Runtimes without host functions (HIP of ROCm 5.2): a stream callback. The
                // notifier carries nothing but doorbells, so no enqueue waits behind it.
                A::stream_add_callback(notifier.raw, ring_callback::<A>, data.cast())
            }
        };
        if launched.is_err() {
            // SAFETY: the runtime refused it: we still own `data`.
            drop(unsafe { Box::from_raw(data) });
            pending.armed.store(false, Ordering::Release);
            // It still waits for the event: a later doorbell on it rings after that event at
            // the earliest; the sweeper covers both.
            notifier.queued.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        pending.uncount();
        true
    }

    /// For a completion that must describe the event's current record but got no doorbell (the
    /// device has no notifier, or the runtime refused the wait or host function): done already, it is
    /// filled; otherwise it is abandoned with an error, never waited for here (the caller may
    /// be about to record the event again, and the work may wait for that caller).
    ///
    /// The question is devstream's own, asked on behalf of a record or a registration, which
    /// are allowed beside every capture: asked with this thread in Relaxed mode, so that no
    /// capture in progress (another thread's in `Global` mode, this one's in `ThreadLocal`
    /// mode) counts it as unsafe. The record asked about is outside every capture: no
    /// completion is made for an event recorded inside one, and a re-record into a capture
    /// comes after this question.
    #[cold]
    fn resolve_without_doorbell(&self, pending: &Pending<A>) {
        let _relaxed = crate::ext::CaptureModeGuard::<A>::relaxed();
        // SAFETY: the event is alive while `pending` is; the context is current.
        let status = match check_ready::<A>(unsafe { A::event_query(pending.event.inner.raw) }) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::Abandoned {
                reason: "the event was recorded again while its completion was pending, and no \
                         notifier stream could keep the earlier record"
                    .into(),
            }),
            Err(e) => Err(e),
        };
        pending.finish(status);
    }

    /// The sweeper's loop: parked while nothing is pending; otherwise asks the pending events
    /// when woken (a registration or a doorbell) or when its wait runs out.
    fn sweep_forever(&'static self) {
        let hub = &self.completions;
        let mut backoff = POLL_FIRST;
        // This thread asks questions only (see `sweep`): it stays in Relaxed mode for good where
        // the runtime has modes, rather than exchanging the mode twice per round (two driver
        // calls in each round of the spin window, before the events are asked).
        let relaxed_for_good = crate::ext::CaptureModeGuard::<A>::relaxed()
            .map(std::mem::forget)
            .is_some();
        loop {
            let wait = {
                // Decided under the lock a registration pushes under, so that a registration
                // either is seen here or sees the new state and wakes the sweeper.
                let pending = lock(&hub.pending);
                let spinning = !pending.is_empty()
                    && lock(&hub.spin_until).is_some_and(|until| Instant::now() < until);
                let (state, wait) = if pending.is_empty() {
                    (IDLE, None)
                } else if spinning {
                    (SPINNING, Some(Duration::ZERO))
                } else if pending.all_armed() {
                    (CHECKING, Some(DOORBELL_CHECK))
                } else {
                    (POLLING, Some(backoff))
                };
                hub.sweeper_wait.store(state, Ordering::Release);
                wait
            };
            match wait {
                None => std::thread::park(),
                Some(Duration::ZERO) => std::thread::yield_now(),
                Some(wait) => std::thread::park_timeout(wait),
            }
            if self.sweep(relaxed_for_good) {
                backoff = POLL_FIRST;
                // Completions kept in stream order have no doorbell: while they resolve (a
                // pipeline handing chunks on), the window stays open, as it does after each
                // registration.
                if !lock(&hub.pending).ordered.is_empty() {
                    *lock(&hub.spin_until) = Some(Instant::now() + SPIN_WINDOW);
                }
            } else {
                backoff = (backoff * 2).min(POLL_MAX);
            }
        }
    }

    /// Resolves every pending completion whose event is done (or failed) and drops settled
    /// ones; those kept in stream order are asked oldest first per stream, up to the first
    /// not done. Answers whether anything was resolved. `relaxed_for_good`: this thread is in
    /// Relaxed mode already.
    fn sweep(&self, relaxed_for_good: bool) -> bool {
        let snapshot: Vec<Arc<Pending<A>>> = {
            let pending = lock(&self.completions.pending);
            if pending.is_empty() {
                return false;
            }
            pending.unordered.clone()
        };
        // The questions run with this thread in Relaxed mode: a Global-mode capture begun on
        // another thread forbids other threads' unsafe calls, and the runtime invalidates it
        // when one is made. Checking for captures first cannot close that window, since a
        // capture may begin between the check and a question (a sweep asks every pending
        // event, back to back in the spin window). Where the mode cannot be exchanged, no
        // question while a capture begun through devstream is in progress (doorbells still
        // ring), and the window stays.
        let relaxed = (!relaxed_for_good)
            .then(crate::ext::CaptureModeGuard::<A>::relaxed)
            .flatten();
        if !relaxed_for_good
            && relaxed.is_none()
            && self.active_captures.load(Ordering::Acquire) > 0
        {
            return false;
        }
        let bound = self.bind();
        let mut resolved = false;
        for pending in &snapshot {
            resolved |= ask(pending, &bound) == Answer::Resolved;
        }
        // Those kept in stream order: per stream oldest first, up to the first not done.
        let mut leaving = Vec::new();
        resolved |= sweep_round(
            &self.completions.pending,
            |set| &mut set.ordered,
            |pending| pending.settled(),
            |pending| ask(pending, &bound),
            &mut leaving,
        );
        // Settled entries leave the hub. Their events are released here, on our own thread, and
        // after the hub's lock is let go: a release is a runtime call, which may wait for the
        // driver, and registrations must never wait behind that (a doorbell still queued keeps
        // its own reference).
        let settled: Vec<Arc<Pending<A>>> = {
            let mut pending = lock(&self.completions.pending);
            let (settled, live) = std::mem::take(&mut pending.unordered)
                .into_iter()
                .partition(|pending| pending.settled());
            pending.unordered = live;
            settled
        };
        for pending in &settled {
            // A dropped future's entry: its event needs no snapshot any more.
            pending.uncount();
        }
        drop(settled);
        drop(leaving);
        drop(snapshot);
        resolved
    }
}

/// Asks `pending`'s event (unless it is settled or stands for captured work) and fills the
/// future where the answer describes the awaited record. `bound`: whether the device's context
/// is current on this thread.
fn ask<A: RawApi>(pending: &Pending<A>, bound: &Result<()>) -> Answer {
    // An event recorded into a capture stands for graph work: not asked.
    if pending.settled() || pending.event.inner.captured.load(Ordering::Acquire) {
        return Answer::Unknown;
    }
    let asked_about = event_records(&pending.event);
    let status = match bound {
        // SAFETY: the event is alive while `pending` is; the context is current.
        Ok(()) => check_ready::<A>(unsafe { A::event_query(pending.event.inner.raw) }),
        Err(e) => Err(e.clone()),
    };
    let armed = pending.armed.load(Ordering::Acquire);
    // The answer describes the awaited record: it was the event's record before the
    // question and still is after it (a record raises the count before it is made).
    let same_record =
        pending.record == Some(asked_about) && event_records(&pending.event) == asked_about;
    match status {
        Ok(false) if same_record => Answer::NotDone,
        Ok(false) => Answer::Unknown,
        // Its doorbell may not ring soon: queued behind a doorbell whose work never
        // completes, or behind a host function that blocks the runtime's callback
        // thread (one per process on CUDA, shared with HIP on the HIP-on-CUDA
        // shim). The answer is about its own record: filled here, and the doorbell
        // finds it filled.
        Ok(true) if armed && same_record => {
            pending.finish(Ok(()));
            Answer::Resolved
        }
        // Its doorbell fills it (the event may since describe a later record).
        Ok(true) if armed => Answer::Unknown,
        Ok(true) => {
            pending.finish(Ok(()));
            Answer::Resolved
        }
        // Capture rules answer for the question, not for the work: asked again later.
        Err(Error::Capture { .. }) => Answer::Unknown,
        Err(e) => {
            pending.finish(Err(e));
            Answer::Resolved
        }
    }
}

/// How many times `event` was recorded through devstream (see `EventInner::records`).
fn event_records<A: RawApi>(event: &GpuEvent<A>) -> u64 {
    event.inner.records.load(Ordering::SeqCst)
}

/// `Event::completion`.
pub(crate) fn event_completion<A: RawApi>(event: &GpuEvent<A>) -> Completion {
    if !event.inner.recorded.load(Ordering::Relaxed) {
        return Completion::ready(Ok(()));
    }
    if event.inner.captured.load(Ordering::Acquire) {
        // Waiting on it from a notifier would pull the notifier into that capture.
        return Completion::ready(Err(Error::capture(
            "Event::completion",
            "the event was last recorded inside a capture: it stands for graph work",
        )));
    }
    // Before any runtime call: inside a host function the runtime refuses them all (CUDA answers
    // `CUDA_ERROR_NOT_PERMITTED` even for the context query of `bind`).
    let result = refuse_in_host_function()
        .and_then(|()| event.inner.device.bind())
        .and_then(|()| {
            // The caller may be capturing on this thread (a capturing stream of another backend
            // or of this device waiting on the event): its `Global`/`ThreadLocal` mode forbids
            // the query below on this thread, though it neither touches nor joins the capture.
            let _relaxed = crate::ext::CaptureModeGuard::<A>::relaxed();
            // Done already (the common case for events awaited late): nothing to register.
            // SAFETY: the event is alive while `event` is.
            if check_ready::<A>(unsafe { A::event_query(event.inner.raw) })? {
                return Ok(Completion::ready(Ok(())));
            }
            notify_after(event.clone(), None, Source::User)
        });
    result.unwrap_or_else(|error| Completion::ready(Err(error)))
}
