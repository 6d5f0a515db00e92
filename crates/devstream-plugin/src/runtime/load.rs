//! Loading a plug-in: the library is opened (and never unloaded once `InitPlugin` accepted a
//! layout), the offers negotiated and the result validated, then `initialize`, the device list
//! and `init_device` on each device run; a failure after `initialize` balances it with
//! `deinit_device` and `finalize`. The capabilities are read from which optional functions
//! exist, and a probe stream tells whether streams are real.

use super::negotiate::negotiate;
use super::{plugin_error, DeviceSlot, LoadedPlugin};
use crate::sys::*;
use devstream_core::{Capabilities, CaptureSupport, Error, Result};
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::path::Path;

/// More devices than any machine has: a larger count is a plug-in bug.
const MAX_DEVICES: usize = 4096;

/// Why a load failed, and whether the library is kept loaded (`InitPlugin` accepted a layout,
/// so it may have started work: the file is then never loaded, nor unloaded, again).
#[derive(Debug)]
pub(crate) struct LoadError {
    pub(crate) error: Error,
    pub(crate) kept: bool,
}

impl From<Error> for LoadError {
    fn from(error: Error) -> LoadError {
        LoadError { error, kept: false }
    }
}

impl LoadedPlugin {
    /// Loads and validates the plug-in at `path`. `taken` says whether a device type is
    /// already registered (checked before the plug-in's `initialize` runs).
    pub(crate) fn load(
        path: &Path,
        taken: &dyn Fn(&str) -> Option<String>,
    ) -> std::result::Result<LoadedPlugin, LoadError> {
        LoadedPlugin::open(path, taken)?.start()
    }

