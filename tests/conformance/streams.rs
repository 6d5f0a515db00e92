//! Stream handles and options: identity (Clone/Eq/Hash/Ord by place then id), defaults,
//! default and per-thread streams, priorities, blocking streams and the legacy default stream,
//! the stream pool.

use crate::harness::{
    caps, for_each_place, not_applicable, places_under_test, sync, wait_until, Gate, Log, PATIENCE,
};
use devstream::{priority_range, Event, Priority, PriorityRange, Stream};
use std::collections::{BTreeSet, HashSet};

fn assert_send_sync_clone<T: Send + Sync + Clone + 'static>() {}

/// Handles are `Send + Sync + Clone`; clones compare and hash equal; different streams differ;
/// streams are ordered by place, then id.
#[test]
fn streams_compare_by_place_then_id() {
    assert_send_sync_clone::<Stream>();
    assert_send_sync_clone::<Event>();
    assert_send_sync_clone::<devstream::Flag>();
    assert_send_sync_clone::<devstream::Graph>();
    for_each_place(|place| {
        let streams: Vec<Stream> = (0..32)
            .map(|_| Stream::new(place))
            .collect::<Result<_, _>>()?;
        let ids: HashSet<u64> = streams.iter().map(Stream::id).collect();
        assert_eq!(ids.len(), streams.len(), "stream ids are unique");
        for (i, s) in streams.iter().enumerate() {
            let clone = s.clone();
            assert_eq!(*s, clone);
            assert_eq!(s.cmp(&clone), std::cmp::Ordering::Equal);
            let set: HashSet<Stream> = [s.clone(), clone].into_iter().collect();
            assert_eq!(set.len(), 1, "clones hash equal");
            for t in &streams[i + 1..] {
                assert_ne!(s, t);
                assert_eq!(s.cmp(t), s.id().cmp(&t.id()), "same place: ordered by id");
            }
        }
        // Across places: ordered by place first.
        for other in places_under_test().iter().filter(|p| *p != place) {
            let t = Stream::new(other)?;
            assert_ne!(streams[0], t);
            assert_eq!(
                streams[0].cmp(&t),
                place.cmp(other),
                "ordered by place first"
            );
        }
        let sorted: BTreeSet<Stream> = streams.iter().cloned().collect();
        assert_eq!(sorted.len(), streams.len());
        Ok(())
    });
}

/// `Stream::new`: the place, `Normal` priority, non-blocking, the place's capabilities.
#[test]
fn new_stream_defaults() {
    for_each_place(|place| {
        let range = priority_range(place)?;
        let s = Stream::new(place)?;
        assert_eq!(s.place(), place);
        assert_eq!(s.priority(), Priority::Normal);
        assert_eq!(s.native_priority(), range.clamp(0));
        assert!(s.is_non_blocking(), "Stream::new is non-blocking");
        assert_eq!(s.capabilities(), caps(place));
        assert!(s.id() > 0);
        let built = Stream::builder(place).build()?;
        assert_eq!(built.priority(), Priority::Normal);
        assert!(built.is_non_blocking());
        assert!(Stream::builder(place)
            .blocking(false)
            .build()?
            .is_non_blocking());
        let blocking = Stream::builder(place).blocking(true).build()?;
        if caps(place).legacy_default_stream {
            assert!(!blocking.is_non_blocking(), "blocking(true) reads back");
        }
        sync(&blocking)?;
        Ok(())
    });
}

/// The default stream is one stream per place and runs work; the per-thread default stream is
/// one stream per thread where it exists (Unsupported asserted in capabilities otherwise).
#[test]
fn default_and_per_thread_streams() {
    for_each_place(|place| {
        let default = Stream::default_stream(place)?;
        assert_eq!(default, Stream::default_stream(place)?);
        assert_eq!(default.place(), place);
        let done = default.record_event()?;
        sync(&default)?;
        assert!(done.query()?);
        if caps(place).per_thread_stream {
            let mine = Stream::per_thread(place)?;
            assert_eq!(
                mine,
                Stream::per_thread(place)?,
                "one per-thread stream per thread"
            );
            assert_eq!(mine.place(), place);
            let done = mine.record_event()?;
            sync(&mine)?;
            assert!(done.query()?);
        }
        Ok(())
    });
}

