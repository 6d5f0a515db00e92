//! The values each rank contributes and the scalar model of every reduction, shared by the
//! collectives tests (`comm.rs` on the CPU engine, `comm_gpu.rs` on NCCL/RCCL), and their
//! harness: ranks as threads, buffers up and down.
#![allow(dead_code)]

use devstream::{
    CommFailure, Communicator, DataType, DeviceBuffer, Error, Graph, Place, ReduceOp, Result,
    Stream, UniqueId,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The value rank `r` contributes at element `i`: 1, 2 or 3 (exact in every type).
pub fn value(rank: usize, i: usize) -> i64 {
    1 + ((rank + 2 * i) % 3) as i64
}

/// binary16 bits of a small non-negative integer (≤ 2048, exact).
pub fn f16_of_int(k: i64) -> u16 {
    if k == 0 {
        return 0;
    }
    let e = 63 - (k as u64).leading_zeros() as i64;
    let mantissa = ((k << (10 - e)) & 0x3ff) as u16;
    (((e + 15) as u16) << 10) | mantissa
}

pub fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let man = f64::from(h & 0x3ff);
    sign * match exp {
        0 => man * 2f64.powi(-24),
        31 if man == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
    }
}

pub fn encode(dtype: DataType, values: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &v in values {
        match dtype {
            DataType::F32 => out.extend((v as f32).to_ne_bytes()),
            DataType::F64 => out.extend((v as f64).to_ne_bytes()),
            DataType::F16 => out.extend(f16_of_int(v).to_ne_bytes()),
            DataType::BF16 => out.extend((((v as f32).to_bits() >> 16) as u16).to_ne_bytes()),
            DataType::I32 => out.extend((v as i32).to_ne_bytes()),
            DataType::I64 => out.extend(v.to_ne_bytes()),
            DataType::U8 => out.push(v as u8),
            _ => unreachable!(),
        }
    }
    out
}

pub fn decode(dtype: DataType, bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(dtype.size())
        .map(|b| match dtype {
            DataType::F32 => f64::from(f32::from_ne_bytes(b.try_into().unwrap())),
            DataType::F64 => f64::from_ne_bytes(b.try_into().unwrap()),
            DataType::F16 => f16_to_f64(u16::from_ne_bytes(b.try_into().unwrap())),
            DataType::BF16 => f64::from(f32::from_bits(
                u32::from(u16::from_ne_bytes(b.try_into().unwrap())) << 16,
            )),
            DataType::I32 => f64::from(i32::from_ne_bytes(b.try_into().unwrap())),
            DataType::I64 => i64::from_ne_bytes(b.try_into().unwrap()) as f64,
            DataType::U8 => f64::from(b[0]),
            _ => unreachable!(),
        })
        .collect()
}

/// The scalar model: the reduction of `values` (rank order) as the element type computes it.
pub fn model(dtype: DataType, op: ReduceOp, values: &[i64]) -> f64 {
    let n = values.len();
    if dtype.is_float() {
        let mut acc = values[0] as f64;
        for &v in &values[1..] {
            let v = v as f64;
            acc = match op {
                ReduceOp::Prod => acc * v,
                ReduceOp::Min => acc.min(v),
                ReduceOp::Max => acc.max(v),
                _ => acc + v,
            };
        }
        if op == ReduceOp::Avg {
            acc /= n as f64;
        }
        return acc;
    }
    // Integers: wrap in the element type (the sum for Avg too), then divide truncating.
    let wrap = |v: i64| match dtype {
        DataType::I32 => i64::from(v as i32),
        DataType::U8 => i64::from(v as u8),
        _ => v,
    };
    let mut acc = values[0];
    for &v in &values[1..] {
        acc = wrap(match op {
            ReduceOp::Prod => acc.wrapping_mul(v),
            ReduceOp::Min => acc.min(v),
            ReduceOp::Max => acc.max(v),
            _ => acc.wrapping_add(v),
        });
    }
    if op == ReduceOp::Avg {
        acc = wrap(acc) / n as i64;
    }
    wrap(acc) as f64
}

