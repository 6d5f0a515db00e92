//! The C ABI of Paddle custom-device plug-ins: `paddle/phi/backends/device_ext.h`, custom
//! runtime version 0.1.1, declared in Rust from the published headers.
//!
//! A plug-in is a shared library exporting `void InitPlugin(CustomRuntimeParams*)`. The host
//! fills `CustomRuntimeParams::size`, points `interface` at a zeroed [`C_DeviceInterface`] whose
//! `size` it fills too, and calls `InitPlugin`; the plug-in checks the sizes, writes its runtime
//! version and device type and fills the function pointers it implements. devstream uses this
//! crate on both sides: its loader (`devstream-plugin`) is such a host, and `devstream-paddle`
//! is such a plug-in.
//!
//! # Layouts, as data
//!
//! The table grew across Paddle releases while the runtime version stayed 0.1.1. Every
//! published layout shares the same first [`STABLE_PREFIX_SIZE`] bytes: `size`, the device API
//! (streams, events, synchronisation), the memory API (allocation, copies) and the first nine
//! info functions (device count and list, memory statistics, chunk sizes). What follows
//! differs from release to release (Paddle 2.x: `get_compute_capability(size_t*)`, no
//! `xccl_get_comm_name`; 3.0 adds `xccl_get_comm_name`, 3.1 device properties and Eigen
//! devices, 3.2 float16/bfloat16 queries and BLAS handles, 3.3 `is_dnn_supported` and the
//! graph-capture functions).
//!
//! Each struct is written once, as a list of fields in header order where every field names
//! the release that added it (`layout.rs`); a macro generates from that list the Paddle 3.3
//! structs ([`C_DeviceInterface`], [`CustomRuntimeParams`]), the Paddle 2.6 ones
//! ([`paddle_2_6`]) and the offset tables of both ([`C_DEVICE_INTERFACE_FIELDS`], ...), which
//! the tests compare with `offsetof` in the real headers of both releases. [`KNOWN_LAYOUTS`]
//! lists the families devstream offers, and the unit tests derive each family's table size from
//! the list. A field outside the stable prefix may be read only once the negotiation has
//! established that the plug-in filled exactly the 3.3 table.
//!
//! The crate depends on nothing (it is `no_std`), so that plug-ins written in Rust can use the
//! very same declarations as the host that loads them.
#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![allow(non_camel_case_types, non_upper_case_globals)]
// One level of macro recursion per table field (see `macros.rs`).
#![recursion_limit = "256"]

#[macro_use]
mod macros;
mod layout;
mod required;
mod types;

pub use layout::*;
pub use required::*;
pub use types::*;

/// Runtime major version this declaration implements (`PADDLE_CUSTOM_RUNTIME_MAJOR_VERSION`).
pub const RUNTIME_MAJOR_VERSION: usize = 0;
/// Runtime minor version (`PADDLE_CUSTOM_RUNTIME_MINOR_VERSION`).
pub const RUNTIME_MINOR_VERSION: usize = 1;
/// Runtime patch version (`PADDLE_CUSTOM_RUNTIME_PATCH_VERSION`).
pub const RUNTIME_PATCH_VERSION: usize = 1;

/// One field of a declared struct, as its offset table lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiField {
    /// The field's name in the header.
    pub name: &'static str,
    /// Its offset in the declared struct (`offset_of!`).
    pub offset: usize,
    /// Its size (`size_of` of its type).
    pub size: usize,
    /// The Paddle release that added it (`"2.6"` for the fields every release has).
    pub since: &'static str,
}

/// `void InitPlugin(CustomRuntimeParams*)`.
pub type InitPluginFn = unsafe extern "C" fn(params: *mut CustomRuntimeParams);

/// The exported symbol name of the entry point.
pub const INIT_PLUGIN_SYMBOL: &[u8] = b"InitPlugin\0";

/// Bytes at the start of the table that every published layout shares (through
/// `device_realloc_size`): the only part devstream reads.
pub const STABLE_PREFIX_SIZE: usize =
    core::mem::offset_of!(C_DeviceInterface, get_compute_capability);

/// One table layout of a Paddle release family, as `sizeof` reports it on 64-bit targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiLayout {
    /// A human name of the family (`"Paddle 3.3"`).
    pub name: &'static str,
    /// `sizeof(CustomRuntimeParams)` in that family.
    pub params_size: usize,
    /// `sizeof(C_DeviceInterface)` in that family.
    pub interface_size: usize,
    /// Bytes of the table devstream may read from a plug-in known to have filled exactly this
    /// layout: the whole table where devstream declares it ([`C_DeviceInterface`], 3.3), the
    /// [`STABLE_PREFIX_SIZE`] otherwise.
    pub readable: usize,
}

