//! Builds the forwarding shim (`shim/shim.c`) as a shared library: the file the fuzz target
//! copies and hands to devstream's loader. It is compiled without the sanitizer flags cargo-fuzz
//! gives the Rust code (two functions, no memory of its own).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let library = out.join("libdevstream_fuzz_shim.so");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&compiler)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&library)
        .arg("shim/shim.c")
        .status()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(status.success(), "{compiler} failed to build shim/shim.c");
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rustc-env=DEVSTREAM_FUZZ_SHIM={}", library.display());
}
