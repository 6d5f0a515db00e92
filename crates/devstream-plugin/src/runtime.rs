//! A loaded plug-in: loading and validation (like Paddle's `LoadCustomRuntimeLib`, stricter),
//! and one thin, safe wrapper per table function.
//!
//! Every wrapper zeroes its out-parameters before the call and turns every status other than
//! `C_SUCCESS` into an [`Error`] naming the function (`query_*` also accept `C_FAILED`, which
//! means "not complete yet", as Paddle reads it).

use crate::sys::*;
use devstream_core::{Capabilities, CaptureSupport, Error, Place, Result};
use std::cell::{RefCell, UnsafeCell};
use std::ffi::{c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// More devices than any machine has: a larger count is a plug-in bug.
const MAX_DEVICES: usize = 4096;

/// The functions Paddle requires of every plug-in (devstream requires the same).
pub(crate) const REQUIRED: [&str; 10] = [
    "set_device",
    "get_device",
    "create_event",
    "record_event",
    "destroy_event",
    "synchronize_event",
    "device_memory_allocate",
    "device_memory_deallocate",
    "get_device_count",
    "get_device_list",
];

static NEXT_RUNTIME: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// The device each runtime was last set to on this thread: `(runtime index, device id)`.
    static BOUND: RefCell<Vec<(usize, c_int)>> = const { RefCell::new(Vec::new()) };
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

/// A loaded, validated plug-in. Lives until the process exits (like Paddle, devstream never
/// unloads a plug-in: its code may still be running callbacks).
pub(crate) struct Runtime {
    index: usize,
    pub(crate) device_type: String,
    pub(crate) sub_device_type: Option<String>,
    pub(crate) path: PathBuf,
    pub(crate) version: CustomRuntimeVersion,
    pub(crate) layout: Negotiated,
    pub(crate) caps: Capabilities,
    table: C_DeviceInterface,
    devices: Vec<DeviceSlot>,
    /// The buffers handed to `InitPlugin`: kept, since a plug-in may keep pointers to them.
    _interface_allocation: Box<[u64]>,
    _params_allocation: Box<[u64]>,
    /// Never unloaded: once `initialize` may have run, the plug-in's code may still be
    /// running (threads, callbacks) and Paddle never unloads a plug-in either.
    _library: std::mem::ManuallyDrop<libloading::Library>,
}

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

// SAFETY: the table holds function pointers and the device cells are only written by the
// plug-in during `init_device` (before the runtime is shared) and read afterwards; calling the
// table from several threads is what Paddle does and what the ABI allows.
unsafe impl Send for Runtime {}
// SAFETY: as above.
unsafe impl Sync for Runtime {}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("device_type", &self.device_type)
            .field("path", &self.path)
            .field("layout", &self.layout.name)
            .finish_non_exhaustive()
    }
}

fn plugin_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::Plugin {
        plugin: path.display().to_string(),
        reason: reason.into(),
    }
}

/// The highest written byte + 1 of a zero-initialised buffer.
fn written_extent(words: &[u64]) -> usize {
    for (index, word) in words.iter().enumerate().rev() {
        if let Some(last) = word.to_ne_bytes().iter().rposition(|byte| *byte != 0) {
            return index * 8 + last + 1;
        }
    }
    0
}

/// What devstream knows about the table a plug-in filled, from the offer it accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// What [`crate::PluginInfo::layout`] reports.
    pub(crate) name: &'static str,
    /// The layout, when the accepted offer identifies the table exactly.
    pub(crate) exact: Option<AbiLayout>,
    /// The most bytes of the table the plug-in may have filled.
    pub(crate) max_interface_size: usize,
}

impl Negotiated {
    /// Bytes of the plug-in's table devstream copies and reads: a field beyond
    /// [`STABLE_PREFIX_SIZE`] only from a table known to be exactly the 3.3 layout.
    pub(crate) fn readable(&self) -> usize {
        self.exact
            .map_or(STABLE_PREFIX_SIZE, |layout| layout.readable)
    }
}

/// One call of `InitPlugin`: the two sizes presented, and what an acceptance tells.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Offer {
    pub(crate) params_size: usize,
    pub(crate) interface_size: usize,
    pub(crate) negotiated: Negotiated,
}

/// A size no `CustomRuntimeParams` or `C_DeviceInterface` has: an offer presenting it for one
/// of the two can be accepted only through the other.
const NO_SIZE: usize = 0;

