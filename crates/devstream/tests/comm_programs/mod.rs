//! The collectives model test: random programs of collectives (every op, type, reduction,
//! root, in place or not, messages between random pairs of ranks), with and without groups,
//! on 2 to 8 CPU ranks as threads of this process (the in-process all-reduce) and as processes
//! (the payload files), checked against a scalar model:
//!
//! - a program the ranks agree on gives the model's result, bit for bit, on every rank and on
//!   both paths (each rank compares with the model, and the processes' digests are compared
//!   with the threads');
//! - a program with one field of one rank's collective changed (kind, reduction, type, root,
//!   count) fails with `Mismatch` on every rank, and no receive buffer of that step or a later
//!   one is written on any rank; the steps before it give the model's result; a changed
//!   message (type, count) fails its receiver with `Mismatch` and leaves its buffer unwritten;
//! - a rank that drops its communicator at a random point (inside a group too) makes every
//!   other rank that waits for it fail with `PeerLeft`, never `Timeout` (the deadline is a
//!   minute here), and the steps before give the model's result.
//!
//! Programs come from a seed (printed with every failure: `DEVSTREAM_COMM_PROGRAM_SEED=<seed>`
//! reruns that one program on both paths, printing it and each rank's error);
//! `DEVSTREAM_COMM_PROGRAMS=<n>` sets how many run on each path (default 300) and
//! `DEVSTREAM_COMM_PROGRAM_BASE=<seed>` the first seed, for longer runs.

use super::comm_model::{comm_failure, upload};
use super::{hex, unhex, wait_child, CPU};
use devstream::{CommFailure, Communicator, DataType, DeviceBuffer, Error, ReduceOp, Stream};
use devstream::{Result, UniqueId};
use devstream_core::reduce::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod rank;
use rank::{check, run_rank, Outcome};

/// A rank process's role: `rank,nranks,batch file,output file`.
const CHILD: &str = "DEVSTREAM_COMM_PROGRAMS_CHILD";
const TEST: &str = "comm_programs::random_programs_of_collectives_agree_with_the_model";

/// Every byte of a receive buffer before its call: what "unwritten" means.
const SENTINEL: u8 = 0xA5;
/// Elements in every buffer: room for `count * nranks` and a count changed by one.
const ELEMENTS: usize = 80;

// ---------------------------------------------------------------------------------------------
// Random programs

/// SplitMix64.
#[derive(Clone)]
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    AllReduce,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllToAll,
}

const KINDS: [Kind; 6] = [
    Kind::AllReduce,
    Kind::Broadcast,
    Kind::Reduce,
    Kind::AllGather,
    Kind::ReduceScatter,
    Kind::AllToAll,
];

/// One rank's collective call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Coll {
    kind: Kind,
    dtype: DataType,
    op: ReduceOp,
    root: usize,
    count: usize,
}

/// A call of a program, as every rank makes it.
#[derive(Clone, Debug)]
enum Call {
    /// A collective; `in_place[r]`: rank `r` passes one buffer as both.
    Coll { call: Coll, in_place: Vec<bool> },
    /// `src` sends `count` elements to `dst`, which receives them.
    Msg {
        src: usize,
        dst: usize,
        count: usize,
        dtype: DataType,
    },
}

/// A call outside a group (a collective, or messages: each rank's sends first), or a group.
#[derive(Clone, Debug)]
struct Unit {
    grouped: bool,
    calls: Vec<Call>,
}

/// One field of one rank's call changed.
#[derive(Clone, Copy, Debug)]
struct Change {
    unit: usize,
    call: usize,
    /// The rank whose call differs (a message: its sender or its receiver).
    rank: usize,
    field: Field,
}

#[derive(Clone, Copy, Debug)]
enum Field {
    Kind(Kind),
    Op(ReduceOp),
    Dtype(DataType),
    Root(usize),
    Count(usize),
}

/// Where a rank drops its communicator: before unit `unit`, or inside it (a group) after
/// `after` of its calls (all of them, where it makes fewer).
#[derive(Clone, Copy, Debug)]
struct Leave {
    rank: usize,
    unit: usize,
    after: Option<usize>,
    /// Whether it synchronizes its stream first.
    synchronized: bool,
}

