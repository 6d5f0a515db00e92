//! Memory pools of the CPU place: a caching allocator of its own over host memory.
//!
//! Mechanism. A pool hands out blocks by size class ([`size_class`]: powers of two from 512
//! bytes up to 1 MiB, whole MiB above) and keeps freed blocks in per-class free lists for reuse.
//! A buffer's block returns to its pool when the buffer's last holder lets go, and queued work
//! holds its buffers until it has run: so a block is back in a free list only once every
//! operation of every stream that used it is complete, and any stream may take it at once
//! (stream order, met at the strictest point). A reused block is zeroed up to the new buffer's
//! length (CPU buffers start zeroed).
//!
//! Invariants (under the pool's lock): `used` is the sum of the classes of live blocks,
//! `reserved` is `used` plus the bytes in the free lists, both peaks cover their values, and
//! after every return `reserved ≤ max(threshold, used)`: returning a block releases cached
//! blocks, largest first, while more than the threshold is reserved. A new block that would take
//! `reserved` past `max_size` (when set) is refused as out of memory, before any system call. The rules shared with
//! every backend (statistics, threshold, trim, out of memory) are in `devstream_core::mempool`.

use crate::buffer::{BufferData, BufferInner, CpuBuffer};
use crate::CPU_PLACE;
use devstream_core::memory::zeroed;
use devstream_core::mempool::{self, alloc_retrying};
use devstream_core::sync::lock;
use devstream_core::{next_id, DevicePool, Error, Place, PoolOptions, PoolStats, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

/// Classes are powers of two up to this size, whole multiples of it above.
const LARGE: usize = 1 << 20;
/// The smallest class.
const SMALLEST: usize = 512;

/// The block size a buffer of `len` bytes takes (`None` where it cannot be described).
///
/// ```text
/// 0 → 0 (no block), 1 → 512, 1000 → 1024, 1 MiB → 1 MiB, 1 MiB + 1 → 2 MiB, 3.5 MiB → 4 MiB
/// ```
fn size_class(len: usize) -> Option<usize> {
    if len == 0 {
        Some(0)
    } else if len <= LARGE {
        Some(len.max(SMALLEST).next_power_of_two())
    } else {
        len.checked_next_multiple_of(LARGE)
    }
}

/// What a pool holds, under its lock.
#[derive(Debug, Default)]
struct PoolState {
    free: BTreeMap<usize, Vec<Box<[u8]>>>,
    used: u64,
    reserved: u64,
    peak_used: u64,
    peak_reserved: u64,
    allocations: u64,
    threshold: u64,
    /// The most `reserved` may reach (`0`: no limit).
    max_size: u64,
}

impl PoolState {
    /// Releases cached blocks, largest first, while more than `keep` bytes are reserved.
    fn release_above(&mut self, keep: u64) {
        while self.reserved > keep {
            let Some(mut entry) = self.free.last_entry() else {
                return;
            };
            let block = entry.get_mut().pop();
            if entry.get().is_empty() {
                entry.remove();
            }
            if let Some(block) = block {
                self.reserved -= block.len() as u64;
                drop(block);
            }
        }
    }

    fn note_peaks(&mut self) {
        self.peak_used = self.peak_used.max(self.used);
        self.peak_reserved = self.peak_reserved.max(self.reserved);
    }
}

/// The state a pool's buffers share with it: they hold it until their block is back.
pub(crate) struct PoolShared {
    state: Mutex<PoolState>,
}

impl PoolShared {
    /// A block of at least `len` bytes, the first `len` zeroed: from the free list of its class,
    /// else new.
    fn take(self: &Arc<Self>, len: usize) -> Result<Arc<BufferInner>> {
        let class = size_class(len).ok_or_else(|| Error::out_of_memory(&CPU_PLACE, len))?;
        let cached = {
            let mut state = lock(&self.state);
            let block = state.free.get_mut(&class).and_then(Vec::pop);
            if state.free.get(&class).is_some_and(Vec::is_empty) {
                state.free.remove(&class);
            }
            block
        };
        let block = match cached {
            Some(mut block) => {
                block[..len].fill(0);
                block
            }
            None => {
                let over_limit = {
                    let state = lock(&self.state);
                    state.max_size != 0
                        && state.reserved.saturating_add(class as u64) > state.max_size
                };
                if over_limit {
                    return Err(Error::out_of_memory(&CPU_PLACE, len));
                }
                let block = zeroed(&CPU_PLACE, class)?;
                let mut state = lock(&self.state);
                state.reserved += class as u64;
                block
            }
        };
        {
            let mut state = lock(&self.state);
            state.used += class as u64;
            state.allocations += 1;
            state.note_peaks();
        }
        Ok(Arc::new(BufferInner {
            id: next_id(),
            len,
            data: BufferData::new(block, len),
            pool: Some(self.clone()),
        }))
    }

    /// Takes back the block of a buffer whose last holder let go (its work is complete), then
    /// releases cached memory above the threshold.
    pub(crate) fn give_back(&self, block: Box<[u8]>) {
        let class = block.len();
        let mut state = lock(&self.state);
        state.used -= class as u64;
        state.allocations -= 1;
        if class > 0 {
            state.free.entry(class).or_default().push(block);
        }
        let keep = state.threshold.max(state.used);
        state.release_above(keep);
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
                state: Mutex::new(PoolState {
                    threshold: options.release_threshold,
                    max_size: options.max_size,
                    ..PoolState::default()
                }),
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
        let state = lock(&self.shared.state);
        f.debug_struct("CpuMemoryPool")
            .field("id", &self.id)
            .field("used", &state.used)
            .field("reserved", &state.reserved)
            .field("threshold", &state.threshold)
            .finish()
    }
}

impl Drop for CpuMemoryPool {
    /// Nobody can take from the pool any more: its cache goes, and blocks of buffers still
    /// alive are freed as they come back.
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.threshold = 0;
        state.release_above(0);
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
        let state = lock(&self.shared.state);
        Ok(PoolStats {
            used_bytes: state.used,
            reserved_bytes: state.reserved,
            peak_used_bytes: state.peak_used,
            peak_reserved_bytes: state.peak_reserved,
            allocations: state.allocations,
        })
    }

    fn reset_peak(&self) -> Result<()> {
        let mut state = lock(&self.shared.state);
        state.peak_used = state.used;
        state.peak_reserved = state.reserved;
        Ok(())
    }

    fn release_threshold(&self) -> Result<u64> {
        Ok(lock(&self.shared.state).threshold)
    }

    fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        let mut state = lock(&self.shared.state);
        state.threshold = bytes;
        let keep = bytes.max(state.used);
        state.release_above(keep);
        Ok(())
    }

    fn trim(&self, keep_bytes: u64) -> Result<()> {
        lock(&self.shared.state).release_above(keep_bytes);
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

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_are_powers_of_two_then_whole_mebibytes() {
        let mib = 1 << 20;
        for (len, class) in [
            (0, 0),
            (1, 512),
            (512, 512),
            (513, 1024),
            (1000, 1024),
            (mib, mib),
            (mib + 1, 2 * mib),
            (3 * mib + mib / 2, 4 * mib),
        ] {
            assert_eq!(size_class(len), Some(class), "len {len}");
        }
        assert_eq!(size_class(usize::MAX), None);
    }
}
