//! The raw-call table a CUDA-like runtime provides: opaque handles, native status codes and
//! [`RawApi`], one thin function per native call.
//!
//! Everything above this module (streams, events, graphs, flags, buffers) is written once,
//! generic over [`RawApi`]. A backend crate (CUDA through cudarc, HIP through a loaded
//! `libamdhip64`) implements [`RawApi`] by forwarding each function to the native call of the
//! same meaning and naming that call in its [`RawError`].

use crate::device::Runtime;
use devstream_core::{BackendKind, CaptureMode, EventFlags, Place};
use std::ffi::{c_void, CStr};
use std::fmt;
use std::sync::OnceLock;

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name(pub *mut c_void);

        // SAFETY: native handles are plain identifiers; the runtimes allow using them from any
        // thread (the CUDA and HIP driver APIs are thread-safe).
        unsafe impl Send for $name {}
        // SAFETY: as above: sharing the identifier shares no Rust-visible memory.
        unsafe impl Sync for $name {}

        impl $name {
            /// The null handle.
            pub const NULL: $name = $name(std::ptr::null_mut());

            /// Whether the handle is null.
            pub fn is_null(self) -> bool {
                self.0.is_null()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:p})"), self.0)
            }
        }
    };
}

handle!(
    /// A native stream handle (`CUstream`, `hipStream_t`).
    RawStream
);
handle!(
    /// A native event handle (`CUevent`, `hipEvent_t`).
    RawEvent
);
handle!(
    /// A native graph (`CUgraph`, `hipGraph_t`).
    RawGraph
);
handle!(
    /// An instantiated, launchable graph (`CUgraphExec`, `hipGraphExec_t`).
    RawGraphExec
);
/// A node of a native graph (`CUgraphNode`, `hipGraphNode_t`), as the runtime handed it out
/// (`GpuStream::capture_info`). The shared layer checks that a node passed back to the runtime
/// belongs to the graph it is used with, and safe code cannot forge one:
///
/// ```compile_fail
/// use devstream_gpu_common::RawGraphNode;
/// let forged = RawGraphNode(0x10 as *mut std::ffi::c_void);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct RawGraphNode(*mut c_void);

// SAFETY: a node handle is a plain identifier; the runtimes allow using it from any thread.
unsafe impl Send for RawGraphNode {}
// SAFETY: as above: sharing the identifier shares no Rust-visible memory.
unsafe impl Sync for RawGraphNode {}

impl RawGraphNode {
    /// Wraps a native node handle.
    ///
    /// # Safety
    /// `raw` is a node handle the runtime returned (of a graph that may since have been
    /// destroyed: the shared layer checks membership before using it).
    pub unsafe fn from_raw(raw: *mut c_void) -> RawGraphNode {
        RawGraphNode(raw)
    }

    /// The native handle.
    pub fn as_ptr(self) -> *mut c_void {
        self.0
    }
}

impl fmt::Debug for RawGraphNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawGraphNode({:p})", self.0)
    }
}

handle!(
    /// A native context (`CUcontext`, `hipCtx_t`).
    RawContext
);
handle!(
    /// A stream-ordered memory pool (`CUmemoryPool`, `hipMemPool_t`).
    RawMemPool
);

/// A memory-pool attribute read or written as a 64-bit byte count (`CUmemPool_attribute`; HIP's
/// `hipMemPoolAttr` has the same values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MemPoolAttribute {
    /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`: reserved bytes kept at synchronisation points.
    ReleaseThreshold = 4,
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`.
    ReservedMemCurrent = 5,
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH` (set to 0 to reset it to the current value).
    ReservedMemHigh = 6,
    /// `CU_MEMPOOL_ATTR_USED_MEM_CURRENT`.
    UsedMemCurrent = 7,
    /// `CU_MEMPOOL_ATTR_USED_MEM_HIGH` (set to 0 to reset it to the current value).
    UsedMemHigh = 8,
}
handle!(
    /// A loaded code module (`CUmodule`, `hipModule_t`).
    RawModule
);
handle!(
    /// A kernel function of a module (`CUfunction`, `hipFunction_t`).
    RawFunction
);

/// A device address (`CUdeviceptr`, `hipDeviceptr_t`).
pub type DevicePtr = u64;

/// A failed native call: its status code and the call's name (`"cuEventRecord"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawError {
    /// The native status code.
    pub code: i32,
    /// The native function that returned it.
    pub call: &'static str,
}

