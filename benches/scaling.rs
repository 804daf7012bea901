//! How a keyed decision scales with threads: admit's `Limiter` beside governor's keyed limiter
//! and a `DashMap<String, AtomicU64>` counter, at 1, 2, 4, 8 and 16 threads, on one hot key
//! (every thread charges it), on 200 keys and on 1,000,000 keys (every thread cycles through
//! all of them, each from its own offset). Each contender reads its own clock, as a user's
//! does (admit's default `RecentClock`, governor's quanta clock; the map reads none).
//!
//! Each cell: the contender is built and every key charged once, then the threads are started
//! together by a barrier and charge for a fixed time; printed are the decisions per second of
//! all threads together and the nanoseconds per decision on one thread (threads × time /
//! decisions). Every limit is far above what a run reaches (burst 2^30, one token per 1,024 ms),
//! so every decision of every contender is admitted (counted and asserted). admit's table has
//! twice as many entries as keys, up to its largest cap, 2^20: at 1,000,000 keys it is 95 %
//! full, and the keys that found no place are charged to the class's overflow bucket (printed).
//!
//! Two flood paths follow, each at the same thread counts:
//!
//! * **fresh names**: every decision is a name never seen before (the name-rotating attacker):
//!   admit's limiter at its default cap (the first 4,096 names take entries; every later one
//!   is a miss at a full table, charged to the class's overflow bucket), beside governor's
//!   keyed limiter and the `DashMap` counter, which insert every name (and grow without
//!   bound). The 1,000,000 names are split between the threads, each name decided once; the
//!   cell's time is the slowest thread's.
//! * **one hot actor, volume**: every thread charges one actor's volume (`RateLimit`, four rows
//!   of one word, 1 byte a write), beside governor's `check_key` on one key and a floor that
//!   does only what the charge must: a SipHash-1-3 and a load-and-CAS on each of four
//!   counters in four cache lines, the lines a four-row charge writes.
//!
//! Run: `cargo bench --bench scaling`. `ADMIT_SCALING_THREADS=1,2` picks the thread counts
//! (default `1,2,4,8,16`); `ADMIT_SCALING_MS` the time per cell (default 1,000). More threads
//! than CPUs time the scheduler as much as the contenders: the machine's CPU count is printed.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use admit::quota::{Quota as VolumeQuota, RateLimit};
use admit::{BucketConfig, Limiter};
use dashmap::DashMap;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use siphasher::sip::SipHasher13;
use std::hash::{Hash, Hasher};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const BURST: u32 = 1 << 30;
const INTERVAL: Duration = Duration::from_millis(1 << 10);

/// One keyed decision; `true` if admitted. `&String`: governor's `check_key` takes `&K`, and
/// its key type is `String`.
#[allow(clippy::ptr_arg)]
trait Contender: Sync {
    const NAME: &'static str;
    fn build(keys: usize) -> Self;
    fn decide(&self, key: &String) -> bool;
    /// What to say about the contender once its keys are charged.
    fn note(&self) -> Option<String> {
        None
    }
}

struct Admit(Limiter);

impl Contender for Admit {
    const NAME: &'static str = "admit Limiter::try_acquire";
    fn build(keys: usize) -> Self {
        let config = BucketConfig::new(BURST, INTERVAL).unwrap();
        // The largest cap the limiter takes is 2^20: at 1,000,000 keys the table is 95 % full.
        let cap = (2 * keys).clamp(admit::DEFAULT_CAP, 1 << 20);
        Self(Limiter::builder().cap(cap).build([config]).unwrap())
    }
    #[inline]
    fn decide(&self, key: &String) -> bool {
        self.0.try_acquire(key.as_bytes(), 0).is_ok()
    }
    fn note(&self) -> Option<String> {
        Some(table_note(&self.0))
    }
}

struct Governor(DefaultKeyedRateLimiter<String>);

impl Contender for Governor {
    const NAME: &'static str = "governor check_key";
    fn build(_: usize) -> Self {
        let quota = Quota::with_period(INTERVAL)
            .unwrap()
            .allow_burst(NonZeroU32::new(BURST).unwrap());
        Self(RateLimiter::keyed(quota))
    }
    #[inline]
    fn decide(&self, key: &String) -> bool {
        self.0.check_key(key).is_ok()
    }
}

struct Map(DashMap<String, AtomicU64>);

