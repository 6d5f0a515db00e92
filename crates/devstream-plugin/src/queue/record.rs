//! One record of a plug-in event ([`EventRecord`], defined in the parent module, whose stream
//! core and self-wait check read its fields). Each record creates a fresh plug-in event; a
//! devstream event points at its latest one, and a wait keeps the raw event it was given, so
//! re-recording never changes what earlier waits wait for. A record may be held on the host
//! (behind a flag or an event), handed to the plug-in, or lost (its `record_event` failed);
//! what the event stood for is answered from that state, and the plug-in is asked only when
//! the question can neither wait for the calling host function nor break a capture.

use super::reaper::{reap, Job};
use super::self_wait::{host_fn_would_wait_for_itself, running_host_fn, waits_for_itself};
use super::{lock, wait};
use super::{EventRecord, StreamCore};
use crate::capture::Capturing;
use crate::runtime::{Handle, LoadedPlugin};
use devstream_core::elide::Mark;
use devstream_core::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Weak;

/// Where a [`EventRecord`]'s record stands.
#[derive(Clone, Debug)]
pub(super) enum RecordState {
    /// Not yet handed to the plug-in (held on the host behind a flag or an event).
    Pending,
    /// `record_event` succeeded as the stream's `seq`-th submission.
    Recorded { seq: u64 },
    /// `record_event` failed: what the event stood for cannot be known.
    Lost(Error),
}

impl std::fmt::Debug for EventRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecord")
            .field("handle", &self.handle)
            .field("state", &*lock(&self.state))
            .finish()
    }
}

/// What the reaper may conclude about an event.
pub(super) enum Settled {
    Complete,
    NotYet,
    /// Its record failed: nobody can tell when the work it stood for is done.
    Unknown,
}

impl EventRecord {
    /// Where this record sits for redundant-wait elision ([`Mark::NONE`] when it cannot be
    /// trusted or is not recorded yet).
    pub(crate) fn mark(&self) -> Mark {
        match self.pos.load(Ordering::Acquire) {
            0 => Mark::NONE,
            pos => Mark {
                stream: self.stream,
                pos,
            },
        }
    }

    /// The plug-in's handle (possibly null).
    pub(crate) fn handle(&self) -> Handle {
        self.handle
    }

    /// The index of the plug-in runtime it belongs to.
    pub(crate) fn runtime_index(&self) -> usize {
        self.runtime.index()
    }

    /// Known complete.
    pub(crate) fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// The capture the event was recorded into, if any (see the field).
    pub(super) fn captured_in(&self) -> Option<u64> {
        match self.captured.load(Ordering::Acquire) {
            0 => None,
            id => Some(id),
        }
    }

    /// Whether the event was recorded into a capture still in progress: a stream outside the
    /// capture that waits for it joins the capture (as CUDA's cross-stream capture).
    pub(crate) fn recorded_in_active_capture(&self) -> bool {
        self.captured_in()
            .is_some_and(|id| crate::capture::find(self.runtime.index(), id).is_some())
    }

    /// Whether asking the plug-in about this event now may break a capture (see
    /// [`question_breaks_a_capture`]).
    pub(super) fn question_breaks_a_capture(&self) -> bool {
        question_breaks_a_capture(&self.runtime, &self.origin, self.captured_in())
    }

    /// The error its `record_event` failed with, if it failed: when the work it stands for
    /// ends cannot be known.
    pub(crate) fn lost(&self) -> Option<Error> {
        match &*lock(&self.state) {
            RecordState::Lost(error) => Some(error.clone()),
            _ => None,
        }
    }

    /// Whether the record reached the plug-in (or failed): false while it is held on the host.
    pub(crate) fn is_submitted(&self) -> bool {
        !matches!(*lock(&self.state), RecordState::Pending)
    }

    pub(super) fn set_state(&self, state: RecordState) {
        *lock(&self.state) = state;
        self.state_changed.notify_all();
    }

    fn wait_submitted(&self) -> RecordState {
        let mut state = lock(&self.state);
        while matches!(*state, RecordState::Pending) {
            state = wait(&self.state_changed, state);
        }
        state.clone()
    }

    /// Inside a host function of this event's plug-in queue: `Some(true)` when the event precedes
    /// that host function (so it is complete), `Some(false)` when it follows it (waiting for
    /// it would wait for the host function itself); `None` elsewhere.
    fn before_running_host_fn(&self) -> Option<bool> {
        let (queue, host_fn_seq) = running_host_fn()?;
        if queue != self.queue {
            return None;
        }
        Some(matches!(*lock(&self.state), RecordState::Recorded { seq } if seq < host_fn_seq))
    }

