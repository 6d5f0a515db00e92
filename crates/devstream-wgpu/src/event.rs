//! Events: a recorded event is a submission ticket of its device (plus a timestamp readback when
//! timed).

use crate::buffer::Readback;
use crate::completion::Waiter;
use crate::device::{DeviceShared, Ticket, LIVE_EVENTS, POLL_SLICE};
use crate::graph::{Clock, Session, SharedSession};
use crate::sched::{waits_behind_host_func, AfterSubmit, Awaited, StreamState};
use crate::util::lock;
use devstream_core::elide::Mark;
use devstream_core::selfwait;
use devstream_core::{Completion, DeviceEvent, Error, EventFlags, Place, Result};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// One recording of an event: resolved to a ticket once the recorded work has reached the
/// queue (`None` inside means "nothing to wait for").
pub(crate) struct Record {
    pub(crate) device: Arc<DeviceShared>,
    resolution: Resolution,
    timestamp: Option<Arc<Readback>>,
    /// The recording stream and its position there (redundant-wait elision).
    pub(crate) mark: Mark,
    /// Completion futures waiting for the recording to be resolved to a ticket.
    waiters: Mutex<Vec<Waiter>>,
}

/// A record's ticket and its stream's error snapshot (the recording stream's first unreported
/// error when the recording was resolved: its earlier host functions have all run then; what a
/// stream completion reports).
///
/// The rare parts are boxed (an error, a held record's slots) so that a record stays small:
/// every event carries one from its creation (`EventInner::spare`).
enum Resolution {
    /// Known when the record was made (nothing held back): most records. No `OnceLock` to
    /// initialise on the record path.
    Known(Option<Ticket>, Option<Box<Error>>),
    /// Held behind gates: set once by [`Record::resolve`].
    Later(Box<LaterResolution>),
}

/// A held record's ticket and error, each set once by [`Record::resolve`].
struct LaterResolution {
    ticket: OnceLock<Option<Ticket>>,
    error: OnceLock<Option<Error>>,
}

impl Record {
    /// A recording; `ticket` and `error` are known at once unless it is held behind gates
    /// (`ticket` is `None`: see [`Record::resolve`]).
    pub(crate) fn new(
        device: &Arc<DeviceShared>,
        ticket: Option<Option<Ticket>>,
        timestamp: Option<Arc<Readback>>,
        error: Option<Error>,
        mark: Mark,
    ) -> Arc<Record> {
        let resolution = match ticket {
            Some(t) => Resolution::Known(t, error.map(Box::new)),
            None => Resolution::Later(Box::new(LaterResolution {
                ticket: OnceLock::new(),
                error: OnceLock::new(),
            })),
        };
        Arc::new(Record {
            device: Arc::clone(device),
            resolution,
            timestamp,
            mark,
            waiters: Mutex::new(Vec::new()),
        })
    }

    /// Whether a record of `device` may take this one's place in its allocation
    /// ([`Record::rerecord`]): same device, and no completion future parked on it.
    pub(crate) fn reusable_by(&self, device: &Arc<DeviceShared>) -> bool {
        Arc::ptr_eq(&self.device, device)
            && self
                .waiters
                .try_lock()
                .is_ok_and(|waiters| waiters.is_empty())
    }

    /// Makes this record a new, resolved recording (what [`Record::new`] would make with a
    /// known ticket), in place. Only through `&mut`: nothing else references the record.
    pub(crate) fn rerecord(
        &mut self,
        ticket: Option<Ticket>,
        timestamp: Option<Arc<Readback>>,
        error: Option<Error>,
        mark: Mark,
    ) {
        self.resolution = Resolution::Known(ticket, error.map(Box::new));
        self.timestamp = timestamp;
        self.mark = mark;
    }

    /// The ticket once resolved (`Some(None)`: nothing to wait for).
    fn ticket_ref(&self) -> Option<&Option<Ticket>> {
        match &self.resolution {
            Resolution::Known(ticket, _) => Some(ticket),
            Resolution::Later(later) => later.ticket.get(),
        }
    }

    /// Resolves a record that was held behind gates; `error` is the stream's first unreported
    /// error now. Its completion futures move to the device's list.
    pub(crate) fn resolve(&self, ticket: Option<Ticket>, error: Option<Error>) {
        // A record known at creation is never resolved again (only held records are).
        if let Resolution::Later(later) = &self.resolution {
            let _ = later.error.set(error);
            let _ = later.ticket.set(ticket);
        }
        let waiters = std::mem::take(&mut *lock(&self.waiters));
        if !waiters.is_empty() {
            crate::completion::resolved(&self.device, waiters);
        }
    }

