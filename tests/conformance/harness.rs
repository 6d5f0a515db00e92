//! What every conformance test shares: the places under test, running a check on each place,
//! gates that hold a stream deterministically, a log that host functions append to, bounded
//! waits and error assertions.

use devstream::{BackendKind, Capabilities, Flag, Place, Result, Stream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// How long something that must happen may take before the test calls it a hang.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How long a negative check ("this has not run yet") watches before it concludes. Correctness
/// never depends on it: a correct backend passes whatever the timing; a broken one is caught
/// with high probability.
pub const GLANCE: Duration = Duration::from_millis(30);

/// Asserts that an expression is `Err` matching a pattern (and optional guard), printing what it
/// was otherwise.
macro_rules! assert_err {
    ($expr:expr, $pat:pat $(if $guard:expr)? $(,)?) => {
        match $expr {
            Err($pat) $(if $guard)? => {}
            other => panic!(
                "{}:{}: `{}` should be Err({}{}), got {:?}",
                file!(),
                line!(),
                stringify!($expr),
                stringify!($pat),
                concat!($(" if ", stringify!($guard))?),
                other
            ),
        }
    };
}

/// The places under test: `devstream::places()`, narrowed by `DEVSTREAM_PLACES` when set.
///
/// Panics (failing the test) when `DEVSTREAM_PLACES` names a place that cannot be parsed or is
/// not available, so a narrowed run cannot pass by testing nothing.
pub fn places_under_test() -> Vec<Place> {
    static PLACES: OnceLock<Vec<Place>> = OnceLock::new();
    PLACES
        .get_or_init(|| {
            let places = chosen_places();
            // Every place's device is opened here, before any test can hold a gate: opening a
            // CUDA or HIP device creates its notifier streams, and stream creation stalls in
            // the driver while other streams of the same GPU are held at flag waits (see
            // [`gates_stall_the_driver`]). `hip:0` through the HIP-on-CUDA shim shares
            // `cuda:0`'s GPU and context, so opened by its first test, it could wait for
            // gates a `cuda:0` test holds, while that test waits for the driver.
            for place in &places {
                let _ = devstream::capabilities(place);
            }
            places
        })
        .clone()
}

/// The places `DEVSTREAM_PLACES` names (every one must be available), or all available ones.
fn chosen_places() -> Vec<Place> {
    let available = devstream::places();
    let Ok(wanted) = std::env::var("DEVSTREAM_PLACES") else {
        return available;
    };
    let mut out = Vec::new();
    for text in wanted.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let place: Place = text
            .parse()
            .unwrap_or_else(|e| panic!("DEVSTREAM_PLACES: {text:?}: {e}"));
        assert!(
            available.contains(&place),
            "DEVSTREAM_PLACES names {place}, which is not available (places(): {available:?}; \
             probe: {:?})",
            devstream::probe(place.backend())
        );
        if !out.contains(&place) {
            out.push(place);
        }
    }
    out
}

/// Tests share the process: one test's global-mode capture forbids other threads' synchronize,
/// and leak counts are process wide. Ordinary tests hold this lock shared; tests that need the
/// process to themselves hold it exclusively.
static SUITE: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    crate::stacks::arm();
    SUITE.read().unwrap_or_else(|e| e.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    crate::stacks::arm();
    SUITE.write().unwrap_or_else(|e| e.into_inner())
}

fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("conformance test")
        .to_string()
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".to_string()
    }
}

/// Places whose flag waits and blocking host functions stall the device where the driver cannot
/// see it (CUDA, and HIP, which may be the HIP-on-CUDA shim on the same contexts).
///
/// CUDA documents for `cuStreamWaitValue32` that "improper use of this API may deadlock the
/// application": a wait that only a host write ends is invisible to the driver, and driver
/// calls of *other* threads on that device may then block until it ends: one thread, inside
/// `cuStreamCreateWithPriority`, can hold the context's lock while waiting on the device; the
/// threads that would open the gates queued on that lock. Stream creation waits on the device
/// by itself, too: raw `cuStreamCreateWithPriority` can stall while many other streams are held
/// at flag waits, so a test holding gates creates its streams first. A test holding a gate and
/// calling the driver is fine on its own (the suite passes one test at a time), so each test
/// runs its driver-GPU places with no other test on a driver-GPU place at the same time. CPU,
/// wgpu and plug-in places still run alongside, except plug-in places whose work goes to the
/// CUDA or HIP driver ([`plugin_uses_a_gpu_driver`]): they stall it alike, and a Global-mode
/// capture on a CUDA place forbids their driver calls too (CUDA's rule holds process-wide).
pub fn gates_stall_the_driver(place: &Place) -> bool {
    match place {
        Place::Custom { device_type, .. } => plugin_uses_a_gpu_driver(device_type),
        _ => matches!(place.backend(), BackendKind::Cuda | BackendKind::Hip),
    }
}

