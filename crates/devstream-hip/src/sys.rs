//! Our declarations of the HIP runtime API (`hip/hip_runtime_api.h`): the handle types, the
//! status codes, flags and enum values this backend passes, and the C signature of every
//! function it loads.
//!
//! Written by hand from the ROCm headers (no bindgen, no ROCm needed to build). They are
//! cross-checked two ways where ROCm is installed: the `header_check` tests below compare them
//! with the installed `hip_runtime_api.h` (through a C probe that `build.rs` compiles), and the
//! separate crate `hip-sys-check/` compares them with the `hip-sys` bindings.
//!
//! Names follow HIP's own spelling so each line can be matched against the header.
#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code
)]

use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ulonglong, c_void};

/// `hipError_t`: a C enum, 32 bits.
pub type hipError_t = c_int;
/// `hipDevice_t`: a device ordinal.
pub type hipDevice_t = c_int;
/// `hipStream_t` (`ihipStream_t*`).
pub type hipStream_t = *mut c_void;
/// `hipEvent_t` (`ihipEvent_t*`).
pub type hipEvent_t = *mut c_void;
/// `hipGraph_t` (`ihipGraph*`).
pub type hipGraph_t = *mut c_void;
/// `hipGraphExec_t` (`hipGraphExec*`).
pub type hipGraphExec_t = *mut c_void;
/// `hipGraphNode_t` (`hipGraphNode*`).
pub type hipGraphNode_t = *mut c_void;
/// `hipModule_t` (`ihipModule_t*`).
pub type hipModule_t = *mut c_void;
/// `hipFunction_t` (`ihipModuleSymbol_t*`).
pub type hipFunction_t = *mut c_void;
/// `hipDeviceptr_t` (`void*`).
pub type hipDeviceptr_t = *mut c_void;
/// `hipMemPool_t` (`ihipMemPoolHandle_t*`).
pub type hipMemPool_t = *mut c_void;
/// `hipMemPoolAttr`: a C enum (the same values as CUDA's `CUmemPool_attribute`).
pub type hipMemPoolAttr = c_int;
/// `hipStreamCaptureMode`: a C enum.
pub type hipStreamCaptureMode = c_int;
/// `hipStreamCaptureStatus`: a C enum.
pub type hipStreamCaptureStatus = c_int;
/// `hipDeviceAttribute_t`: a C enum.
pub type hipDeviceAttribute_t = c_int;
/// `hipHostFn_t`.
pub type hipHostFn_t = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
/// `hipStreamCallback_t`.
pub type hipStreamCallback_t =
    Option<unsafe extern "C" fn(stream: hipStream_t, status: hipError_t, user_data: *mut c_void)>;

// ---- hipError_t ---------------------------------------------------------------------------------

pub const hipSuccess: hipError_t = 0;
pub const hipErrorInvalidValue: hipError_t = 1;
pub const hipErrorOutOfMemory: hipError_t = 2;
pub const hipErrorNotInitialized: hipError_t = 3;
pub const hipErrorDeinitialized: hipError_t = 4;
pub const hipErrorInsufficientDriver: hipError_t = 35;
pub const hipErrorInvalidImage: hipError_t = 200;
pub const hipErrorInvalidContext: hipError_t = 201;
pub const hipErrorNoDevice: hipError_t = 100;
pub const hipErrorInvalidDevice: hipError_t = 101;
pub const hipErrorInvalidKernelFile: hipError_t = 218;
pub const hipErrorNotFound: hipError_t = 500;
pub const hipErrorInvalidHandle: hipError_t = 400;
pub const hipErrorIllegalAddress: hipError_t = 700;
pub const hipErrorLaunchFailure: hipError_t = 719;
pub const hipErrorNotReady: hipError_t = 600;
pub const hipErrorNotSupported: hipError_t = 801;
pub const hipErrorStreamCaptureUnsupported: hipError_t = 900;
pub const hipErrorStreamCaptureInvalidated: hipError_t = 901;
pub const hipErrorStreamCaptureMerge: hipError_t = 902;
pub const hipErrorStreamCaptureUnmatched: hipError_t = 903;
pub const hipErrorStreamCaptureUnjoined: hipError_t = 904;
pub const hipErrorStreamCaptureIsolation: hipError_t = 905;
pub const hipErrorStreamCaptureImplicit: hipError_t = 906;
pub const hipErrorCapturedEvent: hipError_t = 907;
pub const hipErrorStreamCaptureWrongThread: hipError_t = 908;
pub const hipErrorUnknown: hipError_t = 999;

