//! Host-visible flags: a shared `u32` streams wait on (until ≥ a value) and write in order.

use crate::stream::StreamInner;
use crate::{lock, CPU_PLACE};
use devstream_core::{next_id, DeviceFlag, Place};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Shared state of a [`CpuFlag`]: the value and the streams blocked on it.
pub(crate) struct FlagInner {
    id: u64,
    value: AtomicU32,
    /// Number of registered waiters, read without the lock by `store` (SeqCst on both sides,
    /// so a store either sees a registration or the registration sees the store).
    waiting: AtomicUsize,
    waiters: Mutex<Vec<(u32, Arc<StreamInner>)>>,
}

impl FlagInner {
    /// Whether the value is ≥ `value`.
    pub(crate) fn reached(&self, value: u32) -> bool {
        self.value.load(Ordering::SeqCst) >= value
    }

    /// Registers `stream` to be woken when the value becomes ≥ `value`. Returns `false` (and
    /// registers nothing) if it already is.
    pub(crate) fn add_waiter(&self, value: u32, stream: &Arc<StreamInner>) -> bool {
        let mut waiters = lock(&self.waiters);
        self.waiting.fetch_add(1, Ordering::SeqCst);
        if self.reached(value) {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        waiters.push((value, stream.clone()));
        true
    }

    /// Sets the value and wakes the streams it releases.
    pub(crate) fn store(&self, value: u32) {
        self.value.store(value, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut released = Vec::new();
        {
            let mut waiters = lock(&self.waiters);
            let mut index = 0;
            while index < waiters.len() {
                if waiters[index].0 <= value {
                    released.push(waiters.swap_remove(index).1);
                } else {
                    index += 1;
                }
            }
            self.waiting.fetch_sub(released.len(), Ordering::SeqCst);
        }
        for stream in released {
            stream.wake();
        }
    }
}

/// A host-visible 32-bit value (initially 0) that streams wait on — until it is ≥ a value,
/// CUDA's `CU_STREAM_WAIT_VALUE_GEQ` — and write, in stream order. The host reads and sets it
/// directly; a set releases the streams it satisfies at once (they are woken, nothing polls).
///
/// Cheap to clone: clones share the value.
///
/// ```
/// use devstream_core::{DeviceBackend, DeviceFlag, DeviceStream, Place, StreamOptions};
/// use devstream_cpu::CpuBackend;
/// let s = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
/// let gate = CpuBackend::new_flag(&Place::Cpu).unwrap();
/// let done = CpuBackend::new_flag(&Place::Cpu).unwrap();
/// s.wait_flag(&gate, 2).unwrap();
/// s.write_flag(&done, 1).unwrap();
/// gate.set(1);                      // 1 < 2: still held
/// assert!(!s.query().unwrap());
/// gate.set(5);                      // ≥ 2: released
/// s.synchronize().unwrap();
/// assert_eq!(done.get(), 1);
/// ```
#[derive(Clone)]
pub struct CpuFlag(pub(crate) Arc<FlagInner>);

impl CpuFlag {
    pub(crate) fn new() -> CpuFlag {
        CpuFlag(Arc::new(FlagInner {
            id: next_id(),
            value: AtomicU32::new(0),
            waiting: AtomicUsize::new(0),
            waiters: Mutex::new(Vec::new()),
        }))
    }
}

devstream_core::debug_fields! { CpuFlag, |self|
    id: self.0.id,
    value: self.0.value.load(Ordering::Relaxed),
}

impl DeviceFlag for CpuFlag {
    fn place(&self) -> &Place {
        &CPU_PLACE
    }
    fn id(&self) -> u64 {
        self.0.id
    }
    fn set(&self, value: u32) {
        self.0.store(value);
    }
    fn get(&self) -> u32 {
        self.0.value.load(Ordering::SeqCst)
    }
}
