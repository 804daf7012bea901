//! The fleet limiter on a real local Redis Cluster (feature `redis-cluster`): each test starts
//! its own 3 primaries + 3 replicas (`local_cluster`, shared with `admit-sim fleet
//! --cluster`), on free loopback ports, and kills them at the end (also on panic). Without
//! `redis-server` or `redis-cli` every test skips with a one-line reason.
//!
//! Four deciders (threads in this process, each with a `FleetLimiter` of its own, so four
//! lease threads: the fleet's N = 4) flood one hot identity while a reshard migrates its slot
//! (`MOVED`/`ASK`). Two deciders fail local, two fail closed. The test prints admitted, the
//! bound and the time to recover. A primary killed or paused: `partial.rs`.

use super::local_cluster::{self, LocalCluster};
use super::{budget, budget_config, Latencies, LEASE_CAP, N, RATE};
use admit::fleet::{FailPolicy, FleetConfigError, FleetLimiter, FleetSecret, FleetStats};
use admit::BucketConfig;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const SECRET: &[u8; 16] = b"fleet tests key!";

/// The cluster, or `None` (after printing why) when a binary is missing.
fn start() -> Option<LocalCluster> {
    match LocalCluster::start() {
        Ok(c) => Some(c),
        Err(why) if why.starts_with("no ") => {
            eprintln!("skipped: {why}");
            None
        }
        Err(why) => panic!("the local cluster did not start: {why}"),
    }
}

fn cluster_fleet(
    urls: &[String],
    policy: FailPolicy,
    prefix: &str,
    classes: Vec<BucketConfig>,
) -> FleetLimiter {
    FleetLimiter::builder()
        .redis_cluster(urls.iter().cloned())
        .secret(FleetSecret::from_bytes(*SECRET))
        .processes(N)
        .lease_cap(LEASE_CAP)
        .fail_policy(policy)
        .io_timeout(Duration::from_millis(50))
        .key_prefix(prefix)
        .build(classes)
        .unwrap()
}

/// A plain (non-cluster) connection to one node: it sees `MOVED`/`ASK` as errors.
fn admin(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let con = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .unwrap();
    con.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    con
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
struct Node {
    id: String,
    port: u16,
    primary: bool,
    failed: bool,
    slots: Vec<(u16, u16)>,
}

fn nodes(port: u16) -> Vec<Node> {
    let text = local_cluster::query(port, "CLUSTER NODES").unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let addr = f[1].split('@').next().unwrap();
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .map(|s| match s.split_once('-') {
                    Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                    None => (s.parse().unwrap(), s.parse().unwrap()),
                })
                .collect();
            Node {
                id: f[0].to_owned(),
                port: addr.rsplit(':').next().unwrap().parse().unwrap(),
                primary: f[2].contains("master"),
                failed: f[2].contains("fail"),
                slots,
            }
        })
        .collect()
}

/// The live primary serving `slot`, as the node on `port` sees it.
fn owner(port: u16, slot: u16) -> Node {
    nodes(port)
        .into_iter()
        .find(|n| n.primary && !n.failed && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
        .unwrap_or_else(|| panic!("no live primary serves slot {slot}"))
}

fn keyslot(port: u16, key: &str) -> u16 {
    local_cluster::query(port, &format!("CLUSTER KEYSLOT {key}"))
        .unwrap()
        .parse()
        .unwrap()
}

/// Every key under `prefix` on every live primary, with the primary's port.
fn keys(ports: &[u16], prefix: &str) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    for n in nodes(ports[0])
        .into_iter()
        .filter(|n| n.primary && !n.failed)
    {
        let found: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query(&mut admin(n.port))
            .unwrap();
        out.extend(found.into_iter().map(|k| (k, n.port)));
    }
    out
}

/// A count from `INFO <section>` of the node on `port` (`field` up to its `=` or `:`).
fn info_count(port: u16, section: &str, field: &str) -> u64 {
    let info = local_cluster::query(port, &format!("INFO {section}")).unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| {
            rest.trim_start_matches(|c: char| !c.is_ascii_digit())
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok())
        })
        .unwrap_or(0)
}

/// What the four deciders and the monitor saw.
struct Outcome {
    elapsed: Duration,
    admitted: Vec<u64>,
    stats: Vec<FleetStats>,
    /// Time each decider read its limiter as down.
    down_time: Vec<Duration>,
    latencies: Latencies,
    /// From the fault to the last decider's first grant after it was last seen down.
    recovery: Duration,
    /// The longest time any decider went without a grant after the fault.
    longest_stall: Duration,
}

