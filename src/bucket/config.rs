//! A bucket's two numbers, validated once so that the arithmetic can never overflow.

use crate::clock::tick::{Tick, MAX_FINE_SPAN_TICKS, MAX_SPAN_TICKS};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::num::NonZeroU32;
use std::time::Duration;

/// How big a burst a bucket holds and how fast it refills: one token per refill interval.
///
/// Built from a rate ([`per_second`](Self::per_second), [`per_minute`](Self::per_minute),
/// [`per_hour`](Self::per_hour), [`per`](Self::per)), optionally with another burst
/// ([`with_burst`](Self::with_burst)), or from a burst and an interval ([`new`](Self::new)).
/// Every form is validated with the same [`BucketConfigError`].
///
/// ```
/// use admit::BucketConfig;
/// use std::time::Duration;
///
/// let api = BucketConfig::per_second(100)?.with_burst(20)?; // 100/s sustained, bursts of 20
/// assert_eq!(api.refill_interval(), Duration::from_millis(10));
/// assert_eq!(api.burst(), 20);
/// let login = BucketConfig::per_minute(5)?; // bursts of 5, one back every 12 s
/// assert_eq!(login.refill_interval(), Duration::from_secs(12));
/// let same = BucketConfig::new(5, Duration::from_secs(12))?;
/// assert_eq!(login, same);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Resolution
///
/// The refill interval is a whole number of microseconds, from 1 µs (1,000,000 tokens per
/// second per key) up; accrual is exact (no drift) at every rate. A rate whose interval is not
/// a whole number of microseconds (`per_second(3)`: 333,333.3 µs) is refused as
/// [`BucketConfigError::InexactInterval`] rather than rounded, because rounding would drift: the
/// error names the nearest exact intervals.
///
/// A config counts time in one of two units, chosen by its interval:
///
/// | interval | unit | longest refill span `burst × interval` |
/// |---|---|---|
/// | whole milliseconds, up to `u32::MAX` ms (49.7 days) | 1 ms | [`MAX_REFILL_SPAN`](Self::MAX_REFILL_SPAN), 2^40 ms ≈ 34.8 years |
/// | any other whole number of µs, up to `u32::MAX` µs (71.6 min) | 1 µs | [`MAX_FINE_REFILL_SPAN`](Self::MAX_FINE_REFILL_SPAN), 2^38 µs ≈ 3.18 days |
///
/// The bounds are what let a keyed limiter keep every bucket's state exactly in the 41 bits
/// its table entry has beside its class's era bit (`docs/design.md`, "Time and its bounds"):
/// counting milliseconds, for readings up to `2^41 − 1 − 2^40` ms of its clock (about 34.8
/// years of uptime; every later reading counts as that instant, so buckets stop refilling);
/// counting microseconds, up to `2^42 − 1 − 2^40` ms (about 104 years), where every
/// [`TokenBucket`](crate::TokenBucket) counts up to as well. A [`Limiter`](crate::Limiter)
/// with any microsecond class counts all of its classes in microseconds, so there every
/// class's span must fit the finer bound.
///
/// A microsecond rate wants a clock as fine: the default [`RecentClock`](crate::RecentClock)
/// is refreshed every 0.5 ms, so with it a 1,000,000/s bucket refills in steps of up to about
/// 500 tokens (exact in total, never above the rate). Build such a limiter or bucket over
/// [`MonotonicClock`](crate::MonotonicClock) for decisions to the microsecond.
///
/// ```
/// use admit::BucketConfig;
/// use std::time::Duration;
///
/// let fast = BucketConfig::per_second(1_000_000)?; // one token per microsecond
/// assert_eq!(fast.refill_interval(), Duration::from_micros(1));
/// let odd = BucketConfig::per_second(3_000); // 333.3 µs: refused, not rounded
/// assert!(odd.is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Two configs are equal when their burst and refill interval are: how they were written
/// (`per_second(1_000)` or `new(1_000, 1 ms)`) does not matter.
#[derive(Debug, Clone, Copy)]
pub struct BucketConfig {
    /// Never 0: every constructor validates it (a plain `u32`, so that a config unpacked from a
    /// bucket's config word on every decision costs no check).
    burst: u32,
    /// The refill interval in ticks of `tick`; never 0, as `burst`.
    interval: u32,
    tick: Tick,
}