/// Whether the plug-in device type `device_type` runs its work through the CUDA or HIP driver.
/// The plug-in ABI reports no backend, so this is a name match, documented here: the GPU types
/// of devstream's own Paddle plug-in (`crates/devstream-paddle`: `devstream_cuda` over
/// devstream's CUDA places, `devstream_hip` over its HIP places), recognised as that plug-in
/// by the sub-device type it reports (`devstream`).
#[cfg(feature = "plugin")]
fn plugin_uses_a_gpu_driver(device_type: &str) -> bool {
    const DEVSTREAM_PADDLE_GPU_TYPES: [&str; 2] = ["devstream_cuda", "devstream_hip"];
    DEVSTREAM_PADDLE_GPU_TYPES.contains(&device_type)
        && devstream::plugin::loaded_plugins().iter().any(|plugin| {
            plugin.device_type == device_type
                && plugin.sub_device_type.as_deref() == Some("devstream")
        })
}

/// Without the `plugin` feature there are no plug-in places.
#[cfg(not(feature = "plugin"))]
fn plugin_uses_a_gpu_driver(_device_type: &str) -> bool {
    false
}

/// Held while a test runs on a place where [`gates_stall_the_driver`].
static DRIVER_GPU: Mutex<()> = Mutex::new(());

/// The driver-GPU turn for a check that also holds work on `place` while running on a place
/// that does not stall the driver itself (a wait across backends whose consumer is a CUDA or
/// HIP place): `Some` guard where [`gates_stall_the_driver`] for `place`. Never take it while
/// running on such a place (the turn is held already, and the lock is not reentrant).
pub fn driver_gpu_turn(place: &Place) -> Option<std::sync::MutexGuard<'static, ()>> {
    gates_stall_the_driver(place).then(|| DRIVER_GPU.lock().unwrap_or_else(|e| e.into_inner()))
}

fn run_on_places(check: &dyn Fn(&Place) -> Result<()>) {
    run_on(&places_under_test(), check);
}

fn run_on(places: &[Place], check: &dyn Fn(&Place) -> Result<()>) {
    let name = test_name();
    assert!(!places.is_empty(), "{name}: no place under test");
    let mut failures = Vec::new();
    for place in places {
        let _driver = gates_stall_the_driver(place)
            .then(|| DRIVER_GPU.lock().unwrap_or_else(|e| e.into_inner()));
        let started = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| check(place))) {
            Ok(Ok(())) => eprintln!(
                "[conformance] {name} on {place}: ok ({:.0?})",
                started.elapsed()
            ),
            // A check that needs an operation the place lacks (its capability off, and the
            // operation answering `Unsupported` as the contract says) does not apply there;
            // `contract.rs` checks that the two agree.
            Ok(Err(e)) => match crate::contract::lacked_capability(place, &e) {
                Some(capability) => not_applicable(place, &format!("{capability} off ({e})")),
                None => failures.push(format!("{name} on {place}: returned Err({e:?}): {e}")),
            },
            Err(payload) => failures.push(format!("{name} on {place}: {}", panic_text(&*payload))),
        }
    }
    assert!(
        failures.is_empty(),
        "failed on {} of {} places:\n{}",
        failures.len(),
        places.len(),
        failures.join("\n")
    );
}

/// Runs `check` on every place under test and fails naming each place where it failed (an
/// `Err` or a panic). Other places still run after one fails.
pub fn for_each_place(check: impl Fn(&Place) -> Result<()>) {
    let _shared = shared();
    run_on_places(&check);
}

/// Like [`for_each_place`], but with no other conformance test running in this process.
pub fn for_each_place_alone(check: impl Fn(&Place) -> Result<()>) {
    let _alone = exclusive();
    run_on_places(&check);
}

/// Prints why a check does not apply to a place (a capability it lacks, asserted elsewhere).
pub fn not_applicable(place: &Place, what: &str) {
    eprintln!("[conformance] {} on {place}: n/a: {what}", test_name());
}

