//! `RateLimit::check_at` beside the floor it is measured against (one keyed SipHash-1-3 plus
//! one `fetch_add` into a fixed array, in the same run) and beside the obvious per-actor map
//! (`DashMap<String, AtomicU64>`) and governor's keyed limiter, on the same names:
//! uncontended, and two threads started together by a barrier. Then memory after 1,000,000
//! distinct names for each, net bytes from a counting global allocator.
//!
//! Run: `cargo bench --bench quota`. Results are recorded in docs/benchmarks.md.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use admit::quota::{Quota, RateLimit};
use admit::{Clock, ManualClock, MonotonicClock};
use cap::Cap;
use criterion::{criterion_group, criterion_main, Criterion};
use dashmap::DashMap;
use siphasher::sip::SipHasher13;
use std::alloc::System;
use std::hash::{Hash, Hasher};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

mod shared;

/// Counts live bytes in this binary (the `cap` crate, as in the other benches: one relaxed add
/// per allocation; the hot paths of admit and of the map's `get` do not allocate).
#[global_allocator]
static GLOBAL: Cap<System> = Cap::new(System, usize::MAX);

/// Distinct actor names cycled through by the timing runs.
const NAMES: usize = 4_096;
/// Names for the memory measurement.
const MEMORY_NAMES: usize = 1_000_000;
/// One event of this many bytes per write.
const BYTES: u64 = 100;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("actor-{i}")).collect()
}

/// The contenders, behind one trait so that every one runs the same loop. `&String` because
/// governor's keyed limiter is keyed by `String` and takes `&K`.
#[allow(clippy::ptr_arg)]
trait Contender: Send + Sync {
    /// One write by `name`, the `k`-th of this thread.
    fn charge(&self, name: &String, k: u64);
}

/// The floors' hash: one keyed SipHash-1-3 of the name.
#[inline]
fn sip(keys: (u64, u64), name: &str) -> u64 {
    let mut h = SipHasher13::new_with_keys(keys.0, keys.1);
    name.hash(&mut h);
    h.finish()
}

/// The four-row floors' write to one bucket: a load and a CAS of its one word (events by 1,
/// bytes by `BYTES`, both counts in it), as conservative update raises it.
#[inline]
fn load_and_cas(word: &AtomicU64) {
    shared::load_and_cas_u64(word, 1 | BYTES << 24);
}

/// The floor: one keyed SipHash-1-3 of the name and one `fetch_add` in a fixed array.
struct Floor {
    keys: (u64, u64),
    counters: Box<[AtomicU64]>,
}

