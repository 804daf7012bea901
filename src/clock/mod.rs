//! Where every decision gets its time from.
//!
//! A [`Clock`] answers one question: how many nanoseconds have passed since the clock's own
//! origin. Readings are monotonic (a wall-clock step can never mint a token) and are plain
//! `u64` values, so a writer that decides a batch reads the clock once and hands the same
//! reading to every `_at(now)` call: `Instant::now()` costs tens of nanoseconds, about ten times
//! an uncontended compare-and-swap.
//!
//! * [`RecentClock`] is the default: one relaxed load of a process-wide time that a
//!   background thread refreshes every [`RECENT_REFRESH`] (0.5 ms) from `Instant`. At most
//!   that stale, never early, monotonic across threads (see [`RecentClock`]).
//! * [`MonotonicClock`] reads [`std::time::Instant`] on every reading: exact to the
//!   nanosecond, no thread, and tens of nanoseconds a reading.
//! * [`ManualClock`] is for tests and simulations: time moves only when told, and clones share
//!   one time, so no test ever sleeps to observe time.
//! * `QuantaClock` (feature `quanta`) reads the TSC through `quanta`, about half the cost of
//!   `Instant::now` here (`git show c9901be:docs/benchmarks.md`, "bucket"). TSC readings
//!   taken on different cores have been reported to go backwards (governor's issue 299), so
//!   this clock clamps: a reading never goes back a tick (a millisecond, the unit of every
//!   decision).
//!
//! No decision in this crate reads a wall clock.

mod horizon;
mod recent;
pub(crate) mod tick;

#[cfg(admit_loom)]
#[doc(hidden)]
pub use recent::LoomRecentTime;
pub use recent::{RecentClock, RECENT_REFRESH};

pub(crate) use horizon::Horizon;
pub use tick::{ReadingAhead, READING_TOLERANCE_NS};

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::Arc;
use std::time::{Duration, Instant};

/// A monotonic source of nanoseconds since the clock's own origin.
///
/// Implementations must never return a reading smaller than one they returned before on any
/// thread. The crate's arithmetic is also safe against a reading that does go backwards (it is
/// treated as an earlier moment, which can only refuse, never grant), but the promise keeps
/// retry waits honest.
///
/// A clock of your own (a runtime's cached time, say) only has to count nanoseconds:
///
/// ```
/// use admit::{BucketConfig, Clock, Limiter};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::Duration;
///
/// /// Time advanced by the caller's event loop once per tick.
/// struct LoopTime(AtomicU64);
///
/// impl Clock for LoopTime {
///     fn now_ns(&self) -> u64 {
///         // Relaxed: the reading orders no other data, and coherence on this one word
///         // already keeps each thread's readings from going back.
///         self.0.load(Ordering::Relaxed)
///     }
/// }
///
/// let limiter = Limiter::builder().build_with_clock([BucketConfig::new(1, Duration::from_millis(10))?], LoopTime(AtomicU64::new(0)))?;
/// assert!(limiter.try_acquire("a", 0).is_ok());
/// assert!(limiter.try_acquire("a", 0).is_err());
/// limiter.clock().0.store(10_000_000, Ordering::Relaxed); // the loop moved 10 ms on
/// assert!(limiter.try_acquire("a", 0).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Clock: Send + Sync {
    /// Nanoseconds since this clock's origin.
    fn now_ns(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

/// A clock that reads [`Instant`] every time: nanoseconds since the moment it was created.
///
/// Exact, and costs a vDSO call per reading; the default [`RecentClock`] costs one load and is
/// at most [`RECENT_REFRESH`] behind.
///
/// ```
/// use admit::{Clock, MonotonicClock};
///
/// let clock = MonotonicClock::new();
/// let (a, b) = (clock.now_ns(), clock.now_ns());
/// assert!(b >= a, "never goes back");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        duration_to_ns(self.origin.elapsed())
    }
}

