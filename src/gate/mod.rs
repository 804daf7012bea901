//! One admission across the three defences: an in-flight place, a rate token and a volume
//! charge for one request, taken in a fixed order and given back if a later defence refuses.
//!
//! A request that passes the in-flight quota and the rate limiter but is refused by the volume
//! quota must not cost its actor a place or a token: otherwise a refused request spends the
//! actor's budget elsewhere, and an actor near one limit is pushed over the others by its own
//! refusals. [`Gate::try_acquire`] takes the three in this order:
//!
//! 1. **the in-flight place** ([`fairness::Quotas`]): given back by dropping its permit;
//! 2. **the rate token** ([`limiter::Limiter`], one class): given back by
//!    [`Limiter::refund_at`](crate::limiter::Limiter::refund_at) at the same reading;
//! 3. **the volume charge** ([`quota::RateLimit`]): last, because a count-min charge cannot
//!    be taken back (undoing a raise could lower a counter another actor's charge relies on),
//!    so it is made only once the other two are held, and nothing follows it that could refuse.
//!
//! Any defence may be left out. The cheapest refusal comes first: an actor over its in-flight
//! quota is refused before any token or volume is counted.
//!
//! # Invariant
//!
//! **A refused admission leaves the actor holding exactly what it held before**: the same
//! places in flight, the same tokens (as of the reading the admission used), the same volume
//! counted. An admitted one holds one more place (until its [`Pass`] is dropped), one token
//! fewer, and its bytes counted. Checked by a proptest that compares each actor's holdings
//! before and after every refused admission (`gate::tests`), and by the loom model
//! `two_admissions_racing_with_one_refused` (`loom-tests/tests/gate.rs`).
//!
//! # Rollback
//!
//! The token goes back by a refund, which is exact or void (see "Refunds" in the
//! [bucket docs](crate::bucket#refunds)): **a refused admission costs its actor never more
//! than before, and less only by its own take, when another decision landed on the same key
//! between the take and its refund** (the refund is then void, since that token may already
//! have refilled and been taken again). An actor deciding alone is rolled back exactly; an
//! actor many requests share at once (a source behind a NAT) may keep a token per refused
//! request that raced another (measured in the [design notes](crate::implementation), "What
//! a rollback promises"). A [`Pass`] keeps what the grant said, not the grant: no caller can
//! refund an admitted request's token, let alone twice.
//!
//! [`fairness::Quotas`]: crate::fairness::Quotas
//! [`limiter::Limiter`]: crate::limiter::Limiter
//! [`quota::RateLimit`]: crate::quota::RateLimit

mod error;
#[cfg(test)]
mod tests;

pub use error::GateRefused;

use crate::actor::HashedActor;
use crate::clock::{Clock, ReadingAhead, RecentClock};
use crate::fairness::{OwnedPermit, Quotas};
use crate::limiter::{Limited, Limiter};
use crate::quota::RateLimit;
use std::hash::Hash;

/// The three defences in front of one writer, admitted together. See the [module
/// documentation](self).
///
/// The limiter and the volume quota must read one time: the default [`RecentClock`]s all do
/// (one process-wide time), as do clones of one [`ManualClock`]; two
/// [`MonotonicClock`](crate::MonotonicClock)s are two clocks with two origins.
/// [`Gate::try_acquire`] reads the limiter's clock once and hands that reading to both.
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::gate::{Gate, GateRefused};
/// use admit::quota::{Quota, RateLimit};
/// use admit::{BucketConfig, Limiter, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let rate = BucketConfig::per_second(1)?.with_burst(2)?; // two tokens, one back a second
/// let gate = Gate::new()
///     .in_flight(Quotas::builder().quota(4).build()?)
///     .rate(Limiter::builder().build_with_clock([rate], clock.clone())?, 0)
///     .volume(RateLimit::with_clock(Quota::new(100, 1_000, Duration::from_secs(60))?, clock));
///
/// let pass = gate.try_acquire("alice", 600)?; // a place, a token and 600 bytes
/// // 600 more bytes would pass the 1,000-byte window: refused, and alice keeps her token
/// // and her place.
/// assert!(matches!(gate.try_acquire("alice", 600), Err(GateRefused::Volume(_))));
/// // The second token was given back: without the refund this would be refused for rate.
/// assert!(gate.try_acquire("alice", 100).is_ok(), "the token was given back");
/// drop(pass); // the writer decided it: the place is free
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// [`ManualClock`]: crate::clock::ManualClock
#[derive(Debug)]
pub struct Gate<C: Clock = RecentClock> {
    in_flight: Option<Quotas>,
    rate: Option<(Limiter<C>, usize)>,
    volume: Option<RateLimit<C>>,
}

