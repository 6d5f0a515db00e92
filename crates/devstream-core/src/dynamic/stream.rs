//! [`DynStream`]: [`DeviceStream`], type-erased.
//!
//! The operation list is written once, one row per operation: each row is both the erased
//! trait's method and, through [`Typed`] (erased arguments downcast to the backend's own types)
//! and [`Erase`] (its handles boxed back), the blanket implementation's body.

use super::{downcast, DynBuffer, DynEvent, DynFlag, DynGraph, DynHostBuffer};
use crate::{
    Capabilities, CaptureMode, Completion, DeviceBuffer, DeviceEvent, DeviceGraph, DevicePool,
    DeviceStream, HostBuffer, HostFn, Place, Priority, Result,
};
use std::sync::Arc;

/// Declares [`DynStream`] with one method per row and implements it for every
/// `S: DeviceStream`: arguments through [`Typed`], the result through [`Erase`].
macro_rules! dyn_stream {
    ($(
        $(#[$doc:meta])*
        fn $name:ident(&$self:ident $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
    )*) => {
        /// A [`DeviceStream`], type-erased: arguments arrive as erased handles and are downcast
        /// to the backend's own types (another backend's handle answers `PlaceMismatch`).
        pub trait DynStream: std::fmt::Debug + Send + Sync {
            /// The stream itself, for downcasting.
            fn as_any(&self) -> &dyn std::any::Any;
            $( $(#[$doc])* fn $name(&$self $(, $arg: $ty)*) -> $ret; )*
        }

        impl<S: DeviceStream> DynStream for S {
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }
            $(
                fn $name(&$self $(, $arg: $ty)*) -> $ret {
                    Erase::erase(DeviceStream::$name(
                        $self $(, Typed::typed($arg, stringify!($name), $self)?)*
                    ))
                }
            )*
        }
    };
}

dyn_stream! {
    /// [`DeviceStream::place`].
    fn place(&self) -> &Place;
    /// [`DeviceStream::id`].
    fn id(&self) -> u64;
    /// [`DeviceStream::priority`].
    fn priority(&self) -> Priority;
    /// [`DeviceStream::native_priority`].
    fn native_priority(&self) -> i32;
    /// [`DeviceStream::is_non_blocking`].
    fn is_non_blocking(&self) -> bool;
    /// [`DeviceStream::capabilities`].
    fn capabilities(&self) -> Capabilities;
    /// [`DeviceStream::query`].
    fn query(&self) -> Result<bool>;
    /// [`DeviceStream::synchronize`].
    fn synchronize(&self) -> Result<()>;
    /// [`DeviceStream::completion`].
    fn completion(&self) -> Completion;
    /// [`DeviceStream::record`].
    fn record(&self, event: &dyn DynEvent) -> Result<()>;
    /// [`DeviceStream::record_event`].
    fn record_event(&self) -> Result<Arc<dyn DynEvent>>;
    /// [`DeviceStream::wait_event`].
    fn wait_event(&self, event: &dyn DynEvent) -> Result<()>;
    /// [`DeviceStream::wait_stream`].
    fn wait_stream(&self, other: &dyn DynStream) -> Result<()>;
    /// [`DeviceStream::launch_host_func`].
    fn launch_host_func(&self, f: HostFn) -> Result<()>;
    /// [`DeviceStream::begin_capture`].
    fn begin_capture(&self, mode: CaptureMode) -> Result<()>;
    /// [`DeviceStream::end_capture`].
    fn end_capture(&self) -> Result<Box<dyn DynGraph>>;
    /// [`DeviceStream::is_capturing`].
    fn is_capturing(&self) -> Result<bool>;
    /// [`DeviceStream::wait_flag`].
    fn wait_flag(&self, flag: &dyn DynFlag, value: u32) -> Result<()>;
    /// [`DeviceStream::write_flag`].
    fn write_flag(&self, flag: &dyn DynFlag, value: u32) -> Result<()>;
    /// [`DeviceStream::wait_completion`].
    fn wait_completion(&self, awaited: Completion) -> Result<()>;
    /// [`DeviceStream::alloc`].
    fn alloc(&self, len: usize) -> Result<Box<dyn DynBuffer>>;
    /// [`DeviceStream::alloc_host`].
    fn alloc_host(&self, len: usize) -> Result<Box<dyn DynHostBuffer>>;
    /// [`DeviceStream::copy_from_host`].
    fn copy_from_host(&self, dst: &dyn DynBuffer, dst_offset: usize, src: &[u8]) -> Result<()>;
    /// [`DeviceStream::copy_host_to_device`].
    fn copy_host_to_device(
        &self,
        dst: &dyn DynBuffer,
        dst_offset: usize,
        src: &dyn DynHostBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// [`DeviceStream::copy_device_to_host`].
    fn copy_device_to_host(
        &self,
        dst: &dyn DynHostBuffer,
        dst_offset: usize,
        src: &dyn DynBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// [`DeviceStream::copy_device_to_device`].
    fn copy_device_to_device(
        &self,
        dst: &dyn DynBuffer,
        dst_offset: usize,
        src: &dyn DynBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    /// [`DeviceStream::fill`].
    fn fill(&self, dst: &dyn DynBuffer, offset: usize, len: usize, value: u8) -> Result<()>;
    /// [`DeviceStream::alloc_from`].
    fn alloc_from(&self, pool: &dyn DevicePool, len: usize) -> Result<Box<dyn DynBuffer>>;
    /// [`DeviceStream::capture_memory_pool`].
    fn capture_memory_pool(&self) -> Result<Arc<dyn DevicePool>>;
}

/// An erased argument on its way to the backend stream `S`: an erased handle is downcast to
/// `S`'s own type (another backend's answers `PlaceMismatch` naming `op`), anything else
/// passes as it is.
trait Typed<'a, S> {
    /// What `S`'s method takes.
    type Out;
    /// The argument for `S`'s method.
    fn typed(self, op: &'static str, stream: &S) -> Result<Self::Out>;
}

/// Erased handles as `S`'s own: `$erased` stands for `$typed`; `$found` is the argument's
/// place for the mismatch error.
macro_rules! typed_handle {
    ($($erased:ty => $typed:ty, |$arg:ident| $found:expr;)*) => {$(
        impl<'a, S: DeviceStream> Typed<'a, S> for &'a $erased {
            type Out = &'a $typed;
            fn typed(self, op: &'static str, stream: &S) -> Result<Self::Out> {
                let $arg = self;
                downcast::<$typed>(self.as_any(), op, DeviceStream::place(stream), $found)
            }
        }
    )*};
}

typed_handle! {
    dyn DynEvent => S::Event, |e| e.place();
    dyn DynStream => S, |s| Some(s.place().clone());
    dyn DynFlag => S::Flag, |f| Some(f.place().clone());
    dyn DynBuffer => S::Buffer, |b| Some(b.place().clone());
    // A host buffer has no place: a mismatch names the stream's.
    dyn DynHostBuffer => S::HostBuffer, |_h| None;
}

// Arguments that are not handles pass unchanged.
crate::stream_plain_types!(arguments: Typed::typed);

/// What the backend stream's method returns, as the erased method returns it: a handle boxed
/// as its erased trait object, anything else unchanged.
trait Erase<T> {
    /// The erased value.
    fn erase(self) -> T;
}

/// Handles boxed (`$wrap`) as their erased trait object.
macro_rules! erase_handle {
    ($($typed:ident: $bound:ident => $wrap:ident<dyn $erased:ident>;)*) => {$(
        impl<$typed: $bound> Erase<Result<$wrap<dyn $erased>>> for Result<$typed> {
            fn erase(self) -> Result<$wrap<dyn $erased>> {
                Ok($wrap::new(self?))
            }
        }
    )*};
}
erase_handle! {
    E: DeviceEvent => Arc<dyn DynEvent>;
    G: DeviceGraph => Box<dyn DynGraph>;
    B: DeviceBuffer => Box<dyn DynBuffer>;
    H: HostBuffer => Box<dyn DynHostBuffer>;
}

// Results that hold no handle pass unchanged.
crate::stream_plain_types!(results: Erase::erase);

/// Implements, as the identity, a conversion that [`DeviceStream`]'s arguments or results take
/// on their way through a dispatch layer, for each of their types that is not a handle (those
/// the layer converts itself). Both layers over the stream's rows (the erased [`DynStream`] and
/// the facade's dispatch trait) take their lists from here, so an operation with a new plain
/// type adds it once.
///
/// `arguments: Trait::method` implements `Trait<'a, S>` (`type Out`, `fn method(self, op:
/// &'static str, stream: &S) -> Result<Out>`); `results: Trait::method` implements
/// `Trait<T> for T` (`fn method(self) -> T`).
#[doc(hidden)]
#[macro_export]
macro_rules! stream_plain_types {
    (arguments: $trait:ident::$method:ident) => {
        $crate::stream_plain_types!(@arguments $trait::$method:
            usize, u32, u8, &'a [u8], $crate::CaptureMode, $crate::HostFn, $crate::Completion,
            &'a dyn $crate::DevicePool);
    };
    (results: $trait:ident::$method:ident) => {
        $crate::stream_plain_types!(@results $trait::$method:
            &'a $crate::Place,
            u64,
            $crate::Priority,
            i32,
            bool,
            $crate::Capabilities,
            $crate::Completion,
            $crate::Result<()>,
            $crate::Result<bool>,
            $crate::Result<std::sync::Arc<dyn $crate::DevicePool>>
        );
    };
    (@arguments $trait:ident::$method:ident: $($ty:ty),*) => {$(
        impl<'a, S> $trait<'a, S> for $ty {
            type Out = $ty;
            #[inline(always)]
            fn $method(self, _: &'static str, _: &S) -> $crate::Result<$ty> {
                Ok(self)
            }
        }
    )*};
    (@results $trait:ident::$method:ident: $($ty:ty),*) => {$(
        impl<'a> $trait<$ty> for $ty {
            #[inline(always)]
            fn $method(self) -> $ty {
                self
            }
        }
    )*};
}
