//! A null CUDA driver: the driver-API functions devstream's CUDA backend requires, each of which
//! succeeds at once without a GPU (handles are small heap blocks, memory is host memory, copies
//! are `memcpy`, every stream is always idle).
//!
//! It exists to count instructions: `cost-cuda-ops` runs a devstream operation and the raw
//! driver call it wraps against this library under callgrind, so the difference is exactly what
//! devstream adds on the host. It is a measuring tool,
//! never a test double: no test runs against it, and its file is not named `libcuda.so` (the
//! measuring script links it under that name in a folder of its own).

#![allow(non_snake_case)]

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void};

/// `CUresult`.
type CuResult = c_uint;
/// `CUDA_SUCCESS`.
const SUCCESS: CuResult = 0;
/// `CUDA_ERROR_INVALID_VALUE`.
const INVALID_VALUE: CuResult = 1;

thread_local! {
    static CURRENT: Cell<*mut c_void> = const { Cell::new(std::ptr::null_mut()) };
}

/// The one context handle.
const CONTEXT: usize = 0x1000;

/// A new opaque handle (freed by [`release`]).
fn handle() -> *mut c_void {
    Box::into_raw(Box::new(0u64)).cast()
}

/// Frees a handle made by [`handle`].
///
/// # Safety
/// `h` comes from [`handle`] and is released once.
unsafe fn release(h: *mut c_void) {
    if !h.is_null() {
        // SAFETY: per this function's contract.
        drop(unsafe { Box::from_raw(h.cast::<u64>()) });
    }
}

/// Writes `value` through `out` unless it is null; `INVALID_VALUE` when it is.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> CuResult {
    if out.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: per this function's contract.
    unsafe { out.write(value) };
    SUCCESS
}

/// Writes `value` through the optional out-pointer `out`, skipping it when it is null.
///
/// # Safety
/// As for [`put`].
unsafe fn put_optional<T>(out: *mut T, value: T) {
    // SAFETY: per this function's contract; a null pointer only makes `put` answer an error.
    let _ = unsafe { put(out, value) };
}

/// `cuInit`.
#[no_mangle]
pub extern "C" fn cuInit(_flags: c_uint) -> CuResult {
    SUCCESS
}

/// `cuDriverGetVersion`: 13.0.
///
/// # Safety
/// `version` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(version, 13000) }
}

/// `cuGetErrorName`.
///
/// # Safety
/// `name` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(_error: CuResult, name: *mut *const c_char) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(name, c"CUDA_ERROR_NULL_DRIVER".as_ptr()) }
}

/// `cuGetErrorString`.
///
/// # Safety
/// `text` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(_error: CuResult, text: *mut *const c_char) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(text, c"an error of the null driver".as_ptr()) }
}

/// `cuDeviceGetCount`: one device.
///
/// # Safety
/// `count` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(count, 1) }
}

/// `cuDeviceGet`.
///
/// # Safety
/// `device` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(device, ordinal) }
}

/// `cuDeviceGetAttribute`: compute capability 9.0, every other attribute 1 (every capability
/// flag on, counts and sizes of one).
///
/// # Safety
/// `value` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    value: *mut c_int,
    attribute: c_int,
    _device: c_int,
) -> CuResult {
    const MAJOR: c_int = 75;
    const MINOR: c_int = 76;
    let v = match attribute {
        MAJOR => 9,
        MINOR => 0,
        _ => 1,
    };
    // SAFETY: per the caller.
    unsafe { put(value, v) }
}

/// `cuDeviceGetName`.
///
/// # Safety
/// `name` is valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(
    name: *mut c_char,
    len: c_int,
    _device: c_int,
) -> CuResult {
    let text = b"null CUDA device\0";
    if name.is_null() || (len as usize) < text.len() {
        return INVALID_VALUE;
    }
    // SAFETY: `name` holds at least `text.len()` bytes (checked above).
    unsafe { std::ptr::copy_nonoverlapping(text.as_ptr().cast(), name, text.len()) };
    SUCCESS
}

/// `cuDevicePrimaryCtxRetain`.
///
/// # Safety
/// `context` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(
    context: *mut *mut c_void,
    _device: c_int,
) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(context, CONTEXT as *mut c_void) }
}

/// `cuCtxGetCurrent`.
///
/// # Safety
/// `context` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(context: *mut *mut c_void) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(context, CURRENT.with(Cell::get)) }
}

