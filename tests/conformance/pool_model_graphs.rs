//! The captures and replays of the pool property test (`pool_model`), on places whose
//! `capture_alloc` is on: a program may begin a capture on one of its streams, fork its other
//! streams into it, allocate graph buffers on any of them (from the program's pool or the
//! default one: both must take the capture's private memory), fill, load, copy, read out and
//! drop them, end the capture, launch the graph on any of its streams (gated or not), keep
//! buffers past the graph, and drop graphs and buffers in any order. The rules checked are
//! `devstream_core::graph_memory`'s. Captures are `Relaxed`, so that the program's other steps
//! go on from the same thread meanwhile.
//!
//! Memory. The model follows every block of a capture's pool: a buffer dropped during the
//! capture caches its block, the next allocation of its size class takes the block cached last;
//! after the capture a block stays while the graph is alive and its captured work used it, or
//! while a live buffer holds it. During the capture the pool's statistics are predicted exactly
//! (nothing in it waits for stream work); afterwards `allocations` and the peaks are exact at
//! every step and `reserved_bytes` lies between what live holders keep and its peak, and is
//! exact once every stream has drained.
//!
//! Data. The host writes a fresh input value before each launch made while no gate holds a
//! stream (after the previous replay is complete); graph buffers are filled with constants,
//! loaded from the input, copied into one another, and copied out to host buffers of the
//! graph. The model keeps each buffer's content as runs of bytes (a constant, the replay's
//! input, or unknown: never written in this replay, which the rules leave undefined). A
//! replay's outputs are checked before the next launch overwrites them (where no gate holds
//! one) and at every drain; a buffer kept past its capture must hold the last replay's data.

