//! Scenario 5: four front doors and one flooding identity spread across them, each door with
//! its own limit (N times the budget gets through) beside the budget shared through Redis
//! with `admit::fleet` (at most the bound). Starts its own `redis-server` on a free loopback
//! port, persistence off, and stops it at the end; with `--cluster`, a local Redis Cluster of
//! 3 primaries and 3 replicas instead (`cluster.rs`). With `--fault kill|pause` as well, a
//! last flood over identities on every primary runs once without a fault and once with one
//! primary killed or paused mid-run, each primary's figures side by side.

use crate::cluster::LocalCluster;
use crate::progress::Phase;
use crate::report::{Cell, Table};
use admit::fleet::{FailPolicy, FleetLimiter, FleetLimiterBuilder, FleetSecret};
use admit::{BucketConfig, Limiter};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const HEADING: &str =
    "fleet: one identity flooding 4 front doors, per-door limits vs shared through Redis";

/// What to run.
#[derive(Debug, Clone)]
pub struct Params {
    pub doors: u32,
    pub per_second: u32,
    pub burst: u32,
    pub run: Duration,
    pub lease_cap: u32,
    /// Share through a local Redis Cluster rather than one server.
    pub cluster: bool,
    /// With `cluster`: one primary killed or paused mid-run in a last flood.
    pub fault: Option<Fault>,
}

/// What befalls one primary in the fault run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// SIGKILL: its replica is promoted after the node timeout.
    Kill,
    /// SIGSTOP for [`PAUSE`], under the node timeout (no failover), then SIGCONT.
    Pause,
}

/// The fault run's node timeout when pausing: no failover starts within [`PAUSE`].
const PAUSE_NODE_TIMEOUT_MS: u64 = 5_000;
/// How long a paused primary stays stopped.
const PAUSE: Duration = Duration::from_millis(1_000);
/// Each of the fault runs (without, then with the fault).
const FAULT_RUN: Duration = Duration::from_millis(2_500);
/// When in the fault run the fault strikes.
const FAULT_AT: Duration = Duration::from_millis(500);
/// Identities of the fault runs: about four per primary.
const FAULT_IDENTITIES: usize = 12;

/// One primary's figures in one fault run.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFigures {
    pub address: String,
    pub fail_policy_decisions: u64,
    pub lease_p99: Duration,
    pub tokens_per_second: f64,
}

/// The fault runs: each primary's figures without the fault and with it.
#[derive(Debug, Clone)]
pub struct Faulted {
    pub fault: Fault,
    /// The primary the fault struck.
    pub failed: String,
    pub base: Vec<NodeFigures>,
    pub faulted: Vec<NodeFigures>,
}

/// One column.
#[derive(Debug, Clone)]
pub struct Run {
    pub label: String,
    pub attempts: u64,
    pub admitted: u64,
    pub per_door: Vec<u64>,
    pub redis_calls: Option<u64>,
    /// Lease requests Redis answered with at least one token (shared runs).
    pub leases: Option<u64>,
    /// The same flood shared through Redis with pacing off (shared runs).
    pub unpaced: Option<Unpaced>,
    pub elapsed: Duration,
}

/// The shared flood again with `pace_drained(false)`: a drained door asks again as soon as
/// Redis says a token is due.
#[derive(Debug, Clone)]
pub struct Unpaced {
    pub admitted: u64,
    pub redis_calls: u64,
    pub elapsed: Duration,
}

impl Params {
    /// `B(T) = burst + T × rate`.
    pub fn budget(&self, t: Duration) -> u64 {
        u64::from(self.burst) + (t.as_secs_f64() * f64::from(self.per_second)) as u64
    }

    /// The shared limiter's bound: `B(T) + N × lease_cap`.
    pub fn bound(&self, t: Duration) -> u64 {
        self.budget(t) + u64::from(self.doors) * u64::from(self.lease_cap)
    }

    /// The paced fleet's bound on Redis calls over `t` (docs/fleet.md, Sizing): per door 2
    /// per lease granted, 2 more (its first call, one in flight at the end), and one per pace
    /// while drained, the pace at least `N × interval` (less 1 ms for the clock's
    /// millisecond readings, at most 4 s) — the whole run counted as drained.
    pub fn call_bound(&self, leases: u64, t: Duration) -> u64 {
        let n = f64::from(self.doors);
        let pace_ms = (n * 1_000.0 / f64::from(self.per_second)).min(4_000.0) - 1.0;
        let per_door = 2.0 + (t.as_secs_f64() * 1_000.0 / pace_ms.max(1.0)).ceil();
        2 * leases + (n * per_door) as u64
    }
}

