//! The charge path: the `try_acquire*` entry points, and the answer a charge gives.

use super::{RateLimit, RateLimitRefused, VolumeExceeded};
use crate::actor::HashedActor;
use crate::clock::Clock;
use std::hash::Hash;

impl<C: Clock> RateLimit<C> {
    /// Counts one write of `bytes` bytes by `actor` at the clock's current reading, if the
    /// actor's buckets have room for one more event and `bytes` more bytes in this window.
    ///
    /// The reading is the clock's own, so it is never ahead of the clock and the only refusal
    /// is the quota's.
    #[inline]
    pub fn try_acquire<A: Hash + ?Sized>(
        &self,
        actor: &A,
        bytes: u64,
    ) -> Result<(), VolumeExceeded> {
        self.charge(actor, bytes, self.clock.now_ns())
    }

    /// Counts one write of `bytes` bytes by `actor` at reading `now_ns` (nanoseconds since the
    /// clock's origin, taken from [`RateLimit::clock`]). Lock-free: a hash, one horizon load,
    /// one header load, a load and a CAS per word.
    ///
    /// On refusal nothing is counted. [`RateLimitRefused::Exceeded`] says which limit was hit and
    /// when the window turns; [`RateLimitRefused::ReadingAhead`] says that `now_ns` is more than
    /// [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) ahead of the clock, and
    /// then nothing at all was read or written (see "Readings ahead of the clock" in the
    /// [module documentation](super)).
    ///
    /// ```
    /// use admit::quota::{Quota, RateLimitRefused, RateLimit};
    /// use admit::{Clock, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let limit = RateLimit::with_clock(Quota::new(2, 4_096, Duration::from_secs(60))?, clock.clone());
    /// let now = clock.now_ns();
    /// assert!(limit.try_acquire_at("tenant-9", 100, now).is_ok());
    /// assert!(limit.try_acquire_at("tenant-9", 100, now).is_ok());
    /// match limit.try_acquire_at("tenant-9", 100, now) {
    ///     Err(RateLimitRefused::Exceeded(over)) => assert!(over.window_turns_in() <= Duration::from_secs(60)),
    ///     other => panic!("{other:?}"),
    /// }
    /// clock.advance(Duration::from_secs(60));
    /// assert!(limit.try_acquire_at("tenant-9", 100, clock.now_ns()).is_ok(), "a new window");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_at<A: Hash + ?Sized>(
        &self,
        actor: &A,
        bytes: u64,
        now_ns: u64,
    ) -> Result<(), RateLimitRefused> {
        self.horizon.admit(now_ns, &self.clock)?;
        self.charge(actor, bytes, now_ns)
            .map_err(RateLimitRefused::Exceeded)
    }

    /// [`RateLimit::try_acquire`] for an actor hashed once ([`HashedActor::new`]): the same
    /// buckets the identity names, without hashing it again.
    #[inline]
    pub fn try_acquire_hashed(
        &self,
        actor: &HashedActor,
        bytes: u64,
    ) -> Result<(), VolumeExceeded> {
        self.charge_hash(self.shards.hash_of(actor), 1, bytes, self.clock.now_ns())
    }

    /// [`RateLimit::try_acquire_at`] for an actor hashed once. A server hashes each request's
    /// actor once and hands it to every defence.
    #[inline(always)]
    pub fn try_acquire_hashed_at(
        &self,
        actor: &HashedActor,
        bytes: u64,
        now_ns: u64,
    ) -> Result<(), RateLimitRefused> {
        self.horizon.admit(now_ns, &self.clock)?;
        self.charge_hash(self.shards.hash_of(actor), 1, bytes, now_ns)
            .map_err(RateLimitRefused::Exceeded)
    }

    /// Counts `bytes` more bytes of a write already counted (its body streaming in), without
    /// counting another event, at the clock's current reading, if the actor's buckets have
    /// room for them in this window. On refusal nothing is counted; a refusal for bytes is the
    /// only kind (events are not charged).
    ///
    /// ```
    /// use admit::quota::{Quota, RateLimit};
    /// use admit::HashedActor;
    /// use std::time::Duration;
    ///
    /// let limit = RateLimit::new(Quota::new(10, 1_000, Duration::from_secs(60))?);
    /// let actor = HashedActor::new("upload-7");
    /// limit.try_acquire_hashed(&actor, 0)?; // the write, its size not yet known
    /// for chunk in [400, 400] {
    ///     limit.try_acquire_bytes(&actor, chunk)?; // its bytes, as they arrive
    /// }
    /// assert!(limit.try_acquire_bytes(&actor, 400).is_err(), "1,200 bytes > 1,000");
    /// let usage = limit.usage("upload-7");
    /// assert_eq!((usage.events, usage.bytes), (1, 800));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn try_acquire_bytes(&self, actor: &HashedActor, bytes: u64) -> Result<(), VolumeExceeded> {
        self.charge_hash(self.shards.hash_of(actor), 0, bytes, self.clock.now_ns())
    }

    /// [`RateLimit::try_acquire_bytes`] at reading `now_ns` of this quota's clock.
    #[inline]
    pub fn try_acquire_bytes_at(
        &self,
        actor: &HashedActor,
        bytes: u64,
        now_ns: u64,
    ) -> Result<(), RateLimitRefused> {
        self.horizon.admit(now_ns, &self.clock)?;
        self.charge_hash(self.shards.hash_of(actor), 0, bytes, now_ns)
            .map_err(RateLimitRefused::Exceeded)
    }

    /// The charge behind `try_acquire` and `try_acquire_at`, once the reading is known to be
    /// acceptable; in shadow mode a refusal is counted and admitted instead.
    #[inline]
    fn charge<A: Hash + ?Sized>(
        &self,
        actor: &A,
        bytes: u64,
        now_ns: u64,
    ) -> Result<(), VolumeExceeded> {
        self.charge_hash(self.shards.hash(actor), 1, bytes, now_ns)
    }

    /// Counts `events` (1 for a write, 0 for more of its bytes) and `bytes` for the actor
    /// hashed to `hash`; in shadow mode a refusal is counted and admitted instead.
    #[inline]
    fn charge_hash(
        &self,
        hash: u64,
        events: u32,
        bytes: u64,
        now_ns: u64,
    ) -> Result<(), VolumeExceeded> {
        // Counted and traced inside the arms, so that the answer goes straight to the caller:
        // one branch when no metrics are attached (see `crate::metrics`, "What a decision
        // costs"), nothing on an admission for tracing.
        match self
            .shards
            .charge(&self.current(), hash, events, bytes, now_ns)
            .result
        {
            Ok(_window) => {
                #[cfg(feature = "metrics")]
                if let Some(metrics) = self.metrics.as_deref() {
                    metrics.record(true, false);
                }
                Ok(())
            }
            Err(exceeded) => {
                // A refusal charged nothing; in shadow mode it is counted and admitted.
                let shadow = self.shadow.admits_instead();
                self.observe_refusal(hash, &exceeded, shadow);
                if shadow {
                    Ok(())
                } else {
                    Err(exceeded)
                }
            }
        }
    }

    /// Counts and traces a refusal, as attached and compiled.
    #[inline]
    // Each feature reads some of the arguments; with both off, none.
    #[cfg_attr(
        not(all(feature = "metrics", feature = "tracing")),
        allow(unused_variables)
    )]
    fn observe_refusal(&self, hash: u64, exceeded: &VolumeExceeded, shadow: bool) {
        #[cfg(feature = "metrics")]
        if let Some(metrics) = self.metrics.as_deref() {
            if shadow {
                metrics.record_would_refuse();
            } else {
                metrics.record(false, false);
            }
        }
        #[cfg(feature = "tracing")]
        crate::trace::volume_refused(|| self.digest.of_hash(hash), exceeded, shadow);
    }
}
