//! A [`TokenBucket`](super::TokenBucket)'s config, versioned in its state word, so that a
//! change carries every token owed over at the instant it is made (see "Limits changed at
//! runtime" in the [bucket docs](super)).
//!
//! # Protocol
//!
//! ```text
//!  63          52 51                                              0
//! +--------------+--------------------------------------------------+
//! |   VERSION    |  FULL_AT: tick (ms or µs) at which it is full     |
//! +--------------+--------------------------------------------------+
//!
//!  slot of VERSION % 2 (even, odd): the config FULL_AT is counted under (burst and interval, packed)
//! ```
//!
//! A change (serialised with other changes by a mutex; no decision takes it) at reading `t`:
//!
//! 1. writes the new config into the slot of `v + 1`, which no current state names;
//! 2. CASes the state word from `(v, FULL_AT)` to `(v + 1, convert(FULL_AT, t))`;
//! 3. stores the new config as the current config, then `v + 1` as the current version.
//!
//! A decision loads the word, then the slot its version names, decides, and CASes the word
//! from what it loaded (a take, a refund) or loads it again and finds it unchanged (a refusal,
//! a peek). A take first tries the fast path: it loads the current version and the current
//! config *before* the word, so that nothing it computes waits on the word but the arithmetic
//! itself, and takes that path only if the word carries that version. Invariants, each checked
//! where named:
//!
//! 1. **A state is only ever read with the config it is counted under.** The slot a version
//!    names is written before any word carries that version (release on the change's CAS,
//!    acquire on every word load), and it is rewritten only by the change after next, which
//!    starts after the next change has moved the word on: so a decision that read a rewritten
//!    slot finds the word changed, its CAS fails or its second load differs, and it decides
//!    again from the new word. (Loom: `loom-tests/tests/live.rs`.)
//! 2. **Every decision is one a sequential history would make**, with each change at the
//!    instant of its CAS: a take or refund at its CAS; a refusal at its load of the word (on
//!    the fast path, where the version check is the validation) or its second load; a peek at
//!    its second load.
//!    A take that loaded the state before a change cannot land after it, since the change
//!    moved the version. (Loom, and the reference model with `SetConfig` ops in
//!    `check::bucket`.)
//! 3. **A change converts exactly once**: the changes are serialised, and each converts the
//!    word from the version it found to the next one.
//! 4. **The fast path reads the config its word is counted under.** A take that loads `v` as
//!    the current version (acquire) then loads the current config reads `v`'s config (stored
//!    before `v`), or one a later change stored after its own CAS had moved the word past
//!    `v`; in that case the take's load of the word, after the config's acquire load, finds
//!    a version other than `v`, and it does not take the fast path. In the fast path the
//!    arithmetic runs on the whole word (version bits included) against the reading with the
//!    same version bits, which changes nothing: both carry the same high bits and no sum
//!    leaves the field. (Loom: `loom-tests/tests/live.rs`; every decision of the reference
//!    model runs it.)
//! 5. **Changes are counted in reading order.** A change to a faster rate is counted at
//!    the latest tick any take or change of the bucket used, if that is later than its own
//!    reading; every change raises that tick to its own reading under the lock. Changes that
//!    read their clocks in one order and take the lock in the other (or are handed readings
//!    out of order) are then counted as if made in reading order: a faster change never
//!    repays at its rate time that a slower change already counted at the old one.
//!    (`a_faster_change_is_counted_no_earlier_than_a_change_that_used_a_later_reading`; the
//!    reference model's `LateSetConfig`, searched by
//!    `changes_out_of_reading_order_stay_within_the_envelope`.)
//!
//! `FULL_AT` takes 52 bits because a microsecond bucket counts up to `Tick::Micros.max_now()`
//! plus its span, just under 2^52 (a millisecond one stays below 2^42). The version wraps
//! after 2^12 = 4,096 changes; a decision would have to stall between its load and its CAS
//! across exactly a multiple of that many changes, with the word back to the bits it loaded
//! (a bucket full throughout, or every change keeping the interval), to land a stale take.

use super::config::{BucketConfig, BucketConfigError};
use super::gcra;
use crate::clock::tick::{Tick, MAX_FINE_SPAN_TICKS};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::Mutex;

/// Width of the `FULL_AT` field.
const VALUE_BITS: u32 = 52;
/// Mask of the `FULL_AT` field.
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
/// How many changes the version counts before it wraps.
const VERSION_MASK: u64 = (1 << (64 - VALUE_BITS)) - 1;

