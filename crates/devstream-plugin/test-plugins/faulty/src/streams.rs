//! Stream and event functions: stream creation, `stream_add_callback` in each mode's manner,
//! the re-entry hook, and the events of the modes that queue copies.

use super::*;

/// What [`MODE_REENTRANT`]'s hook is told: `record_event` is calling it.
pub const REENTRY_RECORD_EVENT: u32 = 1;
/// What [`MODE_REENTRANT`]'s hook is told: `stream_add_callback` is calling it.
pub const REENTRY_ADD_CALLBACK: u32 = 2;
/// What [`MODE_QUEUED_CALLBACKS_NO_QUERIES`]'s hook is told: `synchronize_stream` is calling it.
pub const REENTRY_SYNCHRONIZE_STREAM: u32 = 3;

/// Signalled when `devstream_test_plugin_faulty_run_queued()` ran what was queued.
pub(crate) static QUEUED_RAN: std::sync::Condvar = std::sync::Condvar::new();

/// `synchronize_stream` of [`MODE_QUEUED_CALLBACKS_NO_QUERIES`].
pub(crate) unsafe extern "C" fn synchronize_until_callbacks_ran(
    _device: C_Device,
    stream: C_Stream,
) -> C_Status {
    reenter(REENTRY_SYNCHRONIZE_STREAM);
    let queued_here = |queued: &Vec<Queued>| {
        queued
            .iter()
            .any(|work| matches!(work, Queued::Callback { stream: s, .. } if *s == stream as usize))
    };
    let mut queued = lock(&QUEUED);
    while queued_here(&queued) {
        queued = QUEUED_RAN.wait(queued).unwrap_or_else(|e| e.into_inner());
    }
    C_SUCCESS
}

/// The hook [`MODE_REENTRANT`]'s functions call (told which function calls it).
pub(crate) type ReentryHook = unsafe extern "C" fn(c_uint);
pub(crate) static REENTRY_HOOK: Mutex<Option<ReentryHook>> = Mutex::new(None);

/// Sets (or, with null, clears) the hook [`MODE_REENTRANT`]'s `record_event` and
/// `stream_add_callback` call before they do their work.
#[no_mangle]
pub extern "C" fn devstream_test_plugin_faulty_set_reentry_hook(hook: Option<ReentryHook>) {
    *lock(&REENTRY_HOOK) = hook;
}

/// Calls the re-entry hook, if set, with `call`.
pub(crate) fn reenter(call: u32) {
    let hook = *lock(&REENTRY_HOOK);
    if let Some(hook) = hook {
        // SAFETY: the host's hook, called with no lock of this plug-in held.
        unsafe { hook(call) };
    }
}

