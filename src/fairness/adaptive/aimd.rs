//! The limit's rule: additive increase, multiplicative decrease (AIMD) against a target
//! latency, one step per window. Pure arithmetic: the lock-free plumbing that feeds it a
//! window is in `mod.rs`, and the sequential reference model (`crate::check::adaptive`)
//! states the same rule in its own words.

/// What one window saw, as the window's closer folds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Window {
    /// Samples (admission to decision) the window holds.
    pub(crate) samples: u64,
    /// Their mean, in nanoseconds (0 without samples).
    pub(crate) mean_ns: u64,
    /// The age of the oldest op in flight at the close, in nanoseconds (0 if none), at least
    /// the true age less one age bucket.
    pub(crate) oldest_ns: u64,
    /// Ops in flight at the close.
    pub(crate) in_flight: u64,
}

/// Multiplicative decrease: L × 9/10 (and at least 1 less) when the window was congested.
pub(crate) const BACKOFF_PERMILLE: u64 = 900;

/// How many target latencies old the oldest op in flight may grow before the writer counts as
/// stalled, whatever the samples (it sends none while stalled).
pub(crate) const STALL_TARGETS: u64 = 2;

impl Window {
    /// Whether the writer is behind: the mean sample is above the target, or the oldest op in
    /// flight has waited more than [`STALL_TARGETS`] targets.
    pub(crate) fn congested(&self, target_ns: u64) -> bool {
        (self.samples > 0 && self.mean_ns > target_ns)
            || self.oldest_ns > target_ns.saturating_mul(STALL_TARGETS)
    }
}

/// The next L after `window`, within `floor..=ceiling`.
///
/// * congested: L × 9/10, at least one less (a decrease per window while it lasts);
/// * below the target, with samples, and the limit in use (at least half of L in flight):
///   L + 1;
/// * otherwise (no samples, or too few ops to tell whether more would be slower): L.
pub(crate) fn next_limit(
    limit: u32,
    window: &Window,
    target_ns: u64,
    floor: u32,
    ceiling: u32,
) -> u32 {
    let l = u64::from(limit);
    let next = if window.congested(target_ns) {
        (l * BACKOFF_PERMILLE / 1000).min(l.saturating_sub(1))
    } else if window.samples > 0 && window.in_flight.saturating_mul(2) >= l {
        l + 1
    } else {
        l
    };
    let bounded = next.clamp(u64::from(floor), u64::from(ceiling.max(floor)));
    u32::try_from(bounded).unwrap_or(ceiling)
}
