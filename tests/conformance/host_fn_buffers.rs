//! Host functions given host buffers (`Stream::launch_host_func_with`,
//! `devstream_core::host_fn_access`): ordered against the buffers' copies and other host
//! functions in submission order, whatever the streams and backends, by waits.
//!
//! Every check runs on every ordered pair (runner, owner) of places under test, the same place
//! twice and places of one backend included: the runner's stream runs the host function, the
//! owner's streams allocate and copy the buffer. The runner needs host functions and waits on
//! other backends' work; the owner's host buffers must be given to host functions where its
//! `host_func_buffers` capability is on, and answer `InvalidArgument` (nothing submitted)
//! where it is off.

use crate::harness::{
    assert_stays_false, caps, for_each_place, not_applicable, places_under_test, sync, within,
    Gate, Log, PATIENCE,
};
use devstream::{CaptureMode, Error, Place, Result, Stream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

const LEN: usize = 64;

/// Runs `check(runner, owner)` for every owner place under test whose host buffers can be
/// given to host functions of `runner`, naming the pair in a failure.
fn for_each_pair(check: impl Fn(&Place, &Place) -> Result<()>) {
    for_each_place(|runner| {
        let runner_caps = caps(runner);
        if !runner_caps.host_funcs || !runner_caps.foreign_waits {
            not_applicable(runner, "no host functions or no waits on other backends");
            return Ok(());
        }
        for owner in places_under_test() {
            let owner_caps = caps(&owner);
            if !owner_caps.buffers {
                continue;
            }
            if !owner_caps.host_func_buffers {
                let (r, o) = (Stream::new(runner)?, Stream::new(&owner)?);
                let buffer = o.alloc_host(LEN)?;
                assert_err!(
                    r.launch_host_func_with(&[&buffer], |_| {}),
                    Error::InvalidArgument(_)
                );
                not_applicable(&owner, "host_func_buffers off: InvalidArgument");
                continue;
            }
            check(runner, &owner).map_err(|e| {
                Error::InvalidArgument(format!(
                    "runner {runner}, owner {owner}: returned Err({e:?})"
                ))
            })?;
            eprintln!("[conformance]   runner {runner}, owner {owner}: ok");
        }
        Ok(())
    });
}

/// The runner's stream held at a gate; `None` where the runner has none.
fn held(runner: &Place) -> Result<Option<(Stream, Gate)>> {
    let stream = Stream::new(runner)?;
    Ok(Gate::close(&stream)?.map(|gate| (stream, gate)))
}

/// A copy of a buffer submitted after a host function given it runs after the host function,
/// though the host function's stream is held and the copy's stream is not: the host function
/// fills the owner's pinned buffer, the owner's stream copies it to the device and back.
#[test]
fn a_copy_submitted_after_a_host_function_given_the_buffer_sees_what_it_wrote() {
    for_each_pair(|runner, owner| {
        let Some((stream, gate)) = held(runner)? else {
            return Ok(());
        };
        let device = Stream::new(owner)?;
        let staging = device.alloc_host(LEN)?;
        let on_device = device.alloc(LEN)?;
        let back = device.alloc_host(LEN)?;
        stream.launch_host_func_with(&[&staging], |bytes| bytes[0].fill(0x5a))?;
        // Submitted at once, ahead of the host function in time.
        device.copy_host_to_device(&on_device, 0, &staging, 0, LEN)?;
        device.copy_device_to_host(&back, 0, &on_device, 0, LEN)?;
        let done = device.record_event()?;
        assert_stays_false(
            "the owner's copies finished before the host function ran",
            || done.query().unwrap_or(true),
        );
        gate.release();
        sync(&device)?;
        sync(&stream)?;
        assert_eq!(back.to_vec()?, vec![0x5a; LEN]);
        Ok(())
    });
}

/// A host function given a buffer runs after the copies of it submitted before, on any stream:
/// the owner's held stream fills a device buffer and copies it into the host buffer; the host
/// function, submitted on a free stream after that copy, sees the copied bytes.
#[test]
fn a_host_function_given_a_buffer_sees_the_copies_submitted_before_it() {
    for_each_pair(|runner, owner| {
        let Some((device, gate)) = held(owner)? else {
            not_applicable(owner, "no gate to hold the owner's copy");
            return Ok(());
        };
        let stream = Stream::new(runner)?;
        let on_device = device.alloc(LEN)?;
        let landing = device.alloc_host(LEN)?;
        device.fill(&on_device, 0, LEN, 0x33)?;
        device.copy_device_to_host(&landing, 0, &on_device, 0, LEN)?;
        let seen = Log::new();
        let log = seen.clone();
        stream.launch_host_func_with(&[&landing], move |bytes| log.push(bytes[0].to_vec()))?;
        let ran = stream.record_event()?;
        assert_stays_false("the host function ran before the copy it follows", || {
            ran.query().unwrap_or(true)
        });
        gate.release();
        sync(&stream)?;
        sync(&device)?;
        assert_eq!(seen.entries(), vec![vec![0x33; LEN]]);
        Ok(())
    });
}

/// A host function given a buffer runs after the copies from it submitted before, on any
/// stream: the owner's held stream copies the buffer to the device; the host function,
/// submitted on a free stream after that copy, overwrites the buffer, and the copy still
/// carries the bytes from before.
#[test]
fn a_host_function_given_a_buffer_runs_after_the_copies_from_it_submitted_before() {
    for_each_pair(|runner, owner| {
        let Some((device, gate)) = held(owner)? else {
            not_applicable(owner, "no gate to hold the owner's copy");
            return Ok(());
        };
        let stream = Stream::new(runner)?;
        let staging = device.alloc_host(LEN)?;
        staging.write(0, &[0x21; LEN])?;
        let on_device = device.alloc(LEN)?;
        device.copy_host_to_device(&on_device, 0, &staging, 0, LEN)?;
        stream.launch_host_func_with(&[&staging], |bytes| bytes[0].fill(0x99))?;
        let ran = stream.record_event()?;
        assert_stays_false(
            "the host function ran before the copy from its buffer",
            || ran.query().unwrap_or(true),
        );
        gate.release();
        sync(&stream)?;
        let back = device.alloc_host(LEN)?;
        device.copy_device_to_host(&back, 0, &on_device, 0, LEN)?;
        sync(&device)?;
        assert_eq!(
            back.to_vec()?,
            vec![0x21; LEN],
            "the copy read the bytes from before the host function"
        );
        assert_eq!(staging.to_vec()?, vec![0x99; LEN]);
        Ok(())
    });
}

/// Host functions given one buffer on two streams run in the order they were submitted, the
/// second waiting for the first though only the first's stream is held; a host read of the
/// buffer from a plain thread waits for both.
#[test]
fn host_functions_given_one_buffer_run_in_submission_order_and_host_reads_wait_for_them() {
    for_each_pair(|runner, owner| {
        let Some((first, gate)) = held(runner)? else {
            return Ok(());
        };
        let second = Stream::new(runner)?;
        let buffer = Arc::new(Stream::new(owner)?.alloc_host(LEN)?);
        let order = Log::new();
        let log = order.clone();
        first.launch_host_func_with(&[&buffer], move |bytes| {
            bytes[0][0] = 1;
            log.push(1);
        })?;
        let log = order.clone();
        second.launch_host_func_with(&[&buffer], move |bytes| {
            bytes[0][0] += 1;
            log.push(2);
        })?;
        let read = Arc::new(AtomicBool::new(false));
        let reader = {
            let (buffer, read) = (Arc::clone(&buffer), Arc::clone(&read));
            std::thread::spawn(move || {
                let bytes = buffer.to_vec();
                read.store(true, Ordering::SeqCst);
                bytes
            })
        };
        assert_stays_false("a host function or read ran before the held one", || {
            order.len() > 0 || read.load(Ordering::SeqCst)
        });
        gate.release();
        let bytes = within(
            PATIENCE,
            "the read after both host functions",
            move || reader.join().expect("reader"),
            || {},
        )?;
        assert_eq!(order.entries(), vec![1, 2]);
        assert_eq!(bytes[0], 2, "the read saw both host functions");
        sync(&first)?;
        sync(&second)?;
        Ok(())
    });
}

/// A host read of a buffer inside a host function queued before a host function given the
/// buffer, on the same stream, never waits for that one (it runs only after the reader
/// returns): the read answers at once, with the bytes as they were or `Error::WouldDeadlock`.
#[test]
fn a_host_read_in_a_host_function_queued_before_one_given_the_buffer_never_waits_for_it() {
    for_each_pair(|runner, owner| {
        let Some((stream, gate)) = held(runner)? else {
            return Ok(());
        };
        let buffer = Arc::new(Stream::new(owner)?.alloc_host(LEN)?);
        let read: Log<Result<Vec<u8>>> = Log::new();
        let (log, reader) = (read.clone(), Arc::clone(&buffer));
        stream.launch_host_func(move || log.push(reader.to_vec()))?;
        stream.launch_host_func_with(&[&buffer], |bytes| bytes[0].fill(1))?;
        gate.release();
        sync(&stream)?;
        match &read.entries()[..] {
            [Ok(bytes)] => assert_eq!(bytes, &vec![0; LEN], "the read saw a later host function"),
            [Err(Error::WouldDeadlock { .. })] => {}
            other => panic!("the read inside the host function answered {other:?}"),
        }
        assert_eq!(buffer.to_vec()?, vec![1; LEN]);
        Ok(())
    });
}

/// One host function given buffers of two places copies between them (a pipeline's hand-over
/// from one backend's pinned buffer to another's), ordered after the first's copy in and
/// before the second's copy out.
#[test]
fn a_host_function_given_buffers_of_two_places_hands_bytes_from_one_to_the_other() {
    for_each_pair(|runner, owner| {
        let from_stream = Stream::new(owner)?;
        let Some((to_stream, gate)) = held(owner)? else {
            return Ok(());
        };
        let stream = Stream::new(runner)?;
        let source = from_stream.alloc(LEN)?;
        let from = from_stream.alloc_host(LEN)?;
        let to = to_stream.alloc_host(LEN)?;
        let sink = to_stream.alloc(LEN)?;
        let back = to_stream.alloc_host(LEN)?;
        from_stream.fill(&source, 0, LEN, 0x77)?;
        from_stream.copy_device_to_host(&from, 0, &source, 0, LEN)?;
        stream.launch_host_func_with(&[&from, &to], |bytes| {
            let (from, to) = bytes.split_at_mut(1);
            to[0].copy_from_slice(from[0]);
        })?;
        to_stream.copy_host_to_device(&sink, 0, &to, 0, LEN)?;
        to_stream.copy_device_to_host(&back, 0, &sink, 0, LEN)?;
        gate.release();
        sync(&to_stream)?;
        assert_eq!(back.to_vec()?, vec![0x77; LEN]);
        sync(&stream)?;
        sync(&from_stream)?;
        Ok(())
    });
}

/// Misuse answers a typed error and submits nothing: a buffer given twice, a capturing stream
/// (the capture goes on). A buffer dropped while its host function is pending stays valid for
/// it.
#[test]
fn misuse_is_refused_and_a_dropped_buffer_outlives_its_pending_host_function() {
    for_each_pair(|runner, owner| {
        let stream = Stream::new(runner)?;
        let buffer = Stream::new(owner)?.alloc_host(LEN)?;
        let ran = Log::new();
        let log = ran.clone();
        assert_err!(
            stream.launch_host_func_with(&[&buffer, &buffer], move |_| log.push(1)),
            Error::InvalidArgument(_)
        );
        if matches!(caps(runner).capture, devstream::CaptureSupport::None) {
            not_applicable(runner, "no capture");
        } else {
            stream.begin_capture(CaptureMode::Relaxed)?;
            let log = ran.clone();
            assert_err!(
                stream.launch_host_func_with(&[&buffer], move |_| log.push(2)),
                Error::Capture { .. }
            );
            assert!(stream.is_capturing()?, "the capture goes on");
            drop(stream.end_capture()?);
        }
        sync(&stream)?;
        assert!(ran.entries().is_empty(), "a refused host function ran");

        let Some((held_stream, gate)) = held(runner)? else {
            return Ok(());
        };
        let seen = Log::new();
        let log = seen.clone();
        held_stream.launch_host_func_with(&[&buffer], move |bytes| {
            bytes[0].fill(9);
            log.push(bytes[0].iter().map(|&b| u64::from(b)).sum::<u64>());
        })?;
        drop(buffer);
        gate.release();
        sync(&held_stream)?;
        assert_eq!(seen.entries(), vec![9 * LEN as u64]);
        Ok(())
    });
}

/// A host function given a buffer that reads or writes the same buffer through
/// `HostBuffer::read`/`write` gets a typed error at once (its own use of the buffer is pending
/// while it runs), never a hang.
#[test]
fn a_host_function_reading_the_buffer_it_was_given_is_refused_not_hung() {
    for_each_pair(|runner, owner| {
        let stream = Stream::new(runner)?;
        let buffer = Arc::new(Stream::new(owner)?.alloc_host(LEN)?);
        let answers = Log::new();
        let (log, own) = (answers.clone(), Arc::clone(&buffer));
        stream.launch_host_func_with(&[&buffer], move |_| {
            log.push(format!("{:?}", own.to_vec().map(drop)));
            log.push(format!("{:?}", own.write(0, &[1]).map(drop)));
        })?;
        sync(&stream)?;
        let answers = answers.entries();
        assert_eq!(answers.len(), 2, "the host function ran once: {answers:?}");
        for answer in &answers {
            assert!(
                answer.starts_with("Err(WouldDeadlock"),
                "an access to its own buffer from the host function given it answered {answer}"
            );
        }
        Ok(())
    });
}

/// A graph launched after a host function given a buffer its replay copies runs its copies after
/// the host function, though the host function's stream is held: the graph, captured on the
/// owner's place, copies the buffer to the device and back. On CUDA and HIP a replay's copies are
/// not ordered against host functions given the buffers (documented; order them with an event),
/// so the check does not apply there.
#[test]
fn a_graph_launched_after_a_host_function_given_a_buffer_copies_what_it_wrote() {
    for_each_pair(|runner, owner| {
        if matches!(owner, Place::Cuda(_) | Place::Hip(_)) {
            not_applicable(
                owner,
                "a replay's copies are not ordered against host functions",
            );
            return Ok(());
        }
        if matches!(caps(owner).capture, devstream::CaptureSupport::None) {
            not_applicable(owner, "no capture");
            return Ok(());
        }
        let device = Stream::new(owner)?;
        let staging = device.alloc_host(LEN)?;
        let on_device = device.alloc(LEN)?;
        let back = device.alloc_host(LEN)?;
        device.begin_capture(CaptureMode::Relaxed)?;
        device.copy_host_to_device(&on_device, 0, &staging, 0, LEN)?;
        device.copy_device_to_host(&back, 0, &on_device, 0, LEN)?;
        let graph = device.end_capture()?;
        let Some((stream, gate)) = held(runner)? else {
            return Ok(());
        };
        stream.launch_host_func_with(&[&staging], |bytes| bytes[0].fill(0x42))?;
        graph.launch(&device)?;
        let done = device.record_event()?;
        assert_stays_false(
            "the replayed copies finished before the host function ran",
            || done.query().unwrap_or(true),
        );
        gate.release();
        sync(&device)?;
        sync(&stream)?;
        assert_eq!(back.to_vec()?, vec![0x42; LEN]);
        Ok(())
    });
}

/// Hostile use: a host function given a buffer is launched from inside another host function
/// (of the runner's place), and the launching stream's handle and the buffer's are dropped
/// while it is pending; it still runs once, after the copy queued before it, and the copy
/// queued after it sees its write. (CUDA and HIP refuse the launch there with
/// `WouldDeadlock`: their host functions may not call the runtime.)
#[test]
fn a_host_function_given_a_buffer_launched_from_a_host_function_with_every_handle_dropped_runs() {
    for_each_pair(|runner, owner| {
        let device = Stream::new(owner)?;
        let Some((outer, gate)) = held(runner)? else {
            return Ok(());
        };
        let staging = Arc::new(device.alloc_host(LEN)?);
        let on_device = device.alloc(LEN)?;
        let back = device.alloc_host(LEN)?;
        device.fill(&on_device, 0, LEN, 0x11)?;
        device.copy_device_to_host(&staging, 0, &on_device, 0, LEN)?;
        let inner = Stream::new(runner)?;
        let seen = Log::new();
        let launched = Log::new();
        let (buffer, log, result) = (Arc::clone(&staging), seen.clone(), launched.clone());
        outer.launch_host_func(move || {
            let log = log.clone();
            let answer = inner.launch_host_func_with(&[&buffer], move |bytes| {
                log.push(bytes[0][0]);
                bytes[0].fill(0x22);
            });
            result.push(format!("{answer:?}"));
        })?;
        gate.release();
        sync(&outer)?;
        drop(outer);
        let answer = launched.entries();
        if matches!(runner, Place::Cuda(_) | Place::Hip(_))
            && answer.len() == 1
            && answer[0].starts_with("Err(WouldDeadlock")
        {
            // CUDA and HIP forbid runtime calls in their own host functions: the launch is
            // refused there, typed, and nothing was submitted.
            not_applicable(runner, "no runtime calls in its own host functions");
            sync(&device)?;
            return Ok(());
        }
        assert_eq!(answer, vec!["Ok(())".to_owned()]);
        // The inner stream and the closure's buffer handle are gone with the host function;
        // the test's own handle goes too once the copy after it is queued.
        device.copy_host_to_device(&on_device, 0, &staging, 0, LEN)?;
        drop(staging);
        device.copy_device_to_host(&back, 0, &on_device, 0, LEN)?;
        sync(&device)?;
        assert_eq!(
            back.to_vec()?,
            vec![0x22; LEN],
            "the copy after it saw its write"
        );
        assert_eq!(
            seen.entries(),
            vec![0x11],
            "it ran once, after the copy before it"
        );
        Ok(())
    });
}

/// A host function given a buffer that panics halfway through writing it: the panic surfaces
/// from its stream's `synchronize` as `HostFuncPanicked`, and the buffer stays usable: host
/// reads and writes of it, copies from and to it and the next host function given it all work
/// and see what was last written (the half the panicking function wrote included).
#[test]
fn a_buffer_given_to_a_host_function_that_panics_stays_usable() {
    for_each_pair(|runner, owner| {
        let stream = Stream::new(runner)?;
        let device = Stream::new(owner)?;
        let staging = device.alloc_host(LEN)?;
        let on_device = device.alloc(LEN)?;
        let back = device.alloc_host(LEN)?;
        stream.launch_host_func_with(&[&staging], |bytes| {
            bytes[0][..LEN / 2].fill(0x66);
            panic!("deliberate panic in a host function given a buffer");
        })?;
        match stream.synchronize() {
            Err(Error::HostFuncPanicked { message, .. }) if message.contains("deliberate") => {}
            other => panic!("the host function's panic should surface, got {other:?}"),
        }
        let mut expected = vec![0u8; LEN];
        expected[..LEN / 2].fill(0x66);
        assert_eq!(staging.to_vec()?, expected, "a host read after the panic");
        staging.write(LEN / 2, &[0x77; LEN / 2])?;
        expected[LEN / 2..].fill(0x77);
        device.copy_host_to_device(&on_device, 0, &staging, 0, LEN)?;
        device.copy_device_to_host(&back, 0, &on_device, 0, LEN)?;
        let seen = Log::new();
        let log = seen.clone();
        stream.launch_host_func_with(&[&staging], move |bytes| {
            log.push(bytes[0].to_vec());
            bytes[0].fill(0x88);
        })?;
        device.copy_host_to_device(&on_device, 0, &staging, 0, LEN)?;
        sync(&stream)?;
        sync(&device)?;
        assert_eq!(
            back.to_vec()?,
            expected,
            "copies of the buffer after the panic"
        );
        assert_eq!(
            seen.entries(),
            vec![expected.clone()],
            "the next host function given it"
        );
        assert_eq!(staging.to_vec()?, vec![0x88; LEN]);
        Ok(())
    });
}

/// How many host functions each thread launches in the concurrent checks below.
const CONCURRENT_LAUNCHES: usize = 500;

/// The result of a launching thread, with a watchdog: a thread stuck in a submission (two
/// submissions waiting for each other) fails the check instead of stalling the suite.
fn joined(thread: std::thread::JoinHandle<Result<()>>, what: &str) -> Result<()> {
    let what = what.to_owned();
    within(
        PATIENCE,
        &format!("{what}: its submissions"),
        move || {
            thread
                .join()
                .unwrap_or_else(|_| panic!("{what}: the thread panicked"))
        },
        || {},
    )
}

/// A thread that launches [`CONCURRENT_LAUNCHES`] host functions on `stream`, each given
/// `buffers` (in reverse order every other round where `alternate`), adding 1 to the first byte
/// of each and counting itself in `ran`.
fn launching(
    stream: &Stream,
    buffers: &[&Arc<devstream::HostBuffer>],
    alternate: bool,
    ran: &Arc<AtomicUsize>,
) -> std::thread::JoinHandle<Result<()>> {
    let stream = stream.clone();
    let buffers: Vec<Arc<devstream::HostBuffer>> = buffers.iter().map(|b| Arc::clone(b)).collect();
    let ran = Arc::clone(ran);
    std::thread::spawn(move || -> Result<()> {
        for round in 0..CONCURRENT_LAUNCHES {
            let mut given: Vec<&devstream::HostBuffer> = buffers.iter().map(|b| &**b).collect();
            if alternate && round % 2 == 1 {
                given.reverse();
            }
            let ran = Arc::clone(&ran);
            stream.launch_host_func_with(&given, move |bytes| {
                for buffer in bytes.iter_mut() {
                    buffer[0] = buffer[0].wrapping_add(1);
                }
                ran.fetch_add(1, Ordering::SeqCst);
            })?;
        }
        Ok(())
    })
}

/// Two threads launch host functions given one buffer on one stream at once: every one runs
/// (the order of the uses of the buffer and the order of the stream agree, so none waits for a
/// use queued behind it on its own stream).
#[test]
fn host_functions_given_one_buffer_launched_on_one_stream_from_two_threads_all_run() {
    for_each_pair(|runner, owner| {
        let stream = Stream::new(runner)?;
        let device = Stream::new(owner)?;
        let buffer = Arc::new(device.alloc_host(LEN)?);
        let ran = Arc::new(AtomicUsize::new(0));
        let launchers: Vec<_> = (0..2)
            .map(|_| launching(&stream, &[&buffer], false, &ran))
            .collect();
        for launcher in launchers {
            joined(launcher, "a launching thread")?;
        }
        sync(&stream)?;
        assert_eq!(ran.load(Ordering::SeqCst), 2 * CONCURRENT_LAUNCHES);
        assert_eq!(
            buffer.to_vec()?[0],
            (2 * CONCURRENT_LAUNCHES % 256) as u8,
            "every host function had the bytes to itself"
        );
        Ok(())
    });
}

/// Two threads launch host functions given the same two buffers at once, one thread listing
/// them in one order and the other in the other, each on a stream of its own: every one runs
/// (the uses of both buffers are registered in one order, so no two host functions wait for
/// each other through different buffers).
#[test]
fn host_functions_given_two_buffers_in_opposite_orders_from_two_threads_all_run() {
    for_each_pair(|runner, owner| {
        let device = Stream::new(owner)?;
        let first = Arc::new(device.alloc_host(LEN)?);
        let second = Arc::new(device.alloc_host(LEN)?);
        let ran = Arc::new(AtomicUsize::new(0));
        let streams = [Stream::new(runner)?, Stream::new(runner)?];
        let launchers = [
            launching(&streams[0], &[&first, &second], false, &ran),
            launching(&streams[1], &[&second, &first], false, &ran),
        ];
        for launcher in launchers {
            joined(launcher, "a launching thread")?;
        }
        for stream in &streams {
            sync(stream)?;
        }
        assert_eq!(ran.load(Ordering::SeqCst), 2 * CONCURRENT_LAUNCHES);
        let expected = (2 * CONCURRENT_LAUNCHES % 256) as u8;
        assert_eq!(
            (first.to_vec()?[0], second.to_vec()?[0]),
            (expected, expected)
        );
        Ok(())
    });
}

/// One thread launches host functions given a buffer on a stream while another copies the
/// buffer to the device on the same stream: everything runs (each copy is queued after the
/// host functions it waits for, each host function after the copies it waits for).
#[test]
fn copies_and_host_functions_given_one_buffer_on_one_stream_from_two_threads_all_run() {
    for_each_pair(|runner, owner| {
        if runner != owner {
            return Ok(());
        }
        let stream = Stream::new(runner)?;
        let buffer = Arc::new(stream.alloc_host(LEN)?);
        let device = Arc::new(stream.alloc(LEN)?);
        let ran = Arc::new(AtomicUsize::new(0));
        let launcher = launching(&stream, &[&buffer], false, &ran);
        let copier = {
            let (stream, buffer, device) =
                (stream.clone(), Arc::clone(&buffer), Arc::clone(&device));
            std::thread::spawn(move || -> Result<()> {
                for _ in 0..CONCURRENT_LAUNCHES {
                    stream.copy_host_to_device(&device, 0, &buffer, 0, LEN)?;
                }
                Ok(())
            })
        };
        joined(launcher, "the launching thread")?;
        joined(copier, "the copying thread")?;
        sync(&stream)?;
        assert_eq!(ran.load(Ordering::SeqCst), CONCURRENT_LAUNCHES);
        Ok(())
    });
}

/// One thread launches, again and again, a graph whose replay copies two host buffers, while
/// another launches host functions given both buffers: everything runs (a launch that orders
/// its replay after the buffers' pending host functions never waits for one that is halfway
/// through registering on them).
#[test]
fn graph_launches_and_host_functions_given_the_graphs_buffers_from_two_threads_all_run() {
    for_each_pair(|runner, owner| {
        if runner != owner || caps(runner).capture == devstream::CaptureSupport::None {
            return Ok(());
        }
        let capturing = Stream::new(runner)?;
        let input = Arc::new(capturing.alloc_host(LEN)?);
        let output = Arc::new(capturing.alloc_host(LEN)?);
        let device = capturing.alloc(LEN)?;
        capturing.begin_capture(CaptureMode::ThreadLocal)?;
        capturing.copy_host_to_device(&device, 0, &input, 0, LEN)?;
        capturing.copy_device_to_host(&output, 0, &device, 0, LEN)?;
        let graph = capturing.end_capture()?;
        let replays = Stream::new(runner)?;
        let launcher = {
            let (graph, replays) = (graph.clone(), replays.clone());
            std::thread::spawn(move || -> Result<()> {
                for _ in 0..CONCURRENT_LAUNCHES {
                    graph.launch(&replays)?;
                }
                Ok(())
            })
        };
        let host = Stream::new(runner)?;
        let ran = Arc::new(AtomicUsize::new(0));
        let giver = launching(&host, &[&input, &output], true, &ran);
        joined(launcher, "the launching thread")?;
        joined(giver, "the host-function thread")?;
        sync(&replays)?;
        sync(&host)?;
        assert_eq!(ran.load(Ordering::SeqCst), CONCURRENT_LAUNCHES);
        Ok(())
    });
}

/// From inside a host function given a buffer, a copy of that buffer and another host function
/// given it are submitted: neither waits for the running host function to be queued (it is
/// running), both run after it, in their submission order, and see what it wrote. (CUDA and
/// HIP refuse submissions inside their own host functions, typed.)
#[test]
fn a_host_function_given_a_buffer_may_copy_it_and_give_it_on_from_inside() {
    for_each_pair(|runner, owner| {
        let stream = Stream::new(runner)?;
        let later = Stream::new(runner)?;
        let device = Stream::new(owner)?;
        let buffer = Arc::new(device.alloc_host(LEN)?);
        let on_device = Arc::new(device.alloc(LEN)?);
        let back = device.alloc_host(LEN)?;
        let answers = Log::new();
        let seen = Log::new();
        let (inner_buffer, inner_device, inner_copier, inner_later) = (
            Arc::clone(&buffer),
            Arc::clone(&on_device),
            device.clone(),
            later.clone(),
        );
        let (log, saw) = (answers.clone(), seen.clone());
        stream.launch_host_func_with(&[&buffer], move |bytes| {
            bytes[0].fill(0x3c);
            let copied = inner_copier.copy_host_to_device(&inner_device, 0, &inner_buffer, 0, LEN);
            log.push(format!("{copied:?}"));
            let saw = saw.clone();
            let given = inner_later.launch_host_func_with(&[&inner_buffer], move |bytes| {
                saw.push(bytes[0].to_vec());
                bytes[0].fill(0x4d);
            });
            log.push(format!("{given:?}"));
        })?;
        sync(&stream)?;
        let answers = answers.entries();
        if answers.iter().any(|a| a.starts_with("Err(WouldDeadlock")) {
            assert!(
                matches!(runner, Place::Cuda(_) | Place::Hip(_))
                    || matches!(owner, Place::Cuda(_) | Place::Hip(_)),
                "refused outside CUDA/HIP: {answers:?}"
            );
            not_applicable(runner, "no runtime calls in its own host functions");
            sync(&later)?;
            sync(&device)?;
            return Ok(());
        }
        assert_eq!(answers, vec!["Ok(())".to_owned(), "Ok(())".to_owned()]);
        sync(&later)?;
        device.copy_device_to_host(&back, 0, &on_device, 0, LEN)?;
        sync(&device)?;
        assert_eq!(back.to_vec()?, vec![0x3c; LEN], "the copy saw its write");
        assert_eq!(
            seen.entries(),
            vec![vec![0x3c; LEN]],
            "the next host function too"
        );
        assert_eq!(buffer.to_vec()?, vec![0x4d; LEN]);
        Ok(())
    });
}
