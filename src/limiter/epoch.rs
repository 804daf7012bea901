//! Microsecond entries in 41 bits: each entry's `full_at` is an offset from one of four epoch
//! bases, and one migration per epoch moves every entry onto the newest base. (The value's
//! 42nd bit is its class's era bit, see [`super::era`]; a migration keeps it.)
//!
//! A limiter whose classes need microseconds (an interval that is not whole milliseconds, up
//! to 1,000,000 tokens per second) cannot store an absolute `full_at` in the entry's 41 bits:
//! 104 years of uptime are 3.3·10^15 µs, 52 bits. So such an entry stores
//!
//! ```text
//!  40 39 38                                                   0
//! +-----+------------------------------------------------------+
//! | TAG |  OFFSET + 1: full_at − B[TAG] + 1, in 1 .. 2^39        |
//! +-----+------------------------------------------------------+
//! ```
//!
//! where `B[TAG]` is the base of the epoch numbered `TAG` modulo 4 (four `AtomicU64`s beside an
//! epoch counter). The all-zero value stays `FRESH` (a never-charged entry): no encoding
//! produces it. Epochs are [`EPOCH_TICKS`] = 2^37 µs (1.6 days) long: a decision whose reading
//! is more than that past the current base first *migrates* to a new epoch whose base is its
//! reading.
//!
//! # Protocol
//!
//! * **Enter.** A decision loads the state (`Acquire`). If a migration is in progress it helps
//!   finish it; if its reading is past `base + EPOCH_TICKS` it starts one; then it decides in
//!   the epoch it loaded, `(e, B_e)`.
//! * **Decode** a value: `B[TAG] + OFFSET`, whatever the decider's epoch.
//! * **Encode** in epoch `e`: `max(full_at, B_e) − B_e + 1`, tag `e mod 4`; refused if it does
//!   not fit 40 bits, and the decision then enters again (the value came from a later epoch).
//! * **Start** a migration to `e+1`: set `B[(e+1) mod 4]` to the reading by CAS from the
//!   stale value it held (bases only grow, so a late starter's CAS fails), then CAS the state
//!   from stable `e` to migrating `e+1` (`AcqRel`: the base is published with it).
//! * **Migrate.** Every helper passes over every slot: a member whose tag is not `e+1 mod 4`
//!   is re-encoded in epoch `e+1` by CAS from the exact word (a full entry is raised to the
//!   base: it is full there too). A helper stops as soon as the state has moved on; whoever
//!   finishes a whole pass CASes the state to stable `e+1`.
//!
//! # Invariants
//!
//! 1. **Exact decoding.** A value decodes to the instant that was encoded, as long as its
//!    writer did not stall between loading its epoch and its CAS across three completed
//!    migrations (below). Checked against absolute `u128` time by the proptest
//!    `microsecond_limiter_matches_the_model` and the idle tests in `limiter::tests`.
//! 2. **Fits.** Every encoded offset is below 2^39: a decision in epoch `e` has a reading at
//!    most `B_e + EPOCH_TICKS` and writes at most a span (≤ 2^38 µs) past it, and `2^37 +
//!    2^38 < 2^39`; a migration writes at most a span past the new base.
//! 3. **A migration mints nothing.** It keeps every instant, or raises a full entry's to the
//!    base (a later `full_at` never holds more tokens), and never removes or inserts.
//! 4. **Lock-free.** No step waits for another thread: a stalled migrator's pass is finished
//!    by the next decision that needs the epoch (loom: `limiter_micros` models in
//!    `loom-tests/tests/limiter.rs`).
//!
//! # The stall bound
//!
//! A word written in epoch `e` carries tag `e mod 4`, which names `B_e` until the migration to
//! `e+4` overwrites that base. Each migration re-encodes every word it finds, and a writer's
//! CAS fails once the word it read was re-encoded, so a stale tag survives only if its writer
//! loaded epoch `e` before the migration to `e+1` and landed its CAS after the pass of `e+3`
//! visited the slot. Migrations need readings at least `EPOCH_TICKS` apart, so that is a stall
//! of at least three epochs, 4.8 days of the clock, inside one CAS loop.

