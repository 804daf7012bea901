//! Inserting a key so that two racing first charges never leave two live entries.
//!
//! An inserter claims an `EMPTY` slot in the key's window (`OWNED`, next generation: in the
//! block with more free slots, the first block on a tie, else in the other), writes
//! the tag, publishes the slot as `INSERTING`, bumps the `order` counter, then *resolves*: it
//! scans the window for other copies of the key. A `MEMBER` copy, or an `INSERTING` copy nearer
//! the window's start, beats it; an `INSERTING` copy further along loses to it and is freed
//! (`INSERTING → EMPTY`, collided) by the resolver, which gives back that copy's unit of
//! `live`. A copy that survives the scan is promoted `INSERTING → MEMBER` by CAS; a copy that
//! is beaten is freed the same way by its own resolver (conceded).
//!
//! # Who frees a slot
//!
//! Exactly the thread whose CAS moves the incarnation's word to `EMPTY`: a collider, a
//! conceder or a reclaimer. Each CAS is from a word carrying the incarnation's generation, so
//! of all the threads that might end one incarnation exactly one succeeds, and it alone gives
//! the unit of `live` back. An inserter whose settle CAS fails never touches its slot again:
//! if the word it finds is still its own incarnation as a `MEMBER`, a helper promoted it (won);
//! otherwise someone collided it, conceded it, or promoted and then reclaimed it, and that
//! someone already freed the slot and gave its unit back (lost: look the key up again).
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

