//! devstream gpu-common (being written).
