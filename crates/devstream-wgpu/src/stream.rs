//! Logical streams over a device's one queue.

use crate::buffer::{
    encode_copy, encode_fill, encode_upload, BufferInner, HostInner, PendingWrite, Readback,
    WgpuBuffer, WgpuHostBuffer,
};
use crate::device::{DeviceShared, LIVE_STREAMS};
use crate::event::{EventInner, Record, WgpuEvent};
use crate::flag::{FlagInner, WgpuFlag};
use crate::graph::{check_unsafe_call, Op, Session, SharedSession, WgpuGraph};
use crate::kernel::{encode_dispatch, WgpuKernel};
use crate::sched::{
    flush_locked, hold_locked, waits_behind_host_func, AfterSubmit, Awaited, Held, Sched,
    StreamState, Upload,
};
use crate::util::{align_down, align_up, lock};
use devstream_core::elide::{Mark, WaitTracker};
use devstream_core::ops::BufferOp;
use devstream_core::selfwait;
use devstream_core::{
    Capabilities, CaptureMode, Completion, DeviceStream, Error, EventFlags, HostFn, Place,
    Priority, PriorityRange, Result, StreamOptions,
};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

mod encode;
mod foreign;

struct StreamHandle {
    id: u64,
    device: Arc<DeviceShared>,
    non_blocking: bool,
    /// What this stream already waited for, and its record clock; only used under the
    /// device's scheduler lock (which serialises every record and wait of the device).
    tracker: WaitTracker,
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        // The stream's queued work still runs: flush it, and let the scheduler drop the state
        // once it has drained. Never blocks on the device.
        let mut sched = lock(&self.device.sched);
        flush_locked(&self.device, &mut sched, self.id, false);
        if let Some(state) = sched.streams.get_mut(&self.id) {
            state.orphaned = true;
            let capture = state.capture.take();
            sched.watched.insert(self.id);
            if let Some(session) = capture {
                let mut captured = lock(&session);
                captured.invalidate("a member stream was dropped".into());
                if captured.origin == self.id {
                    // The capture ends with its origin: every member leaves it.
                    let members: Vec<u64> = captured.members.keys().copied().collect();
                    let _ = captured.end();
                    drop(captured);
                    for member in members {
                        if let Some(state) = sched.streams.get_mut(&member) {
                            state.capture = None;
                        }
                    }
                }
            }
        }
        drop(sched);
        self.device.work.notify();
    }
}

/// A logical stream on a wgpu device: its own pending encoder over the device's one queue.
///
/// Cheap to clone; clones are the same stream. See the crate documentation for how ordering is
/// kept across streams and devices.
#[derive(Clone)]
pub struct WgpuStream {
    handle: Arc<StreamHandle>,
}

devstream_core::debug_fields! { WgpuStream, |self|
    id: self.handle.id,
    place: self.handle.device.place,
}

fn capture_error(op: &'static str, reason: &str) -> Error {
    Error::capture(op, reason.to_owned())
}

impl WgpuStream {
    /// The capture this stream takes part in now, if any.
    fn capture_session(&self) -> Option<SharedSession> {
        let mut sched = self.lock();
        self.capturing(&mut sched)
    }

    pub(crate) fn create(
        device: &Arc<DeviceShared>,
        options: StreamOptions,
        is_default: bool,
    ) -> Result<WgpuStream> {
        let id = devstream_core::next_id();
        let state = StreamState {
            counted: !is_default,
            ..StreamState::default()
        };
        lock(&device.sched).streams.insert(id, Box::new(state));
        if !is_default {
            LIVE_STREAMS.fetch_add(1, Ordering::SeqCst);
        }
        Ok(WgpuStream {
            handle: Arc::new(StreamHandle {
                id,
                device: Arc::clone(device),
                non_blocking: options.non_blocking,
                tracker: WaitTracker::new(options.elide_waits),
            }),
        })
    }

    pub(crate) fn device(&self) -> &Arc<DeviceShared> {
        &self.handle.device
    }

