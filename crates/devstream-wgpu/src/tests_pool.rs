//! Crate tests of the wgpu memory pool's specifics (`mempool.rs`): what holds a block, what a
//! kernel sees of one, and a buffer let go inside the scheduler. The rules every pool obeys are
//! checked by the conformance suite (`tests/conformance/pools.rs`, `pool_model.rs`).

use crate::tests::stream;
use crate::*;
use devstream_core::{
    CaptureMode, DeviceBackend, DeviceFlag, DeviceGraph, DevicePool, DeviceStream, Error,
    HostBuffer, Place, PoolOptions, StreamOptions,
};
use std::sync::Arc;

const PLACE: Place = Place::Wgpu(0);

/// A pool of wgpu:0 that keeps every freed block for reuse.
fn keep_all_pool() -> Arc<dyn DevicePool> {
    let options = PoolOptions {
        release_threshold: u64::MAX,
        ..Default::default()
    };
    WgpuBackend::new_pool(&PLACE, options).unwrap()
}

fn read(s: &WgpuStream, b: &WgpuBuffer, len: usize) -> Vec<u8> {
    let h = s.alloc_host(len).unwrap();
    s.copy_device_to_host(&h, 0, b, 0, len).unwrap();
    s.synchronize().unwrap();
    h.to_vec().unwrap()
}

const DOUBLE: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn double(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&data)) { data[id.x] = data[id.x] * 2u; }
}
"#;

const LENGTH: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(1)
fn length() { data[0] = arrayLength(&data); }
"#;

/// A buffer of 100 bytes lives in a block of 512: a kernel's `arrayLength` is the buffer's 25
/// words, not the block's 128.
#[test]
fn a_kernel_sees_the_buffers_length_not_its_blocks() {
    let Some(s) = stream() else { return };
    let pool = keep_all_pool();
    let b = s.alloc_from(&*pool, 100).unwrap();
    assert!(b.wgpu_buffer().size() > 100, "a block of the size class");
    let kernel = WgpuKernel::new(&s, LENGTH, "length").unwrap();
    s.dispatch(&kernel, &[&b], [1, 1, 1]).unwrap();
    assert_eq!(read(&s, &b, 4), 25u32.to_le_bytes());
}

/// A graph that dispatches on a buffer holds the buffer: dropping the handle after the capture
/// does not give its block to the next allocation, which the graph's replays would overwrite.
#[test]
fn a_captured_dispatch_keeps_its_buffer_from_reuse() {
    let Some(s) = stream() else { return };
    let pool = keep_all_pool();
    let kernel = WgpuKernel::new(&s, DOUBLE, "double").unwrap();
    let captured = s.alloc_from(&*pool, 256).unwrap();
    s.fill(&captured, 0, 256, 1).unwrap();
    s.begin_capture(CaptureMode::Relaxed).unwrap();
    s.dispatch(&kernel, &[&captured], [1, 1, 1]).unwrap();
    let graph = s.end_capture().unwrap();
    drop(captured);
    s.synchronize().unwrap();
    let next = s.alloc_from(&*pool, 256).unwrap();
    s.fill(&next, 0, 256, 1).unwrap();
    graph.launch(&s).unwrap();
    assert_eq!(
        read(&s, &next, 256),
        vec![1; 256],
        "the graph's replay wrote the new buffer"
    );
    assert_eq!(
        pool.stats().unwrap().allocations,
        2,
        "the graph's buffer is live"
    );
    drop((graph, next));
    s.synchronize().unwrap();
    assert_eq!(pool.stats().unwrap().allocations, 0);
}

/// A pool of the place's device cannot serve a stream of another device of the same place (an
/// adopted device): its buffers are the other device's.
#[test]
fn a_pool_of_another_device_of_the_place_is_refused() {
    if stream().is_none() {
        return;
    }
    let device = crate::device::fresh_device(0).expect("a second device on wgpu:0's adapter");
    assert_eq!(device.place(), &PLACE);
    let adopted = device.new_stream(StreamOptions::default()).unwrap();
    let pool = keep_all_pool();
    assert!(matches!(
        adopted.alloc_from(&*pool, 64),
        Err(Error::InvalidArgument(_))
    ));
    // Its own default pool serves it.
    let own = adopted.alloc(64).unwrap();
    adopted.fill(&own, 0, 64, 3).unwrap();
    assert_eq!(read(&adopted, &own, 64), vec![3; 64]);
}

/// A held upload is its destination's last holder when the handle is dropped first: the
/// buffer is let go inside the scheduler (its lock taken), so the positions of its users are
/// taken at the pool's next settling. Nothing deadlocks, the block comes back, and a buffer
/// allocated meanwhile does not share it with the upload.
#[test]
fn a_buffer_let_go_inside_the_scheduler_comes_back_later() {
    let Some(s) = stream() else { return };
    let pool = keep_all_pool();
    let gate = WgpuBackend::new_flag(&PLACE).unwrap();
    let host = s.alloc_host(4096).unwrap();
    host.write(0, &[9; 4096]).unwrap();
    let dst = s.alloc_from(&*pool, 4096).unwrap();
    s.wait_flag(&gate, 1).unwrap();
    s.copy_host_to_device(&dst, 0, &host, 0, 4096).unwrap();
    let out = s.alloc_host(4096).unwrap();
    s.copy_device_to_host(&out, 0, &dst, 0, 4096).unwrap();
    drop(dst);
    let other = WgpuBackend::new_stream(&PLACE, StreamOptions::default()).unwrap();
    let meanwhile = other.alloc_from(&*pool, 4096).unwrap();
    other.fill(&meanwhile, 0, 4096, 5).unwrap();
    other.synchronize().unwrap();
    gate.set(1);
    s.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![9; 4096]);
    assert_eq!(read(&other, &meanwhile, 4096), vec![5; 4096]);
    drop(meanwhile);
    other.synchronize().unwrap();
    assert_eq!(pool.stats().unwrap().allocations, 0);
    assert_eq!(pool.stats().unwrap().used_bytes, 0);
}

/// Between synchronisations a freed block is cached whatever the threshold (the next
/// allocation of its class takes it, creating nothing); `synchronize` is where the threshold
/// releases it.
#[test]
fn the_threshold_releases_at_synchronisation_points() {
    let Some(s) = stream() else { return };
    let pool = WgpuBackend::new_pool(&PLACE, PoolOptions::default()).unwrap();
    let first = s.alloc_from(&*pool, 256).unwrap();
    let block = first.wgpu_buffer().clone();
    drop(first);
    let stats = pool.stats().unwrap();
    assert_eq!((stats.used_bytes, stats.reserved_bytes), (0, 512));
    let again = s.alloc_from(&*pool, 300).unwrap();
    assert_eq!(
        again.wgpu_buffer(),
        &block,
        "the cached block was taken again"
    );
    drop(again);
    s.synchronize().unwrap();
    assert_eq!(pool.stats().unwrap().reserved_bytes, 0);
}
