//! Collectives on Paddle plug-in places (features `comm` + `plugin`): the `custom_cpu` test
//! plug-in implements the `xccl_*` functions (ranks are threads of this process; several ranks
//! may share a device), so the model tests run there too, with rank `r` on `custom_cpu:(r % 2)`;
//! the `ref_cpu` plug-in (Paddle's reference layout, xccl left null) answers `Unsupported`.

use super::comm_model::{
    assert_close, comm_failure, contribution, decode, download, encode, model, on_ranks_at, upload,
    value,
};
use devstream::{
    CaptureMode, CommFailure, Communicator, DataType, Error, Flag, Place, ReduceOp, Result, Stream,
    UniqueId,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const COUNT: usize = 37;

fn custom(id: usize) -> Place {
    Place::Custom {
        device_type: "custom_cpu".into(),
        id,
    }
}

/// Rank `r` on `custom_cpu:(r % 2)`.
fn places(n: usize) -> Vec<Place> {
    (0..n).map(|r| custom(r % 2)).collect()
}

fn on_ranks<T: Send + 'static>(
    n: usize,
    body: impl Fn(Communicator, Stream) -> Result<T> + Send + Sync + 'static,
) -> Vec<T> {
    on_ranks_at(&places(n), body)
}

fn check_column(dtype: DataType, op: ReduceOp, got: &[f64], n: usize, what: &str) {
    for (i, g) in got.iter().enumerate() {
        let column: Vec<i64> = (0..n).map(|r| value(r, i)).collect();
        assert_close(
            dtype,
            *g,
            model(dtype, op, &column),
            &format!("{what} [{i}]"),
        );
    }
}

#[test]
fn plugin_capabilities_say_collectives() {
    let caps = devstream::capabilities(&custom(0)).unwrap();
    assert!(caps.collectives, "{caps:?}");
}

#[test]
fn plugin_all_reduce_every_type_and_reduction_on_2_to_4_ranks() {
    for n in [2, 3, 4] {
        on_ranks(n, move |comm, s| {
            let rank = comm.rank();
            for dtype in DataType::ALL {
                for op in ReduceOp::ALL {
                    for (in_place, count) in [(false, COUNT), (true, COUNT), (false, 3), (true, 0)]
                    {
                        let send = upload(&s, &encode(dtype, &contribution(rank, count)))?;
                        let recv = if in_place {
                            None
                        } else {
                            Some(s.alloc(count * dtype.size())?)
                        };
                        let target = recv.as_ref().unwrap_or(&send);
                        s.all_reduce(&comm, &send, target, count, dtype, op)?;
                        let got = decode(dtype, &download(&s, target)?);
                        assert_eq!(got.len(), count);
                        let what = format!(
                            "all_reduce {dtype} {op} n={n} in_place={in_place} rank {rank}"
                        );
                        check_column(dtype, op, &got, n, &what);
                    }
                }
            }
            Ok(())
        });
    }
}

#[test]
fn plugin_reduce_every_type_and_reduction_at_every_root() {
    let n = 3;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        for root in 0..n {
            for dtype in DataType::ALL {
                for op in ReduceOp::ALL {
                    let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
                    let recv = upload(&s, &vec![0xAB; COUNT * dtype.size()])?;
                    s.reduce(&comm, &send, &recv, COUNT, dtype, op, root)?;
                    let bytes = download(&s, &recv)?;
                    if rank == root {
                        let what = format!("reduce {dtype} {op} root {root}");
                        check_column(dtype, op, &decode(dtype, &bytes), n, &what);
                    } else {
                        assert_eq!(
                            bytes,
                            vec![0xAB; COUNT * dtype.size()],
                            "non-root untouched"
                        );
                    }
                }
            }
        }
        Ok(())
    });
}

#[test]
fn plugin_broadcast_every_type_from_every_root_in_place_or_not() {
    let n = 3;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        for root in 0..n {
            for dtype in DataType::ALL {
                for in_place in [false, true] {
                    let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
                    let recv = if in_place {
                        None
                    } else {
                        Some(s.alloc(COUNT * dtype.size())?)
                    };
                    let target = recv.as_ref().unwrap_or(&send);
                    s.broadcast(&comm, &send, target, COUNT, dtype, root)?;
                    assert_eq!(
                        download(&s, target)?,
                        encode(dtype, &contribution(root, COUNT)),
                        "broadcast {dtype} root {root} in_place={in_place} rank {rank}"
                    );
                }
            }
        }
        Ok(())
    });
}

