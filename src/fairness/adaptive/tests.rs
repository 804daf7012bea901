//! The adaptive total's invariants (see the module's documentation), one test each, on a
//! `ManualClock`: no test sleeps.

use super::{AdaptivePermit, AdaptiveQuotas, AdaptiveTotal, Priority, Shares};
use crate::fairness::Quotas;
use crate::{Clock, ManualClock};
use std::time::Duration;

const TARGET: Duration = Duration::from_millis(1);

type Adaptive = AdaptiveQuotas<ManualClock>;

fn quotas(total: AdaptiveTotal) -> (Adaptive, ManualClock) {
    let clock = ManualClock::starting_at(1 << 30);
    let quotas = Quotas::builder()
        .quota(1_000)
        .build_adaptive_with_clock(total, clock.clone())
        .unwrap();
    (quotas, clock)
}

/// Admits ops of `priority` (each its own actor) until one is refused; returns them.
fn fill(quotas: &Adaptive, priority: Priority, from: u32) -> Vec<AdaptivePermit<'_, ManualClock>> {
    (from..)
        .map_while(|i| quotas.try_acquire_as(&i, priority).ok())
        .collect()
}

#[test]
fn the_total_never_reaches_the_class_share() {
    let (quotas, _clock) = quotas(AdaptiveTotal::new(TARGET).initial(10));
    let sheddable = fill(&quotas, Priority::Sheddable, 0);
    assert_eq!(sheddable.len(), 3, "250 ‰ of 10, rounded up");
    let normal = fill(&quotas, Priority::Normal, 100);
    assert_eq!(sheddable.len() + normal.len(), 5, "500 ‰ of 10");
    let critical = fill(&quotas, Priority::Critical, 200);
    assert_eq!(quotas.in_flight(), 10, "all of L, not one more");
    let Err(refused) = quotas.try_acquire_as("late", Priority::Critical) else {
        panic!("admitted at all of L");
    };
    let total = refused.total().unwrap();
    assert_eq!(
        (total.priority(), total.share_permille()),
        (Priority::Critical, 1000)
    );
    assert_eq!(
        (total.limit(), total.in_flight(), total.class_limit()),
        (10, 10, 10)
    );
    let message = refused.to_string();
    for word in ["critical", "1000‰", "limit of 10"] {
        assert!(message.contains(word), "{message}");
    }
    drop((sheddable, normal, critical));
    assert_eq!(quotas.in_flight(), 0);
}

#[test]
fn ops_admitted_before_the_limit_fell_stay() {
    let (quotas, _clock) = quotas(AdaptiveTotal::new(TARGET).initial(8));
    let held = fill(&quotas, Priority::Critical, 0);
    assert_eq!(held.len(), 8);
    quotas
        .configure(AdaptiveTotal::new(TARGET).ceiling(2))
        .unwrap();
    assert_eq!(quotas.limit(), 2);
    assert_eq!(quotas.in_flight(), 8, "nothing evicted");
    let mut held = held;
    while held.len() > 2 {
        assert!(quotas.try_acquire_as("new", Priority::Critical).is_err());
        held.pop();
    }
    assert!(
        quotas.try_acquire_as("new", Priority::Critical).is_err(),
        "2 of 2"
    );
    held.pop();
    assert!(
        quotas.try_acquire_as("new", Priority::Critical).is_ok(),
        "1 of 2"
    );
}

#[test]
fn the_actor_quota_still_binds_under_the_total() {
    let clock = ManualClock::new();
    let quotas = Quotas::builder()
        .quota(2)
        .build_adaptive_with_clock(AdaptiveTotal::new(TARGET).initial(3), clock)
        .unwrap();
    let a = [
        quotas.try_acquire("a").unwrap(),
        quotas.try_acquire("a").unwrap(),
    ];
    let Err(refused) = quotas.try_acquire_as("a", Priority::Critical) else {
        panic!("admitted over the actor's quota");
    };
    assert!(
        refused.total().is_none(),
        "the actor's quota, not the total"
    );
    assert_eq!(refused.limit(), 2);
    // The total refuses b's sheddable op (2 of 3 is above 50 %): b's place goes back.
    let refused = quotas.try_acquire_as("b", Priority::Sheddable).err();
    assert!(refused.and_then(|r| r.total()).is_some());
    assert_eq!(
        quotas.quotas().in_flight("b"),
        0,
        "the refused op holds no place of its actor"
    );
    drop(a);
}

