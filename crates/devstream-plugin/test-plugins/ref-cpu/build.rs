//! Compiles `ref_cpu.cc` against an installed PaddlePaddle wheel's `device_ext.h` (see the
//! crate docs); never fails the build when the header or the compiler is missing.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER: &str = "paddle/phi/backends/device_ext.h";

/// `paddle/include` directories of wheels installed in the usual virtual environments.
fn venv_includes(workspace: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for venv in [
        workspace.join(".venv-paddle"),
        PathBuf::from("/work/paddle-venv"),
    ] {
        let Ok(libs) = std::fs::read_dir(venv.join("lib")) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = libs.flatten().map(|e| e.path()).collect();
        pythons.sort();
        for python in pythons {
            out.push(python.join("site-packages/paddle/include"));
        }
    }
    out
}

fn include_dir(workspace: &Path) -> Result<PathBuf, String> {
    if let Some(dir) = env::var_os("DEVSTREAM_PADDLE_INCLUDE").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return if dir.join(HEADER).is_file() {
            Ok(dir)
        } else {
            Err(format!(
                "DEVSTREAM_PADDLE_INCLUDE={} holds no {HEADER}",
                dir.display()
            ))
        };
    }
    venv_includes(workspace)
        .into_iter()
        .find(|dir| dir.join(HEADER).is_file())
        .ok_or_else(|| {
            format!(
                "no {HEADER}: set DEVSTREAM_PADDLE_INCLUDE or install paddlepaddle into \
                 {}/.venv-paddle",
                workspace.display()
            )
        })
}

fn skip(reason: &str) {
    println!("cargo:warning=ref_cpu test plug-in not built: {reason}");
    println!("cargo:rustc-env=DEVSTREAM_REF_CPU_SKIPPED={reason}");
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it"));
    let source = manifest.join("ref_cpu.cc");
    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-env-changed=DEVSTREAM_PADDLE_INCLUDE");
    println!("cargo:rerun-if-env-changed=CXX");
    // crates/devstream-plugin/test-plugins/ref-cpu -> the workspace root.
    let workspace = manifest
        .ancestors()
        .nth(4)
        .unwrap_or(&manifest)
        .to_path_buf();
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        skip("only built on Linux");
        return;
    }
    let include = match include_dir(&workspace) {
        Ok(dir) => dir,
        Err(reason) => {
            skip(&reason);
            return;
        }
    };
    let header = include.join(HEADER);
    println!("cargo:rerun-if-changed={}", header.display());
    println!(
        "cargo:rustc-env=DEVSTREAM_REF_CPU_INCLUDE={}",
        include.display()
    );
    let library = out.join("libdevstream_test_plugin_ref_cpu.so");
    let compiler = env::var("CXX").unwrap_or_else(|_| "g++".into());
    let status = Command::new(&compiler)
        .args([
            "-std=c++17",
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Werror",
            "-o",
        ])
        .arg(&library)
        .arg("-I")
        .arg(&include)
        .arg(&source)
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => {
            // A header that does not compile with the plug-in is an error of this crate.
            panic!(
                "{compiler} failed ({status}) compiling {}",
                source.display()
            );
        }
        Err(error) => {
            skip(&format!("cannot run {compiler}: {error}"));
            return;
        }
    }
    // Next to the other test plug-ins (target/<profile>/), where discovery looks; written
    // to a temporary name and renamed, so a running process never maps a half-written file.
    if let Some(profile) = out.ancestors().nth(3) {
        let target = profile.join("libdevstream_test_plugin_ref_cpu.so");
        let temporary = profile.join(format!(
            ".libdevstream_test_plugin_ref_cpu.so.{}",
            std::process::id()
        ));
        if std::fs::copy(&library, &temporary).is_ok() {
            let _ = std::fs::rename(&temporary, &target);
        }
    }
    println!(
        "cargo:rustc-env=DEVSTREAM_REF_CPU_LIBRARY={}",
        library.display()
    );
    println!(
        "cargo:rustc-env=DEVSTREAM_REF_CPU_HEADER={}",
        header.display()
    );
}
