//! The CUDA/HIP collectives engine (cargo feature `comm`): NCCL on CUDA, RCCL on HIP, loaded
//! at run time (`comm_lib`), written once over [`RawApi`].
//!
//! Each call is checked first (rank, sizes, places: nothing is queued when they are wrong),
//! then queued with the library's own call on the stream's native handle, so events, waits and
//! captures order it like a kernel. The buffers and the communicator become users of the stream
//! (the `StreamUsers` keep-alive): dropping either while the collective is queued never frees
//! it under the collective; a capture owns references, so a graph keeps them while it exists.
//!
//! Failures: one watchdog thread per process polls the communicators with queued work
//! (`ncclCommGetAsyncError`, and events recorded just before and just after each collective
//! queued outside a capture). An asynchronous error, or a collective that has not completed
//! within the communicator's deadline of beginning on the GPU (its start marker completed:
//! work queued ahead of it does not count), aborts the communicator (`ncclCommAbort`, which
//! releases the kernels waiting for peers); the next `synchronize` of every stream with a
//! collective not known complete returns `Error::Comm { failure: PeerDied | Transport |
//! Timeout }`, and later calls answer `CommFailure::Aborted`. Not watched: collectives replayed
//! from a graph. `init` waits for the other ranks at most the default deadline (its blocking
//! `ncclCommInitRank` runs on a thread of its own, left behind if the deadline passes).

use crate::comm_lib::{library, result, Nccl, NcclComm, NcclUniqueId};
use crate::device::{device_of, Device, GpuBackend};
use crate::hostfn::PanicSlot;
use crate::raw::{RawApi, RawEvent};
use crate::users::StreamUsers;
use crate::{CaptureModeGuard, GpuBuffer, GpuStream};
use devstream_core::comm::{check_rank, CallKind, GroupMemory, Region};
use devstream_core::{
    CommBackend, CommFailure, DataType, DeviceBuffer, DeviceCommunicator, Error, EventFlags, Place,
    ReduceOp, Result, UniqueId,
};
use std::any::Any;
use std::ffi::{c_int, c_void};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

pub use crate::comm_lib::{NCCL_LIBRARY_ENV, RCCL_LIBRARY_ENV};

/// The default deadline of a collective: `DEVSTREAM_COMM_TIMEOUT_SECS` (seconds, fractions
/// allowed) or 30 s (the CPU engine's rule).
pub fn default_timeout() -> Duration {
    std::env::var("DEVSTREAM_COMM_TIMEOUT_SECS")
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|secs| secs.is_finite() && *secs > 0.0)
        .map_or(Duration::from_secs(30), Duration::from_secs_f64)
}

/// Whether backend `A`'s collectives library loads (NCCL for CUDA, RCCL for HIP).
pub fn available<A: RawApi>() -> bool {
    library::<A>().is_ok()
}

/// The collectives library of backend `A`: its path and version (`"2.27.3"`), or
/// `Error::BackendUnavailable` naming every place that was tried.
pub fn library_info<A: RawApi>() -> Result<(String, String)> {
    let lib = nccl::<A>()?;
    Ok((lib.path.clone(), lib.version_text()))
}

fn nccl<A: RawApi>() -> Result<&'static Nccl> {
    library::<A>().map_err(|reason| Error::BackendUnavailable {
        backend: A::BACKEND,
        reason,
    })
}

/// `ncclDataType_t`.
fn nccl_type(lib: &Nccl, dtype: DataType, place: &Place, op: &'static str) -> Result<c_int> {
    Ok(match dtype {
        DataType::U8 => 1,
        DataType::I32 => 2,
        DataType::I64 => 4,
        DataType::F16 => 6,
        DataType::F32 => 7,
        DataType::F64 => 8,
        DataType::BF16 if lib.version >= 21000 => 9,
        _ => return Err(Error::unsupported(op, place)),
    })
}

/// `ncclRedOp_t`.
fn nccl_op(lib: &Nccl, reduce: ReduceOp, place: &Place, op: &'static str) -> Result<c_int> {
    Ok(match reduce {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max => 2,
        ReduceOp::Min => 3,
        ReduceOp::Avg if lib.version >= 21000 => 4,
        _ => return Err(Error::unsupported(op, place)),
    })
}

/// The failure kind of an `ncclResult_t` that is not success.
fn failure_of(code: i32) -> CommFailure {
    match code {
        result::REMOTE_ERROR | result::SYSTEM_ERROR => CommFailure::PeerDied,
        _ => CommFailure::Transport,
    }
}

/// The error a stream's `synchronize` reports for a collective of a failed communicator.
fn collective_failed(failure: CommFailure, reason: String) -> Error {
    Error::Comm {
        op: "collective",
        failure,
        reason,
    }
}

/// What `init` and its joiner thread share.
#[derive(Default)]
struct InitHandover {
    state: Mutex<InitState>,
    ready: std::sync::Condvar,
}

#[derive(Default)]
struct InitState {
    /// `ncclCommInitRank`'s result and communicator.
    outcome: Option<(i32, RawComm)>,
    /// `init` returned at its deadline: the joiner destroys what it gets.
    abandoned: bool,
}

/// An `ncclComm_t` (a plain handle; NCCL allows calls on it from any thread).
#[derive(Clone, Copy, Debug)]
struct RawComm(NcclComm);
// SAFETY: an opaque handle; NCCL's functions may be called with it from any thread (calls on
// one communicator are serialised by `CommInner::raw`'s lock).
unsafe impl Send for RawComm {}

