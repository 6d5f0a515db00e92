//! Beginning and ending a plug-in stream's capture (`cuda_stream_begin_capture`,
//! `cuda_stream_end_captrue` + `cuda_graph_instantiate`), including the clean-up of a begin the
//! plug-in answered oddly.

use super::caps_of;
use crate::capture::Capturing;
use crate::graph::{AbiGraph, GraphRepr, PluginGraph};
use crate::queue::StreamCore;
use crate::runtime::{CaptureState, Handle};
use crate::sys::{
    C_StreamCaptureModeGlobal, C_StreamCaptureModeRelaxed, C_StreamCaptureModeThreadLocal,
};
use devstream_core::{CaptureMode, CaptureSupport, Error, Result};
use std::sync::Arc;

pub(super) fn native_mode(mode: CaptureMode) -> crate::sys::C_StreamCaptureMode {
    match mode {
        CaptureMode::Global => C_StreamCaptureModeGlobal,
        CaptureMode::ThreadLocal => C_StreamCaptureModeThreadLocal,
        CaptureMode::Relaxed => C_StreamCaptureModeRelaxed,
    }
}

pub(super) fn begin_capture(core: &Arc<StreamCore>, mode: CaptureMode) -> Result<()> {
    if caps_of(core).capture == CaptureSupport::None {
        return Err(Error::unsupported("begin_capture", &core.place));
    }
    match crate::capture::capturing(core)? {
        Capturing::No => {}
        Capturing::Yes(capture) | Capturing::Invalid(Some(capture), _) => {
            capture.invalidate("begin_capture on a capturing stream".into());
            return Err(Error::capture(
                "begin_capture",
                "the stream is already capturing",
            ));
        }
        Capturing::Invalid(None, _) => {
            return Err(Error::capture(
                "begin_capture",
                "the stream is already capturing",
            ));
        }
    }
    if core.runtime.stream_handles.shared(core.slot, core.raw.0) {
        // The plug-in would capture the other streams with this handle too
        // (`runtime::stream_handles`).
        return Err(Error::capture(
            "begin_capture",
            "the plug-in gave this stream's handle to another live stream as well (null, or one \
             handle for every stream): a capture would take that stream's work too",
        ));
    }
    // A capture devstream did not begin (code sharing an adopted stream may have begun one) is
    // refused here: the plug-in's refusal would invalidate it, and a failed begin's clean-up
    // below ends whatever capture the plug-in then reports.
    if let Ok(CaptureState::Active(_) | CaptureState::Invalidated(_)) =
        core.runtime.capture_state(core.slot, core.raw)
    {
        return Err(Error::capture(
            "begin_capture",
            "the stream is already capturing (a capture devstream did not begin)",
        ));
    }
    if core.has_deferred() {
        // The capture must come after the held work in the plug-in's order.
        core.hand_over_held()?;
    }
    // The end of the work before the capture, for releases while it captures.
    let before = core.record_raw()?;
    // No reaper job runs from here until the capture is registered (or refused).
    let _gate = crate::capture::beginning();
    // Until the capture leaves the registry (after the plug-in ended it), nothing is elided.
    crate::capture::window_open();
    let begun = core
        .runtime
        .begin_capture(core.slot, core.raw, native_mode(mode));
    let state = core.runtime.capture_state(core.slot, core.raw);
    match (begun, state) {
        (Ok(()), Ok(CaptureState::Active(id))) => {
            *crate::queue::lock(&core.pre_capture) = Some(before);
            crate::capture::register(core, id, mode);
            Ok(())
        }
        // Refused, and the plug-in reports no capture: nothing began.
        (Err(error), Ok(CaptureState::None)) => {
            crate::capture::window_close();
            Err(error)
        }
        (begun, state) => {
            let error = begun.err().unwrap_or_else(|| {
                Error::capture(
                    "begin_capture",
                    format!(
                        "{} plug-in: cuda_stream_capture_info after cuda_stream_begin_capture: \
                         {state:?}",
                        core.runtime.device_type
                    ),
                )
            });
            abandon_begun_capture(core, mode, before);
            Err(error)
        }
    }
}