    fn lock(&self) -> MutexGuard<'_, Sched> {
        lock(&self.handle.device.sched)
    }

    /// A new stream over an existing `wgpu::Device` and its queue (adopting them, see
    /// [`WgpuDevice::adopt`](crate::WgpuDevice::adopt)). Streams of one adopted device share its
    /// queue: make further streams with [`WgpuStream::wgpu_device`] and
    /// [`WgpuDevice::new_stream`](crate::WgpuDevice::new_stream).
    pub fn from_wgpu(
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: StreamOptions,
    ) -> Result<WgpuStream> {
        crate::WgpuDevice::adopt(device, queue).new_stream(options)
    }

    /// The native objects behind the stream: the device and the one queue it submits to (a
    /// wgpu stream is logical: it has no native handle of its own).
    pub fn as_raw(&self) -> (&wgpu::Device, &wgpu::Queue) {
        (&self.handle.device.device, &self.handle.device.queue)
    }

    /// The device this stream submits to.
    pub fn wgpu_device(&self) -> crate::WgpuDevice {
        crate::WgpuDevice {
            shared: Arc::clone(&self.handle.device),
        }
    }

    /// Submits the stream's pending commands now (an empty command buffer when none are
    /// pending), or holds them behind the stream's gates. Sync points flush on their own; this
    /// is for starting work early and for measuring a bare submission.
    pub fn flush(&self) -> Result<()> {
        let mut sched = self.lock();
        self.refuse_in_capture(&mut sched, "flush")?;
        flush_locked(&self.handle.device, &mut sched, self.handle.id, true);
        Ok(())
    }

    /// Dispatches `kernel` with `buffers` bound to `@group(0) @binding(0..)` and `workgroups`
    /// workgroups, in stream order.
    pub fn dispatch(
        &self,
        kernel: &WgpuKernel,
        buffers: &[&WgpuBuffer],
        workgroups: [u32; 3],
    ) -> Result<()> {
        let device = &self.handle.device;
        if !Arc::ptr_eq(&kernel.inner.device, device) {
            return Err(Error::mismatch(
                "dispatch",
                &device.place,
                &kernel.inner.device.place,
            ));
        }
        for buffer in buffers {
            self.same_device("dispatch", &buffer.inner)?;
        }
        let max = device.limits.max_compute_workgroups_per_dimension;
        if workgroups.iter().any(|&n| n > max) {
            return Err(Error::InvalidArgument(format!(
                "dispatch: workgroups {workgroups:?} exceed the device's limit of {max} per dimension"
            )));
        }
        let inners: Vec<&Arc<BufferInner>> = buffers.iter().map(|b| &b.inner).collect();
        let bind_group = kernel.bind(&inners)?;
        self.run_op(Op::Dispatch {
            kernel: Arc::clone(&kernel.inner),
            bind_group,
            buffers: inners.into_iter().cloned().collect(),
            workgroups,
        })
    }

    #[inline]
    fn same_device(&self, op: &'static str, buffer: &BufferInner) -> Result<()> {
        if Arc::ptr_eq(&buffer.device, &self.handle.device) {
            Ok(())
        } else {
            self.other_device(op, buffer)
        }
    }

    /// [`WgpuStream::same_device`]'s error.
    #[cold]
    #[inline(never)]
    fn other_device(&self, op: &'static str, buffer: &BufferInner) -> Result<()> {
        if buffer.device.place != self.handle.device.place {
            Err(Error::mismatch(
                op,
                &self.handle.device.place,
                &buffer.device.place,
            ))
        } else {
            Err(Error::InvalidArgument(format!(
                "{op}: the buffer belongs to another wgpu device of {} (an adopted device)",
                buffer.device.place
            )))
        }
    }

    /// The capture this stream is a member of, if any.
    fn capturing(&self, sched: &mut Sched) -> Option<SharedSession> {
        sched
            .streams
            .get(&self.handle.id)
            .and_then(|state| state.capture.clone())
    }

    /// Appends `op` to the stream's capture.
    fn push_captured(&self, session: &SharedSession, op: Op) -> Result<()> {
        lock(session).push(self.handle.id, op)
    }

    /// Refuses an operation that cannot be captured, invalidating the capture.
    fn refuse_in_capture(&self, sched: &mut Sched, op: &'static str) -> Result<()> {
        if let Some(session) = self.capturing(sched) {
            lock(&session).invalidate(format!("{op} was called on a capturing stream"));
            return Err(capture_error(
                op,
                &format!("{op} is not allowed while the stream is capturing"),
            ));
        }
        Ok(())
    }

    fn state<'s>(&self, sched: &'s mut Sched) -> Result<&'s mut StreamState> {
        sched
            .streams
            .get_mut(&self.handle.id)
            .map(|state| &mut **state)
            .ok_or_else(|| Error::InvalidArgument("the stream no longer exists".into()))
    }

    /// Flushes and records here: the record resolves now, or when held work is released.
    fn record_locked(&self, sched: &mut Sched, event: Option<&EventInner>) -> Result<Arc<Record>> {
        let device = &self.handle.device;
        let (timestamp, mark) = self.begin_record_locked(sched, event)?;
        let state = self.state(sched)?;
        if state.held.is_empty() {
            let error = state.error.clone();
            Ok(Record::new(
                device,
                Some(state.frontier.clone()),
                timestamp,
                error,
                mark,
            ))
        } else {
            Ok(self.held_record_locked(sched, timestamp, mark))
        }
    }

    /// A record behind the stream's held work: resolved once that work is released.
    fn held_record_locked(
        &self,
        sched: &mut Sched,
        timestamp: Option<Arc<Readback>>,
        mark: Mark,
    ) -> Arc<Record> {
        let device = &self.handle.device;
        let record = Record::new(device, None, timestamp, None, mark);
        hold_locked(
            device,
            sched,
            self.handle.id,
            Held::Mark(Arc::clone(&record)),
        );
        record
    }

    /// What every record does first: the event's timestamp (timed events), the stream's
    /// pending work flushed, and the record's position on the stream (redundant-wait elision).
    fn begin_record_locked(
        &self,
        sched: &mut Sched,
        event: Option<&EventInner>,
    ) -> Result<(Option<Arc<Readback>>, Mark)> {
        let device = &self.handle.device;
        let id = self.handle.id;
        // An untimed event (nearly all) needs neither the stream's state nor the call.
        let timestamp = match event {
            Some(event) if event.is_timed() => event.encode_timestamp(self.state(sched)?, id)?,
            _ => None,
        };
        flush_locked(device, sched, id, false);
        // Records of a device are serialised by its scheduler lock (held here): positions are
        // monotone in record order.
        let mark = match self.handle.tracker.lock() {
            Some(mut clock) => Mark {
                stream: id,
                pos: clock.advance(),
            },
            None => Mark::NONE,
        };
        Ok((timestamp, mark))
    }

    /// Records `event` on this stream: its current record becomes this one. When nothing
    /// else references the event's previous record (no wait holds it back, no completion waits
    /// on it, no query is reading it) its allocation takes the new record in place: with many
    /// live events, a fresh allocation per record scattered the active ones over the heap and
    /// cost the first rounds of bench-scale's hot pass up to 1.6x.
    fn record_event_locked(&self, sched: &mut Sched, event: &EventInner) -> Result<()> {
        let device = &self.handle.device;
        let (timestamp, mark) = self.begin_record_locked(sched, Some(event))?;
        let state = self.state(sched)?;
        if !state.held.is_empty() {
            *lock(&event.current) = Some(self.held_record_locked(sched, timestamp, mark));
            return Ok(());
        }
        let (ticket, error) = (state.frontier.clone(), state.error.clone());
        let mut current = lock(&event.current);
        if current.is_none() {
            *current = lock(&event.spare).take();
        }
        match current
            .as_mut()
            .and_then(Arc::get_mut)
            .filter(|record| record.reusable_by(device))
        {
            Some(record) => record.rerecord(ticket, timestamp, error, mark),
            None => *current = Some(Record::new(device, Some(ticket), timestamp, error, mark)),
        }
        Ok(())
    }

    /// Waits for `record` unless an earlier wait of this stream implies it (same device only:
    /// records and waits of one device are serialised by its scheduler lock, held here).
    fn wait_record_locked(&self, sched: &mut Sched, record: Arc<Record>) -> Result<()> {
        if !Arc::ptr_eq(&record.device, &self.handle.device) {
            return self.wait_record_now(sched, record);
        }
        let mark = record.mark;
        let mut guard = self.handle.tracker.lock();
        if guard
            .as_ref()
            .is_some_and(|g| g.implied(self.handle.id, mark))
        {
            return Ok(());
        }
        self.wait_record_now(sched, record)?;
        if let Some(guard) = guard.as_mut() {
            guard.note(mark);
        }
        Ok(())
    }

    fn wait_record_now(&self, sched: &mut Sched, record: Arc<Record>) -> Result<()> {
        let device = &self.handle.device;
        let id = self.handle.id;
        if Arc::ptr_eq(&record.device, device) {
            let state = self.state(sched)?;
            match record.ticket() {
                Some(ticket) if state.held.is_empty() => {
                    // Already on the queue: queue order puts later work behind it.
                    state.raise_frontier(ticket.as_ref());
                }
                _ => {
                    flush_locked(device, sched, id, false);
                    hold_locked(device, sched, id, Held::WaitRecord(record));
                }
            }
        } else {
            if let Some(ticket) = record.ticket() {
                if record.device.is_complete(ticket.as_ref()) {
                    return Ok(());
                }
            }
            flush_locked(device, sched, id, false);
            hold_locked(device, sched, id, Held::WaitForeign(record));
        }
        Ok(())
    }

    fn wait_flag_locked(&self, sched: &mut Sched, flag: Arc<FlagInner>, value: u32) {
        let device = &self.handle.device;
        let id = self.handle.id;
        let idle = sched
            .streams
            .get(&id)
            .is_some_and(|state| state.held.is_empty());
        if idle && flag.value.load(Ordering::SeqCst) >= value {
            return;
        }
        flag.watch(&device.work);
        flush_locked(device, sched, id, false);
        hold_locked(device, sched, id, Held::WaitFlag(flag, value));
    }

    fn write_flag_locked(&self, sched: &mut Sched, flag: Arc<FlagInner>, value: u32) {
        let device = &self.handle.device;
        let id = self.handle.id;
        flush_locked(device, sched, id, false);
        let done = sched.streams.get(&id).is_some_and(|state| {
            state.held.is_empty() && device.is_complete(state.frontier.as_ref())
        });
        if done {
            flag.store(value);
        } else {
            hold_locked(device, sched, id, Held::WriteFlag(flag, value));
        }
    }

    /// This stream waits on work captured in `theirs` (an event recorded in it, or a stream
    /// that is a member of it): a member merges the dependency, a stream outside any capture
    /// joins it (CUDA's fork), a member of another capture is refused.
    fn join_locked(
        &self,
        sched: &mut Sched,
        theirs: SharedSession,
        clock: &crate::graph::Clock,
        mine: Option<SharedSession>,
        device: &Arc<DeviceShared>,
    ) -> Result<()> {
        if let Some(mine) = &mine {
            if !Arc::ptr_eq(mine, &theirs) {
                lock(mine).invalidate("a wait on another capture".into());
                return Err(capture_error(
                    "wait_event",
                    "the event or stream belongs to another stream capture",
                ));
            }
        }
        if !Arc::ptr_eq(device, &self.handle.device) {
            lock(&theirs).invalidate("a wait from another device".into());
            return Err(capture_error(
                "wait_event",
                "a capture cannot be joined by a stream of another wgpu device",
            ));
        }
        lock(&theirs).wait(self.handle.id, clock);
        if mine.is_none() {
            self.state(sched)?.capture = Some(theirs);
        }
        Ok(())
    }

    fn check_event(&self, op: &'static str, event: &WgpuEvent) -> Result<()> {
        if Arc::ptr_eq(&event.inner.device, &self.handle.device) {
            Ok(())
        } else {
            Err(Error::mismatch(
                op,
                &self.handle.device.place,
                &event.inner.device.place,
            ))
        }
    }

    /// Items the stream holds back now (tests).
    #[cfg(test)]
    pub(crate) fn held_len(&self) -> usize {
        self.lock()
            .streams
            .get(&self.handle.id)
            .map_or(0, |state| state.held.len())
    }

    /// The first error the stream's work raised since the last report (taken: a later
    /// `synchronize` reports later errors), else the device's fault (kept).
    fn take_first_error(&self, sched: &mut Sched) -> Option<Error> {
        sched
            .streams
            .get_mut(&self.handle.id)
            .and_then(|state| {
                state.behind_lost_work = false;
                state.error.take()
            })
            .or_else(|| self.handle.device.fault())
    }
}

