//! The lease thread's decisions, with no I/O and no clock of its own: what to ask Redis for a
//! key, what an answer, a key fault or a lost connection does to the key's word and to the
//! debts still to collect, which debts are due, when to sweep stale stamps and when to try
//! to reconnect. Every reading of time is an argument: `clock_ms`, the injected clock the
//! words' stamps are written in, and `mono_ms`, the thread's own monotonic milliseconds for
//! its timers. `worker.rs` runs the loop around it (the ring, the Redis calls, parking);
//! the reference model `check::lease_worker` and the loom model
//! `loom-tests/tests/fleet_worker.rs` drive the same functions.
//!
//! ```text
//!  up:    begin (sweep?) ─▶ drain ring ─▶ each key: plan ─▶ Redis ─▶ answered │ faulted
//!                                   connection failed ─▶ lost (this key and the rest)
//!                                                        connection_lost: down, retry later
//!         then due debts (≤ DEBTS_PER_TURN keys per turn, ring keys included):
//!                next_debt ─▶ Redis ─▶ answered │ faulted │ lost
//!  down:  begin (sweep?) ─▶ drain ring ─▶ lost (each key)
//!         may_connect? ─▶ connect ─▶ connected │ connect_failed (backoff ×2, ≤ 1 s)
//! ```
//!
//! A key's word is touched only through [`Words`]: one CAS per step, re-run on the latest word
//! when a decision raced it, so each step lands whole (`lease.rs` holds the word functions;
//! nothing here re-derives a stamp or a due time).
//!
//! # Invariants
//!
//! Stated for a worker that begins a turn at least every `SWEEP_EVERY_MS` of the injected
//! clock (it parks at most 50 ms, and a Redis call lasts at most its I/O timeout).
//!
//! 1. **No request lost for good.** A word is `PENDING` only while its key is on the ring,
//!    in the turn being served, in flight, or owed a collection here; or until its stamp,
//!    which is reached no later than the instant written into it (the sweep keeps an unasked
//!    word's stamp from wrapping into the future), after which the key's next decision asks
//!    again. (`check::lease_worker`: `run` asserts, after every step, that no word's stamp
//!    reads later than the instant it was written for.)
//! 2. **No token granted twice.** Every grant lands with one CAS on the word it was sized
//!    from or a later one (`lease::granted`), and the answer for a request is applied once:
//!    per key, what decisions took equals what Redis granted and landed plus the debt the
//!    word owes, and the debt is at most one. (`check::lease_worker` after every step; the
//!    loom model `fleet_worker.rs` over every interleaving of two deciding threads with the
//!    worker's drain and grant.)
//! 3. **No entry in debt for ever.** An entry that owes its provisional token has its key on
//!    the ring, in the turn, in flight, or in the debts collected here when due, whether
//!    Redis refused it, faulted it, or the connection failed or was down when its key was
//!    drained. When the ring lost its request (a flood of more than `RING` requests
//!    between two drains lapped it, or the push's store landed after the drain had passed
//!    its slot) it is held nowhere until the next sweep (at most `SWEEP_EVERY_MS` on either
//!    time), which takes every entry in debt into the debts by the key its borrowing
//!    decision recorded; when the debts held twice the table's cap already, until a sweep
//!    finds room (a debt leaves them once due, at most `MAX_DEFER_MS` ahead, and taken by a
//!    turn). A debt due at `t` is asked for in the first turn up from `t` that reaches it (at
//!    most `DEBTS_PER_TURN` per turn). (`check::lease_worker` after every step; the loom
//!    models at the end of every execution, a request the drain missed included, and a debt
//!    it missed collected by the sweep.)
//! 4. **No identity refused past its stated wait.** A refusal because Redis granted nothing
//!    states the time until the word's stamp (the pace: `lease::pace_ms`); a decision at or
//!    after that instant admits or asks again, unless the thread has meanwhile asked for the
//!    key itself (a debt collected: its request is out, one call, not two) or a later answer
//!    of Redis for that key named a later instant.
//!    (`check::lease_worker` at every decision.)
// Compiled without the `redis` feature for the models alone.
#![cfg_attr(not(feature = "redis"), allow(dead_code))]

use crate::fleet_lease as lease;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

