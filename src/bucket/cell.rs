//! A limiter class's config, which can change at runtime: burst and refill interval packed in
//! one `AtomicU64`, in a unit (millisecond or microsecond tick) fixed at construction. (A
//! [`TokenBucket`](super::TokenBucket) versions its config in its state word instead, see
//! `versions`.)
//!
//! A decision loads the word once and decides with what it loaded: both numbers come from one
//! atomic load, so no decision ever mixes the burst of one config with the interval of another,
//! however changes race each other and decisions. The unit is not in the word: it is fixed
//! when the limiter is built, because a bucket's state is a tick count in that
//! unit, and a change that altered it would reinterpret every stored instant.
//!
//! # Orderings
//!
//! The word publishes nothing but itself, and the token-bucket state is a function of
//! `(full_at, reading, config)` that is valid for every pair of a state word and a config
//! word (see "Limits changed at runtime" in the [bucket docs](super)): so no decision needs
//! the config to be ordered with the state it charges, and every access is `Relaxed`. A change
//! is visible to a thread from its next load after the store becomes visible, and, by
//! coherence on this one word, a thread that has seen a config never sees an older one again;
//! the thread that changed it, and any thread that synchronizes with that thread afterwards
//! (a channel, a mutex, a join), sees it (or a later one) on its next decision.

use super::config::BucketConfig;
use crate::clock::tick::Tick;
use crate::sync::atomic::{AtomicU64, Ordering};

/// A [`BucketConfig`] that can be replaced while other threads decide with it.
#[derive(Debug)]
pub(crate) struct ConfigCell {
    /// [`BucketConfig::pack`] of the current config, in `tick`.
    word: AtomicU64,
    /// The unit, fixed at construction.
    tick: Tick,
}

impl ConfigCell {
    /// A cell holding `config`, in the unit `config` counts in.
    pub(crate) fn new(config: BucketConfig) -> Self {
        Self {
            word: AtomicU64::new(config.pack()),
            tick: config.tick(),
        }
    }

    /// The current config: one load.
    #[inline]
    pub(crate) fn load(&self) -> BucketConfig {
        // Relaxed: see "Orderings"; the two numbers come from this one load.
        BucketConfig::unpack(self.word.load(Ordering::Relaxed), self.tick)
    }

    /// Replaces the config with `fitted`, already in the cell's unit (a limiter fits its
    /// classes to its own unit, which is every class cell's).
    pub(crate) fn store(&self, fitted: &BucketConfig) {
        debug_assert_eq!(fitted.tick(), self.tick);
        // Relaxed: see "Orderings"; a decision reads either the old word or this one, whole.
        self.word.store(fitted.pack(), Ordering::Relaxed);
    }
}
