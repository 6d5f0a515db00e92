//! `PluginStream`: the stream contract mapped onto a plug-in's table (or a Rust-registered
//! backend's stream).

use crate::buffer::{AbiHostBuffer, BufferRepr, HostRepr, PluginBuffer, PluginHostBuffer};
use crate::capture::{
    check_unsafe_call, graph_trampoline, refuse_during_capture, submitting_into, Capturing,
};
use crate::event::{AbiEvent, EventRepr, PluginEvent};
use crate::flag::{FlagRepr, PluginFlag};
use crate::graph::{GraphRepr, PluginGraph};
use crate::queue::{running_host_fn, Callback, Item, Origin, StreamCore};
use crate::registry::{lookup, plugin_slot, CustomDevice};
use crate::repr::Repr;
use crate::runtime::{CaptureState, CopyKind, Handle};
use crate::sys::C_Stream;
use devstream_core::traits::check_range;
use devstream_core::{
    BackendKind, Capabilities, CaptureMode, CaptureSupport, Completion, DeviceBuffer, DeviceEvent,
    DeviceFlag, DeviceStream, Error, EventFlags, HostFn, Place, Priority, PriorityRange, Result,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;

mod capture;
mod copy;

use capture::{begin_capture, end_capture};
use copy::{
    abi_buffer, abi_host, checked_copy, require_copy, staged_upload, staging_for, submit_copy,
    submit_host_copy,
};

/// A stream of a custom-device place.
///
/// On a plug-in place it wraps the plug-in's `C_Stream` (which may be null: a plug-in that never
/// writes its out-parameter, like Paddle's own `custom_cpu`, gets one queue for everything) and
/// is identified by its devstream id. Mapping of the contract:
///
/// | devstream | plug-in table |
/// |---|---|
/// | `Stream::new` | `create_stream` (absent: the null stream) |
/// | `query` | `query_stream` (absent: `synchronize_stream` and true, as Paddle; `nonblocking_query` off) |
/// | `synchronize` | `synchronize_stream` (absent: `record_event` + `synchronize_event`) |
/// | `record` | `create_event` + `record_event` (a fresh plug-in event per record) |
/// | `wait_event`, `wait_stream` | `stream_wait_event` (absent: the host waits for the event) |
/// | `launch_host_func`, `write_flag` | `stream_add_callback` (absent: `Unsupported`) |
/// | `wait_flag` | held on the host: later work is submitted once the value is reached |
/// | copies, `fill` | `async_memory_copy_*` (absent: synchronize + `memory_copy_*`); `fill` stages the bytes |
/// | `begin_capture`, `end_capture`, `is_capturing` | `cuda_stream_begin_capture`, `cuda_stream_end_captrue` + `cuda_graph_instantiate`, `cuda_stream_capture_info` (a Paddle 3.3 table with all of them; else `Unsupported`) |
/// | captured host functions, flag writes and waits | callbacks kept by the graph, run on every replay (a captured flag wait blocks the replaying stream) |
/// | priorities, timing, per-thread stream | none in the ABI: range `{0, 0}`, `Unsupported` |
///
/// # Inside a host function
///
/// A host function may call any of this on its own stream or others. What it sees is the
/// stream's order up to itself: `query` of its own stream is `false`; an event recorded on
/// its stream before it is complete, one recorded after it is not (`query` answers `false`,
/// `synchronize` a typed [`Error::WouldDeadlock`] instead of waiting for itself), and so is
/// `synchronize` of its own stream; host-buffer reads and writes do not wait for copies of
/// its own stream (those before it are done, those after it cannot start), nor for copies of
/// other streams that certainly come after it (queued behind a wait, accepted by the plug-in,
/// on an event recorded on its stream after it, directly or through other streams): they
/// see the copies before them. Waits for *other*
/// streams and their events block as anywhere else, unless what they wait for could itself
/// wait (through `wait_event`/`wait_stream`, on any number of streams) for work queued after
/// the calling host function: that is the same typed error (checked conservatively, from the
/// waits devstream submitted that are not known complete); `synchronize` of another stream
/// waits for the work submitted to it before the call, not for what other threads submit while
/// it waits (an event recorded at the call is waited for). A wait behind a *flag* that only
/// later work would set cannot be told apart from one another thread will set: it blocks. So
/// do two host functions of different streams that each wait for the other's stream (each
/// `synchronize`s the other's stream while both run): like two threads joining each other,
/// they wait for each other for good; devstream refuses only the waits it can trace back to the
/// calling host function through the waits on events its streams were given.
/// "Its own stream" means every devstream stream over the same plug-in stream handle (adopted
/// streams; all streams of a plug-in that never writes its stream handles): they share one
/// plug-in queue, numbered in one order.
///
/// # Plug-ins that answer oddly
///
/// `stream_add_callback` answered with `C_WARNING` (the plug-in ran the callback inside the
/// call) is success. When it answers an error, the callback is taken back and dropped (it will
/// not run, even if the plug-in calls it later); if it already ran, the error is reported all
/// the same. Who frees a callback's data is decided by which side claims it first, never by
/// the status alone; a callback the plug-in calls more than once runs once. A
/// `cuda_stream_begin_capture` that answers a failure (or a warning) but began the capture all
/// the same is undone: devstream ends that capture, or, when the plug-in will not end it, keeps
/// it as an invalid capture that refuses work until `end_capture`.
///
/// # Plug-ins that call back into devstream
///
/// A plug-in function may call devstream (on this stream or others) from inside a call
/// devstream made, as Paddle plug-ins do. The call is served as from a host function; one
/// thread never waits for a second stream while inside a plug-in call made for a first: a
/// submission to a stream that another thread is submitting to at that moment is held on the
/// host, in the stream's order, and handed to the plug-in by devstream's dispatcher thread once
/// the other thread is done (its errors then go to the stream, as for work held behind a flag).
/// So two threads whose plug-in calls submit to each other's streams never wait for each other;
/// a `synchronize` that would have to wait that way answers [`Error::WouldDeadlock`].
#[derive(Clone, Debug)]
pub struct PluginStream(pub(crate) StreamRepr);

pub(crate) type StreamRepr = Repr<UserHandle, Arc<dyn devstream_core::dynamic::DynStream>>;

/// A user's handle on a plug-in stream (each `PluginStream` holds one). devstream's own
/// references (buffers that remember their users, reaper jobs, held work) keep the stream's
/// host side alive too, and a capture keeps the buffers its work uses: the stream could then
/// outlive its last handle for as long as its capture lasts, which only the stream could end.
/// So the last user handle of a stream made by `Stream::new` ends the stream's capture itself
/// (`StreamCore::last_handle_dropped`).
#[derive(Debug)]
pub(crate) struct UserHandle(Arc<StreamCore>);

impl UserHandle {
    fn new(core: Arc<StreamCore>) -> UserHandle {
        core.handles.fetch_add(1, Ordering::SeqCst);
        UserHandle(core)
    }
}

impl Clone for UserHandle {
    fn clone(&self) -> UserHandle {
        UserHandle::new(self.0.clone())
    }
}

impl Drop for UserHandle {
    fn drop(&mut self) {
        if self.0.handles.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.last_handle_dropped();
        }
    }
}

