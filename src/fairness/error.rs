//! The rejection: which quota, how many ops are already waiting against it.

use super::adaptive::{AdaptiveTotalError, TotalRefused};
use std::fmt;

/// An op refused because its actor already has `limit` ops awaiting a decision.
///
/// It is answered at once, never by blocking: blocking would move the queue from the writer
/// into the submitter's thread and hide it. It owns everything it says (`'static`, `Copy`,
/// `Send + Sync`), so it can be `?`-ed into a `Box<dyn Error + Send + Sync>` or kept past the
/// call. It does not repeat the actor: the caller named it, and a refusal that carried the
/// name would either borrow it or allocate on the refusal path.
///
/// ```
/// use admit::fairness::Quotas;
///
/// let quotas = Quotas::builder().quota(1).build()?;
/// let _held = quotas.try_acquire("agent-7")?;
/// let refused = quotas.try_acquire("agent-7").unwrap_err();
/// assert_eq!((refused.limit(), refused.in_flight()), (1, 1));
/// assert!(!refused.via_overflow(), "agent-7 has an entry of its own");
/// println!("{refused}"); // never names the actor
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotasRefused {
    pub(crate) limit: u32,
    pub(crate) in_flight: u32,
    pub(crate) shared: bool,
    /// Non-zero when an adaptive total refused (its class's share of L), not a quota: the
    /// class and its share, packed ([`TotalRefused::packed_class`]) so that the refusal stays
    /// as small as it was (it travels by value through every acquire).
    pub(crate) class: u16,
}

impl QuotasRefused {
    /// The quota that was hit.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Ops counted against that quota when the op was refused.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Whether the quota hit was the shared overflow quota of actors without an entry of
    /// their own (the table of actors was full), rather than the actor's own.
    pub fn via_overflow(&self) -> bool {
        self.shared
    }

    /// Set when the adaptive total of [`AdaptiveQuotas`](super::AdaptiveQuotas) refused the
    /// op, not a quota: its class, its share, the limit L of the moment. Then
    /// [`QuotasRefused::limit`] is L and [`QuotasRefused::in_flight`] the ops in flight across
    /// all actors.
    pub fn total(&self) -> Option<TotalRefused> {
        TotalRefused::unpacked(self.class, self.limit, self.in_flight)
    }
}

#[cfg(feature = "tracing")]
impl crate::trace::InFlightRefusal for QuotasRefused {
    fn limit(&self) -> u32 {
        self.limit
    }

    fn in_flight(&self) -> u32 {
        self.in_flight
    }

    fn via_overflow(&self) -> bool {
        self.shared
    }
}

impl fmt::Display for QuotasRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(total) = self.total() {
            return total.fmt(f);
        }
        if self.shared {
            write!(
                f,
                "op refused: every actor slot is busy, and the {} ops of actors without a slot \
                 already fill their overflow quota of {}; retry when the writer has decided \
                 some, or raise the actor capacity",
                self.in_flight, self.limit
            )
        } else {
            write!(
                f,
                "op refused: its actor already has {} ops awaiting a decision, its quota is \
                 {}; retry when the writer has decided one of them, or raise its quota",
                self.in_flight, self.limit
            )
        }
    }
}

impl std::error::Error for QuotasRefused {}

/// Why a [`Quotas`](super::Quotas) could not be built. Each variant names the setting.
///
/// ```
/// use admit::fairness::{Quotas, QuotasConfigError};
///
/// assert_eq!(Quotas::builder().quota(0).build().unwrap_err(), QuotasConfigError::ZeroQuota);
/// assert_eq!(Quotas::builder().actors(0).build().unwrap_err(), QuotasConfigError::ZeroActors);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotasConfigError {
    /// A quota of 0 would refuse every op; use [`UNLIMITED`](super::UNLIMITED) to disable.
    ZeroQuota,
    /// `actors` (the table capacity) was 0.
    ZeroActors,
    /// `actors` was above the largest table this crate builds.
    TooManyActors {
        /// The capacity asked for.
        actors: usize,
        /// The largest accepted.
        max: usize,
    },
    /// [`Quotas::set_override`](super::Quotas::set_override) named one more actor than the
    /// override slots, fixed at build, hold
    /// ([`QuotasBuilder::override_capacity`](super::QuotasBuilder::override_capacity)).
    TooManyOverrides {
        /// How many distinct actors may hold an override.
        capacity: usize,
    },
    /// The adaptive total's settings are not usable (the error names which).
    AdaptiveTotal(AdaptiveTotalError),
}

impl fmt::Display for QuotasConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroQuota => f.write_str(
                "a quota of 0 refuses every op; use at least 1, or UNLIMITED to enforce none",
            ),
            Self::ZeroActors => {
                f.write_str("`actors` is 0: no actor could hold a slot; the default is 1024")
            }
            Self::TooManyActors { actors, max } => write!(
                f,
                "`actors` is {actors}, above the largest supported table of {max}"
            ),
            Self::TooManyOverrides { capacity } => write!(
                f,
                "no room for an override of one more actor: the quotas were built with room \
                 for {capacity} actors' overrides (a removed override keeps its actor's place); \
                 build with a larger `override_capacity`"
            ),
            Self::AdaptiveTotal(problem) => problem.fmt(f),
        }
    }
}

impl std::error::Error for QuotasConfigError {}
