//! `PluginBuffer` (device memory) and `PluginHostBuffer` (host memory for asynchronous copies).

use crate::queue::{lock, reap, running_host_fn, Item, Job, RawEvent, StreamCore};
use crate::runtime::{CopyKind, Runtime};
use devstream_core::traits::check_range;
use devstream_core::{DeviceBuffer, HostBuffer, Place, Result};
use std::alloc::Layout;
use std::sync::{Arc, Mutex};

/// Device memory of a custom-device place.
///
/// On a plug-in place: `device_memory_allocate` (synchronous: `stream_ordered_alloc` is off).
/// The buffer remembers the streams that used it; dropped, it is freed by
/// `device_memory_deallocate` only after the work those streams had submitted is complete.
#[derive(Debug)]
pub struct PluginBuffer(pub(crate) BufferRepr);

#[derive(Debug)]
pub(crate) enum BufferRepr {
    Abi(AbiBuffer),
    Rust(Box<dyn crate::custom::ErasedBuffer>),
}

pub(crate) struct AbiBuffer {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) slot: usize,
    pub(crate) place: Place,
    pub(crate) ptr: usize,
    pub(crate) len: usize,
    /// What was allocated (at least one byte).
    allocated: usize,
    users: Mutex<Vec<Arc<StreamCore>>>,
}

impl std::fmt::Debug for AbiBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbiBuffer")
            .field("place", &self.place)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl AbiBuffer {
    pub(crate) fn allocate(runtime: Arc<Runtime>, slot: usize, len: usize) -> Result<AbiBuffer> {
        let allocated = len.max(1);
        let ptr = runtime.allocate(slot, allocated)?;
        Ok(AbiBuffer {
            place: runtime.place(slot),
            runtime,
            slot,
            ptr,
            len,
            allocated,
            users: Mutex::new(Vec::new()),
        })
    }

    /// Remembers that `core` submitted work using this buffer.
    pub(crate) fn used_by(&self, core: &Arc<StreamCore>) {
        let mut users = lock(&self.users);
        if !users.iter().any(|u| u.id == core.id) {
            users.push(core.clone());
        }
    }

    /// The address of byte `offset` (the caller checked the range).
    pub(crate) fn at(&self, offset: usize) -> usize {
        self.ptr + offset
    }
}

impl Drop for AbiBuffer {
    fn drop(&mut self) {
        let streams = std::mem::take(&mut *lock(&self.users));
        let (runtime, slot, ptr, allocated) =
            (self.runtime.clone(), self.slot, self.ptr, self.allocated);
        reap(Job::AfterStreams {
            streams,
            then: Box::new(move || {
                if let Err(error) = runtime.deallocate(slot, ptr, allocated) {
                    tracing::warn!("devstream-plugin: device_memory_deallocate: {error}");
                }
            }),
        });
    }
}

impl DeviceBuffer for PluginBuffer {
    fn len(&self) -> usize {
        match &self.0 {
            BufferRepr::Abi(b) => b.len,
            BufferRepr::Rust(b) => b.len(),
        }
    }

    fn place(&self) -> &Place {
        match &self.0 {
            BufferRepr::Abi(b) => &b.place,
            BufferRepr::Rust(b) => b.place(),
        }
    }
}

/// Where a host buffer's memory comes from.
enum HostMemory {
    /// `host_memory_allocate` (pinned, where the plug-in pins).
    Plugin {
        runtime: Arc<Runtime>,
        slot: usize,
        allocated: usize,
    },
    /// The Rust allocator (plug-ins without `host_memory_allocate`).
    Rust(Layout),
}

/// Host memory for asynchronous copies on a custom-device place.
///
/// On a plug-in place: `host_memory_allocate` when the plug-in has it, else ordinary host
/// memory; zeroed. Every copy into or out of it records a plug-in event, registered before
/// the copy is submitted; reads and writes from the host wait for those events first and
/// exclude new copies (and each other) while they touch the memory, and a dropped buffer is
/// freed after them. Where a copy's event could not be recorded, when it ends cannot be
/// known: reads and writes answer that error and the memory is never freed (leaked rather
/// than freed under a copy). Inside a host function, copies of its own plug-in queue are not
/// waited for (see [`PluginStream`](crate::PluginStream)).
#[derive(Debug)]
pub struct PluginHostBuffer(pub(crate) HostRepr);

#[derive(Debug)]
pub(crate) enum HostRepr {
    Abi(AbiHostBuffer),
    Rust(Box<dyn crate::custom::ErasedHostBuffer>),
}

pub(crate) struct AbiHostBuffer {
    ptr: usize,
    pub(crate) len: usize,
    memory: Option<HostMemory>,
    /// The latest copy touching the buffer, per stream.
    pending: Mutex<Vec<(u64, Arc<RawEvent>)>>,
}

impl std::fmt::Debug for AbiHostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbiHostBuffer")
            .field("len", &self.len)
            .field(
                "pinned",
                &matches!(self.memory, Some(HostMemory::Plugin { .. })),
            )
            .finish_non_exhaustive()
    }
}

