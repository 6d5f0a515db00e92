//! Waits across backends: a stream of one backend waits on work of another.
//!
//! Every backend completes a [`Completion`] through its own completion mechanism (a counter's
//! waiter list, a submitted-work-done callback, a notifier stream and its callback, a plug-in
//! stream callback), and every backend that has flags can hold its stream at a host-visible
//! word until the host writes it. A wait across backends joins the two:
//!
//! 1. the awaited side gives the completion of the awaited work (`Event::completion`; for
//!    `wait_stream`, the completion of an event recorded on the other stream now);
//! 2. the waiting stream's [`DeviceStream::wait_completion`](crate::DeviceStream::wait_completion)
//!    holds its later work at a word of its own (a flag wait: the CPU scheduler's dependency,
//!    wgpu's held submissions, the plug-in's host gate, `cuStreamWaitValue32` /
//!    `hipStreamWaitValue32` on pinned host memory) and hands the completion to [`relay`];
//! 3. [`relay`] polls the completion once with a waker of its own; the awaited backend's
//!    completion path calls that waker when the work is done, from the thread it already runs
//!    on, and the waker stores the result in the [`ForeignOutcome`] and writes the word.
//!
//! No thread is created and none is blocked per wait: the only state of a pending wait is the
//! relay (a small allocation held by the awaited completion's waker slot) and the word the
//! waiting stream is held at. A relay whose completion is abandoned by its backend (the
//! completer dropped) resolves with that error, so a pending wait never outlives what it waits
//! for.
//!
//! The result is kept for the waiting stream, which reports an error of the awaited work in
//! stream order, as its own first error: from its `synchronize` and its stream completion (see
//! the contract, "Waits across backends").
//!
//! # Captures
//!
//! Where a place's `capture_foreign_waits` capability is on, a wait submitted to a capturing
//! stream is made the same way (a fresh word, [`relay`]ed from the awaited completion), and the
//! graph takes two nodes: the wait on the word, and the report of the [`ForeignOutcome`]. The
//! word is written once, when the awaited work (as it was when the wait was captured) completes,
//! and stays written: the first replays wait for that work, later ones pass at once. The graph
//! keeps the word and the outcome for as long as it lives; an error of the awaited work is
//! reported by every replay, on the stream that launched it. A completion that is ready when
//! the wait is submitted (done, or a never-recorded event) adds nothing, captured or not. A
//! place that cannot take the two nodes into its graph has the capability off and answers
//! [`refused_in_capture`], leaving the capture as it was.
//!
//! # Host functions
//!
//! A host function that blocks on work of another backend (`Event::synchronize`,
//! `Stream::synchronize`) whose completion needs a wait across backends on the host function's
//! own backend, behind the host function, would wait for ever: no backend sees the whole
//! cycle, since each one's self-wait search ([`crate::selfwait`]) stops at the word of a wait
//! across backends. So the facade keeps, per thread, the backend of the host function running
//! there ([`enter_host_fn`], around every host function it submits), and, process-wide, the
//! pending waits across backends by the backend of the awaited work and that of the waiting
//! stream ([`PendingWait`]). A blocking call in a host function of backend `A` on incomplete
//! work of backend `B` is refused with `Error::WouldDeadlock` while a pending wait awaits work
//! of `A` and a pending wait holds a stream of `B` ([`host_fn_may_wait_for_itself`]): a chain of
//! waits from `B`'s work to `A`'s crosses backends only through waits across backends, the
//! first of which holds a stream of `B` and the last of which awaits work of `A`; a chain that
//! stays inside one backend is that backend's own self-wait rule. A host-buffer read or write
//! is such a blocking call where it would wait for a queued copy of the buffer's backend
//! (`HostBuffer::read_would_wait` / `write_would_wait`); one that would not wait goes on.
//! Where one runtime thread runs the host functions of two backends (HIP on devstream's
//! HIP-on-CUDA shim runs them on CUDA's callback thread, [`host_fns_share_a_thread`]), a
//! pending wait on work of either counts for a host function of both.
//! The rule is conservative, as the CPU and CUDA backends' own rules for their host functions:
//! the pending waits may be unrelated to the host function, and then the call could have
//! completed; it never hangs. It counts a pending wait whatever its awaited work is, also work
//! queued before the host function: that work's completion may need the thread the host
//! function holds (the last free CPU worker, the runtime thread that runs a GPU's host
//! functions and completion doorbells), an edge no backend reports.
//!
//! A registration lives exactly as long as the awaited work is incomplete, not as long as the
//! waiting stream's handle: work queued behind the wait stays reachable after that handle is
//! dropped (through events recorded after the wait, and streams that wait on them), and
//! stays held. The waiting side's completion is itself relayed from the awaited completion's
//! waker, so it is never dropped before that resolves. A wait whose awaited work never
//! completes (held at a word nobody writes) stays registered for as long as that work stays
//! held; [`pending_waits`] shows it.
//!
//! ```
//! use devstream_core::foreign::{
//!     enter_host_fn, host_fn_may_wait_for_itself, BackendKey, PendingWait,
//! };
//! use devstream_core::Place;
//!
//! let (cpu, wgpu) = (BackendKey::of(&Place::Cpu), BackendKey::of(&Place::Wgpu(0)));
//! let pending = PendingWait::register(cpu, wgpu); // a wgpu stream waits on CPU work
//! assert!(!host_fn_may_wait_for_itself(Some(wgpu)), "no host function runs here");
//! {
//!     let _running = enter_host_fn(cpu);          // a CPU host function runs here
//!     assert!(host_fn_may_wait_for_itself(Some(wgpu))); // wgpu work may wait for it
//!     drop(pending);                              // the awaited CPU work completed
//!     assert!(!host_fn_may_wait_for_itself(Some(wgpu)));
//! }
//! ```
//!
//! ```
//! use devstream_core::foreign::relay;
//! use devstream_core::Completion;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//!
//! let word = Arc::new(AtomicU32::new(0));
//! let (awaited, completer) = Completion::pending();
//! let released = word.clone();
//! let outcome = relay(awaited, move |_| released.store(1, Ordering::SeqCst));
//! assert_eq!(word.load(Ordering::SeqCst), 0); // the awaited work is still pending
//! completer.complete(Ok(()));                  // its backend's completion path
//! assert_eq!(word.load(Ordering::SeqCst), 1);
//! assert_eq!(outcome.result(), Ok(()));
//! ```

