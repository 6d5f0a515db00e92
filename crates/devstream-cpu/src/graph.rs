//! Emulated stream capture and graph replay.
//!
//! `begin_capture` starts a [`Session`] with the capturing stream as lane 0. Operations
//! submitted to a capturing stream become graph nodes; each lane keeps a *frontier* (the nodes
//! its next node depends on). Recording an event on a capturing stream makes the event stand
//! for that frontier; a stream that waits on such an event (or `wait_stream`s a capturing
//! stream) joins the session as a new lane (fork), and a capturing stream that waits on it adds
//! those nodes to its frontier (join). `end_capture` on the origin checks that every lane was
//! joined back (CUDA's `cudaErrorStreamCaptureUnjoined`) and returns a [`CpuGraph`].
//!
//! Joins are tracked with version vectors ([`devstream_core::capture::JoinClock`], keyed by lane):
//! a lane's own version increases when it forks into the capture and with every node it adds; an
//! event carries its lane's vector; waiting on it takes the elementwise maximum. A lane is joined
//! back when the origin's vector covers the lane's own version
//! ([`devstream_core::capture::check_joined`]).

use crate::buffer::BufferData;
use crate::graph_memory::CaptureMemory;
use crate::scheduler::{CommonOp, Op};
use crate::stream::StreamInner;
use crate::{lock, CPU_PLACE};
use devstream_core::capture::{self, CaptureRegistration, Invalidation, JoinClock};
use devstream_core::ops::BufferOp;
use devstream_core::{next_id, CaptureMode, DeviceGraph, DevicePool, Error, Place, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// A node of a captured graph.
#[derive(Clone)]
pub(crate) struct Node {
    pub(crate) op: CommonOp,
    /// Nodes (by index, always smaller than this node's) that must complete first.
    pub(crate) deps: Vec<usize>,
    /// The stream of the capture that submitted it (0: the origin).
    pub(crate) lane: usize,
}

/// What an event recorded on a capturing stream stands for.
#[derive(Clone, Debug, Default)]
pub(crate) struct Frontier {
    /// Nodes later work depends on.
    pub(crate) nodes: Vec<usize>,
    /// The lanes' work this state has absorbed (members keyed by lane index).
    covers: JoinClock,
}

impl Frontier {
    fn absorb(&mut self, other: &Frontier) {
        for node in &other.nodes {
            if !self.nodes.contains(node) {
                self.nodes.push(*node);
            }
        }
        self.covers.absorb(&other.covers);
    }

    fn bump(&mut self, lane: usize) {
        self.covers.advance(lane as u64);
    }
}

struct Lane {
    stream: Weak<StreamInner>,
    frontier: Frontier,
}

struct SessionState {
    nodes: Vec<Node>,
    lanes: Vec<Lane>,
    invalid: Invalidation,
}

/// One capture sequence, shared by the streams taking part in it.
pub(crate) struct Session {
    active: AtomicBool,
    /// The capture's private pool (`crate::graph_memory`), which its graph owns.
    memory: Arc<CaptureMemory>,
    /// What the capture's mode forbids (see `devstream_core::capture`), until it ends.
    registration: Mutex<Option<CaptureRegistration>>,
    state: Mutex<SessionState>,
}

impl Session {
    /// Starts a session with `origin` as lane 0.
    pub(crate) fn begin(mode: CaptureMode, origin: &Arc<StreamInner>) -> Arc<Session> {
        Arc::new(Session {
            active: AtomicBool::new(true),
            memory: Arc::new(CaptureMemory::new(CPU_PLACE.clone())),
            registration: Mutex::new(Some(capture::register(&CPU_PLACE, mode, origin.id))),
            state: Mutex::new(SessionState {
                nodes: Vec::new(),
                lanes: vec![Lane {
                    stream: Arc::downgrade(origin),
                    frontier: Frontier::default(),
                }],
                invalid: Invalidation::default(),
            }),
        })
    }

    /// Whether the capture has not ended yet.
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Marks the capture invalid: `end_capture` will fail with `reason`.
    pub(crate) fn invalidate(&self, reason: impl Into<String>) {
        let mut state = lock(&self.state);
        state.invalid.invalidate(reason);
    }

    fn usable<'a>(
        &self,
        state: &'a mut SessionState,
        op: &'static str,
    ) -> Result<&'a mut SessionState> {
        state.invalid.check(op)?;
        if !self.is_active() {
            return Err(Error::capture(op, "the capture has ended"));
        }
        Ok(state)
    }

    /// The capture's private pool.
    pub(crate) fn memory(&self) -> &Arc<CaptureMemory> {
        &self.memory
    }

    /// A cached block of `class` bytes for a buffer of `lane`, whose next node then also
    /// depends on the nodes the block's reuse must follow (see `crate::graph_memory`); `None`
    /// when none is cached. `Error::Capture` when the capture cannot take work.
    pub(crate) fn reuse(&self, lane: usize, class: usize) -> Result<Option<Arc<BufferData>>> {
        let mut guard = lock(&self.state);
        let state = self.usable(&mut guard, "alloc")?;
        if class == 0 {
            return Ok(None);
        }
        let Some((data, after)) = self.memory.take(class) else {
            return Ok(None);
        };
        let frontier = &mut state.lanes[lane].frontier.nodes;
        for node in after {
            if !frontier.contains(&node) {
                frontier.push(node);
            }
        }
        Ok(Some(data))
    }

    /// Every lane's frontier: every node captured so far precedes one of them. `None` once the
    /// capture has ended.
    pub(crate) fn all_work(&self) -> Option<Vec<usize>> {
        let state = lock(&self.state);
        if !self.is_active() {
            return None;
        }
        let mut nodes: Vec<usize> = Vec::new();
        for lane in &state.lanes {
            for node in &lane.frontier.nodes {
                if !nodes.contains(node) {
                    nodes.push(*node);
                }
            }
        }
        Some(nodes)
    }

    /// Adds a node on `lane` after the lane's frontier.
    pub(crate) fn add_node(&self, lane: usize, op: &'static str, common: CommonOp) -> Result<()> {
        let mut guard = lock(&self.state);
        let state = self.usable(&mut guard, op)?;
        let id = state.nodes.len();
        let frontier = &mut state.lanes[lane].frontier;
        let deps = std::mem::replace(&mut frontier.nodes, vec![id]);
        frontier.bump(lane);
        state.nodes.push(Node {
            op: common,
            deps,
            lane,
        });
        Ok(())
    }

    /// The nodes an event recorded on `lane` now stands for.
    pub(crate) fn frontier(&self, lane: usize, op: &'static str) -> Result<Frontier> {
        let mut guard = lock(&self.state);
        let state = self.usable(&mut guard, op)?;
        Ok(state.lanes[lane].frontier.clone())
    }

    /// `lane`'s later nodes also wait for `other` (a join).
    pub(crate) fn merge(&self, lane: usize, other: &Frontier, op: &'static str) -> Result<()> {
        let mut guard = lock(&self.state);
        let state = self.usable(&mut guard, op)?;
        state.lanes[lane].frontier.absorb(other);
        Ok(())
    }

    /// A stream joins the capture (a fork) starting from `frontier`; returns its lane.
    pub(crate) fn add_lane(
        &self,
        stream: &Arc<StreamInner>,
        mut frontier: Frontier,
        op: &'static str,
    ) -> Result<usize> {
        let mut guard = lock(&self.state);
        let state = self.usable(&mut guard, op)?;
        let lane = state.lanes.len();
        frontier.bump(lane);
        state.lanes.push(Lane {
            stream: Arc::downgrade(stream),
            frontier,
        });
        Ok(lane)
    }

    /// Captures a whole graph on `lane` (a graph launched on a capturing stream): its nodes are
    /// appended, its roots after the lane's frontier, and its sinks become the frontier.
    pub(crate) fn inline(&self, lane: usize, nodes: &[Node]) -> Result<()> {
        let mut guard = lock(&self.state);
        let state = self.usable(&mut guard, "CpuGraph::launch")?;
        if nodes.is_empty() {
            return Ok(());
        }
        let base = state.nodes.len();
        let frontier = std::mem::take(&mut state.lanes[lane].frontier.nodes);
        let mut has_successor = vec![false; nodes.len()];
        for node in nodes {
            for &dep in &node.deps {
                has_successor[dep] = true;
            }
        }
        for node in nodes {
            let deps = if node.deps.is_empty() {
                frontier.clone()
            } else {
                node.deps.iter().map(|dep| dep + base).collect()
            };
            state.nodes.push(Node {
                op: node.op.clone(),
                deps,
                lane,
            });
        }
        let lane_frontier = &mut state.lanes[lane].frontier;
        lane_frontier.nodes = (0..nodes.len())
            .filter(|&i| !has_successor[i])
            .map(|i| i + base)
            .collect();
        lane_frontier.bump(lane);
        Ok(())
    }

    /// Ends the capture: returns the nodes, the lanes' streams (to leave capture mode) and the
    /// graph or the reason it cannot be built.
    pub(crate) fn finish(&self) -> (Vec<Weak<StreamInner>>, Result<CpuGraph>) {
        self.active.store(false, Ordering::Release);
        drop(lock(&self.registration).take());
        // Blocks cached for reuse go back now (those the nodes use stay with them), under no
        // lock of the session.
        drop(self.memory.end_capture());
        let mut state = lock(&self.state);
        let streams = state.lanes.iter().map(|l| l.stream.clone()).collect();
        if let Err(invalid) = state.invalid.check("end_capture") {
            return (streams, Err(invalid));
        }
        let nodes = std::mem::take(&mut state.nodes);
        let joined = capture::check_joined(
            (0, &state.lanes[0].frontier.covers),
            state
                .lanes
                .iter()
                .enumerate()
                .map(|(index, lane)| (index as u64, &lane.frontier.covers)),
        );
        if let Err(unjoined) = joined {
            // Release the lock before the nodes (user closures) are dropped.
            drop(state);
            return (streams, Err(unjoined));
        }
        (streams, Ok(CpuGraph::new(nodes, self.memory.clone())))
    }
}

