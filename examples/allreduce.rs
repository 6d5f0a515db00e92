//! All-reduce across ranks that are separate processes (cargo feature `comm`).
//!
//! ```sh
//! cargo run --example allreduce --features comm                 # 4 ranks on `cpu`
//! cargo run --example allreduce --features comm -- --ranks 8
//! # one rank per GPU, over NCCL (libnccl.so.2: DEVSTREAM_NCCL_LIBRARY, the nvidia-nccl-cu13 wheel
//! # or the system loader); --ranks defaults to the number of devices:
//! NCCL_NVLS_ENABLE=0 cargo run --example allreduce --features comm,cuda -- --place cuda
//! ```
//!
//! The first process is rank 0: it makes the communicator's `UniqueId`, writes its bytes to a
//! file it owns (a framework would use its own channel: a TCP store, MPI, an environment
//! variable) and starts ranks 1..N as copies of itself with `--rank R --id-file PATH`. Every
//! rank joins the communicator, fills a buffer with `rank + 1`, all-reduces it in place on a
//! stream and checks that every element is `1 + 2 + ... + N`.
//!
//! `--place cpu` (the default) puts every rank on the CPU reference engine; `--place cuda`
//! (NCCL) or `--place hip` (RCCL) puts rank R on device `R` of that kind (one process per
//! GPU, as NCCL wants); other kinds answer `Error::Unsupported`.

use devstream::{Communicator, DataType, Place, ReduceOp, Stream, UniqueId};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Elements per rank (4 MiB of f32).
const COUNT: usize = 1 << 20;

struct Args {
    /// Number of ranks: `--ranks`, else 4 on `cpu` and the number of devices elsewhere.
    ranks: usize,
    rank: Option<usize>,
    id_file: Option<PathBuf>,
    place: String,
}

fn parse() -> Result<Args, String> {
    let mut ranks = None;
    let mut args = Args {
        ranks: 0,
        rank: None,
        id_file: None,
        place: "cpu".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--ranks" => ranks = Some(value()?.parse().map_err(|e| format!("--ranks: {e}"))?),
            "--rank" => args.rank = Some(value()?.parse().map_err(|e| format!("--rank: {e}"))?),
            "--id-file" => args.id_file = Some(PathBuf::from(value()?)),
            "--place" => args.place = value()?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    args.ranks = match ranks {
        Some(n) => n,
        None if args.place == "cpu" => 4,
        None => devstream::places()
            .iter()
            .filter(|p| p.to_string().starts_with(&format!("{}:", args.place)))
            .count(),
    };
    if args.ranks == 0 {
        return Err(format!(
            "--ranks must be at least 1 (no `{}` device found)",
            args.place
        ));
    }
    Ok(args)
}

/// The place of `rank`: `cpu` for every rank, else device `rank` of the kind named.
fn place_of(kind: &str, rank: usize) -> devstream::Result<Place> {
    if kind == "cpu" {
        Ok(Place::Cpu)
    } else {
        format!("{kind}:{rank}").parse()
    }
}

/// One rank: join, all-reduce, check.
fn run_rank(args: &Args, rank: usize, id: &UniqueId) -> devstream::Result<()> {
    let place = place_of(&args.place, rank)?;
    let n = args.ranks;
    let comm = Communicator::init(&place, rank, n, id)?;
    let stream = Stream::new(&place)?;
    let buf = stream.alloc(COUNT * 4)?;
    let mine: Vec<u8> = std::iter::repeat_n((rank as f32 + 1.0).to_ne_bytes(), COUNT)
        .flatten()
        .collect();
    stream.copy_from_host(&buf, 0, &mine)?;
    let start = Instant::now();
    stream.all_reduce(&comm, &buf, &buf, COUNT, DataType::F32, ReduceOp::Sum)?;
    stream.synchronize()?;
    let took = start.elapsed();
    let host = stream.alloc_host(COUNT * 4)?;
    stream.copy_device_to_host(&host, 0, &buf, 0, COUNT * 4)?;
    let bytes = host.to_vec()?;
    let want = (n * (n + 1) / 2) as f32;
    let wrong = bytes
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .filter(|v| *v != want)
        .count();
    if wrong > 0 {
        return Err(devstream::Error::InvalidArgument(format!(
            "rank {rank}: {wrong} of {COUNT} elements differ from {want}"
        )));
    }
    println!(
        "rank {rank}/{n} on {place}: all_reduce of {} MiB f32 ok (every element = {want}) in {took:?}",
        (COUNT * 4) >> 20
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("allreduce: {message}");
            return ExitCode::from(2);
        }
    };
    if let (Some(rank), Some(id_file)) = (args.rank, &args.id_file) {
        // A rank started by rank 0.
        let id = std::fs::read(id_file)
            .map_err(|e| devstream::Error::InvalidArgument(format!("{id_file:?}: {e}")))
            .and_then(|bytes| UniqueId::from_bytes(&bytes));
        return match id.and_then(|id| run_rank(&args, rank, &id)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rank {rank}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // Rank 0: make the id, hand it over through a file, start the other ranks.
    let id = match place_of(&args.place, 0).and_then(|place| UniqueId::new(&place)) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("rank 0: {e}");
            return ExitCode::FAILURE;
        }
    };
    let id_file =
        std::env::temp_dir().join(format!("devstream-allreduce-{}.id", std::process::id()));
    if let Err(e) = std::fs::write(&id_file, id.as_bytes()) {
        eprintln!("rank 0: cannot write {id_file:?}: {e}");
        return ExitCode::FAILURE;
    }
    let exe = std::env::current_exe().expect("the example's own path");
    let children: Vec<_> = (1..args.ranks)
        .map(|rank| {
            std::process::Command::new(&exe)
                .args([
                    "--rank",
                    &rank.to_string(),
                    "--ranks",
                    &args.ranks.to_string(),
                ])
                .args(["--place", &args.place])
                .arg("--id-file")
                .arg(&id_file)
                .spawn()
        })
        .collect();
    let mine = run_rank(&args, 0, &id);
    let mut ok = match &mine {
        Ok(()) => true,
        Err(e) => {
            eprintln!("rank 0: {e}");
            false
        }
    };
    for (index, child) in children.into_iter().enumerate() {
        let status = child.and_then(|mut c| c.wait());
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("rank {}: exited with {status}", index + 1);
                ok = false;
            }
            Err(e) => {
                eprintln!("rank {}: could not run: {e}", index + 1);
                ok = false;
            }
        }
    }
    let _ = std::fs::remove_file(&id_file);
    if ok {
        println!("all {} ranks agree", args.ranks);
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