/// Priorities: `High` is the range's greatest, `Normal` the default, `Native(n)` clamped and
/// read back clamped; paddle's 1/2; a place without priorities reports `{0, 0}`.
#[test]
fn priorities_normalise_onto_the_range() {
    for_each_place(|place| {
        let range = priority_range(place)?;
        let caps = caps(place);
        assert_eq!(
            caps.priorities,
            range.has_priorities(),
            "capabilities().priorities must match the range {range:?}"
        );
        if !caps.priorities {
            assert_eq!(
                range,
                PriorityRange {
                    least: 0,
                    greatest: 0
                }
            );
        } else {
            assert!(range.levels() >= 2);
        }
        let build = |p: Priority| Stream::builder(place).priority(p).build();
        let high = build(Priority::High)?;
        assert_eq!(high.native_priority(), range.greatest);
        let normal = build(Priority::Normal)?;
        assert_eq!(normal.native_priority(), range.clamp(0));
        assert_eq!(normal.priority(), Priority::Normal);
        if caps.priorities {
            assert_eq!(high.priority(), Priority::High);
        }
        let mut natives: Vec<i32> = vec![
            i32::MIN,
            -1000,
            -2,
            -1,
            0,
            1,
            2,
            1000,
            i32::MAX,
            range.greatest,
            range.least,
        ];
        natives.extend(range.greatest.min(range.least)..=range.greatest.max(range.least));
        for n in natives {
            let s = build(Priority::Native(n))?;
            let clamped = range.clamp(n);
            assert_eq!(
                s.native_priority(),
                clamped,
                "Native({n}) is clamped into {range:?}"
            );
            assert_eq!(
                s.priority(),
                range.classify(clamped),
                "Native({n}) reads back clamped"
            );
        }
        let paddle_high = build(Priority::from_paddle(1)?)?;
        assert_eq!(paddle_high.native_priority(), range.greatest);
        let paddle_normal = build(Priority::from_paddle(2)?)?;
        assert_eq!(paddle_normal.native_priority(), range.clamp(0));
        // Streams of every priority run work.
        for s in [&high, &normal, &paddle_high] {
            let done = s.record_event()?;
            sync(s)?;
            assert!(done.query()?);
        }
        Ok(())
    });
}

/// The pool hands out 32 streams per priority level round robin: the 33rd call returns the
/// first stream again.
#[test]
fn stream_pool_is_round_robin_over_32() {
    for_each_place(|place| {
        let range = priority_range(place)?;
        for priority in [Priority::Normal, Priority::High] {
            let got: Vec<Stream> = (0..65)
                .map(|_| Stream::from_pool(place, priority))
                .collect::<Result<_, _>>()?;
            let distinct: HashSet<&Stream> = got[..32].iter().collect();
            assert_eq!(distinct.len(), 32, "32 distinct streams per level");
            for i in 0..33 {
                assert_eq!(
                    got[i + 32],
                    got[i],
                    "call {} returns call {}'s stream",
                    i + 33,
                    i + 1
                );
            }
            for s in &got[..32] {
                assert_eq!(s.place(), place);
                assert_eq!(s.native_priority(), range.normalize(priority));
            }
        }
        if range.has_priorities() {
            let normal = Stream::from_pool(place, Priority::Normal)?;
            let high = Stream::from_pool(place, Priority::High)?;
            assert_ne!(normal, high, "levels have their own streams");
        }
        let s = Stream::from_pool(place, Priority::Normal)?;
        let done = s.record_event()?;
        sync(&s)?;
        assert!(done.query()?);
        Ok(())
    });
}

/// Where a legacy default stream exists, it synchronises with blocking streams both ways, and
/// non-blocking streams do not wait for it.
#[test]
fn legacy_default_stream_synchronises_with_blocking_streams() {
    for_each_place(|place| {
        let caps = caps(place);
        if !caps.legacy_default_stream {
            not_applicable(place, "no legacy default stream");
            return Ok(());
        }
        if !caps.host_funcs {
            not_applicable(place, "no host functions");
            return Ok(());
        }
        let legacy = Stream::default_stream(place)?;
        let blocking = Stream::builder(place).blocking(true).build()?;
        let free = Stream::new(place)?;
        let log = Log::new();
        // Work on a blocking stream waits for earlier legacy work.
        let Some(gate) = Gate::close(&legacy)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        blocking.launch_host_func(log.task("blocking"))?;
        free.launch_host_func(log.task("free"))?;
        if caps.concurrent_streams {
            assert!(
                wait_until(PATIENCE, || log.contains(&"free")),
                "a non-blocking stream waits for the legacy default stream"
            );
        }
        crate::harness::assert_stays_false("a blocking stream ran past legacy work", || {
            log.contains(&"blocking")
        });
        gate.release();
        sync(&blocking)?;
        // Legacy work waits for earlier work of blocking streams.
        let gate = Gate::close(&blocking)?.expect("gated once");
        legacy.launch_host_func(log.task("legacy"))?;
        crate::harness::assert_stays_false("legacy work ran past a blocking stream's work", || {
            log.contains(&"legacy")
        });
        gate.release();
        sync(&legacy)?;
        sync(&free)?;
        Ok(())
    });
}
