//! Keys: how an identity and class become a key, its window's two blocks and its fingerprint.

use super::geometry::Shape;
use super::word::FP_MASK;
use crate::actor::{HashedActor, Salt};
use std::hash::Hash;

/// Where a key lives and how it is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    /// First slot of the key's first block.
    pub(crate) home: usize,
    /// The table's 64 bits, kept to derive the second block ([`Key::second`]) only when a
    /// lookup gets past the first.
    pub(crate) hash: u64,
    /// 8 bits kept in the slot word.
    pub(crate) fp: u32,
    /// 32 bits kept in the tag array.
    pub(crate) tag: u32,
}

/// The per-table derivation of a key from a [`HashedActor`] (see [`crate::actor`]).
#[derive(Clone)]
pub(crate) struct KeyHasher {
    salt: Salt,
    /// Blocks in the table.
    blocks: usize,
    /// Slots in a block.
    block: usize,
    /// How many high bits of a key's tag hold its class (0 for a table of one class): enough
    /// for the classes the table was built for, so a slot's class can be read off its tag.
    class_bits: u32,
}

impl std::fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The salts are part of the defence against aimed collisions: never print them.
        f.debug_struct("KeyHasher").finish_non_exhaustive()
    }
}

impl KeyHasher {
    /// A hasher with fresh random salts; its shape is set by [`KeyHasher::for_shape`].
    pub(crate) fn random() -> Self {
        Self::with_salt(Salt::random())
    }

    /// A hasher with given salts, for tests that need reproducible placement.
    #[cfg(any(test, admit_loom, fuzzing))]
    pub(crate) fn with_keys(k0: u64, k1: u64) -> Self {
        Self::with_salt(Salt::fixed(k0, k1))
    }

    fn with_salt(salt: Salt) -> Self {
        Self {
            salt,
            blocks: 1,
            block: 1,
            class_bits: 0,
        }
    }

    /// The same salts, for a table of the given shape.
    pub(crate) fn for_shape(&self, shape: Shape) -> Self {
        Self {
            blocks: shape.blocks,
            block: shape.block,
            ..self.clone()
        }
    }

    /// The same salts, for a table holding keys of `classes` classes (at most 2^16): each
    /// key's tag then carries its class in its high bits (see "Keys" in the module docs).
    pub(crate) fn for_classes(&self, classes: usize) -> Self {
        let highest = u32::try_from(classes.saturating_sub(1)).unwrap_or(u32::MAX);
        Self {
            class_bits: (u32::BITS - highest.leading_zeros()).min(16),
            ..self.clone()
        }
    }

    /// The class a key's tag carries (0 in a table of one class).
    #[inline]
    pub(crate) fn class_of(&self, tag: u32) -> usize {
        if self.class_bits == 0 {
            0
        } else {
            // A u32 shifted right fits a usize on every platform this crate builds for.
            usize::try_from(tag >> (u32::BITS - self.class_bits)).unwrap_or(usize::MAX)
        }
    }

    /// The key of `(identity, class)`.
    #[inline]
    pub(crate) fn key<K: Hash + ?Sized>(&self, identity: &K, class: u16) -> Key {
        self.key_of(&HashedActor::new(identity), class)
    }

    /// The key of `(actor, class)`, the actor hashed already.
    #[inline]
    pub(crate) fn key_of(&self, actor: &HashedActor, class: u16) -> Key {
        self.key_of_class_hash(self.hash_of(actor, class), class)
    }

    /// This table's 64 bits for `(identity, class)`, before they are split into a [`Key`]
    /// (they do not depend on the table's size).
    #[inline]
    pub(crate) fn hash<K: Hash + ?Sized>(&self, identity: &K, class: u16) -> u64 {
        self.hash_of(&HashedActor::new(identity), class)
    }

    /// This table's 64 bits for `(actor, class)`. The class is a fixed-width `u16` mixed into
    /// the derivation, so `(identity, class)` pairs never collide by concatenation.
    #[inline]
    pub(crate) fn hash_of(&self, actor: &HashedActor, class: u16) -> u64 {
        self.salt.derive(actor, class)
    }

    /// The key a [`KeyHasher::hash`] of class 0 stands for in this table.
    #[inline]
    pub(crate) fn key_of_hash(&self, hash: u64) -> Key {
        self.key_of_class_hash(hash, 0)
    }

    /// The key a [`KeyHasher::hash`] of `class` stands for in this table: the tag's high
    /// `class_bits` are the class, the rest hash bits.
    #[inline]
    pub(crate) fn key_of_class_hash(&self, hash: u64, class: u16) -> Key {
        // Branch-free: with no class bits, the class shifts out of the low 32 bits, which the
        // cast keeps on purpose (the tag is bits 0..32 of the hash, then the class above them).
        let low = u64::from(hash as u32);
        let tag =
            ((low >> self.class_bits) | (u64::from(class) << (u32::BITS - self.class_bits))) as u32;
        Key {
            // The first block: the high bits of the hash scaled to `blocks` (a multiply-shift,
            // so the table need not be a power of two); for every table the cap allows (under
            // 2^19 blocks) it is decided by bits well above the fingerprint and the tag.
            home: scale(hash, self.blocks) * self.block,
            hash,
            tag,
            // The cast keeps bits 32..64 on purpose: the fingerprint is bits 32..40.
            fp: ((hash >> 32) as u32) & FP_MASK,
        }
    }
}

/// Odd multiplier that derives the second block from the table's 64 bits. Fixed: the bits it
/// multiplies are already secret and drawn per table (see [`crate::actor`]).
const SECOND_SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

impl Key {
    /// First slot of the key's second block in a table of `blocks >= 2` blocks of `block`
    /// slots: the hash folded through [`SECOND_SPREAD`], so it depends on all 64 bits, then
    /// scaled; moved on by one block if it fell on the first.
    // Out of line, so that the compiler cannot hoist it onto every lookup (most end in the
    // first block).
    #[inline(never)]
    pub(crate) fn second(&self, blocks: usize, block: usize) -> usize {
        let product = u128::from(self.hash) * u128::from(SECOND_SPREAD);
        // The casts keep the low and the high half of the product, on purpose.
        let mixed = (product as u64) ^ ((product >> 64) as u64);
        let second = scale(mixed, blocks) * block;
        if second != self.home {
            second
        } else if second + block < blocks * block {
            second + block
        } else {
            0
        }
    }
}

/// `hash` scaled to `0..n`: the high half of `hash × n`.
#[inline]
fn scale(hash: u64, n: usize) -> usize {
    let n = u64::try_from(n).unwrap_or(u64::MAX);
    // The high half of a 64×64 product of `hash` and `n` is below `n`, so it fits a usize.
    usize::try_from((u128::from(hash) * u128::from(n)) >> 64).unwrap_or(0)
}
