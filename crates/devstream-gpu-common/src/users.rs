//! The streams that used an object (buffer, flag, module, managed memory), so that releasing
//! the object waits for their queued work instead of blocking or freeing under it.

use crate::device::Device;
use crate::ext::CaptureModeGuard;
use crate::raw::{CaptureStatus, RawApi};
use crate::stream::{StreamInner, StreamKind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Every stream that used an object, each once, in first-use order.
pub(crate) struct StreamUsers<A: RawApi>(Mutex<Vec<Arc<StreamInner<A>>>>);

impl<A: RawApi> StreamUsers<A> {
    /// No user yet.
    pub(crate) fn new() -> Self {
        StreamUsers(Mutex::new(Vec::new()))
    }

    /// `stream` is the first user (for a buffer: the allocating stream).
    pub(crate) fn first(stream: Arc<StreamInner<A>>) -> Self {
        StreamUsers(Mutex::new(vec![stream]))
    }

    /// Notes that `stream` uses the object (once per stream).
    ///
    /// A new user also forgets the users that are done with the object for good: streams whose
    /// every handle is gone (no more work can be queued on them) and whose queued work has all
    /// completed. Otherwise a long-lived object used by one short-lived stream after another (a
    /// flag or buffer kept across requests) would keep every one of those native streams alive
    /// until it is dropped itself.
    pub(crate) fn note(&self, stream: &Arc<StreamInner<A>>) {
        let Ok(mut users) = self.0.lock() else {
            return;
        };
        if users.iter().any(|u| Arc::ptr_eq(u, stream)) {
            return;
        }
        // Not from a host function: no runtime calls there beyond what it asked for. The query
        // (and the destruction of a forgotten stream) would be a "potentially unsafe" call to a
        // capture in Global or ThreadLocal mode (this thread's, or any thread's in Global
        // mode), which the runtime answers by invalidating that capture: so they run with this
        // thread in Relaxed mode, and not at all where the runtime cannot switch modes.
        let prune = !crate::hostfn::in_host_function() && users.iter().any(|user| gone(user));
        let relaxed = if prune {
            CaptureModeGuard::<A>::relaxed()
        } else {
            None
        };
        let finished = match relaxed {
            Some(_) => forget_finished(&mut users, |user| gone(user) && finished::<A>(user)),
            None => Vec::new(),
        };
        users.push(stream.clone());
        drop(users);
        // Destroyed (stream handles released) outside the lock, still in Relaxed mode.
        drop(finished);
        drop(relaxed);
    }

    /// The users now.
    pub(crate) fn snapshot(&self) -> Vec<Arc<StreamInner<A>>> {
        self.0.lock().map(|users| users.clone()).unwrap_or_default()
    }

    /// Takes the users out (the owner is being dropped).
    pub(crate) fn take(&self) -> Vec<Arc<StreamInner<A>>> {
        self.0
            .lock()
            .map(|mut users| std::mem::take(&mut *users))
            .unwrap_or_default()
    }

    /// For the owner's drop: runs `release` once the work every user has queued so far has
    /// completed — for a user capturing now, the work it queued before the capture — (never
    /// blocks; off a runtime callback thread, where runtime calls are not allowed).
    pub(crate) fn release_after(
        &self,
        device: &'static Device<A>,
        release: impl FnOnce() + Send + 'static,
    ) {
        let users = self.take();
        crate::hostfn::release_off_callback(move || {
            device.release_after(users, Box::new(release));
        });
    }
}

/// Whether `stream`, which no handle names any more, has completed all its queued work: an
/// owned stream, not capturing (asked first: a query would invalidate a capture it is part
/// of), whose query says done. Any error or other kind of stream: not known to be done.
pub(crate) fn finished<A: RawApi>(stream: &StreamInner<A>) -> bool {
    if stream.kind != StreamKind::Owned {
        return false;
    }
    // SAFETY: the stream is alive (the caller holds it); an owned stream's handle names it on
    // every thread.
    let capturing = unsafe { A::stream_is_capturing(stream.raw) };
    // SAFETY: as above.
    matches!(capturing, Ok(CaptureStatus::None)) && unsafe { A::stream_query(stream.raw) }.is_ok()
}

/// Whether no handle names `stream` any more, so no more work can be queued on it: devstream
/// holds it only for work already queued (other objects' user lists may hold it too, which is
/// why this is not a strong count).
pub(crate) fn gone<A: RawApi>(stream: &StreamInner<A>) -> bool {
    stream.handles.load(Ordering::Acquire) == 0
}

/// Removes from `items`, keeping the others' order, and returns the items that `forgettable`
/// says are done with for good (for stream users: [`gone`] and [`finished`]).
pub(crate) fn forget_finished<T>(
    items: &mut Vec<T>,
    mut forgettable: impl FnMut(&T) -> bool,
) -> Vec<T> {
    let mut finished = Vec::new();
    let mut index = 0;
    while index < items.len() {
        if forgettable(&items[index]) {
            finished.push(items.remove(index));
        } else {
            index += 1;
        }
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::forget_finished;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    struct User {
        name: &'static str,
        done: AtomicBool,
    }

    fn user(name: &'static str, done: bool) -> Arc<User> {
        Arc::new(User {
            name,
            done: AtomicBool::new(done),
        })
    }

    /// The tests' stand-in for `gone`: no handle but the list's.
    fn only_here(user: &Arc<User>) -> bool {
        Arc::strong_count(user) == 1
    }

    fn names(users: &[Arc<User>]) -> Vec<&'static str> {
        users.iter().map(|u| u.name).collect()
    }

    /// A user no one else holds whose work completed is forgotten; one still held elsewhere
    /// (work may still be queued on it) or with work pending is kept; the order stays.
    #[test]
    fn only_finished_users_that_no_handle_names_are_forgotten() {
        let held = user("held and done", true);
        let mut users = vec![
            user("gone and done", true),
            held.clone(),
            user("gone, work pending", false),
            user("gone and done too", true),
        ];
        let forgotten = forget_finished(&mut users, |u| {
            only_here(u) && u.done.load(Ordering::SeqCst)
        });
        assert_eq!(names(&forgotten), ["gone and done", "gone and done too"]);
        assert_eq!(names(&users), ["held and done", "gone, work pending"]);
        // The pending one completes, the held one's handle goes: both are forgotten next time.
        users[1].done.store(true, Ordering::SeqCst);
        drop(held);
        let forgotten = forget_finished(&mut users, |u| {
            only_here(u) && u.done.load(Ordering::SeqCst)
        });
        assert_eq!(names(&forgotten), ["held and done", "gone, work pending"]);
        assert!(users.is_empty());
    }

    /// A user still held elsewhere is never even asked (the question may cost a runtime call).
    #[test]
    fn a_user_with_a_handle_is_not_queried() {
        let held = user("held", true);
        let mut users = vec![held.clone()];
        let forgotten = forget_finished(&mut users, |u| {
            only_here(u) && panic!("queried a user with a handle")
        });
        assert!(forgotten.is_empty());
        assert_eq!(users.len(), 1);
    }

    /// A long-lived object used by one short-lived user after another keeps only the live ones.
    #[test]
    fn users_of_a_long_lived_object_do_not_accumulate() {
        let mut users: Vec<Arc<User>> = Vec::new();
        for _ in 0..120 {
            let current = user("round", false);
            let _ = forget_finished(&mut users, |u| {
                only_here(u) && u.done.load(Ordering::SeqCst)
            });
            users.push(current.clone());
            // The round's work completes and its last handle goes.
            current.done.store(true, Ordering::SeqCst);
        }
        assert_eq!(users.len(), 1, "only the last round's user is kept");
    }
}
