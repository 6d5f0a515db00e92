//! Soundness regressions for plug-ins: who frees a callback's data (a plug-in may
//! run it inline and answer `C_WARNING`, or answer an error and run it later), copies tracked
//! before anything can fail, host-buffer accesses that never race a copy or each other, host
//! functions that never wait for their stream's later work, hostile panics, and loading (never
//! unload what was initialised, one file loaded once, allocations answered with a status).
//!
//! Each test that can hang runs under a watchdog. Several of the defects are memory errors; the
//! tests observe them through the faulty plug-in (counters, stale copies), and Valgrind shows
//! them as invalid reads/frees before the fixes.

mod common;

use common::*;
use devstream_core::{DeviceBackend, DeviceEvent, DeviceFlag, DeviceStream, Error, HostBuffer};
use devstream_plugin::{PluginBackend, PluginHostBuffer, PluginStream};
use devstream_test_plugin_faulty as faulty;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Barrier, Mutex};

/// Counts its drops.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Loads a fresh copy of the faulty plug-in in `mode`: the copy, its first place and a stream
/// there.
fn faulty_stream(mode: u32) -> (Faulty, devstream_core::Place, PluginStream) {
    let copy = Faulty::unique(mode);
    let place = copy.load().unwrap().places[0].clone();
    let s = stream(&place);
    (copy, place, s)
}

/// The allocations of `copy` not freed yet.
fn live_allocations(copy: &Faulty) -> usize {
    copy.counters()[faulty::COUNT_LIVE_ALLOCATIONS]
}

fn driver_call<T: std::fmt::Debug>(result: Result<T, Error>) -> &'static str {
    match result {
        Err(Error::Driver { call, .. }) => call,
        other => panic!("expected Error::Driver, got {other:?}"),
    }
}

// ---- callback ownership ----

/// A host function that counts its runs and its drops.
fn counted_host_fn() -> (devstream_core::HostFn, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (r, guard) = (ran.clone(), DropCount(dropped.clone()));
    let f = Box::new(move || {
        let _keep = &guard;
        r.fetch_add(1, Ordering::SeqCst);
    });
    (f, ran, dropped)
}

#[test]
fn an_inline_callback_answered_with_c_warning_runs_once_and_is_freed_once() {
    let (_copy, place, s) = faulty_stream(faulty::MODE_INLINE_WARNING);
    let (f, ran, dropped) = counted_host_fn();
    let launched = s.launch_host_func(f);
    assert!(
        launched.is_ok(),
        "C_WARNING means the callback ran synchronously: {launched:?}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the closure is dropped once"
    );
    // Release callbacks (staging of fill / copy_from_host) and flag writes take the same path.
    let buffer = s.alloc(64).unwrap();
    let host = s.alloc_host(64).unwrap();
    s.fill(&buffer, 0, 64, 7).unwrap();
    s.copy_device_to_host(&host, 0, &buffer, 0, 64).unwrap();
    let flag = PluginBackend::new_flag(&place).unwrap();
    s.write_flag(&flag, 3).unwrap();
    s.synchronize().unwrap();
    assert_eq!(flag.get(), 3);
    assert_eq!(host.to_vec().unwrap(), vec![7; 64]);
}

#[test]
fn an_error_answered_with_the_callback_still_queued_does_not_free_it_early() {
    let (copy, place, s) = faulty_stream(faulty::MODE_QUEUED_ERROR);
    let (f, ran, dropped) = counted_host_fn();
    let launched = s.launch_host_func(f);
    assert_eq!(driver_call(launched), "stream_add_callback");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "refused: the closure is taken back and dropped"
    );
    let flag = PluginBackend::new_flag(&place).unwrap();
    assert_eq!(driver_call(s.write_flag(&flag, 5)), "stream_add_callback");
    // The plug-in calls back later anyway: the trampoline must find its data alive, and
    // run nothing that was refused.
    assert_eq!(copy.run_queued(), 2);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "a refused host function never runs"
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "dropped once");
    assert_eq!(flag.get(), 0, "a refused flag write never happens");
    // The staging of a fill is released by a callback too: refused, it is kept otherwise.
    let buffer = s.alloc(64).unwrap();
    s.fill(&buffer, 0, 64, 9).unwrap();
    copy.run_queued();
}

/// Puts a counted host function, a flag write and a fill (whose staging a release callback
/// frees) on a stream of `copy`; answers the host function's run and drop counts and the flag.
fn callbacks_on(
    copy: &Faulty,
) -> (
    PluginStream,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    devstream_plugin::PluginFlag,
) {
    let place = copy.load().unwrap().places[0].clone();
    let s = stream(&place);
    let (f, ran, dropped) = counted_host_fn();
    s.launch_host_func(f).unwrap();
    let flag = PluginBackend::new_flag(&place).unwrap();
    s.write_flag(&flag, 3).unwrap();
    let buffer = s.alloc(64).unwrap();
    s.fill(&buffer, 0, 64, 5).unwrap();
    (s, ran, dropped, flag)
}

