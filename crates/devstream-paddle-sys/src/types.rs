//! The types the table mentions: statuses, handles, the C enums passed as `int`, the small
//! structs and the function-pointer types of every table field.
//!
//! `C_Status` is declared as a transparent integer, not a Rust enum: a plug-in may return any
//! `int`, and a Rust enum holding an undeclared value would be undefined behaviour. The C
//! enums are `int` aliases with constants, for the same reason.

use core::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

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

/// Declares a C `enum` of the header as an `int` alias and one constant per enumerator, each
/// documented with the header's name of it.
macro_rules! c_enum {
    ($(#[$doc:meta])* $alias:ident { $($header:ident => $name:ident = $value:literal,)* }) => {
        $(#[$doc])*
        pub type $alias = c_int;
        $(
            #[doc = concat!("`", stringify!($header), "`.")]
            pub const $name: $alias = $value;
        )*
    };
}

c_enum! {
    /// `C_DataType` (a C `enum`, passed as `int`): one of the constants below (header order).
    C_DataType {
        UNDEFINED => C_DATA_TYPE_UNDEFINED = 0, BOOL => C_DATA_TYPE_BOOL = 1,
        UINT8 => C_DATA_TYPE_UINT8 = 2, UINT16 => C_DATA_TYPE_UINT16 = 3,
        UINT32 => C_DATA_TYPE_UINT32 = 4, UINT64 => C_DATA_TYPE_UINT64 = 5,
        INT8 => C_DATA_TYPE_INT8 = 6, INT16 => C_DATA_TYPE_INT16 = 7,
        INT32 => C_DATA_TYPE_INT32 = 8, INT64 => C_DATA_TYPE_INT64 = 9,
        FLOAT16 => C_DATA_TYPE_FLOAT16 = 10, FLOAT32 => C_DATA_TYPE_FLOAT32 = 11,
        FLOAT64 => C_DATA_TYPE_FLOAT64 = 12, BFLOAT16 => C_DATA_TYPE_BFLOAT16 = 13,
        COMPLEX64 => C_DATA_TYPE_COMPLEX64 = 14, COMPLEX128 => C_DATA_TYPE_COMPLEX128 = 15,
    }
}

c_enum! {
    /// `C_CCLReduceOp` (a C `enum`, passed as `int`): one of the constants below (header
    /// order: `SUM = 0, AVG, MAX, MIN, PRODUCT`).
    C_CCLReduceOp {
        SUM => C_CCL_SUM = 0, AVG => C_CCL_AVG = 1, MAX => C_CCL_MAX = 2,
        MIN => C_CCL_MIN = 3, PRODUCT => C_CCL_PRODUCT = 4,
    }
}

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
