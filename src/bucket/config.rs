//! A bucket's two numbers, validated once so that the arithmetic can never overflow.

use crate::clock::tick::MAX_SPAN_TICKS;
use std::fmt;
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
/// Time is counted in whole milliseconds (the tick), so the refill interval is a whole number
/// of milliseconds, from 1 ms (1,000 tokens per second per key) up. A rate whose interval is
/// not a whole number of milliseconds (`per_second(3)`: 333.3 ms) is refused as
/// [`BucketConfigError::InexactInterval`] rather than rounded, because rounding would drift: the
/// error names the nearest exact rates. Why the tick is not finer is in `docs/design.md`
/// ("Time and its bounds").
///
/// The product `burst × refill_interval` (the time an empty bucket takes to refill) is at most
/// [`BucketConfig::MAX_REFILL_SPAN`], about 34.8 years; that bound is what lets every bucket's
/// state fit the 42-bit time field described in [`crate::bucket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BucketConfig {
    burst: NonZeroU32,
    refill_interval_ms: NonZeroU32,
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
    /// The refill interval is not a whole number of milliseconds, the resolution of the
    /// bucket's clock.
    InexactInterval {
        /// The interval asked for (directly, or as a period divided by a rate).
        refill_interval: Duration,
    },
    /// The refill interval is longer than `u32::MAX` milliseconds (about 49.7 days per token).
    IntervalTooLong {
        /// The interval asked for.
        refill_interval: Duration,
    },
    /// `burst × refill_interval` exceeds [`BucketConfig::MAX_REFILL_SPAN`].
    RefillSpanTooLong {
        /// The burst asked for.
        burst: u32,
        /// The refill interval asked for.
        refill_interval: Duration,
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
            Self::InexactInterval { refill_interval } => write!(
                f,
                "a refill interval of {refill_interval:?} is not a whole number of milliseconds, \
                 the bucket's resolution; rounding would drift, so pick a rate whose interval is \
                 whole: {} ms or {} ms per token",
                refill_interval.as_millis().max(1),
                refill_interval.as_millis() + 1 + u128::from(refill_interval.as_millis() == 0),
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
            } => write!(
                f,
                "`burst` × refill interval = {burst} × {refill_interval:?} takes longer than {:?} \
                 (about 34.8 years) to refill; lower the burst or the interval",
                BucketConfig::MAX_REFILL_SPAN
            ),
        }
    }
}

impl std::error::Error for BucketConfigError {}

impl BucketConfig {
    /// The longest time an empty bucket may take to refill, `burst × refill_interval`:
    /// 2^40 ms, about 34.8 years.
    pub const MAX_REFILL_SPAN: Duration = Duration::from_millis(MAX_SPAN_TICKS);

