//! placeholder (being written)
#![allow(missing_docs, clippy::all)]
use devstream_core::*;
use std::time::Duration;
pub struct CpuBackend;
#[derive(Clone, Debug)]
pub struct CpuStream(Place);
#[derive(Clone, Debug)]
pub struct CpuEvent;
#[derive(Clone, Debug)]
pub struct CpuGraph(Place);
#[derive(Clone, Debug)]
pub struct CpuFlag(Place);
#[derive(Debug)]
pub struct CpuBuffer(Place);
#[derive(Debug)]
pub struct CpuHostBuffer;
impl DeviceBackend for CpuBackend {
    type Stream = CpuStream;
    const KIND: BackendKind = BackendKind::Cpu;
    fn places() -> Vec<Place> {
        vec![Place::Cpu]
    }
    fn probe() -> Result<()> {
        Ok(())
    }
    fn capabilities(_: &Place) -> Result<Capabilities> {
        Ok(Capabilities::none())
    }
    fn priority_range(_: &Place) -> Result<PriorityRange> {
        Ok(PriorityRange::NONE)
    }
    fn new_stream(p: &Place, _: StreamOptions) -> Result<CpuStream> {
        Ok(CpuStream(p.clone()))
    }
    fn default_stream(p: &Place) -> Result<CpuStream> {
        Ok(CpuStream(p.clone()))
    }
    fn per_thread_stream(p: &Place) -> Result<CpuStream> {
        Ok(CpuStream(p.clone()))
    }
    fn new_event(_: &Place, _: EventFlags) -> Result<CpuEvent> {
        Ok(CpuEvent)
    }
    fn new_flag(p: &Place) -> Result<CpuFlag> {
        Ok(CpuFlag(p.clone()))
    }
    fn live_counts() -> LiveCounts {
        LiveCounts::default()
    }
}
impl DeviceStream for CpuStream {
    type Event = CpuEvent;
    type Graph = CpuGraph;
    type Flag = CpuFlag;
    type Buffer = CpuBuffer;
    type HostBuffer = CpuHostBuffer;
    fn place(&self) -> &Place {
        &self.0
    }
    fn id(&self) -> u64 {
        0
    }
    fn priority(&self) -> Priority {
        Priority::Normal
    }
    fn native_priority(&self) -> i32 {
        0
    }
    fn is_non_blocking(&self) -> bool {
        true
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::none()
    }
    fn query(&self) -> Result<bool> {
        Ok(true)
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn record(&self, _: &CpuEvent) -> Result<()> {
        Ok(())
    }
    fn record_event(&self) -> Result<CpuEvent> {
        Ok(CpuEvent)
    }
    fn wait_event(&self, _: &CpuEvent) -> Result<()> {
        Ok(())
    }
    fn wait_stream(&self, _: &Self) -> Result<()> {
        Ok(())
    }
    fn launch_host_func(&self, mut f: HostFn) -> Result<()> {
        f();
        Ok(())
    }
    fn begin_capture(&self, _: CaptureMode) -> Result<()> {
        Ok(())
    }
    fn end_capture(&self) -> Result<CpuGraph> {
        Ok(CpuGraph(self.0.clone()))
    }
    fn is_capturing(&self) -> Result<bool> {
        Ok(false)
    }
    fn wait_flag(&self, _: &CpuFlag, _: u32) -> Result<()> {
        Ok(())
    }
    fn write_flag(&self, _: &CpuFlag, _: u32) -> Result<()> {
        Ok(())
    }
    fn alloc(&self, _: usize) -> Result<CpuBuffer> {
        Ok(CpuBuffer(self.0.clone()))
    }
    fn alloc_host(&self, _: usize) -> Result<CpuHostBuffer> {
        Ok(CpuHostBuffer)
    }
    fn copy_from_host(&self, _: &CpuBuffer, _: usize, _: &[u8]) -> Result<()> {
        Ok(())
    }
    fn copy_host_to_device(
        &self,
        _: &CpuBuffer,
        _: usize,
        _: &CpuHostBuffer,
        _: usize,
        _: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn copy_device_to_host(
        &self,
        _: &CpuHostBuffer,
        _: usize,
        _: &CpuBuffer,
        _: usize,
        _: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn copy_device_to_device(
        &self,
        _: &CpuBuffer,
        _: usize,
        _: &CpuBuffer,
        _: usize,
        _: usize,
    ) -> Result<()> {
        Ok(())
    }
    fn fill(&self, _: &CpuBuffer, _: usize, _: usize, _: u8) -> Result<()> {
        Ok(())
    }
}
impl DeviceEvent for CpuEvent {
    fn place(&self) -> Option<Place> {
        Some(Place::Cpu)
    }
    fn id(&self) -> u64 {
        0
    }
    fn flags(&self) -> EventFlags {
        EventFlags::default()
    }
    fn query(&self) -> Result<bool> {
        Ok(true)
    }
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
    fn elapsed(&self, _: &Self) -> Result<Duration> {
        Err(Error::NotReady)
    }
}
impl DeviceGraph for CpuGraph {
    type Stream = CpuStream;
    fn place(&self) -> &Place {
        &self.0
    }
    fn launch(&self, _: &CpuStream) -> Result<()> {
        Ok(())
    }
}
impl DeviceFlag for CpuFlag {
    fn place(&self) -> &Place {
        &self.0
    }
    fn id(&self) -> u64 {
        0
    }
    fn set(&self, _: u32) {}
    fn get(&self) -> u32 {
        0
    }
}
impl DeviceBuffer for CpuBuffer {
    fn len(&self) -> usize {
        0
    }
    fn place(&self) -> &Place {
        &self.0
    }
}
impl HostBuffer for CpuHostBuffer {
    fn len(&self) -> usize {
        0
    }
    fn read(&self, _: usize, _: &mut [u8]) -> Result<()> {
        Ok(())
    }
    fn write(&self, _: usize, _: &[u8]) -> Result<()> {
        Ok(())
    }
}
