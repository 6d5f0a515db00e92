//! The smallest complete devstream backend, to copy when adding one.
//!
//! It serves one place, `template:0`, a host "device" whose streams run their work at
//! submission: nothing is ever queued, so every submitted piece of work is done when the call
//! that submitted it returns. It implements only what the contract requires
//! ([`devstream_core::traits`]): places, capabilities, streams, events, `query`, `synchronize`,
//! `completion`, `record`, `wait_event`, `wait_stream`. Every optional operation (host functions,
//! capture, flags, buffers) is left at its default, which answers `Error::Unsupported`, and its
//! capability is off ([`Capabilities::none`]); the placeholders
//! [`UnsupportedGraph`], [`UnsupportedFlag`], [`UnsupportedBuffer`] and
//! [`UnsupportedHostBuffer`] stand for the types it does not have.
//!
//! It is registered as a custom device (`devstream_plugin::register_custom_device`) by the
//! facade's cargo feature `template`, and the conformance suite runs on it in CI:
//!
//! ```text
//! DEVSTREAM_PLACES=template:0 cargo test -p devstream --features template --test conformance
//! ```
//!
//! Used directly, with no dispatch:
//!
//! ```
//! use devstream_core::{DeviceBackend, DeviceStream, Error, StreamOptions};
//! use devstream_template::{TemplateBackend, place};
//! let s = TemplateBackend::new_stream(&place(), StreamOptions::default())?;
//! let e = s.record_event()?;
//! s.wait_event(&e)?;
//! assert!(s.query()?);
//! assert!(matches!(s.launch_host_func(Box::new(|| {})), Err(Error::Unsupported { .. })));
//! # Ok::<(), devstream_core::Error>(())
//! ```
#![warn(missing_docs)]

use devstream_core::{
    BackendKind, Capabilities, Completion, DeviceBackend, DeviceEvent, DeviceStream, Error,
    EventFlags, LiveCounts, Place, Priority, PriorityRange, Result, StreamOptions,
    UnsupportedBuffer, UnsupportedFlag, UnsupportedGraph, UnsupportedHostBuffer,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// `query`, `synchronize` and `completion` of a stream or event of this backend: its work is
/// done when the call that submitted it returns, so there is never anything to wait for.
macro_rules! done_at_submission {
    () => {
        fn query(&self) -> Result<bool> {
            Ok(true)
        }
        fn synchronize(&self) -> Result<()> {
            Ok(())
        }
        fn completion(&self) -> Completion {
            Completion::ready(Ok(()))
        }
    };
}

/// The device type the facade registers this backend under.
pub const DEVICE_TYPE: &str = "template";

/// The one place this backend serves, `template:0`.
pub fn place() -> Place {
    Place::Custom {
        device_type: DEVICE_TYPE.to_owned(),
        id: 0,
    }
}

/// `Ok` for the backend's place, `NoDevice` for another.
fn check_place(asked: &Place) -> Result<()> {
    if *asked == place() {
        Ok(())
    } else {
        Err(Error::NoDevice {
            place: asked.clone(),
            reason: "the template backend serves only template:0".into(),
        })
    }
}

/// Live user-created streams and events (the default stream is not counted).
static LIVE_STREAMS: AtomicUsize = AtomicUsize::new(0);
static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);

