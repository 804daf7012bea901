//! What the user states about the adaptive total: the target latency, the bounds of L, its
//! first value, the classes' shares; every bad number a typed error.

use super::priority::Shares;
use crate::clock::duration_to_ns;
use std::fmt;
use std::time::Duration;

/// The largest limit L the adaptive total takes (its ceiling at most): about 16 million ops
/// waiting for one writer.
pub const MAX_TOTAL_LIMIT: u32 = 1 << 24;

/// The adaptive total's settings: a limit L on the ops in flight across all actors that
/// follows the writer's measured latency (admission to decision) toward `target_latency`,
/// within `floor..=ceiling`, shared between priority classes by [`Shares`].
///
/// Pick the target as the longest an op should wait for the writer when the writer is
/// overloaded (see `docs/en/choosing-limits.md`): the writer's decision latency at the
/// target, in front of a flood, is about `target_latency`, and L settles near
/// `target_latency / apply cost / normal share`.
///
/// ```
/// use admit::fairness::{AdaptiveTotal, Quotas, Shares};
/// use std::time::Duration;
///
/// let total = AdaptiveTotal::new(Duration::from_millis(5))
///     .floor(4)
///     .ceiling(10_000)
///     .shares(Shares::permille(750, 500)?);
/// let quotas = Quotas::builder().quota(32).build_adaptive(total)?;
/// assert_eq!(quotas.limit(), 64, "starts at 64, clamped to the bounds");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct AdaptiveTotal {
    pub(super) target: Duration,
    pub(super) floor: u32,
    pub(super) ceiling: u32,
    pub(super) initial: u32,
    pub(super) shares: Shares,
}

impl AdaptiveTotal {
    /// L follows the latency toward `target_latency`; floor 1, ceiling 65,536, starting at 64,
    /// [`Shares::default`].
    pub fn new(target_latency: Duration) -> Self {
        Self {
            target: target_latency,
            floor: 1,
            ceiling: 1 << 16,
            initial: 64,
            shares: Shares::default(),
        }
    }

    /// The lowest L falls to, whatever the latency (at least 1).
    pub fn floor(mut self, floor: u32) -> Self {
        self.floor = floor;
        self
    }

    /// The highest L rises to (at most [`MAX_TOTAL_LIMIT`]).
    pub fn ceiling(mut self, ceiling: u32) -> Self {
        self.ceiling = ceiling;
        self
    }

    /// L before the first measurement (clamped to the bounds). Only read at build: a change at
    /// runtime keeps the L of the moment, clamped to the new bounds.
    pub fn initial(mut self, initial: u32) -> Self {
        self.initial = initial;
        self
    }

    /// The classes' shares of L.
    pub fn shares(mut self, shares: Shares) -> Self {
        self.shares = shares;
        self
    }

    /// The target latency.
    pub fn target_latency(&self) -> Duration {
        self.target
    }

    /// L before the first measurement, as given (clamped to the bounds at build).
    pub fn initial_limit(&self) -> u32 {
        self.initial
    }

    /// The bounds of L, `(floor, ceiling)`.
    pub fn bounds(&self) -> (u32, u32) {
        (self.floor, self.ceiling)
    }

    /// The classes' shares.
    pub fn class_shares(&self) -> Shares {
        self.shares
    }

    /// Whether the settings can be used, and if not, which one is wrong.
    pub fn validate(&self) -> Result<(), AdaptiveTotalError> {
        let target_ns = duration_to_ns(self.target);
        if !(MIN_TARGET_NS..=MAX_TARGET_NS).contains(&target_ns) {
            return Err(AdaptiveTotalError::Target {
                target: self.target,
            });
        }
        if self.floor == 0 || self.floor > self.ceiling || self.ceiling > MAX_TOTAL_LIMIT {
            return Err(AdaptiveTotalError::Bounds {
                floor: self.floor,
                ceiling: self.ceiling,
            });
        }
        Ok(())
    }

    /// The target in nanoseconds (valid settings: within `MIN_TARGET_NS..=MAX_TARGET_NS`).
    pub(super) fn target_ns(&self) -> u64 {
        duration_to_ns(self.target)
    }
}

/// The shortest target accepted: 10 µs (the age buckets are a quarter of it).
const MIN_TARGET_NS: u64 = 10_000;
/// The longest target accepted: 100 s.
const MAX_TARGET_NS: u64 = 100_000_000_000;

/// Why an [`AdaptiveTotal`] could not be used; each variant names the setting.
///
/// ```
/// use admit::fairness::{AdaptiveTotal, AdaptiveTotalError};
/// use std::time::Duration;
///
/// let bad = AdaptiveTotal::new(Duration::from_millis(5)).floor(10).ceiling(5);
/// assert_eq!(bad.validate(), Err(AdaptiveTotalError::Bounds { floor: 10, ceiling: 5 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdaptiveTotalError {
    /// The target latency is outside 10 µs ..= 100 s.
    Target {
        /// The target asked for.
        target: Duration,
    },
    /// The floor is 0, above the ceiling, or the ceiling above [`MAX_TOTAL_LIMIT`].
    Bounds {
        /// The floor asked for.
        floor: u32,
        /// The ceiling asked for.
        ceiling: u32,
    },
    /// The shares are not `1 ≤ sheddable ≤ normal ≤ 1000` (permille).
    Shares {
        /// Normal's share asked for.
        normal: u32,
        /// Sheddable's share asked for.
        sheddable: u32,
    },
}

impl fmt::Display for AdaptiveTotalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Target { target } => write!(
                f,
                "adaptive total: a target latency of {target:?} is outside 10µs..=100s"
            ),
            Self::Bounds { floor, ceiling } => write!(
                f,
                "adaptive total: floor {floor} and ceiling {ceiling} need \
                 1 <= floor <= ceiling <= {MAX_TOTAL_LIMIT}"
            ),
            Self::Shares { normal, sheddable } => write!(
                f,
                "adaptive total: shares normal {normal}‰ and sheddable {sheddable}‰ need \
                 1 <= sheddable <= normal <= 1000"
            ),
        }
    }
}

impl std::error::Error for AdaptiveTotalError {}
