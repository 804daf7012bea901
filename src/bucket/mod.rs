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
//! # Limits changed at runtime
//!
//! [`TokenBucket::set_config`] replaces the burst `B` and refill interval `T` while other
//! threads take, at a reading of the clock the bucket is taken with
//! ([`TokenBucket::set_config_at`] takes the reading as given). **A change carries every token
//! the bucket owes over, and forgives none.** With `x = max(FULL_AT − t, 0)` the time owed at
//! the change's reading `t`, the bucket owes `x / T` tokens, fractions included, and from the
//! change on it owes them at the new interval: the time owed becomes `⌈x · T′ / T⌉`, whatever
//! the new burst. Stated as rules, each with its test:
//!
//! 1. **A full bucket stays full** (`x = 0`): it holds `B′`
//!    (`a_full_bucket_stays_full_through_any_change`).
//! 2. **The tokens owed carry over, all of them**: a bucket that owed `k = ⌈x / T⌉` tokens
//!    holds `max(B′ − k, 0)` right after the change, whatever the change, and earns them back
//!    one per new interval; a debt above the new burst is kept, not cut, so a bucket emptied
//!    by a lowered burst gets its first token once `k − B′ + 1` are repaid
//!    (`the_tokens_owed_carry_over_whatever_the_change`,
//!    `a_debt_beyond_a_full_new_burst_is_kept_and_repaid_at_the_new_rate`,
//!    `with_the_interval_unchanged_the_tokens_owed_carry_over_exactly`). A raise of the burst
//!    by `d` gives every bucket `d` more tokens: the raise itself, not a fresh budget.
//! 3. **A sequence of changes never lowers the debt**: each change carries the tokens owed
//!    rounded up to a tick, so a cut and its revert leave at least the debt there was
//!    (`⌈⌈x·r⌉/r⌉ ≥ x`). The operator's playbook, 100/s with a burst of 100, an actor drained
//!    at 0, cut to 1/s with a burst of 1 and restored, both at 0: the actor still owes its 100
//!    tokens, and holds 0 at 0, not 99 (`a_cut_and_its_revert_forgive_nothing`).
//! 4. **The change is made at its reading**: the tokens owed are counted there, under the old
//!    config, and accrue under the new one from there
//!    (`a_change_carries_the_debt_at_its_own_reading`). As for a take, one behind the bucket's
//!    latest readings counts more debt, never less: a slower rate counted earlier owes more;
//!    a faster one is counted at the latest tick a take or another change used if that is
//!    later than its reading (the bucket keeps that tick, and every change raises it to its
//!    own reading), since counted earlier it would repay at the faster rate time the old rate
//!    already counted. Burst 1 at 1 per 20 ms, a take at 10 ms, a change to 1 per 10 ms at
//!    8 ms: the next token comes at 20 ms, as for the change made at 10 ms
//!    (`a_faster_change_at_a_lagging_reading_counts_no_less_debt`). Two changes that land out
//!    of reading order (a change reads the clock before it takes the change lock) are counted
//!    in reading order: burst 1 per 10 ms, a take at 0, a slower change at 5 ms, then a faster
//!    one at 0, counted at 5 ms: the next token comes at 10 ms
//!    (`a_faster_change_is_counted_no_earlier_than_a_change_that_used_a_later_reading`).
//! 5. **The unit is fixed at construction** (milliseconds, or microseconds for a config that
//!    needs them), because `FULL_AT` is a count of those ticks; a config that does not fit it is
//!    refused ([`BucketConfigError::DoesNotFitUnit`]) and changes nothing
//!    (`the_unit_is_fixed_at_construction_and_a_misfit_changes_nothing`). The debt carried
//!    must fit the unit's longest span, 2^40 ms (34.8 years) or 2^38 µs (3.18 days): a change
//!    that could carry a longer one, judged from the configs alone (the longest debt the
//!    configs since construction allow, repaid at the new interval; see `bucket::debt`), is
//!    refused ([`BucketConfigError::DebtBeyondUnit`]) and changes nothing, so no debt is ever
//!    cut. A microsecond bucket of a million per second drained of its million tokens and
//!    slowed to one a second would owe 10^6 s: refused
//!    (`a_change_that_would_cut_a_debt_is_refused`). [`TokenBucket::check_config`] answers
//!    exactly what the change will.
//! 6. **Each decision is decided wholly under the config in force when it lands.** The state
//!    word carries the version of the config its `FULL_AT` is counted under, so a take that
//!    read the state before a change fails its CAS and decides again under the new config, and
//!    a refusal or a peek is checked against the word once more (the protocol and its
//!    invariants are in `bucket::versions`; loom: `loom-tests/tests/live.rs`). Racing changes
//!    are serialised by a lock that only changes take.
//!
//! **The bound kept across changes**: the tokens granted at readings within any span of `L`
//! ticks, net of the refunds that gave tokens back, never exceed the largest burst in force
//! over that history plus `L` over the shortest interval in force, whatever the order of the
//! readings and the races between changes and takes (the reference model checks it after every
//! step, `check::bucket`; loom: `two_changes_at_a_lagging_reading_racing_a_take`). It is the
//! loosest envelope of the configs, not each config's own `B + L/T`: a raise of the burst
//! hands out the raise at once. There is no exception: no accepted change cuts a debt
//! (rule 5). A change is visible to a thread from its next decision after
//! the change's CAS on the state word is visible to it; the thread that made the change, and
//! any thread that synchronized with it afterwards, decides under the new config (or a later
//! one) from its next decision on.
//!
//! **A limiter class carries the tokens owed over by the same rules**
//! ([`Limiter::set_config`](crate::Limiter::set_config), for a class's entries and its
//! overflow bucket at once, at a reading of the limiter's clock): 100/s with a burst of 100,
//! drained, cut to 1/s, holds 0 tokens there too. The conversion is the same; only when it is
//! made differs. A class has many entries, so a change records its instant and the config it
//! replaced, and each entry, which carries the era bit of the class config it was written
//! under, is converted when it is next read (a decision, a reclaim, a peek). The protocol and
//! its invariants are in `limiter::era`. The limiter keeps no latest tick per entry, so a
//! faster rate for a class is counted at the limiter's horizon (the bound it admits readings
//! against: the clock's highest reading plus
//! [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS)), frozen until the change is
//! published, so that no decision under the old config is admitted at a later reading
//! however long the change is preempted (see "Where a change is counted" in
//! `limiter/reconfig.rs`).
//!
//! # Refunds
//!
//! A refundable take ([`TokenBucket::try_acquire_refundable_n_at`]) returns a [`BucketGrant`];
//! [`TokenBucket::refund`] gives it back. Three rules make a refund unable to mint, whatever
//! the caller does with its grants, and the limiter's refunds
//! ([`Limiter::refund_at`](crate::Limiter::refund_at)) keep the same three:
//!
//! 1. **A grant is given back at most once.** A grant is neither `Copy` nor `Clone`, and a
//!    refund consumes it. Given back twice, a grant could undo another take that happened to
//!    leave the bucket in the same state (take A, refund A, take B: B leaves what A left, and
//!    a second refund of A would undo B).
//! 2. **A grant is given back only where it was taken.** Each bucket and each limiter draws a
//!    random id when it is built (32 bits for a bucket, which keeps it within 96 bytes; 64
//!    for a limiter), and its grants carry it; a refund on another instance
//!    gives nothing ([`Refunded::OtherInstance`]). Two buckets with one config that took at
//!    one reading hold equal state words: without the id, one's grant would refund into the
//!    other. (An address is no id: a dropped bucket's memory can hold the next one.) A
//!    limiter's grant also carries the key it was charged under, so its refund cannot name
//!    another identity at all.
//! 3. **Exact or void.** The refund puts the bucket back exactly as if the take had not
//!    happened (`FULL_AT − n·T`: the state before the take, or the take's reading, whichever
//!    is later) if the state word is still exactly what the take left
//!    ([`Refunded::Exact`]). If anything landed since (a take, a refund, a change of limits;
//!    for a limiter's entry, a reclaim), the token may already have come back into a full
//!    bucket and been taken again, and the refund gives nothing ([`Refunded::Void`]): burst 1
//!    per 10 ms, a take at 0, a take at 10 ms (the bucket was full again), a refund of the
//!    first gives nothing back, and a third take at 10 ms is refused
//!    (`a_refund_after_a_later_take_gives_nothing_twice`; loom:
//!    `a_refund_racing_later_takes_grants_no_token_twice`). It never gives back more than the
//!    grant took.
//!
//! So a refund never gives back a token that has refilled or been taken again since, under
//! races too; it may give back less than a caller hoped, when another take landed in between
//! (the gate's rollback states what that costs, in its module docs).
//!
//! # State table
//!
//! ```text
//!  63          52 51                                              0
//! +--------------+--------------------------------------------------+
//! |   VERSION    |  FULL_AT: tick (ms or µs) at which it is full     |
//! +--------------+--------------------------------------------------+
//! ```
//!
//! | field     | bits   | range                       | meaning                               |
//! |-----------|--------|-----------------------------|---------------------------------------|
//! | `FULL_AT` | 0..52  | `0 ..= MAX_NOW + MAX_SPAN`  | tokens = burst − ⌈(FULL_AT − now)/T⌉ |
//! | `VERSION` | 52..64 | `0 .. 4096`, wrapping       | the config `FULL_AT` is counted under |
//!
//! `FULL_AT = 0` is a fresh, full bucket. A limiter's entry keeps its `FULL_AT` in bits 0..41
//! under its class's era bit 41 (in microseconds, as an offset from an epoch; see
//! [`crate::limiter`]) and the entry table keeps the slot's state, fingerprint and generation
//! in the upper bits, with no version; a limiter's overflow bucket is a plain `FULL_AT`.
//! Largest burst: any `u32` with `burst × interval ≤ 2^40 ms`; largest interval: any `u32`
//! milliseconds under the same product. Why nothing wraps: `FULL_AT ≤ now + burst × interval
//! ≤ 3·2^40 + 2^40 = 2^42` (in microseconds, 1,000 times that, under 2^52), and a reading is
//! clamped at `3·2^40` ms, about 104 years of uptime (see the
//! [design notes](crate::implementation)). A limiter counting milliseconds has 41 bits, so
//! `now + 2^40 ≤ 2^41 − 1`: it counts readings up to `2^40 − 1` ms, about 34.8 years.
//!
//! # Orderings
//!
//! The state word holds the bucket's whole token state, and its version names the config slot
//! it is counted under. A change writes the slot, then publishes it with a release CAS on the
//! word; every load of the word is an acquire, so the slot a word names is visible to whoever
//! reads that word (takes and refunds CAS with a relaxed success ordering, and still continue
//! the change's release sequence). The rest of the argument, why a slot rewritten by a later
//! change is always caught, is in `bucket::versions`.

