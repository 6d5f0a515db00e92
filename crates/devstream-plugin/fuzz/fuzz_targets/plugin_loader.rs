//! devstream-plugin's loader and stream layer against a misbehaving plug-in table (see the
//! `devstream_plugin_fuzz` crate).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    devstream_plugin_fuzz::run(data);
});
