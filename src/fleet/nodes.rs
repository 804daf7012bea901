//! Where each key's budget lives, as decisions see it, and what each Redis node did.
//!
//! * [`SlotStates`] (a Redis Cluster only): one byte per hash slot, published by the lease
//!   thread: the index of the node serving the slot (or [`UNKNOWN_NODE`]) and whether the
//!   slot is *down* — its node's connection failed, or it answered `CLUSTERDOWN`/`TRYAGAIN`
//!   for the slot. A decision reads its key's byte only when its entry holds no token; a
//!   down slot puts the identities whose keys live there, and only those, under the fail
//!   policy.
//! * [`NodeCounters`]: per node, the fail-policy decisions (counted by the deciding thread,
//!   lock-free, by the node index of the key's slot) and what the lease thread saw of it:
//!   calls, tokens, outages and each lease's latency, from the moment the lease thread handed
//!   the request on to the moment it applied the answer.
//!
//! A single server is node 0, always serving every key: its `down` is the limiter's.

use crate::sync::atomic::{AtomicU64, Ordering};
// Not in `crate::sync`: the slot states are outside the loom models (they model the lease
// word, the ring and the lease thread's core, which never read them).
use std::sync::atomic::AtomicU8;
use std::sync::Mutex;
use std::time::Duration;

/// Hash slots in a Redis Cluster.
pub(crate) const SLOTS: usize = 16_384;
/// Node indices run `0..MAX_NODES`; the last is kept for "no node known".
pub(crate) const MAX_NODES: usize = 128;
/// The node index of a slot no node is known to serve (and of decisions made before any
/// slot map was read).
pub(crate) const UNKNOWN_NODE: u8 = 127;
/// The bit of a slot's byte that says it is down.
const DOWN: u8 = 0x80;

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of `key`, by Redis Cluster's rule: the bytes between the first `{` and the
/// next `}` when that is not empty, else the whole key.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = key.get(open + 1..)?;
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| rest.get(..close)).flatten()
    });
    crc16(tagged.unwrap_or(key)) & 0x3FFF
}

/// The slot of the fleet key of `identity` (48 bits) under `prefix`, without building the
/// key when the prefix holds no `{` (the hash tag is then the identity's 12 hex digits).
pub(crate) fn identity_slot(prefix: &str, identity: u64, class: u16) -> u16 {
    if prefix.as_bytes().contains(&b'{') {
        let key = format!("{prefix}:{{{identity:012x}}}:{class}");
        return key_slot(key.as_bytes());
    }
    let mut hex = [0u8; 12];
    for (i, d) in hex.iter_mut().enumerate() {
        let nibble = (identity >> (44 - 4 * i)) & 0xF;
        // A nibble: 0..=15.
        *d = b"0123456789abcdef"
            .get(usize::try_from(nibble).unwrap_or(0))
            .copied()
            .unwrap_or(b'0');
    }
    crc16(&hex) & 0x3FFF
}

/// Each slot's serving node and whether it is down, as the lease thread last published it.
pub(crate) struct SlotStates {
    bytes: Box<[AtomicU8]>,
}

impl SlotStates {
    /// Every slot served by no known node, and not down (no slot map read yet: the limiter's
    /// own `down` covers that).
    pub(crate) fn new() -> Self {
        Self {
            bytes: (0..SLOTS).map(|_| AtomicU8::new(UNKNOWN_NODE)).collect(),
        }
    }

    fn byte(&self, slot: u16) -> u8 {
        // Relaxed: the byte is the whole message (it chooses a decision's path and names the
        // node a fail-policy decision is counted for); a stale byte only moves a decision
        // made while the state changes to the other side of the change.
        self.bytes
            .get(usize::from(slot))
            .map_or(UNKNOWN_NODE, |b| b.load(Ordering::Relaxed))
    }

    /// Whether `slot` is down.
    pub(crate) fn down(&self, slot: u16) -> bool {
        self.byte(slot) & DOWN != 0
    }

    /// The node serving `slot`, or [`UNKNOWN_NODE`].
    pub(crate) fn node(&self, slot: u16) -> u8 {
        self.byte(slot) & !DOWN
    }

    /// Publishes `slot`'s state (the lease thread only).
    #[cfg_attr(not(feature = "redis-cluster"), allow(dead_code))]
    pub(crate) fn set(&self, slot: u16, node: u8, down: bool) {
        if let Some(b) = self.bytes.get(usize::from(slot)) {
            // Relaxed: see `byte`.
            b.store(
                (node & !DOWN) | if down { DOWN } else { 0 },
                Ordering::Relaxed,
            );
        }
    }
}

