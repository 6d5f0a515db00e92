//! What devstream puts on a plug-in stream as a callback ([`Callback`]), and the one
//! `C_Callback` the plug-in calls for all of them ([`trampoline`]). A callback travels as a
//! token ([`crate::tokens`]): whoever claims it first owns it, so a plug-in that runs a
//! callback twice, or runs one it refused, runs nothing the second time. Nothing unwinds into
//! the plug-in: a host function's panic becomes its stream's error.

use super::host_flag::HostFlag;
use super::self_wait::HostFnScope;
use crate::sys::{C_Device, C_Status, C_Stream, C_SUCCESS};
use devstream_core::panic::{self, drop_contained, drop_payload};
use devstream_core::Error;
use std::any::Any;
use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a plug-in callback does.
pub(crate) enum Callback {
    /// A user host function; a panic is recorded as the stream's error.
    HostFn {
        f: devstream_core::HostFn,
        stream: u64,
        /// Its plug-in queue and position there.
        queue: u64,
        seq: u64,
        errors: super::StreamErrors,
    },
    /// `write_flag`.
    SetFlag(Arc<HostFlag>, u32),
    /// Drops what the stream's earlier work used.
    Release(Box<dyn Any + Send>),
    /// Blocks the plug-in stream until the flag's value is at least this: a flag wait held
    /// on the host, handed to the plug-in when a capture begins behind it.
    BlockUntil(Arc<HostFlag>, u32),
    /// Wakes the plug-in runtime's completion notifier (`Stream::completion`: the event
    /// recorded right after this callback is about to complete), after setting the record's
    /// flag, if given, that says the work before the record is done (`EventRecord::settle`).
    Nudge(usize, Option<Arc<AtomicBool>>),
}

thread_local! {
    /// The token of the callback this thread is handing to `stream_add_callback` (0: none).
    static ADDING: Cell<usize> = const { Cell::new(0) };
}

/// Runs `add`, the `stream_add_callback` call for the callback `token`, noted on this thread
/// (so that the trampoline can tell a callback run inline from one run by a plug-in worker).
pub(super) fn adding<T>(token: usize, add: impl FnOnce() -> T) -> T {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            ADDING.with(|adding| adding.set(self.0));
        }
    }
    let _restore = Restore(ADDING.with(|adding| adding.replace(token)));
    add()
}

/// Whether this thread is inside the `stream_add_callback` call for `token`.
fn adding_here(token: usize) -> bool {
    ADDING.with(Cell::get) == token
}

/// The `C_Callback` devstream passes to `stream_add_callback`. Never unwinds into the plug-in.
pub(super) unsafe extern "C" fn trampoline(
    _device: C_Device,
    _stream: C_Stream,
    user_data: *mut c_void,
    status: *mut C_Status,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if !status.is_null() {
            // SAFETY: the plug-in passes a writable status or null.
            unsafe { *status = C_SUCCESS };
        }
        // Nothing when the token was claimed already: the submitter took the callback back
        // after the plug-in answered an error, or the plug-in calls it a second time. A
        // release called inside `stream_add_callback` is left to the submitter (see
        // `put_callback`).
        // A flag wait not yet reached, run by the plug-in inside the `stream_add_callback`
        // that hands it over on this same thread (a plug-in that runs callbacks inline), would
        // block the thread that hands it over (in `begin_capture`) until the flag is written,
        // for good if that thread or what it holds was to write it: declined, it stays held
        // and `begin_capture` answers `Error::Capture` (see `StreamCore::hand_over_held`).
        let token = user_data as usize;
        let early = |callback: &Callback| match callback {
            Callback::Release(_) => true,
            Callback::BlockUntil(flag, value) => flag.get() < *value && adding_here(token),
            _ => false,
        };
        let Some(callback) = crate::tokens::run(token, early) else {
            return;
        };
        match callback {
            Callback::HostFn {
                mut f,
                stream,
                queue,
                seq,
                errors,
            } => {
                let scope = HostFnScope::enter(queue, seq, stream);
                if let Err(payload) = catch_unwind(AssertUnwindSafe(&mut f)) {
                    let message = panic::message(payload.as_ref());
                    errors.raise(Error::HostFuncPanicked { stream, message });
                    // A payload whose drop panics (with payloads whose drops panic, ...) must
                    // not escape either.
                    drop_payload(payload);
                }
                drop(scope);
                drop_contained(f);
            }
            Callback::SetFlag(flag, value) => flag.set(value),
            Callback::Release(payload) => {
                drop_contained(payload);
            }
            Callback::BlockUntil(flag, value) => flag.wait_until(value),
            Callback::Nudge(runtime, reached) => {
                if let Some(reached) = reached {
                    reached.store(true, Ordering::Release);
                }
                crate::notify::nudge(runtime)
            }
        }
    }));
    if let Err(payload) = outcome {
        drop_payload(payload);
    }
}
