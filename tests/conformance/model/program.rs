//! The programs: their operations and the strategies that generate them.

use super::*;

/// One operation of a program. Slot numbers are reduced modulo the program's stream count.
#[derive(Clone, Debug)]
pub(super) enum Op {
    /// A host function that appends its id to the log.
    Task(usize),
    /// Records event slot `event` on `stream` (`fresh`: `record_event()` into the slot).
    Record {
        stream: usize,
        event: usize,
        fresh: bool,
    },
    /// `stream.wait_event(slot)` (a never-recorded event if the slot is empty).
    WaitEvent { stream: usize, event: usize },
    /// `stream.wait_stream(other)`.
    WaitStream { stream: usize, other: usize },
    /// `stream.wait_flag(gate, next threshold)`: held until the host raises the gate.
    Gate { stream: usize, gate: usize },
    /// The host raises a gate by 1 to 3 thresholds (GEQ: releases all waits at or below).
    Release { gate: usize, steps: u8 },
    /// `stream.write_flag(its signal flag, next value)`.
    Signal(usize),
    /// `stream.wait_flag(other's signal flag, one of the values other has been asked to write)`.
    WaitSignal {
        stream: usize,
        other: usize,
        pick: u8,
    },
    /// `stream.query()`.
    Query(usize),
    /// `event.query()`.
    QueryEvent(usize),
    /// Releases what the stream depends on, then `stream.synchronize()`.
    Synchronize(usize),
    /// Releases what the event depends on, then `event.synchronize()`.
    SyncEvent(usize),
    /// Drops the stream handle (its work goes on); the slot gets a new stream when next used.
    DropStream(usize),
    /// Drops the event handle in the slot.
    DropEvent(usize),
    /// (Across backends) captures on a new stream of `stream`'s place a wait on the event in
    /// slot `event` (of the other backend) and a host function, then launches the graph on
    /// `stream` once or twice: each replay runs after the work the event captured when the
    /// wait was captured.
    CapturedWait {
        stream: usize,
        event: usize,
        launches: u8,
    },
    /// (Hostile) copies the stream's next value into its own host buffer (through its device
    /// buffer).
    Copy(usize),
    /// (Hostile) a host function that reads its stream's own host buffer.
    ReadTask(usize),
    /// (Hostile) records an event on `other`, then a host function on `stream` that queries its
    /// own stream and that event (and synchronizes it when it was recorded on its own stream).
    QueryTask { stream: usize, other: usize },
    /// (Hostile) a host function on `stream` that launches a host function on `other` and
    /// records an event on `other`.
    LaunchTask { stream: usize, other: usize },
    /// (Hostile, across) a host function on `stream` given shared host buffers
    /// (`Stream::launch_host_func_with`): `which` 1, 2 or 3 picks buffer 0, 1 or both, given in
    /// reverse order when `reversed`. It reads each (it must see the last write submitted before
    /// it, on whatever stream), then writes a new value into each.
    Given {
        stream: usize,
        which: u8,
        reversed: bool,
    },
    /// (Hostile, across) `stream` writes a new value into shared buffer `buffer` by copies
    /// (host bytes → its device buffer → the shared buffer). Skipped where the stream is not on
    /// the buffer's place or where it would race with an earlier copy of the buffer that
    /// nothing orders before it.
    SharedWrite { stream: usize, buffer: usize },
    /// (Hostile, across) `stream` copies shared buffer `buffer` to its device buffer and on into
    /// a host buffer of its own, then a host function given that one observes the value: the
    /// last write submitted before the copy. Skipped as [`Op::SharedWrite`] is.
    SharedRead { stream: usize, buffer: usize },
    /// (Hostile, across) drops the program's handle of shared buffer `buffer` while host
    /// functions given it and copies of it may be pending (they keep what they use); the next
    /// use makes a new one.
    DropShared(usize),
}

#[derive(Clone, Debug)]
pub(super) struct Program {
    pub(super) streams: usize,
    pub(super) ops: Vec<Op>,
}

