//! Lock-free admission control for servers whose work funnels through one writer.
//!
//! `admit` decides, in a few atomic operations and without ever taking a lock, whether one
//! actor's next operation may go in, so that one actor's flood is never paid for by everyone
//! else, and so that memory stays bounded whatever names the clients invent.
//!
//! # Which primitive for which problem
//!
//! | the problem | the primitive | what it limits | a whole program |
//! |---|---|---|---|
//! | one actor floods a single writer and everyone else waits behind it | [`fairness::Quotas`] | ops of one actor *in flight* at once (at most Q awaiting the writer) | [`sequencer`](https://docs.rs/crate/admit/latest/source/examples/sequencer.rs) |
//! | one identity calls too often (per client IP, per API key, per host) | [`limiter::Limiter`] | *requests per unit of time*, per identity and class (up to 1,000,000 per second, exact): token buckets in a bounded table | [`per_ip`](https://docs.rs/crate/admit/latest/source/examples/per_ip.rs) (axum), [`grpc`](https://docs.rs/crate/admit/latest/source/examples/grpc.rs) (tonic) |
//! | one actor stores too much (events and bytes per window) | [`quota::RateLimit`] | *volume per window* per actor, in a fixed array of hashed counters | [`http`](https://docs.rs/crate/admit/latest/source/examples/http.rs) |
//! | one shared budget, no keys | [`bucket::TokenBucket`] | requests per unit of time, one bucket in one `AtomicU64` | the example below |
//! | a registrar's verb layer (two check points per verb) | [`registrar::RegistrarLimiter`] | the limiter, profiled for the registrar seed | [`registrar`](https://docs.rs/crate/admit/latest/source/examples/registrar.rs) |
//! | one request must pass all three defences, and a refusal must cost nothing elsewhere; in flight and volume by what a request claims, the rate by where it comes from; several limits and any cost | [`gate::Gate`] | in flight, up to 16 rate limits and volume together, each keyed by the claim or the source, with rollback | [`http`](https://docs.rs/crate/admit/latest/source/examples/http.rs), [`per_ip`](https://docs.rs/crate/admit/latest/source/examples/per_ip.rs) |
//! | one identity's budget shared by N processes (feature `redis`) | `fleet::FleetLimiter` | requests per unit of time across a fleet, leased from Redis | [`fleet`](https://docs.rs/crate/admit/latest/source/examples/fleet.rs) |
//! | every limit in one file, changed without a restart (feature `config`) | `live::LiveLimits` | reloads all of it or none | [`live_reload`](https://docs.rs/crate/admit/latest/source/examples/live_reload.rs) |
//!
//! To turn "my service handles N requests per second from M clients" into a rate, a burst, an
//! in-flight cap and a volume quota, with the memory each costs, read
//! [Choosing limits](https://docs.rs/crate/admit/latest/source/docs/en/choosing-limits.md) ([한국어](https://docs.rs/crate/admit/latest/source/docs/ko/choosing-limits.md)).
//! Each example above is one complete program (`cargo run --example NAME --features …`, the
//! features in its header).
//!
//! Every decision reads an injected [`clock::Clock`] (by default [`RecentClock`]: one load of
//! a process-wide time refreshed every 0.5 ms); each has an `_at(now)` form so a writer
//! deciding a batch reads the clock once. A request that meets several defences hashes its
//! actor once ([`HashedActor`]) and hands the hash to each. Memory is fixed at construction
//! whatever names arrive, and no decision path takes a lock or allocates. Any of them can try a limit without
//! refusing anyone first: [shadow mode](shadow), switched at runtime.
//!
//! Rate-limit one identity (a client IP here; any `Hash` key works):
//!
//! ```
//! use admit::{BucketConfig, Limiter};
//! use std::net::IpAddr;
//!
//! // Class 0: 10 requests per second, in bursts of at most 2.
//! let limiter = Limiter::builder().build([BucketConfig::per_second(10)?.with_burst(2)?])?;
//! let client: IpAddr = "192.0.2.7".parse()?;
//! assert!(limiter.try_acquire(&client, 0).is_ok());
//! assert!(limiter.try_acquire(&client, 0).is_ok());
//! let refused = limiter.try_acquire(&client, 0).unwrap_err();
//! assert!(refused.limited().is_some_and(|l| l.retry_after_secs() >= 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Keep one actor's ops in flight under its quota, in front of a single writer:
//!
//! ```
//! use admit::fairness::Quotas;
//!
//! let quotas = Quotas::builder().quota(2).build()?;
//! let first = quotas.try_acquire("agent-7")?;
//! let second = quotas.try_acquire("agent-7")?;
//! assert!(quotas.try_acquire("agent-7").is_err(), "a third op would exceed the quota");
//! assert!(quotas.try_acquire("human").is_ok(), "others are not held back");
//! drop((first, second)); // the writer decided them: their places are free again
//! assert!(quotas.try_acquire("agent-7").is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Cap what one actor stores per window:
//!
//! ```
//! use admit::quota::{Quota, RateLimit};
//! use std::time::Duration;
//!
//! // 3 writes and 1 KiB per minute per actor.
//! let limit = RateLimit::new(Quota::new(3, 1024, Duration::from_secs(60))?);
//! assert!(limit.try_acquire("session-1", 600).is_ok());
//! assert!(limit.try_acquire("session-1", 600).is_err(), "1,200 bytes would pass the 1 KiB limit");
//! assert!(limit.try_acquire("session-2", 600).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! One shared bucket, no keys:
//!
//! ```
//! use admit::{BucketConfig, ManualClock, TokenBucket};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let bucket = TokenBucket::new(BucketConfig::per_second(1)?);
//! assert!(bucket.try_acquire(&clock).is_ok());
//! assert!(bucket.try_acquire(&clock).is_err());
//! clock.advance(Duration::from_secs(1));
//! assert!(bucket.try_acquire(&clock).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Modules
//!
//! * [`bucket`]: a token bucket in one `AtomicU64`, the brick the other primitives share.
//! * [`fairness`]: per-actor in-flight quotas in front of a single writer: with quota Q, an op
//!   waits behind at most Q ops of any one other actor; over the quota, an immediate rejection.
//! * [`limiter`]: keyed token buckets in a bounded, lock-free entry table; when the table is
//!   full of drained entries, charges land on per-class overflow buckets, never unlimited.
//! * [`registrar`]: a ready profile over the limiter for a registrar's verb layer: two
//!   buckets per (identity, verb) charged at its two check points, the typed retryable
//!   throttle, the limited-invocation sink, and the four `rate_limit_*` keys.
//! * [`clock`]: the injected monotonic clock every decision reads; every time-dependent call
//!   also has an `_at(now)` form so a writer deciding a batch reads the clock once.
//! * [`quota`]: per-actor volume quotas (events and bytes per window) in a fixed array of
//!   hashed `AtomicU64` counters, on by default through [`quota::RateLimit::default`].
//! * [`gate`]: one admission across the in-flight quotas, the limiter and the volume quota,
//!   in a fixed order; a later refusal gives back what the earlier defences took.
//! * `live` (feature `config`, on by default): every limit in one `[admit]` TOML table (a
//!   gate's plan too: each limit's key, rate, burst and cost), validated with errors naming
//!   the key, and reloaded into the running primitives all at once or not at all.
//! * `wait` (feature `tokio`): `until_ready` on the limiter and the token bucket, sleeping
//!   exactly the reported wait, cancellation-safe; a clock that follows tokio's paused time.
//! * `tower` (feature `tower`): a tower `Layer` putting the keyed limiter, the in-flight
//!   quotas and the volume quota in front of any HTTP service (an axum `Router`, say), keyed
//!   by peer IP, a header or a closure, refusing with 429 and `Retry-After`.
//!
//! No `unsafe` code, no allocation after construction on any decision path, and no wall clock
//! anywhere.
//!
//! # Observability
//!
//! Two optional features, both off by default (the default build depends on neither crate):
//!
//! * **`metrics`**: counters per primitive, outcome (admitted, overflow, refused) and class,
//!   and gauges of the limiter's entries and the in-flight totals, through the `metrics`
//!   facade. They are attached per instance when it is built, their handles registered then;
//!   an instance without them pays one predictable branch per decision. The `metrics` module
//!   has the names, what moves each, and the design.
//! * **`tracing`**: one `debug!` event per refusal (none per admission), through `tracing`:
//!
//!   | target | fields (each event's message is `refused`) |
//!   |---|---|
//!   | `admit::limiter` | `actor`, `class`, `wait_ns`, `via_overflow` |
//!   | `admit::fairness` | `actor`, `limit`, `in_flight`, `via_overflow` |
//!   | `admit::quota` | `actor`, `limit` (`events` or `bytes`), `max`, `used`, `wait_ns`, `permanent` |
//!
//!   `actor` never names the identity: it is 16 hex digits of a keyed SipHash, under a key
//!   drawn per instance, of what the primitive hashed the identity to; stable for one identity
//!   (and class) within one instance, so a reader can tell one flooding actor from many, and
//!   telling nothing about where the identity lives in the table. The registrar's refusals are
//!   its limiter's (`class` is `verb × 2 + bucket`); a bare `TokenBucket` has no actor and
//!   emits nothing. The event is built, and the digest computed, only if a subscriber wants
//!   it; without the feature nothing of it is compiled.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod actor;
pub mod bucket;
pub mod clock;
mod entropy;
pub mod fairness;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod fleet;
/// The fleet's lease word: pure functions on a `u64`, outside `fleet` so that its models
/// (`check::lease`, the loom and fuzz crates) need no Redis client.
#[cfg(any(feature = "redis", test, admit_loom, fuzzing))]
#[path = "fleet/lease.rs"]
pub(crate) mod fleet_lease;
/// The fleet's request ring, outside `fleet` for the same models.
#[cfg(any(feature = "redis", test, admit_loom, fuzzing))]
#[path = "fleet/ring.rs"]
pub(crate) mod fleet_ring;
/// The lease thread's decisions without I/O, outside `fleet` for the same models.
#[cfg(any(feature = "redis", test, admit_loom, fuzzing))]
#[path = "fleet/worker_core.rs"]
pub(crate) mod fleet_worker_core;
pub mod gate;
pub mod implementation;
#[cfg(admit_loom)]
#[doc(hidden)]
pub use fleet_lease::loom as fleet_lease_loom;
#[cfg(admit_loom)]
#[doc(hidden)]
pub use fleet_worker_core::loom as fleet_worker_loom;
#[cfg(feature = "metrics")]
mod instrument;
pub mod limiter;
#[cfg(feature = "config")]
#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
pub mod live;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
mod prefix;
pub mod quota;
pub mod registrar;
pub mod shadow;
mod sync;
mod table;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
#[cfg(feature = "tracing")]
mod trace;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub mod wait;

#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod check;

/// The code of the "Choosing limits" pages, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/en/choosing-limits.md")]
pub struct ChoosingLimits;

/// The same code, in the Korean page.
#[cfg(doctest)]
#[doc = include_str!("../docs/ko/choosing-limits.md")]
pub struct ChoosingLimitsKo;

pub use actor::HashedActor;
pub use bucket::{
    BucketConfig, BucketConfigError, BucketGrant, BucketRefused, Empty, Refunded, TokenBucket,
};
pub use clock::{Clock, ManualClock, MonotonicClock, RecentClock};
pub use limiter::{
    Grant, Limited, Limiter, LimiterBuilder, LimiterConfigError, LimiterRefused, DEFAULT_CAP,
};
pub use prefix::{IpPrefix, IpPrefixError};
// `fairness::Quotas`, `quota::Quota` and `quota::RateLimit` keep the names their seeds fix, and
// read right only beside their module: they are not re-exported here. Nor is anything of the
// registrar profile, whose vocabulary is its own.
