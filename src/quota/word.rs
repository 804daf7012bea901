//! One counter word: which window it belongs to, and how much was counted in it, in 32 bits.
//!
//! Drawn in `docs/design.md` §5 ("The word").
//!
//! | field   | bits   | range                 | meaning                                        |
//! |---------|--------|-----------------------|------------------------------------------------|
//! | `COUNT` | 0..24  | `0 ..= MAX_COUNT`     | events, or bytes, counted in the stamped window |
//! | `STAMP` | 24..32 | `0 ..= 255`           | the window's epoch (`now / window`) mod 256      |
//!
//! `MAX_COUNT` is 2^24 − 1 = 16,777,215, which is why no limit may exceed it; a count never
//! exceeds its limit (every write raises a word to at most `estimate + charge ≤ limit`), so it
//! never reaches the stamp's bits. The all-zero word is "window 0 (mod 256), nothing counted",
//! which reads as empty in every window.
//!
//! A word whose stamp is not the current window's reads as empty: that is how a window rolls
//! without a lock or a sweep. The stamp repeats every [`STAMP_PERIOD`] windows, so a word left
//! untouched for an exact multiple of 256 windows reads its old count as current (see "Stamp
//! aliasing" in the [module documentation](super)): an over-count, never an under-count.

/// Width of the `COUNT` field.
pub(crate) const COUNT_BITS: u32 = 24;
/// Mask of the `COUNT` field, which starts at bit 0.
pub(crate) const COUNT_MASK: u32 = (1 << COUNT_BITS) - 1;
/// The largest count a word holds, and so the largest limit a [`Quota`](super::Quota) accepts.
pub(crate) const MAX_COUNT: u32 = COUNT_MASK;
/// Width of the `STAMP` field.
pub(crate) const STAMP_BITS: u32 = 32 - COUNT_BITS;
/// Where the `STAMP` field starts.
pub(crate) const STAMP_SHIFT: u32 = COUNT_BITS;
/// Mask of the `STAMP` field once shifted down.
pub(crate) const STAMP_MASK: u32 = (1 << STAMP_BITS) - 1;
/// Windows after which a stamp repeats: 256.
pub(crate) const STAMP_PERIOD: u64 = 1 << STAMP_BITS;

const _: () = assert!(STAMP_BITS == 8 && STAMP_SHIFT + STAMP_BITS == 32);

/// The stamp of window `epoch`: the epoch mod [`STAMP_PERIOD`].
#[inline]
pub(crate) fn stamp_of(epoch: u64) -> u32 {
    // Reduced below 256 first, so the narrowing keeps every bit that is left.
    (epoch % STAMP_PERIOD) as u32
}

/// A word holding `count` (at most [`MAX_COUNT`]) in the window stamped `stamp`.
#[inline]
pub(crate) fn pack(stamp: u32, count: u32) -> u32 {
    debug_assert!(count <= MAX_COUNT && stamp <= STAMP_MASK);
    ((stamp & STAMP_MASK) << STAMP_SHIFT) | (count & COUNT_MASK)
}

/// The word's stamp.
#[inline]
pub(crate) fn stamp(word: u32) -> u32 {
    (word >> STAMP_SHIFT) & STAMP_MASK
}

/// The word's count, whatever its window.
#[inline]
pub(crate) fn count(word: u32) -> u32 {
    word & COUNT_MASK
}

/// What the word counts in the window stamped `stamp`: its count if it belongs to that window,
/// otherwise `None` (the word belongs to another window and reads as empty in this one).
#[inline]
pub(crate) fn count_in(word: u32, stamp: u32) -> Option<u32> {
    (self::stamp(word) == stamp).then_some(count(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_at_their_extremes() {
        for s in [0, 1, 127, 128, 254, 255] {
            for c in [0, 1, 1_200, MAX_COUNT - 1, MAX_COUNT] {
                let w = pack(s, c);
                assert_eq!((stamp(w), count(w)), (s, c), "stamp {s} count {c}");
                assert_eq!(count_in(w, s), Some(c));
                assert_eq!(count_in(w, (s + 1) & STAMP_MASK), None);
            }
        }
    }

    #[test]
    fn the_split_is_the_documented_one() {
        assert_eq!(MAX_COUNT, 16_777_215);
        assert_eq!(STAMP_PERIOD, 256);
        assert_eq!(pack(0xAB, 0x12_3456), 0xAB12_3456);
        assert_eq!(pack(0xFF, MAX_COUNT), u32::MAX);
    }

    #[test]
    fn stamps_repeat_every_period_and_only_then() {
        assert_eq!(stamp_of(0), 0);
        assert_eq!(stamp_of(255), 255);
        assert_eq!(stamp_of(256), 0);
        assert_eq!(stamp_of(u64::MAX), 255);
        for e in 0..600u64 {
            assert_ne!(stamp_of(e), stamp_of(e + 1));
            assert_eq!(stamp_of(e), stamp_of(e + STAMP_PERIOD));
        }
    }

    #[test]
    fn the_zero_word_is_empty_in_every_window() {
        for s in 0..=STAMP_MASK {
            assert_eq!(count_in(0, s).unwrap_or(0), 0);
        }
    }
}
