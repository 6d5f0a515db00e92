//! Finds and opens `libamdhip64` at run time and reads the function table from it.
//!
//! Nothing here panics: a library that cannot be opened, or one that lacks a required function,
//! is an `Err` naming what is missing; an optional function that is absent is `None` in the
//! table and turns its capability off.

use crate::sys;
use libloading::Library;
use std::ffi::OsString;

/// Environment variable naming the HIP runtime library to load instead of the usual names (a
/// path or a file name). The test shim (`devstream-hip-shim`) is loaded this way.
pub const LIBRARY_ENV: &str = "DEVSTREAM_HIP_LIBRARY";

/// Environment variable with a comma-separated list of HIP functions to treat as absent, to
/// emulate an older ROCm (`DEVSTREAM_HIP_DISABLE=hipLaunchHostFunc` behaves like ROCm 5.2).
pub const DISABLE_ENV: &str = "DEVSTREAM_HIP_DISABLE";

/// The names tried, in order, when [`LIBRARY_ENV`] is not set.
pub const DEFAULT_NAMES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "/opt/rocm/lib/libamdhip64.so",
];

/// The library names to try, in order.
fn candidates() -> Vec<OsString> {
    match std::env::var_os(LIBRARY_ENV) {
        Some(path) if !path.is_empty() => vec![path],
        _ => {
            let mut names: Vec<OsString> = DEFAULT_NAMES.iter().map(OsString::from).collect();
            if let Some(root) = std::env::var_os("ROCM_PATH") {
                let mut path = std::path::PathBuf::from(root);
                path.push("lib/libamdhip64.so");
                names.push(path.into_os_string());
            }
            names
        }
    }
}

/// Opens the first candidate library that loads; `Err` lists every attempt.
fn open() -> Result<(Library, String), String> {
    let mut attempts = Vec::new();
    for name in candidates() {
        // SAFETY: opening the HIP runtime runs its initialisers, which is what every HIP program
        // does at start-up; we call nothing from it until its symbols are checked.
        match unsafe { Library::new(&name) } {
            Ok(library) => return Ok((library, name.to_string_lossy().into_owned())),
            Err(error) => attempts.push(format!("{}: {error}", name.to_string_lossy())),
        }
    }
    Err(format!(
        "the HIP runtime library could not be loaded (set {LIBRARY_ENV} to its path): {}",
        attempts.join("; ")
    ))
}

fn disabled() -> Vec<String> {
    std::env::var(DISABLE_ENV)
        .map(|list| {
            list.split(',')
                .map(|name| name.trim().to_string())
                .filter(|name| !name.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Looks up one function; `None` when the library lacks it or [`DISABLE_ENV`] names it.
fn symbol<T: Copy>(library: &Library, name: &str, disabled: &[String]) -> Option<T> {
    if disabled.iter().any(|d| d == name) {
        return None;
    }
    let mut c_name = name.as_bytes().to_vec();
    c_name.push(0);
    // SAFETY: `T` is the function-pointer type declared for `name` in `sys` (the C signature
    // from hip_runtime_api.h); looking the symbol up calls nothing. The pointer is used only
    // while the library stays loaded (the table owns it for the process' lifetime).
    unsafe { library.get::<T>(&c_name).ok().map(|symbol| *symbol) }
}

macro_rules! function_table {
    (
        required { $($required:ident),* $(,)? }
        optional { $($optional:ident),* $(,)? }
    ) => {
        /// The HIP functions this backend calls: required ones as plain function pointers,
        /// optional ones as `Option`s. Owns the library, so the pointers stay valid.
        #[allow(non_snake_case)]
        pub(crate) struct Table {
            _library: Library,
            /// Where the library was loaded from.
            pub(crate) path: String,
            /// The library is devstream's HIP-on-CUDA shim (it exports
            /// `devstream_hip_shim_over_cuda`): its host functions run on the CUDA driver's
            /// callback thread, the thread CUDA's own host functions run on.
            pub(crate) over_cuda: bool,
            $(pub(crate) $required: sys::$required,)*
            $(pub(crate) $optional: Option<sys::$optional>,)*
        }

        impl Table {
            /// Opens the library and reads every function; `Err` if the library is absent or
            /// lacks a required function.
            #[allow(non_snake_case)]
            pub(crate) fn load() -> Result<Table, String> {
                let (library, path) = open()?;
                let disabled = disabled();
                let mut missing: Vec<&str> = Vec::new();
                $(
                    let $required = symbol::<sys::$required>(&library, stringify!($required), &disabled);
                    if $required.is_none() {
                        missing.push(stringify!($required));
                    }
                )*
                $(
                    let $optional = symbol::<sys::$optional>(&library, stringify!($optional), &disabled);
                )*
                // SAFETY: looking a symbol up calls nothing; the pointer is not used.
                let over_cuda = unsafe {
                    library.get::<unsafe extern "C" fn()>(b"devstream_hip_shim_over_cuda").is_ok()
                };
                match ($($required,)*) {
                    ($(Some($required),)*) => Ok(Table {
                        _library: library,
                        path,
                        over_cuda,
                        $($required,)*
                        $($optional,)*
                    }),
                    _ => Err(format!(
                        "{path} lacks required HIP functions: {}",
                        missing.join(", ")
                    )),
                }
            }
        }
    };
}

include!("functions.rs");

hip_functions!(function_table);
