//! `PluginStream`: the stream contract mapped onto a plug-in's table (or a Rust-registered
//! backend's stream).

use crate::buffer::{
    AbiBuffer, AbiHostBuffer, BufferRepr, HostRepr, PluginBuffer, PluginHostBuffer,
};
use crate::capture::{
    check_unsafe_call, graph_trampoline, refuse_during_capture, submitting_into, Capturing,
};
use crate::event::{AbiEvent, EventRepr, PluginEvent};
use crate::flag::{FlagRepr, PluginFlag};
use crate::graph::{AbiGraph, GraphRepr, PluginGraph};
use crate::queue::{running_host_fn, Callback, Item, Origin, StreamCore};
use crate::registry::{lookup, plugin_slot, CustomDevice};
use crate::repr::Repr;
use crate::runtime::{CaptureState, CopyKind, Handle, RawCopy};
use crate::sys::{
    C_Stream, C_StreamCaptureModeGlobal, C_StreamCaptureModeRelaxed, C_StreamCaptureModeThreadLocal,
};
use devstream_core::traits::check_range;
use devstream_core::{
    BackendKind, Capabilities, CaptureMode, CaptureSupport, Completion, DeviceBuffer, DeviceEvent,
    DeviceFlag, DeviceStream, Error, EventFlags, HostFn, Place, Priority, PriorityRange, Result,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;

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

fn abi_buffer<'a>(
    op: &'static str,
    core: &StreamCore,
    buffer: &'a PluginBuffer,
) -> Result<&'a AbiBuffer> {
    match &buffer.0 {
        BufferRepr::Abi(b) if b.place == core.place => Ok(b),
        _ => Err(Error::mismatch(op, &core.place, buffer.place())),
    }
}

fn abi_host<'a>(
    op: &'static str,
    core: &StreamCore,
    buffer: &'a PluginHostBuffer,
) -> Result<&'a AbiHostBuffer> {
    match &buffer.0 {
        HostRepr::Abi(b) => Ok(b),
        HostRepr::Rust(_) => Err(Error::mismatch(op, &core.place, &core.place)),
    }
}

fn require_copy(op: &'static str, core: &StreamCore, kind: CopyKind) -> Result<()> {
    if core.runtime.has_copy(kind) {
        Ok(())
    } else {
        Err(Error::unsupported(op, &core.place))
    }
}

/// Plug-in memory at one end of a copy: its length and the address of its byte `offset`.
trait CopyEnd {
    fn byte_len(&self) -> usize;
    fn address(&self, offset: usize) -> usize;
}

impl CopyEnd for AbiBuffer {
    fn byte_len(&self) -> usize {
        self.len
    }
    fn address(&self, offset: usize) -> usize {
        self.at(offset)
    }
}

impl CopyEnd for AbiHostBuffer {
    fn byte_len(&self) -> usize {
        self.len
    }
    fn address(&self, offset: usize) -> usize {
        self.at(offset)
    }
}

