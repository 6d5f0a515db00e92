//! Device→host copies awaited by a host function given the host buffer they land in
//! (`launch_host_func_with`, `devstream_core::host_fn_access`).
//!
//! Such a copy's use of the buffer ends when its readback is mapped (the bytes can then be
//! applied), and a mapping callback runs only in a device poll made after the copy's
//! submission completed and `map_async` was called. A host read polls for itself
//! (`Readback::wait`); a host function waits without a thread of its own, so the device's
//! poller drives the awaited readbacks instead: it keeps each one until it is mapped, has the
//! completion thread wait for the earliest submission still running (a wait that also runs
//! the mapping callbacks of that submission), and polls once, without blocking, when one has
//! completed unmapped (its `map_async` came after the poll that saw the submission complete).

use crate::buffer::Readback;
use crate::device::{DeviceShared, Ticket};
use crate::util::lock;
use std::sync::{Arc, Mutex, Weak};

/// The readbacks of a device that a host function waits for, submitted and not mapped yet.
#[derive(Default)]
pub(crate) struct Landings {
    awaited: Mutex<Vec<Weak<Readback>>>,
}

/// Makes the poller of `device` drive `readback` (submitted, its `map_async` called) until it
/// is mapped.
pub(crate) fn drive_until_mapped(device: &DeviceShared, readback: &Arc<Readback>) {
    lock(&device.landings.awaited).push(Arc::downgrade(readback));
    device.work.notify();
}

/// What one pass over the awaited readbacks asks of the poller.
#[derive(Default)]
pub(crate) struct Drive {
    /// A poll ran mapping callbacks: look again at once.
    pub(crate) progressed: bool,
    /// The earliest submission still running: wait for it.
    pub(crate) wait: Option<Ticket>,
    /// A readback stays unmapped though its submission is over (the device is lost, or a
    /// mapping is still being requested): look again after a slice.
    pub(crate) timed: bool,
}

/// One pass of the poller over `device`'s awaited readbacks (outside the scheduler lock: it
/// may poll, which runs callbacks).
pub(crate) fn drive(device: &DeviceShared) -> Drive {
    let mut drive = Drive::default();
    if scan(device, &mut drive.wait) {
        let _ = device.poll_nonblocking();
        drive.wait = None;
        // Still complete and unmapped after a poll: its mapping was not requested yet when
        // the poll ran, or a lost device does not map it yet; retried after a slice.
        drive.timed = scan(device, &mut drive.wait);
        drive.progressed = !drive.timed;
    }
    drive
}

/// Drops the mapped (or freed) readbacks from the list and notes the earliest submission still
/// running in `first`; answers whether one has completed unmapped (a poll maps it).
fn scan(device: &DeviceShared, first: &mut Option<Ticket>) -> bool {
    let mut completed_unmapped = false;
    let mut awaited = lock(&device.landings.awaited);
    awaited.retain(|weak| {
        let Some(readback) = weak.upgrade() else {
            return false;
        };
        if readback.is_mapped() {
            return false;
        }
        match readback.ticket() {
            Some(ticket) if !device.is_complete(Some(&ticket)) && !device.fault.is_set() => {
                if first.as_ref().is_none_or(|f| ticket.seq < f.seq) {
                    *first = Some(ticket);
                }
            }
            _ => completed_unmapped = true,
        }
        true
    });
    completed_unmapped
}
