//! Handle tables for the streams and events Paddle holds: a slab of slots indexed by the
//! handle's bits, each with a generation, plus a small per-thread cache of the objects a thread
//! used last.
//!
//! **What a handle is.** `tag << 60 | generation << 24 | index << 4`: never 0 (the tag is the
//! backend index + 1), a multiple of 16, never dereferenced. A handle is valid while its slot
//! is live with its generation; destroying the object clears the live bit, and the next object
//! put in the slot has the next generation (36 bits: a stale handle names another object only
//! after 2^36 reuses of its slot). Anything else Paddle passes (a destroyed handle, another
//! type's handle, garbage) decodes to a slot that is missing, dead or of another generation:
//! `None`, never a dereference.
//!
//! **Lookups.** The slot owns an `Arc` of the object. A lookup that misses the thread's cache
//! locks the slot (a lock bit in its state word, held for an `Arc` clone), checks the
//! generation and clones the `Arc` into the cache. A lookup that hits the cache only loads the
//! slot's state and compares: no lock, no reference count. The cache's `Arc` keeps the object
//! alive, so a destroy racing with a use on another thread is sound: the use works on an
//! object that is still allocated (it happens before the destroy), and the object is freed when
//! the last cache lets go of it: at that thread's next lookup in the same cache way (which finds
//! the slot dead and evicts it) or when the thread exits. The destroying thread evicts its own
//! entry at once, so a single-threaded host frees what it destroys at once.

use std::cell::{RefCell, RefMut, UnsafeCell};
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

#[cfg(not(target_pointer_width = "64"))]
compile_error!("devstream-paddle's handles need 64-bit pointers");

const INDEX_SHIFT: u32 = 4;
const INDEX_BITS: u32 = 20;
const GEN_SHIFT: u32 = INDEX_SHIFT + INDEX_BITS;
const GEN_BITS: u32 = 36;
const TAG_SHIFT: u32 = GEN_SHIFT + GEN_BITS;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNKS: usize = 1 << (INDEX_BITS - CHUNK_BITS);

/// Slot state: bit 0 is the slot's lock, bit 1 "live", bits 2.. the generation.
const LOCKED: u64 = 1;
const LIVE: u64 = 2;

/// The most objects of one kind alive at once in one table (2^20).
pub const CAPACITY: usize = CHUNKS * CHUNK;

struct Slot<T> {
    state: AtomicU64,
    /// Read and written only while holding the lock bit of `state`.
    value: UnsafeCell<Option<Arc<T>>>,
}

// SAFETY: `value` is only touched while holding the lock bit of `state` (a mutual exclusion
// between threads); the `Arc<T>` it holds is sent and shared as any `Arc<T>` with `T: Send +
// Sync`.
unsafe impl<T: Send + Sync> Sync for Slot<T> {}

impl<T> Slot<T> {
    fn new() -> Slot<T> {
        Slot {
            state: AtomicU64::new(0),
            value: UnsafeCell::new(None),
        }
    }

