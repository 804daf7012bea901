//! Keyed token buckets in a bounded entry table, with per-class overflow buckets so that no
//! charge is ever admitted unlimited.
//!
//! A charge names `(identity, class)`: the identity is any `K: Hash + ?Sized` (`str`, `[u8]`,
//! an `IpAddr`, a `u64`, a tuple), fed through its [`Hash`] impl into the
//! limiter's keyed SipHash-1-3, never parsed or normalised; the class is an index into the
//! configs the limiter was built with. What a charge does, stated exhaustively:
//!
//! 1. **Present**: charge that entry's bucket.
//! 2. **Absent, below the cap**: insert a full bucket and charge it.
//! 3. **Absent, at the cap**: first reclaim every entry refilled to its full burst (a full
//!    entry is indistinguishable from an absent one: both yield a full bucket on next use),
//!    then insert and charge.
//! 4. **Still at the cap**: charge the overflow bucket of the key's class. One per class,
//!    built from that class's config, never reclaimed, not counted against the cap.
//!
//! The miss path is total: every charge lands on exactly one bucket.
//!
//! # One identity, one type
//!
//! The identity is what its `Hash` impl writes, and `Hash` is typed: a `str` writes its bytes
//! and a `0xFF` terminator, a `[u8]` its length and then its bytes. So `"alice"` and
//! `b"alice"` are **two different identities**, each with its own buckets, and so are the
//! `u64` 7 and its eight little-endian bytes. A server must key a given identity with the same
//! kind of type at every call. Within a kind, how it is held does not matter: a `String` and a
//! `&str` agree, and so do a `Vec<u8>`, a `&[u8]` and a `[u8; N]` (arrays hash as slices).
//!
//! # Invariants
//!
//! 1. `len() <= cap()` at every instant, and the table's memory is fixed at construction.
//! 2. An entry is removed only while it holds its full burst: reclamation CASes from the
//!    exact word it judged full, so an entry charged meanwhile stays.
//! 3. One identity and class has at most one live entry; a charge never lands on a removed
//!    slot or on a slot reused by another key (see the [design notes](crate::implementation)).
//! 4. No charge is admitted unlimited: each lands on an entry or on its class's overflow
//!    bucket, and both obey the token-bucket rules of [`crate::bucket`].
//! 5. A saturated miss is O(1) amortised: a scan runs only when the reclaim hint says some entry
//!    may be full, and a scan that frees nothing sets the hint to the earliest moment one
//!    could be. Each fruitless scan after that needs an entry to have been recharged before
//!    reaching full, which costs its owner a token, so scans are paid for by tokens, which
//!    are rate-limited.
//!
//! 6. **Reclaiming mints nothing, whatever the readings.** A charge whose reading is older than
//!    one a reclaim used never finds an identity's fresh entry fuller than the removed entry
//!    was: fresh entries are dated from the reclamation floor (see "Readings and
//!    reclamation").
//! 7. **A bad reading costs only its caller.** A reading more than
//!    [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) ahead of the limiter's
//!    clock is refused ([`InvalidCharge::ReadingAhead`]) before anything moves.
//!
//! 8. **A change of a class's limits carries the tokens owed over** ([`Limiter::set_config`]):
//!    every entry of the class and its overflow bucket owe after the change what a
//!    [`TokenBucket`](crate::TokenBucket) would, with no entry written at the change (the
//!    protocol is in `src/limiter/era.rs`; tests in `limiter::reconfig_tests`).
//!
//! Invariants 1–4 and 6–8 are checked against a sequential reference (a `HashMap` with the same cap
//! rules) by proptest and by the `limiter_miss_path` fuzz target, the concurrent ones by loom
//! models in `loom-tests/tests/limiter.rs`.
//!
//! # Readings and reclamation
//!
//! A reclaim judges entries full at its own reading. Burst 1 per 10 ms: a charge at 0 ms is
//! granted, one at 5 ms refused; a sweep at 10 ms frees the (full) entry. If the identity's
//! next entry started full, a second charge at 5 ms would be granted: a token minted by a
//! reading older than one already used. So each reclaim raises a floor, the latest tick it
//! judged an entry full at, before the CAS that removes the entry, and an entry that was
//! never charged counts as full from the floor on, not from the beginning of time. The second
//! charge at 5 ms is refused with a wait of 5 ms, exactly as without the sweep. Readings at
//! or after the floor see a fresh full bucket, as before.
//!
//! # The residual
//!
//! While the table is saturated with drained entries, every identity without an entry of its
//! own shares its class's overflow bucket, so one caller's flood can throttle another's
//! traffic. That is inherent to any bounded table (memory cannot stay bounded while a private
//! bucket is promised to an unbounded number of identities); what matters is that it is
//! bounded, never unlimited. At the cap, a first charge racing another first charge of the
//! same identity can likewise land on the overflow bucket (see "At the cap" in
//! the [design notes](crate::implementation)): the identity's entry is never doubled, the extra token comes from the
//! shared, rate-limited overflow bucket.
//!
//! # How far a clock counts
//!
//! An entry keeps its bucket's state in the 41 bits its table slot leaves beside its class's
//! era bit. A limiter whose classes count milliseconds keeps it there absolute, which holds
//! readings up to `2^40 − 1` ms of its clock (about 34.8 years from the clock's origin; the
//! crate's clocks count from the process's start or their own creation); every later reading
//! is counted as that last instant, in its decisions and in every answer (a refusal's wait,
//! a peek, a check, a debit's wait, the overflow buckets), so buckets stop refilling there
//! and grant nothing more. A limiter counting microseconds counts up to about 104 years, as a
//! [`TokenBucket`](crate::TokenBucket) does. A [`Clock`] of your own should count from an
//! origin near the process's start, not from the Unix epoch.

