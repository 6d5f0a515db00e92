//! `InitPlugin` as Paddle calls it: on copies of the built library named for a device type,
//! loaded with `dlopen`, with the sizes of the published layouts and others.
#![allow(clippy::undocumented_unsafe_blocks)] // test calls through the C ABI; each is commented

use devstream_paddle::sys::*;
use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};

/// The cdylib cargo built next to this test (`target/<profile>/deps/libdevstream_paddle.so`).
fn built_library() -> PathBuf {
    devstream_core::build_tree::built_library("devstream_paddle")
        .expect("cargo builds the cdylib with the tests")
}

/// A fresh directory for `test` with a copy of the library under `name` (a file of its own:
/// overwriting a loaded library in place would pull the pages from under the process).
fn copy_as(test: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "devstream-paddle-test-{}-{test}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::copy(built_library(), &path).unwrap();
    path
}

type InitPlugin = unsafe extern "C" fn(*mut CustomRuntimeParams);

/// Opens `path` (never closed: the library pins itself once it registers), removes the copy's
/// directory and answers its `InitPlugin`.
fn open(path: &Path) -> InitPlugin {
    let c = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: loading a library built from this crate; its constructors are Rust's (none).
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "dlopen {}", path.display());
    // SAFETY: a symbol lookup in a live handle.
    let symbol = unsafe { libc::dlsym(handle, c"InitPlugin".as_ptr()) };
    assert!(!symbol.is_null());
    // The loader keeps the mapping (and the name `dladdr` reports) after the file is gone: the
    // copy's directory is removed now, so no run leaves a library copy behind in the temp dir.
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
    // SAFETY: `InitPlugin` has this signature (`sys::InitPluginFn`).
    unsafe { std::mem::transmute::<*mut c_void, InitPlugin>(symbol) }
}

/// Calls `init` with zeroed params of `params_size` bytes and a table of `interface_size`
/// bytes announced, inside buffers of 4 KiB filled with 0xAB beyond the announced sizes.
/// Answers the registered device type and whether anything beyond the sizes was written.
fn offer(init: InitPlugin, params_size: usize, interface_size: usize) -> (Option<String>, bool) {
    let mut params = vec![0xABu8; 4096];
    let mut table = vec![u64::from_ne_bytes([0xAB; 8]); 512];
    // The fields the plug-in writes (through `sub_device_type`) start zeroed even when the
    // announced size is smaller.
    params[..params_size.max(56)].fill(0);
    let table_bytes = table.as_mut_ptr().cast::<u8>();
    // SAFETY: 4 KiB buffers; the sizes are at most 1128 bytes.
    unsafe {
        table_bytes.write_bytes(0, interface_size);
        table_bytes.cast::<usize>().write(interface_size);
        let p = params.as_mut_ptr().cast::<CustomRuntimeParams>();
        std::ptr::addr_of_mut!((*p).size).write_unaligned(params_size);
        std::ptr::addr_of_mut!((*p).interface).write_unaligned(table_bytes.cast());
        init(p);
    }
    let untouched_params = params[params_size.max(56)..].iter().all(|&b| b == 0xAB);
    // SAFETY: within the 4 KiB table buffer.
    // (The test itself wrote the `size` word.)
    let from = interface_size.max(8);
    let rest = unsafe { std::slice::from_raw_parts(table_bytes.add(from), 4096 - from) };
    let untouched = untouched_params && rest.iter().all(|&b| b == 0xAB);
    // SAFETY: `device_type` lies at offset 40 of every layout.
    let device_type = unsafe { params.as_ptr().add(40).cast::<*const i8>().read_unaligned() };
    let name = (!device_type.is_null())
        // SAFETY: a static C string the plug-in wrote.
        .then(|| {
            unsafe { CStr::from_ptr(device_type) }
                .to_str()
                .unwrap()
                .to_owned()
        });
    if name.is_some() {
        // The required functions are filled.
        // SAFETY: the table's first 59 words are initialised (zeroed, then filled).
        let words = unsafe { std::slice::from_raw_parts(table_bytes.cast::<usize>(), 59) };
        for (index, field) in [
            (4, "set_device"),
            (7, "create_stream"),
            (27, "allocate"),
            (50, "count"),
        ] {
            assert_ne!(words[index], 0, "{field}");
        }
        // SAFETY: `version` lies at offset 16.
        let version = unsafe {
            params
                .as_ptr()
                .add(16)
                .cast::<[usize; 3]>()
                .read_unaligned()
        };
        assert_eq!(version, [0, 1, 1]);
    }
    (name, !untouched)
}

#[test]
fn a_copy_registers_the_type_its_name_names_once() {
    let init = open(&copy_as("a_copy", "libdevstream_cpu.so"));
    // Sizes of no published release: nothing is written.
    assert_eq!(offer(init, 96, 2048), (None, false));
    assert_eq!(offer(init, 96, 912), (None, false));
    assert_eq!(offer(init, 0, 912), (None, false));
    assert_eq!(offer(init, 0, 4000), (None, false));
    assert_eq!(offer(init, 0, 0), (None, false));
    // Paddle 2.6: 88-byte params, 912-byte table; nothing written beyond either.
    assert_eq!(offer(init, 88, 912), (Some("devstream_cpu".into()), false));
    // Registered: a second call of the same image registers nothing more.
    assert_eq!(offer(init, 96, 1128), (None, false));
    // SAFETY: a null params pointer is refused without a crash.
    unsafe { init(std::ptr::null_mut()) };
}

#[test]
fn the_3_3_table_alone_identifies_the_plug_in_as_devstreams_loader_asks() {
    // devstream's loader offers params size 0 with one known table size at a time.
    let init = open(&copy_as("table_only", "libdevstream_cpu.so"));
    for table in [912, 920, 976, 1032] {
        assert_eq!(offer(init, 0, table), (None, false), "{table}");
    }
    assert_eq!(offer(init, 0, 1128), (Some("devstream_cpu".into()), false));
}

#[test]
fn the_3_3_table_is_filled_within_its_size() {
    let init = open(&copy_as("the_3_3", "libdevstream_cpu.so"));
    assert_eq!(offer(init, 96, 1128), (Some("devstream_cpu".into()), false));
}

#[test]
fn a_type_without_places_registers_nothing() {
    use devstream_paddle::runtime::places_of;
    use devstream_paddle::select::Backend;
    // A backend with no place here (not compiled in, no runtime, or no device).
    let Some(absent) = [Backend::Hip, Backend::Cuda, Backend::Wgpu]
        .into_iter()
        .find(|b| places_of(*b).is_empty())
    else {
        eprintln!("every backend has a place here: nothing to check");
        return;
    };
    let init = open(&copy_as("no_places", &absent.library_file_name()));
    assert_eq!(offer(init, 96, 1128), (None, false));
    assert_eq!(offer(init, 96, 1032), (None, false), "nor on a retry");
}

#[test]
fn a_generic_name_takes_the_next_backend_per_call() {
    // As through symbolic links: one image, one call per name.
    let init = open(&copy_as("generic", "libdevstream_paddle.so"));
    assert_eq!(offer(init, 96, 1128).0.as_deref(), Some("devstream_cpu"));
    let second = offer(init, 96, 1128).0;
    assert_ne!(second.as_deref(), Some("devstream_cpu"));
}
