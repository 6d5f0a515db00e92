//! The `extern "C"` functions of the table, one set per backend.
//!
//! Every function is generic over the backend index `B`, so that each registered device type
//! gets its own function pointers (Paddle passes only a device id, never the type) and reaches
//! its own [`Runtime`]. Each one catches panics (`C_INTERNAL_ERROR`), answers `C_ERROR` for a
//! null pointer, an unknown device, handle or address, writes out-parameters only on success,
//! and never returns `C_WARNING` (Paddle treats every status but `C_SUCCESS` as an error).
//!
//! **Fast paths.** The calls Paddle makes for every `Stream.wait_stream` (`set_device` twice,
//! `create_event`, `record_event`, `stream_wait_event`, `synchronize_event`, `destroy_event`)
//! and `query_event` first try a path of loads, compares and at most one compare-and-swap
//! (`Runtime::*_fast`: a kept event slot, a settled event, a finished CPU stream), written so
//! that it cannot panic, outside the unwinding guard. When it does not apply (any bad
//! argument included) it changes nothing and the full call runs, guarded, with its errors and
//! reports.
//!
//! **Generated entry points.** Every entry point that follows the guard/resolve/call pattern
//! is a row of `entry_points!`: its signature, the device it acts on, its optional fast path and
//! its body. Each is named after its table field, so that [`fill`] writes a list of names.

use crate::runtime::{Runtime, Status, PANICKED};
use crate::select::Layout;
use crate::sys::*;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// The runtime of each backend, by index; set by `InitPlugin` before its table is filled.
pub static RUNTIMES: [OnceLock<Runtime>; 4] = [
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
];

thread_local! {
    /// The calling thread's current device, per backend.
    static CURRENT: Cell<[c_int; 4]> = const { Cell::new([0; 4]) };
}

/// Reports a failing entry point of backend `B`: `tracing::warn!` always, and one line on
/// stderr under `DEVSTREAM_PADDLE_LOG=1` (or `DEVSTREAM_PADDLE_DEBUG`), naming the function,
/// the device (the id of `device`, the `C_Device` the call was given, if any) and why (the
/// devstream error's `Display`, or the refusal).
///
/// `device` is null or points to a readable `C_Device_st` (the host's argument).
#[cold]
#[inline(never)]
fn report<const B: usize>(function: &str, device: C_Device, status: C_Status, why: Option<String>) {
    let device = if device.is_null() {
        "no device".to_owned()
    } else {
        // SAFETY: non-null, and the host passes a readable `C_Device_st` (see above).
        format!("device {}", unsafe { (*device).id })
    };
    let why = why.unwrap_or_else(|| "no reason recorded".to_owned());
    let kind = crate::select::Backend::ALL
        .get(B)
        .map_or("devstream_?", |b| b.device_type().to_str().unwrap_or("?"));
    tracing::warn!(
        "devstream-paddle: {kind} {function} on {device} answered {}: {why}",
        status.name()
    );
    if crate::runtime::log_to_stderr() {
        eprintln!(
            "devstream-paddle: {kind} {function} on {device} answered {}: {why}",
            status.name()
        );
        if log_backtraces() {
            let thread = std::thread::current();
            eprintln!(
                "devstream-paddle: called on thread {:?} from:\n{}",
                thread.name().unwrap_or("unnamed"),
                std::backtrace::Backtrace::force_capture()
            );
        }
    }
}

/// Whether a failure report also prints the calling thread and its backtrace, to find which
/// caller made a call the plug-in refused: `DEVSTREAM_PADDLE_LOG=backtrace`.
fn log_backtraces() -> bool {
    static BACKTRACES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *BACKTRACES
        .get_or_init(|| std::env::var("DEVSTREAM_PADDLE_LOG").is_ok_and(|v| v == "backtrace"))
}

