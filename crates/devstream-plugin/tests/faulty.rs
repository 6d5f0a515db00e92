//! A faulty plug-in yields typed errors, never a crash: loading (library, entry point, layout,
//! version, device type, required functions, device list) and calls that fail.

mod common;

use common::*;
use devstream_core::{
    DeviceBackend, DeviceEvent, DeviceStream, Error, EventFlags, HostBuffer, Place, StreamOptions,
};
use devstream_plugin::{load_plugin, PluginBackend, PluginInfo};
use devstream_test_plugin_faulty as faulty;
use std::sync::Mutex;

/// Selects `mode` in a private copy of the faulty plug-in and loads it through devstream.
fn load_faulty(mode: u32) -> Result<PluginInfo, Error> {
    // Dropping the copy keeps it loaded and removes its file.
    Faulty::new(mode).load()
}

/// Loads a copy of the faulty plug-in in `mode`: refused with `Error::Plugin`, whose reason
/// names every one of `parts`.
fn assert_refused(mode: u32, parts: &[&str]) {
    assert_refused_naming(load_faulty(mode), parts);
}

/// `result` is a refusal with `Error::Plugin`, whose reason names every one of `parts`.
fn assert_refused_naming(result: Result<PluginInfo, Error>, parts: &[&str]) {
    let reason = plugin_reason(result);
    for part in parts {
        assert!(reason.contains(part), "{part:?} not in: {reason}");
    }
}

fn plugin_reason(result: Result<PluginInfo, Error>) -> String {
    match result {
        Err(Error::Plugin { plugin, reason }) => {
            assert!(!plugin.is_empty());
            reason
        }
        other => panic!("expected Error::Plugin, got {other:?}"),
    }
}

fn driver_call<T: std::fmt::Debug>(result: Result<T, Error>) -> &'static str {
    match result {
        Err(Error::Driver {
            backend,
            call,
            message,
            ..
        }) => {
            assert_eq!(backend, "plugin");
            assert!(!message.is_empty());
            call
        }
        other => panic!("expected Error::Driver, got {other:?}"),
    }
}

#[test]
fn a_missing_file_is_a_typed_error() {
    assert_refused_naming(
        load_plugin("/nonexistent/dir/libnothing.so"),
        &["cannot load"],
    );
}

