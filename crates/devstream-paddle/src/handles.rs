//! Handle tables for the streams and events Paddle holds: slots indexed by the handle's bits,
//! each with a generation, whose objects are never freed.
//!
//! **What a handle is.** `tag << 60 | generation << 24 | index << 4`: never 0, a multiple of
//! 16, never dereferenced. The tag ([`tag`]) names the handle's [`Kind`] (stream, event, graph)
//! and the device type's backend, so the tables of two kinds, or of two device types, never
//! hand out the same integer, whatever their states. A live slot's state *is* its handle;
//! destroying the handle sets the state's bit 0 (no handle has it), and the slot's next handle
//! has the next generation (36 bits: a stale handle names another object only after 2^36
//! reuses of its slot). So a handle is valid iff it is a multiple of 16 and equals the state
//! of the slot its index bits name: one compare checks kind, backend, generation and liveness.
//! Anything else Paddle passes (a destroyed handle, another kind's or another type's handle,
//! garbage) names a slot that is missing or whose state differs: `None`, never a dereference.
//!
//! **Lookups** ([`Stable`]). A slot's object, once made, lives as long as the table: a destroyed
//! handle's slot keeps it, and the slot's next handle reuses it (the runtime decides when: a
//! stream only once it is idle and sound, an event always, answered as never recorded). So a
//! lookup is one load of the slot's state and a compare: no lock, no reference count, no
//! thread-local; and a destroy racing a use on another thread is sound, the use working on an
//! object that is still allocated (at worst the slot's next handle's object, in a program that
//! uses a handle while destroying it). The memory kept is the most objects live at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

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

/// A dead slot's state: its last handle with this bit set (a never-used slot's state is 0).
const DEAD: u64 = 1;

/// What a handle names: part of its tag ([`tag`]), so that a handle of one kind is never a
/// live handle of another and every call given one answers `C_ERROR`, acting on nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A `C_Stream` (a [`Stable`] table).
    Stream = 1,
    /// A `C_Event` (a [`Stable`] table).
    Event = 2,
    /// A `C_CudaGraph` or a `C_GraphExec` (keys of maps; see [`graph_handle`]).
    Graph = 3,
}

/// The tag of the handles of `kind` for backend index `backend` (0..4): the kind in its upper
/// two bits, the backend in its lower two; never 0. A handle carries it in its top four bits.
pub const fn tag(kind: Kind, backend: usize) -> usize {
    ((kind as usize) << 2) | (backend & 3)
}

/// The handle of the `n`-th graph (`exec` false) or executable graph (`exec` true) of backend
/// index `backend`: `tag << 60 | n << 5 | exec << 4` with the tag of [`Kind::Graph`], so that it
/// is no stream or event handle, no handle of the other graph kind, and no handle of another
/// device type (each is a copy of this library with its own counters). `n` is taken modulo
/// 2^55.
pub const fn graph_handle(backend: usize, n: usize, exec: bool) -> usize {
    (tag(Kind::Graph, backend) << TAG_SHIFT)
        | ((n & ((1 << (TAG_SHIFT - 5)) - 1)) << 5)
        | ((exec as usize) << 4)
}

/// The most objects of one kind alive at once in one table (2^20).
pub const CAPACITY: usize = CHUNKS * CHUNK;

/// The slot index `handle` names, if it can be a handle at all (a multiple of 16): whether it
/// is one is the compare with the slot's state.
#[inline(always)]
fn decode(handle: usize) -> Option<Decoded> {
    if handle & ((1 << INDEX_SHIFT) - 1) != 0 {
        return None;
    }
    Some(Decoded {
        index: (handle >> INDEX_SHIFT) & INDEX_MASK,
        live_state: handle as u64,
    })
}

/// The handle of slot `index` with `generation`, for a table with `tag` (already shifted).
fn encode(tag: usize, index: usize, generation: u64) -> usize {
    tag | ((generation as usize) << GEN_SHIFT) | (index << INDEX_SHIFT)
}

/// Whether a slot state is a live handle's (not 0, never used; not dead).
fn is_live(state: u64) -> bool {
    state != 0 && state & DEAD == 0
}

/// How many of these slot states are live.
fn live<'a>(states: impl Iterator<Item = &'a AtomicU64>) -> usize {
    states
        .filter(|state| is_live(state.load(Ordering::Acquire)))
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
        devstream_core::sync::lock(&self.cold.1)
    }
}

