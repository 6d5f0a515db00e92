//! Device and host allocations. Every device allocation is recorded in an ordered map of
//! addresses ([`AddressSpace`](crate::addr::AddressSpace)); an address Paddle passes back is translated to the memory
//! behind it (a devstream buffer and offset, or host memory on the CPU backend) only when it
//! lies inside a live allocation of that device.

use super::failure::{refuse, Check};
use super::{CustomRuntime, Status};
use crate::sys::{C_FAILED, C_INTERNAL_ERROR};
use devstream::DeviceBuffer;
use devstream_core::sync::lock;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::c_int;
use std::sync::Arc;

/// Alignment of host allocations.
const HOST_ALIGN: usize = 256;

/// Zeroed, 256-byte aligned host memory, freed when the last holder (the allocation map or
/// work queued on it) lets go.
pub(super) struct HostBlock {
    ptr: usize,
    layout: Layout,
}

impl HostBlock {
    fn new(size: usize) -> Status<HostBlock> {
        let layout = Layout::from_size_align(size.max(1), HOST_ALIGN).map_err(|_| C_FAILED)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(C_FAILED);
        }
        Ok(HostBlock {
            ptr: ptr as usize,
            layout,
        })
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `HostBlock::new` with this layout; dropped once.
        unsafe { dealloc(self.ptr as *mut u8, self.layout) };
    }
}

/// The memory behind one device allocation.
enum Memory {
    /// A devstream device buffer (wgpu, CUDA, HIP).
    Buffer(Arc<DeviceBuffer>),
    /// Host memory (CPU), handed to Paddle at its own address.
    Host(Arc<HostBlock>),
}

/// One device allocation.
pub(super) struct Allocation {
    device: usize,
    memory: Memory,
}

/// Where a translated address points: a buffer and offset, or host memory and the address.
#[derive(Clone)]
pub(super) enum Target {
    Buffer(Arc<DeviceBuffer>, usize),
    Host(Arc<HostBlock>, usize),
}

impl CustomRuntime {
    /// `device_memory_allocate`: `size` bytes and their address. On the CPU backend the memory
    /// is host memory handed out as is (Paddle's kernel fallback writes custom-device tensors
    /// through the pointer, e.g. `full` through `set_constant_with_place<CustomPlace>`); on
    /// the others a devstream buffer behind a reserved, never-mapped address.
    pub fn allocate(&self, device: usize, size: usize) -> Status<usize> {
        if size > self.max_alloc_size(device) {
            return Err(C_FAILED);
        }
        if self.host_backed {
            self.device(device as c_int)?;
            let block = HostBlock::new(size)?;
            let addr = block.ptr;
            let allocation = Allocation {
                device,
                memory: Memory::Host(Arc::new(block)),
            };
            return if lock(&self.memory).insert_at(addr, size, allocation) {
                Ok(addr)
            } else {
                Err(C_INTERNAL_ERROR)
            };
        }
        let null = self.null_stream(device)?;
        let buffer = null
            .stream
            .alloc(size.max(1))
            .check("device_memory_allocate")?;
        // Stream-ordered allocators (CUDA pools) hand out memory in the null stream's order:
        // wait, so that every other stream may use it at once.
        null.stream.synchronize().check("device_memory_allocate")?;
        let allocation = Allocation {
            device,
            memory: Memory::Buffer(Arc::new(buffer)),
        };
        lock(&self.memory).insert(size, allocation).ok_or(C_FAILED)
    }

    /// `device_memory_deallocate`: `ptr` must be the start of a live allocation of `device`.
    /// The memory is freed once the work queued on it is done.
    pub fn deallocate(&self, device: usize, ptr: usize) -> Status {
        let mut memory = lock(&self.memory);
        match memory.find(ptr, 0) {
            Some((start, entry, 0)) if start == ptr && entry.value.device == device => {
                let entry = memory.remove(ptr);
                drop(memory);
                drop(entry);
                Ok(())
            }
            _ => Err(refuse(|| {
                format!("{ptr:#x} is not the start of a live allocation of device {device}")
            })),
        }
    }

    /// The memory and offset of `[ptr, ptr + len)` on `device`.
    pub(super) fn translate(&self, device: usize, ptr: usize, len: usize) -> Status<Target> {
        let memory = lock(&self.memory);
        match memory.find(ptr, len) {
            Some((_, entry, offset)) if entry.value.device == device => {
                Ok(match &entry.value.memory {
                    Memory::Buffer(buffer) => Target::Buffer(buffer.clone(), offset),
                    Memory::Host(block) => Target::Host(block.clone(), ptr),
                })
            }
            _ => Err(refuse(|| {
                format!("{ptr:#x}+{len} is not inside a live allocation of device {device}")
            })),
        }
    }

    /// `host_memory_allocate`: zeroed, 256-byte aligned host memory (pageable: devstream's
    /// copies stage through their own host buffers, so pinning it would buy nothing).
    pub fn host_allocate(&self, size: usize) -> Status<usize> {
        let layout = Layout::from_size_align(size.max(1), HOST_ALIGN).map_err(|_| C_FAILED)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(C_FAILED);
        }
        lock(&self.host).insert(ptr as usize, layout);
        Ok(ptr as usize)
    }

    /// `host_memory_deallocate`: `ptr` must come from [`CustomRuntime::host_allocate`].
    pub fn host_deallocate(&self, ptr: usize) -> Status {
        let layout = lock(&self.host).remove(&ptr).ok_or_else(|| {
            refuse(|| format!("{ptr:#x} is no host allocation of this device type"))
        })?;
        // SAFETY: allocated by `host_allocate` with this layout, and removed from the map, so
        // freed once.
        unsafe { dealloc(ptr as *mut u8, layout) };
        Ok(())
    }

    /// `device_memory_stats`: (total, free). Total is the host's physical memory (or
    /// `DEVSTREAM_PADDLE_MEMORY_BYTES`): devstream has no device-memory query, so this is a
    /// budget, and free is that budget less the bytes allocated through this table.
    pub fn memory_stats(&self, _device: usize) -> (usize, usize) {
        let used = lock(&self.memory).bytes_live();
        (self.total_memory, self.total_memory.saturating_sub(used))
    }

    /// `device_max_alloc_size`: the largest single allocation (wgpu: the device's
    /// `max_buffer_size`; elsewhere the memory budget).
    pub fn max_alloc_size(&self, device: usize) -> usize {
        #[cfg(feature = "wgpu")]
        if let Some(place @ devstream::Place::Wgpu(_)) = self.places.get(device) {
            if let Ok(dev) = devstream::wgpu::WgpuDevice::for_place(place) {
                let limit = dev.wgpu_device().limits().max_buffer_size.saturating_sub(4);
                return usize::try_from(limit)
                    .unwrap_or(usize::MAX)
                    .min(self.total_memory);
            }
        }
        let _ = device;
        self.total_memory
    }
}
