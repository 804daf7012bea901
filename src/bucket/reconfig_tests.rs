//! The rules of "Limits changed at runtime" (see the module docs), one test each.

use super::{BucketConfig, BucketConfigError, TokenBucket};
use std::time::Duration;

const MS: u64 = 1_000_000;

fn per(burst: u32, interval_ms: u64) -> BucketConfig {
    BucketConfig::new(burst, Duration::from_millis(interval_ms)).unwrap()
}

#[test]
fn a_full_bucket_stays_full_through_any_change() {
    let bucket = TokenBucket::new(per(5, 100));
    for config in [per(1, 100), per(50, 1), per(3, 60_000), per(5, 100)] {
        bucket.set_config(config).unwrap();
        assert!(bucket.is_full_at(7 * MS), "{config:?}");
        assert_eq!(bucket.available_at(7 * MS), config.burst(), "{config:?}");
    }
}

#[test]
fn a_drained_bucket_is_full_again_at_the_same_instant_whatever_the_change() {
    // Burst 10 at one per 100 ms, drained at 0: full again at 1 s.
    let bucket = TokenBucket::new(per(10, 100));
    assert!(bucket.try_acquire_n_at(10, 0).is_ok());
    for config in [per(20, 50), per(10, 1_000), per(1, 100), per(1_000, 1)] {
        bucket.set_config(config).unwrap();
        assert!(
            !bucket.is_full_at(1_000 * MS - 1),
            "{config:?}: minted a full bucket"
        );
        assert!(bucket.is_full_at(1_000 * MS), "{config:?}: debt grew");
        assert_eq!(
            bucket.wait_for_at(config.burst(), 0),
            Ok(Duration::from_secs(1)),
            "{config:?}: the time owed changed"
        );
    }
}

#[test]
fn with_the_interval_unchanged_the_tokens_owed_carry_over_exactly() {
    let bucket = TokenBucket::new(per(10, 100));
    assert!(bucket.try_acquire_n_at(4, 0).is_ok()); // owes 4 tokens, 400 ms
    bucket.set_config(per(6, 100)).unwrap();
    assert_eq!(bucket.available_at(0), 2, "lowered by 4: holds 6 - 4");
    bucket.set_config(per(20, 100)).unwrap();
    assert_eq!(bucket.available_at(0), 16, "raised: holds 20 - 4");
    // Lowered below the debt: empty, and the debt is not clamped: the first token comes when
    // 2 × 100 ms are owed, at 200 ms (not at 100 ms, as a fresh drain of burst 3 would).
    bucket.set_config(per(3, 100)).unwrap();
    assert_eq!(bucket.available_at(0), 0);
    assert_eq!(bucket.wait_for_at(1, 0), Ok(Duration::from_millis(200)));
    assert!(bucket.try_acquire_at(200 * MS - 1).is_err());
    assert!(bucket.try_acquire_at(200 * MS).is_ok());
}

#[test]
fn a_change_applies_to_the_next_take_and_is_what_config_reads() {
    let bucket = TokenBucket::new(per(1, 1_000));
    assert!(bucket.try_acquire_at(0).is_ok());
    assert!(bucket.try_acquire_at(0).is_err());
    bucket.set_config(per(2, 1_000)).unwrap();
    assert_eq!(bucket.config(), per(2, 1_000));
    assert!(
        bucket.try_acquire_at(0).is_ok(),
        "the raise: one more token"
    );
    match bucket.try_acquire_n_at(3, 0) {
        Err(super::BucketRefused::ExceedsBurst { requested, burst }) => {
            assert_eq!((requested, burst), (3, 2), "judged under the new burst")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_unit_is_fixed_at_construction_and_a_misfit_changes_nothing() {
    let millis = TokenBucket::new(per(5, 100));
    let fine = BucketConfig::new(5, Duration::from_micros(1_500)).unwrap();
    let err = millis.set_config(fine).unwrap_err();
    assert_eq!(
        err,
        BucketConfigError::DoesNotFitUnit {
            burst: 5,
            refill_interval: Duration::from_micros(1_500),
            counted_in_micros: false
        }
    );
    assert!(err.to_string().contains("whole milliseconds"), "{err}");
    assert_eq!(millis.check_config(&fine), Err(err));
    assert_eq!(millis.config(), per(5, 100), "unchanged");

    let micros = TokenBucket::new(fine);
    micros.set_config(per(7, 20)).unwrap();
    assert_eq!(
        micros.config(),
        per(7, 20),
        "whole milliseconds, counted in µs"
    );
    assert!(micros.try_acquire_n_at(7, 0).is_ok());
    assert_eq!(micros.wait_for_at(1, 0), Ok(Duration::from_millis(20)));
    // 4.6 days of span does not fit microseconds.
    let long = per(100_000, 4_000);
    let err = micros.set_config(long).unwrap_err();
    assert!(matches!(
        err,
        BucketConfigError::DoesNotFitUnit {
            counted_in_micros: true,
            ..
        }
    ));
    assert!(err.to_string().contains("3.18 days"), "{err}");
    assert!(micros.check_config(&long).is_err());
    assert_eq!(micros.config(), per(7, 20), "unchanged");
}
