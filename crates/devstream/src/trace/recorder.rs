//! The recorder's state and the per-op hook the facade calls.
//!
//! The hook is [`begin`]: one relaxed atomic load when no recording is running. While one runs,
//! every facade op takes the session lock twice for a few pushes (never across a backend call),
//! and ops that put work on a stream of a place with `timing` are bracketed by two timed events
//! recorded on that stream. Nothing here waits for the device: the events are resolved when the
//! recording stops.

use crate::dispatch::{EventApi, StreamApi};
use crate::{Event, MemoryPool, Stream};
use devstream_core::{EventFlags, Place, PoolStats, Priority};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

/// `true` while a recording runs. The only thing the op path reads when none does.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Numbers the recordings, so a guard that outlives its recording writes nothing.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The running recording, if any.
static SESSION: Mutex<Option<Session>> = Mutex::new(None);

thread_local! {
    /// The label the next op submitted from this thread gets (`trace::label`).
    static NEXT_LABEL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Whether an op puts work on the stream (bracketed by timed events where the place can time)
/// or only happens on the host (query, synchronize, alloc, capture control).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    /// Host-side only: recorded with its host time.
    Host,
    /// Work in the stream's order: also timed on the device where the place can.
    Device,
}

/// What kind of dependency an edge is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EdgeKind {
    /// `wait_event` on an event recorded by the source op.
    Event,
    /// `wait_stream`: the source is the other stream's last op at the time of the wait.
    Stream,
}

/// One stream seen by the recording.
pub(crate) struct StreamEntry {
    pub(crate) place: Place,
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    pub(crate) priority: Priority,
    pub(crate) timing: bool,
    last_op: Option<usize>,
}

/// One op, filled at begin and completed when its guard drops.
pub(crate) struct OpEntry {
    pub(crate) stream: usize,
    pub(crate) name: &'static str,
    pub(crate) label: Option<String>,
    /// Host time (ns since the origin) just before the start event was recorded: the device
    /// cannot have reached the start event earlier.
    pub(crate) mark_ns: u64,
    pub(crate) host_start_ns: u64,
    pub(crate) host_end_ns: Option<u64>,
    pub(crate) start_event: Option<Event>,
    pub(crate) end_event: Option<Event>,
}

/// A dependency between two ops (indices into `ops`).
pub(crate) struct Edge {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) kind: EdgeKind,
}

/// A memory pool the recording samples: one counter track.
pub(crate) struct PoolEntry {
    pub(crate) pool: MemoryPool,
    pub(crate) name: Option<String>,
    /// (ns since the origin, the pool's statistics then), a sample only where they changed.
    pub(crate) samples: Vec<(u64, PoolStats)>,
}

/// Everything one recording holds until it stops.
pub(crate) struct Session {
    generation: u64,
    pub(crate) origin: Instant,
    pub(crate) wall_start: SystemTime,
    pub(crate) streams: Vec<StreamEntry>,
    stream_index: HashMap<(Place, u64), usize>,
    pub(crate) ops: Vec<OpEntry>,
    /// Event id → the op that last recorded it.
    event_source: HashMap<u64, usize>,
    pub(crate) edges: Vec<Edge>,
    /// The pools sampled after every op (see [`watch_pool`]).
    pub(crate) pools: Vec<PoolEntry>,
}

impl Session {
    fn elapsed_ns(&self) -> u64 {
        nanos(self.origin)
    }

    fn stream_slot(&mut self, stream: &Stream) -> usize {
        let key = (StreamApi::place(stream).clone(), StreamApi::id(stream));
        if let Some(&index) = self.stream_index.get(&key) {
            return index;
        }
        let index = self.streams.len();
        self.streams.push(StreamEntry {
            place: key.0.clone(),
            id: key.1,
            name: None,
            priority: StreamApi::priority(stream),
            timing: StreamApi::capabilities(stream).timing,
            last_op: None,
        });
        self.stream_index.insert(key, index);
        index
    }
}

