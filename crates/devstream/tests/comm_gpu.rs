//! Collectives on CUDA (NCCL) and HIP (RCCL) places (cargo features `comm` and `cuda`/`hip`):
//! every op × type × reduction against the scalar model with ranks as threads (one GPU per
//! rank) and as processes (one per GPU), stream order with events, capture and replay, buffers
//! and communicators dropped while queued, bad input, a peer that dies, and the typed errors
//! of places without a library or a GPU.
//!
//! A backend needs two devices whose `capabilities().collectives` is true (among those
//! `DEVSTREAM_PLACES` lists, when set); with fewer its tests are skipped with a message, unless
//! `DEVSTREAM_REQUIRE` names it (`cuda`, `hip`): then they fail. `DEVSTREAM_COMM_MIN_RANKS=1`
//! runs every test that does not need a second rank with one rank on one device (a machine with
//! one GPU: the engine, every op and type, capture and replay, lifetimes and bad input through
//! the real library, without any traffic between GPUs). NCCL: `NCCL_NVLS_ENABLE=0` is set for
//! the ranks started here.

use devstream::{
    CaptureMode, CommFailure, Communicator, DataType, Error, Event, EventFlags, Place, ReduceOp,
    Result, Stream, UniqueId,
};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod comm_model;
use comm_model::{
    all_reduce_and_check, all_to_all_received, assert_near, assert_reduced, comm_failure,
    contribution, decode, download, encode, hex, launch_and_check, on_ranks_at, unhex, upload,
    wait_child,
};

const COUNT: usize = 37;

/// One test at a time on the GPUs: collectives of two communicators queued in different
/// orders on two GPUs could wait for each other.
fn gpu_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn required(kind: &str) -> bool {
    std::env::var("DEVSTREAM_REQUIRE")
        .map(|list| list.split(',').any(|k| k.trim() == kind))
        .unwrap_or(false)
}

/// The places of `kind` (`"cuda"`, `"hip"`) with collectives (only those that
/// `DEVSTREAM_PLACES`, a comma-separated list, names when it is set).
fn places_with_collectives(kind: &str) -> Vec<Place> {
    let listed: Option<Vec<String>> = std::env::var("DEVSTREAM_PLACES")
        .ok()
        .map(|list| list.split(',').map(|p| p.trim().to_string()).collect());
    devstream::places()
        .into_iter()
        .filter(|p| p.to_string().starts_with(&format!("{kind}:")))
        .filter(|p| listed.as_ref().is_none_or(|l| l.contains(&p.to_string())))
        .filter(|p| devstream::capabilities(p).is_ok_and(|c| c.collectives))
        .collect()
}

/// Each backend with at least two devices with collectives (one with
/// `DEVSTREAM_COMM_MIN_RANKS=1`), and its places. Skips (with a message) or, where
/// `DEVSTREAM_REQUIRE` names the backend, fails for the others.
fn gpu_groups(test: &str) -> Vec<(&'static str, Vec<Place>)> {
    gpu_groups_of_at_least(test, configured_min_ranks())
}

/// `DEVSTREAM_COMM_MIN_RANKS` (default 2, at least 1).
fn configured_min_ranks() -> usize {
    std::env::var("DEVSTREAM_COMM_MIN_RANKS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(2)
        .max(1)
}

/// [`gpu_groups`] for a test that needs `min_ranks` devices whatever the environment says.
fn gpu_groups_of_at_least(test: &str, min_ranks: usize) -> Vec<(&'static str, Vec<Place>)> {
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        // Once, before NCCL starts threads that read the environment.
        std::env::set_var("NCCL_NVLS_ENABLE", "0");
    }
    let mut groups = Vec::new();
    for kind in ["cuda", "hip"] {
        let places = places_with_collectives(kind);
        if places.len() >= min_ranks {
            groups.push((kind, places));
        } else if required(kind) && places.len() < configured_min_ranks() {
            // Required: fewer devices than the run asked for. (A test needing more ranks than
            // a one-rank run provides is skipped below, with a message.)
            panic!(
                "{test}: DEVSTREAM_REQUIRE lists {kind}, but {} {kind} device(s) have \
                 collectives ({min_ranks} needed; is NCCL/RCCL installed?)",
                places.len()
            );
        } else {
            eprintln!(
                "{test}: skipped on {kind}: {} device(s) with collectives, {min_ranks} needed",
                places.len()
            );
        }
    }
    groups
}

