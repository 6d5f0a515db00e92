//! The CUDA raw-call table: [`CudaApi`] implements the shared layer's `RawApi` by forwarding
//! each function to one CUDA driver call through `cudarc::driver::sys`.
//!
//! cudarc loads `libcuda` lazily and panics when the library or a symbol is missing, so the
//! loader probes first (`is_culib_present`), checks every symbol this table calls is exported,
//! reads the driver version, and switches off the optional calls the installed driver lacks.
//! No call reaches cudarc before that check passed.

use cudarc::driver::sys;
use devstream_core::{BackendKind, CaptureMode, Error, EventFlags, Place};
use devstream_gpu_common::raw::{HostCallback, StreamCallback};
use devstream_gpu_common::{
    AccessPolicyWindow, AccessProperty, CaptureInfo, CaptureStatus, DeviceProperties, DevicePtr,
    ErrorKind, LoadInfo, MemAttach, Optional, RawApi, RawContext, RawError, RawEvent, RawGraph,
    RawGraphExec, RawGraphNode, RawModule, RawResult, RawStream, Runtime, StreamAttribute,
    StreamAttributeId, SyncPolicy,
};
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

mod buffer;
mod capture;
mod device;
mod event;
mod graph;
mod kernel;
mod stream;

/// The CUDA driver API as a raw-call table (an uninhabited marker type).
#[derive(Debug)]
pub enum CudaApi {}

/// Oldest driver this backend accepts (CUDA 11.4: the oldest cudarc supports, and every required
/// call below exists there).
pub const MIN_DRIVER_VERSION: i32 = 11040;

/// Every symbol the table calls unconditionally. Checked before the first call.
const REQUIRED: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDevicePrimaryCtxRetain",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxGetStreamPriorityRange",
    "cuStreamCreateWithPriority",
    "cuStreamDestroy_v2",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuStreamGetPriority",
    "cuStreamGetFlags",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuStreamIsCapturing",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuGraphCreate",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
    "cuGraphGetNodes",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemHostGetDevicePointer_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemsetD8Async",
];

/// Which optional calls (and which variant of a versioned call) the loaded driver has.
#[derive(Clone, Copy, Debug, Default)]
struct Support {
    launch_host_func: bool,
    add_callback: bool,
    mem_ops: bool,
    capture_to_graph: bool,
    capture_info_v3: bool,
    capture_info_v2: bool,
    update_deps_v2: bool,
    update_deps_v1: bool,
    stream_id: bool,
    stream_device: bool,
    attributes: bool,
    reset_l2: bool,
    managed: bool,
    exchange_mode: bool,
    async_alloc: bool,
    mem_pools: bool,
    kernels: bool,
    elapsed_v1: bool,
    elapsed_v2: bool,
}

static SUPPORT: OnceLock<Support> = OnceLock::new();
static RUNTIME: OnceLock<Result<Runtime<CudaApi>, Error>> = OnceLock::new();

type ErrorStringFn = unsafe extern "C" fn(u32, *mut *const c_char) -> u32;
static ERROR_NAME: OnceLock<Option<(ErrorStringFn, ErrorStringFn)>> = OnceLock::new();

fn support() -> Support {
    SUPPORT.get().copied().unwrap_or_default()
}

/// The status code every driver call answers.
type Status = sys::CUresult;

#[inline]
fn ok(result: Status, call: &'static str) -> RawResult {
    if result == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(RawError {
            code: result as i32,
            call,
        })
    }
}

/// Runs a driver call that answers through an out-pointer: `call` gets `&mut value` (it
/// coerces to the call's `*mut` parameter); what the call wrote there comes back on success.
#[inline]
fn out<T>(mut value: T, name: &'static str, call: impl FnOnce(&mut T) -> Status) -> RawResult<T> {
    ok(call(&mut value), name).map(|()| value)
}

#[inline]
fn stream(raw: RawStream) -> sys::CUstream {
    raw.0.cast()
}

#[inline]
fn event(raw: RawEvent) -> sys::CUevent {
    raw.0.cast()
}

/// Declares a pair of inverse conversions between a devstream enum and the driver's, from one
/// list of corresponding variants: `to(devstream) -> driver` and `back(driver) -> devstream`.
macro_rules! conversions {
    ($to:ident, $back:ident: $ours:ty => $theirs:ty { $($a:path => $b:path,)* }) => {
        fn $to(value: $ours) -> $theirs {
            match value {
                $($a => $b,)*
            }
        }

        fn $back(value: $theirs) -> $ours {
            match value {
                $($b => $a,)*
            }
        }
    };
}

conversions! {
    capture_mode, capture_mode_back: CaptureMode => sys::CUstreamCaptureMode {
        CaptureMode::Global => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
        CaptureMode::ThreadLocal => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        CaptureMode::Relaxed => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
    }
}