use crate::{Completion, Error, Place, Result};
use std::cell::Cell;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};

/// The result of the awaited work, once it is known: shared by the relay (which stores it
/// before releasing the waiting stream) and the waiting stream (which reports it in stream
/// order, after the release).
#[derive(Debug, Default)]
pub struct ForeignOutcome {
    result: OnceLock<Result<()>>,
}

impl ForeignOutcome {
    /// The awaited work's result: `Ok` once it completed, its error otherwise. `Ok` while it is
    /// still pending (the waiting stream reads it only after the release, which follows the
    /// store).
    pub fn result(&self) -> Result<()> {
        self.result.get().cloned().unwrap_or(Ok(()))
    }

    /// Whether the awaited work's result is known.
    pub fn is_resolved(&self) -> bool {
        self.result.get().is_some()
    }

    fn store(&self, result: Result<()>) {
        // The first result stays: a relay resolves once.
        let _ = self.result.set(result);
    }
}

/// What a relay runs once the awaited completion is ready, given its result.
type Release = Box<dyn FnOnce(&Result<()>) + Send>;

/// What a pending relay holds: the completion it polls and what it does once that is ready.
struct Pending {
    awaited: Completion,
    outcome: Arc<ForeignOutcome>,
    release: Release,
}

/// The waker of one relay: each wake polls the completion again; the first `Ready` stores the
/// result and runs the release, on the waking thread.
struct Relay {
    pending: Mutex<Option<Pending>>,
}

