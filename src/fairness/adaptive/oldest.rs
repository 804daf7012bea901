//! The age of the oldest op in flight, without a lock: coarse time buckets of counts.
//!
//! A writer that stalls completely decides nothing, so it sends no samples; what still tells
//! is how long the ops in flight have waited. Time is cut into epochs of `2^shift` ns (a power
//! of two near a quarter of the target, fixed at build), and [`BUCKETS`] words count the ops in
//! flight by the epoch of their admission, ring-wise: epoch `e` is counted in bucket
//! `e % BUCKETS`. Each word holds the epoch it counts (its tag, 40 bits) and the count (24
//! bits), changed together by one CAS, so a reader never pairs a count with another epoch's tag.
//!
//! An admission in epoch `e` adds one to its bucket: an empty bucket takes the tag `e`; a bucket
//! still counting an older epoch (an op has been in flight for a whole ring, `BUCKETS`
//! epochs) keeps the older tag, so the merged ops look as old as the oldest of them, never
//! younger. A release subtracts one from the bucket of its admission's epoch (the permit keeps
//! its admission reading). The oldest op's age is then at least `now − (tag + 1) × 2^shift`
//! for the oldest tag of a non-empty bucket: under-estimated by less than one epoch, or
//! over-estimated only while an op older than a whole ring is in flight, itself a stall.

use crate::sync::atomic::{AtomicU64, Ordering};

/// Buckets in the ring: with epochs of a quarter target, four targets of history.
pub(crate) const BUCKETS: usize = 16;
/// Bits of a bucket's count (at most `MAX_TOTAL_LIMIT` ops are in flight).
const COUNT_BITS: u32 = 24;
const COUNT: u64 = (1 << COUNT_BITS) - 1;
/// Bits of a bucket's tag: the epoch, modulo 2^40 (at a 2.5 µs epoch, a month).
const TAG: u64 = (1 << (64 - COUNT_BITS)) - 1;

/// The ring of counts by admission epoch.
#[derive(Debug)]
pub(crate) struct Ages {
    buckets: [AtomicU64; BUCKETS],
    /// Epochs are `2^shift` ns long.
    shift: u32,
}

impl Ages {
    /// A ring of epochs near a quarter of `target_ns` (a power of two, at least 1 µs).
    pub(crate) fn new(target_ns: u64) -> Self {
        let quarter = (target_ns / 4).max(1 << 10);
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            shift: quarter.ilog2(),
        }
    }

    /// The bucket of a reading, and its tag.
    #[inline]
    fn place(&self, now: u64) -> (Option<&AtomicU64>, u64) {
        let epoch = now >> self.shift;
        (self.buckets.get(epoch as usize % BUCKETS), epoch & TAG)
    }

    /// Counts an op admitted at `now`.
    #[inline]
    pub(crate) fn admit(&self, now: u64) {
        let (Some(bucket), tag) = self.place(now) else {
            return;
        };
        // Relaxed: the word is read only for the age, which orders nothing; the CAS keeps the
        // tag and count one pair.
        let _ = bucket.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
            let count = word & COUNT;
            let held = word >> COUNT_BITS;
            // Keep the older tag (wrapping: a tag ahead of ours by less than half the tag
            // space is newer).
            let older = if count == 0 || held.wrapping_sub(tag) & TAG <= TAG / 2 {
                tag
            } else {
                held
            };
            Some(older << COUNT_BITS | (count + 1).min(COUNT))
        });
    }

    /// Uncounts an op admitted at `since`.
    #[inline]
    pub(crate) fn release(&self, since: u64) {
        if let (Some(bucket), _) = self.place(since) {
            // Relaxed: as in `admit`. The count holds this op's own one, so it does not borrow
            // from the tag.
            bucket.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The age at `now` of the oldest op in flight, at least its true age less one epoch
    /// (0 if none is).
    #[cold]
    pub(crate) fn oldest(&self, now: u64) -> u64 {
        let now_epoch = (now >> self.shift) & TAG;
        let epochs = self
            .buckets
            .iter()
            // Relaxed: a snapshot; each word's tag and count are one pair.
            .map(|b| b.load(Ordering::Relaxed))
            .filter(|word| word & COUNT > 0)
            .map(|word| now_epoch.wrapping_sub(word >> COUNT_BITS) & TAG)
            .filter(|&age| age <= TAG / 2)
            .max();
        match epochs {
            Some(epochs) => epochs.saturating_sub(1).saturating_mul(1 << self.shift),
            None => 0,
        }
    }
}
