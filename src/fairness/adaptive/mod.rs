//! The adaptive total: ops in flight across all actors, under a limit L that follows the
//! writer's measured latency.
//!
//! A quota bounds what one actor puts ahead of everyone else, not the total: a thousand honest
//! actors each at Q = 32 queue 32,000 ops, and a writer that slows tenfold makes the same queue
//! ten times longer. [`AdaptiveQuotas`] (built by
//! [`QuotasBuilder::build_adaptive`](super::QuotasBuilder::build_adaptive)) are quotas whose
//! every admission is also counted in one total, admitted only while the total is below its
//! priority class's share of L, and L follows the writer's latency toward a target the user
//! states. The per-actor quota still binds: an op needs a place in both.
//!
//! It is a type of its own, not an option of [`Quotas`](super::Quotas): plain quotas read no
//! clock and keep no total, and compile to the same code as if this module did not exist (a
//! permit that may or may not be counted in a total costs every acquire a branch and a wider
//! permit, which the instruction counts showed: +8 % on the plain acquire and release).
//!
//! # The signal and the rule
//!
//! A counted permit keeps the clock reading of its admission; its release adds the time since
//! (admission to decision: the queueing delay plus one apply) to the current window's samples.
//! A window lasts one target latency; the first admission or release after it ends closes it,
//! and L takes one step of additive increase, multiplicative decrease (see `aimd.rs` and
//! `docs/design.md`): over the target, or with the oldest op in flight older than two targets
//! (a stalled writer sends no samples, but its ops age: see `oldest.rs`), L × 0.9; under the
//! target with at least half of L in flight, L + 1; within `floor..=ceiling` always.
//!
//! # Invariants
//!
//! 1. **At each admission the total is below L, and below its class's share of L**
//!    (`total × 1000 < L × share`): the check and the increment are one CAS on the word that
//!    holds both. Ops admitted before L fell are not evicted: a lower L only refuses new ones
//!    (tests `the_total_never_reaches_the_class_share`,
//!    `ops_admitted_before_the_limit_fell_stay`; loom `samples_are_not_lost_while_a_third_admits`;
//!    proptest and fuzz `adaptive` against `crate::check::adaptive`).
//! 2. **Per actor, at most Q**: an op takes its actor's place first, and gives it back if the
//!    total refuses (test `the_actor_quota_still_binds_under_the_total`; the fairness
//!    invariants are unchanged).
//! 3. **L within its bounds**, after every step and every change of the bounds (tests
//!    `the_limit_stays_within_its_bounds`, `new_bounds_clamp_the_limit_at_once`; proptest).
//! 4. **No sample lost**: every release adds its sample and its count in one `fetch_add` to the
//!    window's word; a closer takes the window by one `swap`, so each sample is in exactly one
//!    closed window or still in the open one (loom `samples_are_not_lost_while_a_third_admits`;
//!    proptest: the model folds the same samples into the same steps).
//! 5. **A stalled writer is detected** within `2 × target + target/4 + target` of the stall
//!    and the next admission attempt after it (test `a_full_stall_lowers_the_limit`).
//! 6. **An op refused by the total holds nothing**: its actor's place is given back before
//!    the refusal is answered (test `the_actor_quota_still_binds_under_the_total`; proptest).
//!
//! # Orderings
//!
//! The word of L and the total, the samples word, the age buckets and the window's end are
//! counters and a deadline: each is changed by a single atomic read-modify-write (or a CAS
//! loop) and publishes no other data, so `Relaxed` is enough for each alone; coherence on one
//! word is what makes the check-and-increment and the swap exact. The one store/load race is
//! between a closer's step of L and a change of the bounds: the change stores the bounds then
//! clamps L; the closer CASes L then reads the bounds, and clamps again if they moved. Both
//! sides are `SeqCst`, so at least one sees the other and L ends within the newest bounds.

mod aimd;
mod config;
mod oldest;
mod priority;
mod quotas;
mod refused;
#[cfg(test)]
mod tests;

pub use config::{AdaptiveTotal, AdaptiveTotalError, MAX_TOTAL_LIMIT};
pub use priority::{Priority, Shares};
pub use quotas::{AdaptivePermit, AdaptiveQuotas, OwnedAdaptivePermit};
pub use refused::TotalRefused;

use crate::clock::Clock;
use crate::sync::atomic::{AtomicU64, Ordering};
use crossbeam_utils::CachePadded;
use oldest::Ages;
use std::time::Duration;

