//! A class's config and its era: how a change of a class's limits carries the tokens owed by
//! its entries and its overflow bucket over, without touching any entry at the change.
//!
//! A class's burst and interval are packed in one word with an *era* bit, the parity of how
//! many times the class was changed. Every entry's value carries the era bit of the class word
//! it was last written under (bit 41 of the table's 42-bit value; the 41 bits below hold its
//! `full_at`, coded as in [`super::epoch`]), and so does the overflow bucket's word (bit 63).
//! A change records, for the era it starts, the instant it was made at and the config it
//! replaced (a *cut*: two slots, by parity). An entry whose era bit differs from its class's
//! is from the era before; it means what [`gcra::convert`] makes of it at the cut's instant,
//! from the cut's old config to the class's config: every token owed carries over, whatever
//! the new burst (a debt above it is kept), and a full entry stays full. That is exactly what a [`TokenBucket`](crate::TokenBucket) does to its one
//! word at a change; an entry is converted when it is next read instead of at the change.
//!
//! ```text
//!  class word   63   62                  32 31                   0
//!              +----+----------------------+----------------------+
//!              | ERA|  BURST (< 2^31)      |  INTERVAL (ticks)    |
//!              +----+----------------------+----------------------+
//!  entry value  41   40                                          0
//!              +----+---------------------------------------------+
//!              | ERA|  full_at, coded (see `epoch`)               |
//!              +----+---------------------------------------------+
//! ```
//!
//! # Protocol
//!
//! * **Decide.** A decision loads the class word `W` (to check `n` against the burst), then the
//!   entry's word (`Acquire`), then the class word again (`Acquire`). If the entry carries
//!   `W`'s era bit and the class word has not moved, the decision decides under `W`: that is
//!   the whole hit path, one load and two compares more than before eras. If the class word
//!   moved, the decision starts over under the new one. Otherwise the entry is from the era
//!   before `W`'s: its value is converted through `W`'s cut, decided on, and committed even
//!   when the decision refuses, with `W`'s era bit. A change published after the second load
//!   orders the decision before it: its CAS leaves a value of `W`'s era, which the next
//!   reader converts. A *newborn* entry (holding `FRESH`: inserted, never charged) is decided
//!   off the hit path, after the decision *meets* the class's changes (an `AcqRel` RMW on the
//!   class's `meets` counter) and before it loads the class word the second time.
//! * **Judge.** A reclaim scan and a microsecond epoch migration read an entry's class off its
//!   tag (see [`crate::table::KeyHasher::class_of`]; a peek knows it), load that class's word
//!   after the entry's (`Acquire`), and judge or re-encode the converted value.
//! * **Change** (serialised by the limiter's change mutex, which no decision takes): meet
//!   (the same RMW); convert every entry of the class still in the era before the current
//!   one, and the overflow bucket, to the current era (CAS from the exact word read; a newborn
//!   stays `FRESH` and only takes the current era bit); write the next era's cut (the change's
//!   instant and the current config); store the new class word with the other era bit
//!   (`Release`).
//!
//! # Invariants
//!
//! 1. **Owed tokens carry over.** After a change at instant `t`, every entry and overflow
//!    bucket of the class holds what [`gcra::convert`] makes of its state at `t`, whether or
//!    not anything touched it since. Checked against a reference that converts every bucket
//!    eagerly at the change, by the proptests `matches_the_reference_model` (milliseconds) and
//!    `microsecond_limiter_matches_the_model`, by the `limiter_miss_path` fuzz target, and by
//!    the tests in `limiter::reconfig_tests`.
//! 2. **One era apart.** A value and the class word it is judged under are at most one era
//!    apart, so one era bit tells them apart: a change converts the era before the current one
//!    out of the table before it starts the next (so two eras of one parity never meet), and a
//!    reader that finds the other era bit loads the class word after the value, whose writer
//!    had loaded a class word of the value's era (so the reader's is no older). Loom
//!    (`loom-tests/tests/live.rs`): `a_rate_cut_racing_a_charge_on_one_entry`,
//!    `two_changes_racing_a_charge_on_one_entry` (the change's pass), and
//!    `a_charge_that_slept_through_two_changes_decides_under_the_last` (the hit path's second
//!    load of the class word).
//! 3. **Every conversion is written before anyone relies on it.** A decision commits the
//!    value it converted even when it refuses, so a reclaim that judged a word full under the
//!    era before (and removes it by CAS from that exact word) fails once a decision has seen
//!    the converted value; a reclaim is never the reason a converted debt disappears. Loom:
//!    `a_reclaim_racing_a_rate_cut_and_a_refusal`; unit test:
//!    `a_refusal_writes_the_conversion_it_decided_on` (`limiter::reconfig_tests`).
//! 4. **A newborn meets every change.** An insert writes its first value (`FRESH`) in the era
//!    of the class word it loaded, and its promotion may reach a change's pass late: the
//!    pass's load of the slot may read the copy before it was promoted (or the slot before it
//!    was claimed) and skip it, while the decision on the new member still reads the class
//!    word it loaded before the change (neither thread's load is ordered after the other's
//!    store, the store-buffering shape). After *two* such changes the era bit is the entry's
//!    own again, and a decision made under the first config would be read as current. The
//!    meetings order the two: a decision that meets after a change's meeting sees the class
//!    word stored before that change's pass, so it starts over; one that meets before it has
//!    the promotion it read ordered before the pass, which then finds the newborn and rewrites
//!    its era bit, so the decision's CAS fails and it looks again. Only a newborn's decision
//!    pays the RMW: every other value was written by a CAS from a word the pass rewrites. Loom:
//!    `a_first_charge_racing_two_changes` (it fails without either meeting, or without the
//!    pass rewriting a newborn's era bit).
//! 5. **No conversion is cut.** A cut also records the longest debt the class's configs
//!    before it allowed (`bucket::debt`); a value is converted through
//!    [`gcra::convert_within`] with it, so a debt counted at a lagging instant (a slower
//!    change counted at a clock reading behind a decision's) is carried from the instant it
//!    was that long, and a change that could carry a debt beyond the unit's longest span is
//!    refused before it starts an era (`limiter::debt_tests`).

