//! The fuzzers of the C boundaries: cargo-fuzz targets (libFuzzer, AddressSanitizer) on the
//! pinned nightly.
//!
//! ```text
//! cargo xtask fuzz --list                  the targets, one per line
//! cargo xtask fuzz TARGET... | all [--seconds N] [--timeout S]
//!                                          build each target and fuzz it for N seconds (60);
//!                                          fails on any finding, or when it ran nothing
//! cargo xtask fuzz TARGET... | all --seed S --runs N
//!                                          a reproducible run: libFuzzer's seed S and N inputs,
//!                                          from the committed corpus alone (CI: N = 0, every
//!                                          committed input once)
//! cargo xtask fuzz TARGET... | all --seed S --seconds N
//!                                          N seconds of new inputs from seed S, from the
//!                                          committed corpus alone (what CI runs after the
//!                                          replay)
//! cargo xtask fuzz TARGET... | all --minimize
//!                                          merge the committed corpus and what the runs found
//!                                          into a small corpus, written over the committed one
//! ```
//!
//! Each target is a row of [`TARGETS`]: its name (the cargo-fuzz `[[bin]]`) and its cargo-fuzz
//! crate, a workspace of its own (nightly flags, libFuzzer) never built by the main one. Its
//! committed seed corpus is `<fuzz dir>/corpus/<name>/`: runs read it and never write it; what
//! they add goes to `target/fuzz/corpus/<name>/`, findings to `target/fuzz/artifacts/<name>/`,
//! libFuzzer's output to `target/fuzz/logs/<name>.log` (its last lines are printed). Builds go
//! to `target/fuzz/`, so the ordinary build is never invalidated.

use crate::soundness::{clean_env, target_root, NIGHTLY};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One fuzz target.
pub struct Target {
    /// The cargo-fuzz target (`[[bin]]`) name.
    pub name: &'static str,
    /// The cargo-fuzz crate (the directory holding its `Cargo.toml`), from the workspace root.
    pub fuzz_dir: &'static str,
}

/// Every fuzz target `cargo xtask fuzz all` (and CI) runs.
pub const TARGETS: &[Target] = &[
    Target {
        name: "paddle_table",
        fuzz_dir: "crates/devstream-paddle/fuzz",
    },
    Target {
        name: "plugin_loader",
        fuzz_dir: "crates/devstream-plugin/fuzz",
    },
];

/// The cargo-fuzz release `cargo xtask fuzz` installs when `cargo fuzz` is missing.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// The triple cargo-fuzz builds for (its default), which names the binaries' folder.
const TRIPLE: &str = "x86_64-unknown-linux-gnu";

/// Fuzzing time of one target when `--seconds` is not given.
const DEFAULT_SECONDS: u64 = 60;

/// The longest one input may run before libFuzzer calls it a hang: sized for instrumented
/// code on busy cores, so it only catches real hangs.
const DEFAULT_INPUT_TIMEOUT_S: u64 = 60;

/// `cargo xtask fuzz ...`: see the module docs.
pub fn fuzz(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--list") {
        for target in TARGETS {
            println!("{}", target.name);
        }
        return Ok(());
    }
    let (seconds, fixed) = bounds(args)?;
    let input_timeout = number(args, "--timeout")?.unwrap_or(DEFAULT_INPUT_TIMEOUT_S);
    let minimize = args.iter().any(|a| a == "--minimize");
    let targets = chosen(args)?;
    ensure_cargo_fuzz()?;
    for target in targets {
        build(target)?;
        if minimize {
            merge(target)?;
        } else {
            run(target, seconds, input_timeout, fixed)?;
        }
    }
    Ok(())
}

/// A seeded run from the committed seed corpus alone: libFuzzer's random seed, and either the
/// number of inputs (`--runs`: the same inputs every time, up to what threads make of
/// coverage) or, without it, the fuzzing time (`--seconds`: the same start, then as far as the
/// time goes). What earlier runs found locally never changes what it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fixed {
    seed: u64,
    runs: Option<u64>,
}

