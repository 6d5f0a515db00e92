//! With no plug-in at all (discovery turned off, nothing loaded or registered), the backend
//! answers as its probe does: every call on a custom-device place is `BackendUnavailable`, not
//! `NoDevice` (the conformance check `errors::place_independent_error_paths` with
//! `DEVSTREAM_PLUGIN_PATH= DEVSTREAM_PLACES=cpu` found `Stream::new` answering `NoDevice`).
//!
//! Its own test binary with one test: discovery runs once per process, so the empty
//! `DEVSTREAM_PLUGIN_PATH` must be set before anything else looks for plug-ins.

use devstream_core::{DeviceBackend, Error, Place, StreamOptions};
use devstream_plugin::PluginBackend;

fn unavailable<T: std::fmt::Debug>(what: &str, result: devstream_core::Result<T>) {
    match result {
        Err(Error::BackendUnavailable { backend, .. }) => assert_eq!(backend, "plugin", "{what}"),
        other => panic!("{what}: expected BackendUnavailable as probe says, got {other:?}"),
    }
}

#[test]
fn without_any_plugin_every_custom_place_is_backend_unavailable_as_probe_says() {
    // Set before the first discovery, by the only test of this binary: an empty value turns the
    // build-tree fallback off and names no plug-in.
    std::env::set_var(devstream_plugin::discovery::DEVSTREAM_PLUGIN_PATH, "");
    std::env::remove_var(devstream_plugin::discovery::CUSTOM_DEVICE_ROOT);
    assert_eq!(PluginBackend::places(), Vec::<Place>::new());
    unavailable("probe", PluginBackend::probe());
    for place in [
        Place::custom("custom", 0).unwrap(),
        Place::custom("custom_cpu", 0).unwrap(),
        Place::custom("custom_cpu", 1 << 20).unwrap(),
    ] {
        unavailable(
            &format!("new_stream({place})"),
            PluginBackend::new_stream(&place, StreamOptions::default()),
        );
        unavailable(
            &format!("capabilities({place})"),
            PluginBackend::capabilities(&place),
        );
        unavailable(
            &format!("priority_range({place})"),
            PluginBackend::priority_range(&place),
        );
        unavailable(
            &format!("new_flag({place})"),
            PluginBackend::new_flag(&place),
        );
    }
}
