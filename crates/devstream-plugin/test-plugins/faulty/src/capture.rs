//! The graph-capture functions of the modes that fill Paddle 3.3's table: captures whose
//! reported id changes or is forgotten, begins answered with a warning, and graphs that keep the
//! callbacks captured into them.

use super::*;

/// [`MODE_CAPTURE_ID_CHANGES`]: the stream capturing (its handle) and how many times
/// `cuda_stream_capture_info` reported its capture.
pub(crate) static ID_CHANGING_CAPTURE: Mutex<Option<(usize, u64)>> = Mutex::new(None);

pub(crate) unsafe extern "C" fn id_changing_begin_capture(
    _device: C_Device,
    stream: C_Stream,
    _mode: C_StreamCaptureMode,
) -> C_Status {
    let mut capture = lock(&ID_CHANGING_CAPTURE);
    if capture.is_some() {
        return C_ERROR;
    }
    *capture = Some((stream as usize, 0));
    C_SUCCESS
}

pub(crate) unsafe extern "C" fn id_changing_end_capture(
    _device: C_Device,
    stream: C_Stream,
    graph: *mut C_CudaGraph,
) -> C_Status {
    let mut capture = lock(&ID_CHANGING_CAPTURE);
    if graph.is_null() || !capture.is_some_and(|(s, _)| s == stream as usize) {
        return C_ERROR;
    }
    *capture = None;
    // SAFETY: a non-null out-parameter; a dummy graph (nothing is recorded).
    unsafe { *graph = std::ptr::NonNull::dangling().as_ptr() };
    C_SUCCESS
}

/// The modes whose capture functions are the id-changing ones (each varies them).
pub(crate) fn capture_mode(mode: u32) -> bool {
    matches!(
        mode,
        MODE_CAPTURE_ID_CHANGES
            | MODE_CAPTURE_QUEUED_CALLBACKS
            | MODE_CAPTURE_SHARED_STREAMS
            | MODE_QUEUED_CALLBACKS_SYNCHRONOUS_COPIES
            | MODE_CAPTURE_FORGOTTEN
            | MODE_CAPTURE_BEGUN_WITH_WARNING
            | MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE
    )
}

/// The modes whose capture id stays the same for the capture's life.
pub(crate) fn steady_capture_id(mode: u32) -> bool {
    matches!(
        mode,
        MODE_CAPTURE_QUEUED_CALLBACKS
            | MODE_CAPTURE_SHARED_STREAMS
            | MODE_CAPTURE_BEGUN_WITH_WARNING
            | MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE
            | MODE_QUEUED_CALLBACKS_SYNCHRONOUS_COPIES
    )
}

/// [`MODE_CAPTURE_BEGUN_WITH_WARNING`]: the callbacks the capture in progress holds, and the
/// graphs its ends made (by handle), each with the callbacks it calls on every launch.
pub(crate) static CAPTURED: Mutex<Vec<Queued>> = Mutex::new(Vec::new());
pub(crate) static GRAPHS: Mutex<Vec<(usize, Vec<Queued>)>> = Mutex::new(Vec::new());
/// [`MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE`]: the capture in progress refused its end.
pub(crate) static END_REFUSED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Begins (`begin` true) or ends a capture on the plug-in stream `stream` as other code sharing
/// the stream would, behind the host's back (the capture modes' single capture); answers
/// whether it did.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_faulty_foreign_capture(stream: usize, begin: bool) -> bool {
    let mut capture = lock(&ID_CHANGING_CAPTURE);
    match (begin, *capture) {
        (true, None) => *capture = Some((stream, 0)),
        (false, Some((s, _))) if s == stream => *capture = None,
        _ => return false,
    }
    true
}

pub(crate) unsafe extern "C" fn begin_capture_with_warning(
    device: C_Device,
    stream: C_Stream,
    mode: C_StreamCaptureMode,
) -> C_Status {
    // SAFETY: forwarded arguments.
    match unsafe { id_changing_begin_capture(device, stream, mode) } {
        C_SUCCESS => {
            END_REFUSED.store(false, Ordering::SeqCst);
            C_WARNING
        }
        other => other,
    }
}

