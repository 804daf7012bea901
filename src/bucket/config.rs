//! A bucket's two numbers, validated once so that the arithmetic can never overflow.

use super::gcra::MAX_SPAN_TICKS;
use std::fmt;
use std::num::NonZeroU32;
use std::time::Duration;

/// How big a burst a bucket holds and how fast it refills: one token per `refill_interval_ms`.
///
/// Integers only. A rate would have to be fractional to say "one token per second or slower";
/// an interval says the same with a plain integer and has no NaN, infinity or rounding to
/// validate away.
///
/// The product `burst × refill_interval_ms` (the time an empty bucket takes to refill) is at
/// most [`BucketConfig::MAX_REFILL_SPAN_MS`], about 34.8 years; that bound is what lets every
/// bucket's state fit the 42-bit time field described in [`crate::bucket`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BucketConfig {
    burst: NonZeroU32,
    refill_interval_ms: NonZeroU32,
}

/// Why a [`BucketConfig`] was refused. Each variant names the field to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketConfigError {
    /// `burst` was zero: the bucket could never admit anything.
    ZeroBurst,
    /// `refill_interval_ms` was zero: tokens would accrue infinitely fast, silently disabling
    /// the limit.
    ZeroRefillInterval,
    /// `burst × refill_interval_ms` exceeds [`BucketConfig::MAX_REFILL_SPAN_MS`].
    RefillSpanTooLong {
        /// The burst asked for.
        burst: u32,
        /// The refill interval asked for, in milliseconds.
        refill_interval_ms: u32,
    },
}

impl fmt::Display for BucketConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroBurst => f.write_str(
                "`burst` is 0: a bucket that holds no token refuses every request; use at least 1",
            ),
            Self::ZeroRefillInterval => f.write_str(
                "`refill_interval_ms` is 0: tokens would refill infinitely fast and the limit \
                 would silently disappear; use at least 1",
            ),
            Self::RefillSpanTooLong {
                burst,
                refill_interval_ms,
            } => write!(
                f,
                "`burst` × `refill_interval_ms` = {burst} × {refill_interval_ms} ms takes longer \
                 than {} ms (about 34 years) to refill; lower `burst` or `refill_interval_ms`",
                BucketConfig::MAX_REFILL_SPAN_MS
            ),
        }
    }
}

impl std::error::Error for BucketConfigError {}

impl BucketConfig {
    /// The longest time an empty bucket may take to refill, `burst × refill_interval_ms`,
    /// in milliseconds: 2^40 ms, about 34.8 years.
    pub const MAX_REFILL_SPAN_MS: u64 = MAX_SPAN_TICKS;

    /// Validates and builds a config: `burst` tokens, one back every `refill_interval_ms`.
    ///
    /// ```
    /// use admit::{BucketConfig, BucketConfigError};
    /// use std::time::Duration;
    ///
    /// let config = BucketConfig::new(10, 100)?; // 10 per second, bursts of 10
    /// assert_eq!(config.refill_span(), Duration::from_secs(1));
    /// assert_eq!(BucketConfig::new(0, 100), Err(BucketConfigError::ZeroBurst));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(burst: u32, refill_interval_ms: u32) -> Result<Self, BucketConfigError> {
        let burst = NonZeroU32::new(burst).ok_or(BucketConfigError::ZeroBurst)?;
        let refill_interval_ms =
            NonZeroU32::new(refill_interval_ms).ok_or(BucketConfigError::ZeroRefillInterval)?;
        Self::from_nonzero(burst, refill_interval_ms)
    }

    /// Builds a config from values already known to be non-zero.
    pub fn from_nonzero(
        burst: NonZeroU32,
        refill_interval_ms: NonZeroU32,
    ) -> Result<Self, BucketConfigError> {
        let span = u64::from(burst.get()) * u64::from(refill_interval_ms.get());
        if span > Self::MAX_REFILL_SPAN_MS {
            return Err(BucketConfigError::RefillSpanTooLong {
                burst: burst.get(),
                refill_interval_ms: refill_interval_ms.get(),
            });
        }
        Ok(Self {
            burst,
            refill_interval_ms,
        })
    }

    /// The most tokens the bucket holds; also what a new bucket starts with.
    pub fn burst(&self) -> u32 {
        self.burst.get()
    }

    /// Milliseconds per token.
    pub fn refill_interval_ms(&self) -> u32 {
        self.refill_interval_ms.get()
    }

    /// Time per token.
    pub fn refill_interval(&self) -> Duration {
        Duration::from_millis(u64::from(self.refill_interval_ms.get()))
    }

    /// Time for an empty bucket to refill completely.
    pub fn refill_span(&self) -> Duration {
        Duration::from_millis(self.span_ticks())
    }

    /// `refill_interval_ms` in ticks (a tick is a millisecond).
    pub(crate) fn interval_ticks(&self) -> u64 {
        u64::from(self.refill_interval_ms.get())
    }

    /// `burst × refill_interval_ms` in ticks; at most [`MAX_SPAN_TICKS`] by construction.
    pub(crate) fn span_ticks(&self) -> u64 {
        u64::from(self.burst.get()) * self.interval_ticks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_fields_are_named() {
        assert_eq!(BucketConfig::new(0, 5), Err(BucketConfigError::ZeroBurst));
        assert_eq!(
            BucketConfig::new(5, 0),
            Err(BucketConfigError::ZeroRefillInterval)
        );
        assert!(BucketConfigError::ZeroBurst.to_string().contains("`burst`"));
        assert!(BucketConfigError::ZeroRefillInterval
            .to_string()
            .contains("`refill_interval_ms`"));
    }

    #[test]
    fn span_limit_is_inclusive_and_named() {
        // 2^20 × 2^20 ms is exactly the limit.
        assert!(BucketConfig::new(1 << 20, 1 << 20).is_ok());
        let err = BucketConfig::new((1 << 20) + 1, 1 << 20).unwrap_err();
        assert!(matches!(err, BucketConfigError::RefillSpanTooLong { .. }));
        assert!(err.to_string().contains("`burst`"));
        assert!(BucketConfig::new(u32::MAX, u32::MAX).is_err());
        assert!(BucketConfig::new(u32::MAX, 256).is_ok());
    }
}
