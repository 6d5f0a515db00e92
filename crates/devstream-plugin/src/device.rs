//! `PluginBackend`: the registry entry for `Place::Custom` (plug-ins and Rust-registered
//! backends).

use crate::discovery::{CUSTOM_DEVICE_ROOT, DEVSTREAM_PLUGIN_PATH};
use crate::event::{AbiEvent, EventRepr, PluginEvent};
use crate::flag::{FlagRepr, PluginFlag};
use crate::queue::{lock, HostFlag, Origin, StreamCore, LIVE_EVENTS, LIVE_STREAMS};
use crate::registry::{all_devices, load_failures, lookup, plugin_slot, CustomDevice};
use crate::runtime::{Handle, LoadedPlugin};
use crate::stream::{PluginStream, StreamRepr};
use devstream_core::{
    BackendKind, Capabilities, DeviceBackend, DevicePool, Error, EventFlags, LiveCounts, Place,
    PoolOptions, PriorityRange, Result, StreamOptions,
};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The custom-device backend: every device type of a loaded Paddle plug-in or a
/// Rust-registered backend, as `Place::Custom { device_type, id }`.
///
/// Capabilities of a plug-in place follow its table: `host_funcs` and `flags` with
/// `stream_add_callback`; `nonblocking_query` with `query_stream` and `query_event` (without
/// them `query` synchronizes, as Paddle does); `concurrent_streams` when `create_stream` makes
/// real streams; `capture` `Native` (and `capture_host_funcs` with `stream_add_callback`) when
/// the table was identified as Paddle 3.3's and has the graph-capture functions devstream uses;
/// no priorities (range `{0, 0}`), timing, per-thread or legacy default stream, cross-device
/// waits, interprocess events or stream-ordered allocation.
#[derive(Debug)]
pub struct PluginBackend;

fn default_streams() -> &'static Mutex<HashMap<Place, Arc<StreamCore>>> {
    static DEFAULTS: std::sync::OnceLock<Mutex<HashMap<Place, Arc<StreamCore>>>> =
        std::sync::OnceLock::new();
    DEFAULTS.get_or_init(|| Mutex::new(HashMap::new()))
}

fn not_available() -> Error {
    let failures = load_failures();
    let mut reason = format!(
        "no custom device is registered: no plug-in was found ({CUSTOM_DEVICE_ROOT}={:?}, \
         {DEVSTREAM_PLUGIN_PATH}={:?}) or loaded with load_plugin, and no Rust backend was \
         registered with register_custom_device",
        std::env::var_os(CUSTOM_DEVICE_ROOT),
        std::env::var_os(DEVSTREAM_PLUGIN_PATH),
    );
    for (path, error) in failures {
        reason.push_str(&format!("; skipped {}: {error}", path.display()));
    }
    Error::BackendUnavailable {
        backend: "plugin",
        reason,
    }
}

/// `probe`'s answer: `Ok` when a plug-in is loaded or a registered Rust backend is available,
/// else `BackendUnavailable` (also what a place of an unserved device type gets then).
pub(crate) fn available() -> Result<()> {
    let devices = all_devices();
    if devices.iter().any(|d| match d {
        CustomDevice::Plugin(_) => true,
        CustomDevice::Rust(backend) => backend.probe().is_ok(),
    }) {
        Ok(())
    } else {
        Err(not_available())
    }
}

impl DeviceBackend for PluginBackend {
    type Stream = PluginStream;
    const KIND: BackendKind = BackendKind::Plugin;

    fn places() -> Vec<Place> {
        let mut out = Vec::new();
        for device in all_devices() {
            match device {
                CustomDevice::Plugin(runtime) => {
                    out.extend((0..runtime.device_ids().count()).map(|slot| runtime.place(slot)))
                }
                CustomDevice::Rust(backend) => out.extend(backend.places()),
            }
        }
        out
    }

    fn probe() -> Result<()> {
        available()
    }

