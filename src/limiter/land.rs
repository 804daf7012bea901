//! Landing a charge: the entry's update in the table (hit, newborn, conversion), or overflow.

use super::epoch::{Codec, Epochs};
use super::era::{self, Stamp};
use super::{Class, Limiter};
use crate::bucket::gcra;
use crate::clock::Clock;
use crate::table::{Key, Lookup, Update, Verdict};

/// Which bucket a charge landed on.
pub(super) enum Landing {
    /// Decided on the key's entry: the `full_at` a grant left, or the refusal.
    Entry(Decided),
    Overflow,
    /// The entry's value came from a later epoch than the one entered: enter again.
    Again,
    /// The class word moved since the decision loaded it: decide again under the new one.
    Moved,
}

/// Why a decision's update of an entry stopped short.
#[derive(Clone, Copy)]
enum Redo {
    /// Enter the epoch again (microseconds).
    Epoch,
    /// Load the class again.
    Class,
    /// The entry is from the era before its class's, or the class word moved: decide again
    /// on the converting path.
    Convert,
}

/// A charge that landed on an entry: the first `full_at` of a newborn entry, and the answer.
type LandedCharge = (Option<u64>, Decided);

/// A decision on an entry in one word, so that what a grant left travels out of the table's
/// update as cheaply as the bare verdict did: the `full_at` a grant left (below 2^52), or,
/// with [`Decided::REFUSED`] set, the tick a refusal is ready from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Decided(pub(super) u64);

impl Decided {
    /// The refusal flag.
    const REFUSED: u64 = 1 << 63;
    /// A refusal for exceeding the burst (never reached: `class()` checks `n` first).
    const EXCEEDS: u64 = u64::MAX;

    #[inline(always)]
    pub(super) fn of(taken: Result<u64, gcra::Refusal>) -> Self {
        match taken {
            Ok(left) => Self(left),
            Err(gcra::Refusal::Empty { ready_tick }) => Self(Self::REFUSED | ready_tick),
            Err(gcra::Refusal::ExceedsBurst) => Self(Self::EXCEEDS),
        }
    }

    #[inline(always)]
    pub(super) fn result(self) -> Result<u64, gcra::Refusal> {
        match self.0 {
            Self::EXCEEDS => Err(gcra::Refusal::ExceedsBurst),
            word if word & Self::REFUSED != 0 => Err(gcra::Refusal::Empty {
                ready_tick: word & !Self::REFUSED,
            }),
            left => Ok(left),
        }
    }
}

impl<C: Clock> Limiter<C> {
    /// Lands a charge: on the key's entry (inserting, or reclaiming then inserting, as the
    /// rules say), or on the overflow bucket. `take` sees the entry's dated `full_at`.
    ///
    /// The update the table runs on the hit path stays small enough to inline: an entry of
    /// the era before, a newborn (`FRESH`) or a class word that moved sends it to
    /// [`Limiter::land_converting`], at the slot where it found the entry.
    ///
    /// With `COLD_CAP`, the table is handed the update once (`Table::update`) and a miss at
    /// the cap reclaims on the cold path, which keeps the larger microsecond update inlined;
    /// without it, `Table::update_or_reclaim` retries after a reclaim itself, which measured
    /// fewer instructions for milliseconds (`git show c9901be:docs/benchmarks.md`).
    ///
    /// The hit is decided here, inline; anything else (no member found, or it was removed
    /// under the decision) goes to [`Limiter::land_missed`], out of line, with what the
    /// first scan found, so a miss scans the window no more often than before. With
    /// `FIRST_SLOTS`, the first scan tries the first slot of each block before the rest
    /// (`Table::find_by_first_slots`): fewer
    /// instructions for a lone charge, more where several charges share a function (the gate).
    #[inline(always)]
    pub(super) fn land<const COLD_CAP: bool, const FIRST_SLOTS: bool>(
        &self,
        key: &Key,
        cls: &Class,
        stamp: Stamp,
        now: u64,
        codec: impl Codec,
        take: impl Fn(u64) -> Result<u64, gcra::Refusal>,
    ) -> Landing {
        let found = if FIRST_SLOTS {
            self.table.find_by_first_slots(key)
        } else {
            self.table.find(key)
        };
        if let Lookup::Member { slot, word } = found {
            let mut update = self.entry_update(cls, stamp, codec, &take);
            match self.table.apply_found(slot, word, key, &mut update) {
                Some(Err(Redo::Convert)) => {
                    return self.land_converting(key, cls, stamp, now, codec, &take, Some(slot));
                }
                Some(result) => {
                    return self.landed(Update::Landed {
                        slot,
                        result,
                        inserted: false,
                    });
                }
                // Removed under us: the missed path looks again.
                None => {}
            }
        }
        self.land_missed::<COLD_CAP>(found, key, cls, stamp, now, codec, take)
    }

