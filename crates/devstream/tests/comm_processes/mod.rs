//! Ranks as processes: the test binary re-runs itself, one child per rank.

use super::comm_model::{
    all_reduce_and_check, assert_close, assert_failure, comm_failure, decode, download, hex, unhex,
    upload, wait_child,
};
use super::{on_ranks, scaled, COUNT, CPU};
use devstream::{CommFailure, Communicator, DataType, ReduceOp, Result, Stream, UniqueId};
use std::time::{Duration, Instant};

const CHILD_RANK: &str = "DEVSTREAM_COMM_TEST_RANK";
const CHILD_ID: &str = "DEVSTREAM_COMM_TEST_ID";
const CHILD_NRANKS: &str = "DEVSTREAM_COMM_TEST_NRANKS";

fn spawn_rank(test: &str, rank: usize, nranks: usize, id: &UniqueId) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_RANK, rank.to_string())
        .env(CHILD_NRANKS, nranks.to_string())
        .env(CHILD_ID, hex(id.as_bytes()))
        .spawn()
        .expect("start a rank process")
}

/// `Some((rank, nranks, id))` in a child started by `spawn_rank`.
fn child_role() -> Option<(usize, usize, UniqueId)> {
    let rank = std::env::var(CHILD_RANK).ok()?.parse().ok()?;
    let nranks = std::env::var(CHILD_NRANKS).ok()?.parse().ok()?;
    let id = UniqueId::from_bytes(&unhex(&std::env::var(CHILD_ID).ok()?)).ok()?;
    Some((rank, nranks, id))
}

/// One rank's part of `ranks_as_processes_and_threads_all_reduce_every_type`: two ranks per
/// process (threads), checks every type's sum and max.
fn process_rank_body(rank: usize, nranks: usize, id: UniqueId) {
    let comm = Communicator::init(&CPU, rank, nranks, &id).unwrap();
    let s = Stream::new(&CPU).unwrap();
    for dtype in DataType::ALL {
        for op in [ReduceOp::Sum, ReduceOp::Max] {
            all_reduce_and_check(assert_close, &comm, &s, dtype, op, COUNT, true).unwrap();
        }
    }
}

#[test]
fn ranks_as_processes_and_threads_all_reduce_every_type() {
    const TEST: &str = "comm_processes::ranks_as_processes_and_threads_all_reduce_every_type";
    if let Some((rank, nranks, id)) = child_role() {
        // A child process runs ranks `rank` and `rank + 1` as two threads.
        let other = std::thread::spawn(move || process_rank_body(rank + 1, nranks, id));
        process_rank_body(rank, nranks, id);
        other.join().unwrap();
        return;
    }
    let nranks = 6;
    let id = UniqueId::new(&CPU).unwrap();
    // Ranks 2..6 in two child processes, ranks 0 and 1 here.
    let children: Vec<_> = [2, 4]
        .into_iter()
        .map(|rank| spawn_rank(TEST, rank, nranks, &id))
        .collect();
    let other = std::thread::spawn(move || process_rank_body(1, nranks, id));
    process_rank_body(0, nranks, id);
    other.join().unwrap();
    for child in children {
        assert!(wait_child(child, scaled(Duration::from_secs(120))).success());
    }
}

#[test]
fn a_killed_rank_process_fails_its_peers_by_pid_before_the_deadline() {
    const TEST: &str =
        "comm_processes::a_killed_rank_process_fails_its_peers_by_pid_before_the_deadline";
    if let Some((rank, nranks, id)) = child_role() {
        let _comm = Communicator::init(&CPU, rank, nranks, &id).unwrap();
        // Joined; now wait to be killed.
        std::thread::sleep(Duration::from_secs(120));
        return;
    }
    let id = UniqueId::new(&CPU).unwrap();
    let mut child = spawn_rank(TEST, 1, 3, &id);
    // Ranks 2 (a thread) and 0 (here) each queue an all-reduce that waits for rank 1.
    let join_and_queue = move |rank| {
        let comm = Communicator::init(&CPU, rank, 3, &id).unwrap();
        comm.set_timeout(Duration::from_secs(60));
        let s = Stream::new(&CPU).unwrap();
        let buf = s.alloc(64).unwrap();
        s.all_reduce(&comm, &buf, &buf, 16, DataType::F32, ReduceOp::Sum)
            .unwrap();
        (comm, s)
    };
    let local = std::thread::spawn(move || {
        let (_comm, s) = join_and_queue(2);
        s.synchronize().unwrap_err()
    });
    let (_comm, s) = join_and_queue(0);
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    child.kill().unwrap();
    let e = s.synchronize().unwrap_err();
    let took = started.elapsed();
    let _ = child.wait();
    assert_failure(&e, &[CommFailure::PeerDied, CommFailure::Aborted]);
    assert!(took < scaled(Duration::from_secs(10)), "took {took:?}");
    let e2 = local.join().unwrap();
    assert_failure(&e2, &[CommFailure::PeerDied, CommFailure::Aborted]);
    // One of the two survivors saw the death itself.
    assert!(
        comm_failure(&e) == Some(CommFailure::PeerDied)
            || comm_failure(&e2) == Some(CommFailure::PeerDied)
    );
}

