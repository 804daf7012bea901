//! The reclaim hint: the earliest tick at which any entry could be full, so that a saturated
//! miss skips a scan that cannot free anything.
//!
//! ```text
//!  63                 42 41                                       0
//! +---------------------+------------------------------------------+
//! | VERSION (22 bits)   | TICK: no kept entry is full before this   |
//! +---------------------+------------------------------------------+
//! ```
//!
//! # Protocol
//!
//! * A scan reads the hint, reclaims every full entry, and then CASes the hint from the value
//!   it read to `(same version, smallest full_at it kept)`. Between those, entries only get
//!   less full (charges push `full_at` later), so the new tick is a lower bound again.
//! * The only way a kept entry can become full earlier than the hint is to be born: the first
//!   charge of a freshly inserted entry sets a `full_at` the last scan never saw. That charger
//!   lowers the hint *after* its charge CAS, with an RMW that always bumps the version.
//!
//! If the scan read the hint before that lowering, the lowering bumps the version and the
//! scan's CAS fails (keeping the lower tick), or the scan's CAS lands first and the lowering
//! then takes the minimum. If the scan read the hint after it, it read the charged entry too
//! (the lowering is `Release`, the scan's read `Acquire`, the charge sequenced before). Either
//! way no entry stays full past the hint, except while its first charger sits between its
//! charge and its lowering, which costs at most one skipped scan. The version has 22 bits: a
//! scan's CAS could be fooled only by 2^22 lowerings during one scan of a few microseconds.

use crate::clock::tick::TIME_MASK;
use crate::sync::atomic::{AtomicU64, Ordering};

const TICK_MASK: u64 = TIME_MASK;
const VERSION_ONE: u64 = TICK_MASK + 1;

/// See the module docs.
#[derive(Debug)]
pub(super) struct ReclaimHint {
    word: AtomicU64,
}

/// A hint value read by a scan, to be replaced if nothing lowered it meanwhile.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen(u64);

impl ReclaimHint {
    /// Starts at tick 0: the first saturated miss scans.
    pub(super) fn new() -> Self {
        Self {
            word: AtomicU64::new(0),
        }
    }

    /// `Some` if a scan at `now` might free something.
    pub(super) fn due(&self, now: u64) -> Option<Seen> {
        // Acquire: pairs with the Release of `lower`, so a scan that reads a lowered hint also
        // reads the charge that preceded the lowering.
        let word = self.word.load(Ordering::Acquire);
        (now >= word & TICK_MASK).then_some(Seen(word))
    }

    /// After a scan: no kept entry is full before `tick` (or ever, if `None`).
    pub(super) fn settle(&self, seen: Seen, tick: Option<u64>) {
        let tick = tick.unwrap_or(TICK_MASK);
        let next = (seen.0 & !TICK_MASK) | (tick & TICK_MASK);
        // AcqRel/Relaxed: success replaces exactly the value read, so a lowering in between
        // (which bumps the version) makes it fail; on failure the lower value stays.
        let _ = self
            .word
            .compare_exchange(seen.0, next, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// A newborn entry will be full at `tick`: lower the hint to it, bumping the version.
    pub(super) fn lower(&self, tick: u64) {
        // Release: a scan that reads this value also sees the charge sequenced before it.
        // Relaxed load: fetch_update's CAS loop revalidates every value it reads.
        let _ = self
            .word
            .fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
                let version = (word & !TICK_MASK).wrapping_add(VERSION_ONE);
                Some(version | (word & TICK_MASK).min(tick & TICK_MASK))
            });
    }

    /// The tick part, for tests and introspection.
    #[cfg(test)]
    pub(super) fn tick(&self) -> u64 {
        self.word.load(Ordering::Relaxed) & TICK_MASK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowering_during_a_scan_survives_it() {
        let hint = ReclaimHint::new();
        let seen = hint.due(10).unwrap();
        hint.lower(50);
        hint.settle(seen, Some(500));
        assert_eq!(
            hint.tick(),
            0,
            "the scan must not overwrite a concurrent lowering"
        );
        let seen = hint.due(10).unwrap();
        hint.settle(seen, Some(500));
        assert_eq!(hint.tick(), 500);
        assert!(hint.due(499).is_none());
        assert!(hint.due(500).is_some());
        hint.lower(200);
        assert_eq!(hint.tick(), 200);
        hint.lower(300);
        assert_eq!(hint.tick(), 200, "lowering never raises");
    }

    #[test]
    fn an_empty_scan_means_never() {
        let hint = ReclaimHint::new();
        let seen = hint.due(0).unwrap();
        hint.settle(seen, None);
        assert!(hint.due(TICK_MASK - 1).is_none());
    }
}
