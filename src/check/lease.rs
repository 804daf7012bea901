//! The fleet's lease word against a sequential reference model with a signed balance.
//!
//! The reference keeps the balance as an `i64` (−1 is the debt of the provisional token), the
//! request's deadline as an absolute millisecond, and the lease size as a number, with none of
//! the word's flags, packing or stamp ring. The driver plays one key's history through both:
//! decisions at readings moving forward, the lease thread taking the queued request and
//! sizing it from the word as it is then, Redis answering it (a grant, a refusal with a wait,
//! a fault) or the request being lost, Redis going down and coming back, and the table
//! trying to reclaim the entry. After every step it asserts identical answers and words, and
//! the invariants of `crate::fleet` that do not depend on either formulation:
//!
//! * the balance stays in `[−1, cap − 1]`;
//! * a decision admits only a leased token or the one provisional token, and none in debt;
//! * a second request is made only once the first timed out (or the pace after a refusal
//!   passed: the wait Redis named, at least the fair share `fair_ms`, lengthened only by the
//!   jitter);
//! * the calls are bounded by the budget, not by the decisions:
//!   `calls ≤ 2 × leases + 2 + ⌊drained / pace_min⌋ + 2 × retries`, where the leases are the
//!   calls granted tokens, `pace_min = min(max(fair_ms, 1), MAX_DEFER_MS)`, the drained time
//!   is the time spent `EXHAUSTED`, and the retries are the requests lost or faulted in
//!   flight and those made while one was still in flight;
//! * an entry in debt is never reclaimed;
//! * a reclaim never shortens a pace: after an answer that drained the bucket, no decision
//!   asks (and no debt is collected) before its pace has passed, whatever entry holds the
//!   key meanwhile (the driver keeps that instant apart from both, so no reclaim resets it);
//! * spent − granted is at most 1 at every step, and over every interval of the history
//!   (every pair of steps) at most `cap`, the width of the balance's range.

use super::bytes::ByteReader;
use crate::fleet_lease as lease;

/// The longest step of the reading between two operations, in milliseconds.
pub const MAX_STEP_MS: u64 = 4_000;

/// One step of a lease word's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOp {
    /// The reading moves `dt_ms` forward (at most [`MAX_STEP_MS`]), then one decision.
    Decide { dt_ms: u16 },
    /// The lease thread takes the queued request and sizes it from the word as it is now
    /// (only when no request is in flight: the thread makes one at a time).
    Send,
    /// Redis answers the request in flight with `n` tokens (capped at what was asked) and,
    /// when it grants nothing, a wait.
    Answer { n: u32, wait_ms: u16 },
    /// The request queued (or else the one in flight) is lost: a ring overrun, an outage, a
    /// command that timed out.
    Lose,
    /// Redis answers the request in flight unexpectedly: the key faults.
    Fault,
    /// Redis goes down (`up = false`) or comes back.
    Redis { up: bool },
    /// The table tries to reclaim the entry.
    Reclaim,
    /// The lease thread's debt collector claims the entry's request if it is in debt and
    /// may ask now (`lease::collect`), as it does when the instant it noted has come.
    Collect,
}

/// The reference: one key's lease as plain numbers.
#[derive(Debug, Clone)]
pub struct RefLease {
    cap: u32,
    /// Signed balance: tokens held, −1 while the provisional token is owed.
    pub bal: i64,
    pub pending: bool,
    /// Absolute millisecond before which no new request is made while pending.
    pub deadline: u64,
    pub faulted: bool,
    pub exhausted: bool,
    /// The next lease's exponent: the lease is `min(2^exp, cap)`.
    exp: u32,
}

/// What the reference says one decision does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefStep {
    pub took: bool,
    pub borrowed: bool,
    pub request: bool,
}

impl RefLease {
    pub fn new(cap: u32) -> Self {
        Self {
            cap,
            bal: 0,
            pending: false,
            deadline: 0,
            faulted: false,
            exhausted: false,
            exp: 0,
        }
    }

    pub fn lease_size(&self) -> u32 {
        (1u64 << self.exp).min(u64::from(self.cap)).max(1) as u32
    }

    fn low_water(&self) -> i64 {
        i64::from(self.lease_size() / 2).max(1)
    }

