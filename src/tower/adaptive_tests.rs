//! The layer in front of [`AdaptiveQuotas`]: the priority is the server's choice (a route,
//! never a client's header), and the latency sample stops at the response's headers, so a
//! client reading a long body slowly neither lowers L nor looks like a stalled writer.

use super::tests::{by_actor, run};
use super::*;
use crate::fairness::{AdaptiveQuotas, AdaptiveTotal, Priority, Quotas};
use crate::gate::Gate;
use crate::{Clock, ManualClock};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use std::time::Duration;
use tower_service::Service;

const TARGET: Duration = Duration::from_millis(5);

fn adaptive(initial: u32, clock: &ManualClock) -> AdaptiveQuotas<ManualClock> {
    let total = AdaptiveTotal::new(TARGET).initial(initial);
    Quotas::builder()
        .build_adaptive_with_clock(total, clock.clone())
        .unwrap()
}

/// With the adaptive total full to normal's share, a request on the route the server calls
/// critical is admitted and another refused, though both carry `x-priority: critical`.
#[test]
fn the_priority_is_the_servers_choice_by_route_not_a_header() {
    let quotas = adaptive(2, &ManualClock::new());
    let layer = AdmitLayer::builder(by_actor())
        .gate(Gate::<ManualClock>::new().in_flight(quotas.clone()))
        .priority_by(|_, uri, _| match uri.path() {
            "/console" => Priority::Critical,
            _ => Priority::Normal,
        })
        .build()
        .unwrap();
    let request = |path: &str, actor: &str| {
        Request::get(path)
            .header("x-actor", actor)
            .header("x-priority", "critical")
            .body(())
            .unwrap()
    };
    // Normal's share of L = 2 is one op.
    let first = layer.shared.decide(&request("/x", "a"));
    assert!(first.verdict.is_ok());
    let refused = layer.shared.decide(&request("/x", "b"));
    let Err(AdmitRefused::InFlight(by)) = &refused.verdict else {
        panic!("the client's header was read");
    };
    assert_eq!(by.total().map(|t| t.priority()), Some(Priority::Normal));
    let console = layer.shared.decide(&request("/console", "b"));
    assert!(console.verdict.is_ok(), "the server's critical route");
    assert_eq!(quotas.in_flight(), 2);
    drop((first, console));
    assert_eq!(quotas.in_flight(), 0);
}

/// A class stated by a trusted proxy counts; the same header from any other peer, or
/// malformed, or repeated, is ignored, and the server's own choice stands.
#[test]
fn a_priority_header_counts_only_from_a_trusted_proxy() {
    use std::net::SocketAddr;
    let quotas = adaptive(2, &ManualClock::new());
    let proxies = ClientIp::x_forwarded_for().trust("10.0.0.0/8").unwrap();
    let layer = AdmitLayer::builder(by_actor())
        .gate(Gate::<ManualClock>::new().in_flight(quotas.clone()))
        .priority_by(|_, uri, _| match uri.path() {
            "/console" => Priority::Critical,
            _ => Priority::Normal,
        })
        .priority_from_header(http::HeaderName::from_static("x-priority"), proxies)
        .build()
        .unwrap();
    let request = |path: &str, actor: &str, peer: [u8; 4], stated: &[&str]| {
        let mut builder = Request::get(path).header("x-actor", actor);
        for value in stated {
            builder = builder.header("x-priority", *value);
        }
        let mut request = builder.body(()).unwrap();
        request
            .extensions_mut()
            .insert(SocketAddr::from((peer, 40_000)));
        request
    };
    const PROXY: [u8; 4] = [10, 0, 0, 1];
    const DIRECT: [u8; 4] = [192, 0, 2, 9];
    // Normal's share of L = 2 is one op: taken.
    let first = layer.shared.decide(&request("/x", "a", PROXY, &[]));
    assert!(first.verdict.is_ok());
    // Refused: normal by the server's choice, the header ignored.
    for (peer, stated) in [
        (DIRECT, &["critical"][..]),
        (PROXY, &["CRITICAL"][..]),
        (PROXY, &["critical", "critical"][..]),
        (PROXY, &["critical, normal"][..]),
        (PROXY, &[][..]),
    ] {
        let refused = layer.shared.decide(&request("/x", "b", peer, stated));
        let Err(AdmitRefused::InFlight(by)) = &refused.verdict else {
            panic!("{peer:?} {stated:?} was believed");
        };
        assert_eq!(by.total().map(|t| t.priority()), Some(Priority::Normal));
    }
    // Stated by the trusted proxy, with whitespace: critical, admitted.
    let stated = layer
        .shared
        .decide(&request("/x", "b", PROXY, &[" critical "]));
    assert!(stated.verdict.is_ok(), "the proxy's critical");
    assert_eq!(quotas.in_flight(), 2);
    drop(stated);
    // Without a header the server's route still decides.
    let console = layer.shared.decide(&request("/console", "c", DIRECT, &[]));
    assert!(console.verdict.is_ok(), "the server's critical route");
    drop((first, console));
    assert_eq!(quotas.in_flight(), 0);
}

/// The handler answers in a quarter target; its client then reads the body for a hundred
/// targets. The total's sample is the quarter target (L does not fall, the estimate is the
/// headers' time), and the place is held until the body is done.
#[test]
fn the_sample_stops_at_the_response_headers() {
    run(async {
        let clock = ManualClock::starting_at(1 << 30);
        let quotas = adaptive(8, &clock);
        let layer = AdmitLayer::builder(by_actor())
            .gate(Gate::<ManualClock>::new().in_flight(quotas.clone()))
            .build()
            .unwrap();
        let handler_clock = clock.clone();
        let app = tower::service_fn(move |_: Request<MeteredBody<()>>| {
            handler_clock.advance(TARGET / 4);
            async { Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from("x")))) }
        });
        let mut service = layer.layer(app);
        let request = |actor: &str| Request::get("/").header("x-actor", actor).body(()).unwrap();
        let response = service.call(request("reader")).await.unwrap();
        assert_eq!(quotas.model_samples(), (0, 1), "sampled at the headers");
        for _ in 0..100 {
            clock.advance(TARGET);
            drop(service.call(request("other")).await.unwrap());
        }
        assert_eq!(quotas.in_flight(), 1, "the slow reader holds its place");
        assert!(quotas.limit() >= 8, "L fell: {}", quotas.limit());
        let estimate = quotas.latency_estimate().unwrap();
        assert!(estimate <= TARGET / 4, "{estimate:?}");
        let before = quotas.model_samples();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "x");
        assert_eq!(quotas.in_flight(), 0, "freed at the last frame");
        assert_eq!(quotas.model_samples(), before, "no second sample");
        assert!(clock.now_ns() > 0);
    });
}
