//! The numbering of one rank's calls: steps and the prefixes the control segment announces.
//!
//! Every collective of a communicator has a sequence number, every message one per pair of
//! ranks; the ranks match calls by these numbers. A call outside a group, or a whole group, is
//! one [`Step`]: the first of its posts to run reserves all the numbers the step takes (its
//! collectives, then its payload-file all-reduces' second phases, then its messages per peer)
//! and each call's number is its place in call order within them, so the numbers do not
//! depend on which stream of a group posts first. The last post releases the reservation, so
//! each launch of a captured graph takes new numbers.
//!
//! What a rank announces (collectives posted and done, messages sent and received) is a
//! [`Prefix`]: with a group over several streams the calls finish out of order, and a counter
//! may only claim numbers whose every predecessor is there too.

use crate::lock;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The numbers a rank has handed out: collectives, messages per peer.
pub(crate) struct Counters {
    pub(crate) collectives: AtomicU64,
    pub(crate) sent: Vec<AtomicU64>,
    pub(crate) received: Vec<AtomicU64>,
}

impl Counters {
    pub(crate) fn new(nranks: usize) -> Counters {
        Counters {
            collectives: AtomicU64::new(0),
            sent: (0..nranks).map(|_| AtomicU64::new(0)).collect(),
            received: (0..nranks).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// A counter announced in the control segment that covers a prefix: numbers marked out of
/// order (calls of one group on several streams) count once the ones before them are marked.
#[derive(Default)]
pub(crate) struct Prefix {
    upto: u64,
    ahead: BTreeSet<u64>,
}

impl Prefix {
    /// Marks `n`; the new prefix if it grew.
    pub(crate) fn mark(&mut self, n: u64) -> Option<u64> {
        if n <= self.upto {
            return None;
        }
        self.ahead.insert(n);
        let before = self.upto;
        while self.ahead.remove(&(self.upto + 1)) {
            self.upto += 1;
        }
        (self.upto > before).then_some(self.upto)
    }
}

/// Where a posted call's numbers lie within its step.
#[derive(Clone, Copy)]
pub(crate) enum Position {
    /// The `index`-th collective of the step (first phase).
    Collective(u64),
    /// The second phase of the step's `index`-th payload-file all-reduce.
    Gather(u64),
    /// The `index`-th message of the step to `peer`.
    Send { peer: usize, index: u64 },
    /// The `index`-th message of the step from `peer`.
    Recv { peer: usize, index: u64 },
    /// No number of its own (an in-process all-reduce's end barrier).
    None,
}

/// A call outside a group, or a whole group: the numbers it takes, reserved by its first post
/// (so they follow call order, whichever stream of a group posts first) and released for the
/// next graph launch by its last.
pub(crate) struct Step {
    pub(crate) collectives: u64,
    pub(crate) gathers: u64,
    pub(crate) sends: Vec<u64>,
    pub(crate) recvs: Vec<u64>,
    /// Posts that take a number.
    pub(crate) posts: usize,
    reserved: Mutex<Option<Reserved>>,
}

/// A step's first numbers, while its posts run.
struct Reserved {
    coll: u64,
    sent: Vec<u64>,
    recv: Vec<u64>,
    posts_left: usize,
}

/// A posted call's numbers.
#[derive(Clone, Copy)]
pub(crate) struct Numbers {
    /// The step's place in the rank's program: the first collective number it takes (or
    /// would take: a step of messages only has the number of the next collective). Ranks
    /// agree on it as long as they agree on the collectives before.
    pub(crate) base: u64,
    pub(crate) seq: u64,
    /// The range of collectives compared together (a group's; a second phase's own; for a
    /// receive, its group's collectives, whose verdict it waits for; 0 for none).
    pub(crate) first: u64,
    pub(crate) last: u64,
}

impl Step {
    /// A step of no calls yet, for `nranks` ranks.
    pub(crate) fn new(nranks: usize) -> Step {
        Step {
            collectives: 0,
            gathers: 0,
            sends: vec![0; nranks],
            recvs: vec![0; nranks],
            posts: 0,
            reserved: Mutex::new(None),
        }
    }

    /// The numbers of the call at `position` (a post of this step), taken from `counters`.
    pub(crate) fn numbers(&self, counters: &Counters, position: Position) -> Numbers {
        let mut reserved = lock(&self.reserved);
        let r = reserved.get_or_insert_with(|| {
            let take = |counter: &AtomicU64, n: u64| counter.fetch_add(n, Ordering::AcqRel) + 1;
            Reserved {
                coll: take(&counters.collectives, self.collectives + self.gathers),
                sent: (counters.sent.iter().zip(&self.sends))
                    .map(|(counter, &n)| take(counter, n))
                    .collect(),
                recv: (counters.received.iter().zip(&self.recvs))
                    .map(|(counter, &n)| take(counter, n))
                    .collect(),
                posts_left: self.posts,
            }
        });
        let base = r.coll;
        let group_last = r.coll + self.collectives.max(1) - 1;
        let numbers = match position {
            Position::Collective(index) => Numbers {
                base,
                seq: r.coll + index,
                first: r.coll,
                last: group_last,
            },
            Position::Gather(index) => {
                let seq = r.coll + self.collectives + index;
                Numbers {
                    base,
                    seq,
                    first: seq,
                    last: seq,
                }
            }
            Position::Send { peer, index } => Numbers {
                base,
                seq: r.sent[peer] + index,
                first: 0,
                last: 0,
            },
            // A receive of a group with collectives takes the group's verdict: it writes
            // nothing when they fail.
            Position::Recv { peer, index } => Numbers {
                base,
                seq: r.recv[peer] + index,
                first: if self.collectives > 0 { r.coll } else { 0 },
                last: if self.collectives > 0 { group_last } else { 0 },
            },
            Position::None => Numbers {
                base,
                seq: 0,
                first: 0,
                last: 0,
            },
        };
        if !matches!(position, Position::None) {
            r.posts_left -= 1;
            if r.posts_left == 0 {
                *reserved = None;
            }
        }
        numbers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_count_numbers_marked_out_of_order_once_the_gap_is_filled() {
        let mut prefix = Prefix::default();
        assert_eq!(prefix.mark(2), None);
        assert_eq!(prefix.mark(3), None);
        assert_eq!(prefix.mark(1), Some(3));
        assert_eq!(prefix.mark(2), None);
        assert_eq!(prefix.mark(4), Some(4));
    }

    #[test]
    fn a_step_numbers_its_calls_in_call_order_and_releases_them_after_its_last_post() {
        let counters = Counters::new(2);
        let mut step = Step::new(2);
        step.collectives = 2;
        step.gathers = 1;
        step.sends[1] = 1;
        step.posts = 4;
        // Posts in another order than the calls: the numbers follow the calls.
        let second = step.numbers(&counters, Position::Collective(1));
        assert_eq!(
            (second.base, second.seq, second.first, second.last),
            (1, 2, 1, 2)
        );
        let send = step.numbers(&counters, Position::Send { peer: 1, index: 0 });
        assert_eq!(send.seq, 1);
        let gather = step.numbers(&counters, Position::Gather(0));
        assert_eq!((gather.seq, gather.first, gather.last), (3, 3, 3));
        let first = step.numbers(&counters, Position::Collective(0));
        assert_eq!((first.seq, first.first, first.last), (1, 1, 2));
        // The next launch takes new numbers.
        let again = step.numbers(&counters, Position::Collective(0));
        assert_eq!((again.base, again.seq), (4, 4));
    }
}