#[test]
fn plugin_all_gather_every_type_also_in_place() {
    let n = 4;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        for dtype in DataType::ALL {
            let want: Vec<u8> = (0..n)
                .flat_map(|r| encode(dtype, &contribution(r, COUNT)))
                .collect();
            let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
            let recv = s.alloc(n * COUNT * dtype.size())?;
            s.all_gather(&comm, &send, &recv, COUNT, dtype)?;
            assert_eq!(download(&s, &recv)?, want, "all_gather {dtype}");
            // In place: this rank's part already sits at recv[rank * count..].
            let mut mine = vec![0u8; n * COUNT * dtype.size()];
            let part = encode(dtype, &contribution(rank, COUNT));
            mine[rank * part.len()..][..part.len()].copy_from_slice(&part);
            let buf = upload(&s, &mine)?;
            s.all_gather(&comm, &buf, &buf, COUNT, dtype)?;
            assert_eq!(download(&s, &buf)?, want, "all_gather in place {dtype}");
        }
        Ok(())
    });
}

#[test]
fn plugin_reduce_scatter_every_type_and_reduction_also_in_place() {
    let n = 3;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        for dtype in DataType::ALL {
            for op in ReduceOp::ALL {
                for in_place in [false, true] {
                    // Rank r sends value(r, i) at element i of the whole n * COUNT buffer.
                    let send = upload(&s, &encode(dtype, &contribution(rank, n * COUNT)))?;
                    let recv = if in_place {
                        None
                    } else {
                        Some(s.alloc(COUNT * dtype.size())?)
                    };
                    let target = recv.as_ref().unwrap_or(&send);
                    s.reduce_scatter(&comm, &send, target, COUNT, dtype, op)?;
                    let got = decode(dtype, &download(&s, target)?);
                    assert!(got.len() >= COUNT);
                    for (i, g) in got.iter().take(COUNT).enumerate() {
                        let column: Vec<i64> = (0..n).map(|r| value(r, rank * COUNT + i)).collect();
                        let what = format!(
                            "reduce_scatter {dtype} {op} in_place={in_place} rank {rank} [{i}]"
                        );
                        assert_close(dtype, *g, model(dtype, op, &column), &what);
                    }
                }
            }
        }
        Ok(())
    });
}

#[test]
fn plugin_all_to_all_every_type() {
    plugin_all_to_all_every_type_body();
}

