//! Volume limits changed at runtime (`reconfig.rs`), one test per rule.

use super::{Quota, RateLimit, RateLimitConfigError};
use crate::clock::ManualClock;
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

fn quota(events: u32, bytes: u32) -> Quota {
    Quota::new(events, bytes, MINUTE).unwrap()
}

#[test]
fn the_windows_charges_stay_and_are_measured_against_the_new_limits() {
    let clock = ManualClock::new();
    let limit = RateLimit::with_clock(quota(10, 1_000), clock.clone());
    for _ in 0..8 {
        limit.try_acquire("a", 100).unwrap();
    }
    limit.set_limits(quota(5, 1_000)).unwrap();
    let usage = limit.usage("a");
    assert_eq!(
        (usage.events, usage.bytes),
        (8, 800),
        "nothing reset or forgiven"
    );
    let refused = limit.try_acquire("a", 1).unwrap_err();
    assert_eq!((refused.max(), refused.used()), (5, 8));
    assert!(limit.try_acquire("b", 1).is_ok(), "another actor: 1 of 5");
    limit.set_limits(quota(10, 850)).unwrap();
    assert!(limit.try_acquire("a", 51).is_err(), "851 bytes > 850");
    assert!(limit.try_acquire("a", 50).is_ok(), "9 of 10, 850 of 850");
    assert_eq!(limit.quota(), quota(10, 850));
    // From the next window on, the new limits with fresh counts.
    clock.advance(MINUTE);
    limit.set_limits(quota(1, 850)).unwrap();
    assert!(limit.try_acquire("a", 1).is_ok());
    assert!(limit.try_acquire("a", 1).is_err());
}

#[test]
fn the_window_and_rows_are_fixed_and_a_refused_change_changes_nothing() {
    let limit = RateLimit::with_clock(quota(2, 100), ManualClock::new());
    let other_window = Quota::new(9, 100, Duration::from_secs(1)).unwrap();
    let err = limit.set_limits(other_window).unwrap_err();
    assert_eq!(
        err,
        RateLimitConfigError::WindowFixed {
            window: Duration::from_secs(1),
            built_with: MINUTE
        }
    );
    assert!(
        err.to_string().contains("cannot change at runtime"),
        "{err}"
    );
    assert_eq!(limit.check_limits(&other_window), Err(err));
    let other_rows = quota(9, 100).with_rows(1).unwrap();
    assert!(matches!(
        limit.set_limits(other_rows),
        Err(RateLimitConfigError::RowsFixed {
            rows: 1,
            built_with: 4
        })
    ));
    assert_eq!(limit.quota(), quota(2, 100), "unchanged");
    assert!(limit.check_limits(&quota(9, 9)).is_ok());
    assert_eq!(limit.quota(), quota(2, 100), "a check changes nothing");
}
