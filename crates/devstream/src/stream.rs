//! The facade stream.

use crate::dispatch::Member;
use crate::registry::{self, with_backend};
use crate::{DeviceBuffer, Event, Flag, Graph, HostBuffer};
use devstream_core::{
    current, foreign, Capabilities, CaptureMode, Completion, DeviceBackend, HostFn, Place,
    Priority, Result, StreamOptions,
};
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use tracing::trace_span;

/// Restores the previous current stream of the place when dropped (see [`Stream::make_current`]).
pub type StreamGuard = current::CurrentGuard<Stream>;

/// One facade op on a stream: opens its `tracing` span and runs `$body` with `$hook` bound to
/// the timeline recorder's hook (cargo feature `trace`) or to [`Untraced`]. `$kind` is
/// `Device` for work in stream order (timed on the device where the place can) or `Host`.
macro_rules! op {
    ($name:expr, $stream:expr, $kind:ident, |$hook:ident| $body:expr) => {{
        // `level_enabled!` is one relaxed load; only then is the span built, in a cold function
        // of its own, so that the op path carries no span to drop (no unwinding landing pad, no
        // saved registers for it) while no subscriber listens.
        if tracing::level_enabled!(tracing::Level::TRACE) {
            in_span(
                || trace_span!($name, stream = $stream.id(), place = %StreamApi::place($stream)),
                || op_hook!($name, $stream, $kind, |$hook| $body),
            )
        } else {
            op_hook!($name, $stream, $kind, |$hook| $body)
        }
    }};
}

/// `body()`, inside the span `span` makes while a subscriber listens at TRACE level: as in
/// [`op!`], `level_enabled!` is one relaxed load and only then is the span built, in a cold
/// function of its own.
#[inline(always)]
pub(crate) fn spanned<T>(span: impl FnOnce() -> tracing::Span, body: impl FnOnce() -> T) -> T {
    if tracing::level_enabled!(tracing::Level::TRACE) {
        in_span(span, body)
    } else {
        body()
    }
}

/// Runs `body` inside the span `span` makes (the op path of [`op!`] while a subscriber listens
/// at TRACE level).
#[cold]
#[inline(never)]
pub(crate) fn in_span<T>(span: impl FnOnce() -> tracing::Span, body: impl FnOnce() -> T) -> T {
    let _entered = span().entered();
    body()
}

/// Without the `trace` feature the op path has no recorder code at all.
#[cfg(not(feature = "trace"))]
macro_rules! op_hook {
    ($name:expr, $stream:expr, $kind:ident, |$hook:ident| $body:expr) => {{
        let $hook = Untraced;
        $body
    }};
}

/// With the `trace` feature and no recording running, the op path pays one relaxed load and a
/// branch; the recording path is a separate, cold function.
#[cfg(feature = "trace")]
macro_rules! op_hook {
    ($name:expr, $stream:expr, $kind:ident, |$hook:ident| $body:expr) => {{
        if crate::trace::recorder::is_active() {
            crate::trace::recorder::traced(
                $name,
                $stream,
                crate::trace::recorder::OpKind::$kind,
                |$hook| $body,
            )
        } else {
            let $hook = Untraced;
            $body
        }
    }};
}

/// The recorder hook's stand-in on the untraced path: every note is a no-op.
#[derive(Clone, Copy)]
pub(crate) struct Untraced;

impl Untraced {
    #[inline(always)]
    pub(crate) fn records(&self, _event: &Event) {}
    #[inline(always)]
    pub(crate) fn waits_event(&self, _event: &Event) {}
    #[inline(always)]
    pub(crate) fn waits_stream(&self, _other: &Stream) {}
}