use super::era::CODED;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::table::Table;

/// The epoch length, in microsecond ticks: 2^37 µs, about 1.6 days.
pub(crate) const EPOCH_TICKS: u64 = 1 << 37;
/// Width of the offset field.
const OFFSET_BITS: u32 = 39;
/// Mask of the offset field.
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// Bases kept: the current epoch's and the three before it.
const BASES: u64 = 4;
/// The state's low bit: a migration to the state's epoch is in progress.
const MIGRATING: u64 = 1;

const _: () = assert!(
    EPOCH_TICKS + crate::clock::tick::MAX_FINE_SPAN_TICKS < OFFSET_MASK,
    "a decision's write must fit the offset"
);

/// The epoch state and its four bases. See the module docs.
#[derive(Debug)]
pub(super) struct Epochs {
    /// `epoch << 1 | MIGRATING`.
    state: AtomicU64,
    bases: [AtomicU64; BASES as usize],
}

/// The epoch a decision decides in: its number and its base.
#[derive(Debug, Clone, Copy)]
pub(super) struct Epoch {
    number: u64,
    base: u64,
}

impl Epochs {
    /// Epoch 0, based at tick 0.
    pub(super) fn new() -> Self {
        Self {
            state: AtomicU64::new(0),
            bases: [
                AtomicU64::new(0),
                AtomicU64::new(0),
                AtomicU64::new(0),
                AtomicU64::new(0),
            ],
        }
    }

    /// The epoch to decide in at tick `now`: finishes a migration in progress and starts one
    /// if `now` is more than an epoch past the current base.
    #[inline]
    pub(super) fn enter(
        &self,
        now: u64,
        table: &Table,
        judge: impl Fn(u64, u32) -> (u64, u64),
    ) -> Epoch {
        loop {
            // Acquire: pairs with the AcqRel CAS that published this state, so the base it
            // names (written before) is visible below.
            let state = self.state.load(Ordering::Acquire);
            let number = state >> 1;
            if state & MIGRATING != 0 {
                self.migrate(state, table, &judge);
                continue;
            }
            // Relaxed: written before the state we loaded was published (see above).
            let base = self.base(number).load(Ordering::Relaxed);
            if now.saturating_sub(base) > EPOCH_TICKS {
                self.start(state, base, now);
                continue;
            }
            return Epoch { number, base };
        }
    }

    /// The base slot of epoch `number` (and of every epoch congruent to it modulo 4).
    #[inline]
    fn base(&self, number: u64) -> &AtomicU64 {
        let [b0, b1, b2, b3] = &self.bases;
        match number % BASES {
            0 => b0,
            1 => b1,
            2 => b2,
            _ => b3,
        }
    }

    /// The instant a value encodes (`FRESH` stays `FRESH`).
    #[inline]
    pub(super) fn decode(&self, value: u64, epoch: Option<Epoch>) -> u64 {
        if value == crate::bucket::gcra::FRESH {
            return value;
        }
        let tag = value >> OFFSET_BITS;
        let offset = (value & OFFSET_MASK).saturating_sub(1);
        let base = match epoch {
            Some(e) if e.number % BASES == tag => e.base,
            // Relaxed: the word carrying this tag was read with Acquire, and its writer had
            // loaded (Acquire) the state that published this base, so the base's write
            // happens before this load.
            _ => self.base(tag).load(Ordering::Relaxed),
        };
        base.saturating_add(offset)
    }

    /// `full_at` encoded in `epoch`, raised to its base if earlier; `None` if it lies too far
    /// past the base (it was read from a later epoch: enter again).
    #[inline]
    pub(super) fn encode(epoch: Epoch, full_at: u64) -> Option<u64> {
        let field = full_at.max(epoch.base) - epoch.base + 1;
        (field <= OFFSET_MASK).then_some((epoch.number % BASES) << OFFSET_BITS | field)
    }

