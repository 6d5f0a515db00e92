//! Collectives on the CPU reference engine (cargo feature `comm`): every op × type ×
//! reduction against a scalar model with 2 to 8 ranks as threads (`comm_cases`, which with the
//! `plugin` feature runs the same on the `custom_cpu` test plug-in's `xccl_*` functions; more
//! plug-in tests in `comm_plugin`), the in-process all-reduce (here), ordering with events,
//! flags, host functions and capture (`comm_cases`, `comm_order`), failures and bad input
//! (`comm_failures`), ranks as processes (`comm_processes`) and random programs checked
//! against the model (`comm_programs`).

use devstream::{
    CommFailure, Communicator, DataType, Error, Member, Place, ReduceOp, Result, Stream,
    StreamOptions, UniqueId,
};
use std::sync::Arc;
use std::time::Duration;

mod comm_cases;
mod comm_failures;
mod comm_model;
mod comm_order;
#[cfg(feature = "plugin")]
mod comm_plugin;
mod comm_processes;
mod comm_programs;
use comm_model::{
    all_reduce_and_check, assert_close, assert_reduced, contribution, decode, download, encode,
    hex, on_ranks_at, unhex, upload, wait_child,
};

const CPU: Place = Place::Cpu;

// ---------------------------------------------------------------------------------------------
// Harness

/// Runs `body(comm, stream)` on `n` CPU ranks, one thread each, and returns their results.
fn on_ranks<T: Send + 'static>(
    n: usize,
    body: impl Fn(Communicator, Stream) -> Result<T> + Send + Sync + 'static,
) -> Vec<T> {
    on_ranks_at(&vec![CPU; n], body)
}

const COUNT: usize = 37;

/// How many times longer than a plain debug run a tool may make these tests
/// (`DEVSTREAM_TEST_TIME_SCALE`, set by `cargo xtask sanitize`; else 1): the upper bounds below
/// tell "failed fast" from "waited out the deadline", and grow with it.
fn scaled(limit: Duration) -> Duration {
    let scale = std::env::var("DEVSTREAM_TEST_TIME_SCALE")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .filter(|&scale| scale >= 1)
        .unwrap_or(1);
    limit * scale
}

/// Where each of `n` ranks lives.
type Places = fn(usize) -> Vec<Place>;

/// `n` ranks on the CPU place.
fn cpu_places(n: usize) -> Vec<Place> {
    vec![CPU; n]
}

#[test]
fn send_recv_every_type_and_a_ring_exchange_in_a_group() {
    on_ranks(4, |comm, s| {
        comm_cases::send_recv_every_type_and_groups(&comm, &s)?;
        // Every rank past the ring before two of them fail the communicator on purpose: a
        // ring lets a rank finish ahead of its neighbours (its sends need no receiver yet),
        // and the failure below is communicator-wide (ranks still receiving would get
        // `Aborted`).
        let token = upload(&s, &[0u8; 4])?;
        s.all_reduce(&comm, &token, &token, 1, DataType::I32, ReduceOp::Sum)?;
        s.synchronize()?;
        // A message of the wrong count is a typed mismatch on the receiver.
        let rank = comm.rank();
        let a = upload(&s, &[rank as u8; 8])?;
        let x = s.alloc(8)?;
        if rank == 0 {
            s.send(&comm, &a, 4, DataType::U8, 1)?;
        } else if rank == 1 {
            s.recv(&comm, &x, 8, DataType::U8, 0)?;
            let e = s.synchronize().unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Comm {
                        failure: CommFailure::Mismatch,
                        ..
                    }
                ),
                "{e}"
            );
        }
        Ok(())
    });
}

/// Ranks that are all threads of one process take the in-process all-reduce (peers' buffers
/// read and written in place, 64 KiB at a time): counts of many chunks, slices that do not
/// divide evenly and end mid-chunk, every element type, in place and not.
#[test]
fn all_reduce_of_many_chunks_on_ranks_in_one_process() {
    for n in [2, 3, 5] {
        on_ranks(n, move |comm, s| {
            for dtype in DataType::ALL {
                for (op, in_place, count) in [
                    (ReduceOp::Sum, true, 100_003),
                    (ReduceOp::Max, false, 70_001),
                    (ReduceOp::Avg, true, 16_385 * n + 7),
                ] {
                    all_reduce_and_check(assert_close, &comm, &s, dtype, op, count, in_place)?;
                }
            }
            Ok(())
        });
    }
}

