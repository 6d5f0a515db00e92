//! Hostile uses of waits across backends (`devstream_core::traits`, "Waits across backends" and
//! "Host functions"; docs/CROSS_BACKEND.md): the awaited side, or a graph holding a captured
//! wait, dropped while a wait on it is pending, and host functions of one backend that wait on
//! another backend's work.
//!
//! Each check runs on every ordered pair of places under test whose backends differ, as in
//! `cross.rs`: the first place produces (or runs the host function), the second waits.

use crate::cross::{
    captures_foreign_waits, consumers_of, for_each_pair, for_each_pair_alone, gated_stream,
    leaks_nothing, observable, PendingWait,
};
use crate::harness::{
    assert_stays_false, caps, for_each_place_isolated, not_applicable, sync, wait_until, within,
    Gate, Log, HANG, PATIENCE,
};
use devstream::{CaptureMode, DeviceBuffer, Error, Event, HostBuffer, Place, Result, Stream};
use std::sync::{Arc, Mutex, OnceLock};

/// The awaited stream, the awaited event and the producer's last handles on its device (its
/// stream, its event, the gate's flag) all dropped while a wait across backends on them is
/// pending: once the producer's work is released the consumer's later work runs, and no stream
/// or event stays live.
#[test]
fn a_pending_wait_across_backends_outlives_every_producer_handle_and_leaks_nothing() {
    for_each_pair_alone(|producer, consumer| {
        leaks_nothing(
            "the producer's handles were dropped under a pending wait",
            || {
                let Some(PendingWait {
                    consumer_stream,
                    stream,
                    gate,
                    event,
                    log,
                }) = PendingWait::new(producer, consumer)?
                else {
                    return Ok(());
                };
                drop(event);
                drop(stream);
                if observable(consumer) {
                    assert_stays_false(
                        "the consumer ran before the dropped producer's work",
                        || log.contains(&"consumed"),
                    );
                }
                // The gate holds the producer's last handle (its flag, or its host gate); dropping
                // it opens the gate.
                drop(gate);
                sync(&consumer_stream)?;
                if observable(consumer) {
                    assert!(log.contains(&"consumed"), "the consumer's work never ran");
                    if caps(producer).host_funcs {
                        assert!(
                            log.position(&"produced") < log.position(&"consumed"),
                            "the consumer ran before the dropped producer's work: {:?}",
                            log.entries()
                        );
                    }
                }
                Ok(())
            },
        )
    });
}

/// A call made inside a host function, and what it answered.
struct HostFnCall {
    stream: Stream,
    answer: Arc<Mutex<Option<Result<()>>>>,
}

impl HostFnCall {
    /// Launches a host function on `stream` that makes `call` and keeps its answer.
    fn launch(stream: &Stream, call: impl FnOnce() -> Result<()> + Send + 'static) -> Result<Self> {
        let answer: Arc<Mutex<Option<Result<()>>>> = Arc::new(Mutex::new(None));
        let (slot, mut call) = (answer.clone(), Some(call));
        stream.launch_host_func(move || {
            if let Some(call) = call.take() {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(call());
            }
        })?;
        Ok(HostFnCall {
            stream: stream.clone(),
            answer,
        })
    }

    /// What the call answered, once the host function's stream has synchronized; fails naming
    /// `what` if that takes longer than [`HANG`] (after running `rescue`).
    fn answer(self, what: &str, rescue: impl FnOnce()) -> Result<Option<Result<()>>> {
        let stream = self.stream.clone();
        within(*HANG, what, move || stream.synchronize(), rescue)?;
        let answer = self.answer.lock().unwrap_or_else(|e| e.into_inner()).take();
        Ok(answer)
    }
}

