//! Stream capture.

use super::*;

/// `hipStreamBeginCapture` → `cuStreamBeginCapture` (modes have the same values).
#[no_mangle]
pub unsafe extern "C" fn hipStreamBeginCapture(stream: hipStream_t, mode: c_int) -> hipError_t {
    enter!();
    let Some(cu_mode) = capture_mode(mode) else {
        return hipErrorInvalidValue;
    };
    cu!(sys::cuStreamBeginCapture_v2(cu_stream(stream), cu_mode))
}

/// `hipStreamEndCapture` → `cuStreamEndCapture`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamEndCapture(
    stream: hipStream_t,
    graph: *mut hipGraph_t,
) -> hipError_t {
    enter!();
    let mut raw = std::ptr::null_mut();
    let status = cu!(sys::cuStreamEndCapture(cu_stream(stream), &mut raw));
    // The graph is written on failure too (null for an invalidated capture), as CUDA does.
    put(graph, raw.cast());
    status
}

/// `hipStreamIsCapturing` → `cuStreamIsCapturing`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamIsCapturing(
    stream: hipStream_t,
    status: *mut c_int,
) -> hipError_t {
    enter!();
    let mut cu_status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    try_cu!(sys::cuStreamIsCapturing(cu_stream(stream), &mut cu_status));
    put(status, cu_status as c_int)
}

/// `hipStreamGetCaptureInfo` → `cuStreamGetCaptureInfo` (status and id).
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetCaptureInfo(
    stream: hipStream_t,
    status: *mut c_int,
    id: *mut c_ulonglong,
) -> hipError_t {
    let none = std::ptr::null_mut();
    // SAFETY: the caller's contract, which `_v2` shares; it skips the null out-pointers.
    unsafe { hipStreamGetCaptureInfo_v2(stream, status, id, none, none.cast(), none.cast()) }
}

/// `hipStreamGetCaptureInfo_v2` → `cuStreamGetCaptureInfo` (with graph and dependencies; null
/// out-pointers are skipped).
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetCaptureInfo_v2(
    stream: hipStream_t,
    status: *mut c_int,
    id: *mut c_ulonglong,
    graph: *mut hipGraph_t,
    dependencies: *mut *const hipGraphNode_t,
    count: *mut usize,
) -> hipError_t {
    enter!();
    let Some(driver) = driver() else {
        return hipErrorInsufficientDriver;
    };
    let mut cu_status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut cu_id = 0;
    let mut cu_graph = std::ptr::null_mut();
    let mut cu_dependencies: *const sys::CUgraphNode = std::ptr::null();
    let mut cu_count = 0usize;
    if driver.capture_info_v2 {
        try_cu!(sys::cuStreamGetCaptureInfo_v2(
            cu_stream(stream),
            &mut cu_status,
            &mut cu_id,
            &mut cu_graph,
            &mut cu_dependencies,
            &mut cu_count
        ));
    } else {
        let mut edges: *const sys::CUgraphEdgeData = std::ptr::null();
        try_cu!(sys::cuStreamGetCaptureInfo_v3(
            cu_stream(stream),
            &mut cu_status,
            &mut cu_id,
            &mut cu_graph,
            &mut cu_dependencies,
            &mut edges,
            &mut cu_count
        ));
    }
    put(status, cu_status as c_int);
    if !id.is_null() {
        put(id, cu_id);
    }
    if !graph.is_null() {
        put(graph, cu_graph.cast());
    }
    if !dependencies.is_null() {
        put(dependencies, cu_dependencies.cast());
    }
    if !count.is_null() {
        put(count, cu_count);
    }
    hipSuccess
}

/// `hipStreamUpdateCaptureDependencies` → `cuStreamUpdateCaptureDependencies` (add = 0,
/// set = 1 in both).
#[no_mangle]
pub unsafe extern "C" fn hipStreamUpdateCaptureDependencies(
    stream: hipStream_t,
    dependencies: *mut hipGraphNode_t,
    count: usize,
    flags: c_uint,
) -> hipError_t {
    enter!();
    if flags > 1 {
        return hipErrorInvalidValue;
    }
    cu!(sys::cuStreamUpdateCaptureDependencies(
        cu_stream(stream),
        dependencies.cast(),
        count,
        flags
    ))
}

/// `hipThreadExchangeStreamCaptureMode` → `cuThreadExchangeStreamCaptureMode`.
#[no_mangle]
pub unsafe extern "C" fn hipThreadExchangeStreamCaptureMode(mode: *mut c_int) -> hipError_t {
    enter!();
    if mode.is_null() {
        return hipErrorInvalidValue;
    }
    // SAFETY: non-null, and the HIP contract makes it valid for reads and writes.
    let Some(mut cu_mode) = capture_mode(unsafe { mode.read() }) else {
        return hipErrorInvalidValue;
    };
    try_cu!(sys::cuThreadExchangeStreamCaptureMode(&mut cu_mode));
    put(mode, cu_mode as c_int)
}
