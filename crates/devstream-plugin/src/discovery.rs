//! Where plug-ins are looked for.
//!
//! 1. `CUSTOM_DEVICE_ROOT` (Paddle's variable): every `*.so` (`*.dylib` on macOS) file in the
//!    directory; several directories may be separated by `:`.
//! 2. `DEVSTREAM_PLUGIN_PATH`: `:`-separated plug-in files or directories (as above).
//! 3. Only when neither variable is set, and only for executables that cargo built inside a
//!    target directory (`<target>/<profile>/deps/*` tests and `<target>/<profile>/examples/*`):
//!    this workspace's test plug-in `devstream_test_plugin_cpu` if it was built there, so that
//!    `cargo test` and `cargo run --example` find the `custom_cpu` place with no setup. Setting
//!    either variable (even to an empty value) turns this off.

use std::env;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Paddle's variable: directories of plug-ins.
pub const CUSTOM_DEVICE_ROOT: &str = "CUSTOM_DEVICE_ROOT";
/// devstream's variable: plug-in files or directories.
pub const DEVSTREAM_PLUGIN_PATH: &str = "DEVSTREAM_PLUGIN_PATH";

/// The file name of the workspace's test plug-in (`libdevstream_test_plugin_cpu.so` on Linux).
pub fn test_plugin_file_name() -> String {
    format!(
        "{}devstream_test_plugin_cpu{}",
        env::consts::DLL_PREFIX,
        env::consts::DLL_SUFFIX
    )
}

fn is_library(path: &Path) -> bool {
    let wanted = env::consts::DLL_EXTENSION;
    path.is_file() && path.extension() == Some(OsStr::new(wanted))
}

fn libraries_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        tracing::warn!(
            "devstream-plugin: cannot read plug-in directory {}",
            dir.display()
        );
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_library(p))
        .collect();
    found.sort();
    found
}

/// The plug-in files discovery would load now, in order.
pub fn plugin_candidates() -> Vec<PathBuf> {
    let root = env::var_os(CUSTOM_DEVICE_ROOT);
    let extra = env::var_os(DEVSTREAM_PLUGIN_PATH);
    let mut out = Vec::new();
    if let Some(root) = &root {
        for dir in env::split_paths(root).filter(|d| !d.as_os_str().is_empty()) {
            out.extend(libraries_in(&dir));
        }
    }
    if let Some(extra) = &extra {
        for entry in env::split_paths(extra).filter(|d| !d.as_os_str().is_empty()) {
            if entry.is_dir() {
                out.extend(libraries_in(&entry));
            } else {
                out.push(entry);
            }
        }
    }
    if root.is_none() && extra.is_none() {
        out.extend(build_tree_test_plugin());
    }
    let mut seen = Vec::new();
    out.retain(|p| {
        let key = p.canonicalize().unwrap_or_else(|_| p.clone());
        let fresh = !seen.contains(&key);
        seen.push(key);
        fresh
    });
    out
}

/// The workspace's test plug-in, for executables cargo built in a target directory.
fn build_tree_test_plugin() -> Option<PathBuf> {
    let exe = env::current_exe().ok()?;
    let dir = exe.parent()?;
    let kind = dir.file_name()?;
    if kind != "deps" && kind != "examples" {
        return None;
    }
    let profile = dir.parent()?;
    if !profile.join(".fingerprint").is_dir() {
        return None;
    }
    let name = test_plugin_file_name();
    [profile.join(&name), profile.join("deps").join(&name)]
        .into_iter()
        .find(|p| p.is_file())
}
