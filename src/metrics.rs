//! Counters and gauges through the [`metrics`] facade (feature `metrics`).
//!
//! # Attaching
//!
//! Nothing is recorded unless an instance is given its instruments when it is made, with the
//! [`Labels`] that tell it apart from the other instances of the process:
//!
//! | the primitive | attach with |
//! |---|---|
//! | [`Limiter`](crate::Limiter) | [`LimiterBuilder::metrics`](crate::LimiterBuilder::metrics) |
//! | [`Quotas`](crate::fairness::Quotas) | [`QuotasBuilder::metrics`](crate::fairness::QuotasBuilder::metrics) |
//! | [`RateLimit`](crate::quota::RateLimit) | [`RateLimit::with_metrics`](crate::quota::RateLimit::with_metrics) |
//! | [`TokenBucket`](crate::TokenBucket) | [`TokenBucket::with_metrics`](crate::TokenBucket::with_metrics) |
//! | [`RegistrarLimiter`](crate::registrar::RegistrarLimiter) | a [`MetricsSink`] as its limited-invocation sink |
//!
//! Every handle an instance will ever use is registered there, once, with the recorder that is
//! current at that moment on that thread (the one [`metrics::with_local_recorder`] set, else
//! the global one, else none). **Install the recorder before building**: an instance built
//! before any recorder gets no-op handles and records nothing for its whole life. Registering
//! formats the labels and allocates; that is the cold path, and the only one.
//!
//! ```
//! use admit::metrics::Labels;
//! use admit::{BucketConfig, Limiter};
//!
//! // metrics_exporter_prometheus::PrometheusBuilder::new().install()?; // first, in a server
//! let limiter = Limiter::builder()
//!     .metrics(&Labels::new().with("limiter", "login"))
//!     .build([BucketConfig::per_second(10)?])?;
//! assert!(limiter.try_acquire("192.0.2.7", 0).is_ok()); // counted: class "0", admitted
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a decision costs
//!
//! * **Feature off**: nothing; the fields and the calls are not compiled.
//! * **Feature on, nothing attached**: one branch on an `Option` that is `None` for the
//!   instance's whole life, so perfectly predicted.
//! * **Attached**: that branch, the choice of the outcome's pre-registered handle (the
//!   limiter keeps each class's beside the class's config, which the charge has in hand), and
//!   one [`Counter::increment`](::metrics::Counter), a call through the recorder's handle (an
//!   atomic add in the usual recorders). No key is
//!   looked up, no label is formatted, nothing locks and nothing allocates, with any recorder
//!   whose handles do neither (the test target `metrics_alloc` counts 0 bytes allocated over
//!   1,000 decisions of each primitive under `metrics-util`'s `DebuggingRecorder`).
//!   The measured cost per hit is in the benchmarks' history:
//!   `git show c9901be:docs/benchmarks.md`, "metrics".
//!
//! # Names
//!
//! One scheme, `admit_<primitive>_<what>`; counters end in `_total`. Every metric also carries
//! the instance's [`Labels`].
//!
//! | name | kind | labels | what | moves |
//! |---|---|---|---|---|
//! | `admit_limiter_decisions_total` | counter | `class`, `outcome` | charges of a [`Limiter`](crate::Limiter), by class index (`"0"`, `"1"`, …) | at each charge |
//! | `admit_limiter_entries` | gauge | | live entries, [`Limiter::len`](crate::Limiter::len) | at each new entry's first charge, and after each reclaim scan that freed one |
//! | `admit_limiter_cap` | gauge | | [`Limiter::cap`](crate::Limiter::cap) | once, at build |
//! | `admit_inflight_decisions_total` | counter | `outcome` | acquires of [`Quotas`](crate::fairness::Quotas) (both permit kinds) | at each acquire |
//! | `admit_inflight_ops` | gauge | | ops in flight, all actors, [`Quotas::total_in_flight`](crate::fairness::Quotas::total_in_flight) | when that is read |
//! | `admit_inflight_overflow_ops` | gauge | | of which counted in the shared overflow, [`Quotas::overflow_in_flight`](crate::fairness::Quotas::overflow_in_flight) | when either is read |
//! | `admit_inflight_total_limit` | gauge | | the adaptive total's L ([`AdaptiveQuotas::limit`](crate::fairness::AdaptiveQuotas::limit)) | when a window closes |
//! | `admit_inflight_latency_seconds` | gauge | | the adaptive total's latency estimate, the last window's mean ([`AdaptiveQuotas::latency_estimate`](crate::fairness::AdaptiveQuotas::latency_estimate)) | when a window with samples closes |
//! | `admit_inflight_total_refused_total` | counter | `priority` | ops the adaptive total refused, by class | at each such refusal |
//! | `admit_volume_decisions_total` | counter | `outcome` | writes charged to a [`RateLimit`](crate::quota::RateLimit) | at each charge |
//! | `admit_bucket_decisions_total` | counter | `outcome` | takes of a [`TokenBucket`](crate::TokenBucket) | at each take |
//! | `admit_registrar_limited_total` | counter | `verb`, `bucket` | limited invocations ([`LimitedSink`](crate::registrar::LimitedSink)), by [`Verb::name`](crate::registrar::Verb::name) and [`Bucket::name`](crate::registrar::Bucket::name) | at each limited invocation |
//!
//! `outcome` is one of four disjoint values, so their sum is every decision:
//!
//! * `admitted`: granted, paid by the identity's or actor's own budget (its entry, its
//!   buckets);
//! * `overflow`: granted, but paid by the shared overflow budget because the table was full
//!   (the limiter's per-class overflow bucket, the in-flight quotas' overflow count: the
//!   decisions whose answer says `via_overflow()`). Only the limiter and the in-flight quotas
//!   have one;
//! * `refused`: not granted, whichever budget refused it;
//! * `would_refuse`: a refusal that [shadow mode](crate::shadow) admitted instead (nothing
//!   charged). Run the same traffic enforced and in shadow mode and this counts what
//!   `refused` would have; it stays 0 for a primitive never switched to shadow mode.
//!
//! Not counted, because they are not decisions: a request that can never succeed as asked
//! ([`InvalidCharge`](crate::limiter::InvalidCharge): an unknown class, more than the burst),
//! a reading ahead of the primitive's clock, and a charge of 0 tokens.
//!
//! # Gauges
//!
//! No gauge moves on a hit. The limiter's entries gauge is set to [`Limiter::len`](crate::Limiter::len)
//! by the first charge of each new entry and by each reclaim scan that freed one (both off the
//! hit path), so it follows the table without anyone asking; a set that races another may
//! leave it one change behind until the next. The in-flight gauges would have to move at every
//! acquire and release, a shared write on the hottest path, so they are set only when read:
//! call [`Quotas::total_in_flight`](crate::fairness::Quotas::total_in_flight) where the
//! metrics are scraped (it sets both) or on a timer.
//!
//! # Consistency
//!
//! Each counter is exact: one increment per decision, after the decision, however many threads
//! decide at once. Counters are not a snapshot of one another: a scrape between a decision and
//! its increment misses that decision until the next scrape.

pub use crate::instrument::Labels;
pub use crate::registrar::metrics_sink::MetricsSink;
