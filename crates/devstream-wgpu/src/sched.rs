//! The submission scheduler of one device: every logical stream's pending encoder and the work
//! it holds back, and the one place where work reaches the queue.
//!
//! A stream's work is encoded into its pending encoder. At a flush the encoder becomes a batch:
//! submitted at once when the stream holds nothing back, else appended to the stream's `held`
//! queue behind its gates. Gates are released in stream order by whoever holds the scheduler
//! lock (mostly the device's poller thread):
//!
//! * `WaitRecord`: a same-device event whose work is not yet submitted; released once it is
//!   (queue order then does the rest).
//! * `WaitForeign`: an event of another wgpu device; released once it has completed.
//! * `WaitFlag`: released once the flag's value is ≥ the one given.
//! * `HostFunc`, `WriteFlag`, `Upload`: run once all earlier work of the stream is complete.
//! * `Mark`: resolves an event recorded while the stream held work back.
//!
//! Once the device has a fault (it was lost), nothing more is released: each stream's held work
//! is dropped unrun (host functions and flag writes included, as CUDA skips host functions after
//! a context error), its events resolve with the fault, and its error is the fault. A stream
//! that waits on an event of another device that was lost gets that fault as its error, and
//! its host functions and flag writes are dropped until `synchronize` reports it.
//!
//! Every queue submission happens under the scheduler lock, so the queue order is the order in
//! which the scheduler decided to release work, which respects every stream's order and every
//! wait edge.

use crate::buffer::{HostInner, Readback};
use crate::device::{DeviceShared, Ticket, LIVE_STREAMS};
use crate::event::Record;
use crate::flag::FlagInner;
use crate::graph::SharedSession;
use crate::hostfn::InHostFunc;
use crate::util::lock;
use devstream_core::host_fn_access::QueuedCopy;
use devstream_core::panic::drop_contained;
use devstream_core::selfwait::{self, Reach};
use devstream_core::{Error, HostFn};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Work to do right after a batch is submitted (it needs the submission's ticket).
pub(crate) enum AfterSubmit {
    /// Map a readback buffer once the submission completes.
    Map {
        readback: Arc<Readback>,
        /// The copy's registration with the host buffer it lands in (`None`: a readback of
        /// devstream's own, such as a timestamp): ends once mapped, or when dropped unsubmitted.
        landing: Option<QueuedCopy>,
    },
}

/// A finished command buffer and what to do once it is submitted.
pub(crate) struct Batch {
    pub(crate) commands: wgpu::CommandBuffer,
    pub(crate) after: Vec<AfterSubmit>,
}

/// A deferred host→device copy from a host buffer that device→host copies were still writing
/// when it was enqueued: staged once the stream's earlier work is complete.
pub(crate) struct Upload {
    pub(crate) host: Arc<HostInner>,
    pub(crate) host_offset: usize,
    pub(crate) dst: Arc<crate::buffer::BufferInner>,
    pub(crate) dst_offset: u64,
    pub(crate) len: u64,
    /// Its registration as a queued copy of `host` (`HostInner::begin_upload`): ends when the
    /// upload has read the bytes or is dropped unrun.
    pub(crate) _reading: QueuedCopy,
}

/// Something a stream holds back, in stream order.
pub(crate) enum Held {
    Batch(Batch),
    Mark(Arc<Record>),
    WaitRecord(Arc<Record>),
    WaitForeign(Arc<Record>),
    WaitFlag(Arc<FlagInner>, u32),
    /// The result of another backend's work the stream waited for (behind the `WaitFlag` that
    /// held it until that work completed): an error becomes the stream's error.
    Foreign(Arc<devstream_core::foreign::ForeignOutcome>),
    HostFunc(HostFn),
    WriteFlag(Arc<FlagInner>, u32),
    Upload(Upload),
    /// A host function taken out to run on a runner thread.
    Running,
}

/// One logical stream's scheduling state.
#[derive(Default)]
pub(crate) struct StreamState {
    pub(crate) encoder: Option<wgpu::CommandEncoder>,
    pub(crate) after: Vec<AfterSubmit>,
    pub(crate) held: VecDeque<Held>,
    /// The ticket whose completion means all released work of the stream is done.
    pub(crate) frontier: Option<Ticket>,
    /// The first error the stream's work raised.
    pub(crate) error: Option<Error>,
    /// The capture this stream is a member of (origin or joined), if any.
    pub(crate) capture: Option<SharedSession>,
    /// The last handle is gone: remove once drained and complete.
    pub(crate) orphaned: bool,
    /// Counted in `live_counts` (user streams, not the default stream).
    pub(crate) counted: bool,
    /// The stream waited on work of another device that was lost: its host functions and flag
    /// writes are dropped until `synchronize` reports the error.
    pub(crate) behind_lost_work: bool,
}

impl StreamState {
    pub(crate) fn set_error(&mut self, error: Error) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Raises the frontier to `ticket` (tickets of one device are ordered by `seq`).
    pub(crate) fn raise_frontier(&mut self, ticket: Option<&Ticket>) {
        if let Some(t) = ticket {
            if self.frontier.as_ref().is_none_or(|f| f.seq < t.seq) {
                self.frontier = Some(t.clone());
            }
        }
    }

    /// The stream's pending encoder, created on first use.
    pub(crate) fn encoder(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        self.encoder.get_or_insert_with(|| {
            // Labelled in debug builds only: wgpu copies a label into a new `String` for every
            // encoder, one allocation per flush that release builds skip.
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: cfg!(debug_assertions).then_some("devstream stream"),
            })
        })
    }
}

