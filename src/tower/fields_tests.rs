//! The IETF `RateLimit-Policy` / `RateLimit` fields over a real server on 127.0.0.1 and a
//! real client: one item per defence, numbered from the admission's own take; the refusing
//! item's `t` equal to `Retry-After`; names kept across a live reload; no identity written;
//! and no table read twice for them.

use super::tests::{client, run, send, serve, Answer, HttpClient};
use super::*;
use crate::fairness::Quotas;
use crate::gate::{Gate, KeyKind, Limit};
use crate::quota::{Quota, RateLimit};
use crate::{BucketConfig, Limiter, ManualClock};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Method, StatusCode};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

const POLICY: &str = r#""in-flight";q=2;qu="concurrent-requests", "per-second";q=3;w=3, "per-minute";q=5;w=60, "volume";q=1000;qu="content-bytes";w=60, "volume-requests";q=10;w=60"#;

/// Two places per claim; two named limits (burst 3, a token a second; burst 5, a token every
/// 12 s); 1,000 bytes and 10 requests a minute: all by the claim, on `clock`.
fn four_defences(clock: &ManualClock) -> (Arc<Gate<ManualClock>>, Quotas) {
    let quotas = Quotas::builder().quota(2).build().unwrap();
    let limiter = |burst, secs| {
        Limiter::builder()
            .build_with_clock(
                [BucketConfig::new(burst, Duration::from_secs(secs)).unwrap()],
                clock.clone(),
            )
            .unwrap()
    };
    let quota = Quota::new(10, 1_000, Duration::from_secs(60)).unwrap();
    let gate = Gate::new()
        .in_flight(quotas.clone())
        .rates(
            limiter(3, 1),
            [Limit::new("per-second", 0).keyed_by(KeyKind::Claim)],
        )
        .unwrap()
        .rates(
            limiter(5, 12),
            [Limit::new("per-minute", 0).keyed_by(KeyKind::Claim)],
        )
        .unwrap()
        .volume(RateLimit::with_clock(quota, clock.clone()));
    (Arc::new(gate), quotas)
}

fn app() -> Router {
    Router::new().route("/", get(|| async { "hello" }).post(|| async { "posted" }))
}

async fn serve_with_fields(gate: Arc<Gate<ManualClock>>) -> SocketAddr {
    let layer = AdmitLayer::builder(super::tests::by_actor())
        .gate(gate)
        .rate_limit_headers(true)
        .build()
        .unwrap();
    serve(app().layer(layer)).await
}

async fn post(client: &HttpClient, addr: SocketAddr, actor: &str, bytes: usize) -> Answer {
    let body = Bytes::from(vec![b'x'; bytes]);
    send(client, addr, Method::POST, "/", Some(actor), body).await
}

#[test]
fn a_gate_of_every_defence_states_each_item_from_its_take() {
    run(async {
        let clock = ManualClock::new();
        let (gate, _) = four_defences(&clock);
        let addr = serve_with_fields(gate).await;
        let client = client();
        let first = post(&client, addr, "a", 100).await;
        assert_eq!(first.status, StatusCode::OK);
        assert_eq!(first.header("ratelimit-policy"), Some(POLICY));
        // Its own place held (1 of 2), a token of each limit, 100 bytes and 1 request.
        assert_eq!(
            first.header("ratelimit"),
            Some(
                r#""in-flight";r=1;t=0, "per-second";r=2;t=1, "per-minute";r=4;t=12, "volume";r=900;t=60, "volume-requests";r=9;t=60"#
            )
        );
        clock.advance(Duration::from_secs(6));
        let second = post(&client, addr, "a", 300).await;
        assert_eq!(
            second.header("ratelimit"),
            Some(
                r#""in-flight";r=1;t=0, "per-second";r=2;t=1, "per-minute";r=3;t=18, "volume";r=600;t=54, "volume-requests";r=8;t=54"#
            ),
            "6 s on: the per-second bucket was full again, the minute's owes 6 s more"
        );
    });
}

