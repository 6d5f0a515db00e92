//! The tools that find soundness bugs: Miri and the sanitizers, on a pinned nightly,
//! and the loom models of the lock-free handshakes, on the ordinary toolchain.
//!
//! ```text
//! cargo xtask nightly                      install the pinned nightly with miri and rust-src
//! cargo xtask miri [core] [cpu] [gpu-common] [facade]
//!                                          Miri over devstream-core's, devstream-cpu's and
//!                                          devstream-gpu-common's unit tests (default: core cpu)
//!                                          and a facade subset on `cpu`
//! cargo xtask sanitize thread|address [--places LIST] [--conformance] [--plugin] [--comm]
//!                      [--timeout SECS] [-- TEST ARGS]
//!                                          TSan (-Zbuild-std) or ASan over the conformance suite
//!                                          on the listed places and/or devstream-plugin's tests
//! cargo xtask loom [cpu] [gpu-common] [-- TEST ARGS]
//!                                          loom models (`--cfg loom`, release) of the CPU pool's
//!                                          wake-up and the host-function ring (default: both)
//! ```
//!
//! Every run builds into its own folder under the target directory (`miri/`, `tsan/`, `asan/`,
//! `loom/`), so it never invalidates the ordinary build. Every run parses libtest's summaries
//! and fails when no test ran, so a filter or an empty place list cannot pass by skipping.
//! Suppressions live in `xtask/sanitizers/`, each with its reason (see docs/SOUNDNESS.md).

use crate::flag_value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The pinned nightly: a dated toolchain that ships `miri` and `rust-src`, so CI never drifts.
pub const NIGHTLY: &str = "nightly-2026-06-15";

/// The target triple sanitizer builds name explicitly (required by `-Zbuild-std`, and it keeps
/// the sanitizer flags away from build scripts and proc macros).
const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Default wall-clock limit of one cargo invocation under a tool (build included).
const DEFAULT_TIMEOUT_S: u64 = 1500;

/// The target directory of the ordinary build (`CARGO_TARGET_DIR` or `target`).
pub(crate) fn target_root() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// `cargo xtask nightly`: installs the pinned nightly the same way here and in CI.
pub fn install() -> Result<(), String> {
    let status = Command::new("rustup")
        .args([
            "toolchain",
            "install",
            NIGHTLY,
            "--profile",
            "minimal",
            "-c",
            "miri,rust-src",
        ])
        .status()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if !status.success() {
        return Err(format!(
            "rustup toolchain install {NIGHTLY} failed ({status})"
        ));
    }
    // The first `cargo miri` call builds Miri's sysroot; doing it here keeps that out of the
    // timed test steps.
    let mut setup = Command::new("rustup");
    setup.args(["run", NIGHTLY, "cargo", "miri", "setup"]);
    clean_env(&mut setup);
    let status = setup
        .status()
        .map_err(|e| format!("cannot run cargo miri setup: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo miri setup failed ({status})"))
    }
}

/// Drops what the outer (stable) cargo exported, so the nightly cargo picks its own tools.
pub(crate) fn clean_env(command: &mut Command) {
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTDOCFLAGS",
        "CARGO_BUILD_TARGET",
    ] {
        command.env_remove(var);
    }
}

/// What one tool run did.
struct Ran {
    passed: u64,
    failed: u64,
}

/// Runs `cargo <args>` on the pinned nightly under `timeout`, echoing its output, and counts
/// libtest's `test result:` lines. Fails on a non-zero exit or when no test passed.
fn nightly_cargo(
    what: &str,
    args: &[&str],
    envs: &[(&str, String)],
    timeout_s: u64,
) -> Result<Ran, String> {
    tool_cargo(what, Some(NIGHTLY), args, envs, timeout_s)
}

