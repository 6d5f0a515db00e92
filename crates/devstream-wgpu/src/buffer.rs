//! Device buffers, host buffers and the staging that moves bytes between them.
//!
//! * A [`WgpuBuffer`] is a `wgpu::Buffer` (`STORAGE | UNIFORM | COPY_SRC | COPY_DST`): a block of
//!   a memory pool (`mempool.rs`), at least its length rounded up to 4 bytes, or an adopted
//!   buffer. Copies and fills of any offset and length are stream ordered:
//!   4-byte aligned ranges use `copy_buffer_to_buffer` / `clear_buffer`, the rest a small
//!   internal WGSL kernel that merges bytes into whole words (see `kernel.rs`).
//! * Host→device copies go through a mapped staging buffer written before the call returns and
//!   copied by the stream's encoder, so they keep the stream's order (`queue.write_buffer` is
//!   never used for stream work: it would run ahead of already-encoded commands). A copy from a
//!   [`WgpuHostBuffer`] reads the host bytes when it is enqueued if the stream holds nothing
//!   back and no device→host copy into the buffer is pending; otherwise (a host function or a
//!   gate ahead of it may write the buffer first) it reads them once the stream's earlier work is
//!   complete, so it sees every write that precedes it in stream order.
//! * A [`WgpuHostBuffer`] is host memory. A device→host copy goes to a `MAP_READ` staging buffer
//!   that is mapped after its submission completes; the bytes land in the host buffer when the
//!   host reads it (or when a later host→device copy needs them). `read` and `write` wait for
//!   queued copies that touch the buffer.
//! * A [`WgpuHostBuffer`] given to a host function (`launch_host_func_with`,
//!   `devstream_core::host_fn_access`) is ordered against its copies by waits. Every copy of it
//!   registers under the buffer's `order` lock, after its stream has waited for the pending host
//!   functions given the buffer; a host function's snapshot under the same lock has a
//!   completion of the copies registered before (a device→host copy ends when its readback is
//!   mapped, a deferred upload when it has read the bytes), so each copy is either awaited by
//!   the host function or waits for it.

use crate::device::{DeviceShared, Ticket, POLL_SLICE};
use crate::graph_memory::GraphAlloc;
use crate::mempool::Pooled;
use crate::sched::{
    submit_locked, uploads_behind_host_func, waits_behind_host_func, Awaited, Batch, StreamState,
    Upload,
};
use crate::util::{align_down, align_up, lock, Signal};
use devstream_core::debug_fields;
use devstream_core::foreign::BackendKey;
use devstream_core::host_fn_access::{
    HostBytes, HostFnAccess, HostFnUses, LockedBytes, QueuedCopies, QueuedCopy,
};
use devstream_core::traits::check_range;
use devstream_core::{DeviceBuffer, Error, HostBuffer, Place, Result};
use std::ops::DerefMut;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Device memory of one wgpu device.
pub(crate) struct BufferInner {
    pub(crate) id: u64,
    pub(crate) device: Arc<DeviceShared>,
    /// The memory: a pool's block (possibly larger than `len`) or an adopted buffer.
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) len: u64,
    /// Where the block goes back when the last holder lets go (`None`: an adopted buffer,
    /// which wgpu frees once its work is done).
    pooled: Option<Pooled>,
    /// The streams that used the buffer (pooled buffers only): their work must be complete
    /// before the block is handed out again.
    users: Users,
    /// For a buffer allocated during a capture: its block of the capture's private pool
    /// (`crate::graph_memory`), whose `wgpu::Buffer` `buffer` is.
    pub(crate) graph: Option<GraphAlloc>,
}

/// The ids of the streams that used a buffer; the last one apart, so that a stream using the
/// same buffer again and again takes no lock.
#[derive(Default)]
struct Users {
    last: AtomicU64,
    all: Mutex<Vec<u64>>,
}

