//! Allocation inside a capture on CUDA and HIP: each capture's private pool (the rules are
//! `devstream_core::graph_memory`'s).
//!
//! Mechanism. A capture's pool (kept with what the capture owns, `CaptureOwned`, under its
//! capture id) hands out blocks of a size class: one that a buffer dropped earlier in the same
//! capture gave back, else a new one, made with the thread in Relaxed capture mode as PyTorch's
//! allocator does, so that the allocation is not captured and no capture counts it as unsafe.
//! Where the device has memory pools, new blocks come from a native pool of devstream's own
//! for the device's capture pools ([`BlockSource`]), allocated on an internal stream that
//! nothing else uses (so the host's wait for the allocation returns at once) and freed there,
//! stream-ordered. Elsewhere they come from `cuMemAlloc` / `hipMalloc` and go back with a
//! synchronous free, on devstream's free thread while no capture runs
//! (`Device::outside_captures`): a synchronous free waits for all of the device's queued work,
//! inside the driver, where it holds a lock that `cuStreamBeginCapture` on another thread
//! waits for, so with a stream held at a flag that only a capturing thread releases it would
//! never return. A block is a [`GraphBlock`] shared (`Arc`) by every buffer
//! that had it; a buffer lets go of it after the work of every stream that used it (the graph
//! keeps the buffers its work uses until its last launch completed), and the last holder frees
//! it. So the address is fixed when the buffer is allocated, valid before the first launch,
//! across replays and after the graph is dropped for as long as a buffer holds it.
//!
//! Not graph memory nodes: a stream-ordered allocation during capture becomes an allocation node
//! whose memory exists only from the node's execution in a launch to its free; an allocation the
//! graph does not free keeps the graph from being launched again until it is freed, and before
//! the first launch the address has nothing behind it, so a buffer kept across replays or past
//! its graph would dangle. Nor a native pool per graph: the blocks are held for the graph's
//! lifetime anyway, so the driver's stream-ordered reuse would never apply within one; the
//! device-wide [`BlockSource`] pool reuses memory across graphs.
//!
//! Reuse is ordered by captured events: a handle dropped during its capture records an event on
//! each of its buffer's users that takes part in that capture (the event stands for the work
//! captured on it so far); the stream that takes the block next waits for those events, which
//! adds the edges to the graph. Launches of a graph that owns memory wait for the previous
//! launch's end (`crate::graph`).

use crate::device::Device;
use crate::error::map_alloc_error;
use crate::ext::CaptureModeGuard;
use crate::hostfn::CaptureOwned;
use crate::raw::{CaptureStatus, DevicePtr, RawApi, RawEvent, RawMemPool, RawResult, RawStream};
use crate::stream::{GpuStream, StreamInner};
use devstream_core::graph_memory::{unsupported_in_capture, GraphMemory};
use devstream_core::mempool::{alloc_retrying, size_class};
use devstream_core::{DevicePool, Error, EventFlags, Result};
use std::any::Any;
use std::sync::{Arc, Weak};

/// A capture's private pool: blocks shared by the buffers that had them, cached with the
/// events their reuse must wait for.
pub(crate) type CaptureMemory<A> = GraphMemory<Arc<GraphBlock<A>>, AfterEvents<A>>;

/// Where a device's capture pools take new blocks from, where it has memory pools: a native
/// pool of devstream's own and an internal stream on which its blocks are allocated and freed,
/// stream-ordered. The stream has no other work, so synchronizing it after an allocation
/// returns at once and makes the block usable from every stream.
#[derive(Clone, Copy)]
pub(crate) struct BlockSource {
    pool: RawMemPool,
    stream: RawStream,
}

impl BlockSource {
    /// A source for device `ordinal` (its context current), whose stream has priority
    /// `priority`; `None` where the pool or the stream cannot be made (then `cuMemAlloc`).
    /// Made with the device: CUDA's stream creation can wait for work queued on other streams,
    /// and the first allocation in a capture may come while the caller holds streams.
    pub(crate) fn new<A: RawApi>(ordinal: usize, priority: i32) -> Option<BlockSource> {
        // SAFETY: the device's context is current (the caller's); a pool without a size
        // limit, living for the process' lifetime.
        let pool = unsafe { A::mem_pool_create(ordinal, 0) }.ok()?;
        // SAFETY: as above.
        match unsafe { A::stream_create(true, priority) } {
            Ok(stream) => Some(BlockSource { pool, stream }),
            Err(_) => {
                // SAFETY: our pool, with no allocation.
                let _ = unsafe { A::mem_pool_destroy(pool) };
                None
            }
        }
    }

