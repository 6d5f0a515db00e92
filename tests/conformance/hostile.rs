//! Hostile use: the class of misuse a careful library survives, not just the cases a review
//! found.
//!
//! * Every public stream/event/buffer/flag call made from inside a host function: on its own
//!   stream, on another stream, on another place. The rule (`devstream_core::traits`, "Host
//!   functions"): a host function sees stream order up to itself, never waits for work queued
//!   after it, and where a call cannot be honoured it is a typed error, never a hang. So each
//!   call may answer the correct result or any `Err` (printed), and fails on a wrong result or
//!   a hang.
//! * Panics whose payload's `Drop` panics (three levels deep), in host functions and in the
//!   destructors of host closures (after running, and dropped unrun with a graph or an
//!   invalidated capture); afterwards the stream and the place still work.
//! * Current-stream guards dropped in every order on several threads at once; stream, event,
//!   graph, buffer and flag handles dropped in every order on another thread while their work
//!   is queued.
//! * Graphs launched from several threads on several streams and dropped while running; a
//!   graph's host-function panic reported on the stream whose launch panicked; buffers and flags
//!   dropped during and after a capture, then the graph replayed.
//!
//! A broken backend can wedge a place here (a host function stuck forever, a dead worker), so
//! each check that runs work runs in a child process ([`for_each_place_isolated`]), every call
//! that could hang has a [`HANG`] watchdog naming its line, and the child is killed at a
//! deadline: a hang fails in seconds and never stalls the rest of the suite.

use crate::harness::{
    caps, for_each_place_isolated, not_applicable, places_under_test, within, Gate, Log, HANG,
};
use devstream::{
    current_stream, CaptureMode, CaptureSupport, Event, EventFlags, Flag, Place, Result, Stream,
};
use std::panic::Location;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Instant;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// Whether the place has host functions (every check here needs them); prints why not.
pub(crate) fn host_funcs(place: &Place) -> bool {
    let on = caps(place).host_funcs;
    if !on {
        not_applicable(
            place,
            "no host functions (Unsupported asserted in capabilities)",
        );
    }
    on
}

/// Whether the place captures host functions; prints why not.
pub(crate) fn captures_host_funcs(place: &Place) -> bool {
    let caps = caps(place);
    let on = caps.capture != CaptureSupport::None && caps.capture_host_funcs;
    if !on {
        not_applicable(place, "no capture of host functions");
    }
    on
}

enum Report<T> {
    Started,
    Done(T),
}

/// A call made inside a host function; its result comes back on a channel.
#[must_use = "a call inside a host function is checked through its outcome"]
pub(crate) struct Inside<T> {
    rx: Receiver<Report<T>>,
    what: String,
}

/// Launches a host function on `stream` that makes `call` once and reports its result.
pub(crate) fn inside<T: Send + 'static>(
    stream: &Stream,
    what: &str,
    call: impl FnOnce() -> T + Send + 'static,
) -> Result<Inside<T>> {
    let (tx, rx) = channel();
    let mut call = Some(call);
    stream.launch_host_func(move || {
        if let Some(call) = call.take() {
            let _ = tx.send(Report::Started);
            let _ = tx.send(Report::Done(call()));
        }
    })?;
    Ok(Inside {
        rx,
        what: what.to_string(),
    })
}

impl<T> Inside<T> {
    /// The call's result. Panics at the caller's line when the host function did not start, or
    /// the call inside it did not return, within [`HANG`] (a hang), or it panicked.
    #[track_caller]
    fn outcome(self) -> T {
        let deadline = Instant::now() + *HANG;
        let mut started = false;
        loop {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(Report::Started) => started = true,
                Ok(Report::Done(value)) => return value,
                Err(RecvTimeoutError::Timeout) if started => panic!(
                    "{}: the call inside the host function did not return within {:?} (a hang)",
                    self.what, *HANG
                ),
                Err(RecvTimeoutError::Timeout) => panic!(
                    "{}: the host function did not start within {:?} (the stream is stuck)",
                    self.what, *HANG
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "{}: the host function panicked or was dropped unrun (started: {started})",
                    self.what
                ),
            }
        }
    }
}

