//! Helpers shared by the plug-in tests.
#![allow(dead_code)]

use devstream_core::{DeviceBackend, Place, StreamOptions};
use devstream_plugin::{PluginBackend, PluginStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The place of the workspace's test plug-in (found by discovery's build-tree rule).
pub fn cpu0() -> Place {
    "custom_cpu:0".parse().unwrap()
}

pub fn stream(place: &Place) -> PluginStream {
    PluginBackend::new_stream(place, StreamOptions::default()).unwrap()
}

/// A library built by this workspace next to the test executable.
pub fn built_library(name: &str) -> PathBuf {
    devstream_core::build_tree::built_library(name)
        .unwrap_or_else(|| panic!("{name} was not built next to this test"))
}

/// How many times longer than a plain debug run a tool may make a test: the
/// `DEVSTREAM_TEST_TIME_SCALE` that `cargo xtask sanitize` sets (ThreadSanitizer, for one, with a
/// panic's backtrace symbolized on two busy cores), else 1. Hang detectors multiply their limits
/// by it; they exist to turn a hang into a failure, never to time a test.
pub fn time_scale() -> u32 {
    std::env::var("DEVSTREAM_TEST_TIME_SCALE")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .filter(|&scale| scale >= 1)
        .unwrap_or(1)
}

pub fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30) * time_scale();
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    condition()
}

/// `result` is the panic of a host function of the stream `stream_id`, with `text` in its message.
pub fn assert_host_func_panicked(result: devstream_core::Result<()>, stream_id: u64, text: &str) {
    match result {
        Err(devstream_core::Error::HostFuncPanicked { stream, message }) => {
            assert_eq!(stream, stream_id);
            assert!(message.contains(text), "{message}");
        }
        other => panic!("expected the host function's panic, got {other:?}"),
    }
}

/// Launches on `stream` a host function that counts its runs; answers the count.
pub fn launch_counting(stream: &impl devstream_core::DeviceStream) -> Arc<AtomicUsize> {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    let count = move || {
        counter.fetch_add(1, Ordering::SeqCst);
    };
    stream.launch_host_func(Box::new(count)).unwrap();
    ran
}

/// Live streams, events and allocations inside the test plug-in.
pub fn plugin_live() -> [usize; 3] {
    let path = built_library("devstream_test_plugin_cpu");
    // SAFETY: the workspace's test plug-in; loading it again returns the loaded image.
    let library = unsafe { libloading::Library::new(path) }.unwrap();
    // SAFETY: the symbol's signature is `void(size_t*)`, writing three entries.
    unsafe { read_export(&library, b"devstream_test_plugin_cpu_live\0") }
}

/// Calls `symbol`, an export of `library` with the C signature `void(T*)` that writes `N`
/// entries, and answers them.
///
/// # Safety
/// `symbol` must have that signature and write at most `N` entries.
pub unsafe fn read_export<T: Copy + Default, const N: usize>(
    library: &libloading::Library,
    symbol: &[u8],
) -> [T; N] {
    // SAFETY: the caller vouches for the signature.
    let read = unsafe { library.get::<unsafe extern "C" fn(*mut T)>(symbol) }.unwrap();
    let mut out = [T::default(); N];
    // SAFETY: room for `N` entries, the most the caller says `symbol` writes.
    unsafe { read(out.as_mut_ptr()) };
    out
}

/// A private copy of the faulty test plug-in: a file of its own, so `dlopen` gives it an image
/// (and mode, and counters) of its own, and devstream loads each file once.
pub struct Faulty {
    pub path: PathBuf,
    pub library: Option<libloading::Library>,
}

impl Faulty {
    /// Copies the faulty plug-in to a fresh file and selects `mode` in that copy.
    pub fn new(mode: u32) -> Faulty {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // A directory per copy: a dropped copy removes its directory, which must not be one
        // another test is copying into at that moment.
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("devstream-faulty-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!(
            "{}faulty{n}-mode{mode}{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        ));
        std::fs::copy(built_library("devstream_test_plugin_faulty"), &path).unwrap();
        // SAFETY: a copy of the workspace's faulty test plug-in.
        let library = unsafe { libloading::Library::new(&path) }.unwrap();
        // SAFETY: the selector's signature is `void(unsigned)`.
        let select = unsafe {
            library.get::<unsafe extern "C" fn(u32)>(b"devstream_test_plugin_faulty_select\0")
        }
        .unwrap();
        // SAFETY: a plain store.
        unsafe { select(mode) };
        Faulty {
            path,
            library: Some(library),
        }
    }

    /// As [`Faulty::new`], registering a device type of its own (`faulty_<mode>_<address>`), so
    /// that one mode can be loaded several times in a process.
    pub fn unique(mode: u32) -> Faulty {
        let copy = Faulty::new(mode);
        // SAFETY: the signature is `void(void)`.
        let unique = unsafe {
            copy.library()
                .get::<unsafe extern "C" fn()>(b"devstream_test_plugin_faulty_unique_name\0")
        }
        .unwrap();
        // SAFETY: a plain store.
        unsafe { unique() };
        copy
    }

    /// Loads this copy through devstream.
    pub fn load(&self) -> devstream_core::Result<devstream_plugin::PluginInfo> {
        devstream_plugin::load_plugin(&self.path)
    }

    fn library(&self) -> &libloading::Library {
        self.library
            .as_ref()
            .expect("the test's handle was dropped")
    }

    /// The copy's counters (`devstream_test_plugin_faulty::COUNT_*`).
    pub fn counters(&self) -> [usize; devstream_test_plugin_faulty::COUNTERS] {
        // SAFETY: the signature is `void(size_t*)`, writing every counter.
        unsafe { read_export(self.library(), b"devstream_test_plugin_faulty_counters\0") }
    }

    /// Runs the callbacks the copy queued in `MODE_QUEUED_ERROR`; answers how many ran.
    pub fn run_queued(&self) -> usize {
        // SAFETY: the signature is `size_t(void)`.
        let run = unsafe {
            self.library().get::<unsafe extern "C" fn() -> usize>(
                b"devstream_test_plugin_faulty_run_queued\0",
            )
        }
        .unwrap();
        // SAFETY: runs callbacks devstream handed to the plug-in, once each.
        unsafe { run() }
    }
}

impl Drop for Faulty {
    /// Keeps the copy loaded (devstream may hold it; the test's own handle is leaked, so its
    /// statics stay valid), and removes the file: a loaded image does not need it.
    fn drop(&mut self) {
        std::mem::forget(self.library.take());
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Runs `body` on a thread and fails the test when it does not finish within `seconds` times
/// [`time_scale`] (a hang fails in seconds instead of stalling the suite).
pub fn watchdog<T: Send + 'static>(
    what: &str,
    seconds: u64,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(body());
    });
    let limit = Duration::from_secs(seconds) * time_scale();
    match finished.recv_timeout(limit) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: hung (no result within {limit:?})")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("{what}: the body panicked")
        }
    }
}
