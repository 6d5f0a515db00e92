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
use devstream_core::{
    Capabilities, CaptureMode, Completion, DeviceEvent, DeviceStream, Error, EventFlags, HostFn,
    Place, Priority, Result, StreamOptions,
};
use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

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

/// A capture this stream began through devstream and that has not ended.
struct ActiveCapture {
    /// The runtime's capture sequence id (0 until it is known).
    id: u64,
    /// The graph definition it captures into (`begin_capture_to_graph`), kept alive.
    def: Option<Arc<dyn Any + Send + Sync>>,
    /// What the capture's mode forbids (`devstream_core::capture`), lifted when this drops:
    /// only after the native end, so that no forbidden call passes while the runtime would
    /// still count it against the capture.
    registration: CaptureRegistration,
}

/// The capture this stream began through devstream, and why devstream last ended one of its
/// captures (for the `end_capture` that follows).
#[derive(Default)]
struct CaptureRecord {
    active: Option<ActiveCapture>,
    invalidated: Option<String>,
}

pub(crate) struct StreamInner<A: RawApi> {
    pub(crate) raw: RawStream,
    pub(crate) device: &'static Device<A>,
    id: u64,
    native_priority: i32,
    priority: Priority,
    non_blocking: bool,
    pub(crate) kind: StreamKind,
    needs_context: bool,
    /// Internal event for `wait_stream` (created on first use).
    sync_event: OnceLock<RawEvent>,
    /// Where host functions' panics (and watched collectives' failures) are kept until
    /// `synchronize` reports them; made on first need (most streams never run a host function,
    /// and a second heap block was a third of what stream creation added to the driver call).
    panic: OnceLock<Arc<PanicSlot>>,
    /// Slots for host functions launched outside a capture (made on first use).
    host_ring: OnceLock<HostRingPtr>,
    capture: Mutex<CaptureRecord>,
    _keepalive: Option<Arc<dyn Any + Send + Sync>>,
    counted: bool,
    /// The thread whose per-thread default stream this is (`None` for every other kind).
    owner: Option<std::thread::ThreadId>,
    /// Live [`GpuStream`] handles. At zero no more work can be queued on the stream (devstream
    /// holds it only for work already queued), which is what lets an object forget it as a
    /// user once that work completed (see `users::gone`).
    pub(crate) handles: AtomicUsize,
    /// What this stream already waited for, and its record clock (enabled only for streams
    /// devstream created, with `elide_waits`).
    tracker: WaitTracker,
    /// Set once the native stream left devstream's hands (`raw_handle`) or got state of its
    /// own (attributes, attached memory, its unique id read): such a stream is destroyed at
    /// its drop, never kept for reuse (see `Device::keep_stream`).
    native_state: AtomicBool,
}

impl<A: RawApi> StreamInner<A> {
    /// The stream's panic slot, made on first need: what a host function, a graph launch or a
    /// watched collective reports to (its address is the stream's token, see
    /// `hostfn::stream_token`).
    pub(crate) fn panic_slot(&self) -> &Arc<PanicSlot> {
        self.panic.get_or_init(Arc::default)
    }

    /// The panic slot if one was made (none made: nothing was ever reported to the stream).
    pub(crate) fn panic_slot_if_made(&self) -> Option<&Arc<PanicSlot>> {
        self.panic.get()
    }

    /// Notes that the native stream left devstream or got state of its own (see
    /// `native_state`).
    pub(crate) fn mark_native_state(&self) {
        if !self.native_state.load(Ordering::Relaxed) {
            self.native_state.store(true, Ordering::Relaxed);
        }
    }

    /// Takes the first panic or failure reported to the stream since the last take.
    fn take_panic(&self) -> Result<()> {
        match self.panic.get() {
            Some(slot) => slot.take(self.id),
            None => Ok(()),
        }
    }

    /// The handle to order a release of what this stream's queued work uses after: its own,
    /// except for a per-thread stream released on another thread (where its handle names that
    /// thread's stream): then the legacy default stream, whose work waits for every blocking
    /// stream of the context, the per-thread streams of all threads included.
    pub(crate) fn release_handle(&self) -> RawStream {
        release_handle(self.raw, self.owner)
    }

