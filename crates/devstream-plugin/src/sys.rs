//! The C ABI of Paddle custom-device plug-ins: `paddle/phi/backends/device_ext.h`, custom
//! runtime version 0.1.1, declared in Rust from the published header.
//!
//! A plug-in is a shared library exporting `void InitPlugin(CustomRuntimeParams*)`. The host
//! fills `CustomRuntimeParams::size`, points `interface` at a zeroed [`C_DeviceInterface`] whose
//! `size` it fills too, and calls `InitPlugin`; the plug-in checks the sizes, writes its runtime
//! version and device type and fills the function pointers it implements.
//!
//! # Layouts
//!
//! The table grew across Paddle releases while the runtime version stayed 0.1.1. Every
//! published layout shares the same first [`STABLE_PREFIX_SIZE`] bytes: `size`, the device API
//! (streams, events, synchronisation), the memory API (allocation, copies) and the first nine
//! info functions (device count and list, memory statistics, chunk sizes). What follows
//! differs from release to release (Paddle 2.x: `get_compute_capability(size_t*)`, no
//! `xccl_get_comm_name`; 3.1 adds device properties and Eigen devices, 3.2 float16/bfloat16
//! queries and BLAS handles, 3.3 `is_dnn_supported` and the graph-capture functions).
//! [`C_DeviceInterface`] declares the Paddle 3.3.1 table in full, in header order;
//! [`KNOWN_LAYOUTS`] lists the families devstream offers. A field outside the stable prefix
//! may be read only once the negotiation has established that the plug-in filled exactly the
//! 3.3 table.
//!
//! `C_Status` is declared as a transparent integer, not a Rust enum: a plug-in may return any
//! `int`, and a Rust enum holding an undeclared value would be undefined behaviour.
//!
//! This file depends on nothing but `core`, so that the workspace's test plug-ins include the
//! very same declarations.
#![allow(non_camel_case_types, non_upper_case_globals)]

use core::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

/// Runtime major version this declaration implements (`PADDLE_CUSTOM_RUNTIME_MAJOR_VERSION`).
pub const RUNTIME_MAJOR_VERSION: usize = 0;
/// Runtime minor version (`PADDLE_CUSTOM_RUNTIME_MINOR_VERSION`).
pub const RUNTIME_MINOR_VERSION: usize = 1;
/// Runtime patch version (`PADDLE_CUSTOM_RUNTIME_PATCH_VERSION`).
pub const RUNTIME_PATCH_VERSION: usize = 1;

/// The status every table function returns (a C `enum`, i.e. an `int`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct C_Status(pub c_int);

/// Success.
pub const C_SUCCESS: C_Status = C_Status(0);
/// Results may not meet expectation (e.g. an asynchronous interface is actually synchronous).
pub const C_WARNING: C_Status = C_Status(1);
/// Resource exhausted, or a query failed (for `query_stream`/`query_event`: not complete yet).
pub const C_FAILED: C_Status = C_Status(2);
/// Invalid argument, wrong usage or uninitialised.
pub const C_ERROR: C_Status = C_Status(3);
/// An error inside the plug-in.
pub const C_INTERNAL_ERROR: C_Status = C_Status(4);

impl C_Status {
    /// The header's name of the status, or `"unknown status"`.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "C_SUCCESS",
            1 => "C_WARNING",
            2 => "C_FAILED",
            3 => "C_ERROR",
            4 => "C_INTERNAL_ERROR",
            _ => "unknown status",
        }
    }
}

/// A device as the table sees it: the host fills `id`; `init_device` may replace it with the
/// physical id and `get_device` writes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct C_Device_st {
    /// The device id.
    pub id: c_int,
}

/// `typedef struct C_Device_st* C_Device`.
pub type C_Device = *mut C_Device_st;

/// Opaque stream object of a plug-in.
#[repr(C)]
pub struct C_Stream_st {
    _opaque: [u8; 0],
}
/// A plug-in's stream handle. Null is legal: Paddle treats it as the synchronous default
/// stream, and some plug-ins never write it.
pub type C_Stream = *mut C_Stream_st;

/// Opaque event object of a plug-in.
#[repr(C)]
pub struct C_Event_st {
    _opaque: [u8; 0],
}
/// A plug-in's event handle (null is legal, as for streams).
pub type C_Event = *mut C_Event_st;

/// Declares opaque handle types the table mentions but devstream never uses.
macro_rules! opaque_handles {
    ($($(#[$doc:meta])* $st:ident => $handle:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub struct $st {
            _opaque: [u8; 0],
        }
        $(#[$doc])*
        pub type $handle = *mut $st;
    )*};
}

opaque_handles! {
    /// An instantiated (executable) graph.
    C_GraphExec_st => C_GraphExec;
    /// A captured graph (`struct C_CudaGraph_t_st*` in the header).
    C_CudaGraph_t_st => C_CudaGraph;
    /// A node of a captured graph.
    C_CudaGraphNode_st => C_CudaGraphNode;
    /// Collective-communication communicator.
    C_CCLComm_st => C_CCLComm;
    /// Profiler collector.
    C_Profiler_st => C_Profiler;
    /// Paddle allocator.
    C_Allocator_st => C_Allocator;
    /// Paddle place.
    C_Place_st => C_Place;
    /// Eigen GPU device.
    C_EigenDevice_st => C_EigenDevice;
    /// BLAS handle.
    C_BLASHandle_st => C_BLASHandle;
    /// BLASLt handle.
    C_BLASLtHandle_st => C_BLASLtHandle;
}

/// `C_DataType` (a C `enum`, passed as `int`): one of the constants below (header order).
pub type C_DataType = c_int;
/// `UNDEFINED`.
pub const C_DATA_TYPE_UNDEFINED: C_DataType = 0;
/// `BOOL`.
pub const C_DATA_TYPE_BOOL: C_DataType = 1;
/// `UINT8`.
pub const C_DATA_TYPE_UINT8: C_DataType = 2;
/// `UINT16`.
pub const C_DATA_TYPE_UINT16: C_DataType = 3;
/// `UINT32`.
pub const C_DATA_TYPE_UINT32: C_DataType = 4;
/// `UINT64`.
pub const C_DATA_TYPE_UINT64: C_DataType = 5;
/// `INT8`.
pub const C_DATA_TYPE_INT8: C_DataType = 6;
/// `INT16`.
pub const C_DATA_TYPE_INT16: C_DataType = 7;
/// `INT32`.
pub const C_DATA_TYPE_INT32: C_DataType = 8;
/// `INT64`.
pub const C_DATA_TYPE_INT64: C_DataType = 9;
/// `FLOAT16`.
pub const C_DATA_TYPE_FLOAT16: C_DataType = 10;
/// `FLOAT32`.
pub const C_DATA_TYPE_FLOAT32: C_DataType = 11;
/// `FLOAT64`.
pub const C_DATA_TYPE_FLOAT64: C_DataType = 12;
/// `BFLOAT16`.
pub const C_DATA_TYPE_BFLOAT16: C_DataType = 13;
/// `COMPLEX64`.
pub const C_DATA_TYPE_COMPLEX64: C_DataType = 14;
/// `COMPLEX128`.
pub const C_DATA_TYPE_COMPLEX128: C_DataType = 15;

/// `C_CCLReduceOp` (a C `enum`, passed as `int`): one of the constants below (header order:
/// `SUM = 0, AVG, MAX, MIN, PRODUCT`).
pub type C_CCLReduceOp = c_int;
/// `SUM`.
pub const C_CCL_SUM: C_CCLReduceOp = 0;
/// `AVG`.
pub const C_CCL_AVG: C_CCLReduceOp = 1;
/// `MAX`.
pub const C_CCL_MAX: C_CCLReduceOp = 2;
/// `MIN`.
pub const C_CCL_MIN: C_CCLReduceOp = 3;
/// `PRODUCT`.
pub const C_CCL_PRODUCT: C_CCLReduceOp = 4;

/// `C_StreamCaptureMode` (a C `enum`, passed as `int`): one of the `C_StreamCaptureMode*`
/// constants.
pub type C_StreamCaptureMode = c_int;
/// Capture interacts with unsafe calls of every thread (CUDA's global mode).
pub const C_StreamCaptureModeGlobal: C_StreamCaptureMode = 0;
/// Capture interacts with unsafe calls of the capturing thread only.
pub const C_StreamCaptureModeThreadLocal: C_StreamCaptureMode = 1;
/// Capture does not restrict unsafe calls.
pub const C_StreamCaptureModeRelaxed: C_StreamCaptureMode = 2;

/// `C_StreamCaptureStatus` (a C `enum`, passed as `int`): one of the
/// `C_StreamCaptureStatus*` constants.
pub type C_StreamCaptureStatus = c_int;
/// The stream is not capturing.
pub const C_StreamCaptureStatusNone: C_StreamCaptureStatus = 0;
/// The stream is capturing.
pub const C_StreamCaptureStatusActive: C_StreamCaptureStatus = 1;
/// The stream's capture was invalidated (it must still be ended).
pub const C_StreamCaptureStatusInvalidated: C_StreamCaptureStatus = 2;

/// `void (*)(C_GraphExec exec_graph, void* user_data)`: sets parameters of an instantiated
/// graph.
pub type C_GraphExecuterSetter =
    Option<unsafe extern "C" fn(exec_graph: C_GraphExec, user_data: *mut c_void)>;

/// `void (*)(C_GraphExec exec)`.
pub type C_GraphExecHook = Option<unsafe extern "C" fn(exec: C_GraphExec)>;

/// The parameter setters of a captured graph (`get_parameter_setter_for_exec_graph`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct C_GraphHookManager {
    /// Number of setters.
    pub size: usize,
    /// `size` setters.
    pub hooks: *mut C_GraphExecuterSetter,
    /// `size` user-data pointers, one per setter.
    pub user_data: *mut *mut c_void,
}

/// A collective root id: `sz` bytes at `data`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct C_CCLRootId {
    /// Size in bytes.
    pub sz: usize,
    /// The bytes.
    pub data: *mut c_void,
}

/// A host callback put on a stream by `stream_add_callback`.
pub type C_Callback = Option<
    unsafe extern "C" fn(
        device: C_Device,
        stream: C_Stream,
        user_data: *mut c_void,
        status: *mut C_Status,
    ),
>;

