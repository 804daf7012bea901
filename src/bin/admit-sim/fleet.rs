//! Scenario 5: four front doors and one flooding identity spread across them, each door with
//! its own limit (N times the budget gets through) beside the budget shared through Redis
//! with `admit::fleet` (at most the bound). Starts its own `redis-server` on a free loopback
//! port, persistence off, and stops it at the end; with `--cluster`, a local Redis Cluster of
//! 3 primaries and 3 replicas instead (`cluster.rs`).

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
    fn start(cluster: bool) -> Result<Self, String> {
        if cluster {
            let phase = Phase::start("fleet: starting a local Redis Cluster (3 + 3 nodes)");
            let started = LocalCluster::start().map_err(|e| format!("fleet --cluster: {e}"))?;
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

pub fn run(params: &Params) -> Result<Vec<Run>, String> {
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

    let store = Store::start(params.cluster)?;
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
    Ok(vec![alone, shared])
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
