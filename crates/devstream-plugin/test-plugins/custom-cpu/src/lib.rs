//! A Paddle custom-device plug-in over host memory, with real asynchronous streams, for
//! devstream's tests and examples.
//!
//! Device type `custom_cpu`, two devices (ids 0 and 1), runtime version 0.1.1, the Paddle 3.3
//! layout of `device_ext.h` (it accepts a host whose `CustomRuntimeParams` or
//! `C_DeviceInterface` size matches, as `PADDLE_CUSTOM_RUNTIME_CHECK_VERSION` does).
//!
//! * Every stream has its own worker thread that runs the stream's tasks in order: copies,
//!   host callbacks and waits. The null stream is a per-device default stream.
//! * An event records "the stream's work submitted so far" and completes when the stream's
//!   worker has finished that work; `stream_wait_event` queues a wait for exactly that point
//!   (later re-records do not change it).
//! * `query_stream`/`query_event` answer `C_SUCCESS` when complete and `C_FAILED` when not.
//! * Device memory is host memory (64-byte aligned, zeroed).
//! * Destroying a stream never blocks: its worker finishes the queued work and exits.
//!
//! Besides the ABI it exports `devstream_test_plugin_cpu_live(size_t out[3])`, which writes the
//! numbers of live streams, events and allocations, so that tests can check for leaks, and
//! test hooks that hold `stream_wait_event` (`devstream_test_plugin_cpu_hold_waits`) or
//! `stream_add_callback` (`devstream_test_plugin_cpu_hold_callbacks`) on one stream inside the
//! call (with `_await_held_wait` and `_release_waits`), so that tests can stop devstream's
//! dispatcher at that point deterministically, and `devstream_test_plugin_cpu_lose_device(int)`,
//! which makes a device lost for good: every later call on it answers `C_ERROR` (releases
//! excepted; callbacks are accepted and never called), and its streams' queued work never
//! runs.
//!
//! The collectives (`xccl_*`) are implemented too (module `xccl`): ranks are threads of this
//! process, each collective a task of its stream.
//!
//! Every exported function catches panics and answers `C_INTERNAL_ERROR` instead.

pub use devstream_paddle_sys as sys;
mod capture;
mod xccl;
pub use xccl::NO_ALL_TO_ALL;

use capture::*;
use devstream_core::sync::{lock, wait};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use sys::*;

/// The device type this plug-in registers.
pub const DEVICE_TYPE: &str = "custom_cpu";
const DEVICE_TYPE_C: &CStr = c"custom_cpu";
const SUB_DEVICE_TYPE_C: &CStr = c"v0.1.1-devstream-test";
const DEVICE_COUNT: usize = 2;
const ALIGN: usize = 64;

static LIVE_STREAMS: AtomicUsize = AtomicUsize::new(0);
static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);
static LIVE_ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// Devices made lost by [`devstream_test_plugin_cpu_lose_device`].
static LOST: [AtomicBool; DEVICE_COUNT] = [const { AtomicBool::new(false) }; DEVICE_COUNT];

/// Work of a lost device's streams, never run: kept reachable (as a lost device keeps what it
/// was handed), so that leak checkers do not report the host's callback data.
static ABANDONED: Mutex<Vec<Task>> = Mutex::new(Vec::new());

fn is_lost(id: c_int) -> bool {
    usize::try_from(id)
        .ok()
        .and_then(|id| LOST.get(id))
        .is_some_and(|lost| lost.load(Ordering::SeqCst))
}

thread_local! {
    static CURRENT_DEVICE: Cell<c_int> = const { Cell::new(0) };
}

/// Runs `body`, turning a panic into `C_INTERNAL_ERROR` (a panic must not unwind into C).
fn guarded(body: impl FnOnce() -> C_Status) -> C_Status {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(C_INTERNAL_ERROR)
}

