//! Running one operation on a stream: encoded into the pending encoder now, held back behind a
//! host function or gate, or recorded when the stream captures; and a graph's replay, which runs
//! its recorded operations the same way.

use super::*;

impl WgpuStream {
    /// An operation that only encodes into the stream's pending encoder: `encode` runs under
    /// the scheduler lock with one look-up of the stream, and the [`Op`] (which holds
    /// references to what it uses) is made only when the stream is capturing. Same effect as
    /// `run_op(op())`.
    fn encode_or_capture(
        &self,
        op: impl FnOnce() -> Op,
        encode: impl FnOnce(&DeviceShared, &mut wgpu::CommandEncoder) -> Result<()>,
    ) -> Result<()> {
        let device = &self.handle.device;
        let mut sched = self.lock();
        let state = self.state(&mut sched)?;
        if let Some(session) = state.capture.clone() {
            return self.push_captured(&session, op());
        }
        encode(device, state.encoder(&device.device))
    }

    /// A copy or fill: checks that its device buffers are this device's and its ranges, then
    /// encodes it (or records it when capturing). Host-buffer copies go through
    /// [`WgpuStream::run_op`]; the others encode under one look-up of the stream, and the
    /// recorded form (which holds references to the buffers and a copy of the bytes) is made
    /// only when the stream is capturing.
    pub(super) fn buffer_op(
        &self,
        op: BufferOp<&Arc<BufferInner>, &Arc<HostInner>, &[u8]>,
    ) -> Result<()> {
        let name = op.name();
        let id = self.handle.id;
        match &op {
            BufferOp::CopyFromHost { dst, .. } | BufferOp::Fill { dst, .. } => {
                self.same_device(name, dst)?;
                dst.note_user(id);
            }
            BufferOp::HostToDevice(t) => {
                self.same_device(name, t.dst)?;
                t.dst.note_user(id);
            }
            BufferOp::DeviceToHost(t) => {
                self.same_device(name, t.src)?;
                t.src.note_user(id);
            }
            BufferOp::DeviceToDevice(t) => {
                self.same_device(name, t.dst)?;
                self.same_device(name, t.src)?;
                t.dst.note_user(id);
                t.src.note_user(id);
            }
        }
        op.validate()?;
        if op.is_empty() {
            return Ok(());
        }
        let owned = || {
            Op::Buffer(op.to_owned(
                |dst| Arc::clone(dst),
                |host| Arc::clone(host),
                |data| Arc::from(data),
            ))
        };
        match op {
            BufferOp::HostToDevice(_) | BufferOp::DeviceToHost(_) => self.run_op(owned()),
            _ => {
                self.encode_or_capture(owned, |device, encoder| encode_plain(device, encoder, &op))
            }
        }
    }

    /// Runs one operation now, or records it when capturing.
    pub(super) fn run_op(&self, op: Op) -> Result<()> {
        let host = match &op {
            Op::Buffer(BufferOp::HostToDevice(t)) => Arc::clone(&t.src),
            Op::Buffer(BufferOp::DeviceToHost(t)) => Arc::clone(&t.dst),
            _ => return self.run_op_now(op),
        };
        // A copy of a host buffer waits for the host functions given it that are pending
        // (`devstream_core::host_fn_access`); it waits and registers under the buffer's order
        // lock, under which such a host function takes its snapshot of queued copies.
        let _order = lock(&host.order);
        self.wait_for_host_fns(&host)?;
        self.run_op_now(op)
    }

    /// Has this stream wait for the host functions given `host` that are pending, before a
    /// copy of it: they run first in submission order. A capturing stream records the copy
    /// instead; its replays wait when they run it.
    fn wait_for_host_fns(&self, host: &HostInner) -> Result<()> {
        if host.host_fns.is_idle() || self.capture_session().is_some() {
            return Ok(());
        }
        for awaited in host.host_fns.awaited(&self.handle.device.place) {
            self.wait_foreign(awaited)?;
        }
        Ok(())
    }

