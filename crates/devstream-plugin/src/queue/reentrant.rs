//! The per-stream submission lock: re-entrant, because a synchronous plug-in may run a host
//! callback inside `stream_add_callback`, and that callback may submit to the same stream on the
//! same thread. The owner and its depth sit under one mutex; other threads wait on a condition
//! variable until the depth falls back to zero.
//!
//! **No waiting while holding another.** A stream's lock is held across its calls into the
//! plug-in (that is what keeps its submissions in order), and a plug-in may call back into
//! devstream from inside those calls, on another stream: a thread holding stream X's lock then
//! asks for stream Y's. Two threads doing that crosswise (X then Y, and Y then X) would wait for
//! each other for good. So a thread that already holds a submission lock never waits for
//! another one: [`ReentrantLock::enter`] answers `None` when the lock is held by another thread
//! and the caller holds one of its own, and the caller holds its work on the host instead (for
//! the dispatcher, which holds no lock while it waits). Each thread counts the submission locks
//! it holds.

use super::dispatcher::wake_dispatcher;
use super::{lock, wait};
use std::cell::Cell;
use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

thread_local! {
    /// How many distinct submission locks this thread holds.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// A lock the holding thread may take again.
pub(super) struct ReentrantLock {
    owner: Mutex<Owner>,
    released: Condvar,
}

/// Who holds a [`ReentrantLock`], and how many times over.
struct Owner {
    thread: Option<ThreadId>,
    depth: usize,
    /// The dispatcher found the lock held and went on: its release wakes the dispatcher.
    dispatcher_skipped: bool,
}

pub(super) struct ReentrantGuard<'a>(&'a ReentrantLock);

impl Owner {
    /// Takes the lock for the calling thread if it is free or already this thread's (one level
    /// deeper); `false` while another thread holds it.
    fn take(&mut self) -> bool {
        let me = std::thread::current().id();
        match self.thread {
            None => {
                self.thread = Some(me);
                self.depth = 1;
                HELD.with(|held| held.set(held.get() + 1));
                true
            }
            Some(holder) if holder == me => {
                self.depth += 1;
                true
            }
            Some(_) => false,
        }
    }
}

impl ReentrantLock {
    pub(super) fn new() -> Self {
        ReentrantLock {
            owner: Mutex::new(Owner {
                thread: None,
                depth: 0,
                dispatcher_skipped: false,
            }),
            released: Condvar::new(),
        }
    }

    /// Takes the lock, waiting for another thread to release it; `None` instead of waiting
    /// when the calling thread holds another submission lock (see the module docs).
    pub(super) fn enter(&self) -> Option<ReentrantGuard<'_>> {
        let mut owner = lock(&self.owner);
        loop {
            if owner.take() {
                return Some(ReentrantGuard(self));
            }
            if HELD.with(Cell::get) > 0 {
                return None;
            }
            owner = wait(&self.released, owner);
        }
    }

    /// [`Self::enter`] for a thread whose waiting may be what the holder waits for (a host
    /// function: the holder may be inside a plug-in call that waits for the host function's
    /// stream). While another thread holds the lock, `refuse` is asked again every
    /// [`RECHECK`] (the holder's submissions change what the caller's work depends on, and
    /// they do not wake this wait); once it answers `true`, the caller stops waiting.
    pub(super) fn enter_unless(&self, mut refuse: impl FnMut() -> bool) -> Entry<'_> {
        let mut owner = lock(&self.owner);
        loop {
            if owner.take() {
                return Entry::Taken(ReentrantGuard(self));
            }
            if HELD.with(Cell::get) > 0 {
                return Entry::HoldsAnother;
            }
            // Asked without the lock's mutex: `refuse` takes the stream's own locks, which the
            // holder takes while it holds this lock.
            drop(owner);
            if refuse() {
                return Entry::Refused;
            }
            owner = lock(&self.owner);
            if owner.thread.is_some() {
                owner = self
                    .released
                    .wait_timeout(owner, RECHECK)
                    .map(|(owner, _)| owner)
                    .unwrap_or_else(|poisoned| poisoned.into_inner().0);
            }
        }
    }
}

/// How often [`ReentrantLock::enter_unless`] asks again while it waits.
const RECHECK: Duration = Duration::from_millis(1);

/// What [`ReentrantLock::enter_unless`] did.
pub(super) enum Entry<'a> {
    /// The lock is the caller's.
    Taken(ReentrantGuard<'a>),
    /// Another thread holds it and the caller holds another submission lock (see the module
    /// docs): not waited for.
    HoldsAnother,
    /// Another thread holds it and the caller's `refuse` answered `true`.
    Refused,
}

impl ReentrantLock {
    /// Takes the lock if it is free or this thread's already; `None`, never waiting, while
    /// another thread holds it (for a host function's submissions, see `StreamCore::submit`).
    pub(super) fn try_enter(&self) -> Option<ReentrantGuard<'_>> {
        self.take_if_free(false)
    }

    /// [`Self::try_enter`] for the dispatcher, which never waits for a submission lock: when
    /// another thread holds it, the lock notes that the dispatcher passed, and its release
    /// wakes the dispatcher to come back (the note and the release are under one mutex, so no
    /// release is missed).
    pub(super) fn try_enter_or_wake_dispatcher(&self) -> Option<ReentrantGuard<'_>> {
        self.take_if_free(true)
    }

    fn take_if_free(&self, dispatcher: bool) -> Option<ReentrantGuard<'_>> {
        let mut owner = lock(&self.owner);
        if owner.take() {
            return Some(ReentrantGuard(self));
        }
        owner.dispatcher_skipped |= dispatcher;
        None
    }
}

impl Drop for ReentrantGuard<'_> {
    fn drop(&mut self) {
        let mut owner = lock(&self.0.owner);
        owner.depth -= 1;
        if owner.depth == 0 {
            owner.thread = None;
            HELD.with(|held| held.set(held.get() - 1));
            self.0.released.notify_one();
            if std::mem::take(&mut owner.dispatcher_skipped) {
                drop(owner);
                wake_dispatcher();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::sync::Arc;

    #[test]
    fn the_dispatcher_never_waits_and_is_noted_for_the_release() {
        let lock_ = Arc::new(ReentrantLock::new());
        let (taken, taken_rx) = channel();
        let (release, release_rx) = channel::<()>();
        let holder = {
            let lock_ = lock_.clone();
            std::thread::spawn(move || {
                let guard = lock_.enter().expect("free");
                taken.send(()).unwrap();
                release_rx.recv().unwrap();
                drop(guard);
            })
        };
        taken_rx.recv().unwrap();
        // Held by another thread: no guard, no wait, and the release is to wake the dispatcher.
        assert!(lock_.try_enter_or_wake_dispatcher().is_none());
        assert!(lock(&lock_.owner).dispatcher_skipped);
        release.send(()).unwrap();
        holder.join().unwrap();
        assert!(
            !lock(&lock_.owner).dispatcher_skipped,
            "the release takes the note"
        );
        // Free: taken, re-entrantly too, and released to nobody.
        let outer = lock_.try_enter_or_wake_dispatcher().expect("free");
        let inner = lock_.try_enter_or_wake_dispatcher().expect("this thread's");
        drop(inner);
        drop(outer);
        assert!(lock(&lock_.owner).thread.is_none());
        assert!(!lock(&lock_.owner).dispatcher_skipped);
    }
}
