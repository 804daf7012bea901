//! Faults injected into a real server: paused (SIGSTOP), killed and restarted, a key of the
//! wrong type, keys evicted under `maxmemory`. Two limiters run side by side on two
//! identities, one `fail_local` and one `fail_closed`, so each case checks both policies.

use super::server::Server;
use super::{budget, fallback_share, fleet, Latencies, LEASE_CAP};
use admit::fleet::{FailPolicy, FleetLimiter, FleetRefusal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one limiter did over a run.
#[derive(Default, Debug)]
struct Tally {
    admitted: u64,
    /// Admitted while the fault was on.
    admitted_in_fault: u64,
    unavailable: u64,
    fallback_limited: u64,
    latencies: Latencies,
}

impl std::fmt::Debug for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} samples", self.0.len())
    }
}

/// Drives both limiters for `run`, flagging admissions made while `fault` is set.
fn drive(
    local: &FleetLimiter,
    closed: &FleetLimiter,
    run: Duration,
    fault: &AtomicBool,
) -> (Tally, Tally) {
    let (mut l, mut c) = (Tally::default(), Tally::default());
    let start = Instant::now();
    while start.elapsed() < run {
        for (limiter, tally, who) in [(local, &mut l, "local-id"), (closed, &mut c, "closed-id")] {
            let in_fault = fault.load(Ordering::SeqCst);
            match tally.latencies.time(|| limiter.try_acquire(who, 0)) {
                Ok(()) => {
                    tally.admitted += 1;
                    tally.admitted_in_fault += u64::from(in_fault);
                }
                Err(r) if r.reason() == FleetRefusal::Unavailable => tally.unavailable += 1,
                Err(r) if r.reason() == FleetRefusal::FallbackLimited => {
                    tally.fallback_limited += 1
                }
                Err(_) => {}
            }
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    (l, c)
}

/// Checks the bound for one limiter: `B(T)(1 + m) + cap + F`, F = 0 for fail_closed.
fn check(name: &str, tally: &Tally, run: Duration, losses: u64, policy: FailPolicy) {
    let f = match policy {
        FailPolicy::Local => fallback_share(run, 1),
        FailPolicy::Closed => 0.0,
    };
    let bound = budget(run) * (1 + losses) as f64 + f64::from(LEASE_CAP) + f;
    println!(
        "{name}: admitted {} ({} during the fault) ≤ bound {bound:.0} \
         [B(T)={:.0}, memory losses {losses}, cap {LEASE_CAP}, fallback {f:.0}]",
        tally.admitted,
        tally.admitted_in_fault,
        budget(run)
    );
    assert!(tally.admitted as f64 <= bound, "{name}: over the bound");
}

fn p99(name: &str, tally: &mut Tally) {
    let p99 = tally.latencies.percentile(0.99);
    let max = tally.latencies.percentile(1.0);
    println!(
        "{name}: decision p99 {p99:?}, max {max:?}, {} decisions",
        tally.latencies.0.len()
    );
    assert!(
        p99 < Duration::from_millis(1),
        "{name}: a decision waited: p99 {p99:?}"
    );
}

/// Runs `inject` on its own thread while both limiters are driven for `run`.
fn with_fault(
    server: &Server,
    run: Duration,
    inject: impl FnOnce(&AtomicBool) + Send,
) -> (FleetLimiter, FleetLimiter, Tally, Tally) {
    let local = fleet(&server.url(), FailPolicy::Local);
    let closed = fleet(&server.url(), FailPolicy::Closed);
    let fault = Arc::new(AtomicBool::new(false));
    let (l, c) = std::thread::scope(|s| {
        let f = Arc::clone(&fault);
        s.spawn(move || inject(&f));
        drive(&local, &closed, run, &fault)
    });
    (local, closed, l, c)
}

#[test]
fn a_paused_server_never_blocks_a_decision() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let run = Duration::from_millis(3500);
    let (local, closed, mut l, mut c) = with_fault(&server, run, |fault| {
        std::thread::sleep(Duration::from_millis(700));
        server.pause();
        fault.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(2));
        fault.store(false, Ordering::SeqCst);
        server.resume();
    });
    p99("fail_local", &mut l);
    p99("fail_closed", &mut c);
    check("fail_local", &l, run, 0, FailPolicy::Local);
    check("fail_closed", &c, run, 0, FailPolicy::Closed);
    let (ls, cs) = (local.stats(), closed.stats());
    println!("stats: local {ls:?}\n       closed {cs:?}");
    // fail_local: the 1/N share admitted during the pause (250/s for 2 s, plus its burst of 12).
    assert!(ls.outages >= 1 && ls.fallback_admissions > 100, "{ls:?}");
    assert!(l.admitted_in_fault > 100 && l.admitted_in_fault <= u64::from(LEASE_CAP) + 12 + 550);
    // fail_closed: only tokens leased before the pause, then refusals.
    assert!(cs.outages >= 1 && cs.fallback_admissions == 0, "{cs:?}");
    assert!(c.admitted_in_fault <= u64::from(LEASE_CAP), "{c:?}");
    assert!(c.unavailable > 0);
    // Both reconnected after SIGCONT.
    assert!(ls.reconnects >= 1 && cs.reconnects >= 1);
}