/// The first pause before reconnecting, doubled on every failed attempt.
pub(crate) const MIN_BACKOFF_MS: u64 = 10;
/// The longest pause between attempts to reconnect.
pub(crate) const MAX_BACKOFF_MS: u64 = 1_000;
/// The longest the thread parks while idle and up.
pub(crate) const IDLE_PARK_MS: u64 = 2;
/// How often the thread moves aged stamps up to the present (`lease::restamped`): more often
/// than the stamps can age into reading as ahead. Counted on both the thread's monotonic
/// time and the injected clock, whichever passes it first: the stamps age on the injected
/// clock, which may run faster than the wall (a test's manual clock, a paused runtime's).
pub(crate) const SWEEP_EVERY_MS: u64 = 2_000;
/// Most keys served per turn of the loop, ring keys included, before due debts wait for the
/// next turn, so that queued requests wait little.
pub(crate) const DEBTS_PER_TURN: usize = 64;

/// One reading of both times the thread keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    /// Milliseconds of the injected clock: what the words' stamps are written in.
    pub(crate) clock_ms: u64,
    /// The thread's own monotonic milliseconds: what its timers run on.
    pub(crate) mono_ms: u64,
}

/// The words of the lease table, by packed key (`FleetKey`): the table in `worker.rs`, a map
/// in the reference model, atomics in the loom model.
pub(crate) trait Words {
    /// The key's word, if it has an entry.
    fn read(&self, key: u64) -> Option<u64>;
    /// Replaces the key's word by `f`'s, by CAS from the exact word `f` saw (re-run on the
    /// latest word when a decision changed it meanwhile); `None` if it has no entry.
    fn apply<R>(&self, key: u64, f: impl FnMut(u64) -> (u64, R)) -> Option<R>;
    /// Replaces every word `f` maps to a new one, each by CAS, while `going` holds.
    fn rewrite(&self, f: impl Fn(u64) -> Option<u64>, going: impl Fn() -> bool);
    /// Calls `visit` with the key and word of every entry that owes its provisional token.
    /// The table knows a debtor's key from the decision that borrowed (`FleetLimiter`
    /// records it by slot); a key read before that record landed may be another entry's,
    /// which the collection's CAS (`lease::collect` on that key's own word) finds owing
    /// nothing.
    fn debtors(&self, visit: impl FnMut(u64, u64));
}

/// The debts this thread still has to collect: entries that owe their provisional token and
/// whose key it holds nowhere else (Redis refused their lease, faulted their key, or the
/// connection was down or failed when it took the key), each with the instant (ms of the
/// injected clock) a request is due. A decision asks again only when its identity comes
/// back; an identity that never does would keep its entry in debt, and an entry in debt is
/// never reclaimed, so without this the table would silt up with them and refuse every new
/// identity (`TableFull`). A key is held once, at its earliest due; at most twice the
/// table's cap are held (a paid entry's key stays until its due), beyond which a debt is
/// left to its identity's next decision.
struct Debts {
    due: BinaryHeap<Reverse<(u64, u64)>>,
    held: HashSet<u64>,
    max: usize,
}

impl Debts {
    fn new(cap: usize) -> Self {
        Self {
            due: BinaryHeap::new(),
            held: HashSet::new(),
            max: cap.saturating_mul(2),
        }
    }

    fn add(&mut self, due_ms: u64, key: u64) {
        if self.due.len() < self.max && self.held.insert(key) {
            self.due.push(Reverse((due_ms, key)));
        }
    }

    /// The next key whose debt is due at `now_ms`.
    fn next_due(&mut self, now_ms: u64) -> Option<u64> {
        match self.due.peek() {
            Some(Reverse((due, _))) if *due <= now_ms => {
                let Reverse((_, key)) = self.due.pop()?;
                self.held.remove(&key);
                Some(key)
            }
            _ => None,
        }
    }
}

/// The lease thread's state between turns: its debts and its timers.
pub(crate) struct Core {
    lease_cap: u32,
    debts: Debts,
    /// Keys whose last answer was a partial grant (fewer tokens than asked, at least one),
    /// for the count of refusals that follow one; at most twice the table's cap (then
    /// cleared).
    partial: HashSet<u64>,
    backoff_ms: u64,
    /// When a down thread may try to connect (`mono_ms`).
    next_try_ms: u64,
    /// The last sweep, on both times.
    swept: Now,
}