impl PartialEq for BucketConfig {
    fn eq(&self, other: &Self) -> bool {
        self.burst == other.burst && self.interval_ns() == other.interval_ns()
    }
}

impl Eq for BucketConfig {}

impl Hash for BucketConfig {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.burst.hash(state);
        self.interval_ns().hash(state);
    }
}

/// Why a [`BucketConfig`] was refused. Each variant names the field to change.
///
/// ```
/// use admit::{BucketConfig, BucketConfigError};
/// use std::time::Duration;
///
/// let err = BucketConfig::per_second(3).unwrap_err(); // 333.3 ms is not whole milliseconds
/// assert!(matches!(err, BucketConfigError::InexactInterval { .. }));
/// println!("{err}"); // names the nearest exact intervals: 333 ms or 334 ms
/// assert_eq!(BucketConfig::new(0, Duration::from_secs(1)), Err(BucketConfigError::ZeroBurst));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BucketConfigError {
    /// `burst` was zero: the bucket could never admit anything.
    ZeroBurst,
    /// The refill interval was zero (or a rate of zero tokens): tokens would accrue infinitely
    /// fast, or never, silently disabling the limit or the bucket.
    ZeroRefillInterval,
    /// The refill interval is not a whole number of microseconds (or, above `u32::MAX` µs,
    /// about 71.6 minutes, of milliseconds), the resolution of the bucket's clock.
    InexactInterval {
        /// The interval asked for (directly, or as a period divided by a rate).
        refill_interval: Duration,
    },
    /// The refill interval is longer than `u32::MAX` milliseconds (about 49.7 days per token).
    IntervalTooLong {
        /// The interval asked for.
        refill_interval: Duration,
    },
    /// `burst × refill_interval` exceeds [`BucketConfig::MAX_REFILL_SPAN`] (or, for an interval
    /// that is not a whole number of milliseconds, [`BucketConfig::MAX_FINE_REFILL_SPAN`]).
    RefillSpanTooLong {
        /// The burst asked for.
        burst: u32,
        /// The refill interval asked for.
        refill_interval: Duration,
    },
    /// A config handed to [`TokenBucket::set_config`](crate::TokenBucket::set_config) does not
    /// fit the unit the bucket counts time in, which is fixed when the bucket is built (by its
    /// first config): a bucket counting whole milliseconds cannot take an interval that is not
    /// whole milliseconds, and one counting microseconds cannot take a refill span longer than
    /// [`BucketConfig::MAX_FINE_REFILL_SPAN`] or an interval longer than `u32::MAX` µs.
    DoesNotFitUnit {
        /// The burst asked for.
        burst: u32,
        /// The refill interval asked for.
        refill_interval: Duration,
        /// Whether the bucket counts microseconds (else whole milliseconds).
        counted_in_micros: bool,
    },
    /// A change to this config would carry a debt longer than the unit's longest span
    /// ([`BucketConfig::MAX_REFILL_SPAN`] in milliseconds, [`BucketConfig::MAX_FINE_REFILL_SPAN`]
    /// in microseconds): the longest debt the configs in force since the bucket was built
    /// allow, repaid at the new interval. Carried, it would have to be cut, and a revert would
    /// forgive the rest; so the change is refused and changes nothing.
    DebtBeyondUnit {
        /// The longest debt the change would carry (saturating at `Duration::MAX`).
        carried: Duration,
        /// The longest the unit holds.
        longest: Duration,
    },
}

