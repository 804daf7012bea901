//! Exact counts after scripted runs under a `ManualClock`, read back from `metrics-util`'s
//! `DebuggingRecorder`, set as the thread's local recorder while each instance registers.

use crate::fairness::Quotas;
use crate::metrics::{Labels, MetricsSink};
use crate::quota::{Quota, RateLimit};
use crate::registrar::{Bucket, CountingSink, RegistrarConfig, RegistrarLimiter, Verb};
use crate::{BucketConfig, Clock, Limiter, ManualClock, TokenBucket};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use std::collections::BTreeMap;
use std::time::Duration;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Every metric the recorder has seen, as `name{k=v,...}` (labels in registration order) and
/// its value. A snapshot resets the recorder's counters and gauges, so take one per test.
fn read(snapshotter: &Snapshotter) -> BTreeMap<String, f64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let value = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(_) => f64::NAN,
            };
            (format!("{}{{{}}}", key.name(), labels.join(",")), value)
        })
        .collect()
}

fn expect(entries: &[(&str, f64)]) -> BTreeMap<String, f64> {
    entries.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[test]
fn limiter_counts_each_outcome_per_class_and_keeps_its_gauges() -> TestResult {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let labels = Labels::new().with("test", "limiter");
    // Cap 2. Class 0: burst 2, a token every 10 s. Class 1: burst 1 a minute.
    let classes = [
        BucketConfig::new(2, Duration::from_secs(10))?,
        BucketConfig::new(1, Duration::from_secs(60))?,
    ];
    let limiter = metrics::with_local_recorder(&recorder, || {
        Limiter::builder()
            .cap(2)
            .metrics(&labels)
            .build_with_clock(classes, clock.clone())
    })?;
    let grants = |id: &str, class: usize, times: usize| -> Vec<Option<bool>> {
        (0..times)
            .map(|_| {
                limiter
                    .try_acquire(id, class)
                    .ok()
                    .map(|g| g.via_overflow())
            })
            .collect()
    };
    // Own entries: alice spends her burst, bob takes one; the table is then full.
    assert_eq!(grants("alice", 0, 3), [Some(false), Some(false), None]);
    assert_eq!(grants("bob", 0, 1), [Some(false)]);
    // Drained entries are not reclaimed: carol and alice's class 1 pay with the overflow.
    assert_eq!(grants("carol", 0, 3), [Some(true), Some(true), None]);
    assert_eq!(grants("alice", 1, 2), [Some(true), None]);
    clock.advance(Duration::from_secs(10));
    assert_eq!(grants("alice", 0, 1), [Some(false)]);
    let key = crate::HashedActor::new("alice");
    assert!(
        limiter.try_acquire_hashed(&key, 0, 1).is_err(),
        "counted too"
    );
    // Not decisions: an unknown class, more than the burst, a charge of nothing (refused as
    // one token would be: alice is empty, and it takes nothing), a reading ahead.
    assert!(limiter.try_acquire("alice", 2).is_err());
    assert!(limiter.try_acquire_n("alice", 0, 3).is_err());
    assert!(limiter.try_acquire_n("alice", 0, 0).is_err());
    assert!(limiter.try_acquire_at("alice", 0, u64::MAX).is_err());
    // Bob is full again at 10 s: the scan frees his entry, and the gauge follows.
    assert_eq!(limiter.reclaim_full_at(clock.now_ns())?, 1);
    assert_eq!(limiter.overflow_charges(0), Some(3));
    // Shadow mode: alice's class-0 bucket is empty, and the charge is admitted instead.
    limiter.set_shadow(0, true)?;
    assert!(limiter
        .try_acquire("alice", 0)?
        .would_have_refused()
        .is_some());
    let name = "admit_limiter_decisions_total{test=limiter";
    assert_eq!(
        read(&snapshotter),
        expect(&[
            (&format!("{name},class=0,outcome=admitted}}"), 4.0),
            (&format!("{name},class=0,outcome=overflow}}"), 2.0),
            (&format!("{name},class=0,outcome=refused}}"), 3.0),
            (&format!("{name},class=0,outcome=would_refuse}}"), 1.0),
            (&format!("{name},class=1,outcome=admitted}}"), 0.0),
            (&format!("{name},class=1,outcome=overflow}}"), 1.0),
            (&format!("{name},class=1,outcome=refused}}"), 1.0),
            (&format!("{name},class=1,outcome=would_refuse}}"), 0.0),
            ("admit_limiter_entries{test=limiter}", 1.0),
            ("admit_limiter_cap{test=limiter}", 2.0),
        ])
    );
    Ok(())
}

#[test]
fn in_flight_quotas_count_each_outcome_and_set_the_gauges_when_read() -> TestResult {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let labels = Labels::new().with("test", "inflight");
    let quotas = metrics::with_local_recorder(&recorder, || {
        Quotas::builder()
            .quota(1)
            .actors(1)
            .metrics(&labels)
            .build()
    })?;
    let a = quotas.try_acquire("a")?;
    assert!(quotas.try_acquire("a").is_err(), "a's own quota");
    // The one entry is a's, busy: b's op is counted in the shared overflow (cap 1), c's is not.
    let b = quotas.try_acquire_owned("b")?;
    assert!(b.via_overflow());
    let refused = quotas.try_acquire("c").err();
    assert!(refused.is_some_and(|r| r.via_overflow()));
    drop(a);
    let a = quotas.try_acquire_owned("a")?;
    assert!(!a.via_overflow());
    assert_eq!(
        quotas.total_in_flight(),
        2,
        "a in its entry, b in the overflow"
    );
    // Shadow mode: a's second op is admitted instead of refused, holding no place.
    quotas.set_shadow(true);
    let shadow = quotas.try_acquire("a")?;
    assert!(shadow.would_have_refused().is_some());
    assert_eq!(
        read(&snapshotter),
        expect(&[
            (
                "admit_inflight_decisions_total{test=inflight,outcome=admitted}",
                2.0
            ),
            (
                "admit_inflight_decisions_total{test=inflight,outcome=overflow}",
                1.0
            ),
            (
                "admit_inflight_decisions_total{test=inflight,outcome=refused}",
                2.0
            ),
            (
                "admit_inflight_decisions_total{test=inflight,outcome=would_refuse}",
                1.0
            ),
            ("admit_inflight_ops{test=inflight}", 2.0),
            ("admit_inflight_overflow_ops{test=inflight}", 1.0),
        ])
    );
    drop((a, b, shadow));
    Ok(())
}

#[test]
fn the_volume_quota_counts_admitted_and_refused_writes() -> TestResult {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let labels = Labels::new().with("test", "volume");
    let quota = Quota::new(2, 1_024, Duration::from_secs(60))?;
    let limit = metrics::with_local_recorder(&recorder, || {
        RateLimit::with_clock(quota, clock.clone()).with_metrics(&labels)
    });
    assert!(limit.try_acquire("s", 100).is_ok());
    assert!(limit.try_acquire_at("s", 100, clock.now_ns()).is_ok());
    assert!(limit.try_acquire("s", 100).is_err(), "two events a window");
    assert!(
        limit.try_acquire("t", 2_000).is_err(),
        "more than a window's bytes"
    );
    assert!(
        limit.try_acquire_at("s", 1, u64::MAX).is_err(),
        "ahead: not a decision"
    );
    clock.advance(Duration::from_secs(60));
    assert!(limit.try_acquire("s", 100).is_ok(), "a new window");
    limit.set_shadow(true);
    assert!(
        limit.try_acquire("t", 2_000).is_ok(),
        "shadow mode admits it"
    );
    assert_eq!(
        read(&snapshotter),
        expect(&[
            (
                "admit_volume_decisions_total{test=volume,outcome=admitted}",
                3.0
            ),
            (
                "admit_volume_decisions_total{test=volume,outcome=refused}",
                2.0
            ),
            (
                "admit_volume_decisions_total{test=volume,outcome=would_refuse}",
                1.0
            ),
        ])
    );
    Ok(())
}

#[test]
fn the_token_bucket_counts_admitted_and_refused_takes() -> TestResult {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let labels = Labels::new().with("test", "bucket");
    let bucket = metrics::with_local_recorder(&recorder, || {
        Ok::<_, crate::BucketConfigError>(
            TokenBucket::new(BucketConfig::per_second(1)?).with_metrics(&labels),
        )
    })?;
    assert!(bucket.try_acquire(&clock).is_ok());
    assert!(bucket.try_acquire(&clock).is_err());
    assert!(
        bucket.try_acquire_n(&clock, 2).is_err(),
        "over the burst: not counted"
    );
    assert!(
        bucket.try_acquire_n(&clock, 0).is_ok(),
        "nothing: not counted"
    );
    clock.advance(Duration::from_secs(1));
    assert!(bucket.try_acquire_at(clock.now_ns()).is_ok());
    bucket.set_shadow(true);
    assert!(bucket.try_acquire(&clock).is_ok(), "shadow mode admits it");
    assert_eq!(
        read(&snapshotter),
        expect(&[
            (
                "admit_bucket_decisions_total{test=bucket,outcome=admitted}",
                2.0
            ),
            (
                "admit_bucket_decisions_total{test=bucket,outcome=refused}",
                1.0
            ),
            (
                "admit_bucket_decisions_total{test=bucket,outcome=would_refuse}",
                1.0
            ),
        ])
    );
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Mint,
    Retire,
}

impl Verb for Op {
    const ALL: &'static [Self] = &[Op::Mint, Op::Retire];
    fn index(self) -> usize {
        self as usize
    }
    fn name(self) -> &'static str {
        match self {
            Op::Mint => "mint",
            Op::Retire => "retire",
        }
    }
}

