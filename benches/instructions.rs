//! Instructions per decision, counted by callgrind: deterministic where wall-clock time on a
//! shared two-vCPU machine is not, so that a change of a few percent on a hot path shows, and
//! `.ci/instructions.sh` can hold admit's rows to a committed baseline.
//!
//! Run: `cargo bench --bench instructions` (valgrind must be installed; add `--features
//! tower,redis` for the layer's row and the fleet's, which needs a local `redis-server`). An
//! argument after `--` keeps only the rows whose name contains it. Results are in
//! docs/benchmarks.md ("Instructions per decision (callgrind)").
//!
//! **Why a harness of our own, not `iai-callgrind`/`gungraun`:** those need their runner binary
//! installed with `cargo install` at the library's exact version (minutes of compiling on a
//! fresh CI machine, and one more version to keep in step with the lock), and they count one
//! call of a benchmark function, whose setup must be split off by hand. What this bench needs
//! is small and has no new dependency: this binary runs itself once per case under `valgrind
//! --tool=callgrind --collect-atstart=no --toggle-collect=*icount_decide*`, so that only the
//! calls of the `#[inline(never)]` wrapper [`icount_decide`] are counted: not the setup, not
//! the loop around the wrapper, not other threads. A case makes `2N` decisions: the first `N`
//! through an uncounted twin of the wrapper (they pay what the first calls pay once: lazy
//! initialisation, a first allocation), the next `N` counted; instructions per decision =
//! count / `N`. That is the difference between a run of `2N` and a run of `N` divided by `N`,
//! taken inside one process, so that both halves see the same hash keys.
//!
//! The bench profile builds this package in one codegen unit (`Cargo.toml`), so that how the
//! compiler partitions this binary, which moved unchanged rows by up to 5 % between builds,
//! no longer does: a count depends on the code alone.
//!
//! Every admit case hands `now` from a `ManualClock` (or reads one), so its path does not
//! depend on time. What still moves between runs: the tables' SipHash keys are drawn from the
//! OS per instance, so where 200 keys land (and how far a probe goes) changes from run to run,
//! by up to about 2 % on a 200-key row; so each case runs in `ADMIT_ICOUNT_RUNS` processes
//! (default 3) and a row is their mean, printed with the lowest and highest run when they
//! differ. The anchors read their own clocks (governor's quanta clock).
//!
//! Each row puts an admit decision beside its anchors, measured in the same harness:
//! governor's direct and keyed limiters, a DashMap in-flight counter (`benches/in_flight`),
//! tokio's `Semaphore`, the obvious three-crate request stack (`benches/request_stacks`),
//! tower_governor's layer (`benches/tower_services`), keyed by a header and, for the client
//! behind one trusted proxy, by its `SmartIpKeyExtractor` beside admit's `ClientIp`. The fleet's leased decision
//! (`benches/fleet_server`) needs a lease granted by a live Redis: without a `redis-server` at
//! `/usr/bin/redis-server` its row is skipped with a note.
//!
//! How to read three anchors: the DashMap in-flight counter is the fairness bench's, which
//! removes an actor when its count returns to zero (so one actor acquiring and releasing
//! inserts and removes it each time); tokio's `Semaphore` is not keyed (one count for every
//! actor), a floor rather than a contender; governor keeps every key, so it has no saturated
//! miss, and its hit stands beside admit's.
//!
//! `ADMIT_ICOUNT_OUT=PATH` also writes the admit rows as `name<TAB>instructions` lines, which
//! `.ci/instructions.sh` compares with `benches/instructions.baseline`.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use admit::fairness::Quotas;
use admit::gate::Gate;
use admit::quota::{Quota, RateLimit};
use admit::{BucketConfig, HashedActor, Limiter, ManualClock, TokenBucket};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, RateLimiter};
use request_stacks::Stack as _;
use std::collections::HashMap;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::process::Command;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

#[cfg(feature = "redis")]
#[allow(dead_code)]
mod fleet_server;
#[allow(dead_code)]
mod in_flight;
#[allow(dead_code)]
mod request_stacks;
#[allow(dead_code)]
mod shared;
#[cfg(feature = "tower")]
mod tower_services;

/// Decisions counted per run, after as many uncounted.
const N: u64 = 10_000;
/// Keys cycled by the many-key rows.
const KEYS: usize = 200;
/// The clients of a service the default table must fit: 10,000 keys cycled.
const MANY_KEYS: usize = 10_000;
/// Where every `ManualClock` here stands, and so the reading handed to every decision.
const NOW_NS: u64 = 1 << 40;
const CASE_ENV: &str = "ADMIT_ICOUNT_CASE";
const N_ENV: &str = "ADMIT_ICOUNT_N";
const OUT_ENV: &str = "ADMIT_ICOUNT_OUT";
/// Processes per case (`ADMIT_ICOUNT_RUNS`), each with its own hash keys; a row is their mean.
const RUNS: usize = 3;
const RUNS_ENV: &str = "ADMIT_ICOUNT_RUNS";
/// valgrinds run at once (`ADMIT_ICOUNT_JOBS`); the default is the machine's parallelism.
const JOBS_ENV: &str = "ADMIT_ICOUNT_JOBS";

