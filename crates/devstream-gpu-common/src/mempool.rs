//! Memory pools of CUDA and HIP places, written once over the raw-call table: native
//! stream-ordered pools (`cuMemPoolCreate`, `cuDeviceGetDefaultMemPool`; HIP's `hipMemPool*`).
//!
//! Mechanism. A [`GpuMemoryPool`] wraps a native pool: its buffers come from
//! `cuMemAllocFromPoolAsync` on the allocating stream and go back with `cuMemFreeAsync` through
//! the buffer's ordinary release path (`crate::buffer`: on the only user stream, or on the
//! device's reclaim stream after every user), so the driver's stream-ordered reuse rules apply.
//! Used and reserved bytes and their high-water marks are the pool's attributes
//! (`CU_MEMPOOL_ATTR_USED_MEM_*`, `RESERVED_MEM_*`; a high-water mark set to 0 resets to the
//! current value); the release threshold is `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` (the driver
//! releases above it at synchronisation points; frees on the device's reclaim stream get theirs at
//! the user's drain points, `crate::buffer::ReclaimFrees`, and `stats` trims to it); trim is
//! `cuMemPoolTrimTo`. The driver does not
//! count allocations: devstream counts the buffers it took from the pool and has not released.
//!
//! The default pool is the device's own (`cuDeviceGetDefaultMemPool`), which `alloc` takes from;
//! a pool made with `new_pool` is destroyed when its last handle goes (the driver keeps its
//! memory until outstanding allocations are freed). The rules shared with every backend are in
//! `devstream_core::mempool`.

use crate::buffer::GpuBuffer;
use crate::device::Device;
use crate::error::check;
use crate::ext::CaptureModeGuard;
use crate::raw::{DevicePtr, MemPoolAttribute, RawApi, RawMemPool};
use crate::stream::{GpuStream, StreamInner, StreamKind};
use crate::users::gone;
use devstream_core::mempool::{self, alloc_retrying};
use devstream_core::{next_id, DevicePool, Error, Place, PoolOptions, PoolStats, Result};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A native memory pool of one device (see the module documentation).
pub struct GpuMemoryPool<A: RawApi> {
    id: u64,
    device: &'static Device<A>,
    raw: RawMemPool,
    /// Made by `new_pool` (destroyed on drop), not the device's default pool.
    owned: bool,
    /// The live-buffer count and the block cache, shared with each buffer.
    shared: Arc<PoolShared<A>>,
}

/// What a pool shares with the buffers it gave out: their live count, and the blocks they left
/// for reuse on the stream that used them.
///
/// Mechanism. A buffer of the pool whose only user is a stream devstream made, or the legacy
/// default stream, leaves its block here when it is dropped, instead of `cuMemFreeAsync` on
/// that stream (never a per-thread default stream, whose handle names a different stream on
/// every thread, nor a wrapped raw stream, which its owner may destroy before the block would
/// be freed on it). The next allocation of
/// the same length from the pool on the same stream takes it back without a driver call: the
/// new buffer's work is queued on that stream after the old one's, which is the order the
/// driver's own stream-ordered reuse would give (PyTorch's and CuPy's caching allocators reuse
/// the same way). Work of the old buffer captured in a graph is no reason to wait: a graph
/// keeps the buffers its work uses until its last launch completed, so a buffer being dropped
/// has none.
///
/// The cache never holds memory the driver would otherwise have: any allocation from the pool
/// that misses (another length, another stream) first frees every cached block (on its own
/// stream, as the drop would have), as do the pool's statistics, `trim`, `reset_peak` and the
/// pool's drop. So the driver's figures are devstream's once those ran, and its high-water
/// marks, which only rise at an allocation, never count a cached block.
pub(crate) struct PoolShared<A: RawApi> {
    /// Buffers taken from the pool and not released yet.
    pub(crate) live: AtomicU64,
    cache: Mutex<BlockCache<A>>,
    /// Entries in the cache (read without the lock on the allocation path).
    cached: AtomicUsize,
}

