//! Model-based property test of memory pools: random programs of allocations, frees and
//! cross-stream uses over up to three streams, some of them held behind gates, run on each place
//! with `memory_pools` and checked against a model of the pool's bytes and of reuse.
//!
//! Each buffer is filled, at allocation, with a value no other live buffer has, by its owning
//! stream; other streams read it after waiting for the owner. A read may be held behind a gate
//! while the buffer is dropped and more buffers are allocated: if the pool handed the memory out
//! again before the held read ran, the new owner's fill would overwrite it and the read would see
//! the wrong value. So reuse is checked by data, never by timing.
//!
//! Bytes: the pool's rounding is learned per place first (each size alone in a fresh pool); where
//! it adds up (two buffers use twice one's bytes), the model predicts `used_bytes` exactly once
//! every stream has drained, else it checks the lower bound. At every step `reserved ≥ used`,
//! `allocations` covers the live buffers, and `used_bytes` covers what live buffers round to;
//! after everything is dropped and drained, `reserved ≤ threshold` and after `trim(0)` nothing is
//! reserved.
//!
//! Where `capture_alloc` is on, programs also capture and replay (`pool_model_graphs`): while
//! streams capture, the other steps leave them alone, allocations in the capture must not touch
//! the program's pool, and a drain waits for the capturing streams' work from before the
//! capture instead of synchronizing them.

use crate::harness::{caps, for_each_place, not_applicable, sync, wait_until, Gate, PATIENCE};
use crate::pool_model_graphs::{
    graph_op_strategy, learn_graph_classes, Captures, Coverage, GraphOp,
};
use devstream::{DeviceBuffer, HostBuffer, MemoryPool, Place, PoolOptions, PoolStats, Stream};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::cell::RefCell;
use std::collections::BTreeMap;

pub(crate) const STREAMS: usize = 3;
const SLOTS: usize = 6;
const MAX_OPS: usize = 32;
/// Programs with captures are longer: a capture and its replays take several steps.
const MAX_OPS_WITH_CAPTURES: usize = 96;
const MIN_CASES: u32 = 48;
/// The sizes programs allocate: below, at and above size-class edges, and one large class.
pub(crate) const SIZES: [usize; 7] = [1, 300, 512, 4096, 4100, 64 << 10, (1 << 20) + 4];

/// One operation. Stream and slot numbers are reduced modulo their counts.
#[derive(Clone, Debug)]
enum Op {
    /// `slot` gets a buffer of `SIZES[size]` from the pool on `stream`, filled there with a
    /// value of its own (a live buffer in the slot is dropped first).
    Alloc {
        slot: usize,
        stream: usize,
        size: usize,
    },
    /// `stream` waits for the slot's owner and copies the buffer to a host buffer.
    Read { slot: usize, stream: usize },
    /// Drops the slot's buffer handle (queued reads still use it).
    Free { slot: usize },
    /// Holds `stream`'s later work until the next release.
    Gate { stream: usize },
    /// Releases every gate.
    Release,
    /// Releases every gate, drains every stream and checks the model exactly.
    Drain,
    /// A step of captures and replays (places with `capture_alloc` only).
    Graph(GraphOp),
}

fn op_strategy(captures: bool) -> BoxedStrategy<Op> {
    let pool_ops = prop_oneof![
        4 => (0..SLOTS, 0..STREAMS, 0..SIZES.len())
            .prop_map(|(slot, stream, size)| Op::Alloc { slot, stream, size }),
        3 => (0..SLOTS, 0..STREAMS).prop_map(|(slot, stream)| Op::Read { slot, stream }),
        3 => (0..SLOTS).prop_map(|slot| Op::Free { slot }),
        2 => (0..STREAMS).prop_map(|stream| Op::Gate { stream }),
        1 => Just(Op::Release),
        1 => Just(Op::Drain),
    ];
    if captures {
        prop_oneof![
            14 => pool_ops,
            20 => graph_op_strategy().prop_map(Op::Graph),
        ]
        .boxed()
    } else {
        pool_ops.boxed()
    }
}

