//! Loom model of the fleet's ring and lease-thread handoff: deciding threads push requests on
//! the real ring (`crate::fleet_ring`, two slots) while the lease thread drains it and credits
//! grants through its core (`crate::fleet_worker_core`), the words in atomics CAS'd with the
//! table's orderings (`admit::fleet_worker_loom`).
//!
//! Over every interleaving it checks: no token granted twice (per key, the final balance is
//! exactly what Redis granted minus what decisions took, a decision taking the last token
//! under the grant's CAS included); no request lost for good (a request
//! the thread never saw, because the push's store landed after the drain passed its slot, is
//! asked again by the key's next decision once the request timed out); no entry in debt for
//! ever (a debt whose request the drain missed is taken into the debts by the next sweep and
//! collected without its identity); and no entry left in debt (after the last turn, every
//! grant in full, nothing is owed).

use admit::fleet_worker_loom::{Cells, Ring, Worker};
use loom::sync::Arc;
use loom::thread;

const CAP: u32 = 4;
const NOW_MS: u64 = 1_000;
/// Past `lease::REQUEST_TIMEOUT_MS` (250 ms): a decision may ask again.
const RETRY_MS: u64 = NOW_MS + 250;

/// Redis with room for everything: every request granted in full.
fn grant_all(_: u64, asked: u32) -> (u64, u64) {
    (u64::from(asked), 0)
}

/// Two decisions on `keys` race one turn of the lease thread; then the main thread (the
/// thread's later turns, and each key's decision after the timeout) finishes the history.
fn race(keys: [u64; 2]) {
    loom::model(move || {
        let cells = Arc::new(Cells::new(2));
        let ring = Arc::new(Ring::new(2));
        let deciders: Vec<_> = keys
            .iter()
            .map(|&key| {
                let (cells, ring) = (Arc::clone(&cells), Arc::clone(&ring));
                thread::spawn(move || (key, cells.decide(&ring, key, NOW_MS, CAP)))
            })
            .collect();
        let lease_thread = {
            let (cells, ring) = (Arc::clone(&cells), Arc::clone(&ring));
            thread::spawn(move || {
                let mut worker = Worker::new(2, CAP);
                let served = worker.turn(&cells, &ring, NOW_MS, grant_all);
                (worker, served)
            })
        };
        let decisions: Vec<(u64, (bool, bool))> =
            deciders.into_iter().map(|h| h.join().unwrap()).collect();
        let (mut worker, mut served) = lease_thread.join().unwrap();
        // The next turn takes what was pushed after the first drain.
        served.extend(worker.turn(&cells, &ring, NOW_MS, grant_all));
        let mut taken = [0i64; 3];
        for &(key, (took, _)) in &decisions {
            taken[key as usize] += i64::from(took);
        }
        // A request the thread never saw: its word is still pending; the key's next decision
        // after the timeout asks again, and the turn after serves it.
        for key in [1u64, 2] {
            let asked = decisions
                .iter()
                .any(|&(k, (_, request))| k == key && request);
            let seen = served.iter().any(|&(k, _, _)| k == key);
            if asked && !seen {
                let (took, request) = cells.decide(&ring, key, RETRY_MS, CAP);
                assert!(request, "key {key}: a lost request is never asked again");
                taken[key as usize] += i64::from(took);
                served.extend(worker.turn(&cells, &ring, RETRY_MS, grant_all));
                assert!(
                    served.iter().any(|&(k, _, _)| k == key),
                    "key {key}: asked again and still not served: {served:?}"
                );
            }
        }
        for key in [1u64, 2] {
            let granted: i64 = served
                .iter()
                .filter(|&&(k, _, _)| k == key)
                .map(|&(_, _, g)| i64::from(g))
                .sum();
            let word = cells.word(key);
            let balance = admit::fleet_lease_loom::signed_balance(word);
            // No token granted twice, none lost: the balance is grants minus admissions.
            assert_eq!(
                balance,
                granted - taken[key as usize],
                "key {key}: word {word:#x}, served {served:?}, decisions {decisions:?}"
            );
            // Nothing left owed, and the balance in range.
            assert!(
                (0..i64::from(CAP)).contains(&balance),
                "key {key}: word {word:#x} left in debt or out of range"
            );
        }
    });
}

/// Two cold identities, each borrowing its provisional token and pushing its first request,
/// race the lease thread's drain and grants.
#[test]
fn two_cold_identities_race_the_lease_thread() {
    race([1, 2]);
}

