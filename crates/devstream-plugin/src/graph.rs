//! `PluginGraph`: a graph a plug-in captured through its graph-capture functions (Paddle 3.3
//! tables), or captured work of a Rust-registered backend.

use crate::capture::CaptureShared;
use crate::queue::{lock, reap, Item, Job, StreamCore};
use crate::repr::Repr;
use crate::runtime::{Handle, Runtime};
use crate::stream::{PluginStream, StreamRepr};
use devstream_core::{DeviceGraph, DeviceStream, Error, Place, Result};
use std::sync::{Arc, Mutex};

/// Captured work of a custom-device place.
///
/// On a plug-in place: the plug-in's captured graph and its instantiation
/// (`cuda_graph_instantiate`); `launch` is `cuda_graph_launch` on the stream. The graph keeps
/// what its replays use (host functions, buffers, staged bytes) and is destroyed
/// (`cuda_graph_exec_destroy`, `cuda_graph_destroy`) once dropped and its launches are
/// complete.
#[derive(Clone, Debug)]
pub struct PluginGraph(pub(crate) GraphRepr);

pub(crate) type GraphRepr = Repr<Arc<AbiGraph>, Arc<dyn devstream_core::dynamic::DynGraph>>;

/// A plug-in's graph.
pub(crate) struct AbiGraph {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) slot: usize,
    pub(crate) place: Place,
    pub(crate) graph: Handle,
    pub(crate) exec: Handle,
    /// What the replays use.
    pub(crate) kept: Arc<CaptureShared>,
    /// The streams it was launched on (its destruction waits for their work).
    users: Mutex<Vec<Arc<StreamCore>>>,
}

debug_some_fields!(AbiGraph as "AbiGraph" { place, graph, exec });

impl AbiGraph {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        slot: usize,
        graph: Handle,
        exec: Handle,
        kept: Arc<CaptureShared>,
    ) -> AbiGraph {
        AbiGraph {
            place: runtime.place(slot),
            runtime,
            slot,
            graph,
            exec,
            kept,
            users: Mutex::new(Vec::new()),
        }
    }

    fn launch(self: &Arc<Self>, core: &Arc<StreamCore>) -> Result<()> {
        if core.place != self.place {
            return Err(Error::mismatch("Graph::launch", &self.place, &core.place));
        }
        if crate::capture::submitting_into("Graph::launch", core)?.is_some() {
            return Err(Error::unsupported(
                "Graph::launch into a capturing stream",
                &core.place,
            ));
        }
        {
            let mut users = lock(&self.users);
            if !users.iter().any(|u| u.id == core.id) {
                users.push(core.clone());
            }
        }
        for memory in lock(&self.kept.devices).iter() {
            memory.used_by(core);
        }
        // Host buffers the replay copies into or out of: tracked like any copy, so host
        // reads and host functions given them wait for the launch, and the launch waits for
        // the host functions given them before.
        let hosts = lock(&self.kept.hosts).clone();
        // Marked when this function returns (the launch submitted, or refused).
        let queued = Arc::new(crate::buffer::Queued::default());
        let _queued = crate::buffer::QueuedOnDrop(queued.clone());
        let end = if hosts.is_empty() {
            None
        } else {
            let raw = core.new_raw()?;
            let mut host_fns = Vec::new();
            // Tracked on several buffers (each waiting, in `track`, for their latest host
            // function to be queued) under the registration lock, as a host function given
            // several buffers registers: otherwise this launch, tracked on one buffer and not
            // queued, and a host function given both, registered on the other and waiting for
            // this launch to be queued, would wait for each other
            // (`devstream_core::host_fn_access`, "Registration order is submission order").
            let registering = (hosts.len() > 1).then(devstream_core::host_fn_access::registration);
            for host in &hosts {
                host_fns.extend(host.track(core, raw.clone(), &queued));
            }
            drop(registering);
            crate::buffer::wait_for_host_fns(core, host_fns, &raw)?;
            Some(raw)
        };
        self.kept.launched_on(core);
        let graph = self.clone();
        core.submit(Item::Op(Box::new(move |core: &StreamCore| {
            let launched = core.runtime.graph_launch(core.slot, graph.exec, core.raw);
            // Recorded whatever the launch answered: a failed launch may have queued work.
            let recorded = match &end {
                Some(raw) => core.record_into(raw),
                None => Ok(()),
            };
            launched.and(recorded)
        })))
    }
}

impl Drop for AbiGraph {
    fn drop(&mut self) {
        let streams = std::mem::take(&mut *lock(&self.users));
        let (runtime, slot, graph, exec) = (self.runtime.clone(), self.slot, self.graph, self.exec);
        let kept = self.kept.clone();
        reap(Job::AfterStreams {
            streams,
            then: Box::new(move || {
                if let Err(error) = runtime.destroy_graph(slot, graph, exec) {
                    tracing::warn!("devstream-plugin: destroying a graph: {error}");
                }
                // The replays are over: what they used may go.
                drop(kept);
            }),
        });
    }
}

impl DeviceGraph for PluginGraph {
    type Stream = PluginStream;

    fn place(&self) -> &Place {
        self.0.either(|g| &g.place, |g| g.place())
    }

    fn memory_pool(&self) -> Result<Arc<dyn devstream_core::DevicePool>> {
        match &self.0 {
            GraphRepr::Abi(g) => Err(Error::unsupported("Graph::memory_pool", &g.place)),
            GraphRepr::Rust(g) => g.memory_pool(),
        }
    }

    fn launch(&self, stream: &PluginStream) -> Result<()> {
        match (&self.0, &stream.0) {
            (GraphRepr::Abi(g), StreamRepr::Abi(core)) => g.launch(core),
            (GraphRepr::Rust(g), StreamRepr::Rust(s)) => g.launch(s.as_ref()),
            (graph, _) => Err(Error::mismatch(
                "Graph::launch",
                match graph {
                    GraphRepr::Abi(g) => &g.place,
                    GraphRepr::Rust(g) => g.place(),
                },
                DeviceStream::place(stream),
            )),
        }
    }
}