/// A `wgpu::Buffer` of `size` bytes (a multiple of 4) for a buffer of `len` bytes
/// (`STORAGE | UNIFORM | COPY_SRC | COPY_DST`). What wgpu refuses (out of memory, or a
/// validation rule) is caught by error scopes around the creation, so it never reaches the
/// device's uncaptured-error handler (wgpu's default one panics, and an adopted device may have
/// it); the caller refuses sizes beyond the device's `max_buffer_size` before.
pub(crate) fn create_device_buffer(
    device: &Arc<DeviceShared>,
    size: u64,
    len: usize,
) -> Result<wgpu::Buffer> {
    let ((buffer, out_of_memory_error), validation_error) =
        device.scoped(wgpu::ErrorFilter::Validation, || {
            device.scoped(wgpu::ErrorFilter::OutOfMemory, || {
                device.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("devstream buffer"),
                    size,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::UNIFORM
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })
        });
    match out_of_memory_error.or(validation_error) {
        Some(wgpu::Error::OutOfMemory { .. }) => Err(Error::out_of_memory(&device.place, len)),
        Some(other) => Err(DeviceShared::wgpu_error("Device::create_buffer", other)),
        None => Ok(buffer),
    }
}

impl BufferInner {
    /// A buffer of `len` bytes over `buffer`, a block of `pooled`'s pool.
    pub(crate) fn pooled(
        device: &Arc<DeviceShared>,
        buffer: wgpu::Buffer,
        len: u64,
        pooled: Pooled,
    ) -> Arc<BufferInner> {
        Self::over(device, buffer, len, Some(pooled), None)
    }

    /// A buffer of `len` bytes over the block of a capture's private pool that `graph` holds
    /// (`crate::graph_memory`): the capture orders the block's reuse, so no users are noted.
    pub(crate) fn in_graph(
        device: &Arc<DeviceShared>,
        buffer: wgpu::Buffer,
        len: u64,
        graph: GraphAlloc,
    ) -> Arc<BufferInner> {
        Self::over(device, buffer, len, None, Some(graph))
    }

    /// A buffer of `len` bytes over `buffer`, given back to `pooled` or held by `graph`.
    fn over(
        device: &Arc<DeviceShared>,
        buffer: wgpu::Buffer,
        len: u64,
        pooled: Option<Pooled>,
        graph: Option<GraphAlloc>,
    ) -> Arc<BufferInner> {
        Arc::new(BufferInner {
            id: devstream_core::next_id(),
            device: Arc::clone(device),
            buffer,
            len,
            pooled,
            users: Users::default(),
            graph,
        })
    }

    /// Notes that work of stream `stream` uses the buffer.
    #[inline]
    pub(crate) fn note_user(&self, stream: u64) {
        if self.pooled.is_none() || self.users.last.load(Ordering::Relaxed) == stream {
            return;
        }
        let mut all = lock(&self.users.all);
        if !all.contains(&stream) {
            all.push(stream);
        }
        self.users.last.store(stream, Ordering::Relaxed);
    }

    /// The size a kernel binding of the buffer has: its length rounded up to 4 bytes, so that a
    /// kernel sees the buffer's length, not its block's.
    pub(crate) fn binding_size(&self) -> u64 {
        align_up(self.len.max(4), 4)
    }
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        if let Some(pooled) = self.pooled.take() {
            let users = std::mem::take(&mut *lock(&self.users.all));
            crate::mempool::let_go(pooled, &self.device, &self.buffer, users);
        }
    }
}

/// Device memory on a wgpu device. Dropping it while queued work uses it is safe: wgpu keeps
/// the memory until that work is done.
pub struct WgpuBuffer {
    pub(crate) inner: Arc<BufferInner>,
}

impl Drop for WgpuBuffer {
    fn drop(&mut self) {
        if let Some(graph) = &self.inner.graph {
            graph.handle_dropped();
        }
    }
}

debug_fields!(WgpuBuffer, |self| place: self.inner.device.place, len: self.inner.len);

impl WgpuBuffer {
    /// The wgpu buffer. A buffer from a memory pool is a block of its size class, at least the
    /// length rounded up to 4 bytes; the bytes past the length are not the buffer's.
    pub fn wgpu_buffer(&self) -> &wgpu::Buffer {
        &self.inner.buffer
    }

