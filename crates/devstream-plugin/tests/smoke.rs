//! Discovery finds the workspace's test plug-in and a stream on it runs host functions, events,
//! copies and fills.

mod common;

use common::*;
use devstream_core::{DeviceBackend, DeviceEvent, DeviceStream, HostBuffer};
use devstream_plugin::PluginBackend;
use std::sync::{Arc, Mutex};

#[test]
fn the_test_plugin_is_discovered_and_runs_work() {
    let places = PluginBackend::places();
    assert!(
        places.contains(&cpu0()),
        "{places:?} / {:?}",
        devstream_plugin::load_failures()
    );
    let s = stream(&cpu0());
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..10 {
        let log = log.clone();
        s.launch_host_func(Box::new(move || log.lock().unwrap().push(i)))
            .unwrap();
    }
    let e = s.record_event().unwrap();
    s.synchronize().unwrap();
    assert!(e.query().unwrap());
    assert_eq!(*log.lock().unwrap(), (0..10).collect::<Vec<_>>());
    let buf = s.alloc(100).unwrap();
    let host = s.alloc_host(100).unwrap();
    s.copy_from_host(&buf, 0, &[7u8; 100]).unwrap();
    s.fill(&buf, 10, 5, 1).unwrap();
    s.copy_device_to_host(&host, 0, &buf, 0, 100).unwrap();
    let mut expected = vec![7u8; 100];
    expected[10..15].fill(1);
    assert_eq!(host.to_vec().unwrap(), expected);
}
