//! Events.

use super::*;

/// `hipEventCreateWithFlags` → `cuEventCreate` (`hipEventBlockingSync/DisableTiming/
/// Interprocess` are `CU_EVENT_BLOCKING_SYNC/DISABLE_TIMING/INTERPROCESS`).
#[no_mangle]
pub unsafe extern "C" fn hipEventCreateWithFlags(
    event: *mut hipEvent_t,
    flags: c_uint,
) -> hipError_t {
    use sys::CUevent_flags as F;
    enter!();
    let bits = [
        (0x1, F::CU_EVENT_BLOCKING_SYNC as c_uint),
        (0x2, F::CU_EVENT_DISABLE_TIMING as c_uint),
        (0x4, F::CU_EVENT_INTERPROCESS as c_uint),
    ];
    let Some(cu_flags) = translate_flags(flags, &bits) else {
        return hipErrorInvalidValue;
    };
    put_cu!(event, |raw| sys::cuEventCreate(raw, cu_flags))
}

/// `hipEventDestroy` → `cuEventDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipEventDestroy(event: hipEvent_t) -> hipError_t {
    enter_handle!();
    cu!(sys::cuEventDestroy_v2(cu_event(event)))
}

/// `hipEventRecord` → `cuEventRecord`.
#[no_mangle]
pub unsafe extern "C" fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> hipError_t {
    enter!();
    cu!(sys::cuEventRecord(cu_event(event), cu_stream(stream)))
}

/// `hipEventQuery` → `cuEventQuery`.
#[no_mangle]
pub unsafe extern "C" fn hipEventQuery(event: hipEvent_t) -> hipError_t {
    enter_handle!();
    cu!(sys::cuEventQuery(cu_event(event)))
}

/// `hipEventSynchronize` → `cuEventSynchronize`.
#[no_mangle]
pub unsafe extern "C" fn hipEventSynchronize(event: hipEvent_t) -> hipError_t {
    enter_handle!();
    cu!(sys::cuEventSynchronize(cu_event(event)))
}

/// `hipEventElapsedTime` → `cuEventElapsedTime`.
#[no_mangle]
pub unsafe extern "C" fn hipEventElapsedTime(
    ms: *mut f32,
    start: hipEvent_t,
    stop: hipEvent_t,
) -> hipError_t {
    enter_handle!();
    if driver().is_some_and(|d| d.elapsed_v1) {
        cu!(sys::cuEventElapsedTime(ms, cu_event(start), cu_event(stop)))
    } else {
        cu!(sys::cuEventElapsedTime_v2(
            ms,
            cu_event(start),
            cu_event(stop)
        ))
    }
}