struct BlockCache<A: RawApi> {
    blocks: Vec<CachedBlock<A>>,
    /// The pool is gone: nothing is cached any more.
    closed: bool,
}

/// A block left by a dropped buffer, reusable on `stream` for a buffer of `len` bytes.
pub(crate) struct CachedBlock<A: RawApi> {
    stream: Arc<StreamInner<A>>,
    len: usize,
    ptr: DevicePtr,
}

/// Blocks a pool keeps at most; a drop beyond them frees its block.
const MAX_CACHED_BLOCKS: usize = 64;

impl<A: RawApi> PoolShared<A> {
    /// An empty cache, listed with `device`'s (for [`stream_gone`]).
    fn registered(device: &'static Device<A>) -> Arc<Self> {
        let shared = Arc::new(PoolShared {
            live: AtomicU64::new(0),
            cache: Mutex::new(BlockCache {
                blocks: Vec::new(),
                closed: false,
            }),
            cached: AtomicUsize::new(0),
        });
        let mut caches = devstream_core::sync::lock(&device.pool_caches);
        caches.retain(|cache| cache.strong_count() > 0);
        caches.push(Arc::downgrade(&shared));
        shared
    }

    /// A block of `len` bytes left on `stream`, now the caller's.
    fn take(&self, stream: &Arc<StreamInner<A>>, len: usize) -> Option<DevicePtr> {
        if self.cached.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut cache = self.cache.lock().ok()?;
        let at = cache
            .blocks
            .iter()
            .rposition(|block| block.len == len && Arc::ptr_eq(&block.stream, stream))?;
        let block = cache.blocks.swap_remove(at);
        self.cached.store(cache.blocks.len(), Ordering::Release);
        Some(block.ptr)
    }

    /// Leaves the block `ptr` of a dropped buffer of `len` bytes, used only by `stream`, for
    /// reuse there; gives it back where it cannot be kept (the caller frees it).
    pub(crate) fn keep(
        &self,
        stream: Arc<StreamInner<A>>,
        len: usize,
        ptr: DevicePtr,
    ) -> std::result::Result<(), Arc<StreamInner<A>>> {
        if !matches!(stream.kind, StreamKind::Owned | StreamKind::Legacy) {
            return Err(stream);
        }
        let Ok(mut cache) = self.cache.lock() else {
            return Err(stream);
        };
        if cache.closed || cache.blocks.len() >= MAX_CACHED_BLOCKS {
            return Err(stream);
        }
        // Asked under the lock, after the block is in: the last handle's drop lowers the count
        // before it takes this lock to free the stream's blocks, so either it finds this block
        // or this finds the stream gone.
        if gone(&stream) {
            return Err(stream);
        }
        cache.blocks.push(CachedBlock { stream, len, ptr });
        self.cached.store(cache.blocks.len(), Ordering::Release);
        Ok(())
    }

    /// The cached blocks of `stream`, out of the cache.
    fn drain_stream(&self, stream: &Arc<StreamInner<A>>) -> Vec<CachedBlock<A>> {
        if self.cached.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let Ok(mut cache) = self.cache.lock() else {
            return Vec::new();
        };
        let (ours, others) = std::mem::take(&mut cache.blocks)
            .into_iter()
            .partition(|block| Arc::ptr_eq(&block.stream, stream));
        cache.blocks = others;
        self.cached.store(cache.blocks.len(), Ordering::Release);
        ours
    }

    /// Every cached block, out of the cache (`close`: and nothing is cached from now on).
    fn drain(&self, close: bool) -> Vec<CachedBlock<A>> {
        if self.cached.load(Ordering::Acquire) == 0 && !close {
            return Vec::new();
        }
        let Ok(mut cache) = self.cache.lock() else {
            return Vec::new();
        };
        cache.closed |= close;
        self.cached.store(0, Ordering::Release);
        std::mem::take(&mut cache.blocks)
    }
}

