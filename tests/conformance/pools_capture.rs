//! Allocation inside a capture (`crates/devstream-core/src/graph_memory.rs`, "Rules every place
//! obeys"): buffers allocated on a capturing stream come from memory private to the graph, the
//! same on every replay; a buffer dropped during the capture is reused later in it, its new
//! work ordered after the old; the graph and its buffers, dropped, give the memory back (a
//! buffer that outlives its graph stays valid); launches of such a graph on two streams at once
//! are serialised; a capture that fails or is abandoned gives its memory back.
//!
//! Where `capture_alloc` is off (and capture on), allocation on a capturing stream is asserted
//! to answer `Unsupported` and leave the capture valid, and every other check prints that it
//! does not apply.

use crate::harness::{assert_stays_false, caps, for_each_place, not_applicable, sync, Gate};
use crate::harness::{wait_until, within, PATIENCE};
use devstream::{
    CaptureMode, CaptureSupport, Error, Flag, Graph, MemoryPool, Place, PoolStats, Result, Stream,
};

/// Bytes of the buffers the checks allocate: one size class on every place (a power of two).
const LEN: usize = 4096;

/// Whether `place` allocates inside captures; prints why the check does not apply elsewhere.
fn allocates_in_captures(place: &Place) -> bool {
    let on = caps(place).capture_alloc;
    if !on {
        not_applicable(
            place,
            "capture_alloc is off (Unsupported asserted by \
             pools_capture::allocation_during_a_capture_is_unsupported_exactly_where_the_capability_is_off)",
        );
    }
    on
}

/// Waits (bounded: a hang detector) until `pool` reserves `bytes` and counts no live buffer.
fn memory_returned(place: &Place, pool: &MemoryPool) {
    let settled = wait_until(PATIENCE, || {
        pool.stats()
            .is_ok_and(|stats| stats.reserved_bytes == 0 && stats.allocations == 0)
    });
    assert!(
        settled,
        "{place}: the graph's pool still holds memory: {:?}",
        pool.stats()
    );
}

/// The pool's statistics, checked for their own invariants.
fn stats(place: &Place, pool: &MemoryPool) -> Result<PoolStats> {
    let stats = pool.stats()?;
    assert!(
        stats.reserved_bytes >= stats.used_bytes
            && stats.peak_reserved_bytes >= stats.reserved_bytes
            && stats.peak_used_bytes >= stats.used_bytes,
        "{place}: inconsistent graph pool statistics {stats:?}"
    );
    Ok(stats)
}

/// Capability off ⇔ `Unsupported` from allocation on a capturing stream, from
/// `Stream::capture_memory_pool` and from `Graph::memory_pool`; the refusal leaves the capture
/// valid. Capability on: the allocation succeeds, an absurd one is `OutOfMemory` with the
/// capture pool's statistics and leaves the capture valid, and `capture_memory_pool` outside a
/// capture answers `Error::Capture`.
#[test]
fn allocation_during_a_capture_is_unsupported_exactly_where_the_capability_is_off() {
    for_each_place(|place| {
        let caps = caps(place);
        if caps.capture == CaptureSupport::None {
            not_applicable(place, "no capture");
            return Ok(());
        }
        let on = caps.capture_alloc;
        let stream = Stream::new(place)?;
        if on {
            assert!(
                matches!(stream.capture_memory_pool(), Err(Error::Capture { .. })),
                "{place}: capture_memory_pool outside a capture"
            );
        }
        let out = stream.alloc_host(16)?;
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let allocated = stream.alloc(LEN);
        let from_default = MemoryPool::default_for(place)
            .ok()
            .map(|pool| stream.alloc_from(&pool, LEN));
        let capture_pool = stream.capture_memory_pool();
        let mut answers = vec![
            ("alloc", allocated.as_ref().err()),
            ("capture_memory_pool", capture_pool.as_ref().err()),
        ];
        if let Some(from_default) = &from_default {
            answers.push(("alloc_from", from_default.as_ref().err()));
        }
        for (what, refused) in answers {
            match (on, refused) {
                (true, None) => {}
                (false, Some(Error::Unsupported { place: named, .. })) => {
                    assert_eq!(named, place, "{what}: Unsupported names the wrong place")
                }
                (true, Some(error)) => panic!("{what} on {place}: capture_alloc on, got {error:?}"),
                (false, other) => panic!(
                    "{what} on {place}: capture_alloc off, expected Unsupported, got {other:?}"
                ),
            }
        }
        if let Ok(buffer) = &allocated {
            // An absurd request is a typed out-of-memory carrying the capture pool's
            // statistics, and the capture goes on.
            match stream.alloc(1 << 60) {
                Err(Error::OutOfMemory {
                    bytes,
                    stats: Some(stats),
                    ..
                }) => {
                    assert_eq!(bytes, 1 << 60);
                    let live = 1 + u64::from(from_default.as_ref().is_some_and(|r| r.is_ok()));
                    assert_eq!(stats.allocations, live, "{place}: {stats:?}");
                }
                other => panic!("{place}: an absurd allocation during a capture: {other:?}"),
            }
            stream.fill(buffer, 0, 16, 4)?;
            stream.copy_device_to_host(&out, 0, buffer, 0, 16)?;
        }
        let graph = stream.end_capture();
        assert!(
            graph.is_ok(),
            "{place}: a refused allocation broke the capture: {graph:?}"
        );
        let graph = graph?;
        let pool = graph.memory_pool();
        match (on, &pool) {
            (true, Ok(_)) | (false, Err(Error::Unsupported { .. })) => {}
            _ => panic!("{place}: Graph::memory_pool with capture_alloc {on}: {pool:?}"),
        }
        graph.launch(&stream)?;
        sync(&stream)?;
        if on {
            assert_eq!(out.to_vec()?, vec![4; 16], "{place}: the graph's buffer");
        }
        Ok(())
    });
}

