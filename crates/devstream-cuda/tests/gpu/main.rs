//! The CUDA backend on a real GPU. Each test skips (with a message) where no CUDA device is
//! present, unless `DEVSTREAM_REQUIRE` lists `cuda`: then a missing device fails the test, so a
//! GPU run can never pass by skipping.
//!
//! Gating is deterministic: streams wait on a [`CudaFlag`] the test opens, never on sleeps.

use devstream_core::{
    CaptureMode, DeviceBackend, DeviceBuffer, DeviceEvent, DeviceFlag, DeviceGraph, DeviceStream,
    Error, EventFlags, HostBuffer, Priority, StreamOptions,
};
use devstream_cuda::{
    ptx, AccessPolicyWindow, AccessProperty, CaptureStatus, CudaBackend, CudaCaptureModeGuard,
    CudaEvent, CudaEventExt, CudaGraphDef, CudaManagedBuffer, CudaModule, CudaStream,
    CudaStreamExt, KernelArg, LaunchConfig, MemAttach, StreamAttribute, StreamAttributeId,
    StreamKind, SyncPolicy,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod capture_lifecycle;
#[path = "../common/mod.rs"]
mod common;
mod completions;
use common::{gated, gpu, launch_counting, or_skip, stream};

#[test]
fn capabilities_and_priorities() {
    let (place, _serial) = or_skip!(gpu());
    let caps = CudaBackend::capabilities(&place).unwrap();
    eprintln!("capabilities of {place}: {caps:?}");
    assert!(caps.concurrent_streams && caps.timing && caps.host_funcs);
    assert_eq!(caps.capture, devstream_core::CaptureSupport::Native);
    let range = CudaBackend::priority_range(&place).unwrap();
    eprintln!("priority range {range:?}");
    let high =
        CudaBackend::new_stream(&place, StreamOptions::default().priority(Priority::High)).unwrap();
    assert_eq!(high.native_priority(), range.greatest);
    assert_eq!(high.priority(), Priority::High);
    let clamped = CudaBackend::new_stream(
        &place,
        StreamOptions::default().priority(Priority::Native(-100)),
    )
    .unwrap();
    assert_eq!(clamped.native_priority(), range.greatest);
    let normal = stream(&place);
    assert_eq!(normal.priority(), Priority::Normal);
    assert!(normal.is_non_blocking());
    let blocking =
        CudaBackend::new_stream(&place, StreamOptions::default().blocking(true)).unwrap();
    assert!(!blocking.is_non_blocking());
    assert_eq!(blocking.native_flags().unwrap() & 1, 0);
    assert_eq!(normal.native_flags().unwrap() & 1, 1);
    // The priority devstream reports is the one the driver holds (asked of the driver).
    for s in [&high, &clamped, &normal, &blocking] {
        assert_eq!(
            s.attribute(StreamAttributeId::Priority).unwrap(),
            StreamAttribute::Priority(s.native_priority()),
            "{s:?}"
        );
    }
    assert_eq!(high.native_priority(), range.greatest);
    assert_ne!(normal, high);
    assert_eq!(normal.clone(), normal);
}

#[test]
fn flag_gates_streams_and_query_sees_it() {
    let (place, _serial) = or_skip!(gpu());
    let (s, flag) = gated(&place);
    let other = stream(&place);
    let e = s.record_event().unwrap();
    assert!(!s.query().unwrap(), "gated stream must not be done");
    assert!(!e.query().unwrap());
    other.wait_event(&e).unwrap();
    let ran = launch_counting(&other);
    let later = stream(&place);
    later.wait_stream(&other).unwrap();
    let done = later.record_event().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "wait_event must hold later work"
    );
    assert!(!done.query().unwrap());
    flag.set(1);
    done.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(s.query().unwrap() && other.query().unwrap() && e.query().unwrap());
    // write_flag in stream order, seen by the host.
    s.write_flag(&flag, 7).unwrap();
    s.synchronize().unwrap();
    assert_eq!(flag.get(), 7);
}

