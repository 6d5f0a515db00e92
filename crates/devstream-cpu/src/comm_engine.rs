//! The collectives engine: one thread per process that releases streams held at a collective.
//!
//! A collective's first task (on a pool worker) publishes this rank's part and registers a
//! [`Pending`] here; the stream then waits on the collective's flag exactly like a
//! `wait_flag`, so it holds no worker. This thread polls the control segments of all pending
//! collectives (a few yields, then sleeps growing from 20 µs to 1 ms while nothing changes)
//! and, once the collective is decided, stores the outcome and sets the flag, which wakes the
//! stream. It also removes payload files once their readers are done.
//!
//! A collective (with the other collectives of its group) is decided once, for every rank, by
//! the first rank that can (the segment's verdict ring, see `comm_shm`): *agreed* when every
//! rank has posted every collective of the group with equal descriptors; *failed* when two
//! posted descriptors differ (`Mismatch`), when a rank that has not posted them left or died,
//! when the communicator failed at an earlier step, or at the deadline. The other ranks adopt
//! that verdict, so a collective one rank failed is never carried out by another (in
//! particular, no receive buffer of a group that disagrees is written on any rank).

use crate::comm::{CommInner, Instance};
use crate::comm_shm::{Entry, EntryRead, Outcome, Pool, Segment, Verdict, LEFT};
use crate::comm_step::Numbers;
use crate::lock;
use devstream_core::{CommFailure, Error, Result};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often a pending collective checks whether peers' processes still run.
const LIVENESS_EVERY: Duration = Duration::from_millis(20);

/// What a pending collective waits for.
pub(crate) enum Want {
    /// Every rank posted the collectives `numbers.first..=numbers.last` (its group) with
    /// descriptors equal to this rank's; `entry` is this rank's descriptor of its own
    /// collective (`numbers.seq`).
    Coll { entry: Entry },
    /// `src` sent its `seq`-th message to this rank (and, in a group with collectives, the
    /// group's verdict is in).
    Recv { src: usize },
    /// Every rank finished collective `seq` (an in-process all-reduce's end barrier; `first`
    /// and `last` are its first phase's group).
    Done,
}

/// A collective whose stream is held until its peers are there.
pub(crate) struct Pending {
    pub(crate) comm: Arc<CommInner>,
    pub(crate) op: &'static str,
    pub(crate) numbers: Numbers,
    pub(crate) want: Want,
    pub(crate) instance: Arc<Instance>,
    pub(crate) since: Instant,
    next_liveness: Instant,
}

impl Pending {
    pub(crate) fn new(
        comm: Arc<CommInner>,
        op: &'static str,
        numbers: Numbers,
        want: Want,
        instance: Arc<Instance>,
    ) -> Pending {
        let now = Instant::now();
        Pending {
            comm,
            op,
            numbers,
            want,
            instance,
            since: now,
            next_liveness: now + LIVENESS_EVERY,
        }
    }

    /// `Some(outcome)` once decided.
    fn check(&mut self) -> Option<Result<()>> {
        let liveness = Instant::now() >= self.next_liveness;
        if liveness {
            self.next_liveness = Instant::now() + LIVENESS_EVERY;
        }
        match self.want {
            Want::Coll { entry } => self.check_collective(entry, liveness),
            Want::Recv { src } => self.check_message(src, liveness),
            Want::Done => self.check_done(),
        }
    }

    fn deadline_passed(&self) -> bool {
        self.since.elapsed() >= self.comm.timeout()
    }

    fn waited(&self, rank: usize) -> String {
        format!(
            "waited {:?} for rank {rank} (DEVSTREAM_COMM_TIMEOUT_SECS, Communicator::set_timeout)",
            self.comm.timeout()
        )
    }

    /// Why `rank` (which has not taken part) never will: it left, or (checked every
    /// [`LIVENESS_EVERY`]) its process is gone.
    fn gone(&self, rank: usize, liveness: bool) -> Option<CommFailure> {
        let seg = &self.comm.seg;
        if seg.state(rank).load(Ordering::Acquire) == LEFT {
            return Some(CommFailure::PeerLeft);
        }
        if liveness {
            return seg.peer_gone(rank);
        }
        None
    }

