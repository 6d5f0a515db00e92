//! Device, managed and pinned host memory, and copies: [`CudaApi`]'s part of the raw-call table (`RawMemory`).

use super::*;
use devstream_gpu_common::RawMemory;

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
