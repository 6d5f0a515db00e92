//! Streams: creation, ordering, host functions, stream memory operations and attributes: [`CudaApi`]'s part of the raw-call table (`RawStreams`).

use super::*;
use devstream_gpu_common::RawStreams;

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawStreams for CudaApi {
    unsafe fn stream_create(non_blocking: bool, priority: i32) -> RawResult<RawStream> {
        let mut raw = std::ptr::null_mut();
        let flags = if non_blocking {
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32
        } else {
            sys::CUstream_flags::CU_STREAM_DEFAULT as u32
        };
        ok(
            // SAFETY: valid out-pointer; a context is current (caller).
            unsafe { sys::cuStreamCreateWithPriority(&mut raw, flags, priority) },
            "cuStreamCreateWithPriority",
        )?;
        Ok(RawStream(raw.cast()))
    }

    unsafe fn stream_destroy(s: RawStream) -> RawResult {
        ok(
            // SAFETY: the caller owns the stream.
            unsafe { sys::cuStreamDestroy_v2(stream(s)) },
            "cuStreamDestroy",
        )
    }

    #[inline]
    unsafe fn stream_query(s: RawStream) -> RawResult {
        // SAFETY: live stream (caller).
        ok(unsafe { sys::cuStreamQuery(stream(s)) }, "cuStreamQuery")
    }

    #[inline]
    unsafe fn stream_synchronize(s: RawStream) -> RawResult {
        ok(
            // SAFETY: live stream (caller).
            unsafe { sys::cuStreamSynchronize(stream(s)) },
            "cuStreamSynchronize",
        )
    }

    #[inline]
    unsafe fn stream_wait_event(s: RawStream, e: RawEvent) -> RawResult {
        ok(
            // SAFETY: live stream and event (caller).
            unsafe { sys::cuStreamWaitEvent(stream(s), event(e), 0) },
            "cuStreamWaitEvent",
        )
    }

    unsafe fn stream_priority(s: RawStream) -> RawResult<i32> {
        out(0, "cuStreamGetPriority", |priority| {
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamGetPriority(stream(s), priority) }
        })
    }

    unsafe fn stream_flags(s: RawStream) -> RawResult<u32> {
        out(0, "cuStreamGetFlags", |flags| {
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamGetFlags(stream(s), flags) }
        })
    }

    unsafe fn stream_id(s: RawStream) -> RawResult<u64> {
        out(0, "cuStreamGetId", |id| {
            // SAFETY: live stream, valid out-pointer; present per `supports`.
            unsafe { sys::cuStreamGetId(stream(s), id) }
        })
    }

    unsafe fn stream_device(s: RawStream) -> RawResult<usize> {
        let device = out(0, "cuStreamGetDevice", |device| {
            // SAFETY: live stream, valid out-pointer; present per `supports`.
            unsafe { sys::cuStreamGetDevice(stream(s), device) }
        })?;
        Ok(usize::try_from(device).unwrap_or(0))
    }

    #[inline]
    unsafe fn launch_host_func(
        s: RawStream,
        callback: HostCallback,
        user_data: *mut c_void,
    ) -> RawResult {
        ok(
            // SAFETY: live stream; the callback and its data follow cuLaunchHostFunc's contract
            // (caller).
            unsafe { sys::cuLaunchHostFunc(stream(s), Some(callback), user_data) },
            "cuLaunchHostFunc",
        )
    }

    unsafe fn stream_add_callback(
        s: RawStream,
        callback: StreamCallback,
        user_data: *mut c_void,
    ) -> RawResult {
        type Native = unsafe extern "C" fn(sys::CUstream, sys::CUresult, *mut c_void);
        // SAFETY: `StreamCallback` has the same C ABI: RawStream is a transparent pointer and
        // the status is a 32-bit value read as i32.
        let native: Native = unsafe { std::mem::transmute::<StreamCallback, Native>(callback) };
        ok(
            // SAFETY: live stream; the callback follows cuStreamAddCallback's contract (caller).
            unsafe { sys::cuStreamAddCallback(stream(s), Some(native), user_data, 0) },
            "cuStreamAddCallback",
        )
    }

    unsafe fn stream_wait_value64(s: RawStream, address: DevicePtr, value: u64) -> RawResult {
        ok(
            // SAFETY: live stream, device-visible address (caller); present per `supports`.
            unsafe {
                sys::cuStreamWaitValue64_v2(
                    stream(s),
                    address,
                    value,
                    sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
                )
            },
            "cuStreamWaitValue64",
        )
    }

    unsafe fn stream_write_value64(s: RawStream, address: DevicePtr, value: u64) -> RawResult {
        ok(
            // SAFETY: live stream, device-visible address (caller); present per `supports`.
            unsafe {
                sys::cuStreamWriteValue64_v2(
                    stream(s),
                    address,
                    value,
                    sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
                )
            },
            "cuStreamWriteValue64",
        )
    }

    unsafe fn stream_set_attribute(s: RawStream, attribute: StreamAttribute) -> RawResult {
        // SAFETY: an all-zero union is a valid value of every member.
        let mut value: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
        match attribute {
            StreamAttribute::AccessPolicyWindow(w) => {
                value.accessPolicyWindow = sys::CUaccessPolicyWindow {
                    base_ptr: std::ptr::with_exposed_provenance_mut(w.base_ptr as usize),
                    num_bytes: w.num_bytes,
                    hitRatio: w.hit_ratio,
                    hitProp: access_property(w.hit_prop),
                    missProp: access_property(w.miss_prop),
                }
            }
            StreamAttribute::SyncPolicy(p) => value.syncPolicy = sync_policy(p),
            StreamAttribute::Priority(p) => value.priority = p,
        }
        ok(
            // SAFETY: live stream; `value` holds the member the attribute id selects.
            unsafe { sys::cuStreamSetAttribute(stream(s), attribute_id(attribute.id()), &value) },
            "cuStreamSetAttribute",
        )
    }

    unsafe fn stream_get_attribute(
        s: RawStream,
        id: StreamAttributeId,
    ) -> RawResult<StreamAttribute> {
        // SAFETY: an all-zero union is a valid value of every member.
        let zeroed: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
        let value = out(zeroed, "cuStreamGetAttribute", |value| {
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamGetAttribute(stream(s), attribute_id(id), value) }
        })?;
        // SAFETY: the driver wrote the member selected by `id`.
        Ok(unsafe {
            match id {
                StreamAttributeId::AccessPolicyWindow => {
                    let w = value.accessPolicyWindow;
                    StreamAttribute::AccessPolicyWindow(AccessPolicyWindow {
                        base_ptr: w.base_ptr.expose_provenance() as u64,
                        num_bytes: w.num_bytes,
                        hit_ratio: w.hitRatio,
                        hit_prop: access_property_back(w.hitProp),
                        miss_prop: access_property_back(w.missProp),
                    })
                }
                StreamAttributeId::SyncPolicy => {
                    StreamAttribute::SyncPolicy(sync_policy_back(value.syncPolicy))
                }
                StreamAttributeId::Priority => StreamAttribute::Priority(value.priority),
            }
        })
    }

    unsafe fn stream_copy_attributes(dst: RawStream, src: RawStream) -> RawResult {
        ok(
            // SAFETY: live streams of one context (caller).
            unsafe { sys::cuStreamCopyAttributes(stream(dst), stream(src)) },
            "cuStreamCopyAttributes",
        )
    }

    unsafe fn stream_attach_mem_async(
        s: RawStream,
        address: DevicePtr,
        len: usize,
        attach: MemAttach,
    ) -> RawResult {
        let flags = match attach {
            MemAttach::Global => sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL,
            MemAttach::Host => sys::CUmemAttach_flags::CU_MEM_ATTACH_HOST,
            MemAttach::Single => sys::CUmemAttach_flags::CU_MEM_ATTACH_SINGLE,
        } as u32;
        ok(
            // SAFETY: live stream; managed memory (caller).
            unsafe { sys::cuStreamAttachMemAsync(stream(s), address, len, flags) },
            "cuStreamAttachMemAsync",
        )
    }
}
