//! Flags: a host-visible u32; `wait_flag` holds later work until the value is ≥ the one given
//! (CUDA's GEQ); `write_flag` writes in stream order and the host sees it.

use crate::harness::{
    assert_stays_false, caps, for_each_place, for_each_place_alone, not_applicable, sync,
    wait_until, Gate, Log, PATIENCE,
};
use devstream::{live_counts, CaptureMode, CaptureSupport, Flag, Place, Stream};

fn has_flags(place: &Place) -> bool {
    if !caps(place).flags {
        not_applicable(place, "no flags (Unsupported asserted in capabilities)");
        return false;
    }
    true
}

/// A new flag is 0; `set`/`get` round trip; clones share the value; ids are distinct.
#[test]
fn flag_value_is_host_visible() {
    for_each_place(|place| {
        if !has_flags(place) {
            return Ok(());
        }
        let flag = Flag::new(place)?;
        assert_eq!(flag.get(), 0);
        assert_eq!(flag.place(), place);
        for value in [1, 7, u32::MAX, 0, 42] {
            flag.set(value);
            assert_eq!(flag.get(), value);
        }
        let clone = flag.clone();
        clone.set(9);
        assert_eq!(flag.get(), 9, "clones share the value");
        assert_eq!(clone.id(), flag.id());
        assert_ne!(Flag::new(place)?.id(), flag.id());
        Ok(())
    });
}

/// `wait_flag(f, v)` holds later work while the value is below `v` and releases it at any value
/// ≥ `v`; a wait already satisfied does not hold.
#[test]
fn wait_flag_is_greater_or_equal() {
    for_each_place(|place| {
        if !has_flags(place) {
            return Ok(());
        }
        let caps = caps(place);
        let stream = Stream::new(place)?;
        let flag = Flag::new(place)?;
        let done = Flag::new(place)?;
        stream.wait_flag(&flag, 3)?;
        stream.write_flag(&done, 1)?;
        assert_stays_false("wait_flag(3) passed at value 0", || done.get() == 1);
        flag.set(2);
        assert_stays_false("wait_flag(3) passed at value 2", || done.get() == 1);
        if caps.nonblocking_query {
            assert!(!stream.query()?, "a stream held by wait_flag is not done");
        }
        flag.set(5);
        assert!(
            wait_until(PATIENCE, || done.get() == 1),
            "wait_flag(3) still holds at value 5"
        );
        // Equal is enough: a wait for 7 passes when the value becomes exactly 7.
        stream.wait_flag(&flag, 7)?;
        stream.write_flag(&done, 3)?;
        flag.set(6);
        assert_stays_false("wait_flag(7) passed at value 6", || done.get() == 3);
        flag.set(7);
        assert!(
            wait_until(PATIENCE, || done.get() == 3),
            "wait_flag(7) still holds at value 7 (GEQ: equal releases)"
        );
        // Already satisfied waits pass: value 7 ≥ 7, ≥ 4, and anything ≥ 0.
        stream.wait_flag(&flag, 7)?;
        stream.wait_flag(&flag, 4)?;
        stream.wait_flag(&Flag::new(place)?, 0)?;
        stream.write_flag(&done, 4)?;
        sync(&stream)?;
        assert_eq!(done.get(), 4);
        Ok(())
    });
}

/// `write_flag` happens in stream order (not before earlier work) and the host sees the value.
#[test]
fn write_flag_is_stream_ordered_and_seen_by_the_host() {
    for_each_place(|place| {
        if !has_flags(place) {
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let flag = Flag::new(place)?;
        let gate = Gate::close(&stream)?.expect("flags make a gate");
        stream.write_flag(&flag, 9)?;
        assert_stays_false("write_flag ran before earlier gated work", || {
            flag.get() == 9
        });
        gate.release();
        assert!(
            wait_until(PATIENCE, || flag.get() == 9),
            "the host never saw the write"
        );
        sync(&stream)?;
        assert_eq!(flag.get(), 9);
        // Writes replace, they do not accumulate; a smaller value is written too.
        stream.write_flag(&flag, 4)?;
        sync(&stream)?;
        assert_eq!(flag.get(), 4);
        Ok(())
    });
}

/// One stream's `write_flag` releases another stream's `wait_flag`: a cross-stream edge.
#[test]
fn write_flag_releases_another_streams_wait() {
    for_each_place(|place| {
        if !has_flags(place) {
            return Ok(());
        }
        let caps = caps(place);
        let (writer, waiter) = (Stream::new(place)?, Stream::new(place)?);
        let signal = Flag::new(place)?;
        let log = Log::new();
        let gate = Gate::close(&writer)?.expect("flags make a gate");
        writer.write_flag(&signal, 1)?;
        waiter.wait_flag(&signal, 1)?;
        let reached = Flag::new(place)?;
        waiter.write_flag(&reached, 1)?;
        if caps.host_funcs {
            waiter.launch_host_func(log.task("after"))?;
        }
        assert_stays_false("the waiter passed before the writer wrote", || {
            reached.get() == 1
        });
        gate.release();
        sync(&waiter)?;
        sync(&writer)?;
        assert_eq!(reached.get(), 1);
        if caps.host_funcs {
            assert_eq!(log.entries(), vec!["after"]);
        }
        Ok(())
    });
}

/// A flag waited on in a capture keeps no stream object alive: the captured wait belongs to the
/// graph (which keeps the flag until its last launch completed), so the capturing stream is
/// released with its last handle while the flag lives on, and the graph still waits on the flag
/// when it is launched on another stream.
#[test]
fn a_flag_waited_on_in_a_capture_keeps_no_stream_alive() {
    for_each_place_alone(|place| {
        if !has_flags(place) {
            return Ok(());
        }
        if caps(place).capture == CaptureSupport::None || !caps(place).host_funcs {
            not_applicable(place, "no capture with host functions");
            return Ok(());
        }
        let flag = Flag::new(place)?;
        let launching = Stream::new(place)?;
        let log = Log::new();
        let before = live_counts();
        let graph = {
            let capturing = Stream::new(place)?;
            capturing.begin_capture(CaptureMode::ThreadLocal)?;
            capturing.wait_flag(&flag, 1)?;
            capturing.launch_host_func(log.task("replayed"))?;
            capturing.end_capture()?
        };
        assert!(
            wait_until(PATIENCE, || live_counts().streams <= before.streams),
            "{place}: the capturing stream's last handle is gone, live counts stay at {:?} \
             (before it was made: {before:?})",
            live_counts()
        );
        graph.launch(&launching)?;
        assert_stays_false("the replay ran through the flag's wait", || {
            log.contains(&"replayed")
        });
        flag.set(1);
        sync(&launching)?;
        assert_eq!(log.entries(), vec!["replayed"]);
        Ok(())
    });
}
