//! Loading plug-in copies: each [`Config`] the input names is loaded once per process, from a
//! copy of the shim library of its own (devstream loads each file once and never unloads it),
//! and the outcome is kept for later inputs naming the same config.

use crate::plugin::{self, Config, Instance, MAX_INSTANCES};
use devstream_core::Error;
use devstream_plugin::PluginInfo;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// The shim library built by `build.rs`.
const SHIM: &str = env!("DEVSTREAM_FUZZ_SHIM");

/// What loading one config gave.
#[derive(Clone)]
pub struct Loaded {
    /// The plug-in instance (its table functions), when `InitPlugin` ran.
    pub instance: &'static Instance,
    /// devstream's answer.
    pub result: Result<PluginInfo, Error>,
}

struct Loads {
    by_config: HashMap<Config, Loaded>,
}

static LOADS: Mutex<Option<Loads>> = Mutex::new(None);

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = std::env::temp_dir();
        // Directories of earlier fuzzing processes that are gone.
        if let Ok(entries) = std::fs::read_dir(&base) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("devstream-plugin-fuzz-") {
                    if !PathBuf::from(format!("/proc/{pid}")).exists() {
                        let _ = std::fs::remove_dir_all(entry.path());
                    }
                }
            }
        }
        let dir = base.join(format!("devstream-plugin-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("cannot create the fuzz scratch directory");
        dir
    })
}

/// The install function the shim exports.
type Install = unsafe extern "C" fn(plugin::InitEntry, *mut std::ffi::c_void);

/// Loads `config` (once per process) and answers the outcome.
pub fn load(config: Config) -> Loaded {
    let mut guard = LOADS.lock().unwrap_or_else(|e| e.into_inner());
    let loads = guard.get_or_insert_with(|| Loads {
        by_config: HashMap::new(),
    });
    if let Some(loaded) = loads.by_config.get(&config) {
        return loaded.clone();
    }
    let n = loads.by_config.len();
    if n >= MAX_INSTANCES {
        plugin::violation(format_args!("more than {MAX_INSTANCES} plug-in configs"));
    }
    let instance = plugin::create_instance(n, config);
    let path = scratch().join(format!("libfuzz_plugin_{n}.so"));
    std::fs::copy(SHIM, &path).expect("cannot copy the shim library");
    // SAFETY: our own shim (two functions, no initialisers).
    let library = unsafe { libloading::Library::new(&path) }.expect("cannot load the shim copy");
    // SAFETY: the shim's `void devstream_fuzz_shim_install(init_fn, void*)`.
    let install = unsafe { library.get::<Install>(b"devstream_fuzz_shim_install\0") }
        .expect("the shim exports its install function");
    let (entry, context) = plugin::init_plugin_entry(n);
    // SAFETY: stores two pointers in the shim copy.
    unsafe { install(entry, context) };
    // The copy stays loaded for the process (devstream may keep it, and its callbacks run).
    std::mem::forget(library);
    let result = devstream_plugin::load_plugin(&path);
    let loaded = Loaded { instance, result };
    loads.by_config.insert(config, loaded.clone());
    loaded
}

/// The places of every plug-in loaded so far.
pub fn all_places() -> Vec<devstream_core::Place> {
    let guard = LOADS.lock().unwrap_or_else(|e| e.into_inner());
    guard
        .iter()
        .flat_map(|loads| loads.by_config.values())
        .filter_map(|loaded| loaded.result.as_ref().ok())
        .flat_map(|info| info.places.clone())
        .collect()
}
