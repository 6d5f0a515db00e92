//! Waits on another backend's work (`DeviceStream::wait_completion`): held submissions, as for
//! a flag. The stream holds its later work at a flag of its own, which the awaited backend's
//! completion path sets through `devstream_core::foreign::relay` (the flag's store wakes the
//! device's poller, the one thread that already releases held work); a `Held::Foreign` item
//! behind the flag wait makes an error of the awaited work this stream's error. No thread is
//! created or blocked per wait.

use super::WgpuStream;
use crate::flag::WgpuFlag;
use crate::sched::{flush_locked, hold_locked, Held};
use devstream_core::{foreign, Completion, Result};
use std::sync::Arc;

impl WgpuStream {
    /// Holds later work until `awaited` is ready; its error becomes the stream's.
    pub(super) fn wait_foreign(&self, awaited: Completion) -> Result<()> {
        let device = &self.handle.device;
        let id = self.handle.id;
        if self.capturing(&mut self.lock()).is_some() {
            return Err(foreign::refused_in_capture("wait_completion"));
        }
        let gate = WgpuFlag::new(device.place.clone()).inner;
        let released = Arc::clone(&gate);
        // Relayed before the scheduler lock is taken: a completion that is ready now releases
        // on this thread.
        let outcome = foreign::relay(awaited, move |_| released.store(1));
        let mut sched = self.lock();
        if self.capturing(&mut sched).is_some() {
            return Err(foreign::refused_in_capture("wait_completion"));
        }
        self.state(&mut sched)?;
        self.wait_flag_locked(&mut sched, gate, 1);
        if outcome.is_resolved() && outcome.result().is_ok() {
            return Ok(());
        }
        flush_locked(device, &mut sched, id, false);
        hold_locked(device, &mut sched, id, Held::Foreign(outcome));
        Ok(())
    }
}