impl std::ops::Deref for UserHandle {
    type Target = Arc<StreamCore>;
    fn deref(&self) -> &Arc<StreamCore> {
        &self.0
    }
}

eq_and_hash_by_id!(PluginStream);

impl PluginStream {
    /// A user handle to `core` (counted: see [`UserHandle`]).
    pub(crate) fn abi(core: Arc<StreamCore>) -> PluginStream {
        PluginStream(StreamRepr::Abi(UserHandle::new(core)))
    }

    /// The plug-in's `C_Stream` behind this stream (possibly null), or `None` for a
    /// Rust-registered device.
    ///
    /// Once handed out, the stream may be captured by other code: redundant-wait elision stops
    /// for every plug-in stream (as after `from_raw`).
    pub fn as_raw(&self) -> Option<C_Stream> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                crate::capture::foreign_handles();
                Some(core.raw.stream())
            }
            StreamRepr::Rust(_) => None,
        }
    }

    /// Wraps a stream the plug-in serving `place` created elsewhere (e.g. by Paddle), without
    /// owning it: devstream never destroys it.
    ///
    /// # Safety
    /// `raw` must be a live stream (or null) of the plug-in that serves `place`, and stay
    /// alive as long as the returned handle and the work submitted through it.
    pub unsafe fn from_raw(place: &Place, raw: C_Stream) -> Result<PluginStream> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                let slot = plugin_slot(&runtime, place)?;
                crate::capture::foreign_handles();
                Ok(PluginStream::abi(StreamCore::new(
                    runtime,
                    slot,
                    Handle(raw as usize),
                    true,
                    Origin::Adopted,
                    false,
                )))
            }
            CustomDevice::Rust(_) => Err(Error::unsupported("PluginStream::from_raw", place)),
        }
    }
}