/// `cuCtxSetCurrent`.
#[no_mangle]
pub extern "C" fn cuCtxSetCurrent(context: *mut c_void) -> CuResult {
    CURRENT.with(|current| current.set(context));
    SUCCESS
}

/// `cuCtxGetStreamPriorityRange`: 0 (least) to -5 (greatest), as on an H100.
///
/// # Safety
/// Both pointers are null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> CuResult {
    // SAFETY: per the caller (null pointers are skipped).
    unsafe {
        put_optional(least, 0);
        put_optional(greatest, -5);
    }
    SUCCESS
}

/// `cuStreamCreateWithPriority`.
///
/// # Safety
/// `stream` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    stream: *mut *mut c_void,
    _flags: c_uint,
    _priority: c_int,
) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(stream, handle()) }
}

/// `cuStreamDestroy_v2`.
///
/// # Safety
/// `stream` was made by this library and is destroyed once.
#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(stream: *mut c_void) -> CuResult {
    // SAFETY: per the caller.
    unsafe { release(stream) };
    SUCCESS
}

/// Functions that take handles and succeed without doing anything (every stream is idle).
macro_rules! succeed {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: succeeds at once.")]
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> CuResult {
            let _ = ($($arg,)*);
            SUCCESS
        }
    )*};
}

succeed! {
    cuStreamQuery(stream: *mut c_void);
    cuStreamSynchronize(stream: *mut c_void);
    cuStreamWaitEvent(stream: *mut c_void, event: *mut c_void, flags: c_uint);
    cuStreamBeginCapture_v2(stream: *mut c_void, mode: c_int);
    cuEventRecord(event: *mut c_void, stream: *mut c_void);
    cuEventQuery(event: *mut c_void);
    cuEventSynchronize(event: *mut c_void);
    cuGraphLaunch(exec: *mut c_void, stream: *mut c_void);
}

/// `cuStreamGetPriority`: 0.
///
/// # Safety
/// `priority` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuStreamGetPriority(
    _stream: *mut c_void,
    priority: *mut c_int,
) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(priority, 0) }
}

/// `cuStreamGetFlags`: non-blocking.
///
/// # Safety
/// `flags` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuStreamGetFlags(_stream: *mut c_void, flags: *mut c_uint) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(flags, 1) }
}

/// `cuStreamIsCapturing`: never capturing.
///
/// # Safety
/// `status` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuStreamIsCapturing(_stream: *mut c_void, status: *mut c_int) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(status, 0) }
}

/// `cuStreamEndCapture`: an empty graph.
///
/// # Safety
/// `graph` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuStreamEndCapture(
    _stream: *mut c_void,
    graph: *mut *mut c_void,
) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(graph, handle()) }
}

/// `cuEventCreate`.
///
/// # Safety
/// `event` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(event: *mut *mut c_void, _flags: c_uint) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(event, handle()) }
}

/// `cuGraphCreate`.
///
/// # Safety
/// `graph` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuGraphCreate(graph: *mut *mut c_void, _flags: c_uint) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(graph, handle()) }
}

/// `cuGraphInstantiateWithFlags`.
///
/// # Safety
/// `exec` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuGraphInstantiateWithFlags(
    exec: *mut *mut c_void,
    _graph: *mut c_void,
    _flags: u64,
) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(exec, handle()) }
}

/// `cuGraphGetNodes`: no nodes.
///
/// # Safety
/// `count` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuGraphGetNodes(
    _graph: *mut c_void,
    _nodes: *mut *mut c_void,
    count: *mut usize,
) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(count, 0) }
}

/// Destructors of handles made by this library.
macro_rules! destroy {
    ($($name:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        /// The handle was made by this library and is destroyed once.
        #[no_mangle]
        pub unsafe extern "C" fn $name(h: *mut c_void) -> CuResult {
            // SAFETY: per the caller.
            unsafe { release(h) };
            SUCCESS
        }
    )*};
}

destroy! {
    cuEventDestroy_v2;
    cuGraphExecDestroy;
    cuGraphDestroy;
}

/// `cuMemAlloc_v2`: host memory stands for device memory.
///
/// # Safety
/// `pointer` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(pointer: *mut u64, bytes: usize) -> CuResult {
    // SAFETY: calloc of any size; freed by cuMemFree_v2.
    let block = unsafe { libc_calloc(bytes.max(1)) };
    // SAFETY: per the caller.
    unsafe { put(pointer, block as u64) }
}

