//! Current streams: per thread, per place; while guards live the newest living guard's stream is
//! current, whatever order they are dropped in; after the last guard, what was current before
//! the first; the place's default stream when nothing was made current; `set_current_stream`
//! returns the previous one (CuPy's `use()`).
//!
//! Each check runs on a fresh thread so that it starts from an empty stack whatever ran before on
//! the test thread.

use crate::harness::{for_each_place, places_under_test};
use devstream::{current_stream, set_current_stream, Place, Result, Stream, StreamGuard};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn on_fresh_thread(place: &Place, check: fn(&Place) -> Result<()>) -> Result<()> {
    let place = place.clone();
    std::thread::spawn(move || check(&place))
        .join()
        .unwrap_or_else(|payload| std::panic::resume_unwind(payload))
}

/// With nothing made current, the current stream is the place's default stream (the same one
/// every call).
#[test]
fn current_stream_is_the_default_when_nothing_is_current() {
    for_each_place(|place| {
        on_fresh_thread(place, |place| {
            let default = Stream::default_stream(place)?;
            assert_eq!(
                Stream::default_stream(place)?,
                default,
                "default_stream is one stream"
            );
            assert_eq!(default.place(), place);
            assert_eq!(current_stream(place)?, default);
            Ok(())
        })
    });
}

/// Guards nest and restore in LIFO order; after the last guard the default is current again.
#[test]
fn guards_restore_in_lifo_order() {
    for_each_place(|place| {
        on_fresh_thread(place, |place| {
            let default = Stream::default_stream(place)?;
            let (s1, s2, s3) = (
                Stream::new(place)?,
                Stream::new(place)?,
                Stream::new(place)?,
            );
            {
                let g1 = s1.make_current();
                assert_eq!(g1.place(), place);
                assert_eq!(current_stream(place)?, s1);
                {
                    let _g2 = s2.make_current();
                    assert_eq!(current_stream(place)?, s2);
                    {
                        let _g3 = s3.make_current();
                        assert_eq!(current_stream(place)?, s3);
                        // The same stream twice is fine.
                        let _again = s1.make_current();
                        assert_eq!(current_stream(place)?, s1);
                    }
                    assert_eq!(current_stream(place)?, s2);
                }
                assert_eq!(current_stream(place)?, s1);
            }
            assert_eq!(current_stream(place)?, default);
            Ok(())
        })
    });
}

/// The stack is per thread: another thread does not see this thread's current stream, and its
/// own guards do not change ours.
#[test]
fn current_stream_is_per_thread() {
    for_each_place(|place| {
        on_fresh_thread(place, |place| {
            let mine = Stream::new(place)?;
            let _guard = mine.make_current();
            let default = Stream::default_stream(place)?;
            let theirs = Stream::new(place)?;
            let p = place.clone();
            let (d, t) = (default.clone(), theirs.clone());
            std::thread::spawn(move || -> Result<()> {
                assert_eq!(
                    current_stream(&p)?,
                    d,
                    "another thread starts at the default"
                );
                let _g = t.make_current();
                assert_eq!(current_stream(&p)?, t);
                set_current_stream(&t)?;
                Ok(())
            })
            .join()
            .unwrap()?;
            assert_eq!(current_stream(place)?, mine, "another thread changed ours");
            Ok(())
        })
    });
}

/// The stack is per place: making a stream current on one place leaves every other place's
/// current stream alone.
#[test]
fn current_stream_is_per_place() {
    for_each_place(|place| {
        let place = place.clone();
        std::thread::spawn(move || -> Result<()> {
            let others: Vec<Place> = places_under_test()
                .into_iter()
                .filter(|p| *p != place)
                .collect();
            let before: Vec<Stream> = others.iter().map(current_stream).collect::<Result<_>>()?;
            let s = Stream::new(&place)?;
            let _guard = s.make_current();
            set_current_stream(&s)?;
            for (other, was) in others.iter().zip(&before) {
                assert_eq!(current_stream(other)?, *was, "{other} changed with {place}");
            }
            assert_eq!(current_stream(&place)?, s);
            Ok(())
        })
        .join()
        .unwrap()
    });
}

/// `set_current_stream` makes a stream current without a scope and returns the previous current
/// stream of the place (the default when the stack is empty).
#[test]
fn set_current_stream_returns_the_previous_one() {
    for_each_place(|place| {
        on_fresh_thread(place, |place| {
            let default = Stream::default_stream(place)?;
            let (s, t) = (Stream::new(place)?, Stream::new(place)?);
            assert_eq!(set_current_stream(&s)?, default);
            assert_eq!(current_stream(place)?, s);
            assert_eq!(set_current_stream(&t)?, s);
            assert_eq!(current_stream(place)?, t);
            assert_eq!(set_current_stream(&default)?, t);
            assert_eq!(current_stream(place)?, default);
            // Inside a guard's scope it replaces the guard's stream until the guard ends.
            assert_eq!(set_current_stream(&s)?, default);
            {
                let _g = t.make_current();
                let u = Stream::new(place)?;
                assert_eq!(set_current_stream(&u)?, t);
                assert_eq!(current_stream(place)?, u);
            }
            assert_eq!(
                current_stream(place)?,
                s,
                "the guard restores what was current before it"
            );
            Ok(())
        })
    });
}

