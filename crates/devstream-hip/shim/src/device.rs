//! Initialisation, error names and devices.

use super::*;

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
    c_text(&NAMES, error, |e| e.name)
}

/// `hipGetErrorString`: a description of a status code (a static string).
#[no_mangle]
pub unsafe extern "C" fn hipGetErrorString(error: hipError_t) -> *const c_char {
    static TEXTS: OnceLock<Vec<(hipError_t, std::ffi::CString)>> = OnceLock::new();
    c_text(&TEXTS, error, |e| e.text)
}

fn c_text(
    cell: &'static OnceLock<Vec<(hipError_t, std::ffi::CString)>>,
    error: hipError_t,
    pick: fn(&ErrorText) -> &'static str,
) -> *const c_char {
    let table = cell.get_or_init(|| {
        ERRORS
            .iter()
            .map(|e| (e.code, std::ffi::CString::new(pick(e)).unwrap_or_default()))
            .collect()
    });
    let wanted = if ERRORS.iter().any(|e| e.code == error) {
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
    let cu_device = try_cu_device!(device);
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
    let cu_device = try_cu_device!(device);
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