/// Result of a raw call.
pub type RawResult<T = ()> = Result<T, RawError>;

/// What a native status code means to the shared layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Work is not complete yet (`CUDA_ERROR_NOT_READY`).
    NotReady,
    /// Out of device or host memory.
    OutOfMemory,
    /// An argument is outside the call's domain (`CUDA_ERROR_INVALID_VALUE`; for an
    /// allocation: a size the driver refuses outright).
    InvalidValue,
    /// No such device / no device at all.
    NoDevice,
    /// A stream-capture rule was broken (capture unsupported, invalidated, wrong thread, ...).
    Capture,
    /// Anything else.
    Other,
}

/// Host callback signature of `cuLaunchHostFunc`.
pub type HostCallback = unsafe extern "C" fn(user_data: *mut c_void);

/// Stream callback signature of `cuStreamAddCallback` (the status is the native code).
pub type StreamCallback =
    unsafe extern "C" fn(stream: RawStream, status: i32, user_data: *mut c_void);

/// Native capture status of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureStatus {
    /// Not capturing.
    None,
    /// Capturing.
    Active,
    /// Capturing, but the capture was invalidated; `end_capture` will fail.
    Invalidated,
}

/// What `cuStreamGetCaptureInfo` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureInfo {
    /// The capture status.
    pub status: CaptureStatus,
    /// The capture sequence id (unique for the process' lifetime); 0 when not capturing.
    pub id: u64,
    /// The graph being captured into (borrowed: owned by the capture).
    pub graph: RawGraph,
    /// The nodes the next captured node will depend on.
    pub dependencies: Vec<RawGraphNode>,
}

/// An L2 access-policy window (`CUaccessPolicyWindow`): a range of global memory whose L2
/// accesses get the hit/miss properties.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccessPolicyWindow {
    /// Start of the window (a device address).
    pub base_ptr: DevicePtr,
    /// Size of the window in bytes.
    pub num_bytes: usize,
    /// Fraction (0..=1) of accesses in the window that get `hit_prop`.
    pub hit_ratio: f32,
    /// Property of hits.
    pub hit_prop: AccessProperty,
    /// Property of misses.
    pub miss_prop: AccessProperty,
}

/// L2 access property (`CUaccessProperty`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessProperty {
    /// Normal cache persistence.
    Normal,
    /// Less likely to persist.
    Streaming,
    /// More likely to persist (uses the set-aside persisting L2 portion).
    Persisting,
}

/// How a host thread waits for a stream (`CUsynchronizationPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncPolicy {
    /// Runtime's choice.
    Auto,
    /// Spin.
    Spin,
    /// Yield while spinning.
    Yield,
    /// Block on a primitive.
    BlockingSync,
}

/// Which stream attribute to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamAttributeId {
    /// The L2 access-policy window.
    AccessPolicyWindow,
    /// The synchronization policy.
    SyncPolicy,
    /// The stream priority.
    Priority,
}

/// A stream attribute with its value (`CUstreamAttrValue`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StreamAttribute {
    /// The L2 access-policy window of kernels launched later on the stream.
    AccessPolicyWindow(AccessPolicyWindow),
    /// How a host thread waits on the stream.
    SyncPolicy(SyncPolicy),
    /// The stream's priority (lower is higher).
    Priority(i32),
}

impl StreamAttribute {
    /// The id of this attribute.
    pub fn id(&self) -> StreamAttributeId {
        match self {
            StreamAttribute::AccessPolicyWindow(_) => StreamAttributeId::AccessPolicyWindow,
            StreamAttribute::SyncPolicy(_) => StreamAttributeId::SyncPolicy,
            StreamAttribute::Priority(_) => StreamAttributeId::Priority,
        }
    }
}

