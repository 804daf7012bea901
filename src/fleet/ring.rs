//! The request ring: decisions hand lease requests to the worker without locking or waiting.
//!
//! A fixed array of `AtomicU64` slots and a `tail` counter. A decision that set `PENDING` in
//! its lease word takes an index with one `fetch_add` and stores its packed key there (a
//! nonzero word); the worker swaps slots back to 0 as it reads them. When the ring laps the
//! worker, a newer request overwrites an older one: the older entry keeps `PENDING` until its
//! stamp passes, then its next decision asks again (`REQUEST_TIMEOUT_MS`). So a lost request
//! delays a lease; it never blocks a decision and never grants anything (and an entry left in
//! debt by a lost request is collected by the lease thread's sweep, `worker_core.rs`).

// Compiled without the `redis` feature for the models alone.
#![cfg_attr(not(feature = "redis"), allow(dead_code))]

use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots in the ring.
pub(crate) const RING: usize = 4096;

pub(crate) struct Ring {
    slots: Box<[AtomicU64]>,
    tail: AtomicUsize,
}

impl Ring {
    pub(crate) fn new() -> Self {
        Self::with_slots(RING)
    }

    /// A ring of `slots` slots (a power of two), which the models keep small so that it laps.
    pub(crate) fn with_slots(slots: usize) -> Self {
        Self {
            slots: (0..slots.max(1).next_power_of_two())
                .map(|_| AtomicU64::new(0))
                .collect(),
            tail: AtomicUsize::new(0),
        }
    }

    /// Slots in the ring: a power of two.
    fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Queues `key` (nonzero).
    pub(crate) fn push(&self, key: u64) {
        // Relaxed: the index only spreads writers over slots; the slot's own store carries
        // the key.
        let at = self.tail.fetch_add(1, Ordering::Relaxed) & (self.slot_count() - 1);
        if let Some(slot) = self.slots.get(at) {
            // Release: pairs with the worker's Acquire swap (nothing else rides on it; the
            // key is the whole message).
            slot.store(key, Ordering::Release);
        }
    }

    /// Takes every queued key from `*head` to the current tail, calling `f` on each; returns
    /// how many were taken. A slot whose store has not landed yet is picked up on a later lap
    /// or lost (see the module docs). The models drain with this; the lease thread counts
    /// what a lap overwrote (`drain_counting`).
    #[cfg(any(test, admit_loom, fuzzing))]
    pub(crate) fn drain(&self, head: &mut usize, f: impl FnMut(u64)) -> usize {
        self.drain_counting(head, &mut 0, f)
    }

    /// `drain`, adding to `overwritten` the requests a lap overwrote since the last
    /// drain (more than the ring's slots pushed in between): those keys ask again once their
    /// request's stamp passed.
    pub(crate) fn drain_counting(
        &self,
        head: &mut usize,
        overwritten: &mut u64,
        mut f: impl FnMut(u64),
    ) -> usize {
        // Relaxed: a stale tail only defers keys to the next drain.
        let tail = self.tail.load(Ordering::Relaxed);
        let from = tail.saturating_sub(self.slot_count()).max(*head);
        *overwritten += u64::try_from(from - *head).unwrap_or(u64::MAX);
        let mut taken = 0;
        for i in from..tail {
            if let Some(slot) = self.slots.get(i & (self.slot_count() - 1)) {
                // Acquire: pairs with `push`'s Release store.
                let key = slot.swap(0, Ordering::Acquire);
                if key != 0 {
                    taken += 1;
                    f(key);
                }
            }
        }
        *head = tail;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_what_was_pushed_and_survives_a_lap() {
        let ring = Ring::new();
        let mut head = 0;
        for k in 1..=10 {
            ring.push(k);
        }
        let mut seen = Vec::new();
        assert_eq!(ring.drain(&mut head, |k| seen.push(k)), 10);
        assert_eq!(seen, (1..=10).collect::<Vec<_>>());
        for k in 1..=(RING as u64 + 5) {
            ring.push(k);
        }
        let (mut n, mut overwritten) = (0, 0);
        ring.drain_counting(&mut head, &mut overwritten, |_| n += 1);
        assert_eq!(n, RING, "a lap keeps the newest RING requests");
        assert_eq!(overwritten, 5, "and counts the ones it overwrote");
    }
}
