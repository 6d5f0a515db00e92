//! The object-safe dispatch traits behind the facade enums, and one generic implementation of
//! them for every backend.
//!
//! Each backend module only says which enum variant holds which of its handle types
//! ([`facade_variant!`](crate::backends)); everything else is written once here.

use crate::{DeviceBuffer, Event, Flag, Graph, HostBuffer, Stream};
use devstream_core::traits;
use devstream_core::{
    Capabilities, CaptureMode, Completion, DeviceStream, Error, EventFlags, HostFn, Place,
    Priority, Result,
};
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

/// A backend stream type whose associated handles all have facade variants.
pub(crate) trait FacadeStream:
    DeviceStream<
        Event: Member<Event>,
        Graph: Member<Graph>,
        Flag: Member<Flag>,
        Buffer: Member<DeviceBuffer>,
        HostBuffer: Member<HostBuffer>,
    > + Member<Stream>
{
}

impl<S> FacadeStream for S where
    S: DeviceStream<
            Event: Member<Event>,
            Graph: Member<Graph>,
            Flag: Member<Flag>,
            Buffer: Member<DeviceBuffer>,
            HostBuffer: Member<HostBuffer>,
        > + Member<Stream>
{
}

macro_rules! unpack {
    ($op:expr, $self:ident, $ty:ty, $arg:expr, $place:expr) => {
        match <$ty as Member<_>>::unwrap_ref($arg) {
            Some(inner) => inner,
            None => return Err(mismatch($op, DeviceStream::place($self), $place)),
        }
    };
}

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

dispatch_api! { trait StreamApi for S where [S: FacadeStream] {
    fn place(&self) -> &Place { DeviceStream::place(self) }
    fn id(&self) -> u64 { DeviceStream::id(self) }
    fn priority(&self) -> Priority { DeviceStream::priority(self) }
    fn native_priority(&self) -> i32 { DeviceStream::native_priority(self) }
    fn is_non_blocking(&self) -> bool { DeviceStream::is_non_blocking(self) }
    fn capabilities(&self) -> Capabilities { DeviceStream::capabilities(self) }
    #[inline]
    fn query(&self) -> Result<bool> { DeviceStream::query(self) }
    fn synchronize(&self) -> Result<()> { DeviceStream::synchronize(self) }
    fn completion(&self) -> Completion { DeviceStream::completion(self) }
    #[inline]
    fn record(&self, event: &Event) -> Result<()> {
        let e = unpack!("record", self, S::Event, event, EventApi::place(event));
        DeviceStream::record(self, e)
    }
    fn record_event(&self) -> Result<Event> {
        DeviceStream::record_event(self).map(Member::wrap)
    }
    #[inline]
    fn wait_event(&self, event: &Event) -> Result<()> {
        let e = unpack!("wait_event", self, S::Event, event, EventApi::place(event));
        DeviceStream::wait_event(self, e)
    }
    #[inline]
    fn wait_stream(&self, other: &Stream) -> Result<()> {
        let there = Some(StreamApi::place(other).clone());
        let o = unpack!("wait_stream", self, S, other, there);
        DeviceStream::wait_stream(self, o)
    }
    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        DeviceStream::launch_host_func(self, f)
    }
    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        DeviceStream::begin_capture(self, mode)
    }
    fn end_capture(&self) -> Result<Graph> {
        DeviceStream::end_capture(self).map(Member::wrap)
    }
    fn is_capturing(&self) -> Result<bool> { DeviceStream::is_capturing(self) }
    fn wait_flag(&self, flag: &Flag, value: u32) -> Result<()> {
        let there = Some(FlagApi::place(flag).clone());
        let f = unpack!("wait_flag", self, S::Flag, flag, there);
        DeviceStream::wait_flag(self, f, value)
    }
    fn write_flag(&self, flag: &Flag, value: u32) -> Result<()> {
        let there = Some(FlagApi::place(flag).clone());
        let f = unpack!("write_flag", self, S::Flag, flag, there);
        DeviceStream::write_flag(self, f, value)
    }
    fn alloc(&self, len: usize) -> Result<DeviceBuffer> {
        DeviceStream::alloc(self, len).map(Member::wrap)
    }
    fn alloc_host(&self, len: usize) -> Result<HostBuffer> {
        DeviceStream::alloc_host(self, len).map(Member::wrap)
    }
    fn copy_from_host(&self, dst: &DeviceBuffer, dst_offset: usize, src: &[u8]) -> Result<()> {
        let d = unpack!("copy_from_host", self, S::Buffer, dst, Some(dst.place().clone()));
        DeviceStream::copy_from_host(self, d, dst_offset, src)
    }
    fn copy_host_to_device(
        &self,
        dst: &DeviceBuffer,
        dst_offset: usize,
        src: &HostBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_host_to_device";
        let d = unpack!(op, self, S::Buffer, dst, Some(dst.place().clone()));
        let s = unpack!(op, self, S::HostBuffer, src, None);
        DeviceStream::copy_host_to_device(self, d, dst_offset, s, src_offset, len)
    }
    fn copy_device_to_host(
        &self,
        dst: &HostBuffer,
        dst_offset: usize,
        src: &DeviceBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_device_to_host";
        let d = unpack!(op, self, S::HostBuffer, dst, None);
        let s = unpack!(op, self, S::Buffer, src, Some(src.place().clone()));
        DeviceStream::copy_device_to_host(self, d, dst_offset, s, src_offset, len)
    }
    fn copy_device_to_device(
        &self,
        dst: &DeviceBuffer,
        dst_offset: usize,
        src: &DeviceBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_device_to_device";
        let d = unpack!(op, self, S::Buffer, dst, Some(dst.place().clone()));
        let s = unpack!(op, self, S::Buffer, src, Some(src.place().clone()));
        DeviceStream::copy_device_to_device(self, d, dst_offset, s, src_offset, len)
    }
    fn fill(&self, dst: &DeviceBuffer, offset: usize, len: usize, value: u8) -> Result<()> {
        let d = unpack!("fill", self, S::Buffer, dst, Some(dst.place().clone()));
        DeviceStream::fill(self, d, offset, len, value)
    }
}
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
}}
