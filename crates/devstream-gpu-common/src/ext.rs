//! The rest of the CUDA stream-management API (shared with HIP where HIP has it): stream
//! attributes (L2 access-policy window, synchronization policy, priority), `copy_attributes`,
//! resetting persisting L2 lines, `attach_mem_async` for managed memory, `capture_info`,
//! `update_capture_dependencies`, the thread's capture-mode exchange, and the stream's native
//! flags, id and device.

use crate::device::{device_of, Device};
use crate::error::{check, map_alloc_error};
use crate::raw::{
    CaptureInfo, DevicePtr, MemAttach, Optional, RawApi, RawGraphNode, StreamAttribute,
    StreamAttributeId,
};
use crate::stream::GpuStream;
use crate::users::StreamUsers;
use devstream_core::{CaptureMode, DeviceStream, Error, Place, Result};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

impl<A: RawApi> GpuStream<A> {
    fn require(&self, call: Optional, op: &'static str) -> Result<()> {
        self.device().require(call, op)
    }

    /// Sets a stream attribute (`cuStreamSetAttribute`); it applies to work submitted later.
    ///
    /// The L2 access-policy window makes kernels launched later on the stream keep the window's
    /// lines in the persisting part of L2 (`hit_prop = Persisting`).
    pub fn set_attribute(&self, attribute: StreamAttribute) -> Result<()> {
        self.require(Optional::StreamAttributes, "set_attribute")?;
        self.bind()?;
        self.inner().mark_native_state();
        // SAFETY: the stream is alive.
        check::<A, _>(unsafe { A::stream_set_attribute(self.raw(), attribute) })
    }

    /// Reads a stream attribute (`cuStreamGetAttribute`).
    pub fn attribute(&self, id: StreamAttributeId) -> Result<StreamAttribute> {
        self.require(Optional::StreamAttributes, "attribute")?;
        self.bind()?;
        // SAFETY: the stream is alive.
        check::<A, _>(unsafe { A::stream_get_attribute(self.raw(), id) })
    }

    /// Copies every attribute of `src` to this stream (`cuStreamCopyAttributes`); both must be
    /// of the same device.
    pub fn copy_attributes_from(&self, src: &GpuStream<A>) -> Result<()> {
        self.require(Optional::StreamAttributes, "copy_attributes")?;
        self.same_device("copy_attributes", src.ordinal())?;
        self.bind()?;
        self.inner().mark_native_state();
        // SAFETY: both streams are alive and of the same context.
        check::<A, _>(unsafe { A::stream_copy_attributes(self.raw(), src.raw()) })
    }

    /// Resets all persisting L2 lines of the stream's device to normal
    /// (`cuCtxResetPersistingL2Cache`), effective when it returns.
    pub fn reset_persisting_l2_cache(&self) -> Result<()> {
        self.require(Optional::ResetPersistingL2, "reset_persisting_l2_cache")?;
        self.device().bind()?;
        // SAFETY: the device's context is current.
        check::<A, _>(unsafe { A::reset_persisting_l2_cache() })
    }

    /// Attaches managed memory to this stream, stream-ordered (`cuStreamAttachMemAsync`):
    /// `Single` lets the host access it whenever this stream is idle.
    pub fn attach_managed(&self, buffer: &GpuManagedBuffer<A>, attach: MemAttach) -> Result<()> {
        self.require(Optional::ManagedMemory, "attach_mem_async")?;
        self.same_device("attach_mem_async", buffer.inner.device.ordinal())?;
        buffer.inner.users.note(self.inner());
        self.bind()?;
        self.inner().mark_native_state();
        // SAFETY: the buffer is a managed allocation of `len` bytes, alive while used.
        check::<A, _>(unsafe {
            A::stream_attach_mem_async(self.raw(), buffer.inner.ptr, 0, attach)
        })
    }

    /// Attaches `len` bytes of managed (or, where the device allows, pageable) memory at
    /// `address` to this stream (`cuStreamAttachMemAsync`).
    ///
    /// # Safety
    /// `address..address + len` is managed memory (or accessible pageable memory) that stays
    /// allocated while work on this stream uses it.
    pub unsafe fn attach_mem_async(
        &self,
        address: DevicePtr,
        len: usize,
        attach: MemAttach,
    ) -> Result<()> {
        self.require(Optional::ManagedMemory, "attach_mem_async")?;
        self.bind()?;
        self.inner().mark_native_state();
        // SAFETY: per this function's contract.
        check::<A, _>(unsafe { A::stream_attach_mem_async(self.raw(), address, len, attach) })
    }

