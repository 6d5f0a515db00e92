//! devstream wgpu (being written).