#[test]
fn never_recorded_event_is_done_and_elapsed_rules() {
    let (place, _serial) = or_skip!(gpu());
    let e = CudaBackend::new_event(&place, EventFlags::default()).unwrap();
    assert!(e.query().unwrap());
    e.synchronize().unwrap();
    let t0 = CudaBackend::new_event(&place, EventFlags::timed()).unwrap();
    let t1 = CudaBackend::new_event(&place, EventFlags::timed()).unwrap();
    assert!(matches!(t0.elapsed(&t1), Err(Error::NotRecorded)));
    assert!(matches!(e.elapsed(&t1), Err(Error::TimingDisabled)));
    let s = stream(&place);
    let module = ptx::load(&place).unwrap();
    let spin = module.function("spin").unwrap();
    s.record(&t0).unwrap();
    // SAFETY: `spin` takes one u64.
    unsafe {
        s.launch_kernel(
            &spin,
            LaunchConfig::for_elements(1, 1),
            &[KernelArg::U64(20_000_000)],
        )
    }
    .unwrap();
    s.record(&t1).unwrap();
    s.synchronize().unwrap();
    let dt = t0.elapsed(&t1).unwrap();
    eprintln!("spin of 2e7 cycles took {dt:?}");
    assert!(dt > Duration::from_micros(100));
    // Interprocess events cannot be timed.
    assert!(CudaBackend::new_event(
        &place,
        EventFlags {
            interprocess: true,
            timing: true,
            blocking_sync: false
        }
    )
    .is_err());
    let ipc = CudaBackend::new_event(
        &place,
        EventFlags {
            interprocess: true,
            timing: false,
            blocking_sync: true,
        },
    )
    .unwrap();
    s.record(&ipc).unwrap();
    ipc.synchronize().unwrap();
}

#[test]
fn host_function_panic_is_reported_once_by_synchronize() {
    let (place, _serial) = or_skip!(gpu());
    let s = stream(&place);
    s.launch_host_func(Box::new(|| panic!("boom in a host function")))
        .unwrap();
    let after = launch_counting(&s);
    match s.synchronize() {
        Err(Error::HostFuncPanicked { stream, message }) => {
            assert_eq!(stream, s.id());
            assert!(message.contains("boom"), "{message}");
        }
        other => panic!("expected HostFuncPanicked, got {other:?}"),
    }
    assert_eq!(after.load(Ordering::SeqCst), 1, "later work still ran");
    s.synchronize().unwrap();
}

/// More host functions in flight than a stream has reusable slots, in order, with the stream
/// dropped while they are still held back: every one runs exactly once, in submission order,
/// and their closures are dropped.
#[test]
fn host_functions_beyond_the_slots_run_in_order_after_the_stream_is_dropped() {
    let (place, _serial) = or_skip!(gpu());
    let (s, flag) = gated(&place);
    let log = Arc::new(Mutex::new(Vec::new()));
    let token = Arc::new(());
    for i in 0..100 {
        let (log, token) = (log.clone(), token.clone());
        s.launch_host_func(Box::new(move || {
            let _ = &token;
            log.lock().unwrap().push(i);
        }))
        .unwrap();
    }
    let done = CudaBackend::new_event(&place, EventFlags::default()).unwrap();
    s.record(&done).unwrap();
    drop(s);
    assert!(log.lock().unwrap().is_empty(), "held back by the flag");
    flag.set(1);
    done.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), (0..100).collect::<Vec<_>>());
    // The closures are dropped after they run (the last trampoline may still be returning).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while Arc::strong_count(&token) > 1 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(Arc::strong_count(&token), 1, "every closure was dropped");
    // A new stream still launches host functions normally (the old ring is released later).
    let again = stream(&place);
    let ran = launch_counting(&again);
    again.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn capture_in_every_mode_replays_on_any_stream_every_time() {
    let (place, _serial) = or_skip!(gpu());
    let module = ptx::load(&place).unwrap();
    let affine = module.function("affine_u32").unwrap();
    for mode in [
        CaptureMode::Global,
        CaptureMode::ThreadLocal,
        CaptureMode::Relaxed,
    ] {
        let s = stream(&place);
        let buf = s.alloc(4 * 256).unwrap();
        s.fill(&buf, 0, 4 * 256, 0).unwrap();
        s.synchronize().unwrap();
        s.begin_capture(mode).unwrap();
        assert!(s.is_capturing().unwrap());
        let count = launch_counting(&s);
        // SAFETY: affine_u32(data, n, mul, add) within 256 elements.
        unsafe {
            s.launch_kernel(
                &affine,
                LaunchConfig::for_elements(256, 128),
                &[
                    KernelArg::Buffer(&buf),
                    KernelArg::U32(256),
                    KernelArg::U32(1),
                    KernelArg::U32(1),
                ],
            )
        }
        .unwrap();
        let graph = s.end_capture().unwrap();
        assert!(!s.is_capturing().unwrap());
        assert_eq!(graph.node_count().unwrap(), 2);
        assert_eq!(
            count.load(Ordering::SeqCst),
            0,
            "captured work must not run"
        );
        let other = stream(&place);
        for _ in 0..3 {
            graph.launch(&other).unwrap();
        }
        graph.launch(&s).unwrap();
        other.synchronize().unwrap();
        s.synchronize().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 4, "{mode:?}");
        let host = s.alloc_host(4 * 256).unwrap();
        s.copy_device_to_host(&host, 0, &buf, 0, 4 * 256).unwrap();
        let bytes = host.to_vec().unwrap();
        assert!(bytes
            .chunks(4)
            .all(|c| u32::from_le_bytes(c.try_into().unwrap()) == 4));
    }
}