impl Relay {
    fn poll(self: &Arc<Self>) {
        let waker = Waker::from(Arc::clone(self));
        let ready = {
            let mut slot = crate::sync::lock(&self.pending);
            let Some(pending) = slot.as_mut() else {
                return;
            };
            match Pin::new(&mut pending.awaited).poll(&mut Context::from_waker(&waker)) {
                Poll::Pending => return,
                Poll::Ready(result) => slot.take().map(|pending| (pending, result)),
            }
        };
        // The release runs outside the lock: it may write a word whose waiters run at once.
        if let Some((pending, result)) = ready {
            pending.outcome.store(result.clone());
            (pending.release)(&result);
        }
    }
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.poll();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.poll();
    }
}

/// Runs `release` with `awaited`'s result once it is ready, after storing the result in the
/// returned outcome:
/// at once (on this thread) when it is ready now, otherwise on the thread of the awaited
/// backend's completion path that wakes it. Never blocks and starts no thread.
///
/// `release` should only write a word (set a flag, store an atomic and notify): it runs inside
/// another backend's completion path.
pub fn relay(
    awaited: Completion,
    release: impl FnOnce(&Result<()>) + Send + 'static,
) -> Arc<ForeignOutcome> {
    let outcome = Arc::new(ForeignOutcome::default());
    let relay = Arc::new(Relay {
        pending: Mutex::new(Some(Pending {
            awaited,
            outcome: Arc::clone(&outcome),
            release: Box::new(release),
        })),
    });
    relay.poll();
    outcome
}

/// The result of `completion` if it is ready now (polled once with a waker that does nothing),
/// `None` while it is pending.
pub fn ready_now(completion: &mut Completion) -> Option<Result<()>> {
    if !completion.is_ready() {
        return None;
    }
    match Pin::new(completion).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    }
}

/// Which backend a place belongs to, as waits across backends tell backends apart: places of
/// different backend kinds, or custom devices of different device types (each device type is
/// its own plug-in or registered backend), have different keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BackendKey(u64);

impl BackendKey {
    /// The key of `place`'s backend: the backend kind's position for the built-in backends
    /// (no work on the host-function launch path), a hash of the device type with the top bit
    /// set for custom devices.
    #[inline]
    pub fn of(place: &Place) -> BackendKey {
        match place {
            Place::Custom { device_type, .. } => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                device_type.hash(&mut hasher);
                BackendKey(hasher.finish() | 1 << 63)
            }
            _ => BackendKey(place.backend() as u64),
        }
    }
}

thread_local! {
    /// The backend of the host function running on this thread, if any.
    static HOST_FN_BACKEND: Cell<Option<BackendKey>> = const { Cell::new(None) };
}

/// Marks the calling thread as running a host function of `backend` until dropped (it restores
/// what was marked before).
#[must_use = "the mark lasts as long as the scope"]
pub struct HostFnScope {
    previous: Option<BackendKey>,
}

impl Drop for HostFnScope {
    fn drop(&mut self) {
        let previous = self.previous;
        let _ = HOST_FN_BACKEND.try_with(|running| running.set(previous));
    }
}

/// The backend whose host function the calling thread runs, if any (marked by
/// [`enter_host_fn`]).
#[inline]
pub fn running_host_fn() -> Option<BackendKey> {
    HOST_FN_BACKEND.try_with(Cell::get).ok().flatten()
}

/// Marks the calling thread as running a host function of `backend` (see the module
/// documentation, "Host functions").
#[inline]
pub fn enter_host_fn(backend: BackendKey) -> HostFnScope {
    let previous = HOST_FN_BACKEND
        .try_with(|running| running.replace(Some(backend)))
        .ok()
        .flatten();
    HostFnScope { previous }
}

/// The backends a pending wait across backends joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Joined {
    awaited: BackendKey,
    waiting: BackendKey,
}

/// The pending waits across backends of one pair of backends: the registration numbers of
/// those still pending, in registration order.
struct PairWaits {
    joined: Joined,
    pending: Vec<u64>,
}

