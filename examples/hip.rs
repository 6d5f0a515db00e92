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
//! The CuPy original:
//! ```python
//! a_np = np.arange(10)
//! s = cp.cuda.Stream()
//! with s:
//!     a_cp = cp.asarray(a_np)   # H2D transfer on stream s
//!     b_cp = cp.sum(a_cp)       # kernel launched on stream s
//! s.use()
//! b_np = cp.asnumpy(b_cp)
//! assert s == cp.cuda.get_current_stream()
//! cp.cuda.Stream.null.use()
//! ```

use devstream::hip::{HipBuffer, HipModule, HipStream, KernelArg, LaunchConfig};
use devstream::{current_stream, set_current_stream, Error, Place, Result, Stream};

/// `sum_u32(const u32* input, u32* output, u32 n)`: `*output += input[i]` for each `i < n`, as
/// PTX (the HIP code object format on NVIDIA).
const SUM_PTX: &str = r#"
.version 6.0
.target sm_50
.address_size 64

.visible .entry sum_u32(
    .param .u64 sum_input,
    .param .u64 sum_output,
    .param .u32 sum_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [sum_input];
    ld.param.u64 %rd2, [sum_output];
    ld.param.u32 %r1, [sum_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra SUM_DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.u32 %r6, [%rd6];
    atom.global.add.u32 %r7, [%rd4], %r6;
SUM_DONE:
    ret;
}
"#;

fn main() {
    match run() {
        Ok(()) => {}
        Err(e @ (Error::BackendUnavailable { .. } | Error::NoDevice { .. })) => {
            println!("no HIP device here, nothing to run: {e}");
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

/// The sum kernel's code object: `DEVSTREAM_HIP_CODE_OBJECT`, else the PTX above.
fn load_kernels(place: &Place) -> Result<HipModule> {
    match std::env::var_os("DEVSTREAM_HIP_CODE_OBJECT") {
        Some(path) => {
            let image = std::fs::read(&path).map_err(|e| {
                Error::InvalidArgument(format!("DEVSTREAM_HIP_CODE_OBJECT={path:?}: {e}"))
            })?;
            HipModule::load(place, &image)
        }
        None => HipModule::load(place, SUM_PTX.as_bytes()).map_err(|e| {
            Error::InvalidArgument(format!(
                "the built-in kernel is PTX (HIP on NVIDIA); on AMD build sum.hip (see this \
                 example's source) and set DEVSTREAM_HIP_CODE_OBJECT: {e}"
            ))
        }),
    }
}

fn run() -> Result<()> {
    let place: Place = "hip:0".parse()?;
    let a_np: Vec<u32> = (0..10).collect();
    let s = Stream::new(&place)?;
    println!(
        "HIP runtime {} (driver version {})",
        devstream::hip::library()?,
        devstream::hip::driver_version()?
    );
    let kernels = load_kernels(&place)?;
    let sum = kernels.function("sum_u32")?;

    let (a_dev, b_dev) = {
        let _with_s = s.make_current(); // `with s:`
        let stream = current_stream(&place)?;
        assert_eq!(stream, s);

        // a_cp = cp.asarray(a_np): H2D transfer on stream s
        let a_dev = stream.alloc(a_np.len() * 4)?;
        let bytes: Vec<u8> = a_np.iter().flat_map(|v| v.to_le_bytes()).collect();
        stream.copy_from_host(&a_dev, 0, &bytes)?;

        // b_cp = cp.sum(a_cp): a kernel launched on stream s
        let b_dev = stream.alloc(4)?;
        stream.fill(&b_dev, 0, 4, 0)?;
        let hip_stream: &HipStream = stream.backend().expect("a HIP stream");
        let a_buf: &HipBuffer = a_dev.backend().expect("a HIP buffer");
        let b_buf: &HipBuffer = b_dev.backend().expect("a HIP buffer");
        // SAFETY: sum_u32(input, output, n) reads n u32 of `input` and adds them to `output`.
        unsafe {
            hip_stream.launch_kernel(
                &sum,
                LaunchConfig::for_elements(a_np.len() as u32, 128),
                &[
                    KernelArg::Buffer(a_buf),
                    KernelArg::Buffer(b_buf),
                    KernelArg::U32(a_np.len() as u32),
                ],
            )?;
        }
        (a_dev, b_dev)
    }; // the guard restores the previous current stream

    // s.use(): make s current without a scope
    set_current_stream(&s)?;
    // b_np = cp.asnumpy(b_cp): D2H on the current stream
    let stream = current_stream(&place)?;
    let b_host = stream.alloc_host(4)?;
    stream.copy_device_to_host(&b_host, 0, &b_dev, 0, 4)?;
    let b_np = u32::from_le_bytes(b_host.to_vec()?.try_into().expect("4 bytes"));
    assert_eq!(s, current_stream(&place)?);

    // cp.cuda.Stream.null.use(): back to the default (null) stream
    let null = Stream::default_stream(&place)?;
    set_current_stream(&null)?;
    assert_ne!(s, current_stream(&place)?);

    let expected: u32 = a_np.iter().sum();
    if b_np != expected {
        return Err(Error::InvalidArgument(format!(
            "sum on the GPU gave {b_np}, expected {expected}"
        )));
    }
    drop(a_dev);
    println!("sum of {a_np:?} on {s} = {b_np} (expected {expected}): ok");
    Ok(())
}
