//! How a failure reaches Paddle. An entry point answers a status (`C_ERROR`, `C_FAILED` for
//! out of memory); why it failed is noted in a thread-local for the entry point to report
//! with that status (through `tracing`, and on stderr when asked). A host function cannot
//! return an error, so one that fails unwinds, and devstream reports that on its stream.

use super::Status;
use crate::sys::{C_Status, C_ERROR, C_FAILED};
use std::sync::OnceLock;

/// Whether failures are printed to stderr: `DEVSTREAM_PADDLE_LOG=1` (`=backtrace` adds the
/// caller's thread and backtrace), or
/// `DEVSTREAM_PADDLE_DEBUG` set (to anything). They are always reported through `tracing`
/// (`warn`), which reaches a subscriber only where this library shares the host's `tracing`
/// (a copy of the cdylib has its own: hence the stderr switch).
pub fn log_to_stderr() -> bool {
    static LOG: OnceLock<bool> = OnceLock::new();
    *LOG.get_or_init(|| {
        std::env::var("DEVSTREAM_PADDLE_LOG").is_ok_and(|v| v == "1" || v == "backtrace")
            || std::env::var_os("DEVSTREAM_PADDLE_DEBUG").is_some()
    })
}

thread_local! {
    /// Why the entry point running on this thread fails: the devstream error (with the
    /// operation that met it) or the refusal, for the entry point to report with its status.
    static FAILURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Notes why the current entry point fails (the first reason of a call stays).
///
/// Entry points take the note when they fail (and report it); they do not clear it when they
/// start (that would cost every call a thread-local access). So a call that notes a refusal
/// and then recovers from it (tries something else that works) takes the note itself: a call
/// that succeeds leaves nothing noted.
fn note_failure(reason: impl FnOnce() -> String) {
    let _ = FAILURE.try_with(|f| {
        let mut f = f.borrow_mut();
        if f.is_none() {
            *f = Some(reason());
        }
    });
}

/// Takes (and clears) the reason noted for the entry point running on this thread, if any.
/// The table's entry points take it when they fail, to report it.
pub fn take_failure() -> Option<String> {
    FAILURE.try_with(|f| f.borrow_mut().take()).ok().flatten()
}

/// `C_ERROR` for a refusal that is no devstream error (an unknown handle, a foreign device,
/// an address outside every allocation), noting `reason` for the entry point's report.
pub(super) fn refuse(reason: impl FnOnce() -> String) -> C_Status {
    note_failure(reason);
    C_ERROR
}

/// Maps a devstream error to `C_ERROR` (`C_FAILED` for out of memory), noting it for the
/// entry point's report.
pub(super) fn fail(what: &str, error: devstream::Error) -> C_Status {
    note_failure(|| format!("{what}: {error}"));
    match error {
        devstream::Error::OutOfMemory { .. } => C_FAILED,
        _ => C_ERROR,
    }
}

/// `Result<T, devstream::Error>` → [`Status`] naming the operation.
pub(super) trait Check<T> {
    fn check(self, what: &str) -> Status<T>;
}

impl<T> Check<T> for devstream::Result<T> {
    fn check(self, what: &str) -> Status<T> {
        self.map_err(|e| fail(what, e))
    }
}

/// Ends the running host function as failed, with `message`: devstream's only error channel
/// for host functions is an unwind, which it catches on its worker and reports as
/// `Error::HostFuncPanicked` on the stream that ran the function. `resume_unwind` does not
/// run the panic hook (nothing is printed).
pub(super) fn fail_in_host_func(message: String) -> ! {
    tracing::warn!("devstream-paddle: stream work failed: {message}");
    if log_to_stderr() {
        eprintln!("devstream-paddle: stream work failed: {message}");
    }
    std::panic::resume_unwind(Box::new(message))
}
