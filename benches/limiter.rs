//! Keyed limiters side by side, on the same 16-byte identities and the same workloads, in one
//! run: admit's bounded table, governor's keyed limiter (default DashMap store) and a
//! `Mutex<HashMap<String, TokenBucket>>` baseline, all behind the one [`Contender`] trait.
//!
//! Run: `cargo bench --bench limiter`. Results are in docs/benchmarks.md ("Keyed limiter").
//! With `--features metrics` it also times a hit with metrics attached against one without
//! (`## metrics` there).
//!
//! Every contender gets the same quota: a burst of 2^30 tokens, refilled one per 1,024 ms (the
//! largest span admit accepts, 2^40 ms). No bench function charges one key anywhere near 2^30
//! times, so every charge of every contender is admitted: all of them do the same work (look
//! up, take a token, commit), not a contender-specific mix of admits and cheaper denials. Every
//! workload counts refusals outside the timed region and asserts there were none. The slow
//! refill matters for admit's churn: an entry charged once is full again (so reclaimable) only
//! 1,024 ms later, longer than a churn pass takes, so after the first `DEFAULT_CAP` (4,096)
//! keys the table stays saturated and every further key is a saturated miss (asserted from
//! `overflow_charges`).
//!
//! Time: "own clock" contenders read their own default clock on every charge (admit's
//! `RecentClock`, one load of a time an updater thread refreshes; governor's `QuantaClock`);
//! "admit charge (MonotonicClock)" reads `Instant` per charge (the default before #15). "now
//! handed" contenders are given
//! a reading taken once outside the timed loop. governor has no `check_key_at(now)`; the only
//! public way to hand it time is a clock the caller sets, `FakeRelativeClock` (one relaxed load
//! through an `Arc`), so that is its "now handed" variant.
//!
//! Memory: a counting global allocator (`cap`) measures the net live bytes each contender
//! gained over the churn of 1,000,000 keys; admit's `memory_bytes()` must not move. The
//! allocator adds an atomic add per free and a few atomic operations per allocation (it also
//! keeps the totals the `metrics_alloc` test reads): the hit paths allocate nothing, so it only
//! touches the churn of governor and of the Mutex baseline.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use admit::{BucketConfig, Clock, Limiter, MonotonicClock, RecentClock, TokenBucket};
use cap::Cap;
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode, Throughput,
};
use governor::clock::FakeRelativeClock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::collections::HashMap;
use std::hash::Hasher;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

/// Burst and refill of every contender: never exhausted by a bench function, and an entry
/// charged once stays short of full for over a second.
const BURST: u32 = 1 << 30;
const INTERVAL_MS: u32 = 1 << 10;
/// Distinct identities in the churn.
const CHURN_KEYS: usize = 1_000_000;
/// Identities in the cycled hit-path workloads.
const CYCLED_KEYS: usize = 200;

/// The `i`-th identity: `client-` and nine digits, 16 bytes.
fn identity(i: usize) -> String {
    let id = format!("client-{i:09}");
    assert_eq!(id.len(), 16);
    id
}

/// Identities that are never charged in the hit paths: they fill admit's table to its cap.
fn filler(i: usize) -> String {
    let id = format!("filler-{i:09}");
    assert_eq!(id.len(), 16);
    id
}

fn config() -> BucketConfig {
    BucketConfig::new(BURST, Duration::from_millis(u64::from(INTERVAL_MS))).unwrap()
}

fn quota() -> Quota {
    Quota::with_period(Duration::from_millis(u64::from(INTERVAL_MS)))
        .unwrap()
        .allow_burst(NonZeroU32::new(BURST).unwrap())
}

// ---------------------------------------------------------------------------------------------
// Contenders

/// One keyed limiter under test. `check` charges one token to `key`; `now_ns` is a reading the
/// workload took once outside its timed loop (from [`Contender::now_ns`]); contenders that read
/// their own clock ignore it.
trait Contender: Sync {
    const NAME: &'static str;
    fn build() -> Self;
    fn now_ns(&self) -> u64;
    // `&String`: governor's `check_key` takes `&K`, and the key type is `String`.
    #[allow(clippy::ptr_arg)]
    fn check(&self, key: &String, now_ns: u64) -> bool;
    /// For admit: the charges its overflow bucket paid, to check which path a workload took.
    fn overflow_charges(&self) -> Option<u64> {
        None
    }
}

