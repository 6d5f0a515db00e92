//! Stream capture: [`HipApi`]'s part of the raw-call table (`RawCapture`).

use super::*;
use devstream_gpu_common::RawCapture;

// SAFETY: every function forwards to the HIP runtime call of the same meaning as the CUDA call
// named in RawApi's documentation, with the same contract; optional calls check their symbol
// (the shared layer also checks `supports` first); nothing is called before `load` returned Ok.
unsafe impl RawCapture for HipApi {
    unsafe fn stream_begin_capture(s: RawStream, mode: CaptureMode) -> RawResult {
        call("hipStreamBeginCapture", |t| {
            // SAFETY: live stream.
            unsafe { (t.hipStreamBeginCapture)(stream(s), capture_mode(mode)) }
        })
    }

    unsafe fn stream_begin_capture_to_graph(
        _s: RawStream,
        _graph: RawGraph,
        _dependencies: &[RawGraphNode],
        _mode: CaptureMode,
    ) -> RawResult {
        Err(absent("hipStreamBeginCaptureToGraph"))
    }

    unsafe fn stream_end_capture(s: RawStream) -> RawResult<RawGraph> {
        let t = table("hipStreamEndCapture")?;
        let graph = out(std::ptr::null_mut(), "hipStreamEndCapture", |graph| {
            // SAFETY: live stream; valid out-pointer.
            unsafe { (t.hipStreamEndCapture)(stream(s), graph) }
        })?;
        Ok(RawGraph(graph))
    }

    unsafe fn stream_is_capturing(s: RawStream) -> RawResult<CaptureStatus> {
        let t = table("hipStreamIsCapturing")?;
        let status = out(
            sys::hipStreamCaptureStatusNone,
            "hipStreamIsCapturing",
            |status| {
                // SAFETY: live stream; valid out-pointer.
                unsafe { (t.hipStreamIsCapturing)(stream(s), status) }
            },
        )?;
        capture_status(status, "hipStreamIsCapturing")
    }

    unsafe fn stream_capture_sequence(s: RawStream) -> RawResult<(CaptureStatus, u64)> {
        let t = table("hipStreamGetCaptureInfo")?;
        let mut status = sys::hipStreamCaptureStatusNone;
        let mut id: std::ffi::c_ulonglong = 0;
        ok(
            // SAFETY: live stream; valid out-pointers (status and id only: no pointer into the
            // capture's state comes back).
            unsafe { (t.hipStreamGetCaptureInfo)(stream(s), &mut status, &mut id) },
            "hipStreamGetCaptureInfo",
        )?;
        let status = capture_status(status, "hipStreamGetCaptureInfo")?;
        Ok((status, if status == CaptureStatus::None { 0 } else { id }))
    }

    unsafe fn stream_capture_info(s: RawStream) -> RawResult<CaptureInfo> {
        let t = table("hipStreamGetCaptureInfo")?;
        let mut status = sys::hipStreamCaptureStatusNone;
        let mut id: std::ffi::c_ulonglong = 0;
        let mut graph = std::ptr::null_mut();
        let mut deps: *const sys::hipGraphNode_t = std::ptr::null();
        let mut count = 0usize;
        match t.hipStreamGetCaptureInfo_v2 {
            Some(v2) => ok(
                // SAFETY: live stream; valid out-pointers.
                unsafe {
                    v2(
                        stream(s),
                        &mut status,
                        &mut id,
                        &mut graph,
                        &mut deps,
                        &mut count,
                    )
                },
                "hipStreamGetCaptureInfo_v2",
            )?,
            None => ok(
                // SAFETY: live stream; valid out-pointers.
                unsafe { (t.hipStreamGetCaptureInfo)(stream(s), &mut status, &mut id) },
                "hipStreamGetCaptureInfo",
            )?,
        }
        let status = capture_status(status, "hipStreamGetCaptureInfo")?;
        let dependencies = if status == CaptureStatus::None || deps.is_null() || count == 0 {
            Vec::new()
        } else {
            // SAFETY: the runtime returned `count` nodes at `deps`, valid until the next call on
            // this stream or the end of its capture, which the caller rules out on other threads
            // until this copy is made.
            unsafe { std::slice::from_raw_parts(deps, count) }
                .iter()
                // SAFETY: node handles the runtime returned.
                .map(|node| unsafe { RawGraphNode::from_raw(*node) })
                .collect()
        };
        Ok(CaptureInfo {
            status,
            id: if status == CaptureStatus::None { 0 } else { id },
            graph: RawGraph(graph),
            dependencies,
        })
    }

    unsafe fn stream_update_capture_dependencies(
        s: RawStream,
        dependencies: &[RawGraphNode],
        replace: bool,
    ) -> RawResult {
        let function = optional("hipStreamUpdateCaptureDependencies", |t| {
            t.hipStreamUpdateCaptureDependencies
        })?;
        let flags = if replace {
            sys::hipStreamSetCaptureDependencies
        } else {
            sys::hipStreamAddCaptureDependencies
        };
        let mut nodes: Vec<sys::hipGraphNode_t> = dependencies.iter().map(|n| n.as_ptr()).collect();
        ok(
            // SAFETY: live stream; `nodes` holds `len` nodes for the duration of the call.
            unsafe { function(stream(s), nodes.as_mut_ptr(), nodes.len(), flags) },
            "hipStreamUpdateCaptureDependencies",
        )
    }

    unsafe fn thread_exchange_capture_mode(mode: CaptureMode) -> RawResult<CaptureMode> {
        let function = optional("hipThreadExchangeStreamCaptureMode", |t| {
            t.hipThreadExchangeStreamCaptureMode
        })?;
        let native = out(
            capture_mode(mode),
            "hipThreadExchangeStreamCaptureMode",
            |native| {
                // SAFETY: valid in/out pointer.
                unsafe { function(native) }
            },
        )?;
        capture_mode_back(native, "hipThreadExchangeStreamCaptureMode")
    }
}
