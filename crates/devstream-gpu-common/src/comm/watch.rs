//! The watchdog: one thread per process polls the communicators with queued work (their
//! asynchronous error, and the events recorded around each collective queued outside a
//! capture), and fails and aborts a communicator whose library reports an error or whose
//! collective has run past the deadline (see the module header of `comm`).

use super::{collective_failed, failure_of, lock, CommInner, RawComm};
use crate::comm_lib::result;
use crate::hostfn::PanicSlot;
use crate::raw::{RawApi, RawEvent};
use crate::{CaptureModeGuard, GpuStream};
use devstream_core::{CommFailure, EventFlags};
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// One collective the watchdog follows: events recorded just before and just after it.
pub(super) struct Pending {
    pub(super) start: RawEvent,
    pub(super) end: RawEvent,
    /// When the watchdog first saw `start` complete (the collective began on the GPU).
    started: Option<Instant>,
    /// The stream's error slot (its `synchronize` reports a failure).
    slot: Arc<PanicSlot>,
}

/// What the watchdog tracks for a communicator: its collectives queued outside a capture and
/// not known to be complete, and spare events.
#[derive(Default)]
pub(super) struct Watch {
    pub(super) pending: Vec<Pending>,
    pub(super) free: Vec<RawEvent>,
}

impl Watch {
    /// An event from the spares or a new one (the context is current).
    fn event<A: RawApi>(&mut self) -> Option<RawEvent> {
        self.free.pop().or_else(|| {
            // SAFETY: the caller made the device's context current.
            unsafe { A::event_create(EventFlags::default()) }.ok()
        })
    }
}

impl<A: RawApi> CommInner<A> {
    /// Fails the communicator: keeps `failure` for later calls (`Aborted`), hands it to every
    /// stream with a collective not known complete (once per stream), then aborts the library's
    /// communicator if it is still live (`raw`, under its lock). The failure is kept before the
    /// abort: aborting releases the kernels waiting for peers, and a `synchronize` that returns
    /// then must find it (kept after the abort, a survivor's `synchronize` could return `Ok`
    /// in between). The events stay until the communicator is dropped.
    pub(super) fn fail_and_abort(
        &self,
        raw: &mut Option<RawComm>,
        failure: CommFailure,
        reason: String,
    ) {
        {
            let mut failed = lock(&self.failed);
            if failed.is_none() {
                *failed = Some((failure, reason.clone()));
            }
        }
        {
            let mut watch = lock(&self.watch);
            let mut told: Vec<Arc<PanicSlot>> = Vec::new();
            for p in &watch.pending {
                if !told.iter().any(|t| Arc::ptr_eq(t, &p.slot)) {
                    p.slot.fail(collective_failed(failure, reason.clone()));
                    told.push(p.slot.clone());
                }
            }
            let done: Vec<Pending> = std::mem::take(&mut watch.pending);
            watch
                .free
                .extend(done.into_iter().flat_map(|p| [p.start, p.end]));
        }
        if let Some(comm) = raw.take() {
            // SAFETY: a live communicator, under its lock (`raw`); aborting releases the
            // kernels waiting for peers and frees it, and it is never used again (`raw` is now
            // `None`).
            let _ = unsafe { (self.lib.comm_abort)(comm.0) };
        }
    }

    /// Records the start marker of a collective about to be queued on `stream` outside a
    /// capture (`None`: not watched; a hang stays possible then, never a false failure). The
    /// context is current.
    pub(super) fn mark_start(&self, stream: &GpuStream<A>) -> Option<RawEvent> {
        let mut watch = lock(&self.watch);
        let start = watch.event::<A>()?;
        // SAFETY: our event and a live stream of the same device.
        if unsafe { A::event_record(start, stream.raw()) }.is_err() {
            watch.free.push(start);
            return None;
        }
        Some(start)
    }

    /// Records the end marker after the collective queued since `start` (or gives `start`
    /// back when the call failed) and starts the watchdog.
    pub(super) fn mark_end(&self, stream: &GpuStream<A>, start: Option<RawEvent>, queued: bool) {
        let Some(start) = start else { return };
        let mut watch = lock(&self.watch);
        if !queued {
            watch.free.push(start);
            return;
        }
        let Some(end) = watch.event::<A>() else {
            watch.free.push(start);
            return;
        };
        // SAFETY: our event and a live stream of the same device.
        if unsafe { A::event_record(end, stream.raw()) }.is_err() {
            watch.free.extend([start, end]);
            return;
        }
        // The communicator failed (and was aborted) after this collective was queued and
        // before it is watched: `fail_and_abort` keeps the failure before it takes the pending
        // list under this lock, so the collective is either in that list or failed here.
        let failed = lock(&self.failed).clone();
        if let Some((failure, reason)) = failed {
            stream
                .inner()
                .panic_slot()
                .fail(collective_failed(failure, reason));
            watch.free.extend([start, end]);
            return;
        }
        watch.pending.push(Pending {
            start,
            end,
            started: None,
            slot: stream.inner().panic_slot().clone(),
        });
        drop(watch);
        watchdog_start();
    }
}