#[derive(Clone, Debug)]
struct Program {
    seed: u64,
    nranks: usize,
    units: Vec<Unit>,
    change: Option<Change>,
    leave: Option<Leave>,
}

fn dtypes() -> [DataType; 7] {
    DataType::ALL
}

fn random_coll(g: &mut Gen, n: usize) -> Call {
    let count = if g.chance(10) { 0 } else { 1 + g.below(9) };
    let call = Coll {
        kind: g.pick(&KINDS),
        dtype: g.pick(&dtypes()),
        op: g.pick(&ReduceOp::ALL),
        root: g.below(n),
        count,
    };
    let in_place = (0..n).map(|_| g.chance(40)).collect();
    Call::Coll { call, in_place }
}

fn random_msgs(g: &mut Gen, n: usize) -> Vec<Call> {
    (0..1 + g.below(n))
        .map(|_| {
            let src = g.below(n);
            let dst = (src + 1 + g.below(n - 1)) % n;
            Call::Msg {
                src,
                dst,
                count: if g.chance(10) { 0 } else { 1 + g.below(9) },
                dtype: g.pick(&dtypes()),
            }
        })
        .collect()
}

impl Program {
    fn new(seed: u64, nranks: usize) -> Program {
        let mut g = Gen(seed);
        let n = nranks;
        let units: Vec<Unit> = (0..1 + g.below(6))
            .map(|_| match g.below(10) {
                0..=4 => Unit {
                    grouped: false,
                    calls: vec![random_coll(&mut g, n)],
                },
                5..=7 => {
                    let mut calls: Vec<Call> = (0..1 + g.below(4))
                        .map(|_| random_coll(&mut g, n))
                        .collect();
                    if g.chance(40) {
                        calls.extend(random_msgs(&mut g, n));
                    }
                    Unit {
                        grouped: true,
                        calls,
                    }
                }
                _ => Unit {
                    grouped: g.chance(50),
                    calls: random_msgs(&mut g, n),
                },
            })
            .collect();
        let mut program = Program {
            seed,
            nranks,
            units,
            change: None,
            leave: None,
        };
        match g.below(100) {
            0..=24 => program.change = program.random_change(&mut g),
            25..=39 => program.leave = Some(program.random_leave(&mut g)),
            _ => {}
        }
        program
    }

    fn random_change(&self, g: &mut Gen) -> Option<Change> {
        let unit = g.below(self.units.len());
        let call = g.below(self.units[unit].calls.len());
        let (rank, field) = match &self.units[unit].calls[call] {
            Call::Coll { call: c, .. } => {
                let rank = g.below(self.nranks);
                let field = loop {
                    let field = match g.below(5) {
                        0 => Field::Kind(g.pick(&KINDS)),
                        1 => Field::Op(g.pick(&ReduceOp::ALL)),
                        2 => Field::Dtype(g.pick(&dtypes())),
                        3 => Field::Root(g.below(self.nranks)),
                        _ => Field::Count(if c.count == 0 || g.chance(50) {
                            c.count + 1
                        } else {
                            c.count - 1
                        }),
                    };
                    // A field the call has, set to another value.
                    let changed = apply(*c, field);
                    if descriptor(changed) != descriptor(*c) {
                        break field;
                    }
                };
                (rank, field)
            }
            Call::Msg {
                src, dst, count, ..
            } => {
                let rank = if g.chance(50) { *src } else { *dst };
                let field = if g.chance(50) {
                    Field::Count(count + 1)
                } else {
                    let mut dtype = g.pick(&dtypes());
                    while let Call::Msg { dtype: d, .. } = &self.units[unit].calls[call] {
                        if dtype != *d {
                            break;
                        }
                        dtype = g.pick(&dtypes());
                    }
                    Field::Dtype(dtype)
                };
                (rank, field)
            }
        };
        Some(Change {
            unit,
            call,
            rank,
            field,
        })
    }

    fn random_leave(&self, g: &mut Gen) -> Leave {
        let unit = g.below(self.units.len());
        let rank = g.below(self.nranks);
        let inside = self.units[unit].grouped && g.chance(50);
        Leave {
            rank,
            unit,
            after: inside.then(|| g.below(self.units[unit].calls.len() + 1)),
            synchronized: g.chance(50),
        }
    }

