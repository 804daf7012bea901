//! The config's validation: named zero fields and span limits, exact rates or refusals, units.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn zero_fields_are_named() {
    assert_eq!(
        BucketConfig::new(0, ms(5)),
        Err(BucketConfigError::ZeroBurst)
    );
    assert_eq!(
        BucketConfig::new(5, Duration::ZERO),
        Err(BucketConfigError::ZeroRefillInterval)
    );
    assert_eq!(
        BucketConfig::per_second(0),
        Err(BucketConfigError::ZeroRefillInterval)
    );
    assert!(BucketConfigError::ZeroBurst.to_string().contains("`burst`"));
    assert!(BucketConfigError::ZeroRefillInterval
        .to_string()
        .contains("refill interval"));
}

#[test]
fn span_limit_is_inclusive_and_named() {
    // 2^20 × 2^20 ms is exactly the limit.
    assert!(BucketConfig::new(1 << 20, ms(1 << 20)).is_ok());
    let err = BucketConfig::new((1 << 20) + 1, ms(1 << 20)).unwrap_err();
    assert!(matches!(err, BucketConfigError::RefillSpanTooLong { .. }));
    assert!(err.to_string().contains("`burst`"));
    assert!(BucketConfig::new(u32::MAX, ms(u64::from(u32::MAX))).is_err());
    assert!(BucketConfig::new(u32::MAX, ms(256)).is_ok());
    assert!(matches!(
        BucketConfig::new(1, ms(u64::from(u32::MAX) + 1)),
        Err(BucketConfigError::IntervalTooLong { .. })
    ));
    assert!(matches!(
        BucketConfig::new(1, Duration::MAX),
        Err(BucketConfigError::InexactInterval { .. } | BucketConfigError::IntervalTooLong { .. })
    ));
}

#[test]
fn rates_are_exact_or_refused() {
    for n in [1, 2, 4, 5, 8, 10, 100, 125, 1_000] {
        let c = BucketConfig::per_second(n).unwrap();
        assert_eq!(c.refill_interval() * n, Duration::from_secs(1), "{n}/s");
        assert_eq!(c.burst(), n);
    }
    for n in [3, 7, 300, 1_001, 3_000, 1_000_001] {
        let err = BucketConfig::per_second(n).unwrap_err();
        assert!(
            matches!(err, BucketConfigError::InexactInterval { .. }),
            "{n}/s: {err}"
        );
        assert!(err.to_string().contains("whole"), "{err}");
    }
    assert_eq!(
        BucketConfig::per_minute(7).unwrap_err(),
        BucketConfigError::InexactInterval {
            refill_interval: Duration::from_nanos(8_571_428_572)
        }
    );
    assert_eq!(
        BucketConfig::per_hour(1).unwrap().refill_interval(),
        ms(3_600_000)
    );
    assert_eq!(
        BucketConfig::per(3, ms(3)).unwrap(),
        BucketConfig::new(3, ms(1)).unwrap()
    );
}

#[test]
fn microsecond_rates_are_exact_and_bounded() {
    let c = BucketConfig::per_second(1_000_000).unwrap();
    assert_eq!((c.tick(), c.interval_ticks()), (Tick::Micros, 1));
    assert_eq!(c.refill_span(), Duration::from_secs(1));
    let c = BucketConfig::new(1, Duration::from_micros(1_500)).unwrap();
    assert_eq!(c.refill_interval(), Duration::from_micros(1_500));
    assert_eq!(c.tick(), Tick::Micros);
    // Whole milliseconds keep the millisecond unit and its longer spans.
    assert_eq!(
        BucketConfig::per_second(1_000).unwrap().tick(),
        Tick::Millis
    );
    // The fine span bound is inclusive: 2^19 tokens of 2^19 µs.
    assert!(BucketConfig::new(1 << 19, Duration::from_micros((1 << 19) + 1)).is_err());
    let us = Duration::from_micros(1 << 19 | 1);
    assert!(BucketConfig::new((1 << 18) + 1, us).is_ok());
    let err = BucketConfig::new(u32::MAX, Duration::from_micros(1_001)).unwrap_err();
    assert!(matches!(err, BucketConfigError::RefillSpanTooLong { .. }));
    assert!(err.to_string().contains("3.18 days"), "{err}");
    // Above u32::MAX µs only whole milliseconds are exact.
    let long = Duration::from_micros(u64::from(u32::MAX) + 1);
    let err = BucketConfig::new(1, long).unwrap_err();
    assert!(matches!(err, BucketConfigError::InexactInterval { .. }));
    assert!(err.to_string().contains("ms per token"), "{err}");
    let err = BucketConfig::new(1, Duration::from_nanos(1_500)).unwrap_err();
    assert!(err.to_string().contains("1 µs or 2 µs"), "{err}");
}

#[test]
fn a_config_in_microseconds_equals_its_millisecond_original() {
    let ms_config = BucketConfig::per_second(10).unwrap();
    let us_config = ms_config.in_micros().unwrap();
    assert_eq!(us_config.tick(), Tick::Micros);
    assert_eq!(us_config.interval_ticks(), 100_000);
    assert_eq!(ms_config, us_config);
    assert_eq!(us_config.refill_span(), ms_config.refill_span());
    // 4.6 days of span does not fit microseconds.
    let long = BucketConfig::new(100_000, Duration::from_secs(4)).unwrap();
    assert!(matches!(
        long.in_micros(),
        Err(BucketConfigError::RefillSpanTooLong { .. })
    ));
    // An interval above u32::MAX µs does not either.
    assert!(BucketConfig::new(1, Duration::from_secs(5_000))
        .unwrap()
        .in_micros()
        .is_err());
}

#[test]
fn with_burst_keeps_the_rate_and_revalidates() {
    let c = BucketConfig::per_second(10)
        .unwrap()
        .with_burst(50)
        .unwrap();
    assert_eq!((c.burst(), c.refill_interval()), (50, ms(100)));
    assert!(matches!(
        BucketConfig::new(1, ms(1 << 20))
            .unwrap()
            .with_burst((1 << 20) + 1),
        Err(BucketConfigError::RefillSpanTooLong { .. })
    ));
}