/// `Some(value)` for `Ok`; for `Err` (a typed error, which the rule allows where a call cannot
/// be honoured) prints it and gives `None`.
#[track_caller]
fn honoured<T>(what: &str, result: Result<T>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            eprintln!(
                "[conformance] hostile: {}: {what}: typed error (allowed): {e:?}",
                Location::caller()
            );
            None
        }
    }
}

/// Runs `f` on another thread under a [`HANG`] watchdog; a hang fails naming the caller's line.
#[track_caller]
pub(crate) fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let at = Location::caller();
    within(*HANG, &format!("{at}: {what}"), f, || {})
}

/// A clone of `stream`'s `synchronize` under a [`HANG`] watchdog.
#[track_caller]
pub(crate) fn sync_soon(stream: &Stream, what: &str) -> Result<()> {
    let s = stream.clone();
    bounded(what, move || s.synchronize())
}

/// After hostile work: a new stream of the place runs a host function and synchronizes in time.
#[track_caller]
pub(crate) fn place_still_works(place: &Place) -> Result<()> {
    let p = place.clone();
    bounded(
        &format!("a new stream on {place}, a host function and synchronize"),
        move || -> Result<()> {
            let stream = Stream::new(&p)?;
            if !stream.capabilities().host_funcs {
                // A place without host functions (a plug-in without stream_add_callback).
                let done = stream.record_event()?;
                stream.synchronize()?;
                assert!(done.query()?, "a new stream's event after synchronize");
                return Ok(());
            }
            let log = Log::new();
            stream.launch_host_func(log.task(1u32))?;
            stream.synchronize()?;
            assert_eq!(log.entries(), vec![1], "a new stream's host function");
            Ok(())
        },
    )
}

/// A host function reading a host buffer sees the copy queued before it in stream order and
/// does not wait for the copy queued after it.
#[test]
fn host_fn_reads_host_buffer_in_stream_order() {
    for_each_place_isolated(
        "hostile::host_fn_reads_host_buffer_in_stream_order",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            const N: usize = 256;
            let (first, second) = (pattern(N, 1), pattern(N, 2));
            let stream = Stream::new(place)?;
            let dev = stream.alloc(N)?;
            let host = Arc::new(stream.alloc_host(N)?);
            stream.copy_from_host(&dev, 0, &first)?;
            stream.copy_device_to_host(&host, 0, &dev, 0, N)?;
            // Hold the stream so the copies after the reads are queued before the reads run.
            let gate = Gate::close(&stream)?;
            let h = host.clone();
            let whole = inside(&stream, "to_vec of a host buffer", move || h.to_vec())?;
            let h = host.clone();
            let part = inside(&stream, "read of a host buffer", move || {
                let mut out = vec![0; 16];
                h.read(8, &mut out).map(|()| out)
            })?;
            stream.copy_from_host(&dev, 0, &second)?;
            stream.copy_device_to_host(&host, 0, &dev, 0, N)?;
            drop(gate);
            if let Some(seen) = honoured("to_vec inside a host function", whole.outcome()) {
                assert!(
                seen == first,
                "a host function's to_vec did not see exactly the copy before it in stream order"
            );
            }
            if let Some(seen) = honoured("read inside a host function", part.outcome()) {
                assert_eq!(
                    seen,
                    first[8..24],
                    "a host function's read, out of stream order"
                );
            }
            sync_soon(&stream, "synchronize after the reads")?;
            assert!(host.to_vec()? == second, "the copy after the reads");
            place_still_works(place)
        },
    );
}