use crate::harness::{sync, wait_until, PATIENCE};
use crate::pool_model::{fail, SIZES, STREAMS};
use devstream::{
    CaptureMode, DeviceBuffer, Event, Graph, HostBuffer, MemoryPool, Place, PoolStats, Stream,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::BTreeMap;

/// Slots for the buffers of captures (those kept past their capture included).
const GRAPH_SLOTS: usize = 4;
/// Bytes of a capture's input host buffer: the largest size a program allocates.
const INPUT_LEN: usize = SIZES[SIZES.len() - 1];

/// One step of captures and replays. Slot, size, graph and stream numbers are reduced modulo
/// their counts, and `lane` picks one of the capture's streams (the origin and those forked
/// into it); a step that does not apply in the program's state (no capture running, an empty
/// slot, a slot of another capture) does nothing. A captured step on one stream of the
/// capture that touches a buffer allocated or last touched on another first waits for that
/// stream, as a user of stream-ordered allocation must.
#[derive(Clone, Debug)]
pub enum GraphOp {
    /// Begins a capture on `stream` (when none runs).
    Begin { stream: usize },
    /// `stream` joins the running capture (waits for an event recorded on its origin).
    Fork { stream: usize },
    /// `slot` gets a buffer of `SIZES[size]` allocated in the capture on `lane`, by
    /// `alloc_from` with the program's pool (`from_pool`) or `alloc`; a buffer in the slot is
    /// dropped first.
    Alloc {
        slot: usize,
        size: usize,
        from_pool: bool,
        lane: usize,
    },
    /// Captures a fill of the slot's buffer with a constant.
    Fill { slot: usize, value: u8, lane: usize },
    /// Captures a copy of the capture's input host buffer into the slot's buffer.
    Load { slot: usize, lane: usize },
    /// Captures a copy of the first bytes of `from`'s buffer into `to`'s.
    Copy { from: usize, to: usize, lane: usize },
    /// Captures a copy of the slot's buffer out to a new host buffer, checked after replays.
    Read { slot: usize, lane: usize },
    /// Drops the slot's buffer (during its capture, or kept past it).
    Free { slot: usize },
    /// Ends the capture (its origin joins every forked stream first): a graph.
    End,
    /// Launches a live graph on `stream`.
    Launch { graph: usize, stream: usize },
    /// Drops a live graph (its launches still run).
    DropGraph { graph: usize },
    /// Resets the peaks of the running capture's pool.
    ResetPeak,
}

/// Steps of captures and replays, weighted so that most programs hold a capture or two.
pub fn graph_op_strategy() -> BoxedStrategy<GraphOp> {
    prop_oneof![
        3 => (0..STREAMS).prop_map(|stream| GraphOp::Begin { stream }),
        2 => (0..STREAMS).prop_map(|stream| GraphOp::Fork { stream }),
        6 => (0..GRAPH_SLOTS, 0..SIZES.len(), any::<bool>(), 0..STREAMS).prop_map(
            |(slot, size, from_pool, lane)| GraphOp::Alloc { slot, size, from_pool, lane }
        ),
        2 => (0..GRAPH_SLOTS, 1..128u8, 0..STREAMS)
            .prop_map(|(slot, value, lane)| GraphOp::Fill { slot, value, lane }),
        3 => (0..GRAPH_SLOTS, 0..STREAMS).prop_map(|(slot, lane)| GraphOp::Load { slot, lane }),
        2 => (0..GRAPH_SLOTS, 0..GRAPH_SLOTS, 0..STREAMS)
            .prop_map(|(from, to, lane)| GraphOp::Copy { from, to, lane }),
        4 => (0..GRAPH_SLOTS, 0..STREAMS).prop_map(|(slot, lane)| GraphOp::Read { slot, lane }),
        3 => (0..GRAPH_SLOTS).prop_map(|slot| GraphOp::Free { slot }),
        2 => Just(GraphOp::End),
        4 => (0..4usize, 0..STREAMS).prop_map(|(graph, stream)| GraphOp::Launch { graph, stream }),
        2 => (0..4usize).prop_map(|graph| GraphOp::DropGraph { graph }),
        1 => Just(GraphOp::ResetPeak),
    ]
    .boxed()
}

/// How each size of `SIZES` is rounded by a capture's pool: `reserved_bytes` of a capture
/// holding one buffer of that size.
pub fn learn_graph_classes(place: &Place) -> devstream::Result<[u64; SIZES.len()]> {
    let stream = Stream::new(place)?;
    let mut classes = [0; SIZES.len()];
    for (class, &len) in classes.iter_mut().zip(&SIZES) {
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let buffer = stream.alloc(len)?;
        *class = stream.capture_memory_pool()?.stats()?.reserved_bytes;
        drop(stream.end_capture()?);
        drop(buffer);
    }
    Ok(classes)
}

/// What the programs of a run exercised, printed with the run's result: a generator that
/// stopped reaching a case would show here.
#[derive(Clone, Copy, Debug, Default)]
pub struct Coverage {
    /// Captures begun.
    pub captures: u64,
    /// Allocations in a capture that reused a block dropped earlier in it.
    pub reuses: u64,
    /// Graph launches.
    pub launches: u64,
    /// Replays whose outputs were checked.
    pub replays_checked: u64,
    /// Buffers kept past their capture whose data was checked after a replay.
    pub kept_checked: u64,
    /// Of those, buffers whose graph had been dropped.
    pub kept_past_graph: u64,
    /// Drains while a capture ran.
    pub drains_in_capture: u64,
    /// Streams forked into a capture.
    pub forks: u64,
}

impl Coverage {
    /// Adds another program's counts.
    pub fn add(&mut self, other: &Coverage) {
        self.captures += other.captures;
        self.reuses += other.reuses;
        self.launches += other.launches;
        self.replays_checked += other.replays_checked;
        self.kept_checked += other.kept_checked;
        self.kept_past_graph += other.kept_past_graph;
        self.drains_in_capture += other.drains_in_capture;
        self.forks += other.forks;
    }
}

/// A byte of a graph buffer as the model knows it, in one replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Byte {
    /// Not written in this replay: undefined by the rules, never checked.
    Unknown,
    /// Filled with this value.
    Const(u8),
    /// The replay's input value.
    Input,
}

impl Byte {
    fn value(self, input: u8) -> Option<u8> {
        match self {
            Byte::Unknown => None,
            Byte::Const(value) => Some(value),
            Byte::Input => Some(input),
        }
    }
}

