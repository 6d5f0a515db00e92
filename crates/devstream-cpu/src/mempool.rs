//! Memory pools of the CPU place: a caching allocator of its own over host memory.
//!
//! Mechanism. A pool hands out blocks by size class (`devstream_core::mempool::size_class`:
//! powers of two from 512 bytes up to 1 MiB, whole MiB above) and keeps freed blocks in per-class
//! free lists for reuse (the best-fitting cached block, see `devstream_core::mempool::CacheState`).
//! A buffer's block returns to its pool when the buffer's last holder lets go, and queued work
//! holds its buffers until it has run: so a block is back in a free list only once every
//! operation of every stream that used it is complete, and any stream may take it at once
//! (stream order, met at the strictest point). A reused block is zeroed up to the new buffer's
//! length (CPU buffers start zeroed).
//!
//! The pool itself (free lists, used and reserved bytes, peaks, threshold, size limit, and its
//! invariants; the `DevicePool` operations) is core's `CachingPool`, shared with the plug-in
//! places' pools; this module adds the blocks (host memory) and taking them. A new block that would take the reserved
//! bytes past `max_size` (when set) is refused as out of memory before any system call. The rules shared with
//! every backend (statistics, threshold, trim, out of memory) are in `devstream_core::mempool`.

use crate::buffer::{BufferData, BufferInner, CpuBuffer};
use crate::CPU_PLACE;
use devstream_core::memory::zeroed;
use devstream_core::mempool::{
    self, alloc_retrying, size_class, BlockSource, CachingPool, CachingPoolHandle,
};
use devstream_core::{next_id, DevicePool, Error, Place, PoolOptions, Result};
use std::sync::{Arc, OnceLock};

/// The CPU place's blocks: host memory, freed by dropping it.
pub struct HostBlocks;

impl BlockSource for HostBlocks {
    type Block = Box<[u8]>;

    fn place(&self) -> &Place {
        &CPU_PLACE
    }

    fn free(&self, blocks: Vec<Box<[u8]>>) {
        drop(blocks);
    }
}

/// The state a pool's buffers share with it: they hold it until their block is back.
pub(crate) type PoolShared = CachingPool<HostBlocks>;

/// A memory pool of the CPU place (see the module documentation): what
/// `CpuBackend::default_pool` and `CpuBackend::new_pool` return as `Arc<dyn DevicePool>`.
pub type CpuMemoryPool = CachingPoolHandle<HostBlocks>;

/// A block of at least `len` bytes from `pool`, the first `len` zeroed: from the cache, else
/// new.
fn take(pool: &Arc<PoolShared>, len: usize) -> Result<Arc<BufferInner>> {
    let class = size_class(len).ok_or_else(|| Error::out_of_memory(&CPU_PLACE, len))?;
    let taken = pool.take(class, len, |class| zeroed(&CPU_PLACE, class))?;
    let mut block = taken.block;
    if taken.reused {
        block[..len].fill(0);
    }
    Ok(Arc::new(BufferInner {
        id: next_id(),
        len,
        data: Arc::new(BufferData::new(block, len)),
        pool: Some(pool.clone()),
        capture: None,
    }))
}

/// Takes back the block of a buffer whose last holder let go (its work is complete).
pub(crate) fn give_back(pool: &PoolShared, block: Box<[u8]>) {
    let class = block.len();
    pool.give_back(class, (class > 0).then_some(block));
}

/// A buffer of `len` bytes from `pool`, through the shared out-of-memory rule.
pub(crate) fn alloc(pool: &CpuMemoryPool, len: usize) -> Result<CpuBuffer> {
    alloc_retrying(pool, len, || take(&pool.shared, len)).map(CpuBuffer)
}

/// The CPU place's default pool (the one `alloc` takes from): release threshold 0, as CUDA's
/// default pool, so memory goes back to the system as soon as its work is done unless the
/// threshold is raised.
pub(crate) fn default_pool() -> &'static Arc<CpuMemoryPool> {
    static DEFAULT: OnceLock<Arc<CpuMemoryPool>> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        let pool = Arc::new(CpuMemoryPool::new(HostBlocks, PoolOptions::default()));
        mempool::register(&(pool.clone() as Arc<dyn DevicePool>));
        pool
    })
}

/// A new pool, registered for out-of-memory trims.
pub(crate) fn new_pool(options: PoolOptions) -> Arc<dyn DevicePool> {
    let pool: Arc<dyn DevicePool> = Arc::new(CpuMemoryPool::new(HostBlocks, options));
    mempool::register(&pool);
    pool
}
