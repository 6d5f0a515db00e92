//! The `plugin_loader` fuzz target's code: devstream-plugin's loader and stream layer driven
//! against a Paddle custom-device plug-in whose table entries misbehave as the input says.
//!
//! The input's first bytes describe the plug-in as loaded ([`plugin::Config`]: which layouts
//! `InitPlugin` accepts, its version, device type and devices, which optional entries it fills);
//! each config is loaded once per process from a copy of a tiny shim library (`shim/shim.c`)
//! whose `InitPlugin` forwards here, so the table functions are instrumented Rust code. The next
//! bytes set how the plug-in misbehaves during the iteration ([`plugin::Behaviour`]), and the
//! rest is a program of devstream operations through the public API ([`harness`]).

pub mod harness;
pub mod load;
pub mod plugin;
mod pool;

pub use harness::run;