impl DeviceStream for WgpuStream {
    type Event = WgpuEvent;
    type Graph = WgpuGraph;
    type Flag = WgpuFlag;

    fn place(&self) -> &Place {
        &self.handle.device.place
    }

    fn id(&self) -> u64 {
        self.handle.id
    }

    fn priority(&self) -> Priority {
        PriorityRange::NONE.classify(0)
    }

    fn native_priority(&self) -> i32 {
        0
    }

    fn is_non_blocking(&self) -> bool {
        self.handle.non_blocking
    }

    fn capabilities(&self) -> Capabilities {
        self.handle.device.caps
    }

    fn query(&self) -> Result<bool> {
        let device = &self.handle.device;
        if let Some(fault) = device.fault() {
            return Err(fault);
        }
        let frontier = {
            let mut sched = self.lock();
            self.refuse_in_capture(&mut sched, "query")?;
            check_unsafe_call(&device.place, "query")?;
            flush_locked(device, &mut sched, self.handle.id, false);
            let state = self.state(&mut sched)?;
            if !state.held.is_empty() {
                return Ok(false);
            }
            state.frontier.clone()
        };
        device.query_ticket(frontier.as_ref())
    }

    fn synchronize(&self) -> Result<()> {
        let device = &self.handle.device;
        let mut first = true;
        loop {
            // Flush, then find what to wait for: the frontier once nothing is held back.
            let (frontier, seen) = {
                let mut sched = self.lock();
                if first {
                    self.refuse_in_capture(&mut sched, "synchronize")?;
                    flush_locked(device, &mut sched, self.handle.id, false);
                }
                let seen = device.signal.generation();
                let state = self.state(&mut sched)?;
                if state.held.is_empty() {
                    (Some(state.frontier.clone()), seen)
                } else {
                    (None, seen)
                }
            };
            if first {
                check_unsafe_call(&device.place, "synchronize")?;
                first = false;
            }
            match frontier {
                Some(frontier) => {
                    if let Some(ticket) = frontier {
                        while !device.wait_ticket(&ticket, None)? {}
                    }
                    break;
                }
                None => {
                    if let Some(fault) = device.fault() {
                        return Err(fault);
                    }
                    if let Some((_, stream)) =
                        waits_behind_host_func(device, Awaited::Stream(self.handle.id))
                    {
                        return Err(selfwait::would_deadlock(
                            "synchronize",
                            format!(
                                "stream {} waits for work queued after the host function of \
                                 stream {stream}",
                                self.handle.id
                            ),
                        ));
                    }
                    device.signal.wait_change(seen, None);
                }
            }
        }
        crate::mempool::sync_point(device);
        match self.take_first_error(&mut self.lock()) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn completion(&self) -> Completion {
        let mut sched = self.lock();
        if self.capturing(&mut sched).is_some() {
            // Unlike `query`, this invalidates nothing: the capture stays valid.
            return Completion::ready(Err(capture_error(
                "completion",
                "the stream is capturing: its work runs when the graph is launched",
            )));
        }
        // A recording without an event: flushed like `query`, resolved to a ticket by the
        // scheduler when it holds work back. Where the stream's last held item is already such a
        // recording (nothing was queued since), it serves again: completions asked for again
        // and again of a stream held behind a gate add nothing to its queue.
        flush_locked(&self.handle.device, &mut sched, self.handle.id, false);
        let last_mark = match self.state(&mut sched) {
            Ok(state) => match state.held.back() {
                Some(crate::sched::Held::Mark(record)) => Some(Arc::clone(record)),
                _ => None,
            },
            Err(error) => return Completion::ready(Err(error)),
        };
        let record = match last_mark {
            Some(record) => Ok(record),
            None => self.record_locked(&mut sched, None),
        };
        drop(sched);
        match record {
            Ok(record) => crate::completion::completion(record, true),
            Err(error) => Completion::ready(Err(error)),
        }
    }

    fn record(&self, event: &WgpuEvent) -> Result<()> {
        self.check_event("record", event)?;
        let mut sched = self.lock();
        if let Some(session) = self.capturing(&mut sched) {
            let mut captured = lock(&session);
            captured.push(self.handle.id, Op::Record(event.clone()))?;
            let clock = captured.snapshot(self.handle.id);
            drop(captured);
            *lock(&event.inner.captured) = Some((Arc::downgrade(&session), clock));
            return Ok(());
        }
        // As `run_op(Op::Record(..))` would, under the lock already taken: one look-up of the
        // stream and no reference to the event taken.
        self.record_event_locked(&mut sched, &event.inner)?;
        *lock(&event.inner.captured) = None;
        Ok(())
    }

    fn record_event(&self) -> Result<WgpuEvent> {
        let event = EventInner::create(&self.handle.device, EventFlags::default())?;
        self.record(&event)?;
        Ok(event)
    }

    fn wait_event(&self, event: &WgpuEvent) -> Result<()> {
        let captured = event.inner.captured_in();
        let mut sched = self.lock();
        let mine = self.capturing(&mut sched);
        match (captured, mine) {
            (None, None) => {
                drop(sched);
                self.run_op(Op::WaitEvent(event.clone()))
            }
            (None, Some(session)) => self.push_captured(&session, Op::WaitEvent(event.clone())),
            (Some((theirs, clock)), mine) => {
                self.join_locked(&mut sched, theirs, &clock, mine, &event.inner.device)
            }
        }
    }

    fn wait_stream(&self, other: &WgpuStream) -> Result<()> {
        if other.handle.id == self.handle.id {
            return Ok(());
        }
        let same_device = Arc::ptr_eq(&other.handle.device, &self.handle.device);
        let theirs = if same_device {
            None
        } else {
            other.capturing(&mut other.lock())
        };
        let mut sched = self.lock();
        let theirs = if same_device {
            other.capturing(&mut sched)
        } else {
            theirs
        };
        let mine = self.capturing(&mut sched);
        match (theirs, mine) {
            (Some(theirs), mine) => {
                let clock = lock(&theirs).snapshot(other.handle.id);
                self.join_locked(&mut sched, theirs, &clock, mine, &other.handle.device)
            }
            (None, Some(session)) => self.push_captured(&session, Op::WaitStream(other.clone())),
            (None, None) => {
                if same_device {
                    let record = other.record_locked(&mut sched, None)?;
                    return self.wait_record_locked(&mut sched, record);
                }
                drop(sched);
                let record = {
                    let mut other_sched = other.lock();
                    other.record_locked(&mut other_sched, None)?
                };
                let mut sched = self.lock();
                self.wait_record_locked(&mut sched, record)
            }
        }
    }
    /// Runs `f` once all earlier work of the stream is complete; later work waits for it.
    ///
    /// `f` runs on one of the device's host-function threads (a pool that grows while host
    /// functions block), so a blocking `f` stalls only this stream. Inside `f`, devstream calls
    /// see stream order up to `f`: a call that would wait for work queued after `f` returns
    /// `Error::WouldDeadlock` (see the crate's "Host functions" section). A panic in `f`, in
    /// its `Drop` or in a panic payload's `Drop` is reported by `synchronize` as
    /// `Error::HostFuncPanicked`.
    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        let device = &self.handle.device;
        let mut sched = self.lock();
        if let Some(session) = self.capturing(&mut sched) {
            return self.push_captured(&session, Op::HostFunc(Arc::new(std::sync::Mutex::new(f))));
        }
        flush_locked(device, &mut sched, self.handle.id, false);
        hold_locked(device, &mut sched, self.handle.id, Held::HostFunc(f));
        Ok(())
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        let mut sched = self.lock();
        if let Some(session) = self.capturing(&mut sched) {
            lock(&session).invalidate("begin_capture was called on a capturing stream".into());
            return Err(capture_error(
                "begin_capture",
                "the stream is already capturing",
            ));
        }
        self.state(&mut sched)?.capture = Some(Session::begin(
            &self.handle.device.place,
            self.handle.id,
            mode,
        ));
        Ok(())
    }

