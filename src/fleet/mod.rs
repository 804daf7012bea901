//! Fleet-wide limits on Redis: one budget per (identity, class) shared by N processes, each
//! deciding locally, lock-free, from tokens it leased in batches (feature `redis`).
//!
//! A per-process [`Limiter`] hands an identity N times its budget when N
//! replicas serve it. A [`FleetLimiter`] keeps the budget in Redis (GCRA on the server's
//! clock, one Lua script, see `script.rs`) and leases tokens from it in batches: a decision is
//! one CAS on the identity's lease word in this process's bounded entry table (the same table
//! the limiter and the quotas use); a background thread asks Redis for more when the balance
//! falls below a low-water mark. No decision waits on the network, in any mode.
//!
//! ```text
//!  decision (any thread)                 lease thread                     Redis (TIME)
//!  ─────────────────────                 ────────────                     ────────────
//!  CAS lease word: balance−1 (or 0 → −1,
//!    the provisional token of a fresh entry)
//!  balance < low water, not PENDING?
//!    └ set PENDING (same CAS), push ───▶ drain ring
//!                                        k = min(size + debt,             ─▶ EVALSHA gcra(key, T, B, k)
//!                                                cap − 1 − balance)
//!                                                                        n = min(k, room); TAT += n·T
//!                                        CAS: balance += n  ◀──────────── {n, wait}
//!                                          (debt paid first)
//!                                        n = k: size ×2 · n < k: size ÷2, defer the pace
//! ```
//!
//! # Invariants
//!
//! 1. **The balance stays in `[−1, lease_cap − 1]`.** For each (identity, class), the
//!    signed balance of a process's lease word (tokens held, or −1 while it owes its
//!    provisional token), counting the grant of a request in flight, stays in a range
//!    `lease_cap` wide: the one lease thread sizes each request `k ≤ cap − 1 − balance` from
//!    the balance it read (`cap` in debt, of which the first token pays the debt), and only
//!    it adds, so the balance can only have fallen by the time the grant lands. Hence what
//!    one process spends in an interval beyond what Redis granted it in that interval is at
//!    most `lease_cap` (`fleet_lease::tests::the_balance_stays_below_the_cap`; `check::lease`
//!    asserts the range and the interval sum after every step of arbitrary histories).
//! 2. **Only leased, provisional or fallback tokens admit.** A decision admits by taking one
//!    leased token (one CAS from the word read); or the one provisional token of an entry
//!    that holds nothing, owes nothing, asks for nothing and is not faulted (a fresh entry's
//!    state) while Redis is not known down: the same CAS sets `DEBT` and `PENDING`, the
//!    request goes out at once, the entry admits nothing more until a grant pays the debt
//!    (a grant of `n` leaves `n − 1`); or, while Redis is down or this key faulted, the `1/N`
//!    fallback bucket under [`FailPolicy::Local`]; never otherwise. (Tests: `check::lease`,
//!    the loom model `loom-tests/tests/fleet_lease.rs`, and the `fleet` integration tests,
//!    where every fault case asserts the bound.)
//! 3. **One request in flight per key, and calls bounded by the budget.** `PENDING` is set by
//!    the CAS that decides to ask (the debt collector claims with the same CAS), and a second
//!    request is made only once the stamp passed: a lost request's timeout, or after a refusal
//!    or a partial grant the *pace*, `max(wait Redis named, N × interval)` plus a jitter that
//!    only lengthens, at most 4 s (`lease::pace_ms`; `N × interval` only with
//!    [`FleetLimiterBuilder::pace_drained`], the default). A reclaim keeps the pace: the table
//!    frees a drained entry only once its pace has passed (`lease::idle`). So for one key a
//!    process makes at most `2 × leases granted + 2 + ⌊drained time / pace_min⌋ + 2 ×
//!    retries` calls, with `pace_min = min(N × interval, 4 s)` and the retries the requests
//!    lost or faulted (`check::lease` asserts it after every step; the `fleet` test `pacing`
//!    measures it; the arithmetic is in `docs/fleet.md`, Sizing). Pacing only delays asks:
//!    the bound below does not depend on it.
//! 4. **An entry in debt is never reclaimed** (`lease::idle`), else each reclaim would hand
//!    out another provisional token; so at any instant a process has spent at most one token
//!    more than Redis granted it for the key (`check::lease`). So that such entries do not
//!    fill the table when their identities never return, the lease thread collects every
//!    debt Redis refused by itself, when its pace has passed, every debt whose key it took
//!    while the connection was down or failed, once up, and, every 2 s, every entry in debt
//!    it holds no key for (the ring lost its request), by the key the borrowing decision
//!    recorded beside the table slot (`worker_core.rs`, `Debts`, with the lease thread's own
//!    invariants; test `unpaid_provisional_tokens_are_collected_and_their_entries_freed`,
//!    the models `check::lease_worker` and `loom-tests/tests/fleet_worker.rs`).
//!
//! # The bound
//!
//! With budget `B(T) = burst + T × rate` for an interval of length `T`, the admissions of one
//! (identity, class) across N processes over any interval are at most
//!
//! `B(T) × (1 + m) + N × lease_cap + F`
//!
//! where `m` counts the *memory losses* of its Redis key during the interval that the script
//! cannot see: an eviction, a failover to a replica that had not seen the latest write, a
//! `DEL`, a restart that reloads an older snapshot (each hands out at most one fresh burst). A restart with empty memory is not one of
//! them: a key missing on a server younger than the key's refill horizon (`burst ×
//! interval`, plus at most 1 s) is created no fuller than the lost key could have been
//! (`script.rs`), so it adds nothing, as long as the server's clock does not step back across
//! the restart. `F` is what the fallback admitted: 0 under `fail_closed`; under `fail_local`
//! at most `Σ_p (k_p + T_p × rate/N)`, `T_p` being the time within the interval process p
//! spent falling back (Redis down, or this key faulted) and `k_p` the number of its fallback
//! periods overlapping the interval (the fallback bucket holds one token, so each period
//! starts with at most one). The arithmetic is in `docs/fleet.md`.
//!
//! # Orderings
//!
//! The lease word is a table value: its CASes follow the table's orderings. `down` is one flag
//! that alone chooses a decision's path (Release/Acquire, though nothing else rides on it);
//! a cluster slot's byte (`nodes::SlotStates`) likewise, `Relaxed` (the byte is the whole
//! message); `stop` ends the thread; the statistics are `Relaxed` counters.
//!
//! On a Redis Cluster a node's failure is scoped to the slots it serves: decisions for keys
//! elsewhere never follow the fail policy because of it, and the lease thread never waits on
//! a node (`cluster.rs`; tests `a_killed_primary_fails_only_its_own_slots` and
//! `a_hung_primary_holds_only_its_own_slots`, which assert 0 fail-policy decisions on the
//! healthy primaries and no lease there, nor any hold of the lease thread, as long as
//! `io_timeout`).
//!
//! ```no_run
//! use admit::fleet::{FailPolicy, FleetLimiter, FleetSecret};
//! use admit::BucketConfig;
//!
//! let fleet = FleetLimiter::builder()
//!     .redis_url("redis://127.0.0.1:6379/")
//!     .secret(FleetSecret::from_bytes(*b"fleet-wide key!!"))
//!     .processes(4)
//!     .fail_policy(FailPolicy::Local)
//!     .build([BucketConfig::per_second(100)?])?;
//! match fleet.try_acquire("client-7", 0) {
//!     Ok(()) => { /* serve */ }
//!     Err(refused) => println!("{refused}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backend;
#[cfg(feature = "redis-cluster")]
mod cluster;
mod config;
mod identity;
mod nodes;
mod policy;
mod script;
mod worker;

