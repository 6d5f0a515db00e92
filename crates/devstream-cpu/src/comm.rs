//! The CPU reference collectives engine (cargo feature `comm`).
//!
//! Ranks may be threads of one process, processes on one host, or both: every rank maps the
//! communicator's shared-memory control segment and publishes payloads as files beside it
//! (see `comm_shm`). When every rank is a thread of this process, an all-reduce skips the
//! files: ranks read and write each other's buffers in place (see [`LocalGroup`]), about one
//! memcpy of the buffer per rank. A collective on a stream is three stream tasks:
//!
//! 1. **post** (a host task on a pool worker): publish this rank's part, write its descriptor
//!    into the control segment and announce it, register the collective with the process's
//!    engine thread;
//! 2. **hold**: a flag wait, exactly like [`DeviceStream::wait_flag`]: the stream leaves the
//!    scheduler and holds no worker while peers are missing (a worker never blocks on other
//!    work, so ranks as threads sharing a pool smaller than the number of ranks cannot
//!    deadlock);
//! 3. **finish** (a host task): read the peers' parts, reduce or copy into the receive
//!    buffer, mark the collective done; a failure the engine reported (a dead or departed
//!    peer, the deadline, a mismatch between ranks) becomes the stream's error, returned by
//!    `synchronize` as [`Error::Comm`].
//!
//! **Steps.** A call outside a group, or a whole group, is one *step*: its first post reserves
//! the step's sequence numbers (collectives, all-reduce second phases, messages per peer) in
//! call order, so the numbers do not depend on which stream of a group posts first. Every
//! collective of a group is released only when every rank has posted every collective of the
//! group and all their descriptors (kind, reduction, type, root, count, group size) agree: a
//! disagreement anywhere in a group fails the whole group with [`CommFailure::Mismatch`] on
//! every rank before any of its receive buffers is written. A group holds at most
//! `MAX_GROUP_COLLECTIVES` (64) collectives, which bounds how far a rank runs ahead of its
//! peers' comparisons; a collective beyond that is refused with `Error::InvalidArgument` and
//! the group stays open (sends and receives are not counted).
//!
//! Captured, the three tasks are graph nodes, and each `launch` is a new collective with the
//! peers. Launches of one graph that contain collectives must be ordered (launched on one
//! stream, or with events between), as NCCL requires for any use of one communicator.

use crate::buffer::{BufferInner, CpuBuffer, Shared};
use crate::comm_engine::{self, Cleanup, Pending, Readers, Want};
use crate::comm_shm::{
    self, comm_dir, failure_of, poll_until, process_alive, Entry, Payload, Pool, Segment, ALIVE,
    EMPTY, LEFT, MAX_STEP_SEQS,
};
use crate::comm_step::{Counters, Numbers, Position, Prefix, Step};
use crate::flag::CpuFlag;
use crate::scheduler::{running_stream, CommonOp, Op, UserFn};
use crate::stream::{fail_running_task, CpuStream, StreamInner};
use crate::{lock, CpuBackend, CPU_PLACE};
use devstream_core::comm::{check_rank, CallKind, GroupMemory, Region};
use devstream_core::reduce::{reduce, reduce_chunks};
use devstream_core::{
    CommBackend, CommFailure, DataType, DeviceCommunicator, Error, Place, ReduceOp, Result,
    UniqueId, UNIQUE_ID_BYTES,
};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ID_MAGIC: &[u8; 8] = b"dscpucm1";

/// The default deadline of a collective: `DEVSTREAM_COMM_TIMEOUT_SECS` (seconds, fractions
/// allowed) or 30 s.
pub fn default_timeout() -> Duration {
    std::env::var("DEVSTREAM_COMM_TIMEOUT_SECS")
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|secs| secs.is_finite() && *secs > 0.0)
        .map_or(Duration::from_secs(30), Duration::from_secs_f64)
}

/// A new communicator id: 16 random bytes and the creator's pid.
fn new_unique_id() -> UniqueId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut raw = [0u8; UNIQUE_ID_BYTES];
    raw[..8].copy_from_slice(ID_MAGIC);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    for half in 0..2 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_usize(half);
        let start = 8 + half * 8;
        raw[start..start + 8].copy_from_slice(&hasher.finish().to_le_bytes());
    }
    raw[24..28].copy_from_slice(&std::process::id().to_le_bytes());
    UniqueId::from_raw(raw)
}

/// The control segment's path named by an id.
fn segment_path(id: &UniqueId) -> Result<std::path::PathBuf> {
    let raw = id.as_bytes();
    if &raw[..8] != ID_MAGIC {
        return Err(Error::InvalidArgument(
            "the unique id was not made by the cpu backend (UniqueId::new(&Place::Cpu))".into(),
        ));
    }
    let mut name = String::from("devstream-comm-");
    for byte in &raw[8..24] {
        name.push_str(&format!("{byte:02x}"));
    }
    let pid = u32::from_le_bytes([raw[24], raw[25], raw[26], raw[27]]);
    name.push_str(&format!("-{pid}"));
    Ok(comm_dir().join(name))
}

/// What a collective is, as stored in the control segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AllReduce = 1,
    Broadcast = 2,
    Reduce = 3,
    AllGather = 4,
    ReduceScatter = 5,
    AllToAll = 6,
    Send = 7,
    Recv = 8,
    /// All-reduce, second phase: every rank publishes its reduced slice and gathers the others.
    AllReduceGather = 9,
    /// All-reduce of ranks that all live in this process, second phase: the end barrier (no
    /// rank's stream moves on while a peer may still read or write its buffers; see
    /// [`LocalGroup`]). Never posted to the control segment.
    AllReduceEnd = 10,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce => "all_reduce",
            Kind::Broadcast => "broadcast",
            Kind::Reduce => "reduce",
            Kind::AllGather => "all_gather",
            Kind::ReduceScatter => "reduce_scatter",
            Kind::AllToAll => "all_to_all",
            Kind::Send => "send",
            Kind::Recv => "recv",
            Kind::AllReduceGather | Kind::AllReduceEnd => "all_reduce",
        }
    }

    fn from_code(code: u64) -> Option<Kind> {
        [
            Kind::AllReduce,
            Kind::Broadcast,
            Kind::Reduce,
            Kind::AllGather,
            Kind::ReduceScatter,
            Kind::AllToAll,
            Kind::AllReduceGather,
        ]
        .into_iter()
        .find(|k| *k as u64 == code)
    }
}

