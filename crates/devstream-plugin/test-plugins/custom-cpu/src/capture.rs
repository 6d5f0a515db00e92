//! Graph capture: the Paddle 3.3 table's `cuda_stream_*` / `cuda_graph_*` functions. A
//! capturing stream records its work as nodes instead of running it; a launch replays the
//! graph's nodes on the launch stream.

use super::*;

/// A copy, host callback or wait: run on its stream's worker at once, or, captured, a node of a
/// graph, replayed on the launch stream by every launch.
#[derive(Clone)]
pub(crate) enum Node {
    Copy {
        dst: usize,
        src: usize,
        len: usize,
    },
    Callback {
        callback: unsafe extern "C" fn(C_Device, C_Stream, *mut c_void, *mut C_Status),
        device: c_int,
        user_data: usize,
    },
    /// A wait on work outside the capture.
    Wait {
        state: Arc<StreamState>,
        seq: u64,
    },
}

impl Node {
    /// Runs the node on the worker of `stream` (the host's handle, which a callback is given).
    pub(crate) fn run(&self, stream: usize) {
        match *self {
            Node::Copy { dst, src, len } => {
                // SAFETY: the host handed us valid, non-overlapping ranges of `len` bytes and
                // keeps them alive until the copy completes (the ABI's contract for async
                // copies).
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) }
            }
            Node::Callback {
                callback,
                device,
                user_data,
            } => {
                let mut device = C_Device_st { id: device };
                let mut status = C_SUCCESS;
                let (stream, data) = (stream as C_Stream, user_data as *mut c_void);
                // SAFETY: the host gave us this callback and its user data for exactly one
                // call (a captured one: for one call per launch).
                unsafe { callback(&mut device, stream, data, &mut status) }
            }
            Node::Wait { ref state, seq } => state.wait_for(seq),
        }
    }
}

/// A stream taking part in a capture: how many nodes it added, and the waits it made on
/// other members' events (at its position, on that member, up to its position).
pub(crate) struct Member {
    pub(crate) stream: std::sync::Weak<StreamState>,
    pub(crate) ops: u64,
    pub(crate) waits: Vec<(u64, usize, u64)>,
}

pub(crate) struct CaptureInner {
    /// Every member's nodes in the order they were captured: a topological order, since a
    /// stream can only wait on an event recorded before.
    pub(crate) nodes: Vec<Node>,
    pub(crate) members: Vec<Member>,
    pub(crate) invalidated: bool,
    /// Ended (`end_capture`): its captured events are no longer "in a capturing stream".
    pub(crate) ended: bool,
}

/// One capture: begun on `origin`, joined by the streams that wait on its events.
pub(crate) struct Capture {
    pub(crate) id: u64,
    pub(crate) origin: usize,
    pub(crate) inner: Mutex<CaptureInner>,
}

impl Capture {
    pub(crate) fn member(inner: &mut CaptureInner, stream: usize) -> Option<&mut Member> {
        inner
            .members
            .iter_mut()
            .find(|m| m.stream.as_ptr() as usize == stream)
    }

    /// Adds a node of `stream` (a member).
    pub(crate) fn add(&self, stream: usize, node: Node) -> C_Status {
        let mut inner = lock(&self.inner);
        if inner.invalidated {
            return C_ERROR;
        }
        inner.nodes.push(node);
        match Capture::member(&mut inner, stream) {
            Some(member) => {
                member.ops += 1;
                C_SUCCESS
            }
            None => C_INTERNAL_ERROR,
        }
    }

