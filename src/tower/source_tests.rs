//! The claim and the source from one request: the rate by the client's address, the volume by
//! the key it claims, over a real socket.

use super::tests::{by_actor, client, get_as, hello, run, serve};
use super::*;
use crate::gate::{Gate, Limit};
use crate::limiter::LimiterRefused;
use crate::quota::{Quota, RateLimit, RateLimitRefused};
use crate::{BucketConfig, Limiter, ManualClock};
use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{Request, StatusCode};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tower::{Layer, Service, ServiceExt};

/// A source limit of burst 3 a minute (keyed by the source, a `Limit`'s default) and a volume
/// quota of one request a minute per claim, on `clock`.
fn claim_and_source_gate(clock: &ManualClock) -> Arc<Gate<ManualClock>> {
    let rate = BucketConfig::new(3, Duration::from_secs(20)).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([rate], clock.clone())
        .unwrap();
    let quota = Quota::new(1, 1 << 20, Duration::from_secs(60)).unwrap();
    let gate = Gate::new()
        .rates(limiter, [Limit::new("per-address", 0)])
        .unwrap()
        .volume(RateLimit::with_clock(quota, clock.clone()));
    Arc::new(gate)
}

fn peer() -> PeerIp {
    PeerIp::new().from_extension::<ConnectInfo<SocketAddr>>()
}

/// Claims `a`, `a`, `b`, `c`, `d` from one address: `a`'s second request is refused by its
/// own volume and gives the address's token back; `b` and `c` take the last two; `d`, a
/// fresh claim, is refused by the address's rate. The fields describe the address's bucket
/// whichever claim asks.
#[test]
fn claims_share_their_address_s_rate_and_keep_their_own_volume() {
    run(async {
        let clock = ManualClock::new();
        let gate = claim_and_source_gate(&clock);
        let layer = AdmitLayer::builder(by_actor())
            .source(peer())
            .gate(Arc::clone(&gate))
            .rate_limit_headers(true)
            .build()
            .unwrap();
        let addr = serve(hello().layer(layer)).await;
        let client = client();
        let first = get_as(&client, addr, "a").await;
        assert_eq!(first.status, StatusCode::OK);
        assert_eq!(
            first.header("ratelimit"),
            Some(r#""per-address";r=2;t=20, "volume";r=1048576;t=60, "volume-requests";r=0;t=60"#),
            "the address's bucket, and the claim's volume"
        );
        let again = get_as(&client, addr, "a").await;
        assert_eq!(
            again.status,
            StatusCode::TOO_MANY_REQUESTS,
            "a's own volume"
        );
        assert_eq!(
            again.header("ratelimit"),
            Some(r#""per-address";r=2;t=20, "volume-requests";r=0;t=60"#),
            "the address's token came back; the volume's requests refused, `t` = Retry-After"
        );
        assert_eq!(again.retry_after(), Some("60"));
        for claim in ["b", "c"] {
            assert_eq!(get_as(&client, addr, claim).await.status, StatusCode::OK);
        }
        let fresh = get_as(&client, addr, "d").await;
        assert_eq!(fresh.status, StatusCode::TOO_MANY_REQUESTS, "a fresh claim");
        assert_eq!(fresh.retry_after(), Some("20"));

        let loopback = IpAddr::from([127, 0, 0, 1]);
        let (limiter, _) = gate.limiter().unwrap();
        assert!(limiter.try_acquire(&loopback, 0).is_err(), "127.0.0.1 paid");
        for claim in ["a", "b", "c", "d"] {
            assert!(
                limiter.try_acquire(claim.as_bytes(), 0).is_ok(),
                "no claim paid the rate: {claim}"
            );
        }
        let volume = gate.volume_quota().unwrap();
        let events = |claim: &str| volume.usage(claim.as_bytes()).events;
        assert_eq!(
            [events("a"), events("b"), events("c"), events("d")],
            [1, 1, 1, 0]
        );
        assert_eq!(volume.usage(&loopback).events, 0, "the address no volume");
    });
}

/// Without a peer address there is no source: a missing key (500 by default, nothing
/// charged), or passed unchecked if the policy says so. The claim is never charged in the
/// source's place.
#[test]
fn a_request_without_a_source_is_a_missing_key_and_charges_nothing() {
    run(async {
        let clock = ManualClock::new();
        let gate = claim_and_source_gate(&clock);
        for policy in [MissingKeyPolicy::Refuse, MissingKeyPolicy::Pass] {
            let layer = AdmitLayer::builder(by_actor())
                .source(peer())
                .gate(Arc::clone(&gate))
                .missing_key(policy)
                .build()
                .unwrap();
            let mut service = layer.layer(tower::service_fn(|_: Request<MeteredBody<Body>>| {
                std::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(
                    Body::empty(),
                )))
            }));
            let request = Request::get("/")
                .header("x-actor", "a")
                .body(Body::empty())
                .unwrap();
            let response = service.ready().await.unwrap().call(request).await.unwrap();
            let want = match policy {
                MissingKeyPolicy::Refuse => StatusCode::INTERNAL_SERVER_ERROR,
                MissingKeyPolicy::Pass => StatusCode::OK,
            };
            assert_eq!(response.status(), want, "{policy:?}");
        }
        let (limiter, _) = gate.limiter().unwrap();
        assert!(
            limiter.try_acquire_n("a".as_bytes(), 0, 3).is_ok(),
            "the claim paid nothing"
        );
        assert_eq!(gate.volume_quota().unwrap().usage("a".as_bytes()).events, 0);
    });
}

/// Each refusal names its defence: the claim's volume, then the address's rate.
#[test]
fn the_refusals_say_which_defence_refused() {
    let clock = ManualClock::new();
    let gate = claim_and_source_gate(&clock);
    let layer = AdmitLayer::builder(by_actor())
        .source(peer())
        .gate(Arc::clone(&gate))
        .build()
        .unwrap();
    let mut service = layer.layer(tower::service_fn(|_: Request<MeteredBody<Body>>| {
        std::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(
            Body::empty(),
        )))
    }));
    let from = ConnectInfo(SocketAddr::from(([192, 0, 2, 7], 4711)));
    let mut ask = |claim: &str| {
        let request = Request::get("/")
            .header("x-actor", claim)
            .extension(from)
            .body(Body::empty())
            .unwrap();
        let response = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(service.call(request))
            .unwrap();
        response.extensions().get::<AdmitRefused>().cloned()
    };
    assert_eq!(ask("a"), None);
    assert!(matches!(
        ask("a"),
        Some(AdmitRefused::Volume(RateLimitRefused::Exceeded(_)))
    ));
    assert_eq!(ask("b"), None);
    assert_eq!(ask("c"), None);
    assert!(matches!(
        ask("d"),
        Some(AdmitRefused::Limiter(LimiterRefused::Limited(_)))
    ));
}
