//! A pipeline of small chunks across places of several backends, written once for
//! `examples/hetero.rs` and the `bench-cross` benchmark.
//!
//! Chunk `i` goes through three kinds of stage:
//!
//! 1. a CPU stream *produces* it: a host function writes the chunk's pattern into plain host
//!    memory (the slot's first hand-over block);
//! 2. each device stage *transforms* it on its own stream: a host function copies the hand-over
//!    block into the stage's pinned input buffer, then a host→device copy, a `fill` of the
//!    stage's own tag bytes, a device→host copy, and a host function that copies the stage's
//!    output buffer into the next hand-over block;
//! 3. a second CPU stream *consumes* it: a host function checks the pattern and every stage's
//!    tag, so a stage that ran before its input was ready is caught as a mismatch.
//!
//! Stages hand a chunk on either with a wait ([`Handoff::Wait`]: the next stage's stream waits
//! on the stage's event, across backends through each backend's own completion mechanism; the
//! host only submits) or with a host fence ([`Handoff::Fence`]: the host blocks in the stage's
//! `Event::synchronize`, then submits the next stage).
//!
//! At most `slots` chunks are in flight: chunk `i + slots` reuses slot `i % slots`, and its
//! producer's stream waits (a wait between two CPU streams) for the consumer's event of chunk
//! `i`; every later stage of chunk `i + slots` follows its producer. So with waits the host
//! never blocks while it submits. Each pinned buffer is touched only by its own stage's stream
//! (its copies and its host functions): a host buffer's read or write waits for queued copies
//! that use it, except its own stream's copies queued after the running host function, so the
//! stages hand chunks to each other through plain memory rather than each other's buffers.

use devstream::{DeviceBuffer, Event, HostBuffer, Place, Result, Stream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A pipeline's failure: a devstream error, or a chunk that did not arrive as sent.
pub type Failure = Box<dyn std::error::Error>;

/// Bytes each device stage overwrites with its tag (a multiple of 4, as wgpu's fill needs).
const TAG_BYTES: usize = 16;

/// How a stage hands a chunk to the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// The next stage's stream waits on the stage's event; no host thread blocks.
    Wait,
    /// The host blocks in the stage's `Event::synchronize`, then submits the next stage.
    Fence,
}

/// Byte `offset` of chunk `chunk`'s pattern: consecutive uses of one slot differ at every byte
/// (7919 is odd, so `slots * 7919` is not a multiple of 256 for fewer than 256 slots).
fn pattern_byte(chunk: u64, offset: usize) -> u8 {
    (chunk.wrapping_mul(7919).wrapping_add(offset as u64)) as u8
}

/// The tag device stage `stage` writes into chunk `chunk`.
fn tag(chunk: u64, stage: usize) -> u8 {
    (chunk.wrapping_mul(29).wrapping_add(stage as u64 * 101 + 1)) as u8
}

/// What the consumer must find in chunk `chunk` after `stages` device stages.
fn check_chunk(chunk: u64, stages: usize, bytes: &[u8]) -> std::result::Result<(), String> {
    for (offset, &byte) in bytes.iter().enumerate() {
        let stage = offset / TAG_BYTES;
        let expected = if stage < stages {
            tag(chunk, stage)
        } else {
            pattern_byte(chunk, offset)
        };
        if byte != expected {
            return Err(format!(
                "chunk {chunk}: byte {offset} is {byte}, expected {expected}"
            ));
        }
    }
    Ok(())
}

/// One device stage: its stream and, per slot, its input, device and output buffers.
struct DeviceStage {
    stream: Stream,
    input: Vec<Arc<HostBuffer>>,
    device: Vec<DeviceBuffer>,
    output: Vec<Arc<HostBuffer>>,
}

/// Whether `place` can be a device stage: it has buffers and host functions (the hand-over
/// copy) and waits on other backends' work.
pub fn can_transform(place: &Place) -> bool {
    devstream::capabilities(place)
        .is_ok_and(|caps| caps.buffers && caps.host_funcs && caps.foreign_waits)
}

/// The CPU producer, the device stages and the CPU consumer of one pipeline.
pub struct Pipeline {
    produce: Stream,
    consume: Stream,
    stages: Vec<DeviceStage>,
    /// Per boundary between stages (producer → first device stage, ..., last device stage →
    /// consumer), per slot: the chunk in plain host memory.
    handover: Vec<Vec<Arc<Mutex<Vec<u8>>>>>,
    /// Per slot, the consumer's event after the slot's last chunk.
    consumed: Vec<Option<Event>>,
    chunk_bytes: usize,
    next_chunk: u64,
    verified: Arc<AtomicU64>,
    mismatch: Arc<Mutex<Option<String>>>,
}

