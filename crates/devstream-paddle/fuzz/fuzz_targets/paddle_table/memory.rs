//! Memory calls: device and host allocation and release, memset, and the copies.

use crate::draw::{stream_arg, Draw};
use crate::model::{expect, expect_destroyed, sync_answers, Kind, Model};
use crate::{ARENA, BUDGET, UNWRITTEN};
use devstream_paddle_sys::*;
use libfuzzer_sys::arbitrary::Result as Drawn;
use std::ffi::c_void;
use std::ptr::null_mut;

/// Calls an allocation function (`what`) with an out-parameter that is null sometimes:
/// answers its answer, whether the out-parameter was null, and the address it wrote (a failing
/// call must write nothing).
fn allocate_into(
    d: &mut Draw,
    what: &str,
    allocate: impl FnOnce(*mut *mut c_void) -> C_Status,
) -> Drawn<(C_Status, bool, *mut c_void)> {
    let null_out = d.byte()? % 8 == 0;
    let mut out = UNWRITTEN as *mut c_void;
    let out_ptr = if null_out { null_mut() } else { &mut out };
    let answer = allocate(out_ptr);
    if answer != C_SUCCESS {
        assert_eq!(out as usize, UNWRITTEN, "{what} wrote on failure");
    }
    Ok((answer, null_out, out))
}

/// Ops 11..=23.
pub(crate) fn step(d: &mut Draw, m: &mut Model, op: u8, dev: C_Device, dev_ok: bool) -> Drawn<()> {
    match op {
        11 => {
            let size = d.size()?;
            let allocate = |out| call!(device_memory_allocate(dev, out, size));
            let (answer, null_out, out) = allocate_into(d, "device_memory_allocate", allocate)?;
            // A devstream buffer is allocated in the null stream's order and waited for, so
            // the answer may carry that stream's earlier failure (as `cudaMalloc` may return
            // errors of earlier asynchronous work).
            let ok = sync_answers(m, 0);
            expect(m, "device_memory_allocate", answer, dev_ok && !null_out, ok);
            if answer == C_SUCCESS {
                if size > BUDGET {
                    assert!(
                        out.is_null(),
                        "{size} bytes: more than the budget, yet granted"
                    );
                } else if !m.relaxed() {
                    assert!(!out.is_null(), "{size} bytes refused within the budget");
                }
                if !out.is_null() {
                    assert_ne!(out as usize, UNWRITTEN);
                    assert!(
                        !m.inside(out as usize, size.max(1)),
                        "an address handed out twice"
                    );
                    m.device.push((out as usize, size));
                }
            }
        }
        12 => {
            let ptr = d.address(m, 0)?;
            let valid = dev_ok && m.is_live(Kind::Device, ptr);
            let answer = call!(device_memory_deallocate(dev, ptr as *mut c_void, 0));
            let what = "device_memory_deallocate";
            expect_destroyed(m, what, (Kind::Device, ptr), valid, answer);
        }
        13 => {
            let size = d.size()?;
            let ptr = d.address(m, size)?;
            let value = d.byte()?;
            let valid = dev_ok && (size == 0 || m.inside(ptr, size));
            let answer = call!(device_memory_set(dev, ptr as *mut c_void, value, size));
            let ok = sync_answers(m, 0);
            expect(m, "device_memory_set", answer, valid, ok);
            if valid && size != 0 && !m.relaxed() {
                m.synchronized(0);
            }
        }
        14 => {
            let size = if d.flag()? { d.index(4097)? } else { d.size()? };
            if (1 << 30..1 << 40).contains(&size) {
                // A real host's request: granted or not by the system, no finding either way
                // (and past the fuzzer's memory limit).
                return Ok(());
            }
            let allocate = |out| call!(host_memory_allocate(dev, out, size));
            let (answer, null_out, out) = allocate_into(d, "host_memory_allocate", allocate)?;
            if size >= 1 << 40 {
                // More than any host has: refused (C_FAILED), with nothing written.
                assert_ne!(answer, C_SUCCESS, "host_memory_allocate({size}) granted");
            } else {
                expect(
                    m,
                    "host_memory_allocate",
                    answer,
                    dev_ok && !null_out,
                    &[C_SUCCESS],
                );
            }
            if answer == C_SUCCESS {
                assert!(!out.is_null() && out as usize != UNWRITTEN);
                m.host.push((out as usize, size));
            }
        }
        15 => {
            let ptr = d.value(m, Kind::Host)?;
            let valid = m.is_live(Kind::Host, ptr);
            let answer = call!(host_memory_deallocate(dev, ptr as *mut c_void, 0));
            let what = "host_memory_deallocate";
            expect_destroyed(m, what, (Kind::Host, ptr), valid, answer);
        }
        16..=23 => copy(d, m, op, dev, dev_ok)?,
        _ => unreachable!("op {op} is no memory call"),
    }
    Ok(())
}

