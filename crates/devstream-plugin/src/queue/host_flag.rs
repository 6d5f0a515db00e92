//! The host-visible 32-bit value behind a plug-in place's `Flag`. The ABI cannot make a stream
//! wait for a value in memory, so waits on it are kept on the host: a store wakes the
//! dispatcher (which submits the work held behind the flag) and any thread blocked in
//! [`HostFlag::wait_until`] (a blocking callback handed to the plug-in when a capture begins
//! behind a held wait).

use super::dispatcher::{any_blocked, wake_dispatcher};
use super::{lock, wait};
use devstream_core::Place;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};

/// A host-visible 32-bit value (the plug-in place's `Flag`).
#[derive(Debug)]
pub(crate) struct HostFlag {
    pub(crate) id: u64,
    pub(crate) place: Place,
    value: AtomicU32,
    /// The gate of a wait for a [`Completion`](devstream_core::Completion) (set to 1 when the
    /// awaited work is done), not a user's flag: what it waits for is work devstream cannot
    /// see from here, so a host function's self-wait search counts a held wait on it as
    /// possibly waiting for the host function (`self_wait`).
    pub(crate) completion_gate: bool,
    /// Wakes threads in [`HostFlag::wait_until`].
    waiters: Mutex<usize>,
    changed: Condvar,
}

impl HostFlag {
    pub(crate) fn new(place: Place) -> HostFlag {
        HostFlag::with_kind(place, false)
    }

    /// The gate of a wait for a completion (see [`HostFlag::completion_gate`]).
    pub(crate) fn completion_gate(place: Place) -> HostFlag {
        HostFlag::with_kind(place, true)
    }

    fn with_kind(place: Place, completion_gate: bool) -> HostFlag {
        HostFlag {
            id: devstream_core::next_id(),
            place,
            value: AtomicU32::new(0),
            completion_gate,
            waiters: Mutex::new(0),
            changed: Condvar::new(),
        }
    }

    pub(crate) fn get(&self) -> u32 {
        self.value.load(Ordering::SeqCst)
    }

    /// Stores the value and lets deferred work that waits for it proceed.
    pub(crate) fn set(&self, value: u32) {
        self.value.store(value, Ordering::SeqCst);
        if any_blocked() {
            wake_dispatcher();
        }
        let waiters = lock(&self.waiters);
        if *waiters > 0 {
            self.changed.notify_all();
        }
    }

    /// Blocks the calling thread until the value is at least `value` (inside a plug-in
    /// callback: see [`Callback::BlockUntil`](super::Callback::BlockUntil)).
    pub(crate) fn wait_until(&self, value: u32) {
        let mut waiters = lock(&self.waiters);
        *waiters += 1;
        while self.get() < value {
            waiters = wait(&self.changed, waiters);
        }
        *waiters -= 1;
    }
}
