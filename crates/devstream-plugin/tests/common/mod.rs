//! Helpers shared by the plug-in tests.
#![allow(dead_code)]

use devstream_core::{DeviceBackend, Place, StreamOptions};
use devstream_plugin::{PluginBackend, PluginStream};
use std::path::PathBuf;
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
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let file = format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    [deps.join(&file), deps.parent().unwrap().join(&file)]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{file} was not built next to {}", exe.display()))
}

pub fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    condition()
}

/// Live streams, events and allocations inside the test plug-in.
pub fn plugin_live() -> [usize; 3] {
    let path = built_library("devstream_test_plugin_cpu");
    // SAFETY: the workspace's test plug-in; loading it again returns the loaded image.
    let library = unsafe { libloading::Library::new(path) }.unwrap();
    // SAFETY: the symbol's signature is `void(size_t*)`.
    let live = unsafe {
        library.get::<unsafe extern "C" fn(*mut usize)>(b"devstream_test_plugin_cpu_live\0")
    }
    .unwrap();
    let mut out = [0usize; 3];
    // SAFETY: room for three entries.
    unsafe { live(out.as_mut_ptr()) };
    out
}
