//! [`DynBackend`]: a registry entry, type-erased.

use super::{DynEvent, DynFlag, DynStream};
use crate::{
    Capabilities, DeviceBackend, DevicePool, EventFlags, LiveCounts, Place, PoolOptions,
    PriorityRange, Result, StreamOptions,
};
use std::marker::PhantomData;
use std::sync::Arc;

/// A [`DeviceBackend`], type-erased: its handles come back as erased trait objects.
pub trait DynBackend: Send + Sync {
    /// [`DeviceBackend::places`].
    fn places(&self) -> Vec<Place>;
    /// [`DeviceBackend::probe`].
    fn probe(&self) -> Result<()>;
    /// [`DeviceBackend::capabilities`].
    fn capabilities(&self, place: &Place) -> Result<Capabilities>;
    /// [`DeviceBackend::priority_range`].
    fn priority_range(&self, place: &Place) -> Result<PriorityRange>;
    /// [`DeviceBackend::new_stream`].
    fn new_stream(&self, place: &Place, options: StreamOptions) -> Result<Arc<dyn DynStream>>;
    /// [`DeviceBackend::default_stream`].
    fn default_stream(&self, place: &Place) -> Result<Arc<dyn DynStream>>;
    /// [`DeviceBackend::per_thread_stream`].
    fn per_thread_stream(&self, place: &Place) -> Result<Arc<dyn DynStream>>;
    /// [`DeviceBackend::new_event`].
    fn new_event(&self, place: &Place, flags: EventFlags) -> Result<Arc<dyn DynEvent>>;
    /// [`DeviceBackend::new_flag`].
    fn new_flag(&self, place: &Place) -> Result<Arc<dyn DynFlag>>;
    /// [`DeviceBackend::live_counts`].
    fn live_counts(&self) -> LiveCounts;
    /// [`DeviceBackend::default_pool`].
    fn default_pool(&self, place: &Place) -> Result<Arc<dyn DevicePool>>;
    /// [`DeviceBackend::new_pool`].
    fn new_pool(&self, place: &Place, options: PoolOptions) -> Result<Arc<dyn DevicePool>>;
}

/// The [`DynBackend`] of a typed backend `B` (a backend is a type, not a value: this is the
/// value that stands for it).
pub struct ErasedBackend<B>(PhantomData<fn() -> B>);

impl<B> ErasedBackend<B> {
    /// The erased backend `B`.
    pub fn new() -> Self {
        ErasedBackend(PhantomData)
    }
}

impl<B> Default for ErasedBackend<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: DeviceBackend> DynBackend for ErasedBackend<B> {
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
    fn new_stream(&self, place: &Place, options: StreamOptions) -> Result<Arc<dyn DynStream>> {
        Ok(Arc::new(B::new_stream(place, options)?))
    }
    fn default_stream(&self, place: &Place) -> Result<Arc<dyn DynStream>> {
        Ok(Arc::new(B::default_stream(place)?))
    }
    fn per_thread_stream(&self, place: &Place) -> Result<Arc<dyn DynStream>> {
        Ok(Arc::new(B::per_thread_stream(place)?))
    }
    fn new_event(&self, place: &Place, flags: EventFlags) -> Result<Arc<dyn DynEvent>> {
        Ok(Arc::new(B::new_event(place, flags)?))
    }
    fn new_flag(&self, place: &Place) -> Result<Arc<dyn DynFlag>> {
        Ok(Arc::new(B::new_flag(place)?))
    }
    fn live_counts(&self) -> LiveCounts {
        B::live_counts()
    }
    fn default_pool(&self, place: &Place) -> Result<Arc<dyn DevicePool>> {
        B::default_pool(place)
    }
    fn new_pool(&self, place: &Place, options: PoolOptions) -> Result<Arc<dyn DevicePool>> {
        B::new_pool(place, options)
    }
}
