//! Collectives on Paddle plug-in places (features `comm` + `plugin`): the `custom_cpu` test
//! plug-in implements the `xccl_*` functions (ranks are threads of this process; several ranks
//! may share a device), so the model tests run there too (`comm_cases`, module `plugin`), with
//! rank `r` on `custom_cpu:(r % 2)`;
//! the `ref_cpu` plug-in (Paddle's reference layout, xccl left null) answers `Unsupported`.

use super::comm_model::{
    comm_failure, contribution, download, encode, on_ranks_at, rank_1_leaves_in_an_open_group,
    upload,
};
use super::COUNT;
use devstream::{
    CaptureMode, CommFailure, Communicator, DataType, Error, Place, ReduceOp, Result, Stream,
    UniqueId,
};

fn custom(id: usize) -> Place {
    Place::Custom {
        device_type: "custom_cpu".into(),
        id,
    }
}

/// Rank `r` on `custom_cpu:(r % 2)` (the places of the model tests in `comm_cases`).
pub(crate) fn places(n: usize) -> Vec<Place> {
    (0..n).map(|r| custom(r % 2)).collect()
}

fn on_ranks<T: Send + 'static>(
    n: usize,
    body: impl Fn(Communicator, Stream) -> Result<T> + Send + Sync + 'static,
) -> Vec<T> {
    on_ranks_at(&places(n), body)
}

#[test]
fn plugin_capabilities_say_collectives() {
    let caps = devstream::capabilities(&custom(0)).unwrap();
    assert!(caps.collectives, "{caps:?}");
}

#[test]
fn plugin_send_recv_every_type_and_groups() {
    on_ranks(4, |comm, s| {
        crate::comm_cases::send_recv_every_type_and_groups(&comm, &s)
    });
}

/// Set in the child process of `plugin_all_to_all_without_the_plugins_own_is_grouped_send_recv`.
const GROUPED_CHILD: &str = "DEVSTREAM_COMM_TEST_GROUPED_ALL_TO_ALL";