use crate::bucket::{gcra, BucketConfig};
use crate::clock::tick::Tick;
use crate::sync::atomic::{AtomicU64, Ordering};

/// The era bit of an entry's value (the table's value is 42 bits).
pub(super) const ENTRY_ERA: u64 = 1 << 41;
/// The bits of an entry's value below its era bit: its coded `full_at`.
pub(super) const CODED: u64 = ENTRY_ERA - 1;
/// The era bit of an overflow bucket's word (its `full_at` fits far below it).
pub(super) const OVERFLOW_ERA: u64 = 1 << 63;
/// The era bit of a class word.
const CLASS_ERA: u64 = 1 << 63;
/// The largest burst a limiter class takes: the class word's top bit is its era.
pub(crate) const MAX_CLASS_BURST: u32 = (1 << 31) - 1;

const _: () = assert!(
    crate::table::VALUE_BITS == 42,
    "the era bit is the value's top bit"
);

/// A class's config word, its era, and the cuts its last two changes made.
#[derive(Debug)]
pub(super) struct ClassCell {
    /// `era << 63 | burst << 32 | interval`, in `tick`.
    word: AtomicU64,
    /// The unit, fixed at build.
    tick: Tick,
    /// By era parity: the cut that started the era of that parity.
    cuts: [Cut; 2],
    /// Where a change and a decision on a newborn entry meet (invariant 4): only RMWs, so
    /// every one synchronises with all before it. Its value means nothing.
    meets: AtomicU64,
    /// The longest debt the class's configs so far allow, in ticks (`bucket::debt`): written
    /// by changes only, under the change mutex.
    longest: AtomicU64,
}

/// Where an era started: the instant, the config before it (packed), and the longest debt
/// the configs before it allowed.
#[derive(Debug)]
struct Cut {
    at: AtomicU64,
    from: AtomicU64,
    longest: AtomicU64,
}

/// A class word as a decision loaded it: the config it decides under, and its era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp(u64);

impl Stamp {
    /// The era's parity: 0 or 1.
    #[inline]
    fn era(self) -> u64 {
        self.0 >> 63
    }

    /// The era bit of a value written under this stamp: the class word's bit 63 moved down
    /// to the value's bit 41.
    #[inline(always)]
    pub(super) fn entry_era(self) -> u64 {
        (self.0 >> (63 - 41)) & ENTRY_ERA
    }

    /// Whether an entry's value was written in this stamp's era (or holds no instant yet).
    #[inline]
    fn current(self, value: u64) -> bool {
        self.same_era(value) || value & CODED == gcra::FRESH
    }

    /// Whether an entry's value carries this stamp's era bit (the class word's bit 63 moved
    /// down to the value's bit 41): the hit path's test, two instructions.
    #[inline(always)]
    fn same_era(self, value: u64) -> bool {
        (value ^ self.entry_era()) & ENTRY_ERA == 0
    }
}

