//! Device buffers (stream-ordered where the device has memory pools), and the asynchronous
//! copies and fill between them and pinned host buffers (`crate::host_buffer`).
//!
//! Lifetime rules: a device buffer remembers every stream that used it. Dropped, it is freed
//! stream-ordered: on its allocating stream when that is the only user, otherwise on an
//! internal per-device stream that first waits for every user, so no user stream gains a
//! dependency. Without memory pools the free is deferred until events recorded on every user
//! have completed. A pinned host buffer remembers, per stream, an event recorded after the last
//! copy that used it: host reads and writes wait for those, and once they have completed the
//! memory goes back to the device's pinned-memory cache (never to `cuMemFreeHost`, which
//! synchronizes the whole device).

use crate::device::Device;
use crate::error::{check, map_alloc_error};
use crate::ext::CaptureModeGuard;
use crate::graph_memory::GraphAlloc;
pub use crate::host_buffer::GpuHostBuffer;
use crate::mempool::PoolShared;
use crate::raw::{CaptureStatus, DevicePtr, RawApi, RawEvent, RawMemPool};
use crate::stream::{GpuStream, StreamInner};
use crate::users::StreamUsers;
use devstream_core::ops::{BufferLen, Transfer};
use devstream_core::traits::check_range;
use devstream_core::{DeviceBuffer, Error, EventFlags, Place, Result};
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

struct BufferInner<A: RawApi> {
    ptr: DevicePtr,
    len: usize,
    device: &'static Device<A>,
    stream_ordered: bool,
    /// Every stream that used the buffer; the first is the allocating stream.
    users: StreamUsers<A>,
    /// The memory pool it came from: its live-buffer count and block cache (`crate::mempool`).
    pool: Option<Arc<PoolShared<A>>>,
    /// For a buffer allocated during a capture: its block of the capture's private pool
    /// (`crate::graph_memory`), which `ptr` points into.
    graph: Option<GraphAlloc<A>>,
}

impl<A: RawApi> Drop for BufferInner<A> {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.live.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(graph) = self.graph.take() {
            // The block (shared with the buffers that had it) is let go of after the work of
            // every stream that used this buffer; its last holder frees it.
            let device = self.device;
            let users = self.users.take();
            crate::hostfn::release_off_callback(move || {
                device.release_after(users, Box::new(move || drop(graph)));
            });
            return;
        }
        if self.len == 0 {
            return;
        }
        let mut users = self.users.take();
        let (ptr, device, stream_ordered) = (self.ptr, self.device, self.stream_ordered);
        if let Some(pool) = self.pool.as_ref().filter(|_| users.len() == 1) {
            // Used by one stream only: left for the pool's next allocation of this length on
            // that stream (no runtime call, so also from a host function).
            if let Some(only) = users.pop() {
                match pool.keep(only, self.len, ptr) {
                    Ok(()) => return,
                    Err(only) => users.push(only),
                }
            }
        }
        crate::hostfn::release_off_callback(move || {
            release_device_memory(ptr, device, stream_ordered, users)
        });
    }
}

/// Frees device memory once every stream in `users` is done with it (see the module docs).
pub(crate) fn release_device_memory<A: RawApi>(
    ptr: DevicePtr,
    device: &'static Device<A>,
    stream_ordered: bool,
    users: Vec<Arc<StreamInner<A>>>,
) {
    if device.bind().is_err() {
        return; // cannot free safely: leak rather than risk a use after free
    }
    // devstream's own calls: in Relaxed mode, so that no capture in progress counts them as
    // unsafe.
    let _relaxed = CaptureModeGuard::<A>::relaxed();
    let idle = |s: &Arc<StreamInner<A>>| {
        // SAFETY: the stream is alive (we hold it).
        let status = unsafe { A::stream_is_capturing(s.release_handle()) };
        matches!(status, Ok(CaptureStatus::None))
    };
    if stream_ordered && users.iter().all(idle) {
        if users.len() == 1 {
            // SAFETY: the pointer came from cuMemAllocAsync; only work already queued on
            // this stream uses it, and the free is ordered after that work.
            let _ = unsafe { A::mem_free_async(ptr, users[0].release_handle()) };
            return;
        }
        if device.reclaim_frees.queue::<A>(device, &users, ptr).is_ok() {
            return;
        }
        // The free could not be ordered after every user on the reclaim stream: it is queued
        // once their work has completed instead (below).
    }
    // Without memory pools, a user capturing (the work it queued before its capture can be
    // tracked only once the capture has ended), or no event to order the free after a user:
    // free once every user's work has completed.
    device.release_after(
        users,
        Box::new(move || {
            if !stream_ordered {
                device.outside_captures(Box::new(move || {
                    if device.bind().is_ok() {
                        // SAFETY: every user's queued work has completed.
                        let _ = unsafe { A::mem_free(ptr) };
                    }
                }));
            } else if device.reclaim_frees.queue::<A>(device, &[], ptr).is_err() {
                // Nothing was queued (no event to follow the free): freed untracked.
                if let Ok(reclaim) = device.reclaim_stream() {
                    // SAFETY: every user's queued work has completed; the reclaim stream
                    // orders nothing else before the free.
                    let _ = unsafe { A::mem_free_async(ptr, reclaim) };
                }
            }
        }),
    );
}

