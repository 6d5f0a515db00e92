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
//!
//! # Host functions queued behind a wait
//!
//! The runtime starts a host function (`cuLaunchHostFunc`) queued behind a stream memory wait
//! some tens of microseconds after the wait ends: the device reaches it, then signals the
//! runtime's callback thread. A host function is the usual next work of a stream that waits on
//! host-side work (a pipeline's consumer), so while a wait across backends holds the stream, a
//! host function queued on it is run by devstream instead ([`launch_host_func_behind_wait`]):
//! the stream records an internal event where the function belongs and is then held at a
//! second word; the event's completion (this layer's hub: a doorbell on a notifier stream, and
//! the sweeper, whose spin window the wait's release opens again) hands the function to the
//! device's host-function thread ([`crate::hostfn::HostThread`]), which runs it as the
//! runtime's trampoline would (same callback scope, same panic slot) and then writes the
//! second word. The order is the device's: the event completes only after everything queued
//! before the function, whoever queued it; nothing queued after it starts before it returned.
//! The stream's later work is released by the host write, not by the runtime's callback
//! thread. After a device fault the event completes with the fault and the function never runs,
//! as the runtime never runs host functions behind a fault.

use crate::completion::{notify_after, spin_from_now, Source};
use crate::event::GpuEvent;
use crate::flag::GpuFlag;
use crate::hostfn::{drop_host_function, in_host_function, run_as_host_function};
use crate::raw::{CaptureStatus, RawApi};
use crate::stream::GpuStream;
use crate::words::WaitWord;
use devstream_core::{capture, foreign, Completion, DeviceFlag, Error, EventFlags, HostFn, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A stream's waits across backends that hold it now, and the host functions queued behind
/// them that devstream runs (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct HeldWaits {
    /// Waits queued outside a capture and not released yet.
    held: AtomicUsize,
    /// Host functions queued behind such waits (by [`launch_host_func_behind_wait`]) that have
    /// not run yet.
    behind: AtomicUsize,
}

impl HeldWaits {
    /// Whether a wait across backends holds the stream now.
    pub(crate) fn holding(&self) -> bool {
        self.held.load(Ordering::Acquire) > 0
    }
}

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
    let waits = Arc::clone(stream.inner.foreign_waits.get_or_init(Arc::default));
    waits.held.fetch_add(1, Ordering::AcqRel);
    foreign::relay(awaited, move |result| {
        if let Err(error) = result {
            slot.fail(error.clone());
        }
        if waits.behind.load(Ordering::Acquire) > 0 {
            // A host function devstream runs is queued behind: its event completes a few
            // microseconds after the stream passes the word.
            spin_from_now(device);
        }
        waits.held.fetch_sub(1, Ordering::AcqRel);
        word.release();
    });
    Ok(())
}

/// Queues `f` on `stream` (not capturing, context current) as devstream's own host function
/// when a wait across backends holds the stream (see the module documentation): answers
/// `Err(f)` untouched, with nothing queued, where that does not apply or cannot be set up, and
/// the caller launches it through the runtime.
pub(crate) fn launch_host_func_behind_wait<A: RawApi>(
    stream: &GpuStream<A>,
    f: HostFn,
) -> std::result::Result<Result<()>, HostFn> {
    let device = stream.inner.device;
    let Some(waits) = stream.inner.foreign_waits.get() else {
        return Err(f);
    };
    // Inside a host function the hub cannot take a completion (no runtime calls there); while
    // a capture is in progress on the device, the event's record and the hub's doorbell
    // could reach it.
    if !waits.holding()
        || in_host_function()
        || device.active_captures.load(Ordering::Acquire) > 0
        || capture::any_forbidding()
        || !device.host_thread.start(device.ordinal)
    {
        return Err(f);
    }
    let Ok(event) = GpuEvent::create(device, EventFlags::default()) else {
        return Err(f);
    };
    let Ok(word) = WaitWord::take(device) else {
        return Err(f);
    };
    // Where `f` belongs in the stream: the event completes once everything queued before it
    // has.
    // SAFETY: the event and the stream are alive and belong to the same device; the context
    // is current (bound by the caller).
    if unsafe { A::event_record(event.inner.raw, stream.raw()) }.is_err() {
        word.release();
        return Err(f);
    }
    event.mark_recorded();
    if word.hold(stream).is_err() {
        word.release();
        return Err(f);
    }
    let completion = match notify_after(event, None, Source::Private) {
        Ok(completion) => completion,
        Err(_) => {
            // Nothing will run `f` from here: the stream passes the word at once and the
            // runtime runs `f` behind it.
            word.release();
            return Err(f);
        }
    };
    let slot = Arc::clone(stream.inner.panic_slot());
    let waits = Arc::clone(waits);
    waits.behind.fetch_add(1, Ordering::AcqRel);
    foreign::relay(completion, move |result| {
        let ran = result.is_ok();
        let job = Box::new(move || {
            if ran {
                run_as_host_function(f, slot);
            } else {
                // The work before `f` failed (a device fault): the runtime would not run it.
                drop_host_function(f);
            }
            waits.behind.fetch_sub(1, Ordering::AcqRel);
            word.release();
        });
        // The device's thread was started above and never stops; should it be gone, `f` runs
        // here rather than never.
        if let Err(job) = device.host_thread.run(job) {
            job();
        }
    });
    Ok(Ok(()))
}
