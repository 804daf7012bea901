//! A rule's weight read from a header: believed from a trusted proxy only, over a real server
//! and client on loopback; held to the rule's bounds whatever the header says; the rule's own
//! weight otherwise.

use super::routes::header_weight;
use super::tests::{by_actor, client, run, serve, HttpClient};
use super::*;
use crate::gate::{Cost, Gate, KeyKind, Limit};
use crate::{BucketConfig, Limiter, ManualClock};
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode};
use http_body_util::Full;
use proptest::prelude::*;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const BURST: u32 = 100_000;
const COST: HeaderName = HeaderName::from_static("x-cost");
/// The rule's own weight, and its header weight's bounds.
const WEIGHT: u32 = 5;
const MIN: u32 = 4;
const MAX: u32 = 300;
/// The limit's own floor (`Cost::Weight { min }`), below the rule's.
const LIMIT_MIN: u32 = 3;

fn gate(clock: &ManualClock) -> Arc<Gate<ManualClock>> {
    let config = BucketConfig::new(BURST, Duration::from_secs(3_600)).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([config], clock.clone())
        .unwrap();
    let limit = Limit::new("units", 0)
        .keyed_by(KeyKind::Claim)
        .cost(Cost::Weight { min: LIMIT_MIN });
    Arc::new(Gate::new().rates(limiter, [limit]).unwrap())
}

fn spent(gate: &Gate<ManualClock>) -> u32 {
    let (limiter, _) = gate.limiter().unwrap();
    let now = limiter.clock().now_ns();
    BURST
        - limiter
            .peek_at("alice".as_bytes(), 0, 1, now)
            .unwrap()
            .available()
}

/// A server whose `/` rule reads `x-cost`, believed from the proxies `trusted` names (the
/// client is 127.0.0.1).
async fn server(trusted: &str) -> (SocketAddr, Arc<Gate<ManualClock>>) {
    let clock = ManualClock::new();
    let weighed = gate(&clock);
    let proxies = ClientIp::x_forwarded_for()
        .trust(trusted)
        .unwrap()
        .from_extension::<ConnectInfo<SocketAddr>>();
    let rule = Rule::exact("/")
        .weight(WEIGHT)
        .weight_from_header(COST, &proxies, MIN..=MAX);
    let routes = Routes::new(gate(&clock))
        .unwrap()
        .rule(rule, Arc::clone(&weighed))
        .unwrap();
    let layer = AdmitLayer::builder(by_actor())
        .routes(routes)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(layer);
    (serve(app).await, weighed)
}

/// Sends `GET /` as alice with each of `costs` as an `x-cost` line.
async fn send(client: &HttpClient, addr: SocketAddr, costs: &[&str]) -> StatusCode {
    let mut request = Request::get(format!("http://{addr}/")).header("x-actor", "alice");
    for cost in costs {
        request = request.header(COST, *cost);
    }
    let request = request.body(Full::new(Bytes::new())).unwrap();
    client.request(request).await.unwrap().status()
}

/// What each header charges: the proxy's figure within the bounds, the rule's weight when it
/// is absent or malformed.
const TRUSTED_ROWS: &[(&[&str], u32)] = &[
    (&["120"], 120),
    (&["0"], MIN),
    (&["1"], MIN),
    (&[" 7 "], 7),
    (&["300"], MAX),
    (&["301"], MAX),
    // 2^32: wrapped into a u32 it would be 0.
    (&["4294967296"], MAX),
    (&["4294967301"], MAX),
    (&["99999999999999999999999999999999"], MAX),
    (&[], WEIGHT),
    (&[""], WEIGHT),
    (&["-5"], WEIGHT),
    (&["+5"], WEIGHT),
    (&["2.5"], WEIGHT),
    (&["12, 13"], WEIGHT),
    (&["0x10"], WEIGHT),
    (&["7", "8"], WEIGHT),
];

#[test]
fn a_trusted_proxy_s_weight_is_charged_within_the_rule_s_bounds() {
    run(async {
        let (addr, weighed) = server("127.0.0.0/8").await;
        let client = client();
        let mut total = 0;
        for (costs, charged) in TRUSTED_ROWS {
            assert_eq!(
                send(&client, addr, costs).await,
                StatusCode::OK,
                "{costs:?}"
            );
            total += charged;
            assert_eq!(
                spent(&weighed),
                total,
                "x-cost: {costs:?} charges {charged}"
            );
        }
    });
}