mod builder;
#[cfg(test)]
mod change_reading_tests;
mod charge;
mod debit;
#[cfg(test)]
mod debit_tests;
#[cfg(test)]
mod debt_tests;
mod epoch;
mod era;
mod hint;
mod land;
#[cfg(test)]
mod micros_tests;
mod outcome;
mod peek;
mod reclaim;
mod reconfig;
#[cfg(test)]
mod reconfig_tests;
mod refund;
#[cfg(test)]
mod refund_tests;
#[cfg(test)]
mod segment_tests;
#[cfg(test)]
mod tests;

pub use builder::{LimiterBuilder, LimiterConfigError};
pub use debit::Debit;
#[cfg(any(test, fuzzing))]
pub(crate) use epoch::EPOCH_TICKS;
pub use outcome::{Grant, InvalidCharge, Limited, LimiterRefused, Peek};
#[cfg(feature = "tower")]
pub(crate) use peek::Left;
#[cfg(all(test, feature = "tower"))]
pub(crate) use peek::LOOKUPS;

use crate::bucket::gcra;
use crate::bucket::BucketConfig;
use crate::clock::tick::Tick;
use crate::clock::{Clock, Horizon, RecentClock};
use crate::shadow::Shadow;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::table::{Geometry, KeyHasher, Table};
use epoch::Epochs;
use era::{ClassCell, Stamp};
use hint::ReclaimHint;

/// The default cap on live entries of a [`Limiter`]: 65,536, a table of 1.9 MiB.
///
/// Sized for a server keyed by client: that many clients may hold an unfinished refill at
/// once before newcomers share their class's overflow bucket. A saturated miss scans at most
/// one segment of the table for entries to reclaim (16,384 slots), whatever the cap. Set a
/// smaller cap where memory counts more (many limiters in one process); the registrar profile
/// keeps its reference deployment's 256 ([`REFERENCE_CAP`](crate::registrar::REFERENCE_CAP)).
///
/// ```
/// use admit::{BucketConfig, Limiter, DEFAULT_CAP};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?])?;
/// assert_eq!(limiter.cap(), DEFAULT_CAP);
/// assert_eq!(DEFAULT_CAP, 65_536);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(not(miri))]
pub const DEFAULT_CAP: usize = 65_536;

