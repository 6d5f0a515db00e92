//! What devstream stages on the host for a copy or fill (the bytes a plug-in's asynchronous
//! copy reads) is allocated fallibly: a device buffer larger than the host can stage answers a
//! typed error, never an abort (the faulty plug-in's `MODE_DEVICE_MEMORY_ELSEWHERE` hands out
//! device buffers of any size).

mod common;

use common::*;
use devstream_core::{DeviceStream, Error};
use devstream_test_plugin_faulty::MODE_DEVICE_MEMORY_ELSEWHERE;

#[test]
fn a_fill_larger_than_the_host_can_stage_is_out_of_memory() {
    let copy = Faulty::unique(MODE_DEVICE_MEMORY_ELSEWHERE);
    let place = copy.load().unwrap().places[0].clone();
    let s = stream(&place);
    // No host has 2^62 bytes; the device buffer exists on the plug-in's word.
    let len = 1usize << 62;
    let huge = s.alloc(len).unwrap();
    match s.fill(&huge, 0, len, 7) {
        Err(Error::OutOfMemory { bytes, .. }) => assert_eq!(bytes, len),
        other => panic!("fill of {len} bytes: {other:?}"),
    }
    // The stream still works.
    s.synchronize().unwrap();
}
