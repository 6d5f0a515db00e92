//! The HIP backend's facade variants.

use devstream_hip::{HipBuffer, HipEvent, HipFlag, HipGraph, HipHostBuffer, HipStream};

super::facade_variant!(Hip: HipStream, HipEvent, HipGraph, HipFlag, HipBuffer, HipHostBuffer);
