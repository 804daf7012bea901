//! The gate's plan from the file: `[[admit.limit]]` with its key, rate, burst and cost, the
//! in-flight and volume keys; a gate built from it admitting by claim and by source; reloads
//! that change its numbers on the running gate, and those refused because they would change
//! its shape.

use super::reload_tests::live;
use super::*;
use crate::bucket::BucketConfig;
use crate::clock::ManualClock;
use crate::gate::{Admission, Cost, GateConfigError, GateRefused, KeyKind};
use std::time::Duration;

const MS: u64 = 1_000_000;

/// Two limits by the source (10/s burst 20, and 100 an hour), one by the claim weighted with a
/// minimum, places and volume by the claim.
const PLAN: &str = r#"
[admit.limiter]
cap = 256

[[admit.limit]]
name = "per source"
key = "source"
rate = "10/s"
burst = 20

[[admit.limit]]
name = "hourly"
key = "source"
rate = "100/h"
burst = 100
cost = 1

[[admit.limit]]
name = "per claim"
key = "claim"
rate = "100/s"
burst = 100
cost = "weight"
min = 2

[admit.in_flight]
quota = 3
key = "claim"

[admit.volume]
events = 1000
bytes = 1000
window = "60s"
key = "claim"
"#;

fn key_error(result: Result<impl std::fmt::Debug, LimitsConfigError>) -> (String, KeyProblem) {
    match result {
        Err(LimitsConfigError::Key { key, problem }) => (key, problem),
        other => panic!("expected a key error, got {other:?}"),
    }
}

/// `PLAN` with its first `from` replaced by `to`.
fn plan_with(from: &str, to: &str) -> String {
    assert!(PLAN.contains(from), "{from}");
    PLAN.replacen(from, to, 1)
}

#[test]
fn the_plan_reads_each_limit_with_its_key_rate_and_cost() {
    let config = LimitsConfig::from_toml_str(PLAN).unwrap();
    let names: Vec<_> = config.limits.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["per source", "hourly", "per claim"]);
    let keys: Vec<_> = config.limits.iter().map(|l| l.key).collect();
    assert_eq!(keys, [KeyKind::Source, KeyKind::Source, KeyKind::Claim]);
    let costs: Vec<_> = config.limits.iter().map(|l| l.cost).collect();
    assert_eq!(
        costs,
        [Cost::Tokens(1), Cost::Tokens(1), Cost::Weight { min: 2 }]
    );
    let limiter = config.limiter.unwrap();
    assert_eq!(limiter.cap, 256);
    assert_eq!(
        limiter.classes[0].config,
        BucketConfig::per_second(10)
            .unwrap()
            .with_burst(20)
            .unwrap()
    );
    assert_eq!(limiter.classes.len(), 3);
    assert_eq!(config.in_flight.unwrap().key, KeyKind::Claim);
    assert_eq!(config.volume.unwrap().key, KeyKind::Claim);
    // Without `[admit.limiter]`, the limits' limiter has the default cap; without `key`, the
    // places and the volume are the claim's.
    let bare = LimitsConfig::from_toml_str(
        "[[admit.limit]]\nname = \"a\"\nkey = \"source-prefix\"\nrate = \"1/s\"\nburst = 1\n\
         [admit.in_flight]\nquota = 1\n",
    )
    .unwrap();
    assert_eq!(bare.limiter.unwrap().cap, crate::DEFAULT_CAP);
    assert_eq!(bare.limits[0].key, KeyKind::SourcePrefix);
    assert_eq!(bare.limits[0].cost, Cost::Tokens(1));
    assert_eq!(bare.in_flight.unwrap().key, KeyKind::Claim);
}

