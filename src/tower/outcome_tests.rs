//! Charging by outcome through the layer: only failed logins count, over a real socket.

use super::tests::{by_actor, client, run, serve, HttpClient};
use super::*;
use crate::gate::{Gate, KeyKind, Limit};
use crate::{BucketConfig, Limiter, ManualClock};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::Full;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Failed logins by the claimed account, `burst` an hour, charged by outcome.
fn login_gate(burst: u32, clock: &ManualClock) -> Arc<Gate<ManualClock>> {
    let config = BucketConfig::new(burst, Duration::from_secs(3_600)).unwrap();
    let limiter = Limiter::builder()
        .build_with_clock([config], clock.clone())
        .unwrap();
    let limit = Limit::new("failed logins", 0)
        .keyed_by(KeyKind::Claim)
        .by_outcome();
    Arc::new(Gate::new().rates(limiter, [limit]).unwrap())
}

/// `POST /login`: 200 with the right password, 401 otherwise.
fn login_app(gate: &Arc<Gate<ManualClock>>) -> Router {
    let layer = AdmitLayer::builder(by_actor())
        .gate(Arc::clone(gate))
        .charge_outcome_when(|status| status == StatusCode::UNAUTHORIZED)
        .build()
        .unwrap();
    let login = |headers: HeaderMap| async move {
        if headers.get("x-password").is_some_and(|p| p == "right") {
            StatusCode::OK
        } else {
            StatusCode::UNAUTHORIZED
        }
    };
    Router::new().route("/login", post(login)).layer(layer)
}

async fn login(client: &HttpClient, addr: SocketAddr, password: &str) -> StatusCode {
    let request = Request::post(format!("http://{addr}/login"))
        .header("x-actor", "alice")
        .header("x-password", password)
        .body(Full::new(Bytes::new()))
        .unwrap();
    client.request(request).await.unwrap().status()
}

fn left(gate: &Gate<ManualClock>) -> u32 {
    let (limiter, _) = gate.limiter().unwrap();
    let now = limiter.clock().now_ns();
    limiter
        .peek_at("alice".as_bytes(), 0, 1, now)
        .unwrap()
        .available()
}

/// Forty logins at once on one account, every third failing: the account's budget ends
/// exactly its failures lower. Successes stay uncharged; no failure is forgiven.
#[test]
fn concurrent_logins_charge_exactly_the_failures() {
    run(async {
        let gate = login_gate(100, &ManualClock::new());
        let addr = serve(login_app(&gate)).await;
        let client = client();
        let attempts = (0..40).map(|i| {
            let client = client.clone();
            let password = if i % 3 == 0 { "wrong" } else { "right" };
            tokio::spawn(async move { login(&client, addr, password).await })
        });
        let mut failed = 0;
        for attempt in attempts.collect::<Vec<_>>() {
            match attempt.await.unwrap() {
                StatusCode::UNAUTHORIZED => failed += 1,
                status => assert_eq!(status, StatusCode::OK),
            }
        }
        assert_eq!(failed, 14);
        assert_eq!(left(&gate), 100 - 14);
    });
}

/// Three failures spend a budget of three: the next attempt is refused before the handler,
/// even with the right password, and a refused attempt charges nothing more.
#[test]
fn a_spent_budget_refuses_the_next_attempt_whatever_it_would_have_been() {
    run(async {
        let gate = login_gate(3, &ManualClock::new());
        let addr = serve(login_app(&gate)).await;
        let client = client();
        for _ in 0..5 {
            assert_eq!(login(&client, addr, "right").await, StatusCode::OK);
        }
        assert_eq!(left(&gate), 3, "successes are free");
        for _ in 0..3 {
            assert_eq!(
                login(&client, addr, "wrong").await,
                StatusCode::UNAUTHORIZED
            );
        }
        assert_eq!(left(&gate), 0);
        assert_eq!(
            login(&client, addr, "right").await,
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(left(&gate), 0);
    });
}

#[test]
fn limits_by_outcome_and_the_outcomes_that_count_come_together() {
    let clock = ManualClock::new();
    let unmatched = AdmitLayer::builder(by_actor())
        .gate(login_gate(3, &clock))
        .build()
        .unwrap_err();
    assert_eq!(
        unmatched,
        AdmitConfigError::OutcomeUnmatched {
            gate_has_limits: true
        }
    );
    assert!(unmatched.to_string().contains("charge_outcome_when"));
    let limiter = Limiter::builder()
        .build_with_clock([BucketConfig::per_second(1).unwrap()], clock)
        .unwrap();
    let unmatched = AdmitLayer::builder(by_actor())
        .gate(Gate::new().rate(limiter, 0))
        .charge_outcome_when(|status| status.is_client_error())
        .build()
        .unwrap_err();
    assert_eq!(
        unmatched,
        AdmitConfigError::OutcomeUnmatched {
            gate_has_limits: false
        }
    );
}
