//! One test per invariant in the module docs, the collision measurement behind
//! `docs/design.md` §5, then the proptests against the reference model.

use super::shards::Bucket;
use super::*;
use crate::check::quota::{run, QuotaOp, QuotaParams};
use crate::clock::ManualClock;
use proptest::prelude::*;
use std::collections::HashMap;
use std::fmt::Write as _;

const MS: u64 = 1_000_000;
const W: u64 = 1_000 * MS;
const KEYS: (u64, u64) = (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);

pub(super) fn quota(events: u32, bytes: u32, rows: usize) -> Quota {
    Quota::new(events, bytes, Duration::from_nanos(W))
        .and_then(|q| q.with_rows(rows))
        .unwrap()
}

/// Where the tests' clocks stand: 200,000 windows in, past every reading the tests below hand
/// to `_at` (at most 65,537 windows), so that none of them is refused as ahead of the clock.
/// The tests of that refusal set their own clocks.
const LATE: u64 = 200_000 * W;

/// A full-size limiter with fixed keys, so that tests can search for colliding names.
fn fixed(q: Quota) -> RateLimit<ManualClock> {
    RateLimit::with_geometry(q, BUCKETS, KEYS, ManualClock::starting_at(LATE)).unwrap()
}

/// The quota refusal inside a `try_acquire_at` error; fails the test on any other outcome.
trait Exceeded {
    fn exceeded(self) -> VolumeExceeded;
}

impl Exceeded for Result<(), RateLimitRefused> {
    fn exceeded(self) -> VolumeExceeded {
        match self {
            Err(RateLimitRefused::Exceeded(e)) => e,
            other => panic!("expected a quota refusal, got {other:?}"),
        }
    }
}

/// Names `prefix-0, prefix-1, …` until `accept` takes one.
fn find_name(prefix: &str, mut accept: impl FnMut(&str) -> bool) -> String {
    (0u64..10_000_000)
        .map(|i| format!("{prefix}-{i}"))
        .find(|n| accept(n))
        .expect("no name found in 10 million tries")
}

/// Charges `actor` one event of `bytes` at `now` until refused; returns how many were admitted.
fn fill(q: &RateLimit<ManualClock>, actor: &str, bytes: u64, now: u64) -> u32 {
    let mut n = 0;
    while q.try_acquire_at(actor, bytes, now).is_ok() {
        n += 1;
    }
    n
}

// ---------------------------------------------------------------- 1. memory is fixed

fn names_through(q: &RateLimit<ManualClock>, count: u64) {
    let mut name = String::new();
    for i in 0..count {
        name.clear();
        write!(name, "actor-{i}").unwrap();
        let charged = q.try_acquire_at(&name, i % 4_096, i * 1_000);
        assert!(charged.is_ok() || charged.exceeded().limit() == VolumeLimit::Bytes);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn ten_million_names_leave_the_allocation_unchanged() {
    let q = RateLimit::with_clock(Quota::default(), ManualClock::starting_at(LATE));
    assert_eq!(q.shards.len(), BUCKETS);
    assert_eq!(std::mem::size_of::<Bucket>(), 8);
    assert_eq!(q.shards.array_bytes(), BUCKETS * 2 * 4);
    let before = q.memory_bytes();
    assert_eq!(before, std::mem::size_of_val(&q) + BUCKETS * 8);
    // The header beside the array: epoch, keys, quota, clock.
    let header = std::mem::size_of::<RateLimit<crate::clock::RecentClock>>();
    eprintln!("RateLimit<RecentClock> is {header} bytes beside the array");
    // With the optional features, their handles: a metrics box pointer, a trace digest key.
    let features = if cfg!(feature = "metrics") { 8 } else { 0 }
        + if cfg!(feature = "tracing") { 16 } else { 0 };
    assert!(header <= 128 + features, "{header}");
    names_through(&q, if cfg!(miri) { 100 } else { 10_000_000 });
    assert_eq!(q.shards.len(), BUCKETS);
    assert_eq!(q.memory_bytes(), before);
    // Rows split the same counters: memory does not depend on them.
    for rows in [1, 2, 4] {
        let r = RateLimit::with_clock(quota(5, 5, rows), ManualClock::new());
        assert_eq!(r.memory_bytes(), before);
    }
}

/// Resident set size in bytes (Linux), from `/proc/self/statm`.
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4_096)
}

