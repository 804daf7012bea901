//! Quotas changed at runtime: [`Quotas::set_quota`], [`Quotas::set_override`] and their
//! `check_*` twins.
//!
//! # Limits changed at runtime
//!
//! The default quota is one `AtomicU32`; the overrides are fixed-size slots (see
//! `overrides.rs`). An acquire reads the default once and the actor's override once, and
//! decides with those two numbers throughout (its entry's check, the overflow cap, the sketch
//! check), so it decides wholly under one setting of each.
//!
//! 1. **Permits held above a lowered quota stay.** Lowering a quota revokes nothing: every op
//!    already admitted keeps its place until its permit is dropped.
//! 2. **New acquires are refused until the count drops below the new quota**: an acquire is
//!    admitted only while the actor's ops in flight are fewer than its quota *as read by that
//!    acquire* (test `a_lowered_quota_refuses_until_the_count_drops_below_it`; loom:
//!    `a_lowered_quota_racing_acquires`).
//! 3. **A raised quota admits at once**, up to the new quota.
//! 4. **The shared overflow count is capped by the default quota read by the acquire**: lowered,
//!    it refuses new shared places until the count is below it.
//! 5. An op admitted while its actor's quota was [`UNLIMITED`](super::UNLIMITED) holds no place
//!    in the actor's count (it never did), so it does not count against a finite quota set
//!    later; the drain still waits for it.
//!
//! A change is visible to a thread from its next acquire after the store becomes visible to
//! it: the thread that made it, and any thread that synchronizes with that thread afterwards,
//! acquires under the new quota (or a later one), and no thread, having acquired under a
//! quota, acquires under an older one (coherence on the one word). An acquire racing a change
//! decides under the old quota or the new one, never a mix: its CAS on the actor's count checks
//! `count < quota` with the quota it read, so in every interleaving each admitted op was under
//! the quota its acquire read at the moment its count was incremented.

use super::{Quotas, QuotasConfigError};
use crate::sync::atomic::Ordering;
use std::hash::Hash;

impl Quotas {
    /// The quota of every actor without an override, now.
    pub fn quota(&self) -> u32 {
        self.shared.default_limit()
    }

    /// Replaces the quota of every actor without an override (and the cap of the shared
    /// overflow count), at once, while other threads acquire. Permits already held above a
    /// lowered quota stay; new acquires are refused until the actor's count drops below it.
    /// A quota of 0 is refused ([`QuotasConfigError::ZeroQuota`]) and changes nothing; use
    /// [`UNLIMITED`](super::UNLIMITED) to enforce none.
    ///
    /// ```
    /// use admit::fairness::Quotas;
    ///
    /// let quotas = Quotas::builder().quota(3).build()?;
    /// let held: Vec<_> = (0..3).map(|_| quotas.try_acquire("agent").unwrap()).collect();
    /// quotas.set_quota(1)?;
    /// assert_eq!(quotas.in_flight("agent"), 3, "permits held above the new quota stay");
    /// assert!(quotas.try_acquire("agent").is_err());
    /// drop(held);
    /// assert!(quotas.try_acquire("agent").is_ok(), "below the new quota again");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_quota(&self, limit: u32) -> Result<(), QuotasConfigError> {
        self.check_quota(limit)?;
        // Relaxed: see "Limits changed at runtime" in `reconfig.rs`; the quota publishes
        // nothing but itself.
        self.shared.limit.store(limit, Ordering::Relaxed);
        Ok(())
    }

    /// Whether [`Quotas::set_quota`] would take `limit`, changing nothing.
    pub fn check_quota(&self, limit: u32) -> Result<(), QuotasConfigError> {
        if limit == 0 {
            return Err(QuotasConfigError::ZeroQuota);
        }
        Ok(())
    }

    /// Gives `actor` its own quota (`Some`), or removes its override (`None`: the default
    /// applies again), at once, while other threads acquire; the rules of
    /// [`Quotas::set_quota`] apply to the actor's count. Refused, changing nothing: a quota of
    /// 0 ([`QuotasConfigError::ZeroQuota`]), and one more actor than the override slots hold
    /// ([`QuotasConfigError::TooManyOverrides`]; see
    /// [`QuotasBuilder::override_capacity`](super::QuotasBuilder::override_capacity)).
    ///
    /// ```
    /// use admit::fairness::Quotas;
    ///
    /// let quotas = Quotas::builder().quota(2).build()?;
    /// quotas.set_override("importer", Some(16))?;
    /// assert_eq!(quotas.limit_of("importer"), 16);
    /// quotas.set_override("importer", None)?;
    /// assert_eq!(quotas.limit_of("importer"), 2, "the default again");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_override<K: Hash + ?Sized>(
        &self,
        actor: &K,
        limit: Option<u32>,
    ) -> Result<(), QuotasConfigError> {
        let hash = self.shared.hasher.hash(actor, 0);
        self.shared.overrides.set(hash, limit)
    }

    /// Whether [`Quotas::set_override`] would take `limit` for `actor`, changing nothing (a
    /// racing override of another actor may still take the last slot first).
    pub fn check_override<K: Hash + ?Sized>(
        &self,
        actor: &K,
        limit: Option<u32>,
    ) -> Result<(), QuotasConfigError> {
        let hash = self.shared.hasher.hash(actor, 0);
        self.shared.overrides.check(hash, limit)
    }

    /// How many distinct actors may be given an override
    /// ([`QuotasBuilder::override_capacity`](super::QuotasBuilder::override_capacity)).
    pub fn override_capacity(&self) -> usize {
        self.shared.overrides.capacity()
    }
}
