//! Stream timelines: an opt-in recorder of every facade op, exported as Chrome trace-event JSON
//! (Perfetto, `chrome://tracing`) and as a self-contained SVG picture (cargo feature `trace`).
//!
//! ```
//! use devstream::{trace, Place, Stream};
//! # fn main() -> devstream::Result<()> {
//! let copy = Stream::new(&Place::Cpu)?;
//! let compute = Stream::new(&Place::Cpu)?;
//! trace::start();
//! trace::name_stream(&copy, "copy");
//! trace::label("load");
//! copy.launch_host_func(|| std::thread::sleep(std::time::Duration::from_millis(1)))?;
//! let loaded = copy.record_event()?;
//! compute.wait_event(&loaded)?;          // drawn as a flow arrow from copy to compute
//! compute.launch_host_func(|| {})?;
//! compute.synchronize()?;
//! let timeline = trace::stop();
//! assert_eq!(timeline.streams.len(), 2);
//! assert_eq!(timeline.flows.len(), 1);
//! let json = timeline.to_chrome_json(); // open in https://ui.perfetto.dev
//! let svg = timeline.to_svg();
//! assert!(json.contains("traceEvents") && svg.starts_with("<svg"));
//! # Ok(()) }
//! ```
//!
//! # What is recorded
//!
//! While a recording runs ([`start`] .. [`stop`]), every op called through the facade's
//! [`Stream`] methods and [`Graph::launch`](crate::Graph::launch), from any
//! thread, is recorded on its stream's track with its name, an optional [`label`], and its
//! **host submit span**: when the call entered and left the facade.
//!
//! Ops that put work in the stream's order (copies, fill, host functions, record, waits, flag
//! ops, graph launches) also get a **device span** where the place can time
//! (`capabilities().timing`: CPU, CUDA, HIP, wgpu with timestamp queries): the recorder records a
//! timed event on the stream just before and just after the op, and resolves them with
//! `elapsed` when the recording stops. This is written once, in the facade, for every backend.
//! Ops on a capturing stream get host spans only: no event is ever recorded into a capture.
//!
//! Device times are put on the host clock per place: all streams of a place are related through
//! `elapsed` between their first events, and the place's clock is then shifted as late as
//! causality allows (no op starts on the device before the host submitted it), which is exact
//! up to the launch latency of the earliest op that found its stream idle.
//!
//! `record`/`record_event` → `wait_event` pairs and `wait_stream` calls become **flows**: an
//! arrow from the op that recorded the event (for `wait_stream`: the other stream's last op)
//! to the waiting op.
//!
//! Memory pools are **counter tracks**: the used and reserved bytes of every pool that an
//! `alloc_from` took from, of the default pool of every `alloc`, and of pools given to
//! [`watch_pool`], sampled after every recorded op and when the recording stops (a buffer's
//! memory returns to its pool once its work is complete, so the drop shows at the next op).
//!
//! # Cost
//!
//! Without the cargo feature there is no recorder code on the op path. With it and no recording
//! running, each op pays one relaxed atomic load.
//! While recording, each op takes a short lock twice and, where timed, creates and records two
//! events; nothing on the op path waits for the device.
//!
//! # Chrome trace layout
//!
//! Each place has two processes: `<place> host submit` (category `host`) and `<place> device`
//! (category `device`, only where the place can time). Each stream is one thread (`tid` = the
//! stream id) in each, named by a `thread_name` metadata event. Flows are `ph: "s"` / `ph: "f"`
//! pairs (`bp: "e"`) with a shared id, drawn between device spans when both ends have one and
//! between host spans otherwise. Pools are counter events (`ph: "C"`, named after the track, args
//! `used` and `reserved` in bytes) in their place's host process. Timestamps are microseconds
//! since [`start`].

mod chrome;
mod collect;
pub(crate) mod recorder;
mod svg;

use crate::Stream;
use devstream_core::{Place, Priority};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Starts recording every facade op, from every thread. A recording that was running is
/// dropped.
pub fn start() {
    recorder::start();
}

/// Stops the recording and returns its timeline (empty if none was running).
///
/// Waits until the device has passed the timing events of the recorded ops (as
/// `torch.profiler` synchronizes), so call it once the traced work can finish: work gated on a
/// [`Flag`](crate::Flag) nobody will write would keep it waiting.
pub fn stop() -> Trace {
    match recorder::take() {
        Some(session) => collect::collect(session),
        None => Trace::empty(),
    }
}

/// Whether a recording runs now.
pub fn is_recording() -> bool {
    recorder::is_active()
}

/// Labels the next op the calling thread submits (shown instead of the op name), e.g.
/// `trace::label("H2D chunk 3")`. No effect when no recording runs.
pub fn label(text: impl Into<String>) {
    if recorder::is_active() {
        recorder::set_label(text.into());
    }
}

/// Samples `pool`'s used and reserved bytes in the running recording, as a counter track named
/// `name` ([`Trace::pools`]; Chrome trace `"C"` events). The pool of every `alloc_from` and
/// the default pool of every `alloc` are watched without this call (named `pool <id>`); call it
/// to name a track or to watch a pool before its first allocation. The recording holds the pool
/// until it stops.
pub fn watch_pool(pool: &crate::MemoryPool, name: impl Into<String>) {
    if recorder::is_active() {
        recorder::watch_pool(pool, Some(name.into()));
    }
}

