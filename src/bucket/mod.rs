//! A token bucket in one `AtomicU64`: no lock, no allocation, one load and a CAS loop.
//!
//! This is the brick every keyed entry, overflow bucket and registrar bucket is made of; the
//! arithmetic lives in a private module of pure functions so the entry table packs the very same state
//! beside a fingerprint.
//!
//! # Invariants
//!
//! 1. A bucket starts full and never holds more than `burst` tokens.
//! 2. One token accrues per refill interval, lazily, from the monotonic reading; fractional
//!    accrual is kept, so N whole intervals yield exactly N tokens however the reads fall.
//! 3. A reading earlier than one the bucket already used never mints a token: over any
//!    history, tokens granted minus tokens refunded never exceed
//!    `burst + (latest tick − first tick) / interval`, in ticks (readings floored to whole
//!    milliseconds; see "Bounds in readings" for the same bound in nanosecond readings, which
//!    is looser by up to one tick).
//! 4. A bucket drained at any instant yields its next token one whole interval later, never a
//!    second burst.
//! 5. A refusal reports the exact wait: after it a take succeeds (absent other takes), one
//!    nanosecond sooner it does not. Asking for more than `burst` is a distinct error.
//!
//! Invariants 1–5 are checked against a sequential `u128` reference model by proptest
//! (`src/bucket/tests.rs`) and by the `bucket` fuzz target; the concurrent ones (exactly
//! `min(N, k)` grants among N racers, no mint from a racing older reading) by loom models in
//! `loom-tests/`.
//!
//! # Bounds in readings
//!
//! Every bound above holds in ticks: a reading is floored to whole ticks (milliseconds; for a
//! config whose interval is not whole milliseconds, microseconds, where every `999,999 ns`
//! below reads `999 ns`) before the arithmetic sees it, so two readings one nanosecond apart can fall in different ticks. In
//! nanosecond readings the exact statement is: absent refunds, **the tokens granted at
//! readings within any closed span `[r, r + L]` number at most
//! `burst + ⌊(L + 999,999 ns) / interval⌋`** (interval in nanoseconds), whatever the order
//! the readings arrive in and however the takes race. `L + 999,999 ns` is the longest span of
//! ticks such readings can cover (`⌈L / 1 ms⌉` ticks); the derivation is in `gcra.rs`. Both
//! cases the naive `burst + L / interval` gets wrong attain it:
//!
//! * burst 1 per 1 ms grants at 999,999 ns and again at 1,000,000 ns: 2 tokens within 1 ns of
//!   readings (bound `1 + ⌊1,000,000 / 1,000,000⌋ = 2`);
//! * burst 3 per 1 s grants 3 at 999,999 ns and a fourth at 1,000,000,000 ns: 4 tokens within
//!   999,000,001 ns, just over 999 ms, of readings (bound `3 + ⌊1,000,000,000 / 10^9⌋ = 4`).
//!
//! The tests `the_bound_in_readings_is_attained_where_ticks_split_a_nanosecond` and
//! `grants_in_any_span_of_readings_stay_within_the_stated_bound` (a proptest over readings,
//! lagging ones included) check the statement. A refund gives its tokens back to be granted
//! again, so with refunds add the tokens refunded.
//!
//! # A reading far ahead
//!
//! A `TokenBucket` owns no clock: [`TokenBucket::try_acquire`] reads the clock it is handed, and
//! the `_at` forms take the caller's reading as given. Checking a reading against a clock would
//! cost a clock read (or a cached horizon, and a clock to refresh it from) on every take, and
//! the bucket is one word held by its owner: a reading it is handed *is* its owner's reading.
//! So the bucket does not refuse readings ahead, unlike [`Limiter`](crate::Limiter) and
//! [`RateLimit`](crate::quota::RateLimit), which share state between keys and refuse readings more
//! than [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) ahead of their own
//! clocks (see [`crate::clock`]).
//!
//! What a far-future reading does, exactly (`u64::MAX`, say, from an uninitialised variable):
//! it is clamped to the time budget's last tick (about 104 years of uptime, see below), which
//! nothing wraps past. A take there finds the bucket full, is granted, and moves `FULL_AT` to
//! that tick plus the take's cost. From then on, at real readings, the bucket is drained until
//! the clock reaches that tick, in practice for the life of the process: every take is refused
//! with [`BucketRefused::Empty`] whose wait is the whole distance (about 3.3 × 10^9 s),
//! `available_at` is 0, `is_full_at` is false, and a refund credits back only the tokens it
//! refunds. No panic and no wrap, and nothing but this one bucket changes: it shares no state
//! with any other. A peek (`available_at`, `wait_for_at`, `is_full_at`) at a far reading
//! changes nothing. The test `a_far_future_reading_drains_only_this_bucket_until_that_reading`
//! shows each of these. A bucket that code outside the owner's control can hand readings to
//! should be taken through [`TokenBucket::try_acquire`] with the owner's clock.
//!
//! # State table
//!
//! ```text
//!  63                 42 41                                       0
//! +---------------------+------------------------------------------+
//! |   0 (unused here)   |  FULL_AT: tick (ms) at which it is full   |
//! +---------------------+------------------------------------------+
//! ```
//!
//! | field     | bits  | range                       | meaning                               |
//! |-----------|-------|-----------------------------|---------------------------------------|
//! | `FULL_AT` | 0..42 | `0 ..= MAX_NOW + MAX_SPAN`  | tokens = burst − ⌈(FULL_AT − now)/T⌉ |
//!
//! `FULL_AT = 0` is a fresh, full bucket. The upper 22 bits are where the entry table keeps a
//! slot's state and fingerprint; a standalone bucket leaves them zero. Largest burst: any `u32`
//! with `burst × interval ≤ 2^40 ms`; largest interval: any `u32` milliseconds under the same
//! product. Why nothing wraps: `FULL_AT ≤ now + burst × interval ≤ 3·2^40 + 2^40 = 2^42`,
//! and a reading is clamped at `3·2^40` ms, about 104 years of uptime (see the
//! [design notes](crate::implementation)).
//!
//! # Orderings
//!
//! The word is the bucket's whole state and publishes no other memory, so every access is
//! `Relaxed`: the CAS's atomicity on this one location is all the arithmetic needs, and a
//! stale initial load only costs one failed CAS.

