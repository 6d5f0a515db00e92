//! The plug-in stream handles that are live (created and not yet destroyed), to tell when a
//! plug-in gives two live streams one handle: Paddle's reference plug-ins answer every
//! `create_stream` with null (and a plug-in without `create_stream` has only the null stream).
//! Devstream keeps such streams apart on the host side, but the plug-in cannot: a capture begun
//! on one takes every other stream with that handle along, whose work (host functions, the
//! callbacks that release what finished work used) then becomes graph nodes that never run as
//! stream work, and what they hold is never released (`plugin_loader`: a stream kept alive for
//! good after a `Global` capture on another stream with the same null handle). So a capture
//! does not begin on a stream whose handle another live stream has, and no stream is made with
//! the handle of one while a capture of the runtime is in progress (`StreamCore` and
//! `stream::capture`).

use std::collections::HashMap;
use std::sync::Mutex;

/// Live stream handles of one runtime, by (device slot, handle).
#[derive(Default)]
pub(crate) struct StreamHandles {
    live: Mutex<HashMap<(usize, usize), usize>>,
}

impl StreamHandles {
    /// Notes a handle `create_stream` answered on `slot`; answers whether another live stream
    /// has it too.
    pub(super) fn created(&self, slot: usize, handle: usize) -> bool {
        let mut live = crate::queue::lock(&self.live);
        let count = live.entry((slot, handle)).or_insert(0);
        *count += 1;
        *count > 1
    }

    /// Forgets a handle passed to `destroy_stream`.
    pub(super) fn destroyed(&self, slot: usize, handle: usize) {
        let mut live = crate::queue::lock(&self.live);
        if let Some(count) = live.get_mut(&(slot, handle)) {
            *count -= 1;
            if *count == 0 {
                live.remove(&(slot, handle));
            }
        }
    }

    /// Whether more than one live stream of `slot` has `handle`.
    pub(crate) fn shared(&self, slot: usize, handle: usize) -> bool {
        crate::queue::lock(&self.live)
            .get(&(slot, handle))
            .is_some_and(|count| *count > 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_is_shared_while_two_live_streams_have_it() {
        let handles = StreamHandles::default();
        assert!(!handles.created(0, 0));
        assert!(!handles.shared(0, 0));
        assert!(!handles.created(1, 0), "another device's slot");
        assert!(handles.created(0, 0));
        assert!(handles.shared(0, 0));
        handles.destroyed(0, 0);
        assert!(!handles.shared(0, 0));
        handles.destroyed(0, 0);
        handles.destroyed(0, 0);
        assert!(!handles.created(0, 0), "a destroyed handle is not live");
    }
}
