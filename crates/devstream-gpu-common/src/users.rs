//! The streams that used an object (buffer, flag, module, managed memory), so that releasing
//! the object waits for their queued work instead of blocking or freeing under it.

use crate::device::Device;
use crate::raw::RawApi;
use crate::stream::StreamInner;
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
    pub(crate) fn note(&self, stream: &Arc<StreamInner<A>>) {
        if let Ok(mut users) = self.0.lock() {
            if !users.iter().any(|u| Arc::ptr_eq(u, stream)) {
                users.push(stream.clone());
            }
        }
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