    /// A new block of `class` bytes, usable from every stream when this returns.
    fn alloc<A: RawApi>(self, class: usize) -> RawResult<DevicePtr> {
        // SAFETY: the context is current and the thread in Relaxed mode (the caller's); the
        // stream is not capturing (nothing but this source uses it).
        let ptr = unsafe { A::mem_alloc_from_pool_async(class, self.pool, self.stream) }?;
        // SAFETY: as above; the stream holds only this source's allocations and frees,
        // which wait for nothing.
        if let Err(e) = unsafe { A::stream_synchronize(self.stream) } {
            // SAFETY: the block was never handed out.
            let _ = unsafe { A::mem_free_async(ptr, self.stream) };
            return Err(e);
        }
        Ok(ptr)
    }
}

/// Device memory of a capture's pool, freed when its last holder lets go.
pub(crate) struct GraphBlock<A: RawApi> {
    pub(crate) ptr: DevicePtr,
    class: usize,
    device: &'static Device<A>,
    memory: Weak<CaptureMemory<A>>,
    /// Where the block came from: `None`, `cuMemAlloc`.
    source: Option<BlockSource>,
}

impl<A: RawApi> Drop for GraphBlock<A> {
    fn drop(&mut self) {
        let (ptr, class, device) = (self.ptr, self.class, self.device);
        let memory = std::mem::take(&mut self.memory);
        if let Some(source) = self.source {
            // A stream-ordered free on the source's stream: no device-wide synchronization,
            // so at once (on the release thread from a host function, where the runtime
            // forbids calls).
            crate::hostfn::release_off_callback(move || {
                let _relaxed = CaptureModeGuard::<A>::relaxed();
                if device.bind().is_err() {
                    return; // cannot free safely: leak rather than risk a use after free
                }
                // SAFETY: the block came from the source's pool; every holder has let go,
                // each only after the work that used the memory, so nothing uses it.
                if unsafe { A::mem_free_async(ptr, source.stream) }.is_ok() {
                    if let Some(memory) = memory.upgrade() {
                        memory.released(class);
                    }
                }
            });
            return;
        }
        // Makes no runtime call here (the free runs on devstream's free thread), so also
        // from a host function.
        device.outside_captures(Box::new(move || {
            if device.bind().is_err() {
                return; // cannot free safely: leak rather than risk a use after free
            }
            // SAFETY: the block came from `mem_alloc`; every holder has let go, each only
            // after the work that used the memory (buffers after their users' work, the
            // graph after its last launch), so nothing uses it.
            if unsafe { A::mem_free(ptr) }.is_ok() {
                if let Some(memory) = memory.upgrade() {
                    memory.released(class);
                }
            }
        }));
    }
}

/// Events recorded on the streams of a capture when a buffer was dropped during it: the work
/// a reuse of its block must follow. Destroyed with the value (a wait already queued on them
/// stays valid).
pub(crate) struct AfterEvents<A: RawApi> {
    device: &'static Device<A>,
    events: Vec<RawEvent>,
}

impl<A: RawApi> AfterEvents<A> {
    /// Makes `stream` (capturing) wait for every event: edges in the graph.
    fn wait_on(&self, stream: &GpuStream<A>) -> Result<()> {
        for &event in &self.events {
            // SAFETY: the event and the stream are alive and of the same device.
            crate::error::check::<A, _>(unsafe { A::stream_wait_event(stream.raw(), event) })?;
        }
        Ok(())
    }
}

impl<A: RawApi> Drop for AfterEvents<A> {
    fn drop(&mut self) {
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        if self.device.bind().is_err() {
            return;
        }
        for event in self.events.drain(..) {
            // SAFETY: our event; the runtime releases it once waits queued on it are done.
            let _ = unsafe { A::event_destroy(event) };
        }
    }
}

/// What a buffer allocated during a capture keeps of it.
pub(crate) struct GraphAlloc<A: RawApi> {
    pub(crate) block: Arc<GraphBlock<A>>,
    capture: u64,
    memory: Arc<CaptureMemory<A>>,
}

