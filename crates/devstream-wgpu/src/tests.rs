//! Crate tests of wgpu specifics. They run on wgpu:0 (lavapipe in CI, the NVIDIA adapter on the
//! GPU machine) and skip only when no adapter exists and `DEVSTREAM_REQUIRE` does not name wgpu.

use crate::*;
use devstream_core::{
    CaptureMode, DeviceBackend, DeviceEvent, DeviceFlag, DeviceGraph, DeviceStream, Error,
    EventFlags, HostBuffer, Place, StreamOptions,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PLACE: Place = Place::Wgpu(0);

/// A stream on wgpu:0, or `None` when no adapter is present and wgpu is not required.
pub(crate) fn stream() -> Option<WgpuStream> {
    match WgpuBackend::new_stream(&PLACE, StreamOptions::default()) {
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

/// Polls `condition` for up to 10 s.
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    condition()
}

fn log() -> (
    Arc<Mutex<Vec<&'static str>>>,
    impl Fn(&'static str) -> HostFn,
) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let task = move |name: &'static str| -> HostFn {
        let l = l.clone();
        Box::new(move || l.lock().unwrap().push(name))
    };
    (log, task)
}

type HostFn = devstream_core::HostFn;

fn read(s: &WgpuStream, b: &WgpuBuffer, offset: usize, len: usize) -> Vec<u8> {
    let h = s.alloc_host(len).unwrap();
    s.copy_device_to_host(&h, 0, b, offset, len).unwrap();
    s.synchronize().unwrap();
    h.to_vec().unwrap()
}

#[test]
fn enumeration_is_deterministic_and_places_match() {
    let _ = stream();
    let first = adapters();
    let again = adapters();
    assert_eq!(first.len(), again.len());
    for (a, b) in first.iter().zip(&again) {
        assert_eq!(a.index, b.index);
        assert_eq!(a.info.name, b.info.name);
    }
    assert_eq!(
        WgpuBackend::places(),
        (0..first.len()).map(Place::Wgpu).collect::<Vec<_>>()
    );
    for entry in &first {
        eprintln!(
            "wgpu:{} = {} ({:?}, {:?}, driver {:?})",
            entry.index,
            entry.info.name,
            entry.info.backend,
            entry.info.device_type,
            entry.info.driver
        );
    }
    let beyond = Place::Wgpu(first.len());
    let err = WgpuBackend::new_stream(&beyond, StreamOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NoDevice { .. } | Error::BackendUnavailable { .. }
        ),
        "{err:?}"
    );
}

#[test]
fn fills_and_copies_of_every_alignment() {
    let s = stream_or_skip!();
    let n = 67;
    let b = s.alloc(n).unwrap();
    let mut expect = vec![0u8; n];
    s.fill(&b, 0, n, 0).unwrap(); // unaligned length, zero
    s.fill(&b, 1, 10, 0xAB).unwrap(); // unaligned start and end
    expect[1..11].fill(0xAB);
    s.fill(&b, 20, 8, 0x11).unwrap(); // aligned, non-zero
    expect[20..28].fill(0x11);
    let data: Vec<u8> = (0..13).collect();
    s.copy_from_host(&b, 30, &data).unwrap(); // unaligned upload
    expect[30..43].copy_from_slice(&data);
    s.copy_from_host(&b, 44, &[9, 8, 7, 6]).unwrap(); // aligned upload
    expect[44..48].copy_from_slice(&[9, 8, 7, 6]);
    let c = s.alloc(n).unwrap();
    s.fill(&c, 0, n, 0x55).unwrap();
    s.copy_device_to_device(&c, 3, &b, 30, 13).unwrap(); // phase-shifted copy
    let mut expect_c = vec![0x55u8; n];
    expect_c[3..16].copy_from_slice(&data);
    s.copy_device_to_device(&b, 50, &b, 1, 7).unwrap(); // within one buffer
    expect[50..57].fill(0xAB);
    assert_eq!(read(&s, &b, 0, n), expect);
    assert_eq!(read(&s, &c, 0, n), expect_c);
    assert_eq!(read(&s, &b, 31, 5), expect[31..36].to_vec()); // unaligned download
}

