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

/// A HIP status code with its name (`hipGetErrorName`) and description (`hipGetErrorString`).
struct ErrorText {
    code: hipError_t,
    name: &'static str,
    text: &'static str,
}

/// HIP status codes with their names and descriptions (`hipGetErrorName`/`hipGetErrorString`).
/// HIP numbers these like the CUDA codes they correspond to.
const ERRORS: &[ErrorText] = &[
    ErrorText {
        code: 0,
        name: "hipSuccess",
        text: "no error",
    },
    ErrorText {
        code: 1,
        name: "hipErrorInvalidValue",
        text: "invalid argument",
    },
    ErrorText {
        code: 2,
        name: "hipErrorOutOfMemory",
        text: "out of memory",
    },
    ErrorText {
        code: 3,
        name: "hipErrorNotInitialized",
        text: "initialization error",
    },
    ErrorText {
        code: 4,
        name: "hipErrorDeinitialized",
        text: "driver shutting down",
    },
    ErrorText {
        code: 35,
        name: "hipErrorInsufficientDriver",
        text: "driver version is insufficient for runtime version",
    },
    ErrorText {
        code: 100,
        name: "hipErrorNoDevice",
        text: "no ROCm-capable device is detected",
    },
    ErrorText {
        code: 101,
        name: "hipErrorInvalidDevice",
        text: "invalid device ordinal",
    },
    ErrorText {
        code: 200,
        name: "hipErrorInvalidImage",
        text: "device kernel image is invalid",
    },
    ErrorText {
        code: 201,
        name: "hipErrorInvalidContext",
        text: "invalid device context",
    },
    ErrorText {
        code: 209,
        name: "hipErrorNoBinaryForGpu",
        text: "no kernel image is available for execution on the device",
    },
    ErrorText {
        code: 218,
        name: "hipErrorInvalidKernelFile",
        text: "invalid kernel file",
    },
    ErrorText {
        code: 400,
        name: "hipErrorInvalidHandle",
        text: "invalid resource handle",
    },
    ErrorText {
        code: 401,
        name: "hipErrorIllegalState",
        text: "the operation cannot be performed in the present state",
    },
    ErrorText {
        code: 500,
        name: "hipErrorNotFound",
        text: "named symbol not found",
    },
    ErrorText {
        code: 600,
        name: "hipErrorNotReady",
        text: "device not ready",
    },
    ErrorText {
        code: 700,
        name: "hipErrorIllegalAddress",
        text: "an illegal memory access was encountered",
    },
    ErrorText {
        code: 701,
        name: "hipErrorLaunchOutOfResources",
        text: "too many resources requested for launch",
    },
    ErrorText {
        code: 702,
        name: "hipErrorLaunchTimeOut",
        text: "the launch timed out and was terminated",
    },
    ErrorText {
        code: 708,
        name: "hipErrorSetOnActiveProcess",
        text: "cannot set while device is active in this process",
    },
    ErrorText {
        code: 709,
        name: "hipErrorContextIsDestroyed",
        text: "context is destroyed",
    },
    ErrorText {
        code: 712,
        name: "hipErrorHostMemoryAlreadyRegistered",
        text: "the memory range is already registered",
    },
    ErrorText {
        code: 713,
        name: "hipErrorHostMemoryNotRegistered",
        text: "the pointer is not a registered memory region",
    },
    ErrorText {
        code: 719,
        name: "hipErrorLaunchFailure",
        text: "unspecified launch failure",
    },
    ErrorText {
        code: 801,
        name: "hipErrorNotSupported",
        text: "operation not supported",
    },
    ErrorText {
        code: 900,
        name: "hipErrorStreamCaptureUnsupported",
        text: "operation not permitted when stream is capturing",
    },
    ErrorText {
        code: 901,
        name: "hipErrorStreamCaptureInvalidated",
        text: "operation failed due to a previous error during capture",
    },
    ErrorText {
        code: 902,
        name: "hipErrorStreamCaptureMerge",
        text: "operation would result in a merge of separate capture sequences",
    },
    ErrorText {
        code: 903,
        name: "hipErrorStreamCaptureUnmatched",
        text: "capture was not ended in the same stream as it began",
    },
    ErrorText {
        code: 904,
        name: "hipErrorStreamCaptureUnjoined",
        text: "capturing stream has unjoined work",
    },
    ErrorText {
        code: 905,
        name: "hipErrorStreamCaptureIsolation",
        text: "dependency created on uncaptured work in another stream",
    },
    ErrorText {
        code: 906,
        name: "hipErrorStreamCaptureImplicit",
        text: "operation would make the legacy stream depend on a capturing blocking stream",
    },
    ErrorText {
        code: 907,
        name: "hipErrorCapturedEvent",
        text: "operation not permitted on an event last recorded in a capturing stream",
    },
    ErrorText {
        code: 908,
        name: "hipErrorStreamCaptureWrongThread",
        text: "attempt to terminate a thread-local capture sequence from another thread",
    },
    ErrorText {
        code: 999,
        name: "hipErrorUnknown",
        text: "unknown error",
    },
];

