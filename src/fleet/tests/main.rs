//! The fleet limiter against real `redis-server`s (feature `redis`): each test starts its own
//! server on a free 127.0.0.1 port (persistence off) and kills it at the end. Without the
//! binary every test skips with a one-line reason.
//!
//! These tests run on real time: the budget lives on the server's clock. Every one asserts the
//! bound of `admit::fleet` (docs/fleet.md) and prints the measured totals beside it.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[cfg(feature = "redis-cluster")]
mod cluster;
mod faults;
/// The local Redis Cluster launcher, shared with `admit-sim fleet --cluster`.
#[cfg(feature = "redis-cluster")]
#[path = "../../bin/admit-sim/cluster.rs"]
mod local_cluster;
mod pacing;
#[cfg(feature = "redis-cluster")]
mod partial;
mod processes;
mod server;

use admit::fleet::{FailPolicy, FleetLimiter, FleetRefusal, FleetSecret, FleetStats};
use admit::{BucketConfig, Clock};
use std::time::{Duration, Instant};

/// The budget every test shares: 1,000 per second in bursts of 50.
pub const RATE: f64 = 1000.0;
pub const BURST: f64 = 50.0;
/// A small lease cap, so that `N × cap` is a visible but small part of the bound.
pub const LEASE_CAP: u32 = 32;
/// N: the processes the budget is configured for.
pub const N: u32 = 4;

pub fn budget_config() -> BucketConfig {
    BucketConfig::per_second(1000)
        .unwrap()
        .with_burst(50)
        .unwrap()
}

pub fn fleet(url: &str, policy: FailPolicy) -> FleetLimiter {
    FleetLimiter::builder()
        .redis_url(url)
        .secret(FleetSecret::from_bytes(*b"fleet tests key!"))
        .processes(N)
        .lease_cap(LEASE_CAP)
        .fail_policy(policy)
        .io_timeout(Duration::from_millis(50))
        .build([budget_config()])
        .unwrap()
}

/// `B(T) = burst + T × rate`.
pub fn budget(t: Duration) -> f64 {
    BURST + t.as_secs_f64() * RATE
}

/// What the `fail_local` fallback of `processes` processes, each falling back once, can add
/// over `t`: `processes × (1 + t × rate/N)` (the fallback bucket holds one token).
pub fn fallback_share(t: Duration, processes: u32) -> f64 {
    f64::from(processes) * (1.0 + t.as_secs_f64() * RATE / f64::from(N))
}

/// Decision latencies, in nanoseconds.
#[derive(Default)]
pub struct Latencies(pub Vec<u64>);

impl Latencies {
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.0
            .push(u64::try_from(start.elapsed().as_nanos()).unwrap());
        out
    }

    pub fn percentile(&mut self, p: f64) -> Duration {
        self.0.sort_unstable();
        let at = ((self.0.len() as f64 - 1.0) * p).round() as usize;
        Duration::from_nanos(self.0.get(at).copied().unwrap_or(0))
    }
}

