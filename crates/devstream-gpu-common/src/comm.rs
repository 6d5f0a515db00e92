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
use crate::raw::{RawApi, RawEvent};
use crate::users::StreamUsers;
use crate::{GpuBuffer, GpuStream};
use devstream_core::comm::{check_rank, CallKind, Collective, GroupState, Region};
use devstream_core::sync::lock;
use devstream_core::{
    CommBackend, CommFailure, DataType, DeviceBuffer, DeviceCommunicator, Error, Place, ReduceOp,
    Result, UniqueId,
};
use std::any::Any;
use std::ffi::{c_int, c_void};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

mod watch;

use watch::{watched, Watch, Watched};

pub use crate::comm_lib::{NCCL_LIBRARY_ENV, RCCL_LIBRARY_ENV};

pub use devstream_core::comm::default_timeout;

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

/// What an open group keeps for its end: the buffers its calls use (kept until the group is
/// queued) and the streams they were made on (watched from `group_end`).
struct GroupCalls<A: RawApi> {
    keep: Vec<Box<dyn Any + Send + Sync>>,
    streams: Vec<GpuStream<A>>,
}

impl<A: RawApi> Default for GroupCalls<A> {
    fn default() -> Self {
        GroupCalls {
            keep: Vec::new(),
            streams: Vec::new(),
        }
    }
}

/// The group state the handles of one communicator share (not the communicator itself, which
/// captures may keep after the last handle is gone).
struct OpenGroup<A: RawApi> {
    lib: &'static Nccl,
    device: &'static Device<A>,
    state: Mutex<GroupState<GroupCalls<A>>>,
}

