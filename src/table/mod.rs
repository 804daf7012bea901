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
//! pair. For a table of cap 4,096 (10,240 slots) that is 2^-49.3, so for 4,096 live entries
//! at most 4096²/2 · 2^-49.3 ≈ 1.2·10^-8; for the limiter's default, cap 65,536 (163,840
//! slots), 2^-53.3 and 65536²/2 · 2^-53.3 ≈ 1.9·10^-7 (the registrar's 256, in 640 slots:
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
mod key;
mod reclaim;
mod word;

use geometry::BLOCK;
pub(crate) use geometry::{CapProblem, Geometry, Shape, MAX_CAP};
pub(crate) use key::{Key, KeyHasher};
use word::{Copies, Members};
pub(crate) use word::{State, Word, VALUE_BITS};
#[cfg(test)]
use word::{FP_MASK, GEN_MASK, VALUE_MASK};

use crate::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use insert::Insert;
use std::ops::ControlFlow;

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

/// A key's window in window order, as `(rank of its first slot, first slot, slots)`: its first
/// block, then its second (no slots when the window is one block).
type Window = [(usize, usize, usize); 2];

/// What a lookup found ([`Table::find`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lookup {
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

    /// Slots in the table (the range of every `slot` an [`Update::Landed`] names).
    pub(crate) fn slots(&self) -> usize {
        self.words.len()
    }

    /// The first slots of `key`'s two blocks (one block twice when the window is one block):
    /// its member, if it has one, lives in one of them.
    pub(crate) fn blocks_of(&self, key: &Key) -> [usize; 2] {
        [key.home, self.second(key)]
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
        f: impl FnMut(u64) -> Verdict<R>,
    ) -> Update<R> {
        self.update_looking(None, key, fresh, f)
    }

    /// [`Table::update`] after its first lookup, `found` ([`Table::find`] of `key`): a caller
    /// that handles a found member itself hands the rest of the work here without scanning
    /// the window again.
    #[inline]
    pub(crate) fn update_from<R>(
        &self,
        found: Lookup,
        key: &Key,
        fresh: u64,
        f: impl FnMut(u64) -> Verdict<R>,
    ) -> Update<R> {
        self.update_looking(Some(found), key, fresh, f)
    }

    /// [`Table::update`], starting from `found` if given (else from a lookup).
    #[inline(always)]
    fn update_looking<R>(
        &self,
        found: Option<Lookup>,
        key: &Key,
        fresh: u64,
        mut f: impl FnMut(u64) -> Verdict<R>,
    ) -> Update<R> {
        let mut inserted = false;
        let mut given = found;
        loop {
            let found = match given.take() {
                Some(found) => found,
                None => self.find(key),
            };
            match found {
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
                    Insert::AtCap => match self.lookup_again(key) {
                        Lookup::Absent => return Update::AtCap,
                        again => given = Some(again),
                    },
                    Insert::WindowFull => match self.lookup_again(key) {
                        Lookup::Absent => return Update::WindowFull,
                        again => given = Some(again),
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

    /// [`Table::update_or_reclaim`] after its first lookup, `found`, as for
    /// [`Table::update_from`].
    #[inline]
    pub(crate) fn update_or_reclaim_from<R>(
        &self,
        found: Lookup,
        key: &Key,
        fresh: u64,
        mut f: impl FnMut(u64) -> Verdict<R>,
        reclaim: impl FnOnce() -> bool,
    ) -> Update<R> {
        match self.update_from(found, key, fresh, &mut f) {
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
            match self.lookup::<false>(key) {
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
        match self.lookup::<false>(key) {
            Lookup::Member { word, .. } => Some(word.value()),
            Lookup::Inserting { .. } | Lookup::Absent => None,
        }
    }

    /// Scans `key`'s window for its member (or else the first `INSERTING` copy of it): the
    /// first step of every update, the loop of [`Table::lookup`].
    #[inline(always)]
    pub(crate) fn find(&self, key: &Key) -> Lookup {
        // The key's first slot alone first: where a table well below its cap keeps most keys
        // (an insert takes the first free slot of the emptier block, the first on a tie).
        // Only a member is taken there, by one masked compare of both state bits and the
        // fingerprint; anything else (an `INSERTING` copy too) is left to the scan.
        if let Some(member) = self.member_at(key, Members::of(key.fp), key.home) {
            return member;
        }
        self.lookup::<true>(key)
    }

    /// [`Table::find`], trying the first slot of the key's second block too before the scan:
    /// a key the insert put in its second block (the emptier one) sits there as often as a key
    /// in its first. Measured fewer instructions for a lone charge (a quarter of 10,000 keys
    /// sit past their first slot), more where the lookup is one of several in one function.
    #[inline(always)]
    pub(crate) fn find_by_first_slots(&self, key: &Key) -> Lookup {
        // The first slot of each of the key's blocks alone first: where a table well below
        // its cap keeps most keys (an insert takes the first free slot of the emptier block,
        // the first on a tie). Only a member is taken there, by one masked compare of both
        // state bits and the fingerprint; anything else (an `INSERTING` copy too) is left to
        // the scan.
        let members = Members::of(key.fp);
        if let Some(member) = self.member_at(key, members, key.home) {
            return member;
        }
        let second = self.second(key);
        if second != key.home {
            if let Some(member) = self.member_at(key, members, second) {
                return member;
            }
        }
        self.lookup_with::<true>(key, second)
    }

    /// `key`'s member if slot `slot` holds it (one masked compare, then the tag).
    #[inline(always)]
    fn member_at(&self, key: &Key, members: Members, slot: usize) -> Option<Lookup> {
        // Acquire: a visible MEMBER word carries its tag (see "Orderings").
        let seen = Word(self.words.get(slot)?.load(Ordering::Acquire));
        // Acquire: see "Orderings" (a later incarnation's tag brings its claim).
        (members.matches(seen) && self.tags.get(slot)?.load(Ordering::Acquire) == key.tag)
            .then_some(Lookup::Member { slot, word: seen })
    }

    /// The lookup after an insert found no room (at the cap, or a full window): unrolled, and
    /// out of line, so that a caller whose insert found room does not pay for preparing it.
    #[inline(never)]
    fn lookup_again(&self, key: &Key) -> Lookup {
        self.lookup::<true>(key)
    }

    /// Scans `key`'s window for its member, remembering the first `INSERTING` copy seen.
    ///
    /// `UNROLLED` scans each block of one line as a loop of known length, which the compiler
    /// unrolls: a slot holding no copy of the key then costs a load, an xor and a test, and a
    /// miss (every slot read) measured about 90 instructions fewer. A hit pays for the larger
    /// code instead (about 8 more), so the first lookup of every charge, which is most often a
    /// hit, keeps the loop, and the lookups that follow a miss (at the cap, or a window with no
    /// free slot) unroll.
    #[inline(always)]
    fn lookup<const UNROLLED: bool>(&self, key: &Key) -> Lookup {
        let mut inserting = None;
        if let Some(member) = self.scan_block::<UNROLLED>(key, key.home, &mut inserting) {
            return member;
        }
        if self.window > self.shape.block {
            let second = self.second(key);
            if let Some(member) = self.scan_block::<UNROLLED>(key, second, &mut inserting) {
                return member;
            }
        }
        inserting.unwrap_or(Lookup::Absent)
    }

    /// [`Table::lookup`] with the second block's first slot known (`second`: the first
    /// block's when the window is one block).
    #[inline(always)]
    fn lookup_with<const UNROLLED: bool>(&self, key: &Key, second: usize) -> Lookup {
        let mut inserting = None;
        if let Some(member) = self.scan_block::<UNROLLED>(key, key.home, &mut inserting) {
            return member;
        }
        if second != key.home {
            if let Some(member) = self.scan_block::<UNROLLED>(key, second, &mut inserting) {
                return member;
            }
        }
        inserting.unwrap_or(Lookup::Absent)
    }

    /// Scans the block starting at `start` for `key`'s member (returned), remembering the
    /// first `INSERTING` copy seen.
    #[inline(always)]
    fn scan_block<const UNROLLED: bool>(
        &self,
        key: &Key,
        start: usize,
        inserting: &mut Option<Lookup>,
    ) -> Option<Lookup> {
        // One bounds check a block: the slice never moves, so the loop below reloads neither
        // its address nor its length after each Acquire load.
        let words = self.words.get(start..start + self.shape.block)?;
        let copies = Copies::of(key.fp);
        match each_slot::<UNROLLED, _>(words, |i, word| {
            match self.copy_at(key, copies, start + i, word, inserting) {
                Some(member) => ControlFlow::Break(member),
                None => ControlFlow::Continue(()),
            }
        }) {
            ControlFlow::Break(member) => Some(member),
            ControlFlow::Continue(()) => None,
        }
    }

    /// One slot of [`Table::scan_block`]: `key`'s member if `word` (at `slot`) is it; an
    /// `INSERTING` copy of it is remembered in `inserting` if none was yet.
    #[inline(always)]
    fn copy_at(
        &self,
        key: &Key,
        copies: Copies,
        slot: usize,
        word: &AtomicU64,
        inserting: &mut Option<Lookup>,
    ) -> Option<Lookup> {
        // Acquire: a visible MEMBER/INSERTING word carries its tag (see "Orderings").
        let seen = Word(word.load(Ordering::Acquire));
        if !copies.matches(seen) {
            return None;
        }
        // Acquire: see "Orderings" (a later incarnation's tag brings its claim).
        if self.tags.get(slot)?.load(Ordering::Acquire) != key.tag {
            return None;
        }
        if seen.state() == State::Member {
            return Some(Lookup::Member { slot, word: seen });
        }
        inserting.get_or_insert(Lookup::Inserting { slot, word: seen });
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
    pub(crate) fn apply_found<R>(
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

    /// `key`'s window in window order, as `(rank of its first slot, first slot, slots)`: its
    /// first block, then its second (no slots when the window is one block).
    #[inline]
    fn window_blocks(&self, key: &Key) -> Window {
        let block = self.shape.block;
        [
            (0, key.home, block),
            (block, self.second(key), self.window - block),
        ]
    }

    /// The cache line of `key`'s member's slot word (its entry), for the decision-writes test.
    #[cfg(all(test, admit_writes))]
    pub(crate) fn member_line(&self, key: &Key) -> Option<crate::sync::writes::Line> {
        match self.lookup::<false>(key) {
            Lookup::Member { slot, .. } => self.words.get(slot).map(crate::sync::writes::line_of),
            Lookup::Inserting { .. } | Lookup::Absent => None,
        }
    }

    /// The word and tag of `slot`; `None` only for an index outside the table.
    #[inline]
    fn slot(&self, slot: usize) -> Option<(&AtomicU64, &AtomicU32)> {
        Some((self.words.get(slot)?, self.tags.get(slot)?))
    }
}

/// Calls `visit` with each slot of `words` (a block, or part of one) and its index in it, until
/// it breaks. With `UNROLLED`, a block of one line ([`BLOCK`] words, every table's but the
/// models') is visited as a loop of known length, which the compiler unrolls.
#[inline(always)]
fn each_slot<const UNROLLED: bool, R>(
    words: &[AtomicU64],
    mut visit: impl FnMut(usize, &AtomicU64) -> ControlFlow<R>,
) -> ControlFlow<R> {
    if let (true, Ok(line)) = (UNROLLED, <&[AtomicU64; BLOCK]>::try_from(words)) {
        for (i, word) in line.iter().enumerate() {
            visit(i, word)?;
        }
        return ControlFlow::Continue(());
    }
    for (i, word) in words.iter().enumerate() {
        visit(i, word)?;
    }
    ControlFlow::Continue(())
}

#[cfg(test)]
mod tests;