/// A place of another custom device: waiting across devices is unsupported in this ABI.
fn cross_device(op: &'static str, here: &Place, there: &Place) -> Error {
    if there.backend() == BackendKind::Plugin {
        Error::unsupported(op, here)
    } else {
        Error::mismatch(op, here, there)
    }
}

fn caps_of(core: &StreamCore) -> Capabilities {
    core.runtime.caps
}

/// Puts a captured callback (its data kept by the capture) on a capturing stream.
pub(crate) fn submit_graph_callback(
    core: &Arc<StreamCore>,
    data: *mut std::ffi::c_void,
) -> Result<()> {
    let data = data as usize;
    core.submit(Item::Op(Box::new(move |core: &StreamCore| {
        core.runtime.add_callback(
            core.slot,
            core.raw,
            Some(graph_trampoline),
            data as *mut std::ffi::c_void,
        )
    })))
}

/// A wait on `raw`. Waiting on an event recorded in a capture joins the capture (the
/// plug-in decides): while any capture of the runtime is in progress, the end of the
/// stream's work before the wait is recorded first, for releases during its capture.
/// [`wait_joining`], unless the wait is implied by what the stream already waited for
/// (`devstream_core::elide`): positions are the plug-in queue numbers of records made while no
/// capture could be active (see `StreamCore::record_into`).
fn wait_elided(
    core: &Arc<StreamCore>,
    op: &'static str,
    raw: Arc<crate::queue::RawEvent>,
) -> Result<()> {
    if !core.tracker.enabled() {
        return wait_joining(core, op, raw);
    }
    let Some(epoch) = crate::capture::elision_epoch() else {
        return wait_joining(core, op, raw);
    };
    let mark = raw.mark();
    let Some(mut guard) = core.tracker.lock() else {
        return wait_joining(core, op, raw);
    };
    if crate::capture::elision_still_valid(epoch) && guard.implied(core.id, mark) {
        return Ok(());
    }
    // A wait held on the host (behind an unsubmitted record) still orders everything after
    // it: the stream's later items are held behind it, in order.
    wait_joining(core, op, raw)?;
    if crate::capture::elision_still_valid(epoch) {
        guard.note(mark);
    }
    Ok(())
}

fn wait_joining(
    core: &Arc<StreamCore>,
    op: &'static str,
    raw: Arc<crate::queue::RawEvent>,
) -> Result<()> {
    if !crate::capture::any_active(core.runtime.index()) {
        return core.submit(Item::WaitEvent(raw));
    }
    let joining = match crate::capture::capturing(core)? {
        Capturing::No => true,
        Capturing::Yes(_) => {
            submitting_into(op, core)?;
            false
        }
        Capturing::Invalid(_, reason) => {
            return Err(Error::capture(
                op,
                format!("the stream's capture is invalid ({reason}); end it first"),
            ))
        }
    };
    if joining
        && raw.recorded_in_active_capture()
        && (core.has_deferred()
            || crate::queue::running_host_fn().is_some()
            || crate::runtime::inside_plugin_call())
    {
        // The wait joins this stream to the capture in the plug-in when it is handed over.
        // Held on the host (behind held work, or because another thread holds the stream's
        // submissions while a host function or a plug-in call submits), it would be handed
        // over later, and the work submitted meanwhile as ordinary work would then go into the
        // plug-in's graph, outside devstream's keeping (a host function there is never run or
        // given back). A join is made in order or not at all.
        return Err(Error::capture(
            op,
            "waiting on an event recorded in a capture in progress joins this stream to the \
             capture, which devstream makes only in order with the stream's other work: not \
             from inside a host function or a plug-in call, nor behind work the stream holds on \
             the host",
        ));
    }
    let before = if joining && !core.has_deferred() {
        Some(core.record_raw()?)
    } else {
        None
    };
    core.submit(Item::WaitEvent(raw))?;
    if let Some(before) = before {
        if !matches!(crate::capture::capturing(core)?, Capturing::No) {
            *crate::queue::lock(&core.pre_capture) = Some(before);
        }
    }
    Ok(())
}