/// A host function writing a host buffer: work queued after it sees the write; a copy into the
/// buffer queued after it is not waited for and lands after it.
#[test]
fn host_fn_writes_host_buffer_in_stream_order() {
    for_each_place_isolated(
        "hostile::host_fn_writes_host_buffer_in_stream_order",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            const N: usize = 128;
            let stream = Stream::new(place)?;
            let staged = Arc::new(stream.alloc_host(N)?);
            let out = stream.alloc_host(N)?;
            let dev = stream.alloc(N)?;
            let gate = Gate::close(&stream)?;
            let h = staged.clone();
            let data = pattern(N, 3);
            let wrote = inside(&stream, "write of a host buffer", move || h.write(0, &data))?;
            stream.copy_host_to_device(&dev, 0, &staged, 0, N)?;
            stream.copy_device_to_host(&out, 0, &dev, 0, N)?;
            stream.fill(&dev, 0, N, 0xAA)?;
            stream.copy_device_to_host(&staged, 0, &dev, 0, N)?;
            drop(gate);
            let wrote = honoured("write inside a host function", wrote.outcome()).is_some();
            sync_soon(&stream, "synchronize after the write")?;
            if wrote {
                assert!(
                    out.to_vec()? == pattern(N, 3),
                    "work queued after a host function did not see its write to a host buffer"
                );
            }
            assert!(
                staged.to_vec()? == vec![0xAA; N],
                "the copy queued after the write"
            );
            place_still_works(place)
        },
    );
}

/// A host function writes a host buffer whose upload is queued on another stream of the same
/// place, behind an event recorded after the host function: the write does not wait for that
/// upload (it comes after the host function), or answers a typed error at once, never a hang;
/// an honoured write is what the upload copies.
#[test]
fn host_fn_writes_host_buffer_uploaded_by_another_stream_after_it() {
    for_each_place_isolated(
        "hostile::host_fn_writes_host_buffer_uploaded_by_another_stream_after_it",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            const N: usize = 96;
            let (writer, uploader) = (Stream::new(place)?, Stream::new(place)?);
            let staged = Arc::new(writer.alloc_host(N)?);
            let (dev, out) = (uploader.alloc(N)?, uploader.alloc_host(N)?);
            let gate = Gate::close(&writer)?;
            let h = staged.clone();
            let data = pattern(N, 6);
            let wrote = inside(&writer, "write of a host buffer", move || h.write(0, &data))?;
            uploader.wait_event(&writer.record_event()?)?;
            uploader.copy_host_to_device(&dev, 0, &staged, 0, N)?;
            uploader.copy_device_to_host(&out, 0, &dev, 0, N)?;
            drop(gate);
            let wrote = honoured("write inside a host function", wrote.outcome()).is_some();
            sync_soon(&writer, "synchronize the writer")?;
            sync_soon(&uploader, "synchronize the uploader")?;
            if wrote {
                assert!(
                    out.to_vec()? == pattern(N, 6),
                    "an upload ordered after a host function did not see its write"
                );
            }
            place_still_works(place)
        },
    );
}

/// A host function on one stream reads a host buffer whose copies are on another stream: it
/// sees the copy it waited for and does not wait for the copy ordered after it (through an event
/// recorded after it).
#[test]
fn host_fn_reads_host_buffer_of_another_stream() {
    for_each_place_isolated(
        "hostile::host_fn_reads_host_buffer_of_another_stream",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            const N: usize = 200;
            let (first, second) = (pattern(N, 4), pattern(N, 5));
            let (writer, reader) = (Stream::new(place)?, Stream::new(place)?);
            let dev = writer.alloc(N)?;
            let host = Arc::new(writer.alloc_host(N)?);
            writer.copy_from_host(&dev, 0, &first)?;
            writer.copy_device_to_host(&host, 0, &dev, 0, N)?;
            let copied = writer.record_event()?;
            let gate = Gate::close(&reader)?;
            reader.wait_event(&copied)?;
            let h = host.clone();
            let read = inside(
                &reader,
                "to_vec of another stream's host buffer",
                move || h.to_vec(),
            )?;
            let read_done = reader.record_event()?;
            writer.wait_event(&read_done)?;
            writer.copy_from_host(&dev, 0, &second)?;
            writer.copy_device_to_host(&host, 0, &dev, 0, N)?;
            drop(gate);
            if let Some(seen) = honoured("to_vec inside a host function", read.outcome()) {
                assert!(
                    seen == first,
                    "a host function read another stream's host buffer out of happens-before order"
                );
            }
            sync_soon(&reader, "synchronize the reader")?;
            sync_soon(&writer, "synchronize the writer")?;
            assert!(host.to_vec()? == second, "the copy after the read");
            place_still_works(place)
        },
    );
}