    /// Inside a host function of another stream: whether this event's work could wait for
    /// work queued after that host function.
    fn waits_for_running_host_fn(&self) -> bool {
        if running_host_fn().is_none() {
            return false;
        }
        let limit = match &*lock(&self.state) {
            RecordState::Pending => u64::MAX,
            RecordState::Recorded { seq } => *seq,
            RecordState::Lost(_) => return false,
        };
        self.origin
            .upgrade()
            .is_some_and(|origin| host_fn_would_wait_for_itself(&origin, limit))
    }

    /// `true` when the recorded work is complete.
    pub(crate) fn query(&self) -> Result<bool> {
        if self.complete.load(Ordering::Acquire) {
            return Ok(true);
        }
        if let Some(before) = self.before_running_host_fn() {
            return Ok(before);
        }
        if self.runtime.table().query_event.is_none() && self.waits_for_running_host_fn() {
            // Without query_event the answer would come from synchronize_event, waiting for
            // the calling host function: the event is not complete.
            return Ok(false);
        }
        match &*lock(&self.state) {
            RecordState::Pending => return Ok(false),
            RecordState::Lost(error) => return Err(error.clone()),
            RecordState::Recorded { .. } => {}
        }
        let done = self.runtime.query_event(self.slot, self.handle)?;
        if done {
            self.complete.store(true, Ordering::Release);
        }
        Ok(done)
    }

    /// Blocks until the recorded work is complete. Inside a host function of the same stream
    /// it never waits for work queued after that host function: that is a typed error.
    pub(crate) fn synchronize(&self) -> Result<()> {
        if self.complete.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.before_running_host_fn() {
            Some(true) => return Ok(()),
            Some(false) => return Err(waits_for_itself("Event::synchronize", self.stream)),
            None => {
                if self.waits_for_running_host_fn() {
                    return Err(waits_for_itself("Event::synchronize", self.stream));
                }
            }
        }
        self.wait_complete()
    }

    /// Whether [`EventRecord::synchronize`] would block now, answered without blocking: not
    /// where the work is known complete, nor where `synchronize` answers at once inside a host
    /// function; otherwise the plug-in is asked with `query_event`, and a plug-in without it
    /// counts as blocking.
    pub(crate) fn synchronize_would_block(&self) -> bool {
        if self.complete.load(Ordering::Acquire)
            || self.before_running_host_fn().is_some()
            || self.waits_for_running_host_fn()
        {
            return false;
        }
        self.runtime.table().query_event.is_none() || self.settle().is_none()
    }

    /// Blocks until the record reaches the plug-in, then until the recorded work is complete
    /// (the caller checked that this cannot wait for the calling host function).
    pub(super) fn wait_complete(&self) -> Result<()> {
        match self.wait_submitted() {
            RecordState::Lost(error) => Err(error),
            _ => {
                self.runtime.synchronize_event(self.slot, self.handle)?;
                self.complete.store(true, Ordering::Release);
                Ok(())
            }
        }
    }

    /// A completion of this record is awaited: a nudge goes before the record if it has not
    /// reached the plug-in yet, and before the later records of devstream events on its stream.
    pub(crate) fn completion_awaited(&self) {
        self.nudge_before.store(true, Ordering::Release);
        if let Some(origin) = self.origin.upgrade() {
            origin.mark_watched();
        }
    }

    /// For the completion notifier: `Some(result)` once the recorded work is complete (or its
    /// record failed), `None` while it is not (or cannot be asked now). Never blocks where the
    /// plug-in has `query_event`.
    pub(crate) fn settle(&self) -> Option<Result<()>> {
        if self.complete.load(Ordering::Acquire) {
            return Some(Ok(()));
        }
        match &*lock(&self.state) {
            RecordState::Pending => return None,
            RecordState::Lost(error) => return Some(Err(error.clone())),
            RecordState::Recorded { .. } => {}
        }
        // As the reaper: no capture begins between the check and the question (only where
        // the question cannot block: a capture must never wait for stream work).
        let _gate = self
            .runtime
            .table()
            .query_event
            .is_some()
            .then(crate::capture::reaping);
        if self.question_breaks_a_capture() {
            // A question now may invalidate a capture in progress: ask again after it. Except
            // where the record's own stream captures now and the nudge before the record has
            // run: the work the record stands for is done, so it completes unasked (a stream
            // that waits for it must not wait for the capture's end, which the thread that
            // waits may be the one to bring). Not for a capture elsewhere (a `Global` one):
            // the plug-in marks the record done only after the nudge returned, and once that
            // capture ends a query of the stream could still answer false right after the
            // completion was ready; while the stream itself captures, no query answers.
            if self.nudge_reached() && self.stream_captures() {
                self.complete.store(true, Ordering::Release);
                return Some(Ok(()));
            }
            return None;
        }
        if self.captured_in().is_some() {
            // Recorded into a capture that has ended: it stands for no work of its own.
            return Some(Ok(()));
        }
        match self.runtime.query_event(self.slot, self.handle) {
            Ok(true) => {
                self.complete.store(true, Ordering::Release);
                Some(Ok(()))
            }
            Ok(false) => None,
            Err(error) => Some(Err(error)),
        }
    }