/// The scheduler of one device.
#[derive(Default)]
pub(crate) struct Sched {
    /// The last ticket sequence number handed out.
    pub(crate) last_seq: u64,
    /// By stream id. Ids are devstream's own counters, so the map hashes them with FxHash
    /// rather than SipHash: every operation looks its stream up several times, and SipHash would
    /// be a large part of a record+query.
    /// Each stream's state boxed: the table holds 16-byte entries, so that with 100,000 live
    /// streams the look-ups of the few busy ones touch a compact table and their own states,
    /// not a table of states hundreds of bytes each spread over tens of MiB (bench-scale).
    pub(crate) streams: HashMap<u64, Box<StreamState>, BuildHasherDefault<rustc_hash::FxHasher>>,
    /// Streams the poller must look at: they hold work back, or are orphaned and not complete.
    pub(crate) watched: BTreeSet<u64>,
}

/// What the poller should do next.
pub(crate) enum Step {
    /// Something was released or run: look again at once.
    Progress,
    /// Wait (a slice) for this device's ticket.
    WaitLocal(Ticket),
    /// Wait (a slice) for another device's ticket; the local ticket, if any, is polled too.
    WaitForeign(Arc<DeviceShared>, Ticket, Option<Ticket>),
    /// Nothing to poll: wait for a signal (`timed`: at most a slice, because something outside
    /// this device's signal, such as another device's release, is awaited).
    Idle { timed: bool },
}

