//! Reclamation of idle (zero) entries, paced by the acquires of entry-less actors.

use super::{count_of, Shared};
use crate::sync::atomic::Ordering;

impl Shared {
    /// One more acquire of an actor that had no entry (an insert, or a miss at the cap).
    pub(super) fn count_absent(&self) -> u64 {
        // Relaxed: a counter that only paces reclamation scans.
        self.absent.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// At the cap: removes every entry whose count is zero, if a scan is due; returns whether
    /// it freed any. A scan is due once `actors` acquires of entry-less actors have happened
    /// since the last one, so its cost (all the slots, 8 × `actors`) is amortised over at least
    /// `actors` acquires, whatever an adversary arranges.
    #[cold]
    pub(super) fn reclaim_idle_entries(&self) -> bool {
        let absent = self.count_absent();
        // Relaxed: a pacing counter; the CAS below picks one scanner.
        let due = self.next_scan.load(Ordering::Relaxed);
        if absent < due {
            return false;
        }
        let next = absent.saturating_add(self.table.cap() as u64);
        if self
            .next_scan
            // Relaxed: only pacing; the scan's own CASes carry the table's orderings.
            .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            // Another thread is scanning now; let it.
            return false;
        }
        // Whether DIRTY or not: a new entry of the actor is born DIRTY again.
        let (freed, _) = self.table.reclaim(|value| count_of(value) == 0);
        freed > 0
    }
}
