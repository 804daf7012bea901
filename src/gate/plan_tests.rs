//! The plan against a sequential reference model: admissions with mixed claims and sources
//! through an in-flight quota by the claim, three rate limits of one limiter by the source
//! (one a charge of nothing), a weighted limit of another limiter by the claim, and a volume
//! quota by the claim. After every step, every key holds exactly what the model says, and
//! every refusal names the limit and the key kind the model names.

use super::*;
use crate::bucket::BucketConfig;
use crate::clock::ManualClock;
use crate::quota::Quota;
use proptest::prelude::*;
use std::collections::HashMap;
use std::time::Duration;

const MS: u64 = 1_000_000;
const CLAIMS: [&str; 4] = ["c0", "c1", "c2", "c3"];
const SOURCES: [&str; 3] = ["s0", "s1", "s2"];
/// The in-flight quota per claim.
const QUOTA: u32 = 2;
/// The volume quota's window: longer than any test's readings, so every step is in one window.
const WINDOW_MS: u64 = 3_600_000;

/// (name, limiter, class, key, cost); limiter 0 is keyed by the source, 1 by the claim.
const LIMITS: [(&str, usize, usize, KeyKind, Cost); 4] = [
    ("burst", 0, 0, KeyKind::Source, Cost::Tokens(1)),
    ("hourly", 0, 1, KeyKind::Source, Cost::Tokens(2)),
    ("nothing", 0, 0, KeyKind::Source, Cost::Tokens(0)),
    ("weighted", 1, 0, KeyKind::Claim, Cost::Weight { min: 1 }),
];
/// Per limiter, per class: (burst, interval in ms).
const CLASSES: [&[(u32, u64)]; 2] = [&[(3, 20), (6, 1_000)], &[(4, 10)]];
const EVENTS: u32 = 5;
const BYTES: u32 = 600;

#[derive(Debug, Clone)]
enum Op {
    Admit {
        claim: usize,
        source: usize,
        bytes: u64,
        weight: u32,
    },
    Drop {
        pass: usize,
    },
    Advance {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..CLAIMS.len(), 0..SOURCES.len(), 0u64..300, 0u32..6).prop_map(
            |(claim, source, bytes, weight)| Op::Admit { claim, source, bytes, weight }
        ),
        2 => (0usize..8).prop_map(|pass| Op::Drop { pass }),
        2 => (0u64..60).prop_map(|ms| Op::Advance { ms }),
    ]
}

fn gate(clock: &ManualClock) -> Gate<ManualClock> {
    let limiter = |classes: &[(u32, u64)]| {
        Limiter::builder()
            .cap(64)
            .build_with_clock(
                classes.iter().map(|&(burst, ms)| {
                    BucketConfig::new(burst, Duration::from_millis(ms)).unwrap()
                }),
                clock.clone(),
            )
            .unwrap()
    };
    let limits = |of: usize| {
        LIMITS
            .iter()
            .filter(move |l| l.1 == of)
            .map(|&(name, _, class, key, cost)| Limit::new(name, class).keyed_by(key).cost(cost))
    };
    let quota = Quota::new(EVENTS, BYTES, Duration::from_millis(WINDOW_MS))
        .unwrap()
        .with_rows(4)
        .unwrap();
    Gate::new()
        .in_flight(Quotas::builder().quota(QUOTA).actors(16).build().unwrap())
        .rates(limiter(CLASSES[0]), limits(0))
        .unwrap()
        .rates(limiter(CLASSES[1]), limits(1))
        .unwrap()
        .volume(RateLimit::with_geometry(quota, 4_096, (3, 5), clock.clone()).unwrap())
}

/// The reference: plain counts and token buckets, decided in the plan's order, all or nothing.
#[derive(Debug, Clone, Default)]
struct Model {
    in_flight: HashMap<usize, u32>,
    /// `full_at` in ms by (limiter, class, key name).
    full_at: HashMap<(usize, usize, &'static str), u64>,
    volume: HashMap<usize, (u32, u64)>,
}

/// What the model says of one admission: admitted, or the refusing defence's description.
#[derive(Debug, PartialEq, Eq)]
enum Said {
    Admitted,
    InFlight,
    Rate(&'static str, KeyKind),
    Volume,
}

impl Model {
    fn tokens(&self, limiter: usize, class: usize, key: &'static str, now: u64) -> u32 {
        let (burst, interval) = CLASSES[limiter][class];
        let full_at = self
            .full_at
            .get(&(limiter, class, key))
            .copied()
            .unwrap_or(0);
        let owed = full_at.saturating_sub(now);
        let owed_tokens = owed.div_ceil(interval);
        burst - u32::try_from(owed_tokens).unwrap()
    }