/// A buffer's content: runs of one [`Byte`] each, by their end offset (exclusive), ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Content(Vec<(usize, Byte)>);

impl Content {
    fn uniform(len: usize, byte: Byte) -> Self {
        Content(vec![(len, byte)])
    }

    fn len(&self) -> usize {
        self.0.last().map_or(0, |&(end, _)| end)
    }

    /// This content with its first `n` bytes taken from `source`.
    fn with_prefix(&self, source: &Content, n: usize) -> Content {
        let mut runs: Vec<(usize, Byte)> = Vec::new();
        let mut push = |end: usize, byte: Byte| match runs.last_mut() {
            Some(last) if last.1 == byte => last.0 = end,
            _ => runs.push((end, byte)),
        };
        for &(end, byte) in &source.0 {
            push(end.min(n), byte);
            if end >= n {
                break;
            }
        }
        for &(end, byte) in &self.0 {
            if end > n {
                push(end, byte);
            }
        }
        Content(runs)
    }

    /// The first offset where `got` differs from this content in a replay of `input`, with
    /// the byte expected there.
    fn mismatch(&self, got: &[u8], input: u8) -> Option<(usize, u8)> {
        if got.len() != self.len() {
            return Some((got.len().min(self.len()), 0));
        }
        let mut start = 0;
        for &(end, byte) in &self.0 {
            if let Some(want) = byte.value(input) {
                if let Some(at) = got[start..end].iter().position(|&b| b != want) {
                    return Some((start + at, want));
                }
            }
            start = end;
        }
        None
    }
}

/// A block of a capture's pool.
#[derive(Debug)]
struct Block {
    class: u64,
    /// Captured work touched it: the graph holds it while alive.
    in_graph: bool,
    /// A live buffer has it.
    held: bool,
}

/// What a capture's pool holds, block by block.
#[derive(Debug, Default)]
struct PoolModel {
    blocks: Vec<Block>,
    /// Per class, the blocks cached for reuse, the last cached last.
    cache: BTreeMap<u64, Vec<usize>>,
    capturing: bool,
    graph_alive: bool,
    peak_used: u64,
    peak_reserved: u64,
}

impl PoolModel {
    /// Whether the pool still reserves `block` (once every release has happened): during
    /// the capture every block is a buffer's or cached; afterwards a live buffer or the live
    /// graph's work holds it.
    fn kept(&self, block: &Block) -> bool {
        self.capturing || block.held || (block.in_graph && self.graph_alive)
    }

    /// Bytes the pool reserves once every release has happened.
    fn reserved(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| self.kept(b))
            .map(|b| b.class)
            .sum()
    }

    fn cached(&self) -> u64 {
        self.cache
            .values()
            .flatten()
            .map(|&i| self.blocks[i].class)
            .sum()
    }

    fn allocations(&self) -> u64 {
        self.blocks.iter().filter(|b| b.held).count() as u64
    }

    fn used(&self) -> u64 {
        self.reserved() - self.cached()
    }

    fn note_peaks(&mut self) {
        self.peak_used = self.peak_used.max(self.used());
        self.peak_reserved = self.peak_reserved.max(self.reserved());
    }

    /// A block of `class` for a new buffer: the one cached last, else a new one; and whether
    /// it was reused.
    fn take(&mut self, class: u64) -> (usize, bool) {
        let reused = self.cache.get_mut(&class).and_then(Vec::pop);
        let was_reused = reused.is_some();
        let block = reused.unwrap_or_else(|| {
            self.blocks.push(Block {
                class,
                in_graph: false,
                held: false,
            });
            self.blocks.len() - 1
        });
        self.blocks[block].held = true;
        self.note_peaks();
        (block, was_reused)
    }

    fn dropped(&mut self, block: usize) {
        self.blocks[block].held = false;
        if self.capturing {
            let class = self.blocks[block].class;
            self.cache.entry(class).or_default().push(block);
        }
    }

    /// Cached blocks count as used once the capture ends (those the graph's work does not
    /// hold are released right after), so the peak of used bytes rises to all it reserved.
    fn end_capture(&mut self) {
        self.peak_used = self.peak_used.max(self.reserved());
        self.capturing = false;
        self.graph_alive = true;
        self.cache.clear();
    }

    fn expected(&self) -> PoolStats {
        PoolStats {
            used_bytes: self.used(),
            reserved_bytes: self.reserved(),
            peak_used_bytes: self.peak_used,
            peak_reserved_bytes: self.peak_reserved,
            allocations: self.allocations(),
        }
    }
}

