//! The plug-in event handles devstream holds, to tell when a plug-in answers `create_event`
//! with a handle that another live event already has. Paddle's reference plug-ins do: their
//! `create_event` succeeds without writing one (every event is null) or hands out one pointer
//! for all; being synchronous, it does them no harm. On an asynchronous plug-in it makes events
//! indistinguishable: the plug-in answers a question about an earlier record from the latest
//! record of that handle, so the earlier record's work may look incomplete until later work
//! is done. Nothing devstream queues waits for later work of a stream on its own host side
//! (held work waits on the host, in order), except a flag wait handed to the plug-in as a
//! blocking callback when a capture begins behind it: one that waits for a completion could
//! then wait for a record queued behind itself. So once a runtime has answered a handle in use,
//! such waits are not handed over (`StreamCore::hand_over_held`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The live event handles of one runtime and whether two live events ever shared one.
#[derive(Default)]
pub(crate) struct EventHandles {
    /// Handle → how many live events devstream holds with it (created, not yet destroyed).
    live: Mutex<HashMap<usize, usize>>,
    ambiguous: AtomicBool,
}

impl EventHandles {
    /// Notes a handle `create_event` answered.
    ///
    /// Once the runtime is ambiguous nothing is counted any more (the answer never changes
    /// back): a plug-in that hands out one handle for every event, as Paddle's reference
    /// plug-ins do, pays the map's lock only until its second live event.
    pub(super) fn created(&self, handle: usize) {
        if self.ambiguous() {
            return;
        }
        let mut live = crate::queue::lock(&self.live);
        let count = live.entry(handle).or_insert(0);
        *count += 1;
        if *count > 1 {
            self.ambiguous.store(true, Ordering::Release);
            live.clear();
            live.shrink_to_fit();
        }
    }

    /// Forgets a handle passed to `destroy_event`.
    pub(super) fn destroyed(&self, handle: usize) {
        if self.ambiguous() {
            return;
        }
        let mut live = crate::queue::lock(&self.live);
        if let Some(count) = live.get_mut(&handle) {
            *count -= 1;
            if *count == 0 {
                live.remove(&handle);
            }
        }
    }

    /// Whether this runtime ever answered `create_event` with a handle a live event had.
    pub(crate) fn ambiguous(&self) -> bool {
        self.ambiguous.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_shared_by_two_live_events_is_noted_for_good() {
        let handles = EventHandles::default();
        handles.created(0x10);
        handles.destroyed(0x10);
        handles.created(0x10);
        assert!(
            !handles.ambiguous(),
            "a handle reused after its destroy is not shared"
        );
        handles.created(0);
        handles.created(0);
        assert!(handles.ambiguous(), "two live null events");
        handles.destroyed(0);
        handles.destroyed(0);
        assert!(handles.ambiguous());
    }
}