impl AbiHostBuffer {
    pub(crate) fn allocate(
        runtime: &Arc<Runtime>,
        slot: usize,
        len: usize,
    ) -> Result<AbiHostBuffer> {
        let allocated = len.max(1);
        let (ptr, memory) = match runtime.host_allocate(slot, allocated) {
            Some(result) => (
                result?,
                HostMemory::Plugin {
                    runtime: runtime.clone(),
                    slot,
                    allocated,
                },
            ),
            None => {
                let layout = Layout::from_size_align(allocated, 64).map_err(|e| {
                    devstream_core::Error::InvalidArgument(format!("alloc_host({len}): {e}"))
                })?;
                // SAFETY: the layout has a non-zero size.
                let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
                if ptr.is_null() {
                    return Err(devstream_core::Error::OutOfMemory {
                        place: runtime.place(slot),
                        bytes: len,
                    });
                }
                (ptr as usize, HostMemory::Rust(layout))
            }
        };
        // SAFETY: `allocated` bytes of host memory we own; nothing uses them yet.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, allocated) };
        Ok(AbiHostBuffer {
            ptr,
            len,
            memory: Some(memory),
            pending: Mutex::new(Vec::new()),
        })
    }

    /// Submits a copy into or out of this buffer on `core`, tracked *before* it is submitted:
    /// the event that marks its end is created first and registered here, and the same
    /// operation that makes the copy records it, so no failure can leave a submitted copy
    /// untracked (a failed record leaves the event lost, and the memory is then never freed).
    pub(crate) fn copy_tracked(
        &self,
        core: &Arc<StreamCore>,
        kind: CopyKind,
        dst: usize,
        src: usize,
        len: usize,
    ) -> Result<()> {
        let raw = core.new_raw()?;
        {
            let mut pending = lock(&self.pending);
            // The stream's earlier copies end before this one (stream order).
            pending.retain(|(s, _)| *s != core.id);
            pending.push((core.id, raw.clone()));
        }
        core.submit(Item::Op(Box::new(move |core: &StreamCore| {
            let copied = core.runtime.copy(kind, core.slot, core.raw, dst, src, len);
            // Recorded whatever the copy answered: a failed asynchronous copy may be queued.
            let recorded = core.record_into(&raw);
            copied.and(recorded)
        })))
    }

    pub(crate) fn at(&self, offset: usize) -> usize {
        self.ptr + offset
    }

    /// Runs `access` on the buffer's memory once no queued copy touches it, with new copies
    /// kept out while it runs (they register under the same lock), so host reads and writes
    /// never race a copy or each other.
    ///
    /// Inside a host function, copies of that host function's own plug-in queue are not waited
    /// for: those before it are complete (stream order), those after it cannot start before
    /// it returns, so the access sees the stream's order up to the host function.
    fn settled<T>(&self, access: impl FnOnce() -> T) -> Result<T> {
        let own_queue = running_host_fn().map(|(queue, _)| queue);
        loop {
            let waits: Vec<Arc<RawEvent>> = lock(&self.pending)
                .iter()
                .filter(|(_, r)| Some(r.queue) != own_queue)
                .map(|(_, r)| r.clone())
                .collect();
            for raw in &waits {
                raw.synchronize()?;
            }
            let mut pending = lock(&self.pending);
            pending.retain(|(_, r)| !waits.iter().any(|w| Arc::ptr_eq(w, r)));
            if pending.iter().all(|(_, r)| Some(r.queue) == own_queue) {
                // Held while the memory is accessed: copies registering now wait.
                return Ok(access());
            }
            // A copy was submitted meanwhile: wait for it too.
        }
    }
}

impl Drop for AbiHostBuffer {
    fn drop(&mut self) {
        let events: Vec<Arc<RawEvent>> = std::mem::take(&mut *lock(&self.pending))
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        let ptr = self.ptr;
        let Some(memory) = self.memory.take() else {
            return;
        };
        reap(Job::After {
            events,
            then: Box::new(move || match memory {
                HostMemory::Plugin {
                    runtime,
                    slot,
                    allocated,
                } => {
                    if let Err(error) = runtime.host_deallocate(slot, ptr, allocated) {
                        tracing::warn!("devstream-plugin: host_memory_deallocate: {error}");
                    }
                }
                // SAFETY: allocated above with this layout; the copies using it are complete.
                HostMemory::Rust(layout) => unsafe { std::alloc::dealloc(ptr as *mut u8, layout) },
            }),
        });
    }
}

impl HostBuffer for PluginHostBuffer {
    fn len(&self) -> usize {
        match &self.0 {
            HostRepr::Abi(b) => b.len,
            HostRepr::Rust(b) => b.len(),
        }
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        match &self.0 {
            HostRepr::Abi(b) => {
                check_range("HostBuffer::read", offset, out.len(), b.len)?;
                b.settled(|| {
                    // SAFETY: in range (checked) of memory we own; no queued copy touches
                    // it and none can start while `settled` holds the lock.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (b.ptr + offset) as *const u8,
                            out.as_mut_ptr(),
                            out.len(),
                        )
                    }
                })
            }
            HostRepr::Rust(b) => b.read(offset, out),
        }
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        match &self.0 {
            HostRepr::Abi(b) => {
                check_range("HostBuffer::write", offset, data.len(), b.len)?;
                b.settled(|| {
                    // SAFETY: in range (checked) of memory we own; no queued copy touches
                    // it and none can start while `settled` holds the lock.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            data.as_ptr(),
                            (b.ptr + offset) as *mut u8,
                            data.len(),
                        )
                    }
                })
            }
            HostRepr::Rust(b) => b.write(offset, data),
        }
    }
}
