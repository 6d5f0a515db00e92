//! Wait words: the pinned, device-mapped 8-byte host words that streams are held at while they
//! wait on another backend's work (`foreign::wait_completion`), handed out and recycled with
//! no driver call.
//!
//! A device carves its words from slabs of pinned, mapped host memory (`cuMemHostAlloc`,
//! `cuMemHostGetDevicePointer` once per slab of [`WORDS_PER_SLAB`] words). Slabs are never
//! freed: freeing pinned memory synchronizes the whole device, and devices live as long as
//! the process, so a word's memory stays mapped for any stream that still reads it.
//!
//! A word goes back to the pool as soon as the host has written it, while a stream held at it
//! may not have read it yet. That is safe because each use of a word waits for a value
//! greater than every value the word held before: the word keeps a generation that counts up,
//! a use waits (`cuStreamWaitValue64` GEQ) for the next generation, and its release writes
//! exactly that generation. A stream held by an earlier use reads that generation or a later
//! one, both ≥ what it waits for, so it is released; a stream held by the current use reads at
//! most the previous generation until the current use's release writes its own. The GEQ is a
//! cyclic signed comparison on 64 bits, exact while generations stay below 2^63 uses of a word.
//!
//! A use that is never released (its relay dropped without running) keeps its word out of the
//! pool: a stream may still be held at it, and writing it would release that stream wrongly.

use crate::device::Device;
use crate::error::check;
use crate::raw::{DevicePtr, RawApi, RawResult, RawStream};
use crate::stream::GpuStream;
use devstream_core::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// Bytes of one word.
const WORD_BYTES: usize = 8;
/// Words per slab: one 4 KiB page.
pub(crate) const WORDS_PER_SLAB: usize = 512;

/// A word not in use: its addresses and the last generation written to it.
struct FreeWord {
    host: *mut u8,
    device: DevicePtr,
    generation: u64,
}

// SAFETY: `host` points into a slab that is never freed; the word is only read and written
// through atomics, and a free word belongs to the pool alone.
unsafe impl Send for FreeWord {}

/// A device's wait words (a field of [`Device`]).
pub(crate) struct WaitWords {
    free: Mutex<Vec<FreeWord>>,
}

impl WaitWords {
    /// No slab yet: the first use allocates one.
    pub(crate) fn new() -> Self {
        WaitWords {
            free: Mutex::new(Vec::new()),
        }
    }

    /// Takes a free word, allocating a slab first when none is free.
    fn take<A: RawApi>(&self, device: &'static Device<A>) -> Result<FreeWord> {
        if let Some(word) = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
        {
            return Ok(word);
        }
        let mut slab = carve(device)?;
        let Some(word) = slab.pop() else {
            return Err(Error::out_of_memory(&device.place, WORD_BYTES));
        };
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(slab);
        Ok(word)
    }

    fn give_back(&self, word: FreeWord) {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(word);
    }
}

/// A new slab of words, all at generation 0 (zeroed).
fn carve<A: RawApi>(device: &'static Device<A>) -> Result<Vec<FreeWord>> {
    let (host, device_ptr) = device.alloc_mapped_zeroed(WORD_BYTES * WORDS_PER_SLAB)?;
    Ok((0..WORDS_PER_SLAB)
        .map(|index| FreeWord {
            // SAFETY: `index * WORD_BYTES` is inside the slab of `WORDS_PER_SLAB` words.
            host: unsafe { host.add(index * WORD_BYTES) },
            device: device_ptr + (index * WORD_BYTES) as DevicePtr,
            generation: 0,
        })
        .collect())
}

/// One use of a wait word: a stream is (or will be) held at it until [`WaitWord::release`].
pub(crate) struct WaitWord<A: RawApi> {
    word: Option<FreeWord>,
    device: &'static Device<A>,
}

// SAFETY: as for `FreeWord`; the device reference is `'static` and `Sync`.
unsafe impl<A: RawApi> Send for WaitWord<A> {}

impl<A: RawApi> WaitWord<A> {
    /// A word of `device` for one use.
    pub(crate) fn take(device: &'static Device<A>) -> Result<Self> {
        let word = device.wait_words.take(device)?;
        Ok(WaitWord {
            word: Some(word),
            device,
        })
    }

    /// The value this use waits for and its release writes.
    fn target(word: &FreeWord) -> u64 {
        word.generation + 1
    }

    /// Holds `stream`'s later work until [`WaitWord::release`].
    pub(crate) fn hold(&self, stream: &GpuStream<A>) -> Result<()> {
        self.queue_on(stream, "wait_completion", A::stream_wait_value64)
    }

    /// Has `stream` write this use's value when it reaches this point (a stream memory write,
    /// in stream order): [`WaitWord::written`] answers `true` from then on. The host then
    /// learns that the stream's work before this point is done by reading memory, with no
    /// driver call.
    pub(crate) fn signal_on(&self, stream: &GpuStream<A>) -> Result<()> {
        self.queue_on(stream, "launch_host_func", A::stream_write_value64)
    }

    /// Queues `memory_op` (a 64-bit stream wait or write) of this use's value at the word's
    /// device address on `stream` (`op` names the caller's operation in a mismatch error).
    fn queue_on(
        &self,
        stream: &GpuStream<A>,
        op: &'static str,
        memory_op: unsafe fn(RawStream, DevicePtr, u64) -> RawResult,
    ) -> Result<()> {
        let Some(word) = &self.word else {
            return Ok(());
        };
        stream.same_device(op, self.device.ordinal)?;
        stream.bind()?;
        // SAFETY: the word's mapped address stays valid for the process (slabs are never
        // freed) and is this device's mapping of it; the stream is alive and of its device.
        check::<A, _>(unsafe { memory_op(stream.raw(), word.device, Self::target(word)) })
    }

    /// Whether this use's value is in the word (written by [`WaitWord::signal_on`]'s stream):
    /// the same cyclic comparison as the device's wait.
    pub(crate) fn written(&self) -> bool {
        let Some(word) = &self.word else {
            return true;
        };
        // SAFETY: as in `release`.
        let value = unsafe { AtomicU64::from_ptr(word.host.cast::<u64>()) }.load(Ordering::Acquire);
        value.wrapping_sub(Self::target(word)) as i64 >= 0
    }

    /// Releases the held stream (writes the use's generation) and gives the word back.
    pub(crate) fn release(mut self) {
        if let Some(mut word) = self.word.take() {
            let target = Self::target(&word);
            // SAFETY: `word.host` is an 8-byte aligned word of a slab that is never freed, only
            // accessed atomically from the host.
            unsafe { AtomicU64::from_ptr(word.host.cast::<u64>()) }.store(target, Ordering::SeqCst);
            word.generation = target;
            self.device.wait_words.give_back(word);
        }
    }
}