    /// The capture state of the stream (`cuStreamGetCaptureInfo`): status, sequence id, the
    /// graph being captured into and the nodes the next captured node will depend on.
    ///
    /// # Safety
    ///
    /// While this runs, no other thread makes a call on this stream (or on another stream of
    /// its capture) or ends its capture: the runtime owns the dependency array it answers,
    /// which this copies, only until the next call on the stream or the end of the capture.
    /// Whether the stream captures ([`devstream_core::DeviceStream::is_capturing`]) is safe to
    /// ask from any thread.
    pub unsafe fn capture_info(&self) -> Result<CaptureInfo> {
        self.require(Optional::CaptureInfo, "capture_info")?;
        self.bind()?;
        // SAFETY: the stream is alive; no other call on it runs meanwhile (the caller's
        // contract), so the dependency array is valid for the copy.
        check::<A, _>(unsafe { A::stream_capture_info(self.raw()) })
    }

    /// Changes the set of nodes the next captured node depends on
    /// (`cuStreamUpdateCaptureDependencies`): adds `dependencies`, or replaces the set when
    /// `replace`. Fails unless the stream is capturing.
    ///
    /// # Safety
    ///
    /// As for [`GpuStream::capture_info`], which this calls to check the nodes against the
    /// capture's graph: no other thread makes a call on the stream (or another stream of its
    /// capture) or ends the capture while this runs.
    pub unsafe fn update_capture_dependencies(
        &self,
        dependencies: &[RawGraphNode],
        replace: bool,
    ) -> Result<()> {
        self.require(
            Optional::UpdateCaptureDependencies,
            "update_capture_dependencies",
        )?;
        self.bind()?;
        if !dependencies.is_empty() {
            // SAFETY: the stream is alive; the caller's contract keeps the capture's state
            // (its dependency array and graph) from changing meanwhile.
            let info = check::<A, _>(unsafe { A::stream_capture_info(self.raw()) })?;
            if info.status == crate::raw::CaptureStatus::None {
                return Err(Error::capture(
                    "update_capture_dependencies",
                    "the stream is not capturing",
                ));
            }
            if info.graph.is_null() {
                // The nodes cannot be checked against the capture's graph.
                return Err(Error::unsupported(
                    "update_capture_dependencies with nodes (the runtime does not name the \
                     capture's graph)",
                    self.place(),
                ));
            }
            crate::stream::check_nodes_of::<A>(
                "update_capture_dependencies",
                info.graph,
                dependencies,
            )?;
        }
        // SAFETY: the stream is alive; every node belongs to its capture graph (checked above).
        check::<A, _>(unsafe {
            A::stream_update_capture_dependencies(self.raw(), dependencies, replace)
        })
    }

    /// The stream's native creation flags (`cuStreamGetFlags`; bit 0 = non-blocking).
    pub fn native_flags(&self) -> Result<u32> {
        self.bind()?;
        // SAFETY: the stream is alive.
        check::<A, _>(unsafe { A::stream_flags(self.raw()) })
    }

    /// The runtime's unique id of the stream (`cuStreamGetId`, CUDA 12.0+).
    pub fn native_id(&self) -> Result<u64> {
        self.require(Optional::StreamId, "native_id")?;
        self.bind()?;
        // The id is unique over the process' life: a stream whose id was seen is never reused.
        self.inner().mark_native_state();
        // SAFETY: the stream is alive.
        check::<A, _>(unsafe { A::stream_id(self.raw()) })
    }

    /// The device the runtime says the stream belongs to (`cuStreamGetDevice`).
    pub fn native_device(&self) -> Result<usize> {
        self.require(Optional::StreamDevice, "native_device")?;
        self.bind()?;
        // SAFETY: the stream is alive.
        check::<A, _>(unsafe { A::stream_device(self.raw()) })
    }
}

/// Restores the calling thread's previous capture mode when dropped
/// (`cuThreadExchangeStreamCaptureMode`, push/pop style).
#[must_use = "the mode is exchanged only while the guard lives"]
pub struct CaptureModeGuard<A: RawApi> {
    previous: CaptureMode,
    _not_send: PhantomData<(*const (), A)>,
}

impl<A: RawApi> fmt::Debug for CaptureModeGuard<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureModeGuard")
            .field("previous", &self.previous)
            .finish()
    }
}

