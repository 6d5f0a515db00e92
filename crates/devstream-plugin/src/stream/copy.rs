//! The copy operations of a plug-in stream: the checks of a copy's two ends, its submission in
//! stream order, and host bytes staged for an upload (kept until the stream's work up to the copy
//! is complete).

use crate::buffer::{
    AbiBuffer, AbiHostBuffer, BufferRepr, HostRepr, PluginBuffer, PluginHostBuffer,
};
use crate::capture::submitting_into;
use crate::queue::{Item, StreamCore};
use crate::runtime::{CopyKind, RawCopy};
use devstream_core::traits::check_range;
use devstream_core::{DeviceBuffer, Error, Result};
use std::sync::Arc;

pub(super) fn abi_buffer<'a>(
    op: &'static str,
    core: &StreamCore,
    buffer: &'a PluginBuffer,
) -> Result<&'a AbiBuffer> {
    match &buffer.0 {
        BufferRepr::Abi(b) if b.place == core.place => Ok(b),
        _ => Err(Error::mismatch(op, &core.place, buffer.place())),
    }
}

pub(super) fn abi_host<'a>(
    op: &'static str,
    core: &StreamCore,
    buffer: &'a PluginHostBuffer,
) -> Result<&'a AbiHostBuffer> {
    match &buffer.0 {
        HostRepr::Abi(b) => Ok(b),
        HostRepr::Rust(_) => Err(Error::mismatch(op, &core.place, &core.place)),
    }
}

pub(super) fn require_copy(op: &'static str, core: &StreamCore, kind: CopyKind) -> Result<()> {
    if core.runtime.has_copy(kind) {
        Ok(())
    } else {
        Err(Error::unsupported(op, &core.place))
    }
}

/// Plug-in memory at one end of a copy: its length and the address of its byte `offset`.
pub(super) trait CopyEnd {
    fn byte_len(&self) -> usize;
    fn address(&self, offset: usize) -> usize;
}

impl CopyEnd for AbiBuffer {
    fn byte_len(&self) -> usize {
        self.len
    }
    fn address(&self, offset: usize) -> usize {
        self.at(offset)
    }
}

impl CopyEnd for AbiHostBuffer {
    fn byte_len(&self) -> usize {
        self.len
    }
    fn address(&self, offset: usize) -> usize {
        self.at(offset)
    }
}

/// The checks of a copy of `len` bytes on a plug-in place, in order: the destination's range,
/// the source's, then whether the plug-in copies `kind`; then the copy between their addresses.
pub(super) fn checked_copy(
    (core, op, kind): (&Arc<StreamCore>, &'static str, CopyKind),
    (dst, dst_offset): (&impl CopyEnd, usize),
    (src, src_offset): (&impl CopyEnd, usize),
    len: usize,
) -> Result<RawCopy> {
    check_range(op, dst_offset, len, dst.byte_len())?;
    check_range(op, src_offset, len, src.byte_len())?;
    require_copy(op, core, kind)?;
    Ok(RawCopy {
        kind,
        dst: dst.address(dst_offset),
        src: src.address(src_offset),
        len,
    })
}

/// Submits `copy` in stream order.
pub(super) fn submit_copy(core: &Arc<StreamCore>, copy: RawCopy) -> Result<()> {
    core.submit(Item::Op(Box::new(move |core: &StreamCore| {
        core.runtime.copy(core.slot, core.raw, copy)
    })))
}

/// Submits a checked `copy` between `device` and `host` (either way, its `kind` says which):
/// kept by the capture when the stream captures, else the device buffer remembers the stream
/// and the host buffer tracks the copy (so host reads and writes wait for it). Nothing for 0
/// bytes.
pub(super) fn submit_host_copy(
    (core, op): (&Arc<StreamCore>, &'static str),
    (device, host): (&AbiBuffer, &AbiHostBuffer),
    copy: RawCopy,
) -> Result<()> {
    if copy.len == 0 {
        return Ok(());
    }
    if let Some(capture) = submitting_into(op, core)? {
        capture.keep_device(&device.0);
        capture.keep_host(&host.0);
        return submit_copy(core, copy);
    }
    device.used_by(core);
    host.copy_tracked(core, copy)
}

/// Room for `len` bytes staged on the host for `op`: `Error::OutOfMemory` where the host cannot
/// give it (a device buffer may be far larger than host memory), never an abort.
pub(super) fn staging_for(op: &'static str, core: &StreamCore, len: usize) -> Result<Vec<u8>> {
    let mut staging = Vec::new();
    staging.try_reserve_exact(len).map_err(|_| {
        tracing::warn!("devstream-plugin: {op}: cannot stage {len} bytes on the host");
        Error::out_of_memory(&core.place, len)
    })?;
    Ok(staging)
}

/// Copies host bytes staged in `staging` to `dst[offset..]`. The staging moves into the copy
/// operation itself, which keeps it until the stream's work up to the copy is complete
/// (whatever the copy or the release answers), so no failure can free it early.
pub(super) fn staged_upload(
    op: &'static str,
    core: &Arc<StreamCore>,
    dst: &AbiBuffer,
    offset: usize,
    staging: Vec<u8>,
) -> Result<()> {
    if staging.is_empty() {
        return Ok(());
    }
    if let Some(capture) = submitting_into(op, core)? {
        // Replayed by every launch: the graph keeps the bytes and the buffer. The
        // capturing stream is no user of the buffer (it runs none of this work): were it one,
        // the capture would keep its own stream alive, and dropping the stream could never
        // end the capture.
        capture.keep_device(&dst.0);
        let copy = RawCopy {
            kind: CopyKind::HostToDevice,
            dst: dst.at(offset),
            src: staging.as_ptr() as usize,
            len: staging.len(),
        };
        capture.keep(Box::new(staging));
        return submit_copy(core, copy);
    }
    dst.used_by(core);
    let (dst, len) = (dst.at(offset), staging.len());
    core.submit(Item::Op(Box::new(move |core: &StreamCore| {
        let copy = RawCopy {
            kind: CopyKind::HostToDevice,
            dst,
            src: staging.as_ptr() as usize,
            len,
        };
        let copied = core.runtime.copy(core.slot, core.raw, copy);
        // Even a failed asynchronous copy may have been queued: keep the bytes either way.
        core.keep_until_done(Box::new(staging));
        copied
    })))
}
