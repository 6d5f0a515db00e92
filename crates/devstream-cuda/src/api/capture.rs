//! Stream capture: [`CudaApi`]'s part of the raw-call table (`RawCapture`).

use super::*;
use devstream_gpu_common::RawCapture;

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawCapture for CudaApi {
    unsafe fn stream_begin_capture(s: RawStream, mode: CaptureMode) -> RawResult {
        ok(
            // SAFETY: live stream (caller).
            unsafe { sys::cuStreamBeginCapture_v2(stream(s), capture_mode(mode)) },
            "cuStreamBeginCapture",
        )
    }

    unsafe fn stream_begin_capture_to_graph(
        s: RawStream,
        graph: RawGraph,
        dependencies: &[RawGraphNode],
        mode: CaptureMode,
    ) -> RawResult {
        ok(
            // SAFETY: live stream and graph; the node array is valid for its length; present per
            // `supports`.
            unsafe {
                sys::cuStreamBeginCaptureToGraph(
                    stream(s),
                    graph.0.cast(),
                    dependencies.as_ptr().cast(),
                    std::ptr::null(),
                    dependencies.len(),
                    capture_mode(mode),
                )
            },
            "cuStreamBeginCaptureToGraph",
        )
    }

    unsafe fn stream_end_capture(s: RawStream) -> RawResult<RawGraph> {
        let graph = out(std::ptr::null_mut(), "cuStreamEndCapture", |graph| {
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamEndCapture(stream(s), graph) }
        })?;
        Ok(RawGraph(graph.cast()))
    }

    unsafe fn stream_is_capturing(s: RawStream) -> RawResult<CaptureStatus> {
        let status = out(
            sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
            "cuStreamIsCapturing",
            |status| {
                // SAFETY: live stream, valid out-pointer.
                unsafe { sys::cuStreamIsCapturing(stream(s), status) }
            },
        )?;
        Ok(capture_status(status))
    }

    unsafe fn stream_capture_sequence(s: RawStream) -> RawResult<(CaptureStatus, u64)> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut id = 0u64;
        // Only the status and the id: the graph and the dependency array are optional outputs,
        // left null so that the driver hands out no pointer into the capture's state.
        if support().capture_info_v3 {
            ok(
                // SAFETY: live stream, valid out-pointers for status and id; the optional ones
                // are null; present per `supports`.
                unsafe {
                    sys::cuStreamGetCaptureInfo_v3(
                        stream(s),
                        &mut status,
                        &mut id,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                },
                "cuStreamGetCaptureInfo",
            )?;
        } else {
            ok(
                // SAFETY: as above (the loader requires one of the two variants).
                unsafe {
                    sys::cuStreamGetCaptureInfo_v2(
                        stream(s),
                        &mut status,
                        &mut id,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                },
                "cuStreamGetCaptureInfo",
            )?;
        }
        let status = capture_status(status);
        Ok((status, if status == CaptureStatus::None { 0 } else { id }))
    }

    unsafe fn stream_capture_info(s: RawStream) -> RawResult<CaptureInfo> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut id = 0u64;
        let mut graph = std::ptr::null_mut();
        let mut deps: *const sys::CUgraphNode = std::ptr::null();
        let mut count = 0usize;
        if support().capture_info_v3 {
            let mut edges: *const sys::CUgraphEdgeData = std::ptr::null();
            ok(
                // SAFETY: live stream, valid out-pointers; present per `supports`.
                unsafe {
                    sys::cuStreamGetCaptureInfo_v3(
                        stream(s),
                        &mut status,
                        &mut id,
                        &mut graph,
                        &mut deps,
                        &mut edges,
                        &mut count,
                    )
                },
                "cuStreamGetCaptureInfo",
            )?;
        } else {
            ok(
                // SAFETY: as above (the loader requires one of the two variants).
                unsafe {
                    sys::cuStreamGetCaptureInfo_v2(
                        stream(s),
                        &mut status,
                        &mut id,
                        &mut graph,
                        &mut deps,
                        &mut count,
                    )
                },
                "cuStreamGetCaptureInfo",
            )?;
        }
        let status = capture_status(status);
        let dependencies = if status == CaptureStatus::None || deps.is_null() || count == 0 {
            Vec::new()
        } else {
            // SAFETY: the driver returned an array of `count` nodes, valid until the next call
            // on this stream or the end of its capture, which the caller rules out on other
            // threads until this copy is made.
            unsafe { std::slice::from_raw_parts(deps, count) }
                .iter()
                // SAFETY: node handles the driver returned.
                .map(|n| unsafe { RawGraphNode::from_raw((*n).cast()) })
                .collect()
        };
        Ok(CaptureInfo {
            status,
            id: if status == CaptureStatus::None { 0 } else { id },
            graph: RawGraph(graph.cast()),
            dependencies,
        })
    }

    unsafe fn stream_update_capture_dependencies(
        s: RawStream,
        dependencies: &[RawGraphNode],
        replace: bool,
    ) -> RawResult {
        let flags = if replace {
            sys::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES
        } else {
            sys::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_ADD_CAPTURE_DEPENDENCIES
        } as u32;
        let mut nodes: Vec<sys::CUgraphNode> =
            dependencies.iter().map(|n| n.as_ptr().cast()).collect();
        if support().update_deps_v2 {
            ok(
                // SAFETY: live stream; the node array is valid for its length.
                unsafe {
                    sys::cuStreamUpdateCaptureDependencies_v2(
                        stream(s),
                        nodes.as_mut_ptr(),
                        std::ptr::null(),
                        nodes.len(),
                        flags,
                    )
                },
                "cuStreamUpdateCaptureDependencies",
            )
        } else {
            ok(
                // SAFETY: as above.
                unsafe {
                    sys::cuStreamUpdateCaptureDependencies(
                        stream(s),
                        nodes.as_mut_ptr(),
                        nodes.len(),
                        flags,
                    )
                },
                "cuStreamUpdateCaptureDependencies",
            )
        }
    }

    unsafe fn thread_exchange_capture_mode(mode: CaptureMode) -> RawResult<CaptureMode> {
        let native = out(
            capture_mode(mode),
            "cuThreadExchangeStreamCaptureMode",
            |native| {
                // SAFETY: valid in/out pointer.
                unsafe { sys::cuThreadExchangeStreamCaptureMode(native) }
            },
        )?;
        Ok(capture_mode_back(native))
    }
}
