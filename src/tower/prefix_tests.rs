//! The source's prefix over the layer: an attacker rotating fresh addresses inside one /48,
//! or inside P of them, beside honest newcomers from other prefixes. Without a prefix limit
//! the rotation fills the per-address table and the newcomers pay (and are refused by) the
//! shared overflow bucket; with one, given first, each attacker prefix holds at most
//! `b_p + r_p·D_a` address entries, and while `P × that + the honest set ≤ the address cap`
//! every newcomer is admitted on an entry of its own (see "When newcomers keep their budget"
//! on [`IpPrefix`]).

use super::*;
use crate::gate::{KeyKind, Limit};
use crate::{BucketConfig, Limiter, ManualClock};
use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tower::{Layer, Service};

/// Both tables' cap: small, so the flood fills it within a second.
const CAP: usize = 64;
/// The run: one attacker request a millisecond, for 2 s.
const RUN_MS: u64 = 2_000;
/// A newcomer every 50 ms, each making two requests.
const NEWCOMER_EVERY_MS: u64 = 50;

/// Per address: 10/s in bursts of 2 (an entry drains for at most D_a = 0.2 s).
fn per_address() -> BucketConfig {
    BucketConfig::new(2, Duration::from_millis(100)).unwrap()
}

/// Per prefix: 10/s in bursts of 4.
fn per_prefix() -> BucketConfig {
    BucketConfig::new(4, Duration::from_millis(100)).unwrap()
}

fn peer() -> PeerIp {
    PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>()
}

/// The gate: the prefix limit first if `with_prefix`, then the per-address limit.
fn gate(clock: &ManualClock, with_prefix: bool) -> Arc<Gate<ManualClock>> {
    let limiter = |config| {
        Limiter::builder()
            .cap(CAP)
            .build_with_clock([config], clock.clone())
            .unwrap()
    };
    let mut gate = Gate::new();
    if with_prefix {
        gate = gate
            .rates(
                limiter(per_prefix()),
                [Limit::new("per prefix", 0).keyed_by(KeyKind::SourcePrefix)],
            )
            .unwrap();
    }
    Arc::new(
        gate.rates(limiter(per_address()), [Limit::new("per address", 0)])
            .unwrap(),
    )
}

/// What one run saw.
#[derive(Debug)]
struct Seen {
    honest_admitted: u64,
    honest_refused: u64,
    attacker_admitted: u64,
    /// Charges the per-address limit's shared overflow bucket paid.
    overflow: u64,
}

/// The `n`-th fresh address (its own /64) inside attacker prefix `p`.
fn attacker(p: u16, n: u64) -> IpAddr {
    let n = u16::try_from(n % 65_536).unwrap();
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xa000 + p, n, 0, 0, 0, 1))
}

/// The `i`-th newcomer: an address in a /48 of its own.
fn newcomer(i: u64) -> IpAddr {
    let i = u16::try_from(i).unwrap();
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x1000 + i, 0, 0, 0, 0, 1))
}

