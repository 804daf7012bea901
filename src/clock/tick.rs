//! The time kernel: a reading in nanoseconds is checked against the primitive's own clock, then
//! becomes a tick, the one unit every decision is made in; ticks become the waits callers are
//! told. A decision's time is all here: `horizon.admit(now_ns, clock)?`, then `tick_of(now_ns)`.
//!
//! It sits below everything that decides: the token-bucket arithmetic (`bucket::gcra`), the
//! entry table's word layout and the limiter's reclaim hint all import their time from here,
//! and nothing here imports from them.
//!
//! Time is counted in milliseconds since the clock's origin (readings are floored), matching
//! the configuration unit. With a refill span of at most [`MAX_SPAN_TICKS`] (2^40 ms),
//! `full_at <= now + span <= 2^42 − 1` fits [`TIME_BITS`] = 42 bits for every reading up to
//! [`MAX_NOW_TICK`] = `2^42 − 1 − 2^40` ms (3·2^40 ms less one, about 104.5 years of process
//! uptime). A reading beyond that is clamped to it: buckets then stop refilling rather than
//! wrapping. A [`TokenBucket`](crate::TokenBucket)'s word keeps 52 bits for `full_at` (for
//! microseconds) and counts up to that clamp.
//!
//! A keyed limiter's entry has one bit fewer: its table value is 42 bits and the top one is
//! its class's era bit (`limiter::era`), which leaves 41 for `full_at`. Counting milliseconds
//! it keeps `full_at` absolute there, so `now + span <= 2^41 − 1` bounds its readings at
//! `2^41 − 1 − 2^40` ms (2^40 ms less one, about 34.8 years of uptime,
//! `limiter::MAX_MILLIS_NOW_TICK`), and it counts every later reading as that instant, in its
//! decisions and in every answer (a wait, a peek, its overflow buckets). No 41-bit absolute
//! field holds 104 years of milliseconds (3.3·10^12 > 2^41 ≈ 2.2·10^12). Counting
//! microseconds it keeps an offset from a moving base (`limiter::epoch`) and counts up to
//! [`MAX_NOW_TICK`].
//!
//! # Readings ahead of the clock
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
//! The check costs one load and a compare: the horizon (`clock::horizon`) caches the latest
//! clock reading seen plus the tolerance, and the clock is read again only when a reading
//! passes the cached horizon, that is at most once per tolerance of real time for readings
//! taken from the clock.

use std::fmt;
use std::time::Duration;

/// Nanoseconds per tick.
pub(crate) const TICK_NS: u64 = 1_000_000;
/// Width of the `full_at` field.
pub(crate) const TIME_BITS: u32 = 42;
/// Mask of the `full_at` field.
pub(crate) const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
/// Largest refill span, `burst × interval`, in ticks: 2^40 ms, about 34.8 years.
pub(crate) const MAX_SPAN_TICKS: u64 = 1 << 40;
/// Latest tick the arithmetic accepts; later readings are clamped to it. `MAX_NOW_TICK +
/// MAX_SPAN_TICKS` still fits [`TIME_MASK`], so `full_at` can never leave its field.
pub(crate) const MAX_NOW_TICK: u64 = TIME_MASK - MAX_SPAN_TICKS;

const _: () = assert!(MAX_NOW_TICK + MAX_SPAN_TICKS <= TIME_MASK);

/// A reading in nanoseconds, floored to ticks and clamped to [`MAX_NOW_TICK`].
#[inline]
pub(crate) fn tick_of(now_ns: u64) -> u64 {
    (now_ns / TICK_NS).min(MAX_NOW_TICK)
}

// ------------------------------------------------- the two ticks

/// Largest refill span of a bucket counted in microseconds: 2^38 µs, about 3.18 days. A
/// keyed limiter stores such a bucket's `full_at` as a 39-bit offset from a moving base (see
/// `limiter::epoch`), which needs `P + span < 2^39` with the epoch length `P = 2^37` µs.
pub(crate) const MAX_FINE_SPAN_TICKS: u64 = 1 << 38;

/// The unit a bucket counts time in: a millisecond, or a microsecond for a bucket whose refill
/// interval is not a whole number of milliseconds (up to 1,000,000 tokens per second).
///
/// Both count from the clock's origin and clamp at the same instant, [`MAX_NOW_TICK`]
/// milliseconds (about 104 years of uptime; a keyed limiter counting milliseconds counts only
/// up to about 34.8 years, see the module docs). The unit is a property of a bucket's config,
/// so a bucket's arithmetic never mixes the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Tick {
    /// One millisecond: `full_at` is absolute; it fits 42 bits for 104 years of readings, and
    /// a keyed limiter's 41 for 34.8.
    Millis,
    /// One microsecond: absolute in a standalone bucket's `u64`; in a keyed limiter's 42-bit
    /// entry, an offset from an epoch base (`limiter::epoch`).
    Micros,
}

impl Tick {
    /// Nanoseconds per tick.
    #[inline]
    pub(crate) const fn ns(self) -> u64 {
        match self {
            Self::Millis => TICK_NS,
            Self::Micros => 1_000,
        }
    }

