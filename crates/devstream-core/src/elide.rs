//! Redundant-wait elision: what a stream has already waited for, written once for every
//! backend.
//!
//! Frameworks call `wait_event` / `wait_stream` defensively; most of those waits are implied by
//! an earlier one. Each stream owns a [`WaitTracker`]: a few `(source stream id, position)`
//! pairs, the highest position of each source stream the stream has waited for, where a
//! *position* is what devstream's own `record` gave the event (a per-stream clock, or on the CPU
//! the stream's submitted-task count). A wait on a record of source `S` at position `p` is
//! implied when the tracker holds `S` at `q ≥ p`: the earlier wait already ordered all later
//! work of this stream behind everything `S` had at `q`, which contains everything it had at
//! `p`. A wait on a record of the stream itself is always implied (stream order).
//!
//! Only direct ordering is tracked (no transitive closure). A backend gives a record a position
//! only when it can prove the position is monotone in what the record captured (see
//! [`WaitTracker::lock`] and [`EventMark`]); anything it cannot prove (foreign handles, records
//! or waits while a capture may be active, records racing on one stream) gets no position and
//! is never elided.
//!
//! Cost: one compare-and-swap and one store on the stream's tracker word per wait (and per
//! tracked record), plus, for native events, three loads of the event's mark per wait and a
//! load and a store per record (see [`EventMark`]); the tracker never blocks: when another
//! thread holds it, the operation simply is not tracked (and not elided).
//!
//! ```
//! use devstream_core::elide::{Mark, WaitTracker};
//! let t = WaitTracker::new(true);
//! let s = 7; // the source stream's id
//! let mut waits = 0;
//! for pos in [3, 2, 3, 5] {
//!     let mut g = t.lock().unwrap();
//!     if !g.implied(1, Mark { stream: s, pos }) {
//!         waits += 1; // the native wait would go here
//!         g.note(Mark { stream: s, pos });
//!     }
//! }
//! assert_eq!(waits, 2); // 3 and 5; 2 and the second 3 were implied
//! ```

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The event mark's atomics: loom's under `--cfg loom`, so that `loom_tests` model-checks the
/// real [`EventMark`].
#[cfg(loom)]
use loom::sync::atomic::{AtomicBool as MarkBool, AtomicU64 as MarkU64};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool as MarkBool, AtomicU64 as MarkU64};

/// Source streams a tracker remembers (round-robin replacement beyond that: forgetting is
/// always safe, it only elides less).
pub const TRACKED: usize = 6;

/// Lock bit of the tracker word (the rest is the record clock, shifted by one).
const BUSY: u64 = 1;

/// Where an event's current record sits: the recording stream's id and its position there
/// (`pos == 0`: no position, never elided).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Mark {
    /// The id of the stream the event was recorded on (0: unknown).
    pub stream: u64,
    /// The record's position on that stream (0: none).
    pub pos: u64,
}

impl Mark {
    /// No known record.
    pub const NONE: Mark = Mark { stream: 0, pos: 0 };

    /// Whether a wait on this mark can be judged at all.
    #[inline]
    pub fn is_known(self) -> bool {
        self.stream != 0 && self.pos != 0
    }
}

thread_local! {
    static ELIDED: Cell<u64> = const { Cell::new(0) };
}

/// Waits elided by the calling thread so far (all backends). A benchmark reads it before and
/// after a step to count the driver calls the step saved.
///
/// ```
/// let before = devstream_core::elide::elided_on_this_thread();
/// assert!(devstream_core::elide::elided_on_this_thread() >= before);
/// ```
#[inline]
pub fn elided_on_this_thread() -> u64 {
    ELIDED.with(Cell::get)
}

/// Whether new streams elide redundant waits by default: on, unless the environment variable
/// `DEVSTREAM_ELIDE_WAITS` is `0`, `off` or `false` (read once), so that a whole test suite or
/// benchmark can be run both ways.
pub fn default_enabled() -> bool {
    static DEFAULT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| {
        !matches!(
            std::env::var("DEVSTREAM_ELIDE_WAITS").as_deref(),
            Ok("0" | "off" | "false" | "OFF" | "FALSE")
        )
    })
}

/// Per-stream record clock and waited-for positions. See the module documentation.
#[derive(Debug)]
pub struct WaitTracker {
    /// `clock << 1 | BUSY`.
    word: AtomicU64,
    enabled: bool,
    keys: [AtomicU64; TRACKED],
    positions: [AtomicU64; TRACKED],
    next: AtomicU64,
}