impl fmt::Display for BucketConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroBurst => f.write_str(
                "`burst` is 0: a bucket that holds no token refuses every request; use at least 1",
            ),
            Self::ZeroRefillInterval => f.write_str(
                "the refill interval is 0 (or the rate is 0 per period): tokens would refill \
                 infinitely fast, or never, and the limit would silently disappear; use an \
                 interval of at least 1 ms, or a rate of at least 1",
            ),
            Self::InexactInterval { refill_interval } if fits_micros(*refill_interval) => write!(
                f,
                "a refill interval of {refill_interval:?} is not a whole number of microseconds, \
                 the bucket's resolution; rounding would drift, so pick a rate whose interval is \
                 whole: {} µs or {} µs per token",
                refill_interval.as_micros().max(1),
                refill_interval.as_micros() + 1 + u128::from(refill_interval.as_micros() == 0),
            ),
            Self::InexactInterval { refill_interval } => write!(
                f,
                "a refill interval of {refill_interval:?} is above {} µs and not a whole number \
                 of milliseconds, the resolution of intervals that long; rounding would drift, \
                 so pick a rate whose interval is whole: {} ms or {} ms per token",
                u32::MAX,
                refill_interval.as_millis(),
                refill_interval.as_millis() + 1,
            ),
            Self::IntervalTooLong { refill_interval } => write!(
                f,
                "a refill interval of {refill_interval:?} is longer than {} ms (about 49.7 days \
                 per token); use a shorter interval",
                u32::MAX
            ),
            Self::RefillSpanTooLong {
                burst,
                refill_interval,
            } if refill_interval.subsec_nanos().is_multiple_of(1_000_000) => write!(
                f,
                "`burst` × refill interval = {burst} × {refill_interval:?} takes longer than {:?} \
                 (about 34.8 years) to refill; lower the burst or the interval",
                BucketConfig::MAX_REFILL_SPAN
            ),
            Self::RefillSpanTooLong {
                burst,
                refill_interval,
            } => write!(
                f,
                "`burst` × refill interval = {burst} × {refill_interval:?} takes longer than {:?} \
                 (about 3.18 days), the longest refill of a bucket counted in microseconds (its \
                 interval is not whole milliseconds); lower the burst",
                BucketConfig::MAX_FINE_REFILL_SPAN
            ),
            Self::DoesNotFitUnit {
                burst,
                refill_interval,
                counted_in_micros: false,
            } => write!(
                f,
                "this bucket counts time in whole milliseconds, fixed when it was built, and a \
                 refill interval of {refill_interval:?} (burst {burst}) is not whole \
                 milliseconds; use a whole-millisecond interval, or build a new bucket for this \
                 rate"
            ),
            Self::DoesNotFitUnit {
                burst,
                refill_interval,
                counted_in_micros: true,
            } => write!(
                f,
                "this bucket counts time in microseconds, fixed when it was built, where a \
                 refill span is at most {:?} (about 3.18 days) and an interval at most {} µs; \
                 burst {burst} × {refill_interval:?} does not fit: lower the burst or the \
                 interval, or build a new bucket for this rate",
                BucketConfig::MAX_FINE_REFILL_SPAN,
                u32::MAX,
            ),
            Self::DebtBeyondUnit { carried, longest } => write!(
                f,
                "refused, nothing changed: at this interval the longest debt the bucket's \
                 configs allow would take {carried:?} to repay, beyond the {longest:?} its unit \
                 can hold; carried, it would be cut and a revert would forgive the rest. Lower \
                 the interval, or build a new bucket"
            ),
        }
    }
}

impl BucketConfigError {
    /// [`BucketConfigError::DebtBeyondUnit`] for a debt of `carried` ticks of `tick`.
    pub(crate) fn debt_beyond(carried: u128, tick: crate::clock::tick::Tick) -> Self {
        let ns = carried.saturating_mul(u128::from(tick.ns()));
        Self::DebtBeyondUnit {
            carried: u64::try_from(ns).map_or(Duration::MAX, Duration::from_nanos),
            longest: Duration::from_nanos(tick.max_span().saturating_mul(tick.ns())),
        }
    }
}

impl std::error::Error for BucketConfigError {}

/// Whether `interval` is at most `u32::MAX` microseconds, the longest microsecond interval.
fn fits_micros(interval: Duration) -> bool {
    interval.as_micros() <= u128::from(u32::MAX)
}

