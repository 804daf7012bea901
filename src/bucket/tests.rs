//! One test per rule in the module docs, then the proptests against the reference model.

use super::*;
use crate::check::bucket::{run, BucketOp};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

/// Where a history starts: near the clock's origin, or far on it, from 2^59 ns (18.3 years, past
/// which a keyed limiter counting milliseconds nears the last instant it counts) to a day short
/// of the clamp at `MAX_NOW_TICK` ms (104 years), where a bucket must still be exact.
fn start_strategy() -> impl Strategy<Value = u64> {
    let last = (crate::clock::tick::MAX_NOW_TICK - 86_400_000) * MS;
    prop_oneof![3 => 0u64..10_000_000_000, 1 => (1u64 << 59)..last]
}

fn bucket(burst: u32, interval_ms: u32) -> TokenBucket {
    TokenBucket::new(
        BucketConfig::new(burst, Duration::from_millis(u64::from(interval_ms))).unwrap(),
    )
}

fn drain(b: &TokenBucket, now: u64) -> u32 {
    let mut taken = 0;
    while b.try_acquire_at(now).is_ok() {
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
    assert!(b.try_acquire_at(0).is_err());
    assert!(b.try_acquire_at(999 * MS).is_err());
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
    assert!(b.try_acquire_at(0).is_ok());
    let now = 200 * MS + 7;
    let err = b.try_acquire_at(now).unwrap_err();
    assert_eq!(err.wait(), Some(Duration::from_nanos(1_500 * MS - now)));
    assert_eq!(err.retry_after_secs(), Some(2));
    // Exactly the wait later: granted. One nanosecond sooner: refused.
    let at = now + u64::try_from(err.wait().unwrap().as_nanos()).unwrap();
    assert!(b.try_acquire_at(at - 1).is_err());
    assert!(b.try_acquire_at(at).is_ok());
}

#[test]
fn retry_after_is_never_zero_while_refused() {
    let b = bucket(1, 1);
    assert!(b.try_acquire_at(0).is_ok());
    let err = b.try_acquire_at(0).unwrap_err();
    assert_eq!(err.wait(), Some(Duration::from_millis(1)));
    assert_eq!(err.retry_after_secs(), Some(1));
}

#[test]
fn more_than_burst_is_a_distinct_error() {
    let b = bucket(4, 10);
    assert_eq!(
        b.try_acquire_n_at(5, 0),
        Err(BucketRefused::ExceedsBurst {
            requested: 5,
            burst: 4
        })
    );
    assert_eq!(b.try_acquire_n_at(5, 0).unwrap_err().wait(), None);
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
    assert!(b.try_acquire_n_at(3, 0).is_ok());
    assert!(b.try_acquire_n_at(2, 0).is_err());
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
fn a_refund_undoes_its_take_exactly_and_only_once() {
    let b = bucket(3, 100);
    let grant = b.try_acquire_refundable_n_at(2, 0).unwrap();
    assert_eq!(b.available_at(0), 1);
    // More than the take took gives back only what it took; the refund consumes the grant.
    assert_eq!(b.refund(grant, 10), Refunded::Exact { tokens: 2 });
    assert_eq!(b.available_at(0), 3);
    assert!(b.is_full_at(0));
    assert_eq!(drain(&b, 0), 3);
}

/// A grant names its bucket: two buckets of one config that took at one reading hold equal
/// state words, and one's grant once refunded into the other.
#[test]
fn a_refund_into_another_bucket_gives_nothing() {
    let one = bucket(1, 10);
    let two = bucket(1, 10);
    let a = one.try_acquire_refundable_n_at(1, 0).unwrap();
    let _b = two.try_acquire_refundable_n_at(1, 0).unwrap();
    assert_eq!(two.refund(a, 1), Refunded::OtherInstance);
    assert!(
        two.try_acquire_at(0).is_err(),
        "bucket two granted twice at burst 1"
    );
    assert!(one.try_acquire_at(0).is_err());
}

/// A refund at an older reading gave a token twice: burst 1 per 10 ms, take at 0 (A), take
/// at 10 ms (B, granted: the bucket was full again), refund A, take at 10 ms: granted, two
/// grants at one reading of a burst-1 bucket. A's token had already refilled into the cap.
#[test]
fn a_refund_after_a_later_take_gives_nothing_twice() {
    let b = bucket(1, 10);
    let a = b.try_acquire_refundable_n_at(1, 0).unwrap();
    assert!(b.try_acquire_at(10 * MS).is_ok(), "B: full again at 10 ms");
    assert_eq!(b.refund(a, 1), Refunded::Void);
    assert!(
        b.try_acquire_at(10 * MS).is_err(),
        "a second grant at 10 ms of a burst-1 bucket"
    );
    assert_eq!(b.available_at(20 * MS), 1);
}

/// A refund of a take that another take followed while the bucket was still in debt is void
/// too: the bucket cannot tell how much of the token has refilled since, so it keeps it.
#[test]
fn a_refund_is_void_once_anything_landed_since() {
    let b = bucket(10, 100);
    let a = b.try_acquire_refundable_n_at(5, 0).unwrap();
    let c = b.try_acquire_refundable_n_at(2, 0).unwrap();
    assert_eq!(b.refund(a, 5), Refunded::Void);
    assert_eq!(
        b.available_at(0),
        3,
        "A's refund is void: C landed after it"
    );
    assert_eq!(b.refund(c, 2), Refunded::Exact { tokens: 2 });
    assert_eq!(
        b.available_at(0),
        5,
        "C's refund is exact: nothing landed after it"
    );
    // A change since a take voids its refund as well.
    let d = b.try_acquire_refundable_n_at(1, 0).unwrap();
    b.set_config_at(BucketConfig::from_ms(10, 100).unwrap(), 0)
        .unwrap();
    assert_eq!(b.refund(d, 1), Refunded::Void);
    assert_eq!(b.available_at(0), 4);
}

#[test]
fn a_million_per_second_bucket_is_exact_after_a_century() {
    let b = TokenBucket::new(BucketConfig::per_second(1_000_000).unwrap());
    assert!(b.try_acquire_n_at(1_000_000, 1_000).is_ok());
    assert_eq!(
        b.try_acquire_at(1_500).unwrap_err().wait(),
        Some(Duration::from_nanos(500))
    );
    assert!(b.try_acquire_at(2_000).is_ok(), "one token per microsecond");
    let century = 100 * 365 * 86_400 * 1_000_000_000u64;
    assert_eq!(b.available_at(century), 1_000_000);
    assert!(b.try_acquire_n_at(1_000_000, century).is_ok());
    assert!(b.try_acquire_at(century + 999).is_err());
    assert!(b.try_acquire_at(century + 1_000).is_ok());
}

#[test]
fn readings_past_the_time_budget_are_clamped_not_wrapped() {
    let b = bucket(1, 1);
    assert!(b.try_acquire_at(u64::MAX).is_ok());
    let err = b.try_acquire_at(u64::MAX).unwrap_err();
    assert!(err.retry_after_secs().unwrap() >= 1);
    assert_eq!(b.available_at(u64::MAX), 0);
}

#[test]
fn the_clock_form_reads_the_injected_clock() {
    let clock = crate::clock::ManualClock::new();
    let b = bucket(1, 1_000);
    assert!(b.try_acquire(&clock).is_ok());
    assert!(b.try_acquire(&clock).is_err());
    clock.advance(Duration::from_secs(1));
    assert!(b.try_acquire(&clock).is_ok());
}

// ---------------------------------------------------------------- a reading far ahead

/// The bucket owns no clock and refuses no reading: a `u64::MAX` reading is granted at the
/// clamped last tick and leaves this bucket (and nothing else) drained until that tick.
#[test]
fn a_far_future_reading_drains_only_this_bucket_until_that_reading() {
    use crate::clock::tick::{MAX_NOW_TICK, TICK_NS};
    let b = bucket(2, 100);
    let other = bucket(2, 100);
    assert!(b.try_acquire_at(5 * MS).is_ok());
    assert!(other.try_acquire_at(5 * MS).is_ok());
    // Peeks at the far reading change nothing.
    assert_eq!(b.available_at(u64::MAX), 2);
    assert!(b.is_full_at(u64::MAX));
    assert_eq!(b.wait_for_at(2, u64::MAX), Ok(Duration::ZERO));
    assert_eq!(b.available_at(6 * MS), 1);
    // The take is granted: at that (clamped) reading the bucket is full. No panic, no wrap.
    let far_grant = b.try_acquire_refundable_n_at(1, u64::MAX).unwrap();
    // From now on, at real readings, the bucket is drained until the clamped tick: refused,
    // with the whole distance as the wait (about 104 years).
    let now = 6 * MS;
    let far = MAX_NOW_TICK * TICK_NS;
    let err = b.try_acquire_at(now).unwrap_err();
    assert_eq!(err.wait(), Some(Duration::from_nanos(far - now)));
    assert!(err.retry_after_secs().unwrap() > 3_000_000_000);
    assert_eq!(b.available_at(now), 0);
    assert!(!b.is_full_at(now));
    assert_eq!(b.wait_for_at(1, now), Ok(Duration::from_nanos(far - now)));
    // At the far reading itself it holds what that take left.
    assert_eq!(b.available_at(u64::MAX), 1);
    // A refund undoes only its take: still drained at real readings, ten years on included.
    assert_eq!(b.refund(far_grant, 2), Refunded::Exact { tokens: 1 });
    assert_eq!(b.available_at(now), 0);
    assert!(b
        .try_acquire_at(10 * 365 * 24 * 3_600 * 1_000 * MS)
        .is_err());
    // Nothing else moved: another bucket is exactly where it was.
    assert_eq!(other.available_at(now), 1);
    assert_eq!(other.available_at(105 * MS), 2);
}

// ---------------------------------------------------------------- bounds in readings

/// The two cases in "Bounds in readings": readings floored to ticks grant one token more than
/// `burst + L / interval` would allow, and exactly the stated bound.
#[test]
fn the_bound_in_readings_is_attained_where_ticks_split_a_nanosecond() {
    // Burst 1 per 1 ms: grants at 999,999 ns and at 1,000,000 ns, 1 ns apart.
    let b = bucket(1, 1);
    assert!(b.try_acquire_at(999_999).is_ok());
    assert!(b.try_acquire_at(1_000_000).is_ok());
    assert_eq!(bound_in_readings(1, 1, 1), 2);
    // Burst 3 per 1 s: 3 at 999,999 ns and a fourth at 1,000,000,000 ns, 999,000,001 ns apart.
    let b = bucket(3, 1_000);
    assert_eq!(drain(&b, 999_999), 3);
    assert!(b.try_acquire_at(1_000_000_000).is_ok());
    assert_eq!(bound_in_readings(3, 1_000, 1_000_000_000 - 999_999), 4);
    // One nanosecond less and the fourth is refused, and the bound says 3.
    let b = bucket(3, 1_000);
    assert_eq!(drain(&b, 999_999), 3);
    assert!(b.try_acquire_at(999_999_999).is_err());
    assert_eq!(bound_in_readings(3, 1_000, 999_999_999 - 999_999), 3);
}

/// `burst + ⌊(span + 999,999 ns) / interval⌋`: the most tokens granted at readings within a
/// closed span of `span_ns`, absent refunds (module docs, "Bounds in readings").
fn bound_in_readings(burst: u32, interval_ms: u32, span_ns: u64) -> u128 {
    let interval_ns = u128::from(interval_ms) * u128::from(MS);
    u128::from(burst) + (u128::from(span_ns) + u128::from(MS) - 1) / interval_ns
}

/// Steps of a history of takes: the reading moves forward or back, or `n` tokens are asked for.
#[derive(Debug, Clone, Copy)]
enum SpanOp {
    Forward(u64),
    Back(u64),
    Take(u32),
}

fn span_op_strategy() -> impl Strategy<Value = SpanOp> {
    prop_oneof![
        3 => (0u64..2 * MS).prop_map(SpanOp::Forward),
        2 => (0u64..200 * MS).prop_map(SpanOp::Forward),
        1 => prop_oneof![Just(1u64), Just(MS - 1), Just(MS)].prop_map(SpanOp::Forward),
        1 => (0u64..50 * MS).prop_map(SpanOp::Back),
        6 => (1u32..4).prop_map(SpanOp::Take),
    ]
}

proptest! {
    #![proptest_config(crate::check::proptest_config(512))]

    /// For every pair of granted readings `r ≤ r'`, the tokens granted at readings within
    /// `[r, r']` are at most `burst + ⌊(r' − r + 999,999 ns) / interval⌋`, over histories
    /// with lagging readings among them.
    #[cfg_attr(
        miri,
        ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
    )]
    #[test]
    fn grants_in_any_span_of_readings_stay_within_the_stated_bound(
        burst in 1u32..6,
        interval_ms in 1u32..40,
        start_ns in 0u64..10 * MS,
        ops in proptest::collection::vec(span_op_strategy(), 1..200),
    ) {
        let b = bucket(burst, interval_ms);
        let mut now = start_ns;
        let mut granted: Vec<(u64, u32)> = Vec::new();
        for op in ops {
            match op {
                SpanOp::Forward(ns) => now += ns,
                SpanOp::Back(ns) => now = now.saturating_sub(ns),
                SpanOp::Take(n) => {
                    if b.try_acquire_n_at(n, now).is_ok() {
                        granted.push((now, n));
                    }
                }
            }
        }
        granted.sort_unstable();
        for (i, &(from, _)) in granted.iter().enumerate() {
            let mut tokens = 0u128;
            for &(to, n) in &granted[i..] {
                tokens += u128::from(n);
                let bound = bound_in_readings(burst, interval_ms, to - from);
                prop_assert!(
                    tokens <= bound,
                    "{tokens} tokens within [{from}, {to}] ns, bound {bound}"
                );
            }
        }
    }
}

