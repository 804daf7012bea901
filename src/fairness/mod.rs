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
//! ([`QuotasRefused`]), never by blocking, which would move the queue from the writer into the
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
//! # Any key, one type per actor
//!
//! An actor is any `K: Hash + ?Sized` (a `str` key id, `[u8]`, an `IpAddr`, a `u64`, a
//! tuple), fed through its [`Hash`] impl into the table's keyed SipHash-1-3.
//! `Hash` is typed: a `str` writes its bytes and a `0xFF` terminator, a `[u8]` its length and
//! then its bytes, so `"alice"` and `b"alice"` are **two different actors**, each with its own
//! count and quota. A server must name one actor with one kind of type everywhere: at
//! [`Quotas::try_acquire`], at [`QuotasBuilder::override_quota`] and at [`Quotas::in_flight`].
//! Within a kind, how it is held does not matter: a `String` and a `&str` agree, and so do a
//! `Vec<u8>`, a `&[u8]` and a `[u8; N]` (arrays hash as slices).
//!
//! An override is kept as the actor's 64-bit keyed hash, not its name, and an acquire looks it
//! up by the hash it computes anyway: an actor whose hash equals an overridden actor's gets
//! that override, a chance of about 2^-64 per pair (n overrides against m actors: n·m·2^-64),
//! and no client can aim at it without the table's secret keys.
//!
//! # Bounded memory
//!
//! The counts live in the crate's bounded entry table (see the
//! [design notes](crate::implementation)), keyed by the actor under a per-table SipHash key,
//! so the table does not grow with the names clients invent. An actor's entry is
//! made on its first op and kept while its count goes up and down: an acquire and its release
//! are then one CAS each. An entry whose count is back at zero is indistinguishable from an
//! absent actor, so it is free: when the table is full, a miss reclaims every zero entry (CAS
//! from the exact zero word, so an entry acquired meanwhile stays) and takes a place. Such a
//! scan reads every slot, so it runs at most once per `actors` acquires of entry-less actors:
//! its cost is amortised over them, whatever an adversary arranges, and a churn of new names
//! one at a time never waits for it. When no place can be had, actors without an entry share
//! one overflow count, still capped by the default quota, so no op is ever admitted unbounded.
//!
//! # An actor's total, wherever its ops are held
//!
//! The bound is exactly Q, the actor's own quota (its override included), counted across its
//! entry and the overflow count together, in every state of the table. An actor's overflow places
//! are counted by actor in a fixed count-min sketch (four rows of `AtomicU32` cells, indexed by
//! the key hash the table already computed; 4 KiB): its estimate never under-counts, so a
//! collision can refuse an op early but never admit one over the quota. An overflow acquire is
//! admitted only if the actor's estimate, its own place included, is within its quota, and
//! only if the actor has no entry (if one appeared, the op is counted there instead).
//!
//! An entry is born **DIRTY** (a flag in its value): its actor may hold overflow places. Every
//! acquire on a DIRTY entry reserves a place by CAS, then checks `count + estimate <= Q`
//! (releasing the place if not); one that finds the estimate at zero makes the entry clean.
//! An acquire on a clean entry is the hit path: the same single CAS as before, refusing at Q,
//! reading nothing else, because the flag lives in the word the CAS reads anyway. Entries are
//! reclaimed only at count zero, DIRTY or not, and come back DIRTY.
//!
//! Why the skip is safe: an overflow acquire writes the sketch, then (after a `SeqCst` fence)
//! looks the actor's entry up; an acquire that cleans an entry, or checks a DIRTY one, writes
//! the entry, then (after a `SeqCst` fence) reads the sketch. Of two such, one sees the other's
//! write. So an overflow place still held when an entry is cleaned was seen by the cleaner (which
//! then does not clean), or its acquire saw the entry (and was not admitted as shared); while
//! an entry stays clean its actor holds no overflow place, and its count alone is its total.
//! While it is DIRTY, the acquire whose CAS came last among those in flight saw every shared
//! place of the actor held with it, so the count it checked plus the estimate covers them all.
//!
//! **The residual.** While the table is full (about `actors` distinct actors with ops in
//! flight, or idle entries not yet due for reclamation), actors without an entry share one
//! overflow count capped by the default quota Q: a flood from one of them (itself held to its
//! own quota) can fill it and hold the others' ops back, so those are refused until the writer
//! decides some, but an op that is admitted still waits behind at most Q ops of any one actor.
//! With the default of 1024 places this needs about 1024 actors active on one writer. Actors
//! whose sketch cells all collide with other actors' overflow places can be refused before their
//! quota, and an actor with overflow places checks the sketch on every acquire until it holds
//! none (a fence and four loads, off the hit path).
//!
//! # Permits
//!
//! [`Quotas::try_acquire`] returns a [`Permit`] that borrows the `Quotas` handle, so an op of an
//! actor with a clean entry writes nothing shared but the actor's count: one CAS to acquire, one to
//! release (and a fence when the count returns to zero, for the drain). Hand it to a writer
//! spawned in [`std::thread::scope`], or keep the `Quotas` in a `static`. A writer thread that
//! must be `'static` without a static table takes [`OwnedPermit`]s from
//! [`Quotas::try_acquire_owned`] instead; each holds a reference-counted handle, which adds two
//! atomic operations per op.
//! Both free their place the same way, exactly once, wherever they are dropped.
//!
//! # An adaptive total
//!
//! [`AdaptiveQuotas`] ([`QuotasBuilder::build_adaptive`]) are these quotas with one more
//! count in front: every op also in one total across all actors, under a limit L that follows
//! the writer's measured latency toward a target ([`AdaptiveTotal`]), shared between
//! [`Priority`] classes ([`AdaptiveQuotas::try_acquire_as`]). Its rules and invariants are at
//! the top of `adaptive/mod.rs`. It is a type of its own: `Quotas` keeps no total and reads
//! no clock.
//!
//! # Invariants
//!
//! 1. An actor's ops awaiting a decision, counted in its entry and in the overflow count
//!    together, never exceed its own quota (override included), whether the table is full or
//!    filling and freeing (tests `an_actor_holding_shared_places_gets_no_more_through_a_new_entry`,
//!    `an_override_quota_binds_on_the_shared_count`; loom:
//!    `acquires_never_exceed_the_quota`, `racing_acquires_at_the_cap_count_the_actor_once`,
//!    `a_clean_entry_skips_the_sketch_only_when_no_shared_place_is_held`).
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
//! Invariants 1, 3 and 4 are also checked against a sequential reference (which counts every
//! actor's total) by proptest and by the `fairness` fuzz target. The bound itself is tested by
//! counting queue positions, with a free table and with one saturated by other actors.
//!
//! # Orderings
//!
//! Counts live in table words (see the [design notes](crate::implementation) for those
//! orderings). The overflow and unlimited counts are counters (`Relaxed`; the overflow's CAS
//! keeps it under the quota). Between the sketch and the entries, the store/load race of "An
//! actor's total" is settled by a `SeqCst` fence on each side (an overflow acquire between its
//! sketch increments and its entry lookup; a DIRTY acquire between its entry CAS and its
//! sketch read): either the entry's acquire reads our increments or our lookup observes its
//! entry CAS or a later write of that slot. Sketch decrements are `Release` and its reads
//! `Acquire`, so an acquire admitted because a place was given up is ordered after it. The drain is the one store/load race: a drain registers in
//! `waiters` then scans every count; a release that brings a count to zero then checks
//! `waiters`. Each side puts a `SeqCst` fence between its write and its read, so at least one
//! sees the other: the drain sees the zero, or the release sees the drain and bumps `epoch`
//! (`Release`; the drain reads it `Acquire`) and wakes it. A drain reads `epoch` before its
//! scan and sleeps only while `epoch` is unchanged, so a wake between the two is never lost.
//! Releases never make a system call unless a drain is waiting.

