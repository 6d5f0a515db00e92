//! Streams: the [`DeviceStream`] implementation written once for CUDA and HIP.
//!
//! Hot-path operations on a stream handle (`record`, `wait_event`, `wait_stream`, `query`,
//! `synchronize`, graph launch) are one native call plus an atomic or two; only the legacy and
//! per-thread default streams, whose handles name "the current context's" stream, make the
//! device's context current first.

use crate::buffer::{GpuBuffer, GpuHostBuffer};
use crate::device::{Device, Runtime};
use crate::error::{check, check_ready, map_error};
use crate::event::GpuEvent;
use crate::ext::CaptureModeGuard;
use crate::flag::GpuFlag;
use crate::graph::{GpuGraph, GpuGraphDef};
use crate::hostfn::{
    host_in_graph, host_once, host_slot, CaptureOwned, HostCall, HostRingPtr, OwnedHostCall,
    PanicSink, PanicSlot,
};
use crate::raw::{CaptureStatus, Optional, RawApi, RawEvent, RawGraph, RawGraphNode, RawStream};
use devstream_core::capture::{self, CaptureRegistration};
use devstream_core::elide::{Mark, WaitTracker};
use devstream_core::ops::Transfer;
use devstream_core::{
    Capabilities, CaptureMode, Completion, DeviceEvent, DevicePool, DeviceStream, Error,
    EventFlags, HostFn, Place, Priority, Result, StreamOptions,
};
use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

mod capturing;
mod inner;

pub(crate) use inner::{check_nodes_of, StreamInner};
use inner::{discard_native_capture, release_handle, ActiveCapture, CaptureRecord};

/// What kind of native stream a [`GpuStream`] wraps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// Created by devstream, destroyed when the last handle drops.
    Owned,
    /// Wrapped with `from_raw`: never destroyed by devstream.
    Borrowed,
    /// The legacy default ("null") stream.
    Legacy,
    /// The per-thread default stream.
    PerThread,
}

/// A native stream (`CUstream` / `hipStream_t`), a cheap `Clone` handle. Clones compare equal.
pub struct GpuStream<A: RawApi> {
    pub(crate) inner: Arc<StreamInner<A>>,
}

impl<A: RawApi> Clone for GpuStream<A> {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::Relaxed);
        GpuStream {
            inner: self.inner.clone(),
        }
    }
}

impl<A: RawApi> Drop for GpuStream<A> {
    fn drop(&mut self) {
        // Release: work queued through this handle happens before a reader that sees zero;
        // Acquire: the last handle sees every capture begun through the others.
        if self.inner.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            if self.inner.device.active_captures.load(Ordering::Acquire) > 0 {
                StreamInner::abandon_capture(&self.inner);
            }
            // Blocks the pools keep for reuse on this stream: no allocation can come any more.
            crate::mempool::stream_gone(&self.inner);
        }
    }
}

impl<A: RawApi> PartialEq for GpuStream<A> {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
    }
}
impl<A: RawApi> Eq for GpuStream<A> {}

impl<A: RawApi> std::hash::Hash for GpuStream<A> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.inner.id.hash(state);
    }
}

impl<A: RawApi> fmt::Debug for GpuStream<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuStream")
            .field("id", &self.inner.id)
            .field("place", &self.inner.device.place)
            .field("kind", &self.inner.kind)
            .field("priority", &self.inner.native_priority)
            .field("non_blocking", &self.inner.non_blocking)
            .field("raw", &self.inner.raw)
            .finish()
    }
}

fn needs_context(raw: RawStream) -> bool {
    // 0: legacy (null), 1: CU_STREAM_LEGACY, 2: CU_STREAM_PER_THREAD (same values in HIP).
    (raw.0 as usize) <= 2
}

impl<A: RawApi> GpuStream<A> {
    pub(crate) fn create(device: &'static Device<A>, options: StreamOptions) -> Result<Self> {
        device.bind()?;
        device.collect();
        // Already inside the device's range, so the driver uses it as given (it only clamps
        // values outside): no `cuStreamGetPriority` round trip to learn it back.
        let native = device.range.normalize(options.priority);
        let raw = match device.take_stream(options.non_blocking, native) {
            Some(raw) => raw,
            None => {
                // Creating a stream is allowed beside every capture: in Relaxed mode, so that
                // the runtime counts it against none.
                let _relaxed = CaptureModeGuard::<A>::relaxed();
                // SAFETY: the device's context is current.
                check::<A, _>(unsafe { A::stream_create(options.non_blocking, native) })?
            }
        };
        Self::assemble(
            device,
            raw,
            native,
            options.non_blocking,
            StreamKind::Owned,
            None,
            options.elide_waits,
        )
    }

