//! Host memory of a size a user chose, allocated fallibly.
//!
//! Every backend that keeps buffer bytes in host memory (the CPU backend's device and host
//! buffers, wgpu's host buffers) allocates them here: a size the allocator cannot give is
//! `Error::OutOfMemory`, never the abort of `vec![0; len]` or the "capacity overflow" panic of
//! a `Vec` asked for more than `isize::MAX` bytes. The bytes come from `alloc_zeroed`, so a
//! large buffer's pages are the system's zero pages until first written, as with `calloc`.

use crate::{Error, Place, Result};
use std::alloc::Layout;

/// `len` zeroed bytes of host memory for a buffer of `place`, or `Error::OutOfMemory` (never a
/// panic or an abort) when the allocator refuses or `len` exceeds what a layout can describe.
///
/// ```
/// use devstream_core::{memory::zeroed, Error, Place};
/// assert_eq!(&*zeroed(&Place::Cpu, 3).unwrap(), &[0, 0, 0]);
/// assert!(zeroed(&Place::Cpu, 0).unwrap().is_empty());
/// assert!(matches!(zeroed(&Place::Cpu, usize::MAX), Err(Error::OutOfMemory { .. })));
/// ```
pub fn zeroed(place: &Place, len: usize) -> Result<Box<[u8]>> {
    if len == 0 {
        return Ok(Box::default());
    }
    let out_of_memory = || Error::out_of_memory(place, len);
    let layout = Layout::array::<u8>(len).map_err(|_| out_of_memory())?;
    // SAFETY: `layout` has a non-zero size (len > 0).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(out_of_memory());
    }
    let slice = std::ptr::slice_from_raw_parts_mut(ptr, len);
    // SAFETY: `ptr` was just allocated by the global allocator with the layout of `[u8; len]`
    // (what `Box<[u8]>` of length `len` frees with), all `len` bytes are initialised (zeroed),
    // and nothing else owns the allocation.
    Ok(unsafe { Box::from_raw(slice) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_out_of_memory(len: usize) {
        match zeroed(&Place::Cpu, len) {
            Err(Error::OutOfMemory { bytes, .. }) => assert_eq!(bytes, len),
            other => panic!("zeroed({len}): {other:?}"),
        }
    }

    #[test]
    fn sizes_no_layout_describes_are_out_of_memory() {
        for len in [usize::MAX, isize::MAX as usize + 1] {
            assert_out_of_memory(len);
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Miri aborts on an allocation larger than the host can back instead of returning null"
    )]
    fn sizes_the_allocator_refuses_are_out_of_memory() {
        assert_out_of_memory(1 << 62);
    }

    #[test]
    fn bytes_are_zeroed_and_writable() {
        let mut bytes = zeroed(&Place::Wgpu(0), 4097).unwrap();
        assert_eq!(bytes.len(), 4097);
        assert!(bytes.iter().all(|&b| b == 0));
        bytes[4096] = 7;
        assert_eq!(bytes[4096], 7);
    }
}