impl Contender for Map {
    const NAME: &'static str = "DashMap<String, AtomicU64>";
    fn build(_: usize) -> Self {
        Self(DashMap::new())
    }
    #[inline]
    fn decide(&self, key: &String) -> bool {
        if let Some(count) = self.0.get(key) {
            return count.fetch_add(1, Ordering::Relaxed) < u64::MAX / 2;
        }
        self.0
            .entry(key.clone())
            .or_default()
            .fetch_add(1, Ordering::Relaxed)
            < u64::MAX / 2
    }
}

/// How full admit's table is, and how often the overflow bucket paid.
fn table_note(l: &Limiter) -> String {
    format!(
        "admit's table: {} of {} entries used; charges to the overflow bucket: {}",
        l.len(),
        l.cap(),
        l.overflow_charges(0).unwrap_or(0)
    )
}

/// admit's limiter as a server builds it, at its default cap: the fresh-names flood.
struct AdmitDefaultCap(Limiter);

impl Contender for AdmitDefaultCap {
    const NAME: &'static str = "admit Limiter, default cap";
    fn build(_: usize) -> Self {
        let config = BucketConfig::new(BURST, INTERVAL).unwrap();
        Self(Limiter::builder().build([config]).unwrap())
    }
    #[inline]
    fn decide(&self, key: &String) -> bool {
        self.0.try_acquire(key.as_bytes(), 0).is_ok()
    }
    fn note(&self) -> Option<String> {
        Some(table_note(&self.0))
    }
}

/// admit's volume quota, four rows (the default), 1 byte a write: the limits (2^24 − 1 events
/// and bytes in a window of 100 ms, 168 M a second) are far above what a cell reaches.
struct Volume(RateLimit);

impl Contender for Volume {
    const NAME: &'static str = "admit RateLimit (volume)";
    fn build(_: usize) -> Self {
        let (events, bytes) = (VolumeQuota::MAX_EVENTS, VolumeQuota::MAX_BYTES);
        let q = VolumeQuota::new(events, bytes, Duration::from_millis(100)).unwrap();
        Self(RateLimit::new(q))
    }
    #[inline]
    fn decide(&self, key: &String) -> bool {
        self.0.try_acquire(key.as_bytes(), 1).is_ok()
    }
}

/// What a four-row volume charge cannot avoid: one keyed SipHash-1-3 of the name, then a load
/// and a CAS on each of four counters, each in a cache line of its own (as the four rows of
/// one actor are). Two threads on one actor move all four lines on every charge.
struct FourLines {
    keys: (u64, u64),
    lines: [Padded; 4],
}

#[repr(align(64))]
struct Padded(AtomicU32);

impl Contender for FourLines {
    const NAME: &'static str = "floor: SipHash + 4 lines CAS";
    fn build(_: usize) -> Self {
        Self {
            keys: (rand::random(), rand::random()),
            lines: std::array::from_fn(|_| Padded(AtomicU32::new(0))),
        }
    }
    #[inline]
    fn decide(&self, key: &String) -> bool {
        let mut h = SipHasher13::new_with_keys(self.keys.0, self.keys.1);
        key.as_bytes().hash(&mut h);
        let hash = h.finish();
        for line in &self.lines {
            let word = &line.0;
            let mut seen = word.load(Ordering::Relaxed);
            // Relaxed: a floor of the work, not a protocol; a lost race retries.
            while let Err(now) = word.compare_exchange_weak(
                seen,
                seen.wrapping_add(1 + (hash as u32 & 1)),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                seen = now;
            }
        }
        true
    }
}

