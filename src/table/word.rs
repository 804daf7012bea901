//! The slot word: state, fingerprint and value in one `u64`, so every transition is one CAS.
//!
//! ```text
//!  63  62 61                 42 41                                       0
//! +------+---------------------+------------------------------------------+
//! |STATE |     FINGERPRINT     |                 VALUE                    |
//! +------+---------------------+------------------------------------------+
//! ```
//!
//! | field         | bits   | meaning                                                      |
//! |---------------|--------|--------------------------------------------------------------|
//! | `VALUE`       | 0..42  | the owner's number: a bucket's `full_at` tick, or a count    |
//! | `FINGERPRINT` | 42..62 | 20 bits of the key's hash; 32 more live in the tag array     |
//! | `STATE`       | 62..64 | `EMPTY`, `OWNED`, `INSERTING` or `MEMBER`                    |
//!
//! The all-zero word is `EMPTY`, so a freshly allocated table is empty.

use crate::bucket::gcra::TIME_BITS;

/// Width of the value field: the same 42 bits as a standalone bucket's time field.
pub(crate) const VALUE_BITS: u32 = TIME_BITS;
/// Mask of the value field; also the largest value a slot holds.
pub(crate) const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
/// Width of the in-word fingerprint.
pub(crate) const FP_BITS: u32 = 20;
const FP_SHIFT: u32 = VALUE_BITS;
/// Mask of the fingerprint, before shifting.
pub(crate) const FP_MASK: u32 = (1 << FP_BITS) - 1;
const STATE_SHIFT: u32 = VALUE_BITS + FP_BITS;

const _: () = assert!(STATE_SHIFT + 2 == 64);

/// Where a slot is in its life. See the transition diagram in [`crate::table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Free for any inserter to claim.
    Empty = 0,
    /// Claimed by one inserter and not (or no longer) a copy of any key: only that inserter
    /// touches it, and only to free it or publish it as `Inserting`.
    Owned = 1,
    /// A copy of a key racing to become its member; never charged.
    Inserting = 2,
    /// The one live entry of its key.
    Member = 3,
}

/// A slot word, decoded on demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(pub(crate) u64);

impl Word {
    pub(crate) const EMPTY: Word = Word(0);

    pub(crate) fn new(state: State, fp: u32, value: u64) -> Self {
        Word(
            ((state as u64) << STATE_SHIFT)
                | (u64::from(fp & FP_MASK) << FP_SHIFT)
                | (value & VALUE_MASK),
        )
    }

    pub(crate) fn state(self) -> State {
        match self.0 >> STATE_SHIFT {
            0 => State::Empty,
            1 => State::Owned,
            2 => State::Inserting,
            _ => State::Member,
        }
    }

    pub(crate) fn fp(self) -> u32 {
        // The mask keeps 20 bits, so the cast cannot truncate anything that matters.
        ((self.0 >> FP_SHIFT) as u32) & FP_MASK
    }

    pub(crate) fn value(self) -> u64 {
        self.0 & VALUE_MASK
    }

    pub(crate) fn with_state(self, state: State) -> Self {
        Self::new(state, self.fp(), self.value())
    }

    pub(crate) fn with_value(self, value: u64) -> Self {
        Self::new(self.state(), self.fp(), value)
    }

    /// Whether this word is a copy (`Inserting` or `Member`) carrying fingerprint `fp`.
    pub(crate) fn is_copy_of(self, state: State, fp: u32) -> bool {
        self.state() == state && self.fp() == fp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_is_all_zero() {
        assert_eq!(Word::EMPTY.0, 0);
        assert_eq!(Word::EMPTY.state(), State::Empty);
    }

    proptest! {
        #![proptest_config(crate::check::proptest_config(256))]

        /// Every field round-trips and no field bleeds into another.
        #[test]
        fn fields_round_trip(state in 0u8..4, fp in any::<u32>(), value in 0u64..=VALUE_MASK) {
            let state = match state { 0 => State::Empty, 1 => State::Owned, 2 => State::Inserting, _ => State::Member };
            let w = Word::new(state, fp, value);
            prop_assert_eq!(w.state(), state);
            prop_assert_eq!(w.fp(), fp & FP_MASK);
            prop_assert_eq!(w.value(), value);
            let v2 = value ^ 1;
            prop_assert_eq!(w.with_value(v2).state(), state);
            prop_assert_eq!(w.with_value(v2).fp(), fp & FP_MASK);
            prop_assert_eq!(w.with_state(State::Member).value(), value);
        }
    }
}