/// Buckets of the lease latency histogram: a quarter power of two each, from 1 µs.
const BUCKETS: usize = 100;

fn bucket_of(us: u64) -> usize {
    if us <= 1 {
        return 0;
    }
    let log2 = 63 - us.leading_zeros();
    // The two bits under the top one: which quarter of the power of two.
    let quarter = if log2 >= 2 {
        (us >> (log2 - 2)) & 3
    } else {
        (us << (2 - log2)) & 3
    };
    let i = u64::from(log2) * 4 + quarter;
    usize::try_from(i).unwrap_or(BUCKETS).min(BUCKETS - 1)
}

/// The upper edge of bucket `i`, in microseconds.
fn bucket_top_us(i: usize) -> u64 {
    let log2 = u32::try_from(i / 4).unwrap_or(63).min(62);
    let quarter = u64::try_from(i % 4).unwrap_or(0);
    let base = 1u64 << log2;
    base + base * (quarter + 1) / 4
}

/// What the lease thread saw of one node.
#[derive(Debug, Clone)]
struct NodeRecord {
    address: String,
    down: bool,
    calls: u64,
    tokens_granted: u64,
    outages: u64,
    queue_full: u64,
    latency: Vec<u64>,
    max_us: u64,
}

/// Per-node counters (see the module docs).
pub(crate) struct NodeCounters {
    /// Fail-policy decisions by node index (the last: no node known).
    fail_policy: Box<[AtomicU64]>,
    /// Written by the lease thread once per answer; read by `FleetLimiter::node_stats`.
    records: Mutex<Vec<NodeRecord>>,
}

impl NodeCounters {
    pub(crate) fn new() -> Self {
        Self {
            fail_policy: (0..MAX_NODES).map(|_| AtomicU64::new(0)).collect(),
            records: Mutex::new(Vec::new()),
        }
    }

    /// One decision of a key on `node` followed the fail policy.
    pub(crate) fn fail_policy(&self, node: u8) {
        if let Some(c) = self.fail_policy.get(usize::from(node)) {
            // Relaxed: a counter.
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every fail-policy decision, all nodes.
    pub(crate) fn fail_policy_total(&self) -> u64 {
        // Relaxed: counters.
        self.fail_policy
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    fn with<R>(&self, node: u8, f: impl FnOnce(&mut NodeRecord) -> R) -> Option<R> {
        // A poisoned lock only means a panic elsewhere while recording: keep counting.
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.get_mut(usize::from(node)).map(f)
    }

    /// Names node `node` (the lease thread, when it first routes to an address).
    pub(crate) fn name(&self, node: u8, address: &str) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        while records.len() <= usize::from(node) {
            records.push(NodeRecord {
                address: String::new(),
                down: false,
                calls: 0,
                tokens_granted: 0,
                outages: 0,
                queue_full: 0,
                latency: vec![0; BUCKETS],
                max_us: 0,
            });
        }
        if let Some(r) = records.get_mut(usize::from(node)) {
            address.clone_into(&mut r.address);
        }
    }

    /// A lease answered (or failed) on `node` after `took`, granting `tokens`.
    pub(crate) fn answered(&self, node: u8, took: Duration, tokens: u64) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.with(node, |r| {
            r.calls += 1;
            r.tokens_granted += tokens;
            if let Some(b) = r.latency.get_mut(bucket_of(us)) {
                *b += 1;
            }
            r.max_us = r.max_us.max(us);
        });
    }

    /// `n` lease requests for `node` found its queue full (a cluster node thread's).
    #[cfg(feature = "redis-cluster")]
    pub(crate) fn queue_full(&self, node: u8, n: u64) {
        self.with(node, |r| r.queue_full += n);
    }

    /// `node`'s connection failed (`down`) or was made again.
    pub(crate) fn set_down(&self, node: u8, down: bool) {
        self.with(node, |r| {
            if down && !r.down {
                r.outages += 1;
            }
            r.down = down;
        });
    }

    /// A snapshot, one entry per node named so far.
    pub(crate) fn snapshot(&self) -> Vec<FleetNodeStats> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let count: u64 = r.latency.iter().sum();
                let quantile = |q: f64| {
                    // The rank of the q-quantile, 1-based: at least 1 when there are samples.
                    let rank = ((count as f64) * q).ceil().max(1.0) as u64;
                    let mut seen = 0;
                    for (b, n) in r.latency.iter().enumerate() {
                        seen += n;
                        if seen >= rank {
                            return Duration::from_micros(bucket_top_us(b).min(r.max_us));
                        }
                    }
                    Duration::from_micros(r.max_us)
                };
                FleetNodeStats {
                    address: r.address.clone(),
                    down: r.down,
                    // Relaxed: a counter.
                    fail_policy_decisions: self
                        .fail_policy
                        .get(i)
                        .map_or(0, |c| c.load(Ordering::Relaxed)),
                    redis_calls: r.calls,
                    tokens_granted: r.tokens_granted,
                    outages: r.outages,
                    queue_full: r.queue_full,
                    lease_latency: LeaseLatency {
                        count,
                        p50: if count == 0 {
                            Duration::ZERO
                        } else {
                            quantile(0.5)
                        },
                        p99: if count == 0 {
                            Duration::ZERO
                        } else {
                            quantile(0.99)
                        },
                        max: Duration::from_micros(r.max_us),
                    },
                }
            })
            .collect()
    }
}

