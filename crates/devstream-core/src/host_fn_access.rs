//! Host functions given host buffers: ordered against the buffers' other uses by waits.
//!
//! `Stream::launch_host_func_with(&[&buffer], f)` runs `f` on a stream with the bytes of
//! host buffers of any backend. A host function that reads or writes a host buffer with
//! `HostBuffer::read`/`write` must block until the buffer's queued copies are done, and is
//! refused (`Error::WouldDeadlock`) where one of them may be queued behind the host function
//! itself, as in a pipeline whose next stage's copy of the buffer waits for this stage. A host
//! function *given* the buffer is ordered instead, in the order the uses were submitted,
//! whatever their streams and backends, and no thread blocks for it:
//!
//! * **Before.** Its stream first waits (`DeviceStream::wait_completion`) for the buffer's
//!   uses submitted before it: the copies still queued (the backend's snapshot,
//!   [`HostFnAccess::before`]) and host functions given the buffer earlier
//!   ([`HostFnUses::begin`]).
//! * **After.** A copy of the buffer submitted after it, on any stream, waits for it: the
//!   backend's copy path has its stream wait for each of [`HostFnUses::awaited`], under the
//!   lock its snapshot is taken under, so every copy is either in the snapshot or waits. Host
//!   reads and writes block until it has run ([`HostFnUses::wait_idle`]), as they block for
//!   queued copies, and inside a host function are refused while it is pending.
//!
//! So `f` has the bytes to itself while it runs. A registered use ends when the host function
//! has run, or when it is dropped unrun (its stream failed, or the submission failed): in
//! both cases what waits for it goes on.
//!
//! **Registration order is submission order.** A use is registered before its host function
//! is queued on its stream, so for a moment a use exists that is not on any stream yet. Work
//! that waits for it and is queued on the same stream in that moment would be ahead of it
//! there and wait for it for ever: a copy of the buffer submitted from another thread, or
//! another host function given it. So a copy's [`HostFnUses::awaited`] waits (a moment, under
//! the copy path's lock) until the latest use is queued ([`HostFnUse::submission`]), and a
//! host function given the buffer waits the same way after its registration and before it is
//! queued ([`HostFnUse::wait_earlier_queued`]). And a host function given several buffers
//! registers its uses of all of them under one lock ([`registration`]), so two such host
//! functions never register in opposite orders on two buffers and wait for each other.
//!
//! ```
//! use devstream_core::foreign::BackendKey;
//! use devstream_core::host_fn_access::HostFnUses;
//! use devstream_core::Place;
//!
//! let uses = HostFnUses::new();
//! let runner = BackendKey::of(&Place::Cpu);
//! let (earlier, first) = uses.begin(runner);
//! assert!(earlier.is_empty());
//! // A second host function given the buffer waits for the first, as does a later copy.
//! let (mut earlier, second) = uses.begin(runner);
//! assert_eq!(earlier.len(), 1);
//! // Both are queued on their streams (a copy waits for that moment before it waits for them).
//! drop(first.submission());
//! drop(second.submission());
//! // A copy waits for the latest, which ends only after every earlier one has.
//! let mut copy_waits = uses.awaited(&Place::Cpu);
//! assert_eq!(copy_waits.len(), 1);
//! assert!(!uses.is_idle());
//! drop(first); // the first host function ran
//! assert_eq!(devstream_core::foreign::ready_now(&mut earlier[0]), Some(Ok(())));
//! assert_eq!(devstream_core::foreign::ready_now(&mut copy_waits[0]), None);
//! drop(second);
//! assert_eq!(devstream_core::foreign::ready_now(&mut copy_waits[0]), Some(Ok(())));
//! assert!(uses.is_idle());
//! uses.wait_idle(); // returns at once
//! ```

use crate::foreign::{BackendKey, PendingWait};
use crate::sync::lock;
use crate::{Completer, Completion};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Held while a host function given several buffers registers its uses of them (see the module
/// documentation, "Registration order is submission order").
static REGISTRATION: Mutex<()> = Mutex::new(());

/// Held while a host function given several buffers (or a graph launch that tracks several)
/// registers on them: two such registrations never interleave, so they never wait for each
/// other's uses in opposite orders.
pub fn registration() -> MutexGuard<'static, ()> {
    lock(&REGISTRATION)
}

