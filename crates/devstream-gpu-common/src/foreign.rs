//! Waits on another backend's work (`DeviceStream::wait_completion`) for CUDA and HIP streams:
//! a device-side wait on a host word.
//!
//! The stream waits (`cuStreamWaitValue64` / `hipStreamWaitValue64`, as flags do) on a word in
//! pinned, device-mapped host memory, taken from the device's pool of wait words (no driver
//! call: see `crate::words`); `devstream_core::foreign::relay` writes the word from the awaited
//! backend's completion path (a CPU worker, wgpu's completion thread, a
//! plug-in callback, or this layer's own completion hub when the awaited work is another
//! CUDA/HIP device's). Nothing on the host waits: the device holds the stream at the word, and
//! no thread is created or blocked per wait. An error of the awaited work is kept in the
//! stream's error slot before the word is written, so the stream's next `synchronize` (which
//! cannot return before the word is written) reports it.
//!
//! Captured, the flag wait is a memory-op node of the graph (a stream memory operation is
//! captured like any other stream work), whose word the graph keeps; the report is a
//! host-function node behind it that gives an error of the awaited work to the stream of each
//! launch. So capture needs captured host functions: without them (`capture_host_funcs` off)
//! the wait answers `Error::Capture` before anything reaches the capture.
//!
//! # Host functions queued behind a wait
//!
//! The runtime starts a host function (`cuLaunchHostFunc`) queued behind a stream memory wait
//! some tens of microseconds after the wait ends: the device reaches it, then signals the
//! runtime's callback thread. A host function is the usual next work of a stream that waits on
//! host-side work (a pipeline's consumer), so while a wait across backends holds the stream, a
//! host function queued on it is run by devstream instead ([`launch_host_func_behind_wait`]):
//! the stream writes a word of its own where the function belongs (a stream memory write) and
//! is then held at a second word. The device's host-function thread ([`HostThread`]) reads the
//! first word, runs the function once it is written, as the runtime's trampoline would (same
//! callback scope, same panic slot), and then writes the second word.
//!
//! - The order is the device's: the first word is written only after everything queued before
//!   the function, whoever queued it; nothing queued after it starts before it returned.
//! - No driver call between the device and the function: the thread reads host memory. Had
//!   the completion hub watched an event recorded there instead, its doorbell (a
//!   `cuLaunchHostFunc` on a notifier stream) can wait in the driver, holding the driver's
//!   lock, for device progress that only such host functions bring, while the hub's sweeper,
//!   which asks events through the same driver, waits for that lock: a deadlock.
//! - When to read: the thread spins (yielding) for [`SPIN`] after the wait in front is released
//!   (its relay kicks the thread, just before writing the wait's word; or the function was
//!   queued after that) and after each function it runs; otherwise it reads with back-off from
//!   [`POLL_FIRST`] (again from there for each function queued) to [`POLL_MAX`] while
//!   functions are pending, and sleeps while none are.
//! - After a device fault the first word is never written and the function never runs, as the
//!   runtime never runs host functions behind a fault.

use crate::flag::GpuFlag;
use crate::hostfn::{in_host_function, run_as_host_function, PanicSlot};
use crate::raw::{CaptureStatus, RawApi};
use crate::stream::GpuStream;
use crate::words::WaitWord;
use devstream_core::{capture, foreign, Completion, DeviceFlag, Error, HostFn, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long the host-function thread reads its words back to back after a kick or a run.
const SPIN: Duration = Duration::from_micros(500);
/// Its first pause between reads outside the spin window.
const POLL_FIRST: Duration = Duration::from_micros(50);
/// Its longest pause between reads.
const POLL_MAX: Duration = Duration::from_millis(2);

/// A stream's waits across backends that hold it now, and the host functions queued behind
/// them that devstream runs (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct HeldWaits {
    /// Waits queued outside a capture and not released yet.
    held: AtomicUsize,
    /// Host functions queued behind such waits (by [`launch_host_func_behind_wait`]) that have
    /// not run yet.
    behind: AtomicUsize,
}

impl HeldWaits {
    /// Whether a wait across backends holds the stream now.
    pub(crate) fn holding(&self) -> bool {
        self.held.load(Ordering::Acquire) > 0
    }
}