    fn end_capture(&self) -> Result<WgpuGraph> {
        let mut sched = self.lock();
        let Some(session) = self.capturing(&mut sched) else {
            return Err(capture_error("end_capture", "the stream is not capturing"));
        };
        let mut captured = lock(&session);
        if captured.origin != self.handle.id {
            return Err(capture_error(
                "end_capture",
                "the stream joined another stream's capture: end it on the stream that began it",
            ));
        }
        let mode = captured.mode;
        let members: Vec<u64> = captured.members.keys().copied().collect();
        let ended = captured.end();
        drop(captured);
        for member in members {
            if let Some(state) = sched.streams.get_mut(&member) {
                if state
                    .capture
                    .as_ref()
                    .is_some_and(|s| Arc::ptr_eq(s, &session))
                {
                    state.capture = None;
                }
            }
        }
        let memory = lock(&session).memory.clone();
        let owns_memory =
            devstream_core::DevicePool::stats(&*memory).is_ok_and(|stats| stats.reserved_bytes > 0);
        Ok(WgpuGraph {
            device: Arc::clone(&self.handle.device),
            ops: Arc::new(ended?),
            mode,
            memory,
            previous: owns_memory.then(Default::default),
        })
    }

    fn is_capturing(&self) -> Result<bool> {
        let mut sched = self.lock();
        Ok(self.state(&mut sched)?.capture.is_some())
    }

