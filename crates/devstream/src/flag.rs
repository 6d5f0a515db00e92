//! The facade flag.

use crate::dispatch::{FlagApi, Member};
use crate::registry::with_backend;
use devstream_core::{DeviceBackend, Place, Result};
use enum_dispatch::enum_dispatch;

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
#[enum_dispatch(FlagApi)]
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Flag {
    /// A CPU flag.
    #[cfg(feature = "cpu")]
    Cpu(devstream_cpu::CpuFlag),
    /// A CUDA flag.
    #[cfg(feature = "cuda")]
    Cuda(devstream_cuda::CudaFlag),
    /// A HIP flag.
    #[cfg(feature = "hip")]
    Hip(devstream_hip::HipFlag),
    /// A wgpu flag.
    #[cfg(feature = "wgpu")]
    Wgpu(devstream_wgpu::WgpuFlag),
    /// A custom-device (plug-in or Rust-registered) flag.
    #[cfg(feature = "plugin")]
    Custom(devstream_plugin::PluginFlag),
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
