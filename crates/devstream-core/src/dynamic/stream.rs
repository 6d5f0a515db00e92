//! [`DynStream`]: [`DeviceStream`], type-erased.
//!
//! The operation list is written once: each row below is both the erased trait's method and
//! its blanket implementation's body (which downcasts the erased arguments and calls the typed
//! method).

use super::{downcast, DynBuffer, DynEvent, DynFlag, DynGraph, DynHostBuffer};
use crate::{Capabilities, CaptureMode, Completion, DeviceStream, HostFn, Place, Priority, Result};
use std::sync::Arc;

dyn_api! {
    /// A [`DeviceStream`], type-erased: arguments arrive as erased handles and are downcast to
    /// the backend's own types (another backend's handle answers `PlaceMismatch`).
    trait DynStream for S where [S: DeviceStream] {
    /// [`DeviceStream::place`].
    fn place(&self) -> &Place { DeviceStream::place(self) }
    /// [`DeviceStream::id`].
    fn id(&self) -> u64 { DeviceStream::id(self) }
    /// [`DeviceStream::priority`].
    fn priority(&self) -> Priority { DeviceStream::priority(self) }
    /// [`DeviceStream::native_priority`].
    fn native_priority(&self) -> i32 { DeviceStream::native_priority(self) }
    /// [`DeviceStream::is_non_blocking`].
    fn is_non_blocking(&self) -> bool { DeviceStream::is_non_blocking(self) }
    /// [`DeviceStream::capabilities`].
    fn capabilities(&self) -> Capabilities { DeviceStream::capabilities(self) }
    /// [`DeviceStream::query`].
    fn query(&self) -> Result<bool> { DeviceStream::query(self) }
    /// [`DeviceStream::synchronize`].
    fn synchronize(&self) -> Result<()> { DeviceStream::synchronize(self) }
    /// [`DeviceStream::completion`].
    fn completion(&self) -> Completion { DeviceStream::completion(self) }
    /// [`DeviceStream::record`].
    fn record(&self, event: &dyn DynEvent) -> Result<()> {
        let e = downcast::<S::Event>(event.as_any(), "record", self.place(), event.place())?;
        DeviceStream::record(self, e)
    }
    /// [`DeviceStream::record_event`].
    fn record_event(&self) -> Result<Arc<dyn DynEvent>> {
        Ok(Arc::new(DeviceStream::record_event(self)?))
    }
    /// [`DeviceStream::wait_event`].
    fn wait_event(&self, event: &dyn DynEvent) -> Result<()> {
        let e = downcast::<S::Event>(event.as_any(), "wait_event", self.place(), event.place())?;
        DeviceStream::wait_event(self, e)
    }
    /// [`DeviceStream::wait_stream`].
    fn wait_stream(&self, other: &dyn DynStream) -> Result<()> {
        let there = Some(other.place().clone());
        let o = downcast::<S>(other.as_any(), "wait_stream", self.place(), there)?;
        DeviceStream::wait_stream(self, o)
    }
    /// [`DeviceStream::launch_host_func`].
    fn launch_host_func(&self, f: HostFn) -> Result<()> {
        DeviceStream::launch_host_func(self, f)
    }
    /// [`DeviceStream::begin_capture`].
    fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        DeviceStream::begin_capture(self, mode)
    }
    /// [`DeviceStream::end_capture`].
    fn end_capture(&self) -> Result<Box<dyn DynGraph>> {
        Ok(Box::new(DeviceStream::end_capture(self)?))
    }
    /// [`DeviceStream::is_capturing`].
    fn is_capturing(&self) -> Result<bool> { DeviceStream::is_capturing(self) }
    /// [`DeviceStream::wait_flag`].
    fn wait_flag(&self, flag: &dyn DynFlag, value: u32) -> Result<()> {
        let there = Some(flag.place().clone());
        let f = downcast::<S::Flag>(flag.as_any(), "wait_flag", self.place(), there)?;
        DeviceStream::wait_flag(self, f, value)
    }
    /// [`DeviceStream::write_flag`].
    fn write_flag(&self, flag: &dyn DynFlag, value: u32) -> Result<()> {
        let there = Some(flag.place().clone());
        let f = downcast::<S::Flag>(flag.as_any(), "write_flag", self.place(), there)?;
        DeviceStream::write_flag(self, f, value)
    }
    /// [`DeviceStream::alloc`].
    fn alloc(&self, len: usize) -> Result<Box<dyn DynBuffer>> {
        Ok(Box::new(DeviceStream::alloc(self, len)?))
    }
    /// [`DeviceStream::alloc_host`].
    fn alloc_host(&self, len: usize) -> Result<Box<dyn DynHostBuffer>> {
        Ok(Box::new(DeviceStream::alloc_host(self, len)?))
    }
    /// [`DeviceStream::copy_from_host`].
    fn copy_from_host(&self, dst: &dyn DynBuffer, dst_offset: usize, src: &[u8]) -> Result<()> {
        let d = device::<S>(self, "copy_from_host", dst)?;
        DeviceStream::copy_from_host(self, d, dst_offset, src)
    }
    /// [`DeviceStream::copy_host_to_device`].
    fn copy_host_to_device(
        &self,
        dst: &dyn DynBuffer,
        dst_offset: usize,
        src: &dyn DynHostBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_host_to_device";
        let (d, s) = (device::<S>(self, op, dst)?, host::<S>(self, op, src)?);
        DeviceStream::copy_host_to_device(self, d, dst_offset, s, src_offset, len)
    }
    /// [`DeviceStream::copy_device_to_host`].
    fn copy_device_to_host(
        &self,
        dst: &dyn DynHostBuffer,
        dst_offset: usize,
        src: &dyn DynBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_device_to_host";
        let (d, s) = (host::<S>(self, op, dst)?, device::<S>(self, op, src)?);
        DeviceStream::copy_device_to_host(self, d, dst_offset, s, src_offset, len)
    }
    /// [`DeviceStream::copy_device_to_device`].
    fn copy_device_to_device(
        &self,
        dst: &dyn DynBuffer,
        dst_offset: usize,
        src: &dyn DynBuffer,
        src_offset: usize,
        len: usize,
    ) -> Result<()> {
        let op = "copy_device_to_device";
        let (d, s) = (device::<S>(self, op, dst)?, device::<S>(self, op, src)?);
        DeviceStream::copy_device_to_device(self, d, dst_offset, s, src_offset, len)
    }
    /// [`DeviceStream::fill`].
    fn fill(&self, dst: &dyn DynBuffer, offset: usize, len: usize, value: u8) -> Result<()> {
        let d = device::<S>(self, "fill", dst)?;
        DeviceStream::fill(self, d, offset, len, value)
    }
}}

/// `buffer` as `S`'s device buffer.
fn device<'a, S: DeviceStream>(
    stream: &S,
    op: &'static str,
    buffer: &'a dyn DynBuffer,
) -> Result<&'a S::Buffer> {
    let there = Some(buffer.place().clone());
    downcast::<S::Buffer>(buffer.as_any(), op, DeviceStream::place(stream), there)
}

/// `buffer` as `S`'s host buffer (which has no place: a mismatch names the stream's).
fn host<'a, S: DeviceStream>(
    stream: &S,
    op: &'static str,
    buffer: &'a dyn DynHostBuffer,
) -> Result<&'a S::HostBuffer> {
    downcast::<S::HostBuffer>(buffer.as_any(), op, DeviceStream::place(stream), None)
}