#[test]
fn a_killed_and_restarted_server_loses_at_most_one_burst() {
    let Some(mut server) = Server::start(&[]) else {
        return;
    };
    let run = Duration::from_millis(3000);
    let server_ref = &mut server;
    let local = fleet(&server_ref.url(), FailPolicy::Local);
    let closed = fleet(&server_ref.url(), FailPolicy::Closed);
    let fault = AtomicBool::new(false);
    let (mut l, mut c) = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(800));
            server_ref.kill();
            fault.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(700));
            server_ref.restart();
            fault.store(false, Ordering::SeqCst);
        });
        drive(&local, &closed, run, &fault)
    });
    p99("fail_local", &mut l);
    p99("fail_closed", &mut c);
    // The restart came back with empty memory: one memory loss.
    check("fail_local", &l, run, 1, FailPolicy::Local);
    check("fail_closed", &c, run, 1, FailPolicy::Closed);
    let (ls, cs) = (local.stats(), closed.stats());
    println!("stats: local {ls:?}\n       closed {cs:?}");
    assert!(ls.outages >= 1 && ls.reconnects >= 1 && !ls.down, "{ls:?}");
    assert!(cs.outages >= 1 && cs.reconnects >= 1 && !cs.down, "{cs:?}");
    assert!(ls.fallback_admissions > 0 && cs.fallback_admissions == 0);
    assert!(c.admitted_in_fault <= u64::from(LEASE_CAP));
}

#[test]
fn a_key_of_the_wrong_type_is_a_fault_of_that_key() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let mut admin = server.connection();
    let run = Duration::from_millis(3000);
    let (local, closed, l, c) = with_fault(&server, run, |fault| {
        std::thread::sleep(Duration::from_millis(600));
        let keys: Vec<String> = redis::cmd("KEYS").arg("admit:*").query(&mut admin).unwrap();
        assert_eq!(keys.len(), 2, "one key per identity: {keys:?}");
        fault.store(true, Ordering::SeqCst);
        for (i, key) in keys.iter().enumerate() {
            // Atomically: the lease thread may write the key between a DEL and the overwrite.
            let mut pipe = redis::pipe();
            pipe.atomic().del(key);
            if i == 0 {
                pipe.rpush(key, "x");
            } else {
                pipe.set(key, "not a number");
            }
            let _: redis::Value = pipe.query(&mut admin).unwrap();
        }
        std::thread::sleep(Duration::from_millis(1200));
        for key in &keys {
            let _: redis::Value = redis::cmd("DEL").arg(key).query(&mut admin).unwrap();
        }
        fault.store(false, Ordering::SeqCst);
    });
    // Overwriting deletes the bucket; the repair's DEL another: two memory losses.
    check("fail_local", &l, run, 2, FailPolicy::Local);
    check("fail_closed", &c, run, 2, FailPolicy::Closed);
    let (ls, cs) = (local.stats(), closed.stats());
    println!("stats: local {ls:?}\n       closed {cs:?}");
    assert!(ls.key_faults > 0 && cs.key_faults > 0, "both saw the fault");
    assert!(
        ls.outages == 0 && cs.outages == 0,
        "a bad key is not an outage"
    );
    assert!(ls.fallback_admissions > 0 && cs.fallback_admissions == 0);
    assert!(c.unavailable > 0, "fail_closed refused the faulted key");
    assert!(c.admitted_in_fault <= u64::from(LEASE_CAP));
}

#[test]
fn evicted_lease_keys_cost_at_most_a_burst_each() {
    let Some(server) = Server::start(&["--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"])
    else {
        return;
    };
    let mut admin = server.connection();
    let run = Duration::from_millis(2500);
    let (local, closed, l, c) = with_fault(&server, run, |fault| {
        fault.store(true, Ordering::SeqCst);
        let value = "v".repeat(2048);
        let start = Instant::now();
        let mut i = 0u64;
        while start.elapsed() < Duration::from_millis(2000) {
            let _: redis::RedisResult<()> = redis::cmd("SET")
                .arg(format!("filler:{i}"))
                .arg(&value)
                .query(&mut admin);
            i += 1;
        }
        fault.store(false, Ordering::SeqCst);
    });
    let info: String = redis::cmd("INFO").arg("stats").query(&mut admin).unwrap();
    let evicted: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let (ls, cs) = (local.stats(), closed.stats());
    println!(
        "evicted keys: {evicted}; buckets found missing: local {}, closed {}",
        ls.fresh_buckets, cs.fresh_buckets
    );
    assert!(evicted > 0, "the flood evicted keys");
    // Each call that found no bucket (the first use, or a loss: the demand never lets the
    // bucket fill and expire) is counted by the limiter: m = fresh buckets − 1.
    check(
        "fail_local",
        &l,
        run,
        ls.fresh_buckets.saturating_sub(1),
        FailPolicy::Local,
    );
    check(
        "fail_closed",
        &c,
        run,
        cs.fresh_buckets.saturating_sub(1),
        FailPolicy::Closed,
    );
    println!(
        "stats: local {:?}\n       closed {:?}",
        local.stats(),
        closed.stats()
    );
    // (1 MiB is below an idle redis 7's own footprint: every write would be refused with OOM,
    // a key fault, not an eviction; 2 MiB leaves room for the lease keys and evicts fillers.)
    // Eviction is not an outage: the budget kept being served from Redis.
    assert!(ls.outages == 0 && cs.outages == 0);
    assert!(ls.tokens_granted > 0 && cs.tokens_granted > 0);
    assert!(c.admitted > 0 && cs.fallback_admissions == 0);
}