/// Every stream, event, flag and buffer call on its own stream from inside a host function
/// (all but waiting for the stream itself, in the next test): each is honoured in stream order
/// or a typed error, never a hang.
#[test]
fn host_fn_calls_the_api_on_its_own_stream() {
    for_each_place_isolated(
        "hostile::host_fn_calls_the_api_on_its_own_stream",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            let caps = caps(place);
            let stream = Stream::new(place)?;
            let idle = Stream::new(place)?;
            let log: Log<&'static str> = Log::new();
            let current_before = current_stream(place)?;

            let before = stream.record_event()?;
            let e = before.clone();
            if let Some(done) = honoured(
                "query of an event recorded before",
                inside(&stream, "query of an event recorded before it", move || {
                    e.query()
                })?
                .outcome(),
            ) {
                assert!(
                    done,
                    "an event recorded before a host function queried false inside it"
                );
            }
            let e = before.clone();
            honoured(
                "synchronize of an event recorded before",
                inside(
                    &stream,
                    "synchronize of an event recorded before it",
                    move || e.synchronize(),
                )?
                .outcome(),
            );

            let s = stream.clone();
            let recorded = honoured(
                "record_event on its own stream",
                inside(&stream, "record_event on its own stream", move || {
                    s.record_event()
                })?
                .outcome(),
            );
            let (s, p) = (stream.clone(), place.clone());
            honoured(
                "Event::new + record on its own stream",
                inside(
                    &stream,
                    "Event::new + record on its own stream",
                    move || Event::new(&p, EventFlags::default())?.record(&s),
                )?
                .outcome(),
            );

            let (s, l) = (stream.clone(), log.clone());
            let nested = honoured(
                "launch_host_func on its own stream",
                inside(&stream, "launch_host_func on its own stream", move || {
                    let launched = s.launch_host_func(l.task("nested"));
                    l.push("outer");
                    launched
                })?
                .outcome(),
            )
            .is_some();

            let idle_done = idle.record_event()?;
            let s = stream.clone();
            honoured(
                "wait_event on its own stream",
                inside(&stream, "wait_event on its own stream", move || {
                    s.wait_event(&idle_done)
                })?
                .outcome(),
            );
            let (s, i) = (stream.clone(), idle.clone());
            honoured(
                "wait_stream on its own stream",
                inside(&stream, "wait_stream on its own stream", move || {
                    s.wait_stream(&i)
                })?
                .outcome(),
            );
            let s = stream.clone();
            if let Some(capturing) = honoured(
                "is_capturing of its own stream",
                inside(&stream, "is_capturing of its own stream", move || {
                    s.is_capturing()
                })?
                .outcome(),
            ) {
                assert!(!capturing, "is_capturing true inside a host function");
            }

            let mut wrote_flag = None;
            if caps.flags {
                let written = Flag::new(place)?;
                let (s, f) = (stream.clone(), written.clone());
                if honoured(
                    "write_flag on its own stream",
                    inside(&stream, "write_flag on its own stream", move || {
                        s.write_flag(&f, 3)
                    })?
                    .outcome(),
                )
                .is_some()
                {
                    wrote_flag = Some(written);
                }
                let p = place.clone();
                if let Some(value) = honoured(
                    "Flag::new, set and get",
                    inside(&stream, "Flag::new, set and get", move || -> Result<u32> {
                        let f = Flag::new(&p)?;
                        f.set(9);
                        Ok(f.get())
                    })?
                    .outcome(),
                ) {
                    assert_eq!(value, 9, "a flag set inside a host function reads back");
                }
                let opener = Flag::new(place)?;
                let (s, f) = (stream.clone(), opener.clone());
                honoured(
                    "wait_flag on its own stream",
                    inside(&stream, "wait_flag on its own stream", move || {
                        s.wait_flag(&f, 1)
                    })?
                    .outcome(),
                );
                // Opens the wait queued from inside (later host functions queue behind it).
                opener.set(1);
            }

            let host = Arc::new(stream.alloc_host(64)?);
            let (s, h) = (stream.clone(), host.clone());
            let copied = honoured(
                "alloc, fill and copies on its own stream",
                inside(
                    &stream,
                    "alloc, fill and copies on its own stream",
                    move || {
                        let dev = s.alloc(64)?;
                        let _spare = s.alloc_host(8)?;
                        s.copy_from_host(&dev, 0, &pattern(64, 6))?;
                        s.fill(&dev, 0, 4, 0xEE)?;
                        let dev2 = s.alloc(64)?;
                        s.copy_device_to_device(&dev2, 0, &dev, 0, 64)?;
                        s.copy_device_to_host(&h, 0, &dev2, 0, 64)
                    },
                )?
                .outcome(),
            )
            .is_some();

            let (s, p) = (stream.clone(), place.clone());
            if let Some(same) = honoured(
                "make_current and current_stream",
                inside(&stream, "make_current and current_stream", move || {
                    let _guard = s.make_current();
                    current_stream(&p).map(|c| c == s)
                })?
                .outcome(),
            ) {
                assert!(
                    same,
                    "make_current inside a host function did not make it current"
                );
            }

            let mut graph_launched = false;
            if captures_host_funcs(place) {
                let (s, p, l) = (stream.clone(), place.clone(), log.clone());
                graph_launched = honoured(
                    "capture on a new stream, launched on its own stream",
                    inside(
                        &stream,
                        "capture, then launch on its own stream",
                        move || {
                            let u = Stream::new(&p)?;
                            u.begin_capture(CaptureMode::ThreadLocal)?;
                            u.launch_host_func(l.task("graph"))?;
                            let g = u.end_capture()?;
                            g.launch(&s)
                        },
                    )?
                    .outcome(),
                )
                .is_some();
            }

            sync_soon(&stream, "synchronize after the calls")?;
            assert_eq!(
                current_stream(place)?,
                current_before,
                "a guard made inside a host function changed the caller's current stream"
            );
            let entries = log.entries();
            if nested {
                let (outer, inner) = (log.position(&"outer"), log.position(&"nested"));
                assert!(
                outer.is_some() && inner.is_some() && outer < inner,
                "a host function launched from a host function must run once, after it: {entries:?}"
            );
            }
            if graph_launched {
                assert!(
                    log.contains(&"graph"),
                    "a graph launched inside: {entries:?}"
                );
            }
            if copied {
                let mut expected = pattern(64, 6);
                expected[..4].fill(0xEE);
                assert!(
                    host.to_vec()? == expected,
                    "work queued from inside a host function"
                );
            }
            if let Some(flag) = wrote_flag {
                assert_eq!(flag.get(), 3, "a flag write queued inside a host function");
            }
            if let Some(event) = recorded {
                bounded("an event recorded inside a host function", move || {
                    event.synchronize()
                })?;
            }
            place_still_works(place)
        },
    );
}

