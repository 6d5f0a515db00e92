//! What the table tests share: the `devstream_cpu` table filled once per test process, calls
//! through it (`call!`, `answers!`, `ok!`, `named!`), and small helpers for memory, streams,
//! events and callbacks. Each test binary uses part of it.
#![allow(dead_code, unused_macros)]

use devstream_paddle::runtime::{places_of, Runtime};
use devstream_paddle::select::{Backend, Layout};
use devstream_paddle::sys::*;
use devstream_paddle::table::{fill, RUNTIMES};
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

pub const CPU: usize = 0;

/// The 3.3 table of `devstream_cpu`, with the capture functions (emulated capture switched on
/// for this test process).
pub fn table() -> &'static C_DeviceInterface {
    /// The filled table: function pointers and null reserved words, never written again.
    struct Table(Box<C_DeviceInterface>);
    // SAFETY: read-only after initialisation; its raw pointers are null reserved words.
    unsafe impl Sync for Table {}
    // SAFETY: as above.
    unsafe impl Send for Table {}
    static TABLE: OnceLock<Table> = OnceLock::new();
    &TABLE
        .get_or_init(|| {
            RUNTIMES[CPU].get_or_init(|| {
                Runtime::new(Backend::Cpu, places_of(Backend::Cpu)).expect("a cpu place")
            });
            std::env::set_var("DEVSTREAM_PADDLE_EMULATED_CAPTURE", "1");
            let mut table = Box::new(C_DeviceInterface::zeroed());
            table.size = std::mem::size_of::<C_DeviceInterface>();
            // SAFETY: a whole 1128-byte table.
            unsafe {
                fill::<CPU>(
                    &mut *table,
                    Layout::Paddle3 {
                        interface_size: table.size,
                    },
                )
            };
            Table(table)
        })
        .0
}

pub fn dev() -> C_Device_st {
    C_Device_st { id: 0 }
}

macro_rules! call {
    ($name:ident($($arg:expr),*)) => {{
        let f = table().$name.expect(stringify!($name));
        // SAFETY: the arguments follow the table's contract (or test its refusals).
        unsafe { f($($arg),*) }
    }};
}

/// Calls a table function and asserts its answer (the message names the function, or is the
/// one given).
macro_rules! answers {
    ($status:expr, $name:ident($($arg:expr),*)) => {
        assert_eq!(call!($name($($arg),*)), $status, stringify!($name))
    };
    ($status:expr, $name:ident($($arg:expr),*), $($message:tt)+) => {
        assert_eq!(call!($name($($arg),*)), $status, $($message)+)
    };
}

/// [`answers!`] `C_SUCCESS`.
macro_rules! ok {
    ($($call:tt)+) => {
        answers!(C_SUCCESS, $($call)+)
    };
}

/// A table function's name and its answer, for tables of answers.
macro_rules! named {
    ($name:ident($($arg:expr),*)) => {
        (stringify!($name), call!($name($($arg),*)))
    };
}

pub fn alloc(size: usize) -> *mut c_void {
    let mut d = dev();
    let mut ptr = null_mut();
    ok!(device_memory_allocate(&mut d, &mut ptr, size));
    assert!(!ptr.is_null());
    ptr
}

pub fn free(ptr: *mut c_void, size: usize) {
    let mut d = dev();
    ok!(device_memory_deallocate(&mut d, ptr, size));
}

pub fn h2d(dst: *mut c_void, src: &[u8]) -> C_Status {
    let mut d = dev();
    call!(memory_copy_h2d(&mut d, dst, src.as_ptr().cast(), src.len()))
}

pub fn d2h(src: *const c_void, len: usize) -> Result<Vec<u8>, C_Status> {
    let mut d = dev();
    let mut out = vec![0u8; len];
    match call!(memory_copy_d2h(&mut d, out.as_mut_ptr().cast(), src, len)) {
        C_SUCCESS => Ok(out),
        status => Err(status),
    }
}

pub fn stream() -> C_Stream {
    let mut d = dev();
    let mut s = null_mut();
    ok!(create_stream(&mut d, &mut s));
    assert!(!s.is_null());
    s
}

pub fn sync(s: C_Stream) -> C_Status {
    let mut d = dev();
    call!(synchronize_stream(&mut d, s))
}

