//! Dropping handles with queued work never blocks and never frees what the work still uses.

use crate::harness::{
    caps, for_each_place, not_applicable, sync, wait_until, within, Gate, Log, PATIENCE,
};
use devstream::{CaptureMode, Flag, Stream};

/// Dropping the last handle of a stream whose work is gated returns at once; the work still
/// runs once the gate opens.
#[test]
fn dropping_a_stream_with_queued_work_never_blocks() {
    for_each_place(|place| {
        let caps = caps(place);
        let stream = Stream::new(place)?;
        let Some(gate) = Gate::close(&stream)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        let log = Log::new();
        if caps.host_funcs {
            stream.launch_host_func(log.task("queued"))?;
        }
        let done = stream.record_event()?;
        within(
            PATIENCE,
            "dropping a stream with gated work",
            move || drop(stream),
            gate.opener(),
        );
        if caps.nonblocking_query {
            assert!(
                !done.query()?,
                "the dropped stream's work ran through a closed gate"
            );
        }
        gate.release();
        let d = done.clone();
        within(
            PATIENCE,
            "event of a dropped stream",
            move || d.synchronize(),
            || {},
        )?;
        if caps.host_funcs {
            assert!(
                wait_until(PATIENCE, || log.contains(&"queued")),
                "a dropped stream's queued work never ran"
            );
        }
        Ok(())
    });
}

/// Dropping an event that a stream waits on returns at once and does not drop the dependency.
#[test]
fn dropping_an_awaited_event_never_blocks_nor_breaks_the_wait() {
    for_each_place(|place| {
        let caps = caps(place);
        if !caps.host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let (a, b) = (Stream::new(place)?, Stream::new(place)?);
        let Some(gate) = Gate::close(&a)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        let log = Log::new();
        a.launch_host_func(log.task("a"))?;
        let event = a.record_event()?;
        b.wait_event(&event)?;
        within(
            PATIENCE,
            "dropping a recorded, awaited event",
            move || drop(event),
            gate.opener(),
        );
        b.launch_host_func(log.task("b"))?;
        crate::harness::assert_stays_false("b ran before a", || log.contains(&"b"));
        gate.release();
        sync(&b)?;
        assert_eq!(log.entries(), vec!["a", "b"]);
        Ok(())
    });
}

/// A graph dropped right after its launch still runs; a flag handle dropped while a stream waits
/// on it still releases the wait through its clone.
#[test]
fn dropping_a_launched_graph_or_an_awaited_flag_handle() {
    for_each_place(|place| {
        let caps = caps(place);
        if caps.capture_host_funcs {
            let stream = Stream::new(place)?;
            let log = Log::new();
            stream.begin_capture(CaptureMode::ThreadLocal)?;
            stream.launch_host_func(log.task("graph"))?;
            let graph = stream.end_capture()?;
            let gate = Gate::close(&stream)?;
            graph.launch(&stream)?;
            within(
                PATIENCE,
                "dropping a launched graph",
                move || drop(graph),
                || {},
            );
            drop(gate);
            sync(&stream)?;
            assert_eq!(log.entries(), vec!["graph"]);
        }
        if caps.flags {
            let stream = Stream::new(place)?;
            let flag = Flag::new(place)?;
            let awaited = flag.clone();
            stream.wait_flag(&awaited, 1)?;
            drop(awaited);
            let done = stream.record_event()?;
            flag.set(1);
            let d = done.clone();
            within(
                PATIENCE,
                "wait on a dropped flag handle",
                move || d.synchronize(),
                || {},
            )?;
        }
        Ok(())
    });
}
