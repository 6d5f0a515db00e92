//! Allocation inside a capture: each capture's private pool of host memory (the rules are
//! `devstream_core::graph_memory`'s).
//!
//! Mechanism. A capture ([`Session`]) owns a [`CaptureMemory`]; `alloc` and `alloc_from` on a
//! capturing stream take a block from it: a block of the same size class that a buffer dropped
//! earlier in the capture gave back, else a new zeroed one. A block is a `BufferData` shared
//! (`Arc`) by every buffer that had it: the captured operations hold their buffers, so a block
//! lives as long as the graph's nodes or a buffer use it, and counts in the pool's statistics
//! until it is freed ([`BufferData`]'s drop). Because every buffer over a block sees the
//! memory at the same address, each replay uses the memory the capture gave.
//!
//! Reuse is ordered by graph edges: a handle dropped during the capture caches its block with
//! the current frontier nodes of every lane of the capture (every node captured so far is an
//! ancestor of one of them, the dropped buffer's nodes included, since its handle was needed to
//! submit them); the lane that takes the block next makes its next node depend on them. These
//! edges order work only: they do not join lanes (`end_capture` still requires the user's
//! joins).
//!
//! Launches of a graph whose capture left memory in use are serialised by the graph
//! (`crate::graph`): each waits for the previous one's end.

use crate::buffer::{BufferData, BufferInner, CpuBuffer};
use crate::graph::Session;
use crate::CPU_PLACE;
use devstream_core::graph_memory::GraphMemory;
use devstream_core::memory::zeroed;
use devstream_core::mempool::{alloc_retrying, size_class};
use devstream_core::{next_id, Error, Result};
use std::sync::{Arc, Weak};

/// A capture's private pool: blocks shared by the buffers that had them, cached with the graph
/// nodes their reuse must follow.
pub(crate) type CaptureMemory = GraphMemory<Arc<BufferData>, Vec<usize>>;

/// What a buffer allocated during a capture keeps of it: the capture, to order a reuse of its
/// block after the work captured so far, and the pool that takes the block back.
pub(crate) struct CaptureAlloc {
    session: Weak<Session>,
    memory: Arc<CaptureMemory>,
}

impl CaptureAlloc {
    /// The buffer's handle was dropped: while the capture runs, its block is cached for reuse
    /// after every node captured so far; afterwards nothing is reused.
    pub(crate) fn handle_dropped(&self, data: &Arc<BufferData>) {
        let after = self
            .session
            .upgrade()
            .and_then(|session| session.all_work());
        // Let go of the returned clone here, under no lock.
        drop(self.memory.dropped(data.capacity(), data.clone(), after));
    }
}

impl Session {
    /// A buffer of `len` bytes from the capture's pool, for work on `lane` (see the module
    /// documentation); its work on `lane` is ordered after the work of the buffer that had its
    /// block before. Out of memory follows the shared rule (`alloc_retrying`).
    pub(crate) fn alloc(self: &Arc<Self>, lane: usize, len: usize) -> Result<CpuBuffer> {
        let class = size_class(len).ok_or_else(|| Error::out_of_memory(&CPU_PLACE, len))?;
        let memory = self.memory();
        let data = match self.reuse(lane, class)? {
            Some(data) => data,
            None => {
                let block = alloc_retrying(&**memory, len, || zeroed(&CPU_PLACE, class))?;
                memory.created(class);
                Arc::new(BufferData::for_graph(block, Arc::downgrade(memory)))
            }
        };
        Ok(CpuBuffer(Arc::new(BufferInner {
            id: next_id(),
            len,
            data,
            pool: None,
            capture: Some(CaptureAlloc {
                session: Arc::downgrade(self),
                memory: memory.clone(),
            }),
        })))
    }
}

/// `alloc` on a capturing CPU stream, for `stream`'s capture; `None` when the stream does not
/// capture (any more).
pub(crate) fn alloc_in_capture(
    stream: &crate::stream::StreamInner,
    len: usize,
) -> Option<Result<CpuBuffer>> {
    let (session, lane) = stream.capture_info()?;
    Some(session.alloc(lane, len))
}