/// A `redis-server` of our own; killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn redis_binary() -> Result<String, String> {
    if std::path::Path::new("/usr/bin/redis-server").exists() {
        return Ok("/usr/bin/redis-server".into());
    }
    match Command::new("sh")
        .args(["-c", "command -v redis-server"])
        .output()
    {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).trim().into()),
        _ => Err(
            "fleet: no redis-server binary found; install it (Debian/Ubuntu: \
                  apt-get install -y redis-server; macOS: brew install redis) and run again"
                .into(),
        ),
    }
}

fn start_server() -> Result<Server, String> {
    let bin = redis_binary()?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("fleet: no free loopback port: {e}"))?
        .port();
    let child = Command::new(bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("fleet: redis-server did not start: {e}"))?;
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ping(port) {
        if Instant::now() > deadline {
            return Err("fleet: redis-server did not answer PING within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(server)
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Where the shared side's budget lives: one `redis-server`, or a local Redis Cluster; each
/// stopped on drop.
enum Store {
    Single(Server),
    Cluster(LocalCluster),
}

impl Store {
    fn start(cluster: bool, fault: Option<Fault>) -> Result<Self, String> {
        if cluster {
            let phase = Phase::start("fleet: starting a local Redis Cluster (3 + 3 nodes)");
            let timeout = match fault {
                Some(Fault::Pause) => PAUSE_NODE_TIMEOUT_MS,
                _ => crate::cluster::NODE_TIMEOUT_MS,
            };
            let started =
                LocalCluster::start_with(timeout).map_err(|e| format!("fleet --cluster: {e}"))?;
            phase.finish();
            Ok(Self::Cluster(started))
        } else {
            start_server().map(Self::Single)
        }
    }

    /// A fleet limiter's builder pointed at it.
    fn builder(&self) -> FleetLimiterBuilder {
        match self {
            Self::Single(server) => {
                FleetLimiter::builder().redis_url(format!("redis://127.0.0.1:{}/", server.port))
            }
            Self::Cluster(cluster) => FleetLimiter::builder().redis_cluster(cluster.urls()),
        }
    }

    fn phase(&self) -> &'static str {
        match self {
            Self::Single(_) => "fleet: shared through Redis (admit::fleet)",
            Self::Cluster(_) => "fleet: shared through a Redis Cluster (admit::fleet)",
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Self::Single(_) => "Redis-shared",
            Self::Cluster(_) => "Redis Cluster-shared",
        }
    }
}

/// Floods from `doors` threads, each deciding with `decide`, for `run`.
fn flood(params: &Params, decide: &(dyn Fn(usize) -> bool + Sync)) -> (Vec<u64>, u64, Duration) {
    let start = Instant::now();
    let per: Vec<(u64, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..params.doors as usize)
            .map(|door| {
                s.spawn(move || {
                    let (mut attempts, mut admitted) = (0u64, 0u64);
                    while start.elapsed() < params.run {
                        attempts += 1;
                        admitted += u64::from(decide(door));
                        std::thread::sleep(Duration::from_micros(20));
                    }
                    (attempts, admitted)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or((0, 0)))
            .collect()
    });
    let elapsed = start.elapsed();
    (
        per.iter().map(|p| p.1).collect(),
        per.iter().map(|p| p.0).sum(),
        elapsed,
    )
}

/// The floods, and the fault runs when `params.fault` is set.
pub fn run(params: &Params) -> Result<(Vec<Run>, Option<Faulted>), String> {
    let config = BucketConfig::per_second(params.per_second)
        .and_then(|c| c.with_burst(params.burst))
        .map_err(|e| format!("fleet: {e}"))?;

    let phase = Phase::start("fleet: no sharing (each door its own limit)");
    let doors: Vec<Limiter> = (0..params.doors)
        .map(|_| Limiter::builder().build([config]))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("fleet: {e}"))?;
    let (per_door, attempts, elapsed) = flood(params, &|door| {
        doors
            .get(door)
            .is_some_and(|l| l.try_acquire("flooder", 0).is_ok())
    });
    phase.finish();
    let alone = Run {
        label: "no sharing".into(),
        attempts,
        admitted: per_door.iter().sum(),
        per_door,
        redis_calls: None,
        leases: None,
        unpaced: None,
        elapsed,
    };

    let store = Store::start(params.cluster, params.fault)?;
    let phase = Phase::start(store.phase());
    let fleet = fleet_doors(params, &store, config, true)?;
    let (per_door, attempts, elapsed) = flood(params, &|door| {
        fleet
            .get(door)
            .is_some_and(|l| l.try_acquire("flooder", 0).is_ok())
    });
    phase.finish();
    let calls = fleet.iter().map(|l| l.stats().redis_calls).sum();
    let leases = fleet.iter().map(|l| l.stats().leases_granted).sum();
    drop(fleet);
    let unpaced = flood_unpaced(params, &store, config)?;
    let faulted = match (&store, params.fault) {
        (Store::Cluster(cluster), Some(fault)) => Some(fault_runs(params, cluster, fault)?),
        _ => None,
    };
    let label = store.label().into();
    drop(store);
    let shared = Run {
        label,
        attempts,
        admitted: per_door.iter().sum(),
        per_door,
        redis_calls: Some(calls),
        leases: Some(leases),
        unpaced: Some(unpaced),
        elapsed,
    };
    Ok((vec![alone, shared], faulted))
}

/// Two `fail_closed` limiters on `cluster` flooding [`FAULT_IDENTITIES`] identities.
fn fault_doors(params: &Params, cluster: &LocalCluster) -> Result<Vec<FleetLimiter>, String> {
    let config = BucketConfig::per_second(params.per_second)
        .and_then(|c| c.with_burst(params.burst))
        .map_err(|e| format!("fleet: {e}"))?;
    (0..2)
        .map(|_| {
            FleetLimiter::builder()
                .redis_cluster(cluster.urls())
                .secret(FleetSecret::from_bytes(*b"admit-sim fault!"))
                .processes(2)
                .lease_cap(params.lease_cap)
                .fail_policy(FailPolicy::Closed)
                .build([config])
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("fleet: {e}"))
}

/// Floods the identities from two limiters for [`FAULT_RUN`], calling `strike` at
/// `FAULT_AT` (and with `true` once the run is over); each primary's figures, summed over
/// both limiters.
fn fault_flood(
    doors: &[FleetLimiter],
    strike: &mut dyn FnMut(Duration) -> Result<(), String>,
) -> Result<Vec<NodeFigures>, String> {
    let start = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let struck = std::thread::scope(|s| {
        for door in doors {
            let done = &done;
            s.spawn(move || {
                let mut i = 0usize;
                // Relaxed: a stop flag; nothing else is published through it.
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = door.try_acquire(&format!("fault {}", i % FAULT_IDENTITIES), 0);
                    i = i.wrapping_add(1);
                    std::thread::sleep(Duration::from_micros(20));
                }
            });
        }
        let mut result = Ok(());
        while start.elapsed() < FAULT_RUN {
            if result.is_ok() {
                result = strike(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // Relaxed: see above.
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        result
    });
    struck?;
    let elapsed = start.elapsed().as_secs_f64();
    let mut nodes: Vec<NodeFigures> = Vec::new();
    for n in doors.iter().flat_map(FleetLimiter::node_stats) {
        let tokens = n.tokens_granted as f64 / elapsed;
        match nodes.iter_mut().find(|f| f.address == n.address) {
            Some(f) => {
                f.fail_policy_decisions += n.fail_policy_decisions;
                f.lease_p99 = f.lease_p99.max(n.lease_latency.p99);
                f.tokens_per_second += tokens;
            }
            None => nodes.push(NodeFigures {
                address: n.address,
                fail_policy_decisions: n.fail_policy_decisions,
                lease_p99: n.lease_latency.p99,
                tokens_per_second: tokens,
            }),
        }
    }
    nodes.sort_by(|a, b| a.address.cmp(&b.address));
    Ok(nodes)
}

/// The fault runs on `cluster`: without the fault, then with `fault` on the first primary
/// the first run leased from.
fn fault_runs(params: &Params, cluster: &LocalCluster, fault: Fault) -> Result<Faulted, String> {
    let phase = Phase::start("fleet: twelve identities over every primary, no fault");
    let doors = fault_doors(params, cluster)?;
    let base = fault_flood(&doors, &mut |_| Ok(()))?;
    drop(doors);
    phase.finish();
    let failed = base
        .iter()
        .find(|n| n.tokens_per_second > 0.0)
        .map(|n| n.address.clone())
        .ok_or("fleet --fault: no primary granted a lease")?;
    let port: u16 = failed
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .ok_or_else(|| format!("fleet --fault: no port in {failed}"))?;
    let phase = Phase::start(match fault {
        Fault::Kill => "fleet: the same, one primary killed mid-run",
        Fault::Pause => "fleet: the same, one primary paused mid-run",
    });
    let doors = fault_doors(params, cluster)?;
    let (mut stopped, mut resumed) = (false, false);
    let faulted = fault_flood(&doors, &mut |at| {
        if !stopped && at >= FAULT_AT {
            stopped = true;
            let signal = match fault {
                Fault::Kill => "-KILL",
                Fault::Pause => "-STOP",
            };
            if !cluster.signal(port, signal) {
                return Err(format!(
                    "fleet --fault: could not signal the node on :{port}"
                ));
            }
        }
        if fault == Fault::Pause && stopped && !resumed && at >= FAULT_AT + PAUSE {
            resumed = true;
            if !cluster.signal(port, "-CONT") {
                return Err(format!(
                    "fleet --fault: could not resume the node on :{port}"
                ));
            }
        }
        Ok(())
    });
    // A paused node resumes whatever happened (the cluster's drop kills it anyway).
    if fault == Fault::Pause && stopped && !resumed {
        let _ = cluster.signal(port, "-CONT");
    }
    drop(doors);
    phase.finish();
    Ok(Faulted {
        fault,
        failed,
        base,
        faulted: faulted?,
    })
}

/// The fault runs' table: a column per primary (the struck one first, a promoted replica
/// last), rows without and with the fault.
pub fn fault_table(faulted: &Faulted) -> Table {
    let mut addresses: Vec<String> = vec![faulted.failed.clone()];
    for n in faulted.base.iter().chain(&faulted.faulted) {
        if !addresses.contains(&n.address) {
            addresses.push(n.address.clone());
        }
    }
    let label = |a: &String| {
        if *a == faulted.failed {
            format!(
                "{a} ({})",
                match faulted.fault {
                    Fault::Kill => "killed",
                    Fault::Pause => "paused",
                }
            )
        } else if faulted.base.iter().any(|n| n.address == *a) {
            format!("{a} (healthy)")
        } else {
            format!("{a} (promoted)")
        }
    };
    let mut t = Table::new(
        "fleet_fault",
        "fleet --cluster: one primary's fault stays that primary's",
        addresses.iter().map(label).collect(),
    );
    let cells = |run: &[NodeFigures], f: &dyn Fn(&NodeFigures) -> Cell| {
        addresses
            .iter()
            .map(|a| {
                run.iter()
                    .find(|n| n.address == *a)
                    .map_or_else(|| Cell::Text("none".into()), f)
            })
            .collect::<Vec<_>>()
    };
    type Figure = fn(&NodeFigures) -> Cell;
    let rows: [(&'static str, &'static str, bool, Figure); 6] = [
        (
            "no fault: fail-policy decisions",
            "base_fail_policy_decisions",
            false,
            |n| Cell::Count(n.fail_policy_decisions),
        ),
        (
            "fault: fail-policy decisions",
            "fault_fail_policy_decisions",
            true,
            |n| Cell::Count(n.fail_policy_decisions),
        ),
        ("no fault: lease p99", "base_lease_p99", false, |n| {
            Cell::Time(n.lease_p99)
        }),
        ("fault: lease p99", "fault_lease_p99", true, |n| {
            Cell::Time(n.lease_p99)
        }),
        (
            "no fault: tokens leased per second",
            "base_tokens_per_second",
            false,
            |n| Cell::Count(n.tokens_per_second.round() as u64),
        ),
        (
            "fault: tokens leased per second",
            "fault_tokens_per_second",
            true,
            |n| Cell::Count(n.tokens_per_second.round() as u64),
        ),
    ];
    for (label, key, with_fault, figure) in rows {
        let run = if with_fault {
            &faulted.faulted
        } else {
            &faulted.base
        };
        t.row(label, key, cells(run, &figure));
    }
    t.note(format!(
        "two fail_closed limiters flood {FAULT_IDENTITIES} identities for {:.1} s each run; \
         the fault at {:.1} s ({})",
        FAULT_RUN.as_secs_f64(),
        FAULT_AT.as_secs_f64(),
        match faulted.fault {
            Fault::Kill => "SIGKILL; its replica is promoted after the node timeout".to_owned(),
            Fault::Pause => format!(
                "SIGSTOP for {:.1} s, under the {:.0} s node timeout, then SIGCONT",
                PAUSE.as_secs_f64(),
                PAUSE_NODE_TIMEOUT_MS as f64 / 1_000.0
            ),
        }
    ));
    t
}

/// The shared flood with pacing off, on another identity of the same server.
/// One fleet limiter per door, sharing the budget through `store`.
fn fleet_doors(
    params: &Params,
    store: &Store,
    config: BucketConfig,
    paced: bool,
) -> Result<Vec<FleetLimiter>, String> {
    (0..params.doors)
        .map(|_| {
            store
                .builder()
                .secret(FleetSecret::from_bytes(*b"admit-sim fleet!"))
                .processes(params.doors)
                .lease_cap(params.lease_cap)
                .fail_policy(FailPolicy::Closed)
                .pace_drained(paced)
                .build([config])
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("fleet: {e}"))
}

fn flood_unpaced(params: &Params, store: &Store, config: BucketConfig) -> Result<Unpaced, String> {
    let phase = Phase::start("fleet: shared through Redis, pacing off");
    let fleet = fleet_doors(params, store, config, false)?;
    let (per_door, _, elapsed) = flood(params, &|door| {
        fleet
            .get(door)
            .is_some_and(|l| l.try_acquire("unpaced flooder", 0).is_ok())
    });
    phase.finish();
    Ok(Unpaced {
        admitted: per_door.iter().sum(),
        redis_calls: fleet.iter().map(|l| l.stats().redis_calls).sum(),
        elapsed,
    })
}

/// The flood rows: Redis calls per second with pacing and without, beside admissions and
/// the bounds.
fn pacing_rows(t: &mut Table, params: &Params, runs: &[Run]) {
    let each = |f: &dyn Fn(&Run) -> Option<Cell>| {
        runs.iter()
            .map(|r| f(r).unwrap_or_else(|| Cell::Text("none".into())))
            .collect::<Vec<_>>()
    };
    let per_second = |calls: u64, t: Duration| {
        Cell::Count((calls as f64 / t.as_secs_f64().max(1e-3)).round() as u64)
    };
    t.row(
        "flood, paced: Redis calls per second",
        "redis_calls_per_second",
        each(&|r| r.redis_calls.map(|c| per_second(c, r.elapsed))),
    );
    t.row(
        "flood, paced: call bound per second",
        "redis_call_bound_per_second",
        each(&|r| {
            r.leases
                .map(|l| per_second(params.call_bound(l, r.elapsed), r.elapsed))
        }),
    );
    t.row(
        "flood, unpaced: Redis calls per second",
        "unpaced_redis_calls_per_second",
        each(&|r| {
            r.unpaced
                .as_ref()
                .map(|u| per_second(u.redis_calls, u.elapsed))
        }),
    );
    t.row(
        "flood, unpaced: admitted (bound)",
        "unpaced_admitted",
        each(&|r| {
            r.unpaced
                .as_ref()
                .map(|u| Cell::Text(format!("{} ({})", u.admitted, params.bound(u.elapsed))))
        }),
    );
}

pub fn table(params: &Params, runs: &[Run]) -> Table {
    let mut t = Table::new(
        "fleet",
        HEADING,
        runs.iter().map(|r| r.label.clone()).collect(),
    );
    let each = |f: &dyn Fn(&Run) -> Cell| runs.iter().map(f).collect::<Vec<_>>();
    t.row("attempts", "attempts", each(&|r| Cell::Count(r.attempts)));
    t.row("admitted", "admitted", each(&|r| Cell::Count(r.admitted)));
    t.row(
        "budget B(T) = burst + T × rate",
        "budget",
        each(&|r| Cell::Count(params.budget(r.elapsed))),
    );
    t.row(
        "bound B(T) + N × lease cap",
        "bound",
        each(&|r| Cell::Count(params.bound(r.elapsed))),
    );
    t.row(
        "admitted / budget",
        "admitted_per_budget_percent",
        each(&|r| {
            Cell::Text(format!(
                "{:.0} %",
                100.0 * r.admitted as f64 / params.budget(r.elapsed) as f64
            ))
        }),
    );
    t.row(
        "Redis calls",
        "redis_calls",
        each(&|r| {
            r.redis_calls
                .map_or_else(|| Cell::Text("none".into()), Cell::Count)
        }),
    );
    t.row(
        "admitted per door",
        "admitted_per_door",
        each(&|r| Cell::Text(format!("{:?}", r.per_door))),
    );
    pacing_rows(&mut t, params, runs);
    t.note(format!(
        "{} doors, {}/s in bursts of {}, lease cap {}: each door's own limit lets ~{}× the budget through; \
         shared through Redis, at most the bound",
        params.doors, params.per_second, params.burst, params.lease_cap, params.doors
    ));
    t
}