#[test]
fn plugin_all_to_all_without_the_plugins_own_is_grouped_send_recv() {
    const TEST: &str =
        "comm_plugin::plugin_all_to_all_without_the_plugins_own_is_grouped_send_recv";
    if std::env::var_os(GROUPED_CHILD).is_some() {
        // The child: the plug-in loaded without `xccl_all_to_all`.
        assert!(std::env::var_os(devstream_test_plugin_cpu::NO_ALL_TO_ALL).is_some());
        crate::comm_cases::all_to_all_every_type(places);
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(GROUPED_CHILD, "1")
        .env(devstream_test_plugin_cpu::NO_ALL_TO_ALL, "1")
        .status()
        .expect("start the child process");
    assert!(status.success(), "{status}");
}

/// Set in the child process of `plugin_a_communicator_dropped_with_a_group_open_leaves`.
const LEAVER_CHILD: &str = "DEVSTREAM_COMM_TEST_PLUGIN_LEAVER";

/// A rank whose plug-in communicator is dropped with a group open leaves: devstream destroys
/// it (`xccl_destroy_comm`), and the test plug-in stops its peer's collective (unwritten, the
/// communicator failed) instead of holding it to the plug-in's deadline, here 60 s.
#[test]
fn plugin_a_communicator_dropped_with_a_group_open_leaves() {
    const TEST: &str = "comm_plugin::plugin_a_communicator_dropped_with_a_group_open_leaves";
    if std::env::var_os(LEAVER_CHILD).is_some() {
        let results = on_ranks(2, |comm, s| {
            let Some((comm, buf)) = rank_1_leaves_in_an_open_group(comm, &s, COUNT)? else {
                return Ok(None);
            };
            let started = std::time::Instant::now();
            s.all_reduce(&comm, &buf, &buf, COUNT, DataType::F32, ReduceOp::Sum)?;
            let _ = s.synchronize(); // the ABI reports the failure on the next call
            let took = started.elapsed();
            let next = s.all_reduce(&comm, &buf, &buf, COUNT, DataType::F32, ReduceOp::Sum);
            Ok(Some((took, next, download(&s, &buf)?)))
        });
        let (took, next, bytes) = results[0].as_ref().unwrap();
        // Half the plug-in's deadline: a hang detector, not a speed bound.
        assert!(*took < std::time::Duration::from_secs(30), "held {took:?}");
        let e = next.as_ref().unwrap_err();
        assert_eq!(comm_failure(e), Some(CommFailure::Transport), "{e}");
        assert_eq!(*bytes, encode(DataType::F32, &contribution(0, COUNT)));
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(LEAVER_CHILD, "1")
        .env("DEVSTREAM_COMM_TIMEOUT_SECS", "60")
        .status()
        .expect("start the child process");
    assert!(status.success(), "{status}");
}

#[test]
fn plugin_a_collective_in_a_capture_is_the_plugins_call() {
    // The test plug-in refuses collectives while capturing (C_ERROR, the capture invalidated):
    // a typed error, the capture ends with Error::Capture, and the stream works on.
    let place = custom(0);
    let comm = Communicator::init(&place, 0, 1, &UniqueId::new(&place).unwrap()).unwrap();
    let s = Stream::new(&place).unwrap();
    let buf = upload(&s, &encode(DataType::F32, &[1, 2])).unwrap();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    let e = s
        .all_reduce(&comm, &buf, &buf, 2, DataType::F32, ReduceOp::Sum)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e = s.end_capture().unwrap_err();
    assert!(matches!(e, Error::Capture { .. }), "{e}");
    s.all_reduce(&comm, &buf, &buf, 2, DataType::F32, ReduceOp::Prod)
        .unwrap();
    assert_eq!(download(&s, &buf).unwrap(), encode(DataType::F32, &[1, 2]));
}

#[test]
fn plugin_a_group_over_two_streams_of_a_rank() {
    let n = 2;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        let peer = 1 - rank;
        let other = Stream::new(comm.place())?;
        let out = upload(&s, &encode(DataType::F32, &contribution(rank, COUNT)))?;
        let inbox = other.alloc(COUNT * 4)?;
        s.synchronize()?;
        comm.group_start()?;
        other.recv(&comm, &inbox, COUNT, DataType::F32, peer)?;
        s.send(&comm, &out, COUNT, DataType::F32, peer)?;
        comm.group_end()?;
        assert_eq!(
            download(&other, &inbox)?,
            encode(DataType::F32, &contribution(peer, COUNT))
        );
        Ok(())
    });
}

