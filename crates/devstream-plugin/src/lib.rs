//! devstream's custom-device backend: Paddle custom-device plug-ins and Rust-registered custom
//! devices as `Place::Custom { device_type, id }` (`"custom_cpu:0"`, `"npu:1"`).
//!
//! # Paddle plug-ins
//!
//! A vendor ships its device runtime as a shared library exporting
//! `InitPlugin(CustomRuntimeParams*)` and filling the function table `C_DeviceInterface` of
//! `paddle/phi/backends/device_ext.h` (runtime version 0.1.1; declared in [`sys`]). devstream
//! loads every such library found through `CUSTOM_DEVICE_ROOT` (and `DEVSTREAM_PLUGIN_PATH`,
//! see [`discovery`]) the first time a custom place is used, and any other with
//! [`load_plugin`]. Loading validates like Paddle and more, and every failure is a typed error
//! naming what is wrong:
//!
//! * the library must load and export `InitPlugin`;
//! * devstream offers sizes in zeroed buffers far larger than any layout, in an order that
//!   tells which table the plug-in filled (the Paddle 2.6, 3.0, 3.1, 3.2 and 3.3 tables are
//!   912–1128 bytes, and every 3.x release has the same 96-byte params, so the params size
//!   alone tells nothing; see [`sys`] and the loader's offers), and the plug-in must accept
//!   one (write its version) and fill no more of the table than the accepted offer allows;
//!   a field beyond the stable prefix is read only from a table identified as the 3.3 one;
//! * the runtime version must be 0.1.x with x ≥ 1, the device type an identifier not yet
//!   registered, and the required functions (`set_device`, `get_device`, `create_event`,
//!   `record_event`, `destroy_event`, `synchronize_event`, `device_memory_allocate`,
//!   `device_memory_deallocate`, `get_device_count`, `get_device_list`) present;
//! * `initialize`, `get_device_count`, `get_device_list` and `init_device` must succeed, with a
//!   sane device list.
//!
//! Loads are serialised and each file is loaded once per process; a library whose `InitPlugin`
//! accepted a layout is never unloaded, and a failure after `initialize` runs `deinit_device`
//! and `finalize` first.
//!
//! Every later call zeroes its out-parameters first and turns a status other than `C_SUCCESS`
//! into [`Error::Driver`](devstream_core::Error) naming the function (`C_WARNING` from
//! `stream_add_callback` and from the allocators is success; how callbacks and memory are
//! owned across the boundary is documented on [`PluginStream`] and [`PluginHostBuffer`]). Null stream and event
//! handles are legal (Paddle's own `custom_cpu` never writes them): devstream identifies its
//! streams and events by its own ids. How the stream contract maps onto the table is
//! documented on [`PluginStream`].
//!
//! ## Flags without a wait primitive
//!
//! The ABI cannot make a stream wait for a value in memory. Blocking a plug-in stream inside a
//! callback until a host flag is set would stall every stream of a plug-in that runs its
//! callbacks on one thread, so devstream holds a stream's later work on the host instead:
//! after `wait_flag(f, v)` the stream's operations are kept in order by devstream and submitted
//! to the plug-in by a dispatcher thread once `f ≥ v`. `write_flag` is a callback that stores
//! the value. Hence `capabilities().flags` is on exactly where `stream_add_callback` exists.
//!
//! # Rust-registered custom devices
//!
//! [`register_custom_device::<B>("npu")`](register_custom_device) makes a backend `B` written
//! in Rust against the devstream-core traits serve `"npu:N"`; its handles travel type-erased
//! in the same [`PluginStream`], [`PluginEvent`], ... types.
//!
//! # Example
//!
//! ```no_run
//! use devstream_core::{DeviceBackend, DeviceStream, Place, StreamOptions};
//! use devstream_plugin::PluginBackend;
//! # fn main() -> devstream_core::Result<()> {
//! devstream_plugin::load_plugin("/opt/paddle-plugins/libcustom_cpu.so")?;
//! let place: Place = "custom_cpu:0".parse()?;
//! let stream = PluginBackend::new_stream(&place, StreamOptions::default())?;
//! stream.launch_host_func(Box::new(|| println!("on the plug-in's stream")))?;
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

/// Implements `Debug` for a type as a struct named `$name` that shows only the listed fields
/// (`field`, or `field.subfield` shown under `field`'s name), eliding the rest.
macro_rules! debug_some_fields {
    ($ty:ty as $name:literal { $($field:ident $(.$sub:ident)*),* $(,)? }) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct($name)
                    $(.field(stringify!($field), &self.$field$(.$sub)*))*
                    .finish_non_exhaustive()
            }
        }
    };
}

/// `PartialEq`, `Eq` and `Hash` for a handle type by its `id()`: two handles are equal when
/// they name one object.
macro_rules! eq_and_hash_by_id {
    ($ty:ty) => {
        impl PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                self.id() == other.id()
            }
        }

        impl Eq for $ty {}

        impl std::hash::Hash for $ty {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.id().hash(state)
            }
        }
    };
}

mod buffer;
mod capture;
#[cfg(feature = "comm")]
pub mod comm;
mod device;
pub mod discovery;
mod event;
mod flag;
mod foreign;
mod graph;
mod mempool;
mod notify;
mod queue;
mod registry;
mod repr;
mod runtime;
mod stream;
pub mod sys;
mod tokens;

pub use buffer::{PluginBuffer, PluginHostBuffer};
#[doc(hidden)]
pub use capture::capture_diagnostics;
#[cfg(feature = "comm")]
pub use comm::PluginComm;
pub use device::PluginBackend;
pub use event::PluginEvent;
pub use flag::PluginFlag;
pub use graph::PluginGraph;
pub use mempool::{DeviceBlock, PluginBlocks, PluginMemoryPool};
#[doc(hidden)]
pub use notify::nudges_sent;
pub use registry::{
    device_types, load_failures, load_plugin, loaded_plugins, register_custom_device, PluginInfo,
};
pub use stream::PluginStream;
