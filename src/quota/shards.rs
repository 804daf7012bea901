//! The raw core: a fixed array of buckets, the keyed hash that picks an actor's buckets, the
//! window header, and the charge protocol. [`RateLimit`](super::RateLimit) is a thin public
//! type over it. The protocol and its orderings are argued in the [module
//! documentation](super); the comments here point back to it.

use super::config::Quota;
use super::error::{VolumeExceeded, VolumeLimit};
use super::word::{self, MAX_COUNT};
use crate::actor::{HashedActor, Salt};
use crate::sync::atomic::{AtomicU64, Ordering};
use std::hash::Hash;
use std::time::Duration;

/// One bucket of one row: one word holding the window stamp and both counts (see `word.rs`),
/// so that a charge writes each of its rows with one CAS.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct Bucket(pub(crate) AtomicU64);

impl Bucket {
    fn new() -> Self {
        Self(AtomicU64::new(0))
    }
}

/// The counters of one limiter, for all actors, for its whole life.
pub(crate) struct Shards {
    /// `rows` rows of `1 << width_bits` buckets each, row-major. Allocated once, never resized.
    buckets: Box<[Bucket]>,
    rows: usize,
    width_bits: u32,
    /// The header: the newest window (`now / window`) any charge has counted in. Charges never
    /// count in an older one, so a lagging reading or a clock step back never resets a word.
    epoch: AtomicU64,
    /// The derivation salts, drawn from the OS at construction (see `crate::actor`).
    keys: (u64, u64),
}

/// A snapshot of an actor's `N` buckets in one window, `N` the quota's row count, so that
/// each geometry gets its own fixed-size loop with no empty slots.
struct View<'a, const N: usize> {
    epoch: u64,
    /// The actor's bucket in each row.
    buckets: [&'a Bucket; N],
    /// Each row's word as the snapshot read it.
    seen: [u64; N],
    /// The word of this window counting exactly the estimate: every row's word that the
    /// actor shares with no heavier one.
    least: u64,
    /// The actor's estimate: the least count over its rows, in this window.
    events: u32,
    bytes: u32,
}

/// What a charge did: the window it was counted in, or the refusal; and, for the loom models
/// and the reference driver, its torn attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Charged<T = ()> {
    pub(crate) result: Result<u64, VolumeExceeded>,
    /// What the charge tallied (see [`Tally`]): nothing for a plain charge.
    pub(crate) counted: T,
    /// Attempts that raised at least one word and then lost a race on a later one. Each leaves
    /// its raises in place: the documented over-count slack.
    pub(crate) torn: u32,
}

/// What a charge reports beside its answer: nothing (`()`, the plain charge, which reads and
/// computes nothing more than it ever did), or the actor's counts once the charge is counted
/// ([`Counted`], for the IETF `RateLimit` fields, read off the charge's own commit).
pub(crate) trait Tally: Copy {
    /// The actor's estimate (`events`, `bytes`) in the charge's window once it is counted.
    fn of(events: u32, bytes: u32) -> Self;
}

impl Tally for () {
    #[inline(always)]
    fn of(_events: u32, _bytes: u32) {}
}

/// The actor's estimate once a charge is counted: what its commit raised the actor's least
/// words to (0, 0 on a refusal).
#[cfg(feature = "tower")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counted {
    pub(crate) events: u32,
    pub(crate) bytes: u32,
}

#[cfg(feature = "tower")]
impl Tally for Counted {
    #[inline(always)]
    fn of(events: u32, bytes: u32) -> Self {
        Self { events, bytes }
    }
}

impl Shards {
    /// `rows` rows of `2^width_bits` buckets. The caller guarantees `rows` is 1, 2 or 4
    /// and `rows × width_bits <= 64`, so that one 64-bit hash yields every row's index from
    /// disjoint bits ([`RateLimit`](super::RateLimit) by construction from a valid
    /// [`Quota`], the test hooks through [`Shards::with_geometry`]).
    pub(crate) fn new(rows: usize, width_bits: u32, keys: (u64, u64)) -> Self {
        let buckets = rows << width_bits;
        Self {
            buckets: (0..buckets).map(|_| Bucket::new()).collect(),
            rows,
            width_bits,
            epoch: AtomicU64::new(0),
            keys,
        }
    }

