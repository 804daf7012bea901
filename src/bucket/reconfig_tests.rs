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
        bucket.set_config_at(config, 7 * MS).unwrap();
        assert!(bucket.is_full_at(7 * MS), "{config:?}");
        assert_eq!(bucket.available_at(7 * MS), config.burst(), "{config:?}");
    }
}

#[test]
fn the_tokens_owed_carry_over_whatever_the_change() {
    // Burst 10 at one per 100 ms, 4 taken at 0: owes 4 tokens (400 ms).
    for config in [
        per(20, 50),
        per(10, 1_000),
        per(6, 100),
        per(1_000, 1),
        per(4, 250),
    ] {
        let bucket = TokenBucket::new(per(10, 100));
        assert!(bucket.try_acquire_n_at(4, 0).is_ok());
        bucket.set_config_at(config, 0).unwrap();
        assert_eq!(
            bucket.available_at(0),
            config.burst() - 4,
            "{config:?}: the 4 tokens owed did not carry over"
        );
        // And they come back one per new interval.
        let interval = u64::try_from(config.refill_interval().as_nanos()).unwrap();
        assert_eq!(bucket.available_at(4 * interval - 1), config.burst() - 1);
        assert!(bucket.is_full_at(4 * interval), "{config:?}");
    }
}

#[test]
fn a_slower_rate_mints_nothing_for_an_actor_that_just_drained() {
    // 100/s with a burst of 100, drained, then cut to 1/s.
    let bucket = TokenBucket::new(BucketConfig::per_second(100).unwrap());
    assert!(bucket.try_acquire_n_at(100, 0).is_ok());
    let slow = BucketConfig::per_second(1)
        .unwrap()
        .with_burst(100)
        .unwrap();
    bucket.set_config_at(slow, 0).unwrap();
    assert_eq!(
        bucket.available_at(0),
        0,
        "minted tokens earned under neither config"
    );
    assert!(bucket.try_acquire_at(999 * MS).is_err());
    assert!(
        bucket.try_acquire_at(1_000 * MS).is_ok(),
        "one per second from the change"
    );
}

#[test]
fn a_debt_beyond_a_full_new_burst_is_kept_and_repaid_at_the_new_rate() {
    // 100/s with a burst of 100, drained at 0: owes 100 tokens, 1 s.
    let drained = || {
        let bucket = TokenBucket::new(BucketConfig::per_second(100).unwrap());
        assert!(bucket.try_acquire_n_at(100, 0).is_ok());
        bucket
    };
    // Cut to 10 per 1 s: the 100 tokens owed are 100 s; the first token once 9 are left owed.
    let bucket = drained();
    bucket.set_config_at(per(10, 1_000), 0).unwrap();
    assert_eq!(bucket.wait_for_at(10, 0), Ok(Duration::from_secs(100)));
    assert_eq!(bucket.wait_for_at(1, 0), Ok(Duration::from_secs(91)));
    // Cut to 1 per 20 ms: 100 tokens are 2 s.
    let bucket = drained();
    bucket.set_config_at(per(1, 20), 0).unwrap();
    assert_eq!(bucket.wait_for_at(1, 0), Ok(Duration::from_secs(2)));
}

