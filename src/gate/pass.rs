//! What an admitted request holds: its in-flight place, and what its charges said.
//!
//! Two forms, as the in-flight quotas' permits have. A [`Pass`] borrows the gate, so taking
//! and freeing it write nothing shared but the actor's own count: hand it to a writer spawned
//! in [`std::thread::scope`], or keep the gate in a `static` (a `OnceLock<Gate>`, or a gate
//! leaked once at start-up with `Box::leak`) and the pass is a `Pass<'static>`, free to travel
//! anywhere. An [`OwnedPass`] holds a reference-counted handle to the in-flight table instead:
//! it outlives every gate handle, at the price of a count every admission writes (two atomic
//! operations on one line every core shares).

use super::take::NoRecord;
use super::{InFlight, InFlightPermit};
use crate::fairness::Quotas;
use crate::limiter::Limited;

/// What the rate limits' grants said, without the grants: the admission stands, so nothing a
/// caller holds can refund its tokens. While the admission runs it also carries its recorder
/// (see [`super::take`]); a pass keeps none.
#[derive(Debug, Default)]
pub(super) struct Charged<R = NoRecord> {
    /// Whether any limit was paid by its class's shared overflow bucket.
    pub(super) overflow: bool,
    /// The first refusal a limit in shadow mode admitted instead.
    pub(super) would_refuse: Option<Limited>,
    /// What records each charge's take.
    pub(super) take: R,
}

impl<R> Charged<R> {
    /// Nothing charged yet, recording with `take`.
    #[inline(always)]
    pub(super) fn recording(take: R) -> Self {
        Self {
            overflow: false,
            would_refuse: None,
            take,
        }
    }

    /// What a pass keeps: the grants' answers, without the recorder.
    #[cfg(feature = "tower")]
    #[inline(always)]
    pub(super) fn kept(self) -> Charged {
        Charged {
            overflow: self.overflow,
            would_refuse: self.would_refuse,
            take: NoRecord,
        }
    }
}

/// What an admitted request holds: its in-flight place, freed when the pass is dropped (hand it
/// to the writer with the request), and what it was charged. Borrows the gate: see
/// [`OwnedPass`] for one that does not.
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::gate::Gate;
///
/// let gate: Gate = Gate::new().in_flight(Quotas::builder().quota(1).build()?);
/// let pass = gate.try_acquire("agent-7", 0)?;
/// assert!(gate.try_acquire("agent-7", 0).is_err(), "one place, held");
/// drop(pass); // the writer decided the op
/// assert!(gate.try_acquire("agent-7", 0).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the pass frees the in-flight place at once"]
pub struct Pass<'g, I: InFlight = Quotas> {
    pub(super) permit: Option<I::Permit<'g>>,
    pub(super) charged: Charged,
}

/// A [`Pass`] that holds the in-flight table by a reference count rather than borrowing the
/// gate ([`Gate::try_admit_owned`](super::Gate::try_admit_owned)): for a `'static` writer
/// or response body when the gate is not itself `'static`.
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::gate::{Admission, Gate};
///
/// let gate: Gate = Gate::new().in_flight(Quotas::builder().quota(1).build()?);
/// let pass = gate.try_admit_owned(&Admission::of("agent-7"))?;
/// let writer = std::thread::spawn(move || drop(pass)); // `'static`: no borrow of the gate
/// writer.join().unwrap();
/// assert!(gate.try_acquire("agent-7", 0).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the pass frees the in-flight place at once"]
pub struct OwnedPass<I: InFlight = Quotas> {
    pub(super) permit: Option<I::OwnedPermit>,
    pub(super) charged: Charged,
}

impl<R> Charged<R> {
    /// Records what `grant` says of its take.
    #[inline]
    pub(super) fn record(&mut self, grant: &crate::limiter::Grant) {
        self.overflow |= grant.via_overflow();
        if self.would_refuse.is_none() {
            self.would_refuse = grant.would_have_refused().copied();
        }
    }
}

/// The questions both passes answer, of their permit and their charges.
macro_rules! pass_answers {
    ($pass:ty) => {
        impl<I: InFlight> $pass {
            /// The refusal a rate limit would have answered, if its class is in
            /// [shadow mode](crate::shadow) and admitted this request instead (the first such
            /// limit's; see
            /// [`Grant::would_have_refused`](crate::limiter::Grant::would_have_refused)). The
            /// pass keeps no grant: the admission stands, and nothing it lends can give its
            /// tokens back.
            pub fn rate_would_have_refused(&self) -> Option<&Limited> {
                self.charged.would_refuse.as_ref()
            }

            /// Whether the in-flight place or a rate limit was paid by a shared overflow
            /// budget.
            pub fn via_overflow(&self) -> bool {
                self.permit
                    .as_ref()
                    .is_some_and(|permit| permit.via_overflow())
                    || self.charged.overflow
            }

            /// Whether the in-flight quotas or a rate limit would have refused this admission
            /// and [shadow mode](crate::shadow) admitted it instead. The volume quota's shadow
            /// admissions carry nothing; it counts them.
            pub fn would_have_refused(&self) -> bool {
                self.permit
                    .as_ref()
                    .is_some_and(|permit| permit.would_have_refused().is_some())
                    || self.charged.would_refuse.is_some()
            }
        }
    };
}

pass_answers!(Pass<'_, I>);
pass_answers!(OwnedPass<I>);

impl<'g, I: InFlight> Pass<'g, I> {
    /// The in-flight place alone, for a holder that asks nothing of the charges (the tower
    /// layer's response body): a smaller value to move with every response.
    #[cfg(feature = "tower")]
    pub(crate) fn into_permit(self) -> Option<I::Permit<'g>> {
        self.permit
    }
}

impl<I: InFlight> OwnedPass<I> {
    /// The in-flight place alone, as `Pass::into_permit`.
    #[cfg(feature = "tower")]
    pub(crate) fn into_permit(self) -> Option<I::OwnedPermit> {
        self.permit
    }
}