// A plug-in that calls a callback twice must not make devstream touch freed memory (the
// sanitizers and Valgrind report it) nor run or drop anything twice.
#[test]
fn a_callback_the_plug_in_calls_twice_inline_runs_once_and_is_freed_once() {
    let copy = Faulty::unique(faulty::MODE_CALLBACK_TWICE_INLINE);
    let (s, ran, dropped, flag) = callbacks_on(&copy);
    s.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the host function runs once");
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "and is dropped once");
    assert_eq!(flag.get(), 3);
}

#[test]
fn a_callback_the_plug_in_calls_twice_later_runs_once_and_is_freed_once() {
    let copy = Faulty::unique(faulty::MODE_CALLBACK_TWICE_QUEUED);
    let (s, ran, dropped, flag) = callbacks_on(&copy);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // Each queued callback (host function, flag write, release) is called twice.
    assert_eq!(copy.run_queued(), 3);
    s.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the host function runs once");
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "and is dropped once");
    assert_eq!(flag.get(), 3);
    // Callbacks queued after the stale calls still run (their tokens are not confused with
    // the ones already called).
    let (f, ran_later, _) = counted_host_fn();
    s.launch_host_func(f).unwrap();
    assert_eq!(copy.run_queued(), 1);
    assert_eq!(ran_later.load(Ordering::SeqCst), 1);
}

// ---- copies tracked before anything can fail; no races on host buffers ----

fn last_copy(copy: &Faulty) -> [u8; 16] {
    let library = copy.library.as_ref().unwrap();
    // SAFETY: the signature is `void(uint8_t*)`, writing 16 bytes.
    unsafe { read_export(library, b"devstream_test_plugin_faulty_last_copy\0") }
}

/// The faulty plug-in's last queued copy read `byte`s, not freed staging memory.
fn assert_queued_copy_read(copy: &Faulty, byte: u8) {
    assert_eq!(
        last_copy(copy),
        [byte; 16],
        "the queued copy read freed staging bytes"
    );
}

#[test]
fn a_copy_whose_end_event_fails_stays_tracked_and_its_host_buffer_is_not_freed() {
    let (copy, _, s) = faulty_stream(faulty::MODE_QUEUED_COPIES);
    let device = s.alloc(64).unwrap();
    let host = s.alloc_host(64).unwrap();
    // The copy is queued by the plug-in (it runs later); the event after it fails.
    let copied = s.copy_device_to_host(&host, 0, &device, 0, 64);
    assert_eq!(driver_call(copied), "record_event");
    let uploaded = s.copy_host_to_device(&device, 0, &host, 0, 64);
    assert_eq!(driver_call(uploaded), "record_event");
    let marker = s.alloc(8).unwrap();
    drop(host);
    drop(device);
    // The reaper handles its jobs in order: once the unused marker is freed, it has had its
    // chance to free the two buffers too early.
    let live = live_allocations(&copy);
    drop(marker);
    assert!(wait_until(|| live_allocations(&copy) < live));
    copy.run_queued();
    assert_eq!(
        copy.counters()[faulty::COUNT_STALE_COPIES],
        0,
        "a queued copy found its memory freed"
    );
}

#[test]
fn a_staged_upload_keeps_its_bytes_when_the_release_fails() {
    let (copy, _, s) = faulty_stream(faulty::MODE_QUEUED_COPIES);
    let device = s.alloc(64).unwrap();
    // The copy is queued; the release callback and the event after it both fail.
    let filled = s.fill(&device, 0, 64, 0xab);
    assert!(
        filled.is_ok() || driver_call(filled.clone()) == "stream_add_callback",
        "{filled:?}"
    );
    copy.run_queued();
    assert_queued_copy_read(&copy, 0xab);
}

// A plug-in that runs callbacks inside `stream_add_callback` while its copies are still
// queued runs the release of a staged upload before the copy that reads the staging.
#[test]
fn a_staged_upload_keeps_its_bytes_when_the_release_callback_runs_before_the_copy() {
    let (copy, _, s) = faulty_stream(faulty::MODE_INLINE_CALLBACKS_QUEUED_COPIES);
    let device = s.alloc(64).unwrap();
    s.fill(&device, 0, 64, 0xcd).unwrap();
    s.copy_from_host(&device, 0, &[0xef; 64]).unwrap();
    // The two copies are queued; their release callbacks have run already.
    assert_eq!(copy.run_queued(), 2);
    assert_queued_copy_read(&copy, 0xef);
    // Once the copies ran, the staging is released (the events after them complete).
    s.synchronize().unwrap();
}

