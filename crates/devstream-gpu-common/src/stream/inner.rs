//! The record every handle of one stream shares ([`StreamInner`]): the native handle, its
//! owner thread, the capture it began, its host-function panic slot; and what releasing it
//! involves (ending an abandoned native capture, destroying the handle on the right thread).

use super::*;

/// A capture this stream began through devstream and that has not ended.
pub(super) struct ActiveCapture {
    /// The runtime's capture sequence id (0 until it is known).
    pub(super) id: u64,
    /// The graph definition it captures into (`begin_capture_to_graph`), kept alive.
    pub(super) def: Option<Arc<dyn Any + Send + Sync>>,
    /// What the capture's mode forbids (`devstream_core::capture`), lifted when this drops:
    /// only after the native end, so that no forbidden call passes while the runtime would
    /// still count it against the capture.
    pub(super) registration: CaptureRegistration,
}

/// The capture this stream began through devstream, and why devstream last ended one of its
/// captures (for the `end_capture` that follows).
#[derive(Default)]
pub(super) struct CaptureRecord {
    pub(super) active: Option<ActiveCapture>,
    pub(super) invalidated: Option<String>,
}

pub(crate) struct StreamInner<A: RawApi> {
    pub(crate) raw: RawStream,
    pub(crate) device: &'static Device<A>,
    pub(crate) id: u64,
    pub(super) native_priority: i32,
    pub(super) priority: Priority,
    pub(super) non_blocking: bool,
    pub(crate) kind: StreamKind,
    pub(super) needs_context: bool,
    /// Internal event for `wait_stream` (created on first use).
    pub(super) sync_event: OnceLock<RawEvent>,
    /// Where host functions' panics (and watched collectives' failures) are kept until
    /// `synchronize` reports them; made on first need (most streams never run a host function,
    /// and a second heap block was a third of what stream creation added to the driver call).
    pub(super) panic: OnceLock<Arc<PanicSlot>>,
    /// Slots for host functions launched outside a capture (made on first use).
    pub(super) host_ring: OnceLock<HostRingPtr>,
    pub(super) capture: Mutex<CaptureRecord>,
    pub(super) _keepalive: Option<Arc<dyn Any + Send + Sync>>,
    pub(super) counted: bool,
    /// The thread whose per-thread default stream this is (`None` for every other kind).
    pub(super) owner: Option<std::thread::ThreadId>,
    /// Live [`GpuStream`] handles. At zero no more work can be queued on the stream (devstream
    /// holds it only for work already queued), which is what lets an object forget it as a
    /// user once that work completed (see `users::gone`).
    pub(crate) handles: AtomicUsize,
    /// What this stream already waited for, and its record clock (enabled only for streams
    /// devstream created, with `elide_waits`).
    pub(super) tracker: WaitTracker,
    /// Set once the native stream left devstream's hands (`raw_handle`) or got state of its
    /// own (attributes, attached memory, its unique id read): such a stream is destroyed at
    /// its drop, never kept for reuse (see `Device::keep_stream`).
    pub(super) native_state: AtomicBool,
    /// Records of devstream's own events on this stream whose native call has returned: the
    /// clock of [`crate::completion::RecordOrder`].
    pub(crate) own_records: std::sync::atomic::AtomicU64,
    /// Its waits across backends not released yet and the host functions queued behind them
    /// (made with the stream's first wait across backends; see `crate::foreign`).
    pub(crate) foreign_waits: OnceLock<Arc<crate::foreign::HeldWaits>>,
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
    pub(super) fn take_panic(&self) -> Result<()> {
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
    pub(super) fn take_capture(&self) -> CaptureRecord {
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
    pub(super) fn discard_capture(&self, raw: RawStream, reason: String) {
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
    pub(super) fn abandon_capture(inner: &Arc<Self>) {
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
pub(super) fn release_handle(raw: RawStream, owner: Option<std::thread::ThreadId>) -> RawStream {
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
pub(super) fn discard_native_capture<A: RawApi>(raw: RawStream, id: u64) {
    let Ok(runtime) = Runtime::<A>::get() else {
        return;
    };
    let (ended, owned) = runtime.end_capture_locked(raw, id);
    if let Ok(graph) = ended {
        if !graph.is_null() {
            // SAFETY: the graph returned by end-capture is ours to destroy.
            let _ = unsafe { A::graph_destroy(graph) };
        }
    }
    // Nodes of an abandoned capture into a definition may stay in it: so do their objects.
    drop(owned.map(CaptureOwned::settle));
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