/// The one function callgrind counts: one decision, `f(arg)`, inlined into it.
#[inline(never)]
fn icount_decide<A, F: FnMut(A) -> bool>(f: &mut F, arg: A) -> bool {
    f(arg)
}

/// The same, for the decisions that warm up and are not counted. Its body differs from
/// [`icount_decide`]'s (the `black_box`), or LLVM would merge the two into one symbol.
#[inline(never)]
fn uncounted_decide<A, F: FnMut(A) -> bool>(f: &mut F, arg: A) -> bool {
    black_box(f(arg))
}

/// Decisions a case makes before the counted ones (set by the child): they pay whatever the
/// first calls pay once, so that the count divided by the counted decisions is one decision.
static WARM: AtomicU64 = AtomicU64::new(0);

/// Makes one decision per argument, the first [`WARM`] through [`uncounted_decide`], the rest
/// through [`icount_decide`]; returns how many admitted.
fn decide_each<A>(args: impl IntoIterator<Item = A>, mut f: impl FnMut(A) -> bool) -> u64 {
    let warm = WARM.load(Ordering::Relaxed);
    let mut admitted = 0;
    for (i, arg) in (0..).zip(args) {
        let ok = if i < warm {
            uncounted_decide(&mut f, black_box(arg))
        } else {
            icount_decide(&mut f, black_box(arg))
        };
        admitted += u64::from(ok);
    }
    admitted
}

/// `n` decisions over `keys`, cycled.
fn cycled<T>(keys: &[T], n: u64) -> impl Iterator<Item = &T> {
    keys.iter().cycle().take(n as usize)
}

/// The `i`-th identity: `client-` and nine digits, 16 bytes (as in `benches/limiter.rs`).
fn identity(i: usize) -> String {
    format!("client-{i:09}")
}

fn identities(n: usize) -> Vec<String> {
    (0..n).map(identity).collect()
}

/// What a case's decisions must have done; checked in the child, so that a row never counts
/// a path other than the one it names.
enum Expect {
    AllAdmitted,
    AllRefused,
}

/// One measured program: its setup, then `n` decisions. Returns the decisions admitted.
struct Case {
    id: &'static str,
    expect: Expect,
    run: fn(u64) -> u64,
}

// ---- admit's cases --------------------------------------------------------------------------

/// Burst 2^30, one token per 1,024 ms (as in `benches/limiter.rs`): no case exhausts it.
fn deep() -> BucketConfig {
    BucketConfig::new(1 << 30, Duration::from_millis(1 << 10)).unwrap()
}

/// One token, back after 1,000 s: empty after one take.
fn shallow() -> BucketConfig {
    BucketConfig::new(1, Duration::from_secs(1_000)).unwrap()
}

fn limiter(cap: usize, config: BucketConfig) -> Limiter<ManualClock> {
    Limiter::builder()
        .cap(cap)
        .build_with_clock([config], ManualClock::starting_at(NOW_NS))
        .unwrap()
}

/// A limiter at the default cap with every key of `keys` charged once.
fn limiter_charged(config: BucketConfig, keys: &[String]) -> Limiter<ManualClock> {
    let l = limiter(admit::DEFAULT_CAP, config);
    for key in keys {
        assert!(l.try_acquire_at(key.as_bytes(), 0, NOW_NS).is_ok());
    }
    l
}

fn bucket_hit(n: u64) -> u64 {
    let bucket = TokenBucket::new(deep());
    decide_each(0..n, |_| bucket.try_acquire_at(NOW_NS).is_ok())
}

fn bucket_refusal(n: u64) -> u64 {
    let bucket = TokenBucket::new(shallow());
    assert!(bucket.try_acquire_at(NOW_NS).is_ok());
    decide_each(0..n, |_| bucket.try_acquire_at(NOW_NS).is_ok())
}

fn limiter_hits(n: u64, keys: usize) -> u64 {
    let keys = identities(keys);
    let l = limiter_charged(deep(), &keys);
    decide_each(cycled(&keys, n), |key| {
        l.try_acquire_at(key.as_bytes(), 0, NOW_NS).is_ok()
    })
}

fn limiter_hit_1(n: u64) -> u64 {
    limiter_hits(n, 1)
}

fn limiter_hit_200(n: u64) -> u64 {
    limiter_hits(n, KEYS)
}

/// 10,000 keys cycled through the default cap: every one of them has an entry of its own (a
/// cap too small for them would put most decisions on the overflow bucket; asserted not to).
fn limiter_hit_10k(n: u64) -> u64 {
    let keys = identities(MANY_KEYS);
    let l = limiter_charged(deep(), &keys);
    assert_eq!(
        l.overflow_charges(0),
        Some(0),
        "the default cap holds 10,000 keys"
    );
    decide_each(cycled(&keys, n), |key| {
        l.try_acquire_at(key.as_bytes(), 0, NOW_NS).is_ok()
    })
}

