//! `cargo xtask paddle-plugins`: the folder `CUSTOM_DEVICE_ROOT` points Paddle at.
//!
//! Builds `devstream-paddle` (the cdylib exporting `InitPlugin`) with the backends asked for and
//! writes one copy of it per device type: `libdevstream_cpu.so`, `libdevstream_wgpu.so`, ...
//! Each copy registers the type its file name names (see `crates/devstream-paddle/README.md`);
//! copies, not links, because Paddle and devstream's loader open one file once.

use std::path::PathBuf;

/// `cargo xtask paddle-plugins [--features cpu,wgpu] [--release] [--out DIR]`.
pub fn paddle_plugins(args: &[String]) -> Result<(), String> {
    let features = crate::flag_value(args, "--features").unwrap_or("cpu,wgpu");
    let release = args.iter().any(|a| a == "--release");
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let out = crate::flag_value(args, "--out")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir.join("paddle-plugins"));
    let backends: Vec<&str> = features
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .collect();
    for backend in &backends {
        if !["cpu", "wgpu", "cuda", "hip"].contains(backend) {
            return Err(format!(
                "unknown backend {backend:?} (expected cpu, wgpu, cuda, hip)"
            ));
        }
    }
    let mut cargo_args = vec![
        "build",
        "-p",
        "devstream-paddle",
        "--lib",
        "--no-default-features",
        "--features",
        features,
        "--message-format=json",
    ];
    if release {
        cargo_args.push("--release");
    }
    let json = crate::cargo_output(&cargo_args)?;
    let library = cdylib(&json, "devstream_paddle")
        .ok_or("cargo built no devstream_paddle shared library")?;
    // Stale copies of types no longer asked for would still register: start empty.
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("mkdir {}: {e}", out.display()))?;
    for backend in &backends {
        let name = format!(
            "{}devstream_{backend}{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        );
        crate::copy_into(&library, &out, &name)?;
        eprintln!("xtask: {}", out.join(&name).display());
    }
    let shown = std::fs::canonicalize(&out).unwrap_or(out);
    println!("export CUSTOM_DEVICE_ROOT={}", shown.display());
    Ok(())
}

/// The shared library cargo reported for lib target `name` in `--message-format=json` output.
fn cdylib(json: &str, name: &str) -> Option<PathBuf> {
    let suffix = std::env::consts::DLL_SUFFIX;
    json.lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .filter(|l| l.contains(&format!("\"name\":\"{name}\"")))
        .find_map(|l| {
            let start = l.find("\"filenames\":[")? + "\"filenames\":[".len();
            let end = start + l[start..].find(']')?;
            l[start..end]
                .split(',')
                .map(|f| f.trim().trim_matches('"'))
                .find(|f| f.ends_with(suffix))
                .map(PathBuf::from)
        })
}
