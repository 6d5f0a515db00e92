//! Crate tests of wgpu specifics (run on lavapipe in CI and on the GPU machine's adapter).

use crate::*;
use devstream_core::{
    CaptureMode, DeviceBackend, DeviceEvent, DeviceFlag, DeviceGraph, DeviceStream, Error,
    EventFlags, HostBuffer, Place, StreamOptions,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// A stream on wgpu:0, or `None` when no adapter is present and wgpu is not required.
fn stream() -> Option<WgpuStream> {
    match WgpuBackend::new_stream(&Place::Wgpu(0), StreamOptions::default()) {
        Ok(s) => Some(s),
        Err(e) => {
            let required = std::env::var("DEVSTREAM_REQUIRE")
                .unwrap_or_default()
                .split(',')
                .any(|b| b.trim() == "wgpu");
            assert!(
                !required,
                "DEVSTREAM_REQUIRE names wgpu but wgpu:0 failed: {e}"
            );
            eprintln!("skipping: no wgpu adapter ({e})");
            None
        }
    }
}

macro_rules! stream_or_skip {
    () => {
        match stream() {
            Some(s) => s,
            None => return,
        }
    };
}

#[test]
fn smoke_fill_and_read_back() {
    let s = stream_or_skip!();
    eprintln!(
        "adapters: {:?}",
        adapters()
            .iter()
            .map(|a| (&a.info.name, a.info.backend))
            .collect::<Vec<_>>()
    );
    let b = s.alloc(64).unwrap();
    s.fill(&b, 0, 64, 7).unwrap();
    let h = s.alloc_host(64).unwrap();
    s.copy_device_to_host(&h, 0, &b, 0, 64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(h.to_vec().unwrap(), vec![7u8; 64]);
}