    fn admit(&mut self, claim: usize, source: usize, bytes: u64, weight: u32, now: u64) -> Said {
        if self.in_flight.get(&claim).copied().unwrap_or(0) >= QUOTA {
            return Said::InFlight;
        }
        let mut next = self.clone();
        for &(name, limiter, class, kind, cost) in &LIMITS {
            let key = match kind {
                KeyKind::Claim => CLAIMS[claim],
                _ => SOURCES[source],
            };
            let (burst, interval) = CLASSES[limiter][class];
            let n = cost.of(weight);
            if n > burst || next.tokens(limiter, class, key, now) < n.max(1) {
                return Said::Rate(name, kind);
            }
            let full_at = next.full_at.entry((limiter, class, key)).or_insert(0);
            *full_at = (*full_at).max(now) + u64::from(n) * interval;
        }
        let (events, volume) = next.volume.get(&claim).copied().unwrap_or((0, 0));
        if events + 1 > EVENTS || volume + bytes > u64::from(BYTES) {
            return Said::Volume;
        }
        next.volume.insert(claim, (events + 1, volume + bytes));
        *next.in_flight.entry(claim).or_insert(0) += 1;
        *self = next;
        Said::Admitted
    }
}

fn said(result: &Result<Pass<'_>, GateRefused>) -> Said {
    match result {
        Ok(_) => Said::Admitted,
        Err(GateRefused::InFlight { key, .. }) => {
            assert_eq!(*key, KeyKind::Claim);
            Said::InFlight
        }
        Err(GateRefused::Rate { limit, key, .. }) => {
            let name = LIMITS.iter().find(|l| *l.0 == **limit).unwrap().0;
            Said::Rate(name, *key)
        }
        Err(GateRefused::Volume { key, .. }) => {
            assert_eq!(*key, KeyKind::Claim);
            Said::Volume
        }
        Err(refused @ GateRefused::MissingKey { .. }) => panic!("{refused}"),
    }
}

/// Every key's holdings in the real defences, beside the model's, at `now`.
fn check_holdings(gate: &Gate<ManualClock>, model: &Model, now: u64) -> Result<(), TestCaseError> {
    let quotas = gate.quotas().unwrap();
    let volume = gate.volume_quota().unwrap();
    for (c, claim) in CLAIMS.iter().enumerate() {
        let want = model.in_flight.get(&c).copied().unwrap_or(0);
        prop_assert_eq!(quotas.in_flight(claim), want, "{} in flight", claim);
        let usage = volume.usage_at(claim, now).unwrap();
        let (events, bytes) = model.volume.get(&c).copied().unwrap_or((0, 0));
        prop_assert_eq!(
            (usage.events, u64::from(usage.bytes)),
            (events, bytes),
            "{} volume",
            claim
        );
    }
    let limiters: Vec<&Limiter<ManualClock>> = {
        let mut seen: Vec<&Limiter<ManualClock>> = Vec::new();
        for (limiter, _) in gate.limits() {
            if !seen.iter().any(|l| std::ptr::eq(*l, limiter)) {
                seen.push(limiter);
            }
        }
        seen
    };
    for (l, classes) in CLASSES.iter().enumerate() {
        for class in 0..classes.len() {
            for key in CLAIMS.iter().chain(SOURCES.iter()) {
                let real = limiters[l]
                    .peek_at(key, class, 1, now * MS)
                    .unwrap()
                    .available();
                prop_assert_eq!(
                    real,
                    model.tokens(l, class, key, now),
                    "limiter {} class {} {}",
                    l,
                    class,
                    key
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::check::proptest_config(256))]

    /// Each admission decides as the model does (the refusing limit and key kind included),
    /// and every key of every defence then holds what the model holds: a refused admission
    /// gives back every take, whichever limit refused.
    #[test]
    fn admissions_by_claim_and_source_match_the_model(ops in prop::collection::vec(op(), 1..64)) {
        let clock = ManualClock::new();
        let gate = gate(&clock);
        let mut model = Model::default();
        let mut passes: Vec<(usize, Pass<'_>)> = Vec::new();
        for op in ops {
            let now = clock.now_ns() / MS;
            match op {
                Op::Admit { claim, source, bytes, weight } => {
                    let admission = Admission::new(CLAIMS[claim], SOURCES[source])
                        .bytes(bytes)
                        .weight(weight);
                    let result = gate.try_admit(&admission);
                    let want = model.admit(claim, source, bytes, weight, now);
                    prop_assert_eq!(said(&result), want, "{:?} at {} ms", op, now);
                    if let Ok(pass) = result {
                        passes.push((claim, pass));
                    }
                }
                Op::Drop { pass } => {
                    if pass < passes.len() {
                        let (claim, pass) = passes.remove(pass);
                        drop(pass);
                        *model.in_flight.get_mut(&claim).unwrap() -= 1;
                    }
                }
                Op::Advance { ms } => {
                    clock.advance(Duration::from_millis(ms));
                }
            }
            check_holdings(&gate, &model, clock.now_ns() / MS)?;
        }
    }
}

/// A limit keyed by the source's prefix refuses an admission that carries none, and charges
/// nothing else; with the prefix it charges the prefix.
#[test]
fn a_limit_keyed_by_a_missing_prefix_refuses_and_charges_nothing() {
    let clock = ManualClock::new();
    let per_prefix = Limiter::builder()
        .build_with_clock([BucketConfig::per_second(1).unwrap()], clock.clone())
        .unwrap();
    let gate = Gate::new()
        .in_flight(Quotas::builder().quota(1).build().unwrap())
        .rates(
            per_prefix,
            [Limit::new("per /48", 0).keyed_by(KeyKind::SourcePrefix)],
        )
        .unwrap();
    let refused = gate
        .try_admit(&Admission::new("alice", "2001:db8::1"))
        .unwrap_err();
    assert_eq!(
        refused,
        GateRefused::MissingKey {
            defence: "rate limit",
            key: KeyKind::SourcePrefix
        }
    );
    assert_eq!(
        gate.quotas().unwrap().in_flight("alice"),
        0,
        "the place went back"
    );
    let prefix = crate::HashedActor::new("2001:db8::/48");
    let with = Admission::new("alice", "2001:db8::1").source_prefix(prefix);
    let pass = gate.try_admit(&with).unwrap();
    drop(pass);
    let with = Admission::new("bob", "2001:db8::2").source_prefix(prefix);
    assert!(
        matches!(
            gate.try_admit(&with),
            Err(GateRefused::Rate {
                key: KeyKind::SourcePrefix,
                ..
            })
        ),
        "one prefix, one token a second"
    );
}

/// A daily limit holds each key's entry until its day has refilled: with a cap below the
/// keys active within a day, newcomers share the class's one overflow budget (a burst for all
/// of them) until the day is over, and then each gets its own entry again. The sizing rule
/// the docs state: the cap holds every key active within a day.
#[test]
fn a_daily_limit_at_its_cap_holds_newcomers_to_one_shared_budget_until_the_day_refills() {
    let clock = ManualClock::new();
    let per_day = Limiter::builder()
        .cap(16)
        .build_with_clock([BucketConfig::per_day(10).unwrap()], clock.clone())
        .unwrap();
    let gate = Gate::new()
        .rates(per_day, [Limit::new("daily", 0)])
        .unwrap();
    let cap = gate.limiter().unwrap().0.cap();
    let admit = |source: &str| gate.try_admit(&Admission::new("claim", source));
    for i in 0..cap {
        let pass = admit(&format!("active-{i}")).unwrap();
        assert!(!pass.via_overflow(), "room for every active key");
    }
    // An hour on, every entry still owes part of its day: none can be reclaimed.
    clock.advance(Duration::from_secs(3_600));
    let newcomers: Vec<bool> = (0..12)
        .map(|i| admit(&format!("newcomer-{i}")).is_ok_and(|pass| pass.via_overflow()))
        .collect();
    assert_eq!(
        newcomers.iter().filter(|&&shared| shared).count(),
        10,
        "twelve newcomers share one burst of 10: {newcomers:?}"
    );
    // A day after the active keys' charges their buckets are full again, and reclaimable.
    clock.advance(Duration::from_secs(86_400));
    let pass = admit("newcomer-after-a-day").unwrap();
    assert!(
        !pass.via_overflow(),
        "an entry of its own once the day refilled"
    );
}