/// [`nightly_cargo`] on `toolchain`, or with `None` on the cargo running xtask (the ordinary
/// toolchain). The outer cargo's `RUSTFLAGS` and tool variables are never inherited: `envs`
/// says everything the run needs.
fn tool_cargo(
    what: &str,
    toolchain: Option<&str>,
    args: &[&str],
    envs: &[(&str, String)],
    timeout_s: u64,
) -> Result<Ran, String> {
    eprintln!(
        "xtask: [{what}] {} cargo {}",
        envs.iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join(" "),
        args.join(" ")
    );
    let started = std::time::Instant::now();
    let mut command = Command::new("timeout");
    command.args(["--kill-after=15", &timeout_s.to_string()]);
    match toolchain {
        Some(toolchain) => command.args(["rustup", "run", toolchain, "cargo"]),
        None => command.arg(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())),
    };
    command.args(args);
    clean_env(&mut command);
    for (key, value) in envs {
        command.env(key, value);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run timeout/rustup: {e}"))?;
    let mut ran = Ran {
        passed: 0,
        failed: 0,
    };
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap_or_default();
            println!("{line}");
            if let Some(summary) = line.strip_prefix("test result: ") {
                ran.passed += count(summary, " passed");
                ran.failed += count(summary, " failed");
            }
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let secs = started.elapsed().as_secs();
    eprintln!(
        "xtask: [{what}] {} passed, {} failed, {status} after {secs}s",
        ran.passed, ran.failed
    );
    if status.code() == Some(124) || status.code() == Some(137) {
        return Err(format!(
            "[{what}] ran past its {timeout_s}s limit (a hang?)"
        ));
    }
    if !status.success() {
        return Err(format!("[{what}] failed ({status})"));
    }
    if ran.passed == 0 {
        return Err(format!(
            "[{what}] ran no test: a tool step that tests nothing must not pass"
        ));
    }
    Ok(ran)
}