    /// Takes the slot's lock; answers the state (unlocked) it had.
    fn lock(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if state & LOCKED == 0
                && self
                    .state
                    .compare_exchange_weak(
                        state,
                        state | LOCKED,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            {
                return state;
            }
            // Held for an `Arc` clone or move only: spin briefly, then let the holder run.
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Releases the lock, leaving `state`.
    fn unlock(&self, state: u64) {
        self.state.store(state & !LOCKED, Ordering::Release);
    }

    /// Runs `f` on the value under the slot's lock; `f` answers the state to leave.
    fn with_locked<R>(&self, f: impl FnOnce(u64, &mut Option<Arc<T>>) -> (u64, R)) -> R {
        let state = self.lock();
        // SAFETY: the lock bit is held until `unlock` below, so this is the only access.
        let value = unsafe { &mut *self.value.get() };
        // A panic in `f` (none of the callers' closures panics) would leave the slot locked:
        // the entry point reports it, and the slot stays unusable, never unsound.
        let (next, result) = f(state, value);
        self.unlock(next);
        result
    }
}

/// Free slot indices and the next never-used one.
struct FreeList {
    indices: Vec<u32>,
    fresh: usize,
}

/// Decodes `handle` for a table with `tag` (already shifted).
#[inline(always)]
fn decode(tag: usize, handle: usize) -> Option<Decoded> {
    if handle & ((1 << INDEX_SHIFT) - 1) != 0 || handle & (0xf << TAG_SHIFT) != tag {
        return None;
    }
    let generation = ((handle >> GEN_SHIFT) as u64) & GEN_MASK;
    Some(Decoded {
        index: (handle >> INDEX_SHIFT) & INDEX_MASK,
        live_state: (generation << 2) | LIVE,
    })
}

/// The handle of slot `index` in (live) `state`, for a table with `tag`.
fn encode(tag: usize, index: usize, state: u64) -> usize {
    tag | (((state >> 2) as usize) << GEN_SHIFT) | (index << INDEX_SHIFT)
}

/// How many of these slot states are live.
fn live<'a>(states: impl Iterator<Item = &'a AtomicU64>) -> usize {
    states
        .filter(|state| state.load(Ordering::Acquire) & LIVE != 0)
        .count()
}

/// The slots of a table and its free list `F`: two words (`repr(C)`), the first chunk's
/// address first, so a lookup reads one word of the table for its slot.
#[repr(C)]
struct Slots<S, F> {
    /// Slots `0..CHUNK`, made with the table: one indirection to the slot of a handle.
    first: Box<[S; CHUNK]>,
    /// Chunk `c` (`c >= 1`: slots `c * CHUNK..`, made when first needed) and the free list:
    /// what only a table that grows, or takes and gives back slots, reads.
    cold: Box<(Chunks<S>, Mutex<F>)>,
}

/// Chunks `1..CHUNKS` of a table's slots (index 0 unused: that is [`Slots::first`]).
type Chunks<S> = Box<[OnceLock<Box<[S]>>]>;

impl<S, F> Slots<S, F> {
    fn new(make: impl Fn() -> S, free: F) -> Slots<S, F> {
        let first: Box<[S]> = (0..CHUNK).map(|_| make()).collect();
        let first = match first.try_into() {
            Ok(chunk) => chunk,
            // `CHUNK` slots were made just above.
            Err(_) => unreachable!("Slots::new: the chunk has CHUNK slots"),
        };
        Slots {
            first,
            cold: Box::new((
                (0..CHUNKS).map(|_| OnceLock::new()).collect(),
                Mutex::new(free),
            )),
        }
    }

    /// The slot at `index`, if its chunk exists.
    #[inline(always)]
    fn get(&self, index: usize) -> Option<&S> {
        if index < CHUNK {
            return self.first.get(index);
        }
        let chunk = self.cold.0.get(index >> CHUNK_BITS)?.get()?;
        chunk.get(index & (CHUNK - 1))
    }

    /// The slot at `index`, making its chunk (with `make`) if needed.
    fn get_or_create(&self, index: usize, make: impl Fn() -> S) -> Option<&S> {
        if index < CHUNK {
            return self.first.get(index);
        }
        let chunk = self
            .cold
            .0
            .get(index >> CHUNK_BITS)?
            .get_or_init(|| (0..CHUNK).map(|_| make()).collect());
        chunk.get(index & (CHUNK - 1))
    }

    /// Every slot made so far.
    fn iter(&self) -> impl Iterator<Item = &S> {
        self.first.iter().chain(
            self.cold
                .0
                .iter()
                .skip(1)
                .filter_map(OnceLock::get)
                .flat_map(|chunk| chunk.iter()),
        )
    }

    /// The free list, locked.
    fn free(&self) -> std::sync::MutexGuard<'_, F> {
        crate::runtime::lock(&self.cold.1)
    }
}

/// A table of objects of one kind (streams or events) of one device type.
///
/// Three words (`repr(C)`): what a lookup reads is the tag and the first chunk's address.
#[repr(C)]
pub struct Handles<T> {
    /// `tag << TAG_SHIFT`.
    tag: usize,
    slots: Slots<Slot<T>, FreeList>,
}

/// A decoded handle: the slot index and the state a live slot of that generation has.
#[derive(Clone, Copy)]
struct Decoded {
    index: usize,
    live_state: u64,
}

