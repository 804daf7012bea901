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

mod builder;
mod epoch;
mod era;
mod hint;
#[cfg(test)]
mod micros_tests;
mod outcome;
mod reconfig;
#[cfg(test)]
mod reconfig_tests;
#[cfg(test)]
mod tests;

pub use builder::{LimiterBuilder, LimiterConfigError};
#[cfg(any(test, fuzzing))]
pub(crate) use epoch::EPOCH_TICKS;
use outcome::Receipt;
pub use outcome::{Grant, InvalidCharge, Limited, LimiterRefused, Peek};

use crate::actor::{Actor, HashedActor, Plain};
use crate::bucket::gcra;
use crate::bucket::{BucketConfig, BucketRefused};
use crate::clock::tick::Tick;
use crate::clock::{Clock, Horizon, ReadingAhead, RecentClock};
use crate::shadow::Shadow;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::table::{Geometry, Key, KeyHasher, Table, Update, Verdict};
use epoch::{Absolute, Codec, Epochs};
use era::{ClassCell, Stamp};
use hint::ReclaimHint;
use std::hash::Hash;

/// The default cap on live entries of a [`Limiter`]: 4,096, a table of 120 KiB.
///
/// Sized for a server keyed by client: that many clients may hold an unfinished refill at
/// once before newcomers share their class's overflow bucket. The registrar profile keeps its
/// reference deployment's 256 ([`REFERENCE_CAP`](crate::registrar::REFERENCE_CAP)).
///
/// ```
/// use admit::{BucketConfig, Limiter, DEFAULT_CAP};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?])?;
/// assert_eq!(limiter.cap(), DEFAULT_CAP);
/// assert_eq!(DEFAULT_CAP, 4_096);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
    outcomes: crate::metrics::Outcomes,
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
    /// The counters and gauges, if attached at build ([`LimiterBuilder::metrics`]).
    #[cfg(feature = "metrics")]
    metrics: Option<Box<crate::metrics::LimiterMetrics>>,
    /// The key of the actor digests in refusal events (see `crate::trace`).
    #[cfg(feature = "tracing")]
    digest: crate::trace::Digest,
}

impl Limiter<RecentClock> {
    /// A builder with the default cap.
    pub fn builder() -> LimiterBuilder {
        LimiterBuilder::default()
    }
}

/// Which bucket a charge landed on.
enum Landing {
    /// Decided on the key's entry: the `full_at` a grant left, or the refusal.
    Entry(Result<u64, gcra::Refusal>),
    Overflow,
    /// The entry's value came from a later epoch than the one entered: enter again.
    Again,
    /// The class word moved since the decision loaded it: decide again under the new one.
    Moved,
}

/// Why a decision's update of an entry stopped short.
#[derive(Clone, Copy)]
enum Redo {
    /// Enter the epoch again (microseconds).
    Epoch,
    /// Load the class again.
    Class,
    /// The entry is from the era before its class's, or the class word moved: decide again
    /// on the converting path.
    Convert,
}

/// A charge that landed on an entry: the first `full_at` of a newborn entry, and the answer.
type LandedCharge = (Option<u64>, Result<u64, gcra::Refusal>);

impl<C: Clock> Limiter<C> {
    fn assemble(
        geometry: Geometry,
        hasher: &KeyHasher,
        classes: Vec<BucketConfig>,
        tick: Tick,
        clock: C,
    ) -> Self {
        let table = Table::new(geometry);
        let hasher = hasher.for_shape(table.shape()).for_classes(classes.len());
        let classes = classes
            .into_iter()
            .map(|config| Class {
                config: ClassCell::new(&config),
                overflow: AtomicU64::new(gcra::FRESH),
                overflow_charges: AtomicU64::new(0),
                shadow: Shadow::new(),
                #[cfg(feature = "metrics")]
                outcomes: crate::metrics::Outcomes::noop(),
            })
            .collect();
        Self {
            table,
            hasher,
            classes,
            hint: ReclaimHint::new(tick),
            tick,
            epochs: (tick == Tick::Micros).then(Epochs::new),
            floor: AtomicU64::new(gcra::FRESH),
            horizon: Horizon::new(),
            changes: crate::sync::Mutex::new(()),
            clock,
            #[cfg(feature = "metrics")]
            metrics: None,
            #[cfg(feature = "tracing")]
            digest: crate::trace::Digest::random(),
        }
    }

