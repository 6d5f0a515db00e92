//! A test-only `libamdhip64` stand-in: exports the `hip*` functions `devstream-hip` uses, each
//! forwarded to the CUDA driver, so the HIP backend can run its whole conformance suite on an
//! NVIDIA GPU.
//!
//! Load it with `DEVSTREAM_HIP_LIBRARY=/path/to/libdevstream_hip_shim.so`. The mapping follows
//! HIP's own NVIDIA platform (`hip/nvidia_detail/nvidia_hip_runtime_api.h`), which maps each
//! `hip*` call onto the CUDA call of the same meaning; like the CUDA runtime under it, a call on
//! a thread with no current context first makes device 0's primary context current, and
//! `hipSetDevice`/`hipGetDevice` select a device's primary context. Differences from that header,
//! each deliberate:
//!
//! * it forwards to the driver API (`libcuda`, loaded at run time through cudarc) instead of the
//!   CUDA runtime, so it needs no CUDA toolkit;
//! * `hipStreamAddCallback` wraps the callback so it receives a `hipError_t` status, where the
//!   header casts the function pointer and passes the CUDA status through unconverted;
//! * `hipDeviceAttributeCanUseStreamWaitValue` is answered (CUDA 12 always has the stream
//!   memory operations; older drivers report `CAN_USE_STREAM_MEM_OPS_V1`);
//! * the kernel path takes PTX or cubin where AMD takes a code object (`hipModuleLoadData`),
//!   as HIP on NVIDIA does.
//!
//! Nothing panics: without `libcuda` every call answers `hipErrorInsufficientDriver` (cudarc
//! would panic on a missing library; the shim checks first).
//!
//! This library is not HIP and says nothing about AMD hardware: it tests that `devstream-hip`'s
//! loader, raw-call table and error mapping drive the shared CUDA/HIP layer correctly.
// The exports keep HIP's C names.
#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]
// Every export's safety contract is the HIP function's of the same name (its header documents
// it); the shim forwards under that contract.
#![allow(clippy::missing_safety_doc)]

use cudarc::driver::sys;
use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ulonglong, c_void};
use std::sync::{Mutex, OnceLock};

type hipError_t = c_int;
type hipStream_t = *mut c_void;
type hipEvent_t = *mut c_void;
type hipGraph_t = *mut c_void;
type hipGraphExec_t = *mut c_void;
type hipGraphNode_t = *mut c_void;
type hipModule_t = *mut c_void;
type hipFunction_t = *mut c_void;
type hipDeviceptr_t = *mut c_void;
type hipHostFn_t = Option<unsafe extern "C" fn(*mut c_void)>;
type hipStreamCallback_t = Option<unsafe extern "C" fn(hipStream_t, hipError_t, *mut c_void)>;

const hipSuccess: hipError_t = 0;
const hipErrorInvalidValue: hipError_t = 1;
const hipErrorInsufficientDriver: hipError_t = 35;
const hipErrorInvalidDevice: hipError_t = 101;
const hipErrorNotSupported: hipError_t = 801;
const hipErrorUnknown: hipError_t = 999;

/// HIP status codes with their names and descriptions (`hipGetErrorName`/`hipGetErrorString`).
/// HIP numbers these like the CUDA codes they correspond to.
const ERRORS: &[(hipError_t, &str, &str)] = &[
    (0, "hipSuccess", "no error"),
    (1, "hipErrorInvalidValue", "invalid argument"),
    (2, "hipErrorOutOfMemory", "out of memory"),
    (3, "hipErrorNotInitialized", "initialization error"),
    (4, "hipErrorDeinitialized", "driver shutting down"),
    (
        35,
        "hipErrorInsufficientDriver",
        "driver version is insufficient for runtime version",
    ),
    (
        100,
        "hipErrorNoDevice",
        "no ROCm-capable device is detected",
    ),
    (101, "hipErrorInvalidDevice", "invalid device ordinal"),
    (
        200,
        "hipErrorInvalidImage",
        "device kernel image is invalid",
    ),
    (201, "hipErrorInvalidContext", "invalid device context"),
    (
        209,
        "hipErrorNoBinaryForGpu",
        "no kernel image is available for execution on the device",
    ),
    (218, "hipErrorInvalidKernelFile", "invalid kernel file"),
    (400, "hipErrorInvalidHandle", "invalid resource handle"),
    (
        401,
        "hipErrorIllegalState",
        "the operation cannot be performed in the present state",
    ),
    (500, "hipErrorNotFound", "named symbol not found"),
    (600, "hipErrorNotReady", "device not ready"),
    (
        700,
        "hipErrorIllegalAddress",
        "an illegal memory access was encountered",
    ),
    (
        701,
        "hipErrorLaunchOutOfResources",
        "too many resources requested for launch",
    ),
    (
        702,
        "hipErrorLaunchTimeOut",
        "the launch timed out and was terminated",
    ),
    (
        708,
        "hipErrorSetOnActiveProcess",
        "cannot set while device is active in this process",
    ),
    (709, "hipErrorContextIsDestroyed", "context is destroyed"),
    (
        712,
        "hipErrorHostMemoryAlreadyRegistered",
        "the memory range is already registered",
    ),
    (
        713,
        "hipErrorHostMemoryNotRegistered",
        "the pointer is not a registered memory region",
    ),
    (719, "hipErrorLaunchFailure", "unspecified launch failure"),
    (801, "hipErrorNotSupported", "operation not supported"),
    (
        900,
        "hipErrorStreamCaptureUnsupported",
        "operation not permitted when stream is capturing",
    ),
    (
        901,
        "hipErrorStreamCaptureInvalidated",
        "operation failed due to a previous error during capture",
    ),
    (
        902,
        "hipErrorStreamCaptureMerge",
        "operation would result in a merge of separate capture sequences",
    ),
    (
        903,
        "hipErrorStreamCaptureUnmatched",
        "capture was not ended in the same stream as it began",
    ),
    (
        904,
        "hipErrorStreamCaptureUnjoined",
        "capturing stream has unjoined work",
    ),
    (
        905,
        "hipErrorStreamCaptureIsolation",
        "dependency created on uncaptured work in another stream",
    ),
    (
        906,
        "hipErrorStreamCaptureImplicit",
        "operation would make the legacy stream depend on a capturing blocking stream",
    ),
    (
        907,
        "hipErrorCapturedEvent",
        "operation not permitted on an event last recorded in a capturing stream",
    ),
    (
        908,
        "hipErrorStreamCaptureWrongThread",
        "attempt to terminate a thread-local capture sequence from another thread",
    ),
    (999, "hipErrorUnknown", "unknown error"),
];

