//! The plug-in queues devstream knows of: one per (runtime, device slot, plug-in stream handle).
//! A weak registry hands every devstream stream over the same handle the same queue, so the
//! work of all of them is numbered in one order.

use super::lock;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};

/// One queue of the plug-in, as far as devstream can tell: a plug-in stream handle of one
/// device. Devstream streams over the same handle (adopted ones, or every stream of a plug-in
/// that never writes its stream handles) share it, and their work is numbered in one order, so
/// a host function can tell what was queued before and after it.
#[derive(Debug, Default)]
pub(crate) struct PluginQueue {
    pub(super) seq: AtomicU64,
}

/// What identifies a plug-in queue.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct QueueKey {
    /// The plug-in runtime's index.
    pub(super) runtime: usize,
    /// The device slot.
    pub(super) slot: usize,
    /// The plug-in stream handle.
    pub(super) handle: usize,
}

/// The live plug-in queues, by key (weak: a queue lives as long as a stream over it).
static QUEUES: Mutex<Vec<(QueueKey, Weak<PluginQueue>)>> = Mutex::new(Vec::new());

/// The queue of a plug-in stream handle (shared with the other live streams over it).
pub(super) fn queue_of(key: QueueKey) -> Arc<PluginQueue> {
    let mut queues = lock(&QUEUES);
    queues.retain(|(_, queue)| queue.strong_count() > 0);
    if let Some(queue) = queues
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, queue)| queue.upgrade())
    {
        return queue;
    }
    let queue = Arc::new(PluginQueue::default());
    queues.push((key, Arc::downgrade(&queue)));
    queue
}