pub use config::{FleetLimiterBuilder, DEFAULT_LEASE_CAP};
pub use identity::FleetSecret;
pub use nodes::{FleetNodeStats, LeaseLatency};
pub use policy::{FailPolicy, FleetConfigError, FleetRefusal, FleetRefused};

use crate::clock::{Clock, RecentClock};
use crate::fleet_lease as lease;
// The ring lives beside the lease word (`crate::fleet_ring`) so that the models reach it.
use crate::fleet_ring as ring;
use crate::limiter::Limiter;
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::Arc;
use crate::table::{KeyHasher, Table, Update, Verdict};
use identity::FleetKey;
use std::hash::Hash;
use std::time::Duration;

/// One class's fleet-wide budget, as the script takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClassBudget {
    /// Microseconds per token (the GCRA emission interval), possibly fractional.
    pub(crate) interval_us: f64,
    pub(crate) burst: u32,
}

/// Counters of the lease thread and the fallback.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) redis_calls: AtomicU64,
    pub(crate) tokens_granted: AtomicU64,
    pub(crate) leases_granted: AtomicU64,
    pub(crate) refusals: AtomicU64,
    pub(crate) fallback_admissions: AtomicU64,
    pub(crate) key_faults: AtomicU64,
    pub(crate) fresh_buckets: AtomicU64,
    pub(crate) drained_buckets: AtomicU64,
    pub(crate) outages: AtomicU64,
    pub(crate) reconnects: AtomicU64,
    /// The longest the lease thread spent on one request, in microseconds.
    pub(crate) max_hold_us: AtomicU64,
    pub(crate) partial_leases: AtomicU64,
    pub(crate) refusals_after_partial: AtomicU64,
    pub(crate) requests_overwritten: AtomicU64,
}

