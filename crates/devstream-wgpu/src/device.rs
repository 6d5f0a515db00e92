//! The backend entry: adapter enumeration, places, capabilities, one shared device per place,
//! submission tickets and the background poller.

use crate::event::{EventInner, WgpuEvent};
use crate::flag::WgpuFlag;
use crate::hostfn::Runners;
use crate::kernel::InternalKernels;
use crate::sched::{Sched, Step};
use crate::stream::WgpuStream;
use crate::util::{block_on, lock, Signal};
use devstream_core::panic::{drop_contained, drop_payload};
use devstream_core::{
    BackendKind, Capabilities, CaptureSupport, DeviceBackend, DevicePool, Error, EventFlags,
    LiveCounts, Place, PoolOptions, PriorityRange, Result, StreamOptions,
};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

mod enumeration;
mod poller;

use enumeration::enumeration;
pub use enumeration::{adapters, AdapterEntry};
use poller::{completer, poller, Completer};

/// The environment variable that restricts which wgpu backends are enumerated: a comma list of
/// `vulkan` (`vk`), `metal` (`mtl`), `dx12` (`d3d12`), `gl` (`gles`, `opengl`). When it is unset,
/// wgpu's own `WGPU_BACKEND` is honoured; when both are unset, every compiled-in backend is used.
pub const BACKENDS_ENV: &str = "DEVSTREAM_WGPU_BACKENDS";

/// How long the poller blocks in one wait while it also watches flags or other devices.
pub(crate) const POLL_SLICE: Duration = Duration::from_millis(1);

pub(crate) static LIVE_STREAMS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);

/// A submission of a device's queue: a per-device sequence number (1, 2, ...) and wgpu's index.
#[derive(Clone, Debug)]
pub(crate) struct Ticket {
    pub(crate) seq: u64,
    pub(crate) index: wgpu::SubmissionIndex,
}

/// State shared by every object of one wgpu device.
pub(crate) struct DeviceShared {
    pub(crate) place: Place,
    pub(crate) id: u64,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) caps: Capabilities,
    pub(crate) limits: wgpu::Limits,
    /// Nanoseconds per timestamp tick.
    pub(crate) timestamp_period: f64,
    /// `write_timestamp` on encoders is available (else an empty compute pass carries it).
    pub(crate) timestamps_in_encoders: bool,
    pub(crate) sched: Mutex<Sched>,
    /// The highest completed ticket sequence number.
    pub(crate) completed: Arc<AtomicU64>,
    /// Bumped on every completion, release and flag change this device's waiters care about.
    pub(crate) signal: Arc<Signal>,
    /// Wakes the poller: new held work, a flag change, a dropped stream. Kept apart from
    /// `signal` so that completions (which nobody may be waiting for) never wake the poller.
    pub(crate) work: Arc<Signal>,
    /// A device-level fault (device lost, an error outside any scope), reported by every
    /// stream and event of the device from then on.
    pub(crate) fault: Arc<Fault>,
    pub(crate) internal: OnceLock<std::result::Result<InternalKernels, Error>>,
    /// The threads that run host functions (the poller hands them over).
    pub(crate) runners: Arc<Runners>,
    /// What the poller waits for, and the thread that waits for it.
    completer: Arc<Completer>,
    /// Pending completion futures, fired by the submitted-work-done callbacks.
    pub(crate) completions: Arc<crate::completion::Completions>,
    /// What every submission's completion note updates, behind one reference (one count
    /// taken per submission rather than one per target).
    pub(crate) note: Arc<NoteTargets>,
    shutdown: Arc<AtomicBool>,
    /// The pool `alloc` takes from, made on first use.
    default_pool: OnceLock<Arc<crate::mempool::WgpuMemoryPool>>,
    /// Every pool of the device, released to its threshold at synchronisation points.
    pub(crate) pools: crate::mempool::DevicePools,
    /// Readbacks a host function waits for, whose mappings the poller drives.
    pub(crate) landings: crate::landing::Landings,
}

