//! Memory pools (`crates/devstream-core/src/mempool.rs`, "Rules every pool obeys"): statistics
//! follow buffers allocated and dropped (after their stream work), peaks reset, a release
//! threshold bounds reserved memory once work drains, trim returns memory, memory freed while
//! work uses it is not handed out before that work, and an absurd request is a typed
//! `OutOfMemory` carrying the pool's statistics, after which the pool still works.
//!
//! A dropped buffer's memory may come back a little after `synchronize` returns (plug-in places
//! return blocks from devstream's reaper thread): checks wait, bounded, for the pool's live count
//! before reading what the return changes.
//!
//! A place whose `memory_pools` capability is off is asserted to answer `Unsupported` from
//! `MemoryPool::default_for`, `MemoryPool::new` and `alloc_from`, and every other check prints
//! that it does not apply there.

use crate::harness::{caps, for_each_place, for_each_place_alone, not_applicable, sync, Gate};
use crate::harness::{other_backend_place, wait_until, PATIENCE};
use devstream::{
    CaptureMode, CaptureSupport, Error, MemoryPool, Place, PoolOptions, PoolStats, Result, Stream,
};
use std::sync::Arc;
use std::time::Duration;

/// A pool that keeps everything freed for reuse.
fn caching_pool(place: &Place) -> Result<MemoryPool> {
    MemoryPool::new(
        place,
        PoolOptions {
            release_threshold: u64::MAX,
            ..Default::default()
        },
    )
}

/// Whether `place` has pools; prints why the check does not apply where it has none.
fn has_pools(place: &Place) -> bool {
    let on = caps(place).memory_pools;
    if !on {
        not_applicable(
            place,
            "memory_pools is off (Unsupported asserted by pools::*_unsupported_*)",
        );
    }
    on
}

/// Waits (bounded: a hang detector) until `pool` counts `live` buffers: a dropped buffer's memory
/// comes back once its work is complete, which a place may notice a little after `synchronize`
/// returns (plug-in places return blocks from devstream's reaper thread).
fn returned(place: &Place, pool: &MemoryPool, live: u64) {
    let settled = wait_until(PATIENCE, || {
        pool.stats().is_ok_and(|stats| stats.allocations == live)
    });
    assert!(
        settled,
        "{place}: the pool still counts {:?} buffers, {live} expected",
        pool.stats()
    );
}

/// The statistics' own invariants: reserved covers used, peaks cover current values.
fn consistent(place: &Place, stats: PoolStats) -> PoolStats {
    assert!(
        stats.reserved_bytes >= stats.used_bytes,
        "{place}: reserved below used: {stats:?}"
    );
    assert!(
        stats.peak_used_bytes >= stats.used_bytes,
        "{place}: peak used below used: {stats:?}"
    );
    assert!(
        stats.peak_reserved_bytes >= stats.reserved_bytes,
        "{place}: peak reserved below reserved: {stats:?}"
    );
    stats
}

/// Capability off ⇔ `Unsupported` from every pool entry point, naming the place.
#[test]
fn pool_operations_are_unsupported_exactly_where_the_capability_is_off() {
    for_each_place(|place| {
        let on = caps(place).memory_pools;
        let stream = Stream::new(place)?;
        let default = MemoryPool::default_for(place);
        let new = MemoryPool::new(place, PoolOptions::default());
        for (op, result) in [("default_pool", &default), ("new_pool", &new)] {
            match (on, result) {
                (false, Err(Error::Unsupported { place: p, .. })) => assert_eq!(p, place),
                (false, other) => panic!("{op} on {place}: capability off, got {other:?}"),
                (true, Err(e)) => panic!("{op} on {place}: capability on, got {e:?}"),
                (true, Ok(pool)) => assert_eq!(pool.place(), place),
            }
        }
        // A pool to hand to `alloc_from`: this place's where there is one, else any place's.
        let pool = match new {
            Ok(pool) => Some(pool),
            Err(_) => devstream::places()
                .iter()
                .find_map(|p| MemoryPool::new(p, PoolOptions::default()).ok()),
        };
        if let Some(pool) = pool {
            match (on, stream.alloc_from(&pool, 64)) {
                (false, Err(Error::Unsupported { op, place: p })) => {
                    assert_eq!((op, &p), ("alloc_from", place))
                }
                (false, other) => panic!("alloc_from on {place}: capability off, got {other:?}"),
                (true, Err(e)) => panic!("alloc_from on {place}: capability on, got {e:?}"),
                (true, Ok(buffer)) => assert_eq!(buffer.len(), 64),
            }
        }
        sync(&stream)
    });
}