/// The device id behind a `C_Device`, if it names one of ours.
///
/// # Safety
/// `device` is null or points to a readable `C_Device_st`.
unsafe fn device_id(device: C_Device) -> Option<c_int> {
    if device.is_null() {
        return None;
    }
    // SAFETY: non-null and readable per the caller's contract.
    let id = unsafe { (*device).id };
    (0..DEVICE_COUNT as c_int).contains(&id).then_some(id)
}

/// [`device_id`], but `None` for a lost device too (its calls answer `C_ERROR`).
///
/// # Safety
/// As [`device_id`].
unsafe fn live_device_id(device: C_Device) -> Option<c_int> {
    // SAFETY: forwarded contract.
    unsafe { device_id(device) }.filter(|&id| !is_lost(id))
}

/// Runs `body` under [`guarded`] on the stream `stream` (null: the default stream) of the device
/// that `device_of` finds behind `device`; `C_ERROR` when there is none.
///
/// # Safety
/// `device` and `stream` as `device_of` and [`stream_obj`] require them.
unsafe fn on_stream(
    device_of: unsafe fn(C_Device) -> Option<c_int>,
    device: C_Device,
    stream: C_Stream,
    body: impl FnOnce(&StreamObj) -> C_Status,
) -> C_Status {
    guarded(|| {
        // SAFETY: forwarded contract.
        match unsafe { device_of(device).and_then(|d| stream_obj(d, stream)) } {
            Some(obj) => body(obj),
            None => C_ERROR,
        }
    })
}

/// How far a stream's worker has come.
struct Progress {
    submitted: u64,
    completed: u64,
}

/// The part of a stream that events and waits refer to; outlives the stream handle.
struct StreamState {
    progress: Mutex<Progress>,
    changed: Condvar,
    /// The capture the stream records into, if any.
    capture: Mutex<Option<Arc<Capture>>>,
}

impl StreamState {
    fn is_done(&self, seq: u64) -> bool {
        lock(&self.progress).completed >= seq
    }

    fn wait_for(&self, seq: u64) {
        let mut progress = lock(&self.progress);
        while progress.completed < seq {
            progress = wait(&self.changed, progress);
        }
    }
}

/// Addresses and handles cross into the worker as integers.
enum Task {
    /// A copy, host callback or wait of the host's stream `stream`.
    Node { node: Node, stream: usize },
    /// A collective or point-to-point call (`xccl_*`), or a group of them.
    Xccl(Box<dyn FnOnce() + Send>),
    /// A graph launch: its nodes, in capture order, on the launch stream.
    Graph {
        nodes: Arc<Vec<Node>>,
        stream: usize,
    },
}

fn run(task: Task) {
    match task {
        Task::Graph { nodes, stream } => {
            for node in nodes.iter() {
                node.run(stream);
            }
        }
        Task::Node { node, stream } => node.run(stream),
        Task::Xccl(work) => work(),
    }
}

/// A stream: a FIFO of tasks and the worker thread that runs them.
struct StreamObj {
    device: c_int,
    state: Arc<StreamState>,
    queue: Mutex<Sender<Task>>,
}

impl StreamObj {
    fn new(device: c_int) -> Option<StreamObj> {
        let state = Arc::new(StreamState {
            progress: Mutex::new(Progress {
                submitted: 0,
                completed: 0,
            }),
            changed: Condvar::new(),
            capture: Mutex::new(None),
        });
        let (sender, receiver) = channel::<Task>();
        let worker_state = state.clone();
        std::thread::Builder::new()
            .name(format!("custom_cpu:{device} stream"))
            .spawn(move || {
                for task in receiver {
                    if is_lost(device) {
                        lock(&ABANDONED).push(task);
                    } else {
                        run(task);
                    }
                    let mut progress = lock(&worker_state.progress);
                    progress.completed += 1;
                    worker_state.changed.notify_all();
                }
            })
            .ok()?;
        Some(StreamObj {
            device,
            state,
            queue: Mutex::new(sender),
        })
    }

