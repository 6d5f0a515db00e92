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
}

struct Table {
    slots: Vec<Slot>,
    free: Vec<usize>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    slots: Vec::new(),
    free: Vec::new(),
});

/// Takes a slot for `callback`; the token names it until it is claimed.
pub(crate) fn register(callback: Callback) -> usize {
    let mut table = lock(&TABLE);
    let index = match table.free.pop() {
        Some(index) => index,
        None => {
            table.slots.push(Slot {
                generation: 0,
                callback: None,
            });
            table.slots.len() - 1
        }
    };
    let slot = &mut table.slots[index];
    slot.callback = Some(callback);
    ((index + 1) << GENERATION_BITS) | slot.generation
}

/// The callback `token` names, if nobody claimed it yet; its slot is freed. Any other value
/// (a token claimed already, a value devstream never gave out) claims nothing. The callback is
/// dropped by the caller, outside the table's lock.
pub(crate) fn claim(token: usize) -> Option<Callback> {
    let index = (token >> GENERATION_BITS).checked_sub(1)?;
    let generation = token & GENERATION_MASK;
    let mut table = lock(&TABLE);
    let slot = table.slots.get_mut(index)?;
    if slot.generation != generation {
        return None;
    }
    let callback = slot.callback.take()?;
    slot.generation = (slot.generation + 1) & GENERATION_MASK;
    table.free.push(index);
    Some(callback)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_claims_its_callback_once_and_a_reused_slot_is_not_confused() {
        let first = register(Callback::Nudge(1));
        assert_ne!(first, 0, "a token is never null");
        assert!(matches!(claim(first), Some(Callback::Nudge(1))));
        assert!(claim(first).is_none(), "claimed already");
        // The slot is reused with a new generation: the stale token still claims nothing.
        let second = register(Callback::Nudge(2));
        assert_ne!(second, first);
        assert!(claim(first).is_none());
        assert!(matches!(claim(second), Some(Callback::Nudge(2))));
        for garbage in [0, 1, usize::MAX, usize::MAX >> 1, 0xdead_beef] {
            assert!(claim(garbage).is_none(), "{garbage:#x}");
        }
    }
}