fn plugin_all_to_all_every_type_body() {
    let n = 3;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        for dtype in DataType::ALL {
            // Block p of rank r's send: values of (r, p * COUNT + i).
            let send = upload(&s, &encode(dtype, &contribution(rank, n * COUNT)))?;
            let recv = s.alloc(n * COUNT * dtype.size())?;
            s.all_to_all(&comm, &send, &recv, COUNT, dtype)?;
            let want: Vec<u8> = (0..n)
                .flat_map(|p| {
                    let all = contribution(p, n * COUNT);
                    encode(dtype, &all[rank * COUNT..][..COUNT])
                })
                .collect();
            assert_eq!(download(&s, &recv)?, want, "all_to_all {dtype} rank {rank}");
        }
        Ok(())
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
        plugin_all_to_all_every_type_body();
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
fn plugin_send_recv_every_type_and_groups() {
    let n = 4;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        let next = (rank + 1) % n;
        let prev = (rank + n - 1) % n;
        for dtype in DataType::ALL {
            let out = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
            let inbox = s.alloc(COUNT * dtype.size())?;
            // Receive first, then send, on every rank: only a group makes this complete.
            comm.group_start()?;
            s.recv(&comm, &inbox, COUNT, dtype, prev)?;
            s.send(&comm, &out, COUNT, dtype, next)?;
            comm.group_end()?;
            assert_eq!(
                download(&s, &inbox)?,
                encode(dtype, &contribution(prev, COUNT))
            );
        }
        // Collectives and point-to-point calls in one (nested) group.
        let a = upload(&s, &encode(DataType::I64, &contribution(rank, COUNT)))?;
        let b = upload(&s, &encode(DataType::I64, &contribution(rank, 2)))?;
        let inbox = s.alloc(COUNT * 8)?;
        comm.group_start()?;
        s.recv(&comm, &inbox, COUNT, DataType::I64, prev)?;
        s.all_reduce(&comm, &a, &a, COUNT, DataType::I64, ReduceOp::Sum)?;
        comm.group_start()?;
        s.all_reduce(&comm, &b, &b, 2, DataType::I64, ReduceOp::Max)?;
        comm.group_end()?;
        s.send(&comm, &a, COUNT, DataType::I64, next)?;
        comm.group_end()?;
        check_column(
            DataType::I64,
            ReduceOp::Sum,
            &decode(DataType::I64, &download(&s, &a)?),
            n,
            "grouped all_reduce",
        );
        // The group's send was posted before its all-reduce ran: it carries the input.
        assert_eq!(
            download(&s, &inbox)?,
            encode(DataType::I64, &contribution(prev, COUNT))
        );
        check_column(
            DataType::I64,
            ReduceOp::Max,
            &decode(DataType::I64, &download(&s, &b)?),
            n,
            "grouped all_reduce of 2",
        );
        // Two messages to the same peer in a row, matched in order, outside a group.
        let a = upload(&s, &[rank as u8; 8])?;
        let b = upload(&s, &[100 + rank as u8; 8])?;
        let (x, y) = (s.alloc(8)?, s.alloc(8)?);
        s.send(&comm, &a, 8, DataType::U8, next)?;
        s.send(&comm, &b, 8, DataType::U8, next)?;
        s.recv(&comm, &x, 8, DataType::U8, prev)?;
        s.recv(&comm, &y, 8, DataType::U8, prev)?;
        assert_eq!(download(&s, &x)?, vec![prev as u8; 8]);
        assert_eq!(download(&s, &y)?, vec![100 + prev as u8; 8]);
        Ok(())
    });
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
fn plugin_a_collective_behind_a_gate_waits_for_it_and_orders_later_work() {
    let n = 2;
    let gate = Flag::new(&custom(0)).unwrap();
    let barrier = Arc::new(Barrier::new(n));
    let g = gate.clone();
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        let buf = upload(&s, &encode(DataType::I64, &contribution(rank, COUNT)))?;
        if rank == 0 {
            s.wait_flag(&g, 1)?;
        }
        s.all_reduce(&comm, &buf, &buf, COUNT, DataType::I64, ReduceOp::Sum)?;
        let after = s.record_event()?;
        let host = Arc::new(s.alloc_host(buf.len())?);
        s.copy_device_to_host(&host, 0, &buf, 0, buf.len())?;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (h, out) = (host.clone(), seen.clone());
        // A host function after the collective sees its result (stream order).
        s.launch_host_func(move || {
            *out.lock().unwrap() = h.to_vec().unwrap();
        })?;
        barrier.wait();
        std::thread::sleep(Duration::from_millis(100));
        // Neither rank's collective can have run: rank 0's is held by the gate, rank 1's
        // waits for rank 0.
        assert!(
            !after.query()?,
            "rank {rank}: the collective ran behind a closed gate"
        );
        barrier.wait();
        if rank == 0 {
            g.set(1);
        }
        after.synchronize()?;
        s.synchronize()?;
        let got = decode(DataType::I64, &seen.lock().unwrap());
        assert_eq!(got.len(), COUNT);
        for (i, v) in got.iter().enumerate() {
            assert_eq!(*v, (value(0, i) + value(1, i)) as f64);
        }
        Ok(())
    });
}

#[test]
fn plugin_wait_event_holds_a_collective_and_buffers_outlive_their_handles() {
    let n = 3;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        let producer = Stream::new(comm.place())?;
        let buf = producer.alloc(COUNT * 4)?;
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        producer.launch_host_func(move || {
            std::thread::sleep(Duration::from_millis(30));
            d.store(true, Ordering::SeqCst);
        })?;
        producer.copy_from_host(&buf, 0, &encode(DataType::F32, &contribution(rank, COUNT)))?;
        let ready = producer.record_event()?;
        s.wait_event(&ready)?;
        let recv = s.alloc(COUNT * 4)?;
        s.all_reduce(&comm, &buf, &recv, COUNT, DataType::F32, ReduceOp::Sum)?;
        let d = done.clone();
        let ran_after = Arc::new(AtomicBool::new(false));
        let r = ran_after.clone();
        s.launch_host_func(move || r.store(d.load(Ordering::SeqCst), Ordering::SeqCst))?;
        // The queued collective keeps the send buffer and the communicator alive.
        drop(buf);
        drop(comm);
        let got = decode(DataType::F32, &download(&s, &recv)?);
        check_column(DataType::F32, ReduceOp::Sum, &got, n, "after the producer");
        assert!(ran_after.load(Ordering::SeqCst), "ran before the producer");
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
    if let Some(reason) = ref_cpu::SKIPPED {
        assert!(
            !ref_cpu::paddle_required(),
            "DEVSTREAM_REQUIRE names paddle, but the ref_cpu plug-in was not built: {reason}"
        );
        eprintln!("skipped: the ref_cpu test plug-in was not built: {reason}");
        return;
    }
    let place: Place = format!("{}:0", ref_cpu::DEVICE_TYPE).parse().unwrap();
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