/// Maps a CUDA driver status to the HIP code of the same meaning (HIP's NVIDIA platform does
/// this in `hipCUResultTohipError`). HIP numbers each code in `ERRORS` like the CUDA code it
/// corresponds to (`CUDA_ERROR_INVALID_PTX` 218 is `hipErrorInvalidKernelFile` 218), so the
/// mapping keeps those codes; codes without a HIP counterpart become `hipErrorUnknown`.
fn hip_status(status: sys::CUresult) -> hipError_t {
    let code = status as c_int;
    if ERRORS.iter().any(|(hip, _, _)| *hip == code) {
        code
    } else {
        hipErrorUnknown
    }
}

/// Calls a CUDA driver function and answers its status as a `hipError_t`.
macro_rules! cu {
    ($call:expr) => {{
        // SAFETY: each export forwards its arguments under the contract of the HIP function it
        // implements, which is the contract of the CUDA driver call it maps to; the driver was
        // found before any call (`enter`).
        let status = unsafe { $call };
        hip_status(status)
    }};
}

/// Returns early with the HIP code unless the CUDA call succeeded.
macro_rules! try_cu {
    ($call:expr) => {{
        let status = cu!($call);
        if status != hipSuccess {
            return status;
        }
    }};
}

/// Returns early unless the driver is loaded and a context is current.
macro_rules! enter {
    () => {
        if let Err(status) = enter() {
            return status;
        }
    };
}

/// Returns early unless the driver is loaded, for calls whose handle names its own context
/// (an event, a stream other than the null stream). Real HIP needs no current device for
/// these, and a CUDA host function's thread has no current context and may not make one
/// current (`cuCtxSetCurrent` there answers `CUDA_ERROR_NOT_PERMITTED`, which read as
/// `hipErrorUnknown`): so devstream's host-buffer bookkeeping inside a host function, an event
/// query, failed under the shim alone. A null stream still goes through [`enter`].
fn enter_with_handle(stream: Option<hipStream_t>) -> Result<(), hipError_t> {
    if matches!(stream, Some(s) if s.is_null()) {
        return enter();
    }
    loaded()
}

/// The driver is found and `cuInit` succeeded (once per process).
fn loaded() -> Result<(), hipError_t> {
    if driver().is_none() {
        return Err(hipErrorInsufficientDriver);
    }
    static INIT: OnceLock<hipError_t> = OnceLock::new();
    match *INIT.get_or_init(|| cu!(sys::cuInit(0))) {
        status if status == hipSuccess => Ok(()),
        status => Err(status),
    }
}

/// [`enter_with_handle`] as an early return: `enter_handle!()` for an event call,
/// `enter_handle!(stream)` for a stream call.
macro_rules! enter_handle {
    () => {
        if let Err(status) = enter_with_handle(None) {
            return status;
        }
    };
    ($stream:expr) => {
        if let Err(status) = enter_with_handle(Some($stream)) {
            return status;
        }
    };
}

/// Writes `value` through an out-pointer supplied by the caller.
fn put<T>(ptr: *mut T, value: T) -> hipError_t {
    if ptr.is_null() {
        return hipErrorInvalidValue;
    }
    // SAFETY: non-null, and the HIP contract makes out-pointers valid for a write.
    unsafe { ptr.write(value) };
    hipSuccess
}

/// Which versioned driver symbols exist.
struct Driver {
    capture_info_v2: bool,
    elapsed_v1: bool,
}

static DRIVER: OnceLock<Option<Driver>> = OnceLock::new();

fn has_symbol(name: &str) -> bool {
    // SAFETY: only called once `is_culib_present` found the library, so `culib` does not panic;
    // looking a symbol up calls nothing.
    unsafe {
        sys::culib()
            .get::<unsafe extern "C" fn()>(name.as_bytes())
            .is_ok()
    }
}

fn driver() -> Option<&'static Driver> {
    DRIVER
        .get_or_init(|| {
            // SAFETY: only tries to open the driver library by its usual names.
            if !unsafe { sys::is_culib_present() } {
                return None;
            }
            let required = [
                "cuInit",
                "cuDriverGetVersion",
                "cuCtxGetCurrent",
                "cuCtxSetCurrent",
                "cuDevicePrimaryCtxRetain",
            ];
            if !required.iter().all(|name| has_symbol(name)) {
                return None;
            }
            Some(Driver {
                capture_info_v2: has_symbol("cuStreamGetCaptureInfo_v2"),
                elapsed_v1: has_symbol("cuEventElapsedTime"),
            })
        })
        .as_ref()
}

/// Primary contexts retained so far, by device ordinal.
static PRIMARY: Mutex<Vec<Option<usize>>> = Mutex::new(Vec::new());

