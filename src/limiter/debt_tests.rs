//! No change of a class forgives a debt beyond its unit's longest span (`bucket::debt`): a
//! change that would carry one is refused, decided from the configs alone, by
//! `Limiter::check_config` as by `Limiter::set_config`, so a `LiveLimits` reload refuses it
//! before it applies anything.

use super::Limiter;
use crate::bucket::BucketConfig;
use crate::clock::ManualClock;

/// Milliseconds: an actor drains 2^31 − 1 tokens at one per ms, the class is slowed to one per
/// `u32::MAX` ms and reverted, all at one reading. Carried to 2^40 ms and back, the debt lost
/// all but 256 tokens, and the actor was served about 2^31 again at once.
#[test]
fn a_millisecond_cut_and_its_revert_forgive_nothing() {
    let clock = ManualClock::new();
    let fast = BucketConfig::from_ms(crate::LimiterConfigError::MAX_CLASS_BURST, 1).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([fast], clock.clone())
        .unwrap();
    assert!(limiter
        .try_acquire_n("alice", 0, crate::LimiterConfigError::MAX_CLASS_BURST)
        .is_ok());
    let slow = BucketConfig::from_ms(1, u32::MAX).unwrap();
    let checked = limiter.check_config(0, &slow);
    let cut = limiter.set_config(0, slow);
    limiter.set_config(0, fast).unwrap();
    assert_eq!(
        limiter.entry_tokens_at("alice", 0, 0),
        Some(0),
        "a cut and its revert forgave a debt"
    );
    assert_eq!(cut, checked, "the check answers what the change does");
    assert!(cut.is_err_and(|e| e.to_string().contains("nothing changed")));
}

/// Microseconds, through a reload: burst 100,000 at 100,000/s, alice drains it, a reload
/// cuts the class to one per 10 s and another reverts it. Carried, 11.6 days owed were cut to
/// 2^38 µs (3.18 days) and alice was served 72,412 tokens at the same reading. The cut is
/// refused before anything is applied, and alice is served nothing.
#[cfg(feature = "config")]
#[test]
fn a_reloaded_cut_and_its_revert_forgive_nothing() {
    use crate::live::{LimitsConfig, LiveLimits};
    use std::time::Duration;
    let document =
        "[admit.limiter]\ncap = 16\n[[admit.limiter.class]]\nburst = 100000\nrate = \"100000/s\"\n";
    let clock = ManualClock::new();
    let config = LimitsConfig::from_toml_str(document).unwrap();
    let live = LiveLimits::from_config_with_clock(&config, clock.clone()).unwrap();
    let limiter = live.limiter().unwrap();
    assert!(limiter.try_acquire_n("alice", 0, 100_000).is_ok());
    let cut = live.reload_str(
        &document
            .replace("rate = \"100000/s\"", "interval = \"10s\"")
            .replace("100000\n", "1\n"),
    );
    let refused = cut.is_err();
    live.reload_str(document).unwrap();
    let served = (0..100_000)
        .take_while(|_| limiter.try_acquire("alice", 0).is_ok())
        .count();
    assert_eq!(served, 0, "a cut and its revert forgave a debt");
    assert!(refused, "the cut was taken");
    assert_eq!(
        limiter.config(0),
        Some(BucketConfig::new(100_000, Duration::from_micros(10)).unwrap())
    );
}
