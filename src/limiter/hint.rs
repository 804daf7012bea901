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
//!
//! # Segments: the worst single decision
//!
//! A scan of the whole table is O(slots). At a large cap that is one request paying for
//! hundreds of thousands of loads. So the hint is kept per *segment* of [`SEGMENT_SLOTS`]
//! consecutive slots: each segment's word is a hint about its own entries alone, kept by exactly
//! the protocol above (a scan of the segment settles it, a newborn entry lowers the word of the
//! segment that holds its slot). A saturated miss scans at most one segment: the one that
//! holds its key's home block, if that segment's hint is due. Keys are placed by the keyed
//! hash, so the misses of a flood fall on every segment alike (no client can aim them), each
//! miss reads one hint word and writes nothing it would not write anyway, and a segment whose
//! entries come due is scanned by the next miss that lands in it. A miss that scans its own
//! segment frees places beside its own window. Entries never move between slots, so a segment's
//! hint bounds its entries as the whole table's did. A table of at most one segment (every cap
//! up to about 6,500 at the default geometry of 2.5 slots an entry) has one word: exactly the
//! protocol above. The idle sweep
//! ([`Limiter::reclaim_full_at`](crate::Limiter::reclaim_full_at)) still scans every segment.

use crate::clock::tick::{Tick, TIME_MASK};
use crate::sync::atomic::{AtomicU64, Ordering};
use std::ops::Range;

/// Slots per segment: 16,384. A scan loads each slot and judges each member (about 6,500 at
/// the default geometry): at most about 650,000 instructions, with every member full and
/// removed.
pub(super) const SEGMENT_SLOTS: usize = 1 << 14;

/// The tick field in milliseconds.
const MILLIS_MASK: u64 = TIME_MASK;
/// The tick field in microseconds: 2^52 µs is 142 years, past the last reading plus a span.
const MICROS_MASK: u64 = (1 << 52) - 1;

const _: () =
    assert!(Tick::Micros.max_now() + crate::clock::tick::MAX_FINE_SPAN_TICKS < MICROS_MASK);

/// See the module docs.
#[derive(Debug)]
pub(super) struct ReclaimHint {
    /// One hint word per segment.
    words: Box<[AtomicU64]>,
    /// The tick field's mask; also the tick that means "never".
    mask: u64,
    /// log2 of a segment's slots.
    shift: u32,
}

/// A hint value read by a scan of one segment, to be replaced if nothing lowered it meanwhile.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen {
    segment: usize,
    word: u64,
}

impl Seen {
    /// The segment it was read from.
    pub(super) fn segment(&self) -> usize {
        self.segment
    }
}

impl ReclaimHint {
    /// A hint for a table of `slots` slots in segments of [`SEGMENT_SLOTS`], every word at
    /// tick 0: the first saturated miss scans.
    pub(super) fn new(tick: Tick, slots: usize) -> Self {
        Self::segmented(tick, slots, SEGMENT_SLOTS)
    }

    /// [`ReclaimHint::new`] with segments of `segment` slots (a power of two).
    pub(super) fn segmented(tick: Tick, slots: usize, segment: usize) -> Self {
        let segments = slots.div_ceil(segment.max(1)).max(1);
        Self {
            words: (0..segments).map(|_| AtomicU64::new(0)).collect(),
            mask: match tick {
                Tick::Millis => MILLIS_MASK,
                Tick::Micros => MICROS_MASK,
            },
            shift: segment.max(1).trailing_zeros(),
        }
    }

    /// How many segments.
    pub(super) fn segments(&self) -> usize {
        self.words.len()
    }

    /// The slots of `segment`, within a table of `slots` slots.
    pub(super) fn slots_of(&self, segment: usize, slots: usize) -> Range<usize> {
        let start = (segment << self.shift).min(slots);
        start..((segment + 1) << self.shift).min(slots)
    }