/// The checks of a copy of `len` bytes on a plug-in place, in order: the destination's range,
/// the source's, then whether the plug-in copies `kind`; then the copy between their addresses.
fn checked_copy(
    (core, op, kind): (&Arc<StreamCore>, &'static str, CopyKind),
    (dst, dst_offset): (&impl CopyEnd, usize),
    (src, src_offset): (&impl CopyEnd, usize),
    len: usize,
) -> Result<RawCopy> {
    check_range(op, dst_offset, len, dst.byte_len())?;
    check_range(op, src_offset, len, src.byte_len())?;
    require_copy(op, core, kind)?;
    Ok(RawCopy {
        kind,
        dst: dst.address(dst_offset),
        src: src.address(src_offset),
        len,
    })
}

/// Submits `copy` in stream order.
fn submit_copy(core: &Arc<StreamCore>, copy: RawCopy) -> Result<()> {
    core.submit(Item::Op(Box::new(move |core: &StreamCore| {
        core.runtime.copy(core.slot, core.raw, copy)
    })))
}

/// Submits a checked `copy` between `device` and `host` (either way, its `kind` says which):
/// kept by the capture when the stream captures, else the device buffer remembers the stream
/// and the host buffer tracks the copy (so host reads and writes wait for it). Nothing for 0
/// bytes.
fn submit_host_copy(
    (core, op): (&Arc<StreamCore>, &'static str),
    (device, host): (&AbiBuffer, &AbiHostBuffer),
    copy: RawCopy,
) -> Result<()> {
    if copy.len == 0 {
        return Ok(());
    }
    if let Some(capture) = submitting_into(op, core)? {
        capture.keep_device(&device.0);
        capture.keep_host(&host.0);
        return submit_copy(core, copy);
    }
    device.used_by(core);
    host.copy_tracked(core, copy)
}

/// Room for `len` bytes staged on the host for `op`: `Error::OutOfMemory` where the host cannot
/// give it (a device buffer may be far larger than host memory), never an abort.
fn staging_for(op: &'static str, core: &StreamCore, len: usize) -> Result<Vec<u8>> {
    let mut staging = Vec::new();
    staging.try_reserve_exact(len).map_err(|_| {
        tracing::warn!("devstream-plugin: {op}: cannot stage {len} bytes on the host");
        Error::out_of_memory(&core.place, len)
    })?;
    Ok(staging)
}

/// Copies host bytes staged in `staging` to `dst[offset..]`. The staging moves into the copy
/// operation itself, which keeps it until the stream's work up to the copy is complete
/// (whatever the copy or the release answers), so no failure can free it early.
fn staged_upload(
    op: &'static str,
    core: &Arc<StreamCore>,
    dst: &AbiBuffer,
    offset: usize,
    staging: Vec<u8>,
) -> Result<()> {
    if staging.is_empty() {
        return Ok(());
    }
    if let Some(capture) = submitting_into(op, core)? {
        // Replayed by every launch: the graph keeps the bytes and the buffer. The
        // capturing stream is no user of the buffer (it runs none of this work): were it one,
        // the capture would keep its own stream alive, and dropping the stream could never
        // end the capture.
        capture.keep_device(&dst.0);
        let copy = RawCopy {
            kind: CopyKind::HostToDevice,
            dst: dst.at(offset),
            src: staging.as_ptr() as usize,
            len: staging.len(),
        };
        capture.keep(Box::new(staging));
        return submit_copy(core, copy);
    }
    dst.used_by(core);
    let (dst, len) = (dst.at(offset), staging.len());
    core.submit(Item::Op(Box::new(move |core: &StreamCore| {
        let copy = RawCopy {
            kind: CopyKind::HostToDevice,
            dst,
            src: staging.as_ptr() as usize,
            len,
        };
        let copied = core.runtime.copy(core.slot, core.raw, copy);
        // Even a failed asynchronous copy may have been queued: keep the bytes either way.
        core.keep_until_done(Box::new(staging));
        copied
    })))
}

/// Puts a captured callback (its data kept by the capture) on a capturing stream.
fn submit_graph_callback(core: &Arc<StreamCore>, data: *mut std::ffi::c_void) -> Result<()> {
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

fn native_mode(mode: CaptureMode) -> crate::sys::C_StreamCaptureMode {
    match mode {
        CaptureMode::Global => C_StreamCaptureModeGlobal,
        CaptureMode::ThreadLocal => C_StreamCaptureModeThreadLocal,
        CaptureMode::Relaxed => C_StreamCaptureModeRelaxed,
    }
}

fn begin_capture(core: &Arc<StreamCore>, mode: CaptureMode) -> Result<()> {
    if caps_of(core).capture == CaptureSupport::None {
        return Err(Error::unsupported("begin_capture", &core.place));
    }
    match crate::capture::capturing(core)? {
        Capturing::No => {}
        Capturing::Yes(capture) | Capturing::Invalid(Some(capture), _) => {
            capture.invalidate("begin_capture on a capturing stream".into());
            return Err(Error::capture(
                "begin_capture",
                "the stream is already capturing",
            ));
        }
        Capturing::Invalid(None, _) => {
            return Err(Error::capture(
                "begin_capture",
                "the stream is already capturing",
            ));
        }
    }
    // A capture devstream did not begin (code sharing an adopted stream may have begun one) is
    // refused here: the plug-in's refusal would invalidate it, and a failed begin's clean-up
    // below ends whatever capture the plug-in then reports.
    if let Ok(CaptureState::Active(_) | CaptureState::Invalidated(_)) =
        core.runtime.capture_state(core.slot, core.raw)
    {
        return Err(Error::capture(
            "begin_capture",
            "the stream is already capturing (a capture devstream did not begin)",
        ));
    }
    if core.has_deferred() {
        // The capture must come after the held work in the plug-in's order.
        core.hand_over_held()?;
    }
    // The end of the work before the capture, for releases while it captures.
    let before = core.record_raw()?;
    // No reaper job runs from here until the capture is registered (or refused).
    let _gate = crate::capture::beginning();
    // Until the capture leaves the registry (after the plug-in ended it), nothing is elided.
    crate::capture::window_open();
    let begun = core
        .runtime
        .begin_capture(core.slot, core.raw, native_mode(mode));
    let state = core.runtime.capture_state(core.slot, core.raw);
    match (begun, state) {
        (Ok(()), Ok(CaptureState::Active(id))) => {
            *crate::queue::lock(&core.pre_capture) = Some(before);
            crate::capture::register(core, id, mode);
            Ok(())
        }
        // Refused, and the plug-in reports no capture: nothing began.
        (Err(error), Ok(CaptureState::None)) => {
            crate::capture::window_close();
            Err(error)
        }
        (begun, state) => {
            let error = begun.err().unwrap_or_else(|| {
                Error::capture(
                    "begin_capture",
                    format!(
                        "{} plug-in: cuda_stream_capture_info after cuda_stream_begin_capture: \
                         {state:?}",
                        core.runtime.device_type
                    ),
                )
            });
            abandon_begun_capture(core, mode, before);
            Err(error)
        }
    }
}

/// After a `begin_capture` that gave devstream no capture it can use (the plug-in answered a
/// failure, or does not report the capture it began), while the plug-in may be capturing all
/// the same: a plug-in may do what was asked and answer an error or a warning. Work submitted
/// into a capture devstream does not know would be recorded as graph nodes, never run, and what
/// it holds (a host function's closure) never released; so the plug-in's capture is ended and
/// its graph destroyed. Should it still report a capture, that capture is registered as
/// invalidated: submissions answer `Error::Capture` until `end_capture` (or the stream's drop)
/// ends it. Called with the capture window open; closes it unless a capture is registered.
fn abandon_begun_capture(
    core: &Arc<StreamCore>,
    mode: CaptureMode,
    before: Arc<crate::queue::RawEvent>,
) {
    if let Ok(graph) = core.runtime.end_capture(core.slot, core.raw) {
        if let Err(error) = core.runtime.destroy_graph(core.slot, graph, Handle(0)) {
            tracing::warn!("devstream-plugin: destroying the graph of a failed begin: {error}");
        }
    }
    match core.runtime.capture_state(core.slot, core.raw) {
        Ok(CaptureState::Active(id) | CaptureState::Invalidated(id)) => {
            *crate::queue::lock(&core.pre_capture) = Some(before);
            crate::capture::register(core, id, mode).invalidate(
                "begin_capture gave devstream no capture to use, and the plug-in did not end it"
                    .into(),
            );
        }
        _ => crate::capture::window_close(),
    }
}

fn end_capture(core: &Arc<StreamCore>) -> Result<PluginGraph> {
    if caps_of(core).capture == CaptureSupport::None {
        return Err(Error::unsupported("end_capture", &core.place));
    }
    let id = match core.runtime.capture_state(core.slot, core.raw) {
        Ok(CaptureState::Active(id) | CaptureState::Invalidated(id)) => id,
        other => {
            // The plug-in reports no capture (or cannot say): whatever devstream registered for
            // a capture begun on this stream ends with this call, since nothing else could end
            // it while the stream lives (a default stream lives as long as the process).
            *crate::queue::lock(&core.pre_capture) = None;
            crate::capture::forget_origin(
                core.runtime.index(),
                core.id,
                "its stream ended its capture",
            );
            return match other {
                Err(error) => Err(error),
                Ok(_) => Err(Error::capture("end_capture", "the stream is not capturing")),
            };
        }
    };
    let capture = crate::capture::find(core.runtime.index(), id);
    if let Some(capture) = &capture {
        if capture.origin != core.id {
            return Err(Error::capture(
                "end_capture",
                format!(
                    "the stream joined the capture begun on stream {}; end it there",
                    capture.origin
                ),
            ));
        }
    }
    let ended = core.runtime.end_capture(core.slot, core.raw);
    *crate::queue::lock(&core.pre_capture) = None;
    if let Some(capture) = &capture {
        crate::capture::unregister(capture);
    }
    // Any other capture devstream registered on this stream is over too (the plug-in may have
    // reported its capture under another id).
    crate::capture::forget_origin(
        core.runtime.index(),
        core.id,
        "its stream ended its capture",
    );
    let graph = ended?;
    let discard = |reason: String| {
        if let Err(error) = core.runtime.destroy_graph(core.slot, graph, Handle(0)) {
            tracing::warn!("devstream-plugin: destroying a discarded graph: {error}");
        }
        Err(Error::capture("end_capture", reason))
    };
    let Some(capture) = capture else {
        return discard(format!("capture {id} was not begun by devstream"));
    };
    if let Some(reason) = capture.invalidated() {
        return discard(format!("the capture was invalidated ({reason})"));
    }
    let exec = match core.runtime.instantiate(core.slot, graph) {
        Ok(exec) => exec,
        Err(error) => {
            let _ = core.runtime.destroy_graph(core.slot, graph, Handle(0));
            return Err(error);
        }
    };
    Ok(PluginGraph(GraphRepr::Abi(Arc::new(AbiGraph::new(
        core.runtime.clone(),
        core.slot,
        graph,
        exec,
        capture,
    )))))
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
                    return match core.first_error() {
                        Some(error) => Err(error),
                        None => Ok(()),
                    };
                }
                core.wait_drained();
                core.runtime.synchronize_stream(core.slot, core.raw)?;
                match core.first_error() {
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
    if core.runtime.table().stream_add_callback.is_some() {
        // A callback that wakes the notifier, then the event it settles: the future is filled
        // once that event is complete, so the callback has returned and the stream is idle
        // (completing from inside the callback let `query` answer false right after).
        core.submit(Item::Op(Box::new(move |core: &StreamCore| {
            core.add_nudge(runtime)
        })))?;
    }
    let raw = core.record_raw()?;
    Ok(crate::notify::watch(
        raw,
        runtime,
        Some(core.errors.clone()),
    ))
}
