//! The wgpu backend's facade variants.

use devstream_wgpu::{WgpuBuffer, WgpuEvent, WgpuFlag, WgpuGraph, WgpuHostBuffer, WgpuStream};

super::facade_variant!(Wgpu: WgpuStream, WgpuEvent, WgpuGraph, WgpuFlag, WgpuBuffer, WgpuHostBuffer);
