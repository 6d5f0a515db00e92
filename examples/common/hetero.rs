//! A pipeline of small chunks across places of several backends, written once for
//! `examples/hetero.rs` and the `bench-cross` benchmark.
//!
//! Chunk `i` goes through three kinds of stage:
//!
//! 1. a CPU stream *produces* it: a host function given the first device stage's pinned input
//!    buffer (`Stream::launch_host_func_with`) writes the chunk's pattern into it;
//! 2. each device stage *transforms* it on its own stream: a host→device copy of its input
//!    buffer, a `fill` of the stage's own tag bytes, and a device→host copy into its output
//!    buffer; between two device stages, a CPU stream's host function given the first's
//!    output buffer and the second's input buffer hands the bytes over;
//! 3. a second CPU stream *consumes* it: a host function given the last stage's output buffer
//!    checks the pattern and every stage's tag, so a stage that ran before its input was ready
//!    is caught as a mismatch.
//!
//! Stages hand a chunk on either by waits ([`Handoff::Wait`]: a host function given a buffer
//! runs after the buffer's copies submitted before it and before those submitted after it,
//! whatever their backends, by waits through each backend's own completion mechanism; the
//! host only submits, and no device stream runs a host function) or with host fences
//! ([`Handoff::Fence`]: the host blocks in the previous stage's `Event::synchronize` before it
//! submits each stage).
//!
//! At most `slots` chunks are in flight: chunk `i + slots` reuses slot `i % slots`, and its
//! producer's stream waits (a wait between two CPU streams) for the consumer's event of chunk
//! `i`. So with waits the host never blocks while it submits.

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

/// What the consumer must find in chunk `chunk` after `stages` device stages: every stage's tag
/// in its bytes, then the producer's pattern. Every byte is checked; the pattern part as one
/// pass over the bytes that the compiler vectorizes (a byte-at-a-time check with a branch per
/// byte cost about 30 µs per 64 KiB chunk on one core, more than the stages it checks, and
/// bounded the pipeline by the consumer whatever the hand-off).
fn check_chunk(chunk: u64, stages: usize, bytes: &[u8]) -> std::result::Result<(), String> {
    let tagged = (stages * TAG_BYTES).min(bytes.len());
    let (tags, rest) = bytes.split_at(tagged);
    for (offset, &byte) in tags.iter().enumerate() {
        let expected = tag(chunk, offset / TAG_BYTES);
        if byte != expected {
            return Err(format!(
                "chunk {chunk}: byte {offset} is {byte}, expected {expected}"
            ));
        }
    }
    let base = pattern_byte(chunk, tagged);
    let differs = rest.iter().enumerate().fold(0u8, |acc, (i, &byte)| {
        acc | (byte ^ base.wrapping_add(i as u8))
    });
    if differs == 0 {
        return Ok(());
    }
    let (i, &byte) = rest
        .iter()
        .enumerate()
        .find(|&(i, &byte)| byte != base.wrapping_add(i as u8))
        .unwrap_or((0, &0));
    Err(format!(
        "chunk {chunk}: byte {} is {byte}, expected {}",
        tagged + i,
        pattern_byte(chunk, tagged + i)
    ))
}

/// One device stage: its stream and, per slot, its input, device and output buffers.
struct DeviceStage {
    stream: Stream,
    input: Vec<HostBuffer>,
    device: Vec<DeviceBuffer>,
    output: Vec<HostBuffer>,
}

/// Whether `place` can be a device stage: it has buffers whose host buffers can be given to
/// other backends' host functions, and waits on other backends' work.
pub fn can_transform(place: &Place) -> bool {
    devstream::capabilities(place)
        .is_ok_and(|caps| caps.buffers && caps.host_func_buffers && caps.foreign_waits)
}

