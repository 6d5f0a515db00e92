//! Collectives that fail: a rank that leaves, a stalled collective, ranks that disagree, groups
//! past their bound or dropped open, and bad input refused before anything is queued.

use super::comm_model::{
    assert_failure, comm_failure, contribution, decode, download, encode,
    rank_1_leaves_in_an_open_group, upload, value,
};
use super::{on_ranks, scaled, COUNT, CPU};
use devstream::{
    CommFailure, Communicator, DataType, Error, Place, ReduceOp, Result, Stream, UniqueId,
};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[test]
fn a_rank_that_leaves_fails_its_peers_with_a_typed_error() {
    let id = UniqueId::new(&CPU).unwrap();
    let leaver = std::thread::spawn(move || {
        let comm = Communicator::init(&CPU, 1, 2, &id).unwrap();
        drop(comm);
    });
    let comm = Communicator::init(&CPU, 0, 2, &id).unwrap();
    leaver.join().unwrap();
    let s = Stream::new(&CPU).unwrap();
    let buf = s.alloc(16).unwrap();
    let started = Instant::now();
    s.all_reduce(&comm, &buf, &buf, 4, DataType::F32, ReduceOp::Sum)
        .unwrap();
    let e = s.synchronize().unwrap_err();
    assert_eq!(comm_failure(&e), Some(CommFailure::PeerLeft), "{e}");
    assert!(started.elapsed() < scaled(Duration::from_secs(5)));
    // The communicator stays failed.
    s.broadcast(&comm, &buf, &buf, 4, DataType::F32, 0).unwrap();
    let e = s.synchronize().unwrap_err();
    assert_eq!(comm_failure(&e), Some(CommFailure::Aborted), "{e}");
    // The stream itself is still usable.
    s.launch_host_func(|| {}).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn a_stalled_collective_fails_at_the_deadline_on_every_rank() {
    let given_up = Arc::new(Barrier::new(2));
    let results = on_ranks(2, move |comm, s| {
        comm.set_timeout(Duration::from_millis(300));
        let buf = s.alloc(8)?;
        let started = Instant::now();
        if comm.rank() == 0 {
            s.all_reduce(&comm, &buf, &buf, 2, DataType::I32, ReduceOp::Sum)?;
            let e = s.synchronize().unwrap_err();
            let took = started.elapsed();
            given_up.wait();
            Ok((comm_failure(&e), took))
        } else {
            // Rank 1 takes part only once rank 0 has given up: the collective failed (every
            // rank learns the same verdict), and the communicator with it.
            given_up.wait();
            s.all_reduce(&comm, &buf, &buf, 2, DataType::I32, ReduceOp::Sum)?;
            let e = s.synchronize().unwrap_err();
            assert_eq!(comm_failure(&e), Some(CommFailure::Timeout), "{e}");
            s.all_reduce(&comm, &buf, &buf, 2, DataType::I32, ReduceOp::Sum)?;
            let e = s.synchronize().unwrap_err();
            Ok((comm_failure(&e), started.elapsed()))
        }
    });
    assert_eq!(results[0].0, Some(CommFailure::Timeout));
    assert!(
        results[0].1 >= Duration::from_millis(300) && results[0].1 < scaled(Duration::from_secs(5))
    );
    assert_eq!(results[1].0, Some(CommFailure::Aborted));
}

#[test]
fn ranks_that_disagree_fail_with_a_mismatch_on_every_rank() {
    let results = on_ranks(3, |comm, s| {
        let buf = s.alloc(64)?;
        let (dtype, count) = match comm.rank() {
            1 => (DataType::I32, 4),
            2 => (DataType::F32, 3),
            _ => (DataType::F32, 4),
        };
        s.all_reduce(&comm, &buf, &buf, count, dtype, ReduceOp::Sum)?;
        Ok(s.synchronize().unwrap_err())
    });
    for e in results {
        assert_failure(&e, &[CommFailure::Mismatch, CommFailure::Aborted]);
    }
}

/// One field of one rank's collective changed inside a group, first in the group or after an
/// agreed call: every rank's `synchronize` answers `Mismatch`, and no receive buffer of the group
/// is written (the all-reduce takes the in-process path here, the others the payload files).
#[test]
fn a_mismatch_inside_a_group_fails_every_rank_before_any_buffer_is_written() {
    const VARIANTS: [&str; 6] = [
        "op",
        "dtype",
        "broadcast root",
        "reduce root",
        "count",
        "kind",
    ];
    for (variant, what) in VARIANTS.iter().enumerate() {
        for odd_first in [false, true] {
            let results = on_ranks(3, move |comm, s| {
                let rank = comm.rank();
                let odd = rank == 1;
                let send = upload(&s, &encode(DataType::I32, &contribution(rank, 3 * COUNT)))?;
                let agreed = upload(&s, &[0xAB; 3 * COUNT * 4])?;
                let changed = upload(&s, &[0xCD; 3 * COUNT * 4])?;
                s.synchronize()?;
                let (i32_, sum) = (DataType::I32, ReduceOp::Sum);
                let changed_call = |s: &Stream| match variant {
                    0 => {
                        let op = if odd { ReduceOp::Max } else { sum };
                        s.all_reduce(&comm, &send, &changed, COUNT, i32_, op)
                    }
                    1 => {
                        let dtype = if odd { DataType::F32 } else { i32_ };
                        s.all_reduce(&comm, &send, &changed, COUNT, dtype, sum)
                    }
                    2 => s.broadcast(&comm, &send, &changed, COUNT, i32_, usize::from(odd) * 2),
                    3 => s.reduce(&comm, &send, &changed, COUNT, i32_, sum, usize::from(odd)),
                    4 => s.all_reduce(&comm, &send, &changed, COUNT + usize::from(odd), i32_, sum),
                    _ if odd => s.all_gather(&comm, &send, &changed, COUNT, i32_),
                    _ => s.reduce_scatter(&comm, &send, &changed, COUNT, i32_, sum),
                };
                comm.group_start()?;
                if odd_first {
                    changed_call(&s)?;
                }
                s.all_reduce(&comm, &send, &agreed, COUNT, i32_, sum)?;
                if !odd_first {
                    changed_call(&s)?;
                }
                comm.group_end()?;
                let e = s.synchronize().unwrap_err();
                Ok((e, download(&s, &agreed)?, download(&s, &changed)?))
            });
            for (rank, (e, agreed, changed)) in results.into_iter().enumerate() {
                let case = format!("{what} changed (odd call first: {odd_first}), rank {rank}");
                assert_eq!(comm_failure(&e), Some(CommFailure::Mismatch), "{case}: {e}");
                assert!(
                    agreed.iter().all(|&b| b == 0xAB),
                    "{case}: a receive buffer was written"
                );
                assert!(
                    changed.iter().all(|&b| b == 0xCD),
                    "{case}: a receive buffer was written"
                );
            }
        }
    }
}

/// A group whose collectives are on two streams of each rank pairs every call with the same
/// call of its peers (call order), whichever stream runs first.
#[test]
fn a_group_over_two_streams_pairs_each_collective_with_its_peers_call() {
    let results = on_ranks(3, |comm, s| {
        let rank = comm.rank();
        let other = Stream::new(&CPU)?;
        let mut rounds = Vec::new();
        for round in 0..20 {
            let a = upload(&s, &encode(DataType::I64, &contribution(rank, COUNT)))?;
            let b = upload(
                &other,
                &encode(DataType::I64, &contribution(rank + 1, COUNT)),
            )?;
            let c = upload(&s, &encode(DataType::I64, &contribution(rank + 2, COUNT)))?;
            s.synchronize()?;
            other.synchronize()?;
            // Streams in another order on odd rounds and ranks.
            let (x, y) = if (round + rank) % 2 == 0 {
                (&s, &other)
            } else {
                (&other, &s)
            };
            comm.group_start()?;
            s.all_reduce(&comm, &a, &a, COUNT, DataType::I64, ReduceOp::Sum)?;
            other.all_reduce(&comm, &b, &b, COUNT, DataType::I64, ReduceOp::Max)?;
            x.broadcast(&comm, &c, &c, COUNT, DataType::I64, 1)?;
            y.all_reduce(&comm, &c, &c, 0, DataType::I64, ReduceOp::Min)?;
            comm.group_end()?;
            other.synchronize()?;
            rounds.push((download(&s, &a)?, download(&s, &b)?, download(&s, &c)?));
        }
        Ok(rounds)
    });
    let n = 3;
    for (rank, rounds) in results.into_iter().enumerate() {
        for (round, (a, b, c)) in rounds.into_iter().enumerate() {
            for (i, (sum, max)) in decode(DataType::I64, &a)
                .into_iter()
                .zip(decode(DataType::I64, &b))
                .enumerate()
            {
                let what = format!("rank {rank} round {round} [{i}]");
                assert_eq!(
                    sum,
                    (0..n).map(|r| value(r, i)).sum::<i64>() as f64,
                    "{what}"
                );
                let most = (0..n).map(|r| value(r + 1, i)).max().unwrap();
                assert_eq!(max, most as f64, "{what}");
            }
            assert_eq!(c, encode(DataType::I64, &contribution(1 + 2, COUNT)));
        }
    }
}

/// A group holds at most 64 collectives on the CPU engine (the bound on how far a rank runs
/// ahead of its peers); one more is refused, and the group stays open with the others.
#[test]
fn a_group_refuses_its_65th_collective_and_stays_open() {
    on_ranks(2, |comm, s| {
        let rank = comm.rank();
        let bufs = (0..65)
            .map(|_| upload(&s, &encode(DataType::I32, &contribution(rank, 1))))
            .collect::<Result<Vec<_>>>()?;
        let token = upload(&s, &encode(DataType::I32, &[7 + rank as i64]))?;
        let inbox = s.alloc(4)?;
        comm.group_start()?;
        for buf in &bufs[..64] {
            s.all_reduce(&comm, buf, buf, 1, DataType::I32, ReduceOp::Max)?;
        }
        let e = s
            .all_reduce(&comm, &bufs[64], &bufs[64], 1, DataType::I32, ReduceOp::Max)
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // Messages are not counted.
        s.send(&comm, &token, 1, DataType::I32, 1 - rank)?;
        s.recv(&comm, &inbox, 1, DataType::I32, 1 - rank)?;
        comm.group_end()?;
        let most = value(0, 0).max(value(1, 0));
        for buf in &bufs[..64] {
            assert_eq!(download(&s, buf)?, encode(DataType::I32, &[most]));
        }
        let left_alone = encode(DataType::I32, &contribution(rank, 1));
        assert_eq!(download(&s, &bufs[64])?, left_alone);
        let theirs = 7 + (1 - rank) as i64;
        assert_eq!(download(&s, &inbox)?, encode(DataType::I32, &[theirs]));
        Ok(())
    });
}

/// A rank whose communicator is dropped with a group open (an early return between
/// `group_start` and `group_end`) leaves the communicator: its peer's collective fails with
/// `PeerLeft`, not at the deadline.
#[test]
fn a_communicator_dropped_with_a_group_open_leaves() {
    let results = on_ranks(2, |comm, s| {
        comm.set_timeout(Duration::from_secs(60));
        let Some((comm, buf)) = rank_1_leaves_in_an_open_group(comm, &s, COUNT)? else {
            return Ok(None);
        };
        let started = Instant::now();
        s.all_reduce(&comm, &buf, &buf, COUNT, DataType::F32, ReduceOp::Sum)?;
        let e = s.synchronize().unwrap_err();
        Ok(Some((e, started.elapsed())))
    });
    let (e, took) = results[0].as_ref().unwrap();
    assert_eq!(
        comm_failure(e),
        Some(CommFailure::PeerLeft),
        "{e} after {took:?}"
    );
}

#[test]
fn bad_input_is_refused_before_anything_is_queued() {
    let invalid = |r: Result<()>| assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let id = UniqueId::new(&CPU).unwrap();
    invalid(Communicator::init(&CPU, 2, 2, &id).map(drop));
    invalid(Communicator::init(&CPU, 0, 0, &id).map(drop));
    invalid(UniqueId::from_bytes(&[0; 5]).map(drop));
    invalid(Communicator::init(&CPU, 0, 1, &UniqueId::from_bytes(&[0; 128]).unwrap()).map(drop));
    // init waits for the other ranks: inside a host function (a pool worker) it is refused.
    let s = Stream::new(&CPU).unwrap();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let out = seen.clone();
    s.launch_host_func(move || {
        *out.lock().unwrap() = Some(Communicator::init(&CPU, 0, 2, &id).map(drop));
    })
    .unwrap();
    s.synchronize().unwrap();
    let inside = seen.lock().unwrap().take().unwrap();
    assert!(
        matches!(inside, Err(Error::WouldDeadlock { .. })),
        "{inside:?}"
    );
    // A one-rank communicator works alone.
    let alone = Communicator::init(&CPU, 0, 1, &UniqueId::new(&CPU).unwrap()).unwrap();
    let buf = upload(&s, &encode(DataType::I32, &[5, 6])).unwrap();
    s.all_reduce(&alone, &buf, &buf, 2, DataType::I32, ReduceOp::Avg)
        .unwrap();
    assert_eq!(download(&s, &buf).unwrap(), encode(DataType::I32, &[5, 6]));
    let results = on_ranks(2, |comm, s| {
        let cpu: &devstream::cpu::CpuStream = s.backend().unwrap();
        let before = cpu.submitted_tasks();
        let small = s.alloc(15)?;
        let big = s.alloc(64)?;
        let mut errors = vec![
            s.all_reduce(&comm, &small, &big, 4, DataType::F32, ReduceOp::Sum),
            s.all_reduce(&comm, &big, &small, 4, DataType::F32, ReduceOp::Sum),
            s.all_gather(&comm, &big, &big, 9, DataType::F32),
            s.reduce_scatter(&comm, &big, &big, 9, DataType::F32, ReduceOp::Sum),
            s.all_to_all(&comm, &big, &big, 9, DataType::F32),
            s.broadcast(&comm, &big, &big, 4, DataType::F32, 2),
            s.reduce(&comm, &big, &big, 4, DataType::F32, ReduceOp::Max, 7),
            s.send(&comm, &big, 4, DataType::F32, 2),
            s.recv(&comm, &small, 4, DataType::F32, 0),
            s.all_reduce(&comm, &big, &big, usize::MAX, DataType::F64, ReduceOp::Sum),
            comm.group_end(),
        ];
        // Another place's stream or buffer: PlaceMismatch (where another place exists here).
        if let Some(other) = devstream::places().into_iter().find(|p| *p != CPU) {
            if let Ok(t) = Stream::new(&other) {
                let e = t.all_reduce(&comm, &big, &big, 4, DataType::F32, ReduceOp::Sum);
                assert!(matches!(e, Err(Error::PlaceMismatch { .. })), "{e:?}");
                // Unsupported where the place has no engine (plug-ins with xccl have one).
                let has_engine = devstream::capabilities(&other).is_ok_and(|c| c.collectives);
                assert_eq!(
                    matches!(UniqueId::new(&other), Err(Error::Unsupported { .. })),
                    !has_engine,
                    "{other}"
                );
                if let Ok(foreign) = t.alloc(64) {
                    let e = s.all_reduce(&comm, &foreign, &big, 4, DataType::F32, ReduceOp::Sum);
                    assert!(matches!(e, Err(Error::PlaceMismatch { .. })), "{e:?}");
                }
            }
        }
        let queued = cpu.submitted_tasks() - before;
        errors.push(Ok(()));
        Ok((errors, queued))
    });
    for (errors, queued) in results {
        let last = errors.len() - 1;
        for (index, e) in errors.into_iter().enumerate().take(last) {
            assert!(
                matches!(e, Err(Error::InvalidArgument(_))),
                "case {index}: {e:?}"
            );
        }
        assert_eq!(queued, 0, "a refused call queued work");
    }
    // A CUDA place where this machine cannot serve one: BackendNotCompiled naming the feature
    // (no `cuda`), BackendUnavailable (no driver, or no NCCL), NoDevice, or Unsupported (no
    // `comm` engine for it); never a panic, never a communicator.
    let no_engine = |e: &Error| {
        matches!(e, Error::Unsupported { .. } | Error::NoDevice { .. })
            || matches!(
                e,
                Error::BackendNotCompiled { .. } | Error::BackendUnavailable { .. }
            )
    };
    let e = UniqueId::new(&Place::Cuda(0));
    if devstream::places().contains(&Place::Cuda(0)) && e.is_ok() {
        eprintln!("cuda:0 has collectives here; the refusal case is not exercised");
    } else {
        let e = e.unwrap_err();
        assert!(no_engine(&e), "{e}");
    }
    // wgpu has no engine: Unsupported where it is compiled, else BackendNotCompiled.
    if let Err(e) = UniqueId::new(&Place::Wgpu(0)) {
        assert!(no_engine(&e), "{e}");
    } else {
        panic!("wgpu has no collectives engine, yet UniqueId::new succeeded");
    }
    assert!(devstream::capabilities(&CPU).unwrap().collectives);
}