#[test]
fn each_defence_s_refusal_states_t_as_its_retry_after() {
    run(async {
        let clock = ManualClock::new();
        let (gate, quotas) = four_defences(&clock);
        let addr = serve_with_fields(gate).await;
        let client = client();

        // The rate: a's fourth request this second. The place went back; the limits after
        // the refusing one were never reached.
        for _ in 0..3 {
            assert_eq!(post(&client, addr, "a", 0).await.status, StatusCode::OK);
        }
        let rate = post(&client, addr, "a", 0).await;
        assert_eq!(rate.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(rate.retry_after(), Some("1"));
        assert_eq!(rate.header("ratelimit-policy"), Some(POLICY));
        assert_eq!(
            rate.header("ratelimit"),
            Some(r#""in-flight";r=2;t=0, "per-second";r=0;t=1"#)
        );

        // The volume: b's 100 bytes past its 950. Both limits' tokens came back.
        assert_eq!(post(&client, addr, "b", 950).await.status, StatusCode::OK);
        let volume = post(&client, addr, "b", 100).await;
        assert_eq!(volume.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(volume.retry_after(), Some("60"));
        assert_eq!(
            volume.header("ratelimit"),
            Some(
                r#""in-flight";r=2;t=0, "per-second";r=2;t=1, "per-minute";r=4;t=12, "volume";r=50;t=60"#
            )
        );

        // In flight: c already holds both its places (the layer's key is the header's bytes).
        let held = [
            quotas.try_acquire("c".as_bytes()).unwrap(),
            quotas.try_acquire("c".as_bytes()).unwrap(),
        ];
        let in_flight = post(&client, addr, "c", 0).await;
        assert_eq!(in_flight.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(in_flight.retry_after(), Some("1"));
        assert_eq!(
            in_flight.header("ratelimit"),
            Some(r#""in-flight";r=0;t=1"#),
            "refused first: no other defence reached"
        );
        drop(held);
        assert_eq!(post(&client, addr, "c", 0).await.status, StatusCode::OK);
    });
}

#[test]
fn no_field_names_the_client_s_key_or_address() {
    run(async {
        let clock = ManualClock::new();
        let (gate, _) = four_defences(&clock);
        let layer = AdmitLayer::builder(super::tests::by_actor())
            .source(PeerIp::new().from_extension::<axum::extract::ConnectInfo<SocketAddr>>())
            .gate(gate)
            .rate_limit_headers(true)
            .build()
            .unwrap();
        let addr = serve(app().layer(layer)).await;
        let client = client();
        let secret = "tenant-7f3a9c";
        for bytes in [10, 2_000] {
            let answer = post(&client, addr, secret, bytes).await;
            for field in ["ratelimit-policy", "ratelimit"] {
                let value = answer.header(field).unwrap();
                assert!(!value.contains(secret), "{field}: {value}");
                assert!(!value.contains("127.0.0.1"), "{field}: {value}");
                assert!(!value.contains("pk="), "no partition key: {value}");
            }
        }
    });
}

#[test]
fn the_fields_read_no_entry_a_second_time() {
    run(async {
        let clock = ManualClock::new();
        let (gate, _) = four_defences(&clock);
        let addr = serve_with_fields(gate).await;
        let client = client();
        // The server runs on this thread (a current-thread runtime): every peek or check it
        // makes of a limiter's entry is counted here.
        let before = crate::limiter::LOOKUPS.with(|lookups| lookups.get());
        for bytes in [0, 100, 5_000] {
            let answer = post(&client, addr, "a", bytes).await;
            assert!(answer.header("ratelimit").is_some());
        }
        for _ in 0..3 {
            post(&client, addr, "a", 0).await; // the third refused by the rate
        }
        let after = crate::limiter::LOOKUPS.with(|lookups| lookups.get());
        assert_eq!(
            after, before,
            "the fields are the take's, not a second lookup"
        );
    });
}

#[test]
fn limits_without_a_name_of_their_own_are_items_by_index() {
    run(async {
        let clock = ManualClock::new();
        let limiter = || {
            Limiter::builder()
                .build_with_clock([BucketConfig::per_second(2).unwrap()], clock.clone())
                .unwrap()
        };
        // `Gate::rate` names each limit "rate": two of them cannot be told apart by name.
        let gate = Gate::new().rate(limiter(), 0).rate(limiter(), 0);
        let layer = AdmitLayer::builder(super::tests::by_actor())
            .gate(gate)
            .rate_limit_headers(true)
            .build()
            .unwrap();
        let addr = serve(app().layer(layer)).await;
        let answer = post(&client(), addr, "a", 0).await;
        assert_eq!(
            answer.header("ratelimit-policy"),
            Some(r#""l0";q=2;w=1, "l1";q=2;w=1"#)
        );
        assert_eq!(
            answer.header("ratelimit"),
            Some(r#""l0";r=1;t=1, "l1";r=1;t=1"#)
        );
    });
}

#[cfg(feature = "config")]
#[test]
fn items_keep_their_names_across_a_live_reload() {
    use crate::live::{LimitsConfig, LiveLimits};
    const PLAN: &str = r#"
[[admit.limit]]
name = "burst"
key = "claim"
rate = "1/s"
burst = 4

[[admit.limit]]
name = "hourly"
key = "claim"
rate = "100/h"
burst = 100
"#;
    run(async {
        let clock = ManualClock::new();
        let config = LimitsConfig::from_toml_str(PLAN).unwrap();
        let live = LiveLimits::from_config_with_clock(&config, clock.clone()).unwrap();
        let addr = serve_with_fields(Arc::new(live.gate().unwrap())).await;
        let client = client();
        let before = post(&client, addr, "a", 0).await;
        assert_eq!(
            before.header("ratelimit-policy"),
            Some(r#""burst";q=4;w=4, "hourly";q=100;w=3600"#)
        );
        let faster = PLAN.replace(r#"rate = "1/s""#, r#"rate = "2/s""#);
        live.reload_str(&faster).unwrap();
        let after = post(&client, addr, "a", 0).await;
        assert_eq!(
            after.header("ratelimit-policy"),
            Some(r#""burst";q=4;w=2, "hourly";q=100;w=3600"#),
            "the same names, the new window"
        );
        assert!(after
            .header("ratelimit")
            .unwrap()
            .starts_with(r#""burst";r="#));
    });
}

#[test]
fn numbers_are_written_in_decimal_as_display_writes_them() {
    for n in [
        0,
        1,
        9,
        10,
        99,
        100,
        1_000_000_007,
        u64::from(u32::MAX),
        u64::MAX,
    ] {
        let mut out = String::from("x=");
        super::response::push_decimal(&mut out, n);
        assert_eq!(out, format!("x={n}"));
    }
}