#[test]
fn the_registrar_sink_counts_per_verb_and_bucket_and_forwards() -> TestResult {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let labels = Labels::new().with("test", "registrar");
    let config = RegistrarConfig {
        rate_limit_predecision_refusal_burst: 1,
        rate_limit_admission_burst: 1,
        ..RegistrarConfig::default()
    };
    let sink = metrics::with_local_recorder(&recorder, || {
        MetricsSink::<Op>::new(CountingSink::new(), &labels)
    });
    let registrar = metrics::with_local_recorder(&recorder, || {
        RegistrarLimiter::<Op>::builder(config)
            .cap(8)
            .metrics(&labels)
            .build_with_clock(sink, ManualClock::new())
    })?;
    for _ in 0..2 {
        let _ = registrar.enter_predecision(b"host-1", Op::Mint);
    }
    for _ in 0..3 {
        let _ = registrar.enter_admission(b"host-1", Op::Retire);
    }
    let inner = registrar.sink().inner();
    assert_eq!(
        (
            inner.count(Bucket::PredecisionRefusal),
            inner.count(Bucket::Admission)
        ),
        (1, 2)
    );
    let name = "admit_registrar_limited_total{test=registrar";
    let decisions = "admit_limiter_decisions_total{test=registrar";
    // The limiter registers every class × outcome; the ones that stayed at 0 are left out.
    let mut seen = read(&snapshotter);
    seen.retain(|key, value| !(key.starts_with(decisions) && *value == 0.0));
    assert_eq!(
        seen,
        expect(&[
            (
                &format!("{name},verb=mint,bucket=predecision_refusal}}"),
                1.0
            ),
            (&format!("{name},verb=mint,bucket=admission}}"), 0.0),
            (
                &format!("{name},verb=retire,bucket=predecision_refusal}}"),
                0.0
            ),
            (&format!("{name},verb=retire,bucket=admission}}"), 2.0),
            // The profile's own limiter: class = verb × 2 + bucket (mint 0, 1; retire 2, 3).
            (&format!("{decisions},class=0,outcome=admitted}}"), 1.0),
            (&format!("{decisions},class=0,outcome=refused}}"), 1.0),
            (&format!("{decisions},class=3,outcome=admitted}}"), 1.0),
            (&format!("{decisions},class=3,outcome=refused}}"), 2.0),
            ("admit_limiter_entries{test=registrar}", 2.0),
            ("admit_limiter_cap{test=registrar}", 8.0),
        ])
    );
    Ok(())
}