/// An entry's `full_at` under a class word, and whether it had to be converted to get it
/// (then the caller commits it).
#[derive(Debug, Clone, Copy)]
pub(super) struct Aligned {
    pub(super) full_at: u64,
    pub(super) converted: bool,
}

impl ClassCell {
    /// A class of `config` (fitted to the limiter's unit), in era 0.
    pub(super) fn new(config: &BucketConfig) -> Self {
        Self {
            word: AtomicU64::new(config.pack()),
            tick: config.tick(),
            // Never read before a change writes them; the class's own config keeps even a
            // stray read's arithmetic defined (a non-zero interval).
            cuts: [Cut::new(config), Cut::new(config)],
            meets: AtomicU64::new(0),
            longest: AtomicU64::new(config.span_ticks()),
        }
    }

    /// The meeting of invariant 4, made by a change before its pass and by a decision on a
    /// newborn entry (one holding `FRESH`) before it checks the class word.
    pub(super) fn meet(&self) {
        // AcqRel: the RMWs on `meets` form one chain, each synchronising with all before it.
        // A decision that meets after a change's pass began sees the class word stored before
        // that pass (and starts over if it is not its own); one that meets before it has the
        // promotion it read ordered before the pass, which then finds its newborn and rewrites
        // its era bit, so that the decision's CAS fails.
        self.meets.fetch_add(1, Ordering::AcqRel);
    }

    /// The class word and its config, for a decision to check `n` against and decide under.
    #[inline]
    pub(super) fn load(&self) -> (Stamp, BucketConfig) {
        // Relaxed: a decision re-reads the word (Acquire) after the entry's before it uses it
        // against any entry; this load only checks `n` and picks the config.
        let word = self.word.load(Ordering::Relaxed);
        (Stamp(word), self.config_of(word))
    }

    /// The current config.
    pub(super) fn config(&self) -> BucketConfig {
        self.load().1
    }

    /// The config a stamp of this class carries.
    #[inline(always)]
    pub(super) fn config_of_stamp(&self, stamp: Stamp) -> BucketConfig {
        self.config_of(stamp.0)
    }

    #[inline(always)]
    fn config_of(&self, word: u64) -> BucketConfig {
        BucketConfig::unpack(word & !CLASS_ERA, self.tick)
    }

    /// Whether an entry's `value`, just loaded (`Acquire`), carries `stamp`'s era bit and the
    /// class word has not moved since `stamp` was loaded: the hit path's whole era check, one
    /// load and two compares. Otherwise the value is from the era before (convert it) or the
    /// class moved (start over); [`ClassCell::align`] tells which.
    #[inline(always)]
    pub(super) fn current(&self, stamp: Stamp, value: u64) -> bool {
        // Acquire: as in `align`.
        stamp.same_era(value) && self.word.load(Ordering::Acquire) == stamp.0
    }

    /// What an entry's `value`, just loaded (`Acquire`), holds under `stamp`: `None` if the
    /// class word moved since `stamp` was loaded (start over).
    #[inline]
    pub(super) fn align(
        &self,
        stamp: Stamp,
        value: u64,
        decode: impl Fn(u64) -> u64,
    ) -> Option<Aligned> {
        // Acquire: after the entry's Acquire load, so a value written in a later era (by a
        // thread that had loaded that era's word) shows here as a moved word; and it makes
        // the cut of this era, written before the word, visible to `carry`.
        if self.word.load(Ordering::Acquire) != stamp.0 {
            return None;
        }
        let full_at = decode(value & CODED);
        if stamp.current(value) {
            return Some(Aligned {
                full_at,
                converted: false,
            });
        }
        Some(Aligned {
            full_at: self.carry(stamp, full_at),
            converted: true,
        })
    }

    /// What an entry's `value` of this class, just loaded (`Acquire`), holds now, whatever
    /// its era: its `full_at` and the era bit it holds it in (for a reclaim, a peek, an epoch
    /// migration: readers that never start over).
    pub(super) fn judge(&self, value: u64, decode: impl Fn(u64) -> u64) -> (u64, u64) {
        // Acquire: as in `align`: no older than the value's era, and the cut is visible.
        let stamp = Stamp(self.word.load(Ordering::Acquire));
        let full_at = decode(value & CODED);
        if stamp.current(value) {
            (full_at, value & ENTRY_ERA)
        } else {
            (self.carry(stamp, full_at), stamp.entry_era())
        }
    }

