//! What devstream hands a plug-in as a callback's `user_data`: tokens naming slots of
//! process-wide tables, never addresses. Whatever a plug-in does with a token (call it twice,
//! late, after `stream_add_callback` answered an error, after the graph that held it was
//! destroyed, or never), devstream never touches memory it freed.
//!
//! * **Stream callbacks** ([`register`], [`run`], [`handed`]): whichever side claims a token
//!   first (the trampoline, to run the callback; the submitter, after an error) takes the
//!   callback and frees its slot; a token whose slot was claimed, or reused since, claims
//!   nothing, so each callback runs at most once. A callback that frees what the stream's
//!   earlier work uses must not run before that work is done; a plug-in that runs callbacks
//!   inside `stream_add_callback` while its copies are still queued would run it first. So while
//!   `stream_add_callback` has not returned, the trampoline leaves such a callback (`early` says
//!   which) in its slot, and the submitter takes it back once the call returns and keeps what it
//!   frees by other means ([`handed`]).
//! * **Host functions of graphs** ([`GraphFns`]): a replay runs one any number of times, so the
//!   token is not claimed by a call; the slot is freed when the capture that made it (its graph)
//!   is gone, and a later call (a plug-in replaying a destroyed graph, or running a callback a
//!   capture that ended meanwhile did not take) finds nothing.
//!
//! A token is the slot's index + 1 (never null) above the slot's generation, which is raised
//! each time the slot is freed: on a 64-bit target the generation has 32 bits, so a stale token
//! could name a reused slot only after 2^32 reuses of that slot. A slot whose callback the
//! plug-in never calls stays taken (as its callback would stay allocated).

use crate::queue::{lock, Callback};
use std::sync::Mutex;

/// Bits of a token that hold the generation.
const GENERATION_BITS: u32 = usize::BITS / 2;
const GENERATION_MASK: usize = (1 << GENERATION_BITS) - 1;

struct Slot<T> {
    generation: usize,
    value: Option<T>,
    /// Its `stream_add_callback` has not returned yet (stream callbacks).
    handing: bool,
    /// Called while handing and left in the slot (see [`run`]).
    declined: bool,
}

/// A table of values named by tokens.
pub(crate) struct Table<T> {
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
}

impl<T> Table<T> {
    /// An empty table.
    pub(crate) const fn new() -> Table<T> {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Takes a slot for `value`; the token names it until the slot is freed.
    fn insert(&mut self, value: T, handing: bool) -> usize {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                    handing: false,
                    declined: false,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.value = Some(value);
        slot.handing = handing;
        slot.declined = false;
        ((index + 1) << GENERATION_BITS) | slot.generation
    }

    /// The slot `token` names, while it holds the value the token was given for.
    fn slot_of(&mut self, token: usize) -> Option<(usize, &mut Slot<T>)> {
        let index = (token >> GENERATION_BITS).checked_sub(1)?;
        let slot = self.slots.get_mut(index)?;
        (slot.generation == token & GENERATION_MASK && slot.value.is_some())
            .then_some((index, slot))
    }

    /// Takes the value out of slot `index` and frees the slot (the caller drops the value,
    /// outside the table's lock).
    fn take(&mut self, index: usize) -> Option<T> {
        let slot = &mut self.slots[index];
        let value = slot.value.take();
        slot.generation = (slot.generation + 1) & GENERATION_MASK;
        slot.handing = false;
        self.free.push(index);
        value
    }
}

// ---- stream callbacks ----

static CALLBACKS: Mutex<Table<Callback>> = Mutex::new(Table::new());

/// Takes a slot for `callback`, about to be handed to `stream_add_callback`; the token names it
/// until it is claimed.
pub(crate) fn register(callback: Callback) -> usize {
    lock(&CALLBACKS).insert(callback, true)
}

/// For the trampoline: the callback to run, if nobody claimed it yet (nothing for a token
/// claimed already or a value devstream never gave out). One for which `early` is true, called
/// while its `stream_add_callback` has not returned, is left for [`handed`].
pub(crate) fn run(token: usize, early: impl FnOnce(&Callback) -> bool) -> Option<Callback> {
    let mut table = lock(&CALLBACKS);
    let (index, slot) = table.slot_of(token)?;
    if slot.handing && slot.value.as_ref().is_some_and(early) {
        slot.declined = true;
        return None;
    }
    table.take(index)
}

/// For the submitter, once `stream_add_callback` returned (`accepted`: with success): after an
/// error, the callback if it has not run (taken back: it will not run); after success, a
/// callback [`run`] declined (it has not run, and will not). Otherwise the callback stays with
/// the plug-in, and its call runs it from now on.
pub(crate) fn handed(token: usize, accepted: bool) -> Option<Callback> {
    let mut table = lock(&CALLBACKS);
    let (index, slot) = table.slot_of(token)?;
    slot.handing = false;
    if accepted && !slot.declined {
        return None;
    }
    table.take(index)
}

// ---- host functions of graphs ----

/// The table of a kind of values a replay looks up by token as often as it runs (the graphs'
/// host functions): `T` is shared (`Arc`), so a call runs it outside the lock.
pub(crate) struct GraphFns<T: Clone>(Mutex<Table<T>>);

impl<T: Clone> GraphFns<T> {
    /// An empty table.
    pub(crate) const fn new() -> GraphFns<T> {
        GraphFns(Mutex::new(Table::new()))
    }

