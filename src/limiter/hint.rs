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
//! That is the millisecond layout. A limiter counting microseconds needs 52 bits for the tick
//! (104 years of them), and keeps 12 for the version.
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
//! charge and its lowering, which costs at most one skipped scan. The version has 22 bits (12
//! in microseconds): a scan's CAS could be fooled only by exactly a multiple of 2^22 (4,096)
//! lowerings during one scan, and then only delays a reclaim (the misses meanwhile pay their
//! class's overflow bucket), never mints.

use crate::clock::tick::{Tick, TIME_MASK};
use crate::sync::atomic::{AtomicU64, Ordering};

/// The tick field in milliseconds.
const MILLIS_MASK: u64 = TIME_MASK;
/// The tick field in microseconds: 2^52 µs is 142 years, past the last reading plus a span.
const MICROS_MASK: u64 = (1 << 52) - 1;

const _: () =
    assert!(Tick::Micros.max_now() + crate::clock::tick::MAX_FINE_SPAN_TICKS < MICROS_MASK);

/// See the module docs.
#[derive(Debug)]
pub(super) struct ReclaimHint {
    word: AtomicU64,
    /// The tick field's mask; also the tick that means "never".
    mask: u64,
}

/// A hint value read by a scan, to be replaced if nothing lowered it meanwhile.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen(u64);

impl ReclaimHint {
    /// Starts at tick 0: the first saturated miss scans.
    pub(super) fn new(tick: Tick) -> Self {
        Self {
            word: AtomicU64::new(0),
            mask: match tick {
                Tick::Millis => MILLIS_MASK,
                Tick::Micros => MICROS_MASK,
            },
        }
    }

    /// `Some` if a scan at `now` might free something.
    pub(super) fn due(&self, now: u64) -> Option<Seen> {
        // Acquire: pairs with the Release of `lower`, so a scan that reads a lowered hint also
        // reads the charge that preceded the lowering.
        let word = self.word.load(Ordering::Acquire);
        (now >= word & self.mask).then_some(Seen(word))
    }

    /// After a scan: no kept entry is full before `tick` (or ever, if `None`).
    pub(super) fn settle(&self, seen: Seen, tick: Option<u64>) {
        let tick = tick.unwrap_or(self.mask);
        let next = (seen.0 & !self.mask) | (tick & self.mask);
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
                let version = (word & !self.mask).wrapping_add(self.mask + 1);
                Some(version | (word & self.mask).min(tick & self.mask))
            });
    }

    /// The tick part, for tests and introspection.
    #[cfg(test)]
    pub(super) fn tick(&self) -> u64 {
        self.word.load(Ordering::Relaxed) & self.mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowering_during_a_scan_survives_it() {
        let hint = ReclaimHint::new(Tick::Millis);
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
        for (tick, mask) in [(Tick::Millis, MILLIS_MASK), (Tick::Micros, MICROS_MASK)] {
            let hint = ReclaimHint::new(tick);
            let seen = hint.due(0).unwrap();
            hint.settle(seen, None);
            assert!(hint.due(mask - 1).is_none());
            assert!(hint.due(tick.max_now()).is_none());
            hint.lower(tick.max_now());
            assert_eq!(hint.tick(), tick.max_now(), "the whole tick is kept");
        }
    }
}
