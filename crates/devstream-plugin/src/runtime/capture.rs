//! The graph-capture functions, read only from a table identified as the Paddle 3.3 one:
//! begin, end, instantiate, launch, destroy and the capture state of a stream. A refused capture
//! call is `Error::Capture`.

use super::{plugin_call, Handle, LoadedPlugin};
use crate::sys::*;
use devstream_core::{Error, Result};
use std::ffi::{c_void, CStr};

/// The graph-capture functions of a plug-in known to have filled the Paddle 3.3 table.
#[derive(Clone, Copy)]
pub(crate) struct CaptureFns {
    begin: unsafe extern "C" fn(C_Device, C_Stream, C_StreamCaptureMode) -> C_Status,
    end: unsafe extern "C" fn(C_Device, C_Stream, *mut C_CudaGraph) -> C_Status,
    instantiate: unsafe extern "C" fn(
        *mut C_GraphExec,
        *mut C_CudaGraph,
        *mut *mut c_void,
        *mut std::ffi::c_char,
        usize,
    ) -> C_Status,
    launch: unsafe extern "C" fn(C_Device, C_GraphExec, C_Stream) -> C_Status,
    destroy_graph: unsafe extern "C" fn(C_CudaGraph) -> C_Status,
    destroy_exec: unsafe extern "C" fn(C_GraphExec) -> C_Status,
    info: unsafe extern "C" fn(
        C_Device,
        C_Stream,
        *mut C_StreamCaptureStatus,
        *mut std::ffi::c_ulonglong,
        *mut C_CudaGraph,
        *mut C_CudaGraphNode,
        *mut *mut c_void,
        *mut usize,
    ) -> C_Status,
}

/// Where a plug-in stream's capture stands (`cuda_stream_capture_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CaptureState {
    None,
    /// Capturing into the capture with this id.
    Active(u64),
    /// Its capture was invalidated (it must still be ended).
    Invalidated(u64),
}

/// Bytes of the log buffer handed to `cuda_graph_instantiate`.
const INSTANTIATE_LOG: usize = 512;

impl LoadedPlugin {
    /// The capture functions, when the table is known to be the 3.3 one and has all that
    /// devstream needs (begin, end, instantiate, launch, both destroys, capture info).
    pub(crate) fn capture_functions(&self) -> Option<CaptureFns> {
        if self.layout.exact != Some(LAYOUT_PADDLE_3_3) {
            return None;
        }
        let t = &self.table;
        Some(CaptureFns {
            begin: t.cuda_stream_begin_capture?,
            end: t.cuda_stream_end_captrue?,
            instantiate: t.cuda_graph_instantiate?,
            launch: t.cuda_graph_launch?,
            destroy_graph: t.cuda_graph_destroy?,
            destroy_exec: t.cuda_graph_exec_destroy?,
            info: t.cuda_stream_capture_info?,
        })
    }

    fn capture_fns(&self, op: &'static str, slot: usize) -> Result<CaptureFns> {
        self.capture_functions()
            .ok_or_else(|| Error::unsupported(op, &self.place(slot)))
    }

    /// `cuda_stream_begin_capture`; a refusal is `Error::Capture`.
    pub(crate) fn begin_capture(
        &self,
        slot: usize,
        stream: Handle,
        mode: C_StreamCaptureMode,
    ) -> Result<()> {
        let fns = self.capture_fns("begin_capture", slot)?;
        self.bind(slot)?;
        // SAFETY: a valid device and stream; the mode is one of the header's values.
        let status =
            plugin_call(|| unsafe { (fns.begin)(self.device_ptr(slot), stream.stream(), mode) });
        self.check_capture("begin_capture", "cuda_stream_begin_capture", status)
    }

    /// `cuda_stream_end_captrue`: the captured graph; a refusal is `Error::Capture`.
    pub(crate) fn end_capture(&self, slot: usize, stream: Handle) -> Result<Handle> {
        let fns = self.capture_fns("end_capture", slot)?;
        self.bind(slot)?;
        let mut graph: C_CudaGraph = std::ptr::null_mut();
        // SAFETY: a valid device and stream, a zeroed out-parameter.
        let status = plugin_call(|| unsafe {
            (fns.end)(self.device_ptr(slot), stream.stream(), &mut graph)
        });
        self.check_capture("end_capture", "cuda_stream_end_captrue", status)?;
        Ok(Handle(graph as usize))
    }

