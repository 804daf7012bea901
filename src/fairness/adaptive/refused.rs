//! The adaptive total's refusal: which class, its share, the limit L of the moment.

use super::priority::{Priority, Shares};
use std::fmt;

/// Why the adaptive total refused an op: the ops in flight across all actors had reached its
/// class's share of the limit L. Carried by [`QuotasRefused::total`](crate::fairness::QuotasRefused::total).
///
/// ```
/// use admit::fairness::{AdaptiveTotal, Priority, Quotas};
/// use admit::ManualClock;
/// use std::time::Duration;
///
/// let total = AdaptiveTotal::new(Duration::from_millis(5)).initial(4);
/// let quotas = Quotas::builder().build_adaptive_with_clock(total, ManualClock::new())?;
/// let held: Vec<_> = (0..2).map(|i| quotas.try_acquire(&i).unwrap()).collect();
/// let refused = quotas.try_acquire("late").unwrap_err(); // normal: 2 ops is 50 % of 4
/// let by_total = refused.total().unwrap();
/// assert_eq!(by_total.priority(), Priority::Normal);
/// assert_eq!((by_total.share_permille(), by_total.limit(), by_total.in_flight()), (500, 4, 2));
/// println!("{refused}");
/// # drop(held);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TotalRefused {
    pub(crate) priority: Priority,
    pub(crate) share: u32,
    pub(crate) limit: u32,
    pub(crate) in_flight: u32,
}

impl TotalRefused {
    /// The class and its share in 16 bits, never 0: the class's index + 1 above 12 bits of
    /// share (at most 1000).
    pub(crate) fn packed_class(&self) -> u16 {
        let index = self.priority.index() as u16 + 1;
        index << 12 | (self.share.min(Shares::WHOLE) as u16)
    }

    /// A refusal from [`TotalRefused::packed_class`] and its L and total (`None` for 0).
    pub(crate) fn unpacked(class: u16, limit: u32, in_flight: u32) -> Option<Self> {
        let priority = *Priority::ALL.get(usize::from(class >> 12).checked_sub(1)?)?;
        Some(Self {
            priority,
            share: u32::from(class & 0xfff),
            limit,
            in_flight,
        })
    }

    /// The class of the refused op.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// Its class's share of L, in permille.
    pub fn share_permille(&self) -> u32 {
        self.share
    }

    /// The adaptive limit L when the op was refused.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Ops in flight across all actors when the op was refused.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// The most ops in flight under which the class is still admitted: `⌈L × share / 1000⌉`.
    pub fn class_limit(&self) -> u32 {
        let whole = u64::from(Shares::WHOLE);
        let product = u64::from(self.limit) * u64::from(self.share);
        u32::try_from(product.div_ceil(whole)).unwrap_or(u32::MAX)
    }
}

impl fmt::Display for TotalRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "op refused: the writer is behind; {} ops are in flight across all actors, and {} ops \
             are admitted only below {}‰ of the adaptive limit of {} ({} ops); retry when the \
             writer has caught up",
            self.in_flight,
            self.priority,
            self.share,
            self.limit,
            self.class_limit()
        )
    }
}
