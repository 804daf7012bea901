//! Removing entries as judged: the one scan every reclamation runs, by CAS from the exact
//! word judged removable (invariant 4 in [`crate::table`]).

use super::{State, Table, Word};
use crate::sync::atomic::Ordering;

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
        let mut freed = 0;
        let mut smallest_kept: Option<u64> = None;
        for word in self.words.iter() {
            // Acquire: judge the latest incarnation, as any slot-word load.
            let mut seen = Word(word.load(Ordering::Acquire));
            while seen.state() == State::Member {
                if !removable(seen.value()) {
                    smallest_kept =
                        Some(smallest_kept.map_or(seen.value(), |m| m.min(seen.value())));
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
}