/// Fails with `Error::Capture` when a capture in progress forbids the calling thread's
/// potentially unsafe calls on the CPU place (`devstream_core::capture`: while any thread
/// captures in [`CaptureMode::Global`], or this thread in [`CaptureMode::ThreadLocal`]); the
/// capture goes on. One atomic load when nothing captures.
#[inline]
pub(crate) fn check_unsafe_call(op: &'static str) -> Result<()> {
    capture::check_unsafe_call(&CPU_PLACE, op)
}

struct GraphInner {
    id: u64,
    nodes: Vec<Node>,
    /// Number of lanes after compaction (lanes without nodes removed).
    lanes: usize,
    /// The capture's private pool: the memory of the buffers allocated during the capture.
    memory: Arc<CaptureMemory>,
    /// Whether the graph's replays use private memory: its launches are then serialised.
    owns_memory: bool,
    /// The helper streams and the previous launch; the lock also serialises the submission
    /// of launches of this graph.
    launches: Mutex<Launches>,
}

/// What launches of a graph share.
#[derive(Default)]
struct Launches {
    /// Helper streams for lanes 1.., created at the first launch.
    helpers: Vec<Arc<StreamInner>>,
    /// Where the previous launch ends (its stream and the count that stream reaches then),
    /// kept for graphs that own memory: the next launch starts after it.
    previous: Option<(Arc<StreamInner>, u64)>,
}