impl AbiLayout {
    /// A family of which devstream reads only the [`STABLE_PREFIX_SIZE`].
    const fn prefix(name: &'static str, params_size: usize, interface_size: usize) -> Self {
        AbiLayout {
            name,
            params_size,
            interface_size,
            readable: STABLE_PREFIX_SIZE,
        }
    }
}

/// Paddle 2.6 (2.6.2 checked; the only 2.x release left on PyPI): 88-byte params (no
/// `pir_default_passes`), a 912-byte table (`get_compute_capability(size_t*)`, no
/// `xccl_get_comm_name`, `xccl_all_to_all`, no BLAS handles).
pub const LAYOUT_PADDLE_2_6: AbiLayout = AbiLayout::prefix("Paddle 2.6", PARAMS_SIZE_2, 912);

/// Paddle 3.0 (3.0.0 checked): 96-byte params, a 920-byte table (2.6's plus
/// `xccl_get_comm_name`; compute capability, runtime and driver versions per device).
pub const LAYOUT_PADDLE_3_0: AbiLayout = AbiLayout::prefix("Paddle 3.0", PARAMS_SIZE_3, 920);

/// Paddle 3.1 (3.1.0 and 3.1.1 checked): a 976-byte table (device properties, multiprocessor
/// and grid queries, Eigen devices).
pub const LAYOUT_PADDLE_3_1: AbiLayout = AbiLayout::prefix("Paddle 3.1", PARAMS_SIZE_3, 976);

/// Paddle 3.2 (3.2.0, 3.2.1 and 3.2.2 checked): a 1032-byte table (float16/bfloat16 queries,
/// BLAS handles; `blas_axpby` then `reserved_other_api[7]`). The "develop" table devstream
/// declared before (the same 1032 bytes with `transform_unary`/`transform_binary` in the
/// first two reserved words) is this size: no release has those two functions, and devstream
/// never reads a 3.2 table beyond the stable prefix.
pub const LAYOUT_PADDLE_3_2: AbiLayout = AbiLayout::prefix("Paddle 3.2", PARAMS_SIZE_3, 1032);

/// Paddle 3.3 (3.3.0 and 3.3.1 checked): the 1128-byte table declared by
/// [`C_DeviceInterface`], with `is_dnn_supported` and the graph-capture functions; the only
/// layout devstream reads beyond the stable prefix.
pub const LAYOUT_PADDLE_3_3: AbiLayout = AbiLayout {
    name: "Paddle 3.3",
    params_size: PARAMS_SIZE_3,
    interface_size: core::mem::size_of::<C_DeviceInterface>(),
    readable: core::mem::size_of::<C_DeviceInterface>(),
};

/// `sizeof(CustomRuntimeParams)` of Paddle 2.x (no `pir_default_passes`).
pub const PARAMS_SIZE_2: usize =
    core::mem::offset_of!(CustomRuntimeParams, pir_default_passes) + 32;
/// `sizeof(CustomRuntimeParams)` of Paddle 3.x ([`CustomRuntimeParams`]).
pub const PARAMS_SIZE_3: usize = core::mem::size_of::<CustomRuntimeParams>();

/// The table layouts of the Paddle releases on PyPI (2.6.2, 3.0.0–3.3.1), by table size.
/// Every 3.x family has 96-byte params, so the params size alone never tells which table a
/// plug-in filled.
pub const KNOWN_LAYOUTS: [AbiLayout; 5] = [
    LAYOUT_PADDLE_2_6,
    LAYOUT_PADDLE_3_0,
    LAYOUT_PADDLE_3_1,
    LAYOUT_PADDLE_3_2,
    LAYOUT_PADDLE_3_3,
];

/// The largest table of any known layout: a plug-in that fills beyond it was built against a
/// header devstream does not know.
pub const MAX_KNOWN_INTERFACE_SIZE: usize = core::mem::size_of::<C_DeviceInterface>();

/// Bytes devstream allocates for the table: far beyond every known layout, so that a plug-in
/// built against a larger header cannot write past it.
pub const INTERFACE_ALLOCATION: usize = 16 * 1024;
/// Bytes devstream allocates for the params.
pub const PARAMS_ALLOCATION: usize = 4 * 1024;

#[cfg(all(test, target_pointer_width = "64"))]
mod tests;