#[test]
fn host_buffer_reads_never_see_a_torn_write() {
    const LEN: usize = 1 << 20;
    let place = cpu0();
    let s = stream(&place);
    let host = Arc::new(s.alloc_host(LEN).unwrap());
    let torn = watchdog("concurrent host buffer read/write", 60, move || {
        let writer = {
            let host = host.clone();
            std::thread::spawn(move || {
                for round in 0..300u32 {
                    host.write(0, &vec![(round % 251) as u8 + 1; LEN]).unwrap();
                }
            })
        };
        let mut torn = 0;
        let mut out = vec![0u8; LEN];
        while !writer.is_finished() {
            host.read(0, &mut out).unwrap();
            if out.iter().any(|b| *b != out[0]) {
                torn += 1;
            }
        }
        writer.join().unwrap();
        torn
    });
    assert_eq!(torn, 0, "reads saw half-written buffers (a data race)");
}

// ---- host functions never wait for their stream's later work ----

/// Holds `s`'s plug-in worker with a host function until the returned sender fires.
fn hold(s: &PluginStream) -> std::sync::mpsc::Sender<()> {
    let (release, held) = channel::<()>();
    let held = Mutex::new(held);
    s.launch_host_func(Box::new(move || {
        let _ = held.lock().unwrap().recv();
    }))
    .unwrap();
    release
}

/// A stream whose worker is held by a first host function until the returned sender fires.
fn held_stream() -> (PluginStream, std::sync::mpsc::Sender<()>) {
    let s = stream(&cpu0());
    let release = hold(&s);
    (s, release)
}

#[test]
fn a_host_function_reads_a_host_buffer_without_waiting_for_later_copies() {
    let outcome = watchdog("host function reading a host buffer", 10, || {
        let (s, release) = held_stream();
        let device = s.alloc(32).unwrap();
        let host = Arc::new(s.alloc_host(32).unwrap());
        s.copy_from_host(&device, 0, &[5; 32]).unwrap();
        s.copy_device_to_host(&host, 0, &device, 0, 32).unwrap();
        let (seen, saw) = channel();
        let inner: Arc<PluginHostBuffer> = host.clone();
        let seen = Mutex::new(seen);
        s.launch_host_func(Box::new(move || {
            let _ = seen.lock().unwrap().send(inner.to_vec());
        }))
        .unwrap();
        // Queued after the host function on the same stream.
        s.copy_from_host(&device, 0, &[6; 32]).unwrap();
        s.copy_device_to_host(&host, 0, &device, 0, 32).unwrap();
        release.send(()).unwrap();
        let seen = saw.recv().unwrap();
        s.synchronize().unwrap();
        (seen, host.to_vec())
    });
    assert_eq!(
        outcome.0,
        Ok(vec![5; 32]),
        "stream order up to the host function"
    );
    assert_eq!(outcome.1, Ok(vec![6; 32]));
}

#[test]
fn blocking_calls_on_the_own_stream_inside_a_host_function_are_typed_errors() {
    let outcome = watchdog("host function synchronizing its own stream", 10, || {
        let (s, release) = held_stream();
        let before = s.record_event().unwrap();
        let (tell, told) = channel();
        let (inner, tell) = (s.clone(), Mutex::new(tell));
        let after: Arc<Mutex<Option<devstream_plugin::PluginEvent>>> = Arc::default();
        let after_inner = after.clone();
        s.launch_host_func(Box::new(move || {
            let after = after_inner.lock().unwrap().clone().unwrap();
            assert_eq!(
                inner.query(),
                Ok(false),
                "the stream runs this host function"
            );
            let _ = tell.lock().unwrap().send((
                inner.synchronize(),
                before.synchronize(),
                before.query(),
                after.synchronize(),
                after.query(),
            ));
        }))
        .unwrap();
        *after.lock().unwrap() = Some(s.record_event().unwrap());
        release.send(()).unwrap();
        let told = told.recv().unwrap();
        s.synchronize().unwrap();
        told
    });
    assert!(
        matches!(outcome.0, Err(Error::WouldDeadlock { .. })),
        "own stream: {:?}",
        outcome.0
    );
    assert_eq!(
        outcome.1,
        Ok(()),
        "an event before the host function is complete"
    );
    assert_eq!(outcome.2, Ok(true));
    assert!(
        matches!(outcome.3, Err(Error::WouldDeadlock { .. })),
        "an event after the host function: {:?}",
        outcome.3
    );
    assert_eq!(outcome.4, Ok(false));
}