/// The pending waits across backends of the process, per pair of backends. A pair is listed
/// while it has at least one pending wait.
static PENDING: std::sync::Mutex<Vec<PairWaits>> = std::sync::Mutex::new(Vec::new());

/// How many waits across backends the process registered so far: the next registration's
/// number. Raised under [`PENDING`]'s lock, so that each pair's list stays in order.
static REGISTERED: AtomicU64 = AtomicU64::new(0);

/// A wait across backends of a stream of one backend on incomplete work of another,
/// registered until dropped (when that work is ready).
#[derive(Debug)]
pub struct PendingWait {
    joined: Joined,
    number: u64,
}

impl PendingWait {
    /// Registers a pending wait of a stream of `waiting` on work of `awaited`.
    pub fn register(awaited: BackendKey, waiting: BackendKey) -> PendingWait {
        let joined = Joined { awaited, waiting };
        let mut pairs = crate::sync::lock(&PENDING);
        // Numbers grow under the lock, so each pair's list stays in registration order.
        let number = REGISTERED.fetch_add(1, Ordering::SeqCst);
        match pairs.iter_mut().find(|pair| pair.joined == joined) {
            Some(pair) => pair.pending.push(number),
            None => pairs.push(PairWaits {
                joined,
                pending: vec![number],
            }),
        }
        PendingWait { joined, number }
    }
}

impl Drop for PendingWait {
    fn drop(&mut self) {
        let mut pairs = crate::sync::lock(&PENDING);
        let Some(at) = pairs.iter().position(|pair| pair.joined == self.joined) else {
            return;
        };
        let pending = &mut pairs[at].pending;
        if let Ok(found) = pending.binary_search(&self.number) {
            pending.remove(found);
        }
        if pending.is_empty() {
            pairs.swap_remove(at);
        }
    }
}

/// The pending waits across backends of one pair of backends, as [`pending_waits`] reports
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingWaits {
    /// The backend of the awaited work.
    pub awaited: BackendKey,
    /// The backend of the waiting streams.
    pub waiting: BackendKey,
    /// How many waits of this pair are pending.
    pub count: usize,
    /// The registration number of the oldest of them (see [`registered_waits`]).
    pub oldest: u64,
}

/// Diagnostics: the pending waits across backends of the process, per pair of backends. A wait
/// is pending from the call that made it until the awaited work is ready (or its backend
/// abandons it); one that stays listed long after every stream involved has synchronized is a
/// leak. Not for deciding anything: another thread may make or resolve waits at any time.
pub fn pending_waits() -> Vec<PendingWaits> {
    crate::sync::lock(&PENDING)
        .iter()
        .filter_map(|pair| {
            Some(PendingWaits {
                awaited: pair.joined.awaited,
                waiting: pair.joined.waiting,
                count: pair.pending.len(),
                oldest: *pair.pending.first()?,
            })
        })
        .collect()
}

/// Diagnostics: how many waits across backends the process has registered so far, pending or
/// resolved. Registration numbers count from 0, so a wait registered after this call has a
/// number at least this one; with [`pending_waits`] it tells waits made before a point from
/// those made after it.
pub fn registered_waits() -> u64 {
    REGISTERED.load(Ordering::SeqCst)
}

/// Pairs of backends whose host functions one runtime thread runs (HIP on devstream's
/// HIP-on-CUDA shim runs them on the CUDA driver's callback thread).
static SHARED_HOST_FN_THREADS: std::sync::Mutex<Vec<(BackendKey, BackendKey)>> =
    std::sync::Mutex::new(Vec::new());

