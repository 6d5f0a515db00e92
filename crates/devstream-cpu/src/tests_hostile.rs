//! Hostile use of the CPU backend: devstream calls made from inside
//! host functions and kernels, and user code whose panics or destructors misbehave.
//!
//! Every test runs its body under a watchdog: a hang fails in seconds with a clear message
//! instead of stalling the test binary. Ordering is gated with flags and channels, never with
//! sleeps.

use crate::*;
use devstream_core::{
    CaptureMode, DeviceBackend, DeviceEvent, DeviceFlag, DeviceGraph, DeviceStream, Error,
    HostBuffer, HostFn, Place, StreamOptions,
};
use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// How long a watched body may take before the test fails as a hang (Miri runs far slower).
const PATIENCE: Duration = Duration::from_secs(if cfg!(miri) { 600 } else { 10 });

/// Rounds of the racing test (fewer under Miri).
const RACE_ROUNDS: usize = if cfg!(miri) { 4 } else { 500 };

/// Busy-work steps of a racing kernel (fewer under Miri).
const KERNEL_STEPS: usize = if cfg!(miri) { 64 } else { 20_000 };

/// Runs `body` on its own thread; fails the test if it has not finished within [`PATIENCE`].
fn watchdog<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let _sent = tx.send(body());
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: HUNG (no result within {PATIENCE:?})")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            Ok(()) => panic!("{what}: the body ended without a result"),
        },
    }
}

/// Waits for a value a host function sends; a hang fails with `what`.
fn receive<T>(rx: &mpsc::Receiver<T>, what: &str) -> T {
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("{what}: HUNG (no result within {PATIENCE:?})"))
}

/// A pool of `workers` workers, and `N` streams on it.
fn pool_with_streams<const N: usize>(workers: usize) -> (CpuPool, [CpuStream; N]) {
    let pool = CpuPool::new(workers).unwrap();
    let streams = std::array::from_fn(|_| pool.new_stream(StreamOptions::default()));
    (pool, streams)
}

fn flag() -> CpuFlag {
    CpuBackend::new_flag(&Place::Cpu).unwrap()
}

fn is_refused<T>(result: &Result<T, Error>) -> bool {
    matches!(result, Err(Error::WouldDeadlock { .. }))
}

// ---- host-buffer access and blocking calls from inside host functions ----

/// A host function reads and writes a host buffer that copies queued *after* it on the same
/// stream use: it must see stream order up to itself and never wait for those copies.
#[test]
fn host_func_uses_a_host_buffer_that_later_copies_use() {
    watchdog("host buffer read/write from a host function", || {
        let s = CpuBackend::new_stream(&Place::Cpu, StreamOptions::default()).unwrap();
        let dev = s.alloc(4).unwrap();
        let dev2 = s.alloc(4).unwrap();
        let host = Arc::new(s.alloc_host(4).unwrap());
        let host2 = s.alloc_host(4).unwrap();
        s.fill(&dev, 0, 4, 7).unwrap();
        let gate = flag();
        // Hold the stream so the copies below are queued while the host function runs.
        s.wait_flag(&gate, 1).unwrap();
        let (tx, rx) = mpsc::channel();
        let h = host.clone();
        s.launch_host_func(Box::new(move || {
            let seen = h.to_vec();
            let wrote = h.write(0, &[1, 2, 3, 4]);
            let _sent = tx.send((seen, wrote));
        }))
        .unwrap();
        s.copy_host_to_device(&dev2, 0, &host, 0, 4).unwrap();
        s.copy_device_to_host(&host, 0, &dev, 0, 4).unwrap();
        s.copy_device_to_host(&host2, 0, &dev2, 0, 4).unwrap();
        gate.set(1);
        let (seen, wrote) = receive(&rx, "host function reading its host buffer");
        assert_eq!(
            seen.unwrap(),
            [0; 4],
            "the read sees the state before later copies"
        );
        wrote.unwrap();
        s.synchronize().unwrap();
        assert_eq!(
            host2.to_vec().unwrap(),
            [1, 2, 3, 4],
            "a later copy sees the write"
        );
        assert_eq!(host.to_vec().unwrap(), [7; 4]);
    });
}

