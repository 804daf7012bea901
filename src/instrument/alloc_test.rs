//! Test target `metrics_alloc` (feature `metrics`; not a module of the library): with metrics
//! attached and a recorder set, 1,000 decisions of each primitive allocate 0 bytes.
//!
//! A binary of its own with exactly one test, so that the counting global allocator (`cap`:
//! the crate forbids `unsafe`, so it cannot count allocations itself) sees no other test's
//! allocations. It counts every byte ever allocated, frees not netted out.

use admit::fairness::Quotas;
use admit::metrics::{Labels, MetricsSink};
use admit::quota::{Quota, RateLimit};
use admit::registrar::{CountingSink, RegistrarConfig, RegistrarLimiter, Verb};
use admit::{BucketConfig, Clock, Limiter, TokenBucket};
use cap::Cap;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::hint::black_box;
use std::time::Duration;

#[global_allocator]
static ALLOC: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

const N: usize = 1_000;

/// Bytes allocated while `f` runs, frees not netted out.
fn allocated_by(f: impl FnOnce()) -> usize {
    let before = ALLOC.total_allocated();
    f();
    ALLOC.total_allocated() - before
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Mint,
}

impl Verb for Op {
    const ALL: &'static [Self] = &[Op::Mint];
    fn index(self) -> usize {
        0
    }
    fn name(self) -> &'static str {
        "mint"
    }
}

#[test]
fn decisions_with_metrics_attached_allocate_nothing() -> Result<(), Box<dyn std::error::Error>> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let labels = Labels::new().with("test", "alloc");
    let never_empty = BucketConfig::new(1 << 30, Duration::from_millis(1 << 10))?;
    let one_a_minute = BucketConfig::per_minute(1)?;
    let volume = Quota::new(Quota::MAX_EVENTS, Quota::MAX_BYTES, Duration::from_secs(60))?;
    let config = RegistrarConfig {
        rate_limit_predecision_refusal_burst: 1,
        ..RegistrarConfig::default()
    };
    // Everything registers under the recorder, and decides with it still set.
    let bytes = metrics::with_local_recorder(&recorder, || {
        let limiter = Limiter::builder()
            .metrics(&labels)
            .build([never_empty, one_a_minute])?;
        let quotas = Quotas::builder().metrics(&labels).build()?;
        let rate = RateLimit::new(volume).with_metrics(&labels);
        let bucket = TokenBucket::new(never_empty).with_metrics(&labels);
        let sink = MetricsSink::<Op>::new(CountingSink::new(), &labels);
        let registrar = RegistrarLimiter::<Op>::builder(config)
            .metrics(&Labels::new().with("test", "alloc-registrar"))
            .build(sink)?;
        // Class 1 refuses every charge after the first: in shadow mode each is admitted and
        // counted as `would_refuse`, a path that must not allocate either.
        limiter.set_shadow(1, true)?;
        let now = limiter.clock().now_ns();
        // Each path once first: the entries are inserted, the refusal paths touched.
        let warm = || {
            let _ = limiter.try_acquire_at(black_box("client-1"), 0, now);
            let _ = limiter.try_acquire_at(black_box("client-1"), 1, now);
            drop(quotas.try_acquire(black_box("agent-1")));
            let _ = rate.try_acquire(black_box("session-1"), 100);
            let _ = bucket.try_acquire_at(now);
            let _ = registrar.enter_predecision(black_box(b"host-1"), Op::Mint);
        };
        warm();
        // The default clock's updater thread allocates as it starts (its name, for the OS):
        // wait, boundedly, for its first refresh, so that none of that is counted below.
        let first = rate.clock().now_ns();
        for _ in 0..1_000_000 {
            if rate.clock().now_ns() != first {
                break;
            }
            std::thread::yield_now();
        }
        Ok::<_, Box<dyn std::error::Error>>(allocated_by(|| {
            for _ in 0..N {
                warm();
            }
        }))
    })?;
    assert_eq!(bytes, 0, "{N} rounds of decisions allocated {bytes} bytes");
    // The handles were real: every decision of the warm-up and the N rounds was counted.
    let counted: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) if n > 0 => Some((key.key().name().to_owned(), n)),
            _ => None,
        })
        .collect();
    let rounds = (N + 1) as u64;
    for (name, expected) in [
        // Two classes of the limiter, and the registrar's own limiter.
        ("admit_limiter_decisions_total", 3 * rounds),
        ("admit_inflight_decisions_total", rounds),
        ("admit_volume_decisions_total", rounds),
        ("admit_bucket_decisions_total", rounds),
        ("admit_registrar_limited_total", rounds - 1),
    ] {
        let total: u64 = counted
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, n)| n)
            .sum();
        assert_eq!(total, expected, "{name}: {counted:?}");
    }
    Ok(())
}
