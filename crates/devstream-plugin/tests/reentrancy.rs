//! A plug-in function that calls back into devstream (as Paddle plug-ins do from their
//! functions) on another stream than the one it serves, on two threads at once: each thread
//! is inside a plug-in call made for one stream when it submits to the other. Neither may wait
//! for the other (the faulty plug-in's `MODE_REENTRANT` calls the test's hook from inside
//! `record_event` and `stream_add_callback`; a barrier in the hook forces the interleaving).

mod common;

use common::*;
use devstream_core::{DeviceEvent, DeviceStream, Result};
use devstream_plugin::{PluginEvent, PluginStream};
use devstream_test_plugin_faulty::{MODE_REENTRANT, REENTRY_ADD_CALLBACK, REENTRY_RECORD_EVENT};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};

/// What a thread does the next time the plug-in calls the hook with a given call.
struct Reentry {
    call: u32,
    then: Box<dyn FnOnce()>,
}

thread_local! {
    static REENTRY: RefCell<Option<Reentry>> = const { RefCell::new(None) };
}

/// The plug-in's hook: runs this thread's pending re-entry if the call is the one it waits for.
unsafe extern "C" fn hook(call: u32) {
    let pending = REENTRY.with(|slot| {
        let mut slot = slot.borrow_mut();
        match slot.as_ref() {
            Some(reentry) if reentry.call == call => slot.take(),
            _ => None,
        }
    });
    if let Some(reentry) = pending {
        (reentry.then)();
    }
}

/// Sets the hook in `copy` (the faulty plug-in's exported setter).
fn set_hook(copy: &Faulty, hook: Option<unsafe extern "C" fn(u32)>) {
    let library = copy.library.as_ref().expect("the copy is loaded");
    // SAFETY: the setter's signature is `void(void (*)(unsigned))`.
    let set = unsafe {
        library.get::<unsafe extern "C" fn(Option<unsafe extern "C" fn(u32)>)>(
            b"devstream_test_plugin_faulty_set_reentry_hook\0",
        )
    }
    .unwrap();
    // SAFETY: a plain store of a function that outlives the plug-in's use of it.
    unsafe { set(hook) };
}

/// Where a thread's re-entry leaves its answer.
type Answer = Arc<Mutex<Option<Result<PluginEvent>>>>;

/// Runs `outer` on a new thread whose plug-in call `call` (made by `outer`) first waits at
/// `barrier` and then runs `reentry`, whose answer is kept in the returned slot.
fn reentering_thread(
    call: u32,
    barrier: Arc<Barrier>,
    reentry: impl FnOnce() -> Result<PluginEvent> + 'static + Send,
    outer: impl FnOnce() -> Result<()> + Send + 'static,
) -> (std::thread::JoinHandle<Result<()>>, Answer) {
    let answer = Arc::new(Mutex::new(None));
    let slot = answer.clone();
    let thread = std::thread::spawn(move || {
        REENTRY.with(|pending| {
            *pending.borrow_mut() = Some(Reentry {
                call,
                then: Box::new(move || {
                    barrier.wait();
                    *slot.lock().unwrap() = Some(reentry());
                }),
            })
        });
        outer()
    });
    (thread, answer)
}