impl Pipeline {
    /// A pipeline through `devices` (in order) with chunks of `chunk_bytes` bytes (a multiple
    /// of 4 with room for every stage's tag) and `slots` chunks in flight at most.
    pub fn new(
        devices: &[Place],
        chunk_bytes: usize,
        slots: usize,
    ) -> std::result::Result<Pipeline, Failure> {
        if devices.is_empty()
            || slots == 0
            || !chunk_bytes.is_multiple_of(4)
            || chunk_bytes < TAG_BYTES * (devices.len() + 1)
        {
            return Err(format!(
                "a pipeline needs a device stage, a slot and chunks of a multiple of 4 bytes with \
                 room for {} tags: got {} stages, {slots} slots, {chunk_bytes}-byte chunks",
                devices.len() + 1,
                devices.len()
            )
            .into());
        }
        let stages = devices
            .iter()
            .map(|place| {
                let stream = Stream::new(place)?;
                let mut stage = DeviceStage {
                    input: Vec::with_capacity(slots),
                    device: Vec::with_capacity(slots),
                    output: Vec::with_capacity(slots),
                    stream,
                };
                for _ in 0..slots {
                    stage
                        .input
                        .push(Arc::new(stage.stream.alloc_host(chunk_bytes)?));
                    stage.device.push(stage.stream.alloc(chunk_bytes)?);
                    stage
                        .output
                        .push(Arc::new(stage.stream.alloc_host(chunk_bytes)?));
                }
                Ok(stage)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Pipeline {
            produce: Stream::new(&Place::Cpu)?,
            consume: Stream::new(&Place::Cpu)?,
            stages,
            handover: (0..=devices.len())
                .map(|_| {
                    (0..slots)
                        .map(|_| Arc::new(Mutex::new(vec![0; chunk_bytes])))
                        .collect()
                })
                .collect(),
            consumed: vec![None; slots],
            chunk_bytes,
            next_chunk: 0,
            verified: Arc::new(AtomicU64::new(0)),
            mismatch: Arc::new(Mutex::new(None)),
        })
    }

    /// `cpu → wgpu:0 → cpu`.
    pub fn describe(&self) -> String {
        let mut names = vec!["cpu".to_owned()];
        names.extend(self.stages.iter().map(|s| s.stream.place().to_string()));
        names.push("cpu".to_owned());
        names.join(" → ")
    }

    /// `stream`'s later work runs after what `ready` captured.
    fn hand_off(stream: &Stream, ready: &Event, handoff: Handoff) -> Result<()> {
        match handoff {
            Handoff::Wait => stream.wait_event(ready),
            Handoff::Fence => ready.synchronize(),
        }
    }

    /// Submits chunk `chunk` through every stage.
    fn submit(&mut self, chunk: u64, handoff: Handoff) -> Result<()> {
        let slot = (chunk % self.consumed.len() as u64) as usize;
        if let Some(freed) = &self.consumed[slot] {
            // Both CPU streams: a wait within one backend, whatever the hand-off.
            self.produce.wait_event(freed)?;
        }
        let first = Arc::clone(&self.handover[0][slot]);
        self.produce.launch_host_func(move || {
            if let Ok(mut bytes) = first.lock() {
                for (offset, byte) in bytes.iter_mut().enumerate() {
                    *byte = pattern_byte(chunk, offset);
                }
            }
        })?;
        let mut ready = self.produce.record_event()?;
        for (index, stage) in self.stages.iter().enumerate() {
            Self::hand_off(&stage.stream, &ready, handoff)?;
            let (from, to) = (&self.handover[index][slot], &stage.input[slot]);
            stage
                .stream
                .launch_host_func(self.hand_over(chunk, from, to, Direction::In))?;
            let device = &stage.device[slot];
            stage
                .stream
                .copy_host_to_device(device, 0, to, 0, self.chunk_bytes)?;
            stage
                .stream
                .fill(device, index * TAG_BYTES, TAG_BYTES, tag(chunk, index))?;
            let (from, to) = (&stage.output[slot], &self.handover[index + 1][slot]);
            stage
                .stream
                .copy_device_to_host(from, 0, device, 0, self.chunk_bytes)?;
            stage
                .stream
                .launch_host_func(self.hand_over(chunk, to, from, Direction::Out))?;
            ready = stage.stream.record_event()?;
        }
        Self::hand_off(&self.consume, &ready, handoff)?;
        let last = Arc::clone(&self.handover[self.stages.len()][slot]);
        let stages = self.stages.len();
        let (verified, mismatch) = (Arc::clone(&self.verified), Arc::clone(&self.mismatch));
        self.consume.launch_host_func(move || {
            let checked = match last.lock() {
                Ok(bytes) => check_chunk(chunk, stages, &bytes),
                Err(_) => Err("a stage panicked".to_owned()),
            };
            match checked {
                Ok(()) => {
                    verified.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => note(&mismatch, e),
            }
        })?;
        self.consumed[slot] = Some(self.consume.record_event()?);
        Ok(())
    }

    /// A host function that copies between a hand-over block and a stage's pinned buffer:
    /// into the buffer (`In`) or out of it (`Out`).
    fn hand_over(
        &self,
        chunk: u64,
        block: &Arc<Mutex<Vec<u8>>>,
        buffer: &Arc<HostBuffer>,
        direction: Direction,
    ) -> impl FnMut() + Send + 'static {
        let (block, buffer) = (Arc::clone(block), Arc::clone(buffer));
        let mismatch = Arc::clone(&self.mismatch);
        move || {
            let copied = match (block.lock(), direction) {
                (Ok(bytes), Direction::In) => buffer.write(0, &bytes).map_err(|e| e.to_string()),
                (Ok(mut bytes), Direction::Out) => {
                    buffer.read(0, &mut bytes).map_err(|e| e.to_string())
                }
                (Err(_), _) => Err("a stage panicked".to_owned()),
            };
            if let Err(e) = copied {
                note(&mismatch, format!("chunk {chunk}: handing over: {e}"));
            }
        }
    }

    /// Runs `chunks` chunks through the pipeline with `handoff` between stages, checks every
    /// one, and answers the time from the first submission to the last chunk checked.
    pub fn run(&mut self, chunks: u64, handoff: Handoff) -> std::result::Result<Duration, Failure> {
        let before = self.verified.load(Ordering::Relaxed);
        let start = Instant::now();
        for _ in 0..chunks {
            let chunk = self.next_chunk;
            self.next_chunk += 1;
            self.submit(chunk, handoff)?;
        }
        self.consume.synchronize()?;
        let elapsed = start.elapsed();
        if let Some(e) = self.mismatch.lock().ok().and_then(|m| m.clone()) {
            return Err(format!("{}: {e}", self.describe()).into());
        }
        let verified = self.verified.load(Ordering::Relaxed) - before;
        if verified != chunks {
            return Err(
                format!("{}: {verified} of {chunks} chunks checked", self.describe()).into(),
            );
        }
        Ok(elapsed)
    }
}

/// Which way a hand-over copies.
#[derive(Clone, Copy)]
enum Direction {
    /// From the hand-over block into the stage's input buffer.
    In,
    /// From the stage's output buffer into the hand-over block.
    Out,
}

/// Keeps the first mismatch.
fn note(slot: &Mutex<Option<String>>, what: String) {
    if let Ok(mut slot) = slot.lock() {
        slot.get_or_insert(what);
    }
}

/// The device stages to run: one pipeline per place that can transform (alone between the two
/// CPU stages), then, where two or more backends can, one chain through the first place of
/// each backend (CUDA → wgpu and the like). With no such place, a second CPU stream.
pub fn pipelines(places: &[Place]) -> Vec<Vec<Place>> {
    let devices: Vec<Place> = places
        .iter()
        .filter(|p| **p != Place::Cpu && can_transform(p))
        .cloned()
        .collect();
    if devices.is_empty() {
        return vec![vec![Place::Cpu]];
    }
    let mut out: Vec<Vec<Place>> = devices.iter().map(|p| vec![p.clone()]).collect();
    let mut chain: Vec<Place> = Vec::new();
    for place in &devices {
        let new_backend = chain.iter().all(|p| backend_key(p) != backend_key(place));
        if new_backend {
            chain.push(place.clone());
        }
    }
    if chain.len() > 1 {
        out.push(chain);
    }
    out
}

/// `cpu, wgpu:0, custom_cpu:0`.
pub fn place_list(places: &[Place]) -> String {
    places
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What tells two places' backends apart (as for waits across backends): the backend, and a
/// custom device's type.
pub fn backend_key(place: &Place) -> String {
    match place {
        Place::Custom { device_type, .. } => device_type.clone(),
        other => other.backend().name().to_owned(),
    }
}
