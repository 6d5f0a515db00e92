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
/// `ncclSend` (`Buffer` = `*const c_void`) and `ncclRecv` (`*mut c_void`).
type PeerFn<Buffer> = unsafe extern "C" fn(
    buffer: Buffer,
    count: usize,
    dtype: c_int,
    peer: c_int,
    comm: NcclComm,
    stream: RawStream,
) -> c_int;
type Group = unsafe extern "C" fn() -> c_int;

/// The library's functions the engine needs, each named once with its symbol: the struct and
/// its loading ([`Functions::read`]) are generated from this one list.
macro_rules! functions {
    ($($(#[$doc:meta])* $vis:vis $field:ident: $ty:ty = $symbol:literal;)*) => {
        /// The required functions of a loaded library.
        pub(crate) struct Functions {
            $($(#[$doc])* $vis $field: $ty,)*
        }

        impl Functions {
            /// Reads every function from `library`, or names each one it lacks.
            fn read(library: &Library) -> Result<Functions, Vec<&'static str>> {
                $(let $field: Option<$ty> = symbol(library, $symbol);)*
                let present = [$(($symbol, $field.is_some())),*];
                match ($($field,)*) {
                    ($(Some($field),)*) => Ok(Functions { $($field,)* }),
                    _ => Err(present
                        .into_iter()
                        .filter(|(_, found)| !found)
                        .map(|(symbol, _)| symbol)
                        .collect()),
                }
            }
        }
    };
}

functions! {
    get_version: GetVersion = "ncclGetVersion";
    pub(crate) get_unique_id: GetUniqueId = "ncclGetUniqueId";
    pub(crate) comm_init_rank: CommInitRank = "ncclCommInitRank";
    pub(crate) comm_destroy: CommFn = "ncclCommDestroy";
    pub(crate) comm_abort: CommFn = "ncclCommAbort";
    pub(crate) comm_get_async_error: CommGetAsyncError = "ncclCommGetAsyncError";
    get_error_string: GetErrorString = "ncclGetErrorString";
    pub(crate) all_reduce: AllReduce = "ncclAllReduce";
    pub(crate) broadcast: Broadcast = "ncclBroadcast";
    pub(crate) reduce: Reduce = "ncclReduce";
    pub(crate) all_gather: AllGather = "ncclAllGather";
    /// Same signature as `ncclAllReduce`, with the receive count.
    pub(crate) reduce_scatter: AllReduce = "ncclReduceScatter";
    pub(crate) send: PeerFn<*const c_void> = "ncclSend";
    pub(crate) recv: PeerFn<*mut c_void> = "ncclRecv";
    pub(crate) group_start: Group = "ncclGroupStart";
    pub(crate) group_end: Group = "ncclGroupEnd";
}

/// The loaded library and the functions the engine calls (owned: the pointers stay valid for
/// the process' lifetime, as the table lives in a `static`). Its required functions are
/// reached through `Deref` (`lib.all_reduce`).
pub(crate) struct Nccl {
    _library: Library,
    /// `"NCCL"` or `"RCCL"`.
    pub(crate) name: &'static str,
    /// Where it was loaded from.
    pub(crate) path: String,
    /// `ncclGetVersion` (2.9 on: 10000 × major + 100 × minor + patch).
    pub(crate) version: i32,
    /// `ncclCommInitAll`, where the library has it.
    pub(crate) comm_init_all: Option<CommInitAll>,
    functions: Functions,
}

impl std::ops::Deref for Nccl {
    type Target = Functions;

    fn deref(&self) -> &Functions {
        &self.functions
    }
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
    let functions = Functions::read(&library).map_err(|missing| {
        format!(
            "{path} lacks required {} functions: {}",
            spec.name,
            missing.join(", ")
        )
    })?;
    let comm_init_all = symbol(&library, "ncclCommInitAll");
    let mut version: c_int = 0;
    // SAFETY: ncclGetVersion writes one int.
    let code = unsafe { (functions.get_version)(&mut version) };
    if code != result::SUCCESS {
        return Err(format!("{path}: ncclGetVersion failed with code {code}"));
    }
    Ok(Nccl {
        _library: library,
        name: spec.name,
        path,
        version,
        comm_init_all,
        functions,
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
    /// describes its errors (no GPU needed); required where `DEVSTREAM_REQUIRE` lists `nccl` (the
    /// `nvidia-nccl-cu13` wheel's NCCL is found through `$VIRTUAL_ENV`).
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
                // No ncclGetUniqueId here: called from a test that never initialises the CUDA
                // driver, NCCL can crash (SIGSEGV), while the engine's own path (UniqueId::new on
                // a CUDA place, after the device is set up) works.
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