/// Run alone: `cargo test --release --lib quota::tests::rss -- --ignored --test-threads=1`.
#[test]
#[ignore = "stress: ten million names, measures RSS; run alone"]
fn rss_is_unchanged_by_ten_million_names() {
    let q = RateLimit::with_clock(Quota::default(), ManualClock::starting_at(LATE));
    // Every word was written at construction, so every page of the array is resident.
    names_through(&q, 1_000);
    let Some(before) = rss_bytes() else {
        eprintln!("no /proc/self/statm: RSS not measured");
        return;
    };
    names_through(&q, 10_000_000);
    let after = rss_bytes().unwrap();
    eprintln!(
        "RSS before {before} B, after 10,000,000 names {after} B (array {} B)",
        q.memory_bytes()
    );
    // A map from name to counter would hold hundreds of megabytes here.
    assert!(
        after.saturating_sub(before) < 1 << 20,
        "RSS grew by {} B",
        after - before
    );
}

// ---------------------------------------------------------------- 2, 6. shared budgets, rows

#[test]
fn two_actors_forced_into_one_bucket_share_its_budget() {
    let q = fixed(quota(10, 1_000, 1));
    // Birthday search: two names with the same bucket.
    let mut seen = HashMap::new();
    let (a, b) = (0u64..)
        .map(|i| format!("actor-{i}"))
        .find_map(|n| {
            let idx = q.bucket_indexes(&n);
            seen.insert(idx, n.clone()).map(|other| (other, n))
        })
        .unwrap();
    assert_eq!(q.bucket_indexes(&a), q.bucket_indexes(&b));
    for _ in 0..6 {
        q.try_acquire_at(&a, 10, 0).unwrap();
    }
    assert_eq!(fill(&q, &b, 10, 0), 4, "b gets what a left");
    let e = q.try_acquire_at(&a, 10, 0).exceeded();
    assert_eq!((e.limit(), e.used()), (VolumeLimit::Events, 10));
    assert_eq!(q.usage_at(&a, 0).unwrap(), q.usage_at(&b, 0).unwrap());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn with_two_rows_an_innocent_sharing_one_row_with_a_heavy_actor_is_not_refused() {
    let q = fixed(quota(10, 1_000, 2));
    let heavy = "heavy";
    let h = q.bucket_indexes(heavy);
    let innocent = find_name("innocent", |n| {
        let i = q.bucket_indexes(n);
        i[0] == h[0] && i[1] != h[1]
    });
    assert_eq!(fill(&q, heavy, 100, 0), 10);
    // Its row-0 bucket is full, its row-1 bucket is its own: it gets its whole budget.
    assert_eq!(q.usage_at(&innocent, 0).unwrap().events, 0);
    assert_eq!(fill(&q, &innocent, 100, 0), 10);
    // And the heavy actor gained nothing from the innocent's charges.
    assert!(q.try_acquire_at(heavy, 0, 0).is_err());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn an_innocent_is_refused_only_when_every_row_is_full() {
    let q = fixed(quota(10, 1_000, 2));
    let innocent = "innocent";
    let i = q.bucket_indexes(innocent);
    let q_ref = &q;
    let i_ref = &i;
    let in_row = |row: usize| {
        move |n: &str| {
            let x = q_ref.bucket_indexes(n);
            x[row] == i_ref[row] && x[1 - row] != i_ref[1 - row]
        }
    };
    let heavy0 = find_name("heavy0", in_row(0));
    let heavy1 = find_name("heavy1", in_row(1));
    assert_eq!(fill(&q, &heavy0, 1, 0), 10);
    assert!(
        q.try_acquire_at(innocent, 1, 0).is_ok(),
        "one full row must not refuse"
    );
    // Undo that charge's effect on the question by using a fresh limiter for the next part.
    let q = fixed(quota(10, 1_000, 2));
    assert_eq!(fill(&q, &heavy0, 1, 0), 10);
    assert_eq!(fill(&q, &heavy1, 1, 0), 10);
    let e = q.try_acquire_at(innocent, 1, 0).exceeded();
    assert_eq!(e.limit(), VolumeLimit::Events);
    // With one row the same heavy actor alone refuses it.
    let one = fixed(quota(10, 1_000, 1));
    let innocent1 = find_name("innocent1", |n| {
        one.bucket_indexes(n) == one.bucket_indexes(&heavy0)
    });
    assert_eq!(fill(&one, &heavy0, 1, 0), 10);
    assert!(one.try_acquire_at(&innocent1, 1, 0).is_err());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn conservative_update_raises_rows_to_the_heaviest_not_the_sum() {
    // Two actors sharing row 0 only, each charging 4 of 10: with plain count-min row 0 would
    // hold 8; with conservative update it holds 4 + 4 only where the estimate says so.
    let q = fixed(quota(10, 1_000, 2));
    let a = "a";
    let ia = q.bucket_indexes(a);
    let b = find_name("b", |n| {
        let x = q.bucket_indexes(n);
        x[0] == ia[0] && x[1] != ia[1]
    });
    for _ in 0..4 {
        q.try_acquire_at(a, 1, 0).unwrap();
        q.try_acquire_at(&b, 1, 0).unwrap();
    }
    // The shared row-0 word holds the heavier of the two (4), not their sum (8): plain
    // count-min would put 8 there, and a third actor whose other row is also loaded would
    // then be refused on a budget nobody spent.
    let shared = q.shards.raw_words()[ia[0]];
    assert_eq!(word::events(shared), 4);
    assert_eq!(word::bytes(shared), 4);
    // Each actor's estimate is exactly its own count (its private row).
    assert_eq!(q.usage_at(a, 0).unwrap().events, 4);
    assert_eq!(q.usage_at(&b, 0).unwrap().events, 4);
    // Each still has exactly its remaining budget.
    assert_eq!(fill(&q, a, 1, 0), 6);
    assert_eq!(fill(&q, &b, 1, 0), 6);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn sequentially_an_isolated_actor_gets_exactly_its_limits() {
    for rows in [1, 2, 4] {
        let q = fixed(quota(7, 100, rows));
        assert_eq!(fill(&q, "solo", 0, 0), 7, "rows {rows}");
        let q = fixed(quota(7, 100, rows));
        // 30 bytes each: three fit in 100, the fourth does not.
        assert_eq!(fill(&q, "solo", 30, 0), 3, "rows {rows}");
        let e = q.try_acquire_at("solo", 30, 0).exceeded();
        assert_eq!(
            (e.limit(), e.used(), e.requested()),
            (VolumeLimit::Bytes, 90, 30)
        );
        // Ten bytes still fit exactly.
        assert!(q.try_acquire_at("solo", 10, 0).is_ok());
        assert_eq!(q.usage_at("solo", 0).unwrap().bytes, 100);
    }
}

// ---------------------------------------------------------------- 7. refusals

#[cfg_attr(
    miri,
    ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
)]
#[test]
fn a_refusal_charges_nothing_and_names_the_limit() {
    let q = fixed(quota(3, 100, 2));
    q.try_acquire_at("a", 60, 0).unwrap();
    let before = q.usage_at("a", 0).unwrap();
    let e = q.try_acquire_at("a", 50, 0).exceeded();
    assert_eq!(e.limit(), VolumeLimit::Bytes);
    assert_eq!((e.max(), e.used(), e.requested()), (100, 60, 50));
    assert_eq!(
        q.usage_at("a", 0).unwrap(),
        before,
        "a refusal counted something"
    );
    q.try_acquire_at("a", 40, 0).unwrap();
    q.try_acquire_at("a", 0, 0).unwrap();
    let e = q.try_acquire_at("a", 0, 0).exceeded();
    assert_eq!(
        (e.limit(), e.used(), e.requested()),
        (VolumeLimit::Events, 3, 1)
    );
    // Events are reported before bytes when both are exhausted.
    assert_eq!(
        q.try_acquire_at("a", 1, 0).exceeded().limit(),
        VolumeLimit::Events
    );
}

#[cfg_attr(
    miri,
    ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
)]
#[test]
fn a_write_larger_than_the_bytes_limit_is_permanent_and_charges_nothing() {
    let q = fixed(quota(3, 100, 1));
    let e = q.try_acquire_at("a", 101, 0).exceeded();
    assert!(e.is_permanent());
    assert_eq!(e.retry_after(), None);
    assert_eq!((e.limit(), e.requested()), (VolumeLimit::Bytes, 101));
    let e = q.try_acquire_at("a", u64::MAX, 0).exceeded();
    assert_eq!(e.requested(), u64::MAX);
    assert_eq!(q.usage_at("a", 0).unwrap().events, 0);
    assert_eq!(fill(&q, "a", 100, 0), 1);
}