    /// A decision at `now_ms`: a held token; else the provisional one when the entry holds
    /// nothing, owes nothing, asks for nothing, is not faulted and Redis is up; and a request
    /// when short (below the low-water mark or in debt) and none is outstanding.
    pub fn decide(&mut self, now_ms: u64, up: bool) -> RefStep {
        let borrowed = self.bal == 0 && !self.pending && !self.faulted && up;
        let took = self.bal > 0 || borrowed;
        if took {
            self.bal -= 1;
        }
        let short = self.bal < self.low_water();
        let request = short && (!self.pending || now_ms >= self.deadline);
        if request {
            self.pending = true;
            self.deadline = now_ms + lease::REQUEST_TIMEOUT_MS;
        }
        RefStep {
            took,
            borrowed,
            request,
        }
    }

    /// What the lease thread asks for: the lease plus the debt, within `cap − 1 − bal`.
    pub fn request_size(&self) -> u32 {
        let owed = u32::from(self.bal < 0);
        let room = i64::from(self.cap) - 1 - self.bal;
        (self.lease_size() + owed).min(room as u32)
    }

    /// The debt collector's claim: in debt, and no request outstanding or its deadline
    /// passed.
    pub fn collect(&mut self, now_ms: u64) -> bool {
        let claim = self.bal < 0 && (!self.pending || now_ms >= self.deadline);
        if claim {
            self.pending = true;
            self.deadline = now_ms + lease::REQUEST_TIMEOUT_MS;
        }
        claim
    }

    /// Redis granted `n` of `asked` (the debt is paid first by plain signed addition); when
    /// it granted fewer than asked, no request before `pace_ms` has passed.
    pub fn answer(&mut self, asked: u32, n: u32, pace_ms: u64, now_ms: u64) {
        self.bal += i64::from(n);
        self.faulted = false;
        self.exhausted = false;
        let max_exp = 31 - self.cap.max(1).leading_zeros();
        if n >= asked && asked > 0 {
            self.exp = (self.exp + 1).min(max_exp);
        } else if n < asked {
            self.exp = self.exp.saturating_sub(1);
        }
        if n < asked {
            self.pending = true;
            self.exhausted = true;
            self.deadline = now_ms + pace_ms.clamp(1, lease::MAX_DEFER_MS);
        } else {
            self.pending = false;
        }
    }

    pub fn fault(&mut self, now_ms: u64) {
        self.faulted = true;
        self.pending = true;
        self.deadline = now_ms + lease::REQUEST_TIMEOUT_MS;
    }

    /// Reclaimable at `now_ms`: holds and owes nothing, not faulted, and nothing pending
    /// but a pace that has passed.
    pub fn idle(&self, now_ms: u64) -> bool {
        self.bal == 0
            && !self.faulted
            && (!self.pending || (self.exhausted && now_ms >= self.deadline))
    }
}

/// Decodes a fuzzer's bytes: the cap and the fair share (0: no pacing) from the first, then
/// one op per 1–5 bytes. (The fair share and `Collect` take bits the ops did not read before,
/// so the stored corpus still decodes to the histories it was kept for.)
pub fn decode(data: &[u8]) -> (u32, u64, Vec<LeaseOp>) {
    let mut r = ByteReader::new(data);
    let first = r.u8();
    let fair_ms = match (first / 6) % 4 {
        0 => 0,
        1 => 40,
        2 => 400,
        _ => lease::MAX_DEFER_MS + 1_000,
    };
    let cap = match first % 6 {
        0 => 1,
        1 => 2,
        2 => 3,
        3 => 8,
        4 => 64,
        _ => 1 + u32::from(r.u16()) % 1_000,
    };
    let mut ops = Vec::new();
    while !r.is_empty() && ops.len() < 512 {
        let tag = r.u8();
        let op = match tag % 8 {
            0 | 1 => LeaseOp::Decide { dt_ms: r.u16() },
            2 => LeaseOp::Send,
            3 => LeaseOp::Answer {
                n: u32::from(r.u16()),
                wait_ms: r.u16(),
            },
            4 => LeaseOp::Lose,
            5 => LeaseOp::Fault,
            6 => LeaseOp::Redis {
                up: r.u8() & 1 == 0,
            },
            _ if tag & 0x80 != 0 => LeaseOp::Collect,
            _ => LeaseOp::Reclaim,
        };
        ops.push(op);
    }
    (cap, fair_ms, ops)
}

/// The fuzz target's body.
pub fn fuzz_lease(data: &[u8]) {
    let (cap, fair_ms, ops) = decode(data);
    run(cap, fair_ms, &ops);
}

