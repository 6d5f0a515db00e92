//! Memory pools: the interface every backend's pool implements, written once, and the rules
//! shared by all of them (out-of-memory recovery, the place's registry of live pools).
//!
//! A pool is the memory behind a place's stream-ordered buffers. Every place whose
//! `Capabilities::memory_pools` is on has a default pool ([`DeviceBackend::default_pool`], the
//! one `alloc` takes from) and makes new ones ([`DeviceBackend::new_pool`]); a stream takes a
//! buffer from a given pool with [`DeviceStream::alloc_from`]. Where the capability is off the
//! three answer `Error::Unsupported`; nothing about pools is a silent no-op.
//!
//! # Rules every pool obeys
//! * **Stream order.** A buffer freed (dropped) while queued work uses it returns its memory to
//!   the pool only after that work; memory that returned is handed out again to any stream. The
//!   return may follow the work's completion by a moment (plug-in places return blocks from
//!   devstream's reaper thread), so statistics read right after `synchronize` may still count
//!   a buffer dropped before it.
//! * **Statistics** ([`PoolStats`]): `used_bytes` is the memory of live buffers (as the pool
//!   rounds them), `reserved_bytes` what the pool holds from the system (used plus cached),
//!   `peak_*` their high-water marks since creation or [`DevicePool::reset_peak`], `allocations`
//!   the number of live buffers.
//! * **Release threshold** (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`'s meaning). Once the work that
//!   freed memory has drained, the pool holds at most `release_threshold` bytes reserved, or what
//!   its live buffers occupy where that is more (native pools reserve in chunks of their
//!   granularity: a live buffer occupies its whole chunk). Native pools (CUDA, HIP) release at
//!   synchronisation points, so a caller reads the bound after synchronizing the streams that
//!   freed memory.
//! * **Trim** (`cuMemPoolTrimTo`'s meaning). [`DevicePool::trim`]`(keep)` returns cached memory
//!   until at most `keep` bytes are reserved or nothing cached is left; live buffers are never
//!   touched.
//! * **Out of memory** ([`alloc_retrying`], the one implementation every backend calls): an
//!   allocation that fails for lack of memory trims every live devstream pool of the place to
//!   zero cached bytes and tries once more; if that fails too, the answer is
//!   `Error::OutOfMemory` carrying the size asked and the pool's statistics at that moment. The
//!   pool (and the process) goes on working.
//!
//! ```
//! use devstream_core::mempool::{PoolOptions, PoolStats};
//! let options = PoolOptions { release_threshold: 64 << 20, ..Default::default() };
//! assert_eq!((options.release_threshold, options.max_size), (64 << 20, 0));
//! assert_eq!(PoolStats::default().used_bytes, 0);
//! ```
//!
//! [`DeviceBackend::default_pool`]: crate::DeviceBackend::default_pool
//! [`DeviceBackend::new_pool`]: crate::DeviceBackend::new_pool
//! [`DeviceStream::alloc_from`]: crate::DeviceStream::alloc_from

use crate::{Error, Place, Result};
use std::any::Any;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, Weak};

/// What a pool holds, in bytes, and how many buffers it has handed out and not had back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PoolStats {
    /// Memory of live buffers (as the pool rounds them).
    pub used_bytes: u64,
    /// Memory the pool holds from the system: `used_bytes` plus what it caches for reuse.
    pub reserved_bytes: u64,
    /// The highest `used_bytes` since the pool was made or its peaks were reset.
    pub peak_used_bytes: u64,
    /// The highest `reserved_bytes` since the pool was made or its peaks were reset.
    pub peak_reserved_bytes: u64,
    /// Live buffers taken from the pool. Zero where the runtime does not count them (native
    /// pools report bytes only; devstream counts the buffers it took from them).
    pub allocations: u64,
}

/// How a new pool behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PoolOptions {
    /// Bytes the pool may keep reserved (live buffers' memory included; more only while live
    /// buffers occupy more) once the work that freed memory has drained (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`). `0` (the default, as CUDA's)
    /// returns freed memory to the system at the next synchronisation point; `u64::MAX` keeps
    /// what is freed for reuse (devstream's own caching pools still free cold cached blocks
    /// beyond their working set before they grow: see [`CacheState`]).
    pub release_threshold: u64,
    /// The most memory the pool may reserve, in bytes; `0` (the default) sets no limit beyond
    /// the device's (`CUmemPoolProps::maxSize`, which needs CUDA 12.2 or ROCm 6: older runtimes
    /// refuse a non-zero value when the pool is made). An allocation that would pass it runs out
    /// of memory like one the device cannot serve: the place's pools are trimmed and it is
    /// retried once.
    pub max_size: u64,
}

