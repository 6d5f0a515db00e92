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
    cuda_stream_begin_capture(d: C_Device, s: C_Stream, _mode: C_StreamCaptureMode) => |i| i.begin_capture(d, s);
    cuda_stream_end_captrue(d: C_Device, s: C_Stream, out: *mut C_CudaGraph) => |i| i.end_capture(d, s, out);
    cuda_graph_launch(d: C_Device, x: C_GraphExec, s: C_Stream) => |i| i.graph_launch(d, x, s);
    cuda_graph_destroy(g: C_CudaGraph) => |i| i.graph_destroy(Kind::Graph, g as usize);
    cuda_graph_exec_destroy(x: C_GraphExec) => |i| i.graph_destroy(Kind::Exec, x as usize);
    cuda_graph_instantiate(x: *mut C_GraphExec, g: *mut C_CudaGraph, _node: *mut *mut c_void, log: *mut c_char, size: usize)
        => |i| i.instantiate(x, g, log, size);
    cuda_stream_capture_info(d: C_Device, s: C_Stream, st: *mut C_StreamCaptureStatus, id: *mut c_ulonglong,
        g: *mut C_CudaGraph, deps: *mut C_CudaGraphNode, edges: *mut *mut c_void, count: *mut usize)
        => |i| i.capture_info(d, s, st, id, g, deps, edges, count);
}

/// Sets each listed field of `$table` to instance `N`'s forwarding function of that name.
macro_rules! fill {
    ($table:ident; $($field:ident),* $(,)?) => {
        $($table.$field = Some($field::<N>);)*
    };
}

/// Clears the `$missing`-th of the listed fields (the required functions, in
/// [`Config::missing_required`]'s numbering).
macro_rules! clear_nth {
    ($table:ident, $missing:expr; $($field:ident),* $(,)?) => {{
        let mut index = 0;
        $(
            if $missing == Some(index) {
                $table.$field = None;
            }
            index += 1;
        )*
        let _ = index;
    }};
}

fn table<const N: usize>(config: &Config) -> C_DeviceInterface {
    use optional::*;
    let has = |bit: u16| config.optional & bit != 0;
    let mut t = C_DeviceInterface::zeroed();
    fill!(t; set_device, get_device, create_event, record_event, destroy_event, synchronize_event);
    fill!(t; device_memory_allocate, device_memory_deallocate, get_device_count, get_device_list);
    if has(INIT) {
        fill!(t; initialize, finalize, init_device, deinit_device);
    }
    if has(STREAMS) {
        fill!(t; create_stream, destroy_stream);
    }
    if has(QUERY_STREAM) {
        fill!(t; query_stream);
    }
    if has(QUERY_EVENT) {
        fill!(t; query_event);
    }
    if has(CALLBACK) {
        fill!(t; stream_add_callback);
    }
    if has(SYNC_STREAM) {
        fill!(t; synchronize_stream, synchronize_device);
    }
    if has(WAIT_EVENT) {
        fill!(t; stream_wait_event);
    }
    if has(ASYNC_COPY) {
        fill!(t; async_memory_copy_h2d, async_memory_copy_d2h, async_memory_copy_d2d);
    }
    if has(SYNC_COPY) {
        fill!(t; memory_copy_h2d, memory_copy_d2h, memory_copy_d2d);
    }
    if has(HOST_MEMORY) {
        fill!(t; host_memory_allocate, host_memory_deallocate);
    }
    if has(CAPTURE) {
        fill!(t; cuda_stream_begin_capture, cuda_stream_end_captrue, cuda_graph_launch);
        fill!(t; cuda_graph_destroy, cuda_graph_exec_destroy, cuda_graph_instantiate);
        fill!(t; cuda_stream_capture_info);
    }
    clear_nth!(t, config.missing_required;
        set_device, get_device, create_event, record_event, destroy_event, synchronize_event,
        device_memory_allocate, device_memory_deallocate, get_device_count, get_device_list,
    );
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
