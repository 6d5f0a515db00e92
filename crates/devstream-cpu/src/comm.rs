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

use crate::buffer::CpuBuffer;
use crate::comm_engine;
use crate::comm_shm::{
    self, comm_dir, failure_of, poll_until, process_alive, Pool, Segment, ALIVE, EMPTY, LEFT,
    MAX_STEP_SEQS,
};
use crate::comm_step::{Counters, Prefix};
use crate::scheduler::running_stream;
use crate::stream::CpuStream;
use crate::{lock, CpuBackend, CPU_PLACE};
use devstream_core::comm::{check_rank, CallKind, Collective, GroupState, Region};
use devstream_core::{
    CommBackend, CommFailure, DeviceCommunicator, Error, Place, Result, UniqueId, UNIQUE_ID_BYTES,
};
use op::{build_step, queue, Call, CollOp, LocalGroup, Phase};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod op;

pub use devstream_core::comm::default_timeout;
pub(crate) use op::Instance;

const ID_MAGIC: &[u8; 8] = b"dscpucm1";

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

/// This rank's counters in the control segment, kept as prefixes.
struct Marks {
    posted: Prefix,
    done: Prefix,
    sent: Vec<Prefix>,
    received: Vec<Prefix>,
}

/// Which counter a mark goes to.
#[derive(Clone, Copy)]
pub(crate) enum Counter {
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
    group: Mutex<GroupState<GroupCalls>>,
    /// Set when every rank is a thread of this process (decided once all have joined).
    local: std::sync::OnceLock<Arc<LocalGroup>>,
}

/// What an open group keeps for its end: its calls, in call order, with their streams.
#[derive(Default)]
struct GroupCalls {
    calls: Vec<(CpuStream, Call)>,
    /// Collectives among the calls (at most [`MAX_GROUP_COLLECTIVES`]).
    collectives: u64,
}

/// Collectives one group may hold: each takes at most two sequence numbers (an all-reduce of
/// ranks in several processes: its two phases), so a group stays within `MAX_STEP_SEQS`, the
/// bound on how far a rank runs ahead of its peers' comparisons.
const MAX_GROUP_COLLECTIVES: u64 = MAX_STEP_SEQS / 2;

impl CommInner {
    /// This rank's membership of the communicator whose segment is `seg` (at `path`).
    fn new(
        seg: Arc<Segment>,
        path: &std::path::Path,
        rank: usize,
        nranks: usize,
        timeout: Duration,
    ) -> CommInner {
        CommInner {
            seg,
            pool: Arc::new(Pool::new(path, rank)),
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
            group: Mutex::new(GroupState::default()),
            local: std::sync::OnceLock::new(),
        }
    }

