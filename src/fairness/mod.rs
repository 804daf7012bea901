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
//! [design notes](crate::implementation)), keyed by the actor's bytes under a per-process
//! SipHash key, so the table does not grow with the names clients invent. An actor's entry is
//! made on its first op and kept while its count goes up and down: an acquire and its release
//! are then one CAS each. An entry whose count is back at zero is indistinguishable from an
//! absent actor, so it is free: when the table is full, a miss reclaims every zero entry (CAS
//! from the exact zero word, so an entry acquired meanwhile stays) and takes a place. Such a
//! scan reads every slot, so it runs at most once per `actors` acquires of entry-less actors:
//! its cost is amortised over them, whatever an adversary arranges, and a churn of new names
//! one at a time never waits for it. When no place can be had, actors without an entry share
//! one overflow count, still capped by the default quota, so no op is ever admitted unbounded.
//!
//! **The residual.** While the table is full (about `actors` distinct actors with ops in
//! flight, or idle entries not yet due for reclamation), actors without an entry share one
//! quota: a flood from one of them can hold the others' ops back, up to Q ops ahead of them in
//! total. Actors with an entry keep their own bound. With the default of 1024 places this needs
//! about 1024 actors active on one writer. At that boundary, an acquire racing another acquire
//! of the same actor can find the table full and be counted against the shared quota rather
//! than the actor's entry (see "At the cap" in the [design notes](crate::implementation)): the
//! actor's own count still never exceeds its quota, and the shared count never exceeds the
//! default quota.
//!
//! # Permits
//!
//! [`Quotas::try_acquire`] returns a [`Permit`] that borrows the `Quotas` handle, so an op of an
//! actor with an entry writes nothing shared but the actor's count: one CAS to acquire, one to
//! release (and a fence when the count returns to zero, for the drain). Hand it to a writer
//! spawned in [`std::thread::scope`], or keep the `Quotas` in a `static`. A writer thread that
//! must be `'static` without a static table takes [`OwnedPermit`]s from
//! [`Quotas::try_acquire_owned`] instead; each holds a reference-counted handle, which adds two
//! atomic operations per op.
//! Both free their place the same way, exactly once, wherever they are dropped.
//!
//! # Invariants
//!
//! 1. An actor's ops awaiting a decision never exceed its quota: each acquire is one CAS on
//!    the actor's count that refuses at the limit (loom: `acquires_never_exceed_the_quota`).
//! 2. A permit frees exactly one place, exactly once, on whichever thread drops it (ownership;
//!    loom: `a_permit_dropped_on_another_thread_frees_one_place`).
//! 3. Reclaiming a zero entry racing a new acquire never loses or duplicates a count: the
//!    reclaim is a CAS from the exact zero word (loom: `reclaiming_a_zero_entry_racing_an_acquire`).
//! 4. The shared overflow count never exceeds the default quota, the table never holds more
//!    than `actors` entries, and reclamation scans are paced (test
//!    `reclamation_scans_are_paced_by_entry_less_acquires`).
//! 5. [`Quotas::wait_idle`] returns only once nothing is in flight, and a release that brings a
//!    count to zero wakes it if it waits (loom: `wait_idle_is_woken_by_the_last_release`).
//!
//! Invariants 1, 3 and 4 are also checked against a sequential reference by proptest and by the
//! `fairness` fuzz target. The bound itself is tested by counting queue positions.
//!
//! # Orderings
//!
//! Counts live in table words (see the [design notes](crate::implementation) for those
//! orderings). The overflow and unlimited counts are counters (`Relaxed`; the overflow's CAS
//! keeps it under the quota). The drain is the one store/load race: a drain registers in
//! `waiters` then scans every count; a release that brings a count to zero then checks
//! `waiters`. Each side puts a `SeqCst` fence between its write and its read, so at least one
//! sees the other: the drain sees the zero, or the release sees the drain and bumps `epoch`
//! (`Release`; the drain reads it `Acquire`) and wakes it. A drain reads `epoch` before its
//! scan and sleeps only while `epoch` is unchanged, so a wake between the two is never lost.
//! Releases never make a system call unless a drain is waiting.

