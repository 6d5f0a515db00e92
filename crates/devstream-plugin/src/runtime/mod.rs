//! A loaded plug-in ([`LoadedPlugin`]): what devstream keeps of it, and the calls into its table.
//!
//! * [`load`]: opening the library, `InitPlugin`, `initialize` and the devices, the
//!   capabilities probed; a failure after `initialize` runs `deinit_device` and `finalize`;
//! * [`negotiate`]: the offers of params and table sizes that tell which `device_ext.h` layout
//!   the plug-in filled;
//! * [`validate`]: the checks on what `InitPlugin` wrote (like Paddle's
//!   `LoadCustomRuntimeLib`, stricter);
//! * [`calls`]: one thin, safe wrapper per stream, event, memory and copy function;
//! * [`capture`]: the graph-capture functions of the 3.3 table.
//!
//! Every wrapper binds the device first, zeroes its out-parameters before the call and turns
//! every status other than `C_SUCCESS` into an [`Error`] naming the function (`query_*` also
//! accept `C_FAILED`, which means "not complete yet", as Paddle reads it).

mod calls;
mod capture;
mod event_handles;
mod load;
mod negotiate;
mod stream_handles;
mod validate;

pub(crate) use capture::CaptureState;
pub(crate) use event_handles::EventHandles;
pub(crate) use stream_handles::StreamHandles;

/// The name the rest of the crate knows [`LoadedPlugin`] by.
pub(crate) type Runtime = LoadedPlugin;

use negotiate::Negotiated;

use crate::sys::*;
use devstream_core::{Capabilities, Error, Place, Result};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;

static NEXT_RUNTIME: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// The device each runtime was last set to on this thread: `(runtime index, device id)`.
    static BOUND: RefCell<Vec<(usize, c_int)>> = const { RefCell::new(Vec::new()) };
    /// How many plug-in calls this thread is inside (see [`plugin_call`]).
    static IN_PLUGIN_CALL: Cell<usize> = const { Cell::new(0) };
}

/// Runs `call`, a call into a plug-in's table, counted as such on this thread for as long as
/// it lasts: a plug-in may call back into devstream from inside any of its functions, on any
/// thread (devstream's notifier and reaper included), and what devstream does there must not
/// wait for a lock another thread holds while that thread waits for this call to return
/// (see [`inside_plugin_call`]). Restored on unwind too.
pub(crate) fn plugin_call<T>(call: impl FnOnce() -> T) -> T {
    struct Inside;
    impl Drop for Inside {
        fn drop(&mut self) {
            IN_PLUGIN_CALL.with(|depth| depth.set(depth.get() - 1));
        }
    }
    IN_PLUGIN_CALL.with(|depth| depth.set(depth.get() + 1));
    let _inside = Inside;
    call()
}

/// Whether the calling thread is inside a call into a plug-in (the plug-in called back into
/// devstream): a submission there never waits for a stream's submission lock that another
/// thread holds, it holds the work on the host for the dispatcher instead
/// (`StreamCore::submit`).
pub(crate) fn inside_plugin_call() -> bool {
    IN_PLUGIN_CALL.with(Cell::get) > 0
}

/// One device of a plug-in: the place id (from `get_device_list`) and the `C_Device_st` the
/// plug-in sees (it may replace the id with a physical one in `init_device`).
struct DeviceSlot {
    place_id: usize,
    cell: Box<UnsafeCell<C_Device_st>>,
}

/// A plug-in's handle passed between threads as an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle(pub(crate) usize);

impl Handle {
    pub(crate) fn stream(self) -> C_Stream {
        self.0 as C_Stream
    }
    pub(crate) fn event(self) -> C_Event {
        self.0 as C_Event
    }
}

