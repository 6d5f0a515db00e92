//! Counting the host-function calls of graph launches that run one after another.
//!
//! A graph replays its captured host functions on every launch, and nothing tells a host
//! function which launch runs it. A backend that needs to know (to report a failure to the
//! launch's stream, say) runs the launches of such a graph in launch order, each after the
//! previous one's end, and keeps the launches not finished yet in a queue: the front launch is
//! the one running, and it is done with its host functions once as many calls as the graph
//! captured have returned. [`LaunchCalls`] is that count; the queue stays the backend's.
//!
//! ```
//! use devstream_core::launch_calls::LaunchCalls;
//! let calls = LaunchCalls::default();
//! calls.add_per_launch(2);
//! assert!(!calls.call_done()); // the first of the front launch's two calls
//! assert!(calls.call_done()); // its last: the next launch is at the front now
//! assert!(!calls.call_done());
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many host-function calls each launch of a graph makes, and how many of the front
/// launch's have returned.
#[derive(Debug, Default)]
pub struct LaunchCalls {
    /// The host functions captured into the graph: each runs once per launch.
    per_launch: AtomicUsize,
    /// Calls of the front launch that have returned.
    calls: AtomicUsize,
}

impl LaunchCalls {
    /// Host-function calls per launch (0: the graph captured none).
    pub fn per_launch(&self) -> usize {
        self.per_launch.load(Ordering::Acquire)
    }

    /// Sets the calls per launch (once the capture is complete).
    pub fn set_per_launch(&self, count: usize) {
        self.per_launch.store(count, Ordering::Release);
    }

    /// Counts `count` more calls per launch (host functions captured one by one).
    pub fn add_per_launch(&self, count: usize) {
        self.per_launch.fetch_add(count, Ordering::AcqRel);
    }

    /// One call of the front launch has returned (or unwound). Answers whether it was that
    /// launch's last, so that the caller moves on to the next launch (the count starts again
    /// for it); always `false` for a graph without host functions.
    pub fn call_done(&self) -> bool {
        let per_launch = self.per_launch();
        if per_launch == 0 {
            return false;
        }
        if self.calls.fetch_add(1, Ordering::AcqRel) + 1 >= per_launch {
            self.calls.store(0, Ordering::Release);
            return true;
        }
        false
    }
}