    /// The stream's error snapshot (see the field).
    pub(crate) fn error(&self) -> Option<Error> {
        match &self.resolution {
            Resolution::Known(_, error) => error.as_deref().cloned(),
            Resolution::Later(later) => later.error.get().cloned().flatten(),
        }
    }

    /// Parks `waiter` until the record is resolved; gives it back if it is resolved already.
    pub(crate) fn add_waiter(&self, waiter: Waiter) -> Option<Waiter> {
        let mut waiters = lock(&self.waiters);
        // `resolve` sets the ticket before it takes this lock.
        if self.ticket_ref().is_some() {
            return Some(waiter);
        }
        waiters.push(waiter);
        None
    }

    /// `None` while unresolved, else the ticket (`Some(None)`: nothing to wait for).
    pub(crate) fn ticket(&self) -> Option<Option<Ticket>> {
        self.ticket_ref().cloned()
    }

    /// Whether the captured work is complete; polls the device once, never blocks.
    pub(crate) fn query(&self) -> Result<bool> {
        if let Some(fault) = self.device.fault() {
            return Err(fault);
        }
        match self.ticket_ref() {
            None => Ok(false),
            Some(ticket) => self.device.query_ticket(ticket.as_ref()),
        }
    }

    /// Blocks until the captured work is complete. From inside a host function, a recording
    /// held behind that host function (it would never complete while the host function waits)
    /// is refused with `Error::WouldDeadlock`.
    pub(crate) fn wait(&self) -> Result<()> {
        let mut checked = false;
        loop {
            let seen = self.device.signal.generation();
            if let Some(fault) = self.device.fault() {
                return Err(fault);
            }
            match self.ticket_ref() {
                Some(ticket) => {
                    if let Some(t) = ticket {
                        while !self.device.wait_ticket(t, None)? {}
                    }
                    return Ok(());
                }
                None => {
                    if !checked {
                        // What comes before a held recording never changes, so once is enough.
                        checked = true;
                        if let Some((_, stream)) =
                            waits_behind_host_func(&self.device, Awaited::Record(self))
                        {
                            return Err(selfwait::would_deadlock(
                                "Event::synchronize",
                                format!(
                                    "the event waits for work queued after the host function \
                                     of stream {stream}"
                                ),
                            ));
                        }
                        continue;
                    }
                    self.device.signal.wait_change(seen, Some(POLL_SLICE * 100));
                }
            }
        }
    }

    /// The timestamp in ticks, once complete.
    fn ticks(&self) -> Result<u64> {
        let Some(readback) = &self.timestamp else {
            return Err(Error::TimingDisabled);
        };
        readback.wait()?;
        let mut bytes = [0u8; 8];
        readback.read_into(0, &mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }
}

/// The query set and resolve buffer of a timed event.
struct Timing {
    query_set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
}

pub(crate) struct EventInner {
    id: u64,
    flags: EventFlags,
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) current: Mutex<Option<Arc<Record>>>,
    /// A record allocated with the event, taken by its first record: the event's records are
    /// reused in place while nothing else holds them, so this keeps an event's record next to
    /// the event in memory (a framework's active events stay on few cache lines and pages
    /// however many others live; bench-scale's hot pass).
    pub(crate) spare: Mutex<Option<Arc<Record>>>,
    /// Set when the event was last recorded inside a capture: what it captured there.
    pub(crate) captured: Mutex<Option<(Weak<Mutex<Session>>, Clock)>>,
    timing: Option<Timing>,
}

impl Drop for EventInner {
    fn drop(&mut self) {
        LIVE_EVENTS.fetch_sub(1, Ordering::SeqCst);
    }
}

