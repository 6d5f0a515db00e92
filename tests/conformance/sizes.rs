//! Sizes no one would allocate: `alloc`, `alloc_host`, copies (host→device, device→host,
//! device→device, with offsets whose sum with the length overflows) and fills of 0, 2^46,
//! 2^62 and `usize::MAX` bytes on every place.
//!
//! The rules checked:
//! * A size that cannot be had is a typed error, `Error::OutOfMemory` or
//!   `Error::InvalidArgument`, answered by the call itself: never a panic, never an abort of
//!   the process, never a fault that a later `synchronize` of the place reports. 2^62 bytes and
//!   more exceed every address space; 2^46 bytes (64 TiB) exceed every device and, on the host,
//!   the commit limit of Linux's default (heuristic) overcommit. A place that really hands out
//!   2^46 bytes (a host that overcommits without limit) passes when the buffer has that length
//!   and its last byte round trips.
//! * A range outside its buffer (`offset + len` past the end, or overflowing `usize`) is
//!   `Error::InvalidArgument`, whatever the length.
//! * 0 bytes is a size like any other: `alloc(0)` and `alloc_host(0)` give empty buffers, and
//!   copies and fills of 0 bytes at an offset up to the buffer's length succeed and change
//!   nothing; past the length they are `InvalidArgument`.
//! * After all of it the place works: a new round trip on the same stream and on a new one.
//!
//! A broken backend aborts the process here (an infallible allocation of 64 TiB), so the check
//! runs each place in a child process of its own ([`for_each_place_isolated`]).

use crate::harness::{for_each_place_isolated, sync};
use devstream::{DeviceBuffer, Error, HostBuffer, Place, Result, Stream};

/// The sizes no place can provide (see the module header for 2^46).
const HUGE: [usize; 3] = [1 << 46, 1 << 62, usize::MAX];

/// The length of the small buffers the out-of-range copies and fills are aimed at.
const SMALL: usize = 64;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed))
        .collect()
}

/// Asserts that `result` is a typed refusal of a size: `OutOfMemory` or `InvalidArgument`.
fn assert_refused<T: std::fmt::Debug>(place: &Place, what: &str, result: Result<T>) {
    match result {
        Err(Error::OutOfMemory { .. } | Error::InvalidArgument(_)) => {}
        other => {
            panic!("{what} on {place}: expected OutOfMemory or InvalidArgument, got {other:?}")
        }
    }
}

/// Asserts that `result` is `InvalidArgument` (a range outside its buffer).
fn assert_out_of_range(place: &Place, what: &str, result: Result<()>) {
    match result {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("{what} on {place}: expected InvalidArgument, got {other:?}"),
    }
}

/// A device buffer of `len` bytes a place handed out although no place should be able to:
/// accepted only if it is real (see the module header).
fn honoured_device(stream: &Stream, dev: &DeviceBuffer, len: usize) -> Result<()> {
    let place = stream.place();
    assert_eq!(dev.len(), len, "alloc({len}) on {place}: wrong length");
    let host = stream.alloc_host(1)?;
    stream.fill(dev, len - 1, 1, 0x5C)?;
    stream.copy_device_to_host(&host, 0, dev, len - 1, 1)?;
    sync(stream)?;
    assert_eq!(host.to_vec()?, [0x5C], "alloc({len}) on {place}: last byte");
    eprintln!("[conformance] sizes on {place}: alloc({len}) was honoured for real");
    Ok(())
}

/// As [`honoured_device`], for a host buffer.
fn honoured_host(stream: &Stream, host: &HostBuffer, len: usize) -> Result<()> {
    let place = stream.place();
    assert_eq!(
        host.len(),
        len,
        "alloc_host({len}) on {place}: wrong length"
    );
    host.write(len - 1, &[0x3A])?;
    let mut last = [0u8];
    host.read(len - 1, &mut last)?;
    assert_eq!(last, [0x3A], "alloc_host({len}) on {place}: last byte");
    eprintln!("[conformance] sizes on {place}: alloc_host({len}) was honoured for real");
    Ok(())
}