pub fn destroy(s: C_Stream) {
    let mut d = dev();
    ok!(destroy_stream(&mut d, s));
}

/// A new event on device 0.
pub fn new_event() -> C_Event {
    let mut d = dev();
    let mut event = null_mut();
    ok!(create_event(&mut d, &mut event));
    assert!(!event.is_null());
    event
}

/// A callback that blocks its stream until the test sends on the channel.
pub unsafe extern "C" fn gate(_: C_Device, _: C_Stream, data: *mut c_void, _: *mut C_Status) {
    // SAFETY: `data` is the boxed receiver `hold` leaked for exactly this call.
    let receiver = unsafe { Box::from_raw(data.cast::<Receiver<()>>()) };
    let _ = receiver.recv_timeout(Duration::from_secs(30));
}

/// Holds `s` until the returned sender sends (or is dropped).
pub fn hold(s: C_Stream) -> Sender<()> {
    let (sender, receiver) = channel::<()>();
    let data = Box::into_raw(Box::new(receiver)).cast::<c_void>();
    let mut d = dev();
    ok!(stream_add_callback(&mut d, s, Some(gate), data));
    sender
}

/// A callback that writes 42 into the `u8` it is given.
pub unsafe extern "C" fn write_42(_: C_Device, _: C_Stream, data: *mut c_void, _: *mut C_Status) {
    // SAFETY: `data` points to a live `u8` the test owns until the stream is synchronised.
    unsafe { data.cast::<u8>().write(42) };
}

/// Queues [`write_42`] on `s`, writing to `flag`.
pub fn queue_write_42(s: C_Stream, flag: *mut u8) {
    let mut d = dev();
    ok!(stream_add_callback(&mut d, s, Some(write_42), flag.cast()));
}

pub fn live() -> [usize; 6] {
    let mut out = [0usize; 6];
    // SAFETY: room for six entries.
    assert!(unsafe { devstream_paddle::devstream_paddle_live(CPU, out.as_mut_ptr()) });
    out
}

/// The tests run one at a time (one counts live objects).
pub static SERIAL: Mutex<()> = Mutex::new(());

/// Holds [`SERIAL`]; when dropped, first gives the test thread's kept event slots back, so the
/// next test sees the free lists as this one left them (a thread gives them back when it
/// exits, which for a test thread may be after the next test has begun).
pub struct Serial(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl Drop for Serial {
    fn drop(&mut self) {
        devstream_paddle::runtime::give_back_kept_events();
    }
}

pub fn serial() -> Serial {
    Serial(SERIAL.lock().unwrap_or_else(|p| p.into_inner()))
}

/// A callback that reports a failure.
pub unsafe extern "C" fn fail_it(_: C_Device, _: C_Stream, _: *mut c_void, status: *mut C_Status) {
    // SAFETY: the plug-in passes a writable status.
    unsafe { status.write(C_ERROR) };
}

/// Ends the capture of `s` (asserting success): the captured graph.
pub fn end_capture(s: C_Stream) -> C_CudaGraph {
    let mut d = dev();
    let mut graph = null_mut();
    ok!(cuda_stream_end_captrue(&mut d, s, &mut graph));
    graph
}

/// Instantiates `graph` (asserting success): its executable graph.
pub fn instantiate(mut graph: C_CudaGraph) -> C_GraphExec {
    let mut exec = null_mut();
    ok!(cuda_graph_instantiate(
        &mut exec,
        &mut graph,
        null_mut(),
        null_mut(),
        0
    ));
    exec
}

/// The capture status of `s` (`cuda_stream_capture_info` asking for nothing else), or the
/// call's failing answer.
pub fn capture_status(s: C_Stream) -> Result<C_StreamCaptureStatus, C_Status> {
    let mut d = dev();
    let mut status = -1;
    let (id, graph, dependencies) = (null_mut(), null_mut(), null_mut());
    let (edges, count) = (null_mut(), null_mut());
    let answer = call!(cuda_stream_capture_info(
        &mut d,
        s,
        &mut status,
        id,
        graph,
        dependencies,
        edges,
        count
    ));
    match answer {
        C_SUCCESS => Ok(status),
        failed => Err(failed),
    }
}