fn primary_context(ordinal: c_int) -> Result<sys::CUcontext, hipError_t> {
    let index = usize::try_from(ordinal).map_err(|_| hipErrorInvalidDevice)?;
    let mut cache = PRIMARY.lock().map_err(|_| hipErrorUnknown)?;
    if let Some(Some(ctx)) = cache.get(index) {
        return Ok(std::ptr::with_exposed_provenance_mut(*ctx));
    }
    let mut device = 0;
    let status = cu!(sys::cuDeviceGet(&mut device, ordinal));
    if status != hipSuccess {
        return Err(if status == hipErrorInvalidValue {
            hipErrorInvalidDevice
        } else {
            status
        });
    }
    let mut ctx = std::ptr::null_mut();
    let status = cu!(sys::cuDevicePrimaryCtxRetain(&mut ctx, device));
    if status != hipSuccess {
        return Err(status);
    }
    if cache.len() <= index {
        cache.resize(index + 1, None);
    }
    cache[index] = Some(ctx.expose_provenance());
    Ok(ctx)
}

fn set_device(ordinal: c_int) -> hipError_t {
    match primary_context(ordinal) {
        Ok(ctx) => cu!(sys::cuCtxSetCurrent(ctx)),
        Err(status) => status,
    }
}

/// The driver is loaded and initialised, and a context is current (device 0's primary context
/// if the thread had none, as the CUDA runtime does).
fn enter() -> Result<(), hipError_t> {
    loaded()?;
    let mut ctx = std::ptr::null_mut();
    let status = cu!(sys::cuCtxGetCurrent(&mut ctx));
    if status != hipSuccess {
        return Err(status);
    }
    if ctx.is_null() {
        let status = set_device(0);
        if status != hipSuccess {
            return Err(status);
        }
    }
    Ok(())
}

#[inline]
fn cu_stream(stream: hipStream_t) -> sys::CUstream {
    stream.cast()
}

#[inline]
fn cu_event(event: hipEvent_t) -> sys::CUevent {
    event.cast()
}

#[inline]
fn cu_ptr(ptr: *mut c_void) -> sys::CUdeviceptr {
    ptr.expose_provenance() as sys::CUdeviceptr
}

#[inline]
fn hip_ptr(ptr: sys::CUdeviceptr) -> *mut c_void {
    std::ptr::with_exposed_provenance_mut(ptr as usize)
}

fn capture_mode(mode: c_int) -> Option<sys::CUstreamCaptureMode> {
    match mode {
        0 => Some(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL),
        1 => Some(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        2 => Some(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED),
        _ => None,
    }
}

// ---- initialisation, errors, devices ---------------------------------------------------------

/// `hipInit` → `cuInit`.
#[no_mangle]
pub unsafe extern "C" fn hipInit(flags: c_uint) -> hipError_t {
    if driver().is_none() {
        return hipErrorInsufficientDriver;
    }
    cu!(sys::cuInit(flags))
}

/// `hipDriverGetVersion` → `cuDriverGetVersion`.
#[no_mangle]
pub unsafe extern "C" fn hipDriverGetVersion(version: *mut c_int) -> hipError_t {
    if driver().is_none() {
        return hipErrorInsufficientDriver;
    }
    cu!(sys::cuDriverGetVersion(version))
}

/// `hipGetErrorName`: HIP's name of a status code (a static string).
#[no_mangle]
pub unsafe extern "C" fn hipGetErrorName(error: hipError_t) -> *const c_char {
    static NAMES: OnceLock<Vec<(hipError_t, std::ffi::CString)>> = OnceLock::new();
    c_text(&NAMES, error, |(_, name, _)| name)
}

/// `hipGetErrorString`: a description of a status code (a static string).
#[no_mangle]
pub unsafe extern "C" fn hipGetErrorString(error: hipError_t) -> *const c_char {
    static TEXTS: OnceLock<Vec<(hipError_t, std::ffi::CString)>> = OnceLock::new();
    c_text(&TEXTS, error, |(_, _, text)| text)
}

fn c_text(
    cell: &'static OnceLock<Vec<(hipError_t, std::ffi::CString)>>,
    error: hipError_t,
    pick: fn(&(hipError_t, &'static str, &'static str)) -> &'static str,
) -> *const c_char {
    let table = cell.get_or_init(|| {
        ERRORS
            .iter()
            .map(|entry| {
                (
                    entry.0,
                    std::ffi::CString::new(pick(entry)).unwrap_or_default(),
                )
            })
            .collect()
    });
    let wanted = if ERRORS.iter().any(|(code, _, _)| *code == error) {
        error
    } else {
        hipErrorUnknown
    };
    table
        .iter()
        .find(|(code, _)| *code == wanted)
        .map(|(_, text)| text.as_ptr())
        .unwrap_or(std::ptr::null())
}

/// `hipGetDeviceCount` → `cuDeviceGetCount` (no device: `hipErrorNoDevice`).
#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> hipError_t {
    if driver().is_none() {
        return hipErrorInsufficientDriver;
    }
    let init = cu!(sys::cuInit(0));
    if init != hipSuccess {
        put(count, 0);
        return init;
    }
    let mut devices = 0;
    try_cu!(sys::cuDeviceGetCount(&mut devices));
    put(count, devices);
    if devices == 0 {
        100 // hipErrorNoDevice, as HIP answers
    } else {
        hipSuccess
    }
}

/// `hipDeviceGetName` → `cuDeviceGetName`.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetName(
    name: *mut c_char,
    len: c_int,
    device: c_int,
) -> hipError_t {
    enter!();
    let mut cu_device = 0;
    try_cu!(sys::cuDeviceGet(&mut cu_device, device));
    cu!(sys::cuDeviceGetName(name, len, cu_device))
}

