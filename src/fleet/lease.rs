//! The lease word: what one process holds for one (identity, class), in one table value.
//!
//! ```text
//!  41            28 27     23    22      21      20     19                        0
//! +----------------+---------+---------+-------+-------+---------------------------+
//! |  STAMP (14 b)  | EXP (5) |EXHAUSTED| FAULT |PENDING|    BALANCE (20 bits)      |
//! +----------------+---------+---------+-------+-------+---------------------------+
//! ```
//!
//! * `BALANCE`: leased tokens not yet spent. Only a decision takes from it (one CAS, −1);
//!   only the worker adds to it, and only what Redis granted for a request sized so that the
//!   balance stays `≤ lease_cap` (invariant 1 in [`crate::fleet`]).
//! * `PENDING`: a lease request is queued or in flight; no second one is made until it is
//!   answered or `STAMP` passes (a lost request is retried, never waited on for ever).
//! * `FAULT`: Redis answered this key with something unexpected (a wrong type, a value that
//!   is not a bucket); decisions for it follow the fail policy until a request succeeds.
//! * `EXHAUSTED`: Redis granted nothing to the last request (the fleet budget is spent);
//!   refusals say so, and `STAMP` holds the instant Redis named.
//! * `EXP`: the next lease asks for `2^EXP` tokens (capped): 1 for a cold identity, doubling
//!   on every lease granted in full, halving on every partial one.
//! * `STAMP`: milliseconds of the injected clock modulo 2^14: the instant before which no new
//!   request is made (a request's timeout, or the wait Redis returned with a refusal).

/// Bits of the balance.
pub(crate) const BALANCE_BITS: u32 = 20;
/// The largest balance a word holds (above every allowed lease cap).
pub(crate) const BALANCE_MAX: u64 = (1 << BALANCE_BITS) - 1;
/// The largest lease cap the builder accepts.
pub(crate) const MAX_LEASE_CAP: u32 = 1 << 19;
const PENDING: u64 = 1 << 20;
const FAULT: u64 = 1 << 21;
const EXHAUSTED: u64 = 1 << 22;
const EXP_SHIFT: u32 = 23;
const EXP_MASK: u64 = 0x1F;
const STAMP_SHIFT: u32 = 28;
const STAMP_MASK: u64 = (1 << 14) - 1;
/// A stamp is "reached" when now is at or past it by less than half the stamp ring (8.19 s).
const STAMP_HALF: u64 = 1 << 13;
/// The longest a stamp may lie ahead: waits from Redis are clamped to it.
pub(crate) const MAX_DEFER_MS: u64 = 4_000;
/// How long a request may stay unanswered before a decision asks again.
pub(crate) const REQUEST_TIMEOUT_MS: u64 = 250;

/// The value of a fresh entry: nothing leased, nothing pending, the smallest lease next.
pub(crate) const FRESH: u64 = 0;

/// Tokens held.
pub(crate) fn balance(word: u64) -> u64 {
    word & BALANCE_MAX
}

/// Whether a request is outstanding.
pub(crate) fn pending(word: u64) -> bool {
    word & PENDING != 0
}

/// Whether Redis answered this key unexpectedly last time.
pub(crate) fn faulted(word: u64) -> bool {
    word & FAULT != 0
}

/// Whether Redis granted nothing to the last request.
pub(crate) fn exhausted(word: u64) -> bool {
    word & EXHAUSTED != 0
}

/// Milliseconds until the word's stamp (0 once reached).
pub(crate) fn defer_ms(word: u64, now_ms: u64) -> u64 {
    if stamp_reached(word, now_ms) {
        0
    } else {
        ((word >> STAMP_SHIFT) & STAMP_MASK).wrapping_sub(now_ms) & STAMP_MASK
    }
}

fn exp(word: u64) -> u32 {
    // At most 31: the mask keeps five bits.
    u32::try_from((word >> EXP_SHIFT) & EXP_MASK).unwrap_or(0)
}

/// The next lease's size: `2^EXP`, capped.
pub(crate) fn lease_size(word: u64, cap: u32) -> u32 {
    1u32.checked_shl(exp(word))
        .unwrap_or(u32::MAX)
        .min(cap)
        .max(1)
}

/// Below this balance a decision asks for more: half the next lease, at least 1.
pub(crate) fn low_water(word: u64, cap: u32) -> u64 {
    u64::from(lease_size(word, cap) / 2).max(1)
}

fn stamp_reached(word: u64, now_ms: u64) -> bool {
    let stamp = (word >> STAMP_SHIFT) & STAMP_MASK;
    (now_ms.wrapping_sub(stamp) & STAMP_MASK) < STAMP_HALF
}

fn with_stamp(word: u64, until_ms: u64) -> u64 {
    (word & !(STAMP_MASK << STAMP_SHIFT)) | ((until_ms & STAMP_MASK) << STAMP_SHIFT)
}

fn with_exp(word: u64, exp: u32) -> u64 {
    (word & !(EXP_MASK << EXP_SHIFT)) | ((u64::from(exp) & EXP_MASK) << EXP_SHIFT)
}