    /// [`WgpuStream::run_op`] once a host buffer's copy has waited for its host functions.
    fn run_op_now(&self, op: Op) -> Result<()> {
        let device = &self.handle.device;
        let id = self.handle.id;
        let mut sched = self.lock();
        if let Some(session) = self.capturing(&mut sched) {
            return self.push_captured(&session, op);
        }
        note_users(&op, id);
        match op {
            Op::Buffer(BufferOp::HostToDevice(t)) => {
                let (dst_offset, len) = (t.dst_offset as u64, t.len as u64);
                let holds_back = !self.state(&mut sched)?.held.is_empty();
                if holds_back || t.src.has_pending_writes() {
                    // Earlier work of the stream is still held back (a host function, a gate:
                    // either may write the source first, in stream order), or device→host
                    // copies are still landing in the source: read it once the stream's earlier
                    // work is complete.
                    let reading = t.src.begin_upload();
                    flush_locked(device, &mut sched, id, false);
                    hold_locked(
                        device,
                        &mut sched,
                        id,
                        Held::Upload(Upload {
                            host: t.src,
                            host_offset: t.src_offset,
                            dst: t.dst,
                            dst_offset,
                            len,
                            _reading: reading,
                        }),
                    );
                    Ok(())
                } else {
                    let bytes = t.src.snapshot(t.src_offset, t.len)?;
                    let state = self.state(&mut sched)?;
                    let encoder = state.encoder(&device.device);
                    encode_upload(device, encoder, &t.dst.buffer, dst_offset, &bytes)
                }
            }
            Op::Buffer(BufferOp::DeviceToHost(t)) => {
                let (src_offset, len) = (t.src_offset as u64, t.len as u64);
                if len == 0 {
                    return Ok(());
                }
                let start = align_down(src_offset, 4);
                let end = align_up(src_offset + len, 4);
                let readback = Readback::new(device, end - start, id)?;
                let state = self.state(&mut sched)?;
                let encoder = state.encoder(&device.device);
                encoder.copy_buffer_to_buffer(
                    &t.src.buffer,
                    start,
                    &readback.buffer,
                    0,
                    end - start,
                );
                state.after.push(AfterSubmit::Map {
                    readback: Arc::clone(&readback),
                    landing: Some(t.dst.copies.begin()),
                });
                t.dst.add_pending(PendingWrite {
                    readback,
                    staging_offset: (src_offset - start) as usize,
                    host_offset: t.dst_offset,
                    len: t.len,
                });
                Ok(())
            }
            Op::Buffer(plain) => {
                let state = self.state(&mut sched)?;
                let encoder = state.encoder(&device.device);
                encode_plain(device, encoder, &plain)
            }
            Op::Dispatch {
                kernel,
                bind_group,
                workgroups,
                ..
            } => {
                let state = self.state(&mut sched)?;
                let encoder = state.encoder(&device.device);
                encode_dispatch(encoder, &kernel, &bind_group, workgroups);
                Ok(())
            }
            Op::HostFunc(shared) => {
                let f: HostFn = Box::new(move || (lock(&shared))());
                flush_locked(device, &mut sched, id, false);
                hold_locked(device, &mut sched, id, Held::HostFunc(f));
                Ok(())
            }
            Op::Record(event) => {
                self.record_event_locked(&mut sched, &event.inner)?;
                *lock(&event.inner.captured) = None;
                Ok(())
            }
            Op::WaitEvent(event) => match event.inner.current() {
                None => Ok(()),
                Some(record) => self.wait_record_locked(&mut sched, record),
            },
            Op::WaitStream(other) => {
                drop(sched);
                self.wait_stream(&other)
            }
            Op::WaitFlag(flag, value) => {
                self.wait_flag_locked(&mut sched, flag, value);
                Ok(())
            }
            Op::WriteFlag(flag, value) => {
                self.write_flag_locked(&mut sched, flag, value);
                Ok(())
            }
            Op::Foreign(outcome) => {
                flush_locked(device, &mut sched, id, false);
                hold_locked(device, &mut sched, id, Held::Foreign(outcome));
                Ok(())
            }
            Op::Graph(ops) => {
                drop(sched);
                self.replay(&ops)
            }
        }
    }

    /// Re-encodes recorded operations on this stream (a graph launch).
    pub(crate) fn replay(&self, ops: &[Op]) -> Result<()> {
        {
            let mut sched = self.lock();
            if let Some(session) = self.capturing(&mut sched) {
                return self.push_captured(&session, Op::Graph(Arc::new(ops.to_vec())));
            }
        }
        for op in ops {
            self.run_op(op.clone())?;
        }
        Ok(())
    }
}

/// Notes stream `stream` as a user of the buffers `op` works on (what a replayed operation
/// uses; direct copies and fills note theirs in `buffer_op`).
fn note_users(op: &Op, stream: u64) {
    match op {
        Op::Buffer(BufferOp::CopyFromHost { dst, .. } | BufferOp::Fill { dst, .. }) => {
            dst.note_user(stream)
        }
        Op::Buffer(BufferOp::HostToDevice(t)) => t.dst.note_user(stream),
        Op::Buffer(BufferOp::DeviceToHost(t)) => t.src.note_user(stream),
        Op::Buffer(BufferOp::DeviceToDevice(t)) => {
            t.dst.note_user(stream);
            t.src.note_user(stream);
        }
        Op::Dispatch { buffers, .. } => buffers.iter().for_each(|b| b.note_user(stream)),
        _ => {}
    }
}

/// Encodes a copy or fill that needs nothing but the encoder: bytes from a host slice, a
/// device-to-device copy or a fill. The copies through host buffers are staged and are
/// encoded by [`WgpuStream::run_op`]; given one, this encodes nothing.
pub(super) fn encode_plain<D: AsRef<BufferInner>, H, B: AsRef<[u8]>>(
    device: &DeviceShared,
    encoder: &mut wgpu::CommandEncoder,
    op: &BufferOp<D, H, B>,
) -> Result<()> {
    match op {
        BufferOp::CopyFromHost { dst, offset, data } => encode_upload(
            device,
            encoder,
            &dst.as_ref().buffer,
            *offset as u64,
            data.as_ref(),
        ),
        BufferOp::DeviceToDevice(t) => encode_copy(
            device,
            encoder,
            &t.src.as_ref().buffer,
            t.src_offset as u64,
            &t.dst.as_ref().buffer,
            t.dst_offset as u64,
            t.len as u64,
        ),
        BufferOp::Fill {
            dst,
            offset,
            len,
            value,
        } => encode_fill(
            device,
            encoder,
            &dst.as_ref().buffer,
            *offset as u64,
            *len as u64,
            *value,
        ),
        BufferOp::HostToDevice(_) | BufferOp::DeviceToHost(_) => Ok(()),
    }
}
