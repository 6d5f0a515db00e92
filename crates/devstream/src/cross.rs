//! Waits across backends: `Stream::wait_event` and `Stream::wait_stream` with an event or a
//! stream of another backend.
//!
//! Another backend's work is awaited through its [`Completion`] (the awaited backend's own
//! completion mechanism), which the waiting stream holds its later work behind with
//! [`Stream::wait_completion`] (a word of its own, written when the work completes; see
//! `devstream_core::foreign` and docs/CROSS_BACKEND.md). Two places are of *different
//! backends* when their backends differ, or when both are custom devices of different device
//! types (each device type is its own plug-in or registered backend). Places of one backend
//! keep the backend's own wait (and its `cross_device_wait` capability).

use crate::stream::StreamApi;
use crate::{Event, HostBuffer, Stream};
use devstream_core::{foreign, selfwait, Completion, Place, Result};

/// Whether `here` and `there` are places of different backends (see the module documentation).
pub(crate) fn different_backends(here: &Place, there: &Place) -> bool {
    match (here, there) {
        (
            Place::Custom {
                device_type: mine, ..
            },
            Place::Custom {
                device_type: theirs,
                ..
            },
        ) => mine != theirs,
        _ => here.backend() != there.backend(),
    }
}

/// Whether `event` belongs to another backend than `stream` (an event without a place is taken
/// as the stream's own, and its backend decides).
#[inline]
pub(crate) fn is_foreign_event(stream: &Stream, event: &Event) -> bool {
    event
        .place()
        .is_some_and(|there| different_backends(StreamApi::place(stream), &there))
}

/// Whether `other` belongs to another backend than `stream`.
#[inline]
pub(crate) fn is_foreign_stream(stream: &Stream, other: &Stream) -> bool {
    different_backends(StreamApi::place(stream), StreamApi::place(other))
}

/// `Unsupported` (naming the operation that carries the capability) where `stream`'s place
/// cannot wait on other backends' work, whether or not that work is complete.
fn supported(stream: &Stream) -> Result<()> {
    if StreamApi::capabilities(stream).foreign_waits {
        Ok(())
    } else {
        Err(devstream_core::Error::unsupported(
            "wait_completion",
            StreamApi::place(stream),
        ))
    }
}

/// `Error::Capture` (the capture left as it was) where `stream` captures and its place cannot
/// take a wait on other backends' work into a graph.
fn capturable(stream: &Stream, op: &'static str) -> Result<()> {
    if StreamApi::is_capturing(stream)? && !StreamApi::capabilities(stream).capture_foreign_waits {
        return Err(foreign::refused_in_capture(op));
    }
    Ok(())
}

/// `stream` waits for what `event` (of another backend) captured. On a capturing stream the
/// wait becomes part of the graph (`devstream_core::foreign`, "Captures").
pub(crate) fn wait_foreign_event(stream: &Stream, op: &'static str, event: &Event) -> Result<()> {
    supported(stream)?;
    let mut awaited = event.completion();
    let ready = foreign::ready_now(&mut awaited);
    // No completion can be made here (inside a host function of a runtime that forbids its
    // calls there): the call fails, the stream is left as it was. Answered before `capturable`
    // asks the waiting stream, which can be a call into that same runtime (HIP on CUDA).
    if let Some(Err(e @ devstream_core::Error::WouldDeadlock { .. })) = &ready {
        return Err(e.clone());
    }
    capturable(stream, op)?;
    match ready {
        // Done, or never recorded: nothing to wait for.
        Some(Ok(())) => Ok(()),
        // Recorded in a capture that is still active: not work this stream can wait for.
        Some(Err(e @ devstream_core::Error::Capture { .. })) => Err(e),
        // Ended with an error already: the stream still takes it in stream order.
        Some(Err(_)) => StreamApi::wait_completion(stream, awaited),
        None => {
            // Registered until the awaited work is ready, for the host-function rule.
            let here = StreamApi::place(stream);
            let there = event.place().unwrap_or_else(|| here.clone());
            let pending = foreign::PendingWait::register(
                foreign::BackendKey::of(&there),
                foreign::BackendKey::of(here),
            );
            let (registered, completer) = Completion::pending();
            foreign::relay(awaited, move |result| {
                drop(pending);
                completer.complete(result.clone());
            });
            StreamApi::wait_completion(stream, registered)
        }
    }
}