/// Waits, on `shared`'s pending list, until its latest use is queued on its stream (or none is
/// pending).
fn until_latest_queued<'a>(
    shared: &'a UsesShared,
    mut pending: MutexGuard<'a, Vec<Arc<UseSlot>>>,
) -> MutexGuard<'a, Vec<Arc<UseSlot>>> {
    while pending
        .last()
        .is_some_and(|slot| !slot.queued.load(Ordering::Acquire))
    {
        pending = shared.sleep(pending);
    }
    pending
}

/// The host functions given a host buffer that have not run yet (one per buffer, kept by its
/// backend beside the buffer's copy tracking).
#[derive(Default)]
pub struct HostFnUses {
    shared: Arc<UsesShared>,
}

#[derive(Default)]
struct UsesShared {
    /// In submission order.
    pending: Mutex<Vec<Arc<UseSlot>>>,
    /// `pending.len()`, readable without the lock (the common case: no host function given
    /// the buffer is pending, and a copy or access asks nothing more).
    count: AtomicUsize,
    /// Notified when a use ends or is queued on its stream, where someone waits for that.
    changed: Condvar,
    /// Threads waiting on `changed` (changed under `pending`'s lock): with none, a use that
    /// ends or is queued notifies nobody (a notification is a system call).
    sleepers: AtomicUsize,
}

impl UsesShared {
    /// Waits on `changed`, counted in `sleepers`.
    fn sleep<'a>(
        &'a self,
        pending: MutexGuard<'a, Vec<Arc<UseSlot>>>,
    ) -> MutexGuard<'a, Vec<Arc<UseSlot>>> {
        self.sleepers.fetch_add(1, Ordering::Relaxed);
        let pending = crate::sync::wait(&self.changed, pending);
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        pending
    }

    /// Wakes the waiters on `changed`, if any (called under `pending`'s lock).
    fn wake(&self) {
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            self.changed.notify_all();
        }
    }
}

/// One pending host function's use.
struct UseSlot {
    /// Who runs it: the backend of the host function's stream (for the host-function rule of
    /// waits across backends, `crate::foreign`, "Host functions").
    runner: BackendKey,
    /// The completions that wait for it, each with its registration as a pending wait of
    /// the waiting backend on the runner's; `None` once it has ended.
    waiters: Mutex<Option<Vec<(Completer, PendingWait)>>>,
    /// Its host function is queued on its stream (or will never be): written under the
    /// buffer's `pending` lock.
    queued: AtomicBool,
}

impl UseSlot {
    /// A completion ready when this use ends, for a stream of `waiting`'s backend; `None` if
    /// it has ended.
    fn await_end(&self, waiting: BackendKey) -> Option<Completion> {
        let mut waiters = lock(&self.waiters);
        let list = waiters.as_mut()?;
        let (completion, completer) = Completion::pending();
        list.push((completer, PendingWait::register(self.runner, waiting)));
        Some(completion)
    }
}

impl HostFnUses {
    /// No use pending.
    pub fn new() -> HostFnUses {
        HostFnUses::default()
    }

    /// Whether no host function given the buffer is pending.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.shared.count.load(Ordering::Acquire) == 0
    }

    /// Completions of the pending host functions given the buffer, for a copy submitted now
    /// on a stream of `waiting`: its stream waits for each before the copy. That is the latest
    /// one alone (a use's waiters are released only once every earlier use has ended too, see
    /// [`HostFnUse`]'s drop), so a copy costs one wait however many are pending. Empty (and
    /// lock-free) when none is pending.
    ///
    /// A use registered and not queued on its stream yet is waited for until it is (a moment:
    /// its host function is being submitted): the copy is then queued after it, also where the
    /// two share a stream.
    pub fn awaited(&self, waiting: &crate::Place) -> Vec<Completion> {
        if self.is_idle() {
            return Vec::new();
        }
        let waiting = BackendKey::of(waiting);
        until_latest_queued(&self.shared, lock(&self.shared.pending))
            .last()
            .and_then(|slot| slot.await_end(waiting))
            .into_iter()
            .collect()
    }

    /// Registers a host function given the buffer, run by a stream of backend `runner`:
    /// answers the completion of the host functions given it earlier (the new one waits for
    /// them: the latest alone stands for all, as in [`HostFnUses::awaited`]) and the
    /// registration, which ends the use when dropped.
    pub fn begin(&self, runner: BackendKey) -> (Vec<Completion>, HostFnUse) {
        let mut pending = lock(&self.shared.pending);
        let earlier = pending
            .last()
            .and_then(|slot| slot.await_end(runner))
            .into_iter()
            .collect();
        let previous = pending.last().cloned();
        let slot = Arc::new(UseSlot {
            runner,
            waiters: Mutex::new(Some(Vec::new())),
            queued: AtomicBool::new(false),
        });
        pending.push(slot.clone());
        self.shared.count.store(pending.len(), Ordering::Release);
        drop(pending);
        (
            earlier,
            HostFnUse {
                shared: self.shared.clone(),
                slot,
                previous,
            },
        )
    }

    /// Blocks until no host function given the buffer is pending (host reads and writes from
    /// outside host functions; inside one, a pending use is refused instead, since it may be
    /// queued behind the caller).
    pub fn wait_idle(&self) {
        if self.is_idle() {
            return;
        }
        let mut pending = lock(&self.shared.pending);
        while !pending.is_empty() {
            pending = self.shared.sleep(pending);
        }
    }
}