/// How managed memory is attached to a stream (`cuStreamAttachMemAsync` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemAttach {
    /// Accessible from any stream on any device.
    Global,
    /// Not accessed from devices without concurrent managed access.
    Host,
    /// Accessible only from the given stream.
    Single,
}

/// Calls that exist only in some runtime versions, or not at all in some runtimes. Each
/// [`RawApi`] says which it has ([`RawApi::supports`]); the shared layer answers
/// `Error::Unsupported` for the others instead of calling a missing symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Optional {
    /// `cuLaunchHostFunc` (host functions that can be captured).
    LaunchHostFunc,
    /// `cuStreamAddCallback`.
    StreamAddCallback,
    /// `cuStreamWaitValue64` / `cuStreamWriteValue64`.
    StreamMemOps,
    /// `cuStreamBeginCaptureToGraph` (capture into an existing graph).
    CaptureToGraph,
    /// `cuStreamGetCaptureInfo` with the graph and dependencies.
    CaptureInfo,
    /// `cuStreamUpdateCaptureDependencies`.
    UpdateCaptureDependencies,
    /// `cuStreamGetId`.
    StreamId,
    /// `cuStreamGetDevice` (or an equivalent).
    StreamDevice,
    /// Stream attributes (`cuStreamGetAttribute` / `cuStreamSetAttribute` /
    /// `cuStreamCopyAttributes`).
    StreamAttributes,
    /// `cuCtxResetPersistingL2Cache`.
    ResetPersistingL2,
    /// `cuStreamAttachMemAsync` and managed allocations.
    ManagedMemory,
    /// `cuThreadExchangeStreamCaptureMode`.
    ExchangeCaptureMode,
    /// Stream-ordered allocation entry points (`cuMemAllocAsync` / `cuMemFreeAsync`); the
    /// device must also report memory pools.
    StreamOrderedAlloc,
    /// Loading code modules and launching kernels.
    Kernels,
    /// Memory pools (`cuDeviceGetDefaultMemPool`, `cuMemPoolCreate` / `Destroy` /
    /// `GetAttribute` / `SetAttribute` / `TrimTo`, `cuMemAllocFromPoolAsync`); used only with
    /// [`Optional::StreamOrderedAlloc`].
    MemoryPools,
}

/// Attributes of one device that the shared layer needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// Device name.
    pub name: String,
    /// Compute capability (major, minor); (0, 0) where the runtime has none.
    pub compute_capability: (i32, i32),
    /// The device supports memory pools (stream-ordered allocation).
    pub memory_pools: bool,
    /// Pinned host memory can be mapped into the device's address space.
    pub can_map_host_memory: bool,
    /// 64-bit `cuStreamWaitValue64`/`WriteValue64` are usable on this device.
    pub stream_mem_ops: bool,
    /// The device has stream priorities.
    pub stream_priorities: bool,
    /// The device supports managed memory.
    pub managed_memory: bool,
}

/// The one table of raw calls a CUDA-like backend provides. Each function forwards to one native
/// call; errors carry the native code and the call's name. The calls are grouped by the object
/// they act on in the supertraits ([`RawDevices`], [`RawStreams`], [`RawCapture`],
/// [`RawEvents`], [`RawGraphs`], [`RawMemory`], [`RawKernels`]), which a backend implements one
/// per file; this trait holds what identifies and loads the backend.
///
/// # Safety
///
/// Implementors forward to the native functions named in each doc comment, with the same
/// contracts. Callers (the shared layer) uphold those contracts: handles are live and belong to
/// the right context, pointers are valid for the given lengths, and a function listed in
/// [`Optional`] is called only when [`RawApi::supports`] says so. No function is called before
/// [`RawApi::load`] returned `Ok`.
// One `# Safety` section (above) covers every method of the table.
#[allow(clippy::missing_safety_doc)]
pub unsafe trait RawApi:
    RawDevices
    + RawStreams
    + RawCapture
    + RawEvents
    + RawGraphs
    + RawMemory
    + RawKernels
    + Sized
    + Send
    + Sync
    + 'static
{
    /// The backend name used in errors (`"cuda"`, `"hip"`).
    const BACKEND: &'static str;
    /// The place family this backend serves.
    const KIND: BackendKind;
    /// The handle of the per-thread default stream (`CU_STREAM_PER_THREAD`).
    const PER_THREAD_STREAM: RawStream;

    /// The backend's process-wide runtime slot (a `static` in the backend crate).
    fn runtime_cell() -> &'static OnceLock<Result<Runtime<Self>, devstream_core::Error>>;

    /// The place of device `ordinal` (`Place::Cuda(ordinal)`).
    fn place(ordinal: usize) -> Place;

    /// The device ordinal of `place`, if it is a place of this backend.
    fn ordinal(place: &Place) -> Option<usize> {
        (place.backend() == Self::KIND).then(|| place.index())
    }

    /// Loads the runtime library, checks that every required symbol is present, initialises the
    /// runtime and records which [`Optional`] calls exist. Never panics; `Err` says why the
    /// backend is unavailable.
    fn load() -> Result<LoadInfo, String>;

    /// Whether the loaded runtime has an optional call.
    fn supports(call: Optional) -> bool;

    /// Classifies a native status code.
    fn error_kind(code: i32) -> ErrorKind;

    /// The native name and description of a status code.
    fn error_message(code: i32) -> String;
}