/// Allocations of each huge size are refused with a typed error.
fn huge_allocations(stream: &Stream) -> Result<()> {
    let place = stream.place();
    for len in HUGE {
        match stream.alloc(len) {
            Ok(dev) if len == 1 << 46 => honoured_device(stream, &dev, len)?,
            result => assert_refused(place, &format!("alloc({len})"), result),
        }
        match stream.alloc_host(len) {
            Ok(host) if len == 1 << 46 => honoured_host(stream, &host, len)?,
            result => assert_refused(place, &format!("alloc_host({len})"), result),
        }
    }
    Ok(())
}

/// Copies and fills whose range leaves a small buffer, by a huge length, a huge offset, or an
/// offset and length whose sum overflows, are `InvalidArgument`.
fn huge_ranges(stream: &Stream) -> Result<()> {
    let place = stream.place();
    let (dev, other) = (stream.alloc(SMALL)?, stream.alloc(SMALL)?);
    let host = stream.alloc_host(SMALL)?;
    let bytes = pattern(8, 1);
    // (offset, len) pairs, each outside a buffer of SMALL bytes.
    let mut ranges = Vec::new();
    for n in HUGE {
        ranges.extend([(0, n), (8, n), (n, 1), (n, 0)]);
    }
    ranges.extend([
        (usize::MAX, 2),
        (2, usize::MAX - 1),
        (SMALL + 1, 0),
        (SMALL, 1),
    ]);
    // Every copy and fill, aimed at `offset..offset + len` of one side.
    type Call<'a> = (&'static str, Box<dyn Fn(usize, usize) -> Result<()> + 'a>);
    let calls: [Call<'_>; 8] = [
        ("fill", Box::new(|o, n| stream.fill(&dev, o, n, 7))),
        (
            "copy_host_to_device (destination)",
            Box::new(|o, n| stream.copy_host_to_device(&dev, o, &host, 0, n)),
        ),
        (
            "copy_host_to_device (source)",
            Box::new(|o, n| stream.copy_host_to_device(&dev, 0, &host, o, n)),
        ),
        (
            "copy_device_to_host (destination)",
            Box::new(|o, n| stream.copy_device_to_host(&host, o, &dev, 0, n)),
        ),
        (
            "copy_device_to_host (source)",
            Box::new(|o, n| stream.copy_device_to_host(&host, 0, &dev, o, n)),
        ),
        (
            "copy_device_to_device (destination)",
            Box::new(|o, n| stream.copy_device_to_device(&other, o, &dev, 0, n)),
        ),
        (
            "copy_device_to_device (source)",
            Box::new(|o, n| stream.copy_device_to_device(&other, 0, &dev, o, n)),
        ),
        (
            "copy_device_to_device (within one buffer)",
            Box::new(|o, n| stream.copy_device_to_device(&dev, o, &dev, 0, n)),
        ),
    ];
    for (offset, len) in ranges {
        for (op, call) in &calls {
            assert_out_of_range(
                place,
                &format!("{op} at offset {offset} of {len} bytes"),
                call(offset, len),
            );
        }
        // Host bytes staged from a slice: only the destination range can be wrong.
        if offset
            .checked_add(bytes.len())
            .is_none_or(|end| end > SMALL)
        {
            assert_out_of_range(
                place,
                &format!("copy_from_host of 8 bytes at offset {offset}"),
                stream.copy_from_host(&dev, offset, &bytes),
            );
        }
        // Host reads and writes of a host buffer, the same ranges.
        if len <= SMALL {
            let mut out = vec![0u8; len];
            let at = |op: &str| format!("{op} at offset {offset} of {len} bytes");
            assert_out_of_range(place, &at("HostBuffer::read"), host.read(offset, &mut out));
            assert_out_of_range(place, &at("HostBuffer::write"), host.write(offset, &out));
        }
    }
    Ok(())
}

