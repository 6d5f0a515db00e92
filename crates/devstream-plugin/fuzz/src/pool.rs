//! An elastic thread pool for the plug-in's stream workers and its late callbacks: a job never
//! waits for a free thread (a new one starts when none is idle), so a job that blocks (a flag
//! wait, a host function that synchronizes another stream) never starves another; idle threads
//! are reused, so the thread count stays at the most jobs ever running at once.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

type Job = Box<dyn FnOnce() + Send>;

struct Jobs {
    queue: VecDeque<Job>,
    idle: usize,
    busy: usize,
}

static JOBS: Mutex<Jobs> = Mutex::new(Jobs {
    queue: VecDeque::new(),
    idle: 0,
    busy: 0,
});
static WORK: Condvar = Condvar::new();
static QUIET: Condvar = Condvar::new();

fn jobs() -> MutexGuard<'static, Jobs> {
    JOBS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `job` on a pool thread.
pub fn spawn(job: impl FnOnce() + Send + 'static) {
    let mut jobs = jobs();
    jobs.queue.push_back(Box::new(job));
    if jobs.idle > jobs.queue.len() - 1 {
        WORK.notify_one();
        return;
    }
    drop(jobs);
    std::thread::Builder::new()
        .name("fuzz plug-in worker".into())
        .spawn(work)
        .expect("cannot start a plug-in worker thread");
}

fn work() {
    let mut jobs = jobs();
    loop {
        match jobs.queue.pop_front() {
            Some(job) => {
                jobs.busy += 1;
                drop(jobs);
                job();
                jobs = self::jobs();
                jobs.busy -= 1;
                QUIET.notify_all();
            }
            None => {
                jobs.idle += 1;
                jobs = WORK.wait(jobs).unwrap_or_else(|e| e.into_inner());
                jobs.idle -= 1;
            }
        }
    }
}

/// Jobs queued or running now.
pub fn busy() -> usize {
    let jobs = jobs();
    jobs.queue.len() + jobs.busy
}
