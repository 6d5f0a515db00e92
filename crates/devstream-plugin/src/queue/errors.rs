//! A plug-in stream's errors as `synchronize` reports them (`devstream_core::traits`,
//! "Errors"): a failure of the plug-in's own work is kept and reported by every later
//! `synchronize` (the device is failing), while a failure that leaves the device working (a
//! host function's panic, an error of work another backend ran that the stream waited for) is
//! reported once, by the next `synchronize`, as the CPU, CUDA and HIP streams report them.

use devstream_core::sync::lock;
use devstream_core::Error;
use std::sync::{Arc, Mutex};

/// The errors of one stream, shared with what raises them (host-function callbacks, graph
/// launches, waits on other backends' work) and with the stream's completions.
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamErrors(Arc<Mutex<Kept>>);

#[derive(Debug, Default)]
struct Kept {
    /// The first failure of the plug-in's own work: kept.
    failed: Option<Error>,
    /// The first failure that leaves the device working since the last `synchronize`.
    raised: Option<Error>,
}

impl StreamErrors {
    /// Keeps the plug-in's failure (the first one) for every later report.
    pub(crate) fn fail(&self, error: Error) {
        lock(&self.0).failed.get_or_insert(error);
    }

    /// Keeps a failure that leaves the device working (the first since the last report) for
    /// the next `synchronize`.
    pub(crate) fn raise(&self, error: Error) {
        lock(&self.0).raised.get_or_insert(error);
    }

    /// What `synchronize` reports: a failure raised since the last report (taken), else the
    /// plug-in's kept failure.
    pub(crate) fn report(&self) -> Option<Error> {
        let mut kept = lock(&self.0);
        kept.raised.take().or_else(|| kept.failed.clone())
    }

    /// What a completion of the stream's work reports, leaving it for `synchronize`.
    pub(crate) fn peek(&self) -> Option<Error> {
        let kept = lock(&self.0);
        kept.raised.clone().or_else(|| kept.failed.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panic_error(message: &str) -> Error {
        Error::HostFuncPanicked {
            stream: 1,
            message: message.into(),
        }
    }

    #[test]
    fn a_raised_error_is_reported_once_and_a_failure_every_time() {
        let errors = StreamErrors::default();
        assert!(errors.report().is_none());
        errors.raise(panic_error("first"));
        errors.raise(panic_error("second"));
        assert_eq!(errors.peek(), Some(panic_error("first")));
        assert_eq!(errors.report(), Some(panic_error("first")));
        assert_eq!(errors.report(), None, "reported once");
        let lost = Error::Driver {
            backend: "plugin",
            call: "memcpy_h2d",
            code: 1,
            message: "device lost".into(),
        };
        errors.fail(lost.clone());
        errors.raise(panic_error("third"));
        assert_eq!(errors.report(), Some(panic_error("third")));
        assert_eq!(errors.report(), Some(lost.clone()));
        assert_eq!(errors.report(), Some(lost), "a failure is kept");
    }
}
