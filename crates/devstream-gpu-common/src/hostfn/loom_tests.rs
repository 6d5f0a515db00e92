//! loom models of the host-function ring's slot handshake and of [`PanicSlot`]:
//! the production [`HostRingPtr::claim`], [`ClaimedSlot::launch_data`] / `launched` / its
//! `Drop`, the [`host_slot`] trampoline and [`PanicSlot::raise`] / [`PanicSlot::take`], on
//! loom's atomics, mutex and `UnsafeCell` (see `sync.rs`; the ring has 2 slots under loom),
//! over every interleaving up to the preemption bound. A thread of the model stands in for the
//! runtime's callback thread. No driver is involved: the ring never calls one.
//!
//! loom checks every access to a slot's closure cell against the happens-before order the
//! `busy` flag establishes, so a slot held by two parties at once (two launchers, or a
//! launcher and the callback thread) fails as a causality violation; a closure run twice or
//! never, a slot left busy, or a panic message stranded fails an assertion.
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p devstream-gpu-common --release --lib loom
//! ```
//! (`cargo xtask loom` runs it into `target/loom`.)

use super::{host_slot, HostRingPtr, PanicSlot, HOST_SLOTS};
use devstream_core::Error;
use loom::sync::{Condvar, Mutex};
use loom::thread;
use std::collections::VecDeque;
use std::ffi::c_void;
// Plain counters: loom runs every model thread on one OS thread, so they are exact, and they
// add no interleavings of their own.
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// Runs `f` under loom with the preemption bound `LOOM_MAX_PREEMPTIONS`, else 3, and prints
/// how many interleavings were explored.
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    let explored = Arc::new(AtomicUsize::new(0));
    let counter = explored.clone();
    builder.check(move || {
        counter.fetch_add(1, Relaxed);
        f();
    });
    eprintln!(
        "loom: {name}: {} interleavings (preemption bound {})",
        explored.load(Relaxed),
        builder.preemption_bound.unwrap_or(3)
    );
}

/// How often one host function ran and was dropped.
#[derive(Default)]
struct Counts {
    ran: AtomicUsize,
    dropped: AtomicUsize,
}

/// Counts its drop.
struct DropToken(Arc<Counts>);

impl Drop for DropToken {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Relaxed);
    }
}

/// A host function that counts its runs and its drop.
fn counted(counts: &Arc<Counts>) -> devstream_core::HostFn {
    let token = DropToken(counts.clone());
    Box::new(move || {
        token.0.ran.fetch_add(1, Relaxed);
    })
}

/// Claims a slot, fills it with a counted host function and "launches" it: the `data` pointer
/// for the callback thread, or `None` when every slot is in flight (production then falls back
/// to an allocated launch). The pointer travels as an address, as it does through the driver.
fn launch(ring: &HostRingPtr, counts: &Arc<Counts>) -> Option<usize> {
    let mut slot = ring.claim()?;
    let data = slot.launch_data(counted(counts));
    slot.launched();
    Some(data as usize)
}

/// The runtime's queue of launched host functions, in launch order: each launcher posts one
/// entry, its slot's `data` or `None` when it launched nothing. (loom's `mpsc` cannot tell a
/// closed channel.)
struct Queue {
    entries: Mutex<VecDeque<Option<usize>>>,
    posted: Condvar,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            entries: Mutex::new(VecDeque::new()),
            posted: Condvar::new(),
        }
    }

    fn post(&self, entry: Option<usize>) {
        self.entries.lock().unwrap().push_back(entry);
        self.posted.notify_one();
    }

    fn next(&self) -> Option<usize> {
        let mut entries = self.entries.lock().unwrap();
        loop {
            if let Some(entry) = entries.pop_front() {
                return entry;
            }
            entries = self.posted.wait(entries).unwrap();
        }
    }
}

/// Runs a launched slot's trampoline, as the runtime's callback thread does.
fn run_callback(data: usize) {
    // SAFETY: `data` is a filled, claimed slot of a live ring (the model retires the ring only
    // after every callback ran), passed here once.
    unsafe { host_slot(data as *mut c_void) }
}

/// The ring is full; the callback thread finishes one slot while a launcher waits for a free
/// one, then fills it and runs it: the callback's take of the closure happens before the new
/// launcher's write into the same cell (the `busy` Release store / claim Acquire CAS), and the
/// first closure runs and is dropped exactly once.
#[test]
fn loom_a_slot_freed_by_the_callback_thread_is_reused_safely() {
    model(
        "a_slot_freed_by_the_callback_thread_is_reused_safely",
        || {
            let ring = Arc::new(HostRingPtr::new(Arc::new(PanicSlot::default())));
            let counts: Vec<Arc<Counts>> = (0..HOST_SLOTS + 1).map(|_| Arc::default()).collect();
            let launched: Vec<usize> = (0..HOST_SLOTS)
                .map(|i| launch(&ring, &counts[i]).expect("a free slot"))
                .collect();
            assert!(ring.claim().is_none(), "every slot is in flight");
            let callback = {
                let first = launched[0];
                thread::spawn(move || run_callback(first))
            };
            let launcher = {
                let (ring, counts) = (ring.clone(), counts[HOST_SLOTS].clone());
                thread::spawn(move || loop {
                    if let Some(data) = launch(&ring, &counts) {
                        run_callback(data);
                        break;
                    }
                    thread::yield_now();
                })
            };
            callback.join().unwrap();
            launcher.join().unwrap();
            for &data in &launched[1..] {
                run_callback(data);
            }
            for (i, c) in counts.iter().enumerate() {
                assert_eq!(c.ran.load(Relaxed), 1, "host function {i} ran once");
                assert_eq!(c.dropped.load(Relaxed), 1, "host function {i} dropped once");
            }
            assert!(!ring.in_flight());
            Arc::into_inner(ring).unwrap().retire();
        },
    );
}

