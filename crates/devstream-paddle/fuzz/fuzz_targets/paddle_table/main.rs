//! Fuzz target `paddle_table`: devstream-paddle's C table as a hostile Paddle would call it.
//!
//! `InitPlugin` runs once per process and fills a 3.3 table for `devstream_cpu` (the graph
//! functions included: `DEVSTREAM_PADDLE_EMULATED_CAPTURE=1`). Each input is then a sequence of
//! table calls whose arguments are drawn from what is live and what is not: handles that are
//! live, destroyed, of another kind (a stream as an event, an event as a graph, an address as a
//! stream, ...), forged (a bit of a live handle flipped, arbitrary integers) or null; device
//! addresses inside, at the end of and past live allocations, freed, or host memory; host
//! pointers that are null or valid memory; sizes that are 0, small, at the limits or huge; device
//! ids that exist or not; out-parameters that are null or valid.
//!
//! A model of the live objects decides what each call must answer, and any disagreement panics
//! (libFuzzer reports it, as it does a sanitizer report or a crash):
//! * anything but a live object of the call's kind (or the null stream, where Paddle may pass
//!   it) answers `C_ERROR`, writes no out-parameter and acts on nothing: each live object is
//!   destroyed exactly once at the end of the input, and that destroy must succeed;
//! * while no capture is open, calls on live objects and ranges inside live allocations answer
//!   success (a stream's synchronisation may report a failing callback it ran; queries may
//!   answer "not ready"); while a capture is open, calls that CUDA's capture rules may refuse
//!   answer success or `C_ERROR`, never anything else;
//! * at the end of each input (captures ended, every stream synchronised, everything destroyed)
//!   the plug-in's live counts are zero for every kind.
//!
//! The host side of copies is a never-freed arena: work queued on a stream may still run after
//! the input ends (a destroyed stream's work runs on), as Paddle keeps such memory alive.

#![no_main]

/// AddressSanitizer's options for this target, whoever runs it: huge allocations answer null
/// (the plug-in must answer them with a status, which the model checks) instead of aborting;
/// freed memory kept from reuse up to 64 MiB (far more than one input frees between a free
/// and a later use of it), so that long runs stay well below libFuzzer's 2 GiB memory limit.
#[no_mangle]
pub extern "C" fn __asan_default_options() -> *const std::ffi::c_char {
    c"allocator_may_return_null=1:detect_stack_use_after_return=1:quarantine_size_mb=64".as_ptr()
}

use devstream_paddle_sys::*;
use libfuzzer_sys::arbitrary::{Result as Drawn, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::OnceLock;

/// The largest allocation the plug-in grants (`DEVSTREAM_PADDLE_MEMORY_BYTES`): larger ones
/// answer success with a null pointer.
const BUDGET: usize = 16 << 20;
/// Bytes of the host arena copies read and write.
const ARENA: usize = 1 << 16;
/// The most calls one input makes.
const MOST_CALLS: usize = 200;
/// Written to out-parameters before a call: a failing call must leave it.
const UNWRITTEN: usize = 0x5eed_0000_0000_0ff0;

/// The table `InitPlugin` filled, and the arena.
struct Plugin {
    table: &'static C_DeviceInterface,
    arena: usize,
}

// SAFETY: the table is read-only once filled; its raw pointers are null reserved words.
unsafe impl Sync for Plugin {}
// SAFETY: as above.
unsafe impl Send for Plugin {}

fn plugin() -> &'static Plugin {
    static PLUGIN: OnceLock<Plugin> = OnceLock::new();
    PLUGIN.get_or_init(|| {
        std::env::set_var("DEVSTREAM_PADDLE_BACKENDS", "cpu");
        std::env::set_var("DEVSTREAM_PADDLE_EMULATED_CAPTURE", "1");
        std::env::set_var("DEVSTREAM_PADDLE_MEMORY_BYTES", BUDGET.to_string());
        let table = Box::leak(Box::new(C_DeviceInterface::zeroed()));
        table.size = std::mem::size_of::<C_DeviceInterface>();
        let mut params = CustomRuntimeParams::zeroed();
        params.size = std::mem::size_of::<CustomRuntimeParams>();
        params.interface = table;
        // SAFETY: whole, writable params and table of the sizes they announce.
        unsafe { devstream_paddle::InitPlugin(&mut params) };
        assert!(
            !params.device_type.is_null(),
            "InitPlugin registered nothing"
        );
        // SAFETY: the plug-in writes a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(params.device_type) };
        assert_eq!(name.to_str(), Ok("devstream_cpu"));
        let arena = Box::leak(vec![0u8; ARENA].into_boxed_slice());
        Plugin {
            table,
            arena: arena.as_mut_ptr() as usize,
        }
    })
}

