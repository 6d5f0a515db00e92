//! Dropped streams, events and buffers are released in the plug-in once their work is done,
//! also when they are dropped with work still held behind a flag. (One test per binary: the
//! plug-in's counters are process wide.)

mod common;

use common::*;
use devstream_core::{DeviceBackend, DeviceFlag, DeviceStream, LiveCounts};
use devstream_plugin::PluginBackend;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn everything_dropped_is_released_in_the_plugin() {
    let place = cpu0();
    // Warm up: the default stream and discovery's objects exist before the baseline.
    PluginBackend::default_stream(&place)
        .unwrap()
        .synchronize()
        .unwrap();
    let baseline = plugin_live();
    let counts_before = PluginBackend::live_counts();
    let ran = Arc::new(AtomicUsize::new(0));
    let gate = PluginBackend::new_flag(&place).unwrap();
    for round in 0..20 {
        let a = stream(&place);
        let b = stream(&place);
        let buffer = a.alloc(4096).unwrap();
        let host = a.alloc_host(4096).unwrap();
        a.copy_from_host(&buffer, 0, &[1; 4096]).unwrap();
        if round % 2 == 0 {
            // Held on the host behind the flag while every handle is dropped.
            a.wait_flag(&gate, 1).unwrap();
        }
        a.fill(&buffer, 0, 16, 2).unwrap();
        a.copy_device_to_host(&host, 0, &buffer, 0, 4096).unwrap();
        let event = a.record_event().unwrap();
        b.wait_event(&event).unwrap();
        let ran = ran.clone();
        b.launch_host_func(Box::new(move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    }
    // Held work keeps its streams alive (counted) until it has run.
    assert!(PluginBackend::live_counts().streams >= counts_before.streams + 10);
    gate.set(1);
    assert!(
        wait_until(|| ran.load(Ordering::SeqCst) == 20),
        "held work ran"
    );
    assert!(
        wait_until(|| plugin_live() == baseline),
        "plug-in objects leaked: {:?} live, {baseline:?} before",
        plugin_live()
    );
    assert!(wait_until(|| PluginBackend::live_counts() == counts_before));
    assert_eq!(counts_before, LiveCounts::default());
}