impl fmt::Debug for HostFnUses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostFnUses")
            .field("pending", &self.shared.count.load(Ordering::Relaxed))
            .finish()
    }
}

/// A registered host function's use of a buffer ([`HostFnUses::begin`]): dropping it ends the
/// use and lets what waits for it go on.
pub struct HostFnUse {
    shared: Arc<UsesShared>,
    slot: Arc<UseSlot>,
    /// The use registered just before it, which it waits for.
    previous: Option<Arc<UseSlot>>,
}

impl HostFnUse {
    /// Identifies the buffer (its [`HostFnUses`]): two uses of one buffer answer the same.
    pub fn buffer_id(&self) -> usize {
        Arc::as_ptr(&self.shared) as usize
    }

    /// Blocks until the use registered before this one on the buffer (which it waits for) is
    /// queued on its stream, or has ended: called after registering and before queuing this
    /// use's host function, so that on a stream they share it is queued after that one. A
    /// moment: that host function is being submitted, and its submitter holds no lock this
    /// caller holds (uses are registered in one order, see [`registration`]).
    pub fn wait_earlier_queued(&self) {
        let Some(previous) = &self.previous else {
            return;
        };
        let mut pending = lock(&self.shared.pending);
        while !previous.queued.load(Ordering::Acquire)
            && pending.iter().any(|slot| Arc::ptr_eq(slot, previous))
        {
            pending = self.shared.sleep(pending);
        }
    }

    /// Notes that this use's host function is queued: called as it starts to run (a synchronous
    /// plug-in runs a host function inside its submission, before [`HostFnUse::submission`]
    /// is dropped, and what it does must not wait for its own use to be queued).
    pub fn mark_queued(&self) {
        if !self.slot.queued.load(Ordering::Acquire) {
            let _pending = lock(&self.shared.pending);
            self.slot.queued.store(true, Ordering::Release);
            self.shared.wake();
        }
    }

    /// The mark that this use's host function is queued: dropped once the submission has
    /// returned (queued, or refused: then the use ends too), it lets copies and host functions
    /// that wait for this use be queued.
    pub fn submission(&self) -> Submission {
        Submission {
            shared: self.shared.clone(),
            slot: self.slot.clone(),
        }
    }
}

/// A use's submission in progress ([`HostFnUse::submission`]): dropping it notes that the
/// use's host function is queued (or never will be).
pub struct Submission {
    shared: Arc<UsesShared>,
    slot: Arc<UseSlot>,
}

impl Drop for Submission {
    fn drop(&mut self) {
        let _pending = lock(&self.shared.pending);
        self.slot.queued.store(true, Ordering::Release);
        self.shared.wake();
    }
}

impl fmt::Debug for Submission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Submission")
            .field("buffer", &(Arc::as_ptr(&self.shared) as usize))
            .finish()
    }
}

impl fmt::Debug for HostFnUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostFnUse")
            .field("buffer", &self.buffer_id())
            .finish()
    }
}