/// Submits one command buffer to the queue. Must be called under the scheduler lock, which
/// makes queue order equal to scheduling order.
pub(crate) fn submit_locked(
    device: &DeviceShared,
    last_seq: &mut u64,
    batch: Batch,
) -> (Ticket, Option<Error>) {
    let Batch { commands, after } = batch;
    let index = catch_unwind(AssertUnwindSafe(|| device.queue.submit([commands])));
    let mut failure = None;
    let index = match index {
        Ok(index) => index,
        Err(payload) => {
            let error = Error::Driver {
                backend: "wgpu",
                call: "Queue::submit",
                code: 0,
                message: devstream_core::panic::take_message(payload),
            };
            device.set_fault(error.clone());
            failure.get_or_insert(error);
            // Nothing was submitted: wait for an empty submission instead.
            device.queue.submit([])
        }
    };
    *last_seq += 1;
    let ticket = Ticket {
        seq: *last_seq,
        index,
    };
    // Completion is noted when the device is next polled (any poll: the poller thread's, a
    // query's, a wait's), so a query can ask with a plain `Poll` instead of a zero-timeout
    // wait. Registered under the scheduler lock right after our submit; a submission of
    // someone else's in between only makes the note later, never early.
    let note = Arc::clone(&device.note);
    let seq = ticket.seq;
    let _ = catch_unwind(AssertUnwindSafe(|| {
        device.queue.on_submitted_work_done(move || note.noted(seq))
    }));
    // The submit ran the callbacks of earlier submissions that completed meanwhile.
    device.note.publish();
    for action in after {
        match action {
            AfterSubmit::Map { readback, landing } => {
                readback.submitted(&ticket, &device.signal, landing)
            }
        }
    }
    (ticket, failure)
}

/// Finishes the stream's pending encoder: submits it when the stream holds nothing back, else
/// holds it behind the stream's gates. `force` submits an empty command buffer when nothing is
/// pending.
pub(crate) fn flush_locked(device: &DeviceShared, sched: &mut Sched, id: u64, force: bool) {
    let Sched {
        last_seq, streams, ..
    } = sched;
    let Some(state) = streams.get_mut(&id) else {
        return;
    };
    if state.encoder.is_none() && !(force && state.held.is_empty()) {
        return;
    }
    let encoder = match state.encoder.take() {
        Some(encoder) => encoder,
        None => device
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default()),
    };
    let after = std::mem::take(&mut state.after);
    let commands = encoder.finish();
    let batch = Batch { commands, after };
    if state.held.is_empty() {
        let (ticket, error) = submit_locked(device, last_seq, batch);
        if let Some(e) = error {
            state.set_error(e);
        }
        state.frontier = Some(ticket);
    } else {
        state.held.push_back(Held::Batch(batch));
    }
}

/// Appends a gate (or any held item) to a stream and makes the poller look at it.
pub(crate) fn hold_locked(device: &DeviceShared, sched: &mut Sched, id: u64, item: Held) {
    if let Some(state) = sched.streams.get_mut(&id) {
        state.held.push_back(item);
        sched.watched.insert(id);
        device.work.notify();
    }
}

/// What releasing one stream produced.
enum Released {
    Nothing,
    Progress,
    /// A host function to run outside the lock.
    Run(HostFn),
}

#[derive(Default)]
struct Needs {
    local: Option<Ticket>,
    foreign: Option<(Arc<DeviceShared>, Ticket)>,
    timed: bool,
}

impl Needs {
    fn local(&mut self, ticket: Option<&Ticket>) {
        if let Some(t) = ticket {
            if self.local.as_ref().is_none_or(|l| t.seq < l.seq) {
                self.local = Some(t.clone());
            }
        }
    }
}

