//! Flags: a `u32` in pinned, device-mapped host memory that streams wait on (until it is ≥ a
//! value) and write, and the host sets and reads.
//!
//! The value lives zero-extended in an 8-byte word and streams use the 64-bit operations
//! (`cuStreamWaitValue64` GEQ, `cuStreamWriteValue64`): the runtime's GEQ is a cyclic signed
//! comparison, which on 64 bits is exactly unsigned `>=` for every `u32` value — with the 32-bit
//! operation a flag set to `u32::MAX` would not release a wait for 1.

use crate::device::Device;
use crate::error::check;
use crate::raw::{DevicePtr, Optional, RawApi};
use crate::stream::GpuStream;
use crate::users::StreamUsers;
use devstream_core::{DeviceFlag, Error, Place, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

struct FlagInner<A: RawApi> {
    host: *mut u8,
    device_ptr: DevicePtr,
    device: &'static Device<A>,
    id: u64,
    users: StreamUsers<A>,
}

// SAFETY: the host pointer is pinned memory owned by this object and only accessed atomically.
unsafe impl<A: RawApi> Send for FlagInner<A> {}
// SAFETY: as above.
unsafe impl<A: RawApi> Sync for FlagInner<A> {}

impl<A: RawApi> FlagInner<A> {
    fn atomic(&self) -> &AtomicU64 {
        // SAFETY: `host` is an 8-byte aligned (page-aligned) allocation of at least 8 bytes that
        // lives as long as `self`, and is only accessed atomically from the host.
        unsafe { AtomicU64::from_ptr(self.host.cast::<u64>()) }
    }
}

impl<A: RawApi> Drop for FlagInner<A> {
    fn drop(&mut self) {
        let host = SendPtr(self.host);
        let device = self.device;
        self.users.release_after(device, move || {
            let host = host;
            // Every stream operation on the flag has completed: back to the cache.
            device.release_pinned(host.0, FLAG_BYTES);
        });
    }
}

/// Bytes of a flag's word.
const FLAG_BYTES: usize = 8;

struct SendPtr(*mut u8);
// SAFETY: moved into the deferred release only, which frees it once.
unsafe impl Send for SendPtr {}

shared_handle! {
    /// A host-visible `u32` streams can wait on (until it is ≥ a value) and write.
    pub struct GpuFlag<A: RawApi> { inner: Arc<FlagInner<A>>, }
    debug(flag) {
        id: flag.inner.id,
        place: flag.inner.device.place,
        value: flag.get(),
    }
}

impl<A: RawApi> GpuFlag<A> {
    pub(crate) fn create(device: &'static Device<A>) -> Result<Self> {
        if !device.caps.flags {
            return Err(Error::unsupported("new_flag", &device.place));
        }
        device.require(Optional::StreamMemOps, "new_flag")?;
        device.bind()?;
        device.collect();
        let (host, device_ptr) = device.alloc_mapped_zeroed(FLAG_BYTES)?;
        Ok(GpuFlag {
            inner: Arc::new(FlagInner {
                host,
                device_ptr,
                device,
                id: devstream_core::next_id(),
                users: StreamUsers::new(),
            }),
        })
    }

    /// The device address the stream operations use.
    pub fn device_ptr(&self) -> DevicePtr {
        self.inner.device_ptr
    }

    fn prepare(&self, stream: &GpuStream<A>, op: &'static str) -> Result<()> {
        stream.same_device(op, self.inner.device.ordinal)?;
        stream.bind()?;
        // Captured, the operation is replayed by the graph: the graph keeps the flag's word
        // until its last launch completed. The capturing stream queues nothing that uses the
        // flag, so it is not noted as a user: a user is held (its stream object with its live
        // count) for as long as the flag lives, and a graph dropped while a launch waits keeps
        // the flag until the device next runs its deferred releases.
        if !stream.keep_in_capture(Box::new(self.inner.clone()))? {
            self.inner.users.note(stream.inner());
        }
        Ok(())
    }

    pub(crate) fn wait_on(&self, stream: &GpuStream<A>, value: u32) -> Result<()> {
        self.prepare(stream, "wait_flag")?;
        // SAFETY: the mapped address stays valid until every user stream's work completed.
        check::<A, _>(unsafe {
            A::stream_wait_value64(stream.raw(), self.inner.device_ptr, u64::from(value))
        })
    }

    pub(crate) fn write_on(&self, stream: &GpuStream<A>, value: u32) -> Result<()> {
        self.prepare(stream, "write_flag")?;
        // SAFETY: as above.
        check::<A, _>(unsafe {
            A::stream_write_value64(stream.raw(), self.inner.device_ptr, u64::from(value))
        })
    }
}

impl<A: RawApi> DeviceFlag for GpuFlag<A> {
    fn place(&self) -> &Place {
        &self.inner.device.place
    }

    fn id(&self) -> u64 {
        self.inner.id
    }

    fn set(&self, value: u32) {
        self.inner
            .atomic()
            .store(u64::from(value), Ordering::SeqCst);
    }

    fn get(&self) -> u32 {
        // Only zero-extended u32 values are ever stored.
        self.inner.atomic().load(Ordering::SeqCst) as u32
    }
}