    /// `buckets` buckets split into `rows` rows, validated: both powers of two,
    /// `rows <= min(buckets, Quota::MAX_ROWS)`, and `rows × log2(buckets / rows) <= 64`.
    #[cfg(any(test, admit_loom, fuzzing))]
    pub(crate) fn with_geometry(buckets: usize, rows: usize, keys: (u64, u64)) -> Option<Self> {
        if !buckets.is_power_of_two() || !rows.is_power_of_two() || rows > buckets {
            return None;
        }
        if rows > Quota::MAX_ROWS || buckets > 1 << 24 {
            return None;
        }
        let width_bits = (buckets / rows).trailing_zeros();
        let rows_u32 = u32::try_from(rows).ok()?;
        if rows_u32.saturating_mul(width_bits) > u64::BITS {
            return None;
        }
        Some(Self::new(rows, width_bits, keys))
    }

    /// Fresh per-process keys, like `std`'s `RandomState`.
    pub(crate) fn random_keys() -> (u64, u64) {
        (crate::entropy::random_u64(), crate::entropy::random_u64())
    }

    #[cfg(test)]
    pub(crate) fn keys(&self) -> (u64, u64) {
        self.keys
    }

    pub(crate) fn len(&self) -> usize {
        self.buckets.len()
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes of the bucket array (the header is part of the owner's own size).
    pub(crate) fn array_bytes(&self) -> usize {
        std::mem::size_of_val::<[Bucket]>(&self.buckets)
    }

    /// The actor's 64 bits in this quota. The rows' indexes are disjoint bit ranges of them
    /// (see [`Shards::indexes_of`]).
    #[inline]
    pub(crate) fn hash<A: Hash + ?Sized>(&self, actor: &A) -> u64 {
        self.hash_of(&HashedActor::new(actor))
    }

    /// The 64 bits of an actor hashed once: this quota's derivation under its own salts (the
    /// `keys`), see [`crate::actor`].
    #[inline]
    pub(crate) fn hash_of(&self, actor: &HashedActor) -> u64 {
        Salt::fixed(self.keys.0, self.keys.1).derive(actor, 0)
    }

    /// The global index of row `row`'s bucket for `hash`: bits `row × w .. (row + 1) × w` of
    /// the hash, `w = log2(buckets / rows)`, offset by the row. The definition, which the
    /// charge's own [`Shards::indexes_of`] is tested against (the layout tests compare the two
    /// through [`RateLimit::bucket_indexes`](super::RateLimit::bucket_indexes)).
    #[cfg(test)]
    pub(crate) fn index(&self, hash: u64, row: usize) -> usize {
        // `row < rows <= 4` and the constructor checked `rows × width_bits <= 64`, so the
        // shift is below 64 (`wrapping_shr` only drops the bounds check) and so is
        // `width_bits`, which keeps the mask exact.
        let shift = (row as u32).wrapping_mul(self.width_bits);
        let mask = 1u64.wrapping_shl(self.width_bits).wrapping_sub(1);
        // Only the low `width_bits` (at most 16) bits survive the mask, so the narrowing on a
        // 32-bit target keeps every one of them.
        row.wrapping_shl(self.width_bits) | (hash.wrapping_shr(shift) & mask) as usize
    }

    /// The window a charge or peek at `now` counts in: the reading's own window, or the newest
    /// window any charge has used if that is later. Advances the header when `advance`.
    #[inline]
    fn epoch_for(&self, now: u64, window: u64, advance: bool) -> u64 {
        // Relaxed: the header only needs its own modification order here. A stale value is
        // either behind the reading (then the division below finds the right window) or
        // caught by the reload in `view`, which is ordered by the words' Acquire/Release.
        let seen = self.epoch.load(Ordering::Relaxed);
        // The fast path, taken by every charge except the first few of each window: a reading
        // before the end of the header's window counts in the header's window, with no division.
        // The header only ever holds some reading's `now / window`, so `seen × window` is at
        // most that reading and cannot overflow; a reading before it (a lagging one) saturates
        // to 0 and counts in the header's window too.
        if now.saturating_sub(seen.wrapping_mul(window)) < window {
            return seen;
        }
        let mine = now / window;
        if !advance {
            return mine.max(seen);
        }
        // Relaxed: a charge then writes words stamped with this window, and those writes are
        // Release; a thread that reads such a word with Acquire and reloads the header is
        // therefore ordered after this RMW and sees at least `mine` (see "Orderings").
        let before = self.epoch.fetch_max(mine, Ordering::Relaxed);
        before.max(mine)
    }

    /// The global index of the actor's bucket in each of `N` rows: `index(hash, row)` for
    /// each row, computed row after row. Each row's bits are the next `width_bits` of the
    /// hash, and each row starts `2^width_bits` buckets after the last (the constructor keeps
    /// `width_bits` below 64, so the shifts are exact).
    #[inline(always)]
    fn indexes_of<const N: usize>(&self, hash: u64) -> [usize; N] {
        let mask = 1u64.wrapping_shl(self.width_bits).wrapping_sub(1);
        let (mut bits, mut base) = (hash, 0usize);
        let mut out = [0; N];
        for slot in out.iter_mut() {
            // Only the low `width_bits` (at most 24) bits survive the mask, so the narrowing
            // on a 32-bit target keeps every one of them.
            *slot = base | (bits & mask) as usize;
            bits = bits.wrapping_shr(self.width_bits);
            base = base.wrapping_add(1usize.wrapping_shl(self.width_bits));
        }
        out
    }

    /// [`Shards::indexes_of`] for this quota's row count, for the hooks.
    #[cfg(any(test, admit_loom, fuzzing))]
    pub(crate) fn row_indexes(&self, hash: u64) -> Vec<usize> {
        match self.rows {
            4 => self.indexes_of::<4>(hash).to_vec(),
            2 => self.indexes_of::<2>(hash).to_vec(),
            1 => self.indexes_of::<1>(hash).to_vec(),
            _ => Vec::new(),
        }
    }

    /// The actor's bucket in each of `N` rows. `None` only if an index missed the array,
    /// which the masking in [`Shards::indexes_of`] rules out.
    #[inline]
    fn buckets_of<const N: usize>(&self, hash: u64) -> Option<[&Bucket; N]> {
        let mut out = [self.buckets.first()?; N];
        // The mask changes no index (every one is below the array's length, a power of two)
        // and lets the compiler see that none is out of bounds.
        let last = self.buckets.len().wrapping_sub(1);
        for (slot, index) in out.iter_mut().zip(self.indexes_of::<N>(hash)) {
            *slot = self.buckets.get(index & last)?;
        }
        Some(out)
    }

    /// The actor's buckets, read in window `epoch` or a later one if a word shows that another
    /// charge has moved on.
    // Always: the charge's whole path, for every tally (`Tally`) it is instantiated with; a
    // snapshot shared by two instantiations would otherwise be left out of line.
    #[inline(always)]
    fn view<'a, const N: usize>(&self, buckets: [&'a Bucket; N], mut epoch: u64) -> View<'a, N> {
        loop {
            let stamp = word::stamp_of(epoch);
            // Every word of this window reads `tag | counts`.
            let tag = word::pack(stamp, 0, 0);
            let mut seen = [0u64; N];
            for (bucket, w) in buckets.iter().zip(seen.iter_mut()) {
                // Acquire: a word stamped with a newer window was written (Release) after its
                // writer advanced the header; acquiring it orders the header reload below
                // after that advance. It also makes every raise this load reads from happen
                // before this charge's own raises, which the no-lost-charge argument relies
                // on (see "Orderings").
                *w = bucket.0.load(Ordering::Acquire);
            }
            // The common case: an actor that shares none of its buckets with a heavier one
            // finds the same word in every row. If it is of this window, it is the estimate.
            let first = seen.first().copied().unwrap_or(tag);
            let differ = seen.iter().fold(0, |acc, &w| acc | (w ^ first));
            let (events, bytes, least) = if differ == 0 && word::stamp(first) == stamp {
                (word::events(first), word::bytes(first), first)
            } else {
                // The words read, each XOR `tag`, ORed: its stamp bits are all zero exactly
                // when every word read belongs to this window.
                let off = seen.iter().fold(0, |acc, &w| acc | (w ^ tag));
                if word::stamp(off) != 0 {
                    // A word stamped for another window is either stale (it reads as empty)
                    // or newer: a racing charge moved the header on after our load. Relaxed:
                    // the Acquire load of that word already ordered us after the header's
                    // advance.
                    let header = self.epoch.load(Ordering::Relaxed);
                    if header > epoch {
                        // Another charge moved on; count in its window, never reset its words.
                        epoch = header;
                        continue;
                    }
                }
                let (events, bytes) = seen
                    .iter()
                    .map(|&w| word::counts_in(w, stamp).unwrap_or((0, 0)))
                    .fold((MAX_COUNT, MAX_COUNT), |(e, b), (we, wb)| {
                        (e.min(we), b.min(wb))
                    });
                (events, bytes, word::pack(stamp, events, bytes))
            };
            return View {
                epoch,
                buckets,
                seen,
                least,
                events,
                bytes,
            };
        }
    }

    /// Counts `events` events (1 for a write, 0 for more bytes of a write already counted) of
    /// `bytes` bytes for the actor hashed to `hash`, if both limits allow.
    #[inline]
    pub(crate) fn charge(
        &self,
        quota: &Quota,
        hash: u64,
        events: u32,
        bytes: u64,
        now: u64,
    ) -> Charged {
        self.charge_tallied(quota, hash, events, bytes, now)
    }

    /// [`Shards::charge`], tallying what `T` asks (see [`Tally`]).
    #[inline(always)]
    pub(crate) fn charge_tallied<T: Tally>(
        &self,
        quota: &Quota,
        hash: u64,
        events: u32,
        bytes: u64,
        now: u64,
    ) -> Charged<T> {
        // One loop per geometry, fixed at construction: the branch is always predicted. The
        // default (four rows) is tested first, in one compare.
        if self.rows == 4 {
            return self.charge_rows::<4, T>(quota, hash, events, bytes, now);
        }
        match self.rows {
            2 => self.charge_rows::<2, T>(quota, hash, events, bytes, now),
            1 => self.charge_rows::<1, T>(quota, hash, events, bytes, now),
            // Unreachable: every constructor admits only 1, 2 or 4 rows.
            _ => Charged {
                result: Err(fail_closed(
                    quota,
                    self.epoch_for(now, quota.window_ns(), false),
                    now,
                )),
                counted: T::of(0, 0),
                torn: 0,
            },
        }
    }

    /// [`Shards::charge`] for a quota of `N` rows. Always inlined: the common case is a few
    /// dozen instructions, and everything else is out of line in [`Shards::charge_slow`].
    #[inline(always)]
    fn charge_rows<const N: usize, T: Tally>(
        &self,
        quota: &Quota,
        hash: u64,
        events: u32,
        bytes: u64,
        now: u64,
    ) -> Charged<T> {
        let window = quota.window_ns();
        let epoch = self.epoch_for(now, window, true);
        let Some(buckets) = self.buckets_of::<N>(hash) else {
            let result = Err(fail_closed(quota, epoch, now));
            return Charged {
                result,
                counted: T::of(0, 0),
                torn: 0,
            };
        };
        match quick(&buckets, epoch, quota, events, bytes) {
            Quick::Counted { events, bytes } => Charged {
                result: Ok(epoch),
                counted: T::of(events, bytes),
                torn: 0,
            },
            Quick::Declined => self.charge_slow(quota, buckets, epoch, events, bytes, now, 0),
            Quick::Lost { raised } => self.charge_slow(
                quota,
                buckets,
                epoch,
                events,
                bytes,
                now,
                u32::from(raised) + 1,
            ),
        }
    }

    /// [`Shards::charge_rows`] once the common case declined or lost a race: the whole
    /// protocol, attempt after attempt, each from a fresh snapshot of every row. `lost` is 0
    /// if nothing was tried yet, else 1 plus the torn attempts so far (then it spins first,
    /// as after any lost race).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn charge_slow<const N: usize, T: Tally>(
        &self,
        quota: &Quota,
        buckets: [&Bucket; N],
        mut epoch: u64,
        events: u32,
        bytes: u64,
        now: u64,
        lost: u32,
    ) -> Charged<T> {
        let window = quota.window_ns();
        // `cost` is only used once `bytes <= quota.bytes() < 2^24` is established.
        let cost = u32::try_from(bytes).unwrap_or(u32::MAX);
        let mut torn = lost.saturating_sub(1);
        let backoff = crossbeam_utils::Backoff::new();
        if lost > 0 {
            backoff.spin();
        }
        loop {
            let view = self.view(buckets, epoch);
            epoch = view.epoch;
            if let Some((limit, max, used)) =
                refusal(quota, view.events, view.bytes, events, bytes, cost)
            {
                let requested = match limit {
                    VolumeLimit::Events => u64::from(events),
                    VolumeLimit::Bytes => bytes,
                };
                let turns_in = turns_in(epoch, window, now);
                let refused =
                    VolumeExceeded::new(limit, max, used, requested, quota.window(), turns_in);
                return Charged {
                    result: Err(refused),
                    counted: T::of(0, 0),
                    torn,
                };
            }
            match commit(&view, events, cost) {
                Ok(()) => {
                    return Charged {
                        result: Ok(epoch),
                        counted: T::of(
                            view.events.saturating_add(events),
                            view.bytes.saturating_add(cost),
                        ),
                        torn,
                    }
                }
                // A word moved since the snapshot: another charge got there first. Retry from
                // a fresh snapshot; raises already made stay (they only over-count). Spin a
                // little first, so that the winner finishes its commit before we snapshot
                // again: a snapshot taken in the middle of another commit is what tears.
                Err(Lost { raised }) => {
                    torn += u32::from(raised);
                    backoff.spin();
                }
            }
        }
    }

    /// The actor's estimate in the window of reading `now`: events, bytes, and the time until
    /// that window turns. Reads only.
    pub(crate) fn usage(&self, quota: &Quota, hash: u64, now: u64) -> (u32, u32, Duration) {
        let window = quota.window_ns();
        let epoch = self.epoch_for(now, window, false);
        let estimate = match self.rows {
            4 => self.estimate::<4>(hash, epoch),
            2 => self.estimate::<2>(hash, epoch),
            1 => self.estimate::<1>(hash, epoch),
            _ => None,
        };
        match estimate {
            Some((events, bytes, epoch)) => (events, bytes, turns_in(epoch, window, now)),
            None => (quota.events(), quota.bytes(), turns_in(epoch, window, now)),
        }
    }

    /// The estimate (events, bytes) over `N` rows and the window it was read in.
    fn estimate<const N: usize>(&self, hash: u64, epoch: u64) -> Option<(u32, u32, u64)> {
        let view = self.view(self.buckets_of::<N>(hash)?, epoch);
        Some((view.events, view.bytes, view.epoch))
    }

    /// Every bucket's raw word, for the reference driver.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn raw_words(&self) -> Vec<u64> {
        self.buckets
            .iter()
            // Relaxed: a quiescent snapshot taken between operations of one thread.
            .map(|b| b.0.load(Ordering::Relaxed))
            .collect()
    }

    /// The lines of `hash`'s bucket in each row, for the decision-writes test.
    #[cfg(all(test, admit_writes))]
    pub(crate) fn bucket_lines(
        &self,
        hash: u64,
    ) -> std::collections::BTreeSet<crate::sync::writes::Line> {
        self.row_indexes(hash)
            .into_iter()
            .filter_map(|index| self.buckets.get(index))
            .flat_map(crate::sync::writes::lines_of)
            .collect()
    }

    /// The lines of the header, for the decision-writes test.
    #[cfg(all(test, admit_writes))]
    pub(crate) fn header_lines(&self) -> std::ops::RangeInclusive<crate::sync::writes::Line> {
        crate::sync::writes::lines_of(&self.epoch)
    }

    /// The header: the newest window any charge has counted in.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn header(&self) -> u64 {
        // Relaxed: as in `raw_words`.
        self.epoch.load(Ordering::Relaxed)
    }
}