mod config;
mod error;
pub(crate) mod gcra;
#[cfg(test)]
mod tests;

pub use config::{BucketConfig, BucketConfigError};
/// Shared with `quota`, whose refusals round their wait the same way.
pub(crate) use error::retry_after_secs;
pub use error::{BucketRefused, Empty, ExceedsBurst};

use crate::clock::Clock;
use crate::shadow::Shadow;
use crate::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A lock-free token bucket. See the [module documentation](self) for its rules.
///
/// ```
/// use admit::{BucketConfig, Clock, ManualClock, BucketRefused, TokenBucket};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let bucket = TokenBucket::new(BucketConfig::new(5, Duration::from_millis(200))?); // burst 5, one per 200 ms
/// let now = clock.now_ns();
/// assert!(bucket.try_acquire_n_at(5, now).is_ok());
/// match bucket.try_acquire_at(now) {
///     Err(BucketRefused::Empty(empty)) => assert_eq!(empty.wait(), Duration::from_millis(200)),
///     other => panic!("{other:?}"),
/// }
/// assert_eq!(bucket.available_at(now + 400_000_000), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
/// use std::time::Duration;
#[derive(Debug)]
pub struct TokenBucket {
    full_at: AtomicU64,
    config: BucketConfig,
    /// The shadow switch (see [`crate::shadow`]).
    shadow: Shadow,
    /// The counters, if attached ([`TokenBucket::with_metrics`]).
    #[cfg(feature = "metrics")]
    metrics: Option<Box<crate::metrics::Outcomes>>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(config: BucketConfig) -> Self {
        Self {
            full_at: AtomicU64::new(gcra::FRESH),
            config,
            shadow: Shadow::new(),
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// This bucket, counting every take in `admit_bucket_decisions_total{outcome}` with
    /// `labels` (see [`crate::metrics`]). The counters are registered now, with the recorder
    /// current now. A refused take is not traced: a bucket has no actor to name.
    ///
    /// ```
    /// use admit::metrics::Labels;
    /// use admit::{BucketConfig, ManualClock, TokenBucket};
    ///
    /// let clock = ManualClock::new();
    /// let bucket = TokenBucket::new(BucketConfig::per_second(1)?)
    ///     .with_metrics(&Labels::new().with("bucket", "outbound"));
    /// assert!(bucket.try_acquire(&clock).is_ok()); // {outcome="admitted"}
    /// assert!(bucket.try_acquire(&clock).is_err()); // {outcome="refused"}
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn with_metrics(mut self, labels: &crate::metrics::Labels) -> Self {
        self.metrics = Some(Box::new(crate::metrics::Outcomes::bucket(labels)));
        self
    }

    /// The bucket's configuration.
    pub fn config(&self) -> &BucketConfig {
        &self.config
    }

    /// Takes one token at the clock's current reading.
    pub fn try_acquire(&self, clock: &impl Clock) -> Result<(), BucketRefused> {
        self.try_acquire_n_at(1, clock.now_ns())
    }

    /// Takes `n` tokens at the clock's current reading, all or nothing.
    pub fn try_acquire_n(&self, clock: &impl Clock, n: u32) -> Result<(), BucketRefused> {
        self.try_acquire_n_at(n, clock.now_ns())
    }

    /// Takes one token at reading `now_ns` (nanoseconds since the clock's origin).
    #[inline]
    pub fn try_acquire_at(&self, now_ns: u64) -> Result<(), BucketRefused> {
        self.try_acquire_n_at(1, now_ns)
    }

    /// Takes `n` tokens at reading `now_ns`, all or nothing. `n == 0` always succeeds.
    #[inline]
    pub fn try_acquire_n_at(&self, n: u32, now_ns: u64) -> Result<(), BucketRefused> {
        let taken = self.take_n_at(n, now_ns);
        // A refusal took nothing; in shadow mode it is counted and admitted (asking for more
        // than the burst is a caller's error, not a decision, and stays an error).
        let shadow = matches!(taken, Err(BucketRefused::Empty(_))) && self.shadow.admits_instead();
        // One branch when nothing is attached; see `crate::metrics`, "What a decision costs".
        // Asking for more than the burst is not a decision, and a take of 0 is not counted.
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.metrics.as_deref() {
            match &taken {
                Ok(()) if n > 0 => metrics.record(true, false),
                Err(BucketRefused::Empty(_)) if shadow => metrics.record_would_refuse(),
                Err(BucketRefused::Empty(_)) => metrics.record(false, false),
                Ok(()) | Err(BucketRefused::ExceedsBurst { .. }) => {}
            }
        }
        if shadow {
            return Ok(());
        }
        taken
    }

    /// Switches the bucket into [shadow mode](crate::shadow) (`true`) or back to enforcing, at
    /// once, while other threads take: in shadow mode a take that enforcement would refuse is
    /// admitted instead, takes nothing, and is counted in [`TokenBucket::shadow_admissions`].
    ///
    /// ```
    /// use admit::{BucketConfig, ManualClock, TokenBucket};
    ///
    /// let clock = ManualClock::new();
    /// let bucket = TokenBucket::new(BucketConfig::per_second(1)?);
    /// bucket.set_shadow(true);
    /// assert!(bucket.try_acquire(&clock).is_ok());
    /// assert!(bucket.try_acquire(&clock).is_ok(), "empty: admitted in shadow mode");
    /// assert_eq!(bucket.shadow_admissions(), 1);
    /// bucket.set_shadow(false);
    /// assert!(bucket.try_acquire(&clock).is_err(), "the shadow admission took nothing");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_shadow(&self, on: bool) {
        self.shadow.set(on);
    }

    /// Whether the bucket is in shadow mode.
    pub fn is_shadow(&self) -> bool {
        self.shadow.is_on()
    }

    /// How many takes shadow mode admitted that enforcement would have refused, since
    /// construction.
    pub fn shadow_admissions(&self) -> u64 {
        self.shadow.admitted()
    }

    #[inline]
    fn take_n_at(&self, n: u32, now_ns: u64) -> Result<(), BucketRefused> {
        // Relaxed: see "Orderings" in the module docs; a stale value only fails the CAS.
        let mut current = self.full_at.load(Ordering::Relaxed);
        loop {
            let next = gcra::take_at(&self.config, current, n, now_ns)?;
            if next == current {
                return Ok(());
            }
            match self.full_at.compare_exchange_weak(
                current,
                next,
                // Relaxed: the token arithmetic lives entirely in this word.
                Ordering::Relaxed,
                // Relaxed: on failure we only need the winner's value to recompute from.
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                // Another thread charged or refunded first; retry with its state.
                Err(actual) => current = actual,
            }
        }
    }

    /// What taking `n` tokens would see at `now_ns`: whole tokens held and the wait for `n`,
    /// derived exactly as for a table entry (the limiter's overflow buckets report through it).
    pub(crate) fn peek_at(&self, n: u32, now_ns: u64) -> (u32, Duration) {
        // Relaxed: a snapshot of the one word.
        gcra::peek_at(
            &self.config,
            self.full_at.load(Ordering::Relaxed),
            n,
            now_ns,
        )
    }

    /// Whole tokens available at `now_ns`, without taking any.
    pub fn available_at(&self, now_ns: u64) -> u32 {
        // Relaxed: a snapshot of the one word.
        let full_at = self.full_at.load(Ordering::Relaxed);
        gcra::available(&self.config, full_at, self.config.tick().of(now_ns))
    }

    /// How long until `n` tokens can be taken (zero if now), without taking any.
    pub fn wait_for_at(&self, n: u32, now_ns: u64) -> Result<Duration, ExceedsBurst> {
        // Relaxed: a snapshot of the one word.
        let full_at = self.full_at.load(Ordering::Relaxed);
        if n > self.config.burst() {
            return Err(ExceedsBurst {
                requested: n,
                burst: self.config.burst(),
            });
        }
        Ok(gcra::peek_at(&self.config, full_at, n, now_ns).1)
    }

    /// Whether the bucket holds its full burst at `now_ns`.
    pub fn is_full_at(&self, now_ns: u64) -> bool {
        // Relaxed: a snapshot of the one word.
        gcra::is_full(
            self.full_at.load(Ordering::Relaxed),
            self.config.tick().of(now_ns),
        )
    }

    /// Gives `n` tokens back at `now_ns` (for work that was admitted but not done); the bucket
    /// never holds more than its burst.
    pub fn refund_at(&self, n: u32, now_ns: u64) {
        let now = self.config.tick().of(now_ns);
        // Relaxed: see "Orderings".
        let mut current = self.full_at.load(Ordering::Relaxed);
        loop {
            let next = gcra::refund(&self.config, current, now, n);
            if next == current {
                return;
            }
            match self.full_at.compare_exchange_weak(
                current,
                next,
                // Relaxed: the refund lives entirely in this word.
                Ordering::Relaxed,
                // Relaxed: on failure we only need the winner's value.
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                // A take or refund landed first; refund against its state.
                Err(actual) => current = actual,
            }
        }
    }
}
