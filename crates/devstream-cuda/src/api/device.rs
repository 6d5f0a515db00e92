//! Devices and contexts: [`CudaApi`]'s part of the raw-call table (`RawDevices`).

use super::*;
use devstream_gpu_common::RawDevices;

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawDevices for CudaApi {
    unsafe fn device_count() -> RawResult<usize> {
        let count = out(0, "cuDeviceGetCount", |count| {
            // SAFETY: valid out-pointer.
            unsafe { sys::cuDeviceGetCount(count) }
        })?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    unsafe fn device_properties(ordinal: usize) -> RawResult<DeviceProperties> {
        // SAFETY: the caller's contract (the table is loaded).
        let device = unsafe { device(ordinal) }?;
        let attribute = |attribute: sys::CUdevice_attribute| {
            out(0, "cuDeviceGetAttribute", |value| {
                // SAFETY: valid out-pointer and device.
                unsafe { sys::cuDeviceGetAttribute(value, attribute, device) }
            })
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
        let version = out(0, "cuDriverGetVersion", |version| {
            // SAFETY: valid out-pointer.
            unsafe { sys::cuDriverGetVersion(version) }
        })?;
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
        // SAFETY: the caller's contract (the table is loaded).
        let device = unsafe { device(ordinal) }?;
        let ctx = out(std::ptr::null_mut(), "cuDevicePrimaryCtxRetain", |ctx| {
            // SAFETY: valid out-pointer and device.
            unsafe { sys::cuDevicePrimaryCtxRetain(ctx, device) }
        })?;
        Ok(RawContext(ctx.cast()))
    }

    #[inline]
    unsafe fn context_current() -> RawResult<RawContext> {
        let ctx = out(std::ptr::null_mut(), "cuCtxGetCurrent", |ctx| {
            // SAFETY: valid out-pointer.
            unsafe { sys::cuCtxGetCurrent(ctx) }
        })?;
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
        out(
            (0, 0),
            "cuCtxGetStreamPriorityRange",
            |(least, greatest)| {
                // SAFETY: valid out-pointers.
                unsafe { sys::cuCtxGetStreamPriorityRange(least, greatest) }
            },
        )
    }

    unsafe fn reset_persisting_l2_cache() -> RawResult {
        ok(
            // SAFETY: a context is current (caller).
            unsafe { sys::cuCtxResetPersistingL2Cache() },
            "cuCtxResetPersistingL2Cache",
        )
    }
}

/// The driver's handle of device `ordinal` (the driver checks the ordinal).
///
/// # Safety
/// As for every call of the table: `load` returned Ok.
unsafe fn device(ordinal: usize) -> RawResult<sys::CUdevice> {
    out(0, "cuDeviceGet", |device| {
        // SAFETY: valid out-pointer; the ordinal is checked by the driver.
        unsafe { sys::cuDeviceGet(device, ordinal as i32) }
    })
}