/// What the common case of a charge came to (see [`quick`]).
enum Quick {
    /// Counted: the actor's estimate is now `events` and `bytes`.
    Counted { events: u32, bytes: u32 },
    /// Not the common case, or a refusal: nothing written, the whole protocol decides.
    Declined,
    /// A row moved since the snapshot; `raised` if an earlier row was already raised.
    Lost { raised: bool },
}

/// The common case of a charge, inline: every row's word is the same word of window `epoch`
/// (the actor shares no bucket with a heavier one), and the charge fits. Then that word is the
/// estimate, and each row is raised from it to it plus the charge by one CAS, in row order:
/// the protocol of "Orderings" with nothing to skip. Anything else declines, writing nothing.
#[inline(always)]
fn quick<const N: usize>(
    buckets: &[&Bucket; N],
    epoch: u64,
    quota: &Quota,
    events: u32,
    bytes: u64,
) -> Quick {
    let mut seen = [0u64; N];
    for (bucket, w) in buckets.iter().zip(seen.iter_mut()) {
        // Acquire: as in `Shards::view`.
        *w = bucket.0.load(Ordering::Acquire);
    }
    let first = seen.first().copied().unwrap_or(0);
    let differ = seen.iter().fold(0, |acc, &w| acc | (w ^ first));
    if differ != 0 || word::stamp(first) != word::stamp_of(epoch) {
        return Quick::Declined;
    }
    let (used_events, used_bytes) = (word::events(first), word::bytes(first));
    // Whether it fits, as `refusal` would find: events within the limit, and bytes within
    // what the bytes limit leaves (nothing, if a lowered limit is already passed; a write of
    // no bytes always fits them). No overflow: counts and the events charge are below 2^24.
    if used_events + events > quota.events()
        || bytes > u64::from(quota.bytes().saturating_sub(used_bytes))
    {
        return Quick::Declined;
    }
    // Exact: `bytes` was just bounded by a limit below 2^24.
    let cost = bytes as u32;
    // No field carries: both counts plus the charge were just checked against the limits.
    let delta = word::delta(events, cost);
    if delta != 0 {
        for (row, bucket) in buckets.iter().enumerate() {
            if let Raise::Lost = cas(&bucket.0, first, first + delta) {
                return Quick::Lost { raised: row > 0 };
            }
        }
    }
    Quick::Counted {
        events: used_events + events,
        bytes: used_bytes + cost,
    }
}