/// The offers, in order. Paddle's `PADDLE_CUSTOM_RUNTIME_CHECK_VERSION` accepts when *either*
/// size matches the plug-in's header (`&&` in its refusal test), and every 3.x release has
/// 96-byte params: a plug-in that accepts Paddle 3.3's own pair (96, 1128) may have filled a
/// 3.0, 3.1 or 3.2 table. So devstream first asks questions whose acceptance identifies the
/// table:
///
/// 1. params size 0 and the whole 16 KiB buffer as the table: accepted only by a plug-in that
///    checks neither size (or only "at least"): its table is not identified;
/// 2. params size 0 and each known table size, newest (largest) first: accepted (with
///    Paddle's check) only by a plug-in whose table is exactly that size; a plug-in that
///    fills only what fits the host's table (accepting any size up to its own) gets the
///    newest layout it knows;
/// 3. each params size (88, 96) with the 16 KiB table: a plug-in that checks the params size
///    only: the family is known (2.x or 3.x), the table is not;
/// 4. the exact pairs, newest first: a plug-in that needs both sizes to match and refused
///    the params size with a table of any size in step 3.
///
/// Only an offer of steps 2 and 4 identifies the table; devstream reads beyond the stable
/// prefix only when that table is the 3.3 one. Every refusal must leave both buffers as they
/// were before the next offer is made.
pub(crate) fn offers() -> Vec<Offer> {
    let unidentified = |name, max_interface_size| Negotiated {
        name,
        exact: None,
        max_interface_size,
    };
    let exact = |layout: AbiLayout| Negotiated {
        name: layout.name,
        exact: Some(layout),
        max_interface_size: layout.interface_size,
    };
    let mut offers = vec![Offer {
        params_size: NO_SIZE,
        interface_size: INTERFACE_ALLOCATION,
        negotiated: unidentified(
            "unidentified (InitPlugin checks neither size)",
            MAX_KNOWN_INTERFACE_SIZE,
        ),
    }];
    offers.extend(KNOWN_LAYOUTS.iter().rev().map(|&layout| Offer {
        params_size: NO_SIZE,
        interface_size: layout.interface_size,
        negotiated: exact(layout),
    }));
    offers.push(Offer {
        params_size: PARAMS_SIZE_2,
        interface_size: INTERFACE_ALLOCATION,
        negotiated: unidentified(
            "Paddle 2.x (table size not identified)",
            LAYOUT_PADDLE_2_6.interface_size,
        ),
    });
    offers.push(Offer {
        params_size: PARAMS_SIZE_3,
        interface_size: INTERFACE_ALLOCATION,
        negotiated: unidentified(
            "Paddle 3.x (table size not identified)",
            MAX_KNOWN_INTERFACE_SIZE,
        ),
    });
    offers.extend(KNOWN_LAYOUTS.iter().rev().map(|&layout| Offer {
        params_size: layout.params_size,
        interface_size: layout.interface_size,
        negotiated: exact(layout),
    }));
    offers
}

/// What `InitPlugin` wrote, with the offer it accepted.
struct Accepted {
    negotiated: Negotiated,
    params: Box<[u64]>,
    interface: Box<[u64]>,
}

/// Makes each offer in turn until the plug-in accepts one (writes its version).
/// `InitPlugin` is called again only after a refusal that changed nothing (Paddle's
/// `PADDLE_CUSTOM_RUNTIME_CHECK_VERSION` returns before touching anything), so a plug-in's
/// entry point does its work at most once.
fn negotiate(path: &Path, init: InitPluginFn) -> Result<Accepted> {
    let offers = offers();
    for offer in &offers {
        let mut params = vec![0u64; PARAMS_ALLOCATION / 8].into_boxed_slice();
        let mut interface = vec![0u64; INTERFACE_ALLOCATION / 8].into_boxed_slice();
        let params_ptr = params.as_mut_ptr().cast::<CustomRuntimeParams>();
        let interface_ptr = interface.as_mut_ptr().cast::<C_DeviceInterface>();
        // SAFETY: both buffers are zeroed, 8-byte aligned and far larger than the structs.
        unsafe {
            (*interface_ptr).size = offer.interface_size;
            (*params_ptr).size = offer.params_size;
            (*params_ptr).interface = interface_ptr;
        }
        let offered = (params.clone(), interface.clone());
        // SAFETY: `init` is the plug-in's `InitPlugin`; it gets params and a table with room
        // well beyond every known layout (the sizes presented never exceed the buffers).
        unsafe { init(params_ptr) };
        // SAFETY: reading back our own buffer.
        let version = unsafe { (*params_ptr).version };
        if version == CustomRuntimeVersion::default()
            && (offered.0 != params || offered.1 != interface)
        {
            // Paddle's check refuses before touching anything; a plug-in that wrote and then
            // refused may have done more (allocated, started threads): not offered again.
            return Err(plugin_error(
                path,
                format!(
                    "InitPlugin wrote into the buffers without accepting the offer of \
                     {}-byte params and a {}-byte table (no runtime version); a refusal must \
                     change nothing, so it is not called again",
                    offer.params_size, offer.interface_size
                ),
            ));
        }
        if version != CustomRuntimeVersion::default() {
            // SAFETY: as above.
            let kept_interface = unsafe { (*params_ptr).interface };
            if kept_interface != interface_ptr {
                return Err(plugin_error(
                    path,
                    "InitPlugin replaced CustomRuntimeParams::interface with a table of its own; \
                     the plug-in must fill the table the host provides (as Paddle requires)",
                ));
            }
            return Ok(Accepted {
                negotiated: offer.negotiated,
                params,
                interface,
            });
        }
    }
    let known: Vec<String> = KNOWN_LAYOUTS
        .iter()
        .map(|l| {
            format!(
                "{} ({}-byte params, {}-byte table)",
                l.name, l.params_size, l.interface_size
            )
        })
        .collect();
    Err(plugin_error(
        path,
        format!(
            "InitPlugin accepted none of the known device_ext.h layouts (wrote no runtime \
             version in {} offers covering {}): it was built against a header devstream does \
             not know",
            offers.len(),
            known.join(", ")
        ),
    ))
}

