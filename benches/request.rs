//! One request through all three defences (#15's third goal): an in-flight place taken and
//! given back, one rate token, one volume charge, for the same actor, with `now` handed.
//!
//! * **admit**: the actor hashed once per request (`HashedActor::new`), then
//!   `Quotas::try_acquire_hashed` (the permit dropped at the end of the request),
//!   `Limiter::try_acquire_hashed_at` and `RateLimit::try_acquire_hashed_at`.
//! * **admit, hashed once per connection**: the same three calls, handed a `HashedActor` made
//!   before the run, as a server that hashes an actor once per connection passes it to every
//!   request (#15 item 3 allows either). The goal reads the first row; this one says what the
//!   second deployment gets.
//! * **the obvious stack** a user writes first, on the same names: governor's keyed limiter
//!   (`check_key` on its default clock; it takes no reading), a `DashMap<String, AtomicU32>`
//!   in-flight count (incremented, then decremented when the request ends) and a
//!   `DashMap<String, AtomicU64>` volume count.
//! * **the floor** of admit's request: its one hash and its eleven locked RMWs on bare arrays,
//!   with none of the defences' logic.
//!
//! Every limit is far above what a run reaches, so every request is admitted by every
//! contender and all do the same work. One thread, then two started together by a barrier
//! (each on its own half of the names). Before timing, each contender has seen every name,
//! and admit's allocations are asserted to stay at zero over a whole run of requests.
//!
//! Run: `cargo bench --bench request`. Results are in docs/benchmarks.md.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use admit::fairness::Quotas;
use admit::quota::{Quota, RateLimit};
use admit::{BucketConfig, Clock, HashedActor, Limiter};
use cap::Cap;
use criterion::{criterion_group, criterion_main, Criterion};
use dashmap::DashMap;
use governor::{DefaultKeyedRateLimiter, RateLimiter};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

mod shared;

#[global_allocator]
static ALLOC: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

/// Distinct actors cycled through.
const NAMES: usize = 4_096;
/// Bytes per request.
const BYTES: u64 = 100;

fn names() -> Vec<String> {
    (0..NAMES).map(|i| format!("actor-{i:010}")).collect()
}

/// One request's worth of work; `true` if every defence admitted it.
trait Stack: Sync {
    const NAME: &'static str;
    /// What a request carries for its actor: the name, or what a connection made of it once.
    type Actor: Prepare + Sync;
    fn request(&self, actor: &Self::Actor, now_ns: u64) -> bool;
    fn now_ns(&self) -> u64 {
        0
    }
}

/// What a run makes of a name before it starts.
trait Prepare {
    fn prepare(name: &str) -> Self;
}

impl Prepare for String {
    fn prepare(name: &str) -> Self {
        name.to_owned()
    }
}

impl Prepare for HashedActor {
    fn prepare(name: &str) -> Self {
        HashedActor::new(name)
    }
}

/// The actors a run cycles through, prepared once for stack `S`.
fn actors<S: Stack>(names: &[String]) -> Vec<S::Actor> {
    names.iter().map(|name| S::Actor::prepare(name)).collect()
}

struct Admit {
    in_flight: Quotas,
    rate: Limiter,
    volume: RateLimit,
}

impl Admit {
    fn new() -> Self {
        let burst = BucketConfig::new(1 << 30, Duration::from_millis(1 << 10)).unwrap();
        Self {
            in_flight: Quotas::builder().quota(8).actors(NAMES).build().unwrap(),
            rate: Limiter::builder().cap(NAMES).build([burst]).unwrap(),
            volume: RateLimit::new(
                Quota::new(Quota::MAX_EVENTS, Quota::MAX_BYTES, Duration::from_secs(1)).unwrap(),
            ),
        }
    }
}

impl Admit {
    /// The three defences for one hashed actor.
    #[inline]
    fn request_hashed(&self, actor: &HashedActor, now_ns: u64) -> bool {
        let Ok(permit) = self.in_flight.try_acquire_hashed(actor) else {
            return false;
        };
        let ok = self.rate.try_acquire_hashed_at(actor, 0, 1, now_ns).is_ok()
            && self
                .volume
                .try_acquire_hashed_at(actor, BYTES, now_ns)
                .is_ok();
        drop(black_box(permit));
        ok
    }
}