impl Core {
    /// A thread for a table of `table_cap` entries and leases of at most `lease_cap`.
    pub(crate) fn new(table_cap: usize, lease_cap: u32, now: Now) -> Self {
        Self {
            lease_cap,
            debts: Debts::new(table_cap),
            partial: HashSet::new(),
            backoff_ms: MIN_BACKOFF_MS,
            next_try_ms: now.mono_ms,
            swept: now,
        }
    }

    /// The start of a turn, up or down: when `SWEEP_EVERY_MS` passed on either time since
    /// the last sweep, moves aged stamps up to the present, so that a quiet identity's
    /// pending stamp never wraps into the future, and takes every entry in debt into the
    /// debts (due at its stamp), so that a debt whose request the ring lost (a lap, or a
    /// push that landed after the drain passed its slot) is collected even if its identity
    /// never returns. Each word's CAS is the table's own: a decision racing it wins or loses
    /// whole, and the sweep re-judges the word it lost to.
    pub(crate) fn begin<W: Words>(&mut self, words: &W, now: Now, going: impl Fn() -> bool) {
        let due = now.mono_ms >= self.swept.mono_ms.saturating_add(SWEEP_EVERY_MS)
            || now.clock_ms >= self.swept.clock_ms.saturating_add(SWEEP_EVERY_MS);
        if due {
            let clock_ms = now.clock_ms;
            words.rewrite(|word| lease::restamped(word, clock_ms), going);
            let debts = &mut self.debts;
            words.debtors(|key, word| {
                debts.add(
                    clock_ms.saturating_add(lease::defer_ms(word, clock_ms)),
                    key,
                );
            });
            self.swept = now;
        }
    }

    /// What to ask Redis for `key`'s entry: `None` when there is nothing to ask (no entry,
    /// or a full balance: the request is answered here, as Redis would answer a request for
    /// nothing).
    pub(crate) fn plan<W: Words>(&self, words: &W, key: u64, clock_ms: u64) -> Option<u32> {
        let cap = self.lease_cap;
        let asked = lease::request_size(words.read(key)?, cap);
        if asked == 0 {
            words.apply(key, |w| (lease::granted(w, 0, 0, 0, clock_ms, cap), ()));
            return None;
        }
        Some(asked)
    }