/// A snapshot of a [`FleetLimiter`]'s counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FleetStats {
    /// Lease requests sent to Redis.
    pub redis_calls: u64,
    /// Tokens Redis granted to this process.
    pub tokens_granted: u64,
    /// Lease requests Redis answered with at least one token.
    pub leases_granted: u64,
    /// Lease requests Redis answered with no token (the fleet budget was spent): each one
    /// paces this process's next request for the key (see
    /// [`FleetLimiterBuilder::pace_drained`]).
    pub refusals: u64,
    /// Requests admitted by the `1/N` fallback bucket (`fail_local`).
    pub fallback_admissions: u64,
    /// Lease requests Redis answered with fewer tokens than asked, but at least one: the
    /// budget ran short.
    pub partial_leases: u64,
    /// Refusals (`refusals`) of a key whose previous answer was a partial lease: the
    /// follow-up that finds the bucket still empty.
    pub refusals_after_partial: u64,
    /// Unexpected answers for a key (wrong type, not a bucket).
    pub key_faults: u64,
    /// Lease requests that found no bucket in Redis on a server up longer than the class's
    /// refill horizon (`burst × interval`, plus up to 1 s): the script created it full. The
    /// first use of a key, the expiry of a full one, or a memory loss (eviction, failover,
    /// `DEL`) — with [`FleetStats::drained_buckets`], an upper bound on the `m` of the bound,
    /// plus one per key and idle period.
    pub fresh_buckets: u64,
    /// Lease requests that found no bucket in Redis on a server that started less than one
    /// refill horizon (plus up to 1 s) ago: the script created it drained, because the key
    /// may have been lost by that restart. A first deployment counts here too (the script
    /// cannot tell a first start from a restart).
    pub drained_buckets: u64,
    /// Times the connection failed (timeout, refused, dropped); in a Redis Cluster, times
    /// any node's connection failed.
    pub outages: u64,
    /// Successful reconnections after an outage (or a failed first connection); in a Redis
    /// Cluster, of any node.
    pub reconnects: u64,
    /// Decisions that followed the fail policy (admitted or refused by the `1/N` fallback,
    /// or refused by `fail_closed`), every node together; by node in
    /// [`FleetLimiter::node_stats`].
    pub fail_policy_decisions: u64,
    /// Lease requests the request ring lost before the lease thread took them: more than its
    /// 4,096 slots were queued between two of its turns, and the newest overwrote the oldest.
    /// Each such key asks again once its request's timeout (250 ms) passed; an entry left in
    /// debt is collected by the lease thread's sweep. On a Redis Cluster the lease thread
    /// never waits on a node, so a hung node's backlog does not make it lap.
    pub requests_overwritten: u64,
    /// The longest the lease thread was held by one request: the Redis call itself on a
    /// single server; on a Redis Cluster, handing the request to its node's thread (the
    /// call runs there).
    pub max_hold: Duration,
    /// Whether Redis is currently considered down: the server's connection failed, or (a
    /// Redis Cluster) no slot map could be read. A cluster node that fails puts only its
    /// own slots down: see [`FleetLimiter::node_stats`].
    pub down: bool,
}

pub(crate) struct Shared<C: Clock> {
    pub(crate) table: Table,
    pub(crate) hasher: KeyHasher,
    pub(crate) secret: FleetSecret,
    pub(crate) classes: Box<[ClassBudget]>,
    pub(crate) lease_cap: u32,
    pub(crate) processes: u32,
    pub(crate) policy: FailPolicy,
    pub(crate) fallback: Limiter<Arc<C>>,
    pub(crate) ring: ring::Ring,
    /// By table slot: the packed key of the last identity whose decision borrowed a
    /// provisional token there (0: none yet). An entry in debt is never reclaimed, so while
    /// it owes, its slot's record names it; the lease thread's sweep reads it to collect a
    /// debt whose request the ring lost (`worker_core`, invariant 3).
    pub(crate) debtors: Box<[AtomicU64]>,
    pub(crate) down: AtomicBool,
    /// A Redis Cluster's slots as the lease thread last published them: which node serves
    /// each, and whether it is down (`None`: a single server).
    pub(crate) slots: Option<nodes::SlotStates>,
    /// Per-node counters (a single server is node 0).
    pub(crate) nodes: nodes::NodeCounters,
    pub(crate) stop: AtomicBool,
    pub(crate) worker: std::sync::OnceLock<std::thread::Thread>,
    pub(crate) stats: Stats,
    pub(crate) io_timeout: Duration,
    pub(crate) prefix: String,
    /// Whether the script creates a key missing on a young server drained (`script.rs`).
    pub(crate) restart_drains: bool,
    /// Whether a refused request paces the next one by the fair share (`lease::pace_ms`).
    pub(crate) pace_drained: bool,
    pub(crate) clock: Arc<C>,
}

