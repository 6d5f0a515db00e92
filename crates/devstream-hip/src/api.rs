//! The HIP raw-call table: [`HipApi`] implements the shared layer's `RawApi` by forwarding each
//! function to one HIP runtime call from the loaded `libamdhip64`.
//!
//! HIP selects a device per thread (`hipSetDevice`) instead of handing out contexts, so the
//! table's "context" of device `n` is the token `n + 1`: making it current is `hipSetDevice(n)`,
//! and the current one is `hipGetDevice() + 1`. Everything else maps one to one onto the CUDA
//! driver calls the shared layer was written against.

use crate::loader::Table;
use crate::sys;
use devstream_core::{BackendKind, CaptureMode, Error, EventFlags, Place};
use devstream_gpu_common::raw::{HostCallback, RawFunction, StreamCallback};
use devstream_gpu_common::{
    CaptureInfo, CaptureStatus, DeviceProperties, DevicePtr, ErrorKind, LoadInfo, MemAttach,
    Optional, RawApi, RawContext, RawError, RawEvent, RawGraph, RawGraphExec, RawGraphNode,
    RawModule, RawResult, RawStream, Runtime, StreamAttribute, StreamAttributeId,
};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

mod buffer;
mod capture;
mod device;
mod event;
mod graph;
mod kernel;
mod stream;

/// The HIP runtime API as a raw-call table (an uninhabited marker type).
#[derive(Debug)]
pub enum HipApi {}

static TABLE: OnceLock<Table> = OnceLock::new();
static RUNTIME: OnceLock<Result<Runtime<HipApi>, Error>> = OnceLock::new();