    /// Adds `node` to the stream's capture where it captures, else submits it (`stream`: the
    /// host's handle of this stream).
    fn submit_or_capture(&self, node: Node, stream: C_Stream) -> C_Status {
        if let Some(capture) = capture_of(&self.state) {
            return capture.add(Arc::as_ptr(&self.state) as usize, node);
        }
        self.submit(Task::Node {
            node,
            stream: stream as usize,
        })
    }

    fn submit(&self, task: Task) -> C_Status {
        let queue = lock(&self.queue);
        let mut progress = lock(&self.state.progress);
        if queue.send(task).is_err() {
            return C_INTERNAL_ERROR;
        }
        progress.submitted += 1;
        C_SUCCESS
    }

    /// The point "all work submitted so far".
    fn mark(&self) -> u64 {
        let _queue = lock(&self.queue);
        lock(&self.state.progress).submitted
    }
}

fn default_streams() -> &'static [Option<StreamObj>] {
    static DEFAULTS: OnceLock<Vec<Option<StreamObj>>> = OnceLock::new();
    DEFAULTS.get_or_init(|| (0..DEVICE_COUNT as c_int).map(StreamObj::new).collect())
}

/// The stream object behind a handle (null: the device's default stream).
///
/// # Safety
/// `stream` is null or a handle this plug-in created and has not destroyed.
unsafe fn stream_obj<'a>(device: c_int, stream: C_Stream) -> Option<&'a StreamObj> {
    if stream.is_null() {
        return default_streams()[device as usize].as_ref();
    }
    // SAFETY: a live handle from `create_stream` points to a boxed `StreamObj`.
    Some(unsafe { &*(stream as *const StreamObj) })
}

/// What an event was recorded at.
#[derive(Clone)]
enum Target {
    /// A point of a stream's work.
    Point(Arc<StreamState>, u64),
    /// A point inside a capture: a member stream after `ops` of its nodes. Stands for no
    /// real work (queries answer complete); waiting on it joins the capture.
    Captured {
        capture: Arc<Capture>,
        stream: usize,
        ops: u64,
    },
}

/// An event: what it was recorded at, if recorded.
struct EventObj {
    target: Mutex<Option<Target>>,
}

/// # Safety
/// `event` is a handle this plug-in created and has not destroyed.
unsafe fn event_obj<'a>(event: C_Event) -> Option<&'a EventObj> {
    // SAFETY: a live, non-null handle from `create_event` points to a boxed `EventObj`.
    (!event.is_null()).then(|| unsafe { &*(event as *const EventObj) })
}

/// Runs `body` under [`guarded`] on the event `event`; `C_ERROR` when `event` is null or
/// `device` is one of ours that was lost.
///
/// # Safety
/// `device` as [`device_id`] requires it; `event` as [`event_obj`] requires it.
unsafe fn on_event(
    device: C_Device,
    event: C_Event,
    body: impl FnOnce(&EventObj) -> C_Status,
) -> C_Status {
    guarded(|| {
        // SAFETY: forwarded contract.
        if unsafe { device_id(device) }.is_some_and(is_lost) {
            return C_ERROR;
        }
        // SAFETY: forwarded contract.
        match unsafe { event_obj(event) } {
            Some(event) => body(event),
            None => C_ERROR,
        }
    })
}

unsafe extern "C" fn initialize() -> C_Status {
    guarded(|| {
        default_streams();
        C_SUCCESS
    })
}

unsafe extern "C" fn finalize() -> C_Status {
    C_SUCCESS
}

unsafe extern "C" fn set_device(device: C_Device) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a valid `C_Device`.
        match unsafe { device_id(device) } {
            Some(id) => {
                CURRENT_DEVICE.with(|current| current.set(id));
                C_SUCCESS
            }
            None => C_ERROR,
        }
    })
}

unsafe extern "C" fn get_device(device: C_Device) -> C_Status {
    guarded(|| {
        if device.is_null() {
            return C_ERROR;
        }
        // SAFETY: non-null, writable `C_Device_st` from the host.
        unsafe { (*device).id = CURRENT_DEVICE.with(Cell::get) };
        C_SUCCESS
    })
}