/// A host buffer a graph copies a buffer out to, and what each replay leaves there.
struct Output {
    host: HostBuffer,
    content: Content,
}

/// A capture and the graph it became.
struct Record {
    /// Number of the capture in the program (for messages).
    number: usize,
    graph: Option<Graph>,
    pool: MemoryPool,
    model: PoolModel,
    input: HostBuffer,
    /// The value the input holds now (for the next launch).
    input_value: u8,
    outputs: Vec<Output>,
    launches: u32,
    /// The input of the last launch, once launched.
    last_input: Option<u8>,
    /// Recorded after the last launch.
    last_done: Option<Event>,
    /// The last launch's outputs were checked.
    checked: bool,
}

/// A buffer allocated in a capture.
struct GraphBuffer {
    buffer: DeviceBuffer,
    record: usize,
    block: usize,
    content: Content,
    /// The stream of the capture that allocated it or whose captured work touched it last.
    last_stream: Option<usize>,
}

/// A stream taking part in the running capture.
struct Member {
    stream: usize,
    /// Recorded on the stream just before it took part: its work from before.
    before: Event,
}

/// The running capture.
struct Running {
    /// The origin first, then the streams forked into the capture.
    members: Vec<Member>,
    record: usize,
}

/// The captures, graphs and graph buffers of one program.
pub struct Captures<'a> {
    place: &'a Place,
    classes: &'a [u64; SIZES.len()],
    pool: &'a MemoryPool,
    streams: &'a [Stream],
    /// A stream of its own, never in a capture: host buffers and reads of kept buffers.
    checker: Stream,
    records: Vec<Record>,
    slots: BTreeMap<usize, GraphBuffer>,
    running: Option<Running>,
    next_input: u8,
    coverage: Coverage,
}

impl<'a> Captures<'a> {
    /// No capture yet, for a program over `streams` allocating from `pool`.
    pub fn new(
        place: &'a Place,
        classes: &'a [u64; SIZES.len()],
        pool: &'a MemoryPool,
        streams: &'a [Stream],
    ) -> devstream::Result<Self> {
        Ok(Captures {
            place,
            classes,
            pool,
            streams,
            checker: Stream::new(place)?,
            records: Vec::new(),
            slots: BTreeMap::new(),
            running: None,
            next_input: 128,
            coverage: Coverage::default(),
        })
    }

    /// The streams taking part in the running capture, which the program's other steps leave
    /// alone.
    pub fn members(&self) -> Vec<usize> {
        self.running.as_ref().map_or_else(Vec::new, |running| {
            running.members.iter().map(|m| m.stream).collect()
        })
    }

    /// The stream of the running capture that `lane` picks.
    fn lane(&self, lane: usize) -> usize {
        let members = &self.running.as_ref().expect("a capture runs").members;
        members[lane % members.len()].stream
    }

    /// The stream `lane` picks for a captured step on the slots' buffers, ordered after the
    /// captured work that allocated or touched them last on other streams of the capture;
    /// `None` (nothing done) unless every slot holds a buffer of the running capture.
    fn captured_step(
        &mut self,
        slots: &[usize],
        lane: usize,
    ) -> Result<Option<usize>, TestCaseError> {
        if slots.iter().any(|&slot| self.in_capture(slot).is_none()) {
            return Ok(None);
        }
        let stream = self.lane(lane);
        for slot in slots {
            let buffer = self.slots.get_mut(slot).expect("a buffer in the slot");
            if let Some(last) = buffer.last_stream.filter(|&last| last != stream) {
                self.streams[stream]
                    .wait_stream(&self.streams[last])
                    .map_err(fail)?;
            }
            buffer.last_stream = Some(stream);
        }
        Ok(Some(stream))
    }