fn capture_status(status: sys::CUstreamCaptureStatus) -> CaptureStatus {
    match status {
        sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE => CaptureStatus::None,
        sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE => CaptureStatus::Active,
        sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_INVALIDATED => {
            CaptureStatus::Invalidated
        }
    }
}

conversions! {
    access_property, access_property_back: AccessProperty => sys::CUaccessProperty {
        AccessProperty::Normal => sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL,
        AccessProperty::Streaming => sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
        AccessProperty::Persisting => sys::CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
    }
}

conversions! {
    sync_policy, sync_policy_back: SyncPolicy => sys::CUsynchronizationPolicy {
        SyncPolicy::Auto => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_AUTO,
        SyncPolicy::Spin => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_SPIN,
        SyncPolicy::Yield => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_YIELD,
        SyncPolicy::BlockingSync => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC,
    }
}

fn attribute_id(id: StreamAttributeId) -> sys::CUstreamAttrID {
    match id {
        StreamAttributeId::AccessPolicyWindow => {
            sys::CUstreamAttrID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
        }
        StreamAttributeId::SyncPolicy => {
            sys::CUstreamAttrID::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY
        }
        StreamAttributeId::Priority => sys::CUstreamAttrID::CU_LAUNCH_ATTRIBUTE_PRIORITY,
    }
}

/// Whether the loaded driver library exports `name`.
fn has_symbol(name: &str) -> bool {
    // SAFETY: called only after `is_culib_present` succeeded, so `culib()` loads without
    // panicking; looking a symbol up does not call it.
    unsafe {
        sys::culib()
            .get::<unsafe extern "C" fn()>(name.as_bytes())
            .is_ok()
    }
}

fn load_error_strings() -> Option<(ErrorStringFn, ErrorStringFn)> {
    // SAFETY: only reached after the loader found the library; the symbols have the declared
    // C signatures (CUresult is a 32-bit enum).
    unsafe {
        let lib = sys::culib();
        let name = *lib.get::<ErrorStringFn>(b"cuGetErrorName").ok()?;
        let text = *lib.get::<ErrorStringFn>(b"cuGetErrorString").ok()?;
        Some((name, text))
    }
}

// SAFETY: every function forwards to the CUDA driver call named in RawApi's documentation with
// the same contract; optional calls are reached only when `supports` says so (checked in the
// shared layer), and nothing is called before `load` returned Ok.
unsafe impl RawApi for CudaApi {
    const BACKEND: &'static str = "cuda";
    const KIND: BackendKind = BackendKind::Cuda;
    const PER_THREAD_STREAM: RawStream = RawStream(std::ptr::without_provenance_mut(2));