/// After a `begin_capture` that gave devstream no capture it can use (the plug-in answered a
/// failure, or does not report the capture it began), while the plug-in may be capturing all
/// the same: a plug-in may do what was asked and answer an error or a warning. Work submitted
/// into a capture devstream does not know would be recorded as graph nodes, never run, and what
/// it holds (a host function's closure) never released; so the plug-in's capture is ended and
/// its graph destroyed. Should it still report a capture, that capture is registered as
/// invalidated: submissions answer `Error::Capture` until `end_capture` (or the stream's drop)
/// ends it. Called with the capture window open; closes it unless a capture is registered.
pub(super) fn abandon_begun_capture(
    core: &Arc<StreamCore>,
    mode: CaptureMode,
    before: Arc<crate::queue::RawEvent>,
) {
    core.discard_native_capture("the capture of a failed begin");
    match core.runtime.capture_state(core.slot, core.raw) {
        Ok(CaptureState::Active(id) | CaptureState::Invalidated(id)) => {
            *crate::queue::lock(&core.pre_capture) = Some(before);
            crate::capture::register(core, id, mode).invalidate(
                "begin_capture gave devstream no capture to use, and the plug-in did not end it"
                    .into(),
            );
        }
        _ => crate::capture::window_close(),
    }
}

pub(super) fn end_capture(core: &Arc<StreamCore>) -> Result<PluginGraph> {
    if caps_of(core).capture == CaptureSupport::None {
        return Err(Error::unsupported("end_capture", &core.place));
    }
    let id = match core.runtime.capture_state(core.slot, core.raw) {
        Ok(CaptureState::Active(id) | CaptureState::Invalidated(id)) => id,
        other => {
            // The plug-in reports no capture (or cannot say): whatever devstream registered for
            // a capture begun on this stream ends with this call, since nothing else could end
            // it while the stream lives (a default stream lives as long as the process).
            if other.is_err() {
                crate::capture::mark_unsure(core.runtime.index());
                if crate::capture::began_on(core.runtime.index(), core.id) {
                    // It cannot say, and devstream began one here: the plug-in's capture is
                    // ended as a dropped stream's is. Left open on a plug-in stream that
                    // outlives this call (a default stream, the null stream that several
                    // streams share), it would take the work devstream submits there later,
                    // once devstream no longer knows of a capture, as graph nodes never run.
                    core.discard_native_capture("a capture its plug-in cannot report on");
                }
            }
            *crate::queue::lock(&core.pre_capture) = None;
            crate::capture::forget_origin(
                core.runtime.index(),
                core.id,
                "its stream ended its capture",
            );
            return match other {
                Err(error) => Err(error),
                Ok(_) => Err(Error::capture("end_capture", "the stream is not capturing")),
            };
        }
    };
    let capture = crate::capture::find(core.runtime.index(), id);
    if let Some(capture) = &capture {
        if capture.origin != core.id {
            return Err(Error::capture(
                "end_capture",
                format!(
                    "the stream joined the capture begun on stream {}; end it there",
                    capture.origin
                ),
            ));
        }
    }
    let ended = core.runtime.end_capture(core.slot, core.raw);
    if ended.is_err() {
        // The plug-in's capture (and the streams joined to it) may still be open.
        crate::capture::mark_unsure(core.runtime.index());
    }
    *crate::queue::lock(&core.pre_capture) = None;
    if let Some(capture) = &capture {
        crate::capture::unregister(capture);
    }
    // Any other capture devstream registered on this stream is over too (the plug-in may have
    // reported its capture under another id).
    crate::capture::forget_origin(
        core.runtime.index(),
        core.id,
        "its stream ended its capture",
    );
    let graph = ended?;
    let discard = |reason: String| {
        if let Err(error) = core.runtime.destroy_graph(core.slot, graph, Handle(0)) {
            tracing::warn!("devstream-plugin: destroying a discarded graph: {error}");
        }
        Err(Error::capture("end_capture", reason))
    };
    let Some(capture) = capture else {
        return discard(format!("capture {id} was not begun by devstream"));
    };
    if let Some(reason) = capture.invalidated() {
        return discard(format!("the capture was invalidated ({reason})"));
    }
    let exec = match core.runtime.instantiate(core.slot, graph) {
        Ok(exec) => exec,
        Err(error) => {
            let _ = core.runtime.destroy_graph(core.slot, graph, Handle(0));
            return Err(error);
        }
    };
    Ok(PluginGraph(GraphRepr::Abi(Arc::new(AbiGraph::new(
        core.runtime.clone(),
        core.slot,
        graph,
        exec,
        capture,
    )))))
}
