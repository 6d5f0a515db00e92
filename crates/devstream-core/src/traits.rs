//! The backend traits: one interface every device implements.
//!
//! A backend crate implements [`DeviceBackend`] (the registry entry: places, capabilities,
//! constructors) and the handle traits [`DeviceStream`], [`DeviceEvent`], [`DeviceGraph`],
//! [`DeviceFlag`], [`DeviceBuffer`] and [`HostBuffer`]. Code that knows its backend at compile
//! time uses them directly and pays no dispatch:
//!
//! ```
//! use devstream_core::{DeviceStream, Result};
//! fn ping_pong<S: DeviceStream>(a: &S, b: &S) -> Result<()> {
//!     b.wait_stream(a)?;          // b's later work runs after a's current work
//!     let done = b.record_event()?;
//!     a.wait_event(&done)?;       // and a's later work after that
//!     a.synchronize()
//! }
//! ```
//!
//! The facade crate `devstream` wraps each backend's handles into run-time dispatched
//! `Stream`/`Event`/`Graph` enums; [`crate::dynamic`] erases them behind trait objects for
//! backends the facade does not name (Rust-registered custom devices, out-of-tree backends).
//!
//! # Required and optional operations
//!
//! [`DeviceStream`] has two kinds of operations:
//!
//! * **Required**, which every backend implements: `place`, `id`, `priority`,
//!   `native_priority`, `is_non_blocking`, `capabilities`, `query`, `synchronize`,
//!   `completion`, `record`, `record_event`, `wait_event` and `wait_stream`.
//! * **Optional**, with a default body answering [`Error::Unsupported`] naming the operation
//!   and the stream's place: `launch_host_func` (capability `host_funcs`), `begin_capture` and
//!   `end_capture` (`capture`), `wait_flag` and `write_flag` (`flags`), `wait_completion`
//!   (`foreign_waits`), `alloc`, `alloc_host`, the copies and `fill` (`buffers`), `alloc_from`
//!   (`memory_pools`, with [`DeviceBackend::default_pool`] and [`DeviceBackend::new_pool`]: see
//!   [`crate::mempool`] for the rules every pool obeys), `capture_memory_pool` (`capture_alloc`,
//!   with [`DeviceGraph::memory_pool`]: allocation on a capturing stream takes graph-private
//!   memory, see [`crate::graph_memory`]; off, it answers `Unsupported` and the capture goes
//!   on). `is_capturing` defaults to `Ok(false)`: a stream of a place without capture is never
//!   capturing.
//!
//! **An operation left at its default has its capability off**, and an operation whose
//! capability is on never answers `Unsupported` for want of the capability (it may still answer
//! it for one argument, as `launch_host_func` during a capture where `capture_host_funcs` is
//! off). The conformance suite checks both directions on every place
//! (`tests/conformance/contract.rs`). A backend without graphs, flags or buffers names the
//! uninhabited placeholders [`UnsupportedGraph`], [`UnsupportedFlag`], [`UnsupportedBuffer`] and
//! [`UnsupportedHostBuffer`] as its associated types; its [`DeviceBackend::new_flag`] answers
//! `Unsupported`. Adding an optional operation means: here, the method with its default (and a
//! capability in [`Capabilities`] if no existing one covers it); one row in the erased layer
//! (`dynamic/stream.rs`) and one in the facade (`devstream/src/stream.rs`); the method in the
//! backends that have it (switching the capability on); a conformance test. The other backends
//! compile unchanged and answer `Unsupported`.
//!
//! # Rules every implementation obeys
//!
//! The conformance suite (`tests/conformance/`) checks each rule on every place; its sections
//! point back here. `docs/SEMANTICS.md` states the same rules as a user meets them.
//!
//! ## Ordering
//! * Work on one stream runs in submission order; `wait_event` orders only later work and never
//!   blocks the host, whichever backend the event belongs to. `wait_stream(other)` is a wait on
//!   an event recorded on `other` now.
//! * `query` is true iff all submitted work is done; `synchronize` blocks until then.
//!   `completion` is the same as a [`Completion`] future, completed by the backend's own
//!   mechanism (no thread and no polling loop per future).
//! * A never-recorded event queries true; re-recording replaces what it captures.
//! * Dropping a handle with queued work never blocks and never frees what that work still uses.
//!
//! ## Errors
//! * Every failure is a typed [`Error`]; nothing panics or aborts on bad input.
//! * `synchronize` returns the first error any work submitted before it raised (a panicking host
//!   function is such an error, `Error::HostFuncPanicked`, and is contained: no worker or
//!   callback thread dies of it), once: the next `synchronize` reports only errors raised
//!   since, unless the device itself failed (below).
//! * An operation whose capability is off answers [`Error::Unsupported`] naming the operation
//!   and the place; objects of different places combined answer `Error::PlaceMismatch`.
//! * A lost or faulted device (a lost wgpu device, a sticky CUDA context error, a plug-in whose
//!   device fails) is an error (`Error::Driver`, naming the failure) from every `synchronize`,
//!   `query`, `Event::synchronize` and `Event::query` covering work on it, from then on: work
//!   that never ran is never reported complete, and host functions queued behind it do not run.
//!   A failure that leaves the device working (a host function's panic) is reported by
//!   `synchronize`, and later work, host functions included, runs.
//! * A size the place cannot provide is `Error::OutOfMemory` or `Error::InvalidArgument`, never a
//!   panic or an abort (host memory through [`crate::memory::zeroed`]); a range outside its buffer,
//!   also one whose `offset + len` overflows, is `InvalidArgument` ([`check_range`]); 0 bytes is
//!   an empty buffer, and copies and fills of 0 bytes up to a buffer's length succeed.
//!
//! ## Host functions
//! * A host function runs once per submission (once per `Graph::launch` when captured), in
//!   stream order, and later work of its stream waits for it.
//! * It may call any devstream operation, on its own stream, other streams or other places. What
//!   it sees is stream order up to itself: work ordered before it is complete; its own stream's
//!   `query` answers `false`; host-buffer reads and writes see the copies queued before it and
//!   never wait for copies queued after it.
//! * A blocking call inside a host function that could only return after the host function does
//!   — `synchronize` of its own stream, of a stream that waits for its later work, or
//!   `Event::synchronize` of an event recorded after it — answers
//!   [`Error::WouldDeadlock`](crate::Error) at once instead of hanging. A wait for a flag that
//!   only later work sets cannot be told from one another thread will set, and blocks.
//!   Through waits across backends no single backend sees such a cycle: the facade refuses a
//!   blocking call on incomplete work in a host function while pending waits across backends
//!   could lead from that work back to the host function's backend ([`crate::foreign`], "Host
//!   functions"); a host-buffer read or write that would wait for a queued copy
//!   ([`HostBuffer::read_would_wait`], [`HostBuffer::write_would_wait`], answered without
//!   blocking) is such a call.
//!
//! ## Waits across backends
//! * `wait_event` and `wait_stream` take handles of the stream's own backend; the facade turns a
//!   wait on another backend's event (or stream) into [`DeviceStream::wait_completion`] of the
//!   awaited work's [`Completion`] ([`crate::foreign`] describes the mechanism). It has the
//!   meaning of a wait within one backend: it returns at once, later work of the stream runs
//!   after the awaited work, and an already complete (or never-recorded) event adds nothing.
//! * No thread is created and none is blocked per pending wait: the stream is held at a word of
//!   its own ([`crate::foreign::relay`] writes it from the awaited backend's completion path).
//! * When the awaited work ends with an error (its device was lost, ...), the waiting stream is
//!   released and takes that error as its own: `synchronize` and the stream's completion report
//!   it (its first error, as a host function's panic); its later work still runs (its own
//!   device did not fail).
//! * A capturing stream records the wait into its graph where `capture_foreign_waits` is on
//!   (each replay waits for the awaited work as it was when the wait was captured; see
//!   [`crate::foreign`], "Captures"); where it is off, it answers `Error::Capture` and the
//!   capture goes on unchanged ([`crate::foreign::refused_in_capture`]). Elision never skips
//!   such a wait.
//!
//! # Captures
//! * Work submitted to a capturing stream is recorded, not run; a stream that waits on an
//!   event recorded inside a capture joins it; `end_capture` on the stream that began it ends
//!   the capture for every stream that joined it.
//! * Synchronizing or querying a stream that captures (or joined a capture) fails with
//!   `Error::Capture` and invalidates that capture; the stream stays usable.
//! * A capture's mode governs the *potentially unsafe calls* on its place, on every backend
//!   alike ([`crate::capture`], CUDA's rule): `Stream::synchronize`, `Stream::query`,
//!   `Event::synchronize`, `Event::query`, `alloc_host`, and `alloc` where allocation is not
//!   stream-ordered. `Global` forbids them on every thread, `ThreadLocal` on the capturing
//!   thread, `Relaxed` nowhere. A forbidden call fails with `Error::Capture` before it reaches
//!   the runtime ([`crate::capture::check_unsafe_call`]) and the capture goes on. Everything
//!   else beside a capture — making, using and dropping other streams, events, buffers, flags
//!   and graphs, reading and writing host buffers — is allowed in every mode, and nothing a
//!   backend does on its own (releases, stream reuse, completions) may invalidate a capture.
//! * Dropping the last handle of the stream that began a capture ends that capture, valid or
//!   invalidated: what its mode forbade is lifted, and the streams that joined it leave it and
//!   run their later work again. A capture never outlives its stream's handles.

