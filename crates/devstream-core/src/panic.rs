//! Containing the panics of user code that devstream runs or drops on its own threads (host
//! closures, their destructors, panic payloads): nothing unwinds into a runtime callback, out of
//! a worker or poller loop, or across a C boundary.
//!
//! A panic payload is user data too, and its `Drop` may panic again, with a payload whose `Drop`
//! may panic again, and so on. [`drop_payload`] drops such a chain link by link, each under
//! `catch_unwind`, up to [`MAX_NESTED_PAYLOADS`] links, and forgets (leaks) what is left, so a
//! payload that panics with a copy of itself on every drop cannot keep a thread busy forever.
//!
//! ```
//! use devstream_core::panic::{drop_contained, message};
//! struct Loud;
//! impl Drop for Loud {
//!     fn drop(&mut self) {
//!         panic!("destructor");
//!     }
//! }
//! # std::panic::set_hook(Box::new(|_| {}));
//! assert_eq!(drop_contained(Loud).as_deref(), Some("destructor"));
//! assert_eq!(drop_contained(5u32), None);
//! let payload = std::panic::catch_unwind(|| panic!("boom")).unwrap_err();
//! assert_eq!(message(payload.as_ref()), "boom");
//! ```

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// How many nested payloads [`drop_payload`] drops (each the payload of the previous one's
/// panicking `Drop`) before it forgets the rest.
pub const MAX_NESTED_PAYLOADS: usize = 16;

/// The text of a panic payload (`&str` or `String`), or a fixed text for any other payload.
pub fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

/// Drops a panic payload where no panic may escape. If its `Drop` panics, that panic's payload
/// is dropped the same way, up to [`MAX_NESTED_PAYLOADS`] links; a longer chain's last payload
/// is forgotten (leaked).
pub fn drop_payload(payload: Box<dyn Any + Send>) {
    let mut payload = payload;
    for _ in 0..MAX_NESTED_PAYLOADS {
        match catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            Ok(()) => return,
            Err(next) => payload = next,
        }
    }
    std::mem::forget(payload);
}

/// [`message`] of a payload, which is then dropped with [`drop_payload`].
pub fn take_message(payload: Box<dyn Any + Send>) -> String {
    let text = message(payload.as_ref());
    drop_payload(payload);
    text
}

/// Drops `value` (user data whose `Drop` may panic) where no panic may escape: the message of
/// its destructor's panic, if it panicked (the payload is dropped with [`drop_payload`]).
pub fn drop_contained<T>(value: T) -> Option<String> {
    catch_unwind(AssertUnwindSafe(move || drop(value)))
        .err()
        .map(take_message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A payload whose `Drop` panics with another such payload, `left` more times, counting
    /// the drops.
    struct Chain {
        left: usize,
        drops: Arc<AtomicUsize>,
    }

    impl Drop for Chain {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
            if self.left > 0 {
                std::panic::panic_any(Chain {
                    left: self.left - 1,
                    drops: self.drops.clone(),
                });
            }
        }
    }

    fn quiet() {
        std::panic::set_hook(Box::new(|_| {}));
    }

    #[test]
    fn a_short_chain_of_panicking_payloads_is_dropped_to_the_end() {
        quiet();
        let drops = Arc::new(AtomicUsize::new(0));
        drop_payload(Box::new(Chain {
            left: 3,
            drops: drops.clone(),
        }));
        assert_eq!(drops.load(Ordering::SeqCst), 4, "every link dropped once");
        assert_eq!(Arc::strong_count(&drops), 1, "nothing leaked");
    }

    #[test]
    fn an_endless_chain_is_dropped_up_to_the_limit_then_forgotten() {
        quiet();
        let drops = Arc::new(AtomicUsize::new(0));
        drop_payload(Box::new(Chain {
            left: usize::MAX,
            drops: drops.clone(),
        }));
        assert_eq!(drops.load(Ordering::SeqCst), MAX_NESTED_PAYLOADS);
        assert_eq!(Arc::strong_count(&drops), 2, "the last payload is leaked");
    }

    #[test]
    fn messages_of_string_and_other_payloads() {
        quiet();
        let text = catch_unwind(|| panic!("{}", String::from("owned"))).unwrap_err();
        assert_eq!(take_message(text), "owned");
        let other = catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(take_message(other), "a panic with a non-string payload");
        let drops = Arc::new(AtomicUsize::new(0));
        let value = Chain {
            left: 2,
            drops: drops.clone(),
        };
        assert_eq!(
            drop_contained(value).as_deref(),
            Some("a panic with a non-string payload")
        );
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    }
}