/// A device-level fault: the device was lost, a wgpu error escaped every scope, a poll or a
/// submission panicked. The first one is kept; from then on every stream and event of the
/// device reports it and nothing more of its work is reported complete or run on the host
/// (CUDA's rule for a sticky context error). [`Fault::get`] is one atomic load while there is
/// none, for the paths that ask on every call.
#[derive(Default)]
pub(crate) struct Fault {
    first: Mutex<Option<Error>>,
    set: AtomicBool,
}

impl Fault {
    /// The fault, if any.
    pub(crate) fn get(&self) -> Option<Error> {
        if !self.set.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.first).clone()
    }

    /// Whether there is a fault.
    pub(crate) fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Records `error` unless a fault is recorded already (the first one wins).
    pub(crate) fn set(&self, error: Error) {
        let mut first = lock(&self.first);
        if first.is_none() {
            *first = Some(error);
            self.set.store(true, Ordering::Release);
        }
    }
}

/// What a submission's `on_submitted_work_done` note updates ([`crate::sched::submit_locked`]),
/// and how the notes become completions.
///
/// A note says that wgpu considers the submission done, which is not proof that it ran: a
/// submission made after the device was destroyed or lost is refused by wgpu without an error
/// anyone can see (wgpu drops device-lost errors), and its note still fires, in the same wgpu
/// call that then runs the device-lost callback (wgpu runs submitted-work-done callbacks first,
/// the device-lost callback last). So a note only raises `noted`, and the completed number is
/// raised from it by [`NoteTargets::publish`] once the wgpu call devstream made (a poll, a
/// submit) has returned, and only while the device has no fault: by then every callback that
/// call fired has run, the device-lost one included. A note fired by a wgpu call of another
/// thread (the application's own poll) is published by devstream's next poll or submit. What
/// this cannot close: a poll of another thread that took the device-lost callback and has not
/// run it yet when this one publishes (wgpu offers no way to ask whether a device is lost).
pub(crate) struct NoteTargets {
    /// The highest ticket number whose note has run.
    noted: AtomicU64,
    pub(crate) completed: Arc<AtomicU64>,
    pub(crate) signal: Arc<Signal>,
    pub(crate) completions: Arc<crate::completion::Completions>,
    fault: Arc<Fault>,
}

impl NoteTargets {
    /// Notes that wgpu reports the submission numbered `seq` (and every earlier one) done.
    pub(crate) fn noted(&self, seq: u64) {
        self.noted.fetch_max(seq, Ordering::SeqCst);
    }

    /// Publishes the noted submissions as completed (see the type's documentation): called
    /// after each wgpu poll and submit devstream makes, once it has returned.
    pub(crate) fn publish(&self) {
        let noted = self.noted.load(Ordering::SeqCst);
        if self.completed.load(Ordering::SeqCst) >= noted || self.fault.is_set() {
            return;
        }
        if self.completed.fetch_max(noted, Ordering::SeqCst) < noted {
            self.signal.notify();
            // Completion futures whose ticket this was (one atomic load when none wait).
            self.completions.fire();
        }
    }
}

impl std::fmt::Debug for DeviceShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuDevice")
            .field("place", &self.place)
            .field("id", &self.id)
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish_non_exhaustive()
    }
}

impl Drop for DeviceShared {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.work.notify();
        self.completer.wake();
        self.runners.shutdown();
        // Host functions still held are user closures whose `Drop` may panic.
        let streams = std::mem::take(&mut lock(&self.sched).streams);
        for state in streams.into_values() {
            for item in state.held {
                if let crate::sched::Held::HostFunc(f) = item {
                    drop_contained(f);
                }
            }
        }
    }
}

fn capabilities_for(features: wgpu::Features) -> Capabilities {
    let mut caps = Capabilities::none();
    caps.priorities = false;
    caps.concurrent_streams = false;
    caps.capture = CaptureSupport::Emulated;
    caps.timing = features.contains(wgpu::Features::TIMESTAMP_QUERY);
    caps.host_funcs = true;
    caps.capture_host_funcs = true;
    caps.flags = true;
    caps.buffers = true;
    caps.capture_alloc = true;
    caps.cross_device_wait = true;
    caps.foreign_waits = true;
    caps.capture_foreign_waits = true;
    caps.host_func_buffers = true;
    caps.external_handles = false;
    caps.stream_ordered_alloc = false;
    caps.memory_pools = true;
    caps.nonblocking_query = true;
    caps.legacy_default_stream = false;
    caps.per_thread_stream = false;
    caps
}

