//! `PluginFlag`: a host-visible `u32` that plug-in streams wait on (on the host) and write
//! (through `stream_add_callback`).

use crate::queue::HostFlag;
use crate::repr::Repr;
use devstream_core::{DeviceFlag, Place};
use std::sync::Arc;

/// A flag of a custom-device place.
///
/// On a plug-in place the value lives in host memory. `write_flag` is a stream callback that
/// stores it; `wait_flag` holds the stream's later work *on the host* until the value is
/// reached, so the plug-in's worker is never blocked by a flag (see the crate docs). Available
/// where the plug-in has `stream_add_callback` (`capabilities().flags`).
#[derive(Clone, Debug)]
pub struct PluginFlag(pub(crate) FlagRepr);

/// `Abi`: a flag in host memory (see [`PluginFlag`]).
pub(crate) type FlagRepr = Repr<Arc<HostFlag>, Arc<dyn devstream_core::dynamic::DynFlag>>;

impl DeviceFlag for PluginFlag {
    fn place(&self) -> &Place {
        self.0.either(|f| &f.place, |f| f.place())
    }

    fn id(&self) -> u64 {
        self.0.either(|f| f.id, |f| f.id())
    }

    fn set(&self, value: u32) {
        self.0.either(|f| f.set(value), |f| f.set(value))
    }

    fn get(&self) -> u32 {
        self.0.either(|f| f.get(), |f| f.get())
    }
}
