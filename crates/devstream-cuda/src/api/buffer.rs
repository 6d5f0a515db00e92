//! Device, managed and pinned host memory, and copies: [`CudaApi`]'s part of the raw-call table (`RawMemory`).

use super::*;
use devstream_gpu_common::{MemPoolAttribute, RawMemPool, RawMemory};

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawMemory for CudaApi {
    unsafe fn mem_alloc(len: usize) -> RawResult<DevicePtr> {
        out(0, "cuMemAlloc", |ptr| {
            // SAFETY: valid out-pointer; a context is current (caller).
            unsafe { sys::cuMemAlloc_v2(ptr, len) }
        })
    }

    unsafe fn mem_free(ptr: DevicePtr) -> RawResult {
        // SAFETY: the caller owns the allocation and nothing uses it any more.
        ok(unsafe { sys::cuMemFree_v2(ptr) }, "cuMemFree")
    }

    unsafe fn mem_alloc_async(len: usize, s: RawStream) -> RawResult<DevicePtr> {
        out(0, "cuMemAllocAsync", |ptr| {
            // SAFETY: valid out-pointer, live stream; present per `supports`.
            unsafe { sys::cuMemAllocAsync(ptr, len, stream(s)) }
        })
    }

    unsafe fn mem_free_async(ptr: DevicePtr, s: RawStream) -> RawResult {
        ok(
            // SAFETY: the caller owns the allocation; the free is stream-ordered.
            unsafe { sys::cuMemFreeAsync(ptr, stream(s)) },
            "cuMemFreeAsync",
        )
    }

    unsafe fn device_default_mem_pool(ordinal: usize) -> RawResult<RawMemPool> {
        let mut device = 0;
        ok(
            // SAFETY: valid out-pointer; the ordinal is checked by the driver.
            unsafe { sys::cuDeviceGet(&mut device, ordinal as i32) },
            "cuDeviceGet",
        )?;
        let mut pool = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer and device; present per `supports`.
            unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, device) },
            "cuDeviceGetDefaultMemPool",
        )?;
        Ok(RawMemPool(pool.cast()))
    }

    unsafe fn mem_pool_create(ordinal: usize, max_size: usize) -> RawResult<RawMemPool> {
        // SAFETY: every field of the properties is an integer, an enum whose 0 is a declared
        // value (INVALID / NONE) or a pointer, so all-zero is a valid value to start from.
        let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
        props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        props.handleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
        props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = ordinal as i32;
        // Reserved (must be 0) before CUDA 12.2: an older driver refuses a non-zero limit.
        props.maxSize = max_size;
        let mut pool = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer and properties; present per `supports`.
            unsafe { sys::cuMemPoolCreate(&mut pool, &props) },
            "cuMemPoolCreate",
        )?;
        Ok(RawMemPool(pool.cast()))
    }

    unsafe fn mem_pool_destroy(pool: RawMemPool) -> RawResult {
        ok(
            // SAFETY: the caller owns the pool and never uses it again.
            unsafe { sys::cuMemPoolDestroy(pool.0.cast()) },
            "cuMemPoolDestroy",
        )
    }

    unsafe fn mem_pool_get_attribute(
        pool: RawMemPool,
        attribute: MemPoolAttribute,
    ) -> RawResult<u64> {
        let mut value = 0;
        // SAFETY: a live pool (caller).
        unsafe { pool_attribute_call(PoolAttributeCall::Get, pool, attribute, &mut value) }?;
        Ok(value)
    }

    unsafe fn mem_pool_set_attribute(
        pool: RawMemPool,
        attribute: MemPoolAttribute,
        value: u64,
    ) -> RawResult {
        let mut value = value;
        // SAFETY: a live pool (caller).
        unsafe { pool_attribute_call(PoolAttributeCall::Set, pool, attribute, &mut value) }
    }

    unsafe fn mem_pool_trim_to(pool: RawMemPool, keep: usize) -> RawResult {
        ok(
            // SAFETY: a live pool; trimming never touches live allocations.
            unsafe { sys::cuMemPoolTrimTo(pool.0.cast(), keep) },
            "cuMemPoolTrimTo",
        )
    }

    unsafe fn mem_alloc_from_pool_async(
        len: usize,
        pool: RawMemPool,
        s: RawStream,
    ) -> RawResult<DevicePtr> {
        let mut ptr = 0;
        ok(
            // SAFETY: valid out-pointer, live pool and stream; present per `supports`.
            unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, len, pool.0.cast(), stream(s)) },
            "cuMemAllocFromPoolAsync",
        )?;
        Ok(ptr)
    }

    unsafe fn mem_alloc_managed(len: usize) -> RawResult<DevicePtr> {
        let mut ptr = 0;
        ok(
            // SAFETY: valid out-pointer; present per `supports`.
            unsafe {
                sys::cuMemAllocManaged(
                    &mut ptr,
                    len,
                    sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
                )
            },
            "cuMemAllocManaged",
        )?;
        Ok(ptr)
    }

    unsafe fn host_alloc(len: usize) -> RawResult<*mut u8> {
        let mut ptr = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer; a context is current (caller).
            unsafe {
                sys::cuMemHostAlloc(
                    &mut ptr,
                    len,
                    sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
                )
            },
            "cuMemHostAlloc",
        )?;
        Ok(ptr.cast())
    }

    unsafe fn host_free(ptr: *mut u8) -> RawResult {
        // SAFETY: the caller owns the allocation and nothing uses it any more.
        ok(unsafe { sys::cuMemFreeHost(ptr.cast()) }, "cuMemFreeHost")
    }

    unsafe fn host_device_pointer(ptr: *mut u8) -> RawResult<DevicePtr> {
        out(0, "cuMemHostGetDevicePointer", |device_ptr| {
            // SAFETY: mapped pinned memory, valid out-pointer.
            unsafe { sys::cuMemHostGetDevicePointer_v2(device_ptr, ptr.cast(), 0) }
        })
    }

    unsafe fn memcpy_htod_async(
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        ok(
            // SAFETY: valid ranges (caller).
            unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, stream(s)) },
            "cuMemcpyHtoDAsync",
        )
    }

    unsafe fn memcpy_dtoh_async(
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        ok(
            // SAFETY: valid ranges (caller).
            unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, stream(s)) },
            "cuMemcpyDtoHAsync",
        )
    }

    unsafe fn memcpy_dtod_async(
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        ok(
            // SAFETY: valid ranges (caller).
            unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream(s)) },
            "cuMemcpyDtoDAsync",
        )
    }

    unsafe fn memset_d8_async(dst: DevicePtr, value: u8, len: usize, s: RawStream) -> RawResult {
        ok(
            // SAFETY: valid range (caller).
            unsafe { sys::cuMemsetD8Async(dst, value, len, stream(s)) },
            "cuMemsetD8Async",
        )
    }
}

