//! The bounded entry table: a fixed array of atomics holding at most `cap` live entries, each a
//! 42-bit value (a bucket's `full_at`, or an in-flight count) owned by one key.
//!
//! Allocated once at construction; a charge never allocates, never locks and never waits for
//! another thread. The table is generic over what the value means: the [`crate::limiter`]
//! stores token buckets in it and reclaims full ones, [`crate::fairness`] stores in-flight
//! counts and reclaims entries whose count is back to zero.
//!
//! # Layout
//!
//! `slots = ⌈2.5 × cap⌉` words (`AtomicU64`, see "The slot word" below) plus as many `AtomicU32`
//! tags, rounded up to whole blocks of 8 slots (one cache line of words): 30 bytes per unit of
//! cap, fixed at construction. A key may live only in its *window*: two blocks its hash names,
//! so a lookup reads at most 16 words on two lines. An insert takes a free slot in whichever
//! of its two blocks holds more free slots when it claims (the first on a tie), which keeps
//! the blocks level (the "power of two choices"): with at most `cap` live entries, blocks
//! average 3.2 of 8, and an insert finds no `EMPTY` slot in its window only if both of its
//! blocks are full. A simulation of saturated tables under churn (10^8 inserts) measured both
//! blocks holding ≥ 5 entries at 1.2·10^-2, ≥ 6 at 4·10^-5 and ≥ 7 never; the tail squares at
//! each step, which puts a full window near 10^-19 per insert (`docs/design.md` §2). Such an
//! insert is treated as "at the cap": the charge lands on its class's overflow bucket, never
//! unlimited.
//!
//! # Keys: from an identity and a class to a window and a fingerprint
//!
//! The identity is hashed exactly as its [`Hash`] impl feeds it, never parsed or normalised,
//! once per request, with SipHash-1-3 under two keys drawn from the OS per process (a
//! [`HashedActor`], see [`crate::actor`]), so no client can compute identities that land in a
//! chosen window; each table then derives its own 64 bits from those and the class (a
//! fixed-width `u16`) by a folded multiply under two salts drawn per table. Note that `Hash`
//! is typed: `[u8]` (and `[u8; N]`, `Vec<u8>`, which hash as the slice) writes a length prefix
//! and the bytes, `str` (and `String`) the bytes and a `0xFF` terminator, so `"a"` and `b"a"`
//! are two different identities. The table's 64 bits are used three ways:
//!
//! ```text
//!  63                          40 39          32 31                      0
//! +------------------------------+--------------+-------------------------+
//! |  FIRST BLOCK (high bits × n) |  FP (8 bits) |      TAG (32 bits)      |
//! +------------------------------+--------------+-------------------------+
//!  SECOND BLOCK: all 64 bits folded through a fixed odd multiplier, × n
//! ```
//!
//! In a table of several classes (a limiter's), the tag's high `c` bits are the key's class
//! instead of hash bits, `c` as many as the classes need ([`KeyHasher::for_classes`]; none for
//! one class), so a scan can read a slot's class off its tag ([`KeyHasher::class_of`]: the
//! limiter's reclaim and its runtime changes need it, see `limiter::era`) and keys of two
//! classes never match. Within a class, `40 − c` bits then tell keys apart.
//!
//! The first block is the high half of `hash × blocks` (a multiply-shift, so the table need
//! not be a power of two), decided by bits above the fingerprint for every table the cap allows
//! (under 2^19 blocks); the second is the same scaling of the hash folded through a fixed odd
//! multiplier (the hash is already secret and per table), moved on by one block if it fell on
//! the first, and derived only when a lookup gets past the first block. `FP` sits in the slot word
//! beside the slot's generation; `TAG` in the parallel tag array. Two live keys are taken for
//! one only if one's member lies in the other's window and fingerprint and tag agree (40 bits,
//! `40 − c` with `c` class bits, for a pair of one class): at most `16/slots · 2^-40` per
//! pair. For the limiter's default table (10,240 slots) that is 2^-49.3, so for 4,096 live
//! entries at most 4096²/2 · 2^-49.3 ≈ 1.2·10^-8 (the registrar's 256, in 640 slots:
//! 7.6·10^-10); at the largest cap (2.5 Mi slots) 2^-57.3 per pair, (2^20)²/2 · 2^-57.3 ≈
//! 5·10^-6 for a million live entries. (The earlier layout, 16-slot windows in
//! `next_pow2(8 × cap)` slots, gave `16/2048 · 2^-40 = 2^-47` counted the same way, and 2^-59
//! at the largest cap: 3.2 times less.) A shared entry only
//! makes two identities share one budget: never more tokens for either. Two identities
//! with one `HashedActor` (2^-64 per pair) share an entry in every table: the bounds above at
//! most double.
//!
//! # The slot word: state, generation, fingerprint and value in one `u64`
//!
//! So every transition is one CAS.
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
//!
//! # Slot states and transitions
//!
//! Drawn once, with who may take each transition, in `docs/design.md` §2 ("States and
//! transitions"). In words:
//!
//! * **claim** `EMPTY(g) → OWNED(g+1)`: reserves the slot for one inserter and starts a new
//!   incarnation: every word of it carries generation `g+1`.
//! * **publish** `OWNED → INSERTING`: the copy becomes visible to other inserters. `OWNED` is
//!   only ever the claimed, unpublished slot; nobody but its owner touches it.
//! * **collide / concede** `INSERTING → EMPTY`: a resolver ends a losing copy (someone else's,
//!   or its own). Whoever wins this CAS gives the slot's unit of `live` back.
//! * **promote** `INSERTING → MEMBER`: linearises the insert (see [`insert`]).
//! * **charge** `MEMBER → MEMBER`: one CAS on the whole word linearises every update of an
//!   entry; generation and fingerprint in the same word make it fail once the slot has been
//!   freed, whatever the slot holds since.
//! * **reclaim** `MEMBER → EMPTY`: a CAS from the exact word the caller judged removable
//!   (full bucket, zero count), so an entry charged meanwhile is never removed. Its winner
//!   gives the unit of `live` back.
//!
//! # Invariants
//!
//! 1. **Bounded.** At most `cap` slots are `OWNED`, `INSERTING` or `MEMBER`: `live` is
//!    reserved before a claim, and given back exactly once per incarnation, by the one thread
//!    whose CAS moved that incarnation's word to `EMPTY` (each incarnation reaches `EMPTY` by
//!    exactly one successful CAS, from a word only it carries). An inserter whose copy was
//!    collided, conceded by a helper, or promoted by a helper and reclaimed since, finds its
//!    own CAS failing and touches neither the slot nor `live`. So `members ≤ len() ≤ cap` at
//!    every instant (loom: `*_insert_whose_helped_copy_was_reclaimed_frees_nothing_twice`).
//! 2. **One member per key.** Two racing first charges never leave two live entries of one key
//!    (see [`insert`] for the argument; loom model `two_first_charges_of_one_key`).
//! 3. **No stray charge (no ABA).** A charge lands only on a `MEMBER` word with the key's
//!    fingerprint and tag, by CAS from the word it read. A freed slot's next incarnation has
//!    the next generation, so the CAS fails on it even when another key with the same 8-bit
//!    fingerprint now holds the slot with the same value. It could succeed only after exactly
//!    a multiple of 4096 claims of that one slot between the charger's load and its CAS, each
//!    needing a removal and an insert by other threads (and, in fairness, a reclamation scan,
//!    which runs at most once per `actors` entry-less acquires), with the other key's
//!    fingerprint and value equal to the stale word's (loom:
//!    `*_stale_*_never_lands_on_a_fingerprint_twin`).
//! 4. **Removal only as judged.** An entry leaves only by CAS from a word its caller judged
//!    removable; the limiter judges only full buckets removable, fairness only zero counts.
//!
//! # At the cap
//!
//! `live` is reserved before a copy becomes visible (so that `len() <= cap` holds at every
//! instant), and given back only after a removal's CAS. So when the table is at its cap, a miss
//! can find the cap full while the only thing filling it is a racing insert of the *same* key
//! that has reserved but not yet published (a few instructions), or an entry already removed
//! whose unit is not yet given back. Such a miss looks its key up once more (charging or
//! helping a copy that became visible) and otherwise answers `AtCap`: the limiter charges the
//! class's overflow bucket, fairness counts the op against its shared quota. The key's own
//! entry is never doubled; the excess lands on a shared budget that is itself capped. Below
//! the cap this cannot happen (loom: `fairness::acquires_never_exceed_the_quota`; the window
//! itself: `fairness::at_the_cap_the_excess_lands_on_the_shared_quota`).
//!
//! # Orderings
//!
//! Loads of slot words are `Acquire` so that a visible `INSERTING`/`MEMBER` word carries its tag
//! (stored before the `Release` publish; promotions and charges are RMWs and extend that release
//! sequence). Claims are `Acquire` and frees (`EMPTY` CASes) `Release`, so one incarnation's tag
//! write never overtakes the previous one's. Tags are stored `Release` and loaded `Acquire`: a
//! reader that sees a later incarnation's tag then also sees that incarnation's claim, so its
//! CAS from an older word fails rather than landing on the older incarnation. Resolutions are ordered by one `AcqRel` RMW chain
//! on `order` (see [`insert`]). `live` is a plain counter (`Relaxed`); the hint in the limiter
//! is versioned (see [`crate::limiter`]).