impl<T: Send + Sync> Handles<T> {
    /// An empty table whose handles carry `tag` (1..=15) in their top bits.
    pub fn new(tag: usize) -> Handles<T> {
        Handles {
            tag: (tag & 0xf) << TAG_SHIFT,
            slots: Slots::new(
                Slot::new,
                FreeList {
                    indices: Vec::new(),
                    fresh: 0,
                },
            ),
        }
    }

    #[inline(always)]
    fn decode(&self, handle: usize) -> Option<Decoded> {
        decode(self.tag, handle)
    }

    fn encode(&self, index: usize, state: u64) -> usize {
        encode(self.tag, index, state)
    }

    #[inline(always)]
    fn slot(&self, index: usize) -> Option<&Slot<T>> {
        self.slots.get(index)
    }

    /// A free slot index (`None`: the table is full).
    pub fn take_index(&self) -> Option<u32> {
        let mut free = self.slots.free();
        if let Some(index) = free.indices.pop() {
            return Some(index);
        }
        if free.fresh >= CAPACITY {
            return None;
        }
        free.fresh += 1;
        u32::try_from(free.fresh - 1).ok()
    }

    /// Gives back a slot index from [`Handles::take_index`] or [`Handles::remove`].
    pub fn give_index(&self, index: u32) {
        self.slots.free().indices.push(index);
    }

    /// Puts `value` in the (dead) slot `index` and answers its new handle.
    pub fn insert_at(&self, index: u32, value: Arc<T>) -> Option<usize> {
        self.insert_with(index, |_| value)
    }

    /// Puts `make(handle)` in the (dead) slot `index` and answers its new `handle`. `make` runs
    /// under the slot's lock: keep it short.
    pub fn insert_with(&self, index: u32, make: impl FnOnce(usize) -> Arc<T>) -> Option<usize> {
        let index = index as usize;
        let slot = self.slots.get_or_create(index, Slot::new)?;
        let (handle, old) = slot.with_locked(|state, slot_value| {
            let generation = ((state >> 2) + 1) & GEN_MASK;
            let next = (generation << 2) | LIVE;
            let handle = self.encode(index, next);
            let old = slot_value.replace(make(handle));
            (next, (handle, old))
        });
        drop(old);
        Some(handle)
    }

    /// Puts `value` in a free slot and answers its handle (`None`: the table is full).
    pub fn insert(&self, value: Arc<T>) -> Option<usize> {
        let index = self.take_index()?;
        self.insert_at(index, value)
    }

    /// Whether `handle` names a live object (one load).
    #[inline(always)]
    pub fn is_live(&self, handle: usize) -> bool {
        let Some(decoded) = self.decode(handle) else {
            return false;
        };
        self.slot(decoded.index)
            .is_some_and(|slot| slot.state.load(Ordering::Acquire) & !LOCKED == decoded.live_state)
    }

    /// The object `handle` names, if it is live.
    pub fn get(&self, handle: usize) -> Option<Arc<T>> {
        let decoded = self.decode(handle)?;
        let slot = self.slot(decoded.index)?;
        if slot.state.load(Ordering::Relaxed) & !LOCKED != decoded.live_state {
            return None;
        }
        slot.with_locked(|state, value| {
            let found = if state == decoded.live_state {
                value.clone()
            } else {
                None
            };
            (state, found)
        })
    }

    /// Destroys `handle` if it is live and `keep` accepts its object: the slot becomes dead and
    /// its object and index are answered (give the index back with [`Handles::give_index`] or
    /// reuse it with [`Handles::insert_at`]).
    pub fn remove(&self, handle: usize, keep: impl FnOnce(&T) -> bool) -> Option<(u32, Arc<T>)> {
        let decoded = self.decode(handle)?;
        let slot = self.slot(decoded.index)?;
        let value = slot.with_locked(|state, value| {
            if state != decoded.live_state || !value.as_deref().is_some_and(keep) {
                return (state, None);
            }
            (state & !LIVE, value.take())
        })?;
        Some((u32::try_from(decoded.index).ok()?, value))
    }

    /// The number of live objects (scans the table: for leak checks).
    pub fn live(&self) -> usize {
        live(self.slots.iter().map(|slot| &slot.state))
    }