mod config;
pub(crate) mod debt;
mod error;
pub(crate) mod gcra;
#[cfg(test)]
mod reconfig_tests;
mod refund;
mod take;
#[cfg(test)]
mod tests;
mod versions;

pub use config::{BucketConfig, BucketConfigError};
/// Shared with `quota`, whose refusals round their wait the same way.
pub(crate) use error::retry_after_secs;
pub use error::{BucketRefused, Empty, ExceedsBurst};
pub use refund::{BucketGrant, Refunded};

use crate::clock::Clock;
use crate::shadow::Shadow;
use crate::sync::atomic::AtomicU64;
use std::time::Duration;
use versions::Versions;

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
    /// `FULL_AT`, and the version of the config it is counted under (see `versions`).
    state: AtomicU64,
    /// The configs the state's version names, changed at runtime by
    /// [`TokenBucket::set_config`].
    versions: Versions,
    /// The latest tick a take or a change used (or later): raised before the take's CAS and
    /// by every change, read by a change to a faster rate, which is counted no earlier (see
    /// "Limits changed at runtime").
    latest: AtomicU64,
    /// The shadow switch (see [`crate::shadow`]).
    shadow: Shadow,
    /// The counters, if attached ([`TokenBucket::with_metrics`]).
    #[cfg(feature = "metrics")]
    metrics: Option<Box<crate::instrument::Outcomes>>,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(config: BucketConfig) -> Self {
        Self {
            state: AtomicU64::new(gcra::FRESH),
            versions: Versions::new(config),
            latest: AtomicU64::new(0),
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
    pub fn with_metrics(mut self, labels: &crate::instrument::Labels) -> Self {
        self.metrics = Some(Box::new(crate::instrument::Outcomes::bucket(labels)));
        self
    }

    /// The bucket's current configuration (by value: [`TokenBucket::set_config`] may replace
    /// it at any moment).
    pub fn config(&self) -> BucketConfig {
        self.versions.snapshot(&self.state).1
    }

    /// Replaces the bucket's burst and refill interval, at once, while other threads take, at
    /// the reading of `clock`, the clock the bucket is taken with.
    ///
    /// The tokens the bucket owes at that reading carry over: see "Limits changed at runtime"
    /// in the [module documentation](self) for exactly what a change does (a full bucket stays
    /// full; a drained one still owes every token, now at the new rate, at most a full new
    /// burst). A take racing the change is decided wholly under the config in force when it
    /// lands.
    ///
    /// The unit the bucket counts time in is fixed when it is built: a bucket built with a
    /// whole-millisecond interval refuses an interval that is not whole milliseconds, and one
    /// built with a microsecond interval refuses a config whose refill span exceeds
    /// [`BucketConfig::MAX_FINE_REFILL_SPAN`]; both as [`BucketConfigError::DoesNotFitUnit`],
    /// changing nothing.
    ///
    /// ```
    /// use admit::{BucketConfig, BucketConfigError, Clock, ManualClock, TokenBucket};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let bucket = TokenBucket::new(BucketConfig::per_second(10)?); // burst 10, one per 100 ms
    /// assert!(bucket.try_acquire_n(&clock, 10).is_ok()); // drained: owes 10 tokens
    /// bucket.set_config(BucketConfig::per_second(10)?.with_burst(20)?, &clock)?;
    /// assert_eq!(bucket.available_at(0), 10, "still owes its 10 tokens; 10 more of burst");
    /// // A slower rate: the 10 tokens still owed now come back one a second.
    /// bucket.set_config(BucketConfig::per_second(1)?.with_burst(20)?, &clock)?;
    /// assert_eq!(bucket.available_at(0), 10);
    /// assert!(bucket.is_full_at(10_000_000_000) && !bucket.is_full_at(9_999_999_999));
    /// let fine = BucketConfig::new(1, Duration::from_micros(1_500))?;
    /// assert!(matches!(
    ///     bucket.set_config(fine, &clock),
    ///     Err(BucketConfigError::DoesNotFitUnit { .. })
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_config(
        &self,
        config: BucketConfig,
        clock: &impl Clock,
    ) -> Result<(), BucketConfigError> {
        self.set_config_at(config, clock.now_ns())
    }

    /// [`TokenBucket::set_config`] at reading `now_ns`, the instant at which the tokens owed
    /// are carried over (a reading of the clock the bucket is taken with).
    ///
    /// ```
    /// use admit::{BucketConfig, TokenBucket};
    ///
    /// let bucket = TokenBucket::new(BucketConfig::per_second(100)?); // burst 100
    /// assert!(bucket.try_acquire_n_at(100, 0).is_ok()); // owes 100 tokens
    /// bucket.set_config_at(BucketConfig::per_second(1)?.with_burst(100)?, 0)?;
    /// assert_eq!(bucket.available_at(0), 0, "still owes its 100 tokens");
    /// assert_eq!(bucket.available_at(1_000_000_000), 1, "and earns them back at 1/s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_config_at(
        &self,
        config: BucketConfig,
        now_ns: u64,
    ) -> Result<(), BucketConfigError> {
        self.versions
            .change(&self.state, &config, now_ns, &self.latest)
    }

    /// Whether [`TokenBucket::set_config`] would take `config`, changing nothing: it fits
    /// the bucket's unit, and the longest debt the bucket's configs allow, carried to it,
    /// fits the unit's longest span ([`BucketConfigError::DebtBeyondUnit`]).
    pub fn check_config(&self, config: &BucketConfig) -> Result<(), BucketConfigError> {
        self.versions.check(&self.state, config)
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

    /// Whole tokens available at `now_ns`, without taking any.
    pub fn available_at(&self, now_ns: u64) -> u32 {
        let (word, config) = self.versions.snapshot(&self.state);
        gcra::available(&config, versions::full_at(word), config.tick().of(now_ns))
    }

    /// How long until `n` tokens can be taken (zero if now), without taking any.
    pub fn wait_for_at(&self, n: u32, now_ns: u64) -> Result<Duration, ExceedsBurst> {
        let (word, config) = self.versions.snapshot(&self.state);
        let full_at = versions::full_at(word);
        if n > config.burst() {
            return Err(ExceedsBurst {
                requested: n,
                burst: config.burst(),
            });
        }
        Ok(gcra::peek_at(&config, full_at, n, now_ns).1)
    }

    /// Whether the bucket holds its full burst at `now_ns`.
    pub fn is_full_at(&self, now_ns: u64) -> bool {
        let (word, config) = self.versions.snapshot(&self.state);
        gcra::is_full(versions::full_at(word), config.tick().of(now_ns))
    }
}
