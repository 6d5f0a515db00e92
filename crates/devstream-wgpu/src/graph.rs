//! Emulated capture: while a stream captures, its operations are recorded (with the buffers,
//! bind groups and bytes they need) instead of encoded; `WgpuGraph::launch` re-encodes them on
//! any stream of the device, every time.

use crate::buffer::{BufferInner, HostInner};
use crate::device::DeviceShared;
use crate::event::WgpuEvent;
use crate::flag::FlagInner;
use crate::graph_memory::CaptureMemory;
use crate::kernel::KernelInner;
use crate::stream::WgpuStream;
use crate::util::lock;
use devstream_core::capture::{self, CaptureRegistration, Invalidation, JoinClock};
use devstream_core::foreign::ForeignOutcome;
use devstream_core::ops::BufferOp;
use devstream_core::{
    CaptureMode, DeviceGraph, DevicePool, DeviceStream, Error, HostFn, Place, Result,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A host function shared by every launch of a graph (it runs once per launch).
pub(crate) type SharedHostFn = Arc<Mutex<HostFn>>;

/// wgpu's copies and fills: [`BufferOp`] over its shared buffer records.
pub(crate) type WgpuBufferOp = BufferOp<Arc<BufferInner>, Arc<HostInner>>;

/// One recorded operation.
#[derive(Clone)]
pub(crate) enum Op {
    Buffer(WgpuBufferOp),
    Dispatch {
        kernel: Arc<KernelInner>,
        bind_group: wgpu::BindGroup,
        /// The bound buffers: held so that their pools' blocks stay theirs while a graph can
        /// replay the dispatch.
        buffers: Vec<Arc<BufferInner>>,
        workgroups: [u32; 3],
    },
    HostFunc(SharedHostFn),
    Record(WgpuEvent),
    WaitEvent(WgpuEvent),
    WaitStream(WgpuStream),
    WaitFlag(Arc<FlagInner>, u32),
    WriteFlag(Arc<FlagInner>, u32),
    /// The report of another backend's work a captured wait held the stream for (behind that
    /// wait's `WaitFlag`): each replay makes an error of that work the launch stream's.
    Foreign(Arc<ForeignOutcome>),
    Graph(Arc<Vec<Op>>),
}

/// One capture: the origin stream that began it and every stream that joined it by waiting on
/// an event recorded inside it (CUDA's fork/join). Operations of all members are kept in one
/// list in the order they were captured, which is a topological order of the captured graph:
/// a launch replays them in that order on the one launch stream (wgpu runs one queue anyway).
pub(crate) struct Session {
    pub(crate) mode: CaptureMode,
    pub(crate) origin: u64,
    pub(crate) ops: Vec<Op>,
    /// Why the capture was invalidated, if it was.
    pub(crate) invalid: Invalidation,
    /// Member stream id → what its later work depends on: member id → sequence number.
    pub(crate) members: HashMap<u64, Clock>,
    pub(crate) ended: bool,
    /// What the capture's mode forbids (see `devstream_core::capture`), until it ends.
    registration: Option<CaptureRegistration>,
    /// The capture's private pool (`crate::graph_memory`), which its graph owns.
    pub(crate) memory: Arc<CaptureMemory>,
}

/// A vector clock over the members of a capture (keyed by stream id).
pub(crate) type Clock = JoinClock;

/// A capture shared by its member streams.
pub(crate) type SharedSession = Arc<Mutex<Session>>;

impl Session {
    /// Begins a capture on stream `origin` of `place`.
    pub(crate) fn begin(place: &Place, origin: u64, mode: CaptureMode) -> SharedSession {
        let mut members = HashMap::new();
        members.insert(origin, Clock::default());
        Arc::new(Mutex::new(Session {
            mode,
            origin,
            ops: Vec::new(),
            invalid: Invalidation::default(),
            members,
            ended: false,
            registration: Some(capture::register(place, mode, origin)),
            memory: Arc::new(CaptureMemory::new(place.clone())),
        }))
    }

    /// `Error::Capture` naming `op` when the capture takes no more work.
    pub(crate) fn usable(&self, op: &'static str) -> Result<()> {
        self.invalid.check(op)?;
        if self.ended {
            return Err(Error::capture(op, "the capture has ended"));
        }
        Ok(())
    }

    fn tick(&mut self, member: u64) {
        self.members.entry(member).or_default().advance(member);
    }

    /// Appends an operation of `member`, unless the capture was invalidated.
    pub(crate) fn push(&mut self, member: u64, op: Op) -> Result<()> {
        self.invalid.check("capture")?;
        self.tick(member);
        self.ops.push(op);
        Ok(())
    }

    /// Invalidates the capture (first reason wins).
    pub(crate) fn invalidate(&mut self, reason: String) {
        self.invalid.invalidate(reason);
    }

    /// What work recorded now on `member` captures (an event recorded inside the capture).
    pub(crate) fn snapshot(&mut self, member: u64) -> Clock {
        self.tick(member);
        self.members.get(&member).cloned().unwrap_or_default()
    }

    /// `member`'s later work waits for `clock` (a captured event or a captured stream).
    /// A stream that is not a member yet joins the capture.
    pub(crate) fn wait(&mut self, member: u64, clock: &Clock) {
        let joining = !self.members.contains_key(&member);
        self.members.entry(member).or_default().absorb(clock);
        if joining {
            // Joining is an event of its own: the origin must join the member back after it.
            self.tick(member);
        }
    }

    /// Ends the capture: every member leaves it; the graph's operations, or why not.
    pub(crate) fn end(&mut self) -> Result<Vec<Op>> {
        self.ended = true;
        self.registration = None;
        // Blocks cached for reuse go (those the operations use stay with them).
        drop(self.memory.end_capture());
        self.invalid.check("end_capture")?;
        let origin = self.members.get(&self.origin).cloned().unwrap_or_default();
        capture::check_joined(
            (self.origin, &origin),
            self.members.iter().map(|(member, clock)| (*member, clock)),
        )?;
        Ok(std::mem::take(&mut self.ops))
    }
}

/// Fails with `Error::Capture` when a capture in progress forbids the calling thread's
/// potentially unsafe calls (a blocking synchronize or query, a synchronous allocation) on
/// `place` (`devstream_core::capture`: while any thread captures there in
/// [`CaptureMode::Global`], or this thread in [`CaptureMode::ThreadLocal`]); the capture goes
/// on. One atomic load when nothing captures.
#[inline]
pub(crate) fn check_unsafe_call(place: &Place, op: &'static str) -> Result<()> {
    capture::check_unsafe_call(place, op)
}

/// Work captured from a wgpu stream, replayed by re-encoding it on a stream of the same device.
///
/// Host functions captured run once per launch; events recorded or waited on during capture
/// are recorded or waited on again at each launch; bytes given to `copy_from_host` during
/// capture were copied then and are uploaded at each launch.
#[derive(Clone)]
pub struct WgpuGraph {
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) ops: Arc<Vec<Op>>,
    pub(crate) mode: CaptureMode,
    /// The memory of the buffers allocated during the capture.
    pub(crate) memory: Arc<CaptureMemory>,
    /// For a graph whose replays use private memory, an event recorded after the previous
    /// launch (shared by the clones): the next launch waits for it.
    pub(crate) previous: Option<Arc<Mutex<Option<WgpuEvent>>>>,
}