    /// Every live object (scans the table).
    pub fn values(&self) -> Vec<Arc<T>> {
        let mut out = Vec::new();
        for slot in self.slots.iter() {
            if slot.state.load(Ordering::Relaxed) & LIVE == 0 {
                continue;
            }
            let found = slot.with_locked(|state, value| {
                let found = if state & LIVE != 0 {
                    value.clone()
                } else {
                    None
                };
                (state, found)
            });
            out.extend(found);
        }
        out
    }

    /// The object `handle` names, through the thread's `cache` where it can: a hit costs one
    /// load of the object's own `alive` flag (`alive(object)`), which its owner clears when it
    /// [`Handles::remove`]s the handle: a handle names one object for all time, so "the handle
    /// is live" and "its object was not removed" are one fact, and the flag sits in the
    /// object's cache line, which the caller reads next anyway. `cache` is `None` (or already
    /// borrowed, on a re-entrant call) → an owned `Arc` from [`Handles::get`].
    #[inline(always)]
    pub fn lookup<'a>(
        &self,
        cache: Option<&'a RefCell<Cache<T>>>,
        handle: usize,
        alive: impl FnOnce(&T) -> bool,
    ) -> Option<Lease<'a, T>> {
        let Some(mut cache) = cache.and_then(|c| c.try_borrow_mut().ok()) else {
            return self.get(handle).map(Lease::Owned);
        };
        let way = Cache::<T>::way(handle);
        let hit = matches!(&cache.entries[way], Some((h, _)) if *h == handle);
        if hit {
            if !cache.entries[way].as_ref().is_some_and(|(_, v)| alive(v)) {
                // Destroyed (here or on another thread): let go of it.
                let stale = cache.entries[way].take();
                drop(cache);
                drop(stale);
                return None;
            }
        } else {
            let value = self.get(handle)?;
            let old = cache.entries[way].replace((handle, value));
            drop(old);
        }
        RefMut::filter_map(cache, |c| c.entries[way].as_mut().map(|(_, v)| v))
            .ok()
            .map(Lease::Cached)
    }
}

/// One slot of a [`Stable`] table: its object, once made, lives as long as the table. A cache
/// line of its own (state and a small object: one line per lookup).
#[repr(align(64))]
struct StableSlot<T> {
    /// Bit 1 "live", bits 2.. the generation (bit 0 unused).
    state: AtomicU64,
    value: OnceLock<T>,
}

/// Free slot indices of a [`Stable`] table, by key (a slot's object keeps the key it was made
/// with), and the next never-used index.
struct KeyedFree {
    by_key: Vec<Vec<u32>>,
    fresh: usize,
}

/// A table whose objects are never freed: a destroyed handle's slot keeps its object, and the
/// next handle put in the slot reuses it (for events: a devstream event per slot, made once).
///
/// So a lookup is one load and a compare, with no reference count and no thread-local: the
/// object a handle names stays allocated whatever happens to the handle, and a destroy racing
/// a use on another thread leaves that use working on a valid object (at worst the slot's next
/// handle's object, in a program that uses a handle while destroying it). Handles are encoded
/// and checked as [`Handles`]' are. The memory kept is the most objects live at once.
///
/// Three words (`repr(C)`), as [`Handles`].
#[repr(C)]
pub struct Stable<T> {
    tag: usize,
    slots: Slots<StableSlot<T>, KeyedFree>,
}

impl<T: Send + Sync> Stable<T> {
    /// An empty table whose handles carry `tag` (1..=15) in their top bits.
    pub fn new(tag: usize) -> Stable<T> {
        Stable {
            tag: (tag & 0xf) << TAG_SHIFT,
            slots: Slots::new(
                StableSlot::new,
                KeyedFree {
                    by_key: Vec::new(),
                    fresh: 0,
                },
            ),
        }
    }

    #[inline(always)]
    fn decode(&self, handle: usize) -> Option<Decoded> {
        decode(self.tag, handle)
    }

    #[inline(always)]
    fn slot(&self, index: usize) -> Option<&StableSlot<T>> {
        self.slots.get(index)
    }

