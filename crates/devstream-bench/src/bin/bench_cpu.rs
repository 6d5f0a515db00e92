//! CPU backend cost per operation, through the devstream facade, beside a baseline of the same
//! hand-off written directly with a crossbeam channel and one worker thread.
//!
//! ```text
//! cargo xtask bench --backend cpu          # or: cargo run --release -p devstream-bench --bin bench-cpu
//! ```
//!
//! Target: devstream ≤ 1.2× the baseline for every row.

use crossbeam_channel::{unbounded, Sender};
use devstream::{Event, EventFlags, Place, Stream};
use devstream_bench::{ns_per_op, report, Row};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

type Task = Box<dyn FnOnce() + Send>;

/// The baseline: a FIFO of boxed closures handed to one worker thread through a crossbeam
/// channel, with submitted/completed counters and a condvar for synchronize. Every operation
/// is written the most direct way this design allows.
struct BaselineStream {
    sender: Option<Sender<Task>>,
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

struct Shared {
    submitted: AtomicU64,
    completed: AtomicU64,
    lock: Mutex<()>,
    done: Condvar,
}

/// A baseline event: the (stream, sequence number) the marker task completes.
struct BaselineEvent {
    shared: Arc<Shared>,
    seq: AtomicU64,
}

impl BaselineStream {
    fn new() -> Self {
        let (sender, receiver) = unbounded::<Task>();
        let shared = Arc::new(Shared {
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            lock: Mutex::new(()),
            done: Condvar::new(),
        });
        let worker_shared = shared.clone();
        let worker = std::thread::spawn(move || {
            for task in receiver {
                task();
                worker_shared.completed.fetch_add(1, Ordering::Release);
                let _guard = worker_shared.lock.lock().unwrap();
                worker_shared.done.notify_all();
            }
        });
        BaselineStream {
            sender: Some(sender),
            shared,
            worker: Some(worker),
        }
    }

    fn submit(&self, task: Task) {
        self.shared.submitted.fetch_add(1, Ordering::Relaxed);
        self.sender.as_ref().unwrap().send(task).unwrap();
    }

    fn record(&self, event: &BaselineEvent) {
        self.submit(Box::new(|| {}));
        event.seq.store(
            self.shared.submitted.load(Ordering::Relaxed),
            Ordering::Release,
        );
    }

    fn wait_event(&self, event: &Arc<BaselineEvent>) {
        let event = event.clone();
        self.submit(Box::new(move || {
            let seq = event.seq.load(Ordering::Acquire);
            let mut guard = event.shared.lock.lock().unwrap();
            while event.shared.completed.load(Ordering::Acquire) < seq {
                guard = event.shared.done.wait(guard).unwrap();
            }
        }));
    }

    fn query(&self) -> bool {
        self.shared.completed.load(Ordering::Acquire)
            >= self.shared.submitted.load(Ordering::Relaxed)
    }