    /// Wraps an existing buffer of `device` (for example one a renderer or another library
    /// made) so that devstream streams copy to, from and fill it, and bind it to kernels.
    /// It needs `COPY_SRC | COPY_DST` usage (and `STORAGE` to be bound to kernels or to take
    /// unaligned copies and fills) and a size that is a multiple of 4; its length is the
    /// buffer's size.
    pub fn from_wgpu(device: &crate::WgpuDevice, buffer: wgpu::Buffer) -> Result<WgpuBuffer> {
        let needed = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        if !buffer.usage().contains(needed) {
            return Err(Error::InvalidArgument(format!(
                "WgpuBuffer::from_wgpu: the buffer's usage {:?} lacks COPY_SRC | COPY_DST",
                buffer.usage()
            )));
        }
        if !buffer.size().is_multiple_of(4) {
            return Err(Error::InvalidArgument(format!(
                "WgpuBuffer::from_wgpu: the buffer's size {} is not a multiple of 4",
                buffer.size()
            )));
        }
        Ok(WgpuBuffer {
            inner: Arc::new(BufferInner {
                id: devstream_core::next_id(),
                device: Arc::clone(&device.shared),
                len: buffer.size(),
                buffer,
                pooled: None,
                users: Users::default(),
                graph: None,
            }),
        })
    }
}

impl DeviceBuffer for WgpuBuffer {
    fn len(&self) -> usize {
        self.inner.len as usize
    }

    fn place(&self) -> &Place {
        &self.inner.device.place
    }
}

#[derive(Default)]
struct ReadbackState {
    ticket: Option<Ticket>,
    mapped: Option<std::result::Result<(), String>>,
    /// A host function given the host buffer it lands in waits for its mapping: once
    /// submitted, the device's poller drives its mapping (see `Readback::await_landing`).
    awaited: bool,
}

/// A `MAP_READ` staging buffer that a stream copies into; mapped once its submission completes.
pub(crate) struct Readback {
    pub(crate) buffer: wgpu::Buffer,
    pub(crate) device: Arc<DeviceShared>,
    /// The stream whose encoder holds the copy (flushed when a reader needs it).
    pub(crate) stream: u64,
    state: Mutex<ReadbackState>,
}