/// One collective the watchdog follows: events recorded just before and just after it.
struct Pending {
    start: RawEvent,
    end: RawEvent,
    /// When the watchdog first saw `start` complete (the collective began on the GPU).
    started: Option<Instant>,
    /// The stream's error slot (its `synchronize` reports a failure).
    slot: Arc<PanicSlot>,
}

/// What the watchdog tracks for a communicator: its collectives queued outside a capture and
/// not known to be complete, and spare events.
#[derive(Default)]
struct Watch {
    pending: Vec<Pending>,
    free: Vec<RawEvent>,
}

impl Watch {
    /// An event from the spares or a new one (the context is current).
    fn event<A: RawApi>(&mut self) -> Option<RawEvent> {
        self.free.pop().or_else(|| {
            // SAFETY: the caller made the device's context current.
            unsafe { A::event_create(EventFlags::default()) }.ok()
        })
    }
}

/// An open group: its depth, the buffers its calls use (kept until the group is queued), the
/// streams they were made on (watched from `group_end`) and the memory they touch (a call may
/// not write what another reads or writes).
struct Group<A: RawApi> {
    depth: usize,
    keep: Vec<Box<dyn Any + Send + Sync>>,
    streams: Vec<GpuStream<A>>,
    memory: GroupMemory,
}

/// The group state the handles of one communicator share (not the communicator itself, which
/// captures may keep after the last handle is gone).
struct OpenGroup<A: RawApi> {
    lib: &'static Nccl,
    device: &'static Device<A>,
    state: Mutex<Group<A>>,
}

impl<A: RawApi> Drop for OpenGroup<A> {
    fn drop(&mut self) {
        // The last handle is gone with a group open (an early return or a panic between
        // `group_start` and `group_end`). The library has recorded the group's calls in the
        // group of the thread that made them: ending it here (as `group_end` would) issues
        // them, so that thread's later library calls are not swallowed by a group that never
        // closes, and no recorded call outlives the communicator. On another thread the
        // library answers that no group is open there, which is ignored.
        let depth = std::mem::take(&mut lock(&self.state).depth);
        if depth == 0 {
            return;
        }
        let _ = self.device.bind();
        for _ in 0..depth {
            // SAFETY: closes a group opened by `group_start`; the buffers its calls use are
            // kept (`state.keep`) until after this returns.
            let _ = unsafe { (self.lib.group_end)() };
        }
    }
}

struct CommInner<A: RawApi> {
    lib: &'static Nccl,
    device: &'static Device<A>,
    rank: usize,
    nranks: usize,
    /// The communicator; `None` once aborted. Every library call on it holds this lock.
    raw: Mutex<Option<RawComm>>,
    timeout_nanos: AtomicU64,
    /// Streams with collectives queued (destroyed only after their work).
    users: StreamUsers<A>,
    failed: Mutex<Option<(CommFailure, String)>>,
    watch: Mutex<Watch>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<A: RawApi> Drop for CommInner<A> {
    fn drop(&mut self) {
        let watch = std::mem::take(&mut *lock(&self.watch));
        let events: Vec<RawEvent> = watch
            .pending
            .iter()
            .flat_map(|p| [p.start, p.end])
            .chain(watch.free)
            .collect();
        let raw = lock(&self.raw).take();
        if events.is_empty() && raw.is_none() {
            return;
        }
        let lib = self.lib;
        let device = self.device;
        // Destroyed once every stream that queued a collective on it has run past it (captured
        // collectives: the graphs own a reference, so they are gone too).
        self.users.release_after(device, move || {
            let _ = device.bind();
            if let Some(raw) = raw {
                // SAFETY: the communicator is ours, not aborted, and no queued work uses it.
                let _ = unsafe { (lib.comm_destroy)(raw.0) };
            }
            for event in events {
                // SAFETY: our events; the work they were recorded around has completed.
                let _ = unsafe { A::event_destroy(event) };
            }
        });
    }
}

impl<A: RawApi> CommInner<A> {
    fn timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout_nanos.load(Ordering::Relaxed))
    }

    fn aborted(&self, op: &'static str) -> Option<Error> {
        lock(&self.failed)
            .as_ref()
            .map(|(failure, reason)| Error::Comm {
                op,
                failure: CommFailure::Aborted,
                reason: format!(
                    "the communicator failed before ({failure}: {reason}); make a new communicator"
                ),
            })
    }

    fn error(&self, op: &'static str, code: i32) -> Error {
        match code {
            result::INVALID_ARGUMENT | result::INVALID_USAGE => Error::InvalidArgument(format!(
                "{op}: {} refused the call: {}",
                self.lib.name,
                self.lib.describe(code)
            )),
            _ => Error::Comm {
                op,
                failure: failure_of(code),
                reason: format!("rank {}: {}", self.rank, self.lib.describe(code)),
            },
        }
    }

    /// Fails the communicator: keeps `failure` for later calls (`Aborted`), hands it to every
    /// stream with a collective not known complete (once per stream), then aborts the library's
    /// communicator if it is still live (`raw`, under its lock). The failure is kept before the
    /// abort: aborting releases the kernels waiting for peers, and a `synchronize` that returns
    /// then must find it (call 41 on two H200s: reported after the abort, a survivor's
    /// `synchronize` returned `Ok`). The events stay until the communicator is dropped.
    fn fail_and_abort(&self, raw: &mut Option<RawComm>, failure: CommFailure, reason: String) {
        {
            let mut failed = lock(&self.failed);
            if failed.is_none() {
                *failed = Some((failure, reason.clone()));
            }
        }
        {
            let mut watch = lock(&self.watch);
            let mut told: Vec<Arc<PanicSlot>> = Vec::new();
            for p in &watch.pending {
                if !told.iter().any(|t| Arc::ptr_eq(t, &p.slot)) {
                    p.slot.fail(collective_failed(failure, reason.clone()));
                    told.push(p.slot.clone());
                }
            }
            let done: Vec<Pending> = std::mem::take(&mut watch.pending);
            watch
                .free
                .extend(done.into_iter().flat_map(|p| [p.start, p.end]));
        }
        if let Some(comm) = raw.take() {
            // SAFETY: a live communicator, under its lock (`raw`); aborting releases the
            // kernels waiting for peers and frees it, and it is never used again (`raw` is now
            // `None`).
            let _ = unsafe { (self.lib.comm_abort)(comm.0) };
        }
    }

    /// Records the start marker of a collective about to be queued on `stream` outside a
    /// capture (`None`: not watched; a hang stays possible then, never a false failure). The
    /// context is current.
    fn mark_start(&self, stream: &GpuStream<A>) -> Option<RawEvent> {
        let mut watch = lock(&self.watch);
        let start = watch.event::<A>()?;
        // SAFETY: our event and a live stream of the same device.
        if unsafe { A::event_record(start, stream.raw()) }.is_err() {
            watch.free.push(start);
            return None;
        }
        Some(start)
    }

    /// Records the end marker after the collective queued since `start` (or gives `start`
    /// back when the call failed) and starts the watchdog.
    fn mark_end(&self, stream: &GpuStream<A>, start: Option<RawEvent>, queued: bool) {
        let Some(start) = start else { return };
        let mut watch = lock(&self.watch);
        if !queued {
            watch.free.push(start);
            return;
        }
        let Some(end) = watch.event::<A>() else {
            watch.free.push(start);
            return;
        };
        // SAFETY: our event and a live stream of the same device.
        if unsafe { A::event_record(end, stream.raw()) }.is_err() {
            watch.free.extend([start, end]);
            return;
        }
        // The communicator failed (and was aborted) after this collective was queued and
        // before it is watched: `fail_and_abort` keeps the failure before it takes the pending
        // list under this lock, so the collective is either in that list or failed here.
        let failed = lock(&self.failed).clone();
        if let Some((failure, reason)) = failed {
            stream
                .inner()
                .panic_slot()
                .fail(collective_failed(failure, reason));
            watch.free.extend([start, end]);
            return;
        }
        watch.pending.push(Pending {
            start,
            end,
            started: None,
            slot: stream.inner().panic_slot().clone(),
        });
        drop(watch);
        watchdog_start();
    }
}

