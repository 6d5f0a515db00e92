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
//!   the pool only after that work; memory that returned is handed out again to any stream.
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
    /// everything for reuse.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

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
        let place = Place::Custom {
            device_type: "mempool_test_retry".into(),
            id: 0,
        };
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
        let place = Place::Custom {
            device_type: "mempool_test_fail".into(),
            id: 0,
        };
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
