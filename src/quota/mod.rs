//! Per-actor volume quotas: how much one actor may turn into permanent storage, in a fixed
//! array of hashed `AtomicU64` counters, on by default.
//!
//! Validated spam from a legitimate but abusive session is permanent by design: a refused
//! command leaves nothing behind, but an admitted one is stored forever. So the default
//! deployment bounds it without anyone asking: [`RateLimit::default`] enforces
//! [`Quota::default`], 1,200 events and 8 MiB per actor per minute, generous enough that two
//! actors sharing a bucket both fit.
//!
//! The obvious implementation, a map from actor to counter, is unbounded memory keyed by a
//! string the client chooses: the denial of service this module exists to prevent, moved one
//! level down. So there is no per-actor allocation, ever. An actor is hashed into one bucket in
//! each of `rows` rows of a fixed array of [`BUCKETS`] buckets, allocated once; memory is the
//! same after ten million names as after none (see "Memory" below).
//!
//! ```
//! use admit::quota::{Quota, RateLimit};
//!
//! let quota = RateLimit::default(); // on, with the generous defaults
//! let event = br#"{"op":"append","body":"hello"}"#;
//! match quota.try_acquire("alice", event.len() as u64) {
//!     Ok(()) => { /* store it */ }
//!     Err(refused) => eprintln!("{refused}"), // which limit, and when the window turns
//! }
//! # let _ = Quota::default();
//! ```
//!
//! # What this is not
//!
//! It binds an *actor*, so it is worth exactly what the actor is worth. Under a development
//! identity the actor is whatever name the client sent, and an attacker who rotates names
//! spreads across buckets instead of being stopped: the total is still bounded, by
//! `BUCKETS × limit` per window, which is a bound rather than the bound anybody wanted. Real
//! identity is the caller's seam: pass an authenticated principal as the actor, not a claim.
//!
//! # Invariants
//!
//! Each has a test that fails if it breaks (`src/quota/tests.rs`, the reference driver in
//! `src/check/quota.rs` run by proptest and the `quota` fuzz target, and the loom models in
//! `loom-tests/tests/quota.rs`).
//!
//! 1. **Memory is fixed.** [`BUCKETS`] buckets of one `AtomicU64` each are allocated at
//!    construction and never again; no decision allocates, whatever names arrive.
//! 2. **No actor exceeds its limits in a window, and no charge is lost.** Per actor and per
//!    window, admitted events never exceed `events` and admitted bytes never exceed `bytes`,
//!    sequentially and under any interleaving of concurrent charges: the actor's estimate (the
//!    least of its rows) is never below what it was admitted. There is no race slack upward.
//! 3. **A count never exceeds its limit.** Every write raises each count of a word to at
//!    most `estimate + charge`, which the admission check just bounded by the limit (or leaves
//!    it as it was); so no count reaches the next field's bits and none needs saturation.
//! 4. **Windows are fixed and roll without a lock or a sweep.** Window `n` is
//!    `[n·W, (n+1)·W)` of the clock's readings; a word stamped with another window reads as
//!    empty. Nothing carries over a boundary (see "The window rule").
//! 5. **The window never goes back.** A charge whose reading is older than the newest window
//!    any charge has used is counted in that newest window: a lagging thread or a clock step
//!    back never resets a word nor reopens an old window's budget.
//! 6. **Innocent actors are refused only when every row is full.** A charge is refused only if
//!    in *each* of the actor's `rows` buckets the count plus the charge exceeds the limit.
//! 7. **A refusal charges nothing and says when to retry.** It names the limit, the limit's
//!    value, what the bucket used, and the exact time until the window turns; from that
//!    instant the same write is counted in a fresh window. A write larger than a whole
//!    window's limit says that no wait helps.
//! 8. **The bucket of a name is unpredictable.** Each limiter draws its own SipHash keys, so a
//!    client cannot compute a name that lands in a chosen bucket.
//! 9. **A reading ahead of the clock moves nothing.** Every `_at` method first checks its
//!    reading against the limiter's own clock: more than
//!    [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) ahead, it is refused
//!    ([`RateLimitRefused::ReadingAhead`], or [`ReadingAhead`] from [`RateLimit::usage_at`])
//!    before any word or the header is touched. So no charge is ever counted in a window
//!    beyond the clock's reading plus the tolerance, and one caller's buggy reading costs that
//!    caller's own write, nothing else (see "Readings ahead of the clock").
//!
//! # State table
//!
//! Every bucket is one word, `word.rs`'s packing: a 16-bit window stamp above a 24-bit bytes
//! count above a 24-bit events count (drawn in `docs/design.md` §5, "The word"), so no limit
//! may exceed 2^24 − 1 = 16,777,215.
//!
//! | bits   | field    | holds                                              |
//! |--------|----------|----------------------------------------------------|
//! | 0..24  | `EVENTS` | events counted in the stamped window               |
//! | 24..48 | `BYTES`  | bytes counted in the stamped window                |
//! | 48..64 | `STAMP`  | the window's epoch (`now / window`) mod 65,536     |
//!
//! | a word read in window `w`     | reads as                 | a charge admitted in `w` writes   |
//! |-------------------------------|--------------------------|-----------------------------------|
//! | stamped `w`, counts `(e, b)`  | `(e, b)`                 | `(w, max(e, E), max(b, B))`; nothing if `e >= E` and `b >= B` |
//! | stamped an older window       | `(0, 0)`                 | `(w, E, B)`: the reset            |
//! | stamped a newer window        | not read: the charge moves to the header's window | nothing in `w` |
//!
//! where `E` and `B` are the actor's estimate plus the charge. Both counts and the stamp share
//! one word so that a charge writes each row with **one** CAS (two limits in two 32-bit words
//! took two). The header beside the array is one `AtomicU64`: the newest window any charge has
//! counted in.
//!
//! # Rows and conservative update
//!
//! With one row, two actors sharing a bucket share a budget. With `rows = d` (1, 2 or 4), the
//! [`BUCKETS`] buckets are split into `d` rows of `BUCKETS / d`, and an actor has one bucket in
//! each row, its index taken from a disjoint bit range of **one** 64-bit SipHash-1-3 of the
//! name (16, 15 or 14 bits per row). SipHash is a pseudo-random function of its secret key, so
//! disjoint bits of one output are as independent as separate hashes would be, at the cost of
//! one hash. The actor's estimate is the least count over its rows (count-min); a charge is
//! admitted if `estimate + charge <= limit`, and then each row is raised to
//! `max(row, estimate + charge)` (conservative update), so a row only ever grows to the
//! heaviest of its actors rather than to their sum. An innocent actor is refused only when
//! *all* `d` of its buckets are shared with actors at their limit. At equal memory,
//! `docs/design.md` §5 measures how often that happens and picks [`Quota::DEFAULT_ROWS`].
//!
//! # The window rule
//!
//! Fixed windows, and nothing carries over. A charge counts in the window of its reading or in
//! the newest window any charge has used, whichever is later (invariant 5), so what holds is
//! stated per *counted* window, and what that says about readings depends on the readings.
//!
//! * **Always, whatever the readings: at most the limit per counted window**, so at most
//!   `k ×` the limit in any `k` consecutive counted windows. No window beyond the clock's
//!   reading plus [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) is ever counted
//!   in (invariant 9), so by the time the clock reads `T` an actor has been admitted at most
//!   `(⌊(T + tolerance) / W⌋ + 1) ×` the limit in all: the long-run rate is exactly the limit
//!   per window.
//! * **When readings never go back** (every charge's reading at least every earlier charge's,
//!   as when one writer reads the clock for each write), every charge counts in its own
//!   reading's window. Then the known cost of a fixed window applies and nothing worse: an
//!   actor can spend one budget at the end of window `n` and another at the start of window
//!   `n + 1`, so **in any closed span of readings of length `W` an actor is admitted at most
//!   2 × the limit, and this factor is attained**; over any span of length `t`, at most
//!   `(⌈t/W⌉ + 1) ×` the limit.
//! * **With lagging readings, readings bound nothing.** A reading older than one already
//!   charged (another thread's, a batch's reading reused after another writer moved the window
//!   on, a clock stepped back) counts in the newest window, not its own. With a limit of 5 an
//!   actor can be admitted 15 events whose readings lie within 3 ns: 5 at `W − 1` (window 0),
//!   5 at `W` (window 1), then, after another actor's charge at `2W` has moved the window on,
//!   5 more at `W + 1`, counted in window 2. Each counted window held 5, as promised; the
//!   readings say nothing. The tests `lagging_readings_bound_nothing_but_each_counted_window_holds`
//!   and `the_boundary_factor_is_exactly_two_and_no_more` show both sides.
//!
//! We chose to document the boundary factor rather than to weight the previous window (the
//! sliding-window estimate) because the estimate does not remove it: an actor that spends the
//! limit at the very end of window `n` may still spend `f ×` the limit by fraction `f` of
//! window `n + 1`, nearly 2× within one `W` as `f → 1`. It only smooths typical traffic, and it
//! would need the previous window's count in every word, halving the count's range or doubling
//! memory. What the quota bounds is storage over hours and days, where both give exactly the
//! limit per window.
//!
//! # Readings ahead of the clock
//!
//! The header is shared by every actor, and it only moves forward (invariant 5). Before the
//! horizon, one `try_acquire_at(_, _, u64::MAX)` moved it to the last window for the life of the
//! process: every actor held to one window's budget forever, refusals saying "retry in
//! 18,446,744,064 s". So every `_at` method checks its reading against the limiter's own clock
//! ([`RateLimit::clock`]) first, at the cost of one relaxed load (the horizon caches the
//! latest clock reading plus the tolerance, and reads the clock again only when a reading
//! passes it). A reading more than [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS)
//! (1 ms) ahead is refused with a typed error and nothing is read or written: the header, the
//! words and every other actor's answers are exactly as before. A late reading is always
//! accepted. [`RateLimit::try_acquire`] and [`RateLimit::usage`] read the clock themselves, so their
//! readings are never ahead and they skip the check.
//!
//! The fix for a refused reading is on the caller's side: take readings from the limiter's own
//! clock. A reading from another clock (another origin) is wrong even when it is accepted.
//!
//! # Stamp aliasing
//!
//! A stamp is the window's epoch mod 65,536, so a word left untouched for an exact multiple of
//! 65,536 windows (45 days 12 h at the default 60 s) reads its old counts as current. This errs in one
//! direction only: it can refuse, never admit beyond the limit, and it lasts until the window
//! turns, at most one `W`. For it to refuse an actor, *every one* of its rows must have been
//! silent for such an exact multiple and have been near the limit when last written: the same
//! harm, for one window, that the design already accepts from sharing a bucket. Widening the
//! stamp further would take bits from the counts; a sweep would be a lock by another name.
//!
//! # Orderings
//!
//! A charge (see `shards.rs`) reads the header (`Relaxed`), snapshots its rows' words
//! (`Acquire`), decides, then raises every word that does not yet count `estimate + charge` of
//! both limits in this window, by one CAS from exactly the value it read to the field-by-field
//! `max` (`AcqRel` on success, `Relaxed` on failure), in one fixed order: row by row. A word
//! that already counts at least `estimate + charge` of both limits in this window is
//! *covered*: conservative update's `max` leaves it as it is, and the charge writes nothing to
//! it. Any failed CAS restarts the charge from a fresh snapshot, after a short spin so that
//! the winner's commit finishes first (a snapshot taken in the middle of it is what tears; why
//! not retry just the row: see "Why a lost race restarts the whole charge").
//!
//! The common case is tried first, inline: every row's word is the same word of this window
//! (the actor shares no bucket with a heavier one) and the charge fits, so that word is the
//! estimate and each row is raised from it by one CAS. That is the protocol above with no
//! covered word to skip. Anything else (a refusal, a word of another window, rows that differ)
//! declines having written nothing, and the whole protocol decides from a fresh snapshot, out
//! of line.
//!
//! * **Every write is a strict change.** A raise writes the same window's stamp with no count
//!   lower and at least one higher, or the current window's stamp over an older one; a
//!   covered word is not written. So within a window each count of a word only grows along
//!   its modification order, and the value a CAS expects cannot have been written twice
//!   (short of the 65,536-window stamp period; see "Stamp aliasing"): a CAS succeeds only if
//!   no write came between the snapshot's load and it.
//! * **No lost charge, no slack upward.** Take one limit (events, or bytes: one field of every
//!   word; "count" below is that field) and two charges `A` and `B` of the same actor that
//!   both commit in window `w`, charging `a, b > 0` of that limit on estimates `eA, eB`. Every
//!   row of `A` ends up counting at least `eA + a` through `A`: either `A` raised it (a CAS,
//!   Release), or `A`'s Acquire load already read it at `≥ eA + a` (covered). Call that `A`'s *mark* on the row; any later value of the row in
//!   `w` is `≥ eA + a`. Let `ra` be a row on which `A` read its estimate `eA`: since `a > 0`,
//!   `A` raised `ra` by a CAS from a value counting `eA`. Likewise `rb` for `B`. Now either
//!   1. `B`'s load of `ra` read a value before `A`'s CAS on `ra`: it counts at most `eA`. If
//!      `B` left `ra` covered, `eB + b <=` that `<= eA`. If `B` raised `ra`, its CAS expected
//!      that older value, so it came before `A`'s CAS (no value is written twice), and `A`'s
//!      snapshot of `ra` counts at least `B`'s raise: `eA >= eB + b`. Either way `A` saw `B`.
//!   2. Or `A`'s load of `rb` read a value before `B`'s CAS on `rb`: symmetrically, `B` saw
//!      `A`: `eB >= eA + a`.
//!   3. Or neither: `B`'s Acquire load of `ra` read `A`'s Release CAS on `ra` or a later RMW
//!      of its release sequence (every write to a word is a RMW), and `A`'s load of `rb` read
//!      `B`'s CAS on `rb` or later. Then `A`'s CAS on `ra` happens before `B`'s load of `ra`,
//!      which is sequenced before `B`'s CAS on `rb`, which happens before `A`'s load of `rb`,
//!      which is sequenced before `A`'s CAS on `ra`: a cycle in happens-before, impossible.
//!
//!   So of any two committed charges one saw the other (`e_later >= e_earlier + charge`), the
//!   estimates are distinct, and in increasing order each is at least the sum of the charges
//!   before it: admitted never exceeds the limit. Skipping a covered word is safe because the
//!   skipping charge's own Acquire load is its mark there, and the value it read already holds
//!   its charge. If that word later moves to another window, a charge of window `w` that reads
//!   it sees a foreign stamp, reloads the header (ordered after the advance by that Acquire
//!   load) and counts in the newer window, where `A`'s charge owes nothing; a charge that read
//!   it before it moved read a value at or after `A`'s mark. The argument needs no word that
//!   every charge writes, so a word already covered (as a word shared with a heavier actor
//!   is) is left as it is: no CAS that would raise nothing.
//! * **The over-count slack.** An attempt that raised some rows and then lost a CAS on a later
//!   one leaves its raises in place (undoing a max is unsafe: another actor may rely on it) and
//!   retries, possibly seeing its own raise. So under contention an actor's estimate can exceed
//!   what it was admitted, by at most the charges of such torn attempts. This only refuses
//!   early; the loom models assert exactly this bound. With one row a charge is one CAS and
//!   cannot tear.
//! * **Windows.** A charge whose reading is past the header's window advances the header
//!   (`fetch_max`, `Relaxed`) *before* it writes words stamped with the new window, and those
//!   writes are Release. A charge that reads such a word with Acquire and then reloads the
//!   header is ordered after that advance, so it sees the newer window and counts in it instead
//!   of resetting the word. At a boundary every racer computes its reset from the same stale
//!   word; exactly one CAS wins, the rest retry and see the new window.
//!
//! Nothing else is published through these words, so nothing stronger is needed.
//!
//! # Why a lost race restarts the whole charge
//!
//! A lost CAS on row `j` returns the row's new value, and retrying just that row (raise it to
//! `max(new, estimate + charge)`, keep the rows already raised, go on) would save the reloads
//! of the other rows. It is not exact. The argument above needs each committed charge to have
//! raised its *least* row by a CAS from the very value its estimate was read from, with all
//! its loads before all its raises; a per-row retry keeps an estimate read before another
//! charge's raises on the other rows. Two charges of one actor, limit 1 event, two rows at 0:
//! both snapshot `(0, 0)`, estimate 0; `A` raises row 0 to 1; `B` loses row 0, reloads it (1,
//! covered by `B`'s target of 1) and raises row 1 to 1; `A` loses row 1, reloads it (1,
//! covered): both are admitted, 2 events against a limit of 1. Re-deciding on the reloaded
//! value does not help either: `B`'s reload of row 0 says 1, but whether that is `A`'s charge
//! or a heavier actor sharing the bucket cannot be told from it, and `B`'s stale row 1 still
//! says 0. So the loser restarts from a fresh snapshot of every row, and the loom model
//! `racing_charges_of_one_actor_over_two_rows_never_pass_the_limit_nor_lose_a_charge` fails
//! when the commit retries per row. One word per row is what makes the restart cheap: a
//! charge has four CASes, not eight, so half the points at which a racer can lose.
//!
//! # Consistency
//!
//! [`RateLimit::usage_at`] reads without writing (a reading ahead of the clock is refused
//! like a charge's): it is a snapshot of the actor's rows, each
//! word read at a slightly different instant, and may include other actors sharing the
//! buckets. It never reports less than the actor was admitted in that window.
//!
//! # Memory
//!
//! `BUCKETS × 8` bytes for the words (512 KiB), plus the `RateLimit` itself (the header,
//! the keys, the quota, the horizon and the clock), whatever `rows` is and whatever arrives:
//! [`RateLimit::memory_bytes`]. `rows` only splits the same counters.

