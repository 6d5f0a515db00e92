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

/// Declares an erased trait with one method per row (plus `as_any`, for downcasting) and
/// implements it for every `$T` meeting the bounds with the row's body: each operation list is
/// written once, as rows.
macro_rules! dyn_api {
    ($(#[$doc:meta])* trait $api:ident for $T:ident where [$($bounds:tt)*] {$(
        $(#[$attr:meta])*
        fn $name:ident(&$self:ident $(, $arg:ident: $ty:ty)* $(,)?) $(-> $ret:ty)? $body:block
    )*}) => {
        $(#[$doc])*
        pub trait $api: std::fmt::Debug + Send + Sync {
            /// The handle itself, for downcasting.
            fn as_any(&self) -> &dyn std::any::Any;
            $( $(#[$attr])* fn $name(&$self $(, $arg: $ty)*) $(-> $ret)?; )*
        }

        impl<$T> $api for $T where $($bounds)* {
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
            $( fn $name(&$self $(, $arg: $ty)*) $(-> $ret)? $body )*
        }
    };
}

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