impl Drop for HostFnUse {
    /// Ends the use. What waits for it is released only once every earlier use has ended too:
    /// while an earlier one is pending (a use dropped unrun can end before the uses it follows),
    /// the waiters move to it. So waiting for the latest use stands for waiting for all.
    fn drop(&mut self) {
        let waiters = {
            let mut pending = lock(&self.shared.pending);
            let own = lock(&self.slot.waiters).take().unwrap_or_default();
            let index = pending
                .iter()
                .position(|slot| Arc::ptr_eq(slot, &self.slot));
            let ready = match index {
                Some(index) if index > 0 => {
                    // In the list, so still pending: its waiters are `Some`.
                    let mut earlier = lock(&pending[index - 1].waiters);
                    match earlier.as_mut() {
                        Some(list) => {
                            list.extend(own);
                            Vec::new()
                        }
                        None => own,
                    }
                }
                _ => own,
            };
            if let Some(index) = index {
                pending.remove(index);
            }
            self.shared.count.store(pending.len(), Ordering::Release);
            // Ended: never queued now, or run. Whoever waits for it to be queued or for the
            // buffer to be idle looks again.
            self.slot.queued.store(true, Ordering::Release);
            self.shared.wake();
            ready
        };
        // Outside the locks: a completion's waker may run a relay that submits or writes.
        for (completer, registration) in waiters {
            drop(registration);
            completer.complete(Ok(()));
        }
    }
}

/// A host buffer's bytes for the host function given it, called once
/// [`HostFnAccess::before`] has completed. The backend keeps the memory alive in it and
/// settles what lands in the buffer lazily (wgpu's readbacks) in [`view`](HostBytes::view).
pub trait HostBytes: Send {
    /// The bytes, held while the view lives (with, where the backend has one, the lock its
    /// copies take while they run).
    fn view(&mut self) -> Box<dyn DerefMut<Target = [u8]> + '_>;
}

/// Bytes kept under a mutex (the CPU and wgpu backends' host buffers), as a view of `[u8]`.
pub struct LockedBytes<'a>(pub MutexGuard<'a, Box<[u8]>>);

impl Deref for LockedBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl DerefMut for LockedBytes<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// What a host function given a host buffer needs from the buffer's backend
/// (`HostBuffer::host_fn_access`).
///
/// Who queues the host function (the facade's `launch_host_func_with`) registers every buffer
/// under [`registration`], then, before queuing it, calls
/// [`HostFnUse::wait_earlier_queued`] and runs [`HostFnAccess::before_queued`], and holds
/// [`HostFnUse::submission`] until the submission has returned: copies of the buffer wait for
/// that moment, so a host function registered and never marked queued holds them for as long
/// as it is pending.
pub struct HostFnAccess {
    /// Completions of the buffer's uses submitted before (queued copies, host functions given
    /// it earlier), each with the backend whose work it is: the host function's stream waits
    /// for them first.
    pub before: Vec<(Completion, BackendKey)>,
    /// The host function's use, registered: copies submitted from now on wait for it.
    pub registered: HostFnUse,
    /// The buffer's bytes, for the host function.
    pub bytes: Box<dyn HostBytes>,
    /// Blocks until the copies in `before` are queued on their streams, where a backend
    /// queues a copy only after registering it (the plug-in layer): run after registration and
    /// before the host function is queued, so that on a stream they share it is queued after
    /// them. `None` where every copy is queued as it registers.
    pub before_queued: Option<Box<dyn FnOnce() + Send>>,
}

impl HostFnAccess {
    /// Registers a host function given a buffer whose backend is `owner`: `uses` is the
    /// buffer's [`HostFnUses`], `queued` the completions of its copies still queued (the
    /// backend's snapshot, taken under the same lock as its copies check [`HostFnUses::awaited`]
    /// and register themselves), `runner` the backend of the host function's stream.
    pub fn new(
        uses: &HostFnUses,
        owner: BackendKey,
        queued: Vec<Completion>,
        runner: BackendKey,
        bytes: Box<dyn HostBytes>,
    ) -> HostFnAccess {
        let (earlier, registered) = uses.begin(runner);
        let mut before: Vec<(Completion, BackendKey)> =
            queued.into_iter().map(|c| (c, owner)).collect();
        // Each earlier host function's runner is not kept per completion here: counted as the
        // runner of this one (both run host functions the rule may refuse alike).
        before.extend(earlier.into_iter().map(|c| (c, runner)));
        HostFnAccess {
            before,
            registered,
            bytes,
            before_queued: None,
        }
    }

    /// The same, with `wait` as [`HostFnAccess::before_queued`].
    pub fn waiting_until_queued(mut self, wait: impl FnOnce() + Send + 'static) -> HostFnAccess {
        self.before_queued = Some(Box::new(wait));
        self
    }
}

impl fmt::Debug for HostFnAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostFnAccess")
            .field("before", &self.before.len())
            .field("registered", &self.registered)
            .finish_non_exhaustive()
    }
}

