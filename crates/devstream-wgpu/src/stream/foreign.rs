//! Waits on another backend's work (`DeviceStream::wait_completion`): held submissions, as for
//! a flag. The stream holds its later work at a flag of its own, which the awaited backend's
//! completion path sets through `devstream_core::foreign::relay` (the flag's store wakes the
//! device's poller, the one thread that already releases held work); a `Held::Foreign` item
//! behind the flag wait makes an error of the awaited work this stream's error. No thread is
//! created or blocked per wait.
//!
//! Before it wakes the poller, the relay releases what needs no device call on its own thread
//! (`sched::release_on_relay`: the gate, the outcome, flag writes right behind them) and hands
//! a host function that follows to a runner thread: the work right behind the wait then
//! starts one thread wake sooner than the poller would start it.
//!
//! A capturing stream records the same two operations (`Op::WaitFlag` on that flag, then
//! `Op::Foreign`): the flag is set once, when the awaited work completes, and stays set, so
//! each replay holds the launch stream until that work completed and passes at once afterwards.

use super::WgpuStream;
use crate::flag::WgpuFlag;
use crate::graph::Op;
use crate::sched::{flush_locked, hold_locked, release_on_relay, Held};
use devstream_core::{foreign, Completion, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl WgpuStream {
    /// Holds later work until `awaited` is ready; its error becomes the stream's. Captured, the
    /// wait and the report become operations of the graph.
    pub(super) fn wait_foreign(&self, awaited: Completion) -> Result<()> {
        let device = &self.handle.device;
        let id = self.handle.id;
        let gate = WgpuFlag::new(device.place.clone()).inner;
        let released = Arc::clone(&gate);
        let shared = Arc::downgrade(device);
        // Relayed before the scheduler lock is taken: a completion that is ready now releases
        // on this thread.
        let outcome = foreign::relay(awaited, move |_| {
            released.value.store(1, Ordering::SeqCst);
            if let Some(device) = shared.upgrade() {
                release_on_relay(&device, id);
            }
            // Wakes the poller for what is left, and any replay of a captured wait on the gate.
            released.store(1);
        });
        let mut sched = self.lock();
        if let Some(session) = self.capturing(&mut sched) {
            self.push_captured(&session, Op::WaitFlag(gate, 1))?;
            return self.push_captured(&session, Op::Foreign(outcome));
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
