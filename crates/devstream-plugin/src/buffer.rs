//! `PluginBuffer` (device memory) and `PluginHostBuffer` (host memory for asynchronous copies).

use crate::mempool::PoolShared;
use crate::queue::{
    lock, reap, running_host_fn, runs_after_running_host_fn, Item, Job, RawEvent, StreamCore,
};
use crate::repr::Repr;
use crate::runtime::{RawCopy, Runtime};
use devstream_core::foreign::BackendKey;
use devstream_core::host_fn_access::{HostBytes, HostFnAccess, HostFnUses};
use devstream_core::traits::check_range;
use devstream_core::{Completion, DeviceBuffer, Error, HostBuffer, Place, Result};
use std::alloc::Layout;
use std::ops::DerefMut;
use std::sync::{Arc, Condvar, Mutex};

/// Device memory of a custom-device place.
///
/// On a plug-in place: `device_memory_allocate` (synchronous: `stream_ordered_alloc` is off).
/// The buffer remembers the streams that used it; dropped, it is freed by
/// `device_memory_deallocate` only after the work those streams had submitted is complete.
#[derive(Debug)]
pub struct PluginBuffer(pub(crate) BufferRepr);

pub(crate) type BufferRepr = Repr<AbiBuffer, Box<dyn devstream_core::dynamic::DynBuffer>>;

/// A plug-in place's buffer memory (`Inner`: [`DeviceInner`] or [`HostInner`]), shared with the
/// graphs whose replays use it, so that the memory is freed only when the buffer and every
/// such graph are gone (and after the work of every stream that used it).
pub(crate) struct SharedMemory<Inner>(pub(crate) Arc<Inner>);

impl<Inner> std::ops::Deref for SharedMemory<Inner> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl<Inner: std::fmt::Debug> std::fmt::Debug for SharedMemory<Inner> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A plug-in place's device buffer.
pub(crate) type AbiBuffer = SharedMemory<DeviceInner>;

/// The memory of an [`AbiBuffer`].
pub(crate) struct DeviceInner {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) slot: usize,
    pub(crate) place: Place,
    pub(crate) ptr: usize,
    pub(crate) len: usize,
    /// What was allocated (at least one byte).
    allocated: usize,
    users: Mutex<Vec<Arc<StreamCore>>>,
    /// The memory pool the block returns to (`crate::mempool`), once the buffer is dropped and
    /// the work of every stream that used it is complete.
    pool: Option<Arc<PoolShared>>,
}

debug_some_fields!(DeviceInner as "AbiBuffer" { place, len });

impl AbiBuffer {
    /// A buffer of `len` bytes from `pool`.
    pub(crate) fn from_pool(pool: &Arc<PoolShared>, len: usize) -> Result<AbiBuffer> {
        let (ptr, allocated) = crate::mempool::take(pool, len)?;
        let blocks = &pool.source;
        Ok(SharedMemory(Arc::new(DeviceInner {
            place: devstream_core::mempool::BlockSource::place(blocks).clone(),
            runtime: blocks.runtime().clone(),
            slot: blocks.slot(),
            ptr,
            len,
            allocated,
            users: Mutex::new(Vec::new()),
            pool: Some(pool.clone()),
        })))
    }
}

impl DeviceInner {
    /// Remembers that `core` submitted work using this buffer.
    pub(crate) fn used_by(&self, core: &Arc<StreamCore>) {
        let mut users = lock(&self.users);
        if !users.iter().any(|u| u.id == core.id) {
            users.push(core.clone());
        }
    }

    /// The address of byte `offset` (the caller checked the range).
    pub(crate) fn at(&self, offset: usize) -> usize {
        self.ptr + offset
    }
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        let streams = std::mem::take(&mut *lock(&self.users));
        let (runtime, slot, ptr, allocated) =
            (self.runtime.clone(), self.slot, self.ptr, self.allocated);
        let pool = self.pool.take();
        reap(Job::AfterStreams {
            streams,
            then: Box::new(move || match pool {
                Some(pool) => crate::mempool::give_back(&pool, ptr, allocated),
                None => {
                    if let Err(error) = runtime.deallocate(slot, ptr, allocated) {
                        tracing::warn!("devstream-plugin: device_memory_deallocate: {error}");
                    }
                }
            }),
        });
    }
}

