//! One rank's part of a program: running its calls on a stream (with a drop of the
//! communicator where the program says) and checking the outcome against the model.

use super::*;

// ---------------------------------------------------------------------------------------------
// Running a program on one rank

/// One receive buffer of a rank's run: which call, and its buffers by the model.
struct Checked {
    unit: usize,
    what: String,
    buffer: DeviceBuffer,
    model: Buffers,
}

/// What one rank saw.
pub(super) struct Outcome {
    /// The first error its stream reported.
    pub(super) error: Option<Error>,
    /// When that error came back (threads: compared with the drop's instant).
    failed_at: Instant,
    /// Each receive buffer with its contents after the run.
    buffers: Vec<(Checked, Vec<u8>)>,
}

/// The calls rank `rank` makes for unit `unit`, in its order: `(call index, call)`.
fn rank_calls(p: &Program, unit: usize, rank: usize) -> Vec<(usize, &Call)> {
    let u = &p.units[unit];
    let mut calls: Vec<(usize, &Call)> = u
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| match c {
            Call::Coll { .. } => true,
            Call::Msg { src, dst, .. } => *src == rank || *dst == rank,
        })
        .collect();
    if u.grouped {
        // Collectives in the same order on every rank, and messages too (both are matched in
        // call order, NCCL's rule), the two interleaved differently on each rank: a group's
        // calls never wait for each other, so a receive may come before its send anywhere.
        let mut g = Gen(p.seed ^ ((unit as u64) << 32) ^ rank as u64);
        let (colls, msgs): (Vec<_>, Vec<_>) = calls
            .into_iter()
            .partition(|(_, c)| matches!(c, Call::Coll { .. }));
        calls = colls;
        let mut at = 0;
        for msg in msgs {
            at += g.below(calls.len() + 1 - at);
            calls.insert(at, msg);
            at += 1;
        }
    } else {
        // Outside a group, sends first: a send never waits, a receive does.
        calls.sort_by_key(|(_, c)| !matches!(c, Call::Msg { src, .. } if *src == rank));
    }
    calls
}

