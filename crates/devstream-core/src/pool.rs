//! A lazily created round-robin pool of streams per place and priority level, like PyTorch's
//! `getStreamFromPool`: handing out pooled streams avoids creating a stream per use.
//!
//! ```
//! use devstream_core::{pool::StreamPool, Place};
//! let pool = StreamPool::<u32>::new();
//! let mut made = 0;
//! let first = pool.get(&Place::Cpu, 0, || { made += 1; Ok(made) }).unwrap();
//! assert_eq!(first, 1);
//! ```

use crate::{Place, Result};
use std::collections::HashMap;
use std::sync::Mutex;

/// Streams per (place, native priority) level.
pub const STREAMS_PER_LEVEL: usize = 32;

#[derive(Debug)]
struct Level<S> {
    streams: Vec<S>,
    next: usize,
}

/// Round robin over [`STREAMS_PER_LEVEL`] streams per place and native priority, each created on
/// first use.
#[derive(Debug)]
pub struct StreamPool<S> {
    levels: Mutex<HashMap<(Place, i32), Level<S>>>,
}

impl<S: Clone> Default for StreamPool<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Clone> StreamPool<S> {
    /// An empty pool.
    pub fn new() -> Self {
        StreamPool {
            levels: Mutex::new(HashMap::new()),
        }
    }

    /// The next stream of the level, creating it with `create` if the round robin has not
    /// reached it before. A failed creation leaves the pool unchanged.
    pub fn get(
        &self,
        place: &Place,
        native_priority: i32,
        create: impl FnOnce() -> Result<S>,
    ) -> Result<S> {
        let mut levels = crate::sync::lock(&self.levels);
        let level = levels
            .entry((place.clone(), native_priority))
            .or_insert_with(|| Level {
                streams: Vec::new(),
                next: 0,
            });
        let index = level.next % STREAMS_PER_LEVEL;
        let stream = match level.streams.get(index) {
            Some(s) => s.clone(),
            None => {
                let s = create()?;
                level.streams.push(s.clone());
                s
            }
        };
        level.next = level.next.wrapping_add(1);
        Ok(stream)
    }

    /// How many streams the pool has created for a level.
    pub fn created(&self, place: &Place, native_priority: i32) -> usize {
        let levels = crate::sync::lock(&self.levels);
        levels
            .get(&(place.clone(), native_priority))
            .map_or(0, |l| l.streams.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn round_robin_over_32_created_lazily() {
        let pool = StreamPool::<usize>::new();
        let mut counter = 0;
        let mut got = Vec::new();
        for _ in 0..70 {
            got.push(
                pool.get(&Place::Cpu, -1, || {
                    counter += 1;
                    Ok(counter)
                })
                .unwrap(),
            );
        }
        assert_eq!(counter, STREAMS_PER_LEVEL);
        assert_eq!(got[0], got[32]);
        assert_eq!(got[5], got[69 - 32]);
        assert_eq!(pool.created(&Place::Cpu, -1), 32);
        assert_eq!(pool.created(&Place::Cpu, 0), 0, "levels are separate");
    }

    #[test]
    fn failed_creation_leaves_pool_unchanged() {
        let pool = StreamPool::<u8>::new();
        let err = pool
            .get(&Place::Cpu, 0, || Err(Error::InvalidArgument("no".into())))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)));
        assert_eq!(pool.get(&Place::Cpu, 0, || Ok(9)).unwrap(), 9);
    }
}
