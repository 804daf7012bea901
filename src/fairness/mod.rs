//! Per-actor admission quotas in front of a single writer.
//!
//! A sequencer is one thread serving everyone, so the cost of one actor's burst is paid by
//! every other actor's latency. An agent in a retry loop can put ten thousand ops in the
//! writer's channel, and the human behind them has no recourse but to wait.
//!
//! A quota is a ceiling on how many of one actor's ops can be awaiting a decision at once.
//! That is the number the fairness bound is stated in: **with a limit of Q, an op arriving from
//! anyone else waits behind at most Q ops from any single other actor**, whatever that actor is
//! doing. Exceeding the quota is answered at once with a rejection naming it
//! ([`QuotaExceeded`]), never by blocking, which would move the queue from the writer into the
//! submitter's thread and hide it.
//!
//! # What "actor" means here, and what it does not
//!
//! The actor is the key id the submission *claims*, taken without verifying its signature. It
//! has to be: verification belongs to the writer, which checks authorisation when it applies
//! the op, and verifying again at intake would double the cost of the one expensive step to
//! answer a question about scheduling.
//!
//! So this is fairness, not security, and the difference is worth being precise about:
//!
//! * **An honest actor flooding is bounded.** This is the case that actually happens (an agent
//!   in a retry loop), and the one the quota exists for.
//! * **An adversary claiming many identities evades the quota** by spreading across them.
//!   Bounding that is the job of a rate limiter that counts requests rather than trusting what
//!   they claim (see [`crate::limiter`]).
//! * **An adversary claiming someone else's key id can occupy that actor's places**, a denial
//!   of service against one actor. It is bounded but not prevented: places free the moment the
//!   writer decides, and a forged signature is rejected in one verification, so holding
//!   another actor's quota costs sustained request volume (the rate limiter's department
//!   again).
//!
//! Naming an actor is therefore not a claim about who anyone is. Nothing here is load-bearing
//! for authorisation, and nothing here may become so: the moment a decision about permission
//! keys off this string, an unverified field has been promoted to an identity.
//!
//! # Bounded memory
//!
//! The counts live in the crate's bounded entry table (see the
//! [design notes](crate::implementation)), keyed by the
//! actor's bytes under a per-process SipHash key, so the table does not grow with the names
//! clients invent. An entry exists only while its actor has an op in flight: the release that
//! brings its count to zero removes it in the same CAS (a zero count is indistinguishable from
//! an absent actor). When every entry is busy, actors without an entry share one overflow
//! count, still capped by the default quota, so no op is ever admitted unbounded.
//!
//! **The residual.** While the table is full (more than `actors` distinct actors each with an
//! op in flight), the actors without an entry share one quota: a flood from one of them can
//! hold the others' ops back, up to Q ops ahead of them in total. Actors with an entry keep
//! their own bound. With the default of 1024 places this needs 1024 actors concurrently
//! waiting on one writer. At that boundary, an acquire racing another acquire of the same
//! actor can find the table full and be counted against the shared quota rather than the
//! actor's entry (see "At the cap" in the [design notes](crate::implementation)): the actor's own count still never
//! exceeds its quota, and the shared count never exceeds the default quota.
//!
//! # Invariants
//!
//! 1. An actor's ops awaiting a decision never exceed its quota: each acquire is one CAS on
//!    the actor's count that refuses at the limit (loom: `acquires_never_exceed_the_quota`).
//! 2. A permit frees exactly one place, exactly once, on whichever thread drops it (ownership;
//!    loom: `a_permit_dropped_on_another_thread_frees_one_place`).
//! 3. Removing a zero entry racing a new acquire never loses or duplicates a count: removal is
//!    a CAS from the exact count-one word (loom: `removal_at_zero_racing_an_acquire`).
//! 4. The shared overflow count never exceeds the default quota, and the table never holds more
//!    than `actors` entries.
//! 5. [`Quotas::wait_idle`] returns only once nothing is in flight, woken by the release that
//!    brought the total to zero (loom: `wait_idle_is_woken_by_the_last_release`).
//!
//! Invariants 1, 3 and 4 are also checked against a sequential reference by proptest and by the
//! `fairness` fuzz target. The bound itself is tested by counting queue positions.
//!
//! # Orderings
//!
//! Counts live in table words (see the [design notes](crate::implementation) for those orderings). The overflow count
//! is a counter (`Relaxed`, its CAS keeps it under the quota). The total in flight is
//! decremented with `Release` and read by the drain with `Acquire`, so everything the writer
//! did before dropping its last permit happens before `wait_idle` returns.

mod error;
mod permit;
#[cfg(test)]
mod tests;

pub use error::{QuotaExceeded, QuotasError};
pub use permit::Permit;

use crate::sync::atomic::{AtomicU32, Ordering};
use crate::sync::{self, Arc};
use crate::table::{Geometry, KeyHasher, Table, Update, Verdict, MAX_CAP};
use crossbeam_utils::CachePadded;
use permit::Held;
use std::collections::HashMap;

