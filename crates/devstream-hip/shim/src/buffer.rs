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
    put_cu!(ptr, |raw| sys::cuMemHostAlloc(raw, size, cu_flags))
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
    enter_handle!(stream);
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
    enter_handle!(stream);
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
    enter_handle!(stream);
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
    enter_handle!(stream);
    cu!(sys::cuMemsetD8Async(
        cu_ptr(dst),
        value,
        count,
        cu_stream(stream)
    ))
}

/// `hipMemPool_t` (a `CUmemoryPool` here).
type hipMemPool_t = *mut c_void;

/// `hipMemLocation`.
#[repr(C)]
pub struct hipMemLocation {
    type_: c_int,
    id: c_int,
}

/// `hipMemPoolProps` (88 bytes: `maxSize` of ROCm 6 lies in the reserved tail of ROCm 5).
#[repr(C)]
pub struct hipMemPoolProps {
    allocType: c_int,
    handleTypes: c_int,
    location: hipMemLocation,
    win32SecurityAttributes: *mut c_void,
    reserved: [c_uchar; 64],
}

/// The CUDA attribute of a `hipMemPoolAttr` (the same numbers), or `None`.
fn pool_attribute(attr: c_int) -> Option<sys::CUmemPool_attribute> {
    use sys::CUmemPool_attribute as A;
    Some(match attr {
        1 => A::CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES,
        2 => A::CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
        3 => A::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
        4 => A::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
        5 => A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
        6 => A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
        7 => A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
        8 => A::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        _ => return None,
    })
}

/// `hipDeviceGetDefaultMemPool` → `cuDeviceGetDefaultMemPool`.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetDefaultMemPool(
    pool: *mut hipMemPool_t,
    device: c_int,
) -> hipError_t {
    enter!();
    let cu_device = try_cu_device!(device);
    put_cu!(pool, |raw| sys::cuDeviceGetDefaultMemPool(raw, cu_device))
}

/// `hipMemPoolCreate` → `cuMemPoolCreate` (pinned device memory; no export handles, no Windows
/// attributes: the only properties devstream-hip passes).
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolCreate(
    pool: *mut hipMemPool_t,
    props: *const hipMemPoolProps,
) -> hipError_t {
    enter!();
    // SAFETY: the HIP contract makes `props` valid for a read where it is non-null.
    let Some(props) = (unsafe { props.as_ref() }) else {
        return hipErrorInvalidValue;
    };
    if props.allocType != 1 || props.handleTypes != 0 || props.location.type_ != 1 {
        return hipErrorNotSupported;
    }
    // SAFETY: every field of the properties is an integer, an enum whose 0 is a declared value
    // or a pointer: all-zero is a valid value to start from.
    let mut cu_props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
    cu_props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    cu_props.handleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    cu_props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    cu_props.location.id = props.location.id;
    // ROCm 6's `maxSize`: the first 8 bytes of the tail.
    let mut max_size = [0; 8];
    max_size.copy_from_slice(&props.reserved[..8]);
    cu_props.maxSize = u64::from_ne_bytes(max_size) as usize;
    put_cu!(pool, |raw| sys::cuMemPoolCreate(raw, &cu_props))
}

/// `hipMemPoolDestroy` → `cuMemPoolDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolDestroy(pool: hipMemPool_t) -> hipError_t {
    enter!();
    cu!(sys::cuMemPoolDestroy(pool.cast()))
}

/// `hipMemPoolGetAttribute` → `cuMemPoolGetAttribute`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolGetAttribute(
    pool: hipMemPool_t,
    attr: c_int,
    value: *mut c_void,
) -> hipError_t {
    // SAFETY: forwarded under this function's HIP contract (a live pool; `value` points to
    // the attribute's 64-bit value).
    unsafe { pool_attribute_call(sys::cuMemPoolGetAttribute, pool, attr, value) }
}

/// `hipMemPoolSetAttribute` → `cuMemPoolSetAttribute`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolSetAttribute(
    pool: hipMemPool_t,
    attr: c_int,
    value: *mut c_void,
) -> hipError_t {
    // SAFETY: forwarded under this function's HIP contract (a live pool; `value` points to
    // the attribute's 64-bit value).
    unsafe { pool_attribute_call(sys::cuMemPoolSetAttribute, pool, attr, value) }
}

/// `cuMemPoolGetAttribute` or `cuMemPoolSetAttribute` (`call`, which have one signature) of
/// the CUDA attribute of `attr`.
///
/// # Safety
/// The contract of `hipMemPoolGetAttribute` / `hipMemPoolSetAttribute`: a live pool, and `value`
/// valid for the attribute's 64-bit value.
unsafe fn pool_attribute_call(
    call: unsafe fn(sys::CUmemoryPool, sys::CUmemPool_attribute, *mut c_void) -> sys::CUresult,
    pool: hipMemPool_t,
    attr: c_int,
    value: *mut c_void,
) -> hipError_t {
    enter!();
    let Some(attr) = pool_attribute(attr) else {
        return hipErrorInvalidValue;
    };
    cu!(call(pool.cast(), attr, value))
}

/// `hipMemPoolTrimTo` → `cuMemPoolTrimTo`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolTrimTo(
    pool: hipMemPool_t,
    min_bytes_to_hold: usize,
) -> hipError_t {
    enter!();
    cu!(sys::cuMemPoolTrimTo(pool.cast(), min_bytes_to_hold))
}

/// `hipMallocFromPoolAsync` → `cuMemAllocFromPoolAsync`.
#[no_mangle]
pub unsafe extern "C" fn hipMallocFromPoolAsync(
    ptr: *mut *mut c_void,
    size: usize,
    pool: hipMemPool_t,
    stream: hipStream_t,
) -> hipError_t {
    enter!();
    let mut raw = 0;
    try_cu!(sys::cuMemAllocFromPoolAsync(
        &mut raw,
        size,
        pool.cast(),
        cu_stream(stream)
    ));
    put(ptr, hip_ptr(raw))
}