/// A memory pool of one place, type-erased: every backend's pool implements it, and the facade's
/// `MemoryPool` is an `Arc<dyn DevicePool>`.
pub trait DevicePool: Debug + Send + Sync + Any {
    /// The pool's place.
    fn place(&self) -> &Place;
    /// A process-unique id (see [`crate::next_id`]).
    fn id(&self) -> u64;
    /// The pool's statistics now.
    fn stats(&self) -> Result<PoolStats>;
    /// Sets both peaks to the current values.
    fn reset_peak(&self) -> Result<()>;
    /// The release threshold in bytes (see [`PoolOptions::release_threshold`]).
    fn release_threshold(&self) -> Result<u64>;
    /// Sets the release threshold: reserved memory beyond it is released once the work that
    /// freed it has drained.
    fn set_release_threshold(&self, bytes: u64) -> Result<()>;
    /// Returns cached memory to the system until at most `keep_bytes` are reserved or nothing
    /// cached is left (live buffers are never touched).
    fn trim(&self, keep_bytes: u64) -> Result<()>;
}

/// `pool` as the backend's own pool type `P`, for a stream of `here`: another backend's pool, or
/// a pool of another place, answers `Error::PlaceMismatch` naming `op`.
///
/// ```
/// use devstream_core::mempool::downcast;
/// # use devstream_core::mempool::*;
/// # use devstream_core::*;
/// # #[derive(Debug)] struct Mine(Place);
/// # impl DevicePool for Mine {
/// #   fn place(&self) -> &Place { &self.0 } fn id(&self) -> u64 { 1 }
/// #   fn stats(&self) -> Result<PoolStats> { Ok(PoolStats::default()) }
/// #   fn reset_peak(&self) -> Result<()> { Ok(()) }
/// #   fn release_threshold(&self) -> Result<u64> { Ok(0) }
/// #   fn set_release_threshold(&self, _: u64) -> Result<()> { Ok(()) }
/// #   fn trim(&self, _: u64) -> Result<()> { Ok(()) } }
/// let pool = Mine(Place::Cpu);
/// assert!(downcast::<Mine>(&pool, "alloc_from", &Place::Cpu).is_ok());
/// assert!(matches!(
///     downcast::<Mine>(&pool, "alloc_from", &Place::Cuda(0)),
///     Err(Error::PlaceMismatch { .. })
/// ));
/// ```
pub fn downcast<'a, P: DevicePool>(
    pool: &'a dyn DevicePool,
    op: &'static str,
    here: &Place,
) -> Result<&'a P> {
    let any: &dyn Any = pool;
    match any.downcast_ref::<P>() {
        Some(own) if own.place() == here => Ok(own),
        _ => Err(Error::mismatch(op, here, pool.place())),
    }
}

/// Live pools, each under its place: what an out-of-memory retry trims.
static LIVE_POOLS: Mutex<Vec<Weak<dyn DevicePool>>> = Mutex::new(Vec::new());

/// Registers `pool` so that an allocation of its place that runs out of memory trims it before
/// retrying. Every backend registers each pool it makes (default pools once); the registry
/// holds it weakly, so a dropped pool leaves it.
pub fn register(pool: &Arc<dyn DevicePool>) {
    let mut live = crate::sync::lock(&LIVE_POOLS);
    live.retain(|weak| weak.strong_count() > 0);
    live.push(Arc::downgrade(pool));
}

/// Trims every live registered pool of `place` to zero cached bytes (errors of individual pools
/// are ignored: a pool that cannot trim keeps its memory, and the retry decides).
pub fn trim_place(place: &Place) {
    let pools: Vec<Arc<dyn DevicePool>> = crate::sync::lock(&LIVE_POOLS)
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|pool| pool.place() == place)
        .collect();
    for pool in pools {
        let _ = pool.trim(0);
    }
}