// ---- flags ------------------------------------------------------------------------------------------

pub const hipStreamDefault: c_uint = 0x0;
pub const hipStreamNonBlocking: c_uint = 0x1;
pub const hipEventDefault: c_uint = 0x0;
pub const hipEventBlockingSync: c_uint = 0x1;
pub const hipEventDisableTiming: c_uint = 0x2;
pub const hipEventInterprocess: c_uint = 0x4;
pub const hipHostMallocDefault: c_uint = 0x0;
pub const hipHostMallocPortable: c_uint = 0x1;
pub const hipHostMallocMapped: c_uint = 0x2;
pub const hipMemAttachGlobal: c_uint = 0x1;

// ---- memory pools -------------------------------------------------------------------------------

pub const hipMemAllocationTypePinned: c_int = 1;
pub const hipMemHandleTypeNone: c_int = 0;
pub const hipMemLocationTypeDevice: c_int = 1;
pub const hipMemPoolAttrReleaseThreshold: hipMemPoolAttr = 4;
pub const hipMemPoolAttrReservedMemCurrent: hipMemPoolAttr = 5;
pub const hipMemPoolAttrReservedMemHigh: hipMemPoolAttr = 6;
pub const hipMemPoolAttrUsedMemCurrent: hipMemPoolAttr = 7;
pub const hipMemPoolAttrUsedMemHigh: hipMemPoolAttr = 8;

/// `hipMemLocation`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct hipMemLocation {
    /// `hipMemLocationType`.
    pub type_: c_int,
    /// The device ordinal.
    pub id: c_int,
}

/// `hipMemPoolProps`: 88 bytes in every ROCm release (ROCm 6 spends 8 of the 64 reserved bytes
/// of ROCm 5 on `maxSize`, where 0 means no limit), so the zeroed tail is valid for both.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct hipMemPoolProps {
    /// `hipMemAllocationType`.
    pub allocType: c_int,
    /// `hipMemAllocationHandleType`.
    pub handleTypes: c_int,
    /// Where the memory lives.
    pub location: hipMemLocation,
    /// Windows only; null.
    pub win32SecurityAttributes: *mut c_void,
    /// `maxSize` (ROCm 6) and the reserved bytes, zeroed.
    pub reserved: [c_uchar; 64],
}
pub const hipMemAttachHost: c_uint = 0x2;
pub const hipMemAttachSingle: c_uint = 0x4;
pub const hipStreamWaitValueGte: c_uint = 0x0;
pub const hipStreamWaitValueEq: c_uint = 0x1;
pub const hipStreamWaitValueAnd: c_uint = 0x2;
pub const hipStreamWaitValueNor: c_uint = 0x3;
/// `hipStreamUpdateCaptureDependenciesFlags`.
pub const hipStreamAddCaptureDependencies: c_uint = 0;
/// `hipStreamUpdateCaptureDependenciesFlags`.
pub const hipStreamSetCaptureDependencies: c_uint = 1;
/// `hipStreamPerThread` is `((hipStream_t)2)`.
pub const hipStreamPerThread: usize = 2;

// ---- enums --------------------------------------------------------------------------------------------

pub const hipStreamCaptureModeGlobal: hipStreamCaptureMode = 0;
pub const hipStreamCaptureModeThreadLocal: hipStreamCaptureMode = 1;
pub const hipStreamCaptureModeRelaxed: hipStreamCaptureMode = 2;
pub const hipStreamCaptureStatusNone: hipStreamCaptureStatus = 0;
pub const hipStreamCaptureStatusActive: hipStreamCaptureStatus = 1;
pub const hipStreamCaptureStatusInvalidated: hipStreamCaptureStatus = 2;

