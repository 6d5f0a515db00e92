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
    // Every constructor and place query, with its answer.
    let answers = [
        ("probe", WgpuBackend::probe()),
        ("capabilities", WgpuBackend::capabilities(&place).map(drop)),
        (
            "priority_range",
            WgpuBackend::priority_range(&place).map(drop),
        ),
        (
            "new_stream",
            WgpuBackend::new_stream(&place, StreamOptions::default()).map(drop),
        ),
        (
            "default_stream",
            WgpuBackend::default_stream(&place).map(drop),
        ),
        (
            "per_thread_stream",
            WgpuBackend::per_thread_stream(&place).map(drop),
        ),
        (
            "new_event",
            WgpuBackend::new_event(&place, EventFlags::default()).map(drop),
        ),
        ("new_flag", WgpuBackend::new_flag(&place).map(drop)),
    ];
    for (call, answer) in answers {
        assert!(
            matches!(
                answer,
                Err(Error::BackendUnavailable {
                    backend: "wgpu",
                    ..
                })
            ),
            "{call}: {answer:?}"
        );
    }
}
