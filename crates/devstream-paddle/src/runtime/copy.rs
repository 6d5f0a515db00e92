//! Copies and memsets, in stream order. Host-backed memory (the CPU backend) is copied by host
//! code: at once when the stream is idle and not capturing, else in a host function queued on
//! the stream. Devstream buffers are copied by the stream, staged through devstream host
//! buffers where Paddle's raw host memory is one side.

use super::failure::{refuse, take_failure, Check};
use super::memory::Target;
use super::{CustomRuntime, Raw, Status, StreamObj};
use crate::sys::{C_Stream, C_INTERNAL_ERROR};
use devstream::{DeviceBuffer, HostBuffer};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Which side of a copy is Paddle's raw host memory.
#[derive(Clone, Copy)]
enum HostSide {
    /// Host→device: Paddle's pointer is the source.
    Source,
    /// Device→host: Paddle's pointer is the destination.
    Destination,
}

/// A copy between Paddle's host memory and a device allocation, once [`CustomRuntime::host_copy`]
/// checked it.
enum HostCopy<'a> {
    /// Nothing left to do: no bytes, or host-backed memory already copied in stream order.
    Done,
    /// The device side is a devstream buffer: the copy is the caller's, on `obj`'s stream
    /// (synchronous when `sync`).
    Buffer {
        obj: &'a StreamObj,
        sync: bool,
        buffer: Arc<DeviceBuffer>,
        offset: usize,
    },
}

/// Reads `size` bytes at `offset` of `buffer` through `obj`'s stream, blocking until done.
fn read_device(
    obj: &StreamObj,
    buffer: &DeviceBuffer,
    offset: usize,
    size: usize,
) -> devstream::Result<Vec<u8>> {
    let staging = obj.stream.alloc_host(size)?;
    obj.stream
        .copy_device_to_host(&staging, 0, buffer, offset, size)?;
    obj.stream.synchronize()?;
    staging.to_vec()
}

impl CustomRuntime {
    /// Whether asking `obj` whether it is idle is harmless: no capture begun through this
    /// table is open anywhere (a query during a global-mode capture invalidates it, as in
    /// CUDA) and the stream is in none.
    fn may_query(&self, obj: &StreamObj) -> bool {
        self.open_captures.load(Ordering::SeqCst) == 0 && obj.capture_id.load(Ordering::SeqCst) == 0
    }

