//! Where the budgets live: the Redis deployment the lease thread talks to, behind one
//! seam. The worker knows two operations only — connect, and lease one key — so that a
//! second kind of deployment is a variant here, not a change to the protocol.

use super::script::GCRA_LEASE;
use super::ClassBudget;
use std::time::Duration;

/// The deployment named by the builder's URL.
pub(crate) enum Store {
    /// One server (or a proxy in front of several).
    Single(redis::Client),
}

/// A connection made ready: timeouts set, the script loaded once.
pub(crate) enum Link {
    Single(redis::Connection),
}

/// What the script answered: tokens granted, microseconds until one more is due, and
/// whether the key was created (0 no, 1 full, 2 drained; see `script.rs`).
pub(crate) type Reply = (u64, u64, u64);

impl Store {
    /// The store named by `url`; nothing is contacted yet.
    pub(crate) fn open(url: &str) -> redis::RedisResult<Self> {
        redis::Client::open(url).map(Self::Single)
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
        let mut invocation = script.key(key);
        invocation
            .arg(class.interval_us)
            .arg(class.burst)
            .arg(asked)
            .arg(u8::from(restart_drains));
        match self {
            Self::Single(con) => invocation.invoke(con),
        }
    }
}
