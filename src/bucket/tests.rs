//! One test per rule in the module docs, then the proptests against the reference model.

use super::*;
use crate::check::bucket::{run, BucketOp};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn bucket(burst: u32, interval_ms: u32) -> TokenBucket {
    TokenBucket::new(BucketConfig::new(burst, interval_ms).unwrap())
}

fn drain(b: &TokenBucket, now: u64) -> u32 {
    let mut taken = 0;
    while b.try_take_at(now).is_ok() {
        taken += 1;
    }
    taken
}

#[test]
fn starts_full_and_holds_at_most_burst() {
    let b = bucket(5, 100);
    assert!(b.is_full_at(0));
    assert_eq!(b.available_at(0), 5);
    // However long it sits, it never holds more than the burst.
    assert_eq!(b.available_at(u64::MAX / 2), 5);
    assert_eq!(drain(&b, 10 * 1000 * MS), 5);
}

#[test]
fn one_token_per_interval_computed_lazily() {
    let b = bucket(3, 100);
    assert_eq!(drain(&b, 0), 3);
    assert_eq!(b.available_at(99 * MS), 0);
    assert_eq!(b.available_at(100 * MS), 1);
    assert_eq!(b.available_at(250 * MS), 2);
    assert_eq!(b.available_at(300 * MS), 3);
    assert_eq!(b.available_at(10_000 * MS), 3);
}

#[test]
fn no_drift_n_intervals_yield_exactly_n_tokens_however_reads_fall() {
    // Drain a bucket big enough never to refill completely, then take whatever has accrued at
    // awkward moments (every 37.000123 ms against a 100 ms interval). Whatever the phase of
    // the reads, 100 whole intervals must have yielded exactly 100 tokens.
    let b = bucket(1_000, 100);
    assert_eq!(drain(&b, 0), 1_000);
    let mut granted = 0;
    let mut now = 0;
    while now < 100 * 100 * MS {
        granted += drain(&b, now);
        now += 37 * MS + 123;
    }
    granted += drain(&b, 100 * 100 * MS);
    assert_eq!(granted, 100, "100 intervals must yield exactly 100 tokens");
}

#[test]
fn an_earlier_reading_never_mints() {
    let b = bucket(2, 100);
    assert_eq!(drain(&b, 1_000 * MS), 2);
    // The clock steps back a long way: nothing accrues, nothing is granted.
    assert_eq!(b.available_at(0), 0);
    assert!(b.try_take_at(0).is_err());
    assert!(b.try_take_at(999 * MS).is_err());
    // And the newer reading still sees what it saw.
    assert_eq!(b.available_at(1_000 * MS), 0);
    assert_eq!(b.available_at(1_100 * MS), 1);
}

#[test]
fn drained_at_a_boundary_never_yields_a_second_burst() {
    let b = bucket(10, 100);
    // Drain exactly on an interval boundary, then look just after it.
    assert_eq!(drain(&b, 500 * MS), 10);
    assert_eq!(b.available_at(500 * MS + 1), 0);
    assert_eq!(b.available_at(599 * MS), 0);
    assert_eq!(b.available_at(600 * MS), 1);
    assert_eq!(drain(&b, 600 * MS), 1);
}

#[test]
fn refusal_reports_exact_wait_and_whole_seconds() {
    let b = bucket(1, 1_500);
    assert!(b.try_take_at(0).is_ok());
    let now = 200 * MS + 7;
    let err = b.try_take_at(now).unwrap_err();
    assert_eq!(err.wait(), Some(Duration::from_nanos(1_500 * MS - now)));
    assert_eq!(err.retry_after_secs(), Some(2));
    // Exactly the wait later: granted. One nanosecond sooner: refused.
    let at = now + u64::try_from(err.wait().unwrap().as_nanos()).unwrap();
    assert!(b.try_take_at(at - 1).is_err());
    assert!(b.try_take_at(at).is_ok());
}

#[test]
fn retry_after_is_never_zero_while_refused() {
    let b = bucket(1, 1);
    assert!(b.try_take_at(0).is_ok());
    let err = b.try_take_at(0).unwrap_err();
    assert_eq!(err.wait(), Some(Duration::from_millis(1)));
    assert_eq!(err.retry_after_secs(), Some(1));
}