/// Work captured from CPU streams: a DAG of operations, replayable on any CPU stream, every
/// time, with [`DeviceGraph::launch`].
///
/// A launch runs after the launch stream's earlier work and before its later work. The DAG's
/// branches (the streams that were forked into the capture) replay on internal helper streams
/// owned by the graph, so independent branches run concurrently, joined by dependencies exactly
/// where the capture joined them; a graph captured from a single stream replays directly on the
/// launch stream. Host functions and kernels run once per launch (each is kept behind a mutex,
/// so concurrent launches of one graph take turns). Launches of one graph are submitted one at
/// a time. Launching on a capturing stream captures the whole graph into that capture.
///
/// Cheap to clone: clones share the graph.
///
/// ```
/// use devstream_core::{CaptureMode, DeviceBackend, DeviceGraph, DeviceStream, Place, StreamOptions};
/// use std::sync::{Arc, atomic::{AtomicU32, Ordering}};
/// let s = devstream_cpu::CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
/// let runs = Arc::new(AtomicU32::new(0));
/// s.begin_capture(CaptureMode::ThreadLocal).unwrap();
/// let r = runs.clone();
/// s.launch_host_func(Box::new(move || { r.fetch_add(1, Ordering::SeqCst); })).unwrap();
/// let graph = s.end_capture().unwrap();
/// graph.launch(&s).unwrap();
/// graph.launch(&s).unwrap();
/// s.synchronize().unwrap();
/// assert_eq!(runs.load(Ordering::SeqCst), 2);
/// ```
#[derive(Clone)]
pub struct CpuGraph(Arc<GraphInner>);