#[test]
fn a_file_that_is_not_a_library_is_a_typed_error() {
    let dir = std::env::temp_dir().join(format!("devstream-plugin-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bogus = dir.join("libbogus.so");
    std::fs::write(&bogus, b"this is not an ELF file").unwrap();
    assert_refused_naming(load_plugin(&bogus), &["cannot load"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(target_os = "linux")]
#[test]
fn a_library_without_init_plugin_is_a_typed_error() {
    assert_refused_naming(load_plugin("libm.so.6"), &["does not export InitPlugin"]);
}

#[test]
fn a_plugin_that_accepts_no_known_layout_is_refused() {
    assert_refused(
        faulty::MODE_REFUSE,
        &[
            "accepted none of the known device_ext.h layouts",
            "96-byte params",
            "88-byte params",
        ],
    );
}

#[test]
fn unsupported_runtime_versions_are_refused() {
    for mode in [faulty::MODE_OLD_VERSION, faulty::MODE_NEWER_MAJOR] {
        assert_refused(mode, &["runtime version", "0.1.1"]);
    }
}

#[test]
fn bad_device_types_are_refused() {
    assert_refused(faulty::MODE_NULL_DEVICE_TYPE, &["device_type null"]);
    assert_refused(faulty::MODE_INVALID_DEVICE_TYPE, &["cannot name a place"]);
}

#[test]
fn a_table_filled_beyond_every_known_layout_is_refused() {
    assert_refused(
        faulty::MODE_WRITES_BEYOND,
        &["newer device_ext.h", "up to byte 200"],
    );
}

#[test]
fn a_plugin_that_replaces_the_table_is_refused() {
    assert_refused(
        faulty::MODE_REPLACES_INTERFACE,
        &["replaced CustomRuntimeParams::interface"],
    );
}

#[test]
fn each_missing_required_function_is_named() {
    for (i, name) in faulty::REQUIRED_FUNCTIONS.iter().enumerate() {
        let reason = plugin_reason(load_faulty(faulty::MODE_MISSING_REQUIRED + i as u32));
        assert!(
            reason.contains("missing required function pointer(s)") && reason.ends_with(name),
            "{name}: {reason}"
        );
    }
}

#[test]
fn failing_initialisation_calls_are_named() {
    assert_eq!(
        driver_call(load_faulty(faulty::MODE_INITIALIZE_FAILS)),
        "initialize"
    );
    assert_eq!(
        driver_call(load_faulty(faulty::MODE_DEVICE_COUNT_FAILS)),
        "get_device_count"
    );
    assert_refused(
        faulty::MODE_HUGE_DEVICE_COUNT,
        &["get_device_count reported"],
    );
    assert_refused(faulty::MODE_DUPLICATE_DEVICE_IDS, &["lists device 0 twice"]);
}

#[test]
fn a_duplicate_device_type_is_refused() {
    // The test plug-in is already registered by discovery.
    assert!(PluginBackend::places().contains(&cpu0()));
    assert_refused_naming(
        load_plugin(built_library("devstream_test_plugin_cpu")),
        &["\"custom_cpu\" is already registered"],
    );
    // A faulty mode that loads can be loaded once only.
    let info = load_faulty(faulty::MODE_WORKING).unwrap();
    assert_eq!(info.device_type, "faulty_working");
    assert_refused(faulty::MODE_WORKING, &["already registered"]);
}

fn place_of(info: &PluginInfo) -> Place {
    info.places[0].clone()
}

#[test]
fn a_paddle_2_plugin_is_detected_and_works() {
    let info = load_faulty(faulty::MODE_PADDLE_2_LAYOUT).unwrap();
    assert_eq!(info.layout, "Paddle 2.6");
    assert_eq!(info.version, (0, 1, 1));
    let place = place_of(&info);
    // Callbacks run inside stream_add_callback (a synchronous plug-in): submitting from a
    // callback to the same stream must not deadlock.
    let stream = PluginBackend::new_stream(&place, StreamOptions::default()).unwrap();
    let log = std::sync::Arc::new(Mutex::new(Vec::new()));
    let (inner_stream, inner_log) = (stream.clone(), log.clone());
    stream
        .launch_host_func(Box::new(move || {
            inner_log.lock().unwrap().push(1);
            let log = inner_log.clone();
            inner_stream
                .launch_host_func(Box::new(move || log.lock().unwrap().push(2)))
                .unwrap();
        }))
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), vec![1, 2]);
    let buffer = stream.alloc(64).unwrap();
    let host = stream.alloc_host(64).unwrap();
    stream.copy_from_host(&buffer, 0, &[3; 64]).unwrap();
    stream
        .copy_device_to_host(&host, 0, &buffer, 0, 64)
        .unwrap();
    stream.synchronize().unwrap();
    assert_eq!(host.to_vec().unwrap(), vec![3; 64]);
}

#[test]
fn a_plugin_like_paddles_custom_cpu_works_with_null_handles() {
    let info = load_faulty(faulty::MODE_PADDLE_CUSTOM_CPU).unwrap();
    let place = place_of(&info);
    let caps = info.capabilities;
    assert!(!caps.host_funcs && !caps.flags && !caps.nonblocking_query);
    assert!(
        !caps.concurrent_streams,
        "a plug-in that never writes its streams has one queue"
    );
    let a = PluginBackend::new_stream(&place, StreamOptions::default()).unwrap();
    let b = PluginBackend::new_stream(&place, StreamOptions::default()).unwrap();
    assert_eq!(a.as_raw(), Some(std::ptr::null_mut()));
    assert_ne!(a, b, "streams are told apart by devstream's ids");
    match a.launch_host_func(Box::new(|| {})) {
        Err(Error::Unsupported { op, place: p }) => {
            assert_eq!((op, p), ("launch_host_func", place.clone()))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        PluginBackend::new_flag(&place),
        Err(Error::Unsupported { .. })
    ));
    let event = a.record_event().unwrap();
    b.wait_event(&event).unwrap();
    b.wait_stream(&a).unwrap();
    assert!(a.query().unwrap(), "query falls back to synchronize");
    assert!(event.query().unwrap());
    event.synchronize().unwrap();
    let buffer = a.alloc(100).unwrap();
    let host = a.alloc_host(100).unwrap();
    a.copy_from_host(&buffer, 0, &[9; 100]).unwrap();
    a.fill(&buffer, 50, 50, 4).unwrap();
    a.copy_device_to_host(&host, 0, &buffer, 0, 100).unwrap();
    a.synchronize().unwrap();
    let mut expected = vec![9; 100];
    expected[50..].fill(4);
    assert_eq!(host.to_vec().unwrap(), expected);
}

#[test]
fn failing_calls_are_typed_errors_naming_the_function() {
    let info = load_faulty(faulty::MODE_FAILING_OPS).unwrap();
    let place = place_of(&info);
    let stream = PluginBackend::new_stream(&place, StreamOptions::default()).unwrap();
    assert_eq!(driver_call(stream.record_event()), "record_event");
    assert_eq!(driver_call(stream.query()), "query_stream");
    assert_eq!(driver_call(stream.synchronize()), "synchronize_stream");
    assert_eq!(
        driver_call(stream.launch_host_func(Box::new(|| {}))),
        "stream_add_callback"
    );
    let flag = PluginBackend::new_flag(&place).unwrap();
    assert_eq!(
        driver_call(stream.write_flag(&flag, 1)),
        "stream_add_callback"
    );
    let other = PluginBackend::new_stream(&place, StreamOptions::default()).unwrap();
    assert_eq!(driver_call(other.wait_stream(&stream)), "record_event");
    let buffer = stream.alloc(64).unwrap();
    assert_eq!(
        driver_call(stream.copy_from_host(&buffer, 0, &[1; 64])),
        "async_memory_copy_h2d"
    );
    match stream.alloc(2 << 20) {
        Err(Error::OutOfMemory {
            place: p, bytes, ..
        }) => {
            assert_eq!((p, bytes), (place.clone(), 2 << 20))
        }
        other => panic!("C_FAILED from device_memory_allocate is OutOfMemory, got {other:?}"),
    }
    // A never-recorded event does not ask the plug-in.
    let event = PluginBackend::new_event(&place, EventFlags::default()).unwrap();
    assert!(event.query().unwrap());
}

#[test]
fn a_failing_create_stream_is_a_typed_error() {
    let info = load_faulty(faulty::MODE_FAILING_CREATE_STREAM).unwrap();
    let place = place_of(&info);
    assert_eq!(
        driver_call(PluginBackend::new_stream(&place, StreamOptions::default())),
        "create_stream"
    );
    assert_eq!(
        driver_call(PluginBackend::default_stream(&place)),
        "create_stream"
    );
}

/// `C_SUCCESS` with no pointer written is exhaustion, as Paddle's `CustomAllocator` reads it.
#[test]
fn an_unwritten_allocation_is_out_of_memory_as_in_paddle() {
    let info = load_faulty(faulty::MODE_UNWRITTEN_ALLOCATION).unwrap();
    let place = place_of(&info);
    let stream = PluginBackend::new_stream(&place, StreamOptions::default()).unwrap();
    match stream.alloc(16) {
        Err(Error::OutOfMemory {
            place: p, bytes, ..
        }) => {
            assert_eq!((p, bytes), (place.clone(), 16));
        }
        other => panic!("C_SUCCESS without a pointer is OutOfMemory, got {other:?}"),
    }
    // Unwritten stream and event handles are legal.
    let event = stream.record_event().unwrap();
    stream.synchronize().unwrap();
    assert!(event.query().unwrap());
}

#[test]
fn unknown_places_are_typed_errors() {
    fn no_device<T>(result: Result<T, Error>) -> bool {
        matches!(result, Err(Error::NoDevice { .. }))
    }
    let nowhere: Place = "no_such_device:0".parse().unwrap();
    assert!(no_device(PluginBackend::new_stream(
        &nowhere,
        StreamOptions::default()
    )));
    let out_of_range: Place = "custom_cpu:7".parse().unwrap();
    assert!(no_device(PluginBackend::capabilities(&out_of_range)));
    assert!(no_device(PluginBackend::default_stream(&out_of_range)));
}
