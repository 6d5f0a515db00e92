//! Graphs.

use super::*;

/// `hipGraphCreate` → `cuGraphCreate`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphCreate(graph: *mut hipGraph_t, flags: c_uint) -> hipError_t {
    enter!();
    put_cu!(graph, |raw| sys::cuGraphCreate(raw, flags))
}

/// `hipGraphInstantiate` → `cuGraphInstantiateWithFlags(0)` (CUDA 12 dropped the error-node
/// and log-buffer form; the error node and log are left unwritten).
#[no_mangle]
pub unsafe extern "C" fn hipGraphInstantiate(
    exec: *mut hipGraphExec_t,
    graph: hipGraph_t,
    _error_node: *mut hipGraphNode_t,
    _log: *mut c_char,
    _log_size: usize,
) -> hipError_t {
    enter!();
    put_cu!(exec, |raw| sys::cuGraphInstantiateWithFlags(
        raw,
        graph.cast(),
        0
    ))
}

/// `hipGraphLaunch` → `cuGraphLaunch`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphLaunch(exec: hipGraphExec_t, stream: hipStream_t) -> hipError_t {
    enter!();
    cu!(sys::cuGraphLaunch(exec.cast(), cu_stream(stream)))
}

/// `hipGraphExecDestroy` → `cuGraphExecDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecDestroy(exec: hipGraphExec_t) -> hipError_t {
    enter!();
    cu!(sys::cuGraphExecDestroy(exec.cast()))
}

/// `hipGraphDestroy` → `cuGraphDestroy`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphDestroy(graph: hipGraph_t) -> hipError_t {
    enter!();
    cu!(sys::cuGraphDestroy(graph.cast()))
}

/// `hipGraphGetNodes` → `cuGraphGetNodes`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphGetNodes(
    graph: hipGraph_t,
    nodes: *mut hipGraphNode_t,
    count: *mut usize,
) -> hipError_t {
    enter!();
    cu!(sys::cuGraphGetNodes(graph.cast(), nodes.cast(), count))
}
