//! Host functions on streams: the panic-safe `extern "C"` trampolines, where a panic is kept
//! until the stream's next `synchronize`, and the objects a capture owns until its graph does.

use crate::raw::{RawApi, RawStream};
use devstream_core::{Error, HostFn, Result};
use std::any::Any;
use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};

thread_local! {
    /// Set while a runtime callback thread runs one of our trampolines.
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as inside a runtime callback until dropped.
struct CallbackScope;

impl CallbackScope {
    fn enter() -> CallbackScope {
        let _ = IN_CALLBACK.try_with(|c| c.set(true));
        CallbackScope
    }
}

impl Drop for CallbackScope {
    fn drop(&mut self) {
        let _ = IN_CALLBACK.try_with(|c| c.set(false));
    }
}

type ReleaseJob = Box<dyn FnOnce() + Send>;

fn release_thread() -> Option<&'static Mutex<Sender<ReleaseJob>>> {
    static SENDER: OnceLock<Option<Mutex<Sender<ReleaseJob>>>> = OnceLock::new();
    SENDER
        .get_or_init(|| {
            let (tx, rx) = channel::<ReleaseJob>();
            std::thread::Builder::new()
                .name("devstream-release".into())
                .spawn(move || {
                    for job in rx {
                        let _ = catch_unwind(AssertUnwindSafe(job));
                    }
                })
                .ok()
                .map(|_| Mutex::new(tx))
        })
        .as_ref()
}

/// Runs `release` (which makes runtime calls: destroy, free, query) now, or, when called on a
/// runtime callback thread — where CUDA and HIP forbid runtime calls, and a blocking one can
/// deadlock the process' callbacks — on devstream's release thread. That happens when a host
/// function's closure holds the last handle to a stream, event, buffer, flag or graph.
pub(crate) fn release_off_callback(release: impl FnOnce() + Send + 'static) {
    if !IN_CALLBACK.try_with(Cell::get).unwrap_or(false) {
        release();
        return;
    }
    match release_thread().and_then(|tx| tx.lock().ok()) {
        Some(tx) => {
            if let Err(job) = tx.send(Box::new(release)) {
                // The release thread is gone: never release (a leak, not a deadlock).
                std::mem::forget(job);
            }
        }
        None => std::mem::forget(release),
    }
}

/// Where a stream keeps the first panic of its host functions until `synchronize` reports it.
#[derive(Debug, Default)]
pub(crate) struct PanicSlot {
    raised: AtomicBool,
    message: Mutex<Option<String>>,
}

impl PanicSlot {
    pub(crate) fn raise(&self, message: String) {
        if let Ok(mut slot) = self.message.lock() {
            if slot.is_none() {
                *slot = Some(message);
            }
        }
        self.raised.store(true, Ordering::Release);
    }

    /// Takes the kept panic, if any (one relaxed load when there is none).
    #[inline]
    pub(crate) fn take(&self, stream: u64) -> Result<()> {
        if !self.raised.load(Ordering::Acquire) {
            return Ok(());
        }
        self.raised.store(false, Ordering::Release);
        let message = self
            .message
            .lock()
            .ok()
            .and_then(|mut m| m.take())
            .unwrap_or_else(|| "host function panicked".into());
        Err(Error::HostFuncPanicked { stream, message })
    }
}

/// The panic target of host functions captured into a graph: the stream the graph was last
/// launched on.
#[derive(Debug)]
pub(crate) struct GraphHostState {
    pub(crate) target: Mutex<Arc<PanicSlot>>,
}

pub(crate) enum PanicSink {
    Stream(Arc<PanicSlot>),
    Graph(Arc<GraphHostState>),
}

impl PanicSink {
    fn raise(&self, message: String) {
        match self {
            PanicSink::Stream(slot) => slot.raise(message),
            PanicSink::Graph(state) => {
                if let Ok(target) = state.target.lock() {
                    target.raise(message);
                }
            }
        }
    }
}