/// The flood over the layer, from `prefixes` attacker /48s in turn, one request a
/// millisecond, beside the newcomers.
fn flood(prefixes: u16, with_prefix: bool) -> Seen {
    let clock = ManualClock::new();
    let gate = gate(&clock, with_prefix);
    let builder = AdmitLayer::builder(peer()).source(peer());
    let mut service = if with_prefix {
        let layer = builder
            .source_prefix(IpPrefix::default())
            .gate(Arc::clone(&gate))
            .build()
            .unwrap();
        Either::A(layer.layer(ok_service()))
    } else {
        let layer = builder.gate(Arc::clone(&gate)).build().unwrap();
        Either::B(layer.layer(ok_service()))
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut admitted = |ip: IpAddr| {
        let request = Request::get("/")
            .extension(ConnectInfo(SocketAddr::new(ip, 4711)))
            .body(Body::empty())
            .unwrap();
        let status = match &mut service {
            Either::A(s) => runtime.block_on(s.call(request)).unwrap().status(),
            Either::B(s) => runtime.block_on(s.call(request)).unwrap().status(),
        };
        status == StatusCode::OK
    };
    let mut seen = Seen {
        honest_admitted: 0,
        honest_refused: 0,
        attacker_admitted: 0,
        overflow: 0,
    };
    for ms in 0..RUN_MS {
        clock.advance(Duration::from_millis(1));
        let p = u16::try_from(ms % u64::from(prefixes)).unwrap();
        if admitted(attacker(p, ms / u64::from(prefixes))) {
            seen.attacker_admitted += 1;
        }
        // A newcomer's two requests, 1 ms apart.
        let phase = ms % NEWCOMER_EVERY_MS;
        if ms >= 500 && phase <= 1 {
            if admitted(newcomer(ms / NEWCOMER_EVERY_MS)) {
                seen.honest_admitted += 1;
            } else {
                seen.honest_refused += 1;
            }
        }
    }
    let (limiter, _) = gate.limits().last().unwrap();
    seen.overflow = limiter.overflow_charges(0).unwrap();
    seen
}

/// Two layer types (with and without the prefix) in one variable.
enum Either<A, B> {
    A(A),
    B(B),
}

fn ok_service() -> impl Service<
    Request<MeteredBody<Body>>,
    Response = Response<Body>,
    Error = Infallible,
    Future = std::future::Ready<Result<Response<Body>, Infallible>>,
> + Clone {
    tower::service_fn(|_: Request<MeteredBody<Body>>| {
        std::future::ready(Ok::<_, Infallible>(Response::new(Body::empty())))
    })
}

/// One /48 rotating a fresh /64 per request (1,000 a second): without a prefix limit its
/// drained entries fill the per-address table, newcomers land on the shared overflow bucket
/// the flood keeps empty, and are refused; with one, the /48 holds at most
/// `b_p + r_p·D_a = 4 + 10/s × 0.2 s = 6` entries, and every newcomer is admitted on its own.
#[test]
fn one_rotating_prefix_leaves_newcomers_their_own_entries() {
    let without = flood(1, false);
    assert!(without.overflow > 0, "{without:?}");
    assert!(without.honest_refused > 0, "{without:?}");
    let with = flood(1, true);
    assert_eq!(with.honest_refused, 0, "{with:?}");
    assert_eq!(with.overflow, 0, "no newcomer paid the overflow: {with:?}");
    // The /48's budget over the run: b_p + r_p × 2 s.
    assert!(with.attacker_admitted <= 4 + 20, "{with:?}");
}

/// P = 8 prefixes: 8 × 6 = 48 attacker entries at most, beside the newcomers' few, within
/// the cap of 64; the prefix table holds 8 attacker prefixes and the newcomers' of the last
/// 0.4 s. Newcomers keep their budget; without the prefix limit they do not.
#[test]
fn p_rotating_prefixes_within_the_bound_leave_newcomers_their_own_entries() {
    let without = flood(8, false);
    assert!(without.honest_refused > 0, "{without:?}");
    let with = flood(8, true);
    assert_eq!(with.honest_refused, 0, "{with:?}");
    assert_eq!(with.overflow, 0, "{with:?}");
    assert!(with.attacker_admitted <= 8 * (4 + 20), "{with:?}");
}

/// The layer hands the gate the prefix of the address it keys: two addresses of one /24
/// share the prefix's budget, another /24 has its own, and the addresses keep theirs.
#[test]
fn addresses_of_one_prefix_share_its_budget() {
    let clock = ManualClock::new();
    let gate = gate(&clock, true);
    let layer = AdmitLayer::builder(peer())
        .source(peer())
        .source_prefix(IpPrefix::default())
        .gate(Arc::clone(&gate))
        .build()
        .unwrap();
    let mut service = layer.layer(ok_service());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut status = |ip: [u8; 4]| {
        let request = Request::get("/")
            .extension(ConnectInfo(SocketAddr::from((ip, 4711))))
            .body(Body::empty())
            .unwrap();
        runtime.block_on(service.call(request)).unwrap().status()
    };
    // The /24's burst of 4, two per address (each address's own burst).
    for ip in [
        [192, 0, 2, 1],
        [192, 0, 2, 1],
        [192, 0, 2, 2],
        [192, 0, 2, 2],
    ] {
        assert_eq!(status(ip), StatusCode::OK);
    }
    assert_eq!(
        status([192, 0, 2, 3]),
        StatusCode::TOO_MANY_REQUESTS,
        "the /24"
    );
    assert_eq!(status([192, 0, 3, 1]), StatusCode::OK, "another /24");
    // The prefix is not any address's bucket: 192.0.2.0 itself still has its burst.
    let (per_address, _) = gate.limits().last().unwrap();
    let zero = IpAddr::from([192, 0, 2, 0]);
    assert!(per_address.try_acquire_n(&zero, 0, 2).is_ok());
    // And code beside the layer names the same prefix bucket with `IpPrefix::hashed`.
    let (per_prefix, _) = gate.limiter().unwrap();
    let prefix = IpPrefix::default().hashed(IpAddr::from([192, 0, 2, 200]));
    assert!(
        per_prefix.try_acquire_hashed(&prefix, 0, 1).is_err(),
        "drained"
    );
}

/// A gate that charges the prefix needs a layer that reads it, and the other way round.
#[test]
fn a_layer_and_a_gate_must_agree_on_the_prefix() {
    let clock = ManualClock::new();
    let refused = AdmitLayer::builder(peer())
        .source(peer())
        .gate(gate(&clock, true))
        .build()
        .unwrap_err();
    assert_eq!(
        refused,
        AdmitConfigError::SourcePrefixUnmatched {
            gate_keys_prefix: true
        }
    );
    assert!(refused.to_string().contains("source_prefix"));
    let refused = AdmitLayer::builder(peer())
        .source(peer())
        .source_prefix(IpPrefix::default())
        .gate(gate(&clock, false))
        .build()
        .unwrap_err();
    assert_eq!(
        refused,
        AdmitConfigError::SourcePrefixUnmatched {
            gate_keys_prefix: false
        }
    );
    // Any defence keyed by the prefix counts.
    let keyed: Gate =
        Gate::new().in_flight_keyed(crate::fairness::Quotas::new(), KeyKind::SourcePrefix);
    let layer = AdmitLayer::builder(peer())
        .source(ClientIp::x_forwarded_for().trust("10.0.0.0/8").unwrap())
        .source_prefix(IpPrefix::new(16, 32).unwrap())
        .gate(keyed)
        .build();
    assert!(layer.is_ok());
}

/// Behind a trusted proxy the prefix is the forwarded client's, never the proxy's: two
/// clients of one /24 behind the balancer share their /24's burst, a client of another /24
/// keeps its own.
#[test]
fn behind_a_proxy_the_prefix_is_the_client_s() {
    let clock = ManualClock::new();
    let gate = gate(&clock, true);
    let client_ip = || {
        ClientIp::x_forwarded_for()
            .from_extension::<ConnectInfo<SocketAddr>>()
            .trust("10.0.0.0/8")
            .unwrap()
    };
    let layer = AdmitLayer::builder(client_ip())
        .source(client_ip())
        .source_prefix(IpPrefix::default())
        .gate(Arc::clone(&gate))
        .build()
        .unwrap();
    let mut service = layer.layer(ok_service());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut status = |client: &str| {
        let request = Request::get("/")
            .header("x-forwarded-for", client)
            .extension(ConnectInfo(SocketAddr::from(([10, 0, 0, 1], 4711))))
            .body(Body::empty())
            .unwrap();
        runtime.block_on(service.call(request)).unwrap().status()
    };
    for client in ["203.0.113.1", "203.0.113.1", "203.0.113.2", "203.0.113.2"] {
        assert_eq!(status(client), StatusCode::OK, "{client}");
    }
    assert_eq!(
        status("203.0.113.3"),
        StatusCode::TOO_MANY_REQUESTS,
        "the /24's burst"
    );
    assert_eq!(status("198.51.100.1"), StatusCode::OK, "another /24");
}