/// The CuPy streams tutorial: `with s:` then `s.use()`, `Stream.null.use()`.
#[test]
fn cupy_tutorial_use_pattern() {
    for_each_place(|place| {
        on_fresh_thread(place, |place| {
            let s = Stream::new(place)?;
            {
                let _with_s = s.make_current();
                let current = current_stream(place)?;
                assert_eq!(current, s);
                // Work goes to the current stream.
                let done = current.record_event()?;
                crate::harness::sync(&s)?;
                assert!(done.query()?);
            }
            set_current_stream(&s)?; // s.use()
            assert_eq!(s, current_stream(place)?);
            set_current_stream(&Stream::default_stream(place)?)?; // Stream.null.use()
            assert_ne!(
                s,
                current_stream(place)?,
                "the tutorial's last assertion fails"
            );
            assert_eq!(current_stream(place)?, Stream::default_stream(place)?);
            Ok(())
        })
    });
}

/// Guards dropped out of order: the newest living guard's stream stays current; after the last
/// guard, what was current before the first (issue 12, item 9: `drop(ga)` with `gb` alive used to
/// make the default stream current).
#[test]
fn guards_dropped_out_of_order_keep_the_newest_living_guard_current() {
    for_each_place(|place| {
        on_fresh_thread(place, |place| {
            let (before, a, b, c) = (
                Stream::new(place)?,
                Stream::new(place)?,
                Stream::new(place)?,
                Stream::new(place)?,
            );
            set_current_stream(&before)?;
            let ga = a.make_current();
            let gb = b.make_current();
            drop(ga);
            assert_eq!(current_stream(place)?, b, "gb still lives");
            let gc = c.make_current();
            drop(gb);
            assert_eq!(current_stream(place)?, c, "gc still lives");
            // set_current_stream inside a guard lasts until that guard ends.
            assert_eq!(set_current_stream(&a)?, c);
            assert_eq!(current_stream(place)?, a);
            drop(gc);
            assert_eq!(
                current_stream(place)?,
                before,
                "what was current before the first guard"
            );
            Ok(())
        })
    });
}

/// One step of a random current-stream program.
#[derive(Debug, Clone)]
enum Step {
    /// `streams[i].make_current()`.
    MakeCurrent(usize),
    /// `set_current_stream(streams[i])`; the last index means the default stream.
    SetCurrent(usize),
    /// Drop the living guard at this index (modulo the number living).
    DropGuard(usize),
}

/// Random orders of make_current / set_current_stream / guard drops, against the rule: while
/// guards live, the newest living guard's stream (or a later `set_current_stream`) is current;
/// after the last guard, what was current before the first.
#[test]
fn any_order_of_guards_and_set_current_stream_follows_the_rule() {
    const STREAMS: usize = 3;
    for_each_place(|place| {
        let place = place.clone();
        std::thread::spawn(move || -> Result<()> {
            let mut streams: Vec<Stream> = (0..STREAMS)
                .map(|_| Stream::new(&place))
                .collect::<Result<_>>()?;
            streams.push(Stream::default_stream(&place)?);
            let step = prop_oneof![
                (0..STREAMS).prop_map(Step::MakeCurrent),
                (0..=STREAMS).prop_map(Step::SetCurrent),
                (0usize..8).prop_map(Step::DropGuard),
            ];
            let mut runner = TestRunner::new(Config {
                cases: 64,
                failure_persistence: None,
                ..Config::default()
            });
            let result = runner.run(&proptest::collection::vec(step, 0..32), |steps| {
                // Each program starts from the default on this thread.
                set_current_stream(&streams[STREAMS]).map_err(fail)?;
                let mut unscoped = STREAMS;
                let mut living: Vec<(StreamGuard, usize)> = Vec::new();
                for step in steps {
                    match step {
                        Step::MakeCurrent(i) => living.push((streams[i].make_current(), i)),
                        Step::SetCurrent(i) => {
                            let expected = living.last().map_or(unscoped, |(_, s)| *s);
                            let previous = set_current_stream(&streams[i]).map_err(fail)?;
                            prop_assert_eq!(&previous, &streams[expected]);
                            match living.last_mut() {
                                Some((_, s)) => *s = i,
                                None => unscoped = i,
                            }
                        }
                        Step::DropGuard(i) if !living.is_empty() => {
                            let i = i % living.len();
                            drop(living.remove(i));
                        }
                        Step::DropGuard(_) => {}
                    }
                    let expected = living.last().map_or(unscoped, |(_, s)| *s);
                    prop_assert_eq!(
                        current_stream(&place).map_err(fail)?,
                        streams[expected].clone()
                    );
                }
                drop(living);
                prop_assert_eq!(
                    current_stream(&place).map_err(fail)?,
                    streams[unscoped].clone()
                );
                Ok(())
            });
            if let Err(error) = result {
                panic!("{error}");
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|payload| std::panic::resume_unwind(payload))
    });
}

fn fail(error: devstream::Error) -> TestCaseError {
    TestCaseError::fail(error.to_string())
}