impl CpuGraph {
    fn new(mut nodes: Vec<Node>, memory: Arc<CaptureMemory>) -> CpuGraph {
        // Compact lanes: the origin lane stays 0 when it has nodes; a graph with one used lane
        // replays on the launch stream alone.
        let mut map: Vec<Option<usize>> = Vec::new();
        let mut lanes = 0;
        let origin_used = nodes.iter().any(|n| n.lane == 0);
        if origin_used {
            map.push(Some(0));
            lanes = 1;
        }
        for node in &mut nodes {
            if map.len() <= node.lane {
                map.resize(node.lane + 1, None);
            }
            let slot = &mut map[node.lane];
            let new_lane = *slot.get_or_insert_with(|| {
                lanes += 1;
                lanes - 1
            });
            node.lane = new_lane;
        }
        let owns_memory = memory.stats().is_ok_and(|stats| stats.reserved_bytes > 0);
        CpuGraph(Arc::new(GraphInner {
            id: next_id(),
            nodes,
            lanes,
            memory,
            owns_memory,
            launches: Mutex::new(Launches::default()),
        }))
    }

    /// A process-unique id.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Number of operations in the graph.
    pub fn node_count(&self) -> usize {
        self.0.nodes.len()
    }

    /// Number of concurrent branches the graph replays on (1 for a single-stream capture).
    pub fn branch_count(&self) -> usize {
        self.0.lanes
    }

    /// The dependency edges `(from, to)` between operations, by index in capture order.
    pub fn edges(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (index, node) in self.0.nodes.iter().enumerate() {
            for &dep in &node.deps {
                out.push((dep, index));
            }
        }
        out
    }
}

devstream_core::debug_fields! { CpuGraph, |self|
    id: self.0.id,
    nodes: self.0.nodes.len(),
    branches: self.0.lanes,
}

impl DeviceGraph for CpuGraph {
    type Stream = crate::CpuStream;

    fn place(&self) -> &Place {
        &CPU_PLACE
    }

    fn memory_pool(&self) -> Result<Arc<dyn DevicePool>> {
        Ok(self.0.memory.clone())
    }

