//! Collectives in stream order beyond one stream: captured collectives replayed with the peers,
//! the legacy default and per-thread streams, a forked branch of a capture.

use super::comm_model::{
    assert_failure, contribution, decode, download, encode, launch_and_check, model, upload, value,
};
use super::{on_ranks, scaled, COUNT, CPU};
use devstream::{
    CaptureMode, CommFailure, Communicator, DataType, ReduceOp, Result, Stream, UniqueId,
};
use std::time::{Duration, Instant};

#[test]
fn captured_collectives_run_again_with_the_peers_on_every_launch() {
    let n = 3;
    on_ranks(n, move |comm, s| {
        let buf = s.alloc(COUNT * 4)?;
        let out = s.alloc(COUNT * 4)?;
        s.synchronize()?;
        s.begin_capture(CaptureMode::ThreadLocal)?;
        s.all_reduce(&comm, &buf, &out, COUNT, DataType::I32, ReduceOp::Sum)?;
        let graph = s.end_capture()?;
        launch_and_check(&comm, &s, &graph, [&buf, &out], COUNT, "cpu")
    });
}

/// Runs one all-reduce (U8 product) per rank, rank `r` on the stream `pick(r)` makes, with a
/// deadline; returns each rank's result.
fn all_reduce_on(pick: fn(usize) -> Result<Stream>, timeout: Duration) -> Vec<Result<Vec<u8>>> {
    let id = UniqueId::new(&CPU).unwrap();
    let threads: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || -> Result<Vec<u8>> {
                let comm = Communicator::init(&CPU, rank, 2, &id)?;
                comm.set_timeout(timeout);
                let s = pick(rank)?;
                let buf = upload(&s, &encode(DataType::U8, &contribution(rank, COUNT)))?;
                s.all_reduce(&comm, &buf, &buf, COUNT, DataType::U8, ReduceOp::Prod)?;
                download(&s, &buf)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// The legacy default stream and per-thread streams are process-wide: every scenario is in
/// this one test, one after the other (no other test here uses blocking streams).
#[test]
fn collectives_on_the_legacy_default_and_per_thread_streams() {
    let check = |results: Vec<Result<Vec<u8>>>| {
        for result in results {
            let got = decode(DataType::U8, &result.unwrap());
            for (i, g) in got.iter().enumerate() {
                let column = [value(0, i), value(1, i)];
                assert_eq!(*g, model(DataType::U8, ReduceOp::Prod, &column));
            }
        }
    };
    let long = Duration::from_secs(30);
    // One rank on the legacy default stream, its peer on a non-blocking stream.
    check(all_reduce_on(
        |rank| match rank {
            0 => Stream::default_stream(&CPU),
            _ => Stream::new(&CPU),
        },
        long,
    ));
    // Both ranks on their threads' per-thread default streams.
    check(all_reduce_on(|_| Stream::per_thread(&CPU), long));
    // One rank on the legacy default stream, its peer on a blocking stream of the same
    // process: the legacy stream's implicit synchronisation orders each rank's collective
    // behind the other's (as with several ranks per process on CUDA's legacy stream). That
    // cannot complete; it fails at the deadline instead of hanging.
    let started = Instant::now();
    let results = all_reduce_on(
        |rank| match rank {
            0 => Stream::default_stream(&CPU),
            _ => Stream::per_thread(&CPU),
        },
        Duration::from_millis(500),
    );
    assert!(started.elapsed() < scaled(Duration::from_secs(10)));
    for result in results {
        let e = result.unwrap_err();
        assert_failure(&e, &[CommFailure::Timeout, CommFailure::Aborted]);
    }
}

#[test]
fn a_collective_on_a_forked_branch_of_a_capture_replays_between_fork_and_join() {
    let n = 2;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        let branch = Stream::new(&CPU)?;
        let buf = s.alloc(COUNT * 8)?;
        s.synchronize()?;
        s.begin_capture(CaptureMode::ThreadLocal)?;
        let fork = s.record_event()?;
        branch.wait_event(&fork)?; // branch joins the capture
        branch.all_reduce(&comm, &buf, &buf, COUNT, DataType::F64, ReduceOp::Max)?;
        let joined = branch.record_event()?;
        s.wait_event(&joined)?;
        let graph = s.end_capture()?;
        for round in 1..=3i64 {
            let mine: Vec<i64> = contribution(rank, COUNT)
                .iter()
                .map(|v| v + round)
                .collect();
            s.copy_from_host(&buf, 0, &encode(DataType::F64, &mine))?;
            graph.launch(&s)?;
            let got = decode(DataType::F64, &download(&s, &buf)?);
            for (i, g) in got.iter().enumerate() {
                let want = (0..n).map(|r| value(r, i) + round).max().unwrap();
                assert_eq!(*g, want as f64, "launch {round}");
            }
        }
        Ok(())
    });
}
