//! [`AdaptiveQuotas`]: per-actor quotas with the adaptive total in front of them, and their
//! permits; reading and changing L's settings.

use super::super::permit::Held;
use super::super::{
    OwnedPermit, Permit, Quotas, QuotasBuilder, QuotasConfigError, QuotasRefused, Shared,
};
use super::{
    AdaptiveTotal, AdaptiveTotalError, Capacity, Priority, TotalRefused, NOT_COUNTED, SAMPLED,
};
use crate::actor::{Actor, HashedActor, Plain};
use crate::clock::{Clock, RecentClock};
use crate::sync::Arc;
use std::hash::Hash;
use std::time::Duration;

/// Per-actor in-flight quotas with an adaptive total: every op needs a place under its actor's
/// quota, as in [`Quotas`], and one in a total across all actors, admitted only while the total
/// is below its [`Priority`] class's share of a limit L that follows the writer's latency
/// toward a target (see [`AdaptiveTotal`], and the rules in the [module
/// documentation](crate::fairness#an-adaptive-total)).
///
/// Built by [`QuotasBuilder::build_adaptive`]; it reads clock `C` twice an op (at admission
/// and at release), the default [`RecentClock`] one load a reading. Cloneable: every clone
/// shares the table and the total.
///
/// ```
/// use admit::fairness::{AdaptiveTotal, Priority, Quotas};
/// use admit::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let total = AdaptiveTotal::new(Duration::from_millis(1)).initial(4);
/// let quotas = Quotas::builder().quota(32).build_adaptive_with_clock(total, clock.clone())?;
/// let first = quotas.try_acquire("agent")?; // normal: 0 ops is below 50 % of 4
/// let second = quotas.try_acquire("agent")?; // 1 is too
/// assert!(quotas.try_acquire("agent").is_err(), "2 ops is not");
/// let human = quotas.try_acquire_as("human", Priority::Critical)?; // all of L
/// clock.advance(Duration::from_millis(3)); // decided 3 ms after admission: over the target
/// drop((first, second, human));
/// assert_eq!(quotas.limit(), 3, "one step down: 4 × 9/10, at least one less");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AdaptiveQuotas<C: Clock = RecentClock> {
    quotas: Quotas,
    capacity: Arc<Capacity<C>>,
}

impl<C: Clock> Clone for AdaptiveQuotas<C> {
    fn clone(&self) -> Self {
        Self {
            quotas: self.quotas.clone(),
            capacity: Arc::clone(&self.capacity),
        }
    }
}

impl QuotasBuilder {
    /// Validates and builds [`AdaptiveQuotas`]: these quotas, with an adaptive total of
    /// `config` in front, reading a [`RecentClock`] (at most half a millisecond stale: for
    /// targets under about 5 ms, give a [`MonotonicClock`](crate::MonotonicClock) to
    /// [`QuotasBuilder::build_adaptive_with_clock`]).
    ///
    /// ```
    /// use admit::fairness::{AdaptiveTotal, Quotas};
    /// use std::time::Duration;
    ///
    /// let total = AdaptiveTotal::new(Duration::from_millis(20)).ceiling(4_096);
    /// let quotas = Quotas::builder().quota(32).build_adaptive(total)?;
    /// assert_eq!(quotas.limit(), 64, "L starts at 64");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build_adaptive(
        self,
        config: AdaptiveTotal,
    ) -> Result<AdaptiveQuotas, QuotasConfigError> {
        self.build_adaptive_with_clock(config, RecentClock::new())
    }

    /// [`QuotasBuilder::build_adaptive`], reading `clock` (a
    /// [`ManualClock`](crate::ManualClock) in tests and simulations: time moves only when
    /// told).
    pub fn build_adaptive_with_clock<C: Clock>(
        self,
        config: AdaptiveTotal,
        clock: C,
    ) -> Result<AdaptiveQuotas<C>, QuotasConfigError> {
        config
            .validate()
            .map_err(QuotasConfigError::AdaptiveTotal)?;
        let capacity = Capacity::new(&config, clock);
        #[cfg(feature = "metrics")]
        let capacity = capacity.with_metrics(self.metrics_labels());
        Ok(AdaptiveQuotas {
            quotas: self.build()?,
            capacity: Arc::new(capacity),
        })
    }
}

