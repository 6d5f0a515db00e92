//! [`Completion`] futures on plug-in places.
//!
//! * Every completion waits on a plug-in event: the user's (`Event::completion`) or one recorded
//!   at the end of the stream (`Stream::completion`, with the stream's first error). The event
//!   is watched by one notifier thread per plug-in runtime, which asks `query_event` for every
//!   pending future in a round and backs off (20 µs doubling to 2 ms) while nothing completes.
//!   The ABI has no event callback, so asking is the only way to learn of a completion; one
//!   thread per runtime (never one per future), and a runtime without `query_event` blocks only
//!   its own notifier in `synchronize_event`.
//! * Where the plug-in has `stream_add_callback`, awaited records are preceded by a callback
//!   ([`Callback::Nudge`](crate::queue::Callback)) that wakes the notifier once the work before
//!   the record is done; the notifier then asks at once, and again (yielding in between) for a
//!   short while if the event is not complete yet (the plug-in marks the record done only after
//!   the callback has returned), before it restarts its back-off. Without a nudge, an awaited
//!   completion that ends during a long pause is seen only at the pause's end.
//!   - The nudge goes *before* the record, never after it: the future is filled once the event
//!     is complete, so the callback has returned by then. A callback after the record (or one
//!     that filled the future itself) would still be running when the future is ready, and a
//!     `query` of the stream right after would answer false although all submitted work is done.
//!   - So a nudge can only precede a record that has not reached the plug-in yet. Which records
//!     get one: a stream completion's own record always; the record of an event whose completion
//!     is asked while the record is still held on the host (behind a flag or an event); and every
//!     later record of a devstream event (`record`, `record_event`) on a stream once a completion
//!     of one of its events was asked (the stream is *watched*, for good). Streams whose
//!     completions nobody awaits pay two atomic loads per record; a watched stream pays one
//!     callback per record, awaited or not.
//!   - A record made during a capture gets no nudge (the callback would become part of the
//!     graph).
//!   - Polling faster instead (a lower cap on the pause while futures are pending) would keep
//!     a thread per runtime busy for as long as any future is pending and still lag by up to
//!     the cap. Recording a fresh nudged event at `completion()` time when the awaited record is
//!     still the stream's latest would need every record to note itself as the latest (a cost
//!     on every record) and would add work to the stream from `completion()`.
//! * While a question may break a capture in progress (the reaper's rules: a `Global`-mode
//!   capture anywhere, the event's stream capturing, the event recorded into a capture), the
//!   notifier asks nothing about that event and resumes after it.

