//! The plug-in's collectives (`xccl_*`): ranks are threads of this process, on either device
//! and any number per device.
//!
//! * `xccl_get_unique_id` writes 16 bytes: a magic number and the number of a rendezvous in a
//!   process-wide registry; `xccl_comm_init_rank` joins that rendezvous and returns once every
//!   rank has joined (or answers `C_FAILED` at the deadline).
//! * Each collective is a task of the given stream (the null stream: the device's default
//!   stream), so it runs in stream order and events recorded after it complete after it. The
//!   task waits for the peers' tasks of the same collective (numbered per communicator in call
//!   order), reads every contribution, waits until every rank has read, then writes its own
//!   result: in-place calls are safe. Sums and products of integers wrap, `AVG` divides the
//!   (wrapped) sum by the number of ranks, truncating for integers; floats are combined in rank
//!   order, `FLOAT16`/`BFLOAT16` in `f32` (rounded to nearest even on the way back): the CPU
//!   reference engine's arithmetic, `devstream_core::reduce`.
//! * `xccl_send` never waits (the bytes are taken when the task runs); `xccl_recv` waits for
//!   the next message from its peer. Between `xccl_group_start` and `xccl_group_end` (per
//!   thread) calls are collected and each stream gets one task at the end that runs the
//!   group's sends first, then its other calls in order.
//! * A rank that waits past the deadline (`DEVSTREAM_COMM_TIMEOUT_SECS`, default 30 s), for a
//!   peer whose communicator was destroyed (`xccl_destroy_comm`) before it took part, or
//!   ranks that disagree on a collective, fail the communicator: the task finishes without
//!   writing, and every later call of every rank answers `C_FAILED` (the ABI cannot report a
//!   failure after the call returned).
//! * Collectives on a capturing stream are refused (`C_ERROR`, the capture is invalidated).
//!
//! * `xccl_all_to_all` is filled unless `DEVSTREAM_TEST_PLUGIN_CPU_NO_ALL_TO_ALL` is set when the
//!   plug-in loads (tests of devstream's fallback over grouped sends and receives).
//!
//! Types: every `C_DataType` devstream uses (`UINT8`, `INT32`, `INT64`, `FLOAT16`,
//! `FLOAT32`, `FLOAT64`, `BFLOAT16`); others answer `C_ERROR`.

use super::sys::*;
use super::{capture_of, guarded, invalidate, stream_obj, Task, CURRENT_DEVICE};
use devstream_core::comm::{CallKind, Collective};
use devstream_core::sync::lock;
use devstream_core::{DataType, ReduceOp};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

const ID_MAGIC: u64 = 0x6473_7863_636c_6964; // "dsxcclid"
const ID_SIZE: usize = 16;

static NEXT_RENDEZVOUS: AtomicU64 = AtomicU64::new(1);

/// When a wait that starts now gives up (`DEVSTREAM_COMM_TIMEOUT_SECS`, devstream's rule).
fn deadline() -> Instant {
    Instant::now() + devstream_core::comm::default_timeout()
}

/// One rank's part of a collective: the call (ranks must agree on it) and its addresses as
/// integers.
#[derive(Clone, Debug)]
struct Part {
    call: Collective,
    /// Send blocks: one (or one per destination rank for all-to-all).
    sends: Vec<usize>,
    /// Receive blocks: one (or one per source rank for all-to-all).
    recvs: Vec<usize>,
}

impl Part {
    /// Whether the ranks make the same call (devstream's cross-rank comparison).
    fn agrees(&self, other: &Part) -> bool {
        self.call.signature(0, 0) == other.call.signature(0, 0)
    }
}

#[derive(Default)]
struct Round {
    parts: Vec<Option<Part>>,
    read: usize,
    left: usize,
}

struct Message {
    bytes: Vec<u8>,
    count: usize,
    dtype: C_DataType,
}

#[derive(Default)]
struct State {
    joined: Vec<bool>,
    /// Ranks whose communicator was destroyed: a collective or message still waiting for one
    /// of them fails the communicator at once instead of at the deadline.
    left: Vec<bool>,
    members: usize,
    rounds: HashMap<u64, Round>,
    mail: HashMap<(usize, usize), VecDeque<Message>>,
    failed: Option<String>,
}

/// The ranks of one communicator.
struct Rendezvous {
    number: u64,
    nranks: usize,
    state: Mutex<State>,
    changed: Condvar,
}

