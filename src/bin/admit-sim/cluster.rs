//! A local Redis Cluster of our own: 3 primaries and 3 replicas of `redis-server
//! --cluster-enabled yes --cluster-require-full-coverage no` on free loopback ports (each
//! node's cluster bus, port + 10000, free too), persistence off, joined with `redis-cli
//! --cluster create ... --cluster-replicas 1`,
//! every node killed and the directory of their `nodes.conf` files removed on drop (also when
//! a panic unwinds). Standard library only: `admit-sim fleet --cluster` runs on it, and the
//! `fleet` tests include this file for their cluster (`src/fleet/tests/cluster.rs`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Nodes: 3 primaries, each with one replica.
pub const NODES: usize = 6;
/// How long a node may be unreachable before the others call it failing and its replica
/// takes over: short, so that a failover completes in about two seconds.
pub const NODE_TIMEOUT_MS: u64 = 1000;
/// The most the whole start may take.
const START_WITHIN: Duration = Duration::from_secs(20);

/// What to print when a binary is missing.
pub const INSTALL: &str = "install it (Debian/Ubuntu: apt-get install -y redis-server, which \
                           brings redis-cli; macOS: brew install redis) and run again";

pub struct LocalCluster {
    nodes: Vec<(u16, Option<Child>)>,
    dir: PathBuf,
}

/// Where `name` is (`/usr/bin` first, then `PATH`), or why not.
pub fn binary(name: &str) -> Result<String, String> {
    let usr = format!("/usr/bin/{name}");
    if std::path::Path::new(&usr).exists() {
        return Ok(usr);
    }
    match Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
    {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).trim().into()),
        _ => Err(format!("no {name} binary found; {INSTALL}")),
    }
}

/// `n` free loopback ports whose cluster bus port (+10000) is free as well.
fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let mut held = Vec::new();
    let mut ports = Vec::new();
    for _ in 0..200 {
        if ports.len() == n {
            break;
        }
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free loopback port: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        if let Ok(bus_listener) = TcpListener::bind(("127.0.0.1", bus)) {
            ports.push(port);
            held.push(listener);
            held.push(bus_listener);
        }
    }
    if ports.len() < n {
        return Err(format!("found {} of {n} free port pairs", ports.len()));
    }
    Ok(ports)
}