impl Stack for Admit {
    const NAME: &'static str = "admit, one HashedActor, now handed";
    type Actor = String;
    #[inline]
    fn request(&self, name: &String, now_ns: u64) -> bool {
        self.request_hashed(&HashedActor::new(name.as_str()), now_ns)
    }
    fn now_ns(&self) -> u64 {
        self.rate.clock().now_ns()
    }
}

/// [`Admit`], handed the actor a connection hashed once.
struct AdmitPerConnection(Admit);

impl Stack for AdmitPerConnection {
    const NAME: &'static str = "admit, hashed once per connection, now handed";
    type Actor = HashedActor;
    #[inline]
    fn request(&self, actor: &HashedActor, now_ns: u64) -> bool {
        self.0.request_hashed(actor, now_ns)
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
}

struct Obvious {
    rate: DefaultKeyedRateLimiter<String>,
    in_flight: DashMap<String, AtomicU32>,
    volume: DashMap<String, AtomicU64>,
}

impl Obvious {
    fn new() -> Self {
        let quota = governor::Quota::with_period(Duration::from_millis(1 << 10))
            .unwrap()
            .allow_burst(NonZeroU32::new(1 << 30).unwrap());
        Self {
            rate: RateLimiter::keyed(quota),
            in_flight: DashMap::new(),
            volume: DashMap::new(),
        }
    }
}

impl Stack for Obvious {
    const NAME: &'static str = "governor check_key + DashMap in-flight + DashMap volume";
    type Actor = String;
    #[inline]
    fn request(&self, name: &String, _: u64) -> bool {
        // The in-flight count: a read lock on the hit, an insert on the first sight.
        let admitted = match self.in_flight.get(name) {
            Some(count) => count.fetch_add(1, Ordering::AcqRel) < 8,
            None => {
                self.in_flight
                    .entry(name.clone())
                    .or_insert_with(|| AtomicU32::new(0))
                    .fetch_add(1, Ordering::AcqRel)
                    < 8
            }
        };
        let ok = admitted
            && self.rate.check_key(name).is_ok()
            && match self.volume.get(name) {
                Some(v) => v.fetch_add(BYTES, Ordering::Relaxed) < u64::MAX / 2,
                None => {
                    self.volume
                        .entry(name.clone())
                        .or_insert_with(|| AtomicU64::new(0))
                        .fetch_add(BYTES, Ordering::Relaxed)
                        < u64::MAX / 2
                }
            };
        // The request ends: its in-flight count goes back down.
        if let Some(count) = self.in_flight.get(name) {
            count.fetch_sub(1, Ordering::AcqRel);
        }
        ok
    }
}

/// The floor of admit's request: one keyed SipHash-1-3, then the eleven locked RMWs its three
/// defences make on a hit, with none of their logic: the in-flight count's load and CAS, the
/// rate word's load and CAS, a load and a CAS of each of the eight volume words (two in each of
/// four rows), and the in-flight count's decrement when the request ends. Each array is
/// indexed by its own bits of the hash.
struct Floor {
    keys: (u64, u64),
    in_flight: Box<[AtomicU32]>,
    rate: Box<[AtomicU64]>,
    volume: Box<[[AtomicU32; 2]]>,
}

impl Floor {
    fn new() -> Self {
        Self {
            keys: (rand::random(), rand::random()),
            in_flight: (0..2 * NAMES).map(|_| AtomicU32::new(0)).collect(),
            rate: (0..2 * NAMES).map(|_| AtomicU64::new(0)).collect(),
            volume: (0..admit::quota::BUCKETS)
                .map(|_| [AtomicU32::new(0), AtomicU32::new(0)])
                .collect(),
        }
    }
}

impl Stack for Floor {
    const NAME: &'static str = "floor: SipHash-1-3 + admit's 11 locked RMWs";
    type Actor = String;
    #[inline]
    fn request(&self, name: &String, _: u64) -> bool {
        let mut h = siphasher::sip::SipHasher13::new_with_keys(self.keys.0, self.keys.1);
        std::hash::Hash::hash(name.as_str(), &mut h);
        let hash = std::hash::Hasher::finish(&h);
        let slot = hash as usize & (self.in_flight.len() - 1);
        let in_flight = &self.in_flight[slot];
        shared::load_and_cas(in_flight, 1);
        let rate = &self.rate[(hash >> 16) as usize & (self.rate.len() - 1)];
        let seen = rate.load(Ordering::Acquire);
        let _ = rate.compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire);
        let width = self.volume.len() / 4;
        for row in 0..4 {
            let pair = &self.volume[row * width + ((hash >> (row * 14)) as usize & (width - 1))];
            shared::load_and_cas(&pair[0], 1);
            shared::load_and_cas(&pair[1], BYTES as u32);
        }
        in_flight.fetch_sub(1, Ordering::AcqRel);
        true
    }
}

