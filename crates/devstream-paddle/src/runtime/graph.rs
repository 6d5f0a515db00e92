//! Graph capture through the table: a capture begun on a stream (and joined by streams that
//! wait on its events), ended into a [`GraphObj`], instantiated (the same object: devstream's
//! graph launches as captured) and launched. Callbacks captured into a graph are told the
//! stream of the launch that runs them ([`LaunchOrder`]).

use super::failure::{fail, log_to_stderr, refuse, Check};
use super::{CustomRuntime, Status, StreamObj};
use crate::sys::C_Stream;
use devstream::{CaptureMode, Event, Graph};
use devstream_core::launch_calls::LaunchCalls;
use devstream_core::sync::lock;
use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A captured graph (`C_CudaGraph`) or its instantiation (`C_GraphExec`): devstream's graph is
/// launchable as captured, so both handles name the same object.
pub struct GraphObj {
    /// The device it was captured on.
    pub device: usize,
    /// The devstream graph.
    pub graph: Graph,
    /// Which launch the graph's callbacks belong to.
    order: Arc<LaunchOrder>,
    /// The end of the latest launch of a graph with callbacks (its stream's handle and an
    /// event recorded behind it); the lock serialises launches, so that [`LaunchOrder`]'s
    /// queue is in launch order.
    last_launch: Mutex<Option<(usize, Event)>>,
}

/// Tells the `stream_add_callback` callbacks captured into one graph the `C_Stream` of the
/// launch that runs them (their `stream` argument, where the host reports a failure).
///
/// A devstream graph, like a CUDA host node, does not tell a host function which launch runs
/// it. So the launches of a graph with callbacks run one after another, in launch order, each
/// after the previous one's end (CUDA orders launches of one executable graph that way; the
/// emulated captures of CPU and wgpu do not, so [`CustomRuntime::launch`] makes the launch stream
/// wait for the previous launch): the launches not finished yet are a queue, and the front
/// launch is done with its callbacks after as many of them as the graph captured have
/// returned ([`LaunchCalls`]).
#[derive(Default)]
pub struct LaunchOrder {
    /// The `C_Stream` handle of each launch not finished yet, in launch order.
    launches: Mutex<VecDeque<usize>>,
    /// The callbacks captured into the graph (each runs once per launch), and those of the
    /// front launch that have returned.
    pub(super) calls: LaunchCalls,
}

impl LaunchOrder {
    /// The stream handle of the launch whose callbacks run now, if a launch is queued.
    pub(super) fn current(&self) -> Option<usize> {
        lock(&self.launches).front().copied()
    }

    /// One callback of the front launch has returned (or unwound).
    fn call_done(&self) {
        if self.calls.call_done() {
            lock(&self.launches).pop_front();
        }
    }
}

/// Marks a callback of a graph done when dropped (also when the callback's failure unwinds).
pub(super) struct CallbackTurn(pub(super) Arc<LaunchOrder>);

impl Drop for CallbackTurn {
    fn drop(&mut self) {
        self.0.call_done();
    }
}

impl CustomRuntime {
    /// Ends the capture a destroyed stream began through this table, discarding its graph
    /// (an invalidated capture ends with an error, ignored too). A capture must not outlive
    /// the stream that began it: while open it makes this thread's (`ThreadLocal`) or every
    /// thread's (`Global`) unsafe calls fail, keeps the streams that joined it capturing, and
    /// stops `create_stream` from probing destroyed streams for reuse.
    #[cold]
    pub(super) fn abandon_capture(&self, obj: &StreamObj) {
        let id = obj.capture_id.load(Ordering::SeqCst);
        if let Err(error) = obj.stream.end_capture() {
            tracing::debug!("devstream-paddle: ending a destroyed stream's capture: {error}");
        }
        if !obj.stream.is_capturing().unwrap_or(false) {
            self.capture_ended(obj, id);
        }
    }

    /// The bookkeeping of a capture begun through this table (number `id`) that `obj` no
    /// longer runs: answers the order of its graph's callbacks.
    fn capture_ended(&self, obj: &StreamObj, id: u64) -> Option<Arc<LaunchOrder>> {
        if obj.capturing.swap(false, Ordering::SeqCst) {
            self.open_captures.fetch_sub(1, Ordering::SeqCst);
        }
        obj.capture_id.store(0, Ordering::SeqCst);
        lock(&self.capture_orders).remove(&id)
    }