mod error;
mod permit;
#[cfg(test)]
mod tests;

pub use error::{QuotaExceeded, QuotasError};
pub use permit::{OwnedPermit, Permit};

use crate::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
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
    /// Ops in flight of actors whose quota is [`UNLIMITED`] (they hold no entry).
    unlimited: CachePadded<AtomicU32>,
    /// Acquires of actors that had no entry, ever; paces reclamation scans.
    absent: CachePadded<AtomicU64>,
    /// The `absent` count from which the next reclamation scan may run.
    next_scan: AtomicU64,
    /// Threads blocked in [`Quotas::wait_idle`].
    waiters: CachePadded<AtomicU32>,
    /// Bumped when a count reaches zero while a drain waits; the futex word drains sleep on.
    epoch: CachePadded<AtomicU32>,
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
                unlimited: CachePadded::new(AtomicU32::new(0)),
                absent: CachePadded::new(AtomicU64::new(0)),
                next_scan: AtomicU64::new(0),
                waiters: CachePadded::new(AtomicU32::new(0)),
                epoch: CachePadded::new(AtomicU32::new(0)),
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
    ///
    /// The permit borrows this handle; see [`Quotas::try_acquire_owned`] for one that does not.
    #[inline]
    pub fn try_acquire<'a>(&self, actor: &'a [u8]) -> Result<Permit<'_>, QuotaExceeded<'a>> {
        let held = self.shared.place(actor)?;
        Ok(Permit {
            shared: &self.shared,
            held,
        })
    }

    /// [`Quotas::try_acquire`], with a permit that holds its own handle to the table, for a
    /// writer thread that must be `'static`. It costs two more atomic operations per op (the
    /// handle's reference count going up here and down when the permit is dropped).
    #[inline]
    pub fn try_acquire_owned<'a>(&self, actor: &'a [u8]) -> Result<OwnedPermit, QuotaExceeded<'a>> {
        let held = self.shared.place(actor)?;
        Ok(OwnedPermit {
            shared: self.shared.clone(),
            held,
        })
    }

    /// Blocks the calling thread until no op is in flight, woken by the release that brings the
    /// last count to zero (no busy loop; a release wakes only when someone is waiting). For
    /// shutdown: stop submitting first, or new ops keep it waiting. Never call it from a
    /// submitter.
    pub fn wait_idle(&self) {
        let shared = &*self.shared;
        // SeqCst, then the fence below: either our scan sees a release's zero, or that
        // release sees us waiting and wakes us (see "Orderings").
        shared.waiters.fetch_add(1, Ordering::SeqCst);
        loop {
            // Acquire: pairs with the Release of a waking release's bump, so a bump we read
            // comes with the count it announced.
            let epoch = shared.epoch.load(Ordering::Acquire);
            fence(Ordering::SeqCst);
            if shared.is_idle() {
                break;
            }
            // Sleeps until a release bumps the epoch (or returns at once if it already did).
            sync::wait(&shared.epoch, epoch);
        }
        // Relaxed: only the release path reads it, and a stale non-zero costs one spare wake.
        shared.waiters.fetch_sub(1, Ordering::Relaxed);
    }

    /// Ops of `actor` counted in its own entry (not counting shared overflow places).
    pub fn in_flight(&self, actor: &[u8]) -> u32 {
        let key = self.shared.hasher.key(actor, 0);
        let count = self.shared.table.get(&key).unwrap_or(0);
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// Every op in flight, all actors together: a scan of the table, for introspection.
    pub fn total_in_flight(&self) -> u64 {
        let shared = &*self.shared;
        let mut total = 0;
        shared.table.any_member(|count| {
            total += count;
            false
        });
        // Relaxed: snapshots of counters.
        total
            + u64::from(shared.overflow.load(Ordering::Relaxed))
            + u64::from(shared.unlimited.load(Ordering::Relaxed))
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

    /// Actors holding an entry now, including entries whose count has fallen to zero and that
    /// wait to be reclaimed; never above [`Quotas::actors`].
    pub fn live_actors(&self) -> usize {
        self.shared.table.len()
    }

    /// How many actors can hold an entry at once.
    pub fn actors(&self) -> usize {
        self.shared.table.cap()
    }

    /// The in-word fingerprint and the tag of `actor`, so a loom model can pick two actors
    /// that only the tag tells apart. Not part of the supported API.
    #[cfg(any(test, feature = "loom", feature = "fuzzing"))]
    #[doc(hidden)]
    pub fn model_fingerprint(&self, actor: &[u8]) -> (u32, u32) {
        let key = self.shared.hasher.key(actor, 0);
        (key.fp, key.tag)
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
    fn place<'a>(&self, actor: &'a [u8]) -> Result<Held, QuotaExceeded<'a>> {
        let limit = self.limit_of(actor);
        if limit == UNLIMITED {
            // Relaxed: a counter; the drain's fence-and-scan reads it (see "Orderings").
            self.unlimited.fetch_add(1, Ordering::Relaxed);
            return Ok(Held::Unlimited);
        }
        let key = self.hasher.key(actor, 0);
        let mut reclaimed = false;
        loop {
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
                    inserted,
                } => {
                    if inserted {
                        self.count_absent();
                    }
                    return Ok(Held::Entry { slot, key });
                }
                Update::Landed {
                    result: Err(count), ..
                } => {
                    return Err(QuotaExceeded {
                        actor,
                        limit,
                        in_flight: u32::try_from(count).unwrap_or(u32::MAX),
                        shared: false,
                    })
                }
                Update::AtCap if !reclaimed => {
                    reclaimed = true;
                    if !self.reclaim_idle_entries() {
                        return self.place_shared(actor);
                    }
                }
                Update::AtCap | Update::WindowFull => return self.place_shared(actor),
            }
        }
    }

    /// One more acquire of an actor that had no entry (an insert, or a miss at the cap).
    fn count_absent(&self) -> u64 {
        // Relaxed: a counter that only paces reclamation scans.
        self.absent.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// At the cap: removes every entry whose count is zero, if a scan is due; returns whether
    /// it freed any. A scan is due once `actors` acquires of entry-less actors have happened
    /// since the last one, so its cost (all the slots, 8 × `actors`) is amortised over at least
    /// `actors` acquires, whatever an adversary arranges.
    #[cold]
    fn reclaim_idle_entries(&self) -> bool {
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
        let (freed, _) = self.table.reclaim(|count| count == 0);
        freed > 0
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
        let reached_zero = match held {
            Held::Entry { slot, key } => {
                let left = self.table.update_slot(*slot, key, |count| {
                    let left = count.saturating_sub(1);
                    Verdict::Commit(left, left)
                });
                // Our count keeps the entry alive (a zero entry is the only kind reclaimed),
                // so it must still be there.
                debug_assert!(left.is_some(), "a permit's entry vanished");
                left == Some(0)
            }
            // Relaxed: counters; the drain's fence-and-scan reads them.
            Held::Overflow => self.overflow.fetch_sub(1, Ordering::Relaxed) == 1,
            Held::Unlimited => self.unlimited.fetch_sub(1, Ordering::Relaxed) == 1,
        };
        if reached_zero {
            self.wake_drain();
        }
    }

    /// A count reached zero: if a drain is waiting, tell it to look again.
    #[cold]
    fn wake_drain(&self) {
        // SeqCst fence, pairing with the drain's: either the drain's scan sees our zero, or we
        // see its registration here (see "Orderings").
        fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Release: a drain that reads the new epoch also sees the zero that caused it.
        self.epoch.fetch_add(1, Ordering::Release);
        sync::wake_all(&self.epoch);
    }

    /// Whether nothing is in flight: every entry at zero and both counters at zero.
    fn is_idle(&self) -> bool {
        // Relaxed loads after the drain's SeqCst fence (see "Orderings").
        self.overflow.load(Ordering::Relaxed) == 0
            && self.unlimited.load(Ordering::Relaxed) == 0
            && !self.table.any_member(|count| count > 0)
    }
}