    /// Rank `rank`'s view of collective `call` of unit `unit` (with the change applied).
    fn coll_of(&self, unit: usize, call: usize, rank: usize, c: Coll) -> Coll {
        match self.change {
            Some(ch) if ch.unit == unit && ch.call == call && ch.rank == rank => apply(c, ch.field),
            _ => c,
        }
    }

    /// `(count, dtype)` of message `call` of unit `unit` as rank `rank` makes its side.
    fn msg_of(
        &self,
        unit: usize,
        call: usize,
        rank: usize,
        count: usize,
        dtype: DataType,
    ) -> (usize, DataType) {
        match self.change {
            Some(ch) if ch.unit == unit && ch.call == call && ch.rank == rank => match ch.field {
                Field::Count(c) => (c, dtype),
                Field::Dtype(d) => (count, d),
                _ => (count, dtype),
            },
            _ => (count, dtype),
        }
    }

    /// Whether the change is of a collective (every rank fails) rather than of a message.
    fn changed_collective(&self) -> Option<usize> {
        let ch = self.change?;
        matches!(self.units[ch.unit].calls[ch.call], Call::Coll { .. }).then_some(ch.unit)
    }
}

fn apply(mut c: Coll, field: Field) -> Coll {
    match field {
        Field::Kind(kind) => c.kind = kind,
        Field::Op(op) => c.op = op,
        Field::Dtype(dtype) => c.dtype = dtype,
        Field::Root(root) => c.root = root,
        Field::Count(count) => c.count = count,
    }
    c
}

/// What the engines compare: the reduction only where the kind has one, the root only where
/// it has one.
fn descriptor(c: Coll) -> (Kind, Option<ReduceOp>, DataType, Option<usize>, usize) {
    let op = matches!(c.kind, Kind::AllReduce | Kind::Reduce | Kind::ReduceScatter).then_some(c.op);
    let root = matches!(c.kind, Kind::Broadcast | Kind::Reduce).then_some(c.root);
    (c.kind, op, c.dtype, root, c.count)
}

// ---------------------------------------------------------------------------------------------
// Inputs and the scalar model

/// Element `i` of what rank `rank` sends in call `call` of unit `unit` (with type `dtype`; the
/// reduction shapes the values so that products and sums stay finite).
fn input(
    p: &Program,
    unit: usize,
    call: usize,
    rank: usize,
    i: usize,
    dtype: DataType,
    op: ReduceOp,
) -> Vec<u8> {
    let mut h = DefaultHasher::new();
    (p.seed, unit, call, rank, i).hash(&mut h);
    let mut g = Gen(h.finish());
    let k = g.below(33) as f64 - 16.0; // -16..=16
    let small = k / 8.0;
    let big = matches!(
        op,
        ReduceOp::Sum | ReduceOp::Avg | ReduceOp::Min | ReduceOp::Max
    ) && g.chance(25);
    let float = if big { k * 2f64.powi(40) } else { small };
    let bits = g.next();
    match dtype {
        DataType::F32 => (float as f32).to_ne_bytes().to_vec(),
        DataType::F64 => float.to_ne_bytes().to_vec(),
        DataType::F16 => f32_to_f16(small as f32).to_ne_bytes().to_vec(),
        DataType::BF16 => f32_to_bf16(small as f32).to_ne_bytes().to_vec(),
        DataType::I32 => (bits as u32).to_ne_bytes().to_vec(),
        DataType::I64 => bits.to_ne_bytes().to_vec(),
        _ => vec![bits as u8],
    }
}

