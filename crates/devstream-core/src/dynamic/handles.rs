//! The erased event, graph, flag and buffer traits, each with its blanket implementation over
//! the typed trait.

use super::{downcast, DynStream};
use crate::{
    Completion, DeviceBuffer, DeviceEvent, DeviceFlag, DeviceGraph, DevicePool, EventFlags,
    HostBuffer, Place, Result,
};
use std::sync::Arc;
use std::time::Duration;

dyn_api! {
    /// A [`DeviceEvent`], type-erased.
    trait DynEvent for E where [E: DeviceEvent] {
    /// [`DeviceEvent::place`].
    fn place(&self) -> Option<Place> { DeviceEvent::place(self) }
    /// [`DeviceEvent::id`].
    fn id(&self) -> u64 { DeviceEvent::id(self) }
    /// [`DeviceEvent::flags`].
    fn flags(&self) -> EventFlags { DeviceEvent::flags(self) }
    /// [`DeviceEvent::query`].
    fn query(&self) -> Result<bool> { DeviceEvent::query(self) }
    /// [`DeviceEvent::synchronize`].
    fn synchronize(&self) -> Result<()> { DeviceEvent::synchronize(self) }
    /// [`DeviceEvent::completion`].
    fn completion(&self) -> Completion { DeviceEvent::completion(self) }
    /// [`DeviceEvent::elapsed`]; `end` of another backend answers `PlaceMismatch`.
    fn elapsed(&self, end: &dyn DynEvent) -> Result<Duration> {
        let here = DeviceEvent::place(self).unwrap_or(Place::Cpu);
        let e = downcast::<E>(end.as_any(), "elapsed", &here, end.place())?;
        DeviceEvent::elapsed(self, e)
    }
}}

dyn_api! {
    /// A [`DeviceGraph`], type-erased.
    trait DynGraph for G where [G: DeviceGraph] {
    /// [`DeviceGraph::place`].
    fn place(&self) -> &Place { DeviceGraph::place(self) }
    /// [`DeviceGraph::launch`]; a stream of another backend answers `PlaceMismatch`.
    fn launch(&self, stream: &dyn DynStream) -> Result<()> {
        let here = DeviceGraph::place(self);
        let there = Some(stream.place().clone());
        let s = downcast::<G::Stream>(stream.as_any(), "Graph::launch", here, there)?;
        DeviceGraph::launch(self, s)
    }
    /// [`DeviceGraph::memory_pool`].
    fn memory_pool(&self) -> Result<Arc<dyn DevicePool>> { DeviceGraph::memory_pool(self) }
}}

dyn_api! {
    /// A [`DeviceFlag`], type-erased.
    trait DynFlag for F where [F: DeviceFlag] {
    /// [`DeviceFlag::place`].
    fn place(&self) -> &Place { DeviceFlag::place(self) }
    /// [`DeviceFlag::id`].
    fn id(&self) -> u64 { DeviceFlag::id(self) }
    /// [`DeviceFlag::set`].
    fn set(&self, value: u32) { DeviceFlag::set(self, value) }
    /// [`DeviceFlag::get`].
    fn get(&self) -> u32 { DeviceFlag::get(self) }
}}

dyn_api! {
    /// A [`DeviceBuffer`], type-erased.
    trait DynBuffer for B where [B: DeviceBuffer] {
    /// [`DeviceBuffer::len`].
    fn len(&self) -> usize { DeviceBuffer::len(self) }
    /// [`DeviceBuffer::is_empty`].
    fn is_empty(&self) -> bool { DeviceBuffer::is_empty(self) }
    /// [`DeviceBuffer::place`].
    fn place(&self) -> &Place { DeviceBuffer::place(self) }
}}

dyn_api! {
    /// A [`HostBuffer`], type-erased.
    trait DynHostBuffer for H where [H: HostBuffer] {
    /// [`HostBuffer::len`].
    fn len(&self) -> usize { HostBuffer::len(self) }
    /// [`HostBuffer::is_empty`].
    fn is_empty(&self) -> bool { HostBuffer::is_empty(self) }
    /// [`HostBuffer::read`].
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        HostBuffer::read(self, offset, out)
    }
    /// [`HostBuffer::write`].
    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        HostBuffer::write(self, offset, data)
    }
    /// [`HostBuffer::read_would_wait`].
    fn read_would_wait(&self) -> bool { HostBuffer::read_would_wait(self) }
    /// [`HostBuffer::write_would_wait`].
    fn write_would_wait(&self) -> bool { HostBuffer::write_would_wait(self) }
    /// [`HostBuffer::host_fn_access`].
    fn host_fn_access(
        &self,
        runner: crate::foreign::BackendKey,
    ) -> Result<crate::host_fn_access::HostFnAccess> {
        HostBuffer::host_fn_access(self, runner)
    }
}}