mod acquire;
mod adaptive;
mod builder;
mod count;
mod drain;
mod error;
mod overflow;
mod overrides;
mod permit;
mod reclaim;
mod reconfig;
#[cfg(test)]
mod reconfig_tests;
mod sketch;
#[cfg(test)]
mod tests;

pub use adaptive::{
    AdaptivePermit, AdaptiveQuotas, AdaptiveTotal, AdaptiveTotalError, OwnedAdaptivePermit,
    Priority, Shares, TotalRefused, MAX_TOTAL_LIMIT,
};
pub use builder::QuotasBuilder;
#[cfg(feature = "tower")]
pub(crate) use count::Places;
pub use error::{QuotasConfigError, QuotasRefused};
pub use overrides::DEFAULT_OVERRIDE_CAPACITY;
pub use permit::{OwnedPermit, Permit};

use crate::shadow::Shadow;
use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::Arc;
use crate::table::{KeyHasher, Table};
use crossbeam_utils::CachePadded;
use overrides::Overrides;
use sketch::Sketch;
use std::hash::Hash;

/// The count of an entry's value: ops of the actor counted in its entry.
const COUNT: u64 = (1 << 32) - 1;
/// Set in an entry's value while the actor may hold overflow places: every acquire on the entry
/// then checks the sketch (see "An actor's total"). Bit 41, the top of the table's 42-bit value.
const DIRTY: u64 = 1 << 41;