/// One command, inline, to the node on `port`; its reply (a status, an error or a bulk
/// string) as text.
pub fn query(port: u16, command: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("{port}: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    s.write_all(format!("{command}\r\n").as_bytes())
        .map_err(|e| format!("{port}: {e}"))?;
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .map_err(|e| format!("{port}: {e}"))?;
    let line = line.trim_end();
    match line.split_at_checked(1) {
        Some(("+", rest)) | Some((":", rest)) => Ok(rest.to_owned()),
        Some(("-", rest)) => Err(format!("{port}: {rest}")),
        Some(("$", len)) => {
            let len: usize = len.parse().map_err(|_| format!("{port}: bad reply"))?;
            let mut body = vec![0u8; len + 2];
            reader
                .read_exact(&mut body)
                .map_err(|e| format!("{port}: {e}"))?;
            body.truncate(len);
            Ok(String::from_utf8_lossy(&body).into_owned())
        }
        _ => Err(format!("{port}: unexpected reply {line:?}")),
    }
}

/// Whether the node on `port` sees the whole cluster healthy (state ok, every slot served,
/// every node known) and, if it is a replica, has synced with its primary.
fn healthy(port: u16) -> bool {
    let cluster = query(port, "CLUSTER INFO").is_ok_and(|info| {
        info.contains("cluster_state:ok")
            && info.contains("cluster_slots_ok:16384")
            && info.contains(&format!("cluster_known_nodes:{NODES}"))
    });
    cluster
        && query(port, "INFO replication").is_ok_and(|info| {
            info.contains("role:master") || info.contains("master_link_status:up")
        })
}

impl LocalCluster {
    /// Starts the nodes, creates the cluster and waits (at most 20 s in all) until every
    /// node sees it healthy. `Err` says why not (a missing binary: how to install it).
    #[allow(dead_code)] // The fleet tests; the simulation picks its node timeout.
    pub fn start() -> Result<Self, String> {
        Self::start_with(NODE_TIMEOUT_MS)
    }

    /// As [`LocalCluster::start`], with a `cluster-node-timeout` of `node_timeout_ms`: how
    /// long a node may hang before the others fail it over.
    pub fn start_with(node_timeout_ms: u64) -> Result<Self, String> {
        let server = binary("redis-server")?;
        let cli = binary("redis-cli")?;
        let started = Instant::now();
        let dir = std::env::temp_dir().join(format!(
            "admit-cluster-{}-{:016x}",
            std::process::id(),
            rand_seed()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cluster = LocalCluster {
            nodes: Vec::new(),
            dir,
        };
        for port in free_ports(NODES)? {
            let conf = cluster.dir.join(format!("nodes-{port}.conf"));
            let child = Command::new(&server)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(&conf)
                .args(["--cluster-node-timeout", &node_timeout_ms.to_string()])
                // The slots of a failed primary stop being served until its replica takes
                // over; every other slot goes on (the default, `yes`, refuses every slot on
                // every node meanwhile).
                .args(["--cluster-require-full-coverage", "no"])
                // A replica's first sync at once, not after the default 5 s delay: a
                // replica that never synced cannot take over.
                .args(["--repl-diskless-sync-delay", "0"])
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(&cluster.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("redis-server did not start: {e}"))?;
            cluster.nodes.push((port, Some(child)));
        }
        for port in cluster.ports() {
            while query(port, "PING").is_err() {
                if started.elapsed() > START_WITHIN {
                    return Err(format!("redis-server on {port} did not answer PING"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let out = Command::new(&cli)
            .args(["--cluster", "create"])
            .args(cluster.ports().iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("redis-cli did not run: {e}"))?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stdout);
            let tail: Vec<&str> = said.lines().rev().take(5).collect();
            return Err(format!("redis-cli --cluster create failed: {tail:?}"));
        }
        while !cluster.ports().into_iter().all(healthy) {
            if started.elapsed() > START_WITHIN {
                return Err("the cluster did not reach cluster_state:ok within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(cluster)
    }

    /// Every node's port, in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|(port, _)| *port).collect()
    }

    /// Seed URLs for a cluster client: every node.
    pub fn urls(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// SIGKILL the node on `port` (the failover test's fault); it is not restarted.
    #[allow(dead_code)] // The fleet tests' failover; the simulation signals its node.
    pub fn kill(&mut self, port: u16) {
        for (p, child) in &mut self.nodes {
            if *p == port {
                if let Some(mut c) = child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
    }
}

impl LocalCluster {
    /// The process id of the node on `port`, while it runs.
    #[allow(dead_code)] // The fleet tests' check that every server stopped.
    pub fn pid(&self, port: u16) -> Option<u32> {
        self.nodes
            .iter()
            .find(|(p, _)| *p == port)
            .and_then(|(_, c)| c.as_ref().map(Child::id))
    }

    /// Sends `signal` (`-STOP`, `-CONT`) to the node on `port`; whether it was delivered.
    pub fn signal(&self, port: u16, signal: &str) -> bool {
        self.pid(port).is_some_and(|pid| {
            Command::new("kill")
                .args([signal, &pid.to_string()])
                .status()
                .is_ok_and(|s| s.success())
        })
    }

    /// Whether every node this cluster started has exited (after `drop`, for the tests).
    #[allow(dead_code)] // The fleet tests' check that every server stopped.
    pub fn all_stopped(pids: &[u32]) -> bool {
        pids.iter()
            .all(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    }
}

/// A few bits that differ between two starts in one process (the directory name).
fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.nodes {
            if let Some(mut c) = child.take() {
                // A paused node dies of SIGKILL as well; resumed first all the same.
                let _ = Command::new("kill")
                    .args(["-CONT", &c.id().to_string()])
                    .status();
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