    /// `cuda_stream_begin_capture`: `mode` is a `C_StreamCaptureMode`. The null stream cannot
    /// capture (as in Paddle and CUDA).
    pub fn begin_capture(&self, device: usize, stream: C_Stream, mode: c_int) -> Status {
        if stream.is_null() {
            return Err(refuse(|| "the null stream cannot capture".into()));
        }
        let mode = match mode {
            crate::sys::C_StreamCaptureModeGlobal => CaptureMode::Global,
            crate::sys::C_StreamCaptureModeThreadLocal => CaptureMode::ThreadLocal,
            crate::sys::C_StreamCaptureModeRelaxed => CaptureMode::Relaxed,
            _ => return Err(refuse(|| format!("unknown capture mode {mode}"))),
        };
        let obj = self.stream(device, stream)?;
        obj.stream.begin_capture(mode).check("begin_capture")?;
        let id = self.next_capture.fetch_add(1, Ordering::SeqCst);
        lock(&self.capture_orders).insert(id, Arc::default());
        obj.capture_id.store(id, Ordering::SeqCst);
        obj.capturing.store(true, Ordering::SeqCst);
        self.open_captures.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// `cuda_stream_end_captrue`: ends the capture and answers the graph's handle.
    pub fn end_capture(&self, device: usize, stream: C_Stream) -> Status<usize> {
        let obj = self.stream(device, stream)?;
        let id = obj.capture_id.load(Ordering::SeqCst);
        let graph = obj.stream.end_capture();
        let mut order = None;
        if graph.is_ok() || !obj.stream.is_capturing().unwrap_or(false) {
            order = self.capture_ended(obj, id);
        }
        let graph = graph.check("end_capture")?;
        let handle = self.handle(false);
        let graph = GraphObj {
            device,
            graph,
            order: order.unwrap_or_default(),
            last_launch: Mutex::new(None),
        };
        lock(&self.graphs).insert(handle, Arc::new(graph));
        Ok(handle)
    }

    /// `cuda_stream_capture_info`: the capture status (a `C_StreamCaptureStatus`) and the
    /// capture's number.
    pub fn capture_info(&self, device: usize, stream: C_Stream) -> Status<(c_int, u64)> {
        let obj = self.stream(device, stream)?;
        let status = match obj.stream.is_capturing() {
            Ok(true) => crate::sys::C_StreamCaptureStatusActive,
            Ok(false) if obj.capturing.load(Ordering::SeqCst) => {
                crate::sys::C_StreamCaptureStatusInvalidated
            }
            Ok(false) => {
                // A joined stream leaves the capture when its origin ends it.
                obj.capture_id.store(0, Ordering::SeqCst);
                crate::sys::C_StreamCaptureStatusNone
            }
            Err(devstream::Error::Capture { .. }) => crate::sys::C_StreamCaptureStatusInvalidated,
            Err(error) => return Err(fail("cuda_stream_capture_info", error)),
        };
        Ok((status, obj.capture_id.load(Ordering::SeqCst)))
    }

    /// A graph handle from `end_capture` that is still alive.
    pub fn graph(&self, handle: usize) -> Status<Arc<GraphObj>> {
        lock(&self.graphs)
            .get(&handle)
            .cloned()
            .ok_or_else(|| refuse(|| format!("unknown graph handle {handle:#x}")))
    }

    /// `cuda_graph_instantiate`: an executable handle for a captured graph.
    pub fn instantiate(&self, graph: usize) -> Status<usize> {
        let graph = self.graph(graph)?;
        let handle = self.handle(true);
        lock(&self.execs).insert(handle, graph);
        Ok(handle)
    }

    /// `cuda_graph_launch`: runs the graph on `stream` (any stream of its device).
    ///
    /// A graph with captured callbacks is launched behind the end of its previous launch and
    /// its launch stream queued in its [`LaunchOrder`], so that each callback is told the
    /// `C_Stream` of the launch that runs it. Launched into a capture (the graph's work becomes
    /// part of another graph), its callbacks are told the stream they were captured on.
    pub fn launch(&self, device: usize, exec: usize, stream: C_Stream) -> Status {
        let graph = lock(&self.execs)
            .get(&exec)
            .cloned()
            .ok_or_else(|| refuse(|| format!("unknown graph exec handle {exec:#x}")))?;
        if graph.device != device {
            return Err(refuse(|| {
                format!(
                    "graph exec {exec:#x} belongs to device {}, not {device}",
                    graph.device
                )
            }));
        }
        let obj = self.stream(device, stream)?;
        if graph.order.calls.per_launch() == 0 || obj.in_capture() {
            return graph.graph.launch(&obj.stream).check("cuda_graph_launch");
        }
        let mut last = lock(&graph.last_launch);
        if let Some((previous, end)) = &*last {
            if *previous != obj.handle.load(Ordering::Acquire) {
                obj.stream
                    .wait_event(end)
                    .check("cuda_graph_launch (waiting for the previous launch)")?;
            }
        }
        lock(&graph.order.launches).push_back(obj.handle.load(Ordering::Acquire));
        if let Err(error) = graph.graph.launch(&obj.stream) {
            lock(&graph.order.launches).pop_back();
            return Err(fail("cuda_graph_launch", error));
        }
        match obj.stream.record_event() {
            Ok(end) => *last = Some((obj.handle.load(Ordering::Acquire), end)),
            Err(error) => {
                // The launch is queued: answer success. The next launch cannot be ordered
                // behind it, so a callback of either may be told the other's stream.
                *last = None;
                tracing::warn!(
                    "devstream-paddle: cuda_graph_launch: recording the launch's end: {error}"
                );
                if log_to_stderr() {
                    eprintln!(
                        "devstream-paddle: cuda_graph_launch: recording the launch's end: {error}"
                    );
                }
            }
        }
        Ok(())
    }

    /// `cuda_graph_destroy`.
    pub fn destroy_graph(&self, graph: usize) -> Status {
        lock(&self.graphs)
            .remove(&graph)
            .map(drop)
            .ok_or_else(|| refuse(|| format!("unknown graph handle {graph:#x}")))
    }

    /// `cuda_graph_exec_destroy`.
    pub fn destroy_exec(&self, exec: usize) -> Status {
        lock(&self.execs)
            .remove(&exec)
            .map(drop)
            .ok_or_else(|| refuse(|| format!("unknown graph exec handle {exec:#x}")))
    }
}