/// `hipDeviceAttribute_t` (the ROCm 5.0+ numbering: CUDA-compatible attributes from 0,
/// AMD-specific ones from 10000).
pub const hipDeviceAttributeCanMapHostMemory: hipDeviceAttribute_t = 3;
pub const hipDeviceAttributeConcurrentManagedAccess: hipDeviceAttribute_t = 9;
pub const hipDeviceAttributeComputeCapabilityMajor: hipDeviceAttribute_t = 23;
pub const hipDeviceAttributeManagedMemory: hipDeviceAttribute_t = 24;
pub const hipDeviceAttributeComputeCapabilityMinor: hipDeviceAttribute_t = 61;
pub const hipDeviceAttributeMemoryPoolsSupported: hipDeviceAttribute_t = 88;
pub const hipDeviceAttributeCanUseStreamWaitValue: hipDeviceAttribute_t = 10013;

// ---- function signatures ------------------------------------------------------------------------------

pub type hipInit = unsafe extern "C" fn(flags: c_uint) -> hipError_t;
pub type hipDriverGetVersion = unsafe extern "C" fn(version: *mut c_int) -> hipError_t;
pub type hipGetErrorName = unsafe extern "C" fn(error: hipError_t) -> *const c_char;
pub type hipGetErrorString = unsafe extern "C" fn(error: hipError_t) -> *const c_char;
pub type hipGetDeviceCount = unsafe extern "C" fn(count: *mut c_int) -> hipError_t;
pub type hipDeviceGetName =
    unsafe extern "C" fn(name: *mut c_char, len: c_int, device: hipDevice_t) -> hipError_t;
pub type hipDeviceGetAttribute = unsafe extern "C" fn(
    value: *mut c_int,
    attribute: hipDeviceAttribute_t,
    device: hipDevice_t,
) -> hipError_t;
pub type hipSetDevice = unsafe extern "C" fn(device: c_int) -> hipError_t;
pub type hipGetDevice = unsafe extern "C" fn(device: *mut c_int) -> hipError_t;
pub type hipDeviceGetStreamPriorityRange =
    unsafe extern "C" fn(least: *mut c_int, greatest: *mut c_int) -> hipError_t;

pub type hipStreamCreateWithPriority =
    unsafe extern "C" fn(stream: *mut hipStream_t, flags: c_uint, priority: c_int) -> hipError_t;
pub type hipStreamDestroy = unsafe extern "C" fn(stream: hipStream_t) -> hipError_t;
pub type hipStreamQuery = unsafe extern "C" fn(stream: hipStream_t) -> hipError_t;
pub type hipStreamSynchronize = unsafe extern "C" fn(stream: hipStream_t) -> hipError_t;
pub type hipStreamWaitEvent =
    unsafe extern "C" fn(stream: hipStream_t, event: hipEvent_t, flags: c_uint) -> hipError_t;
pub type hipStreamGetPriority =
    unsafe extern "C" fn(stream: hipStream_t, priority: *mut c_int) -> hipError_t;
pub type hipStreamGetFlags =
    unsafe extern "C" fn(stream: hipStream_t, flags: *mut c_uint) -> hipError_t;
pub type hipGetStreamDeviceId = unsafe extern "C" fn(stream: hipStream_t) -> c_int;
pub type hipLaunchHostFunc = unsafe extern "C" fn(
    stream: hipStream_t,
    function: hipHostFn_t,
    user_data: *mut c_void,
) -> hipError_t;
pub type hipStreamAddCallback = unsafe extern "C" fn(
    stream: hipStream_t,
    callback: hipStreamCallback_t,
    user_data: *mut c_void,
    flags: c_uint,
) -> hipError_t;
pub type hipStreamWaitValue64 = unsafe extern "C" fn(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
    mask: u64,
) -> hipError_t;
pub type hipStreamWriteValue64 = unsafe extern "C" fn(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
) -> hipError_t;
pub type hipStreamAttachMemAsync = unsafe extern "C" fn(
    stream: hipStream_t,
    dev_ptr: *mut c_void,
    length: usize,
    flags: c_uint,
) -> hipError_t;

