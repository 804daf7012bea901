//! Charging by outcome: checks and debits against the token-bucket rules.

use super::*;
use crate::clock::ManualClock;
use proptest::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn limiter(burst: u32, interval_ms: u64, cap: usize) -> Limiter<ManualClock> {
    let config = BucketConfig::new(burst, Duration::from_millis(interval_ms)).unwrap();
    Limiter::builder()
        .cap(cap)
        .build_with_clock([config], ManualClock::new())
        .unwrap()
}

#[test]
fn a_check_takes_nothing_and_a_debit_is_a_take_that_cannot_be_refused() {
    let l = limiter(4, 10, 64);
    for _ in 0..5 {
        assert!(l.check_at("a", 0, 1, 0).is_ok(), "a check takes nothing");
    }
    assert!(l.check_at("a", 0, 5, 0).is_err(), "more than the burst");
    let debit = l.debit_at("a", 0, 3, 0).unwrap();
    assert!(!debit.cut());
    assert_eq!(debit.wait(), Duration::ZERO, "one token left");
    let debit = l.debit_at("a", 0, 2, 0).unwrap();
    // 5 tokens of a burst of 4: empty, the fifth forgiven and said so.
    assert!(debit.cut());
    assert_eq!(debit.wait(), Duration::from_millis(10));
    l.clock().set_ns(20 * MS);
    let refused = l.check_at("a", 0, 2, 5 * MS).unwrap_err();
    assert_eq!(refused.limited().unwrap().wait(), Duration::from_millis(15));
    assert!(l.try_acquire_at("a", 0, 9 * MS).is_err());
    assert!(l.check_at("a", 0, 1, 10 * MS).is_ok());
    assert!(l.try_acquire_at("a", 0, 10 * MS).is_ok());
    assert!(l.debit_at("a", 0, 0, 10 * MS).unwrap().wait() > Duration::ZERO);
}

#[test]
fn a_debit_at_a_lagging_reading_never_moves_a_bucket_earlier() {
    let l = limiter(2, 10, 64);
    l.clock().set_ns(100 * MS);
    let debit = l.debit_at("a", 0, 2, 100 * MS).unwrap();
    assert_eq!(debit.wait(), Duration::from_millis(10), "empty at 100 ms");
    // At a reading 50 ms behind, an empty bucket would be full at 70 ms: the state stays at
    // 120 ms, and the debit is forgiven (the bucket is as empty as it can be).
    let lagging = l.debit_at("a", 0, 1, 50 * MS).unwrap();
    assert!(lagging.cut());
    assert_eq!(
        lagging.wait(),
        Duration::from_millis(60),
        "ready at 110 ms, as before"
    );
}

#[test]
fn a_debit_at_the_cap_lands_on_the_overflow_bucket() {
    let l = limiter(1, 10, 1);
    l.try_acquire_at("holder", 0, 0).unwrap();
    let debit = l.debit_at("newcomer", 0, 3, 0).unwrap();
    assert!(debit.via_overflow());
    assert!(debit.cut(), "3 tokens of a burst of 1");
    assert_eq!(debit.wait(), Duration::from_millis(10));
    let refused = l.check_at("other", 0, 1, 0).unwrap_err();
    assert!(
        refused.limited().unwrap().via_overflow(),
        "the overflow bucket owes"
    );
}

#[test]
fn a_cut_and_its_revert_keep_a_debit_owed() {
    let l = limiter(10, 10, 64);
    l.debit_at("a", 0, 10, 0).unwrap();
    let fast = BucketConfig::new(10, Duration::from_millis(10)).unwrap();
    let slow = BucketConfig::new(1, Duration::from_millis(1_000)).unwrap();
    l.set_config(0, slow).unwrap();
    l.set_config(0, fast).unwrap();
    // 10 tokens owed from a burst of 10: empty, the next token at 10 ms at the earliest.
    let refused = l.check_at("a", 0, 1, 0).unwrap_err();
    assert!(refused.limited().unwrap().wait() >= Duration::from_millis(10));
}