/// A free queued on a device's reclaim stream: the events recorded on the buffer's users that
/// it waits for, and an event recorded right after it.
struct ReclaimFree {
    awaited: Vec<RawEvent>,
    freed: RawEvent,
}

/// The frees queued on a device's reclaim stream, in the order the stream runs them, until a
/// synchronisation point has followed them.
///
/// A native pool gives memory above its release threshold back to the system only at a
/// synchronisation point that follows the free (a stream, event or context synchronize). The
/// user synchronizes its own streams, never the reclaim stream, so devstream adds that point at
/// the user's drain points (`synchronize` of a stream or event, a pool's statistics or trim):
/// a free whose awaited events have all completed, as have those of every free before it (the
/// stream runs in order), is preceded on the reclaim stream only by frees whose waits are
/// satisfied, so synchronizing the event after it never waits for user work, only for the
/// frees themselves.
pub(crate) struct ReclaimFrees {
    queue: Mutex<VecDeque<ReclaimFree>>,
    /// Entries in `queue` (read without the lock).
    pending: AtomicUsize,
}

impl ReclaimFrees {
    /// No free queued.
    pub(crate) fn new() -> Self {
        ReclaimFrees {
            queue: Mutex::new(VecDeque::new()),
            pending: AtomicUsize::new(0),
        }
    }

    /// Queues the free of `ptr` on `device`'s reclaim stream after the work every user in
    /// `users` has queued so far. `Err` (nothing queued, the memory still allocated) where the
    /// reclaim stream or an event cannot be had. The context must be current.
    fn queue<A: RawApi>(
        &self,
        device: &'static Device<A>,
        users: &[Arc<StreamInner<A>>],
        ptr: DevicePtr,
    ) -> std::result::Result<(), ()> {
        let reclaim = device.reclaim_stream().map_err(|_| ())?;
        // The order of `queue` is the order of the reclaim stream: queued under its lock.
        let Ok(mut queue) = self.queue.lock() else {
            return Err(());
        };
        let mut events = Vec::with_capacity(users.len() + 1);
        let destroy = |events: Vec<RawEvent>| {
            for event in events {
                // SAFETY: our event, which no queued wait refers to yet.
                let _ = unsafe { A::event_destroy(event) };
            }
        };
        for _ in 0..=users.len() {
            // SAFETY: the context is current.
            match unsafe { A::event_create(EventFlags::default()) } {
                Ok(event) => events.push(event),
                Err(_) => {
                    destroy(events);
                    return Err(());
                }
            }
        }
        let freed = events[users.len()];
        let mut awaited = events;
        awaited.truncate(users.len());
        for (index, user) in users.iter().enumerate() {
            let event = awaited[index];
            // SAFETY: the event and the stream are alive and of this device.
            let recorded = unsafe { A::event_record(event, user.release_handle()) };
            // SAFETY: as above.
            if recorded.is_err() || unsafe { A::stream_wait_event(reclaim, event) }.is_err() {
                // No free is queued. The waits already queued stay on the reclaim stream:
                // they are kept as an entry (with the event after them) so that every wait
                // on the stream is one of an entry's, which `settle` relies on.
                destroy(awaited.split_off(index));
                // SAFETY: the event and the stream are alive and of this device.
                if awaited.is_empty() || unsafe { A::event_record(freed, reclaim) }.is_err() {
                    awaited.push(freed);
                    destroy(awaited);
                } else {
                    queue.push_back(ReclaimFree { awaited, freed });
                    self.pending.store(queue.len(), Ordering::Release);
                }
                return Err(());
            }
        }
        // SAFETY: the pointer came from the stream-ordered allocator; the reclaim stream now
        // waits for every user's queued work.
        let _ = unsafe { A::mem_free_async(ptr, reclaim) };
        // SAFETY: the event and the stream are alive and of this device.
        if unsafe { A::event_record(freed, reclaim) }.is_err() {
            // The free is queued; only its synchronisation point is lost.
            awaited.push(freed);
            destroy(awaited);
            return Ok(());
        }
        queue.push_back(ReclaimFree { awaited, freed });
        self.pending.store(queue.len(), Ordering::Release);
        drop(queue);
        // Entries of programs that never drain do not pile up: the frees already done are
        // settled with every new one.
        self.settle_pending(device, false);
        Ok(())
    }