impl DeviceShared {
    fn new(
        place: Place,
        info: wgpu::AdapterInfo,
        device: wgpu::Device,
        queue: wgpu::Queue,
    ) -> Arc<DeviceShared> {
        let features = device.features();
        let completed = Arc::new(AtomicU64::new(0));
        let fault = Arc::new(Fault::default());
        let completions = Arc::new(crate::completion::Completions::new(
            Arc::clone(&completed),
            Arc::clone(&fault),
        ));
        let signal = Arc::new(Signal::default());
        let note = Arc::new(NoteTargets {
            noted: AtomicU64::new(0),
            completed: Arc::clone(&completed),
            signal: Arc::clone(&signal),
            completions: Arc::clone(&completions),
            fault: Arc::clone(&fault),
        });
        let shared = Arc::new(DeviceShared {
            place,
            id: devstream_core::next_id(),
            caps: capabilities_for(features),
            limits: device.limits(),
            timestamp_period: f64::from(queue.get_timestamp_period()),
            timestamps_in_encoders: features
                .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
            device,
            queue,
            info,
            sched: Mutex::new(Sched::default()),
            completed,
            signal,
            work: Arc::new(Signal::default()),
            fault,
            internal: OnceLock::new(),
            runners: Arc::new(Runners::default()),
            completer: Arc::new(Completer::default()),
            completions,
            note,
            shutdown: Arc::new(AtomicBool::new(false)),
            default_pool: OnceLock::new(),
            pools: Default::default(),
            landings: Default::default(),
        });
        let fault = Arc::clone(&shared.fault);
        let signal = Arc::clone(&shared.signal);
        let work = Arc::clone(&shared.work);
        let completions = Arc::clone(&shared.completions);
        // wgpu calls this when the device is lost, and, for `Device::destroy`, from the first
        // poll that finds the queue empty afterwards (after the submitted-work-done callbacks
        // that poll fires: see `NoteTargets`).
        shared
            .device
            .set_device_lost_callback(move |reason, message| {
                fault.set(Error::Driver {
                    backend: "wgpu",
                    call: "device lost",
                    code: reason as i64,
                    message: if message.is_empty() {
                        format!("{reason:?}")
                    } else {
                        message
                    },
                });
                // Waiters report it; the poller drops the work the device will never run.
                signal.notify();
                work.notify();
                if let Some(error) = fault.get() {
                    completions.fail_all(&error);
                }
            });
        shared.start_poller();
        shared
    }

    fn start_poller(self: &Arc<Self>) {
        let spawn = |what: &str, body: Box<dyn FnOnce() + Send>| {
            let spawned = std::thread::Builder::new()
                .name(format!("devstream-wgpu-{what}-{}", self.place))
                .spawn(move || {
                    // Neither thread runs user code; this only keeps a stray panic of
                    // devstream's own from panicking again as the thread's result.
                    if let Err(payload) = catch_unwind(AssertUnwindSafe(body)) {
                        drop_payload(payload);
                    }
                });
            if let Err(e) = spawned {
                self.set_fault(Error::Driver {
                    backend: "wgpu",
                    call: "spawn poller thread",
                    code: 0,
                    message: e.to_string(),
                });
            }
        };
        let (weak, work, shutdown) = (
            Arc::downgrade(self),
            Arc::clone(&self.work),
            Arc::clone(&self.shutdown),
        );
        spawn("poller", Box::new(move || poller(weak, work, shutdown)));
        let (weak, work, shutdown, waiting) = (
            Arc::downgrade(self),
            Arc::clone(&self.work),
            Arc::clone(&self.shutdown),
            Arc::clone(&self.completer),
        );
        spawn(
            "completion",
            Box::new(move || completer(weak, waiting, work, shutdown)),
        );
    }

    /// Whether every submission up to `ticket` has completed (`None`: nothing to wait for).
    pub(crate) fn is_complete(&self, ticket: Option<&Ticket>) -> bool {
        match ticket {
            None => true,
            Some(t) => self.completed.load(Ordering::Acquire) >= t.seq,
        }
    }