/// The in-process all-reduce's end barrier: a rank whose part is done does not move on (here:
/// overwrite its buffer) while a slower peer may still read that buffer for its own slice.
/// Rank 1's pool has one worker, kept busy by another stream until rank 0 has finished its
/// part and queued the overwrite; rank 1 must still see rank 0's data, not the overwrite.
#[test]
fn an_in_process_all_reduce_holds_every_rank_until_every_peer_is_done() {
    let n = 2;
    let count = 50_000;
    let id = UniqueId::new(&CPU).unwrap();
    let pool = devstream::cpu::CpuPool::new(1).unwrap();
    let (busy_tx, busy_rx) = std::sync::mpsc::channel::<()>();
    let busy_rx = Arc::new(std::sync::Mutex::new(busy_rx));
    let threads: Vec<_> = (0..n)
        .map(|rank| {
            let pool = pool.clone();
            let busy_tx = busy_tx.clone();
            let busy_rx = busy_rx.clone();
            std::thread::spawn(move || -> Result<Vec<u8>> {
                let comm = Communicator::init(&CPU, rank, n, &id)?;
                let s: Stream = if rank == 1 {
                    pool.new_stream(StreamOptions::default()).wrap()
                } else {
                    Stream::new(&CPU)?
                };
                let buf = upload(&s, &encode(DataType::I32, &contribution(rank, count)))?;
                s.synchronize()?;
                if rank == 1 {
                    s.all_reduce(&comm, &buf, &buf, count, DataType::I32, ReduceOp::Sum)?;
                    // Let the post run on the pool's only worker, then occupy that worker.
                    std::thread::sleep(Duration::from_millis(50));
                    let blocker: Stream = pool.new_stream(StreamOptions::default()).wrap();
                    blocker.launch_host_func(move || {
                        busy_tx.send(()).unwrap();
                        std::thread::sleep(Duration::from_millis(300));
                    })?;
                    let out = download(&s, &buf)?;
                    blocker.synchronize()?;
                    Ok(out)
                } else {
                    busy_rx.lock().unwrap().recv().unwrap();
                    s.all_reduce(&comm, &buf, &buf, count, DataType::I32, ReduceOp::Sum)?;
                    // Queued at once behind the collective: runs only when rank 1 is done.
                    s.fill(&buf, 0, buf.len(), 0xff)?;
                    s.synchronize()?;
                    Ok(Vec::new())
                }
            })
        })
        .collect();
    let results: Vec<Vec<u8>> = threads
        .into_iter()
        .map(|t| t.join().unwrap().unwrap())
        .collect();
    let got = decode(DataType::I32, &results[1]);
    assert_reduced(
        assert_close,
        DataType::I32,
        ReduceOp::Sum,
        0..n,
        &got,
        0,
        "rank 1",
    );
}

/// Work on another stream that writes a buffer while an in-process all-reduce reads and writes
/// it (a race the program makes, so the values are unspecified) stays sound: each operation
/// finds the buffer whole, both complete, and an all-reduce with nothing racing is exact again.
/// The ranks share each buffer for the whole reduction, each touching only its own slice; the
/// racing fills and copies take the buffer for themselves. CI runs this file under
/// ThreadSanitizer and AddressSanitizer too (`cargo xtask sanitize thread|address --comm`).
#[test]
fn work_racing_an_in_process_all_reduce_on_another_stream_stays_sound() {
    let n = 3;
    let count = 200_003;
    on_ranks(n, move |comm, s| {
        let rank = comm.rank();
        let buf = upload(&s, &encode(DataType::F32, &contribution(rank, count)))?;
        s.synchronize()?;
        let racer = Stream::new(&CPU)?;
        for round in 0..4u8 {
            s.all_reduce(&comm, &buf, &buf, count, DataType::F32, ReduceOp::Sum)?;
            racer.fill(&buf, 0, buf.len(), round)?;
            racer.copy_from_host(&buf, 4 * (count / 2), &[rank as u8; 4096])?;
        }
        s.synchronize()?;
        racer.synchronize()?;
        let (f32_, sum) = (DataType::F32, ReduceOp::Sum);
        all_reduce_and_check(assert_close, &comm, &s, f32_, sum, count, true)
    });
}

#[test]
fn eight_ranks_as_threads_on_a_one_worker_pool_do_not_deadlock() {
    let pool = devstream::cpu::CpuPool::new(1).unwrap();
    let id = UniqueId::new(&CPU).unwrap();
    let n = 8;
    let threads: Vec<_> = (0..n)
        .map(|rank| {
            let pool = pool.clone();
            std::thread::spawn(move || -> Result<Vec<u8>> {
                let comm = Communicator::init(&CPU, rank, n, &id)?;
                let s: Stream = pool.new_stream(StreamOptions::default()).wrap();
                let buf = upload(&s, &encode(DataType::I32, &contribution(rank, COUNT)))?;
                for _ in 0..5 {
                    s.all_reduce(&comm, &buf, &buf, COUNT, DataType::I32, ReduceOp::Max)?;
                }
                download(&s, &buf)
            })
        })
        .collect();
    for t in threads {
        let got = decode(DataType::I32, &t.join().unwrap().unwrap());
        assert_reduced(
            assert_close,
            DataType::I32,
            ReduceOp::Max,
            0..n,
            &got,
            0,
            "max",
        );
    }
}
