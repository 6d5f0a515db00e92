//! Events: `cuEventCreate` / `Record` / `Query` / `Synchronize` / `ElapsedTime`.

use crate::device::Device;
use crate::error::{check, check_ready, map_error};
use crate::raw::{ErrorKind, RawApi, RawEvent};
use devstream_core::elide::EventMark;
use devstream_core::{Completion, DeviceEvent, Error, EventFlags, Place, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct EventInner<A: RawApi> {
    pub(crate) raw: RawEvent,
    pub(crate) device: &'static Device<A>,
    pub(crate) flags: EventFlags,
    id: u64,
    pub(crate) recorded: AtomicBool,
    /// The last record was made on a capturing stream (known where captures are tracked: a
    /// capture begun through devstream on the device, or foreign handles wrapped on it).
    pub(crate) captured: AtomicBool,
    owned: bool,
    /// Where the current record sits, for redundant-wait elision.
    pub(crate) mark: EventMark,
    /// Pending completions of this event that only the device's sweeper watches (no doorbell
    /// of their own): a re-record must first give them one (`crate::completion`), or asking the
    /// event would describe the new record.
    pub(crate) awaited: std::sync::atomic::AtomicUsize,
    /// Records made through devstream's `record` so far, raised before each native record: a
    /// completion's sweeper compares it around its question to know the answer described the
    /// record it awaits (`crate::completion`).
    pub(crate) records: std::sync::atomic::AtomicU64,
}

impl<A: RawApi> Drop for EventInner<A> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let device = self.device;
        device.live_events.fetch_sub(1, Ordering::Relaxed);
        let raw = self.raw;
        // A never-recorded event with default flags is as good as new: keep it for reuse.
        if self.flags == EventFlags::default() && !*self.recorded.get_mut() {
            if let Ok(mut pool) = device.event_pool.lock() {
                if pool.len() < EVENT_POOL_SIZE {
                    pool.push(raw);
                    return;
                }
            }
        }
        crate::hostfn::release_off_callback(move || {
            // devstream's own call: in Relaxed mode, so that no capture in progress counts it
            // as unsafe.
            let _relaxed = crate::ext::CaptureModeGuard::<A>::relaxed();
            // SAFETY: we own the event; destroying an event with pending work is allowed (the
            // runtime releases it after that work).
            let _ = unsafe { A::event_destroy(raw) };
        });
    }
}

/// The mark of a wrapped event: recorded elsewhere, never trusted.
fn foreign_mark() -> EventMark {
    let mark = EventMark::new();
    mark.set_foreign();
    mark
}

/// How many never-recorded default events a device keeps for reuse.
const EVENT_POOL_SIZE: usize = 64;

shared_handle! {
    /// A native event (`CUevent`), a cheap `Clone` handle.
    pub struct GpuEvent<A: RawApi> { pub(crate) inner: Arc<EventInner<A>>, }
    debug(event) {
        id: event.inner.id,
        place: event.inner.device.place,
        flags: event.inner.flags,
        raw: event.inner.raw,
    }
}

impl<A: RawApi> PartialEq for GpuEvent<A> {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
    }
}
impl<A: RawApi> Eq for GpuEvent<A> {}

impl<A: RawApi> GpuEvent<A> {
    /// Whether the event's last record may stand for captured work: recorded inside a capture,
    /// or a wrapped handle (recorded where devstream cannot see).
    fn in_a_capture(&self) -> bool {
        self.inner.captured.load(Ordering::Acquire) || self.inner.mark.is_foreign()
    }

    pub(crate) fn create(device: &'static Device<A>, flags: EventFlags) -> Result<Self> {
        let flags = flags.validate()?;
        let pooled = if flags == EventFlags::default() {
            device
                .event_pool
                .lock()
                .ok()
                .and_then(|mut pool| pool.pop())
        } else {
            None
        };
        let raw = match pooled {
            Some(raw) => raw,
            None => {
                device.bind()?;
                // Creating an event is allowed beside every capture: in Relaxed mode, so that
                // the runtime counts it against none.
                let _relaxed = crate::ext::CaptureModeGuard::<A>::relaxed();
                // SAFETY: the device's context is current.
                check::<A, _>(unsafe { A::event_create(flags) })?
            }
        };
        device.live_events.fetch_add(1, Ordering::Relaxed);
        Ok(Self::wrap(raw, device, flags, true, EventMark::new()))
    }

    /// A handle over one of devstream's internal events (a host buffer's use event), recorded
    /// and owned elsewhere: for a completion of its current record. Not destroyed on drop.
    pub(crate) fn internal(raw: RawEvent, device: &'static Device<A>) -> Self {
        Self::wrap(raw, device, EventFlags::default(), false, EventMark::new())
    }

