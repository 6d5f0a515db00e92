//! Stream semantics: submission order, `wait_event` / `wait_stream` ordering only later work and
//! never blocking the host, `query` true iff done, `synchronize` returning the first error
//! (`devstream_core::traits`, "Ordering" and "Errors").

use crate::harness::{
    caps, for_each_place, not_applicable, sync, wait_until, within, Gate, Log, PATIENCE,
};
use devstream::{Error, Event, EventFlags, Flag, Stream};
use std::time::Duration;

/// Host functions on one stream run once each, in submission order, and not before the stream
/// reaches them (the call returns before the function runs).
#[test]
fn work_runs_in_submission_order() {
    for_each_place(|place| {
        let caps = caps(place);
        let stream = Stream::new(place)?;
        if caps.flags {
            // Stream-ordered writes land in order: the last one wins.
            let flag = Flag::new(place)?;
            for value in 1..=50 {
                stream.write_flag(&flag, value)?;
            }
            sync(&stream)?;
            assert_eq!(flag.get(), 50, "write_flag values landed out of order");
        }
        if !caps.host_funcs {
            not_applicable(place, "no host functions to observe the order of");
            return Ok(());
        }
        let log = Log::new();
        let gate = Gate::close(&stream)?;
        for id in 0..200u32 {
            stream.launch_host_func(log.task(id))?;
        }
        if let Some(gate) = &gate {
            assert_eq!(log.len(), 0, "host functions ran before the gate opened");
            if caps.nonblocking_query {
                assert!(!stream.query()?, "query is true with gated work");
            }
            gate.release();
        }
        sync(&stream)?;
        assert_eq!(log.entries(), (0..200).collect::<Vec<_>>());
        if caps.flags {
            // Flag writes and host functions share one order.
            let flag = Flag::new(place)?;
            let seen = Log::new();
            for value in 1..=20 {
                stream.write_flag(&flag, value)?;
                let (f, s) = (flag.clone(), seen.clone());
                stream.launch_host_func(move || s.push(f.get()))?;
            }
            sync(&stream)?;
            assert_eq!(seen.entries(), (1..=20).collect::<Vec<_>>());
        }
        Ok(())
    });
}

/// Several host threads submitting to one stream: every task runs once, and each thread's tasks
/// run in that thread's submission order.
#[test]
fn submissions_from_many_threads_keep_each_threads_order() {
    for_each_place(|place| {
        if !caps(place).host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let log = Log::<(u32, u32)>::new();
        std::thread::scope(|scope| {
            for thread in 0..4u32 {
                let (stream, log) = (stream.clone(), log.clone());
                scope.spawn(move || {
                    for i in 0..100u32 {
                        stream.launch_host_func(log.task((thread, i))).unwrap();
                    }
                });
            }
        });
        sync(&stream)?;
        let entries = log.entries();
        assert_eq!(entries.len(), 400);
        for thread in 0..4 {
            let mine: Vec<u32> = entries
                .iter()
                .filter(|(t, _)| *t == thread)
                .map(|(_, i)| *i)
                .collect();
            assert_eq!(
                mine,
                (0..100).collect::<Vec<_>>(),
                "thread {thread}'s order"
            );
        }
        Ok(())
    });
}

/// `wait_event` returns at once even when the awaited work cannot finish (the host never
/// blocks), orders only work submitted after it, and only behind what the event captured.
#[test]
fn wait_event_orders_only_later_work_and_never_blocks() {
    for_each_place(|place| {
        let caps = caps(place);
        if !caps.host_funcs {
            not_applicable(place, "no host functions to observe ordering");
            return Ok(());
        }
        let (a, b) = (Stream::new(place)?, Stream::new(place)?);
        let log = Log::new();
        let Some(first_gate) = Gate::close(&a)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        a.launch_host_func(log.task("a0"))?;
        let event = a.record_event()?;
        // Work on `a` after the record: not captured by `event`.
        let second_gate = Gate::close(&a)?.expect("a gate was possible once");
        a.launch_host_func(log.task("a1"))?;

        b.launch_host_func(log.task("b0"))?;
        let (b2, e2) = (b.clone(), event.clone());
        within(
            PATIENCE,
            "wait_event while the awaited work is gated (the host must not block)",
            move || b2.wait_event(&e2),
            first_gate.opener(),
        )?;
        b.launch_host_func(log.task("b1"))?;

        if caps.concurrent_streams {
            assert!(
                wait_until(PATIENCE, || log.contains(&"b0")),
                "work submitted before wait_event must not wait for the event"
            );
        }
        crate::harness::assert_stays_false("work after wait_event ran before the event", || {
            log.contains(&"b1")
        });
        if caps.nonblocking_query {
            assert!(!b.query()?, "b has gated work pending, query must be false");
            assert!(
                !event.query()?,
                "the event's work is gated, query must be false"
            );
        }

        first_gate.release();
        if caps.concurrent_streams {
            // b1 waits for a0 only, not for a1 (still gated).
            assert!(
                wait_until(PATIENCE, || log.contains(&"b1")),
                "work after wait_event still waits after the captured work finished \
                 (it must not wait for work submitted after the record)"
            );
            assert!(!log.contains(&"a1"), "a1 ran through a closed gate");
        }
        second_gate.release();
        sync(&a)?;
        sync(&b)?;
        let (a0, b1) = (log.position(&"a0").unwrap(), log.position(&"b1").unwrap());
        assert!(
            a0 < b1,
            "b1 ran before the work the event captured: {:?}",
            log.entries()
        );
        assert_eq!(
            log.len(),
            4,
            "each task runs exactly once: {:?}",
            log.entries()
        );
        Ok(())
    });
}

