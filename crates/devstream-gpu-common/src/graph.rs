//! Graphs from stream capture: instantiated once (`cuGraphInstantiate`), launched on any stream
//! of their device (`cuGraphLaunch`), every time.
//!
//! A graph owns what its captured work needs on the host: the closures of captured host
//! functions and the buffers its copies use. Dropping a graph with launches still queued
//! releases those only after the last launch completed.

use crate::device::{device_of, Device};
use crate::error::{check, map_error};
use crate::hostfn::{CaptureOwned, DefShared, GraphHostState, OwnedHostCall};
use crate::raw::{RawApi, RawEvent, RawGraph, RawGraphExec};
use crate::stream::GpuStream;
use devstream_core::{DeviceGraph, DevicePool, EventFlags, Place, Result};
use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex};

struct GraphInner<A: RawApi> {
    device: &'static Device<A>,
    graph: RawGraph,
    exec: RawGraphExec,
    owns_graph: bool,
    done: RawEvent,
    launch_lock: Mutex<()>,
    host_state: Option<Arc<GraphHostState>>,
    keep: Vec<Box<dyn Any + Send + Sync>>,
    def: Option<Arc<dyn Any + Send + Sync>>,
    /// The capture's private memory pool (`crate::graph_memory`).
    memory: Arc<dyn DevicePool>,
    /// Whether the replays use private memory: each launch then waits for the previous one.
    owns_memory: bool,
}

impl<A: RawApi> Drop for GraphInner<A> {
    fn drop(&mut self) {
        let exec = self.exec;
        let graph = self.graph;
        let owns_graph = self.owns_graph;
        let keep = std::mem::take(&mut self.keep);
        let def = self.def.take();
        let host_state = self.host_state.take();
        let done = self.done;
        let device = self.device;
        crate::hostfn::release_off_callback(move || {
            device.defer(
                vec![done],
                Box::new(move || {
                    // SAFETY: the last launch completed (the `done` event recorded after it
                    // has), so nothing uses the executable graph or the objects it owns.
                    let _ = unsafe { A::graph_exec_destroy(exec) };
                    if owns_graph {
                        // SAFETY: the graph came from end-capture and is ours.
                        let _ = unsafe { A::graph_destroy(graph) };
                    }
                    drop(keep);
                    drop(host_state);
                    drop(def);
                }),
            );
        });
    }
}

shared_handle! {
    /// A captured, instantiated graph (a cheap `Clone` handle).
    pub struct GpuGraph<A: RawApi> { inner: Arc<GraphInner<A>>, }
    debug(graph) {
        place: graph.inner.device.place,
        graph: graph.inner.graph,
        exec: graph.inner.exec,
        host_functions: graph.inner.host_state.is_some(),
    }
}

impl<A: RawApi> GpuGraph<A> {
    pub(crate) fn instantiate(
        device: &'static Device<A>,
        graph: RawGraph,
        def: Option<Arc<dyn Any + Send + Sync>>,
        owned: Option<CaptureOwned>,
    ) -> Result<Self> {
        let owns_graph = def.is_none();
        let destroy_graph = || {
            if owns_graph {
                // SAFETY: the graph is ours (from end-capture) and nothing else uses it.
                let _ = unsafe { A::graph_destroy(graph) };
            }
        };
        if let Err(e) = device.bind() {
            destroy_graph();
            return Err(e);
        }
        // SAFETY: the graph is alive and the device's context is current.
        let exec = match unsafe { A::graph_instantiate(graph) } {
            Ok(exec) => exec,
            Err(e) => {
                destroy_graph();
                return Err(map_error::<A>(e));
            }
        };
        // SAFETY: the context is current.
        let done = match unsafe { A::event_create(EventFlags::default()) } {
            Ok(event) => event,
            Err(e) => {
                // SAFETY: never launched.
                let _ = unsafe { A::graph_exec_destroy(exec) };
                destroy_graph();
                return Err(map_error::<A>(e));
            }
        };
        let memory = crate::graph_memory::graph_pool(owned.as_ref(), device);
        let (host_state, keep) = match owned.map(CaptureOwned::settle) {
            Some(owned) => {
                let host_functions = owned
                    .keep
                    .iter()
                    .filter(|k| k.is::<OwnedHostCall>())
                    .count();
                owned.host_state.set_per_launch(host_functions);
                ((host_functions > 0).then_some(owned.host_state), owned.keep)
            }
            None => (None, Vec::new()),
        };
        let owns_memory = crate::graph_memory::owns_memory(&memory);
        Ok(GpuGraph {
            inner: Arc::new(GraphInner {
                device,
                graph,
                exec,
                owns_graph,
                done,
                launch_lock: Mutex::new(()),
                host_state,
                keep,
                def,
                memory,
                owns_memory,
            }),
        })
    }

