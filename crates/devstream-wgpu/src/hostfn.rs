//! Host functions: the threads that run them, what the running one is (so that waits made from
//! inside it can tell work queued after it), and dropping user values whose `Drop` panics.
//!
//! The poller never runs a host function itself: it hands it to a runner thread of the device
//! and goes on releasing the other streams, so a host function that blocks (on a channel, on
//! another stream, on a devstream wait) stalls only its own stream. A device keeps one runner
//! thread and starts another only when every runner is busy (host functions of several streams
//! blocking at once); extra runners end after a few idle seconds. A stream has at most one host
//! function running at a time (`Held::Running` holds its later work), so stream order holds
//! whichever runner takes it. After a host function the runner releases the stream's next work
//! itself and runs its next host function directly when it is ready, so a chain of host
//! functions on one stream costs no hand-off per function.

use crate::device::DeviceShared;
use crate::util::lock;
use devstream_core::panic::{drop_contained, drop_payload};
use devstream_core::HostFn;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::time::Duration;

/// How long an extra runner thread waits for work before it ends.
const IDLE_EXIT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct RunnerState {
    /// Host functions ready to run: (stream id, function).
    jobs: VecDeque<(u64, HostFn)>,
    /// Runner threads waiting for a job.
    idle: usize,
    /// Runner threads alive.
    threads: usize,
    shutdown: bool,
}

/// The runner threads of one device.
#[derive(Default)]
pub(crate) struct Runners {
    state: Mutex<RunnerState>,
    ready: Condvar,
}

impl Runners {
    /// Hands host function `f` of stream `id` to a runner thread, starting one when every runner
    /// is busy. Gives `f` back when no runner exists and none could be started.
    pub(crate) fn submit(
        self: &Arc<Self>,
        device: &Arc<DeviceShared>,
        id: u64,
        f: HostFn,
    ) -> Result<(), HostFn> {
        let mut state = lock(&self.state);
        state.jobs.push_back((id, f));
        if state.jobs.len() <= state.idle {
            self.ready.notify_one();
            return Ok(());
        }
        let weak = Arc::downgrade(device);
        let runners = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("devstream-wgpu-host-{}", device.place))
            .spawn(move || {
                if let Err(payload) = catch_unwind(AssertUnwindSafe(|| runner(weak, &runners))) {
                    drop_payload(payload);
                }
            });
        match spawned {
            Ok(_) => {
                state.threads += 1;
                Ok(())
            }
            // A busy runner takes the job when it is done.
            Err(_) if state.threads > 0 => Ok(()),
            Err(_) => match state.jobs.pop_back() {
                Some((_, f)) => Err(f),
                None => Ok(()),
            },
        }
    }

    /// Tells the runners to end (the device is gone).
    pub(crate) fn shutdown(&self) {
        let jobs = {
            let mut state = lock(&self.state);
            state.shutdown = true;
            std::mem::take(&mut state.jobs)
        };
        self.ready.notify_all();
        for (_, f) in jobs {
            drop_contained(f);
        }
    }
}

/// A runner thread: runs the jobs of its device until the device is gone or it idles out.
fn runner(weak: Weak<DeviceShared>, runners: &Runners) {
    loop {
        let job = {
            let mut state = lock(&runners.state);
            let job = loop {
                if let Some(job) = state.jobs.pop_front() {
                    break Some(job);
                }
                if state.shutdown {
                    break None;
                }
                state.idle += 1;
                let (guard, waited) = runners
                    .ready
                    .wait_timeout(state, IDLE_EXIT)
                    .unwrap_or_else(PoisonError::into_inner);
                state = guard;
                state.idle -= 1;
                // The last runner stays: the next host function then needs no thread start.
                if waited.timed_out() && state.jobs.is_empty() && state.threads > 1 {
                    break None;
                }
            };
            if job.is_none() {
                state.threads -= 1;
            }
            job
        };
        let Some((id, f)) = job else {
            return;
        };
        match weak.upgrade() {
            Some(device) => crate::sched::run_host_func(&device, id, f),
            None => {
                drop_contained(f);
            }
        }
    }
}

thread_local! {
    /// The host function this thread is running: its device and stream.
    static RUNNING: RefCell<Option<(Arc<DeviceShared>, u64)>> = const { RefCell::new(None) };
}

/// Marks this thread as running a host function of stream `id` until dropped.
pub(crate) struct InHostFunc(Option<(Arc<DeviceShared>, u64)>);

impl InHostFunc {
    pub(crate) fn enter(device: &Arc<DeviceShared>, id: u64) -> InHostFunc {
        InHostFunc(RUNNING.with(|r| r.replace(Some((Arc::clone(device), id)))))
    }
}

impl Drop for InHostFunc {
    fn drop(&mut self) {
        let outer = self.0.take();
        let _ = RUNNING.try_with(|r| r.replace(outer));
    }
}

/// The host function this thread is running, if any: its device and stream.
pub(crate) fn running() -> Option<(Arc<DeviceShared>, u64)> {
    RUNNING.try_with(|r| r.borrow().clone()).ok().flatten()
}