fn read_c_string(path: &Path, what: &str, ptr: *const std::ffi::c_char) -> Result<Option<String>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the plug-in wrote a pointer to a NUL-terminated static string (the ABI's
    // contract for `device_type` / `sub_device_type`).
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str()
        .map(|s| Some(s.to_owned()))
        .map_err(|_| plugin_error(path, format!("{what} is not UTF-8: {text:?}")))
}

impl Runtime {
    /// Loads and validates the plug-in at `path`. `taken` says whether a device type is
    /// already registered (checked before the plug-in's `initialize` runs).
    pub(crate) fn load(
        path: &Path,
        taken: &dyn Fn(&str) -> Option<String>,
    ) -> std::result::Result<Runtime, LoadError> {
        Runtime::open(path, taken)?.start()
    }

    /// Loads and validates the library and its table (nothing but `InitPlugin` has run).
    fn open(
        path: &Path,
        taken: &dyn Fn(&str) -> Option<String>,
    ) -> std::result::Result<Runtime, LoadError> {
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
        Runtime::validate(path, taken, accepted, library)
            .map_err(|error| LoadError { error, kept: true })
    }

    /// Validates what `InitPlugin` wrote; builds the runtime (its `initialize` not yet run).
    fn validate(
        path: &Path,
        taken: &dyn Fn(&str) -> Option<String>,
        accepted: Accepted,
        library: std::mem::ManuallyDrop<libloading::Library>,
    ) -> Result<Runtime> {
        let params_ptr = accepted.params.as_ptr().cast::<CustomRuntimeParams>();
        // SAFETY: our own buffer, written by the plug-in.
        let params = unsafe { *params_ptr };

        let layout = accepted.negotiated;
        let table_extent = written_extent(&accepted.interface);
        if table_extent > layout.max_interface_size {
            return Err(plugin_error(
                path,
                format!(
                    "InitPlugin filled the function table up to byte {table_extent}, beyond the \
                     {} table it accepted ({} bytes at most): it was built against a newer \
                     device_ext.h than devstream knows",
                    layout.name, layout.max_interface_size
                ),
            ));
        }
        let params_extent = written_extent(&accepted.params);
        if params_extent > PARAMS_SIZE_3 {
            return Err(plugin_error(
                path,
                format!(
                    "InitPlugin wrote CustomRuntimeParams up to byte {params_extent}, beyond the \
                     {PARAMS_SIZE_3}-byte struct of every known layout ({})",
                    layout.name
                ),
            ));
        }

        let version = params.version;
        if version.major != RUNTIME_MAJOR_VERSION
            || version.minor != RUNTIME_MINOR_VERSION
            || version.patch < RUNTIME_PATCH_VERSION
        {
            return Err(plugin_error(
                path,
                format!(
                    "reports custom runtime version {}.{}.{}; devstream speaks {}.{}.{} \
                     (0.1.x with x >= 1)",
                    version.major,
                    version.minor,
                    version.patch,
                    RUNTIME_MAJOR_VERSION,
                    RUNTIME_MINOR_VERSION,
                    RUNTIME_PATCH_VERSION
                ),
            ));
        }

        let device_type =
            read_c_string(path, "device_type", params.device_type)?.ok_or_else(|| {
                plugin_error(
                    path,
                    "InitPlugin left CustomRuntimeParams::device_type null",
                )
            })?;
        Place::custom(&device_type, 0).map_err(|e| {
            plugin_error(
                path,
                format!("device type {device_type:?} cannot name a place: {e}"),
            )
        })?;
        let sub_device_type = read_c_string(path, "sub_device_type", params.sub_device_type)?;

        let mut table = C_DeviceInterface::zeroed();
        let readable = layout.readable();
        assert!(readable <= std::mem::size_of::<C_DeviceInterface>());
        // SAFETY: copies the part of the plug-in's table whose layout is known (the stable
        // prefix every layout shares, or the whole table of an exactly identified 3.3 plug-in)
        // into ours; the source buffer is INTERFACE_ALLOCATION bytes, ours is
        // `size_of::<C_DeviceInterface>()` >= `readable` bytes; the rest of ours stays null.
        unsafe {
            std::ptr::copy_nonoverlapping(
                accepted.interface.as_ptr().cast::<u8>(),
                (&mut table as *mut C_DeviceInterface).cast::<u8>(),
                readable,
            );
        }
        let missing = missing_required(&table);
        if !missing.is_empty() {
            return Err(plugin_error(
                path,
                format!(
                    "device type {device_type}: missing required function pointer(s): {}",
                    missing.join(", ")
                ),
            ));
        }
        if let Some(owner) = taken(&device_type) {
            return Err(plugin_error(
                path,
                format!("device type {device_type:?} is already registered (by {owner})"),
            ));
        }

        Ok(Runtime {
            index: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            device_type,
            sub_device_type,
            path: path.to_owned(),
            version,
            layout,
            caps: Capabilities::none(),
            table,
            devices: Vec::new(),
            _interface_allocation: accepted.interface,
            _params_allocation: accepted.params,
            _library: library,
        })
    }