/// Holds `stream`'s later work until `awaited` is ready; its error becomes the stream's.
pub(crate) fn wait_completion<A: RawApi>(
    stream: &GpuStream<A>,
    mut awaited: Completion,
) -> Result<()> {
    let device = stream.inner.device;
    if !device.caps.foreign_waits {
        return Err(Error::unsupported("wait_completion", &device.place));
    }
    stream.bind()?;
    let capture = match stream.capture_sequence()? {
        (CaptureStatus::None, _) => None,
        (CaptureStatus::Active, id) => Some(id),
        (CaptureStatus::Invalidated, _) => {
            return Err(Error::capture(
                "wait_completion",
                "the stream's capture was invalidated; end it first",
            ))
        }
    };
    if capture.is_some() && !device.caps.capture_foreign_waits {
        return Err(foreign::refused_in_capture("wait_completion"));
    }
    match foreign::ready_now(&mut awaited) {
        Some(Ok(())) => return Ok(()),
        Some(Err(error)) if capture.is_none() => {
            stream.inner.panic_slot().fail(error);
            return Ok(());
        }
        _ => {}
    }
    if let Some(id) = capture {
        // A graph replays its wait node on every launch: the word must stay written once the
        // awaited work is done, so a captured wait takes a flag of its own (kept by the graph)
        // rather than a pooled word, which is recycled right after its release.
        let gate = GpuFlag::create(device)?;
        let released = gate.clone();
        let outcome = foreign::relay(awaited, move |_| released.set(1));
        gate.wait_on(stream, 1)?;
        return stream.capture_host_call(id, Box::new(|| {}), Some(outcome));
    }
    let word = WaitWord::take(device)?;
    if let Err(error) = word.hold(stream) {
        // No wait was queued: the word goes back (one generation on).
        word.release();
        return Err(error);
    }
    let slot = Arc::clone(stream.inner.panic_slot());
    let waits = Arc::clone(stream.inner.foreign_waits.get_or_init(Arc::default));
    waits.held.fetch_add(1, Ordering::AcqRel);
    foreign::relay(awaited, move |result| {
        if let Err(error) = result {
            slot.fail(error.clone());
        }
        if waits.behind.load(Ordering::Acquire) > 0 {
            // A host function devstream runs is queued behind: its word is written a few
            // microseconds after the stream passes this one.
            device.host_thread.kick();
        }
        waits.held.fetch_sub(1, Ordering::AcqRel);
        word.release();
    });
    Ok(())
}

/// Queues `f` on `stream` (not capturing, context current) as devstream's own host function
/// when a wait across backends holds the stream (see the module documentation): answers
/// `Err(f)` untouched, with nothing queued, where that does not apply or cannot be set up, and
/// the caller launches it through the runtime.
pub(crate) fn launch_host_func_behind_wait<A: RawApi>(
    stream: &GpuStream<A>,
    f: HostFn,
) -> std::result::Result<Result<()>, HostFn> {
    let device = stream.inner.device;
    let Some(waits) = stream.inner.foreign_waits.get() else {
        return Err(f);
    };
    // Inside a host function the runtime forbids the calls below; while a capture is in
    // progress on the device, they could reach it.
    if !waits.holding()
        || in_host_function()
        || device.active_captures.load(Ordering::Acquire) > 0
        || capture::any_forbidding()
        || !device.host_thread.start(device.ordinal)
    {
        return Err(f);
    }
    let (Ok(reached), Ok(done)) = (WaitWord::take(device), WaitWord::take(device)) else {
        return Err(f);
    };
    if reached.signal_on(stream).is_err() {
        // Nothing queued: both words go back.
        reached.release();
        done.release();
        return Err(f);
    }
    if done.hold(stream).is_err() {
        // Only the write is queued, and nothing waits for it: the word stays out of the pool
        // until it is written (a later use must never see this use's value early).
        device.host_thread.forget_when_written(reached);
        done.release();
        return Err(f);
    }
    let waits = Arc::clone(waits);
    waits.behind.fetch_add(1, Ordering::AcqRel);
    device.host_thread.queue(Behind {
        reached,
        done: Some(done),
        f: Some(f),
        slot: Arc::clone(stream.inner.panic_slot()),
        waits,
    });
    Ok(Ok(()))
}

/// A host function queued behind a wait across backends.
struct Behind<A: RawApi> {
    /// Written by the stream when it reaches the function.
    reached: WaitWord<A>,
    /// Holds the stream's later work until the function returned (`None` with no function).
    done: Option<WaitWord<A>>,
    /// `None` for a word that only has to be written before it goes back.
    f: Option<HostFn>,
    slot: Arc<PanicSlot>,
    waits: Arc<HeldWaits>,
}