pub fn assert_close(dtype: DataType, got: f64, want: f64, what: &str) {
    let tolerance = match dtype {
        DataType::F16 | DataType::BF16 => 1e-2 * want.abs().max(1.0),
        DataType::F32 => 1e-6 * want.abs().max(1.0),
        _ => 0.0,
    };
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, the model says {want}"
    );
}

/// Like [`assert_close`], for libraries that combine in their own order and compute `Avg` as a
/// sum of pre-scaled values (NCCL's `ncclAvg`): floats within a few units in the last place.
pub fn assert_near(dtype: DataType, got: f64, want: f64, what: &str) {
    let tolerance = match dtype {
        DataType::F16 | DataType::BF16 => 1e-2 * want.abs().max(1.0),
        DataType::F32 => 1e-6 * want.abs().max(1.0),
        DataType::F64 => 1e-12 * want.abs().max(1.0),
        _ => 0.0,
    };
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, the model says {want}"
    );
}

/// How a backend's reductions are compared with the model: [`assert_close`] (the CPU engine
/// and the test plug-in) or [`assert_near`] (NCCL/RCCL).
pub type Check = fn(DataType, f64, f64, &str);

/// Asserts that each element `i` of `got` is `op` over the model values of `ranks` at element
/// `first + i` (by `check`), naming it `{what} [{i}]`.
pub fn assert_reduced(
    check: Check,
    dtype: DataType,
    op: ReduceOp,
    ranks: std::ops::Range<usize>,
    got: &[f64],
    first: usize,
    what: &str,
) {
    for (i, g) in got.iter().enumerate() {
        let column: Vec<i64> = ranks.clone().map(|r| value(r, first + i)).collect();
        check(
            dtype,
            *g,
            model(dtype, op, &column),
            &format!("{what} [{i}]"),
        );
    }
}

/// Uploads this rank's contribution of `count` elements, all-reduces it (in place, or into a
/// buffer of its own) and checks the result against the model (by `check`).
pub fn all_reduce_and_check(
    check: Check,
    comm: &Communicator,
    s: &Stream,
    dtype: DataType,
    op: ReduceOp,
    count: usize,
    in_place: bool,
) -> Result<()> {
    let (place, rank, n) = (comm.place(), comm.rank(), comm.nranks());
    let what = format!(
        "{place} all_reduce {dtype} {op} count={count} in_place={in_place} rank {rank} of {n}"
    );
    let send = upload(s, &encode(dtype, &contribution(comm.rank(), count)))?;
    let recv = if in_place {
        None
    } else {
        Some(s.alloc(count * dtype.size())?)
    };
    let target = recv.as_ref().unwrap_or(&send);
    s.all_reduce(comm, &send, target, count, dtype, op)?;
    let got = decode(dtype, &download(s, target)?);
    assert_eq!(got.len(), count, "{what}");
    assert_reduced(check, dtype, op, 0..n, &got, 0, &what);
    Ok(())
}

/// Launches `graph`, a captured all-reduce (`I32` sum of `count` elements from `buf` into
/// `out`), four times, with this rank's contribution times the round in `buf`, and checks
/// `out` after each launch.
pub fn launch_and_check(
    comm: &Communicator,
    s: &Stream,
    graph: &Graph,
    [buf, out]: [&DeviceBuffer; 2],
    count: usize,
    what: &str,
) -> Result<()> {
    let (rank, n) = (comm.rank(), comm.nranks());
    for round in 0..4i64 {
        let mine: Vec<i64> = contribution(rank, count)
            .iter()
            .map(|v| v * (round + 1))
            .collect();
        s.copy_from_host(buf, 0, &encode(DataType::I32, &mine))?;
        graph.launch(s)?;
        let got = decode(DataType::I32, &download(s, out)?);
        for (i, g) in got.iter().enumerate() {
            let sum: i64 = (0..n).map(|r| value(r, i) * (round + 1)).sum();
            assert_eq!(*g, sum as f64, "{what} launch {round} rank {rank} [{i}]");
        }
    }
    Ok(())
}