    fn runtime_cell() -> &'static OnceLock<Result<Runtime<Self>, Error>> {
        &RUNTIME
    }

    fn place(ordinal: usize) -> Place {
        Place::Cuda(ordinal)
    }

    fn load() -> Result<LoadInfo, String> {
        // SAFETY: only tries to open the library by its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err("the NVIDIA driver library (libcuda.so) was not found".into());
        }
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|n| !has_symbol(n))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "the installed libcuda lacks required functions: {}",
                missing.join(", ")
            ));
        }
        let _ = ERROR_NAME.set(load_error_strings());
        let mut version = 0;
        ok(
            // SAFETY: the symbol exists; the out-pointer is valid.
            unsafe { sys::cuDriverGetVersion(&mut version) },
            "cuDriverGetVersion",
        )
        .map_err(|e| format!("cuDriverGetVersion failed: {}", Self::error_message(e.code)))?;
        if version < MIN_DRIVER_VERSION {
            return Err(format!(
                "the installed driver supports CUDA {}.{}; devstream needs CUDA {}.{} or newer",
                version / 1000,
                version % 1000 / 10,
                MIN_DRIVER_VERSION / 1000,
                MIN_DRIVER_VERSION % 1000 / 10
            ));
        }
        let at_least = |v: i32| version >= v;
        let support = Support {
            launch_host_func: has_symbol("cuLaunchHostFunc"),
            add_callback: has_symbol("cuStreamAddCallback"),
            mem_ops: at_least(11070)
                && has_symbol("cuStreamWaitValue64_v2")
                && has_symbol("cuStreamWriteValue64_v2"),
            capture_to_graph: at_least(12030) && has_symbol("cuStreamBeginCaptureToGraph"),
            capture_info_v3: at_least(12030) && has_symbol("cuStreamGetCaptureInfo_v3"),
            capture_info_v2: has_symbol("cuStreamGetCaptureInfo_v2"),
            update_deps_v2: at_least(12030) && has_symbol("cuStreamUpdateCaptureDependencies_v2"),
            update_deps_v1: has_symbol("cuStreamUpdateCaptureDependencies"),
            stream_id: at_least(12000) && has_symbol("cuStreamGetId"),
            stream_device: at_least(12080) && has_symbol("cuStreamGetDevice"),
            attributes: has_symbol("cuStreamSetAttribute")
                && has_symbol("cuStreamGetAttribute")
                && has_symbol("cuStreamCopyAttributes"),
            reset_l2: has_symbol("cuCtxResetPersistingL2Cache"),
            managed: has_symbol("cuMemAllocManaged") && has_symbol("cuStreamAttachMemAsync"),
            exchange_mode: has_symbol("cuThreadExchangeStreamCaptureMode"),
            async_alloc: has_symbol("cuMemAllocAsync") && has_symbol("cuMemFreeAsync"),
            mem_pools: [
                "cuDeviceGetDefaultMemPool",
                "cuMemPoolCreate",
                "cuMemPoolDestroy",
                "cuMemPoolGetAttribute",
                "cuMemPoolSetAttribute",
                "cuMemPoolTrimTo",
                "cuMemAllocFromPoolAsync",
            ]
            .into_iter()
            .all(has_symbol),
            kernels: has_symbol("cuModuleLoadData")
                && has_symbol("cuModuleUnload")
                && has_symbol("cuModuleGetFunction")
                && has_symbol("cuLaunchKernel"),
            elapsed_v1: has_symbol("cuEventElapsedTime"),
            elapsed_v2: at_least(12080) && has_symbol("cuEventElapsedTime_v2"),
        };
        if !support.capture_info_v2 && !support.capture_info_v3 {
            return Err("the installed libcuda has no cuStreamGetCaptureInfo".into());
        }
        if !support.elapsed_v1 && !support.elapsed_v2 {
            return Err("the installed libcuda has no cuEventElapsedTime".into());
        }
        let _ = SUPPORT.set(support);
        // SAFETY: the symbol exists.
        let init = unsafe { sys::cuInit(0) };
        let device_count = match init {
            sys::CUresult::CUDA_SUCCESS => {
                let mut count = 0;
                ok(
                    // SAFETY: initialised; valid out-pointer.
                    unsafe { sys::cuDeviceGetCount(&mut count) },
                    "cuDeviceGetCount",
                )
                .map_err(|e| format!("cuDeviceGetCount failed: {}", Self::error_message(e.code)))?;
                usize::try_from(count).unwrap_or(0)
            }
            sys::CUresult::CUDA_ERROR_NO_DEVICE => 0,
            other => {
                return Err(format!(
                    "cuInit failed: {}",
                    Self::error_message(other as i32)
                ))
            }
        };
        Ok(LoadInfo {
            driver_version: version,
            device_count,
            library: "libcuda (cudarc::driver::sys, dynamic loading)".into(),
        })
    }

    fn supports(call: Optional) -> bool {
        let s = support();
        match call {
            Optional::LaunchHostFunc => s.launch_host_func,
            Optional::StreamAddCallback => s.add_callback,
            Optional::StreamMemOps => s.mem_ops,
            Optional::CaptureToGraph => s.capture_to_graph,
            Optional::CaptureInfo => s.capture_info_v3 || s.capture_info_v2,
            Optional::UpdateCaptureDependencies => s.update_deps_v2 || s.update_deps_v1,
            Optional::StreamId => s.stream_id,
            Optional::StreamDevice => s.stream_device,
            Optional::StreamAttributes => s.attributes,
            Optional::ResetPersistingL2 => s.reset_l2,
            Optional::ManagedMemory => s.managed,
            Optional::ExchangeCaptureMode => s.exchange_mode,
            Optional::StreamOrderedAlloc => s.async_alloc,
            Optional::MemoryPools => s.mem_pools,
            Optional::Kernels => s.kernels,
        }
    }

    fn error_kind(code: i32) -> ErrorKind {
        match code {
            600 => ErrorKind::NotReady,
            1 => ErrorKind::InvalidValue,
            2 => ErrorKind::OutOfMemory,
            100 | 101 => ErrorKind::NoDevice,
            900..=908 => ErrorKind::Capture,
            _ => ErrorKind::Other,
        }
    }

    fn error_message(code: i32) -> String {
        let Some(Some((name_fn, text_fn))) = ERROR_NAME.get() else {
            return format!("CUDA error {code}");
        };
        let read = |f: &ErrorStringFn| {
            let mut ptr: *const c_char = std::ptr::null();
            // SAFETY: the driver function writes a pointer to a static string or fails; it
            // accepts unknown codes (answering CUDA_ERROR_INVALID_VALUE).
            let status = unsafe { f(code as u32, &mut ptr) };
            if status == 0 && !ptr.is_null() {
                Some(
                    // SAFETY: a NUL-terminated static string owned by the driver.
                    unsafe { CStr::from_ptr(ptr) }
                        .to_string_lossy()
                        .into_owned(),
                )
            } else {
                None
            }
        };
        match (read(name_fn), read(text_fn)) {
            (Some(name), Some(text)) => format!("{name}: {text}"),
            (Some(name), None) => name,
            _ => format!("CUDA error {code}"),
        }
    }
}
