//! Turns a finished recording into a [`Trace`]: waits for the timing events, resolves them with
//! `elapsed`, and puts every place's device times on the host clock.

use super::recorder::{EdgeKind, OpEntry, Session};
use super::{Flow, FlowKind, PoolSample, PoolTrack, Span, Trace, TracedOp, TracedStream};
use crate::dispatch::EventApi;
use crate::Event;
use std::time::Duration;

/// `b - a` in nanoseconds, signed. Tries both directions so that a backend which refuses (or
/// clamps) a negative interval still yields the right sign.
fn signed_ns(a: &Event, b: &Event) -> Option<i128> {
    let forward = EventApi::elapsed(a, b).ok().map(|d| d.as_nanos() as i128);
    let backward = EventApi::elapsed(b, a).ok().map(|d| d.as_nanos() as i128);
    match (forward, backward) {
        (Some(f), Some(b)) => Some(f - b),
        (Some(f), None) => Some(f),
        (None, Some(b)) => Some(-b),
        (None, None) => None,
    }
}

fn duration(ns: i128) -> Duration {
    Duration::from_nanos(u64::try_from(ns.max(0)).unwrap_or(u64::MAX))
}

/// The op's timed events, if it finished and both were recorded.
fn timed(op: &OpEntry) -> Option<(&Event, &Event)> {
    op.host_end_ns?;
    Some((op.start_event.as_ref()?, op.end_event.as_ref()?))
}

pub(super) fn collect(session: Session) -> Trace {
    let Session {
        wall_start,
        streams,
        ops,
        edges,
        pools,
        ..
    } = session;
    let pools = pools
        .into_iter()
        .map(|entry| PoolTrack {
            place: entry.pool.place().clone(),
            id: entry.pool.id(),
            name: entry
                .name
                .unwrap_or_else(|| format!("pool {}", entry.pool.id())),
            samples: entry
                .samples
                .into_iter()
                .map(|(at_ns, stats)| PoolSample {
                    at: Duration::from_nanos(at_ns),
                    used_bytes: stats.used_bytes,
                    reserved_bytes: stats.reserved_bytes,
                })
                .collect(),
        })
        .collect();

    // The device must have passed every timing event before `elapsed` can answer. Waiting on an
    // event that is already complete is cheap; errors of the traced work are not ours to report.
    for (_, end) in ops.iter().filter_map(timed) {
        let _ = EventApi::synchronize(end);
    }

    // Each stream's base: the start event of its first timed op.
    let mut base: Vec<Option<&Event>> = vec![None; streams.len()];
    for op in &ops {
        if let Some((start, _)) = timed(op) {
            base[op.stream].get_or_insert(start);
        }
    }

    // Streams of one place share a clock: relate each base to the first base of its place
    // (its group's reference). A stream whose events cannot be compared forms its own group.
    // `group[s] = (reference stream, base_s - base_reference in ns)`.
    let mut group: Vec<Option<(usize, i128)>> = vec![None; streams.len()];
    for stream in 0..streams.len() {
        let Some(stream_base) = base[stream] else {
            continue;
        };
        let shared = (0..stream).find_map(|reference| {
            let reference_base = base[reference]?;
            let is_reference = group[reference] == Some((reference, 0));
            (is_reference && streams[reference].place == streams[stream].place)
                .then(|| signed_ns(reference_base, stream_base))
                .flatten()
                .map(|delta| (reference, delta))
        });
        group[stream] = Some(shared.unwrap_or((stream, 0)));
    }

    // Device times relative to the group reference, in ns.
    let relative: Vec<Option<(i128, i128)>> = ops
        .iter()
        .map(|op| {
            let (start, end) = timed(op)?;
            let stream_base = base[op.stream]?;
            let (_, delta) = group[op.stream]?;
            let start = delta + signed_ns(stream_base, start)?;
            let end = delta + signed_ns(stream_base, end)?;
            Some((start, end.max(start)))
        })
        .collect();

    // Put each group on the host clock as late as causality allows: the device reached an op's
    // start event no earlier than the host recorded it (`mark_ns`).
    let mut offset: Vec<Option<i128>> = vec![None; streams.len()];
    for (op, rel) in ops.iter().zip(&relative) {
        if let (Some((start, _)), Some((reference, _))) = (rel, group[op.stream]) {
            let bound = i128::from(op.mark_ns) - start;
            let slot = &mut offset[reference];
            *slot = Some(slot.map_or(bound, |current: i128| current.max(bound)));
        }
    }

    let mut new_index = vec![None; ops.len()];
    let mut traced_ops = Vec::with_capacity(ops.len());
    for (index, (op, rel)) in ops.iter().zip(&relative).enumerate() {
        let Some(host_end_ns) = op.host_end_ns else {
            continue;
        };
        let device = rel.and_then(|(start, end)| {
            let (reference, _) = group[op.stream]?;
            let shift = offset[reference]?;
            Some(Span {
                start: duration(shift + start),
                end: duration(shift + end),
            })
        });
        new_index[index] = Some(traced_ops.len());
        traced_ops.push(TracedOp {
            stream: op.stream,
            op: op.name.strip_prefix("devstream.").unwrap_or(op.name),
            label: op.label.clone(),
            host: Span {
                start: Duration::from_nanos(op.host_start_ns),
                end: Duration::from_nanos(host_end_ns),
            },
            device,
        });
    }

    let flows = edges
        .iter()
        .filter_map(|edge| {
            Some(Flow {
                from: new_index[edge.from]?,
                to: new_index[edge.to]?,
                kind: match edge.kind {
                    EdgeKind::Event => FlowKind::Event,
                    EdgeKind::Stream => FlowKind::Stream,
                },
            })
        })
        .collect();

    let traced_streams = streams
        .into_iter()
        .map(|entry| TracedStream {
            name: entry.name.unwrap_or_else(|| format!("stream {}", entry.id)),
            place: entry.place,
            id: entry.id,
            priority: entry.priority,
            timing: entry.timing,
        })
        .collect();

    Trace {
        streams: traced_streams,
        ops: traced_ops,
        flows,
        pools,
        started: wall_start,
    }
}