    /// Runs `initialize`, lists the devices and runs `init_device` on each (the runtime holds
    /// the library undropped: it is never unloaded).
    fn start(mut self) -> std::result::Result<Runtime, LoadError> {
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
        caps.buffers = true;
        caps.nonblocking_query = t.query_stream.is_some() && t.query_event.is_some();
        // Collectives: the plug-in's xccl functions (read from a 3.3 table only).
        #[cfg(feature = "comm")]
        {
            caps.collectives = crate::comm::missing(t).is_empty();
        }
        caps.concurrent_streams = match (t.create_stream, self.devices.is_empty()) {
            (Some(_), false) => match self.create_stream(0) {
                Ok(handle) => {
                    let _ = self.destroy_stream(0, handle);
                    handle.0 != 0
                }
                Err(_) => true,
            },
            _ => false,
        };
        caps
    }

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
        self.check("set_device", unsafe { set_device(self.device_ptr(slot)) })?;
        BOUND.with(|b| {
            let mut b = b.borrow_mut();
            b.retain(|&(r, _)| r != self.index);
            b.push((self.index, id));
        });
        Ok(())
    }

    pub(crate) fn create_stream(&self, slot: usize) -> Result<Handle> {
        let Some(create) = self.table.create_stream else {
            return Ok(Handle(0));
        };
        self.bind(slot)?;
        let mut stream: C_Stream = std::ptr::null_mut();
        // SAFETY: a valid device and a zeroed out-parameter.
        self.check("create_stream", unsafe {
            create(self.device_ptr(slot), &mut stream)
        })?;
        Ok(Handle(stream as usize))
    }

    pub(crate) fn destroy_stream(&self, slot: usize, stream: Handle) -> Result<()> {
        let Some(destroy) = self.table.destroy_stream else {
            return Ok(());
        };
        self.bind(slot)?;
        // SAFETY: a stream this runtime created (or null), destroyed once.
        self.check("destroy_stream", unsafe {
            destroy(self.device_ptr(slot), stream.stream())
        })
    }

    /// `Ok(true)` when the stream's work is complete. Without `query_stream` it synchronizes
    /// and answers true, as Paddle does.
    pub(crate) fn query_stream(&self, slot: usize, stream: Handle) -> Result<bool> {
        let Some(query) = self.table.query_stream else {
            self.synchronize_stream(slot, stream)?;
            return Ok(true);
        };
        self.bind(slot)?;
        // SAFETY: a valid device and stream.
        self.check_query("query_stream", unsafe {
            query(self.device_ptr(slot), stream.stream())
        })
    }

    /// Without `synchronize_stream`, records an event and synchronizes that (both required).
    pub(crate) fn synchronize_stream(&self, slot: usize, stream: Handle) -> Result<()> {
        self.bind(slot)?;
        if let Some(synchronize) = self.table.synchronize_stream {
            // SAFETY: a valid device and stream.
            return self.check("synchronize_stream", unsafe {
                synchronize(self.device_ptr(slot), stream.stream())
            });
        }
        let event = self.create_event(slot)?;
        let result = self
            .record_event(slot, stream, event)
            .and_then(|()| self.synchronize_event(slot, event));
        let destroyed = self.destroy_event(slot, event);
        result.and(destroyed)
    }

    pub(crate) fn add_callback(
        &self,
        slot: usize,
        stream: Handle,
        callback: C_Callback,
        user_data: *mut c_void,
    ) -> Result<()> {
        let add = self
            .table
            .stream_add_callback
            .ok_or_else(|| self.unavailable("stream_add_callback"))?;
        self.bind(slot)?;
        // SAFETY: a valid device and stream; the callback and its data follow the ABI.
        let status = unsafe { add(self.device_ptr(slot), stream.stream(), callback, user_data) };
        if status == C_WARNING {
            // "An asynchronous interface is actually synchronous": the callback ran (or is
            // queued) as asked. Who owns its data is decided by the caller, not by the status.
            return Ok(());
        }
        self.check("stream_add_callback", status)
    }

    pub(crate) fn create_event(&self, slot: usize) -> Result<Handle> {
        let create = self.table.create_event.expect("checked: required");
        self.bind(slot)?;
        let mut event: C_Event = std::ptr::null_mut();
        // SAFETY: a valid device and a zeroed out-parameter.
        self.check("create_event", unsafe {
            create(self.device_ptr(slot), &mut event)
        })?;
        Ok(Handle(event as usize))
    }

    pub(crate) fn record_event(&self, slot: usize, stream: Handle, event: Handle) -> Result<()> {
        let record = self.table.record_event.expect("checked: required");
        self.bind(slot)?;
        // SAFETY: a valid device, stream and event.
        self.check("record_event", unsafe {
            record(self.device_ptr(slot), stream.stream(), event.event())
        })
    }

    pub(crate) fn destroy_event(&self, slot: usize, event: Handle) -> Result<()> {
        let destroy = self.table.destroy_event.expect("checked: required");
        self.bind(slot)?;
        // SAFETY: an event this runtime created, destroyed once.
        self.check("destroy_event", unsafe {
            destroy(self.device_ptr(slot), event.event())
        })
    }

    /// Without `query_event`, synchronizes and answers true, as Paddle does.
    pub(crate) fn query_event(&self, slot: usize, event: Handle) -> Result<bool> {
        let Some(query) = self.table.query_event else {
            self.synchronize_event(slot, event)?;
            return Ok(true);
        };
        self.bind(slot)?;
        // SAFETY: a valid device and event.
        self.check_query("query_event", unsafe {
            query(self.device_ptr(slot), event.event())
        })
    }

    pub(crate) fn synchronize_event(&self, slot: usize, event: Handle) -> Result<()> {
        let synchronize = self.table.synchronize_event.expect("checked: required");
        self.bind(slot)?;
        // SAFETY: a valid device and event.
        self.check("synchronize_event", unsafe {
            synchronize(self.device_ptr(slot), event.event())
        })
    }

    /// Without `stream_wait_event` the host waits for the event instead (Paddle skips the
    /// wait, which loses the ordering).
    pub(crate) fn stream_wait_event(
        &self,
        slot: usize,
        stream: Handle,
        event: Handle,
    ) -> Result<()> {
        let Some(wait) = self.table.stream_wait_event else {
            return self.synchronize_event(slot, event);
        };
        self.bind(slot)?;
        // SAFETY: a valid device, stream and event.
        self.check("stream_wait_event", unsafe {
            wait(self.device_ptr(slot), stream.stream(), event.event())
        })
    }

    /// Device memory; `C_FAILED` (resource exhausted) is `Error::OutOfMemory`.
    pub(crate) fn allocate(&self, slot: usize, len: usize) -> Result<usize> {
        let t = &self.table;
        let allocate = t.device_memory_allocate.expect("checked: required");
        let deallocate = t.device_memory_deallocate.expect("checked: required");
        self.allocate_with("device_memory_allocate", allocate, deallocate, slot, len)
    }

    pub(crate) fn deallocate(&self, slot: usize, ptr: usize, len: usize) -> Result<()> {
        let deallocate = self
            .table
            .device_memory_deallocate
            .expect("checked: required");
        self.bind(slot)?;
        // SAFETY: memory this runtime allocated with this size, freed once.
        self.check("device_memory_deallocate", unsafe {
            deallocate(self.device_ptr(slot), ptr as *mut c_void, len)
        })
    }

    /// Pinned host memory, when the plug-in has `host_memory_allocate`.
    pub(crate) fn host_allocate(&self, slot: usize, len: usize) -> Option<Result<usize>> {
        let allocate = self.table.host_memory_allocate?;
        let deallocate = self.table.host_memory_deallocate?;
        Some(self.allocate_with("host_memory_allocate", allocate, deallocate, slot, len))
    }

    pub(crate) fn host_deallocate(&self, slot: usize, ptr: usize, len: usize) -> Result<()> {
        let deallocate = self
            .table
            .host_memory_deallocate
            .ok_or_else(|| self.unavailable("host_memory_deallocate"))?;
        self.bind(slot)?;
        // SAFETY: host memory this runtime allocated with this size, freed once.
        self.check("host_memory_deallocate", unsafe {
            deallocate(self.device_ptr(slot), ptr as *mut c_void, len)
        })
    }

    /// One allocation. The status and the pointer decide together: `C_SUCCESS` or
    /// `C_WARNING` with a pointer is an allocation (a warning is not a failure), and with a
    /// null pointer it is `OutOfMemory` (Paddle's own convention: its `CustomAllocator` reads
    /// a null pointer from a successful allocate as exhaustion); a failure that still wrote a
    /// pointer gives it back through the plug-in's own deallocate (so it does not leak);
    /// `C_FAILED` is `OutOfMemory`, other failures `Driver`.
    fn allocate_with(
        &self,
        call: &'static str,
        allocate: unsafe extern "C" fn(C_Device, *mut *mut c_void, usize) -> C_Status,
        deallocate: unsafe extern "C" fn(C_Device, *mut c_void, usize) -> C_Status,
        slot: usize,
        len: usize,
    ) -> Result<usize> {
        self.bind(slot)?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid device and a zeroed out-parameter.
        let status = unsafe { allocate(self.device_ptr(slot), &mut ptr, len) };
        if status == C_SUCCESS || status == C_WARNING {
            if ptr.is_null() {
                return Err(Error::OutOfMemory {
                    place: self.place(slot),
                    bytes: len,
                });
            }
            return Ok(ptr as usize);
        }
        if !ptr.is_null() {
            // SAFETY: the pointer the plug-in just wrote for this size; nothing uses it.
            let freed = unsafe { deallocate(self.device_ptr(slot), ptr, len) };
            if freed != C_SUCCESS {
                tracing::warn!(
                    "devstream-plugin: freeing the pointer {call} wrote before answering {}: {}",
                    status.name(),
                    freed.name()
                );
            }
        }
        if status == C_FAILED {
            return Err(Error::OutOfMemory {
                place: self.place(slot),
                bytes: len,
            });
        }
        Err(self
            .check(call, status)
            .err()
            .unwrap_or_else(|| self.malformed(format!("{call} answered {}", status.name()))))
    }

    /// A copy in stream order: the plug-in's asynchronous copy, or (without one) the stream
    /// synchronized and the synchronous copy.
    pub(crate) fn copy(
        &self,
        kind: CopyKind,
        slot: usize,
        stream: Handle,
        dst: usize,
        src: usize,
        len: usize,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let t = &self.table;
        let (async_call, async_fn, sync_call, sync_fn) = match kind {
            CopyKind::HostToDevice => (
                "async_memory_copy_h2d",
                t.async_memory_copy_h2d,
                "memory_copy_h2d",
                t.memory_copy_h2d,
            ),
            CopyKind::DeviceToHost => (
                "async_memory_copy_d2h",
                t.async_memory_copy_d2h,
                "memory_copy_d2h",
                t.memory_copy_d2h,
            ),
            CopyKind::DeviceToDevice => (
                "async_memory_copy_d2d",
                t.async_memory_copy_d2d,
                "memory_copy_d2d",
                t.memory_copy_d2d,
            ),
        };
        self.bind(slot)?;
        if let Some(copy) = async_fn {
            // SAFETY: valid ranges kept alive until the copy completes (the callers track it).
            return self.check(async_call, unsafe {
                copy(
                    self.device_ptr(slot),
                    stream.stream(),
                    dst as *mut c_void,
                    src as *const c_void,
                    len,
                )
            });
        }
        let copy = sync_fn.ok_or_else(|| self.unavailable(async_call))?;
        self.synchronize_stream(slot, stream)?;
        // SAFETY: valid ranges; the stream's earlier work is complete.
        self.check(sync_call, unsafe {
            copy(
                self.device_ptr(slot),
                dst as *mut c_void,
                src as *const c_void,
                len,
            )
        })
    }

    /// Whether copies of `kind` exist at all.
    pub(crate) fn has_copy(&self, kind: CopyKind) -> bool {
        let t = &self.table;
        match kind {
            CopyKind::HostToDevice => {
                t.async_memory_copy_h2d.is_some() || t.memory_copy_h2d.is_some()
            }
            CopyKind::DeviceToHost => {
                t.async_memory_copy_d2h.is_some() || t.memory_copy_d2h.is_some()
            }
            CopyKind::DeviceToDevice => {
                t.async_memory_copy_d2d.is_some() || t.memory_copy_d2d.is_some()
            }
        }
    }
}

