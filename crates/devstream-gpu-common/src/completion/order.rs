//! The completions the sweeper asks in their stream's order (`crate::completion`, "Stream
//! order"): where a record stands in its stream ([`RecordOrder`]), the set that keeps such
//! completions by stream and position ([`InStreamOrder`]), and one sweep over it
//! ([`sweep_round`]).

use crate::stream::{StreamInner, StreamKind};
use devstream_core::Result;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use crate::raw::RawApi;
use devstream_core::sync::lock;

/// Where one of devstream's own records stands in its stream's order.
///
/// Taken around the native record on a stream devstream made (`StreamKind::Owned`, whose
/// handle names one stream on every thread) with the stream's clock
/// ([`StreamInner::own_records`]): `after` is the count of records whose native call had
/// returned before this one's began, `position` this record's tick once its own call
/// returned. A record whose `after` exceeds another's `position` began after that one had
/// been queued, so it is behind it in the stream and cannot be done while that one is not.
/// Two records made at once on two threads are not ordered (neither one's `after` exceeds the
/// other's `position`): both are asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordOrder {
    stream: u64,
    after: u64,
    position: u64,
}

impl RecordOrder {
    /// Runs `record` (a native record of one of devstream's events on `stream`) and answers
    /// where it stands: `None` on a stream of another kind (a per-thread stream's handle names
    /// another stream on each thread; a wrapped or legacy stream is shared with code devstream
    /// does not see).
    pub(crate) fn around<A: RawApi>(
        stream: &StreamInner<A>,
        record: impl FnOnce() -> Result<()>,
    ) -> Result<Option<RecordOrder>> {
        let after = stream.own_records.load(Ordering::SeqCst);
        record()?;
        let position = stream.own_records.fetch_add(1, Ordering::SeqCst);
        Ok((stream.kind == StreamKind::Owned).then_some(RecordOrder {
            stream: stream.id,
            after,
            position,
        }))
    }
}

/// What asking one pending completion's event found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Filled (done, or failed) now.
    Resolved,
    /// Its own record is not done yet.
    NotDone,
    /// Nothing to conclude about its record (a doorbell fills it, the question was refused, or
    /// the event may describe a later record).
    Unknown,
}

/// An entry's key: its record's stream and position, and its registration (a record may be
/// awaited by several completions).
type Key = (u64, u64, u64);

/// Entries kept by their record's place in its stream: per stream, oldest first.
pub(super) struct InStreamOrder<T> {
    /// Per key, the record's `after` and the entry.
    entries: BTreeMap<Key, (u64, T)>,
    registrations: u64,
}