    /// `full_at` of the era before `stamp`'s, converted through the cut that started it.
    #[cold]
    #[inline(never)]
    fn carry(&self, stamp: Stamp, full_at: u64) -> u64 {
        let cut = self.cut(stamp.era());
        // Relaxed, both: the Acquire load that returned `stamp` synchronized with the
        // change's Release store of it, which followed these writes. A later change rewrites
        // this cut only two changes on, after converting every value it could apply to, so a
        // reader that raced it fails its CAS on the value it converted (invariant 2).
        let at = cut.at.load(Ordering::Relaxed);
        let from = self.config_of(cut.from.load(Ordering::Relaxed));
        // Relaxed: as `at`.
        let longest = cut.longest.load(Ordering::Relaxed);
        gcra::convert_within(&from, &self.config_of(stamp.0), full_at, at, longest)
    }

    /// Takes `n` tokens from the class's overflow bucket under `stamp` at `now_ns`, converting
    /// its state first if it is from the era before: the word the take left (a refund's
    /// receipt), or `None` if the class word moved (start over).
    #[inline]
    pub(super) fn take_overflow(
        &self,
        overflow: &AtomicU64,
        stamp: Stamp,
        config: &BucketConfig,
        n: u32,
        now_ns: u64,
    ) -> Option<Result<u64, crate::bucket::BucketRefused>> {
        self.update_overflow(overflow, stamp, |full_at| {
            gcra::take_at(config, full_at, n, now_ns)
        })
    }

    /// Debits `n` tokens from the class's overflow bucket under `stamp` at tick `now`, down
    /// to `longest` owed (see `gcra::owe`), converting its state first if it is from the era
    /// before: the `full_at` written and whether the debit was cut, or `None` if the class
    /// word moved (start over).
    pub(super) fn debit_overflow(
        &self,
        overflow: &AtomicU64,
        stamp: Stamp,
        config: &BucketConfig,
        (n, now, longest): (u32, u64, u64),
    ) -> Option<(u64, bool)> {
        let cut = std::cell::Cell::new(false);
        let written = self.update_overflow(overflow, stamp, |full_at| {
            let (owed, was_cut) = gcra::owe(config, full_at, now, n, longest);
            cut.set(was_cut);
            Ok::<u64, std::convert::Infallible>(owed)
        })?;
        written.ok().map(|word| (word & !OVERFLOW_ERA, cut.get()))
    }

