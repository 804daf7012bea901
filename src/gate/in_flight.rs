//! The gate's in-flight slot: what it holds is a type parameter of the gate, [`Quotas`] by
//! default or [`AdaptiveQuotas`], so that a gate of plain quotas compiles to the code it had
//! before adaptive quotas existed (a slot that could hold either would branch on every
//! admission and every release, and carry the wider permit).

use crate::actor::HashedActor;
use crate::clock::Clock;
use crate::fairness::{
    AdaptivePermit, AdaptiveQuotas, OwnedAdaptivePermit, OwnedPermit, Permit, Priority, Quotas,
    QuotasRefused,
};
use std::fmt;

/// A permit with the actor's places held and its quota as its acquire counted them.
#[cfg(feature = "tower")]
type Counted<P> = Result<(P, Option<(u32, u32)>), QuotasRefused>;

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::fairness::Quotas {}
    impl<C: crate::clock::Clock> Sealed for crate::fairness::AdaptiveQuotas<C> {}
}

/// What a [`Gate`](super::Gate)'s in-flight slot can hold: [`Quotas`] (the default) or
/// [`AdaptiveQuotas`]. Sealed: the gate's invariants are stated of these two.
///
/// ```
/// use admit::fairness::{AdaptiveQuotas, AdaptiveTotal, Priority, Quotas};
/// use admit::gate::{Admission, Gate};
/// use admit::RecentClock;
/// use std::time::Duration;
///
/// let quotas = Quotas::builder().build_adaptive(AdaptiveTotal::new(Duration::from_millis(5)))?;
/// let gate: Gate<RecentClock, AdaptiveQuotas> = Gate::new().in_flight(quotas);
/// let pass = gate.try_admit(&Admission::of("human").priority(Priority::Critical))?;
/// # drop(pass);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait InFlight: sealed::Sealed + fmt::Debug + Send + Sync + 'static {
    /// The permit a [`Pass`](super::Pass) holds, borrowing the slot.
    type Permit<'a>: InFlightPermit + fmt::Debug + Send;
    /// The permit an [`OwnedPass`](super::OwnedPass) holds.
    type OwnedPermit: InFlightPermit + fmt::Debug + Send + 'static;

    /// One place for `actor`, in class `priority` (read only by an adaptive total).
    fn acquire(
        &self,
        actor: &HashedActor,
        priority: Priority,
    ) -> Result<Self::Permit<'_>, QuotasRefused>;

    /// [`InFlight::acquire`], with a permit holding its own handles.
    fn acquire_owned(
        &self,
        actor: &HashedActor,
        priority: Priority,
    ) -> Result<Self::OwnedPermit, QuotasRefused>;

    /// The per-actor quotas.
    fn quotas(&self) -> &Quotas;

    /// [`InFlight::acquire`], with the actor's places held (this one included) and its quota
    /// as this acquire's own CAS counted them, for the layer's IETF fields; `None` where they
    /// are not counted (an unlimited actor; an adaptive total, whose shares of `L` the fields
    /// do not state).
    #[cfg(feature = "tower")]
    #[doc(hidden)]
    #[inline(always)]
    fn acquire_counted(
        &self,
        actor: &HashedActor,
        priority: Priority,
    ) -> Counted<Self::Permit<'_>> {
        Ok((self.acquire(actor, priority)?, None))
    }

    /// [`InFlight::acquire_owned`], counted as [`InFlight::acquire_counted`].
    #[cfg(feature = "tower")]
    #[doc(hidden)]
    #[inline(always)]
    fn acquire_owned_counted(
        &self,
        actor: &HashedActor,
        priority: Priority,
    ) -> Counted<Self::OwnedPermit> {
        Ok((self.acquire_owned(actor, priority)?, None))
    }
}

/// What a pass asks of its in-flight permit.
pub trait InFlightPermit {
    /// Whether the place is counted in the shared overflow quota.
    fn via_overflow(&self) -> bool;
    /// The refusal shadow mode admitted instead, if any.
    fn would_have_refused(&self) -> Option<&QuotasRefused>;
    /// The op is answered though the permit is kept (a response's headers are out, its body
    /// streams): an adaptive total takes its latency sample now
    /// ([`AdaptivePermit::responded`]); plain permits do nothing.
    #[inline]
    fn responded(&mut self) {}
}

impl InFlight for Quotas {
    type Permit<'a> = Permit<'a>;
    type OwnedPermit = OwnedPermit;

    #[inline(always)]
    fn acquire(&self, actor: &HashedActor, _: Priority) -> Result<Permit<'_>, QuotasRefused> {
        self.try_acquire_hashed(actor)
    }

    #[inline(always)]
    fn acquire_owned(
        &self,
        actor: &HashedActor,
        _: Priority,
    ) -> Result<OwnedPermit, QuotasRefused> {
        self.try_acquire_owned_hashed(actor)
    }

    fn quotas(&self) -> &Quotas {
        self
    }

    #[cfg(feature = "tower")]
    #[inline(always)]
    fn acquire_counted(&self, actor: &HashedActor, _: Priority) -> Counted<Permit<'_>> {
        let (permit, places) = self.try_acquire_counted_hashed(actor)?;
        Ok((permit, places.map(|p| (p.held, p.quota))))
    }

    #[cfg(feature = "tower")]
    #[inline(always)]
    fn acquire_owned_counted(&self, actor: &HashedActor, _: Priority) -> Counted<OwnedPermit> {
        let (permit, places) = self.try_acquire_owned_counted_hashed(actor)?;
        Ok((permit, places.map(|p| (p.held, p.quota))))
    }
}

impl<C: Clock + fmt::Debug + 'static> InFlight for AdaptiveQuotas<C> {
    type Permit<'a> = AdaptivePermit<'a, C>;
    type OwnedPermit = OwnedAdaptivePermit<C>;

    #[inline(always)]
    fn acquire(
        &self,
        actor: &HashedActor,
        priority: Priority,
    ) -> Result<AdaptivePermit<'_, C>, QuotasRefused> {
        self.try_acquire_hashed_as(actor, priority)
    }

    #[inline(always)]
    fn acquire_owned(
        &self,
        actor: &HashedActor,
        priority: Priority,
    ) -> Result<OwnedAdaptivePermit<C>, QuotasRefused> {
        self.try_acquire_owned_hashed_as(actor, priority)
    }

    fn quotas(&self) -> &Quotas {
        AdaptiveQuotas::quotas(self)
    }
}

/// The permit types' own methods, as the trait's (the adaptive ones' sample at the headers
/// too).
macro_rules! permit_answers {
    ($([$($generics:tt)*] $permit:ty { $($more:tt)* })*) => {$(
        impl<$($generics)*> InFlightPermit for $permit {
            #[inline]
            fn via_overflow(&self) -> bool {
                <$permit>::via_overflow(self)
            }

            #[inline]
            fn would_have_refused(&self) -> Option<&QuotasRefused> {
                <$permit>::would_have_refused(self)
            }

            $($more)*
        }
    )*};
}

permit_answers! {
    [] Permit<'_> {}
    [] OwnedPermit {}
    [C: Clock] AdaptivePermit<'_, C> {
        #[inline]
        fn responded(&mut self) {
            AdaptivePermit::responded(self);
        }
    }
    [C: Clock] OwnedAdaptivePermit<C> {
        #[inline]
        fn responded(&mut self) {
            OwnedAdaptivePermit::responded(self);
        }
    }
}