    /// Attaches the counters and gauges (at build, before the limiter is shared).
    #[cfg(feature = "metrics")]
    fn attach(&mut self, labels: &crate::metrics::Labels) {
        for (index, class) in self.classes.iter_mut().enumerate() {
            class.outcomes = crate::metrics::Outcomes::limiter_class(labels, index);
        }
        let metrics = crate::metrics::LimiterMetrics::register(labels, self.cap());
        metrics.entries(self.len());
        self.metrics = Some(Box::new(metrics));
    }

    /// Charges one token of `class` to `identity` at the clock's current reading.
    #[inline]
    pub fn try_acquire<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
    ) -> Result<Grant, LimiterRefused> {
        self.try_acquire_n_at(identity, class, 1, self.clock.now_ns())
    }

    /// Charges one token of `class` to `identity` at reading `now_ns`, a reading of this
    /// limiter's clock (one reading can serve a whole batch of decisions).
    ///
    /// ```
    /// use admit::{BucketConfig, Clock, Limiter};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::new(2, Duration::from_millis(500))?])?;
    /// let now = limiter.clock().now_ns();
    /// for request in ["a", "b", "a", "a"] {
    ///     let answer = limiter.try_acquire_at(request, 0, now);
    ///     println!("{request}: {answer:?}");
    /// }
    /// assert!(limiter.try_acquire_at("a", 0, now).is_err(), "a spent its burst of 2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        self.try_acquire_n_at(identity, class, 1, now_ns)
    }

    /// Charges `n` tokens (all or nothing) of `class` to `identity` at the clock's current
    /// reading.
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::new(5, Duration::from_secs(1))?])?;
    /// assert!(limiter.try_acquire_n(&42u64, 0, 4).is_ok());
    /// assert!(limiter.try_acquire_n(&42u64, 0, 2).is_err(), "one token left, two asked");
    /// assert!(limiter.try_acquire_n(&42u64, 0, 1).is_ok(), "a refusal takes nothing");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_n<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
    ) -> Result<Grant, LimiterRefused> {
        self.try_acquire_n_at(identity, class, n, self.clock.now_ns())
    }

    /// Charges `n` tokens (all or nothing) of `class` to `identity` at reading `now_ns`.
    #[inline]
    pub fn try_acquire_n_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        let (index, cls, stamp, _) = self.class(class, n)?;
        if n == 0 {
            // Nothing to pay, so nothing to insert: an entry is only ever born charged.
            return Ok(Grant {
                class,
                overflow: false,
                would_refuse: None,
                receipt: Receipt::nothing(stamp),
            });
        }
        let key = self.hasher.key(identity, index);
        self.charge_hashed(&key, class, cls, stamp, n, now_ns)
    }

    /// Charges `n` tokens (all or nothing) of `class` to an actor hashed once
    /// ([`HashedActor::new`]) at the clock's current reading: the same entry
    /// [`Limiter::try_acquire_n`] charges for the identity, without hashing it again.
    #[inline]
    pub fn try_acquire_hashed(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
    ) -> Result<Grant, LimiterRefused> {
        self.try_acquire_hashed_at(actor, class, n, self.clock.now_ns())
    }

    /// Charges `n` tokens (all or nothing) of `class` to an actor hashed once, at reading
    /// `now_ns`. A server hashes each request's actor once and hands the same [`HashedActor`] to
    /// every defence.
    ///
    /// ```
    /// use admit::{BucketConfig, Clock, HashedActor, Limiter};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::new(10, Duration::from_millis(100))?])?;
    /// // Once per connection: hash the peer's identity.
    /// let actor = HashedActor::new("tenant-42");
    /// // Once per request: one reading for the batch, no hashing.
    /// let now = limiter.clock().now_ns();
    /// assert!(limiter.try_acquire_hashed_at(&actor, 0, 1, now).is_ok());
    /// assert_eq!(limiter.peek_at("tenant-42", 0, 1, now)?.available(), 9, "the identity's entry");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_hashed_at(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        let (index, cls, stamp, _) = self.class(class, n)?;
        if n == 0 {
            // Nothing to pay, so nothing to insert: an entry is only ever born charged.
            return Ok(Grant {
                class,
                overflow: false,
                would_refuse: None,
                receipt: Receipt::nothing(stamp),
            });
        }
        let key = self.hasher.key_of(actor, index);
        self.charge_hashed(&key, class, cls, stamp, n, now_ns)
    }

    /// The charge proper, once the key is known and `n` validated (`1..=burst`) under the
    /// class word `stamp`, whose config it unpacks. Out of line, as it always was in effect
    /// (two callers), so that the entry's update inlines into it once.
    #[inline(never)]
    fn charge_hashed(
        &self,
        key: &Key,
        class: usize,
        cls: &Class,
        stamp: Stamp,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        self.horizon.admit(now_ns, &self.clock)?;
        let config = &cls.config.config_of_stamp(stamp);
        let now = self.now_tick(now_ns);
        // The entry and the overflow bucket decide through the same bucket-in-a-word API
        // (`gcra::take`, then `gcra::refused` for the answer, as `gcra::take_at` does for the
        // overflow bucket), so a refusal and its wait are derived in one place.
        let landing = match &self.epochs {
            None => self.land::<false>(key, cls, stamp, now, Absolute, |full_at| {
                gcra::take(config, full_at, now, n)
            }),
            Some(epochs) => self.land_micros(epochs, key, cls, (stamp, config), now, n),
        };
        let (overflow, decided) = match landing {
            Landing::Entry(decided) => (
                false,
                decided.map_err(|refusal| gcra::refused(config, refusal, n, now_ns)),
            ),
            Landing::Overflow => {
                let Some(taken) = cls
                    .config
                    .take_overflow(&cls.overflow, stamp, config, n, now_ns)
                else {
                    return self.charge_again(key, class, cls, n, now_ns);
                };
                // Relaxed: a statistic.
                cls.overflow_charges.fetch_add(1, Ordering::Relaxed);
                (true, taken)
            }
            // `Again` only comes out of `land` for the microsecond codec, and `land_micros`
            // enters again on it; were it to reach here, deciding again is as good.
            Landing::Moved | Landing::Again => {
                return self.charge_again(key, class, cls, n, now_ns);
            }
        };
        // Counted and traced inside the arms, so that the answer goes straight to the caller:
        // one branch when no metrics are attached (see `crate::metrics`, "What a decision
        // costs"), nothing on a grant for tracing.
        match decided {
            Ok(left) => {
                #[cfg(feature = "metrics")]
                if self.metrics.is_some() {
                    cls.outcomes.record(true, overflow);
                }
                Ok(Grant {
                    class,
                    overflow,
                    would_refuse: None,
                    receipt: Receipt { stamp, left, n },
                })
            }
            Err(BucketRefused::Empty(empty)) => {
                let limited = Limited {
                    class,
                    overflow,
                    empty,
                };
                let shadow = cls.shadow.admits_instead();
                self.observe_refusal(key, cls, &limited, shadow);
                if shadow {
                    return Ok(Grant {
                        class,
                        overflow,
                        would_refuse: Some(limited),
                        receipt: Receipt::nothing(stamp),
                    });
                }
                Err(LimiterRefused::Limited(limited))
            }
            // Unreachable: `class()` rejected n > burst, under this same config, before any
            // bucket was touched.
            Err(BucketRefused::ExceedsBurst { .. }) => Err(exceeds(class, n, config).into()),
        }
    }

    /// [`Limiter::charge_hashed`] again, after the class word moved under a decision: it
    /// starts over under the new config (see `era`), which may no longer take `n` at all. Or
    /// after the entry the hit path sent to [`Limiter::land_converting`] was removed before
    /// that could decide on it (a reclaim). Each start-over follows a change of the class or a
    /// removal by another thread, so a decision starts over at most as often as those
    /// overtake it.
    #[cold]
    #[inline(never)]
    fn charge_again(
        &self,
        key: &Key,
        class: usize,
        cls: &Class,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        let (stamp, config) = cls.config.load();
        if n > config.burst() {
            return Err(exceeds(class, n, &config).into());
        }
        self.charge_hashed(key, class, cls, stamp, n, now_ns)
    }

    /// Counts and traces a refusal, as attached and compiled.
    #[inline]
    // Each feature reads some of the arguments; with both off, none.
    #[cfg_attr(
        not(all(feature = "metrics", feature = "tracing")),
        allow(unused_variables)
    )]
    fn observe_refusal(&self, key: &Key, cls: &Class, limited: &Limited, shadow: bool) {
        #[cfg(feature = "metrics")]
        if self.metrics.is_some() {
            if shadow {
                cls.outcomes.record_would_refuse();
            } else {
                cls.outcomes.record(false, false);
            }
        }
        #[cfg(feature = "tracing")]
        crate::trace::limiter_refused(|| self.digest.of_key(key), limited, shadow);
    }

    /// Gives back `n` tokens that `grant` took for `identity`, at the clock's current reading:
    /// for work that was admitted but will not be done (a later check refused it). See
    /// [`Limiter::refund_at`].
    pub fn refund<K: Hash + ?Sized>(
        &self,
        identity: &K,
        grant: &Grant,
        n: u32,
    ) -> Result<(), InvalidCharge> {
        self.refund_at(identity, grant, n, self.clock.now_ns())
    }

    /// Gives back up to `n` of the tokens that `grant` took for `identity`, at reading
    /// `now_ns` (checked against the clock like any reading).
    ///
    /// The bucket the grant was paid from (the identity's entry, or the class's overflow
    /// bucket) is put back exactly as if the take had not happened, **if nothing has changed
    /// it since**: no other take, refund or change of the class landed on it in between. If
    /// something has, the refund is void: the token the grant took may already have come back
    /// into a full bucket and been taken again, and giving it back then would grant it twice
    /// (burst 1 per 10 ms: a take at 0, another at 10 ms, a refund of the first and a third
    /// take at 10 ms would be two grants at one reading). So a refund never gives back more
    /// than the take removed and has not since refilled, whatever races it. A grant is given
    /// back once (a second refund finds the bucket changed by the first), never more than it
    /// took, and a refund never creates an entry: if the entry was reclaimed meanwhile it was
    /// full again, with nothing to give back.
    ///
    /// ```
    /// use admit::{BucketConfig, Clock, Limiter};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_minute(1)?])?;
    /// let now = limiter.clock().now_ns();
    /// let grant = limiter.try_acquire_at("alice", 0, now)?;
    /// // A later check refused the request: alice keeps her token.
    /// limiter.refund_at("alice", &grant, 1, now)?;
    /// assert!(limiter.try_acquire_at("alice", 0, now).is_ok());
    /// assert!(limiter.try_acquire_at("alice", 0, now).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        grant: &Grant,
        n: u32,
        now_ns: u64,
    ) -> Result<(), InvalidCharge> {
        self.give_back(&Plain(identity), grant, n, now_ns)
    }

    /// [`Limiter::refund_at`] for an actor hashed once ([`HashedActor::new`]).
    pub fn refund_hashed_at(
        &self,
        actor: &HashedActor,
        grant: &Grant,
        n: u32,
        now_ns: u64,
    ) -> Result<(), InvalidCharge> {
        self.give_back(actor, grant, n, now_ns)
    }

    fn give_back<A: Actor>(
        &self,
        actor: &A,
        grant: &Grant,
        n: u32,
        now_ns: u64,
    ) -> Result<(), InvalidCharge> {
        let (index, cls, _, _) = self.class(grant.class, 0)?;
        self.horizon.admit(now_ns, &self.clock)?;
        let receipt = grant.receipt;
        let n = n.min(receipt.n);
        if n == 0 || grant.would_refuse.is_some() {
            // Nothing to give back: a shadow admission took nothing.
            return Ok(());
        }
        let config = cls.config.config_of_stamp(receipt.stamp);
        let credit = u64::from(n) * config.interval_ticks();
        if grant.overflow {
            cls.config
                .refund_overflow(&cls.overflow, receipt.stamp, receipt.left, credit);
            return Ok(());
        }
        let key = self.hasher.key_of(&actor.hashed(), index);
        let now = self.now_tick(now_ns);
        let undone = match &self.epochs {
            None => self.refund_entry(&key, cls, receipt, credit, Absolute),
            Some(epochs) => {
                let codec = epochs.within(self.enter_epoch(epochs, now));
                self.refund_entry(&key, cls, receipt, credit, codec)
            }
        };
        if let Some(Some(full_at)) = undone {
            // The entry is full earlier than when it was charged: a reclaim scan may now free
            // it sooner than the hint says (only a skipped scan otherwise, never a mint).
            self.hint.lower(full_at);
        }
        Ok(())
    }

    /// Undoes the take `receipt` describes on `key`'s entry, if the entry still holds exactly
    /// what that take left, in the era it was taken in: the instant it is full from then
    /// (`None` inside: void, or no such entry).
    fn refund_entry(
        &self,
        key: &Key,
        cls: &Class,
        receipt: Receipt,
        credit: u64,
        codec: impl Codec,
    ) -> Option<Option<u64>> {
        self.table.update_member(key, |value| {
            // A newborn, or a value from another era (a change landed since): void. A value of
            // this era is judged under the class word the take loaded, which must still be
            // the class's (`align` loads it after the value).
            if value & era::CODED == gcra::FRESH {
                return Verdict::Keep(None);
            }
            let aligned = cls.config.align(receipt.stamp, value, |v| codec.decode(v));
            match aligned {
                Some(aligned) if !aligned.converted && aligned.full_at == receipt.left => {
                    // Never `FRESH` (0, a newborn whose insert is in flight, which no sweep
                    // reclaims): tick 1 is full at every reading but the first tick's.
                    let next = receipt.left.saturating_sub(credit).max(1);
                    match codec.encode(next) {
                        Some(word) => Verdict::Commit(word | receipt.stamp.entry_era(), Some(next)),
                        // Below the entered epoch's base: a full entry there; void is as good.
                        None => Verdict::Keep(None),
                    }
                }
                _ => Verdict::Keep(None),
            }
        })
    }

    /// What a charge of `n` tokens would see now, consuming nothing. At the cap, a peek may
    /// reclaim full entries first, exactly as a charge would (which changes nothing a caller
    /// can observe).
    pub fn peek_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Peek, InvalidCharge> {
        let (index, cls, _, config) = self.class(class, n)?;
        self.horizon.admit(now_ns, &self.clock)?;
        let key = self.hasher.key(identity, index);
        let now = self.now_tick(now_ns);
        self.enter(now);
        let full_at = match self.table.get(&key) {
            Some(value) => Some(self.dated(self.judge(cls, value))),
            None if self.table.len() < self.table.cap() || self.reclaim_due(now) > 0 => {
                Some(self.dated(gcra::FRESH))
            }
            None => None,
        };
        let peek = match full_at {
            Some(full_at) => {
                let (available, wait) = gcra::peek_at(&config, full_at, n, now_ns);
                Peek {
                    available,
                    wait,
                    overflow: false,
                }
            }
            None => {
                let full_at = cls.config.overflow_full_at(&cls.overflow);
                let (available, wait) = gcra::peek_at(&config, full_at, n, now_ns);
                Peek {
                    available,
                    wait,
                    overflow: true,
                }
            }
        };
        Ok(peek)
    }

    /// Reclaims every entry holding its full burst at `now_ns` (an idle sweep); returns how
    /// many. Changes nothing a caller can observe: a full entry and an absent one behave
    /// alike, and a later charge with a reading older than `now_ns` finds the identity's fresh
    /// entry no fuller than the removed one was (see "Readings and reclamation"). A reading
    /// ahead of the limiter's clock is refused and reclaims nothing.
    ///
    /// ```
    /// use admit::{BucketConfig, Clock, Limiter, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::starting_at(10_000_000_000);
    /// let limiter = Limiter::builder().build_with_clock([BucketConfig::new(1, Duration::from_millis(10))?], clock.clone())?;
    /// let now = clock.now_ns();
    /// assert!(limiter.try_acquire_at("x", 0, now - 20_000_000).is_ok()); // full again by now
    /// assert!(limiter.try_acquire_at("y", 0, now).is_ok()); // drained: kept
    /// assert_eq!(limiter.reclaim_full_at(now)?, 1);
    /// assert!(limiter.reclaim_full_at(u64::MAX).is_err(), "a reading ahead of the clock");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reclaim_full_at(&self, now_ns: u64) -> Result<usize, ReadingAhead> {
        self.horizon.admit(now_ns, &self.clock)?;
        let now = self.now_tick(now_ns);
        self.enter(now);
        Ok(self.reclaim_due(now))
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
                .map_or(0, crate::metrics::LimiterMetrics::heap_bytes);
        bytes
    }

    /// Tokens in `identity`'s own entry of `class`, without any side effect (no insert, no
    /// reclaim); `None` if it has no entry. For the reference-model checks.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn entry_tokens_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        now_ns: u64,
    ) -> Option<u32> {
        let (index, cls, _, config) = self.class(class, 0).ok()?;
        let value = self.table.get(&self.hasher.key(identity, index))?;
        let full_at = self.dated(self.judge(cls, value));
        Some(gcra::available(&config, full_at, self.now_tick(now_ns)))
    }

    /// The in-word fingerprint and the tag of `(identity, class)`, so a loom model can pick
    /// two identities that only the tag tells apart. Not part of the supported API.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn model_fingerprint<K: Hash + ?Sized>(&self, identity: &K, class: usize) -> (u32, u32) {
        let key = self.hasher.key(identity, u16::try_from(class).unwrap_or(0));
        (key.fp, key.tag)
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

    /// Lands a charge: on the key's entry (inserting, or reclaiming then inserting, as the
    /// rules say), or on the overflow bucket. `take` sees the entry's dated `full_at`.
    ///
    /// The update the table runs on the hit path stays small enough to inline: an entry of
    /// the era before, a newborn (`FRESH`) or a class word that moved sends it to
    /// [`Limiter::land_converting`], at the slot where it found the entry.
    ///
    /// With `COLD_CAP`, the table is handed the update once (`Table::update`) and a miss at
    /// the cap reclaims on the cold path, which keeps the larger microsecond update inlined;
    /// without it, `Table::update_or_reclaim` retries after a reclaim itself, which measured
    /// fewer instructions for milliseconds (`git show c9901be:docs/benchmarks.md`).
    #[inline]
    fn land<const COLD_CAP: bool>(
        &self,
        key: &Key,
        cls: &Class,
        stamp: Stamp,
        now: u64,
        codec: impl Codec,
        take: impl Fn(u64) -> Result<u64, gcra::Refusal>,
    ) -> Landing {
        let era = stamp.entry_era();
        // A new entry is born in the decision's era.
        let fresh = gcra::FRESH | era;
        let update = |value| {
            let coded = value & era::CODED;
            // A newborn (`FRESH`) is decided on the cold path too, which meets the changes
            // first (see `era`, invariant 4).
            if coded == gcra::FRESH || !cls.config.current(stamp, value) {
                return Verdict::Keep(Err(Redo::Convert));
            }
            self.decide(false, codec.decode(coded), era, codec, &take)
        };
        let updated = if COLD_CAP {
            match self.table.update(key, fresh, update) {
                Update::AtCap => {
                    return self.land_converting(key, cls, stamp, now, codec, take, None);
                }
                updated => updated,
            }
        } else {
            self.table
                .update_or_reclaim(key, fresh, update, || self.reclaim_due(now) > 0)
        };
        match updated {
            Update::Landed {
                result: Err(Redo::Convert),
                slot,
                ..
            } => self.land_converting(key, cls, stamp, now, codec, take, Some(slot)),
            updated => self.landed(updated),
        }
    }

    /// [`Limiter::land`]'s cold path, for the entry `land` found at `slot`: a newborn (never
    /// charged), which meets the class's changes first (see [`era`], invariant 4); or an entry
    /// whose class changed since it was written, whose value is converted through the class's
    /// cut, decided on, and written in the class's era even if refused; or the class word
    /// moved, and the decision starts over. With no `slot`, a miss at the cap, which reclaims
    /// first and looks the key up again.
    #[cold]
    #[inline(never)]
    // The arguments are `land`'s, and where it found the entry.
    #[allow(clippy::too_many_arguments)]
    fn land_converting(
        &self,
        key: &Key,
        cls: &Class,
        stamp: Stamp,
        now: u64,
        codec: impl Codec,
        take: impl Fn(u64) -> Result<u64, gcra::Refusal>,
        slot: Option<usize>,
    ) -> Landing {
        if slot.is_none() && self.reclaim_due(now) == 0 {
            return Landing::Overflow;
        }
        let update = |value| {
            let fresh = value & era::CODED == gcra::FRESH;
            if fresh {
                // Before `align` loads the class word (see `era`, invariant 4).
                cls.config.meet();
            }
            let Some(aligned) = cls.config.align(stamp, value, |v| codec.decode(v)) else {
                return Verdict::Keep(Err(Redo::Class));
            };
            let decided = self.decide(fresh, aligned.full_at, stamp.entry_era(), codec, &take);
            if !aligned.converted {
                return decided;
            }
            // A refusal still writes the conversion, so no reader relies on a conversion
            // that is not in the table (see `era`, invariant 3).
            match (decided, codec.encode(aligned.full_at)) {
                (Verdict::Keep(Ok((born, Err(refusal)))), Some(coded)) => {
                    Verdict::Commit(coded | stamp.entry_era(), Ok((born, Err(refusal))))
                }
                (Verdict::Keep(Ok(_)), None) => Verdict::Keep(Err(Redo::Epoch)),
                (decided, _) => decided,
            }
        };
        let Some(slot) = slot else {
            let fresh = gcra::FRESH | stamp.entry_era();
            let updated = self
                .table
                .update_or_reclaim(key, fresh, update, || self.reclaim_due(now) > 0);
            return self.landed(updated);
        };
        match self.table.update_slot(slot, key, update) {
            // `inserted` is not known here (the hit path may have inserted the newborn), and
            // `landed` does not read it: a newborn is known by the decision's `born`.
            Some(result) => self.landed(Update::Landed {
                slot,
                result,
                inserted: false,
            }),
            // No longer the key's member (removed, or a reclaim took it): start over.
            None => Landing::Moved,
        }
    }

    /// The decision on an entry holding `full_at` in the era whose bit is `era` (`fresh`:
    /// never charged): what to commit, with the era bit, and what was decided.
    #[inline(always)]
    fn decide(
        &self,
        fresh: bool,
        full_at: u64,
        era: u64,
        codec: impl Codec,
        take: &impl Fn(u64) -> Result<u64, gcra::Refusal>,
    ) -> Verdict<Result<LandedCharge, Redo>> {
        let dated = self.dated(full_at);
        let (commit, outcome) = match take(dated) {
            Ok(next) => (next, Ok(next)),
            // A newborn refused because a sweep dated it (a reading older than the floor):
            // store its date, so it is an ordinary entry that the next sweep may reclaim,
            // not a FRESH one that none ever would.
            Err(refusal) if fresh && dated != gcra::FRESH => (dated, Err(refusal)),
            Err(refusal) => return Verdict::Keep(Ok((None, Err(refusal)))),
        };
        match codec.encode(commit) {
            // `born`: the first value of a new entry, which the last scan never saw.
            Some(word) => {
                let born = fresh.then_some(commit);
                Verdict::Commit(word | era, Ok((born, outcome)))
            }
            // The value came from a later epoch than the one entered.
            None => Verdict::Keep(Err(Redo::Epoch)),
        }
    }

    /// Where an update of the table left a charge.
    #[inline]
    fn landed(&self, update: Update<Result<LandedCharge, Redo>>) -> Landing {
        match update {
            Update::Landed {
                result: Err(Redo::Epoch),
                ..
            } => Landing::Again,
            Update::Landed {
                result: Err(Redo::Class | Redo::Convert),
                ..
            } => Landing::Moved,
            Update::Landed {
                result: Ok((born, outcome)),
                ..
            } => {
                if let Some(full_at) = born {
                    // A newborn entry: the last scan never saw its full_at. And the table has
                    // one more entry (known here, off the hit path, rather than from
                    // `inserted`, which every hit would test).
                    self.hint.lower(full_at);
                    self.entries_changed();
                }
                Landing::Entry(outcome)
            }
            Update::AtCap | Update::WindowFull => Landing::Overflow,
        }
    }

    /// [`Limiter::land`] in microseconds: in the epoch entered, again if the entry's value
    /// came from a later one. Out of line, so that the millisecond path inlines as before.
    #[inline(never)]
    fn land_micros(
        &self,
        epochs: &Epochs,
        key: &Key,
        cls: &Class,
        (stamp, config): (Stamp, &BucketConfig),
        now: u64,
        n: u32,
    ) -> Landing {
        loop {
            let codec = epochs.within(self.enter_epoch(epochs, now));
            match self.land::<true>(key, cls, stamp, now, codec, |full_at| {
                gcra::take(config, full_at, now, n)
            }) {
                Landing::Again => {}
                landing => return landing,
            }
        }
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

    /// A reading as the limiter counts it: in its unit, and, in milliseconds, no later than
    /// [`MAX_MILLIS_NOW_TICK`] (so `full_at` fits below an entry's era bit).
    #[inline]
    fn now_tick(&self, now_ns: u64) -> u64 {
        match self.tick {
            Tick::Millis => self.tick.of(now_ns).min(MAX_MILLIS_NOW_TICK),
            Tick::Micros => self.tick.of(now_ns),
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

    /// Reclaims every full entry if the hint says one may be full; returns how many.
    #[cold]
    fn reclaim_due(&self, now: u64) -> usize {
        let Some(seen) = self.hint.due(now) else {
            return 0;
        };
        // A FRESH member is an insert whose first charge is in flight: keep it. Every entry
        // is judged by what it holds now in its class's era (see `era`).
        let full_at = |value, tag| self.judge_tagged(value, tag).0;
        let (freed, smallest_kept) = self.table.reclaim_ranked(
            |value, tag| {
                let removable =
                    value & era::CODED != gcra::FRESH && gcra::is_full(full_at(value, tag), now);
                if removable {
                    // Relaxed: sequenced before the Release CAS that removes the entry, so any
                    // thread that sees the slot freed (Acquire) also sees the floor; the floor
                    // publishes nothing else.
                    self.floor.fetch_max(now, Ordering::Relaxed);
                }
                removable
            },
            full_at,
        );
        self.hint.settle(seen, smallest_kept);
        if freed > 0 {
            self.entries_changed();
        }
        freed
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

/// The latest tick a millisecond limiter counts: readings past it (about 34.8 years of
/// uptime) are clamped, so that `full_at ≤ now + span < 2^41` fits below an entry's era bit.
pub(crate) const MAX_MILLIS_NOW_TICK: u64 = era::CODED - crate::clock::tick::MAX_SPAN_TICKS;

/// The refusal of a charge of `n` tokens above `class`'s burst under `config`.
fn exceeds(class: usize, n: u32, config: &BucketConfig) -> InvalidCharge {
    InvalidCharge::ExceedsBurst {
        class,
        requested: n,
        burst: config.burst(),
    }
}