/// Counts one live object in `counter` for as long as it exists.
#[derive(Debug)]
struct Live(&'static AtomicUsize);

impl Live {
    fn new(counter: &'static AtomicUsize) -> Live {
        counter.fetch_add(1, Ordering::Relaxed);
        Live(counter)
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The registry entry: which places there are and how to make streams and events.
pub struct TemplateBackend;

impl DeviceBackend for TemplateBackend {
    type Stream = TemplateStream;
    // A custom device: the facade reaches it through the custom-device registry.
    const KIND: BackendKind = BackendKind::Plugin;

    fn places() -> Vec<Place> {
        vec![place()]
    }
    fn probe() -> Result<()> {
        Ok(())
    }
    fn capabilities(place: &Place) -> Result<Capabilities> {
        check_place(place)?;
        Ok(capabilities())
    }
    fn priority_range(place: &Place) -> Result<PriorityRange> {
        check_place(place)?;
        Ok(PriorityRange::NONE)
    }
    fn new_stream(place: &Place, options: StreamOptions) -> Result<TemplateStream> {
        check_place(place)?;
        Ok(TemplateStream::new(options, true))
    }
    fn default_stream(place: &Place) -> Result<TemplateStream> {
        check_place(place)?;
        static DEFAULT: OnceLock<TemplateStream> = OnceLock::new();
        Ok(DEFAULT
            .get_or_init(|| TemplateStream::new(StreamOptions::default(), false))
            .clone())
    }
    fn per_thread_stream(place: &Place) -> Result<TemplateStream> {
        check_place(place)?;
        Err(Error::unsupported("Stream::per_thread", place))
    }
    fn new_event(place: &Place, flags: EventFlags) -> Result<TemplateEvent> {
        check_place(place)?;
        let flags = flags.validate()?;
        if flags.timing {
            return Err(Error::unsupported("Event::new(timing)", place));
        }
        if flags.interprocess {
            return Err(Error::unsupported("Event::new(interprocess)", place));
        }
        Ok(TemplateEvent::new(flags))
    }
    fn new_flag(place: &Place) -> Result<UnsupportedFlag> {
        check_place(place)?;
        Err(Error::unsupported("Flag::new", place))
    }
    fn live_counts() -> LiveCounts {
        LiveCounts {
            streams: LIVE_STREAMS.load(Ordering::Relaxed),
            events: LIVE_EVENTS.load(Ordering::Relaxed),
        }
    }
}

/// Every capability off: no priorities, capture, timing, host functions, flags or buffers.
/// Streams never run work concurrently (they run none: work is done at submission), and
/// `query` never blocks.
fn capabilities() -> Capabilities {
    let mut caps = Capabilities::none();
    caps.nonblocking_query = true;
    caps
}

/// A stream of `template:0`. Work runs at submission, so a stream is always idle: `query` is
/// true, `synchronize` returns at once, and waits are already satisfied.
#[derive(Clone, Debug)]
pub struct TemplateStream(Arc<StreamInner>);

#[derive(Debug)]
struct StreamInner {
    id: u64,
    place: Place,
    non_blocking: bool,
    /// `None` for the default stream, which is not a user-created object.
    _live: Option<Live>,
}

impl TemplateStream {
    fn new(options: StreamOptions, user_created: bool) -> TemplateStream {
        TemplateStream(Arc::new(StreamInner {
            id: devstream_core::next_id(),
            place: place(),
            non_blocking: options.non_blocking,
            _live: user_created.then(|| Live::new(&LIVE_STREAMS)),
        }))
    }
}

impl DeviceStream for TemplateStream {
    type Event = TemplateEvent;
    type Graph = UnsupportedGraph<Self>;
    type Flag = UnsupportedFlag;
    type Buffer = UnsupportedBuffer;
    type HostBuffer = UnsupportedHostBuffer;

    fn place(&self) -> &Place {
        &self.0.place
    }
    fn id(&self) -> u64 {
        self.0.id
    }
    fn priority(&self) -> Priority {
        Priority::Normal
    }
    fn native_priority(&self) -> i32 {
        0
    }
    fn is_non_blocking(&self) -> bool {
        self.0.non_blocking
    }
    fn capabilities(&self) -> Capabilities {
        capabilities()
    }
    done_at_submission!();
    fn record(&self, _event: &TemplateEvent) -> Result<()> {
        // The event captures all work submitted so far, which is done: it stays complete.
        Ok(())
    }
    fn record_event(&self) -> Result<TemplateEvent> {
        Ok(TemplateEvent::new(EventFlags::default()))
    }
    fn wait_event(&self, _event: &TemplateEvent) -> Result<()> {
        // What the event captured ran when it was submitted: nothing to wait for.
        Ok(())
    }
    fn wait_stream(&self, _other: &TemplateStream) -> Result<()> {
        Ok(())
    }
}

/// An event of `template:0`. Everything it can capture is already done when it is recorded,
/// so it is always complete.
#[derive(Clone, Debug)]
pub struct TemplateEvent(Arc<EventInner>);

#[derive(Debug)]
struct EventInner {
    id: u64,
    flags: EventFlags,
    _live: Live,
}

impl TemplateEvent {
    fn new(flags: EventFlags) -> TemplateEvent {
        TemplateEvent(Arc::new(EventInner {
            id: devstream_core::next_id(),
            flags,
            _live: Live::new(&LIVE_EVENTS),
        }))
    }
}

impl DeviceEvent for TemplateEvent {
    fn place(&self) -> Option<Place> {
        Some(place())
    }
    fn id(&self) -> u64 {
        self.0.id
    }
    fn flags(&self) -> EventFlags {
        self.0.flags
    }
    done_at_submission!();
    fn elapsed(&self, _end: &Self) -> Result<Duration> {
        // Timing is off: no event of this place has it.
        Err(Error::TimingDisabled)
    }
}