/// A program: the pool's release threshold (`true`: keep everything) and its operations.
fn program_strategy(captures: bool) -> impl Strategy<Value = (bool, Vec<Op>)> {
    let max_ops = if captures {
        MAX_OPS_WITH_CAPTURES
    } else {
        MAX_OPS
    };
    (
        any::<bool>(),
        prop::collection::vec(op_strategy(captures), 1..max_ops),
    )
}

/// How the place's pools count a buffer of each size.
#[derive(Clone, Debug)]
struct Rounding {
    /// `used_bytes` of a pool holding one buffer of `SIZES[i]`.
    used: [u64; SIZES.len()],
    /// Whether two buffers of one size count twice one's bytes, for every size.
    additive: bool,
}

/// Waits (bounded) until `pool` counts between `live` and `live + held` buffers: a place may
/// return a dropped buffer's memory a little after its work completes (plug-in places, from a
/// reaper thread), and `held` buffers dropped under a capture that still runs may stay counted
/// until it ends (CUDA, HIP).
/// The pool's stats once its live count is in `live..=live + held` and, where `used` is given,
/// its used bytes in that range (or [`PATIENCE`] has passed): frees of blocks dropped under a
/// capture run on the device's free thread after the capture ends, so the native pool's byte
/// count can lag the count of buffers for a moment after the streams drained.
fn settled(
    pool: &MemoryPool,
    live: u64,
    held: u64,
    used: Option<std::ops::RangeInclusive<u64>>,
) -> Result<PoolStats, TestCaseError> {
    wait_until(PATIENCE, || {
        pool.stats().is_ok_and(|s| {
            (live..=live + held).contains(&s.allocations)
                && used
                    .as_ref()
                    .is_none_or(|used| used.contains(&s.used_bytes))
        })
    });
    pool.stats().map_err(fail)
}

pub(crate) fn fail(error: devstream::Error) -> TestCaseError {
    TestCaseError::fail(error.to_string())
}

/// Learns how `place`'s pools round each size.
fn learn_rounding(place: &Place) -> devstream::Result<Rounding> {
    let pool = MemoryPool::new(place, PoolOptions::default())?;
    let stream = Stream::new(place)?;
    let mut used = [0; SIZES.len()];
    let mut additive = true;
    for (i, &len) in SIZES.iter().enumerate() {
        let one = stream.alloc_from(&pool, len)?;
        used[i] = pool.stats()?.used_bytes;
        let two = stream.alloc_from(&pool, len)?;
        additive &= pool.stats()?.used_bytes == 2 * used[i];
        drop((one, two));
        sync(&stream)?;
        wait_until(PATIENCE, || pool.stats().is_ok_and(|s| s.allocations == 0));
        pool.trim(0)?;
    }
    Ok(Rounding { used, additive })
}

/// A live buffer of the program.
struct Live {
    buffer: DeviceBuffer,
    owner: usize,
    size: usize,
    value: u8,
    /// The streams that used it (the owner and the readers).
    users: Vec<usize>,
}

/// A buffer dropped while a stream that used it captured: a place may return its memory only
/// once that capture has ended (CUDA and HIP cannot order its free on a capturing stream).
struct HeldForCapture {
    size: usize,
    users: Vec<usize>,
}

/// A read whose result is checked after the next drain.
struct Read {
    host: HostBuffer,
    len: usize,
    value: u8,
}