/// Declares `Option<unsafe extern "C" fn(..) -> C_Status>` aliases.
macro_rules! status_fns {
    ($($(#[$doc:meta])* $name:ident($($arg:ty),*);)*) => {$(
        $(#[$doc])*
        pub type $name = Option<unsafe extern "C" fn($($arg),*) -> C_Status>;
    )*};
}

status_fns! {
    /// `C_Status (*)()`.
    FnVoid();
    /// `C_Status (*)(C_Device)`.
    FnDevice(C_Device);
    /// `C_Status (*)(C_Device, C_Stream*)`.
    FnCreateStream(C_Device, *mut C_Stream);
    /// `C_Status (*)(C_Device, C_Stream)`.
    FnStream(C_Device, C_Stream);
    /// `C_Status (*)(C_Device, C_Stream, C_Callback, void*)`.
    FnAddCallback(C_Device, C_Stream, C_Callback, *mut c_void);
    /// `C_Status (*)(C_Device, C_Event*)`.
    FnCreateEvent(C_Device, *mut C_Event);
    /// `C_Status (*)(C_Device, C_Stream, C_Event)`.
    FnStreamEvent(C_Device, C_Stream, C_Event);
    /// `C_Status (*)(C_Device, C_Event)`.
    FnEvent(C_Device, C_Event);
    /// `C_Status (*)(C_Device, void**, size_t)`.
    FnAllocate(C_Device, *mut *mut c_void, usize);
    /// `C_Status (*)(C_Device, void*, size_t)`.
    FnDeallocate(C_Device, *mut c_void, usize);
    /// `C_Status (*)(C_Device, void*, unsigned char, size_t)`.
    FnMemset(C_Device, *mut c_void, u8, usize);
    /// `C_Status (*)(C_Device, void*, const void*, size_t)`.
    FnCopy(C_Device, *mut c_void, *const c_void, usize);
    /// `C_Status (*)(C_Device dst, C_Device src, void*, const void*, size_t)`.
    FnCopyP2p(C_Device, C_Device, *mut c_void, *const c_void, usize);
    /// `C_Status (*)(C_Device, C_Stream, void*, const void*, size_t)`.
    FnAsyncCopy(C_Device, C_Stream, *mut c_void, *const c_void, usize);
    /// `C_Status (*)(C_Device dst, C_Device src, C_Stream, void*, const void*, size_t)`.
    FnAsyncCopyP2p(C_Device, C_Device, C_Stream, *mut c_void, *const c_void, usize);
    /// `C_Status (*)(size_t*)`.
    FnSize(*mut usize);
    /// `C_Status (*)(C_Device, size_t*, size_t*)`.
    FnMemoryStats(C_Device, *mut usize, *mut usize);
    /// `C_Status (*)(C_Device, size_t*)`.
    FnDeviceSize(C_Device, *mut usize);
    /// `C_Status (*)(C_Device, void*)`.
    FnDeviceProperties(C_Device, *mut c_void);
    /// `C_Status (*)(C_Device, std::array<unsigned int, 3>*)`.
    FnGridDims(C_Device, *mut [c_uint; 3]);
    /// `C_Status (*)(C_Device, bool*)`.
    FnDeviceBool(C_Device, *mut bool);
    /// `C_Status (*)(C_Place, C_EigenDevice*, C_Stream, C_Allocator)`.
    FnInitEigen(C_Place, *mut C_EigenDevice, C_Stream, C_Allocator);
    /// `C_Status (*)(C_Device, C_EigenDevice*)`.
    FnDestroyEigen(C_Device, *mut C_EigenDevice);
    /// `C_Status (*)(C_CCLComm, char*)`.
    FnCommName(C_CCLComm, *mut c_char);
    /// `C_Status (*)(C_CCLRootId*)`.
    FnUniqueId(*mut C_CCLRootId);
    /// `C_Status (*)(size_t, C_CCLRootId*, size_t, C_CCLComm*)`.
    FnCommInitRank(usize, *mut C_CCLRootId, usize, *mut C_CCLComm);
    /// `C_Status (*)(C_CCLComm)`.
    FnComm(C_CCLComm);
    /// `xccl_all_reduce`.
    FnAllReduce(*mut c_void, *mut c_void, usize, C_DataType, C_CCLReduceOp, C_CCLComm, C_Stream);
    /// `xccl_broadcast`.
    FnBroadcast(*mut c_void, usize, C_DataType, usize, C_CCLComm, C_Stream);
    /// `xccl_reduce`.
    FnReduce(*mut c_void, *mut c_void, usize, C_DataType, C_CCLReduceOp, usize, C_CCLComm, C_Stream);
    /// `xccl_all_gather`.
    FnAllGather(*mut c_void, *mut c_void, usize, C_DataType, C_CCLComm, C_Stream);
    /// `xccl_reduce_scatter`.
    FnReduceScatter(*mut c_void, *mut c_void, usize, C_DataType, C_CCLReduceOp, C_CCLComm, C_Stream);
    /// `xccl_send` / `xccl_recv`.
    FnSendRecv(*mut c_void, usize, C_DataType, usize, C_CCLComm, C_Stream);
    /// `xccl_all_to_all`.
    FnAllToAll(
        *const *const c_void,
        *const usize,
        *const C_DataType,
        *mut *mut c_void,
        *const usize,
        *const C_DataType,
        usize,
        usize,
        C_CCLComm,
        C_Stream
    );
    /// `C_Status (*)(C_Profiler, void**)`.
    FnProfilerInit(C_Profiler, *mut *mut c_void);
    /// `C_Status (*)(C_Profiler, void*)`.
    FnProfiler(C_Profiler, *mut c_void);
    /// `C_Status (*)(C_Profiler, uint64_t, void*)`.
    FnProfilerCollect(C_Profiler, u64, *mut c_void);
    /// `C_Status (*)(C_Device, C_BLASHandle*, C_Stream)`.
    FnInitBlas(C_Device, *mut C_BLASHandle, C_Stream);
    /// `C_Status (*)(C_Device, C_BLASHandle, int)`.
    FnBlasMathMode(C_Device, C_BLASHandle, c_int);
    /// `C_Status (*)(C_Device, C_BLASLtHandle*)`.
    FnInitBlasLt(C_Device, *mut C_BLASLtHandle);
    /// `C_Status (*)(C_Device, C_BLASHandle)`.
    FnDestroyBlas(C_Device, C_BLASHandle);
    /// `C_Status (*)(C_Device, C_BLASLtHandle)`.
    FnDestroyBlasLt(C_Device, C_BLASLtHandle);
    /// `C_Status (*)(C_Device, C_Stream, C_StreamCaptureMode)`.
    FnBeginCapture(C_Device, C_Stream, C_StreamCaptureMode);
    /// `C_Status (*)(C_Device, C_Stream, C_CudaGraph*)`.
    FnEndCapture(C_Device, C_Stream, *mut C_CudaGraph);
    /// `C_Status (*)(C_Device, C_GraphExec, C_Stream)`.
    FnGraphLaunch(C_Device, C_GraphExec, C_Stream);
    /// `C_Status (*)(C_CudaGraph)`.
    FnGraphDestroy(C_CudaGraph);
    /// `C_Status (*)(C_GraphExec)`.
    FnGraphExecDestroy(C_GraphExec);
    /// `C_Status (*)(C_GraphExec* pExec, C_CudaGraph* pGraph, void** pErrorNode,
    /// char* pLogBuffer, size_t bufferSize)`.
    FnGraphInstantiate(*mut C_GraphExec, *mut C_CudaGraph, *mut *mut c_void, *mut c_char, usize);
    /// `C_Status (*)(C_CudaGraph, C_CudaGraphNode* pNode, size_t* numNodes)`.
    FnGraphGetNodes(C_CudaGraph, *mut C_CudaGraphNode, *mut usize);
    /// `cuda_stream_capture_info`: `(C_Device, C_Stream, C_StreamCaptureStatus*,
    /// unsigned long long* id, C_CudaGraph*, C_CudaGraphNode* dependencies, void** edge_data,
    /// size_t* num_dependencies)`.
    FnStreamCaptureInfo(
        C_Device,
        C_Stream,
        *mut C_StreamCaptureStatus,
        *mut c_ulonglong,
        *mut C_CudaGraph,
        *mut C_CudaGraphNode,
        *mut *mut c_void,
        *mut usize
    );
    /// `C_Status (*)(C_CudaGraph, C_GraphHookManager*)`.
    FnGraphParameterSetter(C_CudaGraph, *mut C_GraphHookManager);
    /// `C_Status (*)(C_CudaGraph, const char* path, unsigned int flags)`.
    FnGraphDebugDotPrint(C_CudaGraph, *const c_char, c_uint);
    /// `C_Status (*)(C_StreamCaptureMode*)`.
    FnExchangeCaptureMode(*mut C_StreamCaptureMode);
    /// `blas_axpby`: `y = alpha * x + beta * y`.
    FnAxpby(C_Device, C_Stream, C_DataType, usize, f32, *mut c_void, f32, *mut c_void);
}

/// The function table, in header order: the Paddle 3.3.1 layout, 1128 bytes (141 words) on
/// 64-bit targets.
///
/// Every pointer is optional at the type level; which ones a plug-in must fill is checked when
/// it is loaded. Only the fields before `get_compute_capability` ([`STABLE_PREFIX_SIZE`]) have
/// the same offset in every published layout; the rest may be read only from a plug-in known
/// to have filled the 3.3 table ([`LAYOUT_PADDLE_3_3`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct C_DeviceInterface {
    /// Filled by the host with the size of its table; the plug-in checks it.
    pub size: usize,

    // device manage api
    /// Initialise the hardware (optional).
    pub initialize: FnVoid,
    /// Deinitialise the hardware (optional).
    pub finalize: FnVoid,
    /// Initialise a device; may replace the logical id with the physical one (optional).
    pub init_device: FnDevice,
    /// Set the current device (required).
    pub set_device: FnDevice,
    /// Get the current device: the plug-in writes its id (required).
    pub get_device: FnDevice,
    /// Deinitialise a device (optional).
    pub deinit_device: FnDevice,
    /// Create a stream (optional: without it every stream is the null stream).
    pub create_stream: FnCreateStream,
    /// Destroy a stream (optional).
    pub destroy_stream: FnStream,
    /// Query a stream: `C_SUCCESS` when its work is complete (optional: then synchronize).
    pub query_stream: FnStream,
    /// Put a host callback on a stream (optional).
    pub stream_add_callback: FnAddCallback,
    /// Create an event (required).
    pub create_event: FnCreateEvent,
    /// Record an event on a stream (required).
    pub record_event: FnStreamEvent,
    /// Destroy an event (required).
    pub destroy_event: FnEvent,
    /// Query an event: `C_SUCCESS` when complete (optional: then synchronize).
    pub query_event: FnEvent,
    /// Synchronise a device (optional).
    pub synchronize_device: FnDevice,
    /// Synchronise a stream (optional).
    pub synchronize_stream: FnStream,
    /// Synchronise an event (required).
    pub synchronize_event: FnEvent,
    /// Make a stream wait on an event (optional).
    pub stream_wait_event: FnStreamEvent,
    /// Reserved.
    pub reserved_dev_api: [*mut c_void; 8],

    // memory manage api
    /// Allocate device memory (required).
    pub device_memory_allocate: FnAllocate,
    /// Free device memory (required).
    pub device_memory_deallocate: FnDeallocate,
    /// Set device memory, synchronously (optional).
    pub device_memory_set: FnMemset,
    /// Allocate (pinned) host memory (optional).
    pub host_memory_allocate: FnAllocate,
    /// Free host memory (optional).
    pub host_memory_deallocate: FnDeallocate,
    /// Allocate unified memory (optional).
    pub unified_memory_allocate: FnAllocate,
    /// Free unified memory (optional).
    pub unified_memory_deallocate: FnDeallocate,
    /// Synchronous host→device copy (optional).
    pub memory_copy_h2d: FnCopy,
    /// Synchronous device→host copy (optional).
    pub memory_copy_d2h: FnCopy,
    /// Synchronous device→device copy (optional).
    pub memory_copy_d2d: FnCopy,
    /// Synchronous peer copy (optional).
    pub memory_copy_p2p: FnCopyP2p,
    /// Stream-ordered host→device copy (optional).
    pub async_memory_copy_h2d: FnAsyncCopy,
    /// Stream-ordered device→host copy (optional).
    pub async_memory_copy_d2h: FnAsyncCopy,
    /// Stream-ordered device→device copy (optional).
    pub async_memory_copy_d2d: FnAsyncCopy,
    /// Stream-ordered peer copy (optional).
    pub async_memory_copy_p2p: FnAsyncCopyP2p,
    /// Reserved.
    pub reserved_mem_api: [*mut c_void; 8],

    // info api
    /// Number of visible devices (required).
    pub get_device_count: FnSize,
    /// Ids of the visible devices, `count` entries (required).
    pub get_device_list: FnSize,
    /// Total and free memory (optional).
    pub device_memory_stats: FnMemoryStats,
    /// Minimum allocation chunk (optional).
    pub device_min_chunk_size: FnDeviceSize,
    /// Maximum allocation chunk (optional).
    pub device_max_chunk_size: FnDeviceSize,
    /// Maximum single allocation (optional).
    pub device_max_alloc_size: FnDeviceSize,
    /// Extra padding per allocation (optional).
    pub device_extra_padding_size: FnDeviceSize,
    /// Initial allocation size (optional).
    pub device_init_alloc_size: FnDeviceSize,
    /// Reallocation size (optional).
    pub device_realloc_size: FnDeviceSize,
    /// Compute capability (3.x: with a device argument; Paddle 2.x: without).
    pub get_compute_capability: FnDeviceSize,
    /// Device properties (3.1 and later).
    pub get_device_properties: FnDeviceProperties,
    /// Runtime version.
    pub get_runtime_version: FnDeviceSize,
    /// Driver version.
    pub get_driver_version: FnDeviceSize,
    /// Number of multiprocessors.
    pub get_multi_process: FnDeviceSize,
    /// Maximum threads per multiprocessor.
    pub get_max_threads_per_mp: FnDeviceSize,
    /// Maximum threads per block.
    pub get_max_threads_per_block: FnDeviceSize,
    /// Maximum grid dimensions.
    pub get_max_grid_dim_size: FnGridDims,
    /// Whether float16 is supported.
    pub is_float16_supported: FnDeviceBool,
    /// Whether bfloat16 is supported.
    pub is_bfloat16_supported: FnDeviceBool,
    /// Whether a DNN library is supported (3.3 and later).
    pub is_dnn_supported: FnDeviceBool,
    /// Create an Eigen device.
    pub init_eigen_device: FnInitEigen,
    /// Destroy an Eigen device.
    pub destroy_eigen_device: FnDestroyEigen,
    /// Reserved.
    pub reserved_info_api: [*mut c_void; 8],

    // ccl api
    /// Communicator name.
    pub xccl_get_comm_name: FnCommName,
    /// Size of a unique id.
    pub xccl_get_unique_id_size: FnSize,
    /// A unique id.
    pub xccl_get_unique_id: FnUniqueId,
    /// Create a communicator.
    pub xccl_comm_init_rank: FnCommInitRank,
    /// Destroy a communicator.
    pub xccl_destroy_comm: FnComm,
    /// All-reduce.
    pub xccl_all_reduce: FnAllReduce,
    /// Broadcast.
    pub xccl_broadcast: FnBroadcast,
    /// Reduce.
    pub xccl_reduce: FnReduce,
    /// All-gather.
    pub xccl_all_gather: FnAllGather,
    /// Reduce-scatter.
    pub xccl_reduce_scatter: FnReduceScatter,
    /// Group start.
    pub xccl_group_start: FnVoid,
    /// Group end.
    pub xccl_group_end: FnVoid,
    /// Send.
    pub xccl_send: FnSendRecv,
    /// Receive.
    pub xccl_recv: FnSendRecv,
    /// All-to-all.
    pub xccl_all_to_all: FnAllToAll,
    /// Reserved.
    pub reserved_ccl_api: [*mut c_void; 8],

    // profiler api
    /// Profiler initialise.
    pub profiler_initialize: FnProfilerInit,
    /// Profiler finalise.
    pub profiler_finalize: FnProfiler,
    /// Profiler prepare.
    pub profiler_prepare_tracing: FnProfiler,
    /// Profiler start.
    pub profiler_start_tracing: FnProfiler,
    /// Profiler stop.
    pub profiler_stop_tracing: FnProfiler,
    /// Profiler collect.
    pub profiler_collect_trace_data: FnProfilerCollect,
    /// Reserved.
    pub reserved_profiler_api: [*mut c_void; 8],

    // blas handle api
    /// Create a BLAS handle.
    pub init_blas_handle: FnInitBlas,
    /// Set a BLAS math mode.
    pub blas_set_math_mode: FnBlasMathMode,
    /// Create a BLASLt handle.
    pub init_blaslt_handle: FnInitBlasLt,
    /// Destroy a BLAS handle.
    pub destroy_blas_handle: FnDestroyBlas,
    /// Destroy a BLASLt handle.
    pub destroy_blaslt_handle: FnDestroyBlasLt,

    // graph capture (3.3 and later)
    /// Begin capturing `stream` into a graph, in the given `C_StreamCaptureMode`.
    pub cuda_stream_begin_capture: FnBeginCapture,
    /// End the capture of `stream`: writes the captured graph. The header's name, misspelled
    /// (`captrue`), is kept.
    pub cuda_stream_end_captrue: FnEndCapture,
    /// Launch an instantiated graph on a stream.
    pub cuda_graph_launch: FnGraphLaunch,
    /// Destroy a captured graph.
    pub cuda_graph_destroy: FnGraphDestroy,
    /// Destroy an instantiated graph.
    pub cuda_graph_exec_destroy: FnGraphExecDestroy,
    /// Instantiate `*pGraph`: writes the executable graph to `*pExec`.
    pub cuda_graph_instantiate: FnGraphInstantiate,
    /// The nodes of a captured graph.
    pub cuda_graph_get_nodes: FnGraphGetNodes,
    /// The capture status (and graph, dependencies) of a stream.
    pub cuda_stream_capture_info: FnStreamCaptureInfo,
    /// The parameter setters of a captured graph.
    pub get_parameter_setter_for_exec_graph: FnGraphParameterSetter,
    /// Write a graph as Graphviz text to a file.
    pub cuda_graph_debug_dot_print: FnGraphDebugDotPrint,
    /// Exchange the calling thread's capture mode. The header's name, misspelled
    /// (`capthure`), is kept.
    pub cuda_thread_exchange_stream_capthure_mode: FnExchangeCaptureMode,

    // other api
    /// `y = alpha * x + beta * y`.
    pub blas_axpby: FnAxpby,
    /// Reserved.
    pub reserved_other_api: [*mut c_void; 7],
}

impl C_DeviceInterface {
    /// A table with every pointer null and `size` 0.
    pub const fn zeroed() -> Self {
        // SAFETY: every field is an integer, an `Option` of a function pointer or an array of
        // raw pointers; all-zero bytes are a valid value for each (0, `None`, null).
        unsafe { core::mem::MaybeUninit::<Self>::zeroed().assume_init() }
    }
}

/// The runtime version a plug-in reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CustomRuntimeVersion {
    /// Major.
    pub major: usize,
    /// Minor.
    pub minor: usize,
    /// Patch.
    pub patch: usize,
}

