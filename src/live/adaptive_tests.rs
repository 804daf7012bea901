//! `[admit.in_flight.total]`: read, built into adaptive quotas and their gate, retuned by a
//! reload; every bad value refused on its key.

use super::{KeyProblem, LimitsConfig, LiveLimits};
use crate::fairness::{Priority, QuotasConfigError};
use crate::gate::Admission;
use std::time::Duration;

fn file(total: &str) -> String {
    format!("[admit.in_flight]\nquota = 32\n\n[admit.in_flight.total]\n{total}")
}

#[test]
fn the_total_is_read_with_its_defaults() {
    let config = LimitsConfig::from_toml_str(&file("target = \"20ms\"\n")).unwrap();
    let total = config.in_flight.and_then(|f| f.total).unwrap();
    assert_eq!(total.target_latency(), Duration::from_millis(20));
    assert_eq!(total.bounds(), (1, 1 << 16));
    assert_eq!(total.initial_limit(), 64);
    assert_eq!(total.class_shares().of(Priority::Normal), 500);
    assert_eq!(total.class_shares().of(Priority::Sheddable), 250);
    let plain = LimitsConfig::from_toml_str("[admit.in_flight]\nquota = 3\n").unwrap();
    assert_eq!(plain.in_flight.and_then(|f| f.total), None);
}

#[test]
fn every_bad_value_is_refused_on_its_key() {
    let refused = |total: &str| {
        let err = LimitsConfig::from_toml_str(&file(total)).unwrap_err();
        (err.key().map(str::to_owned), err.to_string())
    };
    let (key, _) = refused("floor = 2\n");
    assert_eq!(key.as_deref(), Some("admit.in_flight.total.target"));
    let (key, message) = refused("target = \"1us\"\n");
    assert_eq!(
        key.as_deref(),
        Some("admit.in_flight.total.target"),
        "{message}"
    );
    let (key, message) = refused("target = \"5ms\"\nfloor = 9\nceiling = 3\n");
    assert_eq!(
        key.as_deref(),
        Some("admit.in_flight.total.floor"),
        "{message}"
    );
    assert!(message.contains("floor 9 and ceiling 3"), "{message}");
    let (key, message) = refused("target = \"5ms\"\nnormal = 100\nsheddable = 200\n");
    assert_eq!(
        key.as_deref(),
        Some("admit.in_flight.total.normal"),
        "{message}"
    );
    let (key, _) = refused("target = \"5ms\"\ncritical = 5\n");
    assert_eq!(key.as_deref(), Some("admit.in_flight.total.critical"));
}

#[test]
fn the_adaptive_gate_admits_by_class_and_a_reload_retunes_it() {
    let text = |ceiling: u32| {
        file(&format!(
            "target = \"20ms\"\ninitial = 4\nceiling = {ceiling}\n"
        ))
    };
    let live = LiveLimits::from_toml_str(&text(100)).unwrap();
    let refused = live.gate().unwrap_err();
    assert!(matches!(
        refused,
        super::LimitsConfigError::Key {
            problem: KeyProblem::AdaptiveGate,
            ..
        }
    ));
    let gate = live.adaptive_gate().unwrap();
    let held: Vec<_> = ["a", "b"]
        .iter()
        .map(|actor| gate.try_admit(&Admission::of(actor)).unwrap())
        .collect();
    assert!(gate.try_admit(&Admission::of("c")).is_err(), "half of 4");
    let human = gate
        .try_admit(&Admission::of("h").priority(Priority::Critical))
        .unwrap();
    // The quotas behind the gate are the handle's: a per-actor count is the same count.
    assert_eq!(live.in_flight().map(|q| q.in_flight("a")), Some(1));

    assert!(live.reload_str(&text(100)).unwrap().changed().is_empty());
    let initial_only = file("target = \"20ms\"\ninitial = 9\nceiling = 100\n");
    assert!(
        live.reload_str(&initial_only).unwrap().changed().is_empty(),
        "initial is read at build only"
    );
    let reloaded = live.reload_str(&text(2)).unwrap();
    assert_eq!(reloaded.changed(), ["admit.in_flight.total"]);
    assert_eq!(live.adaptive().map(|q| q.limit()), Some(2));
    assert_eq!(
        live.adaptive().map(|q| q.in_flight()),
        Some(3),
        "nothing evicted"
    );
    drop((held, human));

    let dropped = live
        .reload_str("[admit.in_flight]\nquota = 32\n")
        .unwrap_err();
    assert_eq!(dropped.key(), Some("admit.in_flight.total"));
    let plain = LiveLimits::from_toml_str("[admit.in_flight]\nquota = 32\n").unwrap();
    assert!(plain.adaptive_gate().is_err());
    let added = plain.reload_str(&text(100)).unwrap_err();
    assert_eq!(added.key(), Some("admit.in_flight.total"), "{added}");
    assert!(matches!(
        LiveLimits::from_toml_str(&file("target = \"5ms\"\nfloor = 0\n")),
        Err(super::LimitsConfigError::Key {
            problem: KeyProblem::InFlight(QuotasConfigError::AdaptiveTotal(_)),
            ..
        })
    ));
}
