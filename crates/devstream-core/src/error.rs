//! The typed errors every backend returns.

use crate::{mempool::PoolStats, CommFailure, Place};

/// Result alias used throughout devstream.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, typed. `Clone` so that a stream can hand the same first error
/// to every `synchronize` that observes it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The text does not name a place.
    #[error("invalid place {text:?}: {reason}")]
    InvalidPlace {
        /// The text that was parsed.
        text: String,
        /// Why it was refused.
        reason: String,
    },
    /// An argument is out of its domain (a size, an offset, a priority, a flag combination).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The place's backend is not compiled into this build.
    #[error(
        "the backend for {place} is not compiled in: enable devstream's cargo feature {feature:?}"
    )]
    BackendNotCompiled {
        /// The cargo feature that enables the backend.
        feature: &'static str,
        /// The place that was asked for.
        place: String,
    },
    /// The backend is compiled in but its runtime library cannot be used here.
    #[error("the {backend} backend is unavailable: {reason}")]
    BackendUnavailable {
        /// The backend name (`"cuda"`, `"hip"`, `"wgpu"`, `"plugin"`).
        backend: &'static str,
        /// Why: library missing, symbol missing, initialisation failed.
        reason: String,
    },
    /// The runtime is there but the device is not (index out of range, no device at all).
    #[error("no device for {place}: {reason}")]
    NoDevice {
        /// The place that was asked for.
        place: Place,
        /// What the runtime reported.
        reason: String,
    },
    /// The place lacks the capability this operation needs.
    #[error("{op} is not supported on {place}")]
    Unsupported {
        /// The operation, e.g. `"begin_capture"`.
        op: &'static str,
        /// The place that lacks it.
        place: Place,
    },
    /// Two objects of different places (or backends) were combined without a bridge.
    #[error("{op}: {found} cannot be used with {expected}")]
    PlaceMismatch {
        /// The operation.
        op: &'static str,
        /// The place of the receiver.
        expected: Place,
        /// The place of the argument.
        found: Place,
    },
    /// A capture rule was broken (an operation that cannot be captured, capture on the legacy
    /// default stream, end without begin, ...). The capture, if any, is invalidated.
    #[error("stream capture: {op}: {reason}")]
    Capture {
        /// The operation that broke the rule.
        op: &'static str,
        /// What rule.
        reason: String,
    },
    /// `elapsed` with an event that was created without timing.
    #[error("elapsed: an event was created without timing (use EventFlags::timed())")]
    TimingDisabled,
    /// `elapsed` with an event that was never recorded.
    #[error("elapsed: an event was never recorded")]
    NotRecorded,
    /// `elapsed` with an event whose work is not complete yet.
    #[error("elapsed: an event has not completed yet")]
    NotReady,
    /// A host function submitted to a stream panicked; the stream reports it from
    /// `synchronize` (the panic never crosses into the runtime).
    #[error("a host function panicked on stream {stream}: {message}")]
    HostFuncPanicked {
        /// The stream's id.
        stream: u64,
        /// The panic payload, if it was a string.
        message: String,
    },
    /// A blocking call made inside a host function (or a CPU kernel) would wait for work that can
    /// only run after that host function returns: work queued after it on its own stream, on a
    /// stream that waits for such work, or on the worker or queue it occupies. It is refused
    /// instead of hanging; inside a host function, what can be waited for is stream order up to
    /// that host function.
    ///
    /// ```
    /// # use devstream_core::Error;
    /// let e = Error::WouldDeadlock { op: "synchronize", reason: "its own stream".into() };
    /// assert!(e.to_string().contains("inside a host function"));
    /// ```
    #[error("{op} inside a host function would deadlock: {reason}")]
    WouldDeadlock {
        /// The blocking call (`"synchronize"`, `"Event::synchronize"`, `"HostBuffer::read"`, ...).
        op: &'static str,
        /// What it would wait for.
        reason: String,
    },
    /// A native driver/runtime call failed.
    #[error("{backend}: {call} failed with {code} ({message})")]
    Driver {
        /// The backend.
        backend: &'static str,
        /// The native function.
        call: &'static str,
        /// The native error code.
        code: i64,
        /// The native error name/description.
        message: String,
    },
    /// A device allocation failed for lack of memory. From a memory pool (every `alloc` and
    /// `alloc_from` where `Capabilities::memory_pools` is on) it comes after the place's pools
    /// were trimmed and the allocation retried once, and carries the pool's statistics at that
    /// moment; other allocations (host buffers, places without pools) carry `None`. Match it
    /// with `..` (`Error::OutOfMemory { bytes, .. }`); make one with [`Error::out_of_memory`].
    #[error(
        "out of memory on {place}: {bytes} bytes requested{}",
        pool_note(stats)
    )]
    OutOfMemory {
        /// The place.
        place: Place,
        /// Bytes requested.
        bytes: usize,
        /// The statistics of the pool the allocation came from, after its retry.
        stats: Option<PoolStats>,
    },
    /// A collective failed (cargo feature `comm`): a peer died or left, the collective missed
    /// the communicator's deadline, ranks disagreed on the call, or the communicator had failed
    /// before. Reported by the stream's `synchronize` (argument errors are `InvalidArgument`,
    /// returned before anything is queued). A communicator that failed stays failed on every
    /// rank: later collectives fail with [`CommFailure::Aborted`]; make a new one.
    ///
    /// ```
    /// # use devstream_core::{CommFailure, Error};
    /// let e = Error::Comm { op: "all_reduce", failure: CommFailure::Timeout, reason: "rank 1".into() };
    /// assert!(e.to_string().contains("deadline"));
    /// ```
    #[error("{op}: {failure}: {reason}")]
    Comm {
        /// The collective (`"all_reduce"`, `"recv"`, `"init"`, ...).
        op: &'static str,
        /// Why, as a kind to match on.
        failure: CommFailure,
        /// Which rank, what was seen.
        reason: String,
    },
    /// The work a [`Completion`](crate::Completion) waited for can no longer be observed: its
    /// stream was destroyed with that work unfinished (e.g. held by a flag nobody can set any
    /// more), or the backend's notification of it was lost. Never a result of work that ran.
    #[error("completion abandoned: {reason}")]
    Abandoned {
        /// What happened.
        reason: String,
    },
    /// A custom-device plug-in is malformed or misbehaved.
    #[error("plug-in {plugin}: {reason}")]
    Plugin {
        /// The plug-in (path or device type).
        plugin: String,
        /// What is wrong, naming the function where there is one.
        reason: String,
    },
}

