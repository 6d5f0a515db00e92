//! Layout checks that need no header: sizes and anchor offsets of the 64-bit layouts, the
//! generated tables against the structs, and each known family's table size derived from the
//! field list. The field-by-field comparison with the real headers is `tests/header_offsets.rs`.

use super::*;
use core::mem::{offset_of, size_of};

const WORD: usize = 8;

#[test]
fn params_layout_matches_the_header() {
    assert_eq!(size_of::<CustomRuntimeVersion>(), 3 * WORD);
    assert_eq!(size_of::<C_Device_st>(), 4);
    assert_eq!(size_of::<C_Status>(), 4);
    assert_eq!(offset_of!(CustomRuntimeParams, size), 0);
    assert_eq!(offset_of!(CustomRuntimeParams, interface), 8);
    assert_eq!(offset_of!(CustomRuntimeParams, version), 16);
    assert_eq!(offset_of!(CustomRuntimeParams, device_type), 40);
    assert_eq!(offset_of!(CustomRuntimeParams, sub_device_type), 48);
    assert_eq!(offset_of!(CustomRuntimeParams, pir_default_passes), 56);
    assert_eq!(offset_of!(CustomRuntimeParams, reserved), 64);
    assert_eq!(size_of::<CustomRuntimeParams>(), 96);
    assert_eq!(PARAMS_SIZE_2, 88);
    assert_eq!(PARAMS_SIZE_3, 96);
    assert_eq!(size_of::<paddle_2_6::CustomRuntimeParams>(), PARAMS_SIZE_2);
    assert_eq!(CUSTOM_RUNTIME_PARAMS_FIELDS.len(), 7);
    assert_eq!(paddle_2_6::CUSTOM_RUNTIME_PARAMS_FIELDS.len(), 6);
}

/// Every table lists its struct's fields back to back from offset 0 to its size: no padding,
/// nothing left out (a field missing from a table would leave a hole).
fn assert_contiguous(fields: &[AbiField], size: usize, what: &str) {
    assert_eq!(fields[0].name, "size", "{what}");
    assert_eq!(fields[0].offset, 0, "{what}");
    for pair in fields.windows(2) {
        assert_eq!(
            pair[0].offset + pair[0].size,
            pair[1].offset,
            "{what}: {} then {}",
            pair[0].name,
            pair[1].name
        );
    }
    let last = fields[fields.len() - 1];
    assert_eq!(last.offset + last.size, size, "{what}: {}", last.name);
}

#[test]
fn the_generated_tables_cover_their_structs_in_order() {
    assert_contiguous(
        C_DEVICE_INTERFACE_FIELDS,
        size_of::<C_DeviceInterface>(),
        "3.3 table",
    );
    assert_contiguous(
        paddle_2_6::C_DEVICE_INTERFACE_FIELDS,
        size_of::<paddle_2_6::C_DeviceInterface>(),
        "2.6 table",
    );
    // Every field is a pointer or an array of pointers, the size word included.
    for field in C_DEVICE_INTERFACE_FIELDS {
        assert_eq!(field.size % WORD, 0, "{}", field.name);
    }
    assert_eq!(size_of::<FnVoid>(), WORD, "Option<fn> is one pointer");
    assert_eq!(size_of::<C_GraphHookManager>(), 3 * WORD);
    assert_eq!(size_of::<C_GraphExecuterSetter>(), WORD);
}

#[test]
fn interface_layout_matches_the_paddle_3_3_header() {
    assert_eq!(C_DEVICE_INTERFACE_FIELDS.len(), 100);
    assert_eq!(STABLE_PREFIX_SIZE, 59 * WORD);
    assert_eq!(offset_of!(C_DeviceInterface, reserved_dev_api), 19 * WORD);
    assert_eq!(offset_of!(C_DeviceInterface, get_device_count), 50 * WORD);
    assert_eq!(offset_of!(C_DeviceInterface, reserved_info_api), 72 * WORD);
    assert_eq!(
        offset_of!(C_DeviceInterface, cuda_stream_begin_capture),
        122 * WORD
    );
    assert_eq!(offset_of!(C_DeviceInterface, blas_axpby), 133 * WORD);
    assert_eq!(size_of::<C_DeviceInterface>(), 141 * WORD);
    assert_eq!(size_of::<C_DeviceInterface>(), 1128);
    assert_eq!(LAYOUT_PADDLE_3_3.interface_size, 1128);
    assert_eq!(LAYOUT_PADDLE_3_3.params_size, 96);
    assert_eq!(MAX_KNOWN_INTERFACE_SIZE, 1128);
}