/// Allocates `len` bytes from `pool` with `attempt`, the out-of-memory rule every backend
/// shares: an `Error::OutOfMemory` from the first attempt trims every live pool of the place
/// ([`trim_place`]) and tries once more; a second `OutOfMemory` is answered as
/// `Error::OutOfMemory { bytes: len, stats: Some(pool's stats), .. }`. Other errors pass as
/// they are.
///
/// ```
/// use devstream_core::mempool::*;
/// # use devstream_core::*;
/// # #[derive(Debug)] struct Empty;
/// # impl DevicePool for Empty {
/// #   fn place(&self) -> &Place { &Place::Cpu } fn id(&self) -> u64 { 1 }
/// #   fn stats(&self) -> Result<PoolStats> { Ok(PoolStats::default()) }
/// #   fn reset_peak(&self) -> Result<()> { Ok(()) }
/// #   fn release_threshold(&self) -> Result<u64> { Ok(0) }
/// #   fn set_release_threshold(&self, _: u64) -> Result<()> { Ok(()) }
/// #   fn trim(&self, _: u64) -> Result<()> { Ok(()) } }
/// let mut tries = 0;
/// let r: Result<()> = alloc_retrying(&Empty, 1 << 60, || {
///     tries += 1;
///     Err(Error::out_of_memory(&Place::Cpu, 1 << 60))
/// });
/// assert_eq!(tries, 2);
/// assert!(matches!(r, Err(Error::OutOfMemory { stats: Some(_), .. })));
/// ```
pub fn alloc_retrying<T>(
    pool: &dyn DevicePool,
    len: usize,
    mut attempt: impl FnMut() -> Result<T>,
) -> Result<T> {
    match attempt() {
        Err(Error::OutOfMemory { .. }) => {}
        other => return other,
    }
    trim_place(pool.place());
    match attempt() {
        Err(Error::OutOfMemory { place, .. }) => Err(Error::OutOfMemory {
            place,
            bytes: len,
            stats: pool.stats().ok(),
        }),
        other => other,
    }
}

/// Classes are powers of two up to this size, whole multiples of it above.
const LARGE_CLASS: usize = 1 << 20;
/// The smallest class.
const SMALLEST_CLASS: usize = 512;
/// A cached block that has waited this many hand-outs (of any block) since it was cached
/// without being taken is cold: the first to go when the pool must grow (see
/// [`CacheState::make_room`]).
const COLD_AFTER: u64 = 8;
/// The working set a caching pool sizes its cache to is the most its live buffers used at once
/// during the current and the previous period of this many hand-outs (see
/// [`CacheState::make_room`]): a burst long past stops holding cached memory.
const WORKING_SET_PERIOD: u64 = 512;

/// The block size a caching pool gives a buffer of `len` bytes: 0 for 0 (no block), powers of
/// two from 512 bytes up to 1 MiB, whole MiB above; `None` where it cannot be described.
///
/// ```
/// use devstream_core::mempool::size_class;
/// assert_eq!(size_class(1000), Some(1024));
/// assert_eq!(size_class((1 << 20) + 1), Some(2 << 20));
/// assert_eq!(size_class(usize::MAX), None);
/// ```
pub fn size_class(len: usize) -> Option<usize> {
    if len == 0 {
        Some(0)
    } else if len <= LARGE_CLASS {
        Some(len.max(SMALLEST_CLASS).next_power_of_two())
    } else {
        len.checked_next_multiple_of(LARGE_CLASS)
    }
}

/// The largest cached block that may serve a buffer of size class `class`: the class itself up
/// to 1 MiB (powers of two: the next class up would double the memory), a quarter more above
/// (whole MiB: a 37 MiB block serves a 36 MiB request, a 48 MiB block does not). A caching pool
/// hands out the smallest cached block between `class` and this bound, so a pool that has cached
/// blocks of many nearby large sizes serves new sizes from them instead of growing.
///
/// ```
/// use devstream_core::mempool::fit_limit;
/// assert_eq!(fit_limit(4096), 4096);
/// assert_eq!(fit_limit(36 << 20), 45 << 20);
/// ```
pub fn fit_limit(class: usize) -> usize {
    if class <= LARGE_CLASS {
        class
    } else {
        class.saturating_add(class / 4)
    }
}

/// A block a caching pool hands out for a buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Taken<B> {
    /// The block.
    pub block: B,
    /// The block's size class: at least the class asked for, at most its [`fit_limit`]. The
    /// buffer counts as this many bytes used, and gives the block back under this class.
    pub class: usize,
    /// Whether the block was cached (its contents are what its last buffer left); `false`: new
    /// from the system.
    pub reused: bool,
}

/// A cached block and the hand-out count when it was cached (see [`COLD_AFTER`]).
#[derive(Debug)]
struct Cached<B> {
    block: B,
    since: u64,
}

