//! The facade flag.

use crate::dispatch::{FlagApi, Member};
use crate::registry::with_backend;
use devstream_core::{DeviceBackend, Place, Result};

crate::dispatch::facade_enum! {
    /// A host-visible 32-bit value a stream can wait on (until it is ≥ a value, CUDA's GEQ) and
    /// write, in stream order. The host reads and sets it directly.
    ///
    /// ```
    /// use devstream::{Flag, Place, Stream};
    /// let s = Stream::new(&Place::Cpu).unwrap();
    /// let gate = Flag::new(&Place::Cpu).unwrap();
    /// let done = Flag::new(&Place::Cpu).unwrap();
    /// s.wait_flag(&gate, 1).unwrap();   // the stream holds here
    /// s.write_flag(&done, 7).unwrap();
    /// assert!(!s.query().unwrap());
    /// gate.set(1);                      // release it
    /// s.synchronize().unwrap();
    /// assert_eq!(done.get(), 7);
    /// ```
    ///
    /// # A wait only the host ends (CUDA, HIP)
    ///
    /// On CUDA and HIP a flag wait is `cuStreamWaitValue32`, which the driver cannot see through:
    /// CUDA warns that "improper use of this API may deadlock the application". While a stream of a
    /// device is held at a flag that only the host will set, a driver call on that device from
    /// *another* thread (creating a stream or event, allocating pinned memory) may block until the
    /// flag is set, while holding the driver's lock for the device. The thread that will set the
    /// flag must then not be queued behind that lock: with many threads, one with no gate of its
    /// own can block in `cuStreamCreateWithPriority` with the lock held while the threads that
    /// would set their flags next wait for the lock; the same work, one gate at a time, does not.
    /// Set such flags from a thread that makes no driver calls on that device meanwhile, or keep
    /// one gate-holding thread per device. CPU, wgpu and plug-in flags are held host-side and have
    /// no such hazard.
    pub enum Flag(FlagApi, "flag"): Clone = [CpuFlag, CudaFlag, HipFlag, WgpuFlag, PluginFlag];
}

impl Flag {
    /// A new flag on `place`, initially 0 (`Error::Unsupported` where the place has no flags).
    #[inline]
    pub fn new(place: &Place) -> Result<Flag> {
        with_backend!(place, B => B::new_flag(place).map(Member::wrap))
    }
    /// The flag's place.
    #[inline]
    pub fn place(&self) -> &Place {
        FlagApi::place(self)
    }
    /// A process-unique id.
    #[inline]
    pub fn id(&self) -> u64 {
        FlagApi::id(self)
    }
    /// Sets the value from the host.
    #[inline]
    pub fn set(&self, value: u32) {
        FlagApi::set(self, value)
    }
    /// Reads the value.
    #[inline]
    pub fn get(&self) -> u32 {
        FlagApi::get(self)
    }
    /// The backend handle inside.
    #[inline]
    pub fn backend<T: Member<Flag>>(&self) -> Option<&T> {
        T::unwrap_ref(self)
    }
}
