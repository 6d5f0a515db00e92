//! Buffers: host memory standing in for device memory ([`CpuBuffer`]) and host memory for
//! asynchronous copies ([`CpuHostBuffer`]).
//!
//! Each buffer's bytes sit behind their own lock, so queued work on several streams touches
//! them soundly: every operation takes it exclusively ([`BufferData::lock`]), except the ranks
//! of an in-process all-reduce, which share it while each reads and writes only its own slice
//! ([`BufferData::shared`]). Locks are always taken device buffers first (in the order of
//! [`BufferInner::lock_order`]), then the
//! host buffer: a kernel, which runs holding its device buffers' locks, may read or write a host
//! buffer.
//! Queued operations hold `Arc` clones of the buffers they use: dropping a handle while work is
//! queued frees the memory only after that work.

use crate::graph_memory::{CaptureAlloc, CaptureMemory};
use crate::mempool::PoolShared;
use crate::scheduler::running_stream;
use crate::{lock, CPU_PLACE};
use devstream_core::foreign::{self, BackendKey};
use devstream_core::host_fn_access::{
    HostBytes, HostFnAccess, HostFnUses, LockedBytes, QueuedCopies, QueuedCopy,
};
use devstream_core::memory::zeroed;
use devstream_core::traits::check_range;
use devstream_core::{next_id, Place, Result};
use std::ops::{Deref, DerefMut};
#[cfg(feature = "comm")]
use std::sync::RwLockReadGuard;
use std::sync::{Arc, Mutex, RwLock, RwLockWriteGuard, Weak};

/// A device buffer's bytes and their lock. Every operation takes the lock exclusively
/// ([`BufferData::lock`]: the bytes as `&mut [u8]`); the ranks of an in-process all-reduce take
/// it shared ([`BufferData::shared`]) and copy to and from their own, disjoint slices through
/// raw pointers, so that ranks working on one buffer at once never wait for each other (an
/// exclusive lock per chunk would serialise the ranks).
pub(crate) struct BufferData {
    lock: RwLock<()>,
    /// The allocation (`Box<[u8]>` of `capacity` bytes, taken apart so that no `Box` asserts
    /// uniqueness while ranks write through the shared lock); freed on drop unless
    /// [`BufferData::take_block`] took it back for a memory pool.
    ptr: *mut u8,
    /// The bytes the buffer shows (a pool's block may be larger; a graph's block shows all of
    /// it, and each buffer over it sees its own length through [`BufferInner::lock`]).
    len: usize,
    capacity: usize,
    /// The graph-private pool whose statistics count this block until it is freed.
    graph_memory: Option<Weak<CaptureMemory>>,
}

// SAFETY: the bytes are plain memory owned by this value; they are reached only under `lock`:
// exclusively through `Exclusive` (one `&mut [u8]` at a time), or shared through `Shared`,
// whose unsafe methods require callers to touch ranges no other thread touches meanwhile.
unsafe impl Send for BufferData {}
// SAFETY: as above.
unsafe impl Sync for BufferData {}

impl BufferData {
    /// The first `len` bytes of `block` as a buffer's bytes (`len` ≤ `block.len()`).
    pub(crate) fn new(block: Box<[u8]>, len: usize) -> BufferData {
        debug_assert!(len <= block.len());
        let capacity = block.len();
        let ptr = Box::into_raw(block).cast::<u8>();
        BufferData {
            lock: RwLock::new(()),
            ptr,
            len: len.min(capacity),
            capacity,
            graph_memory: None,
        }
    }

    /// `block` as the memory of a graph-private pool: shown whole (every buffer that reuses it
    /// during the capture sees its own length), counted by `memory` until it is freed.
    pub(crate) fn for_graph(block: Box<[u8]>, memory: Weak<CaptureMemory>) -> BufferData {
        let len = block.len();
        let mut data = BufferData::new(block, len);
        data.graph_memory = Some(memory);
        data
    }

