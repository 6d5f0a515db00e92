//! `DEVSTREAM_WGPU_BACKENDS` naming only a backend this build lacks leaves no places and a
//! clear `BackendUnavailable`, never a panic. (Its own process.)

use devstream_core::{DeviceBackend, Error, Place, StreamOptions};
use devstream_wgpu::WgpuBackend;

#[test]
fn a_backend_list_without_compiled_backends_is_unavailable() {
    let absent = if cfg!(target_vendor = "apple") {
        "dx12"
    } else {
        "metal"
    };
    std::env::set_var(devstream_wgpu::BACKENDS_ENV, absent);
    assert!(WgpuBackend::places().is_empty());
    match WgpuBackend::new_stream(&Place::Wgpu(0), StreamOptions::default()) {
        Err(Error::BackendUnavailable { reason, .. }) => {
            assert!(reason.contains(devstream_wgpu::BACKENDS_ENV), "{reason}")
        }
        other => panic!("expected BackendUnavailable, got {other:?}"),
    }
}