pub(super) fn run_rank(
    p: &Program,
    rank: usize,
    comm: Communicator,
    s: &Stream,
    dropped: &Mutex<Option<Instant>>,
) -> Result<Outcome> {
    comm.set_timeout(Duration::from_secs(60));
    let mut comm = Some(comm);
    let mut buffers: Vec<Checked> = Vec::new();
    'units: for (unit, u) in p.units.iter().enumerate() {
        let drop_here = p.leave.filter(|d| d.rank == rank && d.unit == unit);
        if let Some(d) = drop_here.filter(|d| d.after.is_none()) {
            leave(&mut comm, s, d, dropped)?;
            break 'units;
        }
        let Some(c) = comm.as_ref() else { break };
        if u.grouped {
            c.group_start()?;
        }
        let calls = rank_calls(p, unit, rank);
        let made_all = calls.len();
        for (made, (index, call)) in calls.into_iter().enumerate() {
            if let Some(d) = drop_here.filter(|d| d.after == Some(made)) {
                leave(&mut comm, s, d, dropped)?;
                break 'units;
            }
            let c = comm.as_ref().expect("still a member");
            match call {
                Call::Coll {
                    call: agreed,
                    in_place,
                } => {
                    let mine = p.coll_of(unit, index, rank, *agreed);
                    let model = coll_buffers(p, unit, index, rank, *agreed, in_place[rank]);
                    let recv = upload(s, &model.before)?;
                    let separate = match &model.send {
                        Some(bytes) => Some(upload(s, bytes)?),
                        None => None,
                    };
                    let send = separate.as_ref().unwrap_or(&recv);
                    let (count, dtype) = (mine.count, mine.dtype);
                    match mine.kind {
                        Kind::AllReduce => s.all_reduce(c, send, &recv, count, dtype, mine.op)?,
                        Kind::Broadcast => s.broadcast(c, send, &recv, count, dtype, mine.root)?,
                        Kind::Reduce => {
                            s.reduce(c, send, &recv, count, dtype, mine.op, mine.root)?
                        }
                        Kind::AllGather => s.all_gather(c, send, &recv, count, dtype)?,
                        Kind::ReduceScatter => {
                            s.reduce_scatter(c, send, &recv, count, dtype, mine.op)?
                        }
                        Kind::AllToAll => s.all_to_all(c, send, &recv, count, dtype)?,
                    }
                    let what = format!(
                        "unit {unit} call {index}: {agreed:?} in place {}",
                        in_place[rank]
                    );
                    buffers.push(Checked {
                        unit,
                        what,
                        buffer: recv,
                        model,
                    });
                }
                Call::Msg {
                    src,
                    dst,
                    count,
                    dtype,
                } => {
                    let (mine_count, mine_dtype) = p.msg_of(unit, index, rank, *count, *dtype);
                    if *src == rank {
                        let mut padded: Vec<u8> = (0..ELEMENTS)
                            .flat_map(|i| input(p, unit, index, *src, i, *dtype, ReduceOp::Sum))
                            .collect();
                        padded.resize(ELEMENTS * 8, SENTINEL);
                        let buf = upload(s, &padded)?;
                        s.send(c, &buf, mine_count, mine_dtype, *dst)?;
                    } else {
                        let before = vec![SENTINEL; ELEMENTS * 8];
                        let mut after = before.clone();
                        let bytes = count * dtype.size();
                        let sent: Vec<u8> = (0..*count)
                            .flat_map(|i| input(p, unit, index, *src, i, *dtype, ReduceOp::Sum))
                            .collect();
                        after[..bytes].copy_from_slice(&sent);
                        let recv = upload(s, &before)?;
                        s.recv(c, &recv, mine_count, mine_dtype, *src)?;
                        let what = format!(
                            "unit {unit} call {index}: message {src} -> {dst} of {count} {dtype}"
                        );
                        let model = Buffers {
                            before,
                            send: None,
                            after,
                            unspecified: None,
                        };
                        buffers.push(Checked {
                            unit,
                            what,
                            buffer: recv,
                            model,
                        });
                    }
                }
            }
        }
        if let Some(d) = drop_here.filter(|d| d.after.is_some_and(|a| a >= made_all)) {
            leave(&mut comm, s, d, dropped)?;
            break 'units;
        }
        if u.grouped {
            comm.as_ref().expect("still a member").group_end()?;
        }
    }
    let error = s.synchronize().err();
    let failed_at = Instant::now();
    let mut read = Vec::new();
    for checked in buffers {
        let host = s.alloc_host(checked.buffer.len())?;
        s.copy_device_to_host(&host, 0, &checked.buffer, 0, checked.buffer.len())?;
        s.synchronize()?;
        let bytes = host.to_vec()?;
        read.push((checked, bytes));
    }
    drop(comm);
    Ok(Outcome {
        error,
        failed_at,
        buffers: read,
    })
}

