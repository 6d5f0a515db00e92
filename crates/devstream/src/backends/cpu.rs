//! The CPU backend's facade variants.

use devstream_cpu::{CpuBuffer, CpuEvent, CpuFlag, CpuGraph, CpuHostBuffer, CpuStream};

super::facade_variant!(Cpu: CpuStream, CpuEvent, CpuGraph, CpuFlag, CpuBuffer, CpuHostBuffer);