/// A window: L ops admitted, half of them decided `latency` later, the clock past the
/// window's end, an admission that closes it with the other half still in flight.
fn sample(quotas: &Adaptive, clock: &ManualClock, latency: Duration) {
    let mut decided = fill(quotas, Priority::Critical, 0);
    clock.advance(latency);
    let in_flight = decided.split_off(decided.len() / 2);
    drop(decided);
    clock.advance(TARGET);
    drop(quotas.try_acquire_as("tick", Priority::Critical));
    drop(in_flight);
}

#[test]
fn the_limit_stays_within_its_bounds() {
    let (quotas, clock) = quotas(AdaptiveTotal::new(TARGET).initial(6).floor(3).ceiling(9));
    for _ in 0..20 {
        sample(&quotas, &clock, TARGET * 3);
        let l = quotas.limit();
        assert!((3..=9).contains(&l), "{l}");
    }
    assert_eq!(
        quotas.limit(),
        3,
        "slow samples: down to the floor, no lower"
    );
    for _ in 0..20 {
        sample(&quotas, &clock, TARGET / 4);
        let l = quotas.limit();
        assert!((3..=9).contains(&l), "{l}");
    }
    assert_eq!(
        quotas.limit(),
        9,
        "fast samples, L in use: up to the ceiling"
    );
}

#[test]
fn new_bounds_clamp_the_limit_at_once() {
    let (quotas, _clock) = quotas(AdaptiveTotal::new(TARGET).initial(50));
    quotas
        .configure(AdaptiveTotal::new(TARGET).floor(60).ceiling(70))
        .unwrap();
    assert_eq!(quotas.limit(), 60);
    let bad = AdaptiveTotal::new(TARGET).floor(80).ceiling(70);
    assert!(quotas.configure(bad).is_err());
    assert_eq!(quotas.settings().bounds(), (60, 70), "nothing changed");
}

#[test]
fn no_sample_is_lost() {
    let (quotas, clock) = quotas(AdaptiveTotal::new(TARGET).initial(40));
    let mut released = 0;
    for round in 0..50u64 {
        let held = fill(&quotas, Priority::Normal, 0);
        released += held.len() as u64;
        for permit in held {
            clock.advance(Duration::from_micros(37 * (round % 7)));
            drop(permit);
        }
        let (folded, open) = quotas.model_samples();
        assert_eq!(folded + open, released, "round {round}");
    }
    assert!(quotas.model_samples().0 > 0, "windows closed");
}

#[test]
fn a_full_stall_lowers_the_limit() {
    let (quotas, clock) = quotas(AdaptiveTotal::new(TARGET).initial(20));
    let stuck = fill(&quotas, Priority::Normal, 0);
    assert_eq!(stuck.len(), 10, "500 ‰ of 20");
    let start = clock.now_ns();
    let step = TARGET / 10;
    let detected = loop {
        clock.advance(step);
        let _ = quotas.try_acquire_as("human", Priority::Critical);
        if quotas.limit() < 20 {
            break Duration::from_nanos(clock.now_ns() - start);
        }
        assert!(clock.now_ns() - start < 10 * 1_000_000, "no stall detected");
    };
    // Two targets of age, less than an epoch of the ring late, and one window.
    assert!(
        detected <= TARGET * 2 + TARGET / 4 + TARGET + step,
        "{detected:?}"
    );
    for _ in 0..200 {
        clock.advance(step);
        let _ = quotas.try_acquire_as("human", Priority::Critical);
    }
    assert_eq!(quotas.limit(), 1, "down to the floor while stalled");
    drop(stuck);
}

#[test]
fn shadow_mode_admits_what_the_total_would_refuse() {
    let (quotas, _clock) = quotas(AdaptiveTotal::new(TARGET).initial(1));
    let first = quotas.try_acquire("a").unwrap();
    quotas.quotas().set_shadow(true);
    let permit = quotas.try_acquire("a").unwrap();
    assert_eq!(
        permit
            .would_have_refused()
            .unwrap()
            .total()
            .unwrap()
            .limit(),
        1
    );
    assert_eq!(quotas.in_flight(), 1, "holds no place in the total");
    assert_eq!(
        quotas.quotas().in_flight("a"),
        1,
        "nor in its actor's count"
    );
    let (folded, open) = quotas.model_samples();
    drop((first, permit));
    assert_eq!(
        quotas.model_samples(),
        (folded, open + 1),
        "one sample, the counted op's"
    );
    quotas.quotas().wait_idle();
    assert_eq!(quotas.in_flight(), 0);
}