use crate::{
    BackendKind, Capabilities, CaptureMode, Completion, DevicePool, Error, EventFlags, Place,
    PoolOptions, Priority, PriorityRange, Result, StreamOptions,
};
use std::convert::Infallible;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// A host function put on a stream: runs once per submission (once per `Graph::launch` when
/// captured), in stream order.
pub type HostFn = Box<dyn FnMut() + Send + 'static>;

/// Counts of live user-created objects of a backend (singleton default streams excluded), so
/// that tests can check that nothing leaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveCounts {
    /// Live streams (their handles and queued work together keep them alive).
    pub streams: usize,
    /// Live events.
    pub events: usize,
}

/// The registry entry of a backend: which places it serves and how to make its objects.
///
/// Like PyTorch's `c10::DeviceGuardImplInterface`, this is the one interface every device
/// implements and the facade picks by [`Place::backend`].
pub trait DeviceBackend: Send + Sync + 'static {
    /// The backend's stream type (which names the event, graph, flag and buffer types).
    type Stream: DeviceStream;

    /// Which place family this backend serves.
    const KIND: BackendKind;

    /// Every place of this backend usable now (probing the runtime; never panics when it is
    /// missing: then the list is empty).
    fn places() -> Vec<Place>;

    /// Whether the backend's runtime can be used at all here, and if not, why
    /// (`Error::BackendUnavailable`).
    fn probe() -> Result<()>;

    /// Capabilities of one place.
    fn capabilities(place: &Place) -> Result<Capabilities>;

    /// Native priority range of one place (`{0, 0}` without priorities).
    fn priority_range(place: &Place) -> Result<PriorityRange>;

    /// A new stream.
    fn new_stream(place: &Place, options: StreamOptions) -> Result<Self::Stream>;

    /// The place's legacy default stream (the one that synchronises with blocking streams),
    /// or, where the backend has none, its default stream.
    fn default_stream(place: &Place) -> Result<Self::Stream>;

    /// The calling thread's per-thread default stream, or `Error::Unsupported`.
    fn per_thread_stream(place: &Place) -> Result<Self::Stream>;

    /// A new, never-recorded event.
    fn new_event(place: &Place, flags: EventFlags)
        -> Result<<Self::Stream as DeviceStream>::Event>;

    /// A new host-visible flag, initially 0, or `Error::Unsupported`.
    fn new_flag(place: &Place) -> Result<<Self::Stream as DeviceStream>::Flag>;

    /// Live user-created streams and events.
    fn live_counts() -> LiveCounts;

    /// The place's default memory pool: the one [`DeviceStream::alloc`] takes from, registered
    /// with [`crate::mempool::register`]. Optional (capability `memory_pools`): the default
    /// answers `Unsupported`.
    fn default_pool(place: &Place) -> Result<Arc<dyn DevicePool>> {
        Err(Error::unsupported("default_pool", place))
    }

    /// A new memory pool of the place, registered with [`crate::mempool::register`]. Optional
    /// (capability `memory_pools`): the default answers `Unsupported`.
    fn new_pool(place: &Place, options: PoolOptions) -> Result<Arc<dyn DevicePool>> {
        let _ = options;
        Err(Error::unsupported("new_pool", place))
    }
}

