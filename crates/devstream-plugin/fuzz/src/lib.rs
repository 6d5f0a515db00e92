//! The `plugin_loader` fuzz target's code: devstream-plugin's loader and stream layer driven
//! against a Paddle custom-device plug-in whose table entries misbehave as the input says.
//!
//! The input's first bytes describe the plug-in as loaded ([`plugin::Config`]: which layouts
//! `InitPlugin` accepts, its version, device type and devices, which optional entries it fills);
//! each config is loaded once per process from a copy of a tiny shim library (`shim/shim.c`)
//! whose `InitPlugin` forwards here, so the table functions are instrumented Rust code. The next
//! bytes set how the plug-in misbehaves during the iteration ([`plugin::Behaviour`]), and the
//! rest is a program of devstream operations through the public API ([`harness`]).
//!
//! Run it with `cargo xtask fuzz plugin_loader --seconds N` (from the workspace root), or
//! `cargo +<pinned nightly> fuzz run plugin_loader` here. `DEVSTREAM_FUZZ_TRACE=1` prints each
//! input's operations when the next one starts (a finding may depend on what ran before it in
//! the process); `DEVSTREAM_FUZZ_GDB=1` prints every thread's stack (gdb) on a hang or an
//! invariant violation; `DEVSTREAM_FUZZ_EXTENDED=0` leaves out the waits for completions,
//! to decode inputs found before they were on by default as found (`harness::watch::extended`).

pub mod harness;
pub mod load;
pub mod plugin;
mod pool;

pub use harness::run;

/// AddressSanitizer's defaults for this target: LeakSanitizer off, and huge allocations answer
/// null instead of aborting. The plug-in misbehaves on purpose, and where its answers leave
/// devstream unable to tell when memory is no longer used (a record or query that failed, a
/// callback never called), devstream leaks that memory by design rather than free it early;
/// what devstream must release is checked by the harness instead (live counts back to zero, and
/// every plug-in object of a clean run released). Sizes no host has (`alloc_host(1 << 46)`)
/// must come back from devstream as a typed error, which needs the allocator's null.
#[no_mangle]
pub extern "C" fn __asan_default_options() -> *const std::ffi::c_char {
    c"detect_leaks=0:allocator_may_return_null=1".as_ptr()
}
