//! Reclamation of full entries: the idle sweep (every segment), and the scan of one segment
//! the reclaim hint says is due.

use super::era;
use super::hint::Seen;
use super::Limiter;
use crate::bucket::gcra;
use crate::clock::{Clock, ReadingAhead};
use crate::sync::atomic::Ordering;
use crate::table::Key;

impl<C: Clock> Limiter<C> {
    /// Reclaims every entry holding its full burst at `now_ns` (an idle sweep); returns how
    /// many. Changes nothing a caller can observe: a full entry and an absent one behave
    /// alike, and a later charge with a reading older than `now_ns` finds the identity's fresh
    /// entry no fuller than the removed one was (see "Readings and reclamation"). A reading
    /// ahead of the limiter's clock is refused and reclaims nothing.
    ///
    /// ```
    /// use admit::{BucketConfig, Clock, Limiter, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::starting_at(10_000_000_000);
    /// let limiter = Limiter::builder().build_with_clock([BucketConfig::new(1, Duration::from_millis(10))?], clock.clone())?;
    /// let now = clock.now_ns();
    /// assert!(limiter.try_acquire_at("x", 0, now - 20_000_000).is_ok()); // full again by now
    /// assert!(limiter.try_acquire_at("y", 0, now).is_ok()); // drained: kept
    /// assert_eq!(limiter.reclaim_full_at(now)?, 1);
    /// assert!(limiter.reclaim_full_at(u64::MAX).is_err(), "a reading ahead of the clock");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reclaim_full_at(&self, now_ns: u64) -> Result<usize, ReadingAhead> {
        self.horizon.admit(now_ns, &self.clock)?;
        let now = self.now_tick(now_ns);
        self.enter(now);
        let freed = (0..self.hint.segments())
            .filter_map(|segment| self.hint.due(segment, now))
            .map(|seen| self.reclaim_segment(seen, now))
            .sum();
        Ok(freed)
    }

    /// Reclaims every full entry of the segment that holds `key`'s home block, if the hint
    /// says it may hold one (one segment at most: the bound on a saturated miss's work, see
    /// `hint`); returns how many.
    #[cold]
    pub(super) fn reclaim_due(&self, key: &Key, now: u64) -> usize {
        match self.hint.due(self.hint.segment_of(key.home), now) {
            Some(seen) => self.reclaim_segment(seen, now),
            None => 0,
        }
    }

    /// Reclaims every full entry of `seen`'s segment and settles its hint; returns how many.
    fn reclaim_segment(&self, seen: Seen, now: u64) -> usize {
        // A FRESH member is an insert whose first charge is in flight: keep it. Every entry
        // is judged by what it holds now in its class's era (see `era`).
        let full_at = |value, tag| self.judge_tagged(value, tag).0;
        let slots = self.hint.slots_of(seen.segment(), self.table.slots());
        let (freed, smallest_kept) = self.table.reclaim_ranked_in(
            slots,
            |value, tag| {
                let removable =
                    value & era::CODED != gcra::FRESH && gcra::is_full(full_at(value, tag), now);
                if removable {
                    // Relaxed: sequenced before the Release CAS that removes the entry, so any
                    // thread that sees the slot freed (Acquire) also sees the floor; the floor
                    // publishes nothing else.
                    self.floor.fetch_max(now, Ordering::Relaxed);
                }
                removable
            },
            full_at,
        );
        self.hint.settle(seen, smallest_kept);
        if freed > 0 {
            self.entries_changed();
        }
        freed
    }
}