/// Every worker of a pool runs a host function reading a host buffer that a copy on another,
/// gated stream (submitted *before* the host functions, not ordered with them) will write.
/// Nothing orders that copy before the host functions, so they must not wait for it: waiting
/// would starve the pool (the copy needs a worker) and wait for a gate the test opens only
/// after the reads.
#[test]
fn host_func_reads_do_not_wait_for_unordered_copies() {
    watchdog("host buffer reads on a saturated pool", || {
        let pool = CpuPool::new(2).unwrap();
        let workers = pool.workers();
        let other = pool.new_stream(StreamOptions::default());
        let dev = other.alloc(4).unwrap();
        let host = Arc::new(other.alloc_host(4).unwrap());
        let late = flag();
        other.fill(&dev, 0, 4, 9).unwrap();
        other.wait_flag(&late, 1).unwrap();
        other.copy_device_to_host(&host, 0, &dev, 0, 4).unwrap();
        let (tx, rx) = mpsc::channel();
        let streams: Vec<CpuStream> = (0..workers)
            .map(|_| {
                let s = pool.new_stream(StreamOptions::default());
                let (h, tx) = (host.clone(), tx.clone());
                s.launch_host_func(Box::new(move || {
                    let _sent = tx.send(h.to_vec());
                }))
                .unwrap();
                s
            })
            .collect();
        for _ in 0..workers {
            let seen = receive(
                &rx,
                "host function reading a buffer an unordered copy writes",
            );
            assert_eq!(seen.unwrap(), [0; 4]);
        }
        late.set(1);
        for s in streams.iter().chain([&other]) {
            s.synchronize().unwrap();
        }
        assert_eq!(host.to_vec().unwrap(), [9; 4]);
    });
}

/// Blocking waits made from host functions on work that is not complete are refused with a
/// typed error (a CPU worker never blocks on other work), even when every worker of the pool
/// does it at once and when the awaited stream waits for the host function's own stream.
#[test]
fn blocking_waits_from_host_funcs_are_refused_not_hung() {
    watchdog("blocking waits from host functions", || {
        let pool = CpuPool::new(2).unwrap();
        let gate = flag();
        let start = flag();
        let (tx, rx) = mpsc::channel();
        let mut all = Vec::new();
        for _ in 0..pool.workers() {
            let s = pool.new_stream(StreamOptions::default());
            // Held until every stream below has its work queued.
            s.wait_flag(&start, 1).unwrap();
            let gated = pool.new_stream(StreamOptions::default());
            gated.wait_flag(&gate, 1).unwrap();
            let gated_event = gated.record_event().unwrap();
            // `cycle` waits for `s`'s work after the host function: a dependency cycle if the
            // host function waited for it.
            let cycle = pool.new_stream(StreamOptions::default());
            let own_later = CpuBackend::new_event(&Place::Cpu, Default::default()).unwrap();
            let (g, ge, c, ol, own, tx) = (
                gated.clone(),
                gated_event.clone(),
                cycle.clone(),
                own_later.clone(),
                s.clone(),
                tx.clone(),
            );
            s.launch_host_func(Box::new(move || {
                let results = [
                    ("other stream synchronize", g.synchronize()),
                    ("other stream's event synchronize", ge.synchronize()),
                    ("own stream synchronize", own.synchronize()),
                    ("own later event synchronize", ol.synchronize()),
                    (
                        "synchronize of a stream waiting for this one",
                        c.synchronize(),
                    ),
                ];
                let _sent = tx.send(results);
            }))
            .unwrap();
            s.record(&own_later).unwrap();
            cycle.wait_event(&own_later).unwrap();
            cycle.launch_host_func(Box::new(|| {})).unwrap();
            all.extend([s, gated, cycle]);
        }
        start.set(1);
        for _ in 0..pool.workers() {
            for (what, result) in receive(&rx, "blocking waits inside host functions") {
                assert!(is_refused(&result), "{what}: {result:?}");
            }
        }
        gate.set(1);
        for s in &all {
            s.synchronize().unwrap();
        }
    });
}