mod charge;
mod config;
mod error;
#[cfg(any(test, admit_loom, fuzzing))]
mod hooks;
#[cfg(test)]
mod layout_tests;
mod reconfig;
#[cfg(test)]
mod reconfig_tests;
mod shards;
#[cfg(test)]
mod tests;
pub(crate) mod word;

#[cfg(feature = "tower")]
pub(crate) use charge::VolumeLeft;
pub use config::{Quota, RateLimitConfigError};
pub use error::{RateLimitRefused, VolumeExceeded, VolumeLimit};

use crate::clock::{Clock, Horizon, ReadingAhead, RecentClock};
use crate::shadow::Shadow;
use crate::sync::atomic::AtomicU64;
use shards::Shards;
use std::fmt;
use std::hash::Hash;
use std::time::Duration;

/// How many buckets exist, for all actors, forever: 2^16 = 65,536, split evenly between the
/// quota's rows.
///
/// Why this number. Fewer buckets means more innocent actors sharing a budget with an abusive
/// one; more buckets means a looser total bound against a name-rotating attacker (who can spend
/// up to `BUCKETS ×` the limit per window) and more memory. 2^16 keeps the array at 512 KiB,
/// within a server core's L2/L3, makes an innocent actor's refusal rare while a thousand
/// actors are at their limit at once (about 0.001 % with the default four rows, 1.5 % with
/// one; see `docs/design.md` §5),
/// and leaves each of up to four rows at least 14 bits of one 64-bit hash. A power of two so
/// that a bucket index is a mask of hash bits.
pub const BUCKETS: usize = 1 << 16;