/// `wait_event` keeps what the event captured at the time of the call: re-recording the event
/// afterwards does not release work already waiting.
#[test]
fn wait_event_uses_the_capture_at_call_time() {
    for_each_place(|place| {
        let caps = caps(place);
        if !caps.host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let (a, b, c) = (
            Stream::new(place)?,
            Stream::new(place)?,
            Stream::new(place)?,
        );
        let log = Log::new();
        let Some(gate) = Gate::close(&a)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        a.launch_host_func(log.task("a0"))?;
        let event = Event::new(place, EventFlags::default())?;
        event.record(&a)?;
        b.wait_event(&event)?;
        b.launch_host_func(log.task("b1"))?;
        // Re-record on an idle stream: the event now captures nothing pending.
        event.record(&c)?;
        if caps.concurrent_streams {
            assert!(
                wait_until(PATIENCE, || event.query().unwrap_or(false)),
                "re-recorded on an idle stream, the event must complete"
            );
        }
        crate::harness::assert_stays_false(
            "b1 ran: the earlier wait must keep its capture",
            || log.contains(&"b1"),
        );
        gate.release();
        sync(&b)?;
        assert_eq!(log.entries(), vec!["a0", "b1"]);
        Ok(())
    });
}

/// Waiting on a never-recorded event orders nothing.
#[test]
fn waiting_on_a_never_recorded_event_is_a_no_op() {
    for_each_place(|place| {
        let stream = Stream::new(place)?;
        let event = Event::new(place, EventFlags::default())?;
        stream.wait_event(&event)?;
        let done = stream.record_event()?;
        sync(&stream)?;
        assert!(done.query()?);
        Ok(())
    });
}

/// `wait_stream(other)` returns at once and orders later work behind the work `other` had at
/// the time of the call, and not behind what `other` gets later.
#[test]
fn wait_stream_orders_behind_the_others_current_work() {
    for_each_place(|place| {
        let caps = caps(place);
        if !caps.host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let (a, b) = (Stream::new(place)?, Stream::new(place)?);
        let log = Log::new();
        let Some(first_gate) = Gate::close(&a)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        a.launch_host_func(log.task("a0"))?;
        let (b2, a2) = (b.clone(), a.clone());
        within(
            PATIENCE,
            "wait_stream while the other stream is gated",
            move || b2.wait_stream(&a2),
            first_gate.opener(),
        )?;
        b.launch_host_func(log.task("b1"))?;
        let second_gate = Gate::close(&a)?.expect("a gate was possible once");
        a.launch_host_func(log.task("a1"))?;

        crate::harness::assert_stays_false("b1 ran before a0", || log.contains(&"b1"));
        first_gate.release();
        if caps.concurrent_streams {
            assert!(
                wait_until(PATIENCE, || log.contains(&"b1")),
                "b waits for work submitted to a after wait_stream"
            );
        }
        second_gate.release();
        sync(&a)?;
        sync(&b)?;
        let entries = log.entries();
        let pos = |x| entries.iter().position(|e| *e == x).unwrap();
        assert!(pos("a0") < pos("b1"), "{entries:?}");
        assert!(pos("a0") < pos("a1"), "{entries:?}");
        // A stream waiting on itself is a no-op, not a deadlock.
        a.wait_stream(&a)?;
        a.launch_host_func(log.task("self"))?;
        sync(&a)?;
        assert!(log.contains(&"self"));
        Ok(())
    });
}

