//! [`Completion`] futures on CUDA and HIP (one implementation, generic over [`RawApi`]).
//!
//! No thread is started and nothing polls: a stream callback (`cuStreamAddCallback`, whose
//! status carries a device fault; `cuLaunchHostFunc` where the runtime lacks callbacks) fills
//! the future on the runtime's callback thread.
//!
//! - `Stream::completion` puts that callback on the stream itself: it runs once all the work
//!   submitted so far is done. No event, no other stream, no driver object is created, so a
//!   completion can be registered at any time, however many are pending (the stream holds its
//!   later work for the time the callback takes: it only wakes the task). A per-thread default
//!   stream used from another thread cannot be named from here: its completion waits on an
//!   event recorded on the legacy stream, as an event completion.
//! - `Event::completion` first asks the event (done: ready at once). Otherwise a *notifier*, an
//!   internal non-blocking stream of the device, waits on the event and then runs the
//!   callback. Notifiers are pooled per device and capped at [`MAX_NOTIFIERS`]: a completion
//!   takes an idle one, else makes one while fewer exist, else queues on the one with the
//!   fewest pending completions (its wake then also waits for those earlier events; it is
//!   never lost). The cap matters: creating streams by the thousand (one per pending future,
//!   the first design) made the driver wait on the device inside `cuStreamCreate` while a
//!   flag gate held a stream, and the conformance completion tests hung on an H100.
//!
//! The callback runs on the runtime's callback thread, where runtime calls are forbidden: it
//! only fills the future (the waker runs there: executors' wakers just schedule the task),
//! drops the event handle it kept (its destruction goes to devstream's release thread) and
//! marks its notifier one completion less busy.

use crate::device::Device;
use crate::error::{check, check_ready, map_error};
use crate::event::GpuEvent;
use crate::hostfn::{in_host_function, PanicSlot};
use crate::raw::{Optional, RawApi, RawError, RawStream};
use devstream_core::{Completer, Completion, Error, Result};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Notifier streams a device makes at most (see the module documentation).
pub const MAX_NOTIFIERS: usize = 64;

/// A device's notifier streams and how many pending completions each one holds.
#[derive(Default)]
pub(crate) struct Notifiers {
    streams: Vec<(RawStream, usize)>,
}

/// What a pending completion's callback owns.
struct Notify<A: RawApi> {
    completer: Completer,
    /// For a stream completion: the stream's panic slot and id (its first host-function panic
    /// is the result, as `synchronize` reports it; looked at, not taken).
    panic: Option<(Arc<PanicSlot>, u64)>,
    /// The awaited event (event completions), kept alive until the callback has run.
    _event: Option<GpuEvent<A>>,
    /// The notifier the callback runs on (event completions).
    notifier: Option<RawStream>,
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
        if let Some(notifier) = notifier {
            device.release_notifier(notifier);
        }
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

/// Refuses a registration from inside a host function or stream callback.
fn refuse_in_host_function() -> Result<()> {
    if in_host_function() {
        // Stream callbacks may not call the runtime.
        return Err(Error::WouldDeadlock {
            op: "completion",
            reason: "a completion cannot be registered from inside a host function or stream \
                     callback (the runtime forbids its calls there); register it outside"
                .into(),
        });
    }
    Ok(())
}

/// Queues the completion callback owning `notify` on `stream`; on failure the future is
/// completed with the error (and the notifier, if any, released).
fn launch_callback<A: RawApi>(stream: RawStream, notify: Notify<A>) {
    let data = Box::into_raw(Box::new(notify));
    // SAFETY: the trampolines match the callback signatures and take ownership of `data`
    // exactly once when the runtime calls them; `stream` is alive and of the current context.
    let launched = unsafe {
        if A::supports(Optional::StreamAddCallback) {
            A::stream_add_callback(stream, notify_callback::<A>, data.cast())
        } else {
            A::launch_host_func(stream, notify_host_fn::<A>, data.cast())
        }
    };
    if let Err(e) = launched {
        // SAFETY: the runtime refused the callback: we still own `data`.
        let notify = unsafe { Box::from_raw(data) };
        let Notify {
            completer,
            notifier,
            device,
            ..
        } = *notify;
        if let Some(notifier) = notifier {
            // It may still wait for the event: harmless, later completions on it wait at most
            // for that event too.
            device.release_notifier(notifier);
        }
        completer.complete(Err(map_error::<A>(e)));
    }
}

/// `Stream::completion` on a stream this thread can name (`raw`): the callback goes on the
/// stream itself. The device's context must be current.
pub(crate) fn notify_on_stream<A: RawApi>(
    device: &'static Device<A>,
    raw: RawStream,
    panic: (Arc<PanicSlot>, u64),
) -> Result<Completion> {
    refuse_in_host_function()?;
    let (completion, completer) = Completion::pending();
    launch_callback(
        raw,
        Notify::<A> {
            completer,
            panic: Some(panic),
            _event: None,
            notifier: None,
            device,
        },
    );
    Ok(completion)
}

/// A future for the work `event` captured (recorded, not inside a capture), through a
/// notifier. `panic`: the stream's slot for a stream completion. The device's context must be
/// current.
pub(crate) fn notify_after<A: RawApi>(
    event: GpuEvent<A>,
    panic: Option<(Arc<PanicSlot>, u64)>,
) -> Result<Completion> {
    let device = event.inner.device;
    refuse_in_host_function()?;
    let notifier = device.take_notifier()?;
    // SAFETY: the notifier and the event are alive and of this device; the context is current.
    if let Err(e) = unsafe { A::stream_wait_event(notifier, event.inner.raw) } {
        device.release_notifier(notifier);
        return Err(map_error::<A>(e));
    }
    let (completion, completer) = Completion::pending();
    launch_callback(
        notifier,
        Notify {
            completer,
            panic,
            _event: Some(event),
            notifier: Some(notifier),
            device,
        },
    );
    Ok(completion)
}

impl<A: RawApi> Device<A> {
    /// A notifier stream for one more pending completion: an idle one, else a new one while
    /// fewer than [`MAX_NOTIFIERS`] exist, else the least busy. The context must be current.
    fn take_notifier(&self) -> Result<RawStream> {
        let mut pool = self
            .notifiers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let full = pool.streams.len() >= MAX_NOTIFIERS;
        let least_busy = pool.streams.iter_mut().min_by_key(|(_, pending)| *pending);
        match least_busy {
            Some((stream, pending)) if *pending == 0 || full => {
                *pending += 1;
                return Ok(*stream);
            }
            _ => {}
        }
        // SAFETY: the context is current; the stream belongs to the pool from now on (kept for
        // the process's life, like the device).
        let stream = check::<A, _>(unsafe { A::stream_create(true, self.range.clamp(0)) })?;
        pool.streams.push((stream, 1));
        Ok(stream)
    }

    /// One completion on `stream` less (from the callback: never calls the runtime).
    fn release_notifier(&self, stream: RawStream) {
        let mut pool = self
            .notifiers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, pending)) = pool.streams.iter_mut().find(|(s, _)| *s == stream) {
            *pending = pending.saturating_sub(1);
        }
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
    let result = event.inner.device.bind().and_then(|()| {
        // Done already (the common case for events awaited late): nothing to register.
        // SAFETY: the event is alive while `event` is.
        if check_ready::<A>(unsafe { A::event_query(event.inner.raw) })? {
            return Ok(Completion::ready(Ok(())));
        }
        notify_after(event.clone(), None)
    });
    result.unwrap_or_else(|error| Completion::ready(Err(error)))
}
