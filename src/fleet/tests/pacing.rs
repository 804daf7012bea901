//! Redis traffic bounded by the budget, not by the flood: one identity flooded at 100× its
//! rate from N real OS processes (this test binary, re-spawned in a child role, each with its
//! own limiter and lease thread) for 10 s, N = 4 and N = 8. Each process makes at most 2
//! calls per lease granted, plus 2, plus one per pace interval (`N × interval`) while drained
//! (docs/fleet.md, Sizing); admissions stay within `B(T) + N × lease_cap`.
//!
//! Without pacing each drained process asks once per emission interval, about `N × rate`
//! calls a second for the fleet, against a bound of about `3 × rate`: the margin grows with
//! N (`N / 3`), so N = 8 tells paced from unpaced even when a loaded machine thins the flood.

use super::processes::{field, run_children};
use super::server::Server;
use admit::fleet::{FailPolicy, FleetLimiter, FleetSecret};
use admit::BucketConfig;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "ADMIT_FLEET_PACING_CHILD";
/// N, as the child is told it.
const PROCESSES_ENV: &str = "ADMIT_FLEET_PACING_PROCESSES";
/// The budget: 100 per second in bursts of 10 (an emission interval of 10 ms).
const RATE: u32 = 100;
const BURST: u32 = 10;
const LEASE_CAP: u32 = 32;
const RUN: Duration = Duration::from_secs(10);

/// Between two attempts of one of `n` processes: `n × 100 µs` (10,000 a second in all: 100 ×
/// the rate) less the ~80 µs a sleep overshoots.
fn gap(n: u32) -> Duration {
    Duration::from_micros(u64::from(n) * 100 - 80)
}

fn limiter(url: &str, n: u32) -> FleetLimiter {
    FleetLimiter::builder()
        .redis_url(url)
        .secret(FleetSecret::from_bytes(*b"fleet pacing key"))
        .processes(n)
        .lease_cap(LEASE_CAP)
        .fail_policy(FailPolicy::Closed)
        .io_timeout(Duration::from_millis(50))
        .build([BucketConfig::per_second(RATE)
            .unwrap()
            .with_burst(BURST)
            .unwrap()])
        .unwrap()
}

/// The child role: does nothing unless the parent set `ADMIT_FLEET_PACING_CHILD` to a Redis
/// URL. Floods one identity for `RUN` and prints what it did.
#[test]
fn child_role() {
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return;
    };
    let n: u32 = std::env::var(PROCESSES_ENV).unwrap().parse().unwrap();
    let limiter = limiter(&url, n);
    let start = Instant::now();
    let (mut attempts, mut admitted) = (0u64, 0u64);
    while start.elapsed() < RUN {
        attempts += 1;
        if limiter.try_acquire("flooded", 0).is_ok() {
            admitted += 1;
        }
        std::thread::sleep(gap(n));
    }
    let stats = limiter.stats();
    println!(
        "PACING attempts={attempts} admitted={admitted} calls={} granted={} leases={} \
         refusals={} outages={} partial={} after_partial={}",
        stats.redis_calls,
        stats.tokens_granted,
        stats.leases_granted,
        stats.refusals,
        stats.outages,
        stats.partial_leases,
        stats.refusals_after_partial
    );
}

#[test]
fn a_flooded_identity_costs_calls_by_its_budget_not_by_the_flood() {
    flood(4);
}

#[test]
fn eight_processes_flooded_cost_calls_by_the_budget_not_by_n() {
    flood(8);
}

/// Floods one identity from `n` processes, asserts both bounds.
fn flood(n: u32) {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let start = Instant::now();
    let lines = run_children(
        "pacing::child_role",
        &[(CHILD_ENV, server.url()), (PROCESSES_ENV, n.to_string())],
        n,
        "PACING ",
    );
    let elapsed = start.elapsed();
    let sum = |name: &str| lines.iter().map(|l| field(l, name)).sum::<u64>();
    let (attempts, admitted, calls, granted, leases, refusals, outages) = (
        sum("attempts"),
        sum("admitted"),
        sum("calls"),
        sum("granted"),
        sum("leases"),
        sum("refusals"),
        sum("outages"),
    );
    let (partial, after_partial) = (sum("partial"), sum("after_partial"));
    let per_calls: Vec<u64> = lines.iter().map(|l| field(l, "calls")).collect();
    let t = elapsed.as_secs_f64();
    // The admission bound: B(T) + N × lease_cap.
    let admission_bound = f64::from(BURST) + t * f64::from(RATE) + f64::from(n * LEASE_CAP);
    // The call bound, per process: 2 per lease granted (the granting call and at most one
    // refused follow-up) + 2 (its first call, and one still in flight at the end) + one per
    // pace interval while drained, the pace being at least N × interval (10 ms × n) on the
    // clock's millisecond readings, so at least 1 ms less of real time; summed over the fleet
    // (no retries: no request is lost without an outage). The whole run bounds each
    // process's drained time. (Run against the code before pacing, with the looser
    // `2 × tokens granted` for `2 × leases`, this failed: 6,129 calls > 3,032.)
    let pace_min = Duration::from_micros(u64::from(n) * 1_000_000 / u64::from(RATE) - 1_000);
    let drained_calls = (t / pace_min.as_secs_f64()).ceil();
    let call_bound = 2.0 * leases as f64 + f64::from(n) * (2.0 + drained_calls);
    println!(
        "pacing: {n} processes, {t:.2} s, {RATE}/s in bursts of {BURST}, {attempts} attempts \
         ({:.0}× the rate): admitted {admitted} (bound B(T) + N×cap = {admission_bound:.0}); \
         Redis calls {calls} {per_calls:?} = {:.0}/s: {leases} leases granted ({granted} \
         tokens), {refusals} refused (bound 2 × {leases} + {n} × (2 + ⌈T / {} ms⌉) = \
         {call_bound:.0}); outages {outages}; partial leases {partial}, refusals right \
         after one {after_partial} ({:.1} % of calls)",
        attempts as f64 / t / f64::from(RATE),
        calls as f64 / t,
        pace_min.as_millis(),
        100.0 * after_partial as f64 / calls.max(1) as f64
    );
    assert_eq!(outages, 0, "a fault would add retries to the call bound");
    // A flood, even on a loaded machine (100× is offered; sleeps overshoot under load): the
    // unpaced code made N × rate calls a second at any offered load above the rate.
    assert!(
        attempts as f64 >= 10.0 * t * f64::from(RATE),
        "only {attempts} attempts in {t:.1} s: not a flood"
    );
    assert!(
        admitted as f64 <= admission_bound,
        "admitted {admitted} > bound {admission_bound:.0}"
    );
    assert!(
        calls as f64 <= call_bound,
        "Redis calls {calls} > bound {call_bound:.0}"
    );
}
