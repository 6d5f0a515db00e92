//! Per-thread, per-place current streams.
//!
//! Each thread has, for each place and stream type, a stack: [`make_current`] pushes and its
//! [`CurrentGuard`] pops on drop (like `with stream:` in CuPy and PyTorch), [`set_current`]
//! replaces the top without a scope (CuPy's `use()`, paddle's `set_stream`). An empty stack
//! means "the place's default stream", which the caller supplies.
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
//! ```

use crate::Place;
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;

thread_local! {
    static STACKS: RefCell<HashMap<(TypeId, Place), Box<dyn Any>>> = RefCell::new(HashMap::new());
}

fn with_stack<S: Clone + 'static, R>(place: &Place, f: impl FnOnce(&mut Vec<S>) -> R) -> R {
    STACKS.with(|stacks| {
        let mut stacks = stacks.borrow_mut();
        let key = (TypeId::of::<S>(), place.clone());
        let entry = stacks
            .entry(key)
            .or_insert_with(|| Box::new(Vec::<S>::new()));
        let stack = entry
            .downcast_mut::<Vec<S>>()
            .expect("stack type is keyed by TypeId");
        f(stack)
    })
}

/// The calling thread's current stream for `place`, or `None` for the place's default.
pub fn current<S: Clone + 'static>(place: &Place) -> Option<S> {
    with_stack::<S, _>(place, |stack| stack.last().cloned())
}

/// Makes `stream` current without a scope and returns the previous current stream (`None`
/// meaning the default). Inside a guard's scope it replaces the guard's stream until the guard
/// ends; `set_current(place, None)` returns to the default.
pub fn set_current<S: Clone + 'static>(place: &Place, stream: Option<S>) -> Option<S> {
    with_stack::<S, _>(place, |stack| {
        let previous = stack.pop();
        match stream {
            Some(s) => stack.push(s),
            // An empty top means "default": keep the stack depth so guards still pop correctly.
            None if !stack.is_empty() || previous.is_some() => {
                stack.clear();
            }
            None => {}
        }
        previous
    })
}

/// Pushes `stream` as the calling thread's current stream for `place` until the guard drops.
pub fn make_current<S: Clone + 'static>(place: &Place, stream: S) -> CurrentGuard<S> {
    let depth = with_stack::<S, _>(place, |stack| {
        stack.push(stream);
        stack.len() - 1
    });
    CurrentGuard {
        place: place.clone(),
        depth,
        _not_send: PhantomData,
    }
}

/// Restores the previous current stream when dropped. Guards are meant to end in LIFO order
/// (they are `!Send` and usually scoped); if an outer guard ends first, the stack unwinds to it,
/// so the current stream is never one whose scope has ended.
#[must_use = "the stream is current only while the guard lives"]
pub struct CurrentGuard<S: Clone + 'static> {
    place: Place,
    depth: usize,
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
        let _ = STACKS.try_with(|_| {
            with_stack::<S, _>(&self.place, |stack| stack.truncate(self.depth));
        });
    }
}

impl<S: Clone + 'static> std::fmt::Debug for CurrentGuard<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentGuard")
            .field("place", &self.place)
            .field("depth", &self.depth)
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
    fn out_of_order_drop_never_leaves_a_dead_scope_current() {
        let p = Place::Hip(3);
        let outer = make_current(&p, 1u16);
        let inner = make_current(&p, 2u16);
        drop(outer);
        assert_eq!(current::<u16>(&p), None);
        drop(inner);
        assert_eq!(current::<u16>(&p), None);
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