    /// One look of `init`'s poll at whether every rank has joined: `Some(Ok(()))` once every
    /// rank has (some may have left or died since: their peers' first collective fails),
    /// `Some(Err(_))` when the communicator failed before that, `None` to look again.
    /// `seen_missing` runs when the look has found a rank missing, before it looks for failures
    /// (`init` passes a no-op; tests make ranks join and fail there).
    fn join_round(&self, op: &'static str, seen_missing: &mut dyn FnMut()) -> Option<Result<()>> {
        let seg = &self.seg;
        let all_joined = || {
            (0..self.nranks).all(|r| matches!(seg.state(r).load(Ordering::Acquire), ALIVE | LEFT))
        };
        if all_joined() {
            return Some(Ok(()));
        }
        seen_missing();
        // Failures are looked for first and the states again after them: between this rank's
        // looks every other rank may have joined, and a rank may have left and failed its
        // peers' first collective, or exited; such a failure is the collectives', not this
        // init's. The states only move forward (empty, joining, alive, left), so a rank still
        // missing after the failures were seen was missing when they happened.
        let aborted = self.aborted(op);
        let gone = (0..self.nranks).find(|&r| {
            seg.state(r).load(Ordering::Acquire) == ALIVE
                && !process_alive(
                    seg.pid(r).load(Ordering::Relaxed) as u32,
                    seg.start_time(r).load(Ordering::Relaxed),
                )
        });
        if all_joined() {
            return Some(Ok(()));
        }
        if let Some(error) = aborted {
            // A rank gave up waiting (its deadline passed): fail at once too. The segment file
            // stays so that later joiners see that as well.
            return Some(Err(error));
        }
        gone.map(|r| Err(self.fail(op, CommFailure::PeerDied, r, "", 0)))
    }

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
    pub(crate) fn mark(&self, counter: Counter, n: u64) {
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
/// use devstream_core::comm::{CallKind, Collective};
/// use devstream_core::{CommBackend, DataType, DeviceBackend, DeviceCommunicator, DeviceStream,
///                      HostBuffer, Place, ReduceOp, StreamOptions};
/// use devstream_cpu::CpuBackend;
/// let id = CpuBackend::unique_id(&Place::Cpu).unwrap();
/// let ranks: Vec<_> = (0..2).map(|rank| std::thread::spawn(move || {
///     let comm = CpuBackend::init_comm(&Place::Cpu, rank, 2, &id).unwrap();
///     let s = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
///     let buf = s.alloc(4).unwrap();
///     s.copy_from_host(&buf, 0, &(rank as i32 + 1).to_ne_bytes()).unwrap();
///     let sum = Collective::new(CallKind::AllReduce { op: ReduceOp::Sum }, 1, DataType::I32);
///     comm.collective(&s, &sum, &buf, &buf).unwrap();
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

devstream_core::debug_fields! { CpuComm, |self|
    rank: self.0.rank,
    nranks: self.0.nranks,
    segment: self.0.seg.path,
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
        let inner = Arc::new(CommInner::new(seg.clone(), &path, rank, nranks, timeout));
        // From here on a failure drops `inner`, which marks this rank as left.
        let started = Instant::now();
        let joined = poll_until(started + timeout, || inner.join_round(op, &mut || {}));
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
    fn call(
        &self,
        stream: &CpuStream,
        desc: &Collective,
        send: &CpuBuffer,
        recv: &CpuBuffer,
    ) -> Result<()> {
        let name = desc.name();
        if !desc.kind.is_nccl_call() {
            return Err(Error::unsupported(name, &CPU_PLACE));
        }
        let (me, n) = (self.0.rank, self.0.nranks);
        desc.check(me, n, send.0.len, recv.0.len)?;
        let call = Call {
            phase: Phase::Call,
            desc: *desc,
            send: (!matches!(desc.kind, CallKind::Recv { .. })).then(|| send.0.clone()),
            recv: (!matches!(desc.kind, CallKind::Send { .. })).then(|| recv.0.clone()),
        };
        let mut group = lock(&self.0.group);
        if group.is_open() {
            let region = |b: &CpuBuffer| Region {
                space: b.0.id,
                offset: 0,
            };
            let collectives = group.pending.collectives + u64::from(!desc.kind.is_point_to_point());
            if collectives > MAX_GROUP_COLLECTIVES {
                return Err(Error::InvalidArgument(format!(
                    "{name}: a group holds at most {MAX_GROUP_COLLECTIVES} collectives on the \
                     cpu engine (sends and receives are not counted); the group stays open \
                     without this call"
                )));
            }
            group.admit(desc, me, n, region(send), region(recv))?;
            group.pending.collectives = collectives;
            group.pending.calls.push((stream.clone(), call));
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

    fn collective(
        &self,
        stream: &CpuStream,
        call: &Collective,
        send: &CpuBuffer,
        recv: &CpuBuffer,
    ) -> Result<()> {
        self.call(stream, call, send, recv)
    }

    /// Opens a group (groups nest): later calls on this communicator are checked at once
    /// and queued by the outermost `group_end` (at most 64 collectives per group; sends and
    /// receives are not counted).
    fn group_start(&self) -> Result<()> {
        lock(&self.0.group).start();
        Ok(())
    }

    /// Closes a group; the outermost queues its calls, per stream in call order, with every
    /// call's publishing step ahead of every call's wait, so that (as in NCCL) the calls of a
    /// group never wait for each other (a `recv` before a `send` to the same peer on both
    /// ranks completes). The group's collectives run only if every rank's group agrees on all
    /// of them; otherwise each fails with [`CommFailure::Mismatch`] on every rank and writes
    /// nothing. `Error::InvalidArgument` without an open group.
    fn group_end(&self) -> Result<()> {
        let Some(GroupCalls { calls, .. }) = lock(&self.0.group).end()? else {
            return Ok(());
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

    /// One look of rank 0 of 3 at whether every rank has joined: rank 1 has joined from a
    /// process of its own (a `sleep`), rank 2 has not; `meanwhile` runs where the look has seen
    /// rank 2 missing (what a joiner preempted there lets happen).
    fn join_round_while(
        tag: &str,
        meanwhile: impl FnOnce(&Segment, &mut std::process::Child),
    ) -> Option<Result<()>> {
        let path = std::env::temp_dir().join(format!(
            "devstream-comm-join-test-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let seg = Arc::new(Segment::open_or_create(&path, 3).unwrap());
        // The mapping keeps the segment.
        let _ = std::fs::remove_file(&path);
        let mut peer = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("start a peer process");
        let peer_start = comm_shm::proc_stat(peer.id()).expect("the peer runs").1;
        let join = |rank: usize, pid: u64, start: u64| {
            seg.pid(rank).store(pid, Ordering::Relaxed);
            seg.start_time(rank).store(start, Ordering::Relaxed);
            seg.state(rank).store(ALIVE, Ordering::Release);
        };
        join(0, u64::from(std::process::id()), comm_shm::own_start_time());
        join(1, u64::from(peer.id()), peer_start);
        let inner = CommInner::new(seg.clone(), &path, 0, 3, Duration::from_secs(60));
        let mut meanwhile = Some(meanwhile);
        let verdict = inner.join_round("init", &mut || {
            if let Some(meanwhile) = meanwhile.take() {
                meanwhile(&seg, &mut peer);
            }
        });
        let _ = peer.kill();
        let _ = peer.wait();
        verdict
    }

    /// Rank 2 joins from this process.
    fn rank_2_joins(seg: &Segment) {
        seg.pid(2)
            .store(u64::from(std::process::id()), Ordering::Relaxed);
        seg.start_time(2)
            .store(comm_shm::own_start_time(), Ordering::Relaxed);
        seg.state(2).store(ALIVE, Ordering::Release);
    }

    /// The peer's process exits (and is reaped).
    fn exits(peer: &mut std::process::Child) {
        peer.kill().unwrap();
        peer.wait().unwrap();
    }

    #[test]
    fn a_failure_recorded_after_every_rank_joined_does_not_fail_a_slow_joiner() {
        // Every rank joins, rank 1 leaves at once, and rank 2's first collective records that.
        let verdict = join_round_while("left", |seg, _| {
            rank_2_joins(seg);
            seg.state(1).store(LEFT, Ordering::Release);
            seg.abort(2, CommFailure::PeerLeft, 0);
        });
        assert!(matches!(verdict, Some(Ok(()))), "{verdict:?}");
    }

    #[test]
    fn a_peer_process_gone_after_every_rank_joined_does_not_fail_a_slow_joiner() {
        // Every rank joins, then rank 1 leaves and its process exits.
        let verdict = join_round_while("exited", |seg, peer| {
            rank_2_joins(seg);
            seg.state(1).store(LEFT, Ordering::Release);
            exits(peer);
        });
        assert!(matches!(verdict, Some(Ok(()))), "{verdict:?}");
        // Every rank joins, then rank 1's process dies without leaving.
        let verdict = join_round_while("died", |seg, peer| {
            rank_2_joins(seg);
            exits(peer);
        });
        assert!(matches!(verdict, Some(Ok(()))), "{verdict:?}");
    }

    fn assert_failed(verdict: Option<Result<()>>, expected: CommFailure) {
        assert!(
            matches!(verdict, Some(Err(Error::Comm { failure, .. })) if failure == expected),
            "expected {expected:?}, got {verdict:?}"
        );
    }

    #[test]
    fn a_failure_before_every_rank_joined_fails_the_joiner() {
        // Rank 1 gives up waiting for rank 2.
        let verdict = join_round_while("gave-up", |seg, _| {
            seg.abort(1, CommFailure::Timeout, 0);
            seg.state(1).store(LEFT, Ordering::Release);
        });
        assert_failed(verdict, CommFailure::Aborted);
        // Rank 1's process dies while rank 2 is still missing.
        let verdict = join_round_while("died-early", |_, peer| exits(peer));
        assert_failed(verdict, CommFailure::PeerDied);
    }
}