impl DeviceBuffer for PluginBuffer {
    fn len(&self) -> usize {
        self.0.either(|b| b.len, |b| b.len())
    }

    fn place(&self) -> &Place {
        self.0.either(|b| &b.place, |b| b.place())
    }
}

/// Where a host buffer's memory comes from.
enum HostMemory {
    /// `host_memory_allocate` (pinned, where the plug-in pins).
    Plugin {
        runtime: Arc<Runtime>,
        slot: usize,
        allocated: usize,
    },
    /// The Rust allocator (plug-ins without `host_memory_allocate`).
    Rust(Layout),
}

/// Host memory for asynchronous copies on a custom-device place.
///
/// On a plug-in place: `host_memory_allocate` when the plug-in has it, else ordinary host
/// memory; zeroed. Every copy into or out of it records a plug-in event, registered before
/// the copy is submitted; reads and writes from the host wait for those events first and
/// exclude new copies (and each other) while they touch the memory, and a dropped buffer is
/// freed after them. Where a copy's event could not be recorded, when it ends cannot be
/// known: reads and writes answer that error and the memory is never freed (leaked rather
/// than freed under a copy). Inside a host function, copies of its own plug-in queue, and
/// copies of other streams that certainly come after it, are not waited for (see
/// [`PluginStream`](crate::PluginStream)).
///
/// It can be given to a host function of any place (`launch_host_func_with`, where the
/// place's `host_func_buffers` capability is on: plug-ins with host functions), ordered by
/// waits in submission order (`devstream_core::host_fn_access`): the host function waits for
/// the events of the copies registered before it; copies and graph launches that copy the
/// buffer, registered after it, have their stream wait for it first. Host reads and writes
/// wait for such host functions, and inside a host function are refused
/// (`Error::WouldDeadlock`) while one is pending.
#[derive(Debug)]
pub struct PluginHostBuffer(pub(crate) HostRepr);

pub(crate) type HostRepr = Repr<AbiHostBuffer, Box<dyn devstream_core::dynamic::DynHostBuffer>>;

/// A plug-in place's host buffer.
pub(crate) type AbiHostBuffer = SharedMemory<HostInner>;

/// The memory of an [`AbiHostBuffer`] and the copies that may still touch it.
pub(crate) struct HostInner {
    ptr: usize,
    pub(crate) len: usize,
    memory: Option<HostMemory>,
    /// The copies touching the buffer that may be incomplete: up to
    /// [`MAX_PENDING_PER_STREAM`] per stream one by one, so that a host function can wait for
    /// the copies before it and skip those after it (then only the latest, which ends after
    /// the others and stands for them). Its lock is the buffer's order lock: a copy or graph
    /// launch registers here and takes [`HostFnUses::awaited`] under it, a host function given
    /// the buffer takes its snapshot and registers under it, and host reads and writes touch
    /// the memory under it (see [`HostInner::settled`]).
    pending: Mutex<Vec<Tracked>>,
    /// Host functions given the buffer (`launch_host_func_with`) that have not run.
    host_fns: HostFnUses,
    /// The backend of the buffer's place (for the waits of host functions given it).
    owner: BackendKey,
    /// The place's `host_func_buffers` capability: whether it can be given to host functions.
    host_func_buffers: bool,
}

/// How many copies of one stream a host buffer tracks one by one (see `AbiHostBuffer::pending`).
const MAX_PENDING_PER_STREAM: usize = 16;

/// A copy into or out of a host buffer that may be incomplete.
struct Tracked {
    /// Its devstream stream.
    stream: u64,
    /// Recorded right after it.
    raw: Arc<RawEvent>,
    /// It stands for earlier copies of its stream no longer tracked: a host function never
    /// skips it (those may come before the host function).
    covers: bool,
    /// Set once it is in its stream's order.
    queued: Arc<Queued>,
}

/// Whether a tracked copy (or graph launch) is in its stream's order yet. A copy is tracked
/// under the buffer's lock and submitted after the lock is released (a submission may call
/// into the plug-in, which may run a host function that reads the buffer): a host function
/// given the buffer whose snapshot holds the copy waits for this before it is queued, so that
/// on the copy's own stream it is not queued ahead of the copy it waits for
/// (`devstream_core::host_fn_access`, "Registration order is submission order").
#[derive(Default)]
pub(crate) struct Queued {
    done: Mutex<bool>,
    changed: Condvar,
}