/// The argument of `InitPlugin` (Paddle 3.x / develop layout, 96 bytes on 64-bit targets;
/// Paddle 2.x lacks `pir_default_passes`, 88 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CustomRuntimeParams {
    /// Filled by the host with the size of its params; the plug-in checks it.
    pub size: usize,
    /// Filled by the host: the table the plug-in fills.
    pub interface: *mut C_DeviceInterface,
    /// Written by the plug-in.
    pub version: CustomRuntimeVersion,
    /// Written by the plug-in: its device type (a static C string).
    pub device_type: *mut c_char,
    /// Written by the plug-in: its sub-device type.
    pub sub_device_type: *mut c_char,
    /// Written by the plug-in (3.x / develop): a `std::vector<std::string>*` of PIR passes.
    pub pir_default_passes: *mut c_void,
    /// Reserved.
    pub reserved: [c_char; 32],
}

impl CustomRuntimeParams {
    /// Params with every field zero or null.
    pub const fn zeroed() -> Self {
        // SAFETY: integers, raw pointers and a `c_char` array: all-zero bytes are valid.
        unsafe { core::mem::MaybeUninit::<Self>::zeroed().assume_init() }
    }
}

/// Every field of [`C_DeviceInterface`] (Paddle 3.3) with its offset, in header order: what the
/// header tests compare with `offsetof` in the real `device_ext.h`.
pub const C_DEVICE_INTERFACE_FIELDS: &[(&str, usize)] = &[
    ("size", core::mem::offset_of!(C_DeviceInterface, size)),
    (
        "initialize",
        core::mem::offset_of!(C_DeviceInterface, initialize),
    ),
    (
        "finalize",
        core::mem::offset_of!(C_DeviceInterface, finalize),
    ),
    (
        "init_device",
        core::mem::offset_of!(C_DeviceInterface, init_device),
    ),
    (
        "set_device",
        core::mem::offset_of!(C_DeviceInterface, set_device),
    ),
    (
        "get_device",
        core::mem::offset_of!(C_DeviceInterface, get_device),
    ),
    (
        "deinit_device",
        core::mem::offset_of!(C_DeviceInterface, deinit_device),
    ),
    (
        "create_stream",
        core::mem::offset_of!(C_DeviceInterface, create_stream),
    ),
    (
        "destroy_stream",
        core::mem::offset_of!(C_DeviceInterface, destroy_stream),
    ),
    (
        "query_stream",
        core::mem::offset_of!(C_DeviceInterface, query_stream),
    ),
    (
        "stream_add_callback",
        core::mem::offset_of!(C_DeviceInterface, stream_add_callback),
    ),
    (
        "create_event",
        core::mem::offset_of!(C_DeviceInterface, create_event),
    ),
    (
        "record_event",
        core::mem::offset_of!(C_DeviceInterface, record_event),
    ),
    (
        "destroy_event",
        core::mem::offset_of!(C_DeviceInterface, destroy_event),
    ),
    (
        "query_event",
        core::mem::offset_of!(C_DeviceInterface, query_event),
    ),
    (
        "synchronize_device",
        core::mem::offset_of!(C_DeviceInterface, synchronize_device),
    ),
    (
        "synchronize_stream",
        core::mem::offset_of!(C_DeviceInterface, synchronize_stream),
    ),
    (
        "synchronize_event",
        core::mem::offset_of!(C_DeviceInterface, synchronize_event),
    ),
    (
        "stream_wait_event",
        core::mem::offset_of!(C_DeviceInterface, stream_wait_event),
    ),
    (
        "reserved_dev_api",
        core::mem::offset_of!(C_DeviceInterface, reserved_dev_api),
    ),
    (
        "device_memory_allocate",
        core::mem::offset_of!(C_DeviceInterface, device_memory_allocate),
    ),
    (
        "device_memory_deallocate",
        core::mem::offset_of!(C_DeviceInterface, device_memory_deallocate),
    ),
    (
        "device_memory_set",
        core::mem::offset_of!(C_DeviceInterface, device_memory_set),
    ),
    (
        "host_memory_allocate",
        core::mem::offset_of!(C_DeviceInterface, host_memory_allocate),
    ),
    (
        "host_memory_deallocate",
        core::mem::offset_of!(C_DeviceInterface, host_memory_deallocate),
    ),
    (
        "unified_memory_allocate",
        core::mem::offset_of!(C_DeviceInterface, unified_memory_allocate),
    ),
    (
        "unified_memory_deallocate",
        core::mem::offset_of!(C_DeviceInterface, unified_memory_deallocate),
    ),
    (
        "memory_copy_h2d",
        core::mem::offset_of!(C_DeviceInterface, memory_copy_h2d),
    ),
    (
        "memory_copy_d2h",
        core::mem::offset_of!(C_DeviceInterface, memory_copy_d2h),
    ),
    (
        "memory_copy_d2d",
        core::mem::offset_of!(C_DeviceInterface, memory_copy_d2d),
    ),
    (
        "memory_copy_p2p",
        core::mem::offset_of!(C_DeviceInterface, memory_copy_p2p),
    ),
    (
        "async_memory_copy_h2d",
        core::mem::offset_of!(C_DeviceInterface, async_memory_copy_h2d),
    ),
    (
        "async_memory_copy_d2h",
        core::mem::offset_of!(C_DeviceInterface, async_memory_copy_d2h),
    ),
    (
        "async_memory_copy_d2d",
        core::mem::offset_of!(C_DeviceInterface, async_memory_copy_d2d),
    ),
    (
        "async_memory_copy_p2p",
        core::mem::offset_of!(C_DeviceInterface, async_memory_copy_p2p),
    ),
    (
        "reserved_mem_api",
        core::mem::offset_of!(C_DeviceInterface, reserved_mem_api),
    ),
    (
        "get_device_count",
        core::mem::offset_of!(C_DeviceInterface, get_device_count),
    ),
    (
        "get_device_list",
        core::mem::offset_of!(C_DeviceInterface, get_device_list),
    ),
    (
        "device_memory_stats",
        core::mem::offset_of!(C_DeviceInterface, device_memory_stats),
    ),
    (
        "device_min_chunk_size",
        core::mem::offset_of!(C_DeviceInterface, device_min_chunk_size),
    ),
    (
        "device_max_chunk_size",
        core::mem::offset_of!(C_DeviceInterface, device_max_chunk_size),
    ),
    (
        "device_max_alloc_size",
        core::mem::offset_of!(C_DeviceInterface, device_max_alloc_size),
    ),
    (
        "device_extra_padding_size",
        core::mem::offset_of!(C_DeviceInterface, device_extra_padding_size),
    ),
    (
        "device_init_alloc_size",
        core::mem::offset_of!(C_DeviceInterface, device_init_alloc_size),
    ),
    (
        "device_realloc_size",
        core::mem::offset_of!(C_DeviceInterface, device_realloc_size),
    ),
    (
        "get_compute_capability",
        core::mem::offset_of!(C_DeviceInterface, get_compute_capability),
    ),
    (
        "get_device_properties",
        core::mem::offset_of!(C_DeviceInterface, get_device_properties),
    ),
    (
        "get_runtime_version",
        core::mem::offset_of!(C_DeviceInterface, get_runtime_version),
    ),
    (
        "get_driver_version",
        core::mem::offset_of!(C_DeviceInterface, get_driver_version),
    ),
    (
        "get_multi_process",
        core::mem::offset_of!(C_DeviceInterface, get_multi_process),
    ),
    (
        "get_max_threads_per_mp",
        core::mem::offset_of!(C_DeviceInterface, get_max_threads_per_mp),
    ),
    (
        "get_max_threads_per_block",
        core::mem::offset_of!(C_DeviceInterface, get_max_threads_per_block),
    ),
    (
        "get_max_grid_dim_size",
        core::mem::offset_of!(C_DeviceInterface, get_max_grid_dim_size),
    ),
    (
        "is_float16_supported",
        core::mem::offset_of!(C_DeviceInterface, is_float16_supported),
    ),
    (
        "is_bfloat16_supported",
        core::mem::offset_of!(C_DeviceInterface, is_bfloat16_supported),
    ),
    (
        "is_dnn_supported",
        core::mem::offset_of!(C_DeviceInterface, is_dnn_supported),
    ),
    (
        "init_eigen_device",
        core::mem::offset_of!(C_DeviceInterface, init_eigen_device),
    ),
    (
        "destroy_eigen_device",
        core::mem::offset_of!(C_DeviceInterface, destroy_eigen_device),
    ),
    (
        "reserved_info_api",
        core::mem::offset_of!(C_DeviceInterface, reserved_info_api),
    ),
    (
        "xccl_get_comm_name",
        core::mem::offset_of!(C_DeviceInterface, xccl_get_comm_name),
    ),
    (
        "xccl_get_unique_id_size",
        core::mem::offset_of!(C_DeviceInterface, xccl_get_unique_id_size),
    ),
    (
        "xccl_get_unique_id",
        core::mem::offset_of!(C_DeviceInterface, xccl_get_unique_id),
    ),
    (
        "xccl_comm_init_rank",
        core::mem::offset_of!(C_DeviceInterface, xccl_comm_init_rank),
    ),
    (
        "xccl_destroy_comm",
        core::mem::offset_of!(C_DeviceInterface, xccl_destroy_comm),
    ),
    (
        "xccl_all_reduce",
        core::mem::offset_of!(C_DeviceInterface, xccl_all_reduce),
    ),
    (
        "xccl_broadcast",
        core::mem::offset_of!(C_DeviceInterface, xccl_broadcast),
    ),
    (
        "xccl_reduce",
        core::mem::offset_of!(C_DeviceInterface, xccl_reduce),
    ),
    (
        "xccl_all_gather",
        core::mem::offset_of!(C_DeviceInterface, xccl_all_gather),
    ),
    (
        "xccl_reduce_scatter",
        core::mem::offset_of!(C_DeviceInterface, xccl_reduce_scatter),
    ),
    (
        "xccl_group_start",
        core::mem::offset_of!(C_DeviceInterface, xccl_group_start),
    ),
    (
        "xccl_group_end",
        core::mem::offset_of!(C_DeviceInterface, xccl_group_end),
    ),
    (
        "xccl_send",
        core::mem::offset_of!(C_DeviceInterface, xccl_send),
    ),
    (
        "xccl_recv",
        core::mem::offset_of!(C_DeviceInterface, xccl_recv),
    ),
    (
        "xccl_all_to_all",
        core::mem::offset_of!(C_DeviceInterface, xccl_all_to_all),
    ),
    (
        "reserved_ccl_api",
        core::mem::offset_of!(C_DeviceInterface, reserved_ccl_api),
    ),
    (
        "profiler_initialize",
        core::mem::offset_of!(C_DeviceInterface, profiler_initialize),
    ),
    (
        "profiler_finalize",
        core::mem::offset_of!(C_DeviceInterface, profiler_finalize),
    ),
    (
        "profiler_prepare_tracing",
        core::mem::offset_of!(C_DeviceInterface, profiler_prepare_tracing),
    ),
    (
        "profiler_start_tracing",
        core::mem::offset_of!(C_DeviceInterface, profiler_start_tracing),
    ),
    (
        "profiler_stop_tracing",
        core::mem::offset_of!(C_DeviceInterface, profiler_stop_tracing),
    ),
    (
        "profiler_collect_trace_data",
        core::mem::offset_of!(C_DeviceInterface, profiler_collect_trace_data),
    ),
    (
        "reserved_profiler_api",
        core::mem::offset_of!(C_DeviceInterface, reserved_profiler_api),
    ),
    (
        "init_blas_handle",
        core::mem::offset_of!(C_DeviceInterface, init_blas_handle),
    ),
    (
        "blas_set_math_mode",
        core::mem::offset_of!(C_DeviceInterface, blas_set_math_mode),
    ),
    (
        "init_blaslt_handle",
        core::mem::offset_of!(C_DeviceInterface, init_blaslt_handle),
    ),
    (
        "destroy_blas_handle",
        core::mem::offset_of!(C_DeviceInterface, destroy_blas_handle),
    ),
    (
        "destroy_blaslt_handle",
        core::mem::offset_of!(C_DeviceInterface, destroy_blaslt_handle),
    ),
    (
        "cuda_stream_begin_capture",
        core::mem::offset_of!(C_DeviceInterface, cuda_stream_begin_capture),
    ),
    (
        "cuda_stream_end_captrue",
        core::mem::offset_of!(C_DeviceInterface, cuda_stream_end_captrue),
    ),
    (
        "cuda_graph_launch",
        core::mem::offset_of!(C_DeviceInterface, cuda_graph_launch),
    ),
    (
        "cuda_graph_destroy",
        core::mem::offset_of!(C_DeviceInterface, cuda_graph_destroy),
    ),
    (
        "cuda_graph_exec_destroy",
        core::mem::offset_of!(C_DeviceInterface, cuda_graph_exec_destroy),
    ),
    (
        "cuda_graph_instantiate",
        core::mem::offset_of!(C_DeviceInterface, cuda_graph_instantiate),
    ),
    (
        "cuda_graph_get_nodes",
        core::mem::offset_of!(C_DeviceInterface, cuda_graph_get_nodes),
    ),
    (
        "cuda_stream_capture_info",
        core::mem::offset_of!(C_DeviceInterface, cuda_stream_capture_info),
    ),
    (
        "get_parameter_setter_for_exec_graph",
        core::mem::offset_of!(C_DeviceInterface, get_parameter_setter_for_exec_graph),
    ),
    (
        "cuda_graph_debug_dot_print",
        core::mem::offset_of!(C_DeviceInterface, cuda_graph_debug_dot_print),
    ),
    (
        "cuda_thread_exchange_stream_capthure_mode",
        core::mem::offset_of!(C_DeviceInterface, cuda_thread_exchange_stream_capthure_mode),
    ),
    (
        "blas_axpby",
        core::mem::offset_of!(C_DeviceInterface, blas_axpby),
    ),
    (
        "reserved_other_api",
        core::mem::offset_of!(C_DeviceInterface, reserved_other_api),
    ),
];

