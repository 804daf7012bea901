//! Volume limits changed at runtime: [`RateLimit::set_limits`], [`RateLimit::check_limits`].
//!
//! # Limits changed at runtime
//!
//! The events and bytes limits are one `AtomicU64` (`events << 32 | bytes`), read once per
//! charge: the whole charge (the admission check against both limits, the refusal's numbers)
//! uses that one reading, so a charge racing a change decides wholly under the old limits or
//! wholly under the new ones. The window length and the row count are fixed at construction.
//!
//! 1. **What an actor has been charged in the current window stays charged.** A change
//!    touches no counter: the window's counts are the same after it, and are now measured
//!    against the new limits. So a change never mints a fresh budget (nothing is reset) and
//!    never erases a debt (nothing is forgiven): an actor that used 80 of 100 events has 20
//!    left; after the limit drops to 50 it has none until the window turns (its 80 stay
//!    counted, nothing is taken back); after it rises to 200 it has 120.
//! 2. **Lowered below what is already counted, the actor is refused for the rest of the
//!    window**, and admitted again from the next window, under the new limits. A word's count
//!    may then be more than the limit in force (it was charged under the old one); it is never
//!    more than the largest limit a charge counted in the window decided under, at most
//!    2^24 − 1, so no count reaches the next field's bits (invariant 3 of the [module
//!    docs](super), restated for changes). That is a limit in force during the window, or one a charge
//!    loaded before a change and counted after it, in a window the change had already begun
//!    (it decides wholly under the limits it loaded). A write
//!    of no bytes is judged on events alone, as before: it adds nothing to a bytes count left
//!    above a lowered limit.
//! 3. **The window length cannot change** ([`RateLimitConfigError::WindowFixed`]): windows are
//!    numbered in the length built with (every word carries its window's number, the header the
//!    newest number), and a new length would renumber them, so the current window's counts
//!    would read as another window's — erasing debt or charging stale counts — and the header
//!    could appear to go back. Neither can the row count
//!    ([`RateLimitConfigError::RowsFixed`]): rows split the fixed array, and every actor's
//!    counters would move.
//!
//! A change is visible to a thread from its next charge after the store becomes visible to
//! it: the thread that made it, and any thread that synchronizes with that thread afterwards,
//! charges under the new limits (or later ones), and no thread, having charged under limits,
//! charges under older ones (coherence on the one word). The word publishes nothing but itself
//! (the counters carry their own orderings, see "Orderings" in the module docs), so its
//! accesses are `Relaxed`.

use super::{Quota, RateLimit, RateLimitConfigError};
use crate::clock::Clock;
use crate::sync::atomic::Ordering;

/// `quota`'s limits in one word, events high.
pub(super) fn pack(quota: &Quota) -> u64 {
    u64::from(quota.events()) << 32 | u64::from(quota.bytes())
}

impl<C> RateLimit<C> {
    /// The quota in force now: the one built with, with the limits last set.
    #[inline]
    pub(super) fn current(&self) -> Quota {
        // Relaxed: see "Limits changed at runtime"; both limits come from this one load.
        let word = self.limits.load(Ordering::Relaxed);
        let events = u32::try_from(word >> 32).unwrap_or(u32::MAX);
        // Truncation intended: the low half is the bytes limit.
        let bytes = word as u32;
        self.quota.with_limits(events, bytes)
    }
}

impl<C: Clock> RateLimit<C> {
    /// Replaces the events and bytes limits, at once, while other threads charge. What each
    /// actor has been charged in the current window stays charged and is measured against the
    /// new limits (see "Limits changed at runtime" in `quota/reconfig.rs`, repeated in
    /// `docs/design.md` §6b). `quota`'s window and rows must be those the limiter was built
    /// with: a change of either is refused ([`RateLimitConfigError::WindowFixed`],
    /// [`RateLimitConfigError::RowsFixed`]) and changes nothing.
    ///
    /// ```
    /// use admit::quota::{Quota, RateLimit, RateLimitConfigError};
    /// use admit::ManualClock;
    /// use std::time::Duration;
    ///
    /// let minute = Duration::from_secs(60);
    /// let limit = RateLimit::with_clock(Quota::new(3, 4_096, minute)?, ManualClock::new());
    /// assert!(limit.try_acquire("tenant", 10).is_ok());
    /// assert!(limit.try_acquire("tenant", 10).is_ok());
    /// limit.set_limits(Quota::new(2, 4_096, minute)?)?;
    /// assert!(limit.try_acquire("tenant", 10).is_err(), "2 of 2 already charged");
    /// limit.set_limits(Quota::new(5, 4_096, minute)?)?;
    /// assert_eq!(limit.usage("tenant").events, 2, "the window's charges stay");
    /// assert!(limit.try_acquire("tenant", 10).is_ok(), "3 of 5");
    /// assert!(matches!(
    ///     limit.set_limits(Quota::new(5, 4_096, Duration::from_secs(1))?),
    ///     Err(RateLimitConfigError::WindowFixed { .. })
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_limits(&self, quota: Quota) -> Result<(), RateLimitConfigError> {
        self.check_limits(&quota)?;
        // Relaxed: see "Limits changed at runtime".
        self.limits.store(pack(&quota), Ordering::Relaxed);
        Ok(())
    }

    /// Whether [`RateLimit::set_limits`] would take `quota`, changing nothing.
    pub fn check_limits(&self, quota: &Quota) -> Result<(), RateLimitConfigError> {
        if quota.window() != self.quota.window() {
            return Err(RateLimitConfigError::WindowFixed {
                window: quota.window(),
                built_with: self.quota.window(),
            });
        }
        if quota.rows() != self.quota.rows() {
            return Err(RateLimitConfigError::RowsFixed {
                rows: quota.rows(),
                built_with: self.quota.rows(),
            });
        }
        Ok(())
    }
}
