//! Waiting for tokens in async code (feature `tokio`): `until_ready` on the keyed limiter and
//! the token bucket, and a clock that follows tokio's time, paused time included.
//!
//! `until_ready` is `try_acquire` in a loop: on a refusal it sleeps exactly the wait the
//! refusal reported (plus an optional jitter), then tries again. It never takes a token except
//! in the one synchronous `try_acquire` that admits it, and that call returns at once, so **a
//! future dropped at any await point has taken nothing** (cancellation-safe: `select!` and
//! `timeout` may drop it freely). A charge that can never succeed (more than the burst, an
//! unknown class) is returned at once as the error, never waited for.
//!
//! [`TokioClock`] reads `tokio::time::Instant`, so a limiter built on it follows
//! `tokio::time::pause()` and `advance()`: async tests of a limit run in virtual time, never
//! sleeping for real.
//!
//! ```
//! use admit::wait::TokioClock;
//! use admit::{BucketConfig, Limiter};
//! use std::time::Duration;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?.block_on(async {
//! let limiter = Limiter::builder().build_with_clock([BucketConfig::per_second(1)?], TokioClock::new())?;
//! let start = tokio::time::Instant::now();
//! for _ in 0..3 {
//!     limiter.until_ready("alice", 0, 1).await?;
//! }
//! // Burst 1, one token a second: the third waited two seconds (of paused, virtual time).
//! assert_eq!(start.elapsed(), Duration::from_secs(2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::bucket::{BucketRefused, ExceedsBurst, TokenBucket};
use crate::clock::Clock;
use crate::limiter::{Grant, InvalidCharge, Limiter, LimiterRefused};
use std::hash::Hash;
use std::time::Duration;

