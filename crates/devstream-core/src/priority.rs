//! Stream priorities and their one normalisation rule.

use crate::{Error, Result};

/// A stream priority as the user asks for it.
///
/// Native numbers follow CUDA: a lower number is a higher priority. A backend turns a
/// `Priority` into its native number with [`PriorityRange::normalize`], the one rule shared by
/// every backend.
///
/// ```
/// use devstream_core::Priority;
/// assert_eq!(Priority::from_paddle(1).unwrap(), Priority::High);
/// assert_eq!(Priority::from_paddle(2).unwrap(), Priority::Normal);
/// assert!(Priority::from_paddle(3).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Priority {
    /// The greatest priority the place offers.
    High,
    /// The backend's default priority (0).
    #[default]
    Normal,
    /// A native priority number, clamped into the place's range.
    Native(i32),
}

impl Priority {
    /// Paddle's convention: 1 is high, 2 is normal; anything else is
    /// [`Error::InvalidArgument`].
    pub fn from_paddle(value: i64) -> Result<Priority> {
        match value {
            1 => Ok(Priority::High),
            2 => Ok(Priority::Normal),
            other => Err(Error::InvalidArgument(format!(
                "Paddle stream priority must be 1 (high) or 2 (normal), got {other}"
            ))),
        }
    }
}

/// The native priority range of a place, as `cuCtxGetStreamPriorityRange` reports it:
/// `least` is the lowest priority (numerically largest, usually 0), `greatest` the highest
/// (numerically smallest, e.g. -5 on an H200). A place without priorities has `{0, 0}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PriorityRange {
    /// The lowest priority's native number.
    pub least: i32,
    /// The highest priority's native number.
    pub greatest: i32,
}

impl PriorityRange {
    /// The range of a place without priorities.
    pub const NONE: PriorityRange = PriorityRange {
        least: 0,
        greatest: 0,
    };

    /// Whether this range has more than one level.
    #[inline]
    pub fn has_priorities(self) -> bool {
        self.least != self.greatest
    }

    /// Number of distinct levels in the range.
    pub fn levels(self) -> u32 {
        self.least.abs_diff(self.greatest) + 1
    }

    /// Clamps a native number into the range (torch semantics: out-of-range values map to the
    /// nearest end).
    ///
    /// ```
    /// let r = devstream_core::PriorityRange { least: 0, greatest: -5 };
    /// assert_eq!(r.clamp(7), 0);
    /// assert_eq!(r.clamp(-9), -5);
    /// assert_eq!(r.clamp(-2), -2);
    /// ```
    #[inline]
    pub fn clamp(self, native: i32) -> i32 {
        let (lo, hi) = if self.greatest <= self.least {
            (self.greatest, self.least)
        } else {
            (self.least, self.greatest)
        };
        native.clamp(lo, hi)
    }

    /// The one normalisation rule: `High` is the greatest priority, `Normal` the default (0,
    /// clamped into the range), `Native(n)` is `n` clamped.
    #[inline]
    pub fn normalize(self, priority: Priority) -> i32 {
        match priority {
            Priority::High => self.greatest,
            Priority::Normal => self.clamp(0),
            Priority::Native(n) => self.clamp(n),
        }
    }

    /// Reads a native number back as a [`Priority`]: the greatest level of a range with
    /// priorities is `High`, the default level is `Normal`, anything else is `Native(n)`.
    ///
    /// ```
    /// use devstream_core::{Priority, PriorityRange};
    /// let r = PriorityRange { least: 0, greatest: -5 };
    /// assert_eq!(r.classify(-5), Priority::High);
    /// assert_eq!(r.classify(0), Priority::Normal);
    /// assert_eq!(r.classify(-2), Priority::Native(-2));
    /// ```
    #[inline]
    pub fn classify(self, native: i32) -> Priority {
        if self.has_priorities() && native == self.greatest {
            Priority::High
        } else if native == self.clamp(0) {
            Priority::Normal
        } else {
            Priority::Native(native)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paddle_priorities() {
        assert_eq!(Priority::from_paddle(1).unwrap(), Priority::High);
        assert_eq!(Priority::from_paddle(2).unwrap(), Priority::Normal);
        for bad in [0, 3, -1, i64::MAX] {
            assert!(matches!(
                Priority::from_paddle(bad),
                Err(Error::InvalidArgument(_))
            ));
        }
    }

    #[test]
    fn no_priority_range_maps_everything_to_zero() {
        let r = PriorityRange::NONE;
        assert!(!r.has_priorities());
        for p in [
            Priority::High,
            Priority::Normal,
            Priority::Native(-3),
            Priority::Native(9),
        ] {
            assert_eq!(r.normalize(p), 0);
        }
        assert_eq!(r.classify(0), Priority::Normal);
    }

    proptest! {
        #[test]
        fn normalized_is_always_in_range(least in -8i32..8, width in 0i32..8, n in any::<i32>()) {
            let r = PriorityRange { least, greatest: least - width };
            for p in [Priority::High, Priority::Normal, Priority::Native(n)] {
                let v = r.normalize(p);
                prop_assert!(v >= r.greatest && v <= r.least);
                prop_assert_eq!(r.clamp(v), v);
            }
            prop_assert_eq!(r.normalize(Priority::High), r.greatest);
            let v = r.normalize(Priority::Native(n));
            prop_assert_eq!(r.normalize(r.classify(v)), v);
        }
    }
}
