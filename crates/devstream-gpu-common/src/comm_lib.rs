//! Finds and opens NCCL (CUDA) or RCCL (HIP) at run time and reads the functions the
//! collectives engine calls. Nothing here panics: a library that cannot be found, or one that
//! lacks a required function, is an `Err` naming every attempt.
//!
//! Search order: the environment variable ([`NCCL_LIBRARY_ENV`] / [`RCCL_LIBRARY_ENV`]) when set
//! (only it); otherwise, for NCCL, the pip wheels' layout (`nvidia-nccl-cu13` / `-cu12`:
//! `<site-packages>/nvidia/nccl/lib/libnccl.so.2`) under `/usr/local/lib/python3*`,
//! `/usr/lib/python3*`, `$VIRTUAL_ENV` and `~/.local`; then the system loader's names.

use crate::raw::{RawApi, RawStream};
use devstream_core::BackendKind;
use libloading::Library;
use std::ffi::{c_char, c_int, c_void, CStr, OsString};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Environment variable naming the NCCL library file to load (CUDA places).
pub const NCCL_LIBRARY_ENV: &str = "DEVSTREAM_NCCL_LIBRARY";
/// Environment variable naming the RCCL library file to load (HIP places). Under the
/// HIP-on-CUDA test shim, RCCL can be NCCL itself: the functions have the same names and
/// signatures, and the shim's HIP streams are CUDA streams.
pub const RCCL_LIBRARY_ENV: &str = "DEVSTREAM_RCCL_LIBRARY";

/// `ncclComm_t`.
pub(crate) type NcclComm = *mut c_void;

/// `ncclUniqueId`: 128 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct NcclUniqueId {
    pub(crate) internal: [u8; devstream_core::UNIQUE_ID_BYTES],
}

/// `ncclResult_t` values.
pub(crate) mod result {
    pub(crate) const SUCCESS: i32 = 0;
    pub(crate) const UNHANDLED_CUDA_ERROR: i32 = 1;
    pub(crate) const SYSTEM_ERROR: i32 = 2;
    pub(crate) const INTERNAL_ERROR: i32 = 3;
    pub(crate) const INVALID_ARGUMENT: i32 = 4;
    pub(crate) const INVALID_USAGE: i32 = 5;
    pub(crate) const REMOTE_ERROR: i32 = 6;
    pub(crate) const IN_PROGRESS: i32 = 7;
}

type GetVersion = unsafe extern "C" fn(version: *mut c_int) -> c_int;
type GetUniqueId = unsafe extern "C" fn(id: *mut NcclUniqueId) -> c_int;
type CommInitRank = unsafe extern "C" fn(
    comm: *mut NcclComm,
    nranks: c_int,
    id: NcclUniqueId,
    rank: c_int,
) -> c_int;
type CommInitAll =
    unsafe extern "C" fn(comms: *mut NcclComm, ndev: c_int, devlist: *const c_int) -> c_int;
type CommFn = unsafe extern "C" fn(comm: NcclComm) -> c_int;
type CommGetAsyncError = unsafe extern "C" fn(comm: NcclComm, error: *mut c_int) -> c_int;
type GetErrorString = unsafe extern "C" fn(result: c_int) -> *const c_char;
type AllReduce = unsafe extern "C" fn(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    comm: NcclComm,
    stream: RawStream,
) -> c_int;
type Broadcast = unsafe extern "C" fn(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    root: c_int,
    comm: NcclComm,
    stream: RawStream,
) -> c_int;
type Reduce = unsafe extern "C" fn(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    op: c_int,
    root: c_int,
    comm: NcclComm,
    stream: RawStream,
) -> c_int;
type AllGather = unsafe extern "C" fn(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    comm: NcclComm,
    stream: RawStream,
) -> c_int;
type Send = unsafe extern "C" fn(
    send: *const c_void,
    count: usize,
    dtype: c_int,
    peer: c_int,
    comm: NcclComm,
    stream: RawStream,
) -> c_int;
type Recv = unsafe extern "C" fn(
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    peer: c_int,
    comm: NcclComm,
    stream: RawStream,
) -> c_int;
type Group = unsafe extern "C" fn() -> c_int;

