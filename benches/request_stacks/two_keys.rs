//! The composition the gate's plan exists for, in both forms: the in-flight place and the
//! volume by the claim, one rate limit by the source and one by the claim. admit's `Gate`
//! beside the obvious stack doing the same (two governor keyed limiters, a DashMap in-flight
//! count, a DashMap volume count). 4,096 claims behind 256 sources; every limit far above
//! what a run reaches.

use super::{Prepare, Stack, BYTES, NAMES};
use admit::fairness::Quotas;
use admit::gate::{Admission, Gate, KeyKind, Limit};
use admit::quota::{Quota, RateLimit};
use admit::{BucketConfig, Limiter};
use dashmap::DashMap;
use governor::{DefaultKeyedRateLimiter, RateLimiter};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Sources the claims come from.
pub const SOURCES: usize = 256;

/// A request's two keys: its claim (the actor's name) and its source (an address, one of
/// [`SOURCES`]).
pub struct TwoKeys {
    pub claim: String,
    pub source: String,
}

impl Prepare for TwoKeys {
    fn prepare(name: &str) -> Self {
        let index: usize = name
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(0);
        Self {
            claim: name.to_owned(),
            source: format!("203.0.113.{}", index % SOURCES),
        }
    }
}

/// admit's gate: one limiter with a class per limit (one table of 8,192 entries).
pub struct AdmitGateTwoKeys(pub Gate);

impl AdmitGateTwoKeys {
    pub fn new() -> Self {
        let deep = BucketConfig::new(1 << 30, Duration::from_millis(1 << 10)).unwrap();
        let limiter = Limiter::builder()
            .cap(2 * NAMES)
            .build([deep, deep])
            .unwrap();
        let volume =
            Quota::new(Quota::MAX_EVENTS, Quota::MAX_BYTES, Duration::from_secs(1)).unwrap();
        Self(
            Gate::new()
                .in_flight(Quotas::builder().quota(8).actors(NAMES).build().unwrap())
                .rates(
                    limiter,
                    [
                        Limit::new("per source", 0),
                        Limit::new("per claim", 1).keyed_by(KeyKind::Claim),
                    ],
                )
                .unwrap()
                .volume(RateLimit::new(volume)),
        )
    }
}

impl Stack for AdmitGateTwoKeys {
    const NAME: &'static str = "admit Gate, claim + source, two limits";
    type Actor = TwoKeys;
    #[inline]
    fn request(&self, keys: &TwoKeys, now_ns: u64) -> bool {
        let admission = Admission::new(keys.claim.as_str(), keys.source.as_str()).bytes(BYTES);
        match self.0.try_admit_at(&admission, now_ns) {
            Ok(pass) => {
                drop(black_box(pass));
                true
            }
            Err(_) => false,
        }
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
}

/// The same by hand with the obvious crates.
pub struct ObviousTwoKeys {
    per_source: DefaultKeyedRateLimiter<String>,
    per_claim: DefaultKeyedRateLimiter<String>,
    in_flight: DashMap<String, AtomicU32>,
    volume: DashMap<String, AtomicU64>,
}

impl ObviousTwoKeys {
    pub fn new() -> Self {
        let quota = governor::Quota::with_period(Duration::from_millis(1 << 10))
            .unwrap()
            .allow_burst(NonZeroU32::new(1 << 30).unwrap());
        Self {
            per_source: RateLimiter::keyed(quota),
            per_claim: RateLimiter::keyed(quota),
            in_flight: DashMap::new(),
            volume: DashMap::new(),
        }
    }
}

/// The count of `key` in `map`: a read lock on the hit, an insert on the first sight.
fn count<V: Default>(map: &DashMap<String, V>, key: &String, add: impl Fn(&V) -> bool) -> bool {
    match map.get(key) {
        Some(value) => add(&value),
        None => add(&map.entry(key.clone()).or_default()),
    }
}

impl Stack for ObviousTwoKeys {
    const NAME: &'static str = "2 governor check_key + DashMap in-flight + DashMap volume";
    type Actor = TwoKeys;
    #[inline]
    fn request(&self, keys: &TwoKeys, _: u64) -> bool {
        let admitted = count(&self.in_flight, &keys.claim, |c| {
            c.fetch_add(1, Ordering::AcqRel) < 8
        });
        // No rollback: a refusal by a later check keeps what the earlier ones took (the gate
        // gives it back), so this stack does less than the gate on every refusal.
        let ok = admitted
            && self.per_source.check_key(&keys.source).is_ok()
            && self.per_claim.check_key(&keys.claim).is_ok()
            && count(&self.volume, &keys.claim, |v| {
                v.fetch_add(BYTES, Ordering::Relaxed) < u64::MAX / 2
            });
        if let Some(count) = self.in_flight.get(&keys.claim) {
            count.fetch_sub(1, Ordering::AcqRel);
        }
        ok
    }
}
