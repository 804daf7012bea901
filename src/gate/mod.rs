//! One admission across the three defences: an in-flight place, rate tokens and a volume
//! charge for one request, each keyed by the request's claim or its source, taken in a fixed
//! order and given back if a later defence refuses.
//!
//! # The plan
//!
//! A gate is a plan of charges, stated once as data:
//!
//! | defence | keyed by (default) | costs |
//! |---|---|---|
//! | in-flight quota ([`Gate::in_flight`]) | the claim | one place, until the [`Pass`] drops |
//! | any number of rate limits ([`Gate::rates`], each a [`Limit`]) | the source | each its [`Cost`]: fixed tokens, or the request's weight with a minimum |
//! | volume quota ([`Gate::volume`]) | the claim | one event of the request's bytes |
//!
//! A request is an [`Admission`]: its claim and its source, each hashed once, plus its bytes
//! and weight. The claim is what the request says it is, and no claim can be verified at
//! intake; the source is what the client cannot choose. So the in-flight place and the
//! volume bind the actor a request claims to be (an honest actor's flood is bounded), and the
//! rate binds where requests come from (a client rotating claims is bounded by what it
//! cannot forge). [`Admission::of`] makes one actor both: the simple case, and
//! [`Gate::try_acquire`]'s.
//!
//! # Order and rollback
//!
//! A request that passes the in-flight quota and the rate limits but is refused by the volume
//! quota must not cost its actor a place or a token: otherwise a refused request spends the
//! actor's budget elsewhere, and an actor near one limit is pushed over the others by its own
//! refusals. [`Gate::try_admit`] takes them in this order:
//!
//! 1. **the in-flight place** ([`fairness::Quotas`]): given back by dropping its permit;
//! 2. **the rate limits**, in the order given: each given back by
//!    [`Limiter::refund_at`](crate::limiter::Limiter::refund_at) at the same reading, the
//!    last taken first;
//! 3. **the volume charge** ([`quota::RateLimit`]): last, because a count-min charge cannot
//!    be taken back (undoing a raise could lower a counter another actor's charge relies on),
//!    so it is made only once the others are held, and nothing follows it that could refuse.
//!
//! Any defence may be left out. The cheapest refusal comes first: an actor over its in-flight
//! quota is refused before any token or volume is counted. A refusal names the defence, the
//! limit by its name, and the key kind ([`GateRefused`]).
//!
//! # Priority
//!
//! The in-flight slot holds [`fairness::Quotas`] or, with an adaptive total in front,
//! [`fairness::AdaptiveQuotas`] (a type parameter of the gate, [`InFlight`]). An admission's
//! priority ([`Admission::priority`]) is read by the adaptive total alone: a class is
//! admitted while the ops in flight are below its share of the total's limit. Plain quotas
//! ignore it. It is the server's word, never a client's header (see
//! [`fairness::Priority`]).
//!
//! # Invariant
//!
//! **A refused admission leaves every key holding exactly what it held before**: the same
//! places in flight, the same tokens in every limit (as of the reading the admission used),
//! the same volume counted. An admitted one holds one more place (until its [`Pass`] is
//! dropped), each limit's cost fewer tokens, and its bytes counted. Checked by a proptest of
//! admissions with mixed claims and sources against a sequential reference model
//! (`gate::plan_tests`) and one that compares each actor's holdings before and after every
//! refused admission (`gate::tests`), and by the loom models `two_admissions_racing_with_one_refused`
//! and `two_claims_sharing_a_source_one_refused` (`loom-tests/tests/gate.rs`).
//!
//! # Rollback
//!
//! Tokens go back by refunds, which are exact or void (see "Refunds" in the
//! [bucket docs](crate::bucket#refunds)): **a refused admission costs its keys never more
//! than before, and less only by its own take, when another decision landed on the same key
//! between the take and its refund** (the refund is then void, since that token may already
//! have refilled and been taken again). A key deciding alone is rolled back exactly; a source
//! many requests share at once (a NAT) may keep a token per refused request that raced another
//! (measured in the [design notes](crate::implementation), "What a rollback promises"). A
//! pass keeps what the grants said, not the grants: no caller can refund an admitted
//! request's tokens, let alone twice.
//!
//! # Several limits: classes of one limiter, or limiters of their own
//!
//! The limits of one [`Gate::rates`] call are classes of one limiter: one table, one cap, an
//! entry per key and class, so `active keys × limits ≤ cap`. Limits of separate calls are
//! separate limiters, each with its own cap and memory. A limit that refills slowly (a daily
//! budget) holds its key's entry until it has refilled, a day after the key's last charge: its
//! limiter's cap must hold every key active within a day, or newcomers pay the class's shared
//! overflow bucket. Give such a limit a limiter of its own, sized for a day's keys.
//!
//! [`fairness::Quotas`]: crate::fairness::Quotas
//! [`fairness::AdaptiveQuotas`]: crate::fairness::AdaptiveQuotas
//! [`fairness::Priority`]: crate::fairness::Priority
//! [`quota::RateLimit`]: crate::quota::RateLimit