    /// Redis granted `granted` of the `asked` tokens (capped at `asked`) and named a wait of
    /// `wait_us` before one more is due. One CAS (re-run on a concurrent decision): the
    /// balance only fell since the request was sized, so the debt, if any, is paid first and
    /// the balance stays at most `lease_cap − 1`. A refusal (nothing granted) holds the key's
    /// next request back for the pace (`lease::pace_ms`: the wait Redis named, at least
    /// `fair_ms`, this process's share of a token's time, 0 when pacing is off, plus a
    /// jitter). A refused entry still in debt is collected when its stamp (the pace) is
    /// reached, whether or not its identity comes back. Returns the tokens granted.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn answered<W: Words>(
        &mut self,
        words: &W,
        key: u64,
        asked: u32,
        granted: u64,
        wait_us: u64,
        fair_ms: u64,
        clock_ms: u64,
    ) -> u32 {
        let granted = u32::try_from(granted).unwrap_or(u32::MAX).min(asked);
        let mut wait_ms = wait_us.div_ceil(1000);
        if granted < asked {
            // Drained (nothing or part granted): not before this process's fair share of a
            // token's time (plus jitter): a drained identity costs `rate / N` calls per
            // second per process, not `rate`.
            wait_ms = lease::pace_ms(wait_ms, fair_ms, key ^ clock_ms);
        }
        let cap = self.lease_cap;
        let owed = words.apply(key, |w| {
            let next = lease::granted(w, asked, granted, wait_ms, clock_ms, cap);
            (next, lease::in_debt(next).then_some(next))
        });
        if let Some(Some(word)) = owed {
            self.owe(key, word, clock_ms);
        }
        granted
    }

    /// Notes Redis's answer for `key` (`granted` of `asked`); returns whether it is a refusal
    /// right after a partial grant for the same key (the counters' view).
    pub(crate) fn note_answer(&mut self, key: u64, asked: u32, granted: u32) -> bool {
        let after_partial = self.partial.remove(&key);
        if granted > 0 && granted < asked {
            if self.partial.len() >= self.debts.max {
                self.partial.clear();
            }
            self.partial.insert(key);
        }
        granted == 0 && after_partial
    }

    /// Redis answered `key` unexpectedly (a wrong type, a value that is not a bucket): the
    /// key faults and its next request waits out the stamp; a debt is collected then.
    pub(crate) fn faulted<W: Words>(&mut self, words: &W, key: u64, clock_ms: u64) {
        let owed = words.apply(key, |w| {
            let next = lease::faulted_at(w, clock_ms);
            (next, lease::in_debt(next).then_some(next))
        });
        if let Some(Some(word)) = owed {
            self.owe(key, word, clock_ms);
        }
    }

    /// `key` was taken off the ring or the debts but not answered: the connection was down
    /// or failed. Its word keeps `PENDING` until the stamp, when its next decision asks
    /// again; if it owes its provisional token, the debt is collected as soon as the thread
    /// is up again.
    pub(crate) fn lost<W: Words>(&mut self, words: &W, key: u64, clock_ms: u64) {
        if words.read(key).is_some_and(lease::in_debt) {
            self.debts.add(clock_ms, key);
        }
    }

    fn owe(&mut self, key: u64, word: u64, clock_ms: u64) {
        let due = clock_ms.saturating_add(lease::defer_ms(word, clock_ms).max(1));
        self.debts.add(due, key);
    }

    /// The next due debt whose entry still owes it, while fewer than `DEBTS_PER_TURN` keys
    /// were taken this turn (`taken` counts them, ring keys included); debts paid meanwhile
    /// (a decision's request was granted) are dropped on the way.
    pub(crate) fn next_debt<W: Words>(
        &mut self,
        words: &W,
        clock_ms: u64,
        taken: &mut usize,
    ) -> Option<u64> {
        while *taken < DEBTS_PER_TURN {
            let key = self.debts.next_due(clock_ms)?;
            *taken += 1;
            // Still in debt, its pace passed and no decision's request out: claim the request
            // (one CAS, as a decision would), so that one refusal is never followed by two
            // calls. Still in debt with a decision's request out: come back at that
            // request's stamp, in case it is lost.
            let claim = words.apply(key, |w| match lease::collect(w, clock_ms) {
                Some(next) => (next, Some(None)),
                None => (
                    w,
                    lease::in_debt(w).then(|| Some(lease::defer_ms(w, clock_ms))),
                ),
            });
            match claim.flatten() {
                Some(None) => return Some(key),
                Some(Some(later)) => self.debts.add(clock_ms.saturating_add(later.max(1)), key),
                None => {}
            }
        }
        None
    }

    /// Whether a down thread may try to connect now.
    pub(crate) fn may_connect(&self, mono_ms: u64) -> bool {
        mono_ms >= self.next_try_ms
    }

    /// A connection was made: the backoff starts over.
    pub(crate) fn connected(&mut self) {
        self.backoff_ms = MIN_BACKOFF_MS;
    }

    /// An attempt to connect failed: wait the backoff, then double it (up to
    /// `MAX_BACKOFF_MS`).
    pub(crate) fn connect_failed(&mut self, mono_ms: u64) {
        self.next_try_ms = mono_ms.saturating_add(self.backoff_ms);
        self.backoff_ms = self.backoff_ms.saturating_mul(2).min(MAX_BACKOFF_MS);
    }

    /// The connection failed while up: the next attempt waits the backoff.
    pub(crate) fn connection_lost(&mut self, mono_ms: u64) {
        self.next_try_ms = mono_ms.saturating_add(self.backoff_ms);
    }

    /// How long a down thread parks between turns.
    pub(crate) fn down_park_ms(&self) -> u64 {
        self.backoff_ms.min(IDLE_PARK_MS * 5)
    }

    /// When the last sweep ran (the models' view).
    #[cfg(any(test, fuzzing, admit_loom))]
    pub(crate) fn last_sweep(&self) -> Now {
        self.swept
    }

    /// Whether a debt of `key` is held (the models' view).
    #[cfg(any(test, fuzzing, admit_loom))]
    pub(crate) fn owes(&self, key: u64) -> bool {
        self.debts.held.contains(&key)
    }

    /// Whether the debts are at their bound (a refused debt is then left to its identity).
    #[cfg(any(test, fuzzing, admit_loom))]
    pub(crate) fn debts_full(&self) -> bool {
        self.debts.due.len() >= self.debts.max
    }

    /// How many debts are due at `clock_ms` (the models' view).
    #[cfg(any(test, fuzzing, admit_loom))]
    pub(crate) fn due_debts(&self, clock_ms: u64) -> usize {
        self.debts
            .due
            .iter()
            .filter(|Reverse((due, _))| *due <= clock_ms)
            .count()
    }
}

