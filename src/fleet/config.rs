//! Building a [`FleetLimiter`]: the Redis address, the fleet secret, the process count, the
//! lease cap and the fail policy.

use super::backend::Store;
use super::identity::FleetSecret;
use super::lease::MAX_LEASE_CAP;
use super::policy::{FailPolicy, FleetConfigError};
use super::ring::Ring;
use super::{ClassBudget, FleetLimiter, Shared, Stats};
use crate::bucket::BucketConfig;
use crate::clock::{Clock, RecentClock};
use crate::limiter::Limiter;
use crate::sync::atomic::{AtomicBool, AtomicU64};
use crate::sync::Arc;
use crate::table::{Geometry, KeyHasher, Table, MAX_CAP};
use std::time::Duration;

/// The default lease cap: at steady hot load a lease is requested when the balance falls
/// under half the cap and tops it up, so about `1000 / (cap / 2)` Redis calls per 1,000
/// decisions: 7.8 at 256 (the goal is ≤ 10), for `N × 256` tokens of slack in the bound.
pub const DEFAULT_LEASE_CAP: u32 = 256;

/// Builds a [`FleetLimiter`] (see [`FleetLimiter::builder`]).
#[derive(Debug, Clone)]
pub struct FleetLimiterBuilder {
    url: String,
    /// The cluster's seed nodes, when the builder was given a cluster (`redis_cluster`).
    #[cfg(feature = "redis-cluster")]
    cluster: Option<Vec<String>>,
    secret: Option<FleetSecret>,
    processes: u32,
    lease_cap: u32,
    policy: FailPolicy,
    cap: usize,
    io_timeout: Duration,
    prefix: String,
    restart_drains: bool,
    pace_drained: bool,
}

impl Default for FleetLimiterBuilder {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6379/".to_owned(),
            #[cfg(feature = "redis-cluster")]
            cluster: None,
            secret: None,
            processes: 1,
            lease_cap: DEFAULT_LEASE_CAP,
            policy: FailPolicy::Local,
            cap: 4096,
            io_timeout: Duration::from_millis(50),
            prefix: "admit".to_owned(),
            restart_drains: true,
            pace_drained: true,
        }
    }
}

