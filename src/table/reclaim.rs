//! Removing entries as judged: the one scan every reclamation runs, by CAS from the exact
//! word judged removable (invariant 4 in [`crate::table`]).

use super::{State, Table, Word};
use crate::sync::atomic::Ordering;
use std::ops::Range;

impl Table {
    /// Whether any member's value satisfies `pred` (a scan of every slot; `Acquire` loads).
    pub(crate) fn any_member(&self, mut pred: impl FnMut(u64) -> bool) -> bool {
        self.words.iter().any(|word| {
            // Acquire: see each member's latest value, as any slot-word load.
            let seen = Word(word.load(Ordering::Acquire));
            seen.state() == State::Member && pred(seen.value())
        })
    }

    /// Removes every member whose value satisfies `removable`, by CAS from the word judged.
    /// Returns how many were removed and the smallest value among the members kept.
    pub(crate) fn reclaim(&self, removable: impl Fn(u64) -> bool) -> (usize, Option<u64>) {
        self.reclaim_ranked(|value, _| removable(value), |value, _| value)
    }

    /// [`Table::reclaim`], judging each member by its value and its tag (which carries the
    /// key's class, see [`super::KeyHasher::class_of`]), and returning the smallest `rank` of
    /// the members kept instead (the limiter ranks its entries by the instant they hold, not
    /// their raw bits).
    pub(crate) fn reclaim_ranked(
        &self,
        removable: impl Fn(u64, u32) -> bool,
        rank: impl Fn(u64, u32) -> u64,
    ) -> (usize, Option<u64>) {
        self.reclaim_ranked_in(0..self.words.len(), removable, rank)
    }

    /// [`Table::reclaim_ranked`] over the slots `range` only (empty past the table's end).
    pub(crate) fn reclaim_ranked_in(
        &self,
        range: Range<usize>,
        removable: impl Fn(u64, u32) -> bool,
        rank: impl Fn(u64, u32) -> u64,
    ) -> (usize, Option<u64>) {
        let mut freed = 0;
        let mut smallest_kept: Option<u64> = None;
        let words = self.words.get(range.clone()).unwrap_or_default();
        let tags = self.tags.get(range).unwrap_or_default();
        for (word, tag) in words.iter().zip(tags.iter()) {
            // Acquire: judge the latest incarnation, as any slot-word load.
            let mut seen = Word(word.load(Ordering::Acquire));
            while seen.state() == State::Member {
                // Acquire: after the word's Acquire load, so it is this incarnation's tag (see
                // "Orderings" in the module docs).
                let tag = tag.load(Ordering::Acquire);
                if !removable(seen.value(), tag) {
                    let kept = rank(seen.value(), tag);
                    smallest_kept = Some(smallest_kept.map_or(kept, |m| m.min(kept)));
                    break;
                }
                match word.compare_exchange(
                    seen.0,
                    seen.emptied().0,
                    // Release: the next claimer's Acquire orders its tag write after ours.
                    Ordering::Release,
                    // Acquire: it was charged meanwhile; judge the new word.
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        self.release();
                        freed += 1;
                        break;
                    }
                    Err(actual) => seen = Word(actual),
                }
            }
        }
        (freed, smallest_kept)
    }

    /// Calls `visit` with the slot and value of every member, one load each (Acquire, as any
    /// slot-word load): a snapshot per slot, not of the table.
    #[cfg(feature = "redis")]
    pub(crate) fn scan(&self, mut visit: impl FnMut(usize, u64)) {
        for (slot, word) in self.words.iter().enumerate() {
            // Acquire: see the member's latest value, as any slot-word load.
            let seen = Word(word.load(Ordering::Acquire));
            if seen.state() == State::Member {
                visit(slot, seen.value());
            }
        }
    }

    /// Rewrites every member's value that `f` maps to a new one, by CAS from the exact word
    /// read (a member charged meanwhile is judged again), while `going` holds; returns whether
    /// the pass reached the last slot. Never changes a word's state, generation or
    /// fingerprint, so it never frees, claims or moves an entry.
    /// `f` sees each member's value and tag (the tag carries the key's class).
    pub(crate) fn rewrite(
        &self,
        f: impl Fn(u64, u32) -> Option<u64>,
        going: impl Fn() -> bool,
    ) -> bool {
        for (word, tag) in self.words.iter().zip(self.tags.iter()) {
            if !going() {
                return false;
            }
            // Acquire: see the member's latest value, as any slot-word load.
            let mut seen = Word(word.load(Ordering::Acquire));
            while seen.state() == State::Member {
                // Acquire: this incarnation's tag, as in `reclaim_ranked`.
                let tag = tag.load(Ordering::Acquire);
                let Some(value) = f(seen.value(), tag) else {
                    break;
                };
                match word.compare_exchange(
                    seen.0,
                    seen.with_value(value).0,
                    // AcqRel: as a charge's CAS (a decision that reads the new value sees
                    // everything the rewriter saw, including the base it encoded against).
                    Ordering::AcqRel,
                    // Acquire: it was charged meanwhile; judge the new word.
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(actual) => seen = Word(actual),
                }
            }
        }
        true
    }
}
