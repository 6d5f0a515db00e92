//! Memory pools of the CPU place: a caching allocator of its own over host memory.
//!
//! Mechanism. A pool hands out blocks by size class (`devstream_core::mempool::size_class`:
//! powers of two from 512 bytes up to 1 MiB, whole MiB above) and keeps freed blocks in per-class free lists for reuse.
//! A buffer's block returns to its pool when the buffer's last holder lets go, and queued work
//! holds its buffers until it has run: so a block is back in a free list only once every
//! operation of every stream that used it is complete, and any stream may take it at once
//! (stream order, met at the strictest point). A reused block is zeroed up to the new buffer's
//! length (CPU buffers start zeroed).
//!
//! The bookkeeping (free lists, used and reserved bytes, peaks, threshold, size limit, and its
//! invariants) is core's `CacheState`, shared with the plug-in places' pools; this module adds
//! the blocks (host memory) and when they come back. A new block that would take the reserved
//! bytes past `max_size` (when set) is refused as out of memory before any system call. The rules shared with
//! every backend (statistics, threshold, trim, out of memory) are in `devstream_core::mempool`.

use crate::buffer::{BufferData, BufferInner, CpuBuffer};
use crate::CPU_PLACE;
use devstream_core::memory::zeroed;
use devstream_core::mempool::{self, alloc_retrying, size_class, CacheState};
use devstream_core::sync::lock;
use devstream_core::{next_id, DevicePool, Error, Place, PoolOptions, PoolStats, Result};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

/// The state a pool's buffers share with it: they hold it until their block is back.
pub(crate) struct PoolShared {
    cache: Mutex<CacheState<Box<[u8]>>>,
}

impl PoolShared {
    /// A block of at least `len` bytes, the first `len` zeroed: from the cache, else new.
    fn take(self: &Arc<Self>, len: usize) -> Result<Arc<BufferInner>> {
        let class = size_class(len).ok_or_else(|| Error::out_of_memory(&CPU_PLACE, len))?;
        let cached = lock(&self.cache).take_cached(class);
        let block = match cached {
            Some(mut block) => {
                block[..len].fill(0);
                block
            }
            None => {
                // Under the lock from the limit check to the count, so that concurrent
                // allocations cannot pass the limit together.
                let mut cache = lock(&self.cache);
                if !cache.admits(class) {
                    return Err(Error::out_of_memory(&CPU_PLACE, len));
                }
                let block = zeroed(&CPU_PLACE, class)?;
                if class == 0 {
                    cache.add_empty();
                } else {
                    cache.add_new(class);
                }
                block
            }
        };
        Ok(Arc::new(BufferInner {
            id: next_id(),
            len,
            data: BufferData::new(block, len),
            pool: Some(self.clone()),
        }))
    }

    /// Takes back the block of a buffer whose last holder let go (its work is complete); what
    /// the threshold releases is freed after the lock is let go.
    pub(crate) fn give_back(&self, block: Box<[u8]>) {
        let class = block.len();
        let block = (class > 0).then_some(block);
        let released = lock(&self.cache).give_back(class, block);
        drop(released);
    }
}

/// A memory pool of the CPU place (see the module documentation): what
/// `CpuBackend::default_pool` and `CpuBackend::new_pool` return as `Arc<dyn DevicePool>`.
pub struct CpuMemoryPool {
    id: u64,
    shared: Arc<PoolShared>,
}

impl CpuMemoryPool {
    fn new(options: PoolOptions) -> CpuMemoryPool {
        CpuMemoryPool {
            id: next_id(),
            shared: Arc::new(PoolShared {
                cache: Mutex::new(CacheState::new(options)),
            }),
        }
    }

    /// A buffer of `len` bytes from this pool, through the shared out-of-memory rule.
    pub(crate) fn alloc(&self, len: usize) -> Result<CpuBuffer> {
        alloc_retrying(self, len, || self.shared.take(len)).map(CpuBuffer)
    }
}

impl fmt::Debug for CpuMemoryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cache = lock(&self.shared.cache);
        f.debug_struct("CpuMemoryPool")
            .field("id", &self.id)
            .field("stats", &cache.stats())
            .field("threshold", &cache.threshold())
            .finish()
    }
}

impl Drop for CpuMemoryPool {
    /// Nobody can take from the pool any more: its cache goes, and blocks of buffers still
    /// alive are freed as they come back.
    fn drop(&mut self) {
        let released = lock(&self.shared.cache).set_threshold(0);
        drop(released);
    }
}

impl DevicePool for CpuMemoryPool {
    fn place(&self) -> &Place {
        &CPU_PLACE
    }

    fn id(&self) -> u64 {
        self.id
    }

    fn stats(&self) -> Result<PoolStats> {
        Ok(lock(&self.shared.cache).stats())
    }

    fn reset_peak(&self) -> Result<()> {
        lock(&self.shared.cache).reset_peak();
        Ok(())
    }

    fn release_threshold(&self) -> Result<u64> {
        Ok(lock(&self.shared.cache).threshold())
    }

    fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        let released = lock(&self.shared.cache).set_threshold(bytes);
        drop(released);
        Ok(())
    }

    fn trim(&self, keep_bytes: u64) -> Result<()> {
        let released = lock(&self.shared.cache).release_above(keep_bytes);
        drop(released);
        Ok(())
    }
}

/// The CPU place's default pool (the one `alloc` takes from): release threshold 0, as CUDA's
/// default pool, so memory goes back to the system as soon as its work is done unless the
/// threshold is raised.
pub(crate) fn default_pool() -> &'static Arc<CpuMemoryPool> {
    static DEFAULT: OnceLock<Arc<CpuMemoryPool>> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        let pool = Arc::new(CpuMemoryPool::new(PoolOptions::default()));
        mempool::register(&(pool.clone() as Arc<dyn DevicePool>));
        pool
    })
}

/// A new pool, registered for out-of-memory trims.
pub(crate) fn new_pool(options: PoolOptions) -> Arc<dyn DevicePool> {
    let pool: Arc<dyn DevicePool> = Arc::new(CpuMemoryPool::new(options));
    mempool::register(&pool);
    pool
}