#[test]
fn each_bad_limit_is_refused_naming_its_key() {
    let cases: &[(&str, &str, &str)] = &[
        (r#"key = "claim""#, r#"key = "user""#, "admit.limit[2].key"),
        (r#"key = "claim""#, "", "admit.limit[2].key"),
        (
            r#"name = "hourly""#,
            r#"name = "per source""#,
            "admit.limit[1].name",
        ),
        (r#"name = "hourly""#, r#"name = """#, "admit.limit[1].name"),
        (r#"name = "hourly""#, "", "admit.limit[1].name"),
        ("cost = 1", "cost = 101", "admit.limit[1].cost"),
        ("cost = 1", "cost = 1\nmin = 1", "admit.limit[1].min"),
        ("cost = 1", r#"cost = "heavy""#, "admit.limit[1].cost"),
        ("cost = 1", "cost = 1.5", "admit.limit[1].cost"),
        ("min = 2", "min = 101", "admit.limit[2].min"),
        ("cost = 1", "costs = 1", "admit.limit[1].costs"),
        (
            r#"rate = "100/h""#,
            r#"rate = "100/m""#,
            "admit.limit[1].rate",
        ),
        ("burst = 20", "burst = 0", "admit.limit[0].burst"),
        (
            "cap = 256",
            "cap = 256\n[[admit.limiter.class]]\nburst = 1\nrate = \"1/s\"",
            "admit.limiter.class",
        ),
        (
            "quota = 3\nkey = \"claim\"",
            "quota = 3\nkey = 1",
            "admit.in_flight.key",
        ),
        (
            "window = \"60s\"\nkey = \"claim\"",
            "window = \"60s\"\nkey = \"ip\"",
            "admit.volume.key",
        ),
    ];
    for &(from, to, key) in cases {
        let document = plan_with(from, to);
        let (found, problem) = key_error(LimitsConfig::from_toml_str(&document));
        assert_eq!(found, key, "{from:?} -> {to:?}: {problem}");
    }
    let (key, problem) = key_error(LimitsConfig::from_toml_str(&plan_with(
        r#"name = "hourly""#,
        r#"name = "per source""#,
    )));
    assert_eq!(key, "admit.limit[1].name");
    assert!(matches!(
        problem,
        KeyProblem::Gate(GateConfigError::DuplicateName { .. })
    ));
    let (_, problem) = key_error(LimitsConfig::from_toml_str(&plan_with(
        "cost = 1",
        "cost = 101",
    )));
    assert!(matches!(
        problem,
        KeyProblem::Gate(GateConfigError::CostExceedsBurst {
            cost: 101,
            burst: 100,
            ..
        })
    ));
    let (_, problem) = key_error(LimitsConfig::from_toml_str(&plan_with(
        "cost = 1",
        "cost = 1\nmin = 1",
    )));
    assert_eq!(problem, KeyProblem::MinWithoutWeight);
    let (_, problem) = key_error(LimitsConfig::from_toml_str(&plan_with(
        r#"key = "claim""#,
        r#"key = "user""#,
    )));
    assert_eq!(
        problem.to_string(),
        "\"user\" is not a key kind: write \"claim\", \"source\" or \"source-prefix\""
    );
    // More limits than a gate charges.
    let many: String = (0..=crate::gate::MAX_LIMITS)
        .map(|i| {
            format!(
                "[[admit.limit]]\nname = \"l{i}\"\nkey = \"source\"\nrate = \"1/s\"\nburst = 1\n"
            )
        })
        .collect();
    let (key, problem) = key_error(LimitsConfig::from_toml_str(&many));
    assert_eq!(key, "admit.limit");
    assert!(matches!(
        problem,
        KeyProblem::Gate(GateConfigError::TooManyLimits {
            limits: 17,
            max: 16
        })
    ));
    let (key, _) = key_error(LimitsConfig::from_toml_str("[admit]\nlimit = []\n"));
    assert_eq!(key, "admit.limit");
}

#[test]
fn a_gate_from_the_file_binds_the_source_and_the_claim_as_stated() {
    let (live, clock) = live(PLAN);
    let gate = live.gate().unwrap();
    // A client rotating claims from one source: the source's burst of 20 binds it.
    let rotated = (0..50)
        .filter(|i| {
            gate.try_admit_at(&Admission::new(&format!("key-{i}"), "10.0.0.1"), 0)
                .is_ok()
        })
        .count();
    assert_eq!(rotated, 20);
    match gate.try_admit_at(&Admission::new("key-0", "10.0.0.1"), 0) {
        Err(GateRefused::Rate { limit, key, .. }) => {
            assert_eq!((&*limit, key), ("per source", KeyKind::Source));
        }
        other => panic!("{other:?}"),
    }
    // One claim across sources: its weighted limit (100 tokens, at least 2 a request) binds
    // it, and its places (3) before that, while passes are held.
    three_places_then_refused(
        &gate,
        |i| Admission::new("agent", &format!("10.1.0.{i}")),
        KeyKind::Claim,
    );
    let admitted = (0..100)
        .filter(|i| {
            gate.try_admit_at(&Admission::new("agent", &format!("10.2.0.{i}")), 0)
                .is_ok()
        })
        .count();
    assert_eq!(
        admitted,
        50 - 3,
        "100 tokens at 2 a request, 3 already taken"
    );
    match gate.try_admit_at(&Admission::new("agent", "10.3.0.1"), 0) {
        Err(GateRefused::Rate { limit, key, .. }) => {
            assert_eq!((&*limit, key), ("per claim", KeyKind::Claim));
        }
        other => panic!("{other:?}"),
    }
    // A heavy request pays its weight.
    let heavy = Admission::new("writer", "10.4.0.1").weight(90);
    assert!(gate.try_admit_at(&heavy, 0).is_ok());
    assert!(gate
        .try_admit_at(&Admission::new("writer", "10.4.0.2").weight(11), 0)
        .is_err());
    // The volume by the claim: 1,000 bytes a window.
    let big = Admission::new("uploader", "10.5.0.1").bytes(800);
    assert!(gate.try_admit_at(&big, 0).is_ok());
    assert!(matches!(
        gate.try_admit_at(&Admission::new("uploader", "10.5.0.2").bytes(800), 0),
        Err(GateRefused::Volume {
            key: KeyKind::Claim,
            ..
        })
    ));
    // The gate reads the handle's clock.
    clock.advance(Duration::from_millis(100));
    assert_eq!(gate.now_ns(), 100 * MS);
}

#[test]
fn an_in_flight_quota_keyed_by_the_source_binds_what_one_source_holds() {
    let (live, _) = live(&plan_with(
        "quota = 3\nkey = \"claim\"",
        "quota = 3\nkey = \"source\"",
    ));
    let gate = live.gate().unwrap();
    three_places_then_refused(
        &gate,
        |i| Admission::new(&format!("key-{i}"), "10.0.0.1"),
        KeyKind::Source,
    );
}

/// Holds three places with `admission(0..3)`; a fourth, `admission(9)`, is refused by the
/// in-flight quota keyed by `key`. The places are freed on return.
fn three_places_then_refused(
    gate: &crate::gate::Gate<ManualClock>,
    admission: impl Fn(usize) -> Admission,
    key: KeyKind,
) {
    let held: Vec<_> = (0..3)
        .map(|i| gate.try_admit_at(&admission(i), 0).unwrap())
        .collect();
    match gate.try_admit_at(&admission(9), 0) {
        Err(GateRefused::InFlight { key: refused, .. }) => assert_eq!(refused, key),
        other => panic!("{other:?}"),
    }
    drop(held);
}

#[test]
fn a_reload_changes_the_running_gates_rate_burst_and_cost() {
    let slow = plan_with(r#"rate = "10/s""#, r#"rate = "1/h""#);
    let (live, clock) = live(&slow);
    let gate = live.gate().unwrap();
    let admit = |source: &str, now: u64| {
        (0..100)
            .filter(|i| {
                gate.try_admit_at(&Admission::new(&format!("c{i}"), source), now)
                    .is_ok()
            })
            .count()
    };
    assert_eq!(admit("a", 0), 20);
    clock.advance(Duration::from_secs(1));
    assert_eq!(admit("a", 1_000 * MS), 0, "1/h: nothing back in a second");
    // The incident: raise the rate. The running gate earns the source's debt back at 10/s
    // from the reload on (counted from the limiter's horizon, a moment after the reload).
    let reloaded = live.reload_str(PLAN).unwrap();
    assert_eq!(reloaded.changed(), ["admit.limit[0]"]);
    clock.advance(Duration::from_millis(1_050));
    assert_eq!(admit("a", 2_050 * MS), 10);
    // A cost: 2 tokens a request halves what a fresh source gets of its burst.
    let dear = plan_with(
        "rate = \"10/s\"\nburst = 20",
        "rate = \"10/s\"\nburst = 20\ncost = 2",
    );
    let reloaded = live.reload_str(&dear).unwrap();
    assert_eq!(reloaded.changed(), ["admit.limit[0].cost"]);
    assert_eq!(
        live.limits().unwrap()[0].cost_of(),
        Cost::Tokens(2),
        "the handle's limit"
    );
    let (_, first) = gate.limits().next().unwrap();
    assert_eq!(first.cost_of(), Cost::Tokens(2), "the gate's, the same");
    assert_eq!(admit("b", 2_050 * MS), 10);
    // A gate built after the reload shares the same limits.
    let later = live.gate().unwrap();
    assert_eq!(later.limits().next().unwrap().1.cost_of(), Cost::Tokens(2));
    // A cost above the old burst and a burst raised to hold it: both apply.
    let dearer = plan_with(
        "rate = \"10/s\"\nburst = 20",
        "rate = \"10/s\"\nburst = 40\ncost = 30",
    );
    let reloaded = live.reload_str(&dearer).unwrap();
    assert_eq!(
        reloaded.changed(),
        ["admit.limit[0]", "admit.limit[0].cost"],
        "the burst first: the old burst would not hold the new cost"
    );
    assert_eq!(admit("c", 2_050 * MS), 1);
    // Back down: the cost first, so the running burst always holds it.
    let reloaded = live.reload_str(PLAN).unwrap();
    assert_eq!(
        reloaded.changed(),
        ["admit.limit[0].cost", "admit.limit[0]"]
    );
    let weighted = plan_with("min = 2", "min = 5");
    assert_eq!(
        live.reload_str(&weighted).unwrap().changed(),
        ["admit.limit[2].cost"]
    );
    assert_eq!(
        gate.limits().nth(2).unwrap().1.cost_of(),
        Cost::Weight { min: 5 }
    );
}

#[test]
fn a_reload_that_changes_the_plans_shape_is_refused_and_changes_nothing() {
    let (live, _) = live(PLAN);
    let gate = live.gate().unwrap();
    let before = |live: &LiveLimits<ManualClock>| {
        let limiter = live.limiter().unwrap();
        (
            (0..limiter.classes())
                .map(|c| limiter.config(c))
                .collect::<Vec<_>>(),
            live.limits()
                .unwrap()
                .iter()
                .map(|l| l.cost_of())
                .collect::<Vec<_>>(),
            live.in_flight().unwrap().quota(),
        )
    };
    let running = before(&live);
    // Each with a good change beside it (the rate, a cost, the in-flight quota), none applied.
    let good = |document: String| {
        document
            .replacen(r#"rate = "10/s""#, r#"rate = "20/s""#, 1)
            .replacen("cost = 1", "cost = 3", 1)
            .replacen("quota = 3", "quota = 5", 1)
    };
    let cases = [
        (
            plan_with(r#"name = "hourly""#, r#"name = "daily""#),
            "admit.limit[1].name",
        ),
        (
            plan_with(r#"key = "claim""#, r#"key = "source""#),
            "admit.limit[2].key",
        ),
        (
            plan_with("[admit.in_flight]\nquota = 3\nkey = \"claim\"", "[admit.in_flight]\nquota = 3\nkey = \"source\""),
            "admit.in_flight.key",
        ),
        (
            plan_with("window = \"60s\"\nkey = \"claim\"", "window = \"60s\"\nkey = \"source-prefix\""),
            "admit.volume.key",
        ),
        (
            format!("{PLAN}\n[[admit.limit]]\nname = \"more\"\nkey = \"source\"\nrate = \"1/s\"\nburst = 1\n"),
            "admit.limit",
        ),
    ];
    for (document, key) in cases {
        let document = good(document);
        let (found, problem) = key_error(live.reload_str(&document));
        assert_eq!(found, key, "{problem}");
        assert!(
            matches!(problem, KeyProblem::PlanFixed { .. }),
            "{key}: {problem}"
        );
        assert_eq!(before(&live), running, "{key}: nothing changed");
    }
    // The plan stays: the running gate still charges the same limits by the same keys.
    let kinds: Vec<_> = gate.limits().map(|(_, l)| l.key_kind()).collect();
    assert_eq!(kinds, [KeyKind::Source, KeyKind::Source, KeyKind::Claim]);
    // A bad value elsewhere refuses the cost change too.
    let (key, _) = key_error(live.reload_str(&good(PLAN.to_owned()).replacen(
        "events = 1000",
        "events = 0",
        1,
    )));
    assert_eq!(key, "admit.volume.events");
    assert_eq!(before(&live), running);
    let message = key_error(live.reload_str(&plan_with(r#"name = "hourly""#, r#"name = "daily""#)))
        .1
        .to_string();
    assert!(
        message.starts_with("is \"daily\", but the running gate's plan has \"hourly\""),
        "{message}"
    );
}

#[test]
fn limiter_classes_state_no_key_so_a_gate_is_refused() {
    let (live, _) = live("[[admit.limiter.class]]\nburst = 2\nrate = \"1/s\"\n");
    let (key, problem) = key_error(live.gate());
    assert_eq!(
        (key.as_str(), problem),
        ("admit.limit", KeyProblem::NoLimits)
    );
    // And a file of classes cannot be reloaded into limits, nor the reverse.
    let limits = "[[admit.limit]]\nname = \"a\"\nkey = \"source\"\nburst = 2\nrate = \"1/s\"\n";
    let (key, problem) = key_error(live.reload_str(limits));
    assert_eq!(key, "admit.limit");
    assert!(matches!(problem, KeyProblem::PlanFixed { .. }));
    let (live, _) = self::live(limits);
    let (key, _) =
        key_error(live.reload_str("[[admit.limiter.class]]\nburst = 2\nrate = \"1/s\"\n"));
    assert_eq!(key, "admit.limit");
    // A gate of in-flight quotas alone needs no limiter.
    let (live, _) = self::live("[admit.in_flight]\nquota = 1\n");
    let gate = live.gate().unwrap();
    let _pass = gate.try_admit(&Admission::of("a")).unwrap();
    assert!(gate.try_admit(&Admission::of("a")).is_err());
}

#[test]
fn a_week_long_limit_beside_a_microsecond_one_is_refused_naming_the_limit() {
    let document = "[[admit.limit]]\nname = \"fast\"\nkey = \"source\"\nburst = 1\ninterval = \"10us\"\n\
                    [[admit.limit]]\nname = \"weekly\"\nkey = \"source\"\nburst = 7\ninterval = \"1d\"\n";
    let config = LimitsConfig::from_toml_str(document).unwrap();
    let err = LiveLimits::from_config_with_clock(&config, ManualClock::new()).unwrap_err();
    assert_eq!(err.key(), Some("admit.limit[1]"), "{err}");
}

/// The message `docs/en/operations.md` (and its Korean twin) show for a reload that would
/// change the plan's shape is the one a reload prints.
#[test]
fn the_operations_pages_show_the_plan_fixed_message() {
    let (live, _) = live(PLAN);
    let changed = plan_with(r#"key = "source""#, r#"key = "claim""#);
    let message = live.reload_str(&changed).unwrap_err().to_string();
    for page in [
        include_str!("../../docs/en/operations.md"),
        include_str!("../../docs/ko/operations.md"),
    ] {
        assert!(page.contains(&message), "the page lacks: {message}");
    }
}

/// `outcome = true`: the limit is only checked at admission and charged by
/// `Gate::charge_outcome`; flipping it on a reload changes the plan's shape and is refused.
#[test]
fn a_limit_charged_by_outcome_is_read_and_its_flag_is_fixed() {
    const LOGINS: &str = r#"
[[admit.limit]]
name = "failed logins"
key = "claim"
rate = "3/h"
burst = 3
outcome = true
"#;
    let (live, _clock) = live(LOGINS);
    let gate = live.gate().unwrap();
    let alice = Admission::of("alice");
    for _ in 0..5 {
        drop(gate.try_admit(&alice).unwrap()); // successes: nothing charged
    }
    for _ in 0..3 {
        gate.charge_outcome(&alice).unwrap();
    }
    assert!(
        matches!(gate.try_admit(&alice), Err(GateRefused::Rate { .. })),
        "three failures spend the hour"
    );
    let (key, problem) = key_error(live.reload_str(&LOGINS.replace("outcome = true", "")));
    assert_eq!(key, "admit.limit[0].outcome");
    assert!(matches!(problem, KeyProblem::PlanFixed { .. }), "{problem}");
}