impl<C: Clock> AdaptiveQuotas<C> {
    /// [`AdaptiveQuotas::try_acquire_as`] with [`Priority::Normal`].
    #[inline]
    pub fn try_acquire<K: Hash + ?Sized>(
        &self,
        actor: &K,
    ) -> Result<AdaptivePermit<'_, C>, QuotasRefused> {
        self.try_acquire_as(actor, Priority::Normal)
    }

    /// Admits one op of `actor` in class `priority` if its actor has fewer than its quota
    /// awaiting a decision and the ops in flight across all actors are below the class's share
    /// of L. Lock-free and never blocking. A refusal by the total says so
    /// ([`QuotasRefused::total`]: the class, its share, L); the actor's place is then given
    /// back.
    ///
    /// The priority is the caller's word: take it from the server's own code or a trusted
    /// proxy, never from what a client sent (see [`Priority`]).
    #[inline]
    pub fn try_acquire_as<K: Hash + ?Sized>(
        &self,
        actor: &K,
        priority: Priority,
    ) -> Result<AdaptivePermit<'_, C>, QuotasRefused> {
        let (held, since) = self.place(&Plain(actor), priority)?;
        Ok(self.borrowed(held, since))
    }

    /// [`AdaptiveQuotas::try_acquire_as`] for an actor hashed once ([`HashedActor::new`]).
    #[inline]
    pub fn try_acquire_hashed_as(
        &self,
        actor: &HashedActor,
        priority: Priority,
    ) -> Result<AdaptivePermit<'_, C>, QuotasRefused> {
        let (held, since) = self.place(actor, priority)?;
        Ok(self.borrowed(held, since))
    }

    /// [`AdaptiveQuotas::try_acquire_as`], with a permit that holds its own handles, for a
    /// writer thread that must be `'static`: four more atomic operations per op than the
    /// borrowing permit (two reference counts, up here and down at the drop).
    ///
    /// ```
    /// use admit::fairness::{AdaptiveTotal, Priority, Quotas};
    /// use std::time::Duration;
    ///
    /// let quotas = Quotas::builder().build_adaptive(AdaptiveTotal::new(Duration::from_millis(5)))?;
    /// let permit = quotas.try_acquire_owned_as("batch", Priority::Sheddable)?;
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// assert_eq!(quotas.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_owned_as<K: Hash + ?Sized>(
        &self,
        actor: &K,
        priority: Priority,
    ) -> Result<OwnedAdaptivePermit<C>, QuotasRefused> {
        let (held, since) = self.place(&Plain(actor), priority)?;
        Ok(self.owned(held, since))
    }

    /// [`AdaptiveQuotas::try_acquire_owned_as`] for an actor hashed once.
    #[inline]
    pub fn try_acquire_owned_hashed_as(
        &self,
        actor: &HashedActor,
        priority: Priority,
    ) -> Result<OwnedAdaptivePermit<C>, QuotasRefused> {
        let (held, since) = self.place(actor, priority)?;
        Ok(self.owned(held, since))
    }

    #[inline(always)]
    fn borrowed(&self, held: Held, since: u64) -> AdaptivePermit<'_, C> {
        AdaptivePermit {
            permit: Permit {
                shared: &self.quotas.shared,
                held,
            },
            capacity: &self.capacity,
            since,
        }
    }

    fn owned(&self, held: Held, since: u64) -> OwnedAdaptivePermit<C> {
        OwnedAdaptivePermit {
            permit: OwnedPermit {
                shared: Arc::clone(&self.quotas.shared),
                held,
            },
            capacity: Arc::clone(&self.capacity),
            since,
        }
    }

    /// The actor's place, then the total's: a refusal by the total gives the actor's place
    /// back (Invariant 6).
    #[inline(always)]
    fn place<A: Actor>(&self, actor: &A, priority: Priority) -> Result<(Held, u64), QuotasRefused> {
        let shared = &*self.quotas.shared;
        let (held, ()) = shared.place_counting::<A, (), false>(actor)?;
        match self.capacity.admit(priority) {
            Ok(since) => {
                shared.record_admitted(&held);
                Ok((held, since))
            }
            Err(total) => shared
                .refused_by_total(actor, held, total)
                .map(|held| (held, NOT_COUNTED)),
        }
    }

    /// The per-actor quotas: their limits, overrides, counts, shadow switch and drain
    /// ([`Quotas::wait_idle`]) are these quotas'. Ops acquired through the handle directly
    /// are not counted in the total.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    /// The adaptive limit L now.
    pub fn limit(&self) -> u32 {
        self.capacity.limit()
    }

    /// The ops counted in the total now, all actors: one load, where
    /// [`Quotas::total_in_flight`] scans the table.
    pub fn in_flight(&self) -> u32 {
        self.capacity.in_flight()
    }

    /// The latency estimate: the last window's mean time from admission to decision (`None`
    /// before a window had samples).
    pub fn latency_estimate(&self) -> Option<Duration> {
        self.capacity.estimate()
    }

    /// The settings now; their `initial` is L now.
    pub fn settings(&self) -> AdaptiveTotal {
        self.capacity.settings()
    }

    /// Replaces the target, the bounds and the shares at once, while other threads acquire: L
    /// keeps its value, clamped to the new bounds (ops already admitted stay). Settings that
    /// do not validate are refused, changing nothing.
    ///
    /// ```
    /// use admit::fairness::{AdaptiveTotal, Quotas};
    /// use std::time::Duration;
    ///
    /// let target = AdaptiveTotal::new(Duration::from_millis(5));
    /// let quotas = Quotas::builder().build_adaptive(target)?;
    /// quotas.configure(target.ceiling(16))?;
    /// assert_eq!(quotas.limit(), 16, "64 clamped to the new ceiling");
    /// assert!(quotas.configure(target.floor(0)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn configure(&self, config: AdaptiveTotal) -> Result<(), AdaptiveTotalError> {
        config.validate()?;
        self.capacity.configure(&config);
        Ok(())
    }

    /// Samples folded into steps of L, and samples in the open window, for models. Not part of
    /// the supported API.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn model_samples(&self) -> (u64, u64) {
        self.capacity.samples()
    }
}