/// Names `stream`'s track in the running recording (default: `stream <id>`).
pub fn name_stream(stream: &Stream, name: impl Into<String>) {
    if recorder::is_active() {
        recorder::name_stream(stream, name.into());
    }
}

/// A span of time, measured from the start of the recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// When it began.
    pub start: Duration,
    /// When it ended (never before `start`).
    pub end: Duration,
}

impl Span {
    /// `end - start`.
    pub fn duration(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }
}

/// A stream seen by a recording: one track.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TracedStream {
    /// The stream's place.
    pub place: Place,
    /// The stream's id ([`Stream::id`](crate::Stream::id)).
    pub id: u64,
    /// The track name: given by [`name_stream`], or `stream <id>`.
    pub name: String,
    /// The stream's priority.
    pub priority: Priority,
    /// Whether its ops could be timed on the device.
    pub timing: bool,
}

/// One recorded op.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TracedOp {
    /// Index of its stream in [`Trace::streams`].
    pub stream: usize,
    /// The op (`"copy_host_to_device"`, `"launch_host_func"`, `"wait_event"`, ...).
    pub op: &'static str,
    /// The label given with [`label`], if any.
    pub label: Option<String>,
    /// When the host call entered and left the facade.
    pub host: Span,
    /// When the device ran it, where the place can time it.
    pub device: Option<Span>,
}

impl TracedOp {
    /// The label if there is one, else the op name.
    pub fn name(&self) -> &str {
        self.label.as_deref().unwrap_or(self.op)
    }
}

/// What a flow stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlowKind {
    /// `wait_event` on an event that `from` recorded.
    Event,
    /// `wait_stream`: `from` is the other stream's last op before the wait.
    Stream,
}

/// A dependency between two ops: `to` waits for `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Flow {
    /// Index of the recording op in [`Trace::ops`].
    pub from: usize,
    /// Index of the waiting op in [`Trace::ops`].
    pub to: usize,
    /// Why `to` waits.
    pub kind: FlowKind,
}

/// A memory pool's counter track: its used and reserved bytes over the recording.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PoolTrack {
    /// The pool's place.
    pub place: Place,
    /// The pool's id ([`MemoryPool::id`](crate::MemoryPool::id)).
    pub id: u64,
    /// The track name: given by [`watch_pool`], or `pool <id>`.
    pub name: String,
    /// The samples in time order; a new one only where the statistics changed.
    pub samples: Vec<PoolSample>,
}

/// A pool's statistics at one moment of a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolSample {
    /// When it was taken, from the start of the recording.
    pub at: Duration,
    /// [`PoolStats::used_bytes`](crate::PoolStats::used_bytes) then.
    pub used_bytes: u64,
    /// [`PoolStats::reserved_bytes`](crate::PoolStats::reserved_bytes) then.
    pub reserved_bytes: u64,
}

/// A finished recording: streams, ops in submission order, and flows.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Trace {
    /// Every stream an op was recorded on (or named), in the order first seen.
    pub streams: Vec<TracedStream>,
    /// The ops, in the order their host calls began.
    pub ops: Vec<TracedOp>,
    /// Waits between ops.
    pub flows: Vec<Flow>,
    /// Memory pools sampled after every op and when the recording stopped (see
    /// [`watch_pool`]).
    pub pools: Vec<PoolTrack>,
    /// Wall-clock time of [`start`].
    pub started: SystemTime,
}

impl Trace {
    fn empty() -> Trace {
        Trace {
            streams: Vec::new(),
            ops: Vec::new(),
            flows: Vec::new(),
            pools: Vec::new(),
            started: SystemTime::now(),
        }
    }

    /// The end of the last span, host or device.
    pub fn end(&self) -> Duration {
        self.ops
            .iter()
            .flat_map(|op| std::iter::once(op.host.end).chain(op.device.map(|d| d.end)))
            .max()
            .unwrap_or_default()
    }

    /// The ops of stream `stream` (an index into [`Trace::streams`]).
    pub fn ops_of(&self, stream: usize) -> impl Iterator<Item = &TracedOp> {
        self.ops.iter().filter(move |op| op.stream == stream)
    }

    /// The timeline as Chrome trace-event JSON (see the [module docs](self) for the layout).
    pub fn to_chrome_json(&self) -> String {
        chrome::render(self)
    }

    /// The timeline as a self-contained SVG picture: one lane per stream, ops as labelled
    /// boxes on a time axis, flows as arrows, under the lanes a step chart of each pool's
    /// reserved and used bytes (labelled with the pool's name and peaks), a legend.
    pub fn to_svg(&self) -> String {
        svg::render(self)
    }

    /// Writes [`to_chrome_json`](Trace::to_chrome_json) to `path`.
    pub fn write_chrome_json(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.to_chrome_json())
    }

    /// Writes [`to_svg`](Trace::to_svg) to `path`.
    pub fn write_svg(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.to_svg())
    }
}