mod admission;
mod error;
mod in_flight;
mod outcome;
#[cfg(test)]
mod outcome_tests;
mod pass;
mod plan;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod shared_source_tests;
mod take;
#[cfg(test)]
mod tests;

pub use admission::Admission;
pub use error::{GateConfigError, GateRefused};
pub use in_flight::{InFlight, InFlightPermit};
pub use pass::{OwnedPass, Pass};
pub use plan::{Cost, KeyKind, Limit};

use crate::actor::HashedActor;
use crate::clock::{Clock, ReadingAhead, RecentClock};
#[cfg(feature = "tower")]
use crate::fairness::Places;
use crate::fairness::{Priority, Quotas, QuotasRefused};
use crate::limiter::{InvalidCharge, Limiter, LimiterRefused};
use crate::quota::RateLimit;
use outcome::take;
use pass::Charged;
use std::hash::Hash;
use std::sync::Arc;
#[cfg(feature = "tower")]
pub(crate) use take::Take;
use take::{NoRecord, Record};

/// The most rate limits one gate charges: an admission's rollback is a recursion as deep as
/// its limits, with no allocation.
pub const MAX_LIMITS: usize = 16;

/// The three defences in front of one writer, admitted together. See the [module
/// documentation](self).
///
/// The limiters and the volume quota must read one time: the default [`RecentClock`]s all do
/// (one process-wide time), as do clones of one [`ManualClock`]; two
/// [`MonotonicClock`](crate::MonotonicClock)s are two clocks with two origins.
/// [`Gate::try_admit`] reads the first limiter's clock once and hands that reading to all.
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
/// assert!(matches!(gate.try_acquire("alice", 600), Err(GateRefused::Volume { .. })));
/// // The second token was given back: without the refund this would be refused for rate.
/// assert!(gate.try_acquire("alice", 100).is_ok(), "the token was given back");
/// drop(pass); // the writer decided it: the place is free
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The claim and the source, and several limits at once:
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::gate::{Admission, Cost, Gate, GateRefused, KeyKind, Limit};
/// use admit::quota::{Quota, RateLimit};
/// use admit::{BucketConfig, Limiter, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let per_source = Limiter::builder().build_with_clock(
///     [BucketConfig::per_second(10)?.with_burst(20)?, BucketConfig::per_day(10_000)?],
///     clock.clone(),
/// )?;
/// let per_claim = Limiter::builder().build_with_clock([BucketConfig::per_second(100)?], clock.clone())?;
/// let gate = Gate::new()
///     .in_flight(Quotas::builder().quota(32).build()?) // by the claim
///     .rates(per_source, [Limit::new("burst", 0), Limit::new("daily", 1)])?
///     .rates(per_claim, [Limit::new("per claim", 0).keyed_by(KeyKind::Claim).cost(Cost::Weight { min: 1 })])?
///     .volume(RateLimit::with_clock(Quota::default(), clock)); // by the claim
///
/// let source: std::net::IpAddr = "203.0.113.9".parse()?;
/// // A client rotating claims from one address: the source's burst of 20 binds it.
/// let admitted = (0..100)
///     .filter_map(|i| gate.try_admit(&Admission::new(&format!("key-{i}"), &source)).ok())
///     .count();
/// assert_eq!(admitted, 20);
/// let refused = gate.try_admit(&Admission::new("key-7", &source)).unwrap_err();
/// assert!(matches!(&refused, GateRefused::Rate { limit, key: KeyKind::Source, .. } if &**limit == "burst"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// [`ManualClock`]: crate::clock::ManualClock
#[derive(Debug)]
pub struct Gate<C: Clock = RecentClock, I: InFlight = Quotas> {
    in_flight: Option<Keyed<I>>,
    rates: Vec<Rates<C>>,
    volume: Option<Keyed<Arc<RateLimit<C>>>>,
}

