//! Why an admission was refused: which defence, and its own refusal.

use crate::fairness::QuotasRefused;
use crate::limiter::LimiterRefused;
use crate::quota::RateLimitRefused;
use std::fmt;

/// Why [`Gate::try_acquire`](super::Gate::try_acquire) refused: the first defence that said
/// no, with its own refusal. Whatever the earlier defences had taken was given back.
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::gate::{Gate, GateRefused};
///
/// let gate: Gate = Gate::new().in_flight(Quotas::builder().quota(1).build()?);
/// let _held = gate.try_acquire("agent-7", 0)?;
/// let refused = gate.try_acquire("agent-7", 0).unwrap_err();
/// assert!(matches!(refused, GateRefused::InFlight(_)));
/// assert_eq!(refused.retry_after_secs(), None, "in flight: retry once an op is decided");
/// println!("{refused}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRefused {
    /// The actor has as many ops in flight as its quota allows.
    InFlight(QuotasRefused),
    /// The actor's rate bucket is empty (or the charge was invalid).
    Rate(LimiterRefused),
    /// The actor's volume in this window would pass a limit (or the reading was ahead).
    Volume(RateLimitRefused),
}

impl GateRefused {
    /// Whole seconds to wait before retrying, rounded up and at least 1, for a rate or volume
    /// refusal that waiting cures; `None` for an in-flight refusal (retry when an op of the
    /// actor has been decided) and for refusals no wait cures.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::InFlight(_) => None,
            Self::Rate(refused) => refused.limited().map(|l| l.retry_after_secs()),
            Self::Volume(refused) => refused.retry_after_secs(),
        }
    }
}

impl fmt::Display for GateRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InFlight(refused) => write!(f, "in-flight quota: {refused}"),
            Self::Rate(refused) => write!(f, "rate limit: {refused}"),
            Self::Volume(refused) => write!(f, "volume quota: {refused}"),
        }
    }
}

impl std::error::Error for GateRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::InFlight(refused) => Some(refused),
            Self::Rate(refused) => Some(refused),
            Self::Volume(refused) => Some(refused),
        }
    }
}

impl From<QuotasRefused> for GateRefused {
    fn from(refused: QuotasRefused) -> Self {
        Self::InFlight(refused)
    }
}

impl From<LimiterRefused> for GateRefused {
    fn from(refused: LimiterRefused) -> Self {
        Self::Rate(refused)
    }
}

impl From<RateLimitRefused> for GateRefused {
    fn from(refused: RateLimitRefused) -> Self {
        Self::Volume(refused)
    }
}
