//! One rate limit shared by a fleet of processes through Redis (feature `redis`).
//!
//! ```sh
//! cargo run --example fleet --features redis                          # starts its own redis-server
//! cargo run --example fleet --features redis -- redis://10.0.0.5:6379/ # or uses yours
//! ```
//!
//! Two `FleetLimiter`s stand for two replicas of one service (in production, one per process,
//! each built with `.processes(N)`); both draw on one budget per client kept in Redis, 20
//! requests per second in bursts of 20. Each decides locally, lock-free, from tokens it leased
//! in batches: no decision waits on the network. For one second both replicas admit as fast
//! as they are asked; together they admit about the budget (20 + 20 × 1 s), not twice it.
//! The bound, with `lease_cap` tokens of slack per replica, is in `admit::fleet`.
//!
//! Without a URL the example starts a `redis-server` of its own on a free loopback port
//! (persistence off) and stops it at the end; if none is installed it says how to install one
//! and exits 0.

use admit::fleet::{FailPolicy, FleetLimiter, FleetSecret};
use admit::BucketConfig;
use std::error::Error;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A `redis-server` of this program's own, stopped when dropped.
struct OwnRedis {
    child: Child,
    url: String,
}

impl OwnRedis {
    /// Starts one on a free loopback port, or `None` if no `redis-server` is installed.
    fn start() -> Result<Option<Self>, Box<dyn Error>> {
        // A free port: bind port 0, read what the OS chose, let it go.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let spawned = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let server = Self {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        server.wait_for_ping(port)?;
        Ok(Some(server))
    }

    /// Waits (at most 5 s) until the server answers `PING`.
    fn wait_for_ping(&self, port: u16) -> Result<(), Box<dyn Error>> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
                stream.set_read_timeout(Some(Duration::from_millis(200)))?;
                let mut reply = [0u8; 7];
                if stream.write_all(b"PING\r\n").is_ok()
                    && stream.read_exact(&mut reply).is_ok()
                    && &reply == b"+PONG\r\n"
                {
                    return Ok(());
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        Err("redis-server did not answer PING within 5 s".into())
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One replica's limiter: every replica is built with the same URL, secret and budgets.
fn replica(url: &str) -> Result<FleetLimiter, Box<dyn Error>> {
    Ok(FleetLimiter::builder()
        .redis_url(url)
        // Shared by every replica (from your secret store in production): it keys the
        // identities' Redis keys, so Redis never sees a client's name.
        .secret(FleetSecret::from_bytes(*b"example fleet!!!"))
        .processes(2)
        // Few tokens leased at a time: a tight bound for a small budget.
        .lease_cap(4)
        // While Redis is unreachable, each replica admits 1/N of the budget on its own.
        .fail_policy(FailPolicy::Local)
        // This example's server starts empty on purpose: its keys start full, not drained.
        .restart_drains(false)
        .build([BucketConfig::per_second(20)?])?)
}

fn main() -> Result<(), Box<dyn Error>> {
    let given = std::env::args().nth(1);
    let own = match &given {
        Some(_) => None,
        None => match OwnRedis::start()? {
            Some(own) => Some(own),
            None => {
                println!(
                    "no redis-server on PATH: install one (Debian/Ubuntu: `apt-get install \
                     redis-server`, macOS: `brew install redis`) or pass a redis:// URL"
                );
                return Ok(());
            }
        },
    };
    let url = match (&given, &own) {
        (Some(url), _) => url.clone(),
        (None, Some(own)) => own.url.clone(),
        (None, None) => return Ok(()),
    };
    println!("redis at {url}");

    let replicas = [replica(&url)?, replica(&url)?];
    let run = Duration::from_secs(1);
    let start = Instant::now();
    // (admitted, refused) per replica.
    let mut counts = [(0u32, 0u32); 2];
    // Both replicas are asked for the same client every millisecond, far over its budget.
    while start.elapsed() < run {
        for (fleet, (admitted, refused)) in replicas.iter().zip(counts.iter_mut()) {
            match fleet.try_acquire("client-7", 0) {
                Ok(()) => *admitted += 1,
                Err(_) => *refused += 1,
            }
        }
        thread::sleep(Duration::from_millis(1));
    }
    let elapsed = start.elapsed();
    for (i, (fleet, (admitted, refused))) in replicas.iter().zip(counts).enumerate() {
        let stats = fleet.stats();
        println!(
            "replica {i}: admitted {admitted:>3}, refused {refused:>4}, {} Redis calls, {} tokens \
             leased",
            stats.redis_calls, stats.tokens_granted
        );
    }
    let total: u32 = counts.iter().map(|(admitted, _)| admitted).sum();
    // burst + rate × elapsed, plus each replica's lease slack and what it admitted on its own
    // while Redis was slow or down (the bound in `admit::fleet`).
    let fallback: u64 = replicas.iter().map(|f| f.stats().fallback_admissions).sum();
    let budget = 20.0 + 20.0 * elapsed.as_secs_f64();
    let bound = budget + 2.0 * 4.0 + fallback as f64;
    println!(
        "together: {total} admitted in {:.2} s; the budget is {budget:.0}, the bound {bound:.0}",
        elapsed.as_secs_f64()
    );
    if f64::from(total) > bound + 1.0 {
        return Err(format!("{total} admitted, over the bound of {bound:.0}").into());
    }
    Ok(())
}
