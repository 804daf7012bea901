//! What a fleet limiter does when Redis cannot answer, and the words it refuses in.

use std::time::Duration;

/// What decisions do while Redis is unreachable, slow (timed out) or answers a key with
/// something unexpected. Never unlimited: see the table in `docs/fleet.md`.
///
/// ```
/// use admit::fleet::FailPolicy;
///
/// assert_eq!(FailPolicy::default(), FailPolicy::Local);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailPolicy {
    /// `fail_local`: each process falls back to a local bucket per identity refilled at its
    /// `1/N` share of the budget's rate and holding one token, not a share of the burst: a
    /// process that falls back admits at most `1 + T × rate/N` over `T` of outage.
    #[default]
    Local,
    /// `fail_closed`: refuse every request that leased tokens do not cover.
    Closed,
}

/// Why a fleet decision was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetRefusal {
    /// The fleet-wide budget of this identity is spent: Redis granted nothing.
    Exhausted,
    /// This process holds no leased token and a lease is on its way: the entry still owes
    /// the provisional token its first request took, or its lease ran out before the next
    /// arrived. (A cold identity's first request is admitted, not refused.)
    LeasePending,
    /// Redis is unavailable (or answered this key unexpectedly) and the local `1/N` share
    /// (`FailPolicy::Local`) is spent.
    FallbackLimited,
    /// Redis is unavailable (or answered this key unexpectedly) and the policy is
    /// `FailPolicy::Closed`.
    Unavailable,
    /// The local lease table is at its cap and holds no idle entry to reclaim.
    TableFull,
    /// The class is not one the limiter was built with.
    NoSuchClass,
}

/// A refused fleet decision: why, and when trying again may succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetRefused {
    pub(crate) reason: FleetRefusal,
    pub(crate) retry_after: Duration,
}

impl FleetRefused {
    /// Why it was refused.
    pub fn reason(&self) -> FleetRefusal {
        self.reason
    }

    /// How long to wait before trying again (an estimate: the fleet's state moves meanwhile).
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }
}

impl std::fmt::Display for FleetRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match self.reason {
            FleetRefusal::Exhausted => "its fleet-wide budget is spent",
            FleetRefusal::LeasePending => "this process has no leased token for it yet",
            FleetRefusal::FallbackLimited => {
                "Redis is unavailable and this process's share of its budget is spent"
            }
            FleetRefusal::Unavailable => "Redis is unavailable and the policy is fail_closed",
            FleetRefusal::TableFull => "the lease table is full of identities holding leases",
            FleetRefusal::NoSuchClass => "its class is not configured",
        };
        write!(
            f,
            "request refused: {why}; retry after {} ms",
            self.retry_after.as_millis()
        )
    }
}

impl std::error::Error for FleetRefused {}

/// A fleet limiter that cannot be built, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetConfigError {
    /// No `FleetSecret` was given: every process must hash identities under the same one.
    NoSecret,
    /// No class was given.
    NoClasses,
    /// More than 65,536 classes.
    TooManyClasses,
    /// The process count is 0.
    NoProcesses,
    /// The lease cap is 0 or above 2^20.
    LeaseCap(u32),
    /// The table cap is 0 or above 2^20.
    TableCap(usize),
    /// The Redis URL does not parse.
    RedisUrl(String),
    /// The Redis Cluster's seed nodes are missing or do not parse (feature `redis-cluster`).
    ClusterNodes(String),
    /// A class's `1/N` fallback share cannot be built (its divided rate is out of range).
    Fallback(String),
    /// The background lease thread could not be started.
    Thread(String),
}

impl std::fmt::Display for FleetConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSecret => f.write_str(
                "fleet limiter: no fleet secret; give every process the same FleetSecret",
            ),
            Self::NoClasses => f.write_str("fleet limiter: no class budget given"),
            Self::TooManyClasses => f.write_str("fleet limiter: more than 65536 classes"),
            Self::NoProcesses => {
                f.write_str("fleet limiter: the process count is 0; give the replica count N")
            }
            Self::LeaseCap(cap) => write!(
                f,
                "fleet limiter: lease cap {cap} is out of range; use 1..=1048576"
            ),
            Self::TableCap(cap) => write!(
                f,
                "fleet limiter: table cap {cap} is out of range; use 1..=1048576"
            ),
            Self::RedisUrl(why) => write!(f, "fleet limiter: the Redis URL is invalid: {why}"),
            Self::ClusterNodes(why) => write!(
                f,
                "fleet limiter: the Redis Cluster's seed nodes are invalid: {why}"
            ),
            Self::Fallback(why) => write!(
                f,
                "fleet limiter: a class's 1/N fallback share is out of range: {why}"
            ),
            Self::Thread(why) => {
                write!(f, "fleet limiter: the lease thread could not start: {why}")
            }
        }
    }
}

impl std::error::Error for FleetConfigError {}