#[test]
fn waits_inside_a_host_function_on_streams_that_wait_for_its_later_work_are_typed_errors() {
    type Told = (
        Result<Vec<u8>, Error>,
        Result<(), Error>,
        Result<(), Error>,
        Result<(), Error>,
        Result<(), Error>,
    );
    let outcome: Told = watchdog("host function waiting through another stream", 10, || {
        let place = cpu0();
        let (a, release) = held_stream();
        let (b, independent, early) = (stream(&place), stream(&place), stream(&place));
        let device = b.alloc(32).unwrap();
        b.copy_from_host(&device, 0, &[3; 32]).unwrap();
        b.synchronize().unwrap();
        let host = Arc::new(b.alloc_host(32).unwrap());
        let (tell, told) = channel();
        let tell = Mutex::new(tell);
        let later: Arc<
            Mutex<Option<(devstream_plugin::PluginEvent, devstream_plugin::PluginEvent)>>,
        > = Arc::default();
        let (inner_host, inner_b, inner_independent, inner_later) =
            (host.clone(), b.clone(), independent.clone(), later.clone());
        a.launch_host_func(Box::new(move || {
            let (on_b, on_early) = inner_later.lock().unwrap().clone().unwrap();
            let _ = tell.lock().unwrap().send((
                inner_host.to_vec(),
                inner_b.synchronize(),
                on_b.synchronize(),
                inner_independent.synchronize(),
                on_early.synchronize(),
            ));
        }))
        .unwrap();
        // Queued on `a` after the host function; `b` waits for it, then copies into `host`.
        let after = a.record_event().unwrap();
        b.wait_event(&after).unwrap();
        b.copy_device_to_host(&host, 0, &device, 0, 32).unwrap();
        let on_b = b.record_event().unwrap();
        // Unrelated work, and an event of a stream recorded before its own wait on `after`.
        // Each into a buffer of its own: the two streams are unordered, so copies of both into
        // one buffer would race (ThreadSanitizer reported it, inside the test plug-in).
        let (for_independent, for_early) =
            (independent.alloc(32).unwrap(), early.alloc(32).unwrap());
        independent
            .copy_from_host(&for_independent, 0, &[3; 32])
            .unwrap();
        early.copy_from_host(&for_early, 0, &[3; 32]).unwrap();
        let on_early = early.record_event().unwrap();
        early.wait_event(&after).unwrap();
        *later.lock().unwrap() = Some((on_b, on_early));
        release.send(()).unwrap();
        let told = told.recv().unwrap();
        a.synchronize().unwrap();
        b.synchronize().unwrap();
        told
    });
    // `b`'s copy certainly runs after the host function (its wait on `after` was accepted by
    // the plug-in), so the read skips it and sees stream order: nothing copied yet. (It was
    // refused with Error::WouldDeadlock, conservatively, before the reads learnt that.)
    assert_eq!(
        outcome.0,
        Ok(vec![0; 32]),
        "read of a buffer another stream copies into after waiting for this host function's \
         stream"
    );
    assert!(
        matches!(outcome.1, Err(Error::WouldDeadlock { .. })),
        "{:?}",
        outcome.1
    );
    assert!(
        matches!(outcome.2, Err(Error::WouldDeadlock { .. })),
        "{:?}",
        outcome.2
    );
    assert_eq!(outcome.3, Ok(()), "a stream that does not wait for it");
    assert_eq!(outcome.4, Ok(()), "an event before the other stream's wait");
}

#[test]
fn a_host_functions_wait_on_work_behind_it_is_refused_after_its_streams_handle_is_dropped() {
    let outcome = watchdog(
        "host function waiting after its stream's handle went",
        10,
        || {
            let place = cpu0();
            let (a, release) = held_stream();
            let b = stream(&place);
            let (tell, told) = channel();
            let tell = Mutex::new(tell);
            let inner_b = b.clone();
            a.launch_host_func(Box::new(move || {
                let _ = tell.lock().unwrap().send(inner_b.synchronize());
            }))
            .unwrap();
            // `b` waits for `a`'s work after the host function; then the program drops its only
            // handle of `a` (the plug-in stream lives on until its work is done).
            b.wait_stream(&a).unwrap();
            drop(a);
            release.send(()).unwrap();
            let told = told.recv().unwrap();
            b.synchronize().unwrap();
            told
        },
    );
    assert!(
        matches!(outcome, Err(Error::WouldDeadlock { .. })),
        "{outcome:?}"
    );
}

