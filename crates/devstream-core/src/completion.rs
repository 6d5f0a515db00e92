//! [`Completion`]: stream work as a [`Future`], with no async runtime and no thread per future.
//!
//! A backend makes a pending completion with [`Completion::pending`], which also returns the
//! [`Completer`] its own completion path (a counter's waiter list, a host function, a
//! submitted-work-done callback, a notifier stream) fills exactly once. Cases that are decided at
//! once (a never-recorded event, work already done, an error) use [`Completion::ready`].
//!
//! ```
//! use devstream_core::{Completion, Error};
//! use std::future::Future;
//! use std::pin::Pin;
//! use std::sync::Arc;
//! use std::task::{Context, Poll, Wake, Waker};
//!
//! struct Noop;
//! impl Wake for Noop {
//!     fn wake(self: Arc<Self>) {}
//! }
//! let waker = Waker::from(Arc::new(Noop));
//! let mut cx = Context::from_waker(&waker);
//!
//! let (mut done, completer) = Completion::pending();
//! assert!(Pin::new(&mut done).poll(&mut cx).is_pending());
//! completer.complete(Err(Error::NotReady)); // the backend's completion path
//! assert_eq!(Pin::new(&mut done).poll(&mut cx), Poll::Ready(Err(Error::NotReady)));
//! // Polling again gives the same result.
//! assert_eq!(Pin::new(&mut done).poll(&mut cx), Poll::Ready(Err(Error::NotReady)));
//!
//! let mut now = Completion::ready(Ok(()));
//! assert_eq!(Pin::new(&mut now).poll(&mut cx), Poll::Ready(Ok(())));
//! ```

use crate::{Error, Result};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The state a [`Completion`] and its [`Completer`] share.
struct Shared {
    /// Set (with release) once `slot.result` is filled: the lock-free fast path of `poll`.
    done: AtomicBool,
    slot: Mutex<Slot>,
}

struct Slot {
    result: Option<Result<()>>,
    /// The waker of the latest pending poll.
    waker: Option<Waker>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        // A poisoned slot only means a waker's clone or drop panicked; the data is whole.
        crate::sync::lock(&self.slot)
    }
}

enum State {
    Ready(Result<()>),
    Pending(Arc<Shared>),
}

/// Work on a device stream as a future: ready with `Ok(())` once the work is done, or with the
/// error that `synchronize` would report.
///
/// Made by `Event::completion` / `Stream::completion` (and the backend traits'
/// [`DeviceEvent::completion`](crate::DeviceEvent::completion) /
/// [`DeviceStream::completion`](crate::DeviceStream::completion)). It is `Send + Unpin +
/// 'static`: it holds what it needs (no borrow of the event or stream), so it can be spawned or
/// moved between tasks. It depends on no async runtime: the backend's own completion path calls
/// the waker of the latest poll, from whichever thread it runs on.
///
/// * Polling after it is ready returns the same result again (the error is cloned).
/// * Dropping it before it is ready is harmless: nothing changes on the stream, and the backend's
///   pending notification later finds nobody listening and releases what it held.
/// * If the waker changes between polls, the latest one is woken.
#[must_use = "a Completion does nothing unless polled or awaited"]
pub struct Completion {
    state: State,
}

/// The backend's half of a pending [`Completion`]: fills it exactly once.
///
/// Dropping a completer without calling [`complete`](Completer::complete) completes the future
/// with [`Error::Abandoned`], so a future can never hang because its backend lost the
/// notification.
pub struct Completer {
    shared: Option<Arc<Shared>>,
}

impl Completion {
    /// A completion that is ready at once with `result`.
    pub fn ready(result: Result<()>) -> Completion {
        Completion {
            state: State::Ready(result),
        }
    }

    /// A pending completion and the completer that ends it.
    pub fn pending() -> (Completion, Completer) {
        let shared = Arc::new(Shared {
            done: AtomicBool::new(false),
            slot: Mutex::new(Slot {
                result: None,
                waker: None,
            }),
        });
        (
            Completion {
                state: State::Pending(shared.clone()),
            },
            Completer {
                shared: Some(shared),
            },
        )
    }

    /// Whether the result is known (a poll would return `Ready`). Never blocks on the device.
    pub fn is_ready(&self) -> bool {
        match &self.state {
            State::Ready(_) => true,
            State::Pending(shared) => shared.done.load(Ordering::Acquire),
        }
    }
}

