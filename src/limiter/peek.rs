//! Peeks: what a charge would see now, consuming nothing.

#[cfg(feature = "tower")]
use super::Grant;
use super::{Class, InvalidCharge, Limiter, Peek};
use crate::actor::HashedActor;
use crate::bucket::{gcra, BucketConfig};
use crate::clock::Clock;
use crate::table::Key;
use std::hash::Hash;
#[cfg(feature = "tower")]
use std::time::Duration;

#[cfg(test)]
thread_local! {
    /// Peeks and checks made on this thread (every one reads the key's entry): a test counts
    /// them around a decision that must read no entry twice.
    pub(crate) static LOOKUPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl<C: Clock> Limiter<C> {
    /// What a charge of `n` tokens would see now, consuming nothing. At the cap, a peek may
    /// reclaim full entries first, exactly as a charge would (which changes nothing a caller
    /// can observe).
    pub fn peek_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Peek, InvalidCharge> {
        self.peek_hashed_at(&HashedActor::new(identity), class, n, now_ns)
    }

    /// [`Limiter::peek_at`] for an actor hashed already (see [`HashedActor`]): the same entry
    /// as the identity it was made from.
    ///
    /// ```
    /// use admit::{BucketConfig, Clock, HashedActor, Limiter};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?])?;
    /// let now = limiter.clock().now_ns();
    /// limiter.try_acquire_n_at("alice", 0, 4, now)?;
    /// let peek = limiter.peek_hashed_at(&HashedActor::new("alice"), 0, 1, now)?;
    /// assert_eq!(peek.available(), 6);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek_hashed_at(
        &self,
        actor: &HashedActor,
        class: usize,
        n: u32,
        now_ns: u64,
    ) -> Result<Peek, InvalidCharge> {
        let (index, cls, _, config) = self.class(class, n)?;
        self.horizon.admit(now_ns, &self.clock)?;
        let key = self.hasher.key_of(actor, index);
        Ok(self.peek_key(&key, cls, &config, n, now_ns).0)
    }

    /// What a charge of `n` tokens on `key` would see at `now_ns` under `config`, the class's
    /// (reclaiming at the cap first, as a charge would), and the `full_at` it read there.
    pub(super) fn peek_key(
        &self,
        key: &Key,
        cls: &Class,
        config: &BucketConfig,
        n: u32,
        now_ns: u64,
    ) -> (Peek, u64) {
        #[cfg(test)]
        LOOKUPS.with(|lookups| lookups.set(lookups.get() + 1));
        let now = self.now_tick(now_ns);
        self.enter(now);
        let full_at = match self.table.get(key) {
            Some(value) => Some(self.dated(self.judge(cls, value))),
            None if self.table.len() < self.table.cap() || self.reclaim_due(key, now) > 0 => {
                Some(self.dated(gcra::FRESH))
            }
            None => None,
        };
        let (full_at, overflow) = match full_at {
            Some(full_at) => (full_at, false),
            None => (cls.config.overflow_full_at(&cls.overflow), true),
        };
        let (available, wait) = gcra::peek_at(config, full_at, n, self.reading(now_ns));
        let peek = Peek {
            available,
            wait,
            overflow,
        };
        (peek, full_at)
    }

    /// Tokens in `identity`'s own entry of `class`, without any side effect (no insert, no
    /// reclaim); `None` if it has no entry. For the reference-model checks.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn entry_tokens_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        now_ns: u64,
    ) -> Option<u32> {
        let (index, cls, _, config) = self.class(class, 0).ok()?;
        let value = self.table.get(&self.hasher.key(identity, index))?;
        let full_at = self.dated(self.judge(cls, value));
        Some(gcra::available(&config, full_at, self.now_tick(now_ns)))
    }

    /// The in-word fingerprint and the tag of `(identity, class)`, so a loom model can pick
    /// two identities that only the tag tells apart. Not part of the supported API.
    #[cfg(any(test, admit_loom, fuzzing))]
    #[doc(hidden)]
    pub fn model_fingerprint<K: Hash + ?Sized>(&self, identity: &K, class: usize) -> (u32, u32) {
        let key = self.hasher.key(identity, u16::try_from(class).unwrap_or(0));
        (key.fp, key.tag)
    }
}

/// What one rate limit's bucket holds right after a decision on it, read off that decision's
/// [`Grant`] (the state its take wrote, or its check read) with no second look at the table:
/// what the IETF `RateLimit` fields state of it.
#[cfg(feature = "tower")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Left {
    /// The class's burst, as the decision was made under it.
    pub(crate) burst: u32,
    /// Time for an empty bucket to refill completely.
    pub(crate) span: Duration,
    /// Whole tokens left.
    pub(crate) tokens: u32,
    /// Time until the bucket is full (zero if it is).
    pub(crate) full_in: Duration,
    /// Time until the next token (zero if one is left).
    pub(crate) next_in: Duration,
}

#[cfg(feature = "tower")]
impl<C: Clock> Limiter<C> {
    /// What `grant`'s bucket holds at `now_ns` (the reading it was decided at), after its take
    /// or, with `undone`, as its refund puts it back; computed from the grant alone (its
    /// receipt: the class word it was decided under and the `full_at` it wrote or read),
    /// touching no entry. `None` for a grant of another limiter or class.
    ///
    /// A shadow admission took nothing and its bucket could not pay: no token left, the next
    /// one in the wait enforcement would have answered.
    pub(crate) fn left_of(&self, grant: &Grant, undone: bool, now_ns: u64) -> Option<Left> {
        if grant.limiter != self.id {
            return None;
        }
        let cls = self.classes.get(grant.class)?;
        let config = cls.config.config_of_stamp(grant.receipt.stamp);
        let burst = config.burst();
        let span = config.refill_span();
        if let Some(refused) = &grant.would_refuse {
            return Some(Left {
                burst,
                span,
                tokens: 0,
                full_in: span,
                next_in: refused.wait(),
            });
        }
        let mut full_at = grant.receipt.left;
        if grant.overflow {
            full_at &= !super::era::OVERFLOW_ERA;
        }
        if undone {
            let credit = u64::from(grant.receipt.n) * config.interval_ticks();
            full_at = full_at.saturating_sub(credit);
        }
        let full_at = self.dated(full_at);
        let reading = self.reading(now_ns);
        let (tokens, full_in) = gcra::peek_at(&config, full_at, burst, reading);
        let next_in = if tokens == 0 {
            gcra::peek_at(&config, full_at, 1, reading).1
        } else {
            Duration::ZERO
        };
        Some(Left {
            burst,
            span,
            tokens,
            full_in,
            next_in,
        })
    }
}