impl Queued {
    /// Blocks until a [`QueuedOnDrop`] has marked it.
    fn wait(&self) {
        let mut done = lock(&self.done);
        while !*done {
            done = devstream_core::sync::wait(&self.changed, done);
        }
    }
}

/// Marks a [`Queued`] when dropped: after the submission returned, queued or refused.
pub(crate) struct QueuedOnDrop(pub(crate) Arc<Queued>);

impl Drop for QueuedOnDrop {
    fn drop(&mut self) {
        *lock(&self.0.done) = true;
        self.0.changed.notify_all();
    }
}

impl std::fmt::Debug for HostInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbiHostBuffer")
            .field("len", &self.len)
            .field(
                "pinned",
                &matches!(self.memory, Some(HostMemory::Plugin { .. })),
            )
            .finish_non_exhaustive()
    }
}

impl AbiHostBuffer {
    pub(crate) fn allocate(runtime: &Arc<Runtime>, slot: usize, len: usize) -> Result<Self> {
        HostInner::allocate(runtime, slot, len).map(|inner| SharedMemory(Arc::new(inner)))
    }

    /// [`HostBuffer::host_fn_access`]: under the order lock, the completions of the copies and
    /// graph launches still tracked (every one not known complete, on any stream, also those
    /// whose record is still held on the host), and the host function's registration. A
    /// tracked copy whose record failed is answered as host reads answer it (its error): when
    /// it ends cannot be known, so the bytes cannot be handed over. A record that fails after
    /// the snapshot completes its completion with the error, and the host function, which
    /// takes no error of the uses before it, then runs as a wait on a lost event goes on
    /// (`StreamCore::hand_wait`): a plug-in that queues a copy and then fails its
    /// `record_event` may run that copy while the host function runs.
    fn host_fn_access(&self, runner: BackendKey) -> Result<HostFnAccess> {
        let inner = &self.0;
        if !inner.host_func_buffers {
            return Err(Error::InvalidArgument(
                "this plug-in's host buffers cannot be given to a host function \
                 (launch_host_func_with): its places' host_func_buffers capability is off (the \
                 plug-in has no stream_add_callback, so its streams cannot wait for one)"
                    .into(),
            ));
        }
        let pending = lock(&inner.pending);
        let mut queued = Vec::with_capacity(pending.len());
        let mut submitting = Vec::new();
        for tracked in pending.iter().filter(|t| !t.raw.is_complete()) {
            if let Some(error) = tracked.raw.lost() {
                return Err(error);
            }
            queued.push(crate::notify::completion_of(tracked.raw.clone()));
            submitting.push(tracked.queued.clone());
        }
        let access = HostFnAccess::new(
            &inner.host_fns,
            inner.owner,
            queued,
            runner,
            Box::new(AbiHostBytes(inner.clone())),
        )
        .waiting_until_queued(move || submitting.iter().for_each(|copy| copy.wait()));
        drop(pending);
        Ok(access)
    }
}

/// Whether the calling thread runs a host function: a plug-in's (devstream's callback
/// trampoline marks it) or, through the facade, any backend's.
fn in_host_fn() -> bool {
    running_host_fn().is_some() || devstream_core::foreign::running_host_fn().is_some()
}

/// Has `core` wait, before what it submits next, for each of `host_fns` (the pending host
/// functions given a host buffer, [`HostFnUses::awaited`], taken under the buffer's order lock
/// as the copy or launch ending at `end` registered there), through the stream's own wait on
/// other backends' work (`crate::foreign::wait_completion`). The waits are submitted after the
/// lock is released: a submission may call into the plug-in, which may run a host function
/// that reads the buffer. Where a wait cannot be submitted, the work ending at `end` is not
/// submitted: `end` is recorded alone instead, so that it still completes (it may stand for
/// the stream's earlier copies of the buffer, no longer tracked one by one), and the error is
/// answered.
pub(crate) fn wait_for_host_fns(
    core: &Arc<StreamCore>,
    host_fns: Vec<Completion>,
    end: &Arc<RawEvent>,
) -> Result<()> {
    for awaited in host_fns {
        if let Err(error) = crate::foreign::wait_completion(core, awaited) {
            let end = end.clone();
            core.submit(Item::Op(Box::new(move |core: &StreamCore| {
                core.record_into(&end)
            })))?;
            return Err(error);
        }
    }
    Ok(())
}

