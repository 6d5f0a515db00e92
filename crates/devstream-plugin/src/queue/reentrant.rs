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

use super::{lock, wait};
use std::cell::Cell;
use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;

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
}

pub(super) struct ReentrantGuard<'a>(&'a ReentrantLock);

impl ReentrantLock {
    pub(super) fn new() -> Self {
        ReentrantLock {
            owner: Mutex::new(Owner {
                thread: None,
                depth: 0,
            }),
            released: Condvar::new(),
        }
    }

    /// Takes the lock, waiting for another thread to release it; `None` instead of waiting
    /// when the calling thread holds another submission lock (see the module docs).
    pub(super) fn enter(&self) -> Option<ReentrantGuard<'_>> {
        let me = std::thread::current().id();
        let mut owner = lock(&self.owner);
        loop {
            match owner.thread {
                None => {
                    owner.thread = Some(me);
                    owner.depth = 1;
                    HELD.with(|held| held.set(held.get() + 1));
                    break;
                }
                Some(holder) if holder == me => {
                    owner.depth += 1;
                    break;
                }
                Some(_) if HELD.with(Cell::get) > 0 => return None,
                Some(_) => owner = wait(&self.released, owner),
            }
        }
        Some(ReentrantGuard(self))
    }
}

impl ReentrantLock {
    /// Takes the lock if it is free or this thread's already; `None`, never waiting, while
    /// another thread holds it (for a host function's submissions, see `StreamCore::submit`).
    pub(super) fn try_enter(&self) -> Option<ReentrantGuard<'_>> {
        let me = std::thread::current().id();
        let mut owner = lock(&self.owner);
        match owner.thread {
            None => {
                owner.thread = Some(me);
                owner.depth = 1;
                HELD.with(|held| held.set(held.get() + 1));
            }
            Some(holder) if holder == me => owner.depth += 1,
            Some(_) => return None,
        }
        Some(ReentrantGuard(self))
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
        }
    }
}