unsafe extern "C" fn init_device(device: C_Device) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a valid `C_Device`.
        match unsafe { device_id(device) } {
            Some(_) => C_SUCCESS,
            None => C_ERROR,
        }
    })
}

unsafe extern "C" fn deinit_device(_device: C_Device) -> C_Status {
    C_SUCCESS
}

unsafe extern "C" fn create_stream(device: C_Device, stream: *mut C_Stream) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a valid `C_Device`.
        let (Some(id), false) = (unsafe { live_device_id(device) }, stream.is_null()) else {
            return C_ERROR;
        };
        let Some(obj) = StreamObj::new(id) else {
            return C_FAILED;
        };
        LIVE_STREAMS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: `stream` is a non-null out-parameter.
        unsafe { *stream = Box::into_raw(Box::new(obj)) as C_Stream };
        C_SUCCESS
    })
}

unsafe extern "C" fn destroy_stream(_device: C_Device, stream: C_Stream) -> C_Status {
    guarded(|| {
        if stream.is_null() {
            return C_SUCCESS;
        }
        // SAFETY: a handle from `create_stream`, destroyed once. Dropping the sender lets the
        // worker finish the queued tasks and exit; nothing blocks here.
        let obj = unsafe { Box::from_raw(stream as *mut StreamObj) };
        // A stream destroyed while capturing invalidates its capture and leaves it.
        invalidate(&obj.state);
        lock(&obj.state.capture).take();
        drop(obj);
        LIVE_STREAMS.fetch_sub(1, Ordering::SeqCst);
        C_SUCCESS
    })
}

unsafe extern "C" fn query_stream(device: C_Device, stream: C_Stream) -> C_Status {
    let body = |obj: &StreamObj| {
        if invalidate(&obj.state) {
            // Not allowed during a capture (as in CUDA): the capture is invalidated.
            return C_ERROR;
        }
        let progress = lock(&obj.state.progress);
        if progress.completed >= progress.submitted {
            C_SUCCESS
        } else {
            C_FAILED
        }
    };
    // SAFETY: a valid device and a live (or null) stream from the host.
    unsafe { on_stream(live_device_id, device, stream, body) }
}

unsafe extern "C" fn synchronize_stream(device: C_Device, stream: C_Stream) -> C_Status {
    let body = |obj: &StreamObj| {
        if invalidate(&obj.state) {
            return C_ERROR;
        }
        obj.state.wait_for(obj.mark());
        C_SUCCESS
    };
    // SAFETY: a valid device and a live (or null) stream from the host.
    unsafe { on_stream(live_device_id, device, stream, body) }
}

unsafe extern "C" fn stream_add_callback(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    let body = |obj: &StreamObj| {
        let Some(callback) = callback else {
            return C_ERROR;
        };
        hold_if_asked(stream, Held::Callbacks);
        let node = Node::Callback {
            callback,
            device: obj.device,
            user_data: user_data as usize,
        };
        obj.submit_or_capture(node, stream)
    };
    // SAFETY: a valid device and a live (or null) stream from the host. A lost device's
    // stream accepts the callback and never calls it (its worker abandons it).
    unsafe { on_stream(device_id, device, stream, body) }
}

unsafe extern "C" fn create_event(device: C_Device, event: *mut C_Event) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a valid `C_Device`.
        if unsafe { live_device_id(device) }.is_none() || event.is_null() {
            return C_ERROR;
        }
        let obj = Box::new(EventObj {
            target: Mutex::new(None),
        });
        LIVE_EVENTS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: non-null out-parameter.
        unsafe { *event = Box::into_raw(obj) as C_Event };
        C_SUCCESS
    })
}