    /// A token for `value`, until [`GraphFns::remove`].
    pub(crate) fn insert(&self, value: T) -> usize {
        lock(&self.0).insert(value, false)
    }

    /// The value `token` names, if it was not removed.
    pub(crate) fn get(&self, token: usize) -> Option<T> {
        let mut table = lock(&self.0);
        table
            .slot_of(token)
            .and_then(|(_, slot)| slot.value.clone())
    }

    /// Frees `token`'s slot; answers its value (dropped by the caller, outside the lock).
    pub(crate) fn remove(&self, token: usize) -> Option<T> {
        let mut table = lock(&self.0);
        let (index, _) = table.slot_of(token)?;
        table.take(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &Callback) -> bool {
        false
    }

    #[test]
    fn a_token_claims_its_callback_once_and_a_reused_slot_is_not_confused() {
        let first = register(Callback::Nudge(1, None));
        assert_ne!(first, 0, "a token is never null");
        assert!(
            handed(first, true).is_none(),
            "queued: nothing to take back"
        );
        assert!(matches!(run(first, never), Some(Callback::Nudge(1, None))));
        assert!(run(first, never).is_none(), "claimed already");
        // The slot is reused with a new generation: the stale token still claims nothing.
        let second = register(Callback::Nudge(2, None));
        assert_ne!(second, first);
        assert!(run(first, never).is_none());
        assert!(handed(first, false).is_none());
        assert!(matches!(
            handed(second, false),
            Some(Callback::Nudge(2, None))
        ));
        assert!(run(second, never).is_none(), "taken back after an error");
        for garbage in [0, 1, usize::MAX, usize::MAX >> 1, 0xdead_beef] {
            assert!(run(garbage, never).is_none(), "{garbage:#x}");
            assert!(handed(garbage, false).is_none(), "{garbage:#x}");
        }
    }

    #[test]
    fn a_graph_token_finds_its_value_until_removed() {
        static FNS: GraphFns<u32> = GraphFns::new();
        let token = FNS.insert(5);
        assert_eq!(FNS.get(token), Some(5));
        assert_eq!(FNS.get(token), Some(5), "looked up as often as it runs");
        assert_eq!(FNS.remove(token), Some(5));
        assert_eq!(FNS.get(token), None, "gone with its graph");
        let reused = FNS.insert(6);
        assert_eq!(FNS.get(token), None, "a stale token names no reused slot");
        assert_eq!(FNS.get(reused), Some(6));
    }

    #[test]
    fn an_early_callback_called_inside_its_hand_over_is_declined_and_taken_back() {
        let early = |_: &Callback| true;
        let token = register(Callback::Nudge(3, None));
        assert!(run(token, early).is_none(), "declined while handing");
        assert!(matches!(
            handed(token, true),
            Some(Callback::Nudge(3, None))
        ));
        // Called after the hand-over, it runs.
        let token = register(Callback::Nudge(4, None));
        assert!(handed(token, true).is_none());
        assert!(matches!(run(token, early), Some(Callback::Nudge(4, None))));
    }
}