pub type hipStreamBeginCapture =
    unsafe extern "C" fn(stream: hipStream_t, mode: hipStreamCaptureMode) -> hipError_t;
pub type hipStreamEndCapture =
    unsafe extern "C" fn(stream: hipStream_t, graph: *mut hipGraph_t) -> hipError_t;
pub type hipStreamIsCapturing =
    unsafe extern "C" fn(stream: hipStream_t, status: *mut hipStreamCaptureStatus) -> hipError_t;
pub type hipStreamGetCaptureInfo = unsafe extern "C" fn(
    stream: hipStream_t,
    status: *mut hipStreamCaptureStatus,
    id: *mut c_ulonglong,
) -> hipError_t;
pub type hipStreamGetCaptureInfo_v2 = unsafe extern "C" fn(
    stream: hipStream_t,
    status: *mut hipStreamCaptureStatus,
    id: *mut c_ulonglong,
    graph: *mut hipGraph_t,
    dependencies: *mut *const hipGraphNode_t,
    count: *mut usize,
) -> hipError_t;
pub type hipStreamUpdateCaptureDependencies = unsafe extern "C" fn(
    stream: hipStream_t,
    dependencies: *mut hipGraphNode_t,
    count: usize,
    flags: c_uint,
) -> hipError_t;
pub type hipThreadExchangeStreamCaptureMode =
    unsafe extern "C" fn(mode: *mut hipStreamCaptureMode) -> hipError_t;

pub type hipEventCreateWithFlags =
    unsafe extern "C" fn(event: *mut hipEvent_t, flags: c_uint) -> hipError_t;
pub type hipEventDestroy = unsafe extern "C" fn(event: hipEvent_t) -> hipError_t;
pub type hipEventRecord =
    unsafe extern "C" fn(event: hipEvent_t, stream: hipStream_t) -> hipError_t;
pub type hipEventQuery = unsafe extern "C" fn(event: hipEvent_t) -> hipError_t;
pub type hipEventSynchronize = unsafe extern "C" fn(event: hipEvent_t) -> hipError_t;
pub type hipEventElapsedTime =
    unsafe extern "C" fn(ms: *mut f32, start: hipEvent_t, stop: hipEvent_t) -> hipError_t;

pub type hipGraphCreate = unsafe extern "C" fn(graph: *mut hipGraph_t, flags: c_uint) -> hipError_t;
pub type hipGraphInstantiate = unsafe extern "C" fn(
    exec: *mut hipGraphExec_t,
    graph: hipGraph_t,
    error_node: *mut hipGraphNode_t,
    log: *mut c_char,
    log_size: usize,
) -> hipError_t;
pub type hipGraphLaunch =
    unsafe extern "C" fn(exec: hipGraphExec_t, stream: hipStream_t) -> hipError_t;
pub type hipGraphExecDestroy = unsafe extern "C" fn(exec: hipGraphExec_t) -> hipError_t;
pub type hipGraphDestroy = unsafe extern "C" fn(graph: hipGraph_t) -> hipError_t;
pub type hipGraphGetNodes = unsafe extern "C" fn(
    graph: hipGraph_t,
    nodes: *mut hipGraphNode_t,
    count: *mut usize,
) -> hipError_t;

pub type hipMalloc = unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize) -> hipError_t;
pub type hipDeviceGetDefaultMemPool =
    unsafe extern "C" fn(pool: *mut hipMemPool_t, device: c_int) -> hipError_t;
pub type hipMemPoolCreate =
    unsafe extern "C" fn(pool: *mut hipMemPool_t, props: *const hipMemPoolProps) -> hipError_t;
pub type hipMemPoolDestroy = unsafe extern "C" fn(pool: hipMemPool_t) -> hipError_t;
pub type hipMemPoolGetAttribute = unsafe extern "C" fn(
    pool: hipMemPool_t,
    attr: hipMemPoolAttr,
    value: *mut c_void,
) -> hipError_t;
pub type hipMemPoolSetAttribute = unsafe extern "C" fn(
    pool: hipMemPool_t,
    attr: hipMemPoolAttr,
    value: *mut c_void,
) -> hipError_t;
pub type hipMemPoolTrimTo =
    unsafe extern "C" fn(pool: hipMemPool_t, min_bytes_to_hold: usize) -> hipError_t;
