//! The per-stream submission lock: re-entrant, because a synchronous plug-in may run a host
//! callback inside `stream_add_callback`, and that callback may submit to the same stream on the
//! same thread. The owner and its depth sit under one mutex; other threads wait on a condition
//! variable until the depth falls back to zero.

use super::{lock, wait};
use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;

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

    pub(super) fn lock(&self) -> ReentrantGuard<'_> {
        let me = std::thread::current().id();
        let mut owner = lock(&self.owner);
        loop {
            match owner.thread {
                None => {
                    owner.thread = Some(me);
                    owner.depth = 1;
                    break;
                }
                Some(holder) if holder == me => {
                    owner.depth += 1;
                    break;
                }
                Some(_) => owner = wait(&self.released, owner),
            }
        }
        ReentrantGuard(self)
    }
}

impl Drop for ReentrantGuard<'_> {
    fn drop(&mut self) {
        let mut owner = lock(&self.0.owner);
        owner.depth -= 1;
        if owner.depth == 0 {
            owner.thread = None;
            self.0.released.notify_one();
        }
    }
}