/// The bytes of a plug-in host buffer given to a host function. It owns the buffer's memory
/// (freed only after this is dropped), and hands out the whole buffer without a lock: while
/// the host function runs, its use is registered (`HostFnUses`), so every copy and graph
/// launch of the buffer registered before it is complete (its stream waited for them), every
/// one registered after it waits for it, host reads and writes wait for it or are refused, and
/// other host functions given the buffer run before or after it.
struct AbiHostBytes(Arc<HostInner>);

impl HostBytes for AbiHostBytes {
    fn view(&mut self) -> Box<dyn DerefMut<Target = [u8]> + '_> {
        // SAFETY: `len` bytes at `ptr` are the buffer's memory, allocated (at least one byte)
        // and owned by `HostInner`, which this keeps alive for the borrow. No other access
        // overlaps the host function's (the order above); the `&mut self` borrow keeps two
        // views from coexisting.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.0.ptr as *mut u8, self.0.len) };
        Box::new(bytes)
    }
}

impl HostInner {
    fn allocate(runtime: &Arc<Runtime>, slot: usize, len: usize) -> Result<HostInner> {
        let allocated = len.max(1);
        let (ptr, memory) = match runtime.host_allocate(slot, allocated) {
            Some(result) => (
                result?,
                HostMemory::Plugin {
                    runtime: runtime.clone(),
                    slot,
                    allocated,
                },
            ),
            None => {
                let layout = Layout::from_size_align(allocated, 64).map_err(|e| {
                    devstream_core::Error::InvalidArgument(format!("alloc_host({len}): {e}"))
                })?;
                // SAFETY: the layout has a non-zero size.
                let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
                if ptr.is_null() {
                    return Err(devstream_core::Error::out_of_memory(
                        &runtime.place(slot),
                        len,
                    ));
                }
                (ptr as usize, HostMemory::Rust(layout))
            }
        };
        // SAFETY: `allocated` bytes of host memory we own; nothing uses them yet.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, allocated) };
        Ok(HostInner {
            ptr,
            len,
            memory: Some(memory),
            pending: Mutex::new(Vec::new()),
            host_fns: HostFnUses::new(),
            owner: BackendKey::of(&runtime.place(slot)),
            host_func_buffers: runtime.caps.host_func_buffers,
        })
    }

    /// Submits a copy into or out of this buffer on `core`, tracked *before* it is submitted:
    /// the event that marks its end is created first and registered here, and the same
    /// operation that makes the copy records it, so no failure can leave a submitted copy
    /// untracked (a failed record leaves the event lost, and the memory is then never freed).
    /// The stream first waits for the host functions given the buffer that are pending
    /// ([`wait_for_host_fns`]).
    pub(crate) fn copy_tracked(&self, core: &Arc<StreamCore>, copy: RawCopy) -> Result<()> {
        let raw = core.new_raw()?;
        let queued = Arc::new(Queued::default());
        // Marked when this function returns, whatever it answers.
        let _queued = QueuedOnDrop(queued.clone());
        let host_fns = {
            let mut pending = lock(&self.pending);
            pending.retain(|t| !t.raw.is_complete());
            let mut covers = false;
            if pending.iter().filter(|t| t.stream == core.id).count() >= MAX_PENDING_PER_STREAM {
                // The stream's earlier copies end before this one (stream order).
                pending.retain(|t| t.stream != core.id);
                covers = true;
            }
            pending.push(Tracked {
                stream: core.id,
                raw: raw.clone(),
                covers,
                queued,
            });
            self.host_fns.awaited(&core.place)
        };
        wait_for_host_fns(core, host_fns, &raw)?;
        core.submit(Item::Op(Box::new(move |core: &StreamCore| {
            let copied = core.runtime.copy(core.slot, core.raw, copy);
            // Recorded whatever the copy answered: a failed asynchronous copy may be queued.
            let recorded = core.record_into(&raw);
            copied.and(recorded)
        })))
    }