impl<A: RawApi> CaptureModeGuard<A> {
    /// Sets the calling thread's capture interaction mode to `mode` until the guard drops.
    pub fn exchange(place: &Place, mode: CaptureMode) -> Result<Self> {
        let device = device_of::<A>(place)?;
        device.require(Optional::ExchangeCaptureMode, "exchange_capture_mode")?;
        // SAFETY: the runtime is loaded; the call only touches thread state.
        let previous = check::<A, _>(unsafe { A::thread_exchange_capture_mode(mode) })?;
        Ok(CaptureModeGuard {
            previous,
            _not_send: PhantomData,
        })
    }

    /// Puts the calling thread in `Relaxed` mode until the guard drops, where the runtime can:
    /// for devstream's own bookkeeping calls (a query, a stream destroyed) that a capture in
    /// `Global` or `ThreadLocal` mode would otherwise count as unsafe and invalidate. `None`
    /// where the runtime cannot exchange the mode (such calls must then be left out).
    pub(crate) fn relaxed() -> Option<Self> {
        if !A::supports(Optional::ExchangeCaptureMode) {
            return None;
        }
        // SAFETY: the runtime is loaded (a device of it exists for the caller); the call only
        // touches thread state.
        let previous = unsafe { A::thread_exchange_capture_mode(CaptureMode::Relaxed) }.ok()?;
        Some(CaptureModeGuard {
            previous,
            _not_send: PhantomData,
        })
    }

    /// `Relaxed` mode for a potentially unsafe call that passed devstream's capture check, once
    /// the process has begun a `Global` capture (`devstream_core::capture::global_captures_begun`):
    /// a capture another thread begins between the check and the call then does not count the
    /// call against itself. `None` (nothing exchanged) before any `Global` capture, where the
    /// runtime cannot exchange the mode, and where `involved` says the call's object may take
    /// part in a capture (its own rule then applies, whatever the mode).
    #[inline]
    pub(crate) fn for_checked_call(involved: impl FnOnce() -> bool) -> Option<Self> {
        if !devstream_core::capture::global_captures_begun() || involved() {
            return None;
        }
        Self::relaxed()
    }

    /// The mode that was in force before the guard (and is restored by its drop).
    pub fn previous(&self) -> CaptureMode {
        self.previous
    }
}

impl<A: RawApi> Drop for CaptureModeGuard<A> {
    fn drop(&mut self) {
        // SAFETY: the runtime is loaded (a guard exists only then); thread state only.
        let _ = unsafe { A::thread_exchange_capture_mode(self.previous) };
    }
}

struct ManagedInner<A: RawApi> {
    ptr: DevicePtr,
    len: usize,
    device: &'static Device<A>,
    users: StreamUsers<A>,
}

impl<A: RawApi> Drop for ManagedInner<A> {
    fn drop(&mut self) {
        let (ptr, device) = (self.ptr, self.device);
        self.users.release_after(device, move || {
            // A synchronous free: on the free thread, outside captures, as the device's other
            // synchronous frees (`Device::outside_captures`).
            device.outside_captures(Box::new(move || {
                if device.bind().is_ok() {
                    // SAFETY: every stream that used the memory is done with it.
                    let _ = unsafe { A::mem_free(ptr) };
                }
            }));
        });
    }
}

/// Managed (unified) memory (`cuMemAllocManaged`, attached globally), for
/// [`GpuStream::attach_managed`].
pub struct GpuManagedBuffer<A: RawApi> {
    inner: Arc<ManagedInner<A>>,
}

impl<A: RawApi> fmt::Debug for GpuManagedBuffer<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuManagedBuffer")
            .field("ptr", &format_args!("{:#x}", self.inner.ptr))
            .field("len", &self.inner.len)
            .finish()
    }
}

impl<A: RawApi> GpuManagedBuffer<A> {
    /// Allocates `len` bytes of managed memory on `place`.
    pub fn new(place: &Place, len: usize) -> Result<Self> {
        if len == 0 {
            return Err(Error::InvalidArgument(
                "managed allocations need at least one byte".into(),
            ));
        }
        let device = device_of::<A>(place)?;
        device.require(Optional::ManagedMemory, "alloc_managed")?;
        if !device.properties().managed_memory {
            return Err(Error::unsupported("alloc_managed", place));
        }
        device.bind()?;
        // SAFETY: the context is current.
        let ptr = unsafe { A::mem_alloc_managed(len) }
            .map_err(|e| map_alloc_error::<A>(e, place, len))?;
        Ok(GpuManagedBuffer {
            inner: Arc::new(ManagedInner {
                ptr,
                len,
                device,
                users: StreamUsers::new(),
            }),
        })
    }

    /// The unified address (valid on the host and the device).
    pub fn device_ptr(&self) -> DevicePtr {
        self.inner.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Always `false` (managed buffers are never empty).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }
}