/// The copies of a host buffer still queued, for the backend's snapshot (the `queued` of
/// [`HostFnAccess::new`]): each copy registers as it is queued ([`QueuedCopies::begin`], under
/// the lock the snapshot is taken under) and ends when it has touched the buffer, or when it
/// is dropped unrun (its [`QueuedCopy`] dropped). Copies are numbered as they register, so a
/// [`completion`](QueuedCopies::completion) taken now waits for exactly the copies registered
/// before it, whatever order they end in, and not for those registered after.
///
/// ```
/// use devstream_core::host_fn_access::QueuedCopies;
///
/// let copies = QueuedCopies::new();
/// assert!(copies.completion().is_none()); // nothing queued: nothing to wait for
/// let first = copies.begin();
/// let mut before = copies.completion().expect("a copy is queued");
/// let second = copies.begin(); // registered after: not awaited by `before`
/// drop(first);
/// assert_eq!(devstream_core::foreign::ready_now(&mut before), Some(Ok(())));
/// assert_eq!(copies.len(), 1);
/// drop(second);
/// assert!(copies.is_empty());
/// ```
#[derive(Default)]
pub struct QueuedCopies {
    shared: Arc<CopiesShared>,
}

#[derive(Default)]
struct CopiesShared {
    state: Mutex<CopiesState>,
    /// Notified when no copy is outstanding.
    idle: Condvar,
}

#[derive(Default)]
struct CopiesState {
    /// The number the next copy registers under.
    next: u64,
    outstanding: std::collections::BTreeSet<u64>,
    /// Each ready once no copy numbered below its bound is outstanding.
    waiters: Vec<(u64, Completer)>,
}

impl QueuedCopies {
    /// No copy queued.
    pub fn new() -> QueuedCopies {
        QueuedCopies::default()
    }

    /// Registers a queued copy; it ends when the answer is dropped.
    pub fn begin(&self) -> QueuedCopy {
        let mut state = lock(&self.shared.state);
        let number = state.next;
        state.next += 1;
        state.outstanding.insert(number);
        QueuedCopy {
            shared: self.shared.clone(),
            number,
        }
    }

    /// How many registered copies have not ended.
    pub fn len(&self) -> usize {
        lock(&self.shared.state).outstanding.len()
    }

    /// Whether every registered copy has ended.
    pub fn is_empty(&self) -> bool {
        lock(&self.shared.state).outstanding.is_empty()
    }

    /// A completion ready once every copy registered so far has ended; `None` if all have.
    pub fn completion(&self) -> Option<Completion> {
        let mut state = lock(&self.shared.state);
        if state.outstanding.is_empty() {
            return None;
        }
        let (completion, completer) = Completion::pending();
        let bound = state.next;
        state.waiters.push((bound, completer));
        Some(completion)
    }

    /// Blocks until every registered copy has ended (including those registered meanwhile).
    pub fn wait_idle(&self) {
        let mut state = lock(&self.shared.state);
        while !state.outstanding.is_empty() {
            state = crate::sync::wait(&self.shared.idle, state);
        }
    }
}

impl fmt::Debug for QueuedCopies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueuedCopies")
            .field("outstanding", &self.len())
            .finish()
    }
}

/// A registered queued copy ([`QueuedCopies::begin`]): dropping it ends the copy.
pub struct QueuedCopy {
    shared: Arc<CopiesShared>,
    number: u64,
}

impl fmt::Debug for QueuedCopy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueuedCopy")
            .field("number", &self.number)
            .finish()
    }
}

