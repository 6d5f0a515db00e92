//! The small hand-written PTX kernels of `devstream_gpu_common::ptx`, loaded on a CUDA place.
//!
//! | kernel | parameters | does |
//! |---|---|---|
//! | `noop` | — | nothing (launch-overhead measurements) |
//! | `sum_u32` | `*const u32 input, *mut u32 output, u32 n` | `*output += Σ input[0..n]` (atomics) |
//! | `affine_u32` | `*mut u32 data, u32 n, u32 mul, u32 add` | `data[i] = data[i] * mul + add` |
//! | `spin` | `u64 cycles` | busy-waits `cycles` clock cycles (keeps a stream busy in tests) |

use crate::CudaModule;
use devstream_core::{Place, Result};

pub use devstream_gpu_common::ptx::KERNELS;

/// Loads [`KERNELS`] on `place`.
pub fn load(place: &Place) -> Result<CudaModule> {
    CudaModule::load(place, KERNELS.as_bytes())
}