impl DeviceStream for PluginStream {
    type Event = PluginEvent;
    type Graph = PluginGraph;
    type Flag = PluginFlag;
    type Buffer = PluginBuffer;
    type HostBuffer = PluginHostBuffer;

    fn place(&self) -> &Place {
        self.0.either(|core| &core.place, |s| s.place())
    }

    fn id(&self) -> u64 {
        self.0.either(|core| core.id, |s| s.id())
    }

    fn priority(&self) -> Priority {
        self.0
            .either(|_| PriorityRange::NONE.classify(0), |s| s.priority())
    }

    fn native_priority(&self) -> i32 {
        self.0.either(|_| 0, |s| s.native_priority())
    }

    fn is_non_blocking(&self) -> bool {
        self.0
            .either(|core| core.non_blocking, |s| s.is_non_blocking())
    }

    fn capabilities(&self) -> Capabilities {
        self.0.either(|core| caps_of(core), |s| s.capabilities())
    }

    fn query(&self) -> Result<bool> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                refuse_during_capture("Stream::query", core)?;
                check_unsafe_call("Stream::query", &core.place)?;
                if core.has_deferred()
                    || running_host_fn().is_some_and(|(queue, _)| queue == core.queue_id())
                {
                    // Inside one of its own host functions the stream is not done (that host
                    // function is its work).
                    return Ok(false);
                }
                if core.runtime.table().query_stream.is_none() && running_host_fn().is_some() {
                    // Without `query_stream` the answer comes from waiting for the stream's
                    // work. Inside a host function only the work submitted so far is waited
                    // for (an event recorded now, once it is known not to wait for the calling
                    // host function): what other threads submit meanwhile may itself wait for
                    // the calling host function.
                    return match core.synchronize_submitted() {
                        Ok(()) => Ok(true),
                        Err(Error::WouldDeadlock { .. }) => Ok(false),
                        Err(error) => Err(error),
                    };
                }
                core.runtime.query_stream(core.slot, core.raw)
            }
            StreamRepr::Rust(s) => s.query(),
        }
    }

    fn synchronize(&self) -> Result<()> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                refuse_during_capture("Stream::synchronize", core)?;
                check_unsafe_call("Stream::synchronize", &core.place)?;
                if running_host_fn().is_some() {
                    // Only the work submitted so far: what other threads submit meanwhile may
                    // wait for the calling host function's later work.
                    core.synchronize_submitted()?;
                    return match core.take_error() {
                        Some(error) => Err(error),
                        None => Ok(()),
                    };
                }
                core.wait_drained();
                core.runtime.synchronize_stream(core.slot, core.raw)?;
                match core.take_error() {
                    Some(error) => Err(error),
                    None => Ok(()),
                }
            }
            StreamRepr::Rust(s) => s.synchronize(),
        }
    }

    fn completion(&self) -> Completion {
        match &self.0 {
            StreamRepr::Abi(core) => match abi_completion(core) {
                Ok(completion) => completion,
                Err(error) => Completion::ready(Err(error)),
            },
            StreamRepr::Rust(s) => s.completion(),
        }
    }

    fn record(&self, event: &PluginEvent) -> Result<()> {
        match (&self.0, &event.0) {
            (StreamRepr::Abi(core), EventRepr::Abi(e)) => {
                if e.place != core.place {
                    return Err(Error::mismatch("record", &core.place, &e.place));
                }
                let capture = submitting_into("record", core)?;
                e.record(core, capture.as_ref())
            }
            (StreamRepr::Rust(s), EventRepr::Rust(e)) => s.record(e.as_ref()),
            _ => Err(Error::mismatch(
                "record",
                self.place(),
                &event.place().unwrap_or_else(|| self.place().clone()),
            )),
        }
    }

    fn record_event(&self) -> Result<PluginEvent> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                let capture = submitting_into("record_event", core)?;
                let event = Arc::new(AbiEvent::new(core.place.clone(), EventFlags::default()));
                event.record(core, capture.as_ref())?;
                Ok(PluginEvent(EventRepr::Abi(event)))
            }
            StreamRepr::Rust(s) => Ok(PluginEvent(EventRepr::Rust(s.record_event()?))),
        }
    }

    fn wait_event(&self, event: &PluginEvent) -> Result<()> {
        match (&self.0, &event.0) {
            (StreamRepr::Abi(core), EventRepr::Abi(e)) => {
                if e.place != core.place {
                    return Err(cross_device("wait_event", &core.place, &e.place));
                }
                match e.raw() {
                    None => Ok(()),
                    Some(raw) => wait_elided(core, "wait_event", raw),
                }
            }
            (StreamRepr::Rust(s), EventRepr::Rust(e)) => s.wait_event(e.as_ref()),
            _ => {
                let there = event.place().unwrap_or_else(|| self.place().clone());
                Err(cross_device("wait_event", self.place(), &there))
            }
        }
    }

    fn wait_stream(&self, other: &PluginStream) -> Result<()> {
        match (&self.0, &other.0) {
            (StreamRepr::Abi(core), StreamRepr::Abi(theirs)) => {
                if theirs.place != core.place {
                    return Err(cross_device("wait_stream", &core.place, &theirs.place));
                }
                if theirs.id == core.id {
                    return Ok(());
                }
                submitting_into("wait_stream", theirs)?;
                let raw = theirs.record_raw()?;
                wait_elided(core, "wait_stream", raw)
            }
            (StreamRepr::Rust(s), StreamRepr::Rust(o)) => s.wait_stream(o.as_ref()),
            _ => Err(cross_device("wait_stream", self.place(), other.place())),
        }
    }

    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                if !caps_of(core).host_funcs {
                    return Err(Error::unsupported("launch_host_func", &core.place));
                }
                if let Some(capture) = submitting_into("launch_host_func", core)? {
                    return submit_graph_callback(core, capture.host_fn(f));
                }
                core.submit(Item::Op(Box::new(move |core: &StreamCore| {
                    core.add_host_fn(f)
                })))
            }
            StreamRepr::Rust(s) => s.launch_host_func(f),
        }
    }

    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        self.0
            .either(|core| begin_capture(core, mode), |s| s.begin_capture(mode))
    }

    fn end_capture(&self) -> Result<PluginGraph> {
        self.0.either(
            |core| end_capture(core),
            |s| Ok(PluginGraph(GraphRepr::Rust(s.end_capture()?.into()))),
        )
    }

    fn is_capturing(&self) -> Result<bool> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                if caps_of(core).capture == CaptureSupport::None {
                    return Ok(false);
                }
                Ok(core.runtime.capture_state(core.slot, core.raw)? != CaptureState::None)
            }
            StreamRepr::Rust(s) => s.is_capturing(),
        }
    }

    fn wait_flag(&self, flag: &PluginFlag, value: u32) -> Result<()> {
        match (&self.0, &flag.0) {
            (StreamRepr::Abi(core), FlagRepr::Abi(f)) => {
                if !caps_of(core).flags {
                    return Err(Error::unsupported("wait_flag", &core.place));
                }
                if f.place != core.place {
                    return Err(Error::mismatch("wait_flag", &core.place, &f.place));
                }
                if let Some(capture) = submitting_into("wait_flag", core)? {
                    // A replay cannot be held on the host: the captured wait is a callback
                    // that blocks the replaying stream until the value is reached.
                    let f = f.clone();
                    let wait = capture.host_fn(Box::new(move || f.wait_until(value)));
                    return submit_graph_callback(core, wait);
                }
                core.submit(Item::WaitFlag(f.clone(), value))
            }
            (StreamRepr::Rust(s), FlagRepr::Rust(f)) => s.wait_flag(f.as_ref(), value),
            _ => Err(Error::mismatch("wait_flag", self.place(), flag.place())),
        }
    }

    fn write_flag(&self, flag: &PluginFlag, value: u32) -> Result<()> {
        match (&self.0, &flag.0) {
            (StreamRepr::Abi(core), FlagRepr::Abi(f)) => {
                if !caps_of(core).flags {
                    return Err(Error::unsupported("write_flag", &core.place));
                }
                if f.place != core.place {
                    return Err(Error::mismatch("write_flag", &core.place, &f.place));
                }
                let f = f.clone();
                if let Some(capture) = submitting_into("write_flag", core)? {
                    // Every replay writes the value; the graph keeps the flag.
                    return submit_graph_callback(
                        core,
                        capture.host_fn(Box::new(move || f.set(value))),
                    );
                }
                core.submit(Item::Op(Box::new(move |core: &StreamCore| {
                    core.add_callback(Callback::SetFlag(f, value))
                })))
            }
            (StreamRepr::Rust(s), FlagRepr::Rust(f)) => s.write_flag(f.as_ref(), value),
            _ => Err(Error::mismatch("write_flag", self.place(), flag.place())),
        }
    }

    fn wait_completion(&self, awaited: Completion) -> Result<()> {
        match &self.0 {
            StreamRepr::Abi(core) => crate::foreign::wait_completion(core, awaited),
            StreamRepr::Rust(s) => s.wait_completion(awaited),
        }
    }

    fn alloc(&self, len: usize) -> Result<PluginBuffer> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                refuse_in_capture(self)?;
                // `device_memory_allocate` is synchronous (`stream_ordered_alloc` is off).
                check_unsafe_call("alloc", &core.place)?;
                let pool = crate::mempool::default_pool(&core.runtime, core.slot);
                let buffer = crate::mempool::alloc(&pool, len)?;
                Ok(PluginBuffer(BufferRepr::Abi(buffer)))
            }
            StreamRepr::Rust(s) => Ok(PluginBuffer(BufferRepr::Rust(s.alloc(len)?))),
        }
    }

    fn alloc_from(
        &self,
        pool: &dyn devstream_core::DevicePool,
        len: usize,
    ) -> Result<PluginBuffer> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                refuse_in_capture(self)?;
                // As `alloc`: the plug-in's allocator is synchronous.
                check_unsafe_call("alloc_from", &core.place)?;
                let pool = devstream_core::mempool::downcast::<crate::mempool::PluginMemoryPool>(
                    pool,
                    "alloc_from",
                    &core.place,
                )?;
                Ok(PluginBuffer(BufferRepr::Abi(crate::mempool::alloc(
                    pool, len,
                )?)))
            }
            StreamRepr::Rust(s) => Ok(PluginBuffer(BufferRepr::Rust(s.alloc_from(pool, len)?))),
        }
    }

    fn capture_memory_pool(&self) -> Result<Arc<dyn devstream_core::DevicePool>> {
        match &self.0 {
            StreamRepr::Abi(core) => Err(Error::unsupported("capture_memory_pool", &core.place)),
            StreamRepr::Rust(s) => s.capture_memory_pool(),
        }
    }

    fn alloc_host(&self, len: usize) -> Result<PluginHostBuffer> {
        match &self.0 {
            StreamRepr::Abi(core) => {
                check_unsafe_call("alloc_host", &core.place)?;
                let buffer = AbiHostBuffer::allocate(&core.runtime, core.slot, len)?;
                Ok(PluginHostBuffer(HostRepr::Abi(buffer)))
            }
            StreamRepr::Rust(s) => Ok(PluginHostBuffer(HostRepr::Rust(s.alloc_host(len)?))),
        }
    }

    fn copy_from_host(&self, dst: &PluginBuffer, dst_offset: usize, src: &[u8]) -> Result<()> {
        match (&self.0, &dst.0) {
            (StreamRepr::Abi(core), _) => {
                let op = "copy_from_host";
                let d = abi_buffer(op, core, dst)?;
                check_range(op, dst_offset, src.len(), d.len)?;
                require_copy(op, core, CopyKind::HostToDevice)?;
                let mut staging = staging_for(op, core, src.len())?;
                staging.extend_from_slice(src);
                staged_upload(op, core, d, dst_offset, staging)
            }
            (StreamRepr::Rust(s), BufferRepr::Rust(d)) => {
                s.copy_from_host(d.as_ref(), dst_offset, src)
            }
            (StreamRepr::Rust(s), _) => {
                Err(Error::mismatch("copy_from_host", s.place(), dst.place()))
            }
        }
    }

    fn copy_host_to_device(
        &self,
        dst: &PluginBuffer,
        dst_offset: usize,
        src: &PluginHostBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_host_to_device";
        match (&self.0, &dst.0, &src.0) {
            (StreamRepr::Abi(core), _, _) => {
                let (d, s) = (abi_buffer(op, core, dst)?, abi_host(op, core, src)?);
                let kind = CopyKind::HostToDevice;
                let copy = checked_copy((core, op, kind), (d, dst_offset), (s, src_offset), len)?;
                submit_host_copy((core, op), (d, s), copy)
            }
            (StreamRepr::Rust(st), BufferRepr::Rust(d), HostRepr::Rust(h)) => {
                st.copy_host_to_device(d.as_ref(), dst_offset, h.as_ref(), src_offset, len)
            }
            (StreamRepr::Rust(st), _, _) => Err(Error::mismatch(op, st.place(), dst.place())),
        }
    }

    fn copy_device_to_host(
        &self,
        dst: &PluginHostBuffer,
        dst_offset: usize,
        src: &PluginBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_device_to_host";
        match (&self.0, &dst.0, &src.0) {
            (StreamRepr::Abi(core), _, _) => {
                let (d, s) = (abi_host(op, core, dst)?, abi_buffer(op, core, src)?);
                let kind = CopyKind::DeviceToHost;
                let copy = checked_copy((core, op, kind), (d, dst_offset), (s, src_offset), len)?;
                submit_host_copy((core, op), (s, d), copy)
            }
            (StreamRepr::Rust(st), HostRepr::Rust(h), BufferRepr::Rust(s)) => {
                st.copy_device_to_host(h.as_ref(), dst_offset, s.as_ref(), src_offset, len)
            }
            (StreamRepr::Rust(st), _, _) => Err(Error::mismatch(op, st.place(), src.place())),
        }
    }

    fn copy_device_to_device(
        &self,
        dst: &PluginBuffer,
        dst_offset: usize,
        src: &PluginBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_device_to_device";
        match (&self.0, &dst.0, &src.0) {
            (StreamRepr::Abi(core), _, _) => {
                let (d, s) = (abi_buffer(op, core, dst)?, abi_buffer(op, core, src)?);
                let kind = CopyKind::DeviceToDevice;
                let copy = checked_copy((core, op, kind), (d, dst_offset), (s, src_offset), len)?;
                if len == 0 {
                    return Ok(());
                }
                if let Some(capture) = submitting_into(op, core)? {
                    capture.keep_device(&d.0);
                    capture.keep_device(&s.0);
                } else {
                    d.used_by(core);
                    s.used_by(core);
                }
                submit_copy(core, copy)
            }
            (StreamRepr::Rust(st), BufferRepr::Rust(d), BufferRepr::Rust(s)) => {
                st.copy_device_to_device(d.as_ref(), dst_offset, s.as_ref(), src_offset, len)
            }
            (StreamRepr::Rust(st), _, _) => Err(Error::mismatch(op, st.place(), dst.place())),
        }
    }

    fn fill(&self, dst: &PluginBuffer, offset: usize, len: usize, value: u8) -> Result<()> {
        match (&self.0, &dst.0) {
            (StreamRepr::Abi(core), _) => {
                let d = abi_buffer("fill", core, dst)?;
                check_range("fill", offset, len, d.len)?;
                require_copy("fill", core, CopyKind::HostToDevice)?;
                // The table's memset is synchronous; a staged copy keeps stream order.
                let mut staging = staging_for("fill", core, len)?;
                staging.resize(len, value);
                staged_upload("fill", core, d, offset, staging)
            }
            (StreamRepr::Rust(s), BufferRepr::Rust(d)) => s.fill(d.as_ref(), offset, len, value),
            (StreamRepr::Rust(s), _) => Err(Error::mismatch("fill", s.place(), dst.place())),
        }
    }
}