/// The calls one key's history made, by how they ended, for the call bound.
#[derive(Debug, Default)]
struct Calls {
    /// Requests sent to Redis (`Send` with something to ask).
    sent: u64,
    /// Answered with at least one token.
    leases: u64,
    /// Requests lost or faulted in flight, and requests made while one was in flight.
    retries: u64,
    /// Milliseconds of the reading spent `EXHAUSTED`.
    drained_ms: u64,
}

/// Plays `ops` through the lease word and the reference for a lease cap of `cap` and a fair
/// share of `fair_ms` (the pace's floor after a refusal; 0: no pacing), asserting identical
/// answers and the invariants after every step.
pub fn run(cap: u32, fair_ms: u64, ops: &[LeaseOp]) {
    let cap = cap.clamp(1, lease::MAX_LEASE_CAP);
    let pace_min = fair_ms.clamp(1, lease::MAX_DEFER_MS);
    let mut calls = Calls::default();
    let mut word = lease::FRESH;
    let mut reference = RefLease::new(cap);
    let mut now: u64 = 1_000;
    let mut up = true;
    // A request pushed on the ring and not yet taken; the one Redis is answering.
    let mut queued = false;
    let mut in_flight: Option<u32> = None;
    // spent − granted, and its lowest value so far (for the interval rule).
    let (mut spent, mut granted) = (0i64, 0i64);
    let mut lowest = 0i64;
    // The instant before which the last drained answer's pace forbids a request: the
    // driver's own record, which no reclaim resets (a later answer or fault replaces it).
    let mut paced_until: u64 = 0;
    for (i, op) in ops.iter().enumerate() {
        let before = word;
        match *op {
            LeaseOp::Decide { dt_ms } => {
                let mut next_now = now + u64::from(dt_ms) % (MAX_STEP_MS + 1);
                // The stamp is 14 bits of milliseconds: one left pending more than 8.19 s
                // past its deadline reads as ahead (an open liveness issue of the word, not
                // of the bound); the history keeps the reading within that.
                if reference.pending {
                    next_now = next_now.min(reference.deadline + 8_000).max(now);
                }
                if reference.exhausted {
                    calls.drained_ms += next_now - now;
                }
                now = next_now;
                let in_debt = lease::in_debt(word);
                let (was_pending, deadline) = (reference.pending, reference.deadline);
                let step = lease::decide(word, now, cap, up);
                let expected = reference.decide(now, up);
                assert_eq!(
                    (step.took, step.borrowed, step.request),
                    (expected.took, expected.borrowed, expected.request),
                    "op {i} {op:?} at {now}: word {before:#x}"
                );
                assert!(!(in_debt && step.took), "op {i}: admitted while in debt");
                if step.borrowed {
                    assert!(
                        lease::balance(before) == 0 && !lease::pending(before) && up,
                        "op {i}: provisional token from {before:#x} (up {up})"
                    );
                }
                if step.request {
                    // One request outstanding: a second only once the first's deadline
                    // (its timeout, or the wait Redis named) has passed.
                    assert!(
                        !was_pending || now >= deadline,
                        "op {i}: a second request {} ms before the first's deadline",
                        deadline - now
                    );
                    assert!(
                        now >= paced_until,
                        "op {i}: a request {} ms before the pace has passed",
                        paced_until - now
                    );
                    // Several ring entries for one key collapse into one: the thread sizes
                    // each from the word as it is when it takes it.
                    queued = true;
                    // A request while one is in flight (its timeout passed): a retry.
                    calls.retries += u64::from(in_flight.is_some());
                }
                if step.took {
                    spent += 1;
                }
                word = step.next;
            }
            LeaseOp::Send => {
                if queued && in_flight.is_none() {
                    queued = false;
                    let asked = lease::request_size(word, cap);
                    assert_eq!(asked, reference.request_size(), "op {i}: request size");
                    if asked == 0 {
                        word = lease::granted(word, 0, 0, 0, now, cap);
                        reference.answer(0, 0, 0, now);
                        paced_until = 0;
                    } else {
                        in_flight = Some(asked);
                        calls.sent += 1;
                    }
                }
            }
            LeaseOp::Answer { n, wait_ms } => {
                if let Some(asked) = in_flight.take() {
                    let n = n.min(asked);
                    // The worker's pace after a refusal or a partial grant (`Core::answered`);
                    // a full grant names none.
                    let wait = u64::from(wait_ms);
                    let pace = if n < asked {
                        let pace = lease::pace_ms(wait, fair_ms, (now << 20) ^ u64::from(asked));
                        let floor = wait.max(fair_ms).clamp(1, lease::MAX_DEFER_MS);
                        assert!(
                            floor <= pace && pace <= (floor + floor / 4).min(lease::MAX_DEFER_MS),
                            "op {i}: pace {pace} ms for a wait of {wait} and a share of {fair_ms}"
                        );
                        pace
                    } else {
                        wait
                    };
                    word = lease::granted(word, asked, n, pace, now, cap);
                    reference.answer(asked, n, pace, now);
                    paced_until = if n < asked {
                        now + pace.clamp(1, lease::MAX_DEFER_MS)
                    } else {
                        0
                    };
                    granted += i64::from(n);
                    calls.leases += u64::from(n > 0);
                }
            }
            LeaseOp::Lose => {
                if queued {
                    queued = false;
                } else if in_flight.take().is_some() {
                    calls.retries += 1;
                }
            }
            LeaseOp::Fault => {
                if in_flight.take().is_some() {
                    word = lease::faulted_at(word, now);
                    reference.fault(now);
                    // The fault's own pause replaces the pace (a retry, counted as one).
                    paced_until = 0;
                    calls.retries += 1;
                }
            }
            LeaseOp::Collect => {
                let claimed = lease::collect(word, now);
                assert_eq!(
                    claimed.is_some(),
                    reference.collect(now),
                    "op {i} at {now}: collect from {word:#x}"
                );
                if let Some(next) = claimed {
                    assert!(lease::in_debt(word), "op {i}: collected without a debt");
                    assert!(
                        now >= paced_until,
                        "op {i}: a debt collected {} ms before the pace has passed",
                        paced_until - now
                    );
                    word = next;
                    queued = true;
                    calls.retries += u64::from(in_flight.is_some());
                }
            }
            LeaseOp::Redis { up: next } => up = next,
            LeaseOp::Reclaim => {
                let idle = lease::idle(word, now);
                assert_eq!(idle, reference.idle(now), "op {i} at {now}: idle {word:#x}");
                if idle {
                    assert!(!lease::in_debt(word), "op {i}: reclaimed in debt");
                    // A request still on the ring or in flight (a duplicate of one already
                    // answered) stays there: the thread serves the key's new entry then.
                    word = lease::FRESH;
                    reference = RefLease::new(cap);
                }
            }
        }
        // The word says what the reference says.
        assert_eq!(
            (
                lease::signed_balance(word),
                lease::pending(word),
                lease::faulted(word),
                lease::exhausted(word),
                lease::lease_size(word, cap),
            ),
            (
                reference.bal,
                reference.pending,
                reference.faulted,
                reference.exhausted,
                reference.lease_size(),
            ),
            "op {i} {op:?} at {now}: word {word:#x}, reference {reference:?}"
        );
        // The balance stays in its range, lease_cap wide.
        assert!(
            (-1..i64::from(cap)).contains(&reference.bal),
            "op {i}: balance {} outside [-1, {}]",
            reference.bal,
            cap - 1
        );
        // No token from nowhere: what was spent beyond what was granted is the debt.
        let ahead = spent - granted;
        assert_eq!(
            ahead, -reference.bal,
            "op {i}: spent {spent}, granted {granted}"
        );
        assert!(ahead <= 1, "op {i}: {ahead} tokens spent beyond the grants");
        // Over every interval ending here: spent − granted within it ≤ cap.
        assert!(
            ahead - lowest <= i64::from(cap),
            "op {i}: an interval spent {} beyond its grants (cap {cap})",
            ahead - lowest
        );
        lowest = lowest.min(ahead);
        // Calls by the budget, not by the decisions: each lease is the answer of one call
        // and may be followed by one refused call; every further refused call waited a
        // pace (at least `pace_min`) spent drained since the refusal before it; plus the
        // first call, one still in flight, and the retries, each of which may be refused
        // once more.
        let bound = 2 * calls.leases + 2 + calls.drained_ms / pace_min + 2 * calls.retries;
        assert!(
            calls.sent <= bound,
            "op {i} at {now}: {} calls > 2 × {} leases + 2 + {} ms drained / {pace_min} ms \
             + 2 × {} retries = {bound}",
            calls.sent,
            calls.leases,
            calls.drained_ms,
            calls.retries
        );
    }
}
