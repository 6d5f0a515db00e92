//! The CuPy streams tutorial on `hip:0`: a host→device copy and a sum kernel (a HIP code object)
//! on a non-default stream made current with a guard, then `set_current_stream` (CuPy's
//! `use()`), a device→host copy, and back to the default (null) stream. Checks its own result;
//! without a HIP runtime or device it says so and exits cleanly.
//!
//! ```text
//! cargo run --example hip --features hip
//! ```
//!
//! The kernel: on AMD, build a code object from this HIP source and name it with
//! `DEVSTREAM_HIP_CODE_OBJECT=sum.co`:
//!
//! ```text
//! // sum.hip — hipcc --genco --offload-arch=gfx90a sum.hip -o sum.co
//! #include <hip/hip_runtime.h>
//! extern "C" __global__ void sum_u32(const unsigned* input, unsigned* output, unsigned n) {
//!     unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) atomicAdd(output, input[i]);
//! }
//! ```
//!
//! Without it the example loads the same kernel as PTX, which is what a HIP code object is on
//! NVIDIA (HIP's NVIDIA platform, or `devstream-hip-shim` via `DEVSTREAM_HIP_LIBRARY`).
//!
//! The tutorial itself is `examples/common/tutorial.rs`, shared by every backend's example.

#[path = "common/tutorial.rs"]
mod tutorial;

use devstream::hip::{ptx, HipBuffer, HipModule, HipStream, KernelArg, LaunchConfig};
use devstream::{Error, Place, Result};

fn main() {
    tutorial::exit_with("HIP", run());
}

fn load_kernels(place: &Place) -> Result<HipModule> {
    match std::env::var_os("DEVSTREAM_HIP_CODE_OBJECT") {
        Some(path) => {
            let image = std::fs::read(&path).map_err(|e| {
                Error::InvalidArgument(format!("DEVSTREAM_HIP_CODE_OBJECT={path:?}: {e}"))
            })?;
            HipModule::load(place, &image)
        }
        None => HipModule::load(place, ptx::KERNELS.as_bytes()).map_err(|e| match e {
            Error::NoDevice { .. } | Error::BackendUnavailable { .. } => e,
            e => Error::InvalidArgument(format!(
                "the built-in kernel is PTX (HIP on NVIDIA); on AMD build sum.hip (see this \
                 example's source) and set DEVSTREAM_HIP_CODE_OBJECT: {e}"
            )),
        }),
    }
}

fn run() -> Result<()> {
    let place: Place = "hip:0".parse()?;
    println!(
        "HIP runtime {} (driver version {})",
        devstream::hip::library()?,
        devstream::hip::driver_version()?
    );
    let kernels = load_kernels(&place)?;
    let sum = kernels.function("sum_u32")?;
    tutorial::run(&place, &|stream, input, output, n| {
        let hip_stream: &HipStream = stream.backend().expect("a HIP stream");
        let input: &HipBuffer = input.backend().expect("a HIP buffer");
        let output: &HipBuffer = output.backend().expect("a HIP buffer");
        // SAFETY: sum_u32(input, output, n) reads n u32 of `input` and adds them to `output`.
        unsafe {
            hip_stream.launch_kernel(
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