impl WaitTracker {
    /// A tracker; `enabled == false` makes every method a no-op that elides nothing.
    pub const fn new(enabled: bool) -> WaitTracker {
        WaitTracker {
            word: AtomicU64::new(0),
            enabled,
            keys: [const { AtomicU64::new(0) }; TRACKED],
            positions: [const { AtomicU64::new(0) }; TRACKED],
            next: AtomicU64::new(0),
        }
    }

    /// Whether this stream elides waits (`StreamOptions::elide_waits`).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Takes the tracker for one record or wait, or `None` when it is disabled or another
    /// thread holds it (then the operation is simply not tracked). Never blocks.
    ///
    /// Hold the guard across the native call: a position is handed out, and a wait is noted,
    /// only after the native call succeeded, so another thread that sees the note (after the
    /// guard's release) is ordered after the native call; and records given positions are
    /// serialised by the guard, so positions are monotone in native record order.
    #[inline]
    pub fn lock(&self) -> Option<TrackerGuard<'_>> {
        if !self.enabled {
            return None;
        }
        let word = self.word.load(Ordering::Relaxed);
        if word & BUSY != 0 {
            return None;
        }
        self.word
            .compare_exchange(word, word | BUSY, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| TrackerGuard {
                tracker: self,
                clock: word >> 1,
            })
    }
}

/// Exclusive access to a [`WaitTracker`]; released on drop.
#[derive(Debug)]
pub struct TrackerGuard<'a> {
    tracker: &'a WaitTracker,
    clock: u64,
}

impl TrackerGuard<'_> {
    /// Whether a wait on `mark` by the stream `own` is implied by what it already waited for
    /// (or by its own stream order). Counts an implied wait as elided.
    #[inline]
    pub fn implied(&self, own: u64, mark: Mark) -> bool {
        if mark.stream == 0 {
            return false;
        }
        let implied = mark.stream == own
            || (mark.pos != 0
                && self
                    .tracker
                    .keys
                    .iter()
                    .zip(&self.tracker.positions)
                    .any(|(k, p)| {
                        k.load(Ordering::Relaxed) == mark.stream
                            && p.load(Ordering::Relaxed) >= mark.pos
                    }));
        if implied {
            ELIDED.with(|c| c.set(c.get() + 1));
        }
        implied
    }

    /// Notes a wait on `mark` that was issued (call only after the native wait succeeded).
    #[inline]
    pub fn note(&mut self, mark: Mark) {
        if !mark.is_known() {
            return;
        }
        let t = self.tracker;
        for (k, p) in t.keys.iter().zip(&t.positions) {
            if k.load(Ordering::Relaxed) == mark.stream {
                if p.load(Ordering::Relaxed) < mark.pos {
                    p.store(mark.pos, Ordering::Relaxed);
                }
                return;
            }
        }
        let empty = t.keys.iter().position(|k| k.load(Ordering::Relaxed) == 0);
        let index = empty.unwrap_or_else(|| {
            let n = t.next.load(Ordering::Relaxed);
            t.next.store(n.wrapping_add(1), Ordering::Relaxed);
            (n % TRACKED as u64) as usize
        });
        t.keys[index].store(mark.stream, Ordering::Relaxed);
        t.positions[index].store(mark.pos, Ordering::Relaxed);
    }

    /// Hands out the next position of this stream's record clock (call only after the native
    /// record succeeded). Positions start at 1.
    #[inline]
    pub fn advance(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

impl Drop for TrackerGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.tracker.word.store(self.clock << 1, Ordering::Release);
    }
}

