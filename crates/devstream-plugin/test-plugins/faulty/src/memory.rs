//! Memory functions: allocation (tracked for the queued copies), fills and copies, run inside
//! the call or queued.

use super::*;

pub(crate) unsafe extern "C" fn allocate(
    device: C_Device,
    ptr: *mut *mut c_void,
    size: usize,
) -> C_Status {
    guarded(|| {
        if ptr.is_null() {
            return C_ERROR;
        }
        let mode = mode_of(device);
        if mode == MODE_UNWRITTEN_ALLOCATION {
            return C_SUCCESS;
        }
        if mode == MODE_FAILING_OPS && size > (1 << 20) {
            return C_FAILED;
        }
        if mode == MODE_DEVICE_MEMORY_ELSEWHERE && size > (1 << 20) {
            // SAFETY: a non-null out-parameter.
            unsafe { *ptr = ELSEWHERE as *mut c_void };
            return C_SUCCESS;
        }
        let Some(layout) = layout(size) else {
            return C_FAILED;
        };
        // SAFETY: a layout of non-zero size.
        let memory = unsafe { alloc_zeroed(layout) };
        if memory.is_null() {
            return C_FAILED;
        }
        COUNTS[COUNT_LIVE_ALLOCATIONS].fetch_add(1, Ordering::SeqCst);
        lock(&ALLOCATIONS).push((memory as usize, size.max(1)));
        // SAFETY: a non-null out-parameter.
        unsafe { *ptr = memory.cast() };
        match mode {
            MODE_ALLOC_WARNING => C_WARNING,
            MODE_ALLOC_FAILED_WRITTEN => C_FAILED,
            _ => C_SUCCESS,
        }
    })
}

pub(crate) unsafe extern "C" fn deallocate(
    _device: C_Device,
    ptr: *mut c_void,
    size: usize,
) -> C_Status {
    guarded(|| match (ptr.is_null(), layout(size)) {
        (false, _) if ptr as usize == ELSEWHERE => C_SUCCESS,
        (false, Some(layout)) => {
            // SAFETY: `ptr` came from `allocate` with this size.
            unsafe { dealloc(ptr.cast(), layout) };
            COUNTS[COUNT_LIVE_ALLOCATIONS].fetch_sub(1, Ordering::SeqCst);
            lock(&ALLOCATIONS).retain(|&(start, _)| start != ptr as usize);
            C_SUCCESS
        }
        _ => C_ERROR,
    })
}

pub(crate) unsafe extern "C" fn memory_set(
    _device: C_Device,
    ptr: *mut c_void,
    value: u8,
    size: usize,
) -> C_Status {
    if ptr.is_null() && size > 0 {
        return C_ERROR;
    }
    // SAFETY: a valid range of our memory.
    unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), value, size) };
    C_SUCCESS
}

pub(crate) unsafe extern "C" fn memory_copy(
    _device: C_Device,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
) -> C_Status {
    if (dst.is_null() || src.is_null()) && size > 0 {
        return C_ERROR;
    }
    // SAFETY: valid ranges of `size` bytes.
    unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), size) };
    C_SUCCESS
}

pub(crate) unsafe extern "C" fn async_memory_copy(
    device: C_Device,
    _stream: C_Stream,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
) -> C_Status {
    // Synchronous, as in Paddle's custom_cpu.
    // SAFETY: forwarded arguments.
    unsafe { memory_copy(device, dst, src, size) }
}

pub(crate) unsafe extern "C" fn queued_async_copy(
    _device: C_Device,
    _stream: C_Stream,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
) -> C_Status {
    if (dst.is_null() || src.is_null()) && size > 0 {
        return C_ERROR;
    }
    lock(&QUEUED).push(Queued::Copy {
        dst: dst as usize,
        src: src as usize,
        len: size,
    });
    C_SUCCESS
}
