//! The process-wide table of custom device types: plug-ins found by discovery or loaded with
//! [`load_plugin`], and Rust backends registered with [`register_custom_device`].

use crate::discovery::plugin_candidates;
use crate::runtime::Runtime;
use devstream_core::dynamic::{DynBackend, ErasedBackend};
use devstream_core::{Capabilities, DeviceBackend, Error, Place, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Once, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// What serves a device type.
#[derive(Clone)]
pub(crate) enum CustomDevice {
    /// A loaded plug-in.
    Plugin(Arc<Runtime>),
    /// A Rust-registered backend.
    Rust(Arc<dyn DynBackend>),
}

#[derive(Default)]
struct Registry {
    devices: BTreeMap<String, CustomDevice>,
    failures: Vec<(PathBuf, Error)>,
    /// Files whose `InitPlugin` accepted a layout (loaded, or failed after that), with the
    /// outcome: each is loaded once and never unloaded.
    files: BTreeMap<FileId, String>,
}

static REGISTRY: RwLock<Registry> = RwLock::new(Registry {
    devices: BTreeMap::new(),
    failures: Vec::new(),
    files: BTreeMap::new(),
});
static DISCOVERY: Once = Once::new();

fn read() -> RwLockReadGuard<'static, Registry> {
    REGISTRY.read().unwrap_or_else(|e| e.into_inner())
}

fn write() -> RwLockWriteGuard<'static, Registry> {
    REGISTRY.write().unwrap_or_else(|e| e.into_inner())
}

fn owner_of(device: &CustomDevice) -> String {
    match device {
        CustomDevice::Plugin(runtime) => format!("the plug-in {}", runtime.path.display()),
        CustomDevice::Rust(_) => "a Rust-registered backend".to_owned(),
    }
}

/// Loads every plug-in discovery finds, once per process. A plug-in that fails to load is
/// skipped and its error kept for [`load_failures`].
pub(crate) fn ensure_discovered() {
    DISCOVERY.call_once(|| {
        for path in plugin_candidates() {
            if let Err(error) = load_into_registry(&path) {
                tracing::warn!("devstream-plugin: skipped {}: {error}", path.display());
                write().failures.push((path, error));
            }
        }
    });
}

/// Serialises loading (and registering): one file's `InitPlugin` and `initialize` never run
/// twice because two threads loaded it at once.
static LOADING: Mutex<()> = Mutex::new(());

fn loading() -> MutexGuard<'static, ()> {
    LOADING.lock().unwrap_or_else(|e| e.into_inner())
}

/// What identifies a library file the way the dynamic loader does (device and inode, so that
/// hard links and symbolic links of one file are one plug-in), else its canonical path.
fn file_id(path: &Path) -> FileId {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(metadata) = std::fs::metadata(path) {
            return FileId::Inode(metadata.dev(), metadata.ino());
        }
    }
    FileId::Path(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()))
}

/// See [`file_id`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum FileId {
    #[cfg_attr(not(unix), allow(dead_code))]
    Inode(u64, u64),
    Path(PathBuf),
}

fn load_into_registry(path: &Path) -> Result<Arc<Runtime>> {
    let _loading = loading();
    let id = file_id(path);
    if let Some(outcome) = read().files.get(&id) {
        return Err(Error::Plugin {
            plugin: path.display().to_string(),
            reason: format!(
                "this file was loaded already and is loaded once per process: {outcome}"
            ),
        });
    }
    let taken = |device_type: &str| read().devices.get(device_type).map(owner_of);
    let runtime = match Runtime::load(path, &taken) {
        Ok(runtime) => Arc::new(runtime),
        Err(failed) => {
            if failed.kept {
                // InitPlugin accepted (and maybe initialize ran): it stays loaded, and its
                // entry points do not run again.
                write()
                    .files
                    .insert(id, format!("loading it failed ({})", failed.error));
            }
            return Err(failed.error);
        }
    };
    let mut registry = write();
    if let Some(existing) = registry.devices.get(&runtime.device_type) {
        // Unreachable while registering holds `LOADING` too; kept as a guard.
        let error = Error::Plugin {
            plugin: path.display().to_string(),
            reason: format!(
                "device type {:?} is already registered (by {})",
                runtime.device_type,
                owner_of(existing)
            ),
        };
        runtime.shut_down();
        registry.files.insert(
            id,
            format!("its initialize ran and loading failed ({error})"),
        );
        return Err(error);
    }
    registry.files.insert(
        id,
        format!(
            "device type {:?} is already registered by it",
            runtime.device_type
        ),
    );
    registry.devices.insert(
        runtime.device_type.clone(),
        CustomDevice::Plugin(runtime.clone()),
    );
    Ok(runtime)
}

/// What a loaded plug-in is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PluginInfo {
    /// The device type it registered (`"custom_cpu"`).
    pub device_type: String,
    /// Its sub-device type, if it reported one.
    pub sub_device_type: Option<String>,
    /// The library file.
    pub path: PathBuf,
    /// The custom runtime version it reported (`(0, 1, 1)`).
    pub version: (usize, usize, usize),
    /// The `device_ext.h` layout family it accepted.
    pub layout: &'static str,
    /// Its places.
    pub places: Vec<Place>,
    /// What its places can do.
    pub capabilities: Capabilities,
}