pub(crate) struct HostCall {
    pub(crate) f: HostFn,
    pub(crate) sink: PanicSink,
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "host function panicked (non-string payload)".to_string()
    }
}

fn run(call: &mut HostCall) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (call.f)())) {
        call.sink.raise(panic_message(payload.as_ref()));
    }
}

/// Trampoline of a host function submitted once: runs it and frees it.
///
/// # Safety
/// `data` is a pointer from `Box::into_raw(Box<HostCall>)`, passed to exactly one launch.
pub(crate) unsafe extern "C" fn host_once(data: *mut c_void) {
    let _scope = CallbackScope::enter();
    // SAFETY: per this function's contract, `data` owns a HostCall and is used once.
    let mut call = unsafe { Box::from_raw(data.cast::<HostCall>()) };
    run(&mut call);
    // A closure whose drop panics must not unwind into the runtime either.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(call)));
}

/// Trampoline of a host function captured into a graph: runs it, leaves it owned by the graph.
///
/// # Safety
/// `data` points to a HostCall that outlives every launch of the graph, and launches of one
/// graph never run concurrently (the runtime orders them).
pub(crate) unsafe extern "C" fn host_in_graph(data: *mut c_void) {
    let _scope = CallbackScope::enter();
    // SAFETY: per this function's contract the HostCall is alive and not aliased mutably.
    let call = unsafe { &mut *data.cast::<HostCall>() };
    run(call);
}

/// A host function whose memory a graph owns (freed when the graph is released).
pub(crate) struct OwnedHostCall(pub(crate) *mut HostCall);

// SAFETY: the HostCall holds a `Send` closure and `Send + Sync` sinks; the raw pointer is only
// dereferenced by the runtime's host thread during launches and freed on drop.
unsafe impl Send for OwnedHostCall {}
// SAFETY: no `&self` method touches the pointee.
unsafe impl Sync for OwnedHostCall {}

impl Drop for OwnedHostCall {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::into_raw and no launch can run any more (the owner
        // releases it only after the graph's last launch completed, or when the capture failed).
        let call = unsafe { Box::from_raw(self.0) };
        let _ = catch_unwind(AssertUnwindSafe(move || drop(call)));
    }
}

/// What a capture sequence owns until `end_capture` gives it to the graph: host functions
/// captured into it and buffers its work uses.
pub(crate) struct CaptureOwned {
    pub(crate) host_state: Arc<GraphHostState>,
    pub(crate) keep: Vec<Box<dyn Any + Send + Sync>>,
}

impl CaptureOwned {
    pub(crate) fn new(target: Arc<PanicSlot>) -> Self {
        CaptureOwned {
            host_state: Arc::new(GraphHostState {
                target: Mutex::new(target),
            }),
            keep: Vec::new(),
        }
    }
}

/// The callback of `add_callback`: receives the stream's status.
pub(crate) struct StreamCallbackCall<A: RawApi> {
    pub(crate) f: Box<dyn FnOnce(Result<()>) + Send>,
    pub(crate) sink: Arc<PanicSlot>,
    pub(crate) _api: std::marker::PhantomData<A>,
}

/// Trampoline of `cuStreamAddCallback`.
///
/// # Safety
/// `data` comes from `Box::into_raw(Box<StreamCallbackCall<A>>)` and is used once.
pub(crate) unsafe extern "C" fn stream_callback<A: RawApi>(
    _stream: RawStream,
    status: i32,
    data: *mut c_void,
) {
    let _scope = CallbackScope::enter();
    // SAFETY: per this function's contract.
    let call = unsafe { Box::from_raw(data.cast::<StreamCallbackCall<A>>()) };
    let StreamCallbackCall { f, sink, .. } = *call;
    let result = if status == 0 {
        Ok(())
    } else {
        Err(crate::error::map_error::<A>(crate::raw::RawError {
            code: status,
            call: "stream callback status",
        }))
    };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || f(result))) {
        sink.raise(panic_message(payload.as_ref()));
    }
}
