//! Where the budgets live: the Redis deployment the lease thread talks to, behind one
//! seam. The worker knows two operations only — connect, and lease one key — so that a
//! second kind of deployment is a variant here, not a change to the protocol.
//!
//! # Redis Cluster (feature `redis-cluster`)
//!
//! The `redis` crate's synchronous cluster client: it maps slots to primaries
//! (`CLUSTER SLOTS`), sends `EVALSHA` to the primary of the key's slot (the key is the
//! script's only key: one slot, so `CROSSSLOT` cannot happen), and follows `MOVED` (refresh
//! the slot map, retry) and `ASK` (`ASKING`, retry on the named node) itself. Its retries are
//! bounded here, not by its defaults (16 retries, waits from 1.28 s): at most
//! [`CLUSTER_RETRIES`] retries, each wait at most `io_timeout`, every connect and every reply
//! bounded by `io_timeout`. `NOSCRIPT` is answered per node: the new owner of a migrated slot,
//! or a replica promoted by a failover, may never have seen the script, so the link sends it
//! in full (`EVAL`) to the same slot, which also caches it there.
//!
//! What the cluster could not serve after those retries (a slot whose primary is dead and not
//! yet replaced: `CLUSTERDOWN`, `TRYAGAIN`, a refused connection, a stale slot map) comes
//! back as an I/O error: the worker calls Redis down, decisions follow the fail policy, and
//! the next connection reads a fresh slot map.

use super::script::GCRA_LEASE;
use super::ClassBudget;
use std::time::Duration;

/// Retries of one cluster request after a redirect, a `TRYAGAIN`/`CLUSTERDOWN` or a dropped
/// node connection. Two: a `MOVED` (slot map refreshed) then an `ASK` during a migration is
/// the longest chain a healthy cluster answers with.
#[cfg(feature = "redis-cluster")]
pub(crate) const CLUSTER_RETRIES: u32 = 2;

/// The deployment named by the builder.
pub(crate) enum Store {
    /// One server (or a proxy in front of several).
    Single(redis::Client),
    /// A Redis Cluster, reached through any of its nodes.
    #[cfg(feature = "redis-cluster")]
    Cluster(redis::cluster::ClusterClient),
}

/// A connection made ready: timeouts set, the script loaded once.
pub(crate) enum Link {
    Single(redis::Connection),
    /// Boxed: the cluster connection (a slot map and a connection per node) is four times
    /// the size of a single one.
    #[cfg(feature = "redis-cluster")]
    Cluster(Box<redis::cluster::ClusterConnection>),
}

/// What the script answered: tokens granted, microseconds until one more is due, and
/// whether the key was created (0 no, 1 full, 2 drained; see `script.rs`).
pub(crate) type Reply = (u64, u64, u64);

impl Store {
    /// The store named by `url`; nothing is contacted yet.
    pub(crate) fn open(url: &str) -> redis::RedisResult<Self> {
        redis::Client::open(url).map(Self::Single)
    }

    /// The cluster reached through `nodes` (any of them will do; the client reads the rest
    /// from the cluster), every connect, reply and retry wait bounded by `timeout`. Nothing
    /// is contacted yet.
    #[cfg(feature = "redis-cluster")]
    pub(crate) fn open_cluster(nodes: &[String], timeout: Duration) -> redis::RedisResult<Self> {
        let wait_ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(2);
        redis::cluster::ClusterClientBuilder::new(nodes.iter().map(String::as_str))
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(CLUSTER_RETRIES)
            // A wait drawn from [1 ms, min(10 ms × 2^retry, io_timeout)).
            .min_retry_wait(1)
            .max_retry_wait(wait_ms)
            .retry_wait_formula(10, 2)
            .build()
            .map(Self::Cluster)
    }

    /// A new connection, every socket operation bounded by `timeout`.
    pub(crate) fn connect(&self, timeout: Duration) -> redis::RedisResult<Link> {
        match self {
            Self::Single(client) => {
                let mut con = client.get_connection_with_timeout(timeout)?;
                con.set_read_timeout(Some(timeout))?;
                con.set_write_timeout(Some(timeout))?;
                redis::Script::new(GCRA_LEASE).load(&mut con)?;
                Ok(Link::Single(con))
            }
            #[cfg(feature = "redis-cluster")]
            Self::Cluster(client) => {
                // Connects to one reachable node, reads the slot map and connects to each
                // primary, each connect bounded by the client's `connection_timeout`. No
                // `SCRIPT LOAD` (it would go to every primary, and a new one after a
                // failover would not have it anyway): the first `EVALSHA` on a node without
                // the script is answered `NOSCRIPT` and sent as `EVAL` (`Link::lease`).
                let con = client.get_connection().map_err(unavailable)?;
                con.set_read_timeout(Some(timeout))?;
                con.set_write_timeout(Some(timeout))?;
                Ok(Link::Cluster(Box::new(con)))
            }
        }
    }
}

impl Link {
    /// Runs the lease script for `key` (`EVALSHA`, `EVAL` on `NOSCRIPT`).
    pub(crate) fn lease(
        &mut self,
        script: &redis::Script,
        key: &str,
        class: ClassBudget,
        asked: u32,
        restart_drains: bool,
    ) -> redis::RedisResult<Reply> {
        match self {
            Self::Single(con) => {
                let mut invocation = script.key(key);
                invocation
                    .arg(class.interval_us)
                    .arg(class.burst)
                    .arg(asked)
                    .arg(u8::from(restart_drains));
                invocation.invoke(con)
            }
            #[cfg(feature = "redis-cluster")]
            Self::Cluster(con) => {
                let call = |command: &str, body: &str| {
                    let mut cmd = redis::cmd(command);
                    cmd.arg(body)
                        .arg(1)
                        .arg(key)
                        .arg(class.interval_us)
                        .arg(class.burst)
                        .arg(asked)
                        .arg(u8::from(restart_drains));
                    cmd
                };
                // The client routes both by the key's slot (the first key of EVAL/EVALSHA).
                let con = con.as_mut();
                match call("EVALSHA", script.get_hash()).query(con) {
                    Err(e)
                        if e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                    {
                        call("EVAL", GCRA_LEASE).query(con)
                    }
                    answer => answer,
                }
                .map_err(unavailable)
            }
        }
    }
}

/// Turns what a cluster could not serve (after the client's bounded retries) into an I/O
/// error, which the worker treats as Redis being down, rather than a fault of the key: the
/// slot's primary is dead or changing, not the key's value wrong. Script errors
/// (`WRONGTYPE`, a value that is not a bucket) stay key faults.
#[cfg(feature = "redis-cluster")]
fn unavailable(e: redis::RedisError) -> redis::RedisError {
    use redis::{ErrorKind, ServerErrorKind};
    let slot_unserved = e.is_cluster_error()
        || matches!(
            e.kind(),
            ErrorKind::Server(ServerErrorKind::MasterDown)
                | ErrorKind::Server(ServerErrorKind::ReadOnly)
                | ErrorKind::Server(ServerErrorKind::BusyLoading)
                | ErrorKind::ClusterConnectionNotFound
                | ErrorKind::Client
        );
    if slot_unserved {
        std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            format!("the Redis Cluster cannot serve this slot now: {e}"),
        )
        .into()
    } else {
        e
    }
}