fn info(runtime: &Runtime) -> PluginInfo {
    PluginInfo {
        device_type: runtime.device_type.clone(),
        sub_device_type: runtime.sub_device_type.clone(),
        path: runtime.path.clone(),
        version: (
            runtime.version.major,
            runtime.version.minor,
            runtime.version.patch,
        ),
        layout: runtime.layout.name,
        places: (0..runtime.device_ids().count())
            .map(|s| runtime.place(s))
            .collect(),
        capabilities: runtime.caps,
    }
}

/// Loads the Paddle custom-device plug-in at `path` and registers its device type.
///
/// Discovery (`CUSTOM_DEVICE_ROOT`, `DEVSTREAM_PLUGIN_PATH`) runs first, so a device type
/// found there cannot be registered twice. Every way a plug-in can be malformed is a typed
/// error: [`Error::Plugin`] (library missing or invalid, no `InitPlugin`, a layout or runtime
/// version devstream does not know, missing required functions, a device type already
/// registered, ...) or [`Error::Driver`] naming the table function that failed (`initialize`,
/// `get_device_count`, ...).
///
/// ```no_run
/// let info = devstream_plugin::load_plugin("/opt/vendor/libnpu_runtime.so")?;
/// println!("{} places: {:?}", info.device_type, info.places);
/// # Ok::<(), devstream_core::Error>(())
/// ```
pub fn load_plugin(path: impl AsRef<Path>) -> Result<PluginInfo> {
    ensure_discovered();
    load_into_registry(path.as_ref()).map(|runtime| info(&runtime))
}

/// Registers a custom device implemented in Rust: `B` implements the devstream-core traits
/// and serves the places `"<device_type>:N"` (every place `B::places()` lists must be a
/// `Place::Custom` of this device type). Its streams, events and buffers then appear as
/// `PluginStream`, `PluginEvent`, ... (and through the facade as the `Custom` variants).
///
/// Fails with `InvalidPlace` for a device type that cannot name a place and `Plugin` when the
/// device type is already registered (by a plug-in or another backend).
pub fn register_custom_device<B: DeviceBackend>(device_type: &str) -> Result<()> {
    Place::custom(device_type, 0)?;
    ensure_discovered();
    if let Some(existing) = read().devices.get(device_type) {
        return Err(Error::Plugin {
            plugin: device_type.to_owned(),
            reason: format!("device type already registered (by {})", owner_of(existing)),
        });
    }
    let _loading = loading();
    let backend: Arc<dyn DynBackend> = Arc::new(ErasedBackend::<B>::new());
    for place in backend.places() {
        match &place {
            Place::Custom { device_type: t, .. } if t == device_type => {}
            other => {
                return Err(Error::InvalidArgument(format!(
                    "register_custom_device({device_type:?}): the backend lists the place \
                     {other}, which is not a {device_type} place"
                )))
            }
        }
    }
    let mut registry = write();
    if let Some(existing) = registry.devices.get(device_type) {
        return Err(Error::Plugin {
            plugin: device_type.to_owned(),
            reason: format!("device type already registered (by {})", owner_of(existing)),
        });
    }
    registry
        .devices
        .insert(device_type.to_owned(), CustomDevice::Rust(backend));
    Ok(())
}

/// The plug-ins that discovery or [`load_plugin`] loaded.
pub fn loaded_plugins() -> Vec<PluginInfo> {
    ensure_discovered();
    read()
        .devices
        .values()
        .filter_map(|d| match d {
            CustomDevice::Plugin(runtime) => Some(info(runtime)),
            CustomDevice::Rust(_) => None,
        })
        .collect()
}

/// The plug-ins discovery found but could not load, with why.
pub fn load_failures() -> Vec<(PathBuf, Error)> {
    ensure_discovered();
    read().failures.clone()
}

/// Every registered device type, plug-ins and Rust backends alike.
pub fn device_types() -> Vec<String> {
    ensure_discovered();
    read().devices.keys().cloned().collect()
}

pub(crate) fn all_devices() -> Vec<CustomDevice> {
    ensure_discovered();
    read().devices.values().cloned().collect()
}

/// What serves `place`; for a device type nobody serves, what `probe` says: the backend is
/// unavailable (`BackendUnavailable`) when no custom device is available at all, else
/// `NoDevice`.
pub(crate) fn lookup(place: &Place) -> Result<CustomDevice> {
    let Place::Custom { device_type, .. } = place else {
        return Err(Error::NoDevice {
            place: place.clone(),
            reason: "not a custom-device place".into(),
        });
    };
    ensure_discovered();
    let known: Vec<String> = {
        let registry = read();
        if let Some(found) = registry.devices.get(device_type) {
            return Ok(found.clone());
        }
        registry.devices.keys().cloned().collect()
    };
    // Asked without the registry's lock held (a Rust backend's probe may look it up).
    crate::device::available()?;
    Err(Error::NoDevice {
        place: place.clone(),
        reason: format!(
            "no plug-in or Rust-registered backend serves the device type {device_type:?} \
             (registered: {known:?}; plug-ins are found in CUSTOM_DEVICE_ROOT or loaded \
             with load_plugin)"
        ),
    })
}

/// The plug-in runtime and device slot of a plug-in place.
pub(crate) fn plugin_slot(runtime: &Arc<Runtime>, place: &Place) -> Result<usize> {
    runtime
        .slot_of(place.index())
        .ok_or_else(|| Error::NoDevice {
            place: place.clone(),
            reason: format!(
                "the {} plug-in has devices {:?}",
                runtime.device_type,
                runtime.device_ids().collect::<Vec<_>>()
            ),
        })
}