/// Allocations raise `used_bytes` and `allocations`; dropping the buffers (after their work has
/// run) brings both back; peaks cover what was used.
#[test]
fn stats_follow_buffers_allocated_and_dropped_after_their_work() {
    for_each_place(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = caching_pool(place)?;
        let stream = Stream::new(place)?;
        let empty = consistent(place, pool.stats()?);
        assert_eq!(
            (empty.used_bytes, empty.allocations),
            (0, 0),
            "{place}: a new pool"
        );
        let lens = [1000usize, 4096, 100_000];
        let buffers = lens
            .iter()
            .map(|&len| stream.alloc_from(&pool, len))
            .collect::<Result<Vec<_>>>()?;
        for (buffer, &len) in buffers.iter().zip(&lens) {
            assert_eq!(buffer.len(), len);
            stream.fill(buffer, 0, len, 0x5A)?;
        }
        let live = consistent(place, pool.stats()?);
        let asked: u64 = lens.iter().map(|&l| l as u64).sum();
        assert_eq!(live.allocations, 3, "{place}: {live:?}");
        assert!(
            live.used_bytes >= asked,
            "{place}: {live:?} for {asked} bytes"
        );
        drop(buffers);
        sync(&stream)?;
        returned(place, &pool, 0);
        let after = consistent(place, pool.stats()?);
        assert_eq!(
            (after.used_bytes, after.allocations),
            (0, 0),
            "{place}: every buffer dropped and its work done: {after:?}"
        );
        assert!(after.peak_used_bytes >= asked, "{place}: {after:?}");
        assert!(
            after.peak_reserved_bytes >= after.peak_used_bytes,
            "{place}: {after:?}"
        );
        Ok(())
    });
}

/// Memory freed while queued work still uses it is not handed to another stream before that
/// work: a buffer taken meanwhile from the same pool, of the same size, and written at once, must
/// not be the memory the held work still reads.
#[test]
fn memory_freed_under_queued_work_is_not_reused_before_that_work() {
    for_each_place(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = caching_pool(place)?;
        let (first, second) = (Stream::new(place)?, Stream::new(place)?);
        let len = 64 * 1024;
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let host = first.alloc_host(len)?;
        let used = first.alloc_from(&pool, len)?;
        first.copy_from_host(&used, 0, &data)?;
        let Some(gate) = Gate::close(&first)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        first.copy_device_to_host(&host, 0, &used, 0, len)?;
        drop(used);
        let taken = second.alloc_from(&pool, len)?;
        second.fill(&taken, 0, len, 0xEE)?;
        // Give the second stream's fill time to run where nothing orders it after the held
        // work; a correct pool passes however long this is.
        let _ = wait_until(Duration::from_millis(200), || {
            second.query().unwrap_or(true)
        });
        gate.release();
        sync(&first)?;
        sync(&second)?;
        assert!(
            host.to_vec()? == data,
            "{place}: the held copy read memory the pool handed out again before it ran"
        );
        let check = second.alloc_host(len)?;
        second.copy_device_to_host(&check, 0, &taken, 0, len)?;
        sync(&second)?;
        assert_eq!(check.to_vec()?, vec![0xEE; len], "{place}");
        Ok(())
    });
}

