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
    // Still owes 2 tokens: 2 ms at 1/ms, counted from 1 ms (a faster rate is counted at the
    // horizon, the clock's reading plus the tolerance: no decision was admitted later).
    limiter.set_config(0, per(100, 1)).unwrap();
    assert_eq!(limiter.reclaim_full_at(clock.now_ns()), Ok(0));
    assert_eq!(limiter.len(), 1);
    clock.advance(Duration::from_millis(2));
    assert_eq!(limiter.reclaim_full_at(clock.now_ns()), Ok(0));
    clock.advance(Duration::from_millis(1));
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

/// A tenant that drained a burst of 100 at 100/s, cut to 1/s, owes what it owed (100 tokens)
/// instead of holding 99.
#[test]
fn a_rate_cut_carries_the_tokens_owed_over() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock([per(100, 10)], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("tenant", 0, 100).is_ok());
    limiter.set_config(0, per(100, 1_000)).unwrap();
    assert_eq!(limiter.entry_tokens_at("tenant", 0, 0), Some(0));
    assert!(limiter.try_acquire("tenant", 0).is_err());
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        limiter.entry_tokens_at("tenant", 0, clock.now_ns()),
        Some(1)
    );
    assert!(limiter.try_acquire("tenant", 0).is_ok());
    assert!(limiter.try_acquire("tenant", 0).is_err());
    // A new identity still starts with the full new burst.
    assert!(limiter.try_acquire_n("newcomer", 0, 100).is_ok());
}

/// A faster rate brings the debt back sooner, in the same tokens.
#[test]
fn a_rate_raise_keeps_the_tokens_owed_at_the_new_rate() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock([per(10, 1_000)], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("a", 0, 10).is_ok()); // owes 10 s
    limiter.set_config(0, per(10, 100)).unwrap();
    // Counted from 1 ms on (the horizon: the reading plus the tolerance): 9.999 s owed there,
    // 9.999 tokens, 1 s at 100 ms a token (rounded up to the millisecond).
    assert_eq!(
        limiter.peek_at("a", 0, 10, 0).unwrap().wait(),
        Duration::from_millis(1_001),
        "10 tokens owed at 100 ms"
    );
}

/// Two changes with nothing touching the entry between them: the second's pass converts it
/// first, so its era bit never comes round to read as current.
#[test]
fn two_changes_convert_an_untouched_entry_twice() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock([per(100, 10)], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("tenant", 0, 100).is_ok()); // full at 1 s
    limiter.set_config(0, per(100, 20)).unwrap(); // owes 100 at 20 ms: full at 2 s
    limiter.set_config(0, per(100, 1_000)).unwrap(); // owes 100 at 1 s: full at 100 s
    assert_eq!(limiter.entry_tokens_at("tenant", 0, 0), Some(0));
    assert_eq!(
        limiter.peek_at("tenant", 0, 100, 0).unwrap().wait(),
        Duration::from_secs(100)
    );
    clock.advance(Duration::from_secs(99));
    assert_eq!(
        limiter.reclaim_full_at(clock.now_ns()),
        Ok(0),
        "owes a token still"
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(limiter.reclaim_full_at(clock.now_ns()), Ok(1));
}

/// A reclaim judges an entry by what it owes after the change, not by the instant it held.
#[test]
fn a_cut_never_makes_an_entry_reclaimable_before_it_is_full_again() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .cap(1)
        .build_with_clock([per(10, 100)], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("a", 0, 10).is_ok()); // full at 1 s before the cut
    limiter.set_config(0, per(10, 1_000)).unwrap(); // full at 10 s after it
    clock.advance(Duration::from_secs(5));
    assert_eq!(limiter.reclaim_full_at(clock.now_ns()), Ok(0));
    // At the cap, the miss does not free it either: bob pays the overflow bucket.
    assert!(limiter.try_acquire("bob", 0).unwrap().via_overflow());
    assert_eq!(limiter.entry_tokens_at("a", 0, clock.now_ns()), Some(5));
}

/// The overflow bucket carries its debt over as an entry does.
#[test]
fn the_overflow_bucket_carries_the_tokens_owed_over() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .cap(1)
        .build_with_clock([per(4, 10)], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("a", 0, 4).is_ok());
    assert!(limiter.try_acquire_n("b", 0, 4).unwrap().via_overflow()); // drained
    limiter.set_config(0, per(4, 1_000)).unwrap();
    let peek = limiter.peek_at("c", 0, 1, 0).unwrap();
    assert!(peek.via_overflow());
    assert_eq!((peek.available(), peek.wait()), (0, Duration::from_secs(1)));
    assert!(limiter.try_acquire("c", 0).is_err());
    clock.advance(Duration::from_secs(1));
    assert!(limiter.try_acquire("c", 0).unwrap().via_overflow());
}