/// Readable form of a descriptor (for mismatch errors).
pub(crate) fn describe(entry: &Entry) -> String {
    let desc = entry.desc;
    let kind = Kind::from_code(desc & 0xff).map_or("?", Kind::name);
    let op = ReduceOp::from_code(((desc >> 8) & 0xff) as u8);
    let dtype = DataType::from_code(((desc >> 16) & 0xff) as u8);
    let group = desc >> 24;
    let dtype = dtype.map_or_else(|| "?".to_string(), |t| t.to_string());
    let (root, count) = (entry.root, entry.count);
    let call = match (kind, op) {
        ("broadcast", _) => format!("broadcast({dtype}, root {root})"),
        ("reduce", Some(op)) => format!("reduce({dtype}, {op}, root {root})"),
        (kind, Some(op)) => format!("{kind}({dtype}, {op})"),
        (kind, None) => format!("{kind}({dtype})"),
    };
    match group {
        0 | 1 => format!("{call} of {count} elements"),
        _ => format!("{call} of {count} elements in a group of {group} collectives"),
    }
}

/// The ranks of one communicator when every one of them is a thread of this process: each
/// all-reduce publishes its buffers here, and every rank reduces its slice straight from the
/// peers' send buffers and writes the result straight into every rank's receive buffer (one
/// read and one write of each byte per rank, against a file write and two reads through the
/// kernel on the payload-file path that ranks in other processes need).
///
/// Every rank holds shared access to every buffer of the collective for its whole reduction
/// and touches only its own slice of each. The slice's owner alone reduces it, combining the
/// ranks in rank order `0, 1, ..., n-1` (the payload-file path's order): every rank gets the
/// same bits, and the same bits whether its peers are threads or processes. Ordering: a rank
/// reads peers' buffers only once every rank has posted and the descriptors agree (the
/// engine's first hold), each rank writes only its own slice into the others' receive buffers
/// (the slice no other rank reads), and a second hold ([`Kind::AllReduceEnd`]) keeps every
/// rank's stream until all ranks are done, so no stream moves on to change a buffer a peer
/// still uses.
pub(crate) struct LocalGroup {
    /// Per rank: its published all-reduces (several while a group is open).
    slots: Vec<Mutex<Vec<Published>>>,
}

/// One rank's buffers of all-reduce `seq`, and the call's shape (checked by every rank before
/// it touches a peer's buffer: equal shapes make the ranks' slices disjoint).
#[derive(Clone)]
struct Published {
    seq: u64,
    send: Arc<BufferInner>,
    recv: Arc<BufferInner>,
    count: usize,
    dtype: DataType,
}

impl LocalGroup {
    /// The group of the communicator whose segment is `seg`, shared by its ranks in this
    /// process (made by the first of them to ask).
    fn of(seg: &Segment, nranks: usize) -> Arc<LocalGroup> {
        type Groups = Vec<((u64, u64), std::sync::Weak<LocalGroup>)>;
        static GROUPS: Mutex<Groups> = Mutex::new(Vec::new());
        let mut groups = lock(&GROUPS);
        groups.retain(|(_, group)| group.strong_count() > 0);
        if let Some(group) = groups
            .iter()
            .find(|(id, _)| *id == seg.file_id)
            .and_then(|(_, group)| group.upgrade())
        {
            return group;
        }
        let group = Arc::new(LocalGroup {
            slots: (0..nranks).map(|_| Mutex::new(Vec::new())).collect(),
        });
        groups.push((seg.file_id, Arc::downgrade(&group)));
        group
    }

    /// Rank `rank`'s buffers of all-reduce `seq`.
    fn published(&self, rank: usize, seq: u64) -> Option<Published> {
        lock(&self.slots[rank])
            .iter()
            .find(|p| p.seq == seq)
            .cloned()
    }

    /// Forgets rank `rank`'s all-reduces up to `seq`.
    fn retire(&self, rank: usize, seq: u64) {
        lock(&self.slots[rank]).retain(|p| p.seq > seq);
    }
}

/// This rank's counters in the control segment, kept as prefixes.
struct Marks {
    posted: Prefix,
    done: Prefix,
    sent: Vec<Prefix>,
    received: Vec<Prefix>,
}

/// Which counter a mark goes to.
#[derive(Clone, Copy)]
enum Counter {
    Posted,
    Done,
    Sent(usize),
    Received(usize),
}

/// One rank's membership of a communicator, shared by its handles and its queued collectives;
/// when the last of them is gone the rank leaves.
pub(crate) struct CommInner {
    pub(crate) seg: Arc<Segment>,
    /// This rank's payload files kept for reuse.
    pool: Arc<Pool>,
    pub(crate) rank: usize,
    pub(crate) nranks: usize,
    timeout_nanos: AtomicU64,
    /// Numbers handed out: steps, collectives, messages sent to / received from each peer.
    counters: Counters,
    marks: Mutex<Marks>,
    /// The open group. Its calls hold their buffers, not the communicator: a communicator
    /// dropped with a group open drops the group's calls and leaves.
    group: Mutex<Group>,
    /// Set when every rank is a thread of this process (decided once all have joined).
    local: std::sync::OnceLock<Arc<LocalGroup>>,
}

/// An open group: its depth and its calls, in call order, with their streams.
#[derive(Default)]
struct Group {
    depth: usize,
    calls: Vec<(CpuStream, Call)>,
    /// Collectives among the calls (at most [`MAX_GROUP_COLLECTIVES`]).
    collectives: u64,
    /// The memory the calls touch (a call may not write what another reads or writes).
    memory: GroupMemory,
}

/// Collectives one group may hold: each takes at most two sequence numbers (an all-reduce of
/// ranks in several processes: its two phases), so a group stays within `MAX_STEP_SEQS`, the
/// bound on how far a rank runs ahead of its peers' comparisons.
const MAX_GROUP_COLLECTIVES: u64 = MAX_STEP_SEQS / 2;

impl CommInner {
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout_nanos.load(Ordering::Relaxed))
    }

    /// The error for a communicator that has failed, if it has.
    pub(crate) fn aborted(&self, op: &'static str) -> Option<Error> {
        let word = self.seg.abort_word();
        if word == 0 {
            return None;
        }
        let rank = (word & 0xffff_ffff).saturating_sub(1);
        let failure = failure_of(word >> 32);
        Some(Error::Comm {
            op,
            failure: CommFailure::Aborted,
            reason: format!(
                "the communicator failed before (first failure: {failure}, seen by rank {rank}); \
                 make a new communicator"
            ),
        })
    }

    /// The error for work of the step at `base` (see `Numbers::base`) when the communicator
    /// failed at an earlier step (work of the failed step itself, and of steps before it, goes
    /// on: it completes, or learns the failed step's verdict).
    pub(crate) fn failed_before(&self, op: &'static str, base: u64) -> Option<Error> {
        if self.seg.abort_word() == 0 || base <= self.seg.failed_at() {
            return None;
        }
        self.aborted(op)
    }

    /// Records a failure of this rank's work of the step at `base` involving `peer`, marks the
    /// communicator failed for every rank, and returns the error.
    pub(crate) fn fail(
        &self,
        op: &'static str,
        failure: CommFailure,
        peer: usize,
        detail: &str,
        base: u64,
    ) -> Error {
        self.seg.abort(self.rank, failure, base);
        let what = match failure {
            CommFailure::PeerDied => format!("rank {peer}'s process is gone"),
            CommFailure::PeerLeft => format!("rank {peer} left the communicator"),
            _ => String::new(),
        };
        let sep = if what.is_empty() || detail.is_empty() {
            ""
        } else {
            "; "
        };
        Error::Comm {
            op,
            failure,
            reason: format!("rank {} of {}: {what}{sep}{detail}", self.rank, self.nranks),
        }
    }

    /// Marks `n` in this rank's counter `counter` and announces the prefix.
    fn mark(&self, counter: Counter, n: u64) {
        if n == 0 {
            return;
        }
        let mut marks = lock(&self.marks);
        let (prefix, word) = match counter {
            Counter::Posted => (&mut marks.posted, self.seg.posted(self.rank)),
            Counter::Done => (&mut marks.done, self.seg.done(self.rank)),
            Counter::Sent(peer) => (&mut marks.sent[peer], self.seg.sent(self.rank, peer)),
            Counter::Received(peer) => (
                &mut marks.received[peer],
                self.seg.received(self.rank, peer),
            ),
        };
        if let Some(upto) = prefix.mark(n) {
            word.store(upto, Ordering::SeqCst);
        }
    }
}