/// Runs one program on `place` and checks it against the model (`graph_classes`: how the
/// place's capture pools round `SIZES`, where `capture_alloc` is on); adds what its captures
/// exercised to `coverage`.
fn run_program(
    place: &Place,
    rounding: &Rounding,
    graph_classes: Option<&[u64; SIZES.len()]>,
    coverage: &RefCell<Coverage>,
    keep_all: bool,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let threshold = if keep_all { u64::MAX } else { 0 };
    let options = PoolOptions {
        release_threshold: threshold,
        ..Default::default()
    };
    let pool = MemoryPool::new(place, options).map_err(fail)?;
    let streams = (0..STREAMS)
        .map(|_| Stream::new(place))
        .collect::<devstream::Result<Vec<_>>>()
        .map_err(fail)?;
    let mut slots: BTreeMap<usize, Live> = BTreeMap::new();
    let mut reads: Vec<Read> = Vec::new();
    let mut held: Vec<HeldForCapture> = Vec::new();
    let mut gates: Vec<Gate> = Vec::new();
    let mut next_value: u8 = 0;
    // Dropped buffers whose memory may not be back yet (their work may not have run).
    let mut freed_since_drain = 0u64;
    let mut captures = graph_classes
        .map(|classes| Captures::new(place, classes, &pool, &streams))
        .transpose()
        .map_err(fail)?;

    let check_bounds = |slots: &BTreeMap<usize, Live>, freed: u64| -> Result<(), TestCaseError> {
        let stats = pool.stats().map_err(fail)?;
        let live = slots.len() as u64;
        let rounded: u64 = slots.values().map(|l| rounding.used[l.size]).sum();
        let asked: u64 = slots.values().map(|l| SIZES[l.size] as u64).sum();
        prop_assert!(
            stats.reserved_bytes >= stats.used_bytes,
            "{place}: {stats:?}"
        );
        prop_assert!(
            stats.allocations >= live && stats.allocations <= live + freed,
            "{place}: {live} live buffers, {freed} freed since the last drain: {stats:?}"
        );
        let floor = if rounding.additive { rounded } else { asked };
        prop_assert!(
            stats.used_bytes >= floor,
            "{place}: live buffers use {floor} bytes as the pool rounds: {stats:?}"
        );
        Ok(())
    };

    for op in ops {
        let capturing = captures.as_ref().map_or_else(Vec::new, Captures::members);
        match *op {
            // The streams of a capture take only the capture's own steps.
            Op::Alloc { stream, .. } | Op::Gate { stream } if capturing.contains(&stream) => {}
            Op::Read { slot, stream }
                if capturing.contains(&stream)
                    || slots
                        .get(&slot)
                        .is_some_and(|live| capturing.contains(&live.owner)) => {}
            Op::Alloc { slot, stream, size } => {
                if let Some(old) = slots.remove(&slot) {
                    freed_since_drain += 1;
                    hold_if_capturing(&mut held, old, &capturing);
                }
                // A value no live buffer has (at most SLOTS are live).
                next_value = next_value.wrapping_add(1).max(1);
                while slots.values().any(|l| l.value == next_value) {
                    next_value = next_value.wrapping_add(1).max(1);
                }
                let owner = &streams[stream];
                let len = SIZES[size];
                let buffer = owner.alloc_from(&pool, len).map_err(fail)?;
                owner.fill(&buffer, 0, len, next_value).map_err(fail)?;
                slots.insert(
                    slot,
                    Live {
                        buffer,
                        owner: stream,
                        size,
                        value: next_value,
                        users: vec![stream],
                    },
                );
            }
            Op::Read { slot, stream } => {
                let Some(live) = slots.get_mut(&slot) else {
                    continue;
                };
                if !live.users.contains(&stream) {
                    live.users.push(stream);
                }
                let reader = &streams[stream];
                if stream != live.owner {
                    reader.wait_stream(&streams[live.owner]).map_err(fail)?;
                }
                let len = SIZES[live.size];
                let host = reader.alloc_host(len).map_err(fail)?;
                reader
                    .copy_device_to_host(&host, 0, &live.buffer, 0, len)
                    .map_err(fail)?;
                reads.push(Read {
                    host,
                    len,
                    value: live.value,
                });
            }
            Op::Free { slot } => {
                if let Some(old) = slots.remove(&slot) {
                    freed_since_drain += 1;
                    hold_if_capturing(&mut held, old, &capturing);
                }
            }
            Op::Gate { stream } => {
                if let Some(gate) = Gate::close(&streams[stream]).map_err(fail)? {
                    gates.push(gate);
                }
            }
            Op::Release => gates.clear(),
            Op::Drain => {
                gates.clear();
                if let Some(captures) = &captures {
                    captures.wait_for_work_before_capture()?;
                }
                drain(
                    place, &pool, rounding, &streams, &capturing, &slots, &mut reads, &mut held,
                )?;
                if let Some(captures) = &mut captures {
                    captures.drain()?;
                }
                freed_since_drain = 0;
            }
            Op::Graph(ref step) => {
                if let Some(captures) = &mut captures {
                    captures.apply(step, !gates.is_empty())?;
                }
            }
        }
        // Buffers dropped under a capture stay counted until it ends, across drains.
        check_bounds(&slots, freed_since_drain + held.len() as u64)?;
    }

    gates.clear();
    if let Some(captures) = &mut captures {
        coverage.borrow_mut().add(&captures.finish()?);
    }
    drop(captures);
    slots.clear();
    drain(
        place,
        &pool,
        rounding,
        &streams,
        &[],
        &slots,
        &mut reads,
        &mut held,
    )?;
    let drained = pool.stats().map_err(fail)?;
    prop_assert!(
        drained.reserved_bytes <= threshold,
        "{place}: threshold {threshold}, every buffer dropped and drained: {drained:?}"
    );
    pool.trim(0).map_err(fail)?;
    let trimmed = pool.stats().map_err(fail)?;
    prop_assert_eq!(
        trimmed.reserved_bytes,
        0,
        "{}: trim(0): {:?}",
        place,
        trimmed
    );
    Ok(())
}

