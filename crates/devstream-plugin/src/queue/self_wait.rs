//! What a host function may wait for. A host function runs on its plug-in queue, so any wait
//! from inside it for work queued after it on that queue (directly, or through other streams'
//! waits) could never end: such a wait is refused with `Error::WouldDeadlock`. The running host
//! function is kept in a thread-local (its queue, its position there, its stream); a wait is
//! judged by following the held and noted waits of the streams involved, back to the host
//! function's own queue; a held wait for a completion (whose work devstream cannot follow from
//! here) counts as reaching it. The converse question (does some work *certainly* run after the host
//! function) lets a host-buffer access skip copies that cannot touch the memory meanwhile.

use super::lock;
use super::record::RecordState;
use super::EventRecord;
use super::{Item, StreamCore};
use devstream_core::Error;
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The typed error for a wait, from inside a host function, on its own stream's later work.
pub(crate) fn waits_for_itself(op: &'static str, stream: u64) -> Error {
    Error::WouldDeadlock {
        op,
        reason: format!(
            "plug-in stream {stream} would wait, directly or through other streams, for work \
             queued after that host function on its plug-in queue (which cannot run before it \
             returns)"
        ),
    }
}

/// A devstream host function running on some thread.
#[derive(Clone, Copy)]
struct RunningHostFn {
    /// Its plug-in queue ([`StreamCore::queue_id`]).
    queue: u64,
    /// Its position in that queue.
    seq: u64,
    /// Its devstream stream.
    stream: u64,
}

thread_local! {
    /// The host function running on this thread.
    static HOST_FN: Cell<Option<RunningHostFn>> = const { Cell::new(None) };
}

/// The devstream host function running on this thread, if any: its plug-in queue and position.
pub(crate) fn running_host_fn() -> Option<(u64, u64)> {
    HOST_FN
        .with(Cell::get)
        .map(|running| (running.queue, running.seq))
}

/// Inside a host function (of queue `a` at position `n`): whether the work of `core` up to
/// position `limit` (`u64::MAX`: all of it, also what is held on the host) could wait,
/// directly or through other streams' waits, for work `a` queues after that host function,
/// which cannot run before the host function returns. Conservative: a wait of `core` before
/// `limit` counts even where the event it waits for is complete but not yet known to be.
fn waits_for_later_work(core: &StreamCore, limit: u64, (a, n): (u64, u64)) -> bool {
    // `a` is the host function's plug-in queue: every stream over it counts as its own.
    let mut visited: Vec<(u64, u64)> = Vec::new();
    let mut stack: Vec<(Arc<StreamCore>, u64)> = Vec::new();
    let mut visit = |core: &StreamCore, limit: u64, stack: &mut Vec<(Arc<StreamCore>, u64)>| {
        if core.queue_id() == a {
            return limit > n;
        }
        if visited.iter().any(|&(id, l)| id == core.id && l >= limit) {
            return false;
        }
        visited.push((core.id, limit));
        // The held waits first, then the noted ones, under the held waits' lock: a wait leaves
        // the held ones (in `pump`) only once it is noted, under that same lock, so it is seen
        // in one or the other, never in neither (a wait missed while the dispatcher hands it
        // to the plug-in would let a host function hang on work behind it).
        let mut awaited: Vec<Arc<EventRecord>> = Vec::new();
        {
            let deferred = lock(&core.deferred);
            if limit == u64::MAX {
                // A held wait for a completion not yet done waits for work of any stream or
                // backend (a host function given a buffer waits so for the buffer's earlier
                // uses, the host function's own among them): counted as waiting for the host
                // function, as devstream_core::foreign counts pending waits across backends.
                if deferred.items.iter().any(|item| {
                    matches!(item, Item::WaitFlag(flag, value)
                        if flag.completion_gate && flag.get() < *value)
                }) {
                    return true;
                }
                awaited.extend(deferred.items.iter().filter_map(|item| match item {
                    Item::WaitEvent(raw) => Some(raw.clone()),
                    _ => None,
                }));
            }
            awaited.extend(
                lock(&core.waits)
                    .iter()
                    .filter(|w| w.seq < limit && !w.raw.complete.load(Ordering::Acquire))
                    .map(|w| w.raw.clone()),
            );
        }
        for raw in awaited {
            let limit = match &*lock(&raw.state) {
                RecordState::Pending => u64::MAX,
                RecordState::Recorded { seq } => *seq,
                RecordState::Lost(_) => continue,
            };
            // An event of the host function's own queue is decided here, from the queue the
            // event keeps: its stream's host side may be gone (the program dropped the handle)
            // while its record still waits behind the host function.
            if raw.queue == a {
                if limit > n {
                    return true;
                }
                continue;
            }
            if let Some(origin) = raw.origin.upgrade() {
                stack.push((origin, limit));
            }
        }
        false
    };
    if visit(core, limit, &mut stack) {
        return true;
    }
    while let Some((core, limit)) = stack.pop() {
        if visit(&core, limit, &mut stack) {
            return true;
        }
    }
    false
}