/// A permit's admission reading when the total does not count it: shadow mode admitted an op
/// the total refused (see [`crate::shadow`]), so it holds no place there and sends no sample.
pub(crate) const NOT_COUNTED: u64 = u64::MAX;
/// A permit's admission reading once its sample was taken at the response's headers
/// ([`Capacity::responded`]): it holds its place in the total, and sends no second sample.
pub(crate) const SAMPLED: u64 = u64::MAX - 1;

/// The total: the low 32 bits of the word.
const TOTAL: u64 = (1 << 32) - 1;
/// The samples' sum is kept in units of 2^10 ns (about a microsecond).
const UNIT_SHIFT: u32 = 10;
/// Bits of the samples' sum; the count is above it.
const SUM_BITS: u32 = 44;
const SUM: u64 = (1 << SUM_BITS) - 1;
/// One sample's count in the samples word.
const ONE_SAMPLE: u64 = 1 << SUM_BITS;
/// One sample is at most 2^24 units (17 s), so 2^20 samples never carry out of the sum.
const MAX_SAMPLE_UNITS: u64 = 1 << 24;
/// A window closes at once when it holds this many samples (half the count's room), whatever
/// the time, so its count never wraps.
const FULL_WINDOW: u64 = 1 << 19;

/// L in a word.
#[inline]
fn limit_of(word: u64) -> u32 {
    (word >> 32) as u32
}

/// A word with L replaced.
#[inline]
fn with_limit(word: u64, limit: u32) -> u64 {
    u64::from(limit) << 32 | (word & TOTAL)
}

/// The shared state of the adaptive total, reading clock `C`.
#[derive(Debug)]
pub(crate) struct Capacity<C> {
    /// L and the total, and the open window's samples: the two words every admission and
    /// release writes, on one line, so that an op moves one contended line, not two.
    counts: CachePadded<Counts>,
    /// Read by every decision, written once a window.
    settings: CachePadded<Settings>,
    /// The ops in flight by admission epoch.
    ages: CachePadded<Ages>,
    /// Samples folded into a step of L, ever.
    folded: AtomicU64,
    /// The last window's mean sample, in ns: the latency estimate.
    estimate_ns: AtomicU64,
    clock: C,
    #[cfg(feature = "metrics")]
    metrics: Option<metrics::CapacityMetrics>,
}

/// The words every op writes.
#[derive(Debug)]
struct Counts {
    /// L (high 32 bits) and the ops in flight it counts (low 32): one CAS checks and counts.
    word: AtomicU64,
    /// The open window's samples: their count (high 20 bits) and their sum (low 44, in units
    /// of 2^[`UNIT_SHIFT`] ns).
    samples: AtomicU64,
}

/// What decisions read: the window's end and the shares; and what only closers read.
#[derive(Debug)]
struct Settings {
    /// When the open window ends, in clock ns.
    window_end: AtomicU64,
    /// The shares, packed ([`Shares::packed`]).
    shares: AtomicU64,
    /// The target latency, ns.
    target_ns: AtomicU64,
    /// The floor (high 32 bits) and the ceiling (low 32).
    bounds: AtomicU64,
}

impl<C: Clock> Capacity<C> {
    /// The total of `config` (already validated), reading `clock`.
    pub(crate) fn new(config: &AdaptiveTotal, clock: C) -> Self {
        let target_ns = config.target_ns();
        let initial = config.initial.clamp(config.floor, config.ceiling);
        let now = clock.now_ns();
        Self {
            counts: CachePadded::new(Counts {
                word: AtomicU64::new(with_limit(0, initial)),
                samples: AtomicU64::new(0),
            }),
            settings: CachePadded::new(Settings {
                window_end: AtomicU64::new(now.saturating_add(target_ns)),
                shares: AtomicU64::new(config.shares.packed()),
                target_ns: AtomicU64::new(target_ns),
                bounds: AtomicU64::new(bounds_word(config)),
            }),
            ages: CachePadded::new(Ages::new(target_ns)),
            folded: AtomicU64::new(0),
            estimate_ns: AtomicU64::new(0),
            clock,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// Attaches the gauges and counters (see `metrics.rs`).
    #[cfg(feature = "metrics")]
    pub(crate) fn with_metrics(mut self, labels: Option<&crate::instrument::Labels>) -> Self {
        self.metrics = labels.map(metrics::CapacityMetrics::register);
        self
    }

    /// Counts one op of `priority` if the total is below its class's share of L; returns its
    /// admission reading.
    #[inline]
    pub(crate) fn admit(&self, priority: Priority) -> Result<u64, TotalRefused> {
        // A reading of `SAMPLED` or `NOT_COUNTED` would be taken for a mark: a nanosecond or
        // two earlier is the same age.
        let now = self.clock.now_ns().min(SAMPLED - 1);
        // Relaxed: the shares publish nothing but themselves; read once per decision.
        let share = priority::share_in(self.settings.shares.load(Ordering::Relaxed), priority);
        // Relaxed: L and the total are counters in one word; the CAS on it is the whole
        // check-and-count (Invariant 1), and it publishes no other data.
        let counted = self
            .counts
            .word
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                let total = word & TOTAL;
                (total * u64::from(Shares::WHOLE) < u64::from(limit_of(word)) * share)
                    .then_some(word + 1)
            });
        match counted {
            Ok(_) => {
                self.ages.admit(now);
                self.close_if_due(now);
                Ok(now)
            }
            Err(word) => Err(self.refuse(now, word, priority, share)),
        }
    }