impl Floor {
    fn new() -> Self {
        Self {
            keys: (rand::random(), rand::random()),
            counters: (0..admit::quota::BUCKETS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

impl Contender for Floor {
    #[inline]
    fn charge(&self, name: &String, _: u64) {
        let i = sip(self.keys, name) as usize & (self.counters.len() - 1);
        self.counters[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// The floor for two words: one keyed SipHash-1-3 and a `fetch_add` on each of two adjacent
/// words, which is what two limits in two words cost at the least.
struct Floor2 {
    keys: (u64, u64),
    counters: Box<[[AtomicU64; 2]]>,
}

impl Floor2 {
    fn new() -> Self {
        Self {
            keys: (rand::random(), rand::random()),
            counters: (0..admit::quota::BUCKETS)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
        }
    }
}

impl Contender for Floor2 {
    #[inline]
    fn charge(&self, name: &String, _: u64) {
        let pair = &self.counters[sip(self.keys, name) as usize & (self.counters.len() - 1)];
        pair[0].fetch_add(1, Ordering::Relaxed);
        pair[1].fetch_add(BYTES, Ordering::Relaxed);
    }
}

/// The floor for four rows under conservative update: one keyed SipHash-1-3, then in each of
/// four rows (a quarter of the buckets each, indexed by disjoint hash bits) a load and a CAS of
/// the bucket's one `AtomicU64`: the four locked RMWs a four-row write that raises every row
/// must make, with none of the quota's logic.
struct Floor4Rows {
    keys: (u64, u64),
    counters: Box<[AtomicU64]>,
}

impl Floor4Rows {
    fn new() -> Self {
        Self {
            keys: (rand::random(), rand::random()),
            counters: (0..admit::quota::BUCKETS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

impl Contender for Floor4Rows {
    #[inline]
    fn charge(&self, name: &String, _: u64) {
        let hash = sip(self.keys, name);
        let width = self.counters.len() / 4;
        for row in 0..4 {
            let col = (hash >> (row * 16)) as usize & (width - 1);
            load_and_cas(&self.counters[row * width + col]);
        }
    }
}

/// One 64-byte cache line of a blocked layout: eight buckets of one `AtomicU64`.
#[repr(C, align(64))]
struct Line([AtomicU64; 8]);

/// The floor for four rows in one cache line (the blocked layout `docs/quota.md` measures):
/// the same memory as [`Floor4Rows`], as 8,192 lines of eight buckets; one keyed SipHash-1-3
/// picks a line, and row `r` takes bucket `2r` or `2r + 1` of it. The same four loads and
/// CASes as [`Floor4Rows`], on one line instead of four: what blocking could save in misses.
struct Floor4RowsOneLine {
    keys: (u64, u64),
    lines: Box<[Line]>,
}

impl Floor4RowsOneLine {
    fn new() -> Self {
        Self {
            keys: (rand::random(), rand::random()),
            lines: (0..admit::quota::BUCKETS / 8)
                .map(|_| Line(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }
}

impl Contender for Floor4RowsOneLine {
    #[inline]
    fn charge(&self, name: &String, _: u64) {
        let hash = sip(self.keys, name);
        let line = &self.lines[hash as usize & (self.lines.len() - 1)];
        for row in 0..4 {
            load_and_cas(&line.0[2 * row + (hash >> (40 + row)) as usize % 2]);
        }
    }
}

/// Readings advance this much per write in the admit contenders.
const STEP_NS: u64 = 100_000;

/// Readings advance this much per write in the contender that measures a window's steady
/// state: its one-second window turns every 10^6 writes, so an actor of 4,096 gets about 244
/// writes a window and 99.6 % of charges find their words already in the current window (at
/// `STEP_NS` it gets about 2.4, and its first restamps all four words). Not slower: one actor
/// raced by two threads must stay below the 2^24 − 1 events of a window (2 × 10^6 here).
const STEADY_STEP_NS: u64 = 1_000;

/// admit with the largest limits over a one-second window.
///
/// The readings are synthetic (`STEP_NS` per write), so the limiter's clock is a `ManualClock`
/// parked at `PARKED_NS`, beyond any reading a run reaches: `check_at` refuses a reading more
/// than a millisecond ahead of the limiter's clock, and the bench measures the success path.
/// Every check takes the horizon's fast path (one relaxed load and a compare), as readings
/// from the limiter's own clock do between its refreshes (at most one per millisecond).
struct Admit(RateLimit<ManualClock>, u64, u64);

/// Where the admit contenders' clock is parked: 2^62 ns, about 146 years, which `k × STEP_NS`
/// would reach only after 4.6 × 10^13 writes.
const PARKED_NS: u64 = 1 << 62;

impl Admit {
    /// Writes of `BYTES` bytes.
    fn new(rows: usize) -> Self {
        Self::writing(rows, BYTES)
    }

    /// Writes of `bytes` bytes, `STEP_NS` apart.
    fn writing(rows: usize, bytes: u64) -> Self {
        Self::stepping(rows, bytes, STEP_NS)
    }

    /// Writes of `bytes` bytes, `step_ns` apart.
    fn stepping(rows: usize, bytes: u64, step_ns: u64) -> Self {
        let q = Quota::new(Quota::MAX_EVENTS, Quota::MAX_BYTES, Duration::from_secs(1))
            .and_then(|q| q.with_rows(rows))
            .unwrap();
        Self(
            RateLimit::with_clock(q, ManualClock::starting_at(PARKED_NS)),
            bytes,
            step_ns,
        )
    }
}

impl Contender for Admit {
    #[inline]
    fn charge(&self, name: &String, k: u64) {
        // At `STEP_NS`, 100 µs of readings per write: a window turns every 10,000 writes of a
        // thread, so no run comes near the limits, and turns are part of what is measured.
        let now = black_box(k * self.2);
        debug_assert!(now <= PARKED_NS);
        black_box(self.0.try_acquire_at(name.as_str(), self.1, now)).unwrap();
    }
}

/// The obvious implementation: a concurrent map from name to counter.
struct Map(DashMap<String, AtomicU64>);

impl Contender for Map {
    #[inline]
    fn charge(&self, name: &String, _: u64) {
        if let Some(c) = self.0.get(name) {
            c.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.0
            .entry(name.clone())
            .or_default()
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// governor's keyed limiter (a DashMap of GCRA states), with a quota no run exhausts. It reads
/// its own clock on every check.
struct Governor(governor::DefaultKeyedRateLimiter<String>);

impl Governor {
    fn new() -> Self {
        let quota = governor::Quota::per_second(NonZeroU32::MAX);
        Self(governor::RateLimiter::keyed(quota))
    }
}

impl Contender for Governor {
    #[inline]
    fn charge(&self, name: &String, _: u64) {
        black_box(self.0.check_key(name)).unwrap();
    }
}

fn contenders() -> Vec<(&'static str, Arc<dyn Contender>)> {
    contenders_writing(BYTES)
}

/// The contenders, admit's writing `bytes` bytes per write. The one-actor race uses 1 byte: a
/// thread descheduled mid-sample catches up inside the other's newest window (a limiter's
/// window never goes back), and a million 100-byte writes there would pass 16 MiB.
fn contenders_writing(bytes: u64) -> Vec<(&'static str, Arc<dyn Contender>)> {
    vec![
        ("floor: SipHash-1-3 + fetch_add", Arc::new(Floor::new())),
        (
            "floor, two words: SipHash-1-3 + 2 fetch_add",
            Arc::new(Floor2::new()),
        ),
        (
            "floor, four rows: SipHash-1-3 + 4 load-and-CAS",
            Arc::new(Floor4Rows::new()),
        ),
        (
            "floor, four rows in one line: SipHash-1-3 + 4 load-and-CAS",
            Arc::new(Floor4RowsOneLine::new()),
        ),
        (
            "admit check_at, rows = 1",
            Arc::new(Admit::writing(1, bytes)),
        ),
        (
            "admit check_at, rows = 2",
            Arc::new(Admit::writing(2, bytes)),
        ),
        (
            "admit check_at, rows = 4 (default)",
            Arc::new(Admit::writing(4, bytes)),
        ),
        (
            "admit check_at, rows = 4, steady window",
            Arc::new(Admit::stepping(4, bytes, STEADY_STEP_NS)),
        ),
        ("DashMap<String, AtomicU64>", Arc::new(Map(DashMap::new()))),
        ("governor keyed (DashMap)", Arc::new(Governor::new())),
    ]
}

fn single_thread(c: &mut Criterion) {
    let names = names(NAMES);
    let mut g = c.benchmark_group("quota");
    for (label, contender) in contenders() {
        // Warm every contender with every name, so that the maps measure the steady state.
        names.iter().for_each(|n| contender.charge(n, 0));
        let mut k = 0u64;
        g.bench_function(label, |b| {
            b.iter(|| {
                contender.charge(&names[k as usize % NAMES], k);
                k += 1;
            })
        });
    }

    let refusing = RateLimit::new(Quota::new(1, 1 << 20, Duration::from_secs(60)).unwrap());
    names.iter().for_each(|n| {
        let _ = refusing.try_acquire_at(n.as_str(), 0, 1_000);
    });
    let mut i = 0;
    g.bench_function("admit check_at refused, rows = 4", |b| {
        b.iter(|| {
            black_box(refusing.try_acquire_at(names[i].as_str(), BYTES, black_box(1_000)))
                .unwrap_err();
            i = (i + 1) % NAMES;
        })
    });

    // Default construction (`RateLimit::new`: the default clock, `RecentClock`, and the
    // default four rows), with the largest limits so that no run is refused. It reads its own
    // clock, so no reading of it is ever ahead.
    let clocked = RateLimit::new(
        Quota::new(Quota::MAX_EVENTS, Quota::MAX_BYTES, Duration::from_secs(1)).unwrap(),
    );
    assert_eq!(clocked.quota().rows(), 4);
    let clock = MonotonicClock::new();
    let mut i = 0;
    g.bench_function(
        "admit check, default build + default clock, rows = 4",
        |b| {
            b.iter(|| {
                black_box(clocked.try_acquire(names[i].as_str(), BYTES)).unwrap();
                i = (i + 1) % NAMES;
            })
        },
    );
    g.bench_function("clock: MonotonicClock::now_ns", |b| {
        b.iter(|| clock.now_ns())
    });
    g.finish();
}

/// Two threads started together by a barrier, each charging `iters` writes; time per write on
/// the measuring thread. `split` gives each thread its own half of the names (independent
/// actors, the common case: they share only the structure, and a cache line by hash accident);
/// otherwise both charge one actor (every write contends on the same words).
fn race(
    contender: &Arc<dyn Contender>,
    names: &Arc<Vec<String>>,
    iters: u64,
    split: bool,
) -> Duration {
    // Readings keep advancing from one sample to the next: a limiter never goes back to an
    // older window, so restarting at 0 would pile every later sample into the newest one.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = NEXT.fetch_add(iters, Ordering::Relaxed);
    let half = NAMES / 2;
    let pick = move |thread: usize, k: usize| if split { thread * half + k % half } else { 0 };
    let barrier = Arc::new(Barrier::new(2));
    let worker = {
        let (contender, names, barrier) = (contender.clone(), names.clone(), barrier.clone());
        std::thread::spawn(move || {
            barrier.wait();
            for k in 0..iters as usize {
                contender.charge(&names[pick(1, k)], base + k as u64);
            }
        })
    };
    barrier.wait();
    let start = Instant::now();
    for k in 0..iters as usize {
        contender.charge(&names[pick(0, k)], base + k as u64);
    }
    let elapsed = start.elapsed();
    worker.join().unwrap();
    elapsed
}

fn two_threads(c: &mut Criterion) {
    let names = Arc::new(names(NAMES));
    let mut g = c.benchmark_group("quota, 2 threads");
    for (label, contender) in contenders() {
        names.iter().for_each(|n| contender.charge(n, 0));
        g.bench_function(label, |b| {
            b.iter_custom(|iters| race(&contender, &names, iters, true))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("quota, 2 threads, one actor");
    for (label, contender) in contenders_writing(1) {
        g.bench_function(label, |b| {
            b.iter_custom(|iters| race(&contender, &names, iters, false))
        });
    }
    g.finish();
}

/// Net bytes allocated while `f` runs.
fn net_bytes(f: impl FnOnce()) -> isize {
    let live = || isize::try_from(GLOBAL.allocated()).unwrap_or(isize::MAX);
    let before = live();
    f();
    live() - before
}

/// Memory after 1,000,000 distinct names, printed (criterion has no memory measurement).
fn memory(_: &mut Criterion) {
    let names = names(MEMORY_NAMES);
    println!(
        "\nmemory after {MEMORY_NAMES} distinct names (net bytes allocated, counting allocator):"
    );
    for rows in [1, 4] {
        let mut held = None;
        let built = net_bytes(|| held = Some(Admit::new(rows)));
        let admit = held.unwrap();
        let charged = net_bytes(|| names.iter().for_each(|n| admit.charge(n, 0)));
        assert_eq!(charged, 0, "admit allocated while charging");
        println!(
            "  admit RateLimit, rows = {rows}: {} B at construction, {charged} B more after the names; memory_bytes() = {}",
            built,
            admit.0.memory_bytes()
        );
    }
    let mut held = None;
    let bytes = net_bytes(|| {
        let map = Map(DashMap::new());
        names.iter().for_each(|n| map.charge(n, 0));
        held = Some(map);
    });
    println!(
        "  DashMap<String, AtomicU64>: {bytes} B ({:.0} B per name)",
        bytes as f64 / MEMORY_NAMES as f64
    );
    drop(held);
    let mut held = None;
    let bytes = net_bytes(|| {
        let gov = Governor::new();
        names.iter().for_each(|n| gov.charge(n, 0));
        held = Some(gov);
    });
    println!(
        "  governor keyed (DashMap): {bytes} B ({:.0} B per name)",
        bytes as f64 / MEMORY_NAMES as f64
    );
    drop(held);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = memory, single_thread, two_threads
}
criterion_main!(benches);