/// What a host function can do without waiting for anything: calls on work ordered before it
/// succeed, and queued work runs after it.
#[test]
fn non_blocking_calls_from_host_funcs_succeed() {
    watchdog("non-blocking calls from host functions", || {
        let (_pool, [s, before]) = pool_with_streams(1);
        let ran = launch_counting(&before);
        s.wait_stream(&before).unwrap();
        let own_before = s.record_event().unwrap();
        s.begin_capture(CaptureMode::ThreadLocal).unwrap();
        let r = ran.clone();
        s.launch_host_func(Box::new(move || {
            r.fetch_add(10, Ordering::SeqCst);
        }))
        .unwrap();
        let graph = s.end_capture().unwrap();
        let (tx, rx) = mpsc::channel();
        let (own, b, ob, f) = (s.clone(), before.clone(), own_before.clone(), flag());
        s.launch_host_func(Box::new(move || {
            let host = own.alloc_host(2).unwrap();
            host.write(0, &[5, 6]).unwrap();
            let results = vec![
                ("ordered stream synchronize", b.synchronize().map(|_| true)),
                (
                    "own earlier event synchronize",
                    ob.synchronize().map(|_| true),
                ),
                ("own earlier event query", ob.query()),
                ("own query", own.query().map(|done| !done)),
                ("record_event", own.record_event().map(|_| true)),
                ("graph launch", graph.launch(&own).map(|_| true)),
                ("host buffer", host.to_vec().map(|v| v == [5, 6])),
                ("flag", {
                    f.set(3);
                    Ok(f.get() == 3)
                }),
            ];
            let _sent = tx.send(results);
        }))
        .unwrap();
        for (what, result) in receive(&rx, "calls inside a host function") {
            assert_eq!(result, Ok(true), "{what}");
        }
        s.synchronize().unwrap();
        assert_eq!(
            ran.load(Ordering::SeqCst),
            11,
            "the graph ran after the host function"
        );
    });
}

// ---- panics whose payloads or closures panic again when dropped ----

/// A value whose destructor panics; with `again`, the destructor's panic payload is another
/// `Bomb` whose destructor panics too.
struct Bomb {
    again: bool,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.again {
            panic_any(Bomb { again: false });
        }
        panic!("a destructor panicked");
    }
}

/// A kernel as the tests make one to launch.
type Kernel = Box<dyn FnMut(&mut [&mut [u8]]) + Send>;