fn limiter_refusal(n: u64) -> u64 {
    let keys = identities(1);
    let l = limiter_charged(shallow(), &keys);
    decide_each(cycled(&keys, n), |key| {
        l.try_acquire_at(key.as_bytes(), 0, NOW_NS).is_ok()
    })
}

fn limiter_hashed_once(n: u64) -> u64 {
    let keys = identities(KEYS);
    let l = limiter_charged(deep(), &keys);
    let actors: Vec<_> = keys
        .iter()
        .map(|k| HashedActor::new(k.as_bytes()))
        .collect();
    decide_each(cycled(&actors, n), |actor| {
        l.try_acquire_hashed_at(actor, 0, 1, NOW_NS).is_ok()
    })
}

/// The table filled to its cap by other identities, each charged half its burst (so none is
/// full, so reclaimable, for decades); then 200 absent keys: each lands on the overflow bucket.
fn limiter_saturated_miss(n: u64) -> u64 {
    let l = limiter(admit::DEFAULT_CAP, deep());
    for i in 0..l.cap() {
        let filler = format!("filler-{i:09}");
        l.try_acquire_n_at(filler.as_bytes(), 0, 1 << 29, NOW_NS)
            .unwrap();
    }
    assert_eq!(l.len(), l.cap(), "the table must be saturated");
    let keys = identities(KEYS);
    let before = l.overflow_charges(0).unwrap();
    let admitted = decide_each(cycled(&keys, n), |key| {
        l.try_acquire_at(key.as_bytes(), 0, NOW_NS).is_ok()
    });
    assert_eq!(l.overflow_charges(0).unwrap() - before, n, "not all misses");
    admitted
}

/// `n` keys never seen, in a table of 2^17 (at most 2 × 10^4 of them live: no reclaim).
fn limiter_first_charge(n: u64) -> u64 {
    let l = limiter(1 << 17, deep());
    let keys = identities(n as usize);
    decide_each(&keys, |key| {
        l.try_acquire_at(key.as_bytes(), 0, NOW_NS).is_ok()
    })
}

/// One place taken and given back (the permit dropped), one actor, through the fairness
/// bench's contender.
fn in_flight_of<C: in_flight::Contender>(n: u64) -> u64 {
    let c = C::new();
    let actor = identity(0);
    decide_each(0..n, |_| match c.acquire(&actor) {
        Some(held) => {
            c.release(&actor, held);
            true
        }
        None => false,
    })
}

fn in_flight_admit(n: u64) -> u64 {
    in_flight_of::<in_flight::Admit>(n)
}

/// The same acquire and release through [`AdaptiveQuotas`](admit::fairness::AdaptiveQuotas)
/// (target 5 ms, L far above the one op in flight), its clock read at admission and at
/// release: a `ManualClock` that stands still (one load a reading, as the default
/// `RecentClock`'s), so no window closes here, as none does but once a target latency.
fn in_flight_adaptive(n: u64) -> u64 {
    use admit::fairness::{AdaptiveTotal, Priority};
    let total = AdaptiveTotal::new(Duration::from_millis(5)).initial(1_024);
    let quotas = Quotas::builder()
        .quota(in_flight::Q)
        .build_adaptive_with_clock(total, ManualClock::starting_at(NOW_NS))
        .unwrap();
    let actor = identity(0);
    decide_each(0..n, |_| {
        match quotas.try_acquire_as(actor.as_str(), Priority::Normal) {
            Ok(permit) => {
                drop(permit);
                true
            }
            Err(_) => false,
        }
    })
}

fn volume(n: u64) -> u64 {
    let q = Quota::new(Quota::MAX_EVENTS, Quota::MAX_BYTES, Duration::from_secs(1)).unwrap();
    let v = RateLimit::with_clock(q, ManualClock::starting_at(NOW_NS));
    let keys = identities(KEYS);
    decide_each(cycled(&keys, n), |key| {
        v.try_acquire_at(key.as_str(), request_stacks::BYTES, NOW_NS)
            .is_ok()
    })
}

/// admit's three defences in one `Gate`, sized like the request bench's (`request_stacks`):
/// quota 8, 4,096 actors, every limit far above what a run reaches.
fn gate() -> Gate<ManualClock> {
    let clock = ManualClock::starting_at(NOW_NS);
    let names = request_stacks::NAMES;
    let q = Quota::new(Quota::MAX_EVENTS, Quota::MAX_BYTES, Duration::from_secs(1)).unwrap();
    Gate::new()
        .in_flight(Quotas::builder().quota(8).actors(names).build().unwrap())
        .rate(
            Limiter::builder()
                .cap(names)
                .build_with_clock([deep()], clock.clone())
                .unwrap(),
            0,
        )
        .volume(RateLimit::with_clock(q, clock))
}

/// One request through the gate, its pass dropped at once, each name hashed per request.
fn gate_per_request(n: u64) -> u64 {
    let gate = gate();
    let names = request_stacks::names();
    let bytes = request_stacks::BYTES;
    for name in &names {
        assert!(gate.try_acquire_at(name.as_str(), bytes, NOW_NS).is_ok());
    }
    decide_each(cycled(&names, n), |name| {
        gate.try_acquire_at(name.as_str(), bytes, NOW_NS).is_ok()
    })
}

