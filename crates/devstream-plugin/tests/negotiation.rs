//! Which table a plug-in filled is known before any field beyond the stable prefix is read.
//!
//! Paddle's `PADDLE_CUSTOM_RUNTIME_CHECK_VERSION` accepts when either size matches, and every
//! Paddle 3.x release has 96-byte params: a plug-in built against the 1032-byte table accepts
//! Paddle 3.3's own pair (96, 1128). Read as a 3.3 table, its word 122 (`transform_unary` in
//! the develop header, reserved in 3.2) would be `cuda_stream_begin_capture`.

mod common;

use common::Faulty;
use devstream_core::{
    CaptureMode, CaptureSupport, DeviceBackend, DeviceStream, Error, StreamOptions,
};
use devstream_plugin::sys::*;
use devstream_plugin::{PluginBackend, PluginInfo};
use devstream_test_plugin_faulty as faulty;

/// Calls the copy's `InitPlugin` directly with one offer; answers whether it accepted and
/// the table it filled.
fn offer(copy: &Faulty, params_size: usize, interface_size: usize) -> (bool, Box<[u64]>) {
    let mut params = vec![0u64; PARAMS_ALLOCATION / 8].into_boxed_slice();
    let mut table = vec![0u64; INTERFACE_ALLOCATION / 8].into_boxed_slice();
    let params_ptr = params.as_mut_ptr().cast::<CustomRuntimeParams>();
    let table_ptr = table.as_mut_ptr().cast::<C_DeviceInterface>();
    // SAFETY: zeroed, aligned buffers far larger than both structs.
    unsafe {
        (*params_ptr).size = params_size;
        (*params_ptr).interface = table_ptr;
        (*table_ptr).size = interface_size;
    }
    // SAFETY: the copy's entry point, with the ABI's signature.
    let init = unsafe {
        copy.library
            .as_ref()
            .unwrap()
            .get::<InitPluginFn>(INIT_PLUGIN_SYMBOL)
    }
    .unwrap();
    // SAFETY: valid params and table, as a host presents them.
    unsafe { init(params_ptr) };
    // SAFETY: our own buffer.
    let accepted = unsafe { (*params_ptr).version } != CustomRuntimeVersion::default();
    (accepted, table)
}

/// Loads a copy of the faulty plug-in in `mode` through devstream: identified as `layout`,
/// without capture. Answers the copy, for its counters.
fn load_identified_without_capture(mode: u32, layout: &str) -> Faulty {
    let copy = Faulty::new(mode);
    let info = copy.load().unwrap();
    assert_eq!(info.layout, layout);
    capture_is_unsupported(&info);
    copy
}

fn capture_is_unsupported(info: &PluginInfo) {
    assert_eq!(info.capabilities.capture, CaptureSupport::None, "{info:?}");
    let stream = PluginBackend::new_stream(&info.places[0], StreamOptions::default()).unwrap();
    assert!(
        matches!(
            stream.begin_capture(CaptureMode::ThreadLocal),
            Err(Error::Unsupported { .. })
        ),
        "{info:?}"
    );
    assert!(!stream.is_capturing().unwrap());
    stream.synchronize().unwrap();
}

#[test]
fn a_develop_built_plugin_accepts_paddle_3_3s_pair_but_is_identified_as_its_own_table() {
    // What a host offering Paddle 3.3's exact pair first would meet: the develop-built
    // plug-in accepts it and its transform sits where 3.3 has cuda_stream_begin_capture.
    let probe = Faulty::new(faulty::MODE_DEVELOP_LAYOUT);
    let (accepted, table) = offer(&probe, 96, 1128);
    assert!(
        accepted,
        "Paddle's && check accepts on the params size alone"
    );
    let begin_capture_word = std::mem::offset_of!(C_DeviceInterface, cuda_stream_begin_capture) / 8;
    assert_ne!(
        table[begin_capture_word], 0,
        "transform_unary lies in that word"
    );

    // devstream identifies the table by its size before it reads past the stable prefix.
    let copy = load_identified_without_capture(faulty::MODE_DEVELOP_LAYOUT, "Paddle 3.2");
    assert_eq!(copy.counters()[faulty::COUNT_BEYOND_PREFIX_CALLS], 0);
    // One refused probe, then 1128 refused and 1032 accepted, both with params size 0.
    assert_eq!(copy.counters()[faulty::COUNT_INIT_PLUGIN], 3);
}

/// A faulty plug-in mode, the layout devstream names for it, and plug-in counters (index,
/// value) that show what devstream did with it.
struct Identified {
    mode: u32,
    layout: &'static str,
    counters: &'static [(usize, usize)],
}

/// A plug-in that checks one size, both or neither: the layout devstream names for it, and the
/// plug-in's counters that show what devstream did with it.
#[test]
fn a_plugin_is_identified_only_as_far_as_the_sizes_it_checks() {
    let cases = [
        // Only the params size: it filled the whole 3.3 capture set, but nothing says its
        // table is the 3.3 one, so nothing beyond the prefix is read.
        Identified {
            mode: faulty::MODE_PARAMS_ONLY_3_3,
            layout: "Paddle 3.x (table size not identified)",
            counters: &[(faulty::COUNT_BEYOND_PREFIX_CALLS, 0)],
        },
        // Both sizes: identified by the exact pair, at the first offer.
        Identified {
            mode: faulty::MODE_STRICT_3_2,
            layout: "Paddle 3.2",
            counters: &[
                (faulty::COUNT_INIT_PLUGIN_ACCEPTED, 1),
                (faulty::COUNT_INITIALIZE, 1),
            ],
        },
        // Neither size: not identified, after one call.
        Identified {
            mode: faulty::MODE_WORKING,
            layout: "unidentified (InitPlugin checks neither size)",
            counters: &[(faulty::COUNT_INIT_PLUGIN, 1)],
        },
    ];
    for case in cases {
        let counters = load_identified_without_capture(case.mode, case.layout).counters();
        for &(counter, value) in case.counters {
            assert_eq!(
                counters[counter], value,
                "mode {}, counter {counter}",
                case.mode
            );
        }
    }
}

#[test]
fn paddles_check_accepts_exactly_its_own_table_among_the_table_only_offers() {
    // The Paddle 2.x mode uses Paddle's check with (88, 912).
    let copy = Faulty::new(faulty::MODE_PADDLE_2_LAYOUT);
    for layout in KNOWN_LAYOUTS {
        let (accepted, _) = offer(&copy, 0, layout.interface_size);
        assert_eq!(accepted, layout.interface_size == 912, "{layout:?}");
    }
    assert!(!offer(&copy, 0, INTERFACE_ALLOCATION).0);
    assert!(
        offer(&copy, 88, INTERFACE_ALLOCATION).0,
        "and the params size alone"
    );
}