/// Every field of [`CustomRuntimeParams`] (Paddle 3.x) with its offset, in header order.
pub const CUSTOM_RUNTIME_PARAMS_FIELDS: &[(&str, usize)] = &[
    ("size", core::mem::offset_of!(CustomRuntimeParams, size)),
    (
        "interface",
        core::mem::offset_of!(CustomRuntimeParams, interface),
    ),
    (
        "version",
        core::mem::offset_of!(CustomRuntimeParams, version),
    ),
    (
        "device_type",
        core::mem::offset_of!(CustomRuntimeParams, device_type),
    ),
    (
        "sub_device_type",
        core::mem::offset_of!(CustomRuntimeParams, sub_device_type),
    ),
    (
        "pir_default_passes",
        core::mem::offset_of!(CustomRuntimeParams, pir_default_passes),
    ),
    (
        "reserved",
        core::mem::offset_of!(CustomRuntimeParams, reserved),
    ),
];

/// The Paddle 2.6 layout (2.6.2 checked), declared in full for the header tests: the 3.3
/// table's stable prefix, then `get_compute_capability`, `get_runtime_version` and
/// `get_driver_version` without a device argument, no `xccl_get_comm_name`, no BLAS handles
/// or capture. devstream never reads a 2.x table beyond the stable prefix.
pub mod paddle_2_6 {
    use super::*;

