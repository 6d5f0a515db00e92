//! Small helpers: a blocking executor for wgpu's native futures, a wake-up signal, alignment.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Runs a future to completion on this thread. wgpu's native futures (adapter and device
/// requests, error-scope pops) are ready at once or after a few polls, so a spin that yields is
/// enough.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut context) {
            return value;
        }
        std::thread::yield_now();
    }
}

/// Locks a mutex, ignoring poisoning: every critical section here leaves its data consistent
/// before anything that can panic, and host-function panics are caught before they reach a lock.
pub(crate) use devstream_core::sync::lock;

/// A generation counter with a condition variable: `notify` bumps it and wakes every waiter.
/// Waiters read the generation while they hold the lock protecting the state they check, then
/// wait for it to change, so no notification is lost. `notify` costs one atomic add when nobody
/// waits.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    generation: AtomicU64,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    changed: Condvar,
}

impl Signal {
    /// The current generation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Bumps the generation and wakes every waiter.
    pub(crate) fn notify(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            // A waiter between its check and its wait holds the lock: taking it here means the
            // notification reaches it once it waits.
            drop(lock(&self.lock));
            self.changed.notify_all();
        }
    }

    /// Waits until the generation differs from `seen` or `timeout` passes.
    pub(crate) fn wait_change(&self, seen: u64, timeout: Option<Duration>) {
        let mut guard = lock(&self.lock);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        while self.generation.load(Ordering::SeqCst) == seen {
            match deadline {
                None => {
                    guard = devstream_core::sync::wait(&self.changed, guard);
                }
                Some(deadline) => {
                    let now = std::time::Instant::now();
                    if now >= deadline {
                        break;
                    }
                    guard = self
                        .changed
                        .wait_timeout(guard, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
    }
}

/// `value` rounded down to a multiple of `align` (a power of two).
pub(crate) fn align_down(value: u64, align: u64) -> u64 {
    value & !(align - 1)
}

/// `value` rounded up to a multiple of `align` (a power of two).
pub(crate) fn align_up(value: u64, align: u64) -> u64 {
    (value + align - 1) & !(align - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment() {
        for (value, align, down, up) in [(7, 4, 4, 8), (8, 4, 8, 8), (300, 256, 256, 512)] {
            assert_eq!(
                align_down(value, align),
                down,
                "align_down({value}, {align})"
            );
            assert_eq!(align_up(value, align), up, "align_up({value}, {align})");
        }
    }

    #[test]
    fn block_on_ready_future() {
        assert_eq!(block_on(async { 3 }), 3);
    }

    #[test]
    fn signal_wakes_waiter() {
        let signal = std::sync::Arc::new(Signal::default());
        let seen = signal.generation();
        let s = signal.clone();
        let t = std::thread::spawn(move || s.wait_change(seen, None));
        signal.notify();
        t.join().unwrap();
        assert_ne!(signal.generation(), seen);
    }
}
