//! Buffers: stream-ordered copies (host→device staged, host buffer→device, device→host,
//! device→device) and fill round trip; host reads wait for queued copies; a buffer dropped
//! while queued work uses it still works.

use crate::harness::{for_each_place, not_applicable, sync, within, Gate, PATIENCE};
use std::time::Duration;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Every copy direction and fill, with offsets, round trips exactly.
#[test]
fn copies_and_fill_round_trip() {
    for_each_place(|place| {
        let stream = devstream::Stream::new(place)?;
        let len = 4096 + 13;
        let data = pattern(len, 5);
        let dev = stream.alloc(len)?;
        assert_eq!(dev.len(), len);
        assert!(!dev.is_empty());
        assert_eq!(dev.place(), place);
        let host = stream.alloc_host(len)?;
        assert_eq!(host.len(), len);
        assert_eq!(host.to_vec()?, vec![0; len], "host buffers start zeroed");

        // Staged host→device, then device→host.
        stream.copy_from_host(&dev, 0, &data)?;
        stream.copy_device_to_host(&host, 0, &dev, 0, len)?;
        sync(&stream)?;
        assert_eq!(host.to_vec()?, data);

        // Host buffer→device at offsets, device→device at offsets, fill a range.
        let src = stream.alloc_host(256)?;
        let src_data = pattern(256, 99);
        src.write(0, &src_data)?;
        let mut check = vec![0u8; 16];
        src.read(100, &mut check)?;
        assert_eq!(check, src_data[100..116]);
        let dev2 = stream.alloc(512)?;
        stream.fill(&dev2, 0, 512, 0)?;
        stream.copy_host_to_device(&dev2, 10, &src, 20, 200)?;
        let dev3 = stream.alloc(512)?;
        stream.fill(&dev3, 0, 512, 0xEE)?;
        stream.copy_device_to_device(&dev3, 3, &dev2, 0, 300)?;
        stream.fill(&dev3, 50, 7, 0xAB)?;
        let out = stream.alloc_host(512)?;
        stream.copy_device_to_host(&out, 1, &dev3, 0, 511)?;
        sync(&stream)?;

        let mut expect2 = vec![0u8; 512];
        expect2[10..210].copy_from_slice(&src_data[20..220]);
        let mut expect3 = vec![0xEEu8; 512];
        expect3[3..303].copy_from_slice(&expect2[..300]);
        expect3[50..57].fill(0xAB);
        let mut expect_out = vec![0u8; 512];
        expect_out[1..512].copy_from_slice(&expect3[..511]);
        assert_eq!(out.to_vec()?, expect_out);

        // Zero-length operations at the end are in range and do nothing.
        stream.copy_from_host(&dev2, 512, &[])?;
        stream.fill(&dev2, 512, 0, 1)?;
        stream.copy_device_to_device(&dev3, 512, &dev2, 512, 0)?;
        sync(&stream)?;
        Ok(())
    });
}

/// `copy_from_host` stages its source before returning: the caller may reuse it at once, even
/// while the copy is held behind a gate.
#[test]
fn copy_from_host_source_is_reusable_at_once() {
    for_each_place(|place| {
        let stream = devstream::Stream::new(place)?;
        let dev = stream.alloc(1024)?;
        let host = stream.alloc_host(1024)?;
        let gate = Gate::close(&stream)?;
        let mut data = pattern(1024, 1);
        let original = data.clone();
        stream.copy_from_host(&dev, 0, &data)?;
        data.fill(0xFF);
        drop(gate);
        stream.copy_device_to_host(&host, 0, &dev, 0, 1024)?;
        sync(&stream)?;
        assert_eq!(host.to_vec()?, original);
        Ok(())
    });
}

/// Host reads of a host buffer wait for queued copies into it.
#[test]
fn host_buffer_reads_wait_for_queued_copies() {
    for_each_place(|place| {
        let stream = devstream::Stream::new(place)?;
        let dev = stream.alloc(300)?;
        let host = stream.alloc_host(300)?;
        let data = pattern(300, 7);
        stream.copy_from_host(&dev, 0, &data)?;
        let Some(gate) = Gate::close(&stream)? else {
            not_applicable(place, "no gate");
            return Ok(());
        };
        stream.copy_device_to_host(&host, 0, &dev, 0, 300)?;
        let opener = gate.opener();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            opener();
        });
        let host = std::sync::Arc::new(host);
        let reader = host.clone();
        let read = within(
            PATIENCE,
            "host buffer read",
            move || reader.to_vec(),
            gate.opener(),
        )?;
        assert_eq!(read, data, "read did not wait for the queued copy");
        releaser.join().unwrap();
        sync(&stream)?;
        Ok(())
    });
}

/// A device buffer dropped while queued work still uses it is freed only after that work: the
/// work sees its data.
#[test]
fn buffer_dropped_while_queued_work_uses_it() {
    for_each_place(|place| {
        let stream = devstream::Stream::new(place)?;
        let data = pattern(2048, 3);
        let kept = stream.alloc(2048)?;
        let host = stream.alloc_host(2048)?;
        let gate = Gate::close(&stream)?;
        {
            let dropped = stream.alloc(2048)?;
            stream.copy_from_host(&dropped, 0, &data)?;
            stream.fill(&dropped, 0, 16, 0x5A)?;
            stream.copy_device_to_device(&kept, 0, &dropped, 0, 2048)?;
            // `dropped` goes out of scope with three queued operations using it.
        }
        drop(gate);
        stream.copy_device_to_host(&host, 0, &kept, 0, 2048)?;
        sync(&stream)?;
        let mut expected = data;
        expected[..16].fill(0x5A);
        assert_eq!(host.to_vec()?, expected);
        Ok(())
    });
}
