//! The horizon: the latest clock reading a primitive has seen plus [`READING_TOLERANCE_NS`].
//! Readings up to it are admitted without reading the clock; a later one reads the clock and
//! raises it, or is refused as [`ReadingAhead`] (see "Readings ahead of the clock" in
//! `clock::tick`). It is also the reading a limiter change to a faster rate is counted at: no
//! decision was admitted later.
//!
//! # Freezing
//!
//! The bound is kept even; an odd bound is *frozen*. [`Horizon::freeze`] (one freezer at a
//! time: a limiter's change, under its change mutex) raises the bound from the clock, sets the
//! low bit, and answers the frozen bound `F`; until the freeze is dropped no reading above `F`
//! is admitted, and the bound does not move. The holder publishes its change, then drops the
//! freeze, which clears the bit.
//!
//! # Invariants
//!
//! 1. **Every reading admitted is at most the bound loaded or raised when it was admitted**,
//!    and the bound never decreases except by the one nanosecond a freeze's drop takes back.
//!    (`readings_up_to_the_tolerance_ahead_pass_and_later_ones_are_refused`,
//!    `a_clock_set_back_keeps_the_horizon_it_reached`.)
//! 2. **A freeze answers a bound no reading admitted before its drop exceeds.** While frozen,
//!    the bound is `F` and only a drop moves it, so a reading admitted then is at most `F`; a
//!    reading admitted before the freeze was at most a bound the freeze's RMW read or
//!    overwrote, so at most `F` too. (`a_frozen_horizon_admits_nothing_above_its_bound`.)
//! 3. **A reading admitted against a bound raised after a freeze's drop sees what the
//!    holder published before the drop.** The drop is a release RMW; every raise is an RMW
//!    from the value before it, so it continues the drop's release sequence, and every
//!    admission loads the bound with acquire. (Loom: `loom-tests/tests/live.rs`,
//!    `a_faster_change_preempted_after_its_read_racing_a_drain`.)
//!
//! A reading above a frozen bound is refused ([`ReadingAhead::while_a_change_lands`]),
//! nothing charged: it could be decided neither under the old rate (the change is counted
//! before it) nor under the new one (not yet published), and a decision never waits for
//! another thread. It happens only when the reading is more than the tolerance past the
//! change's own clock read, that is when the changing thread is preempted between its freeze
//! and its drop. (`a_reading_above_a_frozen_bound_is_refused_until_the_drop`; loom:
//! `a_faster_change_preempted_after_its_read_racing_a_drain`.)

use super::tick::{ReadingAhead, READING_TOLERANCE_NS};
use super::Clock;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The low bit of the bound: set while frozen.
const FROZEN: u64 = 1;

/// The latest clock reading seen plus [`READING_TOLERANCE_NS`]: readings up to it pass
/// without reading the clock. See the module docs.
#[derive(Debug)]
pub(crate) struct Horizon {
    bound: AtomicU64,
}

/// A frozen horizon (see "Freezing"): dropped, it thaws.
#[derive(Debug)]
pub(crate) struct Frozen<'a> {
    horizon: &'a Horizon,
    bound: u64,
}

impl Frozen<'_> {
    /// The frozen bound: no reading admitted before the drop exceeds it (invariant 2).
    pub(crate) fn bound(&self) -> u64 {
        self.bound
    }
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        // Release: a reading admitted against this value, or a bound raised from it (an RMW,
        // so the release sequence continues), is ordered after what the holder published
        // before the drop (invariant 3).
        self.horizon.bound.fetch_and(!FROZEN, Ordering::Release);
    }
}

impl Horizon {
    /// A horizon that reads the clock on the first reading above the tolerance.
    pub(crate) fn new() -> Self {
        Self {
            bound: AtomicU64::new(READING_TOLERANCE_NS),
        }
    }