#[test]
fn nothing_is_recorded_unless_attached_under_a_recorder() -> TestResult {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let config = BucketConfig::per_second(1)?;
    // Not attached: nothing registered, whatever the recorder.
    let plain = metrics::with_local_recorder(&recorder, || Limiter::builder().build([config]))?;
    // Attached before any recorder: no-op handles for good, even if one is set later.
    let early = Limiter::builder().metrics(&Labels::new()).build([config])?;
    metrics::with_local_recorder(&recorder, || {
        for limiter in [&plain, &early] {
            assert!(limiter.try_acquire("x", 0).is_ok());
            assert!(limiter.try_acquire("x", 0).is_err());
        }
    });
    assert_eq!(read(&snapshotter), BTreeMap::new());
    Ok(())
}

#[test]
fn two_instances_with_their_own_labels_are_two_series() -> TestResult {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let build = |name: &'static str| {
        metrics::with_local_recorder(&recorder, || {
            Quotas::builder()
                .metrics(&Labels::new().with("writer", name))
                .build()
        })
    };
    let (one, two) = (build("one")?, build("two")?);
    let _held = (
        one.try_acquire("a")?,
        one.try_acquire("b")?,
        two.try_acquire("a")?,
    );
    let read = read(&snapshotter);
    assert_eq!(
        read.get("admit_inflight_decisions_total{writer=one,outcome=admitted}"),
        Some(&2.0)
    );
    assert_eq!(
        read.get("admit_inflight_decisions_total{writer=two,outcome=admitted}"),
        Some(&1.0)
    );
    Ok(())
}
