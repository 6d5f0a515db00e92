//! Allocation inside a capture on wgpu: each capture's private pool (the rules are
//! `devstream_core::graph_memory`'s).
//!
//! Mechanism. A capture's [`Session`](crate::graph::Session) owns a [`CaptureMemory`]; `alloc`
//! on a capturing stream takes a block of the size class from it: one that a buffer dropped
//! earlier in the same capture gave back, else a new `wgpu::Buffer` of the class's size. A block
//! is a [`WgpuBlock`] shared (`Arc`) by every buffer that had it; each buffer holds a clone of
//! the block's `wgpu::Buffer` and shows its own length (kernels bind that length, not the
//! block's). The recorded operations hold their buffers, so a block lives while the graph's
//! operations or a buffer use it (wgpu itself keeps a buffer's memory until the work queued on
//! it is done) and counts in the pool's statistics until its last holder lets go.
//!
//! Reuse needs no extra ordering: a capture's operations, of every stream that took part, are
//! replayed one after another in the order they were captured, so the work of a buffer that
//! took a block follows the work of the buffer dropped before. Launches of a graph that owns
//! memory are serialised by the graph (`crate::graph`): each waits for an event recorded after
//! the previous one.

use crate::buffer::{create_device_buffer, BufferInner, WgpuBuffer};
use crate::device::DeviceShared;
use crate::graph::SharedSession;
use crate::util::lock;
use devstream_core::graph_memory::GraphMemory;
use devstream_core::mempool::{alloc_retrying, size_class};
use devstream_core::{Error, Result};
use std::sync::{Arc, Weak};

/// A capture's private pool: blocks shared by the buffers that had them (a reuse follows the
/// work before it by the replay's order alone: nothing to wait for).
pub(crate) type CaptureMemory = GraphMemory<Arc<WgpuBlock>, ()>;

/// A `wgpu::Buffer` of a capture's pool, counted by the pool until its last holder lets go.
pub(crate) struct WgpuBlock {
    buffer: wgpu::Buffer,
    class: usize,
    memory: Weak<CaptureMemory>,
}

impl Drop for WgpuBlock {
    fn drop(&mut self) {
        // wgpu frees the memory once the work queued on it is done.
        if let Some(memory) = self.memory.upgrade() {
            memory.released(self.class);
        }
    }
}

/// What a buffer allocated during a capture keeps of it.
pub(crate) struct GraphAlloc {
    block: Arc<WgpuBlock>,
    memory: Arc<CaptureMemory>,
}

impl GraphAlloc {
    /// The buffer's handle was dropped: while its capture runs, the block is cached for reuse
    /// later in it; afterwards nothing is reused.
    pub(crate) fn handle_dropped(&self) {
        drop(
            self.memory
                .dropped(self.block.class, self.block.clone(), Some(())),
        );
    }
}

/// A buffer of `len` bytes from the pool of `session`, a capture of `device`.
pub(crate) fn alloc_in_capture(
    device: &Arc<DeviceShared>,
    session: &SharedSession,
    len: usize,
) -> Result<WgpuBuffer> {
    let class = size_class(len).ok_or_else(|| Error::out_of_memory(&device.place, len))?;
    let memory = {
        let session = lock(session);
        session.usable("alloc")?;
        session.memory.clone()
    };
    let block = match memory.take(class) {
        Some((block, ())) => block,
        None => {
            let created = alloc_retrying(&*memory, len, || {
                if class as u64 > device.limits.max_buffer_size.saturating_sub(4) {
                    return Err(Error::out_of_memory(&device.place, len));
                }
                create_device_buffer(device, class as u64, len)
            })?;
            memory.created(class);
            Arc::new(WgpuBlock {
                buffer: created,
                class,
                memory: Arc::downgrade(&memory),
            })
        }
    };
    let buffer = block.buffer.clone();
    Ok(WgpuBuffer {
        inner: BufferInner::in_graph(device, buffer, len as u64, GraphAlloc { block, memory }),
    })
}