/// Devices and contexts: part of the raw-call table [`RawApi`] (whose `# Safety` section covers these calls).
///
/// # Safety
///
/// As for [`RawApi`].
#[allow(clippy::missing_safety_doc)]
pub unsafe trait RawDevices {
    /// Number of devices (`cuDeviceGetCount`).
    unsafe fn device_count() -> RawResult<usize>;
    /// Attributes of a device (`cuDeviceGetAttribute`, `cuDeviceGetName`).
    unsafe fn device_properties(ordinal: usize) -> RawResult<DeviceProperties>;
    /// Retains the device's primary context (`cuDevicePrimaryCtxRetain`).
    unsafe fn primary_context(ordinal: usize) -> RawResult<RawContext>;
    /// The calling thread's current context (`cuCtxGetCurrent`).
    unsafe fn context_current() -> RawResult<RawContext>;
    /// Makes `ctx` current on the calling thread (`cuCtxSetCurrent`).
    unsafe fn context_set_current(ctx: RawContext) -> RawResult;
    /// `(least, greatest)` stream priority of the current context
    /// (`cuCtxGetStreamPriorityRange`).
    unsafe fn priority_range() -> RawResult<(i32, i32)>;
    /// Resets persisting L2 lines of the current context (`cuCtxResetPersistingL2Cache`).
    unsafe fn reset_persisting_l2_cache() -> RawResult;
}

