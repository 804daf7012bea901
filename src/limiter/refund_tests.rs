//! Refunds that cannot mint: each test is a way a refund once handed out a token a limit
//! forbade (a copied grant refunded twice, a grant refunded under another identity or on
//! another limiter), now given back exactly once, only where it was taken.

use super::*;
use crate::bucket::Refunded;
use crate::clock::ManualClock;
use std::time::Duration;

fn limiter(burst: u32, cap: usize) -> Limiter<ManualClock> {
    let config = BucketConfig::new(burst, Duration::from_millis(10)).unwrap();
    Limiter::builder()
        .cap(cap)
        .build_with_clock([config], ManualClock::new())
        .unwrap()
}

/// Burst 1, one reading: take A, refund A, take B. A's refund consumed A, so nothing can give
/// B's token back, and a third take is refused (a copy of A refunded again once granted it).
#[test]
fn a_grant_refunded_once_leaves_the_next_take_charged() {
    let l = limiter(1, 64);
    let a = l.try_acquire_at("x", 0, 0).unwrap();
    assert_eq!(l.refund_at(a, 1, 0), Ok(Refunded::Exact { tokens: 1 }));
    let _b = l.try_acquire_at("x", 0, 0).unwrap();
    assert!(
        l.try_acquire_at("x", 0, 0).is_err(),
        "two grants at one reading, burst 1"
    );
}

/// Burst 3, one reading, 50 rounds of take-and-refund of whatever was last granted: the grants
/// net of the refunds that gave back never exceed the burst (50 grants at one reading once).
#[test]
fn takes_and_refunds_at_one_reading_stay_within_the_burst() {
    let config = BucketConfig::new(3, Duration::from_millis(10)).unwrap();
    let l = Limiter::builder()
        .build_with_clock([config], ManualClock::new())
        .unwrap();
    let (mut granted, mut given) = (0u32, 0u32);
    let mut kept = Vec::new();
    for round in 0..50 {
        if let Ok(grant) = l.try_acquire_at("x", 0, 0) {
            granted += 1;
            kept.push(grant);
        }
        // Every third round gives back the oldest grant kept (the others stay spent).
        if round % 3 == 0 && !kept.is_empty() {
            given += l.refund_at(kept.remove(0), 1, 0).unwrap().tokens();
        }
        assert!(
            granted - given <= 3,
            "round {round}: {granted} granted, {given} given back"
        );
    }
}

/// The same through the class's overflow bucket (the table is full).
#[test]
fn an_overflow_grant_refunded_once_leaves_the_next_take_charged() {
    let l = limiter(1, 1);
    l.try_acquire_at("holder", 0, 0).unwrap();
    let a = l.try_acquire_at("x", 0, 0).unwrap();
    assert!(a.via_overflow());
    assert_eq!(l.refund_at(a, 1, 0), Ok(Refunded::Exact { tokens: 1 }));
    let b = l.try_acquire_at("x", 0, 0).unwrap();
    assert!(b.via_overflow());
    assert!(
        l.try_acquire_at("x", 0, 0).is_err(),
        "two overflow grants at one reading"
    );
}

/// A grant taken before two changes to the same config: the class word is the grant's again,
/// but changes landed since, and the refund is void rather than a guess.
#[test]
fn a_grant_from_before_two_changes_to_one_config_gives_nothing_after_a_take() {
    let l = limiter(1, 64);
    let config = BucketConfig::new(1, Duration::from_millis(10)).unwrap();
    let a = l.try_acquire_at("x", 0, 0).unwrap();
    l.set_config(0, config).unwrap();
    l.set_config(0, config).unwrap();
    assert!(
        l.try_acquire_at("x", 0, 0).is_err(),
        "the take's debt carried over"
    );
    let _ = l.refund_at(a, 1, 0).unwrap();
    // Exact (nothing but the changes landed, and they carried the state over unchanged) or
    // void: either way at most the one token A took comes back.
    assert!(l.try_acquire_at("x", 0, 0).is_ok());
    assert!(
        l.try_acquire_at("x", 0, 0).is_err(),
        "a token beyond the grant's came back"
    );
}

/// A grant names its key: its refund credits the identity it was charged to, never another
/// whose entry happens to hold the same state (alice's grant once refunded into bob's).
#[test]
fn a_refund_credits_only_the_identity_charged() {
    let l = limiter(1, 64);
    let a = l.try_acquire_at("alice", 0, 0).unwrap();
    let _b = l.try_acquire_at("bob", 0, 0).unwrap();
    assert_eq!(l.refund_at(a, 1, 0), Ok(Refunded::Exact { tokens: 1 }));
    assert!(
        l.try_acquire_at("bob", 0, 0).is_err(),
        "bob granted twice at burst 1"
    );
    assert!(
        l.try_acquire_at("alice", 0, 0).is_ok(),
        "alice's token came back"
    );
}

/// A grant names its limiter: on another with an equal config, whose entry holds the very
/// state the grant names, it gives nothing.
#[test]
fn a_refund_on_another_limiter_gives_nothing() {
    let one = limiter(1, 64);
    let two = limiter(1, 64);
    let a = one.try_acquire_at("alice", 0, 0).unwrap();
    let _b = two.try_acquire_at("alice", 0, 0).unwrap();
    assert_eq!(two.refund_at(a, 1, 0), Ok(Refunded::OtherInstance));
    assert!(
        two.try_acquire_at("alice", 0, 0).is_err(),
        "limiter two granted twice"
    );
    assert!(
        one.try_acquire_at("alice", 0, 0).is_err(),
        "nor did one get it back"
    );
}