/// `Stream::completion` on a plug-in stream: a completion callback in stream order where the
/// plug-in has `stream_add_callback`, else a fresh plug-in event watched by the runtime's
/// notifier thread (see `crate::notify`). During a capture: `Error::Capture`, and the capture is
/// left alone (only `cuda_stream_capture_info` is asked).
fn abi_completion(core: &Arc<StreamCore>) -> Result<Completion> {
    match crate::capture::capturing(core)? {
        Capturing::No => {}
        _ => {
            return Err(Error::capture(
                "completion",
                "the stream is capturing: its work runs when the graph is launched",
            ))
        }
    }
    let runtime = core.runtime.index();
    // A callback that wakes the notifier, then the event it settles: the future is filled once
    // that event is complete, so the callback has returned and the stream is idle (completing
    // from inside the callback let `query` answer false right after).
    let raw = core.record_nudged()?;
    Ok(crate::notify::watch(
        raw,
        runtime,
        Some(core.errors.clone()),
    ))
}

/// `Error::Unsupported` ("alloc during capture") when `stream`, a stream of a plug-in's C ABI,
/// captures: its allocator is not captured and devstream keeps no graph-private memory for it
/// (`capture_alloc` off), so a buffer made now would not be the memory the graph replays use.
fn refuse_in_capture(stream: &PluginStream) -> Result<()> {
    if stream.is_capturing()? {
        return Err(devstream_core::graph_memory::unsupported_in_capture(
            stream.place(),
        ));
    }
    Ok(())
}