    /// `C_DeviceInterface` of Paddle 2.6 (912 bytes on 64-bit targets).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct C_DeviceInterface {
        /// As [`super::C_DeviceInterface::size`].
        pub size: usize,
        /// As [`super::C_DeviceInterface::initialize`].
        pub initialize: FnVoid,
        /// As [`super::C_DeviceInterface::finalize`].
        pub finalize: FnVoid,
        /// As [`super::C_DeviceInterface::init_device`].
        pub init_device: FnDevice,
        /// As [`super::C_DeviceInterface::set_device`].
        pub set_device: FnDevice,
        /// As [`super::C_DeviceInterface::get_device`].
        pub get_device: FnDevice,
        /// As [`super::C_DeviceInterface::deinit_device`].
        pub deinit_device: FnDevice,
        /// As [`super::C_DeviceInterface::create_stream`].
        pub create_stream: FnCreateStream,
        /// As [`super::C_DeviceInterface::destroy_stream`].
        pub destroy_stream: FnStream,
        /// As [`super::C_DeviceInterface::query_stream`].
        pub query_stream: FnStream,
        /// As [`super::C_DeviceInterface::stream_add_callback`].
        pub stream_add_callback: FnAddCallback,
        /// As [`super::C_DeviceInterface::create_event`].
        pub create_event: FnCreateEvent,
        /// As [`super::C_DeviceInterface::record_event`].
        pub record_event: FnStreamEvent,
        /// As [`super::C_DeviceInterface::destroy_event`].
        pub destroy_event: FnEvent,
        /// As [`super::C_DeviceInterface::query_event`].
        pub query_event: FnEvent,
        /// As [`super::C_DeviceInterface::synchronize_device`].
        pub synchronize_device: FnDevice,
        /// As [`super::C_DeviceInterface::synchronize_stream`].
        pub synchronize_stream: FnStream,
        /// As [`super::C_DeviceInterface::synchronize_event`].
        pub synchronize_event: FnEvent,
        /// As [`super::C_DeviceInterface::stream_wait_event`].
        pub stream_wait_event: FnStreamEvent,
        /// As [`super::C_DeviceInterface::reserved_dev_api`].
        pub reserved_dev_api: [*mut c_void; 8],
        /// As [`super::C_DeviceInterface::device_memory_allocate`].
        pub device_memory_allocate: FnAllocate,
        /// As [`super::C_DeviceInterface::device_memory_deallocate`].
        pub device_memory_deallocate: FnDeallocate,
        /// As [`super::C_DeviceInterface::device_memory_set`].
        pub device_memory_set: FnMemset,
        /// As [`super::C_DeviceInterface::host_memory_allocate`].
        pub host_memory_allocate: FnAllocate,
        /// As [`super::C_DeviceInterface::host_memory_deallocate`].
        pub host_memory_deallocate: FnDeallocate,
        /// As [`super::C_DeviceInterface::unified_memory_allocate`].
        pub unified_memory_allocate: FnAllocate,
        /// As [`super::C_DeviceInterface::unified_memory_deallocate`].
        pub unified_memory_deallocate: FnDeallocate,
        /// As [`super::C_DeviceInterface::memory_copy_h2d`].
        pub memory_copy_h2d: FnCopy,
        /// As [`super::C_DeviceInterface::memory_copy_d2h`].
        pub memory_copy_d2h: FnCopy,
        /// As [`super::C_DeviceInterface::memory_copy_d2d`].
        pub memory_copy_d2d: FnCopy,
        /// As [`super::C_DeviceInterface::memory_copy_p2p`].
        pub memory_copy_p2p: FnCopyP2p,
        /// As [`super::C_DeviceInterface::async_memory_copy_h2d`].
        pub async_memory_copy_h2d: FnAsyncCopy,
        /// As [`super::C_DeviceInterface::async_memory_copy_d2h`].
        pub async_memory_copy_d2h: FnAsyncCopy,
        /// As [`super::C_DeviceInterface::async_memory_copy_d2d`].
        pub async_memory_copy_d2d: FnAsyncCopy,
        /// As [`super::C_DeviceInterface::async_memory_copy_p2p`].
        pub async_memory_copy_p2p: FnAsyncCopyP2p,
        /// As [`super::C_DeviceInterface::reserved_mem_api`].
        pub reserved_mem_api: [*mut c_void; 8],
        /// As [`super::C_DeviceInterface::get_device_count`].
        pub get_device_count: FnSize,
        /// As [`super::C_DeviceInterface::get_device_list`].
        pub get_device_list: FnSize,
        /// As [`super::C_DeviceInterface::device_memory_stats`].
        pub device_memory_stats: FnMemoryStats,
        /// As [`super::C_DeviceInterface::device_min_chunk_size`].
        pub device_min_chunk_size: FnDeviceSize,
        /// As [`super::C_DeviceInterface::device_max_chunk_size`].
        pub device_max_chunk_size: FnDeviceSize,
        /// As [`super::C_DeviceInterface::device_max_alloc_size`].
        pub device_max_alloc_size: FnDeviceSize,
        /// As [`super::C_DeviceInterface::device_extra_padding_size`].
        pub device_extra_padding_size: FnDeviceSize,
        /// As [`super::C_DeviceInterface::device_init_alloc_size`].
        pub device_init_alloc_size: FnDeviceSize,
        /// As [`super::C_DeviceInterface::device_realloc_size`].
        pub device_realloc_size: FnDeviceSize,
        /// `get_compute_capability` (2.x: `size_t*` only, no device).
        pub get_compute_capability: FnSize,
        /// `get_runtime_version` (2.x: `size_t*` only, no device).
        pub get_runtime_version: FnSize,
        /// `get_driver_version` (2.x: `size_t*` only, no device).
        pub get_driver_version: FnSize,
        /// As [`super::C_DeviceInterface::reserved_info_api`].
        pub reserved_info_api: [*mut c_void; 8],
        /// As [`super::C_DeviceInterface::xccl_get_unique_id_size`].
        pub xccl_get_unique_id_size: FnSize,
        /// As [`super::C_DeviceInterface::xccl_get_unique_id`].
        pub xccl_get_unique_id: FnUniqueId,
        /// As [`super::C_DeviceInterface::xccl_comm_init_rank`].
        pub xccl_comm_init_rank: FnCommInitRank,
        /// As [`super::C_DeviceInterface::xccl_destroy_comm`].
        pub xccl_destroy_comm: FnComm,
        /// As [`super::C_DeviceInterface::xccl_all_reduce`].
        pub xccl_all_reduce: FnAllReduce,
        /// As [`super::C_DeviceInterface::xccl_broadcast`].
        pub xccl_broadcast: FnBroadcast,
        /// As [`super::C_DeviceInterface::xccl_reduce`].
        pub xccl_reduce: FnReduce,
        /// As [`super::C_DeviceInterface::xccl_all_gather`].
        pub xccl_all_gather: FnAllGather,
        /// As [`super::C_DeviceInterface::xccl_reduce_scatter`].
        pub xccl_reduce_scatter: FnReduceScatter,
        /// As [`super::C_DeviceInterface::xccl_group_start`].
        pub xccl_group_start: FnVoid,
        /// As [`super::C_DeviceInterface::xccl_group_end`].
        pub xccl_group_end: FnVoid,
        /// As [`super::C_DeviceInterface::xccl_send`].
        pub xccl_send: FnSendRecv,
        /// As [`super::C_DeviceInterface::xccl_recv`].
        pub xccl_recv: FnSendRecv,
        /// As [`super::C_DeviceInterface::xccl_all_to_all`].
        pub xccl_all_to_all: FnAllToAll,
        /// As [`super::C_DeviceInterface::reserved_ccl_api`].
        pub reserved_ccl_api: [*mut c_void; 8],
        /// As [`super::C_DeviceInterface::profiler_initialize`].
        pub profiler_initialize: FnProfilerInit,
        /// As [`super::C_DeviceInterface::profiler_finalize`].
        pub profiler_finalize: FnProfiler,
        /// As [`super::C_DeviceInterface::profiler_prepare_tracing`].
        pub profiler_prepare_tracing: FnProfiler,
        /// As [`super::C_DeviceInterface::profiler_start_tracing`].
        pub profiler_start_tracing: FnProfiler,
        /// As [`super::C_DeviceInterface::profiler_stop_tracing`].
        pub profiler_stop_tracing: FnProfiler,
        /// As [`super::C_DeviceInterface::profiler_collect_trace_data`].
        pub profiler_collect_trace_data: FnProfilerCollect,
        /// As [`super::C_DeviceInterface::reserved_profiler_api`].
        pub reserved_profiler_api: [*mut c_void; 8],
        /// As [`super::C_DeviceInterface::blas_axpby`].
        pub blas_axpby: FnAxpby,
        /// As [`super::C_DeviceInterface::reserved_other_api`].
        pub reserved_other_api: [*mut c_void; 7],
    }

    /// `CustomRuntimeParams` of Paddle 2.x (88 bytes: no `pir_default_passes`).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct CustomRuntimeParams {
        /// As [`super::CustomRuntimeParams::size`].
        pub size: usize,
        /// As [`super::CustomRuntimeParams::interface`].
        pub interface: *mut C_DeviceInterface,
        /// As [`super::CustomRuntimeParams::version`].
        pub version: CustomRuntimeVersion,
        /// As [`super::CustomRuntimeParams::device_type`].
        pub device_type: *mut c_char,
        /// As [`super::CustomRuntimeParams::sub_device_type`].
        pub sub_device_type: *mut c_char,
        /// As [`super::CustomRuntimeParams::reserved`].
        pub reserved: [c_char; 32],
    }

    /// Every field of the 2.6 [`C_DeviceInterface`] with its offset, in header order.
    pub const C_DEVICE_INTERFACE_FIELDS: &[(&str, usize)] = &[
        ("size", core::mem::offset_of!(C_DeviceInterface, size)),
        (
            "initialize",
            core::mem::offset_of!(C_DeviceInterface, initialize),
        ),
        (
            "finalize",
            core::mem::offset_of!(C_DeviceInterface, finalize),
        ),
        (
            "init_device",
            core::mem::offset_of!(C_DeviceInterface, init_device),
        ),
        (
            "set_device",
            core::mem::offset_of!(C_DeviceInterface, set_device),
        ),
        (
            "get_device",
            core::mem::offset_of!(C_DeviceInterface, get_device),
        ),
        (
            "deinit_device",
            core::mem::offset_of!(C_DeviceInterface, deinit_device),
        ),
        (
            "create_stream",
            core::mem::offset_of!(C_DeviceInterface, create_stream),
        ),
        (
            "destroy_stream",
            core::mem::offset_of!(C_DeviceInterface, destroy_stream),
        ),
        (
            "query_stream",
            core::mem::offset_of!(C_DeviceInterface, query_stream),
        ),
        (
            "stream_add_callback",
            core::mem::offset_of!(C_DeviceInterface, stream_add_callback),
        ),
        (
            "create_event",
            core::mem::offset_of!(C_DeviceInterface, create_event),
        ),
        (
            "record_event",
            core::mem::offset_of!(C_DeviceInterface, record_event),
        ),
        (
            "destroy_event",
            core::mem::offset_of!(C_DeviceInterface, destroy_event),
        ),
        (
            "query_event",
            core::mem::offset_of!(C_DeviceInterface, query_event),
        ),
        (
            "synchronize_device",
            core::mem::offset_of!(C_DeviceInterface, synchronize_device),
        ),
        (
            "synchronize_stream",
            core::mem::offset_of!(C_DeviceInterface, synchronize_stream),
        ),
        (
            "synchronize_event",
            core::mem::offset_of!(C_DeviceInterface, synchronize_event),
        ),
        (
            "stream_wait_event",
            core::mem::offset_of!(C_DeviceInterface, stream_wait_event),
        ),
        (
            "reserved_dev_api",
            core::mem::offset_of!(C_DeviceInterface, reserved_dev_api),
        ),
        (
            "device_memory_allocate",
            core::mem::offset_of!(C_DeviceInterface, device_memory_allocate),
        ),
        (
            "device_memory_deallocate",
            core::mem::offset_of!(C_DeviceInterface, device_memory_deallocate),
        ),
        (
            "device_memory_set",
            core::mem::offset_of!(C_DeviceInterface, device_memory_set),
        ),
        (
            "host_memory_allocate",
            core::mem::offset_of!(C_DeviceInterface, host_memory_allocate),
        ),
        (
            "host_memory_deallocate",
            core::mem::offset_of!(C_DeviceInterface, host_memory_deallocate),
        ),
        (
            "unified_memory_allocate",
            core::mem::offset_of!(C_DeviceInterface, unified_memory_allocate),
        ),
        (
            "unified_memory_deallocate",
            core::mem::offset_of!(C_DeviceInterface, unified_memory_deallocate),
        ),
        (
            "memory_copy_h2d",
            core::mem::offset_of!(C_DeviceInterface, memory_copy_h2d),
        ),
        (
            "memory_copy_d2h",
            core::mem::offset_of!(C_DeviceInterface, memory_copy_d2h),
        ),
        (
            "memory_copy_d2d",
            core::mem::offset_of!(C_DeviceInterface, memory_copy_d2d),
        ),
        (
            "memory_copy_p2p",
            core::mem::offset_of!(C_DeviceInterface, memory_copy_p2p),
        ),
        (
            "async_memory_copy_h2d",
            core::mem::offset_of!(C_DeviceInterface, async_memory_copy_h2d),
        ),
        (
            "async_memory_copy_d2h",
            core::mem::offset_of!(C_DeviceInterface, async_memory_copy_d2h),
        ),
        (
            "async_memory_copy_d2d",
            core::mem::offset_of!(C_DeviceInterface, async_memory_copy_d2d),
        ),
        (
            "async_memory_copy_p2p",
            core::mem::offset_of!(C_DeviceInterface, async_memory_copy_p2p),
        ),
        (
            "reserved_mem_api",
            core::mem::offset_of!(C_DeviceInterface, reserved_mem_api),
        ),
        (
            "get_device_count",
            core::mem::offset_of!(C_DeviceInterface, get_device_count),
        ),
        (
            "get_device_list",
            core::mem::offset_of!(C_DeviceInterface, get_device_list),
        ),
        (
            "device_memory_stats",
            core::mem::offset_of!(C_DeviceInterface, device_memory_stats),
        ),
        (
            "device_min_chunk_size",
            core::mem::offset_of!(C_DeviceInterface, device_min_chunk_size),
        ),
        (
            "device_max_chunk_size",
            core::mem::offset_of!(C_DeviceInterface, device_max_chunk_size),
        ),
        (
            "device_max_alloc_size",
            core::mem::offset_of!(C_DeviceInterface, device_max_alloc_size),
        ),
        (
            "device_extra_padding_size",
            core::mem::offset_of!(C_DeviceInterface, device_extra_padding_size),
        ),
        (
            "device_init_alloc_size",
            core::mem::offset_of!(C_DeviceInterface, device_init_alloc_size),
        ),
        (
            "device_realloc_size",
            core::mem::offset_of!(C_DeviceInterface, device_realloc_size),
        ),
        (
            "get_compute_capability",
            core::mem::offset_of!(C_DeviceInterface, get_compute_capability),
        ),
        (
            "get_runtime_version",
            core::mem::offset_of!(C_DeviceInterface, get_runtime_version),
        ),
        (
            "get_driver_version",
            core::mem::offset_of!(C_DeviceInterface, get_driver_version),
        ),
        (
            "reserved_info_api",
            core::mem::offset_of!(C_DeviceInterface, reserved_info_api),
        ),
        (
            "xccl_get_unique_id_size",
            core::mem::offset_of!(C_DeviceInterface, xccl_get_unique_id_size),
        ),
        (
            "xccl_get_unique_id",
            core::mem::offset_of!(C_DeviceInterface, xccl_get_unique_id),
        ),
        (
            "xccl_comm_init_rank",
            core::mem::offset_of!(C_DeviceInterface, xccl_comm_init_rank),
        ),
        (
            "xccl_destroy_comm",
            core::mem::offset_of!(C_DeviceInterface, xccl_destroy_comm),
        ),
        (
            "xccl_all_reduce",
            core::mem::offset_of!(C_DeviceInterface, xccl_all_reduce),
        ),
        (
            "xccl_broadcast",
            core::mem::offset_of!(C_DeviceInterface, xccl_broadcast),
        ),
        (
            "xccl_reduce",
            core::mem::offset_of!(C_DeviceInterface, xccl_reduce),
        ),
        (
            "xccl_all_gather",
            core::mem::offset_of!(C_DeviceInterface, xccl_all_gather),
        ),
        (
            "xccl_reduce_scatter",
            core::mem::offset_of!(C_DeviceInterface, xccl_reduce_scatter),
        ),
        (
            "xccl_group_start",
            core::mem::offset_of!(C_DeviceInterface, xccl_group_start),
        ),
        (
            "xccl_group_end",
            core::mem::offset_of!(C_DeviceInterface, xccl_group_end),
        ),
        (
            "xccl_send",
            core::mem::offset_of!(C_DeviceInterface, xccl_send),
        ),
        (
            "xccl_recv",
            core::mem::offset_of!(C_DeviceInterface, xccl_recv),
        ),
        (
            "xccl_all_to_all",
            core::mem::offset_of!(C_DeviceInterface, xccl_all_to_all),
        ),
        (
            "reserved_ccl_api",
            core::mem::offset_of!(C_DeviceInterface, reserved_ccl_api),
        ),
        (
            "profiler_initialize",
            core::mem::offset_of!(C_DeviceInterface, profiler_initialize),
        ),
        (
            "profiler_finalize",
            core::mem::offset_of!(C_DeviceInterface, profiler_finalize),
        ),
        (
            "profiler_prepare_tracing",
            core::mem::offset_of!(C_DeviceInterface, profiler_prepare_tracing),
        ),
        (
            "profiler_start_tracing",
            core::mem::offset_of!(C_DeviceInterface, profiler_start_tracing),
        ),
        (
            "profiler_stop_tracing",
            core::mem::offset_of!(C_DeviceInterface, profiler_stop_tracing),
        ),
        (
            "profiler_collect_trace_data",
            core::mem::offset_of!(C_DeviceInterface, profiler_collect_trace_data),
        ),
        (
            "reserved_profiler_api",
            core::mem::offset_of!(C_DeviceInterface, reserved_profiler_api),
        ),
        (
            "blas_axpby",
            core::mem::offset_of!(C_DeviceInterface, blas_axpby),
        ),
        (
            "reserved_other_api",
            core::mem::offset_of!(C_DeviceInterface, reserved_other_api),
        ),
    ];

    /// Every field of the 2.x [`CustomRuntimeParams`] with its offset, in header order.
    pub const CUSTOM_RUNTIME_PARAMS_FIELDS: &[(&str, usize)] = &[
        ("size", core::mem::offset_of!(CustomRuntimeParams, size)),
        (
            "interface",
            core::mem::offset_of!(CustomRuntimeParams, interface),
        ),
        (
            "version",
            core::mem::offset_of!(CustomRuntimeParams, version),
        ),
        (
            "device_type",
            core::mem::offset_of!(CustomRuntimeParams, device_type),
        ),
        (
            "sub_device_type",
            core::mem::offset_of!(CustomRuntimeParams, sub_device_type),
        ),
        (
            "reserved",
            core::mem::offset_of!(CustomRuntimeParams, reserved),
        ),
    ];

    const _: () = assert!(
        core::mem::size_of::<C_DeviceInterface>() == 912 || cfg!(not(target_pointer_width = "64"))
    );
    const _: () = assert!(
        core::mem::size_of::<CustomRuntimeParams>() == 88 || cfg!(not(target_pointer_width = "64"))
    );
}