/// The limit that refuses a write of `bytes` (`cost` once known to fit a `u32`) against the
/// estimate (`used_events`, `used_bytes`), with its value and the estimate's count, or `None`
/// to admit. In this order: a write larger than the whole bytes limit (waiting cannot help),
/// then events, then bytes.
#[inline]
fn refusal(
    quota: &Quota,
    used_events: u32,
    used_bytes: u32,
    events: u32,
    bytes: u64,
    cost: u32,
) -> Option<(VolumeLimit, u32, u32)> {
    if bytes > u64::from(quota.bytes()) {
        return Some((VolumeLimit::Bytes, quota.bytes(), used_bytes));
    }
    // No overflow: every count is at most its limit, and so is `cost` here, both below 2^24.
    if used_events + events > quota.events() {
        return Some((VolumeLimit::Events, quota.events(), used_events));
    }
    // A write of no bytes is judged on events alone: it adds nothing to a bytes count that a
    // lowered limit left above the limit.
    if cost > 0 && used_bytes + cost > quota.bytes() {
        return Some((VolumeLimit::Bytes, quota.bytes(), used_bytes));
    }
    None
}

/// Raises every row's word of the view that does not yet count `estimate + charge` of both
/// limits to count at least that of each, in a fixed order (row by row), each by one CAS from
/// exactly the value the snapshot read. A word already counting at least `estimate + charge`
/// of both in this window is left alone: that is conservative update's `max`, and no write at
/// all (see "Orderings" for why skipping is safe).
// Always, as `Shards::view`.
#[inline(always)]
fn commit<const N: usize>(view: &View<'_, N>, events: u32, cost: u32) -> Result<(), Lost> {
    let stamp = word::stamp_of(view.epoch);
    // No overflow: both estimates plus their charges were just checked against the limits (a
    // charge of no bytes adds nothing to the bytes estimate), so neither field of `least`
    // carries into the next.
    let (to_events, to_bytes) = (view.events + events, view.bytes + cost);
    let delta = word::delta(events, cost);
    let mut raised = false;
    for (bucket, &seen) in view.buckets.iter().zip(view.seen.iter()) {
        // A row that counts exactly the estimate is raised to `least + delta`, or left
        // covered by a charge of nothing.
        let done = if seen == view.least {
            if delta == 0 {
                Raise::Covered
            } else {
                cas(&bucket.0, seen, seen + delta)
            }
        } else {
            raise(&bucket.0, seen, stamp, to_events, to_bytes)
        };
        match done {
            Raise::Covered => {}
            Raise::Raised => raised = true,
            Raise::Lost => return Err(Lost { raised }),
        }
    }
    Ok(())
}