    /// Takes the record of the capture this stream began (if any), adjusting the device's
    /// count of active captures.
    fn take_capture(&self) -> CaptureRecord {
        let record = match self.capture.lock() {
            Ok(mut record) => std::mem::take(&mut *record),
            Err(_) => CaptureRecord::default(),
        };
        if record.active.is_some() {
            self.device.active_captures.fetch_sub(1, Ordering::AcqRel);
        }
        record
    }

    /// Ends the capture this stream began (natively, discarding it) and remembers `reason` for
    /// the `end_capture` that follows, so that the stream stays usable. `raw` is the handle
    /// that names the stream on this thread.
    fn discard_capture(&self, raw: RawStream, reason: String) {
        if let Some(active) = self.take_capture().active {
            if let Ok(mut record) = self.capture.lock() {
                record.invalidated = Some(reason);
            }
            discard_native_capture::<A>(raw, active.id);
            drop(active);
            self.device.capture_window_close();
            // Releases that waited for the capture to end can be tracked now.
            self.device.collect();
        }
    }

    /// The last handle is gone: ends the capture this stream began, whatever its state (no
    /// `end_capture` can come any more), as every backend does. The streams that joined it
    /// leave it with it (the runtime ends a capture for all its streams), what its mode
    /// forbade is lifted, and its graph, if any, is destroyed. Off runtime callback threads
    /// (where runtime calls are not allowed) this happens at once.
    fn abandon_capture(inner: &Arc<Self>) {
        if inner
            .capture
            .lock()
            .map_or(true, |record| record.active.is_none())
        {
            return;
        }
        let inner = inner.clone();
        crate::hostfn::release_off_callback(move || {
            if inner.device.bind().is_ok() {
                inner.discard_capture(
                    inner.release_handle(),
                    "the stream that began the capture was dropped".into(),
                );
            }
        });
    }
}

/// See [`StreamInner::release_handle`] (call it on the thread that makes the release calls).
fn release_handle(raw: RawStream, owner: Option<std::thread::ThreadId>) -> RawStream {
    match owner {
        Some(owner) if Some(owner) != current_thread() => RawStream::NULL,
        _ => raw,
    }
}

impl<A: RawApi> Drop for StreamInner<A> {
    fn drop(&mut self) {
        // Most streams never ran a host function, a capture or a `wait_stream` and hold
        // nothing of another library's: only the native stream and the live count to release,
        // here and now unless this is a runtime callback thread.
        let plain = self.host_ring.get().is_none()
            && self.sync_event.get().is_none()
            && self._keepalive.is_none()
            && self
                .capture
                .get_mut()
                .is_ok_and(|record| record.active.is_none());
        if plain && !crate::hostfn::in_host_function() {
            if self.kind == StreamKind::Owned {
                // devstream's own calls, made in Relaxed mode: no capture in progress, on any
                // thread, may count them as unsafe (see `Device::keep_stream`).
                let _relaxed = CaptureModeGuard::<A>::relaxed();
                let keep = |inner: &Self| {
                    inner
                        .device
                        .keep_stream(inner.raw, inner.non_blocking, inner.native_priority)
                };
                if *self.native_state.get_mut() || !keep(self) {
                    // SAFETY: we own the stream; cuStreamDestroy returns at once and the
                    // runtime frees it after its queued work.
                    let _ = unsafe { A::stream_destroy(self.raw) };
                }
            }
            if self.counted {
                self.device.live_streams.fetch_sub(1, Ordering::Relaxed);
            }
            return;
        }
        let raw = self.raw;
        let owner = self.owner;
        let sync_event = self.sync_event.get().copied();
        let owned = self.kind == StreamKind::Owned;
        let counted = self.counted;
        let device = self.device;
        let active = self
            .capture
            .get_mut()
            .ok()
            .and_then(|record| record.active.take());
        let active_capture = active.is_some();
        let keepalive = self._keepalive.take();
        let host_ring = self.host_ring.take();
        crate::hostfn::release_off_callback(move || {
            // devstream's own calls: in Relaxed mode, as above.
            let _relaxed = CaptureModeGuard::<A>::relaxed();
            if let Some(ring) = host_ring {
                if !ring.in_flight() {
                    ring.retire();
                } else {
                    // Host functions still queued: free the ring once the stream has run
                    // past them (an event recorded after them completes only after they
                    // returned). If no event can be recorded (the stream is capturing), the
                    // ring stays allocated rather than being freed under a pending callback.
                    device.release_after_or_forget(
                        release_handle(raw, owner),
                        Box::new(move || ring.retire()),
                    );
                }
            }
            if let Some(active) = active {
                // A capture begun through devstream and never ended: end and discard it.
                discard_native_capture::<A>(raw, active.id);
                device.active_captures.fetch_sub(1, Ordering::AcqRel);
                drop(active);
            }
            if active_capture {
                device.capture_window_close();
            }
            if let Some(event) = sync_event {
                // SAFETY: the internal event belongs to this stream object; destroying it while
                // a wait on it is pending is allowed.
                let _ = unsafe { A::event_destroy(event) };
            }
            if owned {
                // SAFETY: we own the stream; cuStreamDestroy returns at once and the runtime
                // frees it after its queued work.
                let _ = unsafe { A::stream_destroy(raw) };
            }
            drop(keepalive);
            if counted {
                device.live_streams.fetch_sub(1, Ordering::Relaxed);
            }
        });
    }
}