    pub(crate) fn at(&self, offset: usize) -> usize {
        self.ptr + offset
    }

    /// Tracks a graph launch on `core` whose replay may copy into or out of this buffer,
    /// ending at `raw` (recorded after the launch). Never skipped by a host function. Answers
    /// the completions of the host functions given the buffer that are pending, which the
    /// launch waits for ([`wait_for_host_fns`]): the plug-in's copies hold no lock of the
    /// buffer while they run, so a replay is kept off a host function's bytes by the same
    /// order as a copy (a launch made after the host function's submission waits for it; one
    /// made before is in its snapshot), not by the graph's capture order.
    /// `queued` is marked once the launch is submitted.
    pub(crate) fn track(
        &self,
        core: &StreamCore,
        raw: Arc<RawEvent>,
        queued: &Arc<Queued>,
    ) -> Vec<Completion> {
        let mut pending = lock(&self.pending);
        pending.retain(|t| !t.raw.is_complete());
        pending.push(Tracked {
            stream: core.id,
            raw,
            covers: true,
            queued: queued.clone(),
        });
        self.host_fns.awaited(&core.place)
    }

    /// Checks that `len` bytes at `offset` lie in the buffer, then runs `access` on their
    /// address under [`HostInner::settled`]: memory the buffer owns, which no queued copy
    /// touches and none can start touching while `access` runs.
    fn settled_range(
        &self,
        op: &'static str,
        offset: usize,
        len: usize,
        access: impl FnOnce(*mut u8),
    ) -> Result<()> {
        check_range(op, offset, len, self.len)?;
        self.settled(op, || access((self.ptr + offset) as *mut u8))
    }

    /// Runs `access` on the buffer's memory once no queued copy touches it, with new copies
    /// kept out while it runs (they register under the same lock), so host reads and writes
    /// never race a copy or each other.
    ///
    /// Inside a host function, copies of that host function's own plug-in queue are not waited
    /// for: those before it are complete (stream order), those after it cannot start before
    /// it returns, so the access sees the stream's order up to the host function. Nor are
    /// copies of other streams that certainly wait for work queued after the host function
    /// on its stream ([`runs_after_running_host_fn`]): they come after the access in stream
    /// order and cannot start before it ends. Copies that only *may* come after it are not
    /// skipped (that could race them): waiting for them is refused with
    /// `Error::WouldDeadlock` by [`RawEvent::synchronize`], never a hang.
    ///
    /// Host functions given the buffer are waited for first, outside host functions
    /// ([`HostFnUses::wait_idle`]); the access then runs under the lock only while none is
    /// registered, and none can register while it runs (they register under the same lock).
    /// Inside a host function a pending one is never waited for (it may be queued behind the
    /// caller, and which it is cannot be told): the access is refused.
    fn settled<T>(&self, op: &'static str, access: impl FnOnce() -> T) -> Result<T> {
        let own_queue = running_host_fn().map(|(queue, _)| queue);
        // Copies after the running host function (that stays true while it runs).
        let mut after: Vec<Arc<RawEvent>> = Vec::new();
        let skipped = |after: &[Arc<RawEvent>], r: &Arc<RawEvent>| {
            Some(r.queue) == own_queue || after.iter().any(|a| Arc::ptr_eq(a, r))
        };
        loop {
            self.wait_for_host_fns_on_host(op)?;
            let candidates: Vec<(Arc<RawEvent>, bool)> = lock(&self.pending)
                .iter()
                .filter(|t| !skipped(&after, &t.raw))
                .map(|t| (t.raw.clone(), t.covers))
                .collect();
            let mut waits = Vec::with_capacity(candidates.len());
            for (raw, covers) in candidates {
                if own_queue.is_some() && !covers && runs_after_running_host_fn(&raw) {
                    after.push(raw);
                } else {
                    waits.push(raw);
                }
            }
            for raw in &waits {
                raw.synchronize()?;
            }
            let mut pending = lock(&self.pending);
            pending.retain(|t| !waits.iter().any(|w| Arc::ptr_eq(w, &t.raw)));
            if pending.iter().all(|t| skipped(&after, &t.raw)) && self.host_fns.is_idle() {
                // Held while the memory is accessed: copies and host functions given the
                // buffer registering now wait.
                return Ok(access());
            }
            // A copy was submitted, or a host function given the buffer registered,
            // meanwhile: wait for it too.
        }
    }