/// Declares that host functions of `a` and of `b` run on one runtime thread, so that a host
/// function of either blocks the other's: a blocking call in a host function of `a` is then
/// refused where pending waits await work of `b` as where they await work of `a` (see the
/// module documentation, "Host functions"). Backends call it when they load.
///
/// ```
/// use devstream_core::foreign::{
///     enter_host_fn, host_fn_may_wait_for_itself, host_fns_share_a_thread, BackendKey,
///     PendingWait,
/// };
/// use devstream_core::Place;
///
/// let (cpu, npu, xpu) = (
///     BackendKey::of(&Place::Cpu),
///     BackendKey::of(&"npu:0".parse::<Place>()?),
///     BackendKey::of(&"xpu:0".parse::<Place>()?),
/// );
/// let _pending = PendingWait::register(xpu, cpu); // a CPU stream waits on xpu work
/// let _running = enter_host_fn(npu);              // an npu host function runs here
/// assert!(!host_fn_may_wait_for_itself(Some(cpu)));
/// host_fns_share_a_thread(npu, xpu);              // xpu's host functions need this thread
/// assert!(host_fn_may_wait_for_itself(Some(cpu)));
/// # Ok::<(), devstream_core::Error>(())
/// ```
pub fn host_fns_share_a_thread(a: BackendKey, b: BackendKey) {
    let mut shared = crate::sync::lock(&SHARED_HOST_FN_THREADS);
    if a != b && !shared.contains(&(a, b)) && !shared.contains(&(b, a)) {
        shared.push((a, b));
    }
}

/// Whether host functions of `a` and `b` run on one thread (the same backend, or declared by
/// [`host_fns_share_a_thread`]).
fn share_a_host_fn_thread(a: BackendKey, b: BackendKey) -> bool {
    a == b || {
        let shared = crate::sync::lock(&SHARED_HOST_FN_THREADS);
        shared.contains(&(a, b)) || shared.contains(&(b, a))
    }
}

/// Whether a host function runs on the calling thread and incomplete work of `target` (`None`:
/// of a backend not known) may wait for work queued after it through waits across backends: a
/// pending wait awaits work of the host function's backend and a pending wait holds a stream
/// of `target` (see the module documentation, "Host functions"). One thread-local read outside
/// host functions.
#[inline]
pub fn host_fn_may_wait_for_itself(target: Option<BackendKey>) -> bool {
    match running_host_fn() {
        None => false,
        Some(running) => {
            let pairs = crate::sync::lock(&PENDING);
            pairs
                .iter()
                .any(|pair| share_a_host_fn_thread(pair.joined.awaited, running))
                && pairs
                    .iter()
                    .any(|pair| target.is_none_or(|target| pair.joined.waiting == target))
        }
    }
}

