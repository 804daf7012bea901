//! A class's limits changed at runtime: [`Limiter::set_config`], [`Limiter::check_config`].
//!
//! A class's config is one word (burst and interval packed in the limiter's unit, under the
//! class's era bit, see [`super::era`]): the whole decision — the burst check, the take on the
//! entry or on the class's overflow bucket, the refusal's wait — uses one load of it, checked
//! again after the entry is read, so a decision racing a change decides wholly under the old
//! config or wholly under the new one.
//!
//! **The tokens owed carry over**, exactly as for a [`TokenBucket`](crate::TokenBucket) (see
//! "Limits changed at runtime" in the [bucket docs](crate::bucket)), for every entry of the
//! class and its overflow bucket, at the instant the change is counted at (below): a full
//! entry stays full; one that owes tokens still owes every one of them, earned back at the new
//! rate, whatever the new burst. An entry drained at 100/s with a burst of 100 holds 0 tokens
//! after a cut to 1/s and gets one a second, and holds 0 still after the cut is reverted: a
//! sequence of changes never forgives a debt. A change writes no entry: each is converted when
//! next read (see [`super::era`]), and reclamation judges an entry by what it owes after the
//! conversion, so a change never makes a drained entry reclaimable (and so fresh) sooner than
//! its new debt allows. A change takes a pass over the table (it converts the entries of the
//! era before, if any are left); a decision never waits for it.
//!
//! # Where a change is counted
//!
//! * **A slower rate, or the same one, at the limiter clock's reading** taken after the pass.
//!   A decision under the old class word may land after that reading (the change is preempted
//!   before it publishes, or the clock went back): counted earlier than such a decision, the
//!   debt is carried from an earlier instant, which at a slower rate only makes it longer.
//! * **A faster rate at the horizon** (`clock::horizon`): the clock's reading plus
//!   [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS), or the highest such bound
//!   any decision was admitted against if higher (the clock went back since), frozen from that
//!   reading until the new era is published. No decision under the old class word is admitted
//!   at a later reading, however long the change is preempted between its read and its
//!   publication, so none is repaid at the faster rate for time the old rate counted
//!   (`limiter::change_reading_tests`; loom:
//!   `a_faster_change_preempted_after_its_read_racing_a_drain`). A decision whose reading is
//!   above the frozen horizon (more than the tolerance after the change's read, so only while
//!   the changing thread is preempted before it publishes) is refused, charging nothing
//!   ([`ReadingAhead::while_a_change_lands`](crate::clock::ReadingAhead::while_a_change_lands)):
//!   it can be decided under neither rate, and it never waits for the change.
//!
//! The overflow bucket has no config of its own: it is built from its class's and is decided
//! under the same copy as the entry, so `set_config` changes both at once and there is no
//! separate `set_overflow_config`.

use super::era::MAX_CLASS_BURST;
use super::{Class, Limiter, LimiterConfigError};
use crate::bucket::{gcra, BucketConfig, BucketConfigError};
use crate::clock::tick::Tick;
use crate::clock::Clock;
use std::cell::Cell;
use std::sync::PoisonError;