impl<A: RawApi> Watched for CommInner<A> {
    fn poll(&self) -> bool {
        if lock(&self.watch).pending.is_empty() || self.device.bind().is_err() {
            return true;
        }
        let relaxed = CaptureModeGuard::<A>::relaxed();
        if relaxed.is_none() && self.device.active_captures.load(Ordering::Acquire) > 0 {
            return true; // a query could invalidate a capture in Global mode: wait
        }
        // Forget the completed collectives; note when the others began. The deadline of a
        // collective counts from when it began on the GPU (its start marker completed), so a
        // long queue of work ahead of it is not a failure.
        let now = Instant::now();
        let mut overdue = None;
        {
            let mut watch = lock(&self.watch);
            let Watch { pending, free } = &mut *watch;
            let mut index = 0;
            while index < pending.len() {
                let p = &mut pending[index];
                // SAFETY: our recorded events.
                if unsafe { A::event_query(p.end) }.is_ok() {
                    let done = pending.swap_remove(index);
                    free.extend([done.start, done.end]);
                    continue;
                }
                if p.started.is_none() {
                    // SAFETY: as above.
                    if unsafe { A::event_query(p.start) }.is_ok() {
                        p.started = Some(now);
                    }
                }
                if let Some(started) = p.started {
                    if now.duration_since(started) > self.timeout() {
                        overdue = Some(now.duration_since(started));
                    }
                }
                index += 1;
            }
            if pending.is_empty() {
                return true;
            }
        }
        drop(relaxed);
        // A call in progress (possibly waiting for peers to connect) holds the lock: look
        // again next round (aborting under a call in progress is not allowed).
        let Ok(mut raw) = self.raw.try_lock() else {
            return true;
        };
        let Some(comm) = *raw else {
            // A call saw the failure and aborted the communicator: the streams with
            // collectives still pending report it too.
            let failed = lock(&self.failed).clone();
            return match failed {
                Some((failure, reason)) => {
                    self.fail_and_abort(&mut raw, failure, reason);
                    false
                }
                None => true,
            };
        };
        let mut async_error: c_int = result::SUCCESS;
        // SAFETY: a live communicator; the lock serialises calls on it.
        let code = unsafe { (self.lib.comm_get_async_error)(comm.0, &mut async_error) };
        let failure = if code != result::SUCCESS {
            Some((failure_of(code), self.lib.describe(code)))
        } else if async_error != result::SUCCESS && async_error != result::IN_PROGRESS {
            Some((failure_of(async_error), self.lib.describe(async_error)))
        } else {
            overdue.map(|running| {
                (
                    CommFailure::Timeout,
                    format!(
                        "a collective running for {running:?} did not complete within {:?} \
                         (a peer is missing or stalled)",
                        self.timeout()
                    ),
                )
            })
        };
        let Some((failure, reason)) = failure else {
            return true;
        };
        let reason = format!("rank {} of {}: {reason}", self.rank, self.nranks);
        self.fail_and_abort(&mut raw, failure, reason);
        false
    }
}

/// A communicator the watchdog polls.
trait Watched: Send + Sync {
    /// Checks progress; `false` once there is nothing left to watch (aborted).
    fn poll(&self) -> bool;
}