#[test]
fn the_refusal_says_exactly_when_the_window_turns() {
    let q = fixed(quota(1, 100, 2));
    let now = 3 * W + 250 * MS + 7;
    q.try_acquire_at("a", 1, now).unwrap();
    let e = q.try_acquire_at("a", 1, now).exceeded();
    assert_eq!(e.window_turns_in(), Duration::from_nanos(4 * W - now));
    assert_eq!(e.retry_after_secs(), Some(1));
    let turn = now + u64::try_from(e.window_turns_in().as_nanos()).unwrap();
    assert!(q.try_acquire_at("a", 1, turn - 1).is_err());
    assert!(q.try_acquire_at("a", 1, turn).is_ok());
    assert_eq!(
        q.usage_at("a", turn).unwrap().window_turns_in,
        Duration::from_nanos(W)
    );
}

// ---------------------------------------------------------------- 4, 5. windows

#[cfg_attr(
    miri,
    ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
)]
#[test]
fn counts_do_not_leak_into_the_next_window() {
    let q = fixed(quota(5, 50, 2));
    assert_eq!(fill(&q, "a", 10, W - 1), 5);
    assert_eq!(q.usage_at("a", W - 1).unwrap().events, 5);
    // The window turns: the next one starts empty, with exactly one budget in it.
    assert_eq!(q.usage_at("a", W).unwrap().events, 0);
    assert_eq!(q.usage_at("a", W).unwrap().bytes, 0);
    assert_eq!(fill(&q, "a", 10, W), 5);
    assert_eq!(fill(&q, "a", 10, 2 * W - 1), 0);
    // Two windows later, idle in between: still exactly one budget.
    assert_eq!(fill(&q, "a", 10, 4 * W + 3), 5);
}

