//! Facade buffers.

use crate::dispatch::{DeviceBufferApi, HostBufferApi, Member};
use devstream_core::foreign::BackendKey;
use devstream_core::{Place, Result};

crate::dispatch::facade_enum! {
    /// Device memory allocated by [`Stream::alloc`](crate::Stream::alloc). Dropping it while queued
    /// work uses it frees it only after that work.
    pub enum DeviceBuffer(DeviceBufferApi, "buffer")
        = [CpuBuffer, CudaBuffer, HipBuffer, WgpuBuffer, PluginBuffer];
}

impl DeviceBuffer {
    /// The buffer's place.
    pub fn place(&self) -> &Place {
        DeviceBufferApi::place(self)
    }
    /// Size in bytes.
    pub fn len(&self) -> usize {
        DeviceBufferApi::len(self)
    }
    /// Whether the size is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The backend handle inside.
    pub fn backend<T: Member<DeviceBuffer>>(&self) -> Option<&T> {
        T::unwrap_ref(self)
    }
}

crate::dispatch::facade_enum! {
    /// Host memory for asynchronous copies, from [`Stream::alloc_host`](crate::Stream::alloc_host).
    /// Host reads and writes wait for queued copies that touch it.
    ///
    /// ```
    /// use devstream::{Place, Stream};
    /// let s = Stream::new(&Place::Cpu).unwrap();
    /// let dev = s.alloc(4).unwrap();
    /// let host = s.alloc_host(4).unwrap();
    /// s.copy_from_host(&dev, 0, &[1, 2, 3, 4]).unwrap();
    /// s.copy_device_to_host(&host, 0, &dev, 0, 4).unwrap();
    /// assert_eq!(host.to_vec().unwrap(), vec![1, 2, 3, 4]); // waits for the copy
    /// ```
    pub enum HostBuffer(HostBufferApi, "host buffer")
        = [CpuHostBuffer, CudaHostBuffer, HipHostBuffer, WgpuHostBuffer, PluginHostBuffer];
}

impl HostBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        HostBufferApi::len(self)
    }
    /// Whether the size is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `out.len()` bytes from `offset`, after queued work writing the buffer is done.
    ///
    /// Inside a host function whose backend's work streams of the buffer's backend may wait on
    /// (waits across backends), a read that would wait for a queued copy answers
    /// `Error::WouldDeadlock` at once: that copy may be queued behind the host function.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        crate::cross::check_host_fn_host_buffer_access("HostBuffer::read", self, || {
            HostBufferApi::read_would_wait(self)
        })?;
        HostBufferApi::read(self, offset, out)
    }
    /// Copies `data` to `offset`, after queued work using the buffer is done.
    ///
    /// Inside a host function, refused as [`read`](HostBuffer::read) is where it would wait.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        crate::cross::check_host_fn_host_buffer_access("HostBuffer::write", self, || {
            HostBufferApi::write_would_wait(self)
        })?;
        HostBufferApi::write(self, offset, data)
    }
    /// The key of the buffer's backend for the host-function rule of waits across backends
    /// (`devstream_core::foreign`, "Host functions"); `None` for a custom device's buffer,
    /// which does not name its device type (the rule then counts every backend).
    pub(crate) fn backend_key(&self) -> Option<BackendKey> {
        match self {
            #[cfg(feature = "cpu")]
            HostBuffer::Cpu(_) => Some(BackendKey::of(&Place::Cpu)),
            #[cfg(feature = "cuda")]
            HostBuffer::Cuda(_) => Some(BackendKey::of(&Place::Cuda(0))),
            #[cfg(feature = "hip")]
            HostBuffer::Hip(_) => Some(BackendKey::of(&Place::Hip(0))),
            #[cfg(feature = "wgpu")]
            HostBuffer::Wgpu(_) => Some(BackendKey::of(&Place::Wgpu(0))),
            #[cfg(feature = "plugin")]
            HostBuffer::Custom(_) => None,
        }
    }
    /// The whole content, after queued work writing it is done.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![0; self.len()];
        self.read(0, &mut out)?;
        Ok(out)
    }
    /// The backend handle inside.
    pub fn backend<T: Member<HostBuffer>>(&self) -> Option<&T> {
        T::unwrap_ref(self)
    }
}