impl Rendezvous {
    fn fail(&self, state: &mut State, reason: String) {
        if state.failed.is_none() {
            state.failed = Some(reason);
        }
        self.changed.notify_all();
    }

    /// Waits until `ready(state)` or the deadline; false at the deadline.
    fn wait_until<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        until: Instant,
        ready: impl Fn(&State) -> bool,
    ) -> (MutexGuard<'a, State>, bool) {
        loop {
            if ready(&state) {
                return (state, true);
            }
            let now = Instant::now();
            if now >= until {
                return (state, false);
            }
            state = self
                .changed
                .wait_timeout(state, until - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }
}

fn registry() -> &'static Mutex<HashMap<u64, Arc<Rendezvous>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<u64, Arc<Rendezvous>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// A rank: what `C_CCLComm` points to.
struct CommObj {
    rv: Arc<Rendezvous>,
    rank: usize,
    device: c_int,
    next: AtomicU64,
}

/// # Safety
/// `comm` is null or a live handle from `xccl_comm_init_rank`.
unsafe fn comm_obj<'a>(comm: C_CCLComm) -> Option<&'a CommObj> {
    // SAFETY: per the caller's contract.
    (!comm.is_null()).then(|| unsafe { &*(comm as *const CommObj) })
}

/// devstream's type of an ABI code (`None` for a type the plug-in does not know).
fn data_type(dtype: C_DataType) -> Option<DataType> {
    Some(match dtype {
        C_DATA_TYPE_FLOAT32 => DataType::F32,
        C_DATA_TYPE_FLOAT64 => DataType::F64,
        C_DATA_TYPE_FLOAT16 => DataType::F16,
        C_DATA_TYPE_BFLOAT16 => DataType::BF16,
        C_DATA_TYPE_INT32 => DataType::I32,
        C_DATA_TYPE_INT64 => DataType::I64,
        C_DATA_TYPE_UINT8 => DataType::U8,
        _ => return None,
    })
}

/// devstream's reduction of an ABI code.
fn reduce_op(op: C_CCLReduceOp) -> Option<ReduceOp> {
    Some(match op {
        C_CCL_SUM => ReduceOp::Sum,
        C_CCL_AVG => ReduceOp::Avg,
        C_CCL_MAX => ReduceOp::Max,
        C_CCL_MIN => ReduceOp::Min,
        C_CCL_PRODUCT => ReduceOp::Prod,
        _ => return None,
    })
}

fn elem_size(dtype: C_DataType) -> Option<usize> {
    data_type(dtype).map(DataType::size)
}

/// Folds `inputs` (one per rank, `count` elements each, in rank order) with `op`: the CPU
/// reference engine's arithmetic (`devstream_core::reduce`).
fn reduce(dtype: DataType, op: ReduceOp, inputs: &[&[u8]], count: usize) -> Vec<u8> {
    let size = dtype.size();
    let mut out = vec![0u8; count * size];
    let folded = devstream_core::reduce::reduce(dtype, op, inputs.len(), &mut out, |r, at, buf| {
        buf.copy_from_slice(&inputs[r][at * size..at * size + buf.len()]);
        Ok(())
    });
    debug_assert!(folded.is_ok(), "the input closure never fails");
    out
}

/// # Safety
/// `address` holds `len` readable bytes.
unsafe fn bytes<'a>(address: usize, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: per the caller's contract.
    unsafe { std::slice::from_raw_parts(address as *const u8, len) }
}

/// What this rank writes, from every rank's part (`None`: nothing).
fn result_of(rank: usize, parts: &[Part]) -> Option<Vec<u8>> {
    let me = &parts[rank];
    let Collective { kind, count, dtype } = me.call;
    let len = count * dtype.size();
    let read = |address: usize| -> &[u8] {
        // SAFETY: the host keeps each rank's buffers (of the checked sizes) alive and
        // unchanged until that rank's task completes, which is after every rank has read
        // (the `read` phase of `run_collective`).
        unsafe { bytes(address, len) }
    };
    match kind {
        CallKind::AllReduce { op } | CallKind::Reduce { op, .. } => {
            if kind.root().is_some_and(|root| root != rank) {
                return None;
            }
            let inputs: Vec<&[u8]> = parts.iter().map(|p| read(p.sends[0])).collect();
            Some(reduce(dtype, op, &inputs, count))
        }
        CallKind::ReduceScatter { op } => {
            let inputs: Vec<&[u8]> = parts
                .iter()
                .map(|p| read(p.sends[0] + rank * len))
                .collect();
            Some(reduce(dtype, op, &inputs, count))
        }
        CallKind::Broadcast { root } => (rank != root).then(|| read(parts[root].sends[0]).to_vec()),
        CallKind::AllGather => Some(
            parts
                .iter()
                .flat_map(|p| read(p.sends[0]).iter().copied())
                .collect(),
        ),
        CallKind::AllToAll => Some(
            parts
                .iter()
                .flat_map(|p| read(p.sends[rank]).iter().copied())
                .collect(),
        ),
        _ => None,
    }
}

