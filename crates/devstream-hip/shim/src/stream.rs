//! Streams: creation, ordering, host functions and callbacks, stream memory operations.

use super::*;

/// `hipStreamCreateWithPriority` → `cuStreamCreateWithPriority` (`hipStreamNonBlocking` is
/// `CU_STREAM_NON_BLOCKING`).
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreateWithPriority(
    stream: *mut hipStream_t,
    flags: c_uint,
    priority: c_int,
) -> hipError_t {
    enter!();
    // CU_STREAM_DEFAULT is 0: no bit.
    let bits = [(1, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as c_uint)];
    let Some(cu_flags) = translate_flags(flags, &bits) else {
        return hipErrorInvalidValue;
    };
    put_cu!(stream, |raw| sys::cuStreamCreateWithPriority(
        raw, cu_flags, priority
    ))
}

/// `hipStreamDestroy` → `cuStreamDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamDestroy(stream: hipStream_t) -> hipError_t {
    enter!();
    cu!(sys::cuStreamDestroy_v2(cu_stream(stream)))
}

/// `hipStreamQuery` → `cuStreamQuery`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamQuery(stream: hipStream_t) -> hipError_t {
    enter_handle!(stream);
    cu!(sys::cuStreamQuery(cu_stream(stream)))
}

/// `hipStreamSynchronize` → `cuStreamSynchronize`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamSynchronize(stream: hipStream_t) -> hipError_t {
    enter_handle!(stream);
    cu!(sys::cuStreamSynchronize(cu_stream(stream)))
}

/// `hipStreamWaitEvent` → `cuStreamWaitEvent`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWaitEvent(
    stream: hipStream_t,
    event: hipEvent_t,
    flags: c_uint,
) -> hipError_t {
    enter_handle!(stream);
    cu!(sys::cuStreamWaitEvent(
        cu_stream(stream),
        cu_event(event),
        flags
    ))
}

/// `hipStreamGetPriority` → `cuStreamGetPriority`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetPriority(
    stream: hipStream_t,
    priority: *mut c_int,
) -> hipError_t {
    enter!();
    cu!(sys::cuStreamGetPriority(cu_stream(stream), priority))
}

/// `hipStreamGetFlags` → `cuStreamGetFlags`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetFlags(stream: hipStream_t, flags: *mut c_uint) -> hipError_t {
    enter!();
    cu!(sys::cuStreamGetFlags(cu_stream(stream), flags))
}

/// `hipGetStreamDeviceId`: the device of the stream's context (the current device for the
/// null and per-thread streams); -1 on error.
#[no_mangle]
pub unsafe extern "C" fn hipGetStreamDeviceId(stream: hipStream_t) -> c_int {
    if enter().is_err() {
        return -1;
    }
    let mut ctx = std::ptr::null_mut();
    if cu!(sys::cuStreamGetCtx(cu_stream(stream), &mut ctx)) != hipSuccess {
        return -1;
    }
    if let Ok(cache) = PRIMARY.lock() {
        if let Some(index) = cache
            .iter()
            .position(|c| *c == Some(ctx.expose_provenance()))
        {
            return index as c_int;
        }
    }
    // Not a primary context we retained: ask the driver with that context current.
    let mut previous = std::ptr::null_mut();
    if cu!(sys::cuCtxGetCurrent(&mut previous)) != hipSuccess
        || cu!(sys::cuCtxSetCurrent(ctx)) != hipSuccess
    {
        return -1;
    }
    let mut device = -1;
    let status = cu!(sys::cuCtxGetDevice(&mut device));
    let _ = cu!(sys::cuCtxSetCurrent(previous));
    if status == hipSuccess {
        device
    } else {
        -1
    }
}