/// Declares optional [`DeviceStream`] operations, one row each, with the default body every
/// optional operation has: the arguments are unused and the answer is `Unsupported` naming the
/// operation (the row's name) and the stream's place.
macro_rules! optional_ops {
    ($(
        $(#[$doc:meta])*
        fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
    )*) => {$(
        $(#[$doc])*
        fn $name(&self $(, $arg: $ty)*) -> $ret {
            // Bound, not `let _ =`: an argument may be a future (`Completion`), dropped unpolled.
            $(let _unused = $arg;)*
            Err(Error::unsupported(stringify!($name), self.place()))
        }
    )*};
}

/// An ordered queue of device work.
///
/// The required operations come first; the optional ones after them have default bodies
/// answering `Unsupported` (see the module documentation for the rules each obeys).
pub trait DeviceStream: Clone + Debug + Send + Sync + 'static {
    /// Events recorded on and waited for by this stream.
    type Event: DeviceEvent;
    /// Graphs captured from this stream ([`UnsupportedGraph<Self>`] without capture).
    type Graph: DeviceGraph<Stream = Self>;
    /// Host-visible flags this stream can wait on and write ([`UnsupportedFlag`] without flags).
    type Flag: DeviceFlag;
    /// Device memory ([`UnsupportedBuffer`] without buffers).
    type Buffer: DeviceBuffer;
    /// Host memory the device can copy to and from asynchronously (pinned where the platform has
    /// it; [`UnsupportedHostBuffer`] without buffers).
    type HostBuffer: HostBuffer;

    /// The stream's place.
    fn place(&self) -> &Place;
    /// A process-unique id (see [`crate::next_id`]).
    fn id(&self) -> u64;
    /// The priority, read back from the clamped native number.
    fn priority(&self) -> Priority;
    /// The clamped native priority number.
    fn native_priority(&self) -> i32;
    /// `true` unless the stream synchronises with the legacy default stream.
    fn is_non_blocking(&self) -> bool;
    /// The place's capabilities.
    fn capabilities(&self) -> Capabilities;

    /// `true` iff all work submitted so far is done. Never blocks (except on places whose
    /// `nonblocking_query` capability is off). During capture: `Error::Capture` and the
    /// capture is invalidated. A potentially unsafe call (see the module documentation).
    fn query(&self) -> Result<bool>;
    /// Blocks until all work submitted so far is done; returns the first error of that work.
    /// During capture: `Error::Capture` and the capture is invalidated. A potentially unsafe
    /// call (see the module documentation).
    fn synchronize(&self) -> Result<()>;

    /// A future that is ready when all work submitted so far is done, with the result
    /// `synchronize` would give then (the first error of that work; observed, not taken: a
    /// later `synchronize` still reports it). Never blocks and adds no work to this stream that
    /// a later operation could observe; the backend completes it through its own completion path
    /// (no thread per future, no polling loop per future). During capture: a ready
    /// `Error::Capture`, and the capture stays valid.
    fn completion(&self) -> Completion;
    /// Records `event` here: it captures all work submitted so far.
    fn record(&self, event: &Self::Event) -> Result<()>;
    /// A new event with default flags, recorded here.
    fn record_event(&self) -> Result<Self::Event>;
    /// Work submitted after this call waits for what `event` captured. Returns at once.
    fn wait_event(&self, event: &Self::Event) -> Result<()>;
    /// Work submitted after this call waits for all work submitted to `other` so far.
    fn wait_stream(&self, other: &Self) -> Result<()>;

    // Optional operations: each default answers `Unsupported` naming the operation and the
    // stream's place, and a backend that leaves one at its default has its capability off.

    optional_ops! {
        /// Runs `f` on the host after all earlier work; later work waits for it. A panic in `f`
        /// is caught and reported by `synchronize`. Capability `host_funcs`; the rules for what
        /// `f` may call are in the module documentation ("Host functions").
        fn launch_host_func(&self, f: HostFn) -> Result<()>;

        /// Starts capturing: later work is recorded into a graph instead of run. Capability
        /// `capture`.
        fn begin_capture(&self, mode: CaptureMode) -> Result<()>;
        /// Ends capturing and returns the graph. Dropping the stream's last handle instead ends
        /// the capture too, and discards it. Capability `capture`.
        fn end_capture(&self) -> Result<Self::Graph>;
    }
    /// Whether the stream is capturing. Defaults to `false`: without capture, never.
    fn is_capturing(&self) -> Result<bool> {
        Ok(false)
    }

    optional_ops! {
        /// Later work waits until `flag`'s value is ≥ `value` (CUDA's
        /// `CU_STREAM_WAIT_VALUE_GEQ`). Capability `flags`.
        fn wait_flag(&self, flag: &Self::Flag, value: u32) -> Result<()>;
        /// Writes `value` to `flag` in stream order. Capability `flags`.
        fn write_flag(&self, flag: &Self::Flag, value: u32) -> Result<()>;

        /// Later work waits until `awaited` is ready (work of any backend, or any other
        /// completion); an error it ends with becomes this stream's error, reported in stream
        /// order. Returns at once; no thread is created or blocked for the wait (see "Waits
        /// across backends" above and [`crate::foreign`]). A capturing stream records the wait
        /// into its graph (capability `capture_foreign_waits`), or answers `Error::Capture` and
        /// its capture goes on. Capability `foreign_waits`.
        fn wait_completion(&self, awaited: Completion) -> Result<()>;

        /// Device memory of `len` bytes, usable by work submitted to this stream from now on;
        /// where `memory_pools` is on, from the place's default pool
        /// ([`DeviceBackend::default_pool`]) under its out-of-memory rule. A potentially unsafe
        /// call where the place's `stream_ordered_alloc` is off. Capability `buffers`, as are
        /// the copies and `fill`.
        fn alloc(&self, len: usize) -> Result<Self::Buffer>;
        /// Host memory of `len` bytes for asynchronous copies (zeroed). A potentially unsafe
        /// call.
        fn alloc_host(&self, len: usize) -> Result<Self::HostBuffer>;
        /// Copies `src` to `dst[dst_offset..]`. `src` is staged before the call returns, so it
        /// may be reused at once (pageable-memory semantics).
        fn copy_from_host(&self, dst: &Self::Buffer, dst_offset: usize, src: &[u8]) -> Result<()>;
        /// Asynchronous host→device copy of `len` bytes.
        fn copy_host_to_device(
            &self,
            dst: &Self::Buffer,
            dst_offset: usize,
            src: &Self::HostBuffer,
            src_offset: usize,
            len: usize,
        ) -> Result<()>;
        /// Asynchronous device→host copy of `len` bytes.
        fn copy_device_to_host(
            &self,
            dst: &Self::HostBuffer,
            dst_offset: usize,
            src: &Self::Buffer,
            src_offset: usize,
            len: usize,
        ) -> Result<()>;
        /// Asynchronous device→device copy of `len` bytes.
        fn copy_device_to_device(
            &self,
            dst: &Self::Buffer,
            dst_offset: usize,
            src: &Self::Buffer,
            src_offset: usize,
            len: usize,
        ) -> Result<()>;
        /// Sets `len` bytes of `dst` from `offset` to `value`.
        fn fill(&self, dst: &Self::Buffer, offset: usize, len: usize, value: u8) -> Result<()>;

        /// Device memory of `len` bytes from `pool` (a pool of this backend and place, else
        /// `Error::PlaceMismatch`: see [`crate::mempool::downcast`]), usable by work submitted
        /// to this stream from now on; dropped, it returns to `pool` in stream order. Runs out
        /// of memory through [`crate::mempool::alloc_retrying`]. Capability `memory_pools`.
        fn alloc_from(&self, pool: &dyn DevicePool, len: usize) -> Result<Self::Buffer>;

        /// The private memory pool of the capture this stream takes part in (see
        /// [`crate::graph_memory`]): the pool `alloc` and `alloc_from` take from while it runs,
        /// which the resulting graph owns. `Error::Capture` when the stream is not capturing.
        /// Capability `capture_alloc`.
        fn capture_memory_pool(&self) -> Result<Arc<dyn DevicePool>>;
    }
}

/// A marker in a stream's work.
pub trait DeviceEvent: Clone + Debug + Send + Sync + 'static {
    /// The event's place.
    fn place(&self) -> Option<Place>;
    /// A process-unique id.
    fn id(&self) -> u64;
    /// The flags it was created with.
    fn flags(&self) -> EventFlags;
    /// `true` iff the captured work is done (or the event was never recorded). A potentially
    /// unsafe call (see the module documentation).
    fn query(&self) -> Result<bool>;
    /// Blocks until the captured work is done. A potentially unsafe call.
    fn synchronize(&self) -> Result<()>;
    /// A future that is ready when the captured work is done (at once for a never-recorded
    /// event), with the result `synchronize` would give then. Re-recording the event later does
    /// not change what an existing completion waits for. Never blocks.
    fn completion(&self) -> Completion;
    /// Time from `self` to `end`: `TimingDisabled`, `NotRecorded` or `NotReady` where it does not
    /// apply.
    fn elapsed(&self, end: &Self) -> Result<Duration>;
}