#[test]
fn streams_sharing_one_plugin_queue_count_as_the_host_functions_own() {
    let outcome = watchdog(
        "host function and a stream over the same plug-in queue",
        10,
        || {
            let place = cpu0();
            // Two devstream streams over the plug-in's null (default) stream: one plug-in queue.
            // SAFETY: the null stream of the test plug-in lives as long as the process.
            let a = unsafe { PluginStream::from_raw(&place, std::ptr::null_mut()) }.unwrap();
            // SAFETY: as above.
            let b = unsafe { PluginStream::from_raw(&place, std::ptr::null_mut()) }.unwrap();
            let release = hold(&a);
            let device = a.alloc(32).unwrap();
            let host = Arc::new(a.alloc_host(32).unwrap());
            let (tell, told) = channel();
            let (tell, inner_host, inner_b) = (Mutex::new(tell), host.clone(), b.clone());
            a.launch_host_func(Box::new(move || {
                let _ = tell
                    .lock()
                    .unwrap()
                    .send((inner_host.to_vec(), inner_b.synchronize()));
            }))
            .unwrap();
            // On `b`, so after the host function in the one plug-in queue.
            b.copy_from_host(&device, 0, &[8; 32]).unwrap();
            b.copy_device_to_host(&host, 0, &device, 0, 32).unwrap();
            release.send(()).unwrap();
            let told = told.recv().unwrap();
            b.synchronize().unwrap();
            (told, host.to_vec())
        },
    );
    assert_eq!(
        (outcome.0).0,
        Ok(vec![0; 32]),
        "the queue's order up to the host function"
    );
    assert!(
        matches!((outcome.0).1, Err(Error::WouldDeadlock { .. })),
        "{:?}",
        (outcome.0).1
    );
    assert_eq!(outcome.1, Ok(vec![8; 32]));
}

/// A host function of `reader` reads a host buffer that `writer` copies into before it (and
/// `reader` waited for that) and after it (behind a wait for an event recorded on `reader` after
/// the host function, accepted by the plug-in): the read sees the copy before it and does not
/// wait for the one after it (it answered `Error::WouldDeadlock` before, conservatively).
#[test]
fn a_host_function_reads_another_streams_host_buffer_in_stream_order() {
    let outcome = watchdog("host function reading another stream's buffer", 10, || {
        let place = cpu0();
        let (reader, release) = held_stream();
        let writer = stream(&place);
        let device = writer.alloc(32).unwrap();
        let host = Arc::new(writer.alloc_host(32).unwrap());
        writer.copy_from_host(&device, 0, &[1; 32]).unwrap();
        writer
            .copy_device_to_host(&host, 0, &device, 0, 32)
            .unwrap();
        let copied = writer.record_event().unwrap();
        reader.wait_event(&copied).unwrap();
        let (tell, told) = channel();
        let (tell, inner) = (Mutex::new(tell), host.clone());
        reader
            .launch_host_func(Box::new(move || {
                let _ = tell.lock().unwrap().send(inner.to_vec());
            }))
            .unwrap();
        let read_done = reader.record_event().unwrap();
        writer.wait_event(&read_done).unwrap();
        writer.copy_from_host(&device, 0, &[2; 32]).unwrap();
        writer
            .copy_device_to_host(&host, 0, &device, 0, 32)
            .unwrap();
        release.send(()).unwrap();
        let seen = told.recv().unwrap();
        reader.synchronize().unwrap();
        writer.synchronize().unwrap();
        (seen, host.to_vec())
    });
    assert_eq!(
        outcome.0,
        Ok(vec![1; 32]),
        "stream order up to the host function"
    );
    assert_eq!(outcome.1, Ok(vec![2; 32]), "the copy after the read");
}

/// The test plug-in's hooks that hold `stream_wait_event` (or `stream_add_callback`) on one
/// stream inside the call.
#[derive(Clone, Copy)]
struct WaitHold {
    hold: unsafe extern "C" fn(devstream_plugin::sys::C_Stream),
    hold_callbacks: unsafe extern "C" fn(devstream_plugin::sys::C_Stream),
    await_held: unsafe extern "C" fn(u64) -> bool,
    release: unsafe extern "C" fn(),
}

/// The hooks hold one stream at a time, process-wide: the tests that use them take this first.
fn one_hook_user() -> std::sync::MutexGuard<'static, ()> {
    static ONE_USER: Mutex<()> = Mutex::new(());
    ONE_USER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl WaitHold {
    fn load() -> WaitHold {
        // Kept in a static (reachable, so no leak for LeakSanitizer) so the symbols stay valid.
        static LIBRARY: std::sync::OnceLock<libloading::Library> = std::sync::OnceLock::new();
        let library = LIBRARY.get_or_init(|| {
            let path = built_library("devstream_test_plugin_cpu");
            // SAFETY: the workspace's test plug-in; loading it again returns the loaded image.
            unsafe { libloading::Library::new(path) }.unwrap()
        });
        // SAFETY: the hooks' signatures, as the test plug-in exports them.
        unsafe {
            WaitHold {
                hold: *library
                    .get(b"devstream_test_plugin_cpu_hold_waits\0")
                    .unwrap(),
                hold_callbacks: *library
                    .get(b"devstream_test_plugin_cpu_hold_callbacks\0")
                    .unwrap(),
                await_held: *library
                    .get(b"devstream_test_plugin_cpu_await_held_wait\0")
                    .unwrap(),
                release: *library
                    .get(b"devstream_test_plugin_cpu_release_waits\0")
                    .unwrap(),
            }
        }
    }

    fn hold(&self, stream: &PluginStream) {
        // SAFETY: a live stream handle of the test plug-in (only compared there).
        unsafe { (self.hold)(stream.as_raw().unwrap()) }
    }

    /// Holds `stream_add_callback` on `stream` instead of `stream_wait_event`.
    fn hold_callbacks(&self, stream: &PluginStream) {
        // SAFETY: a live stream handle of the test plug-in (only compared there).
        unsafe { (self.hold_callbacks)(stream.as_raw().unwrap()) }
    }

    fn await_held(&self) -> bool {
        // SAFETY: no preconditions.
        unsafe { (self.await_held)(5_000) }
    }

    fn release(&self) {
        // SAFETY: no preconditions.
        unsafe { (self.release)() }
    }
}