/// Writes `out` to this rank's receive block(s).
fn write(part: &Part, out: &[u8]) {
    if out.is_empty() {
        return;
    }
    if part.recvs.len() == 1 {
        // SAFETY: the host's receive buffer holds `out.len()` bytes (the call's contract).
        unsafe { std::ptr::copy(out.as_ptr(), part.recvs[0] as *mut u8, out.len()) };
        return;
    }
    let block = out.len() / part.recvs.len();
    for (i, &recv) in part.recvs.iter().enumerate() {
        // SAFETY: block `i` of the receive blocks holds `block` bytes.
        unsafe { std::ptr::copy(out[i * block..].as_ptr(), recv as *mut u8, block) };
    }
}

/// The task of one rank's collective number `seq`.
fn run_collective(rv: &Rendezvous, rank: usize, seq: u64, part: Part) {
    let n = rv.nranks;
    let until = deadline();
    let mut state = lock(&rv.state);
    if state.failed.is_some() {
        return;
    }
    let round = state.rounds.entry(seq).or_default();
    if round.parts.is_empty() {
        round.parts = vec![None; n];
    }
    round.parts[rank] = Some(part.clone());
    rv.changed.notify_all();
    // A rank that left and has not taken part never will.
    let departed = |s: &State| {
        s.rounds.get(&seq).and_then(|r| {
            (0..n).find(|&p| r.parts[p].is_none() && s.left.get(p).copied().unwrap_or(false))
        })
    };
    let all_here = |s: &State| {
        s.failed.is_some()
            || departed(s).is_some()
            || s.rounds
                .get(&seq)
                .is_some_and(|r| r.parts.iter().all(Option::is_some))
    };
    let (mut state, arrived) = rv.wait_until(state, until, all_here);
    if !arrived {
        let reason = format!("rank {rank}: collective {seq}: a peer did not arrive in time");
        rv.fail(&mut state, reason);
        return;
    }
    if let Some(gone) = departed(&state) {
        let reason = format!("rank {rank}: collective {seq}: rank {gone} left");
        rv.fail(&mut state, reason);
        return;
    }
    if state.failed.is_some() {
        return;
    }
    let parts: Vec<Part> = state.rounds[&seq]
        .parts
        .iter()
        .map(|p| p.clone().expect("all here"))
        .collect();
    if parts.iter().any(|p| !p.agrees(&parts[0])) {
        rv.fail(&mut state, format!("collective {seq}: ranks disagree"));
        return;
    }
    drop(state);
    let out = result_of(rank, &parts);
    let mut state = lock(&rv.state);
    if let Some(round) = state.rounds.get_mut(&seq) {
        round.read += 1;
    }
    rv.changed.notify_all();
    let all_read =
        |s: &State| s.failed.is_some() || s.rounds.get(&seq).is_some_and(|r| r.read == n);
    let (mut state, done) = rv.wait_until(state, until, all_read);
    if !done {
        rv.fail(
            &mut state,
            format!("rank {rank}: collective {seq}: a peer stalled"),
        );
        return;
    }
    if state.failed.is_some() {
        return;
    }
    let round = state
        .rounds
        .get_mut(&seq)
        .expect("present until every rank left");
    round.left += 1;
    if round.left == n {
        state.rounds.remove(&seq);
    }
    drop(state);
    if let Some(out) = out {
        write(&part, &out);
    }
}

