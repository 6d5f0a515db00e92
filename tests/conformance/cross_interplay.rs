//! Waits across backends meet the rest of the stream model (docs/CROSS_BACKEND.md, "Meaning"):
//! the awaited stream may be any kind of stream a place hands out (its default stream, the
//! calling thread's per-thread stream, a pooled stream), the awaited event may be a timing
//! event, the waiting stream may be any of those kinds too, and a stream that elides redundant
//! waits never elides one across backends. Each check runs on every ordered pair of places of
//! different backends whose consumer has `foreign_waits`.

use crate::cross::{consumers_of, each_consumer, gated_stream, observable};
use crate::harness::{assert_stays_false, caps, for_each_place, not_applicable, sync, Gate, Log};
use devstream::{Event, EventFlags, Place, Priority, Result, Stream};

/// The kinds of stream a place hands out, each made by `make`; a kind the place lacks answers
/// `Unsupported` (its capability is checked elsewhere) and is skipped.
type StreamKind = (&'static str, fn(&Place) -> Result<Stream>);

const KINDS: [StreamKind; 4] = [
    ("new stream", Stream::new),
    ("default stream", Stream::default_stream),
    ("per-thread stream", Stream::per_thread),
    ("pooled high-priority stream", |place| {
        Stream::from_pool(place, Priority::High)
    }),
];

/// `make(place)`, or `None` (reported as not applicable) where the place lacks that kind.
fn stream_of_kind(place: &Place, (name, make): StreamKind) -> Result<Option<Stream>> {
    match make(place) {
        Ok(stream) => Ok(Some(stream)),
        Err(devstream::Error::Unsupported { .. }) => {
            not_applicable(place, &format!("no {name}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The consumer's later work waits for `awaited`, recorded behind `gate` on the producer: it
/// stays queued while the gate is closed and runs once the gate opens.
fn ordered_after(consumer_stream: &Stream, awaited: &Event, gate: Gate, what: &str) -> Result<()> {
    let log = Log::new();
    consumer_stream.wait_event(awaited)?;
    consumer_stream.launch_host_func(log.task("consumed"))?;
    assert_stays_false(what, || log.contains(&"consumed"));
    gate.release();
    sync(consumer_stream)?;
    assert!(
        log.contains(&"consumed"),
        "{what}: the consumer's work never ran"
    );
    Ok(())
}

/// A consumer waits on a timing event recorded, behind a gate, on each kind of producer stream;
/// the event still times its work afterwards.
#[test]
fn every_kind_of_awaited_stream_and_timing_events_order_the_waiting_stream() {
    for_each_place(|producer| {
        each_consumer(producer, &|producer, consumer| {
            if !observable(consumer) {
                not_applicable(consumer, "no host functions to observe the order");
                return Ok(());
            }
            for kind in KINDS {
                let Some(stream) = stream_of_kind(producer, kind)? else {
                    continue;
                };
                let Some(gate) = Gate::close(&stream)? else {
                    not_applicable(producer, "no gate (neither flags nor host functions)");
                    return Ok(());
                };
                let timing = caps(producer).timing;
                let flags = EventFlags {
                    timing,
                    ..EventFlags::default()
                };
                let start = Event::new(producer, flags)?;
                let end = Event::new(producer, flags)?;
                stream.record(&start)?;
                stream.record(&end)?;
                let consumer_stream = Stream::new(consumer)?;
                ordered_after(
                    &consumer_stream,
                    &end,
                    gate,
                    &format!(
                        "the {} of {producer}: the consumer ran through its gate",
                        kind.0
                    ),
                )?;
                sync(&stream)?;
                if timing {
                    // The foreign wait used the event; it still answers a time for its work.
                    start.elapsed(&end).map_err(|e| {
                        devstream::Error::InvalidArgument(format!(
                            "the {} of {producer}: elapsed of timing events a foreign wait used: {e}",
                            kind.0
                        ))
                    })?;
                }
            }
            Ok(())
        })
    });
}

/// Each kind of consumer stream waits on a gated producer of another backend.
#[test]
fn every_kind_of_waiting_stream_waits_across_backends() {
    for_each_place(|producer| {
        for consumer in consumers_of(producer)? {
            if !observable(&consumer) {
                not_applicable(&consumer, "no host functions to observe the order");
                continue;
            }
            for kind in KINDS {
                let Some(consumer_stream) = stream_of_kind(&consumer, kind)? else {
                    continue;
                };
                let Some((stream, gate)) = gated_stream(producer)? else {
                    return Ok(());
                };
                let awaited = stream.record_event()?;
                ordered_after(
                    &consumer_stream,
                    &awaited,
                    gate,
                    &format!("the {} of {consumer} ran through {producer}'s gate", kind.0),
                )?;
                sync(&stream)?;
            }
            eprintln!("[conformance]   {producer} → {consumer}: ok");
        }
        Ok(())
    });
}

/// A stream that elides redundant waits, having waited on the producer's earlier (complete)
/// work, still waits on the producer's later work: a wait across backends is never implied by
/// what the stream's own backend has seen.
#[test]
fn a_stream_that_elides_waits_never_elides_one_across_backends() {
    for_each_place(|producer| {
        each_consumer(producer, &|producer, consumer| {
            if !observable(consumer) {
                not_applicable(consumer, "no host functions to observe the order");
                return Ok(());
            }
            let consumer_stream = Stream::builder(consumer).elide_waits(true).build()?;
            let Some((stream, gate)) = gated_stream(producer)? else {
                return Ok(());
            };
            // Earlier work of the same producer stream, complete before the gate closes.
            let earlier = Stream::new(producer)?;
            let done = earlier.record_event()?;
            sync(&earlier)?;
            consumer_stream.wait_event(&done)?;
            consumer_stream.wait_stream(&earlier)?;
            let awaited = stream.record_event()?;
            // Twice: the second wait on the same event may be elided, the first never.
            consumer_stream.wait_event(&awaited)?;
            ordered_after(
                &consumer_stream,
                &awaited,
                gate,
                "an eliding stream ran through another backend's gate",
            )?;
            sync(&stream)
        })
    });
}

/// Handles a program wrapped from raw CUDA ones (`CudaEventExt::from_raw`,
/// `CudaStreamExt::from_raw`) take part in waits across backends as devstream's own do: a
/// consumer of another backend waits on a raw `CUevent` recorded behind a gate, and a raw
/// `CUstream` waits on a gated producer of another backend. Each CUDA place in a child process of
/// its own: a raw handle handed out turns wait elision off on its device for the rest of the
/// process (devstream can no longer prove what other code queued), which would starve the elision
/// checks that share the process.
#[cfg(feature = "cuda")]
#[test]
fn wrapped_raw_cuda_handles_wait_and_are_waited_on_across_backends() {
    use crate::harness::for_each_place_isolated;
    use devstream::cuda::cudarc::driver::{result, sys, CudaContext};
    use devstream::cuda::{CudaEvent, CudaEventExt, CudaStream, CudaStreamExt};
    use devstream::Member;

    for_each_place_isolated(
        "cross_interplay::wrapped_raw_cuda_handles_wait_and_are_waited_on_across_backends",
        |producer| {
            let driver = |what: &str, e: result::DriverError| {
                devstream::Error::InvalidArgument(format!("raw CUDA call {what}: {e:?}"))
            };
            let Place::Cuda(ordinal) = *producer else {
                not_applicable(producer, "not a CUDA place (raw CUDA handles)");
                return Ok(());
            };
            each_consumer(producer, &|producer, consumer| {
                if !observable(consumer) {
                    not_applicable(consumer, "no host functions to observe the order");
                    return Ok(());
                }
                // The primary context devstream uses, current on this thread for the raw calls.
                let context =
                    CudaContext::new(ordinal).map_err(|e| driver("cuDevicePrimaryCtxRetain", e))?;
                context
                    .bind_to_thread()
                    .map_err(|e| driver("cuCtxSetCurrent", e))?;
                let Some((stream, gate)) = gated_stream(producer)? else {
                    return Ok(());
                };
                let native = stream
                    .backend::<CudaStream>()
                    .expect("a stream of a CUDA place is a CudaStream");
                let raw_event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                    .map_err(|e| driver("cuEventCreate", e))?;
                // SAFETY: both handles are live objects of the device's primary context.
                unsafe { result::event::record(raw_event, native.as_raw()) }
                    .map_err(|e| driver("cuEventRecord", e))?;
                // SAFETY: the event is live until it is destroyed below, after every use.
                let wrapped =
                    unsafe { CudaEvent::from_raw(raw_event, ordinal, EventFlags::default()) }?;
                let awaited: Event = wrapped.wrap();
                let consumer_stream = Stream::new(consumer)?;
                ordered_after(
                    &consumer_stream,
                    &awaited,
                    gate,
                    &format!(
                        "{consumer} ran through a raw CUevent of {producer} recorded behind a gate"
                    ),
                )?;
                sync(&stream)?;
                drop(awaited);
                // SAFETY: no handle refers to the event any more and its work is complete.
                unsafe { result::event::destroy(raw_event) }
                    .map_err(|e| driver("cuEventDestroy", e))?;

                // A raw stream (devstream's own, wrapped again without ownership) as the consumer.
                let Some((other, other_gate)) = gated_stream(consumer)? else {
                    return Ok(());
                };
                let owner = Stream::new(producer)?;
                let raw_stream = owner
                    .backend::<CudaStream>()
                    .expect("a stream of a CUDA place is a CudaStream")
                    .as_raw();
                // SAFETY: `owner` keeps the stream alive past every use of the wrapper.
                let wrapped: Stream = unsafe { CudaStream::from_raw(raw_stream, ordinal) }?.wrap();
                let awaited = other.record_event()?;
                ordered_after(
                    &wrapped,
                    &awaited,
                    other_gate,
                    &format!("a raw CUstream of {producer} ran through {consumer}'s gate"),
                )?;
                sync(&other)?;
                drop(wrapped);
                sync(&owner)
            })
        },
    );
}