/// `hipDeviceGetAttribute` → `cuDeviceGetAttribute` for the attributes devstream-hip reads
/// (HIP's NVIDIA platform maps the same ones; others answer `hipErrorInvalidValue` as there).
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetAttribute(
    value: *mut c_int,
    attribute: c_int,
    device: c_int,
) -> hipError_t {
    use sys::CUdevice_attribute as At;
    enter!();
    let mut cu_device = 0;
    try_cu!(sys::cuDeviceGet(&mut cu_device, device));
    let cu_attribute = match attribute {
        3 => At::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
        9 => At::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
        23 => At::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        24 => At::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
        61 => At::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        88 => At::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
        // hipDeviceAttributeCanUseStreamWaitValue: CUDA 12 always has the stream memory
        // operations; 11.x reports them per device.
        10013 => {
            let mut version = 0;
            try_cu!(sys::cuDriverGetVersion(&mut version));
            if version >= 12000 {
                return put(value, 1);
            }
            At::CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1
        }
        _ => return hipErrorInvalidValue,
    };
    cu!(sys::cuDeviceGetAttribute(value, cu_attribute, cu_device))
}

/// `hipSetDevice`: makes the device's primary context current (as `cudaSetDevice` does).
#[no_mangle]
pub unsafe extern "C" fn hipSetDevice(device: c_int) -> hipError_t {
    enter!();
    set_device(device)
}

/// `hipGetDevice` → `cuCtxGetDevice` of the current context.
#[no_mangle]
pub unsafe extern "C" fn hipGetDevice(device: *mut c_int) -> hipError_t {
    enter!();
    let mut cu_device = 0;
    try_cu!(sys::cuCtxGetDevice(&mut cu_device));
    put(device, cu_device)
}

/// `hipDeviceGetStreamPriorityRange` → `cuCtxGetStreamPriorityRange`.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> hipError_t {
    enter!();
    cu!(sys::cuCtxGetStreamPriorityRange(least, greatest))
}

// ---- streams ---------------------------------------------------------------------------------

/// `hipStreamCreateWithPriority` → `cuStreamCreateWithPriority` (`hipStreamNonBlocking` is
/// `CU_STREAM_NON_BLOCKING`).
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreateWithPriority(
    stream: *mut hipStream_t,
    flags: c_uint,
    priority: c_int,
) -> hipError_t {
    enter!();
    if flags & !1 != 0 {
        return hipErrorInvalidValue;
    }
    let cu_flags = if flags & 1 != 0 {
        sys::CUstream_flags::CU_STREAM_NON_BLOCKING as c_uint
    } else {
        sys::CUstream_flags::CU_STREAM_DEFAULT as c_uint
    };
    let mut raw = std::ptr::null_mut();
    try_cu!(sys::cuStreamCreateWithPriority(
        &mut raw, cu_flags, priority
    ));
    put(stream, raw.cast())
}

/// `hipStreamDestroy` → `cuStreamDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamDestroy(stream: hipStream_t) -> hipError_t {
    enter!();
    cu!(sys::cuStreamDestroy_v2(cu_stream(stream)))
}

/// `hipStreamQuery` → `cuStreamQuery`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamQuery(stream: hipStream_t) -> hipError_t {
    enter_handle!(stream);
    cu!(sys::cuStreamQuery(cu_stream(stream)))
}

/// `hipStreamSynchronize` → `cuStreamSynchronize`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamSynchronize(stream: hipStream_t) -> hipError_t {
    enter_handle!(stream);
    cu!(sys::cuStreamSynchronize(cu_stream(stream)))
}

/// `hipStreamWaitEvent` → `cuStreamWaitEvent`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWaitEvent(
    stream: hipStream_t,
    event: hipEvent_t,
    flags: c_uint,
) -> hipError_t {
    enter!();
    cu!(sys::cuStreamWaitEvent(
        cu_stream(stream),
        cu_event(event),
        flags
    ))
}

/// `hipStreamGetPriority` → `cuStreamGetPriority`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetPriority(
    stream: hipStream_t,
    priority: *mut c_int,
) -> hipError_t {
    enter!();
    cu!(sys::cuStreamGetPriority(cu_stream(stream), priority))
}

/// `hipStreamGetFlags` → `cuStreamGetFlags`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetFlags(stream: hipStream_t, flags: *mut c_uint) -> hipError_t {
    enter!();
    cu!(sys::cuStreamGetFlags(cu_stream(stream), flags))
}

/// `hipGetStreamDeviceId`: the device of the stream's context (the current device for the
/// null and per-thread streams); -1 on error.
#[no_mangle]
pub unsafe extern "C" fn hipGetStreamDeviceId(stream: hipStream_t) -> c_int {
    if enter().is_err() {
        return -1;
    }
    let mut ctx = std::ptr::null_mut();
    if cu!(sys::cuStreamGetCtx(cu_stream(stream), &mut ctx)) != hipSuccess {
        return -1;
    }
    if let Ok(cache) = PRIMARY.lock() {
        if let Some(index) = cache
            .iter()
            .position(|c| *c == Some(ctx.expose_provenance()))
        {
            return index as c_int;
        }
    }
    // Not a primary context we retained: ask the driver with that context current.
    let mut previous = std::ptr::null_mut();
    if cu!(sys::cuCtxGetCurrent(&mut previous)) != hipSuccess
        || cu!(sys::cuCtxSetCurrent(ctx)) != hipSuccess
    {
        return -1;
    }
    let mut device = -1;
    let status = cu!(sys::cuCtxGetDevice(&mut device));
    let _ = cu!(sys::cuCtxSetCurrent(previous));
    if status == hipSuccess {
        device
    } else {
        -1
    }
}

/// `hipLaunchHostFunc` → `cuLaunchHostFunc` (same callback signature).
#[no_mangle]
pub unsafe extern "C" fn hipLaunchHostFunc(
    stream: hipStream_t,
    function: hipHostFn_t,
    user_data: *mut c_void,
) -> hipError_t {
    enter!();
    cu!(sys::cuLaunchHostFunc(
        cu_stream(stream),
        function,
        user_data
    ))
}

struct Callback {
    function: unsafe extern "C" fn(hipStream_t, hipError_t, *mut c_void),
    user_data: *mut c_void,
}