/// A buffer allocated during the capture is the graph's memory on every replay: what each
/// replay copies in comes out of it, in the graph and when read through the buffer itself
/// after the replay, and the graph's pool neither grows nor shrinks across replays.
#[test]
fn a_graph_buffer_is_the_same_memory_on_every_replay() {
    for_each_place(|place| {
        if !allocates_in_captures(place) {
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let (input, in_graph, outside) = (
            stream.alloc_host(LEN)?,
            stream.alloc_host(LEN)?,
            stream.alloc_host(LEN)?,
        );
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let scratch = stream.alloc(LEN)?;
        stream.copy_host_to_device(&scratch, 0, &input, 0, LEN)?;
        stream.fill(&scratch, 0, 8, 0xEE)?;
        stream.copy_device_to_host(&in_graph, 0, &scratch, 0, LEN)?;
        let graph = stream.end_capture()?;
        let pool = graph.memory_pool()?;
        let reserved = stats(place, &pool)?.reserved_bytes;
        assert!(
            reserved >= LEN as u64,
            "{place}: {reserved} bytes reserved for a {LEN}-byte buffer"
        );
        let runner = Stream::new(place)?;
        for replay in 1..=3u8 {
            let mut expected = vec![replay; LEN];
            input.write(0, &expected)?;
            expected[..8].fill(0xEE);
            graph.launch(&runner)?;
            runner.copy_device_to_host(&outside, 0, &scratch, 0, LEN)?;
            sync(&runner)?;
            assert_eq!(
                in_graph.to_vec()?,
                expected,
                "{place}: replay {replay}, in the graph"
            );
            assert_eq!(
                outside.to_vec()?,
                expected,
                "{place}: replay {replay}, read through the buffer after the replay"
            );
            let now = stats(place, &pool)?;
            assert_eq!(
                (now.reserved_bytes, now.peak_reserved_bytes, now.allocations),
                (reserved, reserved, 1),
                "{place}: replay {replay} changed the graph's memory"
            );
        }
        Ok(())
    });
}

/// A buffer dropped during the capture gives its memory to the next allocation of its size in
/// the same capture (the pool reserves one block for both), and the new buffer's work is
/// ordered after the old one's: here the old buffer's work is on a forked stream held at a
/// gate, and the new buffer's on the origin, which must wait for it.
#[test]
fn a_buffer_dropped_during_a_capture_is_reused_later_in_it_after_its_work() {
    for_each_place(|place| {
        if !allocates_in_captures(place) {
            return Ok(());
        }
        let (origin, forked, idle) = (
            Stream::new(place)?,
            Stream::new(place)?,
            Stream::new(place)?,
        );
        let (old_out, new_out) = (origin.alloc_host(LEN)?, origin.alloc_host(LEN)?);
        let gate = Gate::close(&idle)?;
        let done = if caps(place).flags {
            Some(Flag::new(place)?)
        } else {
            None
        };
        origin.begin_capture(CaptureMode::ThreadLocal)?;
        let pool = origin.capture_memory_pool()?;
        let fork = origin.record_event()?;
        forked.wait_event(&fork)?;
        let old = forked.alloc(LEN)?;
        forked.fill(&old, 0, LEN, 3)?;
        if let Some(gate) = &gate {
            gate.hold(&forked)?;
        }
        forked.copy_device_to_host(&old_out, 0, &old, 0, LEN)?;
        drop(old);
        let cached = stats(place, &pool)?;
        assert_eq!(
            (cached.used_bytes, cached.allocations),
            (0, 0),
            "{place}: a buffer dropped during the capture still counts as used: {cached:?}"
        );
        let new = origin.alloc(LEN)?;
        let reused = stats(place, &pool)?;
        assert_eq!(
            (reused.reserved_bytes, reused.peak_reserved_bytes),
            (cached.reserved_bytes, cached.reserved_bytes),
            "{place}: the second buffer did not reuse the first one's memory: {reused:?}"
        );
        origin.fill(&new, 0, LEN, 7)?;
        origin.copy_device_to_host(&new_out, 0, &new, 0, LEN)?;
        if let Some(done) = &done {
            origin.write_flag(done, 1)?;
        }
        origin.wait_stream(&forked)?;
        let graph = origin.end_capture()?;
        drop(new);

        let runner = Stream::new(place)?;
        graph.launch(&runner)?;
        if let (Some(gate), Some(done)) = (&gate, &done) {
            assert_stays_false(
                &format!("{place}: the reusing buffer's work ran before the old buffer's"),
                || done.get() == 1,
            );
            gate.release();
        }
        sync(&runner)?;
        assert_eq!(
            old_out.to_vec()?,
            vec![3; LEN],
            "{place}: the old buffer's data"
        );
        assert_eq!(
            new_out.to_vec()?,
            vec![7; LEN],
            "{place}: the new buffer's data"
        );
        drop(gate);
        Ok(())
    });
}

/// The graph and the buffers of its capture, dropped, give the memory back; a buffer that
/// outlives its graph is still valid memory holding the last replay's data. The graph's pool
/// takes no allocation outside its capture and is not trimmed.
#[test]
fn dropping_a_graph_and_its_buffers_returns_its_memory() {
    for_each_place(|place| {
        if !allocates_in_captures(place) {
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let out = stream.alloc_host(LEN)?;
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let kept = stream.alloc(LEN)?;
        let large = stream.alloc(3 << 20)?;
        stream.fill(&large, 0, 3 << 20, 1)?;
        stream.copy_device_to_device(&kept, 0, &large, 0, LEN)?;
        stream.fill(&kept, 0, 4, 9)?;
        drop(large);
        let graph = stream.end_capture()?;
        let pool = graph.memory_pool()?;
        // Outside its capture a graph's pool takes no allocation (where `alloc_from` exists).
        let outside = stream.alloc_from(&pool, 64);
        if caps(place).memory_pools {
            assert!(
                matches!(outside, Err(Error::InvalidArgument(_))),
                "{place}: alloc_from a graph's pool outside its capture: {outside:?}"
            );
        } else {
            assert!(
                matches!(outside, Err(Error::Unsupported { .. })),
                "{place}: alloc_from without memory_pools: {outside:?}"
            );
        }
        assert!(matches!(pool.trim(0), Err(Error::Unsupported { .. })));
        let held = stats(place, &pool)?;
        assert!(
            held.reserved_bytes >= (3 << 20) + LEN as u64 && held.allocations == 1,
            "{place}: {held:?}"
        );
        graph.launch(&stream)?;
        drop(graph);
        // The graph is gone (its launch may still run): the buffer that outlives it is valid.
        stream.copy_device_to_host(&out, 0, &kept, 0, LEN)?;
        sync(&stream)?;
        let mut expected = vec![1; LEN];
        expected[..4].fill(9);
        assert_eq!(
            out.to_vec()?,
            expected,
            "{place}: the buffer after its graph"
        );
        // The graph's memory goes once its launch is done (where releases are deferred, a
        // moment after): only the live buffer's stays.
        let only_the_buffer = wait_until(PATIENCE, || {
            pool.stats().is_ok_and(|left| {
                left.reserved_bytes >= LEN as u64 && left.reserved_bytes < held.reserved_bytes
            })
        });
        assert!(
            only_the_buffer,
            "{place}: after the graph, only the live buffer's memory should stay: {:?}",
            pool.stats()
        );
        drop(kept);
        sync(&stream)?;
        memory_returned(place, &pool);
        Ok(())
    });
}

/// Two launches of a graph that owns memory, on two streams at once, run one after the other:
/// the second, on a free stream, waits for the first, held at a gate; both give the right
/// data. Launching it into another capture answers `Unsupported`.
#[test]
fn launches_of_a_graph_that_owns_memory_on_two_streams_are_serialised() {
    for_each_place(|place| {
        if !allocates_in_captures(place) {
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let (input, output) = (stream.alloc_host(LEN)?, stream.alloc_host(LEN)?);
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let scratch = stream.alloc(LEN)?;
        stream.copy_host_to_device(&scratch, 0, &input, 0, LEN)?;
        stream.fill(&scratch, 0, 1, 8)?;
        stream.copy_device_to_host(&output, 0, &scratch, 0, LEN)?;
        let graph: Graph = stream.end_capture()?;
        drop(scratch);

        let capturing = Stream::new(place)?;
        capturing.begin_capture(CaptureMode::ThreadLocal)?;
        assert!(
            matches!(graph.launch(&capturing), Err(Error::Unsupported { .. })),
            "{place}: a graph that owns memory was launched into another capture"
        );
        capturing.end_capture()?;

        input.write(0, &[5; LEN])?;
        let (held, free) = (Stream::new(place)?, Stream::new(place)?);
        let gate = Gate::close(&held)?;
        graph.launch(&held)?;
        graph.launch(&free)?;
        let done = free.record_event()?;
        if let Some(gate) = &gate {
            assert_stays_false(
                &format!("{place}: the second launch ran while the first was held"),
                || done.query().unwrap_or(false),
            );
            gate.release();
        }
        sync(&held)?;
        sync(&free)?;
        let mut expected = vec![5; LEN];
        expected[0] = 8;
        assert_eq!(output.to_vec()?, expected, "{place}: after both launches");
        Ok(())
    });
}

/// A capture that is invalidated, or abandoned by dropping its stream, gives its private
/// memory back once its buffers are dropped; a buffer kept from it stays valid until then.
#[test]
fn a_capture_that_fails_or_is_abandoned_returns_its_memory() {
    for_each_place(|place| {
        if !allocates_in_captures(place) {
            return Ok(());
        }
        let stream = Stream::new(place)?;
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let pool = stream.capture_memory_pool()?;
        let dropped = stream.alloc(LEN)?;
        stream.fill(&dropped, 0, LEN, 1)?;
        drop(dropped);
        let kept = stream.alloc(2 * LEN)?;
        stream.fill(&kept, 0, LEN, 2)?;
        assert!(matches!(stream.synchronize(), Err(Error::Capture { .. })));
        assert!(
            stream.end_capture().is_err(),
            "{place}: invalidated capture"
        );
        let out = stream.alloc_host(16)?;
        stream.fill(&kept, 0, 16, 6)?;
        stream.copy_device_to_host(&out, 0, &kept, 0, 16)?;
        sync(&stream)?;
        assert_eq!(
            out.to_vec()?,
            vec![6; 16],
            "{place}: a buffer kept from a failed capture"
        );
        drop(kept);
        sync(&stream)?;
        memory_returned(place, &pool);

        let abandoned = Stream::new(place)?;
        abandoned.begin_capture(CaptureMode::ThreadLocal)?;
        let pool = abandoned.capture_memory_pool()?;
        let buffer = abandoned.alloc(LEN)?;
        abandoned.fill(&buffer, 0, LEN, 3)?;
        drop(abandoned);
        drop(buffer);
        memory_returned(place, &pool);
        Ok(())
    });
}

/// Buffers of a capture dropped on another thread while the capture ends, and launches of its
/// graph from several threads at once, each on its own stream: every launch gives the right
/// data, and the memory comes back once the graph and the buffers are gone.
#[test]
fn graph_memory_survives_racing_drops_and_launches() {
    for_each_place(|place| {
        if !allocates_in_captures(place) {
            return Ok(());
        }
        for round in 1..=4u8 {
            let stream = Stream::new(place)?;
            let (input, output) = (stream.alloc_host(LEN)?, stream.alloc_host(LEN)?);
            input.write(0, &[round; LEN])?;
            stream.begin_capture(CaptureMode::ThreadLocal)?;
            let pool = stream.capture_memory_pool()?;
            let scratch = stream.alloc(LEN)?;
            stream.copy_host_to_device(&scratch, 0, &input, 0, LEN)?;
            let mut others = Vec::new();
            for value in 0..4 {
                let other = stream.alloc(LEN)?;
                stream.fill(&other, 0, LEN, value)?;
                stream.copy_device_to_device(&other, 0, &scratch, 0, LEN / 2)?;
                others.push(other);
            }
            stream.copy_device_to_host(&output, 0, &scratch, 0, LEN)?;
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
            let dropper = {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    drop(others);
                })
            };
            barrier.wait();
            let graph = stream.end_capture()?;
            dropper
                .join()
                .map_err(|_| Error::InvalidArgument("the dropping thread panicked".into()))?;
            let launchers: Vec<_> = (0..4)
                .map(|_| {
                    let (graph, place) = (graph.clone(), place.clone());
                    std::thread::spawn(move || -> Result<()> {
                        let runner = Stream::new(&place)?;
                        graph.launch(&runner)?;
                        sync(&runner)
                    })
                })
                .collect();
            for launcher in launchers {
                launcher
                    .join()
                    .map_err(|_| Error::InvalidArgument("a launching thread panicked".into()))??;
            }
            assert_eq!(output.to_vec()?, vec![round; LEN], "{place}: round {round}");
            drop((graph, scratch, stream));
            memory_returned(place, &pool);
        }
        Ok(())
    });
}

/// A block dropped during the capture and left cached when it ends stays with the graph (its
/// captured work uses it) and counts as used from then on: the peak of used bytes covers it.
#[test]
fn a_graph_pool_peak_covers_blocks_cached_when_the_capture_ends() {
    for_each_place(|place| {
        if !allocates_in_captures(place) {
            return Ok(());
        }
        let stream = Stream::new(place)?;
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let small = stream.alloc(1)?;
        stream.fill(&small, 0, 1, 5)?;
        drop(small);
        let large = stream.alloc(LEN)?;
        stream.fill(&large, 0, LEN, 6)?;
        let graph = stream.end_capture()?;
        let ended = graph.memory_pool()?.stats()?;
        assert!(
            ended.used_bytes > LEN as u64 && ended.peak_used_bytes >= ended.used_bytes,
            "{place}: after the capture, the small buffer's block is the graph's: {ended:?}"
        );
        drop((graph, large));
        Ok(())
    });
}

/// Dropping a graph and the buffer it allocated returns at once while another stream of the
/// place is held behind a gate that only this thread opens afterwards; the memory comes back
/// once the gate is open. A synchronous device free on the dropping thread (CUDA's `cuMemFree`
/// waits for all of the device's queued work) would never return here.
#[test]
fn dropping_a_graph_and_its_buffer_does_not_wait_for_held_work_of_the_place() {
    for_each_place(|place| {
        if !allocates_in_captures(place) {
            return Ok(());
        }
        let stream = Stream::new(place)?;
        let held = Stream::new(place)?;
        let Some(gate) = Gate::close(&held)? else {
            not_applicable(place, "no gate (neither flags nor host functions)");
            return Ok(());
        };
        held.fill(&held.alloc(LEN)?, 0, LEN, 1)?;
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        let buffer = stream.alloc(LEN)?;
        stream.fill(&buffer, 0, LEN, 2)?;
        let graph = stream.end_capture()?;
        let pool = graph.memory_pool()?;
        graph.launch(&stream)?;
        sync(&stream)?;
        within(
            PATIENCE,
            &format!("{place}: dropping a graph and its buffer while a gate holds a stream"),
            move || drop((graph, buffer)),
            gate.opener(),
        );
        gate.release();
        sync(&held)?;
        memory_returned(place, &pool);
        Ok(())
    });
}
