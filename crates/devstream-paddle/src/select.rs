//! Which device type an `InitPlugin` call registers, and which table layouts are accepted.
//!
//! Paddle calls `InitPlugin` once per library file it opens, and each call registers one device
//! type. One built library serves every type through **copies named after the type**:
//! `libdevstream_cpu.so` registers `devstream_cpu`, `libdevstream_wgpu.so` `devstream_wgpu`,
//! and so on (`cargo xtask paddle-plugins` writes them). A copy is a file of its own, so the
//! dynamic loader maps it separately, with its own statics: each type runs its own devstream.
//!
//! The library finds its own file name with `dladdr`. For one image, the order in which calls
//! take backends is: the backend its file name names (if any), then the backends listed in
//! `DEVSTREAM_PADDLE_BACKENDS` (comma separated: `cpu,wgpu,cuda,hip`), or, without that
//! variable, every compiled backend in the order cpu, wgpu, cuda, hip. Each call registers the
//! first backend of that order that this image has not registered yet and that has at least
//! one place on this machine; when none is left the call returns without writing
//! `device_type`, which Paddle (and devstream's loader) skip cleanly.
//!
//! This also covers symbolic links: `dlopen` of two names of one file returns one handle
//! (glibc compares device and inode), so Paddle calls the one image's `InitPlugin` once per
//! name, and each call takes the next backend. `dladdr` reports the name the file was first
//! opened under. devstream's own loader opens a file once whatever its names, so it sees only
//! the first type of a set of links: use copies for it.

use std::ffi::CStr;

/// A devstream backend that can be served as a Paddle device type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// `devstream_cpu`: `Place::Cpu`.
    Cpu = 0,
    /// `devstream_wgpu`: `Place::Wgpu(n)`.
    Wgpu = 1,
    /// `devstream_cuda`: `Place::Cuda(n)`.
    Cuda = 2,
    /// `devstream_hip`: `Place::Hip(n)`.
    Hip = 3,
}

impl Backend {
    /// Every backend, in the default registration order.
    pub const ALL: [Backend; 4] = [Backend::Cpu, Backend::Wgpu, Backend::Cuda, Backend::Hip];

    /// The short name (`cpu`, `wgpu`, `cuda`, `hip`).
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Wgpu => "wgpu",
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
        }
    }

    /// The backend a short name names.
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name.trim())
    }

    /// The Paddle device type (`devstream_cpu`, ...).
    pub fn device_type(self) -> &'static CStr {
        match self {
            Backend::Cpu => c"devstream_cpu",
            Backend::Wgpu => c"devstream_wgpu",
            Backend::Cuda => c"devstream_cuda",
            Backend::Hip => c"devstream_hip",
        }
    }

    /// The file name of the copy that registers this type (`libdevstream_cpu.so` on Linux).
    pub fn library_file_name(self) -> String {
        format!(
            "{}devstream_{}{}",
            std::env::consts::DLL_PREFIX,
            self.name(),
            std::env::consts::DLL_SUFFIX
        )
    }

    /// The facade's backend kind.
    pub fn kind(self) -> devstream::BackendKind {
        match self {
            Backend::Cpu => devstream::BackendKind::Cpu,
            Backend::Wgpu => devstream::BackendKind::Wgpu,
            Backend::Cuda => devstream::BackendKind::Cuda,
            Backend::Hip => devstream::BackendKind::Hip,
        }
    }

    /// Whether the facade this library was built with includes the backend (this crate's cargo
    /// features `cpu`, `wgpu`, `cuda`, `hip` turn the facade's on; cargo may unify more).
    pub fn compiled(self) -> bool {
        devstream::compiled_backends().contains(&self.kind())
    }

    /// The index used for per-backend tables (`Backend as usize`).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The backend a library file name names: `libdevstream_wgpu.so` (any directory, any of the
/// platform's library suffixes, a version suffix like `.so.1` allowed) is `Wgpu`.
pub fn backend_of_file_name(file_name: &str) -> Option<Backend> {
    let base = file_name.rsplit('/').next()?;
    let stem = base.strip_prefix("lib").unwrap_or(base);
    let stem = stem.split('.').next()?;
    let name = stem.strip_prefix("devstream_")?;
    Backend::from_name(name)
}

/// The order in which `InitPlugin` calls of one image take backends (see the module docs):
/// the file's own backend first, then `env_list` (`DEVSTREAM_PADDLE_BACKENDS`) or every
/// backend; each at most once, unknown names ignored.
pub fn registration_order(file_name: Option<&str>, env_list: Option<&str>) -> Vec<Backend> {
    let mut order = Vec::new();
    if let Some(own) = file_name.and_then(backend_of_file_name) {
        order.push(own);
    }
    match env_list {
        Some(list) => order.extend(list.split(',').filter_map(Backend::from_name)),
        None => order.extend(Backend::ALL),
    }
    let mut seen = Vec::new();
    order.retain(|b| {
        let fresh = !seen.contains(b);
        seen.push(*b);
        fresh
    });
    order
}