impl<A: RawApi> Watched for CommInner<A> {
    fn poll(&self) -> bool {
        if lock(&self.watch).pending.is_empty() || self.device.bind().is_err() {
            return true;
        }
        let relaxed = CaptureModeGuard::<A>::relaxed();
        if relaxed.is_none() && self.device.active_captures.load(Ordering::Acquire) > 0 {
            return true; // a query could invalidate a capture in Global mode: wait
        }
        // Forget the completed collectives; note when the others began. The deadline of a
        // collective counts from when it began on the GPU (its start marker completed), so a
        // long queue of work ahead of it is not a failure.
        let now = Instant::now();
        let mut overdue = None;
        {
            let mut watch = lock(&self.watch);
            let Watch { pending, free } = &mut *watch;
            let mut index = 0;
            while index < pending.len() {
                let p = &mut pending[index];
                // SAFETY: our recorded events.
                if unsafe { A::event_query(p.end) }.is_ok() {
                    let done = pending.swap_remove(index);
                    free.extend([done.start, done.end]);
                    continue;
                }
                if p.started.is_none() {
                    // SAFETY: as above.
                    if unsafe { A::event_query(p.start) }.is_ok() {
                        p.started = Some(now);
                    }
                }
                if let Some(started) = p.started {
                    if now.duration_since(started) > self.timeout() {
                        overdue = Some(now.duration_since(started));
                    }
                }
                index += 1;
            }
            if pending.is_empty() {
                return true;
            }
        }
        drop(relaxed);
        // A call in progress (possibly waiting for peers to connect) holds the lock: look
        // again next round (aborting under a call in progress is not allowed).
        let Ok(mut raw) = self.raw.try_lock() else {
            return true;
        };
        let Some(comm) = *raw else {
            // A call saw the failure and aborted the communicator: the streams with
            // collectives still pending report it too.
            let failed = lock(&self.failed).clone();
            return match failed {
                Some((failure, reason)) => {
                    self.fail_and_abort(&mut raw, failure, reason);
                    false
                }
                None => true,
            };
        };
        let mut async_error: c_int = result::SUCCESS;
        // SAFETY: a live communicator; the lock serialises calls on it.
        let code = unsafe { (self.lib.comm_get_async_error)(comm.0, &mut async_error) };
        let failure = if code != result::SUCCESS {
            Some((failure_of(code), self.lib.describe(code)))
        } else if async_error != result::SUCCESS && async_error != result::IN_PROGRESS {
            Some((failure_of(async_error), self.lib.describe(async_error)))
        } else {
            overdue.map(|running| {
                (
                    CommFailure::Timeout,
                    format!(
                        "a collective running for {running:?} did not complete within {:?} \
                         (a peer is missing or stalled)",
                        self.timeout()
                    ),
                )
            })
        };
        let Some((failure, reason)) = failure else {
            return true;
        };
        let reason = format!("rank {} of {}: {reason}", self.rank, self.nranks);
        self.fail_and_abort(&mut raw, failure, reason);
        false
    }
}

/// A communicator the watchdog polls.
pub(super) trait Watched: Send + Sync {
    /// Checks progress; `false` once there is nothing left to watch (aborted).
    fn poll(&self) -> bool;
}

pub(super) fn watched() -> &'static Mutex<Vec<Weak<dyn Watched>>> {
    static LIST: OnceLock<Mutex<Vec<Weak<dyn Watched>>>> = OnceLock::new();
    LIST.get_or_init(|| Mutex::new(Vec::new()))
}

/// Starts the process' one watchdog thread (once).
pub(super) fn watchdog_start() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let _ = std::thread::Builder::new()
            .name("devstream-comm-watchdog".into())
            .spawn(|| loop {
                std::thread::sleep(Duration::from_millis(20));
                let list: Vec<Weak<dyn Watched>> = lock(watched()).clone();
                let done: Vec<&Weak<dyn Watched>> = list
                    .iter()
                    .filter(|weak| !weak.upgrade().is_some_and(|comm| comm.poll()))
                    .collect();
                if !done.is_empty() {
                    lock(watched()).retain(|w| !done.iter().any(|d| Weak::ptr_eq(d, w)));
                }
            });
    });
}
