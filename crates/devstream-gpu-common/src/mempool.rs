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
use crate::raw::{MemPoolAttribute, RawApi, RawMemPool};
use crate::stream::GpuStream;
use devstream_core::mempool::{self, alloc_retrying};
use devstream_core::{next_id, DevicePool, Error, Place, PoolOptions, PoolStats, Result};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A native memory pool of one device (see the module documentation).
pub struct GpuMemoryPool<A: RawApi> {
    id: u64,
    device: &'static Device<A>,
    raw: RawMemPool,
    /// Made by `new_pool` (destroyed on drop), not the device's default pool.
    owned: bool,
    /// Buffers taken from the pool and not released yet (shared with each buffer).
    live: Arc<AtomicU64>,
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
                    live: Arc::default(),
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
            live: Arc::default(),
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
    pub(crate) fn alloc(&self, stream: &GpuStream<A>, len: usize) -> Result<GpuBuffer<A>> {
        alloc_retrying(self, len, || {
            GpuBuffer::alloc_in(stream, len, Some((self.raw, self.live.clone())))
        })
    }

    fn attribute(&self, attribute: MemPoolAttribute) -> Result<u64> {
        // SAFETY: the pool is alive (owned by `self`, or the device's default pool).
        check::<A, _>(unsafe { A::mem_pool_get_attribute(self.raw, attribute) })
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
        self.device.reclaim_frees.settle(self.device);
        let threshold = self.attribute(MemPoolAttribute::ReleaseThreshold)?;
        if let Ok(keep) = usize::try_from(threshold) {
            if keep != usize::MAX {
                // SAFETY: as in `attribute`; trimming never touches live allocations.
                check::<A, _>(unsafe { A::mem_pool_trim_to(self.raw, keep) })?;
            }
        }
        Ok(())
    }

    fn set_attribute(&self, attribute: MemPoolAttribute, value: u64) -> Result<()> {
        // SAFETY: as in `attribute`.
        check::<A, _>(unsafe { A::mem_pool_set_attribute(self.raw, attribute, value) })
    }
}

impl<A: RawApi> Drop for GpuMemoryPool<A> {
    fn drop(&mut self) {
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
            allocations: self.live.load(Ordering::Acquire),
        })
    }

    fn reset_peak(&self) -> Result<()> {
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
        if !crate::hostfn::in_host_function() {
            self.device.reclaim_frees.settle(self.device);
        }
        let keep = usize::try_from(keep_bytes).unwrap_or(usize::MAX);
        // SAFETY: as in `attribute`; trimming never touches live allocations.
        check::<A, _>(unsafe { A::mem_pool_trim_to(self.raw, keep) })
    }
}
