//! Host functions queued right behind a wait across backends (docs/CROSS_BACKEND.md,
//! "Meaning"): the usual next work of a stream that waits on another backend's work. Some
//! backends run such a host function themselves rather than through their runtime (CUDA and
//! HIP, see `devstream_gpu_common::foreign`), so the checks pin what must not change: it runs
//! after the awaited work and after every piece of work queued before it on its stream (also
//! work queued after the wait), before the work queued after it, in order with the host
//! functions around it; its panic is the stream's next `synchronize` error; inside it, the
//! rules of a host function hold (waiting for its own stream is an error, never a hang).
//! Each check runs on every ordered pair of places of different backends whose consumer has
//! `foreign_waits` and host functions.

use crate::cross::{for_each_pair, observed_pair, ObservedPair};
use crate::harness::{assert_stays_false, caps, not_applicable, sync};
use devstream::{Error, Flag, Result};
use std::sync::{Arc, Mutex};

/// The consumer's stream already waiting on an event recorded behind the producer's closed
/// gate (with a host function logging `"produced"` before it where the producer has host
/// functions), the producer's stream, the gate and the log; `None` where the pair cannot show
/// an order.
fn waiting_pair(
    producer: &devstream::Place,
    consumer: &devstream::Place,
) -> Result<Option<ObservedPair>> {
    let Some((consumer_stream, stream, gate, log)) = observed_pair(producer, consumer, "produced")?
    else {
        return Ok(None);
    };
    let event = stream.record_event()?;
    consumer_stream.wait_event(&event)?;
    Ok(Some((consumer_stream, stream, gate, log)))
}

/// What a host function behind the wait saw when it ran.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// The flag written by the consumer's work queued between the wait and the host function.
    before: u32,
    /// The flag written by the consumer's work queued after the host function.
    after: u32,
}

/// A host function behind a wait sees the consumer's work queued before it (after the wait)
/// done and the work queued after it not started; the host functions queued around it run in
/// stream order, after the producer's work.
#[test]
fn a_host_function_behind_a_wait_across_backends_runs_in_its_stream_order() {
    for_each_pair(|producer, consumer| {
        if !caps(consumer).flags {
            not_applicable(
                consumer,
                "no flags to mark the work around the host function",
            );
            return Ok(());
        }
        let Some((consumer_stream, stream, gate, log)) = waiting_pair(producer, consumer)? else {
            return Ok(());
        };
        let (before, after) = (Flag::new(consumer)?, Flag::new(consumer)?);
        let seen = Arc::new(Mutex::new(None));
        // Two host functions right behind the wait, then flag work around a third one.
        consumer_stream.launch_host_func(log.task("first"))?;
        consumer_stream.launch_host_func(log.task("second"))?;
        consumer_stream.write_flag(&before, 1)?;
        {
            let (before, after, seen, log) = (
                before.clone(),
                after.clone(),
                Arc::clone(&seen),
                log.clone(),
            );
            consumer_stream.launch_host_func(move || {
                *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(Seen {
                    before: before.get(),
                    after: after.get(),
                });
                log.push("third");
            })?;
        }
        consumer_stream.write_flag(&after, 1)?;
        consumer_stream.launch_host_func(log.task("fourth"))?;
        assert_stays_false(
            "a host function behind the wait ran through the producer's gate",
            || log.contains(&"first") || log.contains(&"third"),
        );
        assert_eq!(
            before.get(),
            0,
            "the consumer's flag work ran through the gate"
        );
        gate.release();
        sync(&consumer_stream)?;
        let seen = *seen.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(
            seen,
            Some(Seen {
                before: 1,
                after: 0
            }),
            "the host function behind the wait did not run between the work queued before it \
             and after it"
        );
        let mut expected = vec!["first", "second", "third", "fourth"];
        if caps(producer).host_funcs {
            expected.insert(0, "produced");
        }
        assert_eq!(
            log.entries(),
            expected,
            "host functions out of stream order"
        );
        assert_eq!(after.get(), 1, "the work after the host function never ran");
        sync(&stream)
    });
}

/// A host function behind a wait that panics: the consumer's next `synchronize` reports the
/// panic once, and the stream's later work still runs.
#[test]
fn a_panic_of_a_host_function_behind_a_wait_across_backends_is_reported_by_synchronize() {
    for_each_pair(|producer, consumer| {
        let Some((consumer_stream, stream, gate, log)) = waiting_pair(producer, consumer)? else {
            return Ok(());
        };
        consumer_stream.launch_host_func(|| panic!("behind the wait"))?;
        consumer_stream.launch_host_func(log.task("after the panic"))?;
        gate.release();
        match consumer_stream.synchronize() {
            Err(Error::HostFuncPanicked { message, .. }) => assert!(
                message.contains("behind the wait"),
                "another panic message: {message}"
            ),
            other => panic!("synchronize answered {other:?}, not the host function's panic"),
        }
        sync(&consumer_stream)?;
        assert!(
            log.contains(&"after the panic"),
            "the work after the panicking host function never ran"
        );
        sync(&stream)
    });
}

/// A host function behind a wait that synchronizes its own stream, which waits for it: a typed
/// error inside the host function, never a hang; the stream then completes.
#[test]
fn a_host_function_behind_a_wait_across_backends_cannot_wait_for_its_own_stream() {
    for_each_pair(|producer, consumer| {
        let Some((consumer_stream, stream, gate, _log)) = waiting_pair(producer, consumer)? else {
            return Ok(());
        };
        let answer: Arc<Mutex<Option<Result<()>>>> = Arc::default();
        {
            let (own, answer) = (consumer_stream.clone(), Arc::clone(&answer));
            consumer_stream.launch_host_func(move || {
                let result = own.synchronize();
                *answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            })?;
        }
        gate.release();
        sync(&consumer_stream)?;
        let answer = answer.lock().unwrap_or_else(|e| e.into_inner()).take();
        match answer {
            Some(Err(_)) => {}
            other => panic!(
                "{producer} → {consumer}: synchronize of its own stream inside a host function \
                 behind a wait answered {other:?}, not an error"
            ),
        }
        sync(&stream)
    });
}
