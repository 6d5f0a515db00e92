//! Rust-registered custom devices: a vendor implements the devstream-core traits in Rust and
//! registers the backend under a device type; its handles travel type-erased inside
//! `PluginStream`, `PluginEvent`, ... and are addressed as `"<device_type>:N"` like a plug-in.

use devstream_core::{
    Capabilities, CaptureMode, Completion, DeviceBackend, DeviceBuffer, DeviceEvent, DeviceFlag,
    DeviceGraph, DeviceStream, Error, EventFlags, HostBuffer, HostFn, LiveCounts, Place, Priority,
    PriorityRange, Result, StreamOptions,
};
use std::any::Any;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// Downcasts an erased argument to the backend's own type, or answers `PlaceMismatch`.
fn downcast<'a, T: 'static>(
    any: &'a dyn Any,
    op: &'static str,
    here: &Place,
    there: Option<Place>,
) -> Result<&'a T> {
    any.downcast_ref::<T>()
        .ok_or_else(|| Error::mismatch(op, here, &there.unwrap_or_else(|| here.clone())))
}

/// A registered backend, type-erased.
pub(crate) trait ErasedBackend: Send + Sync {
    fn places(&self) -> Vec<Place>;
    fn probe(&self) -> Result<()>;
    fn capabilities(&self, place: &Place) -> Result<Capabilities>;
    fn priority_range(&self, place: &Place) -> Result<PriorityRange>;
    fn new_stream(&self, place: &Place, options: StreamOptions) -> Result<Arc<dyn ErasedStream>>;
    fn default_stream(&self, place: &Place) -> Result<Arc<dyn ErasedStream>>;
    fn per_thread_stream(&self, place: &Place) -> Result<Arc<dyn ErasedStream>>;
    fn new_event(&self, place: &Place, flags: EventFlags) -> Result<Arc<dyn ErasedEvent>>;
    fn new_flag(&self, place: &Place) -> Result<Arc<dyn ErasedFlag>>;
    fn live_counts(&self) -> LiveCounts;
}

pub(crate) struct RustBackend<B>(PhantomData<fn() -> B>);

impl<B> RustBackend<B> {
    pub(crate) fn new() -> Self {
        RustBackend(PhantomData)
    }
}

impl<B: DeviceBackend> ErasedBackend for RustBackend<B> {
    fn places(&self) -> Vec<Place> {
        B::places()
    }
    fn probe(&self) -> Result<()> {
        B::probe()
    }
    fn capabilities(&self, place: &Place) -> Result<Capabilities> {
        B::capabilities(place)
    }
    fn priority_range(&self, place: &Place) -> Result<PriorityRange> {
        B::priority_range(place)
    }
    fn new_stream(&self, place: &Place, options: StreamOptions) -> Result<Arc<dyn ErasedStream>> {
        Ok(Arc::new(B::new_stream(place, options)?))
    }
    fn default_stream(&self, place: &Place) -> Result<Arc<dyn ErasedStream>> {
        Ok(Arc::new(B::default_stream(place)?))
    }
    fn per_thread_stream(&self, place: &Place) -> Result<Arc<dyn ErasedStream>> {
        Ok(Arc::new(B::per_thread_stream(place)?))
    }
    fn new_event(&self, place: &Place, flags: EventFlags) -> Result<Arc<dyn ErasedEvent>> {
        Ok(Arc::new(B::new_event(place, flags)?))
    }
    fn new_flag(&self, place: &Place) -> Result<Arc<dyn ErasedFlag>> {
        Ok(Arc::new(B::new_flag(place)?))
    }
    fn live_counts(&self) -> LiveCounts {
        B::live_counts()
    }
}

