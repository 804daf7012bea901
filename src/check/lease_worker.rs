//! The lease thread's core (`crate::fleet_worker_core`) against a reference of several keys'
//! histories.
//!
//! The driver plays a few identities sharing a small table (idle entries reclaimed at its
//! cap): their decisions, as `FleetLimiter::try_acquire_at` makes them, push requests on a
//! real ring small enough to lap; the lease thread's turn is played step by step (the ring
//! drained, one key planned and sent, one due debt taken), with Redis's answers (a grant, a
//! refusal with a wait, a key fault), the connection failing and coming back, and the two
//! times moving apart (the injected clock jumping ahead of the thread's monotonic time, and
//! across the 14-bit stamp wrap). The reference is plain numbers per key: tokens taken and
//! granted, the instant each stamp was written for, what the last refusal stated, which keys
//! are on the ring, in the turn, in flight, or were lapped. After every step it asserts the
//! invariants of `crate::fleet_worker_core`:
//!
//! 1. a pending word's stamp reads no later than the instant it was written for;
//! 2. per key, tokens taken = tokens granted and landed + the debt, the debt at most one, and
//!    the balance in `[−1, cap − 1]`; the ring hands back exactly the newest requests it holds;
//! 3. an entry in debt has its key on the ring, in the turn, in flight or in the core's
//!    debts (or the ring lapped it since the last sweep, or the debts are full), and a turn
//!    up collects every debt due unless it took `DEBTS_PER_TURN` keys;
//! 4. a decision at or after the instant its key's last `Exhausted` refusal stated admits or
//!    asks again, unless the thread asked for that key (a debt collected) or Redis answered
//!    it since.

use super::bytes::ByteReader;
use crate::fleet_lease as lease;
use crate::fleet_ring::Ring;
use crate::fleet_worker_core::{Core, Now, Words, DEBTS_PER_TURN};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Identities `1..=KEYS` (one class).
pub const KEYS: u64 = 5;
/// Entries the table holds: fewer than the identities, so entries are reclaimed.
pub const TABLE_CAP: usize = 3;
/// Slots of the ring: fewer than a burst of requests, so it laps.
pub const RING_SLOTS: usize = 4;
/// The longest step of either time between two operations, in milliseconds: the thread
/// begins a turn at least this often (it parks at most 50 ms; a Redis call lasts at most its
/// I/O timeout).
pub const MAX_STEP_MS: u64 = 4_000;
/// The fair share of a token's time the core paces refusals by (`lease::pace_ms`): 4
/// processes at 100 tokens a second.
pub const FAIR_MS: u64 = 40;

/// One step of the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerOp {
    /// Identity `key % KEYS + 1` decides at the current reading.
    Decide { key: u8 },
    /// Both times move `dt_ms` forward (at most [`MAX_STEP_MS`]); the thread wakes.
    Tick { dt_ms: u16 },
    /// The injected clock alone moves `dt_ms` forward (a clock faster than the wall); the
    /// thread wakes.
    Jump { dt_ms: u16 },
    /// A turn begins, once the last one is over: the ring is drained into it (down: each key
    /// is lost).
    Drain,
    /// Up, nothing in flight: the turn's next key (else the next due debt) is planned and,
    /// when there is something to ask, sent.
    Serve,
    /// Redis answers the request in flight: `n` tokens (capped at what was asked), and a wait.
    Answer { n: u16, wait_ms: u16 },
    /// Redis answers the request in flight unexpectedly: the key faults.
    Fault,
    /// The connection fails (with the request in flight, if any): down.
    Fail,
    /// A down thread tries to connect, when its backoff allows; `ok`: it succeeds.
    Connect { ok: bool },
}

/// The table as the core sees it: a map, with the table's cap and reclaim.
struct Map {
    words: RefCell<BTreeMap<u64, u64>>,
}

impl Words for Map {
    fn read(&self, key: u64) -> Option<u64> {
        self.words.borrow().get(&key).copied()
    }

    fn apply<R>(&self, key: u64, mut f: impl FnMut(u64) -> (u64, R)) -> Option<R> {
        let mut words = self.words.borrow_mut();
        let word = words.get_mut(&key)?;
        let (next, r) = f(*word);
        *word = next;
        Some(r)
    }

    fn rewrite(&self, f: impl Fn(u64) -> Option<u64>, going: impl Fn() -> bool) {
        for word in self.words.borrow_mut().values_mut() {
            if !going() {
                return;
            }
            if let Some(next) = f(*word) {
                *word = next;
            }
        }
    }

