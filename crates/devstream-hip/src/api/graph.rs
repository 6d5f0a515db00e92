//! Graphs and executable graphs: [`HipApi`]'s part of the raw-call table (`RawGraphs`).

use super::*;
use devstream_gpu_common::RawGraphs;

// SAFETY: every function forwards to the HIP runtime call of the same meaning as the CUDA call
// named in RawApi's documentation, with the same contract; optional calls check their symbol
// (the shared layer also checks `supports` first); nothing is called before `load` returned Ok.
unsafe impl RawGraphs for HipApi {
    unsafe fn graph_create() -> RawResult<RawGraph> {
        let t = table("hipGraphCreate")?;
        let graph = out(std::ptr::null_mut(), "hipGraphCreate", |graph| {
            // SAFETY: valid out-pointer; flags must be 0.
            unsafe { (t.hipGraphCreate)(graph, 0) }
        })?;
        Ok(RawGraph(graph))
    }

    unsafe fn graph_instantiate(graph: RawGraph) -> RawResult<RawGraphExec> {
        let t = table("hipGraphInstantiate")?;
        let mut exec = std::ptr::null_mut();
        ok(
            // SAFETY: live graph; valid out-pointer; no error node or log buffer requested.
            unsafe {
                (t.hipGraphInstantiate)(
                    &mut exec,
                    graph.0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                )
            },
            "hipGraphInstantiate",
        )?;
        Ok(RawGraphExec(exec))
    }

    unsafe fn graph_launch(exec: RawGraphExec, s: RawStream) -> RawResult {
        call("hipGraphLaunch", |t| {
            // SAFETY: live executable graph and stream (caller).
            unsafe { (t.hipGraphLaunch)(exec.0, stream(s)) }
        })
    }

    unsafe fn graph_exec_destroy(exec: RawGraphExec) -> RawResult {
        call("hipGraphExecDestroy", |t| {
            // SAFETY: the caller owns the executable graph.
            unsafe { (t.hipGraphExecDestroy)(exec.0) }
        })
    }

    unsafe fn graph_destroy(graph: RawGraph) -> RawResult {
        call("hipGraphDestroy", |t| {
            // SAFETY: the caller owns the graph.
            unsafe { (t.hipGraphDestroy)(graph.0) }
        })
    }

    unsafe fn graph_node_count(graph: RawGraph) -> RawResult<usize> {
        let t = table("hipGraphGetNodes")?;
        out(0usize, "hipGraphGetNodes", |count| {
            // SAFETY: live graph; a null node array asks for the count only.
            unsafe { (t.hipGraphGetNodes)(graph.0, std::ptr::null_mut(), count) }
        })
    }

    unsafe fn graph_nodes(graph: RawGraph) -> RawResult<Vec<RawGraphNode>> {
        let t = table("hipGraphGetNodes")?;
        // SAFETY: live graph (caller).
        let mut count = unsafe { Self::graph_node_count(graph) }?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut nodes: Vec<sys::hipGraphNode_t> = vec![std::ptr::null_mut(); count];
        // SAFETY: live graph; the array holds `count` nodes.
        let status = unsafe { (t.hipGraphGetNodes)(graph.0, nodes.as_mut_ptr(), &mut count) };
        ok(status, "hipGraphGetNodes")?;
        nodes.truncate(count);
        // SAFETY: node handles the runtime returned.
        Ok(nodes
            .into_iter()
            .map(|n| unsafe { RawGraphNode::from_raw(n) })
            .collect())
    }
}