impl Readback {
    pub(crate) fn new(device: &Arc<DeviceShared>, size: u64, stream: u64) -> Result<Arc<Readback>> {
        let (buffer, error) = device.scoped_staging(size, || {
            device.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("devstream readback"),
                size: align_up(size.max(4), 4),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        if let Some(e) = error {
            return Err(staging_error(device, size, e));
        }
        Ok(Arc::new(Readback {
            buffer,
            device: Arc::clone(device),
            stream,
            state: Mutex::new(ReadbackState::default()),
        }))
    }

    /// Called right after the submission holding the copy: maps the buffer when it completes.
    /// `landing`, the copy's registration with the host buffer it lands in, ends once the
    /// mapping is done (or when its callback is dropped unrun).
    pub(crate) fn submitted(
        self: &Arc<Self>,
        ticket: &Ticket,
        signal: &Arc<Signal>,
        landing: Option<QueuedCopy>,
    ) {
        let weak = Arc::downgrade(self);
        let signal = Arc::clone(signal);
        self.buffer
            .map_async(wgpu::MapMode::Read, .., move |result| {
                if let Some(readback) = weak.upgrade() {
                    lock(&readback.state).mapped = Some(result.map_err(|e| e.to_string()));
                }
                // After the state is set: what waits for the landing finds it mapped.
                drop(landing);
                signal.notify();
            });
        // Set after `map_async`: a readback with a ticket has its mapping requested, which
        // the poller's driving of awaited landings relies on.
        let awaited = {
            let mut state = lock(&self.state);
            state.ticket = Some(ticket.clone());
            state.awaited
        };
        if awaited {
            crate::landing::drive_until_mapped(&self.device, self);
        }
    }

    /// A host function given the host buffer this copy lands in waits for its mapping, which
    /// needs the copy submitted and the device polled once it completes: flushes the copying
    /// stream if its encoder still holds the copy, and has the device's poller drive the
    /// mapping (now, or when a stream holding the copy back submits it: `submitted`).
    fn await_landing(self: &Arc<Self>) {
        let submitted = {
            let mut state = lock(&self.state);
            if state.mapped.is_some() {
                return;
            }
            state.awaited = true;
            state.ticket.is_some()
        };
        if submitted {
            crate::landing::drive_until_mapped(&self.device, self);
        } else {
            crate::sched::flush_stream(&self.device, self.stream);
        }
    }

    /// Whether the mapping callback has run (mapped, or failed).
    pub(crate) fn is_mapped(&self) -> bool {
        lock(&self.state).mapped.is_some()
    }

    pub(crate) fn ticket(&self) -> Option<Ticket> {
        lock(&self.state).ticket.clone()
    }

    /// `Some(Ok)` once mapped, `Some(Err)` if mapping failed, `None` while pending.
    fn mapped(&self) -> Option<Result<()>> {
        lock(&self.state).mapped.clone().map(|r| {
            r.map_err(|message| Error::Driver {
                backend: "wgpu",
                call: "Buffer::map_async",
                code: 0,
                message,
            })
        })
    }

    /// Whether the copy is complete but its mapping callback has not run yet.
    pub(crate) fn complete_but_unmapped(&self) -> bool {
        let state = lock(&self.state);
        state.mapped.is_none()
            && state
                .ticket
                .as_ref()
                .is_some_and(|t| self.device.is_complete(Some(t)))
    }

    /// Blocks until the buffer is mapped (flushing the copying stream if its encoder still holds
    /// the copy).
    pub(crate) fn wait(&self) -> Result<()> {
        loop {
            let seen = self.device.signal.generation();
            match self.mapped() {
                Some(Ok(())) => return Ok(()),
                // A mapping that failed because the device was lost reports the loss.
                Some(Err(e)) => return Err(self.device.fault().unwrap_or(e)),
                None => {}
            }
            if let Some(fault) = self.device.fault() {
                // The copy into this buffer may never have run.
                return Err(fault);
            }
            match self.ticket() {
                None => {
                    crate::sched::flush_stream(&self.device, self.stream);
                    if self.ticket().is_none() {
                        // Held behind a gate of its stream: the poller submits it.
                        self.device.signal.wait_change(seen, Some(POLL_SLICE));
                    }
                }
                Some(ticket) => {
                    self.device.wait_ticket(&ticket, None)?;
                    if self.mapped().is_none() {
                        self.device.poll_nonblocking()?;
                        if self.mapped().is_none() {
                            self.device.signal.wait_change(seen, Some(POLL_SLICE));
                        }
                    }
                }
            }
        }
    }

    /// Reads `len` bytes from `offset` of the mapped buffer into `out`.
    pub(crate) fn read_into(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let view = self
            .buffer
            .get_mapped_range(..)
            .map_err(|e| Error::Driver {
                backend: "wgpu",
                call: "Buffer::get_mapped_range",
                code: 0,
                message: e.to_string(),
            })?;
        out.copy_from_slice(&view[offset..offset + out.len()]);
        Ok(())
    }
}

fn staging_error(device: &DeviceShared, size: u64, error: wgpu::Error) -> Error {
    match error {
        wgpu::Error::OutOfMemory { .. } => Error::out_of_memory(&device.place, size as usize),
        other => DeviceShared::wgpu_error("Device::create_buffer (staging)", other),
    }
}

/// A buffer created mapped, filled with `data` (zero padded to 4 bytes) and unmapped.
pub(crate) fn filled_buffer(
    device: &DeviceShared,
    usage: wgpu::BufferUsages,
    data: &[u8],
) -> Result<wgpu::Buffer> {
    let size = align_up((data.len() as u64).max(4), 4);
    let (buffer, error) = device.scoped_staging(size, || {
        device.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("devstream staging"),
            size,
            usage,
            mapped_at_creation: true,
        })
    });
    if let Some(e) = error {
        return Err(staging_error(device, size, e));
    }
    {
        let mut view = buffer.get_mapped_range_mut(..).map_err(|e| Error::Driver {
            backend: "wgpu",
            call: "Buffer::get_mapped_range_mut",
            code: 0,
            message: e.to_string(),
        })?;
        view.slice(..data.len()).copy_from_slice(data);
    }
    buffer.unmap();
    Ok(buffer)
}

