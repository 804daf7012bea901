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
    let l = limiter(2, 10, 64);
    for _ in 0..5 {
        assert!(l.check_at("a", 0, 1, 0).is_ok(), "a check takes nothing");
    }
    assert!(l.check_at("a", 0, 3, 0).is_err(), "more than the burst");
    let debit = l.debit_at("a", 0, 5, 0).unwrap();
    // 5 tokens from a burst of 2: 3 owed beyond empty, the next token at 40 ms.
    assert_eq!(debit.wait(), Duration::from_millis(40));
    l.clock().set_ns(40 * MS);
    let refused = l.check_at("a", 0, 1, 20 * MS).unwrap_err();
    assert_eq!(refused.limited().unwrap().wait(), Duration::from_millis(20));
    assert!(l.try_acquire_at("a", 0, 39 * MS).is_err());
    assert!(l.check_at("a", 0, 1, 40 * MS).is_ok());
    assert!(l.try_acquire_at("a", 0, 40 * MS).is_ok());
    assert!(l.debit_at("a", 0, 0, 40 * MS).unwrap().wait() > Duration::ZERO);
}

#[test]
fn a_debit_at_a_lagging_reading_never_moves_a_bucket_earlier() {
    // Microseconds, so that a debit reaches the unit's longest span (2^38 µs).
    let config = BucketConfig::new(1, Duration::from_micros(500)).unwrap();
    let clock = ManualClock::starting_at(10 * 1_000 * MS);
    let l = Limiter::builder()
        .build_with_clock([config], clock)
        .unwrap();
    let now = 10 * 1_000 * MS;
    let huge = l.debit_at("a", 0, u32::MAX, now).unwrap();
    assert!(huge.cut(), "4.3e9 tokens of 500 µs are past 2^38 µs");
    let longest = Duration::from_micros(1 << 38);
    assert_eq!(huge.wait(), longest);
    // At a reading 1 s behind, the cap would lie 1 s earlier: the debt stays where it is.
    let lagging = l.debit_at("a", 0, 1, now - 1_000 * MS).unwrap();
    assert_eq!(lagging.wait(), longest + Duration::from_secs(1));
    assert!(!lagging.cut() || lagging.wait() >= longest);
}

#[test]
fn a_debit_at_the_cap_lands_on_the_overflow_bucket() {
    let l = limiter(1, 10, 1);
    l.try_acquire_at("holder", 0, 0).unwrap();
    let debit = l.debit_at("newcomer", 0, 3, 0).unwrap();
    assert!(debit.via_overflow());
    assert_eq!(debit.wait(), Duration::from_millis(30));
    let refused = l.check_at("other", 0, 1, 0).unwrap_err();
    assert!(
        refused.limited().unwrap().via_overflow(),
        "the overflow bucket owes"
    );
}

#[test]
fn a_cut_and_its_revert_keep_a_debit_owed() {
    let l = limiter(10, 10, 64);
    l.debit_at("a", 0, 30, 0).unwrap();
    let fast = BucketConfig::new(10, Duration::from_millis(10)).unwrap();
    let slow = BucketConfig::new(1, Duration::from_millis(1_000)).unwrap();
    l.set_config(0, slow).unwrap();
    l.set_config(0, fast).unwrap();
    // 30 tokens owed from a burst of 10: 20 beyond empty, the next at 210 ms, at least.
    let refused = l.check_at("a", 0, 1, 0).unwrap_err();
    assert!(refused.limited().unwrap().wait() >= Duration::from_millis(210));
}

/// Failed logins on one key from 8 threads at once: each checks (taking nothing), fails or
/// succeeds, and debits only the failures. Whatever the interleaving, the key owes exactly the
/// failures that were debited, and no success.
#[test]
fn concurrent_outcomes_charge_every_failure_and_no_success() {
    let l = Arc::new(limiter(1_000, 10, 64));
    let failures = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let (l, failures) = (Arc::clone(&l), Arc::clone(&failures));
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    if l.check_at("login", 0, 1, 0).is_err() {
                        continue;
                    }
                    let failed = (t + i) % 3 == 0;
                    if failed {
                        l.debit_at("login", 0, 1, 0).unwrap();
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
    assert!(debited > 0);
    let peek = l.peek_at("login", 0, 1, 0).unwrap();
    let available = 1_000u32.saturating_sub(debited);
    assert_eq!(peek.available(), available, "{debited} failures debited");
    if debited >= 1_000 {
        let owed = u64::from(debited - 1_000 + 1) * 10;
        assert_eq!(peek.wait(), Duration::from_millis(owed));
    }
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