pub(crate) unsafe extern "C" fn end_capture_into_graph(
    device: C_Device,
    stream: C_Stream,
    graph: *mut C_CudaGraph,
) -> C_Status {
    if mode_of(device) == MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE
        && !END_REFUSED.swap(true, Ordering::SeqCst)
    {
        return C_ERROR;
    }
    // SAFETY: forwarded arguments.
    let status = unsafe { id_changing_end_capture(device, stream, graph) };
    if status == C_SUCCESS {
        static NEXT_GRAPH: AtomicUsize = AtomicUsize::new(0x1000);
        let handle = NEXT_GRAPH.fetch_add(0x10, Ordering::SeqCst);
        let nodes = std::mem::take(&mut *lock(&CAPTURED));
        lock(&GRAPHS).push((handle, nodes));
        // SAFETY: a non-null out-parameter (checked by the end above).
        unsafe { *graph = handle as C_CudaGraph };
    }
    status
}

pub(crate) unsafe extern "C" fn instantiate_same_handle(
    exec: *mut C_GraphExec,
    graph: *mut C_CudaGraph,
    _error_node: *mut *mut c_void,
    _log: *mut std::ffi::c_char,
    _log_size: usize,
) -> C_Status {
    if exec.is_null() || graph.is_null() {
        return C_ERROR;
    }
    // SAFETY: non-null pointers from the host: the executable graph is named like its graph.
    unsafe { *exec = (*graph).cast() };
    C_SUCCESS
}

pub(crate) unsafe extern "C" fn launch_graph_callbacks(
    device: C_Device,
    exec: C_GraphExec,
    stream: C_Stream,
) -> C_Status {
    let calls: Vec<(C_Callback, usize)> = lock(&GRAPHS)
        .iter()
        .filter(|(handle, _)| *handle == exec as usize)
        .flat_map(|(_, nodes)| nodes.iter())
        .filter_map(|node| match node {
            Queued::Callback {
                callback,
                user_data,
                ..
            } => Some((Some(*callback), *user_data)),
            Queued::Copy { .. } => None,
        })
        .collect();
    for (callback, user_data) in calls {
        // SAFETY: the host's callback and data, kept by the graph.
        unsafe { inline_callback(device, stream, callback, user_data as *mut c_void) };
    }
    C_SUCCESS
}

pub(crate) unsafe extern "C" fn destroy_graph_callbacks(graph: C_CudaGraph) -> C_Status {
    lock(&GRAPHS).retain(|(handle, _)| *handle != graph as usize);
    C_SUCCESS
}

/// `stream_add_callback` of [`MODE_CAPTURE_BEGUN_WITH_WARNING`]: into the capture, or inline.
pub(crate) unsafe extern "C" fn capturing_or_inline_callback(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    let capturing = lock(&ID_CHANGING_CAPTURE).is_some_and(|(s, _)| s == stream as usize);
    if !capturing {
        // SAFETY: forwarded arguments.
        return unsafe { inline_callback(device, stream, callback, user_data) };
    }
    let Some(callback) = callback else {
        return C_ERROR;
    };
    lock(&CAPTURED).push(Queued::Callback {
        callback,
        device: mode_of(device) as std::ffi::c_int,
        stream: stream as usize,
        user_data: user_data as usize,
    });
    C_SUCCESS
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn id_changing_capture_info(
    device: C_Device,
    stream: C_Stream,
    status: *mut C_StreamCaptureStatus,
    id: *mut std::ffi::c_ulonglong,
    _graph: *mut C_CudaGraph,
    _dependencies: *mut C_CudaGraphNode,
    _edges: *mut *mut c_void,
    _count: *mut usize,
) -> C_Status {
    if status.is_null() || id.is_null() {
        return C_ERROR;
    }
    let mut capture = lock(&ID_CHANGING_CAPTURE);
    match capture.as_mut() {
        Some((s, reported))
            if *s == stream as usize
                && (*reported == 0 || mode_of(device) != MODE_CAPTURE_FORGOTTEN) =>
        {
            // SAFETY: non-null out-parameters.
            unsafe {
                *status = C_StreamCaptureStatusActive;
                *id = if *reported == 0 || steady_capture_id(mode_of(device)) {
                    7
                } else {
                    1007
                };
            }
            *reported += 1;
        }
        // SAFETY: a non-null out-parameter.
        _ => unsafe { *status = C_StreamCaptureStatusNone },
    }
    C_SUCCESS
}

pub(crate) unsafe extern "C" fn ok_graph_instantiate(
    exec: *mut C_GraphExec,
    _graph: *mut C_CudaGraph,
    _error_node: *mut *mut c_void,
    _log: *mut std::ffi::c_char,
    _log_size: usize,
) -> C_Status {
    if exec.is_null() {
        return C_ERROR;
    }
    // SAFETY: a non-null out-parameter; a dummy executable graph.
    unsafe { *exec = std::ptr::NonNull::dangling().as_ptr() };
    C_SUCCESS
}