impl<A: RawApi> GpuMemoryPool<A> {
    /// The device's default pool (`cuDeviceGetDefaultMemPool`), made once per device and
    /// registered for out-of-memory trims.
    pub(crate) fn default_of(device: &'static Device<A>) -> Result<Arc<GpuMemoryPool<A>>> {
        device
            .default_pool
            .get_or_init(|| {
                Self::check_supported(device, "default_pool")?;
                device.bind()?;
                // SAFETY: the device's context is current; memory pools are supported.
                let raw = check::<A, _>(unsafe { A::device_default_mem_pool(device.ordinal) })?;
                let pool = Arc::new(GpuMemoryPool {
                    id: next_id(),
                    device,
                    raw,
                    owned: false,
                    shared: PoolShared::registered(device),
                });
                mempool::register(&(pool.clone() as Arc<dyn DevicePool>));
                Ok(pool)
            })
            .clone()
    }

    /// A new pool on `device` (`cuMemPoolCreate`), registered for out-of-memory trims.
    pub(crate) fn create(
        device: &'static Device<A>,
        options: PoolOptions,
    ) -> Result<Arc<dyn DevicePool>> {
        Self::check_supported(device, "new_pool")?;
        device.bind()?;
        let max_size = usize::try_from(options.max_size).unwrap_or(usize::MAX);
        // SAFETY: the device's context is current; memory pools are supported.
        let raw = check::<A, _>(unsafe { A::mem_pool_create(device.ordinal, max_size) })?;
        let pool = GpuMemoryPool {
            id: next_id(),
            device,
            raw,
            owned: true,
            shared: PoolShared::registered(device),
        };
        // On failure `pool` is dropped, which destroys the native pool.
        pool.set_release_threshold(options.release_threshold)?;
        let pool: Arc<dyn DevicePool> = Arc::new(pool);
        mempool::register(&pool);
        Ok(pool)
    }

    fn check_supported(device: &Device<A>, op: &'static str) -> Result<()> {
        if device.caps.memory_pools {
            Ok(())
        } else {
            Err(Error::unsupported(op, &device.place))
        }
    }

    /// A buffer of `len` bytes from this pool, allocated on `stream`, through the shared
    /// out-of-memory rule.
    /// `stream` does not capture (its caller asked). A block a dropped buffer of the same
    /// length left on `stream` is reused without a driver call; any other allocation first
    /// frees every cached block ([`PoolShared`]).
    pub(crate) fn alloc(&self, stream: &GpuStream<A>, len: usize) -> Result<GpuBuffer<A>> {
        if len > 0 {
            if let Some(ptr) = self.shared.take(stream.inner(), len) {
                return Ok(GpuBuffer::reused(stream, len, ptr, self.shared.clone()));
            }
        }
        self.flush(Flush::Miss);
        alloc_retrying(self, len, || {
            GpuBuffer::alloc_in(stream, len, Some((self.raw, self.shared.clone())))
        })
    }

    /// Frees every block the pool caches, each on its own stream after its work, as the
    /// buffer's drop would have; see [`Flush`] for when. Not from a host function (no runtime
    /// calls there): the blocks stay cached until a later call, or, for the pool's drop, go
    /// back on another thread.
    fn flush(&self, why: Flush) {
        if why != Flush::Drop && crate::hostfn::in_host_function() {
            return;
        }
        let blocks = self.shared.drain(why == Flush::Drop);
        if blocks.is_empty() {
            return;
        }
        let (device, drain) = (self.device, why == Flush::Drain);
        crate::hostfn::release_off_callback(move || free_blocks(device, blocks, drain));
    }

