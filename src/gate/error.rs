//! Why an admission was refused (which defence, which limit, which key, and its own
//! refusal), and why a gate's plan was refused.

use super::KeyKind;
use crate::fairness::QuotasRefused;
use crate::limiter::LimiterRefused;
use crate::quota::RateLimitRefused;
use std::fmt;
use std::sync::Arc;

/// Why [`Gate::try_admit`](super::Gate::try_admit) refused: the first defence that said no,
/// the key it charges, and its own refusal. Whatever the earlier defences had taken was given
/// back.
///
/// ```
/// use admit::fairness::Quotas;
/// use admit::gate::{Gate, GateRefused, KeyKind};
///
/// let gate: Gate = Gate::new().in_flight(Quotas::builder().quota(1).build()?);
/// let _held = gate.try_acquire("agent-7", 0)?;
/// let refused = gate.try_acquire("agent-7", 0).unwrap_err();
/// assert!(matches!(refused, GateRefused::InFlight { key: KeyKind::Claim, .. }));
/// assert_eq!(refused.retry_after_secs(), None, "in flight: retry once an op is decided");
/// println!("{refused}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRefused {
    /// The key has as many ops in flight as its quota allows.
    InFlight {
        /// The key the in-flight quota charges.
        key: KeyKind,
        /// The quotas' own refusal.
        refused: QuotasRefused,
    },
    /// A rate limit's bucket for the key is empty (or the charge was invalid).
    Rate {
        /// The limit's name ([`Limit::new`](super::Limit::new)).
        limit: Arc<str>,
        /// The key the limit charges.
        key: KeyKind,
        /// The limiter's own refusal.
        refused: LimiterRefused,
    },
    /// The key's volume in this window would pass a limit (or the reading was ahead).
    Volume {
        /// The key the volume quota charges.
        key: KeyKind,
        /// The quota's own refusal.
        refused: RateLimitRefused,
    },
    /// A defence is keyed by a key the admission does not carry (a limit keyed by
    /// [`KeyKind::SourcePrefix`] and an admission without one): refused rather than charged
    /// to another key.
    MissingKey {
        /// The defence: "in-flight quota", "rate limit" or "volume quota".
        defence: &'static str,
        /// The key it charges.
        key: KeyKind,
    },
}

impl GateRefused {
    /// Whole seconds to wait before retrying, rounded up and at least 1, for a rate or volume
    /// refusal that waiting cures; `None` for an in-flight refusal (retry when an op of the
    /// actor has been decided) and for refusals no wait cures.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::InFlight { .. } | Self::MissingKey { .. } => None,
            Self::Rate { refused, .. } => refused.limited().map(|l| l.retry_after_secs()),
            Self::Volume { refused, .. } => refused.retry_after_secs(),
        }
    }

    /// The key kind the refusing defence charges.
    pub fn key_kind(&self) -> KeyKind {
        match self {
            Self::InFlight { key, .. }
            | Self::Rate { key, .. }
            | Self::Volume { key, .. }
            | Self::MissingKey { key, .. } => *key,
        }
    }
}

impl fmt::Display for GateRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InFlight { key, refused } => {
                write!(f, "in-flight quota, keyed by {key}: {refused}")
            }
            Self::Rate {
                limit,
                key,
                refused,
            } => write!(f, "rate limit \"{limit}\", keyed by {key}: {refused}"),
            Self::Volume { key, refused } => write!(f, "volume quota, keyed by {key}: {refused}"),
            Self::MissingKey { defence, key } => write!(
                f,
                "the {defence} is keyed by {key}, which this admission does not carry: \
                 refused rather than charged to another key"
            ),
        }
    }
}

impl std::error::Error for GateRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::InFlight { refused, .. } => Some(refused),
            Self::Rate { refused, .. } => Some(refused),
            Self::Volume { refused, .. } => Some(refused),
            Self::MissingKey { .. } => None,
        }
    }
}

/// Why [`Gate::rates`](super::Gate::rates) refused a limiter's limits: nothing was added.
///
/// ```
/// use admit::gate::{Gate, GateConfigError, Limit};
/// use admit::{BucketConfig, Limiter};
///
/// let limiter = Limiter::builder().build([BucketConfig::per_second(5)?])?;
/// let refused = Gate::new().rates(limiter, [Limit::new("daily", 1)]).unwrap_err();
/// assert!(matches!(refused, GateConfigError::UnknownClass { class: 1, classes: 1, .. }));
/// assert!(refused.to_string().contains("\"daily\""));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateConfigError {
    /// The limit's class is not one of its limiter's.
    UnknownClass {
        /// The limit.
        limit: Arc<str>,
        /// Its class.
        class: usize,
        /// How many classes the limiter has.
        classes: usize,
    },
    /// The limit's cost (its fixed tokens, or its least weight) exceeds its class's burst:
    /// no admission could ever pass it.
    CostExceedsBurst {
        /// The limit.
        limit: Arc<str>,
        /// Its cost in tokens.
        cost: u32,
        /// Its class's burst.
        burst: u32,
    },
    /// Two limits of one gate share a name, so a refusal could not say which refused.
    DuplicateName {
        /// The name.
        limit: Arc<str>,
    },
    /// More limits than one admission charges.
    TooManyLimits {
        /// The limits asked for.
        limits: usize,
        /// The most a gate takes.
        max: usize,
    },
}

impl fmt::Display for GateConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownClass {
                limit,
                class,
                classes,
            } => write!(
                f,
                "limit \"{limit}\" charges class {class}, but its limiter has {classes} classes \
                 (0..{classes})"
            ),
            Self::CostExceedsBurst { limit, cost, burst } => write!(
                f,
                "limit \"{limit}\" costs {cost} tokens, above its class's burst of {burst}: no \
                 admission could ever pass it; lower the cost or raise the burst"
            ),
            Self::DuplicateName { limit } => write!(
                f,
                "two limits are named \"{limit}\": a refusal could not say which; rename one"
            ),
            Self::TooManyLimits { limits, max } => write!(
                f,
                "{limits} rate limits asked for, and one gate charges at most {max}"
            ),
        }
    }
}

impl std::error::Error for GateConfigError {}
