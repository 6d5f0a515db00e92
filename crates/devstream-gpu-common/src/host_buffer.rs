//! Pinned host buffers ([`GpuHostBuffer`]): host memory the device copies into and out of
//! asynchronously, the streams' copies of it tracked by one use event per stream, and host
//! functions given it (`devstream_core::host_fn_access`).

use crate::completion::RecordOrder;
use crate::device::Device;
use crate::error::check;
use crate::event::GpuEvent;
use crate::ext::CaptureModeGuard;
use crate::raw::{RawApi, RawEvent};
use crate::stream::{GpuStream, StreamInner};
use crate::users::{forget_finished, gone};
use devstream_core::foreign::BackendKey;
use devstream_core::host_fn_access::{HostBytes, HostFnAccess, HostFnUses};
use devstream_core::ops::BufferLen;
use devstream_core::traits::check_range;
use devstream_core::{Error, EventFlags, HostBuffer, Result};
use std::fmt;
use std::sync::{Arc, Mutex};

/// An event recorded after a host buffer's copies on one stream (see `HostInner::uses`),
/// destroyed when the last holder lets go: the buffer, or a completion of one of its records
/// (a host function's snapshot of the buffer's queued copies).
struct UseEvent<A: RawApi> {
    raw: RawEvent,
    _api: std::marker::PhantomData<A>,
}

impl<A: RawApi> UseEvent<A> {
    /// The raw event, no longer destroyed by this handle.
    fn into_raw(self) -> RawEvent {
        std::mem::ManuallyDrop::new(self).raw
    }
}

impl<A: RawApi> Drop for UseEvent<A> {
    fn drop(&mut self) {
        let raw = self.raw;
        crate::hostfn::release_off_callback(move || {
            // devstream's own call beside any capture: in Relaxed mode.
            let _relaxed = CaptureModeGuard::<A>::relaxed();
            // SAFETY: our event; its last holder let go, nothing asks it any more.
            let _ = unsafe { A::event_destroy(raw) };
        });
    }
}

/// A stream that used a host buffer, the event after its last copy of it, and where that
/// record stands in the stream (for the completion hub's sweeper).
struct StreamUse<A: RawApi> {
    stream: Arc<StreamInner<A>>,
    event: Arc<UseEvent<A>>,
    order: Option<RecordOrder>,
}

struct HostInner<A: RawApi> {
    ptr: *mut u8,
    len: usize,
    device: &'static Device<A>,
    /// Per stream, an event recorded after the last queued copy that used the buffer. Where a
    /// completion of its current record is pending (it holds the `Arc` too), the next copy on
    /// that stream records a fresh event instead of moving the record the completion awaits.
    uses: Mutex<Vec<StreamUse<A>>>,
    /// Host functions given the buffer (`launch_host_func_with`) that have not run: a copy
    /// submitted now waits for them, checked under `uses`' lock, under which such a host
    /// function takes its snapshot of the queued copies.
    host_fns: HostFnUses,
}

// SAFETY: the pointer is pinned host memory owned by this object; host access goes through
// `uses`' mutex, device access is ordered by events.
unsafe impl<A: RawApi> Send for HostInner<A> {}
// SAFETY: as above.
unsafe impl<A: RawApi> Sync for HostInner<A> {}

impl<A: RawApi> Drop for HostInner<A> {
    fn drop(&mut self) {
        let uses = self
            .uses
            .lock()
            .map(|mut u| std::mem::take(&mut *u))
            .unwrap_or_default();
        let ptr = SendPtr(self.ptr);
        let len = self.len;
        let device = self.device;
        crate::hostfn::release_off_callback(move || {
            let ptr = ptr;
            // The buffer holds the only handles now: a pending completion of a use event's
            // record keeps the buffer alive too.
            let events: Vec<RawEvent> = uses
                .into_iter()
                .filter_map(|entry| match Arc::try_unwrap(entry.event) {
                    Ok(event) => Some(event.into_raw()),
                    // Never expected; the handle destroys it when let go.
                    Err(_) => None,
                })
                .collect();
            if ptr.0.is_null() {
                for event in events {
                    // SAFETY: our event.
                    let _ = unsafe { A::event_destroy(event) };
                }
                return;
            }
            device.defer(
                events,
                Box::new(move || {
                    let ptr = ptr;
                    // Every copy that used the memory has completed: back to the cache.
                    device.release_pinned(ptr.0, len);
                }),
            );
        });
    }
}

