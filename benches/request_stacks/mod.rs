//! The contenders of the request benches (`benches/request.rs`, which describes them,
//! and `benches/request_paired.rs`), each one request's worth of work through one `Stack`. A
//! directory module, so that Cargo does not take it for a bench.

pub mod two_keys;

use admit::fairness::Quotas;
use admit::gate::Gate;
use admit::quota::{Quota, RateLimit};
use admit::{BucketConfig, Clock, HashedActor, Limiter};
use dashmap::DashMap;
use governor::{DefaultKeyedRateLimiter, RateLimiter};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Distinct actors cycled through.
pub const NAMES: usize = 4_096;
/// Bytes per request.
pub const BYTES: u64 = 100;

pub fn names() -> Vec<String> {
    (0..NAMES).map(|i| format!("actor-{i:010}")).collect()
}

/// One request's worth of work; `true` if every defence admitted it.
pub trait Stack: Sync {
    const NAME: &'static str;
    /// What a request carries for its actor: the name, or what a connection made of it once.
    type Actor: Prepare + Sync;
    fn request(&self, actor: &Self::Actor, now_ns: u64) -> bool;
    fn now_ns(&self) -> u64 {
        0
    }
}

/// What a run makes of a name before it starts.
pub trait Prepare {
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
pub fn actors<S: Stack>(names: &[String]) -> Vec<S::Actor> {
    names.iter().map(|name| S::Actor::prepare(name)).collect()
}

pub struct Admit {
    pub in_flight: Quotas,
    pub rate: Limiter,
    pub volume: RateLimit,
}

impl Admit {
    pub fn new() -> Self {
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
pub struct AdmitPerConnection(pub Admit);

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

/// The same three defences, configured as [`Admit`], behind one `Gate`: the actor hashed
/// once per request, the in-flight permit held by the `Pass` (an owned permit) until the request
/// ends, the rate token refunded if the volume refuses.
pub struct AdmitGate(pub Gate);

impl AdmitGate {
    pub fn new() -> Self {
        let Admit {
            in_flight,
            rate,
            volume,
        } = Admit::new();
        Self(
            Gate::new()
                .in_flight(in_flight)
                .rate(rate, 0)
                .volume(volume),
        )
    }
}

impl Stack for AdmitGate {
    const NAME: &'static str = "admit Gate, hashed per request, now handed";
    type Actor = String;
    #[inline]
    fn request(&self, name: &String, now_ns: u64) -> bool {
        match self.0.try_acquire_at(name.as_str(), BYTES, now_ns) {
            Ok(pass) => {
                drop(black_box(pass));
                true
            }
            Err(_) => false,
        }
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
}

/// [`AdmitGate`], handed the actor a connection hashed once.
pub struct AdmitGatePerConnection(pub AdmitGate);

impl Stack for AdmitGatePerConnection {
    const NAME: &'static str = "admit Gate, hashed once per connection, now handed";
    type Actor = HashedActor;
    #[inline]
    fn request(&self, actor: &HashedActor, now_ns: u64) -> bool {
        match self.0 .0.try_acquire_hashed_at(actor, BYTES, now_ns) {
            Ok(pass) => {
                drop(black_box(pass));
                true
            }
            Err(_) => false,
        }
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
}

pub struct Obvious {
    rate: DefaultKeyedRateLimiter<String>,
    in_flight: DashMap<String, AtomicU32>,
    volume: DashMap<String, AtomicU64>,
}

impl Obvious {
    pub fn new() -> Self {
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

/// The floor of admit's request: one keyed SipHash-1-3, then the seven locked RMWs its three
/// defences make on a hit, with none of their logic: the in-flight count's load and CAS, the
/// rate word's load and CAS, a load and a CAS of each of the four volume words (one in each of
/// four rows, both limits in it), and the in-flight count's decrement when the request ends.
/// Each array is indexed by its own bits of the hash.
pub struct Floor {
    keys: (u64, u64),
    in_flight: Box<[AtomicU32]>,
    rate: Box<[AtomicU64]>,
    volume: Box<[AtomicU64]>,
}

impl Floor {
    pub fn new() -> Self {
        Self {
            keys: (rand::random(), rand::random()),
            in_flight: (0..2 * NAMES).map(|_| AtomicU32::new(0)).collect(),
            rate: (0..2 * NAMES).map(|_| AtomicU64::new(0)).collect(),
            volume: (0..admit::quota::BUCKETS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

impl Stack for Floor {
    const NAME: &'static str = "floor: SipHash-1-3 + admit's 7 locked RMWs";
    type Actor = String;
    #[inline]
    fn request(&self, name: &String, _: u64) -> bool {
        let mut h = siphasher::sip::SipHasher13::new_with_keys(self.keys.0, self.keys.1);
        std::hash::Hash::hash(name.as_str(), &mut h);
        let hash = std::hash::Hasher::finish(&h);
        let slot = hash as usize & (self.in_flight.len() - 1);
        let in_flight = &self.in_flight[slot];
        crate::shared::load_and_cas(in_flight, 1);
        let rate = &self.rate[(hash >> 16) as usize & (self.rate.len() - 1)];
        let seen = rate.load(Ordering::Acquire);
        let _ = rate.compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire);
        let width = self.volume.len() / 4;
        for row in 0..4 {
            let word = &self.volume[row * width + ((hash >> (row * 14)) as usize & (width - 1))];
            crate::shared::load_and_cas_u64(word, 1 | BYTES << 24);
        }
        in_flight.fetch_sub(1, Ordering::AcqRel);
        true
    }
}

/// Runs `iters` requests over `actors`, cycled; returns the refusals.
pub fn drive<S: Stack>(s: &S, actors: &[S::Actor], iters: u64, now_ns: u64) -> u64 {
    let mut refused = 0;
    for actor in actors.iter().cycle().take(iters as usize) {
        refused += u64::from(!s.request(black_box(actor), now_ns));
    }
    refused
}

/// Runs `iters` requests on each share of the actors, one thread per share, started together
/// by a barrier after each thread has run `setup` with its index: the slowest thread's time.
pub fn side_by_side<S: Stack>(
    s: &S,
    shares: &[&[S::Actor]],
    iters: u64,
    now_ns: u64,
    setup: fn(usize),
) -> Duration {
    let barrier = Barrier::new(shares.len());
    std::thread::scope(|scope| {
        let runs: Vec<_> = shares
            .iter()
            .enumerate()
            .map(|(k, share)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    setup(k);
                    barrier.wait();
                    let start = Instant::now();
                    let refused = drive(s, share, iters, now_ns);
                    let elapsed = start.elapsed();
                    assert_eq!(refused, 0, "a request was refused");
                    elapsed
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().unwrap())
            .max()
            .unwrap_or_default()
    })
}