// The operations of a stream, one row each (see `dispatch::stream_api!`): the dispatch trait,
// its implementation for every backend and the `Stream` method come from these rows. Before
// the `Stream` enum: `enum_dispatch` must meet the trait first.
crate::dispatch::stream_api! {
    /// The stream's place.
    Plain fn place(&self) -> &Place;
    /// A process-unique id.
    Plain fn id(&self) -> u64;
    /// The priority, read back from the clamped native number.
    Plain fn priority(&self) -> Priority;
    /// The clamped native priority (lower is higher, as in CUDA).
    Plain fn native_priority(&self) -> i32;
    /// `true` unless the stream synchronises with the legacy default stream.
    Plain fn is_non_blocking(&self) -> bool;
    /// The place's capabilities.
    Plain fn capabilities(&self) -> Capabilities;
    /// `true` iff all submitted work is done (CuPy's `done`, torch's `query()`).
    Host fn query(&self) -> Result<bool>;
    /// Blocks until all submitted work is done; returns the first error that work raised.
    Custom fn synchronize(&self) -> Result<()>;
    /// A future that is ready when all work submitted to this stream so far is done, with the
    /// result [`synchronize`](Stream::synchronize) would give then (the first error of that
    /// work, e.g. [`Error::HostFuncPanicked`](crate::Error::HostFuncPanicked); observed, not
    /// taken, so a later `synchronize` still reports it).
    ///
    /// Never blocks and runs on any async runtime (wakers only). No thread is started per
    /// future: each backend completes it through its own completion path (CPU: the stream's
    /// completion-counter waiters; CUDA/HIP: a pooled internal notifier stream of the device
    /// that waits for an event recorded here and runs a stream callback, so nothing is added to
    /// this stream; wgpu: the queue's submitted-work-done callbacks; plug-ins: a callback on the
    /// stream (`stream_add_callback`) or one poll thread per plug-in runtime). Dropping it before
    /// it is ready changes nothing on the stream's order or results (on CUDA/HIP its notifier
    /// stays held until the work completes: a queued wait cannot be withdrawn). While the stream
    /// captures it is a ready [`Error::Capture`](crate::Error::Capture), and the capture stays
    /// valid.
    ///
    /// ```
    /// use devstream::{Place, Result, Stream};
    /// async fn step(s: &Stream) -> Result<()> {
    ///     s.launch_host_func(|| { /* work */ })?;
    ///     // `Send + Unpin + 'static`: await it, spawn it, select on it, ...
    ///     s.completion().await?;
    ///     assert!(s.query()?);
    ///     Ok(())
    /// }
    /// ```
    ///
    /// Inside a host function, do not *block* on a completion of work queued after it (as with
    /// `synchronize`, that work cannot run before the host function returns); handing the
    /// future to an executor is fine.
    Host fn completion(&self) -> Completion;
    /// A new event (default flags) recorded on this stream.
    Custom fn record_event(&self) -> Result<Event>;
    /// Records `event` on this stream (same as `event.record(&stream)`).
    Custom fn record(&self, event: &Event) -> Result<()>;
    /// Work submitted after this call waits for what `event` captured. Returns at once.
    Custom fn wait_event(&self, event: &Event) -> Result<()>;
    /// Work submitted after this call waits for all work submitted to `other` so far.
    Custom fn wait_stream(&self, other: &Stream) -> Result<()>;
    /// Runs `f` on the host after all earlier work of the stream; later work waits for it.
    Custom fn launch_host_func(&self, f: HostFn) -> Result<()>;
    /// Starts capturing: later work is recorded, not run.
    Host fn begin_capture(&self, mode: CaptureMode) -> Result<()>;
    /// Ends capturing and returns the graph.
    Host fn end_capture(&self) -> Result<Graph>;
    /// Whether the stream is capturing.
    Plain fn is_capturing(&self) -> Result<bool>;
    /// Later work waits until `flag` ≥ `value`. On CUDA and HIP, read [`Flag`]'s note on
    /// waits that only the host ends before holding a device at a flag across threads.
    Device fn wait_flag(&self, flag: &Flag, value: u32) -> Result<()>;
    /// Writes `value` to `flag` in stream order.
    Device fn write_flag(&self, flag: &Flag, value: u32) -> Result<()>;
    /// Later work waits until `awaited` is ready (work of any backend, e.g. another backend's
    /// `Event::completion`); an error it ends with becomes this stream's error, reported by
    /// `synchronize`. Returns at once; no thread is created or blocked for the wait.
    /// `Error::Unsupported` where the place's `foreign_waits` capability is off.
    Device fn wait_completion(&self, awaited: Completion) -> Result<()>;
    /// Device memory of `len` bytes for work on this stream.
    Host fn alloc(&self, len: usize) -> Result<DeviceBuffer>;
    /// Zeroed host memory for asynchronous copies (pinned where the platform has it).
    Plain fn alloc_host(&self, len: usize) -> Result<HostBuffer>;
    /// Copies `src` into `dst` at `dst_offset`; `src` is staged before return.
    Device fn copy_from_host(&self, dst: &DeviceBuffer, dst_offset: usize, src: &[u8]) -> Result<()>;
    /// Asynchronous host→device copy.
    Device fn copy_host_to_device(
        &self,
        dst: &DeviceBuffer,
        dst_offset: usize,
        src: &HostBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// Asynchronous device→host copy.
    Device fn copy_device_to_host(
        &self,
        dst: &HostBuffer,
        dst_offset: usize,
        src: &DeviceBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// Asynchronous device→device copy.
    Device fn copy_device_to_device(
        &self,
        dst: &DeviceBuffer,
        dst_offset: usize,
        src: &DeviceBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// Sets `len` bytes of `dst` from `offset` to `value`.
    Device fn fill(&self, dst: &DeviceBuffer, offset: usize, len: usize, value: u8) -> Result<()>;
    /// Device memory of `len` bytes from `pool` (the `Stream` method is in `pool.rs`).
    Custom fn alloc_from(&self, pool: &dyn devstream_core::DevicePool, len: usize) -> Result<DeviceBuffer>;
    /// The private memory pool of the capture in progress (the `Stream` method is in `pool.rs`).
    Custom fn capture_memory_pool(&self) -> Result<std::sync::Arc<dyn devstream_core::DevicePool>>;
}

crate::dispatch::facade_enum! {
    /// An ordered queue of work on a place, dispatched to the backend compiled in for it.
    ///
    /// Cheap to clone (a handle); clones compare and hash equal; streams are ordered by place, then
    /// id. Dropping the last handle never blocks and never frees what queued work still uses.
    ///
    /// ```
    /// use devstream::{Place, Stream};
    /// let s = Stream::new(&Place::Cpu).unwrap();
    /// let t = s.clone();
    /// assert_eq!(s, t);
    /// assert_ne!(s, Stream::new(&Place::Cpu).unwrap());
    /// s.synchronize().unwrap();
    /// ```
    pub enum Stream(StreamApi, "stream"): Clone
        = [CpuStream, CudaStream, HipStream, WgpuStream, PluginStream];
}

impl Stream {
    /// A new stream with [`Priority::Normal`], non-blocking.
    #[inline]
    pub fn new(place: &Place) -> Result<Stream> {
        Stream::with_options(place, StreamOptions::default())
    }

    /// A builder for a stream with a priority or blocking behaviour.
    ///
    /// ```
    /// use devstream::{Place, Priority, Stream};
    /// let s = Stream::builder(&Place::Cpu).priority(Priority::High).blocking(false).build().unwrap();
    /// assert_eq!(s.priority(), Priority::High);
    /// ```
    #[inline]
    pub fn builder(place: &Place) -> StreamBuilder {
        StreamBuilder {
            place: place.clone(),
            options: StreamOptions::default(),
        }
    }

    /// A new stream with explicit options.
    #[inline]
    pub fn with_options(place: &Place, options: StreamOptions) -> Result<Stream> {
        spanned(
            || trace_span!("devstream.stream_new", place = %place),
            || with_backend!(place, B => B::new_stream(place, options).map(Member::wrap)),
        )
    }

    /// The place's legacy default stream (CUDA's null stream) where the backend has one,
    /// otherwise its default stream. The same stream every call.
    #[inline]
    pub fn default_stream(place: &Place) -> Result<Stream> {
        with_backend!(place, B => B::default_stream(place).map(Member::wrap))
    }

    /// The calling thread's per-thread default stream, where the backend has one
    /// (`Error::Unsupported` otherwise).
    #[inline]
    pub fn per_thread(place: &Place) -> Result<Stream> {
        with_backend!(place, B => B::per_thread_stream(place).map(Member::wrap))
    }

    /// A stream from the place's pool: round robin over 32 lazily created streams per priority
    /// level (PyTorch's `getStreamFromPool`).
    #[inline]
    pub fn from_pool(place: &Place, priority: Priority) -> Result<Stream> {
        registry::pool_stream(place, priority)
    }

    /// The backend handle inside, e.g. `stream.backend::<devstream::cpu::CpuStream>()`.
    #[inline]
    pub fn backend<T: Member<Stream>>(&self) -> Option<&T> {
        T::unwrap_ref(self)
    }

    /// A new event (default flags) recorded on this stream.
    #[inline]
    pub fn record_event(&self) -> Result<Event> {
        op!("devstream.record_event", self, Device, |hook| {
            StreamApi::record_event(self).inspect(|event| hook.records(event))
        })
    }
    /// Records `event` on this stream (same as `event.record(&stream)`).
    #[inline]
    pub fn record(&self, event: &Event) -> Result<()> {
        op!("devstream.record", self, Device, |hook| {
            StreamApi::record(self, event).inspect(|()| hook.records(event))
        })
    }
    /// Work submitted after this call waits for what `event` captured. Returns at once.
    ///
    /// `event` may belong to another backend (a CPU stream waiting on a wgpu event, ...): the
    /// wait has the same meaning, and no host thread is blocked or created for it (where the
    /// place's `foreign_waits` capability is off, such a wait answers `Error::Unsupported`).
    #[inline]
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        op!("devstream.wait_event", self, Device, |hook| {
            if crate::cross::is_foreign_event(self, event) {
                return crate::cross::wait_foreign_event(self, "wait_event", event)
                    .inspect(|()| hook.waits_event(event));
            }
            StreamApi::wait_event(self, event).inspect(|()| hook.waits_event(event))
        })
    }
    /// Work submitted after this call waits for all work submitted to `other` so far. `other`
    /// may belong to another backend, as with [`wait_event`](Stream::wait_event).
    #[inline]
    pub fn wait_stream(&self, other: &Stream) -> Result<()> {
        op!("devstream.wait_stream", self, Device, |hook| {
            if crate::cross::is_foreign_stream(self, other) {
                return crate::cross::wait_foreign_stream(self, other)
                    .inspect(|()| hook.waits_stream(other));
            }
            StreamApi::wait_stream(self, other).inspect(|()| hook.waits_stream(other))
        })
    }
    /// Runs `f` on the host after all earlier work of the stream; later work waits for it.
    /// Captured, it runs once per `Graph::launch`. A panic in `f` surfaces from `synchronize`.
    #[inline]
    pub fn launch_host_func(&self, mut f: impl FnMut() + Send + 'static) -> Result<()> {
        // Blocking calls made by `f` know which backend's host function they run in (see
        // `devstream_core::foreign`, "Host functions").
        let backend = foreign::BackendKey::of(StreamApi::place(self));
        op!("devstream.launch_host_func", self, Device, |_op| {
            StreamApi::launch_host_func(
                self,
                Box::new(move || {
                    let _running = foreign::enter_host_fn(backend);
                    f()
                }),
            )
        })
    }
    /// Runs `f` on the host with the bytes of `buffers` (host buffers of any backend, each at
    /// most once), after all earlier work of this stream and after every use of the buffers
    /// submitted before this call, on any stream; copies of the buffers submitted after it,
    /// on any stream, run after it; later work of this stream waits for it. Returns at once.
    ///
    /// The order is kept by waits, never by blocking a thread: this stream first waits for the
    /// buffers' uses submitted before (across backends where the buffer's backend differs),
    /// and the buffers' later copies wait for the host function. So a pipeline stage on one
    /// backend can fill another backend's pinned buffer while that backend's copy of it is
    /// already queued behind the stage, which `HostBuffer::write` in a plain host function
    /// must refuse (`Error::WouldDeadlock`). Host reads and writes of the buffers block until
    /// it has run. The host function is ordered after the earlier uses, but does not take
    /// their errors (they surface on their own streams).
    ///
    /// `Error::InvalidArgument` where a buffer is given twice or its place's
    /// `host_func_buffers` capability is off; `Error::Unsupported` where this stream's place
    /// cannot wait on other backends (`foreign_waits`); `Error::Capture` while this stream
    /// captures (a graph's replays are not ordered against the buffers' copies). On an error
    /// nothing is submitted.
    ///
    /// ```
    /// use devstream::{Place, Stream};
    /// let producer = Stream::new(&Place::Cpu).unwrap();
    /// let device = Stream::new(&Place::Cpu).unwrap();
    /// let staging = device.alloc_host(4).unwrap();
    /// let dev = device.alloc(4).unwrap();
    /// producer
    ///     .launch_host_func_with(&[&staging], |bytes| bytes[0].copy_from_slice(&[1, 2, 3, 4]))
    ///     .unwrap();
    /// // Queued at once: it waits for the host function by itself.
    /// device.copy_host_to_device(&dev, 0, &staging, 0, 4).unwrap();
    /// let back = device.alloc_host(4).unwrap();
    /// device.copy_device_to_host(&back, 0, &dev, 0, 4).unwrap();
    /// assert_eq!(back.to_vec().unwrap(), [1, 2, 3, 4]);
    /// ```
    pub fn launch_host_func_with(
        &self,
        buffers: &[&HostBuffer],
        f: impl FnMut(&mut [&mut [u8]]) + Send + 'static,
    ) -> Result<()> {
        op!("devstream.launch_host_func_with", self, Device, |_op| {
            crate::host_fn_buffers::launch(self, buffers, f)
        })
    }
    /// Blocks until all submitted work is done; returns the first error that work raised.
    /// Inside a host function, `Error::WouldDeadlock` where that work may wait for work queued
    /// after the host function.
    #[inline]
    pub fn synchronize(&self) -> Result<()> {
        op!("devstream.synchronize", self, Host, |_op| {
            crate::cross::check_host_fn_stream_wait(self)?;
            StreamApi::synchronize(self)
        })
    }
    /// Makes this stream the calling thread's current stream for its place until the guard
    /// drops (like `with stream:`). Guards restore in LIFO order.
    #[inline]
    pub fn make_current(&self) -> StreamGuard {
        current::make_current(self.place(), self.clone())
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Stream) -> bool {
        self.id() == other.id() && self.place() == other.place()
    }
}
impl Eq for Stream {}
impl Hash for Stream {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.place().hash(state);
        self.id().hash(state);
    }
}
impl PartialOrd for Stream {
    fn partial_cmp(&self, other: &Stream) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Stream {
    fn cmp(&self, other: &Stream) -> Ordering {
        (self.place(), self.id()).cmp(&(other.place(), other.id()))
    }
}

impl std::fmt::Display for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<Stream {} on {}>", self.id(), self.place())
    }
}

