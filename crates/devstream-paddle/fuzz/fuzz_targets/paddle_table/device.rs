//! Device-management calls, the size queries, and `InitPlugin` called again.

use crate::draw::Draw;
use crate::model::{expect, Model};
use crate::UNWRITTEN;
use devstream_paddle_sys::*;
use libfuzzer_sys::arbitrary::Result as Drawn;
use std::ptr::null_mut;

/// The device-management and size queries.
pub(crate) fn info(d: &mut Draw<'_, '_>, m: &Model, dev: C_Device, dev_ok: bool) -> Drawn<()> {
    let mut out = UNWRITTEN;
    let null_out = d.byte()? % 8 == 0;
    let out_ptr: *mut usize = if null_out { null_mut() } else { &mut out };
    let (name, answer, valid) = match d.byte()? % 14 {
        0 => ("initialize", call!(initialize()), true),
        1 => ("finalize", call!(finalize()), true),
        2 => ("init_device", call!(init_device(dev)), dev_ok),
        3 => ("deinit_device", call!(deinit_device(dev)), dev_ok),
        4 => ("set_device", call!(set_device(dev)), dev_ok),
        5 => {
            let mut got = C_Device_st { id: -9 };
            let ptr = if null_out { null_mut() } else { &mut got };
            let answer = call!(get_device(ptr));
            if answer == C_SUCCESS {
                assert_eq!(got.id, 0, "one device");
            }
            ("get_device", answer, !null_out)
        }
        6 => {
            let answer = call!(get_device_count(out_ptr));
            if answer == C_SUCCESS {
                assert_eq!(out, 1, "one device");
            }
            ("get_device_count", answer, !null_out)
        }
        7 => {
            let mut list = [UNWRITTEN; 2];
            let ptr = if null_out {
                null_mut()
            } else {
                list.as_mut_ptr()
            };
            let answer = call!(get_device_list(ptr));
            if answer == C_SUCCESS {
                assert_eq!(list, [0, UNWRITTEN], "one device, listed once");
            }
            ("get_device_list", answer, !null_out)
        }
        8 => {
            let mut free = UNWRITTEN;
            let answer = call!(device_memory_stats(dev, out_ptr, &mut free));
            if answer == C_SUCCESS {
                assert!(free <= out, "free {free} of {out}");
            }
            ("device_memory_stats", answer, dev_ok && !null_out)
        }
        size_query => {
            let table = crate::plugin().table;
            let (name, query) = [
                ("device_min_chunk_size", table.device_min_chunk_size),
                ("device_max_chunk_size", table.device_max_chunk_size),
                ("device_max_alloc_size", table.device_max_alloc_size),
                ("device_extra_padding_size", table.device_extra_padding_size),
                ("device_realloc_size", table.device_realloc_size),
            ][usize::from(size_query - 9)];
            let query = query.expect(name);
            // SAFETY: a device pointer that is null or valid, and an out-parameter that is
            // null or writable (the plug-in checks both).
            (name, unsafe { query(dev, out_ptr) }, dev_ok && !null_out)
        }
    };
    expect(m, name, answer, valid, &[C_SUCCESS]);
    if answer != C_SUCCESS {
        assert_eq!(out, UNWRITTEN, "{name} wrote on failure");
    }
    Ok(())
}

/// `InitPlugin` called again with arbitrary announced sizes, in buffers of exactly those sizes
/// (at least the words read at offsets 0 and 8): the type is registered already, so nothing
/// is written; a write past an announced size is a heap overflow the sanitizer reports.
pub(crate) fn init_plugin_again(d: &mut Draw<'_, '_>) -> Drawn<()> {
    let params_size: usize = [0, 16, 56, 88, 96, 97, 4096][d.index(7)?];
    let table_size: usize = [8, 16, 912, 920, 976, 1032, 1128, 1129][d.index(8)?];
    // Words, so that the structs the plug-in reads are aligned.
    let mut params = vec![0u64; params_size.max(16).div_ceil(8)];
    let mut table = vec![0u64; table_size.div_ceil(8)];
    table[0] = table_size as u64;
    let interface = if d.flag()? {
        table.as_mut_ptr()
    } else {
        null_mut()
    };
    params[0] = params_size as u64;
    params[1] = interface as u64;
    let before = (params.clone(), table.clone());
    // SAFETY: both buffers hold at least the sizes announced (and the words at 0 and 8).
    unsafe { devstream_paddle::InitPlugin(params.as_mut_ptr().cast()) };
    assert!(
        before == (params, table),
        "InitPlugin wrote after its type was registered"
    );
    Ok(())
}