#[test]
fn shares_and_settings_are_checked() {
    assert!(Shares::permille(1000, 1).is_ok());
    assert!(Shares::permille(1001, 1).is_err());
    assert!(Shares::permille(10, 0).is_err());
    assert!(AdaptiveTotal::new(Duration::ZERO).validate().is_err());
    assert!(AdaptiveTotal::new(TARGET).floor(0).validate().is_err());
    assert!(Quotas::builder()
        .build_adaptive(AdaptiveTotal::new(TARGET).ceiling(0))
        .is_err());
    let shares = Shares::permille(600, 300).unwrap();
    assert_eq!(Shares::unpacked(shares.packed()), shares);
}

/// A response answered fast but streamed for a long time: its sample is the time to its
/// headers, so L does not fall, and the stream does not age as a stalled writer's op would;
/// its place in the total is held until the permit drops.
#[test]
fn a_long_stream_neither_lowers_the_limit_nor_ages() {
    let (quotas, clock) = quotas(AdaptiveTotal::new(TARGET).initial(20));
    let mut streams = fill(&quotas, Priority::Critical, 0);
    assert_eq!(streams.len(), 20);
    clock.advance(TARGET / 4);
    for stream in &mut streams {
        stream.responded();
        stream.responded(); // a second call does nothing
    }
    assert_eq!(quotas.model_samples(), (0, 20));
    for _ in 0..100 {
        clock.advance(TARGET);
        let _ = quotas.try_acquire_as("late", Priority::Critical);
    }
    assert_eq!(quotas.in_flight(), 20, "the streams hold their places");
    assert!(quotas.limit() >= 20, "L fell: {}", quotas.limit());
    let sampled = |q: &Adaptive| q.model_samples().0 + q.model_samples().1;
    let before = sampled(&quotas);
    drop(streams);
    assert_eq!(quotas.in_flight(), 0);
    assert_eq!(sampled(&quotas), before, "no second sample at the drop");
}

/// The gauges and the counter: L and the latency estimate when a window closes, refusals by
/// class.
#[cfg(feature = "metrics")]
#[test]
fn the_metrics_show_the_limit_the_estimate_and_refusals_by_class() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let labels = crate::metrics::Labels::new().with("test", "adaptive");
    let clock = ManualClock::starting_at(1 << 30);
    let total = AdaptiveTotal::new(TARGET).initial(4);
    let quotas = metrics::with_local_recorder(&recorder, || {
        Quotas::builder()
            .metrics(&labels)
            .build_adaptive_with_clock(total, clock.clone())
    })
    .unwrap();
    let held = fill(&quotas, Priority::Normal, 0);
    assert!(quotas.try_acquire_as("s", Priority::Sheddable).is_err());
    clock.advance(TARGET * 3);
    drop(held); // two samples three targets long; the window is due: L steps down
    let values: std::collections::BTreeMap<String, f64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels: Vec<String> = key.labels().map(|l| l.value().to_owned()).collect();
            let value = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(_) => f64::NAN,
            };
            (format!("{}{:?}", key.name(), labels), value)
        })
        .collect();
    let at = |key: &str| values.get(key).copied();
    assert_eq!(
        at(r#"admit_inflight_total_limit["adaptive"]"#),
        Some(3.0),
        "{values:?}"
    );
    let estimate = at(r#"admit_inflight_latency_seconds["adaptive"]"#).unwrap_or(0.0);
    assert!((estimate - 0.003).abs() < 2e-6, "{values:?}");
    // The ops the total refused are refusals, not admissions.
    assert_eq!(
        at(r#"admit_inflight_decisions_total["adaptive", "admitted"]"#),
        Some(2.0),
        "{values:?}"
    );
    assert_eq!(
        at(r#"admit_inflight_total_refused_total["adaptive", "normal"]"#),
        Some(1.0),
        "{values:?}"
    );
    assert_eq!(
        at(r#"admit_inflight_total_refused_total["adaptive", "sheddable"]"#),
        Some(1.0),
        "{values:?}"
    );
}