#[test]
fn init_fails_at_the_environment_deadline_when_a_rank_never_joins() {
    const TEST: &str =
        "comm_processes::init_fails_at_the_environment_deadline_when_a_rank_never_joins";
    if let Some((rank, nranks, id)) = child_role() {
        // DEVSTREAM_COMM_TIMEOUT_SECS=0.5 in this child.
        let started = Instant::now();
        let e = Communicator::init(&CPU, rank, nranks, &id).unwrap_err();
        let took = started.elapsed();
        assert_eq!(comm_failure(&e), Some(CommFailure::Timeout), "{e}");
        assert!(
            took >= Duration::from_millis(500) && took < scaled(Duration::from_secs(5)),
            "{took:?}"
        );
        return;
    }
    let id = UniqueId::new(&CPU).unwrap();
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_RANK, "0")
        .env(CHILD_NRANKS, "2")
        .env(CHILD_ID, hex(id.as_bytes()))
        .env("DEVSTREAM_COMM_TIMEOUT_SECS", "0.5")
        .spawn()
        .unwrap();
    assert!(wait_child(child, scaled(Duration::from_secs(60))).success());
}

/// Floats are combined in rank order on every path: three ranks of 1e20, -1e20 and 1 sum to
/// exactly 1 in every element, with the ranks as threads (the in-process all-reduce) and as
/// processes (the payload files).
#[test]
fn float_sums_are_in_rank_order_and_bit_identical_for_threads_and_processes() {
    const TEST: &str =
        "comm_processes::float_sums_are_in_rank_order_and_bit_identical_for_threads_and_processes";
    const VALUES: [f64; 3] = [1e20, -1e20, 1.0];
    let count = 9;
    let body = move |comm: &Communicator, s: &Stream| -> Result<Vec<u8>> {
        let mine: Vec<u8> = (0..count)
            .flat_map(|_| VALUES[comm.rank()].to_ne_bytes())
            .collect();
        let buf = upload(s, &mine)?;
        s.all_reduce(comm, &buf, &buf, count, DataType::F64, ReduceOp::Sum)?;
        download(s, &buf)
    };
    let want: Vec<u8> = (0..count).flat_map(|_| 1.0f64.to_ne_bytes()).collect();
    if let Some((rank, nranks, id)) = child_role() {
        let comm = Communicator::init(&CPU, rank, nranks, &id).unwrap();
        let s = Stream::new(&CPU).unwrap();
        let got = body(&comm, &s).unwrap();
        assert_eq!(
            got,
            want,
            "process rank {rank}: {:?}",
            decode(DataType::F64, &got)
        );
        return;
    }
    for (rank, got) in on_ranks(3, move |comm, s| body(&comm, &s))
        .iter()
        .enumerate()
    {
        assert_eq!(
            got,
            &want,
            "threads, rank {rank}: {:?}",
            decode(DataType::F64, got)
        );
    }
    let id = UniqueId::new(&CPU).unwrap();
    let children: Vec<_> = (1..3).map(|rank| spawn_rank(TEST, rank, 3, &id)).collect();
    let comm = Communicator::init(&CPU, 0, 3, &id).unwrap();
    let s = Stream::new(&CPU).unwrap();
    let got = body(&comm, &s).unwrap();
    for child in children {
        assert!(wait_child(child, scaled(Duration::from_secs(120))).success());
    }
    assert_eq!(got, want, "processes: {:?}", decode(DataType::F64, &got));
}