/// The bookkeeping of a caching pool that devstream keeps itself (the CPU place's, the plug-in
/// places', wgpu's), written once: free blocks `B` by size class, used and reserved bytes, their
/// peaks, live buffers, the release threshold and the size limit. It holds no lock and makes no
/// system call: its owner keeps it under a lock, and the blocks its methods hand back are the
/// owner's to free (after letting the lock go).
///
/// Reuse. A request of size class `c` takes the smallest cached block between `c` and
/// [`fit_limit`]`(c)` (best fit; exact classes up to 1 MiB). Blocks are whole (a block is one
/// system allocation, which host memory and wgpu buffers cannot split), so best fit alone leaves
/// blocks that fit no later request cached forever where a workload's sizes wander; so a pool
/// that must make a new block first frees cold cached blocks (cached and passed over for 8
/// hand-outs), largest first, until reserved memory with the new block stays within a quarter
/// above its working set: the most its live buffers used at once over the last 512 to 1024
/// hand-outs, the new one counted
/// ([`make_room`](Self::make_room)). Blocks cached recently stay, so a program that alternates
/// between a few sizes keeps reusing them; a burst of memory long past (buffers held by work
/// that the host ran far ahead of) stops keeping the cache large once the pool grows again.
///
/// Invariants: `used` is the sum of the classes of blocks handed out and not given back,
/// `reserved` is `used` plus the classes of the cached blocks, the peaks cover their values,
/// `recent_most` covers the values `used` had in the current period, and after
/// [`give_back`](Self::give_back) `reserved ≤ max(threshold, used)`. The byte counts
/// saturate rather than overflow: a plug-in may answer absurd sizes as allocated.
#[derive(Debug)]
pub struct CacheState<B> {
    free: std::collections::BTreeMap<usize, Vec<Cached<B>>>,
    used: u64,
    reserved: u64,
    peak_used: u64,
    peak_reserved: u64,
    /// The highest `used` in the current period of [`WORKING_SET_PERIOD`] hand-outs.
    recent_most: u64,
    /// The highest `used` in the period before it.
    earlier_most: u64,
    /// Blocks handed out so far, cached or new: the clock of [`COLD_AFTER`] and of the
    /// periods.
    handed_out: u64,
    allocations: u64,
    threshold: u64,
    max_size: u64,
}

impl<B> CacheState<B> {
    /// Empty, with `options`' threshold and size limit.
    pub fn new(options: PoolOptions) -> Self {
        CacheState {
            free: std::collections::BTreeMap::new(),
            used: 0,
            reserved: 0,
            peak_used: 0,
            peak_reserved: 0,
            recent_most: 0,
            earlier_most: 0,
            handed_out: 0,
            allocations: 0,
            threshold: options.release_threshold,
            max_size: options.max_size,
        }
    }

    /// The smallest cached block that may serve a buffer of size class `class` (between
    /// `class` and [`fit_limit`]`(class)`), now counted as a live buffer's of the block's class.
    pub fn take_cached(&mut self, class: usize) -> Option<Taken<B>> {
        // A list emptied by a take stays (its allocation is reused when a block of its class
        // comes back); releases remove empty lists.
        let (found, cached) = self
            .free
            .range_mut(class..=fit_limit(class))
            .find_map(|(&found, list)| Some((found, list.pop()?)))?;
        self.note_taken(found);
        Some(Taken {
            block: cached.block,
            class: found,
            reused: true,
        })
    }

    /// The cold cached blocks to free before a new block of `class` bytes is made, largest
    /// first, so that reserved memory with the new block stays within a quarter above the
    /// working set, the new block counted (as far as cold blocks allow). They no longer count as
    /// reserved. See the type's documentation.
    pub fn make_room(&mut self, class: usize) -> Vec<B> {
        let class = class as u64;
        let most = self
            .recent_most
            .max(self.earlier_most)
            .max(self.used.saturating_add(class));
        let bound = most.saturating_add(most / 4);
        let mut out = Vec::new();
        if self.reserved.saturating_add(class) <= bound {
            return out;
        }
        let mut classes = self
            .free
            .keys()
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .into_iter();
        while self.reserved.saturating_add(class) > bound {
            let Some(size) = classes.next() else {
                break;
            };
            let Some(list) = self.free.get_mut(&size).filter(|_| size > 0) else {
                continue;
            };
            // Each list is in caching order: its cold blocks come first.
            let cold = list.partition_point(|c| self.handed_out - c.since >= COLD_AFTER);
            let excess = self.reserved.saturating_add(class) - bound;
            let wanted = excess.div_ceil(size as u64).min(cold as u64) as usize;
            out.extend(list.drain(..wanted).map(|c| c.block));
            self.reserved = self
                .reserved
                .saturating_sub((wanted as u64).saturating_mul(size as u64));
            if list.is_empty() {
                self.free.remove(&size);
            }
        }
        out
    }

    /// Whether a new block of `class` bytes keeps `reserved` within the size limit.
    pub fn admits(&self, class: usize) -> bool {
        self.max_size == 0 || self.reserved.saturating_add(class as u64) <= self.max_size
    }