/// A registered backend's stream, type-erased: arguments arrive as erased handles and are
/// downcast to the backend's own types.
pub(crate) trait ErasedStream: Debug + Send + Sync {
    fn place(&self) -> &Place;
    fn id(&self) -> u64;
    fn priority(&self) -> Priority;
    fn native_priority(&self) -> i32;
    fn is_non_blocking(&self) -> bool;
    fn capabilities(&self) -> Capabilities;
    fn query(&self) -> Result<bool>;
    fn synchronize(&self) -> Result<()>;
    fn completion(&self) -> Completion;
    fn as_any(&self) -> &dyn Any;
    fn record(&self, event: &dyn ErasedEvent) -> Result<()>;
    fn record_event(&self) -> Result<Arc<dyn ErasedEvent>>;
    fn wait_event(&self, event: &dyn ErasedEvent) -> Result<()>;
    fn wait_stream(&self, other: &dyn ErasedStream) -> Result<()>;
    fn launch_host_func(&self, f: HostFn) -> Result<()>;
    fn begin_capture(&self, mode: CaptureMode) -> Result<()>;
    fn end_capture(&self) -> Result<Box<dyn ErasedGraph>>;
    fn is_capturing(&self) -> Result<bool>;
    fn wait_flag(&self, flag: &dyn ErasedFlag, value: u32) -> Result<()>;
    fn write_flag(&self, flag: &dyn ErasedFlag, value: u32) -> Result<()>;
    fn alloc(&self, len: usize) -> Result<Box<dyn ErasedBuffer>>;
    fn alloc_host(&self, len: usize) -> Result<Box<dyn ErasedHostBuffer>>;
    fn copy_from_host(&self, dst: &dyn ErasedBuffer, dst_offset: usize, src: &[u8]) -> Result<()>;
    fn copy_host_to_device(
        &self,
        dst: &dyn ErasedBuffer,
        dst_offset: usize,
        src: &dyn ErasedHostBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    fn copy_device_to_host(
        &self,
        dst: &dyn ErasedHostBuffer,
        dst_offset: usize,
        src: &dyn ErasedBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    fn copy_device_to_device(
        &self,
        dst: &dyn ErasedBuffer,
        dst_offset: usize,
        src: &dyn ErasedBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()>;
    fn fill(&self, dst: &dyn ErasedBuffer, offset: usize, len: usize, value: u8) -> Result<()>;
}

impl<S: DeviceStream> ErasedStream for S {
    fn place(&self) -> &Place {
        DeviceStream::place(self)
    }
    fn id(&self) -> u64 {
        DeviceStream::id(self)
    }
    fn priority(&self) -> Priority {
        DeviceStream::priority(self)
    }
    fn native_priority(&self) -> i32 {
        DeviceStream::native_priority(self)
    }
    fn is_non_blocking(&self) -> bool {
        DeviceStream::is_non_blocking(self)
    }
    fn capabilities(&self) -> Capabilities {
        DeviceStream::capabilities(self)
    }
    fn query(&self) -> Result<bool> {
        DeviceStream::query(self)
    }
    fn synchronize(&self) -> Result<()> {
        DeviceStream::synchronize(self)
    }
    fn completion(&self) -> Completion {
        DeviceStream::completion(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn record(&self, event: &dyn ErasedEvent) -> Result<()> {
        let e = downcast::<S::Event>(event.as_any(), "record", self.place(), event.place())?;
        DeviceStream::record(self, e)
    }
    fn record_event(&self) -> Result<Arc<dyn ErasedEvent>> {
        Ok(Arc::new(DeviceStream::record_event(self)?))
    }
    fn wait_event(&self, event: &dyn ErasedEvent) -> Result<()> {
        let e = downcast::<S::Event>(event.as_any(), "wait_event", self.place(), event.place())?;
        DeviceStream::wait_event(self, e)
    }
    fn wait_stream(&self, other: &dyn ErasedStream) -> Result<()> {
        let o = downcast::<S>(
            other.as_any(),
            "wait_stream",
            self.place(),
            Some(other.place().clone()),
        )?;
        DeviceStream::wait_stream(self, o)
    }
    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        DeviceStream::launch_host_func(self, f)
    }
    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        DeviceStream::begin_capture(self, mode)
    }
    fn end_capture(&self) -> Result<Box<dyn ErasedGraph>> {
        Ok(Box::new(DeviceStream::end_capture(self)?))
    }
    fn is_capturing(&self) -> Result<bool> {
        DeviceStream::is_capturing(self)
    }
    fn wait_flag(&self, flag: &dyn ErasedFlag, value: u32) -> Result<()> {
        let f = downcast::<S::Flag>(
            flag.as_any(),
            "wait_flag",
            self.place(),
            Some(flag.place().clone()),
        )?;
        DeviceStream::wait_flag(self, f, value)
    }
    fn write_flag(&self, flag: &dyn ErasedFlag, value: u32) -> Result<()> {
        let f = downcast::<S::Flag>(
            flag.as_any(),
            "write_flag",
            self.place(),
            Some(flag.place().clone()),
        )?;
        DeviceStream::write_flag(self, f, value)
    }
    fn alloc(&self, len: usize) -> Result<Box<dyn ErasedBuffer>> {
        Ok(Box::new(DeviceStream::alloc(self, len)?))
    }
    fn alloc_host(&self, len: usize) -> Result<Box<dyn ErasedHostBuffer>> {
        Ok(Box::new(DeviceStream::alloc_host(self, len)?))
    }
    fn copy_from_host(&self, dst: &dyn ErasedBuffer, dst_offset: usize, src: &[u8]) -> Result<()> {
        let d = downcast::<S::Buffer>(
            dst.as_any(),
            "copy_from_host",
            self.place(),
            Some(dst.place().clone()),
        )?;
        DeviceStream::copy_from_host(self, d, dst_offset, src)
    }
    fn copy_host_to_device(
        &self,
        dst: &dyn ErasedBuffer,
        dst_offset: usize,
        src: &dyn ErasedHostBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_host_to_device";
        let d = downcast::<S::Buffer>(dst.as_any(), op, self.place(), Some(dst.place().clone()))?;
        let s = downcast::<S::HostBuffer>(src.as_any(), op, self.place(), None)?;
        DeviceStream::copy_host_to_device(self, d, dst_offset, s, src_offset, len)
    }
    fn copy_device_to_host(
        &self,
        dst: &dyn ErasedHostBuffer,
        dst_offset: usize,
        src: &dyn ErasedBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_device_to_host";
        let d = downcast::<S::HostBuffer>(dst.as_any(), op, self.place(), None)?;
        let s = downcast::<S::Buffer>(src.as_any(), op, self.place(), Some(src.place().clone()))?;
        DeviceStream::copy_device_to_host(self, d, dst_offset, s, src_offset, len)
    }
    fn copy_device_to_device(
        &self,
        dst: &dyn ErasedBuffer,
        dst_offset: usize,
        src: &dyn ErasedBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_device_to_device";
        let d = downcast::<S::Buffer>(dst.as_any(), op, self.place(), Some(dst.place().clone()))?;
        let s = downcast::<S::Buffer>(src.as_any(), op, self.place(), Some(src.place().clone()))?;
        DeviceStream::copy_device_to_device(self, d, dst_offset, s, src_offset, len)
    }
    fn fill(&self, dst: &dyn ErasedBuffer, offset: usize, len: usize, value: u8) -> Result<()> {
        let d = downcast::<S::Buffer>(
            dst.as_any(),
            "fill",
            self.place(),
            Some(dst.place().clone()),
        )?;
        DeviceStream::fill(self, d, offset, len, value)
    }
}

/// A registered backend's event, type-erased.
pub(crate) trait ErasedEvent: Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn place(&self) -> Option<Place>;
    fn id(&self) -> u64;
    fn flags(&self) -> EventFlags;
    fn query(&self) -> Result<bool>;
    fn synchronize(&self) -> Result<()>;
    fn completion(&self) -> Completion;
    fn elapsed(&self, end: &dyn ErasedEvent) -> Result<Duration>;
}

impl<E: DeviceEvent> ErasedEvent for E {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn place(&self) -> Option<Place> {
        DeviceEvent::place(self)
    }
    fn id(&self) -> u64 {
        DeviceEvent::id(self)
    }
    fn flags(&self) -> EventFlags {
        DeviceEvent::flags(self)
    }
    fn query(&self) -> Result<bool> {
        DeviceEvent::query(self)
    }
    fn synchronize(&self) -> Result<()> {
        DeviceEvent::synchronize(self)
    }
    fn completion(&self) -> Completion {
        DeviceEvent::completion(self)
    }
    fn elapsed(&self, end: &dyn ErasedEvent) -> Result<Duration> {
        let here = DeviceEvent::place(self).unwrap_or(Place::Cpu);
        let e = downcast::<E>(end.as_any(), "elapsed", &here, end.place())?;
        DeviceEvent::elapsed(self, e)
    }
}

/// A registered backend's graph, type-erased.
pub(crate) trait ErasedGraph: Debug + Send + Sync {
    fn place(&self) -> &Place;
    fn launch(&self, stream: &dyn ErasedStream) -> Result<()>;
}

impl<G: DeviceGraph> ErasedGraph for G {
    fn place(&self) -> &Place {
        DeviceGraph::place(self)
    }
    fn launch(&self, stream: &dyn ErasedStream) -> Result<()> {
        let s = downcast::<G::Stream>(
            stream.as_any(),
            "Graph::launch",
            DeviceGraph::place(self),
            Some(stream.place().clone()),
        )?;
        DeviceGraph::launch(self, s)
    }
}

/// A registered backend's flag, type-erased.
pub(crate) trait ErasedFlag: Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn place(&self) -> &Place;
    fn id(&self) -> u64;
    fn set(&self, value: u32);
    fn get(&self) -> u32;
}

impl<F: DeviceFlag> ErasedFlag for F {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn place(&self) -> &Place {
        DeviceFlag::place(self)
    }
    fn id(&self) -> u64 {
        DeviceFlag::id(self)
    }
    fn set(&self, value: u32) {
        DeviceFlag::set(self, value)
    }
    fn get(&self) -> u32 {
        DeviceFlag::get(self)
    }
}

/// A registered backend's device buffer, type-erased.
pub(crate) trait ErasedBuffer: Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn len(&self) -> usize;
    fn place(&self) -> &Place;
}

impl<B: DeviceBuffer> ErasedBuffer for B {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn len(&self) -> usize {
        DeviceBuffer::len(self)
    }
    fn place(&self) -> &Place {
        DeviceBuffer::place(self)
    }
}

/// A registered backend's host buffer, type-erased.
pub(crate) trait ErasedHostBuffer: Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn len(&self) -> usize;
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()>;
    fn write(&self, offset: usize, data: &[u8]) -> Result<()>;
}

impl<H: HostBuffer> ErasedHostBuffer for H {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn len(&self) -> usize {
        HostBuffer::len(self)
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        HostBuffer::read(self, offset, out)
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        HostBuffer::write(self, offset, data)
    }
}