/// Encodes a host→device copy of `data` to `dst[offset..]` into `encoder`: staged now, copied
/// when the encoder runs.
pub(crate) fn encode_upload(
    device: &DeviceShared,
    encoder: &mut wgpu::CommandEncoder,
    dst: &wgpu::Buffer,
    offset: u64,
    data: &[u8],
) -> Result<()> {
    let len = data.len() as u64;
    if len == 0 {
        return Ok(());
    }
    if offset.is_multiple_of(4) && len.is_multiple_of(4) {
        let staging = filled_buffer(
            device,
            wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            data,
        )?;
        encoder.copy_buffer_to_buffer(&staging, 0, dst, offset, len);
    } else {
        let staging = filled_buffer(
            device,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            data,
        )?;
        crate::kernel::copy_bytes(device, encoder, &staging, 0, dst, offset, len)?;
    }
    Ok(())
}

/// Encodes a device→device copy of any alignment.
pub(crate) fn encode_copy(
    device: &DeviceShared,
    encoder: &mut wgpu::CommandEncoder,
    src: &wgpu::Buffer,
    src_offset: u64,
    dst: &wgpu::Buffer,
    dst_offset: u64,
    len: u64,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    if src == dst {
        // wgpu refuses a copy within one buffer: go through a temporary copy of the source.
        let start = align_down(src_offset, 4);
        let end = align_up(src_offset + len, 4);
        let (temp, error) = device.scoped_staging(end - start, || {
            device.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("devstream copy temp"),
                size: end - start,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        if let Some(e) = error {
            return Err(staging_error(device, end - start, e));
        }
        encoder.copy_buffer_to_buffer(src, start, &temp, 0, end - start);
        return encode_copy(
            device,
            encoder,
            &temp,
            src_offset - start,
            dst,
            dst_offset,
            len,
        );
    }
    if src_offset.is_multiple_of(4) && dst_offset.is_multiple_of(4) && len.is_multiple_of(4) {
        encoder.copy_buffer_to_buffer(src, src_offset, dst, dst_offset, len);
        Ok(())
    } else {
        crate::kernel::copy_bytes(device, encoder, src, src_offset, dst, dst_offset, len)
    }
}

/// Encodes a fill of any alignment.
pub(crate) fn encode_fill(
    device: &DeviceShared,
    encoder: &mut wgpu::CommandEncoder,
    dst: &wgpu::Buffer,
    offset: u64,
    len: u64,
    value: u8,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    if value == 0 && offset.is_multiple_of(4) && len.is_multiple_of(4) {
        encoder.clear_buffer(dst, offset, Some(len));
        Ok(())
    } else {
        crate::kernel::fill_bytes(device, encoder, dst, offset, len, value)
    }
}

/// A device→host copy not yet applied to the host buffer.
pub(crate) struct PendingWrite {
    pub(crate) readback: Arc<Readback>,
    pub(crate) staging_offset: usize,
    pub(crate) host_offset: usize,
    pub(crate) len: usize,
}

/// Host memory plus the device→host copies still landing in it.
pub(crate) struct HostInner {
    pub(crate) len: usize,
    data: Mutex<Box<[u8]>>,
    pending: Mutex<Vec<PendingWrite>>,
    /// Deferred host→device copies that have not read the buffer yet.
    uploads: Mutex<usize>,
    uploads_done: Condvar,
    /// The copies a host function given the buffer waits for: device→host copies until their
    /// readback is mapped, deferred uploads until they have read the bytes.
    pub(crate) copies: QueuedCopies,
    /// Host functions given the buffer that have not run: copies submitted now wait for them.
    pub(crate) host_fns: HostFnUses,
    /// Held while a copy of the buffer waits for `host_fns` and registers itself, and while a
    /// host function given the buffer takes its snapshot of `copies` and registers: every copy
    /// is either in the snapshot or waits for the host function.
    pub(crate) order: Mutex<()>,
}

impl HostInner {
    /// A zeroed host buffer of `len` bytes for `place`, or `Error::OutOfMemory`.
    pub(crate) fn new(place: &Place, len: usize) -> Result<Arc<HostInner>> {
        Ok(Arc::new(HostInner {
            len,
            data: Mutex::new(devstream_core::memory::zeroed(place, len)?),
            pending: Mutex::new(Vec::new()),
            uploads: Mutex::new(0),
            uploads_done: Condvar::new(),
            copies: QueuedCopies::new(),
            host_fns: HostFnUses::new(),
            order: Mutex::new(()),
        }))
    }

    pub(crate) fn has_pending_writes(&self) -> bool {
        !lock(&self.pending).is_empty()
    }

    pub(crate) fn add_pending(&self, write: PendingWrite) {
        lock(&self.pending).push(write);
    }

    /// Registers a deferred upload from this buffer: counted until [`HostInner::end_upload`],
    /// and a queued copy (for host functions given the buffer) until the answer is dropped.
    pub(crate) fn begin_upload(&self) -> QueuedCopy {
        *lock(&self.uploads) += 1;
        // A writer inside a host function waits for the count to change (see `write`).
        self.uploads_done.notify_all();
        self.copies.begin()
    }

    /// Deferred host→device copies from this buffer that have not read it yet.
    pub(crate) fn uploads_in_flight(&self) -> usize {
        *lock(&self.uploads)
    }

    /// Notes that a deferred upload from this buffer has read it (or was dropped unrun).
    pub(crate) fn end_upload(&self) {
        let mut uploads = lock(&self.uploads);
        *uploads = uploads.saturating_sub(1);
        drop(uploads);
        self.uploads_done.notify_all();
    }

    /// Copies `len` bytes from `offset` (host data, after applying ready copies).
    pub(crate) fn snapshot(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.apply_mapped()?;
        Ok(lock(&self.data)[offset..offset + len].to_vec())
    }

    /// Applies every mapped pending copy, in enqueue order, to the host data.
    ///
    /// The data lock is taken first: a host function given the buffer holds it while it runs,
    /// and whoever waits for it then holds no other lock of the buffer (a copy registering
    /// itself under the scheduler lock takes `pending`).
    fn apply_mapped(&self) -> Result<()> {
        let mut data = lock(&self.data);
        let mut pending = lock(&self.pending);
        apply_landed(&mut pending, &mut data, false)
    }

    /// The host data, held, with every mapped pending copy applied first (for a host function
    /// given the buffer). A copy whose mapping failed stays pending, so that the next `read`
    /// reports it.
    fn landed_data(&self) -> MutexGuard<'_, Box<[u8]>> {
        let mut data = lock(&self.data);
        // Only a mapping that failed is an error here, and it is kept for the next read.
        let _kept = apply_landed(&mut lock(&self.pending), &mut data, true);
        data
    }

    /// Waits until no host function given the buffer is pending, before a host read or write.
    /// Inside a host function (of any backend) it refuses with `Error::WouldDeadlock` instead:
    /// the pending one may be queued after the caller, or be the caller itself, whose bytes
    /// are held while it runs.
    fn wait_for_host_fns(&self, op: &'static str) -> Result<()> {
        if self.host_fns.is_idle() {
            return Ok(());
        }
        if in_host_fn() {
            return Err(devstream_core::selfwait::would_deadlock(
                op,
                "a host function given the buffer (launch_host_func_with) has not run yet: \
                 it may be queued after this one, or be this one",
            ));
        }
        self.host_fns.wait_idle();
        Ok(())
    }

    /// The device→host copies into the buffer not mapped yet: a host function given the
    /// buffer waits for them (see `Readback::await_landing`).
    fn await_landings(&self) {
        let readbacks: Vec<Arc<Readback>> = lock(&self.pending)
            .iter()
            .map(|w| Arc::clone(&w.readback))
            .collect();
        for readback in readbacks {
            readback.await_landing();
        }
    }

    /// Waits for every queued device→host copy into the buffer and applies it.
    fn settle(&self) -> Result<()> {
        let readbacks: Vec<Arc<Readback>> = lock(&self.pending)
            .iter()
            .map(|w| Arc::clone(&w.readback))
            .collect();
        let mut first_error = None;
        for readback in readbacks {
            if readback.mapped().is_none()
                && waits_behind_host_func(&readback.device, Awaited::Readback(&readback)).is_some()
            {
                // Queued after the host function this thread runs: in stream order it has not
                // happened yet, so the reader neither waits for it nor sees it.
                continue;
            }
            if let Err(e) = readback.wait() {
                first_error.get_or_insert(e);
            }
        }
        let applied = self.apply_mapped();
        match first_error {
            Some(e) => Err(e),
            None => applied,
        }
    }

    /// Whether [`HostInner::settle`] would wait now: a device→host copy into the buffer is
    /// neither mapped nor complete (its mapping then follows without other work) and not
    /// queued after the host function this thread runs.
    fn settle_would_wait(&self) -> bool {
        let readbacks: Vec<Arc<Readback>> = lock(&self.pending)
            .iter()
            .map(|w| Arc::clone(&w.readback))
            .collect();
        readbacks.iter().any(|readback| {
            readback.mapped().is_none()
                && !readback.complete_but_unmapped()
                && waits_behind_host_func(&readback.device, Awaited::Readback(readback)).is_none()
        })
    }

    /// Whether [`HostInner::wait_for_uploads`] would wait now: a deferred upload that is not
    /// queued after the host function this thread runs has not read the buffer yet.
    fn uploads_would_wait(self: &Arc<Self>) -> bool {
        let behind = uploads_behind_host_func(self).map_or(0, |(behind, _)| behind);
        self.uploads_in_flight() > behind
    }

    /// Waits until deferred uploads that read the buffer have read it, except those queued
    /// after the host function this thread runs (in stream order they read after it).
    fn wait_for_uploads(self: &Arc<Self>) {
        loop {
            let (behind, seen) = uploads_behind_host_func(self).unwrap_or((0, usize::MAX));
            let uploads = lock(&self.uploads);
            if *uploads <= behind {
                return;
            }
            if seen == usize::MAX {
                // Outside host functions: every upload in flight reads before this write.
                let _idle = self
                    .uploads_done
                    .wait_while(uploads, |n| *n > 0)
                    .unwrap_or_else(PoisonError::into_inner);
                return;
            }
            // Inside a host function: look again whenever the count changes.
            let _changed = self
                .uploads_done
                .wait_while(uploads, |n| *n == seen)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Whether a deferred upload may read now: every pending copy that has completed is mapped.
    fn ready_for_upload(&self) -> bool {
        !lock(&self.pending)
            .iter()
            .any(|w| w.readback.complete_but_unmapped())
    }
}

/// Applies every mapped copy of `pending`, in enqueue order, to `data`, and drops it from
/// `pending`, with a copy whose mapping failed (kept pending when `keep_failed`). Answers the
/// first error.
fn apply_landed(pending: &mut Vec<PendingWrite>, data: &mut [u8], keep_failed: bool) -> Result<()> {
    let mut first_error = None;
    pending.retain(|write| match write.readback.mapped() {
        None => true,
        Some(Ok(())) => {
            let target = &mut data[write.host_offset..write.host_offset + write.len];
            if let Err(e) = write.readback.read_into(write.staging_offset, target) {
                first_error.get_or_insert(e);
            }
            false
        }
        Some(Err(e)) => {
            first_error.get_or_insert(e);
            keep_failed
        }
    });
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Whether the calling thread runs a host function: one the facade submitted (of any backend),
/// or one of this backend's streams.
fn in_host_fn() -> bool {
    devstream_core::foreign::running_host_fn().is_some() || crate::hostfn::running().is_some()
}

/// Runs a deferred upload at the head of a stream whose earlier work is complete. Returns it
/// back when it must wait for a mapping callback.
pub(crate) fn run_upload(
    device: &DeviceShared,
    last_seq: &mut u64,
    state: &mut StreamState,
    upload: Upload,
) -> Option<Upload> {
    if !upload.host.ready_for_upload() {
        return Some(upload);
    }
    let result = upload
        .host
        .snapshot(upload.host_offset, upload.len as usize)
        .and_then(|bytes| {
            let mut encoder =
                device
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("devstream upload"),
                    });
            encode_upload(
                device,
                &mut encoder,
                &upload.dst.buffer,
                upload.dst_offset,
                &bytes,
            )?;
            let commands = encoder.finish();
            let (ticket, error) = submit_locked(
                device,
                last_seq,
                Batch {
                    commands,
                    after: Vec::new(),
                },
            );
            state.frontier = Some(ticket);
            error.map_or(Ok(()), Err)
        });
    if let Err(e) = result {
        state.set_error(e);
    }
    upload.host.end_upload();
    None
}

/// Host memory for asynchronous copies with wgpu streams.
///
/// wgpu has no pinned host memory the device copies into directly; a device→host copy lands in
/// a mapped staging buffer and is applied here when the host reads. `read`/`write`/`to_vec`
/// wait for queued copies touching the buffer.
pub struct WgpuHostBuffer {
    pub(crate) inner: Arc<HostInner>,
}

debug_fields!(WgpuHostBuffer, |self| len: self.inner.len);

impl WgpuHostBuffer {
    /// A zeroed host buffer of `len` bytes, or `Error::OutOfMemory` (naming `device`'s place)
    /// when the host cannot provide them. Like one from `alloc_host`, it works with the streams
    /// of every wgpu device.
    pub fn new(device: &crate::WgpuDevice, len: usize) -> Result<WgpuHostBuffer> {
        HostInner::new(&device.shared.place, len).map(|inner| WgpuHostBuffer { inner })
    }
}

impl HostBuffer for WgpuHostBuffer {
    fn len(&self) -> usize {
        self.inner.len
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range("HostBuffer::read", offset, out.len(), self.inner.len)?;
        self.inner.wait_for_host_fns("HostBuffer::read")?;
        self.inner.settle()?;
        out.copy_from_slice(&lock(&self.inner.data)[offset..offset + out.len()]);
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_range("HostBuffer::write", offset, data.len(), self.inner.len)?;
        self.inner.wait_for_host_fns("HostBuffer::write")?;
        self.inner.wait_for_uploads();
        self.inner.settle()?;
        lock(&self.inner.data)[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn read_would_wait(&self) -> bool {
        !self.inner.host_fns.is_idle() || self.inner.settle_would_wait()
    }

    fn write_would_wait(&self) -> bool {
        !self.inner.host_fns.is_idle()
            || self.inner.uploads_would_wait()
            || self.inner.settle_would_wait()
    }

    fn host_fn_access(&self, runner: BackendKey) -> Result<HostFnAccess> {
        let _order = lock(&self.inner.order);
        let queued = self.inner.copies.completion();
        if queued.is_some() {
            self.inner.await_landings();
        }
        Ok(HostFnAccess::new(
            &self.inner.host_fns,
            BackendKey::of(&Place::Wgpu(0)),
            queued.into_iter().collect(),
            runner,
            Box::new(WgpuHostBytes(Arc::clone(&self.inner))),
        ))
    }
}

/// The bytes of a host buffer given to a host function: the copies landed in it applied, and
/// its data lock held (the lock copies take to read or land bytes) while the view lives.
struct WgpuHostBytes(Arc<HostInner>);

impl HostBytes for WgpuHostBytes {
    fn view(&mut self) -> Box<dyn DerefMut<Target = [u8]> + '_> {
        Box::new(LockedBytes(self.0.landed_data()))
    }
}

impl devstream_core::ops::BufferLen for BufferInner {
    fn byte_len(&self) -> usize {
        self.len as usize
    }
}

impl devstream_core::ops::BufferLen for HostInner {
    fn byte_len(&self) -> usize {
        self.len
    }
}
