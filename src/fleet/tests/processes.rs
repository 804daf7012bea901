//! Four real OS processes (this test binary, re-spawned in a child role) share one identity's
//! fleet budget.

use super::server::Server;
use super::{budget, fleet, LEASE_CAP, N};
use admit::fleet::FailPolicy;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "ADMIT_FLEET_CHILD";
const RUN: Duration = Duration::from_secs(3);

/// The child role: does nothing unless the parent set `ADMIT_FLEET_CHILD` to a Redis URL.
/// Floods one identity for `RUN` (about 10,000 attempts a second, ten times its share) and
/// prints what it admitted.
#[test]
fn child_role() {
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return;
    };
    let limiter = fleet(&url, FailPolicy::Closed);
    let start = Instant::now();
    let mut admitted = 0u64;
    while start.elapsed() < RUN {
        if limiter.try_acquire("flooder", 0).is_ok() {
            admitted += 1;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    let stats = limiter.stats();
    println!(
        "CHILD admitted={admitted} calls={} granted={} outages={}",
        stats.redis_calls, stats.tokens_granted, stats.outages
    );
}

/// The value of `name=` in a child's report line.
pub fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs `n` copies of this test binary in the child role `role` (a test that does nothing
/// unless its variables in `env` are set), waits for them, and returns each one's report: the
/// rest of its first stdout line after `marker`.
pub fn run_children(role: &str, env: &[(&str, String)], n: u32, marker: &str) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..n)
        .map(|_| {
            Command::new(&exe)
                .args([role, "--exact", "--nocapture", "--test-threads=1"])
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap())
        .map(|out| {
            out.lines()
                .find_map(|l| l.split_once(marker).map(|x| x.1.to_owned()))
                .unwrap()
        })
        .collect()
}

#[test]
fn four_processes_share_one_identitys_limit() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let start = Instant::now();
    let lines = run_children(
        "processes::child_role",
        &[(CHILD_ENV, server.url())],
        N,
        "CHILD ",
    );
    let elapsed = start.elapsed();
    let per: Vec<u64> = lines.iter().map(|l| field(l, "admitted")).collect();
    let total: u64 = per.iter().sum();
    let calls: u64 = lines.iter().map(|l| field(l, "calls")).sum();
    let bound = budget(elapsed) + f64::from(N * LEASE_CAP);
    let used = budget(RUN);
    println!(
        "4 processes, {:.2} s: admitted {total} {per:?}; bound B(T) + N×cap = {bound:.0}; \
         budget over the {} s run {used:.0} (used {:.1} %); Redis calls {calls}",
        elapsed.as_secs_f64(),
        RUN.as_secs(),
        100.0 * total as f64 / used
    );
    assert!(total as f64 <= bound, "over the bound: {total} > {bound}");
    assert!(
        total as f64 >= 0.9 * used,
        "under 90 % of the budget: {total} < 0.9 × {used}"
    );
    assert!(
        per.iter().all(|&p| p > 0),
        "every process was served: {per:?}"
    );
}
