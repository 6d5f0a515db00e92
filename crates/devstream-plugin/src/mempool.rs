//! Memory pools of Paddle plug-in places: devstream's caching pool over the plug-in's own
//! allocator.
//!
//! Mechanism. The plug-in ABI allocates synchronously (`device_memory_allocate`) and keeps no
//! statistics per pool, so devstream keeps them: blocks of the plug-in's memory, by size class,
//! in core's caching pool (`devstream_core::mempool::CachingPool`: used and reserved bytes,
//! peaks, threshold, size limit, the `DevicePool` operations), as the CPU place's. A buffer's block comes back when the buffer is dropped *and* the work
//! of every stream that used it is complete (the buffer's release job, `crate::buffer`), so any
//! stream may take it again at once. A block the pool lets go (threshold, trim, the pool's end)
//! is freed with `device_memory_deallocate`, outside the pool's lock. `alloc` takes from the place's default
//! pool (release threshold 0: memory goes back to the plug-in as soon as its work is done).

use crate::buffer::AbiBuffer;
use crate::runtime::Runtime;
use devstream_core::mempool::{
    self, alloc_retrying, size_class, BlockSource, CachingPool, CachingPoolHandle,
};
use devstream_core::sync::lock;
use devstream_core::{DevicePool, Error, Place, PoolOptions, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A block of the plug-in's device memory: its address and size.
pub struct DeviceBlock {
    ptr: usize,
    size: usize,
}

/// The blocks of one plug-in place: from `device_memory_allocate`, freed with
/// `device_memory_deallocate`.
pub struct PluginBlocks {
    runtime: Arc<Runtime>,
    slot: usize,
    place: Place,
}

impl BlockSource for PluginBlocks {
    type Block = DeviceBlock;

    fn place(&self) -> &Place {
        &self.place
    }

    fn free(&self, blocks: Vec<DeviceBlock>) {
        for block in blocks {
            if let Err(error) = self.runtime.deallocate(self.slot, block.ptr, block.size) {
                tracing::warn!("devstream-plugin: device_memory_deallocate: {error}");
            }
        }
    }
}

impl PluginBlocks {
    /// The plug-in runtime the memory comes from.
    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The device slot of the pool's place in that runtime.
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }
}

/// The state a pool's buffers share with it: they hold it until their block is back.
pub(crate) type PoolShared = CachingPool<PluginBlocks>;

/// A memory pool of a Paddle plug-in place (see the module documentation).
pub type PluginMemoryPool = CachingPoolHandle<PluginBlocks>;

/// A block for a buffer of `len` bytes: its address and size (at least one byte, as the plug-in
/// is always asked for), from the cache or the plug-in.
pub(crate) fn take(pool: &PoolShared, len: usize) -> Result<(usize, usize)> {
    let place = &pool.source.place;
    let class = size_class(len.max(1)).ok_or_else(|| Error::out_of_memory(place, len))?;
    let taken = pool.take(class, len, |class| {
        let ptr = pool.source.runtime.allocate(pool.source.slot, class)?;
        Ok(DeviceBlock { ptr, size: class })
    })?;
    Ok((taken.block.ptr, taken.block.size))
}

/// Takes back the block of a buffer that is dropped and whose work is complete.
pub(crate) fn give_back(pool: &PoolShared, ptr: usize, size: usize) {
    pool.give_back(size, Some(DeviceBlock { ptr, size }));
}

/// A buffer of `len` bytes from `pool`, through the shared out-of-memory rule.
pub(crate) fn alloc(pool: &PluginMemoryPool, len: usize) -> Result<AbiBuffer> {
    alloc_retrying(pool, len, || AbiBuffer::from_pool(&pool.shared, len))
}

fn pool_of(runtime: &Arc<Runtime>, slot: usize, options: PoolOptions) -> PluginMemoryPool {
    let blocks = PluginBlocks {
        place: runtime.place(slot),
        runtime: runtime.clone(),
        slot,
    };
    PluginMemoryPool::new(blocks, options)
}

/// The default pool of the plug-in place `slot` of `runtime` (made on first use, registered for
/// out-of-memory trims): the one `alloc` takes from.
pub(crate) fn default_pool(runtime: &Arc<Runtime>, slot: usize) -> Arc<PluginMemoryPool> {
    static DEFAULTS: Mutex<Option<HashMap<Place, Arc<PluginMemoryPool>>>> = Mutex::new(None);
    let place = runtime.place(slot);
    let mut defaults = lock(&DEFAULTS);
    defaults
        .get_or_insert_with(HashMap::new)
        .entry(place)
        .or_insert_with(|| {
            let pool = Arc::new(pool_of(runtime, slot, PoolOptions::default()));
            mempool::register(&(pool.clone() as Arc<dyn DevicePool>));
            pool
        })
        .clone()
}

/// A new pool of the plug-in place `slot` of `runtime`, registered for out-of-memory trims.
pub(crate) fn new_pool(
    runtime: &Arc<Runtime>,
    slot: usize,
    options: PoolOptions,
) -> Arc<dyn DevicePool> {
    let pool: Arc<dyn DevicePool> = Arc::new(pool_of(runtime, slot, options));
    mempool::register(&pool);
    pool
}