/// The interleaving the conformance test `hostile::host_fn_reads_host_buffer_of_another_stream`
/// hit 3 times in 200 on `custom_cpu`, made deterministic: a host function of `reader` reads a
/// host buffer while the dispatcher is handing to the plug-in `writer`'s wait for an event
/// recorded after that host function (held inside `stream_wait_event` by the test plug-in),
/// with `writer`'s next copy into the buffer behind that wait. The wait had left the held work
/// but was not yet noted, so the read waited for the copy, which waited for the read.
#[test]
fn a_host_function_sees_a_wait_the_dispatcher_is_handing_to_the_plugin() {
    let _one_user = one_hook_user();
    let hooks = WaitHold::load();
    let outcome = watchdog(
        "host function racing the dispatcher's wait",
        10,
        move || {
            let place = cpu0();
            let (writer, reader) = (stream(&place), stream(&place));
            let device = writer.alloc(32).unwrap();
            let host = Arc::new(writer.alloc_host(32).unwrap());
            writer.copy_from_host(&device, 0, &[1; 32]).unwrap();
            writer
                .copy_device_to_host(&host, 0, &device, 0, 32)
                .unwrap();
            let copied = writer.record_event().unwrap();
            // Everything of `reader` below is held on the host until the gate opens.
            let gate = PluginBackend::new_flag(&place).unwrap();
            reader.wait_flag(&gate, 1).unwrap();
            reader.wait_event(&copied).unwrap();
            let (tell, told) = channel();
            let (tell, inner) = (Mutex::new(tell), host.clone());
            reader
                .launch_host_func(Box::new(move || {
                    // The dispatcher is now inside `writer`'s `stream_wait_event` on `read_done`.
                    let held = hooks.await_held();
                    let read = inner.to_vec();
                    hooks.release();
                    let _ = tell.lock().unwrap().send((held, read));
                }))
                .unwrap();
            let read_done = reader.record_event().unwrap();
            // Held on the host (`read_done` is not recorded yet), and the copies behind it.
            writer.wait_event(&read_done).unwrap();
            writer.copy_from_host(&device, 0, &[2; 32]).unwrap();
            writer
                .copy_device_to_host(&host, 0, &device, 0, 32)
                .unwrap();
            hooks.hold(&writer);
            gate.set(1);
            let told = told.recv().unwrap();
            hooks.release();
            reader.synchronize().unwrap();
            writer.synchronize().unwrap();
            (told, host.to_vec())
        },
    );
    let ((held, read), after) = outcome;
    assert!(held, "the dispatcher reached writer's stream_wait_event");
    // The wait is not accepted yet, so the copy behind it is not known to come after the read:
    // waiting for it is refused (skipping it could race it, were the wait refused).
    assert!(
        matches!(read, Err(Error::WouldDeadlock { .. })),
        "a typed error: {read:?}"
    );
    assert_eq!(after, Ok(vec![2; 32]), "the copy after the read");
}

/// `tests/streams.rs::errors_of_deferred_work_reach_synchronize` failed 16 in 20 under TSan:
/// the dispatcher had taken the last held item (a host function) off the stream's held work
/// but not yet handed it to the plug-in, so `synchronize` found neither held work nor plug-in
/// work and returned `Ok` before the host function ran and its panic was recorded. Made
/// deterministic here: the test plug-in holds the dispatcher inside `stream_add_callback`.
#[test]
fn synchronize_waits_for_deferred_work_the_dispatcher_is_handing_to_the_plugin() {
    let _one_user = one_hook_user();
    let hooks = WaitHold::load();
    let place = cpu0();
    let s = Arc::new(stream(&place));
    let gate = PluginBackend::new_flag(&place).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.launch_host_func(Box::new(|| panic!("deferred panic")))
        .unwrap();
    hooks.hold_callbacks(&s);
    gate.set(1);
    assert!(
        hooks.await_held(),
        "the dispatcher reached the stream's stream_add_callback"
    );
    // The host function has left the held work and is not in the plug-in's hands yet.
    let (tell, told) = channel();
    let waiter = s.clone();
    let synchronizing = std::thread::spawn(move || {
        let _ = tell.send(waiter.synchronize());
    });
    let early = told.recv_timeout(std::time::Duration::from_millis(300));
    hooks.release();
    let result = match early {
        Ok(result) => panic!(
            "synchronize returned {result:?} while the host function was being handed to the \
             plug-in"
        ),
        // Generous: under ThreadSanitizer on a loaded machine, the panic hook's backtrace of the
        // host function's panic alone took over 10 s once.
        Err(_) => told
            .recv_timeout(std::time::Duration::from_secs(60) * common::time_scale())
            .expect("synchronize returns once the host function ran"),
    };
    synchronizing.join().unwrap();
    assert_host_func_panicked(result, s.id(), "deferred panic");
}

