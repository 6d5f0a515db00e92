//! Callbacks in a plug-in's hands, named by tokens.
//!
//! The `user_data` devstream passes to `stream_add_callback` is a token naming a slot of one
//! process-wide table, never the address of the callback: the plug-in may call a callback
//! twice, call it after `stream_add_callback` answered an error (devstream has then taken the
//! callback back), call it late, or never. Whichever side claims a token first (the trampoline,
//! to run the callback; the submitter, after an error) takes the callback and frees its slot;
//! a token whose slot was claimed, or reused since, claims nothing. So whatever a plug-in does
//! with a token, devstream runs each callback at most once and never touches memory it freed.
//!
//! A callback that frees what the stream's earlier work uses must not run before that work is
//! done; a plug-in that runs callbacks inside `stream_add_callback` while its copies are still
//! queued would run it first. So while `stream_add_callback` has not returned, the trampoline
//! leaves such a callback (`early` says which) in its slot, and the submitter takes it back once
//! the call returns and keeps what it frees by other means ([`handed`]).
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

struct Slot {
    generation: usize,
    callback: Option<Callback>,
    /// Its `stream_add_callback` has not returned yet.
    handing: bool,
    /// Called while handing and left in the slot (see [`run`]).
    declined: bool,
}

struct Table {
    slots: Vec<Slot>,
    free: Vec<usize>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    slots: Vec::new(),
    free: Vec::new(),
});

/// Takes a slot for `callback`, about to be handed to `stream_add_callback`; the token names it
/// until it is claimed.
pub(crate) fn register(callback: Callback) -> usize {
    let mut table = lock(&TABLE);
    let index = match table.free.pop() {
        Some(index) => index,
        None => {
            table.slots.push(Slot {
                generation: 0,
                callback: None,
                handing: false,
                declined: false,
            });
            table.slots.len() - 1
        }
    };
    let slot = &mut table.slots[index];
    slot.callback = Some(callback);
    slot.handing = true;
    slot.declined = false;
    ((index + 1) << GENERATION_BITS) | slot.generation
}

/// The slot `token` names, while it holds the callback the token was given for.
fn slot_of(table: &mut Table, token: usize) -> Option<(usize, &mut Slot)> {
    let index = (token >> GENERATION_BITS).checked_sub(1)?;
    let slot = table.slots.get_mut(index)?;
    (slot.generation == token & GENERATION_MASK && slot.callback.is_some()).then_some((index, slot))
}

/// Takes the callback out of slot `index` and frees the slot (the caller drops the callback,
/// outside the table's lock).
fn take(table: &mut Table, index: usize) -> Option<Callback> {
    let slot = &mut table.slots[index];
    let callback = slot.callback.take();
    slot.generation = (slot.generation + 1) & GENERATION_MASK;
    slot.handing = false;
    table.free.push(index);
    callback
}

/// For the trampoline: the callback to run, if nobody claimed it yet (nothing for a token
/// claimed already or a value devstream never gave out). One for which `early` is true, called
/// while its `stream_add_callback` has not returned, is left for [`handed`].
pub(crate) fn run(token: usize, early: impl FnOnce(&Callback) -> bool) -> Option<Callback> {
    let mut table = lock(&TABLE);
    let (index, slot) = slot_of(&mut table, token)?;
    if slot.handing && slot.callback.as_ref().is_some_and(early) {
        slot.declined = true;
        return None;
    }
    take(&mut table, index)
}

/// For the submitter, once `stream_add_callback` returned (`accepted`: with success): after an
/// error, the callback if it has not run (taken back: it will not run); after success, a
/// callback [`run`] declined (it has not run, and will not). Otherwise the callback stays with
/// the plug-in, and its call runs it from now on.
pub(crate) fn handed(token: usize, accepted: bool) -> Option<Callback> {
    let mut table = lock(&TABLE);
    let (index, slot) = slot_of(&mut table, token)?;
    slot.handing = false;
    if accepted && !slot.declined {
        return None;
    }
    take(&mut table, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &Callback) -> bool {
        false
    }

    #[test]
    fn a_token_claims_its_callback_once_and_a_reused_slot_is_not_confused() {
        let first = register(Callback::Nudge(1));
        assert_ne!(first, 0, "a token is never null");
        assert!(
            handed(first, true).is_none(),
            "queued: nothing to take back"
        );
        assert!(matches!(run(first, never), Some(Callback::Nudge(1))));
        assert!(run(first, never).is_none(), "claimed already");
        // The slot is reused with a new generation: the stale token still claims nothing.
        let second = register(Callback::Nudge(2));
        assert_ne!(second, first);
        assert!(run(first, never).is_none());
        assert!(handed(first, false).is_none());
        assert!(matches!(handed(second, false), Some(Callback::Nudge(2))));
        assert!(run(second, never).is_none(), "taken back after an error");
        for garbage in [0, 1, usize::MAX, usize::MAX >> 1, 0xdead_beef] {
            assert!(run(garbage, never).is_none(), "{garbage:#x}");
            assert!(handed(garbage, false).is_none(), "{garbage:#x}");
        }
    }

    #[test]
    fn an_early_callback_called_inside_its_hand_over_is_declined_and_taken_back() {
        let early = |_: &Callback| true;
        let token = register(Callback::Nudge(3));
        assert!(run(token, early).is_none(), "declined while handing");
        assert!(matches!(handed(token, true), Some(Callback::Nudge(3))));
        // Called after the hand-over, it runs.
        let token = register(Callback::Nudge(4));
        assert!(handed(token, true).is_none());
        assert!(matches!(run(token, early), Some(Callback::Nudge(4))));
    }
}
