//! With no Vulkan driver to load, nothing panics: no places, and every constructor answers
//! `BackendUnavailable`. (Its own process: the enumeration is made once per process.)

use devstream_core::{DeviceBackend, Error, EventFlags, Place, StreamOptions};
use devstream_wgpu::WgpuBackend;

#[test]
fn no_vulkan_driver_means_no_places_and_typed_errors() {
    // Point the Vulkan loader at a driver list that does not exist, and enumerate Vulkan only.
    std::env::set_var("VK_DRIVER_FILES", "/nonexistent/devstream-no-driver.json");
    std::env::set_var("VK_ICD_FILENAMES", "/nonexistent/devstream-no-driver.json");
    std::env::set_var(devstream_wgpu::BACKENDS_ENV, "vulkan");
    assert!(WgpuBackend::places().is_empty());
    assert!(devstream_wgpu::adapters().is_empty());
    let place = Place::Wgpu(0);
    let unavailable = |e: Error| {
        matches!(
            e,
            Error::BackendUnavailable {
                backend: "wgpu",
                ..
            }
        )
    };
    assert!(unavailable(WgpuBackend::probe().unwrap_err()));
    assert!(unavailable(WgpuBackend::capabilities(&place).unwrap_err()));
    assert!(unavailable(
        WgpuBackend::priority_range(&place).unwrap_err()
    ));
    assert!(unavailable(
        WgpuBackend::new_stream(&place, StreamOptions::default()).unwrap_err()
    ));
    assert!(unavailable(
        WgpuBackend::default_stream(&place).unwrap_err()
    ));
    assert!(unavailable(
        WgpuBackend::per_thread_stream(&place).unwrap_err()
    ));
    assert!(unavailable(
        WgpuBackend::new_event(&place, EventFlags::default()).unwrap_err()
    ));
    assert!(unavailable(WgpuBackend::new_flag(&place).unwrap_err()));
}