/// Default ceiling on one actor's ops awaiting a decision.
///
/// 32: with a writer that applies an op in `a`, an op from anyone else waits at most `32 × a`
/// behind any one flooding actor; 1.6 ms at a 50 µs apply, 32 ms at 1 ms. An honest client
/// pipelining to the writer rarely needs more than a few dozen decisions outstanding to keep
/// its share of the writer busy, so 32 bounds the flood without throttling honest pipelining.
pub const DEFAULT_QUOTA: u32 = 32;

/// A limit meaning "do not enforce one": the actor is never refused (the drain still counts it).
pub const UNLIMITED: u32 = u32::MAX;

/// Default number of actors that can hold an entry of their own at once.
pub const DEFAULT_ACTORS: usize = 1024;

/// Shared per-actor in-flight counts. Cloneable; every clone refers to the same table.
#[derive(Debug, Clone)]
pub struct Quotas {
    shared: Arc<Shared>,
}

/// What every clone and every permit points at.
#[derive(Debug)]
struct Shared {
    table: Table,
    hasher: KeyHasher,
    limit: u32,
    overrides: HashMap<Box<[u8]>, u32>,
    /// Ops in flight of actors without an entry, capped by `limit`.
    overflow: CachePadded<AtomicU32>,
    /// Every op in flight, for the drain.
    in_flight: CachePadded<AtomicU32>,
}

/// Builds [`Quotas`]: `Quotas::builder().quota(16).actors(4096).build()`.
#[derive(Debug, Clone)]
#[must_use]
pub struct QuotasBuilder {
    limit: u32,
    geometry: Geometry,
    overrides: HashMap<Box<[u8]>, u32>,
    hash_keys: Option<(u64, u64)>,
}

impl Default for QuotasBuilder {
    fn default() -> Self {
        Self {
            limit: DEFAULT_QUOTA,
            geometry: Geometry::new(DEFAULT_ACTORS),
            overrides: HashMap::new(),
            hash_keys: None,
        }
    }
}

impl QuotasBuilder {
    /// The quota of every actor without an override ([`DEFAULT_QUOTA`] by default).
    pub fn quota(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// How many actors can hold an entry of their own at once ([`DEFAULT_ACTORS`]).
    pub fn actors(mut self, actors: usize) -> Self {
        self.geometry.cap = actors;
        self
    }

    /// A quota for one actor, replacing the default for it (0 is refused at `build`).
    pub fn override_quota(mut self, actor: &[u8], limit: u32) -> Self {
        self.overrides.insert(actor.into(), limit);
        self
    }

    /// Tiny tables and fixed hash keys for loom models. Not part of the supported API.
    #[cfg(any(test, feature = "loom", feature = "fuzzing"))]
    #[doc(hidden)]
    pub fn model_geometry(
        mut self,
        slots_per_entry: usize,
        window: usize,
        keys: (u64, u64),
    ) -> Self {
        self.geometry.slots_per_entry = slots_per_entry.max(1);
        self.geometry.window = window.max(1);
        self.hash_keys = Some(keys);
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Quotas, QuotasError> {
        if self.limit == 0 || self.overrides.values().any(|&l| l == 0) {
            return Err(QuotasError::ZeroQuota);
        }
        let actors = self.geometry.cap;
        if actors == 0 {
            return Err(QuotasError::ZeroActors);
        }
        if actors > MAX_CAP {
            return Err(QuotasError::TooManyActors {
                actors,
                max: MAX_CAP,
            });
        }
        Ok(self.assemble())
    }

    /// Builds from settings already known to be valid.
    fn assemble(self) -> Quotas {
        let table = Table::new(self.geometry);
        let hasher = match self.hash_keys {
            Some((k0, k1)) => KeyHasher::with_keys(k0, k1, table.slots()),
            None => KeyHasher::random(table.slots()),
        };
        Quotas {
            shared: Arc::new(Shared {
                table,
                hasher,
                limit: self.limit,
                overrides: self.overrides,
                overflow: CachePadded::new(AtomicU32::new(0)),
                in_flight: CachePadded::new(AtomicU32::new(0)),
            }),
        }
    }
}

impl Default for Quotas {
    fn default() -> Self {
        Self::new()
    }
}

impl Quotas {
    /// [`DEFAULT_QUOTA`] for every actor, [`DEFAULT_ACTORS`] entries.
    pub fn new() -> Self {
        QuotasBuilder::default().assemble()
    }

    /// A builder starting from the defaults.
    pub fn builder() -> QuotasBuilder {
        QuotasBuilder::default()
    }

    /// Admits one op of `actor` if it has fewer than its quota awaiting a decision.
    ///
    /// Lock-free and never blocking: over the quota it answers at once.
    #[inline]
    pub fn try_acquire<'a>(&self, actor: &'a [u8]) -> Result<Permit, QuotaExceeded<'a>> {
        let held = self.shared.acquire(actor)?;
        Ok(Permit {
            shared: self.shared.clone(),
            held,
        })
    }