impl Drop for QueuedCopy {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.outstanding.remove(&self.number);
        // Every copy numbered below `first` has ended: the waiters bounded by it are ready.
        let first = state.outstanding.first().copied().unwrap_or(u64::MAX);
        let waiters = std::mem::take(&mut state.waiters);
        let (ready, waiting): (Vec<_>, Vec<_>) =
            waiters.into_iter().partition(|(bound, _)| *bound <= first);
        state.waiters = waiting;
        if state.outstanding.is_empty() {
            self.shared.idle.notify_all();
        }
        drop(state);
        // Outside the lock: a completion's waker may run a relay that submits or writes.
        for (_, completer) in ready {
            completer.complete(Ok(()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::foreign::ready_now;
    use crate::Place;

    #[test]
    fn a_use_dropped_unrun_releases_its_waiters_and_the_idle_wait() {
        let uses = Arc::new(HostFnUses::new());
        let (_, first) = uses.begin(BackendKey::of(&Place::Cpu));
        drop(first.submission());
        let mut waits = uses.awaited(&Place::Cuda(0));
        assert_eq!(ready_now(&mut waits[0]), None);
        let waiter = {
            let uses = uses.clone();
            std::thread::spawn(move || uses.wait_idle())
        };
        drop(first);
        waiter.join().unwrap();
        assert_eq!(ready_now(&mut waits[0]), Some(Ok(())));
        assert!(uses.awaited(&Place::Cpu).is_empty());
    }

    #[test]
    fn a_copies_completion_waits_for_every_copy_before_it_whatever_order_they_end_in() {
        let copies = Arc::new(QueuedCopies::new());
        let (first, second) = (copies.begin(), copies.begin());
        let mut both = copies.completion().expect("two copies queued");
        let third = copies.begin();
        drop(second);
        assert_eq!(ready_now(&mut both), None);
        let waiter = {
            let copies = copies.clone();
            std::thread::spawn(move || copies.wait_idle())
        };
        drop(first);
        assert_eq!(ready_now(&mut both), Some(Ok(())));
        assert_eq!(copies.len(), 1);
        drop(third);
        waiter.join().unwrap();
        assert!(copies.is_empty() && copies.completion().is_none());
    }

    #[test]
    fn a_later_use_dropped_first_releases_its_waiters_only_with_the_earlier_one() {
        let uses = HostFnUses::new();
        let runner = BackendKey::of(&Place::Cpu);
        let (_, first) = uses.begin(runner);
        let (mut after_first, second) = uses.begin(runner);
        drop(second.submission());
        let mut copy = uses.awaited(&Place::Cpu);
        // The second is dropped unrun (its stream failed) while the first is pending.
        drop(second);
        assert_eq!(
            ready_now(&mut copy[0]),
            None,
            "the copy would overlap the first"
        );
        assert_eq!(ready_now(&mut after_first[0]), None);
        drop(first);
        assert_eq!(ready_now(&mut copy[0]), Some(Ok(())));
        assert_eq!(ready_now(&mut after_first[0]), Some(Ok(())));
        assert!(uses.is_idle());
    }

    /// A copy's `awaited` and a later host function's `wait_earlier_queued` return only once
    /// the latest use is queued on its stream (its submission dropped), or has ended.
    #[test]
    fn waiters_for_a_use_are_queued_only_after_it() {
        let uses = Arc::new(HostFnUses::new());
        let runner = BackendKey::of(&Place::Cpu);
        let (_, first) = uses.begin(runner);
        let submission = first.submission();
        let (_, second) = uses.begin(runner);
        let (tx, rx) = std::sync::mpsc::channel();
        let copy = {
            let (uses, tx) = (uses.clone(), tx.clone());
            std::thread::spawn(move || {
                let waits = uses.awaited(&Place::Cpu);
                tx.send("copy").unwrap();
                waits
            })
        };
        let later = std::thread::spawn(move || {
            second.wait_earlier_queued();
            tx.send("second").unwrap();
            second
        });
        let wait = std::time::Duration::from_millis(if cfg!(miri) { 50 } else { 200 });
        assert!(
            rx.recv_timeout(wait).is_err(),
            "nothing waits past an unqueued use"
        );
        drop(submission);
        assert_eq!(
            rx.recv().unwrap(),
            "second",
            "the first is queued: the second goes on"
        );
        let second = later.join().unwrap();
        assert!(
            rx.recv_timeout(wait).is_err(),
            "the copy waits for the second, unqueued"
        );
        drop(second);
        assert_eq!(
            rx.recv().unwrap(),
            "copy",
            "the second ended unrun: the copy goes on"
        );
        let mut waits = copy.join().unwrap();
        assert_eq!(waits.len(), 1, "the copy waits for the first");
        assert_eq!(ready_now(&mut waits[0]), None);
        drop(first);
        assert_eq!(ready_now(&mut waits[0]), Some(Ok(())));
    }

    #[test]
    fn uses_of_two_buffers_have_different_ids() {
        let (a, b) = (HostFnUses::new(), HostFnUses::new());
        let runner = BackendKey::of(&Place::Cpu);
        let (_, one) = a.begin(runner);
        let (_, two) = a.begin(runner);
        let (_, three) = b.begin(runner);
        assert_eq!(one.buffer_id(), two.buffer_id());
        assert_ne!(one.buffer_id(), three.buffer_id());
    }
}
