//! The CuPy streams tutorial, written once for every place; each example supplies only its
//! backend's sum kernel.
//!
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

use devstream::{current_stream, set_current_stream, DeviceBuffer, Error, Place, Result, Stream};

/// Launches `output[0] = sum(input[0..n])` (u32, little-endian) on `stream`; `output` is zeroed.
pub type SumKernel<'a> = dyn Fn(&Stream, &DeviceBuffer, &DeviceBuffer, u32) -> Result<()> + 'a;

/// Runs the tutorial on `place` with `sum` as the kernel and checks the result.
pub fn run(place: &Place, sum: &SumKernel<'_>) -> Result<()> {
    let a_np: Vec<u32> = (0..10).collect();
    let s = Stream::new(place)?;

    let (a_dev, b_dev) = {
        let _with_s = s.make_current(); // `with s:`
        let stream = current_stream(place)?;
        assert_eq!(stream, s);

        // a_cp = cp.asarray(a_np): H2D transfer on stream s
        let a_dev = stream.alloc(a_np.len() * 4)?;
        let bytes: Vec<u8> = a_np.iter().flat_map(|v| v.to_le_bytes()).collect();
        stream.copy_from_host(&a_dev, 0, &bytes)?;

        // b_cp = cp.sum(a_cp): a kernel launched on stream s
        let b_dev = stream.alloc(4)?;
        stream.fill(&b_dev, 0, 4, 0)?;
        sum(&stream, &a_dev, &b_dev, a_np.len() as u32)?;
        (a_dev, b_dev)
    }; // the guard restores the previous current stream

    // s.use(): make s current without a scope
    set_current_stream(&s)?;
    // b_np = cp.asnumpy(b_cp): D2H on the current stream
    let stream = current_stream(place)?;
    let b_host = stream.alloc_host(4)?;
    stream.copy_device_to_host(&b_host, 0, &b_dev, 0, 4)?;
    let b_np = u32::from_le_bytes(b_host.to_vec()?.try_into().expect("4 bytes"));
    assert_eq!(s, current_stream(place)?);

    // cp.cuda.Stream.null.use(): back to the default stream
    let null = Stream::default_stream(place)?;
    set_current_stream(&null)?;
    assert_ne!(s, current_stream(place)?);

    let expected: u32 = a_np.iter().sum();
    if b_np != expected {
        return Err(Error::InvalidArgument(format!(
            "sum on {place} gave {b_np}, expected {expected}"
        )));
    }
    drop(a_dev);
    println!("sum of {a_np:?} on {s} = {b_np} (expected {expected}): ok");
    Ok(())
}

/// `main` for a GPU example: a missing runtime or device is a message, not a failure.
#[allow(dead_code)]
pub fn exit_with(what: &str, result: Result<()>) {
    match result {
        Ok(()) => {}
        Err(e @ (Error::BackendUnavailable { .. } | Error::NoDevice { .. })) => {
            println!("no {what} device here, nothing to run: {e}");
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