/// A host function of the producer's backend synchronizes an event of the consumer's backend
/// whose stream waits (across backends) on the host function's own stream behind that host
/// function: the wait can never end, so the call answers `Error::WouldDeadlock` at once, as
/// a host function synchronizing its own later work does; both streams then complete. Each
/// producer place in a child process of its own (a hang leaves a blocked thread behind).
#[test]
fn a_host_function_synchronizing_another_backend_s_event_that_waits_on_it_would_deadlock() {
    for_each_place_isolated(
        "cross_hostile::a_host_function_synchronizing_another_backend_s_event_that_waits_on_it_would_deadlock",
        |producer| {
            if !caps(producer).host_funcs {
                not_applicable(producer, "no host functions");
                return Ok(());
            }
            for consumer in consumers_of(producer)? {
                let host_stream = Stream::new(producer)?;
                let waiting = Stream::new(&consumer)?;
                let Some(gate) = Gate::close(&host_stream)? else {
                    not_applicable(producer, "no gate");
                    return Ok(());
                };
                let awaited: Arc<OnceLock<Event>> = Arc::new(OnceLock::new());
                let event = awaited.clone();
                let call = HostFnCall::launch(&host_stream, move || match event.get() {
                    Some(event) => event.synchronize(),
                    None => Err(Error::InvalidArgument("no event to synchronize".into())),
                })?;
                // The consumer's stream waits for the host function's stream, host function
                // included; its event stands for that wait.
                waiting.wait_stream(&host_stream)?;
                let _ = awaited.set(waiting.record_event()?);
                gate.release();
                let result = call.answer(
                    &format!(
                        "{producer} → {consumer}: the host function's synchronize of an event \
                         that waits on it"
                    ),
                    || {},
                )?;
                assert!(
                    matches!(result, Some(Err(Error::WouldDeadlock { .. }))),
                    "{producer} → {consumer}: the host function's synchronize answered \
                     {result:?}, not WouldDeadlock"
                );
                sync(&waiting)?;
                eprintln!("[conformance]   {producer} → {consumer}: ok");
            }
            Ok(())
        },
    );
}

/// A host function of the producer's backend may make another stream wait on work across
/// backends (here, a stream of the consumer's backend waits on a held stream of the
/// producer's): the call returns at once, and the waiting stream's later work runs after the
/// held work once it is released. Where the producer's runtime forbids its calls inside its
/// host functions (CUDA, HIP: the awaited record and completion need them), the call answers
/// `Error::WouldDeadlock` at once and the waiting stream is left as it was.
#[test]
fn a_host_function_may_make_a_wait_across_backends() {
    for_each_pair(|producer, consumer| {
        if !caps(producer).host_funcs || !observable(consumer) {
            not_applicable(producer, "no host functions on one side");
            return Ok(());
        }
        let waiting = Stream::new(consumer)?;
        let Some((held, gate)) = gated_stream(producer)? else {
            return Ok(());
        };
        let log = Log::new();
        held.launch_host_func(log.task("held"))?;
        let host_stream = Stream::new(producer)?;
        let (w, h) = (waiting.clone(), held.clone());
        let call = HostFnCall::launch(&host_stream, move || w.wait_stream(&h))?;
        let result = call.answer("a host function's wait across backends", gate.opener())?;
        let waited = match result {
            Some(Ok(())) => true,
            Some(Err(Error::WouldDeadlock { .. })) => {
                not_applicable(
                    producer,
                    &format!("its host functions cannot make {result:?}"),
                );
                false
            }
            other => panic!("the wait made in a host function answered {other:?}"),
        };
        waiting.launch_host_func(log.task("waited"))?;
        gate.release();
        sync(&waiting)?;
        if waited {
            assert!(
                log.position(&"held") < log.position(&"waited"),
                "the waiting stream ran before the held work: {:?}",
                log.entries()
            );
        }
        sync(&held)
    });
}

