//! The CuPy streams tutorial on `cuda:0`: a host→device copy and a sum kernel (PTX) on a
//! non-default stream made current with a guard, then `set_current_stream` (CuPy's `use()`), a
//! device→host copy, and back to the default (null) stream. Checks its own result; without a
//! CUDA device it says so and exits cleanly.
//!
//! ```text
//! cargo run --example cuda --features cuda
//! ```
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

use devstream::cuda::{ptx, CudaBuffer, CudaStream, KernelArg, LaunchConfig};
use devstream::{current_stream, set_current_stream, Error, Place, Result, Stream};

fn main() {
    match run() {
        Ok(()) => {}
        Err(e @ (Error::BackendUnavailable { .. } | Error::NoDevice { .. })) => {
            println!("no CUDA device here, nothing to run: {e}");
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn run() -> Result<()> {
    let place: Place = "cuda:0".parse()?;
    let a_np: Vec<u32> = (0..10).collect();
    let s = Stream::new(&place)?;
    let kernels = ptx::load(&place)?;
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
        let cuda_stream: &CudaStream = stream.backend().expect("a CUDA stream");
        let a_buf: &CudaBuffer = a_dev.backend().expect("a CUDA buffer");
        let b_buf: &CudaBuffer = b_dev.backend().expect("a CUDA buffer");
        // SAFETY: sum_u32(input, output, n) reads n u32 of `input` and adds them to `output`.
        unsafe {
            cuda_stream.launch_kernel(
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

    // cp.cuda.Stream.null.use(): back to the default (legacy null) stream
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
