//! Loom models of the bounded entry table under the keyed limiter: racing first charges,
//! charges racing reclamation, slot reuse racing a stale charge, and overflow at the cap.
//!
//! Tables are tiny (two or four slots, the window covering all of them) and the SipHash keys
//! fixed, so every execution places keys identically.

use admit::{BucketConfig, Limiter, ManualClock, Refunded};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn limiter(cap: usize, burst: u32) -> Arc<Limiter<ManualClock>> {
    let config = BucketConfig::new(burst, Duration::from_millis(10)).unwrap();
    Arc::new(
        Limiter::builder()
            .cap(cap)
            .geometry(2, 4)
            .hash_keys(7, 11)
            .build_with_clock([config], ManualClock::starting_at(1_000 * MS))
            .unwrap(),
    )
}

fn spawn_charge(
    l: &Arc<Limiter<ManualClock>>,
    id: &'static [u8],
    now: u64,
) -> thread::JoinHandle<bool> {
    let l = l.clone();
    thread::spawn(move || l.try_acquire_at(id, 0, now).is_ok())
}

/// Two threads first-charging the same absent identity leave exactly one entry, charged twice
/// (burst 2: both granted, nothing left) — never two entries each charged once.
#[test]
fn two_first_charges_of_one_key() {
    loom::model(|| {
        let l = limiter(2, 2);
        let a = spawn_charge(&l, b"x", 0);
        let b = spawn_charge(&l, b"x", 0);
        assert!(a.join().unwrap());
        assert!(b.join().unwrap());
        assert_eq!(l.len(), 1, "two live entries for one key");
        assert_eq!(l.entry_tokens_at(b"x", 0, 0), Some(0));
        assert!(
            l.try_acquire_at(b"x", 0, 0).is_err(),
            "the budget was doubled"
        );
    });
}

/// A charge racing the reclamation of its (full) entry either lands on the live entry or
/// re-inserts a fresh one: never on the removed slot, and the entry is never lost while drained.
#[test]
fn a_charge_racing_the_reclamation_of_its_entry() {
    loom::model(|| {
        let l = limiter(2, 2);
        assert!(l.try_acquire_at(b"x", 0, 0).is_ok());
        // At 20 ms the entry is full again.
        let charge = spawn_charge(&l, b"x", 20 * MS);
        let sweep = {
            let l = l.clone();
            thread::spawn(move || l.reclaim_full_at(20 * MS).unwrap())
        };
        assert!(charge.join().unwrap());
        let freed = sweep.join().unwrap();
        assert!(freed <= 1);
        assert_eq!(l.len(), 1);
        assert_eq!(
            l.entry_tokens_at(b"x", 0, 20 * MS),
            Some(1),
            "the charge was lost"
        );
    });
}

/// Cap 1: x's full entry is reclaimed and its slot reused by y while a stale charge of x is in
/// flight. The stale charge never lands on y's entry: y's bucket shows exactly y's own charge.
#[test]
fn slot_reuse_by_another_key_racing_a_stale_charge() {
    loom::model(|| {
        let l = limiter(1, 2);
        assert!(l.try_acquire_at(b"x", 0, 0).is_ok());
        let stale = spawn_charge(&l, b"x", 20 * MS);
        let other = spawn_charge(&l, b"y", 20 * MS);
        assert!(stale.join().unwrap());
        assert!(other.join().unwrap());
        assert_eq!(l.len(), 1);
        let x = l.entry_tokens_at(b"x", 0, 20 * MS);
        let y = l.entry_tokens_at(b"y", 0, 20 * MS);
        // Whoever holds the one entry was charged exactly once; the other went to overflow.
        match (x, y) {
            (Some(1), None) | (None, Some(1)) => {}
            other => panic!("entries after the race: {other:?}"),
        }
        assert_eq!(l.overflow_charges(0), Some(1));
    });
}