fn run_send(rv: &Rendezvous, from: usize, to: usize, buf: usize, count: usize, dtype: C_DataType) {
    let len = count * elem_size(dtype).unwrap_or(0);
    // SAFETY: the host keeps `buf` (count elements) alive until this task completes.
    let data = unsafe { bytes(buf, len) }.to_vec();
    let mut state = lock(&rv.state);
    state
        .mail
        .entry((from, to))
        .or_default()
        .push_back(Message {
            bytes: data,
            count,
            dtype,
        });
    rv.changed.notify_all();
}

fn run_recv(rv: &Rendezvous, from: usize, to: usize, buf: usize, count: usize, dtype: C_DataType) {
    let state = lock(&rv.state);
    let has_mail = |s: &State| s.mail.get(&(from, to)).is_some_and(|q| !q.is_empty());
    let sender_left = |s: &State| !has_mail(s) && s.left.get(from).copied().unwrap_or(false);
    let ready = |s: &State| s.failed.is_some() || has_mail(s) || sender_left(s);
    let (mut state, arrived) = rv.wait_until(state, deadline(), ready);
    if !arrived {
        rv.fail(
            &mut state,
            format!("rank {to}: no message from rank {from} in time"),
        );
        return;
    }
    if sender_left(&state) {
        rv.fail(&mut state, format!("rank {to}: rank {from} left"));
        return;
    }
    let Some(message) = state
        .mail
        .get_mut(&(from, to))
        .and_then(VecDeque::pop_front)
    else {
        return;
    };
    if message.count != count || message.dtype != dtype {
        rv.fail(
            &mut state,
            format!("rank {to}: a message from rank {from} of another count or type"),
        );
        return;
    }
    drop(state);
    // SAFETY: the host's buffer holds `count` elements.
    unsafe { std::ptr::copy(message.bytes.as_ptr(), buf as *mut u8, message.bytes.len()) };
}

/// A collective task, or a send (run first inside a group).
struct Work {
    is_send: bool,
    run: Box<dyn FnOnce() + Send>,
}

/// An open group: its depth and the calls per stream (device, stream handle).
type OpenGroup = (usize, Vec<(c_int, usize, Vec<Work>)>);

thread_local! {
    /// The open group of this thread.
    static GROUP: RefCell<OpenGroup> = const { RefCell::new((0, Vec::new())) };
}

/// Puts `work` on `stream` of the communicator's device (or into the open group).
fn enqueue(comm: &CommObj, stream: C_Stream, work: Work) -> C_Status {
    // SAFETY: the host passes a live (or null) stream of this plug-in.
    let Some(obj) = (unsafe { stream_obj(comm.device, stream) }) else {
        return C_ERROR;
    };
    if obj.device != comm.device {
        return C_ERROR;
    }
    if capture_of(&obj.state).is_some() {
        invalidate(&obj.state);
        return C_ERROR;
    }
    if lock(&comm.rv.state).failed.is_some() {
        return C_FAILED;
    }
    if GROUP.with(|g| g.borrow().0 > 0) {
        GROUP.with(|g| {
            let mut g = g.borrow_mut();
            let key = (comm.device, stream as usize);
            match g.1.iter_mut().find(|(d, s, _)| (*d, *s) == key) {
                Some((_, _, works)) => works.push(work),
                None => g.1.push((key.0, key.1, vec![work])),
            }
        });
        return C_SUCCESS;
    }
    obj.submit(Task::Xccl(work.run))
}

/// Queues collective `kind` (`None`: an unknown reduction) of `count` elements of `dtype` with
/// its send and receive blocks.
fn collective(
    comm: C_CCLComm,
    stream: C_Stream,
    kind: Option<CallKind>,
    (count, dtype): (usize, C_DataType),
    sends: Vec<usize>,
    recvs: Vec<usize>,
) -> C_Status {
    guarded(|| {
        // SAFETY: a live communicator from the host.
        let Some(comm) = (unsafe { comm_obj(comm) }) else {
            return C_ERROR;
        };
        let (Some(kind), Some(dtype)) = (kind, data_type(dtype)) else {
            return C_ERROR;
        };
        if kind.root().is_some_and(|root| root >= comm.rv.nranks) {
            return C_ERROR;
        }
        let part = Part {
            call: Collective::new(kind, count, dtype),
            sends,
            recvs,
        };
        let seq = comm.next.fetch_add(1, Ordering::SeqCst);
        let (rv, rank) = (comm.rv.clone(), comm.rank);
        let run = Box::new(move || run_collective(&rv, rank, seq, part));
        enqueue(
            comm,
            stream,
            Work {
                is_send: false,
                run,
            },
        )
    })
}