    /// Synchronizes the frees of the reclaim stream whose awaited work has completed (see the
    /// type's documentation): the native pool then releases what they freed above its
    /// threshold. Never waits for user work; nothing from a host function.
    #[inline]
    pub(crate) fn settle<A: RawApi>(&self, device: &'static Device<A>) {
        if self.pending.load(Ordering::Acquire) != 0 && !crate::hostfn::in_host_function() {
            self.settle_pending(device, true);
        }
    }

    /// Settles the queue's entries in order: with `drained`, each whose awaited events have
    /// completed (synchronizing its event waits only for the frees before it); otherwise only
    /// each whose free has already completed (no waiting at all).
    #[inline(never)]
    fn settle_pending<A: RawApi>(&self, device: &'static Device<A>, drained: bool) {
        // devstream's own calls: in Relaxed mode, so that no capture counts them as unsafe.
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        if device.bind().is_err() {
            return;
        }
        let complete = |event: RawEvent| {
            // SAFETY: our event, alive while its entry is queued.
            let status = unsafe { A::event_query(event) };
            // Anything but "not ready" (done, or an error that will never clear) settles:
            // waiting forever would keep the entry for good.
            !matches!(status, Err(e) if A::error_kind(e.code) == crate::raw::ErrorKind::NotReady)
        };
        loop {
            let entry = {
                let Ok(mut queue) = self.queue.lock() else {
                    return;
                };
                match queue.front() {
                    Some(front)
                        if (drained && front.awaited.iter().all(|&event| complete(event)))
                            || complete(front.freed) => {}
                    _ => return,
                }
                let entry = queue.pop_front();
                self.pending.store(queue.len(), Ordering::Release);
                entry
            };
            let Some(entry) = entry else {
                return;
            };
            // SAFETY: our event; every wait before it on the reclaim stream is satisfied.
            let _ = unsafe { A::event_synchronize(entry.freed) };
            for event in entry.awaited.into_iter().chain([entry.freed]) {
                // SAFETY: our events, complete and referred to by nothing queued.
                let _ = unsafe { A::event_destroy(event) };
            }
        }
    }
}

/// Device memory. Dropping it while queued work uses it frees it only after that work.
pub struct GpuBuffer<A: RawApi> {
    inner: Arc<BufferInner<A>>,
}

impl<A: RawApi> Drop for GpuBuffer<A> {
    fn drop(&mut self) {
        if let Some(graph) = &self.inner.graph {
            graph.handle_dropped(self.inner.users.snapshot());
        }
    }
}

impl<A: RawApi> fmt::Debug for GpuBuffer<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuBuffer")
            .field("place", &self.inner.device.place)
            .field("ptr", &format_args!("{:#x}", self.inner.ptr))
            .field("len", &self.inner.len)
            .field("stream_ordered", &self.inner.stream_ordered)
            .finish()
    }
}

impl<A: RawApi> GpuBuffer<A> {
    pub(crate) fn alloc(stream: &GpuStream<A>, len: usize) -> Result<Self> {
        Self::alloc_in(stream, len, None)
    }

