//! Memory: device, managed and pinned host allocations, copies and fills.

use super::*;

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

/// `hipMallocManaged` → `cuMemAllocManaged` (see [`mem_attach`]).
#[no_mangle]
pub unsafe extern "C" fn hipMallocManaged(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    enter!();
    // An allocation is attached globally or to the host; single-stream attachment is a
    // stream's (hipStreamAttachMemAsync).
    let Some(cu_flags) = mem_attach(flags).filter(|_| flags != hipMemAttachSingle) else {
        return hipErrorInvalidValue;
    };
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
    let bits = [
        (0x1, sys::CU_MEMHOSTALLOC_PORTABLE),
        (0x2, sys::CU_MEMHOSTALLOC_DEVICEMAP),
        (0x4, sys::CU_MEMHOSTALLOC_WRITECOMBINED),
    ];
    let Some(cu_flags) = translate_flags(flags, &bits) else {
        return hipErrorInvalidValue;
    };
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