/// `cuMemFree_v2`.
///
/// # Safety
/// `pointer` came from `cuMemAlloc_v2` and is freed once.
#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(pointer: u64) -> CuResult {
    // SAFETY: per the caller.
    unsafe { libc_free(pointer as *mut c_void) };
    SUCCESS
}

/// `cuMemHostAlloc`.
///
/// # Safety
/// `pointer` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    pointer: *mut *mut c_void,
    bytes: usize,
    _flags: c_uint,
) -> CuResult {
    // SAFETY: calloc of any size; freed by cuMemFreeHost.
    let block = unsafe { libc_calloc(bytes.max(1)) };
    // SAFETY: per the caller.
    unsafe { put(pointer, block) }
}

/// `cuMemFreeHost`.
///
/// # Safety
/// `pointer` came from `cuMemHostAlloc` and is freed once.
#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(pointer: *mut c_void) -> CuResult {
    // SAFETY: per the caller.
    unsafe { libc_free(pointer) };
    SUCCESS
}

/// `cuMemHostGetDevicePointer_v2`: the host address.
///
/// # Safety
/// `device` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    device: *mut u64,
    host: *mut c_void,
    _flags: c_uint,
) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(device, host as u64) }
}

/// `cuMemcpyHtoDAsync_v2`.
///
/// # Safety
/// Both ranges are valid for `bytes`.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: u64,
    src: *const c_void,
    bytes: usize,
    _stream: *mut c_void,
) -> CuResult {
    // SAFETY: per the caller (device memory is host memory here).
    unsafe { std::ptr::copy(src.cast::<u8>(), dst as *mut u8, bytes) };
    SUCCESS
}

/// `cuMemcpyDtoHAsync_v2`.
///
/// # Safety
/// Both ranges are valid for `bytes`.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: u64,
    bytes: usize,
    _stream: *mut c_void,
) -> CuResult {
    // SAFETY: per the caller (device memory is host memory here).
    unsafe { std::ptr::copy(src as *const u8, dst.cast::<u8>(), bytes) };
    SUCCESS
}

/// `cuMemcpyDtoDAsync_v2`.
///
/// # Safety
/// Both ranges are valid for `bytes`.
#[no_mangle]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: u64,
    src: u64,
    bytes: usize,
    _stream: *mut c_void,
) -> CuResult {
    // SAFETY: per the caller (device memory is host memory here).
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
    SUCCESS
}

/// `cuMemsetD8Async`.
///
/// # Safety
/// The range is valid for `bytes`.
#[no_mangle]
pub unsafe extern "C" fn cuMemsetD8Async(
    dst: u64,
    value: u8,
    bytes: usize,
    _stream: *mut c_void,
) -> CuResult {
    // SAFETY: per the caller (device memory is host memory here).
    unsafe { std::ptr::write_bytes(dst as *mut u8, value, bytes) };
    SUCCESS
}

extern "C" {
    #[link_name = "calloc"]
    fn libc_calloc_raw(count: usize, size: usize) -> *mut c_void;
    #[link_name = "free"]
    fn libc_free(pointer: *mut c_void);
}

/// `calloc(bytes, 1)`.
///
/// # Safety
/// The result is freed with `free`.
unsafe fn libc_calloc(bytes: usize) -> *mut c_void {
    // SAFETY: calloc accepts any sizes.
    unsafe { libc_calloc_raw(bytes, 1) }
}

/// `cuStreamGetCaptureInfo_v2`: never capturing.
///
/// # Safety
/// Each pointer is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuStreamGetCaptureInfo_v2(
    _stream: *mut c_void,
    status: *mut c_int,
    id: *mut u64,
    graph: *mut *mut c_void,
    dependencies: *mut *const c_void,
    count: *mut usize,
) -> CuResult {
    // SAFETY: per the caller (null pointers are skipped).
    unsafe {
        put_optional(status, 0);
        put_optional(id, 0);
        put_optional(graph, std::ptr::null_mut());
        put_optional(dependencies, std::ptr::null());
        put_optional(count, 0);
    }
    SUCCESS
}

/// `cuEventElapsedTime`: zero.
///
/// # Safety
/// `ms` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime(
    ms: *mut f32,
    _start: *mut c_void,
    _end: *mut c_void,
) -> CuResult {
    // SAFETY: per the caller.
    unsafe { put(ms, 0.0) }
}