/// The same, handed each actor hashed once (as a server does per connection).
fn gate_hashed_once(n: u64) -> u64 {
    let gate = gate();
    let actors: Vec<_> = request_stacks::names()
        .iter()
        .map(|name| HashedActor::new(name.as_str()))
        .collect();
    let bytes = request_stacks::BYTES;
    for actor in &actors {
        assert!(gate.try_acquire_hashed_at(actor, bytes, NOW_NS).is_ok());
    }
    decide_each(cycled(&actors, n), |actor| {
        gate.try_acquire_hashed_at(actor, bytes, NOW_NS).is_ok()
    })
}

/// One request of the two-key composition (`request_stacks::two_keys`): the in-flight place
/// and the volume by the claim, one rate limit by the source and one by the claim.
fn gate_two_keys(n: u64) -> u64 {
    use request_stacks::two_keys::{AdmitGateTwoKeys, TwoKeys};
    let stack = AdmitGateTwoKeys::new();
    let keys: Vec<TwoKeys> = request_stacks::actors::<AdmitGateTwoKeys>(&request_stacks::names());
    let now = stack.now_ns();
    for key in &keys {
        assert!(stack.request(key, now));
    }
    decide_each(cycled(&keys, n), |key| stack.request(key, now))
}

// ---- the anchors ----------------------------------------------------------------------------

fn governor_quota(config: (u32, Duration)) -> governor::Quota {
    governor::Quota::with_period(config.1)
        .unwrap()
        .allow_burst(NonZeroU32::new(config.0).unwrap())
}

const GOVERNOR_DEEP: (u32, Duration) = (1 << 30, Duration::from_millis(1 << 10));
const GOVERNOR_SHALLOW: (u32, Duration) = (1, Duration::from_secs(1_000));

fn governor_direct(n: u64, config: (u32, Duration), drain: bool) -> u64 {
    let g: DefaultDirectRateLimiter = RateLimiter::direct(governor_quota(config));
    if drain {
        assert!(g.check().is_ok());
    }
    decide_each(0..n, |_| g.check().is_ok())
}

fn governor_direct_hit(n: u64) -> u64 {
    governor_direct(n, GOVERNOR_DEEP, false)
}

fn governor_direct_refusal(n: u64) -> u64 {
    governor_direct(n, GOVERNOR_SHALLOW, true)
}

fn governor_keyed(n: u64, keys: usize, config: (u32, Duration)) -> u64 {
    let g: DefaultKeyedRateLimiter<String> = RateLimiter::keyed(governor_quota(config));
    let keys = identities(keys);
    for key in &keys {
        assert!(g.check_key(key).is_ok());
    }
    decide_each(cycled(&keys, n), |key| g.check_key(key).is_ok())
}

fn governor_keyed_hit_1(n: u64) -> u64 {
    governor_keyed(n, 1, GOVERNOR_DEEP)
}

fn governor_keyed_hit_200(n: u64) -> u64 {
    governor_keyed(n, KEYS, GOVERNOR_DEEP)
}

fn governor_keyed_hit_10k(n: u64) -> u64 {
    governor_keyed(n, MANY_KEYS, GOVERNOR_DEEP)
}

fn governor_keyed_refusal(n: u64) -> u64 {
    governor_keyed(n, 1, GOVERNOR_SHALLOW)
}

fn governor_keyed_first(n: u64) -> u64 {
    let g: DefaultKeyedRateLimiter<String> = RateLimiter::keyed(governor_quota(GOVERNOR_DEEP));
    let keys = identities(n as usize);
    decide_each(&keys, |key| g.check_key(key).is_ok())
}

fn in_flight_dashmap(n: u64) -> u64 {
    in_flight_of::<in_flight::Dash>(n)
}

fn tokio_semaphore(n: u64) -> u64 {
    let s = tokio::sync::Semaphore::new(in_flight::Q as usize);
    decide_each(0..n, |_| s.try_acquire().is_ok())
}

/// The same by hand: two governor keyed limiters, a DashMap in-flight count and a DashMap
/// volume count.
fn obvious_two_keys(n: u64) -> u64 {
    use request_stacks::two_keys::{ObviousTwoKeys, TwoKeys};
    let stack = ObviousTwoKeys::new();
    let keys: Vec<TwoKeys> = request_stacks::actors::<ObviousTwoKeys>(&request_stacks::names());
    for key in &keys {
        assert!(stack.request(key, 0));
    }
    decide_each(cycled(&keys, n), |key| stack.request(key, 0))
}

fn obvious_stack(n: u64) -> u64 {
    let stack = request_stacks::Obvious::new();
    let names = request_stacks::names();
    for name in &names {
        assert!(stack.request(name, 0));
    }
    decide_each(cycled(&names, n), |name| stack.request(name, 0))
}

