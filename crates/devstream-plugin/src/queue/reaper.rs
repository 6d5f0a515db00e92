//! The reaper thread: releases plug-in objects (events, streams, memory, whatever a release
//! keeps alive) once the work that uses them is complete, so dropping a handle never blocks and
//! devstream never calls the plug-in from inside one of its callbacks. Jobs not yet done are
//! retried with a backoff; a job waits while a capture in progress would be broken by its
//! questions, and a job that may block in the plug-in runs outside the capture gate.

use super::record::{question_breaks_a_capture, Settled};
use super::EventRecord;
use super::StreamCore;
use super::{lock, start_thread};
use crate::runtime::{Handle, LoadedPlugin};
use devstream_core::panic::drop_payload;
use devstream_core::{Error, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Something to release once the work it depends on is complete.
pub(crate) enum Job {
    /// Destroy a plug-in event once it is complete.
    DestroyEvent {
        runtime: Arc<LoadedPlugin>,
        slot: usize,
        handle: Handle,
        submitted: bool,
        /// The stream it was recorded on.
        origin: Weak<StreamCore>,
        /// The capture its last record went into: destroyed once that capture ended, without
        /// a question to the plug-in.
        captured: Option<u64>,
    },
    /// Record an event at the end of a dropped stream, then destroy the stream once that
    /// event is complete.
    RetireStream {
        runtime: Arc<LoadedPlugin>,
        slot: usize,
        handle: Handle,
        last: Option<Handle>,
    },
    /// Run `then` once every event is complete.
    After {
        events: Vec<Arc<EventRecord>>,
        then: Box<dyn FnOnce() + Send>,
    },
    /// Record an event on each stream, then run `then` once they are all complete.
    AfterStreams {
        streams: Vec<Arc<StreamCore>>,
        then: Box<dyn FnOnce() + Send>,
    },
}

/// Logs a failed cleanup call (a release goes on regardless).
fn warn(what: &str, result: Result<()>) {
    if let Err(error) = result {
        tracing::warn!("devstream-plugin: {what}: {error}");
    }
}

/// Whether the work before `event` is over, so that what it used may be released: asked
/// without blocking where the plug-in has `query_event` (`false`: not yet, ask again later; a
/// failed question tells no more later, so it counts as over), else waited for with
/// `synchronize_event` (a failure is logged as `synchronize_call`).
fn work_is_over(
    runtime: &LoadedPlugin,
    slot: usize,
    event: Handle,
    synchronize_call: &str,
) -> bool {
    if runtime.table().query_event.is_some() {
        !matches!(runtime.query_event(slot, event), Ok(false))
    } else {
        warn(synchronize_call, runtime.synchronize_event(slot, event));
        true
    }
}

impl Job {
    /// Whether a capture in progress holds the job back until it ends:
    /// * a `Global`-mode one anywhere: the job's queries, synchronizations, records and
    ///   destroys are "unsafe" calls to it from another thread (CUDA's rule, which a plug-in's
    ///   own runtime may enforce by invalidating the capture);
    /// * for an event to destroy or wait for: any capture that a question about it would break
    ///   ([`question_breaks_a_capture`]);
    /// * for retiring a dropped stream: any capture of its plug-in (the stream may have joined
    ///   it, and the event recorded at its end would then be a captured one).
    fn held_by_a_capture(&self) -> bool {
        match self {
            Job::DestroyEvent {
                runtime,
                origin,
                captured,
                ..
            } => question_breaks_a_capture(runtime, origin, *captured),
            Job::RetireStream { runtime, .. } => {
                crate::capture::forbids_other_threads()
                    || crate::capture::any_active(runtime.index())
            }
            Job::After { events, .. } => events.iter().any(|e| e.question_breaks_a_capture()),
            Job::AfterStreams { .. } => crate::capture::forbids_other_threads(),
        }
    }

    /// Whether advancing the job may block in the plug-in: it synchronizes where the plug-in
    /// has no `query_event`.
    fn may_block(&self) -> bool {
        let blocks = |runtime: &LoadedPlugin| runtime.table().query_event.is_none();
        match self {
            Job::DestroyEvent { runtime, .. } | Job::RetireStream { runtime, .. } => {
                blocks(runtime)
            }
            Job::After { events, .. } => events.iter().any(|e| blocks(&e.runtime)),
            Job::AfterStreams { streams, .. } => streams.iter().any(|c| blocks(&c.runtime)),
        }
    }

    /// Advances the job; `None` when it is done, `Some(self)` to try again later.
    fn advance(self) -> Option<Job> {
        if self.held_by_a_capture() {
            return Some(self);
        }
        match self {
            Job::DestroyEvent {
                ref runtime,
                slot,
                handle,
                submitted,
                captured,
                ..
            } => {
                // A captured event stands for no work (its capture has ended: see
                // `held_by_a_capture`): destroyed without a question.
                let submitted = submitted && captured.is_none();
                if submitted
                    && !work_is_over(runtime, slot, handle, "synchronize_event before destroy")
                {
                    return Some(self);
                }
                warn("destroy_event", runtime.destroy_event(slot, handle));
                None
            }
            Job::RetireStream {
                runtime,
                slot,
                handle,
                last: None,
            } => {
                let recorded = runtime.create_event(slot).and_then(|event| {
                    match runtime.record_event(slot, handle, event) {
                        Ok(()) => Ok(event),
                        Err(error) => {
                            warn("destroy_event", runtime.destroy_event(slot, event));
                            Err(error)
                        }
                    }
                });
                match recorded {
                    Ok(event) => Job::RetireStream {
                        runtime,
                        slot,
                        handle,
                        last: Some(event),
                    }
                    .advance(),
                    Err(error) => {
                        tracing::warn!(
                            "devstream-plugin: recording the end of a dropped stream: {error}"
                        );
                        warn(
                            "synchronize_stream",
                            runtime.synchronize_stream(slot, handle),
                        );
                        warn("destroy_stream", runtime.destroy_stream(slot, handle));
                        None
                    }
                }
            }
            Job::RetireStream {
                ref runtime,
                slot,
                handle,
                last: Some(event),
            } => {
                if !work_is_over(runtime, slot, event, "synchronize_event") {
                    return Some(self);
                }
                warn("destroy_event", runtime.destroy_event(slot, event));
                warn("destroy_stream", runtime.destroy_stream(slot, handle));
                None
            }
            Job::After { events, then } => {
                let mut unknown = false;
                for event in &events {
                    match event.settled_for_reaper() {
                        Settled::Complete => {}
                        Settled::NotYet => return Some(Job::After { events, then }),
                        Settled::Unknown => unknown = true,
                    }
                }
                drop(events);
                if unknown {
                    tracing::warn!(
                        "devstream-plugin: an event's record failed, so when its work is done \
                         cannot be known: leaking what that work uses"
                    );
                    std::mem::forget(then);
                } else {
                    if let Err(payload) = catch_unwind(AssertUnwindSafe(then)) {
                        drop_payload(payload);
                    }
                }
                None
            }
            Job::AfterStreams { streams, then } => {
                let mut events = Vec::with_capacity(streams.len());
                let mut unknown = false;
                for core in &streams {
                    match core.release_marker() {
                        Ok(raw) => events.push(raw),
                        Err(error @ Error::Capture { .. }) => {
                            // Synchronizing a capturing stream would break its capture.
                            tracing::warn!("devstream-plugin: before a release: {error}");
                            unknown = true;
                        }
                        Err(error) => {
                            tracing::warn!("devstream-plugin: recording before a release: {error}");
                            if let Err(error) = core.runtime.synchronize_stream(core.slot, core.raw)
                            {
                                tracing::warn!("devstream-plugin: synchronize_stream: {error}");
                                unknown = true;
                            }
                        }
                    }
                }
                drop(streams);
                if unknown {
                    tracing::warn!(
                        "devstream-plugin: when a stream's work is done cannot be known: \
                         leaking what it uses"
                    );
                    std::mem::forget(then);
                    return None;
                }
                Job::After { events, then }.advance()
            }
        }
    }
}

fn reaper() -> &'static Mutex<Option<Sender<Job>>> {
    static REAPER: OnceLock<Mutex<Option<Sender<Job>>>> = OnceLock::new();
    REAPER.get_or_init(|| start_thread("reaper", run_reaper))
}

/// Hands `job` to the reaper thread (never blocks).
pub(crate) fn reap(job: Job) {
    let sender = lock(reaper()).clone();
    match sender {
        Some(sender) => {
            if let Err(returned) = sender.send(job) {
                // No reaper: leak rather than block or free what may be in use.
                std::mem::forget(returned.0);
            }
        }
        None => std::mem::forget(job),
    }
}

fn run_reaper(jobs: Receiver<Job>) {
    let mut pending: Vec<Job> = Vec::new();
    let mut pause = Duration::from_micros(200);
    loop {
        let next = if pending.is_empty() {
            jobs.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            jobs.recv_timeout(pause)
        };
        match next {
            Ok(job) => {
                pending.push(job);
                while let Ok(job) = jobs.try_recv() {
                    pending.push(job);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let before = pending.len();
        pending = pending
            .into_iter()
            .filter_map(|job| {
                // A job that may block (a plug-in without `query_event` is synchronized) runs
                // outside the gate: a capture must never wait for stream work.
                let _gate = (!job.may_block()).then(crate::capture::reaping);
                job.advance()
            })
            .collect();
        pause = if pending.len() < before {
            Duration::from_micros(200)
        } else {
            (pause * 2).min(Duration::from_millis(20))
        };
    }
}
