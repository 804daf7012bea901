//! The memory figures `docs/en/choosing-limits.md` (and its Korean twin) quote, measured with
//! each primitive's own `memory_bytes()`: fixed at construction, whatever names arrive. The
//! test fails when a figure drifts from the page by more than the rounding the page uses.

// Test code: a failed unwrap is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use admit::fairness::Quotas;
use admit::quota::{Quota, RateLimit};
use admit::{BucketConfig, Limiter, TokenBucket};

fn kib(bytes: usize) -> f64 {
    bytes as f64 / 1024.0
}

/// `bytes` is within 5 % of `expected_kib` KiB.
fn near(what: &str, bytes: usize, expected_kib: f64) {
    let got = kib(bytes);
    println!("{what}: {got:.1} KiB ({bytes} B)");
    assert!(
        (got - expected_kib).abs() <= expected_kib * 0.05,
        "{what}: {got:.1} KiB, the page says {expected_kib} KiB"
    );
}

#[test]
fn the_limiter_costs_about_30_bytes_per_entry_of_cap() {
    let class = BucketConfig::per_second(10)
        .unwrap()
        .with_burst(20)
        .unwrap();
    for (cap, expected) in [
        (256, 7.9),
        (4_096, 120.0),
        (65_536, 1_920.0),
        (1 << 20, 30_720.0),
    ] {
        let limiter = Limiter::builder().cap(cap).build([class]).unwrap();
        near(
            &format!("Limiter cap {cap}"),
            limiter.memory_bytes(),
            expected,
        );
    }
    // A second class adds no entries: a key is (identity, class), and the cap counts them all.
    let two = Limiter::builder().cap(4_096).build([class, class]).unwrap();
    near("Limiter cap 4096, 2 classes", two.memory_bytes(), 120.0);
}

#[test]
fn in_flight_quotas_cost_about_30_bytes_per_actor_plus_6_kib() {
    for (actors, expected) in [(1_024, 36.0), (4_096, 126.0), (65_536, 1_926.0)] {
        let quotas = Quotas::builder().actors(actors).build().unwrap();
        near(
            &format!("Quotas actors {actors}"),
            quotas.memory_bytes(),
            expected,
        );
    }
}

#[test]
fn the_volume_quota_is_512_kib_whatever_its_limits() {
    for quota in [
        Quota::DEFAULT,
        Quota::new(10, 1_024, std::time::Duration::from_secs(1)).unwrap(),
    ] {
        near("RateLimit", RateLimit::new(quota).memory_bytes(), 512.0);
    }
}

#[test]
fn a_token_bucket_is_under_a_hundred_bytes() {
    let size = std::mem::size_of::<TokenBucket>();
    println!("TokenBucket: {size} B");
    assert!(size <= 96, "TokenBucket is {size} B");
}