    /// Loads and validates the library and its table (nothing but `InitPlugin` has run).
    fn open(
        path: &Path,
        taken: &dyn Fn(&str) -> Option<String>,
    ) -> std::result::Result<LoadedPlugin, LoadError> {
        // SAFETY: loading a library runs its initialisers; loading plug-ins is this crate's
        // purpose, and the user chose the path (or CUSTOM_DEVICE_ROOT).
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| plugin_error(path, format!("cannot load the library: {e}")))?;
        // SAFETY: the symbol's type is the ABI's `void InitPlugin(CustomRuntimeParams*)`.
        let init: InitPluginFn = unsafe { library.get::<InitPluginFn>(INIT_PLUGIN_SYMBOL) }
            .map(|symbol| *symbol)
            .map_err(|e| {
                plugin_error(
                    path,
                    format!("does not export InitPlugin, so it is not a Paddle custom-device plug-in ({e})"),
                )
            })?;
        let accepted = negotiate(path, init)?;
        // InitPlugin accepted a layout and may have started work: from here on the library is
        // never unloaded, whatever fails.
        let library = std::mem::ManuallyDrop::new(library);
        LoadedPlugin::validate(path, taken, accepted, library)
            .map_err(|error| LoadError { error, kept: true })
    }

    /// Runs `initialize`, lists the devices and runs `init_device` on each (the runtime holds
    /// the library undropped: it is never unloaded).
    fn start(mut self) -> std::result::Result<LoadedPlugin, LoadError> {
        let runtime = &mut self;
        if let Some(initialize) = runtime.table.initialize {
            // SAFETY: a table function with no arguments.
            if let Err(error) = runtime.check("initialize", unsafe { initialize() }) {
                return Err(LoadError { error, kept: true });
            }
        }
        if let Err(error) = runtime.start_devices() {
            runtime.finalize();
            return Err(LoadError { error, kept: true });
        }
        runtime.caps = runtime.probe_capabilities();
        Ok(self)
    }

    /// Lists the devices and runs `init_device` on each; on failure the devices already
    /// initialised get their `deinit_device`.
    fn start_devices(&mut self) -> Result<()> {
        self.devices = self.enumerate_devices()?;
        let Some(init_device) = self.table.init_device else {
            return Ok(());
        };
        for slot in 0..self.devices.len() {
            // SAFETY: our device cell; the plug-in may rewrite its id.
            let status = unsafe { init_device(self.device_ptr(slot)) };
            if let Err(error) = self.check("init_device", status) {
                self.deinit_devices(slot);
                return Err(error);
            }
        }
        Ok(())
    }

    /// `deinit_device` on the first `count` devices (errors are logged: this is cleanup).
    fn deinit_devices(&self, count: usize) {
        let Some(deinit_device) = self.table.deinit_device else {
            return;
        };
        for slot in 0..count {
            // SAFETY: a device `init_device` accepted, deinitialised once.
            let status = unsafe { deinit_device(self.device_ptr(slot)) };
            if status != C_SUCCESS {
                tracing::warn!("devstream-plugin: deinit_device: {}", status.name());
            }
        }
    }

    /// Balances a successful `initialize` when the plug-in is not kept (loading failed
    /// after it): `finalize`, errors logged. The library itself stays loaded.
    pub(crate) fn finalize(&self) {
        if let Some(finalize) = self.table.finalize {
            // SAFETY: a table function with no arguments, after a successful `initialize`.
            let status = unsafe { finalize() };
            if status != C_SUCCESS {
                tracing::warn!("devstream-plugin: finalize: {}", status.name());
            }
        }
    }

    /// The same for a runtime whose devices were all initialised.
    pub(crate) fn shut_down(&self) {
        self.deinit_devices(self.devices.len());
        self.finalize();
    }

    fn enumerate_devices(&self) -> Result<Vec<DeviceSlot>> {
        let count_fn = self.table.get_device_count.expect("checked: required");
        let list_fn = self.table.get_device_list.expect("checked: required");
        let mut count = 0usize;
        // SAFETY: a zeroed out-parameter.
        self.check("get_device_count", unsafe { count_fn(&mut count) })?;
        if count > MAX_DEVICES {
            return Err(self.malformed(format!(
                "get_device_count reported {count} devices (more than {MAX_DEVICES})"
            )));
        }
        // Slack beyond `count` entries, in case the plug-in writes more than it reported.
        let mut list = vec![0usize; count + 64];
        // SAFETY: a zeroed list with room for `count` entries and more.
        self.check("get_device_list", unsafe { list_fn(list.as_mut_ptr()) })?;
        list.truncate(count);
        let mut slots: Vec<DeviceSlot> = Vec::with_capacity(count);
        for id in list {
            if slots.iter().any(|s| s.place_id == id) {
                return Err(self.malformed(format!("get_device_list lists device {id} twice")));
            }
            let c_id = c_int::try_from(id).map_err(|_| {
                self.malformed(format!("get_device_list lists device {id}, beyond C int"))
            })?;
            slots.push(DeviceSlot {
                place_id: id,
                cell: Box::new(UnsafeCell::new(C_Device_st { id: c_id })),
            });
        }
        Ok(slots)
    }

    /// Which optional functions exist decides the capabilities; a probe stream tells whether
    /// streams are real (a plug-in that never writes its stream out-parameter has one queue).
    fn probe_capabilities(&self) -> Capabilities {
        let t = &self.table;
        let mut caps = Capabilities::none();
        caps.capture = if self.capture_functions().is_some() {
            CaptureSupport::Native
        } else {
            CaptureSupport::None
        };
        caps.host_funcs = t.stream_add_callback.is_some();
        // A host function in a capture is a callback the plug-in keeps in its graph.
        caps.capture_host_funcs = caps.host_funcs && caps.capture == CaptureSupport::Native;
        caps.flags = caps.host_funcs;
        // Waits on other backends hold later work at a host gate, as flag waits do.
        caps.foreign_waits = caps.flags;
        // Captured, such a wait is a graph callback, as a captured flag wait is.
        caps.capture_foreign_waits = caps.foreign_waits && caps.capture_host_funcs;
        // A host function given a host buffer is ordered against the buffer's copies by those
        // waits: the copies registered after it have their stream wait for it
        // (`crate::buffer`).
        caps.host_func_buffers = caps.foreign_waits;
        caps.buffers = true;
        // devstream's caching pool over the plug-in's allocator (`crate::mempool`).
        caps.memory_pools = true;
        caps.nonblocking_query = t.query_stream.is_some() && t.query_event.is_some();
        // Collectives: the plug-in's xccl functions (read from a 3.3 table only).
        #[cfg(feature = "comm")]
        {
            caps.collectives = crate::comm::missing(t).is_empty();
        }
        caps.concurrent_streams = match (t.create_stream, self.devices.is_empty()) {
            (Some(_), false) => match self.create_stream(0) {
                Ok((handle, _)) => {
                    let _ = self.destroy_stream(0, handle);
                    handle.0 != 0
                }
                Err(_) => true,
            },
            _ => false,
        };
        caps
    }
}