impl<C: Clock> Limiter<C> {
    /// Replaces `class`'s burst and refill interval (for its entries and its overflow bucket),
    /// at once, while other threads decide, at a reading of the limiter's clock. Every entry
    /// and the overflow bucket keep the tokens they owe, earned back at the new rate, by the
    /// rules of a [`TokenBucket`](crate::TokenBucket) (see "Limits changed at runtime" in the
    /// [bucket docs](crate::bucket)): a full entry stays full, a drained one stays drained, and
    /// a debt above a full new burst is kept, so a cut and its revert forgive nothing. A faster
    /// rate is counted at the limiter's horizon, no earlier than any decision under the old
    /// config (see "Where a change is counted" in `limiter/reconfig.rs`). No entry is written
    /// at the change: each is converted when next read.
    ///
    /// Refused, changing nothing, for a class the limiter was not built with
    /// ([`LimiterConfigError::UnknownClass`]), for a config that does not fit the unit the
    /// limiter counts time in, fixed at build ([`LimiterConfigError::ClassDoesNotFit`]), and
    /// for a burst above [`LimiterConfigError::MAX_CLASS_BURST`]
    /// ([`LimiterConfigError::ClassBurstTooLarge`]).
    ///
    /// ```
    /// use admit::{BucketConfig, Limiter, LimiterConfigError, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let limiter =
    ///     Limiter::builder().build_with_clock([BucketConfig::per_second(100)?], clock.clone())?;
    /// assert!(limiter.try_acquire_n("alice", 0, 100).is_ok()); // she owes 100 tokens
    /// // Cut to 1/s, same burst: alice still owes all 100, now earned back one a second.
    /// limiter.set_config(0, BucketConfig::per_second(1)?.with_burst(100)?)?;
    /// assert!(limiter.try_acquire("alice", 0).is_err());
    /// assert!(limiter.try_acquire_n("bob", 0, 100).is_ok(), "bob's new entry starts full");
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.try_acquire("alice", 0).is_ok());
    /// assert!(limiter.try_acquire("alice", 0).is_err());
    /// assert_eq!(limiter.config(0).map(|c| c.burst()), Some(100));
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
        let (index, fitted) = self.fit(class, &config)?;
        let Some(cls) = self.classes.get(index) else {
            return Err(LimiterConfigError::UnknownClass {
                class,
                classes: self.classes.len(),
            });
        };
        // A poisoned mutex only says a change panicked, which none does: the guard protects
        // no data, only the order of changes.
        let _changing = self.changes.lock().unwrap_or_else(PoisonError::into_inner);
        // Refused before anything is applied (see `bucket::debt`).
        let longest = cls
            .config
            .longest_after(&fitted)
            .map_err(|carried| self.debt_beyond(class, carried))?;
        let now = self.now_tick(self.clock.now_ns());
        self.finish_era(index, cls, now);
        // Where the change is counted (see "Where a change is counted"). A slower rate (or the
        // same one) at the clock's reading: counted early, a debt is only repaid more slowly.
        // A faster rate at the horizon, frozen until the new era is published: no decision
        // under the old class word was, or will be, admitted at a later reading, however long
        // this thread is preempted, and whatever reading the clock went back to.
        let at = if gcra::is_faster(&cls.config.config(), &fitted) {
            let frozen = self.horizon.freeze(&self.clock);
            let at = self.now_tick(frozen.bound());
            cls.config.start_era(&fitted, at, longest);
            drop(frozen);
            at
        } else {
            let at = self.now_tick(self.clock.now_ns());
            cls.config.start_era(&fitted, at, longest);
            at
        };
        // A faster rate may bring converted entries back sooner than the last scan saw: let
        // the next miss at the cap scan again (from the change's instant on, the earliest
        // any converted entry can be full).
        self.hint.lower_all(at);
        Ok(())
    }

    /// Converts every value of `cls` (index `class`) still in the era before its current
    /// one, and its overflow bucket, to the current era: the pass that keeps two eras of one
    /// parity from meeting (invariant 2 in [`super::era`]). Under the change mutex.
    fn finish_era(&self, class: usize, cls: &Class, now: u64) {
        // Before the pass (see `era`, invariant 4): a decision on a newborn that meets later
        // sees the class word stored by the change before this one.
        cls.config.meet();
        let stamp = cls.config.stamp();
        cls.config.align_overflow(&cls.overflow, stamp);
        loop {
            // A value from a later epoch than the pass entered cannot be re-encoded in it:
            // the pass runs again in the epoch entered then.
            let missed = Cell::new(false);
            let carry = |value: u64, tag: u32, codec: &dyn Fn(u64) -> Option<u64>| {
                if self.hasher.class_of(tag) != class {
                    return None;
                }
                match cls
                    .config
                    .aligned_value(stamp, value, |coded| self.decode(coded), codec)
                {
                    None => None,
                    Some(None) => {
                        missed.set(true);
                        None
                    }
                    Some(Some(value)) => Some(value),
                }
            };
            match &self.epochs {
                None => {
                    self.table
                        .rewrite(|value, tag| carry(value, tag, &Some), || true);
                }
                Some(epochs) => {
                    let epoch = self.enter_epoch(epochs, now);
                    let encode = |full_at| super::epoch::Epochs::encode(epoch, full_at);
                    self.table
                        .rewrite(|value, tag| carry(value, tag, &encode), || true);
                }
            }
            if !missed.get() {
                return;
            }
        }
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
        let (index, fitted) = self.fit(class, config)?;
        match self.classes.get(index) {
            Some(cls) => cls
                .config
                .longest_after(&fitted)
                .map(|_| ())
                .map_err(|carried| self.debt_beyond(class, carried)),
            None => Err(LimiterConfigError::UnknownClass {
                class,
                classes: self.classes.len(),
            }),
        }
    }

    /// [`LimiterConfigError::DebtBeyondUnit`] for `class`, carrying `carried` ticks.
    fn debt_beyond(&self, class: usize, carried: u128) -> LimiterConfigError {
        match BucketConfigError::debt_beyond(carried, self.tick) {
            BucketConfigError::DebtBeyondUnit { carried, longest } => {
                LimiterConfigError::DebtBeyondUnit {
                    class,
                    carried,
                    longest,
                }
            }
            _ => LimiterConfigError::DebtBeyondUnit {
                class,
                carried: std::time::Duration::MAX,
                longest: std::time::Duration::MAX,
            },
        }
    }

    /// `class` and `config` in the limiter's unit, or why it is refused.
    fn fit(
        &self,
        class: usize,
        config: &BucketConfig,
    ) -> Result<(usize, BucketConfig), LimiterConfigError> {
        if class >= self.classes.len() {
            return Err(LimiterConfigError::UnknownClass {
                class,
                classes: self.classes.len(),
            });
        }
        if config.burst() > MAX_CLASS_BURST {
            return Err(LimiterConfigError::ClassBurstTooLarge {
                class,
                burst: config.burst(),
            });
        }
        let fitted =
            config
                .in_unit(self.tick)
                .map_err(|_| LimiterConfigError::ClassDoesNotFit {
                    class,
                    config: *config,
                    counted_in_micros: self.tick == Tick::Micros,
                })?;
        Ok((class, fitted))
    }
}