/// The part of an out-of-memory message that describes the pool.
fn pool_note(stats: &Option<PoolStats>) -> String {
    match stats {
        Some(s) => format!(
            " (pool: {} bytes used by {} buffers, {} reserved)",
            s.used_bytes, s.allocations, s.reserved_bytes
        ),
        None => String::new(),
    }
}

impl Error {
    /// An [`Error::OutOfMemory`] of `bytes` on `place` from outside a pool (no statistics).
    ///
    /// ```
    /// # use devstream_core::{Error, Place};
    /// let e = Error::out_of_memory(&Place::Cpu, 8);
    /// assert!(matches!(e, Error::OutOfMemory { bytes: 8, stats: None, .. }));
    /// ```
    pub fn out_of_memory(place: &Place, bytes: usize) -> Error {
        Error::OutOfMemory {
            place: place.clone(),
            bytes,
            stats: None,
        }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(op: &'static str, place: &Place) -> Error {
        Error::Unsupported {
            op,
            place: place.clone(),
        }
    }

    /// Shorthand for [`Error::Capture`].
    pub fn capture(op: &'static str, reason: impl Into<String>) -> Error {
        Error::Capture {
            op,
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::PlaceMismatch`].
    pub fn mismatch(op: &'static str, expected: &Place, found: &Place) -> Error {
        Error::PlaceMismatch {
            op,
            expected: expected.clone(),
            found: found.clone(),
        }
    }
}