/// Work captured from a stream, replayable on any stream of its place.
pub trait DeviceGraph: Debug + Send + Sync + 'static {
    /// The stream type it launches on.
    type Stream: DeviceStream;
    /// The place it was captured on.
    fn place(&self) -> &Place;
    /// Runs the captured work on `stream`, in its order, once more.
    fn launch(&self, stream: &Self::Stream) -> Result<()>;
    /// The graph's private memory pool: the memory of the buffers allocated during its capture
    /// (see [`crate::graph_memory`]). Capability `capture_alloc`: the default answers
    /// `Unsupported`.
    fn memory_pool(&self) -> Result<Arc<dyn DevicePool>> {
        Err(Error::unsupported("Graph::memory_pool", self.place()))
    }
}

/// A host-visible 32-bit value streams can wait on and write.
pub trait DeviceFlag: Clone + Debug + Send + Sync + 'static {
    /// The flag's place.
    fn place(&self) -> &Place;
    /// A process-unique id.
    fn id(&self) -> u64;
    /// Sets the value from the host (releasing streams waiting for ≤ `value`).
    fn set(&self, value: u32);
    /// Reads the value.
    fn get(&self) -> u32;
}

/// Device memory. Dropping it while queued work uses it frees it only after that work.
pub trait DeviceBuffer: Debug + Send + Sync + 'static {
    /// Size in bytes.
    fn len(&self) -> usize;
    /// Whether the size is 0.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The buffer's place.
    fn place(&self) -> &Place;
}