/// A host function's `synchronize` of another stream waits for that stream's work submitted
/// before the call, not for work another thread submits while it waits (which may wait for the
/// host function's own stream after it: it could never end).
#[test]
fn a_host_functions_synchronize_of_another_stream_ignores_work_submitted_after_the_call() {
    let answer = watchdog(
        "host function synchronizing a stream given work later",
        60,
        || {
            let place = cpu0();
            let (a, d) = (stream(&place), stream(&place));
            let gate = PluginBackend::new_flag(&place).unwrap();
            let started = PluginBackend::new_flag(&place).unwrap();
            // `d`'s work is held on the host until `gate` is set: the synchronize below waits.
            d.wait_flag(&gate, 1).unwrap();
            let (tell, told) = channel();
            let tell = Mutex::new(tell);
            let (inner_d, inner_started) = (d.clone(), started.clone());
            a.launch_host_func(Box::new(move || {
                inner_started.set(1);
                let _ = tell.lock().unwrap().send(inner_d.synchronize());
            }))
            .unwrap();
            while started.get() == 0 {
                std::thread::yield_now();
            }
            // Submitted (most likely) while the host function waits: `d` now waits for work of `a`
            // after the host function.
            let after = a.record_event().unwrap();
            d.wait_event(&after).unwrap();
            gate.set(1);
            let answer = told.recv().unwrap();
            a.synchronize().unwrap();
            d.synchronize().unwrap();
            answer
        },
    );
    // Refused only where the later wait came before the host function's call.
    assert!(
        matches!(answer, Ok(()) | Err(Error::WouldDeadlock { .. })),
        "{answer:?}"
    );
}

// ---- hostile panics ----

/// A panic payload whose destructor panics with another such payload, `.0` levels deep.
struct PanicsOnDrop(u32);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if self.0 > 0 && !std::thread::panicking() {
            std::panic::panic_any(PanicsOnDrop(self.0 - 1));
        }
    }
}