    fn launch(&self, stream: &crate::CpuStream) -> Result<()> {
        let target = &stream.0;
        let graph = &self.0;
        if target.capturing.load(Ordering::Acquire) {
            if let Some((session, lane)) = target.capture_info() {
                if graph.owns_memory {
                    // Its replays and the other graph's would share the private memory.
                    return Err(Error::unsupported(
                        "launch into a capture of a graph that owns memory",
                        &CPU_PLACE,
                    ));
                }
                return session.inline(lane, &graph.nodes);
            }
        }
        if graph.nodes.is_empty() {
            return Ok(());
        }
        // The replay's copies of host buffers follow the host functions given those buffers
        // that are pending (`devstream_core::host_fn_access`), as direct copies do: the launch
        // stream waits for them before the replay forks, under the buffers' order locks (taken
        // in id order), which stay held while the replay's copies register.
        let mut hosts: Vec<&Arc<crate::buffer::HostInner>> = graph
            .nodes
            .iter()
            .filter_map(|node| match &node.op {
                CommonOp::Buffer(BufferOp::HostToDevice(transfer)) => Some(&transfer.src),
                CommonOp::Buffer(BufferOp::DeviceToHost(transfer)) => Some(&transfer.dst),
                _ => None,
            })
            .collect();
        hosts.sort_by_key(|host| host.id);
        hosts.dedup_by_key(|host| host.id);
        // Several buffers' order locks are held while waiting for their host functions to be
        // queued: under the registration lock, so that no host function given several of
        // them is halfway through registering, waiting for one of these locks
        // (`devstream_core::host_fn_access`, "Registration order is submission order").
        let _registering = (hosts.len() > 1).then(devstream_core::host_fn_access::registration);
        let _order: Vec<_> = hosts.iter().map(|host| lock(&host.order)).collect();
        for host in &hosts {
            for awaited in host.host_fns.awaited(&CPU_PLACE) {
                crate::foreign::wait_completion(target, awaited)?;
            }
        }
        let mut launches = lock(&graph.launches);
        let name = "CpuGraph::launch";
        // A graph that owns memory starts after its previous launch, wherever that runs.
        let previous = launches.previous.clone().filter(|_| graph.owns_memory);
        let after_previous = |pusher: &mut crate::stream::Pusher<'_>| {
            if let Some((stream, seq)) = &previous {
                pusher.wait_for(stream, *seq);
            }
        };
        if graph.lanes <= 1 {
            let end = target.queue(name, |pusher| {
                after_previous(pusher);
                for node in &graph.nodes {
                    pusher.push(Op::Common(node.op.clone()));
                }
                pusher.seq()
            })?;
            if graph.owns_memory {
                launches.previous = Some((target.clone(), end));
            }
            return Ok(());
        }
        if launches.helpers.is_empty() {
            for _ in 1..graph.lanes {
                launches.helpers.push(StreamInner::helper(target));
            }
        }
        let helpers = &launches.helpers;
        // Fork: every branch starts after the launch stream's earlier work (a marker on the
        // launch stream also applies its legacy-stream ordering).
        let start = target.queue(name, |pusher| {
            after_previous(pusher);
            pusher.push(Op::Nop)
        })?;
        for helper in helpers.iter() {
            helper.queue(name, |pusher| pusher.wait_for(target, start))?;
        }
        let lane_stream = |lane: usize| {
            if lane == 0 {
                target
            } else {
                &helpers[lane - 1]
            }
        };
        let mut done_at = vec![0u64; graph.nodes.len()];
        let mut latest: Vec<u64> = vec![0; graph.lanes];
        for (index, node) in graph.nodes.iter().enumerate() {
            latest.fill(0);
            for &dep in &node.deps {
                let lane = graph.nodes[dep].lane;
                if lane != node.lane {
                    latest[lane] = latest[lane].max(done_at[dep]);
                }
            }
            done_at[index] = lane_stream(node.lane).queue(name, |pusher| {
                for (lane, &seq) in latest.iter().enumerate() {
                    if seq > 0 {
                        pusher.wait_for(lane_stream(lane), seq);
                    }
                }
                pusher.push(Op::Common(node.op.clone()))
            })?;
        }
        // Join: the launch stream's later work waits for every branch.
        let end = target.queue(name, |pusher| {
            for helper in helpers.iter() {
                pusher.wait_for(helper, helper.submitted.load(Ordering::Acquire));
            }
            pusher.seq()
        })?;
        if graph.owns_memory {
            launches.previous = Some((target.clone(), end));
        }
        Ok(())
    }
}
