//! Locking that ignores poisoning, for every backend.
//!
//! A `std` mutex is poisoned when a thread panics while holding it. devstream's critical sections
//! leave their data consistent before anything that can panic runs, and user code (host
//! functions, kernels, destructors of captured values) is run under [`crate::panic`]'s containment
//! or outside any lock, so a poisoned lock still guards whole data. Every backend therefore takes
//! its locks through these helpers instead of repeating `unwrap_or_else(PoisonError::into_inner)`;
//! a panic then never turns into a second panic (or an abort) at the next lock.
//!
//! ```
//! use std::sync::Mutex;
//! let counter = Mutex::new(1);
//! *devstream_core::sync::lock(&counter) += 1;
//! assert_eq!(*devstream_core::sync::lock(&counter), 2);
//! ```

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

/// Locks `mutex`, ignoring poisoning.
#[inline]
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes `lock` for reading, ignoring poisoning.
#[inline]
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Takes `lock` for writing, ignoring poisoning.
#[inline]
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `condvar` with `guard` (as [`Condvar::wait`]), ignoring poisoning.
#[inline]
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn poisoned_locks_still_lock_read_and_write() {
        let mutex = Arc::new(Mutex::new(5));
        let rw = Arc::new(RwLock::new(1));
        let (held_mutex, held_rw) = (Arc::clone(&mutex), Arc::clone(&rw));
        let _ = std::thread::spawn(move || {
            let _guards = (held_mutex.lock().unwrap(), held_rw.write().unwrap());
            panic!("poison both locks");
        })
        .join();
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        assert_eq!(*lock(&mutex), 5);
        *write(&rw) += 1;
        assert_eq!(*read(&rw), 2);
    }
}
