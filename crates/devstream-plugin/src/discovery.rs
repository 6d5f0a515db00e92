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
//!    In the same case, if the workspace's Paddle plug-in `devstream_paddle` (crate
//!    `devstream-paddle`) was built there, one copy of it per device type
//!    (`<profile>/paddle-plugins/libdevstream_{cpu,wgpu,cuda,hip}.so`, refreshed when the
//!    library is newer) is found too: each copy registers the type its name names
//!    (`devstream_cpu:0`, `devstream_wgpu:0`, ...) or nothing where that backend has no place.
//!    So is the `ref_cpu` test plug-in (`<profile>/libdevstream_test_plugin_ref_cpu.so`, C
//!    compiled against an installed Paddle wheel's header; see its crate), where it was built.

use devstream_core::build_tree::{library_file_name, profile_dir};
use std::env;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Paddle's variable: directories of plug-ins.
pub const CUSTOM_DEVICE_ROOT: &str = "CUSTOM_DEVICE_ROOT";
/// devstream's variable: plug-in files or directories.
pub const DEVSTREAM_PLUGIN_PATH: &str = "DEVSTREAM_PLUGIN_PATH";

/// The file name of the workspace's test plug-in (`libdevstream_test_plugin_cpu.so` on Linux).
pub fn test_plugin_file_name() -> String {
    library_file_name("devstream_test_plugin_cpu")
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
        out.extend(build_tree_ref_plugin());
        out.extend(build_tree_paddle_plugins());
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

/// The file name of the workspace's `ref_cpu` test plug-in
/// (`libdevstream_test_plugin_ref_cpu.so` on Linux).
pub fn ref_plugin_file_name() -> String {
    library_file_name("devstream_test_plugin_ref_cpu")
}

/// The workspace's `ref_cpu` test plug-in, where its build script built it.
fn build_tree_ref_plugin() -> Option<PathBuf> {
    Some(profile_dir()?.join(ref_plugin_file_name())).filter(|p| p.is_file())
}

/// The workspace's test plug-in, for executables cargo built in a target directory.
fn build_tree_test_plugin() -> Option<PathBuf> {
    let profile = profile_dir()?;
    let name = test_plugin_file_name();
    [profile.join(&name), profile.join("deps").join(&name)]
        .into_iter()
        .find(|p| p.is_file())
}

/// The workspace's Paddle plug-in (`devstream-paddle`) as one copy per device type, for
/// executables cargo built in a target directory (see the module docs). A copy is written to
/// a temporary name and renamed, so a process never maps a half-written file.
fn build_tree_paddle_plugins() -> Vec<PathBuf> {
    let Some(profile) = profile_dir() else {
        return Vec::new();
    };
    let source_name = library_file_name("devstream_paddle");
    let Some(source) = [
        profile.join(&source_name),
        profile.join("deps").join(&source_name),
    ]
    .into_iter()
    .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
    .max() else {
        return Vec::new();
    };
    let dir = profile.join("paddle-plugins");
    if std::fs::create_dir_all(&dir).is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for backend in ["cpu", "wgpu", "cuda", "hip"] {
        let copy = dir.join(library_file_name(&format!("devstream_{backend}")));
        let fresh = copy
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|copied| copied >= source.0);
        if !fresh {
            let partial = dir.join(format!(".{backend}.{}.partial", std::process::id()));
            if std::fs::copy(&source.1, &partial).is_err()
                || std::fs::rename(&partial, &copy).is_err()
            {
                let _ = std::fs::remove_file(&partial);
                tracing::warn!("devstream-plugin: cannot copy {}", source.1.display());
                continue;
            }
        }
        out.push(copy);
    }
    out
}