/// A host function of the producer's backend may synchronize an event of the consumer's
/// backend whose work does not depend on the host function: the call waits for that work and
/// returns `Ok` (or a typed `Error::WouldDeadlock` at once where the runtime forbids the call
/// there). Alone in the process: the rule that refuses such a call is conservative (it
/// refuses while pending waits across backends could lead from that work back to the host
/// function's backend, see docs/CROSS_BACKEND.md, "Host functions"), and other checks leave
/// such waits pending.
#[test]
fn a_host_function_may_synchronize_independent_work_of_another_backend() {
    for_each_pair_alone(|producer, consumer| {
        if !caps(producer).host_funcs || !observable(consumer) {
            not_applicable(producer, "no host functions on one side");
            return Ok(());
        }
        let other = Stream::new(consumer)?;
        let log = Log::new();
        other.launch_host_func(log.task("independent"))?;
        let event = other.record_event()?;
        let host_stream = Stream::new(producer)?;
        let call = HostFnCall::launch(&host_stream, move || event.synchronize())?;
        let result = call.answer(
            "a host function's synchronize of independent work of another backend",
            || {},
        )?;
        match result {
            Some(Ok(())) => assert!(log.contains(&"independent")),
            // Where the runtime forbids its calls in host functions (a CUDA host function
            // synchronizing HIP work of the same driver): a typed error, never a hang.
            Some(Err(Error::WouldDeadlock { .. })) => not_applicable(
                producer,
                &format!("its host functions cannot make {result:?}"),
            ),
            other => panic!("the host function's synchronize answered {other:?}"),
        }
        sync(&other)
    });
}

/// A graph holding a captured wait across backends, dropped (with the stream that captured it,
/// the awaited event and the producer's handles) while its replay waits for the held producer:
/// the replay still runs once the producer is released, after the producer's work, and no
/// stream or event stays live.
#[test]
fn a_graph_with_a_captured_wait_dropped_while_its_replay_waits_leaks_nothing() {
    for_each_pair_alone(|producer, consumer| {
        if !captures_foreign_waits(consumer) {
            return Ok(());
        }
        leaks_nothing("a graph with a pending captured wait was dropped", || {
            let launching = Stream::new(consumer)?;
            let Some((stream, gate)) = gated_stream(producer)? else {
                return Ok(());
            };
            let log = Log::new();
            if caps(producer).host_funcs {
                stream.launch_host_func(log.task("produced"))?;
            }
            let event = stream.record_event()?;
            let capturing = Stream::new(consumer)?;
            capturing.begin_capture(CaptureMode::ThreadLocal)?;
            capturing.wait_event(&event)?;
            capturing.launch_host_func(log.task("replayed"))?;
            let graph = capturing.end_capture()?;
            graph.launch(&launching)?;
            drop(graph);
            drop(capturing);
            drop(event);
            drop(stream);
            assert_stays_false("the replay ran through the producer's gate", || {
                log.contains(&"replayed")
            });
            drop(gate);
            sync(&launching)?;
            assert!(
                log.contains(&"replayed"),
                "the dropped graph's replay never ran"
            );
            if caps(producer).host_funcs {
                assert!(
                    log.position(&"produced") < log.position(&"replayed"),
                    "the replay ran before the producer's work: {:?}",
                    log.entries()
                );
            }
            Ok(())
        })
    });
}

/// How a host function touches a host buffer in the checks below.
#[derive(Clone, Copy, Debug)]
enum HostAccess {
    /// `HostBuffer::read`, with a device→host copy into the buffer queued.
    Read,
    /// `HostBuffer::write`, with a host→device copy from the buffer queued.
    Write,
}

impl HostAccess {
    /// Queues on `stream` the copy that this access waits for outside host functions.
    fn queue_copy(
        self,
        stream: &Stream,
        host: &HostBuffer,
        dev: &DeviceBuffer,
        len: usize,
    ) -> Result<()> {
        match self {
            HostAccess::Read => stream.copy_device_to_host(host, 0, dev, 0, len),
            HostAccess::Write => stream.copy_host_to_device(dev, 0, host, 0, len),
        }
    }

    /// Makes the access on `host` (a write stores `byte` everywhere).
    fn make(self, host: &HostBuffer, byte: u8) -> Result<()> {
        match self {
            HostAccess::Read => host.read(0, &mut vec![0; host.len()]),
            HostAccess::Write => host.write(0, &vec![byte; host.len()]),
        }
    }
}

/// A host function on a stream of the producer's place, held at a gate, that makes an access
/// to a host buffer of the consumer's place, and a stream of the consumer's place that waits
/// (across backends) for the host function's stream, host function included.
struct TiedAccess {
    waiting: Stream,
    host: Arc<HostBuffer>,
    dev: DeviceBuffer,
    gate: Gate,
    call: HostFnCall,
}