/// `log2(BUCKETS)`: the hash bits one row would need on its own.
const BUCKETS_LOG2: u32 = BUCKETS.trailing_zeros();

const _: () = assert!(BUCKETS.is_power_of_two());
// One 64-bit hash covers every row's index: rows × log2(BUCKETS / rows) <= 64.
const _: () =
    assert!((Quota::MAX_ROWS as u32) * (BUCKETS_LOG2 - Quota::MAX_ROWS.trailing_zeros()) <= 64);

/// What an actor's buckets have counted in the current window.
///
/// ```
/// use admit::quota::{Quota, RateLimit};
/// use std::time::Duration;
///
/// let limit = RateLimit::new(Quota::new(10, 1_024, Duration::from_secs(60))?);
/// limit.try_acquire("session-1", 100)?;
/// let usage = limit.usage("session-1");
/// assert_eq!((usage.events, usage.bytes), (1, 100));
/// assert!(usage.window_turns_in <= Duration::from_secs(60));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuotaUsage {
    /// Events counted (the least over the actor's rows; may include actors sharing them).
    pub events: u32,
    /// Bytes counted, likewise.
    pub bytes: u32,
    /// Time until the window turns, from the reading asked about. Never zero.
    pub window_turns_in: Duration,
}

/// Per-actor volume quotas over a fixed array of hashed counters. See the [module
/// documentation](self) for the rules.
///
/// `C` is the clock that [`RateLimit::try_acquire`] reads; [`RateLimit::try_acquire_at`] takes the reading
/// instead, so a writer deciding a batch reads the clock once. Readings handed to the `_at`
/// methods must come from this clock ([`RateLimit::clock`]): one more than
/// [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) ahead of it is refused.
///
/// ```
/// use admit::quota::{Quota, RateLimit};
/// use std::time::Duration;
///
/// // 2 writes and 1 KiB per actor per minute.
/// let limit = RateLimit::new(Quota::new(2, 1_024, Duration::from_secs(60))?);
/// assert!(limit.try_acquire("session-1", 512).is_ok());
/// assert!(limit.try_acquire("session-1", 512).is_ok());
/// let refused = limit.try_acquire("session-1", 1).unwrap_err();
/// println!("{refused}"); // events: 2 of 2 used; the window turns in at most 60 s
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimit<C = RecentClock> {
    shards: Shards,
    /// The quota built with: its window and rows are fixed; its limits are `limits`'.
    quota: Quota,
    /// The events and bytes limits, `events << 32 | bytes`, changed at runtime by
    /// [`RateLimit::set_limits`]; read once per charge (see `reconfig.rs`).
    limits: AtomicU64,
    /// Refuses readings handed to the `_at` methods that `clock` cannot have produced yet.
    horizon: Horizon,
    clock: C,
    /// The shadow switch (see [`crate::shadow`]).
    shadow: Shadow,
    /// The counters, if attached ([`RateLimit::with_metrics`]).
    #[cfg(feature = "metrics")]
    metrics: Option<Box<crate::instrument::Outcomes>>,
    /// The key of the actor digests in refusal events (see `crate::trace`).
    #[cfg(feature = "tracing")]
    digest: crate::trace::Digest,
}