    /// Whether the stream this event was recorded on captures now (or cannot be asked).
    fn stream_captures(&self) -> bool {
        self.origin
            .upgrade()
            .is_some_and(|core| !matches!(crate::capture::capturing(&core), Ok(Capturing::No)))
    }

    /// Whether the nudge put before this record has run: the stream's work before the record
    /// is done (the record itself is marked done by the plug-in once the nudge returned).
    fn nudge_reached(&self) -> bool {
        self.nudge_reached
            .get()
            .is_some_and(|reached| reached.load(Ordering::Acquire))
    }

    /// Complete, without blocking where the plug-in can answer without blocking.
    pub(super) fn settled_for_reaper(&self) -> Settled {
        if self.complete.load(Ordering::Acquire) {
            return Settled::Complete;
        }
        if self.question_breaks_a_capture() {
            return Settled::NotYet;
        }
        if self.captured_in().is_some() {
            // Recorded into a capture that has ended: it stands for no work of its own (what
            // the capture holds is kept by the graph); never asked about.
            return Settled::Complete;
        }
        match &*lock(&self.state) {
            RecordState::Pending => return Settled::NotYet,
            RecordState::Lost(_) => return Settled::Unknown,
            RecordState::Recorded { .. } => {}
        }
        let done = if self.runtime.table().query_event.is_some() {
            self.runtime.query_event(self.slot, self.handle)
        } else {
            self.runtime
                .synchronize_event(self.slot, self.handle)
                .map(|()| true)
        };
        match done {
            Ok(true) => {
                self.complete.store(true, Ordering::Release);
                Settled::Complete
            }
            Ok(false) => Settled::NotYet,
            Err(error) => {
                tracing::warn!("devstream-plugin: asking whether an event is complete: {error}");
                Settled::Unknown
            }
        }
    }
}

/// Whether a question about an event (query, synchronize) from a thread that captures
/// nothing may break a capture in progress, by CUDA's rules, which a plug-in's runtime may
/// enforce by refusing the question and invalidating the capture:
/// * the event was recorded into a capture that is still in progress
///   (`CUDA_ERROR_CAPTURED_EVENT`);
/// * the stream it was recorded on is capturing now (also `CUDA_ERROR_CAPTURED_EVENT`: seen on
///   an H100 for the marker recorded just before a capture began);
/// * a `Global`-mode capture is in progress anywhere ([`crate::capture::forbids_other_threads`]).
///
/// Cheap while no capture is in progress.
pub(super) fn question_breaks_a_capture(
    runtime: &LoadedPlugin,
    origin: &Weak<StreamCore>,
    captured: Option<u64>,
) -> bool {
    if !crate::capture::any_active(runtime.index()) {
        return crate::capture::forbids_other_threads();
    }
    if captured.is_some_and(|id| crate::capture::find(runtime.index(), id).is_some()) {
        return true;
    }
    if crate::capture::forbids_other_threads() {
        return true;
    }
    origin
        .upgrade()
        .is_some_and(|core| !matches!(crate::capture::capturing(&core), Ok(Capturing::No)))
}

impl Drop for EventRecord {
    fn drop(&mut self) {
        let recorded = matches!(*lock(&self.state), RecordState::Recorded { .. })
            && !self.complete.load(Ordering::Acquire);
        reap(Job::DestroyEvent {
            runtime: self.runtime.clone(),
            slot: self.slot,
            handle: self.handle,
            submitted: recorded,
            origin: self.origin.clone(),
            captured: self.captured_in(),
        });
    }
}
