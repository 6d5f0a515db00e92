//! The custom-device backend's facade variants (Paddle plug-ins and Rust-registered devices).

use devstream_plugin::{
    PluginBuffer, PluginEvent, PluginFlag, PluginGraph, PluginHostBuffer, PluginStream,
};

super::facade_variant!(Custom: PluginStream, PluginEvent, PluginGraph, PluginFlag, PluginBuffer, PluginHostBuffer);