/// Runs `body` with ranks as threads on each backend's group (see [`gpu_groups`]), one test at a
/// time on the GPUs; `body` gets the backend (`"cuda"`, `"hip"`), the number of ranks, and the
/// rank's communicator and stream.
fn on_every_group<F>(test: &str, body: F)
where
    F: Fn(&'static str, usize, usize, Communicator, Stream) -> Result<()>
        + Clone
        + Send
        + Sync
        + 'static,
{
    let _gpu = gpu_lock();
    for (kind, places) in gpu_groups(test) {
        let n = places.len();
        let body = body.clone();
        on_ranks_at(&places, move |comm, s| body(kind, n, comm.rank(), comm, s));
    }
}

// ---------------------------------------------------------------------------------------------
// Every op × type × reduction against the model, ranks as threads

#[test]
fn gpu_all_reduce_every_type_and_reduction() {
    const TEST: &str = "gpu_all_reduce_every_type_and_reduction";
    on_every_group(TEST, |_, _, _, comm, s| {
        for dtype in DataType::ALL {
            for op in ReduceOp::ALL {
                for (in_place, count) in [(false, COUNT), (true, COUNT), (false, 3)] {
                    all_reduce_and_check(assert_near, &comm, &s, dtype, op, count, in_place)?;
                }
            }
        }
        Ok(())
    });
}

#[test]
fn gpu_reduce_broadcast_gather_scatter_and_all_to_all_every_type() {
    const TEST: &str = "gpu_reduce_broadcast_gather_scatter_and_all_to_all_every_type";
    on_every_group(TEST, |kind, n, rank, comm, s| {
        for dtype in DataType::ALL {
            let size = dtype.size();
            // reduce, every reduction, at every root.
            for root in 0..n {
                for op in ReduceOp::ALL {
                    let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
                    let recv = s.alloc(COUNT * size)?;
                    s.reduce(&comm, &send, &recv, COUNT, dtype, op, root)?;
                    let got = download(&s, &recv)?;
                    if rank == root {
                        assert_reduced(
                            assert_near,
                            dtype,
                            op,
                            0..n,
                            &decode(dtype, &got),
                            0,
                            &format!("{kind} reduce {dtype} {op} root {root}"),
                        );
                    }
                }
                // broadcast from every root.
                let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
                let recv = s.alloc(COUNT * size)?;
                s.broadcast(&comm, &send, &recv, COUNT, dtype, root)?;
                assert_eq!(
                    download(&s, &recv)?,
                    encode(dtype, &contribution(root, COUNT)),
                    "{kind} broadcast {dtype} root {root} rank {rank}"
                );
            }
            // all_gather, also in place.
            let want: Vec<u8> = (0..n)
                .flat_map(|r| encode(dtype, &contribution(r, COUNT)))
                .collect();
            let send = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
            let recv = s.alloc(n * COUNT * size)?;
            s.all_gather(&comm, &send, &recv, COUNT, dtype)?;
            assert_eq!(download(&s, &recv)?, want, "{kind} all_gather {dtype}");
            let both = s.alloc(n * COUNT * size)?;
            s.fill(&both, 0, both.len(), 0)?;
            s.copy_from_host(
                &both,
                rank * COUNT * size,
                &encode(dtype, &contribution(rank, COUNT)),
            )?;
            s.all_gather(&comm, &both, &both, COUNT, dtype)?;
            assert_eq!(
                download(&s, &both)?,
                want,
                "{kind} all_gather in place {dtype}"
            );
            // reduce_scatter, every reduction, also in place.
            for op in ReduceOp::ALL {
                for in_place in [false, true] {
                    let send = upload(&s, &encode(dtype, &contribution(rank, n * COUNT)))?;
                    let recv = if in_place {
                        None
                    } else {
                        Some(s.alloc(COUNT * size)?)
                    };
                    let out = recv.as_ref().unwrap_or(&send);
                    s.reduce_scatter(&comm, &send, out, COUNT, dtype, op)?;
                    let got = download(&s, out)?;
                    assert_reduced(
                        assert_near,
                        dtype,
                        op,
                        0..n,
                        &decode(dtype, &got[..COUNT * size]),
                        rank * COUNT,
                        &format!(
                            "{kind} reduce_scatter {dtype} {op} in_place={in_place} rank {rank}"
                        ),
                    );
                }
            }
            // all_to_all (separate buffers; in place is refused on NCCL/RCCL).
            let send = upload(&s, &encode(dtype, &contribution(rank, n * COUNT)))?;
            let recv = s.alloc(n * COUNT * size)?;
            s.all_to_all(&comm, &send, &recv, COUNT, dtype)?;
            let want = all_to_all_received(dtype, n, rank, COUNT);
            assert_eq!(
                download(&s, &recv)?,
                want,
                "{kind} all_to_all {dtype} rank {rank}"
            );
            // In place is refused with peers (blocks still to be sent would be overwritten);
            // with one rank it is a copy onto itself, which is fine.
            if n > 1 {
                assert!(matches!(
                    s.all_to_all(&comm, &send, &send, COUNT, dtype),
                    Err(Error::InvalidArgument(_))
                ));
            }
        }
        Ok(())
    });
}

#[test]
fn gpu_send_recv_ring_in_a_group_every_type() {
    const TEST: &str = "gpu_send_recv_ring_in_a_group_every_type";
    on_every_group(TEST, |kind, n, rank, comm, s| {
        let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
        for dtype in DataType::ALL {
            let outbox = upload(&s, &encode(dtype, &contribution(rank, COUNT)))?;
            let inbox = s.alloc(COUNT * dtype.size())?;
            comm.group_start()?;
            s.recv(&comm, &inbox, COUNT, dtype, prev)?;
            s.send(&comm, &outbox, COUNT, dtype, next)?;
            // Dropped before the group is queued: kept alive by the group.
            drop(outbox);
            comm.group_end()?;
            assert_eq!(
                download(&s, &inbox)?,
                encode(dtype, &contribution(prev, COUNT)),
                "{kind} ring {dtype} rank {rank}"
            );
        }
        assert!(matches!(comm.group_end(), Err(Error::InvalidArgument(_))));
        Ok(())
    });
}

/// The group rule every engine keeps: a call that writes memory another call of the open group
/// reads or writes (or reads memory another writes) is refused before the library records it;
/// the group stays open with the earlier calls, which run at `group_end`.
#[test]
fn gpu_a_call_that_writes_memory_another_call_of_its_group_uses_is_refused() {
    const TEST: &str = "gpu_a_call_that_writes_memory_another_call_of_its_group_uses_is_refused";
    on_every_group(TEST, |kind, n, rank, comm, s| {
        let next = (rank + 1) % n;
        let (f32_, sum) = (DataType::F32, ReduceOp::Sum);
        let a = upload(&s, &encode(f32_, &contribution(rank, COUNT)))?;
        let x = upload(&s, &encode(f32_, &contribution(rank + 1, COUNT)))?;
        let y = s.alloc(COUNT * 4)?;
        let refused = |r: Result<()>, what: &str| match r {
            Err(Error::InvalidArgument(_)) => Ok(()),
            other => Err(Error::InvalidArgument(format!("{kind} {what}: {other:?}"))),
        };
        comm.group_start()?;
        s.all_reduce(&comm, &a, &a, COUNT, f32_, sum)?;
        refused(
            s.send(&comm, &a, COUNT, f32_, next),
            "send of a written buffer",
        )?;
        refused(
            s.all_reduce(&comm, &x, &a, COUNT, f32_, sum),
            "a second write of a buffer",
        )?;
        refused(
            s.all_reduce(&comm, &a, &y, COUNT, f32_, sum),
            "a read of a written buffer",
        )?;
        s.all_reduce(&comm, &x, &y, COUNT, f32_, sum)?;
        comm.group_end()?;
        for (buf, offset) in [(&a, 0), (&y, 1)] {
            assert_reduced(
                assert_near,
                f32_,
                sum,
                offset..n + offset,
                &decode(f32_, &download(&s, buf)?),
                0,
                &format!("{kind} rank {rank}"),
            );
        }
        Ok(())
    });
}

/// A communicator dropped with a group open ends the library's group of the thread that
/// opened it (its calls are issued, as `group_end` would): later calls of that thread on
/// another communicator are not swallowed by a group that never closes. (With one rank NCCL
/// runs a call at once, group or not: this needs two ranks to show anything.)
#[test]
fn gpu_a_communicator_dropped_with_a_group_open_ends_the_threads_group() {
    let _gpu = gpu_lock();
    let test = "gpu_a_communicator_dropped_with_a_group_open_ends_the_threads_group";
    for (kind, places) in gpu_groups(test) {
        let n = places.len();
        let ids = [(); 2].map(|_| UniqueId::new(&places[0]).unwrap());
        let ranks: Vec<_> = places
            .iter()
            .cloned()
            .enumerate()
            .map(|(rank, place)| {
                std::thread::spawn(move || -> Result<(Vec<u8>, Vec<u8>)> {
                    let s = Stream::new(&place)?;
                    let (f32_, sum) = (DataType::F32, ReduceOp::Sum);
                    let a = upload(&s, &encode(f32_, &contribution(rank, COUNT)))?;
                    let b = s.alloc(COUNT * 4)?;
                    let dropped = Communicator::init(&place, rank, n, &ids[0])?;
                    dropped.group_start()?;
                    s.all_reduce(&dropped, &a, &b, COUNT, f32_, sum)?;
                    drop(dropped); // never closed
                    let comm = Communicator::init(&place, rank, n, &ids[1])?;
                    let c = upload(&s, &encode(f32_, &contribution(rank + 1, COUNT)))?;
                    let d = s.alloc(COUNT * 4)?;
                    s.all_reduce(&comm, &c, &d, COUNT, f32_, sum)?;
                    Ok((download(&s, &b)?, download(&s, &d)?))
                })
            })
            .collect();
        for (rank, thread) in ranks.into_iter().enumerate() {
            let (b, d) = thread.join().unwrap().unwrap();
            for (what, bytes, offset) in [("dropped group's", b, 0), ("later", d, 1)] {
                let (f32_, sum) = (DataType::F32, ReduceOp::Sum);
                let context = format!("{kind} rank {rank}: the {what} all-reduce");
                let got = decode(f32_, &bytes);
                assert_reduced(
                    assert_near,
                    f32_,
                    sum,
                    offset..n + offset,
                    &got,
                    0,
                    &context,
                );
            }
        }
    }
}

#[test]
fn gpu_zero_count_collectives_are_no_ops() {
    const TEST: &str = "gpu_zero_count_collectives_are_no_ops";
    on_every_group(TEST, |_, _, _, comm, s| {
        let empty = s.alloc(0)?;
        s.all_reduce(&comm, &empty, &empty, 0, DataType::F32, ReduceOp::Sum)?;
        s.synchronize()
    });
}

// ---------------------------------------------------------------------------------------------
// Stream order, capture, lifetimes

/// `count` f32 elements of `rank + 1`: what rank `rank` contributes to a sum of every rank.
fn rank_contribution(rank: usize, count: usize) -> Vec<u8> {
    std::iter::repeat_n((rank as f32 + 1.0).to_ne_bytes(), count)
        .flatten()
        .collect()
}

/// Asserts that every f32 of `bytes` is the sum of the `n` ranks' [`rank_contribution`]s.
fn assert_every_element_is_the_sum(bytes: &[u8], n: usize, kind: &str, rank: usize) {
    let want = (n * (n + 1) / 2) as f32;
    assert!(
        bytes
            .chunks_exact(4)
            .all(|b| f32::from_ne_bytes(b.try_into().unwrap()) == want),
        "{kind} rank {rank}: not every element is {want}"
    );
}

#[test]
fn gpu_wait_event_holds_a_collective_until_the_producer_is_done() {
    const TEST: &str = "gpu_wait_event_holds_a_collective_until_the_producer_is_done";
    on_every_group(TEST, |kind, n, rank, comm, s| {
        let producer = Stream::new(comm.place())?;
        let count = 1 << 22; // 16 MiB of f32
        let buf = producer.alloc(count * 4)?;
        let mine = rank_contribution(rank, count);
        producer.copy_from_host(&buf, 0, &mine)?;
        let done = Event::new(comm.place(), EventFlags::default())?;
        producer.record(&done)?;
        s.wait_event(&done)?;
        s.all_reduce(&comm, &buf, &buf, count, DataType::F32, ReduceOp::Sum)?;
        let after = s.record_event()?;
        after.synchronize()?;
        let got = download(&s, &buf)?;
        assert_every_element_is_the_sum(&got, n, kind, rank);
        Ok(())
    });
}

#[test]
fn gpu_captured_all_reduce_runs_again_with_the_peers_on_every_launch() {
    const TEST: &str = "gpu_captured_all_reduce_runs_again_with_the_peers_on_every_launch";
    on_every_group(TEST, |kind, _, _, comm, s| {
        let buf = s.alloc(COUNT * 4)?;
        let out = s.alloc(COUNT * 4)?;
        // One eager all-reduce first: NCCL connects a communicator's peers on its first
        // collective (`NCCL_RUNTIME_CONNECT`), and that setup (peer access, its own streams)
        // is refused inside a capture (NCCL: "failed to peer with device 0: operation not
        // permitted when stream is capturing"). PyTorch asks for the same warm-up before
        // capturing collectives.
        s.all_reduce(&comm, &buf, &out, COUNT, DataType::I32, ReduceOp::Sum)?;
        s.synchronize()?;
        s.begin_capture(CaptureMode::ThreadLocal)?;
        s.all_reduce(&comm, &buf, &out, COUNT, DataType::I32, ReduceOp::Sum)?;
        let graph = s.end_capture()?;
        launch_and_check(&comm, &s, &graph, [&buf, &out], COUNT, kind)?;
        // Every handle but the graph's gone: a launch still works (the graph owns them).
        let out_check = s.alloc(COUNT * 4)?;
        s.copy_device_to_device(&out_check, 0, &out, 0, COUNT * 4)?;
        drop((buf, out, comm));
        graph.launch(&s)?;
        s.synchronize()?;
        drop(out_check);
        Ok(())
    });
}

#[test]
fn gpu_buffers_and_communicator_dropped_while_queued_stay_alive_until_done() {
    const TEST: &str = "gpu_buffers_and_communicator_dropped_while_queued_stay_alive_until_done";
    on_every_group(TEST, |kind, n, rank, comm, s| {
        let count = 1 << 24; // 64 MiB of f32
        let mine = rank_contribution(rank, count);
        let send = upload(&s, &mine)?;
        let recv = s.alloc(count * 4)?;
        s.all_reduce(&comm, &send, &recv, count, DataType::F32, ReduceOp::Sum)?;
        let host = s.alloc_host(count * 4)?;
        s.copy_device_to_host(&host, 0, &recv, 0, count * 4)?;
        drop(send);
        drop(recv);
        drop(comm);
        // Other allocations meanwhile must not get the memory still in use.
        let other = s.alloc(count * 4)?;
        s.fill(&other, 0, count * 4, 0xff)?;
        s.synchronize()?;
        assert_every_element_is_the_sum(&host.to_vec()?, n, kind, rank);
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Bad input and places without collectives

#[test]
fn gpu_bad_input_is_refused_before_anything_is_queued() {
    let _gpu = gpu_lock();
    for (kind, places) in gpu_groups("gpu_bad_input_is_refused_before_anything_is_queued") {
        let all = places.clone();
        let n = places.len();
        on_ranks_at(&places, move |comm, s| {
            let rank = comm.rank();
            let (t, op) = (DataType::F32, ReduceOp::Sum);
            let buf = s.alloc(COUNT * 4)?;
            let small = s.alloc(COUNT * 4 - 1)?;
            let invalid = |r: Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
            assert!(invalid(s.all_reduce(&comm, &small, &buf, COUNT, t, op)));
            assert!(invalid(s.all_reduce(&comm, &buf, &small, COUNT, t, op)));
            assert!(invalid(s.broadcast(&comm, &buf, &buf, COUNT, t, n)));
            assert!(invalid(s.reduce(&comm, &buf, &buf, COUNT, t, op, n)));
            assert!(invalid(s.send(&comm, &buf, COUNT, t, n)));
            assert!(invalid(s.recv(&comm, &buf, COUNT, t, n)));
            // With one rank, a gather's output of `count` elements is the right size, and there
            // is no other device: those checks need two ranks.
            if n > 1 {
                assert!(invalid(s.all_gather(&comm, &buf, &buf, COUNT, t)));
                assert!(invalid(s.reduce_scatter(&comm, &buf, &buf, COUNT, t, op)));
                // A stream and a buffer of another device.
                let other = &all[(rank + 1) % n];
                let foreign = Stream::new(other)?;
                let far = foreign.alloc(COUNT * 4)?;
                let mismatch = |r: Result<()>| matches!(r, Err(Error::PlaceMismatch { .. }));
                assert!(mismatch(
                    foreign.all_reduce(&comm, &far, &far, COUNT, t, op)
                ));
                assert!(mismatch(s.all_reduce(&comm, &far, &buf, COUNT, t, op)));
            }
            // Nothing was queued: a good call still pairs up with the peers.
            s.copy_from_host(&buf, 0, &encode(t, &contribution(rank, COUNT)))?;
            s.all_reduce(&comm, &buf, &buf, COUNT, t, op)?;
            assert_reduced(
                assert_near,
                t,
                op,
                0..n,
                &decode(t, &download(&s, &buf)?),
                0,
                &format!("{kind} after bad input"),
            );
            Ok(())
        });
    }
}

/// Without the library or the GPU (CI), `UniqueId::new` and `Communicator::init` on `cuda:0` and
/// `hip:0` are typed errors, never a panic; with both, `capabilities().collectives` is true.
#[test]
fn gpu_places_without_collectives_answer_typed_errors() {
    for place in [Place::Cuda(0), "hip:0".parse().unwrap()] {
        let collectives = devstream::capabilities(&place).is_ok_and(|c| c.collectives);
        let id = UniqueId::new(&place);
        if collectives {
            assert!(id.is_ok(), "{place} has collectives: {id:?}");
            continue;
        }
        let typed = |e: &Error| {
            matches!(
                e,
                Error::BackendUnavailable { .. }
                    | Error::BackendNotCompiled { .. }
                    | Error::NoDevice { .. }
                    | Error::Unsupported { .. }
            )
        };
        assert!(id.as_ref().is_err_and(typed), "{place}: {id:?}");
        let cpu_id = UniqueId::new(&Place::Cpu).unwrap();
        let comm = Communicator::init(&place, 0, 1, &cpu_id);
        assert!(comm.as_ref().is_err_and(typed), "{place}: {comm:?}");
        eprintln!("{place}: {}", id.unwrap_err());
    }
}

// ---------------------------------------------------------------------------------------------
// Ranks as processes: the test binary re-runs itself, one child per GPU.

const CHILD_ROLE: &str = "DEVSTREAM_COMM_GPU_TEST_ROLE";

/// Starts rank `rank` of `nranks` on `place` as a child running `test`.
fn spawn_rank(
    test: &str,
    place: &Place,
    rank: usize,
    nranks: usize,
    id: &UniqueId,
) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(
            CHILD_ROLE,
            format!("{place} {rank} {nranks} {}", hex(id.as_bytes())),
        )
        .env("NCCL_NVLS_ENABLE", "0")
        .spawn()
        .expect("start a rank process")
}

/// Runs `test` as one rank process per place of `places` (the rank is the place's index) and
/// fails unless every one passes within `limit`.
fn run_rank_processes(test: &str, places: &[Place], limit: Duration) {
    let id = UniqueId::new(&places[0]).unwrap();
    let children: Vec<_> = places
        .iter()
        .enumerate()
        .map(|(rank, place)| spawn_rank(test, place, rank, places.len(), &id))
        .collect();
    for child in children {
        assert!(wait_child(child, limit).success());
    }
}

/// `Some((place, rank, nranks, id))` in a child started by `spawn_rank`.
fn child_role() -> Option<(Place, usize, usize, UniqueId)> {
    let role = std::env::var(CHILD_ROLE).ok()?;
    let mut parts = role.split(' ');
    let place: Place = parts.next()?.parse().ok()?;
    let rank = parts.next()?.parse().ok()?;
    let nranks = parts.next()?.parse().ok()?;
    let id = UniqueId::from_bytes(&unhex(parts.next()?)).ok()?;
    Some((place, rank, nranks, id))
}

#[test]
fn gpu_ranks_as_processes_all_reduce_every_type() {
    const TEST: &str = "gpu_ranks_as_processes_all_reduce_every_type";
    if let Some((place, rank, nranks, id)) = child_role() {
        let comm = Communicator::init(&place, rank, nranks, &id).unwrap();
        let s = Stream::new(&place).unwrap();
        for dtype in DataType::ALL {
            for op in ReduceOp::ALL {
                let buf = upload(&s, &encode(dtype, &contribution(rank, COUNT))).unwrap();
                s.all_reduce(&comm, &buf, &buf, COUNT, dtype, op).unwrap();
                let got = decode(dtype, &download(&s, &buf).unwrap());
                assert_reduced(
                    assert_near,
                    dtype,
                    op,
                    0..nranks,
                    &got,
                    0,
                    &format!("process rank {rank} all_reduce {dtype} {op}"),
                );
            }
        }
        return;
    }
    let _gpu = gpu_lock();
    for (_, places) in gpu_groups(TEST) {
        run_rank_processes(TEST, &places, Duration::from_secs(180));
    }
}

/// A rank process that exits without taking part: the survivor's `synchronize` returns
/// `Error::Comm` (the peer's death through `ncclCommGetAsyncError`, or the deadline) instead of
/// hanging, and the communicator then answers `CommFailure::Aborted`.
#[test]
fn gpu_a_peer_that_dies_fails_the_survivor_by_the_deadline_instead_of_hanging() {
    const TEST: &str = "gpu_a_peer_that_dies_fails_the_survivor_by_the_deadline_instead_of_hanging";
    if let Some((place, rank, nranks, id)) = child_role() {
        let comm = Communicator::init(&place, rank, nranks, &id).unwrap();
        comm.set_timeout(Duration::from_secs(5));
        let s = Stream::new(&place).unwrap();
        let buf = s.alloc(COUNT * 4).unwrap();
        // One collective together (connections set up), then rank 1 dies.
        s.all_reduce(&comm, &buf, &buf, COUNT, DataType::F32, ReduceOp::Sum)
            .unwrap();
        s.synchronize().unwrap();
        if rank == 1 {
            std::process::exit(0);
        }
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        // The failure surfaces from the call (the library saw the death) or from synchronize.
        let outcome = s
            .all_reduce(&comm, &buf, &buf, COUNT, DataType::F32, ReduceOp::Sum)
            .and_then(|()| s.synchronize());
        let took = started.elapsed();
        // (A watchdog that kept the failure only after aborting released the survivor's
        // `synchronize` first, which then returned `Ok` at the deadline.)
        let e = outcome.expect_err(&format!(
            "the survivor's all-reduce and synchronize succeeded after {took:?} without its peer"
        ));
        eprintln!("survivor: {e} after {took:?}");
        assert!(
            matches!(
                comm_failure(&e),
                Some(CommFailure::Timeout | CommFailure::PeerDied | CommFailure::Transport)
            ),
            "{e}"
        );
        assert!(took < Duration::from_secs(30), "took {took:?}");
        let again = s.all_reduce(&comm, &buf, &buf, COUNT, DataType::F32, ReduceOp::Sum);
        assert_eq!(
            again.as_ref().err().and_then(comm_failure),
            Some(CommFailure::Aborted),
            "{again:?}"
        );
        s.synchronize().unwrap();
        return;
    }
    let _gpu = gpu_lock();
    // Needs a second rank to die, whatever DEVSTREAM_COMM_MIN_RANKS says.
    for (_, places) in gpu_groups_of_at_least(TEST, 2) {
        run_rank_processes(TEST, &places[..2], Duration::from_secs(120));
    }
}

/// `init` of rank 0 of 2 when rank 1 never comes: a typed `Timeout` by the deadline
/// (`DEVSTREAM_COMM_TIMEOUT_SECS`, 3 s in the child process that tries), never a hang. Needs one
/// device with collectives.
#[test]
fn gpu_init_without_the_other_ranks_times_out_instead_of_hanging() {
    const TEST: &str = "gpu_init_without_the_other_ranks_times_out_instead_of_hanging";
    if let Some((place, rank, nranks, id)) = child_role() {
        let started = Instant::now();
        match Communicator::init(&place, rank, nranks, &id) {
            Err(error) => assert_eq!(
                comm_failure(&error),
                Some(CommFailure::Timeout),
                "init without its peer: {error}"
            ),
            Ok(_) => panic!("init of rank {rank} of {nranks} succeeded alone"),
        }
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(3) && took < Duration::from_secs(60),
            "init gave up after {took:?}, the deadline is 3 s"
        );
        return;
    }
    let _gpu = gpu_lock();
    for kind in ["cuda", "hip"] {
        let Some(place) = places_with_collectives(kind).into_iter().next() else {
            assert!(
                !required(kind),
                "{TEST}: DEVSTREAM_REQUIRE lists {kind}, but no {kind} device has collectives"
            );
            eprintln!("{TEST}: skipped on {kind}: no device with collectives");
            continue;
        };
        let id = UniqueId::new(&place).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ROLE, format!("{place} 0 2 {}", hex(id.as_bytes())))
            .env("NCCL_NVLS_ENABLE", "0")
            .env("DEVSTREAM_COMM_TIMEOUT_SECS", "3");
        let status = wait_child(
            child.spawn().expect("start the rank"),
            Duration::from_secs(120),
        );
        assert!(status.success(), "the lone rank on {place}: {status}");
    }
}