fn op_strategy() -> impl Strategy<Value = BucketOp> {
    prop_oneof![
        3 => (0u64..3_000_000_000).prop_map(|ns| BucketOp::Advance { ns }),
        1 => (0u64..2_000_000).prop_map(|ns| BucketOp::Advance { ns }),
        1 => (0u64..5_000_000_000).prop_map(|ns| BucketOp::StepBack { ns }),
        4 => (0u32..12).prop_map(|n| BucketOp::Take { n }),
        2 => (0u32..12).prop_map(|n| BucketOp::Peek { n }),
        2 => (any::<u8>(), 0u32..12, prop::bool::weighted(0.2)).prop_map(|(pick, n, elsewhere)| BucketOp::Refund { pick, n, elsewhere }),
        1 => (
            1u32..16,
            prop_oneof![(1u32..2_000).prop_map(|ms| ms * 1_000), 1u32..100_000],
        )
            .prop_map(|(burst, interval_us)| BucketOp::SetConfig { burst, interval_us }),
        1 => (
            1u32..16,
            prop_oneof![(1u32..2_000).prop_map(|ms| ms * 1_000), 1u32..100_000],
            0u64..3_000_000_000,
        )
            .prop_map(|(burst, interval_us, behind_ns)| BucketOp::LateSetConfig {
                burst,
                interval_us,
                behind_ns,
            }),
    ]
}