    fn debtors(&self, mut visit: impl FnMut(u64, u64)) {
        for (key, word) in self.words.borrow().iter() {
            if lease::in_debt(*word) {
                visit(*key, *word);
            }
        }
    }
}

/// Per key: what its decisions took and what Redis granted that landed on its word.
#[derive(Debug, Default, Clone, Copy)]
struct Ledger {
    taken: i64,
    granted: i64,
}

struct Model {
    cap: u32,
    map: Map,
    ring: Ring,
    head: usize,
    core: Core,
    now: Now,
    up: bool,
    /// The turn: keys drained and not yet served, how many keys it took, and whether it is
    /// over (its debts were asked for until none was due).
    turn: VecDeque<u64>,
    taken: usize,
    turn_over: bool,
    in_flight: Option<(u64, u32)>,
    /// Keys pushed since the last drain, oldest first; keys whose request the ring lapped.
    pushed: VecDeque<u64>,
    lapped: BTreeSet<u64>,
    ledger: BTreeMap<u64, Ledger>,
    /// The instant (ms of the injected clock) each key's stamp was last written for.
    deadline: BTreeMap<u64, u64>,
    /// The instant the key's last `Exhausted` refusal stated, and its answer count then.
    promise: BTreeMap<u64, (u64, u64)>,
    /// Answers of Redis (grants, refusals, faults) applied to each key.
    answers: BTreeMap<u64, u64>,
}

impl Model {
    fn new(cap: u32) -> Self {
        let now = Now {
            clock_ms: 1_000,
            mono_ms: 0,
        };
        Self {
            cap,
            map: Map {
                words: RefCell::new(BTreeMap::new()),
            },
            ring: Ring::with_slots(RING_SLOTS),
            head: 0,
            core: Core::new(TABLE_CAP, cap, now),
            now,
            up: true,
            turn: VecDeque::new(),
            taken: 0,
            turn_over: true,
            in_flight: None,
            pushed: VecDeque::new(),
            lapped: BTreeSet::new(),
            ledger: BTreeMap::new(),
            deadline: BTreeMap::new(),
            promise: BTreeMap::new(),
            answers: BTreeMap::new(),
        }
    }

    fn word(&self, key: u64) -> Option<u64> {
        self.map.read(key)
    }

    /// One decision, as `FleetLimiter::try_acquire_at`: the entry found or inserted (idle
    /// entries reclaimed at the cap), one `lease::decide`, the key pushed when it asks, and
    /// the refusal's stated wait.
    fn decide(&mut self, i: usize, key: u64) {
        let now = self.now.clock_ms;
        if self.word(key).is_none() {
            let mut words = self.map.words.borrow_mut();
            if words.len() >= TABLE_CAP {
                words.retain(|_, w| !lease::idle(*w, now));
            }
            if words.len() >= TABLE_CAP {
                return; // TableFull: refused, nothing stated beyond 1 ms.
            }
            words.insert(key, lease::FRESH);
            drop(words);
            // A fresh entry keeps nothing of the last one's stamp or refusal.
            self.promise.remove(&key);
            self.deadline.remove(&key);
        }
        let word = self.word(key).unwrap();
        let up = lease::balance(word) > 0 || self.up;
        let step = lease::decide(word, now, self.cap, up);
        self.map.apply(key, |_| (step.next, ()));
        // Invariant 4: past the stated wait, with no answer since, the decision admits or
        // asks again.
        if let Some((due, answers)) = self.promise.remove(&key) {
            if now >= due && answers == self.answers_of(key) {
                assert!(
                    step.took || step.request,
                    "op {i}: key {key} refused at {now}, past the wait it was told ({due}), \
                     and not asked for: word {word:#x}"
                );
            }
        }
        if step.request {
            self.ring.push(key);
            self.pushed.push_back(key);
            self.lapped.remove(&key);
            self.deadline.insert(key, now + lease::REQUEST_TIMEOUT_MS);
        }
        if step.took {
            self.ledger.entry(key).or_default().taken += 1;
        } else if self.up && !lease::faulted(step.next) && lease::exhausted(step.next) {
            // `FleetRefusal::Exhausted`, retry after the stamp.
            let stated = lease::defer_ms(step.next, now).max(1);
            self.promise
                .insert(key, (now + stated, self.answers_of(key)));
        }
    }

