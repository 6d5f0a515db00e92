//! The deterministic adapter enumeration behind `Place::Wgpu(index)`: which wgpu backends are
//! asked, and the order of the adapters they report.

use super::*;

/// One adapter of the deterministic enumeration behind `Place::Wgpu(index)`.
#[derive(Clone, Debug)]
pub struct AdapterEntry {
    /// The place this adapter is: `Place::Wgpu(index)`.
    pub index: usize,
    /// What wgpu reports about the adapter (name, backend, device type, driver).
    pub info: wgpu::AdapterInfo,
    /// The adapter's optional features.
    pub features: wgpu::Features,
}

pub(super) struct Enumeration {
    /// Kept for the life of the process, with the adapters it enumerated.
    _instance: Option<wgpu::Instance>,
    pub(super) adapters: Vec<wgpu::Adapter>,
    pub(super) entries: Vec<AdapterEntry>,
    /// Why nothing could be enumerated, when nothing could.
    pub(super) unavailable: Option<String>,
}

pub(super) fn backend_rank(backend: wgpu::Backend) -> u8 {
    match backend {
        wgpu::Backend::Vulkan => 0,
        wgpu::Backend::Metal => 1,
        wgpu::Backend::Dx12 => 2,
        wgpu::Backend::Gl => 3,
        _ => 4,
    }
}

pub(super) fn device_type_rank(device_type: wgpu::DeviceType) -> u8 {
    match device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

/// The backends to enumerate: `DEVSTREAM_WGPU_BACKENDS`, else `WGPU_BACKEND`, else all.
fn requested_backends() -> wgpu::Backends {
    let compiled = wgpu::Instance::enabled_backend_features();
    let requested = match std::env::var(BACKENDS_ENV) {
        Ok(list) if !list.trim().is_empty() => wgpu::Backends::from_comma_list(&list),
        _ => wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all()),
    };
    requested & compiled & !wgpu::Backends::BROWSER_WEBGPU & !wgpu::Backends::NOOP
}

fn enumerate() -> Enumeration {
    let backends = requested_backends();
    if backends.is_empty() {
        return Enumeration {
            _instance: None,
            adapters: Vec::new(),
            entries: Vec::new(),
            unavailable: Some(format!(
                "no wgpu backend left to enumerate (compiled in: {:?}; {BACKENDS_ENV}={:?}; WGPU_BACKEND={:?})",
                wgpu::Instance::enabled_backend_features(),
                std::env::var(BACKENDS_ENV).ok(),
                std::env::var("WGPU_BACKEND").ok()
            )),
        };
    }
    let made = catch_unwind(|| {
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = backends;
        // Lean flags (no debug labels, no validation layers) unless WGPU_* variables ask.
        descriptor.flags = wgpu::InstanceFlags::empty().with_env();
        let instance = wgpu::Instance::new(descriptor);
        let adapters = block_on(instance.enumerate_adapters(backends));
        (instance, adapters)
    });
    let (instance, mut adapters) = match made {
        Ok(pair) => pair,
        Err(payload) => {
            return Enumeration {
                _instance: None,
                adapters: Vec::new(),
                entries: Vec::new(),
                unavailable: Some(format!(
                    "creating the wgpu instance failed: {}",
                    devstream_core::panic::take_message(payload)
                )),
            }
        }
    };
    adapters.sort_by_cached_key(|adapter| {
        let info = adapter.get_info();
        (
            backend_rank(info.backend),
            device_type_rank(info.device_type),
            info.name.clone(),
            info.vendor,
            info.device,
            info.driver.clone(),
        )
    });
    let entries: Vec<AdapterEntry> = adapters
        .iter()
        .enumerate()
        .map(|(index, adapter)| AdapterEntry {
            index,
            info: adapter.get_info(),
            features: adapter.features(),
        })
        .collect();
    let unavailable = entries.is_empty().then(|| {
        format!(
            "no wgpu adapter found for backends {backends:?} (on Linux, Vulkan needs libvulkan1 and \
             a driver such as Mesa's lavapipe: apt-get install mesa-vulkan-drivers)"
        )
    });
    Enumeration {
        _instance: Some(instance),
        adapters,
        entries,
        unavailable,
    }
}

pub(super) fn enumeration() -> &'static Enumeration {
    static ENUMERATION: OnceLock<Enumeration> = OnceLock::new();
    ENUMERATION.get_or_init(enumerate)
}

/// The adapters behind `Place::Wgpu(0..)`, in their deterministic order: sorted by backend
/// (Vulkan, Metal, DX12, GL), device type (discrete, integrated, virtual, CPU, other), name,
/// vendor id, device id, driver. Restricted by [`BACKENDS_ENV`] / `WGPU_BACKEND`. Enumerated once
/// per process; empty (never a panic) when no driver is installed.
pub fn adapters() -> Vec<AdapterEntry> {
    enumeration().entries.clone()
}
