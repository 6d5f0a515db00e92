//! One thin, safe wrapper per stream, event, memory and copy function of the table. Optional
//! functions fall back as Paddle does (a query without `query_*` synchronizes and answers
//! true), except where Paddle's fallback loses ordering (a stream wait without
//! `stream_wait_event` waits for the event on the host instead of skipping it).

use super::{plugin_call, CopyKind, Handle, LoadedPlugin, RawCopy};
use crate::sys::*;
use devstream_core::{Error, Result};
use std::ffi::c_void;

impl LoadedPlugin {
    /// Binds `slot`'s device and makes the table call `name` on it (`call`, given the device),
    /// checking its status.
    fn call_on(
        &self,
        name: &'static str,
        slot: usize,
        call: impl FnOnce(C_Device) -> C_Status,
    ) -> Result<()> {
        self.bind(slot)?;
        let status = plugin_call(|| call(self.device_ptr(slot)));
        self.check(name, status)
    }

    /// The plug-in's answer to the query `name` (made with `query` on `slot`'s device):
    /// `Ok(true)` when the work is complete. Without the query function, `synchronize` and
    /// true, as Paddle does.
    fn query_or_synchronize(
        &self,
        name: &'static str,
        slot: usize,
        query: Option<impl FnOnce(C_Device) -> C_Status>,
        synchronize: impl FnOnce() -> Result<()>,
    ) -> Result<bool> {
        let Some(query) = query else {
            synchronize()?;
            return Ok(true);
        };
        self.bind(slot)?;
        let status = plugin_call(|| query(self.device_ptr(slot)));
        self.check_query(name, status)
    }

    /// A new plug-in stream, and whether another live stream of the slot has its handle (see
    /// `runtime::stream_handles`).
    pub(crate) fn create_stream(&self, slot: usize) -> Result<(Handle, bool)> {
        let Some(create) = self.table.create_stream else {
            return Ok((Handle(0), self.stream_handles.created(slot, 0)));
        };
        let mut stream: C_Stream = std::ptr::null_mut();
        // SAFETY: a valid device and a zeroed out-parameter.
        self.call_on("create_stream", slot, |device| unsafe {
            create(device, &mut stream)
        })?;
        let handle = stream as usize;
        Ok((Handle(handle), self.stream_handles.created(slot, handle)))
    }

    pub(crate) fn destroy_stream(&self, slot: usize, stream: Handle) -> Result<()> {
        self.stream_handles.destroyed(slot, stream.0);
        let Some(destroy) = self.table.destroy_stream else {
            return Ok(());
        };
        // SAFETY: a stream this runtime created (or null), destroyed once.
        self.call_on("destroy_stream", slot, |device| unsafe {
            destroy(device, stream.stream())
        })
    }

    /// `Ok(true)` when the stream's work is complete. Without `query_stream` it synchronizes
    /// and answers true, as Paddle does.
    pub(crate) fn query_stream(&self, slot: usize, stream: Handle) -> Result<bool> {
        // SAFETY: a valid device and stream.
        let query = (self.table.query_stream)
            .map(|query| move |device| unsafe { query(device, stream.stream()) });
        let synchronize = || self.synchronize_stream(slot, stream);
        self.query_or_synchronize("query_stream", slot, query, synchronize)
    }

    /// Without `synchronize_stream`, records an event and synchronizes that (both required).
    pub(crate) fn synchronize_stream(&self, slot: usize, stream: Handle) -> Result<()> {
        self.bind(slot)?;
        if let Some(synchronize) = self.table.synchronize_stream {
            // SAFETY: a valid device and stream.
            let status =
                plugin_call(|| unsafe { synchronize(self.device_ptr(slot), stream.stream()) });
            return self.check("synchronize_stream", status);
        }
        let event = self.create_event(slot)?;
        let result = self
            .record_event(slot, stream, event)
            .and_then(|()| self.synchronize_event(slot, event));
        let destroyed = self.destroy_event(slot, event);
        result.and(destroyed)
    }

    pub(crate) fn add_callback(
        &self,
        slot: usize,
        stream: Handle,
        callback: C_Callback,
        user_data: *mut c_void,
    ) -> Result<()> {
        let add = self
            .table
            .stream_add_callback
            .ok_or_else(|| self.unavailable("stream_add_callback"))?;
        self.bind(slot)?;
        // SAFETY: a valid device and stream; the callback and its data follow the ABI.
        let status = plugin_call(|| unsafe {
            add(self.device_ptr(slot), stream.stream(), callback, user_data)
        });
        if status == C_WARNING {
            // "An asynchronous interface is actually synchronous": the callback ran (or is
            // queued) as asked. Who owns its data is decided by the caller, not by the status.
            return Ok(());
        }
        self.check("stream_add_callback", status)
    }