/// Launches on `stream` a host function that counts its runs; answers the count.
fn launch_counting(stream: &CpuStream) -> Arc<AtomicU32> {
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    stream
        .launch_host_func(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
    ran
}

/// Runs `stream`'s work and then more work; the pool must still have its worker.
fn expect_panic_reported_and_pool_alive(stream: &CpuStream) {
    match stream.synchronize() {
        Err(Error::HostFuncPanicked { .. }) => {}
        other => panic!("expected HostFuncPanicked, got {other:?}"),
    }
    let ran = launch_counting(stream);
    stream.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the worker still runs work");
}

/// On a one-worker pool, a host function and then a kernel, each made by the test to misbehave
/// (a panic, a destructor that panics, or both), are reported by `synchronize` and leave the
/// worker running later work. Each piece of work is made just before it is launched.
fn misbehaving_work_is_contained(
    what: &'static str,
    host_func: impl FnOnce() -> HostFn + Send + 'static,
    kernel: impl FnOnce() -> Kernel + Send + 'static,
) {
    watchdog(what, move || {
        let (_pool, [s]) = pool_with_streams(1);
        s.launch_host_func(host_func()).unwrap();
        expect_panic_reported_and_pool_alive(&s);
        let buffer = s.alloc(1).unwrap();
        s.launch_kernel(&[&buffer], kernel()).unwrap();
        expect_panic_reported_and_pool_alive(&s);
    });
}

#[test]
fn panic_payload_whose_drop_panics_does_not_kill_the_worker() {
    misbehaving_work_is_contained(
        "host function panicking with a payload whose Drop panics",
        || Box::new(|| panic_any(Bomb { again: true })),
        || Box::new(|_| panic_any(Bomb { again: true })),
    );
}

/// A host function that keeps `bomb` (dropped with the function) and, with `panics`, panics.
fn host_func_keeping(bomb: Bomb, panics: bool) -> HostFn {
    Box::new(move || {
        let _keep = &bomb;
        assert!(!panics, "the host function panicked");
    })
}

/// A kernel that keeps `bomb` (dropped with the kernel) and, with `panics`, panics.
fn kernel_keeping(bomb: Bomb, panics: bool) -> Kernel {
    Box::new(move |_| {
        let _keep = &bomb;
        assert!(!panics, "the kernel panicked");
    })
}

/// Closures whose destructors panic leave the worker running; when the closure panics too, its
/// destructor must not run while that first panic unwinds (that aborts the process).
#[test]
fn closures_whose_drop_panics_do_not_kill_the_worker_or_abort() {
    // (what, whether the closures panic, the kernel's bomb's `again`)
    let cases = [
        ("host closure whose Drop panics", false, true),
        ("panicking host closure whose Drop panics", true, false),
    ];
    for (what, panics, again) in cases {
        misbehaving_work_is_contained(
            what,
            move || host_func_keeping(Bomb { again: true }, panics),
            move || kernel_keeping(Bomb { again }, panics),
        );
    }
}

/// Graph nodes whose destructors panic: dropped on the user's thread (graph dropped, capture
/// discarded) the panic does not escape; dropped on a worker (the graph went away while its
/// launch was queued) the worker survives.
#[test]
fn graph_nodes_whose_drop_panics_are_contained() {
    watchdog("graph nodes whose Drop panics", || {
        let (_pool, [s]) = pool_with_streams(1);
        let capture = |s: &CpuStream| {
            s.begin_capture(CaptureMode::ThreadLocal).unwrap();
            let bomb = Bomb { again: true };
            s.launch_host_func(Box::new(move || {
                let _keep = &bomb;
            }))
            .unwrap();
        };
        // Dropped on this thread.
        capture(&s);
        let graph = s.end_capture().unwrap();
        graph.launch(&s).unwrap();
        s.synchronize().unwrap();
        // A payload of a destructor's panic is leaked, never dropped here (it may panic too).
        let dropped = catch_unwind(AssertUnwindSafe(move || drop(graph))).map_err(std::mem::forget);
        assert!(dropped.is_ok(), "dropping the graph panicked");
        // Dropped while this thread unwinds from a panic of its own (a destructor that
        // panics then would abort the process): the closure is leaked instead.
        capture(&s);
        let graph = s.end_capture().unwrap();
        let unwound = catch_unwind(AssertUnwindSafe(move || {
            let _graph = graph;
            panic!("the user's thread panics while it holds the graph");
        }));
        assert!(unwound.is_err());
        // A discarded capture.
        capture(&s);
        assert!(s.query().is_err());
        let ended =
            catch_unwind(AssertUnwindSafe(|| s.end_capture().is_err())).map_err(std::mem::forget);
        assert_eq!(ended, Ok(true), "discarding the capture panicked");
        // Dropped on the worker: the graph is gone while its launch is queued.
        capture(&s);
        let graph = s.end_capture().unwrap();
        let gate = flag();
        s.wait_flag(&gate, 1).unwrap();
        graph.launch(&s).unwrap();
        drop(graph);
        gate.set(1);
        expect_panic_reported_and_pool_alive(&s);
    });
}

/// A kernel (which runs holding its device buffers' locks) reads a host buffer while copies
/// between that host buffer and the kernel's device buffer run on another stream: lock order
/// must be the same on both sides (device buffers, then the host buffer). Not ordered, so each
/// round's interleaving is up to the scheduler; many rounds make the inverted order (host, then
/// device, in `copy_host_to_device`) deadlock.
#[test]
fn kernel_reading_a_host_buffer_races_copies_without_deadlock() {
    watchdog("kernel reading a host buffer beside copies", || {
        let (_pool, [kernels, copies]) = pool_with_streams(2);
        let dev = kernels.alloc(64).unwrap();
        let host = Arc::new(kernels.alloc_host(64).unwrap());
        for _ in 0..RACE_ROUNDS {
            let h = host.clone();
            kernels
                .launch_kernel(&[&dev], move |views| {
                    // Hold the device buffer a while, so a copy that took the host buffer's
                    // lock first (the inverted order) waits for it meanwhile.
                    for round in 0..KERNEL_STEPS {
                        let byte = &mut views[0][round % 64];
                        *byte = std::hint::black_box(*byte);
                    }
                    let mut out = [0u8; 64];
                    h.read(0, &mut out).unwrap();
                    views[0][0] = out[0].wrapping_add(1);
                })
                .unwrap();
            copies.copy_host_to_device(&dev, 1, &host, 1, 63).unwrap();
            copies.copy_device_to_host(&host, 0, &dev, 0, 64).unwrap();
        }
        kernels.synchronize().unwrap();
        copies.synchronize().unwrap();
    });
}