    /// Asks the completion thread to wait for `ticket` (for completion futures).
    pub(crate) fn want(&self, ticket: &Ticket) {
        self.completer.want(ticket);
    }

    /// Polls the device once without blocking, so mapping callbacks and completion notes run
    /// (and the notes are published).
    pub(crate) fn poll_nonblocking(&self) -> Result<()> {
        match catch_unwind(AssertUnwindSafe(|| self.device.poll(wgpu::PollType::Poll))) {
            Ok(_) => {
                self.note.publish();
                Ok(())
            }
            Err(payload) => Err(self.poll_panic(payload)),
        }
    }

    /// Whether `ticket` has completed, asking the device without blocking: one `Poll`, which
    /// runs the completion notes registered at submit (`sched::submit_locked`). The device's
    /// fault, once it has one.
    pub(crate) fn query_ticket(&self, ticket: Option<&Ticket>) -> Result<bool> {
        if let Some(fault) = self.fault() {
            return Err(fault);
        }
        if self.is_complete(ticket) {
            return Ok(true);
        }
        self.poll_nonblocking()?;
        match self.fault() {
            Some(fault) => Err(fault),
            None => Ok(self.is_complete(ticket)),
        }
    }

    fn poll_panic(&self, payload: Box<dyn std::any::Any + Send>) -> Error {
        let error = Error::Driver {
            backend: "wgpu",
            call: "Device::poll",
            code: 0,
            message: devstream_core::panic::take_message(payload),
        };
        self.fault.set(error.clone());
        error
    }

    /// Blocks until `ticket` has completed, or `timeout` passes (then `Ok(false)`). The
    /// device's fault, once it has one: the ticket's work may never have run.
    pub(crate) fn wait_ticket(&self, ticket: &Ticket, timeout: Option<Duration>) -> Result<bool> {
        if let Some(fault) = self.fault() {
            return Err(fault);
        }
        if self.is_complete(Some(ticket)) {
            return Ok(true);
        }
        let poll = wgpu::PollType::Wait {
            submission_index: Some(ticket.index.clone()),
            timeout,
        };
        let polled = catch_unwind(AssertUnwindSafe(|| self.device.poll(poll)));
        match polled {
            Ok(Ok(_)) => self.note.noted(ticket.seq),
            Ok(Err(wgpu::PollError::WrongSubmissionIndex(..))) => {
                // An index past the last successful submission: wgpu refused this one (the
                // device was destroyed or lost, or the commands were invalid), so it never ran
                // and never will. A plain poll runs the device-lost callback of a destroyed
                // device (wgpu runs it from the first poll that finds the queue empty); without
                // one, the refusal itself is the device's fault.
                let _ = self.poll_nonblocking();
                if !self.fault.is_set() {
                    self.set_fault(Error::Driver {
                        backend: "wgpu",
                        call: "Queue::submit",
                        code: 0,
                        message: format!(
                            "submission {} was refused by wgpu: its work never ran",
                            ticket.seq
                        ),
                    });
                }
            }
            Ok(Err(wgpu::PollError::Timeout)) => {}
            Err(payload) => return Err(self.poll_panic(payload)),
        }
        self.note.publish();
        match self.fault() {
            Some(fault) => Err(fault),
            None => Ok(self.is_complete(Some(ticket))),
        }
    }

    /// The device-level fault, if any.
    pub(crate) fn fault(&self) -> Option<Error> {
        self.fault.get()
    }

    /// Records a device-level fault (first one wins).
    pub(crate) fn set_fault(&self, error: Error) {
        self.fault.set(error);
    }

    /// A wgpu error caught by a scope, as a typed error.
    pub(crate) fn wgpu_error(call: &'static str, error: wgpu::Error) -> Error {
        match error {
            wgpu::Error::OutOfMemory { .. } => Error::Driver {
                backend: "wgpu",
                call,
                code: 0,
                message: "out of memory".into(),
            },
            wgpu::Error::Validation { description, .. } => Error::Driver {
                backend: "wgpu",
                call,
                code: 1,
                message: description,
            },
            wgpu::Error::Internal { description, .. } => Error::Driver {
                backend: "wgpu",
                call,
                code: 2,
                message: description,
            },
        }
    }