/// Memory freed while queued work still uses it and taken again on the same stream (a pool may
/// hand it back at once there, without waiting: the stream orders the new buffer's work after the
/// old one's) is written only after that work read it, through `alloc` and `alloc_from` alike; a
/// buffer of another length taken meanwhile, and the statistics read after the work, see the
/// memory as free.
#[test]
fn memory_freed_under_queued_work_and_taken_again_on_its_stream_follows_that_work() {
    for_each_place(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = caching_pool(place)?;
        let len = 64 * 1024;
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        for from_pool in [false, true] {
            let stream = Stream::new(place)?;
            let take = |len| {
                if from_pool {
                    stream.alloc_from(&pool, len)
                } else {
                    stream.alloc(len)
                }
            };
            let host = stream.alloc_host(len)?;
            let used = take(len)?;
            stream.copy_from_host(&used, 0, &data)?;
            let Some(gate) = Gate::close(&stream)? else {
                not_applicable(place, "no gate");
                return Ok(());
            };
            stream.copy_device_to_host(&host, 0, &used, 0, len)?;
            drop(used);
            let taken = take(len)?;
            stream.fill(&taken, 0, len, 0xEE)?;
            let other = take(len / 2)?;
            stream.fill(&other, 0, len / 2, 0x11)?;
            gate.release();
            sync(&stream)?;
            assert!(
                host.to_vec()? == data,
                "{place} (alloc_from: {from_pool}): the held copy read memory written by a \
                 buffer taken after it on its stream"
            );
            let check = stream.alloc_host(len)?;
            stream.copy_device_to_host(&check, 0, &taken, 0, len)?;
            sync(&stream)?;
            assert_eq!(
                check.to_vec()?,
                vec![0xEE; len],
                "{place}: the buffer taken again"
            );
            drop((taken, other));
            sync(&stream)?;
            if from_pool {
                returned(place, &pool, 0);
                let stats = consistent(place, pool.stats()?);
                assert_eq!(
                    stats.used_bytes, 0,
                    "{place}: every buffer of the pool dropped after its work: {stats:?}"
                );
            }
        }
        Ok(())
    });
}

/// `reset_peak` sets both peaks to the current values.
#[test]
fn peaks_reset_to_current_values() {
    for_each_place(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = MemoryPool::new(place, PoolOptions::default())?;
        let stream = Stream::new(place)?;
        let big = stream.alloc_from(&pool, 1 << 20)?;
        stream.fill(&big, 0, 1 << 20, 1)?;
        drop(big);
        sync(&stream)?;
        returned(place, &pool, 0);
        let before = consistent(place, pool.stats()?);
        assert!(before.peak_used_bytes >= 1 << 20, "{place}: {before:?}");
        pool.reset_peak()?;
        let after = consistent(place, pool.stats()?);
        assert_eq!(
            after.peak_used_bytes, after.used_bytes,
            "{place}: {after:?}"
        );
        assert_eq!(
            after.peak_reserved_bytes, after.reserved_bytes,
            "{place}: {after:?}"
        );
        // Since the reset only this buffer was taken: the peak is what it uses, not the 1 MiB.
        let small = stream.alloc_from(&pool, 4096)?;
        let now = consistent(place, pool.stats()?);
        assert!(now.used_bytes >= 4096, "{place}: {now:?}");
        assert_eq!(now.peak_used_bytes, now.used_bytes, "{place}: {now:?}");
        drop(small);
        sync(&stream)
    });
}

/// Once the work that freed memory has drained, a pool with no live buffers keeps at most its
/// release threshold reserved; the threshold reads back as set.
#[test]
fn a_release_threshold_bounds_reserved_memory_once_work_drains() {
    for_each_place(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = MemoryPool::new(place, PoolOptions::default())?;
        assert_eq!(
            pool.release_threshold()?,
            0,
            "{place}: the default threshold"
        );
        let stream = Stream::new(place)?;
        for threshold in [0u64, 192 * 1024, u64::MAX] {
            pool.set_release_threshold(threshold)?;
            assert_eq!(pool.release_threshold()?, threshold, "{place}");
            let buffers = (0..8)
                .map(|_| stream.alloc_from(&pool, 64 * 1024))
                .collect::<Result<Vec<_>>>()?;
            for buffer in &buffers {
                stream.fill(buffer, 0, buffer.len(), 3)?;
            }
            drop(buffers);
            sync(&stream)?;
            returned(place, &pool, 0);
            let stats = consistent(place, pool.stats()?);
            assert_eq!(stats.used_bytes, 0, "{place}: {stats:?}");
            assert!(
                stats.reserved_bytes <= threshold,
                "{place}: threshold {threshold}, after the work drained: {stats:?}"
            );
        }
        Ok(())
    });
}