/// A commit that found a word changed since its snapshot.
struct Lost {
    /// Whether it had already raised an earlier word.
    raised: bool,
}

/// What [`raise`] did to one word.
enum Raise {
    /// The word already counted at least the targets in this window: nothing written.
    Covered,
    /// The CAS moved the word from the snapshot's value to the target.
    Raised,
    /// The word had moved since the snapshot: the attempt must restart.
    Lost,
}

/// Raises `word`, read as `seen`, to count at least `to_events` and `to_bytes` in the window
/// stamped `stamp`: nothing if `seen` already counts at least both in that window, else one
/// CAS from exactly `seen` to `max(seen's counts, targets)` field by field (a word of another
/// window counts nothing here, so it is restamped with exactly the targets). Every write is
/// therefore a strict change (a count higher and none lower, or the current stamp over an
/// older one), which the no-lost-charge argument uses (see "Orderings").
#[inline]
fn raise(word: &AtomicU64, seen: u64, stamp: u64, to_events: u32, to_bytes: u32) -> Raise {
    let (events, bytes) = word::counts_in(seen, stamp).unwrap_or((0, 0));
    if events >= to_events && bytes >= to_bytes && word::stamp(seen) == stamp {
        return Raise::Covered;
    }
    cas(
        word,
        seen,
        word::pack(stamp, events.max(to_events), bytes.max(to_bytes)),
    )
}