#[test]
fn paddle_2_6_layout_matches_the_header() {
    use paddle_2_6 as p;
    assert_eq!(size_of::<p::C_DeviceInterface>(), 912);
    assert_eq!(LAYOUT_PADDLE_2_6.interface_size, 912);
    assert_eq!(p::C_DEVICE_INTERFACE_FIELDS.len(), 73);
    // The stable prefix is the 3.3 table's.
    let prefix: Vec<&AbiField> = p::C_DEVICE_INTERFACE_FIELDS
        .iter()
        .take_while(|f| f.offset < STABLE_PREFIX_SIZE)
        .collect();
    assert_eq!(prefix.len(), 45);
    for (old, new) in prefix.iter().zip(C_DEVICE_INTERFACE_FIELDS) {
        assert_eq!(**old, *new);
    }
    assert_eq!(
        offset_of!(p::C_DeviceInterface, get_compute_capability),
        59 * WORD
    );
    assert_eq!(
        offset_of!(p::C_DeviceInterface, reserved_info_api),
        62 * WORD
    );
    assert_eq!(offset_of!(p::C_DeviceInterface, blas_axpby), 106 * WORD);
}

/// The table size of every known family is the sum of the fields added up to its release:
/// the measured sizes in [`KNOWN_LAYOUTS`] and the releases named in the field list agree.
#[test]
fn every_known_table_size_follows_from_the_field_list() {
    let release = |since: &str| {
        KNOWN_LAYOUTS
            .iter()
            .position(|l| l.name.strip_prefix("Paddle ") == Some(since))
            .unwrap_or_else(|| panic!("release {since} is no known layout"))
    };
    for (index, layout) in KNOWN_LAYOUTS.iter().enumerate() {
        let size_at = |fields: &[AbiField]| -> usize {
            let present = fields.iter().filter(|f| release(f.since) <= index);
            present.map(|f| f.size).sum()
        };
        assert_eq!(
            size_at(C_DEVICE_INTERFACE_FIELDS),
            layout.interface_size,
            "{}",
            layout.name
        );
        assert_eq!(
            size_at(CUSTOM_RUNTIME_PARAMS_FIELDS),
            layout.params_size,
            "{}",
            layout.name
        );
    }
    // The 2.6 structs hold exactly the fields the list dates 2.6.
    let names = |fields: &[AbiField]| fields.iter().map(|f| f.name).collect::<Vec<_>>();
    let dated_2_6 = |fields: &'static [AbiField]| {
        fields
            .iter()
            .filter(|f| f.since == "2.6")
            .map(|f| f.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(paddle_2_6::C_DEVICE_INTERFACE_FIELDS),
        dated_2_6(C_DEVICE_INTERFACE_FIELDS)
    );
    assert_eq!(
        names(paddle_2_6::CUSTOM_RUNTIME_PARAMS_FIELDS),
        dated_2_6(CUSTOM_RUNTIME_PARAMS_FIELDS)
    );
}

const _: () = assert!(MAX_KNOWN_INTERFACE_SIZE * 4 <= INTERFACE_ALLOCATION);

#[test]
fn the_allocation_has_slack_beyond_every_layout() {
    for pair in KNOWN_LAYOUTS.windows(2) {
        assert!(pair[0].interface_size < pair[1].interface_size, "{pair:?}");
    }
    for layout in KNOWN_LAYOUTS {
        assert!(
            layout.interface_size <= MAX_KNOWN_INTERFACE_SIZE,
            "{layout:?}"
        );
        assert!(layout.params_size * 4 <= PARAMS_ALLOCATION, "{layout:?}");
        assert!(layout.interface_size >= STABLE_PREFIX_SIZE);
        assert!(layout.readable <= layout.interface_size);
        assert!(layout.readable == STABLE_PREFIX_SIZE || layout == LAYOUT_PADDLE_3_3);
    }
}

#[test]
fn zeroed_tables_are_all_null() {
    let table = C_DeviceInterface::zeroed();
    assert_eq!(table.size, 0);
    assert!(table.set_device.is_none() && table.cuda_graph_launch.is_none());
    let params = CustomRuntimeParams::zeroed();
    assert!(params.interface.is_null() && params.device_type.is_null());
    assert_eq!(C_Status(7).name(), "unknown status");
    assert_eq!(C_FAILED.name(), "C_FAILED");
}

/// Each required function names a field of the table, and reads and clears that very field.
#[test]
fn required_functions_read_and_clear_the_field_they_name() {
    for fields in [&REQUIRED_FUNCTIONS[..], &REQUIRED_XCCL_FUNCTIONS[..]] {
        let zeroed = C_DeviceInterface::zeroed();
        let names: Vec<_> = FunctionField::unfilled(fields, &zeroed).collect();
        assert_eq!(names, fields.iter().map(|f| f.name).collect::<Vec<_>>());
        for field in fields {
            let offset = C_DEVICE_INTERFACE_FIELDS
                .iter()
                .find(|abi| abi.name == field.name)
                .unwrap_or_else(|| panic!("{} is not a table field", field.name))
                .offset;
            let mut table = C_DeviceInterface::zeroed();
            // SAFETY: a function-pointer field of the table; any non-null value reads as
            // filled and is never called.
            unsafe {
                (&mut table as *mut C_DeviceInterface)
                    .cast::<u8>()
                    .add(offset)
                    .cast::<usize>()
                    .write(1)
            };
            assert!((field.is_filled)(&table), "{}", field.name);
            (field.clear)(&mut table);
            assert!(!(field.is_filled)(&table), "{}", field.name);
        }
    }
    assert_eq!(FunctionField::names(REQUIRED_FUNCTIONS)[0], "set_device");
}