/// What an admitted request holds: its in-flight place, freed when the pass is dropped (hand
/// it to the writer with the request), and what it was charged.
#[derive(Debug)]
#[must_use = "dropping the pass frees the in-flight place at once"]
pub struct Pass {
    permit: Option<OwnedPermit>,
    /// What the rate limiter's grant said, without the grant itself: the admission stands,
    /// so nothing a caller holds can refund its token.
    rate: Option<RateGranted>,
}

/// What a pass keeps of the rate limiter's grant.
#[derive(Debug)]
struct RateGranted {
    overflow: bool,
    would_refuse: Option<Limited>,
}

impl Pass {
    /// The refusal the rate limiter would have answered, if its class is in
    /// [shadow mode](crate::shadow) and admitted this request instead (see
    /// [`Grant::would_have_refused`](crate::limiter::Grant::would_have_refused)). The pass
    /// keeps no grant: the admission stands, and
    /// nothing it lends can give its token back.
    pub fn rate_would_have_refused(&self) -> Option<&Limited> {
        self.rate
            .as_ref()
            .and_then(|rate| rate.would_refuse.as_ref())
    }

    /// Whether the in-flight place or the rate token was paid by a shared overflow budget.
    pub fn via_overflow(&self) -> bool {
        self.permit.as_ref().is_some_and(OwnedPermit::via_overflow)
            || self.rate.as_ref().is_some_and(|rate| rate.overflow)
    }

    /// Whether the in-flight quotas or the rate limiter would have refused this admission and
    /// [shadow mode](crate::shadow) admitted it instead (what each would have said is on
    /// [`OwnedPermit::would_have_refused`] and [`Pass::rate_would_have_refused`]). The volume
    /// quota's shadow admissions carry nothing; it counts them.
    pub fn would_have_refused(&self) -> bool {
        self.permit
            .as_ref()
            .is_some_and(|permit| permit.would_have_refused().is_some())
            || self.rate_would_have_refused().is_some()
    }
}

impl<C: Clock> Default for Gate<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clock> Gate<C> {
    /// A gate with no defence: it admits everything until defences are added. The clock type
    /// is the one the rate limiter and the volume quota read (inferred from them; a gate of
    /// in-flight quotas alone can be typed `Gate`).
    pub fn new() -> Self {
        Self {
            in_flight: None,
            rate: None,
            volume: None,
        }
    }

    /// Adds the in-flight quotas.
    pub fn in_flight(mut self, quotas: Quotas) -> Self {
        self.in_flight = Some(quotas);
        self
    }

    /// Adds the keyed rate limiter, charging `class`.
    pub fn rate(mut self, limiter: Limiter<C>, class: usize) -> Self {
        self.rate = Some((limiter, class));
        self
    }

    /// Adds the volume quota.
    pub fn volume(mut self, volume: RateLimit<C>) -> Self {
        self.volume = Some(volume);
        self
    }

    /// Admits one request of `actor` carrying `bytes`, at the clock's current reading (the
    /// rate limiter's clock, else the volume quota's): all three defences or none.
    pub fn try_acquire<K: Hash + ?Sized>(
        &self,
        actor: &K,
        bytes: u64,
    ) -> Result<Pass, GateRefused> {
        self.try_acquire_at(actor, bytes, self.now_ns())
    }

    /// A reading of the gate's clock (its limiter's, else its volume quota's; 0 without
    /// either, when no defence reads time).
    pub fn now_ns(&self) -> u64 {
        match (&self.rate, &self.volume) {
            (Some((limiter, _)), _) => limiter.clock().now_ns(),
            (None, Some(volume)) => volume.clock().now_ns(),
            (None, None) => 0,
        }
    }

    /// Admits one request of `actor` carrying `bytes` at reading `now_ns` of the gate's clock:
    /// all three defences or none (see the [module documentation](self) for the order and the
    /// rollback).
    pub fn try_acquire_at<K: Hash + ?Sized>(
        &self,
        actor: &K,
        bytes: u64,
        now_ns: u64,
    ) -> Result<Pass, GateRefused> {
        self.try_acquire_hashed_at(&HashedActor::new(actor), bytes, now_ns)
    }