pub(crate) unsafe extern "C" fn reentrant_record_event(
    _device: C_Device,
    _stream: C_Stream,
    _event: C_Event,
) -> C_Status {
    guarded(|| {
        reenter(REENTRY_RECORD_EVENT);
        C_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn create_stream(device: C_Device, stream: *mut C_Stream) -> C_Status {
    match mode_of(device) {
        MODE_FAILING_CREATE_STREAM => C_ERROR,
        // Like Paddle's custom_cpu: success, nothing written.
        MODE_PADDLE_CUSTOM_CPU | MODE_UNWRITTEN_ALLOCATION => C_SUCCESS,
        _ => {
            if stream.is_null() {
                return C_ERROR;
            }
            // A dummy, non-null handle of its own (never dereferenced): devstream refuses a
            // capture on a stream whose handle another live stream has, which would capture
            // that stream's work too.
            static NEXT_STREAM: AtomicUsize = AtomicUsize::new(0x1000);
            let handle = if mode_of(device) == MODE_CAPTURE_SHARED_STREAMS {
                std::ptr::NonNull::<C_Stream_st>::dangling().as_ptr()
            } else {
                NEXT_STREAM.fetch_add(0x10, Ordering::SeqCst) as C_Stream
            };
            // SAFETY: a non-null out-parameter.
            unsafe { *stream = handle };
            C_SUCCESS
        }
    }
}

pub(crate) unsafe extern "C" fn inline_callback(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    guarded(|| {
        let Some(callback) = callback else {
            return C_ERROR;
        };
        let mut status = C_SUCCESS;
        // SAFETY: the host's callback with its user data, called once.
        unsafe { callback(device, stream, user_data, &mut status) };
        C_SUCCESS
    })
}

/// A `stream_add_callback` function's type.
type AddCallback = unsafe extern "C" fn(C_Device, C_Stream, C_Callback, *mut c_void) -> C_Status;

/// Declares `stream_add_callback` functions made of others: each body calls `$forward(f)` to
/// hand the arguments it was given, unchanged, to the `stream_add_callback` function `f`, and
/// answers a status of its own making.
macro_rules! forwarding_callbacks {
    ($($(#[$doc:meta])* $name:ident($forward:ident) => $body:expr;)*) => {$(
        $(#[$doc])*
        pub(crate) unsafe extern "C" fn $name(
            device: C_Device,
            stream: C_Stream,
            callback: C_Callback,
            user_data: *mut c_void,
        ) -> C_Status {
            let $forward = |to: AddCallback| {
                // SAFETY: the host's arguments to this `stream_add_callback`, forwarded as given.
                unsafe { to(device, stream, callback, user_data) }
            };
            $body
        }
    )*};
}

forwarding_callbacks! {
    /// Runs the callback inside the call after calling the re-entry hook.
    reentrant_callback(forward) => guarded(|| {
        reenter(REENTRY_ADD_CALLBACK);
        forward(inline_callback)
    });
    /// Runs the callback inside the call and answers `C_WARNING`.
    inline_callback_warning(forward) => match forward(inline_callback) {
        C_SUCCESS => C_WARNING,
        other => other,
    };
    /// Runs the callback twice inside the call (calling twice is this mode's fault).
    inline_callback_twice(forward) => {
        forward(inline_callback);
        forward(inline_callback)
    };
    /// Queues the callback and answers `C_SUCCESS`.
    queued_callback_success(forward) => match forward(queued_callback_error) {
        C_ERROR => C_SUCCESS,
        other => other,
    };
}

pub(crate) unsafe extern "C" fn queued_callback_error(
    device: C_Device,
    stream: C_Stream,
    callback: C_Callback,
    user_data: *mut c_void,
) -> C_Status {
    let Some(callback) = callback else {
        return C_ERROR;
    };
    let id = if device.is_null() {
        0
    } else {
        // SAFETY: a non-null `C_Device` from the host.
        unsafe { (*device).id }
    };
    lock(&QUEUED).push(Queued::Callback {
        callback,
        device: id,
        stream: stream as usize,
        user_data: user_data as usize,
    });
    C_ERROR
}

pub(crate) unsafe extern "C" fn create_event(device: C_Device, event: *mut C_Event) -> C_Status {
    let mode = mode_of(device);
    if mode == MODE_PADDLE_CUSTOM_CPU || mode == MODE_UNWRITTEN_ALLOCATION {
        return C_SUCCESS;
    }
    if event.is_null() {
        return C_ERROR;
    }
    // SAFETY: a non-null out-parameter.
    unsafe { *event = std::ptr::NonNull::<C_Event_st>::dangling().as_ptr() };
    C_SUCCESS
}

/// Whether copies are queued (not yet run by the test) or running.
pub(crate) fn copies_queued() -> bool {
    let queued = lock(&QUEUED);
    queued
        .iter()
        .any(|work| matches!(work, Queued::Copy { .. }))
        || crate::COPIES_RUNNING.load(std::sync::atomic::Ordering::SeqCst) > 0
}

pub(crate) unsafe extern "C" fn query_event_after_queued(
    _device: C_Device,
    _event: C_Event,
) -> C_Status {
    if copies_queued() {
        C_FAILED
    } else {
        C_SUCCESS
    }
}

pub(crate) unsafe extern "C" fn synchronize_event_after_queued(
    _device: C_Device,
    _event: C_Event,
) -> C_Status {
    if copies_queued() {
        C_ERROR
    } else {
        C_SUCCESS
    }
}