#[test]
fn more_than_burst_is_a_distinct_error() {
    let b = bucket(4, 10);
    assert_eq!(
        b.try_take_n_at(5, 0),
        Err(TakeError::ExceedsBurst {
            requested: 5,
            burst: 4
        })
    );
    assert_eq!(b.try_take_n_at(5, 0).unwrap_err().wait(), None);
    assert_eq!(
        b.wait_for_at(5, 0),
        Err(ExceedsBurst {
            requested: 5,
            burst: 4
        })
    );
    // It consumed nothing.
    assert_eq!(b.available_at(0), 4);
}

#[test]
fn weighted_take_is_all_or_nothing() {
    let b = bucket(4, 10);
    assert!(b.try_take_n_at(3, 0).is_ok());
    assert!(b.try_take_n_at(2, 0).is_err());
    assert_eq!(b.available_at(0), 1);
    assert_eq!(b.wait_for_at(2, 0), Ok(Duration::from_millis(10)));
}

#[test]
fn peeks_consume_nothing() {
    let b = bucket(2, 10);
    for _ in 0..10 {
        assert_eq!(b.available_at(0), 2);
        assert_eq!(b.wait_for_at(2, 0), Ok(Duration::ZERO));
        assert!(b.is_full_at(0));
    }
}

#[test]
fn refund_gives_back_never_above_burst() {
    let b = bucket(3, 100);
    assert_eq!(drain(&b, 0), 3);
    b.refund_at(2, 0);
    assert_eq!(b.available_at(0), 2);
    b.refund_at(10, 0);
    assert_eq!(b.available_at(0), 3);
    assert!(b.is_full_at(0));
    assert_eq!(drain(&b, 0), 3);
}

#[test]
fn readings_past_the_time_budget_are_clamped_not_wrapped() {
    let b = bucket(1, 1);
    assert!(b.try_take_at(u64::MAX).is_ok());
    let err = b.try_take_at(u64::MAX).unwrap_err();
    assert!(err.retry_after_secs().unwrap() >= 1);
    assert_eq!(b.available_at(u64::MAX), 0);
}

#[test]
fn the_clock_form_reads_the_injected_clock() {
    let clock = crate::clock::ManualClock::new();
    let b = bucket(1, 1_000);
    assert!(b.try_take(&clock).is_ok());
    assert!(b.try_take(&clock).is_err());
    clock.advance(Duration::from_secs(1));
    assert!(b.try_take(&clock).is_ok());
}

fn op_strategy() -> impl Strategy<Value = BucketOp> {
    prop_oneof![
        3 => (0u64..3_000_000_000).prop_map(|ns| BucketOp::Advance { ns }),
        1 => (0u64..2_000_000).prop_map(|ns| BucketOp::Advance { ns }),
        1 => (0u64..5_000_000_000).prop_map(|ns| BucketOp::StepBack { ns }),
        4 => (0u32..12).prop_map(|n| BucketOp::Take { n }),
        2 => (0u32..12).prop_map(|n| BucketOp::Peek { n }),
        1 => (0u32..12).prop_map(|n| BucketOp::Refund { n }),
    ]
}

proptest! {
    #![proptest_config(crate::check::proptest_config(512))]

    /// Identical answers and waits to the `u128` reference over random histories, with the
    /// no-mint and retry invariants checked after every step (see `check::bucket::run`).
    #[test]
    fn matches_the_reference_model(
        burst in 1u32..10,
        interval_ms in 1u32..2_000,
        start_ns in 0u64..10_000_000_000,
        ops in proptest::collection::vec(op_strategy(), 1..200),
    ) {
        run(burst, interval_ms, start_ns, &ops);
    }

    /// The retry contract with real takes: waiting exactly the reported wait succeeds.
    #[test]
    fn waiting_the_reported_wait_succeeds(
        burst in 1u32..8,
        interval_ms in 1u32..5_000,
        drained_at in 0u64..1_000_000_000_000,
        later in 0u64..10_000_000_000,
        n in 1u32..8,
    ) {
        prop_assume!(n <= burst);
        let early = bucket(burst, interval_ms);
        let exact = bucket(burst, interval_ms);
        for b in [&early, &exact] {
            prop_assert!(b.try_take_n_at(burst, drained_at).is_ok());
        }
        let now = drained_at + later;
        match exact.try_take_n_at(n, now) {
            Ok(()) => {}
            Err(err) => {
                let wait = u64::try_from(err.wait().unwrap().as_nanos()).unwrap();
                prop_assert!(wait > 0);
                prop_assert!(early.try_take_n_at(n, now + wait - 1).is_err());
                prop_assert!(exact.try_take_n_at(n, now + wait).is_ok());
            }
        }
    }
}