devstream_core::debug_fields! { WgpuGraph, |self|
    place: self.device.place,
    ops: self.ops.len(),
    mode: self.mode,
}

impl WgpuGraph {
    /// The number of recorded operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether nothing was captured.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

impl DeviceGraph for WgpuGraph {
    type Stream = WgpuStream;

    fn place(&self) -> &Place {
        &self.device.place
    }

    fn launch(&self, stream: &WgpuStream) -> Result<()> {
        if !Arc::ptr_eq(&self.device, stream.device()) {
            return Err(Error::mismatch(
                "Graph::launch",
                &self.device.place,
                &stream.device().place,
            ));
        }
        let Some(previous) = &self.previous else {
            return stream.replay(&self.ops);
        };
        if stream.is_capturing()? {
            // Its replays and the other graph's would share the private memory.
            return Err(Error::unsupported(
                "launch into a capture of a graph that owns memory",
                &self.device.place,
            ));
        }
        // One replay at a time: after the previous launch, wherever it ran.
        let mut previous = lock(previous);
        if let Some(event) = previous.as_ref() {
            stream.wait_event(event)?;
        }
        stream.replay(&self.ops)?;
        *previous = Some(stream.record_event()?);
        Ok(())
    }

    fn memory_pool(&self) -> Result<Arc<dyn DevicePool>> {
        Ok(self.memory.clone())
    }
}