#[cfg_attr(
    miri,
    ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
)]
#[test]
fn the_boundary_factor_is_exactly_two_and_no_more() {
    let q = fixed(quota(5, 1_000, 1));
    // Spend a budget in the last nanosecond of window 0 and another in the first of window 1:
    // 2 × the limit within a span of 2 ns, the documented worst case, attained.
    assert_eq!(fill(&q, "a", 0, W - 1), 5);
    assert_eq!(fill(&q, "a", 0, W), 5);
    // But nothing more until window 2: no span of one window ever holds a third budget.
    assert_eq!(fill(&q, "a", 0, 2 * W - 1), 0);
    assert_eq!(fill(&q, "a", 0, 2 * W), 5);
}

#[cfg_attr(
    miri,
    ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
)]
#[test]
fn a_reading_older_than_the_newest_window_counts_in_the_newest() {
    let q = fixed(quota(3, 100, 2));
    q.try_acquire_at("a", 1, 5 * W).unwrap();
    // A lagging reading (a racing thread, or the clock stepping back) does not reset the
    // words to window 0: it counts in window 5, beside the charge already there.
    q.try_acquire_at("a", 1, W / 2).unwrap();
    assert_eq!(q.usage_at("a", 5 * W).unwrap().events, 2);
    assert_eq!(q.usage_at("a", W / 2).unwrap().events, 2);
    q.try_acquire_at("a", 1, 0).unwrap();
    // Window 5 is full, so old readings are refused too, and told the wait to window 6 from
    // their own reading.
    let e = q.try_acquire_at("a", 1, W / 2).exceeded();
    assert_eq!(e.window_turns_in(), Duration::from_nanos(6 * W - W / 2));
    assert_eq!(fill(&q, "a", 1, 6 * W), 3);
}

#[cfg_attr(
    miri,
    ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
)]
#[test]
fn stamp_aliasing_is_exactly_the_documented_over_count() {
    let q = fixed(quota(3, 100, 1));
    assert_eq!(fill(&q, "a", 1, 0), 3);
    let period = word::STAMP_PERIOD;
    // 65,536 windows later, untouched in between, the word's stamp matches again: it reads its
    // old counts (an over-count, never an under-count) ...
    assert_eq!(q.usage_at("a", period * W).unwrap().events, 3);
    assert_eq!(q.usage_at("a", period * W).unwrap().bytes, 3);
    assert!(q.try_acquire_at("a", 1, period * W).is_err());
    // ... only until that window turns.
    assert_eq!(fill(&q, "a", 1, (period + 1) * W), 3);
    // Any other distance reads as empty; 256 windows, the period of an 8-bit stamp, is no
    // longer one.
    for later in [255, 256, 257, period - 1, period + 1] {
        let q = fixed(quota(3, 100, 1));
        assert_eq!(fill(&q, "a", 1, 0), 3);
        assert_eq!(q.usage_at("a", later * W).unwrap().events, 0, "{later}");
    }
}

#[test]
fn the_clock_form_reads_the_injected_clock() {
    let clock = ManualClock::new();
    let q = RateLimit::with_clock(quota(2, 100, 2), clock.clone());
    q.try_acquire("a", 1).unwrap();
    q.try_acquire("a", 1).unwrap();
    assert!(q.try_acquire("a", 1).is_err());
    assert_eq!(q.usage("a").events, 2);
    clock.advance(Duration::from_nanos(W));
    q.try_acquire("a", 1).unwrap();
    assert_eq!(q.usage("a").events, 1);
}

// ---------------------------------------------------------------- 8. keys, and defaults