/// A defence and the key it charges. The limiters and the volume quota are held by an [`Arc`]
/// (the in-flight quotas are a shared handle already), so that a
/// [`LiveLimits`](crate::live::LiveLimits) can build a gate around the primitives it reloads.
/// The count is written only when a gate is built, never by an admission.
#[derive(Debug)]
struct Keyed<D> {
    defence: D,
    key: KeyKind,
}

/// A limiter and the limits (its classes) an admission charges. The limits are shared with
/// the [`LiveLimits`](crate::live::LiveLimits) that built the gate, if one did: a reload
/// changes their costs in place.
#[derive(Debug)]
struct Rates<C: Clock> {
    limiter: Arc<Limiter<C>>,
    limits: Arc<[Limit]>,
}

impl<C: Clock> Default for Gate<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clock> Gate<C> {
    /// A gate with no defence: it admits everything until defences are added. The clock type
    /// is the one the rate limiters and the volume quota read (inferred from them; a gate of
    /// in-flight quotas alone can be typed `Gate`).
    pub fn new() -> Self {
        Self {
            in_flight: None,
            rates: Vec::new(),
            volume: None,
        }
    }
}

impl<C: Clock, I: InFlight> Gate<C, I> {
    /// Adds the in-flight quotas, keyed by the claim: [`Quotas`], or
    /// [`AdaptiveQuotas`](crate::fairness::AdaptiveQuotas) (the gate's type follows).
    pub fn in_flight<J: InFlight>(self, quotas: J) -> Gate<C, J> {
        self.in_flight_keyed(quotas, KeyKind::Claim)
    }

    /// Adds the in-flight quotas, keyed by `key`: by the source, an in-flight quota bounds
    /// what one source holds whatever claims it makes (a rate bounds arrivals, not holdings).
    /// A clone of `quotas` kept elsewhere shares its table, limits and switches with the
    /// gate's. Replaces any in-flight quotas added before.
    pub fn in_flight_keyed<J: InFlight>(self, quotas: J, key: KeyKind) -> Gate<C, J> {
        Gate {
            in_flight: Some(Keyed {
                defence: quotas,
                key,
            }),
            rates: self.rates,
            volume: self.volume,
        }
    }

    /// Adds one rate limit: one token of `class` of `limiter` an admission, keyed by the
    /// source, named "rate". A class `limiter` lacks refuses every admission with
    /// [`InvalidCharge::UnknownClass`];
    /// [`Gate::rates`] checks at build instead.
    pub fn rate(mut self, limiter: Limiter<C>, class: usize) -> Self {
        self.rates.push(Rates {
            limiter: Arc::new(limiter),
            limits: Arc::new([Limit::new("rate", class)]),
        });
        self
    }

