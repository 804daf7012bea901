//! What a refused take says: how long to wait, or that waiting cannot help.

use std::fmt;
use std::time::Duration;

/// A take refused for want of tokens. Waiting [`Empty::wait`] is enough, absent other takes.
///
/// ```
/// use admit::{BucketConfig, BucketRefused, TokenBucket};
/// use std::time::Duration;
///
/// let bucket = TokenBucket::new(BucketConfig::per_second(2)?); // one token back every 500 ms
/// bucket.try_acquire_n_at(2, 0)?;
/// let Err(BucketRefused::Empty(empty)) = bucket.try_acquire_at(100_000_000) else { panic!() };
/// assert_eq!(empty.wait(), Duration::from_millis(400));
/// assert_eq!(empty.retry_after_secs(), 1, "rounded up, never 0");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Empty {
    /// The wait in nanoseconds: a refusal is made on the decision path, and its `Duration`
    /// only when asked for.
    wait_ns: u64,
}

impl Empty {
    pub(crate) fn new(wait: Duration) -> Self {
        Self::of_nanos(u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX))
    }

    #[inline]
    pub(crate) fn of_nanos(wait_ns: u64) -> Self {
        Self { wait_ns }
    }

    /// The exact time until enough tokens exist: a take after exactly this long succeeds
    /// (absent other takes), one nanosecond sooner it does not. Never zero.
    pub fn wait(&self) -> Duration {
        Duration::from_nanos(self.wait_ns)
    }

    /// [`Empty::wait`] rounded up to whole seconds, at least 1, so it can never invite an
    /// immediate retry.
    pub fn retry_after_secs(&self) -> u64 {
        retry_after_secs(self.wait())
    }
}

impl fmt::Debug for Empty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Empty").field("wait", &self.wait()).finish()
    }
}

/// `wait` rounded up to whole seconds, with a floor of one.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    let whole = wait.as_secs();
    let rounded = if wait.subsec_nanos() > 0 {
        whole.saturating_add(1)
    } else {
        whole
    };
    rounded.max(1)
}

impl fmt::Display for Empty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no token available; enough accrue in {:?} (retry after {} s)",
            self.wait(),
            self.retry_after_secs()
        )
    }
}

impl std::error::Error for Empty {}

/// Why [`TokenBucket::try_acquire_n_at`](super::TokenBucket::try_acquire_n_at) refused.
///
/// ```
/// use admit::{BucketConfig, BucketRefused, TokenBucket};
///
/// let bucket = TokenBucket::new(BucketConfig::per_second(10)?);
/// assert!(matches!(bucket.try_acquire_n_at(11, 0), Err(BucketRefused::ExceedsBurst { .. })));
/// bucket.try_acquire_n_at(10, 0)?;
/// let refused = bucket.try_acquire_at(0).unwrap_err();
/// assert_eq!(refused.retry_after_secs(), Some(1));
/// println!("{refused}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BucketRefused {
    /// Not enough tokens now; they will accrue.
    Empty(Empty),
    /// More tokens were asked for than the bucket can ever hold: waiting cannot help.
    ExceedsBurst {
        /// Tokens asked for.
        requested: u32,
        /// The bucket's burst.
        burst: u32,
    },
}

impl BucketRefused {
    /// The wait until the take can succeed, or `None` if it never can.
    pub fn wait(&self) -> Option<Duration> {
        match self {
            Self::Empty(empty) => Some(empty.wait()),
            Self::ExceedsBurst { .. } => None,
        }
    }

    /// The wait in whole seconds (rounded up, at least 1), or `None` if it never can succeed.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::Empty(empty) => Some(empty.retry_after_secs()),
            Self::ExceedsBurst { .. } => None,
        }
    }
}

impl fmt::Display for BucketRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty(empty) => empty.fmt(f),
            Self::ExceedsBurst { requested, burst } => write!(
                f,
                "asked for {requested} tokens but the bucket holds at most {burst}: this request \
                 can never succeed; split it or raise the burst"
            ),
        }
    }
}

impl std::error::Error for BucketRefused {}

/// Asking for more tokens than the burst, from a peek.
///
/// ```
/// use admit::{BucketConfig, TokenBucket};
/// use std::time::Duration;
///
/// let bucket = TokenBucket::new(BucketConfig::per_second(4)?);
/// assert_eq!(bucket.wait_for_at(4, 0), Ok(Duration::ZERO));
/// let never = bucket.wait_for_at(5, 0).unwrap_err(); // no wait ever yields 5 of a burst of 4
/// println!("{never}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExceedsBurst {
    /// Tokens asked for.
    pub requested: u32,
    /// The bucket's burst.
    pub burst: u32,
}

impl fmt::Display for ExceedsBurst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        BucketRefused::ExceedsBurst {
            requested: self.requested,
            burst: self.burst,
        }
        .fmt(f)
    }
}

impl std::error::Error for ExceedsBurst {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_with_floor_one() {
        assert_eq!(retry_after_secs(Duration::from_nanos(1)), 1);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(7)), 7);
        assert_eq!(retry_after_secs(Duration::MAX), u64::MAX);
    }
}