/// Cap 1 with a full entry: two new identities race; one reclaims and gets the entry, the
/// other falls through to the overflow bucket, which pays. Never both on entries, never
/// admitted without a bucket.
#[test]
fn charges_at_the_cap_fall_through_to_overflow_while_another_reclaims() {
    loom::model(|| {
        let l = limiter(1, 1);
        assert!(l.try_acquire_at(b"x", 0, 0).is_ok());
        let a = spawn_charge(&l, b"a", 10 * MS);
        let b = spawn_charge(&l, b"b", 10 * MS);
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        assert!(a && b, "the overflow bucket holds a full burst of 1");
        assert_eq!(l.len(), 1);
        assert_eq!(l.overflow_charges(0), Some(1));
        assert!(
            l.try_acquire_at(b"c", 0, 10 * MS).is_err(),
            "the overflow bucket is spent"
        );
    });
}

/// A refund racing a later charge of the same entry: burst 1 per 10 ms, a charge at 1,000 ms
/// (A), then one thread charges at 1,010 ms (full again there) while another refunds A at
/// A's reading. A's token refilled into the cap by 1,010 ms, so a second charge at 1,010 ms
/// after both is refused in every interleaving: no reading sees two grants of a burst of 1.
#[test]
fn a_refund_racing_a_later_charge_grants_no_token_twice() {
    loom::model(|| {
        let l = limiter(2, 1);
        let a = l.try_acquire_at(&b"a"[..], 0, 1_000 * MS).unwrap();
        let later = spawn_charge(&l, b"a", 1_010 * MS);
        let refund = {
            let l = l.clone();
            thread::spawn(move || l.refund_at(a, 1, 1_000 * MS).unwrap())
        };
        let refunded = refund.join().unwrap();
        assert!(matches!(
            refunded,
            Refunded::Exact { tokens: 1 } | Refunded::Void
        ));
        let first = later.join().unwrap();
        let second = l.try_acquire_at(&b"a"[..], 0, 1_010 * MS).is_ok();
        assert!(
            u8::from(first) + u8::from(second) <= 1,
            "two grants at 1,010 ms of a burst-1 entry"
        );
    });
}

/// Charging by outcome racing a charge of the same key: burst 3 per 10 ms, one token taken at
/// 1,000 ms (so the entry exists: racing first charges may fall to the overflow bucket, see
/// `limiter`), then two threads each check (taking nothing) and, if admitted, debit one token
/// (a failed login), while a third charges one. In every interleaving no debit is lost or
/// counted twice and no check takes anything: the entry owes exactly the debits made plus the
/// charge if granted, down to empty, and a debit says it was cut exactly when it found the
/// bucket empty.
#[test]
fn checks_and_debits_racing_a_take_lose_no_debit() {
    loom::model(|| {
        let l = limiter(2, 3);
        assert!(l.try_acquire_at(&b"a"[..], 0, 1_000 * MS).is_ok());
        let failures: Vec<_> = (0..2)
            .map(|_| {
                let l = l.clone();
                thread::spawn(move || {
                    if l.check_at(&b"a"[..], 0, 1, 1_000 * MS).is_err() {
                        return (0, 0);
                    }
                    let debit = l.debit_at(&b"a"[..], 0, 1, 1_000 * MS).unwrap();
                    assert!(!debit.via_overflow());
                    (1, u32::from(debit.cut()))
                })
            })
            .collect();
        let charge = spawn_charge(&l, b"a", 1_000 * MS);
        let (debits, cut) = failures
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0), |(d, c), (x, y)| (d + x, c + y));
        let charged = u32::from(charge.join().unwrap());
        assert_eq!(l.overflow_charges(0), Some(0));
        assert!(
            1 + debits + charged >= 3,
            "two tokens left refused a request"
        );
        // Only a debit beyond empty is cut: the third of three tokens spent is the last.
        assert_eq!(
            cut,
            (1 + debits + charged).saturating_sub(3),
            "{debits} debits, {charged} charged"
        );
        let owed = 1 + debits + charged - cut;
        let peek = l.peek_at(&b"a"[..], 0, 1, 1_000 * MS).unwrap();
        assert_eq!(
            peek.available(),
            3 - owed,
            "{debits} debits, {charged} charged"
        );
        let wait = Duration::from_millis(u64::from(owed.saturating_sub(2)) * 10);
        assert_eq!(peek.wait(), wait, "{debits} debits, {charged} charged");
    });
}