impl Future for Completion {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let shared = match &self.state {
            State::Ready(result) => return Poll::Ready(result.clone()),
            State::Pending(shared) => shared.clone(),
        };
        let result = if shared.done.load(Ordering::Acquire) {
            shared.lock().result.clone()
        } else {
            let mut slot = shared.lock();
            match &slot.result {
                Some(result) => Some(result.clone()),
                None => {
                    match &mut slot.waker {
                        Some(waker) if waker.will_wake(cx.waker()) => {}
                        other => *other = Some(cx.waker().clone()),
                    }
                    None
                }
            }
        };
        match result {
            Some(result) => {
                // Keep only the result: the shared state is released now.
                self.state = State::Ready(result.clone());
                Poll::Ready(result)
            }
            None => Poll::Pending,
        }
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            State::Ready(result) => f.debug_tuple("Completion::Ready").field(result).finish(),
            State::Pending(shared) => f
                .debug_struct("Completion::Pending")
                .field("done", &shared.done.load(Ordering::Relaxed))
                .finish(),
        }
    }
}

impl Completer {
    /// Fills the completion with `result` and wakes the task that polled it last (the waker is
    /// called after the state's lock is released). Does nothing more if the completion was
    /// dropped.
    pub fn complete(mut self, result: Result<()>) {
        if let Some(shared) = self.shared.take() {
            fill(&shared, result);
        }
    }

    /// Whether the [`Completion`] was dropped: then completing it only releases the state, and
    /// a backend may drop this completer (and what it holds for it) early.
    pub fn is_abandoned(&self) -> bool {
        self.shared
            .as_ref()
            .is_none_or(|shared| Arc::strong_count(shared) == 1)
    }
}

fn fill(shared: &Shared, result: Result<()>) {
    let waker = {
        let mut slot = shared.lock();
        if slot.result.is_some() {
            return;
        }
        slot.result = Some(result);
        shared.done.store(true, Ordering::Release);
        slot.waker.take()
    };
    if let Some(waker) = waker {
        waker.wake();
    }
}

impl Drop for Completer {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            if Arc::strong_count(&shared) > 1 {
                fill(
                    &shared,
                    Err(Error::Abandoned {
                        reason: "the backend released the work's notification before the work \
                                 completed"
                            .into(),
                    }),
                );
            }
        }
    }
}

impl fmt::Debug for Completer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completer")
            .field("abandoned", &self.is_abandoned())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    #[test]
    fn the_latest_waker_is_woken_once() {
        let (first, first_waker) = counter();
        let (second, second_waker) = counter();
        let (mut done, completer) = Completion::pending();
        assert!(Pin::new(&mut done)
            .poll(&mut Context::from_waker(&first_waker))
            .is_pending());
        assert!(Pin::new(&mut done)
            .poll(&mut Context::from_waker(&second_waker))
            .is_pending());
        assert!(!done.is_ready());
        completer.complete(Ok(()));
        assert!(done.is_ready());
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        let mut cx = Context::from_waker(&second_waker);
        assert_eq!(Pin::new(&mut done).poll(&mut cx), Poll::Ready(Ok(())));
        assert_eq!(Pin::new(&mut done).poll(&mut cx), Poll::Ready(Ok(())));
    }

    #[test]
    fn a_dropped_completion_is_abandoned_and_releases_the_state() {
        let (done, completer) = Completion::pending();
        assert!(!completer.is_abandoned());
        let weak = Arc::downgrade(completer.shared.as_ref().unwrap());
        drop(done);
        assert!(completer.is_abandoned());
        completer.complete(Ok(()));
        assert_eq!(weak.strong_count(), 0);
    }

    fn now(mut done: Completion) -> Poll<Result<()>> {
        let (_, waker) = counter();
        Pin::new(&mut done).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_dropped_completer_answers_abandoned() {
        let (done, completer) = Completion::pending();
        drop(completer);
        assert!(matches!(
            now(done),
            Poll::Ready(Err(Error::Abandoned { .. }))
        ));
    }

    #[test]
    fn completing_twice_keeps_the_first_result() {
        let (done, completer) = Completion::pending();
        let shared = completer.shared.clone().unwrap();
        completer.complete(Err(Error::NotReady));
        fill(&shared, Ok(()));
        assert_eq!(now(done), Poll::Ready(Err(Error::NotReady)));
    }

    #[test]
    fn a_completion_from_another_thread_wakes_the_task() {
        let (count, waker) = counter();
        let (mut done, completer) = Completion::pending();
        assert!(Pin::new(&mut done)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        std::thread::spawn(move || completer.complete(Ok(())))
            .join()
            .unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(now(done), Poll::Ready(Ok(())));
    }

    #[test]
    fn completion_is_send_unpin_static() {
        fn check<T: Future<Output = Result<()>> + Send + Unpin + 'static>() {}
        check::<Completion>();
        fn send<T: Send + Sync>() {}
        send::<Completer>();
    }
}
