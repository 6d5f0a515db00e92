//! The modes `devstream_test_plugin_faulty_select` chooses between, and the device type each
//! registers.

use super::*;

/// Writes no version: refuses every layout (the default).
pub const MODE_REFUSE: u32 = 0;
/// Reports runtime version 0.1.0 (older than 0.1.1).
pub const MODE_OLD_VERSION: u32 = 1;
/// Reports runtime version 1.0.0 (a major version devstream does not speak).
pub const MODE_NEWER_MAJOR: u32 = 2;
/// Leaves `device_type` null.
pub const MODE_NULL_DEVICE_TYPE: u32 = 3;
/// Reports the device type `"not a type"`.
pub const MODE_INVALID_DEVICE_TYPE: u32 = 4;
/// Fills a function pointer at byte 2000 of the table: built against a larger, unknown header.
pub const MODE_WRITES_BEYOND: u32 = 5;
/// Replaces `params->interface` with a table of its own.
pub const MODE_REPLACES_INTERFACE: u32 = 6;
/// A working plug-in built against the Paddle 2.x header: accepts only 88-byte params or a
/// 912-byte table, fills only the 2.x part; callbacks run inside `stream_add_callback`.
pub const MODE_PADDLE_2_LAYOUT: u32 = 7;
/// Behaves like Paddle's `custom_cpu`: never writes its stream and event out-parameters, has
/// no `query_stream`, `query_event`, `stream_add_callback` or `synchronize_stream`.
pub const MODE_PADDLE_CUSTOM_CPU: u32 = 8;
/// Loads, but `create_stream` fails with `C_ERROR`.
pub const MODE_FAILING_CREATE_STREAM: u32 = 9;
/// Loads and creates streams, but records, waits, callbacks, copies, queries and synchronize
/// fail with various statuses; allocations above 1 MiB fail with `C_FAILED`.
pub const MODE_FAILING_OPS: u32 = 10;
/// `device_memory_allocate` answers `C_SUCCESS` without writing the pointer.
pub const MODE_UNWRITTEN_ALLOCATION: u32 = 11;
/// `initialize` fails with `C_ERROR`.
pub const MODE_INITIALIZE_FAILS: u32 = 12;
/// `get_device_count` fails with `C_INTERNAL_ERROR`.
pub const MODE_DEVICE_COUNT_FAILS: u32 = 13;
/// `get_device_count` reports 2^40 devices.
pub const MODE_HUGE_DEVICE_COUNT: u32 = 14;
/// `get_device_list` lists device 0 twice.
pub const MODE_DUPLICATE_DEVICE_IDS: u32 = 15;
/// Loads without complaint (it checks no sizes) and registers `faulty_working`: the control
/// case of the synchronous runtime.
pub const MODE_WORKING: u32 = 16;
/// Works, but `stream_add_callback` runs the callback inside the call and answers `C_WARNING`
/// ("an asynchronous interface is actually synchronous").
pub const MODE_INLINE_WARNING: u32 = 17;
/// Works, but `stream_add_callback` queues the callback *and* answers `C_ERROR`; the queued
/// callbacks run when the test calls `devstream_test_plugin_faulty_run_queued()`.
pub const MODE_QUEUED_ERROR: u32 = 18;
/// Works, but `device_memory_allocate` writes a pointer and answers `C_WARNING`.
pub const MODE_ALLOC_WARNING: u32 = 19;
/// Works, but `device_memory_allocate` writes a pointer and answers `C_FAILED`.
pub const MODE_ALLOC_FAILED_WRITTEN: u32 = 20;
/// `initialize` succeeds, `init_device` fails with `C_ERROR`.
pub const MODE_INIT_DEVICE_FAILS: u32 = 21;
/// Works, but `initialize` waits (up to two seconds) for a second `InitPlugin` of the same
/// image to arrive: a host that loads one file twice at once runs `initialize` twice.
pub const MODE_SLOW_INITIALIZE: u32 = 22;
/// Works, but asynchronous copies are queued and run (with the queued callbacks) only when
/// the test calls `devstream_test_plugin_faulty_run_queued()`; `record_event`,
/// `stream_add_callback` and `synchronize_stream` fail. Device and host
/// memory come from `*_memory_allocate`; a queued copy that touches memory freed meanwhile is
/// counted ([`COUNT_STALE_COPIES`]) and skipped, and the first 16 bytes of the last queued
/// copy's source are kept for `devstream_test_plugin_faulty_last_copy`.
pub const MODE_QUEUED_COPIES: u32 = 23;
/// `InitPlugin` fills the table and the device type but never writes a version: a refusal
/// that is not free of effects (a host must not offer it the next layout).
pub const MODE_WRITES_THEN_REFUSES: u32 = 24;
/// A working plug-in built against a 1032-byte "develop" header (the Paddle 3.2 table with
/// `transform_unary` and `transform_binary` in words 122 and 123, where Paddle 3.3 has
/// `cuda_stream_begin_capture` and `cuda_stream_end_captrue`): Paddle's check with 96-byte
/// params and a 1032-byte table, so it also accepts Paddle 3.3's own pair (96, 1128). Its
/// transforms count their calls ([`COUNT_BEYOND_PREFIX_CALLS`]) and fail.
pub const MODE_DEVELOP_LAYOUT: u32 = 25;
/// A working plug-in that checks only `params->size == 96` and fills the Paddle 3.3 table
/// including the graph-capture functions (which count their calls and fail): which table it
/// filled cannot be told, so none of those may be used.
pub const MODE_PARAMS_ONLY_3_3: u32 = 26;
/// A working plug-in that accepts only when both sizes are Paddle 3.2's (96, 1032).
pub const MODE_STRICT_3_2: u32 = 27;
/// Works, but `stream_add_callback` runs the callback twice inside the call (answering
/// `C_SUCCESS`): a plug-in that calls a callback more than once.
pub const MODE_CALLBACK_TWICE_INLINE: u32 = 28;
/// Works, but `stream_add_callback` queues the callback (answering `C_SUCCESS`), and
/// `devstream_test_plugin_faulty_run_queued()` calls each queued callback twice.
pub const MODE_CALLBACK_TWICE_QUEUED: u32 = 29;
/// Works, but asynchronous copies are queued (run by
/// `devstream_test_plugin_faulty_run_queued()`, as in [`MODE_QUEUED_COPIES`]) while
/// `stream_add_callback` runs each callback at once, inside the call (answering `C_SUCCESS`):
/// callbacks come before the stream's earlier copies. Events answer `query_event` with
/// `C_FAILED` (and `synchronize_event` with `C_ERROR`) while copies are queued.
pub const MODE_INLINE_CALLBACKS_QUEUED_COPIES: u32 = 30;
/// A working plug-in that accepts only Paddle 3.3's table (so devstream uses its capture
/// functions), whose `cuda_stream_capture_info` reports the capture begun on a stream with its
/// id the first time and with another id afterwards.
pub const MODE_CAPTURE_ID_CHANGES: u32 = 31;
/// As [`MODE_CAPTURE_ID_CHANGES`], but `cuda_stream_capture_info` reports the same id every
/// time, and `stream_add_callback` queues callbacks (answering `C_SUCCESS`), captured or not:
/// `devstream_test_plugin_faulty_run_queued()` calls them, also after the graph is destroyed.
pub const MODE_CAPTURE_QUEUED_CALLBACKS: u32 = 32;
/// As [`MODE_CAPTURE_ID_CHANGES`], but `cuda_stream_capture_info` reports the capture only the
/// first time and no capture afterwards: a plug-in that loses track of a capture it began.
pub const MODE_CAPTURE_FORGOTTEN: u32 = 33;
/// As [`MODE_CAPTURE_QUEUED_CALLBACKS`] as to the capture id, but `cuda_stream_begin_capture`
/// begins the capture and answers `C_WARNING`, and `stream_add_callback` keeps a callback
/// submitted to a capturing stream in the capture (its graph calls it on every launch and drops
/// it when destroyed, never calling it otherwise) and runs any other one inside the call: a
/// plug-in that did what was asked and answered a failure all the same.
pub const MODE_CAPTURE_BEGUN_WITH_WARNING: u32 = 34;
/// As [`MODE_CAPTURE_BEGUN_WITH_WARNING`], but the first `cuda_stream_end_captrue` of each
/// capture fails with `C_ERROR` (and leaves the capture going); later ones end it.
pub const MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE: u32 = 35;
/// A working plug-in whose `record_event` and `stream_add_callback` first call the hook set with
/// `devstream_test_plugin_faulty_set_reentry_hook` (with [`REENTRY_RECORD_EVENT`] or
/// [`REENTRY_ADD_CALLBACK`]): a plug-in that calls back into its host from inside its functions,
/// as Paddle plug-ins do. Callbacks run inside `stream_add_callback`, after the hook.
pub const MODE_REENTRANT: u32 = 36;
/// A working plug-in without `query_stream` and `query_event` (so devstream answers a stream's
/// `query` by waiting for its work) whose streams have handles of their own,
/// `stream_add_callback` queues callbacks (run by `devstream_test_plugin_faulty_run_queued()`,
/// answering `C_SUCCESS`), and `synchronize_stream` calls the re-entry hook (with
/// [`REENTRY_SYNCHRONIZE_STREAM`]) and then waits until no callback queued on the stream is
/// left: work queued after a callback that runs cannot be done before it returns.
pub const MODE_QUEUED_CALLBACKS_NO_QUERIES: u32 = 37;
/// A working plug-in whose device memory is not host memory: `device_memory_allocate` of more
/// than 1 MiB answers an address of its own ([`ELSEWHERE`]) without allocating anything, as a
/// device with far more memory than the host would (nothing may be copied there).
pub const MODE_DEVICE_MEMORY_ELSEWHERE: u32 = 38;
/// A capture mode (as [`MODE_CAPTURE_QUEUED_CALLBACKS`]) whose `create_stream` answers one
/// handle for every stream, as Paddle's reference plug-ins do with null: a capture on one
/// stream is a capture of all of them.
pub const MODE_CAPTURE_SHARED_STREAMS: u32 = 39;
/// As [`MODE_QUEUED_CALLBACKS_NO_QUERIES`], without asynchronous copies: devstream copies with
/// `memory_copy_*` after `synchronize_stream`, which waits until the stream's queued callbacks
/// ran (a plug-in whose copy waits for the host functions queued before it). Its capture
/// functions are [`MODE_CAPTURE_QUEUED_CALLBACKS`]'s (it accepts only Paddle 3.3's table).
pub const MODE_QUEUED_CALLBACKS_SYNCHRONOUS_COPIES: u32 = 40;
/// The address [`MODE_DEVICE_MEMORY_ELSEWHERE`] answers for large allocations.
pub const ELSEWHERE: usize = 0x7e57_0000_0000;
/// `MODE_MISSING_REQUIRED + i` omits the `i`-th of [`REQUIRED_FUNCTIONS`].
pub const MODE_MISSING_REQUIRED: u32 = 100;

