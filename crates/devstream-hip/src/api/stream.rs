//! Streams: creation, ordering, host functions, stream memory operations and attributes: [`HipApi`]'s part of the raw-call table (`RawStreams`).

use super::*;
use devstream_gpu_common::RawStreams;

// SAFETY: every function forwards to the HIP runtime call of the same meaning as the CUDA call
// named in RawApi's documentation, with the same contract; optional calls check their symbol
// (the shared layer also checks `supports` first); nothing is called before `load` returned Ok.
unsafe impl RawStreams for HipApi {
    unsafe fn stream_create(non_blocking: bool, priority: i32) -> RawResult<RawStream> {
        let t = table("hipStreamCreateWithPriority")?;
        let flags = if non_blocking {
            sys::hipStreamNonBlocking
        } else {
            sys::hipStreamDefault
        };
        let raw = out(std::ptr::null_mut(), "hipStreamCreateWithPriority", |raw| {
            // SAFETY: valid out-pointer; the caller selected the device.
            unsafe { (t.hipStreamCreateWithPriority)(raw, flags, priority) }
        })?;
        Ok(RawStream(raw))
    }

    unsafe fn stream_destroy(s: RawStream) -> RawResult {
        call("hipStreamDestroy", |t| {
            // SAFETY: the caller owns the stream.
            unsafe { (t.hipStreamDestroy)(stream(s)) }
        })
    }

    #[inline]
    unsafe fn stream_query(s: RawStream) -> RawResult {
        call("hipStreamQuery", |t| {
            // SAFETY: live stream (caller).
            unsafe { (t.hipStreamQuery)(stream(s)) }
        })
    }

    #[inline]
    unsafe fn stream_synchronize(s: RawStream) -> RawResult {
        call("hipStreamSynchronize", |t| {
            // SAFETY: live stream (caller).
            unsafe { (t.hipStreamSynchronize)(stream(s)) }
        })
    }

    #[inline]
    unsafe fn stream_wait_event(s: RawStream, e: RawEvent) -> RawResult {
        call("hipStreamWaitEvent", |t| {
            // SAFETY: live stream and event (caller); flags must be 0.
            unsafe { (t.hipStreamWaitEvent)(stream(s), event(e), 0) }
        })
    }

    unsafe fn stream_priority(s: RawStream) -> RawResult<i32> {
        let t = table("hipStreamGetPriority")?;
        out(0, "hipStreamGetPriority", |priority| {
            // SAFETY: live stream; valid out-pointer.
            unsafe { (t.hipStreamGetPriority)(stream(s), priority) }
        })
    }

    unsafe fn stream_flags(s: RawStream) -> RawResult<u32> {
        let t = table("hipStreamGetFlags")?;
        out(0, "hipStreamGetFlags", |flags| {
            // SAFETY: live stream; valid out-pointer.
            unsafe { (t.hipStreamGetFlags)(stream(s), flags) }
        })
    }

    unsafe fn stream_id(_s: RawStream) -> RawResult<u64> {
        Err(absent("hipStreamGetId"))
    }

    unsafe fn stream_device(s: RawStream) -> RawResult<usize> {
        let function = optional("hipGetStreamDeviceId", |t| t.hipGetStreamDeviceId)?;
        // SAFETY: live stream (caller).
        let device = unsafe { function(stream(s)) };
        usize::try_from(device).map_err(|_| RawError {
            code: sys::hipErrorInvalidHandle,
            call: "hipGetStreamDeviceId",
        })
    }

    #[inline]
    unsafe fn launch_host_func(
        s: RawStream,
        callback: HostCallback,
        user_data: *mut c_void,
    ) -> RawResult {
        let function = optional("hipLaunchHostFunc", |t| t.hipLaunchHostFunc)?;
        ok(
            // SAFETY: live stream; the callback owns `user_data` per the caller's contract.
            unsafe { function(stream(s), Some(callback), user_data) },
            "hipLaunchHostFunc",
        )
    }

    unsafe fn stream_add_callback(
        s: RawStream,
        callback: StreamCallback,
        user_data: *mut c_void,
    ) -> RawResult {
        let function = optional("hipStreamAddCallback", |t| t.hipStreamAddCallback)?;
        type Native = unsafe extern "C" fn(sys::hipStream_t, sys::hipError_t, *mut c_void);
        // SAFETY: `RawStream` is a transparent `*mut c_void` and the status is the 32-bit
        // `hipError_t`, so both signatures have the same C ABI.
        let native: Native = unsafe { std::mem::transmute::<StreamCallback, Native>(callback) };
        ok(
            // SAFETY: live stream; flags must be 0.
            unsafe { function(stream(s), Some(native), user_data, 0) },
            "hipStreamAddCallback",
        )
    }

    unsafe fn stream_wait_value64(s: RawStream, address: DevicePtr, value: u64) -> RawResult {
        let function = optional("hipStreamWaitValue64", |t| t.hipStreamWaitValue64)?;
        ok(
            // SAFETY: live stream; the address is a mapped pinned 8-byte word kept alive by the
            // caller; the full mask compares the whole word.
            unsafe {
                function(
                    stream(s),
                    device_ptr(address),
                    value,
                    sys::hipStreamWaitValueGte,
                    u64::MAX,
                )
            },
            "hipStreamWaitValue64",
        )
    }

    unsafe fn stream_write_value64(s: RawStream, address: DevicePtr, value: u64) -> RawResult {
        let function = optional("hipStreamWriteValue64", |t| t.hipStreamWriteValue64)?;
        ok(
            // SAFETY: as for the wait.
            unsafe { function(stream(s), device_ptr(address), value, 0) },
            "hipStreamWriteValue64",
        )
    }

    unsafe fn stream_set_attribute(_s: RawStream, _attribute: StreamAttribute) -> RawResult {
        Err(absent("hipStreamSetAttribute"))
    }

    unsafe fn stream_get_attribute(
        _s: RawStream,
        _id: StreamAttributeId,
    ) -> RawResult<StreamAttribute> {
        Err(absent("hipStreamGetAttribute"))
    }

    unsafe fn stream_copy_attributes(_dst: RawStream, _src: RawStream) -> RawResult {
        Err(absent("hipStreamCopyAttributes"))
    }

    unsafe fn stream_attach_mem_async(
        s: RawStream,
        address: DevicePtr,
        len: usize,
        attach: MemAttach,
    ) -> RawResult {
        let function = optional("hipStreamAttachMemAsync", |t| t.hipStreamAttachMemAsync)?;
        let flags = match attach {
            MemAttach::Global => sys::hipMemAttachGlobal,
            MemAttach::Host => sys::hipMemAttachHost,
            MemAttach::Single => sys::hipMemAttachSingle,
        };
        ok(
            // SAFETY: live stream; managed memory of `len` bytes (caller).
            unsafe { function(stream(s), device_ptr(address), len, flags) },
            "hipStreamAttachMemAsync",
        )
    }
}
