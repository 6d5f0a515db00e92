//! Events: never-recorded events are complete, recording captures the stream's work so far,
//! re-recording replaces it, `synchronize` waits, `elapsed` and its errors.

use crate::harness::{
    caps, for_each_place, not_applicable, wait_until, within, Gate, Log, PATIENCE,
};
use devstream::{Error, Event, EventFlags, Stream};
use std::collections::HashSet;
use std::time::Duration;

/// A never-recorded event queries true and synchronizes at once; its place and flags read back.
#[test]
fn never_recorded_event_is_complete() {
    for_each_place(|place| {
        for flags in [
            EventFlags::default(),
            EventFlags {
                blocking_sync: true,
                ..EventFlags::default()
            },
        ] {
            let event = Event::new(place, flags)?;
            assert!(event.query()?, "a never-recorded event queries true");
            let e = event.clone();
            within(
                PATIENCE,
                "synchronize of a never-recorded event",
                move || e.synchronize(),
                || {},
            )?;
            assert_eq!(event.flags(), flags);
            assert_eq!(event.place(), Some(place.clone()));
        }
        if caps(place).timing {
            let timed = Event::new(place, EventFlags::timed())?;
            assert!(timed.flags().timing);
            assert!(timed.query()?);
        }
        Ok(())
    });
}

/// Clones of an event are equal and hash equal; distinct events have distinct ids.
#[test]
fn event_handles_compare_by_identity() {
    for_each_place(|place| {
        let stream = Stream::new(place)?;
        let mut ids = HashSet::new();
        for _ in 0..20 {
            let event = stream.record_event()?;
            assert_eq!(event.place(), Some(place.clone()));
            let clone = event.clone();
            assert_eq!(event, clone);
            let set: HashSet<Event> = [event.clone(), clone].into_iter().collect();
            assert_eq!(set.len(), 1, "clones hash equal");
            assert!(ids.insert(event.id()), "event ids are unique");
            let other = Event::new(place, EventFlags::default())?;
            assert_ne!(event, other);
            assert!(ids.insert(other.id()), "event ids are unique");
        }
        sync_stream(&stream)
    });
}

fn sync_stream(stream: &Stream) -> devstream::Result<()> {
    crate::harness::sync(stream)
}

/// A recorded event is incomplete while the work it captured is gated and complete after;
/// `synchronize` (also with `blocking_sync`) waits for that work.
#[test]
fn recorded_event_tracks_the_captured_work() {
    for_each_place(|place| {
        let caps = caps(place);
        if !caps.host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        for flags in [
            EventFlags::default(),
            EventFlags {
                blocking_sync: true,
                ..EventFlags::default()
            },
        ] {
            let stream = Stream::new(place)?;
            let log = Log::new();
            let Some(gate) = Gate::close(&stream)? else {
                not_applicable(place, "no gate");
                return Ok(());
            };
            stream.launch_host_func(log.task(1))?;
            let event = Event::new(place, flags)?;
            event.record(&stream)?;
            if caps.nonblocking_query {
                assert!(!event.query()?, "the captured work is gated");
            }
            let opener = gate.opener();
            let releaser = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                opener();
            });
            let e = event.clone();
            within(
                PATIENCE,
                "event synchronize",
                move || e.synchronize(),
                gate.opener(),
            )?;
            assert_eq!(
                log.entries(),
                vec![1],
                "event synchronize returned before the work ran"
            );
            assert!(event.query()?);
            releaser.join().unwrap();
        }
        Ok(())
    });
}

/// Re-recording an event replaces what it captures.
#[test]
fn re_recording_replaces_the_capture() {
    for_each_place(|place| {
        let caps = caps(place);
        let (busy, idle) = (Stream::new(place)?, Stream::new(place)?);
        let Some(gate) = Gate::close(&busy)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        let event = busy.record_event()?;
        if caps.nonblocking_query {
            assert!(!event.query()?, "recorded behind a closed gate");
        }
        event.record(&idle)?;
        if caps.concurrent_streams {
            let e = event.clone();
            within(
                PATIENCE,
                "event re-recorded on an idle stream",
                move || e.synchronize(),
                gate.opener(),
            )?;
            assert!(
                event.query()?,
                "re-recorded on an idle stream, the event completes"
            );
        }
        event.record(&busy)?;
        if caps.nonblocking_query {
            assert!(!event.query()?, "re-recorded behind the closed gate again");
        }
        gate.release();
        let e = event.clone();
        within(
            PATIENCE,
            "event synchronize",
            move || e.synchronize(),
            || {},
        )?;
        assert!(event.query()?);
        Ok(())
    });
}

