//! The charge path: the `try_acquire*` entry points, and the answer on the bucket landed on.

use super::epoch::Absolute;
use super::era::Stamp;
use super::land::Landing;
use super::outcome::Receipt;
use super::{exceeds, Class, Grant, Limited, Limiter, LimiterRefused};
use crate::actor::HashedActor;
use crate::bucket::{gcra, BucketRefused};
use crate::clock::Clock;
use crate::sync::atomic::Ordering;
use crate::table::Key;
use std::hash::Hash;

impl<C: Clock> Limiter<C> {
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
    /// reading. `n` above the class's burst can never pass and is refused at once
    /// ([`InvalidCharge::ExceedsBurst`](crate::limiter::InvalidCharge::ExceedsBurst)); `n = 0`
    /// is no free pass: refused exactly when one token would be, and takes nothing.
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::new(5, Duration::from_secs(1))?])?;
    /// assert!(limiter.try_acquire_n(&42u64, 0, 4).is_ok());
    /// assert!(limiter.try_acquire_n(&42u64, 0, 2).is_err(), "one token left, two asked");
    /// assert!(limiter.try_acquire_n(&42u64, 0, 1).is_ok(), "a refusal takes nothing");
    /// assert!(limiter.try_acquire_n(&42u64, 0, 0).is_err(), "empty: even 0 is refused");
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
        self.try_acquire_hashed_at(&HashedActor::new(identity), class, n, now_ns)
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
    #[inline(always)]
    pub fn try_acquire_hashed_at(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        self.try_acquire_landing::<true>(actor, class, n, now_ns)
    }

    /// [`Limiter::try_acquire_hashed_at`] for a caller that makes several charges in one
    /// function (the gate): the same decision, with the entry's landing out of line, which
    /// measured fewer instructions there than inlining the whole decision into each charge
    /// (the caller's own state then spills around it), where a lone charge measured fewer
    /// with everything inline.
    #[inline(always)]
    pub(crate) fn try_acquire_hashed_at_compact(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        self.try_acquire_landing::<false>(actor, class, n, now_ns)
    }

    /// A charge, its entry's landing inline (`INLINE_LANDING`) or out of line.
    #[inline(always)]
    fn try_acquire_landing<const INLINE_LANDING: bool>(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        let (index, cls, stamp, config) = self.class(class, n)?;
        let key = self.hasher.key_of(actor, index);
        if n == 0 {
            return self.charge_nothing(&key, class, cls, stamp, &config, now_ns);
        }
        self.charge_hashed::<INLINE_LANDING>(&key, class, cls, stamp, n, now_ns)
    }

    /// A charge of 0 tokens: refused exactly when a charge of one would be (no free pass past
    /// an empty bucket), and takes nothing, so its grant gives nothing back.
    #[inline(never)]
    fn charge_nothing(
        &self,
        key: &Key,
        class: usize,
        cls: &Class,
        stamp: Stamp,
        config: &crate::bucket::BucketConfig,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        let (would_refuse, full_at) = self.check_key(key, class, cls, config, 1, now_ns)?;
        Ok(Grant::of_a_check(
            class,
            stamp,
            self.id,
            would_refuse,
            full_at,
        ))
    }

    /// The charge proper, once the key is known and `n` validated (`1..=burst`) under the
    /// class word `stamp`, whose config it unpacks. Out of line, as it always was in effect
    /// (two callers), so that the entry's update inlines into it once.
    #[inline(always)]
    fn charge_hashed<const INLINE_LANDING: bool>(
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
            None if INLINE_LANDING => {
                self.land::<false, true>(key, cls, stamp, now, Absolute, |full_at| {
                    gcra::take(config, full_at, now, n)
                })
            }
            None => self.land_outlined(key, cls, stamp, now, |full_at| {
                gcra::take(config, full_at, now, n)
            }),
            Some(epochs) => self.land_micros(epochs, key, cls, stamp, now, |full_at| {
                gcra::take(config, full_at, now, n)
            }),
        };
        let (overflow, decided) = match landing {
            Landing::Entry(decided) => (
                false,
                decided
                    .result()
                    .map_err(|refusal| gcra::refused(config, refusal, n, self.reading(now_ns))),
            ),
            Landing::Overflow => {
                let Some(taken) =
                    cls.config
                        .take_overflow(&cls.overflow, stamp, config, n, self.reading(now_ns))
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
                    limiter: self.id,
                    key: key.hash,
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
                        limiter: self.id,
                        key: key.hash,
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
        self.charge_hashed_again(key, class, cls, stamp, n, now_ns)
    }

    /// [`Limiter::charge_hashed`] out of line, for [`Limiter::charge_again`].
    #[inline(never)]
    fn charge_hashed_again(
        &self,
        key: &Key,
        class: usize,
        cls: &Class,
        stamp: Stamp,
        n: u32,
        now_ns: u64,
    ) -> Result<Grant, LimiterRefused> {
        self.charge_hashed::<false>(key, class, cls, stamp, n, now_ns)
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
}