/// The number before `suffix` in a libtest summary (`ok. 14 passed; 0 failed; ...`).
fn count(summary: &str, suffix: &str) -> u64 {
    summary
        .split(';')
        .find_map(|part| {
            let part = part.trim();
            let number = part.strip_suffix(suffix.trim_start())?;
            number.trim().rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// Arguments after `--`, passed to the test binaries.
fn test_args(args: &[String]) -> Vec<&str> {
    args.iter()
        .position(|a| a == "--")
        .map(|i| args[i + 1..].iter().map(String::as_str).collect())
        .unwrap_or_default()
}

/// `cargo xtask miri [core] [cpu] [gpu-common] [facade] [-- TEST ARGS]`.
///
/// * `core`: devstream-core's unit tests (current-stream stacks, pool, places, priorities).
/// * `cpu`: devstream-cpu's unit tests: the scheduler, events, flags, buffers and capture, under
///   Miri's data-race detector and weak-memory emulation, with iteration counts reduced under
///   `cfg(miri)`.
/// * `gpu-common`: the shared CUDA/HIP layer's unit tests (the host-function ring's slots),
///   which call no driver.
/// * `facade`: a subset of the conformance suite on `cpu` (semantics, events, current, drops).
///
/// Flags: `-Zmiri-ignore-leaks`, because the CPU backend's workers are detached threads that
/// outlive `main` by design; with it Miri still checks every access.
/// `PROPTEST_CASES` is forwarded (16 under Miri) and failure persistence is off (it needs the
/// file system, which Miri's isolation refuses).
pub fn miri(args: &[String]) -> Result<(), String> {
    let mut suites: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .take_while(|a| *a != "--")
        .collect();
    if suites.is_empty() {
        suites = vec!["core", "cpu"];
    }
    let extra = test_args(args);
    let timeout_s = DEFAULT_TIMEOUT_S;
    let target_dir = target_root().join("miri");
    let envs = vec![
        ("CARGO_TARGET_DIR", target_dir.display().to_string()),
        ("PROPTEST_CASES", "16".to_string()),
        ("PROPTEST_DISABLE_FAILURE_PERSISTENCE", "1".to_string()),
        (
            "MIRIFLAGS",
            [
                "-Zmiri-ignore-leaks",
                "-Zmiri-env-forward=PROPTEST_CASES",
                "-Zmiri-env-forward=PROPTEST_DISABLE_FAILURE_PERSISTENCE",
                "-Zmiri-env-forward=DEVSTREAM_PLACES",
                "-Zmiri-env-forward=DEVSTREAM_REQUIRE",
            ]
            .join(" "),
        ),
        ("DEVSTREAM_PLACES", "cpu".to_string()),
        ("DEVSTREAM_REQUIRE", "cpu".to_string()),
    ];
    for suite in suites {
        let mut cargo_args: Vec<&str> = vec!["miri", "test"];
        let mut test_filter: Vec<&str> = Vec::new();
        match suite {
            "core" => cargo_args.extend(["-p", "devstream-core", "--lib"]),
            "cpu" => cargo_args.extend(["-p", "devstream-cpu", "--lib"]),
            "gpu-common" => {
                // The host-function ring's slot handshake, the PanicSlot race (200 rounds under
                // `cfg(miri)`) and the stream-user bookkeeping (no driver is called).
                cargo_args.extend(["-p", "devstream-gpu-common", "--lib"]);
            }
            "facade" => {
                cargo_args.extend([
                    "-p",
                    "devstream",
                    "--no-default-features",
                    "--features",
                    "cpu",
                    "--test",
                    "conformance",
                ]);
                test_filter.extend([
                    "semantics::",
                    "events::",
                    "current::",
                    "drops::",
                    "required_backends_are_present",
                ]);
            }
            other => {
                return Err(format!(
                    "miri: unknown suite {other:?} (core, cpu, gpu-common, facade)"
                ))
            }
        }
        cargo_args.push("--");
        cargo_args.extend(test_filter);
        cargo_args.extend(extra.iter().copied());
        nightly_cargo(&format!("miri {suite}"), &cargo_args, &envs, timeout_s)?;
    }
    Ok(())
}

/// `cargo xtask loom [cpu] [gpu-common] [-- TEST ARGS]`: the loom models, built with
/// `--cfg loom` in release (loom explores tens of thousands of interleavings per model) into
/// `target/loom`, so the ordinary build is not invalidated.
///
/// * `cpu`: devstream-cpu's `scheduler/loom_tests.rs`, the worker pool's wake-up handshake
///   (`PoolShared::push` / `pop` / `shut_down`).
/// * `gpu-common`: devstream-gpu-common's `hostfn/loom_tests.rs`, the host-function ring's
///   slot handshake (`claim`, `ClaimedSlot`, `host_slot`) and `PanicSlot`'s `raise` / `take`.
///
/// `LOOM_MAX_PREEMPTIONS` is forwarded (default 3). Runs on the toolchain running xtask (loom
/// needs no nightly) and fails when a suite ran no loom test.
pub fn loom(args: &[String]) -> Result<(), String> {
    let mut suites: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .take_while(|a| *a != "--")
        .collect();
    if suites.is_empty() {
        suites = vec!["core", "cpu", "gpu-common"];
    }
    let extra = test_args(args);
    let envs = vec![
        (
            "CARGO_TARGET_DIR",
            target_root().join("loom").display().to_string(),
        ),
        ("RUSTFLAGS", "--cfg loom".to_string()),
        (
            "LOOM_MAX_PREEMPTIONS",
            std::env::var("LOOM_MAX_PREEMPTIONS").unwrap_or_else(|_| "3".to_string()),
        ),
    ];
    for suite in suites {
        let package = match suite {
            "cpu" => "devstream-cpu",
            "gpu-common" => "devstream-gpu-common",
            "core" => "devstream-core",
            other => {
                return Err(format!(
                    "loom: unknown suite {other:?} (core, cpu, gpu-common)"
                ))
            }
        };
        // The filter keeps the crate's ordinary unit tests out: built with `--cfg loom` they
        // would use loom's types outside a model.
        let mut cargo_args = vec!["test", "-p", package, "--release", "--lib", "loom", "--"];
        cargo_args.extend(extra.iter().copied());
        tool_cargo(
            &format!("loom {suite}"),
            None,
            &cargo_args,
            &envs,
            DEFAULT_TIMEOUT_S,
        )?;
    }
    Ok(())
}

/// `cargo xtask sanitize thread|address [--places LIST] [--conformance] [--plugin] [--comm]
/// [--timeout SECS] [-- TEST ARGS]`.
///
/// None of `--conformance`, `--plugin`, `--comm` means the first two; `--comm` runs the
/// facade's collectives tests on the CPU engine. `--places` (default
/// `cpu,wgpu:0,custom_cpu:0`) becomes `DEVSTREAM_PLACES`, and each place's backend is added to
/// `DEVSTREAM_REQUIRE`, so a place that went missing fails the run instead of being skipped.
/// The test plug-ins are built with the same flags, so the sanitizer sees inside them too.
pub fn sanitize(args: &[String]) -> Result<(), String> {
    let kind = args.first().map(String::as_str).unwrap_or("");
    let (short, flag) = match kind {
        "thread" => ("tsan", "-Zsanitizer=thread"),
        "address" => ("asan", "-Zsanitizer=address"),
        other => {
            return Err(format!(
                "sanitize: say which sanitizer: thread or address (got {other:?})"
            ))
        }
    };
    let options: Vec<String> = args[1..]
        .iter()
        .take_while(|a| *a != "--")
        .cloned()
        .collect();
    let places = flag_value(&options, "--places").unwrap_or("cpu,wgpu:0,custom_cpu:0");
    let timeout_s = flag_value(&options, "--timeout")
        .map(|t| t.parse().map_err(|e| format!("--timeout {t}: {e}")))
        .transpose()?
        .unwrap_or(DEFAULT_TIMEOUT_S);
    let mut conformance = options.iter().any(|a| a == "--conformance");
    let mut plugin = options.iter().any(|a| a == "--plugin");
    let comm = options.iter().any(|a| a == "--comm");
    if !conformance && !plugin && !comm {
        conformance = true;
        plugin = true;
    }
    let extra = test_args(&args[1..]);
    let supp_dir = std::env::current_dir()
        .map_err(|e| e.to_string())?
        .join("xtask")
        .join("sanitizers");
    let mut envs = vec![
        (
            "CARGO_TARGET_DIR",
            target_root().join(short).display().to_string(),
        ),
        (
            "RUSTFLAGS",
            // The test plug-ins are instrumented cdylibs: they resolve the sanitizer runtime's
            // `__tsan_*` / `__asan_*` symbols from the executable, which must export them.
            format!("{flag} -Clink-arg=-Wl,--export-dynamic"),
        ),
        ("CARGO_INCREMENTAL", "0".to_string()),
        // The tests' hang detectors grow by this factor (instrumented code, and a panic's
        // backtrace symbolized under the tool, run many times slower than a plain build).
        (
            "DEVSTREAM_TEST_TIME_SCALE",
            if short == "tsan" { "10" } else { "4" }.to_string(),
        ),
        (
            "XDG_RUNTIME_DIR",
            std::env::var("XDG_RUNTIME_DIR")
                .unwrap_or_else(|_| std::env::temp_dir().display().to_string()),
        ),
    ];
    // --no-fail-fast: every test binary runs, so one report does not hide the next.
    let mut cargo_base: Vec<&str> = vec!["test", "--no-fail-fast", "--target", TARGET];
    match short {
        "tsan" => {
            // TSan must see std's synchronisation too: std is rebuilt instrumented.
            cargo_base.push("-Zbuild-std");
            envs.push((
                "TSAN_OPTIONS",
                format!(
                    "halt_on_error=1 second_deadlock_stack=1 allocator_may_return_null=1 suppressions={}",
                    supp_dir.join("tsan.supp").display()
                ),
            ));
        }
        _ => {
            // Rebuilt instrumented too: mixing sanitized and unsanitized crates is refused.
            cargo_base.push("-Zbuild-std");
            envs.push((
                "ASAN_OPTIONS",
                "detect_leaks=1 detect_stack_use_after_return=1 allocator_may_return_null=1"
                    .to_string(),
            ));
            envs.push((
                "LSAN_OPTIONS",
                format!(
                    "suppressions={} print_suppressions=0",
                    supp_dir.join("lsan.supp").display()
                ),
            ));
        }
    }
    if conformance {
        let mut envs = envs.clone();
        // Discovery's build-tree fallback does not look under `<target>/<triple>/`: name the
        // instrumented test plug-in explicitly.
        let plugin_file = target_root()
            .join(short)
            .join(TARGET)
            .join("debug")
            .join("deps")
            .join("libdevstream_test_plugin_cpu.so");
        let plugin_file = std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join(plugin_file);
        envs.push(("DEVSTREAM_PLUGIN_PATH", plugin_file.display().to_string()));
        envs.push(("DEVSTREAM_PLACES", places.to_string()));
        envs.push(("DEVSTREAM_REQUIRE", backends_of(places)));
        // Instrumented code runs several times slower: the hostile checks' per-call watchdog
        // and the isolated children's limit grow with it (a hang still fails, later).
        envs.push(("DEVSTREAM_CONFORMANCE_HANG_SECS", "90".to_string()));
        envs.push(("DEVSTREAM_CONFORMANCE_ISOLATED_SECS", "400".to_string()));
        let mut cargo_args = cargo_base.clone();
        cargo_args.extend([
            "-p",
            "devstream",
            "--test",
            "conformance",
            "--features",
            "cpu,wgpu,plugin",
            "--",
        ]);
        cargo_args.extend(extra.iter().copied());
        nightly_cargo(
            &format!("{short} conformance {places}"),
            &cargo_args,
            &envs,
            timeout_s,
        )?;
    }
    if plugin {
        let mut cargo_args = cargo_base.clone();
        cargo_args.extend(["-p", "devstream-plugin", "--lib", "--tests", "--"]);
        cargo_args.extend(extra.iter().copied());
        nightly_cargo(
            &format!("{short} devstream-plugin"),
            &cargo_args,
            &envs,
            timeout_s,
        )?;
    }
    if comm {
        // The CPU reference engine's collectives (ranks as threads share buffers: the
        // in-process all-reduce writes peers' buffers through raw pointers).
        let mut cargo_args = cargo_base.clone();
        cargo_args.extend([
            "-p",
            "devstream",
            "--test",
            "comm",
            "--features",
            "cpu,comm",
            "--",
        ]);
        cargo_args.extend(extra.iter().copied());
        nightly_cargo(
            &format!("{short} collectives (cpu)"),
            &cargo_args,
            &envs,
            timeout_s,
        )?;
    }
    Ok(())
}

/// The `DEVSTREAM_REQUIRE` list for a `DEVSTREAM_PLACES` list: each place's backend, once.
fn backends_of(places: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for place in places.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let backend = match place.split(':').next().unwrap_or("") {
            "cpu" => "cpu",
            "wgpu" => "wgpu",
            "cuda" | "gpu" => "cuda",
            "hip" => "hip",
            // Any other device type is a plug-in place.
            _ => "plugin",
        };
        if !out.contains(&backend) {
            out.push(backend);
        }
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::{backends_of, count};

    #[test]
    fn places_name_their_backends() {
        assert_eq!(backends_of("cpu,wgpu:0,custom_cpu:0"), "cpu,wgpu,plugin");
        assert_eq!(backends_of("gpu:0, cuda:1,npu"), "cuda,plugin");
    }

    #[test]
    fn summaries_are_counted() {
        let line = "ok. 39 passed; 0 failed; 1 ignored; 0 measured; 9 filtered out; finished in 1s";
        assert_eq!(count(line, " passed"), 39);
        assert_eq!(count(line, " failed"), 0);
        assert_eq!(count("FAILED. 3 passed; 2 failed; 0 ignored", " failed"), 2);
        assert_eq!(count("garbage", " passed"), 0);
    }
}