#[test]
fn captured_host_function_on_a_forked_stream_belongs_to_the_graph() {
    let (place, _serial) = or_skip!(gpu());
    let origin = stream(&place);
    let side = stream(&place);
    let count = Arc::new(AtomicUsize::new(0));
    origin.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let fork = origin.record_event().unwrap();
    side.wait_event(&fork).unwrap();
    assert!(side.is_capturing().unwrap(), "side joined the capture");
    let c = count.clone();
    side.launch_host_func(Box::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    origin.wait_stream(&side).unwrap();
    let graph = origin.end_capture().unwrap();
    for _ in 0..2 {
        graph.launch(&origin).unwrap();
    }
    origin.synchronize().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[test]
fn capture_rules() {
    let (place, _serial) = or_skip!(gpu());
    let legacy = CudaBackend::default_stream(&place).unwrap();
    assert_eq!(legacy.kind(), StreamKind::Legacy);
    assert!(matches!(
        legacy.begin_capture(CaptureMode::Relaxed),
        Err(Error::Capture { .. })
    ));
    let s = stream(&place);
    assert!(matches!(s.end_capture(), Err(Error::Capture { .. })));
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(matches!(s.query(), Err(Error::Capture { .. })));
    assert!(matches!(s.end_capture(), Err(Error::Capture { .. })));
    // The stream stays usable.
    assert!(!s.is_capturing().unwrap());
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(s.synchronize(), Err(Error::Capture { .. })));
    assert!(s.end_capture().is_err());
    s.synchronize().unwrap();
    // A pageable copy cannot be captured.
    let buf = s.alloc(16).unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    assert!(matches!(
        s.copy_from_host(&buf, 0, &[1; 16]),
        Err(Error::Capture { .. })
    ));
    let g = s.end_capture().unwrap();
    g.launch(&s).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn buffers_copies_and_fill() {
    let (place, _serial) = or_skip!(gpu());
    let s = stream(&place);
    let n = 1 << 20;
    let a = s.alloc(n).unwrap();
    let b = s.alloc(n).unwrap();
    assert_eq!(a.len(), n);
    assert_eq!(
        a.is_stream_ordered(),
        CudaBackend::capabilities(&place)
            .unwrap()
            .stream_ordered_alloc
    );
    let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    s.copy_from_host(&a, 0, &data).unwrap();
    s.copy_device_to_device(&b, 0, &a, 0, n).unwrap();
    s.fill(&b, 10, 20, 0xAB).unwrap();
    let host = s.alloc_host(n).unwrap();
    s.copy_device_to_host(&host, 0, &b, 0, n).unwrap();
    let back = host.to_vec().unwrap(); // waits for the copy
    let mut expected = data.clone();
    expected[10..30].fill(0xAB);
    assert_eq!(back, expected);
    // host -> device from pinned memory, on another stream (the buffer is used on two streams).
    let t = stream(&place);
    host.write(0, &[9; 64]).unwrap();
    t.wait_stream(&s).unwrap();
    t.copy_host_to_device(&a, 0, &host, 0, 64).unwrap();
    t.copy_device_to_host(&host, 64, &a, 0, 64).unwrap();
    let mut out = [0u8; 64];
    host.read(64, &mut out).unwrap();
    assert_eq!(out, [9; 64]);
    // Out-of-range and cross-device arguments are typed errors.
    assert!(matches!(
        s.fill(&a, n - 1, 2, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.copy_device_to_host(&host, n, &a, 0, 1),
        Err(Error::InvalidArgument(_))
    ));
    let empty = s.alloc(0).unwrap();
    assert!(empty.is_empty());
    s.synchronize().unwrap();
    t.synchronize().unwrap();
}

#[test]
fn dropping_buffers_with_queued_work_defers_the_free() {
    let (place, _serial) = or_skip!(gpu());
    let (s, flag) = gated(&place);
    let other = stream(&place);
    let buf = s.alloc(1 << 16).unwrap();
    s.fill(&buf, 0, 1 << 16, 1).unwrap();
    other.wait_stream(&s).unwrap();
    other.fill(&buf, 0, 1 << 16, 2).unwrap();
    let host = s.alloc_host(1 << 16).unwrap();
    other
        .copy_device_to_host(&host, 0, &buf, 0, 1 << 16)
        .unwrap();
    drop(buf); // both streams still have queued work on it
    let flag_copy = flag.clone();
    drop(flag); // the stream is still waiting on it
    std::thread::sleep(Duration::from_millis(10));
    flag_copy.set(1);
    other.synchronize().unwrap();
    assert!(host.to_vec().unwrap().iter().all(|&b| b == 2));
    drop(host);
    s.synchronize().unwrap();
}

#[test]
fn sum_kernel_from_ptx() {
    let (place, _serial) = or_skip!(gpu());
    let s = stream(&place);
    let module = CudaModule::load(&place, ptx::KERNELS.as_bytes()).unwrap();
    let sum = module.function("sum_u32").unwrap();
    assert!(module.function("no_such_kernel").is_err());
    let values: Vec<u32> = (0..1000).collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let input = s.alloc(bytes.len()).unwrap();
    let output = s.alloc(4).unwrap();
    s.copy_from_host(&input, 0, &bytes).unwrap();
    s.fill(&output, 0, 4, 0).unwrap();
    // SAFETY: sum_u32(input, output, n) with n elements in `input`.
    unsafe {
        s.launch_kernel(
            &sum,
            LaunchConfig::for_elements(1000, 256),
            &[
                KernelArg::Buffer(&input),
                KernelArg::Buffer(&output),
                KernelArg::U32(1000),
            ],
        )
    }
    .unwrap();
    let host = s.alloc_host(4).unwrap();
    s.copy_device_to_host(&host, 0, &output, 0, 4).unwrap();
    let total = u32::from_le_bytes(host.to_vec().unwrap().try_into().unwrap());
    assert_eq!(total, 999 * 1000 / 2);
}

#[test]
fn default_and_per_thread_streams() {
    let (place, _serial) = or_skip!(gpu());
    let legacy = CudaBackend::default_stream(&place).unwrap();
    assert_eq!(legacy, CudaBackend::default_stream(&place).unwrap());
    assert!(!legacy.is_non_blocking());
    assert!(legacy.as_raw().is_null());
    let per_thread = CudaBackend::per_thread_stream(&place).unwrap();
    assert_eq!(per_thread.kind(), StreamKind::PerThread);
    let e = legacy.record_event().unwrap();
    per_thread.wait_event(&e).unwrap();
    per_thread.synchronize().unwrap();
    legacy.synchronize().unwrap();
    assert!(legacy.query().unwrap());
    // From another thread (whose current context is not set up): still works.
    let place2 = place.clone();
    std::thread::spawn(move || {
        let legacy = CudaBackend::default_stream(&place2).unwrap();
        let pt = CudaBackend::per_thread_stream(&place2).unwrap();
        let buf = legacy.alloc(64).unwrap();
        legacy.fill(&buf, 0, 64, 3).unwrap();
        pt.wait_stream(&legacy).unwrap();
        pt.synchronize().unwrap();
    })
    .join()
    .unwrap();
}

/// The native handle a stream's `Debug` shows (reading it there does not hand it out, which
/// `raw_handle` would: a handed-out stream is never reused).
fn shown_raw(s: &CudaStream) -> String {
    let shown = format!("{s:?}");
    let at = shown.find("raw: ").expect("Debug shows the raw handle");
    shown[at..].split(')').next().unwrap_or_default().to_owned()
}

#[test]
fn dropped_streams_are_reused_only_when_idle_and_never_handed_out() {
    let (place, _serial) = or_skip!(gpu());
    // Idle and never handed out: the next new stream of the same flags and priority gets its
    // native stream (no cuStreamCreate) and works like a new one.
    let a = stream(&place);
    a.record_event().unwrap();
    a.synchronize().unwrap();
    let kept = shown_raw(&a);
    drop(a);
    let b = stream(&place);
    assert_eq!(
        shown_raw(&b),
        kept,
        "the idle stream's native stream is reused"
    );
    assert!(b.is_non_blocking() && b.priority() == Priority::Normal);
    assert_eq!(b.native_flags().unwrap() & 1, 1);
    let e = b.record_event().unwrap();
    b.synchronize().unwrap();
    assert!(e.query().unwrap() && b.query().unwrap());
    // Another priority never takes it: the high-priority stream stays in the pool, so no
    // stream made meanwhile can have its handle.
    let high =
        CudaBackend::new_stream(&place, StreamOptions::default().priority(Priority::High)).unwrap();
    let high_raw = shown_raw(&high);
    drop(high);
    let normal = stream(&place);
    assert_ne!(shown_raw(&normal), high_raw);
    assert_eq!(normal.priority(), Priority::Normal);
    // Its unique id seen (or its handle handed out): never reused, so no later stream shows
    // the same id.
    let seen = stream(&place);
    let id = seen.native_id().unwrap();
    seen.synchronize().unwrap();
    drop(seen);
    let after = stream(&place);
    assert_ne!(
        after.native_id().unwrap(),
        id,
        "a stream whose id was seen is not reused"
    );
    let handed = stream(&place);
    let handed_id = handed.native_id().unwrap();
    let _ = handed.raw_handle();
    drop(handed);
    assert_ne!(stream(&place).native_id().unwrap(), handed_id);
    // Busy when dropped: its work is not inherited. If the next stream were the gated one,
    // its event would never complete while the flag is closed.
    let (gated_stream, flag) = gated(&place);
    drop(gated_stream);
    let fresh = stream(&place);
    let done = fresh.record_event().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done.query().unwrap() {
        assert!(
            std::time::Instant::now() < deadline,
            "a new stream waits for a dropped busy stream's work"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    flag.set(1);
}

#[test]
fn stream_management_extras() {
    let (place, _serial) = or_skip!(gpu());
    let s = stream(&place);
    // Attributes: L2 access-policy window, sync policy, copy to another stream.
    let buf = s.alloc(1 << 20).unwrap();
    let window = AccessPolicyWindow {
        base_ptr: buf.device_ptr(),
        num_bytes: 1 << 20,
        hit_ratio: 0.6,
        hit_prop: AccessProperty::Persisting,
        miss_prop: AccessProperty::Streaming,
    };
    s.set_attribute(StreamAttribute::AccessPolicyWindow(window))
        .unwrap();
    match s.attribute(StreamAttributeId::AccessPolicyWindow).unwrap() {
        StreamAttribute::AccessPolicyWindow(w) => {
            assert_eq!(w.base_ptr, window.base_ptr);
            assert_eq!(w.num_bytes, window.num_bytes);
            assert_eq!(w.hit_prop, AccessProperty::Persisting);
        }
        other => panic!("{other:?}"),
    }
    s.set_attribute(StreamAttribute::SyncPolicy(SyncPolicy::BlockingSync))
        .unwrap();
    let t = stream(&place);
    t.copy_attributes_from(&s).unwrap();
    assert_eq!(
        t.attribute(StreamAttributeId::SyncPolicy).unwrap(),
        StreamAttribute::SyncPolicy(SyncPolicy::BlockingSync)
    );
    s.reset_persisting_l2_cache().unwrap();
    // flags / id / device
    assert_eq!(s.native_flags().unwrap() & 1, 1);
    assert_ne!(s.native_id().unwrap(), t.native_id().unwrap());
    match s.native_device() {
        Ok(d) => assert_eq!(d, 0),
        Err(Error::Unsupported { .. }) => eprintln!("cuStreamGetDevice not in this driver"),
        Err(e) => panic!("{e}"),
    }
    // add_callback receives the stream's status.
    let (tx, rx) = std::sync::mpsc::channel();
    s.add_callback(move |status| tx.send(status.is_ok()).unwrap())
        .unwrap();
    s.synchronize().unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(5)).unwrap());
    // capture_info and update_capture_dependencies.
    // SAFETY: no other thread touches `s` or its capture (so for every call below).
    let idle = unsafe { s.capture_info() }.unwrap();
    assert_eq!(idle.status, CaptureStatus::None);
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    s.fill(&buf, 0, 16, 1).unwrap();
    // SAFETY: as above.
    let info = unsafe { s.capture_info() }.unwrap();
    assert_eq!(info.status, CaptureStatus::Active);
    assert_ne!(info.id, 0);
    assert!(!info.graph.is_null());
    assert_eq!(info.dependencies.len(), 1);
    // SAFETY: as above.
    unsafe { s.update_capture_dependencies(&[], true) }.unwrap();
    // SAFETY: as above.
    assert!(unsafe { s.capture_info() }.unwrap().dependencies.is_empty());
    // SAFETY: as above.
    unsafe { s.update_capture_dependencies(&info.dependencies, false) }.unwrap();
    s.fill(&buf, 16, 16, 2).unwrap();
    let graph = s.end_capture().unwrap();
    assert_eq!(graph.node_count().unwrap(), 2);
    graph.launch(&s).unwrap();
    // The thread's capture mode, exchanged in a scope.
    {
        let guard = CudaCaptureModeGuard::exchange(&place, CaptureMode::Relaxed).unwrap();
        assert_eq!(guard.previous(), CaptureMode::Global);
        let inner = CudaCaptureModeGuard::exchange(&place, CaptureMode::ThreadLocal).unwrap();
        assert_eq!(inner.previous(), CaptureMode::Relaxed);
    }
    let check = CudaCaptureModeGuard::exchange(&place, CaptureMode::Global).unwrap();
    assert_eq!(check.previous(), CaptureMode::Global);
    drop(check);
    // Capture into an existing graph, twice.
    let def = CudaGraphDef::new(&place).unwrap();
    match s.begin_capture_to_graph(&def, &[], CaptureMode::Relaxed) {
        Ok(()) => {
            s.fill(&buf, 0, 8, 5).unwrap();
            let first = s.end_capture().unwrap();
            assert_eq!(def.node_count().unwrap(), 1);
            first.launch(&t).unwrap();
            t.synchronize().unwrap();
        }
        Err(Error::Unsupported { .. }) => eprintln!("capture-to-graph not in this driver"),
        Err(e) => panic!("{e}"),
    }
    // Managed memory attached to one stream.
    let caps_managed = CudaManagedBuffer::new(&place, 4096);
    match caps_managed {
        Ok(managed) => {
            s.attach_managed(&managed, MemAttach::Single).unwrap();
            s.synchronize().unwrap();
        }
        Err(Error::Unsupported { .. }) => eprintln!("no managed memory"),
        Err(e) => panic!("{e}"),
    }
    s.synchronize().unwrap();
}

#[test]
fn graph_dropped_while_queued_still_runs_its_host_function() {
    let (place, _serial) = or_skip!(gpu());
    let s = stream(&place);
    s.begin_capture(CaptureMode::Global).unwrap();
    let count = launch_counting(&s);
    let graph = s.end_capture().unwrap();
    let (gate, flag) = gated(&place);
    graph.launch(&gate).unwrap();
    drop(graph);
    flag.set(1);
    gate.synchronize().unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn interop_with_cudarc_and_raw_handles() {
    let (place, _serial) = or_skip!(gpu());
    let ctx = cudarc_context();
    let theirs = ctx.new_stream().unwrap();
    let ours = CudaStream::from_cudarc(theirs.clone()).unwrap();
    assert_eq!(ours.as_raw(), theirs.cu_stream());
    assert_eq!(ours.kind(), StreamKind::Borrowed);
    let e = ours.record_event().unwrap();
    e.synchronize().unwrap();
    // SAFETY: the stream is alive (held by `theirs`) and belongs to device 0's primary context.
    let wrapped = unsafe { CudaStream::from_raw(theirs.cu_stream(), 0) }.unwrap();
    wrapped.wait_event(&e).unwrap();
    wrapped.synchronize().unwrap();
    // SAFETY: our event outlives the wrapper.
    let ev = unsafe { CudaEvent::from_raw(e.as_raw(), 0, EventFlags::default()) }.unwrap();
    assert!(ev.query().unwrap());
    drop(ours);
    drop(wrapped);
    theirs.synchronize().unwrap();
    let _ = place;
}

fn cudarc_context() -> Arc<cudarc::driver::CudaContext> {
    cudarc::driver::CudaContext::new(0).unwrap()
}

#[test]
fn multi_device_cross_wait() {
    let (_, _serial) = or_skip!(gpu());
    let places = CudaBackend::places();
    if places.len() < 2 {
        eprintln!("skipped: one CUDA device");
        return;
    }
    let caps = CudaBackend::capabilities(&places[1]).unwrap();
    assert!(caps.cross_device_wait);
    let (a, flag) = gated(&places[0]);
    let e = a.record_event().unwrap();
    let b = stream(&places[1]);
    b.wait_event(&e).unwrap();
    let done = b.record_event().unwrap();
    assert!(!done.query().unwrap());
    flag.set(1);
    done.synchronize().unwrap();
    // Recording a device-0 event on a device-1 stream is a place mismatch.
    assert!(matches!(b.record(&e), Err(Error::PlaceMismatch { .. })));
}

#[test]
fn last_handles_dropped_inside_a_host_function_do_not_deadlock() {
    let (place, _serial) = or_skip!(gpu());
    let s = stream(&place);
    for _ in 0..8 {
        let inner = stream(&place);
        let buf = inner.alloc(4096).unwrap();
        inner.fill(&buf, 0, 4096, 1).unwrap();
        let event = inner.record_event().unwrap();
        let flag = CudaBackend::new_flag(&place).unwrap();
        let module = ptx::load(&place).unwrap();
        // The closure holds the last handles: they drop on the runtime's callback thread.
        s.launch_host_func(Box::new({
            let mut held = Some((inner, buf, event, flag, module));
            move || drop(held.take())
        }))
        .unwrap();
    }
    s.synchronize().unwrap();
    s.synchronize().unwrap();
}

#[test]
fn flag_comparison_is_unsigned_over_the_whole_u32_range() {
    let (place, _serial) = or_skip!(gpu());
    let s = stream(&place);
    let flag = CudaBackend::new_flag(&place).unwrap();
    s.wait_flag(&flag, 1).unwrap();
    s.wait_flag(&flag, 0x8000_0001).unwrap();
    let done = s.record_event().unwrap();
    std::thread::sleep(Duration::from_millis(10));
    assert!(!done.query().unwrap());
    flag.set(u32::MAX); // ≥ both, although cyclically "behind" 1
    done.synchronize().unwrap();
    assert_eq!(flag.get(), u32::MAX);
    s.write_flag(&flag, 3).unwrap();
    s.synchronize().unwrap();
    assert_eq!(flag.get(), 3);
}
