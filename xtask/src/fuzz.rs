//! `cargo xtask fuzz <target> [--seconds N]`: one cargo-fuzz target (libFuzzer with
//! AddressSanitizer, on the pinned nightly; `cargo install cargo-fuzz` provides the tool) for a
//! bounded time, starting from its committed corpus. New inputs go to a scratch corpus under the
//! target directory, never into the committed one; a finding (crash, sanitizer report, hang)
//! fails the run and its input is kept in `target/fuzz/<target>/artifacts/`.

use crate::soundness::{clean_env, NIGHTLY};
use std::path::PathBuf;
use std::process::Command;

/// A fuzz target: its name and its cargo-fuzz directory (its own cargo workspace, with the
/// committed corpus in `corpus/<name>`).
pub struct FuzzTarget {
    /// The `[[bin]]` name.
    pub name: &'static str,
    /// The fuzz crate's directory, relative to the workspace root.
    pub dir: &'static str,
}

/// Every fuzz target.
pub const TARGETS: &[FuzzTarget] = &[FuzzTarget {
    name: "plugin_loader",
    dir: "crates/devstream-plugin/fuzz",
}];

/// How long a run lasts unless `--seconds` says.
const DEFAULT_SECONDS: u64 = 60;

/// One input running longer than this is a finding (a target's own watchdog reports first).
const INPUT_TIMEOUT_S: u64 = 120;

/// `cargo xtask fuzz <target> [--seconds N]`.
pub fn fuzz(args: &[String]) -> Result<(), String> {
    let names = || {
        TARGETS
            .iter()
            .map(|t| t.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(name) = args.first().filter(|a| !a.starts_with('-')) else {
        return Err(format!(
            "usage: cargo xtask fuzz <target> [--seconds N] (targets: {})",
            names()
        ));
    };
    let target = TARGETS
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| format!("no fuzz target {name} (targets: {})", names()))?;
    let seconds = match crate::flag_value(args, "--seconds") {
        Some(s) => s
            .parse::<u64>()
            .map_err(|e| format!("--seconds {s}: {e}"))?,
        None => DEFAULT_SECONDS,
    };
    let target_root = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let scratch = target_root.join("fuzz").join(target.name);
    let corpus = scratch.join("corpus");
    let artifacts = scratch.join("artifacts");
    for dir in [&corpus, &artifacts] {
        std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    }
    let committed = PathBuf::from(target.dir).join("corpus").join(target.name);
    let mut command = Command::new("rustup");
    command
        .args(["run", NIGHTLY, "cargo", "fuzz", "run", target.name])
        .arg("--fuzz-dir")
        .arg(target.dir)
        .arg(&corpus)
        .arg(&committed)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_S}"))
        .arg("-rss_limit_mb=4096")
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()));
    clean_env(&mut command);
    eprintln!(
        "xtask: fuzz {} for {seconds} s ({})",
        target.name, target.dir
    );
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo fuzz (cargo install cargo-fuzz): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "fuzz target {} failed ({status}); its input is in {}",
            target.name,
            artifacts.display()
        ))
    }
}