/// A loaded, validated plug-in: a Paddle custom runtime devstream calls into through its
/// `C_DeviceInterface` table. Lives until the process exits (like Paddle, devstream never
/// unloads a plug-in: its code may still be running callbacks).
pub(crate) struct LoadedPlugin {
    index: usize,
    pub(crate) device_type: String,
    pub(crate) sub_device_type: Option<String>,
    pub(crate) path: PathBuf,
    pub(crate) version: CustomRuntimeVersion,
    pub(crate) layout: Negotiated,
    pub(crate) caps: Capabilities,
    table: C_DeviceInterface,
    devices: Vec<DeviceSlot>,
    /// The event handles devstream holds, and whether two live events ever shared one.
    pub(crate) event_handles: EventHandles,
    /// The stream handles of live plug-in streams, to tell two streams given one handle.
    pub(crate) stream_handles: StreamHandles,
    /// The buffers handed to `InitPlugin`: kept, since a plug-in may keep pointers to them.
    _interface_allocation: Box<[u64]>,
    _params_allocation: Box<[u64]>,
    /// Never unloaded: once `initialize` may have run, the plug-in's code may still be
    /// running (threads, callbacks) and Paddle never unloads a plug-in either.
    _library: std::mem::ManuallyDrop<libloading::Library>,
}

// SAFETY: the table holds function pointers and the device cells are only written by the
// plug-in during `init_device` (before the runtime is shared) and read afterwards; calling the
// table from several threads is what Paddle does and what the ABI allows.
unsafe impl Send for LoadedPlugin {}
// SAFETY: as above.
unsafe impl Sync for LoadedPlugin {}

debug_some_fields!(LoadedPlugin as "LoadedPlugin" { device_type, path, layout.name });

fn plugin_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::Plugin {
        plugin: path.display().to_string(),
        reason: reason.into(),
    }
}

impl LoadedPlugin {
    /// This runtime's number in the process (tells runtimes apart).
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// The place ids of the plug-in's devices.
    pub(crate) fn device_ids(&self) -> impl Iterator<Item = usize> + '_ {
        self.devices.iter().map(|d| d.place_id)
    }

    /// The slot of a place id.
    pub(crate) fn slot_of(&self, place_id: usize) -> Option<usize> {
        self.devices.iter().position(|d| d.place_id == place_id)
    }

    pub(crate) fn place(&self, slot: usize) -> Place {
        Place::Custom {
            device_type: self.device_type.clone(),
            id: self.devices[slot].place_id,
        }
    }

    pub(crate) fn table(&self) -> &C_DeviceInterface {
        &self.table
    }

    fn device_ptr(&self, slot: usize) -> C_Device {
        self.devices[slot].cell.get()
    }

    fn malformed(&self, reason: String) -> Error {
        Error::Plugin {
            plugin: format!("{} ({})", self.device_type, self.path.display()),
            reason,
        }
    }

    /// `C_SUCCESS` → `Ok`, anything else → `Error::Driver` naming the function.
    pub(crate) fn check(&self, call: &'static str, status: C_Status) -> Result<()> {
        if status == C_SUCCESS {
            return Ok(());
        }
        Err(Error::Driver {
            backend: "plugin",
            call,
            code: i64::from(status.0),
            message: format!("{} plug-in: {}", self.device_type, status.name()),
        })
    }

    /// For `query_*`: `C_SUCCESS` → done, `C_FAILED` → not yet, anything else → an error.
    fn check_query(&self, call: &'static str, status: C_Status) -> Result<bool> {
        match status {
            C_SUCCESS => Ok(true),
            C_FAILED => Ok(false),
            other => self.check(call, other).map(|()| true),
        }
    }

    fn unavailable(&self, function: &str) -> Error {
        self.malformed(format!("the plug-in has no {function}"))
    }

    /// Makes `slot` the current device of the calling thread (once per thread and change).
    pub(crate) fn bind(&self, slot: usize) -> Result<()> {
        // SAFETY: our own cell; the plug-in only writes it in `init_device`.
        let id = unsafe { (*self.device_ptr(slot)).id };
        let bound = BOUND.with(|b| b.borrow().iter().any(|&(r, d)| r == self.index && d == id));
        if bound {
            return Ok(());
        }
        let set_device = self.table.set_device.expect("checked: required");
        // SAFETY: a valid device pointer.
        let status = plugin_call(|| unsafe { set_device(self.device_ptr(slot)) });
        self.check("set_device", status)?;
        BOUND.with(|b| {
            let mut b = b.borrow_mut();
            b.retain(|&(r, _)| r != self.index);
            b.push((self.index, id));
        });
        Ok(())
    }
}

/// A copy direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyKind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

/// One copy of `len` bytes from address `src` to address `dst`, in the direction `kind`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawCopy {
    pub(crate) kind: CopyKind,
    pub(crate) dst: usize,
    pub(crate) src: usize,
    pub(crate) len: usize,
}
