//! A class's limits changed at runtime (`reconfig.rs`), one test per rule.

use super::{InvalidCharge, Limiter, LimiterConfigError, LimiterRefused};
use crate::bucket::BucketConfig;
use crate::clock::{Clock, ManualClock};
use std::time::Duration;

const MS: u64 = 1_000_000;

fn per(burst: u32, interval_ms: u64) -> BucketConfig {
    BucketConfig::new(burst, Duration::from_millis(interval_ms)).unwrap()
}

#[test]
fn a_change_reaches_the_entries_and_the_overflow_bucket_at_once() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .cap(1)
        .build_with_clock([per(4, 1_000)], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("alice", 0, 2).is_ok()); // alice's entry owes 2
    assert!(limiter.try_acquire_n("bob", 0, 2).unwrap().via_overflow()); // so does overflow
    limiter.set_config(0, per(3, 1_000)).unwrap();
    assert_eq!(
        limiter.entry_tokens_at("alice", 0, 0),
        Some(1),
        "3 - 2 owed"
    );
    assert!(limiter.try_acquire("alice", 0).is_ok());
    assert!(limiter.try_acquire("alice", 0).is_err());
    let bob = limiter.try_acquire("bob", 0).unwrap();
    assert!(bob.via_overflow());
    let refused = limiter.try_acquire("carol", 0).unwrap_err();
    assert!(
        refused.limited().unwrap().via_overflow(),
        "the overflow took the new burst too"
    );
    // The burst check and the take use the same new config.
    assert!(matches!(
        limiter.try_acquire_n("alice", 0, 4),
        Err(LimiterRefused::Invalid(InvalidCharge::ExceedsBurst {
            burst: 3,
            ..
        }))
    ));
    // Full again at 3 s (2 owed before the change, 1 taken after), not sooner.
    clock.advance(Duration::from_millis(2_999));
    assert!(
        limiter
            .peek_at("alice", 0, 3, clock.now_ns())
            .unwrap()
            .wait()
            > Duration::ZERO
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        limiter
            .peek_at("alice", 0, 3, clock.now_ns())
            .unwrap()
            .wait(),
        Duration::ZERO
    );
}

#[test]
fn a_change_never_makes_a_drained_entry_reclaimable() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock([per(2, 1_000)], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("alice", 0, 2).is_ok());
    limiter.set_config(0, per(100, 1)).unwrap(); // 98 tokens, but owes 2 s
    assert_eq!(limiter.reclaim_full_at(clock.now_ns()), Ok(0));
    assert_eq!(limiter.len(), 1);
    clock.advance(Duration::from_secs(2));
    assert_eq!(limiter.reclaim_full_at(clock.now_ns()), Ok(1));
}

#[test]
fn an_unknown_class_or_a_misfit_is_refused_and_changes_nothing() {
    let limiter = Limiter::builder()
        .build_with_clock([per(5, 100), per(1, 60_000)], ManualClock::new())
        .unwrap();
    let fine = BucketConfig::new(5, Duration::from_micros(1_500)).unwrap();
    let err = limiter.set_config(1, fine).unwrap_err();
    assert_eq!(
        err,
        LimiterConfigError::ClassDoesNotFit {
            class: 1,
            config: fine,
            counted_in_micros: false
        }
    );
    assert!(err.to_string().contains("whole milliseconds"), "{err}");
    assert_eq!(limiter.check_config(1, &fine), Err(err));
    let err = limiter.set_config(2, per(1, 1)).unwrap_err();
    assert_eq!(
        err,
        LimiterConfigError::UnknownClass {
            class: 2,
            classes: 2
        }
    );
    assert!(err.to_string().contains("2 classes"), "{err}");
    assert_eq!(limiter.check_config(2, &per(1, 1)), Err(err));
    assert_eq!(limiter.config(0), Some(per(5, 100)));
    assert_eq!(limiter.config(1), Some(per(1, 60_000)));
    assert_eq!(limiter.config(2), None);
    assert!(limiter.check_config(0, &per(9, 9)).is_ok());
    assert_eq!(
        limiter.config(0),
        Some(per(5, 100)),
        "a check changes nothing"
    );
}

#[test]
fn a_microsecond_limiter_takes_millisecond_classes_that_fit_it() {
    let fine = BucketConfig::per_second(4_000).unwrap(); // 250 µs
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock([fine, per(1, 1_000)], clock.clone())
        .unwrap();
    limiter.set_config(1, per(2, 10)).unwrap();
    assert_eq!(limiter.config(1), Some(per(2, 10)));
    limiter.set_config(0, per(1, 1)).unwrap();
    let long = per(100_000, 4_000); // 4.6 days of span
    let err = limiter.set_config(1, long).unwrap_err();
    assert!(matches!(
        err,
        LimiterConfigError::ClassDoesNotFit {
            class: 1,
            counted_in_micros: true,
            ..
        }
    ));
    assert!(err.to_string().contains("3.18 days"), "{err}");
    assert_eq!(limiter.config(1), Some(per(2, 10)), "unchanged");
    assert!(limiter.try_acquire_n_at("a", 1, 2, 0).is_ok());
    clock.advance_ns(3 * MS);
    assert_eq!(
        limiter.peek_at("a", 1, 1, 3 * MS).unwrap().wait(),
        Duration::from_millis(7)
    );
}