/// A decoded handle: the slot index and the state the slot has while the handle is live (the
/// handle itself).
#[derive(Clone, Copy)]
struct Decoded {
    index: usize,
    live_state: u64,
}

/// One slot of a [`Stable`] table: its object, once made, lives as long as the table. A cache
/// line of its own (state and a small object: one line per lookup).
#[repr(align(64))]
struct StableSlot<T> {
    /// The live handle; its last handle with [`DEAD`] set; 0 before the first.
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
/// next handle put in the slot reuses it (a devstream stream or event per slot, made once).
///
/// So a lookup is one load and a compare, with no reference count and no thread-local: the
/// object a handle names stays allocated whatever happens to the handle, and a destroy racing
/// a use on another thread leaves that use working on a valid object (at worst the slot's next
/// handle's object, in a program that uses a handle while destroying it). The memory kept is
/// the most objects live at once.
///
/// Three words (`repr(C)`): what a lookup reads is the tag and the first chunk's address.
#[repr(C)]
pub struct Stable<T> {
    tag: usize,
    slots: Slots<StableSlot<T>, KeyedFree>,
}

impl<T: Send + Sync> Stable<T> {
    /// An empty table whose handles carry `tag` (from [`tag`]; 1..=15) in their top bits.
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
        decode(handle)
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
        Ok(Some(self.make_live(slot, index)))
    }

    /// [`Stable::insert_at`] for a slot that keeps an object (a destroyed handle's): `reuse`s
    /// it and answers the new handle; `None` (nothing changed) if the slot has no object.
    #[inline(always)]
    pub fn reuse_at(&self, index: u32, reuse: impl FnOnce(&T)) -> Option<usize> {
        let index = index as usize;
        let slot = self.slots.get(index)?;
        reuse(slot.value.get()?);
        Some(self.make_live(slot, index))
    }

    /// Makes the dead slot `index` live under its next generation; answers its handle.
    #[inline(always)]
    fn make_live(&self, slot: &StableSlot<T>, index: usize) -> usize {
        let state = slot.state.load(Ordering::Relaxed);
        let generation = ((state >> GEN_SHIFT) + 1) & GEN_MASK;
        let handle = encode(self.tag, index, generation);
        slot.state.store(handle as u64, Ordering::Release);
        handle
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
                decoded.live_state | DEAD,
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
            .filter(|slot| is_live(slot.state.load(Ordering::Acquire)))
            .filter_map(|slot| slot.value.get())
            .collect()
    }

    /// The object kept by the dead slot `index` (from [`Stable::take_index`]), if it has one.
    pub fn dead(&self, index: u32) -> Option<&T> {
        let slot = self.slot(index as usize)?;
        if is_live(slot.state.load(Ordering::Acquire)) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // The dead slot's state (the handle with bit 0 set) is no handle either.
        assert!(table.get(a | 1).is_none());
        assert!(table.remove(a | 1, |_| true).is_none());
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
    fn tables_of_two_kinds_never_hand_out_one_integer() {
        let streams: Stable<()> = Stable::new(tag(Kind::Stream, 0));
        let events: Stable<()> = Stable::new(tag(Kind::Event, 0));
        let other_type: Stable<()> = Stable::new(tag(Kind::Stream, 1));
        let first = |table: &Stable<()>| {
            let index = table.take_index(0).unwrap();
            table
                .insert_at(index, || Ok::<_, ()>(()), |_| {})
                .unwrap()
                .unwrap()
        };
        let (s, e, o) = (first(&streams), first(&events), first(&other_type));
        assert!(s != e && s != o && e != o, "{s:#x} {e:#x} {o:#x}");
        assert!(events.get(s).is_none() && streams.get(e).is_none());
        assert!(streams.get(o).is_none() && other_type.get(s).is_none());
        assert!(events.remove(s, |_| true).is_none());
        assert_eq!(streams.live() + events.live(), 2);
        let graph = graph_handle(0, 1, false);
        let exec = graph_handle(0, 1, true);
        assert!(graph != exec && graph.is_multiple_of(16) && exec.is_multiple_of(16));
        assert!(streams.get(graph).is_none() && events.get(exec).is_none());
    }
}
