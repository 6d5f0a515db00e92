//! The CuPy streams tutorial on the CPU place: a host→device copy and a sum kernel on a
//! non-default stream made current with a guard, then `set_current_stream` (CuPy's `use()`), a
//! device→host copy, and back to the default stream. Checks its own result.
//!
//! ```text
//! cargo run --example cpu
//! ```
//!
//! The tutorial itself is `examples/common/tutorial.rs`, shared by every backend's example; on
//! the CPU place the kernel is a closure that gets the stream's buffers.

#[path = "common/tutorial.rs"]
mod tutorial;

use devstream::cpu::{CpuBuffer, CpuStream};
use devstream::{Place, Result};

fn main() -> Result<()> {
    let place: Place = "cpu".parse()?;
    tutorial::run(&place, &|stream, input, output, n| {
        let cpu_stream: &CpuStream = stream.backend().expect("a CPU stream");
        let input: &CpuBuffer = input.backend().expect("a CPU buffer");
        let output: &CpuBuffer = output.backend().expect("a CPU buffer");
        cpu_stream.launch_kernel(&[input, output], move |buffers| {
            let sum: u32 = buffers[0]
                .chunks_exact(4)
                .take(n as usize)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .sum();
            let previous = u32::from_le_bytes(buffers[1][..4].try_into().expect("4 bytes"));
            buffers[1][..4].copy_from_slice(&(previous + sum).to_le_bytes());
        })
    })
}