pub(crate) unsafe extern "C" fn get_unique_id_size(size: *mut usize) -> C_Status {
    guarded(|| {
        if size.is_null() {
            return C_ERROR;
        }
        // SAFETY: a non-null out-parameter.
        unsafe { *size = ID_SIZE };
        C_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn get_unique_id(id: *mut C_CCLRootId) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a readable root id.
        let Some(id) = (unsafe { id.as_ref() }) else {
            return C_ERROR;
        };
        if id.sz < ID_SIZE || id.data.is_null() {
            return C_ERROR;
        }
        let number = NEXT_RENDEZVOUS.fetch_add(1, Ordering::SeqCst);
        let mut raw = [0u8; ID_SIZE];
        raw[..8].copy_from_slice(&ID_MAGIC.to_le_bytes());
        raw[8..].copy_from_slice(&number.to_le_bytes());
        // SAFETY: `data` holds `sz >= ID_SIZE` writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(raw.as_ptr(), id.data.cast::<u8>(), ID_SIZE) };
        C_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn comm_init_rank(
    nranks: usize,
    id: *mut C_CCLRootId,
    rank: usize,
    comm: *mut C_CCLComm,
) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a readable root id.
        let Some(id) = (unsafe { id.as_ref() }) else {
            return C_ERROR;
        };
        if comm.is_null() || id.data.is_null() || id.sz < ID_SIZE || rank >= nranks {
            return C_ERROR;
        }
        let mut raw = [0u8; ID_SIZE];
        // SAFETY: `data` holds `sz >= ID_SIZE` readable bytes.
        unsafe { std::ptr::copy_nonoverlapping(id.data.cast::<u8>(), raw.as_mut_ptr(), ID_SIZE) };
        if raw[..8] != ID_MAGIC.to_le_bytes() {
            return C_ERROR;
        }
        let number = u64::from_le_bytes(raw[8..].try_into().unwrap());
        let rv = {
            let mut registry = lock(registry());
            let rv = registry.entry(number).or_insert_with(|| {
                Arc::new(Rendezvous {
                    number,
                    nranks,
                    state: Mutex::new(State {
                        joined: vec![false; nranks],
                        left: vec![false; nranks],
                        ..State::default()
                    }),
                    changed: Condvar::new(),
                })
            });
            if rv.nranks != nranks {
                return C_ERROR;
            }
            let mut state = lock(&rv.state);
            if state.joined[rank] {
                return C_ERROR;
            }
            state.joined[rank] = true;
            state.members += 1;
            rv.changed.notify_all();
            drop(state);
            rv.clone()
        };
        let state = lock(&rv.state);
        let (mut state, joined) = rv.wait_until(state, deadline(), |s| s.joined.iter().all(|j| *j));
        if !joined {
            state.joined[rank] = false;
            drop(state);
            leave(&rv);
            return C_FAILED;
        }
        drop(state);
        let obj = Box::new(CommObj {
            rv,
            rank,
            device: CURRENT_DEVICE.with(Cell::get),
            next: AtomicU64::new(0),
        });
        // SAFETY: a non-null out-parameter.
        unsafe { *comm = Box::into_raw(obj) as C_CCLComm };
        C_SUCCESS
    })
}

/// One member fewer; the last one removes the rendezvous from the registry.
fn leave(rv: &Arc<Rendezvous>) {
    let mut registry = lock(registry());
    let mut state = lock(&rv.state);
    state.members -= 1;
    if state.members == 0 {
        registry.remove(&rv.number);
    }
}

pub(crate) unsafe extern "C" fn destroy_comm(comm: C_CCLComm) -> C_Status {
    guarded(|| {
        if comm.is_null() {
            return C_ERROR;
        }
        // SAFETY: a handle from `xccl_comm_init_rank`, destroyed once.
        let obj = unsafe { Box::from_raw(comm as *mut CommObj) };
        {
            let mut state = lock(&obj.rv.state);
            if let Some(left) = state.left.get_mut(obj.rank) {
                *left = true;
            }
            obj.rv.changed.notify_all();
        }
        leave(&obj.rv);
        C_SUCCESS
    })
}

