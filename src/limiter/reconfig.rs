//! A class's limits changed at runtime: [`Limiter::set_config`], [`Limiter::check_config`].
//!
//! A class's config is one word (burst and interval packed in the limiter's unit, see
//! `bucket::cell`), read once per decision by `Limiter::class`: the whole decision — the burst
//! check, the take on the entry or on the class's overflow bucket, the refusal's wait — uses
//! that one copy, so a decision racing a change decides wholly under the old config or wholly
//! under the new one. Every entry keeps its state, the instant it is full again, and only
//! what that means in tokens changes, the same for an entry and for the overflow bucket: see
//! "A limiter class does not carry tokens over yet" in the [bucket docs](crate::bucket),
//! which says why, and where this differs from a [`TokenBucket`](crate::TokenBucket), which
//! carries the tokens owed over (a slower rate here re-prices the time owed into fewer
//! tokens, #16). Reclamation judges "full" by
//! comparing that instant with the reading, which needs no config, so a change never makes a
//! drained entry reclaimable (and so fresh) sooner.
//!
//! The overflow bucket has no config of its own: it is built from its class's and is decided
//! under the same copy as the entry, so `set_config` changes both at once and there is no
//! separate `set_overflow_config`.

use super::{Limiter, LimiterConfigError};
use crate::bucket::{BucketConfig, ConfigCell};
use crate::clock::tick::Tick;
use crate::clock::Clock;

impl<C: Clock> Limiter<C> {
    /// Replaces `class`'s burst and refill interval (for its entries and its overflow bucket),
    /// at once, while other threads decide. Every entry keeps the time it owes: a full entry
    /// stays full, a drained one is full again at the same instant as before (see "Limits
    /// changed at runtime" in the [bucket docs](crate::bucket) for the tokens that leaves it:
    /// a slower rate leaves an entry that just drained most of its burst, #16; lower the burst
    /// with the rate to make a cut bite at once).
    ///
    /// Refused, changing nothing, for a class the limiter was not built with
    /// ([`LimiterConfigError::UnknownClass`]) and for a config that does not fit the unit the
    /// limiter counts time in, fixed at build ([`LimiterConfigError::ClassDoesNotFit`]).
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter, LimiterConfigError, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let limiter = Limiter::builder().build_with_clock([BucketConfig::per_second(2)?], clock)?;
    /// assert!(limiter.try_acquire("alice", 0).is_ok());
    /// // Lower the burst to 1: alice owes the token she took, so she holds none.
    /// limiter.set_config(0, BucketConfig::per_second(2)?.with_burst(1)?)?;
    /// assert!(limiter.try_acquire("alice", 0).is_err());
    /// assert!(limiter.try_acquire("bob", 0).is_ok(), "bob's new entry starts full: 1");
    /// assert_eq!(limiter.config(0).map(|c| c.burst()), Some(1));
    /// let fine = BucketConfig::new(1, Duration::from_micros(1_500))?;
    /// assert!(matches!(
    ///     limiter.set_config(0, fine),
    ///     Err(LimiterConfigError::ClassDoesNotFit { class: 0, .. })
    /// ));
    /// assert!(matches!(
    ///     limiter.set_config(7, BucketConfig::per_second(1)?),
    ///     Err(LimiterConfigError::UnknownClass { class: 7, classes: 1 })
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_config(&self, class: usize, config: BucketConfig) -> Result<(), LimiterConfigError> {
        let (cell, fitted) = self.fit(class, &config)?;
        cell.store(&fitted);
        Ok(())
    }

    /// Whether [`Limiter::set_config`] would take `config` for `class`, changing nothing.
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter};
    ///
    /// let limiter = Limiter::builder().build([BucketConfig::per_second(10)?])?;
    /// assert!(limiter.check_config(0, &BucketConfig::per_minute(10)?).is_ok());
    /// assert!(limiter.check_config(1, &BucketConfig::per_minute(10)?).is_err(), "one class");
    /// assert_eq!(limiter.config(0), Some(BucketConfig::per_second(10)?), "unchanged");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_config(
        &self,
        class: usize,
        config: &BucketConfig,
    ) -> Result<(), LimiterConfigError> {
        self.fit(class, config).map(|_| ())
    }

    /// `class`'s cell and `config` in the limiter's unit, or why it is refused.
    fn fit(
        &self,
        class: usize,
        config: &BucketConfig,
    ) -> Result<(&ConfigCell, BucketConfig), LimiterConfigError> {
        let cls = self
            .classes
            .get(class)
            .ok_or(LimiterConfigError::UnknownClass {
                class,
                classes: self.classes.len(),
            })?;
        let fitted =
            config
                .in_unit(self.tick)
                .map_err(|_| LimiterConfigError::ClassDoesNotFit {
                    class,
                    config: *config,
                    counted_in_micros: self.tick == Tick::Micros,
                })?;
        Ok((&cls.config, fitted))
    }
}