/// `hipLaunchHostFunc` → `cuLaunchHostFunc` (same callback signature).
#[no_mangle]
pub unsafe extern "C" fn hipLaunchHostFunc(
    stream: hipStream_t,
    function: hipHostFn_t,
    user_data: *mut c_void,
) -> hipError_t {
    enter_handle!(stream);
    cu!(sys::cuLaunchHostFunc(
        cu_stream(stream),
        function,
        user_data
    ))
}

struct Callback {
    function: unsafe extern "C" fn(hipStream_t, hipError_t, *mut c_void),
    user_data: *mut c_void,
}

unsafe extern "C" fn callback_trampoline(
    stream: sys::CUstream,
    status: sys::CUresult,
    data: *mut c_void,
) {
    // SAFETY: `data` is the `Box<Callback>` leaked by `hipStreamAddCallback`; the driver calls
    // each callback exactly once.
    let callback = unsafe { Box::from_raw(data.cast::<Callback>()) };
    // SAFETY: the HIP callback's contract: it receives its stream, the status and its data.
    unsafe { (callback.function)(stream.cast(), hip_status(status), callback.user_data) };
}

/// `hipStreamAddCallback` → `cuStreamAddCallback`, with the status converted to `hipError_t`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamAddCallback(
    stream: hipStream_t,
    callback: hipStreamCallback_t,
    user_data: *mut c_void,
    flags: c_uint,
) -> hipError_t {
    enter_handle!(stream);
    let Some(function) = callback else {
        return hipErrorInvalidValue;
    };
    let data = Box::into_raw(Box::new(Callback {
        function,
        user_data,
    }));
    let status = cu!(sys::cuStreamAddCallback(
        cu_stream(stream),
        Some(callback_trampoline),
        data.cast(),
        flags
    ));
    if status != hipSuccess {
        // SAFETY: the driver refused the callback, so the box was not handed over.
        drop(unsafe { Box::from_raw(data) });
    }
    status
}

/// `hipStreamWaitValue64` → `cuStreamWaitValue64` (`hipStreamWaitValueGte/Eq/And/Nor` are
/// `CU_STREAM_WAIT_VALUE_GEQ/EQ/AND/NOR`); CUDA has no mask, so only the full mask is accepted,
/// as on HIP's NVIDIA platform.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWaitValue64(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
    mask: u64,
) -> hipError_t {
    use sys::CUstreamWaitValue_flags as F;
    enter_handle!(stream);
    if mask != u64::MAX {
        return hipErrorNotSupported;
    }
    let cu_flags = match flags {
        0 => F::CU_STREAM_WAIT_VALUE_GEQ,
        1 => F::CU_STREAM_WAIT_VALUE_EQ,
        2 => F::CU_STREAM_WAIT_VALUE_AND,
        3 => F::CU_STREAM_WAIT_VALUE_NOR,
        _ => return hipErrorInvalidValue,
    } as c_uint;
    cu!(sys::cuStreamWaitValue64_v2(
        cu_stream(stream),
        cu_ptr(ptr),
        value,
        cu_flags
    ))
}

/// `hipStreamWriteValue64` → `cuStreamWriteValue64`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWriteValue64(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
) -> hipError_t {
    enter_handle!(stream);
    if flags != 0 {
        return hipErrorInvalidValue;
    }
    cu!(sys::cuStreamWriteValue64_v2(
        cu_stream(stream),
        cu_ptr(ptr),
        value,
        sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as c_uint
    ))
}

/// `hipStreamAttachMemAsync` → `cuStreamAttachMemAsync` (see [`mem_attach`]).
#[no_mangle]
pub unsafe extern "C" fn hipStreamAttachMemAsync(
    stream: hipStream_t,
    dev_ptr: *mut c_void,
    length: usize,
    flags: c_uint,
) -> hipError_t {
    enter!();
    let Some(cu_flags) = mem_attach(flags) else {
        return hipErrorInvalidValue;
    };
    cu!(sys::cuStreamAttachMemAsync(
        cu_stream(stream),
        cu_ptr(dev_ptr),
        length,
        cu_flags
    ))
}