unsafe extern "C" fn record_event(device: C_Device, stream: C_Stream, event: C_Event) -> C_Status {
    guarded(|| {
        // SAFETY: valid device, live stream and event handles from the host.
        let (Some(stream), Some(event)) = (
            unsafe { live_device_id(device).and_then(|d| stream_obj(d, stream)) },
            unsafe { event_obj(event) },
        ) else {
            return C_ERROR;
        };
        if let Some(capture) = capture_of(&stream.state) {
            let me = Arc::as_ptr(&stream.state) as usize;
            let mut inner = lock(&capture.inner);
            let Some(ops) = Capture::member(&mut inner, me).map(|m| m.ops) else {
                return C_INTERNAL_ERROR;
            };
            drop(inner);
            *lock(&event.target) = Some(Target::Captured {
                capture,
                stream: me,
                ops,
            });
            return C_SUCCESS;
        }
        let seq = stream.mark();
        *lock(&event.target) = Some(Target::Point(stream.state.clone(), seq));
        C_SUCCESS
    })
}

unsafe extern "C" fn destroy_event(_device: C_Device, event: C_Event) -> C_Status {
    guarded(|| {
        if event.is_null() {
            return C_ERROR;
        }
        // SAFETY: a handle from `create_event`, destroyed once. Waits queued on it hold their
        // own copy of the captured point.
        drop(unsafe { Box::from_raw(event as *mut EventObj) });
        LIVE_EVENTS.fetch_sub(1, Ordering::SeqCst);
        C_SUCCESS
    })
}

unsafe extern "C" fn query_event(device: C_Device, event: C_Event) -> C_Status {
    let body = |event: &EventObj| match &*lock(&event.target) {
        Some(Target::Point(state, seq)) if !state.is_done(*seq) => C_FAILED,
        Some(Target::Captured { capture, .. }) if captured_event_refused(capture) => C_ERROR,
        _ => C_SUCCESS,
    };
    // SAFETY: a valid `C_Device` and a live event handle from the host.
    unsafe { on_event(device, event, body) }
}

unsafe extern "C" fn synchronize_event(device: C_Device, event: C_Event) -> C_Status {
    let body = |event: &EventObj| {
        let target = lock(&event.target).clone();
        match target {
            Some(Target::Point(state, seq)) => state.wait_for(seq),
            Some(Target::Captured { capture, .. }) if captured_event_refused(&capture) => {
                return C_ERROR;
            }
            _ => {}
        }
        C_SUCCESS
    };
    // SAFETY: a valid `C_Device` and a live event handle from the host.
    unsafe { on_event(device, event, body) }
}

unsafe extern "C" fn stream_wait_event(
    device: C_Device,
    stream: C_Stream,
    event: C_Event,
) -> C_Status {
    guarded(|| {
        hold_if_asked(stream, Held::Waits);
        let handle = stream as usize;
        // SAFETY: valid device, live stream and event handles from the host.
        let (Some(stream), Some(event)) = (
            unsafe { live_device_id(device).and_then(|d| stream_obj(d, stream)) },
            unsafe { event_obj(event) },
        ) else {
            return C_ERROR;
        };
        let me = Arc::as_ptr(&stream.state) as usize;
        let capturing = capture_of(&stream.state);
        match (lock(&event.target).clone(), capturing) {
            (None, _) => C_SUCCESS,
            (Some(Target::Point(state, seq)), None) => stream.submit(Task::Node {
                node: Node::Wait { state, seq },
                stream: handle,
            }),
            (Some(Target::Point(state, seq)), Some(capture)) => {
                if state.is_done(seq) {
                    return C_SUCCESS;
                }
                capture.add(me, Node::Wait { state, seq })
            }
            (
                Some(Target::Captured {
                    capture,
                    stream: other,
                    ops,
                }),
                current,
            ) => {
                let mut inner = lock(&capture.inner);
                if inner.invalidated {
                    return C_ERROR;
                }
                match current {
                    Some(current) if current.id != capture.id => C_ERROR,
                    Some(_) => match Capture::member(&mut inner, me) {
                        Some(member) => {
                            member.waits.push((member.ops, other, ops));
                            C_SUCCESS
                        }
                        None => C_INTERNAL_ERROR,
                    },
                    None => {
                        // Joins the capture.
                        inner.members.push(Member {
                            stream: Arc::downgrade(&stream.state),
                            ops: 0,
                            waits: vec![(0, other, ops)],
                        });
                        drop(inner);
                        *lock(&stream.state.capture) = Some(capture);
                        C_SUCCESS
                    }
                }
            }
        }
    })
}

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.max(1), ALIGN).ok()
}

