//! Buffers: host memory standing in for device memory ([`CpuBuffer`]) and host memory for
//! asynchronous copies ([`CpuHostBuffer`]).
//!
//! Each buffer's bytes sit behind their own mutex, so queued work on several streams touches
//! them soundly. Locks are always taken device buffers first (in id order), then the host
//! buffer: a kernel, which runs holding its device buffers' locks, may read or write a host
//! buffer.
//! Queued operations hold `Arc` clones of the buffers they use: dropping a handle while work is
//! queued frees the memory only after that work.

use crate::scheduler::running_stream;
use crate::{lock, CPU_PLACE};
use devstream_core::traits::check_range;
use devstream_core::{next_id, Error, Place, Result};
use std::alloc::Layout;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex};

/// `len` zeroed bytes, or `Error::OutOfMemory` (never an abort). Large sizes come from the
/// allocator's zeroed pages, so they are not touched until used.
fn zeroed(len: usize) -> Result<Box<[u8]>> {
    if len == 0 {
        return Ok(Box::default());
    }
    let out_of_memory = || Error::OutOfMemory {
        place: Place::Cpu,
        bytes: len,
    };
    let layout = Layout::array::<u8>(len).map_err(|_| out_of_memory())?;
    // SAFETY: `layout` has a non-zero size (len > 0).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(out_of_memory());
    }
    let slice = std::ptr::slice_from_raw_parts_mut(ptr, len);
    // SAFETY: `ptr` was just allocated by the global allocator with the layout of `[u8; len]`
    // (what `Box<[u8]>` of length `len` frees with), all `len` bytes are initialised (zeroed),
    // and nothing else owns the allocation.
    Ok(unsafe { Box::from_raw(slice) })
}

/// Shared state of a [`CpuBuffer`].
pub(crate) struct BufferInner {
    pub(crate) id: u64,
    pub(crate) len: usize,
    pub(crate) data: Mutex<Box<[u8]>>,
}

impl BufferInner {
    pub(crate) fn new(len: usize) -> Result<Arc<BufferInner>> {
        Ok(Arc::new(BufferInner {
            id: next_id(),
            len,
            data: Mutex::new(zeroed(len)?),
        }))
    }
}

/// Memory of the CPU place (host memory standing in for device memory), from
/// `CpuStream::alloc`. Zeroed on allocation.
///
/// Dropping it while queued work uses it frees it only after that work.
pub struct CpuBuffer(pub(crate) Arc<BufferInner>);

impl CpuBuffer {
    /// A process-unique id.
    pub fn id(&self) -> u64 {
        self.0.id
    }
}

impl fmt::Debug for CpuBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuBuffer")
            .field("id", &self.0.id)
            .field("len", &self.0.len)
            .finish()
    }
}

impl devstream_core::DeviceBuffer for CpuBuffer {
    fn len(&self) -> usize {
        self.0.len
    }
    fn place(&self) -> &Place {
        &CPU_PLACE
    }
}

/// Shared state of a [`CpuHostBuffer`]: the bytes and how many queued operations touch them.
pub(crate) struct HostInner {
    pub(crate) id: u64,
    pub(crate) len: usize,
    pub(crate) data: Mutex<Box<[u8]>>,
    pending: Mutex<usize>,
    idle: Condvar,
}

impl HostInner {
    pub(crate) fn new(len: usize) -> Result<Arc<HostInner>> {
        Ok(Arc::new(HostInner {
            id: next_id(),
            len,
            data: Mutex::new(zeroed(len)?),
            pending: Mutex::new(0),
            idle: Condvar::new(),
        }))
    }

    /// Registers a queued operation touching the buffer; the guard's drop (when the operation
    /// has run or is discarded) unregisters it.
    pub(crate) fn begin_use(self: &Arc<Self>) -> PendingGuard {
        *lock(&self.pending) += 1;
        PendingGuard(self.clone())
    }

    /// Number of queued operations touching the buffer.
    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        *lock(&self.pending)
    }

    /// Blocks until no queued operation touches the buffer, unless the caller is a host
    /// function or kernel (see [`CpuHostBuffer`]): it returns at once there.
    fn wait_idle(&self) {
        if running_stream() != 0 {
            // Everything stream-ordered before the running task is complete (a task runs only
            // after all its dependencies, and a copy releases the buffer before it counts as
            // completed); what is still queued is ordered after the task or not at all, and
            // waiting for it could deadlock (work queued after the task, a starved pool, a
            // flag nobody sets yet).
            return;
        }
        let mut pending = lock(&self.pending);
        while *pending > 0 {
            pending = self
                .idle
                .wait(pending)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// Keeps a host buffer marked as used by queued work (see [`HostInner::begin_use`]).
pub(crate) struct PendingGuard(Arc<HostInner>);

impl Drop for PendingGuard {
    fn drop(&mut self) {
        let mut pending = lock(&self.0.pending);
        *pending -= 1;
        if *pending == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// Host memory for asynchronous copies, from `CpuStream::alloc_host` (zeroed).
///
/// Host reads and writes wait until no queued copy touches the buffer, so the host never races
/// the stream.
///
/// Inside a host function or kernel, reads and writes never wait: they see stream order up to
/// the running task (every copy ordered before it is complete), never wait for copies queued
/// after it, and a copy that is not ordered with the task (another stream, no event between)
/// is seen either completely or not at all (each copy holds the buffer's lock while it runs).
///
/// ```
/// use devstream_core::{DeviceBackend, DeviceStream, HostBuffer, Place, StreamOptions};
/// let s = devstream_cpu::CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
/// let dev = s.alloc(3).unwrap();
/// let host = s.alloc_host(3).unwrap();
/// s.fill(&dev, 0, 3, 7).unwrap();
/// s.copy_device_to_host(&host, 0, &dev, 0, 3).unwrap();
/// assert_eq!(host.to_vec().unwrap(), [7, 7, 7]); // waits for the copy
/// ```
pub struct CpuHostBuffer(pub(crate) Arc<HostInner>);

impl CpuHostBuffer {
    /// A process-unique id.
    pub fn id(&self) -> u64 {
        self.0.id
    }
}

impl fmt::Debug for CpuHostBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuHostBuffer")
            .field("id", &self.0.id)
            .field("len", &self.0.len)
            .finish()
    }
}

impl devstream_core::HostBuffer for CpuHostBuffer {
    fn len(&self) -> usize {
        self.0.len
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range("HostBuffer::read", offset, out.len(), self.0.len)?;
        self.0.wait_idle();
        let data = lock(&self.0.data);
        out.copy_from_slice(&data[offset..offset + out.len()]);
        Ok(())
    }

    fn write(&self, offset: usize, bytes: &[u8]) -> Result<()> {
        check_range("HostBuffer::write", offset, bytes.len(), self.0.len)?;
        self.0.wait_idle();
        let mut data = lock(&self.0.data);
        data[offset..offset + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
}
