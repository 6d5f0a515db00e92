//! Stream and event calls: create, destroy, query, synchronise, host callbacks, records and
//! waits, and the device's synchronisation.

use crate::draw::{stream_arg, Draw};
use crate::model::{expect, expect_destroyed, EventState, Kind, Model, StreamState};
use crate::racer::Racer;
use crate::UNWRITTEN;
use devstream_paddle_sys::*;
use libfuzzer_sys::arbitrary::Result as Drawn;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the callbacks the fuzzer queues do, by bit of their `user_data`.
const CALLBACK_FAILS: usize = 1;
const CALLBACK_QUERIES: usize = 2;
const CALLBACK_SYNCHRONIZES: usize = 4;

/// Callbacks run (a sanity count, and the reentrant calls' answers are checked in them).
static CALLBACKS: AtomicUsize = AtomicUsize::new(0);

/// The callback of `stream_add_callback`: `user_data` is a set of `CALLBACK_*` bits.
unsafe extern "C" fn callback(
    device: C_Device,
    stream: C_Stream,
    user_data: *mut c_void,
    status: *mut C_Status,
) {
    CALLBACKS.fetch_add(1, Ordering::Relaxed);
    let what = user_data as usize;
    // A host function may call the API on its own stream: an answer, never a hang or a crash.
    if what & CALLBACK_QUERIES != 0 {
        let answer = call!(query_stream(device, stream));
        assert!(
            [C_SUCCESS, C_FAILED, C_ERROR].contains(&answer),
            "query_stream in a callback answered {answer:?}"
        );
    }
    if what & CALLBACK_SYNCHRONIZES != 0 {
        let answer = call!(synchronize_stream(device, stream));
        assert!(
            [C_SUCCESS, C_ERROR].contains(&answer),
            "synchronize_stream in a callback answered {answer:?}"
        );
    }
    if what & CALLBACK_FAILS != 0 {
        // SAFETY: the plug-in passes a writable status.
        unsafe { status.write(C_ERROR) };
    }
}

/// `create_stream` or `create_event` (`kind`), on a device that is real when `dev_ok`, with an
/// out-parameter that is null sometimes. Once it succeeded the handle is offered to the racer,
/// must be usable (while no capture is open: a new stream synchronises, a new event is
/// complete) and joins the model; once it failed, as the model says it must, nothing was
/// written.
fn create(d: &mut Draw, m: &mut Model, kind: Kind, (dev, dev_ok): (C_Device, bool)) -> Drawn<()> {
    let null_out = d.byte()? % 8 == 0;
    // A handle is a pointer: the plug-in writes it as one word.
    let mut out = UNWRITTEN;
    let out_ptr: *mut usize = if null_out { null_mut() } else { &mut out };
    let (what, answer) = match kind {
        Kind::Stream => ("create_stream", call!(create_stream(dev, out_ptr.cast()))),
        _ => ("create_event", call!(create_event(dev, out_ptr.cast()))),
    };
    expect(m, what, answer, dev_ok && !null_out, &[C_SUCCESS]);
    if answer != C_SUCCESS {
        assert_eq!(out, UNWRITTEN, "{what} wrote on failure");
        return Ok(());
    }
    assert!(out != 0 && out != UNWRITTEN);
    Racer::offer(out);
    if !m.relaxed() {
        let (what, answer) = match kind {
            // A new stream inherits nothing: its synchronisation succeeds.
            Kind::Stream => (
                "synchronize_stream of a new stream",
                call!(synchronize_stream(dev, out as C_Stream)),
            ),
            // A new event is complete (never recorded).
            _ => (
                "query_event of a new event",
                call!(query_event(dev, out as C_Event)),
            ),
        };
        expect(m, what, answer, true, &[C_SUCCESS]);
    }
    match kind {
        Kind::Stream => m.streams.push(StreamState {
            handle: out,
            may_fail: false,
            origin: None,
            joined: None,
        }),
        _ => m.events.push(EventState {
            handle: out,
            captured: None,
            may_fail: false,
        }),
    }
    Ok(())
}