unsafe extern "C" fn allocate(device: C_Device, ptr: *mut *mut c_void, size: usize) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a valid `C_Device`.
        if unsafe { live_device_id(device) }.is_none() || ptr.is_null() {
            return C_ERROR;
        }
        let Some(layout) = layout(size) else {
            return C_FAILED;
        };
        // SAFETY: the layout has a non-zero size.
        let memory = unsafe { alloc_zeroed(layout) };
        if memory.is_null() {
            return C_FAILED;
        }
        LIVE_ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: non-null out-parameter.
        unsafe { *ptr = memory.cast() };
        C_SUCCESS
    })
}

unsafe extern "C" fn deallocate(_device: C_Device, ptr: *mut c_void, size: usize) -> C_Status {
    guarded(|| {
        let Some(layout) = layout(size) else {
            return C_ERROR;
        };
        if ptr.is_null() {
            return C_ERROR;
        }
        // SAFETY: `ptr` came from `allocate` with the same size (the ABI passes it back).
        unsafe { dealloc(ptr.cast(), layout) };
        LIVE_ALLOCATIONS.fetch_sub(1, Ordering::SeqCst);
        C_SUCCESS
    })
}

unsafe extern "C" fn memory_set(
    device: C_Device,
    ptr: *mut c_void,
    value: u8,
    size: usize,
) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a valid `C_Device`.
        if unsafe { live_device_id(device) }.is_none() || (ptr.is_null() && size > 0) {
            return C_ERROR;
        }
        // SAFETY: a valid range of our memory.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), value, size) };
        C_SUCCESS
    })
}

unsafe extern "C" fn memory_copy(
    device: C_Device,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
) -> C_Status {
    guarded(|| {
        // SAFETY: the host passes a valid `C_Device`.
        if unsafe { live_device_id(device) }.is_none()
            || ((dst.is_null() || src.is_null()) && size > 0)
        {
            return C_ERROR;
        }
        // SAFETY: valid ranges of `size` bytes.
        unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), size) };
        C_SUCCESS
    })
}

unsafe extern "C" fn async_memory_copy(
    device: C_Device,
    stream: C_Stream,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
) -> C_Status {
    let body = |obj: &StreamObj| {
        if (dst.is_null() || src.is_null()) && size > 0 {
            return C_ERROR;
        }
        let node = Node::Copy {
            dst: dst as usize,
            src: src as usize,
            len: size,
        };
        obj.submit_or_capture(node, stream)
    };
    // SAFETY: a valid device and a live (or null) stream from the host.
    unsafe { on_stream(live_device_id, device, stream, body) }
}

unsafe extern "C" fn get_device_count(count: *mut usize) -> C_Status {
    guarded(|| {
        if count.is_null() {
            return C_ERROR;
        }
        // SAFETY: non-null out-parameter.
        unsafe { *count = DEVICE_COUNT };
        C_SUCCESS
    })
}

unsafe extern "C" fn get_device_list(devices: *mut usize) -> C_Status {
    guarded(|| {
        if devices.is_null() {
            return C_ERROR;
        }
        for id in 0..DEVICE_COUNT {
            // SAFETY: the host passes room for `get_device_count` entries.
            unsafe { *devices.add(id) = id };
        }
        C_SUCCESS
    })
}

unsafe extern "C" fn device_memory_stats(
    _device: C_Device,
    total: *mut usize,
    free: *mut usize,
) -> C_Status {
    guarded(|| {
        if total.is_null() || free.is_null() {
            return C_ERROR;
        }
        // SAFETY: non-null out-parameters.
        unsafe {
            *total = 1 << 32;
            *free = 1 << 31;
        }
        C_SUCCESS
    })
}

