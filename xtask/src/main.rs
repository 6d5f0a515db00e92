//! devstream's project tasks.
//!
//! ```text
//! cargo xtask ci                       fmt check, clippy -D warnings, feature-matrix check, the test command
//! cargo xtask test                     the README's test command
//! cargo xtask bench [--backend B] [--features LIST] [--quick]
//!                                      run a benchmark binary in release, write docs/results/bench-B-DATE.txt
//! cargo xtask bench --backend pools [--features wgpu,cuda] [--quick]
//!                                      the memory-pool benchmarks on every place built in (default
//!                                      features: wgpu), written to docs/results/DATE-pools/
//! cargo xtask gpu-bundle [--features cuda,wgpu,comm] [--out DIR]
//!                                      release builds of the conformance suite, crate tests, examples and
//!                                      benchmarks into one folder (default bundle/) for the GPU machine
//!                                      (`comm`: also the collectives tests, comm_gpu)
//! cargo xtask nightly                 install the pinned nightly (miri, rust-src) for the tools below
//! cargo xtask miri [core] [cpu] [gpu-common] [facade]
//!                                      Miri over core / cpu / gpu-common unit tests, facade on cpu
//! cargo xtask sanitize thread|address [--places LIST] [--conformance] [--plugin] [--comm] [--timeout S]
//!                                      TSan / ASan over the conformance suite and the plug-in tests
//! cargo xtask loom [core] [cpu] [gpu-common]  loom models of the event mark, the CPU pool's wake-up and the host-function ring
//! cargo xtask fuzz TARGET... | all [--seconds N] [--minimize] | --list
//!                                      the cargo-fuzz targets of the C boundaries (libFuzzer, ASan) on the
//!                                      pinned nightly, N seconds each (60); fails on any finding
//! cargo xtask paddle-plugins [--features cpu,wgpu] [--release] [--out DIR]
//!                                      devstream-paddle as one library per Paddle device type
//!                                      (default target/paddle-plugins/), for CUSTOM_DEVICE_ROOT
//! cargo xtask doc-links                every relative link and root path in the Markdown files resolves
//! ```

mod doc_links;
mod fuzz;
mod paddle;
mod report;
mod soundness;

use std::path::{Path, PathBuf};
use std::process::{exit, Command};

/// The README's test command, as arguments to `cargo`.
const TEST_COMMAND: &[&str] = &["test", "--workspace", "--all-features"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    std::env::set_current_dir(&root)
        .unwrap_or_else(|e| fail(&format!("cd {}: {e}", root.display())));
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("test") => cargo(TEST_COMMAND),
        Some("bench") => bench(&args[1..]),
        Some("gpu-bundle") => gpu_bundle(&args[1..]),
        Some("bench-report") => report::cli(&args[1..]),
        Some("nightly") => soundness::install(),
        Some("miri") => soundness::miri(&args[1..]),
        Some("sanitize") => soundness::sanitize(&args[1..]),
        Some("loom") => soundness::loom(&args[1..]),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("paddle-plugins") => paddle::paddle_plugins(&args[1..]),
        Some("doc-links") => doc_links::check(&root),
        _ => {
            eprintln!("usage: cargo xtask <ci | test | bench [--backend cpu|cuda|wgpu|cross] [--features LIST] [--quick] | gpu-bundle [--features LIST] [--out DIR] | nightly | miri [core] [cpu] [gpu-common] [facade] | sanitize thread|address [--places LIST] [--conformance] [--plugin] [--comm] | loom [core] [cpu] [gpu-common] | fuzz TARGET...|all [--seconds N] [--minimize] | paddle-plugins [--features LIST] [--release] [--out DIR] | doc-links>");
            exit(2);
        }
    };
    if let Err(message) = result {
        fail(&message);
    }
}

fn fail(message: &str) -> ! {
    eprintln!("xtask: {message}");
    exit(1)
}

fn workspace_root() -> PathBuf {
    // `cargo run` sets CARGO_MANIFEST_DIR for the running binary too: prefer it, so an xtask
    // binary built in one checkout (a build folder copied to a second worktree looks fresh to
    // cargo) works on the checkout it is run from, not on the one it was compiled in.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or(manifest_dir)
}

fn cargo_bin() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn cargo(args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: cargo {}", args.join(" "));
    let status = Command::new(cargo_bin())
        .args(args)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo {} failed ({status})", args.join(" ")))
    }
}

fn cargo_output(args: &[&str]) -> Result<String, String> {
    eprintln!("xtask: cargo {}", args.join(" "));
    let output = Command::new(cargo_bin())
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo {} failed ({})",
            args.join(" "),
            output.status
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The feature combinations of the facade that are checked (not tested) in CI; the union is
/// tested by the test command.
const FEATURE_MATRIX: &[&[&str]] = &[
    &["--no-default-features", "--features", "cpu"],
    &["--no-default-features", "--features", "cuda"],
    &["--no-default-features", "--features", "wgpu"],
    &["--no-default-features", "--features", "plugin"],
    &["--features", "cuda"],
    &["--features", "wgpu"],
    &["--features", "plugin"],
];

fn ci() -> Result<(), String> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ])?;
    for features in FEATURE_MATRIX {
        let mut args = vec!["check", "-p", "devstream", "--lib"];
        args.extend_from_slice(features);
        cargo(&args)?;
    }
    cargo(&["doc", "--workspace", "--no-deps", "--all-features"])?;
    doc_links::check(&workspace_root())?;
    cargo(TEST_COMMAND)
}

fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn today() -> String {
    Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "undated".into())
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} x {model}")
}

fn bench(args: &[String]) -> Result<(), String> {
    let backend = flag_value(args, "--backend").unwrap_or("cpu");
    let quick = args.iter().any(|a| a == "--quick");
    let bin = format!("bench-{backend}");
    let mut build = vec!["build", "--release", "-p", "devstream-bench", "--bin", &bin];
    // `cross`: waits across backends, between the places CI has (cpu, wgpu:0 on lavapipe, the
    // test plug-in's custom_cpu places); `--features cuda,hip,wgpu,plugin` for more. `pools`
    // measures every place built in: its features name them.
    let features = match (backend, flag_value(args, "--features")) {
        (_, Some(features)) => features,
        ("cross", None) => "wgpu,plugin",
        ("pools", None) => "wgpu",
        (backend, None) => backend,
    };
    if backend != "cpu" {
        build.extend_from_slice(&["--features", features]);
    }
    cargo(&build)?;
    let target_dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let release = Path::new(&target_dir).join("release");
    let exe = release.join(&bin);
    let json = std::env::temp_dir().join(format!("devstream-{bin}.jsonl"));
    let _ = std::fs::remove_file(&json);
    let mut command = Command::new(&exe);
    if backend == "cross" && features.split(',').any(|f| f == "plugin") {
        // A bench binary is not where plug-in discovery looks for the workspace's test plug-in.
        cargo(&["build", "--release", "-p", "devstream-test-plugin-cpu"])?;
        let plugin = release.join(format!(
            "{}devstream_test_plugin_cpu{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        ));
        command.env("DEVSTREAM_PLUGIN_PATH", plugin);
    }
    command.env("DEVSTREAM_BENCH_JSON", &json);
    if quick {
        command.env("DEVSTREAM_BENCH_QUICK", "1");
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let table = String::from_utf8_lossy(&output.stdout);
    print!("{table}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        return Err(format!("{bin} failed ({})", output.status));
    }
    let date = today();
    // bench-pools writes a folder of its own: docs/results/DATE-pools/.
    let (folder, stem) = match backend {
        "pools" => (
            PathBuf::from("docs/results").join(format!("{date}-pools")),
            "bench-pools".to_string(),
        ),
        _ => (
            PathBuf::from("docs/results"),
            format!("bench-{backend}-{date}"),
        ),
    };
    let path = folder.join(format!("{stem}.txt"));
    std::fs::create_dir_all(&folder).map_err(|e| e.to_string())?;
    let header = format!(
        "# devstream benchmark: {backend}\n# date: {date}\n# machine: {}\n# command: cargo xtask bench --backend {backend}{}{}\n\n",
        machine(),
        flag_value(args, "--features")
            .map(|f| format!(" --features {f}"))
            .unwrap_or_default(),
        if quick { " --quick" } else { "" }
    );
    std::fs::write(&path, format!("{header}{table}")).map_err(|e| e.to_string())?;
    eprintln!("xtask: wrote {}", path.display());
    let rows_text = std::fs::read_to_string(&json).unwrap_or_default();
    let rows = report::parse_bench_rows(&rows_text)?;
    let prefix = folder.join(&stem);
    let context = format!(
        "{date}, {}, `cargo xtask bench --backend {backend}`",
        machine()
    );
    let written = report::write_report(
        &prefix,
        &format!("devstream {backend} benchmark"),
        &context,
        &rows,
        &[],
    )?;
    for path in written {
        eprintln!("xtask: wrote {}", path.display());
    }
    Ok(())
}

/// Finds `"executable":"PATH"` entries in cargo's JSON messages whose target name matches.
fn executables(json: &str, target_name: &str) -> Vec<PathBuf> {
    json.lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .filter(|l| l.contains(&format!("\"name\":\"{target_name}\"")))
        .filter_map(|l| {
            let start = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + l[start..].find('"')?;
            Some(PathBuf::from(&l[start..end]))
        })
        .collect()
}

fn copy_into(from: &Path, dir: &Path, name: &str) -> Result<u64, String> {
    let to = dir.join(name);
    std::fs::copy(from, &to)
        .map_err(|e| format!("copy {} -> {}: {e}", from.display(), to.display()))
}

/// Builds the facade's integration test `test` in release with `features` and copies it into
/// `out` under its own name; answers the bytes copied.
fn facade_test(test: &str, features: &str, out: &Path) -> Result<u64, String> {
    let json = cargo_output(&[
        "test",
        "--release",
        "--no-run",
        "-p",
        "devstream",
        "--test",
        test,
        "--features",
        features,
        "--message-format=json",
    ])?;
    let mut size = 0;
    for exe in executables(&json, test) {
        size += copy_into(&exe, out, test)?;
    }
    Ok(size)
}

fn gpu_bundle(args: &[String]) -> Result<(), String> {
    let features = flag_value(args, "--features").unwrap_or("cuda");
    let out = PathBuf::from(flag_value(args, "--out").unwrap_or("bundle"));
    // Stripped binaries: unstripped, a cuda+wgpu bundle is ~300 MiB, over what the device tool
    // carries (64 MiB).
    std::env::set_var("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    std::env::set_var("CARGO_PROFILE_RELEASE_DEBUG", "0");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let facade_features = format!("cpu,trace,{features}");
    let mut size = 0u64;

    // The conformance suite; with `comm`, the facade's collectives tests on the GPU places.
    size += facade_test("conformance", &facade_features, &out)?;
    if features.split(',').any(|f| f == "comm") {
        size += facade_test("comm_gpu", &facade_features, &out)?;
    }
    // Each GPU backend crate's own tests (`comm` is a feature of the facade, not a crate).
    for backend in features
        .split(',')
        .filter(|b| !b.is_empty() && *b != "comm")
    {
        let package = format!("devstream-{backend}");
        let json = cargo_output(&[
            "test",
            "--release",
            "--no-run",
            "-p",
            &package,
            "--lib",
            "--tests",
            "--message-format=json",
        ])?;
        // The unit tests (`PACKAGE-tests`) and each integration test (`PACKAGE-TARGET`).
        let lib_target = package.replace('-', "_");
        for line in json.lines().filter(|l| l.contains("\"executable\":\"")) {
            let Some(name) = line
                .split("\"name\":\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
            else {
                continue;
            };
            let file = if name == lib_target {
                format!("{package}-tests")
            } else {
                format!("{package}-{name}")
            };
            for exe in executables(line, name) {
                size += copy_into(&exe, &out, &file)?;
            }
        }
    }
    // Examples and benchmarks.
    let json = cargo_output(&[
        "build",
        "--release",
        "-p",
        "devstream",
        "--examples",
        "--features",
        &facade_features,
        "--message-format=json",
    ])?;
    for line in json
        .lines()
        .filter(|l| l.contains("\"kind\":[\"example\"]"))
    {
        if let Some(name) = line
            .split("\"name\":\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
        {
            // The CPU-only examples run here; leaving them out keeps the bundle under 64 MiB.
            if ["cpu", "trace_cost", "plugin"].contains(&name) {
                continue;
            }
            for exe in executables(line, name) {
                size += copy_into(&exe, &out, &format!("example-{name}"))?;
            }
        }
    }
    let bench_features: Vec<&str> = features
        .split(',')
        .filter(|f| ["cuda", "hip", "wgpu", "comm", "trace"].contains(f))
        .collect();
    let bench_features = bench_features.join(",");
    let json = cargo_output(&[
        "build",
        "--release",
        "-p",
        "devstream-bench",
        "--bins",
        "--features",
        &bench_features,
        "--message-format=json",
    ])?;
    if features.split(',').any(|f| f == "hip") {
        // The HIP-on-CUDA shim, loaded in place of libamdhip64 with DEVSTREAM_HIP_LIBRARY.
        let json = cargo_output(&[
            "build",
            "--release",
            "-p",
            "devstream-hip-shim",
            "--message-format=json",
        ])?;
        for line in json.lines().filter(|l| l.contains("devstream_hip_shim")) {
            if let Some(path) = line
                .split("\"filenames\":[\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
            {
                size += copy_into(Path::new(path), &out, "libdevstream_hip_shim.so")?;
            }
        }
    }
    // The workload benchmarks: the CUDA step and priority halves, and bench-scale
    // (run with --place cuda:0 / wgpu:0); bench-step and bench-priority on host functions
    // are the CPU/wgpu halves and stay here.
    for bin in [
        "bench-cuda",
        "bench-wgpu",
        "bench-pools",
        "bench-wake",
        "bench-cross",
        "bench-workload-cuda",
        "bench-scale",
        "bench-comm-cpu",
        "bench-comm",
    ] {
        for exe in executables(&json, bin) {
            size += copy_into(&exe, &out, bin)?;
        }
    }
    // The peers script: the bench crate's copy (with the workload DAG and priority experiment),
    // else the anchors' original.
    let peers = [
        Path::new("crates/devstream-bench/peers/peers_cuda.py"),
        Path::new("../shared/anchors/peers_cuda.py"),
    ]
    .into_iter()
    .find(|p| p.exists());
    if let Some(peers) = peers {
        size += copy_into(peers, &out, "peers_cuda.py")?;
    }
    // torch.distributed beside bench-comm.
    let peers_comm = Path::new("crates/devstream-bench/peers/peers_comm.py");
    if peers_comm.exists() {
        size += copy_into(peers_comm, &out, "peers_comm.py")?;
    }
    let mib = size as f64 / (1024.0 * 1024.0);
    eprintln!("xtask: bundle {} holds {mib:.1} MiB", out.display());
    if mib > 64.0 {
        return Err(format!(
            "bundle is {mib:.1} MiB, over the 64 MiB the device tool carries"
        ));
    }
    Ok(())
}