pub type hipMallocFromPoolAsync = unsafe extern "C" fn(
    ptr: *mut *mut c_void,
    size: usize,
    pool: hipMemPool_t,
    stream: hipStream_t,
) -> hipError_t;
pub type hipFree = unsafe extern "C" fn(ptr: *mut c_void) -> hipError_t;
pub type hipMallocAsync =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, stream: hipStream_t) -> hipError_t;
pub type hipFreeAsync = unsafe extern "C" fn(ptr: *mut c_void, stream: hipStream_t) -> hipError_t;
pub type hipMallocManaged =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> hipError_t;
pub type hipHostMalloc =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> hipError_t;
pub type hipHostFree = unsafe extern "C" fn(ptr: *mut c_void) -> hipError_t;
pub type hipHostGetDevicePointer = unsafe extern "C" fn(
    device_ptr: *mut *mut c_void,
    host_ptr: *mut c_void,
    flags: c_uint,
) -> hipError_t;
pub type hipMemcpyHtoDAsync = unsafe extern "C" fn(
    dst: hipDeviceptr_t,
    src: *mut c_void,
    size: usize,
    stream: hipStream_t,
) -> hipError_t;
pub type hipMemcpyDtoHAsync = unsafe extern "C" fn(
    dst: *mut c_void,
    src: hipDeviceptr_t,
    size: usize,
    stream: hipStream_t,
) -> hipError_t;
pub type hipMemcpyDtoDAsync = unsafe extern "C" fn(
    dst: hipDeviceptr_t,
    src: hipDeviceptr_t,
    size: usize,
    stream: hipStream_t,
) -> hipError_t;
pub type hipMemsetD8Async = unsafe extern "C" fn(
    dst: hipDeviceptr_t,
    value: c_uchar,
    count: usize,
    stream: hipStream_t,
) -> hipError_t;

pub type hipModuleLoadData =
    unsafe extern "C" fn(module: *mut hipModule_t, image: *const c_void) -> hipError_t;