/// The loaded library and the functions the engine calls (owned: the pointers stay valid for
/// the process' lifetime, as the table lives in a `static`).
pub(crate) struct Nccl {
    _library: Library,
    /// `"NCCL"` or `"RCCL"`.
    pub(crate) name: &'static str,
    /// Where it was loaded from.
    pub(crate) path: String,
    /// `ncclGetVersion` (2.9 on: 10000 × major + 100 × minor + patch).
    pub(crate) version: i32,
    pub(crate) get_unique_id: GetUniqueId,
    pub(crate) comm_init_rank: CommInitRank,
    pub(crate) comm_init_all: Option<CommInitAll>,
    pub(crate) comm_destroy: CommFn,
    pub(crate) comm_abort: CommFn,
    pub(crate) comm_get_async_error: CommGetAsyncError,
    get_error_string: GetErrorString,
    pub(crate) all_reduce: AllReduce,
    pub(crate) broadcast: Broadcast,
    pub(crate) reduce: Reduce,
    pub(crate) all_gather: AllGather,
    /// Same signature as `ncclAllReduce`, with the receive count.
    pub(crate) reduce_scatter: AllReduce,
    pub(crate) send: Send,
    pub(crate) recv: Recv,
    pub(crate) group_start: Group,
    pub(crate) group_end: Group,
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("version", &self.version)
            .finish()
    }
}

impl Nccl {
    /// `ncclGetErrorString`, with the code's name.
    pub(crate) fn describe(&self, code: i32) -> String {
        let name = match code {
            result::SUCCESS => "ncclSuccess",
            result::UNHANDLED_CUDA_ERROR => "ncclUnhandledCudaError",
            result::SYSTEM_ERROR => "ncclSystemError",
            result::INTERNAL_ERROR => "ncclInternalError",
            result::INVALID_ARGUMENT => "ncclInvalidArgument",
            result::INVALID_USAGE => "ncclInvalidUsage",
            result::REMOTE_ERROR => "ncclRemoteError",
            result::IN_PROGRESS => "ncclInProgress",
            _ => "ncclResult",
        };
        // SAFETY: ncclGetErrorString takes any code and returns a static string (or null).
        let text = unsafe { (self.get_error_string)(code) };
        let text = if text.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null result is a NUL-terminated static string.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        };
        format!("{name} ({code}): {text}")
    }

    /// The version as `major.minor.patch`.
    pub(crate) fn version_text(&self) -> String {
        let v = self.version;
        if v >= 10000 {
            format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
        } else {
            format!("{}.{}.{}", v / 1000, (v / 100) % 10, v % 100)
        }
    }
}

/// What one backend looks for.
struct Spec {
    name: &'static str,
    env: &'static str,
    file: &'static str,
    system: &'static [&'static str],
    pip: bool,
}

fn spec(kind: BackendKind) -> Spec {
    match kind {
        BackendKind::Hip => Spec {
            name: "RCCL",
            env: RCCL_LIBRARY_ENV,
            file: "librccl.so.1",
            system: &[
                "librccl.so.1",
                "librccl.so",
                "/opt/rocm/lib/librccl.so.1",
                "/opt/rocm/lib/librccl.so",
            ],
            pip: false,
        },
        _ => Spec {
            name: "NCCL",
            env: NCCL_LIBRARY_ENV,
            file: "libnccl.so.2",
            system: &["libnccl.so.2", "libnccl.so"],
            pip: true,
        },
    }
}

/// `<dir>/python3*/{dist,site}-packages` for each directory that exists.
fn site_packages(lib_dir: PathBuf, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(&lib_dir) else {
        return;
    };
    let mut pythons: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    // Newest Python first (3.12 before 3.9).
    let minor = |path: &PathBuf| -> u32 {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        name.and_then(|n| n.strip_prefix("python3.").and_then(|m| m.parse().ok()))
            .unwrap_or(0)
    };
    pythons.sort_by_key(|path| std::cmp::Reverse(minor(path)));
    for python in pythons {
        for sub in ["dist-packages", "site-packages"] {
            out.push(python.join(sub));
        }
    }
}

/// The `site-packages` directories searched for pip wheels, in order.
fn pip_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    site_packages(PathBuf::from("/usr/local/lib"), &mut roots);
    site_packages(PathBuf::from("/usr/lib"), &mut roots);
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        site_packages(PathBuf::from(venv).join("lib"), &mut roots);
    }
    if let Some(home) = std::env::var_os("HOME") {
        site_packages(PathBuf::from(home).join(".local/lib"), &mut roots);
    }
    roots
}

