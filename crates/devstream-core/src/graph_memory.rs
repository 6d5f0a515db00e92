//! Graph-private memory: the pool behind buffers allocated while a stream captures, written once
//! for every place whose `Capabilities::capture_alloc` is on.
//!
//! # Rules every place obeys
//! * **Private to one capture.** `alloc` and `alloc_from` on a capturing stream (the stream that
//!   began the capture or one that joined it) take memory from a pool of that capture's own (the
//!   pool given to `alloc_from` is only checked for its place). The resulting graph owns the
//!   pool ([`crate::DeviceGraph::memory_pool`]); while the capture runs,
//!   [`crate::DeviceStream::capture_memory_pool`] shows it.
//! * **The same memory on every replay.** The memory a buffer got during the capture is the
//!   memory the graph's replays use: its address is fixed when it is allocated.
//! * **Reuse inside the capture.** A buffer dropped during the capture gives its memory back to
//!   the capture's pool; a later allocation of the same size class in the same capture takes it,
//!   and the backend orders the allocating stream's next captured operation after every
//!   captured operation submitted before the drop (on every stream of the capture), so that on
//!   replay the new buffer's work on that stream, and work ordered after it, never overlaps the
//!   old one's. As for any stream-ordered allocation, another stream uses the new buffer only
//!   after it waits for the allocating stream (an event recorded there after the allocation,
//!   or `wait_stream`).
//! * **Lifetime.** Once the capture ends nothing is reused any more: every block stays with the
//!   graph and with the buffers that still hold it, and goes back to the system when the last
//!   of them (the graph, its clones, the buffers) is dropped. A buffer that outlives its graph
//!   stays valid memory. A capture that fails or is abandoned gives back what its work and its
//!   buffers no longer hold the same way.
//! * **One replay at a time.** Launches of a graph that owns private memory run one after
//!   another, in launch order, whatever streams they are launched on (CUDA's rule for one
//!   executable graph): concurrent replays never share the memory. Launching such a graph into
//!   another capture answers `Error::Unsupported`.
//! * **Contents.** At the start of a replay a graph buffer holds whatever the previous replay
//!   (or, for reused memory, the buffer that had it before) left there; the graph must write
//!   before it reads. Between replays the host may read a graph buffer once the replay is
//!   complete (a copy on any stream ordered after it); what it writes there is overwritten or
//!   read by the next replay.
//!
//! [`GraphMemory`] is the bookkeeping of such a pool and its [`DevicePool`] face: statistics
//! (`used_bytes` is `reserved_bytes` less what the capture caches for reuse, `allocations` the
//! live buffers), peaks and [`DevicePool::reset_peak`]. A graph's memory is held for its
//! replays: [`DevicePool::set_release_threshold`] and [`DevicePool::trim`] answer
//! `Error::Unsupported`, and [`DevicePool::release_threshold`] reads `u64::MAX`.

use crate::mempool::{DevicePool, PoolStats};
use crate::{Error, Place, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;

/// The bookkeeping of one capture's private pool: blocks `B` (of a size class, in bytes) the
/// capture caches for reuse, each with what a reuse must be ordered after (`A`: the backend's
/// record of the captured work before the drop), and the statistics.
///
/// Invariants: `cached` is the sum of the classes in the cache, `cached ≤ reserved`, the cache
/// is empty once the capture has ended.
///
/// ```
/// use devstream_core::graph_memory::GraphMemory;
/// use devstream_core::{DevicePool, Place};
/// let memory = GraphMemory::<&str, u32>::new(Place::Cpu);
/// memory.created(1024);
/// assert_eq!(memory.dropped(1024, "block", Some(7)), None); // cached: reusable in the capture
/// assert_eq!(memory.stats()?.used_bytes, 0);
/// assert_eq!(memory.take(1024), Some(("block", 7)));
/// assert_eq!(memory.stats()?.used_bytes, 1024);
/// assert!(memory.end_capture().is_empty());
/// memory.released(1024);
/// assert_eq!(memory.stats()?.reserved_bytes, 0);
/// # Ok::<(), devstream_core::Error>(())
/// ```
pub struct GraphMemory<B, A> {
    id: u64,
    place: Place,
    state: Mutex<State<B, A>>,
}

struct State<B, A> {
    capturing: bool,
    cache: BTreeMap<usize, Vec<(B, A)>>,
    reserved: u64,
    cached: u64,
    peak_used: u64,
    peak_reserved: u64,
    allocations: u64,
}

impl<B, A> State<B, A> {
    fn note_taken(&mut self) {
        self.allocations += 1;
        self.peak_used = self.peak_used.max(self.reserved - self.cached);
        self.peak_reserved = self.peak_reserved.max(self.reserved);
    }
}

impl<B, A> GraphMemory<B, A> {
    /// An empty pool of `place`, for a capture that begins now.
    pub fn new(place: Place) -> Self {
        GraphMemory {
            id: crate::next_id(),
            place,
            state: Mutex::new(State {
                capturing: true,
                cache: BTreeMap::new(),
                reserved: 0,
                cached: 0,
                peak_used: 0,
                peak_reserved: 0,
                allocations: 0,
            }),
        }
    }

    /// A cached block of `class` bytes and what its reuse is ordered after, now a live
    /// buffer's; `None` when none is cached or the capture has ended.
    pub fn take(&self, class: usize) -> Option<(B, A)> {
        let mut state = crate::sync::lock(&self.state);
        if !state.capturing {
            return None;
        }
        let list = state.cache.get_mut(&class)?;
        let entry = list.pop()?;
        if list.is_empty() {
            state.cache.remove(&class);
        }
        state.cached -= class as u64;
        state.note_taken();
        Some(entry)
    }

    /// Counts a new block of `class` bytes (0: a buffer of 0 bytes, which has no block) as
    /// reserved and as a live buffer's.
    pub fn created(&self, class: usize) {
        let mut state = crate::sync::lock(&self.state);
        state.reserved += class as u64;
        state.note_taken();
    }

    /// A buffer of `class` bytes over `block` was dropped. While the capture runs and `after`
    /// is given, the block is cached for reuse after `after` and `None` comes back; otherwise
    /// the block comes back, for the caller to let go of outside any lock (it may be the last
    /// holder of the memory).
    pub fn dropped(&self, class: usize, block: B, after: Option<A>) -> Option<B> {
        let mut state = crate::sync::lock(&self.state);
        state.allocations -= 1;
        match after {
            Some(after) if state.capturing && class > 0 => {
                state.cache.entry(class).or_default().push((block, after));
                state.cached += class as u64;
                None
            }
            _ => Some(block),
        }
    }

    /// The memory of a block of `class` bytes went back to the system (its last holder let go).
    pub fn released(&self, class: usize) {
        let mut state = crate::sync::lock(&self.state);
        state.reserved -= class as u64;
    }

    /// The capture ended (with a graph or not): nothing is reused any more. Returns the cached
    /// blocks with what their reuse would have followed, for the caller to let go of outside
    /// any lock.
    ///
    /// Cached blocks count as used from now on (those the graph's work holds stay, the others
    /// are released as the caller lets go of them), so the peak of used bytes rises to what is
    /// reserved now: it never reads below `used_bytes`.
    pub fn end_capture(&self) -> Vec<(B, A)> {
        let mut state = crate::sync::lock(&self.state);
        state.capturing = false;
        state.cached = 0;
        state.peak_used = state.peak_used.max(state.reserved);
        std::mem::take(&mut state.cache)
            .into_values()
            .flatten()
            .collect()
    }
}

impl<B, A> fmt::Debug for GraphMemory<B, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = crate::sync::lock(&self.state);
        f.debug_struct("GraphMemory")
            .field("id", &self.id)
            .field("place", &self.place)
            .field("capturing", &state.capturing)
            .field("reserved", &state.reserved)
            .field("cached", &state.cached)
            .finish()
    }
}