/// Streams: creation, ordering, host functions, stream memory operations and attributes: part of the raw-call table [`RawApi`] (whose `# Safety` section covers these calls).
///
/// # Safety
///
/// As for [`RawApi`].
#[allow(clippy::missing_safety_doc)]
pub unsafe trait RawStreams {
    /// `cuStreamCreateWithPriority` in the current context.
    unsafe fn stream_create(non_blocking: bool, priority: i32) -> RawResult<RawStream>;
    /// `cuStreamDestroy`.
    unsafe fn stream_destroy(stream: RawStream) -> RawResult;
    /// `cuStreamQuery`: `Ok` when done; an error of kind [`ErrorKind::NotReady`] otherwise.
    unsafe fn stream_query(stream: RawStream) -> RawResult;
    /// `cuStreamSynchronize`.
    unsafe fn stream_synchronize(stream: RawStream) -> RawResult;
    /// `cuStreamWaitEvent`.
    unsafe fn stream_wait_event(stream: RawStream, event: RawEvent) -> RawResult;
    /// `cuStreamGetPriority`.
    unsafe fn stream_priority(stream: RawStream) -> RawResult<i32>;
    /// `cuStreamGetFlags`.
    unsafe fn stream_flags(stream: RawStream) -> RawResult<u32>;
    /// `cuStreamGetId` ([`Optional::StreamId`]).
    unsafe fn stream_id(stream: RawStream) -> RawResult<u64>;
    /// The device ordinal of a stream ([`Optional::StreamDevice`]).
    unsafe fn stream_device(stream: RawStream) -> RawResult<usize>;
    /// `cuLaunchHostFunc` ([`Optional::LaunchHostFunc`]).
    unsafe fn launch_host_func(
        stream: RawStream,
        callback: HostCallback,
        user_data: *mut c_void,
    ) -> RawResult;
    /// `cuStreamAddCallback` ([`Optional::StreamAddCallback`]).
    unsafe fn stream_add_callback(
        stream: RawStream,
        callback: StreamCallback,
        user_data: *mut c_void,
    ) -> RawResult;
    /// `cuStreamWaitValue64` with `GEQ` on a device-visible 8-byte word
    /// ([`Optional::StreamMemOps`]). The runtime compares cyclically
    /// (`(int64_t)(*addr - value) >= 0`); flags hold zero-extended `u32` values, for which that is
    /// exactly unsigned `>=` (the 32-bit variant would not be: `u32::MAX` would not release a
    /// wait for 1).
    unsafe fn stream_wait_value64(stream: RawStream, address: DevicePtr, value: u64) -> RawResult;
    /// `cuStreamWriteValue64` ([`Optional::StreamMemOps`]).
    unsafe fn stream_write_value64(stream: RawStream, address: DevicePtr, value: u64) -> RawResult;
    /// `cuStreamSetAttribute` ([`Optional::StreamAttributes`]).
    unsafe fn stream_set_attribute(stream: RawStream, attribute: StreamAttribute) -> RawResult;
    /// `cuStreamGetAttribute` ([`Optional::StreamAttributes`]).
    unsafe fn stream_get_attribute(
        stream: RawStream,
        id: StreamAttributeId,
    ) -> RawResult<StreamAttribute>;
    /// `cuStreamCopyAttributes` ([`Optional::StreamAttributes`]).
    unsafe fn stream_copy_attributes(dst: RawStream, src: RawStream) -> RawResult;
    /// `cuStreamAttachMemAsync` ([`Optional::ManagedMemory`]).
    unsafe fn stream_attach_mem_async(
        stream: RawStream,
        address: DevicePtr,
        len: usize,
        attach: MemAttach,
    ) -> RawResult;
}

/// Stream capture: part of the raw-call table [`RawApi`] (whose `# Safety` section covers these calls).
///
/// # Safety
///
/// As for [`RawApi`].
#[allow(clippy::missing_safety_doc)]
pub unsafe trait RawCapture {
    /// `cuStreamBeginCapture`.
    unsafe fn stream_begin_capture(stream: RawStream, mode: CaptureMode) -> RawResult;
    /// `cuStreamBeginCaptureToGraph` ([`Optional::CaptureToGraph`]).
    unsafe fn stream_begin_capture_to_graph(
        stream: RawStream,
        graph: RawGraph,
        dependencies: &[RawGraphNode],
        mode: CaptureMode,
    ) -> RawResult;
    /// `cuStreamEndCapture`.
    unsafe fn stream_end_capture(stream: RawStream) -> RawResult<RawGraph>;
    /// `cuStreamIsCapturing`.
    unsafe fn stream_is_capturing(stream: RawStream) -> RawResult<CaptureStatus>;
    /// `cuStreamGetCaptureInfo` ([`Optional::CaptureInfo`]; the status and id are always
    /// available through it or an equivalent).
    ///
    /// The dependencies are copied out of an array the runtime owns only until the next call
    /// on the stream or the end of its capture: the caller must make sure that no other thread
    /// makes such a call meanwhile (devstream's own bookkeeping uses
    /// [`RawCapture::stream_capture_sequence`] instead).
    unsafe fn stream_capture_info(stream: RawStream) -> RawResult<CaptureInfo>;
    /// The capture status and sequence id of `stream` (0 when not capturing), asking the
    /// runtime for nothing else: no graph and no dependency array, whose memory another
    /// thread's call on the stream (its end of capture) can free while it is read. Safe to
    /// make while other threads use the stream.
    unsafe fn stream_capture_sequence(stream: RawStream) -> RawResult<(CaptureStatus, u64)>;
    /// `cuStreamUpdateCaptureDependencies` ([`Optional::UpdateCaptureDependencies`]).
    unsafe fn stream_update_capture_dependencies(
        stream: RawStream,
        dependencies: &[RawGraphNode],
        replace: bool,
    ) -> RawResult;
    /// `cuThreadExchangeStreamCaptureMode` ([`Optional::ExchangeCaptureMode`]).
    unsafe fn thread_exchange_capture_mode(mode: CaptureMode) -> RawResult<CaptureMode>;
}

