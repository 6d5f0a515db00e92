//! Plug-in specifics beyond the shared conformance suite: host-side flag gating (deferred work,
//! chains of deferred records and waits), host-buffer reads that wait only for their copies,
//! adopted raw streams, re-entrant submission from callbacks.

mod common;

use common::*;
use devstream_core::{
    DeviceBackend, DeviceEvent, DeviceFlag, DeviceStream, Error, EventFlags, HostBuffer,
};
use devstream_plugin::{PluginBackend, PluginStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Log = Arc<Mutex<Vec<&'static str>>>;

fn push(stream: &PluginStream, log: &Log, entry: &'static str) {
    let log = log.clone();
    stream
        .launch_host_func(Box::new(move || log.lock().unwrap().push(entry)))
        .unwrap();
}

fn entries(log: &Log) -> Vec<&'static str> {
    log.lock().unwrap().clone()
}

#[test]
fn the_test_plugin_reports_its_capabilities() {
    let caps = PluginBackend::capabilities(&cpu0()).unwrap();
    assert!(caps.host_funcs && caps.flags && caps.nonblocking_query && caps.concurrent_streams);
    assert!(!caps.priorities && !caps.timing && !caps.per_thread_stream);
    // Its Paddle 3.3 table has the graph-capture functions.
    assert_eq!(caps.capture, devstream_core::CaptureSupport::Native);
    assert!(caps.capture_host_funcs);
    let info = devstream_plugin::loaded_plugins()
        .into_iter()
        .find(|p| p.device_type == "custom_cpu")
        .unwrap();
    assert_eq!(info.layout, "Paddle 3.3");
    assert_eq!(info.version, (0, 1, 1));
    assert_eq!(info.places.len(), 2);
    assert!(matches!(
        PluginBackend::new_event(&cpu0(), EventFlags::timed()),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn a_flag_wait_holds_later_work_on_the_host_and_chains_through_events() {
    let place = cpu0();
    let (a, b, c) = (stream(&place), stream(&place), stream(&place));
    assert!(PluginBackend::new_event(&place, EventFlags::default())
        .unwrap()
        .as_raw()
        .is_none());
    let gate = PluginBackend::new_flag(&place).unwrap();
    let log: Log = Arc::default();
    a.wait_flag(&gate, 2).unwrap();
    push(&a, &log, "a");
    let after_a = a.record_event().unwrap();
    assert!(after_a.as_raw().is_some_and(|raw| !raw.is_null()));
    b.wait_event(&after_a).unwrap(); // the record is still held on the host
    push(&b, &log, "b");
    c.wait_stream(&b).unwrap();
    push(&c, &log, "c");
    let done = PluginBackend::new_flag(&place).unwrap();
    c.write_flag(&done, 7).unwrap();
    // The plug-in's streams are free: unrelated work on them runs now.
    let free = stream(&place);
    push(&free, &log, "free");
    free.synchronize().unwrap();
    assert_eq!(entries(&log), vec!["free"]);
    assert!(!a.query().unwrap() && !b.query().unwrap() && !c.query().unwrap());
    assert!(!after_a.query().unwrap());
    gate.set(1);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        entries(&log),
        vec!["free"],
        "1 < 2 must not release the wait"
    );
    gate.set(2);
    c.synchronize().unwrap();
    assert_eq!(entries(&log), vec!["free", "a", "b", "c"]);
    assert_eq!(done.get(), 7);
    assert!(after_a.query().unwrap());
    a.synchronize().unwrap();
}

#[test]
fn a_host_buffer_read_waits_for_its_copies_only() {
    let place = cpu0();
    let s = stream(&place);
    let device = s.alloc(32).unwrap();
    let host = s.alloc_host(32).unwrap();
    s.copy_from_host(&device, 0, &[5; 32]).unwrap();
    s.copy_device_to_host(&host, 0, &device, 0, 32).unwrap();
    // Later work on the stream is gated; the read must not wait for it.
    let gate = PluginBackend::new_flag(&place).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    let log: Log = Arc::default();
    push(&s, &log, "gated");
    assert_eq!(host.to_vec().unwrap(), vec![5; 32]);
    assert!(entries(&log).is_empty());
    gate.set(1);
    s.synchronize().unwrap();
    assert_eq!(entries(&log), vec!["gated"]);
}

#[test]
fn an_adopted_raw_stream_shares_the_plugin_queue() {
    let place = cpu0();
    let owner = stream(&place);
    let raw = owner.as_raw().unwrap();
    assert!(!raw.is_null());
    // SAFETY: `owner` keeps the plug-in stream alive for the whole test.
    let adopted = unsafe { PluginStream::from_raw(&place, raw) }.unwrap();
    assert_ne!(
        adopted, owner,
        "a separate devstream stream over the same plug-in stream"
    );
    let log: Log = Arc::default();
    push(&owner, &log, "owner");
    push(&adopted, &log, "adopted");
    adopted.synchronize().unwrap();
    assert_eq!(entries(&log), vec!["owner", "adopted"]);
    drop(adopted);
    push(&owner, &log, "still alive");
    owner.synchronize().unwrap();
}

#[test]
fn host_functions_may_submit_to_their_own_stream() {
    let place = cpu0();
    let s = stream(&place);
    let log: Log = Arc::default();
    let (inner, inner_log) = (s.clone(), log.clone());
    s.launch_host_func(Box::new(move || {
        inner_log.lock().unwrap().push("outer");
        push(&inner, &inner_log, "inner");
    }))
    .unwrap();
    s.synchronize().unwrap();
    // The inner function was submitted while the outer ran, so synchronize may return first.
    assert!(wait_until(|| entries(&log) == vec!["outer", "inner"]));
}

#[test]
fn errors_of_deferred_work_reach_synchronize() {
    let place = cpu0();
    let s = stream(&place);
    let gate = PluginBackend::new_flag(&place).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.launch_host_func(Box::new(|| panic!("deferred panic")))
        .unwrap();
    gate.set(1);
    assert_host_func_panicked(s.synchronize(), s.id(), "deferred panic");
}

#[test]
fn mixing_places_is_refused() {
    let here = stream(&cpu0());
    let other_place = "custom_cpu:1".parse().unwrap();
    let there = stream(&other_place);
    let event = there.record_event().unwrap();
    assert!(matches!(
        here.wait_event(&event),
        Err(Error::Unsupported {
            op: "wait_event",
            ..
        })
    ));
    assert!(matches!(
        here.wait_stream(&there),
        Err(Error::Unsupported {
            op: "wait_stream",
            ..
        })
    ));
    assert!(matches!(
        here.record(&event),
        Err(Error::PlaceMismatch { .. })
    ));
    let buffer = there.alloc(8).unwrap();
    assert!(matches!(
        here.fill(&buffer, 0, 8, 1),
        Err(Error::PlaceMismatch { .. })
    ));
    let flag = PluginBackend::new_flag(&other_place).unwrap();
    assert!(matches!(
        here.wait_flag(&flag, 1),
        Err(Error::PlaceMismatch { .. })
    ));
    let own = here.alloc(8).unwrap();
    assert!(matches!(
        here.fill(&own, 4, 5, 1),
        Err(Error::InvalidArgument(_))
    ));
    there.synchronize().unwrap();
}