    /// `len` bytes on `stream`: from `pool` (a native pool and its live-buffer count, see
    /// `crate::mempool`) where given, else from the device's current pool or `cuMemAlloc`.
    pub(crate) fn alloc_in(
        stream: &GpuStream<A>,
        len: usize,
        pool: Option<(RawMemPool, Arc<PoolShared<A>>)>,
    ) -> Result<Self> {
        let device = stream.device();
        device.bind()?;
        device.collect();
        let stream_ordered = device.caps.stream_ordered_alloc;
        let ptr = if len == 0 {
            0
        } else {
            let (status, id) = stream.capture_sequence()?;
            if status == CaptureStatus::Active {
                let graph = crate::graph_memory::alloc_in_capture(stream, id, len)?;
                return Ok(GpuBuffer {
                    inner: Arc::new(BufferInner {
                        ptr: graph.block.ptr,
                        len,
                        device,
                        stream_ordered: false,
                        users: StreamUsers::first(stream.inner().clone()),
                        pool: None,
                        graph: Some(graph),
                    }),
                });
            }
            if status != CaptureStatus::None {
                // An invalidated capture takes no work.
                return Err(Error::capture(
                    "alloc",
                    "the stream's capture was invalidated",
                ));
            }
            // A stream-ordered allocation on a stream that does not capture waits for nothing
            // outside its stream, but CUDA counts it as potentially unsafe: it answers
            // `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` and invalidates a Global-mode capture in
            // progress on another thread. Made with this thread in Relaxed mode, as PyTorch's
            // allocator does, it leaves every capture alone. `cuMemAlloc` is synchronous: a
            // potentially unsafe call, refused (like one where the mode cannot be exchanged)
            // before it reaches the driver.
            let _relaxed = if stream_ordered {
                CaptureModeGuard::<A>::relaxed()
            } else {
                None
            };
            if _relaxed.is_none() {
                devstream_core::capture::check_unsafe_call(&device.place, "alloc")?;
            }
            // SAFETY: the context is current and the stream alive.
            let result = unsafe {
                if let Some((raw_pool, _)) = &pool {
                    A::mem_alloc_from_pool_async(len, *raw_pool, stream.raw())
                } else if stream_ordered {
                    A::mem_alloc_async(len, stream.raw())
                } else {
                    A::mem_alloc(len)
                }
            };
            result.map_err(|e| map_alloc_error::<A>(e, &device.place, len))?
        };
        Ok(GpuBuffer {
            inner: Arc::new(BufferInner {
                ptr,
                len,
                device,
                stream_ordered,
                users: StreamUsers::first(stream.inner().clone()),
                pool: pool.map(|(_, shared)| {
                    shared.live.fetch_add(1, Ordering::AcqRel);
                    shared
                }),
                graph: None,
            }),
        })
    }

    /// A buffer of `len` bytes over the block `ptr` of a pool's cache, which a buffer dropped
    /// earlier left on `stream` (`crate::mempool::PoolShared`).
    pub(crate) fn reused(
        stream: &GpuStream<A>,
        len: usize,
        ptr: DevicePtr,
        pool: Arc<PoolShared<A>>,
    ) -> Self {
        pool.live.fetch_add(1, Ordering::AcqRel);
        GpuBuffer {
            inner: Arc::new(BufferInner {
                ptr,
                len,
                device: stream.device(),
                stream_ordered: true,
                users: StreamUsers::first(stream.inner().clone()),
                pool: Some(pool),
                graph: None,
            }),
        }
    }

    /// The device address.
    pub fn device_ptr(&self) -> DevicePtr {
        self.inner.ptr
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.device.ordinal
    }

    /// Whether it came from the stream-ordered allocator.
    pub fn is_stream_ordered(&self) -> bool {
        self.inner.stream_ordered
    }

    /// A reference that keeps the memory allocated while held (for calls whose work is
    /// queued later than they are made: collectives inside a group).
    #[cfg(feature = "comm")]
    pub(crate) fn keep_alive(&self) -> Box<dyn std::any::Any + Send + Sync> {
        Box::new(self.inner.clone())
    }

    /// Records that `stream`'s queued work uses the buffer (so that it is freed only after that
    /// work) and, if the stream is capturing, makes the capture own a reference.
    pub fn use_on(&self, stream: &GpuStream<A>) -> Result<()> {
        stream.same_device("use_on", self.inner.device.ordinal)?;
        self.inner.users.note(stream.inner());
        stream.keep_in_capture(Box::new(self.inner.clone()))?;
        Ok(())
    }
}

impl<A: RawApi> DeviceBuffer for GpuBuffer<A> {
    fn len(&self) -> usize {
        self.inner.len
    }

    fn place(&self) -> &Place {
        &self.inner.device.place
    }
}