/// Memory a drain point freed while the stream that last used it was capturing comes back once
/// the capture has ended and the stream has drained, with the stream held behind a gate when the
/// capture ended (so its work from before the capture was still queued then): the pool's
/// statistics, the next drain point, give it back. The pool's statistics are asked during the
/// capture, which frees what the pool caches for that stream; a place that cannot order a free
/// on a capturing stream (CUDA, HIP) defers it until the capture's end and then until the
/// stream's earlier work completes.
#[test]
fn memory_freed_while_its_stream_captures_is_back_once_the_capture_ends_and_the_stream_drains() {
    for_each_place(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        if caps(place).capture == CaptureSupport::None {
            not_applicable(place, "capture is off");
            return Ok(());
        }
        const LEN: usize = 1 << 20;
        let pool = MemoryPool::new(place, PoolOptions::default())?;
        let stream = Stream::new(place)?;
        let scratch = stream.alloc(4096)?;
        let buffer = stream.alloc_from(&pool, LEN)?;
        stream.fill(&buffer, 0, LEN, 7)?;
        drop(buffer);
        let gate = Gate::close(&stream)?;
        stream.begin_capture(CaptureMode::ThreadLocal)?;
        consistent(place, pool.stats()?);
        stream.fill(&scratch, 0, 4096, 1)?;
        let graph = stream.end_capture()?;
        drop(gate);
        sync(&stream)?;
        let settled = wait_until(PATIENCE, || {
            pool.stats()
                .is_ok_and(|stats| stats.used_bytes == 0 && stats.allocations == 0)
        });
        assert!(
            settled,
            "{place}: a buffer dropped before a capture, whose memory was freed during it, \
             still counts as used after the capture ended and its stream drained: {:?}",
            pool.stats()
        );
        let after = consistent(place, pool.stats()?);
        assert!(
            after.reserved_bytes <= after.used_bytes,
            "{place}: threshold 0, nothing live, work drained: {after:?}"
        );
        drop(graph);
        Ok(())
    });
}

/// `trim(keep)` returns cached memory: at most `keep` bytes stay reserved beyond live buffers.
/// Alone: an out-of-memory retry of another test trims every pool of the place, this one's cache
/// included (on the GPU machine, on cpu: "reserved_bytes: 786432" of the 1 MiB freed).
#[test]
fn trim_returns_cached_memory() {
    for_each_place_alone(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = caching_pool(place)?;
        let stream = Stream::new(place)?;
        let buffers = (0..4)
            .map(|_| stream.alloc_from(&pool, 256 * 1024))
            .collect::<Result<Vec<_>>>()?;
        for buffer in &buffers {
            stream.fill(buffer, 0, buffer.len(), 9)?;
        }
        drop(buffers);
        sync(&stream)?;
        returned(place, &pool, 0);
        let cached = consistent(place, pool.stats()?);
        assert!(
            cached.reserved_bytes >= 1 << 20,
            "{place}: a pool whose threshold is u64::MAX keeps what was freed: {cached:?}"
        );
        pool.trim(0)?;
        let trimmed = consistent(place, pool.stats()?);
        assert_eq!(trimmed.reserved_bytes, 0, "{place}: trim(0): {trimmed:?}");
        // The pool still hands out memory after a trim.
        let again = stream.alloc_from(&pool, 4096)?;
        stream.fill(&again, 0, 4096, 1)?;
        sync(&stream)
    });
}