/// A cut and its revert forgave the debt: burst 100 at 100/s, drained at 0 (owes 1 s), cut
/// to burst 1 at 1/s at 0, reverted at 0: the bucket held 99 tokens at 0.
#[test]
fn a_cut_and_its_revert_forgive_nothing() {
    let bucket = TokenBucket::new(BucketConfig::per_second(100).unwrap());
    assert!(bucket.try_acquire_n_at(100, 0).is_ok());
    let cut = BucketConfig::per_second(1).unwrap();
    for _ in 0..3 {
        bucket.set_config_at(cut, 0).unwrap();
        assert_eq!(bucket.available_at(0), 0);
        bucket
            .set_config_at(BucketConfig::per_second(100).unwrap(), 0)
            .unwrap();
        assert_eq!(bucket.available_at(0), 0, "the revert handed out tokens");
        assert_eq!(bucket.wait_for_at(1, 0), Ok(Duration::from_millis(10)));
        assert_eq!(bucket.wait_for_at(100, 0), Ok(Duration::from_secs(1)));
    }
    // Burst only, then rate only, then both back: still the 100 tokens of 1 s.
    bucket
        .set_config_at(
            BucketConfig::per_second(100)
                .unwrap()
                .with_burst(1)
                .unwrap(),
            0,
        )
        .unwrap();
    bucket
        .set_config_at(
            BucketConfig::per_second(1).unwrap().with_burst(1).unwrap(),
            0,
        )
        .unwrap();
    bucket
        .set_config_at(BucketConfig::per_second(100).unwrap(), 0)
        .unwrap();
    assert_eq!(bucket.available_at(0), 0);
    assert!(bucket.is_full_at(1_000 * MS) && !bucket.is_full_at(1_000 * MS - 1));
}

/// A change at a reading behind a take's counted less debt: burst 1 at 1 per 20 ms, a take at
/// 10 ms, a change to 1 per 10 ms at 8 ms: a take at 19 ms was granted, two grants 9 ms apart.
#[test]
fn a_faster_change_at_a_lagging_reading_counts_no_less_debt() {
    let bucket = TokenBucket::new(per(1, 20));
    assert!(bucket.try_acquire_at(10 * MS).is_ok());
    bucket.set_config_at(per(1, 10), 8 * MS).unwrap();
    assert!(
        bucket.try_acquire_at(19 * MS).is_err(),
        "two grants 9 ms apart in a burst-1 bucket"
    );
    assert!(bucket.try_acquire_at(20 * MS).is_ok());
    // The same change at the take's reading decides the same.
    let bucket = TokenBucket::new(per(1, 20));
    assert!(bucket.try_acquire_at(10 * MS).is_ok());
    bucket.set_config_at(per(1, 10), 10 * MS).unwrap();
    assert!(bucket.try_acquire_at(19 * MS).is_err());
    assert!(bucket.try_acquire_at(20 * MS).is_ok());
    // A slower change at a lagging reading counts more debt, never less.
    let bucket = TokenBucket::new(per(1, 10));
    assert!(bucket.try_acquire_at(10 * MS).is_ok());
    bucket.set_config_at(per(1, 20), 8 * MS).unwrap();
    assert!(bucket.try_acquire_at(29 * MS).is_err());
}

#[test]
fn a_change_carries_the_debt_at_its_own_reading() {
    // Burst 10 at 100 ms, drained at 0; cut to 1 s per token at 500 ms, when 5 are owed.
    let bucket = TokenBucket::new(per(10, 100));
    assert!(bucket.try_acquire_n_at(10, 0).is_ok());
    bucket.set_config_at(per(10, 1_000), 500 * MS).unwrap();
    assert_eq!(bucket.available_at(500 * MS), 5);
    assert_eq!(bucket.available_at(1_500 * MS - 1), 5);
    assert_eq!(bucket.available_at(1_500 * MS), 6);
    assert!(bucket.is_full_at(5_500 * MS));
    assert!(!bucket.is_full_at(5_500 * MS - 1));
    // The clock form reads the clock: the same cut, made at 500 ms.
    let clock = crate::ManualClock::new();
    let bucket = TokenBucket::new(per(10, 100));
    assert!(bucket.try_acquire_n(&clock, 10).is_ok());
    clock.advance(Duration::from_millis(500));
    bucket.set_config(per(10, 1_000), &clock).unwrap();
    assert_eq!(bucket.available_at(500 * MS), 5);
    assert!(bucket.is_full_at(5_500 * MS));
}