#[test]
fn plug_in_calls_on_two_threads_that_each_submit_to_the_other_ones_stream_do_not_deadlock() {
    let copy = Faulty::unique(MODE_REENTRANT);
    let place = copy.load().unwrap().places[0].clone();
    set_hook(&copy, Some(hook));
    let (x, y) = (stream(&place), stream(&place));
    let ran = Arc::new(AtomicUsize::new(0));
    let (recorded_on_y, recorded_on_x) = watchdog("the crossed re-entries", 60, {
        let (x, y, ran) = (x.clone(), y.clone(), ran.clone());
        move || {
            let barrier = Arc::new(Barrier::new(2));
            // Inside `record_event` for X, a record on Y ...
            let (first, on_y) = reentering_thread(
                REENTRY_RECORD_EVENT,
                barrier.clone(),
                {
                    let y = y.clone();
                    move || y.record_event()
                },
                {
                    let x = x.clone();
                    move || x.record_event().map(drop)
                },
            );
            // ... while inside `stream_add_callback` for Y, a record on X.
            let (second, on_x) = reentering_thread(
                REENTRY_ADD_CALLBACK,
                barrier,
                move || x.record_event(),
                move || {
                    y.launch_host_func(Box::new(move || {
                        ran.fetch_add(1, Ordering::SeqCst);
                    }))
                },
            );
            first.join().unwrap().unwrap();
            second.join().unwrap().unwrap();
            let taken = |slot: Answer| {
                slot.lock()
                    .unwrap()
                    .take()
                    .expect("the plug-in called the hook")
            };
            (taken(on_y), taken(on_x))
        }
    });
    set_hook(&copy, None);
    let (recorded_on_y, recorded_on_x) = (recorded_on_y.unwrap(), recorded_on_x.unwrap());
    x.synchronize().unwrap();
    y.synchronize().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the host function ran once");
    assert!(recorded_on_y.query().unwrap(), "the record on Y is done");
    assert!(recorded_on_x.query().unwrap(), "the record on X is done");
}

#[test]
fn a_host_functions_query_waits_for_no_work_submitted_after_the_call() {
    use devstream_test_plugin_faulty::{
        MODE_QUEUED_CALLBACKS_NO_QUERIES, REENTRY_SYNCHRONIZE_STREAM,
    };
    // A plug-in without `query_stream`: a stream's `query` is answered by waiting for its work.
    // Inside a host function that wait must cover the work submitted before the call only:
    // what another thread submits meanwhile may be queued behind the host function itself
    // (here the plug-in runs queued callbacks one after the other, so work queued after the
    // host function cannot run before it returns).
    let copy = Faulty::unique(MODE_QUEUED_CALLBACKS_NO_QUERIES);
    let place = copy.load().unwrap().places[0].clone();
    set_hook(&copy, Some(hook));
    let (a, b) = (stream(&place), stream(&place));
    let answer: Arc<Mutex<Option<Result<bool>>>> = Arc::new(Mutex::new(None));
    let copy = watchdog("a host function's query of another stream", 60, {
        let answer = answer.clone();
        move || {
            let queried = b.clone();
            let slot = answer.clone();
            a.launch_host_func(Box::new(move || {
                *slot.lock().unwrap() = Some(queried.query());
            }))
            .unwrap();
            // Should the query wait for B's work in the plug-in, B is given work then (as
            // another thread would submit it at that moment), which only runs once the host
            // function has returned.
            REENTRY.with(|pending| {
                *pending.borrow_mut() = Some(Reentry {
                    call: REENTRY_SYNCHRONIZE_STREAM,
                    then: Box::new(move || b.launch_host_func(Box::new(|| {})).unwrap()),
                })
            });
            assert!(copy.run_queued() >= 1, "the host function was queued");
            copy.run_queued();
            copy
        }
    });
    set_hook(&copy, None);
    let answer = answer
        .lock()
        .unwrap()
        .take()
        .expect("the host function ran");
    assert!(answer.is_ok(), "{answer:?}");
}

