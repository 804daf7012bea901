//! Per-actor quota overrides that change at runtime: a fixed-size, lock-free open-addressed
//! array of `(actor hash, limit)` slots, sized at build.
//!
//! # Protocol
//!
//! A slot is two words: `key`, the actor's 64-bit keyed hash (0 while the slot is free), and
//! `limit`, the override (`ABSENT` when the actor has none). An actor's slot is found by
//! probing linearly from `hash mod slots`.
//!
//! * **Claim.** Setting an override for an actor without a slot reserves one of the
//!   `capacity` places (a counter, refused at capacity: [`QuotasConfigError::TooManyOverrides`]),
//!   then CASes the first free slot of its probe sequence from 0 to its hash. A claimed key is
//!   never cleared, so a probe that meets the actor's key before a free slot has found its only
//!   slot, and two claimers of one actor end on the same slot (the loser of the CAS finds the
//!   winner's key and gives its place back).
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
//! (`ABSENT`) answers "no override", which is the state before the `set` that is still in
//! progress. So every access is `Relaxed`; the claim CAS's atomicity on the key word is what
//! makes a slot one actor's. A thread that set an override, and any thread that synchronizes
//! with it afterwards, sees it (or a later value) on its next acquire; coherence on each word
//! means no thread sees an older value after a newer one.

use super::QuotasConfigError;
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
    /// Slots claimed (or reserved by a claim in flight); at most `capacity`.
    claimed: AtomicUsize,
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
        let key = key_of(hash);
        for index in self.probe(key) {
            // Relaxed: see "Orderings".
            match self.keys.get(index).map(|k| k.load(Ordering::Relaxed)) {
                Some(k) if k == key => {
                    // Relaxed: see "Orderings"; ABSENT (not a u32) reads as no override.
                    let limit = self.limits.get(index)?.load(Ordering::Relaxed);
                    return u32::try_from(limit).ok();
                }
                Some(FREE) | None => return None,
                Some(_) => {}
            }
        }
        None
    }

    /// The slot of `hash`, claiming one if `claim`; `Err` when a claim finds no place.
    fn slot(&self, hash: u64, claim: bool) -> Result<Option<usize>, QuotasConfigError> {
        let key = key_of(hash);
        let mut reserved = false;
        for index in self.probe(key) {
            let Some(word) = self.keys.get(index) else {
                break;
            };
            // Relaxed: see "Orderings".
            let mut seen = word.load(Ordering::Relaxed);
            if seen == FREE && claim {
                if !reserved {
                    self.reserve()?;
                    reserved = true;
                }
                // Relaxed: the CAS's atomicity makes the slot one actor's; see "Orderings".
                match word.compare_exchange(FREE, key, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => return Ok(Some(index)),
                    Err(actual) => seen = actual,
                }
            }
            if seen == key {
                if reserved {
                    // Another claimer of this actor won the slot: give our place back.
                    // Relaxed: a counter.
                    self.claimed.fetch_sub(1, Ordering::Relaxed);
                }
                return Ok(Some(index));
            }
            if seen == FREE {
                // Not claiming, and the actor has no slot.
                return Ok(None);
            }
        }
        if reserved {
            // Relaxed: a counter (unreachable: the slots are twice the capacity).
            self.claimed.fetch_sub(1, Ordering::Relaxed);
        }
        Err(QuotasConfigError::TooManyOverrides {
            capacity: self.capacity,
        })
    }

    /// Takes one of the `capacity` places, or refuses.
    fn reserve(&self) -> Result<(), QuotasConfigError> {
        self.claimed
            // Relaxed: a counter; the CAS keeps it at or below the capacity.
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.capacity).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| QuotasConfigError::TooManyOverrides {
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