#[test]
fn the_hash_key_differs_between_two_limiters() {
    let a = RateLimit::default();
    let b = RateLimit::default();
    assert_ne!(a.shards.keys(), b.shards.keys());
    // So the bucket of a name is not predictable from another limiter (or process): of 64
    // names, essentially none lands in the same buckets in both.
    let same = (0..64)
        .map(|i| format!("actor-{i}"))
        .filter(|n| a.bucket_indexes(n) == b.bucket_indexes(n))
        .count();
    assert!(same < 4, "{same} of 64 names kept their buckets");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn the_default_limiter_enforces_the_default_quota() {
    let q = RateLimit::default();
    assert_eq!(q.quota(), Quota::default());
    assert_eq!(q.shards.rows(), Quota::DEFAULT_ROWS);
    assert_eq!(q.shards.len(), BUCKETS);
    let now = 0;
    let mut admitted = 0;
    while q.try_acquire_at("a", 0, now).is_ok() {
        admitted += 1;
    }
    assert_eq!(admitted, 1_200);
}

#[test]
fn debug_keeps_the_keys_secret() {
    let q = fixed(quota(1, 1, 1));
    let text = format!("{q:?}");
    assert!(text.contains("<secret>"));
    assert!(!text.contains(&KEYS.0.to_string()));
    assert!(!text.contains(&format!("{:x}", KEYS.0)));
}

#[cfg_attr(
    miri,
    ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
)]
#[test]
fn invalid_geometries_are_refused() {
    let q = quota(1, 1, 2);
    let clock = ManualClock::new;
    assert!(RateLimit::with_geometry(q, 3, KEYS, clock()).is_none());
    assert!(RateLimit::with_geometry(q, 1, KEYS, clock()).is_none());
    assert!(RateLimit::with_geometry(q, 2, KEYS, clock()).is_some());
    let q4 = quota(1, 1, 4);
    // 4 rows of 2^17 would need 68 hash bits.
    assert!(RateLimit::with_geometry(q4, 1 << 19, KEYS, clock()).is_none());
    assert!(RateLimit::with_geometry(q4, 1 << 18, KEYS, clock()).is_some());
}

// ---------------------------------------------------------------- the collision table

/// `(1 − (1 − d/B)^k)^d`: an innocent actor's chance that each of its `d` buckets (of `B/d`
/// per row) holds at least one of `k` actors at their limit.
pub(crate) fn formula(buckets: usize, rows: usize, k: usize) -> f64 {
    let per_row_empty = (1.0 - rows as f64 / buckets as f64).powf(k as f64);
    (1.0 - per_row_empty).powf(rows as f64)
}

/// Deterministic measurement at equal memory: `trials` limiters with seeded keys, `k` heavy
/// actors charged to their limit in each, then `probes` fresh actors asked whether their next
/// write would be refused (without charging them). Returns the refused fraction.
pub(crate) fn simulate(rows: usize, k: usize, trials: u64, probes: usize) -> f64 {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x0051_07a5 + rows as u64 * 1_000 + k as u64);
    let mut refused = 0usize;
    for trial in 0..trials {
        let keys = (rng.random(), rng.random());
        // A limit of one event: one charge puts an actor at its limit.
        let q =
            RateLimit::with_geometry(quota(1, 1, rows), BUCKETS, keys, ManualClock::new()).unwrap();
        for j in 0..k {
            let _ = q.try_acquire_at(&format!("heavy-{trial}-{j}"), 0, 0);
        }
        refused += (0..probes)
            .filter(|p| {
                q.usage_at(&format!("innocent-{trial}-{p}"), 0)
                    .unwrap()
                    .events
                    >= 1
            })
            .count();
    }
    refused as f64 / (trials as usize * probes) as f64
}

#[test]
fn the_measured_collision_rate_matches_the_formula() {
    if cfg!(miri) {
        return;
    }
    for rows in [1, 2, 4] {
        let k = 8_192;
        let want = formula(BUCKETS, rows, k);
        let got = simulate(rows, k, 2, 20_000);
        // Binomial standard error over 40,000 probes, plus the formula's approximation.
        let tolerance = 4.0 * (want * (1.0 - want) / 40_000.0).sqrt() + 0.002;
        assert!(
            (got - want).abs() <= tolerance,
            "rows {rows}, k {k}: measured {got:.5}, formula {want:.5}"
        );
    }
}

/// Prints the table in `docs/design.md` §5:
/// `cargo test --release --lib quota::tests::collision_table -- --ignored --nocapture`.
#[test]
#[ignore = "prints the collision table for docs/design.md §5 (about a minute)"]
fn collision_table() {
    let ks = [100, 1_000, 4_096, 10_000, 30_000, 65_536];
    println!("| k heavy actors | d = 1 measured | d = 1 formula | d = 2 measured | d = 2 formula | d = 4 measured | d = 4 formula |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for k in ks {
        let mut line = format!("| {k} |");
        for rows in [1, 2, 4] {
            let got = simulate(rows, k, 8, 100_000);
            let want = formula(BUCKETS, rows, k);
            write!(line, " {} | {} |", pct(got), pct(want)).unwrap();
        }
        println!("{line}");
    }
}