/// What a [`FleetLimiter`](super::FleetLimiter) saw of one Redis node: the server, or each
/// primary of a Redis Cluster it routed a lease to (a replica promoted by a failover
/// appears as a new entry).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetNodeStats {
    /// `host:port`.
    pub address: String,
    /// Whether its connection is currently failed (its keys follow the fail policy).
    pub down: bool,
    /// Decisions for keys this node serves that followed the fail policy (the fallback
    /// admitted or refused them, or `fail_closed` refused them): because the node, or their
    /// slot on it, could not be reached or answered `CLUSTERDOWN`/`TRYAGAIN`, or their key
    /// faulted. Decisions made while no node was known for the key count under no entry
    /// (see [`FleetStats::fail_policy_decisions`](super::FleetStats::fail_policy_decisions)).
    pub fail_policy_decisions: u64,
    /// Lease requests it answered or failed.
    pub redis_calls: u64,
    /// Tokens it granted.
    pub tokens_granted: u64,
    /// Times its connection failed.
    pub outages: u64,
    /// Lease requests for it that found its queue full (a Redis Cluster node holds at most
    /// 1,024 waiting for its connection): answered unserved at once, never queued and never
    /// waited on, so a hung node's backlog cannot hold the lease thread or any other node's
    /// requests. Each such key asks again once its request's timeout (250 ms) passed, or when
    /// the node answers again. Always 0 for a single server.
    pub queue_full: u64,
    /// How long its leases took, from the lease thread handing the request on to applying
    /// the answer (queueing on its node included).
    pub lease_latency: LeaseLatency,
}

/// A latency distribution, read from a histogram of quarter-powers of two (each quantile is
/// the upper edge of its bucket, at most the maximum: up to 19 % above the true value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LeaseLatency {
    /// Samples.
    pub count: u64,
    /// The median.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The longest.
    pub max: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's own examples (`CLUSTER KEYSLOT`), and the hash tag rule.
    #[test]
    fn slots_match_redis() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        for (prefix, id) in [("admit", 0x8000_1234_abcd_u64), ("a{b", 0xffff_0000_0001)] {
            let key = format!("{prefix}:{{{id:012x}}}:3");
            assert_eq!(
                identity_slot(prefix, id, 3),
                key_slot(key.as_bytes()),
                "{key}"
            );
        }
    }

    #[test]
    fn the_histogram_reads_back_within_a_quarter() {
        for us in [1u64, 2, 3, 7, 100, 999, 12_345, 50_000, 3_000_000] {
            let top = bucket_top_us(bucket_of(us));
            assert!(
                top >= us && (top as f64) <= us as f64 * 1.25 + 1.0,
                "{us} → {top}"
            );
        }
        let c = NodeCounters::new();
        c.name(0, "127.0.0.1:1");
        for us in 1..=100u64 {
            c.answered(0, Duration::from_micros(us * 10), 1);
        }
        let s = c.snapshot();
        let l = s.first().map(|s| s.lease_latency).unwrap_or_default();
        assert_eq!((l.count, l.max), (100, Duration::from_micros(1_000)));
        assert!(
            l.p99 >= Duration::from_micros(990) && l.p99 <= l.max,
            "{l:?}"
        );
    }
}