/// `query` is true iff all submitted work is done: false while gated work is pending, true
/// afterwards, and whenever it says true every submitted task has run.
#[test]
fn query_is_true_iff_all_submitted_work_is_done() {
    for_each_place(|place| {
        let caps = caps(place);
        let stream = Stream::new(place)?;
        assert!(stream.query()?, "a new stream has no work");
        if !caps.host_funcs {
            not_applicable(place, "no host functions to observe completion");
            return Ok(());
        }
        let log = Log::new();
        // Host functions submitted to the stream so far (each pushes one entry when it runs).
        // Counted at submission, never read back from the log: earlier work may still be
        // running when more is submitted.
        let mut submitted = 0;
        if caps.nonblocking_query {
            if let Some(gate) = Gate::close(&stream)? {
                // Several batches behind the gate: query is false after each, and once it says
                // true every batch has run.
                for batch in 0..3u32 {
                    for i in 0..5 {
                        stream.launch_host_func(log.task(batch * 10 + i))?;
                        submitted += 1;
                    }
                    assert!(!stream.query()?, "query is true with gated work");
                }
                for _ in 0..10 {
                    assert!(!stream.query()?, "query is true with gated work");
                }
                gate.release();
                assert!(wait_until(PATIENCE, || stream.query().unwrap()));
                assert_eq!(log.len(), submitted, "query said done before the task ran");
            }
        } else {
            not_applicable(
                place,
                "query synchronizes (nonblocking_query off): no gated query",
            );
        }
        // Whenever query says true, everything submitted so far has run.
        for round in 0..20u32 {
            for i in 0..5 {
                stream.launch_host_func({
                    let log = log.clone();
                    move || {
                        std::thread::sleep(Duration::from_micros(50));
                        log.push(round * 10 + i);
                    }
                })?;
                submitted += 1;
            }
            if stream.query()? {
                assert_eq!(log.len(), submitted, "query true with tasks not run");
            }
        }
        sync(&stream)?;
        assert!(stream.query()?, "query after synchronize");
        Ok(())
    });
}

/// `synchronize` blocks until the work is done.
#[test]
fn synchronize_blocks_until_the_work_is_done() {
    for_each_place(|place| {
        if !caps(place).host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let log = Log::new();
        let Some(gate) = Gate::close(&stream)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        stream.launch_host_func(log.task(1))?;
        let opener = gate.opener();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            opener();
        });
        sync(&stream)?;
        assert_eq!(
            log.entries(),
            vec![1],
            "synchronize returned before the work ran"
        );
        releaser.join().unwrap();
        drop(gate);
        Ok(())
    });
}

/// A panicking host function is an error from `synchronize` (the first one), never an abort;
/// later host functions still run once each; the stream stays usable; other streams are not
/// affected.
#[test]
fn synchronize_returns_the_first_host_func_panic() {
    for_each_place(|place| {
        if !caps(place).host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let bystander = Stream::new(place)?;
        let log = Log::new();
        stream.launch_host_func(log.task("a"))?;
        stream.launch_host_func(|| panic!("first conformance panic"))?;
        stream.launch_host_func(log.task("b"))?;
        stream.launch_host_func(|| panic!("second conformance panic"))?;
        stream.launch_host_func(log.task("c"))?;
        bystander.launch_host_func(log.task("bystander"))?;
        let id = stream.id();
        assert_err!(
            sync(&stream),
            Error::HostFuncPanicked { stream, message }
                if stream == id && message.contains("first conformance panic")
        );
        sync(&bystander)?;
        let entries: Vec<_> = log
            .entries()
            .into_iter()
            .filter(|e| *e != "bystander")
            .collect();
        assert_eq!(
            entries,
            vec!["a", "b", "c"],
            "host functions after a panic still run once"
        );
        // Usable afterwards: new work runs and completes.
        stream.launch_host_func(log.task("d"))?;
        match sync(&stream) {
            Ok(()) => {}
            Err(Error::HostFuncPanicked { message, .. })
                if message.contains("first conformance panic") => {}
            other => panic!("synchronize after the reported panic: {other:?}"),
        }
        assert!(log.contains(&"d"), "work after the error did not run");
        assert!(stream.query()?, "query after synchronize");
        Ok(())
    });
}

/// Two threads submit to one stream at once: an event one of them records covers what was
/// submitted before the record, so a host function that thread queues right after the record
/// finds the event complete when it runs, and a wait on it from inside returns.
#[test]
fn an_event_recorded_right_before_a_host_function_is_complete_inside_it_despite_another_submitter()
{
    for_each_place(|place| {
        if !caps(place).host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let s = Stream::new(place)?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let incomplete = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        std::thread::scope(|scope| -> devstream::Result<()> {
            let other = {
                let (s, stop) = (s.clone(), stop.clone());
                scope.spawn(move || -> devstream::Result<()> {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        s.launch_host_func(|| {})?;
                    }
                    Ok(())
                })
            };
            let mut outcome = Ok(());
            for _ in 0..2_000 {
                let event = match s.record_event() {
                    Ok(event) => event,
                    Err(e) => {
                        outcome = Err(e);
                        break;
                    }
                };
                let incomplete = incomplete.clone();
                if let Err(e) = s.launch_host_func(move || {
                    if !event.query().unwrap_or(false) {
                        incomplete.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }) {
                    outcome = Err(e);
                    break;
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            other.join().expect("the other submitter panicked")?;
            outcome
        })?;
        sync(&s)?;
        assert_eq!(
            incomplete.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "host functions that found the event recorded right before them on their own stream \
             incomplete"
        );
        Ok(())
    });
}