/// Inside a host function: whether waiting for `core`'s work up to `limit` could wait for
/// work queued after that host function (then the wait is refused, never a hang).
pub(crate) fn host_fn_would_wait_for_itself(core: &StreamCore, limit: u64) -> bool {
    running_host_fn().is_some_and(|running| waits_for_later_work(core, limit, running))
}

/// How many streams [`runs_after_running_host_fn`] follows before it gives up (answers no).
const MAX_ORDER_CHAIN: usize = 64;

/// Inside a host function: whether the work `raw` marks *certainly* cannot start before that
/// host function returns, because its stream waits (through waits the plug-in accepted, on any
/// number of streams) for an event recorded after the host function on the host function's own
/// stream. The opposite of [`host_fn_would_wait_for_itself`]'s caution: `false` whenever that is
/// not certain (a wait still held on the host or being handed to the plug-in, an event of
/// another stream over the same plug-in queue, a chain too long). A host-buffer access skips
/// such copies: they run after it in stream order, and cannot touch the memory meanwhile.
pub(crate) fn runs_after_running_host_fn(raw: &EventRecord) -> bool {
    let Some(RunningHostFn {
        queue,
        seq: n,
        stream,
    }) = HOST_FN.with(Cell::get)
    else {
        return false;
    };
    // Does the work of `core` from position `from` on certainly wait for that later work?
    // The handed waits are read *before* the position (see `settled` in buffer.rs): a wait seen
    // handed while a record is still pending was handed before that record.
    let after_waits = |core: &StreamCore, position: &dyn Fn() -> Option<u64>| {
        let handed: Vec<(u64, Arc<EventRecord>)> = lock(&core.waits)
            .iter()
            .filter(|w| w.handed)
            .map(|w| (w.seq, w.raw.clone()))
            .collect();
        position().map(|from| {
            handed
                .into_iter()
                .filter(|(seq, _)| *seq < from)
                .map(|(_, raw)| raw)
                .collect::<Vec<_>>()
        })
    };
    let position = |raw: &EventRecord| match &*lock(&raw.state) {
        RecordState::Pending => Some(u64::MAX),
        RecordState::Recorded { seq } => Some(*seq),
        RecordState::Lost(_) => None,
    };
    let Some(origin) = raw.origin.upgrade() else {
        return false;
    };
    let Some(mut awaited) = after_waits(&origin, &|| position(raw)) else {
        return false;
    };
    let mut followed = 0;
    while let Some(event) = awaited.pop() {
        if event.complete.load(Ordering::Acquire) {
            continue;
        }
        let RecordState::Recorded { seq } = *lock(&event.state) else {
            continue;
        };
        if event.queue == queue {
            if event.stream == stream && seq > n {
                return true;
            }
            continue;
        }
        followed += 1;
        if followed > MAX_ORDER_CHAIN {
            return false;
        }
        if let Some(origin) = event.origin.upgrade() {
            if let Some(more) = after_waits(&origin, &|| Some(seq)) {
                awaited.extend(more);
            }
        }
    }
    false
}

/// Restores the previous running host function (host functions may nest on a plug-in that
/// runs callbacks inside `stream_add_callback`).
pub(super) struct HostFnScope(Option<RunningHostFn>);

impl HostFnScope {
    /// Marks the host function at position `seq` of plug-in queue `queue` (of devstream
    /// stream `stream`) as running on this thread until the scope is dropped.
    pub(super) fn enter(queue: u64, seq: u64, stream: u64) -> HostFnScope {
        let running = RunningHostFn { queue, seq, stream };
        HostFnScope(HOST_FN.with(|current| current.replace(Some(running))))
    }
}

impl Drop for HostFnScope {
    fn drop(&mut self) {
        HOST_FN.with(|current| current.set(self.0));
    }
}