/// The error a capturing stream of a place whose `capture_foreign_waits` capability is off
/// answers for a wait on another backend's work: its graphs cannot hold such a wait. The
/// capture is left as it was.
pub fn refused_in_capture(op: &'static str) -> Error {
    Error::capture(
        op,
        "this place cannot capture a wait on another backend's work; the capture goes on \
         without it",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counter() -> (Arc<AtomicUsize>, impl FnOnce(&Result<()>) + Send + 'static) {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        (count, move |_: &Result<()>| {
            c.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[test]
    fn a_ready_completion_releases_at_once() {
        let (count, release) = counter();
        let outcome = relay(Completion::ready(Ok(())), release);
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert!(outcome.is_resolved());
        assert_eq!(outcome.result(), Ok(()));
    }

    #[test]
    fn the_error_is_stored_before_the_release() {
        let (awaited, completer) = Completion::pending();
        let seen = Arc::new(Mutex::new(None));
        let outcome = Arc::new(OnceLock::new());
        let (s, o) = (seen.clone(), outcome.clone());
        let stored = relay(awaited, move |result| {
            let out: &Arc<ForeignOutcome> = o.get().expect("the outcome is published first");
            assert_eq!(&out.result(), result);
            *s.lock().unwrap() = Some(out.result());
        });
        outcome.set(stored.clone()).unwrap();
        assert!(!stored.is_resolved());
        completer.complete(Err(Error::NotReady));
        assert_eq!(*seen.lock().unwrap(), Some(Err(Error::NotReady)));
    }

    #[test]
    fn an_abandoned_completion_releases_with_its_error() {
        let (count, release) = counter();
        let (awaited, completer) = Completion::pending();
        let outcome = relay(awaited, release);
        drop(completer);
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert!(matches!(outcome.result(), Err(Error::Abandoned { .. })));
    }

    #[test]
    fn a_relay_releases_once_and_frees_its_state() {
        let (count, release) = counter();
        let (awaited, completer) = Completion::pending();
        let outcome = relay(awaited, release);
        let weak = Arc::downgrade(&outcome);
        std::thread::spawn(move || completer.complete(Ok(())))
            .join()
            .unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 1);
        drop(outcome);
        assert_eq!(weak.strong_count(), 0, "the relay kept the outcome alive");
    }

    #[test]
    fn backend_keys_tell_backends_apart_as_waits_across_backends_do() {
        let key = |text: &str| BackendKey::of(&text.parse::<Place>().unwrap());
        assert_eq!(key("cuda:0"), key("cuda:1"));
        assert_ne!(key("cuda:0"), key("hip:0"));
        assert_ne!(key("cpu"), key("wgpu:0"));
        assert_eq!(key("npu:0"), key("npu:3"));
        assert_ne!(key("npu:0"), key("custom_cpu:0"));
        assert_ne!(key("npu:0"), key("cpu"));
    }

    #[test]
    fn a_pending_wait_counts_for_host_functions_of_the_awaited_backend_and_work_of_the_waiting_one()
    {
        let (cpu, wgpu, cuda) = (
            BackendKey::of(&Place::Cpu),
            BackendKey::of(&Place::Wgpu(0)),
            BackendKey::of(&Place::Cuda(0)),
        );
        let first = PendingWait::register(cpu, wgpu);
        let second = PendingWait::register(cpu, wgpu);
        {
            let _running = enter_host_fn(wgpu);
            assert!(
                !host_fn_may_wait_for_itself(Some(wgpu)),
                "only CPU work is awaited"
            );
            let _nested = enter_host_fn(cpu);
            assert!(host_fn_may_wait_for_itself(Some(wgpu)));
            assert!(
                !host_fn_may_wait_for_itself(Some(cuda)),
                "no CUDA stream waits across backends"
            );
        }
        assert!(
            !host_fn_may_wait_for_itself(Some(wgpu)),
            "the scopes restored: no host function runs"
        );
        let _running = enter_host_fn(cpu);
        drop(first);
        assert!(
            host_fn_may_wait_for_itself(Some(wgpu)),
            "one of the two waits is still pending"
        );
        drop(second);
        assert!(!host_fn_may_wait_for_itself(Some(wgpu)));
    }

    #[test]
    fn pending_waits_lists_each_pair_until_its_waits_resolve() {
        // A pair no other test here registers: the registry is process-wide.
        let (cuda, hip) = (
            BackendKey::of(&Place::Cuda(0)),
            BackendKey::of(&Place::Hip(0)),
        );
        let of_pair = || {
            pending_waits()
                .into_iter()
                .find(|pair| pair.awaited == cuda && pair.waiting == hip)
        };
        let mark = registered_waits();
        let first = PendingWait::register(cuda, hip);
        let second = PendingWait::register(cuda, hip);
        let listed = of_pair().expect("the pair is listed while a wait is pending");
        assert_eq!(listed.count, 2);
        assert!(listed.oldest >= mark, "registered after the mark");
        assert!(registered_waits() >= mark + 2);
        drop(first);
        let listed = of_pair().expect("one wait is still pending");
        assert_eq!(listed.count, 1);
        assert_eq!(
            listed.oldest, second.number,
            "the oldest pending is the second"
        );
        drop(second);
        assert_eq!(of_pair(), None, "a pair with no pending wait is not listed");
    }

    #[test]
    fn ready_now_does_not_wait() {
        let (mut awaited, completer) = Completion::pending();
        assert_eq!(ready_now(&mut awaited), None);
        completer.complete(Ok(()));
        assert_eq!(ready_now(&mut awaited), Some(Ok(())));
    }
}
