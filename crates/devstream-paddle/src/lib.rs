//! Any devstream place as a PaddlePaddle custom device.
//!
//! This crate builds a shared library exporting `InitPlugin(CustomRuntimeParams*)`, the entry
//! point of Paddle's custom-device plug-ins (`paddle/phi/backends/device_ext.h`, runtime 0.1.1).
//! With it, Paddle runs its streams, events and memory on devstream's backends: device types
//! `devstream_cpu`, `devstream_wgpu`, `devstream_cuda` and `devstream_hip` (cargo features
//! `cpu`, `wgpu`, `cuda`, `hip`; default `cpu` + `wgpu`). Device id `n` of a type is the
//! backend's `n`-th place (`wgpu:0`, `wgpu:1`, ...); a backend with no place on the machine
//! registers nothing.
//!
//! * **One library, several types**: see [`select`]. `cargo xtask paddle-plugins` writes one
//!   copy per type (`libdevstream_cpu.so`, `libdevstream_wgpu.so`, ...) into
//!   `target/paddle-plugins/`; point `CUSTOM_DEVICE_ROOT` there.
//! * **Layouts** ([`select::classify`]): the plug-in reads the sizes the host announces
//!   (`params->size`, `interface->size`), accepts the pairs of the published releases
//!   ([`sys::KNOWN_LAYOUTS`]: Paddle 2.6, 3.0 to 3.3) and the 3.3 table size alone (as
//!   Paddle's `PADDLE_CUSTOM_RUNTIME_CHECK_VERSION` does), writes only fields inside the
//!   announced table, and returns without writing `device_type` for any other pair. Graph
//!   capture exists only in the 3.3 table.
//! * **Memory** ([`runtime`]): `devstream_cpu` hands out host memory at its own address
//!   (Paddle's CPU-kernel fallback writes custom-device tensors through the pointer); the
//!   other types hand out devstream buffers behind addresses from a reserved, never-mapped
//!   range ([`addr`]). An address outside a live allocation is `C_ERROR`.
//! * **Graph capture** (3.3 table): CUDA and HIP, whose places capture natively.
//! * **What stays null** (Paddle reports it): unified memory, graph capture on CPU and wgpu
//!   (emulated there; `DEVSTREAM_PADDLE_EMULATED_CAPTURE=1` fills it, for tests), graph node
//!   lists, BLAS, collectives, profiler and device properties. Stream priorities do not exist
//!   in the table's `create_stream`.
//! * **The C boundary**: every function catches panics (`C_INTERNAL_ERROR`), refuses null
//!   pointers and unknown devices, handles or addresses with `C_ERROR`, and writes
//!   out-parameters only on success.
//!
//! The library pins itself in memory when it registers (`RTLD_NODELETE`): Paddle `dlclose`s
//! plug-ins at exit while devstream's worker threads may still run code from it.

pub use devstream_paddle_sys as sys;

pub mod addr;
pub mod handles;
pub mod runtime;
pub mod select;
pub mod table;

use select::{backend_of_file_name, classify, registration_order, Backend};
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use sys::{
    C_DeviceInterface, CustomRuntimeParams, CustomRuntimeVersion, RUNTIME_MAJOR_VERSION,
    RUNTIME_MINOR_VERSION, RUNTIME_PATCH_VERSION,
};

/// The sub-device type every registration reports.
const SUB_DEVICE_TYPE: &CStr = c"devstream";

/// Which backends this loaded image has registered.
static REGISTERED: [AtomicBool; 4] = [
    AtomicBool::new(false),
    AtomicBool::new(false),
    AtomicBool::new(false),
    AtomicBool::new(false),
];

/// Serialises `InitPlugin` calls.
static INIT: Mutex<()> = Mutex::new(());

/// The path this library was loaded from, as the dynamic loader reports it.
pub fn own_path() -> Option<String> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let symbol = InitPlugin as *const libc::c_void;
    // SAFETY: `dladdr` only reads the loader's tables and writes `info`.
    let found = unsafe { libc::dladdr(symbol, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: `dladdr` succeeded, so `info` is initialised.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string owned by the loader, alive while the library is.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    name.to_str().ok().map(str::to_owned)
}

/// The file name that decides this image's device type: the real file behind the loaded path
/// (links resolved), so that links to one file behave as one library.
fn own_file_name() -> Option<String> {
    let path = own_path()?;
    let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.into());
    real.file_name()?.to_str().map(str::to_owned)
}

/// Keeps this library mapped for the life of the process (a later `dlclose` does not unmap it).
fn pin_self() {
    let Some(path) = own_path() else { return };
    let Ok(path) = CString::new(path) else { return };
    // SAFETY: `RTLD_NOLOAD` only looks up the already-loaded library and adds a reference;
    // `RTLD_NODELETE` marks it never to be unloaded. The handle is deliberately kept.
    unsafe {
        libc::dlopen(
            path.as_ptr(),
            libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
        )
    };
}