/// Notes `dropped` as held until the capture ends where a stream that used it captures now.
fn hold_if_capturing(held: &mut Vec<HeldForCapture>, dropped: Live, capturing: &[usize]) {
    if dropped.users.iter().any(|u| capturing.contains(u)) {
        held.push(HeldForCapture {
            size: dropped.size,
            users: dropped.users,
        });
    }
}

/// Drains every stream (but the `capturing` ones, whose work from before the capture the
/// caller waits for), checks every read so far by its data, and the pool's statistics against
/// the live buffers.
#[allow(clippy::too_many_arguments)]
fn drain(
    place: &Place,
    pool: &MemoryPool,
    rounding: &Rounding,
    streams: &[Stream],
    capturing: &[usize],
    slots: &BTreeMap<usize, Live>,
    reads: &mut Vec<Read>,
    held: &mut Vec<HeldForCapture>,
) -> Result<(), TestCaseError> {
    // Memory dropped under a capture that has ended since is back now.
    held.retain(|h| h.users.iter().any(|u| capturing.contains(u)));
    let held_bytes: u64 = held.iter().map(|h| rounding.used[h.size]).sum();
    for (i, stream) in streams.iter().enumerate() {
        if !capturing.contains(&i) {
            sync(stream).map_err(fail)?;
        }
    }
    for read in reads.drain(..) {
        let got = read.host.to_vec().map_err(fail)?;
        prop_assert!(
            got.len() == read.len && got.iter().all(|&b| b == read.value),
            "{place}: a read of a buffer filled with {} saw other bytes ({:?}...): its memory \
             was handed out again before the read ran",
            read.value,
            &got[..got.len().min(8)]
        );
    }
    let live = slots.len() as u64;
    let rounded: u64 = slots.values().map(|l| rounding.used[l.size]).sum();
    let used = rounding.additive.then_some(rounded..=rounded + held_bytes);
    let stats = settled(pool, live, held.len() as u64, used)?;
    prop_assert!(
        (live..=live + held.len() as u64).contains(&stats.allocations),
        "{}: {} live buffers, {} dropped under a capture still running: {:?}",
        place,
        live,
        held.len(),
        stats
    );
    if rounding.additive {
        prop_assert!(
            (rounded..=rounded + held_bytes).contains(&stats.used_bytes),
            "{}: live buffers of sizes {:?} ({} bytes as the pool rounds), {} bytes dropped \
             under a capture still running: {:?}",
            place,
            slots.values().map(|l| SIZES[l.size]).collect::<Vec<_>>(),
            rounded,
            held_bytes,
            stats
        );
    }
    prop_assert!(
        stats.reserved_bytes >= stats.used_bytes,
        "{place}: {stats:?}"
    );
    Ok(())
}

