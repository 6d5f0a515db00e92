//! `PluginEvent`: a plug-in event (a fresh plug-in event per record) or a Rust-registered
//! backend's event.

use crate::queue::{lock, RawEvent, StreamCore, LIVE_EVENTS};
use crate::repr::Repr;
use devstream_core::{Completion, DeviceEvent, Error, EventFlags, Place, Result};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An event of a custom-device place.
///
/// For a plug-in, each record creates a fresh plug-in event (`create_event` + `record_event`)
/// and the event points at the latest one; waits keep the one they were given. A
/// never-recorded event is complete without asking the plug-in. The ABI has no timing, so
/// timed events are refused (`Error::Unsupported`) and `elapsed` answers `TimingDisabled`.
#[derive(Clone, Debug)]
pub struct PluginEvent(pub(crate) EventRepr);

impl PluginEvent {
    /// The plug-in's `C_Event` of the latest record (possibly null: some plug-ins never write
    /// it), or `None` when never recorded or on a Rust-registered device. It stays valid while
    /// this event (or a wait on it) keeps that record.
    pub fn as_raw(&self) -> Option<crate::sys::C_Event> {
        match &self.0 {
            EventRepr::Abi(e) => {
                // Someone else may record it now: redundant-wait elision stops.
                crate::capture::foreign_handles();
                e.raw().map(|raw| raw.handle().event())
            }
            EventRepr::Rust(_) => None,
        }
    }
}

pub(crate) type EventRepr = Repr<Arc<AbiEvent>, Arc<dyn devstream_core::dynamic::DynEvent>>;

#[derive(Debug)]
pub(crate) struct AbiEvent {
    pub(crate) id: u64,
    pub(crate) place: Place,
    pub(crate) flags: EventFlags,
    pub(crate) current: Mutex<Option<Arc<RawEvent>>>,
    /// The capture (runtime number, capture id) the current record was made in, if any: its
    /// work runs only when the graph is launched.
    captured_in: Mutex<Option<(usize, u64)>>,
}

impl AbiEvent {
    pub(crate) fn new(place: Place, flags: EventFlags) -> AbiEvent {
        LIVE_EVENTS.fetch_add(1, Ordering::SeqCst);
        AbiEvent {
            id: devstream_core::next_id(),
            place,
            flags,
            current: Mutex::new(None),
            captured_in: Mutex::new(None),
        }
    }

    /// Captures `core`'s work submitted so far (replacing an earlier capture); `capture` is
    /// the capture `core` submits into, if any.
    pub(crate) fn record(
        &self,
        core: &Arc<StreamCore>,
        capture: Option<&Arc<crate::capture::CaptureShared>>,
    ) -> Result<()> {
        let raw = core.record_for_event()?;
        *lock(&self.current) = Some(raw);
        *lock(&self.captured_in) = capture.map(|c| (core.runtime.index(), c.id()));
        Ok(())
    }

    /// Whether the current record was made in a capture that is still active.
    pub(crate) fn in_active_capture(&self) -> bool {
        lock(&self.captured_in)
            .is_some_and(|(runtime, id)| crate::capture::find(runtime, id).is_some())
    }

    pub(crate) fn raw(&self) -> Option<Arc<RawEvent>> {
        lock(&self.current).clone()
    }
}

impl Drop for AbiEvent {
    fn drop(&mut self) {
        LIVE_EVENTS.fetch_sub(1, Ordering::SeqCst);
    }
}

impl DeviceEvent for PluginEvent {
    fn place(&self) -> Option<Place> {
        self.0.either(|e| Some(e.place.clone()), |e| e.place())
    }

    fn id(&self) -> u64 {
        self.0.either(|e| e.id, |e| e.id())
    }

    fn flags(&self) -> EventFlags {
        self.0.either(|e| e.flags, |e| e.flags())
    }

    fn query(&self) -> Result<bool> {
        match &self.0 {
            EventRepr::Abi(e) => {
                crate::capture::check_unsafe_call("Event::query", &e.place)?;
                match e.raw() {
                    None => Ok(true),
                    Some(raw) => raw.query(),
                }
            }
            EventRepr::Rust(e) => e.query(),
        }
    }

    fn synchronize(&self) -> Result<()> {
        match &self.0 {
            EventRepr::Abi(e) => {
                crate::capture::check_unsafe_call("Event::synchronize", &e.place)?;
                match e.raw() {
                    None => Ok(()),
                    Some(raw) => raw.synchronize(),
                }
            }
            EventRepr::Rust(e) => e.synchronize(),
        }
    }

    fn completion(&self) -> Completion {
        match &self.0 {
            EventRepr::Abi(e) if e.in_active_capture() => Completion::ready(Err(Error::capture(
                "Event::completion",
                "the event was recorded in a capture that is still active",
            ))),
            EventRepr::Abi(e) => match e.raw() {
                None => Completion::ready(Ok(())),
                Some(raw) => crate::notify::completion_of(raw),
            },
            EventRepr::Rust(e) => e.completion(),
        }
    }

    fn elapsed(&self, end: &Self) -> Result<Duration> {
        match (&self.0, &end.0) {
            (EventRepr::Rust(start), EventRepr::Rust(end)) => start.elapsed(end.as_ref()),
            (EventRepr::Abi(start), EventRepr::Abi(end)) => {
                if start.place != end.place {
                    return Err(Error::mismatch("elapsed", &start.place, &end.place));
                }
                // Timed events cannot be made on a plug-in place, so no pair has timing.
                Err(Error::TimingDisabled)
            }
            _ => {
                let here = self.place().unwrap_or(Place::Cpu);
                let there = end.place().unwrap_or_else(|| here.clone());
                Err(Error::mismatch("elapsed", &here, &there))
            }
        }
    }
}

eq_and_hash_by_id!(PluginEvent);