/// The fuzzing time and the seeded run, if any, that the flags ask for: `--seed` with
/// `--runs` or with `--seconds` (or neither: [`DEFAULT_SECONDS`]); `--runs` alone, or with
/// `--seconds`, is refused.
fn bounds(args: &[String]) -> Result<(u64, Option<Fixed>), String> {
    let seconds = number(args, "--seconds")?;
    let fixed = match (number(args, "--seed")?, number(args, "--runs")?) {
        (Some(_), Some(_)) if seconds.is_some() => {
            return Err("fuzz: --runs and --seconds: give one bound".into())
        }
        (Some(seed), runs) => Some(Fixed { seed, runs }),
        (None, None) => None,
        (None, Some(_)) => return Err("fuzz: --runs needs --seed".into()),
    };
    Ok((seconds.unwrap_or(DEFAULT_SECONDS), fixed))
}

/// The value of `flag` as a number, if given.
fn number(args: &[String], flag: &str) -> Result<Option<u64>, String> {
    crate::flag_value(args, flag)
        .map(|v| v.parse().map_err(|e| format!("{flag} {v}: {e}")))
        .transpose()
}

/// The targets named on the command line (`all`: every one); flags and their values skipped.
fn chosen(args: &[String]) -> Result<Vec<&'static Target>, String> {
    let mut names = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if skip_value {
            skip_value = false;
        } else if ["--seconds", "--timeout", "--seed", "--runs"].contains(&arg.as_str()) {
            skip_value = true;
        } else if !arg.starts_with("--") {
            names.push(arg.as_str());
        }
    }
    if names.is_empty() {
        return Err(format!(
            "fuzz: name a target or `all` (targets: {})",
            TARGETS
                .iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if names.contains(&"all") {
        return Ok(TARGETS.iter().collect());
    }
    names
        .into_iter()
        .map(|name| {
            TARGETS.iter().find(|t| t.name == name).ok_or_else(|| {
                format!("fuzz: unknown target {name:?} (see `cargo xtask fuzz --list`)")
            })
        })
        .collect()
}

/// Installs cargo-fuzz when `cargo fuzz` is missing.
fn ensure_cargo_fuzz() -> Result<(), String> {
    let mut probe = Command::new("rustup");
    probe
        .args(["run", NIGHTLY, "cargo", "fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    clean_env(&mut probe);
    if probe.status().is_ok_and(|s| s.success()) {
        return Ok(());
    }
    eprintln!("xtask: installing cargo-fuzz {CARGO_FUZZ_VERSION}");
    let status = Command::new(crate::cargo_bin())
        .args([
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            CARGO_FUZZ_VERSION,
        ])
        .status()
        .map_err(|e| format!("cannot run cargo install: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo install cargo-fuzz failed ({status})"))
    }
}

/// `target/fuzz`, absolute.
fn fuzz_root() -> Result<PathBuf, String> {
    let root = std::env::current_dir().map_err(|e| e.to_string())?;
    Ok(root.join(target_root()).join("fuzz"))
}

/// Builds `target` with cargo-fuzz (AddressSanitizer, release with debug assertions).
fn build(target: &Target) -> Result<(), String> {
    let target_dir = fuzz_root()?;
    let mut command = Command::new("rustup");
    command.args([
        "run",
        NIGHTLY,
        "cargo",
        "fuzz",
        "build",
        target.name,
        "--fuzz-dir",
    ]);
    command
        .arg(target.fuzz_dir)
        .arg("--target-dir")
        .arg(&target_dir);
    clean_env(&mut command);
    eprintln!(
        "xtask: [fuzz {}] cargo fuzz build {} --fuzz-dir {}",
        target.name, target.name, target.fuzz_dir
    );
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("[fuzz {}] build failed ({status})", target.name))
    }
}

/// The built fuzzer of `target`.
fn binary(target: &Target) -> Result<PathBuf, String> {
    Ok(fuzz_root()?.join(TRIPLE).join("release").join(target.name))
}

/// The committed seed corpus of `target`.
fn seeds(target: &Target) -> PathBuf {
    Path::new(target.fuzz_dir).join("corpus").join(target.name)
}

/// A folder under `target/fuzz/`, made if missing.
fn work_dir(kind: &str, target: &Target) -> Result<PathBuf, String> {
    let dir = fuzz_root()?.join(kind).join(target.name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Fuzzes `target` for `seconds`, reading the seed corpus; fails on a finding (a crash, a
/// sanitizer report, a hang past `input_timeout`, a leak, running out of memory) or when no
/// input ran.
fn run(
    target: &Target,
    seconds: u64,
    input_timeout: u64,
    fixed: Option<Fixed>,
) -> Result<(), String> {
    let corpus = if fixed.is_some() {
        // What earlier runs added would change the inputs: start from the seeds alone.
        let corpus = work_dir("corpus-fixed", target)?;
        std::fs::remove_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
        work_dir("corpus-fixed", target)?
    } else {
        work_dir("corpus", target)?
    };
    let artifacts = work_dir("artifacts", target)?;
    let logs = fuzz_root()?.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let log_path = logs.join(format!("{}.log", target.name));
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let seeds = seeds(target);
    let mut command = Command::new("timeout");
    // The hard limit: fuzzing time, one input's limit and the corpus load, with a margin.
    let limit = match fixed {
        // About 100 inputs a second at the slowest seen, with a wide margin: a hang detector.
        Some(Fixed {
            runs: Some(runs), ..
        }) => runs / 20 + input_timeout + 300,
        _ => seconds + input_timeout + 300,
    };
    command
        .args(["--kill-after=15", &limit.to_string()])
        .arg(binary(target)?)
        .arg(&corpus);
    if seeds.is_dir() {
        command.arg(&seeds);
    }
    if let Some(Fixed { seed, .. }) = fixed {
        command.arg(format!("-seed={seed}"));
    }
    match fixed {
        Some(Fixed {
            runs: Some(runs), ..
        }) => command.arg(format!("-runs={runs}")),
        _ => command.arg(format!("-max_total_time={seconds}")),
    };
    command
        .arg(format!("-timeout={input_timeout}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1")
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log);
    let how = match fixed {
        Some(Fixed {
            seed,
            runs: Some(runs),
        }) => format!("{runs} inputs of seed {seed}"),
        Some(Fixed { seed, runs: None }) => format!("{seconds}s of seed {seed}"),
        None => format!("{seconds}s"),
    };
    eprintln!(
        "xtask: [fuzz {}] {how} from {} (log: {})",
        target.name,
        seeds.display(),
        log_path.display()
    );
    let started = std::time::Instant::now();
    let status = command
        .status()
        .map_err(|e| format!("cannot run the fuzzer: {e}"))?;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let runs = stat(&text, "stat::number_of_executed_units").unwrap_or(0);
    let tail: Vec<&str> = text.lines().rev().take(60).collect();
    for line in tail.iter().rev() {
        println!("{line}");
    }
    eprintln!(
        "xtask: [fuzz {}] {runs} inputs in {}s, {status}",
        target.name,
        started.elapsed().as_secs()
    );
    if !status.success() {
        let found: Vec<String> = text
            .lines()
            .filter_map(|l| l.split("Test unit written to ").nth(1))
            .map(str::to_owned)
            .collect();
        return Err(format!(
            "[fuzz {}] found something ({status}); input: {}; reproduce: {} <input>",
            target.name,
            if found.is_empty() {
                "none written".to_owned()
            } else {
                found.join(", ")
            },
            binary(target)?.display()
        ));
    }
    if runs == 0 {
        return Err(format!(
            "[fuzz {}] ran no input: a fuzz step that runs nothing must not pass",
            target.name
        ));
    }
    Ok(())
}

/// A number libFuzzer printed as `name: N` (`-print_final_stats=1`).
fn stat(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .rev()
        .filter_map(|l| l.strip_prefix(name))
        .find_map(|rest| rest.trim_start_matches(':').trim().parse().ok())
}

/// Merges the seed corpus and what the runs added into a small set (libFuzzer's
/// `-set_cover_merge=1`: few inputs that keep every feature) and writes it over the seeds.
fn merge(target: &Target) -> Result<(), String> {
    let seeds = seeds(target);
    let found = work_dir("corpus", target)?;
    let merged = fuzz_root()?.join("merged").join(target.name);
    let _ = std::fs::remove_dir_all(&merged);
    std::fs::create_dir_all(&merged).map_err(|e| format!("{}: {e}", merged.display()))?;
    let mut command = Command::new(binary(target)?);
    command.arg("-set_cover_merge=1").arg(&merged).arg(&found);
    if seeds.is_dir() {
        command.arg(&seeds);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run the fuzzer: {e}"))?;
    if !status.success() {
        return Err(format!("[fuzz {}] merge failed ({status})", target.name));
    }
    let _ = std::fs::remove_dir_all(&seeds);
    std::fs::create_dir_all(&seeds).map_err(|e| format!("{}: {e}", seeds.display()))?;
    let mut count = 0;
    let mut bytes = 0;
    for entry in std::fs::read_dir(&merged).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if let Some(name) = path.file_name() {
            bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            std::fs::copy(&path, seeds.join(name)).map_err(|e| e.to_string())?;
            count += 1;
        }
    }
    eprintln!(
        "xtask: [fuzz {}] {count} inputs ({bytes} bytes) written to {}",
        target.name,
        seeds.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{bounds, chosen, stat, Fixed, DEFAULT_SECONDS, TARGETS};

    #[test]
    fn a_seed_goes_with_a_number_of_inputs_or_a_time() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(bounds(&args(&["all"])).unwrap(), (DEFAULT_SECONDS, None));
        assert_eq!(
            bounds(&args(&["all", "--seed", "1", "--runs", "0"])).unwrap(),
            (
                DEFAULT_SECONDS,
                Some(Fixed {
                    seed: 1,
                    runs: Some(0)
                })
            )
        );
        assert_eq!(
            bounds(&args(&["all", "--seed", "3", "--seconds", "120"])).unwrap(),
            (
                120,
                Some(Fixed {
                    seed: 3,
                    runs: None
                })
            )
        );
        assert_eq!(
            bounds(&args(&["all", "--seconds", "5"])).unwrap(),
            (5, None)
        );
        assert!(bounds(&args(&["all", "--runs", "5"])).is_err());
        assert!(bounds(&args(&[
            "all",
            "--seed",
            "1",
            "--runs",
            "5",
            "--seconds",
            "5"
        ]))
        .is_err());
    }

    #[test]
    fn targets_are_chosen_by_name_and_flags_are_skipped() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let all = chosen(&args(&["all", "--seconds", "5"])).unwrap();
        assert_eq!(all.len(), TARGETS.len());
        let one = chosen(&args(&["--seconds", "5", "paddle_table"])).unwrap();
        assert_eq!(
            one.iter().map(|t| t.name).collect::<Vec<_>>(),
            ["paddle_table"]
        );
        assert!(chosen(&args(&["nonesuch"])).is_err());
        assert!(chosen(&args(&["--seconds", "5"])).is_err());
        for target in TARGETS {
            assert!(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("..")
                    .join(target.fuzz_dir)
                    .join("Cargo.toml")
                    .is_file(),
                "{} has its cargo-fuzz crate",
                target.name
            );
        }
    }

    #[test]
    fn final_stats_are_read() {
        let text = "#1 INITED\nstat::number_of_executed_units: 1234\nstat::peak_rss_mb: 9\n";
        assert_eq!(stat(text, "stat::number_of_executed_units"), Some(1234));
        assert_eq!(stat("nothing", "stat::number_of_executed_units"), None);
    }
}