/// The loaded function table. The shared layer calls nothing before `load` returned `Ok`, which
/// is when the table is set; a call without it answers `hipErrorNotInitialized`.
#[inline]
fn table(call: &'static str) -> RawResult<&'static Table> {
    TABLE.get().ok_or(RawError {
        code: sys::hipErrorNotInitialized,
        call,
    })
}

/// The status code every runtime call answers.
type Status = sys::hipError_t;

#[inline]
fn ok(status: Status, call: &'static str) -> RawResult {
    if status == sys::hipSuccess {
        Ok(())
    } else {
        Err(RawError { code: status, call })
    }
}

/// Runs `call` on the loaded table: its status is the result of the runtime call `name`.
#[inline]
fn call(name: &'static str, call: impl FnOnce(&Table) -> Status) -> RawResult {
    ok(call(table(name)?), name)
}

/// Answer for an optional call the loaded runtime lacks (the shared layer checks
/// `supports` first, so this is a guard, not a path taken).
fn absent(call: &'static str) -> RawError {
    RawError {
        code: sys::hipErrorNotSupported,
        call,
    }
}

/// The optional function `call`, which `pick` reads from the loaded table, or [`absent`]'s error
/// where the runtime lacks it.
#[inline]
fn optional<F>(call: &'static str, pick: impl FnOnce(&Table) -> Option<F>) -> RawResult<F> {
    pick(table(call)?).ok_or_else(|| absent(call))
}

/// Runs a runtime call that answers through an out-pointer: `call` gets `&mut value` (it
/// coerces to the call's `*mut` parameter); what the call wrote there comes back on success.
#[inline]
fn out<T>(mut value: T, name: &'static str, call: impl FnOnce(&mut T) -> Status) -> RawResult<T> {
    ok(call(&mut value), name).map(|()| value)
}

#[inline]
fn stream(raw: RawStream) -> sys::hipStream_t {
    raw.0
}

#[inline]
fn event(raw: RawEvent) -> sys::hipEvent_t {
    raw.0
}

#[inline]
fn device_ptr(address: DevicePtr) -> sys::hipDeviceptr_t {
    std::ptr::with_exposed_provenance_mut(address as usize)
}

#[inline]
fn address(ptr: *mut c_void) -> DevicePtr {
    ptr.expose_provenance() as DevicePtr
}

fn capture_mode(mode: CaptureMode) -> sys::hipStreamCaptureMode {
    match mode {
        CaptureMode::Global => sys::hipStreamCaptureModeGlobal,
        CaptureMode::ThreadLocal => sys::hipStreamCaptureModeThreadLocal,
        CaptureMode::Relaxed => sys::hipStreamCaptureModeRelaxed,
    }
}

/// A capture mode the runtime answered (`call`); one outside HIP's three is an error
/// (`hipErrorUnknown`), never taken as one of them.
fn capture_mode_back(
    mode: sys::hipStreamCaptureMode,
    call: &'static str,
) -> RawResult<CaptureMode> {
    match mode {
        sys::hipStreamCaptureModeGlobal => Ok(CaptureMode::Global),
        sys::hipStreamCaptureModeThreadLocal => Ok(CaptureMode::ThreadLocal),
        sys::hipStreamCaptureModeRelaxed => Ok(CaptureMode::Relaxed),
        _ => Err(RawError {
            code: sys::hipErrorUnknown,
            call,
        }),
    }
}

/// A capture status the runtime answered (`call`); one outside HIP's three is an error
/// (`hipErrorUnknown`): taken as "not capturing", the shared layer would submit a capturing
/// stream's work as ordinary work, and what a host function holds would live in the graph.
fn capture_status(
    status: sys::hipStreamCaptureStatus,
    call: &'static str,
) -> RawResult<CaptureStatus> {
    match status {
        sys::hipStreamCaptureStatusNone => Ok(CaptureStatus::None),
        sys::hipStreamCaptureStatusActive => Ok(CaptureStatus::Active),
        sys::hipStreamCaptureStatusInvalidated => Ok(CaptureStatus::Invalidated),
        _ => Err(RawError {
            code: sys::hipErrorUnknown,
            call,
        }),
    }
}

/// The device ordinal a context token stands for.
fn token_device(ctx: RawContext) -> c_int {
    (ctx.0 as usize).wrapping_sub(1) as c_int
}

fn device_token(device: c_int) -> RawContext {
    RawContext(std::ptr::without_provenance_mut(device as usize + 1))
}

fn c_string(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        None
    } else {
        // SAFETY: HIP returns NUL-terminated static strings.
        Some(
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// Where the loaded runtime came from, once loaded.
pub(crate) fn library_path() -> Option<&'static str> {
    TABLE.get().map(|t| t.path.as_str())
}

// SAFETY: every function forwards to the HIP runtime call of the same meaning as the CUDA call
// named in RawApi's documentation, with the same contract; optional calls check their symbol
// (the shared layer also checks `supports` first); nothing is called before `load` returned Ok.
unsafe impl RawApi for HipApi {
    const BACKEND: &'static str = "hip";
    const KIND: BackendKind = BackendKind::Hip;
    const PER_THREAD_STREAM: RawStream =
        RawStream(std::ptr::without_provenance_mut(sys::hipStreamPerThread));

    fn runtime_cell() -> &'static OnceLock<Result<Runtime<Self>, Error>> {
        &RUNTIME
    }

    fn place(ordinal: usize) -> Place {
        Place::Hip(ordinal)
    }

    fn load() -> Result<LoadInfo, String> {
        let loaded = Table::load()?;
        let t = TABLE.get_or_init(|| loaded);
        if t.over_cuda {
            // One thread runs both backends' host functions: a CUDA host function that blocks
            // on work waiting for a HIP host function waits for itself, and the other way round
            // (`devstream_core::foreign`, "Host functions").
            devstream_core::foreign::host_fns_share_a_thread(
                devstream_core::foreign::BackendKey::of(&devstream_core::Place::Hip(0)),
                devstream_core::foreign::BackendKey::of(&devstream_core::Place::Cuda(0)),
            );
        }
        let mut version = 0;
        // SAFETY: the symbol exists; valid out-pointer.
        let status = unsafe { (t.hipDriverGetVersion)(&mut version) };
        if status != sys::hipSuccess {
            return Err(format!(
                "hipDriverGetVersion failed: {}",
                Self::error_message(status)
            ));
        }
        // SAFETY: the symbol exists; flags must be 0.
        let init = unsafe { (t.hipInit)(0) };
        let device_count = match init {
            sys::hipSuccess => {
                let mut count = 0;
                // SAFETY: initialised; valid out-pointer.
                match unsafe { (t.hipGetDeviceCount)(&mut count) } {
                    sys::hipSuccess => usize::try_from(count).unwrap_or(0),
                    sys::hipErrorNoDevice => 0,
                    other => {
                        return Err(format!(
                            "hipGetDeviceCount failed: {}",
                            Self::error_message(other)
                        ))
                    }
                }
            }
            // ROCm answers hipErrorInvalidDevice from hipInit when no GPU is visible.
            sys::hipErrorNoDevice | sys::hipErrorInvalidDevice => 0,
            other => return Err(format!("hipInit failed: {}", Self::error_message(other))),
        };
        Ok(LoadInfo {
            driver_version: version,
            device_count,
            library: t.path.clone(),
        })
    }

    fn supports(call: Optional) -> bool {
        let Some(t) = TABLE.get() else {
            return false;
        };
        match call {
            Optional::LaunchHostFunc => t.hipLaunchHostFunc.is_some(),
            Optional::StreamAddCallback => t.hipStreamAddCallback.is_some(),
            Optional::StreamMemOps => {
                t.hipStreamWaitValue64.is_some() && t.hipStreamWriteValue64.is_some()
            }
            Optional::CaptureInfo => t.hipStreamGetCaptureInfo_v2.is_some(),
            Optional::UpdateCaptureDependencies => t.hipStreamUpdateCaptureDependencies.is_some(),
            Optional::StreamDevice => t.hipGetStreamDeviceId.is_some(),
            Optional::ManagedMemory => {
                t.hipMallocManaged.is_some() && t.hipStreamAttachMemAsync.is_some()
            }
            Optional::ExchangeCaptureMode => t.hipThreadExchangeStreamCaptureMode.is_some(),
            Optional::StreamOrderedAlloc => t.hipMallocAsync.is_some() && t.hipFreeAsync.is_some(),
            Optional::MemoryPools => {
                t.hipDeviceGetDefaultMemPool.is_some()
                    && t.hipMemPoolCreate.is_some()
                    && t.hipMemPoolDestroy.is_some()
                    && t.hipMemPoolGetAttribute.is_some()
                    && t.hipMemPoolSetAttribute.is_some()
                    && t.hipMemPoolTrimTo.is_some()
                    && t.hipMallocFromPoolAsync.is_some()
            }
            Optional::Kernels => {
                t.hipModuleLoadData.is_some()
                    && t.hipModuleUnload.is_some()
                    && t.hipModuleGetFunction.is_some()
                    && t.hipModuleLaunchKernel.is_some()
            }
            // Not bound: HIP has no stream id call, no stream attributes or persisting-L2 reset
            // in the ROCm releases this backend is checked against, and capture into an existing
            // graph is not declared here.
            Optional::StreamId
            | Optional::StreamAttributes
            | Optional::ResetPersistingL2
            | Optional::CaptureToGraph => false,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    fn error_kind(code: i32) -> ErrorKind {
        match code {
            sys::hipErrorNotReady => ErrorKind::NotReady,
            sys::hipErrorInvalidValue => ErrorKind::InvalidValue,
            sys::hipErrorOutOfMemory => ErrorKind::OutOfMemory,
            sys::hipErrorNoDevice | sys::hipErrorInvalidDevice => ErrorKind::NoDevice,
            sys::hipErrorStreamCaptureUnsupported..=sys::hipErrorStreamCaptureWrongThread => {
                ErrorKind::Capture
            }
            _ => ErrorKind::Other,
        }
    }

    fn error_message(code: i32) -> String {
        let Some(t) = TABLE.get() else {
            return format!("HIP error {code}");
        };
        // SAFETY: both functions accept any code and return a static string (HIP answers
        // "hipErrorUnknown" text for codes it does not know).
        let name = c_string(unsafe { (t.hipGetErrorName)(code) });
        // SAFETY: as above.
        let text = c_string(unsafe { (t.hipGetErrorString)(code) });
        match (name, text) {
            (Some(name), Some(text)) if name != text => format!("{name}: {text}"),
            (Some(name), _) => name,
            (None, Some(text)) => format!("HIP error {code}: {text}"),
            (None, None) => format!("HIP error {code}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_answers_outside_hip_s_values_are_errors_not_defaults() {
        let call = "hipStreamIsCapturing";
        assert_eq!(
            capture_status(sys::hipStreamCaptureStatusNone, call),
            Ok(CaptureStatus::None)
        );
        assert_eq!(
            capture_status(sys::hipStreamCaptureStatusActive, call),
            Ok(CaptureStatus::Active)
        );
        assert_eq!(
            capture_status(sys::hipStreamCaptureStatusInvalidated, call),
            Ok(CaptureStatus::Invalidated)
        );
        let unknown = RawError {
            code: sys::hipErrorUnknown,
            call,
        };
        assert_eq!(capture_status(3, call), Err(unknown));
        assert_eq!(capture_status(-1, call), Err(unknown));
        let call = "hipThreadExchangeStreamCaptureMode";
        for mode in [
            CaptureMode::Global,
            CaptureMode::ThreadLocal,
            CaptureMode::Relaxed,
        ] {
            assert_eq!(capture_mode_back(capture_mode(mode), call), Ok(mode));
        }
        assert_eq!(
            capture_mode_back(3, call),
            Err(RawError {
                code: sys::hipErrorUnknown,
                call,
            })
        );
    }
}