fn admit_limiter() -> Limiter {
    Limiter::builder().build([config()]).unwrap()
}

struct AdmitOwnClock(Limiter);

impl Contender for AdmitOwnClock {
    const NAME: &'static str = "admit charge (own clock)";
    fn build() -> Self {
        Self(admit_limiter())
    }
    fn now_ns(&self) -> u64 {
        0
    }
    #[inline]
    fn check(&self, key: &String, _: u64) -> bool {
        self.0.try_acquire(key.as_bytes(), 0).is_ok()
    }
    fn overflow_charges(&self) -> Option<u64> {
        self.0.overflow_charges(0)
    }
}

struct AdmitMonotonic(Limiter<MonotonicClock>);

impl Contender for AdmitMonotonic {
    const NAME: &'static str = "admit charge (MonotonicClock)";
    fn build() -> Self {
        Self(
            Limiter::builder()
                .build_with_clock([config()], MonotonicClock::new())
                .unwrap(),
        )
    }
    fn now_ns(&self) -> u64 {
        0
    }
    #[inline]
    fn check(&self, key: &String, _: u64) -> bool {
        self.0.try_acquire(key.as_bytes(), 0).is_ok()
    }
    fn overflow_charges(&self) -> Option<u64> {
        self.0.overflow_charges(0)
    }
}

struct AdmitNowHanded(Limiter);

impl Contender for AdmitNowHanded {
    const NAME: &'static str = "admit charge_at (now handed)";
    fn build() -> Self {
        Self(admit_limiter())
    }
    fn now_ns(&self) -> u64 {
        self.0.clock().now_ns()
    }
    #[inline]
    fn check(&self, key: &String, now_ns: u64) -> bool {
        self.0.try_acquire_at(key.as_bytes(), 0, now_ns).is_ok()
    }
    fn overflow_charges(&self) -> Option<u64> {
        self.0.overflow_charges(0)
    }
}

struct GovernorOwnClock(DefaultKeyedRateLimiter<String>);

impl Contender for GovernorOwnClock {
    const NAME: &'static str = "governor check_key (own clock)";
    fn build() -> Self {
        Self(RateLimiter::keyed(quota()))
    }
    fn now_ns(&self) -> u64 {
        0
    }
    #[inline]
    fn check(&self, key: &String, _: u64) -> bool {
        self.0.check_key(key).is_ok()
    }
}

struct GovernorFakeClock(
    RateLimiter<
        String,
        DefaultKeyedStateStore<String>,
        FakeRelativeClock,
        NoOpMiddleware<<FakeRelativeClock as governor::clock::Clock>::Instant>,
    >,
);

impl Contender for GovernorFakeClock {
    const NAME: &'static str = "governor check_key (FakeRelativeClock)";
    fn build() -> Self {
        Self(RateLimiter::dashmap_with_clock(
            quota(),
            FakeRelativeClock::default(),
        ))
    }
    fn now_ns(&self) -> u64 {
        0
    }
    #[inline]
    fn check(&self, key: &String, _: u64) -> bool {
        self.0.check_key(key).is_ok()
    }
}

/// The lock-based baseline: std's `HashMap` (SipHash-1-3, like the other two) under one mutex.
struct MutexMap {
    map: Mutex<HashMap<String, TokenBucket>>,
    clock: MonotonicClock,
}

impl Contender for MutexMap {
    const NAME: &'static str = "Mutex<HashMap> (now handed)";
    fn build() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            clock: MonotonicClock::new(),
        }
    }
    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }
    #[inline]
    fn check(&self, key: &String, now_ns: u64) -> bool {
        let mut map = self.map.lock().unwrap();
        if let Some(bucket) = map.get(key.as_str()) {
            return bucket.try_acquire_at(now_ns).is_ok();
        }
        let bucket = TokenBucket::new(config());
        let admitted = bucket.try_acquire_at(now_ns).is_ok();
        map.insert(key.clone(), bucket);
        admitted
    }
}