/// `void InitPlugin(CustomRuntimeParams*)`.
pub type InitPluginFn = unsafe extern "C" fn(params: *mut CustomRuntimeParams);

/// The exported symbol name of the entry point.
pub const INIT_PLUGIN_SYMBOL: &[u8] = b"InitPlugin\0";

/// Bytes at the start of the table that every published layout shares (through
/// `device_realloc_size`): the only part devstream reads.
pub const STABLE_PREFIX_SIZE: usize =
    core::mem::offset_of!(C_DeviceInterface, get_compute_capability);

/// One table layout of a Paddle release family, as `sizeof` reports it on 64-bit targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiLayout {
    /// A human name of the family (`"Paddle 3.3"`).
    pub name: &'static str,
    /// `sizeof(CustomRuntimeParams)` in that family.
    pub params_size: usize,
    /// `sizeof(C_DeviceInterface)` in that family.
    pub interface_size: usize,
    /// Bytes of the table devstream may read from a plug-in known to have filled exactly this
    /// layout: the whole table where devstream declares it ([`C_DeviceInterface`], 3.3), the
    /// [`STABLE_PREFIX_SIZE`] otherwise.
    pub readable: usize,
}

/// Paddle 2.6 (2.6.2 checked; the only 2.x release left on PyPI): 88-byte params (no
/// `pir_default_passes`), a 912-byte table (`get_compute_capability(size_t*)`, no
/// `xccl_get_comm_name`, `xccl_all_to_all`, no BLAS handles).
pub const LAYOUT_PADDLE_2_6: AbiLayout = AbiLayout {
    name: "Paddle 2.6",
    params_size: PARAMS_SIZE_2,
    interface_size: 912,
    readable: STABLE_PREFIX_SIZE,
};