    pub(crate) fn create_event(&self, slot: usize) -> Result<Handle> {
        let create = self.table.create_event.expect("checked: required");
        let mut event: C_Event = std::ptr::null_mut();
        // SAFETY: a valid device and a zeroed out-parameter.
        self.call_on("create_event", slot, |device| unsafe {
            create(device, &mut event)
        })?;
        self.event_handles.created(event as usize);
        Ok(Handle(event as usize))
    }

    pub(crate) fn record_event(&self, slot: usize, stream: Handle, event: Handle) -> Result<()> {
        let record = self.table.record_event.expect("checked: required");
        // SAFETY: a valid device, stream and event.
        self.call_on("record_event", slot, |device| unsafe {
            record(device, stream.stream(), event.event())
        })
    }

    pub(crate) fn destroy_event(&self, slot: usize, event: Handle) -> Result<()> {
        let destroy = self.table.destroy_event.expect("checked: required");
        self.event_handles.destroyed(event.0);
        // SAFETY: an event this runtime created, destroyed once.
        self.call_on("destroy_event", slot, |device| unsafe {
            destroy(device, event.event())
        })
    }

    /// Without `query_event`, synchronizes and answers true, as Paddle does.
    pub(crate) fn query_event(&self, slot: usize, event: Handle) -> Result<bool> {
        // SAFETY: a valid device and event.
        let query = (self.table.query_event)
            .map(|query| move |device| unsafe { query(device, event.event()) });
        let synchronize = || self.synchronize_event(slot, event);
        self.query_or_synchronize("query_event", slot, query, synchronize)
    }

    pub(crate) fn synchronize_event(&self, slot: usize, event: Handle) -> Result<()> {
        let synchronize = self.table.synchronize_event.expect("checked: required");
        // SAFETY: a valid device and event.
        self.call_on("synchronize_event", slot, |device| unsafe {
            synchronize(device, event.event())
        })
    }

    /// Without `stream_wait_event` the host waits for the event instead (Paddle skips the
    /// wait, which loses the ordering).
    pub(crate) fn stream_wait_event(
        &self,
        slot: usize,
        stream: Handle,
        event: Handle,
    ) -> Result<()> {
        let Some(wait) = self.table.stream_wait_event else {
            return self.synchronize_event(slot, event);
        };
        // SAFETY: a valid device, stream and event.
        self.call_on("stream_wait_event", slot, |device| unsafe {
            wait(device, stream.stream(), event.event())
        })
    }

    /// Device memory; `C_FAILED` (resource exhausted) is `Error::OutOfMemory`.
    pub(crate) fn allocate(&self, slot: usize, len: usize) -> Result<usize> {
        let t = &self.table;
        let allocate = t.device_memory_allocate.expect("checked: required");
        let deallocate = t.device_memory_deallocate.expect("checked: required");
        self.allocate_with("device_memory_allocate", allocate, deallocate, slot, len)
    }

    pub(crate) fn deallocate(&self, slot: usize, ptr: usize, len: usize) -> Result<()> {
        let deallocate = self
            .table
            .device_memory_deallocate
            .expect("checked: required");
        // SAFETY: memory this runtime allocated with this size, freed once.
        self.call_on("device_memory_deallocate", slot, |device| unsafe {
            deallocate(device, ptr as *mut c_void, len)
        })
    }

    /// Pinned host memory, when the plug-in has `host_memory_allocate`.
    pub(crate) fn host_allocate(&self, slot: usize, len: usize) -> Option<Result<usize>> {
        let allocate = self.table.host_memory_allocate?;
        let deallocate = self.table.host_memory_deallocate?;
        Some(self.allocate_with("host_memory_allocate", allocate, deallocate, slot, len))
    }

    pub(crate) fn host_deallocate(&self, slot: usize, ptr: usize, len: usize) -> Result<()> {
        let deallocate = self
            .table
            .host_memory_deallocate
            .ok_or_else(|| self.unavailable("host_memory_deallocate"))?;
        // SAFETY: host memory this runtime allocated with this size, freed once.
        self.call_on("host_memory_deallocate", slot, |device| unsafe {
            deallocate(device, ptr as *mut c_void, len)
        })
    }

