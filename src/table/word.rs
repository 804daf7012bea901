//! The slot word: state, generation, fingerprint and value in one `u64`, so every transition
//! is one CAS.
//!
//! ```text
//!  63  62 61          50 49          42 41                                       0
//! +------+--------------+--------------+------------------------------------------+
//! |STATE |  GENERATION  | FINGERPRINT  |                 VALUE                    |
//! +------+--------------+--------------+------------------------------------------+
//! ```
//!
//! | field         | bits   | meaning                                                      |
//! |---------------|--------|--------------------------------------------------------------|
//! | `VALUE`       | 0..42  | the owner's number: a bucket's `full_at` tick, or a count    |
//! | `FINGERPRINT` | 42..50 | 8 bits of the key's hash; 32 more live in the tag array      |
//! | `GENERATION`  | 50..62 | how many times the slot was claimed, modulo 2^12             |
//! | `STATE`       | 62..64 | `EMPTY`, `OWNED`, `INSERTING` or `MEMBER`                    |
//!
//! The generation makes every incarnation of a slot a different word: a claim bumps it, and an
//! `EMPTY` word keeps the generation of the incarnation it ended, so the next claim can bump
//! it again. A CAS from a word read in one incarnation therefore fails in any later one, until
//! the slot has been claimed 4096 times more (see "No ABA" in [`crate::table`]).
//!
//! The all-zero word is `EMPTY` at generation 0, so a freshly allocated table is empty.

use crate::clock::tick::TIME_BITS;

/// Width of the value field: the same 42 bits as a standalone bucket's time field.
pub(crate) const VALUE_BITS: u32 = TIME_BITS;
/// Mask of the value field; also the largest value a slot holds.
pub(crate) const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
/// Width of the in-word fingerprint.
pub(crate) const FP_BITS: u32 = 8;
const FP_SHIFT: u32 = VALUE_BITS;
/// Mask of the fingerprint, before shifting.
pub(crate) const FP_MASK: u32 = (1 << FP_BITS) - 1;
/// Width of the generation.
pub(crate) const GEN_BITS: u32 = 12;
const GEN_SHIFT: u32 = FP_SHIFT + FP_BITS;
/// Mask of the generation, before shifting.
pub(crate) const GEN_MASK: u32 = (1 << GEN_BITS) - 1;
const STATE_SHIFT: u32 = GEN_SHIFT + GEN_BITS;

const _: () = assert!(STATE_SHIFT + 2 == 64);

/// Where a slot is in its life. See the transition diagram in [`crate::table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Free for any inserter to claim.
    Empty = 0,
    /// Claimed by one inserter, which has not yet published its copy: only that inserter
    /// touches it, and only to publish it as `Inserting`.
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
    /// `EMPTY` at generation 0: every slot of a new table.
    pub(crate) const EMPTY: Word = Word(0);

    pub(crate) fn new(state: State, gen: u32, fp: u32, value: u64) -> Self {
        Word(
            ((state as u64) << STATE_SHIFT)
                | (u64::from(gen & GEN_MASK) << GEN_SHIFT)
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

    pub(crate) fn gen(self) -> u32 {
        // The mask keeps 12 bits, so the cast cannot truncate anything that matters.
        ((self.0 >> GEN_SHIFT) as u32) & GEN_MASK
    }

    pub(crate) fn fp(self) -> u32 {
        // The mask keeps 8 bits, so the cast cannot truncate anything that matters.
        ((self.0 >> FP_SHIFT) as u32) & FP_MASK
    }

    pub(crate) fn value(self) -> u64 {
        self.0 & VALUE_MASK
    }

    pub(crate) fn with_state(self, state: State) -> Self {
        Self::new(state, self.gen(), self.fp(), self.value())
    }

    pub(crate) fn with_value(self, value: u64) -> Self {
        Self::new(self.state(), self.gen(), self.fp(), value)
    }

    /// The `EMPTY` word that ends this incarnation: it keeps the generation.
    pub(crate) fn emptied(self) -> Self {
        Self::new(State::Empty, self.gen(), 0, 0)
    }

    /// The `OWNED` word of the next incarnation, claimed from this `EMPTY` word by a key with
    /// fingerprint `fp`: one generation later.
    pub(crate) fn claimed_by(self, fp: u32) -> Self {
        Self::new(State::Owned, self.gen().wrapping_add(1), fp, 0)
    }

    /// Whether this word is a copy (`Inserting` or `Member`) carrying fingerprint `fp`.
    pub(crate) fn is_copy_of(self, state: State, fp: u32) -> bool {
        self.state() == state && self.fp() == fp
    }

    /// Whether this word is the same incarnation as `other` (same generation and fingerprint;
    /// state and value may have moved on).
    pub(crate) fn same_incarnation(self, other: Word) -> bool {
        self.gen() == other.gen() && self.fp() == other.fp()
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

    #[test]
    fn a_claim_starts_a_new_generation_and_emptying_keeps_it() {
        let member = Word::new(State::Member, 7, 0xAB, 123);
        let empty = member.emptied();
        assert_eq!(
            (empty.state(), empty.gen(), empty.value()),
            (State::Empty, 7, 0)
        );
        let next = empty.claimed_by(0xAB);
        assert_eq!(
            (next.state(), next.gen(), next.fp()),
            (State::Owned, 8, 0xAB)
        );
        // The same key, value and state one incarnation later is a different word.
        assert_ne!(next.with_state(State::Member).with_value(123), member);
        let last = Word::new(State::Empty, GEN_MASK, 0, 0).claimed_by(1);
        assert_eq!(last.gen(), 0, "the generation wraps within its field");
    }

    proptest! {
        #![proptest_config(crate::check::proptest_config(256))]

        /// Every field round-trips and no field bleeds into another.
        #[test]
        fn fields_round_trip(state in 0u8..4, gen in any::<u32>(), fp in any::<u32>(), value in 0u64..=VALUE_MASK) {
            let state = match state { 0 => State::Empty, 1 => State::Owned, 2 => State::Inserting, _ => State::Member };
            let w = Word::new(state, gen, fp, value);
            prop_assert_eq!(w.state(), state);
            prop_assert_eq!(w.gen(), gen & GEN_MASK);
            prop_assert_eq!(w.fp(), fp & FP_MASK);
            prop_assert_eq!(w.value(), value);
            let v2 = value ^ 1;
            prop_assert_eq!(w.with_value(v2).state(), state);
            prop_assert_eq!(w.with_value(v2).fp(), fp & FP_MASK);
            prop_assert_eq!(w.with_state(State::Member).value(), value);
        }
    }
}
