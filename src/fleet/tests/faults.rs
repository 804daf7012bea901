//! Faults injected into a real server: paused (SIGSTOP), killed and restarted, a key of the
//! wrong type, keys evicted under `maxmemory`. Two limiters run side by side on two
//! identities, one `fail_local` and one `fail_closed`, so each case checks both policies.

use super::server::Server;
use super::{budget, fallback_share, fleet, Latencies, LEASE_CAP, N, RATE};
use admit::fleet::{FailPolicy, FleetLimiter, FleetRefusal, FleetSecret};
use admit::{BucketConfig, Clock};
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
    /// Admissions the fallback made (the limiter's counter moved), and the first and last,
    /// read on the limiter's own clock (ns): the clock its fallback bucket refills by.
    fallback: u64,
    fallback_first: Option<u64>,
    fallback_last: Option<u64>,
    latencies: Latencies,
}

impl Tally {
    /// The fallback bucket holds one token and refills at `rate/N`: over its admissions'
    /// span it admits at most `1 + span × rate/N` (one fallback period), plus two (8 ms)
    /// for the readings: the span is read on the limiter's own clock just after each
    /// decision (so a starved clock updater delays both alike), in 1 ms ticks.
    fn check_fallback(&self, name: &str) {
        let span = match (self.fallback_first, self.fallback_last) {
            (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
            _ => Duration::ZERO,
        };
        let bound = 1.0 + span.as_secs_f64() * RATE / f64::from(N) + 2.0;
        println!(
            "{name}: fallback admitted {} over {span:?} ≤ 1 + T × rate/N (+2 clock) = {bound:.1}",
            self.fallback
        );
        assert!(
            self.fallback as f64 <= bound,
            "{name}: the fallback admitted more than 1 + T × rate/N"
        );
    }
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
            let fallback_before = limiter.stats().fallback_admissions;
            match tally.latencies.time(|| limiter.try_acquire(who, 0)) {
                Ok(()) => {
                    tally.admitted += 1;
                    tally.admitted_in_fault += u64::from(in_fault);
                    if limiter.stats().fallback_admissions > fallback_before {
                        let now = limiter.clock().now_ns();
                        tally.fallback += 1;
                        tally.fallback_first.get_or_insert(now);
                        tally.fallback_last = Some(now);
                    }
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

/// Checks the bound for one limiter: `B(T)(1 + m) + cap + F`, F = 0 for fail_closed, and
/// for fail_local `1 + T × rate/N` (one fallback period, at most the whole run).
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

/// `build()` against a paused server returns within one I/O timeout: the connect, its
/// handshake and the script load share one deadline.
#[test]
fn build_waits_at_most_one_io_timeout_on_a_paused_server() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    server.pause();
    let took: Vec<Duration> = (0..5)
        .map(|_| {
            let started = Instant::now();
            let limiter = fleet(&server.url(), FailPolicy::Closed);
            let took = started.elapsed();
            assert!(limiter.stats().down, "a paused server is down");
            took
        })
        .collect();
    server.resume();
    println!("build() against a paused server, io_timeout 50 ms: {took:?}");
    for t in &took {
        assert!(*t < Duration::from_millis(80), "build() took {t:?}");
    }
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
    // fail_local: the 1/N share admitted during the pause: 250/s for 2 s, plus one token (the
    // fallback starts with one token, not its share of the burst).
    assert!(ls.outages >= 1 && ls.fallback_admissions > 100, "{ls:?}");
    assert_eq!(l.fallback, ls.fallback_admissions);
    l.check_fallback("fail_local");
    assert!(l.admitted_in_fault > 100 && l.admitted_in_fault <= u64::from(LEASE_CAP) + 1 + 550);
    // fail_closed: only tokens leased before the pause, then refusals.
    assert!(cs.outages >= 1 && cs.fallback_admissions == 0, "{cs:?}");
    assert!(c.admitted_in_fault <= u64::from(LEASE_CAP), "{c:?}");
    assert!(c.unavailable > 0);
    // Both reconnect after SIGCONT: the backoff reached 1 s during the 2 s pause, so the
    // next attempt may come up to that (plus one I/O timeout) after the resume.
    let resumed = Instant::now();
    while (local.stats().reconnects == 0 || closed.stats().reconnects == 0)
        && resumed.elapsed() < Duration::from_secs(2)
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (ls, cs) = (local.stats(), closed.stats());
    assert!(ls.reconnects >= 1 && cs.reconnects >= 1, "{ls:?}\n{cs:?}");
}

#[test]
fn a_killed_and_restarted_server_hands_out_no_fresh_burst() {
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
    // The restart came back with empty memory, but the script creates a key drained while
    // the server is younger than the horizon: no memory loss, m = 0.
    check("fail_local", &l, run, 0, FailPolicy::Local);
    check("fail_closed", &c, run, 0, FailPolicy::Closed);
    let (ls, cs) = (local.stats(), closed.stats());
    println!("stats: local {ls:?}\n       closed {cs:?}");
    l.check_fallback("fail_local");
    assert_eq!(l.fallback, ls.fallback_admissions);
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
    // The repair's DEL came 1.8 s after the server started, more than its horizon (50 ms)
    // plus the 1 s resolution of its start time: that key was created full, not drained.
    assert!(
        ls.fresh_buckets >= 1 && cs.fresh_buckets >= 1,
        "a key lost on an old server is created full"
    );
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
    // bucket fill and expire) is counted by the limiter, full or drained (an eviction in the
    // server's first second is created drained, but may still hand out part of a burst):
    // m = fresh + drained buckets − 1.
    check(
        "fail_local",
        &l,
        run,
        (ls.fresh_buckets + ls.drained_buckets).saturating_sub(1),
        FailPolicy::Local,
    );
    check(
        "fail_closed",
        &c,
        run,
        (cs.fresh_buckets + cs.drained_buckets).saturating_sub(1),
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

/// A slow budget (10/s in bursts of 50: a 5 s horizon), so that a fresh burst after a restart
/// is far more than the rate adds meanwhile.
fn slow_fleet(url: &str) -> FleetLimiter {
    FleetLimiter::builder()
        .redis_url(url)
        .secret(FleetSecret::from_bytes(*b"fleet tests key!"))
        .processes(1)
        .lease_cap(SLOW_CAP)
        .fail_policy(FailPolicy::Closed)
        .io_timeout(Duration::from_millis(50))
        .key_prefix("slow")
        .build([BucketConfig::per_second(10)
            .unwrap()
            .with_burst(50)
            .unwrap()])
        .unwrap()
}

const SLOW_CAP: u32 = 8;

/// Floods `who` for `run`; returns the admissions.
fn flood(limiter: &FleetLimiter, who: &str, run: Duration) -> u64 {
    let start = Instant::now();
    let mut admitted = 0;
    while start.elapsed() < run {
        admitted += u64::from(limiter.try_acquire(who, 0).is_ok());
        std::thread::sleep(Duration::from_micros(200));
    }
    admitted
}

#[test]
fn a_restart_does_not_refill_a_drained_key() {
    let Some(mut server) = Server::start(&[]) else {
        return;
    };
    let limiter = slow_fleet(&server.url());
    let start = Instant::now();
    let before = flood(&limiter, "slow-id", Duration::from_millis(700));
    let killed = Instant::now();
    server.kill();
    server.restart();
    let after = flood(&limiter, "slow-id", Duration::from_millis(1500));
    let (t, t_after) = (start.elapsed(), killed.elapsed());
    let stats = limiter.stats();
    // Over the whole run: B(T) + cap, m = 0. After the kill: what the rate adds over that
    // time plus the leases held at the kill; a key created full after the restart would add
    // a fresh burst of 50.
    let bound = 50.0 + t.as_secs_f64() * 10.0 + f64::from(SLOW_CAP);
    let bound_after = t_after.as_secs_f64() * 10.0 + f64::from(SLOW_CAP) + 1.0;
    println!(
        "10/s in bursts of 50: admitted {before} before the kill, {after} after it; \
         total {} ≤ B(T) + cap = {bound:.1}; after ≤ T × rate + cap + 1 = {bound_after:.1}; \
         {stats:?}",
        before + after
    );
    assert!((before + after) as f64 <= bound, "over the bound");
    assert!(
        after as f64 <= bound_after,
        "the restart handed out a burst"
    );
    assert!(stats.outages >= 1 && stats.reconnects >= 1, "{stats:?}");
    assert!(
        stats.drained_buckets >= 1 && stats.fresh_buckets == 0,
        "{stats:?}"
    );
}
