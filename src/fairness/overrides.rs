//! Per-actor quota overrides that change at runtime: a fixed-size, lock-free open-addressed
//! array of `(actor hash, limit)` slots, sized at build.
//!
//! # Protocol
//!
//! A slot is two words: `key`, the actor's 64-bit keyed hash (0 while the slot is free), and
//! `limit`, the override (`ABSENT` when the actor has none). An actor's slot is found by
//! probing linearly from `hash mod slots`.
//!
//! * **Claim.** Setting an override for an actor without a slot takes the claim lock (a
//!   configuration path: no acquire ever takes it), probes again, and stores its hash in the
//!   first free slot of its probe sequence, if fewer than `capacity` are claimed (else
//!   [`QuotasConfigError::TooManyOverrides`]). A claimed key is never cleared, so a probe that
//!   meets the actor's key before a free slot has found its only slot. Claims are serialized
//!   because two claimers of one actor racing lock-free either took two slots or, at the last
//!   place, refused one of them for a place the other then took (the loom model
//!   `racing_overrides_of_one_actor_share_one_slot` found the second).
//! * **Set / remove.** A swap of the `limit` word. Removing leaves the key: the slot stays the
//!   actor's, and setting it again takes no new place. So the capacity counts distinct actors
//!   ever given an override, not overrides present.
//! * **Look up** (every acquire, once any override was ever claimed): probe to the actor's key
//!   (then load `limit`) or to a free slot (none). Without any claim, one load answers "none".
//!
//! # Invariants
//!
//! 1. An actor has at most one slot, and a lookup finds it (claimed keys are never cleared,
//!    and the probe sequence is fixed): tests `overrides_set_and_removed_at_runtime`,
//!    `two_claimers_of_one_actor_share_one_slot`.
//! 2. At most `capacity` slots are claimed; a claim beyond is refused and changes nothing
//!    (test `an_override_beyond_capacity_is_refused_and_changes_nothing`).
//!
//! # Orderings
//!
//! Every word here publishes only itself: a lookup that sees a key but not yet its limit
//! (`ABSENT`), or a free slot where a claim is landing, answers "no override", the state
//! before the `set` still in progress. So every access is `Relaxed`; the claim lock is what
//! makes a slot one actor's, and orders every claim after the earlier ones (so a thread that
//! synchronizes with a setter also sees the keys its probe passes over). A thread that set an
//! override, and any thread that synchronizes with it afterwards, sees it (or a later value)
//! on its next acquire; coherence on each word means no thread sees an older value after a
//! newer one.

use super::QuotasConfigError;
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::sync::Mutex;

/// `limit` of a slot whose actor has no override.
const ABSENT: u64 = u64::MAX;
/// `key` of a free slot.
const FREE: u64 = 0;

/// Default number of distinct actors that can be given an override at runtime, beyond those
/// given at build.
pub const DEFAULT_OVERRIDE_CAPACITY: usize = 64;

/// The override slots.
#[derive(Debug)]
pub(super) struct Overrides {
    keys: Box<[AtomicU64]>,
    limits: Box<[AtomicU64]>,
    /// Slots claimed; at most `capacity`.
    claimed: AtomicUsize,
    /// Held while claiming a slot (never by a lookup).
    claiming: Mutex<()>,
    capacity: usize,
}

/// The key an actor's hash is stored under: never [`FREE`] (a hash of 0, one in 2^64, shares
/// the slot of hash 1).
#[inline]
fn key_of(hash: u64) -> u64 {
    hash.max(1)
}

impl Overrides {
    /// Room for `capacity` actors (at least those in `initial`), holding `initial`.
    pub(super) fn new(capacity: usize, initial: impl ExactSizeIterator<Item = (u64, u32)>) -> Self {
        let capacity = capacity.max(initial.len());
        // At most half full, so a probe meets a free slot (or its key) within a few steps.
        let slots = capacity.saturating_mul(2).max(1).next_power_of_two();
        let this = Self {
            keys: (0..slots).map(|_| AtomicU64::new(FREE)).collect(),
            limits: (0..slots).map(|_| AtomicU64::new(ABSENT)).collect(),
            claimed: AtomicUsize::new(0),
            claiming: Mutex::new(()),
            capacity,
        };
        for (hash, limit) in initial {
            // Within capacity by construction.
            let _ = this.set(hash, Some(limit));
        }
        this
    }