/// Sets the instant it is dropped.
struct Done<'a>(&'a OnceLock<Instant>);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        let _ = self.0.set(Instant::now());
    }
}

const POLICIES: [FailPolicy; 4] = [
    FailPolicy::Local,
    FailPolicy::Local,
    FailPolicy::Closed,
    FailPolicy::Closed,
];

/// Floods "hot" from four limiters while `fault` runs on its own thread (it sets the instant
/// of the fault in its argument); stops 1.5 s after `fault` returns.
fn four_deciders(
    urls: &[String],
    prefix: &str,
    fault: impl FnOnce(&OnceLock<Instant>) + Send,
) -> Outcome {
    let limiters: Vec<FleetLimiter> = POLICIES
        .iter()
        .map(|&p| cluster_fleet(urls, p, prefix, vec![budget_config()]))
        .collect();
    let start = Instant::now();
    let stop = AtomicBool::new(false);
    let fault_at = OnceLock::new();
    let fault_done = OnceLock::new();
    let latencies = Mutex::new(Latencies::default());
    let mut polls: Vec<Vec<(Instant, bool, u64)>> = vec![Vec::new(); limiters.len()];
    let per: Vec<(u64, Duration)> = std::thread::scope(|s| {
        let deciders: Vec<_> = limiters
            .iter()
            .map(|limiter| {
                let (stop, latencies) = (&stop, &latencies);
                s.spawn(move || {
                    let (mut admitted, mut down_time) = (0u64, Duration::ZERO);
                    let mut mine = Latencies::default();
                    let mut last = Instant::now();
                    while !stop.load(Ordering::SeqCst) {
                        let down = limiter.stats().down;
                        let now = Instant::now();
                        if down {
                            down_time += now - last;
                        }
                        last = now;
                        admitted += u64::from(mine.time(|| limiter.try_acquire("hot", 0)).is_ok());
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    latencies.lock().unwrap().0.extend(mine.0);
                    (admitted, down_time)
                })
            })
            .collect();
        let (fault_at, fault_done) = (&fault_at, &fault_done);
        s.spawn(move || {
            // Marked done even when the fault panics, so the monitor stops at once.
            let _done = Done(fault_done);
            fault(fault_at);
        });
        // The monitor: every decider's `down` and grants, every 5 ms, until 1.5 s after the
        // fault is over (at most 25 s).
        loop {
            let now = Instant::now();
            for (limiter, p) in limiters.iter().zip(&mut polls) {
                let st = limiter.stats();
                p.push((now, st.down, st.tokens_granted));
            }
            let over = fault_done
                .get()
                .is_some_and(|d| now > *d + Duration::from_millis(1500));
            if over || start.elapsed() > Duration::from_secs(25) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::SeqCst);
        deciders.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = start.elapsed();
    let t_fault = *fault_at.get().expect("the fault ran");
    let mut recovery = Duration::ZERO;
    let mut longest_stall = Duration::ZERO;
    for p in &polls {
        let after: Vec<_> = p.iter().filter(|(t, _, _)| *t >= t_fault).collect();
        // The last poll that saw it down (or the fault itself), then its first grant.
        let base = after.iter().rposition(|(_, down, _)| *down).unwrap_or(0);
        let (_, _, granted_then) = after[base];
        let back = after[base..]
            .iter()
            .find(|(_, down, g)| !down && g > granted_then)
            .map(|(t, _, _)| *t - t_fault)
            .expect("a decider never got a grant back after the fault");
        recovery = recovery.max(back);
        let mut last_grant = t_fault;
        let mut granted = after[0].2;
        for (t, _, g) in &after {
            if *g > granted {
                longest_stall = longest_stall.max(*t - last_grant);
                last_grant = *t;
                granted = *g;
            }
        }
    }
    Outcome {
        elapsed,
        admitted: per.iter().map(|p| p.0).collect(),
        down_time: per.iter().map(|p| p.1).collect(),
        stats: limiters.iter().map(FleetLimiter::stats).collect(),
        latencies: latencies.into_inner().unwrap(),
        recovery,
        longest_stall,
    }
}

impl Outcome {
    /// Asserts the bound `B(T)(1 + m) + N × cap + F` (F: what the two fail_local deciders'
    /// fallback admitted, each at most `k_p + T_p × rate/N`), that no decision waited, and
    /// prints the figures.
    fn check(&mut self, name: &str, m: u64) {
        let total: u64 = self.admitted.iter().sum();
        let mut f = 0u64;
        for ((st, down), policy) in self.stats.iter().zip(&self.down_time).zip(POLICIES) {
            assert_eq!(st.key_faults, 0, "{name}: a key fault (CROSSSLOT?): {st:?}");
            if policy == FailPolicy::Closed {
                assert_eq!(st.fallback_admissions, 0, "{st:?}");
                continue;
            }
            // k_p: each outage starts a fallback period (the first connection could too); T_p
            // as the decider read `down`, plus two ticks of the 1 ms clock.
            let k = st.outages + 1;
            let allowed = k as f64 + down.as_secs_f64() * RATE / f64::from(N) + 2.0;
            assert!(
                st.fallback_admissions as f64 <= allowed,
                "{name}: fallback admitted {} > k + T_p × rate/N = {allowed:.1}",
                st.fallback_admissions
            );
            f += st.fallback_admissions;
        }
        let bound = budget(self.elapsed) * (1 + m) as f64 + f64::from(N * LEASE_CAP) + f as f64;
        let p99 = self.latencies.percentile(0.99);
        let max = self.latencies.percentile(1.0);
        println!(
            "{name}: admitted {total} {:?} in {:.2} s ≤ bound {bound:.0} \
             [B(T)={:.0} × (1+m), m={m}, N×cap={}, F={f}]; recovered {:?} after the fault \
             (longest stall without a grant {:?}); decisions p99 {p99:?} max {max:?} ({} decisions)",
            self.admitted,
            self.elapsed.as_secs_f64(),
            budget(self.elapsed),
            N * LEASE_CAP,
            self.recovery,
            self.longest_stall,
            self.latencies.0.len(),
        );
        for st in &self.stats {
            println!("  {st:?}");
        }
        assert!(total as f64 <= bound, "{name}: over the bound");
        assert!(
            p99 < Duration::from_millis(1),
            "{name}: a decision waited: p99 {p99:?}"
        );
        assert!(
            self.stats.iter().all(|s| !s.down && s.tokens_granted > 0),
            "{name}: not back to shared decisions"
        );
    }
}

/// Bad cluster configurations are refused with a typed error, before any connection.
#[test]
fn a_bad_cluster_configuration_is_refused() {
    let build = |nodes: Vec<&str>| {
        FleetLimiter::builder()
            .redis_cluster(nodes)
            .secret(FleetSecret::from_bytes(*SECRET))
            .build([budget_config()])
            .map(|_| ())
    };
    let none = build(vec![]).unwrap_err();
    assert!(matches!(none, FleetConfigError::ClusterNodes(_)), "{none}");
    let bad = build(vec!["not a url"]).unwrap_err();
    assert!(matches!(bad, FleetConfigError::ClusterNodes(_)), "{bad}");
    println!("{none}\n{bad}");
}

/// Many identities in several classes through the cluster: every lease lands on its key's
/// primary, no `CROSSSLOT` (nor any other key fault), and each identity's class keys share
/// one slot; the same script over two identities' keys is refused `CROSSSLOT`, so the check
/// would see it.
#[test]
fn one_identitys_keys_share_a_slot_and_never_cross_slots() {
    let Some(cluster) = start() else {
        return;
    };
    let ports = cluster.ports();
    // 1/s in bursts of 10: each key lives (its TTL: until its bucket is full again) for
    // seconds after its lease, long enough to be found.
    let slow = BucketConfig::per_second(1).unwrap().with_burst(10).unwrap();
    let limiter = cluster_fleet(&cluster.urls(), FailPolicy::Closed, "xs", vec![slow; 3]);
    for i in 0..200 {
        for class in 0..3 {
            let _ = limiter.try_acquire(&format!("id-{i}"), class);
        }
    }
    let started = Instant::now();
    let answered = |s: FleetStats| s.fresh_buckets + s.drained_buckets;
    while answered(limiter.stats()) < 600 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = limiter.stats();
    println!(
        "600 keys through the cluster in {:?}: {st:?}",
        started.elapsed()
    );
    assert_eq!(answered(st), 600, "{st:?}");
    assert_eq!((st.key_faults, st.outages), (0, 0), "{st:?}");
    let found = keys(&ports, "xs");
    assert_eq!(found.len(), 600, "every key stored once");
    let mut by_tag: std::collections::HashMap<String, Vec<(u16, u16)>> = Default::default();
    for (key, port) in &found {
        let tag = key.split(':').nth(1).unwrap().to_owned();
        by_tag
            .entry(tag)
            .or_default()
            .push((keyslot(*port, key), *port));
    }
    assert_eq!(by_tag.len(), 200);
    for (tag, at) in &by_tag {
        assert_eq!(at.len(), 3, "{tag}");
        assert!(
            at.iter().all(|x| *x == at[0]),
            "{tag}: classes split: {at:?}"
        );
        assert_eq!(
            owner(ports[0], at[0].0).port,
            at[0].1,
            "{tag}: on its slot's primary"
        );
    }
    let primaries: std::collections::HashSet<u16> = found.iter().map(|(_, p)| *p).collect();
    assert_eq!(primaries.len(), 3, "spread over every primary");
    // Two identities' keys on one primary, in two slots: one script over both is refused.
    let (a, pa) = &found[0];
    let (b, _) = found
        .iter()
        .find(|(k, p)| p == pa && keyslot(*p, k) != keyslot(*pa, a))
        .unwrap();
    let crossed: redis::RedisResult<i64> = redis::cmd("EVAL")
        .arg("return 1")
        .arg(2)
        .arg(a)
        .arg(b)
        .query(&mut admin(*pa));
    let e = crossed.unwrap_err();
    assert_eq!(e.code(), Some("CROSSSLOT"), "{e}");
}

/// The hot identity's key, its slot and that slot's primary (waiting for the first lease).
fn hot_key(ports: &[u16], prefix: &str) -> (String, u16, Node) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some((key, _)) = keys(ports, prefix).into_iter().next() {
            let slot = keyslot(ports[0], &key);
            return (key.clone(), slot, owner(ports[0], slot));
        }
        assert!(Instant::now() < deadline, "the hot key never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `redis-cli --cluster reshard` moves the hot key's slot to another primary while four
/// deciders flood it: the client follows `MOVED`/`ASK`, the new owner learns the script
/// through `EVAL` on `NOSCRIPT`, a migration loses nothing (m = 0).
#[test]
fn a_reshard_of_the_hot_slot_is_followed_within_the_bound() {
    let Some(cluster) = start() else {
        return;
    };
    let ports = cluster.ports();
    let moved = OnceLock::new();
    let mut out = four_deciders(&cluster.urls(), "rs", |fault_at| {
        std::thread::sleep(Duration::from_millis(800));
        let (key, slot, source) = hot_key(&ports, "rs");
        let target = nodes(ports[0])
            .into_iter()
            .find(|n| n.primary && n.id != source.id)
            .unwrap();
        // redis-cli moves the source's lowest slots first: as many as reach the hot one.
        let first = source.slots.iter().map(|s| s.0).min().unwrap();
        let count = slot - first + 1;
        let noscript_before = info_count(target.port, "errorstats", "errorstat_NOSCRIPT");
        let _ = fault_at.set(Instant::now());
        let began = Instant::now();
        let mut child = Command::new(local_cluster::binary("redis-cli").unwrap())
            .args([
                "--cluster",
                "reshard",
                &format!("127.0.0.1:{}", source.port),
            ])
            .args(["--cluster-from", &source.id, "--cluster-to", &target.id])
            .args(["--cluster-slots", &count.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if began.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the reshard took over 15 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "redis-cli --cluster reshard failed");
        let took = began.elapsed();
        // The slot moved, and a plain connection to the old owner is redirected.
        assert_eq!(owner(ports[0], slot).id, target.id, "the hot slot moved");
        let redirected: redis::RedisResult<Option<String>> =
            redis::cmd("GET").arg(&key).query(&mut admin(source.port));
        let e = redirected.unwrap_err();
        assert_eq!(e.code(), Some("MOVED"), "{e}");
        assert!(e.to_string().contains(&target.port.to_string()), "{e}");
        let _ = moved.set((slot, count, took, source.port, target.port, noscript_before));
    });
    let (slot, count, took, from, to, noscript_before) = *moved.get().unwrap();
    // Let the deciders' leases reach the new owner, then read what it saw.
    let noscript = info_count(to, "errorstats", "errorstat_NOSCRIPT") - noscript_before;
    let evals = info_count(to, "commandstats", "cmdstat_eval:calls");
    let asking = info_count(to, "commandstats", "cmdstat_asking:calls");
    println!(
        "reshard: slot {slot} moved from :{from} to :{to} with {count} slots in {took:?}; \
         the new owner answered NOSCRIPT {noscript}× then ran EVAL {evals}×, ASKING {asking}×"
    );
    assert!(
        noscript >= 1 && evals >= 1,
        "the new owner learnt the script by EVAL"
    );
    out.check("reshard", 0);
}