impl TiedAccess {
    /// Sets it up with a buffer of `len` bytes (a write stores `byte`); `None` where the
    /// producer's place has no gate.
    fn new(
        producer: &Place,
        consumer: &Place,
        access: HostAccess,
        len: usize,
        byte: u8,
    ) -> Result<Option<TiedAccess>> {
        let host_stream = Stream::new(producer)?;
        let waiting = Stream::new(consumer)?;
        let host = Arc::new(waiting.alloc_host(len)?);
        let dev = waiting.alloc(len)?;
        let Some(gate) = Gate::close(&host_stream)? else {
            not_applicable(producer, "no gate");
            return Ok(None);
        };
        let target = host.clone();
        let call = HostFnCall::launch(&host_stream, move || access.make(&target, byte))?;
        waiting.wait_stream(&host_stream)?;
        Ok(Some(TiedAccess {
            waiting,
            host,
            dev,
            gate,
            call,
        }))
    }
}

/// A host function of the producer's backend reads or writes a host buffer of the consumer's
/// backend while a copy that uses the buffer is queued on a stream of the consumer's backend
/// behind a wait across backends on the host function's own stream, behind that host function.
/// Host reads and writes wait for queued copies that use the buffer, and that copy waits for
/// the host function: the call answers `Error::WouldDeadlock` at once, never a hang; both
/// streams then complete.
fn host_fn_access_of_a_host_buffer_whose_copy_waits_on_it(
    producer: &Place,
    access: HostAccess,
) -> Result<()> {
    const LEN: usize = 16;
    if !caps(producer).host_funcs {
        not_applicable(producer, "no host functions");
        return Ok(());
    }
    for consumer in consumers_of(producer)? {
        if !caps(&consumer).buffers {
            not_applicable(&consumer, "no buffers");
            continue;
        }
        let Some(tied) = TiedAccess::new(producer, &consumer, access, LEN, 7)? else {
            return Ok(());
        };
        // Queued behind the wait, so behind the host function.
        access.queue_copy(&tied.waiting, &tied.host, &tied.dev, LEN)?;
        tied.gate.release();
        let result = tied.call.answer(
            &format!(
                "{producer} → {consumer}: the host function's {access:?} of a host buffer whose \
                 queued copy waits on it"
            ),
            || {},
        )?;
        assert!(
            matches!(result, Some(Err(Error::WouldDeadlock { .. }))),
            "{producer} → {consumer}: the host function's {access:?} of a host buffer whose \
             queued copy waits on it answered {result:?}, not WouldDeadlock"
        );
        sync(&tied.waiting)?;
        eprintln!("[conformance]   {producer} → {consumer}: ok");
    }
    Ok(())
}

/// [`host_fn_access_of_a_host_buffer_whose_copy_waits_on_it`] for `HostBuffer::write` (an
/// upload from the buffer queued behind the host function). Each producer place in a child
/// process of its own (a hang leaves a blocked thread behind).
#[test]
fn a_host_function_writing_another_backend_s_host_buffer_whose_upload_waits_on_it_would_deadlock() {
    for_each_place_isolated(
        "cross_hostile::a_host_function_writing_another_backend_s_host_buffer_whose_upload_waits_on_it_would_deadlock",
        |producer| host_fn_access_of_a_host_buffer_whose_copy_waits_on_it(producer, HostAccess::Write),
    );
}

/// [`host_fn_access_of_a_host_buffer_whose_copy_waits_on_it`] for `HostBuffer::read` (a
/// download into the buffer queued behind the host function). Each producer place in a child
/// process of its own.
#[test]
fn a_host_function_reading_another_backend_s_host_buffer_whose_download_waits_on_it_would_deadlock()
{
    for_each_place_isolated(
        "cross_hostile::a_host_function_reading_another_backend_s_host_buffer_whose_download_waits_on_it_would_deadlock",
        |producer| host_fn_access_of_a_host_buffer_whose_copy_waits_on_it(producer, HostAccess::Read),
    );
}