/// The [`Mark`] of an event whose record is a native call (CUDA, HIP), kept consistent with
/// the native record without a lock of its own.
///
/// **One owner.** The first stream that records the event while holding its own
/// [`WaitTracker`] guard becomes its owner (one compare-and-swap, once per event). From then on
/// only the owner's records under its guard write the mark, and they write only the position
/// (one store, after the native record, before the guard is released): records of one stream
/// are serialised by its guard, so the position follows the native record order, and since
/// every record is the owner's, whatever record a later wait sees is the owner's at or after the
/// position it read. A record by any other stream, or by the owner without its guard (another
/// thread holds it, or the stream does not elide), makes the mark untrusted for good, with a
/// store made *before* its native record; a wait trusts what it read only if the owner is
/// unchanged after its native wait returned ([`EventMark::still_owned`]). So a record costs the
/// owner no atomic read-modify-write of the event, and an event recorded by two streams in its
/// life is simply never elided again.
#[derive(Debug)]
pub struct EventMark {
    /// 0: never recorded under a guard; [`UNTRUSTED`]: recorded by a second stream or without
    /// a guard (never trusted again); else the owner's stream id.
    owner: MarkU64,
    /// The position of the owner's latest record (0: none, e.g. recorded while a capture may
    /// have been active): written only by the owner under its guard.
    pos: MarkU64,
    /// Set once the event's native handle was handed out or wrapped: someone else may record
    /// it, so its mark is never trusted again.
    foreign: MarkBool,
}

impl Default for EventMark {
    fn default() -> EventMark {
        EventMark::new()
    }
}

/// [`EventMark::owner`] of an event recorded by more than one stream, or without a guard.
const UNTRUSTED: u64 = u64::MAX;

impl EventMark {
    /// A never-recorded event's mark. (Not a `const fn`: under `--cfg loom` its atomics are
    /// loom's, which have no `const` constructor.)
    pub fn new() -> EventMark {
        EventMark {
            owner: MarkU64::new(0),
            pos: MarkU64::new(0),
            foreign: MarkBool::new(false),
        }
    }

    /// Marks the event as recordable outside devstream (a wrapped or exported native handle).
    pub fn set_foreign(&self) {
        self.foreign.store(true, Ordering::Release);
    }

    /// Whether [`EventMark::set_foreign`] was called.
    #[inline]
    pub fn is_foreign(&self) -> bool {
        self.foreign.load(Ordering::Relaxed)
    }