    /// Whether any actor was ever given an override (else every lookup answers "none").
    #[inline]
    pub(super) fn any(&self) -> bool {
        // Relaxed: see "Orderings".
        self.claimed.load(Ordering::Relaxed) != 0
    }

    /// How many distinct actors can hold a slot.
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of the slots.
    pub(super) fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.keys) + std::mem::size_of_val(&*self.limits)
    }

    /// The probe sequence of `key`: every slot once, from its home.
    #[inline]
    fn probe(&self, key: u64) -> impl Iterator<Item = usize> {
        let mask = self.keys.len() - 1;
        // Truncation intended: the low bits pick the home slot.
        let home = key as usize & mask;
        (0..self.keys.len()).map(move |step| (home + step) & mask)
    }

    /// The override of the actor whose keyed hash is `hash`, if any.
    #[inline]
    pub(super) fn get(&self, hash: u64) -> Option<u32> {
        // Relaxed: see "Orderings"; no claim ever, no override.
        if self.claimed.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let index = self.find(key_of(hash))?;
        // Relaxed: see "Orderings"; ABSENT (not a u32) reads as no override.
        let limit = self.limits.get(index)?.load(Ordering::Relaxed);
        u32::try_from(limit).ok()
    }

    /// The slot of `hash`, if it has one: a lookup, lock-free.
    fn find(&self, key: u64) -> Option<usize> {
        for index in self.probe(key) {
            // Relaxed: see "Orderings".
            match self.keys.get(index).map(|k| k.load(Ordering::Relaxed)) {
                Some(k) if k == key => return Some(index),
                Some(FREE) | None => return None,
                Some(_) => {}
            }
        }
        None
    }

    /// The slot of `hash`, claiming one if `claim` and it has none; `Ok(None)` if it has none
    /// and `claim` is false.
    fn slot(&self, hash: u64, claim: bool) -> Result<Option<usize>, QuotasConfigError> {
        let key = key_of(hash);
        if let Some(index) = self.find(key) {
            return Ok(Some(index));
        }
        if !claim {
            return Ok(None);
        }
        // Claims are serialized (a configuration path; no acquire takes this lock), so two
        // claimers of one actor cannot take two slots, nor one refuse for a place the other is
        // about to take. A poisoned lock guards no data: go on.
        let _claiming = self
            .claiming
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for index in self.probe(key) {
            let Some(word) = self.keys.get(index) else {
                break;
            };
            // Relaxed: see "Orderings"; under the lock only lookups race us, and they read
            // the key word alone.
            match word.load(Ordering::Relaxed) {
                k if k == key => return Ok(Some(index)),
                FREE => {
                    // Relaxed: counted under the lock; lookups read it only as "any claim".
                    if self.claimed.load(Ordering::Relaxed) >= self.capacity {
                        break;
                    }
                    // Relaxed: see "Orderings".
                    word.store(key, Ordering::Relaxed);
                    // Relaxed: counted under the lock; lookups read it only as "any claim".
                    self.claimed.fetch_add(1, Ordering::Relaxed);
                    return Ok(Some(index));
                }
                _ => {}
            }
        }
        Err(QuotasConfigError::TooManyOverrides {
            capacity: self.capacity,
        })
    }

    /// Whether [`Overrides::set`] would take `limit` for `hash`, changing nothing.
    pub(super) fn check(&self, hash: u64, limit: Option<u32>) -> Result<(), QuotasConfigError> {
        if limit == Some(0) {
            return Err(QuotasConfigError::ZeroQuota);
        }
        if limit.is_none() || self.slot(hash, false)?.is_some() {
            return Ok(());
        }
        // Relaxed: a snapshot; a racing claim may still take the last place.
        if self.claimed.load(Ordering::Relaxed) >= self.capacity {
            return Err(QuotasConfigError::TooManyOverrides {
                capacity: self.capacity,
            });
        }
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) the override of `hash`.
    pub(super) fn set(&self, hash: u64, limit: Option<u32>) -> Result<(), QuotasConfigError> {
        if limit == Some(0) {
            return Err(QuotasConfigError::ZeroQuota);
        }
        let Some(index) = self.slot(hash, limit.is_some())? else {
            // Removing an override the actor never had.
            return Ok(());
        };
        if let Some(word) = self.limits.get(index) {
            // Relaxed: see "Orderings".
            word.store(limit.map_or(ABSENT, u64::from), Ordering::Relaxed);
        }
        Ok(())
    }
}