impl<A: RawApi> GraphAlloc<A> {
    /// The buffer's handle was dropped: while its capture runs, the block is cached for reuse
    /// after the work its users have captured so far; afterwards nothing is reused.
    pub(crate) fn handle_dropped(&self, users: Vec<Arc<StreamInner<A>>>) {
        let after = self.after_users(users);
        drop(
            self.memory
                .dropped(self.block.class, self.block.clone(), after),
        );
    }

    /// An event recorded on each user that takes part in this buffer's capture; `None` where
    /// that cannot be done (then the block is not reused).
    fn after_users(&self, users: Vec<Arc<StreamInner<A>>>) -> Option<AfterEvents<A>> {
        if crate::hostfn::in_host_function() {
            return None; // no runtime calls from a host function
        }
        let device = self.block.device;
        let _relaxed = CaptureModeGuard::<A>::relaxed()?;
        device.bind().ok()?;
        let mut after = AfterEvents {
            device,
            events: Vec::new(),
        };
        // This runs on the dropping thread, possibly while another thread ends the capture:
        // the records go into the capture wholly before its end or not at all (`None`: the
        // capture has ended, nothing is reused any more).
        let runtime = crate::device::Runtime::<A>::get().ok()?;
        runtime.while_capturing(self.capture, || {
            for user in &users {
                let raw = user.release_handle();
                // SAFETY: the stream is alive (we hold it).
                let (status, id) = unsafe { A::stream_capture_sequence(raw) }.ok()?;
                if status != CaptureStatus::Active || id != self.capture {
                    continue;
                }
                // SAFETY: the context is current; the event is ours until `after` is dropped.
                let event = unsafe { A::event_create(EventFlags::default()) }.ok()?;
                after.events.push(event);
                // SAFETY: the event and the stream are alive and of the same device; a record
                // on a capturing stream captures its current work into the event.
                unsafe { A::event_record(event, raw) }.ok()?;
            }
            Some(())
        })??;
        Some(after)
    }
}

/// A capture's pool as the [`DevicePool`] a user sees: [`CaptureMemory`]'s, except that
/// reading the statistics first runs the device's releases whose work has completed (a block
/// is freed by a deferred release, which otherwise runs at the device's next allocation or
/// release), so that they show memory given back as soon as its work is done.
struct GraphPool<A: RawApi> {
    memory: Arc<CaptureMemory<A>>,
    device: &'static Device<A>,
}

impl<A: RawApi> std::fmt::Debug for GraphPool<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.memory, f)
    }
}

impl<A: RawApi> DevicePool for GraphPool<A> {
    fn place(&self) -> &devstream_core::Place {
        self.memory.place()
    }
    fn id(&self) -> u64 {
        self.memory.id()
    }
    fn stats(&self) -> Result<devstream_core::PoolStats> {
        if !crate::hostfn::in_host_function() {
            // No runtime calls from a host function: the figures may lag there.
            self.device.collect();
        }
        self.memory.stats()
    }
    fn reset_peak(&self) -> Result<()> {
        self.memory.reset_peak()
    }
    fn release_threshold(&self) -> Result<u64> {
        self.memory.release_threshold()
    }
    fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.memory.set_release_threshold(bytes)
    }
    fn trim(&self, keep_bytes: u64) -> Result<()> {
        self.memory.trim(keep_bytes)
    }
}

/// `memory` of `device` as a user sees it.
fn user_pool<A: RawApi>(
    memory: Arc<CaptureMemory<A>>,
    device: &'static Device<A>,
) -> Arc<dyn DevicePool> {
    Arc::new(GraphPool { memory, device })
}

/// What a capture's `CaptureOwned` holds of its pool; dropped with it (the capture ended, with
/// a graph or not), it ends the pool's capture: nothing cached is reused any more.
struct CaptureMemorySlot<A: RawApi>(Arc<CaptureMemory<A>>);

impl<A: RawApi> Drop for CaptureMemorySlot<A> {
    fn drop(&mut self) {
        drop(self.0.end_capture());
    }
}