    /// The op admitted at `since` is decided: its sample goes to the open window, its place in
    /// the total and in its age bucket is freed.
    #[inline]
    pub(crate) fn release(&self, since: u64) {
        let (now, full) = self.sample(since);
        self.free();
        self.close_after_sample(now, full);
    }

    /// The op admitted at `since` is answered, though it keeps its place in the total (a
    /// response streaming its body): its sample goes to the open window and it leaves its age
    /// bucket, so a slow reader neither lowers the mean nor ages as a stalled writer would.
    /// Its place is freed later by [`Capacity::free`].
    #[cold]
    pub(crate) fn responded(&self, since: u64) {
        let (now, full) = self.sample(since);
        self.close_after_sample(now, full);
    }

    /// Closes the window after a sample: at once if the sample filled it, else if it is due.
    #[inline]
    fn close_after_sample(&self, now: u64, full: bool) {
        if full {
            self.close(now);
        } else {
            self.close_if_due(now);
        }
    }

    /// Adds the sample of the op admitted at `since` and uncounts it from its age bucket;
    /// returns the reading, and whether the window is full (its count must not wrap: it is
    /// closed at once).
    #[inline]
    fn sample(&self, since: u64) -> (u64, bool) {
        let now = self.clock.now_ns();
        let units = (now.saturating_sub(since) >> UNIT_SHIFT).min(MAX_SAMPLE_UNITS);
        // Relaxed: the count and the sum move together in this one RMW; a closer's `swap`
        // takes it whole or leaves it whole to the next window (Invariant 4).
        let before = self
            .counts
            .samples
            .fetch_add(ONE_SAMPLE | units, Ordering::Relaxed);
        self.ages.release(since);
        (now, before >> SUM_BITS >= FULL_WINDOW - 1)
    }

    /// Frees one place in the total.
    #[inline]
    pub(crate) fn free(&self) {
        // Relaxed: a counter (see `admit`); the total holds our own one, so the subtraction
        // does not borrow from L.
        self.counts.word.fetch_sub(1, Ordering::Relaxed);
    }

    /// Closes the open window if it has ended.
    #[inline]
    fn close_if_due(&self, now: u64) {
        // Relaxed: a deadline; the CAS in `close_due` picks one closer.
        if now >= self.settings.window_end.load(Ordering::Relaxed) {
            self.close_due(now);
        }
    }