/// Host memory for asynchronous copies. Reads and writes from the host wait for queued copies
/// that touch the buffer, so the host never races the device.
pub trait HostBuffer: Debug + Send + Sync + 'static {
    /// Size in bytes.
    fn len(&self) -> usize;
    /// Whether the size is 0.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `out.len()` bytes from `offset` after queued work writing the buffer is done.
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()>;
    /// Copies `data` to `offset` after queued work using the buffer is done.
    fn write(&self, offset: usize, data: &[u8]) -> Result<()>;
    /// The whole content, after queued work writing it is done.
    fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![0; self.len()];
        self.read(0, &mut out)?;
        Ok(out)
    }
    /// Whether [`read`](HostBuffer::read), called now on this thread, would wait for queued
    /// work that is not complete. Answers without blocking. Inside a host function whose
    /// backend's work other backends' streams wait on, the facade refuses a read that would
    /// wait with `Error::WouldDeadlock` (the awaited copy may be queued behind a wait across
    /// backends on work after the host function: `crate::foreign`, "Host functions"), and
    /// lets one that would not wait proceed. The default answers `true` (always refused
    /// there); a backend whose reads can return at once overrides it.
    fn read_would_wait(&self) -> bool {
        true
    }
    /// [`read_would_wait`](HostBuffer::read_would_wait) for [`write`](HostBuffer::write).
    fn write_would_wait(&self) -> bool {
        true
    }
    /// What a host function given this buffer needs (`Stream::launch_host_func_with`; the
    /// rules are in [`crate::host_fn_access`]): the completions of the buffer's uses queued
    /// before now, a registered use that copies submitted from now on wait for, and the
    /// bytes. `runner` is the backend of the host function's stream. The snapshot and the
    /// registration are made under the lock under which the backend's copies of the buffer
    /// check [`HostFnUses::awaited`](crate::host_fn_access::HostFnUses::awaited) and register
    /// themselves, and host reads and writes wait for registered uses.
    ///
    /// The default answers `Error::InvalidArgument`: a backend that keeps these rules
    /// overrides it and sets its places' `host_func_buffers` capability.
    fn host_fn_access(
        &self,
        runner: crate::foreign::BackendKey,
    ) -> Result<crate::host_fn_access::HostFnAccess> {
        let _ = runner;
        Err(crate::Error::InvalidArgument(
            "this backend's host buffers cannot be given to a host function \
             (launch_host_func_with): its places' host_func_buffers capability is off"
                .into(),
        ))
    }
}

