//! Charging by outcome: a check before the work that takes nothing, and a debit after it that
//! takes what the outcome costs, whatever the bucket holds.
//!
//! A login route that counts only failures cannot take a token first and refund it on
//! success: a refund is void whenever another request of the same key landed in between (see
//! "Refunds" in the [bucket docs](crate::bucket#refunds)), so under concurrency successes
//! would be charged after all. Instead:
//!
//! 1. [`Limiter::check_at`] before the handler: refused exactly when a charge of `n` would be,
//!    and takes nothing.
//! 2. [`Limiter::debit_at`] after the response, only for the outcomes that count: it takes `n`
//!    tokens whatever the bucket holds (down to empty, never refused), and the next checks are
//!    refused until tokens are back at the class's rate.
//!
//! # The no-mint rule of a debit
//!
//! A debit never grants anything and never gives a token back: it only moves the bucket's
//! `full_at` later, by exactly `n` intervals from `max(full_at, now)`, and a change of limits
//! carries the debt over like any debt. It leaves the bucket owing at most its burst (empty,
//! as a take can leave it: every debt stays within what the configs allow, which is what keeps
//! every accepted change of limits from cutting one, see "Limits changed at runtime" in the
//! [bucket docs](crate::bucket)); the part of a debit past empty is forgiven and says so
//! ([`Debit::cut`]). A success is never charged, because nothing but the debit charges. So
//! among requests whose check passed in any span of `L`, at most `burst + L / interval + c`
//! are admitted, where `c` is the most requests between their check and their debit at once
//! (a check sees every debit landed before it and none still in flight), and every failure
//! is charged up to an empty bucket: only failures that raced past their check while the
//! bucket emptied can be forgiven, at most `c`.
//!
//! Checked by `limiter::debit_tests` against the token-bucket rules, and by the loom model
//! `checks_and_debits_racing_a_take_lose_no_debit` (`loom-tests/tests/limiter.rs`).

use super::epoch::Absolute;
use super::era::Stamp;
use super::land::Landing;
use super::{Class, Grant, InvalidCharge, Limited, Limiter, LimiterRefused};
use crate::actor::HashedActor;
use crate::bucket::{gcra, Empty};
use crate::clock::Clock;
use crate::table::Key;
use std::cell::Cell;
use std::hash::Hash;
use std::time::Duration;

/// What a debit did: see [`Limiter::debit_at`].
///
/// ```
/// use admit::{BucketConfig, Limiter, ManualClock};
/// use std::time::Duration;
///
/// let limiter = Limiter::builder()
///     .build_with_clock([BucketConfig::new(3, Duration::from_secs(10))?], ManualClock::new())?;
/// let debit = limiter.debit_at("mallory", 0, 3, 0)?; // three failed logins, a whole burst
/// assert_eq!(debit.wait(), Duration::from_secs(10), "refused until one token is back");
/// assert!(!debit.via_overflow() && !debit.cut());
/// // A fourth failure that raced past its check: the bucket is already empty.
/// assert!(limiter.debit_at("mallory", 0, 1, 0)?.cut());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Debit {
    wait: Duration,
    overflow: bool,
    cut: bool,
}

impl Debit {
    /// How long from the debit's reading until a charge (or a check) of one token is
    /// admitted again: zero if the bucket still holds one.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Whether the class's shared overflow bucket was debited (the table was saturated and the
    /// key had no entry), rather than the key's own entry.
    pub fn via_overflow(&self) -> bool {
        self.overflow
    }

    /// Whether the debit would have left the bucket owing more than its burst and was cut to
    /// an empty bucket: the rest of this debit was forgiven.
    pub fn cut(&self) -> bool {
        self.cut
    }
}