/// Histories where only changes arrive out of reading order: takes at a reading that only
/// moves forward, changes at readings up to 20 ms behind it (a change that read its clock,
/// then lost the race to takes and to a change that read later), at millisecond intervals of
/// 1 to 30 ms, where one tick of debt is a large share of a token.
/// Histories run by `changes_out_of_reading_order_stay_within_the_envelope`.
const CASES_LATE: u32 = 4_096;

fn late_change_strategy() -> impl Strategy<Value = BucketOp> {
    prop_oneof![
        3 => (0u64..4_000_000).prop_map(|ns| BucketOp::Advance { ns }),
        2 => Just(BucketOp::Take { n: 1 }),
        3 => (1u32..3, prop_oneof![Just(10u32), Just(20), 5u32..41], 0u64..10_000_000)
            .prop_map(|(burst, ms, behind_ns)| {
            BucketOp::LateSetConfig {
                burst,
                interval_us: ms * 1_000,
                behind_ns,
            }
        }),
    ]
}

proptest! {
    #![proptest_config(crate::check::proptest_config(512))]

    /// Identical answers and waits to the `u128` reference over random histories, with the
    /// no-mint and retry invariants checked after every step (see `check::bucket::run`).
    #[cfg_attr(
        miri,
        ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
    )]
    #[test]
    fn matches_the_reference_model(
        burst in 1u32..10,
        interval_ms in 1u32..2_000,
        start_ns in start_strategy(),
        ops in proptest::collection::vec(op_strategy(), 1..200),
    ) {
        run(burst, interval_ms, start_ns, &ops);
    }

    /// The same at microsecond intervals, up to 1,000,000 tokens per second.
    #[cfg_attr(
        miri,
        ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
    )]
    #[test]
    fn microsecond_bucket_matches_the_reference_model(
        burst in prop_oneof![1u32..10, Just(1_000_000)],
        interval_us in prop_oneof![Just(1u32), 1u32..1_000, 1_001u32..100_000],
        start_ns in start_strategy(),
        ops in proptest::collection::vec(op_strategy(), 1..200),
    ) {
        crate::check::bucket::run_in(burst, interval_us, 1_000, start_ns, &ops);
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
            prop_assert!(b.try_acquire_n_at(burst, drained_at).is_ok());
        }
        let now = drained_at + later;
        match exact.try_acquire_n_at(n, now) {
            Ok(()) => {}
            Err(err) => {
                let wait = u64::try_from(err.wait().unwrap().as_nanos()).unwrap();
                prop_assert!(wait > 0);
                prop_assert!(early.try_acquire_n_at(n, now + wait - 1).is_err());
                prop_assert!(exact.try_acquire_n_at(n, now + wait).is_ok());
            }
        }
    }
}

proptest! {
    #![proptest_config(crate::check::proptest_config(CASES_LATE))]

    /// The envelope over histories where only changes arrive out of reading order (see
    /// `late_change_strategy`).
    #[cfg_attr(
        miri,
        ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
    )]
    #[test]
    fn changes_out_of_reading_order_stay_within_the_envelope(
        burst in 1u32..3,
        interval_ms in prop_oneof![Just(10u32), 5u32..41],
        ops in proptest::collection::vec(late_change_strategy(), 1..16),
    ) {
        run(burst, interval_ms, 100_000_000, &ops);
    }
}