/// Under miri the default table is 4,096 entries: the interpreter builds and tracks every
/// slot, and a test that builds a default limiter would take minutes at the full size. What a
/// table does is the same at any cap; only how many clients it holds differs.
#[cfg(miri)]
pub const DEFAULT_CAP: usize = 4_096;

/// One class: its config, its overflow bucket, and how often the overflow paid.
#[derive(Debug)]
struct Class {
    /// The class's limits, in the limiter's unit, and their era, changed at runtime by
    /// [`Limiter::set_config`] (see [`era`]): a decision decides under one load of it, for the
    /// entry and the overflow bucket.
    config: ClassCell,
    /// The overflow bucket's state (its `full_at`, as in a [`TokenBucket`], with the class's
    /// era bit on top, see [`era`]): its config is the class's.
    overflow: AtomicU64,
    overflow_charges: AtomicU64,
    /// The class's shadow switch (see [`crate::shadow`]).
    shadow: Shadow,
    /// The class's decision counters: no-op handles unless metrics are attached.
    #[cfg(feature = "metrics")]
    outcomes: crate::instrument::Outcomes,
}

/// Keyed token buckets in a bounded table. See the [module documentation](self).
///
/// ```
/// use admit::{BucketConfig, Limiter, ManualClock};
/// use std::time::Duration;
///
/// // Class 0: burst 3, a token back every second. Class 1: burst 1 per minute.
/// let clock = ManualClock::new();
/// let limiter = Limiter::builder()
///     .cap(4_096)
///     .build_with_clock([BucketConfig::new(3, Duration::from_millis(1_000))?, BucketConfig::new(1, Duration::from_millis(60_000))?], clock.clone())?;
/// for _ in 0..3 {
///     assert!(limiter.try_acquire("alice", 0).is_ok());
/// }
/// let limited = *limiter.try_acquire("alice", 0).unwrap_err().limited().unwrap();
/// assert_eq!(limited.wait(), Duration::from_secs(1));
/// assert!(limiter.try_acquire("bob", 0).is_ok(), "bob has his own bucket");
/// clock.advance(Duration::from_secs(1));
/// assert!(limiter.try_acquire("alice", 0).is_ok());
/// assert_eq!(limiter.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Limiter<C: Clock = RecentClock> {
    table: Table,
    hasher: KeyHasher,
    classes: Box<[Class]>,
    hint: ReclaimHint,
    /// The unit every class counts time in: microseconds if any class needs them.
    tick: Tick,
    /// In microseconds, the epochs that entries' offsets count from (see [`epoch`]).
    epochs: Option<Epochs>,
    /// The latest tick any reclamation judged an entry full at: a fresh entry is dated no
    /// earlier, so a reading older than one a reclaim used never finds a fuller bucket than
    /// the removed one had (see "Readings and reclamation").
    floor: AtomicU64,
    /// Refuses readings ahead of `clock` (see [`crate::clock::ReadingAhead`]).
    horizon: Horizon,
    /// Serialises [`Limiter::set_config`]: no decision takes it.
    changes: crate::sync::Mutex<()>,
    clock: C,
    /// This limiter's random id, which its grants carry: a refund gives back only on the
    /// limiter that granted (see "Refunds" in the [bucket docs](crate::bucket#refunds)).
    id: u64,
    /// The counters and gauges, if attached at build ([`LimiterBuilder::metrics`]).
    #[cfg(feature = "metrics")]
    metrics: Option<Box<crate::instrument::LimiterMetrics>>,
    /// The key of the actor digests in refusal events (see `crate::trace`).
    #[cfg(feature = "tracing")]
    digest: crate::trace::Digest,
}