    /// The size of the allocation.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The whole allocation, handed back (to the memory pool it came from); the buffer is left
    /// empty.
    pub(crate) fn take_block(&mut self) -> Box<[u8]> {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.capacity);
        self.ptr = std::ptr::NonNull::<u8>::dangling().as_ptr();
        self.len = 0;
        self.capacity = 0;
        // SAFETY: `ptr`/`capacity` came from `Box::into_raw` of a `Box<[u8]>` in `new`; `&mut
        // self` excludes every guard, and the fields now describe an empty slice, which `drop`
        // frees as a zero-length `Box` (no deallocation).
        unsafe { Box::from_raw(slice) }
    }

    /// The first `len` bytes, exclusively (waits for every other holder; a poisoned lock is taken as is:
    /// the bytes are plain memory, valid whatever a panicking holder left in them).
    fn lock(&self, len: usize) -> Exclusive<'_> {
        let guard = devstream_core::sync::write(&self.lock);
        let len = len.min(self.len);
        // SAFETY: the write lock excludes every other `Exclusive` and `Shared`, so this is the
        // only reference to the first `len` (≤ `self.len`) initialised bytes at `ptr` while the
        // guard lives.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.ptr, len) };
        Exclusive {
            _guard: guard,
            bytes,
        }
    }

    /// Shared access for ranks that each touch only their own ranges (see [`Shared`]).
    #[cfg(feature = "comm")]
    fn shared(&self, len: usize) -> Shared<'_> {
        Shared {
            _guard: devstream_core::sync::read(&self.lock),
            data: self,
            len: len.min(self.len),
        }
    }
}

impl Drop for BufferData {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.capacity);
        // SAFETY: `ptr`/`capacity` came from `Box::into_raw` of a `Box<[u8]>` in `new` (or
        // describe the empty slice `take_block` left), and no guard outlives `self`.
        drop(unsafe { Box::from_raw(slice) });
        if let Some(memory) = self.graph_memory.as_ref().and_then(Weak::upgrade) {
            memory.released(self.capacity);
        }
    }
}

/// Exclusive access to a buffer's bytes ([`BufferData::lock`]).
pub(crate) struct Exclusive<'a> {
    _guard: RwLockWriteGuard<'a, ()>,
    bytes: &'a mut [u8],
}

impl Deref for Exclusive<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl DerefMut for Exclusive<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.bytes
    }
}

/// Shared access to a buffer's bytes ([`BufferData::shared`]): no exclusive holder exists while
/// it lives, but other `Shared` holders may copy to and from the buffer at the same time, so
/// its copies are unsafe: the caller keeps to ranges no other thread touches meanwhile.
#[cfg(feature = "comm")]
pub(crate) struct Shared<'a> {
    _guard: RwLockReadGuard<'a, ()>,
    data: &'a BufferData,
    /// The bytes the buffer shows.
    len: usize,
}

#[cfg(feature = "comm")]
impl Shared<'_> {
    /// Copies `out.len()` bytes from offset `at` into `out`.
    ///
    /// # Safety
    /// No other thread writes those bytes while this runs.
    pub(crate) unsafe fn read(&self, at: usize, out: &mut [u8]) -> Result<()> {
        check_range("all_reduce", at, out.len(), self.len)?;
        // SAFETY: in bounds (checked); no exclusive holder exists (the read lock), and the
        // caller guarantees no concurrent writer of this range; `out` is a distinct allocation
        // the caller holds mutably.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.ptr.add(at), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Copies `bytes` to offset `at`.
    ///
    /// # Safety
    /// No other thread reads or writes those bytes while this runs.
    pub(crate) unsafe fn write(&self, at: usize, bytes: &[u8]) -> Result<()> {
        check_range("all_reduce", at, bytes.len(), self.len)?;
        // SAFETY: in bounds (checked); no exclusive holder exists (the read lock), and the
        // caller guarantees no other thread touches this range; `bytes` is a distinct
        // allocation (the caller's scratch).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.data.ptr.add(at), bytes.len())
        };
        Ok(())
    }
}

/// Shared state of a [`CpuBuffer`].
pub(crate) struct BufferInner {
    pub(crate) id: u64,
    pub(crate) len: usize,
    /// The bytes: this buffer's own, or a graph-private block that buffers allocated later in
    /// the same capture reuse once this one is dropped (see `crate::graph_memory`).
    pub(crate) data: Arc<BufferData>,
    /// The memory pool the bytes return to when the last holder (the handle or queued work)
    /// lets go: by then every operation that used them has run.
    pub(crate) pool: Option<Arc<PoolShared>>,
    /// The capture the buffer was allocated in, whose pool takes the block back for reuse when
    /// the handle is dropped during that capture.
    pub(crate) capture: Option<CaptureAlloc>,
}