impl<C: Clock> Shared<C> {
    /// Whether decisions for `key` follow the fail policy for want of Redis: the limiter is
    /// down, or (a Redis Cluster) the key's slot is. Acquire on `down`: pairs with the lease
    /// thread's Release (the flag alone chooses the path); the slot's byte likewise.
    fn known_down(&self, key: FleetKey) -> bool {
        self.down.load(Ordering::Acquire)
            || self
                .slots
                .as_ref()
                .is_some_and(|s| s.down(self.slot_of(key)))
    }

    /// The hash slot of `key`.
    fn slot_of(&self, key: FleetKey) -> u16 {
        nodes::identity_slot(&self.prefix, key.identity(), key.class())
    }

    /// The node `key`'s fail-policy decisions are counted for: the server (0), the primary
    /// serving its slot, or none known.
    fn node_of(&self, key: FleetKey) -> u8 {
        match &self.slots {
            None => 0,
            Some(s) => s.node(self.slot_of(key)),
        }
    }
}

/// A fleet-wide limiter: per (identity, class) budgets kept in Redis, decided locally from
/// leased tokens. See the [module docs](self) for the protocol and the bound.
///
/// Dropping it stops its lease thread (within one Redis I/O timeout).
///
/// ```no_run
/// use admit::fleet::{FleetLimiter, FleetSecret};
/// use admit::BucketConfig;
///
/// let fleet = FleetLimiter::builder()
///     .secret(FleetSecret::from_bytes([42; 16]))
///     .processes(3)
///     .build([BucketConfig::per_second(50)?])?;
/// let _ = fleet.try_acquire(&"198.51.100.4", 0);
/// println!("{:?}", fleet.stats());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FleetLimiter<C: Clock + 'static = RecentClock> {
    shared: Arc<Shared<C>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl<C: Clock + 'static> std::fmt::Debug for FleetLimiter<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetLimiter")
            .field("processes", &self.shared.processes)
            .field("lease_cap", &self.shared.lease_cap)
            .field("policy", &self.shared.policy)
            .finish_non_exhaustive()
    }
}

impl FleetLimiter<RecentClock> {
    /// A builder with the defaults (see [`FleetLimiterBuilder`]).
    pub fn builder() -> FleetLimiterBuilder {
        FleetLimiterBuilder::default()
    }
}

