//! The facade memory pool: [`MemoryPool`], one type over every backend's pool.
//!
//! The rules every pool obeys (stream order, statistics, release threshold, trim, out-of-memory
//! recovery) are written once, in `devstream_core::mempool`; `docs/MEMORY.md` is the guide.

use crate::registry::with_backend;
use crate::{DeviceBuffer, Graph, Stream};
use devstream_core::{DeviceBackend, DevicePool, Place, PoolOptions, PoolStats, Result};
use std::fmt;
use std::sync::Arc;

/// A memory pool of one place: the memory behind stream-ordered buffers, with statistics, a
/// release threshold and trim. Cheap to clone (a handle); buffers taken from it keep it alive.
///
/// Places whose `Capabilities::memory_pools` is off answer `Error::Unsupported` from
/// [`default_for`](MemoryPool::default_for), [`new`](MemoryPool::new) and
/// [`Stream::alloc_from`].
///
/// ```
/// use devstream::{MemoryPool, Place, PoolOptions, Stream};
/// let place = Place::Cpu;
/// let pool = MemoryPool::new(&place, PoolOptions { release_threshold: 1 << 20, ..Default::default() })?;
/// let stream = Stream::new(&place)?;
/// let buffer = stream.alloc_from(&pool, 4096)?;
/// assert_eq!(pool.stats()?.allocations, 1);
/// drop(buffer);
/// stream.synchronize()?;
/// assert_eq!(pool.stats()?.allocations, 0);
/// pool.trim(0)?;
/// assert_eq!(pool.stats()?.reserved_bytes, 0);
/// # Ok::<(), devstream::Error>(())
/// ```
#[derive(Clone)]
pub struct MemoryPool(Arc<dyn DevicePool>);

impl MemoryPool {
    /// The place's default pool: the one [`Stream::alloc`] takes from.
    pub fn default_for(place: &Place) -> Result<MemoryPool> {
        with_backend!(place, B => B::default_pool(place).map(MemoryPool))
    }

    /// A new pool of `place`.
    pub fn new(place: &Place, options: PoolOptions) -> Result<MemoryPool> {
        with_backend!(place, B => B::new_pool(place, options).map(MemoryPool))
    }

    /// The pool's place.
    pub fn place(&self) -> &Place {
        self.0.place()
    }

    /// A process-unique id.
    pub fn id(&self) -> u64 {
        self.0.id()
    }

    /// Used and reserved bytes, their peaks, and the live buffer count.
    pub fn stats(&self) -> Result<PoolStats> {
        self.0.stats()
    }

    /// Sets both peaks to the current values.
    pub fn reset_peak(&self) -> Result<()> {
        self.0.reset_peak()
    }

    /// The release threshold in bytes.
    pub fn release_threshold(&self) -> Result<u64> {
        self.0.release_threshold()
    }

    /// Sets the release threshold: once the work that freed memory has drained, the pool keeps
    /// at most this many bytes reserved (more only while live buffers occupy more).
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.0.set_release_threshold(bytes)
    }

    /// Returns cached memory until at most `keep_bytes` are reserved or nothing cached is left
    /// (live buffers are never touched).
    pub fn trim(&self, keep_bytes: u64) -> Result<()> {
        self.0.trim(keep_bytes)
    }

    /// The backend's pool, for code that knows its backend.
    pub fn as_device_pool(&self) -> &dyn DevicePool {
        &*self.0
    }
}

impl fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq for MemoryPool {
    fn eq(&self, other: &MemoryPool) -> bool {
        self.0.id() == other.0.id()
    }
}

impl Eq for MemoryPool {}

impl Stream {
    /// Device memory of `len` bytes from `pool`, for work on this stream; dropped, it returns
    /// to `pool` after the work that uses it. Out of memory: the place's pools are trimmed and
    /// the allocation retried once before `Error::OutOfMemory` (carrying the pool's statistics)
    /// is answered. A pool of another place answers `Error::PlaceMismatch`.
    pub fn alloc_from(&self, pool: &MemoryPool, len: usize) -> Result<DeviceBuffer> {
        let buffer = crate::stream::StreamApi::alloc_from(self, pool.as_device_pool(), len);
        #[cfg(feature = "trace")]
        if crate::trace::recorder::is_active() {
            // The timeline's counter track of the pool (sampled now, with this buffer).
            crate::trace::recorder::watch_pool(pool, None);
        }
        buffer
    }

    /// The private memory pool of the capture this stream takes part in: the pool [`alloc`]
    /// and [`alloc_from`](Stream::alloc_from) take from while the capture runs, which the
    /// resulting graph owns ([`Graph::memory_pool`]; `docs/MEMORY.md`, "Allocation inside a
    /// capture"). `Error::Capture` when the stream is not capturing; `Error::Unsupported` where
    /// the place's `capture_alloc` capability is off.
    ///
    /// [`alloc`]: Stream::alloc
    pub fn capture_memory_pool(&self) -> Result<MemoryPool> {
        crate::stream::StreamApi::capture_memory_pool(self).map(MemoryPool)
    }
}

impl Graph {
    /// The graph's private memory pool: the memory of the buffers allocated during its
    /// capture, held for its replays until the graph and those buffers are dropped. Its
    /// statistics work as every pool's; `trim` and `set_release_threshold` answer
    /// `Error::Unsupported`, and `alloc_from` with it outside its capture answers
    /// `Error::InvalidArgument`. `Error::Unsupported` where the place's `capture_alloc`
    /// capability is off.
    ///
    /// ```
    /// use devstream::{CaptureMode, Place, Stream};
    /// let stream = Stream::new(&Place::Cpu)?;
    /// stream.begin_capture(CaptureMode::ThreadLocal)?;
    /// let scratch = stream.alloc(4096)?; // graph-private memory
    /// stream.fill(&scratch, 0, 4096, 1)?;
    /// let graph = stream.end_capture()?;
    /// let pool = graph.memory_pool()?;
    /// assert_eq!(pool.stats()?.reserved_bytes, 4096);
    /// drop((graph, scratch));
    /// assert_eq!(pool.stats()?.reserved_bytes, 0);
    /// # Ok::<(), devstream::Error>(())
    /// ```
    pub fn memory_pool(&self) -> Result<MemoryPool> {
        crate::dispatch::GraphApi::memory_pool(self).map(MemoryPool)
    }
}
