//! From an identity (any `Hash` value) and a class to a slot window and a fingerprint.
//!
//! The identity is hashed exactly as its [`Hash`] impl feeds it, never parsed or normalised,
//! with SipHash-1-3 under two keys drawn from the OS per table (see [`crate::entropy`]), so no
//! client can compute identities that land in a chosen window; the class follows as a
//! fixed-width `u16`. Note that `Hash` is typed: `[u8]` (and `[u8; N]`, `Vec<u8>`, which hash
//! as the slice) writes a length prefix and the bytes, `str` (and `String`) the bytes and a
//! `0xFF` terminator, so `"a"` and `b"a"` are two different identities. One 64-bit hash is
//! split three ways:
//!
//! ```text
//!  63        64-s  ...  40 39          32 31                      0
//! +------------+---------+--------------+-------------------------+
//! | HOME (s b) | unused  |  FP (8 bits) |      TAG (32 bits)      |
//! +------------+---------+--------------+-------------------------+
//! ```
//!
//! `HOME` picks the first slot of the key's probe window (`s = log2(slots)`, 11 for the
//! default cap); `FP` sits in the slot word beside the slot's generation; `TAG` in the
//! parallel tag array. Two live keys are taken for one only if all three agree, so for the
//! default table (s = 11) two distinct identities share an entry with probability 2^-51 per
//! pair: for 256 live entries, at most 256²/2 · 2^-51 ≈ 1.5·10^-11. The three fields stay
//! disjoint up to 2^24 slots (every table the cap allows); at the largest cap (2^23 slots)
//! the bound is 2^-63 per pair, (2^20)²/2 · 2^-63 ≈ 6·10^-8 for a million live entries.

use siphasher::sip::SipHasher13;
use std::hash::{Hash, Hasher};

/// Where a key lives and how it is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    /// First slot of the probe window.
    pub(crate) home: usize,
    /// 8 bits kept in the slot word.
    pub(crate) fp: u32,
    /// 32 bits kept in the tag array.
    pub(crate) tag: u32,
}

/// The per-table keyed hash.
#[derive(Clone)]
pub(crate) struct KeyHasher {
    k0: u64,
    k1: u64,
    /// `64 - log2(slots)`.
    home_shift: u32,
}

impl std::fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys are the whole defence against aimed collisions: never print them.
        f.debug_struct("KeyHasher").finish_non_exhaustive()
    }
}

impl KeyHasher {
    /// A hasher with fresh random keys for a table of `slots` (a power of two) slots.
    pub(crate) fn random(slots: usize) -> Self {
        Self::with_keys(
            crate::entropy::random_u64(),
            crate::entropy::random_u64(),
            slots,
        )
    }

    /// A hasher with given keys, for tests that need reproducible placement.
    pub(crate) fn with_keys(k0: u64, k1: u64, slots: usize) -> Self {
        Self {
            k0,
            k1,
            home_shift: 64 - slots.trailing_zeros(),
        }
    }

    /// The same keys, for a table of `slots` slots.
    pub(crate) fn for_slots(&self, slots: usize) -> Self {
        Self::with_keys(self.k0, self.k1, slots)
    }

    /// The key of `(identity, class)`.
    #[inline]
    pub(crate) fn key<K: Hash + ?Sized>(&self, identity: &K, class: u16) -> Key {
        self.key_of_hash(self.hash(identity, class))
    }

    /// The whole 64-bit keyed hash of `(identity, class)`, before it is split into a [`Key`]
    /// (it does not depend on the table's size).
    #[inline]
    pub(crate) fn hash<K: Hash + ?Sized>(&self, identity: &K, class: u16) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        identity.hash(&mut h);
        // The class is a fixed-width suffix, so (identity, class) pairs never collide by
        // concatenation.
        h.write_u16(class);
        h.finish()
    }

    /// The key a [`KeyHasher::hash`] stands for in this table.
    #[inline]
    pub(crate) fn key_of_hash(&self, hash: u64) -> Key {
        Self::split(hash, self.home_shift)
    }

    #[inline]
    fn split(hash: u64, home_shift: u32) -> Key {
        // A shift of 64 (a one-slot table) would overflow: checked_shr gives home 0 instead.
        let home = hash.checked_shr(home_shift).unwrap_or(0);
        Key {
            home: usize::try_from(home).unwrap_or(0),
            // The casts keep the low 32 bits on purpose: the tag is bits 0..32, the fingerprint
            // bits 32..40, both below the home bits for every table the cap allows.
            tag: hash as u32,
            fp: ((hash >> 32) as u32) & super::word::FP_MASK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_stays_inside_the_table() {
        for slots in [1usize, 2, 8, 2048, 1 << 20] {
            let h = KeyHasher::random(slots);
            for i in 0..1000u32 {
                assert!(h.key(&i.to_le_bytes(), 0).home < slots);
            }
        }
    }

    #[test]
    fn the_class_is_part_of_the_key() {
        let h = KeyHasher::random(2048);
        assert_ne!(h.key(b"alice", 0), h.key(b"alice", 1));
        assert_eq!(h.key(b"alice", 1), h.key(b"alice", 1));
    }

    #[test]
    fn two_tables_place_a_name_differently() {
        // With random keys per table, the same identity's hash differs between tables.
        let a = KeyHasher::random(1 << 16);
        let b = KeyHasher::random(1 << 16);
        let same = (0..64u32)
            .filter(|i| a.key(&i.to_le_bytes(), 0) == b.key(&i.to_le_bytes(), 0))
            .count();
        assert_eq!(same, 0);
    }

    #[test]
    fn a_str_and_its_bytes_are_different_identities() {
        // `Hash` is typed: a `str` ends with 0xFF, a `[u8]` starts with its length. A server
        // must key one identity with one kind of type everywhere.
        let h = KeyHasher::with_keys(1, 2, 2048);
        let as_str = h.key("alice", 0);
        let as_slice = h.key(&b"alice"[..], 0);
        assert_ne!(as_str, as_slice);
        // Within a kind, however it is held: an array and a `Vec` hash as their slice, a
        // `String` as its `str`.
        assert_eq!(as_slice, h.key(b"alice", 0));
        assert_eq!(as_slice, h.key(&b"alice".to_vec(), 0));
        assert_eq!(as_str, h.key(&String::from("alice"), 0));
        assert_eq!(as_str, h.key(String::from("alice").as_str(), 0));
        // A number is its own kind: its bytes as a slice are another identity.
        assert_ne!(h.key(&7u64, 0), h.key(&7u64.to_le_bytes(), 0));
        // So is a hash computed once and split later.
        assert_eq!(as_str, h.key_of_hash(h.hash("alice", 0)));
    }

    #[test]
    fn identities_are_opaque_bytes() {
        // Not normalised: case, whitespace and trailing NULs all make distinct keys.
        let h = KeyHasher::with_keys(1, 2, 2048);
        let keys = [&b"host-a"[..], b"HOST-A", b"host-a ", b"host-a\0"].map(|id| h.key(id, 0));
        for (i, a) in keys.iter().enumerate() {
            for b in keys.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
    }
}