    /// The object `handle` names, if it is live: one load and a compare.
    #[inline(always)]
    pub fn get(&self, handle: usize) -> Option<&T> {
        let decoded = self.decode(handle)?;
        let slot = self.slot(decoded.index)?;
        if slot.state.load(Ordering::Acquire) != decoded.live_state {
            return None;
        }
        slot.value.get()
    }

    /// A free slot index whose object (if it has one) was made with `key` (`None`: the table is
    /// full).
    pub fn take_index(&self, key: usize) -> Option<u32> {
        let mut free = self.slots.free();
        if let Some(index) = free.by_key.get_mut(key).and_then(Vec::pop) {
            return Some(index);
        }
        if free.fresh >= CAPACITY {
            return None;
        }
        free.fresh += 1;
        u32::try_from(free.fresh - 1).ok()
    }

    /// Gives back a slot index from [`Stable::take_index`] or [`Stable::remove`] (`key`: its
    /// object's key).
    pub fn give_index(&self, key: usize, index: u32) {
        let mut free = self.slots.free();
        if free.by_key.len() <= key {
            free.by_key.resize_with(key + 1, Vec::new);
        }
        free.by_key[key].push(index);
    }

    /// Makes the dead slot `index` (from [`Stable::take_index`], so no other thread uses it)
    /// live and answers its new handle: its object is `reuse`d if it has one, else `make`s
    /// one. `Err` from `make` leaves the slot dead (give the index back).
    pub fn insert_at<E>(
        &self,
        index: u32,
        make: impl FnOnce() -> Result<T, E>,
        reuse: impl FnOnce(&T),
    ) -> Result<Option<usize>, E> {
        let index = index as usize;
        let Some(slot) = self.slots.get_or_create(index, StableSlot::new) else {
            return Ok(None);
        };
        match slot.value.get() {
            Some(value) => reuse(value),
            None => {
                let value = make()?;
                // Only the owner of the index sets it, once.
                let _ = slot.value.set(value);
            }
        }
        let state = slot.state.load(Ordering::Relaxed);
        let next = ((((state >> 2) + 1) & GEN_MASK) << 2) | LIVE;
        slot.state.store(next, Ordering::Release);
        Ok(Some(encode(self.tag, index, next)))
    }

    /// Destroys `handle` if it is live and `keep` accepts its object, answering the slot index
    /// (to give back or keep for reuse). One compare-and-swap: of two racing destroys of one
    /// handle, one wins.
    pub fn remove(&self, handle: usize, keep: impl FnOnce(&T) -> bool) -> Option<(u32, &T)> {
        let decoded = self.decode(handle)?;
        let slot = self.slot(decoded.index)?;
        let value = slot.value.get()?;
        if !keep(value) {
            return None;
        }
        slot.state
            .compare_exchange(
                decoded.live_state,
                decoded.live_state & !LIVE,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .ok()?;
        Some((u32::try_from(decoded.index).ok()?, value))
    }

    /// The number of live objects (scans the table: for leak checks).
    pub fn live(&self) -> usize {
        live(self.slots.iter().map(|slot| &slot.state))
    }

    /// Every live object (scans the table).
    pub fn live_values(&self) -> Vec<&T> {
        self.slots
            .iter()
            .filter(|slot| slot.state.load(Ordering::Acquire) & LIVE != 0)
            .filter_map(|slot| slot.value.get())
            .collect()
    }

    /// The object kept by the dead slot `index` (from [`Stable::take_index`]), if it has one.
    pub fn dead(&self, index: u32) -> Option<&T> {
        let slot = self.slot(index as usize)?;
        if slot.state.load(Ordering::Acquire) & LIVE != 0 {
            return None;
        }
        slot.value.get()
    }
}

impl<T> StableSlot<T> {
    fn new() -> StableSlot<T> {
        StableSlot {
            state: AtomicU64::new(0),
            value: OnceLock::new(),
        }
    }
}

/// How many objects of one kind a thread's cache holds (direct-mapped by slot index).
const WAYS: usize = 3;

/// A thread's most recently used objects of one kind, with their handles.
pub struct Cache<T> {
    entries: [Option<(usize, Arc<T>)>; WAYS],
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Cache::new()
    }
}

impl<T> Cache<T> {
    /// An empty cache.
    pub const fn new() -> Cache<T> {
        Cache {
            entries: [const { None }; WAYS],
        }
    }

