//! The erased event, graph, flag and buffer traits, each with its blanket implementation over
//! the typed trait.

use super::{downcast, DynStream};
use crate::{
    Completion, DeviceBuffer, DeviceEvent, DeviceFlag, DeviceGraph, EventFlags, HostBuffer, Place,
    Result,
};
use std::any::Any;
use std::fmt::Debug;
use std::time::Duration;

/// A [`DeviceEvent`], type-erased.
pub trait DynEvent: Debug + Send + Sync {
    /// The event itself, for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// [`DeviceEvent::place`].
    fn place(&self) -> Option<Place>;
    /// [`DeviceEvent::id`].
    fn id(&self) -> u64;
    /// [`DeviceEvent::flags`].
    fn flags(&self) -> EventFlags;
    /// [`DeviceEvent::query`].
    fn query(&self) -> Result<bool>;
    /// [`DeviceEvent::synchronize`].
    fn synchronize(&self) -> Result<()>;
    /// [`DeviceEvent::completion`].
    fn completion(&self) -> Completion;
    /// [`DeviceEvent::elapsed`]; `end` of another backend answers `PlaceMismatch`.
    fn elapsed(&self, end: &dyn DynEvent) -> Result<Duration>;
}

impl<E: DeviceEvent> DynEvent for E {
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
    fn elapsed(&self, end: &dyn DynEvent) -> Result<Duration> {
        let here = DeviceEvent::place(self).unwrap_or(Place::Cpu);
        let e = downcast::<E>(end.as_any(), "elapsed", &here, end.place())?;
        DeviceEvent::elapsed(self, e)
    }
}

/// A [`DeviceGraph`], type-erased.
pub trait DynGraph: Debug + Send + Sync {
    /// [`DeviceGraph::place`].
    fn place(&self) -> &Place;
    /// [`DeviceGraph::launch`]; a stream of another backend answers `PlaceMismatch`.
    fn launch(&self, stream: &dyn DynStream) -> Result<()>;
}

impl<G: DeviceGraph> DynGraph for G {
    fn place(&self) -> &Place {
        DeviceGraph::place(self)
    }
    fn launch(&self, stream: &dyn DynStream) -> Result<()> {
        let here = DeviceGraph::place(self);
        let there = Some(stream.place().clone());
        let s = downcast::<G::Stream>(stream.as_any(), "Graph::launch", here, there)?;
        DeviceGraph::launch(self, s)
    }
}

/// A [`DeviceFlag`], type-erased.
pub trait DynFlag: Debug + Send + Sync {
    /// The flag itself, for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// [`DeviceFlag::place`].
    fn place(&self) -> &Place;
    /// [`DeviceFlag::id`].
    fn id(&self) -> u64;
    /// [`DeviceFlag::set`].
    fn set(&self, value: u32);
    /// [`DeviceFlag::get`].
    fn get(&self) -> u32;
}

impl<F: DeviceFlag> DynFlag for F {
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

/// A [`DeviceBuffer`], type-erased.
pub trait DynBuffer: Debug + Send + Sync {
    /// The buffer itself, for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// [`DeviceBuffer::len`].
    fn len(&self) -> usize;
    /// [`DeviceBuffer::is_empty`].
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// [`DeviceBuffer::place`].
    fn place(&self) -> &Place;
}

impl<B: DeviceBuffer> DynBuffer for B {
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

/// A [`HostBuffer`], type-erased.
pub trait DynHostBuffer: Debug + Send + Sync {
    /// The buffer itself, for downcasting.
    fn as_any(&self) -> &dyn Any;
    /// [`HostBuffer::len`].
    fn len(&self) -> usize;
    /// [`HostBuffer::is_empty`].
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// [`HostBuffer::read`].
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()>;
    /// [`HostBuffer::write`].
    fn write(&self, offset: usize, data: &[u8]) -> Result<()>;
}

impl<H: HostBuffer> DynHostBuffer for H {
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
