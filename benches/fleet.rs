//! The fleet limiter (feature `redis`) against its anchors, on one machine with a local
//! `redis-server` the bench starts itself (persistence off, killed at the end):
//!
//! * `limiter hit`: the single-process `Limiter::try_acquire_at`, one hot identity;
//! * `fleet leased decision`: `FleetLimiter::try_acquire_at`, one hot identity whose leases
//!   keep up (a huge budget and the largest lease cap): one CAS on the lease word;
//! * `EVALSHA round trip`: what a per-request Redis limiter pays: the same GCRA script, one
//!   token, one round trip to the same server.
//!
//! Then, outside criterion, printed: Redis calls per 1,000 decisions at a steady hot load
//! within the budget (default lease cap), and the throughput of 4 processes (this binary
//! re-spawned with `ADMIT_FLEET_BENCH_CHILD`) flooding one identity.
//!
//! Instruction counts (the stable measure on a shared machine): run this binary with
//! `ADMIT_FLEET_BENCH_ICOUNT=fleet` (or `limiter`) under
//! `valgrind --tool=callgrind --toggle-collect='*icount_decide*'`: it makes 1,000,000
//! decisions through an `#[inline(never)]` wrapper and exits. See docs/benchmarks.md.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use admit::fleet::FleetLimiter;
use admit::{BucketConfig, Clock, Limiter};
use criterion::{criterion_group, Criterion};
use fleet_server::{fleet, huge, start_server, url, warm};
use std::hint::black_box;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod fleet_server;

const CHILD_ENV: &str = "ADMIT_FLEET_BENCH_CHILD";
const ICOUNT_ENV: &str = "ADMIT_FLEET_BENCH_ICOUNT";

#[inline(never)]
fn icount_decide_fleet(l: &FleetLimiter, now: u64) -> bool {
    l.try_acquire_at(black_box("hot"), 0, now).is_ok()
}

#[inline(never)]
fn icount_decide_limiter(l: &Limiter, now: u64) -> bool {
    l.try_acquire_at(black_box("hot"), 0, now).is_ok()
}

fn decisions(c: &mut Criterion) {
    let Some(server) = start_server() else {
        return;
    };
    let mut g = c.benchmark_group("fleet");
    let limiter = Limiter::builder().build([huge()]).unwrap();
    g.bench_function("limiter hit (try_acquire_at)", |b| {
        let now = limiter.clock().now_ns();
        b.iter(|| icount_decide_limiter(&limiter, now))
    });
    let leased = fleet(server.1, 1 << 19, huge());
    warm(&leased);
    let (mut hits, mut total) = (0u64, 0u64);
    g.bench_function("fleet leased decision (try_acquire_at)", |b| {
        b.iter_custom(|iters| {
            let now = leased.clock().now_ns();
            let start = Instant::now();
            let mut h = 0;
            for _ in 0..iters {
                h += u64::from(icount_decide_fleet(&leased, now));
            }
            let elapsed = start.elapsed();
            hits += h;
            total += iters;
            elapsed
        })
    });
    println!("fleet leased decision: {hits} of {total} decisions admitted from leases");
    let script = redis::Script::new(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/fleet/script.rs"))
            .map(|src| {
                let start = src.find("r\"\n").unwrap() + 3;
                let end = src.rfind("\";").unwrap();
                src[start..end].to_owned()
            })
            .unwrap(),
    );
    let client = redis::Client::open(url(server.1)).unwrap();
    let mut con = client.get_connection().unwrap();
    g.bench_function("EVALSHA GCRA round trip (one token)", |b| {
        b.iter(|| {
            let r: (u64, u64, u64) = script
                .key("bench:{rt}:0")
                .arg(1.0f64)
                .arg(1u64 << 30)
                .arg(1u32)
                .invoke(&mut con)
                .unwrap();
            black_box(r)
        })
    });
    g.finish();
    drop(leased);
    calls_per_thousand(server.1);
    four_processes(server.1);
}

/// Redis calls per 1,000 decisions for one hot identity deciding ~20,000 times a second
/// within a budget of 100,000/s, default lease cap, for 2 s.
fn calls_per_thousand(port: u16) {
    let limiter = fleet(
        port,
        admit::fleet::DEFAULT_LEASE_CAP,
        BucketConfig::new(1000, Duration::from_micros(10)).unwrap(),
    );
    let start = Instant::now();
    let (mut n, mut ok) = (0u64, 0u64);
    while start.elapsed() < Duration::from_secs(2) {
        ok += u64::from(limiter.try_acquire("steady", 0).is_ok());
        n += 1;
        std::thread::sleep(Duration::from_micros(40));
    }
    let calls = limiter.stats().redis_calls;
    println!(
        "steady hot load (lease cap {}): {n} decisions, {ok} admitted, {calls} Redis calls: {:.2} per 1,000 decisions",
        admit::fleet::DEFAULT_LEASE_CAP,
        1000.0 * calls as f64 / n as f64
    );
}

/// 4 processes (this binary re-spawned) flood one identity for 2 s with a huge budget.
fn four_processes(port: u16) {
    let exe = std::env::current_exe().unwrap();
    let start = Instant::now();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .env(CHILD_ENV, port.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut decisions = 0u64;
    let mut admitted = 0u64;
    for c in children {
        let out = String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap();
        let mut parts = out.split_whitespace();
        decisions += parts.next().unwrap().parse::<u64>().unwrap();
        admitted += parts.next().unwrap().parse::<u64>().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "4 processes, one identity, 2 s each ({secs:.2} s wall): {decisions} decisions, {admitted} admitted: \
         {:.1} M decisions/s, {:.1} M admissions/s",
        decisions as f64 / secs / 1e6,
        admitted as f64 / secs / 1e6
    );
}

fn child(port: u16) {
    let limiter = fleet(port, 1 << 16, huge());
    let start = Instant::now();
    let (mut n, mut ok) = (0u64, 0u64);
    while start.elapsed() < Duration::from_secs(2) {
        for _ in 0..1000 {
            ok += u64::from(limiter.try_acquire("flood", 0).is_ok());
        }
        n += 1000;
    }
    println!("{n} {ok}");
}

fn icount(which: &str) {
    let limiter = Limiter::builder().build([huge()]).unwrap();
    let now = limiter.clock().now_ns();
    let mut ok = 0u64;
    if which == "limiter" {
        for _ in 0..1_000_000 {
            ok += u64::from(icount_decide_limiter(&limiter, now));
        }
    } else {
        let server = start_server().unwrap();
        let leased = fleet(server.1, 1 << 19, huge());
        warm(&leased);
        let now = leased.clock().now_ns();
        for _ in 0..1_000_000 {
            ok += u64::from(icount_decide_fleet(&leased, now));
        }
    }
    eprintln!("{which}: {ok} of 1000000 admitted");
}

criterion_group! {
    name = fleet_benches;
    config = Criterion::default();
    targets = decisions
}

fn main() {
    if let Ok(port) = std::env::var(CHILD_ENV) {
        child(port.parse().unwrap());
        return;
    }
    if let Ok(which) = std::env::var(ICOUNT_ENV) {
        icount(&which);
        return;
    }
    fleet_benches();
    Criterion::default().configure_from_args().final_summary();
}