    fn answers_of(&self, key: u64) -> u64 {
        self.answers.get(&key).copied().unwrap_or(0)
    }

    /// The core changed `key`'s word: a new stamp, a new statement of Redis.
    fn answered(&mut self, key: u64, before: Option<u64>, granted: u32) {
        let Some(word) = self.word(key) else {
            return;
        };
        if before.is_some() {
            self.ledger.entry(key).or_default().granted += i64::from(granted);
        }
        *self.answers.entry(key).or_default() += 1;
        if lease::pending(word) {
            let now = self.now.clock_ms;
            self.deadline.insert(key, now + lease::defer_ms(word, now));
        }
    }

    fn wake(&mut self) {
        let swept = self.core.last_sweep();
        self.core.begin(&self.map, self.now, || true);
        if self.core.last_sweep() != swept {
            // A sweep takes every entry in debt into the debts: a request the ring lost no
            // longer excuses a debt held nowhere (invariant 3 checks it after this step).
            self.lapped.clear();
        }
    }

    fn step(&mut self, i: usize, op: WorkerOp) {
        let clock = self.now.clock_ms;
        match op {
            WorkerOp::Decide { key } => self.decide(i, u64::from(key) % KEYS + 1),
            WorkerOp::Tick { dt_ms } => {
                let dt = u64::from(dt_ms) % (MAX_STEP_MS + 1);
                self.now.clock_ms += dt;
                self.now.mono_ms += dt;
                self.wake();
            }
            WorkerOp::Jump { dt_ms } => {
                self.now.clock_ms += u64::from(dt_ms) % (MAX_STEP_MS + 1);
                self.wake();
            }
            WorkerOp::Drain => {
                if !self.turn_over || self.in_flight.is_some() {
                    return;
                }
                self.wake();
                let mut drained = Vec::new();
                self.ring.drain(&mut self.head, |key| drained.push(key));
                // The ring hands back exactly the newest requests it holds.
                let lost = self.pushed.len().saturating_sub(RING_SLOTS);
                let kept: Vec<u64> = self.pushed.iter().skip(lost).copied().collect();
                assert_eq!(drained, kept, "op {i}: the ring lost or invented a request");
                for key in self.pushed.iter().take(lost) {
                    if !kept.contains(key) {
                        self.lapped.insert(*key);
                    }
                }
                self.pushed.clear();
                if self.up {
                    self.taken = drained.len();
                    self.turn = drained.into();
                    self.turn_over = false;
                } else {
                    for key in drained {
                        self.core.lost(&self.map, key, clock);
                    }
                }
            }
            WorkerOp::Serve => {
                if !self.up || self.in_flight.is_some() || self.turn_over {
                    return;
                }
                let key = match self.turn.pop_front() {
                    Some(key) => key,
                    None => match self.core.next_debt(&self.map, clock, &mut self.taken) {
                        Some(key) => {
                            // The core claimed the debt's request, as a decision would: the
                            // key is asked for (invariant 4 then waits for its answer).
                            self.deadline.insert(key, clock + lease::REQUEST_TIMEOUT_MS);
                            *self.answers.entry(key).or_default() += 1;
                            key
                        }
                        None => {
                            // The turn is over: every due debt was asked for, unless the
                            // turn took its fill of keys.
                            assert!(
                                self.core.due_debts(clock) == 0 || self.taken >= DEBTS_PER_TURN,
                                "op {i}: a turn up left {} due debts",
                                self.core.due_debts(clock)
                            );
                            self.turn_over = true;
                            return;
                        }
                    },
                };
                let before = self.word(key);
                match self.core.plan(&self.map, key, clock) {
                    Some(asked) => self.in_flight = Some((key, asked)),
                    None if before.is_some() => self.answered(key, before, 0),
                    None => {}
                }
            }
            WorkerOp::Answer { n, wait_ms } => {
                if let Some((key, asked)) = self.in_flight.take() {
                    let before = self.word(key);
                    let granted = self.core.answered(
                        &self.map,
                        key,
                        asked,
                        u64::from(n),
                        u64::from(wait_ms) * 1_000,
                        FAIR_MS,
                        clock,
                    );
                    assert!(granted <= asked, "op {i}: granted {granted} of {asked}");
                    self.answered(key, before, granted);
                }
            }
            WorkerOp::Fault => {
                if let Some((key, _)) = self.in_flight.take() {
                    let before = self.word(key);
                    self.core.faulted(&self.map, key, clock);
                    self.answered(key, before, 0);
                }
            }
            WorkerOp::Fail => {
                if self.up {
                    if let Some((key, _)) = self.in_flight.take() {
                        self.core.lost(&self.map, key, clock);
                    }
                    for key in std::mem::take(&mut self.turn) {
                        self.core.lost(&self.map, key, clock);
                    }
                    self.turn_over = true;
                    self.up = false;
                    self.core.connection_lost(self.now.mono_ms);
                }
            }
            WorkerOp::Connect { ok } => {
                if !self.up && self.core.may_connect(self.now.mono_ms) {
                    if ok {
                        self.up = true;
                        self.core.connected();
                    } else {
                        self.core.connect_failed(self.now.mono_ms);
                    }
                }
            }
        }
    }

