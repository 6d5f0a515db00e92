//! Graphs and executable graphs: [`CudaApi`]'s part of the raw-call table (`RawGraphs`).

use super::*;
use devstream_gpu_common::RawGraphs;

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawGraphs for CudaApi {
    unsafe fn graph_create() -> RawResult<RawGraph> {
        let graph = out(std::ptr::null_mut(), "cuGraphCreate", |graph| {
            // SAFETY: valid out-pointer.
            unsafe { sys::cuGraphCreate(graph, 0) }
        })?;
        Ok(RawGraph(graph.cast()))
    }

    unsafe fn graph_instantiate(graph: RawGraph) -> RawResult<RawGraphExec> {
        let exec = out(std::ptr::null_mut(), "cuGraphInstantiate", |exec| {
            // SAFETY: live graph, valid out-pointer.
            unsafe { sys::cuGraphInstantiateWithFlags(exec, graph.0.cast(), 0) }
        })?;
        Ok(RawGraphExec(exec.cast()))
    }

    #[inline]
    unsafe fn graph_launch(exec: RawGraphExec, s: RawStream) -> RawResult {
        ok(
            // SAFETY: live executable graph and stream of one device (caller).
            unsafe { sys::cuGraphLaunch(exec.0.cast(), stream(s)) },
            "cuGraphLaunch",
        )
    }

    unsafe fn graph_exec_destroy(exec: RawGraphExec) -> RawResult {
        ok(
            // SAFETY: the caller owns it and no launch is pending.
            unsafe { sys::cuGraphExecDestroy(exec.0.cast()) },
            "cuGraphExecDestroy",
        )
    }

    unsafe fn graph_destroy(graph: RawGraph) -> RawResult {
        ok(
            // SAFETY: the caller owns it.
            unsafe { sys::cuGraphDestroy(graph.0.cast()) },
            "cuGraphDestroy",
        )
    }

    unsafe fn graph_node_count(graph: RawGraph) -> RawResult<usize> {
        out(0usize, "cuGraphGetNodes", |count| {
            // SAFETY: live graph; a null array asks for the count only.
            unsafe { sys::cuGraphGetNodes(graph.0.cast(), std::ptr::null_mut(), count) }
        })
    }

    unsafe fn graph_nodes(graph: RawGraph) -> RawResult<Vec<RawGraphNode>> {
        // SAFETY: live graph (caller).
        let mut count = unsafe { Self::graph_node_count(graph) }?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut nodes: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); count];
        ok(
            // SAFETY: live graph; the array holds `count` nodes.
            unsafe { sys::cuGraphGetNodes(graph.0.cast(), nodes.as_mut_ptr(), &mut count) },
            "cuGraphGetNodes",
        )?;
        nodes.truncate(count);
        Ok(nodes
            .into_iter()
            // SAFETY: node handles the driver returned.
            .map(|n| unsafe { RawGraphNode::from_raw(n.cast()) })
            .collect())
    }
}