    /// A handle over `raw`: `owned` ones (created by devstream) are destroyed on drop and start
    /// unrecorded; wrapped ones count as recorded.
    fn wrap(
        raw: RawEvent,
        device: &'static Device<A>,
        flags: EventFlags,
        owned: bool,
        mark: EventMark,
    ) -> Self {
        GpuEvent {
            inner: Arc::new(EventInner {
                raw,
                device,
                flags,
                id: devstream_core::next_id(),
                recorded: AtomicBool::new(!owned),
                captured: AtomicBool::new(false),
                owned,
                mark,
                awaited: std::sync::atomic::AtomicUsize::new(0),
                records: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// Wraps a native event without owning it (it is not destroyed on drop).
    ///
    /// # Safety
    /// `raw` is a live event of device `place` created with `flags`, and outlives every use of
    /// the returned handle.
    pub unsafe fn from_raw_handle(raw: RawEvent, place: &Place, flags: EventFlags) -> Result<Self> {
        let device = crate::device::device_of::<A>(place)?;
        // It may be recorded in someone else's capture (see `capture_sequence`).
        device
            .foreign_handles
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(Self::wrap(raw, device, flags, false, foreign_mark()))
    }

    /// The native handle. Once handed out, the event may be recorded outside devstream (in
    /// someone else's capture, too): waits on it are never elided any more, and the device
    /// counts as having foreign handles, as after `from_raw_handle`.
    pub fn raw_handle(&self) -> RawEvent {
        if !self.inner.mark.is_foreign() {
            self.inner.mark.set_foreign();
            self.inner
                .device
                .foreign_handles
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.raw
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.device.ordinal
    }

    #[inline]
    pub(crate) fn mark_recorded(&self) {
        if !self.inner.recorded.load(Ordering::Relaxed) {
            self.inner.recorded.store(true, Ordering::Relaxed);
        }
    }
}

impl<A: RawApi> DeviceEvent for GpuEvent<A> {
    fn place(&self) -> Option<Place> {
        Some(self.inner.device.place.clone())
    }

    fn id(&self) -> u64 {
        self.inner.id
    }

    fn flags(&self) -> EventFlags {
        self.inner.flags
    }

    #[inline]
    fn query(&self) -> Result<bool> {
        // A potentially unsafe call: refused while a capture forbids it on this thread.
        devstream_core::capture::check_unsafe_call(&self.inner.device.place, "Event::query")?;
        let _relaxed = crate::ext::CaptureModeGuard::<A>::for_checked_call(|| self.in_a_capture());
        // SAFETY: the event is alive while `self` is.
        check_ready::<A>(unsafe { A::event_query(self.inner.raw) })
    }

    #[inline]
    fn synchronize(&self) -> Result<()> {
        devstream_core::capture::check_unsafe_call(&self.inner.device.place, "Event::synchronize")?;
        if crate::hostfn::in_host_function() {
            // Waiting inside a host function for work not done yet may wait for work queued
            // after it (a deadlock): answer from a query instead, never hang.
            return if self.query()? {
                Ok(())
            } else {
                Err(Error::WouldDeadlock {
                    op: "Event::synchronize",
                    reason: "the event has not completed; it may be recorded after the host \
                             function"
                        .into(),
                })
            };
        }
        let relaxed = crate::ext::CaptureModeGuard::<A>::for_checked_call(|| self.in_a_capture());
        // SAFETY: as above.
        let synchronized = unsafe { A::event_synchronize(self.inner.raw) };
        drop(relaxed);
        check::<A, _>(synchronized)?;
        // A drain point: frees held back on the reclaim stream after the awaited work follow.
        self.inner.device.reclaim_frees.settle(self.inner.device);
        Ok(())
    }

    fn completion(&self) -> Completion {
        crate::completion::event_completion(self)
    }

    fn elapsed(&self, end: &Self) -> Result<Duration> {
        if !self.inner.flags.timing || !end.inner.flags.timing {
            return Err(Error::TimingDisabled);
        }
        if !self.inner.recorded.load(Ordering::Relaxed)
            || !end.inner.recorded.load(Ordering::Relaxed)
        {
            return Err(Error::NotRecorded);
        }
        if !self.query()? || !end.query()? {
            return Err(Error::NotReady);
        }
        // SAFETY: both events are alive.
        match unsafe { A::event_elapsed_ms(self.inner.raw, end.inner.raw) } {
            Ok(ms) => Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1000.0)),
            Err(e) if A::error_kind(e.code) == ErrorKind::NotReady => Err(Error::NotReady),
            Err(e) => Err(map_error::<A>(e)),
        }
    }
}
