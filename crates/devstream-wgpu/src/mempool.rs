//! Memory pools of wgpu places: core's caching pool over wgpu buffers, returned in stream order.
//!
//! Mechanism. Creating a wgpu buffer is expensive (a driver allocation, wgpu's tracking), so a
//! pool keeps freed buffers ("blocks") by size class (`devstream_core::mempool::size_class`) and
//! hands them out again. The free lists, statistics, threshold, size limit and trim are core's
//! `CachingPool`, shared with the CPU and plug-in places; this module adds the blocks and the
//! rule for when a freed block may be handed out again:
//!
//! * A buffer notes every stream that used it (a copy, a fill, a dispatch; each replay of a
//!   graph that uses it). When its last holder lets go (the handle, a recorded graph, a held
//!   upload), each of those streams is flushed and its position taken as a record: resolved at
//!   once when the stream holds nothing back, else a mark held behind the stream's gates that
//!   the scheduler resolves when it releases that far.
//! * The block waits in its pool's pending list until every one of those records is complete
//!   (its work has run, not merely reached the queue), and only then returns to the free lists
//!   (`CachingPool::give_back_cached`). So a block is never handed out while work of any stream
//!   that used it may still run, whatever that stream waits on.
//! * Pending returns are settled whenever the pool is used (an allocation, the statistics, the
//!   threshold, a trim) and at the device's synchronisation points: no thread and no callback
//!   per buffer, and statistics read after the streams that used a buffer were synchronized
//!   count it as returned.
//! * A returned block is cached; the release threshold is applied at synchronisation points
//!   (`synchronize` of a stream or event of the device), as CUDA's pools apply theirs, and by
//!   `trim` and `set_release_threshold`. So a program that allocates and frees between
//!   synchronisations reuses its blocks whatever the threshold (creating a wgpu buffer costs
//!   far more than taking one from a free list), and once its work has drained and it has
//!   synchronized, the pool holds at most the threshold.
//! * Positions are taken under the device's scheduler lock. Where that lock is taken already
//!   (the last holder let go inside the scheduler, such as a held upload's destination once it
//!   ran) the positions are taken at the next settling instead: later positions cover at least
//!   the same work, so the return is only later, never earlier.
//! * A device with a fault runs nothing more: its pending blocks return at once.
//!
//! A kernel's bind group binds a buffer's own length, not its block's, so a kernel sees the same
//! `arrayLength` however large the block is. A reused block is not cleared (as CUDA's pools):
//! a buffer's contents are unspecified until written.

use crate::buffer::{create_device_buffer, BufferInner};
use crate::device::DeviceShared;
use crate::event::Record;
use crate::sched::{flush_locked, hold_locked, Held, Sched};
use crate::util::lock;
use devstream_core::elide::Mark;
use devstream_core::mempool::{
    self, alloc_retrying, size_class, BlockSource, CachingPool, CachingPoolHandle,
};
use devstream_core::{DevicePool, Error, Place, PoolOptions, PoolStats, Result};
use std::sync::{Arc, Mutex};

/// A block on its way back: the block of a buffer whose last holder let go, waiting for the
/// work of the streams that used it.
struct PendingReturn {
    class: usize,
    block: Option<wgpu::Buffer>,
    device: Arc<DeviceShared>,
    /// The streams that used the buffer.
    users: Vec<u64>,
    /// Their positions when the buffer was let go; `None` until taken.
    positions: Option<Vec<Arc<Record>>>,
}

/// A wgpu pool's blocks: buffers of one device, and those waiting to come back.
pub struct WgpuBlocks {
    place: Place,
    /// The device whose buffers these are (`DeviceShared::id`): a stream of another device
    /// (an adopted device of the same place) cannot take them.
    device_id: u64,
    pending: Mutex<Vec<PendingReturn>>,
}

impl BlockSource for WgpuBlocks {
    type Block = wgpu::Buffer;

    fn place(&self) -> &Place {
        &self.place
    }

    fn free(&self, blocks: Vec<wgpu::Buffer>) {
        // Only blocks whose work is complete reach here, and no bind group that a live buffer
        // or graph uses refers to them: destroying frees the memory now rather than when the
        // last wgpu reference (a kernel's cached bind group) goes.
        for block in blocks {
            block.destroy();
        }
    }
}

/// The state a pool's buffers share with it.
pub(crate) type PoolShared = CachingPool<WgpuBlocks>;