    /// One allocation. The status and the pointer decide together: `C_SUCCESS` or
    /// `C_WARNING` with a pointer is an allocation (a warning is not a failure), and with a
    /// null pointer it is `OutOfMemory` (Paddle's own convention: its `CustomAllocator` reads
    /// a null pointer from a successful allocate as exhaustion); a failure that still wrote a
    /// pointer gives it back through the plug-in's own deallocate (so it does not leak);
    /// `C_FAILED` is `OutOfMemory`, other failures `Driver`. A block whose end would pass the
    /// address space is given back and answered as a malformed answer.
    fn allocate_with(
        &self,
        call: &'static str,
        allocate: unsafe extern "C" fn(C_Device, *mut *mut c_void, usize) -> C_Status,
        deallocate: unsafe extern "C" fn(C_Device, *mut c_void, usize) -> C_Status,
        slot: usize,
        len: usize,
    ) -> Result<usize> {
        self.bind(slot)?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid device and a zeroed out-parameter.
        let status = plugin_call(|| unsafe { allocate(self.device_ptr(slot), &mut ptr, len) });
        if status == C_SUCCESS || status == C_WARNING {
            if ptr.is_null() {
                return Err(Error::out_of_memory(&self.place(slot), len));
            }
            // Addresses inside the block are computed as `ptr + offset`: a block whose end
            // passes the address space is no allocation of `len` bytes.
            if (ptr as usize).checked_add(len).is_none() {
                // SAFETY: the pointer the plug-in just wrote for this size; nothing uses it.
                let _ = plugin_call(|| unsafe { deallocate(self.device_ptr(slot), ptr, len) });
                return Err(self.malformed(format!(
                    "{call} answered a block at {ptr:p} of {len} bytes, which ends past the \
                     address space"
                )));
            }
            return Ok(ptr as usize);
        }
        if !ptr.is_null() {
            // SAFETY: the pointer the plug-in just wrote for this size; nothing uses it.
            let freed = plugin_call(|| unsafe { deallocate(self.device_ptr(slot), ptr, len) });
            if freed != C_SUCCESS {
                tracing::warn!(
                    "devstream-plugin: freeing the pointer {call} wrote before answering {}: {}",
                    status.name(),
                    freed.name()
                );
            }
        }
        if status == C_FAILED {
            return Err(Error::out_of_memory(&self.place(slot), len));
        }
        Err(self
            .check(call, status)
            .err()
            .unwrap_or_else(|| self.malformed(format!("{call} answered {}", status.name()))))
    }

    /// A copy in stream order: the plug-in's asynchronous copy, or (without one) the stream
    /// synchronized and the synchronous copy.
    pub(crate) fn copy(&self, slot: usize, stream: Handle, copy: RawCopy) -> Result<()> {
        let RawCopy {
            kind,
            dst,
            src,
            len,
        } = copy;
        if len == 0 {
            return Ok(());
        }
        let t = &self.table;
        let (async_call, async_fn, sync_call, sync_fn) = match kind {
            CopyKind::HostToDevice => (
                "async_memory_copy_h2d",
                t.async_memory_copy_h2d,
                "memory_copy_h2d",
                t.memory_copy_h2d,
            ),
            CopyKind::DeviceToHost => (
                "async_memory_copy_d2h",
                t.async_memory_copy_d2h,
                "memory_copy_d2h",
                t.memory_copy_d2h,
            ),
            CopyKind::DeviceToDevice => (
                "async_memory_copy_d2d",
                t.async_memory_copy_d2d,
                "memory_copy_d2d",
                t.memory_copy_d2d,
            ),
        };
        self.bind(slot)?;
        if let Some(copy) = async_fn {
            // SAFETY: valid ranges kept alive until the copy completes (the callers track it).
            let status = plugin_call(|| unsafe {
                copy(
                    self.device_ptr(slot),
                    stream.stream(),
                    dst as *mut c_void,
                    src as *const c_void,
                    len,
                )
            });
            return self.check(async_call, status);
        }
        let copy = sync_fn.ok_or_else(|| self.unavailable(async_call))?;
        self.synchronize_stream(slot, stream)?;
        // SAFETY: valid ranges; the stream's earlier work is complete.
        let status = plugin_call(|| unsafe {
            copy(
                self.device_ptr(slot),
                dst as *mut c_void,
                src as *const c_void,
                len,
            )
        });
        self.check(sync_call, status)
    }

    /// Whether copies of `kind` exist at all.
    pub(crate) fn has_copy(&self, kind: CopyKind) -> bool {
        let t = &self.table;
        match kind {
            CopyKind::HostToDevice => {
                t.async_memory_copy_h2d.is_some() || t.memory_copy_h2d.is_some()
            }
            CopyKind::DeviceToHost => {
                t.async_memory_copy_d2h.is_some() || t.memory_copy_d2h.is_some()
            }
            CopyKind::DeviceToDevice => {
                t.async_memory_copy_d2d.is_some() || t.memory_copy_d2d.is_some()
            }
        }
    }
}