impl RateLimit<RecentClock> {
    /// A limiter enforcing `quota`, over the monotonic clock, with fresh random hash keys.
    pub fn new(quota: Quota) -> Self {
        Self::with_clock(quota, RecentClock::new())
    }
}

impl Default for RateLimit<RecentClock> {
    /// A limiter enforcing [`Quota::default`]: on, without anyone asking.
    fn default() -> Self {
        Self::new(Quota::default())
    }
}

impl<C: Clock> RateLimit<C> {
    /// A limiter enforcing `quota` over `clock`, with fresh random hash keys.
    pub fn with_clock(quota: Quota, clock: C) -> Self {
        let rows = quota.rows();
        // `Quota` admits only rows 1, 2 or 4, so the width is 16, 15 or 14 bits.
        let width_bits = BUCKETS_LOG2.saturating_sub(rows.trailing_zeros());
        Self {
            shards: Shards::new(rows, width_bits, Shards::random_keys()),
            quota,
            limits: AtomicU64::new(reconfig::pack(&quota)),
            horizon: Horizon::new(),
            clock,
            shadow: Shadow::new(),
            #[cfg(feature = "metrics")]
            metrics: None,
            #[cfg(feature = "tracing")]
            digest: crate::trace::Digest::random(),
        }
    }

    /// This limiter, counting every charge in `admit_volume_decisions_total{outcome}` with
    /// `labels` (see [`crate::metrics`]). Call it where the limiter is made, before it is
    /// shared: the counters are registered now, with the recorder current now.
    ///
    /// ```
    /// use admit::metrics::Labels;
    /// use admit::quota::{Quota, RateLimit};
    /// use std::time::Duration;
    ///
    /// let limit = RateLimit::new(Quota::new(1, 1_024, Duration::from_secs(60))?)
    ///     .with_metrics(&Labels::new().with("store", "events"));
    /// assert!(limit.try_acquire("session-1", 10).is_ok()); // {outcome="admitted"}
    /// assert!(limit.try_acquire("session-1", 10).is_err()); // {outcome="refused"}
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn with_metrics(mut self, labels: &crate::instrument::Labels) -> Self {
        self.metrics = Some(Box::new(crate::instrument::Outcomes::volume(labels)));
        self
    }