/// Runs entry point `function`'s `body`; a panic becomes `C_INTERNAL_ERROR`. A failing status
/// is reported ([`report`]) with the reason the body noted, which is taken (cleared) then: a
/// call that succeeds leaves nothing noted (see `runtime::note_failure`), so the success path
/// touches no thread-local here.
///
/// `device` is the call's `C_Device` for the report: null, or readable (the host's argument).
#[inline(always)]
fn guarded<const B: usize>(
    function: &str,
    device: C_Device,
    body: impl FnOnce() -> Status,
) -> C_Status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => C_SUCCESS,
        Ok(Err(status)) => failed::<B>(function, device, status),
        Err(payload) => panicked::<B>(function, device, payload),
    }
}

/// The failing path of [`guarded`].
#[cold]
#[inline(never)]
fn failed<const B: usize>(function: &str, device: C_Device, status: C_Status) -> C_Status {
    report::<B>(function, device, status, crate::runtime::take_failure());
    status
}

/// The panicking path of [`guarded`].
#[cold]
#[inline(never)]
fn panicked<const B: usize>(
    function: &str,
    device: C_Device,
    payload: Box<dyn std::any::Any + Send>,
) -> C_Status {
    // What the body noted before panicking is not the reason.
    let _ = crate::runtime::take_failure();
    let message = devstream_core::panic::message(payload.as_ref());
    report::<B>(
        function,
        device,
        PANICKED,
        Some(format!("panicked: {message}")),
    );
    PANICKED
}

/// [`guarded`] for queries: `Ok(false)` (not complete) is `C_FAILED`, not reported.
#[inline(always)]
fn guarded_query<const B: usize>(
    function: &str,
    device: C_Device,
    body: impl FnOnce() -> Status<bool>,
) -> C_Status {
    let mut complete = true;
    let status = guarded::<B>(function, device, || {
        complete = body()?;
        Ok(())
    });
    match status {
        s if s == C_SUCCESS && !complete => C_FAILED,
        s => s,
    }
}

/// Runs `path`, one of the runtime's fast paths (see the module docs), on backend `B`'s
/// runtime: `true` if it applied (and did the call's work), `false` if there is no runtime yet
/// or the path did not apply (nothing done: run the full call).
#[inline(always)]
fn fast<const B: usize>(path: impl FnOnce(&'static Runtime) -> Option<()>) -> bool {
    RUNTIMES
        .get(B)
        .and_then(OnceLock::get)
        .and_then(path)
        .is_some()
}

#[inline(always)]
fn rt<const B: usize>() -> Status<&'static Runtime> {
    RUNTIMES[B].get().ok_or(C_ERROR)
}

/// Writes `value` to a non-null out-parameter.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> Status {
    if out.is_null() {
        return Err(C_ERROR);
    }
    // SAFETY: non-null and writable per the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Writes an optional out-parameter: `value` to `out` where the host asks for it (non-null).
///
/// # Safety
/// `out` is null or valid for a write of `T`.
unsafe fn put_if_asked<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-null and writable per the caller's contract.
        unsafe { out.write(value) };
    }
}

/// The device index of a `C_Device` from the host.
///
/// # Safety
/// `device` is null or points to a readable `C_Device_st`.
#[inline(always)]
unsafe fn dev<const B: usize>(device: C_Device) -> Status<(&'static Runtime, usize)> {
    let rt = rt::<B>()?;
    // SAFETY: forwarded from the caller.
    let d = unsafe { rt.device_ptr(device) }?;
    Ok((rt, d))
}

/// A peer copy from `src_device` into device `dst` of `rt`, on `stream` or synchronous.
///
/// # Safety
/// `src_device` is null or points to a readable `C_Device_st`.
unsafe fn copy_p2p<const B: usize>(
    rt: &Runtime,
    dst: usize,
    src_device: C_Device,
    stream: Option<C_Stream>,
    to: *mut c_void,
    from: *const c_void,
    size: usize,
) -> Status {
    // SAFETY: forwarded from the caller.
    let (_, src) = unsafe { dev::<B>(src_device) }?;
    rt.copy_p2p(dst, src, stream, to as usize, from as usize, size)
}