/// An absurd request is `Error::OutOfMemory` naming the size and carrying the pool's statistics
/// (the live buffer in them); the pool works after it, and so does the default pool after an
/// absurd `alloc`. Alone: the retry trims every pool of the place.
#[test]
fn an_absurd_request_is_out_of_memory_with_stats_and_the_pool_works_after() {
    for_each_place_alone(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = caching_pool(place)?;
        let stream = Stream::new(place)?;
        let live = stream.alloc_from(&pool, 4096)?;
        let absurd = 1usize << 60;
        match stream.alloc_from(&pool, absurd) {
            Err(Error::OutOfMemory {
                place: p,
                bytes,
                stats: Some(stats),
            }) => {
                assert_eq!((&p, bytes), (place, absurd));
                assert_eq!(stats.allocations, 1, "{place}: {stats:?}");
                assert!(stats.used_bytes >= 4096, "{place}: {stats:?}");
            }
            other => {
                panic!("{place}: alloc_from(1 EiB): expected OutOfMemory with stats, got {other:?}")
            }
        }
        let data: Vec<u8> = (0..4096).map(|i| i as u8).collect();
        let host = stream.alloc_host(4096)?;
        let after = stream.alloc_from(&pool, 4096)?;
        stream.copy_from_host(&after, 0, &data)?;
        stream.copy_device_to_host(&host, 0, &after, 0, 4096)?;
        sync(&stream)?;
        assert_eq!(host.to_vec()?, data, "{place}: the pool after OutOfMemory");
        assert_eq!(pool.stats()?.allocations, 2, "{place}");
        drop((live, after));

        match stream.alloc(absurd) {
            Err(Error::OutOfMemory {
                bytes, stats: Some(_), ..
            }) => assert_eq!(bytes, absurd),
            other => panic!("{place}: alloc(1 EiB): expected OutOfMemory with the default pool's stats, got {other:?}"),
        }
        let fine = stream.alloc(4096)?;
        stream.fill(&fine, 0, 4096, 2)?;
        sync(&stream)
    });
}

/// A pool at its size limit whose cache holds blocks it cannot use for a new size: the
/// allocation runs out, the retry trims the cache, and it succeeds; a request past the limit is
/// `OutOfMemory` with the pool's statistics. Alone: the retry trims every pool of the place.
#[test]
fn a_pool_at_its_size_limit_trims_its_cache_and_retries() {
    for_each_place_alone(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let limit = 64u64 << 20;
        let options = PoolOptions {
            release_threshold: u64::MAX,
            max_size: limit,
        };
        let pool = match MemoryPool::new(place, options) {
            Err(e @ (Error::InvalidArgument(_) | Error::Driver { .. })) => {
                not_applicable(place, &format!("no pool size limit here: {e}"));
                return Ok(());
            }
            other => other?,
        };
        let stream = Stream::new(place)?;
        let quarters = (0..4)
            .map(|_| stream.alloc_from(&pool, 16 << 20))
            .collect::<Result<Vec<_>>>()?;
        for buffer in &quarters {
            stream.fill(buffer, 0, 4096, 1)?;
        }
        drop(quarters);
        sync(&stream)?;
        returned(place, &pool, 0);
        let cached = consistent(place, pool.stats()?);
        assert!(cached.reserved_bytes <= limit, "{place}: {cached:?}");
        let half = stream.alloc_from(&pool, 32 << 20)?;
        stream.fill(&half, 0, 4096, 2)?;
        sync(&stream)?;
        let after = consistent(place, pool.stats()?);
        assert!(after.reserved_bytes <= limit, "{place}: {after:?}");
        assert_eq!(after.allocations, 1, "{place}: {after:?}");
        match stream.alloc_from(&pool, limit as usize + 1) {
            Err(Error::OutOfMemory {
                stats: Some(stats), ..
            }) => assert_eq!(stats.allocations, 1, "{place}: {stats:?}"),
            other => panic!(
                "{place}: past the pool's limit: expected OutOfMemory with stats, got {other:?}"
            ),
        }
        drop(half);
        sync(&stream)
    });
}

/// The default pool is the one `alloc` takes from. Alone: other tests allocate from it too.
#[test]
fn the_default_pool_is_the_one_alloc_takes_from() {
    for_each_place_alone(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = MemoryPool::default_for(place)?;
        assert_eq!(
            pool,
            MemoryPool::default_for(place)?,
            "{place}: one default pool"
        );
        let stream = Stream::new(place)?;
        let before = consistent(place, pool.stats()?);
        let buffer = stream.alloc(1 << 20)?;
        let during = consistent(place, pool.stats()?);
        assert_eq!(
            during.allocations,
            before.allocations + 1,
            "{place}: {during:?}"
        );
        assert!(
            during.used_bytes >= before.used_bytes + (1 << 20),
            "{place}: {before:?} then {during:?}"
        );
        drop(buffer);
        sync(&stream)?;
        returned(place, &pool, before.allocations);
        let after = consistent(place, pool.stats()?);
        assert_eq!(after.allocations, before.allocations, "{place}: {after:?}");
        Ok(())
    });
}