fn watched() -> &'static Mutex<Vec<Weak<dyn Watched>>> {
    static LIST: OnceLock<Mutex<Vec<Weak<dyn Watched>>>> = OnceLock::new();
    LIST.get_or_init(|| Mutex::new(Vec::new()))
}

/// Starts the process' one watchdog thread (once).
fn watchdog_start() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("devstream-comm-watchdog".into())
            .spawn(|| loop {
                std::thread::sleep(Duration::from_millis(20));
                let list: Vec<Weak<dyn Watched>> = lock(watched()).clone();
                let done: Vec<&Weak<dyn Watched>> = list
                    .iter()
                    .filter(|weak| !weak.upgrade().is_some_and(|comm| comm.poll()))
                    .collect();
                if !done.is_empty() {
                    lock(watched()).retain(|w| !done.iter().any(|d| Weak::ptr_eq(d, w)));
                }
            });
    });
}

/// One rank of an NCCL (CUDA) or RCCL (HIP) communicator. Cheap to clone; the communicator is
/// destroyed once the last handle is gone and the collectives queued on it have run.
pub struct GpuComm<A: RawApi> {
    /// The open group (calls recorded by the library, queued by the outermost `group_end`);
    /// dropped before `inner` when the last handle goes.
    group: Arc<OpenGroup<A>>,
    inner: Arc<CommInner<A>>,
}

impl<A: RawApi> Clone for GpuComm<A> {
    fn clone(&self) -> Self {
        GpuComm {
            group: self.group.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<A: RawApi> fmt::Debug for GpuComm<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuComm")
            .field("place", &self.inner.device.place)
            .field("library", &self.inner.lib.name)
            .field("rank", &self.inner.rank)
            .field("nranks", &self.inner.nranks)
            .finish()
    }
}

fn check_len<A: RawApi>(
    op: &'static str,
    what: &str,
    buf: &GpuBuffer<A>,
    bytes: usize,
) -> Result<()> {
    devstream_core::comm::check_len(op, what, buf.len(), bytes)
}

fn ptr(address: u64) -> *mut c_void {
    address as usize as *mut c_void
}

impl<A: RawApi> GpuComm<A> {
    fn wrap(
        lib: &'static Nccl,
        device: &'static Device<A>,
        rank: usize,
        nranks: usize,
        raw: NcclComm,
    ) -> Self {
        let inner = Arc::new(CommInner {
            lib,
            device,
            rank,
            nranks,
            raw: Mutex::new(Some(RawComm(raw))),
            timeout_nanos: AtomicU64::new(
                default_timeout().as_nanos().min(u128::from(u64::MAX)) as u64
            ),
            users: StreamUsers::new(),
            failed: Mutex::new(None),
            watch: Mutex::new(Watch::default()),
        });
        let weak: Weak<dyn Watched> = Arc::downgrade(&inner) as Weak<dyn Watched>;
        lock(watched()).push(weak);
        let group = Arc::new(OpenGroup {
            lib,
            device,
            state: Mutex::new(Group {
                depth: 0,
                keep: Vec::new(),
                streams: Vec::new(),
                memory: GroupMemory::default(),
            }),
        });
        GpuComm { group, inner }
    }

    /// A new id (`ncclGetUniqueId`) for a communicator on `place`.
    pub fn unique_id(place: &Place) -> Result<UniqueId> {
        let device = device_of::<A>(place)?;
        let lib = nccl::<A>()?;
        device.bind()?;
        let mut id = NcclUniqueId {
            internal: [0; devstream_core::UNIQUE_ID_BYTES],
        };
        // SAFETY: writes 128 bytes into `id`.
        let code = unsafe { (lib.get_unique_id)(&mut id) };
        if code != result::SUCCESS {
            return Err(Error::Comm {
                op: "unique_id",
                failure: failure_of(code),
                reason: lib.describe(code),
            });
        }
        Ok(UniqueId::from_raw(id.internal))
    }

    /// Joins communicator `id` as `rank` of `nranks` on `place` (`ncclCommInitRank`), waiting
    /// at most [`default_timeout`] (`DEVSTREAM_COMM_TIMEOUT_SECS`, 30 s) for every rank to
    /// join. One rank per device per process: NCCL refuses two ranks on one GPU.
    ///
    /// A blocking `ncclCommInitRank` cannot be cancelled, so it runs on a thread of its own;
    /// past the deadline, `init` answers `Error::Comm { failure: Timeout, .. }` and that thread
    /// stays blocked in NCCL until the missing ranks join (it then destroys the communicator
    /// nobody took) or the process exits.
    pub fn init(place: &Place, rank: usize, nranks: usize, id: &UniqueId) -> Result<Self> {
        Self::init_within(place, rank, nranks, id, default_timeout())
    }