    /// Runs `f` inside an error scope of `filter` and returns its value and the error the
    /// scope caught. Used where the caller's input can fail (shaders, bindings, allocations);
    /// devstream's own encoding and submission is validated up front and not scoped (a wgpu
    /// error there becomes the device's fault through the uncaptured-error handler).
    pub(crate) fn scoped<T>(
        &self,
        filter: wgpu::ErrorFilter,
        f: impl FnOnce() -> T,
    ) -> (T, Option<wgpu::Error>) {
        let scope = self.device.push_error_scope(filter);
        let value = f();
        let error = block_on(scope.pop());
        (value, error)
    }

    /// Like [`DeviceShared::scoped`] with the out-of-memory filter, for internal staging
    /// buffers of `size` bytes: small ones (under 1 MiB, where failing means the device is out
    /// of memory anyway) skip the scope, and a failure becomes the device's fault.
    pub(crate) fn scoped_staging<T>(
        &self,
        size: u64,
        f: impl FnOnce() -> T,
    ) -> (T, Option<wgpu::Error>) {
        const SCOPED_STAGING_BYTES: u64 = 1 << 20;
        if size < SCOPED_STAGING_BYTES {
            (f(), None)
        } else {
            self.scoped(wgpu::ErrorFilter::OutOfMemory, f)
        }
    }

    /// Makes one release pass and tells the poller what to wait for.
    /// The device's default pool (release threshold 0, as CUDA's default pool).
    pub(crate) fn default_pool(&self) -> &Arc<crate::mempool::WgpuMemoryPool> {
        self.default_pool
            .get_or_init(|| crate::mempool::WgpuMemoryPool::create(self, PoolOptions::default()))
    }

    fn step(self: &Arc<Self>) -> Step {
        crate::sched::step(self)
    }
}

/// A wgpu device (with its one queue) as devstream uses it: the device of a place, or an
/// existing `wgpu::Device` + `wgpu::Queue` adopted with [`WgpuDevice::adopt`].
///
/// Cheap to clone. Streams made from it share the device's queue.
#[derive(Clone, Debug)]
pub struct WgpuDevice {
    pub(crate) shared: Arc<DeviceShared>,
}

/// Each place's device and default stream, by adapter index.
type PlaceDevices = Mutex<HashMap<usize, (Arc<DeviceShared>, WgpuStream)>>;

fn devices() -> &'static PlaceDevices {
    static DEVICES: OnceLock<PlaceDevices> = OnceLock::new();
    DEVICES.get_or_init(|| Mutex::new(HashMap::new()))
}

fn unavailable(reason: &str) -> Error {
    Error::BackendUnavailable {
        backend: "wgpu",
        reason: reason.to_owned(),
    }
}

fn place_index(place: &Place) -> Result<usize> {
    match place {
        Place::Wgpu(index) => Ok(*index),
        other => Err(Error::NoDevice {
            place: other.clone(),
            reason: "not a wgpu place (expected \"wgpu:N\")".into(),
        }),
    }
}

/// The device and default stream of a place, created on first use.
fn place_device(place: &Place) -> Result<(Arc<DeviceShared>, WgpuStream)> {
    let index = place_index(place)?;
    let mut map = lock(devices());
    if let Some((device, default)) = map.get(&index) {
        return Ok((Arc::clone(device), default.clone()));
    }
    let enumeration = enumeration();
    let Some(adapter) = enumeration.adapters.get(index) else {
        return Err(match &enumeration.unavailable {
            Some(reason) => unavailable(reason),
            None => Error::NoDevice {
                place: place.clone(),
                reason: format!(
                    "there are {} wgpu adapters (wgpu:0..wgpu:{})",
                    enumeration.adapters.len(),
                    enumeration.adapters.len().saturating_sub(1)
                ),
            },
        });
    };
    let info = adapter.get_info();
    let wanted = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
    let descriptor = wgpu::DeviceDescriptor {
        label: Some("devstream"),
        required_features: adapter.features() & wanted,
        required_limits: adapter.limits(),
        ..Default::default()
    };
    let requested = catch_unwind(AssertUnwindSafe(|| {
        block_on(adapter.request_device(&descriptor))
    }));
    let (device, queue) = match requested {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => {
            return Err(Error::NoDevice {
                place: place.clone(),
                reason: format!("request_device on {:?} failed: {e}", info.name),
            })
        }
        Err(payload) => {
            return Err(Error::NoDevice {
                place: place.clone(),
                reason: format!(
                    "request_device on {:?} panicked: {}",
                    info.name,
                    devstream_core::panic::take_message(payload)
                ),
            })
        }
    };
    let shared = DeviceShared::new(place.clone(), info, device, queue);
    install_error_handler(&shared);
    let default = WgpuStream::create(&shared, StreamOptions::default(), true)?;
    map.insert(index, (Arc::clone(&shared), default.clone()));
    Ok((shared, default))
}