/// Ends the native capture of `raw` (which broke a rule or was abandoned), destroys the graph
/// it produced, and drops what the capture owned.
fn discard_native_capture<A: RawApi>(raw: RawStream, id: u64) {
    // SAFETY: the stream is alive; ending returns no graph or one we destroy.
    if let Ok(graph) = unsafe { A::stream_end_capture(raw) } {
        if !graph.is_null() {
            // SAFETY: the graph returned by end-capture is ours to destroy.
            let _ = unsafe { A::graph_destroy(graph) };
        }
    }
    if let Ok(runtime) = Runtime::<A>::get() {
        let owned = runtime
            .captures
            .lock()
            .ok()
            .and_then(|mut captures| captures.remove(&id));
        // Nodes of an abandoned capture into a definition may stay in it: so do their objects.
        drop(owned.map(CaptureOwned::settle));
    }
}

/// `Error::InvalidArgument` unless every node in `nodes` is a node of `graph` (a node handle
/// from another graph, or from one since destroyed, never reaches the runtime).
pub(crate) fn check_nodes_of<A: RawApi>(
    op: &'static str,
    graph: RawGraph,
    nodes: &[RawGraphNode],
) -> Result<()> {
    if nodes.is_empty() {
        return Ok(());
    }
    // SAFETY: the graph is alive (the caller holds it, or it is a capture's graph).
    let members = check::<A, _>(unsafe { A::graph_nodes(graph) })?;
    match nodes.iter().find(|node| !members.contains(node)) {
        None => Ok(()),
        Some(node) => Err(Error::InvalidArgument(format!(
            "{op}: {node:?} is not a node of the graph"
        ))),
    }
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
        if self.inner.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && self.inner.device.active_captures.load(Ordering::Acquire) > 0
        {
            StreamInner::abandon_capture(&self.inner);
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

    /// The native capture status and sequence id.
    pub(crate) fn capture_sequence(&self) -> Result<(CaptureStatus, u64)> {
        // No capture begun through devstream on this device, and no stream or event made
        // elsewhere ever wrapped on it (through which someone else's capture could reach this
        // stream: a stream joins a capture only by waiting on an event recorded in one): the
        // stream cannot be capturing. The per-thread stream is shared with every library on
        // the thread (any of them may capture it), so it always asks. Otherwise two atomic
        // loads instead of a driver call on the paths that must know (host functions, copies).
        let device = self.inner.device;
        if self.inner.kind != StreamKind::PerThread
            && device.active_captures.load(Ordering::Acquire) == 0
            && !device.foreign_handles.load(Ordering::Acquire)
        {
            return Ok((CaptureStatus::None, 0));
        }
        // SAFETY: the stream is alive; its context is bound by the caller where needed.
        let info = check::<A, _>(unsafe { A::stream_capture_info(self.raw()) })?;
        Ok((info.status, info.id))
    }

    /// If the stream is capturing, hands `item` to the capture (it will be owned by the graph)
    /// and returns `true`.
    pub(crate) fn keep_in_capture(&self, item: Box<dyn Any + Send + Sync>) -> Result<bool> {
        match self.capture_sequence()? {
            (CaptureStatus::None, _) => Ok(false),
            (_, id) => {
                let runtime = Runtime::<A>::get()?;
                let mut captures = runtime
                    .captures
                    .lock()
                    .map_err(|_| Error::InvalidArgument("capture registry poisoned".into()))?;
                captures
                    .entry(id)
                    .or_insert_with(|| CaptureOwned::new(self.inner.panic_slot().clone()))
                    .keep
                    .push(item);
                Ok(true)
            }
        }
    }

    /// Maps an error; if it broke a rule of a capture this stream began, ends that capture
    /// (discarding it) so that the stream stays usable, and remembers why for `end_capture`.
    fn capture_violation(&self, op: &'static str, error: Error) -> Error {
        if !matches!(error, Error::Capture { .. }) {
            return error;
        }
        self.discard_capture(format!("{op} during capture invalidated it ({error})"));
        error
    }

    /// Ends the capture this stream began (natively, discarding it) and remembers `reason` for
    /// the `end_capture` that follows, so that the stream stays usable.
    fn discard_capture(&self, reason: String) {
        self.inner.discard_capture(self.raw(), reason);
    }

    fn begin_capture_impl(
        &self,
        mode: CaptureMode,
        def: Option<(&GpuGraphDef<A>, &[RawGraphNode])>,
    ) -> Result<()> {
        if self.inner.kind == StreamKind::Legacy {
            return Err(Error::capture(
                "begin_capture",
                "capture on the legacy default stream is not allowed",
            ));
        }
        self.bind()?;
        let ours = self
            .inner
            .capture
            .lock()
            .map(|record| record.active.is_some())
            .unwrap_or(false);
        // SAFETY: the stream is alive.
        let native = check::<A, _>(unsafe { A::stream_is_capturing(self.raw()) })?;
        if ours || native != CaptureStatus::None {
            let reason = "begin_capture on a stream that is already capturing; the capture was \
                          invalidated and ended";
            if ours {
                self.discard_capture(reason.into());
            } else if let Ok((_, id)) = self.capture_sequence() {
                discard_native_capture::<A>(self.raw(), id);
            }
            return Err(Error::capture("begin_capture", reason));
        }
        let mut defined = None;
        // From here until the native end, nothing on this device is elided or positioned.
        self.inner.device.capture_window_open();
        let begun = (|| -> Result<Option<Arc<dyn Any + Send + Sync>>> {
            Ok(match def {
                None => {
                    // SAFETY: the stream is alive.
                    check::<A, _>(unsafe { A::stream_begin_capture(self.raw(), mode) })?;
                    None
                }
                Some((def, dependencies)) => {
                    self.inner
                        .device
                        .require(Optional::CaptureToGraph, "begin_capture_to_graph")?;
                    self.same_device("begin_capture_to_graph", def.ordinal())?;
                    check_nodes_of::<A>("begin_capture_to_graph", def.raw_handle(), dependencies)?;
                    def.inner.shared.begin_capture()?;
                    // SAFETY: the stream and the graph are alive; every dependency is a node of
                    // the graph (checked above).
                    if let Err(e) = unsafe {
                        A::stream_begin_capture_to_graph(
                            self.raw(),
                            def.raw_handle(),
                            dependencies,
                            mode,
                        )
                    } {
                        def.inner.shared.end_capture();
                        return Err(map_error::<A>(e));
                    }
                    defined = Some(def.inner.shared.clone());
                    Some(def.inner.clone() as Arc<dyn Any + Send + Sync>)
                }
            })
        })();
        let keep_def = match begun {
            Ok(keep_def) => keep_def,
            Err(e) => {
                self.inner.device.capture_window_close();
                return Err(e);
            }
        };
        self.inner
            .device
            .active_captures
            .fetch_add(1, Ordering::AcqRel);
        if let Ok(mut record) = self.inner.capture.lock() {
            record.active = Some(ActiveCapture {
                id: 0,
                def: keep_def,
                registration: capture::register(&self.inner.device.place, mode, self.inner.id),
            });
            record.invalidated = None;
        }
        let id = match self.capture_sequence() {
            Ok((_, id)) => id,
            Err(e) => {
                self.discard_capture(format!("{e}"));
                return Err(e);
            }
        };
        let runtime = Runtime::<A>::get()?;
        if let Ok(mut captures) = runtime.captures.lock() {
            captures
                .entry(id)
                .or_insert_with(|| CaptureOwned::new(self.inner.panic_slot().clone()))
                .def = defined;
        }
        if let Ok(mut record) = self.inner.capture.lock() {
            if let Some(active) = record.active.as_mut() {
                active.id = id;
            }
        }
        Ok(())
    }

    /// Starts capturing into an existing graph: captured nodes are added to `graph` after
    /// `dependencies` (`cuStreamBeginCaptureToGraph`, CUDA 12.3+). `end_capture` returns a
    /// launchable graph instantiated from `graph`.
    pub fn begin_capture_to_graph(
        &self,
        graph: &GpuGraphDef<A>,
        dependencies: &[RawGraphNode],
        mode: CaptureMode,
    ) -> Result<()> {
        self.begin_capture_impl(mode, Some((graph, dependencies)))
    }

    /// Adds `f` as a stream callback (`cuStreamAddCallback`): it runs on a host thread after
    /// all earlier work and receives the stream's status (`Err` after a device error). Unlike
    /// host functions, callbacks cannot be captured. A panic in `f` surfaces from
    /// `synchronize`.
    pub fn add_callback(&self, f: impl FnOnce(Result<()>) + Send + 'static) -> Result<()> {
        self.inner
            .device
            .require(Optional::StreamAddCallback, "add_callback")?;
        self.bind()?;
        let call = Box::new(crate::hostfn::StreamCallbackCall::<A> {
            f: Box::new(f),
            sink: self.inner.panic_slot().clone(),
            _api: std::marker::PhantomData,
        });
        let data = Box::into_raw(call).cast();
        // SAFETY: the trampoline matches the callback signature and takes ownership of `data`
        // exactly once when the runtime calls it.
        let status = unsafe {
            A::stream_add_callback(self.raw(), crate::hostfn::stream_callback::<A>, data)
        };
        if let Err(e) = status {
            // SAFETY: the runtime refused the callback: we still own `data`.
            drop(unsafe { Box::from_raw(data.cast::<crate::hostfn::StreamCallbackCall<A>>()) });
            return Err(self.capture_violation("add_callback", map_error::<A>(e)));
        }
        Ok(())
    }

    fn end_capture_impl(&self) -> Result<GpuGraph<A>> {
        self.bind()?;
        let CaptureRecord {
            active: ours,
            invalidated,
        } = self.inner.take_capture();
        let began_here = ours.is_some();
        if ours.is_none() {
            if let Some(reason) = invalidated {
                return Err(Error::capture("end_capture", reason));
            }
        }
        let (id, def, registration) = match ours {
            Some(active) => (active.id, active.def, Some(active.registration)),
            None => match self.capture_sequence()? {
                (CaptureStatus::None, _) => {
                    return Err(Error::capture(
                        "end_capture",
                        "the stream is not capturing (begin_capture first)",
                    ))
                }
                (_, id) => (id, None, None),
            },
        };
        // SAFETY: the stream is alive and (per the runtime) capturing.
        let ended = unsafe { A::stream_end_capture(self.raw()) };
        drop(registration);
        if began_here {
            self.inner.device.capture_window_close();
        }
        let owned = Runtime::<A>::get()?
            .captures
            .lock()
            .ok()
            .and_then(|mut captures| captures.remove(&id))
            .map(CaptureOwned::settle);
        // Releases that waited for this stream's capture to end can be tracked now.
        self.inner.device.collect();
        let graph = check::<A, _>(ended)?;
        if graph.is_null() {
            return Err(Error::capture(
                "end_capture",
                "the capture was invalidated; no graph was produced",
            ));
        }
        GpuGraph::instantiate(self.inner.device, graph, def, owned)
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

    /// Notes on `event` whether this record went into a capture (where captures are tracked:
    /// two atomic loads otherwise), so that `Event::completion` never waits on graph work.
    #[inline]
    fn note_capture_of(&self, event: &GpuEvent<A>) {
        let device = self.inner.device;
        let tracked = device.active_captures.load(Ordering::Acquire) > 0
            || device.foreign_handles.load(Ordering::Acquire);
        let captured = tracked
            && self
                .capture_sequence()
                .is_ok_and(|(status, _)| status != CaptureStatus::None);
        if captured || event.inner.captured.load(Ordering::Relaxed) {
            event.inner.captured.store(captured, Ordering::Release);
        }
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
        // SAFETY: the stream is alive.
        if let Err(e) = unsafe { A::stream_synchronize(self.raw()) } {
            return Err(self.capture_violation("synchronize", map_error::<A>(e)));
        }
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
            CaptureStatus::Active => {
                let runtime = Runtime::<A>::get()?;
                let mut captures = runtime
                    .captures
                    .lock()
                    .map_err(|_| Error::InvalidArgument("capture registry poisoned".into()))?;
                let owned = captures
                    .entry(id)
                    .or_insert_with(|| CaptureOwned::new(self.inner.panic_slot().clone()));
                if let Some(def) = &owned.def {
                    if !def.add_host_function() {
                        // Refused before anything is queued: the capture stays as it was.
                        return Err(Error::unsupported(
                            "launch_host_func into a graph definition that another capture \
                             appends to",
                            &device.place,
                        ));
                    }
                }
                let call = Box::new(HostCall {
                    f,
                    sink: PanicSink::Graph(owned.host_state.clone()),
                });
                let data: *mut HostCall = Box::into_raw(call);
                // SAFETY: the HostCall is owned by the capture, then by the graph, which frees
                // it only after its last launch completed.
                match unsafe { A::launch_host_func(self.raw(), host_in_graph, data.cast()) } {
                    Ok(()) => {
                        owned.keep.push(Box::new(OwnedHostCall(data)));
                        Ok(())
                    }
                    Err(e) => {
                        drop(OwnedHostCall(data));
                        drop(captures);
                        Err(self.capture_violation("launch_host_func", map_error::<A>(e)))
                    }
                }
            }
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

    fn alloc(&self, len: usize) -> Result<GpuBuffer<A>> {
        GpuBuffer::alloc(self, len)
    }

    fn alloc_host(&self, len: usize) -> Result<GpuHostBuffer<A>> {
        // `cuMemHostAlloc` is synchronous: a potentially unsafe call.
        capture::check_unsafe_call(&self.inner.device.place, "alloc_host")?;
        GpuHostBuffer::alloc(self.inner.device, len)
    }

    fn copy_from_host(&self, dst: &GpuBuffer<A>, dst_offset: usize, src: &[u8]) -> Result<()> {
        crate::buffer::copy_from_host(self, dst, dst_offset, src)
    }

    fn copy_host_to_device(
        &self,
        dst: &GpuBuffer<A>,
        dst_offset: usize,
        src: &GpuHostBuffer<A>,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        crate::buffer::copy_host_to_device(self, dst, dst_offset, src, src_offset, len)
    }

    fn copy_device_to_host(
        &self,
        dst: &GpuHostBuffer<A>,
        dst_offset: usize,
        src: &GpuBuffer<A>,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        crate::buffer::copy_device_to_host(self, dst, dst_offset, src, src_offset, len)
    }

    fn copy_device_to_device(
        &self,
        dst: &GpuBuffer<A>,
        dst_offset: usize,
        src: &GpuBuffer<A>,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        crate::buffer::copy_device_to_device(self, dst, dst_offset, src, src_offset, len)
    }

    fn fill(&self, dst: &GpuBuffer<A>, offset: usize, len: usize, value: u8) -> Result<()> {
        crate::buffer::fill(self, dst, offset, len, value)
    }
}
