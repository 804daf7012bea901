//! A limiter counting microseconds: 1,000,000 tokens per second per key, exact after any idle
//! period, across epochs (see [`super::epoch`]); the proptest against the reference model with
//! jumps of seconds, days, an epoch ± one tick and 100 years.

use super::*;
use crate::check::limiter::{far_jump, run, LimiterOp, Scenario};
use crate::clock::ManualClock;
use proptest::prelude::*;
use std::time::Duration;

const US: u64 = 1_000;
const SEC: u64 = 1_000_000_000;
const DAY: u64 = 86_400 * SEC;
/// One epoch in nanoseconds.
const EPOCH_NS: u64 = EPOCH_TICKS * US;
const CENTURY: u64 = 100 * 365 * DAY;

fn million_per_second() -> BucketConfig {
    BucketConfig::per_second(1_000_000).unwrap()
}

fn limiter(cap: usize, classes: &[BucketConfig]) -> (Limiter<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .cap(cap)
        .build_with_clock(classes.iter().copied(), clock.clone())
        .unwrap();
    (limiter, clock)
}

fn wait(r: Result<Grant, LimiterRefused>) -> Option<Duration> {
    match r {
        Err(LimiterRefused::Limited(l)) => Some(l.wait()),
        _ => None,
    }
}

#[test]
fn a_million_per_second_accrues_exactly() {
    let (l, clock) = limiter(16, &[million_per_second()]);
    clock.advance_ns(5 * SEC + 123);
    assert!(l.try_acquire_n("k", 0, 1_000_000).is_ok(), "a full burst");
    assert_eq!(
        wait(l.try_acquire("k", 0)),
        Some(Duration::from_nanos(877)),
        "the next token at the next whole microsecond"
    );
    for _ in 0..1_000 {
        clock.advance_ns(US);
        assert!(l.try_acquire("k", 0).is_ok(), "one token per microsecond");
        assert!(l.try_acquire("k", 0).is_err(), "and no more");
    }
    // 250 ms later: exactly 250,000 tokens, no drift.
    clock.advance_ns(250_000 * US);
    let now = clock.now_ns();
    assert_eq!(l.entry_tokens_at("k", 0, now), Some(250_000));
    assert!(l.try_acquire_n("k", 0, 250_000).is_ok());
    assert!(l.try_acquire("k", 0).is_err());
}

#[test]
fn every_idle_period_leaves_a_full_bucket_and_exact_waits() {
    for idle in [
        SEC,
        DAY,
        EPOCH_NS - US,
        EPOCH_NS,
        EPOCH_NS + US,
        3 * EPOCH_NS + 7 * US,
        19 * DAY,
        CENTURY,
    ] {
        let (l, clock) = limiter(16, &[million_per_second().with_burst(10).unwrap()]);
        clock.advance_ns(DAY);
        assert!(l.try_acquire_n("k", 0, 10).is_ok());
        clock.advance_ns(idle);
        let now = clock.now_ns();
        assert_eq!(l.entry_tokens_at("k", 0, now), Some(10), "idle {idle} ns");
        assert!(l.try_acquire_n("k", 0, 10).is_ok(), "idle {idle} ns");
        assert_eq!(
            wait(l.try_acquire("k", 0)),
            Some(Duration::from_micros(1)),
            "idle {idle} ns"
        );
    }
}

#[test]
fn debt_is_carried_exactly_across_a_migration() {
    // Burst 1,000 refilling at one token per 100 µs: a drained key owes 100 ms.
    let config = BucketConfig::new(1_000, Duration::from_micros(100)).unwrap();
    let (l, clock) = limiter(16, &[config]);
    clock.advance_ns(EPOCH_NS - 10 * US);
    assert!(l.try_acquire_n("owes", 0, 1_000).is_ok());
    assert_eq!(l.epochs.as_ref().map(Epochs::number), Some(0));
    // Another key's decision 20 µs later is past the epoch: it migrates every entry.
    clock.advance_ns(20 * US);
    assert!(l.try_acquire("other", 0).is_ok());
    assert_eq!(l.epochs.as_ref().map(Epochs::number), Some(1));
    // 20 µs of 100 ms repaid: still 99,980 µs owed, so no token until 100 µs after the drain.
    let now = clock.now_ns();
    assert_eq!(l.entry_tokens_at("owes", 0, now), Some(0));
    assert_eq!(
        wait(l.try_acquire("owes", 0)),
        Some(Duration::from_micros(80))
    );
    clock.advance_ns(80 * US);
    assert!(l.try_acquire("owes", 0).is_ok());
    assert!(l.try_acquire("owes", 0).is_err());
    clock.advance_ns(100 * SEC);
    let now = clock.now_ns();
    assert_eq!(l.entry_tokens_at("owes", 0, now), Some(1_000));
}

#[test]
fn a_key_idle_past_every_wrap_horizon_is_judged_exactly() {
    let config = million_per_second().with_burst(3).unwrap();
    let (l, clock) = limiter(64, &[config]);
    clock.advance_ns(SEC);
    assert!(l.try_acquire_n("idle", 0, 3).is_ok());
    // Twelve epochs pass (the 2-bit tag wraps three times), with a decision in each.
    for step in 0..12u32 {
        clock.advance_ns(EPOCH_NS + US);
        assert!(l.try_acquire(&step, 0).is_ok());
    }
    assert_eq!(l.epochs.as_ref().map(Epochs::number), Some(12));
    // The 39-bit offset alone would have wrapped after 2^39 µs (6.4 days): 19 days passed.
    let now = clock.now_ns();
    assert_eq!(l.entry_tokens_at("idle", 0, now), Some(3));
    assert!(l.try_acquire_n("idle", 0, 3).is_ok());
    assert!(l.try_acquire("idle", 0).is_err());
    // And a century with no decision at all, then one.
    clock.advance_ns(CENTURY);
    let now = clock.now_ns();
    assert_eq!(l.entry_tokens_at("idle", 0, now), Some(3));
    assert!(l.try_acquire_n("idle", 0, 3).is_ok());
    assert_eq!(
        wait(l.try_acquire("idle", 0)),
        Some(Duration::from_micros(1))
    );
}