    /// Counts a new block of `class` bytes, just obtained from the system, as reserved and as a
    /// live buffer's (`class` 0: a buffer of 0 bytes, which has no block).
    pub fn add_new(&mut self, class: usize) {
        self.reserved = self.reserved.saturating_add(class as u64);
        self.note_taken(class);
    }

    /// Counts a buffer of `class` bytes as live.
    fn note_taken(&mut self, class: usize) {
        self.used = self.used.saturating_add(class as u64);
        self.allocations += 1;
        self.handed_out += 1;
        if self.handed_out.is_multiple_of(WORKING_SET_PERIOD) {
            self.earlier_most = self.recent_most;
            self.recent_most = 0;
        }
        self.peak_used = self.peak_used.max(self.used);
        self.recent_most = self.recent_most.max(self.used);
        self.peak_reserved = self.peak_reserved.max(self.reserved);
    }

    /// Takes back the block of a buffer whose work is all complete (`None` for a buffer of 0
    /// bytes), caches it, and returns the blocks to free so that at most
    /// `max(threshold, used)` bytes stay reserved.
    pub fn give_back(&mut self, class: usize, block: Option<B>) -> Vec<B> {
        self.give_back_cached(class, block);
        self.release_to_threshold()
    }

    /// Takes back and caches the block of a buffer whose work is all complete, releasing
    /// nothing: for a pool that applies its threshold at synchronisation points
    /// ([`release_to_threshold`](Self::release_to_threshold)), as native pools do.
    pub fn give_back_cached(&mut self, class: usize, block: Option<B>) {
        self.used = self.used.saturating_sub(class as u64);
        self.allocations -= 1;
        if let Some(block) = block {
            let since = self.handed_out;
            self.free
                .entry(class)
                .or_default()
                .push(Cached { block, since });
        }
    }

    /// The cached blocks to free so that at most `max(threshold, used)` bytes stay reserved.
    pub fn release_to_threshold(&mut self) -> Vec<B> {
        self.release_above(self.threshold.max(self.used))
    }

    /// The cached blocks to free, largest first, until at most `keep` bytes are reserved or
    /// nothing is cached (they no longer count as reserved).
    pub fn release_above(&mut self, keep: u64) -> Vec<B> {
        let mut out = Vec::new();
        while self.reserved > keep {
            let Some(mut entry) = self.free.last_entry() else {
                break;
            };
            let class = *entry.key();
            let cached = entry.get_mut().pop();
            if entry.get().is_empty() {
                entry.remove();
            }
            if let Some(cached) = cached {
                self.reserved = self.reserved.saturating_sub(class as u64);
                out.push(cached.block);
            }
        }
        out
    }

    /// The statistics now.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            used_bytes: self.used,
            reserved_bytes: self.reserved,
            peak_used_bytes: self.peak_used,
            peak_reserved_bytes: self.peak_reserved,
            allocations: self.allocations,
        }
    }

    /// Sets both peaks to the current values.
    pub fn reset_peak(&mut self) {
        self.peak_used = self.used;
        self.peak_reserved = self.reserved;
    }

    /// The release threshold.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// Sets the release threshold and returns the cached blocks above it, to free.
    pub fn set_threshold(&mut self, bytes: u64) -> Vec<B> {
        self.threshold = bytes;
        self.release_above(bytes.max(self.used))
    }
}

/// What the owner of a devstream-kept caching pool supplies: its place and how the blocks the
/// pool lets go are freed (host memory dropped, a plug-in's `device_memory_deallocate`).
pub trait BlockSource: Send + Sync + 'static {
    /// A block of memory.
    type Block: Send + 'static;
    /// The pool's place.
    fn place(&self) -> &Place;
    /// Frees blocks the pool lets go (called without the pool's lock).
    fn free(&self, blocks: Vec<Self::Block>);
}

/// The state a devstream-kept caching pool shares with its buffers (they hold it until their
/// block is back): the block source and the bookkeeping under one lock. Dropped (the pool handle
/// and every buffer gone), it frees what it still caches.
pub struct CachingPool<S: BlockSource> {
    /// Where blocks come from and go.
    pub source: S,
    cache: Mutex<CacheState<S::Block>>,
}

impl<S: BlockSource> CachingPool<S> {
    /// An empty pool over `source`.
    pub fn new(source: S, options: PoolOptions) -> Self {
        CachingPool {
            source,
            cache: Mutex::new(CacheState::new(options)),
        }
    }