    /// A devstream host buffer of `size` bytes for staging on `obj`'s stream. While a capture
    /// may be open it is allocated on a helper thread: a host allocation is a potentially
    /// unsafe call that invalidates a thread-local-mode capture of the calling thread (as
    /// `cudaMallocHost` does in CUDA); in global mode it still does, and the copy fails.
    fn staging(&self, obj: &StreamObj, size: usize, what: &str) -> Status<HostBuffer> {
        if self.may_query(obj) {
            return obj.stream.alloc_host(size).check(what);
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| obj.stream.alloc_host(size))
                .join()
                .map_err(|_| C_INTERNAL_ERROR)?
                .check(what)
        })
    }

    /// Runs `op` (host memory work) in `obj`'s stream order: at once when the stream is idle
    /// and not capturing (so that host code reading the memory next sees it done, as with a
    /// synchronous copy), otherwise as a host function queued on the stream.
    fn host_op(
        &self,
        obj: &StreamObj,
        sync: bool,
        what: &'static str,
        mut op: impl FnMut() + Send + 'static,
    ) -> Status {
        if self.may_query(obj) && obj.stream.query().check(what)? {
            op();
        } else {
            obj.host_func(what, move || {
                op();
                Ok(())
            })?;
        }
        self.finish(obj, sync, what)
    }

    /// `device_memory_set` (synchronous).
    pub fn memset(&self, device: usize, ptr: usize, value: u8, size: usize) -> Status {
        if size == 0 {
            return Ok(());
        }
        let target = self.translate(device, ptr, size)?;
        let null = self.null_stream(device)?;
        match target {
            Target::Host(block, addr) => {
                self.host_op(&null, true, "device_memory_set", move || {
                    let _alive = &block;
                    // SAFETY: `[addr, addr + size)` lies inside `block`, kept alive here.
                    unsafe { std::ptr::write_bytes(addr as *mut u8, value, size) }
                })
            }
            Target::Buffer(buffer, offset) => {
                null.stream
                    .fill(&buffer, offset, size, value)
                    .check("device_memory_set")?;
                self.finish(&null, true, "device_memory_set")
            }
        }
    }

    /// The part of `copy_h2d` and `copy_d2h` that does not depend on the direction: a copy of
    /// no bytes checks its stream only; Paddle's pointer must not be null; the device range
    /// must lie inside a live allocation; host-backed memory is copied here, in stream order
    /// ([`CustomRuntime::host_op`]). What is left for the caller is a copy to or from a devstream
    /// buffer.
    fn host_copy(
        &self,
        host_side: HostSide,
        device: usize,
        stream: Option<C_Stream>,
        device_addr: usize,
        host_addr: usize,
        size: usize,
    ) -> Status<HostCopy<'_>> {
        if size == 0 {
            return self.empty_copy(device, stream).map(|()| HostCopy::Done);
        }
        if host_addr == 0 {
            return Err(refuse(|| match host_side {
                HostSide::Source => "a null source".into(),
                HostSide::Destination => "a null destination".into(),
            }));
        }
        let target = self.translate(device, device_addr, size)?;
        let (obj, sync) = self.copy_stream(device, stream)?;
        match target {
            Target::Host(block, addr) => {
                let host = Raw(host_addr);
                let (what, src, dst) = match host_side {
                    HostSide::Source => ("memory_copy_h2d", host, Raw(addr)),
                    HostSide::Destination => ("memory_copy_d2h", Raw(addr), host),
                };
                self.host_op(obj, sync, what, move || {
                    let _alive = &block;
                    // SAFETY: the device side lies inside `block`, kept alive here; Paddle keeps
                    // `size` readable (source) or writable (destination) bytes at its pointer
                    // until the stream's work is complete.
                    unsafe { std::ptr::copy(src.0 as *const u8, dst.0 as *mut u8, size) }
                })?;
                Ok(HostCopy::Done)
            }
            Target::Buffer(buffer, offset) => Ok(HostCopy::Buffer {
                obj,
                sync,
                buffer,
                offset,
            }),
        }
    }

    /// Host→device: synchronous on the null stream when `stream` is `None`.
    pub fn copy_h2d(
        &self,
        device: usize,
        stream: Option<C_Stream>,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Status {
        let HostCopy::Buffer {
            obj,
            sync,
            buffer,
            offset,
        } = self.host_copy(HostSide::Source, device, stream, dst, src, size)?
        else {
            return Ok(());
        };
        // An idle stream has nothing queued that could still write the source.
        if sync || (self.may_query(obj) && obj.stream.query().check("async_memory_copy_h2d")?) {
            // SAFETY: Paddle passes `size` readable bytes at `src` (non-null, checked).
            let bytes = unsafe { std::slice::from_raw_parts(src as *const u8, size) };
            obj.stream
                .copy_from_host(&buffer, offset, bytes)
                .check("memory_copy_h2d")?;
        } else {
            let staging = Arc::new(self.staging(obj, size, "async_memory_copy_h2d")?);
            let target = staging.clone();
            let src = Raw(src);
            obj.host_func("async_memory_copy_h2d", move || {
                // SAFETY: Paddle keeps `size` readable bytes at `src` until the stream's work
                // is complete (the async-copy contract).
                let bytes = unsafe { std::slice::from_raw_parts(src.0 as *const u8, size) };
                target.write(0, bytes)
            })?;
            obj.stream
                .copy_host_to_device(&buffer, offset, &staging, 0, size)
                .check("async_memory_copy_h2d")?;
        }
        self.finish(obj, sync, "memory_copy_h2d")
    }

    /// Device→host: synchronous on the null stream when `stream` is `None`.
    pub fn copy_d2h(
        &self,
        device: usize,
        stream: Option<C_Stream>,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Status {
        let HostCopy::Buffer {
            obj,
            sync,
            buffer,
            offset,
        } = self.host_copy(HostSide::Destination, device, stream, src, dst, size)?
        else {
            return Ok(());
        };
        let staging = self.staging(obj, size, "memory_copy_d2h")?;
        obj.stream
            .copy_device_to_host(&staging, 0, &buffer, offset, size)
            .check("memory_copy_d2h")?;
        if sync {
            obj.stream.synchronize().check("memory_copy_d2h")?;
            // SAFETY: Paddle passes `size` writable bytes at `dst` (non-null, checked).
            let out = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, size) };
            return staging.read(0, out).check("memory_copy_d2h");
        }
        let dst = Raw(dst);
        obj.host_func("async_memory_copy_d2h", move || {
            // SAFETY: Paddle keeps `size` writable bytes at `dst` until the stream's work is
            // complete, and nothing else writes them meanwhile (the async-copy contract).
            let out = unsafe { std::slice::from_raw_parts_mut(dst.0 as *mut u8, size) };
            staging.read(0, out)
        })
    }

    /// Device→device on one device: synchronous on the null stream when `stream` is `None`.
    pub fn copy_d2d(
        &self,
        device: usize,
        stream: Option<C_Stream>,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Status {
        if size == 0 {
            return self.empty_copy(device, stream);
        }
        let dst = self.translate(device, dst, size)?;
        let src = self.translate(device, src, size)?;
        let (obj, sync) = self.copy_stream(device, stream)?;
        self.copy_between(obj, sync, dst, src, size, "memory_copy_d2d")
    }

    /// Copies `size` bytes from `src` to `dst` (of one backend) on `obj`'s stream.
    fn copy_between(
        &self,
        obj: &StreamObj,
        sync: bool,
        dst: Target,
        src: Target,
        size: usize,
        what: &'static str,
    ) -> Status {
        match (dst, src) {
            (Target::Host(dst_block, dst), Target::Host(src_block, src)) => {
                self.host_op(obj, sync, what, move || {
                    let _alive = (&dst_block, &src_block);
                    // SAFETY: both ranges lie inside blocks kept alive here.
                    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, size) }
                })
            }
            (Target::Buffer(dst, dst_offset), Target::Buffer(src, src_offset)) => {
                obj.stream
                    .copy_device_to_device(&dst, dst_offset, &src, src_offset, size)
                    .check(what)?;
                self.finish(obj, sync, what)
            }
            _ => Err(refuse(|| {
                format!("{what}: host memory and a device buffer of one device type")
            })),
        }
    }

    /// Peer copy between two devices of this type (host memory: directly; devstream buffers:
    /// through host memory). Synchronous when `stream` is `None`; otherwise in the order of
    /// `stream`, which belongs to either device.
    pub fn copy_p2p(
        &self,
        dst_device: usize,
        src_device: usize,
        stream: Option<C_Stream>,
        dst: usize,
        src: usize,
        size: usize,
    ) -> Status {
        if size == 0 {
            return match stream {
                Some(handle) => self
                    .stream_of_either(src_device, dst_device, handle)
                    .map(drop),
                None => Ok(()),
            };
        }
        if dst_device == src_device {
            return self.copy_d2d(dst_device, stream, dst, src, size);
        }
        let dst = self.translate(dst_device, dst, size)?;
        let src = self.translate(src_device, src, size)?;
        let (Target::Buffer(dst_buffer, dst_offset), Target::Buffer(src_buffer, src_offset)) =
            (dst.clone(), src.clone())
        else {
            let obj = match stream {
                Some(handle) => self.stream_of_either(src_device, dst_device, handle)?,
                None => &**self.null_stream_ref(src_device)?,
            };
            return self.copy_between(obj, stream.is_none(), dst, src, size, "memory_copy_p2p");
        };
        let src_null = self.null_stream(src_device)?;
        let dst_null = self.null_stream(dst_device)?;
        let Some(handle) = stream else {
            let bytes =
                read_device(&src_null, &src_buffer, src_offset, size).check("memory_copy_p2p")?;
            dst_null
                .stream
                .copy_from_host(&dst_buffer, dst_offset, &bytes)
                .check("memory_copy_p2p")?;
            dst_null.stream.synchronize().check("memory_copy_p2p")?;
            return Ok(());
        };
        // The stream may be either device's: find it on the source first.
        let on_source = self.stream(src_device, handle);
        if on_source.is_err() {
            // Not the source's: that refusal is no reason (see `note_failure`).
            let _ = take_failure();
        }
        if let Ok(obj) = on_source {
            let staging = self.staging(obj, size, "async_memory_copy_p2p")?;
            obj.stream
                .copy_device_to_host(&staging, 0, &src_buffer, src_offset, size)
                .check("async_memory_copy_p2p")?;
            return obj.host_func("async_memory_copy_p2p", move || {
                let bytes = staging.to_vec()?;
                dst_null
                    .stream
                    .copy_from_host(&dst_buffer, dst_offset, &bytes)?;
                dst_null.stream.synchronize()
            });
        }
        let obj = self.stream(dst_device, handle)?;
        let staging = Arc::new(self.staging(obj, size, "async_memory_copy_p2p")?);
        let target = staging.clone();
        obj.host_func("async_memory_copy_p2p", move || {
            let bytes = read_device(&src_null, &src_buffer, src_offset, size)?;
            target.write(0, &bytes)
        })?;
        obj.stream
            .copy_host_to_device(&dst_buffer, dst_offset, &staging, 0, size)
            .check("async_memory_copy_p2p")
    }

    /// The stream behind `handle` on `first` or else on `second` (a peer copy's stream belongs
    /// to either device).
    fn stream_of_either(
        &self,
        first: usize,
        second: usize,
        handle: C_Stream,
    ) -> Status<&StreamObj> {
        self.stream(first, handle).or_else(|_| {
            // Not the first device's: that refusal is no reason (see `note_failure`).
            let _ = take_failure();
            self.stream(second, handle)
        })
    }

    /// A copy of no bytes: nothing to do once its stream (if any) is checked, so that a stale
    /// or foreign handle is refused whatever the size.
    fn empty_copy(&self, device: usize, stream: Option<C_Stream>) -> Status {
        match stream {
            Some(handle) => self.stream(device, handle).map(drop),
            None => Ok(()),
        }
    }

    /// The stream a copy runs on, and whether it is synchronous (no stream given).
    fn copy_stream(&self, device: usize, stream: Option<C_Stream>) -> Status<(&StreamObj, bool)> {
        match stream {
            Some(handle) => Ok((self.stream(device, handle)?, false)),
            None => Ok((&**self.null_stream_ref(device)?, true)),
        }
    }

    /// Ends a copy: a synchronous one waits for its stream.
    fn finish(&self, obj: &StreamObj, sync: bool, what: &str) -> Status {
        if sync {
            obj.stream.synchronize().check(what)?;
        }
        Ok(())
    }
}