/// Failed logins on one key from 8 threads at once: each checks (taking nothing), fails or
/// succeeds, and debits only the failures. Whatever the interleaving, the key owes exactly the
/// failures that were debited (the burst holds them all), and no success.
#[test]
fn concurrent_outcomes_charge_every_failure_and_no_success() {
    let l = Arc::new(limiter(1_000, 10, 64));
    let failures = Arc::new(AtomicU32::new(0));
    let start = Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let (l, failures, start) = (Arc::clone(&l), Arc::clone(&failures), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for i in 0..200u32 {
                    if l.check_at("login", 0, 1, 0).is_err() {
                        continue;
                    }
                    let failed = (t + i) % 3 == 0;
                    if failed {
                        assert!(!l.debit_at("login", 0, 1, 0).unwrap().cut());
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let debited = failures.load(Ordering::Relaxed);
    assert_eq!(
        debited,
        (0..8u32)
            .map(|t| (0..200u32).filter(|i| (t + i) % 3 == 0).count() as u32)
            .sum::<u32>()
    );
    let peek = l.peek_at("login", 0, 1, 0).unwrap();
    assert_eq!(
        peek.available(),
        1_000 - debited,
        "{debited} failures debited"
    );
}

/// One step of a history driven through a limiter that checks and debits (`outcome`) and
/// one that charges (`charged`).
#[derive(Debug, Clone)]
enum Step {
    /// A request of `n` tokens: checked then debited on one, charged on the other.
    Request {
        id: u8,
        n: u32,
    },
    /// A failure of `n` tokens debited on both (the same work charged by its outcome).
    Debit {
        id: u8,
        n: u32,
    },
    Advance {
        ms: u64,
    },
    Back {
        ms: u64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..3, 1u32..4).prop_map(|(id, n)| Step::Request { id, n }),
        2 => (0u8..3, 1u32..12).prop_map(|(id, n)| Step::Debit { id, n }),
        2 => (0u64..40).prop_map(|ms| Step::Advance { ms }),
        1 => (0u64..30).prop_map(|ms| Step::Back { ms }),
    ]
}

proptest! {
    /// A check is refused exactly when the charge would be, with the same wait; a check that
    /// passed followed by a debit of the same `n` leaves the entry exactly as the charge does;
    /// a debit is never refused and both limiters agree after it.
    #[test]
    fn a_check_and_a_debit_are_a_charge_split_in_two(steps in prop::collection::vec(step(), 1..120)) {
        let outcome = limiter(3, 10, 4);
        let charged = limiter(3, 10, 4);
        let mut clock = 100 * MS;
        outcome.clock().set_ns(clock);
        charged.clock().set_ns(clock);
        let mut lag = 0;
        for (i, step) in steps.iter().enumerate() {
            let now = clock - lag;
            match *step {
                Step::Request { id, n } => {
                    let key = [id];
                    let checked = outcome.check_at(&key, 0, n, now);
                    let taken = charged.try_acquire_n_at(&key, 0, n, now);
                    match (&checked, &taken) {
                        (Ok(()), Ok(grant)) => {
                            prop_assert_eq!(grant.tokens(), n);
                            outcome.debit_at(&key, 0, n, now).unwrap();
                        }
                        (Err(a), Err(b)) => prop_assert_eq!(a, b, "step {}", i),
                        _ => prop_assert!(false, "step {}: check {:?}, charge {:?}", i, checked, taken),
                    }
                }
                Step::Debit { id, n } => {
                    let a = outcome.debit_at(&[id], 0, n, now).unwrap();
                    let b = charged.debit_at(&[id], 0, n, now).unwrap();
                    prop_assert_eq!(a, b, "step {}", i);
                }
                Step::Advance { ms } => {
                    clock += ms * MS;
                    outcome.clock().set_ns(clock);
                    charged.clock().set_ns(clock);
                    lag = 0;
                }
                Step::Back { ms } => lag = (ms * MS).min(clock),
            }
            for id in 0..3u8 {
                prop_assert_eq!(
                    outcome.peek_at(&[id], 0, 1, now).unwrap(),
                    charged.peek_at(&[id], 0, 1, now).unwrap(),
                    "step {}: id {}", i, id
                );
            }
        }
    }
}