/// The pools of one device, held weakly: what a synchronisation point settles and releases.
#[derive(Default)]
pub(crate) struct DevicePools {
    /// Whether the device ever had a pool (the synchronisation point's fast path).
    any: std::sync::atomic::AtomicBool,
    pools: Mutex<Vec<std::sync::Weak<WgpuMemoryPool>>>,
}

/// A synchronisation point of `device`: every pool of the device takes back the blocks whose
/// work is complete and frees what its release threshold releases.
pub(crate) fn sync_point(device: &DeviceShared) {
    if !device.pools.any.load(std::sync::atomic::Ordering::Acquire) {
        return;
    }
    let pools: Vec<Arc<WgpuMemoryPool>> = {
        let mut list = lock(&device.pools.pools);
        list.retain(|weak| weak.strong_count() > 0);
        list.iter().filter_map(std::sync::Weak::upgrade).collect()
    };
    for pool in pools {
        pool.settle();
        pool.handle.shared.release_to_threshold();
    }
}

/// A memory pool of a wgpu device (see the module documentation): what
/// `WgpuBackend::default_pool` and `WgpuBackend::new_pool` return as `Arc<dyn DevicePool>`.
pub struct WgpuMemoryPool {
    handle: CachingPoolHandle<WgpuBlocks>,
}

impl std::fmt::Debug for WgpuMemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.handle, f)
    }
}

impl WgpuMemoryPool {
    /// A new pool of `device`'s buffers, registered for out-of-memory trims.
    pub(crate) fn create(device: &DeviceShared, options: PoolOptions) -> Arc<WgpuMemoryPool> {
        let source = WgpuBlocks {
            place: device.place.clone(),
            device_id: device.id,
            pending: Mutex::new(Vec::new()),
        };
        let pool = Arc::new(WgpuMemoryPool {
            handle: CachingPoolHandle::new(source, options),
        });
        mempool::register(&(pool.clone() as Arc<dyn DevicePool>));
        lock(&device.pools.pools).push(Arc::downgrade(&pool));
        device
            .pools
            .any
            .store(true, std::sync::atomic::Ordering::Release);
        pool
    }

    /// Returns the pending blocks whose work is complete.
    fn settle(&self) {
        settle(&self.handle.shared);
    }
}

impl DevicePool for WgpuMemoryPool {
    fn place(&self) -> &Place {
        self.handle.place()
    }

    fn id(&self) -> u64 {
        self.handle.id()
    }

    fn stats(&self) -> Result<PoolStats> {
        self.settle();
        self.handle.stats()
    }

    fn reset_peak(&self) -> Result<()> {
        self.settle();
        self.handle.reset_peak()
    }

    fn release_threshold(&self) -> Result<u64> {
        self.handle.release_threshold()
    }

    fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.settle();
        self.handle.set_release_threshold(bytes)
    }

    fn trim(&self, keep_bytes: u64) -> Result<()> {
        self.settle();
        self.handle.trim(keep_bytes)
    }
}

/// The positions of `users` on `device` now: each stream flushed and recorded (a record held
/// behind its gates where it holds work back). A stream that no longer exists has drained.
fn positions_locked(
    device: &Arc<DeviceShared>,
    sched: &mut Sched,
    users: &[u64],
) -> Vec<Arc<Record>> {
    let mut out = Vec::with_capacity(users.len());
    for &id in users {
        flush_locked(device, sched, id, false);
        let Some(state) = sched.streams.get(&id) else {
            continue;
        };
        if state.held.is_empty() {
            out.push(Record::new(
                device,
                Some(state.frontier.clone()),
                None,
                None,
                Mark::NONE,
            ));
        } else {
            let record = Record::new(device, None, None, None, Mark::NONE);
            hold_locked(device, sched, id, Held::Mark(Arc::clone(&record)));
            out.push(record);
        }
    }
    out
}

/// Whether every record is complete (a device fault counts: nothing more of its work runs).
fn complete(positions: &[Arc<Record>]) -> bool {
    positions
        .iter()
        .all(|record| record.query().unwrap_or(true))
}