    fn check_collective(&self, mine: Entry, liveness: bool) -> Option<Result<()>> {
        let comm = &self.comm;
        let seg = &comm.seg;
        let me = comm.rank;
        let Numbers {
            seq, first, last, ..
        } = self.numbers;
        match seg.verdict(first) {
            Verdict::Decided { outcome, rank } => return Some(self.adopt(outcome, rank)),
            Verdict::Reused => return Some(Err(self.reused("verdict", me, first))),
            Verdict::Open => {}
        }
        let mut missing = None;
        for rank in 0..comm.nranks {
            let posted = seg.posted(rank).load(Ordering::SeqCst);
            if rank != me {
                for t in first..=last.min(posted) {
                    let ours = if t == seq {
                        mine
                    } else if seg.posted(me).load(Ordering::SeqCst) >= t {
                        match seg.entry(me, t) {
                            EntryRead::Ready(entry) => entry,
                            EntryRead::Reused => {
                                let detail = self.reused_detail("descriptor", me, t);
                                return Some(self.decide(CommFailure::Transport, me, &detail));
                            }
                        }
                    } else {
                        continue; // compared once this rank has posted it
                    };
                    let theirs = match seg.entry(rank, t) {
                        EntryRead::Ready(entry) => entry,
                        EntryRead::Reused => {
                            let detail = self.reused_detail("descriptor", rank, t);
                            return Some(self.decide(CommFailure::Transport, rank, &detail));
                        }
                    };
                    if theirs != ours {
                        let detail = format!(
                            "collective #{t} here is {}, rank {rank}'s is {}",
                            ours.describe(),
                            theirs.describe()
                        );
                        return Some(self.decide(CommFailure::Mismatch, rank, &detail));
                    }
                }
            }
            if posted < last {
                missing.get_or_insert(rank);
            }
        }
        let Some(missing) = missing else {
            return Some(self.settle(Outcome::Agreed, me, ""));
        };
        let gone = (0..comm.nranks)
            .filter(|&r| r != me && seg.posted(r).load(Ordering::SeqCst) < last)
            .find_map(|r| self.gone(r, liveness).map(|failure| (r, failure)));
        match (self.failed_earlier(), gone) {
            (Some(_), None) | (Some(false), Some(_)) => {
                let detail = "the communicator failed at an earlier step";
                return Some(self.decide(CommFailure::Aborted, missing, detail));
            }
            (_, Some((rank, failure))) => return Some(self.decide(failure, rank, "")),
            (None, None) => {}
        }
        if self.deadline_passed() {
            return Some(self.decide(CommFailure::Timeout, missing, &self.waited(missing)));
        }
        None
    }

    fn check_message(&self, src: usize, liveness: bool) -> Option<Result<()>> {
        let comm = &self.comm;
        let base = self.numbers.base;
        let sent = comm.seg.sent(src, comm.rank).load(Ordering::SeqCst);
        let arrived = sent >= self.numbers.seq;
        if arrived {
            // Arrived. In a group with collectives, it is read only if they agree (the group
            // fails as a whole, writing nothing).
            let first = self.numbers.first;
            if first == 0 {
                return Some(Ok(()));
            }
            match comm.seg.verdict(first) {
                Verdict::Decided { outcome, rank } => return Some(self.adopt(outcome, rank)),
                Verdict::Reused => return Some(Err(self.reused("verdict", comm.rank, first))),
                Verdict::Open => {}
            }
        }
        let gone = (!arrived && src != comm.rank)
            .then(|| self.gone(src, liveness))
            .flatten();
        match (self.failed_earlier(), gone) {
            (Some(_), None) | (Some(false), Some(_)) => {
                return comm.failed_before(self.op, base).map(Err);
            }
            (_, Some(failure)) => return Some(Err(comm.fail(self.op, failure, src, "", base))),
            (None, None) => {}
        }
        if self.deadline_passed() {
            let detail = self.waited(src);
            return Some(Err(comm.fail(
                self.op,
                CommFailure::Timeout,
                src,
                &detail,
                base,
            )));
        }
        None
    }