pub type hipModuleUnload = unsafe extern "C" fn(module: hipModule_t) -> hipError_t;
pub type hipModuleGetFunction = unsafe extern "C" fn(
    function: *mut hipFunction_t,
    module: hipModule_t,
    name: *const c_char,
) -> hipError_t;
#[allow(clippy::too_many_arguments)]
pub type hipModuleLaunchKernel = unsafe extern "C" fn(
    function: hipFunction_t,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem_bytes: c_uint,
    stream: hipStream_t,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> hipError_t;

/// Our declarations against the installed `hip_runtime_api.h`: `build.rs` compiled a C program
/// against it that printed each value and size (only where the headers are installed).
#[cfg(all(test, hip_headers))]
mod header_check {
    use super::*;
    use std::mem::size_of;

    include!(concat!(env!("OUT_DIR"), "/hip_header_values.rs"));

    fn header(name: &str) -> i64 {
        HEADER_VALUES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("{name} was not probed in {HEADER_PATH}"))
    }

    macro_rules! ours {
        ($($name:ident),* $(,)?) => {
            &[$((stringify!($name), $name as i64)),*]
        };
    }

    #[test]
    fn constants_and_enum_values_match_the_installed_header() {
        let ours: &[(&str, i64)] = ours![
            hipSuccess,
            hipErrorInvalidValue,
            hipErrorOutOfMemory,
            hipErrorNotInitialized,
            hipErrorDeinitialized,
            hipErrorInsufficientDriver,
            hipErrorInvalidImage,
            hipErrorInvalidContext,
            hipErrorNoDevice,
            hipErrorInvalidDevice,
            hipErrorInvalidKernelFile,
            hipErrorNotFound,
            hipErrorInvalidHandle,
            hipErrorIllegalAddress,
            hipErrorLaunchFailure,
            hipErrorNotReady,
            hipErrorNotSupported,
            hipErrorStreamCaptureUnsupported,
            hipErrorStreamCaptureInvalidated,
            hipErrorStreamCaptureMerge,
            hipErrorStreamCaptureUnmatched,
            hipErrorStreamCaptureUnjoined,
            hipErrorStreamCaptureIsolation,
            hipErrorStreamCaptureImplicit,
            hipErrorCapturedEvent,
            hipErrorStreamCaptureWrongThread,
            hipErrorUnknown,
            hipStreamDefault,
            hipStreamNonBlocking,
            hipEventDefault,
            hipEventBlockingSync,
            hipEventDisableTiming,
            hipEventInterprocess,
            hipHostMallocDefault,
            hipHostMallocPortable,
            hipHostMallocMapped,
            hipMemAttachGlobal,
            hipMemAttachHost,
            hipMemAttachSingle,
            hipStreamWaitValueGte,
            hipStreamWaitValueEq,
            hipStreamWaitValueAnd,
            hipStreamWaitValueNor,
            hipStreamAddCaptureDependencies,
            hipStreamSetCaptureDependencies,
            hipStreamCaptureModeGlobal,
            hipStreamCaptureModeThreadLocal,
            hipStreamCaptureModeRelaxed,
            hipStreamCaptureStatusNone,
            hipStreamCaptureStatusActive,
            hipStreamCaptureStatusInvalidated,
            hipDeviceAttributeCanMapHostMemory,
            hipDeviceAttributeConcurrentManagedAccess,
            hipDeviceAttributeComputeCapabilityMajor,
            hipDeviceAttributeManagedMemory,
            hipDeviceAttributeComputeCapabilityMinor,
            hipDeviceAttributeMemoryPoolsSupported,
            hipDeviceAttributeCanUseStreamWaitValue,
        ];
        let mismatches: Vec<String> = ours
            .iter()
            .filter(|(name, value)| header(name) != *value)
            .map(|(name, value)| format!("{name}: ours {value}, header {}", header(name)))
            .collect();
        assert!(
            mismatches.is_empty(),
            "declarations differ from {HEADER_PATH}:\n{}",
            mismatches.join("\n")
        );
        assert_eq!(
            header("(unsigned long)hipStreamPerThread"),
            hipStreamPerThread as i64
        );
    }

    #[test]
    fn type_sizes_match_the_installed_header() {
        let ours: &[(&str, usize)] = &[
            ("sizeof(hipError_t)", size_of::<hipError_t>()),
            ("sizeof(hipDevice_t)", size_of::<hipDevice_t>()),
            ("sizeof(hipStream_t)", size_of::<hipStream_t>()),
            ("sizeof(hipEvent_t)", size_of::<hipEvent_t>()),
            ("sizeof(hipGraph_t)", size_of::<hipGraph_t>()),
            ("sizeof(hipGraphExec_t)", size_of::<hipGraphExec_t>()),
            ("sizeof(hipGraphNode_t)", size_of::<hipGraphNode_t>()),
            ("sizeof(hipModule_t)", size_of::<hipModule_t>()),
            ("sizeof(hipFunction_t)", size_of::<hipFunction_t>()),
            ("sizeof(hipDeviceptr_t)", size_of::<hipDeviceptr_t>()),
            (
                "sizeof(hipStreamCaptureMode)",
                size_of::<hipStreamCaptureMode>(),
            ),
            (
                "sizeof(hipStreamCaptureStatus)",
                size_of::<hipStreamCaptureStatus>(),
            ),
            (
                "sizeof(hipDeviceAttribute_t)",
                size_of::<hipDeviceAttribute_t>(),
            ),
            ("sizeof(hipHostFn_t)", size_of::<hipHostFn_t>()),
            (
                "sizeof(hipStreamCallback_t)",
                size_of::<hipStreamCallback_t>(),
            ),
            ("sizeof(hipMemPool_t)", size_of::<hipMemPool_t>()),
            ("sizeof(hipMemPoolAttr)", size_of::<hipMemPoolAttr>()),
            ("sizeof(hipMemLocation)", size_of::<hipMemLocation>()),
            ("sizeof(hipMemPoolProps)", size_of::<hipMemPoolProps>()),
        ];
        for (name, size) in ours {
            assert_eq!(header(name), *size as i64, "{name} in {HEADER_PATH}");
        }
    }
}
