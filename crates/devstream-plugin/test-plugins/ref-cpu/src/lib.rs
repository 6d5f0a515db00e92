//! The `ref_cpu` test plug-in: `ref_cpu.cc`, compiled by this crate's build script with the
//! system C++ compiler against the `device_ext.h` of an installed PaddlePaddle wheel, behaving
//! like PaddleCustomDevice's reference `custom_cpu` runtime.
//!
//! The header is found through `DEVSTREAM_PADDLE_INCLUDE` (a directory holding
//! `paddle/phi/backends/device_ext.h`), else in the `paddle/include` of a wheel installed in
//! `.venv-paddle` at the workspace root or in `/work/paddle-venv`. Without a header or a
//! compiler nothing is built and [`SKIPPED`] says why; tests then skip, unless
//! `DEVSTREAM_REQUIRE` names `paddle` (then they fail).
//!
//! The library is written to `OUT_DIR` and copied next to the other test plug-ins in the
//! profile directory (`target/<profile>/libdevstream_test_plugin_ref_cpu.so`), where
//! devstream's discovery finds it in `cargo test` and `cargo run --example`.
#![warn(missing_docs)]

/// The built plug-in library, if the build script could build it.
pub const LIBRARY: Option<&str> = option_env!("DEVSTREAM_REF_CPU_LIBRARY");

/// Why the plug-in was not built, if it was not.
pub const SKIPPED: Option<&str> = option_env!("DEVSTREAM_REF_CPU_SKIPPED");

/// The `device_ext.h` the plug-in was compiled against, if it was built.
pub const HEADER: Option<&str> = option_env!("DEVSTREAM_REF_CPU_HEADER");

/// The include directory (holding `paddle/phi/backends/device_ext.h`) the build script found,
/// if it found one.
pub const PADDLE_INCLUDE: Option<&str> = option_env!("DEVSTREAM_REF_CPU_INCLUDE");

/// The device type the plug-in registers.
pub const DEVICE_TYPE: &str = "ref_cpu";

/// The plug-in's first place as text (`ref_cpu:0`) when it was built; otherwise `None`, after
/// printing why for a test that then skips. Panics (failing the test) when it was not built
/// and `DEVSTREAM_REQUIRE` names `paddle`.
pub fn first_place_or_skip() -> Option<String> {
    if let Some(reason) = SKIPPED {
        assert!(
            !paddle_required(),
            "DEVSTREAM_REQUIRE names paddle, but the ref_cpu plug-in was not built: {reason}"
        );
        eprintln!("skipped: the ref_cpu test plug-in was not built: {reason}");
        return None;
    }
    Some(format!("{DEVICE_TYPE}:0"))
}

/// Whether `DEVSTREAM_REQUIRE` (a comma list) names `paddle`: a missing header is then a
/// failure, not a skip.
pub fn paddle_required() -> bool {
    required("paddle")
}

/// Whether `DEVSTREAM_REQUIRE` (a comma list) names `name`.
pub fn required(name: &str) -> bool {
    std::env::var("DEVSTREAM_REQUIRE")
        .map(|list| list.split(',').any(|item| item.trim() == name))
        .unwrap_or(false)
}