impl BufferInner {
    /// The buffer's bytes, exclusively (see [`BufferData::lock`]).
    pub(crate) fn lock(&self) -> Exclusive<'_> {
        self.data.lock(self.len)
    }

    /// Shared access for ranks that each touch only their own ranges (see [`Shared`]).
    #[cfg(feature = "comm")]
    pub(crate) fn shared(&self) -> Shared<'_> {
        self.data.shared(self.len)
    }

    /// The key of the crate-wide lock order between device buffers: the bytes' address, the
    /// same for buffers that share a graph-private block.
    pub(crate) fn lock_order(&self) -> usize {
        Arc::as_ptr(&self.data) as usize
    }
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            // A pool's buffer never shares its bytes: only graph-private blocks are shared.
            if let Some(data) = Arc::get_mut(&mut self.data) {
                crate::mempool::give_back(&pool, data.take_block());
            }
        }
    }
}

/// Memory of the CPU place (host memory standing in for device memory), from
/// `CpuStream::alloc`. Zeroed on allocation.
///
/// Dropping it while queued work uses it frees it only after that work.
pub struct CpuBuffer(pub(crate) Arc<BufferInner>);

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        if let Some(capture) = &self.0.capture {
            capture.handle_dropped(&self.0.data);
        }
    }
}

/// The `id` accessor and the `Debug` output (id and length) of a buffer handle over its record.
macro_rules! buffer_handle {
    ($handle:ident) => {
        impl $handle {
            /// A process-unique id.
            pub fn id(&self) -> u64 {
                self.0.id
            }
        }

        devstream_core::debug_fields!($handle, |self| id: self.0.id, len: self.0.len);
    };
}

buffer_handle!(CpuBuffer);

impl devstream_core::DeviceBuffer for CpuBuffer {
    fn len(&self) -> usize {
        self.0.len
    }
    fn place(&self) -> &Place {
        &CPU_PLACE
    }
}

/// Shared state of a [`CpuHostBuffer`]: the bytes, the queued operations that touch them and
/// the host functions given them (`launch_host_func_with`) that have not run.
pub(crate) struct HostInner {
    pub(crate) id: u64,
    pub(crate) len: usize,
    pub(crate) data: Mutex<Box<[u8]>>,
    /// The queued copies touching the buffer, until each has run or is discarded.
    copies: QueuedCopies,
    /// Host functions given the buffer that have not run: copies submitted now wait for them.
    pub(crate) host_fns: HostFnUses,
    /// Held while a copy of the buffer checks `host_fns` and registers itself, and while a
    /// host function given the buffer takes its snapshot of queued uses and registers: every
    /// copy is either in the snapshot or waits for the host function.
    pub(crate) order: Mutex<()>,
}

impl HostInner {
    pub(crate) fn new(len: usize) -> Result<Arc<HostInner>> {
        Ok(Arc::new(HostInner {
            id: next_id(),
            len,
            data: Mutex::new(zeroed(&CPU_PLACE, len)?),
            copies: QueuedCopies::new(),
            host_fns: HostFnUses::new(),
            order: Mutex::new(()),
        }))
    }

    /// Registers a queued operation touching the buffer; the answer's drop (when the
    /// operation has run or is discarded) unregisters it.
    pub(crate) fn begin_use(&self) -> QueuedCopy {
        self.copies.begin()
    }

    /// Number of queued operations touching the buffer.
    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        self.copies.len()
    }

    /// Whether [`HostInner::wait_idle`] would block now: outside host functions and kernels,
    /// while a queued operation touches the buffer or (outside other backends' host functions
    /// too) a host function given it has not run.
    fn would_wait(&self) -> bool {
        running_stream() == 0
            && (!self.copies.is_empty()
                || (!self.host_fns.is_idle() && foreign::running_host_fn().is_none()))
    }

    /// Blocks until no queued operation touches the buffer and every host function given it
    /// has run, unless the caller is a host function or kernel (see [`CpuHostBuffer`]): it
    /// returns at once there.
    fn wait_idle(&self) {
        if running_stream() != 0 {
            // Everything stream-ordered before the running task is complete (a task runs only
            // after all its dependencies, and a copy releases the buffer before it counts as
            // completed); what is still queued is ordered after the task or not at all, and
            // waiting for it could deadlock (work queued after the task, a starved pool, a
            // flag nobody sets yet). A host function given the buffer holds the bytes' lock
            // while it runs, so it is seen completely or not at all.
            return;
        }
        self.copies.wait_idle();
        if foreign::running_host_fn().is_some() {
            // In another backend's host function, a host function given the buffer may be
            // queued behind the caller (on the caller's own stream: no wait across backends
            // shows it), so it is not waited for; it holds the bytes' lock while it runs, so
            // it is seen completely or not at all.
            return;
        }
        self.host_fns.wait_idle();
    }
}