    /// [`Limiter::land`] in milliseconds, out of line (see
    /// [`Limiter::try_acquire_hashed_at_compact`]).
    #[inline(never)]
    pub(super) fn land_outlined(
        &self,
        key: &Key,
        cls: &Class,
        stamp: Stamp,
        now: u64,
        take: impl Fn(u64) -> Result<u64, gcra::Refusal>,
    ) -> Landing {
        self.land::<false, false>(key, cls, stamp, now, super::epoch::Absolute, take)
    }

    /// The update a decision runs on an entry's value: an entry of the era before, a newborn
    /// (`FRESH`) or a class word that moved sends it to [`Limiter::land_converting`].
    #[inline(always)]
    fn entry_update<'a>(
        &'a self,
        cls: &'a Class,
        stamp: Stamp,
        codec: impl Codec + 'a,
        take: &'a impl Fn(u64) -> Result<u64, gcra::Refusal>,
    ) -> impl FnMut(u64) -> Verdict<Result<LandedCharge, Redo>> + 'a {
        let era = stamp.entry_era();
        move |value| {
            let coded = value & era::CODED;
            // A newborn (`FRESH`) is decided on the cold path too, which meets the changes
            // first (see `era`, invariant 4).
            if coded == gcra::FRESH || !cls.config.current(stamp, value) {
                return Verdict::Keep(Err(Redo::Convert));
            }
            self.decide(false, codec.decode(coded), era, codec, take)
        }
    }

    /// [`Limiter::land`] when its first scan (`found`) found no member to decide on: insert,
    /// or reclaim then insert, as the rules say, or land on the overflow bucket.
    ///
    /// With `COLD_CAP`, the table is handed the update once (`Table::update_from`) and a miss
    /// at the cap reclaims on the converting path, which keeps the larger microsecond update
    /// inlined; without it, `Table::update_or_reclaim_from` retries after a reclaim itself,
    /// which measured fewer instructions for milliseconds.
    #[inline(never)]
    // The arguments are `land`'s, and what its scan found.
    #[allow(clippy::too_many_arguments)]
    fn land_missed<const COLD_CAP: bool>(
        &self,
        found: Lookup,
        key: &Key,
        cls: &Class,
        stamp: Stamp,
        now: u64,
        codec: impl Codec,
        take: impl Fn(u64) -> Result<u64, gcra::Refusal>,
    ) -> Landing {
        // A new entry is born in the decision's era.
        let fresh = gcra::FRESH | stamp.entry_era();
        let update = self.entry_update(cls, stamp, codec, &take);
        let updated = if COLD_CAP {
            match self.table.update_from(found, key, fresh, update) {
                Update::AtCap => {
                    return self.land_converting(key, cls, stamp, now, codec, &take, None);
                }
                updated => updated,
            }
        } else {
            self.table
                .update_or_reclaim_from(found, key, fresh, update, || {
                    self.reclaim_due(key, now) > 0
                })
        };
        match updated {
            Update::Landed {
                result: Err(Redo::Convert),
                slot,
                ..
            } => self.land_converting(key, cls, stamp, now, codec, &take, Some(slot)),
            updated => self.landed(updated),
        }
    }

    /// [`Limiter::land`]'s cold path, for the entry `land` found at `slot`: a newborn (never
    /// charged), which meets the class's changes first (see [`era`], invariant 4); or an entry
    /// whose class changed since it was written, whose value is converted through the class's
    /// cut, decided on, and written in the class's era even if refused; or the class word
    /// moved, and the decision starts over. With no `slot`, a miss at the cap, which reclaims
    /// first and looks the key up again.
    #[cold]
    #[inline(never)]
    // The arguments are `land`'s, and where it found the entry.
    #[allow(clippy::too_many_arguments)]
    fn land_converting(
        &self,
        key: &Key,
        cls: &Class,
        stamp: Stamp,
        now: u64,
        codec: impl Codec,
        take: impl Fn(u64) -> Result<u64, gcra::Refusal>,
        slot: Option<usize>,
    ) -> Landing {
        if slot.is_none() && self.reclaim_due(key, now) == 0 {
            return Landing::Overflow;
        }
        let update = |value| {
            let fresh = value & era::CODED == gcra::FRESH;
            if fresh {
                // Before `align` loads the class word (see `era`, invariant 4).
                cls.config.meet();
            }
            let Some(aligned) = cls.config.align(stamp, value, |v| codec.decode(v)) else {
                return Verdict::Keep(Err(Redo::Class));
            };
            let decided = self.decide(fresh, aligned.full_at, stamp.entry_era(), codec, &take);
            if !aligned.converted {
                return decided;
            }
            // A refusal still writes the conversion, so no reader relies on a conversion
            // that is not in the table (see `era`, invariant 3).
            match (decided, codec.encode(aligned.full_at)) {
                (Verdict::Keep(Ok((born, refused))), Some(coded)) => {
                    Verdict::Commit(coded | stamp.entry_era(), Ok((born, refused)))
                }
                (Verdict::Keep(Ok(_)), None) => Verdict::Keep(Err(Redo::Epoch)),
                (decided, _) => decided,
            }
        };
        let Some(slot) = slot else {
            let fresh = gcra::FRESH | stamp.entry_era();
            let updated = self
                .table
                .update_or_reclaim(key, fresh, update, || self.reclaim_due(key, now) > 0);
            return self.landed(updated);
        };
        match self.table.update_slot(slot, key, update) {
            // `inserted` is not known here (the hit path may have inserted the newborn), and
            // `landed` does not read it: a newborn is known by the decision's `born`.
            Some(result) => self.landed(Update::Landed {
                slot,
                result,
                inserted: false,
            }),
            // No longer the key's member (removed, or a reclaim took it): start over.
            None => Landing::Moved,
        }
    }

    /// The decision on an entry holding `full_at` in the era whose bit is `era` (`fresh`:
    /// never charged): what to commit, with the era bit, and what was decided.
    #[inline(always)]
    fn decide(
        &self,
        fresh: bool,
        full_at: u64,
        era: u64,
        codec: impl Codec,
        take: &impl Fn(u64) -> Result<u64, gcra::Refusal>,
    ) -> Verdict<Result<LandedCharge, Redo>> {
        let dated = self.dated(full_at);
        let (commit, outcome) = match take(dated) {
            Ok(next) => (next, Decided(next)),
            // A newborn refused because a sweep dated it (a reading older than the floor):
            // store its date, so it is an ordinary entry that the next sweep may reclaim,
            // not a FRESH one that none ever would.
            Err(refusal) if fresh && dated != gcra::FRESH => (dated, Decided::of(Err(refusal))),
            Err(refusal) => return Verdict::Keep(Ok((None, Decided::of(Err(refusal))))),
        };
        match codec.encode(commit) {
            // `born`: the first value of a new entry, which the last scan never saw.
            Some(word) => {
                let born = fresh.then_some(commit);
                Verdict::Commit(word | era, Ok((born, outcome)))
            }
            // The value came from a later epoch than the one entered.
            None => Verdict::Keep(Err(Redo::Epoch)),
        }
    }

    /// Where an update of the table left a charge.
    #[inline]
    fn landed(&self, update: Update<Result<LandedCharge, Redo>>) -> Landing {
        match update {
            Update::Landed {
                result: Err(Redo::Epoch),
                ..
            } => Landing::Again,
            Update::Landed {
                result: Err(Redo::Class | Redo::Convert),
                ..
            } => Landing::Moved,
            Update::Landed {
                slot,
                result: Ok((born, outcome)),
                ..
            } => {
                if let Some(full_at) = born {
                    // A newborn entry: the last scan of its segment never saw its full_at. And
                    // the table has one more entry (known here, off the hit path, rather than
                    // from `inserted`, which every hit would test).
                    self.hint.lower(slot, full_at);
                    self.entries_changed();
                }
                Landing::Entry(outcome)
            }
            Update::AtCap | Update::WindowFull => Landing::Overflow,
        }
    }

    /// [`Limiter::land`] in microseconds: in the epoch entered, again if the entry's value
    /// came from a later one. Out of line, so that the millisecond path inlines as before.
    #[inline(never)]
    pub(super) fn land_micros(
        &self,
        epochs: &Epochs,
        key: &Key,
        cls: &Class,
        stamp: Stamp,
        now: u64,
        take: impl Fn(u64) -> Result<u64, gcra::Refusal>,
    ) -> Landing {
        loop {
            let codec = epochs.within(self.enter_epoch(epochs, now));
            match self.land::<true, false>(key, cls, stamp, now, codec, &take) {
                Landing::Again => {}
                landing => return landing,
            }
        }
    }
}