    /// Runs the native record `f` of stream `stream` (its id, never 0) and updates the mark.
    /// `guarded`: the caller holds `stream`'s [`WaitTracker`] guard across this call (then `f`
    /// returns its result and the record's position, 0 for none, also on error); without it
    /// (`false`), the record makes the mark untrusted for good.
    #[inline]
    pub fn record<T>(&self, stream: u64, guarded: bool, f: impl FnOnce() -> (T, u64)) -> T {
        let owner = self.owner.load(Ordering::Acquire);
        let owned = guarded
            && stream != 0
            && stream != UNTRUSTED
            && (owner == stream
                || (owner == 0
                    && self
                        .owner
                        .compare_exchange(0, stream, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()));
        if owned {
            let (result, pos) = f();
            self.pos.store(pos, Ordering::Release);
            return result;
        }
        if owner != UNTRUSTED {
            // Before the native record: a wait that sees this record sees this store too.
            self.owner.store(UNTRUSTED, Ordering::SeqCst);
        }
        f().0
    }

    /// For a wait: the owner and the position of its latest record, or `None` when no mark can
    /// be trusted (never recorded with a position, recorded by a second stream or without a
    /// guard, or foreign). Never blocks.
    #[inline]
    pub fn read(&self) -> Option<Mark> {
        if self.foreign.load(Ordering::Acquire) {
            return None;
        }
        let owner = self.owner.load(Ordering::Acquire);
        if owner == 0 || owner == UNTRUSTED {
            return None;
        }
        let pos = self.pos.load(Ordering::Acquire);
        (pos != 0).then_some(Mark { stream: owner, pos })
    }

    /// After a native wait: whether `read` (from [`EventMark::read`]) still describes the
    /// event's records, i.e. no other stream and no unguarded record touched the event since.
    /// Then the wait saw a record of the owner at or after `read.pos`.
    #[inline]
    pub fn still_owned(&self, read: &Mark) -> bool {
        self.owner.load(Ordering::SeqCst) == read.stream
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Iterations of the concurrency tests (few under Miri, which is slow).
    const ROUNDS: u64 = if cfg!(miri) { 200 } else { 20_000 };

    #[test]
    fn implied_only_for_known_lower_positions() {
        let t = WaitTracker::new(true);
        let mut g = t.lock().unwrap();
        assert!(!g.implied(1, Mark { stream: 2, pos: 1 }));
        g.note(Mark { stream: 2, pos: 4 });
        assert!(g.implied(1, Mark { stream: 2, pos: 4 }));
        assert!(g.implied(1, Mark { stream: 2, pos: 1 }));
        assert!(!g.implied(1, Mark { stream: 2, pos: 5 }));
        assert!(!g.implied(1, Mark { stream: 3, pos: 1 }));
        assert!(!g.implied(1, Mark { stream: 2, pos: 0 }), "no position");
        assert!(g.implied(1, Mark { stream: 1, pos: 0 }), "own stream");
        assert!(!g.implied(1, Mark::NONE));
        g.note(Mark { stream: 2, pos: 2 });
        assert!(
            g.implied(1, Mark { stream: 2, pos: 4 }),
            "positions never go down"
        );
    }

    #[test]
    fn held_tracker_is_not_taken_twice_and_disabled_is_never_taken() {
        let t = WaitTracker::new(true);
        let g = t.lock().unwrap();
        assert!(t.lock().is_none());
        drop(g);
        assert!(t.lock().is_some());
        assert!(WaitTracker::new(false).lock().is_none());
    }

    #[test]
    fn clock_advances_only_through_a_guard_and_survives_release() {
        let t = WaitTracker::new(true);
        assert_eq!(t.lock().unwrap().advance(), 1);
        assert_eq!(t.lock().unwrap().advance(), 2);
        let mut g = t.lock().unwrap();
        g.note(Mark { stream: 9, pos: 1 });
        drop(g);
        assert!(t.lock().unwrap().implied(1, Mark { stream: 9, pos: 1 }));
        assert_eq!(t.lock().unwrap().advance(), 3);
    }

    #[test]
    fn eviction_forgets_but_never_lies() {
        let t = WaitTracker::new(true);
        let mut g = t.lock().unwrap();
        for s in 1..=(TRACKED as u64 * 3) {
            g.note(Mark {
                stream: 100 + s,
                pos: s,
            });
        }
        for s in 1..=(TRACKED as u64 * 3) {
            // Whatever is still remembered is exact.
            assert!(!g.implied(
                1,
                Mark {
                    stream: 100 + s,
                    pos: s + 1
                }
            ));
        }
    }

    #[test]
    fn tracker_guard_is_exclusive_under_contention() {
        use std::sync::atomic::AtomicU64;
        use std::sync::Arc;
        let t = Arc::new(WaitTracker::new(true));
        // A load-then-store increment under the guard: lost updates would show a broken lock.
        let counter = Arc::new(AtomicU64::new(0));
        let taken = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (t, counter, taken) = (t.clone(), counter.clone(), taken.clone());
                std::thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        if let Some(mut g) = t.lock() {
                            let v = counter.load(Ordering::Relaxed);
                            std::hint::spin_loop();
                            counter.store(v + 1, Ordering::Relaxed);
                            g.advance();
                            taken.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        let taken = taken.load(Ordering::Relaxed);
        assert!(taken > 0);
        assert_eq!(counter.load(Ordering::Relaxed), taken);
        // The clock advanced once per guard, positions never repeat.
        assert_eq!(t.lock().unwrap().advance(), taken + 1);
    }

    #[test]
    fn event_mark_positions_are_the_owners_under_concurrent_records() {
        use std::sync::Arc;
        let m = Arc::new(EventMark::new());
        // Two streams each recording under its own guard: one becomes the owner, the other's
        // first record makes the mark untrusted; a reader never pairs a stream with a position
        // the stream did not write.
        let recorders: Vec<_> = (1..=2u64)
            .map(|stream| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 1..=ROUNDS {
                        // The position encodes the stream: a mismatched read would not.
                        m.record(stream, true, || ((), stream * 1_000_000 + i));
                    }
                })
            })
            .collect();
        let reader = {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..2 * ROUNDS {
                    if let Some(r) = m.read() {
                        assert_eq!(r.pos / 1_000_000, r.stream, "{r:?}");
                    }
                }
            })
        };
        for r in recorders {
            r.join().unwrap();
        }
        reader.join().unwrap();
        assert_eq!(
            m.read(),
            None,
            "recorded by two streams: never trusted again"
        );
    }

    #[test]
    fn event_mark_has_one_owner_and_foreign_is_never_read() {
        let m = EventMark::new();
        assert_eq!(m.read(), None, "never recorded");
        m.record(3, true, || ((), 9));
        let r = m.read().unwrap();
        assert_eq!(r, Mark { stream: 3, pos: 9 });
        assert!(m.still_owned(&r));
        m.record(3, true, || ((), 0));
        assert_eq!(m.read(), None, "a record without a position");
        m.record(3, true, || ((), 10));
        assert_eq!(m.read(), Some(Mark { stream: 3, pos: 10 }));
        // Another stream's record: untrusted before its native record runs, and for good.
        m.record(4, true, || {
            assert_eq!(m.read(), None);
            assert!(!m.still_owned(&r));
            ((), 1)
        });
        m.record(3, true, || ((), 11));
        assert_eq!(
            m.read(),
            None,
            "the owner's later records do not restore it"
        );
        // The owner without its guard, or a stream that does not elide, also untrusts it.
        let u = EventMark::new();
        u.record(5, true, || ((), 1));
        u.record(5, false, || ((), 0));
        assert_eq!(u.read(), None);
        let v = EventMark::new();
        v.record(6, false, || ((), 0));
        v.record(6, true, || ((), 2));
        assert_eq!(v.read(), None, "first recorded without a guard");
        let f = EventMark::new();
        f.record(7, true, || ((), 1));
        f.set_foreign();
        assert_eq!(f.read(), None);
    }
}