/// The graph-capture functions of a plug-in known to have filled the Paddle 3.3 table.
#[derive(Clone, Copy)]
pub(crate) struct CaptureFns {
    begin: unsafe extern "C" fn(C_Device, C_Stream, C_StreamCaptureMode) -> C_Status,
    end: unsafe extern "C" fn(C_Device, C_Stream, *mut C_CudaGraph) -> C_Status,
    instantiate: unsafe extern "C" fn(
        *mut C_GraphExec,
        *mut C_CudaGraph,
        *mut *mut c_void,
        *mut std::ffi::c_char,
        usize,
    ) -> C_Status,
    launch: unsafe extern "C" fn(C_Device, C_GraphExec, C_Stream) -> C_Status,
    destroy_graph: unsafe extern "C" fn(C_CudaGraph) -> C_Status,
    destroy_exec: unsafe extern "C" fn(C_GraphExec) -> C_Status,
    info: unsafe extern "C" fn(
        C_Device,
        C_Stream,
        *mut C_StreamCaptureStatus,
        *mut std::ffi::c_ulonglong,
        *mut C_CudaGraph,
        *mut C_CudaGraphNode,
        *mut *mut c_void,
        *mut usize,
    ) -> C_Status,
}

/// Where a plug-in stream's capture stands (`cuda_stream_capture_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CaptureState {
    None,
    /// Capturing into the capture with this id.
    Active(u64),
    /// Its capture was invalidated (it must still be ended).
    Invalidated(u64),
}