impl Drop for CommInner {
    fn drop(&mut self) {
        if let Some(local) = self.local.get() {
            local.retire(self.rank, u64::MAX);
        }
        let seg = &self.seg;
        seg.state(self.rank).store(LEFT, Ordering::Release);
        self.pool.close();
        let everyone_gone = (0..self.nranks).all(|r| {
            r == self.rank
                || seg.state(r).load(Ordering::Acquire) == LEFT
                || seg.peer_gone(r).is_some()
        });
        if everyone_gone {
            seg.sweep();
        }
    }
}

/// The state one queued collective shares across its tasks (and graph replays).
pub(crate) struct Instance {
    flag: CpuFlag,
    /// The collective's (or message's) numbers once posted (see `Numbers`).
    seq: AtomicU64,
    first: AtomicU64,
    last: AtomicU64,
    base: AtomicU64,
    error: Mutex<Option<Error>>,
}

impl Instance {
    fn new() -> Arc<Instance> {
        Arc::new(Instance {
            flag: CpuFlag::new(),
            seq: AtomicU64::new(0),
            first: AtomicU64::new(0),
            last: AtomicU64::new(0),
            base: AtomicU64::new(0),
            error: Mutex::new(None),
        })
    }

    /// Stores the outcome and releases the held stream.
    pub(crate) fn resolve(&self, error: Option<Error>) {
        *lock(&self.error) = error;
        self.flag.0.store(1);
    }
}

/// One call as made, before it is queued.
#[derive(Clone)]
struct Call {
    kind: Kind,
    op: ReduceOp,
    dtype: DataType,
    count: usize,
    /// Root (broadcast, reduce) or peer (send, recv).
    other: usize,
    send: Option<Arc<BufferInner>>,
    recv: Option<Arc<BufferInner>>,
}

/// One queued collective call (or one phase of an all-reduce: the call with the phase's kind).
struct CollOp {
    comm: Arc<CommInner>,
    call: Call,
    step: Arc<Step>,
    position: Position,
    /// Collectives in the step's group (part of the descriptor the ranks compare).
    group_size: u64,
    instance: Arc<Instance>,
    /// A second phase queued right after this one's finish (all-reduce's gather or end).
    next: Option<Arc<CollOp>>,
    /// A second phase's first phase (whose sequence number [`Kind::AllReduceEnd`] waits for).
    first: Option<Arc<Instance>>,
}

/// Builds the operations of one step from its calls (in call order).
fn build_step(
    comm: &Arc<CommInner>,
    calls: Vec<(CpuStream, Call)>,
) -> Vec<(CpuStream, Arc<CollOp>)> {
    let n = comm.nranks;
    let local = n > 1 && comm.local.get().is_some();
    let mut step = Step::new(n);
    // Positions first (the step's counts are part of every descriptor).
    let mut positions = Vec::with_capacity(calls.len());
    for (_, call) in &calls {
        let (position, second) = match call.kind {
            Kind::Send | Kind::Recv => {
                let (peer, sending) = (call.other, call.kind == Kind::Send);
                let counts = if sending {
                    &mut step.sends
                } else {
                    &mut step.recvs
                };
                let index = counts[peer];
                counts[peer] += 1;
                let position = if sending {
                    Position::Send { peer, index }
                } else {
                    Position::Recv { peer, index }
                };
                (position, None)
            }
            kind => {
                let index = step.collectives;
                step.collectives += 1;
                let second = match kind {
                    Kind::AllReduce if local => Some((Kind::AllReduceEnd, Position::None)),
                    Kind::AllReduce if n > 1 => {
                        let gather = step.gathers;
                        step.gathers += 1;
                        Some((Kind::AllReduceGather, Position::Gather(gather)))
                    }
                    _ => None,
                };
                (Position::Collective(index), second)
            }
        };
        step.posts += 1 + usize::from(matches!(second, Some((_, Position::Gather(_)))));
        positions.push((position, second));
    }
    let step = Arc::new(step);
    let group_size = step.collectives;
    calls
        .into_iter()
        .zip(positions)
        .map(|((stream, call), (position, second))| {
            let make = |kind: Kind,
                        position: Position,
                        instance: Arc<Instance>,
                        next: Option<Arc<CollOp>>,
                        first: Option<Arc<Instance>>| {
                Arc::new(CollOp {
                    comm: comm.clone(),
                    call: Call {
                        kind,
                        ..call.clone()
                    },
                    step: step.clone(),
                    position,
                    group_size,
                    instance,
                    next,
                    first,
                })
            };
            let first = Instance::new();
            let next = second.map(|(kind, position)| {
                make(kind, position, Instance::new(), None, Some(first.clone()))
            });
            (stream, make(call.kind, position, first, next, None))
        })
        .collect()
}

impl CollOp {
    /// Elements `lo..hi` of this rank's (or `rank`'s) slice of an all-reduce.
    fn slice(&self, rank: usize) -> std::ops::Range<usize> {
        let n = self.comm.nranks;
        rank * self.call.count / n..(rank + 1) * self.call.count / n
    }

    fn bytes(&self) -> usize {
        self.call.count * self.call.dtype.size()
    }

    /// The ranks' shared group when this all-reduce takes the in-process path.
    fn local(&self) -> Option<&LocalGroup> {
        match self.call.kind {
            Kind::AllReduce | Kind::AllReduceEnd if self.comm.nranks > 1 => {
                self.comm.local.get().map(|group| &**group)
            }
            _ => None,
        }
    }

    /// The descriptor the ranks compare: kind, reduction, type, root, count and the size of the
    /// step's group (a group of another size disagrees at its first collective already).
    fn entry(&self) -> Entry {
        let op = match self.call.kind {
            Kind::AllReduce | Kind::Reduce | Kind::ReduceScatter => u64::from(self.call.op.code()),
            _ => 0,
        };
        let root = match self.call.kind {
            Kind::Broadcast | Kind::Reduce => self.call.other as u64,
            _ => 0,
        };
        let group = match self.position {
            Position::Collective(_) => self.group_size,
            _ => 0,
        };
        Entry {
            desc: (group << 24)
                | (u64::from(self.call.dtype.code()) << 16)
                | (op << 8)
                | self.call.kind as u64,
            root,
            count: self.call.count as u64,
        }
    }

