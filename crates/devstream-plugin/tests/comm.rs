//! The plug-in collectives engine (`PluginComm`, cargo feature `comm`) through the core traits:
//! on the `custom_cpu` test plug-in (which fills the `xccl_*` functions) and on the `ref_cpu`
//! one (which leaves them null, like Paddle's reference plug-in: `Unsupported`).
#![cfg(feature = "comm")]

mod common;

use devstream_core::comm::{CallKind, Collective};
use devstream_core::{
    CommBackend, DataType, DeviceBackend, DeviceCommunicator, DeviceStream, Error, HostBuffer,
    Place, ReduceOp,
};
use devstream_plugin::comm::{c_data_type, c_reduce_op, REQUIRED_XCCL};
use devstream_plugin::{PluginBackend, PluginComm};
use devstream_test_plugin_ref_cpu as ref_cpu;
use std::time::Duration;

#[test]
fn custom_cpu_ranks_on_both_devices_all_reduce_through_the_traits() {
    let caps = PluginBackend::capabilities(&common::cpu0()).unwrap();
    assert!(caps.collectives, "{caps:?}");
    let id = PluginBackend::unique_id(&common::cpu0()).unwrap();
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let place: Place = format!("custom_cpu:{rank}").parse().unwrap();
                let comm = PluginBackend::init_comm(&place, rank, 2, &id).unwrap();
                assert!(!comm.as_raw().is_null());
                assert_eq!(
                    (comm.rank(), comm.nranks(), comm.place()),
                    (rank, 2, &place)
                );
                comm.set_timeout(Duration::from_millis(1500));
                assert_eq!(comm.timeout(), Duration::from_millis(1500));
                let s = common::stream(&place);
                let buf = s.alloc(8).unwrap();
                let mine = [rank as i32 + 1, 10 * (rank as i32 + 1)];
                let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_ne_bytes()).collect();
                s.copy_from_host(&buf, 0, &bytes).unwrap();
                let prod =
                    Collective::new(CallKind::AllReduce { op: ReduceOp::Prod }, 2, DataType::I32);
                comm.collective(&s, &prod, &buf, &buf).unwrap();
                let host = s.alloc_host(8).unwrap();
                s.copy_device_to_host(&host, 0, &buf, 0, 8).unwrap();
                drop(comm); // destroyed once the stream has run past the collective
                s.synchronize().unwrap();
                host.to_vec().unwrap()
            })
        })
        .collect();
    let want: Vec<u8> = [2i32, 200].iter().flat_map(|v| v.to_ne_bytes()).collect();
    for rank in ranks {
        assert_eq!(rank.join().unwrap(), want);
    }
}

#[test]
fn the_abi_codes_are_the_headers() {
    // device_ext.h (3.3.1): UINT8 = 2, INT32 = 8, INT64 = 9, FLOAT16 = 10, FLOAT32 = 11,
    // FLOAT64 = 12, BFLOAT16 = 13; SUM = 0, AVG, MAX, MIN, PRODUCT.
    let types = [
        (DataType::U8, 2),
        (DataType::I32, 8),
        (DataType::I64, 9),
        (DataType::F16, 10),
        (DataType::F32, 11),
        (DataType::F64, 12),
        (DataType::BF16, 13),
    ];
    for (dtype, code) in types {
        assert_eq!(c_data_type(dtype), Some(code), "{dtype}");
    }
    // The reduction codes count up from 0 in this order.
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Avg,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
    ];
    for (code, op) in (0..).zip(ops) {
        assert_eq!(c_reduce_op(op), Some(code), "{op}");
    }
    assert_eq!(REQUIRED_XCCL.len(), 13);
}

#[test]
fn ref_cpu_without_xccl_is_unsupported() {
    let Some(place) = ref_cpu::first_place_or_skip() else {
        return;
    };
    let place: Place = place.parse().unwrap();
    assert!(!PluginBackend::capabilities(&place).unwrap().collectives);
    let unsupported = |e: Error| assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    unsupported(PluginComm::unique_id(&place).unwrap_err());
    let id = PluginComm::unique_id(&common::cpu0()).unwrap();
    unsupported(PluginComm::init(&place, 0, 1, &id).unwrap_err());
    // Argument errors come first, as on every engine.
    let e = PluginComm::init(&place, 1, 1, &id).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}