    /// [`Gate::try_acquire_at`] for an actor hashed once ([`HashedActor::new`]): one hash for
    /// the request, whatever defences the gate has.
    pub fn try_acquire_hashed_at(
        &self,
        actor: &HashedActor,
        bytes: u64,
        now_ns: u64,
    ) -> Result<Pass, GateRefused> {
        // 1. The place: given back by dropping `permit` on any refusal below.
        let permit = match &self.in_flight {
            Some(quotas) => Some(quotas.try_acquire_owned_hashed(actor)?),
            None => None,
        };
        // 2. The token: given back by a refund at the same reading if the volume refuses.
        let grant = match &self.rate {
            Some((limiter, class)) => {
                Some(limiter.try_acquire_hashed_at(actor, *class, 1, now_ns)?)
            }
            None => None,
        };
        // 3. The volume, last: it cannot be taken back, and nothing after it can refuse.
        if let Some(volume) = &self.volume {
            if let Err(refused) = volume.try_acquire_hashed_at(actor, bytes, now_ns) {
                if let (Some((limiter, _)), Some(grant)) = (&self.rate, grant) {
                    // The reading was accepted by the take, so the refund accepts it too. Exact,
                    // or void if another take landed on the key since (see "Rollback").
                    let _ = limiter.refund_at(grant, 1, now_ns);
                }
                return Err(refused.into());
            }
        }
        let rate = grant.map(|grant| RateGranted {
            overflow: grant.via_overflow(),
            would_refuse: grant.would_have_refused().copied(),
        });
        Ok(Pass { permit, rate })
    }

    /// The in-flight quotas, if the gate has them.
    pub fn quotas(&self) -> Option<&Quotas> {
        self.in_flight.as_ref()
    }

    /// The rate limiter and the class it charges, if the gate has one.
    pub fn limiter(&self) -> Option<(&Limiter<C>, usize)> {
        self.rate.as_ref().map(|(limiter, class)| (limiter, *class))
    }

    /// The volume quota, if the gate has one.
    pub fn volume_quota(&self) -> Option<&RateLimit<C>> {
        self.volume.as_ref()
    }

    /// Whether the gate has any defence: a gate without one admits everything.
    ///
    /// ```
    /// use admit::fairness::Quotas;
    /// use admit::gate::Gate;
    ///
    /// let open: Gate = Gate::new();
    /// assert!(!open.has_defence());
    /// assert!(open.in_flight(Quotas::new()).has_defence());
    /// ```
    pub fn has_defence(&self) -> bool {
        self.in_flight.is_some() || self.rate.is_some() || self.volume.is_some()
    }

    /// Checks that the volume quota accepts the readings [`Gate::try_acquire`] hands it, which
    /// are the rate limiter's: `Err` if the limiter's clock is more than
    /// [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) ahead of the volume
    /// quota's, when every admission reaching the volume quota would be refused with
    /// [`RateLimitRefused::ReadingAhead`](crate::quota::RateLimitRefused::ReadingAhead). `Ok`
    /// for a gate without both, and for two clones of one clock.
    ///
    /// Two [`MonotonicClock`](crate::MonotonicClock)s are two origins, apart by a fixed
    /// offset: a limiter built more than a millisecond before its volume quota, each with a
    /// clock of its own, fails this check now and at every later moment. The default
    /// [`RecentClock`]s share one origin. Otherwise give both one clock (a `MonotonicClock` is
    /// `Copy`: hand the same one to
    /// [`LimiterBuilder::build_with_clock`](crate::limiter::LimiterBuilder::build_with_clock)
    /// and [`RateLimit::with_clock`]). Nothing is charged: it reads the volume counted for no
    /// actor in particular.
    ///
    /// ```
    /// use admit::gate::Gate;
    /// use admit::quota::{Quota, RateLimit};
    /// use admit::{BucketConfig, Limiter, ManualClock, MonotonicClock};
    ///
    /// let clock = MonotonicClock::new();
    /// let one_clock = Gate::new()
    ///     .rate(Limiter::builder().build_with_clock([BucketConfig::per_second(1)?], clock)?, 0)
    ///     .volume(RateLimit::with_clock(Quota::default(), clock));
    /// assert!(one_clock.check_clocks().is_ok());
    ///
    /// // The limiter's clock started 5 s before the volume quota's.
    /// let ahead = ManualClock::starting_at(5_000_000_000);
    /// let two_clocks = Gate::new()
    ///     .rate(Limiter::builder().build_with_clock([BucketConfig::per_second(1)?], ahead)?, 0)
    ///     .volume(RateLimit::with_clock(Quota::default(), ManualClock::new()));
    /// let refused = two_clocks.check_clocks().unwrap_err();
    /// assert_eq!(refused.reading_ns(), 5_000_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_clocks(&self) -> Result<(), ReadingAhead> {
        match (&self.rate, &self.volume) {
            (Some((limiter, _)), Some(volume)) => {
                volume.usage_at(&(), limiter.clock().now_ns()).map(|_| ())
            }
            _ => Ok(()),
        }
    }
}