    /// Adds `limits`, classes of `limiter`, all charged by every admission, in order. Refused,
    /// naming the limit, if a limit's class is not one of `limiter`'s, its fixed cost exceeds
    /// its class's burst (it could never pass), two limits of the gate share a name, or the
    /// gate would charge more than [`MAX_LIMITS`].
    ///
    /// ```
    /// use admit::gate::{Cost, Gate, GateConfigError, Limit};
    /// use admit::{BucketConfig, Limiter};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_second(5)?])?;
    /// let refused = Gate::new().rates(limiter, [Limit::new("bulk", 0).cost(Cost::Tokens(6))]);
    /// assert!(matches!(refused, Err(GateConfigError::CostExceedsBurst { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rates(
        self,
        limiter: Limiter<C>,
        limits: impl IntoIterator<Item = Limit>,
    ) -> Result<Self, GateConfigError> {
        self.rates_shared(Arc::new(limiter), limits.into_iter().collect())
    }

    /// [`Gate::rates`] for a limiter and limits held elsewhere too (a reload changes the
    /// limits' costs in place).
    pub(crate) fn rates_shared(
        mut self,
        limiter: Arc<Limiter<C>>,
        limits: Arc<[Limit]>,
    ) -> Result<Self, GateConfigError> {
        let charged = self.limits().count() + limits.len();
        if charged > MAX_LIMITS {
            return Err(GateConfigError::TooManyLimits {
                limits: charged,
                max: MAX_LIMITS,
            });
        }
        for (at, limit) in limits.iter().enumerate() {
            let earlier = limits.iter().take(at);
            if self
                .limits()
                .map(|(_, l)| l)
                .chain(earlier)
                .any(|l| l.name == limit.name)
            {
                return Err(GateConfigError::DuplicateName {
                    limit: Arc::clone(&limit.name),
                });
            }
            let config = limiter
                .config(limit.class)
                .ok_or(GateConfigError::UnknownClass {
                    limit: Arc::clone(&limit.name),
                    class: limit.class,
                    classes: limiter.classes(),
                })?;
            let (Cost::Tokens(n) | Cost::Weight { min: n }) = limit.cost_of();
            if n > config.burst() {
                return Err(GateConfigError::CostExceedsBurst {
                    limit: Arc::clone(&limit.name),
                    cost: n,
                    burst: config.burst(),
                });
            }
        }
        self.rates.push(Rates { limiter, limits });
        Ok(self)
    }

    /// Adds the volume quota, keyed by the claim.
    pub fn volume(self, volume: RateLimit<C>) -> Self {
        self.volume_keyed(volume, KeyKind::Claim)
    }

    /// Adds the volume quota, keyed by `key`.
    pub fn volume_keyed(self, volume: RateLimit<C>, key: KeyKind) -> Self {
        self.volume_shared(Arc::new(volume), key)
    }

    /// [`Gate::volume_keyed`] for a volume quota held elsewhere too.
    pub(crate) fn volume_shared(mut self, volume: Arc<RateLimit<C>>, key: KeyKind) -> Self {
        self.volume = Some(Keyed {
            defence: volume,
            key,
        });
        self
    }

    /// Admits one request of `actor` (as its claim and its source, hashed once) carrying
    /// `bytes`, at the clock's current reading (the first limiter's clock, else the volume
    /// quota's): every defence or none.
    pub fn try_acquire<K: Hash + ?Sized>(
        &self,
        actor: &K,
        bytes: u64,
    ) -> Result<Pass<'_, I>, GateRefused> {
        self.try_admit_at(&Admission::of(actor).bytes(bytes), self.now_ns())
    }

    /// [`Gate::try_acquire`] at reading `now_ns` of the gate's clock.
    pub fn try_acquire_at<K: Hash + ?Sized>(
        &self,
        actor: &K,
        bytes: u64,
        now_ns: u64,
    ) -> Result<Pass<'_, I>, GateRefused> {
        self.try_admit_at(&Admission::of(actor).bytes(bytes), now_ns)
    }

    /// [`Gate::try_acquire_at`] for an actor hashed once ([`HashedActor::new`]).
    pub fn try_acquire_hashed_at(
        &self,
        actor: &HashedActor,
        bytes: u64,
        now_ns: u64,
    ) -> Result<Pass<'_, I>, GateRefused> {
        self.try_admit_at(&Admission::hashed_one(*actor).bytes(bytes), now_ns)
    }

    /// Admits `admission` at the clock's current reading: every defence of the plan, each by
    /// its key, or none (see the [module documentation](self)).
    pub fn try_admit(&self, admission: &Admission) -> Result<Pass<'_, I>, GateRefused> {
        self.try_admit_at(admission, self.now_ns())
    }

    /// Admits `admission` at reading `now_ns` of the gate's clock.
    pub fn try_admit_at(
        &self,
        admission: &Admission,
        now_ns: u64,
    ) -> Result<Pass<'_, I>, GateRefused> {
        self.admit_with(
            admission,
            now_ns,
            |in_flight, actor, priority, _| in_flight.acquire(actor, priority),
            NoRecord,
            |permit, charged| Pass { permit, charged },
        )
    }

    /// [`Gate::try_admit_at`], recording in `take` what each charge left (for the IETF
    /// `RateLimit` fields): read off the charges themselves, no table read twice. On a
    /// refusal, `take` holds what the defences before the refusing one left.
    #[cfg(feature = "tower")]
    pub(crate) fn try_admit_taking_at(
        &self,
        admission: &Admission,
        now_ns: u64,
        take: &mut Take,
    ) -> Result<Pass<'_, I>, GateRefused> {
        self.admit_with(
            admission,
            now_ns,
            |in_flight, actor, priority, take: &mut &mut Take| {
                let (permit, places) = in_flight.acquire_counted(actor, priority)?;
                take.places = places.map(Places::from);
                Ok(permit)
            },
            take,
            |permit, charged| Pass {
                permit,
                charged: charged.kept(),
            },
        )
    }

    /// [`Gate::try_admit_owned_at`], recording in `take` as [`Gate::try_admit_taking_at`].
    #[cfg(feature = "tower")]
    pub(crate) fn try_admit_owned_taking_at(
        &self,
        admission: &Admission,
        now_ns: u64,
        take: &mut Take,
    ) -> Result<OwnedPass<I>, GateRefused> {
        self.admit_with(
            admission,
            now_ns,
            |in_flight, actor, priority, take: &mut &mut Take| {
                let (permit, places) = in_flight.acquire_owned_counted(actor, priority)?;
                take.places = places.map(Places::from);
                Ok(permit)
            },
            take,
            |permit, charged| OwnedPass {
                permit,
                charged: charged.kept(),
            },
        )
    }

    /// [`Gate::try_admit`] for an [`OwnedPass`], which does not borrow the gate.
    pub fn try_admit_owned(&self, admission: &Admission) -> Result<OwnedPass<I>, GateRefused> {
        self.try_admit_owned_at(admission, self.now_ns())
    }

    /// [`Gate::try_admit_at`] for a gate whose pass holds nothing (the tower layer of rate
    /// limits alone, whose gate has no in-flight quota): the same admission, all or nothing,
    /// with no pass made, so nothing of the grants is copied out.
    #[cfg(feature = "tower")]
    #[inline(always)]
    pub(crate) fn try_admit_passless_at(
        &self,
        admission: &Admission,
        now_ns: u64,
    ) -> Result<(), GateRefused> {
        self.admit_with(
            admission,
            now_ns,
            |in_flight, actor, priority, _| in_flight.acquire(actor, priority).map(drop),
            NoRecord,
            |_, _| (),
        )
    }

    /// [`Gate::try_admit_at`] for an [`OwnedPass`], which does not borrow the gate.
    // Always: the layer's one call of the admission, which the compiler otherwise leaves out
    // of line beside the layer's admission with the IETF fields (+22 instructions a request
    // through the layer, callgrind).
    #[inline(always)]
    pub fn try_admit_owned_at(
        &self,
        admission: &Admission,
        now_ns: u64,
    ) -> Result<OwnedPass<I>, GateRefused> {
        self.admit_with(
            admission,
            now_ns,
            |in_flight, actor, priority, _| in_flight.acquire_owned(actor, priority),
            NoRecord,
            |permit, charged| OwnedPass { permit, charged },
        )
    }

    /// A reading of the gate's clock (its first limiter's, else its volume quota's; 0 without
    /// either, when no defence reads time).
    pub fn now_ns(&self) -> u64 {
        match (self.rates.first(), &self.volume) {
            (Some(rates), _) => rates.limiter.clock().now_ns(),
            (None, Some(volume)) => volume.defence.clock().now_ns(),
            (None, None) => 0,
        }
    }

    /// The admission proper: the place by `place`, then the rate limits and the volume, the
    /// pass made by `pass` where it is returned (not moved out through a tuple first).
    #[inline(always)]
    fn admit_with<'g, P, R: Record, T>(
        &'g self,
        admission: &Admission,
        now_ns: u64,
        place: impl FnOnce(&'g I, &HashedActor, Priority, &mut R) -> Result<P, QuotasRefused>,
        record: R,
        pass: impl FnOnce(Option<P>, Charged<R>) -> T,
    ) -> Result<T, GateRefused> {
        let mut record = record;
        // 1. The place: given back by dropping `permit` on any refusal below.
        let permit = match &self.in_flight {
            Some(Keyed { defence, key }) => {
                let actor = admission.key(*key).ok_or(GateRefused::MissingKey {
                    defence: "in-flight quota",
                    key: *key,
                })?;
                // The admission's class: read by an adaptive total alone.
                let permit = place(defence, actor, admission.priority_of(), &mut record)
                    .map_err(|refused| GateRefused::InFlight { key: *key, refused })?;
                Some(permit)
            }
            None => None,
        };
        // 2. and 3. The tokens, then the volume.
        let mut charged = Charged::recording(record);
        match self.rates.as_slice() {
            // One limit, the common plan: straight-line, without the recursion's frames.
            [Rates { limiter, limits }] if limits.len() == 1 => {
                if let Some(limit) = limits.first() {
                    self.charge_last(limiter, limit, admission, now_ns, &mut charged)?;
                }
            }
            // Two limits of one limiter (a source's and a claim's; a burst and a day), the
            // next most common: straight-line too.
            [Rates { limiter, limits }] if limits.len() == 2 => {
                if let [first, second] = &**limits {
                    let (grant, n) = take(limiter, first, admission, now_ns)?;
                    charged.take.limit(limiter, &grant, now_ns);
                    if let Err(refused) =
                        self.charge_last(limiter, second, admission, now_ns, &mut charged)
                    {
                        // As in `charge_limits`: exact, or void if another take landed since.
                        let _ = limiter.refund_at(grant, n, now_ns);
                        return Err(refused);
                    }
                    charged.record(&grant);
                }
            }
            all => self.charge_rates(all, admission, now_ns, &mut charged)?,
        }
        Ok(pass(permit, charged))
    }

    /// Charges every limit of `rates`, then the volume; all or nothing.
    fn charge_rates(
        &self,
        rates: &[Rates<C>],
        admission: &Admission,
        now_ns: u64,
        charged: &mut Charged<impl Record>,
    ) -> Result<(), GateRefused> {
        match rates.split_first() {
            Some((first, rest)) => {
                self.charge_limits(first, &first.limits, rest, admission, now_ns, charged)
            }
            None => self.charge_volume(admission, now_ns, &mut charged.take),
        }
    }

    /// Charges `limits` of `rates.limiter`, then the limiters of `rest`, then the volume: a
    /// refusal after a limit's take refunds it at the same reading before it is passed on.
    fn charge_limits(
        &self,
        rates: &Rates<C>,
        limits: &[Limit],
        rest: &[Rates<C>],
        admission: &Admission,
        now_ns: u64,
        charged: &mut Charged<impl Record>,
    ) -> Result<(), GateRefused> {
        let Some((limit, more)) = limits.split_first() else {
            return self.charge_rates(rest, admission, now_ns, charged);
        };
        if more.is_empty() && rest.is_empty() {
            return self.charge_last(&rates.limiter, limit, admission, now_ns, charged);
        }
        let (grant, n) = take(&rates.limiter, limit, admission, now_ns)?;
        charged.take.limit(&rates.limiter, &grant, now_ns);
        if let Err(refused) = self.charge_limits(rates, more, rest, admission, now_ns, charged) {
            // The reading was accepted by the take, so the refund accepts it too. Exact, or
            // void if another take landed on the key since (see "Rollback").
            let _ = rates.limiter.refund_at(grant, n, now_ns);
            return Err(refused);
        }
        charged.record(&grant);
        Ok(())
    }

    /// The last limit, then the volume: the end of [`Gate::charge_limits`]'s recursion, and
    /// the whole of a one-limit plan, inlined into its callers.
    #[inline(always)]
    fn charge_last(
        &self,
        limiter: &Limiter<C>,
        limit: &Limit,
        admission: &Admission,
        now_ns: u64,
        charged: &mut Charged<impl Record>,
    ) -> Result<(), GateRefused> {
        let (grant, n) = take(limiter, limit, admission, now_ns)?;
        charged.take.limit(limiter, &grant, now_ns);
        if let Err(refused) = self.charge_volume(admission, now_ns, &mut charged.take) {
            // As in `charge_limits`: exact, or void if another take landed on the key since.
            let _ = limiter.refund_at(grant, n, now_ns);
            return Err(refused);
        }
        charged.record(&grant);
        Ok(())
    }

    /// The volume, last: it cannot be taken back, and nothing after it can refuse.
    #[inline(always)]
    fn charge_volume(
        &self,
        admission: &Admission,
        now_ns: u64,
        take: &mut impl Record,
    ) -> Result<(), GateRefused> {
        let Some(Keyed { defence, key }) = &self.volume else {
            return Ok(());
        };
        let actor = admission.key(*key).ok_or(GateRefused::MissingKey {
            defence: "volume quota",
            key: *key,
        })?;
        take.volume(defence, actor, admission.bytes_of(), now_ns)
            .map_err(|refused| GateRefused::Volume { key: *key, refused })
    }

    /// The in-flight quotas, if the gate has them (the per-actor quotas of adaptive ones).
    pub fn quotas(&self) -> Option<&Quotas> {
        self.in_flight.as_ref().map(|keyed| keyed.defence.quotas())
    }

    /// What the in-flight slot holds, if the gate has one: the [`AdaptiveQuotas`] of an
    /// adaptive gate, with their limit L and settings.
    ///
    /// [`AdaptiveQuotas`]: crate::fairness::AdaptiveQuotas
    pub fn in_flight_slot(&self) -> Option<&I> {
        self.in_flight.as_ref().map(|keyed| &keyed.defence)
    }

    /// The first rate limit's limiter and the class it charges, if the gate has one.
    pub fn limiter(&self) -> Option<(&Limiter<C>, usize)> {
        self.limits()
            .next()
            .map(|(limiter, limit)| (limiter, limit.class))
    }

    /// Every rate limit, in the order an admission charges them, with its limiter.
    pub fn limits(&self) -> impl Iterator<Item = (&Limiter<C>, &Limit)> {
        self.rates.iter().flat_map(|rates| {
            rates
                .limits
                .iter()
                .map(move |limit| (&*rates.limiter, limit))
        })
    }

    /// The volume quota, if the gate has one.
    pub fn volume_quota(&self) -> Option<&RateLimit<C>> {
        self.volume.as_ref().map(|keyed| &*keyed.defence)
    }

    /// The key the in-flight quota charges, if the gate has one.
    #[cfg(feature = "tower")]
    pub(crate) fn in_flight_key(&self) -> Option<KeyKind> {
        self.in_flight.as_ref().map(|keyed| keyed.key)
    }

    /// The key the volume quota charges, if the gate has one.
    #[cfg(feature = "tower")]
    pub(crate) fn volume_key(&self) -> Option<KeyKind> {
        self.volume.as_ref().map(|keyed| keyed.key)
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
        self.in_flight.is_some() || !self.rates.is_empty() || self.volume.is_some()
    }

    /// Checks that the other limiters and the volume quota accept the readings
    /// [`Gate::try_acquire`] hands them, which are the first limiter's: `Err` if its clock is
    /// more than [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) ahead of
    /// another limiter's or of the volume quota's, when every admission reaching that defence
    /// would be refused as a reading ahead
    /// ([`RateLimitRefused::ReadingAhead`](crate::quota::RateLimitRefused::ReadingAhead) for
    /// the volume quota). `Ok` for a gate without a limiter, and for clones of one clock.
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
    ///
    /// // Two limiters, the second on a clock 5 s behind the first's.
    /// let second = BucketConfig::per_second(1)?;
    /// let limiter = |clock| Limiter::builder().build_with_clock([second], clock);
    /// let two_limiters = Gate::new()
    ///     .rate(limiter(ManualClock::starting_at(5_000_000_000))?, 0)
    ///     .rate(limiter(ManualClock::new())?, 0);
    /// assert_eq!(two_limiters.check_clocks().unwrap_err().reading_ns(), 5_000_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_clocks(&self) -> Result<(), ReadingAhead> {
        let Some(first) = self.rates.first() else {
            return Ok(());
        };
        let now_ns = first.limiter.clock().now_ns();
        // Every other limiter takes the first one's readings too: one ahead of its own clock
        // would refuse every admission that reaches it.
        for rates in self.rates.iter().skip(1) {
            let Some(limit) = rates.limits.first() else {
                continue;
            };
            let checked = rates.limiter.check_at(&(), limit.class, 1, now_ns);
            // A change landing on that limiter says nothing about its clock.
            if let Err(LimiterRefused::Invalid(InvalidCharge::ReadingAhead(ahead))) = checked {
                if !ahead.while_a_change_lands() {
                    return Err(ahead);
                }
            }
        }
        match &self.volume {
            Some(volume) => volume.defence.usage_at(&(), now_ns).map(|_| ()),
            None => Ok(()),
        }
    }
}
