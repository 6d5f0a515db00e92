//! The CuPy streams tutorial on the CPU place: a host→device copy and a sum kernel on a
//! non-default stream made current with a guard, then `set_current_stream` (CuPy's `use()`), a
//! device→host copy, and back to the default stream. Checks its own result.
//!
//! ```text
//! cargo run --example cpu
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

use devstream::cpu::{CpuBuffer, CpuStream};
use devstream::{current_stream, set_current_stream, Place, Result, Stream};

fn main() -> Result<()> {
    let place: Place = "cpu".parse()?;
    let a_np: Vec<i64> = (0..10).collect();
    let s = Stream::new(&place)?;

    let (a_dev, b_dev) = {
        let _with_s = s.make_current(); // `with s:`
        let stream = current_stream(&place)?;
        assert_eq!(stream, s);

        // a_cp = cp.asarray(a_np): H2D transfer on stream s
        let a_dev = stream.alloc(a_np.len() * 8)?;
        let bytes: Vec<u8> = a_np.iter().flat_map(|v| v.to_le_bytes()).collect();
        stream.copy_from_host(&a_dev, 0, &bytes)?;

        // b_cp = cp.sum(a_cp): a kernel launched on stream s
        let b_dev = stream.alloc(8)?;
        let cpu_stream: &CpuStream = stream.backend().expect("a CPU stream");
        let a_buf: &CpuBuffer = a_dev.backend().expect("a CPU buffer");
        let b_buf: &CpuBuffer = b_dev.backend().expect("a CPU buffer");
        cpu_stream.launch_kernel(&[a_buf, b_buf], |buffers| {
            let sum: i64 = buffers[0]
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .sum();
            buffers[1].copy_from_slice(&sum.to_le_bytes());
        })?;
        (a_dev, b_dev)
    }; // the guard restores the previous current stream

    // s.use(): make s current without a scope
    set_current_stream(&s)?;
    // b_np = cp.asnumpy(b_cp): D2H on the current stream
    let stream = current_stream(&place)?;
    let b_host = stream.alloc_host(8)?;
    stream.copy_device_to_host(&b_host, 0, &b_dev, 0, 8)?;
    let b_np = i64::from_le_bytes(b_host.to_vec()?.try_into().expect("8 bytes"));
    assert_eq!(s, current_stream(&place)?);

    // cp.cuda.Stream.null.use(): back to the default stream
    let null = Stream::default_stream(&place)?;
    set_current_stream(&null)?;
    assert_ne!(s, current_stream(&place)?);

    let expected: i64 = a_np.iter().sum();
    assert_eq!(b_np, expected, "sum computed on the stream");
    drop(a_dev);
    println!("sum of {a_np:?} on {s} = {b_np} (expected {expected}): ok");
    Ok(())
}
