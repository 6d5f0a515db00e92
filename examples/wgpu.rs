//! The CuPy streams tutorial on wgpu:0: a host→device copy and a WGSL sum kernel on a
//! non-default stream made current with a guard, then `set_current_stream` (CuPy's `use()`), a
//! device→host copy, and back to the default stream. Checks its own result.
//!
//! ```text
//! cargo run --example wgpu --features wgpu
//! ```
//!
//! Needs a wgpu adapter: any Vulkan/Metal/DX12 GPU, or on Linux without one Mesa's software
//! Vulkan (`apt-get install mesa-vulkan-drivers`). Without one it says so and exits with 1.
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

use devstream::wgpu::{WgpuBuffer, WgpuKernel, WgpuStream};
use devstream::{current_stream, set_current_stream, Error, Place, Result, Stream};

/// `cp.sum` as a WGSL kernel: one workgroup of 64 invocations adds strided partial sums, then
/// reduces them in workgroup memory.
const SUM_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> a: array<i32>;
@group(0) @binding(1) var<storage, read_write> b: array<i32>;
var<workgroup> partial: array<i32, 64>;

@compute @workgroup_size(64)
fn sum(@builtin(local_invocation_index) i: u32) {
    var acc = 0;
    for (var k = i; k < arrayLength(&a); k = k + 64u) {
        acc = acc + a[k];
    }
    partial[i] = acc;
    workgroupBarrier();
    for (var width = 32u; width > 0u; width = width / 2u) {
        if (i < width) {
            partial[i] = partial[i] + partial[i + width];
        }
        workgroupBarrier();
    }
    if (i == 0u) {
        b[0] = partial[0];
    }
}
"#;

fn main() {
    if let Err(e) = run() {
        match e {
            Error::BackendUnavailable { .. } | Error::NoDevice { .. } => eprintln!(
                "no wgpu adapter on this machine ({e}).\nInstall a Vulkan driver (on Debian/Ubuntu \
                 without a GPU: apt-get install mesa-vulkan-drivers) and run again."
            ),
            other => eprintln!("the wgpu example failed: {other}"),
        }
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let place: Place = "wgpu:0".parse()?;
    let a_np: Vec<i32> = (0..10).collect();
    let s = Stream::new(&place)?;

    let (a_dev, b_dev) = {
        let _with_s = s.make_current(); // `with s:`
        let stream = current_stream(&place)?;
        assert_eq!(stream, s);

        // a_cp = cp.asarray(a_np): H2D transfer on stream s
        let a_dev = stream.alloc(a_np.len() * 4)?;
        let bytes: Vec<u8> = a_np.iter().flat_map(|v| v.to_le_bytes()).collect();
        stream.copy_from_host(&a_dev, 0, &bytes)?;

        // b_cp = cp.sum(a_cp): a WGSL kernel dispatched on stream s
        let b_dev = stream.alloc(4)?;
        let wgpu_stream: &WgpuStream = stream.backend().expect("a wgpu stream");
        let a_buf: &WgpuBuffer = a_dev.backend().expect("a wgpu buffer");
        let b_buf: &WgpuBuffer = b_dev.backend().expect("a wgpu buffer");
        let kernel = WgpuKernel::new(wgpu_stream, SUM_WGSL, "sum")?;
        wgpu_stream.dispatch(&kernel, &[a_buf, b_buf], [1, 1, 1])?;
        (a_dev, b_dev)
    }; // the guard restores the previous current stream

    // s.use(): make s current without a scope
    set_current_stream(&s)?;
    // b_np = cp.asnumpy(b_cp): D2H on the current stream
    let stream = current_stream(&place)?;
    let b_host = stream.alloc_host(4)?;
    stream.copy_device_to_host(&b_host, 0, &b_dev, 0, 4)?;
    let b_np = i32::from_le_bytes(b_host.to_vec()?.try_into().expect("4 bytes"));
    assert_eq!(s, current_stream(&place)?);

    // cp.cuda.Stream.null.use(): back to the default stream
    let null = Stream::default_stream(&place)?;
    set_current_stream(&null)?;
    assert_ne!(s, current_stream(&place)?);

    let expected: i32 = a_np.iter().sum();
    assert_eq!(b_np, expected, "sum computed on the stream");
    drop(a_dev);
    let adapter = s
        .backend::<WgpuStream>()
        .map(|w| w.wgpu_device().adapter_info().name.clone())
        .unwrap_or_default();
    println!("sum of {a_np:?} on {s} ({adapter}) = {b_np} (expected {expected}): ok");
    Ok(())
}