/// A family of table layouts the plug-in accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Paddle 2.x: 88-byte `CustomRuntimeParams` (2.6: a 912-byte table).
    Paddle2 {
        /// The table size the host announced.
        interface_size: usize,
    },
    /// Paddle 3.x: 96-byte params; a table of 920 to 1032 bytes (3.0–3.2) or 1128 bytes (3.3:
    /// graph-capture functions after the BLAS handles).
    Paddle3 {
        /// The table size the host announced.
        interface_size: usize,
    },
}

impl Layout {
    /// The table size the host announced.
    pub fn interface_size(self) -> usize {
        match self {
            Layout::Paddle2 { interface_size } | Layout::Paddle3 { interface_size } => {
                interface_size
            }
        }
    }
}

/// `sizeof(C_DeviceInterface)` of the Paddle 3.3 table (with graph capture).
pub const INTERFACE_SIZE_3_3: usize = crate::sys::LAYOUT_PADDLE_3_3.interface_size;

/// The layout a host announces with these two sizes, or `None`.
///
/// Accepted, as Paddle's own `PADDLE_CUSTOM_RUNTIME_CHECK_VERSION` accepts when *either* size
/// matches the header a plug-in was built against:
/// * a table of exactly the size of the 3.3 table this crate declares (1128 bytes), whatever
///   the params size: the fields written into the params (`version`, `device_type`,
///   `sub_device_type`, offsets 16..56) exist in every params layout. devstream's loader
///   identifies a plug-in's table this way (params size 0, one known table size at a time),
///   so this is how it learns that the graph-capture functions are there;
/// * the exact pairs of the older releases [`crate::sys::KNOWN_LAYOUTS`] lists (88/912 for
///   2.6; 96 with 920, 976 or 1032 for 3.0 to 3.2): only their stable prefix is filled.
///
/// Any other pair is refused (on 32-bit targets every pair).
pub fn classify(params_size: usize, interface_size: usize) -> Option<Layout> {
    if cfg!(not(target_pointer_width = "64")) {
        return None;
    }
    if interface_size == INTERFACE_SIZE_3_3 {
        return Some(Layout::Paddle3 { interface_size });
    }
    let known = crate::sys::KNOWN_LAYOUTS
        .iter()
        .any(|l| l.params_size == params_size && l.interface_size == interface_size);
    if !known {
        return None;
    }
    if params_size == std::mem::size_of::<crate::sys::CustomRuntimeParams>() {
        Some(Layout::Paddle3 { interface_size })
    } else {
        Some(Layout::Paddle2 { interface_size })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_name_backends() {
        assert_eq!(
            backend_of_file_name("/x/y/libdevstream_wgpu.so"),
            Some(Backend::Wgpu)
        );
        assert_eq!(
            backend_of_file_name("libdevstream_cpu.so.1"),
            Some(Backend::Cpu)
        );
        assert_eq!(
            backend_of_file_name("devstream_hip.dll"),
            Some(Backend::Hip)
        );
        assert_eq!(backend_of_file_name("libdevstream_paddle.so"), None);
        assert_eq!(backend_of_file_name("libdevstream_npu.so"), None);
        assert_eq!(backend_of_file_name("libother.so"), None);
        for b in Backend::ALL {
            assert_eq!(backend_of_file_name(&b.library_file_name()), Some(b));
            assert_eq!(
                b.device_type().to_str().unwrap(),
                format!("devstream_{}", b.name())
            );
        }
    }

    #[test]
    fn the_own_backend_comes_first_then_the_list() {
        use Backend::*;
        assert_eq!(
            registration_order(Some("libdevstream_wgpu.so"), None),
            vec![Wgpu, Cpu, Cuda, Hip]
        );
        assert_eq!(
            registration_order(Some("libdevstream_paddle.so"), Some("hip, cpu,npu,cpu")),
            vec![Hip, Cpu]
        );
        assert_eq!(
            registration_order(Some("libdevstream_cuda.so"), Some("")),
            vec![Cuda]
        );
        assert_eq!(registration_order(None, None), Backend::ALL.to_vec());
    }

    #[test]
    fn only_published_layouts_are_accepted() {
        assert_eq!(
            classify(96, 1128),
            Some(Layout::Paddle3 {
                interface_size: 1128
            })
        );
        assert!(matches!(classify(96, 1032), Some(Layout::Paddle3 { .. })));
        assert!(matches!(classify(88, 912), Some(Layout::Paddle2 { .. })));
        assert_eq!(classify(96, 912), None);
        assert_eq!(
            classify(0, 912),
            None,
            "an older table only as its exact pair"
        );
        // The 3.3 table this crate declares, whatever the params size (Paddle's macro).
        assert!(matches!(classify(0, 1128), Some(Layout::Paddle3 { .. })));
        assert!(matches!(classify(88, 1128), Some(Layout::Paddle3 { .. })));
        assert_eq!(classify(96, 2048), None);
        assert_eq!(classify(0, 0), None);
        assert_eq!(INTERFACE_SIZE_3_3, 1128);
    }
}