/// Fills `table` with this plug-in's functions.
pub fn fill_table(table: &mut C_DeviceInterface) {
    table.initialize = Some(initialize);
    table.finalize = Some(finalize);
    table.init_device = Some(init_device);
    table.set_device = Some(set_device);
    table.get_device = Some(get_device);
    table.deinit_device = Some(deinit_device);
    table.create_stream = Some(create_stream);
    table.destroy_stream = Some(destroy_stream);
    table.query_stream = Some(query_stream);
    table.stream_add_callback = Some(stream_add_callback);
    table.create_event = Some(create_event);
    table.record_event = Some(record_event);
    table.destroy_event = Some(destroy_event);
    table.query_event = Some(query_event);
    table.synchronize_stream = Some(synchronize_stream);
    table.synchronize_event = Some(synchronize_event);
    table.stream_wait_event = Some(stream_wait_event);
    table.device_memory_allocate = Some(allocate);
    table.device_memory_deallocate = Some(deallocate);
    table.device_memory_set = Some(memory_set);
    table.host_memory_allocate = Some(allocate);
    table.host_memory_deallocate = Some(deallocate);
    table.memory_copy_h2d = Some(memory_copy);
    table.memory_copy_d2h = Some(memory_copy);
    table.memory_copy_d2d = Some(memory_copy);
    table.async_memory_copy_h2d = Some(async_memory_copy);
    table.async_memory_copy_d2h = Some(async_memory_copy);
    table.async_memory_copy_d2d = Some(async_memory_copy);
    table.get_device_count = Some(get_device_count);
    table.get_device_list = Some(get_device_list);
    table.device_memory_stats = Some(device_memory_stats);
    table.cuda_stream_begin_capture = Some(begin_capture);
    table.cuda_stream_end_captrue = Some(end_capture);
    table.cuda_graph_instantiate = Some(graph_instantiate);
    table.cuda_graph_launch = Some(graph_launch);
    table.cuda_graph_destroy = Some(graph_destroy);
    table.cuda_graph_exec_destroy = Some(graph_exec_destroy);
    table.cuda_stream_capture_info = Some(stream_capture_info);
    xccl::fill(table);
}

/// The plug-in's entry point.
///
/// # Safety
/// `params` is null or points to writable `CustomRuntimeParams` whose `interface` is null or
/// points to a writable table of at least `size_of::<C_DeviceInterface>()` bytes whenever one
/// of the two `size` fields matches this plug-in's layout.
#[no_mangle]
pub unsafe extern "C" fn InitPlugin(params: *mut CustomRuntimeParams) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if params.is_null() {
            return;
        }
        // SAFETY: non-null, writable params from the host.
        let params = unsafe { &mut *params };
        if params.interface.is_null() {
            return;
        }
        // SAFETY: the host's table; its `size` field is readable in every layout.
        let interface_size = unsafe { (*params.interface).size };
        // PADDLE_CUSTOM_RUNTIME_CHECK_VERSION: accept when either size matches.
        if params.size != std::mem::size_of::<CustomRuntimeParams>()
            && interface_size != std::mem::size_of::<C_DeviceInterface>()
        {
            return;
        }
        params.version = CustomRuntimeVersion {
            major: RUNTIME_MAJOR_VERSION,
            minor: RUNTIME_MINOR_VERSION,
            patch: RUNTIME_PATCH_VERSION,
        };
        params.device_type = DEVICE_TYPE_C.as_ptr().cast_mut();
        params.sub_device_type = SUB_DEVICE_TYPE_C.as_ptr().cast_mut();
        // SAFETY: a table of our size, per the check above and the caller's contract.
        let table = unsafe { &mut *params.interface };
        *table = C_DeviceInterface::zeroed();
        fill_table(table);
    }));
}

