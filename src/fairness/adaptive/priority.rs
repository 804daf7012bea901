//! The priority an admission carries, and each class's share of the adaptive limit.

use super::config::AdaptiveTotalError;

/// How much an op matters when the writer is overloaded: under the adaptive total, a class is
/// admitted only while the ops in flight are below its share of the limit, so the lowest
/// class is refused first.
///
/// A priority is whatever the caller says it is. Read from a request it is the client's claim,
/// and a client that may name its own priority names `Critical`: set it only in the server's
/// own code (its housekeeping, a human operator's console) or from a trusted proxy that
/// overwrites whatever the client sent, never from a header or a field the client controls.
///
/// ```
/// use admit::fairness::{AdaptiveTotal, Priority, Quotas};
/// use admit::ManualClock;
/// use std::time::Duration;
///
/// let total = AdaptiveTotal::new(Duration::from_millis(5)).initial(2).floor(1);
/// let quotas = Quotas::builder().build_adaptive_with_clock(total, ManualClock::new())?;
/// let first = quotas.try_acquire_as("batch", Priority::Sheddable)?; // 0 < 25 % of 2
/// assert!(quotas.try_acquire_as("batch", Priority::Sheddable).is_err()); // 1 is not
/// let human = quotas.try_acquire_as("human", Priority::Critical)?; // 1 < all of 2
/// # drop((first, human));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Admitted while the total is below all of the limit: what a person waits for.
    Critical,
    /// The default of [`AdaptiveQuotas::try_acquire`](crate::fairness::AdaptiveQuotas::try_acquire).
    Normal,
    /// Refused first: batch work, prefetching, retries that can come back later.
    Sheddable,
}

impl Priority {
    /// Every class, highest first.
    pub const ALL: [Priority; 3] = [Priority::Critical, Priority::Normal, Priority::Sheddable];

    /// The class's name in messages, configuration and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Normal => "normal",
            Self::Sheddable => "sheddable",
        }
    }

    /// The class's position in [`Priority::ALL`] (and in its packed share).
    pub(super) fn index(self) -> usize {
        match self {
            Self::Critical => 0,
            Self::Normal => 1,
            Self::Sheddable => 2,
        }
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Each class's share of the adaptive limit L, in permille: a class is admitted only while
/// the ops in flight are fewer than `L × share / 1000`. Critical's share is always all of L
/// (1000); normal's and sheddable's are set, with `sheddable ≤ normal ≤ 1000`, both at least 1.
///
/// ```
/// use admit::fairness::{Priority, Shares};
///
/// let shares = Shares::permille(800, 400)?;
/// assert_eq!(shares.of(Priority::Critical), 1000);
/// assert_eq!(shares.of(Priority::Sheddable), 400);
/// assert!(Shares::permille(400, 800).is_err(), "sheddable above normal");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    normal: u16,
    sheddable: u16,
}

impl Default for Shares {
    /// Normal 500 ‰, sheddable 250 ‰: under a flood of normal ops half of L stays free for
    /// critical ones, enough that a step of L down (to 9/10, at least one less) does not
    /// reach them while L ≥ 3; sheddable ops wait until the writer is three quarters idle.
    fn default() -> Self {
        Self {
            normal: 500,
            sheddable: 250,
        }
    }
}

impl Shares {
    /// Critical's share, and the largest any class may have.
    pub const WHOLE: u32 = 1000;

    /// Normal's and sheddable's shares, in permille of L.
    pub fn permille(normal: u32, sheddable: u32) -> Result<Self, AdaptiveTotalError> {
        if sheddable == 0 || sheddable > normal || normal > Self::WHOLE {
            return Err(AdaptiveTotalError::Shares { normal, sheddable });
        }
        Ok(Self {
            normal: u16::try_from(normal).unwrap_or(1000),
            sheddable: u16::try_from(sheddable).unwrap_or(1000),
        })
    }

    /// The share of `priority`, in permille of L.
    pub fn of(&self, priority: Priority) -> u32 {
        match priority {
            Priority::Critical => Self::WHOLE,
            Priority::Normal => u32::from(self.normal),
            Priority::Sheddable => u32::from(self.sheddable),
        }
    }

    /// The three shares in one word, 11 bits each, by [`Priority::index`]: what an admission
    /// reads, once.
    pub(super) fn packed(&self) -> u64 {
        Priority::ALL.iter().enumerate().fold(0, |word, (i, &p)| {
            word | u64::from(self.of(p)) << (SHARE_BITS * i)
        })
    }

    /// The shares of a word from [`Shares::packed`].
    pub(super) fn unpacked(word: u64) -> Self {
        Self {
            normal: share_in(word, Priority::Normal) as u16,
            sheddable: share_in(word, Priority::Sheddable) as u16,
        }
    }
}

/// Bits of one share in the packed word (1000 needs 10; 11 keeps the arithmetic plain).
const SHARE_BITS: usize = 11;

/// The share of `priority` in a packed word.
#[inline]
pub(super) fn share_in(word: u64, priority: Priority) -> u64 {
    (word >> (SHARE_BITS * priority.index())) & ((1 << SHARE_BITS) - 1)
}
