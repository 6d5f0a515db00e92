//! The synchronisation types of the worker pool's wake-up handshake ([`super::PoolShared`]):
//! `std`'s in every build, loom's under `--cfg loom`, so that `cargo xtask loom` model-checks
//! the production `push` / `pop` / `shut_down` themselves (see `loom_tests.rs`). Only the
//! pool's handshake uses this module; everything else in the crate stays on `std`.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex};

/// Locks a mutex, ignoring poisoning ([`devstream_core::sync::lock`] for `std`'s mutexes).
#[cfg(not(loom))]
pub(crate) use devstream_core::sync::lock;

/// Locks `mutex`, ignoring poisoning (as [`devstream_core::sync::lock`] does for `std`'s mutexes).
#[cfg(loom)]
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One busy-wait hint of a backoff round, and giving the processor to another thread (under
/// loom: both a yield, so that the model checker schedules the thread the spinner waits for).
#[cfg(loom)]
pub(crate) use loom::{hint::spin_loop, thread::yield_now};
#[cfg(not(loom))]
pub(crate) use std::{hint::spin_loop, thread::yield_now};