unsafe extern "C" fn callback_trampoline(
    stream: sys::CUstream,
    status: sys::CUresult,
    data: *mut c_void,
) {
    // SAFETY: `data` is the `Box<Callback>` leaked by `hipStreamAddCallback`; the driver calls
    // each callback exactly once.
    let callback = unsafe { Box::from_raw(data.cast::<Callback>()) };
    // SAFETY: the HIP callback's contract: it receives its stream, the status and its data.
    unsafe { (callback.function)(stream.cast(), hip_status(status), callback.user_data) };
}

/// `hipStreamAddCallback` → `cuStreamAddCallback`, with the status converted to `hipError_t`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamAddCallback(
    stream: hipStream_t,
    callback: hipStreamCallback_t,
    user_data: *mut c_void,
    flags: c_uint,
) -> hipError_t {
    enter!();
    let Some(function) = callback else {
        return hipErrorInvalidValue;
    };
    let data = Box::into_raw(Box::new(Callback {
        function,
        user_data,
    }));
    let status = cu!(sys::cuStreamAddCallback(
        cu_stream(stream),
        Some(callback_trampoline),
        data.cast(),
        flags
    ));
    if status != hipSuccess {
        // SAFETY: the driver refused the callback, so the box was not handed over.
        drop(unsafe { Box::from_raw(data) });
    }
    status
}

/// `hipStreamWaitValue64` → `cuStreamWaitValue64` (`hipStreamWaitValueGte/Eq/And/Nor` are
/// `CU_STREAM_WAIT_VALUE_GEQ/EQ/AND/NOR`); CUDA has no mask, so only the full mask is accepted,
/// as on HIP's NVIDIA platform.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWaitValue64(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
    mask: u64,
) -> hipError_t {
    use sys::CUstreamWaitValue_flags as F;
    enter!();
    if mask != u64::MAX {
        return hipErrorNotSupported;
    }
    let cu_flags = match flags {
        0 => F::CU_STREAM_WAIT_VALUE_GEQ,
        1 => F::CU_STREAM_WAIT_VALUE_EQ,
        2 => F::CU_STREAM_WAIT_VALUE_AND,
        3 => F::CU_STREAM_WAIT_VALUE_NOR,
        _ => return hipErrorInvalidValue,
    } as c_uint;
    cu!(sys::cuStreamWaitValue64_v2(
        cu_stream(stream),
        cu_ptr(ptr),
        value,
        cu_flags
    ))
}

/// `hipStreamWriteValue64` → `cuStreamWriteValue64`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWriteValue64(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
) -> hipError_t {
    enter!();
    if flags != 0 {
        return hipErrorInvalidValue;
    }
    cu!(sys::cuStreamWriteValue64_v2(
        cu_stream(stream),
        cu_ptr(ptr),
        value,
        sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as c_uint
    ))
}

/// `hipStreamAttachMemAsync` → `cuStreamAttachMemAsync` (`hipMemAttachGlobal/Host/Single` are
/// `CU_MEM_ATTACH_GLOBAL/HOST/SINGLE`).
#[no_mangle]
pub unsafe extern "C" fn hipStreamAttachMemAsync(
    stream: hipStream_t,
    dev_ptr: *mut c_void,
    length: usize,
    flags: c_uint,
) -> hipError_t {
    use sys::CUmemAttach_flags as F;
    enter!();
    let cu_flags = match flags {
        1 => F::CU_MEM_ATTACH_GLOBAL,
        2 => F::CU_MEM_ATTACH_HOST,
        4 => F::CU_MEM_ATTACH_SINGLE,
        _ => return hipErrorInvalidValue,
    } as c_uint;
    cu!(sys::cuStreamAttachMemAsync(
        cu_stream(stream),
        cu_ptr(dev_ptr),
        length,
        cu_flags
    ))
}

// ---- capture ---------------------------------------------------------------------------------

/// `hipStreamBeginCapture` → `cuStreamBeginCapture` (modes have the same values).
#[no_mangle]
pub unsafe extern "C" fn hipStreamBeginCapture(stream: hipStream_t, mode: c_int) -> hipError_t {
    enter!();
    let Some(cu_mode) = capture_mode(mode) else {
        return hipErrorInvalidValue;
    };
    cu!(sys::cuStreamBeginCapture_v2(cu_stream(stream), cu_mode))
}

/// `hipStreamEndCapture` → `cuStreamEndCapture`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamEndCapture(
    stream: hipStream_t,
    graph: *mut hipGraph_t,
) -> hipError_t {
    enter!();
    let mut raw = std::ptr::null_mut();
    let status = cu!(sys::cuStreamEndCapture(cu_stream(stream), &mut raw));
    // The graph is written on failure too (null for an invalidated capture), as CUDA does.
    put(graph, raw.cast());
    status
}

/// `hipStreamIsCapturing` → `cuStreamIsCapturing`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamIsCapturing(
    stream: hipStream_t,
    status: *mut c_int,
) -> hipError_t {
    enter!();
    let mut cu_status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    try_cu!(sys::cuStreamIsCapturing(cu_stream(stream), &mut cu_status));
    put(status, cu_status as c_int)
}

fn capture_info(
    stream: hipStream_t,
    status: *mut c_int,
    id: *mut c_ulonglong,
    graph: *mut hipGraph_t,
    dependencies: *mut *const hipGraphNode_t,
    count: *mut usize,
) -> hipError_t {
    let Some(driver) = driver() else {
        return hipErrorInsufficientDriver;
    };
    let mut cu_status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut cu_id = 0;
    let mut cu_graph = std::ptr::null_mut();
    let mut cu_dependencies: *const sys::CUgraphNode = std::ptr::null();
    let mut cu_count = 0usize;
    if driver.capture_info_v2 {
        try_cu!(sys::cuStreamGetCaptureInfo_v2(
            cu_stream(stream),
            &mut cu_status,
            &mut cu_id,
            &mut cu_graph,
            &mut cu_dependencies,
            &mut cu_count
        ));
    } else {
        let mut edges: *const sys::CUgraphEdgeData = std::ptr::null();
        try_cu!(sys::cuStreamGetCaptureInfo_v3(
            cu_stream(stream),
            &mut cu_status,
            &mut cu_id,
            &mut cu_graph,
            &mut cu_dependencies,
            &mut edges,
            &mut cu_count
        ));
    }
    put(status, cu_status as c_int);
    if !id.is_null() {
        put(id, cu_id);
    }
    if !graph.is_null() {
        put(graph, cu_graph.cast());
    }
    if !dependencies.is_null() {
        put(dependencies, cu_dependencies.cast());
    }
    if !count.is_null() {
        put(count, cu_count);
    }
    hipSuccess
}