/// Returns `pool`'s pending blocks whose work is complete, taking the positions not taken yet.
/// The pending list is not locked while the scheduler lock is taken (a buffer let go inside
/// the scheduler locks them in the other order).
fn settle(pool: &PoolShared) {
    let mut pending = std::mem::take(&mut *lock(&pool.source.pending));
    if pending.is_empty() {
        return;
    }
    for item in pending.iter_mut().filter(|item| item.positions.is_none()) {
        let mut sched = lock(&item.device.sched);
        item.positions = Some(positions_locked(&item.device, &mut sched, &item.users));
    }
    let mut waiting = Vec::new();
    for item in pending {
        if complete(item.positions.as_deref().unwrap_or_default()) {
            pool.give_back_cached(item.class, item.block);
        } else {
            waiting.push(item);
        }
    }
    if !waiting.is_empty() {
        lock(&pool.source.pending).extend(waiting);
    }
}

/// Where a pooled buffer's block goes back.
pub(crate) struct Pooled {
    pub(crate) pool: Arc<PoolShared>,
    pub(crate) class: usize,
    /// Whether the buffer's `wgpu::Buffer` is the pool's block (a buffer of 0 bytes has none).
    pub(crate) is_block: bool,
}

/// The last holder of a pooled buffer let go: its block waits for the work of `users`.
pub(crate) fn let_go(
    pooled: Pooled,
    device: &Arc<DeviceShared>,
    buffer: &wgpu::Buffer,
    users: Vec<u64>,
) {
    let block = pooled.is_block.then(|| buffer.clone());
    let positions = if users.is_empty() {
        Some(Vec::new())
    } else {
        // Busy (possibly by this thread, inside the scheduler): take them when settling.
        device
            .sched
            .try_lock()
            .ok()
            .map(|mut sched| positions_locked(device, &mut sched, &users))
    };
    if positions.as_deref().is_some_and(complete) {
        pooled.pool.give_back_cached(pooled.class, block);
        return;
    }
    lock(&pooled.pool.source.pending).push(PendingReturn {
        class: pooled.class,
        block,
        device: Arc::clone(device),
        users,
        positions,
    });
}

/// A buffer of `len` bytes from `pool`'s cache, else a new block: the size class's, or the
/// buffer's own size where the class passes the device's largest buffer.
fn take(device: &Arc<DeviceShared>, pool: &WgpuMemoryPool, len: usize) -> Result<Arc<BufferInner>> {
    let shared = &pool.handle.shared;
    let bytes = u64::try_from(len).map_err(|_| Error::out_of_memory(&device.place, len))?;
    if bytes > device.limits.max_buffer_size.saturating_sub(4) {
        return Err(Error::out_of_memory(&device.place, len));
    }
    let class = size_class(len)
        .filter(|&class| class as u64 <= device.limits.max_buffer_size)
        .unwrap_or_else(|| len.next_multiple_of(4));
    if class == 0 {
        // No block: a small buffer of its own, counted as a buffer of 0 bytes.
        let buffer = create_device_buffer(device, 4, len)?;
        shared.cache().add_new(0);
        let pooled = Pooled {
            pool: Arc::clone(shared),
            class,
            is_block: false,
        };
        return Ok(BufferInner::pooled(device, buffer, bytes, pooled));
    }
    let taken = shared.take(class, len, |class| {
        create_device_buffer(device, class as u64, len)
    })?;
    let pooled = Pooled {
        pool: Arc::clone(shared),
        class: taken.class,
        is_block: true,
    };
    Ok(BufferInner::pooled(device, taken.block, bytes, pooled))
}

/// A buffer of `len` bytes from `pool` for a stream of `device`, through the shared
/// out-of-memory rule. A pool of another device of the same place (an adopted device) is
/// `Error::InvalidArgument`.
pub(crate) fn alloc(
    device: &Arc<DeviceShared>,
    pool: &WgpuMemoryPool,
    len: usize,
) -> Result<Arc<BufferInner>> {
    if pool.handle.shared.source.device_id != device.id {
        return Err(Error::InvalidArgument(format!(
            "alloc_from: the pool belongs to another wgpu device of {} (an adopted device)",
            device.place
        )));
    }
    pool.settle();
    alloc_retrying(pool, len, || take(device, pool, len))
}

/// `pool` as a wgpu pool of `device`'s place (`Error::PlaceMismatch` otherwise).
pub(crate) fn downcast<'a>(
    pool: &'a dyn DevicePool,
    device: &DeviceShared,
) -> Result<&'a WgpuMemoryPool> {
    mempool::downcast::<WgpuMemoryPool>(pool, "alloc_from", &device.place)
}