    /// A fresh input value, never one a fill writes (those are below 128).
    fn fresh_input(&mut self) -> u8 {
        self.next_input = self.next_input.wrapping_add(1).max(128);
        self.next_input
    }

    /// The slot's buffer if it belongs to the running capture.
    fn in_capture(&self, slot: usize) -> Option<&GraphBuffer> {
        let running = self.running.as_ref()?;
        self.slots
            .get(&slot)
            .filter(|buffer| buffer.record == running.record)
    }

    fn live_graphs(&self) -> Vec<usize> {
        (0..self.records.len())
            .filter(|&i| self.records[i].graph.is_some())
            .collect()
    }

    /// Runs one step; `gated` says whether a gate holds some stream now.
    pub fn apply(&mut self, op: &GraphOp, gated: bool) -> Result<(), TestCaseError> {
        match *op {
            GraphOp::Begin { stream } => self.begin(stream)?,
            GraphOp::Fork { stream } => self.fork(stream)?,
            GraphOp::Alloc {
                slot,
                size,
                from_pool,
                lane,
            } => self.alloc(slot, size, from_pool, lane)?,
            GraphOp::Fill { slot, value, lane } => {
                let Some(stream) = self.captured_step(&[slot], lane)? else {
                    return Ok(());
                };
                let buffer = &self.slots[&slot].buffer;
                let len = buffer.len();
                self.streams[stream]
                    .fill(buffer, 0, len, value)
                    .map_err(fail)?;
                self.write(slot, |_| Content::uniform(len, Byte::Const(value)));
            }
            GraphOp::Load { slot, lane } => {
                let Some(stream) = self.captured_step(&[slot], lane)? else {
                    return Ok(());
                };
                let buffer = &self.slots[&slot];
                let len = buffer.buffer.len();
                let input = &self.records[buffer.record].input;
                self.streams[stream]
                    .copy_host_to_device(&buffer.buffer, 0, input, 0, len)
                    .map_err(fail)?;
                self.write(slot, |_| Content::uniform(len, Byte::Input));
            }
            GraphOp::Copy { from, to, lane } => {
                if from == to {
                    return Ok(());
                }
                let Some(stream) = self.captured_step(&[from, to], lane)? else {
                    return Ok(());
                };
                let (source, target) = (&self.slots[&from], &self.slots[&to]);
                let n = source.buffer.len().min(target.buffer.len());
                self.streams[stream]
                    .copy_device_to_device(&target.buffer, 0, &source.buffer, 0, n)
                    .map_err(fail)?;
                let source_content = source.content.clone();
                let source_block = source.block;
                let record = source.record;
                self.records[record].model.blocks[source_block].in_graph = true;
                self.write(to, |old| old.with_prefix(&source_content, n));
            }
            GraphOp::Read { slot, lane } => {
                let Some(stream) = self.captured_step(&[slot], lane)? else {
                    return Ok(());
                };
                let buffer = &self.slots[&slot];
                let len = buffer.buffer.len();
                let host = self.checker.alloc_host(len).map_err(fail)?;
                self.streams[stream]
                    .copy_device_to_host(&host, 0, &buffer.buffer, 0, len)
                    .map_err(fail)?;
                let (record, block, content) =
                    (buffer.record, buffer.block, buffer.content.clone());
                let record = &mut self.records[record];
                record.model.blocks[block].in_graph = true;
                record.outputs.push(Output { host, content });
            }
            GraphOp::Free { slot } => self.free(slot),
            GraphOp::End => self.end()?,
            GraphOp::Launch { graph, stream } => self.launch(graph, stream, gated)?,
            GraphOp::DropGraph { graph } => {
                let live = self.live_graphs();
                if !live.is_empty() {
                    let record = &mut self.records[live[graph % live.len()]];
                    record.graph = None;
                    record.model.graph_alive = false;
                }
            }
            GraphOp::ResetPeak => {
                if let Some(running) = &self.running {
                    let record = &mut self.records[running.record];
                    record.pool.reset_peak().map_err(fail)?;
                    record.model.peak_used = record.model.used();
                    record.model.peak_reserved = record.model.reserved();
                }
            }
        }
        self.check_bounds()
    }

