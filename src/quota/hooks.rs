//! Internal hooks for tests, the reference driver and the loom models.

use super::shards::Shards;
use super::{reconfig, Quota, RateLimit, RateLimitRefused};
use crate::clock::{Clock, Horizon};
use crate::shadow::Shadow;
use crate::sync::atomic::AtomicU64;
use std::hash::Hash;

/// Internal hooks: explicit geometry and keys, so tests, the reference driver and the loom
/// models can force collisions in a handful of buckets.
#[cfg(any(test, admit_loom, fuzzing))]
impl<C: Clock> RateLimit<C> {
    /// A limiter over `buckets` buckets (a power of two, at least `quota.rows()`) with fixed
    /// hash keys. `None` if the geometry is invalid.
    pub(crate) fn with_geometry(
        quota: Quota,
        buckets: usize,
        keys: (u64, u64),
        clock: C,
    ) -> Option<Self> {
        let shards = Shards::with_geometry(buckets, quota.rows(), keys)?;
        Some(Self {
            shards,
            quota,
            limits: AtomicU64::new(reconfig::pack(&quota)),
            horizon: Horizon::new(),
            clock,
            shadow: Shadow::new(),
            #[cfg(feature = "metrics")]
            metrics: None,
            #[cfg(feature = "tracing")]
            digest: crate::trace::Digest::random(),
        })
    }

    /// The global bucket index of `actor` in each row, as the charge computes it.
    pub(crate) fn bucket_indexes<A: Hash + ?Sized>(&self, actor: &A) -> Vec<usize> {
        self.shards.row_indexes(self.shards.hash(actor))
    }

    /// [`RateLimit::try_acquire_at`], also saying which window an admitted charge counted in, and
    /// how many torn attempts (raises left behind by a lost race) the charge made. A reading
    /// ahead of the clock is refused exactly as `try_acquire_at` refuses it, with no attempt.
    pub(crate) fn charge_traced<A: Hash + ?Sized>(
        &self,
        actor: &A,
        events: u32,
        bytes: u64,
        now_ns: u64,
    ) -> (Result<u64, RateLimitRefused>, u32) {
        self.charge_traced_under(&self.current(), actor, events, bytes, now_ns)
    }

    /// [`RateLimit::charge_traced`] decided under `limits` rather than the limits in force: a
    /// charge that loaded the limits word before a change was stored and counts after it
    /// (it decides wholly under the word it loaded, see "Limits changed at runtime").
    pub(crate) fn charge_traced_under<A: Hash + ?Sized>(
        &self,
        limits: &Quota,
        actor: &A,
        events: u32,
        bytes: u64,
        now_ns: u64,
    ) -> (Result<u64, RateLimitRefused>, u32) {
        if let Err(ahead) = self.horizon.admit(now_ns, &self.clock) {
            return (Err(RateLimitRefused::ReadingAhead(ahead)), 0);
        }
        let hash = self.shards.hash(actor);
        let charged = self.shards.charge(limits, hash, events, bytes, now_ns);
        (
            charged.result.map_err(RateLimitRefused::Exceeded),
            charged.torn,
        )
    }

    #[cfg(any(test, fuzzing))]
    pub(crate) fn shards(&self) -> &Shards {
        &self.shards
    }
}

/// The loom models' entry points (`--cfg admit_loom`, outside the semver surface).
#[cfg(admit_loom)]
#[doc(hidden)]
impl<C: Clock> RateLimit<C> {
    pub fn loom_with_geometry(
        quota: Quota,
        buckets: usize,
        keys: (u64, u64),
        clock: C,
    ) -> Option<Self> {
        Self::with_geometry(quota, buckets, keys, clock)
    }

    pub fn loom_bucket_indexes<A: Hash + ?Sized>(&self, actor: &A) -> Vec<usize> {
        self.bucket_indexes(actor)
    }

    /// The window an admitted charge counted in (or the refusal, a reading ahead of the clock
    /// included), and its torn attempts.
    pub fn loom_charge<A: Hash + ?Sized>(
        &self,
        actor: &A,
        bytes: u64,
        now_ns: u64,
    ) -> (Result<u64, RateLimitRefused>, u32) {
        self.charge_traced(actor, 1, bytes, now_ns)
    }
}