/// The bytes of a host buffer given to a host function, under the lock copies take.
struct CpuHostBytes(Arc<HostInner>);

impl HostBytes for CpuHostBytes {
    fn view(&mut self) -> Box<dyn DerefMut<Target = [u8]> + '_> {
        let bytes = LockedBytes(lock(&self.0.data));
        VIEWED.with(|viewed| viewed.borrow_mut().push(self.0.id));
        Box::new(HeldView {
            bytes,
            id: self.0.id,
        })
    }
}

thread_local! {
    /// The host buffers whose bytes a host function running on this thread was given (their
    /// locks held by [`HeldView`]s).
    static VIEWED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A host function's view of a buffer it was given: the bytes under their lock, noted as held
/// by this thread, so that a `read` or `write` of the same buffer from that host function is
/// refused rather than waiting for the lock its own view holds.
struct HeldView<'a> {
    bytes: LockedBytes<'a>,
    id: u64,
}

impl Deref for HeldView<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl DerefMut for HeldView<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl Drop for HeldView<'_> {
    fn drop(&mut self) {
        VIEWED.with(|viewed| {
            let mut viewed = viewed.borrow_mut();
            if let Some(index) = viewed.iter().rposition(|&id| id == self.id) {
                viewed.swap_remove(index);
            }
        });
    }
}

/// `Error::WouldDeadlock` where the host function running on this thread was given `buffer`:
/// its view holds the bytes' lock.
fn refuse_own_view(op: &'static str, buffer: &HostInner) -> Result<()> {
    if VIEWED.with(|viewed| viewed.borrow().contains(&buffer.id)) {
        return Err(devstream_core::Error::WouldDeadlock {
            op,
            reason: "this host function was given the buffer's bytes: use the slice it was given"
                .into(),
        });
    }
    Ok(())
}

/// Host memory for asynchronous copies, from `CpuStream::alloc_host` (zeroed).
///
/// Host reads and writes wait until no queued copy touches the buffer, so the host never races
/// the stream.
///
/// Inside a host function or kernel, reads and writes never wait: they see stream order up to
/// the running task (every copy ordered before it is complete), never wait for copies queued
/// after it, and a copy that is not ordered with the task (another stream, no event between)
/// is seen either completely or not at all (each copy holds the buffer's lock while it runs).
///
/// ```
/// use devstream_core::{DeviceBackend, DeviceStream, HostBuffer, Place, StreamOptions};
/// let s = devstream_cpu::CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
/// let dev = s.alloc(3).unwrap();
/// let host = s.alloc_host(3).unwrap();
/// s.fill(&dev, 0, 3, 7).unwrap();
/// s.copy_device_to_host(&host, 0, &dev, 0, 3).unwrap();
/// assert_eq!(host.to_vec().unwrap(), [7, 7, 7]); // waits for the copy
/// ```
pub struct CpuHostBuffer(pub(crate) Arc<HostInner>);

buffer_handle!(CpuHostBuffer);

impl devstream_core::HostBuffer for CpuHostBuffer {
    fn len(&self) -> usize {
        self.0.len
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range("HostBuffer::read", offset, out.len(), self.0.len)?;
        refuse_own_view("HostBuffer::read", &self.0)?;
        self.0.wait_idle();
        let data = lock(&self.0.data);
        out.copy_from_slice(&data[offset..offset + out.len()]);
        Ok(())
    }

    fn write(&self, offset: usize, bytes: &[u8]) -> Result<()> {
        check_range("HostBuffer::write", offset, bytes.len(), self.0.len)?;
        refuse_own_view("HostBuffer::write", &self.0)?;
        self.0.wait_idle();
        let mut data = lock(&self.0.data);
        data[offset..offset + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn read_would_wait(&self) -> bool {
        self.0.would_wait()
    }

    fn write_would_wait(&self) -> bool {
        self.0.would_wait()
    }

    fn host_fn_access(&self, runner: BackendKey) -> Result<HostFnAccess> {
        let _order = lock(&self.0.order);
        let queued = self.0.copies.completion().into_iter().collect();
        Ok(HostFnAccess::new(
            &self.0.host_fns,
            BackendKey::of(&CPU_PLACE),
            queued,
            runner,
            Box::new(CpuHostBytes(self.0.clone())),
        ))
    }
}

impl devstream_core::ops::BufferLen for BufferInner {
    fn byte_len(&self) -> usize {
        self.len
    }
}

impl devstream_core::ops::BufferLen for HostInner {
    fn byte_len(&self) -> usize {
        self.len
    }
}
