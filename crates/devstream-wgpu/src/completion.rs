//! [`Completion`] futures on wgpu: completed by the queue's submitted-work-done callbacks.
//!
//! Every submission registers an `on_submitted_work_done` callback (`sched::submit_locked`) whose
//! note, once published (`device::NoteTargets::publish`), raises the device's completed ticket
//! number and calls [`Completions::fire`], which completes every waiter whose ticket is now done. The callbacks run whenever the device is
//! polled (a `synchronize`, a `query`, the poller); while waiters are pending, the device's
//! completion thread (the one that already waits for the poller's tickets) is asked to wait for
//! the smallest pending ticket ([`Completions::arm`]), so no extra thread and no polling loop
//! exist per future.
//!
//! A completion whose recording is still held behind the stream's gates (a flag wait, a host
//! function) waits on its [`Record`] until the scheduler resolves it to a ticket.

use crate::device::{DeviceShared, Fault, Ticket};
use crate::event::Record;
use crate::util::lock;
use devstream_core::{Completer, Completion, Error, Result};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One pending future.
pub(crate) struct Waiter {
    /// The recording it waits for (its error snapshot is the stream's, for stream completions).
    record: Arc<Record>,
    /// Stream completion: the result carries the stream's first error and the device's fault,
    /// as `synchronize` does. Event completion: the device's fault, else `Ok` once done, as
    /// `Event::synchronize`.
    with_error: bool,
    completer: Completer,
}

impl Waiter {
    /// The result once the recording is done or dropped. Both kinds report the device's fault,
    /// as both `synchronize`s do: work held behind a gate when the loss is seen is dropped
    /// without being submitted, and its recording resolves to the work queued before it, which
    /// may be complete, so "done" alone does not say that the awaited work ran.
    fn result(&self, fault: Option<Error>) -> Result<()> {
        let error = if self.with_error {
            self.record.error().or(fault)
        } else {
            fault
        };
        match error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// The pending completions of one device, by ticket number.
#[derive(Default)]
pub(crate) struct Completions {
    /// Waiters whose recording is on the queue, keyed by its ticket number.
    waiters: Mutex<BTreeMap<u64, (Ticket, Vec<Waiter>)>>,
    /// How many waiters are in `waiters` (the callbacks' lock-free fast path).
    pending: AtomicUsize,
    /// The highest completed ticket number this list has seen (a copy of the device's
    /// `completed`, so that the callback needs no device handle).
    completed: Arc<AtomicU64>,
    /// The device-level fault (device lost, ...), shared with the device.
    fault: Arc<Fault>,
}

impl Completions {
    pub(crate) fn new(completed: Arc<AtomicU64>, fault: Arc<Fault>) -> Completions {
        Completions {
            waiters: Mutex::new(BTreeMap::new()),
            pending: AtomicUsize::new(0),
            completed,
            fault,
        }
    }

    /// Called by every submitted-work-done callback (and wherever the completed number is
    /// raised): completes the waiters whose ticket is done. Wakers run outside the lock.
    pub(crate) fn fire(&self) {
        if self.pending.load(Ordering::SeqCst) == 0 {
            return;
        }
        let done = self.completed.load(Ordering::SeqCst);
        let ready: Vec<Waiter> = {
            let mut waiters = lock(&self.waiters);
            let later = waiters.split_off(&(done + 1));
            let ready = std::mem::replace(&mut *waiters, later);
            let ready: Vec<Waiter> = ready.into_values().flat_map(|(_, w)| w).collect();
            self.pending.fetch_sub(ready.len(), Ordering::SeqCst);
            ready
        };
        if ready.is_empty() {
            return;
        }
        let fault = self.fault.get();
        for waiter in ready {
            let result = waiter.result(fault.clone());
            waiter.completer.complete(result);
        }
    }

    /// Fails every pending waiter with `error` (the device was lost: its callbacks may never
    /// run).
    pub(crate) fn fail_all(&self, error: &Error) {
        let all = std::mem::take(&mut *lock(&self.waiters));
        let all: Vec<Waiter> = all.into_values().flat_map(|(_, w)| w).collect();
        self.pending.fetch_sub(all.len(), Ordering::SeqCst);
        for waiter in all {
            waiter.completer.complete(Err(error.clone()));
        }
    }

    /// The smallest ticket a waiter waits for, if any.
    fn first(&self) -> Option<Ticket> {
        if self.pending.load(Ordering::SeqCst) == 0 {
            return None;
        }
        lock(&self.waiters)
            .first_key_value()
            .map(|(_, (ticket, _))| ticket.clone())
    }

    /// Adds a waiter for a recording on the queue (`ticket`), or completes it at once when its
    /// work is done already.
    fn add(&self, ticket: Option<Ticket>, waiter: Waiter) -> bool {
        let Some(ticket) = ticket else {
            let fault = self.fault.get();
            let result = waiter.result(fault);
            waiter.completer.complete(result);
            return false;
        };
        {
            let mut waiters = lock(&self.waiters);
            // `pending` is raised before `completed` is read; a callback raises `completed`
            // before it reads `pending` (all SeqCst): either this read sees the completion, or
            // the callback sees the waiter (and takes the lock after this insertion).
            self.pending.fetch_add(1, Ordering::SeqCst);
            if self.completed.load(Ordering::SeqCst) < ticket.seq {
                if let Some(fault) = self.fault.get() {
                    // The device was lost before this work completed: it never will.
                    self.pending.fetch_sub(1, Ordering::SeqCst);
                    drop(waiters);
                    waiter.completer.complete(Err(fault));
                    return false;
                }
                waiters
                    .entry(ticket.seq)
                    .or_insert_with(|| (ticket.clone(), Vec::new()))
                    .1
                    .push(waiter);
                return true;
            }
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
        let fault = self.fault.get();
        let result = waiter.result(fault);
        waiter.completer.complete(result);
        false
    }

    /// Asks the device's completion thread to wait for the smallest pending ticket (it wakes
    /// for the earliest wanted ticket, whose callbacks fire the waiters; after each wait it arms
    /// again).
    pub(crate) fn arm(device: &DeviceShared) {
        while let Some(ticket) = device.completions.first() {
            if device.completions.completed.load(Ordering::SeqCst) >= ticket.seq {
                // Done already (its callback may be running now): complete it here.
                device.completions.fire();
                continue;
            }
            device.want(&ticket);
            return;
        }
    }
}

/// A future for the work `record` captured, on its device.
pub(crate) fn completion(record: Arc<Record>, with_error: bool) -> Completion {
    let (completion, completer) = Completion::pending();
    let device = Arc::clone(&record.device);
    let waiter = Waiter {
        record: Arc::clone(&record),
        with_error,
        completer,
    };
    match record.ticket() {
        Some(ticket) => {
            if device.completions.add(ticket, waiter) {
                Completions::arm(&device);
            }
        }
        // Held behind the stream's gates: it moves to the device's list when resolved.
        None => {
            if let Some(waiter) = record.add_waiter(waiter) {
                resolved(&device, [waiter]);
            }
        }
    }
    completion
}

/// Waiters whose recording was resolved to a ticket: into the device's list.
pub(crate) fn resolved(device: &DeviceShared, waiters: impl IntoIterator<Item = Waiter>) {
    let mut armed = false;
    for waiter in waiters {
        let ticket = waiter.record.ticket().flatten();
        armed |= device.completions.add(ticket, waiter);
    }
    if armed {
        Completions::arm(device);
    }
}
