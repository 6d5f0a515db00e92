//! Streams Paddle holds ([`StreamObj`]): created in a [`Stable`](crate::handles::Stable) table whose destroyed slots
//! keep their devstream streams for reuse once idle and sound, the device's null stream made on
//! first use, synchronization, and `stream_add_callback` (a host function that calls Paddle's
//! callback, told its launch stream when it runs in a graph).

use super::failure::{fail, fail_in_host_func, log_to_stderr, refuse, Check};
use super::graph::CallbackTurn;
use super::{CustomRuntime, Raw, Status};
use crate::sys::{C_Device_st, C_Status, C_Stream};
use devstream::Stream;
use devstream_core::sync::lock;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A stream Paddle holds (or a device's null stream).
pub struct StreamObj {
    /// Index of the device (place) it belongs to.
    pub device: usize,
    /// The devstream stream.
    pub stream: Stream,
    /// The handle Paddle knows it by (0 for a null stream); a slot's stream gets a new handle
    /// each time the slot is reused.
    pub handle: AtomicUsize,
    /// Whether a capture begun through the table on this stream is open.
    pub(super) capturing: AtomicBool,
    /// The capture this stream is in, begun here or joined by waiting on an event recorded in
    /// it (0: none); `cuda_stream_capture_info`'s id, as CUDA reports the origin's id on every
    /// stream of a capture.
    pub(super) capture_id: AtomicU64,
}

impl StreamObj {
    fn new(device: usize, stream: Stream, handle: usize) -> StreamObj {
        StreamObj {
            device,
            stream,
            handle: AtomicUsize::new(handle),
            capturing: AtomicBool::new(false),
            capture_id: AtomicU64::new(0),
        }
    }

    /// Whether the stream may be capturing (it is in a capture this table saw begin or be
    /// joined, and devstream still says so). Never calls `query`, which would invalidate.
    pub(super) fn in_capture(&self) -> bool {
        self.capture_id.load(Ordering::SeqCst) != 0 && self.stream.is_capturing().unwrap_or(true)
    }

    /// Queues `body` as a host function. Inside a capture it runs again at every launch of
    /// the graph (as a memcpy node re-reads its source). An error it returns is raised as the
    /// host function's failure ([`fail_in_host_func`]): devstream reports it on the stream
    /// that ran the work (the launching stream, for a graph), whose `synchronize_stream`
    /// then answers `C_ERROR`.
    pub(super) fn host_func(
        &self,
        what: &'static str,
        mut body: impl FnMut() -> devstream::Result<()> + Send + 'static,
    ) -> Status {
        self.stream
            .launch_host_func(move || {
                if let Err(error) = body() {
                    fail_in_host_func(format!("{what}: {error}"));
                }
            })
            .check(what)
    }
}

/// Whether a destroyed stream's devstream stream can serve a new handle.
enum Reuse {
    /// Idle, not capturing, no unreported failure: as good as a new stream.
    Yes,
    /// Work is still queued, it is still in a capture (one that another stream began), or
    /// it still fails after its failure was taken: maybe later.
    NotYet,
}

/// Asks a destroyed stream whether it can be reused (never `query` during a capture, which
/// would invalidate it). A failure its work raised that no one synchronised is taken and
/// reported here (the handle that could have reported it is gone); a stream that answers
/// cleanly after that is as good as a new one, so no slot is ever retired for a failure.
#[cold]
#[inline(never)]
fn reusable(obj: &StreamObj) -> Reuse {
    if obj.capturing.load(Ordering::SeqCst) || !matches!(obj.stream.is_capturing(), Ok(false)) {
        return Reuse::NotYet;
    }
    if !matches!(obj.stream.query(), Ok(true)) {
        return Reuse::NotYet;
    }
    // Idle: this returns at once, with the first failure its work raised, if any.
    let Err(error) = obj.stream.synchronize() else {
        return Reuse::Yes;
    };
    let message =
        format!("a destroyed stream's work failed (no synchronize_stream reported it): {error}");
    tracing::warn!("devstream-paddle: {message}");
    if log_to_stderr() {
        eprintln!("devstream-paddle: {message}");
    }
    // The failure is taken: a stream whose next synchronize is clean carries nothing of it
    // (a failure that stays, such as a lost device, is asked about again later).
    match obj.stream.synchronize() {
        Ok(()) => Reuse::Yes,
        Err(_) => Reuse::NotYet,
    }
}

impl CustomRuntime {
    /// The device's null stream (what Paddle's null `C_Stream` and the synchronous copies use).
    pub(super) fn null_stream(&self, device: usize) -> Status<Arc<StreamObj>> {
        self.null_stream_ref(device).map(Arc::clone)
    }

    /// [`CustomRuntime::null_stream`], borrowed.
    pub(super) fn null_stream_ref(&self, device: usize) -> Status<&Arc<StreamObj>> {
        let slot = self
            .null_streams
            .get(device)
            .ok_or_else(|| refuse(|| format!("device {device} has no null stream")))?;
        if let Some(obj) = slot.get() {
            return Ok(obj);
        }
        let stream = Stream::new(&self.places[device]).check("creating a null stream")?;
        Ok(slot.get_or_init(|| Arc::new(StreamObj::new(device, stream, 0))))
    }

    /// The stream behind a handle on `device` (null: the device's null stream): one load and
    /// a compare (see [`Stable`](crate::handles::Stable)).
    #[inline(always)]
    pub fn stream(&self, device: usize, handle: C_Stream) -> Status<&StreamObj> {
        if handle.is_null() {
            return self.null_stream_ref(device).map(|obj| &**obj);
        }
        let obj = self
            .streams
            .get(handle as usize)
            .ok_or_else(|| refuse(|| format!("unknown stream handle {handle:?}")))?;
        if obj.device != device {
            return Err(refuse(|| {
                format!("stream {handle:?} belongs to device {}", obj.device)
            }));
        }
        Ok(obj)
    }

    /// `create_stream`: a new non-blocking stream of normal priority.
    ///
    /// Streams live in a [`Stable`](crate::handles::Stable) table: a destroyed stream's slot keeps its devstream stream
    /// (queued work still runs), and the slot's next handle on that device reuses it once it is
    /// idle and in no capture, its unreported failure taken and reported: then it behaves as
    /// a new stream (its earlier work is done, so nothing new waits for it). A slot whose
    /// stream is still busy, or joined to a capture still open, is skipped for now. While a
    /// capture begun through this table is open no slot is probed (a `query` or `synchronize`
    /// then is an unsafe call that would invalidate a capture in `Global` mode): new slots only.
    #[inline(never)]
    pub fn create_stream(&self, device: usize) -> Status<usize> {
        let probe = self.open_captures.load(Ordering::SeqCst) == 0;
        let mut busy = Vec::new();
        let result = loop {
            let Some(index) = self.streams.take_index(device) else {
                break Err(refuse(|| {
                    format!("more than {} live streams", crate::handles::CAPACITY)
                }));
            };
            if let Some(old) = self.streams.dead(index) {
                if !probe {
                    busy.push(index);
                    continue;
                }
                if let Reuse::NotYet = reusable(old) {
                    busy.push(index);
                    continue;
                }
            }
            let made = self.streams.insert_at(
                index,
                || Stream::new(&self.places[device]).map(|s| StreamObj::new(device, s, 0)),
                |obj| {
                    obj.capturing.store(false, Ordering::SeqCst);
                    obj.capture_id.store(0, Ordering::SeqCst);
                },
            );
            break match made {
                Ok(Some(handle)) => {
                    if let Some(obj) = self.streams.get(handle) {
                        obj.handle.store(handle, Ordering::Release);
                    }
                    Ok(handle)
                }
                Ok(None) => Err(refuse(|| "the stream table is full".into())),
                Err(error) => {
                    self.streams.give_index(device, index);
                    Err(fail("create_stream", error))
                }
            };
        };
        for index in busy {
            self.streams.give_index(device, index);
        }
        result
    }

    /// `destroy_stream`: forgets the handle; queued work still runs (devstream never blocks
    /// on drop, and the slot keeps the stream). A capture the stream began through this table
    /// ends with it, its graph discarded (a capture never outlives its stream).
    pub fn destroy_stream(&self, device: usize, handle: C_Stream) -> Status {
        let (index, obj) = self
            .streams
            .remove(handle as usize, |obj| obj.device == device)
            .ok_or_else(|| {
                refuse(|| format!("unknown stream handle {handle:?} on device {device}"))
            })?;
        if obj.capturing.load(Ordering::SeqCst) {
            self.abandon_capture(obj);
        }
        self.streams.give_index(device, index);
        Ok(())
    }

    /// `query_stream`: `Ok(true)` when complete.
    #[inline]
    pub fn query_stream(&self, device: usize, handle: C_Stream) -> Status<bool> {
        let obj = self.stream(device, handle)?;
        obj.stream.query().check("query_stream")
    }

    /// `synchronize_stream`.
    #[inline]
    pub fn synchronize_stream(&self, device: usize, handle: C_Stream) -> Status {
        let obj = self.stream(device, handle)?;
        obj.stream.synchronize().check("synchronize_stream")
    }

    /// `synchronize_device`: every stream of the device, then its null stream.
    pub fn synchronize_device(&self, device: usize) -> Status {
        let streams: Vec<&StreamObj> = self
            .streams
            .live_values()
            .into_iter()
            .filter(|s| s.device == device)
            .collect();
        let mut result = Ok(());
        let null = self.null_streams[device].get().map(|obj| &**obj);
        for obj in streams.into_iter().chain(null) {
            let r = obj.stream.synchronize().check("synchronize_device");
            result = result.and(r);
        }
        result
    }

    /// `stream_add_callback`: `callback(device, stream, user_data, &status)` runs once, in
    /// stream order (inside a capture: at every launch of the graph, as a CUDA host node).
    /// Not queued (an error): never called, so the caller keeps `user_data`.
    pub fn add_callback(
        &self,
        device: usize,
        handle: C_Stream,
        callback: unsafe extern "C" fn(*mut C_Device_st, C_Stream, *mut c_void, *mut C_Status),
        user_data: *mut c_void,
    ) -> Status {
        let obj = self.stream(device, handle)?;
        let id = device as c_int;
        let stream = Raw(handle as usize);
        let data = Raw(user_data as usize);
        // Captured: the graph's launches tell the callback its launch stream.
        let order = if obj.in_capture() {
            lock(&self.capture_orders)
                .get(&obj.capture_id.load(Ordering::SeqCst))
                .cloned()
        } else {
            None
        };
        let counted = order.clone();
        obj.stream
            .launch_host_func(move || {
                let (stream, _turn) = match &order {
                    Some(order) => (
                        Raw(order.current().unwrap_or(stream.0)),
                        Some(CallbackTurn(order.clone())),
                    ),
                    None => (stream, None),
                };
                let mut device = C_Device_st { id };
                let mut status = crate::sys::C_SUCCESS;
                // SAFETY: the host gave this callback and its data for a call each time the
                // host function runs: once in stream order, or at every launch of a graph that
                // captured it (as CUDA runs a captured host node); `device` and `status` live
                // across the call.
                unsafe {
                    callback(
                        &mut device,
                        stream.0 as C_Stream,
                        data.0 as *mut c_void,
                        &mut status,
                    )
                };
                // A callback that reports a failure through `status` fails the work.
                if status != crate::sys::C_SUCCESS {
                    fail_in_host_func(format!(
                        "stream_add_callback: the callback reported {}",
                        status.name()
                    ));
                }
            })
            .check("stream_add_callback")?;
        if let Some(order) = counted {
            order.calls.add_per_launch(1);
        }
        Ok(())
    }
}
