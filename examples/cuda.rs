//! The CuPy streams tutorial on `cuda:0`: a host→device copy and a sum kernel (PTX) on a
//! non-default stream made current with a guard, then `set_current_stream` (CuPy's `use()`), a
//! device→host copy, and back to the default (null) stream. Checks its own result; without a
//! CUDA device it says so and exits cleanly.
//!
//! ```text
//! cargo run --example cuda --features cuda
//! ```
//!
//! The tutorial itself is `examples/common/tutorial.rs`, shared by every backend's example.

#[path = "common/tutorial.rs"]
mod tutorial;

use devstream::cuda::{ptx, CudaBuffer, CudaStream, KernelArg, LaunchConfig};
use devstream::{Place, Result};

fn main() {
    tutorial::exit_with("CUDA", run());
}

fn run() -> Result<()> {
    let place: Place = "cuda:0".parse()?;
    let kernels = ptx::load(&place)?;
    let sum = kernels.function("sum_u32")?;
    tutorial::run(&place, &|stream, input, output, n| {
        let cuda_stream: &CudaStream = stream.backend().expect("a CUDA stream");
        let input: &CudaBuffer = input.backend().expect("a CUDA buffer");
        let output: &CudaBuffer = output.backend().expect("a CUDA buffer");
        // SAFETY: sum_u32(input, output, n) reads n u32 of `input` and adds them to `output`.
        unsafe {
            cuda_stream.launch_kernel(
                &sum,
                LaunchConfig::for_elements(n, 128),
                &[
                    KernelArg::Buffer(input),
                    KernelArg::Buffer(output),
                    KernelArg::U32(n),
                ],
            )
        }
    })
}
