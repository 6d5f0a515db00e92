//! The destroyed event slots a thread keeps for its next `create_event` on the same device:
//! Paddle's `wait_stream` creates, records, waits on and destroys an event per call, so the
//! slot comes back without a lock. The slots are kept in place in a thread-local (no heap
//! block), and given back to their devices' free lists when the thread exits.

use std::cell::Cell;
use std::sync::OnceLock;

/// A destroyed event's slot (and the event it keeps), kept by the thread that destroyed it
/// for its next `create_event` on that device: no lock to take it back.
#[derive(Clone, Copy)]
pub(crate) struct Spare {
    pub(super) backend: usize,
    pub(super) device: usize,
    pub(super) index: u32,
}

/// The most destroyed events a thread keeps for reuse.
pub(super) const SPARES: usize = 32;

/// What a thread keeps between calls: the event slots it destroyed last, in place (no heap
/// block: the first entries share the cache line of the count, which is all Paddle's
/// create-record-destroy of one event at a time reads). Plain cells: nothing runs between
/// reading and writing them, so no borrow flag is needed.
pub(crate) struct ThreadState {
    len: Cell<usize>,
    spares: [Cell<Spare>; SPARES],
}

impl ThreadState {
    /// A kept event slot of `backend` and `device`, if any (the most recently kept first).
    #[inline(always)]
    pub(super) fn take_spare(&self, backend: usize, device: usize) -> Option<u32> {
        let len = self.len.get().min(SPARES);
        let at = self.spares[..len].iter().rposition(|spare| {
            let spare = spare.get();
            spare.backend == backend && spare.device == device
        })?;
        let taken = self.spares[at].get();
        self.spares[at].set(self.spares[len - 1].get());
        self.len.set(len - 1);
        Some(taken.index)
    }

    /// Keeps `spare`, or answers it when the thread keeps [`SPARES`] already.
    #[inline(always)]
    pub(super) fn keep_spare(&self, spare: Spare) -> Result<(), Spare> {
        let len = self.len.get();
        match self.spares.get(len) {
            Some(cell) => {
                cell.set(spare);
                self.len.set(len + 1);
                Ok(())
            }
            None => Err(spare),
        }
    }
}

impl ThreadState {
    /// Gives every kept slot back to its device's free list.
    fn give_back_all(&self) {
        let len = self.len.get().min(SPARES);
        for spare in self.spares[..len].iter().map(Cell::get) {
            if let Some(rt) = crate::table::RUNTIMES
                .get(spare.backend)
                .and_then(OnceLock::get)
            {
                rt.events.give_index(spare.device, spare.index);
            }
        }
        self.len.set(0);
    }
}

impl Drop for ThreadState {
    fn drop(&mut self) {
        self.give_back_all();
    }
}

/// Gives the calling thread's kept event slots (see [`CustomRuntime::create_event`]) back to their
/// devices' free lists now, as the thread's exit would. For tests that look at which slots
/// are handed out: a test thread's exit may run after the next test has begun.
#[doc(hidden)]
pub fn give_back_kept_events() {
    let _ = THREAD.try_with(ThreadState::give_back_all);
}

/// An unused entry of [`ThreadState::spares`].
const NO_SPARE: Spare = Spare {
    backend: usize::MAX,
    device: usize::MAX,
    index: 0,
};

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            len: Cell::new(0),
            spares: [const { Cell::new(NO_SPARE) }; SPARES],
        }
    };
}

/// Runs `f` with the calling thread's [`ThreadState`] (`None` while the thread's locals are
/// being destroyed: Paddle may destroy streams from its own thread-local destructors).
#[inline(always)]
pub(super) fn with_thread<R>(f: impl FnOnce(Option<&ThreadState>) -> R) -> R {
    let mut f = Some(f);
    let result = THREAD.try_with(|t| f.take().map(|f| f(Some(t))));
    match (result, f) {
        (Ok(Some(r)), _) => r,
        (_, Some(f)) => f(None),
        // `try_with` answers `Ok` only after running its closure, which took `f`.
        (_, None) => unreachable!("with_thread: the closure ran without answering"),
    }
}