// ---- the tower layer (feature `tower`) ------------------------------------------------------

/// One request served, its response dropped; every service answers at once. The requests
/// carry one hot key and are built before the run.
#[cfg(feature = "tower")]
fn serve_each<S, B>(service: S, n: u64) -> u64
where
    S: tower::Service<http::Request<axum::body::Body>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
{
    let keys = [http::HeaderValue::from_static("client-0")];
    serve_all(service, |n| tower_services::requests(&keys, n), n)
}

/// [`serve_each`] for the requests `make` builds (`make(n)`: `n` of them).
#[cfg(feature = "tower")]
fn serve_all<S, B>(
    mut service: S,
    make: impl Fn(usize) -> Vec<http::Request<axum::body::Body>>,
    n: u64,
) -> u64
where
    S: tower::Service<http::Request<axum::body::Body>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
{
    use tower_services::serve;
    for r in make(1) {
        assert_eq!(serve(&mut service, r).status(), 200);
    }
    decide_each(make(n as usize), |r| serve(&mut service, r).status() == 200)
}

/// One request from a trusted balancer with one forwarded hop, served by `service`.
#[cfg(feature = "tower")]
fn serve_forwarded<S, B>(service: S, n: u64) -> u64
where
    S: tower::Service<http::Request<axum::body::Body>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
{
    serve_all(service, tower_services::forwarded_requests, n)
}

#[cfg(feature = "tower")]
fn tower_none(n: u64) -> u64 {
    serve_each(tower::service_fn(tower_services::ok), n)
}

#[cfg(feature = "tower")]
fn tower_admit(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::admit_layer(ManualClock::starting_at(NOW_NS));
    serve_each(layer.layer(tower::service_fn(tower_services::ok)), n)
}

#[cfg(feature = "tower")]
fn tower_rate(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::rate_layer(ManualClock::starting_at(NOW_NS));
    serve_each(layer.layer(tower::service_fn(tower_services::ok)), n)
}

#[cfg(feature = "tower")]
fn tower_admit_routes(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::admit_routes_layer(ManualClock::starting_at(NOW_NS));
    serve_each(layer.layer(tower::service_fn(tower_services::ok)), n)
}

#[cfg(feature = "tower")]
fn tower_admit_fields(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::admit_fields_layer(ManualClock::starting_at(NOW_NS));
    serve_each(layer.layer(tower::service_fn(tower_services::ok)), n)
}

#[cfg(feature = "tower")]
fn tower_governor_headers(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::governor_headers_layer();
    serve_each(layer.layer(tower::service_fn(tower_services::ok)), n)
}

#[cfg(feature = "tower")]
fn tower_governor(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::governor_layer();
    serve_each(layer.layer(tower::service_fn(tower_services::ok)), n)
}

#[cfg(feature = "tower")]
fn tower_none_forwarded(n: u64) -> u64 {
    serve_forwarded(tower::service_fn(tower_services::ok), n)
}

#[cfg(feature = "tower")]
fn tower_admit_client_ip(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::admit_client_ip_layer(ManualClock::starting_at(NOW_NS));
    serve_forwarded(layer.layer(tower::service_fn(tower_services::ok)), n)
}

#[cfg(feature = "tower")]
fn tower_rate_client_ip(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::rate_client_ip_layer(ManualClock::starting_at(NOW_NS));
    serve_forwarded(layer.layer(tower::service_fn(tower_services::ok)), n)
}

#[cfg(feature = "tower")]
fn tower_governor_smart(n: u64) -> u64 {
    use tower::Layer;
    let layer = tower_services::governor_smart_layer();
    serve_forwarded(layer.layer(tower::service_fn(tower_services::ok)), n)
}

/// The key alone: `ClientIp`'s extraction of the one forwarded hop, and tower_governor's
/// `SmartIpKeyExtractor`'s, from the same requests (built before the run, read by reference).
#[cfg(feature = "tower")]
fn extract_each(n: u64, extract: impl FnMut(&http::Request<axum::body::Body>) -> bool) -> u64 {
    let requests = tower_services::forwarded_requests(n as usize);
    decide_each(requests.iter(), extract)
}

#[cfg(feature = "tower")]
fn extract_client_ip(n: u64) -> u64 {
    use admit::tower::KeyExtractor;
    let key = tower_services::client_ip();
    let client = std::net::IpAddr::from([203, 0, 113, 7]);
    extract_each(n, |r| key.extract(r) == Ok(client))
}

#[cfg(feature = "tower")]
fn extract_smart(n: u64) -> u64 {
    use tower_governor::key_extractor::{KeyExtractor, SmartIpKeyExtractor};
    let client = std::net::IpAddr::from([203, 0, 113, 7]);
    extract_each(n, |r| SmartIpKeyExtractor.extract(r).ok() == Some(client))
}

// ---- the fleet (feature `redis`) ------------------------------------------------------------