    /// Whether every member's nodes come before the end of the origin, through waits.
    pub(crate) fn joined(inner: &CaptureInner, origin: usize) -> bool {
        let index = |stream: usize| {
            inner
                .members
                .iter()
                .position(|m| m.stream.as_ptr() as usize == stream)
        };
        let Some(origin) = index(origin) else {
            return false;
        };
        let mut covered = vec![0u64; inner.members.len()];
        covered[origin] = inner.members[origin].ops;
        let mut reached = vec![false; inner.members.len()];
        reached[origin] = true;
        let mut changed = true;
        while changed {
            changed = false;
            for (i, member) in inner.members.iter().enumerate() {
                if !reached[i] {
                    continue;
                }
                for &(at, other, upto) in &member.waits {
                    let Some(j) = index(other) else { continue };
                    if at <= covered[i] && (!reached[j] || covered[j] < upto) {
                        reached[j] = true;
                        covered[j] = covered[j].max(upto);
                        changed = true;
                    }
                }
            }
        }
        inner
            .members
            .iter()
            .enumerate()
            .all(|(i, m)| covered[i] >= m.ops)
    }

    /// Ends the capture for every member.
    pub(crate) fn close(&self, inner: &mut CaptureInner) {
        inner.ended = true;
        for member in &inner.members {
            if let Some(state) = member.stream.upgrade() {
                let mut capture = lock(&state.capture);
                if capture.as_ref().is_some_and(|c| c.id == self.id) {
                    *capture = None;
                }
            }
        }
    }
}

pub(crate) static NEXT_CAPTURE: AtomicUsize = AtomicUsize::new(1);

pub(crate) fn capture_of(state: &StreamState) -> Option<Arc<Capture>> {
    lock(&state.capture).clone()
}

/// CUDA's rule for an event last recorded in a capturing stream
/// (`CUDA_ERROR_CAPTURED_EVENT`): while that capture lasts, querying or synchronizing the
/// event is refused and invalidates the capture. Whether the call is refused.
pub(crate) fn captured_event_refused(capture: &Capture) -> bool {
    let mut inner = lock(&capture.inner);
    if inner.ended {
        return false;
    }
    inner.invalidated = true;
    true
}

/// Invalidates the stream's capture, if any (a call that cannot be captured).
pub(crate) fn invalidate(state: &StreamState) -> bool {
    match capture_of(state) {
        Some(capture) => {
            lock(&capture.inner).invalidated = true;
            true
        }
        None => false,
    }
}

/// A captured graph.
pub(crate) struct GraphObj {
    pub(crate) nodes: Arc<Vec<Node>>,
}

/// An instantiated graph.
pub(crate) struct ExecObj {
    pub(crate) nodes: Arc<Vec<Node>>,
}

pub(crate) unsafe extern "C" fn begin_capture(
    device: C_Device,
    stream: C_Stream,
    _mode: C_StreamCaptureMode,
) -> C_Status {
    let body = |obj: &StreamObj| {
        if invalidate(&obj.state) {
            // Beginning twice invalidates the capture in progress.
            return C_ERROR;
        }
        let mut current = lock(&obj.state.capture);
        if current.is_some() {
            return C_ERROR;
        }
        let me = Arc::as_ptr(&obj.state) as usize;
        *current = Some(Arc::new(Capture {
            id: NEXT_CAPTURE.fetch_add(1, Ordering::SeqCst) as u64,
            origin: me,
            inner: Mutex::new(CaptureInner {
                nodes: Vec::new(),
                members: vec![Member {
                    stream: Arc::downgrade(&obj.state),
                    ops: 0,
                    waits: Vec::new(),
                }],
                invalidated: false,
                ended: false,
            }),
        }));
        C_SUCCESS
    };
    // SAFETY: a valid device and a live (or null) stream from the host.
    unsafe { on_stream(device_id, device, stream, body) }
}

pub(crate) unsafe extern "C" fn end_capture(
    device: C_Device,
    stream: C_Stream,
    graph: *mut C_CudaGraph,
) -> C_Status {
    let body = |obj: &StreamObj| {
        let Some(capture) = capture_of(&obj.state) else {
            return C_ERROR;
        };
        if capture.origin != Arc::as_ptr(&obj.state) as usize || graph.is_null() {
            return C_ERROR;
        }
        let mut inner = lock(&capture.inner);
        capture.close(&mut inner);
        if inner.invalidated || !Capture::joined(&inner, capture.origin) {
            return C_ERROR;
        }
        let nodes = Arc::new(std::mem::take(&mut inner.nodes));
        // SAFETY: a non-null out-parameter.
        unsafe { *graph = Box::into_raw(Box::new(GraphObj { nodes })) as C_CudaGraph };
        C_SUCCESS
    };
    // SAFETY: a valid device and a live (or null) stream from the host.
    unsafe { on_stream(device_id, device, stream, body) }
}