use crate::queue::{lock, RawEvent};
use devstream_core::{Completer, Completion, Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The shortest pause of a notifier between rounds.
const MIN_PAUSE: Duration = Duration::from_micros(20);
/// The longest pause of a notifier between rounds.
const MAX_PAUSE: Duration = Duration::from_millis(2);
/// How long a notifier keeps asking (yielding in between) after a nudge while no watched
/// event has completed: the event behind the nudge completes once the callback returns.
const AFTER_NUDGE: Duration = Duration::from_micros(20);

/// Nudges sent to notifiers so far, in this process (see [`nudges_sent`]).
static NUDGES_SENT: AtomicU64 = AtomicU64::new(0);

/// How many nudges plug-in callbacks have sent to completion notifiers in this process: a test
/// hook, to check that a completion is announced by a nudge rather than found by polling.
#[doc(hidden)]
pub fn nudges_sent() -> u64 {
    NUDGES_SENT.load(Ordering::SeqCst)
}

/// One pending future.
struct Watch {
    raw: Arc<RawEvent>,
    /// The stream's first error (stream completions), reported as `synchronize` reports it.
    errors: Option<crate::queue::StreamErrors>,
    completer: Completer,
}

impl Watch {
    fn finish(self, result: Result<()>) {
        let result = result.and_then(|()| match &self.errors {
            Some(errors) => errors.peek().map_or(Ok(()), Err),
            None => Ok(()),
        });
        self.completer.complete(result);
    }
}

/// What a notifier thread receives.
enum Message {
    /// A future to watch.
    Watch(Watch),
    /// Ask now, and restart the back-off (a stream callback saw work finish).
    Nudge,
}

/// The notifier threads, by runtime index.
fn notifiers() -> &'static Mutex<HashMap<usize, Sender<Message>>> {
    static NOTIFIERS: OnceLock<Mutex<HashMap<usize, Sender<Message>>>> = OnceLock::new();
    NOTIFIERS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Wakes runtime `runtime`'s notifier, if it has one (from a plug-in callback: no plug-in call).
pub(crate) fn nudge(runtime: usize) {
    let sender = lock(notifiers()).get(&runtime).cloned();
    if let Some(sender) = sender {
        // Counted before it is sent: the notifier may fill a future as soon as it is woken.
        NUDGES_SENT.fetch_add(1, Ordering::SeqCst);
        let _ = sender.send(Message::Nudge);
    }
}

/// A future for the work `raw` stands for (`Event::completion`), announced by a nudge where
/// the record has not reached the plug-in yet.
pub(crate) fn completion_of(raw: Arc<RawEvent>) -> Completion {
    if !raw.is_complete() {
        raw.completion_awaited();
    }
    let runtime = raw.runtime_index();
    watch(raw, runtime, None)
}

/// A future for the work `raw` stands for; `errors`: the stream's first error to report.
pub(crate) fn watch(
    raw: Arc<RawEvent>,
    runtime: usize,
    errors: Option<crate::queue::StreamErrors>,
) -> Completion {
    if raw.is_complete() {
        let result = match &errors {
            Some(errors) => errors.peek().map_or(Ok(()), Err),
            None => Ok(()),
        };
        return Completion::ready(result);
    }
    let (completion, completer) = Completion::pending();
    let watch = Watch {
        raw,
        errors,
        completer,
    };
    let mut notifiers = lock(notifiers());
    let sender = match notifiers.get(&runtime) {
        Some(sender) => sender.clone(),
        None => {
            let (sender, receiver) = channel::<Message>();
            let spawned = std::thread::Builder::new()
                .name(format!("devstream-plugin notifier {runtime}"))
                .spawn(move || run(receiver));
            if let Err(error) = spawned {
                drop(notifiers);
                watch.finish(Err(Error::Plugin {
                    plugin: format!("runtime {runtime}"),
                    reason: format!("cannot start the completion notifier thread: {error}"),
                }));
                return completion;
            }
            notifiers.insert(runtime, sender.clone());
            sender
        }
    };
    drop(notifiers);
    if let Err(std::sync::mpsc::SendError(Message::Watch(returned))) =
        sender.send(Message::Watch(watch))
    {
        returned.finish(Err(Error::Plugin {
            plugin: format!("runtime {runtime}"),
            reason: "the completion notifier thread is gone".into(),
        }));
    }
    completion
}

fn run(watches: Receiver<Message>) {
    let mut pending: Vec<Watch> = Vec::new();
    let mut pause = MIN_PAUSE;
    loop {
        let next = if pending.is_empty() {
            watches.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            watches.recv_timeout(pause)
        };
        let mut nudged = false;
        let mut take = |message: Message, pending: &mut Vec<Watch>| match message {
            Message::Watch(watch) => pending.push(watch),
            Message::Nudge => nudged = true,
        };
        match next {
            Ok(message) => {
                take(message, &mut pending);
                while let Ok(message) = watches.try_recv() {
                    take(message, &mut pending);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let before = pending.len();
        pending = settle_round(pending);
        if nudged && pending.len() == before && !pending.is_empty() {
            // The nudged record is done once its callback has returned: ask again shortly.
            let since = Instant::now();
            while pending.len() == before && since.elapsed() < AFTER_NUDGE {
                std::thread::yield_now();
                pending = settle_round(pending);
            }
        }
        pause = if pending.len() < before || nudged {
            MIN_PAUSE
        } else {
            (pause * 2).min(MAX_PAUSE)
        };
    }
}

/// Asks about every pending watch once, filling the futures whose events are complete (and
/// dropping those abandoned); answers the watches still pending.
fn settle_round(pending: Vec<Watch>) -> Vec<Watch> {
    let mut still = Vec::with_capacity(pending.len());
    for watch in pending {
        if watch.completer.is_abandoned() {
            // The future was dropped: release the event (the reaper destroys it).
            continue;
        }
        match watch.raw.settle() {
            Some(result) => watch.finish(result),
            None => still.push(watch),
        }
    }
    still
}