struct SendPtr(*mut u8);
// SAFETY: moved into the deferred release only, which frees it once.
unsafe impl Send for SendPtr {}

/// Pinned host memory (`cuMemHostAlloc`, portable and device-mapped) for asynchronous copies.
/// Host reads and writes wait for queued copies that use it.
pub struct GpuHostBuffer<A: RawApi> {
    inner: Arc<HostInner<A>>,
}

impl<A: RawApi> fmt::Debug for GpuHostBuffer<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuHostBuffer")
            .field("ptr", &self.inner.ptr)
            .field("len", &self.inner.len)
            .finish()
    }
}

impl<A: RawApi> GpuHostBuffer<A> {
    pub(crate) fn alloc(device: &'static Device<A>, len: usize) -> Result<Self> {
        device.bind()?;
        device.collect();
        let ptr = if len == 0 {
            std::ptr::null_mut()
        } else {
            let ptr = device.alloc_pinned(len)?;
            // SAFETY: `ptr` points to at least `len` bytes no one else uses.
            unsafe { std::ptr::write_bytes(ptr, 0, len) };
            ptr
        };
        Ok(GpuHostBuffer {
            inner: Arc::new(HostInner {
                ptr,
                len,
                device,
                uses: Mutex::new(Vec::new()),
                host_fns: HostFnUses::new(),
            }),
        })
    }