/// A host function queries and synchronizes its own stream: the query is false (the host
/// function itself is not done) or a typed error; synchronize returns (it waits for nothing
/// after the host function) or is a typed error, never a hang.
#[test]
fn host_fn_queries_and_synchronizes_its_own_stream() {
    for_each_place_isolated(
        "hostile::host_fn_queries_and_synchronizes_its_own_stream",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            let stream = Stream::new(place)?;
            let s = stream.clone();
            if let Some(done) = honoured(
                "query of its own stream",
                inside(&stream, "query of its own stream", move || s.query())?.outcome(),
            ) {
                assert!(
                    !done,
                    "query of its own stream inside a host function says all work is done"
                );
            }
            let s = stream.clone();
            honoured(
                "synchronize of its own stream",
                inside(&stream, "synchronize of its own stream", move || {
                    s.synchronize()
                })?
                .outcome(),
            );
            let e = Event::new(place, EventFlags::default())?;
            e.record(&stream)?;
            let (s, e2) = (stream.clone(), e.clone());
            honoured(
                "re-record an event on its own stream, then synchronize it",
                inside(
                    &stream,
                    "re-record and synchronize an earlier event",
                    move || {
                        e2.synchronize()?;
                        e2.record(&s)
                    },
                )?
                .outcome(),
            );
            sync_soon(&stream, "synchronize after the calls")?;
            bounded("the re-recorded event", move || e.synchronize())?;
            place_still_works(place)
        },
    );
}

