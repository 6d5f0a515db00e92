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

use crate::raw::RawApi;
use crate::stream::GpuStream;
use crate::words::WaitWord;
use devstream_core::{foreign, Completion, DeviceStream, Error, Result};
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
    if stream.is_capturing()? {
        return Err(foreign::refused_in_capture("wait_completion"));
    }
    match foreign::ready_now(&mut awaited) {
        Some(Ok(())) => return Ok(()),
        Some(Err(error)) => {
            stream.inner.panic_slot().fail(error);
            return Ok(());
        }
        None => {}
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