/// Builds a [`Stream`] with a priority and blocking behaviour (paddle's
/// `Stream(device, priority, blocking)`).
#[derive(Clone, Debug)]
#[must_use]
pub struct StreamBuilder {
    place: Place,
    options: StreamOptions,
}

impl StreamBuilder {
    /// The priority ([`Priority::Normal`] by default); clamped into the place's range.
    #[inline]
    pub fn priority(mut self, priority: Priority) -> Self {
        self.options.priority = priority;
        self
    }
    /// Whether the stream synchronises with the legacy default stream (default `false`).
    #[inline]
    pub fn blocking(mut self, blocking: bool) -> Self {
        self.options.non_blocking = !blocking;
        self
    }
    /// Whether `wait_event` / `wait_stream` skip waits the stream already has (default on,
    /// see [`crate::elide`]); `false` issues every wait natively.
    ///
    /// ```
    /// use devstream::{Place, Stream};
    /// let a = Stream::new(&Place::Cpu).unwrap();
    /// let b = Stream::builder(&Place::Cpu).elide_waits(false).build().unwrap();
    /// b.wait_stream(&a).unwrap();
    /// ```
    #[inline]
    pub fn elide_waits(mut self, elide: bool) -> Self {
        self.options.elide_waits = elide;
        self
    }
    /// Creates the stream.
    #[inline]
    pub fn build(self) -> Result<Stream> {
        Stream::with_options(&self.place, self.options)
    }
}
