//! The C ABI of Paddle custom-device plug-ins (`device_ext.h`, runtime 0.1.1): the
//! declarations of [`devstream_paddle_sys`], re-exported so that the loader's modules and its
//! users name them as `devstream_plugin::sys`.

pub use devstream_paddle_sys::*;
