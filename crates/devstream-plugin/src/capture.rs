//! Stream capture through a plug-in's graph-capture functions (`cuda_stream_begin_capture`,
//! `cuda_stream_end_captrue`, `cuda_graph_instantiate`, `cuda_graph_launch`, the destroys and
//! `cuda_stream_capture_info`), used only on a plug-in whose table was identified as Paddle
//! 3.3's.
//!
//! The plug-in records what devstream submits to a capturing stream into its graph (copies,
//! callbacks, event records, waits, which join other streams into the capture as in CUDA).
//! devstream keeps on the host what those replays use, for as long as the graph lives:
//!
//! * host functions (and flag writes) are callbacks whose data is a [`GraphHostFn`] that runs
//!   its closure on every replay and is dropped with the graph, never by a replay;
//! * device and host buffers the capture touched, and bytes staged for uploads, are kept by
//!   the graph (a buffer dropped meanwhile is freed once the graph is gone as well);
//! * the rules the plug-in need not know: `synchronize`/`query` of a capturing stream is
//!   `Error::Capture` and invalidates the capture (devstream-side: `end_capture` then destroys
//!   the graph and answers `Error::Capture`), CUDA's mode rules for other streams'
//!   `synchronize`, beginning twice, and work held on the host behind a flag.

use crate::buffer::{DeviceInner, HostInner};
use crate::queue::{lock, StreamCore};
use crate::runtime::CaptureState;
use crate::sys::{C_Device, C_Status, C_Stream, C_SUCCESS};
use crate::tokens::GraphFns;
use devstream_core::capture::CaptureRegistration;
use devstream_core::panic::{drop_contained, drop_payload};
use devstream_core::{CaptureMode, Error, HostFn, Result};
use std::any::Any;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One capture in progress (and, once ended, what its graph keeps).
pub(crate) struct CaptureShared {
    /// The runtime's number in the process.
    runtime: usize,
    /// The plug-in's capture id (`cuda_stream_capture_info`).
    id: u64,
    /// The devstream stream that began it.
    pub(crate) origin: u64,
    mode: CaptureMode,
    /// Why devstream invalidated it, if it did.
    invalidated: Mutex<Option<String>>,
    /// Host functions, staged bytes: dropped with the graph (each drop contained).
    kept: Mutex<Vec<Box<dyn Any + Send>>>,
    pub(crate) devices: Mutex<Vec<Arc<DeviceInner>>>,
    pub(crate) hosts: Mutex<Vec<Arc<HostInner>>>,
    /// The streams the graph was launched on, by plug-in stream handle: where a replayed
    /// host function's panic is reported (the callback is told its stream).
    launches: Arc<Mutex<Vec<Launch>>>,
    /// What the capture's mode forbids (see `devstream_core::capture`), until it leaves
    /// [`ACTIVE`].
    registration: Mutex<Option<CaptureRegistration>>,
}

/// A launch stream of a graph: its plug-in handle, devstream id and error slot.
struct Launch {
    handle: usize,
    stream: u64,
    errors: crate::queue::StreamErrors,
}

impl std::fmt::Debug for CaptureShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureShared")
            .field("id", &self.id)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl Drop for CaptureShared {
    fn drop(&mut self) {
        // Closures whose destructors panic must not unwind out of here.
        for item in std::mem::take(&mut *lock(&self.kept)) {
            drop_contained(item);
        }
    }
}

impl CaptureShared {
    /// Keeps `item` until the graph is gone.
    pub(crate) fn keep(&self, item: Box<dyn Any + Send>) {
        lock(&self.kept).push(item);
    }

    pub(crate) fn keep_device(&self, memory: &Arc<DeviceInner>) {
        let mut devices = lock(&self.devices);
        if !devices.iter().any(|d| Arc::ptr_eq(d, memory)) {
            devices.push(memory.clone());
        }
    }

    pub(crate) fn keep_host(&self, memory: &Arc<HostInner>) {
        let mut hosts = lock(&self.hosts);
        if !hosts.iter().any(|h| Arc::ptr_eq(h, memory)) {
            hosts.push(memory.clone());
        }
    }