/// Whether a decision may queue a request now.
fn may_request(word: u64, now_ms: u64) -> bool {
    !pending(word) || stamp_reached(word, now_ms)
}

/// What one decision does to a lease word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// The word to store (equal to the one read when nothing changes).
    pub(crate) next: u64,
    /// A leased token was taken: admitted.
    pub(crate) took: bool,
    /// A lease request must be queued (`PENDING` was set by this step).
    pub(crate) request: bool,
}

/// One decision: take a leased token if there is one, and ask for more below the low-water
/// mark (once per outstanding request).
pub(crate) fn decide(word: u64, now_ms: u64, cap: u32) -> Step {
    let bal = balance(word);
    let took = bal > 0;
    let left = bal.saturating_sub(1);
    let mut next = if took { word - 1 } else { word };
    let request = left < low_water(word, cap) && may_request(word, now_ms);
    if request {
        next = with_stamp(next | PENDING, now_ms.wrapping_add(REQUEST_TIMEOUT_MS));
    }
    Step {
        next,
        took,
        request,
    }
}

/// How many tokens the worker asks Redis for, given the word it read: the next lease's size,
/// but never more than would lift the balance above `cap` (0: nothing to ask).
pub(crate) fn request_size(word: u64, cap: u32) -> u32 {
    let room = u64::from(cap).saturating_sub(balance(word));
    u32::try_from(room)
        .unwrap_or(u32::MAX)
        .min(lease_size(word, cap))
}

/// The word after Redis answered a request for `asked` tokens with `granted` and a wait.
pub(crate) fn granted(
    word: u64,
    asked: u32,
    granted: u32,
    wait_ms: u64,
    now_ms: u64,
    cap: u32,
) -> u64 {
    let bal = (balance(word) + u64::from(granted)).min(BALANCE_MAX);
    let mut next = (word & !BALANCE_MAX & !FAULT & !EXHAUSTED) | bal;
    let max_exp = 31 - cap.max(1).leading_zeros();
    let e = exp(word);
    next = if granted >= asked && asked > 0 {
        with_exp(next, (e + 1).min(max_exp))
    } else if granted < asked {
        with_exp(next, e.saturating_sub(1))
    } else {
        next
    };
    if granted == 0 && asked > 0 {
        // Redis has nothing now: stay pending until the wait it named has passed, so a hot
        // refused identity costs one Redis call per wait, not one per decision.
        with_stamp(
            next | PENDING | EXHAUSTED,
            now_ms.wrapping_add(wait_ms.clamp(1, MAX_DEFER_MS)),
        )
    } else {
        next & !PENDING
    }
}

/// The word after Redis answered unexpectedly: `FAULT` set, the next try after a pause.
pub(crate) fn faulted_at(word: u64, now_ms: u64) -> u64 {
    with_stamp(
        word | FAULT | PENDING,
        now_ms.wrapping_add(REQUEST_TIMEOUT_MS),
    )
}

/// Whether a table entry may be reclaimed: nothing held, nothing outstanding.
pub(crate) fn idle(word: u64) -> bool {
    balance(word) == 0 && !pending(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cold_word_asks_for_one_token_and_admits_nothing() {
        let step = decide(FRESH, 0, 256);
        assert!(!step.took && step.request);
        assert_eq!(request_size(step.next, 256), 1);
        // A second decision while pending makes no second request.
        let again = decide(step.next, 10, 256);
        assert!(!again.took && !again.request);
        // After the timeout it asks again (a lost request is not waited on for ever).
        assert!(decide(step.next, REQUEST_TIMEOUT_MS, 256).request);
    }

    #[test]
    fn the_balance_never_exceeds_the_cap() {
        // Invariant 1: a request is sized against the balance the worker read, and the
        // balance only falls meanwhile, so balance + grant <= cap.
        let cap = 64;
        let mut word = FRESH;
        for round in 0..40u64 {
            let step = decide(word, round, cap);
            word = step.next;
            let asked = request_size(word, cap);
            word = granted(word, asked, asked, 0, round, cap);
            assert!(
                balance(word) <= u64::from(cap),
                "round {round}: {}",
                balance(word)
            );
        }
        assert_eq!(
            lease_size(word, cap),
            64,
            "a hot identity's lease grew to the cap"
        );
    }

    #[test]
    fn a_partial_grant_halves_the_next_lease_and_a_refusal_defers() {
        let word = with_exp(FRESH | PENDING, 5);
        let after = granted(word, 32, 10, 0, 0, 256);
        assert_eq!((balance(after), lease_size(after, 256)), (10, 16));
        assert!(!pending(after));
        let refused = granted(word, 32, 0, 100, 1_000, 256);
        assert!(pending(refused) && exhausted(refused));
        assert_eq!(defer_ms(refused, 1_040), 60);
        assert!(
            !decide(refused, 1_050, 256).request,
            "before the wait: no call"
        );
        assert!(decide(refused, 1_100, 256).request, "after it: ask again");
    }

    #[test]
    fn stamps_wrap() {
        let word = with_stamp(PENDING, (1 << 14) - 5);
        assert!(!stamp_reached(word, (1 << 14) - 6));
        assert!(stamp_reached(word, (1 << 14) + 3));
    }
}