impl<B: Send + 'static, A: Send + 'static> DevicePool for GraphMemory<B, A> {
    fn place(&self) -> &Place {
        &self.place
    }

    fn id(&self) -> u64 {
        self.id
    }

    fn stats(&self) -> Result<PoolStats> {
        let state = crate::sync::lock(&self.state);
        Ok(PoolStats {
            used_bytes: state.reserved - state.cached,
            reserved_bytes: state.reserved,
            peak_used_bytes: state.peak_used,
            peak_reserved_bytes: state.peak_reserved,
            allocations: state.allocations,
        })
    }

    fn reset_peak(&self) -> Result<()> {
        let mut state = crate::sync::lock(&self.state);
        state.peak_used = state.reserved - state.cached;
        state.peak_reserved = state.reserved;
        Ok(())
    }

    fn release_threshold(&self) -> Result<u64> {
        Ok(u64::MAX)
    }

    fn set_release_threshold(&self, _bytes: u64) -> Result<()> {
        Err(Error::unsupported(
            "set_release_threshold of a graph's memory pool",
            &self.place,
        ))
    }

    fn trim(&self, _keep_bytes: u64) -> Result<()> {
        Err(Error::unsupported(
            "trim of a graph's memory pool",
            &self.place,
        ))
    }
}

/// The answer of `alloc` and `alloc_from` on a capturing stream of a place whose
/// `capture_alloc` capability is off: `Error::Unsupported` naming "alloc during capture"; the
/// capture goes on.
pub fn unsupported_in_capture(place: &Place) -> Error {
    Error::unsupported("alloc during capture", place)
}

/// The error for `alloc_from` with a graph's pool outside its capture: a graph's memory is
/// taken only by the capture that made it.
pub fn not_for_alloc_from(place: &Place) -> Error {
    Error::InvalidArgument(format!(
        "alloc_from: a graph's memory pool ({place}) serves only allocations during its own \
         capture"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_follow_creations_drops_reuses_and_releases() {
        let memory = GraphMemory::<u32, ()>::new(Place::Cpu);
        memory.created(2048);
        memory.created(1024);
        assert_eq!(memory.dropped(2048, 1, Some(())), None);
        let stats = memory.stats().unwrap();
        assert_eq!(
            (stats.used_bytes, stats.reserved_bytes, stats.allocations),
            (1024, 3072, 1)
        );
        assert_eq!(memory.take(1024), None, "another class is not reused");
        assert_eq!(memory.take(2048), Some((1, ())));
        assert_eq!(memory.stats().unwrap().used_bytes, 3072);
        assert_eq!(memory.dropped(2048, 1, Some(())), None);
        memory.reset_peak().unwrap();
        assert_eq!(memory.stats().unwrap().peak_used_bytes, 1024);
        assert_eq!(memory.end_capture(), vec![(1, ())]);
        let ended = memory.stats().unwrap();
        assert_eq!(
            (ended.used_bytes, ended.peak_used_bytes),
            (3072, 3072),
            "a block cached when the capture ends counts as used, in the peak too"
        );
        assert_eq!(
            memory.take(2048),
            None,
            "nothing is reused after the capture"
        );
        assert_eq!(memory.dropped(1024, 2, Some(())), Some(2));
        memory.released(2048);
        memory.released(1024);
        let stats = memory.stats().unwrap();
        assert_eq!(
            stats,
            PoolStats {
                peak_used_bytes: 3072,
                peak_reserved_bytes: 3072,
                ..PoolStats::default()
            }
        );
        assert!(matches!(memory.trim(0), Err(Error::Unsupported { .. })));
    }
}