/// Random programs of allocations, frees and cross-stream uses keep the pool's bytes as the
/// model predicts and never hand out memory that held work still reads.
#[test]
fn pool_programs_obey_the_model() {
    for_each_place(|place| {
        if !caps(place).memory_pools {
            not_applicable(place, "memory_pools is off");
            return Ok(());
        }
        let rounding = learn_rounding(place)?;
        let graph_classes = if caps(place).capture_alloc {
            Some(learn_graph_classes(place)?)
        } else {
            None
        };
        let defaults = Config::default();
        let config = Config {
            // At least MIN_CASES unless PROPTEST_CASES asks for a number (a run under a
            // sanitizer asks for fewer).
            cases: if std::env::var_os("PROPTEST_CASES").is_some() {
                defaults.cases
            } else {
                defaults.cases.max(MIN_CASES)
            },
            failure_persistence: None,
            max_shrink_iters: 1024,
            // A failing program on a GPU place can take its checks' whole patience per run:
            // shrinking stops after two minutes with the smallest program found so far.
            max_shrink_time: 120_000,
            ..defaults
        };
        let cases = config.cases;
        let started = std::time::Instant::now();
        let mut runner = TestRunner::new(config);
        let strategy = program_strategy(graph_classes.is_some());
        let coverage = RefCell::new(Coverage::default());
        let first_failure = std::cell::Cell::new(true);
        match runner.run(&strategy, |(keep_all, ops)| {
            let classes = graph_classes.as_ref();
            let result = run_program(place, &rounding, classes, &coverage, keep_all, &ops);
            if let Err(reason) = &result {
                // Shown before shrinking starts, which can outlast a run's time limit.
                if first_failure.replace(false) {
                    eprintln!("[conformance] pool_model on {place}: first failure: {reason}");
                }
            }
            result
        }) {
            Ok(()) => {}
            Err(TestError::Fail(reason, program)) => {
                panic!("{reason}\nminimal failing program on {place}:\n{program:#?}")
            }
            Err(TestError::Abort(reason)) => panic!("pool model aborted: {reason}"),
        }
        let captures = match graph_classes {
            Some(classes) => format!(
                ", capture pool classes {classes:?}, {:?}",
                coverage.into_inner()
            ),
            None => String::new(),
        };
        eprintln!(
            "[conformance] pool_model on {place}: {cases} programs in {:.2?} \
             ({rounding:?}{captures})",
            started.elapsed()
        );
        Ok(())
    });
}

/// The model's minimal failing program as a fixed case, drained both ways a user drains: a
/// buffer of a threshold-0 pool allocated on one stream and read on another, dropped, then
/// both streams synchronized (or an event after each stream's work synchronized). The memory
/// was freed on a stream devstream keeps for frees of buffers several streams used, which the
/// user never synchronizes: the drain must still bring the pool to its threshold.
#[test]
fn a_buffer_used_by_two_streams_is_released_to_the_threshold_once_both_drain() {
    for_each_place(|place| {
        if !caps(place).memory_pools {
            not_applicable(place, "memory_pools is off");
            return Ok(());
        }
        for drain_by_events in [false, true] {
            let how = if drain_by_events { "events" } else { "streams" };
            let options = PoolOptions {
                release_threshold: 0,
                ..Default::default()
            };
            let pool = MemoryPool::new(place, options)?;
            let (owner, reader) = (Stream::new(place)?, Stream::new(place)?);
            let buffer = owner.alloc_from(&pool, SIZES[0])?;
            owner.fill(&buffer, 0, SIZES[0], 7)?;
            reader.wait_stream(&owner)?;
            let host = reader.alloc_host(SIZES[0])?;
            reader.copy_device_to_host(&host, 0, &buffer, 0, SIZES[0])?;
            drop(buffer);
            if drain_by_events {
                for stream in [&owner, &reader] {
                    let event = devstream::Event::new(place, devstream::EventFlags::default())?;
                    stream.record(&event)?;
                    event.synchronize()?;
                }
            } else {
                sync(&owner)?;
                sync(&reader)?;
            }
            assert_eq!(
                host.to_vec()?,
                vec![7; SIZES[0]],
                "{place}: drained by {how}"
            );
            // A plug-in place may count the drop a little after the work (a reaper thread).
            wait_until(PATIENCE, || pool.stats().is_ok_and(|s| s.allocations == 0));
            let drained = pool.stats()?;
            assert!(
                drained.reserved_bytes == 0 && drained.used_bytes == 0,
                "{place}: threshold 0, the buffer dropped and drained by {how}: {drained:?}"
            );
        }
        Ok(())
    });
}