/// The files to try, in order: `explicit` (the variable's value) alone when set; else the
/// wheels' library files that exist under `roots` (NCCL only), then the loader's names.
fn candidates_from(spec: &Spec, explicit: Option<OsString>, roots: &[PathBuf]) -> Vec<OsString> {
    if let Some(path) = explicit.filter(|p| !p.is_empty()) {
        return vec![path];
    }
    let mut names: Vec<OsString> = Vec::new();
    if spec.pip {
        names.extend(
            roots
                .iter()
                .map(|root| root.join("nvidia/nccl/lib").join(spec.file))
                .filter(|path| path.is_file())
                .map(PathBuf::into_os_string),
        );
    } else if let Some(root) = std::env::var_os("ROCM_PATH") {
        names.push(
            PathBuf::from(root)
                .join("lib")
                .join(spec.file)
                .into_os_string(),
        );
    }
    names.extend(spec.system.iter().map(OsString::from));
    names
}

fn candidates(spec: &Spec) -> Vec<OsString> {
    let roots = if spec.pip { pip_roots() } else { Vec::new() };
    candidates_from(spec, std::env::var_os(spec.env), &roots)
}

/// Looks one function up; `None` when absent.
fn symbol<T: Copy>(library: &Library, name: &str) -> Option<T> {
    let mut c_name = name.as_bytes().to_vec();
    c_name.push(0);
    // SAFETY: `T` is the function-pointer type declared above for `name` (the C signature from
    // nccl.h, which RCCL shares); looking it up calls nothing, and the pointer is used only
    // while the library stays loaded (the table owns it, in a `static`).
    unsafe { library.get::<T>(&c_name).ok().map(|s| *s) }
}

fn load(kind: BackendKind) -> Result<Nccl, String> {
    let spec = spec(kind);
    let names = candidates(&spec);
    load_from(&spec, names)
}

/// Opens the first of `names` that loads and reads its functions.
fn load_from(spec: &Spec, names: Vec<OsString>) -> Result<Nccl, String> {
    let mut attempts = Vec::new();
    let mut opened = None;
    for name in names {
        // SAFETY: opening the library runs its initialisers, as linking it would; nothing is
        // called until its functions are checked.
        match unsafe { Library::new(&name) } {
            Ok(library) => {
                opened = Some((library, name.to_string_lossy().into_owned()));
                break;
            }
            Err(error) => attempts.push(format!("{}: {error}", name.to_string_lossy())),
        }
    }
    let Some((library, path)) = opened else {
        return Err(format!(
            "{} could not be loaded (set {} to the library file{}): {}",
            spec.name,
            spec.env,
            if spec.pip {
                ", or `pip install nvidia-nccl-cu13`"
            } else {
                ""
            },
            attempts.join("; ")
        ));
    };
    let mut missing: Vec<&str> = Vec::new();
    macro_rules! required {
        ($name:literal) => {{
            let f = symbol(&library, $name);
            if f.is_none() {
                missing.push($name);
            }
            f
        }};
    }
    let get_version: Option<GetVersion> = required!("ncclGetVersion");
    let get_unique_id = required!("ncclGetUniqueId");
    let comm_init_rank = required!("ncclCommInitRank");
    let comm_destroy = required!("ncclCommDestroy");
    let comm_abort = required!("ncclCommAbort");
    let comm_get_async_error = required!("ncclCommGetAsyncError");
    let get_error_string = required!("ncclGetErrorString");
    let all_reduce = required!("ncclAllReduce");
    let broadcast = required!("ncclBroadcast");
    let reduce = required!("ncclReduce");
    let all_gather = required!("ncclAllGather");
    let reduce_scatter = required!("ncclReduceScatter");
    let send = required!("ncclSend");
    let recv = required!("ncclRecv");
    let group_start = required!("ncclGroupStart");
    let group_end = required!("ncclGroupEnd");
    let comm_init_all = symbol(&library, "ncclCommInitAll");
    let (
        Some(get_version),
        Some(get_unique_id),
        Some(comm_init_rank),
        Some(comm_destroy),
        Some(comm_abort),
        Some(comm_get_async_error),
        Some(get_error_string),
        Some(all_reduce),
        Some(broadcast),
        Some(reduce),
        Some(all_gather),
        Some(reduce_scatter),
        Some(send),
        Some(recv),
        Some(group_start),
        Some(group_end),
    ) = (
        get_version,
        get_unique_id,
        comm_init_rank,
        comm_destroy,
        comm_abort,
        comm_get_async_error,
        get_error_string,
        all_reduce,
        broadcast,
        reduce,
        all_gather,
        reduce_scatter,
        send,
        recv,
        group_start,
        group_end,
    )
    else {
        return Err(format!(
            "{path} lacks required {} functions: {}",
            spec.name,
            missing.join(", ")
        ));
    };
    let mut version: c_int = 0;
    // SAFETY: ncclGetVersion writes one int.
    let code = unsafe { get_version(&mut version) };
    if code != result::SUCCESS {
        return Err(format!("{path}: ncclGetVersion failed with code {code}"));
    }
    Ok(Nccl {
        _library: library,
        name: spec.name,
        path,
        version,
        get_unique_id,
        comm_init_rank,
        comm_init_all,
        comm_destroy,
        comm_abort,
        comm_get_async_error,
        get_error_string,
        all_reduce,
        broadcast,
        reduce,
        all_gather,
        reduce_scatter,
        send,
        recv,
        group_start,
        group_end,
    })
}

