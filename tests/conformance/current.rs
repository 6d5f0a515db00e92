//! Current streams: a per-thread, per-place stack; guards restore in LIFO order; the place's
//! default stream when empty; `set_current_stream` returns the previous one (CuPy's `use()`).
//!
//! Each check runs on a fresh thread so that it starts from an empty stack whatever ran before on
//! the test thread.

use crate::harness::{for_each_place, places_under_test};
use devstream::{current_stream, set_current_stream, Place, Result, Stream};

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