/// A host function of the producer's backend reads and writes host buffers of the consumer's
/// backend where no wait across backends ties the buffer's work to the host function:
///
/// * a buffer with a queued copy on an independent stream of the consumer's backend (no wait
///   across backends is pending): the access waits for that copy and succeeds (between CUDA
///   and HIP, whose host functions share the runtime's thread, the consumer's own rule refuses
///   it with `WouldDeadlock` instead while the copy is still queued);
/// * a buffer with no queued copy while a stream of the consumer's backend waits (across
///   backends) on the host function's stream behind the host function (the pipeline: the
///   host function fills the buffer, the consumer uploads it after the wait): the access does
///   not wait for anything and succeeds, and the consumer's upload queued after the wait sees
///   the write.
///
/// Alone in the process: the rule that refuses a blocking access is conservative about pending
/// waits across backends that other checks leave behind.
#[test]
fn a_host_function_may_access_another_backend_s_host_buffer_not_tied_to_it() {
    const LEN: usize = 16;
    for_each_pair_alone(|producer, consumer| {
        if !caps(producer).host_funcs || !caps(consumer).buffers {
            not_applicable(producer, "no host functions or no buffers on one side");
            return Ok(());
        }
        // Independent copies queued, no wait across backends.
        for access in [HostAccess::Read, HostAccess::Write] {
            let other = Stream::new(consumer)?;
            let host = Arc::new(other.alloc_host(LEN)?);
            let dev = other.alloc(LEN)?;
            other.fill(&dev, 0, LEN, 3)?;
            access.queue_copy(&other, &host, &dev, LEN)?;
            let host_stream = Stream::new(producer)?;
            let target = host.clone();
            let call = HostFnCall::launch(&host_stream, move || access.make(&target, 5))?;
            let result = call.answer(
                &format!("the host function's {access:?} of a host buffer with independent copies"),
                || {},
            )?;
            // Between CUDA and HIP (on the HIP-on-CUDA shim their host functions run on one
            // runtime thread) the consumer's own rule applies inside the host function: a copy
            // of another stream still queued is refused, never waited for (it may be queued
            // behind the host function). Whether the copy is still queued is a matter of time.
            let own_rule_refuses = matches!(
                (producer, consumer),
                (
                    Place::Cuda(_) | Place::Hip(_),
                    Place::Cuda(_) | Place::Hip(_)
                )
            ) && matches!(result, Some(Err(Error::WouldDeadlock { .. })));
            assert!(
                matches!(result, Some(Ok(()))) || own_rule_refuses,
                "the host function's {access:?} of a host buffer whose queued copy does not \
                 wait on it answered {result:?}"
            );
            if own_rule_refuses {
                sync(&other)?;
                continue;
            }
            sync(&other)?;
            let expected = match access {
                HostAccess::Read => 3,
                HostAccess::Write => 5,
            };
            assert_eq!(host.to_vec()?, vec![expected; LEN], "after the {access:?}");
        }
        // A pending wait across backends on the host function, the buffer settled.
        for access in [HostAccess::Read, HostAccess::Write] {
            let Some(tied) = TiedAccess::new(producer, consumer, access, LEN, 9)? else {
                return Ok(());
            };
            tied.gate.release();
            let result = tied.call.answer(
                &format!(
                    "the host function's {access:?} of a settled host buffer while a wait \
                     across backends on it is pending"
                ),
                || {},
            )?;
            assert!(
                matches!(result, Some(Ok(()))),
                "the host function's {access:?} of a host buffer with no queued copy, while a \
                 wait across backends on it was pending, answered {result:?}"
            );
            let (waiting, dev) = (&tied.waiting, &tied.dev);
            HostAccess::Write.queue_copy(waiting, &tied.host, dev, LEN)?;
            let out = waiting.alloc_host(LEN)?;
            waiting.copy_device_to_host(&out, 0, dev, 0, LEN)?;
            sync(waiting)?;
            let expected = match access {
                HostAccess::Read => 0,
                HostAccess::Write => 9,
            };
            assert_eq!(
                out.to_vec()?,
                vec![expected; LEN],
                "the consumer's upload after the host function's {access:?}"
            );
        }
        Ok(())
    });
}