    /// Switches the quota into [shadow mode](crate::shadow) (`true`) or back to enforcing, at
    /// once, while other threads charge: in shadow mode a write that enforcement would refuse
    /// is admitted instead, counts nothing, and is counted in [`RateLimit::shadow_admissions`].
    ///
    /// ```
    /// use admit::quota::{Quota, RateLimit};
    /// use admit::ManualClock;
    /// use std::time::Duration;
    ///
    /// let limit = RateLimit::with_clock(Quota::new(1, 4_096, Duration::from_secs(60))?, ManualClock::new());
    /// limit.set_shadow(true);
    /// assert!(limit.try_acquire("tenant-9", 100).is_ok());
    /// assert!(limit.try_acquire("tenant-9", 100).is_ok(), "over the quota: admitted in shadow mode");
    /// assert_eq!(limit.shadow_admissions(), 1);
    /// assert_eq!(limit.usage("tenant-9").events, 1, "the shadow admission counted nothing");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_shadow(&self, on: bool) {
        self.shadow.set(on);
    }

    /// Whether the quota is in shadow mode.
    pub fn is_shadow(&self) -> bool {
        self.shadow.is_on()
    }

    /// How many writes shadow mode admitted that enforcement would have refused, since
    /// construction.
    pub fn shadow_admissions(&self) -> u64 {
        self.shadow.admitted()
    }

    /// What `actor`'s buckets have counted in the window of reading `now_ns`, without counting
    /// anything; or [`ReadingAhead`] if `now_ns` is more than
    /// [`READING_TOLERANCE_NS`](crate::clock::READING_TOLERANCE_NS) ahead of the clock (a
    /// window no charge can be counted in yet).
    pub fn usage_at<A: Hash + ?Sized>(
        &self,
        actor: &A,
        now_ns: u64,
    ) -> Result<QuotaUsage, ReadingAhead> {
        self.horizon.admit(now_ns, &self.clock)?;
        Ok(self.usage_unchecked(actor, now_ns))
    }

    /// [`RateLimit::usage_at`] at the clock's current reading, which is never ahead of it.
    pub fn usage<A: Hash + ?Sized>(&self, actor: &A) -> QuotaUsage {
        self.usage_unchecked(actor, self.clock.now_ns())
    }

    fn usage_unchecked<A: Hash + ?Sized>(&self, actor: &A, now_ns: u64) -> QuotaUsage {
        let hash = self.shards.hash(actor);
        let (events, bytes, window_turns_in) = self.shards.usage(&self.current(), hash, now_ns);
        QuotaUsage {
            events,
            bytes,
            window_turns_in,
        }
    }

    /// The quota enforced now (by value: [`RateLimit::set_limits`] may change its limits at any
    /// moment).
    pub fn quota(&self) -> Quota {
        self.current()
    }

    /// The clock [`RateLimit::try_acquire`] reads.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Bytes this limiter holds: the counter array plus the limiter itself. Fixed at
    /// construction: `BUCKETS × 8` (one `AtomicU64` a bucket) plus a few dozen bytes, whatever
    /// `rows` is.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.shards.array_bytes()
    }
}

/// What the decision-writes test (`check::writes`) needs to know of a volume quota's lines.
#[cfg(all(test, admit_writes))]
impl<C: Clock> RateLimit<C> {
    /// The lines of `actor`'s bucket in each row: its counters.
    pub(crate) fn row_lines(
        &self,
        actor: &crate::actor::HashedActor,
    ) -> std::collections::BTreeSet<crate::sync::writes::Line> {
        self.shards.bucket_lines(self.shards.hash_of(actor))
    }

    /// The lines of the words that say what is latest: the horizon (the latest reading seen)
    /// and the window header (the newest window counted in).
    pub(crate) fn latest_lines(&self) -> std::collections::BTreeSet<crate::sync::writes::Line> {
        crate::sync::writes::lines_of(&self.horizon)
            .chain(self.shards.header_lines())
            .collect()
    }
}

impl<C: fmt::Debug> fmt::Debug for RateLimit<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The hash keys are a secret: with them a client could aim at a chosen bucket.
        f.debug_struct("RateLimit")
            .field("quota", &self.current())
            .field("buckets", &self.shards.len())
            .field("rows", &self.shards.rows())
            .field("keys", &"<secret>")
            .field("clock", &self.clock)
            .finish()
    }
}