#[test]
fn ranges_are_checked() {
    let s = stream_or_skip!();
    let b = s.alloc(16).unwrap();
    assert!(matches!(
        s.fill(&b, 10, 8, 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.copy_from_host(&b, 15, &[1, 2]),
        Err(Error::InvalidArgument(_))
    ));
    let h = s.alloc_host(4).unwrap();
    assert!(matches!(
        s.copy_device_to_host(&h, 0, &b, 0, 8),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        h.read(2, &mut [0; 4]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        s.alloc(usize::MAX),
        Err(Error::OutOfMemory { .. })
    ));
}

const DOUBLE: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn double(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&data)) { data[id.x] = data[id.x] * 2u; }
}
"#;

#[test]
fn wgsl_dispatch_in_stream_order() {
    let s = stream_or_skip!();
    let kernel = WgpuKernel::new(&s, DOUBLE, "double").unwrap();
    let words: Vec<u32> = (0..100).collect();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let b = s.alloc(bytes.len()).unwrap();
    s.copy_from_host(&b, 0, &bytes).unwrap();
    s.dispatch(&kernel, &[&b], [2, 1, 1]).unwrap();
    s.dispatch(&kernel, &[&b], [2, 1, 1]).unwrap();
    let out = read(&s, &b, 0, bytes.len());
    let got: Vec<u32> = out
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, words.iter().map(|w| w * 4).collect::<Vec<_>>());
}