    /// Blocks the calling thread until no op is in flight, woken by the release that brings the
    /// total to zero. For shutdown: stop submitting first, or new ops keep it waiting. Never
    /// call it from a submitter.
    pub fn wait_idle(&self) {
        let total = &*self.shared.in_flight;
        loop {
            // Acquire: pairs with the Release of the last permit's decrement, so the writer's
            // work before it happens before we return.
            let now = total.load(Ordering::Acquire);
            if now == 0 {
                return;
            }
            // Sleeps until woken by the release that reaches zero (or returns at once if the
            // total already moved, to re-check).
            sync::wait(total, now);
        }
    }

    /// Ops of `actor` counted in its own entry (not counting shared overflow places).
    pub fn in_flight(&self, actor: &[u8]) -> u32 {
        let key = self.shared.hasher.key(actor, 0);
        let count = self.shared.table.get(&key).unwrap_or(0);
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// Every op in flight, all actors together.
    pub fn total_in_flight(&self) -> u32 {
        // Relaxed: a snapshot of a counter.
        self.shared.in_flight.load(Ordering::Relaxed)
    }

    /// Ops in flight counted against the shared overflow quota.
    pub fn shared_in_flight(&self) -> u32 {
        // Relaxed: a snapshot of a counter.
        self.shared.overflow.load(Ordering::Relaxed)
    }

    /// The quota of `actor`.
    pub fn limit_of(&self, actor: &[u8]) -> u32 {
        self.shared.limit_of(actor)
    }

    /// Actors holding an entry now; never above [`Quotas::actors`].
    pub fn live_actors(&self) -> usize {
        self.shared.table.len()
    }

    /// How many actors can hold an entry at once.
    pub fn actors(&self) -> usize {
        self.shared.table.cap()
    }

    /// Bytes of the table: fixed at construction, whatever actors arrive.
    pub fn memory_bytes(&self) -> usize {
        self.shared.table.memory_bytes()
    }
}

impl Shared {
    #[inline]
    fn limit_of(&self, actor: &[u8]) -> u32 {
        if self.overrides.is_empty() {
            return self.limit;
        }
        self.overrides.get(actor).copied().unwrap_or(self.limit)
    }

    #[inline]
    fn acquire<'a>(&self, actor: &'a [u8]) -> Result<Held, QuotaExceeded<'a>> {
        // Counted before the table so the drain never misses an op being admitted.
        // Relaxed: the increment publishes nothing; the drain only waits for it to fall.
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let held = self.place(actor);
        if held.is_err() {
            self.finish_one();
        }
        held
    }

    fn place<'a>(&self, actor: &'a [u8]) -> Result<Held, QuotaExceeded<'a>> {
        let limit = self.limit_of(actor);
        if limit == UNLIMITED {
            return Ok(Held::Unlimited);
        }
        let key = self.hasher.key(actor, 0);
        let update = self.table.update(&key, 0, |count| {
            if count < u64::from(limit) {
                Verdict::Commit(count + 1, Ok(()))
            } else {
                Verdict::Keep(Err(count))
            }
        });
        match update {
            Update::Landed {
                slot,
                result: Ok(()),
            } => Ok(Held::Entry { slot, key }),
            Update::Landed {
                result: Err(count), ..
            } => Err(QuotaExceeded {
                actor,
                limit,
                in_flight: u32::try_from(count).unwrap_or(u32::MAX),
                shared: false,
            }),
            Update::AtCap | Update::WindowFull => self.place_shared(actor),
        }
    }

    /// The table is full: count the op against the overflow quota shared by every actor
    /// without an entry.
    #[cold]
    fn place_shared<'a>(&self, actor: &'a [u8]) -> Result<Held, QuotaExceeded<'a>> {
        let limit = self.limit;
        // Relaxed: a counter; the CAS keeps it at or below the quota.
        self.overflow
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .map(|_| Held::Overflow)
            .map_err(|in_flight| QuotaExceeded {
                actor,
                limit,
                in_flight,
                shared: true,
            })
    }

    #[inline]
    fn release(&self, held: &Held) {
        match held {
            Held::Entry { slot, key } => {
                let released = self.table.update_slot(*slot, key, |count| {
                    if count <= 1 {
                        // Back to zero: indistinguishable from absent, so the entry goes.
                        Verdict::Remove(())
                    } else {
                        Verdict::Commit(count - 1, ())
                    }
                });
                // Our count keeps the entry alive, so it must still be there.
                debug_assert!(released.is_some(), "a permit's entry vanished");
            }
            Held::Overflow => {
                // Relaxed: a counter.
                self.overflow.fetch_sub(1, Ordering::Relaxed);
            }
            Held::Unlimited => {}
        }
        self.finish_one();
    }

    #[inline]
    fn finish_one(&self) {
        // Release: the drain's Acquire load of zero sees everything done before this release.
        if self.in_flight.fetch_sub(1, Ordering::Release) == 1 {
            sync::wake_all(&self.in_flight);
        }
    }
}