pub(crate) mod geometry;
mod insert;
mod reclaim;

pub(crate) use geometry::{CapProblem, Geometry, Shape, MAX_CAP};

use crate::actor::{HashedActor, Salt};
use crate::clock::tick::TIME_BITS;
use crate::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use insert::Insert;
use std::hash::Hash;

// ------------------------------------------------------------------ keys
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

// ------------------------------------------------------------- slot words
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

// ------------------------------------------------------------------ table

/// What a caller's update function decided about an entry's value.
pub(crate) enum Verdict<R> {
    /// Store this value.
    Commit(u64, R),
    /// Change nothing.
    Keep(R),
}

/// Where an update ended.
pub(crate) enum Update<R> {
    /// Applied to the key's entry at `slot`; `inserted` if this call created the entry.
    Landed {
        slot: usize,
        result: R,
        inserted: bool,
    },
    /// The key has no entry and the cap is reached.
    AtCap,
    /// The key has no entry and its window has no free slot.
    WindowFull,
}

/// What a lookup found.
enum Lookup {
    Member { slot: usize, word: Word },
    Inserting { slot: usize, word: Word },
    Absent,
}

/// The fixed array of entries. See the module docs for the protocol.
#[derive(Debug)]
pub(crate) struct Table {
    words: Box<[AtomicU64]>,
    tags: Box<[AtomicU32]>,
    shape: Shape,
    /// Slots in a window: one block or two ([`Shape::window`], kept so that no decision
    /// recomputes it).
    window: usize,
    cap: usize,
    live: AtomicUsize,
    order: AtomicU64,
}