#[test]
fn bad_kernels_are_typed_errors() {
    let s = stream_or_skip!();
    let err = WgpuKernel::new(&s, "this is not wgsl", "main").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let err = WgpuKernel::new(&s, DOUBLE, "no_such_entry").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let kernel = WgpuKernel::new(&s, DOUBLE, "double").unwrap();
    let err = s.dispatch(&kernel, &[], [1, 1, 1]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let b = s.alloc(4).unwrap();
    let err = s.dispatch(&kernel, &[&b], [u32::MAX, 1, 1]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    // The stream is still fine.
    s.dispatch(&kernel, &[&b], [1, 1, 1]).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn flag_gates_later_submissions_and_other_streams_waiting_on_them() {
    let s = stream_or_skip!();
    let other = WgpuBackend::new_stream(&PLACE, StreamOptions::default()).unwrap();
    let flag = WgpuBackend::new_flag(&PLACE).unwrap();
    let b = s.alloc(4).unwrap();
    s.fill(&b, 0, 4, 1).unwrap();
    let before = s.record_event().unwrap();
    s.wait_flag(&flag, 2).unwrap();
    s.fill(&b, 0, 4, 2).unwrap();
    let after = s.record_event().unwrap();
    // `other` waits for work that is held back: it must hold its own later work too.
    other.wait_event(&after).unwrap();
    let (log, task) = log();
    other.launch_host_func(task("other")).unwrap();
    assert!(eventually(|| before.query().unwrap()));
    before.synchronize().unwrap();
    flag.set(1); // not enough
    std::thread::sleep(Duration::from_millis(20));
    assert!(!after.query().unwrap());
    assert!(!s.query().unwrap() && !other.query().unwrap());
    assert!(log.lock().unwrap().is_empty());
    flag.set(2);
    other.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["other"]);
    assert!(after.query().unwrap());
    assert_eq!(read(&s, &b, 0, 4), vec![2; 4]);
}

#[test]
fn write_flag_is_stream_ordered() {
    let s = stream_or_skip!();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    let flag = WgpuBackend::new_flag(&PLACE).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.write_flag(&flag, 7).unwrap();
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(flag.get(), 0, "write_flag ran ahead of the gate");
    gate.set(1);
    s.synchronize().unwrap();
    assert_eq!(flag.get(), 7);
    // On an idle stream it is immediate, in order.
    s.write_flag(&flag, 9).unwrap();
    s.synchronize().unwrap();
    assert_eq!(flag.get(), 9);
}

#[test]
fn host_functions_run_in_order_without_polling_and_panics_are_reported() {
    let s = stream_or_skip!();
    let (log, task) = log();
    let b = s.alloc(1 << 16).unwrap();
    s.fill(&b, 0, 1 << 16, 3).unwrap();
    s.launch_host_func(task("a")).unwrap();
    s.fill(&b, 0, 1 << 16, 4).unwrap();
    s.launch_host_func(task("b")).unwrap();
    // Nobody polls: the background poller must run them.
    assert!(eventually(|| log.lock().unwrap().len() == 2));
    assert_eq!(*log.lock().unwrap(), vec!["a", "b"]);
    s.launch_host_func(Box::new(|| panic!("boom"))).unwrap();
    s.launch_host_func(task("after")).unwrap();
    let err = s.synchronize().unwrap_err();
    assert!(
        matches!(&err, Error::HostFuncPanicked { message, .. } if message.contains("boom")),
        "{err:?}"
    );
    assert_eq!(*log.lock().unwrap(), vec!["a", "b", "after"]);
    // Reported once; the stream stays usable.
    s.synchronize().unwrap();
}

#[test]
fn events_and_timing() {
    let s = stream_or_skip!();
    let never = WgpuBackend::new_event(&PLACE, EventFlags::default()).unwrap();
    assert!(never.query().unwrap());
    never.synchronize().unwrap();
    let caps = WgpuBackend::capabilities(&PLACE).unwrap();
    if !caps.timing {
        assert!(matches!(
            WgpuBackend::new_event(&PLACE, EventFlags::timed()),
            Err(Error::Unsupported { .. })
        ));
        return;
    }
    let start = WgpuBackend::new_event(&PLACE, EventFlags::timed()).unwrap();
    let end = WgpuBackend::new_event(&PLACE, EventFlags::timed()).unwrap();
    assert!(matches!(start.elapsed(&end), Err(Error::NotRecorded)));
    assert!(matches!(never.elapsed(&end), Err(Error::TimingDisabled)));
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    s.record(&start).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    let b = s.alloc(1 << 20).unwrap();
    s.fill(&b, 0, 1 << 20, 1).unwrap();
    s.record(&end).unwrap();
    assert!(matches!(start.elapsed(&end), Err(Error::NotReady)));
    gate.set(1);
    end.synchronize().unwrap();
    let elapsed = start.elapsed(&end).unwrap();
    eprintln!("elapsed over a 1 MiB fill: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(10));
    assert!(matches!(
        WgpuBackend::new_event(
            &PLACE,
            EventFlags {
                interprocess: true,
                ..EventFlags::default()
            }
        ),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn host_buffer_round_trip_through_the_host() {
    let s = stream_or_skip!();
    let a = s.alloc(64).unwrap();
    let c = s.alloc(64).unwrap();
    let h = s.alloc_host(64).unwrap();
    s.fill(&a, 0, 64, 0x5A).unwrap();
    s.copy_device_to_host(&h, 0, &a, 0, 64).unwrap();
    // The upload reads what the download writes: it is deferred until that has landed.
    s.copy_host_to_device(&c, 0, &h, 0, 64).unwrap();
    assert_eq!(read(&s, &c, 0, 64), vec![0x5A; 64]);
    h.write(0, &[1; 8]).unwrap();
    s.copy_host_to_device(&c, 2, &h, 0, 8).unwrap();
    let out = read(&s, &c, 0, 12);
    assert_eq!(out, [0x5A, 0x5A, 1, 1, 1, 1, 1, 1, 1, 1, 0x5A, 0x5A]);
}

#[test]
fn capture_replays_by_re_encoding() {
    let s = stream_or_skip!();
    let kernel = WgpuKernel::new(&s, DOUBLE, "double").unwrap();
    let b = s.alloc(16).unwrap();
    s.copy_from_host(&b, 0, &[1, 0, 0, 0].repeat(4)).unwrap();
    let (log, task) = log();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    s.dispatch(&kernel, &[&b], [1, 1, 1]).unwrap();
    s.launch_host_func(task("ran")).unwrap();
    let graph = s.end_capture().unwrap();
    assert_eq!(graph.len(), 2);
    assert_eq!(read(&s, &b, 0, 4), vec![1, 0, 0, 0], "captured work ran");
    let runner = WgpuBackend::new_stream(&PLACE, StreamOptions::default()).unwrap();
    for _ in 0..3 {
        graph.launch(&runner).unwrap();
    }
    runner.synchronize().unwrap();
    assert_eq!(read(&s, &b, 0, 4), vec![8, 0, 0, 0]);
    assert_eq!(log.lock().unwrap().len(), 3);
}

/// A second device on the same adapter, adopted: events of one device gate the other's streams.
#[test]
fn cross_device_wait_holds_submissions_without_blocking_the_host() {
    let s = stream_or_skip!();
    let adapter_device = s.wgpu_device();
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        flags: wgpu::InstanceFlags::empty(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let backend = adapter_device.adapter_info().backend;
    let adapter = crate::util::block_on(instance.enumerate_adapters(backend.into()))
        .into_iter()
        .find(|a| a.get_info().name == adapter_device.adapter_info().name)
        .expect("the adapter of wgpu:0");
    let (device, queue) = crate::util::block_on(adapter.request_device(&Default::default()))
        .expect("a second device");
    let adopted = WgpuDevice::adopt(device, queue);
    assert_eq!(adopted.place(), s.place(), "matched to its adapter's place");
    let foreign = adopted.new_stream(StreamOptions::default()).unwrap();
    // Objects of different devices do not mix.
    let buffer_here = s.alloc(4).unwrap();
    assert!(foreign.fill(&buffer_here, 0, 4, 0).is_err());

    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.fill(&buffer_here, 0, 4, 6).unwrap();
    let done_here = s.record_event().unwrap();
    let t0 = Instant::now();
    foreign.wait_event(&done_here).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(1), "wait_event blocked");
    let (log, task) = log();
    foreign.launch_host_func(task("foreign")).unwrap();
    let foreign_done = foreign.record_event().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!foreign_done.query().unwrap());
    assert!(log.lock().unwrap().is_empty());
    gate.set(1);
    foreign_done.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["foreign"]);
    assert!(done_here.query().unwrap());
    // And the other way round: a stream of wgpu:0 waits on the adopted device.
    s.wait_stream(&foreign).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn streams_share_one_queue_in_order() {
    let s = stream_or_skip!();
    let t = WgpuBackend::new_stream(&PLACE, StreamOptions::default()).unwrap();
    let b = s.alloc(4).unwrap();
    for i in 0..20u8 {
        let (from, to) = if i % 2 == 0 { (&s, &t) } else { (&t, &s) };
        from.fill(&b, 0, 4, i).unwrap();
        to.wait_stream(from).unwrap();
    }
    t.synchronize().unwrap();
    s.synchronize().unwrap();
    assert_eq!(read(&s, &b, 0, 4), vec![19; 4]);
    assert!(!s.capabilities().concurrent_streams);
    assert_eq!(s.native_priority(), 0);
    assert_eq!(
        WgpuBackend::priority_range(&PLACE).unwrap(),
        devstream_core::PriorityRange::NONE
    );
    assert!(matches!(
        WgpuBackend::per_thread_stream(&PLACE),
        Err(Error::Unsupported { .. })
    ));
}

#[test]
fn dropping_a_held_stream_never_blocks_and_its_work_still_runs() {
    let s = stream_or_skip!();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    let counter = Arc::new(AtomicU32::new(0));
    let c = counter.clone();
    s.wait_flag(&gate, 1).unwrap();
    s.launch_host_func(Box::new(move || {
        c.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    let t0 = Instant::now();
    drop(s);
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert_eq!(counter.load(Ordering::SeqCst), 0);
    gate.set(1);
    assert!(eventually(|| counter.load(Ordering::SeqCst) == 1));
}

/// Data flows through held work: the copy on `t` must see the fill that `s` holds behind a flag,
/// because `t` waits on an event recorded after it.
#[test]
fn data_dependencies_through_held_work() {
    let s = stream_or_skip!();
    let t = WgpuBackend::new_stream(&PLACE, StreamOptions::default()).unwrap();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    let a = s.alloc(1024).unwrap();
    let b = s.alloc(1024).unwrap();
    s.fill(&a, 0, 1024, 1).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.fill(&a, 0, 1024, 9).unwrap();
    t.wait_event(&s.record_event().unwrap()).unwrap();
    t.copy_device_to_device(&b, 0, &a, 0, 1024).unwrap();
    let host = t.alloc_host(1024).unwrap();
    t.copy_device_to_host(&host, 0, &b, 0, 1024).unwrap();
    // Work on other streams is not held back by `s`'s gate.
    let u = WgpuBackend::new_stream(&PLACE, StreamOptions::default()).unwrap();
    let c = u.alloc(4).unwrap();
    u.fill(&c, 0, 4, 5).unwrap();
    assert_eq!(read(&u, &c, 0, 4), vec![5; 4]);
    let reader = {
        let host_reader = std::thread::spawn(move || host.to_vec().unwrap());
        std::thread::sleep(Duration::from_millis(20));
        assert!(!host_reader.is_finished(), "the read waited for held work");
        gate.set(1);
        host_reader
    };
    assert_eq!(reader.join().unwrap(), vec![9; 1024]);
    t.synchronize().unwrap();
    s.synchronize().unwrap();
}

#[test]
fn flush_submits_and_default_stream_is_shared() {
    let s = stream_or_skip!();
    s.flush().unwrap();
    s.synchronize().unwrap();
    let d1 = WgpuBackend::default_stream(&PLACE).unwrap();
    let d2 = WgpuBackend::default_stream(&PLACE).unwrap();
    assert_eq!(d1.id(), d2.id());
    assert!(d1.is_non_blocking());
    let blocking =
        WgpuBackend::new_stream(&PLACE, StreamOptions::default().blocking(true)).unwrap();
    assert!(!blocking.is_non_blocking());
}

#[test]
fn foreign_buffers_and_raw_handles() {
    let s = stream_or_skip!();
    let (device, queue) = s.as_raw();
    let theirs = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("theirs"),
        size: 16,
        usage: wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let wrapped = WgpuBuffer::from_wgpu(&s.wgpu_device(), theirs).unwrap();
    s.fill(&wrapped, 1, 14, 3).unwrap();
    let mut expect = vec![0u8; 16];
    expect[1..15].fill(3);
    assert_eq!(read(&s, &wrapped, 0, 16), expect);
    let no_copy = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("uniform only"),
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM,
        mapped_at_creation: false,
    });
    assert!(matches!(
        WgpuBuffer::from_wgpu(&s.wgpu_device(), no_copy),
        Err(Error::InvalidArgument(_))
    ));
    let adopted =
        WgpuStream::from_wgpu(device.clone(), queue.clone(), StreamOptions::default()).unwrap();
    adopted.synchronize().unwrap();
}

/// Completions asked for again and again of a stream held behind a gate share one recording:
/// the held queue does not grow with them, and they all complete once the gate opens.
#[test]
fn repeated_completions_of_a_gated_stream_share_one_recording() {
    let Some(s) = stream() else { return };
    let flag = WgpuBackend::new_flag(s.place()).unwrap();
    s.wait_flag(&flag, 1).unwrap();
    let first = s.completion();
    let held = |s: &WgpuStream| s.held_len();
    let before = held(&s);
    let more: Vec<_> = (0..1000).map(|_| s.completion()).collect();
    assert_eq!(held(&s), before, "each completion added to the held queue");
    assert!(!first.is_ready());
    flag.set(1);
    s.synchronize().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !(first.is_ready() && more.iter().all(devstream_core::Completion::is_ready)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the completions never completed"
        );
        std::thread::yield_now();
    }
}

/// A device of its own, destroyed by the test; `None` (skip) as [`stream`].
fn device_to_lose() -> Option<WgpuDevice> {
    stream()?;
    Some(crate::device::fresh_device(0).expect("a second device on wgpu:0's adapter"))
}

/// `Device::destroy` on the raw device with work held behind a flag: the device's fault names
/// the loss, every stream, event and completion of the device reports it, the host function
/// and the flag write behind the lost work never run, and nothing hangs.
#[test]
fn a_destroyed_device_is_a_fault_and_its_held_work_never_runs() {
    let Some(device) = device_to_lose() else {
        return;
    };
    let s = device.new_stream(StreamOptions::default()).unwrap();
    let bystander = device.new_stream(StreamOptions::default()).unwrap();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    let written = WgpuBackend::new_flag(&PLACE).unwrap();
    let b = s.alloc(256).unwrap();
    let host = s.alloc_host(256).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.fill(&b, 0, 256, 7).unwrap();
    s.copy_device_to_host(&host, 0, &b, 0, 256).unwrap();
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    s.launch_host_func(Box::new(move || {
        r.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    s.write_flag(&written, 1).unwrap();
    let event = s.record_event().unwrap();
    let completion = s.completion();
    assert_eq!(device.fault(), None);

    device.wgpu_device().destroy();
    gate.set(1);
    let lost = |e: &Error| {
        matches!(
            e,
            Error::Driver {
                call: "device lost",
                ..
            }
        )
    };
    let err = s.synchronize().unwrap_err();
    assert!(lost(&err), "{err:?}");
    assert!(
        device.fault().as_ref().is_some_and(lost),
        "{:?}",
        device.fault()
    );
    assert!(s.query().is_err_and(|e| lost(&e)));
    assert!(event.query().is_err_and(|e| lost(&e)));
    assert!(event.synchronize().is_err_and(|e| lost(&e)));
    assert!(bystander.synchronize().is_err_and(|e| lost(&e)));
    assert!(crate::util::block_on(completion).is_err_and(|e| lost(&e)));
    assert!(crate::util::block_on(event.completion()).is_err_and(|e| lost(&e)));
    assert!(host.to_vec().is_err_and(|e| lost(&e)));
    // Work queued after the loss is dropped as well, and reports it.
    s.launch_host_func(Box::new({
        let r = ran.clone();
        move || {
            r.fetch_add(1, Ordering::SeqCst);
        }
    }))
    .unwrap();
    assert!(s.synchronize().is_err_and(|e| lost(&e)));
    // The poller drops the held work once it sees the fault (synchronize may see it first).
    assert!(
        eventually(|| s.held_len() == 0),
        "the held work was not dropped"
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "a host function behind the loss ran"
    );
    assert_eq!(written.get(), 0, "a flag write behind the loss happened");
}

/// Completions taken while the recorded work waits behind a gate report the loss when the
/// device is lost before the gate opens, as `Event::synchronize` and `synchronize` do. The
/// device-lost callback is made to run before the gate opens (a poll of the application's, as
/// a driver's own threads may make it run right after `destroy`): the held work is then dropped
/// with nothing ever submitted for it, so no submitted-work-done callback fails the waiters.
#[test]
fn completions_taken_before_a_loss_report_it_when_the_loss_is_seen_before_the_gate_opens() {
    let Some(device) = device_to_lose() else {
        return;
    };
    let s = device.new_stream(StreamOptions::default()).unwrap();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    let b = s.alloc(256).unwrap();
    s.fill(&b, 0, 256, 1).unwrap();
    s.synchronize().unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.fill(&b, 0, 256, 7).unwrap();
    let event = s.record_event().unwrap();
    let event_completion = event.completion();
    let stream_completion = s.completion();
    device.wgpu_device().destroy();
    // The queue is empty (the gated fill was never submitted): this poll runs the device-lost
    // callback.
    let _ = device.wgpu_device().poll(wgpu::PollType::Poll);
    let lost = |e: &Error| {
        matches!(
            e,
            Error::Driver {
                call: "device lost",
                ..
            }
        )
    };
    assert!(
        device.fault().as_ref().is_some_and(lost),
        "the poll did not run the device-lost callback: {:?}",
        device.fault()
    );
    gate.set(1);
    let synchronized = event.synchronize();
    assert!(synchronized.as_ref().is_err_and(lost), "{synchronized:?}");
    let completed = crate::util::block_on(event_completion);
    assert!(
        completed.as_ref().is_err_and(lost),
        "the event's synchronize reports {synchronized:?}, its completion {completed:?}"
    );
    let completed = crate::util::block_on(stream_completion);
    assert!(completed.as_ref().is_err_and(lost), "{completed:?}");
    let completed = crate::util::block_on(event.completion());
    assert!(completed.as_ref().is_err_and(lost), "{completed:?}");
}

/// A stream of a healthy device waiting on an event of a device that is lost does not hang:
/// the wait ends with the loss as the stream's error, the host function behind it is dropped,
/// and once `synchronize` has reported it the stream runs host functions again.
#[test]
fn a_wait_on_work_of_a_lost_device_ends_with_its_fault() {
    let Some(device) = device_to_lose() else {
        return;
    };
    let healthy = stream_or_skip!();
    let lost_stream = device.new_stream(StreamOptions::default()).unwrap();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    lost_stream.wait_flag(&gate, 1).unwrap();
    let b = lost_stream.alloc(64).unwrap();
    lost_stream.fill(&b, 0, 64, 1).unwrap();
    let event = lost_stream.record_event().unwrap();
    healthy.wait_event(&event).unwrap();
    let (log, task) = log();
    healthy
        .launch_host_func(task("behind the lost work"))
        .unwrap();
    device.wgpu_device().destroy();
    gate.set(1);
    let err = healthy.synchronize().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Driver {
                call: "device lost",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(log.lock().unwrap().is_empty(), "{:?}", log.lock().unwrap());
    healthy.launch_host_func(task("after the report")).unwrap();
    healthy.synchronize().unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["after the report"]);
}

const LENGTH: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(1)
fn length(@builtin(global_invocation_id) id: vec3<u32>) {
    data[0] = arrayLength(&data);
}
"#;

/// A kernel sees a graph buffer's own length, not its block's: the first buffer of a size
/// class and the one that reuses its block later in the capture each see their own.
#[test]
fn a_kernel_sees_a_graph_buffers_length_not_its_blocks() {
    let s = stream_or_skip!();
    let kernel = WgpuKernel::new(&s, LENGTH, "length").unwrap();
    let (first_out, second_out) = (s.alloc_host(4).unwrap(), s.alloc_host(4).unwrap());
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let first = s.alloc(1000).unwrap();
    s.dispatch(&kernel, &[&first], [1, 1, 1]).unwrap();
    s.copy_device_to_host(&first_out, 0, &first, 0, 4).unwrap();
    drop(first);
    let second = s.alloc(600).unwrap();
    s.dispatch(&kernel, &[&second], [1, 1, 1]).unwrap();
    s.copy_device_to_host(&second_out, 0, &second, 0, 4)
        .unwrap();
    let graph = s.end_capture().unwrap();
    let stats = graph.memory_pool().unwrap().stats().unwrap();
    assert_eq!(stats.reserved_bytes, 1024, "one block for both: {stats:?}");
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();
    let words =
        |out: &WgpuHostBuffer| u32::from_le_bytes(out.to_vec().unwrap()[..4].try_into().unwrap());
    assert_eq!((words(&first_out), words(&second_out)), (250, 150));
}
