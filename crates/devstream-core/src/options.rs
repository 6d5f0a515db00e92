//! What a stream, an event or a capture is asked to be.

use crate::{Error, Priority, Result};

/// Options for a new stream.
///
/// The default is what `Stream::new` creates: [`Priority::Normal`], non-blocking (the stream
/// does not synchronise with a legacy default stream).
///
/// ```
/// use devstream_core::{Priority, StreamOptions};
/// let o = StreamOptions::default().priority(Priority::High).blocking(true);
/// assert_eq!(o.priority, Priority::High);
/// assert!(!o.non_blocking);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamOptions {
    /// The requested priority; normalised by the place's [`crate::PriorityRange`].
    pub priority: Priority,
    /// `true`: the stream does not synchronise with the legacy default stream
    /// (`CU_STREAM_NON_BLOCKING`).
    pub non_blocking: bool,
    /// `true` (the default, see [`crate::elide::default_enabled`]): `wait_event` /
    /// `wait_stream` skip waits that add no ordering (see [`crate::elide`]).
    pub elide_waits: bool,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            priority: Priority::Normal,
            non_blocking: true,
            elide_waits: crate::elide::default_enabled(),
        }
    }
}

impl StreamOptions {
    /// Sets the priority.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// `blocking(true)` makes a stream that synchronises with the legacy default stream
    /// (paddle's `blocking=True`, CuPy's `non_blocking=False`).
    pub fn blocking(mut self, blocking: bool) -> Self {
        self.non_blocking = !blocking;
        self
    }

    /// `elide_waits(false)` makes every `wait_event` / `wait_stream` on the stream a native
    /// wait, and gives its records no positions (see [`crate::elide`]).
    ///
    /// ```
    /// use devstream_core::StreamOptions;
    /// assert!(!StreamOptions::default().elide_waits(false).elide_waits);
    /// ```
    pub fn elide_waits(mut self, elide: bool) -> Self {
        self.elide_waits = elide;
        self
    }
}

/// Flags of a new event. Timing is off by default, as in `cudaEventDisableTiming` being the
/// cheap choice; use [`EventFlags::timed`] for events used with `elapsed`.
///
/// ```
/// use devstream_core::EventFlags;
/// assert!(!EventFlags::default().timing);
/// assert!(EventFlags::timed().timing);
/// assert!(EventFlags { interprocess: true, timing: true, blocking_sync: false }.validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EventFlags {
    /// Record a timestamp so that `elapsed` works.
    pub timing: bool,
    /// `synchronize` blocks the thread instead of spinning (`CU_EVENT_BLOCKING_SYNC`).
    pub blocking_sync: bool,
    /// The event may be shared with another process; CUDA requires timing off for it.
    pub interprocess: bool,
}

impl EventFlags {
    /// Flags with timing on.
    pub fn timed() -> Self {
        EventFlags {
            timing: true,
            ..EventFlags::default()
        }
    }

    /// Checks the combination: an interprocess event cannot have timing (CUDA's rule).
    #[inline]
    pub fn validate(self) -> Result<Self> {
        if self.interprocess && self.timing {
            return Err(interprocess_timing());
        }
        Ok(self)
    }
}

/// [`EventFlags::validate`]'s error, out of the line of every event creation.
#[cold]
#[inline(never)]
fn interprocess_timing() -> Error {
    Error::InvalidArgument("an interprocess event cannot have timing enabled".into())
}

/// How a stream capture interacts with unsafe calls made by other threads, as CUDA documents
/// for `cudaStreamBeginCapture`.
///
/// * `Global`: while any thread captures in global mode, potentially unsafe calls (e.g. a
///   synchronous allocation, a synchronize) from any thread fail.
/// * `ThreadLocal`: only the capturing thread's unsafe calls fail.
/// * `Relaxed`: no call is prohibited by the capture (CuPy's default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// `cudaStreamCaptureModeGlobal` (CUDA's default).
    #[default]
    Global,
    /// `cudaStreamCaptureModeThreadLocal`.
    ThreadLocal,
    /// `cudaStreamCaptureModeRelaxed`.
    Relaxed,
}