    /// Turns a transport failure of this rank's work into a communicator failure.
    fn failed(&self, error: Error, base: u64) -> Error {
        match error {
            Error::Comm {
                op,
                failure,
                reason,
            } => self.comm.fail(op, failure, self.comm.rank, &reason, base),
            other => other,
        }
    }

    /// Task 1: publish and register (on a pool worker; never waits for peers).
    fn post(&self) {
        let instance = &self.instance;
        instance.flag.0.store(0);
        *lock(&instance.error) = None;
        let numbers = match self.call.kind {
            Kind::AllReduceEnd => {
                // The first phase's numbers: its stream order put its post before this one.
                let first = self.first.as_ref();
                let load = |word: fn(&Instance) -> &AtomicU64| {
                    first.map_or(0, |f| word(f).load(Ordering::Acquire))
                };
                Numbers {
                    base: load(|f| &f.base),
                    seq: load(|f| &f.seq),
                    first: load(|f| &f.first),
                    last: load(|f| &f.last),
                }
            }
            _ => self.step.numbers(&self.comm.counters, self.position),
        };
        instance.seq.store(numbers.seq, Ordering::Release);
        instance.first.store(numbers.first, Ordering::Release);
        instance.last.store(numbers.last, Ordering::Release);
        instance.base.store(numbers.base, Ordering::Release);
        if let Some(error) = self.comm.failed_before(self.call.kind.name(), numbers.base) {
            instance.resolve(Some(error));
            return;
        }
        if let Some(error) = self.first_phase_failed() {
            instance.resolve(Some(error));
            return;
        }
        if let Err(error) = self.try_post(numbers) {
            let error = self.failed(error, numbers.base);
            if let (Error::Comm { failure, .. }, true) = (&error, numbers.first > 0) {
                // This rank's part never comes: its peers learn it from the verdict.
                let outcome = comm_shm::Outcome::Failed(*failure);
                let _ = self.comm.seg.decide(numbers.first, self.comm.rank, outcome);
            }
            instance.resolve(Some(error));
        }
    }

    /// For an all-reduce's gather: the error when its first phase failed (on every rank, by
    /// its verdict), so that no rank publishes or reads the slices of a collective that failed.
    fn first_phase_failed(&self) -> Option<Error> {
        if self.call.kind != Kind::AllReduceGather {
            return None;
        }
        let first = self.first.as_ref()?.first.load(Ordering::Acquire);
        let comm_shm::Verdict::Decided {
            outcome: comm_shm::Outcome::Failed(failure),
            rank,
        } = self.comm.seg.verdict(first)
        else {
            return None;
        };
        Some(Error::Comm {
            op: self.call.kind.name(),
            failure,
            reason: format!(
                "rank {} of {}: the all-reduce's first phase failed on every rank: {failure} \
                 (seen by rank {rank})",
                self.comm.rank, self.comm.nranks
            ),
        })
    }

    fn try_post(&self, numbers: Numbers) -> Result<()> {
        let comm = &self.comm;
        let seg = &comm.seg;
        let me = comm.rank;
        let name = self.call.kind.name();
        let bytes = self.bytes();
        let seq = numbers.seq;
        match self.call.kind {
            Kind::Send => {
                let peer = self.call.other;
                let path = seg.p2p_path(me, peer, seq);
                let mut header = [0u8; 16];
                header[..8].copy_from_slice(&u64::from(self.call.dtype.code()).to_le_bytes());
                header[8..].copy_from_slice(&(self.call.count as u64).to_le_bytes());
                {
                    let send = self.call.send.as_ref().map(|b| b.data.lock());
                    let data = send.as_ref().map_or(&[][..], |d| &d[..bytes]);
                    comm.pool.publish(name, &path, &[&header, data])?;
                }
                comm.mark(Counter::Sent(peer), seq);
                comm_engine::cleanup(Cleanup {
                    seg: seg.clone(),
                    pool: comm.pool.clone(),
                    rank: me,
                    nranks: comm.nranks,
                    path,
                    readers: Readers::P2p { dst: peer, seq },
                    expires: Instant::now() + 2 * comm.timeout(),
                });
                self.instance.resolve(None);
            }
            Kind::Recv => {
                comm_engine::register(Pending::new(
                    comm.clone(),
                    name,
                    numbers,
                    Want::Recv {
                        src: self.call.other,
                    },
                    self.instance.clone(),
                ));
            }
            Kind::AllReduceEnd => {
                comm_engine::register(Pending::new(
                    comm.clone(),
                    name,
                    numbers,
                    Want::Done,
                    self.instance.clone(),
                ));
            }
            _ => {
                let n = comm.nranks;
                let size = self.call.dtype.size();
                let slice = self.slice(me);
                let range = match self.call.kind {
                    Kind::Broadcast if me != self.call.other => None,
                    Kind::AllReduceGather => Some(slice.start * size..slice.end * size),
                    Kind::AllGather if self.in_place() => Some(me * bytes..(me + 1) * bytes),
                    Kind::ReduceScatter | Kind::AllToAll => Some(0..bytes * n),
                    _ => Some(0..bytes),
                };
                let range = match (self.local(), &self.call.send, &self.call.recv) {
                    (Some(local), Some(send), Some(recv)) => {
                        // Peers read and write the buffers themselves: no payload file.
                        lock(&local.slots[me]).push(Published {
                            seq,
                            send: send.clone(),
                            recv: recv.clone(),
                            count: self.call.count,
                            dtype: self.call.dtype,
                        });
                        None
                    }
                    _ => range,
                };
                if let Some(range) = range.filter(|r| !r.is_empty()) {
                    let path = seg.coll_path(seq, me);
                    {
                        let source = if (self.call.kind == Kind::AllGather && self.in_place())
                            || self.call.kind == Kind::AllReduceGather
                        {
                            self.call.recv.as_ref()
                        } else {
                            self.call.send.as_ref()
                        };
                        let data = source.map(|b| b.data.lock());
                        let slice = data.as_ref().map_or(&[][..], |d| &d[range]);
                        comm.pool.publish(name, &path, &[slice])?;
                    }
                    comm_engine::cleanup(Cleanup {
                        seg: seg.clone(),
                        pool: comm.pool.clone(),
                        rank: me,
                        nranks: n,
                        path,
                        readers: Readers::Coll { seq },
                        expires: Instant::now() + 2 * comm.timeout(),
                    });
                }
                let entry = self.entry();
                seg.write_entry(me, seq, entry);
                comm.mark(Counter::Posted, seq);
                comm_engine::register(Pending::new(
                    comm.clone(),
                    name,
                    numbers,
                    Want::Coll { entry },
                    self.instance.clone(),
                ));
            }
        }
        Ok(())
    }