/// Events: part of the raw-call table [`RawApi`] (whose `# Safety` section covers these calls).
///
/// # Safety
///
/// As for [`RawApi`].
#[allow(clippy::missing_safety_doc)]
pub unsafe trait RawEvents {
    /// `cuEventCreate` in the current context.
    unsafe fn event_create(flags: EventFlags) -> RawResult<RawEvent>;
    /// `cuEventDestroy`.
    unsafe fn event_destroy(event: RawEvent) -> RawResult;
    /// `cuEventRecord`.
    unsafe fn event_record(event: RawEvent, stream: RawStream) -> RawResult;
    /// `cuEventQuery`: `Ok` when done; an error of kind [`ErrorKind::NotReady`] otherwise.
    unsafe fn event_query(event: RawEvent) -> RawResult;
    /// `cuEventSynchronize`.
    unsafe fn event_synchronize(event: RawEvent) -> RawResult;
    /// `cuEventElapsedTime` in milliseconds.
    unsafe fn event_elapsed_ms(start: RawEvent, end: RawEvent) -> RawResult<f32>;
}

/// Graphs and executable graphs: part of the raw-call table [`RawApi`] (whose `# Safety` section covers these calls).
///
/// # Safety
///
/// As for [`RawApi`].
#[allow(clippy::missing_safety_doc)]
pub unsafe trait RawGraphs {
    /// `cuGraphCreate`.
    unsafe fn graph_create() -> RawResult<RawGraph>;
    /// `cuGraphInstantiate`.
    unsafe fn graph_instantiate(graph: RawGraph) -> RawResult<RawGraphExec>;
    /// `cuGraphLaunch`.
    unsafe fn graph_launch(exec: RawGraphExec, stream: RawStream) -> RawResult;
    /// `cuGraphExecDestroy`.
    unsafe fn graph_exec_destroy(exec: RawGraphExec) -> RawResult;
    /// `cuGraphDestroy`.
    unsafe fn graph_destroy(graph: RawGraph) -> RawResult;
    /// Number of nodes (`cuGraphGetNodes` with a null array).
    unsafe fn graph_node_count(graph: RawGraph) -> RawResult<usize>;
    /// Every node of the graph (`cuGraphGetNodes`).
    unsafe fn graph_nodes(graph: RawGraph) -> RawResult<Vec<RawGraphNode>>;
}