/// The pool of the capture `owned`, made on first use.
fn pool_of<A: RawApi>(
    owned: &mut CaptureOwned,
    device: &'static Device<A>,
) -> Arc<CaptureMemory<A>> {
    if let Some(slot) = owned
        .memory
        .as_ref()
        .and_then(|slot| slot.downcast_ref::<CaptureMemorySlot<A>>())
    {
        return slot.0.clone();
    }
    let memory = Arc::new(CaptureMemory::<A>::new(device.place.clone()));
    owned.memory = Some(Box::new(CaptureMemorySlot(memory.clone())));
    memory
}

/// The pool of the capture `id` that `stream` takes part in.
fn capture_pool<A: RawApi>(stream: &GpuStream<A>, id: u64) -> Result<Arc<CaptureMemory<A>>> {
    stream.with_capture_owned(id, |owned| pool_of(owned, stream.device()))
}

/// The pool a graph made from the capture that `owned` describes owns: the capture's, or an
/// empty one where it allocated nothing.
pub(crate) fn graph_pool<A: RawApi>(
    owned: Option<&CaptureOwned>,
    device: &'static Device<A>,
) -> Arc<dyn DevicePool> {
    let memory = owned
        .and_then(|owned| owned.memory.as_ref())
        .and_then(|slot| slot.downcast_ref::<CaptureMemorySlot<A>>())
        .map(|slot| slot.0.clone())
        .unwrap_or_else(|| {
            let empty = Arc::new(CaptureMemory::<A>::new(device.place.clone()));
            drop(empty.end_capture());
            empty
        });
    user_pool(memory, device)
}

/// Whether `memory` (the pool of a graph) holds memory its replays use.
pub(crate) fn owns_memory(memory: &Arc<dyn DevicePool>) -> bool {
    memory.stats().is_ok_and(|stats| stats.reserved_bytes > 0)
}

/// `stream.capture_memory_pool()`: the pool of the capture the stream takes part in.
pub(crate) fn capture_memory_pool<A: RawApi>(stream: &GpuStream<A>) -> Result<Arc<dyn DevicePool>> {
    let device = stream.device();
    if !device.caps.capture_alloc {
        return Err(Error::unsupported("capture_memory_pool", &device.place));
    }
    match stream.capture_sequence()? {
        (CaptureStatus::None, _) => Err(Error::capture(
            "capture_memory_pool",
            "the stream is not capturing",
        )),
        (_, id) => Ok(user_pool(capture_pool(stream, id)?, device)),
    }
}

/// Whether `pool` is a capture's pool of `stream`'s device (which serves only allocations
/// during its capture).
pub(crate) fn is_capture_pool<A: RawApi>(pool: &dyn DevicePool, stream: &GpuStream<A>) -> bool {
    let any: &dyn Any = pool;
    any.is::<GraphPool<A>>() && pool.place() == &stream.device().place
}

/// `len` bytes (`len > 0`) for a buffer of `stream`, capturing in capture `id`, from the
/// capture's pool: the block and what keeps it.
pub(crate) fn alloc_in_capture<A: RawApi>(
    stream: &GpuStream<A>,
    id: u64,
    len: usize,
) -> Result<GraphAlloc<A>> {
    let device = stream.device();
    if !device.caps.capture_alloc {
        return Err(unsupported_in_capture(&device.place));
    }
    let class = size_class(len).ok_or_else(|| Error::out_of_memory(&device.place, len))?;
    let memory = capture_pool(stream, id)?;
    let block = match memory.take(class) {
        Some((block, after)) => {
            if let Err(e) = after.wait_on(stream) {
                drop(memory.dropped(class, block, None));
                return Err(e);
            }
            block
        }
        None => {
            let Some(_relaxed) = CaptureModeGuard::<A>::relaxed() else {
                return Err(unsupported_in_capture(&device.place));
            };
            let source = device.graph_blocks;
            let ptr = alloc_retrying(&*memory, len, || {
                match source {
                    Some(source) => source.alloc::<A>(class),
                    // SAFETY: the context is current (bound by the caller); the thread is in
                    // Relaxed mode, so no capture records or refuses the allocation.
                    None => unsafe { A::mem_alloc(class) },
                }
                .map_err(|e| map_alloc_error::<A>(e, &device.place, len))
            })?;
            memory.created(class);
            Arc::new(GraphBlock {
                ptr,
                class,
                device,
                memory: Arc::downgrade(&memory),
                source,
            })
        }
    };
    Ok(GraphAlloc {
        block,
        capture: id,
        memory,
    })
}