/// On a plug-in without asynchronous copies (devstream copies after `synchronize_stream`, inside
/// the stream's submission lock) whose `synchronize_stream` waits until the stream's queued
/// host functions ran: queues `host_fn` on a new stream, has another thread copy to the stream
/// (it then holds the submission lock and waits in the plug-in for `host_fn`), runs `host_fn`
/// on this thread, and once the copy returned runs `then` and synchronizes the stream (running
/// the copy's own callbacks). Fails when any of it hangs.
fn behind_a_synchronous_copy(
    what: &str,
    host_fn: impl FnOnce(PluginStream, devstream_core::Place) -> devstream_core::HostFn,
    then: impl FnOnce() + Send + 'static,
) {
    use devstream_test_plugin_faulty::{
        MODE_QUEUED_CALLBACKS_SYNCHRONOUS_COPIES, REENTRY_SYNCHRONIZE_STREAM,
    };
    use std::sync::mpsc::channel;
    let copy = Faulty::unique(MODE_QUEUED_CALLBACKS_SYNCHRONOUS_COPIES);
    let place = copy.load().unwrap().places[0].clone();
    set_hook(&copy, Some(hook));
    let s = stream(&place);
    let buffer = s.alloc(16).unwrap();
    let f = host_fn(s.clone(), place);
    let copy = watchdog(what, 60, move || {
        s.launch_host_func(f).unwrap();
        let (inside, inside_rx) = channel();
        let copier = std::thread::spawn(move || {
            REENTRY.with(|pending| {
                *pending.borrow_mut() = Some(Reentry {
                    call: REENTRY_SYNCHRONIZE_STREAM,
                    then: Box::new(move || inside.send(()).unwrap()),
                })
            });
            s.copy_from_host(&buffer, 0, &[7; 16]).map(|()| s)
        });
        // The copying thread holds the submission lock and waits in the plug-in for the host
        // function, which runs here now.
        inside_rx.recv().unwrap();
        assert_eq!(copy.run_queued(), 1, "the host function was queued");
        let s = copier.join().unwrap().unwrap();
        then();
        let synchronizer = std::thread::spawn(move || s.synchronize());
        while !synchronizer.is_finished() {
            copy.run_queued();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        synchronizer.join().unwrap().unwrap();
        copy
    });
    set_hook(&copy, None);
}

#[test]
fn a_host_function_synchronizing_its_stream_while_a_synchronous_copy_waits_for_it_is_refused() {
    // The host function synchronizes its own stream while the copy waits for it: it must not
    // wait for the submission lock (whose holder waits for it), and it cannot wait for its own
    // stream's work anyway.
    let answer: Arc<Mutex<Option<Result<()>>>> = Arc::new(Mutex::new(None));
    let slot = answer.clone();
    behind_a_synchronous_copy(
        "a synchronous copy behind a self-synchronizing host function",
        |own, _| Box::new(move || *slot.lock().unwrap() = Some(own.synchronize())),
        || {},
    );
    let answer = answer
        .lock()
        .unwrap()
        .take()
        .expect("the host function ran");
    assert!(
        matches!(answer, Err(devstream_core::Error::WouldDeadlock { .. })),
        "{answer:?}"
    );
}

#[test]
fn a_host_function_beginning_a_capture_while_a_synchronous_copy_waits_for_it_is_refused() {
    use devstream_core::{CaptureMode, DeviceBackend, DeviceFlag};
    use devstream_plugin::PluginBackend;
    // The host function first queues a flag wait on its stream (held on the host: another
    // thread holds the submissions) and then begins a capture there, which must hand the held
    // wait to the plug-in first. It must not wait for the submission lock either.
    // The flag wait's answer, then begin_capture's.
    type Answers = (Result<()>, Result<()>);
    let answer: Arc<Mutex<Option<Answers>>> = Arc::new(Mutex::new(None));
    let slot = answer.clone();
    let flag = Arc::new(OnceLock::new());
    let gate = Arc::clone(&flag);
    behind_a_synchronous_copy(
        "a synchronous copy behind a host function that begins a capture",
        move |own, place| {
            let flag = gate
                .get_or_init(|| PluginBackend::new_flag(&place).unwrap())
                .clone();
            Box::new(move || {
                let waited = own.wait_flag(&flag, 1);
                *slot.lock().unwrap() = Some((waited, own.begin_capture(CaptureMode::Relaxed)));
            })
        },
        // The held wait is passed; the stream's later work (the copy's callbacks) runs.
        move || flag.get().expect("made with the host function").set(1),
    );
    let (waited, begun) = answer
        .lock()
        .unwrap()
        .take()
        .expect("the host function ran");
    assert!(waited.is_ok(), "{waited:?}");
    assert!(
        matches!(begun, Err(devstream_core::Error::Capture { .. })),
        "{begun:?}"
    );
}