    /// Captured work wrote the slot's buffer (its block is now the graph's).
    fn write(&mut self, slot: usize, content: impl FnOnce(&Content) -> Content) {
        let buffer = self.slots.get_mut(&slot).expect("a buffer in the slot");
        buffer.content = content(&buffer.content);
        self.records[buffer.record].model.blocks[buffer.block].in_graph = true;
    }

    fn begin(&mut self, stream: usize) -> Result<(), TestCaseError> {
        if self.running.is_some() {
            return Ok(());
        }
        let capturer = &self.streams[stream];
        let before = capturer.record_event().map_err(fail)?;
        let input = self.checker.alloc_host(INPUT_LEN).map_err(fail)?;
        let input_value = self.fresh_input();
        input
            .write(0, &vec![input_value; INPUT_LEN])
            .map_err(fail)?;
        // Relaxed: the program's other steps (synchronous allocations, drains of the other
        // streams) go on from this thread while the capture runs.
        capturer.begin_capture(CaptureMode::Relaxed).map_err(fail)?;
        let pool = capturer.capture_memory_pool().map_err(fail)?;
        self.records.push(Record {
            number: self.records.len(),
            graph: None,
            pool,
            model: PoolModel {
                capturing: true,
                ..PoolModel::default()
            },
            input,
            input_value,
            outputs: Vec::new(),
            launches: 0,
            last_input: None,
            last_done: None,
            checked: true,
        });
        self.coverage.captures += 1;
        self.running = Some(Running {
            members: vec![Member { stream, before }],
            record: self.records.len() - 1,
        });
        Ok(())
    }

    fn fork(&mut self, stream: usize) -> Result<(), TestCaseError> {
        let Some(running) = &mut self.running else {
            return Ok(());
        };
        if running.members.iter().any(|m| m.stream == stream) {
            return Ok(());
        }
        let forked = &self.streams[stream];
        let before = forked.record_event().map_err(fail)?;
        let fork = self.streams[running.members[0].stream]
            .record_event()
            .map_err(fail)?;
        forked.wait_event(&fork).map_err(fail)?;
        running.members.push(Member { stream, before });
        self.coverage.forks += 1;
        Ok(())
    }

    fn alloc(
        &mut self,
        slot: usize,
        size: usize,
        from_pool: bool,
        lane: usize,
    ) -> Result<(), TestCaseError> {
        let Some(running) = &self.running else {
            return Ok(());
        };
        let record = running.record;
        self.free(slot);
        let stream = self.lane(lane);
        let capturer = &self.streams[stream];
        let len = SIZES[size];
        let buffer = if from_pool {
            capturer.alloc_from(self.pool, len)
        } else {
            capturer.alloc(len)
        }
        .map_err(fail)?;
        let (block, reused) = self.records[record].model.take(self.classes[size]);
        self.coverage.reuses += u64::from(reused);
        self.slots.insert(
            slot,
            GraphBuffer {
                buffer,
                record,
                block,
                content: Content::uniform(len, Byte::Unknown),
                // Stream-ordered allocation: work on other streams of the capture waits for
                // the allocating stream first (a reuse is ordered on that stream).
                last_stream: Some(stream),
            },
        );
        Ok(())
    }

    fn free(&mut self, slot: usize) {
        if let Some(buffer) = self.slots.remove(&slot) {
            self.records[buffer.record].model.dropped(buffer.block);
        }
    }

    fn end(&mut self) -> Result<(), TestCaseError> {
        let Some(running) = self.running.take() else {
            return Ok(());
        };
        let origin = &self.streams[running.members[0].stream];
        for member in &running.members[1..] {
            origin
                .wait_stream(&self.streams[member.stream])
                .map_err(fail)?;
        }
        let graph = origin.end_capture().map_err(fail)?;
        let record = &mut self.records[running.record];
        let pool = graph.memory_pool().map_err(fail)?;
        prop_assert!(
            pool == record.pool,
            "{}: Graph::memory_pool is not the pool capture_memory_pool showed",
            self.place
        );
        record.graph = Some(graph);
        record.model.end_capture();
        Ok(())
    }