    fn way(handle: usize) -> usize {
        ((handle >> INDEX_SHIFT) & INDEX_MASK) % WAYS
    }

    /// Remembers `value` as the object of `handle` (a new object, used next by its creator).
    pub fn put(&mut self, handle: usize, value: Arc<T>) -> Option<Arc<T>> {
        self.entries[Self::way(handle)]
            .replace((handle, value))
            .map(|(_, v)| v)
    }

    /// Forgets `handle`'s object, answering it.
    pub fn evict(&mut self, handle: usize) -> Option<Arc<T>> {
        let entry = &mut self.entries[Self::way(handle)];
        if matches!(entry, Some((h, _)) if *h == handle) {
            entry.take().map(|(_, v)| v)
        } else {
            None
        }
    }

    /// Every object held (emptying the cache).
    pub fn drain(&mut self) -> impl Iterator<Item = Arc<T>> + '_ {
        self.entries
            .iter_mut()
            .filter_map(|e| e.take().map(|(_, v)| v))
    }
}

/// An object looked up for the duration of one call.
pub enum Lease<'a, T> {
    /// Held by the thread's cache (borrowed for the call).
    Cached(RefMut<'a, Arc<T>>),
    /// An owned reference (cache unavailable).
    Owned(Arc<T>),
    /// A reference into the runtime (a device's null stream).
    Borrowed(&'a T),
}

impl<T> Deref for Lease<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        match self {
            Lease::Cached(v) => v,
            Lease::Owned(v) => v,
            Lease::Borrowed(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_checked_by_generation_and_tag() {
        let table: Handles<u32> = Handles::new(1);
        let a = table.insert(Arc::new(7)).unwrap();
        assert_ne!(a, 0);
        assert_eq!(a % 16, 0);
        assert_eq!(table.get(a).as_deref(), Some(&7));
        assert!(table.is_live(a));
        // Garbage, a misaligned handle, another tag, an index never used.
        for bad in [
            0,
            1,
            a + 1,
            a ^ (1 << TAG_SHIFT),
            a + (5 << INDEX_SHIFT),
            usize::MAX,
        ] {
            assert!(table.get(bad).is_none(), "{bad:#x}");
            assert!(!table.is_live(bad));
            assert!(table.remove(bad, |_| true).is_none());
        }
        let (index, value) = table.remove(a, |_| true).unwrap();
        assert_eq!(*value, 7);
        assert!(table.get(a).is_none());
        assert!(table.remove(a, |_| true).is_none());
        // Reusing the slot gives a new generation; the old handle stays dead.
        let b = table.insert_at(index, Arc::new(8)).unwrap();
        assert_ne!(a, b);
        assert!(table.get(a).is_none());
        assert_eq!(table.get(b).as_deref(), Some(&8));
        assert_eq!(table.live(), 1);
        assert_eq!(table.values().len(), 1);
        // `keep` refusing leaves it live.
        assert!(table.remove(b, |v| *v == 0).is_none());
        assert!(table.is_live(b));
    }

    /// A value with the `alive` flag [`Handles::lookup`] reads.
    struct Flagged(String, std::sync::atomic::AtomicBool);

    fn flagged(s: &str) -> Arc<Flagged> {
        Arc::new(Flagged(
            s.to_owned(),
            std::sync::atomic::AtomicBool::new(true),
        ))
    }

    fn alive(v: &Flagged) -> bool {
        v.1.load(Ordering::Acquire)
    }

    /// Removes `h`, clearing its object's flag as owners do.
    fn remove(table: &Handles<Flagged>, h: usize) -> Option<u32> {
        let (index, v) = table.remove(h, |_| true)?;
        v.1.store(false, Ordering::Release);
        Some(index)
    }

    #[test]
    fn the_cache_sees_a_destroy_and_keeps_the_object_alive_meanwhile() {
        let table: Handles<Flagged> = Handles::new(2);
        let cache = RefCell::new(Cache::new());
        let a = table.insert(flagged("a")).unwrap();
        let lease = table.lookup(Some(&cache), a, alive).unwrap();
        assert_eq!(lease.0, "a");
        // A lookup while the cache is borrowed (re-entrant) answers an owned reference.
        assert!(matches!(
            table.lookup(Some(&cache), a, alive),
            Some(Lease::Owned(_))
        ));
        // Destroyed while leased: the leased object stays valid.
        remove(&table, a).unwrap();
        assert_eq!(lease.0, "a");
        drop(lease);
        // The next lookup sees it destroyed and evicts; so does one after the slot's reuse.
        assert!(table.lookup(Some(&cache), a, alive).is_none());
        assert!(cache.borrow_mut().drain().next().is_none());
        let b = table.insert(flagged("b")).unwrap();
        assert_eq!(
            table.lookup(Some(&cache), b, alive).map(|v| v.0.clone()),
            Some("b".into())
        );
        remove(&table, b).unwrap();
        let c = table.insert(flagged("c")).unwrap();
        assert!(
            table.lookup(Some(&cache), b, alive).is_none(),
            "stale handle, reused slot"
        );
        assert_eq!(
            table.lookup(Some(&cache), c, alive).map(|v| v.0.clone()),
            Some("c".into())
        );
    }

    #[test]
    fn stable_handles_are_checked_and_their_objects_reused_by_key() {
        let table: Stable<(usize, std::sync::atomic::AtomicUsize)> = Stable::new(4);
        let make = |key| move || Ok::<_, ()>((key, std::sync::atomic::AtomicUsize::new(0)));
        let reuse = |v: &(usize, std::sync::atomic::AtomicUsize)| {
            v.1.fetch_add(1, Ordering::Relaxed);
        };
        let i = table.take_index(0).unwrap();
        let a = table.insert_at(i, make(0), reuse).unwrap().unwrap();
        assert_eq!(a % 16, 0);
        assert_eq!(table.get(a).map(|v| v.0), Some(0));
        for bad in [
            0,
            1,
            a + 1,
            a ^ (1 << TAG_SHIFT),
            a + (9 << INDEX_SHIFT),
            usize::MAX,
        ] {
            assert!(table.get(bad).is_none(), "{bad:#x}");
            assert!(table.remove(bad, |_| true).is_none());
        }
        // `keep` refusing (another device) leaves it live.
        assert!(table.remove(a, |v| v.0 == 1).is_none());
        assert_eq!(table.live(), 1);
        let (index, _) = table.remove(a, |v| v.0 == 0).unwrap();
        assert!(table.get(a).is_none());
        assert!(table.remove(a, |_| true).is_none(), "destroyed twice");
        assert_eq!(table.live(), 0);
        table.give_index(0, index);
        // Key 1 gets a fresh slot; key 0 gets the old one back, object reused.
        let j = table.take_index(1).unwrap();
        assert_ne!(j, index);
        let k = table.take_index(0).unwrap();
        assert_eq!(k, index);
        let b = table.insert_at(k, make(0), reuse).unwrap().unwrap();
        assert_ne!(a, b);
        assert!(table.get(a).is_none());
        assert_eq!(table.get(b).map(|v| v.1.load(Ordering::Relaxed)), Some(1));
        // A failing `make` leaves the slot dead.
        assert_eq!(table.insert_at(j, || Err(()), reuse), Err(()));
        assert_eq!(table.live(), 1);
    }

    #[test]
    fn racing_destroys_and_lookups_are_sound() {
        let table: Arc<Handles<Flagged>> = Arc::new(Handles::new(3));
        let handles: Vec<usize> = (0..64)
            .map(|i: usize| table.insert(flagged(&i.to_string().repeat(64))).unwrap())
            .collect();
        let handles = Arc::new(handles);
        std::thread::scope(|s| {
            for t in 0..4 {
                let table = table.clone();
                let handles = handles.clone();
                s.spawn(move || {
                    let cache = RefCell::new(Cache::new());
                    for round in 0..2000 {
                        let h = handles[(round * 7 + t) % handles.len()];
                        if let Some(v) = table.lookup(Some(&cache), h, alive) {
                            assert!(v.0.len() >= 64, "a live object");
                        }
                        if round % 3 == t % 3 {
                            if let Some(index) = remove(&table, h) {
                                let n = table.insert_at(index, flagged(&"x".repeat(64)));
                                assert!(n.is_some());
                            }
                        }
                    }
                });
            }
        });
    }
}