    /// Ticks per millisecond.
    #[inline]
    pub(crate) const fn per_ms(self) -> u64 {
        TICK_NS / self.ns()
    }

    /// The latest tick readings are clamped to: the same instant in both units.
    #[inline]
    pub(crate) const fn max_now(self) -> u64 {
        MAX_NOW_TICK * self.per_ms()
    }

    /// The largest refill span a config in this unit may have.
    #[inline]
    pub(crate) const fn max_span(self) -> u64 {
        match self {
            Self::Millis => MAX_SPAN_TICKS,
            Self::Micros => MAX_FINE_SPAN_TICKS,
        }
    }

    /// A reading in nanoseconds, floored to this unit and clamped to [`Tick::max_now`].
    #[inline]
    pub(crate) fn of(self, now_ns: u64) -> u64 {
        match self {
            Self::Millis => tick_of(now_ns),
            Self::Micros => (now_ns / self.ns()).min(self.max_now()),
        }
    }

    /// The exact time from `now_ns` until tick `ready_tick` of this unit begins; at least one
    /// tick whenever that lies at or before the reading (see [`wait_until`]).
    pub(crate) fn wait_until(self, ready_tick: u64, now_ns: u64) -> Duration {
        Duration::from_nanos(self.wait_ns_until(ready_tick, now_ns))
    }

    /// [`Tick::wait_until`] in nanoseconds.
    #[inline]
    pub(crate) fn wait_ns_until(self, ready_tick: u64, now_ns: u64) -> u64 {
        let ready_ns = ready_tick.saturating_mul(self.ns());
        match ready_ns.checked_sub(now_ns) {
            // A reading clamped at the last tick would otherwise report no wait for a bucket
            // that no longer refills; report one tick so a refusal never says "retry now".
            Some(0) | None => self.ns(),
            Some(w) => w,
        }
    }
}

// ------------------------------------------------- readings ahead of the clock

/// How far ahead of a primitive's own clock a handed reading may be: one millisecond.
///
/// Readings taken from the primitive's own clock (`primitive.clock().now_ns()`) are never
/// ahead of it; the tolerance absorbs TSC readings taken on another core (see
/// `QuantaClock`), which can lead by less than a millisecond.
pub const READING_TOLERANCE_NS: u64 = 1_000_000;

/// A reading refused because it lies ahead of what the primitive's clock has produced, or, for
/// a moment, ahead of the instant a limiter change being published is counted at.
///
/// Nothing was charged or changed. In the first case the fix is on the caller's side: hand
/// `_at` methods readings taken from the primitive's own clock (`.clock().now_ns()`), not from
/// another clock or a computed value.
///
/// The second case ([`ReadingAhead::while_a_change_lands`]) is no fault of the caller's: a
/// [`Limiter::set_config`](crate::Limiter::set_config) to a faster rate is counted at the
/// limiter's horizon and holds it there until the new rate is published (a few stores, unless
/// the changing thread is preempted in between). A decision whose reading is later than that
/// instant cannot be decided under either rate without repaying, at the new price, time the old
/// one counted, and a decision never waits for a change: it is refused, charging nothing, and
/// the same reading passes once the change has landed. Ask again.
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
    pub(super) reading_ns: u64,
    pub(super) clock_ns: u64,
    /// The instant a change being published is counted at, when that is what refused.
    pub(super) landing_at_ns: Option<u64>,
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

    /// Whether the reading was refused only because a limit change was being published at a
    /// reading before it (see above): a passing refusal, nothing wrong with the reading; the
    /// same reading passes once the change has landed.
    pub fn while_a_change_lands(&self) -> bool {
        self.landing_at_ns.is_some()
    }
}

impl fmt::Display for ReadingAhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(at_ns) = self.landing_at_ns {
            return write!(
                f,
                "reading of {} ns refused for now: a change to a faster rate is being published, \
                 counted at {at_ns} ns, and no later reading is decided until it has landed \
                 (microseconds, unless the changing thread was preempted); nothing was charged. \
                 Ask again",
                self.reading_ns,
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_floored_and_clamped() {
        assert_eq!(tick_of(1_999_999), 1);
        assert_eq!(tick_of(u64::MAX), MAX_NOW_TICK);
    }

    #[test]
    fn both_units_clamp_at_the_same_instant() {
        assert_eq!(Tick::Micros.of(1_999_999), 1_999);
        assert_eq!(Tick::Millis.of(u64::MAX) * 1_000, Tick::Micros.of(u64::MAX));
        assert_eq!(Tick::Micros.wait_until(5, 4_001), Duration::from_nanos(999));
        assert_eq!(Tick::Micros.wait_until(5, 5_000), Duration::from_micros(1));
        const { assert!(Tick::Micros.max_now() + MAX_FINE_SPAN_TICKS < u64::MAX / 2) };
    }

    #[test]
    fn wait_is_exact_and_never_zero() {
        assert_eq!(
            Tick::Millis.wait_until(5, 4_000_001),
            Duration::from_nanos(999_999)
        );
        assert_eq!(
            Tick::Millis.wait_until(5, 5_000_000),
            Duration::from_millis(1)
        );
    }
}