    /// The invariants after every step.
    fn check(&self, i: usize, op: WorkerOp) {
        let now = self.now.clock_ms;
        for key in 1..=KEYS {
            let ledger = self.ledger.get(&key).copied().unwrap_or_default();
            let Some(word) = self.word(key) else {
                // 2: a reclaimed entry held nothing and owed nothing.
                assert_eq!(
                    ledger.taken, ledger.granted,
                    "op {i} {op:?}: key {key} gone with {ledger:?}"
                );
                continue;
            };
            // 2: taken = granted + debt; the debt at most one; the balance in range.
            let bal = lease::signed_balance(word);
            assert_eq!(
                ledger.taken - ledger.granted,
                -bal,
                "op {i} {op:?}: key {key} word {word:#x}, {ledger:?}"
            );
            assert!(
                (-1..i64::from(self.cap)).contains(&bal),
                "op {i}: key {key} balance {bal} outside [-1, {}]",
                self.cap - 1
            );
            if lease::pending(word) {
                // 1: the stamp reads no later than the instant it was written for.
                let deadline = self.deadline.get(&key).copied().unwrap_or(0);
                assert!(
                    lease::defer_ms(word, now) <= deadline.saturating_sub(now),
                    "op {i} {op:?}: key {key} word {word:#x} waits {} ms at {now}, \
                     written for {deadline}",
                    lease::defer_ms(word, now)
                );
            }
            if lease::in_debt(word) {
                // 3: someone still holds the key of an entry in debt.
                let held = self.pushed.contains(&key)
                    || self.turn.contains(&key)
                    || self.in_flight.is_some_and(|(k, _)| k == key)
                    || self.core.owes(key)
                    || self.lapped.contains(&key)
                    || self.core.debts_full();
                assert!(
                    held,
                    "op {i} {op:?}: key {key} in debt ({word:#x}) and held nowhere: \
                     no decision or turn will ever collect it"
                );
            }
        }
    }
}

/// Decodes a fuzzer's bytes: the lease cap, then one op per 1–5 bytes.
pub fn decode(data: &[u8]) -> (u32, Vec<WorkerOp>) {
    let mut r = ByteReader::new(data);
    let cap = match r.u8() % 4 {
        0 => 1,
        1 => 2,
        2 => 8,
        _ => 1 + u32::from(r.u16()) % 300,
    };
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 512 {
        let op = match r.u8() % 12 {
            0..=2 => WorkerOp::Decide { key: r.u8() },
            3 => WorkerOp::Tick { dt_ms: r.u16() },
            4 => WorkerOp::Jump { dt_ms: r.u16() },
            5 => WorkerOp::Drain,
            6 | 7 => WorkerOp::Serve,
            8 => WorkerOp::Answer {
                n: r.u16(),
                wait_ms: r.u16(),
            },
            9 => WorkerOp::Fault,
            10 => WorkerOp::Fail,
            _ => WorkerOp::Connect {
                ok: r.u8() & 1 == 0,
            },
        };
        ops.push(op);
    }
    (cap, ops)
}

/// The fuzz target's body.
pub fn fuzz_lease_worker(data: &[u8]) {
    let (cap, ops) = decode(data);
    run(cap, &ops);
}

/// Plays `ops` for a lease cap of `cap`, asserting the invariants after every step.
pub fn run(cap: u32, ops: &[WorkerOp]) {
    let mut model = Model::new(cap.clamp(1, lease::MAX_LEASE_CAP));
    for (i, op) in ops.iter().enumerate() {
        model.step(i, *op);
        model.check(i, *op);
    }
}