/// A workload, run identically for every contender.
trait Workload {
    fn bench<C: Contender>(&self, g: &mut BenchmarkGroup<'_, WallTime>);
}

fn each_contender(g: &mut BenchmarkGroup<'_, WallTime>, w: &impl Workload) {
    w.bench::<AdmitOwnClock>(g);
    w.bench::<AdmitMonotonic>(g);
    w.bench::<AdmitNowHanded>(g);
    w.bench::<GovernorOwnClock>(g);
    w.bench::<GovernorFakeClock>(g);
    w.bench::<MutexMap>(g);
}

/// Charges `iters` times, cycling through `keys`; returns how many charges were refused.
#[inline]
fn drive<C: Contender>(c: &C, keys: &[String], iters: u64, now_ns: u64) -> u64 {
    let mut refused = 0;
    for key in keys.iter().cycle().take(iters as usize) {
        refused += u64::from(!c.check(black_box(key), now_ns));
    }
    refused
}

// ---------------------------------------------------------------------------------------------
// Workloads

/// One thread charging `keys` in a cycle; every key charged once before timing starts, so each
/// timed charge is a hit.
struct Hit(Vec<String>);

impl Workload for Hit {
    fn bench<C: Contender>(&self, g: &mut BenchmarkGroup<'_, WallTime>) {
        let c = C::build();
        assert_eq!(drive(&c, &self.0, self.0.len() as u64, c.now_ns()), 0);
        g.bench_function(C::NAME, |b| {
            b.iter_custom(|iters| {
                let now = c.now_ns();
                let start = Instant::now();
                let refused = drive(&c, &self.0, iters, now);
                let elapsed = start.elapsed();
                assert_eq!(refused, 0, "{}: a hit-path charge was refused", C::NAME);
                elapsed
            })
        });
    }
}

/// The hit workload for admit with each identity hashed once beforehand (`HashedActor`, as a
/// server would per connection) and `now` handed: the same charges, minus the SipHash.
fn hit_prehashed(g: &mut BenchmarkGroup<'_, WallTime>, identities: &[String]) {
    let limiter = admit_limiter();
    let keys: Vec<_> = identities
        .iter()
        .map(|id| admit::HashedActor::new(id.as_bytes()))
        .collect();
    let now = limiter.clock().now_ns();
    for key in &keys {
        assert!(limiter.try_acquire_hashed_at(key, 0, 1, now).is_ok());
    }
    g.bench_function(
        "admit try_acquire_hashed_at (hashed once, now handed)",
        |b| {
            b.iter_custom(|iters| {
                let now = limiter.clock().now_ns();
                let start = Instant::now();
                let mut refused = 0u64;
                for key in keys.iter().cycle().take(iters as usize) {
                    refused += u64::from(
                        limiter
                            .try_acquire_hashed_at(black_box(key), 0, 1, now)
                            .is_err(),
                    );
                }
                let elapsed = start.elapsed();
                assert_eq!(refused, 0, "a hit-path charge was refused");
                elapsed
            })
        },
    );
}

/// A class of 1,000,000 tokens per second (one per microsecond, so the limiter's entries count
/// microseconds from an epoch base, `limiter::epoch`) beside governor configured alike: the
/// hit path, own clocks (admit's default `RecentClock`; governor's default clock) and admit
/// with `now` handed.
fn hit_microsecond(g: &mut BenchmarkGroup<'_, WallTime>, identities: &[String]) {
    let fine = BucketConfig::new(1 << 30, Duration::from_micros(1)).unwrap();
    let limiter = Limiter::builder().build([fine]).unwrap();
    let per_second = NonZeroU32::new(1_000_000).unwrap();
    let burst = NonZeroU32::new(1 << 30).unwrap();
    let governor: DefaultKeyedRateLimiter<String> =
        RateLimiter::keyed(Quota::per_second(per_second).allow_burst(burst));
    for id in identities {
        assert!(limiter.try_acquire(id.as_bytes(), 0).is_ok());
        assert!(governor.check_key(id).is_ok());
    }
    let mut run = |name: &str, check: &dyn Fn(&String, u64) -> bool, now: &dyn Fn() -> u64| {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let now = now();
                let start = Instant::now();
                let mut refused = 0u64;
                for key in identities.iter().cycle().take(iters as usize) {
                    refused += u64::from(!check(black_box(key), now));
                }
                let elapsed = start.elapsed();
                assert_eq!(refused, 0, "a hit-path charge was refused");
                elapsed
            })
        });
    };
    run(
        "admit charge (own clock), 1,000,000/s",
        &|key, _| limiter.try_acquire(key.as_bytes(), 0).is_ok(),
        &|| 0,
    );
    run(
        "admit charge_at (now handed), 1,000,000/s",
        &|key, now| limiter.try_acquire_at(key.as_bytes(), 0, now).is_ok(),
        &|| limiter.clock().now_ns(),
    );
    run(
        "governor check_key (own clock), 1,000,000/s",
        &|key, _| governor.check_key(key).is_ok(),
        &|| 0,
    );
}