    /// [`GpuComm::init`] with an explicit deadline for the other ranks to join.
    pub fn init_within(
        place: &Place,
        rank: usize,
        nranks: usize,
        id: &UniqueId,
        deadline: Duration,
    ) -> Result<Self> {
        if nranks == 0 {
            return Err(Error::InvalidArgument(
                "init: a communicator needs at least one rank".into(),
            ));
        }
        check_rank("init", "rank", rank, nranks)?;
        let n = c_int::try_from(nranks)
            .map_err(|_| Error::InvalidArgument(format!("init: {nranks} ranks is too many")))?;
        let device = device_of::<A>(place)?;
        let lib = nccl::<A>()?;
        if crate::hostfn::in_host_function() {
            return Err(Error::WouldDeadlock {
                op: "Communicator::init",
                reason: "init waits for the other ranks; a host function may not".into(),
            });
        }
        device.bind()?;
        let id = NcclUniqueId {
            internal: *id.as_bytes(),
        };
        // The joiner hands the communicator over, or destroys it if `init` gave up meanwhile.
        let handover = Arc::new(InitHandover::default());
        let joiner = handover.clone();
        let spawned = std::thread::Builder::new()
            .name("devstream-comm-init".into())
            .spawn(move || {
                let bound = device.bind();
                let mut raw: NcclComm = std::ptr::null_mut();
                let code = match bound {
                    // SAFETY: the device's context is current on this thread (NCCL takes the
                    // current device); `raw` receives the communicator.
                    Ok(()) => unsafe { (lib.comm_init_rank)(&mut raw, n, id, rank as c_int) },
                    Err(_) => result::UNHANDLED_CUDA_ERROR,
                };
                let mut state = lock(&joiner.state);
                if state.abandoned {
                    if code == result::SUCCESS {
                        // SAFETY: a communicator nobody else has seen.
                        let _ = unsafe { (lib.comm_destroy)(raw) };
                    }
                    return;
                }
                state.outcome = Some((code, RawComm(raw)));
                joiner.ready.notify_all();
            });
        if let Err(e) = spawned {
            return Err(Error::Comm {
                op: "init",
                failure: CommFailure::Transport,
                reason: format!("the thread joining the communicator could not start: {e}"),
            });
        }
        let until = Instant::now() + deadline;
        let mut state = lock(&handover.state);
        let (code, raw) = loop {
            if let Some(outcome) = state.outcome.take() {
                break outcome;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                state.abandoned = true;
                return Err(Error::Comm {
                    op: "init",
                    failure: CommFailure::Timeout,
                    reason: format!(
                        "rank {rank} of {nranks} on {place}: not every rank joined within \
                         {deadline:?}"
                    ),
                });
            }
            state = handover
                .ready
                .wait_timeout(state, left)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        };
        drop(state);
        if code != result::SUCCESS {
            return Err(match code {
                result::INVALID_ARGUMENT | result::INVALID_USAGE => {
                    Error::InvalidArgument(format!(
                        "init: {} refused rank {rank} of {nranks} on {place}: {}",
                        lib.name,
                        lib.describe(code)
                    ))
                }
                _ => Error::Comm {
                    op: "init",
                    failure: failure_of(code),
                    reason: format!("rank {rank} of {nranks}: {}", lib.describe(code)),
                },
            });
        }
        Ok(GpuComm::wrap(lib, device, rank, nranks, raw.0))
    }

    /// One communicator over several devices of this process, rank `i` on `places[i]`
    /// (`ncclCommInitAll`). `Error::Unsupported` where the library lacks it.
    pub fn init_all(places: &[Place]) -> Result<Vec<Self>> {
        let lib = nccl::<A>()?;
        let devices = places
            .iter()
            .map(device_of::<A>)
            .collect::<Result<Vec<_>>>()?;
        let Some(init_all) = lib.comm_init_all else {
            let place = places.first().cloned().unwrap_or(A::place(0));
            return Err(Error::unsupported("init_all", &place));
        };
        let ordinals: Vec<c_int> = devices.iter().map(|d| d.ordinal as c_int).collect();
        let mut raws: Vec<NcclComm> = vec![std::ptr::null_mut(); ordinals.len()];
        if let Some(first) = devices.first() {
            first.bind()?;
        }
        // SAFETY: `raws` has room for one communicator per listed device.
        let code = unsafe {
            init_all(
                raws.as_mut_ptr(),
                ordinals.len() as c_int,
                ordinals.as_ptr(),
            )
        };
        if code != result::SUCCESS {
            return Err(Error::Comm {
                op: "init",
                failure: failure_of(code),
                reason: lib.describe(code),
            });
        }
        let n = raws.len();
        Ok(raws
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(rank, (raw, device))| GpuComm::wrap(lib, device, rank, n, raw))
            .collect())
    }

    /// The collectives library in use (`"NCCL"` or `"RCCL"`), its path and version.
    pub fn library(&self) -> (&'static str, &str, String) {
        (
            self.inner.lib.name,
            &self.inner.lib.path,
            self.inner.lib.version_text(),
        )
    }

    /// The deadline of each collective (`DEVSTREAM_COMM_TIMEOUT_SECS`, default 30 s).
    pub fn timeout(&self) -> Duration {
        self.inner.timeout()
    }

