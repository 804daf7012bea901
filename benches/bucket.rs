//! `TokenBucket` costs beside the floor they are measured against: one uncontended
//! `compare_exchange` on an `AtomicU64`, in the same run; and beside governor's direct
//! (unkeyed) limiter, `check` on its own clock, admitting and refusing.
//!
//! Run: `cargo bench --bench bucket`. Results are recorded in docs/benchmarks.md.
#![allow(missing_docs, clippy::unwrap_used)]

use admit::{BucketConfig, MonotonicClock, TokenBucket};
use criterion::{criterion_group, criterion_main, Criterion};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// A bucket that admits for billions of takes: burst u32::MAX, one token per 256 ms.
fn deep_bucket() -> TokenBucket {
    TokenBucket::new(BucketConfig::new(u32::MAX, Duration::from_millis(256)).unwrap())
}

fn single_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("bucket");

    let word = AtomicU64::new(0);
    let mut expected = 0u64;
    g.bench_function("floor: uncontended compare_exchange", |b| {
        b.iter(|| {
            let next = expected.wrapping_add(1);
            let r = word.compare_exchange(expected, next, Ordering::Relaxed, Ordering::Relaxed);
            expected = black_box(r.map_or_else(|actual| actual, |_| next));
        })
    });

    let bucket = deep_bucket();
    g.bench_function("try_acquire_at: admit", |b| {
        b.iter(|| bucket.try_acquire_at(black_box(1_000_000)))
    });

    let drained = TokenBucket::new(BucketConfig::new(1, Duration::from_millis(1_000)).unwrap());
    drained.try_acquire_at(0).unwrap();
    g.bench_function("try_acquire_at: deny", |b| {
        b.iter(|| drained.try_acquire_at(black_box(1_000)))
    });

    // governor's direct limiter, the anchor: a burst it never exhausts here, and one drained.
    let deep: DefaultDirectRateLimiter = RateLimiter::direct(
        Quota::with_period(Duration::from_millis(256))
            .unwrap()
            .allow_burst(NonZeroU32::new(u32::MAX).unwrap()),
    );
    g.bench_function("governor check: admit", |b| b.iter(|| deep.check().is_ok()));
    let shallow: DefaultDirectRateLimiter = RateLimiter::direct(
        Quota::with_period(Duration::from_secs(1000))
            .unwrap()
            .allow_burst(NonZeroU32::new(1).unwrap()),
    );
    assert!(shallow.check().is_ok());
    g.bench_function("governor check: deny", |b| {
        b.iter(|| shallow.check().is_err())
    });

    let clock = MonotonicClock::new();
    let bucket = deep_bucket();
    g.bench_function("try_acquire(&MonotonicClock): admit", |b| {
        b.iter(|| bucket.try_acquire(&clock))
    });
    g.bench_function("clock: MonotonicClock::now_ns", |b| {
        b.iter(|| admit::Clock::now_ns(&clock))
    });
    // The optional TSC clock, with its tick clamp: `cargo bench --bench bucket --features quanta`.
    #[cfg(feature = "quanta")]
    {
        let tsc = admit::clock::QuantaClock::new();
        g.bench_function("clock: QuantaClock::now_ns", |b| {
            b.iter(|| admit::Clock::now_ns(&tsc))
        });
        let bucket = deep_bucket();
        g.bench_function("try_acquire(&QuantaClock): admit", |b| {
            b.iter(|| bucket.try_acquire(&tsc))
        });
    }
    g.finish();
}

/// Two threads, started together by a barrier, each taking `iters` tokens from one bucket.
fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("bucket");
    g.bench_function("try_acquire_at: admit, 2 threads on one bucket", |b| {
        b.iter_custom(|iters| {
            let bucket = Arc::new(deep_bucket());
            let barrier = Arc::new(Barrier::new(2));
            let worker = {
                let bucket = bucket.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..iters {
                        black_box(bucket.try_acquire_at(black_box(1_000_000))).ok();
                    }
                })
            };
            barrier.wait();
            let start = Instant::now();
            for _ in 0..iters {
                black_box(bucket.try_acquire_at(black_box(1_000_000))).ok();
            }
            worker.join().unwrap();
            // Time per take on this thread, with the other one hammering the same word.
            start.elapsed()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = single_thread, two_threads
}
criterion_main!(benches);