/// `hipStreamGetCaptureInfo` → `cuStreamGetCaptureInfo` (status and id).
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetCaptureInfo(
    stream: hipStream_t,
    status: *mut c_int,
    id: *mut c_ulonglong,
) -> hipError_t {
    enter!();
    capture_info(
        stream,
        status,
        id,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    )
}

/// `hipStreamGetCaptureInfo_v2` → `cuStreamGetCaptureInfo` (with graph and dependencies).
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetCaptureInfo_v2(
    stream: hipStream_t,
    status: *mut c_int,
    id: *mut c_ulonglong,
    graph: *mut hipGraph_t,
    dependencies: *mut *const hipGraphNode_t,
    count: *mut usize,
) -> hipError_t {
    enter!();
    capture_info(stream, status, id, graph, dependencies, count)
}

/// `hipStreamUpdateCaptureDependencies` → `cuStreamUpdateCaptureDependencies` (add = 0,
/// set = 1 in both).
#[no_mangle]
pub unsafe extern "C" fn hipStreamUpdateCaptureDependencies(
    stream: hipStream_t,
    dependencies: *mut hipGraphNode_t,
    count: usize,
    flags: c_uint,
) -> hipError_t {
    enter!();
    if flags > 1 {
        return hipErrorInvalidValue;
    }
    cu!(sys::cuStreamUpdateCaptureDependencies(
        cu_stream(stream),
        dependencies.cast(),
        count,
        flags
    ))
}

/// `hipThreadExchangeStreamCaptureMode` → `cuThreadExchangeStreamCaptureMode`.
#[no_mangle]
pub unsafe extern "C" fn hipThreadExchangeStreamCaptureMode(mode: *mut c_int) -> hipError_t {
    enter!();
    if mode.is_null() {
        return hipErrorInvalidValue;
    }
    // SAFETY: non-null, and the HIP contract makes it valid for reads and writes.
    let Some(mut cu_mode) = capture_mode(unsafe { mode.read() }) else {
        return hipErrorInvalidValue;
    };
    try_cu!(sys::cuThreadExchangeStreamCaptureMode(&mut cu_mode));
    put(mode, cu_mode as c_int)
}

// ---- events ----------------------------------------------------------------------------------

/// `hipEventCreateWithFlags` → `cuEventCreate` (`hipEventBlockingSync/DisableTiming/
/// Interprocess` are `CU_EVENT_BLOCKING_SYNC/DISABLE_TIMING/INTERPROCESS`).
#[no_mangle]
pub unsafe extern "C" fn hipEventCreateWithFlags(
    event: *mut hipEvent_t,
    flags: c_uint,
) -> hipError_t {
    use sys::CUevent_flags as F;
    enter!();
    if flags & !0x7 != 0 {
        return hipErrorInvalidValue;
    }
    let mut cu_flags = 0;
    if flags & 0x1 != 0 {
        cu_flags |= F::CU_EVENT_BLOCKING_SYNC as c_uint;
    }
    if flags & 0x2 != 0 {
        cu_flags |= F::CU_EVENT_DISABLE_TIMING as c_uint;
    }
    if flags & 0x4 != 0 {
        cu_flags |= F::CU_EVENT_INTERPROCESS as c_uint;
    }
    let mut raw = std::ptr::null_mut();
    try_cu!(sys::cuEventCreate(&mut raw, cu_flags));
    put(event, raw.cast())
}

/// `hipEventDestroy` → `cuEventDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipEventDestroy(event: hipEvent_t) -> hipError_t {
    enter_handle!();
    cu!(sys::cuEventDestroy_v2(cu_event(event)))
}

/// `hipEventRecord` → `cuEventRecord`.
#[no_mangle]
pub unsafe extern "C" fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> hipError_t {
    enter!();
    cu!(sys::cuEventRecord(cu_event(event), cu_stream(stream)))
}

/// `hipEventQuery` → `cuEventQuery`.
#[no_mangle]
pub unsafe extern "C" fn hipEventQuery(event: hipEvent_t) -> hipError_t {
    enter_handle!();
    cu!(sys::cuEventQuery(cu_event(event)))
}

/// `hipEventSynchronize` → `cuEventSynchronize`.
#[no_mangle]
pub unsafe extern "C" fn hipEventSynchronize(event: hipEvent_t) -> hipError_t {
    enter_handle!();
    cu!(sys::cuEventSynchronize(cu_event(event)))
}

/// `hipEventElapsedTime` → `cuEventElapsedTime`.
#[no_mangle]
pub unsafe extern "C" fn hipEventElapsedTime(
    ms: *mut f32,
    start: hipEvent_t,
    stop: hipEvent_t,
) -> hipError_t {
    enter_handle!();
    if driver().is_some_and(|d| d.elapsed_v1) {
        cu!(sys::cuEventElapsedTime(ms, cu_event(start), cu_event(stop)))
    } else {
        cu!(sys::cuEventElapsedTime_v2(
            ms,
            cu_event(start),
            cu_event(stop)
        ))
    }
}

// ---- graphs ----------------------------------------------------------------------------------