/// Maps a CUDA driver status to the HIP code of the same meaning (HIP's NVIDIA platform does
/// this in `hipCUResultTohipError`). HIP numbers each code in `ERRORS` like the CUDA code it
/// corresponds to (`CUDA_ERROR_INVALID_PTX` 218 is `hipErrorInvalidKernelFile` 218), so the
/// mapping keeps those codes; codes without a HIP counterpart become `hipErrorUnknown`.
fn hip_status(status: sys::CUresult) -> hipError_t {
    let code = status as c_int;
    if ERRORS.iter().any(|e| e.code == code) {
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

/// Calls the driver with a fresh out-pointer, `|$raw| $call` (`$raw` is a `&mut` to it), and
/// writes what the driver answered to the caller's out-pointer `$out` ([`put`]); returns the
/// driver's status from the enclosing function when the call fails.
macro_rules! put_cu {
    ($out:expr, |$raw:ident| $call:expr) => {{
        let mut value = std::ptr::null_mut();
        {
            let $raw = &mut value;
            try_cu!($call);
        }
        put($out, value.cast())
    }};
}

/// The driver device of HIP ordinal `$ordinal` (`cuDeviceGet`); returns the call's status from
/// the enclosing function when there is none.
macro_rules! try_cu_device {
    ($ordinal:expr) => {
        match cu_device($ordinal) {
            Ok(device) => device,
            Err(status) => return status,
        }
    };
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
/// The CUDA flags for the HIP `flags`, given `bits`: each HIP bit with the CUDA flag it stands
/// for. `None` where `flags` holds a bit `bits` does not list (HIP answers
/// `hipErrorInvalidValue`).
fn translate_flags(flags: c_uint, bits: &[(c_uint, c_uint)]) -> Option<c_uint> {
    let known = bits.iter().fold(0, |all, &(hip, _)| all | hip);
    (flags & !known == 0).then(|| {
        bits.iter()
            .filter(|&&(hip, _)| flags & hip != 0)
            .fold(0, |cu, &(_, flag)| cu | flag)
    })
}

/// `hipMemAttachSingle`.
const hipMemAttachSingle: c_uint = 4;

/// The CUDA attachment for the HIP one: `hipMemAttachGlobal/Host/Single` (1, 2, 4) are
/// `CU_MEM_ATTACH_GLOBAL/HOST/SINGLE`; `None` for any other value.
fn mem_attach(flags: c_uint) -> Option<c_uint> {
    use sys::CUmemAttach_flags as F;
    let attach = match flags {
        1 => F::CU_MEM_ATTACH_GLOBAL,
        2 => F::CU_MEM_ATTACH_HOST,
        hipMemAttachSingle => F::CU_MEM_ATTACH_SINGLE,
        _ => return None,
    };
    Some(attach as c_uint)
}

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

/// The driver device of HIP ordinal `ordinal` (`cuDeviceGet`), or the call's status.
fn cu_device(ordinal: c_int) -> Result<sys::CUdevice, hipError_t> {
    let mut device = 0;
    let status = cu!(sys::cuDeviceGet(&mut device, ordinal));
    if status == hipSuccess {
        Ok(device)
    } else {
        Err(status)
    }
}

fn primary_context(ordinal: c_int) -> Result<sys::CUcontext, hipError_t> {
    let index = usize::try_from(ordinal).map_err(|_| hipErrorInvalidDevice)?;
    let mut cache = PRIMARY.lock().map_err(|_| hipErrorUnknown)?;
    if let Some(Some(ctx)) = cache.get(index) {
        return Ok(std::ptr::with_exposed_provenance_mut(*ctx));
    }
    let device = cu_device(ordinal).map_err(|status| {
        if status == hipErrorInvalidValue {
            hipErrorInvalidDevice
        } else {
            status
        }
    })?;
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

mod buffer;
mod capture;
mod device;
mod event;
mod graph;
mod kernel;
mod stream;

/// Marks this library as devstream's HIP-on-CUDA shim for devstream's HIP loader: its host
/// functions run on the CUDA driver's callback thread, beside CUDA's own (the loader tells
/// `devstream_core::foreign` so). Does nothing.
#[no_mangle]
pub extern "C" fn devstream_hip_shim_over_cuda() {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{hipDriverGetVersion, hipGetErrorName, hipGetErrorString, hipInit};
    use crate::stream::hipStreamCreateWithPriority;

    #[test]
    fn flags_translate_bit_by_bit_and_unknown_bits_are_refused() {
        let bits = [(0x1, 0x10), (0x2, 0x20), (0x4, 0x40)];
        assert_eq!(translate_flags(0, &bits), Some(0));
        assert_eq!(translate_flags(0x5, &bits), Some(0x50));
        assert_eq!(translate_flags(0x7, &bits), Some(0x70));
        assert_eq!(translate_flags(0x9, &bits), None);
        use sys::CUmemAttach_flags as F;
        assert_eq!(mem_attach(1), Some(F::CU_MEM_ATTACH_GLOBAL as c_uint));
        assert_eq!(mem_attach(2), Some(F::CU_MEM_ATTACH_HOST as c_uint));
        assert_eq!(mem_attach(4), Some(F::CU_MEM_ATTACH_SINGLE as c_uint));
        assert_eq!(mem_attach(3), None);
    }

    #[test]
    fn every_error_has_a_name_and_a_text() {
        for error in ERRORS {
            // SAFETY: the functions return static NUL-terminated strings.
            let got = unsafe { std::ffi::CStr::from_ptr(hipGetErrorName(error.code)) };
            assert_eq!(got.to_str(), Ok(error.name));
            // SAFETY: as above.
            let text = unsafe { std::ffi::CStr::from_ptr(hipGetErrorString(error.code)) };
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
