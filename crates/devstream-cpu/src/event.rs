//! Events: "stream S has completed its first N tasks".

use crate::graph::{check_unsafe_call, Frontier, Session};
use crate::scheduler::Op;
use crate::stream::{blocking_in_worker, StreamInner};
use crate::{device, lock};
use devstream_core::{next_id, Completion, DeviceEvent, Error, EventFlags, Place, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What an event captured at its last record.
#[derive(Clone)]
pub(crate) enum Record {
    /// Never recorded: complete.
    Never,
    /// Recorded on `stream` when it had `seq` tasks submitted.
    Stream {
        stream: Arc<StreamInner>,
        seq: u64,
        /// When the marker task ran (timing events only).
        time: Option<Instant>,
    },
    /// Recorded on a capturing stream: the graph nodes it stands for.
    Captured {
        session: Arc<Session>,
        frontier: Frontier,
    },
}

struct Slot {
    record: Record,
    /// Incremented by every record, so a stale timing marker stamps nothing.
    generation: u64,
}

/// A lock-free copy of the record when it is "`stream` after `seq` tasks" without timing (the
/// stream's address, 0 otherwise), read as a seqlock: written only under the event's lock
/// (`version` odd meanwhile), read by [`EventInner::set_stream_record`] to see that a record
/// changes nothing (re-recorded on the same stream with no work submitted since), which then
/// takes no lock.
struct Mirror {
    version: std::sync::atomic::AtomicU64,
    stream: std::sync::atomic::AtomicUsize,
    seq: std::sync::atomic::AtomicU64,
}

impl Mirror {
    fn new(stream: usize, seq: u64) -> Mirror {
        Mirror {
            version: std::sync::atomic::AtomicU64::new(0),
            stream: std::sync::atomic::AtomicUsize::new(stream),
            seq: std::sync::atomic::AtomicU64::new(seq),
        }
    }

    /// Publishes the new record (`stream` 0: none a re-record could equal). Called with the
    /// event's lock held, which serialises writers.
    fn set(&self, stream: usize, seq: u64) {
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        self.stream.store(stream, Ordering::Relaxed);
        self.seq.store(seq, Ordering::Relaxed);
        self.version.store(version + 2, Ordering::Release);
    }

    /// Whether the record is "`stream` after `seq` tasks" (a consistent read; `false` when a
    /// writer is in the way).
    #[inline]
    fn is(&self, stream: usize, seq: u64) -> bool {
        let before = self.version.load(Ordering::Acquire);
        let (s, q) = (
            self.stream.load(Ordering::Relaxed),
            self.seq.load(Ordering::Relaxed),
        );
        std::sync::atomic::fence(Ordering::Acquire);
        before & 1 == 0 && self.version.load(Ordering::Relaxed) == before && s == stream && q == seq
    }
}

/// Shared state of a [`CpuEvent`].
pub(crate) struct EventInner {
    id: u64,
    flags: EventFlags,
    /// `true` when the current record is known complete (or there is none): the lock-free fast
    /// path of `query`, `synchronize` and `wait_event`. Only ever set while holding `slot`, or
    /// read; a record clears it under `slot`.
    done: AtomicBool,
    mirror: Mirror,
    slot: Mutex<Slot>,
}

impl EventInner {
    /// Whether the event was created with timing.
    pub(crate) fn flags_timing(&self) -> bool {
        self.flags.timing
    }

    /// Whether the current record is known complete, without locking.
    #[inline]
    pub(crate) fn known_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The current record.
    pub(crate) fn snapshot(&self) -> Record {
        lock(&self.slot).record.clone()
    }

    /// Replaces the record with "`stream` after `seq` tasks".
    ///
    /// Only for events without timing (whose generation no marker reads). When the record is
    /// already exactly this (the same stream, no task submitted since), nothing changes: the
    /// mirror tells that without the lock. While the record holds its stream, no other stream
    /// can have that address, so equal addresses are the same stream.
    pub(crate) fn set_stream_record(&self, stream: &Arc<StreamInner>, seq: u64) {
        let address = Arc::as_ptr(stream) as usize;
        if self.mirror.is(address, seq) {
            return;
        }
        let mut slot = lock(&self.slot);
        slot.generation += 1;
        self.mirror.set(address, seq);
        match &mut slot.record {
            // Re-recorded on the same stream: no reference count to swap.
            Record::Stream {
                stream: current,
                seq: current_seq,
                time,
            } if Arc::ptr_eq(current, stream) => {
                *current_seq = seq;
                *time = None;
            }
            record => {
                *record = Record::Stream {
                    stream: stream.clone(),
                    seq,
                    time: None,
                }
            }
        }
        let complete = stream.completed.load(Ordering::Acquire) >= seq;
        self.done.store(complete, Ordering::Release);
    }

    /// A timing record: `queue` puts the marker task on `stream` and returns its number. The
    /// event's lock is held meanwhile, so the marker (which takes it to stamp the time) cannot
    /// run before the record is in place.
    pub(crate) fn record_timed(
        self: &Arc<Self>,
        stream: &Arc<StreamInner>,
        queue: impl FnOnce(Op) -> Result<u64>,
    ) -> Result<()> {
        let mut slot = lock(&self.slot);
        slot.generation += 1;
        let generation = slot.generation;
        let seq = queue(Op::Stamp {
            event: self.clone(),
            generation,
        })?;
        slot.record = Record::Stream {
            stream: stream.clone(),
            seq,
            time: None,
        };
        self.mirror.set(0, 0);
        self.done.store(false, Ordering::Release);
        Ok(())
    }

    /// Replaces the record with graph nodes of an active capture.
    pub(crate) fn set_captured(&self, session: Arc<Session>, frontier: Frontier) {
        let mut slot = lock(&self.slot);
        slot.generation += 1;
        slot.record = Record::Captured { session, frontier };
        self.mirror.set(0, 0);
        self.done.store(false, Ordering::Release);
    }

    /// Called by the marker task of a timing record, once all earlier work is done.
    pub(crate) fn stamp(&self, generation: u64) {
        let now = Instant::now();
        let mut slot = lock(&self.slot);
        if slot.generation == generation {
            if let Record::Stream { time, .. } = &mut slot.record {
                *time = Some(now);
            }
        }
    }

    fn query(&self) -> Result<bool> {
        if self.known_done() {
            return Ok(true);
        }
        let slot = lock(&self.slot);
        match &slot.record {
            Record::Never => Ok(true),
            Record::Stream { stream, seq, .. } => {
                let complete = stream.completed.load(Ordering::Acquire) >= *seq;
                if complete {
                    self.done.store(true, Ordering::Release);
                }
                Ok(complete)
            }
            Record::Captured { session, .. } => {
                capture_ended(session, "Event::query").map(|()| true)
            }
        }
    }
}

/// What waiting for an event recorded in the capture `session` gives: complete once the capture
/// has ended (its nodes are a graph's, not work), `Error::Capture` naming `op` while it is active.
fn capture_ended(session: &Session, op: &'static str) -> Result<()> {
    if session.is_active() {
        Err(Error::capture(
            op,
            "the event was recorded in a capture that is still active",
        ))
    } else {
        Ok(())
    }
}

impl Drop for EventInner {
    fn drop(&mut self) {
        device::LIVE_EVENTS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A marker in a CPU stream's work. Cheap to clone (clones share the record).
///
/// Recording captures the stream's submitted-task count; the event is complete once the
/// stream's completed count reaches it, so `query` is a lock-free load once complete. With
/// [`EventFlags::timing`] a record also queues a marker task that takes an [`Instant`] when all
/// earlier work is done, and `elapsed` subtracts those. `blocking_sync` is accepted (waiting
/// always parks the thread); `interprocess` is `Error::Unsupported`.
#[derive(Clone)]
pub struct CpuEvent(pub(crate) Arc<EventInner>);

impl CpuEvent {
    pub(crate) fn new(flags: EventFlags) -> Result<CpuEvent> {
        let flags = flags.validate()?;
        if flags.interprocess {
            return Err(Error::unsupported("interprocess event", &Place::Cpu));
        }
        device::LIVE_EVENTS.fetch_add(1, Ordering::Relaxed);
        Ok(CpuEvent(Arc::new(EventInner {
            id: next_id(),
            flags,
            done: AtomicBool::new(true),
            mirror: Mirror::new(0, 0),
            slot: Mutex::new(Slot {
                record: Record::Never,
                generation: 0,
            }),
        })))
    }

    /// A new default-flags event already recorded as "`stream` after `seq` tasks" (the
    /// allocation-only fast path of `record_event`).
    pub(crate) fn recorded(stream: &Arc<StreamInner>, seq: u64) -> CpuEvent {
        device::LIVE_EVENTS.fetch_add(1, Ordering::Relaxed);
        let complete = stream.completed.load(Ordering::Acquire) >= seq;
        CpuEvent(Arc::new(EventInner {
            id: next_id(),
            flags: EventFlags::default(),
            done: AtomicBool::new(complete),
            mirror: Mirror::new(Arc::as_ptr(stream) as usize, seq),
            slot: Mutex::new(Slot {
                record: Record::Stream {
                    stream: stream.clone(),
                    seq,
                    time: None,
                },
                generation: 1,
            }),
        }))
    }

    /// The time of the current record: `Err(NotRecorded)` / `Err(NotReady)` where it has none.
    fn timestamp(&self) -> Result<Instant> {
        let slot = lock(&self.0.slot);
        match &slot.record {
            Record::Never | Record::Captured { .. } => Err(Error::NotRecorded),
            Record::Stream { time: Some(t), .. } => Ok(*t),
            Record::Stream { time: None, .. } => Err(Error::NotReady),
        }
    }
}

devstream_core::debug_fields!(CpuEvent, |self| id: self.0.id, flags: self.0.flags);

impl DeviceEvent for CpuEvent {
    fn place(&self) -> Option<Place> {
        Some(Place::Cpu)
    }

    fn id(&self) -> u64 {
        self.0.id
    }

    fn flags(&self) -> EventFlags {
        self.0.flags
    }

    #[inline]
    fn query(&self) -> Result<bool> {
        check_unsafe_call("Event::query")?;
        if self.0.known_done() {
            return Ok(true);
        }
        self.0.query()
    }

    fn synchronize(&self) -> Result<()> {
        check_unsafe_call("Event::synchronize")?;
        if self.0.known_done() {
            return Ok(());
        }
        match self.0.snapshot() {
            Record::Never => Ok(()),
            Record::Stream { stream, seq, .. } => {
                if stream.completed.load(Ordering::Acquire) >= seq {
                    return Ok(());
                }
                if let Some(error) = blocking_in_worker("Event::synchronize", stream.id) {
                    return Err(error);
                }
                stream.wait_until(seq);
                Ok(())
            }
            Record::Captured { session, .. } => capture_ended(&session, "Event::synchronize"),
        }
    }

    fn completion(&self) -> Completion {
        if self.0.known_done() {
            return Completion::ready(Ok(()));
        }
        match self.0.snapshot() {
            Record::Never => Completion::ready(Ok(())),
            // Like `synchronize`: the event's work, not its stream's errors.
            Record::Stream { stream, seq, .. } => stream.completion_at(seq, false),
            Record::Captured { session, .. } => {
                Completion::ready(capture_ended(&session, "Event::completion"))
            }
        }
    }

    fn elapsed(&self, end: &Self) -> Result<Duration> {
        if !self.0.flags.timing || !end.0.flags.timing {
            return Err(Error::TimingDisabled);
        }
        let (start, stop) = (self.timestamp(), end.timestamp());
        for missing in [Error::NotRecorded, Error::NotReady] {
            if start.as_ref().err() == Some(&missing) || stop.as_ref().err() == Some(&missing) {
                return Err(missing);
            }
        }
        let (start, stop) = (start?, stop?);
        stop.checked_duration_since(start).ok_or_else(|| {
            Error::InvalidArgument("elapsed: the end event completed before the start event".into())
        })
    }
}