    /// `cuda_graph_instantiate`: the executable graph.
    pub(crate) fn instantiate(&self, slot: usize, graph: Handle) -> Result<Handle> {
        let fns = self.capture_fns("end_capture", slot)?;
        let mut exec: C_GraphExec = std::ptr::null_mut();
        let mut graph: C_CudaGraph = graph.0 as C_CudaGraph;
        let mut error_node: *mut c_void = std::ptr::null_mut();
        let mut log = [0 as std::ffi::c_char; INSTANTIATE_LOG];
        // SAFETY: zeroed out-parameters, the graph this runtime's end_capture made and a log
        // buffer of the size passed.
        let status = plugin_call(|| unsafe {
            (fns.instantiate)(
                &mut exec,
                &mut graph,
                &mut error_node,
                log.as_mut_ptr(),
                INSTANTIATE_LOG,
            )
        });
        if status != C_SUCCESS {
            log[INSTANTIATE_LOG - 1] = 0;
            // SAFETY: a NUL-terminated buffer (its last byte is NUL).
            let text = unsafe { CStr::from_ptr(log.as_ptr()) }.to_string_lossy();
            return Err(Error::capture(
                "end_capture",
                format!(
                    "{} plug-in: cuda_graph_instantiate answered {} {text}",
                    self.device_type,
                    status.name()
                ),
            ));
        }
        Ok(Handle(exec as usize))
    }

    /// `cuda_graph_launch`.
    pub(crate) fn graph_launch(&self, slot: usize, exec: Handle, stream: Handle) -> Result<()> {
        let fns = self.capture_fns("Graph::launch", slot)?;
        self.bind(slot)?;
        // SAFETY: a valid device, an executable graph of this runtime and a stream.
        let status = plugin_call(|| unsafe {
            (fns.launch)(
                self.device_ptr(slot),
                exec.0 as C_GraphExec,
                stream.stream(),
            )
        });
        self.check("cuda_graph_launch", status)
    }

    /// `cuda_graph_exec_destroy` then `cuda_graph_destroy` (either handle may be null).
    pub(crate) fn destroy_graph(&self, slot: usize, graph: Handle, exec: Handle) -> Result<()> {
        let fns = self.capture_fns("Graph::drop", slot)?;
        let mut result = Ok(());
        if exec.0 != 0 {
            // SAFETY: an executable graph of this runtime, destroyed once, no launch pending.
            let status = plugin_call(|| unsafe { (fns.destroy_exec)(exec.0 as C_GraphExec) });
            result = self.check("cuda_graph_exec_destroy", status);
        }
        if graph.0 != 0 {
            // SAFETY: a graph of this runtime, destroyed once.
            let status = plugin_call(|| unsafe { (fns.destroy_graph)(graph.0 as C_CudaGraph) });
            let destroyed = self.check("cuda_graph_destroy", status);
            result = result.and(destroyed);
        }
        result
    }

    /// `cuda_stream_capture_info`: whether `stream` is capturing, and into which capture.
    pub(crate) fn capture_state(&self, slot: usize, stream: Handle) -> Result<CaptureState> {
        let fns = self.capture_fns("is_capturing", slot)?;
        self.bind(slot)?;
        let mut status: C_StreamCaptureStatus = C_StreamCaptureStatusNone;
        let mut id: std::ffi::c_ulonglong = 0;
        let mut graph: C_CudaGraph = std::ptr::null_mut();
        let mut dependencies: C_CudaGraphNode = std::ptr::null_mut();
        let mut edges: *mut c_void = std::ptr::null_mut();
        let mut count = 0usize;
        // SAFETY: a valid device and stream, zeroed out-parameters.
        let answered = plugin_call(|| unsafe {
            (fns.info)(
                self.device_ptr(slot),
                stream.stream(),
                &mut status,
                &mut id,
                &mut graph,
                &mut dependencies,
                &mut edges,
                &mut count,
            )
        });
        self.check("cuda_stream_capture_info", answered)?;
        // A status outside CUDA's three is a malformed answer, not "not capturing": taken as
        // none, devstream would hand a capturing stream's work to the plug-in as ordinary work,
        // and a host function's callback recorded into the plug-in's graph is one that graph
        // never gives back (a replay runs it again, a destroyed graph forgets it).
        if status == C_StreamCaptureStatusActive {
            Ok(CaptureState::Active(id))
        } else if status == C_StreamCaptureStatusInvalidated {
            Ok(CaptureState::Invalidated(id))
        } else if status == C_StreamCaptureStatusNone {
            Ok(CaptureState::None)
        } else {
            Err(self.malformed(format!(
                "cuda_stream_capture_info answered the capture status {status}, which is none \
                 of none (0), active (1) and invalidated (2)"
            )))
        }
    }

    /// A capture call's status: `C_SUCCESS` → `Ok`, anything else → `Error::Capture`.
    fn check_capture(&self, op: &'static str, call: &str, status: C_Status) -> Result<()> {
        if status == C_SUCCESS {
            return Ok(());
        }
        Err(Error::capture(
            op,
            format!(
                "{} plug-in: {call} answered {}",
                self.device_type,
                status.name()
            ),
        ))
    }
}