    /// `burst` tokens, one back every `refill_interval` (a whole number of milliseconds).
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
    /// assert!(matches!(
    ///     BucketConfig::new(1, Duration::from_micros(1_500)),
    ///     Err(BucketConfigError::InexactInterval { .. })
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(burst: u32, refill_interval: Duration) -> Result<Self, BucketConfigError> {
        let burst = NonZeroU32::new(burst).ok_or(BucketConfigError::ZeroBurst)?;
        if refill_interval.is_zero() {
            return Err(BucketConfigError::ZeroRefillInterval);
        }
        if !refill_interval.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(BucketConfigError::InexactInterval { refill_interval });
        }
        let ms = u32::try_from(refill_interval.as_millis())
            .map_err(|_| BucketConfigError::IntervalTooLong { refill_interval })?;
        let ms = NonZeroU32::new(ms).ok_or(BucketConfigError::ZeroRefillInterval)?;
        Self::from_nonzero(burst, ms)
    }

    /// `tokens` per `period`, bursts of `tokens`: one token back every `period / tokens`, which
    /// must be a whole number of milliseconds.
    ///
    /// ```
    /// use admit::BucketConfig;
    /// use std::time::Duration;
    ///
    /// let config = BucketConfig::per(30, Duration::from_secs(90))?; // one every 3 s
    /// assert_eq!(config.refill_interval(), Duration::from_secs(3));
    /// assert!(BucketConfig::per(7, Duration::from_secs(1)).is_err(), "142.857 ms is not whole");
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
            // not whole milliseconds either (it is below the exact one by a fraction).
            return Err(BucketConfigError::InexactInterval {
                refill_interval: interval + Duration::from_nanos(1),
            });
        }
        Self::new(n.get(), interval)
    }

    /// `tokens` per second, bursts of `tokens`; `tokens` must divide 1,000 (1 ms resolution).
    ///
    /// ```
    /// use admit::BucketConfig;
    /// use std::time::Duration;
    ///
    /// let config = BucketConfig::per_second(1_000)?;
    /// assert_eq!(config.refill_interval(), Duration::from_millis(1));
    /// assert_eq!(config.burst(), 1_000);
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
        Self::from_nonzero(burst, self.refill_interval_ms)
    }

    /// A config from a burst and an interval in milliseconds, both already non-zero.
    pub(crate) fn from_nonzero(
        burst: NonZeroU32,
        refill_interval_ms: NonZeroU32,
    ) -> Result<Self, BucketConfigError> {
        let span = u64::from(burst.get()) * u64::from(refill_interval_ms.get());
        if span > MAX_SPAN_TICKS {
            return Err(BucketConfigError::RefillSpanTooLong {
                burst: burst.get(),
                refill_interval: Duration::from_millis(u64::from(refill_interval_ms.get())),
            });
        }
        Ok(Self {
            burst,
            refill_interval_ms,
        })
    }

    /// A config from a burst and an interval in milliseconds (the registrar's keys, the
    /// checkers' generated ops).
    pub(crate) fn from_ms(burst: u32, refill_interval_ms: u32) -> Result<Self, BucketConfigError> {
        let burst = NonZeroU32::new(burst).ok_or(BucketConfigError::ZeroBurst)?;
        let ms =
            NonZeroU32::new(refill_interval_ms).ok_or(BucketConfigError::ZeroRefillInterval)?;
        Self::from_nonzero(burst, ms)
    }

    /// The most tokens the bucket holds; also what a new bucket starts with.
    pub fn burst(&self) -> u32 {
        self.burst.get()
    }

    /// Time per token.
    pub fn refill_interval(&self) -> Duration {
        Duration::from_millis(u64::from(self.refill_interval_ms.get()))
    }

    /// Time for an empty bucket to refill completely.
    pub fn refill_span(&self) -> Duration {
        Duration::from_millis(self.span_ticks())
    }

    /// The refill interval in ticks (a tick is a millisecond).
    pub(crate) fn interval_ticks(&self) -> u64 {
        u64::from(self.refill_interval_ms.get())
    }

    /// `burst × refill interval` in ticks; at most [`MAX_SPAN_TICKS`] by construction.
    pub(crate) fn span_ticks(&self) -> u64 {
        u64::from(self.burst.get()) * self.interval_ticks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn zero_fields_are_named() {
        assert_eq!(
            BucketConfig::new(0, ms(5)),
            Err(BucketConfigError::ZeroBurst)
        );
        assert_eq!(
            BucketConfig::new(5, Duration::ZERO),
            Err(BucketConfigError::ZeroRefillInterval)
        );
        assert_eq!(
            BucketConfig::per_second(0),
            Err(BucketConfigError::ZeroRefillInterval)
        );
        assert!(BucketConfigError::ZeroBurst.to_string().contains("`burst`"));
        assert!(BucketConfigError::ZeroRefillInterval
            .to_string()
            .contains("refill interval"));
    }

    #[test]
    fn span_limit_is_inclusive_and_named() {
        // 2^20 × 2^20 ms is exactly the limit.
        assert!(BucketConfig::new(1 << 20, ms(1 << 20)).is_ok());
        let err = BucketConfig::new((1 << 20) + 1, ms(1 << 20)).unwrap_err();
        assert!(matches!(err, BucketConfigError::RefillSpanTooLong { .. }));
        assert!(err.to_string().contains("`burst`"));
        assert!(BucketConfig::new(u32::MAX, ms(u64::from(u32::MAX))).is_err());
        assert!(BucketConfig::new(u32::MAX, ms(256)).is_ok());
        assert!(matches!(
            BucketConfig::new(1, ms(u64::from(u32::MAX) + 1)),
            Err(BucketConfigError::IntervalTooLong { .. })
        ));
        assert!(matches!(
            BucketConfig::new(1, Duration::MAX),
            Err(BucketConfigError::InexactInterval { .. }
                | BucketConfigError::IntervalTooLong { .. })
        ));
    }

    #[test]
    fn rates_are_exact_or_refused() {
        for n in [1, 2, 4, 5, 8, 10, 100, 125, 1_000] {
            let c = BucketConfig::per_second(n).unwrap();
            assert_eq!(c.refill_interval() * n, Duration::from_secs(1), "{n}/s");
            assert_eq!(c.burst(), n);
        }
        for n in [3, 7, 300, 1_001, 1_000_000] {
            let err = BucketConfig::per_second(n).unwrap_err();
            assert!(
                matches!(err, BucketConfigError::InexactInterval { .. }),
                "{n}/s: {err}"
            );
            assert!(err.to_string().contains("whole"), "{err}");
        }
        assert_eq!(
            BucketConfig::per_minute(7).unwrap_err(),
            BucketConfigError::InexactInterval {
                refill_interval: Duration::from_nanos(8_571_428_572)
            }
        );
        assert_eq!(
            BucketConfig::per_hour(1).unwrap().refill_interval(),
            ms(3_600_000)
        );
        assert_eq!(
            BucketConfig::per(3, ms(3)).unwrap(),
            BucketConfig::new(3, ms(1)).unwrap()
        );
    }

    #[test]
    fn with_burst_keeps_the_rate_and_revalidates() {
        let c = BucketConfig::per_second(10)
            .unwrap()
            .with_burst(50)
            .unwrap();
        assert_eq!((c.burst(), c.refill_interval()), (50, ms(100)));
        assert!(matches!(
            BucketConfig::new(1, ms(1 << 20))
                .unwrap()
                .with_burst((1 << 20) + 1),
            Err(BucketConfigError::RefillSpanTooLong { .. })
        ));
    }
}
