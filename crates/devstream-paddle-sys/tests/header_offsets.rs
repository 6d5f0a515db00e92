//! The declarations against the real `device_ext.h` of PaddlePaddle wheels: a C++ program compiled
//! here (with `g++`, or `CXX`) against the header prints `sizeof` of both structs and
//! `offsetof` of every field devstream declares; each must equal the Rust declaration. A
//! field the header lacks fails the compile; a field devstream lacks shifts a later offset or
//! the size.
//!
//! * The installed wheel (Paddle 3.3): the header the `ref_cpu` test plug-in was built
//!   against (`DEVSTREAM_PADDLE_INCLUDE`, `.venv-paddle`, `/work/paddle-venv`), checked
//!   against [`C_DeviceInterface`]. Skipped without a header unless `DEVSTREAM_REQUIRE` names
//!   `paddle`.
//! * A Paddle 2.x wheel's header in `DEVSTREAM_PADDLE2_INCLUDE` (CI unpacks 2.6.2's), checked
//!   against [`sys::paddle_2_6`]. Skipped without it unless `DEVSTREAM_REQUIRE` names
//!   `paddle2`.

use devstream_paddle_sys::{self as sys, AbiField, C_DeviceInterface, CustomRuntimeParams};
use devstream_test_plugin_ref_cpu as ref_cpu;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One header's structs as devstream declares them.
struct Declared {
    params_size: usize,
    params: &'static [AbiField],
    table_size: usize,
    table: &'static [AbiField],
}

/// Compiles and runs the offset program against `include`; answers what it printed, by key
/// (`sizeof CustomRuntimeParams`, `C_DeviceInterface.<field>`, ...).
fn measure(include: &Path, declared: &Declared, label: &str) -> HashMap<String, usize> {
    let dir = std::env::temp_dir().join(format!(
        "devstream-header-offsets-{label}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut program = String::from(
        "#include <cstdint>\n#include <cstddef>\n#include <cstdio>\n\
         #include \"paddle/phi/backends/device_ext.h\"\nint main() {\n\
         printf(\"sizeof CustomRuntimeParams %zu\\n\", sizeof(CustomRuntimeParams));\n\
         printf(\"sizeof C_DeviceInterface %zu\\n\", sizeof(C_DeviceInterface));\n",
    );
    for (strukt, fields) in [
        ("CustomRuntimeParams", declared.params),
        ("C_DeviceInterface", declared.table),
    ] {
        for AbiField { name: field, .. } in fields {
            program.push_str(&format!(
                "printf(\"{strukt}.{field} %zu\\n\", offsetof({strukt}, {field}));\n"
            ));
        }
    }
    program.push_str("return 0;\n}\n");
    let source = dir.join("offsets.cc");
    let binary = dir.join("offsets");
    std::fs::write(&source, program).unwrap();
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let compiled = Command::new(&compiler)
        .args(["-std=c++17", "-o"])
        .arg(&binary)
        .arg("-I")
        .arg(include)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
    assert!(
        compiled.status.success(),
        "{label}: the offset program does not compile against {} (a field devstream declares \
         is missing there?):\n{}",
        include.display(),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let run = Command::new(&binary).output().unwrap();
    assert!(run.status.success(), "{label}: the offset program failed");
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (key, value) = line.rsplit_once(' ').unwrap();
            (key.to_owned(), value.parse().unwrap())
        })
        .collect()
}

/// Every size and offset the header gives must be the declared one.
fn compare(include: &Path, declared: &Declared, label: &str) {
    let measured = measure(include, declared, label);
    let mut expected = vec![
        (
            "sizeof CustomRuntimeParams".to_owned(),
            declared.params_size,
        ),
        ("sizeof C_DeviceInterface".to_owned(), declared.table_size),
    ];
    for (strukt, fields) in [
        ("CustomRuntimeParams", declared.params),
        ("C_DeviceInterface", declared.table),
    ] {
        expected.extend(
            fields
                .iter()
                .map(|field| (format!("{strukt}.{}", field.name), field.offset)),
        );
    }
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(key, value)| measured.get(key) != Some(value))
        .map(|(key, value)| format!("{key}: header {:?}, declared {value}", measured.get(key)))
        .collect();
    assert!(
        wrong.is_empty(),
        "{label} ({}): {} of {} differ:\n{}",
        include.display(),
        wrong.len(),
        expected.len(),
        wrong.join("\n")
    );
    eprintln!(
        "{label}: {} sizes and offsets equal the header's ({})",
        expected.len(),
        include.display()
    );
}

/// The include directory to check, or `None` (said) when absent and not required.
fn include(found: Option<PathBuf>, required: &str, what: &str) -> Option<PathBuf> {
    match found {
        Some(dir) => Some(dir),
        None => {
            assert!(
                !ref_cpu::required(required),
                "DEVSTREAM_REQUIRE names {required}, but {what}"
            );
            eprintln!("skipped: {what}");
            None
        }
    }
}

#[cfg(target_pointer_width = "64")]
#[test]
fn paddle_3_3_header_offsets_equal_the_declarations() {
    let found = std::env::var_os("DEVSTREAM_PADDLE_INCLUDE")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| ref_cpu::PADDLE_INCLUDE.map(PathBuf::from));
    let Some(dir) = include(
        found,
        "paddle",
        "no installed Paddle wheel's device_ext.h (DEVSTREAM_PADDLE_INCLUDE, .venv-paddle)",
    ) else {
        return;
    };
    compare(
        &dir,
        &Declared {
            params_size: std::mem::size_of::<CustomRuntimeParams>(),
            params: sys::CUSTOM_RUNTIME_PARAMS_FIELDS,
            table_size: std::mem::size_of::<C_DeviceInterface>(),
            table: sys::C_DEVICE_INTERFACE_FIELDS,
        },
        "paddle-3.3",
    );
}

#[cfg(target_pointer_width = "64")]
#[test]
fn paddle_2_6_header_offsets_equal_the_declarations() {
    let found = std::env::var_os("DEVSTREAM_PADDLE2_INCLUDE")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let Some(dir) = include(
        found,
        "paddle2",
        "no Paddle 2.x device_ext.h (DEVSTREAM_PADDLE2_INCLUDE)",
    ) else {
        return;
    };
    compare(
        &dir,
        &Declared {
            params_size: std::mem::size_of::<sys::paddle_2_6::CustomRuntimeParams>(),
            params: sys::paddle_2_6::CUSTOM_RUNTIME_PARAMS_FIELDS,
            table_size: std::mem::size_of::<sys::paddle_2_6::C_DeviceInterface>(),
            table: sys::paddle_2_6::C_DEVICE_INTERFACE_FIELDS,
        },
        "paddle-2.6",
    );
}