    /// Starts the migration from the stable epoch in `state` (based at `base`) to the next,
    /// based at `now`; a racing starter may win with its own reading.
    #[cold]
    fn start(&self, state: u64, base: u64, now: u64) {
        let next = (state >> 1) + 1;
        let slot = self.base(next);
        // Acquire: if another starter already set it, its value is what helpers will read.
        let old = slot.load(Ordering::Acquire);
        if old <= base {
            // The slot holds a retired base (bases only grow): claim it for the next epoch.
            // AcqRel: the winner's write is published by the state CAS below (whoever makes
            // it read this slot's final value first); a failure means another starter won.
            let _ = slot.compare_exchange(old, now, Ordering::AcqRel, Ordering::Acquire);
        }
        // AcqRel: publishes the base to every thread that loads this state (Acquire); fails
        // if another starter published first, which is as good.
        let _ = self.state.compare_exchange(
            state,
            next << 1 | MIGRATING,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Helps the migration named by `state` finish: re-encodes every member onto the new
    /// base, then marks the epoch stable.
    #[cold]
    fn migrate(&self, state: u64, table: &Table, judge: &impl Fn(u64, u32) -> (u64, u64)) {
        let number = state >> 1;
        // Relaxed: published by the state CAS our caller's Acquire load read.
        let base = self.base(number).load(Ordering::Relaxed);
        let epoch = Epoch { number, base };
        let tag = number % BASES;
        let finished = table.rewrite(
            |value, key_tag| {
                let coded = value & CODED;
                if coded == crate::bucket::gcra::FRESH || coded >> OFFSET_BITS == tag {
                    return None;
                }
                // What the entry holds now in its class's era (converted if it is from the
                // era before, which a full entry raised to the base must not lose).
                let (full_at, era) = judge(value, key_tag);
                Self::encode(epoch, full_at).map(|coded| coded | era)
            },
            // Acquire: as in `enter`; a helper stops once the state moved on.
            || self.state.load(Ordering::Acquire) == state,
        );
        if finished {
            // AcqRel: publishes the pass (every word re-encoded) with the stable state.
            let _ = self.state.compare_exchange(
                state,
                state & !MIGRATING,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
    }

    /// Decides in `epoch`: the codec of a decision that entered it.
    #[inline]
    pub(super) fn within(&self, epoch: Epoch) -> Relative<'_> {
        Relative {
            epochs: self,
            epoch,
        }
    }

    /// The current epoch's number, for tests.
    #[cfg(test)]
    pub(super) fn number(&self) -> u64 {
        self.state.load(Ordering::Relaxed) >> 1
    }
}

/// How a decision reads and writes an entry's value: the `full_at` it holds, and the value
/// that holds a new one (`None`: it does not fit; enter again). Monomorphised, so a limiter of
/// millisecond classes pays nothing for the microsecond encoding.
pub(super) trait Codec: Copy {
    /// The `full_at` a value holds.
    fn decode(self, value: u64) -> u64;
    /// The value that holds `full_at`.
    fn encode(self, full_at: u64) -> Option<u64>;
}

/// Milliseconds: the value is `full_at` itself.
#[derive(Debug, Clone, Copy)]
pub(super) struct Absolute;

impl Codec for Absolute {
    #[inline(always)]
    fn decode(self, value: u64) -> u64 {
        value
    }

    #[inline(always)]
    fn encode(self, full_at: u64) -> Option<u64> {
        Some(full_at)
    }
}

/// Microseconds: an offset from an epoch's base, in the epoch a decision entered.
#[derive(Debug, Clone, Copy)]
pub(super) struct Relative<'a> {
    epochs: &'a Epochs,
    epoch: Epoch,
}

impl Codec for Relative<'_> {
    #[inline]
    fn decode(self, value: u64) -> u64 {
        self.epochs.decode(value, Some(self.epoch))
    }

    #[inline]
    fn encode(self, full_at: u64) -> Option<u64> {
        Epochs::encode(self.epoch, full_at)
    }
}