/// Bytes of the log buffer handed to `cuda_graph_instantiate`.
const INSTANTIATE_LOG: usize = 512;

impl Runtime {
    /// The capture functions, when the table is known to be the 3.3 one and has all that
    /// devstream needs (begin, end, instantiate, launch, both destroys, capture info).
    pub(crate) fn capture_functions(&self) -> Option<CaptureFns> {
        if self.layout.exact != Some(LAYOUT_PADDLE_3_3) {
            return None;
        }
        let t = &self.table;
        Some(CaptureFns {
            begin: t.cuda_stream_begin_capture?,
            end: t.cuda_stream_end_captrue?,
            instantiate: t.cuda_graph_instantiate?,
            launch: t.cuda_graph_launch?,
            destroy_graph: t.cuda_graph_destroy?,
            destroy_exec: t.cuda_graph_exec_destroy?,
            info: t.cuda_stream_capture_info?,
        })
    }

    fn capture_fns(&self, op: &'static str, slot: usize) -> Result<CaptureFns> {
        self.capture_functions()
            .ok_or_else(|| Error::unsupported(op, &self.place(slot)))
    }

    /// `cuda_stream_begin_capture`; a refusal is `Error::Capture`.
    pub(crate) fn begin_capture(
        &self,
        slot: usize,
        stream: Handle,
        mode: C_StreamCaptureMode,
    ) -> Result<()> {
        let fns = self.capture_fns("begin_capture", slot)?;
        self.bind(slot)?;
        // SAFETY: a valid device and stream; the mode is one of the header's values.
        let status = unsafe { (fns.begin)(self.device_ptr(slot), stream.stream(), mode) };
        self.check_capture("begin_capture", "cuda_stream_begin_capture", status)
    }