impl BucketConfig {
    /// The longest time an empty bucket may take to refill, `burst × refill_interval`:
    /// 2^40 ms, about 34.8 years.
    pub const MAX_REFILL_SPAN: Duration = Duration::from_millis(MAX_SPAN_TICKS);

    /// The longest time an empty bucket whose refill interval is not a whole number of
    /// milliseconds may take to refill: 2^38 µs, about 3.18 days (1,000,000 tokens per second
    /// with a burst of 1,000,000 refills in 1 s).
    pub const MAX_FINE_REFILL_SPAN: Duration = Duration::from_micros(MAX_FINE_SPAN_TICKS);

    /// `burst` tokens, one back every `refill_interval` (a whole number of microseconds).
    ///
    /// ```
    /// use admit::{BucketConfig, BucketConfigError};
    /// use std::time::Duration;
    ///
    /// let config = BucketConfig::new(10, Duration::from_millis(100))?; // 10/s, bursts of 10
    /// assert_eq!(config.refill_span(), Duration::from_secs(1));
    /// assert_eq!(
    ///     BucketConfig::new(0, Duration::from_millis(100)),
    ///     Err(BucketConfigError::ZeroBurst)
    /// );
    /// assert!(BucketConfig::new(1, Duration::from_micros(1_500)).is_ok(), "1.5 ms: exact in µs");
    /// assert!(matches!(
    ///     BucketConfig::new(1, Duration::from_nanos(1_500)),
    ///     Err(BucketConfigError::InexactInterval { .. })
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(burst: u32, refill_interval: Duration) -> Result<Self, BucketConfigError> {
        let burst = NonZeroU32::new(burst).ok_or(BucketConfigError::ZeroBurst)?;
        if refill_interval.is_zero() {
            return Err(BucketConfigError::ZeroRefillInterval);
        }
        if refill_interval.subsec_nanos().is_multiple_of(1_000_000) {
            let ms = u32::try_from(refill_interval.as_millis())
                .map_err(|_| BucketConfigError::IntervalTooLong { refill_interval })?;
            let ms = NonZeroU32::new(ms).ok_or(BucketConfigError::ZeroRefillInterval)?;
            return Self::from_nonzero(burst, ms, Tick::Millis);
        }
        if !refill_interval.subsec_nanos().is_multiple_of(1_000) || !fits_micros(refill_interval) {
            return Err(BucketConfigError::InexactInterval { refill_interval });
        }
        let us = u32::try_from(refill_interval.as_micros())
            .map_err(|_| BucketConfigError::InexactInterval { refill_interval })?;
        let us = NonZeroU32::new(us).ok_or(BucketConfigError::ZeroRefillInterval)?;
        Self::from_nonzero(burst, us, Tick::Micros)
    }

