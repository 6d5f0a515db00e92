//! What waits for a position of a stream's work: completion futures, streams blocked behind it
//! and threads in `synchronize`, kept in one list that the worker completing a task releases.

use super::*;

/// A pending [`Completion`] of a stream's work up to task `seq`.
pub(super) struct CompletionWaiter {
    seq: u64,
    /// Whether the result carries the stream's first error (stream completions) or not (event
    /// completions, like `Event::synchronize`).
    with_error: bool,
    completer: Completer,
}

impl CompletionWaiter {
    fn result(&self, state: &StreamState) -> Result<()> {
        first_error_up_to(state, self.seq, self.with_error)
    }
}

pub(super) fn first_error_up_to(state: &StreamState, seq: u64, with_error: bool) -> Result<()> {
    match &state.error {
        Some((raised, error)) if with_error && *raised <= seq => Err(error.clone()),
        _ => Ok(()),
    }
}

impl StreamInner {
    fn update_min_waiter(&self, state: &StreamState) {
        let min = state
            .thread_waiters
            .iter()
            .map(|w| w.0)
            .chain(state.stream_waiters.iter().map(|w| w.0))
            .chain(state.completion_waiters.iter().map(|w| w.seq))
            .min()
            .unwrap_or(u64::MAX);
        self.min_waiter.store(min, Ordering::SeqCst);
    }

    /// Wakes the threads and streams waiting for a completed count that has been reached.
    pub(super) fn release_waiters(&self) {
        let mut woken = Vec::new();
        let mut completed = Vec::new();
        {
            let mut state = lock(&self.state);
            let done = self.completed.load(Ordering::SeqCst);
            state.thread_waiters.retain(|(seq, thread)| {
                if *seq <= done {
                    thread.unpark();
                    false
                } else {
                    true
                }
            });
            let mut index = 0;
            while index < state.stream_waiters.len() {
                if state.stream_waiters[index].0 <= done {
                    woken.push(state.stream_waiters.swap_remove(index).1);
                } else {
                    index += 1;
                }
            }
            let mut index = 0;
            while index < state.completion_waiters.len() {
                if state.completion_waiters[index].seq <= done {
                    let waiter = state.completion_waiters.swap_remove(index);
                    let result = waiter.result(&state);
                    completed.push((waiter.completer, result));
                } else {
                    index += 1;
                }
            }
            self.update_min_waiter(&state);
        }
        for stream in woken {
            stream.wake();
        }
        // Wakers run user (executor) code: never under the stream lock.
        for (completer, result) in completed {
            completer.complete(result);
        }
    }

    /// A future for "completed ≥ `seq`": registered in the waiter list that the worker's
    /// `complete_one` releases (the same path that unparks threads blocked in `synchronize`).
    /// With `with_error`, its result is the first unreported error of tasks up to `seq`, as
    /// `synchronize` would return it (observed, not taken).
    pub(crate) fn completion_at(&self, seq: u64, with_error: bool) -> Completion {
        if self.completed.load(Ordering::Acquire) >= seq {
            return Completion::ready(self.result_up_to(seq, with_error));
        }
        let (completion, completer) = Completion::pending();
        let mut entry = Some(CompletionWaiter {
            seq,
            with_error,
            completer,
        });
        let mut withdrawn = None;
        let registered = self.register(
            seq,
            |state| {
                if state.completion_waiters.len() >= state.prune_at {
                    // Dropped futures leave abandoned entries: drop them in amortised O(1).
                    state
                        .completion_waiters
                        .retain(|w| !w.completer.is_abandoned());
                    state.prune_at = (state.completion_waiters.len() * 2).max(PRUNE_MIN);
                }
                state.completion_waiters.extend(entry.take());
            },
            |state| {
                // Nobody else took the lock since `add`: the entry is the last one.
                withdrawn = state.completion_waiters.pop();
                withdrawn.is_some()
            },
        );
        if !registered {
            if let Some(waiter) = entry.or(withdrawn) {
                waiter
                    .completer
                    .complete(self.result_up_to(seq, with_error));
            }
        }
        completion
    }

    /// Completion futures registered and not completed yet (tests).
    #[cfg(test)]
    pub(crate) fn completion_waiters(&self) -> usize {
        lock(&self.state).completion_waiters.len()
    }

    /// The result of the work up to task `seq` (complete): the first unreported error among it
    /// when `with_error`.
    fn result_up_to(&self, seq: u64, with_error: bool) -> Result<()> {
        if !with_error || !self.has_error.load(Ordering::Acquire) {
            return Ok(());
        }
        first_error_up_to(&lock(&self.state), seq, with_error)
    }

    /// Registers a waiter for "completed ≥ `seq`" under the lock. Returns `false` (with the
    /// registration withdrawn) if that is already true.
    ///
    /// The registration publishes `min_waiter` and then reads `completed`; the worker publishes
    /// `completed` and then reads `min_waiter` (all SeqCst): one of them sees the other, so a
    /// wake-up is never lost. Whoever takes the entry out of the list (under the lock) wakes.
    fn register(
        &self,
        seq: u64,
        add: impl FnOnce(&mut StreamState),
        withdraw: impl FnOnce(&mut StreamState) -> bool,
    ) -> bool {
        let mut state = lock(&self.state);
        if self.completed.load(Ordering::SeqCst) >= seq {
            return false;
        }
        add(&mut state);
        if self.min_waiter.load(Ordering::SeqCst) > seq {
            self.min_waiter.store(seq, Ordering::SeqCst);
        }
        if self.completed.load(Ordering::SeqCst) >= seq && withdraw(&mut state) {
            self.update_min_waiter(&state);
            return false;
        }
        true
    }

    /// Registers a blocked stream to be woken when this one has completed `seq` tasks.
    /// Returns `false` (registering nothing) if it already has.
    pub(crate) fn add_stream_waiter(&self, seq: u64, waiter: &Arc<StreamInner>) -> bool {
        self.register(
            seq,
            |state| state.stream_waiters.push((seq, waiter.clone())),
            |state| {
                let found = state
                    .stream_waiters
                    .iter()
                    .position(|(s, w)| *s == seq && Arc::ptr_eq(w, waiter));
                found.map(|i| state.stream_waiters.swap_remove(i)).is_some()
            },
        )
    }

    /// Blocks the calling thread until `seq` tasks have completed: a short bounded backoff,
    /// then it parks until the worker unparks it.
    pub(crate) fn wait_until(&self, seq: u64) {
        let mut backoff = Backoff::new();
        while self.completed.load(Ordering::Acquire) < seq {
            if backoff.is_completed() {
                let me = std::thread::current();
                let id = me.id();
                let registered = self.register(
                    seq,
                    |state| state.thread_waiters.push((seq, me)),
                    |state| {
                        let found = state
                            .thread_waiters
                            .iter()
                            .position(|(s, t)| *s == seq && t.id() == id);
                        found.map(|i| state.thread_waiters.swap_remove(i)).is_some()
                    },
                );
                if registered {
                    while self.completed.load(Ordering::Acquire) < seq {
                        std::thread::park();
                    }
                }
                return;
            }
            backoff.snooze();
        }
    }
}