    fn synchronize(&self) {
        let target = self.shared.submitted.load(Ordering::Relaxed);
        if self.shared.completed.load(Ordering::Acquire) >= target {
            return;
        }
        let mut guard = self.shared.lock.lock().unwrap();
        while self.shared.completed.load(Ordering::Acquire) < target {
            guard = self.shared.done.wait(guard).unwrap();
        }
    }
}

impl Drop for BaselineStream {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

fn main() -> devstream::Result<()> {
    let quick = std::env::var_os("DEVSTREAM_BENCH_QUICK").is_some();
    let (rounds, iters) = if quick { (3, 2_000) } else { (9, 20_000) };
    let place = Place::Cpu;
    let mut rows = Vec::new();
    let mut row = |op: &str, devstream_ns: f64, baseline_ns: f64| {
        rows.push(Row {
            backend: "cpu",
            op: op.to_string(),
            devstream_ns,
            baseline_ns,
            baseline: "crossbeam channel + 1 thread",
            target: 1.2,
        })
    };

    let s1 = Stream::new(&place)?;
    let s2 = Stream::new(&place)?;
    let b1 = BaselineStream::new();
    let b2 = BaselineStream::new();

    // record an existing event on an idle stream
    let event = Event::new(&place, EventFlags::default())?;
    let bevent = Arc::new(BaselineEvent {
        shared: b1.shared.clone(),
        seq: AtomicU64::new(0),
    });
    let d = ns_per_op(rounds, iters, || s1.record(&event).unwrap());
    let b = ns_per_op(rounds, iters, || b1.record(&bevent));
    s1.synchronize()?;
    b1.synchronize();
    row("record_event (existing event)", d, b);

    // record_event: a new event recorded
    let d = ns_per_op(rounds, iters, || drop(s1.record_event().unwrap()));
    let b = ns_per_op(rounds, iters, || {
        // A shared handle, as an event is (devstream's events are `Arc`s too).
        let e = Arc::new(BaselineEvent {
            shared: b1.shared.clone(),
            seq: AtomicU64::new(0),
        });
        b1.record(&e);
    });
    s1.synchronize()?;
    b1.synchronize();
    row("record_event (new event)", d, b);

    // wait_event on a completed event of another stream
    s1.record(&event)?;
    s1.synchronize()?;
    b1.record(&bevent);
    b1.synchronize();
    let d = ns_per_op(rounds, iters, || s2.wait_event(&event).unwrap());
    let b = ns_per_op(rounds, iters, || b2.wait_event(&bevent));
    s2.synchronize()?;
    b2.synchronize();
    row("wait_event", d, b);

    // wait_stream on an idle stream
    let d = ns_per_op(rounds, iters, || s2.wait_stream(&s1).unwrap());
    let b = ns_per_op(rounds, iters, || {
        b1.record(&bevent);
        b2.wait_event(&bevent);
    });
    s2.synchronize()?;
    b2.synchronize();
    row("wait_stream", d, b);

    // query idle
    let d = ns_per_op(rounds, iters * 10, || {
        assert!(black_box(&s1).query().unwrap())
    });
    let b = ns_per_op(rounds, iters * 10, || assert!(black_box(&b1).query()));
    row("query (idle)", d, b);
    let raw: &devstream::cpu::CpuStream = s1.backend().expect("cpu stream");
    let d = ns_per_op(rounds, iters * 10, || {
        assert!(devstream::backend::DeviceStream::query(black_box(raw)).unwrap())
    });
    row("query (idle, backend trait, no facade)", d, b);

    // synchronize idle
    let d = ns_per_op(rounds, iters * 10, || black_box(&s1).synchronize().unwrap());
    let b = ns_per_op(rounds, iters * 10, || black_box(&b1).synchronize());
    row("synchronize (idle)", d, b);

    // host function round trip: submit one, wait for it
    let rt_iters = if quick { 200 } else { 2_000 };
    let d = ns_per_op(rounds, rt_iters, || {
        s1.launch_host_func(|| {}).unwrap();
        s1.synchronize().unwrap();
    });
    let b = ns_per_op(rounds, rt_iters, || {
        b1.submit(Box::new(|| {}));
        b1.synchronize();
    });
    row("host func round trip", d, b);

    // throughput of tiny tasks: 10k host functions then one synchronize
    let batch = 10_000;
    let counter = Arc::new(AtomicU64::new(0));
    let d = ns_per_op(rounds, 1, || {
        for _ in 0..batch {
            let c = counter.clone();
            s1.launch_host_func(move || {
                c.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        }
        s1.synchronize().unwrap();
    }) / batch as f64;
    let b = ns_per_op(rounds, 1, || {
        for _ in 0..batch {
            let c = counter.clone();
            b1.submit(Box::new(move || {
                c.fetch_add(1, Ordering::Relaxed);
            }));
        }
        b1.synchronize();
    }) / batch as f64;
    row("tiny task throughput (per task)", d, b);

    report(&rows);
    Ok(())
}