impl FleetLimiterBuilder {
    /// The Redis server (`redis://host:port/db`). Default `redis://127.0.0.1:6379/`.
    pub fn redis_url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        #[cfg(feature = "redis-cluster")]
        {
            self.cluster = None;
        }
        self
    }

    /// A Redis Cluster instead of one server (feature `redis-cluster`): `nodes` are seed
    /// URLs (`redis://host:port`), any reachable one of which is enough; the client reads the
    /// slot map from the cluster and sends each lease to the primary of its key's slot. An
    /// identity's keys share a hash tag, so the script never crosses slots. Replaces
    /// [`FleetLimiterBuilder::redis_url`] (the last of the two called wins).
    ///
    /// The client follows `MOVED` and `ASK` itself, with at most two retries per lease, each
    /// connect, reply and wait bounded by [`FleetLimiterBuilder::io_timeout`]; what it still
    /// cannot serve (a slot whose primary died and is not yet replaced) counts as Redis down
    /// (the fail policy) until a new connection reads a fresh slot map. See `docs/fleet.md`.
    ///
    /// ```no_run
    /// use admit::fleet::{FleetLimiter, FleetSecret};
    /// use admit::BucketConfig;
    ///
    /// let fleet = FleetLimiter::builder()
    ///     .redis_cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000", "redis://10.0.0.3:7000"])
    ///     .secret(FleetSecret::from_bytes(*b"fleet-wide key!!"))
    ///     .processes(4)
    ///     .build([BucketConfig::per_second(100)?])?;
    /// let _ = fleet.try_acquire("client-7", 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "redis-cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis-cluster")))]
    pub fn redis_cluster<S: Into<String>>(mut self, nodes: impl IntoIterator<Item = S>) -> Self {
        self.cluster = Some(nodes.into_iter().map(Into::into).collect());
        self
    }

    /// The secret every process of the fleet hashes identities under. Required.
    pub fn secret(mut self, secret: FleetSecret) -> Self {
        self.secret = Some(secret);
        self
    }

    /// N, the number of processes sharing the budget: the fallback bucket of `fail_local`
    /// refills at `1/N` of its rate (and holds one token), the bound's slack is
    /// `N × lease_cap`, and a drained process waits `N × interval` before asking again
    /// ([`FleetLimiterBuilder::pace_drained`]). Default 1.
    pub fn processes(mut self, n: u32) -> Self {
        self.processes = n;
        self
    }

    /// The most tokens one process holds for one (identity, class). Default
    /// [`DEFAULT_LEASE_CAP`]; at most 2^19.
    pub fn lease_cap(mut self, cap: u32) -> Self {
        self.lease_cap = cap;
        self
    }

    /// What decisions do while Redis cannot answer. Default [`FailPolicy::Local`].
    pub fn fail_policy(mut self, policy: FailPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The most (identity, class) pairs one process holds leases for. Default 4096.
    pub fn cap(mut self, cap: usize) -> Self {
        self.cap = cap;
        self
    }

    /// How long the lease thread waits on any Redis operation before calling Redis down.
    /// Default 50 ms. Decisions never wait on it.
    pub fn io_timeout(mut self, timeout: Duration) -> Self {
        self.io_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Whether a key found missing on a Redis server younger than the key's refill horizon
    /// (`burst × interval`, plus at most 1 s) is created drained, as it would be after a
    /// restart with empty memory. Default `true`: a restart then hands out no fresh burst
    /// (the bound in [`crate::fleet`] has no restart term), at the price that every identity
    /// starts drained on a new server, a first deployment included, refilling at the rate.
    ///
    /// `false` creates every missing key full: right for a store that is known to start
    /// empty only on purpose (a first deployment with a long horizon, a benchmark), and then
    /// every restart with empty memory counts in the bound's `m` (one fresh burst per key).
    ///
    /// ```
    /// use admit::fleet::{FleetLimiter, FleetSecret};
    /// use admit::BucketConfig;
    ///
    /// // 10,000 per minute in bursts of 10,000: a 1-minute horizon this deployment does not
    /// // want drained on its first start.
    /// let builder = FleetLimiter::builder()
    ///     .secret(FleetSecret::from_bytes([7; 16]))
    ///     .restart_drains(false);
    /// # let _ = (builder, BucketConfig::per_minute(10_000)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restart_drains(mut self, drains: bool) -> Self {
        self.restart_drains = drains;
        self
    }

    /// Whether a process that Redis refused (the identity's fleet budget is spent) waits its
    /// fair share of a token's time before asking again: `N × interval` (the `processes(N)`
    /// given here), or the wait Redis named if longer, plus a jitter of up to a quarter of
    /// that, at most 4 s. Meanwhile its decisions for the identity are refused locally
    /// ([`FleetRefusal::Exhausted`](super::FleetRefusal::Exhausted), with that wait as the
    /// retry time). Default `true`: a flooded identity then costs each process at most 2
    /// Redis calls per lease granted plus `rate / N` calls per second while drained, instead
    /// of one call per Redis-named wait (up to `rate` per second per process, `N × rate` for
    /// the fleet). The admission bound is the same either way.
    ///
    /// The trade: a paced process may leave a token that became due unclaimed until its pace
    /// has passed, so when few processes want the identity, each one alone sees up to `N`
    /// times the emission interval (plus the jitter) between refusal and its next token.
    /// `false` asks again as soon as Redis says a token is due: the lowest latency to the
    /// next token, for `N × rate` calls per second on a flooded identity.
    ///
    /// ```
    /// use admit::fleet::{FleetLimiter, FleetSecret};
    /// use admit::BucketConfig;
    ///
    /// // 8 replicas at 50/s: a drained replica asks again every 160 ms (plus jitter), not
    /// // every 20 ms.
    /// let builder = FleetLimiter::builder()
    ///     .secret(FleetSecret::from_bytes([7; 16]))
    ///     .processes(8)
    ///     .pace_drained(true);
    /// # let _ = (builder, BucketConfig::per_second(50)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pace_drained(mut self, pace: bool) -> Self {
        self.pace_drained = pace;
        self
    }

    /// The prefix of every Redis key. Default `admit`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The deployment named by `redis_url` or `redis_cluster`, checked but not contacted.
    fn store(&self) -> Result<Store, FleetConfigError> {
        #[cfg(feature = "redis-cluster")]
        if let Some(nodes) = &self.cluster {
            if nodes.is_empty() {
                return Err(FleetConfigError::ClusterNodes(
                    "no seed node given".to_owned(),
                ));
            }
            return Store::open_cluster(nodes)
                .map_err(|e| FleetConfigError::ClusterNodes(e.to_string()));
        }
        Store::open(self.url.as_str()).map_err(|e| FleetConfigError::RedisUrl(e.to_string()))
    }

    /// A limiter over the default [`RecentClock`], one class per budget (class `i` is the
    /// `i`-th). Connects once (waiting at most the I/O timeout); if Redis does not answer,
    /// the limiter starts down and its thread keeps trying.
    pub fn build(
        self,
        classes: impl IntoIterator<Item = BucketConfig>,
    ) -> Result<FleetLimiter<RecentClock>, FleetConfigError> {
        self.build_with_clock(classes, RecentClock::new())
    }

    /// As [`FleetLimiterBuilder::build`], reading `clock`.
    pub fn build_with_clock<C: Clock + 'static>(
        self,
        classes: impl IntoIterator<Item = BucketConfig>,
        clock: C,
    ) -> Result<FleetLimiter<C>, FleetConfigError> {
        let secret = self.secret.ok_or(FleetConfigError::NoSecret)?;
        let configs: Vec<BucketConfig> = classes.into_iter().collect();
        if configs.is_empty() {
            return Err(FleetConfigError::NoClasses);
        }
        if configs.len() > usize::from(u16::MAX) + 1 {
            return Err(FleetConfigError::TooManyClasses);
        }
        if self.processes == 0 {
            return Err(FleetConfigError::NoProcesses);
        }
        if self.lease_cap == 0 || self.lease_cap > MAX_LEASE_CAP {
            return Err(FleetConfigError::LeaseCap(self.lease_cap));
        }
        if self.cap == 0 || self.cap > MAX_CAP {
            return Err(FleetConfigError::TableCap(self.cap));
        }
        let store = self.store()?;
        // The fallback: each class's rate divided by N, in a bucket of one token, so that a
        // process falling back starts with at most one token, not a burst (the `F` term of
        // the bound in `crate::fleet`).
        let n = self.processes;
        let shares = configs
            .iter()
            .map(|c| BucketConfig::new(1, c.refill_interval().saturating_mul(n)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| FleetConfigError::Fallback(e.to_string()))?;
        let clock = Arc::new(clock);
        let fallback = Limiter::builder()
            .cap(self.cap)
            .build_with_clock(shares, Arc::clone(&clock))
            .map_err(|e| FleetConfigError::Fallback(e.to_string()))?;
        let classes = configs
            .iter()
            .map(|c| ClassBudget {
                interval_us: c.refill_interval().as_secs_f64() * 1e6,
                burst: c.burst(),
            })
            .collect();
        let table = Table::new(Geometry::new(self.cap));
        let debtors = (0..table.slots()).map(|_| AtomicU64::new(0)).collect();
        let hasher = KeyHasher::random().for_shape(table.shape());
        let con = store.connect(self.io_timeout).ok();
        let shared = Arc::new(Shared {
            table,
            hasher,
            secret,
            classes,
            lease_cap: self.lease_cap,
            processes: self.processes,
            policy: self.policy,
            fallback,
            ring: Ring::new(),
            debtors,
            down: AtomicBool::new(con.is_none()),
            slots: store.is_cluster().then(super::nodes::SlotStates::new),
            nodes: super::nodes::NodeCounters::new(),
            stop: AtomicBool::new(false),
            worker: std::sync::OnceLock::new(),
            stats: Stats::default(),
            io_timeout: self.io_timeout,
            prefix: self.prefix,
            restart_drains: self.restart_drains,
            pace_drained: self.pace_drained,
            clock,
        });
        // Without `redis-cluster` the store is always a single server.
        #[allow(irrefutable_let_patterns)]
        if let Store::Single(client) = &store {
            shared
                .nodes
                .name(0, &client.get_connection_info().addr().to_string());
            shared.nodes.set_down(0, con.is_none());
        }
        let for_thread = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("admit-fleet-lease".to_owned())
            .spawn(move || super::worker::run(&for_thread, &store, con))
            .map_err(|e| FleetConfigError::Thread(e.to_string()))?;
        // Ignoring the error: the cell is set once, here, before anyone else can read it.
        let _ = shared.worker.set(handle.thread().clone());
        Ok(FleetLimiter {
            shared,
            handle: Some(handle),
        })
    }
}