/// Device, managed and pinned host memory, and copies: part of the raw-call table [`RawApi`] (whose `# Safety` section covers these calls).
///
/// # Safety
///
/// As for [`RawApi`].
#[allow(clippy::missing_safety_doc)]
pub unsafe trait RawMemory {
    /// `cuMemAlloc` in the current context.
    unsafe fn mem_alloc(len: usize) -> RawResult<DevicePtr>;
    /// `cuMemFree`.
    unsafe fn mem_free(ptr: DevicePtr) -> RawResult;
    /// `cuMemAllocAsync` ([`Optional::StreamOrderedAlloc`]).
    unsafe fn mem_alloc_async(len: usize, stream: RawStream) -> RawResult<DevicePtr>;
    /// `cuMemFreeAsync` ([`Optional::StreamOrderedAlloc`]).
    unsafe fn mem_free_async(ptr: DevicePtr, stream: RawStream) -> RawResult;
    /// `cuDeviceGetDefaultMemPool` of device `ordinal` ([`Optional::MemoryPools`]).
    unsafe fn device_default_mem_pool(ordinal: usize) -> RawResult<RawMemPool>;
    /// `cuMemPoolCreate` of a pool of pinned memory on device `ordinal`, without export
    /// handles, reserving at most `max_size` bytes (`maxSize`; `0`: no limit)
    /// ([`Optional::MemoryPools`]).
    unsafe fn mem_pool_create(ordinal: usize, max_size: usize) -> RawResult<RawMemPool>;
    /// `cuMemPoolDestroy` ([`Optional::MemoryPools`]).
    unsafe fn mem_pool_destroy(pool: RawMemPool) -> RawResult;
    /// `cuMemPoolGetAttribute` of a 64-bit attribute ([`Optional::MemoryPools`]).
    unsafe fn mem_pool_get_attribute(
        pool: RawMemPool,
        attribute: MemPoolAttribute,
    ) -> RawResult<u64>;
    /// `cuMemPoolSetAttribute` of a 64-bit attribute ([`Optional::MemoryPools`]).
    unsafe fn mem_pool_set_attribute(
        pool: RawMemPool,
        attribute: MemPoolAttribute,
        value: u64,
    ) -> RawResult;
    /// `cuMemPoolTrimTo` ([`Optional::MemoryPools`]).
    unsafe fn mem_pool_trim_to(pool: RawMemPool, keep: usize) -> RawResult;
    /// `cuMemAllocFromPoolAsync` ([`Optional::MemoryPools`]); freed with
    /// [`mem_free_async`](RawMemory::mem_free_async).
    unsafe fn mem_alloc_from_pool_async(
        len: usize,
        pool: RawMemPool,
        stream: RawStream,
    ) -> RawResult<DevicePtr>;
    /// `cuMemAllocManaged` with `CU_MEM_ATTACH_GLOBAL` ([`Optional::ManagedMemory`]).
    unsafe fn mem_alloc_managed(len: usize) -> RawResult<DevicePtr>;
    /// `cuMemHostAlloc(PORTABLE | DEVICEMAP)`: pinned, mapped host memory.
    unsafe fn host_alloc(len: usize) -> RawResult<*mut u8>;
    /// `cuMemFreeHost`.
    unsafe fn host_free(ptr: *mut u8) -> RawResult;
    /// `cuMemHostGetDevicePointer` in the current context.
    unsafe fn host_device_pointer(ptr: *mut u8) -> RawResult<DevicePtr>;
    /// `cuMemcpyHtoDAsync`.
    unsafe fn memcpy_htod_async(
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        stream: RawStream,
    ) -> RawResult;
    /// `cuMemcpyDtoHAsync`.
    unsafe fn memcpy_dtoh_async(
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        stream: RawStream,
    ) -> RawResult;
    /// `cuMemcpyDtoDAsync`.
    unsafe fn memcpy_dtod_async(
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
        stream: RawStream,
    ) -> RawResult;
    /// `cuMemsetD8Async`.
    unsafe fn memset_d8_async(
        dst: DevicePtr,
        value: u8,
        len: usize,
        stream: RawStream,
    ) -> RawResult;
}

/// Modules and kernel launches: part of the raw-call table [`RawApi`] (whose `# Safety` section covers these calls).
///
/// # Safety
///
/// As for [`RawApi`].
#[allow(clippy::missing_safety_doc)]
pub unsafe trait RawKernels {
    /// `cuModuleLoadData` in the current context (CUDA: PTX text or cubin; HIP: a code object).
    unsafe fn module_load_data(image: *const c_void) -> RawResult<RawModule>;
    /// `cuModuleUnload`.
    unsafe fn module_unload(module: RawModule) -> RawResult;
    /// `cuModuleGetFunction`.
    unsafe fn module_get_function(module: RawModule, name: &CStr) -> RawResult<RawFunction>;
    /// `cuLaunchKernel` with kernel parameters (`kernelParams`, no `extra`).
    unsafe fn launch_kernel(
        function: RawFunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem_bytes: u32,
        stream: RawStream,
        params: *mut *mut c_void,
    ) -> RawResult;
}

/// What [`RawApi::load`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadInfo {
    /// The driver/runtime version as the runtime encodes it (CUDA: 1000 × major + 10 × minor).
    pub driver_version: i32,
    /// Number of devices (0 when the runtime is there but no device is).
    pub device_count: usize,
    /// Where the library was loaded from, or its name.
    pub library: String,
}