/// Releases what it can of stream `id`, in order.
fn release_stream(
    device: &DeviceShared,
    sched: &mut Sched,
    id: u64,
    needs: &mut Needs,
) -> Released {
    let Sched {
        last_seq,
        streams,
        watched,
    } = sched;
    let Some(state) = streams.get_mut(&id) else {
        watched.remove(&id);
        return Released::Nothing;
    };
    if let Some(fault) = device.fault() {
        let progressed = drop_held(state, &fault);
        if state.held.is_empty() {
            if state.orphaned {
                // Its work will never complete: nothing is left to wait for.
                if state.counted {
                    LIVE_STREAMS.fetch_sub(1, Ordering::SeqCst);
                }
                streams.remove(&id);
            }
            watched.remove(&id);
        }
        return if progressed {
            Released::Progress
        } else {
            Released::Nothing
        };
    }
    let mut progressed = false;
    while let Some(head) = state.held.front_mut() {
        match head {
            Held::Batch(_) => {
                let Some(Held::Batch(batch)) = state.held.pop_front() else {
                    unreachable_held();
                    break;
                };
                let (ticket, error) = submit_locked(device, last_seq, batch);
                if let Some(e) = error {
                    state.set_error(e);
                }
                state.frontier = Some(ticket);
            }
            Held::Mark(record) => {
                record.resolve(state.frontier.clone(), state.error.clone());
                state.held.pop_front();
            }
            Held::WaitRecord(record) => match record.ticket() {
                Some(ticket) => {
                    state.raise_frontier(ticket.as_ref());
                    state.held.pop_front();
                }
                None => break,
            },
            Held::WaitForeign(record) => match record.ticket() {
                Some(ticket) if record.device.is_complete(ticket.as_ref()) => {
                    state.held.pop_front();
                }
                _ if record.device.fault.is_set() => {
                    // The awaited work will never run: the wait ends with its device's fault.
                    if let Some(fault) = record.device.fault() {
                        state.set_error(fault);
                    }
                    state.behind_lost_work = true;
                    state.held.pop_front();
                }
                Some(Some(ticket)) => {
                    if needs.foreign.is_none() {
                        needs.foreign = Some((Arc::clone(&record.device), ticket));
                    }
                    needs.timed = true;
                    break;
                }
                _ => {
                    needs.timed = true;
                    break;
                }
            },
            Held::WaitFlag(flag, value) => {
                if flag.value.load(Ordering::SeqCst) >= *value {
                    state.held.pop_front();
                } else {
                    break;
                }
            }
            Held::Foreign(outcome) => {
                if let Err(error) = outcome.result() {
                    state.set_error(error);
                }
                state.held.pop_front();
            }
            Held::HostFunc(_) | Held::WriteFlag(..) | Held::Upload(_) => {
                if !device.is_complete(state.frontier.as_ref()) {
                    needs.local(state.frontier.as_ref());
                    break;
                }
                match state.held.pop_front() {
                    Some(Held::HostFunc(f)) if state.behind_lost_work => {
                        drop_contained(f);
                    }
                    Some(Held::HostFunc(f)) => {
                        state.held.push_front(Held::Running);
                        return Released::Run(f);
                    }
                    Some(Held::WriteFlag(..)) if state.behind_lost_work => {}
                    Some(Held::WriteFlag(flag, value)) => flag.store(value),
                    Some(Held::Upload(upload)) => {
                        if let Some(upload) =
                            crate::buffer::run_upload(device, last_seq, state, upload)
                        {
                            // A device→host copy it reads is complete but not mapped yet.
                            state.held.push_front(Held::Upload(upload));
                            needs.timed = true;
                            break;
                        }
                    }
                    _ => unreachable_held(),
                }
            }
            Held::Running => return Released::Nothing,
        }
        progressed = true;
    }
    if state.held.is_empty() {
        if state.orphaned {
            if device.is_complete(state.frontier.as_ref()) {
                if state.counted {
                    LIVE_STREAMS.fetch_sub(1, Ordering::SeqCst);
                }
                streams.remove(&id);
                watched.remove(&id);
                return Released::Progress;
            }
            needs.local(state.frontier.as_ref());
        } else {
            watched.remove(&id);
        }
    }
    if progressed {
        Released::Progress
    } else {
        Released::Nothing
    }
}