/// The collectives library of backend `A`, loaded on first call (never panics); `Err` says
/// what was tried.
pub(crate) fn library<A: RawApi>() -> Result<&'static Nccl, String> {
    static NCCL: OnceLock<Result<Nccl, String>> = OnceLock::new();
    static RCCL: OnceLock<Result<Nccl, String>> = OnceLock::new();
    let cell = match A::KIND {
        BackendKind::Hip => &RCCL,
        _ => &NCCL,
    };
    cell.get_or_init(|| load(A::KIND))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pip layout is found under a `site-packages` root (newest Python first), RCCL is not
    /// looked for there, and an explicit variable wins over every search.
    #[test]
    fn pip_wheels_are_found_and_the_variable_wins() {
        let root = std::env::temp_dir().join(format!("devstream-nccl-{}", std::process::id()));
        let lib = root.join("lib/python3.12/site-packages/nvidia/nccl/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(root.join("lib/python3.9/dist-packages")).unwrap();
        std::fs::write(lib.join("libnccl.so.2"), b"").unwrap();
        let mut roots = Vec::new();
        site_packages(root.join("lib"), &mut roots);
        assert_eq!(roots[0], root.join("lib/python3.12/dist-packages"));
        assert_eq!(roots[2], root.join("lib/python3.9/dist-packages"));
        let wheel = lib.join("libnccl.so.2").into_os_string();
        let nccl = spec(BackendKind::Cuda);
        let names = candidates_from(&nccl, None, &roots);
        assert_eq!(names[0], wheel, "{names:?}");
        assert_eq!(names.last(), Some(&OsString::from("libnccl.so")));
        let hip = candidates_from(&spec(BackendKind::Hip), None, &roots);
        assert!(!hip.contains(&wheel), "{hip:?}");
        let explicit = OsString::from("/somewhere/libnccl.so.2");
        assert_eq!(
            candidates_from(&nccl, Some(explicit.clone()), &roots),
            vec![explicit]
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The installed NCCL (if any) has every function the engine calls, reports a version and
    /// describes its errors (no GPU needed); required where `DEVSTREAM_REQUIRE` lists `nccl`. Run
    /// here (no GPU) against the `nvidia-nccl-cu13` wheel's NCCL 2.32.3 through `$VIRTUAL_ENV`.
    #[test]
    fn the_installed_nccl_has_every_function_called() {
        let required = std::env::var("DEVSTREAM_REQUIRE")
            .is_ok_and(|list| list.split(',').any(|k| k.trim() == "nccl"));
        match load(BackendKind::Cuda) {
            Ok(nccl) => {
                eprintln!("{} {} at {}", nccl.name, nccl.version_text(), nccl.path);
                assert!(nccl.version > 0);
                assert!(nccl
                    .describe(result::INVALID_USAGE)
                    .contains("ncclInvalidUsage"));
                eprintln!("{}", nccl.describe(result::REMOTE_ERROR));
                // No ncclGetUniqueId here: called from this test, which never initialises the
                // CUDA driver, NCCL 2.28.3 died with SIGSEGV on an H200, while the engine's own
                // path (UniqueId::new on a CUDA place, after the device is set up) ran in the
                // same session (docs/results/2026-11-24-gpu/7-nccl-one-gpu).
            }
            Err(reason) if !required => eprintln!("skipped: {reason}"),
            Err(reason) => panic!("DEVSTREAM_REQUIRE lists nccl: {reason}"),
        }
    }

    /// A file that is not a library: an error naming it and the variable, no panic.
    #[test]
    fn a_file_that_is_not_a_library_is_an_error() {
        let path =
            std::env::temp_dir().join(format!("devstream-not-rccl-{}.so", std::process::id()));
        std::fs::write(&path, b"not an ELF file").unwrap();
        let error =
            load_from(&spec(BackendKind::Hip), vec![path.clone().into_os_string()]).unwrap_err();
        assert!(error.contains(&*path.to_string_lossy()), "{error}");
        assert!(error.contains(RCCL_LIBRARY_ENV), "{error}");
        let _ = std::fs::remove_file(&path);
    }
}