    /// The window has ended: the thread that moves its end closes it.
    #[cold]
    fn close_due(&self, now: u64) {
        // Relaxed: a deadline; the CAS only elects one closer per window.
        let end = self.settings.window_end.load(Ordering::Relaxed);
        let target = self.settings.target_ns.load(Ordering::Relaxed);
        if now < end
            || self
                .settings
                .window_end
                .compare_exchange(
                    end,
                    now.saturating_add(target),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        self.close(now);
    }

    /// Takes the open window's samples and steps L.
    #[cold]
    fn close(&self, now: u64) {
        // Relaxed: the swap is one RMW on the samples word, so it takes exactly the samples
        // added before it in that word's order; later ones stay for the next window.
        let batch = self.counts.samples.swap(0, Ordering::Relaxed);
        let samples = batch >> SUM_BITS;
        let mean_ns = ((batch & SUM) << UNIT_SHIFT)
            .checked_div(samples)
            .unwrap_or(0);
        // Relaxed: counters for introspection.
        self.folded.fetch_add(samples, Ordering::Relaxed);
        if samples > 0 {
            self.estimate_ns.store(mean_ns, Ordering::Relaxed);
        }
        let oldest_ns = self.ages.oldest(now);
        // Relaxed: the target alone orders nothing.
        let target = self.settings.target_ns.load(Ordering::Relaxed);
        // SeqCst: the bounds race with a change of them (see "Orderings").
        let (floor, ceiling) = bounds_of(self.settings.bounds.load(Ordering::SeqCst));
        // SeqCst: this step of L, then the bounds read again, pairs with a change's store of
        // the bounds, then its clamp (see "Orderings").
        let _ = self
            .counts
            .word
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                let window = aimd::Window {
                    samples,
                    mean_ns,
                    oldest_ns,
                    in_flight: word & TOTAL,
                };
                let next = aimd::next_limit(limit_of(word), &window, target, floor, ceiling);
                Some(with_limit(word, next))
            });
        // SeqCst: see above.
        let bounds = self.settings.bounds.load(Ordering::SeqCst);
        if bounds != bounds_word_of(floor, ceiling) {
            self.clamp(bounds);
        }
        #[cfg(feature = "metrics")]
        if let Some(metrics) = &self.metrics {
            metrics.window(self.limit(), mean_ns, samples > 0);
        }
    }

    /// A refusal: closes a due window first (a stalled writer's only signal arrives here),
    /// counts it, and says why.
    #[cold]
    fn refuse(&self, now: u64, word: u64, priority: Priority, share: u64) -> TotalRefused {
        self.close_if_due(now);
        #[cfg(feature = "metrics")]
        if let Some(metrics) = &self.metrics {
            metrics.refused(priority);
        }
        TotalRefused {
            priority,
            share: u32::try_from(share).unwrap_or(Shares::WHOLE),
            limit: limit_of(word),
            in_flight: u32::try_from(word & TOTAL).unwrap_or(u32::MAX),
        }
    }

    /// Brings L within the bounds of `bounds` (a packed word).
    fn clamp(&self, bounds: u64) {
        let (floor, ceiling) = bounds_of(bounds);
        // SeqCst: the change's side of the race in "Orderings".
        let _ = self
            .counts
            .word
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |word| {
                let limit = limit_of(word);
                let bounded = limit.clamp(floor, ceiling.max(floor));
                (bounded != limit).then(|| with_limit(word, bounded))
            });
    }

    /// Takes new settings at once (already validated): the shares, the target, the bounds,
    /// each a word of its own; L keeps its value, clamped to the new bounds.
    pub(crate) fn configure(&self, config: &AdaptiveTotal) {
        // Relaxed: each setting publishes nothing but itself.
        self.settings
            .shares
            .store(config.shares.packed(), Ordering::Relaxed);
        self.settings
            .target_ns
            .store(config.target_ns(), Ordering::Relaxed);
        let bounds = bounds_word(config);
        // SeqCst: the store, then the clamp, against a closer's step (see "Orderings").
        self.settings.bounds.store(bounds, Ordering::SeqCst);
        self.clamp(bounds);
    }

    /// The settings now (the initial L as it is now).
    pub(crate) fn settings(&self) -> AdaptiveTotal {
        // Relaxed: snapshots.
        let (floor, ceiling) = bounds_of(self.settings.bounds.load(Ordering::Relaxed));
        let target_ns = self.settings.target_ns.load(Ordering::Relaxed);
        AdaptiveTotal::new(Duration::from_nanos(target_ns))
            .floor(floor)
            .ceiling(ceiling)
            .initial(self.limit())
            .shares(Shares::unpacked(
                self.settings.shares.load(Ordering::Relaxed),
            ))
    }

    /// L now.
    pub(crate) fn limit(&self) -> u32 {
        // Relaxed: a snapshot.
        limit_of(self.counts.word.load(Ordering::Relaxed))
    }

    /// The ops counted in the total now.
    pub(crate) fn in_flight(&self) -> u32 {
        // Relaxed: a snapshot.
        (self.counts.word.load(Ordering::Relaxed) & TOTAL) as u32
    }

    /// The last window's mean sample (`None` before the first window with samples).
    pub(crate) fn estimate(&self) -> Option<Duration> {
        // Relaxed: a snapshot.
        let ns = self.estimate_ns.load(Ordering::Relaxed);
        (ns > 0).then(|| Duration::from_nanos(ns))
    }

    /// Samples folded into steps of L, and samples in the open window.
    #[cfg(any(test, admit_loom, fuzzing))]
    pub(crate) fn samples(&self) -> (u64, u64) {
        // Relaxed: snapshots, exact once the releases have happened-before the call.
        (
            self.folded.load(Ordering::Relaxed),
            self.counts.samples.load(Ordering::Relaxed) >> SUM_BITS,
        )
    }
}

/// The bounds of a config in one word.
fn bounds_word(config: &AdaptiveTotal) -> u64 {
    bounds_word_of(config.floor, config.ceiling)
}

fn bounds_word_of(floor: u32, ceiling: u32) -> u64 {
    u64::from(floor) << 32 | u64::from(ceiling)
}

fn bounds_of(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

#[cfg(feature = "metrics")]
mod metrics;
