//! Calls that return while another stream of the place is held.
//!
//! A program holds a stream at a gate (a flag wait, or a blocked host function where the place
//! has no flags) that only the calling thread opens later, and meanwhile goes on using the
//! place: buffers, host buffers, events, flags, pools, captures and their memory, other streams'
//! synchronization. Every such call must return: a backend that makes a driver call waiting for
//! all of the device's queued work on the calling thread (a synchronous free), or on another
//! thread while holding a lock the calling thread's next driver call needs, would never return.
//!
//! The calls that docs/SEMANTICS.md ("Flags on CUDA and HIP") says may block while a stream of a
//! CUDA or HIP device is held at a flag (creating a stream or an event, allocating pinned
//! memory) are made before the gate closes; everything else, devstream's own driver calls on
//! the user's behalf included, is made while it is closed.
//!
//! Each check runs in a child process ([`for_each_place_isolated`]) with a watchdog per step
//! that names the step, since a driver that deadlocks cannot be rescued from the test.

use crate::harness::{caps, for_each_place_isolated, not_applicable, within, Gate, HANG};
use devstream::{
    CaptureMode, CaptureSupport, Event, EventFlags, Flag, MemoryPool, PoolOptions, Result, Stream,
};

/// Bytes of every buffer here.
const LEN: usize = 4096;

/// Runs `f` (one step of the program) with a watchdog naming it.
fn step<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    within(
        *HANG,
        &format!("while another stream is held: {what}"),
        f,
        || {},
    )
}

/// Every call below returns while `held` (another stream of the place, with work queued behind
/// its gate) is held; afterwards the held work runs.
#[test]
fn calls_return_while_another_stream_of_the_place_is_held() {
    for_each_place_isolated(
        "held::calls_return_while_another_stream_of_the_place_is_held",
        |place| {
            let caps = caps(place);
            if !caps.buffers {
                not_applicable(place, "no buffers");
                return Ok(());
            }
            // Streams, events, host buffers, flags and pools are made before the gate closes
            // (see the module's note).
            let held = Stream::new(place)?;
            let stream = Stream::new(place)?;
            let event = Event::new(place, EventFlags::default())?;
            let host = stream.alloc_host(LEN)?;
            let flag = if caps.flags {
                Some(Flag::new(place)?)
            } else {
                None
            };
            let pool = if caps.memory_pools {
                Some(MemoryPool::new(place, PoolOptions::default())?)
            } else {
                None
            };
            let out = held.alloc_host(LEN)?;
            let scratch = std::sync::Arc::new(stream.alloc(LEN)?);
            let Some(gate) = Gate::close(&held)? else {
                not_applicable(place, "no gate (neither flags nor host functions)");
                return Ok(());
            };
            let behind = held.alloc(LEN)?;
            held.fill(&behind, 0, LEN, 9)?;
            held.copy_device_to_host(&out, 0, &behind, 0, LEN)?;
            drop(behind); // freed after the held work

            let s = stream.clone();
            step(
                "a buffer allocated, filled and dropped, the stream synchronized",
                move || {
                    let buffer = s.alloc(LEN)?;
                    s.fill(&buffer, 0, LEN, 1)?;
                    drop(buffer);
                    s.synchronize()
                },
            )?;
            let s = stream.clone();
            step("a host buffer copied into and read", move || {
                let device = s.alloc(LEN)?;
                s.fill(&device, 0, LEN, 2)?;
                s.copy_device_to_host(&host, 0, &device, 0, LEN)?;
                s.synchronize()?;
                assert_eq!(host.to_vec()?, vec![2; LEN]);
                Ok(())
            })?;
            let s = stream.clone();
            step("an event recorded, synchronized and dropped", move || {
                s.record(&event)?;
                event.synchronize()
            })?;
            if let Some(flag) = flag {
                step("a flag set and dropped", move || {
                    flag.set(3);
                    Ok(())
                })?;
            }
            if let Some(pool) = pool {
                let s = stream.clone();
                step(
                    "a pool's buffer dropped, its stats, trim and peak reset",
                    move || {
                        let buffer = s.alloc_from(&pool, LEN)?;
                        s.fill(&buffer, 0, LEN, 4)?;
                        drop(buffer);
                        s.synchronize()?;
                        pool.stats()?;
                        pool.trim(0)?;
                        pool.reset_peak()?;
                        drop(pool);
                        Ok(())
                    },
                )?;
                let p = place.clone();
                step("the default pool's stats and trim", move || {
                    let pool = MemoryPool::default_for(&p)?;
                    pool.stats()?;
                    pool.trim(0)
                })?;
            }
            if caps.capture != CaptureSupport::None {
                let s = stream.clone();
                let allocates = caps.capture_alloc;
                step(
                    "a capture, its launch, the graph and its memory dropped",
                    move || {
                        s.begin_capture(CaptureMode::ThreadLocal)?;
                        let buffer = if allocates {
                            let buffer = s.alloc(LEN)?;
                            s.fill(&buffer, 0, LEN, 5)?;
                            Some(buffer)
                        } else {
                            None
                        };
                        let graph = s.end_capture()?;
                        graph.launch(&s)?;
                        s.synchronize()?;
                        drop((graph, buffer));
                        Ok(())
                    },
                )?;
                // A release the drop handed to another thread may hold a driver lock that the
                // next capture's begin takes.
                let (s, scratch) = (stream.clone(), scratch.clone());
                step("a second capture right after", move || {
                    s.begin_capture(CaptureMode::ThreadLocal)?;
                    s.fill(&scratch, 0, LEN, 6)?;
                    let graph = s.end_capture()?;
                    graph.launch(&s)?;
                    s.synchronize()
                })?;
            }
            step("the other stream dropped", move || {
                drop(stream);
                Ok(())
            })?;
            gate.release();
            step(
                "the held stream synchronized after its gate opened",
                move || held.synchronize(),
            )?;
            assert_eq!(out.to_vec()?, vec![9; LEN], "{place}: the held work");
            Ok(())
        },
    );
}