pub(super) fn pct(p: f64) -> String {
    if p == 0.0 {
        "0".to_owned()
    } else if p < 0.0001 {
        format!("{:.1e}", p * 100.0) + " %"
    } else {
        format!("{:.3} %", p * 100.0)
    }
}

// ---------------------------------------------------------------- against the reference

fn op_strategy() -> impl Strategy<Value = QuotaOp> {
    prop_oneof![
        2 => (0u64..3 * W).prop_map(|ns| QuotaOp::Advance { ns }),
        2 => (0u64..2_000).prop_map(|ns| QuotaOp::Advance { ns }),
        1 => prop_oneof![Just(256u32), Just(65_535), Just(65_536), Just(65_537), Just(131_072), 0u32..600]
            .prop_map(|n| QuotaOp::AdvanceWindows { n }),
        1 => (0u64..5 * W).prop_map(|ns| QuotaOp::StepBack { ns }),
        6 => (any::<u8>(), 0u64..40).prop_map(|(actor, bytes)| QuotaOp::Charge { actor, bytes }),
        2 => (any::<u8>(), 0u64..40).prop_map(|(actor, bytes)| QuotaOp::ChargeBytes { actor, bytes }),
        1 => (any::<u8>(), 0u64..40).prop_map(|(actor, bytes)| QuotaOp::StaleCharge { actor, bytes }),
        1 => any::<u8>().prop_map(|actor| QuotaOp::Peek { actor }),
        1 => (1u32..8, 1u32..64, proptest::bool::weighted(0.1))
            .prop_map(|(events, bytes, window_too)| QuotaOp::SetLimits { events, bytes, window_too }),
        1 => (
            any::<u8>(),
            prop_oneof![
                Just(u64::MAX),
                Just(crate::clock::READING_TOLERANCE_NS),
                Just(crate::clock::READING_TOLERANCE_NS + 1),
                0u64..3 * crate::clock::READING_TOLERANCE_NS,
                0u64..5 * W,
            ],
            any::<bool>(),
        )
            .prop_map(|(actor, ns, peek)| QuotaOp::Ahead { actor, ns, peek }),
    ]
}

fn params_strategy() -> impl Strategy<Value = QuotaParams> {
    (
        1u32..6,
        1u32..40,
        prop_oneof![Just(W), (1u64..5_000).prop_map(|ms| ms * MS)],
        prop_oneof![Just(1usize), Just(2), Just(4)],
        0u32..3,
        any::<(u64, u64)>(),
        1u8..10,
    )
        .prop_map(
            |(events, bytes, window_ns, rows, spread, keys, actors)| QuotaParams {
                events,
                bytes,
                window_ns,
                rows,
                buckets: rows << spread,
                keys,
                actors,
            },
        )
}

proptest! {
    #![proptest_config(crate::check::proptest_config(512))]

    /// Identical answers, windows, estimates and waits to the reference, over histories in a
    /// handful of buckets (so that actors collide in some rows and not others), with the spec
    /// invariants checked after every step (see `check::quota::run`).
    #[cfg_attr(
        miri,
        ignore = "sequential logic: run natively, by proptest and fuzz; minutes under miri"
    )]
    #[test]
    fn matches_the_reference_model(
        params in params_strategy(),
        start_ns in prop_oneof![Just(0u64), 0u64..1_000 * W, (1u64 << 59)..(1u64 << 63)],
        ops in proptest::collection::vec(op_strategy(), 1..200),
    ) {
        run(&params, start_ns, &ops);
    }
}

// ---------------------------------------------------------------- real threads, one actor

/// Two OS threads hammer one actor (rows 4, the worst case for tearing): the documented
/// bounds hold on real hardware too, and the printed rate says how much the slack costs.
#[test]
#[cfg_attr(
    miri,
    ignore = "scale test: minutes under miri; the ordinary run covers it"
)]
fn real_threads_on_one_actor_stay_within_the_documented_slack() {
    let per_thread: u32 = if cfg!(miri) { 50 } else { 200_000 };
    let q = std::sync::Arc::new(
        RateLimit::with_geometry(
            Quota::new(
                Quota::MAX_EVENTS,
                Quota::MAX_BYTES,
                Duration::from_secs(3_600),
            )
            .and_then(|q| q.with_rows(4))
            .unwrap(),
            BUCKETS,
            KEYS,
            ManualClock::new(),
        )
        .unwrap(),
    );
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let q = q.clone();
            std::thread::spawn(move || {
                let (mut admitted, mut torn) = (0u32, 0u32);
                for _ in 0..per_thread {
                    let (result, t) = q.charge_traced("hot", 1, 1, 0);
                    admitted += u32::from(result.is_ok());
                    torn += t;
                }
                (admitted, torn)
            })
        })
        .collect();
    let (admitted, torn) = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .fold((0, 0), |(a, t), (a2, t2)| (a + a2, t + t2));
    let usage = q.usage_at("hot", 0).unwrap();
    eprintln!(
        "2 threads x {per_thread} charges of one actor: admitted {admitted}, torn {torn} ({:.3} %), estimate {} events",
        100.0 * f64::from(torn) / f64::from(admitted.max(1)),
        usage.events
    );
    assert_eq!(admitted, 2 * per_thread, "refused below the limits");
    assert!(usage.events >= admitted && usage.bytes >= admitted);
    assert!(usage.events <= admitted + torn && usage.bytes <= admitted + torn);
}