    /// The bound, for the reference models to compare theirs with.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn bound(&self) -> u64 {
        self.bound.load(Ordering::Relaxed)
    }

    /// `Ok` if `now_ns` is at most the tolerance ahead of `clock`.
    #[inline]
    pub(crate) fn admit(&self, now_ns: u64, clock: &impl Clock) -> Result<(), ReadingAhead> {
        // Acquire: a bound raised after a freeze's drop orders this admission after what the
        // freeze's holder published (invariant 3); a stale (lower) value only sends us to
        // `refresh`, which reads the clock itself.
        if now_ns <= self.bound.load(Ordering::Acquire) {
            return Ok(());
        }
        self.refresh(now_ns, clock)
    }

    #[cold]
    fn refresh(&self, now_ns: u64, clock: &impl Clock) -> Result<(), ReadingAhead> {
        loop {
            // Acquire: as in `admit`.
            let bound = self.bound.load(Ordering::Acquire);
            if bound & FROZEN != 0 {
                if now_ns <= bound {
                    return Ok(());
                }
                // Frozen below this reading: refused, never waited for (see the module docs).
                let at_ns = bound & !FROZEN;
                return Err(ReadingAhead {
                    reading_ns: now_ns,
                    clock_ns: at_ns.saturating_sub(READING_TOLERANCE_NS),
                    landing_at_ns: Some(at_ns),
                });
            }
            let clock_ns = clock.now_ns();
            let latest = clock_ns.saturating_add(READING_TOLERANCE_NS);
            if latest & !FROZEN > bound {
                if let Err(_moved) = self.bound.compare_exchange(
                    bound,
                    latest & !FROZEN,
                    // AcqRel: continues a freeze's release sequence (invariant 3), and an
                    // admission that acquires the raised bound sees what it saw.
                    Ordering::AcqRel,
                    // Acquire: look again at whatever moved it (a raise, or a freeze).
                    Ordering::Acquire,
                ) {
                    continue;
                }
            }
            return if now_ns <= latest {
                Ok(())
            } else {
                Err(ReadingAhead {
                    reading_ns: now_ns,
                    clock_ns,
                    landing_at_ns: None,
                })
            };
        }
    }

    /// Raises the bound from `clock` and freezes it (see "Freezing"). One freezer at a time:
    /// the caller holds a lock no other freezer takes.
    pub(crate) fn freeze(&self, clock: &impl Clock) -> Frozen<'_> {
        // Raises the bound to the clock's reading plus the tolerance (a reading of 0 always
        // passes: nobody else freezes).
        let _ = self.refresh(0, clock);
        // AcqRel: the freeze reads the latest bound in modification order (invariant 2), and
        // a reader of the frozen value sees what the holder wrote before.
        let bound = self.bound.fetch_or(FROZEN, Ordering::AcqRel) | FROZEN;
        Frozen {
            horizon: self,
            bound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::time::Duration;

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
        let frozen = h.freeze(&clock);
        assert!(frozen.bound() >= 50_000_000, "a freeze keeps the horizon");
    }

    #[test]
    fn a_frozen_horizon_admits_nothing_above_its_bound() {
        let clock = ManualClock::starting_at(5_000_000);
        let h = Horizon::new();
        let frozen = h.freeze(&clock);
        let bound = frozen.bound();
        assert_eq!(bound, 5_000_000 + READING_TOLERANCE_NS + 1);
        assert!(h.admit(bound, &clock).is_ok());
        clock.advance_ns(10_000_000);
        assert!(h.admit(bound, &clock).is_ok());
        assert_eq!(
            h.bound.load(Ordering::Relaxed),
            bound,
            "the clock moved, the bound not"
        );
        drop(frozen);
        assert!(h.admit(15_000_000, &clock).is_ok(), "thawed, raised again");
        assert!(h.bound.load(Ordering::Relaxed) >= 15_000_000);
    }

    /// The changing thread preempted between its freeze and its drop: a later reading is
    /// refused at once, saying so, and moves nothing; it passes after the drop. Made to wait
    /// instead (the yield this replaced), this single-threaded test would never end.
    #[test]
    fn a_reading_above_a_frozen_bound_is_refused_until_the_drop() {
        let clock = ManualClock::starting_at(5_000_000);
        let h = Horizon::new();
        let frozen = h.freeze(&clock);
        let bound = frozen.bound();
        clock.advance_ns(10_000_000);
        let refused = h.admit(bound + 1, &clock).unwrap_err();
        assert!(refused.while_a_change_lands());
        assert_eq!(refused.reading_ns(), bound + 1);
        assert_eq!(refused.clock_ns(), 5_000_000, "the change's own clock read");
        assert!(refused.to_string().contains("being published"), "{refused}");
        assert_eq!(h.bound.load(Ordering::Relaxed), bound, "nothing moved");
        drop(frozen);
        assert!(
            h.admit(bound + 1, &clock).is_ok(),
            "the same reading, once landed"
        );
        let ahead = h.admit(u64::MAX, &clock).unwrap_err();
        assert!(
            !ahead.while_a_change_lands(),
            "a reading ahead of the clock is not one"
        );
    }
}