    /// `Some` if a scan of `segment` at `now` might free something.
    pub(super) fn due(&self, segment: usize, now: u64) -> Option<Seen> {
        // Acquire: pairs with the Release of `lower`, so a scan that reads a lowered hint also
        // reads the charge that preceded the lowering.
        let word = self.words.get(segment)?.load(Ordering::Acquire);
        (now >= word & self.mask).then_some(Seen { segment, word })
    }

    /// The segment that holds `slot`.
    pub(super) fn segment_of(&self, slot: usize) -> usize {
        slot >> self.shift
    }

    /// After a scan of `seen`'s segment: no kept entry of it is full before `tick` (or ever,
    /// if `None`).
    pub(super) fn settle(&self, seen: Seen, tick: Option<u64>) {
        let Some(word) = self.words.get(seen.segment) else {
            return;
        };
        let tick = tick.unwrap_or(self.mask);
        let next = (seen.word & !self.mask) | (tick & self.mask);
        // AcqRel/Relaxed: success replaces exactly the value read, so a lowering in between
        // (which bumps the version) makes it fail; on failure the lower value stays.
        let _ = word.compare_exchange(seen.word, next, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// A newborn entry at `slot` will be full at `tick`: lower its segment's hint to it,
    /// bumping the version.
    pub(super) fn lower(&self, slot: usize, tick: u64) {
        if let Some(word) = self.words.get(self.segment_of(slot)) {
            self.lower_word(word, tick);
        }
    }

    /// Every segment's hint lowered to `tick` (a change of limits that may bring any entry
    /// back sooner).
    pub(super) fn lower_all(&self, tick: u64) {
        for word in self.words.iter() {
            self.lower_word(word, tick);
        }
    }

    fn lower_word(&self, word: &AtomicU64, tick: u64) {
        // Release: a scan that reads this value also sees the charge sequenced before it.
        // Relaxed load: fetch_update's CAS loop revalidates every value it reads.
        let _ = word.fetch_update(Ordering::Release, Ordering::Relaxed, |word| {
            let version = (word & !self.mask).wrapping_add(self.mask + 1);
            Some(version | (word & self.mask).min(tick & self.mask))
        });
    }

    /// The tick part of `segment`'s word, for tests and introspection.
    #[cfg(test)]
    pub(super) fn tick_of(&self, segment: usize) -> u64 {
        self.words
            .get(segment)
            .map_or(self.mask, |word| word.load(Ordering::Relaxed) & self.mask)
    }

    /// The tick part of the first segment's word.
    #[cfg(test)]
    pub(super) fn tick(&self) -> u64 {
        self.tick_of(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowering_during_a_scan_survives_it() {
        let hint = ReclaimHint::new(Tick::Millis, 1);
        let seen = hint.due(0, 10).unwrap();
        hint.lower(0, 50);
        hint.settle(seen, Some(500));
        assert_eq!(
            hint.tick(),
            0,
            "the scan must not overwrite a concurrent lowering"
        );
        let seen = hint.due(0, 10).unwrap();
        hint.settle(seen, Some(500));
        assert_eq!(hint.tick(), 500);
        assert!(hint.due(0, 499).is_none());
        assert!(hint.due(0, 500).is_some());
        hint.lower(0, 200);
        assert_eq!(hint.tick(), 200);
        hint.lower(0, 300);
        assert_eq!(hint.tick(), 200, "lowering never raises");
    }

    #[test]
    fn an_empty_scan_means_never() {
        for (tick, mask) in [(Tick::Millis, MILLIS_MASK), (Tick::Micros, MICROS_MASK)] {
            let hint = ReclaimHint::new(tick, 1);
            let seen = hint.due(0, 0).unwrap();
            hint.settle(seen, None);
            assert!(hint.due(0, mask - 1).is_none());
            assert!(hint.due(0, tick.max_now()).is_none());
            hint.lower(0, tick.max_now());
            assert_eq!(hint.tick(), tick.max_now(), "the whole tick is kept");
        }
    }
}