impl<C: Clock + 'static> FleetLimiter<C> {
    /// Admits one request of `class` from `identity` at the clock's current reading.
    #[inline]
    pub fn try_acquire<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
    ) -> Result<(), FleetRefused> {
        self.try_acquire_at(identity, class, self.shared.clock.now_ns())
    }

    /// Admits one request of `class` from `identity` at reading `now_ns` of this limiter's
    /// clock: one CAS on the identity's lease word when it holds a leased token. Never waits
    /// on Redis.
    #[inline]
    pub fn try_acquire_at<K: Hash + ?Sized>(
        &self,
        identity: &K,
        class: usize,
        now_ns: u64,
    ) -> Result<(), FleetRefused> {
        let shared = &*self.shared;
        let Some(class16) = u16::try_from(class)
            .ok()
            .filter(|_| class < shared.classes.len())
        else {
            return Err(FleetRefused {
                reason: FleetRefusal::NoSuchClass,
                retry_after: Duration::MAX,
            });
        };
        let key = FleetKey::new(&shared.secret, identity, class16);
        let now_ms = now_ns / 1_000_000;
        let cap = shared.lease_cap;
        let tkey = shared.hasher.key_of_hash(key.table_hash());
        let update = shared.table.update_or_reclaim(
            &tkey,
            lease::FRESH,
            |word| {
                // No provisional token while Redis is known down (either policy): its debt
                // could not be paid until Redis is back, and under `Local` the `1/N`
                // fallback already admits a cold identity's first request. Acquire: as
                // below; read only when the entry holds nothing.
                let up = lease::balance(word) > 0 || !shared.known_down(key);
                let step = lease::decide(word, now_ms, cap, up);
                if step.next == word {
                    Verdict::Keep(step)
                } else {
                    Verdict::Commit(step.next, step)
                }
            },
            || shared.table.reclaim(|word| lease::idle(word, now_ms)).0 > 0,
        );
        let step = match update {
            Update::Landed { result, slot, .. } => {
                if result.borrowed {
                    if let Some(record) = shared.debtors.get(slot) {
                        // Relaxed: read only by the sweep, which checks the key against its
                        // own word; the entry cannot move while it owes (never reclaimed).
                        record.store(key.0, Ordering::Relaxed);
                    }
                }
                result
            }
            Update::AtCap | Update::WindowFull => {
                return Err(FleetRefused {
                    reason: FleetRefusal::TableFull,
                    retry_after: Duration::from_millis(1),
                })
            }
        };
        if step.request {
            shared.ring.push(key.0);
            if let Some(thread) = shared.worker.get() {
                thread.unpark();
            }
        }
        if step.took {
            return Ok(());
        }
        // No leased token.
        if shared.known_down(key) || lease::faulted(step.next) {
            shared.nodes.fail_policy(shared.node_of(key));
            return match shared.policy {
                FailPolicy::Closed => Err(FleetRefused {
                    reason: FleetRefusal::Unavailable,
                    retry_after: Duration::from_millis(lease::REQUEST_TIMEOUT_MS),
                }),
                FailPolicy::Local => match shared.fallback.try_acquire_at(&key.0, class, now_ns) {
                    Ok(_) => {
                        // Relaxed: a counter.
                        shared
                            .stats
                            .fallback_admissions
                            .fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    }
                    Err(refused) => Err(FleetRefused {
                        reason: FleetRefusal::FallbackLimited,
                        retry_after: refused
                            .limited()
                            .map_or(Duration::from_millis(1), |l| l.wait()),
                    }),
                },
            };
        }
        Err(if lease::exhausted(step.next) {
            FleetRefused {
                reason: FleetRefusal::Exhausted,
                retry_after: Duration::from_millis(lease::defer_ms(step.next, now_ms).max(1)),
            }
        } else {
            FleetRefused {
                reason: FleetRefusal::LeasePending,
                retry_after: Duration::from_millis(1),
            }
        })
    }

    /// The clock decisions read.
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }

    /// N, the process count this limiter was configured with.
    pub fn processes(&self) -> u32 {
        self.shared.processes
    }

    /// The most tokens this process holds for one (identity, class).
    pub fn lease_cap(&self) -> u32 {
        self.shared.lease_cap
    }

    /// What this limiter saw of each Redis node: the server, or each primary of a Redis
    /// Cluster it has routed to (address, whether it is down, its fail-policy decisions,
    /// calls, tokens, outages and lease latencies).
    pub fn node_stats(&self) -> Vec<FleetNodeStats> {
        self.shared.nodes.snapshot()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> FleetStats {
        let s = &self.shared.stats;
        // Relaxed: a snapshot of counters; Acquire on `down` as on the decision path.
        FleetStats {
            redis_calls: s.redis_calls.load(Ordering::Relaxed),
            tokens_granted: s.tokens_granted.load(Ordering::Relaxed),
            leases_granted: s.leases_granted.load(Ordering::Relaxed),
            refusals: s.refusals.load(Ordering::Relaxed),
            fallback_admissions: s.fallback_admissions.load(Ordering::Relaxed),
            partial_leases: s.partial_leases.load(Ordering::Relaxed),
            refusals_after_partial: s.refusals_after_partial.load(Ordering::Relaxed),
            key_faults: s.key_faults.load(Ordering::Relaxed),
            fresh_buckets: s.fresh_buckets.load(Ordering::Relaxed),
            drained_buckets: s.drained_buckets.load(Ordering::Relaxed),
            outages: s.outages.load(Ordering::Relaxed),
            reconnects: s.reconnects.load(Ordering::Relaxed),
            requests_overwritten: s.requests_overwritten.load(Ordering::Relaxed),
            fail_policy_decisions: self.shared.nodes.fail_policy_total(),
            max_hold: Duration::from_micros(s.max_hold_us.load(Ordering::Relaxed)),
            down: self.shared.down.load(Ordering::Acquire),
        }
    }
}

impl<C: Clock + 'static> Drop for FleetLimiter<C> {
    fn drop(&mut self) {
        // Release: pairs with the thread's Acquire load of `stop`.
        self.shared.stop.store(true, Ordering::Release);
        if let Some(handle) = self.handle.take() {
            handle.thread().unpark();
            // A panicked lease thread has nothing left to clean up.
            let _ = handle.join();
        }
    }
}