/// The place's capabilities (panics if the place cannot answer).
pub fn caps(place: &Place) -> Capabilities {
    devstream::capabilities(place).unwrap_or_else(|e| panic!("capabilities({place}): {e}"))
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(50);
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// Watches `condition` for [`GLANCE`] and asserts it never held (a negative check).
pub fn assert_stays_false(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + GLANCE;
    while Instant::now() < deadline {
        assert!(!condition(), "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!condition(), "{what}");
}

/// Runs `f` on another thread and returns its value, or panics if it has not returned within
/// `timeout` (a call that should return at once blocked, or a wait hung). `rescue` runs first
/// on timeout (e.g. opens a gate) so the stuck thread can finish.
pub fn within<T: Send + 'static>(
    timeout: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
    rescue: impl FnOnce(),
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(timeout) {
        Ok(value) => {
            let _ = handle.join();
            value
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            rescue();
            panic!("{what}: did not return within {timeout:?}");
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(payload) => panic!("{what}: panicked: {}", panic_text(&*payload)),
            Ok(()) => unreachable!("the thread sends before it ends"),
        },
    }
}

/// `stream.synchronize()` with a watchdog: a hang fails the test instead of stalling it.
pub fn sync(stream: &Stream) -> Result<()> {
    let s = stream.clone();
    within(
        PATIENCE,
        &format!("synchronize of {stream}"),
        move || s.synchronize(),
        || {},
    )
}

/// Holds a stream at a point of its work until released: later work on the stream cannot run
/// while the gate is closed. Uses a [`Flag`] wait where the place has flags, else a host
/// function that blocks. Dropping the gate releases it, so a failing test never leaves work
/// stuck.
pub struct Gate {
    flag: Option<Flag>,
    host: Option<Arc<(Mutex<bool>, Condvar)>>,
}

impl Gate {
    /// Closes `stream` at its current end of work. `None` when the place has neither flags nor
    /// host functions (then no deterministic gate exists).
    pub fn close(stream: &Stream) -> Result<Option<Gate>> {
        let caps = stream.capabilities();
        let gate = if caps.flags {
            Gate {
                flag: Some(Flag::new(stream.place())?),
                host: None,
            }
        } else if caps.host_funcs {
            Gate {
                flag: None,
                host: Some(Arc::new((Mutex::new(false), Condvar::new()))),
            }
        } else {
            return Ok(None);
        };
        gate.hold(stream)?;
        Ok(Some(gate))
    }

    /// Also holds `stream` (at its current end of work) until this gate is released.
    pub fn hold(&self, stream: &Stream) -> Result<()> {
        if let Some(flag) = &self.flag {
            return stream.wait_flag(flag, 1);
        }
        let host = self.host.clone().expect("a gate has a flag or a host wait");
        stream.launch_host_func(move || {
            let (open, cv) = &*host;
            let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
            while !*open {
                open = cv.wait(open).unwrap_or_else(|e| e.into_inner());
            }
        })
    }

    /// Opens the gate: held work may run.
    pub fn release(&self) {
        if let Some(flag) = &self.flag {
            flag.set(1);
        }
        if let Some(host) = &self.host {
            let (open, cv) = &**host;
            *open.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
    }

    /// A closure that opens the gate (for [`within`]'s rescue or another thread).
    pub fn opener(&self) -> impl FnOnce() + Send + 'static {
        let flag = self.flag.clone();
        let host = self.host.clone();
        move || Gate { flag, host }.release()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.release();
    }
}

/// An append-only log shared with host functions.
#[derive(Clone, Default)]
pub struct Log<T = u32>(Arc<Mutex<Vec<T>>>);

impl<T: Clone + Send + 'static> Log<T> {
    /// An empty log.
    pub fn new() -> Self {
        Log(Arc::new(Mutex::new(Vec::new())))
    }

    /// Appends `item`.
    pub fn push(&self, item: T) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(item);
    }

    /// A host function that appends `item` each time it runs.
    pub fn task(&self, item: T) -> impl FnMut() + Send + 'static {
        let log = self.clone();
        move || log.push(item.clone())
    }

    /// The entries so far.
    pub fn entries(&self) -> Vec<T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Number of entries so far.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl<T: Clone + Send + PartialEq + 'static> Log<T> {
    /// Whether `item` has been logged.
    pub fn contains(&self, item: &T) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(item)
    }

    /// Position of `item` in the log.
    pub fn position(&self, item: &T) -> Option<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .position(|x| x == item)
    }
}