/// Decisions per second of all threads, and ns per decision on one thread: the fresh-names
/// flood, each of `keys` decided once (split between the threads), nothing charged before.
fn cell_fresh<C: Contender>(keys: &[String], threads: usize) -> (f64, f64) {
    let c = C::build(keys.len());
    let barrier = Barrier::new(threads + 1);
    let shares: Vec<&[String]> = keys.chunks(keys.len().div_ceil(threads)).collect();
    let elapsed = std::thread::scope(|s| {
        let runs: Vec<_> = shares
            .iter()
            .map(|share| {
                let (c, barrier) = (&c, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let refused = share.iter().filter(|key| !c.decide(black_box(key))).count();
                    assert_eq!(refused, 0, "{}: a first charge was refused", C::NAME);
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        runs.into_iter().for_each(|r| r.join().unwrap());
        start.elapsed()
    });
    if let Some(note) = c.note().filter(|_| threads == 1) {
        println!("  ({note})");
    }
    let secs = elapsed.as_secs_f64();
    let decisions = keys.len() as f64;
    (decisions / secs, threads as f64 * secs * 1e9 / decisions)
}

/// Decisions per second of all threads, and ns per decision on one thread.
fn cell<C: Contender>(keys: &[String], threads: usize, time: Duration) -> (f64, f64) {
    let c = C::build(keys.len());
    for key in keys {
        assert!(c.decide(key), "{}: a first charge was refused", C::NAME);
    }
    if let Some(note) = c.note().filter(|_| threads == 1) {
        println!("  ({note})");
    }
    let barrier = Barrier::new(threads + 1);
    let stop = AtomicBool::new(false);
    let (decisions, elapsed) = std::thread::scope(|s| {
        let runs: Vec<_> = (0..threads)
            .map(|t| {
                let (c, barrier, stop) = (&c, &barrier, &stop);
                s.spawn(move || {
                    let offset = t * keys.len() / threads;
                    let mut cycle = keys.iter().cycle().skip(offset);
                    let (mut n, mut refused) = (0u64, 0u64);
                    barrier.wait();
                    while !stop.load(Ordering::Relaxed) {
                        for key in cycle.by_ref().take(1024) {
                            refused += u64::from(!c.decide(black_box(key)));
                        }
                        n += 1024;
                    }
                    assert_eq!(refused, 0, "{}: a hit was refused", C::NAME);
                    n
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(time);
        stop.store(true, Ordering::Relaxed);
        let total: u64 = runs.into_iter().map(|r| r.join().unwrap()).sum();
        (total, start.elapsed())
    });
    let secs = elapsed.as_secs_f64();
    let per_second = decisions as f64 / secs;
    (per_second, threads as f64 * secs * 1e9 / decisions as f64)
}

fn header(name: &str) {
    println!("\n{name}");
    println!(
        "{:<28} {:>7} {:>16} {:>18}",
        "contender", "threads", "decisions/s", "ns per decision"
    );
}

fn row(label: &str, threads: usize, (per_second, ns): (f64, f64)) {
    println!(
        "{label:<28} {threads:>7} {:>14.1} M {ns:>18.1}",
        per_second / 1e6
    );
}

fn workload(name: &str, keys: &[String], threads: &[usize], time: Duration) {
    header(name);
    for &t in threads {
        row(Admit::NAME, t, cell::<Admit>(keys, t, time));
        row(Governor::NAME, t, cell::<Governor>(keys, t, time));
        row(Map::NAME, t, cell::<Map>(keys, t, time));
    }
}

fn fresh_names(keys: &[String], threads: &[usize]) {
    header("fresh names (every decision a first sight; 1,000,000 names, each decided once)");
    for &t in threads {
        row(
            AdmitDefaultCap::NAME,
            t,
            cell_fresh::<AdmitDefaultCap>(keys, t),
        );
        row(Governor::NAME, t, cell_fresh::<Governor>(keys, t));
        row(Map::NAME, t, cell_fresh::<Map>(keys, t));
    }
}

fn hot_volume(hot: &[String], threads: &[usize], time: Duration) {
    header("one hot actor, volume (every thread charges one actor's four rows)");
    for &t in threads {
        row(Volume::NAME, t, cell::<Volume>(hot, t, time));
        row(Governor::NAME, t, cell::<Governor>(hot, t, time));
        row(FourLines::NAME, t, cell::<FourLines>(hot, t, time));
    }
}

fn main() {
    let threads: Vec<usize> = std::env::var("ADMIT_SCALING_THREADS")
        .ok()
        .map(|list| {
            list.split(',')
                .filter_map(|t| t.trim().parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![1, 2, 4, 8, 16]);
    let time = Duration::from_millis(
        std::env::var("ADMIT_SCALING_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(1_000),
    );
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    println!("scaling: {cpus} CPUs, {} ms per cell", time.as_millis());
    // Keeps the default clock's updater running for the whole run (see benches/limiter.rs).
    let _updater = admit::RecentClock::new();
    let keys: Vec<String> = (0..1_000_000).map(|i| format!("client-{i:09}")).collect();
    let (hot, two_hundred) = (&keys[..1], &keys[..200]);
    workload("one hot key", hot, &threads, time);
    workload("200 keys", two_hundred, &threads, time);
    workload("1,000,000 keys", &keys, &threads, time);
    fresh_names(&keys, &threads);
    hot_volume(hot, &threads, time);
}