/// Whole nanoseconds of `d`, saturating at `u64::MAX` (584 years).
pub(crate) fn duration_to_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A clock that moves only when told to. Clones share one time.
///
/// For tests and simulations: hand a clone to the primitive, keep one, and move time without
/// sleeping.
///
/// ```
/// use admit::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let theirs = clock.clone();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(theirs.now_ns(), 250_000_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading zero.
    pub fn new() -> Self {
        Self::starting_at(0)
    }

    /// A clock reading `ns`.
    pub fn starting_at(ns: u64) -> Self {
        Self {
            now: Arc::new(AtomicU64::new(ns)),
        }
    }

    /// Sets the reading. Setting it backwards is allowed, to test how callers cope.
    pub fn set_ns(&self, ns: u64) {
        // Relaxed: the reading is the only datum; nothing else is published with it.
        self.now.store(ns, Ordering::Relaxed);
    }

    /// Moves the reading forward by `d` (saturating) and returns the new reading.
    pub fn advance(&self, d: Duration) -> u64 {
        self.advance_ns(duration_to_ns(d))
    }

    /// Moves the reading forward by `ns` (saturating) and returns the new reading.
    pub fn advance_ns(&self, ns: u64) -> u64 {
        // Relaxed: as in `set_ns`, the counter carries no other data; the RMW keeps
        // concurrent advances from losing each other.
        let before = self
            .now
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(ns))
            })
            .unwrap_or_else(|t| t);
        before.saturating_add(ns)
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        // Relaxed: see `set_ns`.
        self.now.load(Ordering::Relaxed)
    }
}

#[cfg(feature = "quanta")]
pub use self::tsc::QuantaClock;

#[cfg(feature = "quanta")]
mod tsc {
    use super::tick::TICK_NS;
    use super::{AtomicU64, Clock, Ordering};

    /// A TSC clock (via `quanta`) whose readings never go back a tick.
    ///
    /// `quanta` readings taken on different cores can disagree (governor's issue 299). This
    /// clock keeps the latest reading it has returned, updated once per tick (millisecond, the
    /// unit every decision is made in), and never returns less: a thread on a lagging core
    /// sees "no time passed" rather than "time went back". Within one tick a reading may be
    /// below an earlier one by less than a millisecond, which no decision can observe. The
    /// clamp costs one relaxed load per reading and one RMW per tick, not an RMW per reading.
    /// The token-bucket arithmetic is safe without it (an older reading only ever refuses);
    /// the clamp keeps reported waits honest.
    ///
    /// ```
    /// use admit::clock::QuantaClock;
    /// use admit::{BucketConfig, Clock, Limiter};
    ///
    /// let limiter = Limiter::builder().build_with_clock([BucketConfig::per_second(100)?], QuantaClock::new())?;
    /// let now = limiter.clock().now_ns(); // a TSC reading, never behind an earlier one by a tick
    /// assert!(limiter.try_acquire_at("alice", 0, now).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[derive(Debug)]
    #[cfg_attr(docsrs, doc(cfg(feature = "quanta")))]
    pub struct QuantaClock {
        clock: quanta::Clock,
        origin: quanta::Instant,
        pub(super) high_water: AtomicU64,
    }

    impl QuantaClock {
        /// A clock whose origin is now.
        pub fn new() -> Self {
            let clock = quanta::Clock::new();
            let origin = clock.now();
            Self {
                clock,
                origin,
                high_water: AtomicU64::new(0),
            }
        }
    }

    impl Default for QuantaClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for QuantaClock {
        fn now_ns(&self) -> u64 {
            let raw =
                super::duration_to_ns(self.clock.now().saturating_duration_since(self.origin));
            // Relaxed: the clamp needs only this one location's values, and publishes nothing.
            let seen = self.high_water.load(Ordering::Relaxed);
            if raw / TICK_NS > seen / TICK_NS {
                // A new tick: record it (fetch_max, so racing threads keep the latest).
                // Relaxed: as above.
                self.high_water.fetch_max(raw, Ordering::Relaxed);
                raw
            } else {
                raw.max(seen)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_one_time() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_millis(3));
        assert_eq!(b.now_ns(), 3_000_000);
        b.set_ns(7);
        assert_eq!(a.now_ns(), 7);
    }

    #[test]
    fn manual_clock_saturates_instead_of_wrapping() {
        let c = ManualClock::starting_at(u64::MAX - 1);
        assert_eq!(c.advance_ns(10), u64::MAX);
        assert_eq!(c.now_ns(), u64::MAX);
    }

    #[test]
    fn monotonic_clock_never_goes_back() {
        let c = MonotonicClock::new();
        let mut last = c.now_ns();
        for _ in 0..1000 {
            let now = c.now_ns();
            assert!(now >= last);
            last = now;
        }
    }

    #[cfg(feature = "quanta")]
    #[test]
    fn quanta_clock_never_goes_back_a_tick() {
        use super::tick::TICK_NS;
        let c = QuantaClock::new();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut last = c.now_ns() / TICK_NS;
                    for _ in 0..200_000 {
                        let now = c.now_ns() / TICK_NS;
                        assert!(now >= last);
                        last = now;
                    }
                });
            }
        });
        // A reading below the high-water mark of its tick is clamped up to it.
        c.high_water.store(u64::MAX / 2, Ordering::Relaxed);
        assert_eq!(c.now_ns(), u64::MAX / 2);
    }
}