    /// `tokens` per `period`, bursts of `tokens`: one token back every `period / tokens`, which
    /// must be a whole number of microseconds.
    ///
    /// ```
    /// use admit::BucketConfig;
    /// use std::time::Duration;
    ///
    /// let config = BucketConfig::per(30, Duration::from_secs(90))?; // one every 3 s
    /// assert_eq!(config.refill_interval(), Duration::from_secs(3));
    /// assert!(BucketConfig::per(7, Duration::from_secs(1)).is_err(), "142,857.1 µs is not whole");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per(tokens: u32, period: Duration) -> Result<Self, BucketConfigError> {
        let Some(n) = NonZeroU32::new(tokens) else {
            return Err(BucketConfigError::ZeroRefillInterval);
        };
        let period_ns = period.as_nanos();
        let n_ns = u128::from(n.get());
        let interval = u64::try_from(period_ns / n_ns).map_or(Duration::MAX, Duration::from_nanos);
        if !period_ns.is_multiple_of(n_ns) {
            // Not even a whole number of nanoseconds: report the truncated interval, which is
            // not whole microseconds either (it is below the exact one by a fraction).
            return Err(BucketConfigError::InexactInterval {
                refill_interval: interval + Duration::from_nanos(1),
            });
        }
        Self::new(n.get(), interval)
    }

    /// `tokens` per second, bursts of `tokens`; `tokens` must divide 1,000,000 (1 µs
    /// resolution).
    ///
    /// ```
    /// use admit::BucketConfig;
    /// use std::time::Duration;
    ///
    /// let config = BucketConfig::per_second(1_000)?;
    /// assert_eq!(config.refill_interval(), Duration::from_millis(1));
    /// assert_eq!(config.burst(), 1_000);
    /// let fast = BucketConfig::per_second(250_000)?.with_burst(1_000)?;
    /// assert_eq!(fast.refill_interval(), Duration::from_micros(4));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_second(tokens: u32) -> Result<Self, BucketConfigError> {
        Self::per(tokens, Duration::from_secs(1))
    }

    /// `tokens` per minute, bursts of `tokens`; `tokens` must divide 60,000.
    ///
    /// ```
    /// use admit::BucketConfig;
    /// use std::time::Duration;
    ///
    /// assert_eq!(BucketConfig::per_minute(60)?.refill_interval(), Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_minute(tokens: u32) -> Result<Self, BucketConfigError> {
        Self::per(tokens, Duration::from_secs(60))
    }

    /// `tokens` per hour, bursts of `tokens`; `tokens` must divide 3,600,000.
    ///
    /// ```
    /// use admit::BucketConfig;
    /// use std::time::Duration;
    ///
    /// assert_eq!(BucketConfig::per_hour(3_600)?.refill_interval(), Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_hour(tokens: u32) -> Result<Self, BucketConfigError> {
        Self::per(tokens, Duration::from_secs(3_600))
    }

    /// `tokens` per day, with a burst of `tokens`: a daily budget, refilled evenly across the
    /// day. A day is counted exactly in milliseconds; a limiter whose other classes need
    /// microseconds counts spans up to 2^38 µs (3.18 days) only, and refuses a class whose
    /// burst spans longer ([`LimiterBuilder`](crate::limiter::LimiterBuilder)).
    ///
    /// ```
    /// use admit::BucketConfig;
    /// use std::time::Duration;
    ///
    /// let daily = BucketConfig::per_day(86_400)?;
    /// assert_eq!(daily.refill_interval(), Duration::from_secs(1));
    /// assert_eq!(daily.burst(), 86_400);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_day(tokens: u32) -> Result<Self, BucketConfigError> {
        Self::per(tokens, Duration::from_secs(86_400))
    }

    /// The same refill rate with another burst (the most tokens held; what a new bucket starts
    /// with).
    ///
    /// ```
    /// use admit::{BucketConfig, BucketConfigError};
    ///
    /// let steady = BucketConfig::per_second(10)?.with_burst(1)?; // no bursts: 100 ms apart
    /// assert_eq!(steady.burst(), 1);
    /// assert_eq!(BucketConfig::per_second(10)?.with_burst(0), Err(BucketConfigError::ZeroBurst));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_burst(self, burst: u32) -> Result<Self, BucketConfigError> {
        let burst = NonZeroU32::new(burst).ok_or(BucketConfigError::ZeroBurst)?;
        let interval =
            NonZeroU32::new(self.interval).ok_or(BucketConfigError::ZeroRefillInterval)?;
        Self::from_nonzero(burst, interval, self.tick)
    }

    /// A config from a burst and an interval in ticks of `tick`, both already non-zero.
    pub(crate) fn from_nonzero(
        burst: NonZeroU32,
        interval: NonZeroU32,
        tick: Tick,
    ) -> Result<Self, BucketConfigError> {
        let span = u64::from(burst.get()) * u64::from(interval.get());
        if span > tick.max_span() {
            return Err(BucketConfigError::RefillSpanTooLong {
                burst: burst.get(),
                refill_interval: Duration::from_nanos(u64::from(interval.get()) * tick.ns()),
            });
        }
        Ok(Self {
            burst: burst.get(),
            interval: interval.get(),
            tick,
        })
    }

    /// The same config counted in microseconds (a keyed limiter with any microsecond class
    /// counts all of its classes so). Refused if the interval or the span does not fit the
    /// microsecond bounds.
    pub(crate) fn in_micros(&self) -> Result<Self, BucketConfigError> {
        if self.tick == Tick::Micros {
            return Ok(*self);
        }
        let refill_interval = self.refill_interval();
        let us = NonZeroU32::new(self.interval)
            .and_then(|ms| ms.checked_mul(NonZeroU32::MIN.saturating_add(999)))
            .ok_or(BucketConfigError::InexactInterval { refill_interval })?;
        let burst = NonZeroU32::new(self.burst).ok_or(BucketConfigError::ZeroBurst)?;
        Self::from_nonzero(burst, us, Tick::Micros)
    }

    /// The same config counted in `tick`, the unit a bucket or limiter fixed at construction:
    /// a millisecond unit takes only whole-millisecond intervals, a microsecond unit any config
    /// whose span and interval fit it. Refused as [`BucketConfigError::DoesNotFitUnit`].
    pub(crate) fn in_unit(&self, tick: Tick) -> Result<Self, BucketConfigError> {
        let refused = BucketConfigError::DoesNotFitUnit {
            burst: self.burst(),
            refill_interval: self.refill_interval(),
            counted_in_micros: tick == Tick::Micros,
        };
        match (tick, self.tick) {
            (Tick::Millis, Tick::Millis) | (Tick::Micros, Tick::Micros) => Ok(*self),
            (Tick::Millis, Tick::Micros) => Err(refused),
            (Tick::Micros, Tick::Millis) => self.in_micros().map_err(|_| refused),
        }
    }

    /// The burst and the interval (in ticks of the config's unit) in one word, burst high:
    /// what a limiter class stores, under its era bit (see `limiter::era`).
    #[inline]
    pub(crate) fn pack(&self) -> u64 {
        u64::from(self.burst) << 32 | u64::from(self.interval)
    }

    /// The config [`BucketConfig::pack`] packed, in unit `tick`. Only packed configs reach it,
    /// which were validated, so both halves are non-zero and fit `tick`'s bounds.
    #[inline]
    pub(crate) fn unpack(word: u64, tick: Tick) -> Self {
        // Truncations intended: the high half is the burst, the low half the interval.
        Self {
            burst: (word >> 32) as u32,
            interval: word as u32,
            tick,
        }
    }

    /// A config from a burst and an interval in milliseconds (the registrar's keys, the
    /// checkers' generated ops).
    pub(crate) fn from_ms(burst: u32, refill_interval_ms: u32) -> Result<Self, BucketConfigError> {
        let burst = NonZeroU32::new(burst).ok_or(BucketConfigError::ZeroBurst)?;
        let ms =
            NonZeroU32::new(refill_interval_ms).ok_or(BucketConfigError::ZeroRefillInterval)?;
        Self::from_nonzero(burst, ms, Tick::Millis)
    }

    /// The most tokens the bucket holds; also what a new bucket starts with.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Time per token.
    pub fn refill_interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns())
    }

    /// Time for an empty bucket to refill completely.
    pub fn refill_span(&self) -> Duration {
        Duration::from_nanos(self.span_ticks() * self.tick.ns())
    }

    /// The refill interval in nanoseconds (below 2^53: `u32::MAX` ms).
    fn interval_ns(&self) -> u64 {
        u64::from(self.interval) * self.tick.ns()
    }

    /// The unit this config counts time in.
    #[inline]
    pub(crate) fn tick(&self) -> Tick {
        self.tick
    }

    /// The refill interval in ticks of [`BucketConfig::tick`].
    #[inline]
    pub(crate) fn interval_ticks(&self) -> u64 {
        u64::from(self.interval)
    }

    /// `burst × refill interval` in ticks; at most the unit's `max_span` by construction.
    pub(crate) fn span_ticks(&self) -> u64 {
        u64::from(self.burst) * self.interval_ticks()
    }
}

#[cfg(test)]
mod tests;