    fn check_done(&self) -> Option<Result<()>> {
        let comm = &self.comm;
        let seg = &comm.seg;
        let seq = self.numbers.seq;
        if let Verdict::Decided {
            outcome: Outcome::Failed(_),
            ..
        } = seg.verdict(self.numbers.first)
        {
            // The first phase failed on every rank: no rank touched another's buffers.
            return Some(Ok(()));
        }
        // A rank that left has finished all its work (its queued collectives keep it).
        let late = (0..comm.nranks).find(|&r| {
            seg.done(r).load(Ordering::SeqCst) < seq && seg.state(r).load(Ordering::Acquire) != LEFT
        });
        let Some(late) = late else {
            return Some(Ok(()));
        };
        if self.deadline_passed() {
            let detail = self.waited(late);
            let base = self.numbers.base;
            return Some(Err(comm.fail(
                self.op,
                CommFailure::Timeout,
                late,
                &detail,
                base,
            )));
        }
        None
    }

    /// Whether the communicator failed at a step before this one: `Some(true)` when because a
    /// rank left or died (a rank this one waits for and that is gone is then the reason to
    /// report), `Some(false)` for another reason (reported as `Aborted`).
    fn failed_earlier(&self) -> Option<bool> {
        let comm = &self.comm;
        comm.failed_before(self.op, self.numbers.base)?;
        let failure = crate::comm_shm::failure_of(comm.seg.abort_word() >> 32);
        Some(matches!(
            failure,
            CommFailure::PeerLeft | CommFailure::PeerDied
        ))
    }

    /// Proposes a failure as the verdict of this collective's group (involving `peer`).
    fn decide(&self, failure: CommFailure, peer: usize, detail: &str) -> Result<()> {
        self.settle(Outcome::Failed(failure), peer, detail)
    }

    /// Proposes `outcome` as the verdict; the verdict that holds (perhaps another rank's).
    fn settle(&self, outcome: Outcome, peer: usize, detail: &str) -> Result<()> {
        let comm = &self.comm;
        let first = self.numbers.first;
        match comm.seg.decide(first, comm.rank, outcome) {
            Verdict::Decided {
                outcome: Outcome::Failed(failure),
                rank,
            } if rank == comm.rank && outcome == Outcome::Failed(failure) => {
                Err(comm.fail(self.op, failure, peer, detail, self.numbers.base))
            }
            Verdict::Decided { outcome, rank } => self.adopt(outcome, rank),
            Verdict::Open | Verdict::Reused => Err(self.reused("verdict", comm.rank, first)),
        }
    }

    /// The outcome another rank decided (or this one, earlier).
    fn adopt(&self, outcome: Outcome, decider: usize) -> Result<()> {
        let comm = &self.comm;
        let Outcome::Failed(failure) = outcome else {
            return Ok(());
        };
        comm.seg.abort(decider, failure, self.numbers.base);
        let group = if self.numbers.last > self.numbers.first {
            format!(
                "collectives #{}..=#{} (a group)",
                self.numbers.first, self.numbers.last
            )
        } else {
            format!("collective #{}", self.numbers.first)
        };
        Err(Error::Comm {
            op: self.op,
            failure,
            reason: format!(
                "rank {} of {}: {group} failed on every rank: {failure} (seen by rank {decider})",
                comm.rank, comm.nranks
            ),
        })
    }

    fn reused_detail(&self, what: &str, rank: usize, seq: u64) -> String {
        format!(
            "rank {rank}'s {what} of collective #{seq} was overwritten by a later collective \
             before every rank compared it (a rank ran more than {} collectives ahead)",
            crate::comm_shm::RING
        )
    }

    /// A loud failure: an entry this collective needs holds a later collective's.
    fn reused(&self, what: &str, rank: usize, seq: u64) -> Error {
        let detail = self.reused_detail(what, rank, seq);
        self.comm.fail(
            self.op,
            CommFailure::Transport,
            rank,
            &detail,
            self.numbers.base,
        )
    }
}

/// Who reads a payload file before it may be removed.
pub(crate) enum Readers {
    /// Every rank (collective `seq`).
    Coll { seq: u64 },
    /// `dst` (message `seq` to it).
    P2p { dst: usize, seq: u64 },
}

/// A payload file to recycle once its readers are done (or gone, or after twice the deadline).
pub(crate) struct Cleanup {
    pub(crate) seg: Arc<Segment>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) rank: usize,
    pub(crate) nranks: usize,
    pub(crate) path: PathBuf,
    pub(crate) readers: Readers,
    pub(crate) expires: Instant,
}

