//! Limits charged by outcome: checked at admission, debited after, never forgiven.

use super::*;
use crate::bucket::BucketConfig;
use crate::clock::ManualClock;
use crate::quota::Quota;
use std::time::Duration;

/// A gate with one limit charged by outcome (burst `burst`, one token a minute) keyed by the
/// claim, and a volume quota of one request a minute per claim.
fn login_gate(burst: u32, clock: &ManualClock) -> Gate<ManualClock> {
    let config = BucketConfig::new(burst, Duration::from_secs(60)).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([config], clock.clone())
        .unwrap();
    let quota = Quota::new(1, 1 << 20, Duration::from_secs(60)).unwrap();
    Gate::new()
        .rates(
            limiter,
            [Limit::new("failed logins", 0)
                .keyed_by(KeyKind::Claim)
                .by_outcome()],
        )
        .unwrap()
        .volume(RateLimit::with_clock(quota, clock.clone()))
}

fn tokens(gate: &Gate<ManualClock>, key: &str, now: u64) -> u32 {
    let (limiter, _) = gate.limiter().unwrap();
    limiter.peek_at(key, 0, 1, now).unwrap().available()
}

#[test]
fn an_admission_checks_and_takes_nothing_and_a_refusal_after_it_gives_nothing_back() {
    let clock = ManualClock::new();
    let gate = login_gate(2, &clock);
    let alice = Admission::of("alice");
    let pass = gate.try_admit_at(&alice, 0).unwrap();
    drop(pass);
    assert_eq!(tokens(&gate, "alice", 0), 2, "a check takes nothing");
    let refused = gate.try_admit_at(&alice, 0).unwrap_err();
    assert!(matches!(refused, GateRefused::Volume { .. }), "{refused}");
    assert_eq!(
        tokens(&gate, "alice", 0),
        2,
        "nothing to give back, nothing given"
    );
    gate.charge_outcome_at(&alice, 0).unwrap();
    gate.charge_outcome_at(&alice, 0).unwrap();
    assert_eq!(tokens(&gate, "alice", 0), 0, "two failures charged");
    let refused = gate
        .try_admit_at(&Admission::of("alice"), 60_000_000_000)
        .unwrap_err();
    assert!(
        matches!(&refused, GateRefused::Rate { limit, key: KeyKind::Claim, .. } if &**limit == "failed logins"),
        "{refused}"
    );
}

#[test]
fn a_charge_for_a_key_the_admission_lacks_is_refused_and_the_others_are_still_charged() {
    let limiter = Limiter::builder()
        .build_with_clock(
            [BucketConfig::new(5, Duration::from_secs(1)).unwrap(); 2],
            ManualClock::new(),
        )
        .unwrap();
    let gate = Gate::new()
        .rates(
            limiter,
            [
                Limit::new("by prefix", 0)
                    .keyed_by(KeyKind::SourcePrefix)
                    .by_outcome(),
                Limit::new("by source", 1).by_outcome(),
            ],
        )
        .unwrap();
    let refused = gate
        .charge_outcome_at(&Admission::new("k", "10.0.0.1"), 0)
        .unwrap_err();
    assert!(
        matches!(
            refused,
            GateRefused::MissingKey {
                key: KeyKind::SourcePrefix,
                ..
            }
        ),
        "{refused}"
    );
    let (limiter, _) = gate.limiter().unwrap();
    assert_eq!(limiter.peek_at("10.0.0.1", 1, 1, 0).unwrap().available(), 4);
    assert!(gate.charges_by_outcome());
}

/// Eight threads (two under miri) log in as one claim, every third attempt failing: the
/// claim's bucket ends exactly its failures lower, successes uncharged, no failure forgiven
/// (the burst is large enough that no debit reaches an empty bucket).
#[test]
fn concurrent_outcomes_on_one_key_charge_exactly_the_failures() {
    let clock = ManualClock::new();
    let config = BucketConfig::new(10_000, Duration::from_secs(3_600)).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([config], clock.clone())
        .unwrap();
    let gate = Gate::new()
        .rates(
            limiter,
            [Limit::new("failed logins", 0)
                .keyed_by(KeyKind::Claim)
                .by_outcome()],
        )
        .unwrap();
    let failures = std::sync::atomic::AtomicU32::new(0);
    let (threads, each) = if cfg!(miri) { (2, 30) } else { (8, 500) };
    std::thread::scope(|s| {
        for t in 0..threads {
            let (gate, failures) = (&gate, &failures);
            s.spawn(move || {
                let alice = Admission::of("alice");
                for i in 0..each {
                    let pass = gate.try_admit_at(&alice, 0).unwrap();
                    if (t + i) % 3 == 0 {
                        gate.charge_outcome_at(&alice, 0).unwrap();
                        failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    drop(pass);
                }
            });
        }
    });
    let failed = failures.into_inner();
    assert!(failed > 0);
    assert_eq!(tokens(&gate, "alice", 0), 10_000 - failed);
}