/// The reduction of `values` (one element per rank, rank order) as the element type computes
/// it: floats in rank order (`F16`/`BF16` in `f32`, rounded once), integers wrapping, integer
/// `Avg` truncating.
fn fold(dtype: DataType, op: ReduceOp, values: &[Vec<u8>]) -> Vec<u8> {
    let n = values.len();
    macro_rules! float {
        ($t:ty, $dec:expr, $enc:expr) => {{
            let mut acc: $t = $dec(&values[0]);
            for v in &values[1..] {
                let v: $t = $dec(v);
                acc = match op {
                    ReduceOp::Prod => acc * v,
                    ReduceOp::Min if v < acc => v,
                    ReduceOp::Max if v > acc => v,
                    ReduceOp::Min | ReduceOp::Max => acc,
                    _ => acc + v,
                };
            }
            if op == ReduceOp::Avg {
                acc /= n as $t;
            }
            $enc(acc)
        }};
    }
    macro_rules! int {
        ($t:ty) => {{
            let dec = |b: &Vec<u8>| <$t>::from_ne_bytes(b[..].try_into().unwrap());
            let mut acc = dec(&values[0]);
            for v in &values[1..] {
                let v = dec(v);
                acc = match op {
                    ReduceOp::Prod => acc.wrapping_mul(v),
                    ReduceOp::Min => acc.min(v),
                    ReduceOp::Max => acc.max(v),
                    _ => acc.wrapping_add(v),
                };
            }
            if op == ReduceOp::Avg {
                acc = acc.wrapping_div(n as $t);
            }
            acc.to_ne_bytes().to_vec()
        }};
    }
    let two = |b: &Vec<u8>| u16::from_ne_bytes([b[0], b[1]]);
    match dtype {
        DataType::F32 => float!(
            f32,
            |b: &Vec<u8>| f32::from_ne_bytes(b[..].try_into().unwrap()),
            |a: f32| a.to_ne_bytes().to_vec()
        ),
        DataType::F64 => float!(
            f64,
            |b: &Vec<u8>| f64::from_ne_bytes(b[..].try_into().unwrap()),
            |a: f64| a.to_ne_bytes().to_vec()
        ),
        DataType::F16 => float!(f32, |b: &Vec<u8>| f16_to_f32(two(b)), |a: f32| f32_to_f16(
            a
        )
        .to_ne_bytes()
        .to_vec()),
        DataType::BF16 => float!(f32, |b: &Vec<u8>| bf16_to_f32(two(b)), |a: f32| {
            f32_to_bf16(a).to_ne_bytes().to_vec()
        }),
        DataType::I32 => int!(i32),
        DataType::I64 => int!(i64),
        _ => int!(u8),
    }
}

/// The buffers of one rank's call: their contents before it, and after it by the model.
struct Buffers {
    /// What the call's receive buffer holds before the call (the send data where in place).
    before: Vec<u8>,
    /// The send buffer's contents, where separate.
    send: Option<Vec<u8>>,
    /// What the receive buffer holds after an agreed call.
    after: Vec<u8>,
    /// Byte ranges of the receive buffer the model leaves unspecified (an in-place
    /// reduce-scatter's blocks past the result).
    unspecified: Option<std::ops::Range<usize>>,
}

/// Rank `rank`'s buffers for collective `call` of unit `unit` (the program as agreed).
fn coll_buffers(
    p: &Program,
    unit: usize,
    call: usize,
    rank: usize,
    c: Coll,
    in_place: bool,
) -> Buffers {
    let n = p.nranks;
    let size = c.dtype.size();
    let len = ELEMENTS * 8;
    let inputs = |r: usize, from: usize, elems: usize| -> Vec<u8> {
        (from..from + elems)
            .flat_map(|i| input(p, unit, call, r, i, c.dtype, c.op))
            .collect()
    };
    let send_elems = match c.kind {
        Kind::ReduceScatter | Kind::AllToAll => c.count * n,
        _ => c.count,
    };
    let mut send = inputs(rank, 0, send_elems);
    send.resize(len, SENTINEL);
    let before = if in_place {
        if c.kind == Kind::AllGather {
            // NCCL's in-place layout: this rank's part at recv[rank * count..].
            let mut b = vec![SENTINEL; len];
            let at = rank * c.count * size;
            b[at..at + c.count * size].copy_from_slice(&inputs(rank, 0, c.count));
            b
        } else {
            send.clone()
        }
    } else {
        vec![SENTINEL; len]
    };
    let mut after = before.clone();
    let mut unspecified = None;
    let folded = |from: usize| -> Vec<u8> {
        (0..c.count)
            .flat_map(|j| {
                let column: Vec<Vec<u8>> = (0..n)
                    .map(|r| input(p, unit, call, r, from + j, c.dtype, c.op))
                    .collect();
                fold(c.dtype, c.op, &column)
            })
            .collect()
    };
    let bytes = c.count * size;
    match c.kind {
        Kind::AllReduce => after[..bytes].copy_from_slice(&folded(0)),
        Kind::Broadcast => after[..bytes].copy_from_slice(&inputs(c.root, 0, c.count)),
        Kind::Reduce if rank == c.root => after[..bytes].copy_from_slice(&folded(0)),
        Kind::Reduce => {}
        Kind::AllGather => {
            for r in 0..n {
                after[r * bytes..(r + 1) * bytes].copy_from_slice(&inputs(r, 0, c.count));
            }
        }
        Kind::ReduceScatter => {
            after[..bytes].copy_from_slice(&folded(rank * c.count));
            if in_place {
                unspecified = Some(bytes..n * bytes);
            }
        }
        Kind::AllToAll => {
            for r in 0..n {
                after[r * bytes..(r + 1) * bytes].copy_from_slice(&inputs(
                    r,
                    rank * c.count,
                    c.count,
                ));
            }
        }
    }
    Buffers {
        before,
        send: (!in_place).then_some(send),
        after,
        unspecified,
    }
}