    /// The host address of the pinned memory (null when empty).
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.ptr
    }

    /// Waits for queued copies, then runs `f` on the bytes under the host-access lock. The
    /// lock is not held while waiting (a host function that the awaited copy is queued behind
    /// may need it). Inside a host function nothing waits: the copies of the host function's
    /// own stream are skipped (in stream order those before it have completed and those after
    /// it have not started), and a copy of another stream still queued is a typed error (it
    /// may be queued behind this host function, which would then never return).
    ///
    /// The queries and waits run with this thread in Relaxed mode: they are devstream's own
    /// (host-buffer access is allowed beside every capture), and no capture in progress, on
    /// any thread, may count them as unsafe. An event of `uses` never stands for captured work.
    fn with_bytes<R>(&self, f: impl FnOnce(*mut u8) -> R) -> Result<R> {
        let inside = crate::hostfn::in_host_function();
        // Host functions given the buffer first: they may be queued behind this host function,
        // or be it (another backend's host function given the buffer).
        if !self.inner.host_fns.is_idle() {
            if inside || devstream_core::foreign::running_host_fn().is_some() {
                return Err(Error::WouldDeadlock {
                    op: "HostBuffer access",
                    reason: "a host function given the buffer has not run yet, possibly queued \
                             after this one"
                        .into(),
                });
            }
            self.inner.host_fns.wait_idle();
        }
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        let own = if inside {
            crate::hostfn::running_stream()
        } else {
            None
        };
        loop {
            let uses = self
                .inner
                .uses
                .lock()
                .map_err(|_| Error::InvalidArgument("host buffer lock poisoned".into()))?;
            let mut pending = None;
            for entry in uses.iter() {
                let event = &entry.event.raw;
                if own.is_some()
                    && entry
                        .stream
                        .panic_slot_if_made()
                        .is_some_and(|slot| own == Some(crate::hostfn::stream_token(slot)))
                {
                    continue;
                }
                // SAFETY: our event, alive while the buffer is.
                if !crate::error::check_ready::<A>(unsafe { A::event_query(*event) })? {
                    pending = Some(*event);
                    break;
                }
            }
            let Some(event) = pending else {
                return Ok(f(self.inner.ptr));
            };
            drop(uses);
            if inside {
                return Err(Error::WouldDeadlock {
                    op: "HostBuffer access",
                    reason: "a copy that uses the buffer is still queued, possibly after the \
                             host function"
                        .into(),
                });
            }
            // SAFETY: our event: events in `uses` are destroyed only when the buffer is.
            check::<A, _>(unsafe { A::event_synchronize(event) })?;
        }
    }

    /// Whether [`GpuHostBuffer::with_bytes`] would wait now: outside this backend's host
    /// functions (inside them it never waits), while an event of `uses` is not ready. A query
    /// that fails answers `false`: the access then answers that error without waiting.
    fn would_wait(&self) -> bool {
        if crate::hostfn::in_host_function() {
            return false;
        }
        if !self.inner.host_fns.is_idle() {
            return true;
        }
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        let Ok(uses) = self.inner.uses.lock() else {
            return false;
        };
        uses.iter().any(|entry| {
            // SAFETY: our event, alive while the buffer is.
            let queried = unsafe { A::event_query(entry.event.raw) };
            matches!(crate::error::check_ready::<A>(queried), Ok(false))
        })
    }

    /// A new use event (the device's context current).
    fn new_use_event(&self) -> Result<Arc<UseEvent<A>>> {
        // SAFETY: the device's context is current (the caller's).
        let raw = check::<A, _>(unsafe { A::event_create(EventFlags::default()) })?;
        Ok(Arc::new(UseEvent {
            raw,
            _api: std::marker::PhantomData,
        }))
    }

    /// Submits `copy` on `stream` and records that the buffer is used up to that point.
    ///
    /// The event that tracks the copy is found or made before the copy is queued, so that a
    /// queued copy is always tracked; if recording it fails after all, the memory is leaked
    /// rather than freed under the copy. A stream's first use also forgets the uses of streams
    /// that are gone and done, so a long-lived buffer used by one short-lived stream after
    /// another does not keep every one of them (and an event each) alive.
    pub(crate) fn submit(
        &self,
        stream: &GpuStream<A>,
        copy: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut uses = self
            .inner
            .uses
            .lock()
            .map_err(|_| Error::InvalidArgument("host buffer lock poisoned".into()))?;
        let mut forgotten = Vec::new();
        let mut relaxed = None;
        let index = match uses
            .iter()
            .position(|entry| Arc::ptr_eq(&entry.stream, stream.inner()))
        {
            Some(index) => index,
            None => {
                self.inner.device.bind()?;
                // Queries and destroys in Relaxed mode, or not at all (see `StreamUsers::note`).
                if !crate::hostfn::in_host_function()
                    && uses.iter().any(|entry| gone(&entry.stream))
                {
                    relaxed = CaptureModeGuard::<A>::relaxed();
                }
                if relaxed.is_some() {
                    forgotten = forget_finished(&mut uses, |entry| {
                        gone(&entry.stream)
                            // SAFETY: our event, alive while it is in `uses`.
                            && unsafe { A::event_query(entry.event.raw) }.is_ok()
                    });
                }
                uses.push(StreamUse {
                    stream: stream.inner().clone(),
                    event: self.new_use_event()?,
                    order: None,
                });
                uses.len() - 1
            }
        };
        // A completion awaits the event's current record: this copy's end goes on a fresh
        // event (made now, put in place when it is recorded), and the record awaited stays put.
        let fresh = if Arc::strong_count(&uses[index].event) > 1 {
            self.inner.device.bind()?;
            Some(self.new_use_event()?)
        } else {
            None
        };
        // Host functions given the buffer submitted before this copy run before it.
        let awaited = self.inner.host_fns.awaited(&self.inner.device.place);
        let submitted = awaited
            .into_iter()
            .try_for_each(|awaited| crate::foreign::wait_completion(stream, awaited))
            .and_then(|()| copy())
            .and_then(|()| {
                let tracked = stream
                    .keep_in_capture(Box::new(self.inner.clone()))
                    .and_then(|kept| {
                        if kept {
                            return Ok(());
                        }
                        let entry = &mut uses[index];
                        if let Some(fresh) = fresh {
                            entry.event = fresh;
                        }
                        let raw = entry.event.raw;
                        entry.order = RecordOrder::around(stream.inner(), || {
                            // SAFETY: event and stream alive, same device.
                            check::<A, _>(unsafe { A::event_record(raw, stream.raw()) })
                        })?;
                        Ok(())
                    });
                if tracked.is_err() {
                    // The copy is queued and nothing tells when it ends: leaked, never freed
                    // under it.
                    std::mem::forget(self.inner.clone());
                }
                tracked
            });
        drop(uses);
        // Destroyed (their last holders let go) outside the lock.
        drop(forgotten);
        drop(relaxed);
        submitted
    }
}

