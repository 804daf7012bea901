//! Shadow mode: a limit decided, counted and charged exactly as if enforced, but never refusing.
//!
//! An operator trying a new limit wants to know whom it would refuse before it refuses anyone.
//! Every primitive (and each class of a [`Limiter`](crate::Limiter)) can be switched into
//! shadow mode and back at any time, from any thread, without a lock:
//!
//! * **Decided as if enforced.** A decision runs exactly as in enforcement. What an admission
//!   takes (a token, a place, a count) it takes; a decision that enforcement would refuse
//!   takes nothing, as a refusal takes nothing, so the state after a run in shadow is the
//!   state after the same run enforced.
//! * **Admitted, and said so.** Instead of the refusal, the caller gets an admission that
//!   carries it ([`Grant::would_have_refused`](crate::limiter::Grant::would_have_refused),
//!   [`Permit::would_have_refused`](crate::fairness::Permit::would_have_refused), and the same
//!   on [`OwnedPermit`](crate::fairness::OwnedPermit) and [`Pass`](crate::gate::Pass)); the
//!   token bucket and the volume quota, whose admissions carry nothing, only count it. A
//!   shadow admission of the in-flight quotas holds no place in the actor's count: its permit
//!   is counted in the total in flight, so a drain still waits for its op.
//! * **Counted apart.** Each primitive counts its shadow admissions (`shadow_admissions`),
//!   and the `metrics` bridge counts them under `outcome="would_refuse"`, never `"refused"`.
//!   The same run enforced and in shadow gives as many refusals as shadow admissions.
//! * **Switched at once, both ways.** The switch is one atomic flag, read only on the refusal
//!   path (an admission never reads it). A decision racing the switch is decided under the
//!   old setting or the new one, each of which is a correct answer; a decision ordered after
//!   the switch (on the switching thread, or on any thread that learned of the switch through
//!   memory) reads the new setting, and every thread sees the switches in one order (a
//!   `SeqCst` store and `SeqCst` loads).

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One primitive's (or class's) shadow switch and its count of shadow admissions.
#[derive(Debug, Default)]
pub(crate) struct Shadow {
    on: AtomicBool,
    admitted: AtomicU64,
}

impl Shadow {
    /// Enforcing, with nothing counted.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Switches shadow mode on or off.
    pub(crate) fn set(&self, on: bool) {
        // SeqCst: a decision that starts after this store returns reads it (see the module
        // docs); the flag publishes nothing else.
        self.on.store(on, Ordering::SeqCst);
    }

    /// Whether shadow mode is on.
    #[inline]
    pub(crate) fn is_on(&self) -> bool {
        // SeqCst: pairs with `set`.
        self.on.load(Ordering::SeqCst)
    }

    /// A decision was refused: in shadow mode, counts it and says to admit instead.
    #[inline]
    pub(crate) fn admits_instead(&self) -> bool {
        self.is_on() && self.count_admitted()
    }

    /// [`Shadow::admits_instead`] out of line: for a decision small enough to inline into its
    /// caller (a bucket's take), which the check inline would grow past that.
    #[cold]
    #[inline(never)]
    pub(crate) fn admits_instead_out_of_line(&self) -> bool {
        self.admits_instead()
    }

    /// Counts a refusal shadow mode turned into an admission; true.
    #[cold]
    #[inline(never)]
    fn count_admitted(&self) -> bool {
        // Relaxed: a statistic, read with `admitted`.
        self.admitted.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// How many refusals shadow mode has turned into admissions.
    pub(crate) fn admitted(&self) -> u64 {
        // Relaxed: a statistic.
        self.admitted.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