    /// A pool attribute. Asked in Relaxed mode, as every call a pool makes on the user's
    /// behalf: statistics, thresholds and trims are allowed beside a capture, and a capture in
    /// progress in `Global` mode (on any thread) or `ThreadLocal` mode (on this one) would
    /// otherwise count the call as unsafe, refuse it and be invalidated.
    fn attribute(&self, attribute: MemPoolAttribute) -> Result<u64> {
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        // SAFETY: the pool is alive (owned by `self`, or the device's default pool).
        check::<A, _>(unsafe { A::mem_pool_get_attribute(self.raw, attribute) })
    }

    /// Trims the pool to `keep` bytes, in Relaxed mode (see [`Self::attribute`]).
    fn trim_to(&self, keep: usize) -> Result<()> {
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        // SAFETY: as in `attribute`; trimming never touches live allocations.
        check::<A, _>(unsafe { A::mem_pool_trim_to(self.raw, keep) })
    }

    /// Brings the pool to what its release threshold promises once work has drained: the
    /// frees devstream queued on the device's reclaim stream whose awaited work has completed
    /// get their synchronisation point, and the pool is trimmed to its threshold (what the
    /// driver does at a synchronisation point, here also for frees it has not counted at one
    /// yet). Nothing from a host function (no runtime calls there: the figures may lag).
    fn settle(&self) -> Result<()> {
        if crate::hostfn::in_host_function() {
            return Ok(());
        }
        self.flush(Flush::Drain);
        // Releases deferred until their streams' work completed (a buffer dropped while a
        // user captured, a cached block freed during its stream's capture) run here if it has:
        // otherwise only the device's next allocation or stream creation would run them.
        self.device.collect();
        self.device.reclaim_frees.settle(self.device);
        let threshold = self.attribute(MemPoolAttribute::ReleaseThreshold)?;
        if let Ok(keep) = usize::try_from(threshold) {
            if keep != usize::MAX {
                self.trim_to(keep)?;
            }
        }
        Ok(())
    }

    /// Sets a pool attribute, in Relaxed mode (see [`Self::attribute`]).
    fn set_attribute(&self, attribute: MemPoolAttribute, value: u64) -> Result<()> {
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        // SAFETY: as in `attribute`.
        check::<A, _>(unsafe { A::mem_pool_set_attribute(self.raw, attribute, value) })
    }
}

/// Why a pool's cached blocks are freed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// An allocation missed the cache: the driver gets the blocks back before it allocates.
    Miss,
    /// A drain point (statistics, trim, peak reset): the blocks of streams whose work has
    /// completed are freed before the call returns, as their buffers' frees would have been
    /// by then (queued at the drop, run when the user drained the stream).
    Drain,
    /// The pool is dropped: nothing is cached any more.
    Drop,
}

/// Frees cached `blocks` of `device`'s pools (see [`PoolShared`]); `drain`: waits for the
/// frees on the streams that had no work left (only the free itself).
///
/// A drain's questions and waits (`cuStreamQuery`, `cuStreamSynchronize` of streams that do
/// not capture) are devstream's own work on behalf of a drain point, which is allowed beside
/// every capture (statistics, `trim`, the out-of-memory trim of an allocation): made with this
/// thread in Relaxed mode, so that a capture in progress in `Global` mode on another thread,
/// or in `ThreadLocal` mode on this one, does not count them as unsafe and get invalidated.
fn free_blocks<A: RawApi>(device: &'static Device<A>, blocks: Vec<CachedBlock<A>>, drain: bool) {
    let _relaxed = if drain {
        CaptureModeGuard::<A>::relaxed()
    } else {
        None
    };
    let mut idle: Vec<Arc<StreamInner<A>>> = Vec::new();
    if drain && device.bind().is_ok() {
        for block in &blocks {
            if idle.iter().any(|stream| Arc::ptr_eq(stream, &block.stream)) {
                continue;
            }
            let raw = block.stream.release_handle();
            // A capturing stream is never asked (the question would invalidate its capture):
            // its blocks are freed after the capture, by the release path.
            // SAFETY: the stream is alive (the block holds it); status and id only.
            let capturing = unsafe { A::stream_capture_sequence(raw) }
                .map_or(true, |(status, _)| {
                    status != crate::raw::CaptureStatus::None
                });
            // SAFETY: as above; the stream does not capture.
            if !capturing && unsafe { A::stream_query(raw) }.is_ok() {
                idle.push(block.stream.clone());
            }
        }
    }
    for block in blocks {
        crate::buffer::release_device_memory(block.ptr, device, true, vec![block.stream]);
    }
    for stream in idle {
        // SAFETY: as above; only the frees just queued are ahead, unless the user queued work
        // meanwhile, which a drain point then waits for.
        let _ = unsafe { A::stream_synchronize(stream.release_handle()) };
    }
}