/// Ops 0..=10 and 24.
pub(crate) fn step(d: &mut Draw, m: &mut Model, op: u8, dev: C_Device, dev_ok: bool) -> Drawn<()> {
    match op {
        0 => create(d, m, Kind::Stream, (dev, dev_ok))?,
        1 => {
            let s = d.value(m, Kind::Stream)?;
            let valid = dev_ok && m.is_live(Kind::Stream, s);
            // Destroying a live stream always succeeds, even capturing.
            let answer = call!(destroy_stream(dev, s as C_Stream));
            expect_destroyed(m, "destroy_stream", (Kind::Stream, s), valid, answer);
        }
        2 | 3 => {
            let s = stream_arg(d, m)?;
            let valid = dev_ok && (s == 0 || m.is_live(Kind::Stream, s));
            let captured = m.capture_of(s).is_some();
            if op == 2 {
                let answer = call!(query_stream(dev, s as C_Stream));
                expect(m, "query_stream", answer, valid, &[C_SUCCESS, C_FAILED]);
                let _ = captured;
            } else {
                let answer = call!(synchronize_stream(dev, s as C_Stream));
                let ok: &[C_Status] = if m.may_fail(s) {
                    &[C_SUCCESS, C_ERROR]
                } else {
                    &[C_SUCCESS]
                };
                expect(m, "synchronize_stream", answer, valid, ok);
                if valid && !m.relaxed() {
                    m.synchronized(s);
                }
            }
        }
        4 => {
            let s = stream_arg(d, m)?;
            let none = d.byte()? % 8 == 0;
            let what = (d.byte()? % 8) as usize;
            let valid = dev_ok && !none && (s == 0 || m.is_live(Kind::Stream, s));
            let f: C_Callback = if none { None } else { Some(callback) };
            let answer = call!(stream_add_callback(
                dev,
                s as C_Stream,
                f,
                what as *mut c_void
            ));
            expect(m, "stream_add_callback", answer, valid, &[C_SUCCESS]);
            if answer == C_SUCCESS && what & CALLBACK_FAILS != 0 {
                m.work_may_fail(s);
            }
            // A callback that synchronises its stream gets an error, which its stream may
            // then report too.
            if answer == C_SUCCESS && what & CALLBACK_SYNCHRONIZES != 0 {
                m.taint(s);
            }
        }
        5 => create(d, m, Kind::Event, (dev, dev_ok))?,
        6 => {
            // `destroy_event` names no device in the table's contract (it is not read).
            let e = d.value(m, Kind::Event)?;
            let valid = m.is_live(Kind::Event, e);
            let answer = call!(destroy_event(dev, e as C_Event));
            expect_destroyed(m, "destroy_event", (Kind::Event, e), valid, answer);
        }
        7 => {
            let s = stream_arg(d, m)?;
            let e = d.value(m, Kind::Event)?;
            let valid =
                dev_ok && (s == 0 || m.is_live(Kind::Stream, s)) && m.is_live(Kind::Event, e);
            let answer = call!(record_event(dev, s as C_Stream, e as C_Event));
            expect(m, "record_event", answer, valid, &[C_SUCCESS]);
            if answer == C_SUCCESS {
                let capture = m.capture_of(s);
                let may_fail = m.may_fail(s);
                if let Some(ev) = m.event(e) {
                    ev.captured = capture;
                    ev.may_fail = may_fail;
                }
            }
        }
        8 | 9 => {
            let e = d.value(m, Kind::Event)?;
            let valid = m.is_live(Kind::Event, e);
            let captured = m
                .events
                .iter()
                .any(|ev| ev.handle == e && ev.captured.is_some());
            if op == 8 {
                let answer = call!(query_event(dev, e as C_Event));
                let ok: &[C_Status] = if captured {
                    &[C_SUCCESS, C_FAILED, C_ERROR]
                } else {
                    &[C_SUCCESS, C_FAILED]
                };
                expect(m, "query_event", answer, valid, ok);
            } else {
                let answer = call!(synchronize_event(dev, e as C_Event));
                let ok: &[C_Status] = if captured {
                    &[C_SUCCESS, C_ERROR]
                } else {
                    &[C_SUCCESS]
                };
                expect(m, "synchronize_event", answer, valid, ok);
            }
        }
        10 => {
            let s = stream_arg(d, m)?;
            let e = d.value(m, Kind::Event)?;
            let valid =
                dev_ok && (s == 0 || m.is_live(Kind::Stream, s)) && m.is_live(Kind::Event, e);
            let captured = m
                .events
                .iter()
                .any(|ev| ev.handle == e && ev.captured.is_some());
            let answer = call!(stream_wait_event(dev, s as C_Stream, e as C_Event));
            let ok: &[C_Status] = if captured {
                &[C_SUCCESS, C_ERROR]
            } else {
                &[C_SUCCESS]
            };
            expect(m, "stream_wait_event", answer, valid, ok);
            if answer == C_SUCCESS {
                let (capture, may_fail) = m
                    .events
                    .iter()
                    .find(|ev| ev.handle == e)
                    .map(|ev| (ev.captured, ev.may_fail))
                    .unwrap_or((None, false));
                let open = capture.filter(|id| m.captures.iter().any(|c| c.id == *id));
                if may_fail {
                    m.taint(s);
                }
                if let (Some(id), Some(st)) = (open, m.stream(s)) {
                    if st.origin.is_none() {
                        st.joined = Some(id);
                    }
                }
            }
        }
        24 => {
            let answer = call!(synchronize_device(dev));
            let any_fail = m.null_may_fail || m.streams.iter().any(|s| s.may_fail);
            let ok: &[C_Status] = if any_fail {
                &[C_SUCCESS, C_ERROR]
            } else {
                &[C_SUCCESS]
            };
            expect(m, "synchronize_device", answer, dev_ok, ok);
            if dev_ok && !m.relaxed() {
                m.null_may_fail = false;
                for s in &mut m.streams {
                    s.may_fail = false;
                }
            }
        }
        _ => unreachable!("op {op} is no stream or event call"),
    }
    Ok(())
}