impl<A: RawApi> Behind<A> {
    /// Runs the function (the stream reached it), then releases the stream.
    fn run(self) {
        let Behind {
            reached,
            done,
            f,
            slot,
            waits,
        } = self;
        if let Some(f) = f {
            run_as_host_function(f, slot);
            waits.behind.fetch_sub(1, Ordering::AcqRel);
        }
        reached.release();
        if let Some(done) = done {
            done.release();
        }
    }
}

/// What the host-function thread is sent.
enum Message<A: RawApi> {
    Queue(Behind<A>),
    /// A wait in front of queued functions was released: read the words back to back.
    Kick,
}

/// A device's thread for the host functions devstream runs behind waits across backends
/// (started on first use; one per device, as the runtime runs a context's host functions on a
/// thread of its own). It runs them one after another, each once its stream reached it.
pub(crate) struct HostThread<A: RawApi> {
    sender: OnceLock<Option<Mutex<Sender<Message<A>>>>>,
}

impl<A: RawApi> Default for HostThread<A> {
    fn default() -> Self {
        HostThread {
            sender: OnceLock::new(),
        }
    }
}

impl<A: RawApi> HostThread<A> {
    /// Whether the thread runs (starting it if needed); `false` where it cannot be started.
    fn start(&self, ordinal: usize) -> bool {
        self.sender
            .get_or_init(|| {
                let (sender, messages) = channel::<Message<A>>();
                std::thread::Builder::new()
                    .name(format!("devstream-hostfn-{ordinal}"))
                    .spawn(move || serve(messages))
                    .ok()
                    .map(|_| Mutex::new(sender))
            })
            .is_some()
    }

    fn send(&self, message: Message<A>) {
        let sent = match self.sender.get().and_then(Option::as_ref) {
            Some(sender) => match sender.lock() {
                Ok(sender) => sender.send(message).map_err(|returned| returned.0),
                Err(_) => Err(message),
            },
            None => Err(message),
        };
        // The thread was started before anything was queued and never stops: should it be
        // gone, a queued function never runs and its stream stays held (a leak, as a host
        // function behind a fault), never a double run.
        if let Err(message) = sent {
            std::mem::forget(message);
        }
    }

    fn queue(&self, behind: Behind<A>) {
        self.send(Message::Queue(behind));
    }

    /// A word whose write is queued with nothing behind it: given back once written.
    fn forget_when_written(&self, reached: WaitWord<A>) {
        self.send(Message::Queue(Behind {
            reached,
            done: None,
            f: None,
            slot: Arc::default(),
            waits: Arc::default(),
        }));
    }

    /// Reads the words back to back for a while (a wait in front of them was released).
    fn kick(&self) {
        if self.sender.get().is_some_and(Option::is_some) {
            self.send(Message::Kick);
        }
    }
}

/// The host-function thread's loop (see the module documentation).
fn serve<A: RawApi>(messages: Receiver<Message<A>>) {
    let mut pending: Vec<Behind<A>> = Vec::new();
    let mut spin_until: Option<Instant> = None;
    let mut pause = POLL_FIRST;
    loop {
        let spinning = spin_until.is_some_and(|until| Instant::now() < until);
        let first = if pending.is_empty() {
            messages.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else if spinning {
            std::thread::yield_now();
            messages.try_recv().map_err(|error| match error {
                std::sync::mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                std::sync::mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            })
        } else {
            messages.recv_timeout(pause)
        };
        let mut take = |message: Message<A>, pending: &mut Vec<Behind<A>>| match message {
            Message::Queue(behind) => {
                // Queued after the wait in front was released: its word comes soon. Otherwise
                // the back-off starts again (it may have grown while other functions waited).
                if !behind.waits.holding() {
                    spin_until = Some(Instant::now() + SPIN);
                }
                pause = POLL_FIRST;
                pending.push(behind);
            }
            Message::Kick => spin_until = Some(Instant::now() + SPIN),
        };
        match first {
            Ok(message) => {
                take(message, &mut pending);
                while let Ok(message) = messages.try_recv() {
                    take(message, &mut pending);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // In queue order: functions of one stream are queued in stream order, and each one's
        // word is written only after the one before it returned.
        let mut ran = false;
        let mut index = 0;
        while index < pending.len() {
            if pending[index].reached.written() {
                pending.remove(index).run();
                ran = true;
            } else {
                index += 1;
            }
        }
        if ran {
            spin_until = Some(Instant::now() + SPIN);
            pause = POLL_FIRST;
        } else if !spinning {
            pause = (pause * 2).min(POLL_MAX);
        }
    }
}