/// The loom model's entry points (`--cfg admit_loom`, outside the semver surface): lease
/// words in atomics, the ring, and the core's turn, with Redis a function.
#[cfg(admit_loom)]
pub mod loom {
    use super::{Core, Now, Words};
    use crate::fleet_lease as lease;
    use crate::sync::atomic::{AtomicU64, Ordering};

    /// The lease words of keys `1..=n`, each in an atomic, CAS'd with the table's orderings
    /// (the table's slot protocol is modelled by the limiter's models).
    pub struct Cells {
        words: Vec<AtomicU64>,
    }

    impl Cells {
        /// `n` fresh words.
        pub fn new(n: usize) -> Self {
            Self {
                words: (0..n).map(|_| AtomicU64::new(lease::FRESH)).collect(),
            }
        }

        fn cell(&self, key: u64) -> Option<&AtomicU64> {
            self.words.get(usize::try_from(key).ok()?.checked_sub(1)?)
        }

        /// The word of `key`.
        pub fn word(&self, key: u64) -> u64 {
            // Acquire: the latest committed word, as a table slot load.
            self.cell(key).map_or(0, |c| c.load(Ordering::Acquire))
        }

        /// One decision on `key` at `now_ms` with Redis up, as `FleetLimiter::try_acquire_at`
        /// makes it: one CAS of `lease::decide`, then the key pushed on `ring` when the
        /// decision asks. Returns `(took, request)`.
        pub fn decide(&self, ring: &Ring, key: u64, now_ms: u64, cap: u32) -> (bool, bool) {
            let step = self
                .apply(key, |w| {
                    let s = lease::decide(w, now_ms, cap, true);
                    (s.next, s)
                })
                .map_or((false, false), |s| (s.took, s.request));
            if step.1 {
                ring.0.push(key);
            }
            step
        }
    }

    impl Words for Cells {
        fn read(&self, key: u64) -> Option<u64> {
            // Acquire: as a table slot load.
            self.cell(key).map(|c| c.load(Ordering::Acquire))
        }

        fn apply<R>(&self, key: u64, mut f: impl FnMut(u64) -> (u64, R)) -> Option<R> {
            let cell = self.cell(key)?;
            // Acquire: as a table slot load.
            let mut seen = cell.load(Ordering::Acquire);
            loop {
                let (next, r) = f(seen);
                if next == seen {
                    return Some(r);
                }
                match cell.compare_exchange(
                    seen,
                    next,
                    // AcqRel: the table's CAS on a member's word.
                    Ordering::AcqRel,
                    // Acquire: another step landed first; judge its word.
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Some(r),
                    Err(now) => seen = now,
                }
            }
        }

        fn rewrite(&self, f: impl Fn(u64) -> Option<u64>, going: impl Fn() -> bool) {
            for key in 1..=self.words.len() as u64 {
                if !going() {
                    return;
                }
                self.apply(key, |w| (f(w).unwrap_or(w), ()));
            }
        }

        fn debtors(&self, mut visit: impl FnMut(u64, u64)) {
            for key in 1..=self.words.len() as u64 {
                if let Some(word) = self.read(key).filter(|w| lease::in_debt(*w)) {
                    visit(key, word);
                }
            }
        }
    }

    /// The request ring, with `slots` slots.
    pub struct Ring(crate::fleet_ring::Ring);

    impl Ring {
        /// A ring of `slots` slots (rounded up to a power of two).
        pub fn new(slots: usize) -> Self {
            Self(crate::fleet_ring::Ring::with_slots(slots))
        }
    }

    /// The lease thread, up: its core and its place in the ring.
    pub struct Worker {
        core: Core,
        head: usize,
    }

    impl Worker {
        /// A thread for `cells` of at most `table_cap` entries.
        pub fn new(table_cap: usize, lease_cap: u32) -> Self {
            let now = Now {
                clock_ms: 0,
                mono_ms: 0,
            };
            Self {
                core: Core::new(table_cap, lease_cap, now),
                head: 0,
            }
        }

