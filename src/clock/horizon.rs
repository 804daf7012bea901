//! Refusing readings that a primitive's own clock cannot have produced yet.
//!
//! Every decision has an `_at(now)` form, so a writer deciding a batch reads the clock once.
//! The reading is the caller's, and a buggy one (an uninitialised `u64::MAX`, a reading from
//! another clock with an earlier origin) would otherwise move state that every other caller
//! sees: a reclaim judging every drained entry full, entries dated past any real reading that
//! never refill, a volume window header moved to the last window for the life of the process.
//!
//! So a primitive that owns a clock checks every reading handed to it against that clock: a
//! reading more than [`READING_TOLERANCE_NS`] ahead of the clock's own latest reading is
//! refused with a [`ReadingAhead`] error and changes nothing. A reading that is late (older
//! than the clock) is always accepted: the arithmetic treats it as an earlier moment, which can
//! only refuse, never grant.
//!
//! The check costs one relaxed load and a compare: the horizon caches the latest clock reading
//! seen plus the tolerance, and the clock is read again only when a reading passes the cached
//! horizon, that is at most once per tolerance of real time for readings taken from the clock.

use super::Clock;
use crate::sync::atomic::{AtomicU64, Ordering};
use std::fmt;
use std::time::Duration;

/// How far ahead of a primitive's own clock a handed reading may be: one millisecond.
///
/// Readings taken from the primitive's own clock (`primitive.clock().now_ns()`) are never
/// ahead of it; the tolerance absorbs TSC readings taken on another core (see
/// `QuantaClock`), which can lead by less than a millisecond.
pub const READING_TOLERANCE_NS: u64 = 1_000_000;

/// A reading refused because it lies ahead of what the primitive's clock has produced.
///
/// Nothing was charged or changed. The fix is on the caller's side: hand `_at` methods readings
/// taken from the primitive's own clock (`.clock().now_ns()`), not from another clock or a
/// computed value.
///
/// ```
/// use admit::limiter::{LimiterRefused, InvalidCharge};
/// use admit::{BucketConfig, Clock, Limiter};
/// use std::time::Duration;
///
/// let limiter = Limiter::builder().build([BucketConfig::new(1, Duration::from_millis(10))?])?;
/// match limiter.try_acquire_at("a", 0, u64::MAX) {
///     Err(LimiterRefused::Invalid(InvalidCharge::ReadingAhead(ahead))) => {
///         assert!(ahead.clock_ns() <= limiter.clock().now_ns());
///     }
///     other => panic!("{other:?}"),
/// }
/// assert!(limiter.try_acquire_at("a", 0, limiter.clock().now_ns()).is_ok(), "nothing moved");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadingAhead {
    reading_ns: u64,
    clock_ns: u64,
}

impl ReadingAhead {
    /// The refused reading, in nanoseconds of the primitive's clock.
    pub fn reading_ns(&self) -> u64 {
        self.reading_ns
    }

    /// The clock's own reading when the reading was refused.
    pub fn clock_ns(&self) -> u64 {
        self.clock_ns
    }

    /// How far ahead of the clock the reading was.
    pub fn ahead_by(&self) -> Duration {
        Duration::from_nanos(self.reading_ns.saturating_sub(self.clock_ns))
    }
}

impl fmt::Display for ReadingAhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reading of {} ns refused: it is {:?} ahead of the clock of the primitive it was handed to ({} ns), more \
             than the {} ns tolerated; nothing was charged. Pass readings taken from that \
             primitive's own clock (`.clock().now_ns()`)",
            self.reading_ns,
            self.ahead_by(),
            self.clock_ns,
            READING_TOLERANCE_NS
        )
    }
}

impl std::error::Error for ReadingAhead {}

/// The latest clock reading seen plus [`READING_TOLERANCE_NS`]: readings up to it pass
/// without reading the clock. See the module docs.
#[derive(Debug)]
pub(crate) struct Horizon {
    bound: AtomicU64,
}

impl Horizon {
    /// A horizon that reads the clock on the first reading above the tolerance.
    pub(crate) fn new() -> Self {
        Self {
            bound: AtomicU64::new(READING_TOLERANCE_NS),
        }
    }

    /// `Ok` if `now_ns` is at most the tolerance ahead of `clock`.
    #[inline]
    pub(crate) fn admit(&self, now_ns: u64, clock: &impl Clock) -> Result<(), ReadingAhead> {
        // Relaxed: the bound is a cache of clock readings and publishes nothing else; a stale
        // (lower) value only sends us to `refresh`, which reads the clock itself.
        if now_ns <= self.bound.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.refresh(now_ns, clock)
    }

    #[cold]
    fn refresh(&self, now_ns: u64, clock: &impl Clock) -> Result<(), ReadingAhead> {
        let clock_ns = clock.now_ns();
        let bound = clock_ns.saturating_add(READING_TOLERANCE_NS);
        // Relaxed: as in `admit`; fetch_max keeps the highest bound any thread computed, and
        // every bound stored is a real clock reading plus the tolerance.
        self.bound.fetch_max(bound, Ordering::Relaxed);
        if now_ns <= bound {
            Ok(())
        } else {
            Err(ReadingAhead {
                reading_ns: now_ns,
                clock_ns,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn readings_up_to_the_tolerance_ahead_pass_and_later_ones_are_refused() {
        let clock = ManualClock::starting_at(5_000_000);
        let h = Horizon::new();
        assert!(h.admit(0, &clock).is_ok(), "late readings always pass");
        assert!(h.admit(5_000_000 + READING_TOLERANCE_NS, &clock).is_ok());
        let err = h
            .admit(5_000_001 + READING_TOLERANCE_NS, &clock)
            .unwrap_err();
        assert_eq!(err.clock_ns(), 5_000_000);
        assert_eq!(err.ahead_by(), Duration::from_nanos(1_000_001));
        assert!(h.admit(u64::MAX, &clock).is_err());
        clock.advance_ns(10);
        assert!(h.admit(5_000_001 + READING_TOLERANCE_NS, &clock).is_ok());
        assert!(err.to_string().contains("clock().now_ns()"));
    }

    #[test]
    fn a_clock_set_back_keeps_the_horizon_it_reached() {
        let clock = ManualClock::starting_at(50_000_000);
        let h = Horizon::new();
        assert!(h.admit(50_000_000, &clock).is_ok());
        clock.set_ns(0);
        assert!(h.admit(50_000_000, &clock).is_ok());
    }
}
