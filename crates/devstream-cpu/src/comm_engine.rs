//! The collectives engine: one thread per process that releases streams held at a collective.
//!
//! A collective's first task (on a pool worker) publishes this rank's part and registers a
//! [`Pending`] here; the stream then waits on the collective's flag exactly like a
//! `wait_flag`, so it holds no worker. This thread polls the control segments of all pending
//! collectives (a few yields, then sleeps growing from 20 µs to 1 ms while nothing changes)
//! and, when every peer has posted, or a peer died or left, or the deadline passed, or the
//! ranks disagree, stores the outcome and sets the flag, which wakes the stream. It also
//! removes payload files once their readers are done.

use crate::comm::{CommInner, Instance};
use crate::comm_shm::{Pool, Segment};
use crate::lock;
use devstream_core::{CommFailure, Error, Result};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often a pending collective checks whether peers' processes still run.
const LIVENESS_EVERY: Duration = Duration::from_millis(20);

/// What a pending collective waits for.
pub(crate) enum Want {
    /// Every rank posted collective `seq` with this (tagged) descriptor and count.
    Coll { desc: u64, count: u64 },
    /// `src` sent its `seq`-th message to this rank.
    Recv { src: usize },
    /// Every rank finished collective `seq` (an in-process all-reduce's end barrier).
    Done,
}

/// A collective whose stream is held until its peers are there.
pub(crate) struct Pending {
    pub(crate) comm: Arc<CommInner>,
    pub(crate) op: &'static str,
    pub(crate) seq: u64,
    pub(crate) want: Want,
    pub(crate) instance: Arc<Instance>,
    pub(crate) since: Instant,
    next_liveness: Instant,
}

impl Pending {
    pub(crate) fn new(
        comm: Arc<CommInner>,
        op: &'static str,
        seq: u64,
        want: Want,
        instance: Arc<Instance>,
    ) -> Pending {
        let now = Instant::now();
        Pending {
            comm,
            op,
            seq,
            want,
            instance,
            since: now,
            next_liveness: now + LIVENESS_EVERY,
        }
    }

    /// `Some(outcome)` once decided.
    fn check(&mut self) -> Option<Result<()>> {
        let comm = &self.comm;
        let seg = &comm.seg;
        if let Some(error) = comm.aborted(self.op) {
            return Some(Err(error));
        }
        let liveness = Instant::now() >= self.next_liveness;
        if liveness {
            self.next_liveness = Instant::now() + LIVENESS_EVERY;
        }
        let mut missing = None;
        match self.want {
            Want::Coll { desc, count } => {
                for rank in 0..comm.nranks {
                    let posted = seg.posted(rank).load(std::sync::atomic::Ordering::Acquire);
                    if posted < self.seq {
                        missing.get_or_insert(rank);
                        if liveness && rank != comm.rank {
                            if let Some(failure) = seg.peer_gone(rank) {
                                return Some(Err(comm.fail(self.op, failure, rank, "")));
                            }
                        }
                    } else if posted == self.seq && rank != comm.rank {
                        // Both words carry the sequence number's low bits: a word of a later
                        // collective (the peer has moved on, so it checked this one) is skipped.
                        let theirs = seg.desc(rank).load(std::sync::atomic::Ordering::Acquire);
                        let their_count =
                            seg.count(rank).load(std::sync::atomic::Ordering::Acquire);
                        if theirs >> 48 == desc >> 48
                            && their_count >> 48 == count >> 48
                            && (theirs != desc || their_count != count)
                        {
                            let detail = format!(
                                "collective #{} here is {} of {} elements, rank {rank}'s is {} \
                                 of {} elements",
                                self.seq,
                                crate::comm::describe(desc),
                                count & ((1 << 48) - 1),
                                crate::comm::describe(theirs),
                                their_count & ((1 << 48) - 1),
                            );
                            return Some(Err(comm.fail(
                                self.op,
                                CommFailure::Mismatch,
                                rank,
                                &detail,
                            )));
                        }
                    }
                }
            }
            Want::Done => {
                for rank in 0..comm.nranks {
                    if seg.done(rank).load(std::sync::atomic::Ordering::Acquire) < self.seq {
                        missing.get_or_insert(rank);
                        if liveness && rank != comm.rank {
                            if let Some(failure) = seg.peer_gone(rank) {
                                return Some(Err(comm.fail(self.op, failure, rank, "")));
                            }
                        }
                    }
                }
            }
            Want::Recv { src } => {
                let sent = seg
                    .sent(src, comm.rank)
                    .load(std::sync::atomic::Ordering::Acquire);
                if sent < self.seq {
                    missing = Some(src);
                    if liveness && src != comm.rank {
                        if let Some(failure) = seg.peer_gone(src) {
                            return Some(Err(comm.fail(self.op, failure, src, "")));
                        }
                    }
                }
            }
        }
        let Some(missing) = missing else {
            return Some(Ok(()));
        };
        if self.since.elapsed() >= comm.timeout() {
            let detail = format!(
                "waited {:?} for rank {missing} (DEVSTREAM_COMM_TIMEOUT_SECS, \
                 Communicator::set_timeout)",
                comm.timeout()
            );
            return Some(Err(comm.fail(
                self.op,
                CommFailure::Timeout,
                missing,
                &detail,
            )));
        }
        None
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

    fn gone(&self, rank: usize) -> bool {
        self.seg.abort_word() != 0 || self.seg.peer_gone(rank).is_some()
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
