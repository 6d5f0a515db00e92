//! Hostile uses of waits across backends (`devstream_core::traits`, "Waits across backends" and
//! "Host functions"; docs/CROSS_BACKEND.md): the awaited side dropped while a wait on it is
//! pending, and host functions of one backend that wait on another backend's work.
//!
//! Each check runs on every ordered pair of places under test whose backends differ, as in
//! `cross.rs`: the first place produces (or runs the host function), the second waits.

use crate::cross::{
    consumers_of, counts_are_zero, for_each_pair, for_each_pair_alone, gated, observable,
};
use crate::harness::{
    assert_stays_false, caps, for_each_place_isolated, not_applicable, sync, wait_until, within,
    Gate, Log, HANG, PATIENCE,
};
use devstream::{live_counts, Error, Event, Result, Stream};
use std::sync::{Arc, Mutex, OnceLock};

/// The awaited stream, the awaited event and the producer's last handles on its device (its
/// stream, its event, the gate's flag) all dropped while a wait across backends on them is
/// pending: once the producer's work is released the consumer's later work runs, and no stream
/// or event stays live.
#[test]
fn a_pending_wait_across_backends_outlives_every_producer_handle_and_leaks_nothing() {
    for_each_pair_alone(|producer, consumer| {
        assert!(
            wait_until(PATIENCE, counts_are_zero),
            "before: live counts are {:?}",
            live_counts()
        );
        {
            let consumer_stream = Stream::new(consumer)?;
            let Some((stream, gate)) = gated(producer)? else {
                return Ok(());
            };
            let log = Log::new();
            if caps(producer).host_funcs {
                stream.launch_host_func(log.task("produced"))?;
            }
            let event = stream.record_event()?;
            consumer_stream.wait_event(&event)?;
            consumer_stream.wait_stream(&stream)?;
            if observable(consumer) {
                consumer_stream.launch_host_func(log.task("consumed"))?;
            }
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
        }
        assert!(
            wait_until(PATIENCE, counts_are_zero),
            "after the producer's handles were dropped under a pending wait, live counts stay \
             at {:?}",
            live_counts()
        );
        Ok(())
    });
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
                let answer: Arc<Mutex<Option<Result<()>>>> = Arc::new(Mutex::new(None));
                let (event, slot) = (awaited.clone(), answer.clone());
                host_stream.launch_host_func(move || {
                    let result = match event.get() {
                        Some(event) => event.synchronize(),
                        None => Err(Error::InvalidArgument("no event to synchronize".into())),
                    };
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                })?;
                // The consumer's stream waits for the host function's stream, host function
                // included; its event stands for that wait.
                waiting.wait_stream(&host_stream)?;
                let _ = awaited.set(waiting.record_event()?);
                gate.release();
                let s = host_stream.clone();
                within(
                    *HANG,
                    &format!(
                        "{producer} → {consumer}: the host function's synchronize of an event \
                         that waits on it"
                    ),
                    move || s.synchronize(),
                    || {},
                )?;
                let result = answer.lock().unwrap_or_else(|e| e.into_inner()).take();
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
/// held work once it is released.
#[test]
fn a_host_function_may_make_a_wait_across_backends() {
    for_each_pair(|producer, consumer| {
        if !caps(producer).host_funcs || !observable(consumer) {
            not_applicable(producer, "no host functions on one side");
            return Ok(());
        }
        let waiting = Stream::new(consumer)?;
        let Some((held, gate)) = gated(producer)? else {
            return Ok(());
        };
        let log = Log::new();
        held.launch_host_func(log.task("held"))?;
        let host_stream = Stream::new(producer)?;
        let answer: Arc<Mutex<Option<Result<()>>>> = Arc::new(Mutex::new(None));
        let (slot, w, h) = (answer.clone(), waiting.clone(), held.clone());
        host_stream.launch_host_func(move || {
            let result = w.wait_stream(&h);
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        })?;
        let s = host_stream.clone();
        within(
            *HANG,
            "a host function's wait across backends",
            move || s.synchronize(),
            gate.opener(),
        )?;
        let result = answer.lock().unwrap_or_else(|e| e.into_inner()).take();
        assert!(
            matches!(result, Some(Ok(()))),
            "the wait made in a host function answered {result:?}"
        );
        waiting.launch_host_func(log.task("waited"))?;
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

/// A host function of the producer's backend may synchronize an event of the consumer's
/// backend whose work does not depend on the host function: the call waits for that work and
/// returns `Ok`.
#[test]
fn a_host_function_may_synchronize_independent_work_of_another_backend() {
    for_each_pair(|producer, consumer| {
        if !caps(producer).host_funcs || !observable(consumer) {
            not_applicable(producer, "no host functions on one side");
            return Ok(());
        }
        let other = Stream::new(consumer)?;
        let log = Log::new();
        other.launch_host_func(log.task("independent"))?;
        let event = other.record_event()?;
        let host_stream = Stream::new(producer)?;
        let answer: Arc<Mutex<Option<Result<()>>>> = Arc::new(Mutex::new(None));
        let slot = answer.clone();
        host_stream.launch_host_func(move || {
            let result = event.synchronize();
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        })?;
        let s = host_stream.clone();
        within(
            *HANG,
            "a host function's synchronize of independent work of another backend",
            move || s.synchronize(),
            || {},
        )?;
        let result = answer.lock().unwrap_or_else(|e| e.into_inner()).take();
        assert!(
            matches!(result, Some(Ok(()))),
            "the host function's synchronize answered {result:?}"
        );
        assert!(log.contains(&"independent"));
        sync(&other)
    });
}