/// One raise: the CAS of `word` from exactly `seen` to `target`, a strict change.
#[inline(always)]
fn cas(word: &AtomicU64, seen: u64, target: u64) -> Raise {
    let ok = word
        .compare_exchange(
            seen,
            target,
            // AcqRel: Release publishes this raise, and the header advance before it, to the
            // next charge that reads the word (every later write to it is a RMW, so in this
            // raise's release sequence); Acquire orders this charge after the previous writer
            // of the word. The no-lost-charge argument needs exactly these edges.
            Ordering::AcqRel,
            // Relaxed: on failure the whole attempt restarts with fresh Acquire loads (see
            // "Why a lost race restarts the whole charge").
            Ordering::Relaxed,
        )
        .is_ok();
    if ok {
        Raise::Raised
    } else {
        Raise::Lost
    }
}

/// Time from `now` until window `epoch` ends; at least 1 ns because `epoch >= now / window`.
#[inline]
pub(super) fn turns_in(epoch: u64, window: u64, now: u64) -> Duration {
    let end = (u128::from(epoch) + 1) * u128::from(window);
    let wait = end.saturating_sub(u128::from(now)).max(1);
    Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX))
}

/// The refusal for the unreachable case of an index outside the array: refuse rather than
/// panic or admit uncounted.
#[cold]
fn fail_closed(quota: &Quota, epoch: u64, now: u64) -> VolumeExceeded {
    debug_assert!(false, "a masked bucket index fell outside the array");
    let turns_in = turns_in(epoch, quota.window_ns(), now);
    VolumeExceeded::new(
        VolumeLimit::Events,
        quota.events(),
        quota.events(),
        1,
        quota.window(),
        turns_in,
    )
}