/// A host function calls the API on another stream of its place: query, record, launch, wait,
/// synchronize of another stream whose work is independent, an event of it, a graph launched on
/// it. Each is honoured or a typed error, never a hang.
#[test]
fn host_fn_calls_the_api_on_another_stream() {
    for_each_place_isolated(
        "hostile::host_fn_calls_the_api_on_another_stream",
        |place| {
            if !host_funcs(place) {
                return Ok(());
            }
            let (stream, other) = (Stream::new(place)?, Stream::new(place)?);
            let log: Log<&'static str> = Log::new();
            let o = other.clone();
            if let Some(done) = honoured(
                "query of an idle stream",
                inside(&stream, "query of another, idle stream", move || o.query())?.outcome(),
            ) {
                assert!(done, "an idle stream queried false inside a host function");
            }
            let o = other.clone();
            let recorded = honoured(
                "record_event on another stream",
                inside(&stream, "record_event on another stream", move || {
                    o.record_event()
                })?
                .outcome(),
            );
            let (o, l) = (other.clone(), log.clone());
            let launched = honoured(
                "launch_host_func on another stream",
                inside(&stream, "launch_host_func on another stream", move || {
                    o.launch_host_func(l.task("from inside"))
                })?
                .outcome(),
            )
            .is_some();
            // Work on the other stream that only its own progress ends, submitted from inside
            // (so still pending), then waited for from inside: it happens before the wait, so a
            // correct backend finishes it.
            let (o, l) = (other.clone(), log.clone());
            if let Some(ran) = honoured(
                "synchronize of another stream",
                inside(
                    &stream,
                    "synchronize of another stream with a host function pending",
                    move || {
                        o.launch_host_func(l.task("independent"))?;
                        o.synchronize().map(|()| l.contains(&"independent"))
                    },
                )?
                .outcome(),
            ) {
                assert!(
                    ran,
                    "synchronize of another stream returned before its work ran"
                );
            }
            let (o, l) = (other.clone(), log.clone());
            if let Some(ran) = honoured(
                "synchronize of another stream's event",
                inside(
                    &stream,
                    "synchronize of another stream's event, a host function pending before it",
                    move || {
                        o.launch_host_func(l.task("before the event"))?;
                        o.record_event()?.synchronize()?;
                        Ok(l.contains(&"before the event"))
                    },
                )?
                .outcome(),
            ) {
                assert!(ran, "an event's synchronize returned before its work ran");
            }
            let (s, o) = (stream.clone(), other.clone());
            honoured(
                "wait_event of its own event on another stream",
                inside(
                    &stream,
                    "record on its own stream, wait on another",
                    move || {
                        let e = s.record_event()?;
                        o.wait_event(&e)?;
                        o.wait_stream(&s)
                    },
                )?
                .outcome(),
            );
            let mut graph_launched = false;
            if captures_host_funcs(place) {
                let capturing = Stream::new(place)?;
                capturing.begin_capture(CaptureMode::ThreadLocal)?;
                capturing.launch_host_func(log.task("graph"))?;
                let graph = capturing.end_capture()?;
                let o = other.clone();
                graph_launched = honoured(
                    "graph launch on another stream",
                    inside(&stream, "graph launch on another stream", move || {
                        graph.launch(&o)
                    })?
                    .outcome(),
                )
                .is_some();
            }
            sync_soon(&stream, "synchronize the stream")?;
            sync_soon(&other, "synchronize the other stream")?;
            if launched {
                assert!(log.contains(&"from inside"), "{:?}", log.entries());
            }
            if graph_launched {
                assert!(log.contains(&"graph"), "{:?}", log.entries());
            }
            if let Some(event) = recorded {
                bounded("an event recorded inside a host function", move || {
                    event.synchronize()
                })?;
            }
            place_still_works(place)
        },
    );
}