impl<A: RawApi> Drop for OpenGroup<A> {
    fn drop(&mut self) {
        // The last handle is gone with a group open (an early return or a panic between
        // `group_start` and `group_end`). The library has recorded the group's calls in the
        // group of the thread that made them: ending it here (as `group_end` would) issues
        // them, so that thread's later library calls are not swallowed by a group that never
        // closes, and no recorded call outlives the communicator. On another thread the
        // library answers that no group is open there, which is ignored.
        let depth = lock(&self.state).abandon();
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
            state: Mutex::new(GroupState::default()),
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

    /// Queues `issue` (the library call on the raw communicator and stream) after the checks:
    /// notes the buffers and the communicator as users of the stream (captures own them),
    /// then calls, then arms the watchdog (or, in a group, keeps the buffers until its end).
    fn queue(
        &self,
        stream: &GpuStream<A>,
        buffers: &[&GpuBuffer<A>],
        call: &Collective,
        issue: impl FnOnce(NcclComm, crate::raw::RawStream) -> i32,
    ) -> Result<()> {
        let op = call.name();
        if let Some(error) = self.inner.aborted(op) {
            return Err(error);
        }
        if call.count == 0 {
            // Nothing moves and no rank waits for another (NCCL's no-op; zero-length buffers
            // have no address to hand it).
            return Ok(());
        }
        {
            // The device's buffers share one address space.
            let region = |b: &GpuBuffer<A>| Region {
                space: 0,
                offset: b.device_ptr(),
            };
            let (send, recv) = (region(buffers[0]), region(buffers[buffers.len() - 1]));
            let (rank, n) = (self.inner.rank, self.inner.nranks);
            lock(&self.group.state).admit(call, rank, n, send, recv)?;
        }
        self.inner.device.bind()?;
        for buffer in buffers {
            buffer.use_on(stream)?;
        }
        self.inner.users.note(stream.inner());
        let capturing = stream.keep_in_capture(Box::new(self.inner.clone()))?;
        let in_group = lock(&self.group.state).is_open();
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
        let code = issue(comm.0, stream.raw());
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
            let pending = &mut group.pending;
            for buffer in buffers {
                pending.keep.push(buffer.keep_alive());
            }
            if !capturing && !pending.streams.iter().any(|s| s == stream) {
                pending.streams.push(stream.clone());
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
}

/// Whether two buffers are the same allocation (an in-place call).
fn same<A: RawApi>(a: &GpuBuffer<A>, b: &GpuBuffer<A>) -> bool {
    a.device_ptr() == b.device_ptr() && a.len() == b.len()
}

/// `all_to_all` by NCCL's recipe: one send and one receive per peer in a group.
///
/// # Safety
/// `send` and `recv` are device addresses of `nranks` blocks of `bytes` (`count` elements of
/// type `t`) each, alive until the stream `raw` has run past the call; `comm` is live.
#[allow(clippy::too_many_arguments)]
unsafe fn all_to_all(
    lib: &Nccl,
    (send, recv): (u64, u64),
    count: usize,
    bytes: usize,
    t: c_int,
    nranks: usize,
    comm: NcclComm,
    raw: crate::raw::RawStream,
) -> i32 {
    // SAFETY: group calls only record state for this thread.
    let mut code = unsafe { (lib.group_start)() };
    if code != result::SUCCESS {
        return code;
    }
    for peer in 0..nranks {
        let offset = (peer * bytes) as u64;
        // SAFETY: block `peer` of each buffer holds `count` elements (the caller's contract).
        code = unsafe { (lib.send)(ptr(send + offset), count, t, peer as c_int, comm, raw) };
        if code != result::SUCCESS {
            break;
        }
        // SAFETY: as above.
        code = unsafe { (lib.recv)(ptr(recv + offset), count, t, peer as c_int, comm, raw) };
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

    fn collective(
        &self,
        stream: &GpuStream<A>,
        call: &Collective,
        send: &GpuBuffer<A>,
        recv: &GpuBuffer<A>,
    ) -> Result<()> {
        let name = call.name();
        let buffers: &[&GpuBuffer<A>] = if call.kind.is_point_to_point() {
            &[send]
        } else {
            &[send, recv]
        };
        self.check_places(name, stream, buffers)?;
        let (rank, n) = (self.inner.rank, self.inner.nranks);
        let bytes = call.check(rank, n, send.len(), recv.len())?;
        let in_place = same(send, recv);
        // In place, NCCL writes a reduce-scatter's result at `send[rank * count..]`; it is then
        // moved to `recv[..count]` (the regions do not overlap for rank ≥ 1).
        let scatter_in_place = in_place && rank > 0 && bytes > 0;
        match call.kind {
            CallKind::AllToAll if in_place && n > 1 && bytes > 0 => {
                return Err(Error::InvalidArgument(format!(
                    "{name}: in place is not supported by {} (grouped send/recv would overwrite \
                     blocks still to be sent); use separate buffers",
                    self.inner.lib.name
                )));
            }
            CallKind::ReduceScatter { .. }
                if scatter_in_place && lock(&self.group.state).is_open() =>
            {
                // The move to `recv[..count]` would be queued before the group's collective.
                return Err(Error::InvalidArgument(format!(
                    "{name}: in place inside a group is not supported on {} (rank {rank} > 0); \
                     use separate buffers",
                    self.inner.lib.name
                )));
            }
            kind if kind.is_nccl_call() => {}
            _ => return Err(Error::unsupported(name, &self.inner.device.place)),
        }
        let t = self.dtype(call.dtype, name)?;
        let o = match call.kind.reduction() {
            Some(op) => self.redop(op, name)?,
            None => 0,
        };
        // The root or peer (checked to be a rank).
        let other = call.kind.root().or(call.kind.peer()).unwrap_or(0) as c_int;
        let (lib, kind, count) = (self.inner.lib, call.kind, call.count);
        let (s, r) = (send.device_ptr(), recv.device_ptr());
        let s = match kind {
            // In place, this rank's part is `recv[rank * count..]`: NCCL's in-place layout.
            CallKind::AllGather if in_place => r + (rank * bytes) as u64,
            _ => s,
        };
        let at = match kind {
            CallKind::ReduceScatter { .. } if scatter_in_place => r + (rank * bytes) as u64,
            _ => r,
        };
        self.queue(stream, buffers, call, |comm, raw| {
            // SAFETY: `call.check` found every buffer large enough for what the call reads and
            // writes on this rank (NCCL's layout, addressed above), all on the communicator's
            // device; `queue` keeps them alive until the stream has run past the call.
            unsafe {
                match kind {
                    CallKind::AllReduce { .. } => {
                        (lib.all_reduce)(ptr(s), ptr(r), count, t, o, comm, raw)
                    }
                    CallKind::Broadcast { .. } => {
                        (lib.broadcast)(ptr(s), ptr(r), count, t, other, comm, raw)
                    }
                    CallKind::Reduce { .. } => {
                        (lib.reduce)(ptr(s), ptr(r), count, t, o, other, comm, raw)
                    }
                    CallKind::AllGather => (lib.all_gather)(ptr(s), ptr(r), count, t, comm, raw),
                    CallKind::ReduceScatter { .. } => {
                        let code = (lib.reduce_scatter)(ptr(s), ptr(at), count, t, o, comm, raw);
                        if code == result::SUCCESS
                            && at != r
                            && A::memcpy_dtod_async(r, at, bytes, raw).is_err()
                        {
                            return result::UNHANDLED_CUDA_ERROR;
                        }
                        code
                    }
                    CallKind::AllToAll => all_to_all(lib, (s, r), count, bytes, t, n, comm, raw),
                    CallKind::Send { .. } => (lib.send)(ptr(s), count, t, other, comm, raw),
                    CallKind::Recv { .. } => (lib.recv)(ptr(r), count, t, other, comm, raw),
                    _ => result::INVALID_USAGE,
                }
            }
        })
    }

    /// `ncclGroupStart`. NCCL's groups are per thread: open and close a group on the thread
    /// that makes its calls.
    fn group_start(&self) -> Result<()> {
        // SAFETY: only records thread state.
        let code = unsafe { (self.inner.lib.group_start)() };
        if code != result::SUCCESS {
            return Err(self.inner.error("group_start", code));
        }
        lock(&self.group.state).start();
        Ok(())
    }

    /// `ncclGroupEnd`: the outermost queues the group's calls.
    fn group_end(&self) -> Result<()> {
        let GroupCalls { keep, streams } = lock(&self.group.state).end()?.unwrap_or_default();
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
