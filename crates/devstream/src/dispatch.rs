//! The object-safe dispatch traits behind the facade enums, and one generic implementation of
//! them for every backend.
//!
//! Each backend module only says which enum variant holds which of its handle types
//! ([`facade_variant!`](crate::backends)); everything else is written once here. The stream's
//! operations are rows in `stream.rs` (one per operation, through `stream_api!`); the other
//! handles' are rows here (`dispatch_api!`).

use crate::{DeviceBuffer, Event, Flag, Graph, HostBuffer, Stream};
use devstream_core::traits;
use devstream_core::{Completion, DeviceStream, Error, EventFlags, Place, Result};
use enum_dispatch::enum_dispatch;
use std::time::Duration;

/// Implemented by each backend handle type for the facade enum that holds it: wraps the handle
/// into the enum and gets it back out. Use it to reach a backend's own API from a facade handle:
///
/// ```
/// # #[cfg(feature = "cpu")] {
/// use devstream::{Place, Stream};
/// let s = Stream::new(&Place::Cpu).unwrap();
/// let cpu: &devstream::cpu::CpuStream = s.backend().unwrap();
/// # let _ = cpu; }
/// ```
pub trait Member<Facade>: Sized {
    /// Wraps the backend handle.
    fn wrap(self) -> Facade;
    /// The backend handle, if `facade` holds one of this type.
    fn unwrap_ref(facade: &Facade) -> Option<&Self>;
}

fn mismatch(op: &'static str, expected: &Place, found: Option<Place>) -> Error {
    Error::PlaceMismatch {
        op,
        expected: expected.clone(),
        found: found.unwrap_or_else(|| expected.clone()),
    }
}