/// What the decision-writes test (`check::writes`) needs to know of a limiter's lines.
#[cfg(all(test, admit_writes))]
impl<C: Clock> Limiter<C> {
    /// The line of `actor`'s entry in `class`, if it has one.
    pub(crate) fn entry_line(
        &self,
        actor: &crate::actor::HashedActor,
        class: u16,
    ) -> Option<crate::sync::writes::Line> {
        self.table.member_line(&self.hasher.key_of(actor, class))
    }

    /// The lines of the horizon: the latest reading seen, a word every decision reads.
    pub(crate) fn horizon_lines(&self) -> std::ops::RangeInclusive<crate::sync::writes::Line> {
        crate::sync::writes::lines_of(&self.horizon)
    }
}

impl Limiter<RecentClock> {
    /// A builder with the default cap.
    pub fn builder() -> LimiterBuilder {
        LimiterBuilder::default()
    }
}

impl<C: Clock> Limiter<C> {
    fn assemble(
        geometry: Geometry,
        hasher: &KeyHasher,
        classes: Vec<BucketConfig>,
        tick: Tick,
        clock: C,
    ) -> Self {
        let table = Table::new(geometry);
        let hint = ReclaimHint::new(tick, table.slots());
        let hasher = hasher.for_shape(table.shape()).for_classes(classes.len());
        let classes = classes
            .into_iter()
            .map(|config| Class {
                config: ClassCell::new(&config),
                overflow: AtomicU64::new(gcra::FRESH),
                overflow_charges: AtomicU64::new(0),
                shadow: Shadow::new(),
                #[cfg(feature = "metrics")]
                outcomes: crate::instrument::Outcomes::noop(),
            })
            .collect();
        Self {
            table,
            hasher,
            classes,
            hint,
            tick,
            epochs: (tick == Tick::Micros).then(Epochs::new),
            floor: AtomicU64::new(gcra::FRESH),
            horizon: Horizon::new(),
            changes: crate::sync::Mutex::new(()),
            clock,
            id: crate::entropy::random_u64(),
            #[cfg(feature = "metrics")]
            metrics: None,
            #[cfg(feature = "tracing")]
            digest: crate::trace::Digest::random(),
        }
    }

    /// Attaches the counters and gauges (at build, before the limiter is shared).
    #[cfg(feature = "metrics")]
    fn attach(&mut self, labels: &crate::instrument::Labels) {
        for (index, class) in self.classes.iter_mut().enumerate() {
            class.outcomes = crate::instrument::Outcomes::limiter_class(labels, index);
        }
        let metrics = crate::instrument::LimiterMetrics::register(labels, self.cap());
        metrics.entries(self.len());
        self.metrics = Some(Box::new(metrics));
    }