// Every `FULL_AT` either unit can reach fits the field (see `gcra`: at most the latest tick
// plus the unit's largest span).
const _: () = assert!(Tick::Micros.max_now() + MAX_FINE_SPAN_TICKS <= VALUE_MASK);
const _: () = assert!(Tick::Millis.max_now() + crate::clock::tick::MAX_SPAN_TICKS <= VALUE_MASK);

/// The `FULL_AT` field of a state word.
#[inline]
pub(crate) fn full_at(word: u64) -> u64 {
    word & VALUE_MASK
}

/// The version field of a state word.
#[inline]
fn version(word: u64) -> u64 {
    word >> VALUE_BITS
}

/// The version field of a state word, in place (the word with its `FULL_AT` cleared).
#[inline]
pub(crate) fn version_bits(word: u64) -> u64 {
    word & !VALUE_MASK
}

/// The state `word` with its `FULL_AT`, `old` (which is `full_at(word)`), replaced by `new`
/// (at most [`Tick::max_now`] plus a span, so within the field; see the assertions above),
/// keeping its version.
#[inline]
pub(crate) fn with_full_at(word: u64, old: u64, new: u64) -> u64 {
    debug_assert_eq!(old, full_at(word));
    debug_assert!(new <= VALUE_MASK);
    (word ^ old) | new
}

/// The configs a state word's version names, and the lock that serialises changes.
#[derive(Debug)]
pub(crate) struct Versions {
    /// [`BucketConfig::pack`] of the config of every even version.
    even: AtomicU64,
    /// And of every odd one.
    odd: AtomicU64,
    /// The latest version, in place (`version << 52`), stored once the state carries it.
    current: AtomicU64,
    /// [`BucketConfig::pack`] of the latest version's config, stored before `current`.
    current_config: AtomicU64,
    /// The unit, fixed at construction.
    tick: Tick,
    /// The bucket's random id, which its grants carry (see "Refunds" in the bucket docs):
    /// kept here, beside the unit, where it fills what would be padding, so a bucket stays
    /// within 96 bytes. 32 random bits: two buckets share one with chance 2^-32, and then a
    /// grant misrefunded between them still gives back only if their words are equal too.
    id: u32,
    /// Held by a change, from reading the current version to converting the word: the longest
    /// debt the configs in force so far allow, in ticks (see `bucket::debt`).
    change: Mutex<u64>,
}

impl Versions {
    /// Version 0 is `config`.
    pub(crate) fn new(config: BucketConfig) -> Self {
        Self {
            even: AtomicU64::new(config.pack()),
            odd: AtomicU64::new(config.pack()),
            current: AtomicU64::new(0),
            current_config: AtomicU64::new(config.pack()),
            tick: config.tick(),
            // The low 32 bits of a fresh secret draw.
            id: crate::entropy::random_u64() as u32,
            change: Mutex::new(config.span_ticks()),
        }
    }

    /// The bucket's random id (see the field).
    #[inline]
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// The config the state `word` is counted under.
    #[inline]
    pub(crate) fn of(&self, word: u64) -> BucketConfig {
        // Acquire: with the acquire load of `word`, reads at least what the change that
        // published `word` wrote; and orders the next load of the state word after this one,
        // so a slot rewritten by a later change is caught by that load (invariant 1).
        let packed = self.slot(version(word)).load(Ordering::Acquire);
        BucketConfig::unpack(packed, self.tick)
    }

    /// The current version, in place, and its config (or a later one): the fast path's guess
    /// at the config of a state word not yet loaded (invariant 4).
    #[inline]
    pub(crate) fn current(&self) -> (u64, BucketConfig) {
        // Acquire: the state word was moved to this version, and its config stored as current,
        // before the version was stored.
        let version_bits = self.current.load(Ordering::Acquire);
        // Acquire: orders the state word's load after this one (invariant 4).
        let packed = self.current_config.load(Ordering::Acquire);
        (version_bits, BucketConfig::unpack(packed, self.tick))
    }

    /// The slot of `version`.
    #[inline]
    fn slot(&self, version: u64) -> &AtomicU64 {
        if version & 1 == 0 {
            &self.even
        } else {
            &self.odd
        }
    }

