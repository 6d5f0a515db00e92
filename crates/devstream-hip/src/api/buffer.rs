//! Device, managed and pinned host memory, and copies: [`HipApi`]'s part of the raw-call table (`RawMemory`).

use super::*;
use devstream_gpu_common::{MemPoolAttribute, RawMemPool, RawMemory};

// SAFETY: every function forwards to the HIP runtime call of the same meaning as the CUDA call
// named in RawApi's documentation, with the same contract; optional calls check their symbol
// (the shared layer also checks `supports` first); nothing is called before `load` returned Ok.
unsafe impl RawMemory for HipApi {
    unsafe fn mem_alloc(len: usize) -> RawResult<DevicePtr> {
        let t = table("hipMalloc")?;
        let ptr = out(std::ptr::null_mut(), "hipMalloc", |ptr| {
            // SAFETY: valid out-pointer; the caller selected the device.
            unsafe { (t.hipMalloc)(ptr, len) }
        })?;
        Ok(address(ptr))
    }

    unsafe fn mem_free(ptr: DevicePtr) -> RawResult {
        call("hipFree", |t| {
            // SAFETY: the caller owns the allocation and no queued work uses it.
            unsafe { (t.hipFree)(device_ptr(ptr)) }
        })
    }

    unsafe fn mem_alloc_async(len: usize, s: RawStream) -> RawResult<DevicePtr> {
        let function = optional("hipMallocAsync", |t| t.hipMallocAsync)?;
        let ptr = out(std::ptr::null_mut(), "hipMallocAsync", |ptr| {
            // SAFETY: valid out-pointer; live stream.
            unsafe { function(ptr, len, stream(s)) }
        })?;
        Ok(address(ptr))
    }

    unsafe fn mem_free_async(ptr: DevicePtr, s: RawStream) -> RawResult {
        let function = optional("hipFreeAsync", |t| t.hipFreeAsync)?;
        ok(
            // SAFETY: the caller owns the allocation; the free is ordered on the live stream.
            unsafe { function(device_ptr(ptr), stream(s)) },
            "hipFreeAsync",
        )
    }

    unsafe fn device_default_mem_pool(ordinal: usize) -> RawResult<RawMemPool> {
        let function = optional("hipDeviceGetDefaultMemPool", |t| {
            t.hipDeviceGetDefaultMemPool
        })?;
        let pool = out(std::ptr::null_mut(), "hipDeviceGetDefaultMemPool", |pool| {
            // SAFETY: valid out-pointer; the ordinal is checked by the runtime.
            unsafe { function(pool, ordinal as i32) }
        })?;
        Ok(RawMemPool(pool))
    }