    fn capabilities(place: &Place) -> Result<Capabilities> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                plugin_slot(&runtime, place)?;
                Ok(runtime.caps)
            }
            CustomDevice::Rust(backend) => backend.capabilities(place),
        }
    }

    fn priority_range(place: &Place) -> Result<PriorityRange> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                plugin_slot(&runtime, place)?;
                Ok(PriorityRange::NONE)
            }
            CustomDevice::Rust(backend) => backend.priority_range(place),
        }
    }

    fn new_stream(place: &Place, options: StreamOptions) -> Result<PluginStream> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                let slot = plugin_slot(&runtime, place)?;
                let raw = created_stream(&runtime, slot)?;
                Ok(PluginStream::abi(StreamCore::new(
                    runtime,
                    slot,
                    raw,
                    options.non_blocking,
                    Origin::User,
                    options.elide_waits,
                )))
            }
            CustomDevice::Rust(backend) => Ok(PluginStream(StreamRepr::Rust(
                backend.new_stream(place, options)?,
            ))),
        }
    }

    fn default_stream(place: &Place) -> Result<PluginStream> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                let slot = plugin_slot(&runtime, place)?;
                let mut defaults = lock(default_streams());
                if let Some(core) = defaults.get(place) {
                    return Ok(PluginStream::abi(core.clone()));
                }
                let raw = created_stream(&runtime, slot)?;
                let core = StreamCore::new(runtime, slot, raw, true, Origin::Default, false);
                defaults.insert(place.clone(), core.clone());
                Ok(PluginStream::abi(core))
            }
            CustomDevice::Rust(backend) => Ok(PluginStream(StreamRepr::Rust(
                backend.default_stream(place)?,
            ))),
        }
    }

    fn per_thread_stream(place: &Place) -> Result<PluginStream> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                plugin_slot(&runtime, place)?;
                Err(Error::unsupported("Stream::per_thread", place))
            }
            CustomDevice::Rust(backend) => Ok(PluginStream(StreamRepr::Rust(
                backend.per_thread_stream(place)?,
            ))),
        }
    }

    fn new_event(place: &Place, flags: EventFlags) -> Result<PluginEvent> {
        let flags = flags.validate()?;
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                plugin_slot(&runtime, place)?;
                if flags.timing {
                    return Err(Error::unsupported("Event::new(timing)", place));
                }
                if flags.interprocess {
                    return Err(Error::unsupported("Event::new(interprocess)", place));
                }
                Ok(PluginEvent(EventRepr::Abi(Arc::new(AbiEvent::new(
                    place.clone(),
                    flags,
                )))))
            }
            CustomDevice::Rust(backend) => Ok(PluginEvent(EventRepr::Rust(
                backend.new_event(place, flags)?,
            ))),
        }
    }

    fn new_flag(place: &Place) -> Result<PluginFlag> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                plugin_slot(&runtime, place)?;
                if !runtime.caps.flags {
                    return Err(Error::unsupported("Flag::new", place));
                }
                Ok(PluginFlag(FlagRepr::Abi(Arc::new(HostFlag::new(
                    place.clone(),
                )))))
            }
            CustomDevice::Rust(backend) => Ok(PluginFlag(FlagRepr::Rust(backend.new_flag(place)?))),
        }
    }

    fn default_pool(place: &Place) -> Result<Arc<dyn DevicePool>> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                let slot = plugin_slot(&runtime, place)?;
                let pool: Arc<dyn DevicePool> = crate::mempool::default_pool(&runtime, slot);
                Ok(pool)
            }
            CustomDevice::Rust(backend) => backend.default_pool(place),
        }
    }

    fn new_pool(place: &Place, options: PoolOptions) -> Result<Arc<dyn DevicePool>> {
        match lookup(place)? {
            CustomDevice::Plugin(runtime) => {
                let slot = plugin_slot(&runtime, place)?;
                Ok(crate::mempool::new_pool(&runtime, slot, options))
            }
            CustomDevice::Rust(backend) => backend.new_pool(place, options),
        }
    }

    fn live_counts() -> LiveCounts {
        let mut counts = LiveCounts {
            streams: LIVE_STREAMS.load(Ordering::SeqCst),
            events: LIVE_EVENTS.load(Ordering::SeqCst),
        };
        for device in all_devices() {
            if let CustomDevice::Rust(backend) = device {
                let c = backend.live_counts();
                counts.streams += c.streams;
                counts.events += c.events;
            }
        }
        counts
    }
}

/// A new plug-in stream of `slot`; refused (`Error::Capture`) where the plug-in gave it the
/// handle of another live stream while a capture of the runtime is in progress: the plug-in
/// would put the new stream's work into that capture (see `runtime::stream_handles`). The
/// plug-in's stream is then left alone, not destroyed: destroying the shared handle would
/// destroy the other stream's.
fn created_stream(runtime: &Arc<LoadedPlugin>, slot: usize) -> Result<Handle> {
    let (raw, shared) = runtime.create_stream(slot)?;
    if shared && crate::capture::any_active(runtime.index()) {
        return Err(Error::capture(
            "Stream::new",
            "the plug-in gave the new stream the handle of a live stream while a capture is in \
             progress: its work would go into that capture",
        ));
    }
    Ok(raw)
}