impl EventInner {
    /// A new event of `device`.
    pub(crate) fn create(device: &Arc<DeviceShared>, flags: EventFlags) -> Result<WgpuEvent> {
        let flags = flags.validate()?;
        if flags.interprocess {
            return Err(Error::unsupported("interprocess event", &device.place));
        }
        let timing = if flags.timing {
            if !device.caps.timing {
                return Err(Error::unsupported("event timing", &device.place));
            }
            let (timing, error) = device.scoped(wgpu::ErrorFilter::Validation, || Timing {
                query_set: device.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("devstream event"),
                    ty: wgpu::QueryType::Timestamp,
                    count: 1,
                }),
                resolve: device.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("devstream event resolve"),
                    size: 8,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                }),
            });
            if let Some(e) = error {
                return Err(DeviceShared::wgpu_error("Device::create_query_set", e));
            }
            Some(timing)
        } else {
            None
        };
        LIVE_EVENTS.fetch_add(1, Ordering::SeqCst);
        Ok(WgpuEvent {
            inner: Arc::new(EventInner {
                id: devstream_core::next_id(),
                flags,
                device: Arc::clone(device),
                current: Mutex::new(None),
                spare: Mutex::new(Some(Record::new(
                    device,
                    Some(None),
                    None,
                    None,
                    Mark::NONE,
                ))),
                captured: Mutex::new(None),
                timing,
            }),
        })
    }

    /// Whether the event was created with timing (its records write a timestamp).
    #[inline]
    pub(crate) fn is_timed(&self) -> bool {
        self.timing.is_some()
    }

    /// Encodes the event's timestamp write into the stream's encoder (timed events only) and
    /// returns the readback that will hold it.
    pub(crate) fn encode_timestamp(
        &self,
        state: &mut StreamState,
        stream: u64,
    ) -> Result<Option<Arc<Readback>>> {
        let Some(timing) = &self.timing else {
            return Ok(None);
        };
        let device = &self.device;
        let readback = Readback::new(device, 8, stream)?;
        let encoder = state.encoder(&device.device);
        if device.timestamps_in_encoders {
            encoder.write_timestamp(&timing.query_set, 0);
        } else {
            let pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("devstream timestamp"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &timing.query_set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: None,
                }),
            });
            drop(pass);
        }
        encoder.resolve_query_set(&timing.query_set, 0..1, &timing.resolve, 0);
        encoder.copy_buffer_to_buffer(&timing.resolve, 0, &readback.buffer, 0, 8);
        state.after.push(AfterSubmit::Map {
            readback: Arc::clone(&readback),
            landing: None,
        });
        Ok(Some(readback))
    }

    pub(crate) fn current(&self) -> Option<Arc<Record>> {
        lock(&self.current).clone()
    }

    /// The capture in progress this event was last recorded in, and what it captured there.
    pub(crate) fn captured_in(&self) -> Option<(SharedSession, Clock)> {
        let captured = lock(&self.captured);
        let (session, clock) = captured.as_ref()?;
        let session = session.upgrade()?;
        if lock(&session).ended {
            return None;
        }
        Some((session, clock.clone()))
    }
}

/// A marker in a wgpu stream's work: a submission ticket of its device.
///
/// A never-recorded event queries true; recording again replaces what it captures. `query`
/// polls the device once and never blocks.
#[derive(Clone)]
pub struct WgpuEvent {
    pub(crate) inner: Arc<EventInner>,
}

devstream_core::debug_fields! { WgpuEvent, |self|
    id: self.inner.id,
    place: self.inner.device.place,
    flags: self.inner.flags,
}

impl DeviceEvent for WgpuEvent {
    fn place(&self) -> Option<Place> {
        Some(self.inner.device.place.clone())
    }

    fn id(&self) -> u64 {
        self.inner.id
    }

    fn flags(&self) -> EventFlags {
        self.inner.flags
    }

    fn query(&self) -> Result<bool> {
        crate::graph::check_unsafe_call(&self.inner.device.place, "Event::query")?;
        match self.inner.current() {
            None => Ok(true),
            Some(record) => record.query(),
        }
    }

    fn synchronize(&self) -> Result<()> {
        crate::graph::check_unsafe_call(&self.inner.device.place, "Event::synchronize")?;
        let waited = match self.inner.current() {
            None => Ok(()),
            Some(record) => record.wait(),
        };
        crate::mempool::sync_point(&self.inner.device);
        waited
    }

    fn completion(&self) -> Completion {
        if self.inner.captured_in().is_some() {
            // Its work runs only when the graph is launched.
            return Completion::ready(Err(Error::capture(
                "Event::completion",
                "the event was recorded in a capture that is still active",
            )));
        }
        match self.inner.current() {
            None => Completion::ready(Ok(())),
            Some(record) => crate::completion::completion(record, false),
        }
    }

    fn elapsed(&self, end: &Self) -> Result<Duration> {
        if !self.inner.flags.timing || !end.inner.flags.timing {
            return Err(Error::TimingDisabled);
        }
        if !Arc::ptr_eq(&self.inner.device, &end.inner.device) {
            return Err(Error::mismatch(
                "elapsed",
                &self.inner.device.place,
                &end.inner.device.place,
            ));
        }
        let (Some(start), Some(stop)) = (self.inner.current(), end.inner.current()) else {
            return Err(Error::NotRecorded);
        };
        if !start.query()? || !stop.query()? {
            return Err(Error::NotReady);
        }
        let ticks = stop.ticks()?.saturating_sub(start.ticks()?);
        let nanos = ticks as f64 * self.inner.device.timestamp_period;
        Ok(Duration::from_nanos(nanos.round() as u64))
    }
}