        /// One turn, up, as `worker::run` makes it: drain the ring, ask `redis(key, asked)`
        /// for each key (it answers `(granted, wait_us)`), hand each answer to the core; then
        /// the due debts. Returns each `(key, asked, granted)` in order.
        pub fn turn(
            &mut self,
            cells: &Cells,
            ring: &Ring,
            now_ms: u64,
            mut redis: impl FnMut(u64, u32) -> (u64, u64),
        ) -> Vec<(u64, u32, u32)> {
            let core = &mut self.core;
            let mut asked = Vec::new();
            let mut serve = |core: &mut Core, key: u64| {
                if let Some(n) = core.plan(cells, key, now_ms) {
                    let (granted, wait_us) = redis(key, n);
                    let granted = core.answered(cells, key, n, granted, wait_us, 0, now_ms);
                    asked.push((key, n, granted));
                }
            };
            let mut taken = ring.0.drain(&mut self.head, |key| serve(core, key));
            while let Some(key) = core.next_debt(cells, now_ms, &mut taken) {
                serve(core, key);
            }
            asked
        }

        /// Whether a debt of `key` is held for collection.
        pub fn owes(&self, key: u64) -> bool {
            self.core.owes(key)
        }

        /// The start of a turn at `now_ms` on both times, as `worker::run` begins each: a
        /// sweep when one is due.
        pub fn begin(&mut self, cells: &Cells, now_ms: u64) {
            let now = Now {
                clock_ms: now_ms,
                mono_ms: now_ms,
            };
            self.core.begin(cells, now, || true);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::check::lease_worker::{run, WorkerOp};
    use proptest::prelude::*;

    /// A refused cold identity that never comes back: its debt is collected when Redis said,
    /// and once the connection failed with its key in hand, as soon as the thread is up.
    #[test]
    fn a_refused_or_lost_debt_is_collected_without_its_identity() {
        use WorkerOp::*;
        run(
            4,
            &[
                Decide { key: 0 },
                Drain,
                Serve,
                Answer { n: 0, wait_ms: 100 },
                Tick { dt_ms: 100 },
                Drain,
                Serve,
                Fail,
                Connect { ok: true },
                Drain,
                Serve,
                Answer { n: 2, wait_ms: 0 },
            ],
        );
    }

    /// The injected clock running ahead of the thread's own time: the sweep still keeps a
    /// quiet identity's stamp from wrapping into the future.
    #[test]
    fn a_fast_clock_is_swept_by_its_own_time() {
        use WorkerOp::*;
        let mut ops = vec![
            Decide { key: 1 },
            Drain,
            Serve,
            Answer { n: 0, wait_ms: 50 },
        ];
        ops.extend([Jump { dt_ms: 3_000 }; 8]);
        ops.push(Decide { key: 1 });
        run(8, &ops);
    }

    fn op() -> impl Strategy<Value = WorkerOp> {
        prop_oneof![
            4 => (0u8..5).prop_map(|key| WorkerOp::Decide { key }),
            2 => (0u16..400).prop_map(|dt_ms| WorkerOp::Tick { dt_ms }),
            1 => (0u16..=4_000).prop_map(|dt_ms| WorkerOp::Tick { dt_ms }),
            1 => (0u16..=4_000).prop_map(|dt_ms| WorkerOp::Jump { dt_ms }),
            3 => Just(WorkerOp::Drain),
            4 => Just(WorkerOp::Serve),
            2 => (0u16..40, 0u16..5_000).prop_map(|(n, wait_ms)| WorkerOp::Answer { n, wait_ms }),
            2 => (0u16..300).prop_map(|wait_ms| WorkerOp::Answer { n: 0, wait_ms }),
            1 => Just(WorkerOp::Fault),
            1 => Just(WorkerOp::Fail),
            1 => any::<bool>().prop_map(|ok| WorkerOp::Connect { ok }),
        ]
    }

    proptest! {
        #![proptest_config(crate::check::proptest_config(512))]

        /// Arbitrary histories of a few identities, the ring, the thread's turns, Redis's
        /// answers, outages and clock jumps: the four invariants of this module after every
        /// step (see `check::lease_worker`).
        #[cfg_attr(
            miri,
            ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
        )]
        #[test]
        fn the_thread_keeps_its_invariants(
            cap in prop_oneof![Just(1u32), Just(2), Just(8), 1u32..300],
            ops in proptest::collection::vec(op(), 1..300),
        ) {
            run(cap, &ops);
        }
    }
}