/// A host function of the producer's backend synchronizes work of the consumer's backend that
/// waits (across backends) on producer work queued *before* the host function, on another
/// stream still held at a gate: the call answers `Error::WouldDeadlock` at once. That awaited
/// work does not wait for the host function, yet its completion may need the very thread the
/// host function would block: the last free CPU worker (with `DEVSTREAM_CPU_WORKERS=1`, a
/// rule that let the call wait hangs here), or the runtime thread that runs a GPU's host
/// functions and its completion doorbells. The rule keys on the awaited backend, not on when
/// the awaited work was queued (docs/CROSS_BACKEND.md, "Host functions").
#[test]
fn a_host_function_may_not_synchronize_another_backend_s_work_behind_earlier_work_of_its_own() {
    for_each_pair_alone(|producer, consumer| {
        if !caps(producer).host_funcs || !observable(consumer) {
            not_applicable(producer, "no host functions on one side");
            return Ok(());
        }
        let waiting = Stream::new(consumer)?;
        let host_stream = Stream::new(producer)?;
        let Some((held, gate)) = gated_stream(producer)? else {
            return Ok(());
        };
        let log = Log::new();
        held.launch_host_func(log.task("held"))?;
        waiting.wait_stream(&held)?;
        waiting.launch_host_func(log.task("waited"))?;
        let awaited = waiting.record_event()?;
        // Launched after the wait was made: the awaited producer work was queued before it.
        let call = HostFnCall::launch(&host_stream, move || awaited.synchronize())?;
        let result = call.answer(
            "a host function's synchronize of work behind earlier work of its own backend",
            gate.opener(),
        )?;
        assert!(
            matches!(result, Some(Err(Error::WouldDeadlock { .. }))),
            "{producer} → {consumer}: the host function's synchronize of work that waits on \
             its backend's earlier held work answered {result:?}, not WouldDeadlock"
        );
        gate.release();
        sync(&waiting)?;
        assert!(
            log.position(&"held") < log.position(&"waited"),
            "the waiting stream ran before the held work: {:?}",
            log.entries()
        );
        sync(&held)
    });
}

/// A host function that blocks until [`Blocker::open`] (or drop), and whether it started.
struct Blocker {
    state: Arc<(Mutex<(bool, bool)>, std::sync::Condvar)>,
}

impl Blocker {
    /// Launches the blocking host function on `stream`.
    fn launch(stream: &Stream) -> Result<Blocker> {
        let state = Arc::new((Mutex::new((false, false)), std::sync::Condvar::new()));
        let held = state.clone();
        stream.launch_host_func(move || {
            let (lock, cv) = &*held;
            let mut started_open = lock.lock().unwrap_or_else(|e| e.into_inner());
            started_open.0 = true;
            cv.notify_all();
            while !started_open.1 {
                started_open = cv.wait(started_open).unwrap_or_else(|e| e.into_inner());
            }
        })?;
        Ok(Blocker { state })
    }

    /// Whether the host function has started (and blocks now, until opened).
    fn started(&self) -> bool {
        self.state.0.lock().unwrap_or_else(|e| e.into_inner()).0
    }

    /// Lets the host function return.
    fn open(&self) {
        let (lock, cv) = &*self.state;
        lock.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        cv.notify_all();
    }
}

impl Drop for Blocker {
    fn drop(&mut self) {
        self.open();
    }
}