// ---------------------------------------------------------------------------------------------
// The two paths

/// How many programs run on each path, and the seeds.
fn seeds(default: usize) -> Vec<(u64, usize)> {
    if let Some(seed) = std::env::var("DEVSTREAM_COMM_PROGRAM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![(seed, nranks_of(seed))];
    }
    let count = std::env::var("DEVSTREAM_COMM_PROGRAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let base = std::env::var("DEVSTREAM_COMM_PROGRAM_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0000u64);
    (0..count as u64)
        .map(|i| {
            let seed = base + i;
            (seed, nranks_of(seed))
        })
        .collect()
}

/// 2 to 8 ranks, from the seed.
fn nranks_of(seed: u64) -> usize {
    2 + (Gen(seed ^ 0xabcd).next() % 7) as usize
}

/// Runs `p` with its ranks as threads; each rank's digest.
fn on_threads(p: &Program, latencies: &Arc<Mutex<Vec<Duration>>>) -> Vec<u64> {
    let id = UniqueId::new(&CPU).unwrap();
    let dropped = Arc::new(Mutex::new(None));
    let p = Arc::new(p.clone());
    let threads: Vec<_> = (0..p.nranks)
        .map(|rank| {
            let (p, dropped) = (p.clone(), dropped.clone());
            std::thread::spawn(move || {
                let comm = Communicator::init(&CPU, rank, p.nranks, &id)?;
                let s = Stream::new(&CPU)?;
                run_rank(&p, rank, comm, &s, &dropped)
            })
        })
        .collect();
    let outcomes: Vec<Outcome> = threads
        .into_iter()
        .enumerate()
        .map(|(rank, t)| match t.join() {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => panic!(
                "program seed {}, rank {rank}: a call was refused: {e}",
                p.seed
            ),
            Err(_) => panic!("program seed {}, rank {rank}: the rank panicked", p.seed),
        })
        .collect();
    let dropped_at = *dropped.lock().unwrap();
    if std::env::var_os("DEVSTREAM_COMM_PROGRAM_SEED").is_some() {
        eprintln!("{p:?}");
        for (rank, o) in outcomes.iter().enumerate() {
            eprintln!("rank {rank}: {:?}", o.error.as_ref().map(|e| e.to_string()));
        }
    }
    outcomes
        .iter()
        .enumerate()
        .map(|(rank, o)| check(&p, rank, o, dropped_at, latencies))
        .collect()
}

/// Runs programs (all of `nranks` ranks) with rank `rank` of each in this process; each
/// program's digest.
fn as_process_rank(rank: usize, programs: &[(Program, UniqueId)]) -> Vec<u64> {
    let latencies = Mutex::new(Vec::new());
    let nowhere = Mutex::new(None);
    programs
        .iter()
        .map(|(p, id)| {
            let comm = Communicator::init(&CPU, rank, p.nranks, id).unwrap();
            let s = Stream::new(&CPU).unwrap();
            let outcome = run_rank(p, rank, comm, &s, &nowhere).unwrap_or_else(|e| {
                panic!(
                    "program seed {}, rank {rank}: a call was refused: {e}",
                    p.seed
                )
            });
            check(p, rank, &outcome, None, &latencies)
        })
        .collect()
}

