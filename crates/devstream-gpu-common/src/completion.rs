//! [`Completion`] futures on CUDA and HIP (one implementation, generic over [`RawApi`]).
//!
//! A completion waits on a *notifier*: an internal non-blocking stream of the device that
//! `cuStreamWaitEvent`s the target event and then runs a stream callback
//! (`cuStreamAddCallback`, whose status carries a device fault; `cuLaunchHostFunc` where the
//! runtime lacks callbacks), which completes the future. Nothing is added to the user's stream:
//! `Stream::completion` records an internal event there (like `wait_stream` does) and waits on
//! it. Each pending completion holds a notifier of its own, taken from a per-device pool and
//! handed back by the callback, so a completion never waits behind another one's work (a single
//! notifier stream would serialise every completion of the device behind the slowest). No
//! thread is started and nothing polls: the runtime's callback thread wakes the task.
//!
//! The callback runs on the runtime's callback thread, where runtime calls are forbidden: it
//! only fills the future (the waker runs there: executors' wakers just schedule the task),
//! drops the event handle it kept (its destruction is moved to devstream's release thread) and
//! returns the notifier to the pool.

use crate::device::Device;
use crate::error::{check, map_error};
use crate::event::GpuEvent;
use crate::hostfn::{in_host_function, PanicSlot};
use crate::raw::{Optional, RawApi, RawError, RawStream};
use devstream_core::{Completer, Completion, Error, Result};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Idle notifier streams a device keeps for reuse; more are destroyed when handed back.
const POOL_SIZE: usize = 256;

/// What a pending completion's callback owns.
struct Notify<A: RawApi> {
    completer: Completer,
    /// For a stream completion: the stream's panic slot and id (its first host-function panic
    /// is the result, as `synchronize` reports it; looked at, not taken).
    panic: Option<(Arc<PanicSlot>, u64)>,
    /// The awaited event, kept alive until the callback has run.
    _event: GpuEvent<A>,
    notifier: RawStream,
    device: &'static Device<A>,
}

impl<A: RawApi> Notify<A> {
    fn finish(self, status: i32) {
        let Notify {
            completer,
            panic,
            _event,
            notifier,
            device,
        } = self;
        let result = if status != 0 {
            Err(map_error::<A>(RawError {
                code: status,
                call: "completion callback status",
            }))
        } else {
            match &panic {
                Some((slot, stream)) => slot.peek(*stream),
                None => Ok(()),
            }
        };
        // The event's release goes to the release thread (we are on a callback thread).
        drop(_event);
        device.return_notifier(notifier);
        completer.complete(result);
    }
}

/// `cuStreamAddCallback` trampoline of a notifier.
///
/// # Safety
/// `data` comes from `Box::into_raw(Box<Notify<A>>)` and is passed to exactly one callback.
unsafe extern "C" fn notify_callback<A: RawApi>(
    _stream: RawStream,
    status: i32,
    data: *mut c_void,
) {
    // SAFETY: per this function's contract.
    let notify = unsafe { Box::from_raw(data.cast::<Notify<A>>()) };
    let _scope = crate::hostfn::callback_scope();
    // Nothing in `finish` panics (no user code but the waker, whose panic must not unwind into
    // the runtime either).
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify.finish(status)));
}

/// `cuLaunchHostFunc` trampoline of a notifier (runtimes without stream callbacks).
///
/// # Safety
/// As [`notify_callback`].
unsafe extern "C" fn notify_host_fn<A: RawApi>(data: *mut c_void) {
    // SAFETY: per this function's contract.
    let notify = unsafe { Box::from_raw(data.cast::<Notify<A>>()) };
    let _scope = crate::hostfn::callback_scope();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| notify.finish(0)));
}

/// A future for the work `event` captured (recorded, not inside a capture). `panic`: the
/// stream's slot for a stream completion. The device's context must be current.
pub(crate) fn notify_after<A: RawApi>(
    event: GpuEvent<A>,
    panic: Option<(Arc<PanicSlot>, u64)>,
) -> Result<Completion> {
    let device = event.inner.device;
    if in_host_function() {
        // Stream callbacks may not call the runtime: answer from what is known without it.
        return Err(Error::WouldDeadlock {
            op: "completion",
            reason: "a completion cannot be registered from inside a host function or stream \
                     callback (the runtime forbids its calls there); register it outside"
                .into(),
        });
    }
    let notifier = device.take_notifier()?;
    // SAFETY: the notifier and the event are alive and of this device; the context is current.
    if let Err(e) = unsafe { A::stream_wait_event(notifier, event.inner.raw) } {
        device.return_notifier(notifier);
        return Err(map_error::<A>(e));
    }
    let (completion, completer) = Completion::pending();
    let data = Box::into_raw(Box::new(Notify {
        completer,
        panic,
        _event: event,
        notifier,
        device,
    }));
    // SAFETY: the trampolines match the callback signatures and take ownership of `data`
    // exactly once when the runtime calls them.
    let launched = unsafe {
        if A::supports(Optional::StreamAddCallback) {
            A::stream_add_callback(notifier, notify_callback::<A>, data.cast())
        } else {
            A::launch_host_func(notifier, notify_host_fn::<A>, data.cast())
        }
    };
    if let Err(e) = launched {
        // SAFETY: the runtime refused the callback: we still own `data`.
        let notify = unsafe { Box::from_raw(data) };
        // The notifier still waits for the event: never reuse it (a later completion would
        // wait behind it); destroying a stream with queued work is allowed.
        // SAFETY: our own stream, no longer referenced.
        let _ = unsafe { A::stream_destroy(notify.notifier) };
        let Notify { completer, .. } = *notify;
        completer.complete(Err(map_error::<A>(e)));
    }
    Ok(completion)
}

impl<A: RawApi> Device<A> {
    /// An idle notifier stream (from the pool, or a new non-blocking one). The context must be
    /// current.
    fn take_notifier(&self) -> Result<RawStream> {
        if let Some(stream) = self.notifiers.lock().ok().and_then(|mut pool| pool.pop()) {
            return Ok(stream);
        }
        // SAFETY: the context is current; the stream is owned by the pool from now on.
        check::<A, _>(unsafe { A::stream_create(true, self.range.clamp(0)) })
    }

    /// Hands a notifier back (it may still run the callback that hands it back: later work on
    /// it runs after that). Never calls the runtime from a callback thread.
    fn return_notifier(&self, stream: RawStream) {
        if let Ok(mut pool) = self.notifiers.lock() {
            if pool.len() < POOL_SIZE {
                pool.push(stream);
                return;
            }
        }
        crate::hostfn::release_off_callback(move || {
            // SAFETY: an idle notifier of ours, referenced by nothing else.
            let _ = unsafe { A::stream_destroy(stream) };
        });
    }
}

/// `Event::completion`.
pub(crate) fn event_completion<A: RawApi>(event: &GpuEvent<A>) -> Completion {
    if !event.inner.recorded.load(Ordering::Relaxed) {
        return Completion::ready(Ok(()));
    }
    if event.inner.captured.load(Ordering::Acquire) {
        // Waiting on it from the notifier would pull the notifier into that capture.
        return Completion::ready(Err(Error::capture(
            "Event::completion",
            "the event was last recorded inside a capture: it stands for graph work",
        )));
    }
    let result = event
        .inner
        .device
        .bind()
        .and_then(|()| notify_after(event.clone(), None));
    result.unwrap_or_else(|error| Completion::ready(Err(error)))
}
