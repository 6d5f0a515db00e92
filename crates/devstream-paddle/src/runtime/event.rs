//! Events Paddle holds ([`EventObj`]). A destroyed event's slot keeps its devstream event for
//! the next handle; an event handed out again, or recorded on a CPU stream that has finished
//! all its work, is `settled`: complete without a devstream record, so Paddle's
//! create-record-wait-destroy cycle touches only its slot. The `*_fast` paths serve that cycle
//! without the table's unwinding guard, and never panic.

use super::failure::{fail, refuse, Check};
use super::spares::{with_thread, Spare};
use super::{CustomRuntime, Status, StreamObj};
use crate::sys::{C_Device_st, C_Stream};
use devstream::{Event, EventFlags, Stream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// `true` iff `stream` is a CPU stream that has finished all its work and is not capturing
/// ([`devstream::cpu::CpuStream::is_finished`]: three loads): an internal probe of
/// `record_event`, not a query of the host's, so it opens no `tracing` span.
#[inline(always)]
fn finished_host_stream(stream: &Stream) -> bool {
    match stream {
        #[cfg(feature = "cpu")]
        Stream::Cpu(cpu) => cpu.is_finished(),
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

/// An event Paddle holds.
pub struct EventObj {
    /// Index of the device it was created on.
    pub device: usize,
    /// The devstream event.
    pub event: Event,
    /// The capture it was last recorded in (0: none): a stream that waits on it joins it.
    capture: AtomicU64,
    /// Complete without a devstream record behind it: handed out again by `create_event` (a
    /// destroyed event kept for reuse) and not recorded since, or last recorded on a stream
    /// that had finished all its work (see [`CustomRuntime::record_event`]). The table answers as
    /// for a never-recorded event (complete; waiting on it is a no-op) whatever the devstream
    /// event's last record was. The next record of work still to run replaces that record (as
    /// every re-record does) and clears this.
    settled: AtomicBool,
}

impl CustomRuntime {
    /// `create_event`: an event without timing.
    ///
    /// Events live in a [`Stable`](crate::handles::Stable) table: a destroyed event's slot keeps its devstream event,
    /// and the slot's next handle (on the same device) reuses it, marked `settled`.
    /// The thread that destroyed it gets the slot back first, without a lock: Paddle's
    /// `wait_stream` creates, records, waits on and destroys an event per call.
    #[inline]
    pub fn create_event(&self, device: usize) -> Status<usize> {
        let backend = self.backend.index();
        let index = match with_thread(|t| t.and_then(|t| t.take_spare(backend, device))) {
            Some(index) => index,
            None => self.events.take_index(device).ok_or_else(|| {
                refuse(|| format!("more than {} live events", crate::handles::CAPACITY))
            })?,
        };
        let made = self.events.insert_at(
            index,
            || {
                Event::new(&self.places[device], EventFlags::default()).map(|event| EventObj {
                    device,
                    event,
                    capture: AtomicU64::new(0),
                    settled: AtomicBool::new(false),
                })
            },
            |obj| {
                obj.capture.store(0, Ordering::Relaxed);
                obj.settled.store(true, Ordering::Relaxed);
            },
        );
        match made {
            Ok(Some(handle)) => Ok(handle),
            Ok(None) => Err(refuse(|| "the event table is full".into())),
            Err(error) => {
                self.events.give_index(device, index);
                Err(fail("create_event", error))
            }
        }
    }

    /// The event behind a handle.
    #[inline(always)]
    fn event_in(&self, handle: usize) -> Status<&EventObj> {
        self.events
            .get(handle)
            .ok_or_else(|| refuse(|| format!("unknown event handle {handle:#x}")))
    }

    /// `destroy_event`: the slot (and its devstream event) is kept for the thread's next
    /// `create_event` on the device (see [`CustomRuntime::create_event`]).
    #[inline]
    pub fn destroy_event(&self, handle: usize) -> Status {
        match self.destroy_event_fast(handle) {
            Some(Ok(())) => Ok(()),
            Some(Err(spare)) => {
                self.give_back(spare);
                Ok(())
            }
            None => Err(refuse(|| format!("unknown event handle {handle:#x}"))),
        }
    }

    /// The device index of a `C_Device`, if it names one of this runtime's devices (the fast
    /// paths' check; [`CustomRuntime::device_ptr`] says why not).
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`.
    #[inline(always)]
    pub(crate) unsafe fn device_fast(&self, device: *const C_Device_st) -> Option<usize> {
        if device.is_null() {
            return None;
        }
        // SAFETY: non-null and readable per the caller's contract.
        let id = unsafe { (*device).id };
        usize::try_from(id).ok().filter(|&d| d < self.devices)
    }

    /// The stream behind a non-null handle of device `d` (the fast paths' check;
    /// [`CustomRuntime::stream`] says why not, and serves the null stream).
    #[inline(always)]
    fn stream_fast(&self, d: usize, stream: C_Stream) -> Option<&StreamObj> {
        if stream.is_null() {
            return None;
        }
        self.streams
            .get(stream as usize)
            .filter(|obj| obj.device == d)
    }

    /// `create_event` from the calling thread's kept slots (see [`CustomRuntime::create_event`]):
    /// the slot's event back under a new handle, written to `out`. `None`: anything else
    /// (nothing kept, bad arguments), for the full call. Never panics.
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`; `out` is null or writable.
    #[inline(always)]
    pub(crate) unsafe fn create_event_fast(
        &self,
        device: *const C_Device_st,
        out: *mut crate::sys::C_Event,
    ) -> Option<()> {
        // SAFETY: forwarded.
        let d = unsafe { self.device_fast(device) }?;
        if out.is_null() {
            return None;
        }
        let backend = self.backend.index();
        let index = with_thread(|t| t.and_then(|t| t.take_spare(backend, d)))?;
        let reset = |obj: &EventObj| {
            obj.capture.store(0, Ordering::Relaxed);
            obj.settled.store(true, Ordering::Relaxed);
        };
        match self.events.reuse_at(index, reset) {
            Some(handle) => {
                // SAFETY: non-null and writable per the caller's contract.
                unsafe { out.write(handle as crate::sys::C_Event) };
                Some(())
            }
            None => {
                // A kept slot always keeps its event; were it not so, keep the index again
                // (just taken: there is room) and let the full call make one.
                let spare = Spare {
                    backend,
                    device: d,
                    index,
                };
                let _ = with_thread(|t| t.map(|t| t.keep_spare(spare)));
                None
            }
        }
    }

    /// `destroy_event` of a live handle: the slot kept by the calling thread (see
    /// [`CustomRuntime::destroy_event`]). `Some(Err(spare))`: destroyed, but the thread keeps
    /// [`SPARES`](super::spares::SPARES) already: give `spare` back with [`CustomRuntime::give_back`]. `None`: not a live
    /// handle (nothing changed), for the full call. Never panics.
    #[inline(always)]
    pub(crate) fn destroy_event_fast(&self, handle: usize) -> Option<Result<(), Spare>> {
        let (index, obj) = self.events.remove(handle, |_| true)?;
        let spare = Spare {
            backend: self.backend.index(),
            device: obj.device,
            index,
        };
        Some(with_thread(|t| match t {
            Some(t) => t.keep_spare(spare),
            None => Err(spare),
        }))
    }

    /// Gives a destroyed event's slot back to its device's free list.
    pub(crate) fn give_back(&self, spare: Spare) {
        self.events.give_index(spare.device, spare.index);
    }

    /// The part of `record_event` Paddle's `Stream.wait_stream` runs on `devstream_cpu`: a
    /// valid record on a stream that has finished all its work settles the event (see
    /// [`CustomRuntime::record_event`]). `None`: anything else, for the full call. Never panics (it
    /// runs outside the table's unwinding guard).
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`.
    #[inline(always)]
    pub(crate) unsafe fn record_event_fast(
        &self,
        device: *const C_Device_st,
        stream: C_Stream,
        event: usize,
    ) -> Option<()> {
        if !self.host_backed {
            return None;
        }
        // SAFETY: forwarded.
        let d = unsafe { self.device_fast(device) }?;
        let obj = self.stream_fast(d, stream)?;
        let event = self.events.get(event)?;
        if event.capture.load(Ordering::Relaxed) != 0 || !finished_host_stream(&obj.stream) {
            return None;
        }
        if !event.settled.load(Ordering::Relaxed) {
            event.settled.store(true, Ordering::Release);
        }
        Some(())
    }

    /// The part of `stream_wait_event` a settled event takes: nothing to wait for, once the
    /// stream is checked. `None`: anything else, for the full call. Never panics.
    ///
    /// # Safety
    /// `device` is null or points to a readable `C_Device_st`.
    #[inline(always)]
    pub(crate) unsafe fn stream_wait_event_fast(
        &self,
        device: *const C_Device_st,
        stream: C_Stream,
        event: usize,
    ) -> Option<()> {
        // SAFETY: forwarded.
        let d = unsafe { self.device_fast(device) }?;
        self.stream_fast(d, stream)?;
        let event = self.events.get(event)?;
        event.settled.load(Ordering::Acquire).then_some(())
    }

    /// `synchronize_event` and `query_event` of a settled event: complete. `None`: anything
    /// else, for the full call. Never panics.
    #[inline(always)]
    pub(crate) fn event_settled_fast(&self, event: usize) -> Option<()> {
        let event = self.events.get(event)?;
        event.settled.load(Ordering::Acquire).then_some(())
    }

    /// `record_event`: the event captures the stream's work submitted so far.
    ///
    /// On the CPU backend, a stream that has finished all its work (its `query` is cheap
    /// there: three loads; it refuses during a capture, which then records as usual) gives
    /// the event nothing to capture: the event is marked `settled` (complete) without a
    /// devstream record, so that waiting on it, synchronizing it and querying it touch only
    /// its slot. Paddle's `Stream.wait_stream` records a temporary event on the stream waited
    /// for, waits on it, synchronizes and destroys it: with idle streams, a record and nothing
    /// else. Work submitted to the stream by another thread at the same moment is ordered
    /// after this record, one of the orders racing calls allow.
    #[inline]
    pub fn record_event(&self, device: usize, stream: C_Stream, event: usize) -> Status {
        {
            let obj = self.stream(device, stream)?;
            let event = self.event_in(event)?;
            if self.host_backed && finished_host_stream(&obj.stream) {
                if event.capture.load(Ordering::Relaxed) != 0 {
                    event.capture.store(0, Ordering::SeqCst);
                }
                if !event.settled.load(Ordering::Relaxed) {
                    event.settled.store(true, Ordering::Release);
                }
                return Ok(());
            }
            event.event.record(&obj.stream).check("record_event")?;
            let capture = if obj.in_capture() {
                obj.capture_id.load(Ordering::SeqCst)
            } else {
                0
            };
            if event.capture.load(Ordering::SeqCst) != capture {
                event.capture.store(capture, Ordering::SeqCst);
            }
            if event.settled.load(Ordering::Relaxed) {
                event.settled.store(false, Ordering::Release);
            }
            Ok(())
        }
    }

    /// `query_event`: `Ok(true)` when complete (or never recorded).
    #[inline]
    pub fn query_event(&self, event: usize) -> Status<bool> {
        let event = self.event_in(event)?;
        if event.settled.load(Ordering::Acquire) {
            return Ok(true);
        }
        event.event.query().check("query_event")
    }

    /// `synchronize_event`.
    #[inline]
    pub fn synchronize_event(&self, event: usize) -> Status {
        let event = self.event_in(event)?;
        if event.settled.load(Ordering::Acquire) {
            return Ok(());
        }
        event.event.synchronize().check("synchronize_event")
    }

    /// `stream_wait_event`: the stream's later work waits for what the event captured.
    #[inline]
    pub fn stream_wait_event(&self, device: usize, stream: C_Stream, event: usize) -> Status {
        {
            let obj = self.stream(device, stream)?;
            let event = self.event_in(event)?;
            if event.settled.load(Ordering::Acquire) {
                // Never recorded since it was handed out: nothing to wait for.
                return Ok(());
            }
            obj.stream
                .wait_event(&event.event)
                .check("stream_wait_event")?;
            // Waiting on work recorded in a capture joins it (fork/join, as in CUDA).
            let capture = event.capture.load(Ordering::SeqCst);
            if capture != 0 && obj.stream.is_capturing().unwrap_or(false) {
                obj.capture_id.store(capture, Ordering::SeqCst);
            }
            Ok(())
        }
    }
}