/// A [`Clock`] over `tokio::time::Instant`: nanoseconds since the clock was made, in tokio's
/// time, which `tokio::time::pause` stops and `tokio::time::advance` (or auto-advance while
/// paused) moves. Monotonic, as `tokio::time::Instant` is.
///
/// Outside a runtime with paused time it reads the same monotonic clock as
/// [`MonotonicClock`](crate::clock::MonotonicClock).
///
/// ```
/// use admit::wait::TokioClock;
/// use admit::Clock;
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?.block_on(async {
/// let clock = TokioClock::new();
/// tokio::time::advance(Duration::from_millis(1_500)).await;
/// assert_eq!(clock.now_ns(), 1_500_000_000);
/// # });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is now, in tokio's time.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now_ns(&self) -> u64 {
        // Saturates after 584 years of one clock's life.
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Up to `max` of extra wait, drawn per call, so that callers refused at one instant do not
/// all retry at the same instant.
fn jitter(max: Duration) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    let max_ns = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(crate::entropy::random_u64() % max_ns.saturating_add(1))
}

#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl<C: Clock> Limiter<C> {
    /// Waits until `identity` can be charged `n` tokens of `class`, then charges them: the
    /// async form of [`Limiter::try_acquire_n`]. Sleeps exactly the wait each refusal reports,
    /// so it wakes when the tokens are due (another caller may take them first; it then waits
    /// again). Cancellation-safe: a future dropped before it completes has taken nothing.
    ///
    /// An invalid charge (unknown class, more than the burst, a reading ahead of the clock) is
    /// returned at once: no wait cures it.
    ///
    /// ```
    /// use admit::wait::TokioClock;
    /// use admit::{BucketConfig, Limiter};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?.block_on(async {
    /// let limiter = Limiter::builder().build_with_clock([BucketConfig::per_second(10)?], TokioClock::new())?;
    /// limiter.try_acquire_n("batch", 0, 10)?; // drained
    /// // Cancelled after 50 ms, before the 100 ms the next token needs: nothing was taken.
    /// let early = tokio::time::timeout(Duration::from_millis(50), limiter.until_ready("batch", 0, 1)).await;
    /// assert!(early.is_err());
    /// let grant = limiter.until_ready("batch", 0, 1).await?;
    /// assert!(!grant.via_overflow());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn until_ready<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
    ) -> Result<Grant, InvalidCharge> {
        self.until_ready_with_jitter(identity, class, n, Duration::ZERO)
            .await
    }

    /// [`Limiter::until_ready`], sleeping up to `max_jitter` longer than each reported wait
    /// (drawn per sleep), so that callers refused together do not retry together.
    pub async fn until_ready_with_jitter<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
        max_jitter: Duration,
    ) -> Result<Grant, InvalidCharge> {
        loop {
            match self.try_acquire_n(identity, class, n) {
                Ok(grant) => return Ok(grant),
                Err(LimiterRefused::Limited(limited)) => {
                    tokio::time::sleep(limited.wait() + jitter(max_jitter)).await;
                }
                Err(LimiterRefused::Invalid(invalid)) => return Err(invalid),
            }
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl TokenBucket {
    /// Waits until `n` tokens can be taken at `clock`'s readings, then takes them: the async
    /// form of [`TokenBucket::try_acquire_n`]. Cancellation-safe, as [`Limiter::until_ready`].
    /// `n` above the burst is returned at once as [`ExceedsBurst`].
    ///
    /// ```
    /// use admit::wait::TokioClock;
    /// use admit::{BucketConfig, TokenBucket};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?.block_on(async {
    /// let clock = TokioClock::new();
    /// let bucket = TokenBucket::new(BucketConfig::per_second(4)?);
    /// bucket.until_ready(&clock, 4).await?;
    /// let start = tokio::time::Instant::now();
    /// bucket.until_ready(&clock, 2).await?; // two more: 500 ms
    /// assert_eq!(start.elapsed(), Duration::from_millis(500));
    /// assert!(bucket.until_ready(&clock, 5).await.is_err(), "5 never fit a burst of 4");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn until_ready(&self, clock: &impl Clock, n: u32) -> Result<(), ExceedsBurst> {
        self.until_ready_with_jitter(clock, n, Duration::ZERO).await
    }

    /// [`TokenBucket::until_ready`], sleeping up to `max_jitter` longer than each wait.
    pub async fn until_ready_with_jitter(
        &self,
        clock: &impl Clock,
        n: u32,
        max_jitter: Duration,
    ) -> Result<(), ExceedsBurst> {
        loop {
            match self.try_acquire_n(clock, n) {
                Ok(()) => return Ok(()),
                Err(BucketRefused::Empty(empty)) => {
                    tokio::time::sleep(empty.wait() + jitter(max_jitter)).await;
                }
                Err(BucketRefused::ExceedsBurst { requested, burst }) => {
                    return Err(ExceedsBurst { requested, burst })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::BucketConfig;
    use tokio::time::Instant;

    fn limiter(per_second: u32) -> Limiter<TokioClock> {
        Limiter::builder()
            .build_with_clock(
                [BucketConfig::per_second(per_second).unwrap()],
                TokioClock::new(),
            )
            .unwrap()
    }

    /// Each wait is exactly the one reported: burst 2, one token per 250 ms, six takes end
    /// exactly 1 s later in virtual time.
    #[tokio::test(start_paused = true)]
    async fn sleeps_exactly_the_reported_wait() {
        let limiter = Limiter::builder()
            .build_with_clock(
                [BucketConfig::per_second(4).unwrap().with_burst(2).unwrap()],
                TokioClock::new(),
            )
            .unwrap();
        let start = Instant::now();
        for _ in 0..6 {
            limiter.until_ready("a", 0, 1).await.unwrap();
        }
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    /// A future dropped while it sleeps has taken nothing: the tokens it waited for are still
    /// there for the next caller, at exactly the moment they were due.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_wait_takes_nothing() {
        let limiter = limiter(10);
        limiter.try_acquire_n("a", 0, 10).unwrap();
        for _ in 0..4 {
            let cut =
                tokio::time::timeout(Duration::from_millis(20), limiter.until_ready("a", 0, 1));
            assert!(cut.await.is_err(), "cancelled while sleeping");
        }
        // 80 ms after the drain: no token yet, and the cancelled waits took none.
        let now = limiter.clock().now_ns();
        assert_eq!(now, 80_000_000);
        let peek = limiter.peek_at("a", 0, 1, now).unwrap();
        assert_eq!(
            (peek.available(), peek.wait()),
            (0, Duration::from_millis(20))
        );
        // The next wait ends exactly when the first token is due, 100 ms after the drain.
        let start = Instant::now();
        limiter.until_ready("a", 0, 1).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(20));
    }

    /// No wait cures an invalid charge: it is returned at once.
    #[tokio::test(start_paused = true)]
    async fn an_invalid_charge_is_not_waited_for() {
        let limiter = limiter(10);
        let start = Instant::now();
        assert!(matches!(
            limiter.until_ready("a", 0, 11).await,
            Err(InvalidCharge::ExceedsBurst { .. })
        ));
        assert!(matches!(
            limiter.until_ready("a", 7, 1).await,
            Err(InvalidCharge::UnknownClass { .. })
        ));
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    /// The jitter only ever adds, and never more than asked.
    #[tokio::test(start_paused = true)]
    async fn jitter_adds_at_most_the_maximum() {
        let limiter = limiter(1);
        limiter.try_acquire("a", 0).unwrap();
        let start = Instant::now();
        limiter
            .until_ready_with_jitter("a", 0, 1, Duration::from_millis(300))
            .await
            .unwrap();
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(1), "{waited:?}");
        assert!(waited <= Duration::from_millis(1_300), "{waited:?}");
    }

    /// Many waiters on one identity: together they are admitted at the bucket's rate, never
    /// faster, in virtual time.
    #[tokio::test(start_paused = true)]
    async fn concurrent_waiters_are_admitted_at_the_rate() {
        let limiter = std::sync::Arc::new(limiter(5));
        let start = Instant::now();
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move { limiter.until_ready("a", 0, 1).await.map(|_| ()) })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        // Burst 5 at once, then 15 more at 5 per second: 3 s.
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_waits_exactly_too() {
        let clock = TokioClock::new();
        let bucket = TokenBucket::new(BucketConfig::per_second(2).unwrap());
        let start = Instant::now();
        for _ in 0..4 {
            bucket.until_ready(&clock, 1).await.unwrap();
        }
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }
}