#[test]
fn plugin_bad_input_is_refused_before_anything_is_queued() {
    let invalid = |r: Result<()>| {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    };
    let place = custom(0);
    let id = UniqueId::new(&place).unwrap();
    assert_ne!(UniqueId::new(&place).unwrap(), id);
    invalid(Communicator::init(&place, 2, 2, &id).map(drop));
    invalid(Communicator::init(&place, 0, 0, &id).map(drop));
    // An id the plug-in did not make.
    invalid(Communicator::init(&place, 0, 1, &UniqueId::from_bytes(&[0; 128]).unwrap()).map(drop));
    let comm = Communicator::init(&place, 0, 1, &UniqueId::new(&place).unwrap()).unwrap();
    assert_eq!((comm.rank(), comm.nranks()), (0, 1));
    assert_eq!(comm.place(), &place);
    assert!(comm.backend::<devstream_plugin::PluginComm>().is_some());
    let s = Stream::new(&place).unwrap();
    let small = s.alloc(8).unwrap();
    let big = s.alloc(64).unwrap();
    invalid(s.all_reduce(&comm, &small, &big, 4, DataType::F32, ReduceOp::Sum));
    invalid(s.all_reduce(&comm, &big, &small, 4, DataType::F32, ReduceOp::Sum));
    invalid(s.broadcast(&comm, &big, &big, 4, DataType::F32, 1));
    invalid(s.reduce(&comm, &big, &big, 4, DataType::F32, ReduceOp::Max, 1));
    invalid(s.send(&comm, &big, 4, DataType::F32, 1));
    invalid(s.recv(&comm, &small, 4, DataType::F32, 0));
    invalid(s.all_gather(&comm, &big, &small, 4, DataType::F32));
    invalid(s.reduce_scatter(&comm, &small, &big, 4, DataType::F32, ReduceOp::Sum));
    invalid(s.all_to_all(&comm, &big, &small, 4, DataType::F32));
    invalid(s.all_reduce(&comm, &big, &big, usize::MAX, DataType::F32, ReduceOp::Sum));
    invalid(comm.group_end());
    // A stream and a buffer of the other device.
    let other = Stream::new(&custom(1)).unwrap();
    let there = other.alloc(64).unwrap();
    let mismatch = |r: Result<()>| {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::PlaceMismatch { .. }), "{e}");
    };
    mismatch(other.all_reduce(&comm, &there, &there, 4, DataType::F32, ReduceOp::Sum));
    mismatch(s.all_reduce(&comm, &big, &there, 4, DataType::F32, ReduceOp::Sum));
    // A CPU stream with a plug-in communicator.
    let cpu = Stream::new(&Place::Cpu).unwrap();
    let b = cpu.alloc(64).unwrap();
    mismatch(cpu.all_reduce(&comm, &b, &b, 4, DataType::F32, ReduceOp::Sum));
    // Nothing was queued: a one-rank all-reduce still works.
    let one = upload(&s, &encode(DataType::I32, &[5, 6])).unwrap();
    s.all_reduce(&comm, &one, &one, 2, DataType::I32, ReduceOp::Avg)
        .unwrap();
    assert_eq!(download(&s, &one).unwrap(), encode(DataType::I32, &[5, 6]));
}

#[test]
fn plugin_in_place_all_to_all_is_refused() {
    on_ranks(2, |comm, s| {
        let buf = s.alloc(2 * 4 * 4)?;
        let e = s
            .all_to_all(&comm, &buf, &buf, 4, DataType::F32)
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        Ok(())
    });
}

#[test]
fn plugin_ranks_that_disagree_fail_later_calls_with_a_typed_error() {
    on_ranks(2, |comm, s| {
        let rank = comm.rank();
        let buf = s.alloc(64)?;
        // Different counts: the plug-in sees the mismatch when the collective runs (the ABI
        // has no way to report it then) and fails the communicator on both ranks.
        s.all_reduce(&comm, &buf, &buf, 4 + rank, DataType::F32, ReduceOp::Sum)?;
        s.synchronize()?;
        let e = s
            .all_reduce(&comm, &buf, &buf, 4, DataType::F32, ReduceOp::Sum)
            .unwrap_err();
        assert_eq!(comm_failure(&e), Some(CommFailure::Transport), "{e}");
        Ok(())
    });
}

#[test]
fn ref_cpu_without_xccl_answers_unsupported() {
    use devstream_test_plugin_ref_cpu as ref_cpu;
    let Some(place) = ref_cpu::first_place_or_skip() else {
        return;
    };
    let place: Place = place.parse().unwrap();
    let caps = devstream::capabilities(&place).unwrap();
    assert!(!caps.collectives, "{caps:?}");
    let unsupported = |e: Error| assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    unsupported(UniqueId::new(&place).unwrap_err());
    let id = UniqueId::new(&custom(0)).unwrap();
    unsupported(Communicator::init(&place, 0, 1, &id).unwrap_err());
    // A plug-in communicator with a ref_cpu stream: another place.
    let comm = Communicator::init(&custom(0), 0, 1, &UniqueId::new(&custom(0)).unwrap()).unwrap();
    let s = Stream::new(&place).unwrap();
    let b = s.alloc(16).unwrap();
    let e = s
        .all_reduce(&comm, &b, &b, 4, DataType::F32, ReduceOp::Sum)
        .unwrap_err();
    assert!(matches!(e, Error::PlaceMismatch { .. }), "{e}");
}