/// The count in an entry's value.
#[inline]
fn count_of(value: u64) -> u64 {
    value & COUNT
}

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
///
/// A submitter takes a permit per op and hands it to the writer with the op; the writer drops
/// it once the op is decided.
///
/// ```
/// use admit::fairness::Quotas;
/// use std::sync::mpsc;
///
/// let quotas = Quotas::builder().quota(8).actors(4_096).build()?;
/// let (to_writer, ops) = mpsc::channel();
/// std::thread::scope(|s| {
///     s.spawn(move || {
///         for (op, permit) in ops {
///             let _: &str = op; // apply the op here
///             drop(permit); // decided: the actor's place is free
///         }
///     });
///     for op in ["put a", "put b", "put c"] {
///         match quotas.try_acquire("agent-1") {
///             Ok(permit) => to_writer.send((op, permit)).unwrap(),
///             Err(refused) => eprintln!("{op}: {refused}"),
///         }
///     }
///     drop(to_writer);
/// });
/// quotas.wait_idle();
/// assert_eq!(quotas.total_in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Quotas {
    shared: Arc<Shared>,
}

/// What every clone and every permit points at.
#[derive(Debug)]
struct Shared {
    table: Table,
    hasher: KeyHasher,
    /// The default quota, changed at runtime by [`Quotas::set_quota`]; read once per acquire.
    limit: AtomicU32,
    /// Overridden quotas by the actor's whole 64-bit keyed hash ([`KeyHasher::hash`]), changed
    /// at runtime by [`Quotas::set_override`].
    overrides: Overrides,
    /// Ops in flight of actors without an entry, capped by `limit`.
    overflow: CachePadded<AtomicU32>,
    /// The same ops by actor (over-estimated), checked against each actor's own quota.
    sketch: Sketch,
    /// Ops in flight that hold no place in any count: those of actors whose quota is
    /// [`UNLIMITED`], and shadow admissions (see [`crate::shadow`]). The drain waits for them.
    unlimited: CachePadded<AtomicU32>,
    /// The shadow switch (see [`crate::shadow`]).
    shadow: Shadow,
    /// Acquires of actors that had no entry, ever; paces reclamation scans.
    absent: CachePadded<AtomicU64>,
    /// The `absent` count from which the next reclamation scan may run.
    next_scan: AtomicU64,
    /// Threads blocked in [`Quotas::wait_idle`].
    waiters: CachePadded<AtomicU32>,
    /// Bumped when a count reaches zero while a drain waits; the futex word drains sleep on.
    epoch: CachePadded<AtomicU32>,
    /// The counters and gauges, if attached at build ([`QuotasBuilder::metrics`]).
    #[cfg(feature = "metrics")]
    metrics: Option<Box<crate::instrument::InFlightMetrics>>,
    /// The key of the actor digests in refusal events (see `crate::trace`).
    #[cfg(feature = "tracing")]
    digest: crate::trace::Digest,
}

/// What the decision-writes test (`check::writes`) needs to know of the quotas' lines.
#[cfg(all(test, admit_writes))]
impl Quotas {
    /// The line of `actor`'s entry (its in-flight count), if it has one.
    pub(crate) fn entry_line(
        &self,
        actor: &crate::actor::HashedActor,
    ) -> Option<crate::sync::writes::Line> {
        let shared = &*self.shared;
        let key = shared.hasher.key_of_hash(shared.hasher.hash_of(actor, 0));
        shared.table.member_line(&key)
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

    /// Switches the quotas into [shadow mode](crate::shadow) (`true`) or back to enforcing, at
    /// once, while other threads acquire: in shadow mode an acquire that enforcement would
    /// refuse is admitted instead with a permit that holds no place in the actor's count
    /// ([`Permit::would_have_refused`] says what the refusal was).
    ///
    /// ```
    /// use admit::fairness::Quotas;
    ///
    /// let quotas = Quotas::builder().quota(1).build()?;
    /// quotas.set_shadow(true);
    /// let first = quotas.try_acquire("agent")?;
    /// let second = quotas.try_acquire("agent")?; // over the quota: admitted in shadow mode
    /// assert_eq!(second.would_have_refused().unwrap().limit(), 1);
    /// assert_eq!(quotas.in_flight("agent"), 1, "the shadow permit holds no place");
    /// assert_eq!(quotas.shadow_admissions(), 1);
    /// # drop((first, second));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_shadow(&self, on: bool) {
        self.shared.shadow.set(on);
    }

