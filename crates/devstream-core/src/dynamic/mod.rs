//! The backend traits, type-erased: one layer for every backend the facade does not name at
//! compile time (Rust-registered custom devices, out-of-tree backends), as wgpu-hal's
//! `dynamic/`.
//!
//! Each `Dyn*` trait is object-safe and has a blanket implementation over its typed trait in
//! [`crate::traits`], so a backend writes nothing for it: `Arc::new(stream) as Arc<dyn
//! DynStream>` works for every [`DeviceStream`](crate::DeviceStream). Arguments arrive as
//! erased handles and are downcast to the backend's own types; a handle of another backend
//! answers `Error::PlaceMismatch`. Optional operations keep the typed trait's defaults, so an
//! erased backend answers `Unsupported` exactly where its typed self does.
//!
//! ```
//! use devstream_core::dynamic::{DynBackend, ErasedBackend};
//! # use devstream_core::*;
//! fn erase<B: DeviceBackend>() -> Box<dyn DynBackend> {
//!     Box::new(ErasedBackend::<B>::new())
//! }
//! ```

mod backend;
mod handles;
mod stream;

pub use backend::{DynBackend, ErasedBackend};
pub use handles::{DynBuffer, DynEvent, DynFlag, DynGraph, DynHostBuffer};
pub use stream::DynStream;

use crate::{Error, Place, Result};
use std::any::Any;

/// Downcasts an erased argument to the backend's own type, or answers `PlaceMismatch` between
/// `here` and `there` (`here` again when the argument has no place).
fn downcast<'a, T: 'static>(
    any: &'a dyn Any,
    op: &'static str,
    here: &Place,
    there: Option<Place>,
) -> Result<&'a T> {
    any.downcast_ref::<T>()
        .ok_or_else(|| Error::mismatch(op, here, &there.unwrap_or_else(|| here.clone())))
}