    unsafe fn mem_pool_create(ordinal: usize, max_size: usize) -> RawResult<RawMemPool> {
        let function = optional("hipMemPoolCreate", |t| t.hipMemPoolCreate)?;
        // `maxSize` (ROCm 6) is the first 8 of the 64 bytes that were all reserved before: an
        // older runtime refuses a non-zero limit.
        let mut reserved = [0; 64];
        reserved[..8].copy_from_slice(&(max_size as u64).to_ne_bytes());
        let props = sys::hipMemPoolProps {
            allocType: sys::hipMemAllocationTypePinned,
            handleTypes: sys::hipMemHandleTypeNone,
            location: sys::hipMemLocation {
                type_: sys::hipMemLocationTypeDevice,
                id: ordinal as i32,
            },
            win32SecurityAttributes: std::ptr::null_mut(),
            reserved,
        };
        let mut pool = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer and properties.
            unsafe { function(&mut pool, &props) },
            "hipMemPoolCreate",
        )?;
        Ok(RawMemPool(pool))
    }

    unsafe fn mem_pool_destroy(pool: RawMemPool) -> RawResult {
        let function = optional("hipMemPoolDestroy", |t| t.hipMemPoolDestroy)?;
        // SAFETY: the caller owns the pool and never uses it again.
        ok(unsafe { function(pool.0) }, "hipMemPoolDestroy")
    }

    unsafe fn mem_pool_get_attribute(
        pool: RawMemPool,
        attribute: MemPoolAttribute,
    ) -> RawResult<u64> {
        let t = table("hipMemPoolGetAttribute")?;
        let mut value = 0;
        let (function, name) = (t.hipMemPoolGetAttribute, "hipMemPoolGetAttribute");
        // SAFETY: a live pool (caller).
        unsafe { pool_attribute_call(function, name, pool, attribute, &mut value) }?;
        Ok(value)
    }

    unsafe fn mem_pool_set_attribute(
        pool: RawMemPool,
        attribute: MemPoolAttribute,
        value: u64,
    ) -> RawResult {
        let t = table("hipMemPoolSetAttribute")?;
        let mut value = value;
        let (function, name) = (t.hipMemPoolSetAttribute, "hipMemPoolSetAttribute");
        // SAFETY: a live pool (caller).
        unsafe { pool_attribute_call(function, name, pool, attribute, &mut value) }
    }

    unsafe fn mem_pool_trim_to(pool: RawMemPool, keep: usize) -> RawResult {
        let function = optional("hipMemPoolTrimTo", |t| t.hipMemPoolTrimTo)?;
        // SAFETY: a live pool; trimming never touches live allocations.
        ok(unsafe { function(pool.0, keep) }, "hipMemPoolTrimTo")
    }

    unsafe fn mem_alloc_from_pool_async(
        len: usize,
        pool: RawMemPool,
        s: RawStream,
    ) -> RawResult<DevicePtr> {
        let function = optional("hipMallocFromPoolAsync", |t| t.hipMallocFromPoolAsync)?;
        let ptr = out(std::ptr::null_mut(), "hipMallocFromPoolAsync", |ptr| {
            // SAFETY: valid out-pointer; live pool and stream.
            unsafe { function(ptr, len, pool.0, stream(s)) }
        })?;
        Ok(address(ptr))
    }

    unsafe fn mem_alloc_managed(len: usize) -> RawResult<DevicePtr> {
        let function = optional("hipMallocManaged", |t| t.hipMallocManaged)?;
        let ptr = out(std::ptr::null_mut(), "hipMallocManaged", |ptr| {
            // SAFETY: valid out-pointer.
            unsafe { function(ptr, len, sys::hipMemAttachGlobal) }
        })?;
        Ok(address(ptr))
    }

    unsafe fn host_alloc(len: usize) -> RawResult<*mut u8> {
        let t = table("hipHostMalloc")?;
        let flags = sys::hipHostMallocPortable | sys::hipHostMallocMapped;
        let ptr = out(std::ptr::null_mut(), "hipHostMalloc", |ptr| {
            // SAFETY: valid out-pointer.
            unsafe { (t.hipHostMalloc)(ptr, len, flags) }
        })?;
        Ok(ptr.cast())
    }

    unsafe fn host_free(ptr: *mut u8) -> RawResult {
        call("hipHostFree", |t| {
            // SAFETY: the caller owns the pinned allocation and no queued work uses it.
            unsafe { (t.hipHostFree)(ptr.cast()) }
        })
    }

    unsafe fn host_device_pointer(ptr: *mut u8) -> RawResult<DevicePtr> {
        let t = table("hipHostGetDevicePointer")?;
        let device = out(std::ptr::null_mut(), "hipHostGetDevicePointer", |device| {
            // SAFETY: `ptr` is mapped pinned memory; valid out-pointer; flags must be 0.
            unsafe { (t.hipHostGetDevicePointer)(device, ptr.cast(), 0) }
        })?;
        Ok(address(device))
    }

    unsafe fn memcpy_htod_async(
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        call("hipMemcpyHtoDAsync", |t| {
            // SAFETY: the caller keeps both ranges valid until the copy completes; HIP only
            // reads `src` (its declaration lacks the const).
            unsafe {
                (t.hipMemcpyHtoDAsync)(device_ptr(dst), src.cast_mut().cast(), len, stream(s))
            }
        })
    }

    unsafe fn memcpy_dtoh_async(
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        call("hipMemcpyDtoHAsync", |t| {
            // SAFETY: the caller keeps both ranges valid until the copy completes.
            unsafe { (t.hipMemcpyDtoHAsync)(dst.cast(), device_ptr(src), len, stream(s)) }
        })
    }

    unsafe fn memcpy_dtod_async(
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        call("hipMemcpyDtoDAsync", |t| {
            // SAFETY: the caller keeps both ranges valid until the copy completes.
            unsafe { (t.hipMemcpyDtoDAsync)(device_ptr(dst), device_ptr(src), len, stream(s)) }
        })
    }

    unsafe fn memset_d8_async(dst: DevicePtr, value: u8, len: usize, s: RawStream) -> RawResult {
        call("hipMemsetD8Async", |t| {
            // SAFETY: the caller keeps the range valid until the fill completes.
            unsafe { (t.hipMemsetD8Async)(device_ptr(dst), value, len, stream(s)) }
        })
    }
}

/// `hipMemPoolGetAttribute` (into `value`) or `hipMemPoolSetAttribute` (from `value`), named
/// `name`, of a 64-bit attribute: both take the value through a `void*` to a `uint64_t`.
///
/// # Safety
/// `pool` is a live pool.
unsafe fn pool_attribute_call(
    function: Option<sys::hipMemPoolGetAttribute>,
    name: &'static str,
    pool: RawMemPool,
    attribute: MemPoolAttribute,
    value: &mut u64,
) -> RawResult {
    let function = function.ok_or_else(|| absent(name))?;
    ok(
        // SAFETY: a live pool (caller); every attribute of `MemPoolAttribute` is a 64-bit one,
        // so a pointer to a u64 is the right size.
        unsafe {
            function(
                pool.0,
                attribute as sys::hipMemPoolAttr,
                (value as *mut u64).cast(),
            )
        },
        name,
    )
}