#[test]
fn with_the_interval_unchanged_the_tokens_owed_carry_over_exactly() {
    let bucket = TokenBucket::new(per(10, 100));
    assert!(bucket.try_acquire_n_at(4, 0).is_ok()); // owes 4 tokens, 400 ms
    bucket.set_config_at(per(6, 100), 0).unwrap();
    assert_eq!(bucket.available_at(0), 2, "lowered by 4: holds 6 - 4");
    bucket.set_config_at(per(20, 100), 0).unwrap();
    assert_eq!(bucket.available_at(0), 16, "raised: holds 20 - 4");
    // Lowered below the debt: empty, and the debt is not clamped: the first token comes when
    // 2 × 100 ms are owed, at 200 ms (not at 100 ms, as a fresh drain of burst 3 would).
    bucket.set_config_at(per(3, 100), 0).unwrap();
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
    bucket.set_config_at(per(2, 1_000), 0).unwrap();
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
    let err = millis.set_config_at(fine, 0).unwrap_err();
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
    micros.set_config_at(per(7, 20), 0).unwrap();
    assert_eq!(
        micros.config(),
        per(7, 20),
        "whole milliseconds, counted in µs"
    );
    assert!(micros.try_acquire_n_at(7, 0).is_ok());
    assert_eq!(micros.wait_for_at(1, 0), Ok(Duration::from_millis(20)));
    // 4.6 days of span does not fit microseconds.
    let long = per(100_000, 4_000);
    let err = micros.set_config_at(long, 0).unwrap_err();
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

/// Two changes land out of reading order (a racing change read its clock first and took the
/// lock second): burst 1 per 10 ms, a take at 0, a slower change (1 per 20 ms) at 5 ms, then a
/// faster one (back to 1 per 10 ms) at 0. Counted at its own reading 0 the faster one turned
/// the 15 ms the slower one left into 8, and a take at 8 ms was a second grant 8 ms after the
/// first. Counted no earlier than the slower change's reading, it leaves 10.
#[test]
fn a_faster_change_is_counted_no_earlier_than_a_change_that_used_a_later_reading() {
    let bucket = TokenBucket::new(per(1, 10));
    assert!(bucket.try_acquire_at(0).is_ok());
    bucket.set_config_at(per(1, 20), 5 * MS).unwrap();
    bucket.set_config_at(per(1, 10), 0).unwrap();
    assert!(
        bucket.try_acquire_at(8 * MS).is_err(),
        "two grants 8 ms apart in a burst-1 bucket at one per 10 ms"
    );
    assert!(bucket.try_acquire_at(9 * MS).is_err());
    assert!(bucket.try_acquire_at(10 * MS).is_ok());
}

/// A microsecond bucket (a million per second, a burst of a million) drained, then slowed to
/// one a second: the million tokens owed are 10^6 s, beyond the 2^38 µs (3.18 days) the unit
/// holds. Carried, the debt was cut to 3.18 days, and the revert gave back the 725,122 tokens
/// the cut forgave, at the same reading. Refused, changing nothing, the bucket still owes all
/// of them after the revert.
#[test]
fn a_change_that_would_cut_a_debt_is_refused() {
    let fine = BucketConfig::new(1_000_000, Duration::from_micros(1)).unwrap();
    let bucket = TokenBucket::new(fine);
    assert!(bucket.try_acquire_n_at(1_000_000, 0).is_ok());
    let slow = BucketConfig::new(1, Duration::from_secs(1)).unwrap();
    let checked = bucket.check_config(&slow);
    let cut = bucket.set_config_at(slow, 0);
    bucket.set_config_at(fine, 0).unwrap();
    assert_eq!(
        bucket.available_at(0),
        0,
        "a cut and its revert forgave a debt"
    );
    assert_eq!(cut, checked, "the check answers what the change does");
    assert!(
        cut.is_err_and(|e| e.to_string().contains("nothing changed")),
        "the cut was taken"
    );
    assert_eq!(bucket.config(), fine);
    // A shorter interval still fits: 10^6 tokens at 250 ms is 2.9 days.
    let slower = BucketConfig::new(1, Duration::from_millis(250)).unwrap();
    assert_eq!(bucket.check_config(&slower), Ok(()));
}