/// One hot identity whose lease keeps up (a huge budget, a lease cap of 2^19), as in
/// `benches/fleet.rs`: one CAS on the lease word. Needs a local `redis-server`.
#[cfg(feature = "redis")]
fn fleet_leased(n: u64) -> u64 {
    use admit::Clock as _;
    let Some(server) = fleet_server::start_server() else {
        panic!("no redis-server");
    };
    let leased = fleet_server::fleet(server.1, 1 << 19, fleet_server::huge());
    fleet_server::warm(&leased);
    let now = leased.clock().now_ns();
    let admitted = decide_each(0..n, |_| leased.try_acquire_at("hot", 0, now).is_ok());
    drop(leased);
    drop(server);
    admitted
}

// ---- the rows -------------------------------------------------------------------------------

macro_rules! case {
    ($f:ident, $expect:ident) => {
        Case {
            id: stringify!($f),
            expect: Expect::$expect,
            run: $f,
        }
    };
}

fn cases() -> Vec<Case> {
    #[allow(unused_mut)]
    let mut cases = vec![
        case!(bucket_hit, AllAdmitted),
        case!(bucket_refusal, AllRefused),
        case!(limiter_hit_1, AllAdmitted),
        case!(limiter_hit_200, AllAdmitted),
        case!(limiter_hit_10k, AllAdmitted),
        case!(limiter_refusal, AllRefused),
        case!(limiter_hashed_once, AllAdmitted),
        case!(limiter_saturated_miss, AllAdmitted),
        case!(limiter_first_charge, AllAdmitted),
        case!(in_flight_admit, AllAdmitted),
        case!(in_flight_adaptive, AllAdmitted),
        case!(volume, AllAdmitted),
        case!(gate_per_request, AllAdmitted),
        case!(gate_hashed_once, AllAdmitted),
        case!(governor_direct_hit, AllAdmitted),
        case!(governor_direct_refusal, AllRefused),
        case!(governor_keyed_hit_1, AllAdmitted),
        case!(governor_keyed_hit_200, AllAdmitted),
        case!(governor_keyed_hit_10k, AllAdmitted),
        case!(governor_keyed_refusal, AllRefused),
        case!(governor_keyed_first, AllAdmitted),
        case!(in_flight_dashmap, AllAdmitted),
        case!(tokio_semaphore, AllAdmitted),
        case!(obvious_stack, AllAdmitted),
        case!(gate_two_keys, AllAdmitted),
        case!(obvious_two_keys, AllAdmitted),
    ];
    #[cfg(feature = "tower")]
    cases.extend([
        case!(tower_none, AllAdmitted),
        case!(tower_admit, AllAdmitted),
        case!(tower_rate, AllAdmitted),
        case!(tower_admit_routes, AllAdmitted),
        case!(tower_governor, AllAdmitted),
        case!(tower_admit_fields, AllAdmitted),
        case!(tower_governor_headers, AllAdmitted),
        case!(tower_none_forwarded, AllAdmitted),
        case!(tower_admit_client_ip, AllAdmitted),
        case!(tower_rate_client_ip, AllAdmitted),
        case!(tower_governor_smart, AllAdmitted),
        case!(extract_client_ip, AllAdmitted),
        case!(extract_smart, AllAdmitted),
    ]);
    #[cfg(feature = "redis")]
    cases.push(case!(fleet_leased, AllAdmitted));
    cases
}

