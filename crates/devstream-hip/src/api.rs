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

#[inline]
fn ok(status: sys::hipError_t, call: &'static str) -> RawResult {
    if status == sys::hipSuccess {
        Ok(())
    } else {
        Err(RawError { code: status, call })
    }
}

/// Answer for an optional call the loaded runtime lacks (the shared layer checks
/// `supports` first, so this is a guard, not a path taken).
fn absent(call: &'static str) -> RawError {
    RawError {
        code: sys::hipErrorNotSupported,
        call,
    }
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

fn capture_mode_back(mode: sys::hipStreamCaptureMode) -> CaptureMode {
    match mode {
        sys::hipStreamCaptureModeThreadLocal => CaptureMode::ThreadLocal,
        sys::hipStreamCaptureModeRelaxed => CaptureMode::Relaxed,
        _ => CaptureMode::Global,
    }
}

fn capture_status(status: sys::hipStreamCaptureStatus) -> CaptureStatus {
    match status {
        sys::hipStreamCaptureStatusActive => CaptureStatus::Active,
        sys::hipStreamCaptureStatusInvalidated => CaptureStatus::Invalidated,
        _ => CaptureStatus::None,
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

    fn ordinal(place: &Place) -> Option<usize> {
        match place {
            Place::Hip(n) => Some(*n),
            _ => None,
        }
    }

    fn load() -> Result<LoadInfo, String> {
        let loaded = Table::load()?;
        let t = TABLE.get_or_init(|| loaded);
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

    // ---- devices and contexts ---------------------------------------------------------------

    unsafe fn device_count() -> RawResult<usize> {
        let t = table("hipGetDeviceCount")?;
        let mut count = 0;
        ok(
            // SAFETY: valid out-pointer.
            unsafe { (t.hipGetDeviceCount)(&mut count) },
            "hipGetDeviceCount",
        )?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    unsafe fn device_properties(ordinal: usize) -> RawResult<DeviceProperties> {
        let t = table("hipDeviceGetAttribute")?;
        let device = c_int::try_from(ordinal).map_err(|_| RawError {
            code: sys::hipErrorInvalidDevice,
            call: "hipDeviceGetAttribute",
        })?;
        let attribute = |attribute: sys::hipDeviceAttribute_t| -> RawResult<c_int> {
            let mut value = 0;
            ok(
                // SAFETY: valid out-pointer; the runtime checks the device and the attribute.
                unsafe { (t.hipDeviceGetAttribute)(&mut value, attribute, device) },
                "hipDeviceGetAttribute",
            )?;
            Ok(value)
        };
        // An attribute an older runtime does not know reads as "no".
        let flag = |id: sys::hipDeviceAttribute_t| attribute(id).map(|v| v != 0).unwrap_or(false);
        let mut name = [0 as c_char; 256];
        ok(
            // SAFETY: the buffer holds 256 bytes.
            unsafe { (t.hipDeviceGetName)(name.as_mut_ptr(), name.len() as c_int, device) },
            "hipDeviceGetName",
        )?;
        let name = c_string(name.as_ptr()).unwrap_or_default();
        Ok(DeviceProperties {
            name,
            compute_capability: (
                attribute(sys::hipDeviceAttributeComputeCapabilityMajor)?,
                attribute(sys::hipDeviceAttributeComputeCapabilityMinor)?,
            ),
            memory_pools: flag(sys::hipDeviceAttributeMemoryPoolsSupported),
            can_map_host_memory: flag(sys::hipDeviceAttributeCanMapHostMemory),
            stream_mem_ops: flag(sys::hipDeviceAttributeCanUseStreamWaitValue),
            // HIP has no attribute for it; the priority range decides (a range of one value
            // means no priorities).
            stream_priorities: true,
            managed_memory: flag(sys::hipDeviceAttributeManagedMemory),
        })
    }

    unsafe fn primary_context(ordinal: usize) -> RawResult<RawContext> {
        let device = c_int::try_from(ordinal).map_err(|_| RawError {
            code: sys::hipErrorInvalidDevice,
            call: "hipSetDevice",
        })?;
        Ok(device_token(device))
    }

    #[inline]
    unsafe fn context_current() -> RawResult<RawContext> {
        let t = table("hipGetDevice")?;
        let mut device = 0;
        // SAFETY: valid out-pointer.
        ok(unsafe { (t.hipGetDevice)(&mut device) }, "hipGetDevice")?;
        Ok(device_token(device))
    }

    unsafe fn context_set_current(ctx: RawContext) -> RawResult {
        let t = table("hipSetDevice")?;
        ok(
            // SAFETY: the token names a device ordinal; the runtime checks it.
            unsafe { (t.hipSetDevice)(token_device(ctx)) },
            "hipSetDevice",
        )
    }

    unsafe fn priority_range() -> RawResult<(i32, i32)> {
        let t = table("hipDeviceGetStreamPriorityRange")?;
        let (mut least, mut greatest) = (0, 0);
        ok(
            // SAFETY: valid out-pointers.
            unsafe { (t.hipDeviceGetStreamPriorityRange)(&mut least, &mut greatest) },
            "hipDeviceGetStreamPriorityRange",
        )?;
        Ok((least, greatest))
    }

    unsafe fn reset_persisting_l2_cache() -> RawResult {
        Err(absent("hipCtxResetPersistingL2Cache"))
    }

    // ---- streams ------------------------------------------------------------------------------

    unsafe fn stream_create(non_blocking: bool, priority: i32) -> RawResult<RawStream> {
        let t = table("hipStreamCreateWithPriority")?;
        let flags = if non_blocking {
            sys::hipStreamNonBlocking
        } else {
            sys::hipStreamDefault
        };
        let mut raw = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer; the caller selected the device.
            unsafe { (t.hipStreamCreateWithPriority)(&mut raw, flags, priority) },
            "hipStreamCreateWithPriority",
        )?;
        Ok(RawStream(raw))
    }

    unsafe fn stream_destroy(s: RawStream) -> RawResult {
        let t = table("hipStreamDestroy")?;
        ok(
            // SAFETY: the caller owns the stream.
            unsafe { (t.hipStreamDestroy)(stream(s)) },
            "hipStreamDestroy",
        )
    }

    #[inline]
    unsafe fn stream_query(s: RawStream) -> RawResult {
        let t = table("hipStreamQuery")?;
        // SAFETY: live stream (caller).
        ok(unsafe { (t.hipStreamQuery)(stream(s)) }, "hipStreamQuery")
    }

    #[inline]
    unsafe fn stream_synchronize(s: RawStream) -> RawResult {
        let t = table("hipStreamSynchronize")?;
        ok(
            // SAFETY: live stream (caller).
            unsafe { (t.hipStreamSynchronize)(stream(s)) },
            "hipStreamSynchronize",
        )
    }

    #[inline]
    unsafe fn stream_wait_event(s: RawStream, e: RawEvent) -> RawResult {
        let t = table("hipStreamWaitEvent")?;
        ok(
            // SAFETY: live stream and event (caller); flags must be 0.
            unsafe { (t.hipStreamWaitEvent)(stream(s), event(e), 0) },
            "hipStreamWaitEvent",
        )
    }

    unsafe fn stream_priority(s: RawStream) -> RawResult<i32> {
        let t = table("hipStreamGetPriority")?;
        let mut priority = 0;
        ok(
            // SAFETY: live stream; valid out-pointer.
            unsafe { (t.hipStreamGetPriority)(stream(s), &mut priority) },
            "hipStreamGetPriority",
        )?;
        Ok(priority)
    }

    unsafe fn stream_flags(s: RawStream) -> RawResult<u32> {
        let t = table("hipStreamGetFlags")?;
        let mut flags = 0;
        ok(
            // SAFETY: live stream; valid out-pointer.
            unsafe { (t.hipStreamGetFlags)(stream(s), &mut flags) },
            "hipStreamGetFlags",
        )?;
        Ok(flags)
    }

    unsafe fn stream_id(_s: RawStream) -> RawResult<u64> {
        Err(absent("hipStreamGetId"))
    }

    unsafe fn stream_device(s: RawStream) -> RawResult<usize> {
        let t = table("hipGetStreamDeviceId")?;
        let function = t
            .hipGetStreamDeviceId
            .ok_or_else(|| absent("hipGetStreamDeviceId"))?;
        // SAFETY: live stream (caller).
        let device = unsafe { function(stream(s)) };
        usize::try_from(device).map_err(|_| RawError {
            code: sys::hipErrorInvalidHandle,
            call: "hipGetStreamDeviceId",
        })
    }

    #[inline]
    unsafe fn launch_host_func(
        s: RawStream,
        callback: HostCallback,
        user_data: *mut c_void,
    ) -> RawResult {
        let t = table("hipLaunchHostFunc")?;
        let function = t
            .hipLaunchHostFunc
            .ok_or_else(|| absent("hipLaunchHostFunc"))?;
        ok(
            // SAFETY: live stream; the callback owns `user_data` per the caller's contract.
            unsafe { function(stream(s), Some(callback), user_data) },
            "hipLaunchHostFunc",
        )
    }

    unsafe fn stream_add_callback(
        s: RawStream,
        callback: StreamCallback,
        user_data: *mut c_void,
    ) -> RawResult {
        let t = table("hipStreamAddCallback")?;
        let function = t
            .hipStreamAddCallback
            .ok_or_else(|| absent("hipStreamAddCallback"))?;
        type Native = unsafe extern "C" fn(sys::hipStream_t, sys::hipError_t, *mut c_void);
        // SAFETY: `RawStream` is a transparent `*mut c_void` and the status is the 32-bit
        // `hipError_t`, so both signatures have the same C ABI.
        let native: Native = unsafe { std::mem::transmute::<StreamCallback, Native>(callback) };
        ok(
            // SAFETY: live stream; flags must be 0.
            unsafe { function(stream(s), Some(native), user_data, 0) },
            "hipStreamAddCallback",
        )
    }

    unsafe fn stream_wait_value64(s: RawStream, address: DevicePtr, value: u64) -> RawResult {
        let t = table("hipStreamWaitValue64")?;
        let function = t
            .hipStreamWaitValue64
            .ok_or_else(|| absent("hipStreamWaitValue64"))?;
        ok(
            // SAFETY: live stream; the address is a mapped pinned 8-byte word kept alive by the
            // caller; the full mask compares the whole word.
            unsafe {
                function(
                    stream(s),
                    device_ptr(address),
                    value,
                    sys::hipStreamWaitValueGte,
                    u64::MAX,
                )
            },
            "hipStreamWaitValue64",
        )
    }

    unsafe fn stream_write_value64(s: RawStream, address: DevicePtr, value: u64) -> RawResult {
        let t = table("hipStreamWriteValue64")?;
        let function = t
            .hipStreamWriteValue64
            .ok_or_else(|| absent("hipStreamWriteValue64"))?;
        ok(
            // SAFETY: as for the wait.
            unsafe { function(stream(s), device_ptr(address), value, 0) },
            "hipStreamWriteValue64",
        )
    }

    unsafe fn stream_set_attribute(_s: RawStream, _attribute: StreamAttribute) -> RawResult {
        Err(absent("hipStreamSetAttribute"))
    }

    unsafe fn stream_get_attribute(
        _s: RawStream,
        _id: StreamAttributeId,
    ) -> RawResult<StreamAttribute> {
        Err(absent("hipStreamGetAttribute"))
    }

    unsafe fn stream_copy_attributes(_dst: RawStream, _src: RawStream) -> RawResult {
        Err(absent("hipStreamCopyAttributes"))
    }

    unsafe fn stream_attach_mem_async(
        s: RawStream,
        address: DevicePtr,
        len: usize,
        attach: MemAttach,
    ) -> RawResult {
        let t = table("hipStreamAttachMemAsync")?;
        let function = t
            .hipStreamAttachMemAsync
            .ok_or_else(|| absent("hipStreamAttachMemAsync"))?;
        let flags = match attach {
            MemAttach::Global => sys::hipMemAttachGlobal,
            MemAttach::Host => sys::hipMemAttachHost,
            MemAttach::Single => sys::hipMemAttachSingle,
        };
        ok(
            // SAFETY: live stream; managed memory of `len` bytes (caller).
            unsafe { function(stream(s), device_ptr(address), len, flags) },
            "hipStreamAttachMemAsync",
        )
    }

    // ---- capture ------------------------------------------------------------------------------

    unsafe fn stream_begin_capture(s: RawStream, mode: CaptureMode) -> RawResult {
        let t = table("hipStreamBeginCapture")?;
        ok(
            // SAFETY: live stream.
            unsafe { (t.hipStreamBeginCapture)(stream(s), capture_mode(mode)) },
            "hipStreamBeginCapture",
        )
    }

    unsafe fn stream_begin_capture_to_graph(
        _s: RawStream,
        _graph: RawGraph,
        _dependencies: &[RawGraphNode],
        _mode: CaptureMode,
    ) -> RawResult {
        Err(absent("hipStreamBeginCaptureToGraph"))
    }

    unsafe fn stream_end_capture(s: RawStream) -> RawResult<RawGraph> {
        let t = table("hipStreamEndCapture")?;
        let mut graph = std::ptr::null_mut();
        ok(
            // SAFETY: live stream; valid out-pointer.
            unsafe { (t.hipStreamEndCapture)(stream(s), &mut graph) },
            "hipStreamEndCapture",
        )?;
        Ok(RawGraph(graph))
    }

    unsafe fn stream_is_capturing(s: RawStream) -> RawResult<CaptureStatus> {
        let t = table("hipStreamIsCapturing")?;
        let mut status = sys::hipStreamCaptureStatusNone;
        ok(
            // SAFETY: live stream; valid out-pointer.
            unsafe { (t.hipStreamIsCapturing)(stream(s), &mut status) },
            "hipStreamIsCapturing",
        )?;
        Ok(capture_status(status))
    }

    unsafe fn stream_capture_info(s: RawStream) -> RawResult<CaptureInfo> {
        let t = table("hipStreamGetCaptureInfo")?;
        let mut status = sys::hipStreamCaptureStatusNone;
        let mut id: std::ffi::c_ulonglong = 0;
        let mut graph = std::ptr::null_mut();
        let mut deps: *const sys::hipGraphNode_t = std::ptr::null();
        let mut count = 0usize;
        match t.hipStreamGetCaptureInfo_v2 {
            Some(v2) => ok(
                // SAFETY: live stream; valid out-pointers.
                unsafe {
                    v2(
                        stream(s),
                        &mut status,
                        &mut id,
                        &mut graph,
                        &mut deps,
                        &mut count,
                    )
                },
                "hipStreamGetCaptureInfo_v2",
            )?,
            None => ok(
                // SAFETY: live stream; valid out-pointers.
                unsafe { (t.hipStreamGetCaptureInfo)(stream(s), &mut status, &mut id) },
                "hipStreamGetCaptureInfo",
            )?,
        }
        let status = capture_status(status);
        let dependencies = if status == CaptureStatus::None || deps.is_null() || count == 0 {
            Vec::new()
        } else {
            // SAFETY: the runtime returned `count` nodes at `deps`, valid until the next call on
            // this stream; copied at once.
            unsafe { std::slice::from_raw_parts(deps, count) }
                .iter()
                // SAFETY: node handles the runtime returned.
                .map(|node| unsafe { RawGraphNode::from_raw(*node) })
                .collect()
        };
        Ok(CaptureInfo {
            status,
            id: if status == CaptureStatus::None { 0 } else { id },
            graph: RawGraph(graph),
            dependencies,
        })
    }

    unsafe fn stream_update_capture_dependencies(
        s: RawStream,
        dependencies: &[RawGraphNode],
        replace: bool,
    ) -> RawResult {
        let t = table("hipStreamUpdateCaptureDependencies")?;
        let function = t
            .hipStreamUpdateCaptureDependencies
            .ok_or_else(|| absent("hipStreamUpdateCaptureDependencies"))?;
        let flags = if replace {
            sys::hipStreamSetCaptureDependencies
        } else {
            sys::hipStreamAddCaptureDependencies
        };
        let mut nodes: Vec<sys::hipGraphNode_t> = dependencies.iter().map(|n| n.as_ptr()).collect();
        ok(
            // SAFETY: live stream; `nodes` holds `len` nodes for the duration of the call.
            unsafe { function(stream(s), nodes.as_mut_ptr(), nodes.len(), flags) },
            "hipStreamUpdateCaptureDependencies",
        )
    }

    unsafe fn thread_exchange_capture_mode(mode: CaptureMode) -> RawResult<CaptureMode> {
        let t = table("hipThreadExchangeStreamCaptureMode")?;
        let function = t
            .hipThreadExchangeStreamCaptureMode
            .ok_or_else(|| absent("hipThreadExchangeStreamCaptureMode"))?;
        let mut native = capture_mode(mode);
        ok(
            // SAFETY: valid in/out pointer.
            unsafe { function(&mut native) },
            "hipThreadExchangeStreamCaptureMode",
        )?;
        Ok(capture_mode_back(native))
    }

    // ---- events -------------------------------------------------------------------------------

    unsafe fn event_create(flags: EventFlags) -> RawResult<RawEvent> {
        let t = table("hipEventCreateWithFlags")?;
        let mut native = sys::hipEventDefault;
        if !flags.timing {
            native |= sys::hipEventDisableTiming;
        }
        if flags.blocking_sync {
            native |= sys::hipEventBlockingSync;
        }
        if flags.interprocess {
            native |= sys::hipEventInterprocess;
        }
        let mut raw = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer; the caller selected the device.
            unsafe { (t.hipEventCreateWithFlags)(&mut raw, native) },
            "hipEventCreateWithFlags",
        )?;
        Ok(RawEvent(raw))
    }

    unsafe fn event_destroy(e: RawEvent) -> RawResult {
        let t = table("hipEventDestroy")?;
        // SAFETY: the caller owns the event.
        ok(unsafe { (t.hipEventDestroy)(event(e)) }, "hipEventDestroy")
    }

    #[inline]
    unsafe fn event_record(e: RawEvent, s: RawStream) -> RawResult {
        let t = table("hipEventRecord")?;
        ok(
            // SAFETY: live event and stream (caller).
            unsafe { (t.hipEventRecord)(event(e), stream(s)) },
            "hipEventRecord",
        )
    }

    #[inline]
    unsafe fn event_query(e: RawEvent) -> RawResult {
        let t = table("hipEventQuery")?;
        // SAFETY: live event (caller).
        ok(unsafe { (t.hipEventQuery)(event(e)) }, "hipEventQuery")
    }

    #[inline]
    unsafe fn event_synchronize(e: RawEvent) -> RawResult {
        let t = table("hipEventSynchronize")?;
        ok(
            // SAFETY: live event (caller).
            unsafe { (t.hipEventSynchronize)(event(e)) },
            "hipEventSynchronize",
        )
    }

    unsafe fn event_elapsed_ms(start: RawEvent, end: RawEvent) -> RawResult<f32> {
        let t = table("hipEventElapsedTime")?;
        let mut ms = 0f32;
        ok(
            // SAFETY: live events; valid out-pointer.
            unsafe { (t.hipEventElapsedTime)(&mut ms, event(start), event(end)) },
            "hipEventElapsedTime",
        )?;
        Ok(ms)
    }

    // ---- graphs -------------------------------------------------------------------------------

    unsafe fn graph_create() -> RawResult<RawGraph> {
        let t = table("hipGraphCreate")?;
        let mut graph = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer; flags must be 0.
            unsafe { (t.hipGraphCreate)(&mut graph, 0) },
            "hipGraphCreate",
        )?;
        Ok(RawGraph(graph))
    }

    unsafe fn graph_instantiate(graph: RawGraph) -> RawResult<RawGraphExec> {
        let t = table("hipGraphInstantiate")?;
        let mut exec = std::ptr::null_mut();
        ok(
            // SAFETY: live graph; valid out-pointer; no error node or log buffer requested.
            unsafe {
                (t.hipGraphInstantiate)(
                    &mut exec,
                    graph.0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                )
            },
            "hipGraphInstantiate",
        )?;
        Ok(RawGraphExec(exec))
    }

    unsafe fn graph_launch(exec: RawGraphExec, s: RawStream) -> RawResult {
        let t = table("hipGraphLaunch")?;
        ok(
            // SAFETY: live executable graph and stream (caller).
            unsafe { (t.hipGraphLaunch)(exec.0, stream(s)) },
            "hipGraphLaunch",
        )
    }

    unsafe fn graph_exec_destroy(exec: RawGraphExec) -> RawResult {
        let t = table("hipGraphExecDestroy")?;
        ok(
            // SAFETY: the caller owns the executable graph.
            unsafe { (t.hipGraphExecDestroy)(exec.0) },
            "hipGraphExecDestroy",
        )
    }

    unsafe fn graph_destroy(graph: RawGraph) -> RawResult {
        let t = table("hipGraphDestroy")?;
        // SAFETY: the caller owns the graph.
        ok(unsafe { (t.hipGraphDestroy)(graph.0) }, "hipGraphDestroy")
    }

    unsafe fn graph_node_count(graph: RawGraph) -> RawResult<usize> {
        let t = table("hipGraphGetNodes")?;
        let mut count = 0usize;
        ok(
            // SAFETY: live graph; a null node array asks for the count only.
            unsafe { (t.hipGraphGetNodes)(graph.0, std::ptr::null_mut(), &mut count) },
            "hipGraphGetNodes",
        )?;
        Ok(count)
    }

    unsafe fn graph_nodes(graph: RawGraph) -> RawResult<Vec<RawGraphNode>> {
        let t = table("hipGraphGetNodes")?;
        // SAFETY: live graph (caller).
        let mut count = unsafe { Self::graph_node_count(graph) }?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut nodes: Vec<sys::hipGraphNode_t> = vec![std::ptr::null_mut(); count];
        // SAFETY: live graph; the array holds `count` nodes.
        let status = unsafe { (t.hipGraphGetNodes)(graph.0, nodes.as_mut_ptr(), &mut count) };
        ok(status, "hipGraphGetNodes")?;
        nodes.truncate(count);
        // SAFETY: node handles the runtime returned.
        Ok(nodes
            .into_iter()
            .map(|n| unsafe { RawGraphNode::from_raw(n) })
            .collect())
    }

    // ---- memory -------------------------------------------------------------------------------

    unsafe fn mem_alloc(len: usize) -> RawResult<DevicePtr> {
        let t = table("hipMalloc")?;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the caller selected the device.
        ok(unsafe { (t.hipMalloc)(&mut ptr, len) }, "hipMalloc")?;
        Ok(address(ptr))
    }

    unsafe fn mem_free(ptr: DevicePtr) -> RawResult {
        let t = table("hipFree")?;
        // SAFETY: the caller owns the allocation and no queued work uses it.
        ok(unsafe { (t.hipFree)(device_ptr(ptr)) }, "hipFree")
    }

    unsafe fn mem_alloc_async(len: usize, s: RawStream) -> RawResult<DevicePtr> {
        let t = table("hipMallocAsync")?;
        let function = t.hipMallocAsync.ok_or_else(|| absent("hipMallocAsync"))?;
        let mut ptr = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer; live stream.
            unsafe { function(&mut ptr, len, stream(s)) },
            "hipMallocAsync",
        )?;
        Ok(address(ptr))
    }

    unsafe fn mem_free_async(ptr: DevicePtr, s: RawStream) -> RawResult {
        let t = table("hipFreeAsync")?;
        let function = t.hipFreeAsync.ok_or_else(|| absent("hipFreeAsync"))?;
        ok(
            // SAFETY: the caller owns the allocation; the free is ordered on the live stream.
            unsafe { function(device_ptr(ptr), stream(s)) },
            "hipFreeAsync",
        )
    }

    unsafe fn mem_alloc_managed(len: usize) -> RawResult<DevicePtr> {
        let t = table("hipMallocManaged")?;
        let function = t
            .hipMallocManaged
            .ok_or_else(|| absent("hipMallocManaged"))?;
        let mut ptr = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer.
            unsafe { function(&mut ptr, len, sys::hipMemAttachGlobal) },
            "hipMallocManaged",
        )?;
        Ok(address(ptr))
    }

    unsafe fn host_alloc(len: usize) -> RawResult<*mut u8> {
        let t = table("hipHostMalloc")?;
        let mut ptr = std::ptr::null_mut();
        ok(
            // SAFETY: valid out-pointer.
            unsafe {
                (t.hipHostMalloc)(
                    &mut ptr,
                    len,
                    sys::hipHostMallocPortable | sys::hipHostMallocMapped,
                )
            },
            "hipHostMalloc",
        )?;
        Ok(ptr.cast())
    }

    unsafe fn host_free(ptr: *mut u8) -> RawResult {
        let t = table("hipHostFree")?;
        // SAFETY: the caller owns the pinned allocation and no queued work uses it.
        ok(unsafe { (t.hipHostFree)(ptr.cast()) }, "hipHostFree")
    }

    unsafe fn host_device_pointer(ptr: *mut u8) -> RawResult<DevicePtr> {
        let t = table("hipHostGetDevicePointer")?;
        let mut device = std::ptr::null_mut();
        ok(
            // SAFETY: `ptr` is mapped pinned memory; valid out-pointer; flags must be 0.
            unsafe { (t.hipHostGetDevicePointer)(&mut device, ptr.cast(), 0) },
            "hipHostGetDevicePointer",
        )?;
        Ok(address(device))
    }

    unsafe fn memcpy_htod_async(
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        let t = table("hipMemcpyHtoDAsync")?;
        ok(
            // SAFETY: the caller keeps both ranges valid until the copy completes; HIP only
            // reads `src` (its declaration lacks the const).
            unsafe {
                (t.hipMemcpyHtoDAsync)(device_ptr(dst), src.cast_mut().cast(), len, stream(s))
            },
            "hipMemcpyHtoDAsync",
        )
    }

    unsafe fn memcpy_dtoh_async(
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        let t = table("hipMemcpyDtoHAsync")?;
        ok(
            // SAFETY: the caller keeps both ranges valid until the copy completes.
            unsafe { (t.hipMemcpyDtoHAsync)(dst.cast(), device_ptr(src), len, stream(s)) },
            "hipMemcpyDtoHAsync",
        )
    }

    unsafe fn memcpy_dtod_async(
        dst: DevicePtr,
        src: DevicePtr,
        len: usize,
        s: RawStream,
    ) -> RawResult {
        let t = table("hipMemcpyDtoDAsync")?;
        ok(
            // SAFETY: the caller keeps both ranges valid until the copy completes.
            unsafe { (t.hipMemcpyDtoDAsync)(device_ptr(dst), device_ptr(src), len, stream(s)) },
            "hipMemcpyDtoDAsync",
        )
    }

    unsafe fn memset_d8_async(dst: DevicePtr, value: u8, len: usize, s: RawStream) -> RawResult {
        let t = table("hipMemsetD8Async")?;
        ok(
            // SAFETY: the caller keeps the range valid until the fill completes.
            unsafe { (t.hipMemsetD8Async)(device_ptr(dst), value, len, stream(s)) },
            "hipMemsetD8Async",
        )
    }

    // ---- modules and kernels ------------------------------------------------------------------

    unsafe fn module_load_data(image: *const c_void) -> RawResult<RawModule> {
        let t = table("hipModuleLoadData")?;
        let function = t
            .hipModuleLoadData
            .ok_or_else(|| absent("hipModuleLoadData"))?;
        let mut module = std::ptr::null_mut();
        ok(
            // SAFETY: `image` is a code object alive for the call (caller); valid out-pointer.
            unsafe { function(&mut module, image) },
            "hipModuleLoadData",
        )?;
        Ok(RawModule(module))
    }

    unsafe fn module_unload(module: RawModule) -> RawResult {
        let t = table("hipModuleUnload")?;
        let function = t.hipModuleUnload.ok_or_else(|| absent("hipModuleUnload"))?;
        // SAFETY: the caller owns the module and no launch of it is pending.
        ok(unsafe { function(module.0) }, "hipModuleUnload")
    }

    unsafe fn module_get_function(module: RawModule, name: &CStr) -> RawResult<RawFunction> {
        let t = table("hipModuleGetFunction")?;
        let function = t
            .hipModuleGetFunction
            .ok_or_else(|| absent("hipModuleGetFunction"))?;
        let mut raw = std::ptr::null_mut();
        ok(
            // SAFETY: live module; NUL-terminated name; valid out-pointer.
            unsafe { function(&mut raw, module.0, name.as_ptr()) },
            "hipModuleGetFunction",
        )?;
        Ok(RawFunction(raw))
    }

    unsafe fn launch_kernel(
        function: RawFunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem_bytes: u32,
        s: RawStream,
        params: *mut *mut c_void,
    ) -> RawResult {
        let t = table("hipModuleLaunchKernel")?;
        let launch = t
            .hipModuleLaunchKernel
            .ok_or_else(|| absent("hipModuleLaunchKernel"))?;
        ok(
            // SAFETY: live kernel and stream; `params` matches the kernel (caller's contract).
            unsafe {
                launch(
                    function.0,
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
            "hipModuleLaunchKernel",
        )
    }
}