    /// The state word and the config it is counted under, consistently (invariant 1).
    pub(crate) fn snapshot(&self, state: &AtomicU64) -> (u64, BucketConfig) {
        // Acquire: see `of`; the config slot this word names was written before it.
        let mut word = state.load(Ordering::Acquire);
        loop {
            let config = self.of(word);
            // Acquire: ordered after the slot's load by that load's acquire; if the word is
            // unchanged, no change moved it while the slot was read.
            let again = state.load(Ordering::Acquire);
            if again == word {
                return (word, config);
            }
            word = again;
        }
    }

    /// `config` in this bucket's unit, or why it does not fit.
    pub(crate) fn fit(&self, config: &BucketConfig) -> Result<BucketConfig, BucketConfigError> {
        config.in_unit(self.tick)
    }

    /// Whether [`Versions::change`] would take `config` now, changing nothing: it fits the
    /// unit, and the debt it would carry fits the unit's longest span (`bucket::debt`).
    pub(crate) fn check(
        &self,
        state: &AtomicU64,
        config: &BucketConfig,
    ) -> Result<(), BucketConfigError> {
        let new = self.fit(config)?;
        // As in `change`.
        let longest = self
            .change
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Acquire: as in `change`; under the lock, the version is the current one.
        let word = state.load(Ordering::Acquire);
        super::debt::after_change(*longest, &self.of(word), &new)
            .map(|_| ())
            .map_err(|carried| BucketConfigError::debt_beyond(carried, self.tick))
    }

    /// Replaces the config with `config` at reading `now_ns`, converting the state `state`
    /// (invariant 3); refused, changing nothing, if `config` does not fit the unit.
    ///
    /// `latest` is the latest tick a take or a change of the bucket used (or later): a change
    /// to a faster rate is counted there if its own reading is earlier (see
    /// [`gcra::is_faster`]), and a change raises it to its own reading (invariant 5).
    pub(crate) fn change(
        &self,
        state: &AtomicU64,
        config: &BucketConfig,
        now_ns: u64,
        latest: &AtomicU64,
    ) -> Result<(), BucketConfigError> {
        let new = self.fit(config)?;
        let reading = self.tick.of(now_ns);
        // A poisoned lock only means a change panicked, which none does between its writes.
        let mut longest = self
            .change
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Acquire: only changes move the version, and they are serialised by the lock; and the
        // takes this word follows raised `latest` before their CAS (see the loop).
        let mut word = state.load(Ordering::Acquire);
        // Refused before anything is written: the carried debt would not fit the unit.
        let after = super::debt::after_change(*longest, &self.of(word), &new)
            .map_err(|carried| BucketConfigError::debt_beyond(carried, self.tick))?;
        // A change's reading counts as a take's does (invariant 5): a later change to a faster
        // rate, whose reading may be earlier (it read its clock first and took the lock
        // second), is counted no earlier than this one.
        // Relaxed: read by later changes only, each ordered after this one by the lock.
        latest.fetch_max(reading, Ordering::Relaxed);
        let next_version = (version(word) + 1) & VERSION_MASK;
        let old = self.of(word);
        // Release: a decision that loads this (acquire) while it still holds a word of version
        // `next_version − 2` is then ordered after the previous change's CAS, so its second
        // load of the word sees that CAS and it decides again (invariant 1). Any word of
        // `next_version` is published by the release CAS below.
        self.slot(next_version).store(new.pack(), Ordering::Release);
        loop {
            let now = if gcra::is_faster(&old, &new) {
                // Acquire: the word loaded above was acquired from the CAS of every take it
                // follows, each of which raised `latest` to its tick before its CAS; so this
                // load sees at least the latest tick of any take the word carries.
                reading.max(latest.load(Ordering::Acquire))
            } else {
                reading
            };
            let converted = gcra::convert_within(&old, &new, full_at(word), now, *longest);
            let next = next_version << VALUE_BITS | converted;
            match state.compare_exchange_weak(
                word,
                next,
                // Release: a decision that acquires this word (or a later one in its release
                // sequence) sees the slot written above.
                Ordering::Release,
                // Acquire: a take or refund landed first (its version is still ours), and the
                // tick it raised `latest` to must be seen by the next attempt.
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // Release (both): a take that acquires either sees the CAS above
                    // (invariant 4).
                    self.current_config.store(new.pack(), Ordering::Release);
                    self.current
                        .store(next_version << VALUE_BITS, Ordering::Release);
                    *longest = after;
                    return Ok(());
                }
                Err(actual) => word = actual,
            }
        }
    }
}