/// Two launchers race for the slots while the callback thread runs what was launched, in
/// launch order as the runtime does; one launcher's first launch fails (its claim is dropped
/// unlaunched) before it claims again. No slot is held by two parties (loom's cell check),
/// every launched closure runs once, the failed one never runs, each is dropped once, a claim
/// finds no slot only while both are in flight, and afterwards every slot is free.
#[test]
fn loom_two_launchers_and_the_callback_thread_share_the_slots() {
    model(
        "two_launchers_and_the_callback_thread_share_the_slots",
        || {
            let ring = Arc::new(HostRingPtr::new(Arc::new(PanicSlot::default())));
            let queue = Arc::new(Queue::new());
            let callback = {
                let queue = queue.clone();
                // One entry per launcher.
                thread::spawn(move || {
                    for _ in 0..2 {
                        if let Some(data) = queue.next() {
                            run_callback(data);
                        }
                    }
                })
            };
            let plain = Arc::new(Counts::default());
            let failed = Arc::new(Counts::default());
            let retried = Arc::new(Counts::default());
            let first = {
                let (ring, counts, queue) = (ring.clone(), plain.clone(), queue.clone());
                thread::spawn(move || {
                    let data = launch(&ring, &counts);
                    queue.post(data);
                    data.is_some()
                })
            };
            let second = {
                let (ring, failed, retried, queue) =
                    (ring.clone(), failed.clone(), retried.clone(), queue.clone());
                thread::spawn(move || {
                    if let Some(mut slot) = ring.claim() {
                        slot.launch_data(counted(&failed));
                        // No `launched()`: the runtime refused the launch.
                    }
                    let data = launch(&ring, &retried);
                    queue.post(data);
                    data.is_some()
                })
            };
            let first_launched = first.join().unwrap();
            let retried_launched = second.join().unwrap();
            callback.join().unwrap();
            assert!(
                first_launched || retried_launched,
                "with {HOST_SLOTS} slots at least one launch finds a free slot"
            );
            for (counts, launched) in [(&plain, first_launched), (&retried, retried_launched)] {
                assert_eq!(counts.ran.load(Relaxed), usize::from(launched));
                assert_eq!(counts.dropped.load(Relaxed), usize::from(launched));
            }
            assert_eq!(failed.ran.load(Relaxed), 0, "a refused launch never runs");
            assert!(failed.dropped.load(Relaxed) <= 1);
            assert!(!ring.in_flight(), "every slot is free again");
            Arc::into_inner(ring).unwrap().retire();
        },
    );
}

/// The kept message after `take`: a report, or nothing.
fn message(result: devstream_core::Result<()>) -> Option<String> {
    match result {
        Ok(()) => None,
        Err(Error::HostFuncPanicked { message, .. }) => Some(message),
        Err(other) => panic!("unexpected {other:?}"),
    }
}

/// A panic raised on the callback thread while two threads take the stream's kept panic: the
/// first panic is reported exactly once with its message; the second is reported once with
/// its message or coalesced into a report taken after it was raised (the slot keeps the first
/// message); and once everything settled, nothing is left kept that `take` would not report
/// (`raised` is never cleared over a kept message).
#[test]
fn loom_a_panic_raised_while_it_is_taken_is_never_lost() {
    model("a_panic_raised_while_it_is_taken_is_never_lost", || {
        let slot = Arc::new(PanicSlot::default());
        slot.raise("first".into());
        let raiser = {
            let slot = slot.clone();
            thread::spawn(move || slot.raise("second".into()))
        };
        let taker = {
            let slot = slot.clone();
            thread::spawn(move || message(slot.take(1)))
        };
        let mine = message(slot.take(1));
        let theirs = taker.join().unwrap();
        raiser.join().unwrap();
        let later = message(slot.take(1));
        let reports: Vec<String> = [mine, theirs, later].into_iter().flatten().collect();
        assert_eq!(
            reports.iter().filter(|m| *m == "first").count(),
            1,
            "the first panic is reported once: {reports:?}"
        );
        assert!(
            reports.iter().filter(|m| *m == "second").count() <= 1,
            "{reports:?}"
        );
        // Nothing stranded: no message is kept that `take`'s fast path would not see.
        assert!(
            slot.message.lock().unwrap().is_none(),
            "a raised panic was stranded: its message is kept with `raised` cleared \
             (reported: {reports:?})"
        );
    });
}