impl Shared {
    /// The total refused an op placed in its actor's count (`held`): the actor's place goes
    /// back, and the refusal is counted and traced; in shadow mode the op is admitted instead,
    /// holding no place in its actor's count or in the total.
    #[cold]
    #[inline(never)]
    fn refused_by_total<A: Actor>(
        &self,
        actor: &A,
        held: Held,
        total: TotalRefused,
    ) -> Result<Held, QuotasRefused> {
        let key = match held {
            Held::Entry { key, .. } | Held::Overflow { key } => key,
            Held::Unlimited | Held::Shadow(_) => self
                .hasher
                .key_of_hash(self.hasher.hash_of(&actor.hashed(), 0)),
        };
        self.release(&held);
        let refused = QuotasRefused {
            limit: total.limit,
            in_flight: total.in_flight,
            shared: false,
            class: total.packed_class(),
        };
        self.refused(&key, refused)
    }
}

/// One admitted op's place under its actor's quota and in the adaptive total, borrowing the
/// [`AdaptiveQuotas`] that granted it. Dropping it (or [`AdaptivePermit::complete`]) once the
/// writer has decided the op frees both, and hands the total its sample: the time since
/// admission.
#[must_use = "dropping an AdaptivePermit frees its places at once and counts the op decided; \
              send it to the writer with the op and drop it when the op is decided"]
#[derive(Debug)]
pub struct AdaptivePermit<'q, C: Clock = RecentClock> {
    permit: Permit<'q>,
    capacity: &'q Capacity<C>,
    /// The admission's reading, or `NOT_COUNTED`.
    since: u64,
}

/// The methods both adaptive permits have.
macro_rules! permit_methods {
    ($permit:ty) => {
        impl<C: Clock> $permit {
            /// Marks the op decided and frees its places (the same as dropping the permit).
            #[inline]
            pub fn complete(self) {
                drop(self);
            }

            /// Whether this permit counts against the shared overflow quota (see
            /// [`Permit::via_overflow`]).
            pub fn via_overflow(&self) -> bool {
                self.permit.via_overflow()
            }

            /// The refusal this permit stands for, if the quotas are in
            /// [shadow mode](crate::shadow) and enforcement would have refused: by the actor's
            /// quota, or by the total ([`QuotasRefused::total`]; the permit then holds no
            /// place in the total).
            pub fn would_have_refused(&self) -> Option<&QuotasRefused> {
                self.permit.would_have_refused()
            }

            /// The op is answered, though the permit is kept (a response whose body is still
            /// streaming): the total takes its sample now, the time from admission to this
            /// call, and stops counting its age, so a slow reader neither pulls L down nor
            /// looks like a stalled writer. The place in the total and the actor's place are
            /// held until the drop. A second call does nothing.
            pub fn responded(&mut self) {
                responded(&self.capacity, &mut self.since);
            }
        }
    };
}

permit_methods!(AdaptivePermit<'_, C>);
permit_methods!(OwnedAdaptivePermit<C>);

impl<C: Clock> Drop for AdaptivePermit<'_, C> {
    #[inline]
    fn drop(&mut self) {
        release(self.capacity, self.since);
        // The actor's place: `permit`'s own drop, next.
    }
}

/// A permit's part of the total: its place and its sample, or what is left of them.
#[inline]
fn release<C: Clock>(capacity: &Capacity<C>, since: u64) {
    if since < SAMPLED {
        capacity.release(since);
    } else {
        release_marked(capacity, since);
    }
}

/// A permit already sampled at its response's headers frees its place alone; one the total
/// does not count, nothing.
#[cold]
fn release_marked<C: Clock>(capacity: &Capacity<C>, since: u64) {
    if since == SAMPLED {
        capacity.free();
    }
}

/// [`AdaptivePermit::responded`]'s body, for both forms.
fn responded<C: Clock>(capacity: &Capacity<C>, since: &mut u64) {
    if *since < SAMPLED {
        capacity.responded(*since);
        *since = SAMPLED;
    }
}

/// [`AdaptivePermit`] holding its own handles: the `'static` form, for a writer thread that
/// outlives the submitters' handles.
#[must_use = "dropping an OwnedAdaptivePermit frees its places at once and counts the op \
              decided; send it to the writer with the op and drop it when the op is decided"]
#[derive(Debug)]
pub struct OwnedAdaptivePermit<C: Clock = RecentClock> {
    permit: OwnedPermit,
    capacity: Arc<Capacity<C>>,
    since: u64,
}

impl<C: Clock> Drop for OwnedAdaptivePermit<C> {
    #[inline]
    fn drop(&mut self) {
        release(&self.capacity, self.since);
    }
}
