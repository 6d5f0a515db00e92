//! The facade event.

use crate::dispatch::{EventApi, Member};
use crate::Stream;
use devstream_core::{Completion, DeviceBackend, EventFlags, Place, Result};
use std::future::IntoFuture;
use std::hash::{Hash, Hasher};
use std::time::Duration;

crate::dispatch::facade_enum! {
    /// A marker in a stream's work: record it, wait for it from other streams, query it, time it.
    ///
    /// ```
    /// use devstream::{Event, EventFlags, Place, Stream};
    /// let s = Stream::new(&Place::Cpu).unwrap();
    /// let start = Event::new(&Place::Cpu, EventFlags::timed()).unwrap();
    /// assert!(start.query().unwrap(), "a never-recorded event is complete");
    /// start.record(&s).unwrap();
    /// s.launch_host_func(|| std::thread::sleep(std::time::Duration::from_millis(2))).unwrap();
    /// let end = Event::new(&Place::Cpu, EventFlags::timed()).unwrap();
    /// end.record(&s).unwrap();
    /// end.synchronize().unwrap();
    /// assert!(start.elapsed(&end).unwrap() >= std::time::Duration::from_millis(2));
    /// ```
    pub enum Event(EventApi, "event"): Clone
        = [CpuEvent, CudaEvent, HipEvent, WgpuEvent, PluginEvent];
}

impl Event {
    /// A new, never-recorded event. Timing is off unless `flags.timing`.
    #[inline]
    pub fn new(place: &Place, flags: EventFlags) -> Result<Event> {
        let flags = flags.validate()?;
        crate::registry::with_backend!(place, B => B::new_event(place, flags).map(Member::wrap))
    }

    /// Records the event on `stream`: it now captures all work submitted there so far.
    #[inline]
    pub fn record(&self, stream: &Stream) -> Result<()> {
        stream.record(self)
    }

    /// The event's place.
    #[inline]
    pub fn place(&self) -> Option<Place> {
        EventApi::place(self)
    }
    /// A process-unique id.
    #[inline]
    pub fn id(&self) -> u64 {
        EventApi::id(self)
    }
    /// The flags it was created with.
    #[inline]
    pub fn flags(&self) -> EventFlags {
        EventApi::flags(self)
    }
    /// `true` iff the captured work is done (a never-recorded event is done).
    #[inline]
    pub fn query(&self) -> Result<bool> {
        crate::stream::spanned(
            || tracing::trace_span!("devstream.event_query", event = self.id()),
            || EventApi::query(self),
        )
    }
    /// Blocks until the captured work is done. Inside a host function, `Error::WouldDeadlock`
    /// where that work may wait for work queued after the host function.
    #[inline]
    pub fn synchronize(&self) -> Result<()> {
        crate::stream::spanned(
            || tracing::trace_span!("devstream.event_synchronize", event = self.id()),
            || {
                crate::cross::check_host_fn_event_wait(self)?;
                EventApi::synchronize(self)
            },
        )
    }
    /// A future that is ready when the work this event captured is done (at once for a
    /// never-recorded event), with the result [`synchronize`](Event::synchronize) would give.
    ///
    /// It holds what it needs (not `self`), so the event may be dropped or re-recorded while it
    /// is pending; it still waits for what the event captured when `completion` was called.
    /// See [`Stream::completion`] for how each backend completes it. `Event` (and `&Event`)
    /// also implement [`IntoFuture`], so an event can be awaited directly.
    ///
    /// ```
    /// use devstream::{Event, EventFlags, Place, Stream};
    /// let s = Stream::new(&Place::Cpu).unwrap();
    /// let fresh = Event::new(&Place::Cpu, EventFlags::default()).unwrap();
    /// assert!(fresh.completion().is_ready(), "a never-recorded event is ready at once");
    ///
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// s.launch_host_func(move || { let _ = rx.recv(); }).unwrap();
    /// let done = s.record_event().unwrap().completion();
    /// assert!(!done.is_ready(), "the host function holds the stream");
    /// tx.send(()).unwrap();
    /// s.synchronize().unwrap();
    /// // In async code: `done.await` (or `event.await`).
    /// # drop(done);
    /// ```
    #[inline]
    pub fn completion(&self) -> Completion {
        EventApi::completion(self)
    }
    /// Time from this event to `end`. `Error::TimingDisabled` if either lacks timing,
    /// `Error::NotRecorded` if either was never recorded, `Error::NotReady` if either is not
    /// complete.
    #[inline]
    pub fn elapsed(&self, end: &Event) -> Result<Duration> {
        EventApi::elapsed(self, end)
    }
    /// The backend handle inside.
    #[inline]
    pub fn backend<T: Member<Event>>(&self) -> Option<&T> {
        T::unwrap_ref(self)
    }
}

/// `event.await`: the same as `event.completion().await`.
///
/// ```
/// # async fn f() -> devstream::Result<()> {
/// use devstream::{Place, Stream};
/// let s = Stream::new(&Place::Cpu)?;
/// let e = s.record_event()?;
/// (&e).await?; // borrows the event
/// e.await      // consumes it
/// # }
/// ```
impl IntoFuture for Event {
    type Output = Result<()>;
    type IntoFuture = Completion;
    fn into_future(self) -> Completion {
        self.completion()
    }
}

/// `(&event).await`: the same as `event.completion().await`.
impl IntoFuture for &Event {
    type Output = Result<()>;
    type IntoFuture = Completion;
    fn into_future(self) -> Completion {
        self.completion()
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        self.id() == other.id()
    }
}
impl Eq for Event {}
impl Hash for Event {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id().hash(state);
    }
}