/// The graph type of a backend without capture: uninhabited, so no value of it exists and its
/// methods cannot be called. Name it as `type Graph = UnsupportedGraph<Self>;`.
pub struct UnsupportedGraph<S> {
    never: Infallible,
    stream: PhantomData<fn() -> S>,
}

impl<S> Debug for UnsupportedGraph<S> {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.never {}
    }
}

impl<S: DeviceStream<Graph = Self>> DeviceGraph for UnsupportedGraph<S> {
    type Stream = S;
    fn place(&self) -> &Place {
        let _ = &self.stream;
        match self.never {}
    }
    fn launch(&self, _: &S) -> Result<()> {
        match self.never {}
    }
}

/// The flag type of a backend without flags: uninhabited (its `new_flag` answers
/// `Unsupported`).
#[derive(Clone, Debug)]
pub enum UnsupportedFlag {}

impl DeviceFlag for UnsupportedFlag {
    fn place(&self) -> &Place {
        match *self {}
    }
    fn id(&self) -> u64 {
        match *self {}
    }
    fn set(&self, _: u32) {
        match *self {}
    }
    fn get(&self) -> u32 {
        match *self {}
    }
}

/// The device-buffer type of a backend without buffers: uninhabited.
#[derive(Debug)]
pub enum UnsupportedBuffer {}

