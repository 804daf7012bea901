//! Peeks: what a charge would see now, consuming nothing.

use super::{Class, InvalidCharge, Limiter, Peek};
use crate::actor::HashedActor;
use crate::bucket::{gcra, BucketConfig};
use crate::clock::Clock;
use crate::table::Key;
use std::hash::Hash;

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
        Ok(self.peek_key(&key, cls, &config, n, now_ns))
    }

    /// What a charge of `n` tokens on `key` would see at `now_ns` under `config`, the class's
    /// (reclaiming at the cap first, as a charge would).
    pub(super) fn peek_key(
        &self,
        key: &Key,
        cls: &Class,
        config: &BucketConfig,
        n: u32,
        now_ns: u64,
    ) -> Peek {
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
        Peek {
            available,
            wait,
            overflow,
        }
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
