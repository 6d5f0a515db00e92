//! Device, managed and pinned host memory, and copies: [`HipApi`]'s part of the raw-call table (`RawMemory`).

use super::*;
use devstream_gpu_common::RawMemory;

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
        let mut ptr = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer.
            unsafe {
                (t.hipHostMalloc)(
                    &mut ptr,
                    len,
                    sys::hipHostMallocPortable | sys::hipHostMallocMapped,
                )
            },
            "hipHostMalloc",
        )?;
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