/// The functions Paddle (and devstream) require, in the order `MODE_MISSING_REQUIRED + i` uses.
pub const REQUIRED_FUNCTIONS: [&str; 10] = FunctionField::names(sys::REQUIRED_FUNCTIONS);

/// The device type a mode registers, where it registers one.
pub fn device_type(mode: u32) -> &'static str {
    device_type_c(mode).to_str().unwrap_or("faulty")
}

pub(crate) fn device_type_c(mode: u32) -> &'static CStr {
    match mode {
        MODE_PADDLE_2_LAYOUT => c"faulty_paddle2",
        MODE_PADDLE_CUSTOM_CPU => c"faulty_paddle_cpu",
        MODE_FAILING_CREATE_STREAM => c"faulty_create_stream",
        MODE_FAILING_OPS => c"faulty_ops",
        MODE_UNWRITTEN_ALLOCATION => c"faulty_unwritten",
        MODE_WRITES_BEYOND => c"faulty_beyond",
        MODE_WORKING => c"faulty_working",
        MODE_INLINE_WARNING => c"faulty_inline_warning",
        MODE_QUEUED_ERROR => c"faulty_queued_error",
        MODE_ALLOC_WARNING => c"faulty_alloc_warning",
        MODE_ALLOC_FAILED_WRITTEN => c"faulty_alloc_failed",
        MODE_INIT_DEVICE_FAILS => c"faulty_init_device",
        MODE_SLOW_INITIALIZE => c"faulty_slow_initialize",
        MODE_QUEUED_COPIES => c"faulty_queued_copies",
        MODE_DEVELOP_LAYOUT => c"faulty_develop",
        MODE_PARAMS_ONLY_3_3 => c"faulty_params_only",
        MODE_STRICT_3_2 => c"faulty_strict",
        MODE_CALLBACK_TWICE_INLINE => c"faulty_twice_inline",
        MODE_CALLBACK_TWICE_QUEUED => c"faulty_twice_queued",
        MODE_INLINE_CALLBACKS_QUEUED_COPIES => c"faulty_inline_early",
        MODE_CAPTURE_ID_CHANGES => c"faulty_capture_id",
        MODE_CAPTURE_QUEUED_CALLBACKS => c"faulty_capture_queued",
        MODE_CAPTURE_FORGOTTEN => c"faulty_capture_forgotten",
        MODE_CAPTURE_BEGUN_WITH_WARNING => c"faulty_capture_warning",
        MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE => c"faulty_capture_warning_end",
        MODE_REENTRANT => c"faulty_reentrant",
        MODE_QUEUED_CALLBACKS_NO_QUERIES => c"faulty_no_queries",
        MODE_DEVICE_MEMORY_ELSEWHERE => c"faulty_memory_elsewhere",
        MODE_CAPTURE_SHARED_STREAMS => c"faulty_shared_streams",
        MODE_QUEUED_CALLBACKS_SYNCHRONOUS_COPIES => c"faulty_sync_copies",
        _ => c"faulty",
    }
}

pub(crate) static MODE: AtomicU32 = AtomicU32::new(MODE_REFUSE);