/// `elapsed`: `TimingDisabled` when either event lacks timing, `NotRecorded` when either was
/// never recorded, `NotReady` when either is incomplete, else end minus start (positive).
#[test]
fn elapsed_errors_and_duration() {
    for_each_place(|place| {
        let caps = caps(place);
        let stream = Stream::new(place)?;
        // Timing off: complete, recorded events without timing.
        let (plain_a, plain_b) = (stream.record_event()?, stream.record_event()?);
        crate::harness::sync(&stream)?;
        assert_err!(plain_a.elapsed(&plain_b), Error::TimingDisabled);
        if !caps.timing {
            not_applicable(place, "no timing (Unsupported asserted in capabilities)");
            return Ok(());
        }
        let timed = || Event::new(place, EventFlags::timed());
        let (start, end) = (timed()?, timed()?);
        // Mixed timing.
        start.record(&stream)?;
        crate::harness::sync(&stream)?;
        assert_err!(start.elapsed(&plain_b), Error::TimingDisabled);
        assert_err!(plain_a.elapsed(&start), Error::TimingDisabled);
        // Never recorded, on either side.
        assert_err!(start.elapsed(&end), Error::NotRecorded);
        assert_err!(end.elapsed(&start), Error::NotRecorded);
        // Incomplete, on either side.
        if let Some(gate) = Gate::close(&stream)? {
            end.record(&stream)?;
            assert_err!(start.elapsed(&end), Error::NotReady);
            assert_err!(end.elapsed(&start), Error::NotReady);
            gate.release();
            let e = end.clone();
            within(
                PATIENCE,
                "event synchronize",
                move || e.synchronize(),
                || {},
            )?;
        } else {
            not_applicable(place, "no gate for NotReady");
        }
        // A measured duration: the end is recorded behind a gate held for ~20 ms. The start is
        // complete before the gate closes: its time is when the device reached it, which on a
        // loaded host can be later than its submission (then the hold would not lie between).
        let (start, end) = (timed()?, timed()?);
        start.record(&stream)?;
        crate::harness::sync(&stream)?;
        let held = Duration::from_millis(20);
        if let Some(gate) = Gate::close(&stream)? {
            end.record(&stream)?;
            std::thread::sleep(held);
            gate.release();
        } else {
            end.record(&stream)?;
        }
        crate::harness::sync(&stream)?;
        let elapsed = start.elapsed(&end)?;
        assert!(
            elapsed > Duration::ZERO,
            "elapsed is positive, got {elapsed:?}"
        );
        assert!(
            elapsed < Duration::from_secs(60),
            "elapsed {elapsed:?} is absurd"
        );
        if caps.flags || caps.host_funcs {
            assert!(
                elapsed >= held / 2,
                "the end was held ~{held:?} after the start, elapsed says {elapsed:?}"
            );
        }
        Ok(())
    });
}

/// An event recorded on a stream that is then re-used keeps reporting its own capture only.
#[test]
fn event_completes_independently_of_later_stream_work() {
    for_each_place(|place| {
        let caps = caps(place);
        let stream = Stream::new(place)?;
        let early = stream.record_event()?;
        let Some(gate) = Gate::close(&stream)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        let late = stream.record_event()?;
        assert!(
            wait_until(PATIENCE, || early.query().unwrap_or(false)),
            "an event recorded before the gate completes while later work is held"
        );
        if caps.nonblocking_query {
            assert!(!late.query()?);
        }
        gate.release();
        let l = late.clone();
        within(
            PATIENCE,
            "event synchronize",
            move || l.synchronize(),
            || {},
        )?;
        Ok(())
    });
}