/// The cost of metrics (feature `metrics`): the hit workload of `charge_at` (now handed) on two
/// limiters in the same run, one built without metrics and one with them attached and
/// registered under metrics-util's `DebuggingRecorder` (an atomic add per counter, like the
/// usual exporters' handles). Both builds have the feature compiled in; the cost of compiling
/// it in at all was measured in instructions (`git show c9901be:docs/benchmarks.md`, "metrics").
#[cfg(feature = "metrics")]
fn hit_with_metrics(g: &mut BenchmarkGroup<'_, WallTime>, identities: &[String]) {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let plain = admit_limiter();
    let attached = metrics::with_local_recorder(&recorder, || {
        Limiter::builder()
            .metrics(&admit::metrics::Labels::new().with("bench", "limiter"))
            .build([config()])
            .unwrap()
    });
    for (name, limiter) in [
        ("admit try_acquire_at, metrics not attached", &plain),
        ("admit try_acquire_at, metrics attached", &attached),
    ] {
        let now = limiter.clock().now_ns();
        for id in identities {
            assert!(limiter.try_acquire_at(id.as_bytes(), 0, now).is_ok());
        }
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let now = limiter.clock().now_ns();
                let start = Instant::now();
                let mut refused = 0u64;
                for id in identities.iter().cycle().take(iters as usize) {
                    refused += u64::from(
                        limiter
                            .try_acquire_at(black_box(id).as_bytes(), 0, now)
                            .is_err(),
                    );
                }
                let elapsed = start.elapsed();
                assert_eq!(refused, 0, "{name}: a hit-path charge was refused");
                elapsed
            })
        });
    }
    // The attached limiter's handles were real: the recorder counted its charges.
    let counted: u64 = recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(_, _, _, value)| match value {
            metrics_util::debugging::DebugValue::Counter(n) => Some(n),
            _ => None,
        })
        .sum();
    assert!(counted >= identities.len() as u64, "nothing was counted");
}

/// Two threads started together by a barrier, thread `t` cycling through `keys[t]`; the time
/// is the first thread's per charge while the second runs the same count.
struct TwoThreads([Vec<String>; 2]);

impl Workload for TwoThreads {
    fn bench<C: Contender>(&self, g: &mut BenchmarkGroup<'_, WallTime>) {
        let c = C::build();
        let [mine, theirs] = &self.0;
        for keys in [mine, theirs] {
            assert_eq!(drive(&c, keys, keys.len() as u64, c.now_ns()), 0);
        }
        g.bench_function(C::NAME, |b| {
            b.iter_custom(|iters| {
                let barrier = Barrier::new(2);
                std::thread::scope(|s| {
                    let worker = s.spawn(|| {
                        let now = c.now_ns();
                        barrier.wait();
                        drive(&c, theirs, iters, now)
                    });
                    let now = c.now_ns();
                    barrier.wait();
                    let start = Instant::now();
                    let refused = drive(&c, mine, iters, now);
                    let elapsed = start.elapsed();
                    let refused = refused + worker.join().unwrap();
                    assert_eq!(refused, 0, "{}: a hit-path charge was refused", C::NAME);
                    elapsed
                })
            })
        });
    }
}

