//! Waits on another backend's work (`DeviceStream::wait_completion`) for plug-in streams: the
//! host gate a flag wait uses. Later items of the stream are deferred on the host behind a flag
//! of its own, which the awaited backend's completion path sets through
//! `devstream_core::foreign::relay` (the flag's store wakes the one dispatcher thread that
//! already hands deferred work over); an item behind the gate records an error of the awaited
//! work in the stream's error slot. No thread is created or blocked per wait. A Rust-registered
//! device answers with its own `wait_completion`.

use crate::capture::{capturing, Capturing};
use crate::queue::{HostFlag, Item, StreamCore};
use devstream_core::{foreign, Completion, Error, Result};
use std::sync::Arc;

/// Defers `core`'s later work until `awaited` is ready; its error becomes the stream's.
pub(crate) fn wait_completion(core: &Arc<StreamCore>, awaited: Completion) -> Result<()> {
    if !core.runtime.caps.foreign_waits {
        return Err(Error::unsupported("wait_completion", &core.place));
    }
    if !matches!(capturing(core)?, Capturing::No) {
        return Err(foreign::refused_in_capture("wait_completion"));
    }
    let gate = Arc::new(HostFlag::new(core.place.clone()));
    let released = Arc::clone(&gate);
    let outcome = foreign::relay(awaited, move |_| released.set(1));
    core.submit(Item::WaitFlag(gate, 1))?;
    if outcome.is_resolved() && outcome.result().is_ok() {
        return Ok(());
    }
    core.submit(Item::Op(Box::new(move |core: &StreamCore| {
        if let Err(error) = outcome.result() {
            core.record_error(error);
        }
        Ok(())
    })))
}