/// `hipGraphCreate` → `cuGraphCreate`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphCreate(graph: *mut hipGraph_t, flags: c_uint) -> hipError_t {
    enter!();
    let mut raw = std::ptr::null_mut();
    try_cu!(sys::cuGraphCreate(&mut raw, flags));
    put(graph, raw.cast())
}

/// `hipGraphInstantiate` → `cuGraphInstantiateWithFlags(0)` (CUDA 12 dropped the error-node
/// and log-buffer form; the error node and log are left unwritten).
#[no_mangle]
pub unsafe extern "C" fn hipGraphInstantiate(
    exec: *mut hipGraphExec_t,
    graph: hipGraph_t,
    _error_node: *mut hipGraphNode_t,
    _log: *mut c_char,
    _log_size: usize,
) -> hipError_t {
    enter!();
    let mut raw = std::ptr::null_mut();
    try_cu!(sys::cuGraphInstantiateWithFlags(&mut raw, graph.cast(), 0));
    put(exec, raw.cast())
}

/// `hipGraphLaunch` → `cuGraphLaunch`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphLaunch(exec: hipGraphExec_t, stream: hipStream_t) -> hipError_t {
    enter!();
    cu!(sys::cuGraphLaunch(exec.cast(), cu_stream(stream)))
}

/// `hipGraphExecDestroy` → `cuGraphExecDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecDestroy(exec: hipGraphExec_t) -> hipError_t {
    enter!();
    cu!(sys::cuGraphExecDestroy(exec.cast()))
}

/// `hipGraphDestroy` → `cuGraphDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphDestroy(graph: hipGraph_t) -> hipError_t {
    enter!();
    cu!(sys::cuGraphDestroy(graph.cast()))
}

/// `hipGraphGetNodes` → `cuGraphGetNodes`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphGetNodes(
    graph: hipGraph_t,
    nodes: *mut hipGraphNode_t,
    count: *mut usize,
) -> hipError_t {
    enter!();
    cu!(sys::cuGraphGetNodes(graph.cast(), nodes.cast(), count))
}

// ---- memory ----------------------------------------------------------------------------------

/// `hipMalloc` → `cuMemAlloc`.
#[no_mangle]
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> hipError_t {
    enter!();
    let mut raw = 0;
    try_cu!(sys::cuMemAlloc_v2(&mut raw, size));
    put(ptr, hip_ptr(raw))
}

/// `hipFree` → `cuMemFree`.
#[no_mangle]
pub unsafe extern "C" fn hipFree(ptr: *mut c_void) -> hipError_t {
    enter!();
    if ptr.is_null() {
        return hipSuccess;
    }
    cu!(sys::cuMemFree_v2(cu_ptr(ptr)))
}

/// `hipMallocAsync` → `cuMemAllocAsync`.
#[no_mangle]
pub unsafe extern "C" fn hipMallocAsync(
    ptr: *mut *mut c_void,
    size: usize,
    stream: hipStream_t,
) -> hipError_t {
    enter!();
    let mut raw = 0;
    try_cu!(sys::cuMemAllocAsync(&mut raw, size, cu_stream(stream)));
    put(ptr, hip_ptr(raw))
}

/// `hipFreeAsync` → `cuMemFreeAsync`.
#[no_mangle]
pub unsafe extern "C" fn hipFreeAsync(ptr: *mut c_void, stream: hipStream_t) -> hipError_t {
    enter!();
    cu!(sys::cuMemFreeAsync(cu_ptr(ptr), cu_stream(stream)))
}

/// `hipMallocManaged` → `cuMemAllocManaged`.
#[no_mangle]
pub unsafe extern "C" fn hipMallocManaged(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    use sys::CUmemAttach_flags as F;
    enter!();
    let cu_flags = match flags {
        1 => F::CU_MEM_ATTACH_GLOBAL,
        2 => F::CU_MEM_ATTACH_HOST,
        _ => return hipErrorInvalidValue,
    } as c_uint;
    let mut raw = 0;
    try_cu!(sys::cuMemAllocManaged(&mut raw, size, cu_flags));
    put(ptr, hip_ptr(raw))
}

/// `hipHostMalloc` → `cuMemHostAlloc` (`hipHostMallocPortable/Mapped/WriteCombined` are
/// `CU_MEMHOSTALLOC_PORTABLE/DEVICEMAP/WRITECOMBINED`).
#[no_mangle]
pub unsafe extern "C" fn hipHostMalloc(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    enter!();
    if flags & !0x7 != 0 {
        return hipErrorInvalidValue;
    }
    let mut cu_flags = 0;
    if flags & 0x1 != 0 {
        cu_flags |= sys::CU_MEMHOSTALLOC_PORTABLE;
    }
    if flags & 0x2 != 0 {
        cu_flags |= sys::CU_MEMHOSTALLOC_DEVICEMAP;
    }
    if flags & 0x4 != 0 {
        cu_flags |= sys::CU_MEMHOSTALLOC_WRITECOMBINED;
    }
    let mut raw = std::ptr::null_mut();
    try_cu!(sys::cuMemHostAlloc(&mut raw, size, cu_flags));
    put(ptr, raw)
}

/// `hipHostFree` → `cuMemFreeHost`.
#[no_mangle]
pub unsafe extern "C" fn hipHostFree(ptr: *mut c_void) -> hipError_t {
    enter!();
    if ptr.is_null() {
        return hipSuccess;
    }
    cu!(sys::cuMemFreeHost(ptr))
}

/// `hipHostGetDevicePointer` → `cuMemHostGetDevicePointer`.
#[no_mangle]
pub unsafe extern "C" fn hipHostGetDevicePointer(
    device_ptr: *mut *mut c_void,
    host_ptr: *mut c_void,
    flags: c_uint,
) -> hipError_t {
    enter!();
    let mut raw = 0;
    try_cu!(sys::cuMemHostGetDevicePointer_v2(&mut raw, host_ptr, flags));
    put(device_ptr, hip_ptr(raw))
}

