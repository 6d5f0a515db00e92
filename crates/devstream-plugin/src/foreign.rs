//! Waits on another backend's work (`DeviceStream::wait_completion`) for plug-in streams: the
//! host gate a flag wait uses. Later items of the stream are deferred on the host behind a flag
//! of its own, which the awaited backend's completion path sets through
//! `devstream_core::foreign::relay` (the flag's store wakes the one dispatcher thread that
//! already hands deferred work over); an item behind the gate records an error of the awaited
//! work in the stream's error slot. No thread is created or blocked per wait. A Rust-registered
//! device answers with its own `wait_completion`.
//!
//! A capturing stream cannot hold a replay on the host: as a captured flag wait, the wait is a
//! graph callback that blocks the replaying stream until the flag is set (once, when the
//! awaited work completes; it stays set, so later replays pass at once), then returns the
//! awaited work's error, which the replay reports on its launch stream.

use crate::capture::submitting_into;
use crate::queue::{HostFlag, Item, StreamCore};
use devstream_core::{foreign, Completion, Error, Result};
use std::sync::Arc;

/// Defers `core`'s later work until `awaited` is ready; its error becomes the stream's.
/// Captured, a graph callback waits and reports instead.
pub(crate) fn wait_completion(core: &Arc<StreamCore>, awaited: Completion) -> Result<()> {
    if !core.runtime.caps.foreign_waits {
        return Err(Error::unsupported("wait_completion", &core.place));
    }
    let capture = submitting_into("wait_completion", core)?;
    if capture.is_some() && !core.runtime.caps.capture_foreign_waits {
        return Err(foreign::refused_in_capture("wait_completion"));
    }
    let gate = Arc::new(HostFlag::completion_gate(core.place.clone()));
    let released = Arc::clone(&gate);
    let outcome = foreign::relay(awaited, move |_| released.set(1));
    if let Some(capture) = capture {
        let wait = capture.fallible_fn(Box::new(move || {
            gate.wait_until(1);
            outcome.result()
        }));
        return crate::stream::submit_graph_callback(core, wait);
    }
    core.submit(Item::WaitFlag(gate, 1))?;
    if outcome.is_resolved() && outcome.result().is_ok() {
        return Ok(());
    }
    core.submit(Item::Op(Box::new(move |core: &StreamCore| {
        if let Err(error) = outcome.result() {
            core.raise_error(error);
        }
        Ok(())
    })))
}
