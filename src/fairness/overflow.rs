//! The shared overflow count: a place for an actor that has no entry and can get none.

use super::count::Count;
use super::permit::Held;
use super::{QuotasRefused, Shared};
use crate::sync::atomic::{fence, Ordering};
use crate::table::Key;

impl Shared {
    /// The actor has no entry and none can be had: count the op against the overflow quota
    /// shared by every actor without an entry (capped by the default quota) and, through the
    /// sketch, against the actor's own `limit`. `None` if the actor's entry appeared meanwhile
    /// (the caller retries there). With the place, what the acquire counts (`N`): the actor's
    /// places are the sketch's estimate.
    #[cold]
    pub(super) fn place_shared<N: Count>(
        &self,
        cap: u32,
        limit: u32,
        key: Key,
    ) -> Option<Result<(Held, N), QuotasRefused>> {
        if let Err(in_flight) = self
            .overflow
            // Relaxed: a counter; the CAS keeps it at or below the default quota.
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < cap).then_some(n + 1)
            })
        {
            return Some(Err(QuotasRefused {
                limit: cap,
                in_flight,
                shared: true,
                class: 0,
            }));
        }
        let held = Held::Overflow { key };
        self.sketch.add(&key);
        // SeqCst fence between our sketch write and our entry lookup, pairing with
        // `validate`'s: either the entry's validation sees our place, or we see its entry
        // (see "Orderings").
        fence(Ordering::SeqCst);
        if self.table.get(&key).is_some() {
            self.release(&held);
            return None;
        }
        let mine = self.sketch.estimate(&key);
        if mine > limit {
            self.release(&held);
            return Some(Err(QuotasRefused {
                limit,
                in_flight: mine.saturating_sub(1),
                shared: false,
                class: 0,
            }));
        }
        Some(Ok((held, N::of(u64::from(mine), limit))))
    }
}