    /// The horizon's bound, for the reference models to compare theirs with.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn horizon_bound(&self) -> u64 {
        self.horizon.bound()
    }

    /// Live entries (counting inserts in flight); never above [`Limiter::cap`].
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no entry is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cap on live entries.
    pub fn cap(&self) -> usize {
        self.table.cap()
    }

    /// How many charges of `class` landed on its overflow bucket since construction
    /// (`None` for an unknown class).
    pub fn overflow_charges(&self, class: usize) -> Option<u64> {
        // Relaxed: a statistic.
        self.classes
            .get(class)
            .map(|c| c.overflow_charges.load(Ordering::Relaxed))
    }

    /// Switches `class` into [shadow mode](crate::shadow) (`true`) or back to enforcing, at
    /// once, while other threads decide: in shadow mode every charge is decided and charged as
    /// if enforced, but a charge enforcement would refuse is admitted instead, takes nothing,
    /// and says so ([`Grant::would_have_refused`]).
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter, ManualClock};
    ///
    /// let limiter = Limiter::builder().build_with_clock([BucketConfig::per_second(1)?], ManualClock::new())?;
    /// limiter.set_shadow(0, true)?;
    /// for _ in 0..3 {
    ///     assert!(limiter.try_acquire("alice", 0).is_ok());
    /// }
    /// assert_eq!(limiter.shadow_admissions(0), Some(2), "enforcing, it would have refused 2");
    /// limiter.set_shadow(0, false)?;
    /// assert!(limiter.try_acquire("alice", 0).is_err(), "the shadow admissions took nothing");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_shadow(&self, class: usize, on: bool) -> Result<(), InvalidCharge> {
        let cls = self.classes.get(class).ok_or(InvalidCharge::UnknownClass {
            class,
            classes: self.classes.len(),
        })?;
        cls.shadow.set(on);
        Ok(())
    }

    /// Whether `class` is in shadow mode (`None` for an unknown class).
    pub fn is_shadow(&self, class: usize) -> Option<bool> {
        self.classes.get(class).map(|c| c.shadow.is_on())
    }

    /// How many charges of `class` shadow mode admitted that enforcement would have refused,
    /// since construction (`None` for an unknown class).
    pub fn shadow_admissions(&self, class: usize) -> Option<u64> {
        self.classes.get(class).map(|c| c.shadow.admitted())
    }

    /// The number of classes.
    pub fn classes(&self) -> usize {
        self.classes.len()
    }

    /// The current config of `class` (`None` for an unknown class), by value:
    /// [`Limiter::set_config`] may replace it at any moment.
    pub fn config(&self, class: usize) -> Option<BucketConfig> {
        self.classes.get(class).map(|c| c.config.config())
    }

    /// Bytes the limiter holds: fixed at construction, whatever identities arrive.
    pub fn memory_bytes(&self) -> usize {
        let bytes = std::mem::size_of::<Self>()
            + self.table.memory_bytes()
            + std::mem::size_of_val(&*self.classes);
        #[cfg(feature = "metrics")]
        let bytes = bytes
            + self
                .metrics
                .as_deref()
                .map_or(0, crate::instrument::LimiterMetrics::heap_bytes);
        bytes
    }

    /// The clock the limiter reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Validates `class` and `n` before any bucket is touched, and reads the class's config,
    /// once: the whole decision uses this copy (see "Limits changed at runtime").
    #[inline]
    fn class(
        &self,
        class: usize,
        n: u32,
    ) -> Result<(u16, &Class, Stamp, BucketConfig), InvalidCharge> {
        let unknown = InvalidCharge::UnknownClass {
            class,
            classes: self.classes.len(),
        };
        let cls = self.classes.get(class).ok_or(unknown)?;
        let index = u16::try_from(class).map_err(|_| unknown)?;
        let (stamp, config) = cls.config.load();
        if n > config.burst() {
            return Err(exceeds(class, n, &config));
        }
        Ok((index, cls, stamp, config))
    }

    /// When entries count microseconds, moves to a new epoch if `now` is past the current
    /// one (see [`epoch`]), before a reading is used to judge or date entries.
    fn enter(&self, now: u64) {
        if let Some(epochs) = &self.epochs {
            self.enter_epoch(epochs, now);
        }
    }

    /// [`Epochs::enter`], a migration carrying each entry over in its class's era.
    #[inline]
    fn enter_epoch(&self, epochs: &Epochs, now: u64) -> epoch::Epoch {
        epochs.enter(now, &self.table, |value, tag| self.judge_tagged(value, tag))
    }

    /// A reading as the limiter counts it, in its unit: the tick of [`Limiter::reading`]
    /// (computed without it, the same tick, as the hit path always did).
    #[inline]
    fn now_tick(&self, now_ns: u64) -> u64 {
        match self.tick {
            Tick::Millis => self.tick.of(now_ns).min(MAX_MILLIS_NOW_TICK),
            Tick::Micros => self.tick.of(now_ns),
        }
    }

    /// A reading as the limiter counts it, in nanoseconds: no later than its last instant
    /// ([`LAST_MILLIS_NS`] in milliseconds, where `full_at` must fit below an entry's era bit;
    /// the clamp of every bucket, `Tick::max_now`, in microseconds). Every answer computed
    /// from a reading (a refusal's wait, a peek, a check, a debit's wait) and the overflow
    /// bucket use it, so that they count the instant the entries are decided at: past the
    /// last instant nothing refills, and every answer says so.
    #[inline]
    fn reading(&self, now_ns: u64) -> u64 {
        match self.tick {
            Tick::Millis => now_ns.min(LAST_MILLIS_NS),
            Tick::Micros => now_ns.min(LAST_MICROS_NS),
        }
    }

    /// The `full_at` an entry's value holds now (any epoch's tag, converted if it is from the
    /// era before its class's), for a reader that knows the class.
    fn judge(&self, cls: &Class, value: u64) -> u64 {
        cls.config.judge(value, |coded| self.decode(coded)).0
    }

    /// [`Limiter::judge`] for a member found by a scan, its class read off its `tag`: the
    /// `full_at` and the era bit it holds it in.
    fn judge_tagged(&self, value: u64, tag: u32) -> (u64, u64) {
        match self.classes.get(self.hasher.class_of(tag)) {
            Some(cls) => cls.config.judge(value, |coded| self.decode(coded)),
            // Unreachable: every tag carries a class the limiter was built with.
            None => (self.decode(value & era::CODED), value & era::ENTRY_ERA),
        }
    }

    /// The `full_at` a coded value holds, outside a decision (any epoch's tag).
    fn decode(&self, coded: u64) -> u64 {
        match &self.epochs {
            None => coded,
            Some(epochs) => epochs.decode(coded, None),
        }
    }

    /// The `full_at` a take starts from: a never-charged entry (`FRESH`) counts as full from
    /// the reclamation floor on, not from the beginning of time.
    #[inline]
    fn dated(&self, full_at: u64) -> u64 {
        if full_at == gcra::FRESH {
            // Relaxed: the floor was raised before the removal this insert follows, and the
            // Acquire loads of the lookup and claim that led here order it before us.
            self.floor.load(Ordering::Relaxed)
        } else {
            full_at
        }
    }

    /// The table gained or lost entries: sets the entries gauge, if one is attached (an insert
    /// or a reclaim scan, never a hit).
    #[inline]
    fn entries_changed(&self) {
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.metrics.as_deref() {
            metrics.entries(self.table.len());
        }
    }
}