/// Writes the numbers of live streams, events and allocations to `out[0..3]` (for leak tests).
///
/// # Safety
/// `out` is null or points to three writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn devstream_test_plugin_cpu_live(out: *mut usize) {
    if out.is_null() {
        return;
    }
    let counts = [
        LIVE_STREAMS.load(Ordering::SeqCst),
        LIVE_EVENTS.load(Ordering::SeqCst),
        LIVE_ALLOCATIONS.load(Ordering::SeqCst),
    ];
    for (i, count) in counts.into_iter().enumerate() {
        // SAFETY: room for three entries per the contract.
        unsafe { *out.add(i) = count };
    }
}

/// Which calls a test hook holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    Waits,
    Callbacks,
}

/// Test hook: the stream handle whose `stream_wait_event` (or `stream_add_callback`) calls are
/// held, and how many calls are held now.
struct WaitHold {
    stream: Option<(usize, Held)>,
    held: usize,
}

static WAIT_HOLD: Mutex<WaitHold> = Mutex::new(WaitHold {
    stream: None,
    held: 0,
});
static WAIT_HOLD_CHANGED: Condvar = Condvar::new();

/// Inside `stream_wait_event` / `stream_add_callback`: blocks while such calls on `stream` are
/// held.
fn hold_if_asked(stream: C_Stream, what: Held) {
    let mut hold = lock(&WAIT_HOLD);
    let key = Some((stream as usize, what));
    if hold.stream != key {
        return;
    }
    hold.held += 1;
    WAIT_HOLD_CHANGED.notify_all();
    while hold.stream == key {
        hold = wait(&WAIT_HOLD_CHANGED, hold);
    }
    hold.held -= 1;
    WAIT_HOLD_CHANGED.notify_all();
}

/// Test hook: from now on, `stream_wait_event` on `stream` blocks (inside the call, before it
/// queues anything) until [`devstream_test_plugin_cpu_release_waits`]. One stream at a time.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_cpu_hold_waits(stream: C_Stream) {
    lock(&WAIT_HOLD).stream = Some((stream as usize, Held::Waits));
    WAIT_HOLD_CHANGED.notify_all();
}

/// Test hook: from now on, `stream_add_callback` on `stream` blocks (inside the call, before it
/// queues anything) until [`devstream_test_plugin_cpu_release_waits`]. One stream at a time,
/// and instead of [`devstream_test_plugin_cpu_hold_waits`]; await it with
/// [`devstream_test_plugin_cpu_await_held_wait`].
#[no_mangle]
pub extern "C" fn devstream_test_plugin_cpu_hold_callbacks(stream: C_Stream) {
    lock(&WAIT_HOLD).stream = Some((stream as usize, Held::Callbacks));
    WAIT_HOLD_CHANGED.notify_all();
}

/// Test hook: waits until a `stream_wait_event` call is held by
/// [`devstream_test_plugin_cpu_hold_waits`], or `timeout_ms` passed; answers whether one is.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_cpu_await_held_wait(timeout_ms: u64) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms);
    let mut hold = lock(&WAIT_HOLD);
    while hold.held == 0 {
        let now = std::time::Instant::now();
        if now >= deadline {
            return false;
        }
        hold = WAIT_HOLD_CHANGED
            .wait_timeout(hold, deadline - now)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .0;
    }
    true
}

/// Test hook: makes device `device` lost for good, as a device that fails: from now on every
/// call on it answers `C_ERROR` except the releases (`destroy_*`, deallocations), device
/// selection and `stream_add_callback`, and the work its streams had queued and not run yet
/// never runs. `stream_add_callback` accepts the callback and never calls it, like the queued
/// work: a refused callback would leave the host's callback data allocated for good (the host
/// cannot know whether a plug-in that refused will still call it), which leak checkers report.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_cpu_lose_device(device: c_int) {
    if let Some(lost) = usize::try_from(device).ok().and_then(|id| LOST.get(id)) {
        lost.store(true, Ordering::SeqCst);
    }
}

/// Test hook: lets the held `stream_wait_event` (or `stream_add_callback`) calls go on, and
/// holds no more.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_cpu_release_waits() {
    lock(&WAIT_HOLD).stream = None;
    WAIT_HOLD_CHANGED.notify_all();
}