/// Declares the entry points. A row `guard fn name(args..) [on device] [fast(|rt| path)]
/// |bindings| body` is an `unsafe extern "C" fn` generic over the backend `B` that runs `body`
/// under `guard` ([`guarded`] or [`guarded_query`]), reporting a failure as `name` on the
/// `C_Device` argument named after `on` (or on none). With the bindings `|rt, d|`, `rt` is
/// backend `B`'s runtime and `d` the index of that device: a null or unknown device is
/// `C_ERROR` before the body runs. With `|rt|`, `rt` is the runtime alone (`C_ERROR` when
/// there is none yet). A row with `fast(|rt| path)` first tries that fast path ([`fast`], see
/// the module docs) and runs the guarded call, kept out of line, only when the path does not
/// apply. Each entry point is named after its table field.
macro_rules! entry_points {
    () => {};
    (@report) => { std::ptr::null_mut() };
    (@report $device:ident) => { $device };
    (@bind [$device:ident] $rt:pat_param, $d:pat_param) => {
        // SAFETY: the host passes a valid `C_Device` (a null one is refused).
        let ($rt, $d) = unsafe { dev::<B>($device) }?;
    };
    (@bind [$($device:ident)?] $rt:pat_param) => {
        let $rt = rt::<B>()?;
    };
    (@call $guard:ident $name:ident [$($device:ident)?] [$($bind:tt)*] $body:block) => {
        $guard::<B>(stringify!($name), entry_points!(@report $($device)?), || {
            entry_points!(@bind [$($device)?] $($bind)*);
            $body
        })
    };
    // Without a fast path the guarded call is the whole entry point; with one it is kept out
    // of line, so that the fast path stays small.
    (@full [] $guard:ident $name:ident ($($arg:ident: $ty:ty),*) $($call:tt)*) => {
        entry_points!(@call $guard $name $($call)*)
    };
    (@full [$fast:ident] $guard:ident $name:ident ($($arg:ident: $ty:ty),*) $($call:tt)*) => {{
        #[inline(never)]
        fn full<const B: usize>($($arg: $ty),*) -> C_Status {
            entry_points!(@call $guard $name $($call)*)
        }
        full::<B>($($arg),*)
    }};
    (
        $(#[$doc:meta])*
        $guard:ident fn $name:ident($($arg:ident: $ty:ty),*) $(on $device:ident)?
            $(fast(|$fast_rt:ident| $fast:expr))?
            |$($bind:pat_param),+| $body:block
        $($rest:tt)*
    ) => {
        $(#[$doc])*
        unsafe extern "C" fn $name<const B: usize>($($arg: $ty),*) -> C_Status {
            $(
                if fast::<B>(|$fast_rt| $fast) {
                    return C_SUCCESS;
                }
            )?
            entry_points!(
                @full [$($fast_rt)?] $guard $name ($($arg: $ty),*)
                [$($device)?] [$($bind),+] $body
            )
        }
        entry_points!($($rest)*);
    };
}

unsafe extern "C" fn finalize<const B: usize>() -> C_Status {
    // Nothing to tear down early: the library stays loaded (it pins itself) and devstream
    // frees its objects when their last user is gone. Paddle exits the process on a failure.
    C_SUCCESS
}

entry_points! {
    guarded fn init_device(device: C_Device) on device |_, _| { Ok(()) }

    guarded fn deinit_device(device: C_Device) on device |_, _| { Ok(()) }

    /// `set_device`: the calling thread's current device. With one device (the CPU backend,
    /// most machines' wgpu) every valid call names device 0 and nothing is kept: no
    /// thread-local (which costs a `__tls_get_addr` call in a shared library) on a call Paddle
    /// makes twice per `Stream.wait_stream`.
    guarded fn set_device(device: C_Device) on device
    fast(|rt| {
        if rt.count() != 1 {
            return None;
        }
        // SAFETY: the host passes a valid `C_Device` (or null: refused by the full call).
        unsafe { rt.device_fast(device) }.map(drop)
    })
    |rt, d| {
        if rt.count() > 1 {
            CURRENT.with(|c| {
                let mut all = c.get();
                all[B] = d as c_int;
                c.set(all);
            });
        }
        Ok(())
    }

    guarded fn create_stream(device: C_Device, stream: *mut C_Stream) on device |rt, d| {
        if stream.is_null() {
            return Err(C_ERROR);
        }
        let handle = rt.create_stream(d)?;
        // SAFETY: non-null out-parameter.
        unsafe { put(stream, handle as C_Stream) }
    }

    guarded fn destroy_stream(device: C_Device, stream: C_Stream) on device |rt, d| {
        if stream.is_null() {
            return Err(C_ERROR);
        }
        rt.destroy_stream(d, stream)
    }

    guarded_query fn query_stream(device: C_Device, stream: C_Stream) on device |rt, d| {
        rt.query_stream(d, stream)
    }

    guarded fn synchronize_stream(device: C_Device, stream: C_Stream) on device |rt, d| {
        rt.synchronize_stream(d, stream)
    }

    guarded fn synchronize_device(device: C_Device) on device |rt, d| { rt.synchronize_device(d) }

    guarded fn stream_add_callback(
        device: C_Device,
        stream: C_Stream,
        callback: C_Callback,
        user_data: *mut c_void
    ) on device |rt, d| {
        let callback = callback.ok_or(C_ERROR)?;
        rt.add_callback(d, stream, callback, user_data)
    }

    guarded fn create_event(device: C_Device, event: *mut C_Event) on device
    // SAFETY: the host passes a valid `C_Device` and a writable out-parameter (or null:
    // refused by the full call).
    fast(|rt| unsafe { rt.create_event_fast(device, event) })
    |rt, d| {
        if event.is_null() {
            return Err(C_ERROR);
        }
        let handle = rt.create_event(d)?;
        // SAFETY: non-null out-parameter.
        unsafe { put(event, handle as C_Event) }
    }

    guarded fn record_event(device: C_Device, stream: C_Stream, event: C_Event) on device
    // SAFETY: the host passes a valid `C_Device` (or null: refused by the full call).
    fast(|rt| unsafe { rt.record_event_fast(device, stream, event as usize) })
    |rt, d| {
        rt.record_event(d, stream, event as usize)
    }

    guarded fn stream_wait_event(device: C_Device, stream: C_Stream, event: C_Event) on device
    // SAFETY: the host passes a valid `C_Device` (or null: refused by the full call).
    fast(|rt| unsafe { rt.stream_wait_event_fast(device, stream, event as usize) })
    |rt, d| {
        rt.stream_wait_event(d, stream, event as usize)
    }

    /// Out of memory (more than the device's largest allocation, or the backend's
    /// `OutOfMemory`) answers `C_SUCCESS` with a null pointer: that is how Paddle's
    /// `CustomAllocator` recognises exhaustion (it then frees its cached chunks and retries, or
    /// raises its own `ResourceExhausted` "Out of memory error"); a failing status would be a
    /// generic "CustomDevice error" that skips the retry. devstream's own loader reads it the
    /// same way (`Error::OutOfMemory`). Every other failure is a status, with nothing written.
    guarded fn device_memory_allocate(device: C_Device, ptr: *mut *mut c_void, size: usize)
        on device |rt, d| {
        if ptr.is_null() {
            return Err(C_ERROR);
        }
        let addr = match rt.allocate(d, size) {
            Ok(addr) => addr,
            Err(C_FAILED) => {
                // Success with a null pointer: reported, as the failure it stands for.
                let why = crate::runtime::take_failure()
                    .unwrap_or_else(|| format!("{size} bytes exceed the largest allocation"));
                report::<B>(
                    "device_memory_allocate (a null pointer: out of memory)",
                    device,
                    C_FAILED,
                    Some(why),
                );
                0
            }
            Err(status) => return Err(status),
        };
        // SAFETY: non-null out-parameter.
        unsafe { put(ptr, addr as *mut c_void) }
    }

    guarded fn device_memory_deallocate(device: C_Device, ptr: *mut c_void, _size: usize)
        on device |rt, d| {
        rt.deallocate(d, ptr as usize)
    }

    guarded fn device_memory_set(device: C_Device, ptr: *mut c_void, value: u8, size: usize)
        on device |rt, d| {
        rt.memset(d, ptr as usize, value, size)
    }

    guarded fn host_memory_allocate(device: C_Device, ptr: *mut *mut c_void, size: usize)
        on device |rt, _| {
        if ptr.is_null() {
            return Err(C_ERROR);
        }
        let addr = rt.host_allocate(size)?;
        // SAFETY: non-null out-parameter.
        unsafe { put(ptr, addr as *mut c_void) }
    }

    guarded fn memory_copy_p2p(dst_device: C_Device, src_device: C_Device, dst: *mut c_void,
        src: *const c_void, size: usize) on dst_device |rt, dd| {
        // SAFETY: the host passes a valid `C_Device` as the source device.
        unsafe { copy_p2p::<B>(rt, dd, src_device, None, dst, src, size) }
    }

    guarded fn async_memory_copy_p2p(dst_device: C_Device, src_device: C_Device,
        stream: C_Stream, dst: *mut c_void, src: *const c_void, size: usize)
        on dst_device |rt, dd| {
        // SAFETY: as for `memory_copy_p2p`.
        unsafe { copy_p2p::<B>(rt, dd, src_device, Some(stream), dst, src, size) }
    }

    guarded fn device_memory_stats(device: C_Device, total: *mut usize, free: *mut usize)
        on device |rt, d| {
        if total.is_null() || free.is_null() {
            return Err(C_ERROR);
        }
        let (t, f) = rt.memory_stats(d);
        // SAFETY: both non-null out-parameters.
        unsafe {
            total.write(t);
            free.write(f);
        }
        Ok(())
    }

    guarded fn cuda_stream_begin_capture(
        device: C_Device,
        stream: C_Stream,
        mode: C_StreamCaptureMode
    ) on device |rt, d| {
        rt.begin_capture(d, stream, mode)
    }

    /// The header's name, misspelled (`captrue`), is kept.
    guarded fn cuda_stream_end_captrue(device: C_Device, stream: C_Stream, graph: *mut C_CudaGraph)
        on device |rt, d| {
        if graph.is_null() {
            return Err(C_ERROR);
        }
        let handle = rt.end_capture(d, stream)?;
        // SAFETY: non-null out-parameter.
        unsafe { put(graph, handle as C_CudaGraph) }
    }

    guarded fn cuda_graph_launch(device: C_Device, exec: C_GraphExec, stream: C_Stream)
        on device |rt, d| {
        rt.launch(d, exec as usize, stream)
    }

    /// Writes the capture status and id; the graph, dependencies and edge data cannot be told
    /// (null and 0 are written where the host asks for them).
    guarded fn cuda_stream_capture_info(
        device: C_Device,
        stream: C_Stream,
        status: *mut C_StreamCaptureStatus,
        id: *mut std::ffi::c_ulonglong,
        graph: *mut C_CudaGraph,
        dependencies: *mut C_CudaGraphNode,
        edge_data: *mut *mut c_void,
        dependency_count: *mut usize
    ) on device |rt, d| {
        if status.is_null() {
            return Err(C_ERROR);
        }
        let (state, number) = rt.capture_info(d, stream)?;
        // SAFETY: the host passes writable out-parameters; `status` is non-null (checked),
        // the others are written only when non-null.
        unsafe {
            status.write(state);
            put_if_asked(id, number);
            put_if_asked(graph, std::ptr::null_mut());
            put_if_asked(dependencies, std::ptr::null_mut());
            put_if_asked(edge_data, std::ptr::null_mut());
            put_if_asked(dependency_count, 0);
        }
        Ok(())
    }
}

entry_points! {
    guarded fn initialize() |_| { Ok(()) }

    guarded fn get_device(device: C_Device) |rt| {
        let id = if rt.count() > 1 {
            CURRENT.with(|c| c.get()[B])
        } else {
            0
        };
        // SAFETY: the host passes a writable `C_Device_st` (or null: refused).
        unsafe { put(device, C_Device_st { id }) }
    }

    guarded_query fn query_event(device: C_Device, event: C_Event) on device
    fast(|rt| rt.event_settled_fast(event as usize))
    |rt| {
        rt.query_event(event as usize)
    }

    guarded fn synchronize_event(device: C_Device, event: C_Event) on device
    fast(|rt| rt.event_settled_fast(event as usize))
    |rt| {
        rt.synchronize_event(event as usize)
    }

    guarded fn host_memory_deallocate(device: C_Device, ptr: *mut c_void, _size: usize)
        on device |rt| {
        rt.host_deallocate(ptr as usize)
    }

    guarded fn get_device_count(count: *mut usize) |rt| {
        // SAFETY: the host passes a writable `size_t` (or null: refused).
        unsafe { put(count, rt.count()) }
    }

    guarded fn get_device_list(devices: *mut usize) |rt| {
        if devices.is_null() {
            return Err(C_ERROR);
        }
        for id in 0..rt.count() {
            // SAFETY: the host passes room for `get_device_count` entries.
            unsafe { devices.add(id).write(id) };
        }
        Ok(())
    }

    guarded fn cuda_graph_destroy(graph: C_CudaGraph) |rt| { rt.destroy_graph(graph as usize) }

    guarded fn cuda_graph_exec_destroy(exec: C_GraphExec) |rt| { rt.destroy_exec(exec as usize) }

    guarded fn cuda_graph_instantiate(
        exec: *mut C_GraphExec,
        graph: *mut C_CudaGraph,
        _error_node: *mut *mut c_void,
        _log: *mut c_char,
        _log_size: usize
    ) |rt| {
        if exec.is_null() || graph.is_null() {
            return Err(C_ERROR);
        }
        // SAFETY: non-null, readable `C_CudaGraph` from the host.
        let graph = unsafe { graph.read() };
        let handle = rt.instantiate(graph as usize)?;
        // SAFETY: non-null out-parameter.
        unsafe { put(exec, handle as C_GraphExec) }
    }

    /// devstream graphs do not list their nodes: `pNode` must be null, and the count is 1 for
    /// every live graph. Paddle asks only whether a segment is empty (then destroys it instead
    /// of instantiating it); launching a devstream graph that captured nothing is a no-op, so
    /// calling every graph non-empty is safe where calling a non-empty one empty would drop
    /// work.
    guarded fn cuda_graph_get_nodes(
        graph: C_CudaGraph,
        nodes: *mut C_CudaGraphNode,
        count: *mut usize
    ) |rt| {
        rt.graph(graph as usize)?;
        if !nodes.is_null() {
            return Err(C_ERROR);
        }
        // SAFETY: the host passes a writable `size_t` (or null: refused).
        unsafe { put(count, 1) }
    }

    /// No kernel node of a devstream graph has parameters to set: zero setters.
    guarded fn get_parameter_setter_for_exec_graph(
        graph: C_CudaGraph,
        hooks: *mut C_GraphHookManager
    ) |rt| {
        rt.graph(graph as usize)?;
        let none = C_GraphHookManager {
            size: 0,
            hooks: std::ptr::null_mut(),
            user_data: std::ptr::null_mut(),
        };
        // SAFETY: the host passes a writable `C_GraphHookManager` (or null: refused).
        unsafe { put(hooks, none) }
    }
}

/// The copies of each direction: `memory_copy_*` (synchronous) and `async_memory_copy_*` (on a
/// stream), rows of [`entry_points!`] that run the runtime's copy of that direction.
macro_rules! copies {
    ($($sync:ident, $on_stream:ident => $copy:ident;)*) => {
        entry_points! {$(
            guarded fn $sync(device: C_Device, dst: *mut c_void, src: *const c_void, size: usize)
                on device |rt, d| { rt.$copy(d, None, dst as usize, src as usize, size) }

            guarded fn $on_stream(
                device: C_Device,
                stream: C_Stream,
                dst: *mut c_void,
                src: *const c_void,
                size: usize
            ) on device |rt, d| { rt.$copy(d, Some(stream), dst as usize, src as usize, size) }
        )*}
    };
}

copies! {
    memory_copy_h2d, async_memory_copy_h2d => copy_h2d;
    memory_copy_d2h, async_memory_copy_d2h => copy_d2h;
    memory_copy_d2d, async_memory_copy_d2d => copy_d2d;
}

/// `destroy_event`: the fast path may hand back a spare event slot, which is returned to the
/// runtime under the guard; otherwise as the other fast paths.
unsafe extern "C" fn destroy_event<const B: usize>(device: C_Device, event: C_Event) -> C_Status {
    if let Some(rt) = RUNTIMES.get(B).and_then(OnceLock::get) {
        match rt.destroy_event_fast(event as usize) {
            Some(Ok(())) => return C_SUCCESS,
            Some(Err(spare)) => {
                return guarded::<B>("destroy_event", device, || {
                    rt.give_back(spare);
                    Ok(())
                })
            }
            None => {}
        }
    }
    destroy_event_full::<B>(device, event)
}

#[inline(never)]
fn destroy_event_full<const B: usize>(device: C_Device, event: C_Event) -> C_Status {
    guarded::<B>("destroy_event", device, || {
        rt::<B>()?.destroy_event(event as usize)
    })
}

/// Declares a `C_Status (*)(C_Device, size_t*)` info function from `|rt, device| -> usize`.
macro_rules! size_info {
    ($($(#[$doc:meta])* $name:ident = $value:expr;)*) => {$(
        $(#[$doc])*
        unsafe extern "C" fn $name<const B: usize>(device: C_Device, out: *mut usize) -> C_Status {
            guarded::<B>(stringify!($name), device, || {
                // SAFETY: the host passes a valid `C_Device`.
                let (rt, d) = unsafe { dev::<B>(device) }?;
                let value: fn(&Runtime, usize) -> usize = $value;
                // SAFETY: the host passes a writable `size_t` (or null: refused).
                unsafe { put(out, value(rt, d)) }
            })
        }
    )*};
}

/// The smallest chunk Paddle's allocators carve (and their alignment).
pub const MIN_CHUNK: usize = crate::addr::ALIGN;
/// The chunk the buddy allocator (`FLAGS_allocator_strategy=naive_best_fit`) starts with and
/// grows by, at most.
pub const CHUNK: usize = 64 << 20;

size_info! {
    /// 256 bytes: the alignment of every address handed out.
    device_min_chunk_size = |_, _| MIN_CHUNK;
    /// The largest single allocation, at most 64 MiB.
    device_max_chunk_size = |rt, d| rt.max_alloc_size(d).min(CHUNK);
    /// The largest single allocation (wgpu: `max_buffer_size`).
    device_max_alloc_size = |rt, d| rt.max_alloc_size(d);
    /// No padding is needed: translated addresses are checked against the allocation's length.
    device_extra_padding_size = |_, _| 0;
    /// The buddy allocator's first chunk.
    device_init_alloc_size = |rt, d| rt.max_alloc_size(d).min(CHUNK);
    /// The buddy allocator's later chunks.
    device_realloc_size = |rt, d| rt.max_alloc_size(d).min(CHUNK);
}

/// Writes backend `B`'s entry point for each listed field (named after the field) into the
/// host's table at `$table`, where the announced size `$size` holds the field.
macro_rules! set {
    ($table:expr, $size:expr; $($field:ident),* $(,)?) => {$(
        if offset_of!(C_DeviceInterface, $field) + size_of::<usize>() <= $size {
            // SAFETY: the field lies inside the `$size` bytes the host allocated (checked just
            // above); the write goes through a raw place, creating no reference to the table.
            unsafe { std::ptr::addr_of_mut!((*$table).$field).write(Some($field::<B> as _)) };
        }
    )*};
}

/// Whether backend index `b` gets the graph-capture functions: CUDA and HIP, whose places
/// capture natively; CPU and wgpu (emulated capture) only with
/// `DEVSTREAM_PADDLE_EMULATED_CAPTURE=1`, a switch for tests of this table.
pub fn capture_for(b: usize) -> bool {
    b == crate::select::Backend::Cuda.index()
        || b == crate::select::Backend::Hip.index()
        || std::env::var("DEVSTREAM_PADDLE_EMULATED_CAPTURE").is_ok_and(|v| v == "1")
}

/// Fills the table of backend `B` into the host's table at `table`.
///
/// Only fields inside `layout.interface_size()` are written: the functions of the prefix
/// shared by all published layouts, and in the 3.3 table (1128 bytes) the graph-capture
/// functions where [`capture_for`] allows them. What devstream cannot honour stays null, so
/// that Paddle reports it: unified memory (a devstream buffer is not host memory), graph
/// node lists, DOT dumps and capture-mode exchange, BLAS, collectives, profiler, device
/// properties.
///
/// # Safety
/// `table` points to `layout.interface_size()` writable bytes.
pub unsafe fn fill<const B: usize>(table: *mut C_DeviceInterface, layout: Layout) {
    let size = layout.interface_size();
    set!(table, size;
        initialize, finalize, init_device, set_device, get_device, deinit_device,
        create_stream, destroy_stream, query_stream, stream_add_callback,
        create_event, record_event, destroy_event, query_event,
        synchronize_device, synchronize_stream, synchronize_event, stream_wait_event,
        device_memory_allocate, device_memory_deallocate, device_memory_set,
        host_memory_allocate, host_memory_deallocate,
        memory_copy_h2d, memory_copy_d2h, memory_copy_d2d, memory_copy_p2p,
        async_memory_copy_h2d, async_memory_copy_d2h, async_memory_copy_d2d, async_memory_copy_p2p,
        get_device_count, get_device_list, device_memory_stats,
        device_min_chunk_size, device_max_chunk_size, device_max_alloc_size,
        device_extra_padding_size, device_init_alloc_size, device_realloc_size,
    );
    if capture_for(B) {
        set!(table, size;
            cuda_stream_begin_capture, cuda_stream_end_captrue, cuda_graph_launch,
            cuda_graph_destroy, cuda_graph_exec_destroy, cuda_graph_instantiate,
            cuda_graph_get_nodes, cuda_stream_capture_info, get_parameter_setter_for_exec_graph,
        );
    }
}

/// [`fill`] for a backend index known only at run time.
///
/// # Safety
/// As for [`fill`].
pub unsafe fn fill_for(index: usize, table: *mut C_DeviceInterface, layout: Layout) {
    // SAFETY: forwarded from the caller.
    unsafe {
        match index {
            0 => fill::<0>(table, layout),
            1 => fill::<1>(table, layout),
            2 => fill::<2>(table, layout),
            3 => fill::<3>(table, layout),
            _ => {}
        }
    }
}