/// `hipMemcpyHtoDAsync` → `cuMemcpyHtoDAsync`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyHtoDAsync(
    dst: hipDeviceptr_t,
    src: *mut c_void,
    size: usize,
    stream: hipStream_t,
) -> hipError_t {
    enter!();
    cu!(sys::cuMemcpyHtoDAsync_v2(
        cu_ptr(dst),
        src,
        size,
        cu_stream(stream)
    ))
}

/// `hipMemcpyDtoHAsync` → `cuMemcpyDtoHAsync`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoHAsync(
    dst: *mut c_void,
    src: hipDeviceptr_t,
    size: usize,
    stream: hipStream_t,
) -> hipError_t {
    enter!();
    cu!(sys::cuMemcpyDtoHAsync_v2(
        dst,
        cu_ptr(src),
        size,
        cu_stream(stream)
    ))
}

/// `hipMemcpyDtoDAsync` → `cuMemcpyDtoDAsync`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoDAsync(
    dst: hipDeviceptr_t,
    src: hipDeviceptr_t,
    size: usize,
    stream: hipStream_t,
) -> hipError_t {
    enter!();
    cu!(sys::cuMemcpyDtoDAsync_v2(
        cu_ptr(dst),
        cu_ptr(src),
        size,
        cu_stream(stream)
    ))
}

/// `hipMemsetD8Async` → `cuMemsetD8Async`.
#[no_mangle]
pub unsafe extern "C" fn hipMemsetD8Async(
    dst: hipDeviceptr_t,
    value: c_uchar,
    count: usize,
    stream: hipStream_t,
) -> hipError_t {
    enter!();
    cu!(sys::cuMemsetD8Async(
        cu_ptr(dst),
        value,
        count,
        cu_stream(stream)
    ))
}

// ---- modules and kernels ---------------------------------------------------------------------

/// `hipModuleLoadData` → `cuModuleLoadData`: the image is PTX text or a cubin, as on HIP's
/// NVIDIA platform.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadData(
    module: *mut hipModule_t,
    image: *const c_void,
) -> hipError_t {
    enter!();
    let mut raw = std::ptr::null_mut();
    try_cu!(sys::cuModuleLoadData(&mut raw, image));
    put(module, raw.cast())
}

/// `hipModuleUnload` → `cuModuleUnload`.
#[no_mangle]
pub unsafe extern "C" fn hipModuleUnload(module: hipModule_t) -> hipError_t {
    enter!();
    cu!(sys::cuModuleUnload(module.cast()))
}

/// `hipModuleGetFunction` → `cuModuleGetFunction`.
#[no_mangle]
pub unsafe extern "C" fn hipModuleGetFunction(
    function: *mut hipFunction_t,
    module: hipModule_t,
    name: *const c_char,
) -> hipError_t {
    enter!();
    let mut raw = std::ptr::null_mut();
    try_cu!(sys::cuModuleGetFunction(&mut raw, module.cast(), name));
    put(function, raw.cast())
}

/// `hipModuleLaunchKernel` → `cuLaunchKernel` (the `extra` launch-parameter markers have the
/// same values).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hipModuleLaunchKernel(
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
) -> hipError_t {
    enter!();
    cu!(sys::cuLaunchKernel(
        function.cast(),
        grid_x,
        grid_y,
        grid_z,
        block_x,
        block_y,
        block_z,
        shared_mem_bytes,
        cu_stream(stream),
        params,
        extra
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_a_name_and_a_text() {
        for (code, name, _) in ERRORS {
            // SAFETY: the functions return static NUL-terminated strings.
            let got = unsafe { std::ffi::CStr::from_ptr(hipGetErrorName(*code)) };
            assert_eq!(got.to_str(), Ok(*name));
            // SAFETY: as above.
            let text = unsafe { std::ffi::CStr::from_ptr(hipGetErrorString(*code)) };
            assert!(!text.to_bytes().is_empty());
        }
        // SAFETY: as above; an unknown code reads as hipErrorUnknown.
        let unknown = unsafe { std::ffi::CStr::from_ptr(hipGetErrorName(12345)) };
        assert_eq!(unknown.to_str(), Ok("hipErrorUnknown"));
    }

    #[test]
    fn cuda_codes_map_to_hip_codes() {
        assert_eq!(hip_status(sys::CUresult::CUDA_SUCCESS), hipSuccess);
        assert_eq!(hip_status(sys::CUresult::CUDA_ERROR_ILLEGAL_STATE), 401);
        assert_eq!(hip_status(sys::CUresult::CUDA_ERROR_INVALID_PTX), 218);
        assert_eq!(
            hip_status(sys::CUresult::CUDA_ERROR_UNKNOWN),
            hipErrorUnknown
        );
        assert_eq!(
            hip_status(sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD),
            908
        );
        assert_eq!(hip_status(sys::CUresult::CUDA_ERROR_NOT_READY), 600);
        assert_eq!(hip_status(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY), 2);
        assert_eq!(
            hip_status(sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),
            900
        );
        assert_eq!(hip_status(sys::CUresult::CUDA_ERROR_INVALID_HANDLE), 400);
        assert_eq!(hip_status(sys::CUresult::CUDA_ERROR_NOT_INITIALIZED), 3);
    }

    #[test]
    fn without_libcuda_calls_answer_insufficient_driver() {
        // SAFETY: valid out-pointers; without libcuda nothing reaches the driver.
        unsafe {
            if !sys::is_culib_present() {
                let mut version = 0;
                assert_eq!(
                    hipDriverGetVersion(&mut version),
                    hipErrorInsufficientDriver
                );
                assert_eq!(hipInit(0), hipErrorInsufficientDriver);
                let mut stream = std::ptr::null_mut();
                assert_eq!(
                    hipStreamCreateWithPriority(&mut stream, 0, 0),
                    hipErrorInsufficientDriver
                );
            }
        }
    }
}