// ---------------------------------------------------------------- 9. readings ahead of the clock

/// One caller's far-future reading must cost at most that caller's own
/// decision. Before the horizon, `try_acquire_at(_, _, u64::MAX)` moved the shared header to the
/// last window for the life of the process.
#[test]
#[cfg_attr(
    miri,
    ignore = "full-size arrays: minutes under miri; the ordinary run covers it"
)]
fn a_far_future_reading_moves_no_state_another_actor_sees() {
    let now = 5 * W + 250 * MS;
    let clock = ManualClock::starting_at(now);
    let q = RateLimit::with_geometry(quota(3, 100, 2), BUCKETS, KEYS, clock.clone()).unwrap();
    q.try_acquire_at("a", 1, now).unwrap();
    let header = q.shards.header();
    let words = q.shards.raw_words();
    let refused = q.try_acquire_at("mallory", 1, u64::MAX);
    assert_eq!(q.shards.header(), header, "the header moved");
    assert_eq!(q.shards.raw_words(), words, "a word moved");
    let Err(RateLimitRefused::ReadingAhead(ahead)) = refused else {
        panic!("a reading 584 years ahead was not refused as such: {refused:?}");
    };
    assert_eq!((ahead.reading_ns(), ahead.clock_ns()), (u64::MAX, now));
    let text = RateLimitRefused::ReadingAhead(ahead).to_string();
    assert!(text.contains("nothing was charged"), "{text}");
    assert!(text.contains("clock().now_ns()"), "{text}");
    // Another actor, at a normal reading, is admitted in the normal window and told the
    // normal wait.
    let (got, _) = q.charge_traced("b", 1, 1, now);
    assert_eq!(got.ok(), Some(5), "b counted in another window");
    assert_eq!(fill(&q, "b", 1, now), 2);
    let e = q.try_acquire_at("b", 1, now).exceeded();
    assert_eq!(e.window_turns_in(), Duration::from_nanos(6 * W - now));
    assert_eq!(e.retry_after_secs(), Some(1));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "full-size arrays: minutes under miri; the ordinary run covers it"
)]
fn after_a_far_future_reading_usage_still_reports_the_normal_window() {
    let now = 5 * W + 250 * MS;
    let clock = ManualClock::starting_at(now);
    let q = RateLimit::with_geometry(quota(3, 100, 2), BUCKETS, KEYS, clock.clone()).unwrap();
    q.try_acquire_at("a", 1, now).unwrap();
    let _ = q.try_acquire_at("mallory", 1, u64::MAX);
    let usage = q.usage_at("a", now).unwrap();
    assert_eq!(usage.events, 1, "a's charge vanished from its window");
    assert_eq!(usage.window_turns_in, Duration::from_nanos(6 * W - now));
    // And asking about the far future is refused too, rather than answered about a window no
    // charge can be counted in yet.
    let ahead = q.usage_at("a", u64::MAX).unwrap_err();
    assert_eq!(ahead.clock_ns(), now);
    assert_eq!(q.usage("a"), usage);
}

