//! Each primitive's shadow mode against the same scripted run enforced: as many shadow
//! admissions as refusals, and the same state afterwards (a shadow admission takes nothing).

use crate::fairness::Quotas;
use crate::gate::Gate;
use crate::quota::{Quota, RateLimit};
use crate::{BucketConfig, Clock, Limiter, ManualClock, TokenBucket};
use std::time::Duration;

const MS: u64 = 1_000_000;

/// Who asks, and when (in ms): bursts of one identity, an idle gap, a second identity.
const SCRIPT: [(&str, u64); 12] = [
    ("a", 0),
    ("a", 0),
    ("a", 0),
    ("b", 1),
    ("a", 5),
    ("a", 10),
    ("a", 10),
    ("b", 10),
    ("b", 10),
    ("b", 11),
    ("c", 30),
    ("a", 30),
];

/// What a run of the script saw: refusals, shadow admissions (as counted by the primitive, and
/// as said by each admission where it carries it), and the state left behind.
#[derive(Debug, PartialEq, Eq)]
struct Run<S> {
    refused: u64,
    shadow_counted: u64,
    shadow_said: u64,
    state: S,
}

/// The rule every primitive's shadow mode keeps: enforced, the script refuses at least 3 and
/// admits nothing in shadow; in shadow, it refuses nothing, admits in shadow exactly what was
/// refused, and leaves the same state.
fn assert_shadow_matches_enforced<S: std::fmt::Debug + PartialEq>(
    enforced: &Run<S>,
    shadow: &Run<S>,
) {
    assert!(
        enforced.refused >= 3,
        "the script must refuse: {enforced:?}"
    );
    assert_eq!((enforced.shadow_counted, enforced.shadow_said), (0, 0));
    assert_eq!(shadow.refused, 0, "shadow mode refused");
    assert_eq!(shadow.shadow_counted, enforced.refused);
    assert_eq!(shadow.shadow_said, enforced.refused);
    assert_eq!(
        shadow.state, enforced.state,
        "a shadow admission took something"
    );
}

fn limiter_run(shadow: bool) -> Run<Vec<Option<u32>>> {
    let clock = ManualClock::new();
    // Cap 2, burst 2 per 10 ms: "c" finds the table full of "a" and "b" and pays the overflow.
    let limiter = Limiter::builder()
        .cap(2)
        .build_with_clock(
            [BucketConfig::new(2, Duration::from_millis(10)).unwrap()],
            clock.clone(),
        )
        .unwrap();
    limiter.set_shadow(0, shadow).unwrap();
    let (mut refused, mut said) = (0, 0);
    for (id, at) in SCRIPT {
        clock.set_ns(at * MS);
        match limiter.try_acquire(id, 0) {
            Ok(grant) => said += u64::from(grant.would_have_refused().is_some()),
            Err(_) => refused += 1,
        }
    }
    let end = clock.now_ns();
    Run {
        refused,
        shadow_counted: limiter.shadow_admissions(0).unwrap(),
        shadow_said: said,
        state: ["a", "b", "c"]
            .iter()
            .map(|id| limiter.entry_tokens_at(id, 0, end))
            .chain([limiter.overflow_charges(0).map(|n| n as u32)])
            .collect(),
    }
}

#[test]
fn the_limiter_admits_in_shadow_exactly_what_it_refuses_enforcing() {
    assert_shadow_matches_enforced(&limiter_run(false), &limiter_run(true));
}

#[test]
fn a_shadow_grant_refunds_nothing() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock(
            [BucketConfig::new(1, Duration::from_secs(1)).unwrap()],
            clock,
        )
        .unwrap();
    limiter.set_shadow(0, true).unwrap();
    let real = limiter.try_acquire("a", 0).unwrap();
    let shadow = limiter.try_acquire("a", 0).unwrap();
    assert!(real.would_have_refused().is_none());
    assert!(shadow.would_have_refused().is_some());
    assert_eq!(limiter.refund(shadow, 1), Ok(crate::Refunded::Nothing));
    assert_eq!(
        limiter.entry_tokens_at("a", 0, 0),
        Some(0),
        "a token was minted"
    );
    assert_eq!(
        limiter.refund(real, 1),
        Ok(crate::Refunded::Exact { tokens: 1 })
    );
    assert_eq!(limiter.entry_tokens_at("a", 0, 0), Some(1));
}

#[test]
fn the_switch_works_both_ways_at_once() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock(
            [BucketConfig::new(1, Duration::from_secs(1)).unwrap()],
            clock,
        )
        .unwrap();
    assert_eq!(limiter.is_shadow(0), Some(false));
    assert!(limiter.try_acquire("a", 0).is_ok());
    assert!(limiter.try_acquire("a", 0).is_err());
    limiter.set_shadow(0, true).unwrap();
    assert_eq!(limiter.is_shadow(0), Some(true));
    assert!(limiter.try_acquire("a", 0).is_ok());
    limiter.set_shadow(0, false).unwrap();
    assert!(limiter.try_acquire("a", 0).is_err());
    assert_eq!(limiter.shadow_admissions(0), Some(1));
    assert!(limiter.set_shadow(1, true).is_err(), "no class 1");
    assert_eq!(limiter.is_shadow(1), None);
}