/// The drop: this rank's communicator goes (its queued work still runs), the instant noted.
fn leave(
    comm: &mut Option<Communicator>,
    s: &Stream,
    d: Leave,
    dropped: &Mutex<Option<Instant>>,
) -> Result<()> {
    if d.synchronized {
        s.synchronize()?;
    }
    *comm = None;
    *dropped.lock().unwrap() = Some(Instant::now());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Checking a rank's outcome against the model

/// The first unit rank `rank` waits on the dropping rank in, at or after the drop.
fn first_wait_on(p: &Program, rank: usize, d: Leave) -> Option<usize> {
    (d.unit..p.units.len()).find(|&unit| {
        p.units[unit].calls.iter().any(|c| match c {
            Call::Coll { .. } => true,
            Call::Msg { src, dst, .. } => *src == d.rank && *dst == rank,
        })
    })
}

/// Checks one rank's outcome; the digest of its buffers.
pub(super) fn check(
    p: &Program,
    rank: usize,
    outcome: &Outcome,
    dropped_at: Option<Instant>,
    latencies: &Mutex<Vec<Duration>>,
) -> u64 {
    let fail = |what: String| -> ! {
        panic!(
            "program seed {} ({} ranks; rerun: DEVSTREAM_COMM_PROGRAM_SEED={}), rank {rank}: {what}\n{p:#?}",
            p.seed, p.nranks, p.seed
        )
    };
    let failure = outcome.error.as_ref().map(comm_failure);
    if let Some(Some(CommFailure::Timeout)) = failure {
        fail(format!("timed out: {:?}", outcome.error));
    }
    if let Some(None) = failure {
        fail(format!(
            "a failure that is not Error::Comm: {:?}",
            outcome.error
        ));
    }
    let failure = failure.flatten();
    // Units whose buffers the model gives; units whose buffers must be untouched.
    let (exact_until, untouched_from) = if let Some(unit) = p.changed_collective() {
        if failure != Some(CommFailure::Mismatch) {
            fail(format!(
                "expected Mismatch (a changed collective), got {:?}",
                outcome.error
            ));
        }
        (unit, Some(unit))
    } else if let Some(ch) = p.change {
        // A changed message: its receiver fails with Mismatch and leaves the buffer alone;
        // other ranks may see the communicator failed afterwards.
        let Call::Msg { dst, .. } = p.units[ch.unit].calls[ch.call] else {
            unreachable!()
        };
        if rank == dst {
            if failure != Some(CommFailure::Mismatch) {
                fail(format!(
                    "expected Mismatch (a changed message to this rank), got {:?}",
                    outcome.error
                ));
            }
        } else if !matches!(failure, None | Some(CommFailure::Aborted)) {
            fail(format!(
                "expected no failure or Aborted, got {:?}",
                outcome.error
            ));
        }
        (ch.unit, None)
    } else if let Some(d) = p.leave.filter(|d| d.rank != rank) {
        match first_wait_on(p, rank, d) {
            Some(unit) => {
                if failure != Some(CommFailure::PeerLeft) {
                    fail(format!(
                        "expected PeerLeft (rank {} left), got {:?}",
                        d.rank, outcome.error
                    ));
                }
                if let Some(at) = dropped_at {
                    latencies
                        .lock()
                        .unwrap()
                        .push(outcome.failed_at.saturating_duration_since(at));
                }
                (unit, None)
            }
            None => {
                if failure.is_some() {
                    fail(format!(
                        "expected no failure (never waits for rank {}), got {:?}",
                        d.rank, outcome.error
                    ));
                }
                (p.units.len(), None)
            }
        }
    } else if let Some(d) = p.leave {
        // The rank that left: everything before its drop is exact.
        if failure.is_some() {
            fail(format!("the rank that left failed: {:?}", outcome.error));
        }
        (d.unit, None)
    } else {
        if let Some(e) = &outcome.error {
            fail(format!("an agreed program failed: {e}"));
        }
        (p.units.len(), None)
    };
    let mut digest = DefaultHasher::new();
    for (checked, got) in &outcome.buffers {
        let model = &checked.model;
        if checked.unit < exact_until {
            let mut want = model.after.clone();
            let mut got = got.clone();
            if let Some(range) = model.unspecified.clone() {
                want[range.clone()].fill(0);
                got[range].fill(0);
            }
            if got != want {
                fail(format!("{}: {}", checked.what, difference(&got, &want)));
            }
            got.hash(&mut digest);
        } else if untouched_from.is_some_and(|u| checked.unit >= u) && got != &model.before {
            let what = difference(got, &model.before);
            fail(format!(
                "{}: written although the collectives disagree: {what}",
                checked.what
            ));
        }
    }
    digest.finish()
}

/// Where `got` first differs from `want`, and 16 bytes of each from there.
fn difference(got: &[u8], want: &[u8]) -> String {
    let at = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
    let end = (at + 16).min(got.len());
    format!(
        "byte {at} on: got {:02x?}, the model says {:02x?}",
        &got[at..end],
        &want[at..end.min(want.len())]
    )
}
