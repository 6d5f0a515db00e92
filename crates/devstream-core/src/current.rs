//! Per-thread, per-place current streams.
//!
//! Each thread has, for each place and stream type, a slot: [`make_current`] makes a stream
//! current until its [`CurrentGuard`] drops (like `with stream:` in CuPy and PyTorch), and
//! [`set_current`] makes one current without a scope (CuPy's `use()`, paddle's `set_stream`).
//! `None` means "the place's default stream", which the caller supplies.
//!
//! The rule, whatever order guards are dropped in: while guards live, the current stream is the
//! newest living guard's (or what a later [`set_current`] put in its place); after the last guard
//! ends, it is what was current before the first.
//!
//! ```
//! use devstream_core::{current, Place};
//! let place = Place::Cpu;
//! assert_eq!(current::current::<u32>(&place), None);
//! {
//!     let _outer = current::make_current(&place, 1u32);
//!     {
//!         let _inner = current::make_current(&place, 2u32);
//!         assert_eq!(current::current::<u32>(&place), Some(2));
//!     }
//!     assert_eq!(current::current::<u32>(&place), Some(1));
//! }
//! assert_eq!(current::current::<u32>(&place), None);
//!
//! // Guards may end in any order: the newest living one stays current.
//! let first = current::make_current(&place, 1u32);
//! let second = current::make_current(&place, 2u32);
//! drop(first);
//! assert_eq!(current::current::<u32>(&place), Some(2));
//! drop(second);
//! assert_eq!(current::current::<u32>(&place), None);
//! ```

use crate::Place;
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;

/// One place's current-stream state on one thread.
struct Slot<S> {
    /// What is current when no guard lives (set by [`set_current`] outside every guard).
    unscoped: Option<S>,
    /// The living guards, oldest first: each one's token and the stream it makes current
    /// (replaced by [`set_current`] while it is the newest).
    guards: Vec<(u64, Option<S>)>,
    /// The token the next guard gets.
    next_token: u64,
}

impl<S: Clone> Slot<S> {
    fn current(&self) -> Option<S> {
        match self.guards.last() {
            Some((_, stream)) => stream.clone(),
            None => self.unscoped.clone(),
        }
    }
}

thread_local! {
    static SLOTS: RefCell<HashMap<(TypeId, Place), Box<dyn Any>>> = RefCell::new(HashMap::new());
}

fn with_slot<S: Clone + 'static, R>(place: &Place, f: impl FnOnce(&mut Slot<S>) -> R) -> R {
    SLOTS.with(|slots| {
        let mut slots = slots.borrow_mut();
        let key = (TypeId::of::<S>(), place.clone());
        let entry = slots.entry(key).or_insert_with(|| {
            Box::new(Slot::<S> {
                unscoped: None,
                guards: Vec::new(),
                next_token: 0,
            })
        });
        let slot = entry
            .downcast_mut::<Slot<S>>()
            .expect("slot type is keyed by TypeId");
        f(slot)
    })
}

/// The calling thread's current stream for `place`, or `None` for the place's default.
pub fn current<S: Clone + 'static>(place: &Place) -> Option<S> {
    with_slot::<S, _>(place, |slot| slot.current())
}

/// Makes `stream` current without a scope and returns the previous current stream (`None`
/// meaning the default). While guards live it replaces the newest guard's stream until that
/// guard ends (then the next newest living guard's stream is current again); outside every
/// guard it lasts until the next `set_current`. `set_current(place, None)` makes the default
/// current in the same way, and never touches older guards.
pub fn set_current<S: Clone + 'static>(place: &Place, stream: Option<S>) -> Option<S> {
    with_slot::<S, _>(place, |slot| match slot.guards.last_mut() {
        Some((_, newest)) => std::mem::replace(newest, stream),
        None => std::mem::replace(&mut slot.unscoped, stream),
    })
}

/// Makes `stream` the calling thread's current stream for `place` until the guard drops.
pub fn make_current<S: Clone + 'static>(place: &Place, stream: S) -> CurrentGuard<S> {
    let token = with_slot::<S, _>(place, |slot| {
        let token = slot.next_token;
        slot.next_token += 1;
        slot.guards.push((token, Some(stream)));
        token
    });
    CurrentGuard {
        place: place.clone(),
        token,
        _not_send: PhantomData,
    }
}

/// Ends what [`make_current`] began when dropped: while other guards live, the newest of them
/// is current; after the last one, what was current before the first. Guards may be dropped in
/// any order (they are `!Send`, so always on the thread that made them).
#[must_use = "the stream is current only while the guard lives"]
pub struct CurrentGuard<S: Clone + 'static> {
    place: Place,
    token: u64,
    _not_send: PhantomData<(*const (), S)>,
}

impl<S: Clone + 'static> CurrentGuard<S> {
    /// The place whose current stream this guard set.
    pub fn place(&self) -> &Place {
        &self.place
    }
}