    fn in_place(&self) -> bool {
        match (&self.call.send, &self.call.recv) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Task 3: read the peers' parts into the receive buffer (on a pool worker, after the
    /// engine released the stream: everything it reads is there), then mark this rank's part
    /// done, also after a failure (its readers need not wait for it).
    fn finish(&self) {
        let error = lock(&self.instance.error).take();
        let seq = self.instance.seq.load(Ordering::Acquire);
        let base = self.instance.base.load(Ordering::Acquire);
        let outcome = match error {
            Some(error) => Err(error),
            None => self
                .try_finish(seq)
                .map_err(|error| self.failed(error, base)),
        };
        let comm = &self.comm;
        match self.call.kind {
            Kind::Send => {}
            Kind::Recv => comm.mark(Counter::Received(self.call.other), seq),
            Kind::AllReduceEnd => {
                // Every rank is done with every buffer of all-reduce `seq` (or failed it).
                if let Some(local) = self.local() {
                    local.retire(comm.rank, seq);
                }
            }
            _ => comm.mark(Counter::Done, seq),
        }
        if let Err(error) = outcome {
            fail_running_task(error);
        }
    }

    fn try_finish(&self, seq: u64) -> Result<()> {
        let comm = &self.comm;
        let seg = &comm.seg;
        let me = comm.rank;
        let n = comm.nranks;
        let name = self.call.kind.name();
        let bytes = self.bytes();
        let base = self.instance.base.load(Ordering::Acquire);
        if self.call.kind == Kind::Recv {
            let peer = self.call.other;
            let path = seg.p2p_path(peer, me, seq);
            let payload = Payload::open(name, &path)?;
            let mut header = [0u8; 16];
            payload.read_at(name, 0, &mut header)?;
            let code = u64::from_le_bytes(header[..8].try_into().unwrap_or_default());
            let count = u64::from_le_bytes(header[8..].try_into().unwrap_or_default());
            if code != u64::from(self.call.dtype.code()) || count != self.call.count as u64 {
                let theirs = DataType::from_code(code as u8)
                    .map_or_else(|| "?".to_string(), |t| t.to_string());
                return Err(comm.fail(
                    name,
                    CommFailure::Mismatch,
                    peer,
                    &format!(
                        "message #{seq} from rank {peer} is {count} × {theirs}, this recv \
                         expects {} × {}",
                        self.call.count, self.call.dtype
                    ),
                    base,
                ));
            }
            if let Some(buf) = &self.call.recv {
                let mut data = buf.data.lock();
                payload.read_at(name, 16, &mut data[..bytes])?;
            }
            return Ok(());
        }
        if self.call.kind == Kind::AllReduceEnd {
            return Ok(());
        }
        match self.local() {
            Some(local) if bytes > 0 => self.local_all_reduce(local, seq),
            _ => self.gather(seq, me, n, bytes),
        }
    }

    /// All-reduce on the in-process path (see [`LocalGroup`]): reduces this rank's slice
    /// straight from every rank's send buffer (in rank order) and writes it into every rank's
    /// receive buffer, chunk by chunk.
    fn local_all_reduce(&self, local: &LocalGroup, seq: u64) -> Result<()> {
        const CHUNK_BYTES: usize = 64 << 10;
        let name = self.call.kind.name();
        let (me, n) = (self.comm.rank, self.comm.nranks);
        let size = self.call.dtype.size();
        let slice = self.slice(me);
        // Every rank posted `seq` before the engine released this stream.
        let ranks = (0..n)
            .map(|rank| {
                local.published(rank, seq).ok_or_else(|| {
                    comm_shm::transport(
                        name,
                        format!("rank {rank} has no buffers published for collective #{seq}"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Every rank's slices of every buffer are disjoint from the others' only if all ranks
        // reduce the same shape (the engine released the ranks after comparing their calls;
        // checked again here, since the shared access below relies on it).
        let needed = self.bytes();
        if let Some((rank, theirs)) = ranks.iter().enumerate().find(|(_, p)| {
            p.count != self.call.count
                || p.dtype != self.call.dtype
                || p.send.len < needed
                || p.recv.len < needed
        }) {
            return Err(comm_shm::transport(
                name,
                format!(
                    "rank {rank} published {} × {} for collective #{seq}, this rank {} × {}",
                    theirs.count, theirs.dtype, self.call.count, self.call.dtype
                ),
            ));
        }
        // Shared access to every buffer involved, taken in id order (the crate-wide lock order)
        // and held for the whole reduction: ranks work on one buffer at once without waiting
        // for each other, and no other operation touches the buffers meanwhile.
        let mut buffers: Vec<&Arc<BufferInner>> =
            ranks.iter().flat_map(|p| [&p.send, &p.recv]).collect();
        buffers.sort_by_key(|b| b.id);
        buffers.dedup_by_key(|b| b.id);
        let shared: Vec<(u64, Shared<'_>)> =
            buffers.iter().map(|b| (b.id, b.data.shared())).collect();
        let access = |buffer: &BufferInner| -> Result<&Shared<'_>> {
            shared
                .binary_search_by_key(&buffer.id, |(id, _)| *id)
                .map(|index| &shared[index].1)
                .map_err(|_| comm_shm::transport(name, "a published buffer was not locked"))
        };
        let sources: Vec<&Shared<'_>> = ranks
            .iter()
            .map(|p| access(&p.send))
            .collect::<Result<_>>()?;
        let targets: Vec<&Shared<'_>> = (0..n)
            .map(|i| access(&ranks[(me + i) % n].recv))
            .collect::<Result<_>>()?;
        let base = slice.start * size;
        // The slice's owner alone reduces it, combining the ranks in rank order (the
        // payload-file path's order): every rank gets the same bits on either path. Each rank
        // writes the result starting at itself.
        reduce_chunks(
            self.call.dtype,
            self.call.op,
            n,
            slice.len(),
            (CHUNK_BYTES / size).max(1),
            |i, first, chunk| {
                // SAFETY: these bytes lie in this rank's slice (`base` is its start, `first`
                // counts from there), which only this rank reads or writes during the
                // collective: every rank reduces the same shape (checked above) and touches only
                // its own slice of each buffer, and no exclusive holder exists (shared locks).
                unsafe { sources[i].read(base + first * size, chunk) }
            },
            |first, chunk| {
                for target in &targets {
                    // SAFETY: as for the reads above: this rank's own slice.
                    unsafe { target.write(base + first * size, chunk)? };
                }
                Ok(())
            },
        )?;
        Ok(())
    }

    fn gather(&self, seq: u64, me: usize, n: usize, bytes: usize) -> Result<()> {
        let name = self.call.kind.name();
        let seg = &self.comm.seg;
        let open = |rank: usize| Payload::open(name, &seg.coll_path(seq, rank));
        let Some(recv) = &self.call.recv else {
            return Ok(());
        };
        if bytes == 0 {
            return Ok(());
        }
        let size = self.call.dtype.size();
        match self.call.kind {
            Kind::Reduce if me != self.call.other => Ok(()),
            Kind::AllReduce => {
                // Phase 1: reduce this rank's slice of every rank's data.
                let slice = self.slice(me);
                if slice.is_empty() {
                    return Ok(());
                }
                let files = (0..n).map(open).collect::<Result<Vec<_>>>()?;
                let mut data = recv.data.lock();
                let base = slice.start * size;
                reduce(
                    self.call.dtype,
                    self.call.op,
                    n,
                    &mut data[base..slice.end * size],
                    |rank, start, out| files[rank].read_at(name, base + start * size, out),
                )
            }
            Kind::AllReduceGather => {
                // Phase 2: gather the other ranks' reduced slices.
                let mut data = recv.data.lock();
                for rank in (0..n).filter(|&r| r != me) {
                    let slice = self.slice(rank);
                    if !slice.is_empty() {
                        open(rank)?.read_at(
                            name,
                            0,
                            &mut data[slice.start * size..slice.end * size],
                        )?;
                    }
                }
                Ok(())
            }
            Kind::Reduce | Kind::ReduceScatter => {
                let files = (0..n).map(open).collect::<Result<Vec<_>>>()?;
                let base = if self.call.kind == Kind::ReduceScatter {
                    me * bytes
                } else {
                    0
                };
                let mut data = recv.data.lock();
                reduce(
                    self.call.dtype,
                    self.call.op,
                    n,
                    &mut data[..bytes],
                    |rank, start, out| files[rank].read_at(name, base + start * size, out),
                )
            }
            Kind::Broadcast => {
                let file = open(self.call.other)?;
                let mut data = recv.data.lock();
                file.read_at(name, 0, &mut data[..bytes])
            }
            Kind::AllGather => {
                let files = (0..n).map(open).collect::<Result<Vec<_>>>()?;
                let mut data = recv.data.lock();
                for (rank, file) in files.iter().enumerate() {
                    file.read_at(name, 0, &mut data[rank * bytes..(rank + 1) * bytes])?;
                }
                Ok(())
            }
            Kind::AllToAll => {
                let files = (0..n).map(open).collect::<Result<Vec<_>>>()?;
                let mut data = recv.data.lock();
                for (rank, file) in files.iter().enumerate() {
                    file.read_at(
                        name,
                        me * bytes,
                        &mut data[rank * bytes..(rank + 1) * bytes],
                    )?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// A communicator of the CPU place: one rank of `nranks`, ranks being threads of this
/// process, other processes on this host, or both.
///
/// Made by [`CommBackend::init_comm`] (the facade's `Communicator::init`), which returns once
/// every rank has joined. Cheap to clone; the rank leaves the communicator when the last
/// handle and the last queued collective using it are gone (its peers' pending and later
/// collectives then fail with [`CommFailure::PeerLeft`]). The calls of a group still open then
/// are dropped, never queued.
///
/// ```
/// use devstream_core::{CommBackend, DataType, DeviceBackend, DeviceCommunicator, DeviceStream,
///                      HostBuffer, Place, ReduceOp, StreamOptions};
/// use devstream_cpu::CpuBackend;
/// let id = CpuBackend::unique_id(&Place::Cpu).unwrap();
/// let ranks: Vec<_> = (0..2).map(|rank| std::thread::spawn(move || {
///     let comm = CpuBackend::init_comm(&Place::Cpu, rank, 2, &id).unwrap();
///     let s = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
///     let buf = s.alloc(4).unwrap();
///     s.copy_from_host(&buf, 0, &(rank as i32 + 1).to_ne_bytes()).unwrap();
///     comm.all_reduce(&s, &buf, &buf, 1, DataType::I32, ReduceOp::Sum).unwrap();
///     let host = s.alloc_host(4).unwrap();
///     s.copy_device_to_host(&host, 0, &buf, 0, 4).unwrap();
///     s.synchronize().unwrap();
///     i32::from_ne_bytes(host.to_vec().unwrap().try_into().unwrap())
/// })).collect();
/// for rank in ranks {
///     assert_eq!(rank.join().unwrap(), 3);
/// }
/// ```
#[derive(Clone)]
pub struct CpuComm(Arc<CommInner>);

impl fmt::Debug for CpuComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuComm")
            .field("rank", &self.0.rank)
            .field("nranks", &self.0.nranks)
            .field("segment", &self.0.seg.path)
            .finish()
    }
}

fn check_len(op: &'static str, what: &str, buf: &CpuBuffer, bytes: usize) -> Result<()> {
    devstream_core::comm::check_len(op, what, buf.0.len, bytes)
}

impl CpuComm {
    /// Joins communicator `id` as `rank` of `nranks` (see [`CommBackend::init_comm`]).
    pub fn init(rank: usize, nranks: usize, id: &UniqueId) -> Result<CpuComm> {
        let op = "init";
        if running_stream() != 0 {
            return Err(Error::WouldDeadlock {
                op: "Communicator::init",
                reason: "init waits for the other ranks; a CPU worker never blocks on other work"
                    .into(),
            });
        }
        if nranks == 0 {
            return Err(Error::InvalidArgument(
                "init: a communicator needs at least one rank".into(),
            ));
        }
        check_rank(op, "rank", rank, nranks)?;
        let path = segment_path(id)?;
        comm_engine::start()?;
        let timeout = default_timeout();
        let seg = Arc::new(Segment::open_or_create(&path, nranks)?);
        const JOINING: u64 = 3;
        if seg
            .state(rank)
            .compare_exchange(EMPTY, JOINING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Error::InvalidArgument(format!(
                "init: rank {rank} has already joined this communicator"
            )));
        }
        seg.pid(rank)
            .store(u64::from(std::process::id()), Ordering::Relaxed);
        seg.start_time(rank)
            .store(comm_shm::own_start_time(), Ordering::Relaxed);
        seg.state(rank).store(ALIVE, Ordering::Release);
        let inner = Arc::new(CommInner {
            seg: seg.clone(),
            pool: Arc::new(Pool::new(&path, rank)),
            rank,
            nranks,
            timeout_nanos: AtomicU64::new(timeout.as_nanos().min(u128::from(u64::MAX)) as u64),
            counters: Counters::new(nranks),
            marks: Mutex::new(Marks {
                posted: Prefix::default(),
                done: Prefix::default(),
                sent: (0..nranks).map(|_| Prefix::default()).collect(),
                received: (0..nranks).map(|_| Prefix::default()).collect(),
            }),
            group: Mutex::new(Group::default()),
            local: std::sync::OnceLock::new(),
        });
        // From here on a failure drops `inner`, which marks this rank as left.
        let started = Instant::now();
        let joined = poll_until(started + timeout, || {
            // Every rank joined (some may have left or died since: their peers' first
            // collective fails): done, whatever happened after.
            let states: Vec<u64> = (0..nranks)
                .map(|r| seg.state(r).load(Ordering::Acquire))
                .collect();
            if states.iter().all(|&s| s == ALIVE || s == LEFT) {
                return Some(Ok(()));
            }
            if let Some(error) = inner.aborted(op) {
                // A rank gave up waiting (its deadline passed): fail at once too. The segment
                // file stays so that later joiners see that as well.
                return Some(Err(error));
            }
            for (r, &state) in states.iter().enumerate() {
                if state == ALIVE {
                    let pid = seg.pid(r).load(Ordering::Relaxed) as u32;
                    let start = seg.start_time(r).load(Ordering::Relaxed);
                    if !process_alive(pid, start) {
                        return Some(Err(inner.fail(op, CommFailure::PeerDied, r, "", 0)));
                    }
                }
            }
            None
        });
        let error = match joined {
            Some(Ok(())) => {
                // Every rank has mapped the segment: its name is no longer needed.
                let _ = std::fs::remove_file(&path);
                // Every rank wrote its pid before it joined, so every rank decides this alike.
                let here = u64::from(std::process::id());
                if nranks > 1
                    && seg.file_id != (0, 0)
                    && (0..nranks).all(|r| seg.pid(r).load(Ordering::Acquire) == here)
                {
                    let _ = inner.local.set(LocalGroup::of(&seg, nranks));
                }
                return Ok(CpuComm(inner));
            }
            Some(Err(error)) => error,
            None => {
                let missing: Vec<usize> = (0..nranks)
                    .filter(|&r| seg.state(r).load(Ordering::Acquire) != ALIVE)
                    .collect();
                inner.fail(
                    op,
                    CommFailure::Timeout,
                    missing.first().copied().unwrap_or(0),
                    &format!("ranks {missing:?} did not join within {timeout:?}"),
                    0,
                )
            }
        };
        // Dropping `inner` marks this rank as left; the last rank to give up removes the
        // segment (a later joiner makes a new one and fails at its own deadline).
        drop(inner);
        if (0..nranks).all(|r| matches!(seg.state(r).load(Ordering::Acquire), EMPTY | LEFT)) {
            let _ = std::fs::remove_file(&path);
        }
        Err(error)
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.0.rank
    }

    /// Number of ranks.
    pub fn nranks(&self) -> usize {
        self.0.nranks
    }

    /// The deadline of each collective (from the `DEVSTREAM_COMM_TIMEOUT_SECS` environment
    /// variable, default 30 s, when the communicator was made).
    pub fn timeout(&self) -> Duration {
        self.0.timeout()
    }

    /// Sets the deadline of collectives posted from now on: a collective whose peers have not
    /// all posted by then fails with [`CommFailure::Timeout`] on this rank.
    pub fn set_timeout(&self, timeout: Duration) {
        let nanos = timeout.as_nanos().clamp(1, u128::from(u64::MAX)) as u64;
        self.0.timeout_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Checks a call's arguments and queues it (or adds it to the open group).
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        stream: &CpuStream,
        kind: Kind,
        send: Option<&CpuBuffer>,
        recv: Option<&CpuBuffer>,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        other: usize,
    ) -> Result<()> {
        let name = kind.name();
        let n = self.0.nranks;
        let me = self.0.rank;
        let bytes = dtype.bytes(name, count)?;
        let all = bytes
            .checked_mul(n)
            .ok_or_else(|| Error::InvalidArgument(format!("{name}: {count} × {n} overflows")))?;
        match kind {
            Kind::Broadcast | Kind::Reduce => check_rank(name, "root", other, n)?,
            Kind::Send | Kind::Recv => check_rank(name, "peer", other, n)?,
            _ => {}
        }
        let (send_need, recv_need) = match kind {
            Kind::AllReduce | Kind::AllReduceGather | Kind::AllReduceEnd => (bytes, bytes),
            Kind::Broadcast => (if me == other { bytes } else { 0 }, bytes),
            Kind::Reduce => (bytes, if me == other { bytes } else { 0 }),
            Kind::AllGather => (bytes, all),
            Kind::ReduceScatter => (all, bytes),
            Kind::AllToAll => (all, all),
            Kind::Send => (bytes, 0),
            Kind::Recv => (0, bytes),
        };
        if let Some(send) = send {
            check_len(name, "send", send, send_need)?;
        }
        if let Some(recv) = recv {
            check_len(name, "receive", recv, recv_need)?;
        }
        let call = Call {
            kind,
            op,
            dtype,
            count,
            other,
            send: send.map(|b| b.0.clone()),
            recv: recv.map(|b| b.0.clone()),
        };
        let mut group = lock(&self.0.group);
        if group.depth > 0 {
            let region = |b: &CpuBuffer| Region {
                space: b.0.id,
                offset: 0,
            };
            let Some(any) = send.or(recv) else {
                return Err(Error::InvalidArgument(format!("{name}: no buffer")));
            };
            let (s, r) = (region(send.unwrap_or(any)), region(recv.unwrap_or(any)));
            let call_kind = match kind {
                Kind::Broadcast => CallKind::Broadcast { root: other },
                Kind::Reduce => CallKind::Reduce { root: other },
                Kind::AllGather => CallKind::AllGather,
                Kind::ReduceScatter => CallKind::ReduceScatter,
                Kind::AllToAll => CallKind::AllToAll,
                Kind::Send => CallKind::Send,
                Kind::Recv => CallKind::Recv,
                _ => CallKind::AllReduce,
            };
            let collectives =
                group.collectives + u64::from(!matches!(kind, Kind::Send | Kind::Recv));
            if collectives > MAX_GROUP_COLLECTIVES {
                return Err(Error::InvalidArgument(format!(
                    "{name}: a group holds at most {MAX_GROUP_COLLECTIVES} collectives on the \
                     cpu engine (sends and receives are not counted); the group stays open \
                     without this call"
                )));
            }
            group
                .memory
                .admit(name, &call_kind.accesses(me, n, bytes, s, r))?;
            group.collectives = collectives;
            group.calls.push((stream.clone(), call));
            return Ok(());
        }
        drop(group);
        let ops: Vec<Arc<CollOp>> = build_step(&self.0, vec![(stream.clone(), call)])
            .into_iter()
            .map(|(_, op)| op)
            .collect();
        queue(&stream.0, &ops)
    }
}

/// Queues collectives on a stream: every post first, then each hold and finish (and a second
/// phase's post, hold and finish right after its first phase), so that the calls of a group
/// never wait for each other.
fn queue(stream: &Arc<StreamInner>, ops: &[Arc<CollOp>]) -> Result<()> {
    let post = |op: &Arc<CollOp>| {
        let op = op.clone();
        let name = op.call.kind.name();
        let f: devstream_core::HostFn = Box::new(move || op.post());
        stream.submit(Op::Host(UserFn::new(f)), name)
    };
    let hold_and_finish = |op: &Arc<CollOp>| {
        if op.call.kind == Kind::Send {
            return Ok(());
        }
        let flag = op.instance.flag.0.clone();
        stream.submit(
            Op::Common(CommonOp::WaitFlag { flag, value: 1 }),
            op.call.kind.name(),
        )?;
        let finish = op.clone();
        let f: devstream_core::HostFn = Box::new(move || finish.finish());
        stream.submit(Op::Host(UserFn::new(f)), op.call.kind.name())
    };
    for op in ops {
        post(op)?;
    }
    for op in ops {
        hold_and_finish(op)?;
        if let Some(next) = &op.next {
            post(next)?;
            hold_and_finish(next)?;
        }
    }
    Ok(())
}

impl DeviceCommunicator for CpuComm {
    type Stream = CpuStream;

    fn place(&self) -> &Place {
        &CPU_PLACE
    }
    fn rank(&self) -> usize {
        self.0.rank
    }
    fn nranks(&self) -> usize {
        self.0.nranks
    }

    fn all_reduce(
        &self,
        stream: &CpuStream,
        send: &CpuBuffer,
        recv: &CpuBuffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        self.call(
            stream,
            Kind::AllReduce,
            Some(send),
            Some(recv),
            count,
            dtype,
            op,
            0,
        )
    }

    fn broadcast(
        &self,
        stream: &CpuStream,
        send: &CpuBuffer,
        recv: &CpuBuffer,
        count: usize,
        dtype: DataType,
        root: usize,
    ) -> Result<()> {
        self.call(
            stream,
            Kind::Broadcast,
            Some(send),
            Some(recv),
            count,
            dtype,
            ReduceOp::Sum,
            root,
        )
    }

    fn reduce(
        &self,
        stream: &CpuStream,
        send: &CpuBuffer,
        recv: &CpuBuffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        self.call(
            stream,
            Kind::Reduce,
            Some(send),
            Some(recv),
            count,
            dtype,
            op,
            root,
        )
    }

    fn all_gather(
        &self,
        stream: &CpuStream,
        send: &CpuBuffer,
        recv: &CpuBuffer,
        count: usize,
        dtype: DataType,
    ) -> Result<()> {
        self.call(
            stream,
            Kind::AllGather,
            Some(send),
            Some(recv),
            count,
            dtype,
            ReduceOp::Sum,
            0,
        )
    }

    fn reduce_scatter(
        &self,
        stream: &CpuStream,
        send: &CpuBuffer,
        recv: &CpuBuffer,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
    ) -> Result<()> {
        self.call(
            stream,
            Kind::ReduceScatter,
            Some(send),
            Some(recv),
            count,
            dtype,
            op,
            0,
        )
    }

    fn all_to_all(
        &self,
        stream: &CpuStream,
        send: &CpuBuffer,
        recv: &CpuBuffer,
        count: usize,
        dtype: DataType,
    ) -> Result<()> {
        self.call(
            stream,
            Kind::AllToAll,
            Some(send),
            Some(recv),
            count,
            dtype,
            ReduceOp::Sum,
            0,
        )
    }

    fn send(
        &self,
        stream: &CpuStream,
        buf: &CpuBuffer,
        count: usize,
        dtype: DataType,
        peer: usize,
    ) -> Result<()> {
        self.call(
            stream,
            Kind::Send,
            Some(buf),
            None,
            count,
            dtype,
            ReduceOp::Sum,
            peer,
        )
    }

    fn recv(
        &self,
        stream: &CpuStream,
        buf: &CpuBuffer,
        count: usize,
        dtype: DataType,
        peer: usize,
    ) -> Result<()> {
        self.call(
            stream,
            Kind::Recv,
            None,
            Some(buf),
            count,
            dtype,
            ReduceOp::Sum,
            peer,
        )
    }

    /// Opens a group (groups nest): later calls on this communicator are checked at once
    /// and queued by the outermost `group_end` (at most 64 collectives per group; sends and
    /// receives are not counted).
    fn group_start(&self) -> Result<()> {
        lock(&self.0.group).depth += 1;
        Ok(())
    }

    /// Closes a group; the outermost queues its calls, per stream in call order, with every
    /// call's publishing step ahead of every call's wait, so that (as in NCCL) the calls of a
    /// group never wait for each other (a `recv` before a `send` to the same peer on both
    /// ranks completes). The group's collectives run only if every rank's group agrees on all
    /// of them; otherwise each fails with [`CommFailure::Mismatch`] on every rank and writes
    /// nothing. `Error::InvalidArgument` without an open group.
    fn group_end(&self) -> Result<()> {
        let calls = {
            let mut group = lock(&self.0.group);
            match group.depth {
                0 => {
                    return Err(Error::InvalidArgument(
                        "group_end without group_start".into(),
                    ))
                }
                1 => {
                    group.depth = 0;
                    group.collectives = 0;
                    group.memory.clear();
                    std::mem::take(&mut group.calls)
                }
                _ => {
                    group.depth -= 1;
                    return Ok(());
                }
            }
        };
        if calls.is_empty() {
            return Ok(());
        }
        let ops = build_step(&self.0, calls);
        let mut streams: Vec<CpuStream> = Vec::new();
        for (stream, _) in &ops {
            if !streams.iter().any(|s| Arc::ptr_eq(&s.0, &stream.0)) {
                streams.push(stream.clone());
            }
        }
        for stream in streams {
            let mine: Vec<Arc<CollOp>> = ops
                .iter()
                .filter(|(s, _)| Arc::ptr_eq(&s.0, &stream.0))
                .map(|(_, op)| op.clone())
                .collect();
            queue(&stream.0, &mine)?;
        }
        Ok(())
    }
}

impl CommBackend for CpuBackend {
    type Comm = CpuComm;

    fn unique_id(place: &Place) -> Result<UniqueId> {
        if *place != Place::Cpu {
            return Err(Error::NoDevice {
                place: place.clone(),
                reason: "the CPU backend serves only the place `cpu`".into(),
            });
        }
        Ok(new_unique_id())
    }

    fn init_comm(place: &Place, rank: usize, nranks: usize, id: &UniqueId) -> Result<CpuComm> {
        if *place != Place::Cpu {
            return Err(Error::NoDevice {
                place: place.clone(),
                reason: "the CPU backend serves only the place `cpu`".into(),
            });
        }
        CpuComm::init(rank, nranks, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_name_a_segment() {
        let a = new_unique_id();
        let b = new_unique_id();
        assert_ne!(a, b);
        assert!(segment_path(&a).is_ok());
        assert!(segment_path(&UniqueId::from_raw([0; UNIQUE_ID_BYTES])).is_err());
    }

    #[test]
    fn descriptors_read_back() {
        let entry = Entry {
            desc: Kind::Reduce as u64 | (2 << 8) | (5 << 16) | (3 << 24),
            root: 3,
            count: 7,
        };
        assert_eq!(
            describe(&entry),
            "reduce(i32, prod, root 3) of 7 elements in a group of 3 collectives"
        );
    }
}