    /// Gives `n` tokens back to the class's overflow bucket, if its word is still `left`, the
    /// word the take being refunded left, under `stamp`, the class word it was taken under
    /// (see [`super::Limiter::refund_at`]): then exactly as if that take had not happened.
    /// Otherwise nothing: something landed since, and the refund is void. Whether it gave
    /// back.
    pub(super) fn refund_overflow(
        &self,
        overflow: &AtomicU64,
        stamp: Stamp,
        left: u64,
        credit: u64,
    ) -> bool {
        // Acquire: as in `align`, a class word no older than the overflow word's era.
        if self.word.load(Ordering::Acquire) != stamp.0 {
            return false;
        }
        let era = left & OVERFLOW_ERA;
        let next = era | (left & !OVERFLOW_ERA).saturating_sub(credit);
        // One attempt: a word other than `left` means something landed since.
        overflow
            .compare_exchange(
                left,
                next,
                // Relaxed: the refund publishes nothing a reader needs (its era is the word's own).
                Ordering::Relaxed,
                // Relaxed: void; nothing is read.
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// The overflow bucket's CAS loop, its state aligned to `stamp`'s era: the word written
    /// (or found, if the step changed nothing).
    #[inline]
    fn update_overflow<E>(
        &self,
        overflow: &AtomicU64,
        stamp: Stamp,
        step: impl Fn(u64) -> Result<u64, E>,
    ) -> Option<Result<u64, E>> {
        // Acquire: a state written in a later era must show the class word moved (below).
        let mut current = overflow.load(Ordering::Acquire);
        loop {
            // Acquire: as in `align`.
            if self.word.load(Ordering::Acquire) != stamp.0 {
                return None;
            }
            let (full_at, stale) = self.overflow_state(current, stamp);
            let era = stamp.era() * OVERFLOW_ERA;
            let (next, outcome) = match step(full_at) {
                Ok(next) => (next | era, Ok(next | era)),
                // A refusal of a state from the era before writes the conversion.
                Err(e) if stale => (full_at | era, Err(e)),
                Err(e) => return Some(Err(e)),
            };
            if next == current {
                return Some(outcome);
            }
            match overflow.compare_exchange_weak(
                current,
                next,
                // AcqRel: a reader of this state then loads a class word no older than ours.
                Ordering::AcqRel,
                // Acquire: judge the winner's state, era included.
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(outcome),
                Err(actual) => current = actual,
            }
        }
    }

    /// The overflow bucket's `full_at` now, whatever its era (for a peek).
    pub(super) fn overflow_full_at(&self, overflow: &AtomicU64) -> u64 {
        // Acquire: as in `update_overflow`.
        let current = overflow.load(Ordering::Acquire);
        // Acquire: as in `judge`.
        let stamp = Stamp(self.word.load(Ordering::Acquire));
        self.overflow_state(current, stamp).0
    }

    /// The `full_at` an overflow word `current` holds under `stamp`, and whether it was from
    /// the era before (and so converted).
    #[inline]
    fn overflow_state(&self, current: u64, stamp: Stamp) -> (u64, bool) {
        let raw = current & !OVERFLOW_ERA;
        if (current & OVERFLOW_ERA != 0) == (stamp.era() == 1) {
            (raw, false)
        } else {
            (self.carry(stamp, raw), true)
        }
    }

    /// The cut that started the era of parity `era`.
    fn cut(&self, era: u64) -> &Cut {
        let [even, odd] = &self.cuts;
        if era == 1 {
            odd
        } else {
            even
        }
    }

    /// The current stamp, for a change holding the change mutex (only it writes the word).
    pub(super) fn stamp(&self) -> Stamp {
        // Relaxed: the change mutex orders this with the last change's store.
        Stamp(self.word.load(Ordering::Relaxed))
    }

    /// Converts the overflow bucket to `stamp`'s era if it is from the era before (a change's
    /// pass, under the change mutex).
    pub(super) fn align_overflow(&self, overflow: &AtomicU64, stamp: Stamp) {
        // `Err` never happens: the step only reports the state it was given.
        let _ = self.update_overflow(overflow, stamp, Ok::<_, ()>);
    }

    /// The value an entry's `value` becomes in `stamp`'s era if it is from the era before
    /// (`None`: it is current, nothing to write), re-encoded by `encode` (`None`: it does not
    /// fit the encoder's epoch).
    pub(super) fn aligned_value(
        &self,
        stamp: Stamp,
        value: u64,
        decode: impl Fn(u64) -> u64,
        encode: impl Fn(u64) -> Option<u64>,
    ) -> Option<Option<u64>> {
        if stamp.same_era(value) {
            return None;
        }
        if value & CODED == gcra::FRESH {
            // A newborn of the era before: full in any era, but rewritten with the current
            // era bit all the same, so that a decision on it under an older class word fails
            // its CAS (invariant 4).
            return Some(Some(gcra::FRESH | stamp.entry_era()));
        }
        let full_at = self.carry(stamp, decode(value & CODED));
        Some(encode(full_at).map(|coded| coded | stamp.entry_era()))
    }

    /// The longest debt (`bucket::debt`) after a change to `config` (fitted), or the debt in
    /// ticks it would carry beyond the unit's longest span. Changing nothing.
    pub(super) fn longest_after(&self, config: &BucketConfig) -> Result<u64, u128> {
        // Relaxed: written by changes only, under the change mutex; a check outside it
        // answers for the changes it has seen.
        let longest = self.longest.load(Ordering::Relaxed);
        crate::bucket::debt::after_change(longest, &self.config(), config)
    }

    /// Starts the next era: `config` (fitted) from instant `at` on, converting from the
    /// current one, after which the longest debt is `longest` (from
    /// [`ClassCell::longest_after`]). Under the change mutex, after the pass that left no
    /// value of the era before.
    pub(super) fn start_era(&self, config: &BucketConfig, at: u64, longest: u64) {
        let current = self.stamp();
        let cut = self.cut(current.era() ^ 1);
        // Relaxed, all: published by the Release store of the word below.
        cut.at.store(at, Ordering::Relaxed);
        cut.from.store(current.0 & !CLASS_ERA, Ordering::Relaxed);
        cut.longest
            .store(self.longest.load(Ordering::Relaxed), Ordering::Relaxed);
        self.longest.store(longest, Ordering::Relaxed);
        let era = (current.era() ^ 1) << 63;
        // Release: a reader that loads this word (Acquire) sees the cut above.
        self.word.store(era | config.pack(), Ordering::Release);
    }
}

impl Cut {
    fn new(config: &BucketConfig) -> Self {
        Self {
            at: AtomicU64::new(0),
            from: AtomicU64::new(config.pack()),
            longest: AtomicU64::new(config.span_ticks()),
        }
    }
}