impl Table {
    /// An empty table of the given shape; the caller validated `cap` in `1..=MAX_CAP`.
    pub(crate) fn new(geometry: Geometry) -> Self {
        let shape = geometry.shape();
        let slots = shape.slots();
        Self {
            words: (0..slots).map(|_| AtomicU64::new(Word::EMPTY.0)).collect(),
            tags: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            shape,
            window: shape.window(),
            cap: geometry.cap,
            live: AtomicUsize::new(0),
            order: AtomicU64::new(0),
        }
    }

    /// Slots in the table.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.words.len()
    }

    /// First slot of `key`'s second block (its first when the window is one block).
    #[inline]
    pub(super) fn second(&self, key: &Key) -> usize {
        if self.window > self.shape.block {
            key.second(self.shape.blocks, self.shape.block)
        } else {
            key.home
        }
    }

    /// Where this table's keys may live (for [`KeyHasher::for_shape`]).
    pub(crate) fn shape(&self) -> Shape {
        self.shape
    }

    /// The cap on live entries.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Live entries, counting inserts in flight; never above [`Table::cap`].
    pub(crate) fn len(&self) -> usize {
        // Relaxed: a snapshot of a counter.
        self.live.load(Ordering::Relaxed)
    }

    /// Bytes of the slot and tag arrays: fixed at construction.
    pub(crate) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.words) + std::mem::size_of_val(&*self.tags)
    }

    /// Applies `f` to `key`'s entry, inserting one holding `fresh` first if it has none.
    ///
    /// `f` may run more than once (each time against the latest value); only the run whose
    /// verdict was committed, or the last `Keep`, is returned.
    #[inline]
    pub(crate) fn update<R>(
        &self,
        key: &Key,
        fresh: u64,
        mut f: impl FnMut(u64) -> Verdict<R>,
    ) -> Update<R> {
        let mut inserted = false;
        loop {
            match self.lookup(key) {
                Lookup::Member { slot, word } => {
                    if let Some(result) = self.apply_found(slot, word, key, &mut f) {
                        return Update::Landed {
                            slot,
                            result,
                            inserted,
                        };
                    }
                    // The entry was removed under us; look the key up again.
                }
                Lookup::Inserting { slot, word } => self.help(slot, word, key),
                Lookup::Absent => match self.insert(key, fresh) {
                    Insert::Won => inserted = true,
                    Insert::Lost => {}
                    // Before sending the caller to its overflow, make sure the cap was not
                    // filled by a copy of this very key that became visible meanwhile.
                    Insert::AtCap => match self.lookup(key) {
                        Lookup::Absent => return Update::AtCap,
                        Lookup::Member { .. } | Lookup::Inserting { .. } => {}
                    },
                    Insert::WindowFull => match self.lookup(key) {
                        Lookup::Absent => return Update::WindowFull,
                        Lookup::Member { .. } | Lookup::Inserting { .. } => {}
                    },
                },
            }
        }
    }

    /// The miss path every primitive shares: [`Table::update`], and at the cap, once, ask
    /// `reclaim` to free entries (it returns whether it freed any) and try again. `AtCap` or
    /// `WindowFull` then means the caller pays its overflow budget: an entry is never handed
    /// out by evicting one that is not reclaimable.
    #[inline]
    pub(crate) fn update_or_reclaim<R>(
        &self,
        key: &Key,
        fresh: u64,
        mut f: impl FnMut(u64) -> Verdict<R>,
        reclaim: impl FnOnce() -> bool,
    ) -> Update<R> {
        match self.update(key, fresh, &mut f) {
            Update::AtCap if reclaim() => self.update(key, fresh, f),
            update => update,
        }
    }

    /// Applies `f` to the entry at `slot`, which must still be `key`'s member (a fairness
    /// permit knows its slot; the limiter's cold path, the slot its hit path found). `None` if
    /// it no longer is.
    pub(crate) fn update_slot<R>(
        &self,
        slot: usize,
        key: &Key,
        mut f: impl FnMut(u64) -> Verdict<R>,
    ) -> Option<R> {
        let (word, _) = self.slot(slot)?;
        // Acquire: as for every slot-word load (tag visibility).
        let seen = Word(word.load(Ordering::Acquire));
        self.apply(slot, seen, key, &mut f)
    }

    /// Applies `f` to `key`'s member if it has one; never inserts. `None` if it has none (an
    /// insert still in flight counts as none: its entry holds the fresh value).
    pub(crate) fn update_member<R>(
        &self,
        key: &Key,
        mut f: impl FnMut(u64) -> Verdict<R>,
    ) -> Option<R> {
        loop {
            match self.lookup(key) {
                Lookup::Member { slot, word } => {
                    if let Some(result) = self.apply_found(slot, word, key, &mut f) {
                        return Some(result);
                    }
                    // Removed under us: look again (it may have been re-inserted).
                }
                Lookup::Inserting { .. } | Lookup::Absent => return None,
            }
        }
    }

    /// The value of `key`'s member, if it has one. Read-only: never inserts, never helps.
    pub(crate) fn get(&self, key: &Key) -> Option<u64> {
        match self.lookup(key) {
            Lookup::Member { word, .. } => Some(word.value()),
            Lookup::Inserting { .. } | Lookup::Absent => None,
        }
    }

    /// Scans `key`'s window for its member, remembering the first `INSERTING` copy seen and
    /// counting each block's `EMPTY` slots for an insert to choose between them.
    #[inline(always)]
    fn lookup(&self, key: &Key) -> Lookup {
        let mut inserting = None;
        if let Some(member) = self.scan_block(key, key.home, &mut inserting) {
            return member;
        }
        if self.window > self.shape.block {
            if let Some(member) = self.scan_block(key, self.second(key), &mut inserting) {
                return member;
            }
        }
        inserting.unwrap_or(Lookup::Absent)
    }

    /// Scans the block starting at `start` for `key`'s member (returned), remembering the
    /// first `INSERTING` copy seen.
    #[inline(always)]
    fn scan_block(
        &self,
        key: &Key,
        start: usize,
        inserting: &mut Option<Lookup>,
    ) -> Option<Lookup> {
        // One bounds check a block: the slices never move, so the loop below reloads neither
        // their addresses nor their lengths after each Acquire load.
        let end = start + self.shape.block;
        let (words, tags) = (self.words.get(start..end)?, self.tags.get(start..end)?);
        for (i, (word, tag)) in words.iter().zip(tags).enumerate() {
            // Acquire: a visible MEMBER/INSERTING word carries its tag (see "Orderings").
            let seen = Word(word.load(Ordering::Acquire));
            if seen.fp() != key.fp {
                continue;
            }
            match seen.state() {
                State::Member | State::Inserting
                    // Acquire: see "Orderings" (a later incarnation's tag brings its claim).
                    if tag.load(Ordering::Acquire) == key.tag =>
                {
                    let slot = start + i;
                    if seen.state() == State::Member {
                        return Some(Lookup::Member { slot, word: seen });
                    }
                    inserting.get_or_insert(Lookup::Inserting { slot, word: seen });
                }
                _ => {}
            }
        }
        None
    }

    /// Runs `f` against the member at `slot` until its verdict sticks; `None` if the slot
    /// stops being `key`'s member first. `seen` is any load of the slot's word.
    #[inline]
    fn apply<R>(
        &self,
        slot: usize,
        seen: Word,
        key: &Key,
        f: &mut impl FnMut(u64) -> Verdict<R>,
    ) -> Option<R> {
        if !self.holds(slot, seen, key) {
            return None;
        }
        self.apply_found(slot, seen, key, f)
    }

    /// [`Table::apply`] to a word a scan found to be `key`'s member: its state and fingerprint
    /// read off `seen`, and the slot's tag loaded after `seen` and matched, as
    /// [`Table::holds`] would again. So the first run of `f` starts at once; each failed CAS
    /// brings a new word, checked before `f` runs on it.
    #[inline]
    fn apply_found<R>(
        &self,
        slot: usize,
        mut seen: Word,
        key: &Key,
        f: &mut impl FnMut(u64) -> Verdict<R>,
    ) -> Option<R> {
        let word = self.words.get(slot)?;
        loop {
            let (next, result) = match f(seen.value()) {
                Verdict::Keep(result) => return Some(result),
                Verdict::Commit(value, result) => (seen.with_value(value), result),
            };
            if next == seen {
                return Some(result);
            }
            match word.compare_exchange(
                seen.0,
                next.0,
                // AcqRel: a charge is an RMW extending the slot's release sequence.
                Ordering::AcqRel,
                // Acquire: on failure re-check whose entry the slot now holds.
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(result),
                // Another thread charged it first, or the slot changed hands: retry with its
                // state if it is still `key`'s member.
                Err(actual) => {
                    seen = Word(actual);
                    if !self.holds(slot, seen, key) {
                        return None;
                    }
                }
            }
        }
    }

    /// Whether the word `seen`, loaded from `slot`, is `key`'s member: its state and
    /// fingerprint, then the slot's tag.
    #[inline]
    fn holds(&self, slot: usize, seen: Word, key: &Key) -> bool {
        // Acquire tag load: after the Acquire load (or failed CAS) that gave `seen`, and see
        // "Orderings" for why a later incarnation's tag must bring its claim along.
        seen.is_copy_of(State::Member, key.fp)
            && self
                .tags
                .get(slot)
                .is_some_and(|tag| tag.load(Ordering::Acquire) == key.tag)
    }

    /// The slots of `key`'s window, in window order: its first block, then its second.
    #[inline]
    fn window(&self, key: &Key) -> impl Iterator<Item = usize> {
        let (width, second) = (self.window - self.shape.block, self.second(key));
        (key.home..key.home + self.shape.block).chain(second..second + width)
    }

    /// The word and tag of `slot`; `None` only for an index outside the table.
    #[inline]
    fn slot(&self, slot: usize) -> Option<(&AtomicU64, &AtomicU32)> {
        Some((self.words.get(slot)?, self.tags.get(slot)?))
    }
}

#[cfg(test)]
mod tests;
