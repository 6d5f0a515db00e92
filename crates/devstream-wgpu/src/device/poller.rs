//! The device's two threads: the poller, which releases finished work and held streams and
//! watches flags and other devices' submissions, and the completion thread, the only one that
//! blocks in `Device::poll` (without a timeout) for the ticket the poller wants.

use super::*;

pub(super) fn poller(weak: Weak<DeviceShared>, signal: Arc<Signal>, shutdown: Arc<AtomicBool>) {
    loop {
        if shutdown.load(Ordering::SeqCst) {
            return;
        }
        let seen = signal.generation();
        let Some(device) = weak.upgrade() else {
            return;
        };
        match device.step() {
            Step::Progress => {}
            Step::WaitLocal(ticket) => {
                // The completion thread waits for it and wakes us; the long timeout is only a
                // backstop.
                device.completer.want(&ticket);
                drop(device);
                signal.wait_change(seen, Some(POLL_SLICE * 100));
            }
            Step::WaitForeign(foreign, ticket, local) => {
                if let Some(local) = local {
                    device.completer.want(&local);
                }
                drop(device);
                // Another device's completions do not wake us: ask it (a plain poll) every
                // slice. A failed poll is recorded as that device's fault.
                if !foreign.query_ticket(Some(&ticket)).unwrap_or(true) {
                    drop(foreign);
                    signal.wait_change(seen, Some(POLL_SLICE));
                }
            }
            Step::Idle { timed } => {
                drop(device);
                signal.wait_change(seen, timed.then_some(POLL_SLICE));
            }
        }
    }
}

/// The ticket the poller waits for, handed to the device's completion thread.
///
/// Only that thread blocks in `Device::poll` for the poller, and only without a timeout: in
/// wgpu 30 a `poll(Wait { timeout: Some(..) })` that times out while another thread's poll (or
/// `Queue::submit`, which polls too) drains the queue trips an assertion inside wgpu
/// ("If the queue is empty, the current submission index ... should be at least the wait
/// submission index"), losing the callbacks that poll collected (fixed upstream in
/// gfx-rs/wgpu#9958). A wait without a timeout returns only once its submission is done, so it
/// cannot trip it.
#[derive(Default)]
pub(crate) struct Completer {
    wanted: Mutex<Option<Ticket>>,
    changed: std::sync::Condvar,
}

impl Completer {
    /// Asks the completion thread to wait for `ticket` (an earlier wanted ticket wins).
    pub(super) fn want(&self, ticket: &Ticket) {
        let mut wanted = lock(&self.wanted);
        if wanted.as_ref().is_none_or(|w| ticket.seq < w.seq) {
            *wanted = Some(ticket.clone());
            self.changed.notify_one();
        }
    }

    /// Wakes the completion thread so that it sees the shutdown.
    pub(super) fn wake(&self) {
        let _wanted = lock(&self.wanted);
        self.changed.notify_all();
    }
}

/// The completion thread: waits (without a timeout) for each ticket the poller wants, then
/// wakes the poller.
pub(super) fn completer(
    weak: Weak<DeviceShared>,
    completer: Arc<Completer>,
    work: Arc<Signal>,
    shutdown: Arc<AtomicBool>,
) {
    loop {
        let ticket = {
            let mut wanted = lock(&completer.wanted);
            loop {
                if shutdown.load(Ordering::SeqCst) {
                    return;
                }
                if let Some(ticket) = wanted.take() {
                    break ticket;
                }
                wanted = devstream_core::sync::wait(&completer.changed, wanted);
            }
        };
        let Some(device) = weak.upgrade() else {
            return;
        };
        // A failed poll is recorded as the device's fault; the poller goes on serving streams.
        let _ = device.wait_ticket(&ticket, None);
        // Completion futures wait for later tickets: wait for the next one.
        crate::completion::Completions::arm(&device);
        drop(device);
        work.notify();
    }
}