    /// Sets the deadline: a collective still incomplete this long after it began on the GPU
    /// aborts the communicator, and its stream's `synchronize` returns `CommFailure::Timeout`.
    pub fn set_timeout(&self, timeout: Duration) {
        let nanos = timeout.as_nanos().clamp(1, u128::from(u64::MAX)) as u64;
        self.inner.timeout_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Checks the places of a call.
    fn check_places(
        &self,
        op: &'static str,
        stream: &GpuStream<A>,
        buffers: &[&GpuBuffer<A>],
    ) -> Result<()> {
        let ordinal = self.inner.device.ordinal;
        stream.same_device(op, ordinal)?;
        for buffer in buffers {
            if buffer.ordinal() != ordinal {
                return Err(Error::mismatch(
                    op,
                    &self.inner.device.place,
                    buffer.place(),
                ));
            }
        }
        Ok(())
    }

    /// Queues `call` (the library call on the raw communicator and stream) after the checks:
    /// notes the buffers and the communicator as users of the stream (captures own them),
    /// then calls, then arms the watchdog (or, in a group, keeps the buffers until its end).
    #[allow(clippy::too_many_arguments)]
    fn queue(
        &self,
        op: &'static str,
        stream: &GpuStream<A>,
        buffers: &[&GpuBuffer<A>],
        count: usize,
        (kind, bytes): (CallKind, usize),
        call: impl FnOnce(NcclComm, crate::raw::RawStream) -> i32,
    ) -> Result<()> {
        if let Some(error) = self.inner.aborted(op) {
            return Err(error);
        }
        if count == 0 {
            // Nothing moves and no rank waits for another (NCCL's no-op; zero-length buffers
            // have no address to hand it).
            return Ok(());
        }
        {
            let mut group = lock(&self.group.state);
            if group.depth > 0 {
                // The device's buffers share one address space.
                let region = |b: &GpuBuffer<A>| Region {
                    space: 0,
                    offset: b.device_ptr(),
                };
                let (send, recv) = (region(buffers[0]), region(buffers[buffers.len() - 1]));
                let (rank, n) = (self.inner.rank, self.inner.nranks);
                group
                    .memory
                    .admit(op, &kind.accesses(rank, n, bytes, send, recv))?;
            }
        }
        self.inner.device.bind()?;
        for buffer in buffers {
            buffer.use_on(stream)?;
        }
        self.inner.users.note(stream.inner());
        let capturing = stream.keep_in_capture(Box::new(self.inner.clone()))?;
        let in_group = lock(&self.group.state).depth > 0;
        // Watched outside a capture (a graph's replays are not) and outside a group (whose
        // calls are queued, and watched, by `group_end`).
        let start = if capturing || in_group {
            None
        } else {
            self.inner.mark_start(stream)
        };
        let mut raw = lock(&self.inner.raw);
        let Some(comm) = *raw else {
            drop(raw);
            self.inner.mark_end(stream, start, false);
            return Err(self.inner.aborted(op).unwrap_or(Error::Comm {
                op,
                failure: CommFailure::Aborted,
                reason: "the communicator was aborted".into(),
            }));
        };
        let code = call(comm.0, stream.raw());
        if code != result::SUCCESS {
            let error = self.inner.error(op, code);
            if let Error::Comm {
                failure, reason, ..
            } = &error
            {
                // The library saw a failure of the communicator (a peer gone, the transport):
                // fail it as the watchdog would (the streams with collectives pending report
                // it), so later calls answer `Aborted`.
                self.inner
                    .fail_and_abort(&mut raw, *failure, reason.clone());
            }
            drop(raw);
            self.inner.mark_end(stream, start, false);
            return Err(error);
        }
        drop(raw);
        if in_group {
            let mut group = lock(&self.group.state);
            for buffer in buffers {
                group.keep.push(buffer.keep_alive());
            }
            if !capturing && !group.streams.iter().any(|s| s == stream) {
                group.streams.push(stream.clone());
            }
        } else {
            self.inner.mark_end(stream, start, true);
        }
        Ok(())
    }

    fn dtype(&self, dtype: DataType, op: &'static str) -> Result<c_int> {
        nccl_type(self.inner.lib, dtype, &self.inner.device.place, op)
    }

    fn redop(&self, reduce: ReduceOp, op: &'static str) -> Result<c_int> {
        nccl_op(self.inner.lib, reduce, &self.inner.device.place, op)
    }

    fn root(&self, op: &'static str, what: &str, root: usize) -> Result<c_int> {
        check_rank(op, what, root, self.inner.nranks)?;
        Ok(root as c_int)
    }
}

/// Whether two buffers are the same allocation (an in-place call).
fn same<A: RawApi>(a: &GpuBuffer<A>, b: &GpuBuffer<A>) -> bool {
    a.device_ptr() == b.device_ptr() && a.len() == b.len()
}

impl<A: RawApi> DeviceCommunicator for GpuComm<A> {
    type Stream = GpuStream<A>;

    fn place(&self) -> &Place {
        &self.inner.device.place
    }
    fn rank(&self) -> usize {
        self.inner.rank
    }
    fn nranks(&self) -> usize {
        self.inner.nranks
    }

    fn all_reduce(
        &self,
        stream: &GpuStream<A>,
        send: &GpuBuffer<A>,
        recv: &GpuBuffer<A>,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let name = "all_reduce";
        self.check_places(name, stream, &[send, recv])?;
        let bytes = dtype.bytes(name, count)?;
        check_len(name, "send", send, bytes)?;
        check_len(name, "receive", recv, bytes)?;
        let (t, o) = (self.dtype(dtype, name)?, self.redop(op, name)?);
        let lib = self.inner.lib;
        let (s, r) = (ptr(send.device_ptr()), ptr(recv.device_ptr()));
        self.queue(
            name,
            stream,
            &[send, recv],
            count,
            (CallKind::AllReduce, bytes),
            |comm, raw| {
                // SAFETY: both buffers hold `count` elements on the communicator's device and are
                // kept alive until the stream has run past the call.
                unsafe { (lib.all_reduce)(s, r, count, t, o, comm, raw) }
            },
        )
    }

    fn broadcast(
        &self,
        stream: &GpuStream<A>,
        send: &GpuBuffer<A>,
        recv: &GpuBuffer<A>,
        count: usize,
        dtype: DataType,
        root: usize,
    ) -> Result<()> {
        let name = "broadcast";
        self.check_places(name, stream, &[send, recv])?;
        let root = self.root(name, "root", root)?;
        let bytes = dtype.bytes(name, count)?;
        if self.inner.rank == root as usize {
            check_len(name, "send", send, bytes)?;
        }
        check_len(name, "receive", recv, bytes)?;
        let t = self.dtype(dtype, name)?;
        let lib = self.inner.lib;
        let (s, r) = (ptr(send.device_ptr()), ptr(recv.device_ptr()));
        self.queue(
            name,
            stream,
            &[send, recv],
            count,
            (
                CallKind::Broadcast {
                    root: root as usize,
                },
                bytes,
            ),
            |comm, raw| {
                // SAFETY: as in `all_reduce` (`send` is read on the root only).
                unsafe { (lib.broadcast)(s, r, count, t, root, comm, raw) }
            },
        )
    }

