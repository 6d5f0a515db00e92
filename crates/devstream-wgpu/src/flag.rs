//! Host-visible flags: host-gated submissions.
//!
//! wgpu has no wait-on-memory-value command, so a flag lives in host memory and gates on the
//! host side: `wait_flag` holds the stream's later submissions until the value is ≥ the one
//! given, and `write_flag` is a host write made once all earlier work of the stream is complete
//! (the stream's later work waits for it). The capability is `flags: true` and means exactly this.

use crate::util::{lock, Signal};
use devstream_core::{DeviceFlag, Place};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The shared state of a flag.
#[derive(Debug)]
pub(crate) struct FlagInner {
    pub(crate) place: Place,
    pub(crate) id: u64,
    pub(crate) value: AtomicU32,
    /// Signals of devices whose streams wait on this flag.
    waiters: Mutex<Vec<Weak<Signal>>>,
}

impl FlagInner {
    /// Sets the value and wakes every device waiting on the flag.
    pub(crate) fn store(&self, value: u32) {
        self.value.store(value, Ordering::SeqCst);
        let waiters: Vec<Arc<Signal>> = {
            let mut list = lock(&self.waiters);
            list.retain(|w| w.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for signal in waiters {
            signal.notify();
        }
    }

    /// Makes `signal` hear about changes of the value.
    pub(crate) fn watch(&self, signal: &Arc<Signal>) {
        let mut list = lock(&self.waiters);
        if !list
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(signal)))
        {
            list.push(Arc::downgrade(signal));
        }
    }
}

/// A host-visible 32-bit value that wgpu streams wait on (`wait_flag`) and write
/// (`write_flag`). Any wgpu stream can use it: the value lives in host memory.
///
/// ```
/// use devstream_core::{DeviceFlag, Place};
/// let flag = devstream_wgpu::WgpuFlag::new(Place::Wgpu(0));
/// flag.set(3);
/// assert_eq!(flag.get(), 3);
/// ```
#[derive(Clone, Debug)]
pub struct WgpuFlag {
    pub(crate) inner: Arc<FlagInner>,
}

impl WgpuFlag {
    /// A new flag with value 0.
    pub fn new(place: Place) -> WgpuFlag {
        WgpuFlag {
            inner: Arc::new(FlagInner {
                place,
                id: devstream_core::next_id(),
                value: AtomicU32::new(0),
                waiters: Mutex::new(Vec::new()),
            }),
        }
    }
}

impl DeviceFlag for WgpuFlag {
    fn place(&self) -> &Place {
        &self.inner.place
    }

    fn id(&self) -> u64 {
        self.inner.id
    }

    fn set(&self, value: u32) {
        self.inner.store(value);
    }

    fn get(&self) -> u32 {
        self.inner.value.load(Ordering::SeqCst)
    }
}