impl DeviceBuffer for UnsupportedBuffer {
    fn len(&self) -> usize {
        match *self {}
    }
    fn place(&self) -> &Place {
        match *self {}
    }
}

/// The host-buffer type of a backend without buffers: uninhabited.
#[derive(Debug)]
pub enum UnsupportedHostBuffer {}

impl HostBuffer for UnsupportedHostBuffer {
    fn len(&self) -> usize {
        match *self {}
    }
    fn read(&self, _: usize, _: &mut [u8]) -> Result<()> {
        match *self {}
    }
    fn write(&self, _: usize, _: &[u8]) -> Result<()> {
        match *self {}
    }
}

/// Checks that `offset..offset + len` lies within a buffer of `buffer_len` bytes.
///
/// ```
/// use devstream_core::traits::check_range;
/// assert!(check_range("fill", 4, 4, 8).is_ok());
/// assert!(check_range("fill", 5, 4, 8).is_err());
/// assert!(check_range("fill", usize::MAX, 2, 8).is_err());
/// ```
#[inline]
pub fn check_range(op: &'static str, offset: usize, len: usize, buffer_len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= buffer_len => Ok(()),
        _ => Err(range_error(op, offset, len, buffer_len)),
    }
}

/// [`check_range`]'s error, out of the line of every copy and fill.
#[cold]
#[inline(never)]
fn range_error(op: &'static str, offset: usize, len: usize, buffer_len: usize) -> Error {
    Error::InvalidArgument(format!(
        "{op}: range {offset}..{offset}+{len} is outside a buffer of {buffer_len} bytes"
    ))
}
