//! The work of one queued collective: its three stream tasks (post, hold, finish; see the
//! module header of `comm`), the steps they belong to, and the in-process all-reduce path.

use super::{CommInner, Counter};
use crate::buffer::{BufferInner, Shared};
use crate::comm_engine::{self, Cleanup, Pending, Readers, Want};
use crate::comm_shm::{self, Entry, Payload, Segment};
use crate::comm_step::{Numbers, Position, Step};
use crate::flag::CpuFlag;
use crate::lock;
use crate::scheduler::{CommonOp, Op, UserFn};
use crate::stream::{fail_running_task, CpuStream, StreamInner};
use devstream_core::comm::{CallKind, Collective};
use devstream_core::reduce::{reduce, reduce_chunks};
use devstream_core::{CommFailure, DataType, Error, ReduceOp, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Which part of a call a queued operation is: the call itself, or a later phase of an
/// all-reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// The call (for an all-reduce: its first phase).
    Call,
    /// All-reduce, second phase: every rank publishes its reduced slice and gathers the others.
    Gather,
    /// All-reduce of ranks that all live in this process, second phase: the end barrier (no
    /// rank's stream moves on while a peer may still read or write its buffers; see
    /// [`LocalGroup`]). Never posted to the control segment.
    End,
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
/// (the slice no other rank reads), and a second hold ([`Phase::End`]) keeps every
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
    pub(super) fn of(seg: &Segment, nranks: usize) -> Arc<LocalGroup> {
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
    pub(super) fn retire(&self, rank: usize, seq: u64) {
        lock(&self.slots[rank]).retain(|p| p.seq > seq);
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
    pub(super) fn new() -> Arc<Instance> {
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
pub(super) struct Call {
    /// The part of the call this is.
    pub(super) phase: Phase,
    /// The call as made.
    pub(super) desc: Collective,
    /// The buffers it reads and writes (a send has no receive buffer, a receive no send one).
    pub(super) send: Option<Arc<BufferInner>>,
    pub(super) recv: Option<Arc<BufferInner>>,
}

impl Call {
    fn is_send(&self) -> bool {
        matches!(self.desc.kind, CallKind::Send { .. })
    }

    fn is_recv(&self) -> bool {
        matches!(self.desc.kind, CallKind::Recv { .. })
    }

    /// The reduction (`Sum` for kinds that do not reduce: never read).
    fn op(&self) -> ReduceOp {
        self.desc.kind.reduction().unwrap_or(ReduceOp::Sum)
    }

    /// The root (broadcast, reduce) or peer (send, recv).
    fn other(&self) -> usize {
        self.desc.kind.root().or(self.desc.kind.peer()).unwrap_or(0)
    }
}

/// One queued collective call (or one phase of an all-reduce: the call with the phase's kind).
pub(super) struct CollOp {
    comm: Arc<CommInner>,
    call: Call,
    step: Arc<Step>,
    position: Position,
    /// Collectives in the step's group (part of the descriptor the ranks compare).
    group_size: u64,
    instance: Arc<Instance>,
    /// A second phase queued right after this one's finish (all-reduce's gather or end).
    next: Option<Arc<CollOp>>,
    /// A second phase's first phase (whose sequence number [`Phase::End`] waits for).
    first: Option<Arc<Instance>>,
}

/// Builds the operations of one step from its calls (in call order).
pub(super) fn build_step(
    comm: &Arc<CommInner>,
    calls: Vec<(CpuStream, Call)>,
) -> Vec<(CpuStream, Arc<CollOp>)> {
    let n = comm.nranks;
    let local = n > 1 && comm.local.get().is_some();
    let mut step = Step::new(n);
    // Positions first (the step's counts are part of every descriptor).
    let mut positions = Vec::with_capacity(calls.len());
    for (_, call) in &calls {
        let (position, second) = match call.desc.kind {
            CallKind::Send { .. } | CallKind::Recv { .. } => {
                let (peer, sending) = (call.other(), call.is_send());
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
                    CallKind::AllReduce { .. } if local => Some((Phase::End, Position::None)),
                    CallKind::AllReduce { .. } if n > 1 => {
                        let gather = step.gathers;
                        step.gathers += 1;
                        Some((Phase::Gather, Position::Gather(gather)))
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
            let make = |phase: Phase,
                        position: Position,
                        instance: Arc<Instance>,
                        next: Option<Arc<CollOp>>,
                        first: Option<Arc<Instance>>| {
                Arc::new(CollOp {
                    comm: comm.clone(),
                    call: Call {
                        phase,
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
            let next = second.map(|(phase, position)| {
                make(phase, position, Instance::new(), None, Some(first.clone()))
            });
            (stream, make(Phase::Call, position, first, next, None))
        })
        .collect()
}

impl CollOp {
    /// Elements `lo..hi` of this rank's (or `rank`'s) slice of an all-reduce.
    fn slice(&self, rank: usize) -> std::ops::Range<usize> {
        let n = self.comm.nranks;
        rank * self.call.desc.count / n..(rank + 1) * self.call.desc.count / n
    }

    fn bytes(&self) -> usize {
        self.call.desc.count * self.call.desc.dtype.size()
    }

    /// The ranks' shared group when this all-reduce takes the in-process path.
    fn local(&self) -> Option<&LocalGroup> {
        match (self.call.phase, self.call.desc.kind) {
            (Phase::Call | Phase::End, CallKind::AllReduce { .. }) if self.comm.nranks > 1 => {
                self.comm.local.get().map(|group| &**group)
            }
            _ => None,
        }
    }

    /// The descriptor the ranks compare: the call's signature, with the size of the step's
    /// group (a group of another size disagrees at its first collective already).
    fn entry(&self) -> Entry {
        let group = match self.position {
            Position::Collective(_) => self.group_size,
            _ => 0,
        };
        let phase = u8::from(self.call.phase == Phase::Gather);
        self.call.desc.signature(phase, group)
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
        let numbers = match self.call.phase {
            Phase::End => {
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
        if let Some(error) = self.comm.failed_before(self.call.desc.name(), numbers.base) {
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
        if self.call.phase != Phase::Gather {
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
            op: self.call.desc.name(),
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
        let name = self.call.desc.name();
        let bytes = self.bytes();
        let seq = numbers.seq;
        match (self.call.phase, self.call.desc.kind) {
            (_, CallKind::Send { .. }) => {
                let peer = self.call.other();
                let path = seg.p2p_path(me, peer, seq);
                let mut header = [0u8; 16];
                header[..8].copy_from_slice(&u64::from(self.call.desc.dtype.code()).to_le_bytes());
                header[8..].copy_from_slice(&(self.call.desc.count as u64).to_le_bytes());
                {
                    let send = self.call.send.as_ref().map(|b| b.lock());
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
            (_, CallKind::Recv { .. }) => {
                comm_engine::register(Pending::new(
                    comm.clone(),
                    name,
                    numbers,
                    Want::Recv {
                        src: self.call.other(),
                    },
                    self.instance.clone(),
                ));
            }
            (Phase::End, _) => {
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
                let size = self.call.desc.dtype.size();
                let slice = self.slice(me);
                let range = match (self.call.phase, self.call.desc.kind) {
                    (Phase::Gather, _) => Some(slice.start * size..slice.end * size),
                    (_, CallKind::Broadcast { root }) if me != root => None,
                    (_, CallKind::AllGather) if self.in_place() => {
                        Some(me * bytes..(me + 1) * bytes)
                    }
                    (_, CallKind::ReduceScatter { .. } | CallKind::AllToAll) => Some(0..bytes * n),
                    _ => Some(0..bytes),
                };
                let range = match (self.local(), &self.call.send, &self.call.recv) {
                    (Some(local), Some(send), Some(recv)) => {
                        // Peers read and write the buffers themselves: no payload file.
                        lock(&local.slots[me]).push(Published {
                            seq,
                            send: send.clone(),
                            recv: recv.clone(),
                            count: self.call.desc.count,
                            dtype: self.call.desc.dtype,
                        });
                        None
                    }
                    _ => range,
                };
                if let Some(range) = range.filter(|r| !r.is_empty()) {
                    let path = seg.coll_path(seq, me);
                    {
                        let gathered = self.call.desc.kind == CallKind::AllGather;
                        let source =
                            if (gathered && self.in_place()) || self.call.phase == Phase::Gather {
                                self.call.recv.as_ref()
                            } else {
                                self.call.send.as_ref()
                            };
                        let data = source.map(|b| b.lock());
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
        match (self.call.phase, self.call.desc.kind) {
            (_, CallKind::Send { .. }) => {}
            (_, CallKind::Recv { peer }) => comm.mark(Counter::Received(peer), seq),
            (Phase::End, _) => {
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
        let name = self.call.desc.name();
        let bytes = self.bytes();
        let base = self.instance.base.load(Ordering::Acquire);
        if self.call.is_recv() {
            let peer = self.call.other();
            let path = seg.p2p_path(peer, me, seq);
            let payload = Payload::open(name, &path)?;
            let mut header = [0u8; 16];
            payload.read_at(name, 0, &mut header)?;
            let code = u64::from_le_bytes(header[..8].try_into().unwrap_or_default());
            let count = u64::from_le_bytes(header[8..].try_into().unwrap_or_default());
            if code != u64::from(self.call.desc.dtype.code())
                || count != self.call.desc.count as u64
            {
                let theirs = DataType::from_code(code as u8)
                    .map_or_else(|| "?".to_string(), |t| t.to_string());
                return Err(comm.fail(
                    name,
                    CommFailure::Mismatch,
                    peer,
                    &format!(
                        "message #{seq} from rank {peer} is {count} × {theirs}, this recv \
                         expects {} × {}",
                        self.call.desc.count, self.call.desc.dtype
                    ),
                    base,
                ));
            }
            if let Some(buf) = &self.call.recv {
                let mut data = buf.lock();
                payload.read_at(name, 16, &mut data[..bytes])?;
            }
            return Ok(());
        }
        if self.call.phase == Phase::End {
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
        let name = self.call.desc.name();
        let (me, n) = (self.comm.rank, self.comm.nranks);
        let size = self.call.desc.dtype.size();
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
            p.count != self.call.desc.count
                || p.dtype != self.call.desc.dtype
                || p.send.len < needed
                || p.recv.len < needed
        }) {
            return Err(comm_shm::transport(
                name,
                format!(
                    "rank {rank} published {} × {} for collective #{seq}, this rank {} × {}",
                    theirs.count, theirs.dtype, self.call.desc.count, self.call.desc.dtype
                ),
            ));
        }
        // Shared access to every buffer involved, taken in the crate-wide lock order
        // (`BufferInner::lock_order`) and held for the whole reduction: ranks work on one
        // buffer at once without waiting for each other, and no other operation touches the
        // buffers meanwhile.
        let mut buffers: Vec<&Arc<BufferInner>> =
            ranks.iter().flat_map(|p| [&p.send, &p.recv]).collect();
        buffers.sort_by_key(|b| (b.lock_order(), b.id));
        buffers.dedup_by_key(|b| b.id);
        let shared: Vec<(u64, Shared<'_>)> = buffers.iter().map(|b| (b.id, b.shared())).collect();
        let access = |buffer: &BufferInner| -> Result<&Shared<'_>> {
            shared
                .iter()
                .find(|(id, _)| *id == buffer.id)
                .map(|(_, access)| access)
                .ok_or_else(|| comm_shm::transport(name, "a published buffer was not locked"))
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
            self.call.desc.dtype,
            self.call.op(),
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
        let name = self.call.desc.name();
        let seg = &self.comm.seg;
        let open = |rank: usize| Payload::open(name, &seg.coll_path(seq, rank));
        let Some(recv) = &self.call.recv else {
            return Ok(());
        };
        if bytes == 0 {
            return Ok(());
        }
        let size = self.call.desc.dtype.size();
        match (self.call.phase, self.call.desc.kind) {
            (Phase::End, _) => Ok(()),
            (Phase::Call, CallKind::AllReduce { .. }) => {
                // Phase 1: reduce this rank's slice of every rank's data.
                let slice = self.slice(me);
                if slice.is_empty() {
                    return Ok(());
                }
                let files = (0..n).map(open).collect::<Result<Vec<_>>>()?;
                let mut data = recv.lock();
                let base = slice.start * size;
                reduce(
                    self.call.desc.dtype,
                    self.call.op(),
                    n,
                    &mut data[base..slice.end * size],
                    |rank, start, out| files[rank].read_at(name, base + start * size, out),
                )
            }
            (Phase::Gather, _) => {
                // Phase 2: gather the other ranks' reduced slices.
                let mut data = recv.lock();
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
            (_, CallKind::Reduce { root, .. }) if me != root => Ok(()),
            (_, CallKind::Reduce { .. } | CallKind::ReduceScatter { .. }) => {
                let files = (0..n).map(open).collect::<Result<Vec<_>>>()?;
                let base = if matches!(self.call.desc.kind, CallKind::ReduceScatter { .. }) {
                    me * bytes
                } else {
                    0
                };
                let mut data = recv.lock();
                reduce(
                    self.call.desc.dtype,
                    self.call.op(),
                    n,
                    &mut data[..bytes],
                    |rank, start, out| files[rank].read_at(name, base + start * size, out),
                )
            }
            (_, CallKind::Broadcast { .. }) => {
                let file = open(self.call.other())?;
                let mut data = recv.lock();
                file.read_at(name, 0, &mut data[..bytes])
            }
            (_, CallKind::AllGather) => {
                let files = (0..n).map(open).collect::<Result<Vec<_>>>()?;
                let mut data = recv.lock();
                for (rank, file) in files.iter().enumerate() {
                    file.read_at(name, 0, &mut data[rank * bytes..(rank + 1) * bytes])?;
                }
                Ok(())
            }
            (_, CallKind::AllToAll) => {
                let files = (0..n).map(open).collect::<Result<Vec<_>>>()?;
                let mut data = recv.lock();
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

/// Queues collectives on a stream: every post first, then each hold and finish (and a second
/// phase's post, hold and finish right after its first phase), so that the calls of a group
/// never wait for each other.
pub(super) fn queue(stream: &Arc<StreamInner>, ops: &[Arc<CollOp>]) -> Result<()> {
    let post = |op: &Arc<CollOp>| {
        let op = op.clone();
        let name = op.call.desc.name();
        let f: devstream_core::HostFn = Box::new(move || op.post());
        stream.submit(Op::Host(UserFn::new(f)), name)
    };
    let hold_and_finish = |op: &Arc<CollOp>| {
        if op.call.is_send() {
            return Ok(());
        }
        let flag = op.instance.flag.0.clone();
        stream.submit(
            Op::Common(CommonOp::WaitFlag { flag, value: 1 }),
            op.call.desc.name(),
        )?;
        let finish = op.clone();
        let f: devstream_core::HostFn = Box::new(move || finish.finish());
        stream.submit(Op::Host(UserFn::new(f)), op.call.desc.name())
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
