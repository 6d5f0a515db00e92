//! loom models of the worker pool's wake-up handshake: the production
//! [`PoolShared::push`], [`PoolShared::pop`] (spinning, the locked re-check, parking) and
//! [`PoolShared::shut_down`], run on loom's atomics, mutex and condvar (see `sync.rs`) over
//! every interleaving up to the preemption bound. The workers run the production worker loop
//! (`while let Some(x) = pool.pop()`), with "record the job" standing in for `run_stream`.
//!
//! A lost wake-up shows as loom's deadlock report (every thread parked), a job run twice or
//! never as a failed assertion.
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p devstream-cpu --release --lib loom
//! ```
//! (`cargo xtask loom` runs it into `target/loom`.)

use super::{PoolShared, Schedulable};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread::{self, JoinHandle};

/// Runs `f` under loom with the preemption bound `LOOM_MAX_PREEMPTIONS`, else 3 (unbounded
/// never finishes), and prints how many interleavings were explored.
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    let explored = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = explored.clone();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    eprintln!(
        "loom: {name}: {} interleavings (preemption bound {:?})",
        explored.load(std::sync::atomic::Ordering::Relaxed),
        builder.preemption_bound.unwrap_or(3)
    );
}

/// What the model schedules instead of a stream.
struct Job {
    id: usize,
    level: usize,
}

impl Schedulable for Job {
    fn level(&self) -> usize {
        self.level
    }
}

/// How many times each job ran, and a condvar the test thread waits on for them.
struct Ran {
    counts: Mutex<Vec<usize>>,
    changed: Condvar,
}

impl Ran {
    fn new(jobs: usize) -> Arc<Ran> {
        Arc::new(Ran {
            counts: Mutex::new(vec![0; jobs]),
            changed: Condvar::new(),
        })
    }

    fn record(&self, id: usize) {
        self.counts.lock().unwrap()[id] += 1;
        self.changed.notify_all();
    }

    /// Waits until `jobs` runs were recorded. A job whose wake-up was lost leaves every thread
    /// parked here or in `pop`: loom reports the deadlock.
    fn wait_for(&self, jobs: usize) {
        let mut counts = self.counts.lock().unwrap();
        while counts.iter().sum::<usize>() < jobs {
            counts = self.changed.wait(counts).unwrap();
        }
    }

    fn counts(&self) -> Vec<usize> {
        self.counts.lock().unwrap().clone()
    }
}

/// The pool the model drives and its workers.
type Started = (Arc<PoolShared<Job>>, Arc<Ran>, Vec<JoinHandle<()>>);

/// A pool and `workers` threads running the production worker loop on it, recording the runs
/// of `jobs` jobs.
fn start(jobs: usize, workers: usize) -> Started {
    let pool: Arc<PoolShared<Job>> = Arc::new(PoolShared::new());
    let ran = Ran::new(jobs);
    let threads = (0..workers)
        .map(|_| {
            let (pool, ran) = (pool.clone(), ran.clone());
            thread::spawn(move || {
                while let Some(job) = pool.pop() {
                    ran.record(job.id);
                }
            })
        })
        .collect();
    (pool, ran, threads)
}

/// Shuts the pool down and joins its workers.
fn shut_down(pool: &PoolShared<Job>, workers: Vec<JoinHandle<()>>) {
    pool.shut_down();
    for worker in workers {
        worker.join().unwrap();
    }
}

/// A job pushed while two workers are anywhere in `pop` (claiming the spinner role, spinning,
/// giving up, re-checking under the lock, parked) is run, once, without a shutdown to help.
#[test]
fn loom_a_job_pushed_while_workers_spin_or_park_is_run_once() {
    model(
        "a_job_pushed_while_workers_spin_or_park_is_run_once",
        || {
            let (pool, ran, workers) = start(1, 2);
            pool.push(Job { id: 0, level: 0 });
            ran.wait_for(1);
            shut_down(&pool, workers);
            assert_eq!(ran.counts(), [1]);
        },
    );
}

/// Two jobs of different priorities pushed from two threads at once, one worker: both run,
/// each once (the second push may find the worker spinning, parked or running the first).
#[test]
fn loom_jobs_pushed_from_two_threads_each_run_once() {
    model("jobs_pushed_from_two_threads_each_run_once", || {
        let (pool, ran, workers) = start(2, 1);
        let pusher = {
            let pool = pool.clone();
            thread::spawn(move || pool.push(Job { id: 1, level: 0 }))
        };
        pool.push(Job { id: 0, level: 2 });
        ran.wait_for(2);
        pusher.join().unwrap();
        shut_down(&pool, workers);
        assert_eq!(ran.counts(), [1, 1]);
    });
}

/// `shut_down` wakes every parked worker (and a spinning one parks, then sees the flag): the
/// joins return. A job pushed just before it still runs once (`pop` drains before it exits).
#[test]
fn loom_shutdown_wakes_every_worker_and_drains_pushed_jobs() {
    model("shutdown_wakes_every_worker_and_drains_pushed_jobs", || {
        let (pool, ran, workers) = start(1, 2);
        pool.push(Job { id: 0, level: 1 });
        shut_down(&pool, workers);
        assert_eq!(ran.counts(), [1]);
    });
}

/// `shut_down` with nothing ever pushed: both workers, wherever they are in `pop`, exit.
#[test]
fn loom_shutdown_of_an_idle_pool_wakes_every_worker() {
    model("shutdown_of_an_idle_pool_wakes_every_worker", || {
        let (pool, _ran, workers) = start(0, 2);
        shut_down(&pool, workers);
    });
}