    /// Marks the capture invalid (the first reason stays).
    pub(crate) fn invalidate(&self, reason: String) {
        lock(&self.invalidated).get_or_insert(reason);
    }

    pub(crate) fn invalidated(&self) -> Option<String> {
        lock(&self.invalidated).clone()
    }

    /// A host function of the graph: a callback the plug-in calls on every replay with the
    /// returned token, which names it while this capture (its graph) lives.
    pub(crate) fn host_fn(&self, mut f: HostFn) -> *mut c_void {
        self.fallible_fn(Box::new(move || {
            f();
            Ok(())
        }))
    }

    /// [`CaptureShared::host_fn`] for a function whose error each replay reports on the
    /// launch's stream, as a panic is.
    pub(crate) fn fallible_fn(&self, f: GraphFn) -> *mut c_void {
        let payload = Arc::new(GraphHostFn {
            f: Mutex::new(f),
            origin: self.origin,
            launches: self.launches.clone(),
        });
        let token = GRAPH_FNS.insert(payload);
        self.keep(Box::new(GraphFnToken(token)));
        token as *mut c_void
    }

    /// Notes that the graph is launched on `core`'s stream: a replayed host function that
    /// panics there reports it on that stream.
    pub(crate) fn launched_on(&self, core: &StreamCore) {
        let mut launches = lock(&self.launches);
        launches.retain(|l| l.handle != core.raw.0);
        launches.push(Launch {
            handle: core.raw.0,
            stream: core.id,
            errors: core.errors.clone(),
        });
    }
}

/// Captures in progress, of every runtime.
static ACTIVE: Mutex<Vec<Arc<CaptureShared>>> = Mutex::new(Vec::new());
/// `ACTIVE.len()`, read without the lock on every operation.
static ACTIVE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Captures begun through devstream that may be active (any runtime): opened before the
/// plug-in's begin, closed when the capture leaves [`ACTIVE`] (after the plug-in's end) or fails
/// to begin. While non-zero no wait is elided and no record gets a position (redundant-wait
/// elision, `devstream_core::elide`).
static WINDOW: AtomicUsize = AtomicUsize::new(0);
/// Raised by every [`window_open`]: an operation that reads the same value before and after
/// overlapped no begin.
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// Set for good once a plug-in stream or event handle was adopted or handed out: other code may
/// then capture (or record) what devstream cannot see, so elision stops.
static FOREIGN: AtomicBool = AtomicBool::new(false);

/// Before a plug-in begins a capture.
pub(crate) fn window_open() {
    WINDOW.fetch_add(1, Ordering::SeqCst);
    EPOCH.fetch_add(1, Ordering::SeqCst);
}

/// After a capture ended (it left [`ACTIVE`]) or failed to begin.
pub(crate) fn window_close() {
    WINDOW.fetch_sub(1, Ordering::SeqCst);
}

/// A plug-in handle was adopted or handed out: no elision from now on.
pub(crate) fn foreign_handles() {
    if !FOREIGN.load(Ordering::Relaxed) {
        FOREIGN.store(true, Ordering::SeqCst);
    }
}

/// `Some(epoch)` when waits may be elided and records positioned now.
#[inline]
pub(crate) fn elision_epoch() -> Option<u64> {
    let epoch = EPOCH.load(Ordering::SeqCst);
    if WINDOW.load(Ordering::SeqCst) != 0 || FOREIGN.load(Ordering::Acquire) {
        return None;
    }
    Some(epoch)
}

/// Whether no capture began since [`elision_epoch`] gave `epoch`.
#[inline]
pub(crate) fn elision_still_valid(epoch: u64) -> bool {
    EPOCH.load(Ordering::SeqCst) == epoch
}

pub(crate) fn find(runtime: usize, id: u64) -> Option<Arc<CaptureShared>> {
    lock(&ACTIVE)
        .iter()
        .find(|c| c.runtime == runtime && c.id == id)
        .cloned()
}

