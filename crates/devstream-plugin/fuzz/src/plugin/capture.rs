//! The instance's graph capture: begin and end, instantiation, launch (a replay of the
//! captured nodes), destruction and the capture status.

use super::*;

impl Instance {
    pub(super) fn begin_capture(&self, device: C_Device, stream: C_Stream) -> C_Status {
        self.check_device(device, "cuda_stream_begin_capture");
        let draw = self.draw(Call::BeginCapture);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let handle = stream as usize;
        let Some(s) = Self::stream(&mut state, handle, "cuda_stream_begin_capture") else {
            return C_ERROR;
        };
        if let Some(id) = s.capture {
            Self::invalidate(&mut state, id);
            return C_ERROR;
        }
        if !act {
            return status;
        }
        let id = state.next_capture;
        state.next_capture += 1;
        state.streams.get_mut(&handle).expect("present").capture = Some(id);
        state.captures.insert(
            id,
            CaptureObj {
                born: self.born(),
                origin: handle,
                members: vec![handle],
                nodes: Vec::new(),
                invalidated: false,
                ended: false,
            },
        );
        status
    }

    pub(super) fn end_capture(
        &self,
        device: C_Device,
        stream: C_Stream,
        out: *mut C_CudaGraph,
    ) -> C_Status {
        self.check_device(device, "cuda_stream_end_captrue");
        Self::check_zeroed(out, "cuda_stream_end_captrue");
        let draw = self.draw(Call::EndCapture);
        let mut state = self.state();
        let handle = stream as usize;
        let Some(s) = Self::stream(&mut state, handle, "cuda_stream_end_captrue") else {
            return C_ERROR;
        };
        let Some(id) = s.capture else {
            return C_ERROR;
        };
        if state.captures[&id].origin != handle {
            return C_ERROR;
        }
        let mut capture = state.captures.remove(&id).expect("present");
        capture.ended = true;
        for member in &capture.members {
            if let Some(s) = state.streams.get_mut(member) {
                if s.capture == Some(id) {
                    s.capture = None;
                }
            }
        }
        // Events recorded into it stand for no work any more; questions are answered again.
        state.captures.insert(
            id,
            CaptureObj {
                born: capture.born.clone(),
                origin: handle,
                members: Vec::new(),
                nodes: Vec::new(),
                invalidated: capture.invalidated,
                ended: true,
            },
        );
        if capture.invalidated {
            return C_ERROR;
        }
        let nodes = Arc::new(capture.nodes);
        self.write_handle(&mut state, draw, Kind::Graph, out, &mut |state| {
            let handle = self.fresh(state);
            state.graphs.insert(handle, self.graph_obj(&nodes));
            handle
        })
    }

    /// A graph (or executable graph) of `nodes`, held once: by the handle it is stored under.
    fn graph_obj(&self, nodes: &Arc<Vec<Node>>) -> GraphObj {
        GraphObj {
            born: self.born(),
            refs: 1,
            nodes: nodes.clone(),
        }
    }

    pub(super) fn instantiate(
        &self,
        exec: *mut C_GraphExec,
        graph: *mut C_CudaGraph,
        log: *mut c_char,
        log_size: usize,
    ) -> C_Status {
        Self::check_zeroed(exec, "cuda_graph_instantiate");
        if graph.is_null() {
            violation!("cuda_graph_instantiate: a null graph pointer");
        }
        let draw = self.draw(Call::Instantiate);
        if let Some(v) = draw {
            if v % 8 == 5 && !log.is_null() {
                // A log filling the whole buffer, without a terminating NUL.
                // SAFETY: devstream's log buffer of `log_size` bytes.
                unsafe { std::ptr::write_bytes(log, b'x', log_size) };
            }
        }
        let mut state = self.state();
        // SAFETY: devstream's pointer to the graph handle.
        let g = unsafe { *graph } as usize;
        Self::check(&state, Kind::Graph, g, "cuda_graph_instantiate");
        let Some(nodes) = state.graphs.get(&g).map(|g| g.nodes.clone()) else {
            return C_ERROR;
        };
        self.write_handle(&mut state, draw, Kind::Exec, exec, &mut |state| {
            let handle = self.fresh(state);
            state.execs.insert(handle, self.graph_obj(&nodes));
            handle
        })
    }

    pub(super) fn graph_launch(
        &'static self,
        device: C_Device,
        exec: C_GraphExec,
        stream: C_Stream,
    ) -> C_Status {
        self.check_device(device, "cuda_graph_launch");
        let draw = self.draw(Call::GraphLaunch);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let (x, s) = (exec as usize, stream as usize);
        Self::check(&state, Kind::Exec, x, "cuda_graph_launch");
        let Some(capture) = Self::stream(&mut state, s, "cuda_graph_launch").map(|s| s.capture)
        else {
            return C_ERROR;
        };
        let Some(nodes) = state.execs.get(&x).map(|g| g.nodes.clone()) else {
            return C_ERROR;
        };
        if capture.is_some() {
            return C_ERROR;
        }
        if act {
            self.push(&mut state, s, Task::Launch(nodes));
        }
        status
    }

    pub(super) fn graph_destroy(&self, kind: Kind, handle: usize) -> C_Status {
        let draw = self.draw(Call::GraphDestroy);
        let (act, status) = draw.map_or((true, C_SUCCESS), Self::odd_status);
        let mut state = self.state();
        let call = if kind == Kind::Graph {
            "cuda_graph_destroy"
        } else {
            "cuda_graph_exec_destroy"
        };
        Self::check(&state, kind, handle, call);
        if !act || handle == 0 {
            return status;
        }
        Self::take(&mut state, kind, handle, call);
        let map = if kind == Kind::Graph {
            &mut state.graphs
        } else {
            &mut state.execs
        };
        if let Some(g) = map.get_mut(&handle) {
            g.refs -= 1;
            if g.refs == 0 {
                map.remove(&handle);
            }
        }
        status
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn capture_info(
        &self,
        device: C_Device,
        stream: C_Stream,
        status_out: *mut C_StreamCaptureStatus,
        id_out: *mut c_ulonglong,
        graph_out: *mut C_CudaGraph,
        _dependencies: *mut C_CudaGraphNode,
        _edges: *mut *mut c_void,
        _count: *mut usize,
    ) -> C_Status {
        self.maybe_reenter(Call::CaptureInfo);
        self.check_device(device, "cuda_stream_capture_info");
        let draw = self.draw(Call::CaptureInfo);
        let mut state = self.state();
        let Some(s) = Self::stream(&mut state, stream as usize, "cuda_stream_capture_info") else {
            return C_ERROR;
        };
        let current = s.capture;
        let (status, id) = match current {
            None => (C_StreamCaptureStatusNone, 0),
            Some(id) if state.captures[&id].invalidated => (C_StreamCaptureStatusInvalidated, id),
            Some(id) => (C_StreamCaptureStatusActive, id),
        };
        let (status, id, answer) = match draw.map(|v| v % 4) {
            None => (status, id, C_SUCCESS),
            Some(0) => return C_ERROR,
            Some(1) => (7, id, C_SUCCESS),
            Some(2) => (status, id + 1000, C_SUCCESS),
            Some(_) => (C_StreamCaptureStatusActive, id, C_SUCCESS),
        };
        // SAFETY: devstream's out-parameters (null ones are skipped).
        unsafe {
            if !status_out.is_null() {
                *status_out = status;
            }
            if !id_out.is_null() {
                *id_out = id;
            }
            if !graph_out.is_null() {
                *graph_out = std::ptr::null_mut();
            }
        }
        answer
    }
}
