//! Inserting a key so that two racing first charges never leave two live entries.
//!
//! An inserter claims an `EMPTY` slot in the key's window (`OWNED`), writes the tag, publishes
//! the slot as `INSERTING`, bumps the `order` counter, then *resolves*: it scans the window for
//! other copies of the key. A `MEMBER` copy, or an `INSERTING` copy nearer the window's start,
//! beats it; an `INSERTING` copy further along loses to it and is marked `OWNED` (collided).
//! A copy that survives the scan is promoted `INSERTING → MEMBER` by CAS. A collided inserter
//! frees its slot and looks the key up again.
//!
//! A thread that finds a key only as `INSERTING` helps instead of waiting: it bumps `order` and
//! runs the same resolution on the other thread's copy. No thread ever waits for another.
//!
//! # Why at most one copy becomes a member
//!
//! Every resolution starts after its copy is visible and after an `AcqRel` RMW on `order`.
//! Those RMWs are totally ordered, and each synchronises with the ones before it, so of two
//! copies of one key, the resolution that bumped `order` later sees the other copy (as
//! `INSERTING` or beyond). Seeing it, the later one either concedes (the other is a member or
//! nearer the start) or collides it by CAS; the promotion of a copy is a CAS from `INSERTING`
//! too, so a copy is either collided or promoted, never both. This is Purcell and Harris's
//! open-addressing scheme (2005), with the store/load race that their SC accesses settle
//! settled here by one RMW chain, which loom models exactly.

use super::word::{State, Word};
use super::{Key, Table};
use crate::sync::atomic::Ordering;

/// How an insert attempt ended.
pub(super) enum Insert {
    /// This copy is the key's member.
    Won,
    /// Another copy won or is about to; look the key up again.
    Lost,
    /// Every entry the cap allows is taken.
    AtCap,
    /// No `EMPTY` slot in the key's window (see the probability in the module docs).
    WindowFull,
}

impl Table {
    /// Inserts a fresh copy of `key` holding `fresh` and resolves it against racing copies.
    pub(super) fn insert(&self, key: &Key, fresh: u64) -> Insert {
        if !self.reserve() {
            return Insert::AtCap;
        }
        let Some(slot) = self.claim(key) else {
            self.release();
            return Insert::WindowFull;
        };
        let Some((word, tag)) = self.slot(slot) else {
            return Insert::Lost;
        };
        // Relaxed: published by the Release store of INSERTING just below.
        tag.store(key.tag, Ordering::Relaxed);
        let mine = Word::new(State::Inserting, key.fp, fresh);
        // Release: a resolver that Acquire-loads this INSERTING word also sees the tag.
        word.store(mine.0, Ordering::Release);
        self.order_after_publishing();
        if self.resolve(slot, mine, key) {
            return Insert::Won;
        }
        // Our copy was collided: the slot is OWNED and only we may touch it.
        // Release: the next claimer's Acquire orders its tag write after ours.
        word.store(Word::EMPTY.0, Ordering::Release);
        self.release();
        Insert::Lost
    }

    /// Runs the resolution for another thread's `INSERTING` copy, so nobody waits for it.
    pub(super) fn help(&self, slot: usize, copy: Word, key: &Key) {
        self.order_after_publishing();
        self.resolve(slot, copy, key);
    }

    /// Claims an `EMPTY` slot of `key`'s window as `OWNED`.
    fn claim(&self, key: &Key) -> Option<usize> {
        for slot in self.window(key) {
            let Some((word, _)) = self.slot(slot) else {
                continue;
            };
            // Relaxed: a hint only; the CAS decides.
            if word.load(Ordering::Relaxed) != Word::EMPTY.0 {
                continue;
            }
            let owned = Word::new(State::Owned, key.fp, 0);
            if word
                .compare_exchange(
                    Word::EMPTY.0,
                    owned.0,
                    // Acquire: order our tag write after every access of the slot's previous
                    // incarnation (its free or reclaim was Release).
                    Ordering::Acquire,
                    // Relaxed: on failure we move to the next slot.
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return Some(slot);
            }
        }
        None
    }

    /// The RMW every resolution starts with; see "Why at most one copy becomes a member".
    fn order_after_publishing(&self) {
        // AcqRel: the RMWs on `order` form one chain; each synchronises with all earlier ones,
        // so of two resolutions the later sees every copy published before the earlier began.
        self.order.fetch_add(1, Ordering::AcqRel);
    }

    /// Resolves copy `mine` at `slot`: returns whether it is (now) the key's member.
    fn resolve(&self, slot: usize, mine: Word, key: &Key) -> bool {
        let my_rank = self.rank(key, slot);
        for other in self.window(key) {
            if other == slot {
                continue;
            }
            let Some((word, tag)) = self.slot(other) else {
                continue;
            };
            // Acquire: see the tag published with an INSERTING copy, and everything before
            // a promotion.
            let mut seen = Word(word.load(Ordering::Acquire));
            loop {
                let is_copy = seen.is_copy_of(State::Member, key.fp)
                    || seen.is_copy_of(State::Inserting, key.fp);
                // Relaxed: ordered after the Acquire load above.
                if !is_copy || tag.load(Ordering::Relaxed) != key.tag {
                    break;
                }
                if seen.state() == State::Member || self.rank(key, other) < my_rank {
                    return self.concede(slot, mine, key);
                }
                // A copy further along the window loses to ours: collide it.
                match word.compare_exchange(
                    seen.0,
                    seen.with_state(State::Owned).0,
                    // AcqRel: the CAS is a link in the slot's history like any other; its
                    // owner learns of the collision from its own failed promotion.
                    Ordering::AcqRel,
                    // Acquire: re-examine whatever replaced it, tag included.
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    // It was promoted, collided or freed meanwhile: look again.
                    Err(actual) => seen = Word(actual),
                }
            }
        }
        self.settle(slot, mine, key, State::Member)
    }

    /// Marks copy `mine` collided; returns whether it turned out to be the member after all.
    fn concede(&self, slot: usize, mine: Word, key: &Key) -> bool {
        self.settle(slot, mine, key, State::Owned)
    }

    /// Moves copy `mine` from `INSERTING` to `to` (`MEMBER`: promoted; `OWNED`: collided) by
    /// CAS; returns whether the slot is now the key's member, whoever put it there.
    fn settle(&self, slot: usize, mine: Word, key: &Key, to: State) -> bool {
        let Some((word, _)) = self.slot(slot) else {
            return false;
        };
        match word.compare_exchange(
            mine.0,
            mine.with_state(to).0,
            // AcqRel: a promotion publishes the member (later charges extend this release
            // sequence); a collision is a link in the slot's history like any other.
            Ordering::AcqRel,
            // Acquire: on failure read whether a helper promoted it or someone collided it.
            Ordering::Acquire,
        ) {
            Ok(_) => to == State::Member,
            Err(actual) => Word(actual).is_copy_of(State::Member, key.fp),
        }
    }

    /// A slot's distance from the key's home, in window order.
    fn rank(&self, key: &Key, slot: usize) -> usize {
        slot.wrapping_sub(key.home) & self.mask
    }

    /// Takes one unit of the cap; false when every entry the cap allows is taken.
    fn reserve(&self) -> bool {
        // Relaxed: `live` is a counter; it publishes no memory, and the CAS keeps it <= cap.
        self.live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                (live < self.cap).then_some(live + 1)
            })
            .is_ok()
    }

    /// Gives back one unit of the cap.
    pub(super) fn release(&self) {
        // Relaxed: as in `reserve`.
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}
