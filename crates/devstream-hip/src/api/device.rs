//! Devices and contexts: [`HipApi`]'s part of the raw-call table (`RawDevices`).

use super::*;
use devstream_gpu_common::RawDevices;

// SAFETY: every function forwards to the HIP runtime call of the same meaning as the CUDA call
// named in RawApi's documentation, with the same contract; optional calls check their symbol
// (the shared layer also checks `supports` first); nothing is called before `load` returned Ok.
unsafe impl RawDevices for HipApi {
    unsafe fn device_count() -> RawResult<usize> {
        let t = table("hipGetDeviceCount")?;
        let count = out(0, "hipGetDeviceCount", |count| {
            // SAFETY: valid out-pointer.
            unsafe { (t.hipGetDeviceCount)(count) }
        })?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    unsafe fn device_properties(ordinal: usize) -> RawResult<DeviceProperties> {
        let t = table("hipDeviceGetAttribute")?;
        let device = c_int::try_from(ordinal).map_err(|_| RawError {
            code: sys::hipErrorInvalidDevice,
            call: "hipDeviceGetAttribute",
        })?;
        let attribute = |attribute: sys::hipDeviceAttribute_t| -> RawResult<c_int> {
            out(0, "hipDeviceGetAttribute", |value| {
                // SAFETY: valid out-pointer; the runtime checks the device and the attribute.
                unsafe { (t.hipDeviceGetAttribute)(value, attribute, device) }
            })
        };
        // An attribute an older runtime does not know reads as "no".
        let flag = |id: sys::hipDeviceAttribute_t| attribute(id).map(|v| v != 0).unwrap_or(false);
        let mut name = [0 as c_char; 256];
        ok(
            // SAFETY: the buffer holds 256 bytes.
            unsafe { (t.hipDeviceGetName)(name.as_mut_ptr(), name.len() as c_int, device) },
            "hipDeviceGetName",
        )?;
        let name = c_string(name.as_ptr()).unwrap_or_default();
        Ok(DeviceProperties {
            name,
            compute_capability: (
                attribute(sys::hipDeviceAttributeComputeCapabilityMajor)?,
                attribute(sys::hipDeviceAttributeComputeCapabilityMinor)?,
            ),
            memory_pools: flag(sys::hipDeviceAttributeMemoryPoolsSupported),
            can_map_host_memory: flag(sys::hipDeviceAttributeCanMapHostMemory),
            stream_mem_ops: flag(sys::hipDeviceAttributeCanUseStreamWaitValue),
            // HIP has no attribute for it; the priority range decides (a range of one value
            // means no priorities).
            stream_priorities: true,
            managed_memory: flag(sys::hipDeviceAttributeManagedMemory),
        })
    }

    unsafe fn primary_context(ordinal: usize) -> RawResult<RawContext> {
        let device = c_int::try_from(ordinal).map_err(|_| RawError {
            code: sys::hipErrorInvalidDevice,
            call: "hipSetDevice",
        })?;
        Ok(device_token(device))
    }

    #[inline]
    unsafe fn context_current() -> RawResult<RawContext> {
        let t = table("hipGetDevice")?;
        let device = out(0, "hipGetDevice", |device| {
            // SAFETY: valid out-pointer.
            unsafe { (t.hipGetDevice)(device) }
        })?;
        Ok(device_token(device))
    }

    unsafe fn context_set_current(ctx: RawContext) -> RawResult {
        call("hipSetDevice", |t| {
            // SAFETY: the token names a device ordinal; the runtime checks it.
            unsafe { (t.hipSetDevice)(token_device(ctx)) }
        })
    }

    unsafe fn priority_range() -> RawResult<(i32, i32)> {
        let t = table("hipDeviceGetStreamPriorityRange")?;
        out(
            (0, 0),
            "hipDeviceGetStreamPriorityRange",
            |(least, greatest)| {
                // SAFETY: valid out-pointers.
                unsafe { (t.hipDeviceGetStreamPriorityRange)(least, greatest) }
            },
        )
    }

    unsafe fn reset_persisting_l2_cache() -> RawResult {
        Err(absent("hipCtxResetPersistingL2Cache"))
    }
}