    fn reduce(
        &self,
        stream: &GpuStream<A>,
        send: &GpuBuffer<A>,
        recv: &GpuBuffer<A>,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        let name = "reduce";
        self.check_places(name, stream, &[send, recv])?;
        let root = self.root(name, "root", root)?;
        let bytes = dtype.bytes(name, count)?;
        check_len(name, "send", send, bytes)?;
        if self.inner.rank == root as usize {
            check_len(name, "receive", recv, bytes)?;
        }
        let (t, o) = (self.dtype(dtype, name)?, self.redop(op, name)?);
        let lib = self.inner.lib;
        let (s, r) = (ptr(send.device_ptr()), ptr(recv.device_ptr()));
        self.queue(
            name,
            stream,
            &[send, recv],
            count,
            (
                CallKind::Reduce {
                    root: root as usize,
                },
                bytes,
            ),
            |comm, raw| {
                // SAFETY: as in `all_reduce` (`recv` is written on the root only).
                unsafe { (lib.reduce)(s, r, count, t, o, root, comm, raw) }
            },
        )
    }

    fn all_gather(
        &self,
        stream: &GpuStream<A>,
        send: &GpuBuffer<A>,
        recv: &GpuBuffer<A>,
        count: usize,
        dtype: DataType,
    ) -> Result<()> {
        let name = "all_gather";
        self.check_places(name, stream, &[send, recv])?;
        let bytes = dtype.bytes(name, count)?;
        let all = bytes
            .checked_mul(self.inner.nranks)
            .ok_or_else(|| Error::InvalidArgument(format!("{name}: {count} × nranks overflows")))?;
        check_len(name, "receive", recv, all)?;
        // In place, this rank's part is `recv[rank * count..]`: NCCL's in-place layout.
        let s = if same(send, recv) {
            recv.device_ptr() + (self.inner.rank * bytes) as u64
        } else {
            check_len(name, "send", send, bytes)?;
            send.device_ptr()
        };
        let t = self.dtype(dtype, name)?;
        let lib = self.inner.lib;
        let (s, r) = (ptr(s), ptr(recv.device_ptr()));
        self.queue(
            name,
            stream,
            &[send, recv],
            count,
            (CallKind::AllGather, bytes),
            |comm, raw| {
                // SAFETY: `recv` holds `count * nranks` elements, the send part `count`.
                unsafe { (lib.all_gather)(s, r, count, t, comm, raw) }
            },
        )
    }

    fn reduce_scatter(
        &self,
        stream: &GpuStream<A>,
        send: &GpuBuffer<A>,
        recv: &GpuBuffer<A>,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        let name = "reduce_scatter";
        self.check_places(name, stream, &[send, recv])?;
        let bytes = dtype.bytes(name, count)?;
        let all = bytes
            .checked_mul(self.inner.nranks)
            .ok_or_else(|| Error::InvalidArgument(format!("{name}: {count} × nranks overflows")))?;
        check_len(name, "send", send, all)?;
        check_len(name, "receive", recv, bytes)?;
        let (t, o) = (self.dtype(dtype, name)?, self.redop(op, name)?);
        let lib = self.inner.lib;
        let in_place = same(send, recv) && self.inner.rank > 0 && bytes > 0;
        if in_place && lock(&self.group.state).depth > 0 {
            // The move to `recv[..count]` would be queued before the group's collective.
            return Err(Error::InvalidArgument(format!(
                "{name}: in place inside a group is not supported on {} (rank {} > 0); use \
                 separate buffers",
                self.inner.lib.name, self.inner.rank
            )));
        }
        // In place, NCCL writes this rank's result at `send[rank * count..]`; it is then moved
        // to `recv[..count]` (the regions do not overlap for rank ≥ 1).
        let at = recv.device_ptr()
            + if in_place {
                (self.inner.rank * bytes) as u64
            } else {
                0
            };
        let (s, r) = (ptr(send.device_ptr()), ptr(at));
        let base = recv.device_ptr();
        self.queue(
            name,
            stream,
            &[send, recv],
            count,
            (CallKind::ReduceScatter, bytes),
            |comm, raw| {
                // SAFETY: `send` holds `count * nranks` elements, `recv` (at `at`) `count`.
                let code = unsafe { (lib.reduce_scatter)(s, r, count, t, o, comm, raw) };
                if code == result::SUCCESS && in_place {
                    // SAFETY: both ranges lie in `recv` and do not overlap; ordered after the
                    // collective on the same stream.
                    if unsafe { A::memcpy_dtod_async(base, at, bytes, raw) }.is_err() {
                        return result::UNHANDLED_CUDA_ERROR;
                    }
                }
                code
            },
        )
    }