    fn wait_flag(&self, flag: &WgpuFlag, value: u32) -> Result<()> {
        self.run_op(Op::WaitFlag(Arc::clone(&flag.inner), value))
    }

    fn write_flag(&self, flag: &WgpuFlag, value: u32) -> Result<()> {
        self.run_op(Op::WriteFlag(Arc::clone(&flag.inner), value))
    }

    fn wait_completion(&self, awaited: Completion) -> Result<()> {
        self.wait_foreign(awaited)
    }

    // Buffers and copies: the handle types and their operations together.
    type Buffer = WgpuBuffer;
    type HostBuffer = WgpuHostBuffer;

    fn alloc(&self, len: usize) -> Result<WgpuBuffer> {
        let device = &self.handle.device;
        if let Some(session) = self.capture_session() {
            return crate::graph_memory::alloc_in_capture(device, &session, len);
        }
        check_unsafe_call(&device.place, "alloc")?;
        crate::mempool::alloc(device, device.default_pool(), len).map(|inner| WgpuBuffer { inner })
    }

    fn alloc_from(&self, pool: &dyn devstream_core::DevicePool, len: usize) -> Result<WgpuBuffer> {
        let device = &self.handle.device;
        let any: &dyn std::any::Any = pool;
        // A graph's pool of this place is accepted here only to be refused outside its
        // capture; any other pool must be one of this device's.
        let own = match any.downcast_ref::<crate::graph_memory::CaptureMemory>() {
            Some(graph_pool) if devstream_core::DevicePool::place(graph_pool) == &device.place => {
                None
            }
            _ => Some(crate::mempool::downcast(pool, device)?),
        };
        if let Some(session) = self.capture_session() {
            // During a capture every allocation is the capture's: `pool` is only checked.
            return crate::graph_memory::alloc_in_capture(device, &session, len);
        }
        check_unsafe_call(&device.place, "alloc_from")?;
        match own {
            Some(pool) => {
                crate::mempool::alloc(device, pool, len).map(|inner| WgpuBuffer { inner })
            }
            None => Err(devstream_core::graph_memory::not_for_alloc_from(
                &device.place,
            )),
        }
    }

    fn capture_memory_pool(&self) -> Result<Arc<dyn devstream_core::DevicePool>> {
        match self.capture_session() {
            Some(session) => Ok(lock(&session).memory.clone()),
            None => Err(capture_error(
                "capture_memory_pool",
                "the stream is not capturing",
            )),
        }
    }

    fn alloc_host(&self, len: usize) -> Result<WgpuHostBuffer> {
        check_unsafe_call(&self.handle.device.place, "alloc_host")?;
        HostInner::new(&self.handle.device.place, len).map(|inner| WgpuHostBuffer { inner })
    }

    devstream_core::buffer_methods! {
        buffer: WgpuBuffer, host: WgpuHostBuffer, record: inner,
        |self, op| self.buffer_op(op)
    }
}
