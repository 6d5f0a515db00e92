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

#[inline]
fn ok(result: sys::CUresult, call: &'static str) -> RawResult {
    if result == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(RawError {
            code: result as i32,
            call,
        })
    }
}

#[inline]
fn stream(raw: RawStream) -> sys::CUstream {
    raw.0.cast()
}

#[inline]
fn event(raw: RawEvent) -> sys::CUevent {
    raw.0.cast()
}

fn capture_mode(mode: CaptureMode) -> sys::CUstreamCaptureMode {
    match mode {
        CaptureMode::Global => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
        CaptureMode::ThreadLocal => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        CaptureMode::Relaxed => sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
    }
}

fn capture_mode_back(mode: sys::CUstreamCaptureMode) -> CaptureMode {
    match mode {
        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL => CaptureMode::Global,
        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL => CaptureMode::ThreadLocal,
        sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED => CaptureMode::Relaxed,
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

fn access_property(p: AccessProperty) -> sys::CUaccessProperty {
    match p {
        AccessProperty::Normal => sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL,
        AccessProperty::Streaming => sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
        AccessProperty::Persisting => sys::CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
    }
}

fn access_property_back(p: sys::CUaccessProperty) -> AccessProperty {
    match p {
        sys::CUaccessProperty::CU_ACCESS_PROPERTY_NORMAL => AccessProperty::Normal,
        sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING => AccessProperty::Streaming,
        sys::CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING => AccessProperty::Persisting,
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

    fn ordinal(place: &Place) -> Option<usize> {
        match place {
            Place::Cuda(n) => Some(*n),
            _ => None,
        }
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

    unsafe fn device_count() -> RawResult<usize> {
        let mut count = 0;
        ok(
            // SAFETY: valid out-pointer.
            unsafe { sys::cuDeviceGetCount(&mut count) },
            "cuDeviceGetCount",
        )?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    unsafe fn device_properties(ordinal: usize) -> RawResult<DeviceProperties> {
        let mut device = 0;
        ok(
            // SAFETY: valid out-pointer; the ordinal is checked by the driver.
            unsafe { sys::cuDeviceGet(&mut device, ordinal as i32) },
            "cuDeviceGet",
        )?;
        let attribute = |attribute: sys::CUdevice_attribute| -> RawResult<i32> {
            let mut value = 0;
            ok(
                // SAFETY: valid out-pointer and device.
                unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, device) },
                "cuDeviceGetAttribute",
            )?;
            Ok(value)
        };
        use sys::CUdevice_attribute as At;
        let mut name = [0 as c_char; 256];
        ok(
            // SAFETY: the buffer holds 256 bytes.
            unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device) },
            "cuDeviceGetName",
        )?;
        // SAFETY: the driver wrote a NUL-terminated name into the buffer.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut version = 0;
        ok(
            // SAFETY: valid out-pointer.
            unsafe { sys::cuDriverGetVersion(&mut version) },
            "cuDriverGetVersion",
        )?;
        // Flags use the 64-bit stream memory operations: CUDA 12 reports them with
        // CAN_USE_64_BIT_STREAM_MEM_OPS; 11.7/11.8 need the v1 attributes.
        let stream_mem_ops = if version >= 12000 {
            attribute(At::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS)? != 0
        } else {
            attribute(At::CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1)? != 0
                && attribute(At::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1)? != 0
        };
        Ok(DeviceProperties {
            name,
            compute_capability: (
                attribute(At::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attribute(At::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            memory_pools: attribute(At::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0,
            can_map_host_memory: attribute(At::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)? != 0,
            stream_mem_ops,
            stream_priorities: attribute(At::CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED)? != 0,
            managed_memory: attribute(At::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)? != 0,
        })
    }

    unsafe fn primary_context(ordinal: usize) -> RawResult<RawContext> {
        let mut device = 0;
        ok(
            // SAFETY: valid out-pointer.
            unsafe { sys::cuDeviceGet(&mut device, ordinal as i32) },
            "cuDeviceGet",
        )?;
        let mut ctx = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer and device.
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, device) },
            "cuDevicePrimaryCtxRetain",
        )?;
        Ok(RawContext(ctx.cast()))
    }

    #[inline]
    unsafe fn context_current() -> RawResult<RawContext> {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        ok(unsafe { sys::cuCtxGetCurrent(&mut ctx) }, "cuCtxGetCurrent")?;
        Ok(RawContext(ctx.cast()))
    }

    unsafe fn context_set_current(ctx: RawContext) -> RawResult {
        ok(
            // SAFETY: the caller passes a live context.
            unsafe { sys::cuCtxSetCurrent(ctx.0.cast()) },
            "cuCtxSetCurrent",
        )
    }

    unsafe fn priority_range() -> RawResult<(i32, i32)> {
        let (mut least, mut greatest) = (0, 0);
        ok(
            // SAFETY: valid out-pointers.
            unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) },
            "cuCtxGetStreamPriorityRange",
        )?;
        Ok((least, greatest))
    }

    unsafe fn reset_persisting_l2_cache() -> RawResult {
        ok(
            // SAFETY: a context is current (caller).
            unsafe { sys::cuCtxResetPersistingL2Cache() },
            "cuCtxResetPersistingL2Cache",
        )
    }

    unsafe fn stream_create(non_blocking: bool, priority: i32) -> RawResult<RawStream> {
        let mut raw = std::ptr::null_mut();
        let flags = if non_blocking {
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32
        } else {
            sys::CUstream_flags::CU_STREAM_DEFAULT as u32
        };
        ok(
            // SAFETY: valid out-pointer; a context is current (caller).
            unsafe { sys::cuStreamCreateWithPriority(&mut raw, flags, priority) },
            "cuStreamCreateWithPriority",
        )?;
        Ok(RawStream(raw.cast()))
    }

    unsafe fn stream_destroy(s: RawStream) -> RawResult {
        ok(
            // SAFETY: the caller owns the stream.
            unsafe { sys::cuStreamDestroy_v2(stream(s)) },
            "cuStreamDestroy",
        )
    }

    #[inline]
    unsafe fn stream_query(s: RawStream) -> RawResult {
        // SAFETY: live stream (caller).
        ok(unsafe { sys::cuStreamQuery(stream(s)) }, "cuStreamQuery")
    }

    #[inline]
    unsafe fn stream_synchronize(s: RawStream) -> RawResult {
        ok(
            // SAFETY: live stream (caller).
            unsafe { sys::cuStreamSynchronize(stream(s)) },
            "cuStreamSynchronize",
        )
    }

    #[inline]
    unsafe fn stream_wait_event(s: RawStream, e: RawEvent) -> RawResult {
        ok(
            // SAFETY: live stream and event (caller).
            unsafe { sys::cuStreamWaitEvent(stream(s), event(e), 0) },
            "cuStreamWaitEvent",
        )
    }

    unsafe fn stream_priority(s: RawStream) -> RawResult<i32> {
        let mut priority = 0;
        ok(
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamGetPriority(stream(s), &mut priority) },
            "cuStreamGetPriority",
        )?;
        Ok(priority)
    }

    unsafe fn stream_flags(s: RawStream) -> RawResult<u32> {
        let mut flags = 0;
        ok(
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamGetFlags(stream(s), &mut flags) },
            "cuStreamGetFlags",
        )?;
        Ok(flags)
    }

    unsafe fn stream_id(s: RawStream) -> RawResult<u64> {
        let mut id = 0;
        ok(
            // SAFETY: live stream, valid out-pointer; present per `supports`.
            unsafe { sys::cuStreamGetId(stream(s), &mut id) },
            "cuStreamGetId",
        )?;
        Ok(id)
    }

    unsafe fn stream_device(s: RawStream) -> RawResult<usize> {
        let mut device = 0;
        ok(
            // SAFETY: live stream, valid out-pointer; present per `supports`.
            unsafe { sys::cuStreamGetDevice(stream(s), &mut device) },
            "cuStreamGetDevice",
        )?;
        Ok(usize::try_from(device).unwrap_or(0))
    }

    #[inline]
    unsafe fn launch_host_func(
        s: RawStream,
        callback: HostCallback,
        user_data: *mut c_void,
    ) -> RawResult {
        ok(
            // SAFETY: live stream; the callback and its data follow cuLaunchHostFunc's contract
            // (caller).
            unsafe { sys::cuLaunchHostFunc(stream(s), Some(callback), user_data) },
            "cuLaunchHostFunc",
        )
    }

    unsafe fn stream_add_callback(
        s: RawStream,
        callback: StreamCallback,
        user_data: *mut c_void,
    ) -> RawResult {
        type Native = unsafe extern "C" fn(sys::CUstream, sys::CUresult, *mut c_void);
        // SAFETY: `StreamCallback` has the same C ABI: RawStream is a transparent pointer and
        // the status is a 32-bit value read as i32.
        let native: Native = unsafe { std::mem::transmute::<StreamCallback, Native>(callback) };
        ok(
            // SAFETY: live stream; the callback follows cuStreamAddCallback's contract (caller).
            unsafe { sys::cuStreamAddCallback(stream(s), Some(native), user_data, 0) },
            "cuStreamAddCallback",
        )
    }

    unsafe fn stream_wait_value64(s: RawStream, address: DevicePtr, value: u64) -> RawResult {
        ok(
            // SAFETY: live stream, device-visible address (caller); present per `supports`.
            unsafe {
                sys::cuStreamWaitValue64_v2(
                    stream(s),
                    address,
                    value,
                    sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
                )
            },
            "cuStreamWaitValue64",
        )
    }

    unsafe fn stream_write_value64(s: RawStream, address: DevicePtr, value: u64) -> RawResult {
        ok(
            // SAFETY: live stream, device-visible address (caller); present per `supports`.
            unsafe {
                sys::cuStreamWriteValue64_v2(
                    stream(s),
                    address,
                    value,
                    sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
                )
            },
            "cuStreamWriteValue64",
        )
    }

    unsafe fn stream_set_attribute(s: RawStream, attribute: StreamAttribute) -> RawResult {
        // SAFETY: an all-zero union is a valid value of every member.
        let mut value: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
        match attribute {
            StreamAttribute::AccessPolicyWindow(w) => {
                value.accessPolicyWindow = sys::CUaccessPolicyWindow {
                    base_ptr: std::ptr::with_exposed_provenance_mut(w.base_ptr as usize),
                    num_bytes: w.num_bytes,
                    hitRatio: w.hit_ratio,
                    hitProp: access_property(w.hit_prop),
                    missProp: access_property(w.miss_prop),
                }
            }
            StreamAttribute::SyncPolicy(p) => {
                value.syncPolicy = match p {
                    SyncPolicy::Auto => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_AUTO,
                    SyncPolicy::Spin => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_SPIN,
                    SyncPolicy::Yield => sys::CUsynchronizationPolicy::CU_SYNC_POLICY_YIELD,
                    SyncPolicy::BlockingSync => {
                        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC
                    }
                }
            }
            StreamAttribute::Priority(p) => value.priority = p,
        }
        ok(
            // SAFETY: live stream; `value` holds the member the attribute id selects.
            unsafe { sys::cuStreamSetAttribute(stream(s), attribute_id(attribute.id()), &value) },
            "cuStreamSetAttribute",
        )
    }

    unsafe fn stream_get_attribute(
        s: RawStream,
        id: StreamAttributeId,
    ) -> RawResult<StreamAttribute> {
        // SAFETY: an all-zero union is a valid value of every member.
        let mut value: sys::CUstreamAttrValue = unsafe { std::mem::zeroed() };
        ok(
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamGetAttribute(stream(s), attribute_id(id), &mut value) },
            "cuStreamGetAttribute",
        )?;
        // SAFETY: the driver wrote the member selected by `id`.
        Ok(unsafe {
            match id {
                StreamAttributeId::AccessPolicyWindow => {
                    let w = value.accessPolicyWindow;
                    StreamAttribute::AccessPolicyWindow(AccessPolicyWindow {
                        base_ptr: w.base_ptr.expose_provenance() as u64,
                        num_bytes: w.num_bytes,
                        hit_ratio: w.hitRatio,
                        hit_prop: access_property_back(w.hitProp),
                        miss_prop: access_property_back(w.missProp),
                    })
                }
                StreamAttributeId::SyncPolicy => {
                    StreamAttribute::SyncPolicy(match value.syncPolicy {
                        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_AUTO => SyncPolicy::Auto,
                        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_SPIN => SyncPolicy::Spin,
                        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_YIELD => SyncPolicy::Yield,
                        sys::CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC => {
                            SyncPolicy::BlockingSync
                        }
                    })
                }
                StreamAttributeId::Priority => StreamAttribute::Priority(value.priority),
            }
        })
    }

    unsafe fn stream_copy_attributes(dst: RawStream, src: RawStream) -> RawResult {
        ok(
            // SAFETY: live streams of one context (caller).
            unsafe { sys::cuStreamCopyAttributes(stream(dst), stream(src)) },
            "cuStreamCopyAttributes",
        )
    }

    unsafe fn stream_attach_mem_async(
        s: RawStream,
        address: DevicePtr,
        len: usize,
        attach: MemAttach,
    ) -> RawResult {
        let flags = match attach {
            MemAttach::Global => sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL,
            MemAttach::Host => sys::CUmemAttach_flags::CU_MEM_ATTACH_HOST,
            MemAttach::Single => sys::CUmemAttach_flags::CU_MEM_ATTACH_SINGLE,
        } as u32;
        ok(
            // SAFETY: live stream; managed memory (caller).
            unsafe { sys::cuStreamAttachMemAsync(stream(s), address, len, flags) },
            "cuStreamAttachMemAsync",
        )
    }

    unsafe fn stream_begin_capture(s: RawStream, mode: CaptureMode) -> RawResult {
        ok(
            // SAFETY: live stream (caller).
            unsafe { sys::cuStreamBeginCapture_v2(stream(s), capture_mode(mode)) },
            "cuStreamBeginCapture",
        )
    }

    unsafe fn stream_begin_capture_to_graph(
        s: RawStream,
        graph: RawGraph,
        dependencies: &[RawGraphNode],
        mode: CaptureMode,
    ) -> RawResult {
        ok(
            // SAFETY: live stream and graph; the node array is valid for its length; present per
            // `supports`.
            unsafe {
                sys::cuStreamBeginCaptureToGraph(
                    stream(s),
                    graph.0.cast(),
                    dependencies.as_ptr().cast(),
                    std::ptr::null(),
                    dependencies.len(),
                    capture_mode(mode),
                )
            },
            "cuStreamBeginCaptureToGraph",
        )
    }

    unsafe fn stream_end_capture(s: RawStream) -> RawResult<RawGraph> {
        let mut graph = std::ptr::null_mut();
        ok(
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamEndCapture(stream(s), &mut graph) },
            "cuStreamEndCapture",
        )?;
        Ok(RawGraph(graph.cast()))
    }

    unsafe fn stream_is_capturing(s: RawStream) -> RawResult<CaptureStatus> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        ok(
            // SAFETY: live stream, valid out-pointer.
            unsafe { sys::cuStreamIsCapturing(stream(s), &mut status) },
            "cuStreamIsCapturing",
        )?;
        Ok(capture_status(status))
    }

    unsafe fn stream_capture_info(s: RawStream) -> RawResult<CaptureInfo> {
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut id = 0u64;
        let mut graph = std::ptr::null_mut();
        let mut deps: *const sys::CUgraphNode = std::ptr::null();
        let mut count = 0usize;
        if support().capture_info_v3 {
            let mut edges: *const sys::CUgraphEdgeData = std::ptr::null();
            ok(
                // SAFETY: live stream, valid out-pointers; present per `supports`.
                unsafe {
                    sys::cuStreamGetCaptureInfo_v3(
                        stream(s),
                        &mut status,
                        &mut id,
                        &mut graph,
                        &mut deps,
                        &mut edges,
                        &mut count,
                    )
                },
                "cuStreamGetCaptureInfo",
            )?;
        } else {
            ok(
                // SAFETY: as above (the loader requires one of the two variants).
                unsafe {
                    sys::cuStreamGetCaptureInfo_v2(
                        stream(s),
                        &mut status,
                        &mut id,
                        &mut graph,
                        &mut deps,
                        &mut count,
                    )
                },
                "cuStreamGetCaptureInfo",
            )?;
        }
        let status = capture_status(status);
        let dependencies = if status == CaptureStatus::None || deps.is_null() || count == 0 {
            Vec::new()
        } else {
            // SAFETY: the driver returned an array of `count` nodes, valid until the next call
            // on this stream; we copy it at once.
            unsafe { std::slice::from_raw_parts(deps, count) }
                .iter()
                // SAFETY: node handles the driver returned.
                .map(|n| unsafe { RawGraphNode::from_raw((*n).cast()) })
                .collect()
        };
        Ok(CaptureInfo {
            status,
            id: if status == CaptureStatus::None { 0 } else { id },
            graph: RawGraph(graph.cast()),
            dependencies,
        })
    }

    unsafe fn stream_update_capture_dependencies(
        s: RawStream,
        dependencies: &[RawGraphNode],
        replace: bool,
    ) -> RawResult {
        let flags = if replace {
            sys::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES
        } else {
            sys::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_ADD_CAPTURE_DEPENDENCIES
        } as u32;
        let mut nodes: Vec<sys::CUgraphNode> =
            dependencies.iter().map(|n| n.as_ptr().cast()).collect();
        if support().update_deps_v2 {
            ok(
                // SAFETY: live stream; the node array is valid for its length.
                unsafe {
                    sys::cuStreamUpdateCaptureDependencies_v2(
                        stream(s),
                        nodes.as_mut_ptr(),
                        std::ptr::null(),
                        nodes.len(),
                        flags,
                    )
                },
                "cuStreamUpdateCaptureDependencies",
            )
        } else {
            ok(
                // SAFETY: as above.
                unsafe {
                    sys::cuStreamUpdateCaptureDependencies(
                        stream(s),
                        nodes.as_mut_ptr(),
                        nodes.len(),
                        flags,
                    )
                },
                "cuStreamUpdateCaptureDependencies",
            )
        }
    }

    unsafe fn thread_exchange_capture_mode(mode: CaptureMode) -> RawResult<CaptureMode> {
        let mut native = capture_mode(mode);
        ok(
            // SAFETY: valid in/out pointer.
            unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut native) },
            "cuThreadExchangeStreamCaptureMode",
        )?;
        Ok(capture_mode_back(native))
    }

    unsafe fn event_create(flags: EventFlags) -> RawResult<RawEvent> {
        let mut native = 0u32;
        if !flags.timing {
            native |= sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        }
        if flags.blocking_sync {
            native |= sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        }
        if flags.interprocess {
            native |= sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32;
        }
        let mut raw = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer; a context is current (caller).
            unsafe { sys::cuEventCreate(&mut raw, native) },
            "cuEventCreate",
        )?;
        Ok(RawEvent(raw.cast()))
    }

    unsafe fn event_destroy(e: RawEvent) -> RawResult {
        ok(
            // SAFETY: the caller owns the event.
            unsafe { sys::cuEventDestroy_v2(event(e)) },
            "cuEventDestroy",
        )
    }

    #[inline]
    unsafe fn event_record(e: RawEvent, s: RawStream) -> RawResult {
        ok(
            // SAFETY: live event and stream of one context (caller).
            unsafe { sys::cuEventRecord(event(e), stream(s)) },
            "cuEventRecord",
        )
    }

    #[inline]
    unsafe fn event_query(e: RawEvent) -> RawResult {
        // SAFETY: live event (caller).
        ok(unsafe { sys::cuEventQuery(event(e)) }, "cuEventQuery")
    }

    #[inline]
    unsafe fn event_synchronize(e: RawEvent) -> RawResult {
        ok(
            // SAFETY: live event (caller).
            unsafe { sys::cuEventSynchronize(event(e)) },
            "cuEventSynchronize",
        )
    }

    unsafe fn event_elapsed_ms(start: RawEvent, end: RawEvent) -> RawResult<f32> {
        let mut ms = 0f32;
        if support().elapsed_v1 {
            ok(
                // SAFETY: live events, valid out-pointer.
                unsafe { sys::cuEventElapsedTime(&mut ms, event(start), event(end)) },
                "cuEventElapsedTime",
            )?;
        } else {
            ok(
                // SAFETY: as above; the loader requires one of the two variants.
                unsafe { sys::cuEventElapsedTime_v2(&mut ms, event(start), event(end)) },
                "cuEventElapsedTime",
            )?;
        }
        Ok(ms)
    }

    unsafe fn graph_create() -> RawResult<RawGraph> {
        let mut graph = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer.
            unsafe { sys::cuGraphCreate(&mut graph, 0) },
            "cuGraphCreate",
        )?;
        Ok(RawGraph(graph.cast()))
    }

    unsafe fn graph_instantiate(graph: RawGraph) -> RawResult<RawGraphExec> {
        let mut exec = std::ptr::null_mut();
        ok(
            // SAFETY: live graph, valid out-pointer.
            unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph.0.cast(), 0) },
            "cuGraphInstantiate",
        )?;
        Ok(RawGraphExec(exec.cast()))
    }

    #[inline]
    unsafe fn graph_launch(exec: RawGraphExec, s: RawStream) -> RawResult {
        ok(
            // SAFETY: live executable graph and stream of one device (caller).
            unsafe { sys::cuGraphLaunch(exec.0.cast(), stream(s)) },
            "cuGraphLaunch",
        )
    }

    unsafe fn graph_exec_destroy(exec: RawGraphExec) -> RawResult {
        ok(
            // SAFETY: the caller owns it and no launch is pending.
            unsafe { sys::cuGraphExecDestroy(exec.0.cast()) },
            "cuGraphExecDestroy",
        )
    }

    unsafe fn graph_destroy(graph: RawGraph) -> RawResult {
        ok(
            // SAFETY: the caller owns it.
            unsafe { sys::cuGraphDestroy(graph.0.cast()) },
            "cuGraphDestroy",
        )
    }

    unsafe fn graph_node_count(graph: RawGraph) -> RawResult<usize> {
        let mut count = 0usize;
        ok(
            // SAFETY: live graph; a null array asks for the count only.
            unsafe { sys::cuGraphGetNodes(graph.0.cast(), std::ptr::null_mut(), &mut count) },
            "cuGraphGetNodes",
        )?;
        Ok(count)
    }

    unsafe fn graph_nodes(graph: RawGraph) -> RawResult<Vec<RawGraphNode>> {
        // SAFETY: live graph (caller).
        let mut count = unsafe { Self::graph_node_count(graph) }?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut nodes: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); count];
        ok(
            // SAFETY: live graph; the array holds `count` nodes.
            unsafe { sys::cuGraphGetNodes(graph.0.cast(), nodes.as_mut_ptr(), &mut count) },
            "cuGraphGetNodes",
        )?;
        nodes.truncate(count);
        Ok(nodes
            .into_iter()
            // SAFETY: node handles the driver returned.
            .map(|n| unsafe { RawGraphNode::from_raw(n.cast()) })
            .collect())
    }

    unsafe fn mem_alloc(len: usize) -> RawResult<DevicePtr> {
        let mut ptr = 0;
        // SAFETY: valid out-pointer; a context is current (caller).
        ok(unsafe { sys::cuMemAlloc_v2(&mut ptr, len) }, "cuMemAlloc")?;
        Ok(ptr)
    }

    unsafe fn mem_free(ptr: DevicePtr) -> RawResult {
        // SAFETY: the caller owns the allocation and nothing uses it any more.
        ok(unsafe { sys::cuMemFree_v2(ptr) }, "cuMemFree")
    }

    unsafe fn mem_alloc_async(len: usize, s: RawStream) -> RawResult<DevicePtr> {
        let mut ptr = 0;
        ok(
            // SAFETY: valid out-pointer, live stream; present per `supports`.
            unsafe { sys::cuMemAllocAsync(&mut ptr, len, stream(s)) },
            "cuMemAllocAsync",
        )?;
        Ok(ptr)
    }

    unsafe fn mem_free_async(ptr: DevicePtr, s: RawStream) -> RawResult {
        ok(
            // SAFETY: the caller owns the allocation; the free is stream-ordered.
            unsafe { sys::cuMemFreeAsync(ptr, stream(s)) },
            "cuMemFreeAsync",
        )
    }

    unsafe fn mem_alloc_managed(len: usize) -> RawResult<DevicePtr> {
        let mut ptr = 0;
        ok(
            // SAFETY: valid out-pointer; present per `supports`.
            unsafe {
                sys::cuMemAllocManaged(
                    &mut ptr,
                    len,
                    sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32,
                )
            },
            "cuMemAllocManaged",
        )?;
        Ok(ptr)
    }

    unsafe fn host_alloc(len: usize) -> RawResult<*mut u8> {
        let mut ptr = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer; a context is current (caller).
            unsafe {
                sys::cuMemHostAlloc(
                    &mut ptr,
                    len,
                    sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
                )
            },
            "cuMemHostAlloc",
        )?;
        Ok(ptr.cast())
    }

    unsafe fn host_free(ptr: *mut u8) -> RawResult {
        // SAFETY: the caller owns the allocation and nothing uses it any more.
        ok(unsafe { sys::cuMemFreeHost(ptr.cast()) }, "cuMemFreeHost")
    }

    unsafe fn host_device_pointer(ptr: *mut u8) -> RawResult<DevicePtr> {
        let mut device_ptr = 0;
        ok(
            // SAFETY: mapped pinned memory, valid out-pointer.
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, ptr.cast(), 0) },
            "cuMemHostGetDevicePointer",
        )?;
        Ok(device_ptr)
    }

    unsafe fn memcpy_htod_async(
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        ok(
            // SAFETY: valid ranges (caller).
            unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, stream(s)) },
            "cuMemcpyHtoDAsync",
        )
    }

    unsafe fn memcpy_dtoh_async(
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        ok(
            // SAFETY: valid ranges (caller).
            unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, stream(s)) },
            "cuMemcpyDtoHAsync",
        )
    }

    unsafe fn memcpy_dtod_async(
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        ok(
            // SAFETY: valid ranges (caller).
            unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream(s)) },
            "cuMemcpyDtoDAsync",
        )
    }

    unsafe fn memset_d8_async(dst: DevicePtr, value: u8, len: usize, s: RawStream) -> RawResult {
        ok(
            // SAFETY: valid range (caller).
            unsafe { sys::cuMemsetD8Async(dst, value, len, stream(s)) },
            "cuMemsetD8Async",
        )
    }

    unsafe fn module_load_data(image: *const c_void) -> RawResult<RawModule> {
        let mut module = std::ptr::null_mut();
        ok(
            // SAFETY: a NUL-terminated image (caller); a context is current.
            unsafe { sys::cuModuleLoadData(&mut module, image) },
            "cuModuleLoadData",
        )?;
        Ok(RawModule(module.cast()))
    }

    unsafe fn module_unload(module: RawModule) -> RawResult {
        ok(
            // SAFETY: the caller owns the module and no kernel of it is pending.
            unsafe { sys::cuModuleUnload(module.0.cast()) },
            "cuModuleUnload",
        )
    }

    unsafe fn module_get_function(
        module: RawModule,
        name: &CStr,
    ) -> RawResult<devstream_gpu_common::RawFunction> {
        let mut function = std::ptr::null_mut();
        ok(
            // SAFETY: live module, NUL-terminated name, valid out-pointer.
            unsafe { sys::cuModuleGetFunction(&mut function, module.0.cast(), name.as_ptr()) },
            "cuModuleGetFunction",
        )?;
        Ok(devstream_gpu_common::RawFunction(function.cast()))
    }

    unsafe fn launch_kernel(
        function: devstream_gpu_common::RawFunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem_bytes: u32,
        s: RawStream,
        params: *mut *mut c_void,
    ) -> RawResult {
        ok(
            // SAFETY: live function and stream; parameters per the caller's contract.
            unsafe {
                sys::cuLaunchKernel(
                    function.0.cast(),
                    grid.0,
                    grid.1,
                    grid.2,
                    block.0,
                    block.1,
                    block.2,
                    shared_mem_bytes,
                    stream(s),
                    params,
                    std::ptr::null_mut(),
                )
            },
            "cuLaunchKernel",
        )
    }
}