    fn launch(&mut self, graph: usize, stream: usize, gated: bool) -> Result<(), TestCaseError> {
        let live = self.live_graphs();
        if live.is_empty() || self.members().contains(&stream) {
            return Ok(());
        }
        let index = live[graph % live.len()];
        if !gated {
            // Every earlier replay can complete: check the last one, then give the next a
            // new input.
            self.check_outputs(index)?;
            let value = self.fresh_input();
            let record = &mut self.records[index];
            record
                .input
                .write(0, &vec![value; INPUT_LEN])
                .map_err(fail)?;
            record.input_value = value;
        }
        let launcher = &self.streams[stream];
        let record = &mut self.records[index];
        record
            .graph
            .as_ref()
            .expect("a live graph")
            .launch(launcher)
            .map_err(fail)?;
        record.last_done = Some(launcher.record_event().map_err(fail)?);
        record.launches += 1;
        self.coverage.launches += 1;
        record.last_input = Some(record.input_value);
        record.checked = false;
        Ok(())
    }

    /// Waits for the record's last launch and checks what it copied out.
    fn check_outputs(&mut self, index: usize) -> Result<(), TestCaseError> {
        let place = self.place;
        let record = &mut self.records[index];
        let (Some(done), Some(input)) = (&record.last_done, record.last_input) else {
            return Ok(());
        };
        if record.checked {
            return Ok(());
        }
        done.synchronize().map_err(fail)?;
        for (i, output) in record.outputs.iter().enumerate() {
            let got = output.host.to_vec().map_err(fail)?;
            if let Some((at, want)) = output.content.mismatch(&got, input) {
                prop_assert!(
                    false,
                    "{place}: graph {} launch {} (input {input}): output {i} byte {at} is {:?}, \
                     expected {want} ({:?})",
                    record.number,
                    record.launches,
                    got.get(at),
                    output.content
                );
            }
        }
        record.checked = true;
        self.coverage.replays_checked += u64::from(!record.outputs.is_empty());
        Ok(())
    }

    /// The statistics of every capture's pool against the model: exact while capturing
    /// (except peaks' and reserved bytes' deferred releases afterwards, bounded).
    fn check_bounds(&self) -> Result<(), TestCaseError> {
        let place = self.place;
        for record in &self.records {
            let stats = record.pool.stats().map_err(fail)?;
            let want = record.model.expected();
            if record.model.capturing {
                prop_assert_eq!(
                    stats,
                    want,
                    "{}: the pool of capture {} during the capture",
                    place,
                    record.number
                );
                continue;
            }
            prop_assert!(
                stats.allocations == want.allocations
                    && stats.peak_reserved_bytes == want.peak_reserved_bytes
                    && stats.peak_used_bytes == want.peak_used_bytes
                    && stats.reserved_bytes >= want.reserved_bytes
                    && stats.reserved_bytes <= want.peak_reserved_bytes
                    && stats.used_bytes == stats.reserved_bytes,
                "{place}: the pool of graph {} (alive: {}): {stats:?}, model (releases done) \
                 {want:?}",
                record.number,
                record.model.graph_alive
            );
        }
        Ok(())
    }

    /// Waits for the work of the capture's streams from before they took part (a drain cannot
    /// synchronize a capturing stream).
    pub fn wait_for_work_before_capture(&self) -> Result<(), TestCaseError> {
        for member in self.running.iter().flat_map(|running| &running.members) {
            member.before.synchronize().map_err(fail)?;
        }
        Ok(())
    }

