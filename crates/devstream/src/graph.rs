//! The facade graph.

use crate::dispatch::{GraphApi, Member};
use crate::Stream;
use devstream_core::{Place, Result};

crate::dispatch::facade_enum! {
    /// Work captured from a stream between `begin_capture` and `end_capture`; `launch` runs it on
    /// any stream of its place, every time.
    ///
    /// ```
    /// use devstream::{CaptureMode, Place, Stream};
    /// use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
    /// let s = Stream::new(&Place::Cpu).unwrap();
    /// let runs = Arc::new(AtomicU32::new(0));
    /// s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    /// let r = runs.clone();
    /// s.launch_host_func(move || { r.fetch_add(1, Ordering::SeqCst); }).unwrap();
    /// let graph = s.end_capture().unwrap();
    /// s.synchronize().unwrap();
    /// assert_eq!(runs.load(Ordering::SeqCst), 0, "captured work does not run");
    /// let other = Stream::new(&Place::Cpu).unwrap();
    /// graph.launch(&other).unwrap();
    /// graph.launch(&other).unwrap();
    /// other.synchronize().unwrap();
    /// assert_eq!(runs.load(Ordering::SeqCst), 2);
    /// ```
    pub enum Graph(GraphApi, "graph"): Clone
        = [CpuGraph, CudaGraph, HipGraph, WgpuGraph, PluginGraph];
}

impl Graph {
    /// The place the graph was captured on.
    #[inline]
    pub fn place(&self) -> &Place {
        GraphApi::place(self)
    }
    /// Runs the captured work on `stream` (any stream of the graph's place).
    #[inline]
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        crate::stream::spanned(
            || tracing::trace_span!("devstream.graph_launch", stream = stream.id()),
            || self.launch_unspanned(stream),
        )
    }

    /// [`Graph::launch`] inside its span, or without one when no subscriber listens.
    #[inline]
    fn launch_unspanned(&self, stream: &Stream) -> Result<()> {
        #[cfg(feature = "trace")]
        if crate::trace::recorder::is_active() {
            return crate::trace::recorder::traced(
                "devstream.graph_launch",
                stream,
                crate::trace::recorder::OpKind::Device,
                |_| GraphApi::launch(self, stream),
            );
        }
        GraphApi::launch(self, stream)
    }
    /// The backend handle inside.
    #[inline]
    pub fn backend<T: Member<Graph>>(&self) -> Option<&T> {
        T::unwrap_ref(self)
    }
}