/// A pool of another place (of another backend where there is one) answers `PlaceMismatch`.
#[test]
fn a_pool_of_another_place_is_a_place_mismatch() {
    for_each_place(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let Some(other) = other_backend_place(place).filter(|p| caps(p).memory_pools) else {
            not_applicable(place, "no other place with memory pools");
            return Ok(());
        };
        let foreign = MemoryPool::new(&other, PoolOptions::default())?;
        let stream = Stream::new(place)?;
        match stream.alloc_from(&foreign, 64) {
            Err(Error::PlaceMismatch {
                expected, found, ..
            }) => assert_eq!((&expected, &found), (place, &other)),
            other => panic!("{place}: alloc_from a pool of another place: {other:?}"),
        }
        Ok(())
    });
}

/// One pool used from four threads at once: two allocate, fill, hand buffers to the other's
/// stream and drop them; one asks statistics, resets peaks and trims; one drops buffers that
/// the others' streams still use. Nothing hangs or fails, the statistics stay consistent
/// throughout, and once everything is dropped and drained the pool counts nothing live.
#[test]
fn a_pool_used_from_four_threads_at_once_stays_consistent() {
    const ROUNDS: usize = 300;
    for_each_place(|place| {
        if !has_pools(place) {
            return Ok(());
        }
        let pool = MemoryPool::new(place, PoolOptions::default())?;
        let streams = [Stream::new(place)?, Stream::new(place)?];
        let (handed_tx, handed_rx) = std::sync::mpsc::channel::<devstream::DeviceBuffer>();
        let allocators: Vec<_> = (0..2)
            .map(|index| {
                let (pool, own, other) = (
                    pool.clone(),
                    streams[index].clone(),
                    streams[1 - index].clone(),
                );
                let handed = handed_tx.clone();
                std::thread::spawn(move || -> Result<()> {
                    for round in 0..ROUNDS {
                        let len = [64, 4096, 100_000][(round + index) % 3];
                        let buffer = own.alloc_from(&pool, len)?;
                        own.fill(&buffer, 0, len, round as u8)?;
                        // The other stream uses it after this one's fill.
                        other.wait_stream(&own)?;
                        other.fill(&buffer, 0, len.min(64), 1)?;
                        if round % 4 == 0 {
                            // Dropped by the fourth thread, while the streams may still use it.
                            let _ = handed.send(buffer);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        drop(handed_tx);
        let dropper = std::thread::spawn(move || {
            for buffer in handed_rx {
                drop(buffer);
            }
        });
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (pool, stop) = (pool.clone(), Arc::clone(&stop));
            std::thread::spawn(move || -> Result<u64> {
                let mut looks = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let stats = pool.stats()?;
                    assert!(
                        stats.reserved_bytes >= stats.used_bytes,
                        "reserved below used while in use: {stats:?}"
                    );
                    match looks % 3 {
                        0 => pool.reset_peak()?,
                        1 => pool.trim(0)?,
                        _ => {}
                    }
                    looks += 1;
                }
                Ok(looks)
            })
        };
        for allocator in allocators {
            allocator.join().expect("an allocating thread panicked")?;
        }
        dropper.join().expect("the dropping thread panicked");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let looks = watcher.join().expect("the watching thread panicked")?;
        for stream in &streams {
            sync(stream)?;
        }
        returned(place, &pool, 0);
        let settled = wait_until(PATIENCE, || {
            pool.stats().is_ok_and(|stats| stats.used_bytes == 0)
        });
        assert!(
            settled,
            "{place}: {:?} after everything drained",
            pool.stats()
        );
        println!("[conformance] {place}: {ROUNDS} rounds on two threads beside {looks} statistics, peak resets and trims");
        Ok(())
    });
}
