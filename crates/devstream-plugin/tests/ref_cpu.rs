//! The `ref_cpu` test plug-in: C-style code compiled against the installed PaddlePaddle
//! wheel's own `device_ext.h`, behaving like PaddleCustomDevice's reference `custom_cpu`
//! (null streams and events, synchronous copies, no callbacks or queries). Skipped, saying
//! why, when no header was found at build time, unless `DEVSTREAM_REQUIRE` names `paddle`.

mod common;

use devstream_core::{
    CaptureMode, CaptureSupport, DeviceBackend, DeviceEvent, DeviceStream, Error, HostBuffer,
    Place, StreamOptions,
};
use devstream_plugin::{loaded_plugins, PluginBackend};
use devstream_test_plugin_ref_cpu as ref_cpu;

/// The plug-in's first place, or `None` (with the reason printed) when it was not built.
fn place() -> Option<Place> {
    let place: Place = ref_cpu::first_place_or_skip()?.parse().unwrap();
    // Found by discovery next to the other test plug-ins (so the conformance suite and the
    // examples run on it too).
    if let Err(error) = PluginBackend::capabilities(&place) {
        panic!(
            "ref_cpu was built ({:?}) but discovery did not load it: {error}; failures: {:?}",
            ref_cpu::LIBRARY,
            devstream_plugin::load_failures()
        );
    }
    Some(place)
}

#[test]
fn it_loads_with_the_exact_layout_of_the_header_it_was_built_against() {
    let Some(place) = place() else { return };
    let info = loaded_plugins()
        .into_iter()
        .find(|p| p.device_type == ref_cpu::DEVICE_TYPE)
        .expect("ref_cpu is loaded");
    assert_eq!(info.version, (0, 1, 1));
    assert_eq!(info.places.len(), 2);
    assert!(
        devstream_plugin::sys::KNOWN_LAYOUTS
            .iter()
            .any(|l| l.name == info.layout),
        "a known table, identified exactly (Paddle's own check): {} ({:?})",
        info.layout,
        ref_cpu::HEADER
    );
    let caps = PluginBackend::capabilities(&place).unwrap();
    assert!(
        !caps.host_funcs && !caps.flags && !caps.nonblocking_query,
        "{caps:?}"
    );
    assert!(!caps.concurrent_streams, "null streams: one queue");
    assert_eq!(caps.capture, CaptureSupport::None);
}

#[test]
fn null_streams_and_events_and_synchronous_copies_work() {
    let Some(place) = place() else { return };
    let (a, b) = (
        PluginBackend::new_stream(&place, StreamOptions::default()).unwrap(),
        PluginBackend::new_stream(&place, StreamOptions::default()).unwrap(),
    );
    assert_ne!(a.id(), b.id(), "told apart by devstream ids, not handles");
    assert!(a.as_raw().unwrap().is_null());
    let buffer = a.alloc(256).unwrap();
    let host = a.alloc_host(256).unwrap();
    a.copy_from_host(&buffer, 0, &[5; 256]).unwrap();
    let done = a.record_event().unwrap();
    assert!(done.as_raw().unwrap().is_null());
    b.wait_event(&done).unwrap();
    b.copy_device_to_host(&host, 0, &buffer, 0, 256).unwrap();
    b.synchronize().unwrap();
    assert!(done.query().unwrap());
    assert_eq!(host.to_vec().unwrap(), vec![5; 256]);
    assert!(matches!(
        a.launch_host_func(Box::new(|| {})),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        a.begin_capture(CaptureMode::ThreadLocal),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(a.alloc(1 << 60), Err(Error::OutOfMemory { .. })));
}
