//! The checks on what `InitPlugin` wrote, before anything else of the plug-in runs: how far it
//! wrote into the table and the params (no further than the accepted layout allows), the
//! runtime version (0.1.x, x >= 1), a device type that names a place and is not yet registered,
//! and the functions Paddle requires. Only the known part of the table is copied.

use super::negotiate::Accepted;
use super::{plugin_error, LoadedPlugin, NEXT_RUNTIME};
use crate::sys::*;
use devstream_core::{Capabilities, Place, Result};
use std::ffi::CStr;
use std::path::Path;
use std::sync::atomic::Ordering;

/// The highest written byte + 1 of a zero-initialised buffer.
fn written_extent(words: &[u64]) -> usize {
    for (index, word) in words.iter().enumerate().rev() {
        if let Some(last) = word.to_ne_bytes().iter().rposition(|byte| *byte != 0) {
            return index * 8 + last + 1;
        }
    }
    0
}

fn read_c_string(path: &Path, what: &str, ptr: *const std::ffi::c_char) -> Result<Option<String>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: the plug-in wrote a pointer to a NUL-terminated static string (the ABI's
    // contract for `device_type` / `sub_device_type`).
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str()
        .map(|s| Some(s.to_owned()))
        .map_err(|_| plugin_error(path, format!("{what} is not UTF-8: {text:?}")))
}

impl LoadedPlugin {
    /// Validates what `InitPlugin` wrote; builds the runtime (its `initialize` not yet run).
    pub(super) fn validate(
        path: &Path,
        taken: &dyn Fn(&str) -> Option<String>,
        accepted: Accepted,
        library: std::mem::ManuallyDrop<libloading::Library>,
    ) -> Result<LoadedPlugin> {
        let params_ptr = accepted.params.as_ptr().cast::<CustomRuntimeParams>();
        // SAFETY: our own buffer, written by the plug-in.
        let params = unsafe { *params_ptr };

        let layout = accepted.negotiated;
        let table_extent = written_extent(&accepted.interface);
        if table_extent > layout.max_interface_size {
            return Err(plugin_error(
                path,
                format!(
                    "InitPlugin filled the function table up to byte {table_extent}, beyond the \
                     {} table it accepted ({} bytes at most): it was built against a newer \
                     device_ext.h than devstream knows",
                    layout.name, layout.max_interface_size
                ),
            ));
        }
        let params_extent = written_extent(&accepted.params);
        if params_extent > PARAMS_SIZE_3 {
            return Err(plugin_error(
                path,
                format!(
                    "InitPlugin wrote CustomRuntimeParams up to byte {params_extent}, beyond the \
                     {PARAMS_SIZE_3}-byte struct of every known layout ({})",
                    layout.name
                ),
            ));
        }

        let version = params.version;
        if version.major != RUNTIME_MAJOR_VERSION
            || version.minor != RUNTIME_MINOR_VERSION
            || version.patch < RUNTIME_PATCH_VERSION
        {
            return Err(plugin_error(
                path,
                format!(
                    "reports custom runtime version {}.{}.{}; devstream speaks {}.{}.{} \
                     (0.1.x with x >= 1)",
                    version.major,
                    version.minor,
                    version.patch,
                    RUNTIME_MAJOR_VERSION,
                    RUNTIME_MINOR_VERSION,
                    RUNTIME_PATCH_VERSION
                ),
            ));
        }

        let device_type =
            read_c_string(path, "device_type", params.device_type)?.ok_or_else(|| {
                plugin_error(
                    path,
                    "InitPlugin left CustomRuntimeParams::device_type null",
                )
            })?;
        Place::custom(&device_type, 0).map_err(|e| {
            plugin_error(
                path,
                format!("device type {device_type:?} cannot name a place: {e}"),
            )
        })?;
        let sub_device_type = read_c_string(path, "sub_device_type", params.sub_device_type)?;

        let mut table = C_DeviceInterface::zeroed();
        let readable = layout.readable();
        assert!(readable <= std::mem::size_of::<C_DeviceInterface>());
        // SAFETY: copies the part of the plug-in's table whose layout is known (the stable
        // prefix every layout shares, or the whole table of an exactly identified 3.3 plug-in)
        // into ours; the source buffer is INTERFACE_ALLOCATION bytes, ours is
        // `size_of::<C_DeviceInterface>()` >= `readable` bytes; the rest of ours stays null.
        unsafe {
            std::ptr::copy_nonoverlapping(
                accepted.interface.as_ptr().cast::<u8>(),
                (&mut table as *mut C_DeviceInterface).cast::<u8>(),
                readable,
            );
        }
        let missing = missing_required(&table);
        if !missing.is_empty() {
            return Err(plugin_error(
                path,
                format!(
                    "device type {device_type}: missing required function pointer(s): {}",
                    missing.join(", ")
                ),
            ));
        }
        if let Some(owner) = taken(&device_type) {
            return Err(plugin_error(
                path,
                format!("device type {device_type:?} is already registered (by {owner})"),
            ));
        }

        Ok(LoadedPlugin {
            index: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            device_type,
            sub_device_type,
            path: path.to_owned(),
            version,
            layout,
            caps: Capabilities::none(),
            table,
            devices: Vec::new(),
            event_handles: super::EventHandles::default(),
            stream_handles: super::StreamHandles::default(),
            _interface_allocation: accepted.interface,
            _params_allocation: accepted.params,
            _library: library,
        })
    }
}

/// The functions Paddle requires (devstream requires the same) that `table` lacks.
fn missing_required(table: &C_DeviceInterface) -> Vec<&'static str> {
    FunctionField::unfilled(&REQUIRED_FUNCTIONS, table).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_extent_finds_the_last_nonzero_byte() {
        assert_eq!(written_extent(&[0, 0]), 0);
        assert_eq!(written_extent(&[1, 0]), 1);
        assert_eq!(
            written_extent(&[0, u64::from_ne_bytes([0, 0, 7, 0, 0, 0, 0, 0])]),
            11
        );
        assert_eq!(written_extent(&[0, u64::MAX]), 16);
    }

    #[test]
    fn a_zeroed_table_misses_every_required_function() {
        assert_eq!(
            missing_required(&C_DeviceInterface::zeroed()),
            FunctionField::names(REQUIRED_FUNCTIONS).to_vec()
        );
    }
}