/// The copies: ops 16..=19 synchronous (h2d, d2h, d2d, p2p), 20..=23 asynchronous.
fn copy(d: &mut Draw<'_, '_>, m: &mut Model, op: u8, dev: C_Device, dev_ok: bool) -> Drawn<()> {
    let size = d.size()?;
    let asynchronous = op >= 20;
    let stream = if asynchronous { stream_arg(d, m)? } else { 0 };
    let stream_ok = stream == 0 || m.is_live(Kind::Stream, stream);
    let mut second_slot = C_Device_st { id: 0 };
    let (answer, valid, name) = match op % 4 {
        3 => {
            let (src_dev, src_ok) = d.device(&mut second_slot)?;
            let dst = d.address(m, size)?;
            let src = d.address(m, size)?;
            let valid = dev_ok
                && src_ok
                && stream_ok
                && (size == 0 || (m.inside(dst, size) && m.inside(src, size)));
            let (dst, src) = (dst as *mut c_void, src as *const c_void);
            let answer = if asynchronous {
                let stream = stream as C_Stream;
                call!(async_memory_copy_p2p(dev, src_dev, stream, dst, src, size))
            } else {
                call!(memory_copy_p2p(dev, src_dev, dst, src, size))
            };
            (answer, valid, "memory_copy_p2p")
        }
        direction => {
            // Each side: a device address (and whether the range is inside a live allocation)
            // or a host pointer in the arena (and whether it is non-null).
            let device = |d: &mut Draw| d.address(m, size).map(|at| (at, m.inside(at, size)));
            let host = |d: &mut Draw| {
                let at = d.host_pointer(size)?;
                Ok((at.unwrap_or(0), at.is_some()))
            };
            let ((dst, dst_ok), (src, src_ok)) = match direction {
                // Host to device: the source is drawn after the destination, and so on.
                0 => (device(d)?, host(d)?),
                1 => {
                    let src = device(d)?;
                    (host(d)?, src)
                }
                _ => (device(d)?, device(d)?),
            };
            let valid = dev_ok && stream_ok && (size == 0 || (dst_ok && src_ok));
            if valid && size > ARENA && direction != 2 {
                return Ok(());
            }
            let table = crate::plugin().table;
            let (name, sync_copy, async_copy) = [
                (
                    "memory_copy_h2d",
                    table.memory_copy_h2d,
                    table.async_memory_copy_h2d,
                ),
                (
                    "memory_copy_d2h",
                    table.memory_copy_d2h,
                    table.async_memory_copy_d2h,
                ),
                (
                    "memory_copy_d2d",
                    table.memory_copy_d2d,
                    table.async_memory_copy_d2d,
                ),
            ][usize::from(direction)];
            let (dst, src) = (dst as *mut c_void, src as *const c_void);
            // SAFETY: as for `call!`: a device pointer that is null or valid, host pointers
            // that are null or inside the arena, addresses and a stream the plug-in checks.
            let answer = unsafe {
                if asynchronous {
                    async_copy.expect(name)(dev, stream as C_Stream, dst, src, size)
                } else {
                    sync_copy.expect(name)(dev, dst, src, size)
                }
            };
            (answer, valid, name)
        }
    };
    let name = if asynchronous {
        format!("async_{name}")
    } else {
        name.to_string()
    };
    let ok = if asynchronous {
        &[C_SUCCESS][..]
    } else {
        sync_answers(m, 0)
    };
    expect(m, &name, answer, valid, ok);
    if valid && !asynchronous && size != 0 && !m.relaxed() {
        m.synchronized(0);
    }
    Ok(())
}
