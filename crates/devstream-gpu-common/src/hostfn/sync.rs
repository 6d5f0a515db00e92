//! The synchronisation types of the host-function ring's slot handshake and of [`PanicSlot`]
//! (`super::HostSlot`, `super::HostRing`, [`PanicSlot`]): `std`'s in every build, loom's under
//! `--cfg loom`, so that `cargo xtask loom` model-checks the production `claim` /
//! `launch_data` / `host_slot` / `ClaimedSlot::drop` and `raise` / `take` themselves (see
//! `loom_tests.rs`). Nothing else in the crate uses this module.
//!
//! [`PanicSlot`]: super::PanicSlot

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

#[cfg(not(loom))]
pub(crate) use devstream_core::sync::lock;

/// [`devstream_core::sync::lock`] for loom's mutex: the guard, whether or not a holder panicked.
#[cfg(loom)]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> loom::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `std::cell::UnsafeCell` with loom's access API (`with_mut`), so that under loom every
/// access to a slot's closure is checked against the slot handshake's happens-before order.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a pointer to the value; what `f` may do with it is the caller's to prove.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
