//! Loom models of the fleet's lease word: deciding threads racing the lease thread's grant on
//! one word.
//!
//! The word lives in an `AtomicU64` here, and each side applies the crate's own step functions
//! (`admit::fleet_lease_loom`, the pure functions of `src/fleet/lease.rs`) in a CAS loop with
//! the table's orderings (AcqRel on success, Acquire on failure), as `Table::update_member`
//! and `Table::update` do; the table's slot protocol itself is modelled by the limiter's
//! models. The lease thread reads the word, sizes its request from it, and adds the grant with
//! one CAS, as `worker::serve` does.
//!
//! Each model checks, over every interleaving: no token is spent twice (the final balance is
//! exactly what was granted minus what was admitted, so no admission and no grant is lost);
//! the debt of the provisional token is taken at most once and paid exactly once (the grant
//! lands on a word owing it, or on one already paid, never twice); no decision admits while
//! the word is in debt; and the balance stays in `[−1, cap − 1]`.

use admit::fleet_lease_loom as lease;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const CAP: u32 = 4;
const NOW_MS: u64 = 1_000;

/// What one decision saw and did.
#[derive(Clone, Copy, Debug)]
struct Decision {
    took: bool,
    borrowed: bool,
    /// The word it committed from was in debt.
    from_debt: bool,
}

/// One decision: a CAS loop applying `decide` to the word read.
fn decide(word: &AtomicU64) -> Decision {
    // Acquire: as a table slot load, see the latest committed value.
    let mut seen = word.load(Ordering::Acquire);
    loop {
        let (next, took, borrowed, _request) = lease::decide(seen, NOW_MS, CAP, true);
        if next == seen {
            return Decision {
                took,
                borrowed,
                from_debt: lease::signed_balance(seen) < 0,
            };
        }
        // AcqRel/Acquire: the table's CAS on a member's word.
        match word.compare_exchange(seen, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                return Decision {
                    took,
                    borrowed,
                    from_debt: lease::signed_balance(seen) < 0,
                }
            }
            Err(now) => seen = now,
        }
    }
}

/// The lease thread: waits until a request is pending, sizes it from the word it read, and
/// adds Redis's full grant with one CAS loop. Returns (asked, the balance the grant landed on).
fn lease_thread(word: &AtomicU64) -> (u32, i64) {
    let read = loop {
        // Acquire: as above.
        let w = word.load(Ordering::Acquire);
        if lease::pending(w) {
            break w;
        }
        thread::yield_now();
    };
    let asked = lease::request_size(read, CAP);
    // Acquire: as above.
    let mut seen = word.load(Ordering::Acquire);
    loop {
        let next = lease::granted(seen, asked, asked, NOW_MS, CAP);
        // AcqRel/Acquire: the table's CAS on a member's word.
        match word.compare_exchange(seen, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return (asked, lease::signed_balance(seen)),
            Err(now) => seen = now,
        }
    }
}

/// Two decisions race the lease thread on a word starting at `start`.
fn race(start: u64) {
    loom::model(move || {
        let word = Arc::new(AtomicU64::new(start));
        let deciders: Vec<_> = (0..2)
            .map(|_| {
                let word = Arc::clone(&word);
                thread::spawn(move || decide(&word))
            })
            .collect();
        let worker = {
            let word = Arc::clone(&word);
            thread::spawn(move || lease_thread(&word))
        };
        let decisions: Vec<Decision> = deciders.into_iter().map(|h| h.join().unwrap()).collect();
        let (asked, landed_on) = worker.join().unwrap();
        let end = word.load(Ordering::Acquire);

        let took = decisions.iter().filter(|d| d.took).count() as i64;
        let borrowed = decisions.iter().filter(|d| d.borrowed).count() as i64;
        // No admission while in debt.
        assert!(
            decisions.iter().all(|d| !(d.took && d.from_debt)),
            "{decisions:?}"
        );
        // The provisional token at most once.
        assert!(borrowed <= 1, "{decisions:?}");
        // No token spent twice, no grant lost: the end is the start plus the grant minus the
        // admissions, exactly.
        let begin = lease::signed_balance(start);
        assert_eq!(
            lease::signed_balance(end),
            begin + i64::from(asked) - took,
            "start {start:#x}, end {end:#x}, asked {asked}, {decisions:?}"
        );
        // The debt paid exactly once: the grant landed on a word owing at most one, and
        // nothing is owed at the end (the grant was at least 1).
        assert!(landed_on >= -1 && lease::signed_balance(end) >= 0);
        // The balance stays within its range.
        assert!((-1..i64::from(CAP)).contains(&lease::signed_balance(end)));
        if borrowed == 1 {
            assert!(begin == 0, "a provisional token from a non-empty word");
        }
    });
}

/// A cold identity: the first decision borrows and asks; the second is refused until the
/// grant lands, then takes a leased token. The grant pays the debt wherever it lands.
#[test]
fn two_cold_decisions_race_the_first_grant() {
    race(lease::FRESH);
}

/// A warm word holding its last token with a request pending (the low-water request of the
/// decision that left it there): one decision takes it, the other races the grant.
#[test]
fn two_decisions_race_a_grant_on_the_last_token() {
    // Fresh: borrow; a grant of 3 pays the debt and leaves 2, the lease grows to 2 and then
    // (a second full grant) to 4, whose low-water mark is 2.
    let (w, ..) = lease::decide(lease::FRESH, 0, CAP, true);
    let w = lease::granted(w, 3, 3, 0, CAP);
    let (w, _, _, request) = lease::decide(w, 0, CAP, true);
    assert!(!request && lease::signed_balance(w) == 1);
    let (w, _, _, request) = lease::decide(w, 0, CAP, true);
    assert!(request && lease::signed_balance(w) == 0);
    let w = lease::granted(w, 2, 2, 0, CAP);
    let (w, took, _, request) = lease::decide(w, 0, CAP, true);
    assert!(took && request && lease::signed_balance(w) == 1 && lease::pending(w));
    race(w);
}

/// A word spent to 0 with its request pending: no decision borrows (a request is out), both
/// race the grant for its tokens.
#[test]
fn two_decisions_race_a_grant_on_an_empty_pending_word() {
    let (w, ..) = lease::decide(lease::FRESH, 0, CAP, true);
    let w = lease::granted(w, 2, 2, 0, CAP);
    let (w, took, _, request) = lease::decide(w, 0, CAP, true);
    assert!(took && request && lease::signed_balance(w) == 0 && lease::pending(w));
    race(w);
}