impl<S: Clone + 'static> Drop for CurrentGuard<S> {
    fn drop(&mut self) {
        // `try_with`: during thread teardown the slots may already be gone; nothing to restore.
        // The removed stream is dropped after the slot's borrow ends, so a stream whose drop
        // touches current streams again cannot hit the `RefCell` while it is borrowed.
        let removed = SLOTS.try_with(|_| {
            with_slot::<S, _>(&self.place, |slot| {
                // Usually the newest guard: search from the end.
                let index = slot
                    .guards
                    .iter()
                    .rposition(|(token, _)| *token == self.token)?;
                Some(slot.guards.remove(index))
            })
        });
        drop(removed);
    }
}

impl<S: Clone + 'static> std::fmt::Debug for CurrentGuard<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentGuard")
            .field("place", &self.place)
            .field("token", &self.token)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_nest_and_set_current_is_scoped_by_enclosing_guard() {
        let p = Place::Cpu;
        let q = Place::Cuda(0);
        assert_eq!(set_current(&p, Some(7u8)), None);
        assert_eq!(current::<u8>(&p), Some(7));
        {
            let _g = make_current(&p, 1u8);
            assert_eq!(current::<u8>(&p), Some(1));
            assert_eq!(current::<u8>(&q), None, "places are independent");
            assert_eq!(set_current(&p, Some(2u8)), Some(1));
            assert_eq!(current::<u8>(&p), Some(2));
        }
        assert_eq!(current::<u8>(&p), Some(7));
        assert_eq!(set_current::<u8>(&p, None), Some(7));
        assert_eq!(current::<u8>(&p), None);
    }

    #[test]
    fn out_of_order_drop_keeps_the_newest_living_guard_current() {
        let p = Place::Hip(3);
        assert_eq!(set_current(&p, Some(9u16)), None);
        let outer = make_current(&p, 1u16);
        let inner = make_current(&p, 2u16);
        drop(outer);
        assert_eq!(current::<u16>(&p), Some(2), "the inner guard still lives");
        let third = make_current(&p, 3u16);
        drop(inner);
        assert_eq!(current::<u16>(&p), Some(3));
        drop(third);
        assert_eq!(
            current::<u16>(&p),
            Some(9),
            "what was current before the first guard"
        );
    }

    #[test]
    fn set_current_none_inside_a_guard_keeps_the_outer_guards() {
        let p = Place::Wgpu(7);
        assert_eq!(set_current(&p, Some(5u32)), None);
        let outer = make_current(&p, 1u32);
        {
            let _inner = make_current(&p, 2u32);
            assert_eq!(set_current::<u32>(&p, None), Some(2));
            assert_eq!(
                current::<u32>(&p),
                None,
                "the default, until the inner guard ends"
            );
        }
        assert_eq!(
            current::<u32>(&p),
            Some(1),
            "the outer guard's stream is back"
        );
        drop(outer);
        assert_eq!(current::<u32>(&p), Some(5));
    }

    /// One step of a random program over the current-stream slots.
    #[derive(Debug, Clone)]
    enum Step {
        MakeCurrent(u8),
        SetCurrent(Option<u8>),
        /// Drop the living guard at this index (modulo the number living).
        Drop(usize),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            (0u8..4).prop_map(Step::MakeCurrent),
            proptest::option::of(0u8..4).prop_map(Step::SetCurrent),
            (0usize..8).prop_map(Step::Drop),
        ]
    }

    proptest::proptest! {
        /// Against a model: while guards live, the newest living guard's stream (or a later
        /// `set_current`) is current; after the last guard, what was current before the first.
        #[test]
        fn any_order_of_guards_and_set_current_follows_the_rule(
            steps in proptest::collection::vec(step(), 0..40)
        ) {
            // A fresh thread: an empty slot whatever ran before on the test thread.
            std::thread::spawn(move || {
                let p = Place::Cpu;
                // Model: the unscoped value, and each living guard's value (oldest first).
                let mut base: Option<u8> = None;
                let mut living: Vec<(CurrentGuard<u8>, Option<u8>)> = Vec::new();
                for step in steps {
                    match step {
                        Step::MakeCurrent(s) => living.push((make_current(&p, s), Some(s))),
                        Step::SetCurrent(s) => {
                            let expected = living.last().map_or(base, |(_, v)| *v);
                            assert_eq!(set_current(&p, s), expected, "set_current's return");
                            match living.last_mut() {
                                Some((_, v)) => *v = s,
                                None => base = s,
                            }
                        }
                        Step::Drop(i) if !living.is_empty() => {
                            let i = i % living.len();
                            drop(living.remove(i));
                        }
                        Step::Drop(_) => {}
                    }
                    let expected = living.last().map_or(base, |(_, v)| *v);
                    assert_eq!(current::<u8>(&p), expected);
                }
                while let Some(guard) = living.pop() {
                    drop(guard);
                }
                assert_eq!(current::<u8>(&p), base);
            })
            .join()
            .map_err(|_| proptest::test_runner::TestCaseError::fail("model mismatch (see panic)"))?;
        }
    }

    #[test]
    fn threads_are_independent() {
        let p = Place::Cpu;
        let _g = make_current(&p, 5u64);
        std::thread::spawn(move || assert_eq!(current::<u64>(&Place::Cpu), None))
            .join()
            .unwrap();
        assert_eq!(current::<u64>(&p), Some(5));
    }
}