#[test]
fn random_programs_of_collectives_agree_with_the_model() {
    if let Ok(role) = std::env::var(CHILD) {
        // A rank process: `rank,nranks,batch,output`.
        let parts: Vec<&str> = role.split(',').collect();
        let rank: usize = parts[0].parse().unwrap();
        let batch = std::fs::read_to_string(parts[2]).unwrap();
        let programs: Vec<(Program, UniqueId)> = batch
            .lines()
            .map(|line| {
                let (seed, id) = line.split_once(' ').unwrap();
                let seed: u64 = seed.parse().unwrap();
                let program = Program::new(seed, nranks_of(seed));
                (program, UniqueId::from_bytes(&unhex(id)).unwrap())
            })
            .collect();
        let digests = as_process_rank(rank, &programs);
        let text: String = digests.iter().map(|d| format!("{d}\n")).collect();
        std::fs::write(parts[3], text).unwrap();
        return;
    }
    let started = Instant::now();
    // Threads: every program, its digests kept for the processes' run.
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let mut thread_digests = std::collections::HashMap::new();
    let (mut changed, mut dropped) = (0, 0);
    for (seed, n) in seeds(300) {
        let p = Program::new(seed, n);
        changed += usize::from(p.change.is_some());
        dropped += usize::from(p.leave.is_some());
        thread_digests.insert(seed, on_threads(&p, &latencies));
    }
    let threads_took = started.elapsed();
    // Processes: the programs of each size in one batch, one process per rank (rank 0 here).
    let mut by_size: std::collections::BTreeMap<usize, Vec<Program>> = Default::default();
    for (seed, n) in seeds(300) {
        by_size.entry(n).or_default().push(Program::new(seed, n));
    }
    let dir = std::env::temp_dir();
    let mut processes = 0;
    for (n, programs) in by_size {
        let tag = format!("devstream-comm-programs-{}-{n}", std::process::id());
        let batch_path = dir.join(format!("{tag}.batch"));
        let batch: Vec<(Program, UniqueId)> = programs
            .into_iter()
            .map(|p| (p, UniqueId::new(&CPU).unwrap()))
            .collect();
        let text: String = batch
            .iter()
            .map(|(p, id)| format!("{} {}\n", p.seed, hex(id.as_bytes())))
            .collect();
        std::fs::write(&batch_path, text).unwrap();
        let outputs: Vec<_> = (1..n).map(|r| dir.join(format!("{tag}.r{r}"))).collect();
        let children: Vec<_> = (1..n)
            .map(|r| {
                let role = format!(
                    "{r},{n},{},{}",
                    batch_path.display(),
                    outputs[r - 1].display()
                );
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
                    .env(CHILD, role)
                    .spawn()
                    .expect("start a rank process")
            })
            .collect();
        let mine = as_process_rank(0, &batch);
        for (r, child) in children.into_iter().enumerate() {
            assert!(
                wait_child(child, Duration::from_secs(300)).success(),
                "rank process {} of the {n}-rank batch failed (its output names the program)",
                r + 1
            );
        }
        let mut digests = vec![mine];
        for path in &outputs {
            let text = std::fs::read_to_string(path).unwrap();
            digests.push(text.lines().map(|l| l.parse().unwrap()).collect());
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_file(&batch_path);
        for (i, (p, _)) in batch.iter().enumerate() {
            processes += 1;
            if let Some(threads) = thread_digests.get(&p.seed) {
                let procs: Vec<u64> = digests.iter().map(|d| d[i]).collect();
                assert_eq!(
                    &procs, threads,
                    "program seed {}: the processes' results differ from the threads' (rerun: \
                     DEVSTREAM_COMM_PROGRAM_SEED={})",
                    p.seed, p.seed
                );
            }
        }
    }
    let latencies = latencies.lock().unwrap();
    eprintln!(
        "{} programs as threads ({changed} with a changed call, {dropped} with a rank that \
         leaves) in {threads_took:?}, {processes} as processes; PeerLeft came at most {:?} after \
         the drop (threads, {} ranks waiting); {:?} in all",
        thread_digests.len(),
        latencies.iter().max().copied().unwrap_or_default(),
        latencies.len(),
        started.elapsed()
    );
}