fn prepare<A: RawApi>(
    stream: &GpuStream<A>,
    op: &'static str,
    buffer: &GpuBuffer<A>,
) -> Result<()> {
    stream.same_device(op, buffer.inner.device.ordinal)?;
    stream.device().bind()?;
    buffer.inner.users.note(stream.inner());
    stream.keep_in_capture(Box::new(buffer.inner.clone()))?;
    Ok(())
}

pub(crate) fn copy_from_host<A: RawApi>(
    stream: &GpuStream<A>,
    dst: &GpuBuffer<A>,
    dst_offset: usize,
    src: &[u8],
) -> Result<()> {
    check_range("copy_from_host", dst_offset, src.len(), dst.inner.len)?;
    stream.same_device("copy_from_host", dst.inner.device.ordinal)?;
    stream.device().bind()?;
    if stream.capture_sequence()?.0 != CaptureStatus::None {
        return Err(Error::capture(
            "copy_from_host",
            "a copy from pageable memory cannot be captured (copy from a host buffer instead)",
        ));
    }
    if src.is_empty() {
        return Ok(());
    }
    dst.inner.users.note(stream.inner());
    // SAFETY: the range was checked; from pageable memory the runtime stages `src` before it
    // returns, so `src` may be reused at once.
    check::<A, _>(unsafe {
        A::memcpy_htod_async(
            dst.inner.ptr + dst_offset as u64,
            src.as_ptr(),
            src.len(),
            stream.raw(),
        )
    })
}

pub(crate) fn copy_host_to_device<A: RawApi>(
    stream: &GpuStream<A>,
    t: Transfer<&GpuBuffer<A>, &GpuHostBuffer<A>>,
) -> Result<()> {
    t.validate("copy_host_to_device")?;
    prepare(stream, "copy_host_to_device", t.dst)?;
    if t.len == 0 {
        return Ok(());
    }
    t.src.submit(stream, || {
        // SAFETY: ranges checked; the host buffer stays alive until the copy completes.
        check::<A, _>(unsafe {
            A::memcpy_htod_async(
                t.dst.inner.ptr + t.dst_offset as u64,
                t.src.as_ptr().add(t.src_offset),
                t.len,
                stream.raw(),
            )
        })
    })
}

pub(crate) fn copy_device_to_host<A: RawApi>(
    stream: &GpuStream<A>,
    t: Transfer<&GpuHostBuffer<A>, &GpuBuffer<A>>,
) -> Result<()> {
    t.validate("copy_device_to_host")?;
    prepare(stream, "copy_device_to_host", t.src)?;
    if t.len == 0 {
        return Ok(());
    }
    t.dst.submit(stream, || {
        // SAFETY: ranges checked; the host buffer stays alive until the copy completes.
        check::<A, _>(unsafe {
            A::memcpy_dtoh_async(
                t.dst.as_ptr().add(t.dst_offset),
                t.src.inner.ptr + t.src_offset as u64,
                t.len,
                stream.raw(),
            )
        })
    })
}

pub(crate) fn copy_device_to_device<A: RawApi>(
    stream: &GpuStream<A>,
    t: Transfer<&GpuBuffer<A>, &GpuBuffer<A>>,
) -> Result<()> {
    t.validate("copy_device_to_device")?;
    prepare(stream, "copy_device_to_device", t.dst)?;
    prepare(stream, "copy_device_to_device", t.src)?;
    if t.len == 0 {
        return Ok(());
    }
    // SAFETY: ranges checked; both buffers stay alive until the copy completes.
    check::<A, _>(unsafe {
        A::memcpy_dtod_async(
            t.dst.inner.ptr + t.dst_offset as u64,
            t.src.inner.ptr + t.src_offset as u64,
            t.len,
            stream.raw(),
        )
    })
}

pub(crate) fn fill<A: RawApi>(
    stream: &GpuStream<A>,
    dst: &GpuBuffer<A>,
    offset: usize,
    len: usize,
    value: u8,
) -> Result<()> {
    check_range("fill", offset, len, dst.inner.len)?;
    prepare(stream, "fill", dst)?;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: range checked; the buffer stays alive until the fill completes.
    check::<A, _>(unsafe {
        A::memset_d8_async(dst.inner.ptr + offset as u64, value, len, stream.raw())
    })
}

impl<A: RawApi> BufferLen for GpuBuffer<A> {
    fn byte_len(&self) -> usize {
        self.inner.len
    }
}