/// The CPU producer, the device stages and the CPU consumer of one pipeline.
pub struct Pipeline {
    produce: Stream,
    consume: Stream,
    stages: Vec<DeviceStage>,
    /// Per boundary between two device stages, the CPU stream that hands chunks over.
    relays: Vec<Stream>,
    /// Per slot, the consumer's event after the slot's last chunk.
    consumed: Vec<Option<Event>>,
    chunk_bytes: usize,
    next_chunk: u64,
    verified: Arc<AtomicU64>,
    mismatch: Arc<Mutex<Option<String>>>,
    /// How long the last run's host took to submit its chunks (see [`Pipeline::submit_time`]).
    last_submit: Duration,
    /// The last run's submission time by part: the producer's launch (and its wait for the
    /// slot), the device stages (with the relays between them), the consumer's launch and
    /// record (see [`Pipeline::submit_parts`]).
    parts: [Duration; 3],
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
                    stage.input.push(stage.stream.alloc_host(chunk_bytes)?);
                    stage.device.push(stage.stream.alloc(chunk_bytes)?);
                    stage.output.push(stage.stream.alloc_host(chunk_bytes)?);
                }
                Ok(stage)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Pipeline {
            produce: Stream::new(&Place::Cpu)?,
            consume: Stream::new(&Place::Cpu)?,
            relays: (1..devices.len())
                .map(|_| Stream::new(&Place::Cpu))
                .collect::<Result<Vec<_>>>()?,
            stages,
            consumed: vec![None; slots],
            chunk_bytes,
            next_chunk: 0,
            verified: Arc::new(AtomicU64::new(0)),
            mismatch: Arc::new(Mutex::new(None)),
            last_submit: Duration::ZERO,
            parts: [Duration::ZERO; 3],
        })
    }

    /// `cpu → wgpu:0 → cpu`.
    pub fn describe(&self) -> String {
        let mut names = vec!["cpu".to_owned()];
        names.extend(self.stages.iter().map(|s| s.stream.place().to_string()));
        names.push("cpu".to_owned());
        names.join(" → ")
    }

    /// With host fences, blocks until the work `stream` has so far is done (the previous
    /// stage); with waits, nothing: the buffers' order carries the hand-off.
    fn fence(stream: &Stream, handoff: Handoff) -> Result<()> {
        match handoff {
            Handoff::Wait => Ok(()),
            Handoff::Fence => stream.record_event()?.synchronize(),
        }
    }

    /// Submits chunk `chunk` through every stage.
    fn submit(&mut self, chunk: u64, handoff: Handoff) -> Result<()> {
        let started = Instant::now();
        let slot = (chunk % self.consumed.len() as u64) as usize;
        if let Some(freed) = &self.consumed[slot] {
            // Both CPU streams: a wait within one backend, whatever the hand-off.
            self.produce.wait_event(freed)?;
        }
        self.produce
            .launch_host_func_with(&[&self.stages[0].input[slot]], move |bytes| {
                // `pattern_byte(chunk, offset)`, as one vectorized pass: the pattern is a
                // byte ramp from its first byte.
                let base = pattern_byte(chunk, 0);
                for (offset, byte) in bytes[0].iter_mut().enumerate() {
                    *byte = base.wrapping_add(offset as u8);
                }
            })?;
        let produced = Instant::now();
        let mut previous = &self.produce;
        for (index, stage) in self.stages.iter().enumerate() {
            if index > 0 {
                Self::fence(previous, handoff)?;
                let relay = &self.relays[index - 1];
                let from = &self.stages[index - 1].output[slot];
                relay.launch_host_func_with(&[from, &stage.input[slot]], |bytes| {
                    let (from, to) = bytes.split_at_mut(1);
                    to[0].copy_from_slice(from[0]);
                })?;
                previous = relay;
            }
            Self::fence(previous, handoff)?;
            let device = &stage.device[slot];
            let stream = &stage.stream;
            stream.copy_host_to_device(device, 0, &stage.input[slot], 0, self.chunk_bytes)?;
            stream.fill(device, index * TAG_BYTES, TAG_BYTES, tag(chunk, index))?;
            stream.copy_device_to_host(&stage.output[slot], 0, device, 0, self.chunk_bytes)?;
            previous = stream;
        }
        Self::fence(previous, handoff)?;
        let transformed = Instant::now();
        let stages = self.stages.len();
        let (verified, mismatch) = (Arc::clone(&self.verified), Arc::clone(&self.mismatch));
        self.consume.launch_host_func_with(
            &[&self.stages[stages - 1].output[slot]],
            move |bytes| match check_chunk(chunk, stages, bytes[0]) {
                Ok(()) => {
                    verified.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => note(&mismatch, e),
            },
        )?;
        self.consumed[slot] = Some(self.consume.record_event()?);
        let consumed = Instant::now();
        self.parts[0] += produced - started;
        self.parts[1] += transformed - produced;
        self.parts[2] += consumed - transformed;
        Ok(())
    }

    /// Runs `chunks` chunks through the pipeline with `handoff` between stages, checks every
    /// one, and answers the time from the first submission to the last chunk checked.
    pub fn run(&mut self, chunks: u64, handoff: Handoff) -> std::result::Result<Duration, Failure> {
        let before = self.verified.load(Ordering::Relaxed);
        self.parts = [Duration::ZERO; 3];
        let start = Instant::now();
        for _ in 0..chunks {
            let chunk = self.next_chunk;
            self.next_chunk += 1;
            self.submit(chunk, handoff)?;
        }
        self.last_submit = start.elapsed();
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

impl Pipeline {
    /// How long the last [`Pipeline::run`] spent submitting (from its start to the last chunk
    /// submitted, before the final synchronize). With waits, the host blocks nowhere, so this
    /// is the host's own cost per chunk: a pipeline whose run takes about as long is bound by
    /// what the host does to submit, not by the stages.
    pub fn submit_time(&self) -> Duration {
        self.last_submit
    }

    /// [`Pipeline::submit_time`] by part, for the last run: the producer's launch (with its
    /// wait for the slot), the device stages (with their fences, and the relays between
    /// them), the consumer's launch and record.
    pub fn submit_parts(&self) -> [Duration; 3] {
        self.parts
    }
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