/// A host function of the producer's place that blocks (on the host, calling nothing) does not
/// hold a wait across backends on other work of that place: the producer's gated work on
/// another stream completes once its gate opens, and the consumer's later work completes while
/// the host function still blocks (seen through a query of the consumer's event, not a host
/// function of the consumer's, which may share the blocked thread: HIP on the HIP-on-CUDA shim
/// shares CUDA's). Where a runtime runs every host function on one thread (CUDA may), the
/// completion of the awaited work cannot count on its doorbell, a host function on that thread.
#[test]
fn a_blocked_host_function_does_not_hold_waits_on_other_work_of_its_place() {
    for_each_pair_alone(|producer, consumer| {
        if !caps(producer).host_funcs || !caps(consumer).nonblocking_query {
            not_applicable(
                producer,
                "no host functions, or the consumer's events cannot be queried",
            );
            return Ok(());
        }
        let waiting = Stream::new(consumer)?;
        let blocked_stream = Stream::new(producer)?;
        let Some((held, gate)) = gated_stream(producer)? else {
            return Ok(());
        };
        let awaited = held.record_event()?;
        waiting.wait_event(&awaited)?;
        let consumed = waiting.record_event()?;
        let blocker = Blocker::launch(&blocked_stream)?;
        assert!(
            wait_until(PATIENCE, || blocker.started()),
            "the blocking host function never started"
        );
        assert!(
            !consumed.query()?,
            "the consumer ran through the producer's gate"
        );
        gate.release();
        let mut answer = Ok(false);
        let done = wait_until(PATIENCE, || {
            answer = consumed.query();
            !matches!(answer, Ok(false))
        });
        assert!(
            done && matches!(answer, Ok(true)),
            "{producer} → {consumer}: the consumer's work did not complete within {PATIENCE:?} \
             of the awaited work's release while a host function of {producer} blocked \
             (last query: {answer:?})"
        );
        blocker.open();
        sync(&waiting)?;
        sync(&blocked_stream)?;
        sync(&held)
    });
}

/// A host function of one backend synchronizes work of a second backend that waits (across
/// backends) on a host function of a third, held at a gate that opens once the first host
/// function has started: no pending wait awaits the first backend's work, so the call is not
/// refused, and it returns `Ok` once the third backend's host function has run (or a typed
/// `Error::WouldDeadlock` where a runtime forbids the call there), never a hang. A runtime
/// that runs the first and third backends' host functions on one thread (HIP on the
/// HIP-on-CUDA shim, beside CUDA) hangs here. Each first place in a child process of its own.
#[test]
fn a_host_function_may_synchronize_work_that_waits_on_a_host_function_of_a_third_backend() {
    for_each_place_isolated(
        "cross_hostile::a_host_function_may_synchronize_work_that_waits_on_a_host_function_of_a_third_backend",
        |first| {
            if !caps(first).host_funcs {
                not_applicable(first, "no host functions");
                return Ok(());
            }
            for second in consumers_of(first)? {
                let thirds: Vec<Place> = crate::harness::places_under_test()
                    .into_iter()
                    .filter(|third| {
                        crate::harness::other_backend(third, first)
                            && crate::harness::other_backend(third, &second)
                            && caps(third).host_funcs
                    })
                    .collect();
                for third in thirds {
                    third_backend_host_function(first, &second, &third)?;
                    eprintln!("[conformance]   {first} → {second} → {third}: ok");
                }
            }
            Ok(())
        },
    );
}

/// One case of
/// [`a_host_function_may_synchronize_work_that_waits_on_a_host_function_of_a_third_backend`].
fn third_backend_host_function(first: &Place, second: &Place, third: &Place) -> Result<()> {
    let host_stream = Stream::new(first)?;
    let waiting = Stream::new(second)?;
    let Some((held, gate)) = gated_stream(third)? else {
        return Ok(());
    };
    let log = Log::new();
    held.launch_host_func(log.task("third"))?;
    waiting.wait_stream(&held)?;
    let awaited = waiting.record_event()?;
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let running = started.clone();
    let call = HostFnCall::launch(&host_stream, move || {
        running.store(true, std::sync::atomic::Ordering::SeqCst);
        awaited.synchronize()
    })?;
    assert!(
        wait_until(PATIENCE, || started
            .load(std::sync::atomic::Ordering::SeqCst)),
        "{first}: the host function never started"
    );
    gate.release();
    let result = call.answer(
        &format!(
            "{first} → {second} → {third}: a host function's synchronize of work that waits \
             on a host function of a third backend"
        ),
        || {},
    )?;
    match result {
        Some(Ok(())) => assert!(
            log.contains(&"third"),
            "{first} → {second} → {third}: the synchronize returned before the third \
             backend's host function ran"
        ),
        Some(Err(Error::WouldDeadlock { .. })) => {
            not_applicable(first, &format!("its host functions cannot make {result:?}"))
        }
        other => panic!(
            "{first} → {second} → {third}: the host function's synchronize answered {other:?}"
        ),
    }
    sync(&waiting)?;
    sync(&held)
}