/// Calls table function `$name` (filled by `InitPlugin`).
macro_rules! call {
    ($name:ident($($arg:expr),* $(,)?)) => {{
        let f = $crate::plugin().table.$name.expect(stringify!($name));
        // SAFETY: every pointer argument is null or valid for what the function reads or
        // writes (the fuzzer's contract with the plug-in); handles and addresses are integers
        // the plug-in checks.
        unsafe { f($($arg),*) }
    }};
}

mod device;
mod draw;
mod graphs;
mod memory;
mod model;
mod racer;
mod streams;

use draw::Draw;
use model::{sync_answers, GraphState, Model};
use racer::Racer;

/// One input: its calls, then the cleanup and the live-count check.
fn run(data: &[u8]) {
    let plugin = plugin();
    let _ = plugin.table;
    let mut u = Unstructured::new(data);
    let mut model = Model {
        next_capture: 1,
        ..Model::default()
    };
    for _ in 0..MOST_CALLS {
        if u.is_empty() {
            break;
        }
        let mut draw = Draw { u: &mut u };
        if step(&mut draw, &mut model).is_err() {
            break;
        }
    }
    clean_up(&mut model);
}

/// One call drawn from the input.
fn step(d: &mut Draw<'_, '_>, m: &mut Model) -> Drawn<()> {
    let mut device_slot = C_Device_st { id: 0 };
    let (dev, dev_ok) = d.device(&mut device_slot)?;
    let op = d.byte()? % 37;
    match op {
        0..=10 | 24 => streams::step(d, m, op, dev, dev_ok)?,
        11..=23 => memory::step(d, m, op, dev, dev_ok)?,
        25..=33 => graphs::step(d, m, op, dev, dev_ok)?,
        34 => device::info(d, m, dev, dev_ok)?,
        35 => device::init_plugin_again(d)?,
        _ => {
            let seed = d.u.arbitrary::<u64>()?;
            m.racer.get_or_insert_with(|| Racer::start(seed));
        }
    }
    Ok(())
}

/// Ends every capture, synchronises and destroys everything, and checks that nothing is live.
fn clean_up(m: &mut Model) {
    if let Some(racer) = m.racer.take() {
        racer.stop();
    }
    Racer::forget();
    let mut dev = C_Device_st { id: 0 };
    let dev: C_Device = &mut dev;
    let origins: Vec<(usize, u64)> = m
        .streams
        .iter()
        .filter_map(|s| s.origin.map(|id| (s.handle, id)))
        .collect();
    for (s, id) in origins {
        let mut graph = null_mut();
        let answer = call!(cuda_stream_end_captrue(dev, s as C_Stream, &mut graph));
        let may_fail = m.end_capture(id);
        if answer == C_SUCCESS {
            m.graphs.push(GraphState {
                handle: graph as usize,
                may_fail,
            });
        } else {
            assert_eq!(answer, C_ERROR, "end_capture answered {answer:?}");
        }
    }
    assert!(m.captures.is_empty(), "a capture left open");
    for x in std::mem::take(&mut m.execs) {
        assert_eq!(
            call!(cuda_graph_exec_destroy(x.handle as C_GraphExec)),
            C_SUCCESS
        );
    }
    for g in std::mem::take(&mut m.graphs) {
        assert_eq!(
            call!(cuda_graph_destroy(g.handle as C_CudaGraph)),
            C_SUCCESS
        );
    }
    let handles: Vec<usize> = m.streams.iter().map(|s| s.handle).chain([0]).collect();
    for s in handles {
        let answer = call!(synchronize_stream(dev, s as C_Stream));
        let ok = sync_answers(m, s);
        assert!(
            ok.contains(&answer),
            "synchronize_stream at the end answered {answer:?}"
        );
    }
    for e in std::mem::take(&mut m.events) {
        assert_eq!(call!(destroy_event(dev, e.handle as C_Event)), C_SUCCESS);
    }
    for s in std::mem::take(&mut m.streams) {
        assert_eq!(call!(destroy_stream(dev, s.handle as C_Stream)), C_SUCCESS);
    }
    for (ptr, _) in std::mem::take(&mut m.device) {
        assert_eq!(
            call!(device_memory_deallocate(dev, ptr as *mut c_void, 0)),
            C_SUCCESS
        );
    }
    for (ptr, _) in std::mem::take(&mut m.host) {
        assert_eq!(
            call!(host_memory_deallocate(dev, ptr as *mut c_void, 0)),
            C_SUCCESS
        );
    }
    let mut live = [usize::MAX; 6];
    // SAFETY: room for six counts.
    assert!(unsafe { devstream_paddle::devstream_paddle_live(0, live.as_mut_ptr()) });
    assert_eq!(
        live, [0; 6],
        "live streams, events, device and host allocations, graphs, execs after clean-up"
    );
}

fuzz_target!(|data: &[u8]| run(data));