#[test]
fn an_untrusted_peer_s_weight_is_not_read() {
    run(async {
        // The client, 127.0.0.1, is not a trusted proxy: whatever it writes, the rule's own
        // weight.
        let (addr, weighed) = server("10.0.0.0/8").await;
        let client = client();
        let mut total = 0;
        for (costs, _) in TRUSTED_ROWS {
            assert_eq!(
                send(&client, addr, costs).await,
                StatusCode::OK,
                "{costs:?}"
            );
            total += WEIGHT;
            assert_eq!(spent(&weighed), total, "x-cost: {costs:?} is not read");
        }
    });
}

#[test]
fn a_header_weight_above_the_limit_s_burst_is_capped_then_refused_by_the_limit() {
    run(async {
        // Bounds up to 300 over a burst of 100,000: 333 maximal claims pass, the 334th is
        // refused by the limit (never a wrapped, cheap charge).
        let (addr, weighed) = server("127.0.0.0/8").await;
        let client = client();
        let huge = "18446744073709551616";
        for _ in 0..BURST / MAX {
            assert_eq!(send(&client, addr, &[huge]).await, StatusCode::OK);
        }
        assert_eq!(spent(&weighed), BURST / MAX * MAX);
        assert_eq!(
            send(&client, addr, &[huge]).await,
            StatusCode::TOO_MANY_REQUESTS
        );
    });
}

#[test]
fn bounds_that_do_not_hold_the_rule_s_weight_are_refused_naming_the_rule() {
    let clock = ManualClock::new();
    let proxies = ClientIp::x_forwarded_for().trust("10.0.0.0/8").unwrap();
    // The last: an empty range, 9..=8.
    for (weight, (min, max)) in [(5, (0, 10)), (5, (6, 10)), (5, (1, 4)), (5, (9, 8))] {
        let bounds = min..=max;
        let rule =
            Rule::exact("/")
                .weight(weight)
                .weight_from_header(COST, &proxies, bounds.clone());
        let refused = Routes::new(gate(&clock))
            .unwrap()
            .rule(rule, gate(&clock))
            .unwrap_err();
        assert_eq!(refused.rule, RuleId::Rule(0));
        assert_eq!(
            refused.why,
            AdmitConfigError::WeightBounds {
                weight,
                min: *bounds.start(),
                max: *bounds.end(),
            }
        );
    }
}

#[test]
fn header_weight_reads_one_line_of_digits_saturating() {
    let mut headers = HeaderMap::new();
    assert_eq!(header_weight(&headers, &COST), None);
    headers.insert(COST, HeaderValue::from_static("42"));
    assert_eq!(header_weight(&headers, &COST), Some(42));
    headers.insert(COST, HeaderValue::from_static("00042"));
    assert_eq!(header_weight(&headers, &COST), Some(42));
    headers.insert(COST, HeaderValue::from_static("4294967295"));
    assert_eq!(header_weight(&headers, &COST), Some(u32::MAX));
    headers.insert(COST, HeaderValue::from_static("4294967296"));
    assert_eq!(header_weight(&headers, &COST), Some(u32::MAX));
    headers.append(COST, HeaderValue::from_static("1"));
    assert_eq!(header_weight(&headers, &COST), None, "two lines");
}

proptest! {
    /// The invariant: whatever the header's bytes and whoever the peer, the weight is within
    /// the rule's bounds, and it is the rule's own unless the peer is trusted and the header
    /// one line of digits.
    #[test]
    fn header_weight_within_bounds(
        value in proptest::collection::vec(any::<u8>(), 0..24),
        digits in "[0-9]{1,30}",
        as_digits in any::<bool>(),
        trusted in any::<bool>(),
        weight in 1_u32..1_000,
        below in 0_u32..1_000,
        above in 0_u32..1_000,
    ) {
        let min = weight.saturating_sub(below).max(1);
        let max = weight.saturating_add(above);
        let proxies = ClientIp::x_forwarded_for().trust("10.0.0.0/8").unwrap();
        let rule = Rule::exact("/").weight(weight).weight_from_header(COST, &proxies, min..=max);
        let bytes = if as_digits { digits.clone().into_bytes() } else { value };
        let Ok(value) = HeaderValue::from_bytes(&bytes) else {
            return Ok(());
        };
        let mut request = Request::get("/").header(COST, value).body(()).unwrap();
        let peer: [u8; 4] = if trusted { [10, 0, 0, 1] } else { [192, 0, 2, 9] };
        request.extensions_mut().insert(SocketAddr::from((peer, 4_711)));
        let charged = rule.weight_for(&request);
        prop_assert!((min..=max).contains(&charged), "{charged} outside {min}..={max}");
        let read = header_weight(request.headers(), &COST);
        if !trusted || read.is_none() {
            prop_assert_eq!(charged, weight);
        }
        if let (true, Some(read)) = (trusted, read) {
            prop_assert_eq!(charged, read.clamp(min, max));
        }
    }
}