    /// Blocks until no host function given the buffer is pending; inside a host function,
    /// `Error::WouldDeadlock` while one is (see [`HostInner::settled`]).
    fn wait_for_host_fns_on_host(&self, op: &'static str) -> Result<()> {
        if self.host_fns.is_idle() {
            return Ok(());
        }
        if in_host_fn() {
            return Err(Error::WouldDeadlock {
                op,
                reason: "a host function given the buffer (launch_host_func_with) is pending, \
                         and it may be queued behind the calling host function"
                    .into(),
            });
        }
        self.host_fns.wait_idle();
        Ok(())
    }

    /// Whether [`HostInner::settled`] would block now (or refuse, inside a host function): a
    /// host function given the buffer is pending, or a copy it would not skip is not known to
    /// be complete ([`RawEvent::synchronize_would_block`]).
    fn would_wait(&self) -> bool {
        if !self.host_fns.is_idle() {
            return true;
        }
        let own_queue = running_host_fn().map(|(queue, _)| queue);
        let candidates: Vec<(Arc<RawEvent>, bool)> = lock(&self.pending)
            .iter()
            .filter(|t| Some(t.raw.queue) != own_queue)
            .map(|t| (t.raw.clone(), t.covers))
            .collect();
        candidates.into_iter().any(|(raw, covers)| {
            let after = own_queue.is_some() && !covers && runs_after_running_host_fn(&raw);
            !after && raw.synchronize_would_block()
        })
    }
}

impl Drop for HostInner {
    fn drop(&mut self) {
        let events: Vec<Arc<RawEvent>> = std::mem::take(&mut *lock(&self.pending))
            .into_iter()
            .map(|t| t.raw)
            .collect();
        let ptr = self.ptr;
        let Some(memory) = self.memory.take() else {
            return;
        };
        reap(Job::After {
            events,
            then: Box::new(move || match memory {
                HostMemory::Plugin {
                    runtime,
                    slot,
                    allocated,
                } => {
                    if let Err(error) = runtime.host_deallocate(slot, ptr, allocated) {
                        tracing::warn!("devstream-plugin: host_memory_deallocate: {error}");
                    }
                }
                // SAFETY: allocated above with this layout; the copies using it are complete.
                HostMemory::Rust(layout) => unsafe { std::alloc::dealloc(ptr as *mut u8, layout) },
            }),
        });
    }
}

impl HostBuffer for PluginHostBuffer {
    fn len(&self) -> usize {
        self.0.either(|b| b.len, |b| b.len())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        match &self.0 {
            HostRepr::Abi(b) => b.settled_range("HostBuffer::read", offset, out.len(), |at| {
                // SAFETY: `out.len()` bytes at `at` are ours and settled (see `settled_range`).
                unsafe { std::ptr::copy_nonoverlapping(at, out.as_mut_ptr(), out.len()) }
            }),
            HostRepr::Rust(b) => b.read(offset, out),
        }
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        match &self.0 {
            HostRepr::Abi(b) => b.settled_range("HostBuffer::write", offset, data.len(), |at| {
                // SAFETY: `data.len()` bytes at `at` are ours and settled (see `settled_range`).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), at, data.len()) }
            }),
            HostRepr::Rust(b) => b.write(offset, data),
        }
    }

    fn read_would_wait(&self) -> bool {
        match &self.0 {
            HostRepr::Abi(b) => b.would_wait(),
            HostRepr::Rust(b) => b.read_would_wait(),
        }
    }

    fn write_would_wait(&self) -> bool {
        match &self.0 {
            HostRepr::Abi(b) => b.would_wait(),
            HostRepr::Rust(b) => b.write_would_wait(),
        }
    }

    fn host_fn_access(&self, runner: BackendKey) -> Result<HostFnAccess> {
        match &self.0 {
            HostRepr::Abi(b) => b.host_fn_access(runner),
            HostRepr::Rust(b) => b.host_fn_access(runner),
        }
    }
}