/// 1,000,000 distinct keys, each charged once, on a fresh contender per pass. One criterion
/// iteration is one pass, so the reported time per iteration in ms is the time per key in ns.
struct Churn<'k>(&'k [String]);

impl Workload for Churn<'_> {
    fn bench<C: Contender>(&self, g: &mut BenchmarkGroup<'_, WallTime>) {
        g.bench_function(C::NAME, |b| {
            b.iter_custom(|passes| {
                let mut total = Duration::ZERO;
                for _ in 0..passes {
                    let c = C::build();
                    let now = c.now_ns();
                    let start = Instant::now();
                    let refused = drive(&c, self.0, self.0.len() as u64, now);
                    total += start.elapsed();
                    assert_eq!(refused, 0, "{}: a churn charge was refused", C::NAME);
                    if let Some(overflow) = c.overflow_charges() {
                        let misses = (self.0.len() - admit::DEFAULT_CAP) as u64;
                        assert_eq!(overflow, misses, "admit's churn must miss after the cap");
                    }
                    // Dropped here, outside the timed region.
                }
                total
            })
        });
    }
}

/// admit's saturated miss: the table is filled to its cap by other identities, each charged
/// half its burst so that no entry is full (so reclaimable) for decades, then `keys`, none of
/// which has an entry, are charged in a cycle: each lands on the class's overflow bucket.
fn saturated_miss<C: Contender>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    limiter: impl Fn(&C) -> &Limiter,
    keys: &[String],
) {
    let c = C::build();
    let l = limiter(&c);
    let now = l.clock().now_ns();
    for i in 0..l.cap() {
        l.try_acquire_n_at(filler(i).as_bytes(), 0, BURST / 2, now)
            .unwrap();
    }
    assert_eq!(l.len(), l.cap(), "the table must be saturated");
    g.bench_function(C::NAME, |b| {
        b.iter_custom(|iters| {
            let overflow_before = l.overflow_charges(0).unwrap();
            let now = c.now_ns();
            let start = Instant::now();
            let refused = drive(&c, keys, iters, now);
            let elapsed = start.elapsed();
            assert_eq!(refused, 0, "{}: a miss was refused", C::NAME);
            assert_eq!(
                l.overflow_charges(0).unwrap() - overflow_before,
                iters,
                "every timed charge must be a saturated miss"
            );
            elapsed
        })
    });
}

// ---------------------------------------------------------------------------------------------
// Memory after the churn

fn live_bytes() -> usize {
    ALLOC.allocated()
}

/// Net live bytes gained while `keys` are churned through `c`. Single-threaded, so no other
/// allocation lands in between.
fn churn_growth<C: Contender>(c: &C, keys: &[String]) -> isize {
    let before = live_bytes();
    assert_eq!(drive(c, keys, keys.len() as u64, c.now_ns()), 0);
    live_bytes() as isize - before as isize
}

/// Builds a `C`; returns it and the heap bytes the build allocated.
fn built<C: Contender>() -> (C, usize) {
    let before = live_bytes();
    let c = C::build();
    let bytes = live_bytes() - before;
    (c, bytes)
}