/// Errors outside any devstream error scope become the device's fault instead of wgpu's default
/// panic.
fn install_error_handler(shared: &Arc<DeviceShared>) {
    let fault = Arc::clone(&shared.fault);
    let signal = Arc::clone(&shared.signal);
    let work = Arc::clone(&shared.work);
    shared
        .device
        .on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            tracing::warn!(target: "devstream_wgpu", "uncaptured wgpu error: {error}");
            fault.set(DeviceShared::wgpu_error("uncaptured wgpu error", error));
            signal.notify();
            work.notify();
        }));
}

impl WgpuDevice {
    /// The device of `Place::Wgpu(n)` (created on first use and shared by every stream of the
    /// place).
    pub fn for_place(place: &Place) -> Result<WgpuDevice> {
        place_device(place).map(|(shared, _)| WgpuDevice { shared })
    }

    /// Adopts an existing device and its queue: streams made with [`WgpuDevice::new_stream`]
    /// submit to this queue, and the caller can keep using both.
    ///
    /// The place is the enumerated adapter whose info matches the device's (backend, name,
    /// vendor and device id), else `Place::Wgpu(n)` with `n` past the enumerated adapters.
    /// Objects of an adopted device are distinct from those of the place's own device: mixing
    /// them in one operation is refused. devstream wraps its own wgpu calls in error scopes and
    /// leaves the device's uncaptured-error handler as the caller set it.
    pub fn adopt(device: wgpu::Device, queue: wgpu::Queue) -> WgpuDevice {
        static ADOPTED: AtomicUsize = AtomicUsize::new(0);
        let info = device.adapter_info();
        let entries = &enumeration().entries;
        let index = entries
            .iter()
            .find(|e| {
                e.info.backend == info.backend
                    && e.info.name == info.name
                    && e.info.vendor == info.vendor
                    && e.info.device == info.device
            })
            .map(|e| e.index)
            .unwrap_or_else(|| entries.len() + ADOPTED.fetch_add(1, Ordering::Relaxed));
        let shared = DeviceShared::new(Place::Wgpu(index), info, device, queue);
        WgpuDevice { shared }
    }

    /// A new stream on this device.
    pub fn new_stream(&self, options: StreamOptions) -> Result<WgpuStream> {
        WgpuStream::create(&self.shared, options, false)
    }

    /// The device's place.
    pub fn place(&self) -> &Place {
        &self.shared.place
    }

    /// The wgpu device.
    pub fn wgpu_device(&self) -> &wgpu::Device {
        &self.shared.device
    }

    /// The device's one queue.
    pub fn wgpu_queue(&self) -> &wgpu::Queue {
        &self.shared.queue
    }

    /// What wgpu reports about the adapter.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.shared.info
    }

    /// The device's capabilities.
    pub fn capabilities(&self) -> Capabilities {
        self.shared.caps
    }

    /// Nanoseconds per timestamp tick (0 without timestamp queries).
    pub fn timestamp_period(&self) -> f64 {
        self.shared.timestamp_period
    }

    /// A device-level fault seen so far (device lost, or a wgpu error outside any scope).
    pub fn fault(&self) -> Option<Error> {
        self.shared.fault()
    }
}

/// The wgpu backend: places are the adapters of [`adapters`].
#[derive(Debug)]
pub struct WgpuBackend;

impl DeviceBackend for WgpuBackend {
    type Stream = WgpuStream;

    const KIND: BackendKind = BackendKind::Wgpu;