/// Runs `iters` requests over `actors`, cycled; returns the refusals.
fn drive<S: Stack>(s: &S, actors: &[S::Actor], iters: u64, now_ns: u64) -> u64 {
    let mut refused = 0;
    for actor in actors.iter().cycle().take(iters as usize) {
        refused += u64::from(!s.request(black_box(actor), now_ns));
    }
    refused
}

fn one_thread<S: Stack>(c: &mut Criterion, s: &S, names: &[String]) {
    let names = &actors::<S>(names)[..];
    let now = s.now_ns();
    assert_eq!(drive(s, names, names.len() as u64, now), 0);
    c.bench_function(&format!("request/1 thread/{}", S::NAME), |b| {
        b.iter_custom(|iters| {
            let now = s.now_ns();
            let start = Instant::now();
            let refused = drive(s, names, iters, now);
            let elapsed = start.elapsed();
            assert_eq!(refused, 0, "a request was refused");
            elapsed
        })
    });
}

fn two_threads<S: Stack>(c: &mut Criterion, s: &S, names: &[String]) {
    let names = actors::<S>(names);
    let (left, right) = names.split_at(names.len() / 2);
    c.bench_function(&format!("request/2 threads/{}", S::NAME), |b| {
        b.iter_custom(|iters| {
            let now = s.now_ns();
            let barrier = Barrier::new(2);
            let times: Vec<Duration> = std::thread::scope(|scope| {
                let runs: Vec<_> = [left, right]
                    .into_iter()
                    .map(|half| {
                        let barrier = &barrier;
                        scope.spawn(move || {
                            barrier.wait();
                            let start = Instant::now();
                            let refused = drive(s, half, iters, now);
                            let elapsed = start.elapsed();
                            assert_eq!(refused, 0, "a request was refused");
                            elapsed
                        })
                    })
                    .collect();
                runs.into_iter().map(|r| r.join().unwrap()).collect()
            });
            // Per request: each thread ran `iters`, side by side; the slower one is the time.
            times.into_iter().max().unwrap_or_default()
        })
    });
}

/// admit allocates nothing per request once built: a whole pass over the names, and a
/// million distinct names after it, leave the allocation total where it was.
fn assert_admit_allocates_nothing(admit: &Admit, names: &[String]) {
    let now = admit.now_ns();
    let fresh: Vec<String> = (0..1_000_000).map(|i| format!("fresh-{i:012}")).collect();
    let before = ALLOC.total_allocated();
    assert_eq!(drive(admit, names, 100_000, now), 0);
    for name in &fresh {
        black_box(admit.request(name, now));
    }
    assert_eq!(
        ALLOC.total_allocated(),
        before,
        "admit allocated on a decision"
    );
    let memory =
        admit.in_flight.memory_bytes() + admit.rate.memory_bytes() + admit.volume.memory_bytes();
    eprintln!("admit's three defences: {memory} bytes, the same before and after 1M names");
}

fn benches(c: &mut Criterion) {
    // The default clock's updater runs for the whole run (see benches/limiter.rs).
    let _updater = admit::RecentClock::new();
    let names = names();
    let admit = Admit::new();
    let per_connection = AdmitPerConnection(Admit::new());
    let obvious = Obvious::new();
    let memory_before =
        admit.in_flight.memory_bytes() + admit.rate.memory_bytes() + admit.volume.memory_bytes();
    let floor = Floor::new();
    one_thread(c, &admit, &names);
    one_thread(c, &per_connection, &names);
    one_thread(c, &obvious, &names);
    one_thread(c, &floor, &names);
    two_threads(c, &admit, &names);
    two_threads(c, &per_connection, &names);
    two_threads(c, &obvious, &names);
    two_threads(c, &floor, &names);
    assert_admit_allocates_nothing(&admit, &names);
    let memory_after =
        admit.in_flight.memory_bytes() + admit.rate.memory_bytes() + admit.volume.memory_bytes();
    assert_eq!(memory_before, memory_after);
}

criterion_group! {
    name = request;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(request);
