//! Native status codes to [`devstream_core::Error`].

use crate::raw::{ErrorKind, RawApi, RawError};
use devstream_core::{Error, Place};

/// Maps a failed raw call to a typed error: capture-rule codes become [`Error::Capture`],
/// everything else [`Error::Driver`] naming the backend, the call, the code and its text.
pub fn map_error<A: RawApi>(error: RawError) -> Error {
    match A::error_kind(error.code) {
        ErrorKind::Capture => Error::Capture {
            op: error.call,
            reason: A::error_message(error.code),
        },
        _ => Error::Driver {
            backend: A::BACKEND,
            call: error.call,
            code: i64::from(error.code),
            message: A::error_message(error.code),
        },
    }
}

/// Like [`map_error`], but out-of-memory becomes [`Error::OutOfMemory`] for `bytes` on `place`,
/// and an invalid value (the size is the one argument of an allocation a caller chooses)
/// [`Error::InvalidArgument`].
pub fn map_alloc_error<A: RawApi>(error: RawError, place: &Place, bytes: usize) -> Error {
    match A::error_kind(error.code) {
        ErrorKind::OutOfMemory => Error::out_of_memory(place, bytes),
        ErrorKind::InvalidValue => Error::InvalidArgument(format!(
            "{}({bytes} bytes) on {place}: {}",
            error.call,
            A::error_message(error.code)
        )),
        _ => map_error::<A>(error),
    }
}

/// Converts a raw result.
#[inline]
pub fn check<A: RawApi, T>(result: Result<T, RawError>) -> devstream_core::Result<T> {
    result.map_err(map_error::<A>)
}

/// `Ok(true)` for success, `Ok(false)` for not-ready, the mapped error otherwise.
#[inline]
pub fn check_ready<A: RawApi>(result: Result<(), RawError>) -> devstream_core::Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if A::error_kind(e.code) == ErrorKind::NotReady => Ok(false),
        Err(e) => Err(map_error::<A>(e)),
    }
}