    /// Every stream but the capture's has drained, and the capture's streams' work from before
    /// it ([`Captures::wait_for_work_before_capture`]): checks the last replay of every graph,
    /// every kept buffer's data and every capture's pool exactly.
    pub fn drain(&mut self) -> Result<(), TestCaseError> {
        self.coverage.drains_in_capture += u64::from(self.running.is_some());
        for index in 0..self.records.len() {
            self.check_outputs(index)?;
        }
        let place = self.place;
        let reader = &self.checker;
        for (slot, buffer) in &self.slots {
            let record = &self.records[buffer.record];
            let Some(input) = record.last_input.filter(|_| !record.model.capturing) else {
                continue;
            };
            let len = buffer.buffer.len();
            let host = reader.alloc_host(len).map_err(fail)?;
            reader
                .copy_device_to_host(&host, 0, &buffer.buffer, 0, len)
                .map_err(fail)?;
            sync(reader).map_err(fail)?;
            let got = host.to_vec().map_err(fail)?;
            self.coverage.kept_checked += 1;
            self.coverage.kept_past_graph += u64::from(!record.model.graph_alive);
            if let Some((at, want)) = buffer.content.mismatch(&got, input) {
                prop_assert!(
                    false,
                    "{place}: buffer in graph slot {slot} kept past graph {} (alive: {}), after \
                     {} launches (last input {input}): byte {at} is {:?}, expected {want} ({:?})",
                    record.number,
                    record.model.graph_alive,
                    record.launches,
                    got.get(at),
                    buffer.content
                );
            }
        }
        // A place may hold the frees of other graphs' blocks while any capture runs on it
        // (CUDA and HIP: a synchronous free would invalidate that capture); they come back
        // once it ends, which the drains after it and `finish` check exactly.
        let capture_running = self.running.is_some();
        for record in &self.records {
            let want = record.model.expected();
            if capture_running && !record.model.capturing {
                let stats = record.pool.stats().map_err(fail)?;
                prop_assert!(
                    stats.allocations == want.allocations
                        && stats.peak_reserved_bytes == want.peak_reserved_bytes
                        && stats.peak_used_bytes == want.peak_used_bytes
                        && stats.reserved_bytes >= want.reserved_bytes
                        && stats.reserved_bytes <= want.peak_reserved_bytes
                        && stats.used_bytes == stats.reserved_bytes,
                    "{place}: the pool of graph {} (alive: {}), drained while capture {} runs: \
                     {stats:?}, model (releases done) {want:?}",
                    record.number,
                    record.model.graph_alive,
                    self.running
                        .as_ref()
                        .map_or(0, |r| self.records[r.record].number)
                );
                continue;
            }
            // Where releases are deferred (after the work that used a block), a moment after.
            wait_until(PATIENCE, || {
                record.pool.stats().is_ok_and(|stats| {
                    stats.reserved_bytes <= want.reserved_bytes
                        && stats.allocations <= want.allocations
                })
            });
            let stats = record.pool.stats().map_err(fail)?;
            prop_assert_eq!(
                stats,
                want,
                "{}: the pool of capture {} (capturing: {}, graph alive: {}), drained",
                place,
                record.number,
                record.model.capturing,
                record.model.graph_alive
            );
        }
        Ok(())
    }

    /// Ends the running capture, launches every live graph once more, drains, then drops every
    /// graph and graph buffer: drained again, every capture's pool must hold nothing. Returns
    /// what the program exercised.
    pub fn finish(&mut self) -> Result<Coverage, TestCaseError> {
        self.end()?;
        for graph in 0..self.live_graphs().len() {
            self.launch(graph, 0, false)?;
        }
        for stream in self.streams {
            sync(stream).map_err(fail)?;
        }
        self.drain()?;
        self.slots.clear();
        for record in &mut self.records {
            record.graph = None;
            record.model.graph_alive = false;
            for block in &mut record.model.blocks {
                block.held = false;
            }
        }
        for stream in self.streams {
            sync(stream).map_err(fail)?;
        }
        self.drain()?;
        for record in &self.records {
            let stats = record.pool.stats().map_err(fail)?;
            prop_assert!(
                stats.reserved_bytes == 0 && stats.allocations == 0,
                "{}: capture {}'s graph and buffers dropped and drained: {stats:?}",
                self.place,
                record.number
            );
        }
        Ok(self.coverage)
    }
}
