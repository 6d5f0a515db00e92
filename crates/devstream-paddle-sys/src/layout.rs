//! The two structs of `device_ext.h`, each listed once, field by field, in the Paddle 3.3
//! header's order: the source of the 3.3 and 2.6 declarations and their offset tables (see the
//! field syntax in `macros.rs`). A field that is not in every release since 2.6 says so in its
//! note: `[since 3.1]` (absent from 2.6), `[2.6: FnSize]` (another type in 2.6).
//!
//! A new Paddle release that adds fields adds rows here, with their release; the header test
//! then checks the new declaration against that release's `device_ext.h`.

use crate::types::*;
use core::ffi::{c_char, c_void};

paddle_structs! {
    /// The argument of `InitPlugin` (Paddle 3.x / develop layout, 96 bytes on 64-bit targets;
    /// Paddle 2.x lacks `pir_default_passes`, 88 bytes).
    pub struct CustomRuntimeParams, offsets CUSTOM_RUNTIME_PARAMS_FIELDS {
        /// Filled by the host with the size of its params; the plug-in checks it.
        size: usize,
        /// Filled by the host: the table the plug-in fills.
        interface: *mut C_DeviceInterface,
        /// Written by the plug-in.
        version: CustomRuntimeVersion,
        /// Written by the plug-in: its device type (a static C string).
        device_type: *mut c_char,
        /// Written by the plug-in: its sub-device type.
        sub_device_type: *mut c_char,
        /// Written by the plug-in (3.x / develop): a `std::vector<std::string>*` of PIR passes.
        pir_default_passes: *mut c_void [since 3.0],
        /// Reserved.
        reserved: [c_char; 32],
    }

    /// The function table, in header order: the Paddle 3.3.1 layout, 1128 bytes (141 words) on
    /// 64-bit targets.
    ///
    /// Every pointer is optional at the type level; which ones a plug-in must fill is checked
    /// when it is loaded. Only the fields before `get_compute_capability`
    /// ([`STABLE_PREFIX_SIZE`](crate::STABLE_PREFIX_SIZE)) have the same offset in every
    /// published layout; the rest may be read only from a plug-in known to have filled the 3.3
    /// table ([`LAYOUT_PADDLE_3_3`](crate::LAYOUT_PADDLE_3_3)).
    pub struct C_DeviceInterface, offsets C_DEVICE_INTERFACE_FIELDS {
        /// Filled by the host with the size of its table; the plug-in checks it.
        size: usize,

        // device manage api
        /// Initialise the hardware (optional).
        initialize: FnVoid,
        /// Deinitialise the hardware (optional).
        finalize: FnVoid,
        /// Initialise a device; may replace the logical id with the physical one (optional).
        init_device: FnDevice,
        /// Set the current device (required).
        set_device: FnDevice,
        /// Get the current device: the plug-in writes its id (required).
        get_device: FnDevice,
        /// Deinitialise a device (optional).
        deinit_device: FnDevice,
        /// Create a stream (optional: without it every stream is the null stream).
        create_stream: FnCreateStream,
        /// Destroy a stream (optional).
        destroy_stream: FnStream,
        /// Query a stream: `C_SUCCESS` when its work is complete (optional: then synchronize).
        query_stream: FnStream,
        /// Put a host callback on a stream (optional).
        stream_add_callback: FnAddCallback,
        /// Create an event (required).
        create_event: FnCreateEvent,
        /// Record an event on a stream (required).
        record_event: FnStreamEvent,
        /// Destroy an event (required).
        destroy_event: FnEvent,
        /// Query an event: `C_SUCCESS` when complete (optional: then synchronize).
        query_event: FnEvent,
        /// Synchronise a device (optional).
        synchronize_device: FnDevice,
        /// Synchronise a stream (optional).
        synchronize_stream: FnStream,
        /// Synchronise an event (required).
        synchronize_event: FnEvent,
        /// Make a stream wait on an event (optional).
        stream_wait_event: FnStreamEvent,
        /// Reserved.
        reserved_dev_api: [*mut c_void; 8],

        // memory manage api
        /// Allocate device memory (required).
        device_memory_allocate: FnAllocate,
        /// Free device memory (required).
        device_memory_deallocate: FnDeallocate,
        /// Set device memory, synchronously (optional).
        device_memory_set: FnMemset,
        /// Allocate (pinned) host memory (optional).
        host_memory_allocate: FnAllocate,
        /// Free host memory (optional).
        host_memory_deallocate: FnDeallocate,
        /// Allocate unified memory (optional).
        unified_memory_allocate: FnAllocate,
        /// Free unified memory (optional).
        unified_memory_deallocate: FnDeallocate,
        /// Synchronous host→device copy (optional).
        memory_copy_h2d: FnCopy,
        /// Synchronous device→host copy (optional).
        memory_copy_d2h: FnCopy,
        /// Synchronous device→device copy (optional).
        memory_copy_d2d: FnCopy,
        /// Synchronous peer copy (optional).
        memory_copy_p2p: FnCopyP2p,
        /// Stream-ordered host→device copy (optional).
        async_memory_copy_h2d: FnAsyncCopy,
        /// Stream-ordered device→host copy (optional).
        async_memory_copy_d2h: FnAsyncCopy,
        /// Stream-ordered device→device copy (optional).
        async_memory_copy_d2d: FnAsyncCopy,
        /// Stream-ordered peer copy (optional).
        async_memory_copy_p2p: FnAsyncCopyP2p,
        /// Reserved.
        reserved_mem_api: [*mut c_void; 8],

        // info api
        /// Number of visible devices (required).
        get_device_count: FnSize,
        /// Ids of the visible devices, `count` entries (required).
        get_device_list: FnSize,
        /// Total and free memory (optional).
        device_memory_stats: FnMemoryStats,
        /// Minimum allocation chunk (optional).
        device_min_chunk_size: FnDeviceSize,
        /// Maximum allocation chunk (optional).
        device_max_chunk_size: FnDeviceSize,
        /// Maximum single allocation (optional).
        device_max_alloc_size: FnDeviceSize,
        /// Extra padding per allocation (optional).
        device_extra_padding_size: FnDeviceSize,
        /// Initial allocation size (optional).
        device_init_alloc_size: FnDeviceSize,
        /// Reallocation size (optional).
        device_realloc_size: FnDeviceSize,
        /// Compute capability (3.x: with a device argument; Paddle 2.x: without).
        get_compute_capability: FnDeviceSize [2.6: FnSize],
        /// Device properties (3.1 and later).
        get_device_properties: FnDeviceProperties [since 3.1],
        /// Runtime version.
        get_runtime_version: FnDeviceSize [2.6: FnSize],
        /// Driver version.
        get_driver_version: FnDeviceSize [2.6: FnSize],
        /// Number of multiprocessors.
        get_multi_process: FnDeviceSize [since 3.1],
        /// Maximum threads per multiprocessor.
        get_max_threads_per_mp: FnDeviceSize [since 3.1],
        /// Maximum threads per block.
        get_max_threads_per_block: FnDeviceSize [since 3.1],
        /// Maximum grid dimensions.
        get_max_grid_dim_size: FnGridDims [since 3.1],
        /// Whether float16 is supported.
        is_float16_supported: FnDeviceBool [since 3.2],
        /// Whether bfloat16 is supported.
        is_bfloat16_supported: FnDeviceBool [since 3.2],
        /// Whether a DNN library is supported (3.3 and later).
        is_dnn_supported: FnDeviceBool [since 3.3],
        /// Create an Eigen device.
        init_eigen_device: FnInitEigen [since 3.1],
        /// Destroy an Eigen device.
        destroy_eigen_device: FnDestroyEigen [since 3.1],
        /// Reserved.
        reserved_info_api: [*mut c_void; 8],

        // ccl api
        /// Communicator name.
        xccl_get_comm_name: FnCommName [since 3.0],
        /// Size of a unique id.
        xccl_get_unique_id_size: FnSize,
        /// A unique id.
        xccl_get_unique_id: FnUniqueId,
        /// Create a communicator.
        xccl_comm_init_rank: FnCommInitRank,
        /// Destroy a communicator.
        xccl_destroy_comm: FnComm,
        /// All-reduce.
        xccl_all_reduce: FnAllReduce,
        /// Broadcast.
        xccl_broadcast: FnBroadcast,
        /// Reduce.
        xccl_reduce: FnReduce,
        /// All-gather.
        xccl_all_gather: FnAllGather,
        /// Reduce-scatter.
        xccl_reduce_scatter: FnReduceScatter,
        /// Group start.
        xccl_group_start: FnVoid,
        /// Group end.
        xccl_group_end: FnVoid,
        /// Send.
        xccl_send: FnSendRecv,
        /// Receive.
        xccl_recv: FnSendRecv,
        /// All-to-all.
        xccl_all_to_all: FnAllToAll,
        /// Reserved.
        reserved_ccl_api: [*mut c_void; 8],

        // profiler api
        /// Profiler initialise.
        profiler_initialize: FnProfilerInit,
        /// Profiler finalise.
        profiler_finalize: FnProfiler,
        /// Profiler prepare.
        profiler_prepare_tracing: FnProfiler,
        /// Profiler start.
        profiler_start_tracing: FnProfiler,
        /// Profiler stop.
        profiler_stop_tracing: FnProfiler,
        /// Profiler collect.
        profiler_collect_trace_data: FnProfilerCollect,
        /// Reserved.
        reserved_profiler_api: [*mut c_void; 8],

        // blas handle api
        /// Create a BLAS handle.
        init_blas_handle: FnInitBlas [since 3.2],
        /// Set a BLAS math mode.
        blas_set_math_mode: FnBlasMathMode [since 3.2],
        /// Create a BLASLt handle.
        init_blaslt_handle: FnInitBlasLt [since 3.2],
        /// Destroy a BLAS handle.
        destroy_blas_handle: FnDestroyBlas [since 3.2],
        /// Destroy a BLASLt handle.
        destroy_blaslt_handle: FnDestroyBlasLt [since 3.2],

        // graph capture (3.3 and later)
        /// Begin capturing `stream` into a graph, in the given `C_StreamCaptureMode`.
        cuda_stream_begin_capture: FnBeginCapture [since 3.3],
        /// End the capture of `stream`: writes the captured graph. The header's name, misspelled
        /// (`captrue`), is kept.
        cuda_stream_end_captrue: FnEndCapture [since 3.3],
        /// Launch an instantiated graph on a stream.
        cuda_graph_launch: FnGraphLaunch [since 3.3],
        /// Destroy a captured graph.
        cuda_graph_destroy: FnGraphDestroy [since 3.3],
        /// Destroy an instantiated graph.
        cuda_graph_exec_destroy: FnGraphExecDestroy [since 3.3],
        /// Instantiate `*pGraph`: writes the executable graph to `*pExec`.
        cuda_graph_instantiate: FnGraphInstantiate [since 3.3],
        /// The nodes of a captured graph.
        cuda_graph_get_nodes: FnGraphGetNodes [since 3.3],
        /// The capture status (and graph, dependencies) of a stream.
        cuda_stream_capture_info: FnStreamCaptureInfo [since 3.3],
        /// The parameter setters of a captured graph.
        get_parameter_setter_for_exec_graph: FnGraphParameterSetter [since 3.3],
        /// Write a graph as Graphviz text to a file.
        cuda_graph_debug_dot_print: FnGraphDebugDotPrint [since 3.3],
        /// Exchange the calling thread's capture mode. The header's name, misspelled
        /// (`capthure`), is kept.
        cuda_thread_exchange_stream_capthure_mode: FnExchangeCaptureMode [since 3.3],

        // other api
        /// `y = alpha * x + beta * y`.
        blas_axpby: FnAxpby,
        /// Reserved.
        reserved_other_api: [*mut c_void; 7],
    }
}

impl C_DeviceInterface {
    /// A table with every pointer null and `size` 0.
    pub const fn zeroed() -> Self {
        // SAFETY: every field is an integer, an `Option` of a function pointer or an array of
        // raw pointers; all-zero bytes are a valid value for each (0, `None`, null).
        unsafe { core::mem::MaybeUninit::<Self>::zeroed().assume_init() }
    }
}

impl CustomRuntimeParams {
    /// Params with every field zero or null.
    pub const fn zeroed() -> Self {
        // SAFETY: integers, raw pointers and a `c_char` array: all-zero bytes are valid.
        unsafe { core::mem::MaybeUninit::<Self>::zeroed().assume_init() }
    }
}

const _: () = assert!(
    core::mem::size_of::<paddle_2_6::C_DeviceInterface>() == 912
        || cfg!(not(target_pointer_width = "64"))
);
const _: () = assert!(
    core::mem::size_of::<paddle_2_6::CustomRuntimeParams>() == 88
        || cfg!(not(target_pointer_width = "64"))
);