/// For the relay of a wait across backends (`stream::foreign`): releases stream `id`'s held
/// work on the calling thread while it is host-side bookkeeping only (a flag wait already
/// passed, such as the wait's own gate; a wait's outcome; a flag write whose earlier work is
/// complete) and hands a host function that follows to a runner thread, so that the work right
/// behind the wait follows the awaited work without a wake of the poller in between.
/// Submissions, marks and uploads stay for the poller (the relay wakes it afterwards). The relay
/// runs inside another backend's completion path, so this never waits: with the scheduler lock
/// held elsewhere, or the device lost, it does nothing.
pub(crate) fn release_on_relay(device: &Arc<DeviceShared>, id: u64) {
    let mut sched = match device.sched.try_lock() {
        Ok(sched) => sched,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    if device.fault.is_set() {
        return;
    }
    let Some(state) = sched.streams.get_mut(&id) else {
        return;
    };
    let mut progressed = false;
    while let Some(head) = state.held.front() {
        match head {
            Held::WaitFlag(flag, value) if flag.value.load(Ordering::SeqCst) >= *value => {}
            Held::Foreign(outcome) => {
                if let Err(error) = outcome.result() {
                    state.set_error(error);
                }
            }
            Held::WriteFlag(flag, value)
                if !state.behind_lost_work && device.is_complete(state.frontier.as_ref()) =>
            {
                flag.store(*value);
            }
            Held::HostFunc(_)
                if !state.behind_lost_work && device.is_complete(state.frontier.as_ref()) =>
            {
                let Some(Held::HostFunc(f)) = state.held.pop_front() else {
                    unreachable_held();
                    break;
                };
                state.held.push_front(Held::Running);
                progressed = true;
                if let Err(f) = device.runners.submit(device, id, f) {
                    // No runner thread could be started: the poller runs it.
                    state.held.pop_front();
                    state.held.push_front(Held::HostFunc(f));
                }
                break;
            }
            _ => break,
        }
        state.held.pop_front();
        progressed = true;
    }
    drop(sched);
    if progressed {
        // Waiters for the stream's held work (its synchronize, waits on its events).
        device.signal.notify();
    }
}

/// Drops the held work of a stream whose device has `fault`, up to a host function that is
/// running (it ends on its own; the rest goes when it does): nothing of it runs, events
/// recorded behind it resolve with the fault, and the fault becomes the stream's error.
/// Returns whether anything was dropped.
fn drop_held(state: &mut StreamState, fault: &Error) -> bool {
    state.set_error(fault.clone());
    let mut dropped = false;
    while let Some(item) = state.held.pop_front() {
        match item {
            Held::Running => {
                state.held.push_front(Held::Running);
                break;
            }
            Held::Mark(record) => record.resolve(state.frontier.clone(), Some(fault.clone())),
            Held::HostFunc(f) => {
                drop_contained(f);
            }
            // Writers of the host buffer wait for the upload to have read it.
            Held::Upload(upload) => upload.host.end_upload(),
            Held::Batch(_)
            | Held::WaitRecord(_)
            | Held::WaitForeign(_)
            | Held::WaitFlag(..)
            | Held::Foreign(_)
            | Held::WriteFlag(..) => {}
        }
        dropped = true;
    }
    dropped
}

/// The held queue's head was matched just above, so it is there; this only documents that.
fn unreachable_held() {
    debug_assert!(false, "held queue head changed under the scheduler lock");
}

/// One pass of the poller: releases every stream it can, runs at most one host function.
pub(crate) fn step(device: &Arc<DeviceShared>) -> Step {
    // Before the scheduler lock is taken: it may poll the device, which runs callbacks.
    let landings = crate::landing::drive(device);
    let mut sched = lock(&device.sched);
    if sched.watched.is_empty() && landings.wait.is_none() && !landings.progressed {
        return Step::Idle {
            timed: landings.timed,
        };
    }
    let mut needs = Needs {
        timed: landings.timed,
        ..Needs::default()
    };
    needs.local(landings.wait.as_ref());
    let mut progressed = landings.progressed;
    let ids: Vec<u64> = sched.watched.iter().copied().collect();
    for id in ids {
        match release_stream(device, &mut sched, id, &mut needs) {
            Released::Nothing => {}
            Released::Progress => progressed = true,
            Released::Run(f) => {
                // A runner thread runs it; the poller goes on releasing the other streams.
                if let Err(f) = device.runners.submit(device, id, f) {
                    // No runner thread could be started: run it here, as a last resort.
                    drop(sched);
                    run_host_func(device, id, f);
                    return Step::Progress;
                }
                progressed = true;
            }
        }
    }
    drop(sched);
    if progressed {
        device.signal.notify();
        return Step::Progress;
    }
    match (needs.foreign, needs.local) {
        (Some((foreign, ticket)), local) => Step::WaitForeign(foreign, ticket, local),
        (None, Some(local)) => Step::WaitLocal(local),
        (None, None) => Step::Idle { timed: needs.timed },
    }
}

/// Runs a host function of stream `id` (outside the scheduler lock, on a runner thread), then
/// lets the stream go on: its next work is released here, and its next host function, when it
/// is ready at once, runs here too. Every panic is caught: in the call, in the closure's `Drop`
/// and in the `Drop` of either panic's payload (payloads go through `devstream_core::panic::drop_payload`).
pub(crate) fn run_host_func(device: &Arc<DeviceShared>, id: u64, mut f: HostFn) {
    loop {
        let panicked = if device.fault.is_set() {
            // Released just before the device was lost: it does not run either.
            drop_contained(f)
        } else {
            let _running = InHostFunc::enter(device, id);
            let ran = catch_unwind(AssertUnwindSafe(&mut f))
                .err()
                .map(devstream_core::panic::take_message);
            let dropped = drop_contained(f);
            ran.or(dropped)
        };
        let mut sched = lock(&device.sched);
        let mut next = None;
        if let Some(state) = sched.streams.get_mut(&id) {
            if matches!(state.held.front(), Some(Held::Running)) {
                state.held.pop_front();
            }
            if let Some(message) = panicked {
                state.set_error(Error::HostFuncPanicked {
                    stream: id,
                    message,
                });
            }
            if let Released::Run(f) = release_stream(device, &mut sched, id, &mut Needs::default())
            {
                next = Some(f);
            }
        }
        drop(sched);
        // Waiters, and the poller: other streams may wait on what was just released.
        device.signal.notify();
        device.work.notify();
        match next {
            Some(g) => f = g,
            None => return,
        }
    }
}

/// What a wait made from inside a host function is for.
#[derive(Clone, Copy)]
pub(crate) enum Awaited<'a> {
    /// Everything queued on a stream so far.
    Stream(u64),
    /// The work an event recording captured (held back as a `Mark` while unresolved).
    Record(&'a Record),
    /// A device→host copy.
    Readback(&'a Arc<Readback>),
}

/// The host function this thread runs, as `(device, stream)`, when waiting for `what` (of
/// `device`) would wait for work queued after it: that work cannot be released before the host
/// function returns, so the wait would never end. `None` outside host functions (one
/// thread-local read) and when the wait can end.
///
/// "After it" is followed through held work: the host function's own stream from its running
/// host function on, and every stream that waits (`wait_event`, `wait_stream`, on this device
/// or another) on a recording not yet released because it is held behind such work. A wait on
/// a flag is a wait for the host, not followed.
pub(crate) fn waits_behind_host_func(
    device: &Arc<DeviceShared>,
    what: Awaited<'_>,
) -> Option<(Arc<DeviceShared>, u64)> {
    let running = crate::hostfn::running()?;
    behind([Work::Start(device, what)], &running).then_some(running)
}

/// A work the self-wait search looks at: what the call waits for, or a recording it reaches.
enum Work<'a> {
    Start(&'a Arc<DeviceShared>, Awaited<'a>),
    Record(Arc<Record>),
}

impl PartialEq for Work<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Work::Record(a), Work::Record(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// The self-wait search ([`selfwait::reaches_host_fn`]) from `start`: each step locates the work
/// in its stream's held work and follows the unreleased recordings held before it.
fn behind<'a>(
    start: impl IntoIterator<Item = Work<'a>>,
    running: &(Arc<DeviceShared>, u64),
) -> bool {
    selfwait::reaches_host_fn(start, |work| {
        let (device, what) = match work {
            Work::Start(device, what) => (*device, *what),
            Work::Record(record) => (&record.device, Awaited::Record(record)),
        };
        let mut deps = Vec::new();
        let sched = lock(&device.sched);
        let Some((id, end)) = locate(&sched, what) else {
            return Reach::Waits(Vec::new());
        };
        if prefix_blocked(device, &sched, id, end, running, &mut deps) {
            return Reach::HostFn;
        }
        drop(sched);
        Reach::Waits(deps.into_iter().map(Work::Record).collect())
    })
}

/// Where `what` waits in its stream: the stream and how many held items come before it.
fn locate(sched: &Sched, what: Awaited<'_>) -> Option<(u64, usize)> {
    match what {
        Awaited::Stream(id) => sched.streams.get(&id).map(|state| (id, state.held.len())),
        Awaited::Record(record) => sched.streams.iter().find_map(|(id, state)| {
            state
                .held
                .iter()
                .position(|h| matches!(h, Held::Mark(r) if std::ptr::eq(Arc::as_ptr(r), record)))
                .map(|p| (*id, p))
        }),
        Awaited::Readback(readback) => {
            let maps = |after: &[AfterSubmit]| {
                after
                    .iter()
                    .any(|AfterSubmit::Map { readback: r, .. }| Arc::ptr_eq(r, readback))
            };
            let id = readback.stream;
            let state = sched.streams.get(&id)?;
            match state
                .held
                .iter()
                .position(|h| matches!(h, Held::Batch(b) if maps(&b.after)))
            {
                Some(p) => Some((id, p)),
                // Still in the stream's encoder: it joins the end of the held work.
                None if maps(&state.after) => Some((id, state.held.len())),
                None => None,
            }
        }
    }
}

/// Whether the first `end` held items of stream `id` include the running host function; the
/// unreleased recordings they wait on are added to `deps`.
fn prefix_blocked(
    device: &Arc<DeviceShared>,
    sched: &Sched,
    id: u64,
    end: usize,
    running: &(Arc<DeviceShared>, u64),
    deps: &mut Vec<Arc<Record>>,
) -> bool {
    let Some(state) = sched.streams.get(&id) else {
        return false;
    };
    for item in state.held.iter().take(end) {
        match item {
            Held::Running if id == running.1 && Arc::ptr_eq(device, &running.0) => return true,
            Held::WaitRecord(r) | Held::WaitForeign(r) if r.ticket().is_none() => {
                deps.push(Arc::clone(r));
            }
            _ => {}
        }
    }
    false
}

/// Inside a host function: how many deferred uploads from `host` wait behind it on its device,
/// and how many uploads from `host` were in flight then. `None` outside host functions.
pub(crate) fn uploads_behind_host_func(host: &Arc<HostInner>) -> Option<(usize, usize)> {
    let running = crate::hostfn::running()?;
    let device = Arc::clone(&running.0);
    let mut blocked = 0;
    let mut undecided = Vec::new();
    let in_flight;
    {
        let sched = lock(&device.sched);
        in_flight = host.uploads_in_flight();
        for (id, state) in &sched.streams {
            for (p, item) in state.held.iter().enumerate() {
                if matches!(item, Held::Upload(u) if Arc::ptr_eq(&u.host, host)) {
                    let mut deps = Vec::new();
                    if prefix_blocked(&device, &sched, *id, p, &running, &mut deps) {
                        blocked += 1;
                    } else if !deps.is_empty() {
                        undecided.push(deps);
                    }
                }
            }
        }
    }
    for deps in undecided {
        if behind(deps.into_iter().map(Work::Record), &running) {
            blocked += 1;
        }
    }
    Some((blocked, in_flight))
}

/// Flushes stream `id` of `device` if it still has a pending encoder (used by waiters that need
/// work of a stream they do not hold to reach the queue).
pub(crate) fn flush_stream(device: &DeviceShared, id: u64) {
    let mut sched = lock(&device.sched);
    flush_locked(device, &mut sched, id, false);
}