/// A cold identity's first request is admitted at once (a provisional token, paid by its
/// first lease), not refused while that lease travels; once Redis is known down, `fail_closed`
/// hands out no provisional token.
#[test]
fn a_cold_identitys_first_request_is_admitted() {
    let Some(mut server) = server::Server::start(&[]) else {
        return;
    };
    // A first lease on a server younger than the horizon finds its key drained (by design:
    // `script.rs`); this test is about the provisional token, so it starts past that window.
    server.wait_past_drained_start();
    let closed = fleet(&server.url(), FailPolicy::Closed);
    let ids: Vec<String> = (0..50).map(|i| format!("cold-{i}")).collect();
    for id in &ids {
        assert!(closed.try_acquire(id, 0).is_ok(), "{id}: first request");
    }
    // Each asked for its first lease plus the debt (2 tokens): wait for them (bounded).
    let start = Instant::now();
    while closed.stats().tokens_granted < 2 * 50 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(closed.stats().tokens_granted, 100, "{:?}", closed.stats());
    // The debt is paid and one leased token is left for each.
    for id in &ids {
        assert!(closed.try_acquire(id, 0).is_ok(), "{id}: second request");
    }
    server.kill();
    // The first decision after the kill does not know Redis is down: its request finds out.
    let _ = closed.try_acquire("probe", 0);
    let start = Instant::now();
    while !closed.stats().down && start.elapsed() < Duration::from_secs(5) {
        let _ = closed.try_acquire("probe", 0);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(closed.stats().down, "{:?}", closed.stats());
    let refused = closed.try_acquire("cold-while-down", 0).unwrap_err();
    assert_eq!(refused.reason(), FleetRefusal::Unavailable, "{refused}");
    println!("cold identities: 50 admitted at once, {:?}", closed.stats());
}

/// On a server younger than the horizon a missing key is created drained by default (a
/// restart must not hand out a fresh burst), and full with `restart_drains(false)`.
#[test]
fn a_young_server_drains_new_keys_unless_told_not_to() {
    let born = Instant::now();
    let Some(server) = server::Server::start(&[]) else {
        return;
    };
    let make = |drains: bool| {
        FleetLimiter::builder()
            .redis_url(server.url())
            .secret(FleetSecret::from_bytes(*b"fleet tests key!"))
            .lease_cap(LEASE_CAP)
            .restart_drains(drains)
            // A 10 s horizon: the whole test runs inside the server's young window.
            .build([BucketConfig::per_second(10)
                .unwrap()
                .with_burst(100)
                .unwrap()])
            .unwrap()
    };
    let (drained, full) = (make(true), make(false));
    let ids: Vec<String> = (0..20).map(|i| format!("young-{i}")).collect();
    for (limiter, prefix) in [(&drained, "d"), (&full, "f")] {
        for id in &ids {
            // The first request takes the provisional token and sends the first lease.
            let _ = limiter.try_acquire(format!("{prefix}-{id}").as_str(), 0);
        }
    }
    // Wait for the counts asserted below: the worker counts a call before it reads the reply
    // that says whether the bucket was fresh or drained, so `redis_calls` can reach 20 first.
    let answered = |s: FleetStats| s.fresh_buckets + s.drained_buckets;
    let start = Instant::now();
    while (answered(drained.stats()) < 20 || answered(full.stats()) < 20)
        && start.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let (d, f) = (drained.stats(), full.stats());
    println!("young server: drains {d:?}; full {f:?}");
    assert_eq!((d.drained_buckets, d.fresh_buckets), (20, 0), "{d:?}");
    assert_eq!((f.drained_buckets, f.fresh_buckets), (0, 20), "{f:?}");
    // Drained: each key at most what 10/s refilled since the server started (nothing in its
    // first second), of the 2 asked; full: every first lease (the debt plus one) granted.
    let refilled = (10.0 * born.elapsed().as_secs_f64()).floor() as u64;
    assert!(d.tokens_granted <= 20 * refilled.min(2), "{d:?}");
    assert_eq!(f.tokens_granted, 40, "{f:?}");
}

/// A cold identity whose first lease Redis refuses keeps its entry in debt, and an entry in
/// debt is never reclaimed: without the lease thread collecting those debts by itself, a
/// flood of one-request identities on a drained budget would fill the table for good and
/// every new identity would be refused (`TableFull`).
#[test]
fn unpaid_provisional_tokens_are_collected_and_their_entries_freed() {
    let Some(server) = server::Server::start(&[]) else {
        return;
    };
    let fleet = FleetLimiter::builder()
        .redis_url(server.url())
        .secret(FleetSecret::from_bytes(*b"fleet tests key!"))
        .lease_cap(LEASE_CAP)
        .cap(20)
        // 10/s in bursts of 100: a 10 s horizon, so every key of this young server starts
        // drained and every first lease is refused (the next token is due in 100 ms).
        .build([BucketConfig::per_second(10)
            .unwrap()
            .with_burst(100)
            .unwrap()])
        .unwrap();
    for i in 0..20 {
        assert!(
            fleet.try_acquire(&format!("once-{i}"), 0).is_ok(),
            "once-{i}"
        );
    }
    let start = Instant::now();
    while fleet.stats().redis_calls < 20 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(fleet.stats().tokens_granted, 0, "{:?}", fleet.stats());
    let full = fleet.try_acquire("newcomer-0", 0).unwrap_err();
    assert_eq!(full.reason(), FleetRefusal::TableFull, "{full}");
    // Nobody comes back; the lease thread asks again when Redis said a token is due.
    while fleet.stats().tokens_granted < 20 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = fleet.stats();
    println!("debts collected: {s:?}");
    assert!(s.tokens_granted >= 20, "{s:?}");
    // A paid entry holds and owes nothing, but Redis granted it less than asked (1 of the 2),
    // so it waits out its pace (about 100 ms here, at most 4 s) before the table may reclaim
    // it: a reclaim never lets a call out sooner than the entry it replaces would have. At a
    // reading past every pace, the newcomer finds one to reclaim.
    let past_every_pace = fleet.clock().now_ns() + Duration::from_millis(4_001).as_nanos() as u64;
    assert!(
        fleet
            .try_acquire_at("newcomer-1", 0, past_every_pace)
            .is_ok(),
        "a paid entry was reclaimed"
    );
}
