//! Test target `default_alloc` (not a module of the library): every default path — each
//! primitive built with its defaults and deciding on its default clock, and one request through
//! all three defences with one `HashedActor` — allocates 0 bytes per decision, and its memory
//! does not move when a million distinct names arrive; and neither does a decision after the
//! limits were changed at runtime.
//!
//! A binary of its own with one test, so that the counting global allocator (`cap`: the crate
//! forbids `unsafe`) sees no other test's allocations. It counts every byte ever allocated,
//! frees not netted out. One `RecentClock` is kept alive for the whole test, so the clock's
//! updater thread (started by the first clock, stopped after the last) never starts or stops
//! inside a measured region: that is construction, not decision.

use admit::fairness::Quotas;
use admit::gate::Gate;
use admit::quota::{Quota, RateLimit};
use admit::{BucketConfig, HashedActor, Limiter, RecentClock, TokenBucket};
use cap::Cap;
use std::hint::black_box;
use std::time::Duration;

#[global_allocator]
static ALLOC: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

/// Distinct names pushed through every default path.
const NAMES: u64 = 1_000_000;

/// Bytes allocated while `f` runs, frees not netted out.
fn allocated_by(f: impl FnOnce()) -> usize {
    let before = ALLOC.total_allocated();
    f();
    ALLOC.total_allocated() - before
}

#[test]
#[cfg_attr(miri, ignore = "a million names")]
fn default_paths_allocate_nothing_and_a_million_names_move_no_memory(
) -> Result<(), Box<dyn std::error::Error>> {
    let updater = RecentClock::new();
    // The updater thread allocates as it starts (its name, for the OS): wait, boundedly, for
    // its first refresh after this one, so that none of that lands in a measured region.
    let first = admit::Clock::now_ns(&updater);
    for _ in 0..1_000_000 {
        if admit::Clock::now_ns(&updater) != first {
            break;
        }
        std::thread::yield_now();
    }
    let limiter = Limiter::builder().build([BucketConfig::per_second(1_000)?])?;
    let quotas = Quotas::new();
    let volume = RateLimit::default();
    let bucket = TokenBucket::new(BucketConfig::per_second(1_000)?);
    let clock = RecentClock::new();
    let gate = Gate::new()
        .in_flight(Quotas::new())
        .rate(
            Limiter::builder().build([BucketConfig::per_second(1_000)?])?,
            0,
        )
        .volume(RateLimit::default());
    let memory = |limiter: &Limiter, quotas: &Quotas, volume: &RateLimit| {
        limiter.memory_bytes() + quotas.memory_bytes() + volume.memory_bytes()
    };
    let before = (
        memory(&limiter, &quotas, &volume),
        memory(
            gate.limiter().map(|(l, _)| l).ok_or("rate")?,
            gate.quotas().ok_or("in flight")?,
            gate.volume_quota().ok_or("volume")?,
        ),
    );
    // Names are formatted into one reused buffer, outside the counted closures.
    let mut name = String::with_capacity(32);
    let mut allocated = 0;
    for i in 0..NAMES {
        name.clear();
        std::fmt::Write::write_fmt(&mut name, format_args!("client-{i}"))?;
        let name = name.as_str();
        allocated += allocated_by(|| {
            black_box(limiter.try_acquire(name, 0).is_ok());
            black_box(quotas.try_acquire(name).map(drop).is_ok());
            black_box(volume.try_acquire(name, 100).is_ok());
            black_box(bucket.try_acquire(&clock).is_ok());
            let actor = HashedActor::new(name);
            black_box(
                gate.try_acquire_hashed_at(&actor, 100, gate.now_ns())
                    .is_ok(),
            );
        });
    }
    assert_eq!(allocated, 0, "a default decision allocated");
    // Limits changed at runtime: no decision after a change allocates (or locks; the
    // override claim's lock is taken here, by the change, never by a decision).
    limiter.set_config(0, BucketConfig::per_second(500)?)?;
    bucket.set_config(BucketConfig::per_second(500)?, &clock)?;
    quotas.set_quota(8)?;
    quotas.set_override("client-7", Some(2))?;
    volume.set_limits(Quota::new(600, 4 << 20, Duration::from_secs(60))?)?;
    for i in 0..NAMES / 10 {
        name.clear();
        std::fmt::Write::write_fmt(&mut name, format_args!("client-{i}"))?;
        let name = name.as_str();
        allocated += allocated_by(|| {
            black_box(limiter.try_acquire(name, 0).is_ok());
            black_box(quotas.try_acquire(name).map(drop).is_ok());
            black_box(volume.try_acquire(name, 100).is_ok());
            black_box(bucket.try_acquire(&clock).is_ok());
        });
    }
    assert_eq!(
        allocated, 0,
        "a decision after a change of limits allocated"
    );
    let after = (
        memory(&limiter, &quotas, &volume),
        memory(
            gate.limiter().map(|(l, _)| l).ok_or("rate")?,
            gate.quotas().ok_or("in flight")?,
            gate.volume_quota().ok_or("volume")?,
        ),
    );
    assert_eq!(before, after, "a million names moved the memory");
    Ok(())
}
