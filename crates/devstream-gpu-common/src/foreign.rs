//! Waits on another backend's work (`DeviceStream::wait_completion`) for CUDA and HIP streams:
//! a device-side wait on a host word.
//!
//! The stream waits (`cuStreamWaitValue64` / `hipStreamWaitValue64`, as flags do) on a word in
//! pinned, device-mapped host memory, taken from the device's pool of wait words (no driver
//! call: see `crate::words`); `devstream_core::foreign::relay` writes the word from the awaited
//! backend's completion path (a CPU worker, wgpu's completion thread, a
//! plug-in callback, or this layer's own completion hub when the awaited work is another
//! CUDA/HIP device's). Nothing on the host waits: the device holds the stream at the word, and
//! no thread is created or blocked per wait. An error of the awaited work is kept in the
//! stream's error slot before the word is written, so the stream's next `synchronize` (which
//! cannot return before the word is written) reports it.
//!
//! Captured, the flag wait is a memory-op node of the graph (a stream memory operation is
//! captured like any other stream work), whose word the graph keeps; the report is a
//! host-function node behind it that gives an error of the awaited work to the stream of each
//! launch. So capture needs captured host functions: without them (`capture_host_funcs` off)
//! the wait answers `Error::Capture` before anything reaches the capture.

use crate::flag::GpuFlag;
use crate::raw::{CaptureStatus, RawApi};
use crate::stream::GpuStream;
use crate::words::WaitWord;
use devstream_core::{foreign, Completion, DeviceFlag, Error, Result};
use std::sync::Arc;

/// Holds `stream`'s later work until `awaited` is ready; its error becomes the stream's.
pub(crate) fn wait_completion<A: RawApi>(
    stream: &GpuStream<A>,
    mut awaited: Completion,
) -> Result<()> {
    let device = stream.inner.device;
    if !device.caps.foreign_waits {
        return Err(Error::unsupported("wait_completion", &device.place));
    }
    stream.bind()?;
    let capture = match stream.capture_sequence()? {
        (CaptureStatus::None, _) => None,
        (CaptureStatus::Active, id) => Some(id),
        (CaptureStatus::Invalidated, _) => {
            return Err(Error::capture(
                "wait_completion",
                "the stream's capture was invalidated; end it first",
            ))
        }
    };
    if capture.is_some() && !device.caps.capture_foreign_waits {
        return Err(foreign::refused_in_capture("wait_completion"));
    }
    match foreign::ready_now(&mut awaited) {
        Some(Ok(())) => return Ok(()),
        Some(Err(error)) if capture.is_none() => {
            stream.inner.panic_slot().fail(error);
            return Ok(());
        }
        _ => {}
    }
    if let Some(id) = capture {
        // A graph replays its wait node on every launch: the word must stay written once the
        // awaited work is done, so a captured wait takes a flag of its own (kept by the graph)
        // rather than a pooled word, which is recycled right after its release.
        let gate = GpuFlag::create(device)?;
        let released = gate.clone();
        let outcome = foreign::relay(awaited, move |_| released.set(1));
        gate.wait_on(stream, 1)?;
        return stream.capture_host_call(id, Box::new(|| {}), Some(outcome));
    }
    let word = WaitWord::take(device)?;
    if let Err(error) = word.hold(stream) {
        // No wait was queued: the word goes back (one generation on).
        word.release();
        return Err(error);
    }
    let slot = Arc::clone(stream.inner.panic_slot());
    foreign::relay(awaited, move |result| {
        if let Err(error) = result {
            slot.fail(error.clone());
        }
        word.release();
    });
    Ok(())
}