    fn all_to_all(
        &self,
        stream: &GpuStream<A>,
        send: &GpuBuffer<A>,
        recv: &GpuBuffer<A>,
        count: usize,
        dtype: DataType,
    ) -> Result<()> {
        let name = "all_to_all";
        self.check_places(name, stream, &[send, recv])?;
        let n = self.inner.nranks;
        let bytes = dtype.bytes(name, count)?;
        let all = bytes
            .checked_mul(n)
            .ok_or_else(|| Error::InvalidArgument(format!("{name}: {count} × {n} overflows")))?;
        check_len(name, "send", send, all)?;
        check_len(name, "receive", recv, all)?;
        if same(send, recv) && n > 1 && bytes > 0 {
            return Err(Error::InvalidArgument(format!(
                "{name}: in place is not supported by {} (grouped send/recv would overwrite \
                 blocks still to be sent); use separate buffers",
                self.inner.lib.name
            )));
        }
        let t = self.dtype(dtype, name)?;
        let lib = self.inner.lib;
        let (s, r) = (send.device_ptr(), recv.device_ptr());
        self.queue(
            name,
            stream,
            &[send, recv],
            count,
            (CallKind::AllToAll, bytes),
            |comm, raw| {
                // NCCL's recipe: one send and one receive per peer in a group.
                // SAFETY: group calls only record state for this thread.
                let mut code = unsafe { (lib.group_start)() };
                if code != result::SUCCESS {
                    return code;
                }
                for peer in 0..n {
                    let offset = (peer * bytes) as u64;
                    // SAFETY: block `peer` of each buffer holds `count` elements.
                    code =
                        unsafe { (lib.send)(ptr(s + offset), count, t, peer as c_int, comm, raw) };
                    if code != result::SUCCESS {
                        break;
                    }
                    // SAFETY: as above.
                    code =
                        unsafe { (lib.recv)(ptr(r + offset), count, t, peer as c_int, comm, raw) };
                    if code != result::SUCCESS {
                        break;
                    }
                }
                // SAFETY: closes the group opened above (also after a failed call, as NCCL requires).
                let end = unsafe { (lib.group_end)() };
                if code != result::SUCCESS {
                    code
                } else {
                    end
                }
            },
        )
    }

    fn send(
        &self,
        stream: &GpuStream<A>,
        buf: &GpuBuffer<A>,
        count: usize,
        dtype: DataType,
        peer: usize,
    ) -> Result<()> {
        let name = "send";
        self.check_places(name, stream, &[buf])?;
        let peer = self.root(name, "peer", peer)?;
        let bytes = dtype.bytes(name, count)?;
        check_len(name, "send", buf, bytes)?;
        let t = self.dtype(dtype, name)?;
        let lib = self.inner.lib;
        let b = ptr(buf.device_ptr());
        self.queue(
            name,
            stream,
            &[buf],
            count,
            (CallKind::Send, bytes),
            |comm, raw| {
                // SAFETY: `buf` holds `count` elements and is kept alive past the call.
                unsafe { (lib.send)(b, count, t, peer, comm, raw) }
            },
        )
    }

    fn recv(
        &self,
        stream: &GpuStream<A>,
        buf: &GpuBuffer<A>,
        count: usize,
        dtype: DataType,
        peer: usize,
    ) -> Result<()> {
        let name = "recv";
        self.check_places(name, stream, &[buf])?;
        let peer = self.root(name, "peer", peer)?;
        let bytes = dtype.bytes(name, count)?;
        check_len(name, "receive", buf, bytes)?;
        let t = self.dtype(dtype, name)?;
        let lib = self.inner.lib;
        let b = ptr(buf.device_ptr());
        self.queue(
            name,
            stream,
            &[buf],
            count,
            (CallKind::Recv, bytes),
            |comm, raw| {
                // SAFETY: as in `send`.
                unsafe { (lib.recv)(b, count, t, peer, comm, raw) }
            },
        )
    }

    /// `ncclGroupStart`. NCCL's groups are per thread: open and close a group on the thread
    /// that makes its calls.
    fn group_start(&self) -> Result<()> {
        // SAFETY: only records thread state.
        let code = unsafe { (self.inner.lib.group_start)() };
        if code != result::SUCCESS {
            return Err(self.inner.error("group_start", code));
        }
        lock(&self.group.state).depth += 1;
        Ok(())
    }

    /// `ncclGroupEnd`: the outermost queues the group's calls.
    fn group_end(&self) -> Result<()> {
        let (keep, streams) = {
            let mut group = lock(&self.group.state);
            match group.depth {
                0 => {
                    return Err(Error::InvalidArgument(
                        "group_end without group_start".into(),
                    ))
                }
                1 => {
                    group.depth = 0;
                    group.memory.clear();
                    (
                        std::mem::take(&mut group.keep),
                        std::mem::take(&mut group.streams),
                    )
                }
                _ => {
                    group.depth -= 1;
                    (Vec::new(), Vec::new())
                }
            }
        };
        self.inner.device.bind()?;
        // Start markers on every stream of the group, before its calls are queued.
        let starts: Vec<Option<RawEvent>> =
            streams.iter().map(|s| self.inner.mark_start(s)).collect();
        let code = {
            let _raw = lock(&self.inner.raw);
            // SAFETY: closes the group opened by `group_start` on this thread.
            unsafe { (self.inner.lib.group_end)() }
        };
        // The calls are queued now: buffers dropped from here on are released after them.
        drop(keep);
        let queued = code == result::SUCCESS;
        for (stream, start) in streams.iter().zip(starts) {
            self.inner.mark_end(stream, start, queued);
        }
        if !queued {
            return Err(self.inner.error("group_end", code));
        }
        Ok(())
    }
}

impl<A: RawApi> CommBackend for GpuBackend<A> {
    type Comm = GpuComm<A>;

    fn unique_id(place: &Place) -> Result<UniqueId> {
        GpuComm::<A>::unique_id(place)
    }

    fn init_comm(place: &Place, rank: usize, nranks: usize, id: &UniqueId) -> Result<GpuComm<A>> {
        GpuComm::<A>::init(place, rank, nranks, id)
    }
}