/// The backends an `InitPlugin` call of this image may register, in order (see [`select`]):
/// a file named for one backend registers only that one; any other name takes the next
/// unregistered backend of `DEVSTREAM_PADDLE_BACKENDS` (or cpu, wgpu, cuda, hip) on each call.
pub fn candidates() -> Vec<Backend> {
    let file = own_file_name();
    if let Some(own) = file.as_deref().and_then(backend_of_file_name) {
        return vec![own];
    }
    let env = std::env::var("DEVSTREAM_PADDLE_BACKENDS").ok();
    registration_order(file.as_deref(), env.as_deref())
}

/// Registers the next backend into `params`; see the crate docs.
///
/// # Safety
/// As for [`InitPlugin`].
unsafe fn init_plugin(params: *mut CustomRuntimeParams) {
    if params.is_null() {
        return;
    }
    // SAFETY: `size` and `interface` lie at offsets 0 and 8 in every layout; read through raw
    // places, no reference to a possibly smaller struct is made.
    let (params_size, interface) = unsafe {
        (
            std::ptr::addr_of!((*params).size).read(),
            std::ptr::addr_of!((*params).interface).read(),
        )
    };
    if interface.is_null() {
        return;
    }
    // SAFETY: the table's `size` lies at offset 0 in every layout.
    let interface_size = unsafe { std::ptr::addr_of!((*interface).size).read() };
    let Some(layout) = classify(params_size, interface_size) else {
        return;
    };
    let _serial = devstream_core::sync::lock(&INIT);
    for backend in candidates() {
        let index = backend.index();
        if !backend.compiled() || REGISTERED[index].load(Ordering::SeqCst) {
            continue;
        }
        if table::RUNTIMES[index].get().is_none() {
            let places = runtime::places_of(backend);
            let Some(rt) = runtime::Runtime::new(backend, places) else {
                continue;
            };
            let _ = table::RUNTIMES[index].set(rt);
        }
        // SAFETY: the host's table holds `interface_size` bytes (it announced them).
        unsafe { table::fill_for(index, interface, layout) };
        // SAFETY: `version`, `device_type` and `sub_device_type` lie inside the params of
        // every accepted layout (offsets 16..56, params of 88 or 96 bytes).
        unsafe {
            std::ptr::addr_of_mut!((*params).version).write(CustomRuntimeVersion {
                major: RUNTIME_MAJOR_VERSION,
                minor: RUNTIME_MINOR_VERSION,
                patch: RUNTIME_PATCH_VERSION,
            });
            std::ptr::addr_of_mut!((*params).sub_device_type)
                .write(SUB_DEVICE_TYPE.as_ptr().cast_mut());
            std::ptr::addr_of_mut!((*params).device_type)
                .write(backend.device_type().as_ptr().cast_mut() as *mut c_char);
        }
        REGISTERED[index].store(true, Ordering::SeqCst);
        pin_self();
        return;
    }
}

/// The plug-in's entry point: registers one device type into `params` (see the crate docs), or
/// returns without writing `device_type` when the layout is unknown or no backend is left.
///
/// # Safety
/// `params` is null or points to the host's writable `CustomRuntimeParams` of `params->size`
/// bytes whose `interface` is null or points to a writable table of `interface->size` bytes.
#[no_mangle]
pub unsafe extern "C" fn InitPlugin(params: *mut CustomRuntimeParams) {
    // SAFETY: forwarded from the caller; a panic is caught and registers nothing.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe { init_plugin(params) }));
}

/// Writes the numbers of live streams, events, device allocations, host allocations, graphs
/// and graph instantiations of the device type this image serves for `backend` (0 cpu,
/// 1 wgpu, 2 cuda, 3 hip) to `out[0..6]`, and answers whether that backend has a runtime
/// (for leak checks in tests).
///
/// # Safety
/// `out` is null or points to six writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn devstream_paddle_live(backend: usize, out: *mut usize) -> bool {
    catch_unwind(|| {
        let Some(rt) = table::RUNTIMES.get(backend).and_then(|r| r.get()) else {
            return false;
        };
        if out.is_null() {
            return false;
        }
        for (i, n) in rt.live().into_iter().enumerate() {
            // SAFETY: room for four entries per the contract.
            unsafe { out.add(i).write(n) };
        }
        true
    })
    .unwrap_or(false)
}

/// Writes the numbers of live streams and events of every device type this image serves
/// (one for a copy named for its type) to `*streams` and `*events` (for leak checks: load the
/// library Paddle loaded, e.g. with `ctypes.CDLL(path)`, which returns the same image).
///
/// # Safety
/// `streams` and `events` are null or point to a writable `uint64_t` each.
#[no_mangle]
pub unsafe extern "C" fn devstream_paddle_live_counts(streams: *mut u64, events: *mut u64) {
    let _ = catch_unwind(|| {
        let (mut s, mut e) = (0u64, 0u64);
        for rt in table::RUNTIMES.iter().filter_map(|r| r.get()) {
            let live = rt.live();
            s += live[0] as u64;
            e += live[1] as u64;
        }
        if !streams.is_null() {
            // SAFETY: non-null and writable per the contract.
            unsafe { streams.write(s) };
        }
        if !events.is_null() {
            // SAFETY: as above.
            unsafe { events.write(e) };
        }
    });
}

/// The size of `C_DeviceInterface` as declared in [`sys`] (for tests).
pub const DECLARED_INTERFACE_SIZE: usize = std::mem::size_of::<C_DeviceInterface>();
