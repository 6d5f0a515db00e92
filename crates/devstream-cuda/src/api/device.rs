//! Devices and contexts: [`CudaApi`]'s part of the raw-call table (`RawDevices`).

use super::*;
use devstream_gpu_common::RawDevices;

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawDevices for CudaApi {
    unsafe fn device_count() -> RawResult<usize> {
        let mut count = 0;
        ok(
            // SAFETY: valid out-pointer.
            unsafe { sys::cuDeviceGetCount(&mut count) },
            "cuDeviceGetCount",
        )?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    unsafe fn device_properties(ordinal: usize) -> RawResult<DeviceProperties> {
        let mut device = 0;
        ok(
            // SAFETY: valid out-pointer; the ordinal is checked by the driver.
            unsafe { sys::cuDeviceGet(&mut device, ordinal as i32) },
            "cuDeviceGet",
        )?;
        let attribute = |attribute: sys::CUdevice_attribute| -> RawResult<i32> {
            let mut value = 0;
            ok(
                // SAFETY: valid out-pointer and device.
                unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, device) },
                "cuDeviceGetAttribute",
            )?;
            Ok(value)
        };
        use sys::CUdevice_attribute as At;
        let mut name = [0 as c_char; 256];
        ok(
            // SAFETY: the buffer holds 256 bytes.
            unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device) },
            "cuDeviceGetName",
        )?;
        // SAFETY: the driver wrote a NUL-terminated name into the buffer.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut version = 0;
        ok(
            // SAFETY: valid out-pointer.
            unsafe { sys::cuDriverGetVersion(&mut version) },
            "cuDriverGetVersion",
        )?;
        // Flags use the 64-bit stream memory operations: CUDA 12 reports them with
        // CAN_USE_64_BIT_STREAM_MEM_OPS; 11.7/11.8 need the v1 attributes.
        let stream_mem_ops = if version >= 12000 {
            attribute(At::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)? != 0
        } else {
            attribute(At::CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1)? != 0
                && attribute(At::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1)? != 0
        };
        Ok(DeviceProperties {
            name,
            compute_capability: (
                attribute(At::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attribute(At::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            memory_pools: attribute(At::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0,
            can_map_host_memory: attribute(At::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)? != 0,
            stream_mem_ops,
            stream_priorities: attribute(At::CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED)? != 0,
            managed_memory: attribute(At::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)? != 0,
        })
    }

    unsafe fn primary_context(ordinal: usize) -> RawResult<RawContext> {
        let mut device = 0;
        ok(
            // SAFETY: valid out-pointer.
            unsafe { sys::cuDeviceGet(&mut device, ordinal as i32) },
            "cuDeviceGet",
        )?;
        let mut ctx = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer and device.
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, device) },
            "cuDevicePrimaryCtxRetain",
        )?;
        Ok(RawContext(ctx.cast()))
    }

    #[inline]
    unsafe fn context_current() -> RawResult<RawContext> {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        ok(unsafe { sys::cuCtxGetCurrent(&mut ctx) }, "cuCtxGetCurrent")?;
        Ok(RawContext(ctx.cast()))
    }

    unsafe fn context_set_current(ctx: RawContext) -> RawResult {
        ok(
            // SAFETY: the caller passes a live context.
            unsafe { sys::cuCtxSetCurrent(ctx.0.cast()) },
            "cuCtxSetCurrent",
        )
    }

    unsafe fn priority_range() -> RawResult<(i32, i32)> {
        let (mut least, mut greatest) = (0, 0);
        ok(
            // SAFETY: valid out-pointers.
            unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) },
            "cuCtxGetStreamPriorityRange",
        )?;
        Ok((least, greatest))
    }

    unsafe fn reset_persisting_l2_cache() -> RawResult {
        ok(
            // SAFETY: a context is current (caller).
            unsafe { sys::cuCtxResetPersistingL2Cache() },
            "cuCtxResetPersistingL2Cache",
        )
    }
}