/// Zero bytes: empty buffers, and copies and fills of 0 bytes up to a buffer's length, succeed
/// and change nothing.
fn zero_bytes(stream: &Stream) -> Result<()> {
    let place = stream.place();
    let empty = stream.alloc(0)?;
    assert!(empty.is_empty(), "alloc(0) on {place}: not empty");
    assert_eq!(empty.place(), place);
    let empty_host = stream.alloc_host(0)?;
    assert!(empty_host.is_empty(), "alloc_host(0) on {place}: not empty");
    assert_eq!(empty_host.to_vec()?, Vec::<u8>::new());

    let data = pattern(SMALL, 3);
    let dev = stream.alloc(SMALL)?;
    let host = stream.alloc_host(SMALL)?;
    stream.copy_from_host(&dev, 0, &data)?;
    for offset in [0, SMALL / 2, SMALL] {
        stream.fill(&dev, offset, 0, 0xFF)?;
        stream.copy_from_host(&dev, offset, &[])?;
        stream.copy_host_to_device(&dev, offset, &host, offset, 0)?;
        stream.copy_device_to_host(&host, offset, &dev, offset, 0)?;
        stream.copy_device_to_device(&dev, offset, &dev, 0, 0)?;
    }
    // The empty buffers take part in 0-byte copies and fills like any other.
    stream.fill(&empty, 0, 0, 1)?;
    stream.copy_from_host(&empty, 0, &[])?;
    stream.copy_host_to_device(&empty, 0, &empty_host, 0, 0)?;
    stream.copy_device_to_host(&empty_host, 0, &empty, 0, 0)?;
    stream.copy_device_to_device(&empty, 0, &dev, SMALL, 0)?;
    stream.copy_device_to_device(&dev, 0, &empty, 0, 0)?;
    assert_out_of_range(
        place,
        "fill of an empty buffer at 1",
        stream.fill(&empty, 1, 0, 1),
    );
    stream.copy_device_to_host(&host, 0, &dev, 0, SMALL)?;
    sync(stream)?;
    assert_eq!(
        host.to_vec()?,
        data,
        "a 0-byte copy or fill changed bytes on {place}"
    );
    assert_eq!(empty_host.to_vec()?, Vec::<u8>::new());
    Ok(())
}

/// A round trip of every copy direction and a fill: the place works.
fn round_trip(stream: &Stream) -> Result<()> {
    let place = stream.place();
    let data = pattern(SMALL, 11);
    let (a, b) = (stream.alloc(SMALL)?, stream.alloc(SMALL)?);
    let (staging, out) = (stream.alloc_host(SMALL)?, stream.alloc_host(SMALL)?);
    staging.write(0, &data)?;
    stream.copy_host_to_device(&a, 0, &staging, 0, SMALL)?;
    stream.copy_device_to_device(&b, 0, &a, 0, SMALL)?;
    stream.fill(&b, 5, 9, 0xA5)?;
    stream.copy_device_to_host(&out, 0, &b, 0, SMALL)?;
    sync(stream)?;
    let mut expected = data;
    expected[5..14].fill(0xA5);
    assert_eq!(out.to_vec()?, expected, "round trip on {place}");
    Ok(())
}

/// Every huge size answers a typed error, 0 bytes is consistent, and the place works after.
#[test]
fn huge_and_zero_sizes_answer_typed_errors_and_the_place_works_afterwards() {
    for_each_place_isolated(
        "sizes::huge_and_zero_sizes_answer_typed_errors_and_the_place_works_afterwards",
        |place| {
            let stream = Stream::new(place)?;
            // A place without buffers answers `Unsupported` here: n/a (see `contract.rs`).
            stream.alloc(0)?;
            huge_allocations(&stream)?;
            huge_ranges(&stream)?;
            zero_bytes(&stream)?;
            // Nothing refused above was queued, and the place has no fault to report.
            sync(&stream)?;
            round_trip(&stream)?;
            round_trip(&Stream::new(place)?)
        },
    );
}
