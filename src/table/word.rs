//! Slot words: the state, generation, fingerprint and value packed in one `AtomicU64`.

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

/// The state bit that `Inserting` and `Member` share and `Empty` and `Owned` lack: a word is a
/// copy of some key exactly when it is set.
const COPY_BIT: u64 = 1 << 63;
const _: () = assert!((State::Inserting as u64) >> 1 == 1 && (State::Member as u64) >> 1 == 1);
const _: () = assert!((State::Empty as u64) >> 1 == 0 && (State::Owned as u64) >> 1 == 0);
/// The bits [`Copies::of`] reads: the copy bit and the fingerprint.
const COPY_MASK: u64 = COPY_BIT | ((FP_MASK as u64) << FP_SHIFT);

/// What a scan looks for: copies (`Inserting` or `Member`) carrying one fingerprint, told from
/// any other word by one masked compare, so a scan reads a slot that is not one in a load, an
/// xor and a test (`Empty` words carry fingerprint 0, so without the copy bit a key of
/// fingerprint 0 would match every free slot).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copies(u64);

/// What a lookup takes at once: `Member` words carrying one fingerprint, told from any other
/// word by one masked compare of both state bits and the fingerprint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Members(u64);

/// The bits [`Members::of`] reads: both state bits and the fingerprint.
const MEMBER_MASK: u64 = (0b11 << STATE_SHIFT) | ((FP_MASK as u64) << FP_SHIFT);

impl Members {
    /// Members carrying fingerprint `fp`.
    #[inline(always)]
    pub(crate) fn of(fp: u32) -> Self {
        Self(((State::Member as u64) << STATE_SHIFT) | (u64::from(fp & FP_MASK) << FP_SHIFT))
    }

    /// Whether `word` is a `Member` word with this fingerprint.
    #[inline(always)]
    pub(crate) fn matches(self, word: Word) -> bool {
        (word.0 ^ self.0) & MEMBER_MASK == 0
    }
}

impl Copies {
    /// Copies carrying fingerprint `fp`.
    #[inline(always)]
    pub(crate) fn of(fp: u32) -> Self {
        Self(COPY_BIT | (u64::from(fp & FP_MASK) << FP_SHIFT))
    }

    /// Whether `word` is an `Inserting` or `Member` word with this fingerprint.
    #[inline(always)]
    pub(crate) fn matches(self, word: Word) -> bool {
        (word.0 ^ self.0) & COPY_MASK == 0
    }
}

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

    /// Whether this slot is free to claim (`Empty`): its two state bits are both clear.
    #[inline(always)]
    pub(crate) fn is_empty(self) -> bool {
        self.0 >> STATE_SHIFT == State::Empty as u64
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