    pub(crate) fn special(device: &'static Device<A>, kind: StreamKind) -> Result<Self> {
        device.bind()?;
        let raw = match kind {
            StreamKind::PerThread => A::PER_THREAD_STREAM,
            _ => RawStream::NULL,
        };
        let native = device.range.clamp(0);
        Self::assemble(device, raw, native, false, kind, None, false)
    }

    fn assemble(
        device: &'static Device<A>,
        raw: RawStream,
        native: i32,
        non_blocking: bool,
        kind: StreamKind,
        keepalive: Option<Arc<dyn Any + Send + Sync>>,
        elide_waits: bool,
    ) -> Result<Self> {
        let counted = matches!(kind, StreamKind::Owned | StreamKind::Borrowed);
        if counted {
            device.live_streams.fetch_add(1, Ordering::Relaxed);
        }
        // The block first, then the stream's state written into it: `Arc::new(value)` would
        // build the value on the stack and copy it (a few hundred bytes) into the block.
        let mut block = Arc::<StreamInner<A>>::new_uninit();
        let Some(slot) = Arc::get_mut(&mut block) else {
            unreachable!("GpuStream::assemble: a new Arc is unique")
        };
        slot.write(StreamInner {
            raw,
            priority: device.range.classify(native),
            device,
            id: devstream_core::next_id(),
            native_priority: native,
            non_blocking,
            kind,
            needs_context: needs_context(raw),
            sync_event: OnceLock::new(),
            panic: OnceLock::new(),
            host_ring: OnceLock::new(),
            capture: Mutex::new(CaptureRecord::default()),
            _keepalive: keepalive,
            counted,
            owner: if kind == StreamKind::PerThread {
                current_thread()
            } else {
                None
            },
            handles: AtomicUsize::new(1),
            // Only streams devstream created are tracked: a wrapped stream, the legacy
            // stream and the per-thread stream (whose handle names another stream on each
            // thread) are shared with code devstream does not see.
            tracker: WaitTracker::new(elide_waits && kind == StreamKind::Owned),
            native_state: AtomicBool::new(false),
            own_records: std::sync::atomic::AtomicU64::new(0),
            foreign_waits: OnceLock::new(),
        });
        Ok(GpuStream {
            // SAFETY: written just above.
            inner: unsafe { block.assume_init() },
        })
    }