/// The operations of a program: `hostile` adds host functions that call back into devstream,
/// `across` (programs over two places of different backends) adds captured waits across
/// backends.
pub(super) fn op_strategy(hostile: bool, across: bool) -> BoxedStrategy<Op> {
    let s = || 0..MAX_STREAMS;
    let e = || 0..EVENT_SLOTS;
    let g = || 0..GATES;
    let base = prop_oneof![
        8 => s().prop_map(Op::Task),
        3 => (s(), e(), any::<bool>()).prop_map(|(stream, event, fresh)| Op::Record { stream, event, fresh }),
        3 => (s(), e()).prop_map(|(stream, event)| Op::WaitEvent { stream, event }),
        2 => (s(), s()).prop_map(|(stream, other)| Op::WaitStream { stream, other }),
        2 => (s(), g()).prop_map(|(stream, gate)| Op::Gate { stream, gate }),
        2 => (g(), any::<u8>()).prop_map(|(gate, steps)| Op::Release { gate, steps }),
        2 => s().prop_map(Op::Signal),
        2 => (s(), s(), any::<u8>()).prop_map(|(stream, other, pick)| Op::WaitSignal { stream, other, pick }),
        2 => s().prop_map(Op::Query),
        1 => e().prop_map(Op::QueryEvent),
        1 => s().prop_map(Op::Synchronize),
        1 => e().prop_map(Op::SyncEvent),
        1 => s().prop_map(Op::DropStream),
        1 => e().prop_map(Op::DropEvent),
    ];
    let b = || 0..SHARED;
    let shared = prop_oneof![
        3 => (s(), 1..=3u8, any::<bool>()).prop_map(|(stream, which, reversed)| Op::Given { stream, which, reversed }),
        2 => (s(), b()).prop_map(|(stream, buffer)| Op::SharedWrite { stream, buffer }),
        2 => (s(), b()).prop_map(|(stream, buffer)| Op::SharedRead { stream, buffer }),
        1 => b().prop_map(Op::DropShared),
    ];
    if across {
        let captured =
            (s(), e(), any::<u8>()).prop_map(|(stream, event, launches)| Op::CapturedWait {
                stream,
                event,
                launches,
            });
        return prop_oneof![10 => base, 2 => captured, 3 => shared].boxed();
    }
    if !hostile {
        return base.boxed();
    }
    let calls_back = prop_oneof![
        3 => s().prop_map(Op::Copy),
        3 => s().prop_map(Op::ReadTask),
        2 => (s(), s()).prop_map(|(stream, other)| Op::QueryTask { stream, other }),
        2 => (s(), s()).prop_map(|(stream, other)| Op::LaunchTask { stream, other }),
        7 => shared,
    ];
    prop_oneof![3 => base, 1 => calls_back].boxed()
}

/// Programs made mostly of records and waits, many of them redundant (frameworks' defensive
/// waits), for the elision test.
pub(super) fn wait_heavy_strategy() -> impl Strategy<Value = Program> {
    let s = || 0..MAX_STREAMS;
    let e = || 0..EVENT_SLOTS;
    let op = prop_oneof![
        4 => s().prop_map(Op::Task),
        4 => (s(), e(), any::<bool>()).prop_map(|(stream, event, fresh)| Op::Record { stream, event, fresh }),
        6 => (s(), e()).prop_map(|(stream, event)| Op::WaitEvent { stream, event }),
        4 => (s(), s()).prop_map(|(stream, other)| Op::WaitStream { stream, other }),
        1 => (s(), 0..GATES).prop_map(|(stream, gate)| Op::Gate { stream, gate }),
        1 => (0..GATES, any::<u8>()).prop_map(|(gate, steps)| Op::Release { gate, steps }),
        1 => s().prop_map(Op::Query),
        1 => e().prop_map(Op::QueryEvent),
        1 => s().prop_map(Op::DropStream),
    ];
    (2..=MAX_STREAMS, prop::collection::vec(op, 0..=MAX_OPS))
        .prop_map(|(streams, ops)| Program { streams, ops })
}

pub(super) fn program_strategy(hostile: bool, across: bool) -> impl Strategy<Value = Program> {
    (
        1..=MAX_STREAMS,
        prop::collection::vec(op_strategy(hostile, across), 0..=MAX_OPS),
    )
        .prop_map(|(streams, ops)| Program { streams, ops })
}
