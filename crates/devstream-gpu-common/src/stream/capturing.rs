//! Capture on a stream: the native capture status, keeping objects alive for a capture, beginning
//! and ending a capture (into a new graph or an existing definition), and the capture-mode rule
//! for a stream that captures (a forbidden call invalidates and ends its capture).

use super::*;
use devstream_core::foreign::ForeignOutcome;

impl<A: RawApi> GpuStream<A> {
    /// Whether the stream may be capturing, known without a runtime call: `false` when no
    /// capture was begun through devstream on this device and no stream or event made
    /// elsewhere ever wrapped on it (through which someone else's capture could reach this
    /// stream: a stream joins a capture only by waiting on an event recorded in one). The
    /// per-thread stream is shared with every library on the thread (any of them may capture
    /// it), so it may always be. Two atomic loads instead of a driver call on the paths that
    /// must know (host functions, copies, a wait across backends asked for inside another
    /// runtime's host function, where that runtime may forbid the call).
    pub(crate) fn may_be_capturing(&self) -> bool {
        let device = self.inner.device;
        self.inner.kind == StreamKind::PerThread
            || device.active_captures.load(Ordering::Acquire) != 0
            || device.foreign_handles.load(Ordering::Acquire)
    }

    /// Whether this stream may capture (or have joined a capture) now: asked of the runtime
    /// only where [`GpuStream::may_be_capturing`]; an error counts as "may".
    pub(crate) fn may_capture_now(&self) -> bool {
        self.may_be_capturing() && !matches!(self.capture_sequence(), Ok((CaptureStatus::None, _)))
    }

    /// The native capture status and sequence id.
    pub(crate) fn capture_sequence(&self) -> Result<(CaptureStatus, u64)> {
        if !self.may_be_capturing() {
            return Ok((CaptureStatus::None, 0));
        }
        // Status and id only: any thread may ask while another ends the stream's capture.
        // SAFETY: the stream is alive; its context is bound by the caller where needed.
        check::<A, _>(unsafe { A::stream_capture_sequence(self.raw()) })
    }

    /// Captures a host-function node running `f`, then reporting `report`'s error (if given) to
    /// the stream of each launch, into capture `id` (active on this stream). Owned by the
    /// capture, then by its graph.
    pub(crate) fn capture_host_call(
        &self,
        id: u64,
        f: HostFn,
        report: Option<Arc<ForeignOutcome>>,
    ) -> Result<()> {
        let launched = self.with_capture_owned(id, |owned| {
            if let Some(def) = &owned.def {
                if !def.add_host_function() {
                    // Refused before anything is queued: the capture stays as it was.
                    return Err(Error::unsupported(
                        "launch_host_func into a graph definition that another capture appends to",
                        &self.inner.device.place,
                    ));
                }
            }
            let call = Box::new(HostCall {
                f,
                sink: PanicSink::Graph(owned.host_state.clone()),
                report,
            });
            let data: *mut HostCall = Box::into_raw(call);
            // SAFETY: the HostCall is owned by the capture, then by the graph, which frees it
            // only after its last launch completed.
            match unsafe { A::launch_host_func(self.raw(), host_in_graph, data.cast()) } {
                Ok(()) => {
                    owned.keep.push(Box::new(OwnedHostCall(data)));
                    Ok(Ok(()))
                }
                Err(e) => {
                    drop(OwnedHostCall(data));
                    Ok(Err(e))
                }
            }
        })??;
        // The registry's lock is released: the violation may end the capture.
        launched.map_err(|e| self.capture_violation("launch_host_func", map_error::<A>(e)))
    }

    /// If the stream is capturing, hands `item` to the capture (it will be owned by the graph)
    /// and returns `true`.
    pub(crate) fn keep_in_capture(&self, item: Box<dyn Any + Send + Sync>) -> Result<bool> {
        match self.capture_sequence()? {
            (CaptureStatus::None, _) => Ok(false),
            (_, id) => self.with_capture_owned(id, |owned| {
                owned.keep.push(item);
                true
            }),
        }
    }

    /// Runs `f` on what the capture `id` (one this stream takes part in) owns, made on first
    /// use, under the registry's lock.
    pub(crate) fn with_capture_owned<R>(
        &self,
        id: u64,
        f: impl FnOnce(&mut CaptureOwned) -> R,
    ) -> Result<R> {
        let runtime = Runtime::<A>::get()?;
        let mut captures = runtime
            .captures
            .lock()
            .map_err(|_| Error::InvalidArgument("capture registry poisoned".into()))?;
        let owned = captures
            .entry(id)
            .or_insert_with(|| CaptureOwned::new(self.inner.panic_slot().clone()));
        Ok(f(owned))
    }

    /// Maps an error; if it broke a rule of a capture this stream began, ends that capture
    /// (discarding it) so that the stream stays usable, and remembers why for `end_capture`.
    pub(super) fn capture_violation(&self, op: &'static str, error: Error) -> Error {
        if !matches!(error, Error::Capture { .. }) {
            return error;
        }
        self.discard_capture(format!("{op} during capture invalidated it ({error})"));
        error
    }

    /// Ends the capture this stream began (natively, discarding it) and remembers `reason` for
    /// the `end_capture` that follows, so that the stream stays usable.
    pub(super) fn discard_capture(&self, reason: String) {
        self.inner.discard_capture(self.raw(), reason);
    }

    pub(super) fn begin_capture_impl(
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
        // What the mode forbids is registered before the native begin: registered after it,
        // another thread's call that the mode forbids (a synchronize of another stream in
        // `Global` mode) could pass devstream's check in between, reach the runtime while the
        // capture runs and invalidate it, instead of being refused with `Error::Capture`.
        // Refused a moment before the capture exists is as if the begin came first. Dropped
        // (lifted) if the begin fails.
        let registration = capture::register(&self.inner.device.place, mode, self.inner.id);
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
                registration,
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

    pub(super) fn end_capture_impl(&self) -> Result<GpuGraph<A>> {
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
        let (ended, owned) = Runtime::<A>::get()?.end_capture_locked(self.raw(), id);
        drop(registration);
        if began_here {
            self.inner.device.capture_window_close();
        }
        let owned = owned.map(CaptureOwned::settle);
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

    /// Notes on `event` whether this record went into a capture (where captures are tracked:
    /// two atomic loads otherwise), so that `Event::completion` never waits on graph work.
    #[inline]
    pub(super) fn note_capture_of(&self, event: &GpuEvent<A>) {
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
}