impl<A: RawApi> HostBuffer for GpuHostBuffer<A> {
    fn len(&self) -> usize {
        self.inner.len
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range("read", offset, out.len(), self.inner.len)?;
        if out.is_empty() {
            return Ok(());
        }
        self.with_bytes(|ptr| {
            // SAFETY: the range was checked and queued copies have completed.
            unsafe { std::ptr::copy_nonoverlapping(ptr.add(offset), out.as_mut_ptr(), out.len()) }
        })
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_range("write", offset, data.len(), self.inner.len)?;
        if data.is_empty() {
            return Ok(());
        }
        self.with_bytes(|ptr| {
            // SAFETY: the range was checked and queued copies have completed.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.add(offset), data.len()) }
        })
    }

    fn read_would_wait(&self) -> bool {
        self.would_wait()
    }

    fn write_would_wait(&self) -> bool {
        self.would_wait()
    }

    fn host_fn_access(&self, runner: BackendKey) -> Result<HostFnAccess> {
        // Completions are registered with the runtime, which host functions may not call.
        crate::completion::refuse_in_host_function()?;
        self.inner.device.bind()?;
        // Devstream's own queries and records beside any capture (as `with_bytes`).
        let _relaxed = CaptureModeGuard::<A>::relaxed();
        let uses = self
            .inner
            .uses
            .lock()
            .map_err(|_| Error::InvalidArgument("host buffer lock poisoned".into()))?;
        let mut queued = Vec::new();
        for entry in uses.iter() {
            // SAFETY: our event, alive while the buffer is.
            if crate::error::check_ready::<A>(unsafe { A::event_query(entry.event.raw) })? {
                continue;
            }
            // The completion of the use event's current record: the stream's last copy of the
            // buffer, not its later work. The hub's entry holds the event (so the next copy on
            // that stream records a fresh one, and this record stays put) and the buffer.
            queued.push(crate::completion::notify_after_record_of_internal(
                GpuEvent::internal(entry.event.raw, self.inner.device),
                Box::new((self.inner.clone(), entry.event.clone())),
                entry.order,
            )?);
        }
        let access = HostFnAccess::new(
            &self.inner.host_fns,
            BackendKey::of(&self.inner.device.place),
            queued,
            runner,
            Box::new(GpuHostBytes(self.inner.clone())),
        );
        drop(uses);
        Ok(access)
    }
}

/// The pinned bytes of a host buffer given to a host function
/// (`devstream_core::host_fn_access`).
struct GpuHostBytes<A: RawApi>(Arc<HostInner<A>>);

impl<A: RawApi> HostBytes for GpuHostBytes<A> {
    fn view(&mut self) -> Box<dyn std::ops::DerefMut<Target = [u8]> + '_> {
        if self.0.ptr.is_null() {
            return Box::new(<&mut [u8]>::default());
        }
        // SAFETY: `len` bytes of pinned memory the buffer owns, kept allocated by the `Arc`
        // this holds. The host function that calls this runs after every copy of the buffer
        // submitted before it (its stream waited for them) and before every copy submitted
        // after it (each waits for it), and host reads and writes wait for it: no other
        // access to the bytes is ordered to overlap it. A graph's replays are not ordered
        // against it (`launch_host_func_with` documents it), as with host reads and writes.
        Box::new(unsafe { std::slice::from_raw_parts_mut(self.0.ptr, self.0.len) })
    }
}

impl<A: RawApi> BufferLen for GpuHostBuffer<A> {
    fn byte_len(&self) -> usize {
        self.inner.len
    }
}