/// The latest tick a millisecond limiter counts: `2^41 − 1 − 2^40` ms, about 34.8 years of
/// its clock. An entry's `full_at` is absolute in the 41 bits below its era bit, and runs at
/// most a span (up to 2^40 ms) past the reading it was written at, so `now + span ≤ 2^41 − 1`
/// bounds the reading. Readings past it count as it (see [`Limiter::reading`]).
pub(crate) const MAX_MILLIS_NOW_TICK: u64 = era::CODED - crate::clock::tick::MAX_SPAN_TICKS;
/// [`MAX_MILLIS_NOW_TICK`] in nanoseconds: the last instant a millisecond limiter counts.
pub(crate) const LAST_MILLIS_NS: u64 = MAX_MILLIS_NOW_TICK * crate::clock::tick::TICK_NS;
/// The last instant a microsecond limiter counts, in nanoseconds: every bucket's clamp.
pub(crate) const LAST_MICROS_NS: u64 = Tick::Micros.max_now() * Tick::Micros.ns();

/// The refusal of a charge of `n` tokens above `class`'s burst under `config`.
fn exceeds(class: usize, n: u32, config: &BucketConfig) -> InvalidCharge {
    InvalidCharge::ExceedsBurst {
        class,
        requested: n,
        burst: config.burst(),
    }
}