/// Paddle 3.0 (3.0.0 checked): 96-byte params, a 920-byte table (2.6's plus
/// `xccl_get_comm_name`; compute capability, runtime and driver versions per device).
pub const LAYOUT_PADDLE_3_0: AbiLayout = AbiLayout {
    name: "Paddle 3.0",
    params_size: PARAMS_SIZE_3,
    interface_size: 920,
    readable: STABLE_PREFIX_SIZE,
};

/// Paddle 3.1 (3.1.0 and 3.1.1 checked): a 976-byte table (device properties, multiprocessor
/// and grid queries, Eigen devices).
pub const LAYOUT_PADDLE_3_1: AbiLayout = AbiLayout {
    name: "Paddle 3.1",
    params_size: PARAMS_SIZE_3,
    interface_size: 976,
    readable: STABLE_PREFIX_SIZE,
};

/// Paddle 3.2 (3.2.0, 3.2.1 and 3.2.2 checked): a 1032-byte table (float16/bfloat16 queries,
/// BLAS handles; `blas_axpby` then `reserved_other_api[7]`). The "develop" table devstream
/// declared before (the same 1032 bytes with `transform_unary`/`transform_binary` in the
/// first two reserved words) is this size: no release has those two functions, and devstream
/// never reads a 3.2 table beyond the stable prefix.
pub const LAYOUT_PADDLE_3_2: AbiLayout = AbiLayout {
    name: "Paddle 3.2",
    params_size: PARAMS_SIZE_3,
    interface_size: 1032,
    readable: STABLE_PREFIX_SIZE,
};

/// Paddle 3.3 (3.3.0 and 3.3.1 checked): the 1128-byte table declared by
/// [`C_DeviceInterface`], with `is_dnn_supported` and the graph-capture functions; the only
/// layout devstream reads beyond the stable prefix.
pub const LAYOUT_PADDLE_3_3: AbiLayout = AbiLayout {
    name: "Paddle 3.3",
    params_size: PARAMS_SIZE_3,
    interface_size: core::mem::size_of::<C_DeviceInterface>(),
    readable: core::mem::size_of::<C_DeviceInterface>(),
};

/// `sizeof(CustomRuntimeParams)` of Paddle 2.x (no `pir_default_passes`).
pub const PARAMS_SIZE_2: usize =
    core::mem::offset_of!(CustomRuntimeParams, pir_default_passes) + 32;
/// `sizeof(CustomRuntimeParams)` of Paddle 3.x ([`CustomRuntimeParams`]).
pub const PARAMS_SIZE_3: usize = core::mem::size_of::<CustomRuntimeParams>();

/// The table layouts of the Paddle releases on PyPI (2.6.2, 3.0.0–3.3.1), by table size.
/// Every 3.x family has 96-byte params, so the params size alone never tells which table a
/// plug-in filled.
pub const KNOWN_LAYOUTS: [AbiLayout; 5] = [
    LAYOUT_PADDLE_2_6,
    LAYOUT_PADDLE_3_0,
    LAYOUT_PADDLE_3_1,
    LAYOUT_PADDLE_3_2,
    LAYOUT_PADDLE_3_3,
];

/// The largest table of any known layout: a plug-in that fills beyond it was built against a
/// header devstream does not know.
pub const MAX_KNOWN_INTERFACE_SIZE: usize = core::mem::size_of::<C_DeviceInterface>();

