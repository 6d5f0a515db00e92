//! A stream dropped in the middle of its capture ends that capture, and so does its
//! `end_capture` whatever the plug-in reports: a `Global`-mode capture left behind would forbid
//! synchronizing every other stream of the plug-in for the rest of the process (its own test
//! binary: a `Global` capture affects every thread of the process while it lasts).

mod common;

use common::*;
use devstream_core::{CaptureMode, DeviceBackend, DeviceFlag, DeviceStream, Error, Place};
use devstream_plugin::{PluginBackend, PluginStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The tests of this file capture one at a time (a `Global` capture of one would forbid the
/// other's synchronize).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Holds [`ONE_AT_A_TIME`] (a test that failed holding it does not fail the others).
fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `body` in each of `modes` with the test plug-in's place and a fresh stream on it, holding
/// [`ONE_AT_A_TIME`].
fn in_each_mode(modes: [CaptureMode; 2], body: impl Fn(&Place, CaptureMode, PluginStream)) {
    let _alone = alone();
    let place = cpu0();
    for mode in modes {
        body(&place, mode, stream(&place));
    }
}

/// `other` synchronizes: `capture` (one that should be over) no longer forbids it.
fn assert_synchronizes(other: &PluginStream, capture: &str) {
    other
        .synchronize()
        .unwrap_or_else(|error| panic!("{capture} still forbids synchronize: {error}"));
}

#[test]
fn a_stream_dropped_while_capturing_leaves_no_capture_behind() {
    in_each_mode(
        [CaptureMode::Global, CaptureMode::ThreadLocal],
        |place, mode, capturing| {
            capturing.begin_capture(mode).unwrap();
            let other = stream(place);
            assert!(
                matches!(other.synchronize(), Err(Error::Capture { .. })),
                "{mode:?}: a capture in progress forbids synchronizing another stream"
            );
            drop(capturing);
            assert_synchronizes(&other, &format!("{mode:?}: the dropped stream's capture"));
            stream(place).synchronize().unwrap();
        },
    );
}

#[test]
fn a_stream_dropped_while_capturing_work_on_buffers_leaves_no_capture_behind() {
    // The capture keeps the buffers its work uses, and those keep the streams whose work used
    // them: the capturing stream's own, before the capture. Dropping the stream's last handle
    // must end the capture all the same.
    in_each_mode(
        [CaptureMode::Global, CaptureMode::ThreadLocal],
        |place, mode, capturing| {
            let device = capturing.alloc(64).unwrap();
            let other_device = capturing.alloc(64).unwrap();
            let host = capturing.alloc_host(64).unwrap();
            // Work before the capture makes the stream a user of the buffers the capture keeps.
            capturing.fill(&device, 0, 64, 1).unwrap();
            capturing
                .copy_device_to_device(&other_device, 0, &device, 0, 64)
                .unwrap();
            capturing
                .copy_device_to_host(&host, 0, &device, 0, 64)
                .unwrap();
            capturing.begin_capture(mode).unwrap();
            capturing.fill(&device, 0, 64, 1).unwrap();
            capturing.copy_from_host(&device, 0, &[2; 8]).unwrap();
            capturing
                .copy_host_to_device(&device, 0, &host, 0, 64)
                .unwrap();
            capturing
                .copy_device_to_host(&host, 0, &device, 0, 64)
                .unwrap();
            capturing
                .copy_device_to_device(&other_device, 0, &device, 0, 64)
                .unwrap();
            drop(capturing);
            let other = stream(place);
            assert_synchronizes(&other, &format!("{mode:?}: the dropped stream's capture"));
            drop((device, other_device, host));
        },
    );
}

/// On a copy of the faulty plug-in in `mode`: a stream begins a Global capture and ends it,
/// which the plug-in makes fail with a capture error. Then a synchronize of another stream must
/// be allowed (devstream's record of the capture is gone) and the stream itself works.
fn global_capture_ended_with_an_error(mode: u32, why: &str) {
    let _alone = alone();
    let copy = Faulty::unique(mode);
    let place = copy.load().unwrap().places[0].clone();
    let capturing = stream(&place);
    let other = stream(&place);
    capturing.begin_capture(CaptureMode::Global).unwrap();
    assert!(matches!(
        capturing.end_capture(),
        Err(Error::Capture { .. })
    ));
    assert!(!capturing.is_capturing().unwrap());
    assert_synchronizes(&other, why);
    capturing.synchronize().unwrap();
}

#[test]
fn end_capture_forgets_the_capture_when_the_plug_in_reports_another_capture_id() {
    // The plug-in now reports another capture id: devstream discards the graph it ended.
    global_capture_ended_with_an_error(
        devstream_test_plugin_faulty::MODE_CAPTURE_ID_CHANGES,
        "the ended capture",
    );
}

#[test]
fn end_capture_ends_devstreams_capture_when_the_plug_in_reports_none() {
    // The plug-in has lost track of the capture: ending it is an error, and devstream's own
    // record of the Global capture ends with the call, or nothing could ever end it (the
    // stream may live for the whole process, as a default stream does).
    global_capture_ended_with_an_error(
        devstream_test_plugin_faulty::MODE_CAPTURE_FORGOTTEN,
        "the capture the plug-in forgot",
    );
}

#[test]
fn work_on_another_stream_over_the_same_plug_in_stream_runs_once_the_capturing_one_is_dropped() {
    in_each_mode(
        [CaptureMode::Relaxed, CaptureMode::Global],
        |place, mode, capturing| {
            // The buffer remembers its user, and keeps the stream's host side (and so its plug-in
            // stream) alive after the stream's last handle is dropped, until the buffer goes.
            let buffer = capturing.alloc(64).unwrap();
            capturing.fill(&buffer, 0, 64, 1).unwrap();
            capturing.begin_capture(mode).unwrap();
            let raw = capturing.as_raw().unwrap();
            // SAFETY: the plug-in stream of `capturing`, which `buffer` keeps alive until after
            // `sharing` and its work are gone.
            let sharing = unsafe { PluginStream::from_raw(place, raw) }.unwrap();
            drop(capturing);
            // The capture ended with the dropped stream's last handle: this is ordinary work.
            let ran = launch_counting(&sharing);
            sharing.synchronize().unwrap();
            assert_eq!(
                ran.load(Ordering::SeqCst),
                1,
                "{mode:?}: the host function went into the dropped stream's capture"
            );
            drop(sharing);
            drop(buffer);
        },
    );
}

#[test]
fn a_captured_host_function_the_plug_in_calls_after_its_graph_is_gone_does_not_run() {
    let _alone = alone();
    let copy = Faulty::unique(devstream_test_plugin_faulty::MODE_CAPTURE_QUEUED_CALLBACKS);
    let place = copy.load().unwrap().places[0].clone();
    let capturing = stream(&place);
    capturing.begin_capture(CaptureMode::Relaxed).unwrap();
    let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (counter, guard) = (ran.clone(), Dropped(dropped.clone()));
    capturing
        .launch_host_func(Box::new(move || {
            let _keep = &guard;
            counter.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    let graph = capturing.end_capture().unwrap();
    // Never launched: the graph and its host function go once the graph is dropped.
    drop(graph);
    assert!(
        wait_until(|| dropped.load(Ordering::SeqCst) == 1),
        "the graph's host function is dropped with the graph"
    );
    // The plug-in calls the captured callback anyway (after the graph it belonged to).
    assert_eq!(copy.run_queued(), 1);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "a host function of a destroyed graph ran"
    );
}

/// Counts its drop.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_host_function_captured_by_a_dropped_stream_is_released_with_its_capture() {
    use devstream_core::{DeviceBackend, DeviceEvent};
    use devstream_plugin::PluginBackend;
    let _alone = alone();
    let place = cpu0();
    let events_before = PluginBackend::live_counts().events;
    for mode in [
        CaptureMode::Global,
        CaptureMode::ThreadLocal,
        CaptureMode::Relaxed,
    ] {
        let capturing = stream(&place);
        capturing.begin_capture(mode).unwrap();
        // An event recorded in the capture, held by a host function captured after it.
        let event = capturing.record_event().unwrap();
        let held = event.clone();
        capturing
            .launch_host_func(Box::new(move || drop(held.query())))
            .unwrap();
        drop(event);
        drop(capturing);
        assert!(
            wait_until(|| PluginBackend::live_counts().events == events_before),
            "{mode:?}: the captured host function (and the event it holds) outlived the \
             capture its dropped stream ended: {:?}",
            PluginBackend::live_counts()
        );
    }
}

/// A copy of the faulty plug-in in `mode` (one whose `cuda_stream_begin_capture` begins the
/// capture and answers `C_WARNING`), its place, and a stream on it whose `begin_capture(Global)`
/// failed.
fn a_failed_begin(mode: u32) -> (Faulty, Place, PluginStream) {
    let copy = Faulty::unique(mode);
    let place = copy.load().unwrap().places[0].clone();
    let capturing = stream(&place);
    assert!(
        matches!(
            capturing.begin_capture(CaptureMode::Global),
            Err(Error::Capture { .. })
        ),
        "a begin the plug-in answered with C_WARNING is refused"
    );
    (copy, place, capturing)
}

/// Records an event on `stream` and launches a host function holding it (and counting its
/// runs); the test's own handle on the event is dropped.
fn launch_holding_an_event(stream: &PluginStream) -> devstream_core::Result<Arc<AtomicUsize>> {
    let event = stream.record_event()?;
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = ran.clone();
    stream.launch_host_func(Box::new(move || {
        let _held = &event;
        counted.fetch_add(1, Ordering::SeqCst);
    }))?;
    Ok(ran)
}

fn live_events() -> usize {
    use devstream_core::DeviceBackend;
    devstream_plugin::PluginBackend::live_counts().events
}

#[test]
fn a_capture_the_plug_in_began_while_answering_an_error_takes_no_work() {
    let _alone = alone();
    let events_before = live_events();
    for end in ["the stream is dropped", "the stream is synchronized"] {
        let (_copy, place, capturing) =
            a_failed_begin(devstream_test_plugin_faulty::MODE_CAPTURE_BEGUN_WITH_WARNING);
        assert!(
            !capturing.is_capturing().unwrap(),
            "{end}: a refused begin leaves the stream capturing in the plug-in"
        );
        assert_synchronizes(&stream(&place), "a refused begin");
        // Ordinary work: it runs (this plug-in runs callbacks inside stream_add_callback).
        let ran = launch_holding_an_event(&capturing).unwrap();
        assert_eq!(
            ran.load(Ordering::SeqCst),
            1,
            "{end}: the host function went into a capture devstream does not know"
        );
        if end == "the stream is synchronized" {
            capturing.synchronize().unwrap();
        }
        drop(capturing);
        assert!(
            wait_until(|| live_events() == events_before),
            "{end}: the host function (and the event it holds) outlived its stream: {} live \
             events, {events_before} before",
            live_events()
        );
    }
}

#[test]
fn a_capture_the_plug_in_began_while_answering_an_error_and_would_not_end_refuses_work() {
    let _alone = alone();
    let events_before = live_events();
    let (_copy, place, capturing) = a_failed_begin(
        devstream_test_plugin_faulty::MODE_CAPTURE_BEGUN_WITH_WARNING_END_FAILS_ONCE,
    );
    // The plug-in refused to end what it began: devstream keeps it as an invalid capture.
    assert!(capturing.is_capturing().unwrap());
    assert!(
        matches!(
            launch_holding_an_event(&capturing),
            Err(Error::Capture { .. })
        ),
        "work submitted into the capture the plug-in would not end"
    );
    assert!(matches!(
        capturing.end_capture(),
        Err(Error::Capture { .. })
    ));
    assert!(!capturing.is_capturing().unwrap());
    assert_synchronizes(&stream(&place), "the ended capture");
    let ran = launch_holding_an_event(&capturing).unwrap();
    capturing.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    drop(capturing);
    assert!(
        wait_until(|| live_events() == events_before),
        "{} live events, {events_before} before",
        live_events()
    );
}

#[test]
fn begin_capture_leaves_alone_a_capture_other_code_began_on_the_stream() {
    let _alone = alone();
    let copy = Faulty::unique(devstream_test_plugin_faulty::MODE_CAPTURE_BEGUN_WITH_WARNING);
    let place = copy.load().unwrap().places[0].clone();
    let capturing = stream(&place);
    let raw = capturing.as_raw().unwrap() as usize;
    // SAFETY: the signature is `bool(size_t, bool)`.
    let foreign = unsafe {
        copy.library
            .as_ref()
            .unwrap()
            .get::<unsafe extern "C" fn(usize, bool) -> bool>(
                b"devstream_test_plugin_faulty_foreign_capture\0",
            )
    }
    .unwrap();
    // SAFETY: plain bookkeeping in the plug-in.
    let began = unsafe { foreign(raw, true) };
    assert!(began, "other code begins a capture");
    assert!(matches!(
        capturing.begin_capture(CaptureMode::Global),
        Err(Error::Capture { .. })
    ));
    assert!(
        capturing.is_capturing().unwrap(),
        "devstream's refused begin ended the capture other code began"
    );
    // SAFETY: as above.
    let ended = unsafe { foreign(raw, false) };
    assert!(ended, "other code ends its capture");
    assert!(!capturing.is_capturing().unwrap());
}

/// `begin_capture` behind a flag wait not yet reached, on a plug-in that runs callbacks inside
/// `stream_add_callback`: handing the wait over as a blocking callback would block the calling
/// thread until the flag is written (for good when that thread is the writer, or when the write
/// needs something the thread holds). It answers `Error::Capture` instead, the wait stays held,
/// and once the flag is written the work behind it runs (found by the `plugin_loader` fuzzer:
/// begin_capture hung behind waits for completions).
#[test]
fn begin_capture_behind_an_unreached_wait_on_an_inline_plugin_is_refused_not_blocked() {
    let _alone = alone();
    let copy = Faulty::unique(devstream_test_plugin_faulty::MODE_CAPTURE_BEGUN_WITH_WARNING);
    let place = copy.load().unwrap().places[0].clone();
    let capturing = stream(&place);
    let flag = PluginBackend::new_flag(&place).unwrap();
    capturing.wait_flag(&flag, 1).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&ran);
    capturing
        .launch_host_func(Box::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    let (answered, answer) = std::sync::mpsc::channel();
    let beginner = capturing.clone();
    std::thread::spawn(move || {
        let _ = answered.send(beginner.begin_capture(CaptureMode::Global));
    });
    let answer = answer
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("begin_capture blocked on the unreached wait");
    assert!(matches!(answer, Err(Error::Capture { .. })), "{answer:?}");
    assert!(!capturing.is_capturing().unwrap());
    assert_eq!(ran.load(Ordering::SeqCst), 0, "work behind the wait ran");
    flag.set(1);
    capturing.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(!capturing.is_capturing().unwrap());
}

/// A plug-in that gives every stream one handle (Paddle's reference plug-ins answer null)
/// captures them all with one begin: the other streams' work, the callbacks that release what
/// their finished work used among it, would become graph nodes and never run as stream work
/// (found by `plugin_loader`: a stream kept alive for good after a `Global` capture on another
/// stream with the same null handle). So a capture does not begin on a stream whose handle
/// another live stream has, and no stream is made with such a handle while a capture of the
/// plug-in is in progress; a stream alone on its handle captures as usual.
#[test]
fn a_capture_does_not_begin_on_a_plug_in_stream_handle_that_another_live_stream_has() {
    let _alone = alone();
    let copy = Faulty::unique(devstream_test_plugin_faulty::MODE_CAPTURE_SHARED_STREAMS);
    let place = copy.load().unwrap().places[0].clone();
    let first = stream(&place);
    let second = stream(&place);
    assert!(
        matches!(
            first.begin_capture(CaptureMode::Relaxed),
            Err(Error::Capture { .. })
        ),
        "a capture began on a handle two live streams share"
    );
    assert!(!first.is_capturing().unwrap());
    second.synchronize().unwrap();
    drop(second);
    // The dropped stream's plug-in stream is destroyed by the reaper, after its work.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match first.begin_capture(CaptureMode::Relaxed) {
            Ok(()) => break,
            Err(Error::Capture { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(error) => panic!("the stream alone on its handle cannot capture: {error}"),
        }
    }
    assert!(
        matches!(
            PluginBackend::new_stream(&place, Default::default()),
            Err(Error::Capture { .. })
        ),
        "a stream was made with the capturing stream's handle"
    );
    drop(first.end_capture().unwrap());
    let third = stream(&place);
    third.synchronize().unwrap();
    first.synchronize().unwrap();
}