fn memory(keys: &[String]) {
    let n = keys.len();
    // The first limiter on a thread also initialises rand's thread-local generator (a few
    // hundred bytes the limiter does not own); build one first so `heap` counts only its own.
    drop(AdmitNowHanded::build());
    let (admit, heap) = built::<AdmitNowHanded>();
    let fixed = admit.0.memory_bytes();
    let grown = churn_growth(&admit, keys);
    assert_eq!(
        admit.0.memory_bytes(),
        fixed,
        "admit's memory_bytes() moved"
    );
    assert_eq!(grown, 0, "admit allocated during the churn");
    assert_eq!(admit.0.len(), admit.0.cap());
    println!(
        "memory: admit (cap {}): memory_bytes() = {fixed} B ({:.1} KiB) before and after the \
         churn; heap allocated by build() = {heap} B; net growth over {n} keys = {grown} B",
        admit.0.cap(),
        fixed as f64 / 1024.0,
    );
    drop(admit);
    let per_key = |grown: isize| grown as f64 / n as f64;
    let mib = |grown: isize| grown as f64 / (1024.0 * 1024.0);
    let (governor, heap) = built::<GovernorOwnClock>();
    let grown = churn_growth(&governor, keys);
    println!(
        "memory: governor keyed (DashMap): heap allocated by build = {heap} B; net growth over \
         {n} keys = {grown} B ({:.1} MiB, {:.1} B/key)",
        mib(grown),
        per_key(grown),
    );
    drop(governor);
    let (mutex, heap) = built::<MutexMap>();
    let grown = churn_growth(&mutex, keys);
    println!(
        "memory: Mutex<HashMap<String, TokenBucket>>: heap allocated by build = {heap} B; net \
         growth over {n} keys = {grown} B ({:.1} MiB, {:.1} B/key)",
        mib(grown),
        per_key(grown),
    );
}

/// Resident set size of this process, in bytes (Linux `/proc/self/status`; 0 elsewhere).
fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

/// #15's table goal at scale: admit at cap 2^20 filled with 2^20 `u64` identities, beside
/// governor keyed by `u64` after the same 2^20 keys; heap bytes (counting allocator) and RSS.
fn memory_at_scale() {
    const KEYS: u64 = 1 << 20;
    let per_key = |bytes: usize| bytes as f64 / KEYS as f64;
    let (heap_before, rss_before) = (live_bytes(), rss_bytes());
    let admit = Limiter::builder()
        .cap(KEYS as usize)
        .build([BucketConfig::new(BURST, Duration::from_millis(u64::from(INTERVAL_MS))).unwrap()])
        .unwrap();
    let now = 1_000_000;
    for key in 0..KEYS {
        let _ = admit.try_acquire_at(&key, 0, now);
    }
    let (heap, rss) = (
        live_bytes() - heap_before,
        rss_bytes().saturating_sub(rss_before),
    );
    println!(
        "memory at scale: admit cap 2^20, {} live entries: memory_bytes() = {} B ({:.1} B per \
         unit of cap); heap {} B ({:.1} B/key); RSS +{} B ({:.1} B/key)",
        admit.len(),
        admit.memory_bytes(),
        per_key(admit.memory_bytes()),
        heap,
        per_key(heap),
        rss,
        per_key(rss),
    );
    drop(admit);
    let (heap_before, rss_before) = (live_bytes(), rss_bytes());
    let governor: DefaultKeyedRateLimiter<u64> = RateLimiter::keyed(quota());
    for key in 0..KEYS {
        let _ = governor.check_key(&key);
    }
    let (heap, rss) = (
        live_bytes() - heap_before,
        rss_bytes().saturating_sub(rss_before),
    );
    println!(
        "memory at scale: governor keyed by u64 after 2^20 keys ({} kept): heap {} B ({:.1} \
         B/key); RSS +{} B ({:.1} B/key)",
        governor.len(),
        heap,
        per_key(heap),
        rss,
        per_key(rss),
    );
}

// ---------------------------------------------------------------------------------------------
// Floors: what the parts of a charge cost on their own, in the same run.