/// A refusal of an entry from the era before writes the conversion (invariant 3 in `era`):
/// the entry then carries the class's era bit.
#[test]
fn a_refusal_writes_the_conversion_it_decided_on() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock([per(2, 10)], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("a", 0, 2).is_ok());
    limiter.set_config(0, per(2, 1_000)).unwrap();
    let key = limiter.hasher.key("a", 0);
    let before = limiter.table.get(&key).unwrap();
    assert_eq!(before & super::era::ENTRY_ERA, 0, "written in era 0");
    assert!(limiter.try_acquire("a", 0).is_err());
    let after = limiter.table.get(&key).unwrap();
    assert_ne!(after & super::era::ENTRY_ERA, 0, "converted into era 1");
    assert_eq!(after & super::era::CODED, 2_000, "2 tokens owed at 1 s");
}

/// The same rules in microseconds, where values are epoch-relative.
#[test]
fn a_microsecond_class_carries_the_tokens_owed_over() {
    let fast = BucketConfig::per_second(4_000).unwrap(); // 250 µs
    let clock = ManualClock::new();
    let limiter = Limiter::builder()
        .build_with_clock([fast], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("a", 0, 4_000).is_ok()); // owes 1 s
    limiter
        .set_config(0, BucketConfig::per_second(2_000).unwrap())
        .unwrap();
    assert_eq!(limiter.entry_tokens_at("a", 0, 0), Some(0));
    // 4,000 tokens owed at 500 µs: 2 s, above the new burst of 2,000, and kept.
    assert_eq!(
        limiter.peek_at("a", 0, 1, 0).unwrap().wait(),
        Duration::from_micros(1_000_500)
    );
    assert_eq!(
        limiter.peek_at("a", 0, 2_000, 0).unwrap().wait(),
        Duration::from_secs(2),
        "the 4,000 tokens owed, every one, at the new rate"
    );
}

#[test]
fn a_burst_the_class_word_cannot_hold_is_refused() {
    let huge = BucketConfig::new(1 << 31, Duration::from_millis(1)).unwrap();
    assert_eq!(
        Limiter::builder().build([per(1, 1), huge]).unwrap_err(),
        LimiterConfigError::ClassBurstTooLarge {
            class: 1,
            burst: 1 << 31
        }
    );
    let limiter = Limiter::builder().build([per(1, 1)]).unwrap();
    let err = limiter.set_config(0, huge).unwrap_err();
    assert!(err.to_string().contains("2147483647"), "{err}");
    assert_eq!(limiter.check_config(0, &huge), Err(err));
    assert_eq!(limiter.config(0), Some(per(1, 1)));
}

/// A cut and its revert forgave the debt: burst 100 at 100/s, alice drained at 0, the class
/// cut to burst 1 at 1/s and restored at 0: alice was then granted 99 more at 0.
#[test]
fn a_cut_and_its_revert_hand_a_drained_actor_nothing() {
    let clock = ManualClock::new();
    let fast = BucketConfig::per_second(100).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([fast], clock.clone())
        .unwrap();
    assert!(limiter.try_acquire_n("alice", 0, 100).is_ok());
    // The incident playbook, twice over.
    for _ in 0..2 {
        limiter
            .set_config(0, BucketConfig::per_second(1).unwrap())
            .unwrap();
        limiter.set_config(0, fast).unwrap();
    }
    let mut granted = 0;
    while limiter.try_acquire("alice", 0).is_ok() {
        granted += 1;
    }
    assert_eq!(granted, 0, "the revert handed alice tokens at 0");
    // Alice owes her 100 tokens still: she is full again 1 s on, and not before (each revert,
    // a faster rate, is counted at the horizon, 1 ms on; the second cut, at 0, carries her
    // debt from 1 ms, the instant the revert left it at, the longest the configs allow: 1 ms
    // more, never less).
    let wait = limiter.peek_at("alice", 0, 100, 0).unwrap().wait();
    assert_eq!(wait, Duration::from_millis(1_001));
    clock.advance(wait);
    assert!(limiter.try_acquire_n("alice", 0, 100).is_ok());
}