    /// `cuda_stream_end_captrue`: the captured graph; a refusal is `Error::Capture`.
    pub(crate) fn end_capture(&self, slot: usize, stream: Handle) -> Result<Handle> {
        let fns = self.capture_fns("end_capture", slot)?;
        self.bind(slot)?;
        let mut graph: C_CudaGraph = std::ptr::null_mut();
        // SAFETY: a valid device and stream, a zeroed out-parameter.
        let status = unsafe { (fns.end)(self.device_ptr(slot), stream.stream(), &mut graph) };
        self.check_capture("end_capture", "cuda_stream_end_captrue", status)?;
        Ok(Handle(graph as usize))
    }

    /// `cuda_graph_instantiate`: the executable graph.
    pub(crate) fn instantiate(&self, slot: usize, graph: Handle) -> Result<Handle> {
        let fns = self.capture_fns("end_capture", slot)?;
        let mut exec: C_GraphExec = std::ptr::null_mut();
        let mut graph: C_CudaGraph = graph.0 as C_CudaGraph;
        let mut error_node: *mut c_void = std::ptr::null_mut();
        let mut log = [0 as std::ffi::c_char; INSTANTIATE_LOG];
        // SAFETY: zeroed out-parameters, the graph this runtime's end_capture made and a log
        // buffer of the size passed.
        let status = unsafe {
            (fns.instantiate)(
                &mut exec,
                &mut graph,
                &mut error_node,
                log.as_mut_ptr(),
                INSTANTIATE_LOG,
            )
        };
        if status != C_SUCCESS {
            log[INSTANTIATE_LOG - 1] = 0;
            // SAFETY: a NUL-terminated buffer (its last byte is NUL).
            let text = unsafe { CStr::from_ptr(log.as_ptr()) }.to_string_lossy();
            return Err(Error::capture(
                "end_capture",
                format!(
                    "{} plug-in: cuda_graph_instantiate answered {} {text}",
                    self.device_type,
                    status.name()
                ),
            ));
        }
        Ok(Handle(exec as usize))
    }

    /// `cuda_graph_launch`.
    pub(crate) fn graph_launch(&self, slot: usize, exec: Handle, stream: Handle) -> Result<()> {
        let fns = self.capture_fns("Graph::launch", slot)?;
        self.bind(slot)?;
        // SAFETY: a valid device, an executable graph of this runtime and a stream.
        self.check("cuda_graph_launch", unsafe {
            (fns.launch)(
                self.device_ptr(slot),
                exec.0 as C_GraphExec,
                stream.stream(),
            )
        })
    }

    /// `cuda_graph_exec_destroy` then `cuda_graph_destroy` (either handle may be null).
    pub(crate) fn destroy_graph(&self, slot: usize, graph: Handle, exec: Handle) -> Result<()> {
        let fns = self.capture_fns("Graph::drop", slot)?;
        let mut result = Ok(());
        if exec.0 != 0 {
            // SAFETY: an executable graph of this runtime, destroyed once, no launch pending.
            result = self.check("cuda_graph_exec_destroy", unsafe {
                (fns.destroy_exec)(exec.0 as C_GraphExec)
            });
        }
        if graph.0 != 0 {
            // SAFETY: a graph of this runtime, destroyed once.
            let destroyed = self.check("cuda_graph_destroy", unsafe {
                (fns.destroy_graph)(graph.0 as C_CudaGraph)
            });
            result = result.and(destroyed);
        }
        result
    }

