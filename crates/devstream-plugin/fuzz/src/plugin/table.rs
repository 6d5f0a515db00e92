//! The table: one set of `extern "C"` functions per instance number, each forwarding to its
//! [`Instance`], and the table of each instance as its [`Config`] fills it.

use super::*;

macro_rules! forward {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) => |$i:ident| $body:expr; )*) => {$(
        unsafe extern "C" fn $name<const N: usize>($($arg: $ty),*) -> C_Status {
            let $i = instance(N);
            $body
        }
    )*};
}

forward! {
    initialize() => |i| i.initialize();
    finalize() => |i| i.finalize();
    init_device(d: C_Device) => |i| i.init_device(d);
    deinit_device(d: C_Device) => |i| i.deinit_device(d);
    set_device(d: C_Device) => |i| i.set_device(d);
    get_device(d: C_Device) => |i| i.get_device(d);
    create_stream(d: C_Device, out: *mut C_Stream) => |i| i.create_stream(d, out);
    destroy_stream(d: C_Device, s: C_Stream) => |i| i.destroy_stream(d, s);
    query_stream(d: C_Device, s: C_Stream) => |i| i.query_stream(d, s);
    stream_add_callback(d: C_Device, s: C_Stream, cb: C_Callback, data: *mut c_void)
        => |i| i.add_callback(d, s, cb, data);
    create_event(d: C_Device, out: *mut C_Event) => |i| i.create_event(d, out);
    record_event(d: C_Device, s: C_Stream, e: C_Event) => |i| i.record_event(d, s, e);
    destroy_event(d: C_Device, e: C_Event) => |i| i.destroy_event(d, e);
    query_event(d: C_Device, e: C_Event) => |i| i.query_event(d, e);
    synchronize_device(d: C_Device) => |i| i.synchronize_device(d);
    synchronize_stream(d: C_Device, s: C_Stream) => |i| i.synchronize_stream(d, s);
    synchronize_event(d: C_Device, e: C_Event) => |i| i.synchronize_event(d, e);
    stream_wait_event(d: C_Device, s: C_Stream, e: C_Event) => |i| i.stream_wait_event(d, s, e);
    device_memory_allocate(d: C_Device, out: *mut *mut c_void, len: usize)
        => |i| i.allocate(Kind::Device, d, out, len, Call::DeviceAllocate);
    device_memory_deallocate(d: C_Device, ptr: *mut c_void, len: usize)
        => |i| i.deallocate(Kind::Device, d, ptr, len, Call::DeviceDeallocate);
    host_memory_allocate(d: C_Device, out: *mut *mut c_void, len: usize)
        => |i| i.allocate(Kind::Host, d, out, len, Call::HostAllocate);
    host_memory_deallocate(d: C_Device, ptr: *mut c_void, len: usize)
        => |i| i.deallocate(Kind::Host, d, ptr, len, Call::HostDeallocate);
    memory_copy_h2d(d: C_Device, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| { i.check_device(d, "memory_copy_h2d"); i.copy_sync(Direction::HostToDevice, dst, src, len) };
    memory_copy_d2h(d: C_Device, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| { i.check_device(d, "memory_copy_d2h"); i.copy_sync(Direction::DeviceToHost, dst, src, len) };
    memory_copy_d2d(d: C_Device, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| { i.check_device(d, "memory_copy_d2d"); i.copy_sync(Direction::DeviceToDevice, dst, src, len) };
    async_memory_copy_h2d(d: C_Device, s: C_Stream, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| i.copy_async(Direction::HostToDevice, d, s, dst, src, len);
    async_memory_copy_d2h(d: C_Device, s: C_Stream, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| i.copy_async(Direction::DeviceToHost, d, s, dst, src, len);
    async_memory_copy_d2d(d: C_Device, s: C_Stream, dst: *mut c_void, src: *const c_void, len: usize)
        => |i| i.copy_async(Direction::DeviceToDevice, d, s, dst, src, len);
    get_device_count(count: *mut usize) => |i| i.get_device_count(count);
    get_device_list(list: *mut usize) => |i| i.get_device_list(list);
    begin_capture(d: C_Device, s: C_Stream, _mode: C_StreamCaptureMode) => |i| i.begin_capture(d, s);
    end_capture(d: C_Device, s: C_Stream, out: *mut C_CudaGraph) => |i| i.end_capture(d, s, out);
    graph_launch(d: C_Device, x: C_GraphExec, s: C_Stream) => |i| i.graph_launch(d, x, s);
    graph_destroy(g: C_CudaGraph) => |i| i.graph_destroy(Kind::Graph, g as usize);
    graph_exec_destroy(x: C_GraphExec) => |i| i.graph_destroy(Kind::Exec, x as usize);
    graph_instantiate(x: *mut C_GraphExec, g: *mut C_CudaGraph, _node: *mut *mut c_void, log: *mut c_char, size: usize)
        => |i| i.instantiate(x, g, log, size);
    capture_info(d: C_Device, s: C_Stream, st: *mut C_StreamCaptureStatus, id: *mut c_ulonglong,
        g: *mut C_CudaGraph, deps: *mut C_CudaGraphNode, edges: *mut *mut c_void, count: *mut usize)
        => |i| i.capture_info(d, s, st, id, g, deps, edges, count);
}

fn table<const N: usize>(config: &Config) -> C_DeviceInterface {
    use optional::*;
    let has = |bit: u16| config.optional & bit != 0;
    let mut t = C_DeviceInterface::zeroed();
    t.set_device = Some(set_device::<N>);
    t.get_device = Some(get_device::<N>);
    t.create_event = Some(create_event::<N>);
    t.record_event = Some(record_event::<N>);
    t.destroy_event = Some(destroy_event::<N>);
    t.synchronize_event = Some(synchronize_event::<N>);
    t.device_memory_allocate = Some(device_memory_allocate::<N>);
    t.device_memory_deallocate = Some(device_memory_deallocate::<N>);
    t.get_device_count = Some(get_device_count::<N>);
    t.get_device_list = Some(get_device_list::<N>);
    if has(INIT) {
        t.initialize = Some(initialize::<N>);
        t.finalize = Some(finalize::<N>);
        t.init_device = Some(init_device::<N>);
        t.deinit_device = Some(deinit_device::<N>);
    }
    if has(STREAMS) {
        t.create_stream = Some(create_stream::<N>);
        t.destroy_stream = Some(destroy_stream::<N>);
    }
    if has(QUERY_STREAM) {
        t.query_stream = Some(query_stream::<N>);
    }
    if has(QUERY_EVENT) {
        t.query_event = Some(query_event::<N>);
    }
    if has(CALLBACK) {
        t.stream_add_callback = Some(stream_add_callback::<N>);
    }
    if has(SYNC_STREAM) {
        t.synchronize_stream = Some(synchronize_stream::<N>);
        t.synchronize_device = Some(synchronize_device::<N>);
    }
    if has(WAIT_EVENT) {
        t.stream_wait_event = Some(stream_wait_event::<N>);
    }
    if has(ASYNC_COPY) {
        t.async_memory_copy_h2d = Some(async_memory_copy_h2d::<N>);
        t.async_memory_copy_d2h = Some(async_memory_copy_d2h::<N>);
        t.async_memory_copy_d2d = Some(async_memory_copy_d2d::<N>);
    }
    if has(SYNC_COPY) {
        t.memory_copy_h2d = Some(memory_copy_h2d::<N>);
        t.memory_copy_d2h = Some(memory_copy_d2h::<N>);
        t.memory_copy_d2d = Some(memory_copy_d2d::<N>);
    }
    if has(HOST_MEMORY) {
        t.host_memory_allocate = Some(host_memory_allocate::<N>);
        t.host_memory_deallocate = Some(host_memory_deallocate::<N>);
    }
    if has(CAPTURE) {
        t.cuda_stream_begin_capture = Some(begin_capture::<N>);
        t.cuda_stream_end_captrue = Some(end_capture::<N>);
        t.cuda_graph_launch = Some(graph_launch::<N>);
        t.cuda_graph_destroy = Some(graph_destroy::<N>);
        t.cuda_graph_exec_destroy = Some(graph_exec_destroy::<N>);
        t.cuda_graph_instantiate = Some(graph_instantiate::<N>);
        t.cuda_stream_capture_info = Some(capture_info::<N>);
    }
    match config.missing_required {
        Some(0) => t.set_device = None,
        Some(1) => t.get_device = None,
        Some(2) => t.create_event = None,
        Some(3) => t.record_event = None,
        Some(4) => t.destroy_event = None,
        Some(5) => t.synchronize_event = None,
        Some(6) => t.device_memory_allocate = None,
        Some(7) => t.device_memory_deallocate = None,
        Some(8) => t.get_device_count = None,
        Some(9) => t.get_device_list = None,
        _ => {}
    }
    t
}

macro_rules! tables {
    ($($n:literal)*) => {
        pub(super) fn table_for(n: usize, config: &Config) -> C_DeviceInterface {
            match n {
                $($n => table::<$n>(config),)*
                _ => violation!("no table for instance {n}"),
            }
        }
        const _: () = assert!([$($n),*].len() == MAX_INSTANCES);
    };
}

tables!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
    62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91
    92 93 94 95
);