/// Uploads this rank's contribution (`count` `F32` elements); rank 1 then opens a group, puts an
/// all-reduce of it in the group and drops its communicator with the group still open (`None`),
/// every other rank gets its communicator and the buffer back.
pub fn rank_1_leaves_in_an_open_group(
    comm: Communicator,
    s: &Stream,
    count: usize,
) -> Result<Option<(Communicator, DeviceBuffer)>> {
    let buf = upload(s, &encode(DataType::F32, &contribution(comm.rank(), count)))?;
    s.synchronize()?;
    if comm.rank() == 1 {
        comm.group_start()?;
        s.all_reduce(&comm, &buf, &buf, count, DataType::F32, ReduceOp::Sum)?;
        drop(comm); // never closed
        return Ok(None);
    }
    Ok(Some((comm, buf)))
}

/// Runs `body(comm, stream)` with rank `r` on `places[r]`, one thread each, and returns their
/// results; fails the test naming every rank that returned an error.
pub fn on_ranks_at<T: Send + 'static>(
    places: &[Place],
    body: impl Fn(Communicator, Stream) -> Result<T> + Send + Sync + 'static,
) -> Vec<T> {
    let n = places.len();
    let id = UniqueId::new(&places[0]).expect("a unique id");
    let body = Arc::new(body);
    let threads: Vec<_> = places
        .iter()
        .cloned()
        .enumerate()
        .map(|(rank, place)| {
            let body = body.clone();
            std::thread::spawn(move || -> Result<T> {
                let comm = Communicator::init(&place, rank, n, &id)?;
                let stream = Stream::new(&place)?;
                body(comm, stream)
            })
        })
        .collect();
    let results: Vec<Result<T>> = threads
        .into_iter()
        .map(|t| t.join().expect("rank thread panicked"))
        .collect();
    let failures: Vec<String> = results
        .iter()
        .enumerate()
        .filter_map(|(rank, r)| r.as_ref().err().map(|e| format!("rank {rank}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    results.into_iter().map(|r| r.ok().unwrap()).collect()
}

/// A device buffer of `s`'s place holding `bytes`.
pub fn upload(s: &Stream, bytes: &[u8]) -> Result<DeviceBuffer> {
    let buf = s.alloc(bytes.len())?;
    s.copy_from_host(&buf, 0, bytes)?;
    Ok(buf)
}

/// The bytes of `buf`, after `s`'s work.
pub fn download(s: &Stream, buf: &DeviceBuffer) -> Result<Vec<u8>> {
    let host = s.alloc_host(buf.len().max(1))?;
    s.copy_device_to_host(&host, 0, buf, 0, buf.len())?;
    s.synchronize()?;
    let mut bytes = host.to_vec()?;
    bytes.truncate(buf.len());
    Ok(bytes)
}

/// What rank `rank` contributes: `count` model values.
pub fn contribution(rank: usize, count: usize) -> Vec<i64> {
    (0..count).map(|i| value(rank, i)).collect()
}

/// What rank `rank` of `n` receives from an `all_to_all` of `count` elements a peer: block `r`
/// is the part of rank `r`'s contribution (`n * count` elements) addressed to `rank`.
pub fn all_to_all_received(dtype: DataType, n: usize, rank: usize, count: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|r| {
            let block: Vec<i64> = (0..count).map(|j| value(r, rank * count + j)).collect();
            encode(dtype, &block)
        })
        .collect()
}

/// The failure kind of an `Error::Comm`.
pub fn comm_failure(e: &Error) -> Option<CommFailure> {
    match e {
        Error::Comm { failure, .. } => Some(*failure),
        _ => None,
    }
}

/// Asserts that `e` is an `Error::Comm` of one of the `expected` failure kinds.
pub fn assert_failure(e: &Error, expected: &[CommFailure]) {
    assert!(
        comm_failure(e).is_some_and(|failure| expected.contains(&failure)),
        "{e}, expected one of {expected:?}"
    );
}

/// `bytes` as lowercase hex (a unique id handed to a rank process in its environment).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of `text`, written by [`hex`].
pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Waits for a rank process to exit; kills it and fails the test when it has not within `limit`
/// (a hang detector).
pub fn wait_child(mut child: std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a rank process hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