/// Model checks of [`EventMark`] with loom (`cargo xtask loom core`): the native event is an
/// atomic holding the identity of its latest record (`stream << 32 | position`), stored and
/// loaded `SeqCst` as the driver's own synchronisation orders a record and a wait that sees it.
/// The property a wait relies on: if it notes the mark it read (the owner is unchanged after
/// its native wait), the native wait saw a record of that owner at or after that position.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64 as Native;
    use loom::sync::Arc;

    /// A record of `stream` at `pos` through the mark, as a stream's `record` makes it.
    fn record(mark: &EventMark, native: &Native, stream: u64, guarded: bool, pos: u64) {
        mark.record(stream, guarded, || {
            native.store(stream << 32 | pos, Ordering::SeqCst);
            ((), pos)
        });
    }

    /// A wait as `wait_event` makes it: read, native wait, note if still owned.
    fn wait_and_check(mark: &EventMark, native: &Native) {
        if let Some(read) = mark.read() {
            let seen = native.load(Ordering::SeqCst);
            if mark.still_owned(&read) {
                assert_eq!(
                    seen >> 32,
                    read.stream,
                    "noted a mark of another stream's record"
                );
                assert!(
                    seen & 0xffff_ffff >= read.pos,
                    "noted a later position than seen"
                );
            }
        }
    }

    /// Stream 1 owns the event (a first record), then `second` (stream, guarded, position)
    /// records it while stream 1 records again under its guard and a waiter waits on it in a
    /// thread of its own; every execution is checked by [`wait_and_check`]. Answers the mark
    /// after all of them.
    fn race_with(second: (u64, bool, u64)) -> Arc<EventMark> {
        let mark = Arc::new(EventMark::new());
        let native = Arc::new(Native::new(0));
        record(&mark, &native, 1, true, 1);
        let threads = [(1, true, 2), second].map(|(stream, guarded, pos)| {
            let (mark, native) = (mark.clone(), native.clone());
            loom::thread::spawn(move || record(&mark, &native, stream, guarded, pos))
        });
        let waiter = {
            let (mark, native) = (mark.clone(), native.clone());
            loom::thread::spawn(move || wait_and_check(&mark, &native))
        };
        for thread in threads {
            thread.join().unwrap();
        }
        waiter.join().unwrap();
        wait_and_check(&mark, &native);
        mark
    }

    /// Model-checks [`race_with`]`(second)`: in every execution the mark ends untrusted for
    /// good (`why`).
    fn model_race_untrusts_the_mark(second: (u64, bool, u64), why: &'static str) {
        loom::model(move || assert_eq!(race_with(second).read(), None, "{why}"));
    }

    #[test]
    fn loom_a_noted_mark_was_seen_by_the_wait_while_a_second_stream_records() {
        model_race_untrusts_the_mark((2, true, 1), "a second stream untrusts the mark for good");
    }

    #[test]
    fn loom_a_noted_mark_was_seen_by_the_wait_while_the_owner_records_unguarded() {
        // The same stream from another thread that did not get the guard.
        model_race_untrusts_the_mark(
            (1, false, 0),
            "an unguarded record untrusts the mark for good",
        );
    }
}