/// `xccl_all_reduce`, or with `SCATTER` `xccl_reduce_scatter` (the same arguments).
pub(crate) unsafe extern "C" fn all_reduce<const SCATTER: bool>(
    send: *mut c_void,
    recv: *mut c_void,
    count: usize,
    dtype: C_DataType,
    op: C_CCLReduceOp,
    comm: C_CCLComm,
    stream: C_Stream,
) -> C_Status {
    let kind = reduce_op(op).map(|op| match SCATTER {
        false => CallKind::AllReduce { op },
        true => CallKind::ReduceScatter { op },
    });
    let (sends, recvs) = (vec![send as usize], vec![recv as usize]);
    collective(comm, stream, kind, (count, dtype), sends, recvs)
}

pub(crate) unsafe extern "C" fn broadcast(
    buf: *mut c_void,
    count: usize,
    dtype: C_DataType,
    root: usize,
    comm: C_CCLComm,
    stream: C_Stream,
) -> C_Status {
    let kind = Some(CallKind::Broadcast { root });
    let (sends, recvs) = (vec![buf as usize], vec![buf as usize]);
    collective(comm, stream, kind, (count, dtype), sends, recvs)
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn reduce_to_root(
    send: *mut c_void,
    recv: *mut c_void,
    count: usize,
    dtype: C_DataType,
    op: C_CCLReduceOp,
    root: usize,
    comm: C_CCLComm,
    stream: C_Stream,
) -> C_Status {
    let kind = reduce_op(op).map(|op| CallKind::Reduce { op, root });
    let (sends, recvs) = (vec![send as usize], vec![recv as usize]);
    collective(comm, stream, kind, (count, dtype), sends, recvs)
}

pub(crate) unsafe extern "C" fn all_gather(
    send: *mut c_void,
    recv: *mut c_void,
    count: usize,
    dtype: C_DataType,
    comm: C_CCLComm,
    stream: C_Stream,
) -> C_Status {
    let (sends, recvs) = (vec![send as usize], vec![recv as usize]);
    collective(
        comm,
        stream,
        Some(CallKind::AllGather),
        (count, dtype),
        sends,
        recvs,
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn all_to_all(
    send: *const *const c_void,
    send_count: *const usize,
    send_dtype: *const C_DataType,
    recv: *mut *mut c_void,
    recv_count: *const usize,
    recv_dtype: *const C_DataType,
    rank: usize,
    nranks: usize,
    comm: C_CCLComm,
    stream: C_Stream,
) -> C_Status {
    guarded(|| {
        let arrays = [send.cast::<u8>(), send_count.cast(), send_dtype.cast()];
        let more = [
            recv.cast::<u8>().cast_const(),
            recv_count.cast(),
            recv_dtype.cast(),
        ];
        if arrays.iter().chain(&more).any(|p| p.is_null()) || nranks == 0 {
            return C_ERROR;
        }
        // SAFETY: the host passes `nranks` entries in each array.
        let (sends, scounts, stypes, recvs, rcounts, rtypes) = unsafe {
            (
                std::slice::from_raw_parts(send, nranks),
                std::slice::from_raw_parts(send_count, nranks),
                std::slice::from_raw_parts(send_dtype, nranks),
                std::slice::from_raw_parts(recv, nranks),
                std::slice::from_raw_parts(recv_count, nranks),
                std::slice::from_raw_parts(recv_dtype, nranks),
            )
        };
        // SAFETY: a live communicator (or null) from the host.
        match unsafe { comm_obj(comm) } {
            Some(c) if c.rank == rank && c.rv.nranks == nranks => {}
            _ => return C_ERROR,
        }
        // One count and type for every block (what devstream and Paddle pass).
        let (count, dtype) = (scounts[0], stypes[0]);
        let uniform = scounts.iter().chain(rcounts).all(|&c| c == count)
            && stypes.iter().chain(rtypes).all(|&t| t == dtype);
        if !uniform {
            return C_ERROR;
        }
        let sends = sends.iter().map(|&p| p as usize).collect();
        let recvs = recvs.iter().map(|&p| p as usize).collect();
        collective(
            comm,
            stream,
            Some(CallKind::AllToAll),
            (count, dtype),
            sends,
            recvs,
        )
    })
}

/// `xccl_send`, or without `IS_SEND` `xccl_recv` (the same arguments).
pub(crate) unsafe extern "C" fn point_to_point<const IS_SEND: bool>(
    buf: *mut c_void,
    count: usize,
    dtype: C_DataType,
    peer: usize,
    comm: C_CCLComm,
    stream: C_Stream,
) -> C_Status {
    guarded(|| {
        // SAFETY: a live communicator from the host.
        let Some(c) = (unsafe { comm_obj(comm) }) else {
            return C_ERROR;
        };
        if elem_size(dtype).is_none() || peer >= c.rv.nranks {
            return C_ERROR;
        }
        let (rv, rank, buf) = (c.rv.clone(), c.rank, buf as usize);
        let run: Box<dyn FnOnce() + Send> = if IS_SEND {
            Box::new(move || run_send(&rv, rank, peer, buf, count, dtype))
        } else {
            Box::new(move || run_recv(&rv, peer, rank, buf, count, dtype))
        };
        enqueue(
            c,
            stream,
            Work {
                is_send: IS_SEND,
                run,
            },
        )
    })
}

pub(crate) unsafe extern "C" fn group_start() -> C_Status {
    guarded(|| {
        GROUP.with(|g| g.borrow_mut().0 += 1);
        C_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn group_end() -> C_Status {
    guarded(|| {
        let streams = GROUP.with(|g| {
            let mut g = g.borrow_mut();
            match g.0 {
                0 => None,
                1 => {
                    g.0 = 0;
                    Some(std::mem::take(&mut g.1))
                }
                _ => {
                    g.0 -= 1;
                    Some(Vec::new())
                }
            }
        });
        let Some(streams) = streams else {
            return C_ERROR;
        };
        let mut status = C_SUCCESS;
        for (device, stream, works) in streams {
            // SAFETY: a stream the host passed inside the group, still live.
            let Some(obj) = (unsafe { stream_obj(device, stream as C_Stream) }) else {
                status = C_ERROR;
                continue;
            };
            let (sends, others): (Vec<Work>, Vec<Work>) =
                works.into_iter().partition(|w| w.is_send);
            let task = Task::Xccl(Box::new(move || {
                for work in sends.into_iter().chain(others) {
                    (work.run)();
                }
            }));
            let submitted = obj.submit(task);
            if submitted != C_SUCCESS {
                status = submitted;
            }
        }
        status
    })
}

/// Fills the table's xccl functions.
pub(crate) fn fill(table: &mut C_DeviceInterface) {
    table.xccl_get_unique_id_size = Some(get_unique_id_size);
    table.xccl_get_unique_id = Some(get_unique_id);
    table.xccl_comm_init_rank = Some(comm_init_rank);
    table.xccl_destroy_comm = Some(destroy_comm);
    table.xccl_all_reduce = Some(all_reduce::<false>);
    table.xccl_broadcast = Some(broadcast);
    table.xccl_reduce = Some(reduce_to_root);
    table.xccl_all_gather = Some(all_gather);
    table.xccl_reduce_scatter = Some(all_reduce::<true>);
    table.xccl_group_start = Some(group_start);
    table.xccl_group_end = Some(group_end);
    table.xccl_send = Some(point_to_point::<true>);
    table.xccl_recv = Some(point_to_point::<false>);
    // Left null on request, so that tests reach devstream's grouped send/recv fallback.
    if std::env::var_os(NO_ALL_TO_ALL).is_none() {
        table.xccl_all_to_all = Some(all_to_all);
    }
}

/// Set (to anything) when the plug-in loads: `xccl_all_to_all` stays null.
pub const NO_ALL_TO_ALL: &str = "DEVSTREAM_TEST_PLUGIN_CPU_NO_ALL_TO_ALL";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_reductions_wrap_and_avg_truncates() {
        let a = 200u8.to_ne_bytes();
        let b = 100u8.to_ne_bytes();
        assert_eq!(reduce(DataType::U8, ReduceOp::Sum, &[&a, &b], 1), vec![44]);
        assert_eq!(reduce(DataType::U8, ReduceOp::Avg, &[&a, &b], 1), vec![22]);
        let x = (-7i32).to_ne_bytes();
        let y = 0i32.to_ne_bytes();
        assert_eq!(
            reduce(DataType::I32, ReduceOp::Avg, &[&x, &y], 1),
            (-3i32).to_ne_bytes()
        );
    }
}