impl<T: Clone> InStreamOrder<T> {
    /// No entry.
    pub(super) fn new() -> Self {
        InStreamOrder {
            entries: BTreeMap::new(),
            registrations: 0,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keeps `entry`, which awaits the record at `order`.
    pub(super) fn insert(&mut self, order: RecordOrder, entry: T) {
        self.registrations += 1;
        self.entries.insert(
            (order.stream, order.position, self.registrations),
            (order.after, entry),
        );
    }

    /// The first entry after `cursor` that is not certainly behind `not_done` (a stream's
    /// record found not done in this round); settled entries met on the way, behind or not,
    /// leave the set into `leaving` (so a round looks at every entry, and a dropped future's
    /// entry goes even while the record it awaited is not done).
    fn next(
        &mut self,
        cursor: Option<Key>,
        not_done: Option<(u64, u64)>,
        settled: &impl Fn(&T) -> bool,
        leaving: &mut Vec<T>,
    ) -> Option<(Key, T)> {
        let from = cursor.map_or(Bound::Unbounded, Bound::Excluded);
        let mut met = None;
        let mut gone = Vec::new();
        for (key, (after, entry)) in self.entries.range((from, Bound::Unbounded)) {
            if settled(entry) {
                gone.push(*key);
                continue;
            }
            let behind =
                not_done.is_some_and(|(stream, position)| key.0 == stream && *after > position);
            if !behind {
                met = Some((*key, entry.clone()));
                break;
            }
        }
        for key in gone {
            leaving.extend(self.entries.remove(&key).map(|(_, entry)| entry));
        }
        met
    }
}

/// One sweep over the entries `part` finds in `set`: per stream, oldest first, each asked
/// (`ask`, with the lock let go) unless its record is behind one found not done in this round.
/// Resolved and settled entries leave the set into `leaving` (for the caller to drop after the
/// lock). Answers whether any was resolved.
pub(super) fn sweep_round<L, T: Clone>(
    set: &Mutex<L>,
    part: impl Fn(&mut L) -> &mut InStreamOrder<T>,
    settled: impl Fn(&T) -> bool,
    mut ask: impl FnMut(&T) -> Answer,
    leaving: &mut Vec<T>,
) -> bool {
    let mut resolved = false;
    // The last key met, and the oldest record of its stream found not done in this round.
    let mut cursor: Option<Key> = None;
    let mut not_done: Option<(u64, u64)> = None;
    loop {
        let next = part(&mut lock(set)).next(cursor, not_done, &settled, leaving);
        let Some((key, entry)) = next else {
            return resolved;
        };
        cursor = Some(key);
        if not_done.is_some_and(|(stream, _)| stream != key.0) {
            not_done = None;
        }
        match ask(&entry) {
            Answer::Resolved => {
                resolved = true;
                let removed = part(&mut lock(set)).entries.remove(&key);
                leaving.extend(removed.map(|(_, entry)| entry));
            }
            // The first not done of its stream met in this round is its oldest.
            Answer::NotDone if not_done.is_none() => not_done = Some((key.0, key.1)),
            Answer::NotDone | Answer::Unknown => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::collections::BTreeSet;

    /// A record of the test: its stream, index in registration, where it was really queued
    /// among its stream's records, and its order as the clock saw it.
    #[derive(Clone, Debug)]
    struct Record {
        id: usize,
        stream: u64,
        queued: u64,
        order: RecordOrder,
    }

    /// Records of `streams` streams made by `threads` threads at once: each record's call
    /// spans `[start, end]` (times from `spans`), is queued at a time inside it, and reads the
    /// stream's clock as `RecordOrder::around` does.
    fn records(spans: &[(u64, u8, u8, u8)], streams: u64) -> Vec<Record> {
        // (stream, start, queued, end) per record, times made distinct by the index.
        let calls: Vec<(u64, u64, u64, u64)> = spans
            .iter()
            .enumerate()
            .map(|(i, &(at, len, queue_at, stream))| {
                let start = at * 1000 + i as u64;
                let len = u64::from(len % 16) * 1000 + 1;
                let queued = start + (u64::from(queue_at) * len / 256).min(len - 1);
                (u64::from(stream) % streams, start, queued, start + len)
            })
            .collect();
        calls
            .iter()
            .enumerate()
            .map(|(id, &(stream, start, queued, end))| {
                let same: Vec<_> = calls.iter().filter(|c| c.0 == stream).collect();
                // Returned before this call began; this one's tick is its rank by return.
                let after = same.iter().filter(|c| c.3 < start).count() as u64;
                let position = same.iter().filter(|c| c.3 < end).count() as u64;
                let queued = same.iter().filter(|c| c.2 < queued).count() as u64;
                Record {
                    id,
                    stream,
                    queued,
                    order: RecordOrder {
                        stream,
                        after,
                        position,
                    },
                }
            })
            .collect()
    }

    proptest::proptest! {
        /// With each stream done up to a point of its real queue order, one round resolves
        /// exactly the done entries (none is skipped behind one not done), and asks at most
        /// one not-done entry per stream when records never overlap.
        #[test]
        fn a_round_resolves_exactly_the_done_records(
            spans in proptest::collection::vec((0u64..64, 0u8..=255, 0u8..=255, 0u8..4), 1..40),
            done_upto in proptest::collection::vec(0u64..48, 4),
            overlapping in proptest::bool::ANY,
        ) {
            let spans: Vec<_> = if overlapping {
                spans
            } else {
                // One call at a time per stream: spans far apart.
                spans.iter().enumerate().map(|(i, &(_, _, q, s))| (i as u64 * 20, 0, q, s)).collect()
            };
            let streams = 4;
            let records = records(&spans, streams);
            let set = Mutex::new(InStreamOrder::new());
            for record in &records {
                lock(&set).insert(record.order, record.clone());
            }
            let done = |r: &Record| r.queued < done_upto[r.stream as usize];
            let asked_not_done = Cell::new(0);
            let mut resolved = BTreeSet::new();
            let mut leaving = Vec::new();
            sweep_round(
                &set,
                |s| s,
                |_| false,
                |r: &Record| {
                    if done(r) {
                        resolved.insert(r.id);
                        Answer::Resolved
                    } else {
                        asked_not_done.set(asked_not_done.get() + 1);
                        Answer::NotDone
                    }
                },
                &mut leaving,
            );
            let expected: BTreeSet<usize> =
                records.iter().filter(|r| done(r)).map(|r| r.id).collect();
            proptest::prop_assert_eq!(&resolved, &expected);
            proptest::prop_assert_eq!(leaving.len(), expected.len());
            proptest::prop_assert_eq!(lock(&set).entries.len(), records.len() - expected.len());
            if !overlapping {
                proptest::prop_assert!(asked_not_done.get() <= streams as usize);
            }
        }
    }

    /// Entries whose future was dropped leave the set in the next round, also behind a record
    /// that is not done; the others stay.
    #[test]
    fn settled_entries_leave_in_the_next_round() {
        let set = Mutex::new(InStreamOrder::new());
        for position in 0..4u64 {
            let order = RecordOrder {
                stream: 1,
                after: position,
                position,
            };
            lock(&set).insert(order, position);
        }
        // Record 0 is not done; 3's future was dropped, behind it.
        let mut leaving = Vec::new();
        let asked = Cell::new(0);
        let ask = |_: &u64| {
            asked.set(asked.get() + 1);
            Answer::NotDone
        };
        sweep_round(&set, |s| s, |p: &u64| *p == 3, ask, &mut leaving);
        assert_eq!((leaving.clone(), asked.get()), (vec![3], 1));
        // Now 1's future was dropped too, and everything is done.
        sweep_round(
            &set,
            |s| s,
            |p: &u64| *p == 1,
            |_| Answer::Resolved,
            &mut leaving,
        );
        leaving.sort_unstable();
        assert_eq!(leaving, vec![0, 1, 2, 3]);
        assert!(lock(&set).is_empty());
    }
}