    /// `cuda_stream_capture_info`: whether `stream` is capturing, and into which capture.
    pub(crate) fn capture_state(&self, slot: usize, stream: Handle) -> Result<CaptureState> {
        let fns = self.capture_fns("is_capturing", slot)?;
        self.bind(slot)?;
        let mut status: C_StreamCaptureStatus = C_StreamCaptureStatusNone;
        let mut id: std::ffi::c_ulonglong = 0;
        let mut graph: C_CudaGraph = std::ptr::null_mut();
        let mut dependencies: C_CudaGraphNode = std::ptr::null_mut();
        let mut edges: *mut c_void = std::ptr::null_mut();
        let mut count = 0usize;
        // SAFETY: a valid device and stream, zeroed out-parameters.
        self.check("cuda_stream_capture_info", unsafe {
            (fns.info)(
                self.device_ptr(slot),
                stream.stream(),
                &mut status,
                &mut id,
                &mut graph,
                &mut dependencies,
                &mut edges,
                &mut count,
            )
        })?;
        Ok(if status == C_StreamCaptureStatusActive {
            CaptureState::Active(id)
        } else if status == C_StreamCaptureStatusInvalidated {
            CaptureState::Invalidated(id)
        } else {
            CaptureState::None
        })
    }

    /// A capture call's status: `C_SUCCESS` → `Ok`, anything else → `Error::Capture`.
    fn check_capture(&self, op: &'static str, call: &str, status: C_Status) -> Result<()> {
        if status == C_SUCCESS {
            return Ok(());
        }
        Err(Error::capture(
            op,
            format!(
                "{} plug-in: {call} answered {}",
                self.device_type,
                status.name()
            ),
        ))
    }
}

/// A copy direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyKind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

fn missing_required(table: &C_DeviceInterface) -> Vec<&'static str> {
    let present = [
        table.set_device.is_some(),
        table.get_device.is_some(),
        table.create_event.is_some(),
        table.record_event.is_some(),
        table.destroy_event.is_some(),
        table.synchronize_event.is_some(),
        table.device_memory_allocate.is_some(),
        table.device_memory_deallocate.is_some(),
        table.get_device_count.is_some(),
        table.get_device_list.is_some(),
    ];
    REQUIRED
        .iter()
        .zip(present)
        .filter(|(_, present)| !present)
        .map(|(name, _)| *name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_extent_finds_the_last_nonzero_byte() {
        assert_eq!(written_extent(&[0, 0]), 0);
        assert_eq!(written_extent(&[1, 0]), 1);
        assert_eq!(
            written_extent(&[0, u64::from_ne_bytes([0, 0, 7, 0, 0, 0, 0, 0])]),
            11
        );
        assert_eq!(written_extent(&[0, u64::MAX]), 16);
    }

    #[test]
    fn only_offers_that_pin_the_table_size_identify_it() {
        let offers = offers();
        assert_eq!(
            offers.len(),
            1 + KNOWN_LAYOUTS.len() + 2 + KNOWN_LAYOUTS.len()
        );
        for offer in &offers {
            assert!(offer.interface_size <= INTERFACE_ALLOCATION);
            assert!(offer.params_size <= PARAMS_ALLOCATION);
            let known_table = KNOWN_LAYOUTS
                .iter()
                .find(|l| l.interface_size == offer.interface_size);
            match offer.negotiated.exact {
                Some(layout) => {
                    assert_eq!(Some(&layout), known_table, "{offer:?}");
                    assert_eq!(offer.negotiated.max_interface_size, layout.interface_size);
                }
                None => {
                    assert!(known_table.is_none(), "{offer:?}");
                    assert_eq!(offer.negotiated.readable(), STABLE_PREFIX_SIZE);
                }
            }
        }
        // Nothing is offered with a known params size before every table-only offer.
        let first_params = offers
            .iter()
            .position(|o| o.params_size != NO_SIZE)
            .unwrap();
        assert!(offers[..first_params]
            .iter()
            .all(|o| o.params_size == NO_SIZE));
        assert_eq!(first_params, 1 + KNOWN_LAYOUTS.len());
        // Only an exactly identified 3.3 table is read beyond the prefix.
        for offer in &offers {
            let beyond = offer.negotiated.readable() > STABLE_PREFIX_SIZE;
            assert_eq!(beyond, offer.negotiated.exact == Some(LAYOUT_PADDLE_3_3));
        }
    }

    #[test]
    fn a_zeroed_table_misses_every_required_function() {
        assert_eq!(
            missing_required(&C_DeviceInterface::zeroed()),
            REQUIRED.to_vec()
        );
    }
}
