//! One bucket's word: which window it belongs to, and how many events and bytes were counted
//! in it, in 64 bits.
//!
//! Drawn in `docs/design.md` §5 ("The word").
//!
//! | field    | bits   | range                 | meaning                                          |
//! |----------|--------|-----------------------|--------------------------------------------------|
//! | `EVENTS` | 0..24  | `0 ..= MAX_COUNT`     | events counted in the stamped window             |
//! | `BYTES`  | 24..48 | `0 ..= MAX_COUNT`     | bytes counted in the stamped window              |
//! | `STAMP`  | 48..64 | `0 ..= 65,535`        | the window's epoch (`now / window`) mod 65,536   |
//!
//! `MAX_COUNT` is 2^24 − 1 = 16,777,215, which is why no limit may exceed it; a count never
//! exceeds its limit (every write raises a field to at most `estimate + charge ≤ limit`), so
//! it never reaches the next field's bits. The all-zero word is "window 0 (mod 65,536),
//! nothing counted", which reads as empty in every window.
//!
//! Both counts and the stamp share one word so that a charge writes each of its rows with one
//! CAS: the stamp and the two counts of a row always change together.
//!
//! A word whose stamp is not the current window's reads as empty: that is how a window rolls
//! without a lock or a sweep. The stamp repeats every [`STAMP_PERIOD`] windows, so a word left
//! untouched for an exact multiple of 65,536 windows reads its old counts as current (see
//! "Stamp aliasing" in the [module documentation](super)): an over-count, never an
//! under-count.

/// Width of each count field.
pub(crate) const COUNT_BITS: u32 = 24;
/// Mask of a count field once shifted down.
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// The largest count a field holds, and so the largest limit a [`Quota`](super::Quota)
/// accepts.
pub(crate) const MAX_COUNT: u32 = (1 << COUNT_BITS) - 1;
/// Where the `BYTES` field starts (`EVENTS` starts at bit 0).
const BYTES_SHIFT: u32 = COUNT_BITS;
/// Where the `STAMP` field starts.
const STAMP_SHIFT: u32 = 2 * COUNT_BITS;
/// Width of the `STAMP` field.
pub(crate) const STAMP_BITS: u32 = 64 - STAMP_SHIFT;
/// Mask of the `STAMP` field once shifted down.
const STAMP_MASK: u64 = (1 << STAMP_BITS) - 1;
/// Windows after which a stamp repeats: 65,536.
pub(crate) const STAMP_PERIOD: u64 = 1 << STAMP_BITS;

const _: () = assert!(STAMP_BITS == 16 && STAMP_SHIFT + STAMP_BITS == 64);

/// The stamp of window `epoch`: the epoch mod [`STAMP_PERIOD`].
#[inline]
pub(crate) fn stamp_of(epoch: u64) -> u64 {
    epoch % STAMP_PERIOD
}

/// A word holding `events` and `bytes` (each at most [`MAX_COUNT`]) in the window stamped
/// `stamp`.
#[inline]
pub(crate) fn pack(stamp: u64, events: u32, bytes: u32) -> u64 {
    debug_assert!(events <= MAX_COUNT && bytes <= MAX_COUNT && stamp <= STAMP_MASK);
    ((stamp & STAMP_MASK) << STAMP_SHIFT)
        | ((u64::from(bytes) & COUNT_MASK) << BYTES_SHIFT)
        | (u64::from(events) & COUNT_MASK)
}

/// What adding `events` and `bytes` to a word's counts adds to the word, when neither count
/// then passes [`MAX_COUNT`] (so no field carries into the next).
#[inline]
pub(crate) fn delta(events: u32, bytes: u32) -> u64 {
    debug_assert!(events <= MAX_COUNT && bytes <= MAX_COUNT);
    // No mask: the caller has bounded both by a limit, so each stays in its field.
    (u64::from(bytes) << BYTES_SHIFT) | u64::from(events)
}

/// The word's stamp.
#[inline]
pub(crate) fn stamp(word: u64) -> u64 {
    word >> STAMP_SHIFT
}

/// The word's events count, whatever its window.
#[inline]
pub(crate) fn events(word: u64) -> u32 {
    // The mask keeps 24 bits, so the narrowing keeps every one of them.
    (word & COUNT_MASK) as u32
}

/// The word's bytes count, whatever its window.
#[inline]
pub(crate) fn bytes(word: u64) -> u32 {
    // As in `events`.
    ((word >> BYTES_SHIFT) & COUNT_MASK) as u32
}

/// What the word counts (events, bytes) in the window stamped `stamp`: its counts if it
/// belongs to that window, otherwise `None` (it belongs to another window and reads as empty
/// in this one).
#[inline]
pub(crate) fn counts_in(word: u64, stamp: u64) -> Option<(u32, u32)> {
    (self::stamp(word) == stamp).then(|| (events(word), bytes(word)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_at_their_extremes() {
        let counts = [0, 1, 1_200, MAX_COUNT - 1, MAX_COUNT];
        for s in [0, 1, 255, 256, 32_767, 65_534, 65_535] {
            for e in counts {
                for b in counts {
                    let w = pack(s, e, b);
                    assert_eq!((stamp(w), events(w), bytes(w)), (s, e, b), "{s} {e} {b}");
                    assert_eq!(counts_in(w, s), Some((e, b)));
                    assert_eq!(counts_in(w, (s + 1) & STAMP_MASK), None);
                }
            }
        }
    }

    #[test]
    fn the_split_is_the_documented_one() {
        assert_eq!(MAX_COUNT, 16_777_215);
        assert_eq!(STAMP_PERIOD, 65_536);
        assert_eq!(pack(0xABCD, 0x12_3456, 0x78_9ABC), 0xABCD_789A_BC12_3456);
        assert_eq!(pack(0xFFFF, MAX_COUNT, MAX_COUNT), u64::MAX);
    }

    #[test]
    fn a_delta_adds_field_by_field() {
        let w = pack(7, 1_000, MAX_COUNT - 5);
        assert_eq!(w + delta(3, 5), pack(7, 1_003, MAX_COUNT));
    }

    #[test]
    fn stamps_repeat_every_period_and_only_then() {
        assert_eq!(stamp_of(0), 0);
        assert_eq!(stamp_of(65_535), 65_535);
        assert_eq!(stamp_of(65_536), 0);
        assert_eq!(stamp_of(u64::MAX), 65_535);
        for e in (0..600u64).chain(65_000..66_000) {
            assert_ne!(stamp_of(e), stamp_of(e + 1));
            assert_eq!(stamp_of(e), stamp_of(e + STAMP_PERIOD));
        }
    }

    #[test]
    fn the_zero_word_is_empty_in_every_window() {
        for s in 0..=STAMP_MASK {
            assert_eq!(counts_in(0, s).unwrap_or((0, 0)), (0, 0));
        }
    }
}