/// Every `_at` entry point (and the traced hook the reference driver and loom use) refuses a
/// reading just past the tolerance, changing nothing, and accepts one at the tolerance; once
/// the clock gets there, the same reading is accepted.
#[test]
#[cfg_attr(
    miri,
    ignore = "full-size arrays: minutes under miri; the ordinary run covers it"
)]
fn every_at_entry_point_refuses_a_reading_past_the_tolerance_and_changes_nothing() {
    use crate::clock::READING_TOLERANCE_NS as TOL;
    // The clock sits just before a window turns, so an accepted reading ahead moves the header.
    let now = 3 * W - TOL / 2;
    let clock = ManualClock::starting_at(now);
    let q = RateLimit::with_geometry(quota(3, 100, 1), BUCKETS, KEYS, clock.clone()).unwrap();
    q.try_acquire_at("a", 1, now).unwrap();
    let (header, words) = (q.shards.header(), q.shards.raw_words());
    let past = now + TOL + 1;
    let unchanged = |what: &str| {
        assert_eq!(q.shards.header(), header, "{what} moved the header");
        assert_eq!(q.shards.raw_words(), words, "{what} moved a word");
    };
    for ahead in [past, past + W, u64::MAX / 2, u64::MAX] {
        let e = q.try_acquire_at("a", 1, ahead).unwrap_err();
        assert_eq!(e.reading_ahead().map(|r| r.reading_ns()), Some(ahead));
        assert_eq!(e.exceeded(), None);
        unchanged("check_at");
        let e = q.usage_at("a", ahead).unwrap_err();
        assert_eq!(e.reading_ns(), ahead);
        unchanged("usage_at");
        let (got, torn) = q.charge_traced("a", 1, 1, ahead);
        assert!(
            matches!(got, Err(RateLimitRefused::ReadingAhead(_))),
            "{got:?}"
        );
        assert_eq!(torn, 0);
        unchanged("charge_traced");
    }
    // At the tolerance: accepted (a TSC reading from another core may lead by that much), and
    // counted in its own window.
    assert_eq!(q.usage_at("a", now + TOL).unwrap().events, 0);
    assert_eq!(q.charge_traced("a", 1, 1, now + TOL).0, Ok(3));
    // The clock moves on: the reading refused before is now an ordinary one.
    clock.set_ns(past);
    assert!(q.try_acquire_at("a", 1, past).is_ok());
    assert_eq!(q.usage_at("a", past).unwrap().events, 2);
}

/// The `check` and `usage` forms read the clock themselves: whatever the clock says is a
/// reading it has produced, so they are never refused as ahead.
#[test]
fn the_clock_forms_are_never_ahead_of_their_own_clock() {
    let clock = ManualClock::new();
    let q = RateLimit::with_clock(quota(3, 100, 1), clock.clone());
    clock.set_ns(7 * W);
    q.try_acquire("a", 1).unwrap();
    assert_eq!(q.usage("a").events, 1);
    assert_eq!(q.usage_at("a", 7 * W).unwrap().events, 1);
}

// ---------------------------------------------------------------- the window rule, exactly

/// "At most 2× in any span of readings of length W" holds only when readings
/// never go back. With lagging readings, 15 events with a limit of 5 have readings within
/// 3 ns; what holds is the limit per counted window.
#[test]
#[cfg_attr(
    miri,
    ignore = "full-size arrays: minutes under miri; the ordinary run covers it"
)]
fn lagging_readings_bound_nothing_but_each_counted_window_holds() {
    let clock = ManualClock::starting_at(2 * W);
    let q = RateLimit::with_geometry(quota(5, 1_000, 1), BUCKETS, KEYS, clock).unwrap();
    let mut counted: HashMap<u64, u32> = HashMap::new();
    let mut charge_all = |reading: u64| {
        let mut n = 0;
        while let (Ok(window), _) = q.charge_traced("a", 1, 0, reading) {
            *counted.entry(window).or_default() += 1;
            n += 1;
        }
        n
    };
    assert_eq!(charge_all(W - 1), 5);
    assert_eq!(charge_all(W), 5);
    // Another actor, with a reading the clock has produced, moves the window on.
    assert_eq!(q.charge_traced("b", 1, 0, 2 * W).0, Ok(2));
    // `a`'s lagging reading counts in window 2, beside `b`'s charge, not in its own.
    assert_eq!(charge_all(W + 1), 5);
    // 15 events for a limit of 5, their readings within W − 1 ..= W + 1: 3 ns.
    assert_eq!(counted.values().sum::<u32>(), 15);
    // Per counted window: exactly the limit, never more.
    assert_eq!(counted, HashMap::from([(0, 5), (1, 5), (2, 5)]));
}

/// The charge computes an actor's row indexes row after row (`Shards::indexes_of`); they are
/// the definition's (`Shards::index`: bits `row × w .. (row + 1) × w`, offset by the row), in
/// every geometry.
#[test]
#[cfg_attr(
    miri,
    ignore = "full-size arrays: minutes under miri; the ordinary run covers it"
)]
fn the_charges_row_indexes_are_the_definitions() {
    use super::shards::Shards;
    for rows in [1, 2, 4] {
        for buckets in [rows, 4 * rows, 1 << 10, BUCKETS] {
            let Some(shards) = Shards::with_geometry(buckets, rows, KEYS) else {
                continue;
            };
            for i in 0..200u64 {
                let hash = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i << 60);
                let want: Vec<usize> = (0..rows).map(|row| shards.index(hash, row)).collect();
                assert_eq!(shards.row_indexes(hash), want, "{rows} rows of {buckets}");
                assert!(want.iter().all(|&x| x < buckets));
            }
        }
    }
}