    /// The native graph.
    pub fn raw_graph(&self) -> RawGraph {
        self.inner.graph
    }

    /// The native executable graph.
    pub fn raw_exec(&self) -> RawGraphExec {
        self.inner.exec
    }

    /// Number of nodes in the captured graph.
    pub fn node_count(&self) -> Result<usize> {
        // SAFETY: the graph is alive.
        check::<A, _>(unsafe { A::graph_node_count(self.inner.graph) })
    }
}

impl<A: RawApi> DeviceGraph for GpuGraph<A> {
    type Stream = GpuStream<A>;

    fn place(&self) -> &Place {
        &self.inner.device.place
    }

    fn memory_pool(&self) -> Result<Arc<dyn DevicePool>> {
        if !self.inner.device.caps.capture_alloc {
            return Err(devstream_core::Error::unsupported(
                "Graph::memory_pool",
                &self.inner.device.place,
            ));
        }
        Ok(self.inner.memory.clone())
    }

    #[inline]
    fn launch(&self, stream: &GpuStream<A>) -> Result<()> {
        let inner = &self.inner;
        stream.same_device("launch", inner.device.ordinal)?;
        stream.bind()?;
        let _order = inner.launch_lock.lock();
        let raw = stream.raw();
        if inner.owns_memory {
            if stream.capture_sequence()?.0 != crate::raw::CaptureStatus::None {
                // Its replays and the other graph's would share the private memory.
                return Err(devstream_core::Error::unsupported(
                    "launch into a capture of a graph that owns memory",
                    &inner.device.place,
                ));
            }
            // One replay at a time: after the previous launch, wherever it ran (`done` is
            // recorded after every launch; never recorded, it is complete).
            // SAFETY: the event and the stream are alive and of the same device.
            check::<A, _>(unsafe { A::stream_wait_event(raw, inner.done) })?;
        }
        if let Some(state) = &inner.host_state {
            // This launch's host functions report panics to this stream.
            state.push_launch(stream.inner().panic_slot().clone());
            // SAFETY: the executable graph and the stream are alive and of the same device.
            if let Err(e) = unsafe { A::graph_launch(inner.exec, raw) } {
                state.cancel_launch();
                return Err(map_error::<A>(e));
            }
        } else {
            // SAFETY: as above.
            check::<A, _>(unsafe { A::graph_launch(inner.exec, raw) })?;
        }
        // SAFETY: the event and the stream are alive and of the same device.
        check::<A, _>(unsafe { A::event_record(inner.done, raw) })
    }
}

pub(crate) struct GraphDefInner<A: RawApi> {
    raw: RawGraph,
    device: &'static Device<A>,
    /// What captures into the definition left for every graph made from it.
    pub(crate) shared: Arc<DefShared>,
}

impl<A: RawApi> Drop for GraphDefInner<A> {
    fn drop(&mut self) {
        let raw = self.raw;
        let shared = self.shared.clone();
        crate::hostfn::release_off_callback(move || {
            // SAFETY: we own the graph; executable graphs instantiated from it are independent.
            let _ = unsafe { A::graph_destroy(raw) };
            drop(shared);
        });
    }
}

/// An empty graph to capture into (`cuGraphCreate`), for
/// [`GpuStream::begin_capture_to_graph`]. Several captures can append to one definition; the
/// definition keeps what their work uses for every graph made from it. A host function can be
/// captured into a definition only while a single capture appends to it, and a definition
/// holding one takes no further capture (each closure belongs to one graph).
pub struct GpuGraphDef<A: RawApi> {
    pub(crate) inner: Arc<GraphDefInner<A>>,
}

impl<A: RawApi> fmt::Debug for GpuGraphDef<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuGraphDef")
            .field("place", &self.inner.device.place)
            .field("raw", &self.inner.raw)
            .finish()
    }
}

impl<A: RawApi> GpuGraphDef<A> {
    /// A new empty graph on `place`.
    pub fn new(place: &Place) -> Result<Self> {
        let device = device_of::<A>(place)?;
        device.bind()?;
        // SAFETY: the runtime is loaded and the context current.
        let raw = check::<A, _>(unsafe { A::graph_create() })?;
        Ok(GpuGraphDef {
            inner: Arc::new(GraphDefInner {
                raw,
                device,
                shared: Arc::new(DefShared::default()),
            }),
        })
    }

    /// The native graph.
    pub fn raw_handle(&self) -> RawGraph {
        self.inner.raw
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.device.ordinal
    }

    /// Number of nodes.
    pub fn node_count(&self) -> Result<usize> {
        // SAFETY: the graph is alive.
        check::<A, _>(unsafe { A::graph_node_count(self.inner.raw) })
    }
}