/// Declares `$name` as a name for the bounds after `=`, implemented for every type that meets
/// them.
macro_rules! trait_alias {
    ($(#[$doc:meta])* $vis:vis trait $name:ident = $($bounds:tt)+) => {
        $(#[$doc])*
        $vis trait $name: $($bounds)+ {}
        impl<T: $($bounds)+> $name for T {}
    };
}

trait_alias! {
    /// A backend stream type whose associated handles all have facade variants.
    pub(crate) trait FacadeStream = DeviceStream<
        Event: Member<Event>,
        Graph: Member<Graph>,
        Flag: Member<Flag>,
        Buffer: Member<DeviceBuffer>,
        HostBuffer: Member<HostBuffer>,
    > + Member<Stream>
}

/// A facade argument on its way to a backend stream `S`: a facade handle is unpacked to `S`'s
/// own handle (another backend's answers `PlaceMismatch` naming `op`), anything else passes as
/// it is.
pub(crate) trait ToBackend<'a, S> {
    /// What `S`'s method takes.
    type Out;
    /// The argument for `S`'s method.
    fn to_backend(self, op: &'static str, stream: &S) -> Result<Self::Out>;
}

/// Facade handles as `S`'s own: `$facade` holds `$typed`; `$found` is the argument's place for
/// the mismatch error.
macro_rules! to_backend_handle {
    ($($facade:ty => $typed:ty, |$arg:ident| $found:expr;)*) => {$(
        impl<'a, S: FacadeStream> ToBackend<'a, S> for &'a $facade {
            type Out = &'a $typed;
            #[inline]
            fn to_backend(self, op: &'static str, stream: &S) -> Result<Self::Out> {
                match <$typed as Member<$facade>>::unwrap_ref(self) {
                    Some(inner) => Ok(inner),
                    None => {
                        let $arg = self;
                        Err(mismatch(op, DeviceStream::place(stream), $found))
                    }
                }
            }
        }
    )*};
}

to_backend_handle! {
    Event => S::Event, |e| EventApi::place(e);
    Stream => S, |s| Some(StreamApi::place(s).clone());
    Flag => S::Flag, |f| Some(FlagApi::place(f).clone());
    DeviceBuffer => S::Buffer, |b| Some(DeviceBufferApi::place(b).clone());
    HostBuffer => S::HostBuffer, |_h| None;
}

// Arguments that are not handles pass unchanged.
devstream_core::stream_plain_types!(arguments: ToBackend::to_backend);

/// What a backend stream's method returns, as the facade returns it: a backend handle wrapped
/// into its facade enum, anything else unchanged.
pub(crate) trait ToFacade<F> {
    /// The facade's value.
    fn to_facade(self) -> F;
}

impl<B: Member<F>, F> ToFacade<Result<F>> for Result<B> {
    #[inline]
    fn to_facade(self) -> Result<F> {
        self.map(Member::wrap)
    }
}

// Results that hold no handle pass unchanged.
devstream_core::stream_plain_types!(results: ToFacade::to_facade);

/// Declares a facade enum: `enum_dispatch` over `$api`, `Debug` (and the traits after `:`), the
/// docs given, and one variant per backend compiled in, holding that backend crate's handle type
/// of the name given (CPU, CUDA, HIP, wgpu, custom device, in that order); `$what` names the
/// handle in the variants' docs.
macro_rules! facade_enum {
    (
        $(#[$attr:meta])*
        pub enum $name:ident($api:ident, $what:literal) $(: $($derive:ident),+)?
            = [$cpu:ident, $cuda:ident, $hip:ident, $wgpu:ident, $custom:ident];
    ) => {
        $crate::dispatch::facade_enum! {
            @enum [$(#[$attr])*] $name, $api, $what, [$($($derive),+)?],
            "cpu" "CPU" Cpu(devstream_cpu::$cpu),
            "cuda" "CUDA" Cuda(devstream_cuda::$cuda),
            "hip" "HIP" Hip(devstream_hip::$hip),
            "wgpu" "wgpu" Wgpu(devstream_wgpu::$wgpu),
            "plugin" "custom-device (plug-in or Rust-registered)"
                Custom(devstream_plugin::$custom),
        }
    };
    (
        @enum [$(#[$attr:meta])*] $name:ident, $api:ident, $what:literal, [$($derive:ident),*],
        $($feature:literal $label:literal $variant:ident($ty:path),)+
    ) => {
        #[::enum_dispatch::enum_dispatch($api)]
        #[derive(Debug $(, $derive)*)]
        $(#[$attr])*
        #[non_exhaustive]
        pub enum $name {
            $(
                #[doc = concat!("A ", $label, " ", $what, ".")]
                #[cfg(feature = $feature)]
                $variant($ty),
            )+
        }
    };
}
pub(crate) use facade_enum;

/// The stream operations of the facade, one row each (the rows are in `stream.rs`): declares
/// [`StreamApi`] (dispatched over `Stream` by `enum_dispatch`), implements it for every backend
/// stream (arguments through [`ToBackend`], results through [`ToFacade`]), and writes the
/// `Stream` method of each row: `Plain` calls the dispatch trait, `Host` and `Device` run it
/// through `op!` (a `tracing` span, and the timeline recorder under the cargo feature `trace`,
/// named `devstream.<op>`), `Custom` rows have their `Stream` method written out by hand.
macro_rules! stream_api {
    ($(
        $(#[$doc:meta])*
        $kind:ident fn $name:ident(&$self:ident $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
    )*) => {
        #[::enum_dispatch::enum_dispatch]
        pub(crate) trait StreamApi {
            $( fn $name(&$self $(, $arg: $ty)*) -> $ret; )*
        }

        impl<S: $crate::dispatch::FacadeStream> StreamApi for S {
            $(
                #[inline]
                fn $name(&$self $(, $arg: $ty)*) -> $ret {
                    $crate::dispatch::ToFacade::to_facade(
                        devstream_core::DeviceStream::$name(
                            $self
                            $(, $crate::dispatch::ToBackend::to_backend(
                                $arg, stringify!($name), $self
                            )?)*
                        )
                    )
                }
            )*
        }

        impl Stream {
            $( $crate::dispatch::stream_api!(
                @method $(#[$doc])* $kind fn $name(&$self $(, $arg: $ty)*) -> $ret
            ); )*
        }
    };
    (@method $(#[$doc:meta])* Custom fn $($rest:tt)*) => {};
    (@method $(#[$doc:meta])* Plain fn $name:ident(&$self:ident $(, $arg:ident: $ty:ty)*) -> $ret:ty) => {
        $(#[$doc])*
        #[inline]
        pub fn $name(&$self $(, $arg: $ty)*) -> $ret {
            StreamApi::$name($self $(, $arg)*)
        }
    };
    (@method $(#[$doc:meta])* $kind:ident fn $name:ident(&$self:ident $(, $arg:ident: $ty:ty)*) -> $ret:ty) => {
        $(#[$doc])*
        #[inline]
        pub fn $name(&$self $(, $arg: $ty)*) -> $ret {
            op!(concat!("devstream.", stringify!($name)), $self, $kind, |_op| {
                StreamApi::$name($self $(, $arg)*)
            })
        }
    };
}
pub(crate) use crate::stream::StreamApi;
pub(crate) use stream_api;

/// Declares a dispatch trait (dispatched over the facade enum of that kind of handle) with one
/// method per row, and implements it for every backend handle type `$T` meeting the bounds with
/// the row's body, which unpacks facade arguments into the backend's own handles and wraps what
/// comes back. The operation list of each handle kind is thus written once in this crate.
macro_rules! dispatch_api {
    (trait $api:ident for $T:ident where [$($bounds:tt)*] {$(
        $(#[$attr:meta])*
        fn $name:ident(&$self:ident $(, $arg:ident: $ty:ty)* $(,)?) $(-> $ret:ty)? $body:block
    )*}) => {
        #[enum_dispatch]
        pub(crate) trait $api {
            $( fn $name(&$self $(, $arg: $ty)*) $(-> $ret)?; )*
        }

        impl<$T> $api for $T where $($bounds)* {
            $( $(#[$attr])* fn $name(&$self $(, $arg: $ty)*) $(-> $ret)? $body )*
        }
    };
}

dispatch_api! { trait EventApi for E where [E: traits::DeviceEvent + Member<Event>] {
    fn place(&self) -> Option<Place> { traits::DeviceEvent::place(self) }
    fn id(&self) -> u64 { traits::DeviceEvent::id(self) }
    fn flags(&self) -> EventFlags { traits::DeviceEvent::flags(self) }
    fn query(&self) -> Result<bool> { traits::DeviceEvent::query(self) }
    fn synchronize(&self) -> Result<()> { traits::DeviceEvent::synchronize(self) }
    fn completion(&self) -> Completion { traits::DeviceEvent::completion(self) }
    fn elapsed(&self, end: &Event) -> Result<Duration> {
        match E::unwrap_ref(end) {
            Some(e) => traits::DeviceEvent::elapsed(self, e),
            None => {
                let here = self.place().unwrap_or(Place::Cpu);
                Err(mismatch("elapsed", &here, EventApi::place(end)))
            }
        }
    }
}}

dispatch_api! { trait GraphApi for G where [G: traits::DeviceGraph + Member<Graph>, G::Stream: Member<Stream>] {
    fn place(&self) -> &Place { traits::DeviceGraph::place(self) }
    fn memory_pool(&self) -> Result<std::sync::Arc<dyn devstream_core::DevicePool>> {
        traits::DeviceGraph::memory_pool(self)
    }
    fn launch(&self, stream: &Stream) -> Result<()> {
        match G::Stream::unwrap_ref(stream) {
            Some(s) => traits::DeviceGraph::launch(self, s),
            None => Err(mismatch(
                "Graph::launch",
                traits::DeviceGraph::place(self),
                Some(StreamApi::place(stream).clone()),
            )),
        }
    }
}}

dispatch_api! { trait FlagApi for F where [F: traits::DeviceFlag + Member<Flag>] {
    fn place(&self) -> &Place { traits::DeviceFlag::place(self) }
    fn id(&self) -> u64 { traits::DeviceFlag::id(self) }
    fn set(&self, value: u32) { traits::DeviceFlag::set(self, value) }
    fn get(&self) -> u32 { traits::DeviceFlag::get(self) }
}}

dispatch_api! { trait DeviceBufferApi for B where [B: traits::DeviceBuffer + Member<DeviceBuffer>] {
    fn len(&self) -> usize { traits::DeviceBuffer::len(self) }
    fn place(&self) -> &Place { traits::DeviceBuffer::place(self) }
}}

dispatch_api! { trait HostBufferApi for H where [H: traits::HostBuffer + Member<HostBuffer>] {
    fn len(&self) -> usize { traits::HostBuffer::len(self) }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        traits::HostBuffer::read(self, offset, out)
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        traits::HostBuffer::write(self, offset, data)
    }
    fn read_would_wait(&self) -> bool { traits::HostBuffer::read_would_wait(self) }
    fn write_would_wait(&self) -> bool { traits::HostBuffer::write_would_wait(self) }
    fn host_fn_access(
        &self,
        runner: devstream_core::foreign::BackendKey,
    ) -> Result<devstream_core::host_fn_access::HostFnAccess> {
        traits::HostBuffer::host_fn_access(self, runner)
    }
}}