pub(crate) unsafe extern "C" fn graph_instantiate(
    exec: *mut C_GraphExec,
    graph: *mut C_CudaGraph,
    _error_node: *mut *mut c_void,
    _log: *mut std::ffi::c_char,
    _log_size: usize,
) -> C_Status {
    guarded(|| {
        if exec.is_null() || graph.is_null() {
            return C_ERROR;
        }
        // SAFETY: a readable pointer to a graph handle from `end_capture`.
        let graph = unsafe { *graph };
        if graph.is_null() {
            return C_ERROR;
        }
        // SAFETY: a live graph from `end_capture`.
        let nodes = unsafe { &*(graph as *const GraphObj) }.nodes.clone();
        // SAFETY: a non-null out-parameter.
        unsafe { *exec = Box::into_raw(Box::new(ExecObj { nodes })) as C_GraphExec };
        C_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn graph_launch(
    device: C_Device,
    exec: C_GraphExec,
    stream: C_Stream,
) -> C_Status {
    let body = |obj: &StreamObj| {
        if exec.is_null() || capture_of(&obj.state).is_some() {
            return C_ERROR;
        }
        // SAFETY: a live executable graph from `graph_instantiate`.
        let nodes = unsafe { &*(exec as *const ExecObj) }.nodes.clone();
        obj.submit(Task::Graph {
            nodes,
            stream: stream as usize,
        })
    };
    // SAFETY: a valid device and a live (or null) stream from the host.
    unsafe { on_stream(device_id, device, stream, body) }
}

/// Frees an object handed out as a `Box<T>` (a null handle is `C_ERROR`).
///
/// # Safety
/// `handle` is null or a `Box<T>` this plug-in handed out and has not freed yet.
unsafe fn destroy_boxed<T>(handle: *mut T) -> C_Status {
    guarded(|| {
        if handle.is_null() {
            return C_ERROR;
        }
        // SAFETY: per the contract above.
        drop(unsafe { Box::from_raw(handle) });
        C_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn graph_destroy(graph: C_CudaGraph) -> C_Status {
    // SAFETY: a graph from `end_capture`, destroyed once.
    unsafe { destroy_boxed(graph as *mut GraphObj) }
}

pub(crate) unsafe extern "C" fn graph_exec_destroy(exec: C_GraphExec) -> C_Status {
    // SAFETY: an executable graph from `graph_instantiate`, destroyed once; launches queued
    // earlier hold their own reference to the nodes.
    unsafe { destroy_boxed(exec as *mut ExecObj) }
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn stream_capture_info(
    device: C_Device,
    stream: C_Stream,
    status: *mut C_StreamCaptureStatus,
    id: *mut std::ffi::c_ulonglong,
    graph: *mut C_CudaGraph,
    _dependencies: *mut C_CudaGraphNode,
    _edges: *mut *mut c_void,
    count: *mut usize,
) -> C_Status {
    let body = |obj: &StreamObj| {
        if status.is_null() {
            return C_ERROR;
        }
        let (value, capture_id) = match capture_of(&obj.state) {
            None => (C_StreamCaptureStatusNone, 0),
            Some(capture) if lock(&capture.inner).invalidated => {
                (C_StreamCaptureStatusInvalidated, capture.id)
            }
            Some(capture) => (C_StreamCaptureStatusActive, capture.id),
        };
        // SAFETY: non-null or checked out-parameters.
        unsafe {
            *status = value;
            if !id.is_null() {
                *id = capture_id;
            }
            if !graph.is_null() {
                *graph = std::ptr::null_mut();
            }
            if !count.is_null() {
                *count = 0;
            }
        }
        C_SUCCESS
    };
    // SAFETY: a valid device and a live (or null) stream from the host.
    unsafe { on_stream(device_id, device, stream, body) }
}