/// One cold identity deciding twice at once: one borrows and asks, the other is refused
/// (nothing held, a request out) without a second request; the grant pays the debt once.
#[test]
fn one_cold_identity_twice_races_the_lease_thread() {
    race([1, 1]);
}

/// A warm identity holding its last token with a request on the ring: one decision takes
/// the token while the lease thread drains the ring and lands the grant, which must count
/// the token taken under it (the grant's CAS re-judges the word the decision left).
#[test]
fn a_decision_takes_the_last_token_under_the_grant() {
    loom::model(|| {
        let cells = Arc::new(Cells::new(1));
        let ring = Arc::new(Ring::new(2));
        let mut worker = Worker::new(1, CAP);
        let (mut taken, mut granted) = (0i64, 0i64);
        // Borrow and ask; a grant of 2 pays the debt and leaves 1; one more decision leaves 0
        // and asks; a grant of 2 leaves 2 (the lease grows to 4, its low-water mark 2); one
        // more decision takes one and asks again: 1 held, PENDING, the key on the ring.
        for _ in 0..3 {
            let (took, _) = cells.decide(&ring, 1, NOW_MS, CAP);
            taken += i64::from(took);
            if granted < 4 {
                for (_, _, g) in worker.turn(&cells, &ring, NOW_MS, grant_all) {
                    granted += i64::from(g);
                }
            }
        }
        assert_eq!(
            admit::fleet_lease_loom::signed_balance(cells.word(1)),
            granted - taken
        );
        let decider = {
            let (cells, ring) = (Arc::clone(&cells), Arc::clone(&ring));
            thread::spawn(move || cells.decide(&ring, 1, NOW_MS, CAP))
        };
        let served = worker.turn(&cells, &ring, NOW_MS, grant_all);
        let (took, _) = decider.join().unwrap();
        taken += i64::from(took);
        for (_, _, g) in served
            .iter()
            .chain(&worker.turn(&cells, &ring, NOW_MS, grant_all))
        {
            granted += i64::from(*g);
        }
        let word = cells.word(1);
        assert_eq!(
            admit::fleet_lease_loom::signed_balance(word),
            granted - taken,
            "word {word:#x}: a token taken under the grant was counted twice or lost"
        );
    });
}

/// A cold identity borrows its provisional token and pushes its request while the lease
/// thread drains; if the drain missed the request (the push's store landed after it passed
/// the slot) and the identity never returns, the next sweep takes the debt by the key the
/// borrowing decision recorded, and a turn collects it: nothing is left owed.
#[test]
fn a_debt_the_drain_missed_is_collected_by_the_sweep() {
    /// The first sweep is due `SWEEP_EVERY_MS` (2 s) after the thread started, at 0.
    const SWEEP_MS: u64 = 2_000;
    loom::model(|| {
        let cells = Arc::new(Cells::new(1));
        let ring = Arc::new(Ring::new(2));
        let decider = {
            let (cells, ring) = (Arc::clone(&cells), Arc::clone(&ring));
            thread::spawn(move || cells.decide(&ring, 1, NOW_MS, CAP))
        };
        let mut worker = Worker::new(1, CAP);
        let mut served = worker.turn(&cells, &ring, NOW_MS, grant_all);
        let (took, _) = decider.join().unwrap();
        assert!(took, "a cold identity's first decision borrows");
        if served.is_empty() {
            // Missed: no decision of this identity follows. The sweep finds the debt.
            worker.begin(&cells, SWEEP_MS);
            assert!(
                worker.owes(1),
                "word {:#x}: a debt the drain missed is held nowhere after a sweep",
                cells.word(1)
            );
            // The ring still holds the late push: this turn drains it or collects the debt,
            // one call either way (the debt's claim finds the request already answered).
            served = worker.turn(&cells, &ring, SWEEP_MS, grant_all);
            served.extend(worker.turn(&cells, &ring, SWEEP_MS, grant_all));
        }
        let word = cells.word(1);
        let granted: i64 = served.iter().map(|&(_, _, g)| i64::from(g)).sum();
        assert_eq!(
            admit::fleet_lease_loom::signed_balance(word),
            granted - 1,
            "word {word:#x}: served {served:?}"
        );
        assert!(
            admit::fleet_lease_loom::signed_balance(word) >= 0,
            "word {word:#x}: still in debt after the sweep and a turn"
        );
    });
}
