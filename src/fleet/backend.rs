//! Where the budgets live: the Redis deployment the lease thread talks to, behind one
//! seam. The worker knows two operations only — connect, and lease one key — so that a
//! second kind of deployment is a variant here, not a change to the protocol. A single
//! server is one connection, called in turn; a Redis Cluster is a thread per primary with
//! its own connection, which the lease thread hands requests to and never waits on
//! (`cluster.rs`).
//!
//! Connecting is bounded by one `io_timeout` in all: the connect, its handshake and the
//! `SCRIPT LOAD` share one deadline (a single server); the seed nodes are asked for the slot
//! map all at once, the first answer kept (a cluster). So `FleetLimiterBuilder::build` waits
//! at most about one `io_timeout`, however many seeds hang.

use super::script::GCRA_LEASE;
use super::ClassBudget;
use std::time::{Duration, Instant};

/// `info` without the client's `CLIENT SETINFO` pair on connect: two more round trips, each
/// of which the client waits out on its own against a paused server (a connect then took
/// two timeouts before the script load began).
pub(crate) fn quiet(info: redis::ConnectionInfo) -> redis::ConnectionInfo {
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    info.set_redis_settings(settings)
}

/// The deployment named by the builder.
pub(crate) enum Store {
    /// One server (or a proxy in front of several).
    Single(redis::Client),
    /// A Redis Cluster, reached through any of its seed nodes.
    #[cfg(feature = "redis-cluster")]
    Cluster(Vec<redis::ConnectionInfo>),
}

/// A connection made ready: timeouts set, the script loaded once.
pub(crate) enum Link {
    Single(redis::Connection),
    /// Boxed: the slot map and the node threads' channels.
    #[cfg(feature = "redis-cluster")]
    Cluster(Box<super::cluster::ClusterLink>),
}

/// What the script answered: tokens granted, microseconds until one more is due, and
/// whether the key was created (0 no, 1 full, 2 drained; see `script.rs`).
pub(crate) type Reply = (u64, u64, u64);

impl Store {
    /// Whether this is a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        !matches!(self, Self::Single(_))
    }

    /// The store named by `url`; nothing is contacted yet.
    pub(crate) fn open(url: &str) -> redis::RedisResult<Self> {
        let info = redis::IntoConnectionInfo::into_connection_info(url)?;
        redis::Client::open(quiet(info)).map(Self::Single)
    }

    /// The cluster reached through `nodes` (any of them will do: the slot map names the
    /// rest). Nothing is contacted yet.
    #[cfg(feature = "redis-cluster")]
    pub(crate) fn open_cluster(nodes: &[String]) -> redis::RedisResult<Self> {
        nodes
            .iter()
            .map(|n| redis::IntoConnectionInfo::into_connection_info(n.as_str()).map(quiet))
            .collect::<redis::RedisResult<Vec<_>>>()
            .map(Self::Cluster)
    }

    /// A new connection, made within one `timeout` in all; every later socket operation
    /// bounded by `timeout`.
    pub(crate) fn connect(&self, timeout: Duration) -> redis::RedisResult<Link> {
        let deadline = Instant::now() + timeout;
        let left = || {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                Err(redis::RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "Redis did not answer within io_timeout",
                )))
            } else {
                Ok(left)
            }
        };
        match self {
            Self::Single(client) => {
                // The connect and its handshake within what is left, then the script load.
                let mut con = client.get_connection_with_timeout(left()?)?;
                con.set_write_timeout(Some(left()?))?;
                con.set_read_timeout(Some(left()?))?;
                redis::Script::new(GCRA_LEASE).load(&mut con)?;
                con.set_read_timeout(Some(timeout))?;
                con.set_write_timeout(Some(timeout))?;
                Ok(Link::Single(con))
            }
            #[cfg(feature = "redis-cluster")]
            Self::Cluster(seeds) => {
                // The slot map from the first seed to answer, all asked at once; no `SCRIPT
                // LOAD` (a primary promoted later would not have it anyway): a node without
                // the script answers `NOSCRIPT` and gets the call as `EVAL`.
                super::cluster::ClusterLink::connect(seeds, left()?)
                    .map(|link| Link::Cluster(Box::new(link)))
            }
        }
    }
}

/// Runs the lease script for `key` on a single server (`EVALSHA`, `EVAL` on `NOSCRIPT`).
pub(crate) fn lease(
    con: &mut redis::Connection,
    script: &redis::Script,
    key: &str,
    class: ClassBudget,
    asked: u32,
    restart_drains: bool,
) -> redis::RedisResult<Reply> {
    let mut invocation = script.key(key);
    invocation
        .arg(class.interval_us)
        .arg(class.burst)
        .arg(asked)
        .arg(u8::from(restart_drains));
    invocation.invoke(con)
}