/// The last handle of `stream` is gone: the blocks any pool of its device keeps for reuse on
/// it are freed (on it, after its work), so that the pools hold neither the memory nor the
/// stream.
pub(crate) fn stream_gone<A: RawApi>(stream: &Arc<StreamInner<A>>) {
    let device = stream.device;
    let caches: Vec<Arc<PoolShared<A>>> = devstream_core::sync::lock(&device.pool_caches)
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    let blocks: Vec<CachedBlock<A>> = caches
        .iter()
        .flat_map(|cache| cache.drain_stream(stream))
        .collect();
    if blocks.is_empty() {
        return;
    }
    crate::hostfn::release_off_callback(move || free_blocks(device, blocks, false));
}

impl<A: RawApi> Drop for GpuMemoryPool<A> {
    fn drop(&mut self) {
        self.flush(Flush::Drop);
        if self.owned && self.device.bind().is_ok() {
            // SAFETY: nobody can take from the pool any more; the driver releases its memory
            // once the allocations still outstanding are freed.
            let _ = unsafe { A::mem_pool_destroy(self.raw) };
        }
    }
}

impl<A: RawApi> fmt::Debug for GpuMemoryPool<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuMemoryPool")
            .field("id", &self.id)
            .field("place", &self.device.place)
            .field("raw", &self.raw)
            .field("default", &!self.owned)
            .finish()
    }
}

impl<A: RawApi> DevicePool for GpuMemoryPool<A> {
    fn place(&self) -> &Place {
        &self.device.place
    }

    fn id(&self) -> u64 {
        self.id
    }

    fn stats(&self) -> Result<PoolStats> {
        self.settle()?;
        Ok(PoolStats {
            used_bytes: self.attribute(MemPoolAttribute::UsedMemCurrent)?,
            reserved_bytes: self.attribute(MemPoolAttribute::ReservedMemCurrent)?,
            peak_used_bytes: self.attribute(MemPoolAttribute::UsedMemHigh)?,
            peak_reserved_bytes: self.attribute(MemPoolAttribute::ReservedMemHigh)?,
            allocations: self.shared.live.load(Ordering::Acquire),
        })
    }

    fn reset_peak(&self) -> Result<()> {
        self.flush(Flush::Drain);
        if !crate::hostfn::in_host_function() {
            self.device.collect();
        }
        self.set_attribute(MemPoolAttribute::UsedMemHigh, 0)?;
        self.set_attribute(MemPoolAttribute::ReservedMemHigh, 0)
    }

    fn release_threshold(&self) -> Result<u64> {
        self.attribute(MemPoolAttribute::ReleaseThreshold)
    }

    fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.set_attribute(MemPoolAttribute::ReleaseThreshold, bytes)
    }

    fn trim(&self, keep_bytes: u64) -> Result<()> {
        self.flush(Flush::Drain);
        if !crate::hostfn::in_host_function() {
            self.device.collect();
            self.device.reclaim_frees.settle(self.device);
        }
        self.trim_to(usize::try_from(keep_bytes).unwrap_or(usize::MAX))
    }
}
