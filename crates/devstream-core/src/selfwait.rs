//! The host-function self-wait rule, kept once for every backend.
//!
//! A host function runs in its stream's order: work queued on that stream after it cannot start
//! before it returns. A blocking call made from inside a host function (`synchronize`,
//! `Event::synchronize`, a host-buffer access waiting for a copy) whose target could wait —
//! directly, or through other streams' waits on events — for such later work would never end.
//! Every backend refuses that call with [`Error::WouldDeadlock`] instead of hanging; a call whose
//! target is complete, or provably ordered before the host function, proceeds.
//!
//! How a backend proves "could wait for later work" is its own (what it holds back, what it
//! hands to a runtime), but the search is the same everywhere: from what the call waits for,
//! follow the incomplete waits to the work they wait for, each once, until the running host
//! function's later work is reached ([`reaches_host_fn`]) or nothing is left.
//!
//! ```
//! use devstream_core::selfwait::{reaches_host_fn, Reach};
//! // Stream 1 waits on stream 2, which waits on stream 3, which is behind the host function.
//! let step = |stream: &u32| match stream {
//!     3 => Reach::HostFn,
//!     s => Reach::Waits(vec![s + 1]),
//! };
//! assert!(reaches_host_fn([1], step));
//! assert!(!reaches_host_fn([4], |_: &u32| Reach::Waits(vec![])));
//! ```

use crate::Error;

/// What one step of the search found about the work it was given.
#[derive(Debug)]
pub enum Reach<N> {
    /// The work comes after the running host function on its own stream.
    HostFn,
    /// The work is not behind the host function itself, but waits for these (incomplete) works.
    Waits(Vec<N>),
}

/// Whether any of `start` could wait for work queued after the running host function: follows
/// [`Reach::Waits`] from each work `step` is given, each work once (equal works are one), until a
/// step answers [`Reach::HostFn`]. `step` may take locks; it is never called re-entrantly.
pub fn reaches_host_fn<N: PartialEq>(
    start: impl IntoIterator<Item = N>,
    mut step: impl FnMut(&N) -> Reach<N>,
) -> bool {
    let mut pending: Vec<N> = start.into_iter().collect();
    let mut seen: Vec<N> = Vec::new();
    while let Some(work) = pending.pop() {
        if seen.contains(&work) {
            continue;
        }
        match step(&work) {
            Reach::HostFn => return true,
            Reach::Waits(next) => pending.extend(next),
        }
        seen.push(work);
    }
    false
}

/// The error of a blocking call refused by the rule: `op` is the call, `reason` what it would
/// have waited for.
#[cold]
pub fn would_deadlock(op: &'static str, reason: impl Into<String>) -> Error {
    Error::WouldDeadlock {
        op,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_end_and_each_work_is_asked_once() {
        let mut asked = Vec::new();
        let found = reaches_host_fn([0u32], |n| {
            asked.push(*n);
            Reach::Waits(vec![(n + 1) % 3, (n + 2) % 3])
        });
        assert!(!found);
        asked.sort_unstable();
        assert_eq!(asked, [0, 1, 2]);
    }

    #[test]
    fn the_error_names_the_call() {
        let error = would_deadlock("synchronize", "its own stream");
        assert!(matches!(
            error,
            Error::WouldDeadlock {
                op: "synchronize",
                ..
            }
        ));
    }
}