/// The driver's name of a pool attribute.
fn pool_attribute(attribute: MemPoolAttribute) -> sys::CUmemPool_attribute {
    use sys::CUmemPool_attribute as A;
    match attribute {
        MemPoolAttribute::ReleaseThreshold => A::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
        MemPoolAttribute::ReservedMemCurrent => A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
        MemPoolAttribute::ReservedMemHigh => A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
        MemPoolAttribute::UsedMemCurrent => A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
        MemPoolAttribute::UsedMemHigh => A::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
    }
}

/// Which of the two attribute calls [`pool_attribute_call`] makes.
enum PoolAttributeCall {
    Get,
    Set,
}

/// `cuMemPoolGetAttribute` (into `value`) or `cuMemPoolSetAttribute` (from `value`) of a 64-bit
/// attribute: both take the value through a `void*` to a `cuuint64_t`.
///
/// # Safety
/// `pool` is a live pool.
unsafe fn pool_attribute_call(
    call: PoolAttributeCall,
    pool: RawMemPool,
    attribute: MemPoolAttribute,
    value: &mut u64,
) -> RawResult {
    let (function, name): (unsafe fn(_, _, _) -> _, _) = match call {
        PoolAttributeCall::Get => (sys::cuMemPoolGetAttribute, "cuMemPoolGetAttribute"),
        PoolAttributeCall::Set => (sys::cuMemPoolSetAttribute, "cuMemPoolSetAttribute"),
    };
    ok(
        // SAFETY: a live pool (caller); every attribute of `MemPoolAttribute` is a 64-bit one,
        // so a pointer to a u64 is the right size; present per `supports`.
        unsafe {
            function(
                pool.0.cast(),
                pool_attribute(attribute),
                (value as *mut u64).cast(),
            )
        },
        name,
    )
}