fn hostile_panics_on(place: &devstream_core::Place) {
    let s = stream(place);
    s.launch_host_func(Box::new(|| std::panic::panic_any(PanicsOnDrop(3))))
        .unwrap();
    let guard = PanicsOnDrop(3);
    s.launch_host_func(Box::new(move || {
        let _ = &guard;
    }))
    .unwrap();
    assert_host_func_panicked(s.synchronize(), s.id(), "");
    // The stream (and the plug-in's worker) survive.
    let ran = launch_counting(&s);
    let _ = s.synchronize();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn panic_payloads_and_closures_whose_drop_panics_are_contained() {
    // Seven panics, each symbolizing a backtrace where RUST_BACKTRACE is set, which takes
    // seconds under ThreadSanitizer on busy cores: the limit is a hang detector's, not a time.
    watchdog("hostile panics on custom_cpu:0", 30, || {
        hostile_panics_on(&cpu0())
    });
    let copy = Faulty::unique(faulty::MODE_WORKING);
    let place = copy.load().unwrap().places[0].clone();
    watchdog("hostile panics on an inline plug-in", 30, move || {
        hostile_panics_on(&place)
    });
    // A refused closure whose destructor panics is dropped by the submitter: contained too.
    let (copy, _, s) = faulty_stream(faulty::MODE_QUEUED_ERROR);
    let guard = PanicsOnDrop(3);
    let refused = s.launch_host_func(Box::new(move || {
        let _ = &guard;
    }));
    assert_eq!(driver_call(refused), "stream_add_callback");
    copy.run_queued();
}

// ---- loading ----

#[cfg(unix)]
fn still_loaded(path: &std::path::Path) -> bool {
    use libloading::os::unix::{Library, RTLD_LAZY};
    const RTLD_NOLOAD: std::ffi::c_int = 4;
    // SAFETY: RTLD_NOLOAD only looks for an image already loaded; it runs no initialiser.
    unsafe { Library::open(Some(path), RTLD_LAZY | RTLD_NOLOAD) }.is_ok()
}

#[cfg(unix)]
#[test]
fn a_plugin_that_fails_after_initialize_is_finalized_and_never_unloaded() {
    for mode in [
        faulty::MODE_INIT_DEVICE_FAILS,
        faulty::MODE_DEVICE_COUNT_FAILS,
    ] {
        let mut copy = Faulty::unique(mode);
        assert!(copy.load().is_err());
        let counters = copy.counters();
        assert_eq!(counters[faulty::COUNT_INITIALIZE], 1, "mode {mode}");
        assert_eq!(
            counters[faulty::COUNT_FINALIZE],
            1,
            "mode {mode}: initialize ran, so finalize must"
        );
        drop(copy.library.take());
        assert!(
            still_loaded(&copy.path),
            "mode {mode}: a library whose initialize ran was unloaded"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_plugin_refused_after_init_plugin_accepted_is_loaded_once_and_never_unloaded() {
    // It accepts a layout (and may have started work), then reports runtime 0.1.0.
    let mut copy = Faulty::unique(faulty::MODE_OLD_VERSION);
    assert!(copy.load().is_err());
    match copy.load() {
        Err(Error::Plugin { reason, .. }) => {
            assert!(reason.contains("loaded once"), "{reason}")
        }
        other => panic!("expected Error::Plugin, got {other:?}"),
    }
    let counters = copy.counters();
    assert_eq!(
        counters[faulty::COUNT_INIT_PLUGIN_ACCEPTED],
        1,
        "InitPlugin ran again"
    );
    assert_eq!(counters[faulty::COUNT_INITIALIZE], 0);
    drop(copy.library.take());
    assert!(
        still_loaded(&copy.path),
        "a library whose InitPlugin accepted was unloaded"
    );
}

#[test]
fn one_file_loaded_twice_at_once_is_initialized_once() {
    let copy = Faulty::unique(faulty::MODE_SLOW_INITIALIZE);
    let barrier = Arc::new(Barrier::new(2));
    let loads: Vec<_> = (0..2)
        .map(|_| {
            let (path, barrier) = (copy.path.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                devstream_plugin::load_plugin(&path)
            })
        })
        .collect();
    let results: Vec<_> = loads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    let counters = copy.counters();
    assert_eq!(
        counters[faulty::COUNT_INITIALIZE],
        1,
        "initialize ran twice"
    );
    assert_eq!(counters[faulty::COUNT_INIT_PLUGIN_ACCEPTED], 1);
    // A later load of the same file does not run InitPlugin again.
    assert!(copy.load().is_err());
    assert_eq!(copy.counters()[faulty::COUNT_INIT_PLUGIN_ACCEPTED], 1);
}

#[test]
fn init_plugin_is_offered_another_layout_only_after_a_refusal_that_changed_nothing() {
    // A Paddle 2.6 plug-in: refuses without effect the first offer (no params size, a 16 KiB
    // table) and the 3.3, 3.2, 3.1 and 3.0 tables, then accepts its own 912-byte table.
    let copy = Faulty::unique(faulty::MODE_PADDLE_2_LAYOUT);
    copy.load().unwrap();
    let counters = copy.counters();
    assert_eq!(counters[faulty::COUNT_INIT_PLUGIN], 6);
    assert_eq!(counters[faulty::COUNT_INIT_PLUGIN_ACCEPTED], 1);
    assert_eq!(counters[faulty::COUNT_INITIALIZE], 1);
    // A plug-in that writes and then refuses is not called again.
    let copy = Faulty::unique(faulty::MODE_WRITES_THEN_REFUSES);
    match copy.load() {
        Err(Error::Plugin { reason, .. }) => {
            assert!(reason.contains("without accepting"), "{reason}")
        }
        other => panic!("expected Error::Plugin, got {other:?}"),
    }
    assert_eq!(
        copy.counters()[faulty::COUNT_INIT_PLUGIN],
        1,
        "InitPlugin was called again after a refusal that wrote"
    );
}

// ---- allocations answered with a status ----

#[test]
fn an_allocation_answered_with_c_failed_is_freed_and_with_c_warning_is_kept() {
    let (failed, _, s) = faulty_stream(faulty::MODE_ALLOC_FAILED_WRITTEN);
    assert!(matches!(s.alloc(64), Err(Error::OutOfMemory { .. })));
    assert_eq!(
        live_allocations(&failed),
        0,
        "the pointer written with C_FAILED leaked"
    );
    let (warned, _, s) = faulty_stream(faulty::MODE_ALLOC_WARNING);
    let buffer = s
        .alloc(64)
        .expect("C_WARNING with a pointer is an allocation");
    assert_eq!(live_allocations(&warned), 1);
    s.fill(&buffer, 0, 64, 1).unwrap();
    drop(buffer);
    assert!(wait_until(|| live_allocations(&warned) == 0));
}