use super::word::Copies;
use super::{each_slot, Key, State, Table, Window, Word};
use crate::sync::atomic::Ordering;
use std::ops::ControlFlow;

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
        // The window's blocks, derived once for the claim and the resolution.
        let window = self.window_blocks(key);
        let Some((slot, owned)) = self.claim(key, &window) else {
            self.release();
            return Insert::WindowFull;
        };
        let Some((word, tag)) = self.slot(slot) else {
            // Unreachable: `claim` only returns slots of the table.
            return Insert::Lost;
        };
        // Release: a reader that sees this tag also sees our claim (see "Orderings" in the
        // module docs), and the Release publish below carries it to every resolver.
        tag.store(key.tag, Ordering::Release);
        let mine = Word::new(State::Inserting, owned.gen(), key.fp, fresh);
        // Release: a resolver that Acquire-loads this INSERTING word also sees the tag.
        word.store(mine.0, Ordering::Release);
        self.order_after_publishing();
        if self.resolve(slot, mine, key, &window) {
            Insert::Won
        } else {
            // Whoever ended our copy freed the slot and gave its unit back ("Who frees a slot").
            Insert::Lost
        }
    }

    /// Runs the resolution for another thread's `INSERTING` copy, so nobody waits for it.
    pub(super) fn help(&self, slot: usize, copy: Word, key: &Key) {
        self.order_after_publishing();
        self.resolve(slot, copy, key, &self.window_blocks(key));
    }

    /// Claims an `EMPTY` slot of `key`'s window as `OWNED`, starting its next generation;
    /// returns the slot and the word claimed. Tries the emptier of its two blocks first, the
    /// first on a tie (any order is correct: the resolution ranks copies by window order, not
    /// by claim order; the choice only keeps blocks level).
    fn claim(&self, key: &Key, window: &Window) -> Option<(usize, Word)> {
        let [(_, home, block), (_, second, width)] = *window;
        let second_first = width > 0 && self.empties(second) > self.empties(home);
        let order = if second_first {
            [(second, width), (home, block)]
        } else {
            [(home, block), (second, width)]
        };
        for (start, width) in order {
            let Some(words) = self.words.get(start..start + width) else {
                continue;
            };
            if let ControlFlow::Break(claimed) = each_slot::<true, _>(words, |i, word| {
                // Relaxed: a hint only; the CAS decides.
                let empty = Word(word.load(Ordering::Relaxed));
                if !empty.is_empty() {
                    return ControlFlow::Continue(());
                }
                let owned = empty.claimed_by(key.fp);
                match word.compare_exchange(
                    empty.0,
                    owned.0,
                    // Acquire: order our tag write after every access of the slot's previous
                    // incarnation (its free or reclaim was Release).
                    Ordering::Acquire,
                    // Relaxed: on failure we move to the next slot.
                    Ordering::Relaxed,
                ) {
                    Ok(_) => ControlFlow::Break((start + i, owned)),
                    Err(_) => ControlFlow::Continue(()),
                }
            }) {
                return Some(claimed);
            }
        }
        None
    }

    /// `EMPTY` slots in the block starting at `start`.
    fn empties(&self, start: usize) -> usize {
        let block = self
            .words
            .get(start..start + self.shape.block)
            .unwrap_or_default();
        let mut empties = 0;
        let _ = each_slot::<true, ()>(block, |_, word| {
            // Relaxed: a hint for choosing a block only; the claim's CAS decides.
            empties += usize::from(Word(word.load(Ordering::Relaxed)).is_empty());
            ControlFlow::Continue(())
        });
        empties
    }

    /// The RMW every resolution starts with; see "Why at most one copy becomes a member".
    fn order_after_publishing(&self) {
        // AcqRel: the RMWs on `order` form one chain; each synchronises with all earlier ones,
        // so of two resolutions the later sees every copy published before the earlier began.
        self.order.fetch_add(1, Ordering::AcqRel);
    }

    /// Resolves copy `mine` at `slot`: returns whether it is (now) the key's member.
    fn resolve(&self, slot: usize, mine: Word, key: &Key, window: &Window) -> bool {
        let my_rank = rank(window, slot);
        let copies = Copies::of(key.fp);
        for &(rank, start, width) in window {
            let Some(words) = self.words.get(start..start + width) else {
                continue;
            };
            let met = each_slot::<true, _>(words, |i, word| {
                let other = start + i;
                if other == slot {
                    return ControlFlow::Continue(());
                }
                // Acquire: see the tag published with an INSERTING copy, and everything before
                // a promotion.
                let seen = Word(word.load(Ordering::Acquire));
                if !copies.matches(seen) {
                    return ControlFlow::Continue(());
                }
                match self.meet(slot, mine, key, copies, other, rank + i < my_rank, seen) {
                    Some(won) => ControlFlow::Break(won),
                    None => ControlFlow::Continue(()),
                }
            });
            if let ControlFlow::Break(won) = met {
                return won;
            }
        }
        self.settle(slot, mine, key, State::Member)
    }

    /// Copy `mine` at `slot` meets `seen`, loaded from `other` (nearer the window's start than
    /// `mine` if `nearer`), which carries the key's fingerprint: if it is a copy of the key
    /// that beats ours, concede (`Some`: whether ours is the member after all); if ours beats
    /// it, collide it and go on (`None`). Rare (two first charges of one key racing, or a
    /// fingerprint twin), so out of the scan's loop.
    #[inline(never)]
    // A scan's state, handed over as it stands.
    #[allow(clippy::too_many_arguments)]
    fn meet(
        &self,
        slot: usize,
        mine: Word,
        key: &Key,
        copies: Copies,
        other: usize,
        nearer: bool,
        mut seen: Word,
    ) -> Option<bool> {
        let (word, tag) = self.slot(other)?;
        loop {
            // Acquire: as every tag load (see "Orderings" in the module docs).
            if !copies.matches(seen) || tag.load(Ordering::Acquire) != key.tag {
                return None;
            }
            if seen.state() == State::Member || nearer {
                return Some(self.concede(slot, mine, key));
            }
            // A copy further along the window loses to ours: collide it, freeing its slot.
            match word.compare_exchange(
                seen.0,
                seen.emptied().0,
                // AcqRel: Release so the slot's next claimer (Acquire) is ordered after
                // this incarnation; its owner learns of the collision from its own failed
                // settle and never touches the slot again.
                Ordering::AcqRel,
                // Acquire: re-examine whatever replaced it, tag included.
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // We ended that incarnation, so we give its unit back.
                    self.release();
                    return None;
                }
                // It was promoted, collided or freed meanwhile: look again.
                Err(actual) => seen = Word(actual),
            }
        }
    }

    /// Ends copy `mine` (it is beaten); returns whether it turned out to be the member after
    /// all (a helper promoted it first).
    fn concede(&self, slot: usize, mine: Word, key: &Key) -> bool {
        self.settle(slot, mine, key, State::Empty)
    }

    /// Moves copy `mine` from `INSERTING` to `to` (`MEMBER`: promoted; `EMPTY`: conceded, and
    /// then this call gives the slot's unit back) by CAS; returns whether the slot holds this
    /// very incarnation as the key's member, whoever promoted it.
    fn settle(&self, slot: usize, mine: Word, key: &Key, to: State) -> bool {
        let Some((word, _)) = self.slot(slot) else {
            return false;
        };
        let next = if to == State::Empty {
            mine.emptied()
        } else {
            mine.with_state(to)
        };
        match word.compare_exchange(
            mine.0,
            next.0,
            // AcqRel: a promotion publishes the member (later charges extend this release
            // sequence); a concession frees the slot for the next claimer (Acquire).
            Ordering::AcqRel,
            // Acquire: on failure read whether a helper promoted it or someone ended it.
            Ordering::Acquire,
        ) {
            Ok(_) if to == State::Empty => {
                // We ended this incarnation, so we give its unit back.
                self.release();
                false
            }
            Ok(_) => true,
            Err(actual) => {
                let actual = Word(actual);
                // Our incarnation promoted by a helper (and maybe charged since): ours. Any
                // other word means someone ended our copy and freed the slot for us.
                actual.state() == State::Member
                    && actual.same_incarnation(mine)
                    && actual.fp() == key.fp
            }
        }
    }

    /// Takes one unit of the cap; false when every entry the cap allows is taken.
    fn reserve(&self) -> bool {
        // Relaxed: `live` is a counter; it publishes no memory, and the CAS keeps it <= cap.
        self.live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                (live < self.cap).then(|| live + 1)
            })
            .is_ok()
    }

    /// Gives back one unit of the cap: called once per incarnation, by whoever ended it.
    pub(super) fn release(&self) {
        // Relaxed: as in `reserve`.
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A slot's place in its key's window order (its first block, then its second).
fn rank(window: &Window, slot: usize) -> usize {
    let [(_, home, block), (second_rank, second, _)] = *window;
    match slot.checked_sub(home) {
        Some(offset) if offset < block => offset,
        _ => second_rank + slot.wrapping_sub(second),
    }
}