fn floors(g: &mut BenchmarkGroup<'_, WallTime>, key: &str) {
    // The default-clock candidates of #15, side by side.
    let recent = RecentClock::new();
    g.bench_function("admit RecentClock::now_ns (default)", |b| {
        b.iter(|| recent.now_ns())
    });
    let admit_clock = MonotonicClock::new();
    g.bench_function("admit MonotonicClock::now_ns (Instant)", |b| {
        b.iter(|| admit_clock.now_ns())
    });
    #[cfg(feature = "quanta")]
    {
        let tsc = admit::clock::QuantaClock::new();
        g.bench_function("admit QuantaClock::now_ns (TSC, clamped)", |b| {
            b.iter(|| tsc.now_ns())
        });
    }
    g.bench_function("CLOCK_MONOTONIC_COARSE (rustix)", |b| {
        b.iter(|| {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
            black_box(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
        })
    });
    let quanta = governor::clock::DefaultClock::default();
    g.bench_function("governor DefaultClock::now (quanta)", |b| {
        b.iter(|| governor::clock::Clock::now(&quanta))
    });
    // The hash admit computes per charge: SipHash-1-3 over the identity and a u16 class.
    let (k0, k1) = (0x0123_4567_89ab_cdef_u64, 0xfedc_ba98_7654_3210_u64);
    g.bench_function("SipHash-1-3 of a 16-byte identity + u16", |b| {
        b.iter(|| {
            let mut h = siphasher::sip::SipHasher13::new_with_keys(k0, k1);
            h.write(black_box(key).as_bytes());
            h.write_u16(0);
            h.finish()
        })
    });
    let word = AtomicU64::new(0);
    let mut expected = 0u64;
    g.bench_function("uncontended compare_exchange", |b| {
        b.iter(|| {
            let next = expected.wrapping_add(1);
            let r = word.compare_exchange(expected, next, Ordering::AcqRel, Ordering::Acquire);
            expected = black_box(r.map_or_else(|actual| actual, |_| next));
        })
    });
}

// ---------------------------------------------------------------------------------------------

fn benches(c: &mut Criterion) {
    // Keeps the default clock's updater thread running for the whole run: it stops when the
    // last `RecentClock` is dropped and allocates (its name, its stack) when it starts again,
    // which the memory measurement would otherwise see between two contenders.
    let _updater = RecentClock::new();
    let churn_keys: Vec<String> = (0..CHURN_KEYS).map(identity).collect();
    let cycled: Vec<String> = churn_keys.iter().take(CYCLED_KEYS).cloned().collect();
    let hot = vec![cycled.first().unwrap().clone()];
    let (left, right) = cycled.split_at(CYCLED_KEYS / 2);

    memory(&churn_keys);
    memory_at_scale();

    let mut g = c.benchmark_group("limiter/floors");
    floors(&mut g, cycled.first().unwrap());
    g.finish();

    let mut g = c.benchmark_group("limiter/hit, 1 hot key");
    each_contender(&mut g, &Hit(hot.clone()));
    hit_prehashed(&mut g, &hot);
    g.finish();

    let mut g = c.benchmark_group("limiter/hit, 200 keys cycled");
    each_contender(&mut g, &Hit(cycled.clone()));
    hit_prehashed(&mut g, &cycled);
    g.finish();

    let mut g = c.benchmark_group("limiter/hit, 200 keys cycled, 1,000,000 per second");
    hit_microsecond(&mut g, &cycled);
    g.finish();

    #[cfg(feature = "metrics")]
    {
        let mut g = c.benchmark_group("limiter/metrics, hit, 200 keys cycled");
        hit_with_metrics(&mut g, &cycled);
        g.finish();
    }

    let mut g = c.benchmark_group("limiter/saturated miss, 200 absent keys cycled");
    saturated_miss::<AdmitOwnClock>(&mut g, |c| &c.0, &cycled);
    saturated_miss::<AdmitNowHanded>(&mut g, |c| &c.0, &cycled);
    g.finish();

    let mut g = c.benchmark_group("limiter/2 threads, distinct keys (100 each, cycled)");
    each_contender(&mut g, &TwoThreads([left.to_vec(), right.to_vec()]));
    g.finish();

    let mut g = c.benchmark_group("limiter/2 threads, one key");
    each_contender(&mut g, &TwoThreads([hot.clone(), hot.clone()]));
    g.finish();

    let mut g = c.benchmark_group("limiter/churn, 1M distinct keys (time per pass; ms = ns/key)");
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Elements(CHURN_KEYS as u64));
    each_contender(&mut g, &Churn(&churn_keys));
    g.finish();
}

criterion_group! {
    name = limiter;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(limiter);
