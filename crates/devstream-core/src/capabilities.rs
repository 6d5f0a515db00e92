//! What a place can do.

/// How a place turns a captured stream into a replayable graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CaptureSupport {
    /// The platform's own graphs (CUDA graphs, HIP graphs).
    Native,
    /// devstream records the work and replays it (CPU, wgpu).
    Emulated,
    /// No capture: `begin_capture` answers `Error::Unsupported`.
    #[default]
    None,
}

/// One flag per feature. An operation whose flag is off answers
/// `Error::Unsupported { op, place }`: never a silent no-op.
///
/// Backends start from [`Capabilities::none`] and switch on what they have:
///
/// ```
/// use devstream_core::{Capabilities, CaptureSupport};
/// let mut caps = Capabilities::none();
/// caps.host_funcs = true;
/// caps.capture = CaptureSupport::Emulated;
/// assert!(caps.host_funcs && !caps.priorities);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// Streams have more than one priority level.
    pub priorities: bool,
    /// Work of different streams can run at the same time (wgpu: false, one queue).
    pub concurrent_streams: bool,
    /// Stream capture into graphs.
    pub capture: CaptureSupport,
    /// Events can be timed (`EventFlags::timing`, `elapsed`).
    pub timing: bool,
    /// `launch_host_func`.
    pub host_funcs: bool,
    /// `launch_host_func` on a capturing stream records the function into the graph (CUDA
    /// `cuLaunchHostFunc`; HIP with `hipLaunchHostFunc`). Off while `host_funcs` and `capture`
    /// are on (HIP before ROCm 5.3 has only `hipStreamAddCallback`, which cannot be captured):
    /// `launch_host_func` during a capture answers `Error::Unsupported`, runs nothing and leaves
    /// the capture as it was.
    pub capture_host_funcs: bool,
    /// `wait_flag` / `write_flag` (wait/write value on host-visible memory).
    pub flags: bool,
    /// Stream-ordered device and host buffers: `alloc`, `alloc_host`, the copies and `fill`.
    pub buffers: bool,
    /// A stream can wait on an event of another device of the same backend.
    pub cross_device_wait: bool,
    /// A stream can wait on work of another backend (`wait_event` / `wait_stream` with a handle
    /// of another backend, `wait_completion`) without a host thread blocked or created per wait.
    pub foreign_waits: bool,
    /// A wait on another backend's work (`foreign_waits`) submitted to a capturing stream
    /// becomes part of the graph: each replay waits for the awaited work as it was when the wait
    /// was captured (see `devstream_core::foreign`, "Captures"). Off while `foreign_waits` and
    /// `capture` are on, such a wait answers `Error::Capture` and leaves the capture as it was.
    pub capture_foreign_waits: bool,
    /// This place's host buffers can be given to a host function of any place
    /// (`Stream::launch_host_func_with`), which is then ordered against the buffers' copies
    /// by waits in submission order (`devstream_core::host_fn_access`). Off, such a call with
    /// one of its host buffers answers `Error::InvalidArgument` and submits nothing.
    pub host_func_buffers: bool,
    /// Native handles can be exported/imported (interprocess events, raw handles).
    pub external_handles: bool,
    /// Stream-ordered allocation (`cuMemAllocAsync`-style); off means allocation is synchronous.
    pub stream_ordered_alloc: bool,
    /// `query` asks the device without blocking; off means the backend answers `query` by
    /// synchronizing first (Paddle plug-ins without `query_stream`).
    pub nonblocking_query: bool,
    /// A legacy default stream that synchronises with blocking streams exists.
    pub legacy_default_stream: bool,
    /// A per-thread default stream exists.
    pub per_thread_stream: bool,
    /// Collectives (`all_reduce`, `broadcast`, ..., cargo feature `comm`) have an engine here;
    /// off, `UniqueId::new`, `Communicator::init` and every collective answer
    /// `Error::Unsupported`.
    pub collectives: bool,
    /// Memory pools: the place's default pool and new pools (`MemoryPool::default_for`,
    /// `MemoryPool::new`), `alloc_from`, pool statistics, release threshold, trim, and
    /// out-of-memory recovery by trimming and retrying (see `devstream_core::mempool`). Off,
    /// those answer `Error::Unsupported`.
    pub memory_pools: bool,
    /// `alloc` and `alloc_from` on a capturing stream take memory private to the resulting
    /// graph: the same on every replay, reusable later in the same capture once dropped,
    /// released when the graph and its buffers are gone (`devstream_core::graph_memory`;
    /// `Graph::memory_pool`, `Stream::capture_memory_pool`). Off, where `capture` is on,
    /// allocation on a capturing stream answers `Error::Unsupported` and the capture goes on.
    pub capture_alloc: bool,
}

impl Capabilities {
    /// Every flag off, capture `None`.
    pub const fn none() -> Self {
        Capabilities {
            priorities: false,
            concurrent_streams: false,
            capture: CaptureSupport::None,
            timing: false,
            host_funcs: false,
            capture_host_funcs: false,
            flags: false,
            buffers: false,
            cross_device_wait: false,
            foreign_waits: false,
            capture_foreign_waits: false,
            host_func_buffers: false,
            external_handles: false,
            stream_ordered_alloc: false,
            nonblocking_query: false,
            legacy_default_stream: false,
            per_thread_stream: false,
            collectives: false,
            memory_pools: false,
            capture_alloc: false,
        }
    }

    /// The capability table as `(name, value)` rows, for printing.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        vec![
            ("priorities", self.priorities.to_string()),
            ("concurrent_streams", self.concurrent_streams.to_string()),
            ("capture", format!("{:?}", self.capture)),
            ("timing", self.timing.to_string()),
            ("host_funcs", self.host_funcs.to_string()),
            ("capture_host_funcs", self.capture_host_funcs.to_string()),
            ("flags", self.flags.to_string()),
            ("buffers", self.buffers.to_string()),
            ("cross_device_wait", self.cross_device_wait.to_string()),
            ("foreign_waits", self.foreign_waits.to_string()),
            (
                "capture_foreign_waits",
                self.capture_foreign_waits.to_string(),
            ),
            ("host_func_buffers", self.host_func_buffers.to_string()),
            ("external_handles", self.external_handles.to_string()),
            (
                "stream_ordered_alloc",
                self.stream_ordered_alloc.to_string(),
            ),
            ("nonblocking_query", self.nonblocking_query.to_string()),
            (
                "legacy_default_stream",
                self.legacy_default_stream.to_string(),
            ),
            ("per_thread_stream", self.per_thread_stream.to_string()),
            ("collectives", self.collectives.to_string()),
            ("memory_pools", self.memory_pools.to_string()),
            ("capture_alloc", self.capture_alloc.to_string()),
        ]
    }
}