impl<C: Clock> Limiter<C> {
    /// [`Limiter::check_at`] at the clock's current reading.
    pub fn check<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
    ) -> Result<(), LimiterRefused> {
        self.check_at(identity, class, n, self.clock.now_ns())
    }

    /// Whether a charge of `n` tokens (at least 1) of `class` to `identity` would be granted
    /// at reading `now_ns`, taking nothing: refused exactly when the charge would be, with the
    /// same wait. The check before work charged by its outcome ([`Limiter::debit_at`]). A
    /// class in [shadow mode](crate::shadow) admits instead of refusing, and counts it.
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter, ManualClock};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::builder()
    ///     .build_with_clock([BucketConfig::new(2, Duration::from_secs(60))?], ManualClock::new())?;
    /// // Two failed logins are allowed a minute: check, run the handler, debit the failures.
    /// for attempt in 0..3 {
    ///     limiter.check_at("alice", 0, 1, 0)?; // takes nothing
    ///     let failed = attempt > 0;
    ///     if failed {
    ///         limiter.debit_at("alice", 0, 1, 0)?;
    ///     }
    /// }
    /// // One success and two failures: the third failure is refused before the handler runs.
    /// assert!(limiter.check_at("alice", 0, 1, 0).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<(), LimiterRefused> {
        self.check_hashed_at(&HashedActor::new(identity), class, n, now_ns)
    }

    /// [`Limiter::check_at`] for an actor hashed once ([`HashedActor::new`]).
    pub fn check_hashed_at(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<(), LimiterRefused> {
        let n = n.max(1);
        let (index, cls, _, config) = self.class(class, n)?;
        let key = self.hasher.key_of(actor, index);
        self.check_key(&key, class, cls, &config, n, now_ns)
            .map(|_| ())
    }

    /// A check of `n` (at least 1) answered as a grant that took nothing, so that its refund
    /// gives nothing: the gate's limits charged by outcome, decided in the path that takes
    /// the others'.
    pub(crate) fn check_for_grant_at(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        let n = n.max(1);
        let (index, cls, stamp, config) = self.class(class, n)?;
        let key = self.hasher.key_of(actor, index);
        let (would_refuse, full_at) = self.check_key(&key, class, cls, &config, n, now_ns)?;
        Ok(Grant::of_a_check(
            class,
            stamp,
            self.id,
            would_refuse,
            full_at,
        ))
    }

    /// Whether a charge of `n` (at least 1) of class `class` to `key` would be granted at
    /// `now_ns`, taking nothing: `Ok(None)` if so, `Ok(Some(refusal))` if the class is in
    /// shadow mode and admits what enforcement would refuse (counted), `Err` otherwise; with
    /// the `full_at` the check read (what a grant of it reports, see [`Limiter::left_of`]).
    pub(super) fn check_key(
        &self,
        key: &Key,
        class: usize,
        cls: &Class,
        config: &crate::bucket::BucketConfig,
        n: u32,
        now_ns: u64,
    ) -> Result<(Option<Limited>, u64), LimiterRefused> {
        self.horizon.admit(now_ns, &self.clock)?;
        let (peek, full_at) = self.peek_key(key, cls, config, n, now_ns);
        if peek.wait.is_zero() {
            return Ok((None, full_at));
        }
        let refused = Limited {
            class,
            overflow: peek.overflow,
            empty: Empty::new(peek.wait),
        };
        if cls.shadow.admits_instead() {
            return Ok((Some(refused), full_at));
        }
        Err(LimiterRefused::Limited(refused))
    }

    /// [`Limiter::debit_at`] at the clock's current reading.
    pub fn debit<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
    ) -> Result<Debit, InvalidCharge> {
        self.debit_at(identity, class, n, self.clock.now_ns())
    }

    /// Takes `n` tokens of `class` from `identity` at reading `now_ns`, whatever its bucket
    /// holds: for work already done, charged by its outcome (a failed login), after a
    /// [`Limiter::check_at`] that took nothing. It may empty the bucket, and every charge and
    /// check of it is refused until tokens are back; a debit is never refused, never grants
    /// anything, and is forgiven only past an empty bucket ([`Debit::cut`]). `n` may exceed
    /// the burst; 0 takes nothing. Only a reading ahead of the clock and an unknown class are
    /// errors, and then nothing is taken; a reading refused only while a change lands
    /// ([`ReadingAhead::while_a_change_lands`](crate::clock::ReadingAhead::while_a_change_lands))
    /// takes nothing either: debit again, or the outcome goes uncharged.
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter, ManualClock};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::builder()
    ///     .build_with_clock([BucketConfig::new(3, Duration::from_secs(1))?], ManualClock::new())?;
    /// // Three requests passed their check at once; all three failed.
    /// for _ in 0..3 {
    ///     limiter.check_at("bob", 0, 1, 0)?;
    /// }
    /// for _ in 0..3 {
    ///     limiter.debit_at("bob", 0, 1, 0)?;
    /// }
    /// let refused = limiter.check_at("bob", 0, 1, 0).unwrap_err();
    /// assert_eq!(refused.limited().unwrap().wait(), Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn debit_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Debit, InvalidCharge> {
        self.debit_hashed_at(&HashedActor::new(identity), class, n, now_ns)
    }

    /// [`Limiter::debit_at`] for an actor hashed once ([`HashedActor::new`]).
    pub fn debit_hashed_at(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Debit, InvalidCharge> {
        let (index, cls, _, _) = self.class(class, 0)?;
        self.horizon.admit(now_ns, &self.clock)?;
        let key = self.hasher.key_of(actor, index);
        if n == 0 {
            let (peek, _) = self.peek_key(&key, cls, &cls.config.config(), 1, now_ns);
            return Ok(Debit {
                wait: peek.wait,
                overflow: peek.overflow,
                cut: false,
            });
        }
        loop {
            // Under one load of the class word; again if it moved under the debit.
            let (stamp, _) = cls.config.load();
            if let Some(debit) = self.debit_key(&key, cls, stamp, n, now_ns) {
                return Ok(debit);
            }
        }
    }

    /// The debit on `key`'s entry (inserting it, or reclaiming first, as a charge would) or on
    /// the overflow bucket, under class word `stamp`: `None` if the class word moved.
    fn debit_key(
        &self,
        key: &Key,
        cls: &Class,
        stamp: Stamp,
        n: u32,
        now_ns: u64,
    ) -> Option<Debit> {
        let config = cls.config.config_of_stamp(stamp);
        let now = self.now_tick(now_ns);
        // At most one burst owed, as a take can leave: `bucket::debt` bounds every debt a
        // change carries by what the configs allow, and a debit stays inside that bound.
        let longest = config.span_ticks();
        let cut = Cell::new(false);
        let owe = |full_at| {
            let (owed, was_cut) = gcra::owe(&config, full_at, now, n, longest);
            cut.set(was_cut);
            Ok::<u64, gcra::Refusal>(owed)
        };
        let landing = match &self.epochs {
            None => self.land::<false, false>(key, cls, stamp, now, Absolute, owe),
            Some(epochs) => self.land_micros(epochs, key, cls, stamp, now, owe),
        };
        let (full_at, overflow) = match landing {
            Landing::Entry(decided) => (decided.result().ok()?, false),
            Landing::Overflow => {
                let (full_at, was_cut) =
                    cls.config
                        .debit_overflow(&cls.overflow, stamp, &config, (n, now, longest))?;
                cut.set(was_cut);
                (full_at, true)
            }
            Landing::Moved | Landing::Again => return None,
        };
        Some(Debit {
            wait: gcra::peek_at(&config, full_at, 1, self.reading(now_ns)).1,
            overflow,
            cut: cut.get(),
        })
    }
}