/// Whether a blocking call on work of the backend `target` (`None`: a backend not known) in the
/// host function running on this thread (if any) must be refused: that work may wait for the
/// host function through waits across backends (`devstream_core::foreign`, "Host functions")
/// and it is not complete.
fn refuse_in_host_fn(
    op: &'static str,
    target: Option<foreign::BackendKey>,
    complete: impl FnOnce() -> Result<bool>,
) -> Result<()> {
    if !foreign::host_fn_may_wait_for_itself(target) || complete()? {
        return Ok(());
    }
    Err(selfwait::would_deadlock(
        op,
        "incomplete work that may wait, through waits across backends, for work queued after \
         the host function",
    ))
}

/// [`refuse_in_host_fn`] for `Stream::synchronize` (a place without a non-blocking query
/// counts as incomplete).
#[inline]
pub(crate) fn check_host_fn_stream_wait(stream: &Stream) -> Result<()> {
    let target = foreign::BackendKey::of(StreamApi::place(stream));
    refuse_in_host_fn("synchronize", Some(target), || {
        if StreamApi::capabilities(stream).nonblocking_query {
            StreamApi::query(stream)
        } else {
            Ok(false)
        }
    })
}

/// [`refuse_in_host_fn`] for `Event::synchronize`.
#[inline]
pub(crate) fn check_host_fn_event_wait(event: &Event) -> Result<()> {
    let target = event.place().as_ref().map(foreign::BackendKey::of);
    refuse_in_host_fn("Event::synchronize", target, || event.query())
}

/// [`refuse_in_host_fn`] for `HostBuffer::read` and `HostBuffer::write` (`op`): refused where
/// the access would wait for queued copies of the buffer's backend (`would_wait`, the backend's
/// non-blocking answer), which may wait for the host function; an access that would not wait
/// goes on.
#[inline]
pub(crate) fn check_host_fn_host_buffer_access(
    op: &'static str,
    buffer: &HostBuffer,
    would_wait: impl FnOnce() -> bool,
) -> Result<()> {
    refuse_in_host_fn(op, buffer.backend_key(), || Ok(!would_wait()))
}

/// `stream` waits for all work submitted to `other` (of another backend) so far: a wait on an
/// event recorded on `other` now.
pub(crate) fn wait_foreign_stream(stream: &Stream, other: &Stream) -> Result<()> {
    supported(stream)?;
    refused_in_own_host_fn(other)?;
    capturable(stream, "wait_stream")?;
    let event = StreamApi::record_event(other)?;
    wait_foreign_event(stream, "wait_stream", &event)
}

/// Inside a host function of `other`'s backend, asks that backend for a completion of `other`
/// before anything is recorded there: a runtime that forbids its calls in its own host
/// functions (CUDA, HIP) refuses the completion at once with `Error::WouldDeadlock` and no
/// runtime call, where the record would fail with whatever error the runtime answers. Any
/// other answer drops the completion: the wait records and awaits its own event. Elsewhere,
/// nothing is asked.
fn refused_in_own_host_fn(other: &Stream) -> Result<()> {
    if foreign::running_host_fn() != Some(foreign::BackendKey::of(StreamApi::place(other))) {
        return Ok(());
    }
    let mut asked = StreamApi::completion(other);
    match foreign::ready_now(&mut asked) {
        Some(Err(e @ devstream_core::Error::WouldDeadlock { .. })) => Err(e),
        _ => Ok(()),
    }
}