/// A count: one case's instructions per decision, or one case's less another's (a layer's
/// overhead over the bare service).
#[derive(Clone, Copy)]
enum Measure {
    Case(&'static str),
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    Over(&'static str, &'static str),
}

struct Row {
    name: &'static str,
    admit: Measure,
    anchors: Vec<(&'static str, Measure)>,
    /// Why the row cannot be measured here, if it cannot.
    skip: Option<&'static str>,
}

fn row(name: &'static str, admit: &'static str, anchors: &[(&'static str, &'static str)]) -> Row {
    Row {
        name,
        admit: Measure::Case(admit),
        anchors: anchors
            .iter()
            .map(|&(label, case)| (label, Measure::Case(case)))
            .collect(),
        skip: None,
    }
}

fn rows() -> Vec<Row> {
    let direct = "governor check";
    let keyed = "governor check_key";
    let keyed_200 = [(keyed, "governor_keyed_hit_200")];
    let obvious = [("governor+DashMap+DashMap", "obvious_stack")];
    #[allow(unused_mut)]
    let mut rows = vec![
        row(
            "bucket hit",
            "bucket_hit",
            &[(direct, "governor_direct_hit")],
        ),
        row(
            "bucket refusal",
            "bucket_refusal",
            &[(direct, "governor_direct_refusal")],
        ),
        row(
            "limiter hit, 1 key",
            "limiter_hit_1",
            &[(keyed, "governor_keyed_hit_1")],
        ),
        row("limiter hit, 200 keys", "limiter_hit_200", &keyed_200),
        row(
            "limiter hit, 10,000 keys, default cap",
            "limiter_hit_10k",
            &[(keyed, "governor_keyed_hit_10k")],
        ),
        row(
            "limiter refusal, 1 key",
            "limiter_refusal",
            &[(keyed, "governor_keyed_refusal")],
        ),
        row(
            "limiter hit, hashed once, 200 keys",
            "limiter_hashed_once",
            &keyed_200,
        ),
        row(
            "limiter saturated miss, 200 keys",
            "limiter_saturated_miss",
            &keyed_200,
        ),
        row(
            "limiter first charge",
            "limiter_first_charge",
            &[(keyed, "governor_keyed_first")],
        ),
        row(
            "in-flight acquire+release",
            "in_flight_admit",
            &[
                ("DashMap", "in_flight_dashmap"),
                ("tokio Semaphore", "tokio_semaphore"),
            ],
        ),
        row(
            "in-flight acquire+release, adaptive",
            "in_flight_adaptive",
            &[("in-flight acquire+release", "in_flight_admit")],
        ),
        row("volume charge, 200 keys", "volume", &keyed_200),
        row(
            "gate request, hashed per request",
            "gate_per_request",
            &obvious,
        ),
        row("gate request, hashed once", "gate_hashed_once", &obvious),
        row(
            "gate request, claim + source, two limits",
            "gate_two_keys",
            &[("2 governor+DashMap+DashMap", "obvious_two_keys")],
        ),
    ];
    #[cfg(feature = "tower")]
    rows.extend([
        Row {
            name: "tower layer overhead, 1 hot key",
            admit: Measure::Over("tower_admit", "tower_none"),
            anchors: vec![(
                "tower_governor",
                Measure::Over("tower_governor", "tower_none"),
            )],
            skip: None,
        },
        // The same with one route rule the requests do not match (the default rule admits).
        Row {
            name: "tower layer overhead, 1 route rule",
            admit: Measure::Over("tower_admit_routes", "tower_none"),
            anchors: vec![(
                "tower_governor",
                Measure::Over("tower_governor", "tower_none"),
            )],
            skip: None,
        },
        // The IETF `RateLimit-Policy` / `RateLimit` fields on every response, beside
        // tower_governor writing its `x-ratelimit-*` headers (`use_headers`).
        Row {
            name: "tower layer overhead, IETF fields on",
            admit: Measure::Over("tower_admit_fields", "tower_none"),
            anchors: vec![(
                "tower_governor headers",
                Measure::Over("tower_governor_headers", "tower_none"),
            )],
            skip: None,
        },
        // The client behind one trusted balancer: `ClientIp` reading its one forwarded hop,
        // beside tower_governor's `SmartIpKeyExtractor` on the same requests.
        Row {
            name: "tower layer overhead, 1 forwarded hop",
            admit: Measure::Over("tower_admit_client_ip", "tower_none_forwarded"),
            anchors: vec![(
                "tower_governor Smart",
                Measure::Over("tower_governor_smart", "tower_none_forwarded"),
            )],
            skip: None,
        },
        // The rate-limit layer (`RateLayer`): the same limiter with nothing else, the inner
        // service's request, future and response passed through unchanged.
        Row {
            name: "rate-limit layer overhead, 1 hot key",
            admit: Measure::Over("tower_rate", "tower_none"),
            anchors: vec![(
                "tower_governor",
                Measure::Over("tower_governor", "tower_none"),
            )],
            skip: None,
        },
        Row {
            name: "rate-limit layer overhead, 1 forwarded hop",
            admit: Measure::Over("tower_rate_client_ip", "tower_none_forwarded"),
            anchors: vec![(
                "tower_governor Smart",
                Measure::Over("tower_governor_smart", "tower_none_forwarded"),
            )],
            skip: None,
        },
        row(
            "client IP of 1 forwarded hop, key alone",
            "extract_client_ip",
            &[("SmartIpKeyExtractor", "extract_smart")],
        ),
    ]);
    #[cfg(feature = "redis")]
    {
        let mut fleet = row(
            "fleet leased decision, 1 key",
            "fleet_leased",
            &[("admit limiter hit", "limiter_hit_1")],
        );
        if !std::path::Path::new("/usr/bin/redis-server").exists() {
            fleet.skip = Some("no /usr/bin/redis-server: the leased path needs a live Redis");
        }
        rows.push(fleet);
    }
    rows
}

// ---- the parent: runs the cases under callgrind ---------------------------------------------

/// Instructions callgrind collected in `case` run for `n` decisions.
fn collected(case: &str, n: u64) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--collect-atstart=no",
            "--toggle-collect=*icount_decide*",
        ])
        .arg(exe)
        .env(CASE_ENV, case)
        .env(N_ENV, n.to_string())
        .output()
        .map_err(|e| format!("valgrind: {e} (install it: apt-get install -y valgrind)"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{case} at n = {n} failed:\n{stderr}"));
    }
    stderr
        .lines()
        .find_map(|line| {
            let (_, count) = line.split_once("Collected :")?;
            count.trim().parse().ok()
        })
        .ok_or_else(|| format!("{case}: no `Collected :` line in\n{stderr}"))
}

fn mean(runs: &[f64]) -> f64 {
    runs.iter().sum::<f64>() / runs.len().max(1) as f64
}