/// A host function on one place calls the API of every other place under test (e.g. `cpu`
/// from a wgpu host function): new stream, host function, record and synchronize, query and
/// synchronize of a stream with independent work, a host buffer read, a cross-place wait
/// (honoured through a bridge or `PlaceMismatch`).
#[test]
fn host_fn_calls_the_api_of_another_place() {
    for_each_place_isolated("hostile::host_fn_calls_the_api_of_another_place", |place| {
        if !host_funcs(place) {
            return Ok(());
        }
        let others: Vec<Place> = places_under_test()
            .into_iter()
            .filter(|p| p != place)
            .collect();
        if others.is_empty() {
            not_applicable(place, "no other place under test");
        }
        let stream = Stream::new(place)?;
        for q in others {
            if !caps(&q).buffers {
                // The host-buffer read below needs buffers on the other place.
                not_applicable(place, &format!("{q} has no buffers"));
                continue;
            }
            const N: usize = 96;
            let data = pattern(N, 7);
            let remote = Stream::new(&q)?;
            let dev = remote.alloc(N)?;
            let host = Arc::new(remote.alloc_host(N)?);
            remote.copy_from_host(&dev, 0, &data)?;
            remote.copy_device_to_host(&host, 0, &dev, 0, N)?;
            let log: Log<&'static str> = Log::new();
            let remote_caps = caps(&q);

            let (q2, l) = (q.clone(), log.clone());
            let what = format!("new stream on {q}, host function, synchronize");
            if let Some(ran) = honoured(
                &what,
                inside(&stream, &what, move || -> Result<bool> {
                    let s = Stream::new(&q2)?;
                    if remote_caps.host_funcs {
                        s.launch_host_func(l.task("remote"))?;
                    }
                    let e = s.record_event()?;
                    e.synchronize()?;
                    s.synchronize()?;
                    Ok(l.contains(&"remote"))
                })?
                .outcome(),
            ) {
                assert_eq!(ran, remote_caps.host_funcs, "{what}: the host function");
            }
            let h = host.clone();
            let what = format!("read of a host buffer of {q}");
            if let Some(seen) =
                honoured(&what, inside(&stream, &what, move || h.to_vec())?.outcome())
            {
                assert!(seen == data, "{what}: wrong data");
            }
            let r = remote.clone();
            let what = format!("query and synchronize of a stream of {q}");
            if let Some(done) = honoured(
                &what,
                inside(&stream, &what, move || {
                    r.query()?;
                    r.synchronize()?;
                    r.query()
                })?
                .outcome(),
            ) {
                assert!(done, "{q}: query false after synchronize");
            }
            let (r, s) = (remote.clone(), stream.clone());
            let what = format!("{place} stream waits on an event of {q}");
            honoured(
                &what,
                inside(&stream, &what, move || {
                    let e = r.record_event()?;
                    s.wait_event(&e)
                })?
                .outcome(),
            );
            sync_soon(&stream, "synchronize the stream")?;
            sync_soon(&remote, "synchronize the remote stream")?;
        }
        place_still_works(place)
    });
}

// ---------------------------------------------------------------------------------------------
// Hostile panics
// ---------------------------------------------------------------------------------------------