impl Cleanup {
    /// Removes the file if it is no longer needed; whether it did.
    fn try_remove(&self) -> bool {
        use std::sync::atomic::Ordering::Acquire;
        let needed = match self.readers {
            // Every rank reads it, this one included.
            Readers::Coll { seq } => {
                (0..self.nranks).any(|r| self.seg.done(r).load(Acquire) < seq && !self.gone(r))
            }
            Readers::P2p { dst, seq } => {
                self.seg.received(dst, self.rank).load(Acquire) < seq && !self.gone(dst)
            }
        };
        if !needed {
            self.pool.recycle(&self.path);
        } else if Instant::now() >= self.expires {
            // A reader may still be late: unlink rather than reuse (an open file keeps its
            // data; a reader that has not opened it yet fails with a transport error).
            let _ = std::fs::remove_file(&self.path);
        } else {
            return false;
        }
        true
    }

    /// A reader that left or died reads nothing more (a rank that failed the collective marks
    /// it done instead).
    fn gone(&self, rank: usize) -> bool {
        self.seg.peer_gone(rank).is_some()
    }
}

#[derive(Default)]
struct State {
    pending: Vec<Pending>,
    cleanups: Vec<Cleanup>,
    /// Bumped by every registration (resets the engine's backoff).
    registrations: u64,
}

struct Engine {
    state: Mutex<State>,
    work: Condvar,
}

fn engine() -> Result<&'static Engine> {
    static ENGINE: OnceLock<std::result::Result<&'static Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let engine: &'static Engine = Box::leak(Box::new(Engine {
                state: Mutex::new(State::default()),
                work: Condvar::new(),
            }));
            std::thread::Builder::new()
                .name("devstream-comm".into())
                .spawn(move || run(engine))
                .map(|_| engine)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|reason| Error::BackendUnavailable {
            backend: "cpu",
            reason: format!("could not start the collectives engine thread: {reason}"),
        })
}

/// Starts the engine thread if it is not running (so that later registrations cannot fail).
pub(crate) fn start() -> Result<()> {
    engine().map(|_| ())
}

/// Holds a stream until `pending` is decided.
pub(crate) fn register(pending: Pending) {
    match engine() {
        Ok(engine) => {
            let mut state = lock(&engine.state);
            state.pending.push(pending);
            state.registrations += 1;
            drop(state);
            engine.work.notify_one();
        }
        Err(error) => pending.instance.resolve(Some(error)),
    }
}

/// Removes a payload file once its readers are done.
pub(crate) fn cleanup(cleanup: Cleanup) {
    if cleanup.try_remove() {
        return;
    }
    if let Ok(engine) = engine() {
        lock(&engine.state).cleanups.push(cleanup);
        engine.work.notify_one();
    }
}

fn run(engine: &'static Engine) {
    let mut idle = 0u32;
    let mut last_cleanup = Instant::now();
    loop {
        let (mut pending, cleanups, seen) = {
            let mut state = lock(&engine.state);
            while state.pending.is_empty() && state.cleanups.is_empty() {
                state = engine
                    .work
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            let cleanups = if last_cleanup.elapsed() >= Duration::from_millis(2) {
                last_cleanup = Instant::now();
                std::mem::take(&mut state.cleanups)
            } else {
                Vec::new()
            };
            (
                std::mem::take(&mut state.pending),
                cleanups,
                state.registrations,
            )
        };
        let mut decided = Vec::new();
        pending.retain_mut(|p| match p.check() {
            Some(outcome) => {
                decided.push((p.instance.clone(), outcome.err()));
                false
            }
            None => true,
        });
        let mut cleanups = cleanups;
        cleanups.retain(|c| !c.try_remove());
        let waiting = !pending.is_empty();
        let more = {
            let mut state = lock(&engine.state);
            state.pending.append(&mut pending);
            state.cleanups.append(&mut cleanups);
            state.registrations != seen
        };
        let progressed = !decided.is_empty() || more;
        // Outside the lock: setting a flag wakes streams.
        for (instance, error) in decided {
            instance.resolve(error);
        }
        if progressed {
            idle = 0;
            continue;
        }
        idle += 1;
        let pause = if !waiting {
            Duration::from_millis(5)
        } else if idle < 64 {
            std::thread::yield_now();
            continue;
        } else {
            Duration::from_micros((20u64 << ((idle - 64) / 16).min(6)).min(1000))
        };
        let state = lock(&engine.state);
        if state.registrations == seen {
            let _unused = engine
                .work
                .wait_timeout(state, pause)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}