    fn places() -> Vec<Place> {
        (0..enumeration().entries.len()).map(Place::Wgpu).collect()
    }

    fn probe() -> Result<()> {
        match &enumeration().unavailable {
            Some(reason) => Err(unavailable(reason)),
            None => Ok(()),
        }
    }

    fn capabilities(place: &Place) -> Result<Capabilities> {
        let index = place_index(place)?;
        let enumeration = enumeration();
        match enumeration.entries.get(index) {
            Some(entry) => Ok(capabilities_for(entry.features)),
            None => Err(match &enumeration.unavailable {
                Some(reason) => unavailable(reason),
                None => Error::NoDevice {
                    place: place.clone(),
                    reason: format!("there are {} wgpu adapters", enumeration.entries.len()),
                },
            }),
        }
    }

    fn priority_range(place: &Place) -> Result<PriorityRange> {
        Self::capabilities(place).map(|_| PriorityRange::NONE)
    }

    fn new_stream(place: &Place, options: StreamOptions) -> Result<WgpuStream> {
        let (shared, _) = place_device(place)?;
        WgpuStream::create(&shared, options, false)
    }

    fn default_stream(place: &Place) -> Result<WgpuStream> {
        place_device(place).map(|(_, default)| default)
    }

    fn per_thread_stream(place: &Place) -> Result<WgpuStream> {
        Self::capabilities(place)?;
        Err(Error::unsupported("per_thread_stream", place))
    }

    fn new_event(place: &Place, flags: EventFlags) -> Result<WgpuEvent> {
        let (shared, _) = place_device(place)?;
        EventInner::create(&shared, flags)
    }

    fn new_flag(place: &Place) -> Result<WgpuFlag> {
        Self::capabilities(place)?;
        Ok(WgpuFlag::new(place.clone()))
    }

    fn default_pool(place: &Place) -> Result<Arc<dyn DevicePool>> {
        let (shared, _) = place_device(place)?;
        Ok(shared.default_pool().clone())
    }

    fn new_pool(place: &Place, options: PoolOptions) -> Result<Arc<dyn DevicePool>> {
        let (shared, _) = place_device(place)?;
        Ok(crate::mempool::WgpuMemoryPool::create(&shared, options))
    }

    fn live_counts() -> LiveCounts {
        LiveCounts {
            streams: LIVE_STREAMS.load(Ordering::SeqCst),
            events: LIVE_EVENTS.load(Ordering::SeqCst),
        }
    }
}

/// A device of its own on adapter `index`, adopted (tests that destroy a device use one, so
/// that the place's shared device stays usable for the other tests).
#[cfg(test)]
pub(crate) fn fresh_device(index: usize) -> Option<WgpuDevice> {
    let adapter = enumeration().adapters.get(index)?;
    let descriptor = wgpu::DeviceDescriptor {
        label: Some("devstream test"),
        required_features: adapter.features()
            & (wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
        required_limits: adapter.limits(),
        ..Default::default()
    };
    let (device, queue) = block_on(adapter.request_device(&descriptor)).ok()?;
    Some(WgpuDevice::adopt(device, queue))
}

#[cfg(test)]
mod tests {
    use super::enumeration::{backend_rank, device_type_rank};
    use super::*;

    #[test]
    fn ranks_are_ordered() {
        assert!(backend_rank(wgpu::Backend::Vulkan) < backend_rank(wgpu::Backend::Gl));
        assert!(
            device_type_rank(wgpu::DeviceType::DiscreteGpu)
                < device_type_rank(wgpu::DeviceType::Cpu)
        );
    }

    #[test]
    fn non_wgpu_place_is_refused() {
        assert!(matches!(
            WgpuBackend::new_stream(&Place::Cpu, StreamOptions::default()),
            Err(Error::NoDevice { .. })
        ));
    }

    #[test]
    fn capabilities_say_the_truth() {
        let caps = capabilities_for(wgpu::Features::empty());
        assert!(!caps.concurrent_streams && !caps.priorities && !caps.timing);
        assert_eq!(caps.capture, CaptureSupport::Emulated);
        assert!(caps.host_funcs && caps.flags && caps.nonblocking_query);
        assert!(capabilities_for(wgpu::Features::TIMESTAMP_QUERY).timing);
    }
}