/// Bytes devstream allocates for the table: far beyond every known layout, so that a plug-in
/// built against a larger header cannot write past it.
pub const INTERFACE_ALLOCATION: usize = 16 * 1024;
/// Bytes devstream allocates for the params.
pub const PARAMS_ALLOCATION: usize = 4 * 1024;

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    const WORD: usize = 8;

    #[test]
    fn params_layout_matches_the_header() {
        assert_eq!(size_of::<CustomRuntimeVersion>(), 3 * WORD);
        assert_eq!(size_of::<C_Device_st>(), 4);
        assert_eq!(size_of::<C_Status>(), 4);
        assert_eq!(offset_of!(CustomRuntimeParams, size), 0);
        assert_eq!(offset_of!(CustomRuntimeParams, interface), 8);
        assert_eq!(offset_of!(CustomRuntimeParams, version), 16);
        assert_eq!(offset_of!(CustomRuntimeParams, device_type), 40);
        assert_eq!(offset_of!(CustomRuntimeParams, sub_device_type), 48);
        assert_eq!(offset_of!(CustomRuntimeParams, pir_default_passes), 56);
        assert_eq!(offset_of!(CustomRuntimeParams, reserved), 64);
        assert_eq!(size_of::<CustomRuntimeParams>(), 96);
        assert_eq!(PARAMS_SIZE_2, 88);
        assert_eq!(PARAMS_SIZE_3, 96);
    }

    /// Word offsets of every field of the Paddle 3.3.1 table, in header order.
    const PADDLE_3_3_WORDS: &[(&str, usize, usize)] = &[
        ("size", offset_of!(C_DeviceInterface, size), 0),
        ("initialize", offset_of!(C_DeviceInterface, initialize), 1),
        ("finalize", offset_of!(C_DeviceInterface, finalize), 2),
        ("init_device", offset_of!(C_DeviceInterface, init_device), 3),
        ("set_device", offset_of!(C_DeviceInterface, set_device), 4),
        ("get_device", offset_of!(C_DeviceInterface, get_device), 5),
        (
            "deinit_device",
            offset_of!(C_DeviceInterface, deinit_device),
            6,
        ),
        (
            "create_stream",
            offset_of!(C_DeviceInterface, create_stream),
            7,
        ),
        (
            "destroy_stream",
            offset_of!(C_DeviceInterface, destroy_stream),
            8,
        ),
        (
            "query_stream",
            offset_of!(C_DeviceInterface, query_stream),
            9,
        ),
        (
            "stream_add_callback",
            offset_of!(C_DeviceInterface, stream_add_callback),
            10,
        ),
        (
            "create_event",
            offset_of!(C_DeviceInterface, create_event),
            11,
        ),
        (
            "record_event",
            offset_of!(C_DeviceInterface, record_event),
            12,
        ),
        (
            "destroy_event",
            offset_of!(C_DeviceInterface, destroy_event),
            13,
        ),
        (
            "query_event",
            offset_of!(C_DeviceInterface, query_event),
            14,
        ),
        (
            "synchronize_device",
            offset_of!(C_DeviceInterface, synchronize_device),
            15,
        ),
        (
            "synchronize_stream",
            offset_of!(C_DeviceInterface, synchronize_stream),
            16,
        ),
        (
            "synchronize_event",
            offset_of!(C_DeviceInterface, synchronize_event),
            17,
        ),
        (
            "stream_wait_event",
            offset_of!(C_DeviceInterface, stream_wait_event),
            18,
        ),
        (
            "reserved_dev_api",
            offset_of!(C_DeviceInterface, reserved_dev_api),
            19,
        ),
        (
            "device_memory_allocate",
            offset_of!(C_DeviceInterface, device_memory_allocate),
            27,
        ),
        (
            "device_memory_deallocate",
            offset_of!(C_DeviceInterface, device_memory_deallocate),
            28,
        ),
        (
            "device_memory_set",
            offset_of!(C_DeviceInterface, device_memory_set),
            29,
        ),
        (
            "host_memory_allocate",
            offset_of!(C_DeviceInterface, host_memory_allocate),
            30,
        ),
        (
            "host_memory_deallocate",
            offset_of!(C_DeviceInterface, host_memory_deallocate),
            31,
        ),
        (
            "unified_memory_allocate",
            offset_of!(C_DeviceInterface, unified_memory_allocate),
            32,
        ),
        (
            "unified_memory_deallocate",
            offset_of!(C_DeviceInterface, unified_memory_deallocate),
            33,
        ),
        (
            "memory_copy_h2d",
            offset_of!(C_DeviceInterface, memory_copy_h2d),
            34,
        ),
        (
            "memory_copy_d2h",
            offset_of!(C_DeviceInterface, memory_copy_d2h),
            35,
        ),
        (
            "memory_copy_d2d",
            offset_of!(C_DeviceInterface, memory_copy_d2d),
            36,
        ),
        (
            "memory_copy_p2p",
            offset_of!(C_DeviceInterface, memory_copy_p2p),
            37,
        ),
        (
            "async_memory_copy_h2d",
            offset_of!(C_DeviceInterface, async_memory_copy_h2d),
            38,
        ),
        (
            "async_memory_copy_d2h",
            offset_of!(C_DeviceInterface, async_memory_copy_d2h),
            39,
        ),
        (
            "async_memory_copy_d2d",
            offset_of!(C_DeviceInterface, async_memory_copy_d2d),
            40,
        ),
        (
            "async_memory_copy_p2p",
            offset_of!(C_DeviceInterface, async_memory_copy_p2p),
            41,
        ),
        (
            "reserved_mem_api",
            offset_of!(C_DeviceInterface, reserved_mem_api),
            42,
        ),
        (
            "get_device_count",
            offset_of!(C_DeviceInterface, get_device_count),
            50,
        ),
        (
            "get_device_list",
            offset_of!(C_DeviceInterface, get_device_list),
            51,
        ),
        (
            "device_memory_stats",
            offset_of!(C_DeviceInterface, device_memory_stats),
            52,
        ),
        (
            "device_min_chunk_size",
            offset_of!(C_DeviceInterface, device_min_chunk_size),
            53,
        ),
        (
            "device_max_chunk_size",
            offset_of!(C_DeviceInterface, device_max_chunk_size),
            54,
        ),
        (
            "device_max_alloc_size",
            offset_of!(C_DeviceInterface, device_max_alloc_size),
            55,
        ),
        (
            "device_extra_padding_size",
            offset_of!(C_DeviceInterface, device_extra_padding_size),
            56,
        ),
        (
            "device_init_alloc_size",
            offset_of!(C_DeviceInterface, device_init_alloc_size),
            57,
        ),
        (
            "device_realloc_size",
            offset_of!(C_DeviceInterface, device_realloc_size),
            58,
        ),
        (
            "get_compute_capability",
            offset_of!(C_DeviceInterface, get_compute_capability),
            59,
        ),
        (
            "get_device_properties",
            offset_of!(C_DeviceInterface, get_device_properties),
            60,
        ),
        (
            "get_runtime_version",
            offset_of!(C_DeviceInterface, get_runtime_version),
            61,
        ),
        (
            "get_driver_version",
            offset_of!(C_DeviceInterface, get_driver_version),
            62,
        ),
        (
            "get_multi_process",
            offset_of!(C_DeviceInterface, get_multi_process),
            63,
        ),
        (
            "get_max_threads_per_mp",
            offset_of!(C_DeviceInterface, get_max_threads_per_mp),
            64,
        ),
        (
            "get_max_threads_per_block",
            offset_of!(C_DeviceInterface, get_max_threads_per_block),
            65,
        ),
        (
            "get_max_grid_dim_size",
            offset_of!(C_DeviceInterface, get_max_grid_dim_size),
            66,
        ),
        (
            "is_float16_supported",
            offset_of!(C_DeviceInterface, is_float16_supported),
            67,
        ),
        (
            "is_bfloat16_supported",
            offset_of!(C_DeviceInterface, is_bfloat16_supported),
            68,
        ),
        (
            "is_dnn_supported",
            offset_of!(C_DeviceInterface, is_dnn_supported),
            69,
        ),
        (
            "init_eigen_device",
            offset_of!(C_DeviceInterface, init_eigen_device),
            70,
        ),
        (
            "destroy_eigen_device",
            offset_of!(C_DeviceInterface, destroy_eigen_device),
            71,
        ),
        (
            "reserved_info_api",
            offset_of!(C_DeviceInterface, reserved_info_api),
            72,
        ),
        (
            "xccl_get_comm_name",
            offset_of!(C_DeviceInterface, xccl_get_comm_name),
            80,
        ),
        (
            "xccl_get_unique_id_size",
            offset_of!(C_DeviceInterface, xccl_get_unique_id_size),
            81,
        ),
        (
            "xccl_get_unique_id",
            offset_of!(C_DeviceInterface, xccl_get_unique_id),
            82,
        ),
        (
            "xccl_comm_init_rank",
            offset_of!(C_DeviceInterface, xccl_comm_init_rank),
            83,
        ),
        (
            "xccl_destroy_comm",
            offset_of!(C_DeviceInterface, xccl_destroy_comm),
            84,
        ),
        (
            "xccl_all_reduce",
            offset_of!(C_DeviceInterface, xccl_all_reduce),
            85,
        ),
        (
            "xccl_broadcast",
            offset_of!(C_DeviceInterface, xccl_broadcast),
            86,
        ),
        (
            "xccl_reduce",
            offset_of!(C_DeviceInterface, xccl_reduce),
            87,
        ),
        (
            "xccl_all_gather",
            offset_of!(C_DeviceInterface, xccl_all_gather),
            88,
        ),
        (
            "xccl_reduce_scatter",
            offset_of!(C_DeviceInterface, xccl_reduce_scatter),
            89,
        ),
        (
            "xccl_group_start",
            offset_of!(C_DeviceInterface, xccl_group_start),
            90,
        ),
        (
            "xccl_group_end",
            offset_of!(C_DeviceInterface, xccl_group_end),
            91,
        ),
        ("xccl_send", offset_of!(C_DeviceInterface, xccl_send), 92),
        ("xccl_recv", offset_of!(C_DeviceInterface, xccl_recv), 93),
        (
            "xccl_all_to_all",
            offset_of!(C_DeviceInterface, xccl_all_to_all),
            94,
        ),
        (
            "reserved_ccl_api",
            offset_of!(C_DeviceInterface, reserved_ccl_api),
            95,
        ),
        (
            "profiler_initialize",
            offset_of!(C_DeviceInterface, profiler_initialize),
            103,
        ),
        (
            "profiler_finalize",
            offset_of!(C_DeviceInterface, profiler_finalize),
            104,
        ),
        (
            "profiler_prepare_tracing",
            offset_of!(C_DeviceInterface, profiler_prepare_tracing),
            105,
        ),
        (
            "profiler_start_tracing",
            offset_of!(C_DeviceInterface, profiler_start_tracing),
            106,
        ),
        (
            "profiler_stop_tracing",
            offset_of!(C_DeviceInterface, profiler_stop_tracing),
            107,
        ),
        (
            "profiler_collect_trace_data",
            offset_of!(C_DeviceInterface, profiler_collect_trace_data),
            108,
        ),
        (
            "reserved_profiler_api",
            offset_of!(C_DeviceInterface, reserved_profiler_api),
            109,
        ),
        (
            "init_blas_handle",
            offset_of!(C_DeviceInterface, init_blas_handle),
            117,
        ),
        (
            "blas_set_math_mode",
            offset_of!(C_DeviceInterface, blas_set_math_mode),
            118,
        ),
        (
            "init_blaslt_handle",
            offset_of!(C_DeviceInterface, init_blaslt_handle),
            119,
        ),
        (
            "destroy_blas_handle",
            offset_of!(C_DeviceInterface, destroy_blas_handle),
            120,
        ),
        (
            "destroy_blaslt_handle",
            offset_of!(C_DeviceInterface, destroy_blaslt_handle),
            121,
        ),
        (
            "cuda_stream_begin_capture",
            offset_of!(C_DeviceInterface, cuda_stream_begin_capture),
            122,
        ),
        (
            "cuda_stream_end_captrue",
            offset_of!(C_DeviceInterface, cuda_stream_end_captrue),
            123,
        ),
        (
            "cuda_graph_launch",
            offset_of!(C_DeviceInterface, cuda_graph_launch),
            124,
        ),
        (
            "cuda_graph_destroy",
            offset_of!(C_DeviceInterface, cuda_graph_destroy),
            125,
        ),
        (
            "cuda_graph_exec_destroy",
            offset_of!(C_DeviceInterface, cuda_graph_exec_destroy),
            126,
        ),
        (
            "cuda_graph_instantiate",
            offset_of!(C_DeviceInterface, cuda_graph_instantiate),
            127,
        ),
        (
            "cuda_graph_get_nodes",
            offset_of!(C_DeviceInterface, cuda_graph_get_nodes),
            128,
        ),
        (
            "cuda_stream_capture_info",
            offset_of!(C_DeviceInterface, cuda_stream_capture_info),
            129,
        ),
        (
            "get_parameter_setter_for_exec_graph",
            offset_of!(C_DeviceInterface, get_parameter_setter_for_exec_graph),
            130,
        ),
        (
            "cuda_graph_debug_dot_print",
            offset_of!(C_DeviceInterface, cuda_graph_debug_dot_print),
            131,
        ),
        (
            "cuda_thread_exchange_stream_capthure_mode",
            offset_of!(C_DeviceInterface, cuda_thread_exchange_stream_capthure_mode),
            132,
        ),
        ("blas_axpby", offset_of!(C_DeviceInterface, blas_axpby), 133),
        (
            "reserved_other_api",
            offset_of!(C_DeviceInterface, reserved_other_api),
            134,
        ),
    ];

    #[test]
    fn interface_layout_matches_the_paddle_3_3_header() {
        assert_eq!(size_of::<FnVoid>(), WORD, "Option<fn> is one pointer");
        for &(name, offset, word) in PADDLE_3_3_WORDS {
            assert_eq!(offset, word * WORD, "{name}");
        }
        // Consecutive in header order, each field a word or an array of words.
        for pair in PADDLE_3_3_WORDS.windows(2) {
            assert!(pair[0].1 < pair[1].1, "{} before {}", pair[0].0, pair[1].0);
        }
        assert_eq!(STABLE_PREFIX_SIZE, 59 * WORD);
        assert_eq!(size_of::<C_DeviceInterface>(), 141 * WORD);
        assert_eq!(size_of::<C_DeviceInterface>(), 1128);
        assert_eq!(LAYOUT_PADDLE_3_3.interface_size, 1128);
        assert_eq!(LAYOUT_PADDLE_3_3.params_size, 96);
        assert_eq!(MAX_KNOWN_INTERFACE_SIZE, 1128);
        assert_eq!(size_of::<C_GraphHookManager>(), 3 * WORD);
        assert_eq!(size_of::<C_GraphExecuterSetter>(), WORD);
    }

    const _: () = assert!(MAX_KNOWN_INTERFACE_SIZE * 4 <= INTERFACE_ALLOCATION);

    #[test]
    fn the_public_field_tables_list_every_field_in_order() {
        let names: Vec<&str> = C_DEVICE_INTERFACE_FIELDS.iter().map(|f| f.0).collect();
        let words: Vec<&str> = PADDLE_3_3_WORDS.iter().map(|f| f.0).collect();
        assert_eq!(names, words);
        assert_eq!(CUSTOM_RUNTIME_PARAMS_FIELDS.len(), 7);
        for fields in [
            C_DEVICE_INTERFACE_FIELDS,
            paddle_2_6::C_DEVICE_INTERFACE_FIELDS,
        ] {
            assert_eq!(fields[0], ("size", 0));
            assert!(fields.windows(2).all(|w| w[0].1 < w[1].1));
        }
    }

    #[test]
    fn paddle_2_6_layout_matches_the_header() {
        use paddle_2_6 as p;
        assert_eq!(size_of::<p::C_DeviceInterface>(), 912);
        assert_eq!(size_of::<p::CustomRuntimeParams>(), PARAMS_SIZE_2);
        assert_eq!(LAYOUT_PADDLE_2_6.interface_size, 912);
        // The stable prefix is the 3.3 table's.
        for (name, offset) in &p::C_DEVICE_INTERFACE_FIELDS[..45] {
            assert!(*offset < STABLE_PREFIX_SIZE, "{name}");
            let (_, ours) = C_DEVICE_INTERFACE_FIELDS
                .iter()
                .find(|(n, _)| n == name)
                .unwrap();
            assert_eq!(offset, ours, "{name}");
        }
        assert_eq!(
            offset_of!(p::C_DeviceInterface, get_compute_capability),
            59 * WORD
        );
        assert_eq!(
            offset_of!(p::C_DeviceInterface, reserved_info_api),
            62 * WORD
        );
        assert_eq!(offset_of!(p::C_DeviceInterface, blas_axpby), 106 * WORD);
    }

    #[test]
    fn the_allocation_has_slack_beyond_every_layout() {
        for pair in KNOWN_LAYOUTS.windows(2) {
            assert!(pair[0].interface_size < pair[1].interface_size, "{pair:?}");
        }
        for layout in KNOWN_LAYOUTS {
            assert!(
                layout.interface_size <= MAX_KNOWN_INTERFACE_SIZE,
                "{layout:?}"
            );
            assert!(layout.params_size * 4 <= PARAMS_ALLOCATION, "{layout:?}");
            assert!(layout.interface_size >= STABLE_PREFIX_SIZE);
            assert!(layout.readable <= layout.interface_size);
            assert!(layout.readable == STABLE_PREFIX_SIZE || layout == LAYOUT_PADDLE_3_3);
        }
    }

    #[test]
    fn zeroed_tables_are_all_null() {
        let table = C_DeviceInterface::zeroed();
        assert_eq!(table.size, 0);
        assert!(table.set_device.is_none() && table.cuda_graph_launch.is_none());
        let params = CustomRuntimeParams::zeroed();
        assert!(params.interface.is_null() && params.device_type.is_null());
        assert_eq!(C_Status(7).name(), "unknown status");
        assert_eq!(C_FAILED.name(), "C_FAILED");
    }
}