/// A `Measure` over the runs: the mean, and the lowest and highest run.
struct Counted {
    mean: f64,
    low: f64,
    high: f64,
}

impl Counted {
    fn of(runs: &[f64]) -> Self {
        let fold = |pick: fn(f64, f64) -> f64| runs.iter().copied().reduce(pick).unwrap_or(0.0);
        Self {
            mean: mean(runs),
            low: fold(f64::min),
            high: fold(f64::max),
        }
    }

    /// ` (runs LOW–HIGH)` when the runs differ by a whole instruction or more.
    fn spread(&self) -> String {
        if self.high - self.low >= 1.0 {
            format!(" (runs {:.0}–{:.0})", self.low, self.high)
        } else {
            String::new()
        }
    }
}

/// The cases the rows name, each once.
fn cases_of(rows: &[Row]) -> Vec<&'static str> {
    let mut wanted: Vec<&'static str> = Vec::new();
    for r in rows.iter().filter(|r| r.skip.is_none()) {
        for m in std::iter::once(r.admit).chain(r.anchors.iter().map(|a| a.1)) {
            let (a, b) = match m {
                Measure::Case(a) => (a, None),
                Measure::Over(a, b) => (a, Some(b)),
            };
            for case in std::iter::once(a).chain(b) {
                if !wanted.contains(&case) {
                    wanted.push(case);
                }
            }
        }
    }
    wanted
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn parent() -> Result<(), String> {
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with("--"));
    let rows: Vec<Row> = rows()
        .into_iter()
        .filter(|r| filter.as_deref().is_none_or(|f| r.name.contains(f)))
        .collect();
    let runs = env_usize(RUNS_ENV).unwrap_or(RUNS).max(1);
    let jobs = env_usize(JOBS_ENV)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
        .max(1);
    // Every run of every case, shared out to `jobs` threads, each running one valgrind at a time.
    let wanted: Vec<&'static str> = cases_of(&rows)
        .into_iter()
        .flat_map(|case| std::iter::repeat_n(case, runs))
        .collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<HashMap<&str, Vec<f64>>> = Mutex::new(HashMap::new());
    let failure: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                while let Some(&case) = wanted.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match collected(case, N) {
                        Ok(count) => results
                            .lock()
                            .unwrap()
                            .entry(case)
                            .or_default()
                            .push(count as f64 / N as f64),
                        Err(e) => *failure.lock().unwrap() = Some(e),
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().unwrap() {
        return Err(e);
    }
    let results = results.into_inner().unwrap();
    let get = |m: Measure| -> Result<Counted, String> {
        let one = |c: &str| {
            results
                .get(c)
                .map(|runs| Counted::of(runs))
                .ok_or(format!("{c}: not run"))
        };
        match m {
            Measure::Case(c) => one(c),
            Measure::Over(a, b) => {
                let (a, b) = (one(a)?, one(b)?);
                Ok(Counted {
                    mean: a.mean - b.mean,
                    low: a.low - b.high,
                    high: a.high - b.low,
                })
            }
        }
    };
    println!(
        "instructions per decision (callgrind: {N} decisions counted after {N} uncounted; \
         mean of {runs} runs)"
    );
    let mut machine = String::new();
    for r in &rows {
        if let Some(why) = r.skip {
            println!("{:<36} skipped: {why}", r.name);
            continue;
        }
        let admit = get(r.admit)?;
        let mut line = format!("{:<36} admit {:>5.0}", r.name, admit.mean);
        for &(label, m) in &r.anchors {
            let anchor = get(m)?;
            line += &format!(
                "   {label} {:>5.0}   ratio {:.2}",
                anchor.mean,
                admit.mean / anchor.mean
            );
        }
        println!("{line}{}", admit.spread());
        machine += &format!("{}\t{:.0}\n", r.name, admit.mean);
    }
    if let Ok(path) = std::env::var(OUT_ENV) {
        std::fs::write(&path, machine).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

// ---- the child: one case, under callgrind ---------------------------------------------------

fn child(id: &str) -> Result<(), String> {
    let n: u64 = std::env::var(N_ENV)
        .ok()
        .and_then(|n| n.parse().ok())
        .ok_or("ADMIT_ICOUNT_N is not a number")?;
    let cases = cases();
    let case = cases
        .iter()
        .find(|c| c.id == id)
        .ok_or_else(|| format!("no case {id}"))?;
    // `n` decisions warm up, the next `n` are counted.
    WARM.store(n, Ordering::Relaxed);
    let admitted = (case.run)(2 * n);
    let want = match case.expect {
        Expect::AllAdmitted => 2 * n,
        Expect::AllRefused => 0,
    };
    if admitted == want {
        Ok(())
    } else {
        Err(format!(
            "{id}: {admitted} of {} admitted, expected {want}",
            2 * n
        ))
    }
}

fn main() {
    let result = match std::env::var(CASE_ENV) {
        Ok(id) => child(&id),
        Err(_) => parent(),
    };
    if let Err(e) = result {
        eprintln!("instructions: {e}");
        std::process::exit(1);
    }
}