    /// The bookkeeping, locked.
    pub fn cache(&self) -> std::sync::MutexGuard<'_, CacheState<S::Block>> {
        crate::sync::lock(&self.cache)
    }

    /// A block for a buffer of `len` bytes whose size class is `class`: the best-fitting cached
    /// block ([`CacheState::take_cached`]), else a new one from `make(class)`, made after the
    /// cold cached blocks [`CacheState::make_room`] names are freed. A new block that would take
    /// the reserved bytes past the size limit is `Error::OutOfMemory` for `len` bytes, before
    /// `make` is called.
    pub fn take(
        &self,
        class: usize,
        len: usize,
        make: impl FnOnce(usize) -> Result<S::Block>,
    ) -> Result<Taken<S::Block>> {
        let mut cache = self.cache();
        if let Some(taken) = cache.take_cached(class) {
            return Ok(taken);
        }
        let cold = cache.make_room(class);
        if !cold.is_empty() {
            drop(cache);
            self.source.free(cold);
            cache = self.cache();
        }
        // Under the lock from the limit check to the count, so that concurrent allocations
        // cannot pass the limit together.
        if !cache.admits(class) {
            return Err(Error::out_of_memory(self.source.place(), len));
        }
        let block = make(class)?;
        cache.add_new(class);
        Ok(Taken {
            block,
            class,
            reused: false,
        })
    }

    /// Takes back the block of a buffer whose work is complete (`None` for 0 bytes) and frees
    /// what the threshold releases.
    pub fn give_back(&self, class: usize, block: Option<S::Block>) {
        let released = self.cache().give_back(class, block);
        self.source.free(released);
    }

    /// Takes back and caches the block of a buffer whose work is complete, releasing nothing
    /// (see [`CacheState::give_back_cached`]).
    pub fn give_back_cached(&self, class: usize, block: Option<S::Block>) {
        self.cache().give_back_cached(class, block);
    }

    /// Frees what the release threshold releases now (a synchronisation point).
    pub fn release_to_threshold(&self) {
        let released = self.cache().release_to_threshold();
        self.source.free(released);
    }
}

impl<S: BlockSource> Drop for CachingPool<S> {
    fn drop(&mut self) {
        let released = self.cache().release_above(0);
        self.source.free(released);
    }
}

impl<S: BlockSource> std::fmt::Debug for CachingPool<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cache = self.cache();
        f.debug_struct("CachingPool")
            .field("place", self.source.place())
            .field("stats", &cache.stats())
            .field("threshold", &cache.threshold())
            .finish()
    }
}

/// A handle of a devstream-kept caching pool: the [`DevicePool`] a backend hands out. Dropped,
/// nobody can take from the pool any more: its cache goes, and blocks of buffers still alive are
/// freed as they come back.
pub struct CachingPoolHandle<S: BlockSource> {
    id: u64,
    /// The state its buffers share.
    pub shared: Arc<CachingPool<S>>,
}

impl<S: BlockSource> CachingPoolHandle<S> {
    /// A new pool over `source`.
    pub fn new(source: S, options: PoolOptions) -> Self {
        CachingPoolHandle {
            id: crate::next_id(),
            shared: Arc::new(CachingPool::new(source, options)),
        }
    }
}

impl<S: BlockSource> Drop for CachingPoolHandle<S> {
    fn drop(&mut self) {
        let released = self.shared.cache().set_threshold(0);
        self.shared.source.free(released);
    }
}

impl<S: BlockSource> std::fmt::Debug for CachingPoolHandle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachingPoolHandle")
            .field("id", &self.id)
            .field("pool", &self.shared)
            .finish()
    }
}

impl<S: BlockSource> DevicePool for CachingPoolHandle<S> {
    fn place(&self) -> &Place {
        self.shared.source.place()
    }

    fn id(&self) -> u64 {
        self.id
    }

    fn stats(&self) -> Result<PoolStats> {
        Ok(self.shared.cache().stats())
    }

    fn reset_peak(&self) -> Result<()> {
        self.shared.cache().reset_peak();
        Ok(())
    }

    fn release_threshold(&self) -> Result<u64> {
        Ok(self.shared.cache().threshold())
    }

    fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        let released = self.shared.cache().set_threshold(bytes);
        self.shared.source.free(released);
        Ok(())
    }

    fn trim(&self, keep_bytes: u64) -> Result<()> {
        let released = self.shared.cache().release_above(keep_bytes);
        self.shared.source.free(released);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Device 0 of the custom device type `device_type`: a place of its own for each test, so
    /// that the pools one test registers are not among another's.
    fn custom_place(device_type: &str) -> Place {
        Place::Custom {
            device_type: device_type.into(),
            id: 0,
        }
    }

    /// A pool that caches `cached` bytes and fails allocations while it caches any.
    #[derive(Debug)]
    struct Caching {
        place: Place,
        cached: AtomicU64,
    }

    impl DevicePool for Caching {
        fn place(&self) -> &Place {
            &self.place
        }
        fn id(&self) -> u64 {
            0
        }
        fn stats(&self) -> Result<PoolStats> {
            let cached = self.cached.load(Ordering::SeqCst);
            Ok(PoolStats {
                reserved_bytes: cached,
                ..PoolStats::default()
            })
        }
        fn reset_peak(&self) -> Result<()> {
            Ok(())
        }
        fn release_threshold(&self) -> Result<u64> {
            Ok(0)
        }
        fn set_release_threshold(&self, _: u64) -> Result<()> {
            Ok(())
        }
        fn trim(&self, keep_bytes: u64) -> Result<()> {
            self.cached.fetch_min(keep_bytes, Ordering::SeqCst);
            Ok(())
        }
    }

    fn caching(place: Place, cached: u64) -> Arc<Caching> {
        Arc::new(Caching {
            place,
            cached: AtomicU64::new(cached),
        })
    }

    #[test]
    fn an_allocation_that_runs_out_trims_every_pool_of_its_place_and_succeeds_on_the_retry() {
        let place = custom_place("mempool_test_retry");
        let asked = caching(place.clone(), 100);
        let sibling = caching(place.clone(), 50);
        let elsewhere = caching(Place::Cuda(99), 70);
        for pool in [&asked, &sibling, &elsewhere] {
            register(&(pool.clone() as Arc<dyn DevicePool>));
        }
        let mut tries = 0;
        let got = alloc_retrying(&*asked, 8, || {
            tries += 1;
            if asked.cached.load(Ordering::SeqCst) + sibling.cached.load(Ordering::SeqCst) > 0 {
                Err(Error::out_of_memory(&place, 8))
            } else {
                Ok(tries)
            }
        });
        assert_eq!(got, Ok(2));
        assert_eq!(elsewhere.cached.load(Ordering::SeqCst), 70);
    }

    #[test]
    fn a_second_failure_is_out_of_memory_with_the_pools_stats_and_the_size_asked() {
        let place = custom_place("mempool_test_fail");
        let pool = caching(place.clone(), 0);
        let got: Result<()> = alloc_retrying(&*pool, 1 << 40, || {
            Err(Error::out_of_memory(&place, 1 << 40))
        });
        assert_eq!(
            got,
            Err(Error::OutOfMemory {
                place,
                bytes: 1 << 40,
                stats: Some(PoolStats::default()),
            })
        );
    }

    #[test]
    fn a_cache_keeps_its_invariants_through_takes_returns_and_trims() {
        let mut cache = CacheState::<usize>::new(PoolOptions {
            release_threshold: 2048,
            max_size: 4096,
        });
        assert!(cache.take_cached(1024).is_none());
        for _ in 0..3 {
            assert!(cache.admits(1024));
            cache.add_new(1024);
        }
        assert!(cache.admits(1024) && !cache.admits(2048));
        // 2048 used, 3072 reserved, threshold 2048: the block just back goes.
        assert_eq!(cache.give_back(1024, Some(1)), vec![1]);
        // 1024 used, 2048 reserved: within the threshold, cached.
        assert!(cache.give_back(1024, Some(2)).is_empty());
        assert_eq!(cache.take_cached(1024).map(|t| t.block), Some(2));
        assert!(cache.give_back(1024, Some(2)).is_empty());
        assert!(cache.give_back(1024, Some(3)).is_empty());
        let stats = cache.stats();
        assert_eq!((stats.used_bytes, stats.reserved_bytes), (0, 2048));
        assert_eq!(
            (stats.peak_used_bytes, stats.peak_reserved_bytes),
            (3072, 3072)
        );
        assert_eq!(stats.allocations, 0);
        cache.reset_peak();
        assert_eq!(cache.stats().peak_reserved_bytes, 2048);
        assert_eq!(cache.release_above(0).len(), 2);
        assert_eq!(cache.stats().reserved_bytes, 0);
    }

    #[test]
    fn a_cached_block_a_little_larger_serves_a_large_request() {
        let mut cache = CacheState::<&str>::new(PoolOptions {
            release_threshold: u64::MAX,
            max_size: 0,
        });
        let cached = size_class(37 << 20).unwrap();
        cache.add_new(cached);
        assert!(cache.give_back(cached, Some("37 MiB")).is_empty());
        let asked = size_class(36 << 20).unwrap();
        assert_eq!(
            cache.take_cached(asked),
            Some(Taken {
                block: "37 MiB",
                class: cached,
                reused: true
            }),
            "a cached 37 MiB block serves a 36 MiB request"
        );
        // The buffer counts as the block it got.
        let stats = cache.stats();
        assert_eq!(
            (stats.used_bytes, stats.reserved_bytes),
            (37 << 20, 37 << 20)
        );
        assert!(cache.give_back(cached, Some("37 MiB")).is_empty());
        // More than a quarter larger: not a fit; the smallest fit wins.
        let small = size_class(29 << 20).unwrap();
        assert!(cache.take_cached(small).is_none());
        cache.add_new(40 << 20);
        assert!(cache.give_back(40 << 20, Some("40 MiB")).is_empty());
        assert_eq!(cache.take_cached(asked).map(|t| t.block), Some("37 MiB"));
        // Up to 1 MiB, classes are exact: a 1 MiB block does not serve 512 KiB.
        cache.add_new(1 << 20);
        assert!(cache.give_back(1 << 20, Some("1 MiB")).is_empty());
        assert!(cache.take_cached(512 << 10).is_none());
    }

    impl CacheState<&'static str> {
        /// Takes a block of `class` from the cache, else counts a new one: its class.
        fn take(&mut self, class: usize) -> usize {
            match self.take_cached(class) {
                Some(taken) => taken.class,
                None => {
                    self.add_new(class);
                    class
                }
            }
        }
    }

    /// A cache with `blocks` (label, class) made and given back, in that order.
    fn cache_of(blocks: &[(&'static str, usize)]) -> CacheState<&'static str> {
        let mut cache = CacheState::new(PoolOptions {
            release_threshold: u64::MAX,
            max_size: 0,
        });
        for &(_, class) in blocks {
            cache.add_new(class);
        }
        for &(label, class) in blocks {
            assert!(cache.give_back(class, Some(label)).is_empty());
        }
        cache
    }

    #[test]
    fn a_pool_that_must_grow_first_frees_cold_blocks_largest_first() {
        const MIB: usize = 1 << 20;
        // 30 MiB used at most (10 + 20), all cached.
        let mut cache = cache_of(&[("10 MiB", 10 * MIB), ("20 MiB", 20 * MIB)]);
        // Blocks cached and passed over for COLD_AFTER hand-outs are cold.
        for _ in 0..COLD_AFTER {
            cache.add_new(0);
            assert!(cache.give_back(0, None).is_empty());
        }
        // 3 MiB more: 33 MiB reserved is within 30 + 30/4.
        assert!(cache.make_room(3 * MIB).is_empty());
        cache.add_new(3 * MIB);
        // 8 MiB more: 41 MiB would pass 37.5; the 20 MiB block goes first, which is enough.
        assert_eq!(cache.make_room(8 * MIB), vec!["20 MiB"]);
        cache.add_new(8 * MIB);
        let stats = cache.stats();
        assert_eq!(
            (stats.used_bytes, stats.reserved_bytes),
            (11 << 20, 21 << 20)
        );
    }

    #[test]
    fn a_burst_long_past_stops_holding_cached_memory() {
        const MIB: usize = 1 << 20;
        // A burst: 64 MiB live at once, then cached.
        let mut cache = cache_of(&[("64 MiB", 64 * MIB)]);
        // Two periods of buffers of 1 MiB, one at a time: the burst leaves the working set.
        for _ in 0..2 * WORKING_SET_PERIOD {
            let taken = cache.take(MIB);
            assert!(cache.give_back(taken, Some("1 MiB")).is_empty());
        }
        assert_eq!(cache.stats().reserved_bytes, 65 << 20);
        // 2 MiB more: the cold 64 MiB block goes.
        assert_eq!(cache.make_room(2 * MIB), vec!["64 MiB"]);
    }

    #[test]
    fn blocks_cached_recently_stay_when_the_pool_grows() {
        const MIB: usize = 1 << 20;
        // A program alternating between two sizes never both live keeps both cached.
        let mut cache = cache_of(&[("2 MiB", 2 * MIB)]);
        assert!(cache.make_room(4 * MIB).is_empty());
        cache.add_new(4 * MIB);
        assert!(cache.give_back(4 * MIB, Some("4 MiB")).is_empty());
        for _ in 0..2 * COLD_AFTER {
            for class in [2 * MIB, 4 * MIB] {
                let taken = cache.take_cached(class).expect("cached");
                assert!(cache.give_back(taken.class, Some(taken.block)).is_empty());
            }
        }
        assert_eq!(cache.stats().reserved_bytes, 6 << 20);
    }

    #[test]
    fn other_errors_are_not_retried() {
        let pool = caching(Place::Cpu, 0);
        let mut tries = 0;
        let got: Result<()> = alloc_retrying(&*pool, 1, || {
            tries += 1;
            Err(Error::InvalidArgument("no".into()))
        });
        assert!(matches!(got, Err(Error::InvalidArgument(_))));
        assert_eq!(tries, 1);
    }
}
