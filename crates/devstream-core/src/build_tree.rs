//! What this workspace built, as seen from an executable cargo built in a target directory (a
//! test in `<target>/<profile>/deps`, an example in `<target>/<profile>/examples`): the profile
//! directory and the shared libraries cargo put there. Plug-in discovery finds the workspace's
//! test plug-ins this way, and the tests find the libraries they load.

use std::path::PathBuf;

/// The file name of the shared library `stem` on this platform (`libstem.so` on Linux).
pub fn library_file_name(stem: &str) -> String {
    format!(
        "{}{stem}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

/// `<target>/<profile>` when this executable is a cargo-built test or example there.
pub fn profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let kind = dir.file_name()?;
    if kind != "deps" && kind != "examples" {
        return None;
    }
    let profile = dir.parent()?;
    profile
        .join(".fingerprint")
        .is_dir()
        .then(|| profile.to_path_buf())
}

/// The shared library `stem` where cargo built it for this executable: in `<profile>/deps`,
/// else in `<profile>`.
pub fn built_library(stem: &str) -> Option<PathBuf> {
    let profile = profile_dir()?;
    let name = library_file_name(stem);
    [profile.join("deps").join(&name), profile.join(&name)]
        .into_iter()
        .find(|path| path.is_file())
}