impl CaptureShared {
    /// The plug-in's capture id (`cuda_stream_capture_info`).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

/// Forgets a capture that ended (its graph, if any, keeps it).
pub(crate) fn unregister(capture: &Arc<CaptureShared>) {
    lock(&capture.registration).take();
    let mut active = lock(&ACTIVE);
    let before = active.len();
    active.retain(|c| !Arc::ptr_eq(c, capture));
    ACTIVE_COUNT.store(active.len(), Ordering::SeqCst);
    for _ in active.len()..before {
        window_close();
    }
}

/// Whether devstream registered a capture begun on the stream `origin` of `runtime` (cheap
/// while no capture is in progress).
pub(crate) fn began_on(runtime: usize, origin: u64) -> bool {
    ACTIVE_COUNT.load(Ordering::SeqCst) > 0
        && lock(&ACTIVE)
            .iter()
            .any(|c| c.runtime == runtime && c.origin == origin)
}

/// Ends the captures devstream registered as begun on the stream `origin` of `runtime`, for
/// `reason`: the stream is being dropped (no `end_capture` can come any more), or the plug-in
/// ended its capture (whatever capture id it reported: one devstream cannot name any more
/// would otherwise stay registered). A capture left registered (a `Global` one above all)
/// would forbid synchronizing every other stream of the plug-in from then on. Work other
/// streams joined into it stays theirs to synchronize; the capture is marked invalidated.
pub(crate) fn forget_origin(runtime: usize, origin: u64, reason: &str) {
    if ACTIVE_COUNT.load(Ordering::SeqCst) == 0 {
        return;
    }
    let mut active = lock(&ACTIVE);
    let before = active.len();
    active.retain(|c| {
        let theirs = c.runtime == runtime && c.origin == origin;
        if theirs {
            c.invalidate(reason.to_owned());
            lock(&c.registration).take();
        }
        !theirs
    });
    ACTIVE_COUNT.store(active.len(), Ordering::SeqCst);
    for _ in active.len()..before {
        window_close();
    }
}

/// Orders the beginning of captures against the reaper's work: a capture begins (the
/// plug-in's `cuda_stream_begin_capture` and the registration devstream keeps of it) under the
/// write side, and the reaper advances each job under the read side. Without it the reaper
/// could look for captures, find none, and then call into the plug-in just after a `Global`
/// one began (seen on an H100: `hipErrorStreamCaptureUnsupported`), or record a stream's
/// release marker into a capture that began in between. Only questions that cannot block take
/// the read side (a plug-in without `query_event` is synchronized instead, and a capture must
/// never wait for stream work, which may wait for the thread beginning it).
static BEGIN_GATE: RwLock<()> = RwLock::new(());

/// Held while a capture begins (see [`BEGIN_GATE`]).
pub(crate) fn beginning() -> RwLockWriteGuard<'static, ()> {
    BEGIN_GATE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Held by the reaper while it advances one job (see [`BEGIN_GATE`]).
pub(crate) fn reaping() -> RwLockReadGuard<'static, ()> {
    BEGIN_GATE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether a capture forbids "unsafe" calls from a thread that captures nothing, such as
/// devstream's reaper: a `Global`-mode capture in progress (CUDA's rule), of any plug-in of the
/// process, since plug-ins may share one driver (devstream-paddle's `devstream_cuda` and
/// `devstream_hip` over the HIP-on-CUDA shim do: a `Global` capture on one refused the
/// other's event queries on an H100). An invalidated capture still counts until it is ended.
/// Cheap when no capture is in progress.
pub(crate) fn forbids_other_threads() -> bool {
    ACTIVE_COUNT.load(Ordering::SeqCst) > 0
        && lock(&ACTIVE).iter().any(|c| c.mode == CaptureMode::Global)
}

/// What devstream believes of captures now, for a harness's diagnostics: the captures in
/// progress (runtime, plug-in id, mode, the stream that began it, why devstream invalidated
/// it) and the runtimes whose capture state is not known.
#[doc(hidden)]
pub fn capture_diagnostics() -> String {
    let active: Vec<String> = lock(&ACTIVE)
        .iter()
        .map(|c| {
            format!(
                "runtime {} capture {} ({:?}, begun on stream {}{})",
                c.runtime,
                c.id,
                c.mode,
                c.origin,
                c.invalidated()
                    .map_or(String::new(), |why| format!(", invalidated: {why}"))
            )
        })
        .collect();
    format!(
        "captures in progress: [{}]; runtimes not known: {:?}",
        active.join("; "),
        *lock(&UNSURE)
    )
}

/// Whether any capture of this runtime is in progress (cheap).
pub(crate) fn any_active(runtime: usize) -> bool {
    ACTIVE_COUNT.load(Ordering::SeqCst) > 0 && lock(&ACTIVE).iter().any(|c| c.runtime == runtime)
}

/// Runtimes whose capture state devstream could not keep track of: a capture it began there
/// may still be open in the plug-in (an end that failed, a capture status the plug-in could not
/// give), or a stream may be left in one (joined to a capture whose end failed). Their streams
/// are always asked (`capturing`), so work is never handed as ordinary work to a plug-in stream
/// that captures it.
static UNSURE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// `UNSURE`'s length, read without the lock (empty unless a plug-in failed a capture call).
static UNSURE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Notes that `runtime`'s capture state is no longer known (see [`UNSURE`]).
pub(crate) fn mark_unsure(runtime: usize) {
    let mut unsure = lock(&UNSURE);
    if !unsure.contains(&runtime) {
        unsure.push(runtime);
        UNSURE_COUNT.store(unsure.len(), Ordering::SeqCst);
    }
}

/// Whether `runtime`'s streams must be asked whether they capture: a capture devstream knows
/// is in progress there, or one it may not know is.
fn must_ask(runtime: usize) -> bool {
    any_active(runtime)
        || (UNSURE_COUNT.load(Ordering::SeqCst) > 0 && lock(&UNSURE).contains(&runtime))
}

/// Where a stream stands as to capture.
pub(crate) enum Capturing {
    No,
    Yes(Arc<CaptureShared>),
    /// Capturing into a capture that was invalidated (by devstream or by the plug-in), or
    /// that devstream does not know: nothing may be submitted until it is ended.
    Invalid(Option<Arc<CaptureShared>>, String),
}

/// Asks the plug-in whether `core`'s stream is capturing (only while some capture of its
/// runtime is in progress: otherwise no plug-in call).
pub(crate) fn capturing(core: &StreamCore) -> Result<Capturing> {
    if !must_ask(core.runtime.index()) || core.runtime.capture_functions().is_none() {
        return Ok(Capturing::No);
    }
    Ok(match core.runtime.capture_state(core.slot, core.raw)? {
        CaptureState::None => Capturing::No,
        CaptureState::Active(id) => match find(core.runtime.index(), id) {
            Some(capture) => match capture.invalidated() {
                Some(reason) => Capturing::Invalid(Some(capture), reason),
                None => Capturing::Yes(capture),
            },
            None => Capturing::Invalid(None, format!("capture {id} was not begun by devstream")),
        },
        CaptureState::Invalidated(id) => Capturing::Invalid(
            find(core.runtime.index(), id),
            "the plug-in invalidated the capture".into(),
        ),
    })
}

/// The capture `core` submits into, `None` outside a capture, or `Error::Capture` when its
/// capture is invalid (nothing may be submitted until it is ended).
pub(crate) fn submitting_into(
    op: &'static str,
    core: &StreamCore,
) -> Result<Option<Arc<CaptureShared>>> {
    match capturing(core)? {
        Capturing::No => Ok(None),
        Capturing::Yes(capture) => {
            if core.has_deferred() {
                // Work held on the host behind a flag would reach the plug-in after this.
                let reason = "the stream holds work on the host (behind a flag wait, or \
                              submitted from inside a plug-in call for another stream), which a \
                              capture cannot order"
                    .to_owned();
                capture.invalidate(format!("{op}: {reason}"));
                return Err(Error::capture(op, reason));
            }
            Ok(Some(capture))
        }
        Capturing::Invalid(_, reason) => Err(Error::capture(
            op,
            format!("the stream's capture is invalid ({reason}); end it first"),
        )),
    }
}

/// `synchronize`/`query` of a capturing stream: `Error::Capture`, invalidating its capture.
pub(crate) fn refuse_during_capture(op: &'static str, core: &StreamCore) -> Result<()> {
    match capturing(core)? {
        Capturing::No => Ok(()),
        Capturing::Yes(capture) | Capturing::Invalid(Some(capture), _) => {
            capture.invalidate(format!("{op} of a capturing stream"));
            Err(Error::capture(op, "the stream is capturing"))
        }
        Capturing::Invalid(None, _) => Err(Error::capture(op, "the stream is capturing")),
    }
}

/// CUDA's rule for potentially unsafe calls (synchronizing or querying another stream or an
/// event, synchronous allocations) during captures on `place`: a `Global` capture forbids them
/// on every thread, a `ThreadLocal` one on its capturing thread, a `Relaxed` one nowhere
/// (`devstream_core::capture`); a forbidden call fails and the capture goes on.
pub(crate) fn check_unsafe_call(op: &'static str, place: &devstream_core::Place) -> Result<()> {
    devstream_core::capture::check_unsafe_call(place, op)
}

/// Registers a capture the plug-in began on `core`'s stream.
pub(crate) fn register(core: &StreamCore, id: u64, mode: CaptureMode) -> Arc<CaptureShared> {
    let capture = Arc::new(CaptureShared {
        runtime: core.runtime.index(),
        id,
        origin: core.id,
        mode,
        invalidated: Mutex::new(None),
        kept: Mutex::new(Vec::new()),
        devices: Mutex::new(Vec::new()),
        hosts: Mutex::new(Vec::new()),
        launches: Arc::new(Mutex::new(Vec::new())),
        registration: Mutex::new(Some(devstream_core::capture::register(
            &core.place,
            mode,
            core.id,
        ))),
    });
    let mut active = lock(&ACTIVE);
    active.push(capture.clone());
    ACTIVE_COUNT.store(active.len(), Ordering::SeqCst);
    capture
}

/// The graphs' host functions, by the tokens their callbacks carry.
static GRAPH_FNS: GraphFns<Arc<GraphHostFn>> = GraphFns::new();

/// Kept by a capture (and its graph): frees its host function's token when they go. The host
/// function itself is dropped here unless a replay is running it (then after that replay).
struct GraphFnToken(usize);

impl Drop for GraphFnToken {
    fn drop(&mut self) {
        drop(GRAPH_FNS.remove(self.0));
    }
}

/// What a graph's callback runs on every replay: an error it returns is reported on the
/// launch's stream.
pub(crate) type GraphFn = Box<dyn FnMut() -> Result<()> + Send>;

/// A host function kept in a graph: run on every replay, dropped with the graph.
struct GraphHostFn {
    f: Mutex<GraphFn>,
    /// The stream that captured it (named in a panic's error if the launch stream is unknown).
    origin: u64,
    launches: Arc<Mutex<Vec<Launch>>>,
}

/// The `C_Callback` of a captured host function: runs the closure (never consumes it), a
/// panic recorded for the launch's stream. Never unwinds into the plug-in.
pub(crate) unsafe extern "C" fn graph_trampoline(
    _device: C_Device,
    stream: C_Stream,
    user_data: *mut c_void,
    status: *mut C_Status,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if !status.is_null() {
            // SAFETY: the plug-in passes a writable status or null.
            unsafe { *status = C_SUCCESS };
        }
        // Nothing once the graph is gone (a plug-in replaying a destroyed graph, or running a
        // callback that a capture ending meanwhile did not take).
        let Some(payload) = GRAPH_FNS.get(user_data as usize) else {
            return;
        };
        let mut f = lock(&payload.f);
        let ran = catch_unwind(AssertUnwindSafe(|| (*f)()));
        drop(f);
        let launch = lock(&payload.launches)
            .iter()
            .find(|l| l.handle == stream as usize)
            .map(|l| (l.stream, l.errors.clone()));
        let error = match ran {
            Ok(Ok(())) => return,
            Ok(Err(error)) => error,
            Err(panic) => {
                let message = devstream_core::panic::message(panic.as_ref());
                drop_payload(panic);
                Error::HostFuncPanicked {
                    stream: launch.as_ref().map_or(payload.origin, |(id, _)| *id),
                    message,
                }
            }
        };
        match launch {
            Some((_, errors)) => errors.raise(error),
            None => tracing::warn!(
                "devstream-plugin: a host function captured on stream {} failed in a replay \
                 on a stream devstream did not launch it on: {error}",
                payload.origin
            ),
        }
    }));
    if let Err(panic) = outcome {
        drop_payload(panic);
    }
}