    /// Whether the quotas are in shadow mode.
    pub fn is_shadow(&self) -> bool {
        self.shared.shadow.is_on()
    }

    /// How many acquires shadow mode admitted that enforcement would have refused, since
    /// construction.
    pub fn shadow_admissions(&self) -> u64 {
        self.shared.shadow.admitted()
    }

    /// Ops of `actor` counted in its own entry (not counting shared overflow places).
    pub fn in_flight<K: Hash + ?Sized>(&self, actor: &K) -> u32 {
        let key = self.shared.hasher.key(actor, 0);
        let count = self.shared.table.get(&key).map_or(0, count_of);
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// The sketch cells `actor`'s overflow places are counted in, for the reference model.
    #[cfg(any(test, fuzzing))]
    #[doc(hidden)]
    pub fn sketch_cells<K: Hash + ?Sized>(&self, actor: &K) -> [usize; sketch::ROWS] {
        self.shared.sketch.cells(&self.shared.hasher.key(actor, 0))
    }

    /// Every op in flight, all actors together: a scan of the table, for introspection.
    ///
    /// With metrics attached (`QuotasBuilder::metrics`, feature `metrics`), it also sets the
    /// `admit_inflight_ops` and `admit_inflight_overflow_ops` gauges: call it where the metrics
    /// are scraped.
    pub fn total_in_flight(&self) -> u64 {
        let shared = &*self.shared;
        let mut total = 0;
        shared.table.any_member(|value| {
            total += count_of(value);
            false
        });
        // Relaxed: snapshots of counters.
        let overflow = shared.overflow.load(Ordering::Relaxed);
        let total =
            total + u64::from(overflow) + u64::from(shared.unlimited.load(Ordering::Relaxed));
        #[cfg(feature = "metrics")]
        if let Some(metrics) = shared.metrics.as_deref() {
            metrics.in_flight(total);
            metrics.overflow(overflow);
        }
        total
    }

    /// Ops in flight counted against the shared overflow quota. With metrics attached, it also
    /// sets the `admit_inflight_overflow_ops` gauge.
    pub fn overflow_in_flight(&self) -> u32 {
        // Relaxed: a snapshot of a counter.
        let overflow = self.shared.overflow.load(Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.shared.metrics.as_deref() {
            metrics.overflow(overflow);
        }
        overflow
    }

    /// The quota of `actor`.
    pub fn limit_of<K: Hash + ?Sized>(&self, actor: &K) -> u32 {
        self.shared.limit_of_hash(self.shared.hasher.hash(actor, 0))
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
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn model_fingerprint<K: Hash + ?Sized>(&self, actor: &K) -> (u32, u32) {
        let key = self.shared.hasher.key(actor, 0);
        (key.fp, key.tag)
    }

    /// Bytes of the table and the overflow-places sketch: fixed at construction, whatever actors
    /// arrive.
    pub fn memory_bytes(&self) -> usize {
        self.shared.table.memory_bytes()
            + self.shared.sketch.memory_bytes()
            + self.shared.overrides.memory_bytes()
    }
}

impl Shared {
    /// The default quota now (see "Limits changed at runtime" in `reconfig.rs`).
    #[inline]
    fn default_limit(&self) -> u32 {
        // Relaxed: the quota publishes nothing but itself; a decision reads it once.
        self.limit.load(Ordering::Relaxed)
    }

    /// The quota of the actor whose keyed hash is `hash`.
    #[inline]
    fn limit_of_hash(&self, hash: u64) -> u32 {
        self.overrides
            .get(hash)
            .unwrap_or_else(|| self.default_limit())
    }
}