fn nanos(origin: Instant) -> u64 {
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The session lock; a panic while it was held (there is no code that panics under it) does not
/// poison the recorder.
fn lock() -> MutexGuard<'static, Option<Session>> {
    SESSION
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts a new recording, dropping one that runs.
pub(crate) fn start() {
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    let mut session = lock();
    *session = Some(Session {
        generation,
        origin: Instant::now(),
        wall_start: SystemTime::now(),
        streams: Vec::new(),
        stream_index: HashMap::new(),
        ops: Vec::new(),
        event_source: HashMap::new(),
        edges: Vec::new(),
        pools: Vec::new(),
    });
    ACTIVE.store(true, Ordering::Release);
}

/// Ends the recording and hands its state over (none if none ran), with a last sample of its
/// pools.
pub(crate) fn take() -> Option<Session> {
    sample_pools(None);
    ACTIVE.store(false, Ordering::Release);
    lock().take()
}

/// Samples `pool` from now on, after every op, as a counter track named `name` (given again:
/// renamed; `None` keeps the name it has, else `pool <id>`).
pub(crate) fn watch_pool(pool: &MemoryPool, name: Option<String>) {
    let generation = {
        let mut guard = lock();
        let Some(session) = guard.as_mut() else {
            return;
        };
        match session.pools.iter_mut().find(|entry| entry.pool == *pool) {
            Some(entry) => {
                if name.is_some() {
                    entry.name = name;
                }
            }
            None => session.pools.push(PoolEntry {
                pool: pool.clone(),
                name,
                samples: Vec::new(),
            }),
        }
        session.generation
    };
    sample_pools(Some(generation));
}

/// Samples every watched pool of the running recording (of `generation`, where given). The
/// statistics are read without the session lock (a pool's `stats` may wait on its device's
/// scheduler); a sample equal to the pool's last one is not kept.
fn sample_pools(generation: Option<u64>) {
    let pools: Vec<MemoryPool> = match lock().as_ref() {
        Some(session) if generation.is_none_or(|g| g == session.generation) => session
            .pools
            .iter()
            .map(|entry| entry.pool.clone())
            .collect(),
        _ => return,
    };
    if pools.is_empty() {
        return;
    }
    let stats: Vec<Option<PoolStats>> = pools.iter().map(|pool| pool.stats().ok()).collect();
    let mut guard = lock();
    let Some(session) = guard
        .as_mut()
        .filter(|s| generation.is_none_or(|g| g == s.generation))
    else {
        return;
    };
    let now = session.elapsed_ns();
    for (pool, stats) in pools.iter().zip(stats) {
        let (Some(entry), Some(stats)) = (
            session.pools.iter_mut().find(|entry| entry.pool == *pool),
            stats,
        ) else {
            continue;
        };
        if entry.samples.last().is_none_or(|(_, last)| *last != stats) {
            entry.samples.push((now, stats));
        }
    }
}

/// Whether a recording runs: the one relaxed load the op path pays.
#[inline(always)]
pub(crate) fn is_active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Sets the label of the next op this thread submits.
pub(crate) fn set_label(text: String) {
    NEXT_LABEL.with(|label| *label.borrow_mut() = Some(text));
}

/// Names a stream's track in the running recording.
pub(crate) fn name_stream(stream: &Stream, name: String) {
    if let Some(session) = lock().as_mut() {
        let index = session.stream_slot(stream);
        session.streams[index].name = Some(name);
    }
}

/// The hook around one recorded facade op: dropped when the op has returned. Empty when the
/// recording stopped between the facade's check and the op.
#[must_use]
pub(crate) struct OpGuard {
    active: Option<Box<ActiveOp>>,
}

struct ActiveOp {
    name: &'static str,
    generation: u64,
    index: usize,
    origin: Instant,
    stream: Stream,
    start_event: Option<Event>,
    /// Host time just before the op itself is called (after its start event was recorded).
    host_start_ns: u64,
}

/// Runs op `name` on `stream` (the closure `op`) while recording: the facade calls this only
/// after [`is_active`] said a recording runs, so the untraced path never reaches it.
#[cold]
#[inline(never)]
pub(crate) fn traced<R>(
    name: &'static str,
    stream: &Stream,
    kind: OpKind,
    op: impl FnOnce(&OpGuard) -> R,
) -> R {
    let guard = begin_recording(name, stream, kind);
    let result = op(&guard);
    drop(guard);
    result
}

/// A timed event recorded on `stream` now, bypassing the facade (so it is not itself traced).
fn timed_event(stream: &Stream) -> Option<Event> {
    let event = Event::new(StreamApi::place(stream), EventFlags::timed()).ok()?;
    StreamApi::record(stream, &event).ok()?;
    Some(event)
}

/// Events are never recorded on a capturing stream (nor where capture state is unknown).
fn can_record_events(stream: &Stream) -> bool {
    matches!(StreamApi::is_capturing(stream), Ok(false))
}

fn begin_recording(name: &'static str, stream: &Stream, kind: OpKind) -> OpGuard {
    let label = NEXT_LABEL.with(|label| label.borrow_mut().take());
    let (generation, index, origin, timing) = {
        let mut guard = lock();
        let Some(session) = guard.as_mut() else {
            return OpGuard { active: None };
        };
        let stream_index = session.stream_slot(stream);
        let index = session.ops.len();
        let now = session.elapsed_ns();
        session.ops.push(OpEntry {
            stream: stream_index,
            name,
            label,
            mark_ns: now,
            host_start_ns: now,
            host_end_ns: None,
            start_event: None,
            end_event: None,
        });
        session.streams[stream_index].last_op = Some(index);
        (
            session.generation,
            index,
            session.origin,
            session.streams[stream_index].timing,
        )
    };
    let start_event = if kind == OpKind::Device && timing && can_record_events(stream) {
        timed_event(stream)
    } else {
        None
    };
    OpGuard {
        active: Some(Box::new(ActiveOp {
            name,
            generation,
            index,
            origin,
            stream: stream.clone(),
            start_event,
            host_start_ns: nanos(origin),
        })),
    }
}

impl OpGuard {
    /// Runs `f` on the session this guard's op belongs to, if it still runs.
    fn with_session(&self, f: impl FnOnce(&mut Session, usize)) {
        if let Some(op) = &self.active {
            if let Some(session) = lock().as_mut().filter(|s| s.generation == op.generation) {
                f(session, op.index);
            }
        }
    }

    /// The op recorded `event`: later waits on it draw a flow from this op.
    pub(crate) fn records(&self, event: &Event) {
        if self.active.is_some() {
            let id = EventApi::id(event);
            self.with_session(|session, index| {
                session.event_source.insert(id, index);
            });
        }
    }

    /// The op waits on `event`: a flow from the op that last recorded it.
    pub(crate) fn waits_event(&self, event: &Event) {
        if self.active.is_some() {
            let id = EventApi::id(event);
            self.with_session(|session, index| {
                if let Some(&from) = session.event_source.get(&id) {
                    session.edges.push(Edge {
                        from,
                        to: index,
                        kind: EdgeKind::Event,
                    });
                }
            });
        }
    }

    /// The op waits on everything `other` was given: a flow from `other`'s last op.
    pub(crate) fn waits_stream(&self, other: &Stream) {
        if self.active.is_some() {
            let key = (StreamApi::place(other).clone(), StreamApi::id(other));
            self.with_session(|session, index| {
                let from = session
                    .stream_index
                    .get(&key)
                    .and_then(|&stream| session.streams[stream].last_op);
                if let Some(from) = from.filter(|&from| from != index) {
                    session.edges.push(Edge {
                        from,
                        to: index,
                        kind: EdgeKind::Stream,
                    });
                }
            });
        }
    }
}

impl Drop for OpGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some(op) = self.active.take() {
            op.finish();
        }
    }
}

impl ActiveOp {
    #[cold]
    fn finish(self) {
        let host_end_ns = nanos(self.origin);
        let end_event = match &self.start_event {
            Some(_) if can_record_events(&self.stream) => timed_event(&self.stream),
            _ => None,
        };
        let mut guard = lock();
        if let Some(session) = guard.as_mut().filter(|s| s.generation == self.generation) {
            let entry = &mut session.ops[self.index];
            entry.host_start_ns = self.host_start_ns;
            entry.host_end_ns = Some(host_end_ns.max(self.host_start_ns));
            if end_event.is_some() {
                entry.start_event = self.start_event;
                entry.end_event = end_event;
            }
        }
        let watching = guard
            .as_ref()
            .is_some_and(|session| !session.pools.is_empty());
        drop(guard);
        if self.name.strip_prefix("devstream.").unwrap_or(self.name) == "alloc" {
            // `alloc` takes from the place's default pool: watch it (places without pools
            // have none).
            if let Ok(pool) = MemoryPool::default_for(StreamApi::place(&self.stream)) {
                watch_pool(&pool, None);
                return;
            }
        }
        if watching {
            sample_pools(Some(self.generation));
        }
    }
}