/// A kernel that executes `trap` (PTX: CUDA, and HIP on NVIDIA, whose code objects are PTX).
#[cfg(any(feature = "cuda", feature = "hip"))]
const TRAP_PTX: &str = "
.version 6.0
.target sm_50
.address_size 64
.visible .entry devstream_conformance_trap()
{
    trap;
}
";

/// [`device_loser`] for a CUDA or HIP place, given the backend's module, stream and launch
/// configuration types. The module and the stream are made at once, not when the device is
/// lost: the test may hold streams at flag waits by then, and driver calls such as module loads
/// and stream creation may wait for the device (see [`gates_stall_the_driver`]).
#[cfg(any(feature = "cuda", feature = "hip"))]
macro_rules! trap_kernel_loser {
    ($place:expr, $module:ty, $stream:ty, $config:ident) => {{
        let place: Place = $place.clone();
        let module = <$module>::load(&place, TRAP_PTX.as_bytes())
            .unwrap_or_else(|e| panic!("loading the trap kernel on {place}: {e}"));
        let kernel = module
            .function("devstream_conformance_trap")
            .unwrap_or_else(|e| panic!("the trap kernel on {place}: {e}"));
        let stream = Stream::new(&place)
            .unwrap_or_else(|e| panic!("a stream for the trap kernel on {place}: {e}"));
        Box::new(move || {
            let native = stream
                .backend::<$stream>()
                .expect("a stream of the place's backend");
            let one = $config {
                grid: (1, 1, 1),
                block: (1, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the kernel takes no parameters and touches no memory.
            unsafe { native.launch_kernel(&kernel, one, &[]) }
                .unwrap_or_else(|e| panic!("launching the trap kernel on {place}: {e}"));
            // The trap is the context's error from now on: this is the first call to see it.
            assert!(
                stream.synchronize().is_err(),
                "a kernel that traps completed without an error on {place}"
            );
            drop(module);
        }) as Box<dyn FnOnce() + Send>
    }};
}

/// Makes the device behind `stream` lost, for real, on places that can be made to lose it on
/// demand; `None` on the others (their device loss is not tested here).
///
/// * wgpu places: `destroy()` on the raw `wgpu::Device` the stream exposes;
/// * plug-in places whose plug-in exports the `custom_cpu` test plug-in's hook
///   `devstream_test_plugin_cpu_lose_device(int device)`: every later call on the device fails;
/// * CUDA and HIP places: a kernel that executes `trap` on a stream of its own, which leaves
///   the context with a sticky error (every later call of the context fails with it).
///
/// Either way the whole place's device is lost: use it in a child process of its own
/// ([`for_each_place_isolated`]).
pub fn device_loser(stream: &Stream) -> Option<Box<dyn FnOnce() + Send>> {
    #[cfg(feature = "wgpu")]
    if let Some(wgpu) = stream.backend::<devstream::wgpu::WgpuStream>() {
        let device = wgpu.as_raw().0.clone();
        return Some(Box::new(move || device.destroy()));
    }
    #[cfg(feature = "cuda")]
    if stream.backend::<devstream::cuda::CudaStream>().is_some() {
        use devstream::cuda::{CudaModule, CudaStream, LaunchConfig};
        return Some(trap_kernel_loser!(
            stream.place(),
            CudaModule,
            CudaStream,
            LaunchConfig
        ));
    }
    #[cfg(feature = "hip")]
    if stream.backend::<devstream::hip::HipStream>().is_some() {
        use devstream::hip::{HipModule, HipStream, LaunchConfig};
        return Some(trap_kernel_loser!(
            stream.place(),
            HipModule,
            HipStream,
            LaunchConfig
        ));
    }
    #[cfg(feature = "plugin")]
    if let Place::Custom { device_type, id } = stream.place() {
        return plugin_device_loser(device_type, *id);
    }
    let _ = stream;
    None
}

/// The test plug-in's hook that makes device `id` of `device_type` lost, where the plug-in that
/// serves `device_type` exports it.
#[cfg(feature = "plugin")]
fn plugin_device_loser(device_type: &str, id: usize) -> Option<Box<dyn FnOnce() + Send>> {
    use std::os::unix::ffi::OsStrExt;
    let plugin = devstream::plugin::loaded_plugins()
        .into_iter()
        .find(|plugin| plugin.device_type == device_type)?;
    let path = std::ffi::CString::new(plugin.path.as_os_str().as_bytes()).ok()?;
    let id = libc::c_int::try_from(id).ok()?;
    // SAFETY: `RTLD_NOLOAD` only finds the library devstream already loaded (nothing is loaded
    // or initialised); the handle is never closed, and devstream never unloads a plug-in.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: a live handle and a NUL-terminated name.
    let symbol = unsafe { libc::dlsym(handle, c"devstream_test_plugin_cpu_lose_device".as_ptr()) };
    if symbol.is_null() {
        return None;
    }
    // SAFETY: the test plug-in exports this name as `extern "C" fn(int)`, and the library
    // stays loaded for the life of the process.
    let lose =
        unsafe { std::mem::transmute::<*mut libc::c_void, extern "C" fn(libc::c_int)>(symbol) };
    Some(Box::new(move || lose(id)))
}

/// Whether `a` and `b` are places of different backends, as waits across backends count them:
/// different backend kinds, or custom devices of different device types.
pub fn other_backend(a: &Place, b: &Place) -> bool {
    match (a, b) {
        (Place::Custom { device_type: x, .. }, Place::Custom { device_type: y, .. }) => x != y,
        _ => a.backend() != b.backend(),
    }
}

/// A second place under test whose backend differs from `place`'s, if any.
pub fn other_backend_place(place: &Place) -> Option<Place> {
    places_under_test()
        .into_iter()
        .find(|p| p.backend() != place.backend())
}

/// A second place under test of the same backend as `place`, if any. Custom devices of
/// different device types are different backends (each is its own plug-in or registered
/// backend, and waits between them are waits across backends).
pub fn same_backend_other_place(place: &Place) -> Option<Place> {
    places_under_test()
        .into_iter()
        .find(|p| !other_backend(p, place) && p != place)
}

/// How long a single call in a hostile check may take before the check calls it a hang:
/// `DEVSTREAM_CONFORMANCE_HANG_SECS` seconds, else 30 s. A hang still fails (and names its line)
/// well inside the isolated child's limit; 10 s, the earlier value, was exceeded by calls that
/// were only slow: on wgpu:0 under ThreadSanitizer on a loaded 2-core host (local CI run of
/// 2026-11-25), and plausibly the hostile model test of a CI run on a busy machine.
pub static HANG: std::sync::LazyLock<Duration> = std::sync::LazyLock::new(|| {
    std::env::var("DEVSTREAM_CONFORMANCE_HANG_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .map_or(Duration::from_secs(30), Duration::from_secs)
});

/// How long a whole isolated check may run on one place by default (a backstop behind the
/// per-call watchdogs, which name the hanging line).
pub const ISOLATED_BODY: Duration = Duration::from_secs(90);

/// [`ISOLATED_BODY`], or `DEVSTREAM_CONFORMANCE_ISOLATED_SECS` seconds where that is set (to tell
/// a slow check from a hung one on a slow place).
pub fn isolated_body() -> Duration {
    std::env::var("DEVSTREAM_CONFORMANCE_ISOLATED_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .map_or(ISOLATED_BODY, Duration::from_secs)
}

/// The environment variables that tell a child process which isolated test it runs, and on
/// which place.
const ISOLATED_CHILD: &str = "DEVSTREAM_CONFORMANCE_ISOLATED_CHILD";
const ISOLATED_PLACE: &str = "DEVSTREAM_CONFORMANCE_ISOLATED_PLACE";

/// Runs `check` on every place, each place in a child process of its own that runs only the
/// test `name` (this test binary again, `--exact name`), under an [`isolated_body`] watchdog.
///
/// For checks that may wedge or abort a place when a backend is broken (a host function stuck
/// forever, a dead worker or poller thread, a panic through an `extern "C"` frame): the child is
/// killed at its deadline, so a broken backend fails the test in bounded time, leaves nothing
/// stuck in the suite's process, and does not hide the other places' results. The check still
/// sees every place under test (for checks that use a second place). `name` must be the test's
/// path as libtest names it (`hostile::my_test`), or the child runs nothing and the test fails
/// saying so. Each child's output is printed, and the lines that say what failed where are
/// quoted in the failure.
pub fn for_each_place_isolated(name: &str, check: fn(&Place) -> Result<()>) {
    if let Some(child) = std::env::var_os(ISOLATED_CHILD) {
        assert_eq!(
            child.to_str(),
            Some(name),
            "an isolated child ran a test other than the one it was started for"
        );
        let wanted = std::env::var(ISOLATED_PLACE).expect("an isolated child names its place");
        let place: Place = wanted.parse().expect("the isolated child's place");
        let _alone = exclusive();
        run_on(std::slice::from_ref(&place), &|place| {
            let place = place.clone();
            let what = format!("{name} on {place} (whole check)");
            within(isolated_body(), &what, move || check(&place), || {})
        });
        return;
    }
    let places = places_under_test();
    assert!(!places.is_empty(), "{name}: no place under test");
    let mut failures = Vec::new();
    for place in &places {
        let started = Instant::now();
        match run_isolated_child(name, place) {
            Ok(()) => eprintln!(
                "[conformance] {name} on {place}: ok in a child process ({:.0?})",
                started.elapsed()
            ),
            Err(why) => failures.push(format!("--- {name} on {place}: {why}")),
        }
    }
    assert!(
        failures.is_empty(),
        "failed on {} of {} places (each in a child process):\n{}",
        failures.len(),
        places.len(),
        failures.join("\n")
    );
}

/// Runs the test `name` of this binary alone in a child process with `env` set, killing it after
/// `limit`: its exit status (`None` when it was killed) and what it printed. Output goes to
/// files named after `tag` (a pipe could fill and stall the child while it is polled).
pub fn run_test_in_child(
    name: &str,
    tag: &str,
    env: &[(&str, String)],
    limit: Duration,
) -> (Option<std::process::ExitStatus>, String, String) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = std::env::temp_dir();
    let tag = format!("{tag}-{}", std::process::id());
    let (out_path, err_path) = (
        dir.join(format!("{tag}.out")),
        dir.join(format!("{tag}.err")),
    );
    let file = |p: &std::path::Path| std::fs::File::create(p).expect("a temporary output file");
    // A child prints its stacks (DEVSTREAM_TEST_STACKS_AFTER, see `stacks.rs`) in half the
    // parent's time, so that a hung child's stacks reach its output before the parent's own
    // dump ends the run.
    let stacks_after = std::env::var("DEVSTREAM_TEST_STACKS_AFTER")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(|after| (after / 2).max(5).to_string());
    let mut child = std::process::Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .envs(stacks_after.map(|after| ("DEVSTREAM_TEST_STACKS_AFTER".to_string(), after)))
        .envs(
            env.iter()
                .map(|(key, value)| (key.to_string(), value.clone())),
        )
        .stdout(file(&out_path))
        .stderr(file(&err_path))
        .spawn()
        .expect("run the test in a child process");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll the child") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = (
        std::fs::remove_file(&out_path),
        std::fs::remove_file(&err_path),
    );
    (status, stdout, stderr)
}

/// Runs the isolated test `name` on `place` in a child process; `Err` says how it failed.
fn run_isolated_child(name: &str, place: &Place) -> std::result::Result<(), String> {
    let tag = format!(
        "devstream-isolated-{}-{}",
        name.replace("::", "-"),
        place.to_string().replace(':', "-")
    );
    let (status, stdout, stderr) = run_test_in_child(
        name,
        &tag,
        &[
            (ISOLATED_CHILD, name.to_string()),
            (ISOLATED_PLACE, place.to_string()),
        ],
        isolated_body() + Duration::from_secs(30),
    );
    eprintln!(
        "--- {name} on {place}: child stdout ---\n{stdout}\n--- {name} on {place}: child stderr \
         ---\n{stderr}"
    );
    // The lines that say what failed where: results, panic locations and messages, aborts.
    let lines: Vec<&str> = stderr.lines().collect();
    let summary: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            l.starts_with("[conformance]")
                || l.starts_with("fatal runtime error")
                || l.contains("cannot unwind")
                || l.contains("panicked at")
                || (*i > 0 && lines[i - 1].contains("panicked at"))
        })
        .map(|(_, l)| *l)
        .collect();
    let summary = summary.join("\n");
    match status {
        None => Err(format!(
            "the child hung past its deadline and was killed:\n{summary}"
        )),
        Some(status) if !status.success() => {
            Err(format!("the child failed ({status}):\n{summary}"))
        }
        Some(_) if !stdout.contains("1 passed") => Err(format!(
            "the child did not run the test (is {name:?} its exact name?)"
        )),
        Some(_) => Ok(()),
    }
}
