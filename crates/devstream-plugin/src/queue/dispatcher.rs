//! The dispatcher thread: submits held work when flags change. Streams holding work register
//! here; a flag store (or a new held item) wakes the thread, which pumps every registered
//! stream until none makes progress. The plug-in's own workers are never blocked by devstream.

use super::StreamCore;
use super::{lock, start_thread};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

/// The streams holding work on the host, which the dispatcher pumps.
static BLOCKED: Mutex<Vec<Arc<StreamCore>>> = Mutex::new(Vec::new());
/// How many [`BLOCKED`] holds: read without its lock by every flag store.
static BLOCKED_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Whether any stream holds work behind a flag or an event (a flag store then wakes the
/// dispatcher).
pub(super) fn any_blocked() -> bool {
    BLOCKED_COUNT.load(Ordering::SeqCst) > 0
}

/// Registers a stream that holds work (pumped by the dispatcher until it holds none).
pub(super) fn register_blocked(core: Arc<StreamCore>) {
    let mut blocked = lock(&BLOCKED);
    blocked.push(core);
    BLOCKED_COUNT.store(blocked.len(), Ordering::SeqCst);
}

/// Forgets a stream that holds no more work.
pub(super) fn unregister_blocked(id: u64) {
    let mut blocked = lock(&BLOCKED);
    blocked.retain(|core| core.id != id);
    BLOCKED_COUNT.store(blocked.len(), Ordering::SeqCst);
}

fn dispatcher() -> &'static Mutex<Option<Sender<()>>> {
    static DISPATCHER: OnceLock<Mutex<Option<Sender<()>>>> = OnceLock::new();
    DISPATCHER.get_or_init(|| start_thread("dispatcher", dispatch))
}

/// Wakes the dispatcher (started on first use) to pump the streams holding work.
pub(super) fn wake_dispatcher() {
    if let Some(sender) = lock(dispatcher()).as_ref() {
        let _ = sender.send(());
    }
}

fn dispatch(wakes: Receiver<()>) {
    while wakes.recv().is_ok() {
        while wakes.try_recv().is_ok() {}
        loop {
            let blocked: Vec<Arc<StreamCore>> = lock(&BLOCKED).clone();
            let mut progressed = false;
            for core in blocked {
                progressed |= core.pump();
            }
            if !progressed {
                break;
            }
        }
    }
}