fn bucket_run(shadow: bool) -> Run<Option<u32>> {
    let clock = ManualClock::new();
    let bucket = TokenBucket::new(BucketConfig::new(2, Duration::from_millis(10)).unwrap());
    bucket.set_shadow(shadow);
    let mut refused = 0;
    for (_, at) in SCRIPT {
        clock.set_ns(at * MS);
        refused += u64::from(bucket.try_acquire(&clock).is_err());
    }
    Run {
        refused,
        shadow_counted: bucket.shadow_admissions(),
        shadow_said: bucket.shadow_admissions(),
        state: Some(bucket.available_at(clock.now_ns())),
    }
}

#[test]
fn the_token_bucket_admits_in_shadow_exactly_what_it_refuses_enforcing() {
    assert_shadow_matches_enforced(&bucket_run(false), &bucket_run(true));
}

fn quotas_run(shadow: bool) -> Run<(u32, u32, u32, u64)> {
    let quotas = Quotas::builder().quota(2).build().unwrap();
    quotas.set_shadow(shadow);
    let (mut refused, mut said, mut held) = (0, 0, Vec::new());
    // Every permit is held to the end: each identity's third op is over the quota.
    for (id, _) in SCRIPT {
        match quotas.try_acquire_owned(id) {
            Ok(permit) => {
                said += u64::from(permit.would_have_refused().is_some());
                held.push(permit);
            }
            Err(_) => refused += 1,
        }
    }
    let counts = (
        quotas.in_flight("a"),
        quotas.in_flight("b"),
        quotas.in_flight("c"),
        // Shadow permits hold no place but count in the total, so a drain waits for them.
        quotas.total_in_flight() - said,
    );
    drop(held);
    assert_eq!(
        quotas.total_in_flight(),
        0,
        "a shadow permit leaked a count"
    );
    quotas.wait_idle();
    Run {
        refused,
        shadow_counted: quotas.shadow_admissions(),
        shadow_said: said,
        state: counts,
    }
}

#[test]
fn the_in_flight_quotas_admit_in_shadow_exactly_what_they_refuse_enforcing() {
    assert_shadow_matches_enforced(&quotas_run(false), &quotas_run(true));
}

fn volume_run(shadow: bool) -> Run<Vec<(u32, u32)>> {
    let clock = ManualClock::new();
    // Three writes and 250 bytes a minute; every write is 100 bytes.
    let quota = Quota::new(3, 250, Duration::from_secs(60)).unwrap();
    let limit = RateLimit::with_clock(quota, clock.clone());
    limit.set_shadow(shadow);
    let mut refused = 0;
    for (id, at) in SCRIPT {
        clock.set_ns(at * MS);
        refused += u64::from(limit.try_acquire(id, 100).is_err());
    }
    Run {
        refused,
        shadow_counted: limit.shadow_admissions(),
        shadow_said: limit.shadow_admissions(),
        state: ["a", "b", "c"]
            .iter()
            .map(|id| {
                let usage = limit.usage(id);
                (usage.events, usage.bytes)
            })
            .collect(),
    }
}

#[test]
fn the_volume_quota_admits_in_shadow_exactly_what_it_refuses_enforcing() {
    assert_shadow_matches_enforced(&volume_run(false), &volume_run(true));
}

#[test]
fn a_gate_rolls_back_a_shadow_grant_without_minting() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock(
            [BucketConfig::new(1, Duration::from_secs(1)).unwrap()],
            clock.clone(),
        )
        .unwrap();
    limiter.set_shadow(0, true).unwrap();
    let volume =
        RateLimit::with_clock(Quota::new(10, 100, Duration::from_secs(60)).unwrap(), clock);
    let gate = Gate::new().rate(limiter, 0).volume(volume);
    let pass = gate.try_acquire("a", 10).unwrap();
    assert!(!pass.would_have_refused());
    let shadow = gate.try_acquire("a", 10).unwrap();
    assert!(
        shadow.would_have_refused(),
        "the limiter would have refused"
    );
    // The volume refuses a large write: the gate gives back what the limiter granted, which
    // for a shadow grant is nothing.
    assert!(gate.try_acquire("a", 1_000).is_err());
    let (limiter, _) = gate.limiter().unwrap();
    assert_eq!(
        limiter.entry_tokens_at("a", 0, 0),
        Some(0),
        "the rollback minted a token"
    );
}