#[test]
fn a_millisecond_class_shares_a_microsecond_limiter_or_is_refused_by_name() {
    let per_second = BucketConfig::per_second(10).unwrap();
    let (l, clock) = limiter(16, &[per_second, million_per_second()]);
    assert_eq!(l.config(0), Some(per_second), "the config reads as given");
    clock.advance_ns(DAY);
    assert!(l.try_acquire_n("k", 0, 10).is_ok());
    assert_eq!(
        wait(l.try_acquire("k", 0)),
        Some(Duration::from_millis(100))
    );
    assert!(l.try_acquire_n("k", 1, 1_000_000).is_ok());
    // A class whose refill takes a week fits milliseconds, not a microsecond limiter.
    let weekly = BucketConfig::new(7, Duration::from_secs(86_400)).unwrap();
    let err = Limiter::builder()
        .build([weekly, million_per_second()])
        .unwrap_err();
    assert!(matches!(
        err,
        LimiterConfigError::CoarseClassTooLong {
            class: 0,
            fine_class: 1,
            ..
        }
    ));
    assert!(err.to_string().contains("class 0"), "{err}");
    assert!(
        Limiter::builder().build([weekly]).is_ok(),
        "alone it is fine"
    );
}

#[test]
fn the_overflow_bucket_counts_microseconds_too() {
    let config = million_per_second().with_burst(2).unwrap();
    let (l, clock) = limiter(1, &[config]);
    clock.advance_ns(SEC);
    assert!(l.try_acquire_n("owner", 0, 2).is_ok());
    assert!(l.try_acquire_n("other", 0, 2).unwrap().via_overflow());
    assert_eq!(
        wait(l.try_acquire("other", 0)),
        Some(Duration::from_micros(1))
    );
}

#[test]
fn micro_corpus_scenario_crosses_epochs() {
    let mut ops = Vec::new();
    for pick in 0..9u8 {
        ops.push(LimiterOp::Charge {
            id: u32::from(pick % 3),
            class: pick % 2,
            n: 2,
        });
        ops.push(LimiterOp::Advance { ns: far_jump(pick) });
        ops.push(LimiterOp::Back { ns: 3 * US });
        ops.push(LimiterOp::Peek {
            id: 1,
            class: 0,
            n: 1,
        });
        ops.push(LimiterOp::Sweep);
    }
    run(&Scenario {
        cap: 2,
        window: None,
        configs: vec![(3, 1), (2, 250)],
        ops,
        micros: true,
    });
}

fn micro_op() -> impl Strategy<Value = LimiterOp> {
    prop_oneof![
        6 => (0u32..10, 0u8..3, 0u8..=255).prop_map(|(id, class, n)| LimiterOp::Charge { id, class, n }),
        2 => (any::<u32>(), 0u8..3, 1u8..3).prop_map(|(id, class, n)| LimiterOp::Charge { id, class, n }),
        1 => (0u32..10, 0u8..3, 0u8..4).prop_map(|(id, class, n)| LimiterOp::Peek { id, class, n }),
        3 => (0u64..2_000 * US).prop_map(|ns| LimiterOp::Advance { ns }),
        2 => any::<u8>().prop_map(|pick| LimiterOp::Advance { ns: far_jump(pick) }),
        1 => Just(LimiterOp::Sweep),
        1 => (0u64..40 * US).prop_map(|ns| LimiterOp::Back { ns }),
        1 => prop_oneof![0u64..2_000 * US, 0u64..2_000_000 * US].prop_map(|ns| LimiterOp::ClockBack { ns }),
        2 => (any::<u8>(), 0u8..4, prop::bool::weighted(0.2)).prop_map(|(pick, n, elsewhere)| LimiterOp::Refund { pick, n, elsewhere }),
        1 => (0u32..10, any::<u64>()).prop_map(|(id, ns)| LimiterOp::Ahead { id, ns }),
        1 => (0u8..4, 1u32..300, 1u32..1_000).prop_map(|(class, burst, interval)| LimiterOp::SetConfig { class, burst, interval, fine: true }),
    ]
}

fn micro_config() -> impl Strategy<Value = (u32, u32)> {
    let burst = prop_oneof![1u32..300, Just(1_000_000)];
    let interval = prop_oneof![Just(1u32), 1u32..1_000];
    (burst, interval)
}

proptest! {
    #![proptest_config(crate::check::proptest_config(256))]

    /// 1,000,000 tokens per second and every other microsecond rate, against the reference
    /// model in absolute `u128` time, with jumps of seconds, days, an epoch ± one tick and
    /// 100 years (see `check::limiter::run`).
    #[cfg_attr(
        miri,
        ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
    )]
    #[test]
    fn microsecond_limiter_matches_the_model(
        cap in 1usize..15,
        full_window in any::<bool>(),
        configs in proptest::collection::vec(micro_config(), 2..=3),
        ops in proptest::collection::vec(micro_op(), 1..150),
    ) {
        let (cap, window) = if full_window { (cap * 3, Some(usize::MAX)) } else { (cap, None) };
        run(&Scenario { cap, window, configs, ops, micros: true });
    }
}