    /// Wraps a native stream of `place` without owning it. `keepalive`, if given, is held as
    /// long as any handle (e.g. the `Arc` of another library's stream object).
    ///
    /// # Safety
    /// `raw` is a live stream of `place`'s primary context (or a special handle: null, legacy,
    /// per-thread) that outlives the returned handle and its clones (or `keepalive` keeps it
    /// alive).
    pub unsafe fn from_raw_handle(
        raw: RawStream,
        place: &Place,
        keepalive: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Self> {
        let device = crate::device::device_of::<A>(place)?;
        device.bind()?;
        device.foreign_handles.store(true, Ordering::Release);
        let (native, non_blocking) = if needs_context(raw) {
            (device.range.clamp(0), false)
        } else {
            // SAFETY: the caller guarantees `raw` is a live stream of this device.
            let native = check::<A, _>(unsafe { A::stream_priority(raw) })?;
            // SAFETY: as above.
            let flags = check::<A, _>(unsafe { A::stream_flags(raw) })?;
            (native, flags & 1 != 0)
        };
        Self::assemble(
            device,
            raw,
            native,
            non_blocking,
            StreamKind::Borrowed,
            keepalive,
            false,
        )
    }

    /// The native handle to submit to from the calling thread: null for the legacy default
    /// stream; for the per-thread default stream used on another thread than its own (whose
    /// handle there would name that thread's stream), the legacy default stream, which is
    /// ordered with every blocking stream of the context, its owner's per-thread stream
    /// included (conservative: it also orders with other blocking streams).
    ///
    /// Once handed out, the stream may be captured by other code (and a devstream stream can
    /// join that capture by waiting on an event recorded there): the device then counts as
    /// having foreign handles, as after `from_raw_handle` (its capture status is asked of the
    /// driver and no wait on it is elided, see `devstream_core::elide`).
    #[inline]
    pub fn raw_handle(&self) -> RawStream {
        self.inner.mark_native_state();
        let device = self.inner.device;
        if !device.foreign_handles.load(Ordering::Relaxed) {
            device.foreign_handles.store(true, Ordering::SeqCst);
        }
        self.raw()
    }

    /// `Some(epoch)` when this stream may elide waits / position records now.
    #[inline]
    fn elision_epoch(&self) -> Option<u64> {
        if !self.inner.tracker.enabled() {
            return None;
        }
        self.inner.device.elision_epoch()
    }

    /// Runs a native record of this stream (`native`), giving it a position when it can be
    /// proven monotone: this stream is tracked, no capture may be active on the device during
    /// the call, and no other record of this stream is being positioned meanwhile.
    #[inline]
    fn record_marked<E>(
        &self,
        native: impl FnOnce() -> std::result::Result<(), E>,
    ) -> (std::result::Result<(), E>, Mark) {
        let Some(epoch) = self.elision_epoch() else {
            return (native(), Mark::NONE);
        };
        let mut guard = self.inner.tracker.lock();
        let result = native();
        if result.is_err() || !self.inner.device.elision_still_valid(epoch) {
            return (result, Mark::NONE);
        }
        let pos = guard.as_mut().map_or(0, |g| g.advance());
        (
            result,
            Mark {
                stream: self.inner.id,
                pos,
            },
        )
    }

    /// Waits on a native event whose record is `mark` (`None`: unknown), unless the wait is
    /// implied by what this stream already waited for. `other` is the event's device;
    /// `mark_still_current` tells, after the native wait, whether it saw the record `mark`
    /// describes (only then is the wait noted).
    #[inline]
    fn wait_marked(
        &self,
        raw: RawEvent,
        mark: Option<Mark>,
        other: &'static Device<A>,
        mark_still_current: impl FnOnce() -> bool,
    ) -> Result<()> {
        let device = self.inner.device;
        let epochs = match (mark, self.elision_epoch()) {
            (Some(mark), Some(epoch)) if mark.stream != 0 => {
                if std::ptr::eq(other, device) {
                    Some((epoch, epoch))
                } else {
                    other.elision_epoch().map(|e| (epoch, e))
                }
            }
            _ => None,
        };
        let (Some(mark), Some((mine, theirs))) = (mark, epochs) else {
            return self.wait_raw_event(raw);
        };
        let Some(mut guard) = self.inner.tracker.lock() else {
            return self.wait_raw_event(raw);
        };
        let valid = || device.elision_still_valid(mine) && other.elision_still_valid(theirs);
        if valid() && guard.implied(self.inner.id, mark) {
            return Ok(());
        }
        self.wait_raw_event(raw)?;
        if valid() && mark_still_current() {
            guard.note(mark);
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn raw(&self) -> RawStream {
        match self.inner.owner {
            None => self.inner.raw,
            Some(owner) => release_handle(self.inner.raw, Some(owner)),
        }
    }

    /// Whether this is a per-thread default stream used on another thread than its own.
    #[inline]
    fn foreign_thread(&self) -> bool {
        matches!(self.inner.owner, Some(owner) if Some(owner) != current_thread())
    }

    /// An event recorded now on the legacy default stream: complete once the work queued so
    /// far on every blocking stream (this per-thread stream of another thread included) is.
    #[cold]
    fn legacy_marker(&self) -> Result<GpuEvent<A>> {
        let event = GpuEvent::create(self.inner.device, EventFlags::default())?;
        // SAFETY: a live event of this device; the context is current (bound by the caller).
        check::<A, _>(unsafe { A::event_record(event.inner.raw, RawStream::NULL) })?;
        event.mark_recorded();
        Ok(event)
    }

    /// What kind of stream this is.
    pub fn kind(&self) -> StreamKind {
        self.inner.kind
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.device.ordinal
    }

    /// The device this stream belongs to.
    pub fn device(&self) -> &'static Device<A> {
        self.inner.device
    }

    /// Makes the context current where the handle needs it (legacy/per-thread streams).
    #[inline]
    pub(crate) fn bind(&self) -> Result<()> {
        if self.inner.needs_context {
            self.inner.device.bind()
        } else {
            Ok(())
        }
    }

    #[inline]
    pub(crate) fn same_device(&self, op: &'static str, place_ordinal: usize) -> Result<()> {
        if place_ordinal == self.inner.device.ordinal {
            Ok(())
        } else {
            Err(Error::mismatch(
                op,
                &self.inner.device.place,
                &A::place(place_ordinal),
            ))
        }
    }

    /// Later work on this stream waits for `event` (which may belong to another device).
    #[inline]
    fn wait_raw_event(&self, event: RawEvent) -> Result<()> {
        // SAFETY: the stream and the event are alive.
        match unsafe { A::stream_wait_event(self.raw(), event) } {
            Ok(()) => Ok(()),
            Err(e) => Err(self.capture_violation("wait_event", map_error::<A>(e))),
        }
    }

    /// Creates the internal `wait_stream` event (first use), racing safely with other threads.
    #[cold]
    fn create_sync_event(&self) -> Result<RawEvent> {
        self.inner.device.bind()?;
        // Made beside any capture: in Relaxed mode, as `GpuEvent::create` does.
        let relaxed = CaptureModeGuard::<A>::relaxed();
        // SAFETY: the device's context is current.
        let event = check::<A, _>(unsafe { A::event_create(EventFlags::default()) })?;
        drop(relaxed);
        match self.inner.sync_event.set(event) {
            Ok(()) => Ok(event),
            Err(event) => {
                // Another thread won the race: use its event.
                // SAFETY: ours, never recorded.
                let _ = unsafe { A::event_destroy(event) };
                Ok(*self.inner.sync_event.get().unwrap_or(&event))
            }
        }
    }

    pub(crate) fn inner(&self) -> &Arc<StreamInner<A>> {
        &self.inner
    }

    /// `Stream::completion`: an internal event recorded here, awaited by the device's
    /// completion hub (see `crate::completion`); nothing else is added to this stream's work.
    fn completion_impl(&self) -> Result<Completion> {
        crate::completion::refuse_in_host_function()?;
        self.bind()?;
        if self.capture_sequence()?.0 != CaptureStatus::None {
            // Asking is allowed during capture; recording here would add a capture node.
            return Err(Error::capture(
                "completion",
                "the stream is capturing: its work runs when the graph is launched",
            ));
        }
        let event = if self.foreign_thread() {
            self.legacy_marker()?
        } else {
            let event = GpuEvent::create(self.inner.device, EventFlags::default())?;
            // SAFETY: the event and the stream are alive and belong to the same device.
            check::<A, _>(unsafe { A::event_record(event.inner.raw, self.raw()) })?;
            event.mark_recorded();
            event
        };
        let panic = (self.inner.panic_slot().clone(), self.inner.id);
        crate::completion::notify_after(event, Some(panic), crate::completion::Source::Private)
    }

    /// `query` or `synchronize` of this stream while some capture forbids potentially unsafe
    /// calls: refused (`Error::Capture`, the capture goes on) where a capture in progress on
    /// this device forbids them on this thread (`devstream_core::capture`), unless this stream
    /// itself captures: then the runtime answers, and the capturing stream's own rule applies
    /// (the capture it began is invalidated and ended, see `capture_violation`).
    #[cold]
    fn check_unsafe_call(&self, op: &'static str) -> Result<()> {
        if self.capture_sequence()?.0 != CaptureStatus::None {
            return Ok(());
        }
        capture::check_unsafe_call(&self.inner.device.place, op)
    }

    /// `synchronize` called by a host function (or stream callback): waiting there can never
    /// end if the stream still has work (the host function's own stream waits for it to
    /// return), so it answers from a query: done, or a typed error — never a hang.
    #[cold]
    fn synchronize_in_host_function(&self) -> Result<()> {
        if self.query()? {
            self.inner.take_panic()
        } else {
            Err(Error::WouldDeadlock {
                op: "synchronize",
                reason: format!(
                    "stream {} still has work queued, which may be queued after the host \
                     function (a runtime host function may not wait for its stream)",
                    self.inner.id
                ),
            })
        }
    }
}

thread_local! {
    static THREAD_ID: std::thread::ThreadId = std::thread::current().id();
}

/// The calling thread's id (cached: no reference-count traffic per call).
#[inline]
pub(crate) fn current_thread() -> Option<std::thread::ThreadId> {
    THREAD_ID.try_with(|id| *id).ok()
}

/// The stream's copies between buffers, `name(dst: destination type, src: source type)`: each
/// forwards its range, as a [`Transfer`], to the function of the same name in `crate::buffer`,
/// which checks it and makes the native call.
macro_rules! buffer_copies {
    ($($name:ident(dst: $dst:ty, src: $src:ty);)*) => {$(
        fn $name(
            &self,
            dst: &$dst,
            dst_offset: usize,
            src: &$src,
            src_offset: usize,
            len: usize,
        ) -> Result<()> {
            crate::buffer::$name(self, Transfer::new(dst, dst_offset, src, src_offset, len))
        }
    )*};
}

impl<A: RawApi> DeviceStream for GpuStream<A> {
    type Event = GpuEvent<A>;
    type Graph = GpuGraph<A>;
    type Flag = GpuFlag<A>;
    type Buffer = GpuBuffer<A>;
    type HostBuffer = GpuHostBuffer<A>;

    fn place(&self) -> &Place {
        &self.inner.device.place
    }

    fn id(&self) -> u64 {
        self.inner.id
    }

    fn priority(&self) -> Priority {
        self.inner.priority
    }

    fn native_priority(&self) -> i32 {
        self.inner.native_priority
    }

    fn is_non_blocking(&self) -> bool {
        self.inner.non_blocking
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.device.caps
    }

    #[inline]
    fn query(&self) -> Result<bool> {
        self.bind()?;
        if capture::any_forbidding() {
            self.check_unsafe_call("query")?;
        }
        if self.foreign_thread() {
            return self.legacy_marker()?.query();
        }
        let _relaxed = CaptureModeGuard::<A>::for_checked_call(|| self.may_capture_now());
        // SAFETY: the stream is alive.
        match check_ready::<A>(unsafe { A::stream_query(self.raw()) }) {
            Ok(done) => Ok(done),
            Err(e) => Err(self.capture_violation("query", e)),
        }
    }

    #[inline]
    fn synchronize(&self) -> Result<()> {
        self.bind()?;
        if capture::any_forbidding() {
            self.check_unsafe_call("synchronize")?;
        }
        if crate::hostfn::in_host_function() {
            return self.synchronize_in_host_function();
        }
        if self.foreign_thread() {
            self.legacy_marker()?.synchronize()?;
            return self.inner.take_panic();
        }
        let relaxed = CaptureModeGuard::<A>::for_checked_call(|| self.may_capture_now());
        // SAFETY: the stream is alive.
        let synchronized = unsafe { A::stream_synchronize(self.raw()) };
        drop(relaxed);
        if let Err(e) = synchronized {
            return Err(self.capture_violation("synchronize", map_error::<A>(e)));
        }
        // A drain point: releases deferred until work completed run now if it has (the
        // device's next allocation would run them otherwise), and frees this stream's work held
        // back on the reclaim stream follow it.
        self.inner.device.collect();
        self.inner.device.reclaim_frees.settle(self.inner.device);
        self.inner.take_panic()
    }

    #[inline]
    fn record(&self, event: &GpuEvent<A>) -> Result<()> {
        if !std::ptr::eq(event.inner.device, self.inner.device) {
            return Err(Error::mismatch(
                "record",
                &self.inner.device.place,
                &event.inner.device.place,
            ));
        }
        self.bind()?;
        if event.inner.awaited.load(Ordering::Acquire) > 0 {
            // Completions waiting on the current record get a snapshot of it first.
            crate::completion::before_rerecord(event);
        }
        // Before the native record: a sweeper that reads the same count before and after its
        // question asked about an earlier record (see `crate::completion`).
        event.inner.records.fetch_add(1, Ordering::SeqCst);
        let (raw, stream) = (event.inner.raw, self.raw());
        // The event's mark follows this stream's records only under its tracker guard (see
        // `EventMark`); without the guard the record makes the mark untrusted.
        let mut guard = self.inner.tracker.lock();
        let epoch = guard
            .as_ref()
            .and_then(|_| self.inner.device.elision_epoch());
        let recorded = event.inner.mark.record(self.inner.id, guard.is_some(), || {
            // SAFETY: the event and the stream are alive and belong to the same device.
            let result = unsafe { A::event_record(raw, stream) };
            let pos = match (guard.as_mut(), epoch) {
                (Some(guard), Some(epoch))
                    if result.is_ok() && self.inner.device.elision_still_valid(epoch) =>
                {
                    guard.advance()
                }
                _ => 0,
            };
            (result, pos)
        });
        drop(guard);
        match recorded {
            Ok(()) => {
                event.mark_recorded();
                self.note_capture_of(event);
                Ok(())
            }
            Err(e) => Err(self.capture_violation("record", map_error::<A>(e))),
        }
    }

    fn completion(&self) -> Completion {
        self.completion_impl()
            .unwrap_or_else(|error| Completion::ready(Err(error)))
    }

    fn record_event(&self) -> Result<GpuEvent<A>> {
        let event = GpuEvent::create(self.inner.device, EventFlags::default())?;
        self.record(&event)?;
        Ok(event)
    }

    #[inline]
    fn wait_event(&self, event: &GpuEvent<A>) -> Result<()> {
        self.bind()?;
        if !self.inner.tracker.enabled() {
            return self.wait_raw_event(event.inner.raw);
        }
        // Noted only if the event still has the owner it had before the native wait: then
        // that wait saw a record of the owner at or after the position read.
        let mark = &event.inner.mark;
        let read = mark.read();
        self.wait_marked(event.inner.raw, read, event.inner.device, || {
            read.is_some_and(|r| mark.still_owned(&r))
        })
    }

    #[inline]
    fn wait_stream(&self, other: &GpuStream<A>) -> Result<()> {
        if Arc::ptr_eq(&self.inner, &other.inner) {
            return Ok(());
        }
        other.bind()?;
        let sync_event = match other.inner.sync_event.get() {
            Some(event) => *event,
            None => other.create_sync_event()?,
        };
        let other_raw = other.raw();
        // SAFETY: `other` and its internal event are alive and of the same device.
        let (recorded, mark) =
            other.record_marked(|| unsafe { A::event_record(sync_event, other_raw) });
        if let Err(e) = recorded {
            return Err(other.capture_violation("wait_stream", map_error::<A>(e)));
        }
        if self.inner.needs_context && self.inner.device.ordinal != other.inner.device.ordinal {
            self.bind()?;
        }
        // Racing `wait_stream`s on `other` re-record its internal event, but only later on the
        // same stream: whatever record the wait sees contains the one `mark` describes.
        self.wait_marked(sync_event, Some(mark), other.inner.device, || true)
    }

    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        let device = &self.inner.device;
        if !A::supports(Optional::LaunchHostFunc) {
            if A::supports(Optional::StreamAddCallback) {
                // Old runtimes: a stream callback runs the function the same way, but cannot be
                // captured.
                // Refused before anything is queued: the capture stays as it was
                // (`Capabilities::capture_host_funcs` is off here).
                if self.capture_sequence()?.0 != CaptureStatus::None {
                    return Err(Error::unsupported(
                        "launch_host_func during capture",
                        &device.place,
                    ));
                }
                let mut f = f;
                return self.add_callback(move |_| f());
            }
            return Err(Error::unsupported("launch_host_func", &device.place));
        }
        self.bind()?;
        let (status, id) = self.capture_sequence()?;
        match status {
            CaptureStatus::None => {
                let f = if self
                    .inner
                    .foreign_waits
                    .get()
                    .is_some_and(|waits| waits.holding())
                {
                    // Behind a wait across backends, devstream runs it (`crate::foreign`).
                    match crate::foreign::launch_host_func_behind_wait(self, f) {
                        Ok(result) => return result,
                        Err(f) => f,
                    }
                } else {
                    f
                };
                let ring = self
                    .inner
                    .host_ring
                    .get_or_init(|| HostRingPtr::new(self.inner.panic_slot().clone()));
                if let Some(mut slot) = ring.claim() {
                    let data = slot.launch_data(f);
                    // SAFETY: `host_slot` gets a filled, claimed slot of a ring that lives until
                    // this stream's queued host functions have run (StreamInner's drop).
                    return match unsafe { A::launch_host_func(self.raw(), host_slot, data) } {
                        Ok(()) => {
                            slot.launched();
                            Ok(())
                        }
                        // Dropping the claim drops `f` and frees the slot.
                        Err(e) => {
                            Err(self.capture_violation("launch_host_func", map_error::<A>(e)))
                        }
                    };
                }
                // Every slot in flight: one allocation, freed by the trampoline.
                let call = Box::new(HostCall {
                    f,
                    sink: PanicSink::Stream(self.inner.panic_slot().clone()),
                    report: None,
                });
                let data = Box::into_raw(call).cast();
                // SAFETY: `host_once` takes ownership of `data` when the runtime runs it, once.
                if let Err(e) = unsafe { A::launch_host_func(self.raw(), host_once, data) } {
                    // SAFETY: the launch failed, we still own `data`.
                    drop(unsafe { Box::from_raw(data.cast::<HostCall>()) });
                    return Err(self.capture_violation("launch_host_func", map_error::<A>(e)));
                }
                Ok(())
            }
            CaptureStatus::Active => self.capture_host_call(id, f, None),
            CaptureStatus::Invalidated => Err(Error::capture(
                "launch_host_func",
                "the stream's capture was invalidated; end it first",
            )),
        }
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        self.begin_capture_impl(mode, None)
    }

    fn end_capture(&self) -> Result<GpuGraph<A>> {
        self.end_capture_impl()
    }

    fn is_capturing(&self) -> Result<bool> {
        if !self.may_be_capturing() {
            return Ok(false);
        }
        self.bind()?;
        // SAFETY: the stream is alive.
        let status = check::<A, _>(unsafe { A::stream_is_capturing(self.raw()) })?;
        Ok(status != CaptureStatus::None)
    }

    fn wait_flag(&self, flag: &GpuFlag<A>, value: u32) -> Result<()> {
        flag.wait_on(self, value)
    }

    fn write_flag(&self, flag: &GpuFlag<A>, value: u32) -> Result<()> {
        flag.write_on(self, value)
    }

    fn wait_completion(&self, awaited: Completion) -> Result<()> {
        crate::foreign::wait_completion(self, awaited)
    }

    fn alloc(&self, len: usize) -> Result<GpuBuffer<A>> {
        let device = self.inner.device;
        if device.caps.memory_pools && self.capture_sequence()?.0 == CaptureStatus::None {
            return crate::mempool::GpuMemoryPool::default_of(device)?.alloc(self, len);
        }
        GpuBuffer::alloc(self, len)
    }

    fn alloc_from(&self, pool: &dyn DevicePool, len: usize) -> Result<GpuBuffer<A>> {
        let device = self.inner.device;
        if !device.caps.memory_pools {
            return Err(Error::unsupported("alloc_from", &device.place));
        }
        // During a capture every allocation takes the capture's private memory (the pool
        // given is only checked for its place); a capture's pool serves nothing else.
        if crate::graph_memory::is_capture_pool(pool, self) {
            if self.capture_sequence()?.0 != CaptureStatus::None {
                return GpuBuffer::alloc(self, len);
            }
            return Err(devstream_core::graph_memory::not_for_alloc_from(
                &device.place,
            ));
        }
        let pool = devstream_core::mempool::downcast::<crate::mempool::GpuMemoryPool<A>>(
            pool,
            "alloc_from",
            &device.place,
        )?;
        if self.capture_sequence()?.0 != CaptureStatus::None {
            return GpuBuffer::alloc(self, len);
        }
        pool.alloc(self, len)
    }

    fn capture_memory_pool(&self) -> Result<Arc<dyn DevicePool>> {
        crate::graph_memory::capture_memory_pool(self)
    }

    fn alloc_host(&self, len: usize) -> Result<GpuHostBuffer<A>> {
        // `cuMemHostAlloc` is synchronous: a potentially unsafe call.
        capture::check_unsafe_call(&self.inner.device.place, "alloc_host")?;
        GpuHostBuffer::alloc(self.inner.device, len)
    }

    fn copy_from_host(&self, dst: &GpuBuffer<A>, dst_offset: usize, src: &[u8]) -> Result<()> {
        crate::buffer::copy_from_host(self, dst, dst_offset, src)
    }

    buffer_copies! {
        copy_host_to_device(dst: GpuBuffer<A>, src: GpuHostBuffer<A>);
        copy_device_to_host(dst: GpuHostBuffer<A>, src: GpuBuffer<A>);
        copy_device_to_device(dst: GpuBuffer<A>, src: GpuBuffer<A>);
    }

    fn fill(&self, dst: &GpuBuffer<A>, offset: usize, len: usize, value: u8) -> Result<()> {
        crate::buffer::fill(self, dst, offset, len, value)
    }
}
