//! The collectives tests whose bodies are generic over where rank r lives ([`Places`]): every
//! op × type × reduction against the scalar model, groups that refuse overlapping buffers, and
//! stream order (a gate, an event). `model_tests!` runs each body on `cpu` (module `cpu`) and,
//! with the `plugin` feature, on the `custom_cpu` test plug-in (module `plugin`).

use super::comm_model::{
    all_reduce_and_check, all_to_all_received, assert_close, assert_reduced, contribution, decode,
    download, encode, on_ranks_at, upload, value,
};
use super::{Places, COUNT};
use devstream::{Communicator, DataType, Error, Flag, ReduceOp, Result, Stream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// Declares the model tests: one row per body of this module, with the arguments after the
/// places for the run on `cpu` (module `cpu`) and on the `custom_cpu` plug-in (module `plugin`,
/// rank r on `custom_cpu:(r % 2)`).
macro_rules! model_tests {
    ($($body:ident: cpu($($cpu:expr),*), plugin($($plugin:expr),*);)*) => {
        mod cpu {
            $(
                #[test]
                fn $body() {
                    super::$body(crate::cpu_places $(, $cpu)*);
                }
            )*
        }

        #[cfg(feature = "plugin")]
        mod plugin {
            $(
                #[test]
                fn $body() {
                    super::$body(crate::comm_plugin::places $(, $plugin)*);
                }
            )*
        }
    };
}

model_tests! {
    all_reduce_every_type_and_reduction: cpu(&[2, 3, 4, 8]), plugin(&[2, 3, 4]);
    reduce_every_type_and_reduction_at_every_root: cpu(), plugin();
    broadcast_every_type_from_every_root: cpu(4), plugin(3);
    all_gather_every_type_also_in_place: cpu(&[2, 5]), plugin(&[2, 4]);
    reduce_scatter_every_type_and_reduction_also_in_place: cpu(4), plugin(3);
    all_to_all_every_type: cpu(), plugin();
    a_call_that_writes_memory_another_call_of_its_group_uses_is_refused: cpu(), plugin();
    a_collective_behind_a_gate_waits_for_it_and_orders_later_work: cpu(), plugin();
    wait_event_holds_a_collective_until_the_producer_is_done: cpu(), plugin();
}

pub fn all_reduce_every_type_and_reduction(places: Places, sizes: &[usize]) {
    for &n in sizes {
        on_ranks_at(&places(n), move |comm, s| {
            for dtype in DataType::ALL {
                for op in ReduceOp::ALL {
                    // In place or not; with fewer elements than ranks; with none.
                    for (in_place, count) in [(false, COUNT), (true, COUNT), (false, 3), (true, 0)]
                    {
                        all_reduce_and_check(assert_close, &comm, &s, dtype, op, count, in_place)?;
                    }
                }
            }
            Ok(())
        });
    }
}

pub fn reduce_every_type_and_reduction_at_every_root(places: Places) {
    let n = 3;
    on_ranks_at(&places(n), move |comm, s| {
        let rank = comm.rank();
        for root in 0..n {
            for dtype in DataType::ALL {
                for op in ReduceOp::ALL {
                    let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
                    let recv = upload(&s, &vec![0xAB; COUNT * dtype.size()])?;
                    s.reduce(&comm, &send, &recv, COUNT, dtype, op, root)?;
                    let bytes = download(&s, &recv)?;
                    if rank != root {
                        assert!(bytes.iter().all(|&b| b == 0xAB), "non-root recv written");
                        continue;
                    }
                    assert_reduced(
                        assert_close,
                        dtype,
                        op,
                        0..n,
                        &decode(dtype, &bytes),
                        0,
                        &format!("reduce {dtype} {op} root {root}"),
                    );
                }
            }
        }
        Ok(())
    });
}

pub fn broadcast_every_type_from_every_root(places: Places, n: usize) {
    on_ranks_at(&places(n), move |comm, s| {
        let rank = comm.rank();
        for root in 0..n {
            for dtype in DataType::ALL {
                let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
                let recv = s.alloc(COUNT * dtype.size())?;
                s.broadcast(&comm, &send, &recv, COUNT, dtype, root)?;
                assert_eq!(
                    download(&s, &recv)?,
                    encode(dtype, &contribution(root, COUNT)),
                    "broadcast {dtype} from {root} at rank {rank}"
                );
                // In place: every rank's buffer becomes the root's.
                s.broadcast(&comm, &send, &send, COUNT, dtype, root)?;
                assert_eq!(
                    download(&s, &send)?,
                    encode(dtype, &contribution(root, COUNT))
                );
            }
        }
        Ok(())
    });
}

pub fn all_gather_every_type_also_in_place(places: Places, sizes: &[usize]) {
    for &n in sizes {
        on_ranks_at(&places(n), move |comm, s| {
            let rank = comm.rank();
            for dtype in DataType::ALL {
                let want: Vec<u8> = (0..n)
                    .flat_map(|r| encode(dtype, &contribution(r, COUNT)))
                    .collect();
                let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
                let recv = s.alloc(n * COUNT * dtype.size())?;
                s.all_gather(&comm, &send, &recv, COUNT, dtype)?;
                assert_eq!(download(&s, &recv)?, want, "all_gather {dtype}");
                // In place: this rank's part sits at recv[rank * count..] (NCCL's layout).
                let size = COUNT * dtype.size();
                let both = s.alloc(n * size)?;
                s.copy_from_host(
                    &both,
                    rank * size,
                    &encode(dtype, &contribution(rank, COUNT)),
                )?;
                s.all_gather(&comm, &both, &both, COUNT, dtype)?;
                assert_eq!(download(&s, &both)?, want, "in-place all_gather {dtype}");
            }
            Ok(())
        });
    }
}

pub fn reduce_scatter_every_type_and_reduction_also_in_place(places: Places, n: usize) {
    on_ranks_at(&places(n), move |comm, s| {
        let rank = comm.rank();
        for dtype in DataType::ALL {
            for op in ReduceOp::ALL {
                for in_place in [false, true] {
                    // Rank r sends n blocks; element j of block b is value(r, b * COUNT + j).
                    let send = upload(&s, &encode(dtype, &contribution(rank, n * COUNT)))?;
                    let recv = (!in_place)
                        .then(|| s.alloc(COUNT * dtype.size()))
                        .transpose()?;
                    let target = recv.as_ref().unwrap_or(&send);
                    s.reduce_scatter(&comm, &send, target, COUNT, dtype, op)?;
                    let got = decode(dtype, &download(&s, target)?);
                    assert!(got.len() >= COUNT);
                    assert_reduced(
                        assert_close,
                        dtype,
                        op,
                        0..n,
                        &got[..COUNT],
                        rank * COUNT,
                        &format!("reduce_scatter {dtype} {op} in_place={in_place} rank {rank}"),
                    );
                }
            }
        }
        Ok(())
    });
}

pub fn all_to_all_every_type(places: Places) {
    let n = 3;
    on_ranks_at(&places(n), move |comm, s| {
        let rank = comm.rank();
        for dtype in DataType::ALL {
            let send = upload(&s, &encode(dtype, &contribution(rank, n * COUNT)))?;
            let recv = s.alloc(n * COUNT * dtype.size())?;
            s.all_to_all(&comm, &send, &recv, COUNT, dtype)?;
            let want = all_to_all_received(dtype, n, rank, COUNT);
            assert_eq!(download(&s, &recv)?, want, "all_to_all {dtype} rank {rank}");
        }
        Ok(())
    });
}

/// One rank's part: every type around a ring in a group (receive before send on every rank),
/// collectives and point-to-point calls mixed in nested groups, two messages in a row.
pub fn send_recv_every_type_and_groups(comm: &Communicator, s: &Stream) -> Result<()> {
    let (rank, n) = (comm.rank(), comm.nranks());
    let next = (rank + 1) % n;
    let prev = (rank + n - 1) % n;
    for dtype in DataType::ALL {
        let out = upload(s, &encode(dtype, &contribution(rank, COUNT)))?;
        let inbox = s.alloc(COUNT * dtype.size())?;
        // Receive first, then send, on every rank: only a group makes this complete.
        comm.group_start()?;
        s.recv(comm, &inbox, COUNT, dtype, prev)?;
        s.send(comm, &out, COUNT, dtype, next)?;
        comm.group_end()?;
        assert_eq!(
            download(s, &inbox)?,
            encode(dtype, &contribution(prev, COUNT))
        );
    }
    // Collectives and point-to-point calls mixed in one group, two all-reduces included
    // (each is two phases on the CPU engine); fewer elements than ranks for the second. The
    // calls of a group are unordered, so the send reads a buffer no call of the group writes
    // (sending `a` itself, which the in-place all-reduce writes, is refused).
    let a = upload(s, &encode(DataType::I64, &contribution(rank, COUNT)))?;
    let b = upload(s, &encode(DataType::I64, &contribution(rank, 2)))?;
    let out = upload(s, &encode(DataType::I64, &contribution(rank + 5, COUNT)))?;
    let inbox = s.alloc(COUNT * 8)?;
    comm.group_start()?;
    s.recv(comm, &inbox, COUNT, DataType::I64, prev)?;
    s.all_reduce(comm, &a, &a, COUNT, DataType::I64, ReduceOp::Sum)?;
    comm.group_start()?; // groups nest
    s.all_reduce(comm, &b, &b, 2, DataType::I64, ReduceOp::Max)?;
    comm.group_end()?;
    s.send(comm, &out, COUNT, DataType::I64, next)?;
    comm.group_end()?;
    let sums: Vec<f64> = (0..COUNT)
        .map(|i| (0..n).map(|r| value(r, i)).sum::<i64>() as f64)
        .collect();
    assert_eq!(decode(DataType::I64, &download(s, &a)?), sums);
    assert_eq!(
        download(s, &inbox)?,
        encode(DataType::I64, &contribution(prev + 5, COUNT))
    );
    let maxes: Vec<f64> = (0..2)
        .map(|i| (0..n).map(|r| value(r, i)).max().unwrap() as f64)
        .collect();
    assert_eq!(decode(DataType::I64, &download(s, &b)?), maxes);
    // Two messages to the same peer in a row, matched in order.
    let a = upload(s, &[rank as u8; 8])?;
    let b = upload(s, &[100 + rank as u8; 8])?;
    let (x, y) = (s.alloc(8)?, s.alloc(8)?);
    s.send(comm, &a, 8, DataType::U8, next)?;
    s.send(comm, &b, 8, DataType::U8, next)?;
    s.recv(comm, &x, 8, DataType::U8, prev)?;
    s.recv(comm, &y, 8, DataType::U8, prev)?;
    assert_eq!(download(s, &x)?, vec![prev as u8; 8]);
    assert_eq!(download(s, &y)?, vec![100 + prev as u8; 8]);
    Ok(())
}

/// Inside a group a call may not write memory another call of the group reads or writes, nor
/// read memory another writes (the calls of a group are unordered, as in NCCL): refused with
/// `InvalidArgument` at the call, the group stays open with its earlier calls, which run.
pub fn a_call_that_writes_memory_another_call_of_its_group_uses_is_refused(places: Places) {
    let n = 2;
    on_ranks_at(&places(n), move |comm, s| {
        let rank = comm.rank();
        let peer = 1 - rank;
        let (i64_, sum) = (DataType::I64, ReduceOp::Sum);
        let a = upload(&s, &encode(i64_, &contribution(rank, COUNT)))?;
        let x = upload(&s, &encode(i64_, &contribution(rank + 1, COUNT)))?;
        let y = s.alloc(COUNT * 8)?;
        let inbox = s.alloc(COUNT * 8)?;
        comm.group_start()?;
        s.all_reduce(&comm, &a, &a, COUNT, i64_, sum)?; // reads and writes `a` (in place)
        s.all_reduce(&comm, &x, &y, COUNT, i64_, sum)?; // reads `x`, writes `y`
        let overlapping = [
            (
                "send of a buffer a call writes",
                s.send(&comm, &a, COUNT, i64_, peer),
            ),
            (
                "recv into a buffer a call reads",
                s.recv(&comm, &x, COUNT, i64_, peer),
            ),
            (
                "a second write of the same buffer",
                s.all_reduce(&comm, &inbox, &y, COUNT, i64_, sum),
            ),
            (
                "a read of a buffer a call writes",
                s.broadcast(&comm, &y, &inbox, COUNT, i64_, rank),
            ),
        ];
        for (what, result) in overlapping {
            if !matches!(result, Err(Error::InvalidArgument(_))) {
                return Err(Error::InvalidArgument(format!("{what}: {result:?}")));
            }
        }
        // Reads of the same buffer by two calls are fine.
        s.send(&comm, &x, COUNT, i64_, peer)?;
        s.recv(&comm, &inbox, COUNT, i64_, peer)?;
        comm.group_end()?;
        let sums = |offset: usize| -> Vec<f64> {
            (0..COUNT)
                .map(|i| (0..n).map(|r| value(r + offset, i)).sum::<i64>() as f64)
                .collect()
        };
        assert_eq!(decode(i64_, &download(&s, &a)?), sums(0));
        assert_eq!(decode(i64_, &download(&s, &y)?), sums(1));
        assert_eq!(
            download(&s, &inbox)?,
            encode(i64_, &contribution(peer + 1, COUNT))
        );
        // Outside a group the same calls are ordered by the stream, and allowed.
        s.all_reduce(&comm, &a, &a, COUNT, i64_, sum)?;
        s.send(&comm, &a, COUNT, i64_, peer)?;
        s.recv(&comm, &inbox, COUNT, i64_, peer)?;
        let twice: Vec<f64> = sums(0).iter().map(|v| v * n as f64).collect();
        assert_eq!(decode(i64_, &download(&s, &inbox)?), twice);
        Ok(())
    });
}

pub fn a_collective_behind_a_gate_waits_for_it_and_orders_later_work(places: Places) {
    let n = 2;
    let places = places(n);
    let gate = Flag::new(&places[0]).unwrap();
    let barrier = Arc::new(Barrier::new(n));
    let g = gate.clone();
    on_ranks_at(&places, move |comm, s| {
        let rank = comm.rank();
        let buf = upload(&s, &encode(DataType::I64, &contribution(rank, COUNT)))?;
        if rank == 0 {
            s.wait_flag(&g, 1)?;
        }
        s.all_reduce(&comm, &buf, &buf, COUNT, DataType::I64, ReduceOp::Sum)?;
        let after = s.record_event()?;
        let host = s.alloc_host(buf.len())?;
        s.copy_device_to_host(&host, 0, &buf, 0, buf.len())?;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (h, out) = (Arc::new(host), seen.clone());
        let h2 = h.clone();
        // A host function after the collective sees its result (stream order).
        s.launch_host_func(move || {
            *out.lock().unwrap() = h2.to_vec().unwrap();
        })?;
        barrier.wait();
        std::thread::sleep(Duration::from_millis(200));
        // Neither rank's collective can have run: rank 0's is held by the gate, rank 1's
        // waits for rank 0.
        assert!(
            !after.query()?,
            "rank {rank}: the collective ran behind a closed gate"
        );
        assert!(!s.query()?);
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

pub fn wait_event_holds_a_collective_until_the_producer_is_done(places: Places) {
    let n = 3;
    on_ranks_at(&places(n), move |comm, s| {
        let rank = comm.rank();
        let producer = Stream::new(comm.place())?;
        let buf = producer.alloc(COUNT * 4)?;
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        producer.launch_host_func(move || {
            std::thread::sleep(Duration::from_millis(50));
            d.store(true, Ordering::SeqCst);
        })?;
        producer.copy_from_host(&buf, 0, &encode(DataType::F32, &contribution(rank, COUNT)))?;
        let ready = producer.record_event()?;
        s.wait_event(&ready)?;
        s.all_reduce(&comm, &buf, &buf, COUNT, DataType::F32, ReduceOp::Sum)?;
        let d = done.clone();
        s.launch_host_func(move || assert!(d.load(Ordering::SeqCst)))?;
        let host = s.alloc_host(COUNT * 4)?;
        s.copy_device_to_host(&host, 0, &buf, 0, COUNT * 4)?;
        // The queued collective keeps its buffer and the communicator alive.
        drop(buf);
        drop(comm);
        s.synchronize()?;
        let got = decode(DataType::F32, &host.to_vec()?);
        assert_reduced(
            assert_close,
            DataType::F32,
            ReduceOp::Sum,
            0..n,
            &got,
            0,
            "sum",
        );
        Ok(())
    });
}
